/* queryMessage's loops: the IndexFile hash-chain walk (formats.index.select_chain_py) and a whole query
 * with every hit re-checked against its record's topic and keys (lookups.Lookups.query_py). */
#include "native.h"
#include "read/read.h"
#include "formats/index.h"
#include "formats/properties.h"
#include <stdlib.h>
#include <string.h>

#define corrupt rs_corrupt

/* ------------------------------------------------------------------ IndexFile chain walk */

/* select_chain(buf, hash_slot_num, begin_timestamp, index_count, index_num, key_hash, max_num, begin, end,
 * out, accept): IndexFile.selectPhyOffset over a mapped file (formats.index.select_chain_py). */
static PyObject *select_chain(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t slot_num, max_num;
    long long begin_ts, index_count, index_num, key_hash, begin, end;
    PyObject *out, *accept = Py_None;
    if (!PyArg_ParseTuple(args, "y*nLLLLnLLO!|O:select_chain", &view, &slot_num, &begin_ts, &index_count,
                          &index_num, &key_hash, &max_num, &begin, &end, &PyList_Type, &out, &accept))
        return NULL;
    PyObject *result = NULL;
    const unsigned char *b = view.buf;
    if (slot_num <= 0) {
        PyErr_SetString(PyExc_ValueError, "select_chain: hash_slot_num must be positive");
        goto done;
    }
    long long count = index_count < index_num - 1 ? index_count : index_num - 1;
    long long slot = key_hash % slot_num;
    if (slot < 0)
        slot += slot_num;   /* Python's modulo */
    Py_ssize_t slot_at = IDX_SLOT_AT((Py_ssize_t)slot);
    if (slot_at + IDX_SLOT > view.len) {
        corrupt(slot_at, "hash slot %lld lies past the index file's %zd bytes", slot, view.len);
        goto done;
    }
    long long n = rs_be32(b + slot_at);
    if (n <= 0 || n > count || index_count <= 1)
        goto ok;
    Py_ssize_t base = IDX_ENTRIES(slot_num);
    long long hops = 0;
    while (PyList_GET_SIZE(out) < max_num && hops < count) {   /* a corrupt chain may loop: never more */
        hops++;
        /* 0 < n <= count < index_num: inside a file of the expected size; checked against this one anyway */
        Py_ssize_t at = base + (Py_ssize_t)n * IDX_ENTRY;
        if (at < base || at + IDX_ENTRY > view.len) {
            corrupt(at, "index entry %lld lies past the index file's %zd bytes", n, view.len);
            goto done;
        }
        int32_t hash_read = rs_be32(b + at + IDX_E_HASH);
        int64_t phy = rs_be64(b + at + IDX_E_PHY);
        int32_t diff = rs_be32(b + at + IDX_E_DIFF), prev = rs_be32(b + at + IDX_E_PREV);
        if (diff < 0)
            break;
        __int128 t = (__int128)begin_ts + (__int128)diff * 1000;
        if (hash_read == key_hash && begin <= t && t <= end) {
            int take = 1;
            PyObject *po = PyLong_FromLongLong(phy);
            if (po == NULL)
                goto done;
            if (accept != Py_None) {
                PyObject *r = PyObject_CallOneArg(accept, po);
                take = r == NULL ? -1 : PyObject_IsTrue(r);
                Py_XDECREF(r);
            }
            if (take < 0 || (take && PyList_Append(out, po) < 0)) {
                Py_DECREF(po);
                goto done;
            }
            Py_DECREF(po);
        }
        if (prev <= 0 || prev > count || prev == n || t < begin)
            break;
        n = prev;
    }
ok:
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------ a query with its key re-check */
/* Does the piece of a property value equal `key` (as its "replace" decoding would)? 1, 0, -1 with an error. */
static int piece_is(const unsigned char *p, Py_ssize_t n, PyObject *key) {
    if (PyUnicode_IS_ASCII(key))   /* a "replace" decoding equals an ASCII str iff the bytes do */
        return PyUnicode_GET_LENGTH(key) == n && memcmp(PyUnicode_DATA(key), p, (size_t)n) == 0;
    PyObject *v = PyUnicode_DecodeUTF8((const char *)p, n, "replace");
    if (v == NULL)
        return -1;
    int same = PyUnicode_Compare(v, key) == 0;
    Py_DECREF(v);
    return PyErr_Occurred() ? -1 : same;
}

/* m.unique_key == key or key in m.keys, over the raw properties (parse_properties: pairs split on \x02 and the
 * first \x01, empty names and values dropped, the last of a name wins; keys: KEYS split on spaces, empty
 * tokens dropped). 1, 0 or -1 with an error. */
static int props_name_key(const unsigned char *p, Py_ssize_t n, PyObject *key) {
    const unsigned char *uniq = NULL, *keys = NULL;
    Py_ssize_t uniq_len = 0, keys_len = 0;
    Py_ssize_t at = 0;
    rs_prop it;
    while (rs_prop_next(p, n, &at, &it)) {
        if (!rs_prop_kept(&it))
            continue;
        if (rs_prop_named(&it, "UNIQ_KEY", 8)) {
            uniq = it.value;
            uniq_len = it.value_len;
        } else if (rs_prop_named(&it, "KEYS", 4)) {
            keys = it.value;
            keys_len = it.value_len;
        }
    }
    if (uniq != NULL) {
        int same = piece_is(uniq, uniq_len, key);
        if (same != 0)
            return same;
    }
    if (keys != NULL) {   /* a space never lies inside a UTF-8 sequence, nor does "replace" swallow one */
        const unsigned char *k = keys, *kend = keys + keys_len;
        while (k < kend) {
            const unsigned char *sp = memchr(k, ' ', (size_t)(kend - k));
            if (sp == NULL)
                sp = kend;
            if (sp > k) {
                int same = piece_is(k, sp - k, key);
                if (same != 0)
                    return same;
            }
            k = sp + 1;
        }
    }
    return 0;
}

/* What lookups.Lookups.query_py's accept makes of an index hit at `phy`: 1 with *msg set (a new reference) when
 * its record is of `topic` and carries `key`; 1 with *msg NULL when no record of that offset can be read (look()
 * finds none, or another's: a deleted file; counted, then dropped); 0 when it is another topic's or key's
 * record; -1 with an error. `seg` caches the CommitLog file in hand. */
static int hit_check(PyObject *cl_files, long long cl_fs, long long phy, PyObject *topic, PyObject *key, rs_mapped *seg,
                     PyObject **msg) {
    *msg = NULL;
    if (!(seg->held && seg->from <= phy && phy < seg->from + cl_fs)) {
        int r = rs_find_mapped(cl_files, cl_fs, phy, seg);
        if (r < 0)
            return -1;
        if (r == 0 && phy == 0 && PyList_Check(cl_files) && PyList_GET_SIZE(cl_files) > 0) {
            /* files.find(0, True): the first file (its first record is not at 0: "gone" below) */
            long long first;
            if (rs_attr_ll(PyList_GET_ITEM(cl_files, 0), rs_S_from, &first) < 0)
                return -1;
            if ((r = rs_find_mapped(cl_files, cl_fs, first, seg)) < 0)
                return -1;
        }
        if (r == 0)
            return 1;
    }
    long long pos = phy >= 0 ? phy % cl_fs : -1;
    long long limit = seg->readpos < seg->view.len ? seg->readpos : seg->view.len;
    if (pos < 0 || pos + 4 > limit)
        return 1;
    const unsigned char *buf = seg->view.buf;
    long long size = rs_be32(buf + pos + REC_TOTALSIZE);
    if (size <= 0 || pos + size > limit)
        return 1;
    rs_record ri;
    if (rs_check_record(buf, seg->view.len, (Py_ssize_t)pos, (Py_ssize_t)(pos + size), &ri) < 0) {
        if (!PyErr_ExceptionMatches(rs_CorruptDataError))
            return -1;
        PyErr_Clear();
        return 1;
    }
    const unsigned char *rec = buf + pos;
    if (rs_be64(rec + REC_PHYSICALOFFSET) != phy)
        return 1;
    int same;
    if (PyUnicode_IS_ASCII(topic)) {
        same = PyUnicode_GET_LENGTH(topic) == ri.topic_len
               && memcmp(PyUnicode_DATA(topic), rec + ri.topic_pos, (size_t)ri.topic_len) == 0;
    } else {
        PyObject *t = rs_cached_str(rec + ri.topic_pos, ri.topic_len);
        if (t == NULL)
            return -1;
        same = PyUnicode_Compare(t, topic) == 0;
        Py_DECREF(t);
        if (PyErr_Occurred())
            return -1;
    }
    if (!same)
        return 0;
    same = props_name_key(rec + ri.props_pos, ri.props_len, key);
    if (same <= 0)
        return same;
    *msg = rs_lazy_message(rec, ri.size);
    return *msg == NULL ? -1 : 1;
}

typedef struct {
    long long phy;
    PyObject *msg;   /* NULL: counted, not answered */
} hit;

static int hit_order(const void *a, const void *b) {
    long long x = ((const hit *)a)->phy, y = ((const hit *)b)->phy;
    return (x > y) - (x < y);
}

static PyObject *S_header, *S_mf, *S_begin_ts, *S_end_ts, *S_count, *S_end_phy, *S_slots, *S_index_num;

/* A message.QueryResult without a Python frame: the list part, then the two attributes __init__ sets. */
static PyObject *S_last_ts, *S_last_phy;

static PyObject *query_result(PyTypeObject *type, PyObject *msgs, long long last_ts, long long last_phy) {
    PyObject *r = type->tp_alloc(type, 0);
    if (r == NULL)
        return NULL;
    PyObject *ts = NULL, *phy = NULL;
    if (PyList_SetSlice(r, 0, 0, msgs) < 0 || (ts = PyLong_FromLongLong(last_ts)) == NULL
            || (phy = PyLong_FromLongLong(last_phy)) == NULL || PyObject_SetAttr(r, S_last_ts, ts) < 0
            || PyObject_SetAttr(r, S_last_phy, phy) < 0)
        Py_CLEAR(r);
    Py_XDECREF(ts);
    Py_XDECREF(phy);
    return r;
}

/* query_index(result_type, files, max_num, begin, end, cl_files, cl_file_size, topic, key) -> QueryResult
 * (result_type: message.QueryResult; its index_last_update_* the newest file's end time and offset when any
 * hit was counted, else 0)
 * IndexService.query_offsets with lookups.Lookups.query_py's re-check of every hit, in one call: the index
 * files (IndexFile objects, oldest first) newest first, each one's chain walked as formats.index.select_chain
 * does, stopping once a file begins before `begin` or max_num hits are counted. The caller holds the index's
 * lock. */
static PyObject *query_index(PyObject *self, PyObject *args) {
    PyObject *rtype, *files, *cl_files, *topic, *key;
    long long max_num, begin, end, cl_fs;
    if (!PyArg_ParseTuple(args, "O!O!LLLOLUU:query_index", &PyType_Type, &rtype, &PyList_Type, &files, &max_num,
                          &begin, &end, &cl_files, &cl_fs, &topic, &key))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)rtype, &PyList_Type)) {
        PyErr_SetString(PyExc_TypeError, "query_index: the result type must be a list subclass");
        return NULL;
    }
    long long key_hash = rs_index_key_hash(topic, key);
    if (rs_message_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "query_index: set_message_type was not called");
        return NULL;
    }
    PyObject *result = NULL, *out = NULL;
    rs_mapped seg = {0};
    hit *hits = NULL;
    Py_ssize_t nhits = 0;
    long long last_ts = 0, last_phy = 0;
    Py_ssize_t nfiles = PyList_GET_SIZE(files);
    if (nfiles == 0)
        goto answer;
    if (max_num > 0 && (hits = PyMem_Calloc((size_t)max_num < 4096 ? (size_t)max_num : 4096, sizeof(hit))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    long long cap_hits = max_num < 4096 ? max_num : 4096;
    for (Py_ssize_t fi = nfiles - 1; fi >= 0; fi--) {
        PyObject *f = PyList_GET_ITEM(files, fi);
        Py_INCREF(f);
        PyObject *h = PyObject_GetAttr(f, S_header), *mf = NULL, *buf = NULL;
        long long b = 0, e = 0, count_in = 0, slot_num = 0, index_num = 0;
        int bad = h == NULL || rs_attr_ll(h, S_begin_ts, &b) < 0 || rs_attr_ll(h, S_end_ts, &e) < 0
                  || rs_attr_ll(h, S_count, &count_in) < 0 || rs_attr_ll(f, S_slots, &slot_num) < 0
                  || rs_attr_ll(f, S_index_num, &index_num) < 0;
        if (!bad && fi == nfiles - 1) {
            last_ts = e;
            bad = rs_attr_ll(h, S_end_phy, &last_phy) < 0;
        }
        int matched = (begin < b && end > e) || (b <= begin && begin <= e) || (b <= end && end <= e);
        Py_buffer view;
        int have_view = 0;
        if (!bad && matched) {
            bad = (mf = PyObject_GetAttr(f, S_mf)) == NULL || (buf = PyObject_GetAttr(mf, rs_S_buf)) == NULL
                  || PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE) < 0;
            have_view = !bad;
        }
        Py_XDECREF(h);
        Py_XDECREF(mf);
        Py_XDECREF(buf);
        Py_DECREF(f);
        if (bad)
            goto done;
        if (have_view) {   /* formats.index.select_chain */
            const unsigned char *ib = view.buf;
            int walk = 1;
            if (slot_num <= 0) {
                PyErr_SetString(PyExc_ValueError, "select_chain: hash_slot_num must be positive");
                walk = -1;
            }
            long long count = count_in < index_num - 1 ? count_in : index_num - 1;
            long long slot = walk > 0 ? key_hash % slot_num : 0;
            if (slot < 0)
                slot += slot_num;
            Py_ssize_t slot_at = IDX_SLOT_AT((Py_ssize_t)slot);
            if (walk > 0 && slot_at + IDX_SLOT > view.len) {
                corrupt(slot_at, "hash slot %lld lies past the index file's %zd bytes", slot, view.len);
                walk = -1;
            }
            long long n = walk > 0 ? rs_be32(ib + slot_at) : 0;
            if (walk > 0 && (n <= 0 || n > count || count_in <= 1))
                walk = 0;
            Py_ssize_t base = IDX_ENTRIES(slot_num);
            long long hops = 0;
            while (walk > 0 && nhits < max_num && hops < count) {
                hops++;
                Py_ssize_t at = base + (Py_ssize_t)n * IDX_ENTRY;
                if (at < base || at + IDX_ENTRY > view.len) {
                    corrupt(at, "index entry %lld lies past the index file's %zd bytes", n, view.len);
                    walk = -1;
                    break;
                }
                int32_t hash_read = rs_be32(ib + at + IDX_E_HASH);
                int64_t phy = rs_be64(ib + at + IDX_E_PHY);
                int32_t diff = rs_be32(ib + at + IDX_E_DIFF), prev = rs_be32(ib + at + IDX_E_PREV);
                if (diff < 0)
                    break;
                __int128 t = (__int128)b + (__int128)diff * 1000;
                if (hash_read == key_hash && begin <= t && t <= end) {
                    PyObject *m = NULL;
                    int take = 1;
                    Py_ssize_t seen = 0;   /* an offset answered before: its message again (one per offset) */
                    while (seen < nhits && !(hits[seen].phy == phy && hits[seen].msg != NULL))
                        seen++;
                    if (seen < nhits) {
                        m = hits[seen].msg;
                        Py_INCREF(m);
                    } else {
                        take = hit_check(cl_files, cl_fs, phy, topic, key, &seg, &m);
                    }
                    if (take < 0) {
                        walk = -1;
                        break;
                    }
                    if (take) {
                        if (nhits == cap_hits) {
                            long long more = cap_hits * 2 < max_num ? cap_hits * 2 : max_num;
                            hit *bigger = PyMem_Realloc(hits, (size_t)more * sizeof(hit));
                            if (bigger == NULL) {
                                Py_XDECREF(m);
                                PyErr_NoMemory();
                                walk = -1;
                                break;
                            }
                            hits = bigger;
                            cap_hits = more;
                        }
                        hits[nhits].phy = phy;
                        hits[nhits].msg = m;
                        nhits++;
                    }
                }
                if (prev <= 0 || prev > count || prev == n || t < begin)
                    break;
                n = prev;
            }
            PyBuffer_Release(&view);
            if (walk < 0)
                goto done;
        }
        if (b < begin || nhits >= max_num)
            break;
    }
answer:
    qsort(hits, (size_t)nhits, sizeof(hit), hit_order);
    if ((out = PyList_New(0)) == NULL)
        goto done;
    for (Py_ssize_t k = 0; k < nhits; k++)
        if (hits[k].msg != NULL && PyList_Append(out, hits[k].msg) < 0)
            goto done;
    /* RocketMQ reports how far the index got only along with a hit */
    result = nhits ? query_result((PyTypeObject *)rtype, out, last_ts, last_phy)
                   : query_result((PyTypeObject *)rtype, out, 0, 0);
done:
    for (Py_ssize_t k = 0; k < nhits; k++)
        Py_XDECREF(hits[k].msg);
    PyMem_Free(hits);
    Py_XDECREF(out);
    rs_mapped_release(&seg);
    return result;
}

int rs_query_init(void) {
    S_header = PyUnicode_InternFromString("header");
    S_last_ts = PyUnicode_InternFromString("index_last_update_timestamp");
    S_last_phy = PyUnicode_InternFromString("index_last_update_phy_offset");
    S_mf = PyUnicode_InternFromString("mf");
    S_begin_ts = PyUnicode_InternFromString("begin_timestamp");
    S_end_ts = PyUnicode_InternFromString("end_timestamp");
    S_count = PyUnicode_InternFromString("index_count");
    S_end_phy = PyUnicode_InternFromString("end_phy_offset");
    S_slots = PyUnicode_InternFromString("hash_slot_num");
    S_index_num = PyUnicode_InternFromString("index_num");
    return (S_header && S_last_ts && S_last_phy && S_mf && S_begin_ts && S_end_ts && S_count && S_end_phy && S_slots
            && S_index_num) ? 0 : -1;
}

PyMethodDef rs_query_methods[] = {
    {"query_index", query_index, METH_VARARGS,
     "queryMessage with every hit re-checked (lookups.Lookups.query_py is the reference)."},
    {"select_chain", select_chain, METH_VARARGS,
     "IndexFile.selectPhyOffset's chain walk (formats.index.select_chain_py is the reference)."},
    {NULL, NULL, 0, NULL},
};
