/* The read path's loops (see native.h): one record into a StoredMessage (formats.record.decode_record_py is
 * the reference) and the IndexFile hash-chain walk of a query (formats.index.select_chain_py). */
#include "native.h"
#include "formats/cq_unit.h"
#include "formats/index.h"
#include "formats/properties.h"
#include "formats/record.h"
#include <limits.h>
#include <string.h>

#define corrupt rs_corrupt

/* ------------------------------------------------------------------ decode_record */
static PyTypeObject *message_type = NULL;
static const char *const MSG_SLOTS[] = {"_f", "body", "topic", "_props_raw", "_props", "_r"};
#define NMSG 5   /* the slots an eager decode fills; the sixth, _r, is a lazy message's record */
static Py_ssize_t msg_offsets[NMSG];
static Py_ssize_t lazy_offsets[2];   /* _r, _props */

/* set_message_type(StoredMessage): the class decode_record builds (its __slots__ are filled directly). */
static PyObject *set_message_type(PyObject *self, PyObject *type) {
    Py_ssize_t offs[NMSG + 1];
    if (rs_slot_offsets(type, MSG_SLOTS, NMSG + 1, offs) < 0)
        return NULL;
    memcpy(msg_offsets, offs, sizeof msg_offsets);
    lazy_offsets[0] = offs[5];
    lazy_offsets[1] = offs[4];
    Py_INCREF(type);
    Py_XSETREF(message_type, (PyTypeObject *)type);
    Py_RETURN_NONE;
}

/* The hosts' bytes repeat from record to record: the last of each kind is kept and shared (bytes are
 * immutable). GIL held. */
static PyObject *last_host[2];

static PyObject *host_bytes(int which, const unsigned char *p, Py_ssize_t n) {
    PyObject *h = last_host[which];
    if (h != NULL && PyBytes_GET_SIZE(h) == n && memcmp(PyBytes_AS_STRING(h), p, (size_t)n) == 0) {
        Py_INCREF(h);
        return h;
    }
    h = PyBytes_FromStringAndSize((const char *)p, n);
    if (h == NULL)
        return NULL;
    Py_INCREF(h);
    Py_XSETREF(last_host[which], h);
    return h;
}

/* The checks of formats.record.decode_record_py on the record at buf[pos:end] (end bounded by buflen too):
 * 0 and *ri filled, or -1 with the same CorruptDataError. */
static int check_record(const unsigned char *buf, Py_ssize_t buflen, Py_ssize_t pos, Py_ssize_t end, rs_record *ri) {
    if (pos < 0) {
        corrupt(pos, "record position %zd is before the buffer", pos);
        return -1;
    }
    Py_ssize_t avail = end - pos;   /* negative past the buffer's end: "truncated", as the pure decoder says */
    if (avail >= REC_MIN_SIZE && buflen - pos < REC_MIN_SIZE)
        avail = buflen - pos;       /* an `end` past the buffer: what the buffer holds is the bound */
    if (avail < REC_MIN_SIZE) {
        corrupt(pos, "truncated record: %zd bytes left, a record needs at least %d", avail, REC_MIN_SIZE);
        return -1;
    }
    const unsigned char *rec = buf + pos;
    int32_t size = rs_be32(rec + REC_TOTALSIZE), magic = rs_be32(rec + REC_MAGIC);
    if (magic != MAGIC_V1 && magic != MAGIC_V2) {
        corrupt(pos, "bad magic code 0x%08X", (unsigned)magic);
        return -1;
    }
    if (size < REC_MIN_SIZE || (Py_ssize_t)size > avail) {
        corrupt(pos, "record size %d does not fit the %zd bytes left", (int)size, avail);
        return -1;
    }
    if ((Py_ssize_t)size > buflen - pos) {   /* an `end` past the buffer: what the buffer holds is the bound */
        corrupt(pos, "record size %d does not fit the %zd bytes left", (int)size, buflen - pos);
        return -1;
    }
    switch (rs_record_layout(rec, size, ri)) {
    case REC_OK:
        return 0;
    case REC_BAD_HOSTS:
        corrupt(pos, "record size %d too small for its host fields", (int)size);
        return -1;
    case REC_BAD_BODY:
        corrupt(pos, "body length %d overruns the record of %d bytes", (int)ri->body_len, (int)size);
        return -1;
    case REC_BAD_TOPIC:
        corrupt(pos, "topic length %zd overruns the record of %d bytes", ri->topic_len, (int)size);
        return -1;
    default:
        corrupt(pos, "record size %d does not match its fields (%zd bytes)", (int)size,
                ri->props_pos + ri->props_len);
        return -1;
    }
}

/* A StoredMessage with every slot filled from a record check_record accepted. */
static PyObject *build_message(const unsigned char *rec, const rs_record *ri, int with_body) {
    Py_ssize_t bl = ri->born_len, sl = ri->store_len;
    PyObject *f = PyTuple_New(15);
    if (f == NULL)
        return NULL;
    PyObject *items[15] = {
        PyLong_FromSsize_t(ri->size), PyLong_FromLong(ri->magic), PyLong_FromLong(rs_be32(rec + REC_BODYCRC)),
        PyLong_FromLong(rs_be32(rec + REC_QUEUEID)), PyLong_FromLong(rs_be32(rec + REC_FLAG)),
        PyLong_FromLongLong(rs_be64(rec + REC_QUEUEOFFSET)), PyLong_FromLongLong(rs_be64(rec + REC_PHYSICALOFFSET)),
        PyLong_FromLong(ri->sysflag), PyLong_FromLongLong(rs_be64(rec + REC_BORN_TS)),
        host_bytes(0, rec + REC_BORNHOST, bl), PyLong_FromLongLong(rs_be64(rec + REC_STORE_TS(bl))),
        host_bytes(1, rec + REC_STOREHOST(bl), sl), PyLong_FromLong(rs_be32(rec + REC_RECONSUME(bl, sl))),
        PyLong_FromLongLong(rs_be64(rec + REC_PREPARED_TX(bl, sl))), PyLong_FromLong(ri->body_len)};
    int bad = 0;
    for (int k = 0; k < 15; k++) {
        if (items[k] == NULL)
            bad = 1;
        else
            PyTuple_SET_ITEM(f, k, items[k]);
    }
    if (bad) {
        Py_DECREF(f);
        return NULL;
    }
    PyObject *vals[NMSG];
    vals[0] = f;
    if (with_body) {
        vals[1] = PyBytes_FromStringAndSize((const char *)rec + ri->body_pos, ri->body_len);
    } else {
        vals[1] = Py_None;
        Py_INCREF(Py_None);
    }
    vals[2] = rs_cached_str(rec + ri->topic_pos, ri->topic_len);
    vals[3] = PyBytes_FromStringAndSize((const char *)rec + ri->props_pos, ri->props_len);
    vals[4] = Py_None;
    Py_INCREF(Py_None);
    if (vals[1] == NULL || vals[2] == NULL || vals[3] == NULL) {
        for (int k = 0; k < NMSG; k++)
            Py_XDECREF(vals[k]);
        return NULL;
    }
    return rs_new_slotted(message_type, msg_offsets, vals, NMSG);
}

/* A StoredMessage holding only a copy of its record (slot _r; _props None): StoredMessage.__getattr__
 * decodes the other slots on first use. Only for a record check_record accepted, so that decode cannot
 * fail. What a get builds: one copy and one object per message instead of twenty. */
static PyObject *lazy_message(const unsigned char *rec, Py_ssize_t size) {
    PyObject *vals[2];
    vals[0] = PyBytes_FromStringAndSize((const char *)rec, size);
    if (vals[0] == NULL)
        return NULL;
    vals[1] = Py_None;
    Py_INCREF(Py_None);
    return rs_new_slotted(message_type, lazy_offsets, vals, 2);
}

static PyObject *decode_buffer(const unsigned char *buf, Py_ssize_t buflen, Py_ssize_t pos, Py_ssize_t end,
                               int with_body) {
    if (message_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "decode_record: set_message_type was not called");
        return NULL;
    }
    rs_record ri;
    if (check_record(buf, buflen, pos, end, &ri) < 0)
        return NULL;
    return build_message(buf + pos, &ri, with_body);
}

static const char *const DECODE_KW[] = {"buf", "pos", "end", "with_body"};

/* decode_record(buf, pos=0, end=None, with_body=True) -> StoredMessage */
static PyObject *decode_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *a[4] = {NULL, NULL, NULL, NULL};
    if (nargs > 4) {
        PyErr_SetString(PyExc_TypeError, "decode_record takes at most 4 arguments");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        a[i] = args[i];
    if (kwnames != NULL) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
            PyObject *name = PyTuple_GET_ITEM(kwnames, i);
            int k = 0;
            while (k < 4 && PyUnicode_CompareWithASCIIString(name, DECODE_KW[k]) != 0)
                k++;
            if (k == 4 || a[k] != NULL) {
                PyErr_Format(PyExc_TypeError, "decode_record: unexpected or repeated argument %R", name);
                return NULL;
            }
            a[k] = args[nargs + i];
        }
    }
    if (a[0] == NULL) {
        PyErr_SetString(PyExc_TypeError, "decode_record needs a buffer");
        return NULL;
    }
    Py_ssize_t pos = 0, end;
    int with_body = 1;
    if (a[1] != NULL && (pos = PyLong_AsSsize_t(a[1])) == -1 && PyErr_Occurred())
        return NULL;
    if (a[3] != NULL && (with_body = PyObject_IsTrue(a[3])) < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(a[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    end = view.len;
    if (a[2] != NULL && a[2] != Py_None && (end = PyLong_AsSsize_t(a[2])) == -1 && PyErr_Occurred()) {
        PyBuffer_Release(&view);
        return NULL;
    }
    PyObject *m = decode_buffer(view.buf, view.len, pos, end, with_body);
    PyBuffer_Release(&view);
    return m;
}

/* ------------------------------------------------------------------ IndexFile chain walk */
#define INDEX_HEADER 40

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
    Py_ssize_t slot_at = INDEX_HEADER + (Py_ssize_t)slot * 4;
    if (slot_at + 4 > view.len) {
        corrupt(slot_at, "hash slot %lld lies past the index file's %zd bytes", slot, view.len);
        goto done;
    }
    long long n = rs_be32(b + slot_at);
    if (n <= 0 || n > count || index_count <= 1)
        goto ok;
    Py_ssize_t base = INDEX_HEADER + slot_num * 4;
    long long hops = 0;
    while (PyList_GET_SIZE(out) < max_num && hops < count) {   /* a corrupt chain may loop: never more */
        hops++;
        /* 0 < n <= count < index_num: inside a file of the expected size; checked against this one anyway */
        Py_ssize_t at = base + (Py_ssize_t)n * 20;
        if (at < base || at + 20 > view.len) {
            corrupt(at, "index entry %lld lies past the index file's %zd bytes", n, view.len);
            goto done;
        }
        int32_t hash_read = rs_be32(b + at);
        int64_t phy = rs_be64(b + at + 4);
        int32_t diff = rs_be32(b + at + 12), prev = rs_be32(b + at + 16);
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

/* ------------------------------------------------------------------ a get's plain units */
#define MAX_PULL_MSG_SIZE (128LL * 1024 * 1024)

/* take_units(units, start, codes, ext_max, max_count, limits, max_py, memory, seg_start, seg_end, seg_buf,
 *            topic, queue_id, out) -> (units taken, total bytes, messages, skipped by the tag filter)
 * formats.cq.take_units_py is the reference: see there. */
static PyObject *take_units(PyObject *self, PyObject *args) {
    Py_buffer units, seg;
    long long start, ext_max, max_count, max_py, memory, seg_start, seg_end, qid;
    long long bytes_mem, count_mem, bytes_disk, count_disk;
    PyObject *codes, *topic, *out;
    if (!PyArg_ParseTuple(args, "y*LOLL(LLLL)LLLLy*ULO!:take_units", &units, &start, &codes, &ext_max, &max_count,
                          &bytes_mem, &count_mem, &bytes_disk, &count_disk, &max_py, &memory, &seg_start,
                          &seg_end, &seg, &topic, &qid, &PyList_Type, &out))
        return NULL;
    PyObject *result = NULL;
    if (codes != Py_None && !PyAnySet_Check(codes)) {
        PyErr_SetString(PyExc_TypeError, "take_units: codes must be a set or None");
        goto done;
    }
    const unsigned char *u = units.buf;
    Py_ssize_t n = units.len / 20, k = 0;
    long long total = 0, count = 0;
    int skipped = 0;
    for (; k < n; k++) {
        const unsigned char *e = u + 20 * k;
        long long pos = rs_be64(e), tcode = rs_be64(e + 12);
        long long size = rs_be32(e + 8);
        if (total && count) {   /* get_message.batch_full */
            int in_memory = (max_py - pos) <= memory;
            if (count + 1 > max_count || total + size > MAX_PULL_MSG_SIZE
                    || (in_memory ? (total + size > bytes_mem || count > count_mem - 1)
                                  : (total + size > bytes_disk || count > count_disk - 1)))
                break;
        }
        if (codes != Py_None && tcode > ext_max) {
            PyObject *c = PyLong_FromLong((int32_t)(uint32_t)(uint64_t)tcode);   /* int32(tcode) */
            int in = c == NULL ? -1 : PySet_Contains(codes, c);
            Py_XDECREF(c);
            if (in < 0)
                goto done;
            if (!in) {
                skipped = 1;
                continue;
            }
        }
        if (!(seg_start <= pos && pos <= seg_end - size) || size <= 0)
            break;       /* another segment's record: the careful loop finds it */
        Py_ssize_t rel = (Py_ssize_t)(pos - seg_start);
        if (rel + size > seg.len)
            break;
        PyObject *m = decode_buffer(seg.buf, seg.len, rel, rel + (Py_ssize_t)size, 1);
        if (m == NULL) {
            if (!PyErr_ExceptionMatches(rs_CorruptDataError))
                goto done;
            PyErr_Clear();
            break;       /* the careful loop says what is wrong */
        }
        /* StoredMessage.is_at(topic, queue_id, index, size, pos) */
        const unsigned char *rec = (const unsigned char *)seg.buf + rel;
        PyObject *mt = *(PyObject **)((char *)m + msg_offsets[2]);
        int same = rs_be32(rec + 12) == qid && rs_be64(rec + 20) == start + k && rs_be32(rec) == size
            && rs_be64(rec + 28) == pos;
        if (same) {
            same = PyUnicode_Compare(mt, topic) == 0;
            if (PyErr_Occurred()) {
                Py_DECREF(m);
                goto done;
            }
        }
        if (!same || PyList_Append(out, m) < 0) {
            Py_DECREF(m);
            if (PyErr_Occurred())
                goto done;
            break;
        }
        Py_DECREF(m);
        total += size;
        count++;
    }
    result = Py_BuildValue("(nLLO)", k, total, count, skipped ? Py_True : Py_False);
done:
    PyBuffer_Release(&units);
    PyBuffer_Release(&seg);
    return result;
}

/* ------------------------------------------------------------------ a whole plain get in one call */
/* The tag set of a get as C integers when it is a few ints (the usual one or two tags); else the set itself
 * is asked. */
typedef struct {
    PyObject *set;
    Py_ssize_t n;   /* -1: ask the set */
    long long v[8];
} tagset;

static int tagset_init(tagset *t, PyObject *codes) {
    t->set = codes;
    t->n = -1;
    if (codes == Py_None)
        return 0;
    if (!PyAnySet_Check(codes)) {
        PyErr_SetString(PyExc_TypeError, "codes must be a set or None");
        return -1;
    }
    if (PySet_GET_SIZE(codes) > 8)
        return 0;
    Py_ssize_t pos = 0, n = 0;
    PyObject *key;
    Py_hash_t hash;
    while (_PySet_NextEntry(codes, &pos, &key, &hash)) {
        if (!PyLong_CheckExact(key))
            return 0;
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(key, &overflow);
        if (overflow || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return 0;
        }
        t->v[n++] = v;
    }
    t->n = n;
    return 0;
}

/* int32(tcode) in codes: 1, 0, or -1 with an error */
static int tagset_has(const tagset *t, long long tcode) {
    int32_t c = (int32_t)(uint32_t)(uint64_t)tcode;
    if (t->n >= 0) {
        for (Py_ssize_t k = 0; k < t->n; k++)
            if (t->v[k] == c)
                return 1;
        return 0;
    }
    PyObject *o = PyLong_FromLong(c);
    if (o == NULL)
        return -1;
    int in = PySet_Contains(t->set, o);
    Py_DECREF(o);
    return in;
}

/* One mapped file of a MappedFileQueue's list, as files.find(offset) finds it: its start, read position and
 * a held view of its buffer. */
typedef struct {
    long long from, readpos;
    Py_buffer view;
    int held;
} mapped;

static PyObject *S_from, *S_buf, *S_wbuf, *S_wrote, *S_committed;

static int attr_ll(PyObject *o, PyObject *name, long long *v) {
    PyObject *a = PyObject_GetAttr(o, name);
    if (a == NULL)
        return -1;
    *v = PyLong_AsLongLong(a);
    Py_DECREF(a);
    return (*v == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* MappedFile.read_position (what readers may see: `wrote`, or with a write buffer `committed`), read from
 * its attributes: a property call per get costs more than the rest of a short one. */
static int read_position(PyObject *mf, long long *v) {
    PyObject *wbuf = PyObject_GetAttr(mf, S_wbuf);
    if (wbuf == NULL)
        return -1;
    int direct = wbuf == Py_None;
    Py_DECREF(wbuf);
    return attr_ll(mf, direct ? S_wrote : S_committed, v);
}

static void mapped_release(mapped *m) {
    if (m->held)
        PyBuffer_Release(&m->view);
    m->held = 0;
}

/* 1: found (m filled, its buffer held), 0: no file holds `offset` (or it has no buffer), -1: error */
static int find_mapped(PyObject *files, long long file_size, long long offset, mapped *m) {
    mapped_release(m);
    if (!PyList_Check(files) || file_size <= 0 || offset < 0 || PyList_GET_SIZE(files) == 0)
        return 0;
    long long first;
    if (attr_ll(PyList_GET_ITEM(files, 0), S_from, &first) < 0)
        return -1;
    if (first < 0)
        return 0;
    long long idx = offset / file_size - first / file_size;
    if (idx < 0 || idx >= PyList_GET_SIZE(files))
        return 0;
    PyObject *mf = PyList_GET_ITEM(files, idx);
    Py_INCREF(mf);   /* the read_position property runs Python code: the list may change meanwhile */
    int r = 0;
    PyObject *buf = NULL;
    if (attr_ll(mf, S_from, &m->from) < 0)
        goto fail;
    if (!(m->from <= offset && offset < m->from + file_size))
        goto out;
    if ((buf = PyObject_GetAttr(mf, S_buf)) == NULL)
        goto fail;
    if (buf == Py_None)
        goto out;
    if (PyObject_GetBuffer(buf, &m->view, PyBUF_SIMPLE) < 0)
        goto fail;
    m->held = 1;
    if (read_position(mf, &m->readpos) < 0) {
        mapped_release(m);
        goto fail;
    }
    r = 1;
out:
    Py_XDECREF(buf);
    Py_DECREF(mf);
    return r;
fail:
    Py_XDECREF(buf);
    Py_DECREF(mf);
    return -1;
}

/* Is the record at rec (check_record accepted it) the queue's record a unit says is there (StoredMessage.is_at)?
 * 1, 0 or -1 with an error. */
static int record_is_at(const unsigned char *rec, const rs_record *ri, PyObject *topic, long long qid,
                        long long qoff, long long size, long long pos) {
    if (!(rs_be32(rec + 12) == qid && rs_be64(rec + 20) == qoff && ri->size == size && rs_be64(rec + 28) == pos))
        return 0;
    if (PyUnicode_IS_ASCII(topic))   /* a UTF-8 decode ("replace") equals an ASCII str iff the bytes do */
        return PyUnicode_GET_LENGTH(topic) == ri->topic_len
               && memcmp(PyUnicode_DATA(topic), rec + ri->topic_pos, (size_t)ri->topic_len) == 0;
    PyObject *t = rs_cached_str(rec + ri->topic_pos, ri->topic_len);
    if (t == NULL)
        return -1;
    int same = PyUnicode_Compare(t, topic) == 0;
    Py_DECREF(t);
    return PyErr_Occurred() ? -1 : same;
}

/* get_plain(cq_files, cq_file_size, cq_min_logic_offset, cl_files, cl_file_size, offset, hi, max_count, codes,
 *           ext_max, limits, max_filter_message_size, travel, memory, topic, queue_id)
 *   -> (next_begin_offset, bytes, message count, messages) or None
 * A get_message.scan of a plain ConsumeQueue with no ext, no filter but the tag set and no CRC check, for
 * `offset` in [min, hi): what the careful loop answers when every unit it looks at is in one ConsumeQueue
 * file and points at a record of one CommitLog segment (or another found the same way) that decodes and is
 * that unit's (the status: FOUND with messages, else NO_MATCHED_MESSAGE). None when anything else comes up
 * (an expired or wrong unit, a corrupt record, a scan going on into the next file): the careful loop
 * answers then. The messages are lazy (lazy_message). */
static PyObject *get_plain(PyObject *self, PyObject *args) {
    PyObject *cq_files, *cl_files, *codes, *topic;
    long long cq_fs, cq_min, cl_fs, offset, hi, max_count, ext_max, max_filter, travel, memory, qid;
    long long bytes_mem, count_mem, bytes_disk, count_disk;
    if (!PyArg_ParseTuple(args, "OLLOLLLLOL(LLLL)LLLUL:get_plain", &cq_files, &cq_fs, &cq_min, &cl_files, &cl_fs,
                          &offset, &hi, &max_count, &codes, &ext_max, &bytes_mem, &count_mem, &bytes_disk,
                          &count_disk, &max_filter, &travel, &memory, &topic, &qid))
        return NULL;
    if (message_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "get_plain: set_message_type was not called");
        return NULL;
    }
    tagset tags;
    if (tagset_init(&tags, codes) < 0)
        return NULL;
    if (travel < 1 || offset < 0 || offset > (LLONG_MAX / 20) || max_count < 0 || cq_fs < 20)
        Py_RETURN_NONE;
    mapped cq = {0}, seg = {0};
    PyObject *out = NULL, *result = NULL;
    int r = find_mapped(cq_files, cq_fs, offset * 20, &cq);
    if (r <= 0 || offset * 20 < cq_min)
        goto give_up;   /* (an error is raised as it is) */
    long long in_file = offset * 20 % cq_fs;
    long long end_units = cq.readpos < cq.view.len ? cq.readpos : cq.view.len;
    if (in_file >= cq.readpos)
        goto give_up;
    /* the commit log's max offset (max_py of batch_full): its last file's start + read position */
    long long max_py = 0;
    Py_ssize_t ncl = PyList_Check(cl_files) ? PyList_GET_SIZE(cl_files) : 0;
    if (ncl > 0) {
        PyObject *lf = PyList_GET_ITEM(cl_files, ncl - 1);
        Py_INCREF(lf);
        long long from, rp;
        int bad = attr_ll(lf, S_from, &from) < 0 || read_position(lf, &rp) < 0;
        Py_DECREF(lf);
        if (bad)
            goto done;
        max_py = from + rp;
    }
    long long per = max_filter > max_count * 20 ? max_filter : max_count * 20;
    long long cap = offset + (per + 19) / 20;   /* offset - (-per // 20) */
    if ((out = PyList_New(0)) == NULL)
        goto done;
    const unsigned char *u = cq.view.buf;
    long long next_begin = offset, total = 0, count = 0;
    for (long long at = in_file; at + 20 <= end_units; at += 20) {
        long long base = offset + (at - in_file) / 20;
        if (next_begin >= hi || base >= cap)
            break;
        long long pos = rs_be64(u + at), tcode = rs_be64(u + at + 12);
        long long size = rs_be32(u + at + 8);
        if (total && count) {   /* get_message.batch_full */
            int in_memory = (max_py - pos) <= memory;
            if (count + 1 > max_count || total + size > MAX_PULL_MSG_SIZE
                    || (in_memory ? (total + size > bytes_mem || count > count_mem - 1)
                                  : (total + size > bytes_disk || count > count_disk - 1)))
                break;
        }
        next_begin = base + 1;
        if (codes != Py_None && tcode > ext_max) {
            int in = tagset_has(&tags, tcode);
            if (in < 0)
                goto done;
            if (!in)
                continue;
        }
        if (size <= 0 || pos < 0)
            goto give_up;
        if (!(seg.held && seg.from <= pos && pos <= seg.from + seg.readpos - size)) {
            r = find_mapped(cl_files, cl_fs, pos, &seg);
            if (r < 0)
                goto done;
            if (r == 0 || !(0 <= pos - seg.from && pos - seg.from <= seg.readpos - size))
                goto give_up;   /* expired, or a wrong unit */
        }
        Py_ssize_t rel = (Py_ssize_t)(pos - seg.from);
        if (rel + size > seg.view.len)
            goto give_up;
        rs_record ri;
        if (check_record(seg.view.buf, seg.view.len, rel, rel + (Py_ssize_t)size, &ri) < 0) {
            if (!PyErr_ExceptionMatches(rs_CorruptDataError))
                goto done;
            PyErr_Clear();
            goto give_up;
        }
        const unsigned char *rec = (const unsigned char *)seg.view.buf + rel;
        int same = record_is_at(rec, &ri, topic, qid, base, size, pos);
        if (same < 0)
            goto done;
        if (!same)
            goto give_up;
        PyObject *m = lazy_message(rec, ri.size);
        if (m == NULL)
            goto done;
        int bad = PyList_Append(out, m);
        Py_DECREF(m);
        if (bad < 0)
            goto done;
        total += size;
        count++;
    }
    if (total <= 0 && next_begin < hi && travel > 1)
        goto give_up;   /* the careful loop goes on into the next file */
    result = Py_BuildValue("(LLLO)", next_begin, total, count, out);
    goto done;
give_up:
    if (!PyErr_Occurred()) {
        result = Py_None;
        Py_INCREF(result);
    }
done:
    Py_XDECREF(out);
    mapped_release(&cq);
    mapped_release(&seg);
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
static int hit_check(PyObject *cl_files, long long cl_fs, long long phy, PyObject *topic, PyObject *key, mapped *seg,
                     PyObject **msg) {
    *msg = NULL;
    if (!(seg->held && seg->from <= phy && phy < seg->from + cl_fs)) {
        int r = find_mapped(cl_files, cl_fs, phy, seg);
        if (r < 0)
            return -1;
        if (r == 0 && phy == 0 && PyList_Check(cl_files) && PyList_GET_SIZE(cl_files) > 0) {
            /* files.find(0, True): the first file (its first record is not at 0: "gone" below) */
            long long first;
            if (attr_ll(PyList_GET_ITEM(cl_files, 0), S_from, &first) < 0)
                return -1;
            if ((r = find_mapped(cl_files, cl_fs, first, seg)) < 0)
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
    long long size = rs_be32(buf + pos);
    if (size <= 0 || pos + size > limit)
        return 1;
    rs_record ri;
    if (check_record(buf, seg->view.len, (Py_ssize_t)pos, (Py_ssize_t)(pos + size), &ri) < 0) {
        if (!PyErr_ExceptionMatches(rs_CorruptDataError))
            return -1;
        PyErr_Clear();
        return 1;
    }
    const unsigned char *rec = buf + pos;
    if (rs_be64(rec + 28) != phy)
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
    *msg = lazy_message(rec, ri.size);
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
    if (message_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "query_index: set_message_type was not called");
        return NULL;
    }
    PyObject *result = NULL, *out = NULL;
    mapped seg = {0};
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
        int bad = h == NULL || attr_ll(h, S_begin_ts, &b) < 0 || attr_ll(h, S_end_ts, &e) < 0
                  || attr_ll(h, S_count, &count_in) < 0 || attr_ll(f, S_slots, &slot_num) < 0
                  || attr_ll(f, S_index_num, &index_num) < 0;
        if (!bad && fi == nfiles - 1) {
            last_ts = e;
            bad = attr_ll(h, S_end_phy, &last_phy) < 0;
        }
        int matched = (begin < b && end > e) || (b <= begin && begin <= e) || (b <= end && end <= e);
        Py_buffer view;
        int have_view = 0;
        if (!bad && matched) {
            bad = (mf = PyObject_GetAttr(f, S_mf)) == NULL || (buf = PyObject_GetAttr(mf, S_buf)) == NULL
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
            Py_ssize_t slot_at = INDEX_HEADER + (Py_ssize_t)slot * 4;
            if (walk > 0 && slot_at + 4 > view.len) {
                corrupt(slot_at, "hash slot %lld lies past the index file's %zd bytes", slot, view.len);
                walk = -1;
            }
            long long n = walk > 0 ? rs_be32(ib + slot_at) : 0;
            if (walk > 0 && (n <= 0 || n > count || count_in <= 1))
                walk = 0;
            Py_ssize_t base = INDEX_HEADER + slot_num * 4;
            long long hops = 0;
            while (walk > 0 && nhits < max_num && hops < count) {
                hops++;
                Py_ssize_t at = base + (Py_ssize_t)n * 20;
                if (at < base || at + 20 > view.len) {
                    corrupt(at, "index entry %lld lies past the index file's %zd bytes", n, view.len);
                    walk = -1;
                    break;
                }
                int32_t hash_read = rs_be32(ib + at);
                int64_t phy = rs_be64(ib + at + 4);
                int32_t diff = rs_be32(ib + at + 12), prev = rs_be32(ib + at + 16);
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
    mapped_release(&seg);
    return result;
}

/* ------------------------------------------------------------------ StoredMessage's fixed fields */
/* fixed_field(i): a callable taking a StoredMessage and answering self._f[i], for `property(fixed_field(i))`:
 * a lambda per field costs a Python frame per read, and a consumer reads a dozen per message. A message whose
 * `_f` slot is unset (lazy) is asked for it the Python way, which decodes it. */
typedef struct {
    PyObject_HEAD
    Py_ssize_t index;
    vectorcallfunc vectorcall;
} fixed_field_obj;

static PyObject *S_f;

static PyObject *fixed_field_call(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 1 || (kwnames && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "a fixed field getter takes one message");
        return NULL;
    }
    PyObject *msg = args[0], *f;
    Py_ssize_t i = ((fixed_field_obj *)callable)->index;
    if (message_type != NULL && Py_TYPE(msg) == message_type
            && (f = *(PyObject **)((char *)msg + msg_offsets[0])) != NULL) {
        Py_INCREF(f);
    } else if ((f = PyObject_GetAttr(msg, S_f)) == NULL) {
        return NULL;
    }
    PyObject *r;
    if (PyTuple_CheckExact(f) && i < PyTuple_GET_SIZE(f))
        r = Py_NewRef(PyTuple_GET_ITEM(f, i));
    else
        r = PySequence_GetItem(f, i);
    Py_DECREF(f);
    return r;
}

static PyTypeObject fixed_field_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rocketstore._native.FixedField",
    .tp_basicsize = sizeof(fixed_field_obj),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(fixed_field_obj, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_doc = "self._f[index] of a StoredMessage (a property's getter).",
};

static PyObject *fixed_field(PyObject *self, PyObject *arg) {
    Py_ssize_t i = PyLong_AsSsize_t(arg);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    if (i < 0) {
        PyErr_SetString(PyExc_ValueError, "fixed_field takes an index >= 0");
        return NULL;
    }
    if (!(fixed_field_type.tp_flags & Py_TPFLAGS_READY) && PyType_Ready(&fixed_field_type) < 0)
        return NULL;
    fixed_field_obj *o = PyObject_New(fixed_field_obj, &fixed_field_type);
    if (o == NULL)
        return NULL;
    o->index = i;
    o->vectorcall = fixed_field_call;
    return (PyObject *)o;
}

/* ------------------------------------------------------------------ a queue's offset by time */
/* CommitLog.pickupStoreTimestamp of the record a unit points at, or -1 (outside the log, not written that far,
 * shorter than a record's header, or its STORETIMESTAMP field beyond `size`). */
static long long unit_store_ts(PyObject *cl_files, long long cl_fs, long long cl_min, long long cl_max,
                               long long pos, long long size, mapped *seg, int *err) {
    if (!(pos >= cl_min && pos + size <= cl_max) || size < 64)
        return -1;
    if (!(seg->held && seg->from <= pos && pos < seg->from + cl_fs)) {
        int r = find_mapped(cl_files, cl_fs, pos, seg);
        if (r < 0) {
            *err = 1;
            return -1;
        }
        if (r == 0)
            return -1;
    }
    long long at = pos - seg->from;
    if (at + size > seg->readpos || at + size > seg->view.len)
        return -1;
    const unsigned char *rec = (const unsigned char *)seg->view.buf + at;
    long long ts_pos = 48 + ((rs_be32(rec + 36) & 0x10) ? 20 : 8);  /* SYSFLAG's BORNHOST_V6_FLAG */
    if (ts_pos + 8 > size)
        return -1;
    return (long long)rs_be64(rec + ts_pos);
}

static long long floor_div20(long long x) {   /* Python's x // 20 */
    long long q = x / 20;
    return (x % 20 != 0 && x < 0) ? q - 1 : q;
}

/* search_by_time(cq_buf, base, floor, ceiling, timestamp, lower, min_phy, cl_files, cl_file_size, cl_min, cl_max)
 *   -> queue offset
 * ConsumeQueue._search_by_time from its first probe on (the reference), over one ConsumeQueue file's units
 * [floor, ceiling] (byte positions; the caller has checked that the file is written that far). */
static PyObject *search_by_time(PyObject *self, PyObject *args) {
    Py_buffer b;
    PyObject *cl_files;
    long long base, floor, ceiling, ts, min_phy, cl_fs, cl_min, cl_max;
    int lower;
    if (!PyArg_ParseTuple(args, "y*LLLLpLOLLL:search_by_time", &b, &base, &floor, &ceiling, &ts, &lower, &min_phy,
                          &cl_files, &cl_fs, &cl_min, &cl_max))
        return NULL;
    const unsigned char *buf = b.buf;
    mapped seg = {0};
    int err = 0;
    long long answer = 0, t, low = floor, high = ceiling, target = -1, left = -1, right = -1;
    if (floor < 0 || ceiling < floor || ceiling + 20 > b.len) {
        PyErr_Format(PyExc_ValueError, "search_by_time: units [%lld, %lld] outside a buffer of %zd bytes", floor,
                     ceiling, b.len);
        goto fail;
    }
#define UNIT_TS(p) unit_store_ts(cl_files, cl_fs, cl_min, cl_max, (long long)rs_be64(buf + (p)), \
                                 (long long)rs_be32(buf + (p) + 8), &seg, &err)
    t = UNIT_TS(ceiling);
    if (err)
        goto fail;
    if (t < ts) {
        answer = lower ? floor_div20(base + ceiling + 20) : floor_div20(base + ceiling);
        goto out;
    }
    t = UNIT_TS(floor);
    if (err)
        goto fail;
    if (t > ts) {
        answer = lower ? floor_div20(base) : 0;
        goto out;
    }
    while (high >= low) {
        long long mid = (low + high) / 40 * 20;
        if ((long long)rs_be64(buf + mid) < min_phy) {
            low = mid + 20;
            left = mid;
            continue;
        }
        t = UNIT_TS(mid);
        if (err)
            goto fail;
        if (t < 0)
            goto out;   /* answer 0 */
        if (t == ts) {
            target = mid;
            break;
        }
        if (t > ts) {
            high = mid - 20;
            right = mid;
        } else {
            low = mid + 20;
            left = mid;
        }
    }
    long long offset;
    if (target != -1) {
        long long step = lower ? -20 : 20, prev = target;
        for (;;) {
            long long attempt = prev + step;
            if (attempt < floor || attempt > ceiling)
                break;
            t = UNIT_TS(attempt);
            if (err)
                goto fail;
            if (t != ts)
                break;
            prev = attempt;
        }
        offset = prev;
    } else {
        offset = lower ? right : left;
    }
    answer = floor_div20(base + offset);
#undef UNIT_TS
out:
    mapped_release(&seg);
    PyBuffer_Release(&b);
    return PyLong_FromLongLong(answer);
fail:
    mapped_release(&seg);
    PyBuffer_Release(&b);
    return NULL;
}

int rs_read_init(void) {
    S_f = PyUnicode_InternFromString("_f");
    S_from = PyUnicode_InternFromString("file_from_offset");
    S_buf = PyUnicode_InternFromString("buf");
    S_wbuf = PyUnicode_InternFromString("wbuf");
    S_wrote = PyUnicode_InternFromString("wrote");
    S_committed = PyUnicode_InternFromString("committed");
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
    return (S_f && S_from && S_buf && S_wbuf && S_wrote && S_committed && S_header && S_mf && S_begin_ts && S_end_ts && S_count && S_end_phy
            && S_slots && S_index_num && S_last_ts && S_last_phy) ? 0 : -1;
}

PyMethodDef rs_read_methods[] = {
    {"set_message_type", set_message_type, METH_O, "The StoredMessage class decode_record builds."},
    {"decode_record", (PyCFunction)(void (*)(void))decode_record, METH_FASTCALL | METH_KEYWORDS,
     "One CommitLog record as a StoredMessage (formats.record.decode_record_py is the reference)."},
    {"take_units", take_units, METH_VARARGS,
     "The plain units a get takes without a closer look (formats.cq.take_units_py is the reference)."},
    {"get_plain", get_plain, METH_VARARGS,
     "A whole get of a plain queue, or None for the careful loop (get_message.get_plain_py is the reference)."},
    {"query_index", query_index, METH_VARARGS,
     "queryMessage with every hit re-checked (lookups.Lookups.query_py is the reference)."},
    {"fixed_field", fixed_field, METH_O, "A getter of StoredMessage._f[index] for a property (see read.c)."},
    {"search_by_time", search_by_time, METH_VARARGS,
     "getOffsetInQueueByTime's binary search (log.consume_queue.ConsumeQueue._search_by_time is the reference)."},
    {"select_chain", select_chain, METH_VARARGS,
     "IndexFile.selectPhyOffset's chain walk (formats.index.select_chain_py is the reference)."},
    {NULL, NULL, 0, NULL},
};
