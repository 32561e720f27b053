/* The scan path's loops (see native.h): the bulk decoder of reput, recovery and the rebuild
 * (services.bulk_dispatch.decode_run_py is the reference); the record walk (rs_walk_one, scan.h) is shared
 * with verify's record table (verify.c).
 *
 * Two phases: the walk over the mapped bytes (TOTALSIZE chain, every bound check of
 * formats.record_scan.scan, the body CRC, the properties' item positions) runs without the GIL into a C
 * array bounded by the bytes walked; the Python objects are built afterwards, with the GIL. */
#include "scan.h"
#include <string.h>
#include <zlib.h>
#include <structmember.h>

static const char SCHEDULE_TOPIC[] = "SCHEDULE_TOPIC_XXXX";

/* ------------------------------------------------------------------ str caches */
/* A direct-mapped cache of bytes -> str (UTF-8, errors "replace"), as formats.record's _TOPICS and
 * bulk_dispatch's _topic_cache: topics repeat, so most records find theirs here. GIL held. */
#define STR_CACHE_SLOTS 256
typedef struct {
    PyObject *key;     /* bytes */
    PyObject *value;   /* str */
} rs_str_slot;
static rs_str_slot topic_cache[STR_CACHE_SLOTS];

static uint32_t fnv1a(const unsigned char *p, Py_ssize_t n) {
    uint32_t h = 2166136261u;
    for (Py_ssize_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

PyObject *rs_cached_str(const unsigned char *p, Py_ssize_t n) {
    rs_str_slot *s = &topic_cache[fnv1a(p, n) & (STR_CACHE_SLOTS - 1)];
    if (s->key != NULL && PyBytes_GET_SIZE(s->key) == n && memcmp(PyBytes_AS_STRING(s->key), p, (size_t)n) == 0) {
        Py_INCREF(s->value);
        return s->value;
    }
    PyObject *v = PyUnicode_DecodeUTF8((const char *)p, n, "replace");
    if (v == NULL)
        return NULL;
    if (n <= 1024) {      /* a long one would only push out the usual topics */
        PyObject *k = PyBytes_FromStringAndSize((const char *)p, n);
        if (k == NULL) {
            Py_DECREF(v);
            return NULL;
        }
        Py_XDECREF(s->key);
        Py_XDECREF(s->value);
        s->key = k;
        Py_INCREF(v);
        s->value = v;
    }
    return v;
}

uint32_t rs_crc32(const unsigned char *p, Py_ssize_t n) {
    uLong c = crc32(0L, Z_NULL, 0);
    while (n > 0) {
        uInt chunk = n > (Py_ssize_t)0x40000000 ? 0x40000000u : (uInt)n;
        c = crc32(c, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return (uint32_t)c;
}

/* ------------------------------------------------------------------ the walk */
/* The fixed checks of record_scan.chain and record_scan.scan for the record at p (limit: where the run must
 * end). 0: not a record the bulk path takes (the run stops before it); 1: r filled. */
int rs_walk_one(const unsigned char *b, Py_ssize_t p, Py_ssize_t limit, rs_rec *r, int32_t *crc,
                    Py_ssize_t *body_pos, Py_ssize_t *body_len) {
    if (p + 8 > limit)
        return 0;
    int32_t size = rs_be32(b + p), magic = rs_be32(b + p + 4);
    if ((magic != MAGIC_V1 && magic != MAGIC_V2) || size < MIN_RECORD || (Py_ssize_t)size > limit - p)
        return 0;
    /* size >= 91: every fixed field read below (up to byte 76 + 8) is inside the record */
    int32_t flags = rs_be32(b + p + 36);
    Py_ssize_t born = (flags & BORNHOST_V6_FLAG) ? 20 : 8, store = (flags & STOREHOST_V6_FLAG) ? 20 : 8;
    Py_ssize_t fixed = 48 + born + 8 + store + 16;
    if (fixed > size || (flags & INNER_BATCH_FLAG))
        return 0;
    int v2 = magic == MAGIC_V2;
    Py_ssize_t tw = v2 ? 2 : 1;
    int64_t blen = rs_be32(b + p + fixed - 4);
    if (blen < 0 || fixed + blen + tw > size)
        return 0;
    Py_ssize_t at = p + fixed + (Py_ssize_t)blen;
    Py_ssize_t tlen = v2 ? rs_be16(b + at) : b[at];
    Py_ssize_t tpos = at + tw, rend = p + size;
    if (tpos + tlen + 2 > rend)
        return 0;
    Py_ssize_t plen = rs_be16(b + tpos + tlen);
    if (plen >= 0x8000)
        plen = 0;    /* Java reads a negative short and skips the properties */
    Py_ssize_t ppos = tpos + tlen + 2;
    if (ppos + plen != rend)
        return 0;
    r->pos = p;
    r->size = size;
    r->qid = rs_be32(b + p + 12);
    r->flags = flags;
    r->qoff = rs_be64(b + p + 20);
    r->phys = rs_be64(b + p + 28);
    r->store_ts = rs_be64(b + p + 48 + born);
    r->topic_pos = tpos;
    r->topic_len = tlen;
    r->props_pos = ppos;
    r->props_len = plen;
    *crc = rs_be32(b + p + 8);
    *body_pos = p + fixed;
    *body_len = (Py_ssize_t)blen;
    return 1;
}

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
    Py_ssize_t cap = limit > pos ? (limit - pos) / MIN_RECORD + 1 : 1;
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

/* decode_run(buf, pos, limit, max_records, check_crc, dispatch_after, delay_code) ->
 *   (done, after, last, columns): columns None or the arguments of DispatchColumns (topic, queue_id,
 *   queue_offset, phys, size, store_ts, sys_flag, tags_code, keys, uniq, props, by_queue).
 * delay_code(topic, raw_props, store_ts, sys_flag) gives a SCHEDULE_TOPIC_XXXX record's tagsCode; a
 * ValueError from it ends the run before that record. */
static PyObject *decode_run(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, limit, max_records;
    int check_crc;
    long long dispatch_after;
    PyObject *delay_code;
    if (!PyArg_ParseTuple(args, "y*nnnpLO:decode_run", &view, &pos, &limit, &max_records, &check_crc,
                          &dispatch_after, &delay_code))
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
            if ((lists[k] = PyList_New(m)) == NULL)
                goto out;
        if ((by_queue = PyDict_New()) == NULL)
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
            int tran = r->flags & 0xC;
            if (!bad && (tran == 0 || tran == 0x8)) {   /* gets_queue_unit: normal or committed */
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
            for (int k = 0; k < NCOLS; k++)
                if (PyList_SetSlice(lists[k], done - first, m, NULL) < 0)
                    goto out;
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

static int member_offset(PyObject *type, const char *name, Py_ssize_t *off) {
    PyObject *d = PyObject_GetAttrString(type, name);
    if (d == NULL)
        return -1;
    int ok = Py_IS_TYPE(d, &PyMemberDescr_Type)
        && ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX;
    if (ok)
        *off = ((PyMemberDescrObject *)d)->d_member->offset;
    Py_DECREF(d);
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "%s is not a __slots__ member", name);
        return -1;
    }
    return 0;
}

int rs_slot_offsets(PyObject *type, const char *const *names, int n, Py_ssize_t *offsets) {
    if (!PyType_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "a class with __slots__ is needed");
        return -1;
    }
    for (int k = 0; k < n; k++)
        if (member_offset(type, names[k], &offsets[k]) < 0)
            return -1;
    return 0;
}

/* A new instance of a __slots__ class with its slots set (references stolen; none may be NULL). */
PyObject *rs_new_slotted(PyTypeObject *tp, const Py_ssize_t *offsets, PyObject **vals, int n) {
    PyObject *o = tp->tp_alloc(tp, 0);
    if (o == NULL) {
        for (int k = 0; k < n; k++)
            Py_DECREF(vals[k]);
        return NULL;
    }
    for (int k = 0; k < n; k++) {
        PyObject **slot = (PyObject **)((char *)o + offsets[k]);
        Py_XSETREF(*slot, vals[k]);
    }
    return o;
}

int rs_scan_init(PyObject *m) {
    empty_str = PyUnicode_FromStringAndSize("", 0);
    return empty_str == NULL ? -1 : rs_verify_init(m);
}

PyMethodDef rs_scan_methods[] = {
    {"decode_run", decode_run, METH_VARARGS,
     "The bulk decoder's walk (services.bulk_dispatch.decode_run_py is the reference)."},
    {NULL, NULL, 0, NULL},
};
