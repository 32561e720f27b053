/* The index build's loops (see native.h): the index keys of a run of dispatched records with their hashes
 * (index_keys from IndexService's queued records, index_columns from the bulk decoder's columns), and the
 * placement of a run of entries into a mapped IndexFile (index_place).
 *
 * The pure Python modules are the reference (services/dispatch_rows.index_entries, formats/index.key_hashes,
 * log/index_file.IndexFile.put_entries_py); tests/native/test_index_native.py holds both to the same answers
 * and the same file bytes. A record these functions do not take the way the reference does (an unusual
 * type) makes the key functions answer None: the caller runs the reference. */
#include "native.h"
#include "formats/index.h"
#include "formats/record.h"
#include <string.h>

/* ---------------------------------------------------------------- index keys */
static inline uint32_t hash_more(uint32_t h, PyObject *s, Py_ssize_t from, Py_ssize_t to) {
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    if (kind == PyUnicode_1BYTE_KIND) {
        /* four units a step (31^4 h + 31^3 a + 31^2 b + 31 c + d, all mod 2^32): a shorter chain of multiplies */
        const Py_UCS1 *p = data;
        Py_ssize_t i = from;
        for (; i + 4 <= to; i += 4)
            h = 923521u * h + 29791u * p[i] + 961u * p[i + 1] + 31u * p[i + 2] + p[i + 3];
        for (; i < to; i++)
            h = 31u * h + p[i];
    } else if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *p = data;
        for (Py_ssize_t i = from; i < to; i++)
            h = 31u * h + p[i];
    } else {
        const Py_UCS4 *p = data;
        for (Py_ssize_t i = from; i < to; i++) {
            Py_UCS4 c = p[i];
            if (c > 0xFFFF) {
                c -= 0x10000;
                h = 31u * h + (0xD800u + (c >> 10));
                h = 31u * h + (0xDC00u + (c & 0x3FF));
            } else {
                h = 31u * h + c;
            }
        }
    }
    return h;
}

/* IndexFile's key hash: |hashCode|, Integer.MIN_VALUE -> 0. */
static inline int32_t key_hash_of(uint32_t h) {
    int32_t s = (int32_t)h;
    return s == INT32_MIN ? 0 : (s < 0 ? -s : s);
}

/* IndexFile's hash of the key "topic#key" (formats.javahash.index_key_hash), for a query. */
int32_t rs_index_key_hash(PyObject *topic, PyObject *key) {
    uint32_t h = 31u * hash_more(0, topic, 0, PyUnicode_GET_LENGTH(topic)) + '#';
    return key_hash_of(hash_more(h, key, 0, PyUnicode_GET_LENGTH(key)));
}

/* The entries of a run being made: three growing arrays (int32 hashes, int64 offsets, int64 times). */
typedef struct {
    int32_t *hash;
    int64_t *phy, *ts;
    Py_ssize_t len, cap;
    Py_ssize_t last_owner;     /* the last record that gave a key (-1: none) */
    long long end;             /* records below it are indexed already */
    PyObject *last_topic;      /* borrowed: the topic topic_h is the hash of "topic#" for */
    uint32_t topic_h;
} keyrun;

static int keyrun_push(keyrun *r, int32_t h, int64_t phy, int64_t ts) {
    if (r->len == r->cap) {
        Py_ssize_t cap = r->cap ? r->cap * 2 : 4096;
        int32_t *hh = PyMem_Realloc(r->hash, cap * sizeof(int32_t));
        if (hh == NULL)
            goto nomem;
        r->hash = hh;
        int64_t *pp = PyMem_Realloc(r->phy, cap * sizeof(int64_t));
        if (pp == NULL)
            goto nomem;
        r->phy = pp;
        int64_t *tt = PyMem_Realloc(r->ts, cap * sizeof(int64_t));
        if (tt == NULL)
            goto nomem;
        r->ts = tt;
        r->cap = cap;
    }
    r->hash[r->len] = h;
    r->phy[r->len] = phy;
    r->ts[r->len] = ts;
    r->len++;
    return 0;
nomem:
    PyErr_NoMemory();
    return -1;
}

static void keyrun_free(keyrun *r) {
    PyMem_Free(r->hash);
    PyMem_Free(r->phy);
    PyMem_Free(r->ts);
}

/* One record's keys (formats.index.record_keys: topic#UNIQ_KEY, then topic#token per non-empty
 * space-separated KEYS token) unless it is below `end` or rolled back. 0 done, 1 not of the types the
 * reference takes here (the caller falls back), -1 error. */
static int record_keys(keyrun *r, Py_ssize_t i, PyObject *topic, PyObject *phy_o, PyObject *ts_o, PyObject *flag_o,
                       PyObject *uniq, PyObject *keys) {
    if (!PyUnicode_CheckExact(topic) || !PyLong_CheckExact(phy_o) || !PyLong_CheckExact(ts_o)
            || !PyLong_CheckExact(flag_o) || (uniq != Py_None && !PyUnicode_CheckExact(uniq))
            || !PyUnicode_CheckExact(keys))
        return 1;
    long long phy = PyLong_AsLongLong(phy_o);
    long long ts = PyLong_AsLongLong(ts_o);
    long long flag = PyLong_AsLongLong(flag_o);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 1;
    }
    if (phy < r->end || (flag & TRANSACTION_TYPE_MASK) == TRANSACTION_ROLLBACK_TYPE)
        return 0;
    Py_ssize_t kl = PyUnicode_GET_LENGTH(keys);
    if (uniq == Py_None && kl == 0)
        return 0;
    if (topic != r->last_topic) {
        r->topic_h = 31u * hash_more(0, topic, 0, PyUnicode_GET_LENGTH(topic)) + '#';
        r->last_topic = topic;
    }
    Py_ssize_t before = r->len;
    if (uniq != Py_None
            && keyrun_push(r, key_hash_of(hash_more(r->topic_h, uniq, 0, PyUnicode_GET_LENGTH(uniq))), phy, ts) < 0)
        return -1;
    if (kl > 0) {
        int kind = PyUnicode_KIND(keys);
        const void *data = PyUnicode_DATA(keys);
        Py_ssize_t start = 0;
        for (Py_ssize_t j = 0; j <= kl; j++) {
            if (j == kl || PyUnicode_READ(kind, data, j) == ' ') {
                if (j > start && keyrun_push(r, key_hash_of(hash_more(r->topic_h, keys, start, j)), phy, ts) < 0)
                    return -1;
                start = j + 1;
            }
        }
    }
    if (r->len > before) {
        r->last_owner = i;
        r->end = phy;
    }
    return 0;
}

static PyObject *keyrun_result(keyrun *r) {
    return Py_BuildValue("(y#y#y#n)", r->hash ? (char *)r->hash : "", r->len * (Py_ssize_t)sizeof(int32_t),
                         r->phy ? (char *)r->phy : "", r->len * (Py_ssize_t)sizeof(int64_t),
                         r->ts ? (char *)r->ts : "", r->len * (Py_ssize_t)sizeof(int64_t), r->last_owner);
}

/* index_keys(records, end) -> (hashes, phys, stamps, last_owner) | None: what IndexService._build takes
 * from its queued records (topic, phy, store_ts, sys_flag, uniq_key, keys): every record at or past `end`
 * and not rolled back gives topic#UNIQ_KEY, then topic#token per non-empty space-separated KEYS token
 * (formats.index.record_keys), each with its key hash (formats.index.key_hashes) and the record's offset
 * and time (native int32 / int64 / int64 bytes); last_owner: the last record that gave a key (-1 none).
 * None when a record is not of those types (the caller runs the Python loop). */
static PyObject *index_keys(PyObject *self, PyObject *args) {
    PyObject *records;
    long long end;
    if (!PyArg_ParseTuple(args, "O!L:index_keys", &PyList_Type, &records, &end))
        return NULL;
    keyrun r = {.last_owner = -1, .end = end};
    PyObject *result = NULL;
    Py_ssize_t n = PyList_GET_SIZE(records);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(records, i);
        if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != 6)
            goto fallback;
        int got = record_keys(&r, i, PyTuple_GET_ITEM(t, 0), PyTuple_GET_ITEM(t, 1), PyTuple_GET_ITEM(t, 2),
                              PyTuple_GET_ITEM(t, 3), PyTuple_GET_ITEM(t, 4), PyTuple_GET_ITEM(t, 5));
        if (got < 0)
            goto done;
        if (got > 0)
            goto fallback;
    }
    result = keyrun_result(&r);
    goto done;
fallback:
    result = Py_NewRef(Py_None);
done:
    keyrun_free(&r);
    return result;
}

/* index_columns(topics, phys, stamps, sys_flags, uniqs, keys, end) -> as index_keys: the same over a run's
 * columns (DispatchColumns' lists), without making a tuple per record. None also when the columns are not
 * all of one length. */
static PyObject *index_columns(PyObject *self, PyObject *args) {
    PyObject *cols[6];
    long long end;
    if (!PyArg_ParseTuple(args, "OOOOOOL:index_columns", &cols[0], &cols[1], &cols[2], &cols[3], &cols[4], &cols[5],
                          &end))
        return NULL;
    PyObject *fast[6] = {NULL};
    PyObject **item[6];
    keyrun r = {.last_owner = -1, .end = end};
    PyObject *result = NULL;
    Py_ssize_t n = 0;
    for (int c = 0; c < 6; c++) {
        fast[c] = PySequence_Fast(cols[c], "index_columns: a column is not a sequence");
        if (fast[c] == NULL)
            goto done;
        item[c] = PySequence_Fast_ITEMS(fast[c]);
        if (c == 0)
            n = PySequence_Fast_GET_SIZE(fast[c]);
        else if (PySequence_Fast_GET_SIZE(fast[c]) != n)
            goto fallback;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int got = record_keys(&r, i, item[0][i], item[1][i], item[2][i], item[3][i], item[4][i], item[5][i]);
        if (got < 0)
            goto done;
        if (got > 0)
            goto fallback;
    }
    result = keyrun_result(&r);
    goto done;
fallback:
    result = Py_NewRef(Py_None);
done:
    for (int c = 0; c < 6; c++)
        Py_XDECREF(fast[c]);
    keyrun_free(&r);
    return result;
}

/* ---------------------------------------------------------------- placing entries */
#define INT32_MAX_L 0x7FFFFFFFLL

/* formats.index.time_diff: seconds since begin, truncated toward zero, clamped to [0, Integer.MAX_VALUE];
 * 0 without a begin. Exact (no wrap), as the reference computes it for a file's first entry. */
static inline int32_t time_diff_exact(int64_t ts, int64_t begin) {
    if (begin <= 0 || ts < begin)
        return 0;
    uint64_t d = ((uint64_t)ts - (uint64_t)begin) / 1000u;
    return d > (uint64_t)INT32_MAX_L ? (int32_t)INT32_MAX_L : (int32_t)d;
}

/* formats.index.time_diffs: the same over int64 arithmetic (numpy's: the difference wraps). */
static inline int32_t time_diff_wrap(int64_t ts, int64_t begin) {
    if (begin <= 0)
        return 0;
    int64_t d = (int64_t)((uint64_t)ts - (uint64_t)begin);
    if (d < 0)
        return 0;
    d /= 1000;
    return d > INT32_MAX_L ? (int32_t)INT32_MAX_L : (int32_t)d;
}

/* index_place(buf, hash_slot_num, index_num, begin_ts, end_ts, begin_phy, end_phy, hash_slot_count,
 *             index_count, hashes, phys, stamps)
 *   -> (placed, begin_ts, end_ts, begin_phy, end_phy, hash_slot_count, index_count)
 * IndexFile.putKey for each entry of a run in turn (hashes: native int32, phys and stamps: native int64),
 * writing straight into the mapped file `buf` as long as it has room (IndexFile.put_entries_py is the
 * reference): the entry at the next number with the slot's previous head as its prevIndexNo (a head outside
 * (0, count] counts as empty and the slot count grows), the slot pointing at it, and the header's 40 bytes
 * as the counters and times then stand (returned too, for the file's header object). */
static PyObject *index_place(PyObject *self, PyObject *args) {
    Py_buffer buf, hv, pv, tv;
    Py_ssize_t slot_num, index_num;
    long long begin_ts, end_ts, begin_phy, end_phy, slot_count, count;
    if (!PyArg_ParseTuple(args, "w*nnLLLLLLy*y*y*:index_place", &buf, &slot_num, &index_num, &begin_ts, &end_ts,
                          &begin_phy, &end_phy, &slot_count, &count, &hv, &pv, &tv))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = hv.len / (Py_ssize_t)sizeof(int32_t);
    if (hv.len % (Py_ssize_t)sizeof(int32_t) || pv.len != n * (Py_ssize_t)sizeof(int64_t)
            || tv.len != n * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "index_place: one offset and one time per hash");
        goto done;
    }
    if (slot_num <= 0 || index_num <= 1 || slot_num > (PY_SSIZE_T_MAX - IDX_HEADER) / IDX_SLOT
            || index_num > (PY_SSIZE_T_MAX - IDX_HEADER - slot_num * IDX_SLOT) / IDX_ENTRY
            || buf.len < IDX_ENTRIES(slot_num) + index_num * IDX_ENTRY) {
        PyErr_SetString(PyExc_ValueError, "index_place: the buffer does not hold an index file of these sizes");
        goto done;
    }
    if (count < 1) {
        PyErr_SetString(PyExc_ValueError, "index_place: an index count below 1");
        goto done;
    }
    Py_ssize_t k = count < index_num ? index_num - (Py_ssize_t)count : 0;
    if (k > n)
        k = n;
    if (k > 0) {
        unsigned char *b = buf.buf, *slots = b + IDX_SLOT_AT(0), *entries = b + IDX_ENTRIES(slot_num);
        const int32_t *hashes = hv.buf;
        const int64_t *phys = pv.buf, *stamps = tv.buf;
        long long new_slots = 0;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t j = 0; j < k; j++) {
            int64_t cur = count + j, ts = stamps[j];
            int32_t diff;
            if (j == 0 && count <= 1) {
                /* the first entry is measured against the inherited begin time; then begin moves to it */
                diff = time_diff_exact(ts, begin_ts);
                begin_phy = phys[0];
                begin_ts = ts;
            } else {
                diff = time_diff_wrap(ts, begin_ts);
            }
            int64_t s = (int64_t)hashes[j] % slot_num;
            if (s < 0)
                s += slot_num;
            unsigned char *sp = slots + s * IDX_SLOT;
            int64_t old = rs_be32(sp);
            if (old <= 0 || old > cur) {
                old = 0;
                new_slots++;
            }
            unsigned char *e = entries + cur * IDX_ENTRY;
            rs_put32(e + IDX_E_HASH, (uint32_t)hashes[j]);
            rs_put64(e + IDX_E_PHY, (uint64_t)phys[j]);
            rs_put32(e + IDX_E_DIFF, (uint32_t)diff);
            rs_put32(e + IDX_E_PREV, (uint32_t)old);
            rs_put32(sp, (uint32_t)cur);
        }
        Py_END_ALLOW_THREADS
        slot_count += new_slots;
        count += k;
        end_phy = phys[k - 1];
        end_ts = stamps[k - 1];
        if (slot_count > INT32_MAX_L || slot_count < -INT32_MAX_L - 1) {
            PyErr_SetString(PyExc_OverflowError, "index_place: the hash slot count leaves the int range");
            goto done;
        }
        rs_put64(b + IDX_BEGIN_TS, (uint64_t)begin_ts);
        rs_put64(b + IDX_END_TS, (uint64_t)end_ts);
        rs_put64(b + IDX_BEGIN_PHY, (uint64_t)begin_phy);
        rs_put64(b + IDX_END_PHY, (uint64_t)end_phy);
        rs_put32(b + IDX_SLOT_COUNT, (uint32_t)slot_count);
        rs_put32(b + IDX_COUNT, (uint32_t)count);
    }
    result = Py_BuildValue("(nLLLLLL)", k, begin_ts, end_ts, begin_phy, end_phy, slot_count, count);
done:
    PyBuffer_Release(&buf);
    PyBuffer_Release(&hv);
    PyBuffer_Release(&pv);
    PyBuffer_Release(&tv);
    return result;
}

PyMethodDef rs_index_methods[] = {
    {"index_keys", index_keys, METH_VARARGS,
     "index_keys(records, end) -> (hashes, phys, stamps, last_owner) | None: IndexService._build's keys."},
    {"index_columns", index_columns, METH_VARARGS,
     "index_columns(topics, phys, stamps, sys_flags, uniqs, keys, end) -> as index_keys, over a run's columns."},
    {"index_place", index_place, METH_VARARGS,
     "index_place(buf, slots, entries, header..., hashes, phys, stamps) -> (placed, header...): putKey over a run."},
    {NULL, NULL, 0, NULL},
};
