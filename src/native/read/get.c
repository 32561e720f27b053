/* A get's loops: the plain units a get takes (take_units) and a whole get of a plain queue in one call
 * (get_plain); get_message.py is the reference. */
#include "native.h"
#include "read/read.h"
#include "formats/cq_unit.h"
#include <limits.h>
#include <string.h>

/* ------------------------------------------------------------------ a get's plain units */

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
    Py_ssize_t n = units.len / CQ_UNIT, k = 0;
    long long total = 0, count = 0;
    int skipped = 0;
    for (; k < n; k++) {
        const unsigned char *e = u + CQ_UNIT * k;
        long long pos = rs_be64(e + CQ_PHYS), tcode = rs_be64(e + CQ_TAGS);
        long long size = rs_be32(e + CQ_SIZE);
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
        PyObject *m = rs_decode_buffer(seg.buf, seg.len, rel, rel + (Py_ssize_t)size, 1);
        if (m == NULL) {
            if (!PyErr_ExceptionMatches(rs_CorruptDataError))
                goto done;
            PyErr_Clear();
            break;       /* the careful loop says what is wrong */
        }
        /* StoredMessage.is_at(topic, queue_id, index, size, pos) */
        const unsigned char *rec = (const unsigned char *)seg.buf + rel;
        PyObject *mt = *(PyObject **)((char *)m + rs_msg_offsets[MSG_TOPIC]);
        int same = rs_be32(rec + REC_QUEUEID) == qid && rs_be64(rec + REC_QUEUEOFFSET) == start + k
            && rs_be32(rec + REC_TOTALSIZE) == size && rs_be64(rec + REC_PHYSICALOFFSET) == pos;
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

/* Is the record at rec (check_record accepted it) the queue's record a unit says is there (StoredMessage.is_at)?
 * 1, 0 or -1 with an error. */
static int record_is_at(const unsigned char *rec, const rs_record *ri, PyObject *topic, long long qid,
                        long long qoff, long long size, long long pos) {
    if (!(rs_be32(rec + REC_QUEUEID) == qid && rs_be64(rec + REC_QUEUEOFFSET) == qoff && ri->size == size
          && rs_be64(rec + REC_PHYSICALOFFSET) == pos))
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
    if (rs_message_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "get_plain: set_message_type was not called");
        return NULL;
    }
    tagset tags;
    if (tagset_init(&tags, codes) < 0)
        return NULL;
    if (travel < 1 || offset < 0 || offset > (LLONG_MAX / CQ_UNIT) || max_count < 0 || cq_fs < CQ_UNIT)
        Py_RETURN_NONE;
    rs_mapped cq = {0}, seg = {0};
    PyObject *out = NULL, *result = NULL;
    int r = rs_find_mapped(cq_files, cq_fs, offset * CQ_UNIT, &cq);
    if (r <= 0 || offset * CQ_UNIT < cq_min)
        goto give_up;   /* (an error is raised as it is) */
    long long in_file = offset * CQ_UNIT % cq_fs;
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
        int bad = rs_attr_ll(lf, rs_S_from, &from) < 0 || rs_read_position(lf, &rp) < 0;
        Py_DECREF(lf);
        if (bad)
            goto done;
        max_py = from + rp;
    }
    long long per = max_filter > max_count * CQ_UNIT ? max_filter : max_count * CQ_UNIT;
    long long cap = offset + (per + CQ_UNIT - 1) / CQ_UNIT;   /* offset - (-per // 20) */
    if ((out = PyList_New(0)) == NULL)
        goto done;
    const unsigned char *u = cq.view.buf;
    long long next_begin = offset, total = 0, count = 0;
    for (long long at = in_file; at + CQ_UNIT <= end_units; at += CQ_UNIT) {
        long long base = offset + (at - in_file) / CQ_UNIT;
        if (next_begin >= hi || base >= cap)
            break;
        long long pos = rs_be64(u + at + CQ_PHYS), tcode = rs_be64(u + at + CQ_TAGS);
        long long size = rs_be32(u + at + CQ_SIZE);
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
            r = rs_find_mapped(cl_files, cl_fs, pos, &seg);
            if (r < 0)
                goto done;
            if (r == 0 || !(0 <= pos - seg.from && pos - seg.from <= seg.readpos - size))
                goto give_up;   /* expired, or a wrong unit */
        }
        Py_ssize_t rel = (Py_ssize_t)(pos - seg.from);
        if (rel + size > seg.view.len)
            goto give_up;
        rs_record ri;
        if (rs_check_record(seg.view.buf, seg.view.len, rel, rel + (Py_ssize_t)size, &ri) < 0) {
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
        PyObject *m = rs_lazy_message(rec, ri.size);
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
    rs_mapped_release(&cq);
    rs_mapped_release(&seg);
    return result;
}

PyMethodDef rs_get_methods[] = {
    {"take_units", take_units, METH_VARARGS,
     "The plain units a get takes without a closer look (formats.cq.take_units_py is the reference)."},
    {"get_plain", get_plain, METH_VARARGS,
     "A whole get of a plain queue, or None for the careful loop (get_message.get_plain_py is the reference)."},
    {NULL, NULL, 0, NULL},
};
