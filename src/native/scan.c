/* The scan path's loop (see native.h): the bulk decoder of reput, recovery and the rebuild
 * (services.bulk_dispatch.decode_run_py is the reference), over formats/record.h's record walk (rs_walk_one,
 * which verify's record table walks too).
 *
 * Two phases: the walk over the mapped bytes (TOTALSIZE chain, every bound check of
 * formats.record_scan.scan, the body CRC, the properties' item positions) runs without the GIL into a C
 * array bounded by the bytes walked; the Python objects are built afterwards, with the GIL. */
#include "native.h"
#include "formats/record.h"
#include <string.h>

static const char SCHEDULE_TOPIC[] = "SCHEDULE_TOPIC_XXXX";

static int has_bytes(const unsigned char *p, Py_ssize_t n, const char *what, size_t wn) {
    return n >= (Py_ssize_t)wn && memmem(p, (size_t)n, what, wn) != NULL;
}

typedef struct {
    Py_ssize_t n;       /* records checked */
    Py_ssize_t first;   /* the first to dispatch (those before are only checked) */
} rs_run;

static void walk_run(const unsigned char *b, Py_ssize_t pos, Py_ssize_t limit, Py_ssize_t max_records,
                     int check_crc, int64_t dispatch_after, rs_rec *recs, rs_run *out) {
    Py_ssize_t n = 0, first = 0, p = pos;
    while (n < max_records) {
        rs_rec *r = &recs[n];
        int32_t crc;
        Py_ssize_t bpos, blen;
        if (!rs_walk_one(b, p, limit, r, &crc, &bpos, &blen))
            break;
        if (check_crc && blen > 0 && (int64_t)(rs_crc32(b + bpos, blen) & 0x7FFFFFFFu) != (int64_t)crc)
            break;
        const unsigned char *props = b + r->props_pos;
        if (r->phys <= dispatch_after) {
            if (n > first)   /* after records to dispatch (a PHYSICALOFFSET out of order): the careful path */
                break;
            /* the queues already have it; only properties that could make it a bad record need a look */
            if (has_bytes(props, r->props_len, "INNER_", 6) || has_bytes(props, r->props_len, "DELAY\x01", 6))
                break;
            first = n + 1;
        } else {
            rs_props_find(props, r->props_len, &r->props);
            if (r->props.pos[P_INNER_NUM] >= 0 || r->props.pos[P_INNER_BASE] >= 0)
                break;
        }
        n++;
        p += r->size;
    }
    out->n = n;
    out->first = first;
}

/* ------------------------------------------------------------------ the fields as Python objects */
static PyObject *empty_str = NULL;

static PyObject *decode_str(const unsigned char *p, Py_ssize_t len) {
    return PyUnicode_DecodeUTF8((const char *)p, len, "replace");
}

/* The last tags value and its code: a run's records mostly share their tags. */
typedef struct {
    const unsigned char *tags;
    Py_ssize_t len;
    long long code;
} rs_tags_memo;

/* What check_record / props_info give for a record: its topic (cached str), tagsCode (the DELAY rule of
 * SCHEDULE_TOPIC_XXXX through delay_code), KEYS ("" when absent) and UNIQ_KEY (None when absent); *raw (the
 * properties bytes) only when want_raw or delay_code needed it. Returns 0, 1 when delay_code refused the
 * record with a ValueError (the run ends before it), -1 on error. */
static int record_objects(const unsigned char *b, const rs_rec *r, PyObject *delay_code, rs_tags_memo *memo,
                          int want_raw, PyObject **topic, PyObject **raw, long long *code, PyObject **keys,
                          PyObject **uniq) {
    *topic = *raw = *keys = *uniq = NULL;
    const unsigned char *props = b + r->props_pos;
    if ((*topic = rs_cached_str(b + r->topic_pos, r->topic_len)) == NULL)
        goto fail;
    if (want_raw && (*raw = PyBytes_FromStringAndSize((const char *)props, r->props_len)) == NULL)
        goto fail;
    *code = 0;
    Py_ssize_t tp = r->props.pos[P_TAGS], tl = r->props.len[P_TAGS];
    if (tp >= 0) {
        const unsigned char *t = props + tp;
        if (memo->tags != NULL && memo->len == tl && memcmp(memo->tags, t, (size_t)tl) == 0) {
            *code = memo->code;
        } else {
            PyObject *s = decode_str(t, tl);
            if (s == NULL)
                goto fail;
            *code = rs_java_hash_str(s);
            Py_DECREF(s);
            memo->tags = t;
            memo->len = tl;
            memo->code = *code;
        }
    }
    if (r->props.pos[P_DELAY] >= 0 && r->topic_len == (Py_ssize_t)sizeof(SCHEDULE_TOPIC) - 1
            && memcmp(b + r->topic_pos, SCHEDULE_TOPIC, sizeof(SCHEDULE_TOPIC) - 1) == 0) {
        if (*raw == NULL && (*raw = PyBytes_FromStringAndSize((const char *)props, r->props_len)) == NULL)
            goto fail;
        PyObject *c = PyObject_CallFunction(delay_code, "OOLi", *topic, *raw, (long long)r->store_ts,
                                            (int)r->flags);
        if (c == NULL) {
            if (PyErr_ExceptionMatches(PyExc_ValueError)) {
                PyErr_Clear();
                Py_CLEAR(*topic);
                Py_CLEAR(*raw);
                return 1;
            }
            goto fail;
        }
        *code = PyLong_AsLongLong(c);
        Py_DECREF(c);
        if (*code == -1 && PyErr_Occurred())
            goto fail;
    }
    if (r->props.pos[P_KEYS] >= 0) {
        if ((*keys = decode_str(props + r->props.pos[P_KEYS], r->props.len[P_KEYS])) == NULL)
            goto fail;
    } else {
        *keys = empty_str;
        Py_INCREF(*keys);
    }
    if (r->props.pos[P_UNIQ] >= 0) {
        if ((*uniq = decode_str(props + r->props.pos[P_UNIQ], r->props.len[P_UNIQ])) == NULL)
            goto fail;
    } else {
        *uniq = Py_None;
        Py_INCREF(*uniq);
    }
    return 0;
fail:
    Py_CLEAR(*topic);
    Py_CLEAR(*raw);
    Py_CLEAR(*keys);
    Py_CLEAR(*uniq);
    return -1;
}

/* by_queue[(topic, qid)].append(j); *list: that list (borrowed: the dict holds it) */
static int add_member(PyObject *by_queue, PyObject *topic, PyObject *qid, Py_ssize_t j, PyObject **list) {
    PyObject *key = PyTuple_Pack(2, topic, qid);
    if (key == NULL)
        return -1;
    PyObject *members = PyDict_GetItemWithError(by_queue, key);
    int rc = -1;
    if (members == NULL) {
        if (PyErr_Occurred())
            goto out;
        members = PyList_New(0);
        if (members == NULL)
            goto out;
        int set = PyDict_SetItem(by_queue, key, members);
        Py_DECREF(members);     /* the dict holds it */
        if (set < 0)
            goto out;
    }
    PyObject *jj = PyLong_FromSsize_t(j);
    if (jj == NULL)
        goto out;
    rc = PyList_Append(members, jj);
    Py_DECREF(jj);
    *list = members;
out:
    Py_DECREF(key);
    return rc;
}

/* Bound the record array by the bytes: at most one record per 91 bytes, never what a size field says. */
static rs_rec *alloc_recs(Py_ssize_t pos, Py_ssize_t limit, Py_ssize_t *max_records) {
    Py_ssize_t cap = limit > pos ? (limit - pos) / REC_MIN_SIZE + 1 : 1;
    if (cap > *max_records)
        cap = *max_records;
    if (cap < 1)
        cap = 1;
    *max_records = cap;
    rs_rec *recs = PyMem_Malloc(sizeof(rs_rec) * (size_t)cap);
    if (recs == NULL)
        PyErr_NoMemory();
    return recs;
}

/* ------------------------------------------------------------------ decode_run */
#define NCOLS 11

/* decode_run(buf, pos, limit, max_records, check_crc, dispatch_after, delay_code[, arrays]) ->
 *   (done, after, last, columns): columns None or the arguments of DispatchColumns (topic, queue_id,
 *   queue_offset, phys, size, store_ts, sys_flag, tags_code, keys, uniq, props, by_queue).
 * delay_code(topic, raw_props, store_ts, sys_flag) gives a SCHEDULE_TOPIC_XXXX record's tagsCode; a
 * ValueError from it ends the run before that record. With `arrays`, the numeric columns (queue_id ..
 * tags_code) are each the bytes of an int64 array instead of a list of ints, and by_queue is None: what
 * the rebuild takes, without a Python int per field of every record. */
#define NUMERIC(k) ((k) >= 1 && (k) <= 7)
static PyObject *decode_run(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, limit, max_records;
    int check_crc;
    long long dispatch_after;
    PyObject *delay_code;
    int arrays = 0;
    if (!PyArg_ParseTuple(args, "y*nnnpLO|p:decode_run", &view, &pos, &limit, &max_records, &check_crc,
                          &dispatch_after, &delay_code, &arrays))
        return NULL;
    PyObject *result = NULL, *cols = NULL, *by_queue = NULL;
    PyObject *lists[NCOLS] = {NULL};
    rs_rec *recs = NULL;
    if (limit > view.len)
        limit = view.len;
    if (pos < 0 || max_records < 0) {
        PyErr_SetString(PyExc_ValueError, "decode_run: negative position or count");
        goto out;
    }
    if ((recs = alloc_recs(pos, limit, &max_records)) == NULL)
        goto out;
    rs_run run;
    const unsigned char *b = view.buf;
    Py_BEGIN_ALLOW_THREADS
    walk_run(b, pos, limit, max_records, check_crc, (int64_t)dispatch_after, recs, &run);
    Py_END_ALLOW_THREADS

    Py_ssize_t n = run.n, first = run.first, done = n, m = n - first;
    if (m > 0) {
        for (int k = 0; k < NCOLS; k++)
            if ((lists[k] = arrays && NUMERIC(k) ? PyBytes_FromStringAndSize(NULL, m * 8) : PyList_New(m)) == NULL)
                goto out;
        if ((by_queue = arrays ? Py_NewRef(Py_None) : PyDict_New()) == NULL)
            goto out;
        rs_tags_memo memo = {NULL, -1, 0};
        /* a run's records mostly share their queue, properties bytes (plain records), store time and
         * tagsCode with the record before: those objects are the previous record's, not new ones */
        PyObject *members = NULL, *last_topic = NULL, *last_raw = NULL, *last_ts = NULL, *last_code = NULL;
        int32_t last_qid = 0;
        long long last_ts_v = 0, last_code_v = 0;
        for (Py_ssize_t i = first; i < n; i++) {
            const rs_rec *r = &recs[i];
            PyObject *topic, *raw, *keys, *uniq;
            long long code;
            int rc = record_objects(b, r, delay_code, &memo, 0, &topic, &raw, &code, &keys, &uniq);
            if (rc < 0)
                goto out;
            if (rc > 0) {
                done = i;      /* the careful path says what is wrong with it */
                break;
            }
            const unsigned char *props = b + r->props_pos;
            if (raw == NULL) {
                if (last_raw != NULL && PyBytes_GET_SIZE(last_raw) == r->props_len
                        && memcmp(PyBytes_AS_STRING(last_raw), props, (size_t)r->props_len) == 0)
                    raw = Py_NewRef(last_raw);
                else
                    raw = PyBytes_FromStringAndSize((const char *)props, r->props_len);
            }
            if (arrays) {
                if (raw == NULL) {
                    Py_DECREF(topic);
                    Py_DECREF(keys);
                    Py_DECREF(uniq);
                    goto out;
                }
                const int64_t nums[8] = {0, r->qid, r->qoff, r->phys, r->size, r->store_ts, r->flags, code};
                for (int k = 1; k <= 7; k++)
                    ((int64_t *)PyBytes_AS_STRING(lists[k]))[i - first] = nums[k];
                PyList_SET_ITEM(lists[0], i - first, topic);
                PyList_SET_ITEM(lists[8], i - first, keys);
                PyList_SET_ITEM(lists[9], i - first, uniq);
                PyList_SET_ITEM(lists[10], i - first, raw);
                last_raw = raw;   /* borrowed: the list holds it */
                continue;
            }
            PyObject *ts = last_ts != NULL && last_ts_v == r->store_ts ? Py_NewRef(last_ts)
                                                                       : PyLong_FromLongLong(r->store_ts);
            PyObject *code_o = last_code != NULL && last_code_v == code ? Py_NewRef(last_code)
                                                                        : PyLong_FromLongLong(code);
            PyObject *vals[NCOLS] = {topic, PyLong_FromLong(r->qid), PyLong_FromLongLong(r->qoff),
                                     PyLong_FromLongLong(r->phys), PyLong_FromSsize_t(r->size), ts,
                                     PyLong_FromLong(r->flags), code_o, keys, uniq, raw};
            int bad = 0;
            for (int k = 0; k < NCOLS; k++)
                bad |= vals[k] == NULL;
            if (!bad && rec_gets_queue_unit(r->flags)) {
                if (members != NULL && topic == last_topic && r->qid == last_qid) {
                    PyObject *jj = PyLong_FromSsize_t(i - first);
                    bad = jj == NULL || PyList_Append(members, jj) < 0;
                    Py_XDECREF(jj);
                } else {
                    bad = add_member(by_queue, topic, vals[1], i - first, &members) < 0;
                    last_topic = topic;   /* borrowed: the topic list holds it */
                    last_qid = r->qid;
                }
            }
            if (!bad) {   /* borrowed: the lists hold them */
                last_raw = raw;
                last_ts = ts;
                last_code = code_o;
                last_ts_v = r->store_ts;
                last_code_v = code;
            }
            if (bad) {
                for (int k = 0; k < NCOLS; k++)
                    Py_XDECREF(vals[k]);
                goto out;
            }
            for (int k = 0; k < NCOLS; k++)
                PyList_SET_ITEM(lists[k], i - first, vals[k]);
        }
    }
    if (done > first) {
        if (done < n) {      /* cut short by a DELAY that is not a number: drop the unbuilt tail */
            for (int k = 0; k < NCOLS; k++) {
                if (arrays && NUMERIC(k)) {
                    PyObject *cut = PyBytes_FromStringAndSize(PyBytes_AS_STRING(lists[k]), (done - first) * 8);
                    if (cut == NULL)
                        goto out;
                    Py_SETREF(lists[k], cut);
                } else if (PyList_SetSlice(lists[k], done - first, m, NULL) < 0)
                    goto out;
            }
        }
        cols = Py_BuildValue("(OOOOOOOOOOOO)", lists[0], lists[1], lists[2], lists[3], lists[4], lists[5],
                             lists[6], lists[7], lists[8], lists[9], lists[10], by_queue);
        if (cols == NULL)
            goto out;
    } else {
        cols = Py_None;
        Py_INCREF(cols);
    }
    if (done == 0)
        result = Py_BuildValue("(nnnO)", (Py_ssize_t)0, pos, pos, cols);
    else
        result = Py_BuildValue("(nnnO)", done, recs[done - 1].pos + recs[done - 1].size, recs[done - 1].pos,
                               cols);
out:
    for (int k = 0; k < NCOLS; k++)
        Py_XDECREF(lists[k]);
    Py_XDECREF(by_queue);
    Py_XDECREF(cols);
    PyMem_Free(recs);
    PyBuffer_Release(&view);
    return result;
}

int rs_scan_init(void) {
    empty_str = PyUnicode_FromStringAndSize("", 0);
    return empty_str == NULL ? -1 : 0;
}

PyMethodDef rs_scan_methods[] = {
    {"decode_run", decode_run, METH_VARARGS,
     "The bulk decoder's walk (services.bulk_dispatch.decode_run_py is the reference)."},
    {NULL, NULL, 0, NULL},
};
