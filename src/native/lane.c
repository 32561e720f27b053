/* The put lane: MessageStore.put of a common message in one C call (put_lane.py says when a store has one).
 *
 * The data path is the Python one, step for step: the store's gates, the writer's checks (put.py
 * MessageWriter.put and _put_keyed), the record encoded straight into the mapped CommitLog segment, the
 * queue offset taken, then the dispatch of pipeline.put: the 20-byte unit into the mapped ConsumeQueue file
 * (ConsumeQueue.put's common case), the record queued for the index (IndexService.add), the reput offset
 * moved, long polls woken. Every position is the Python objects' own (MappedFile.wrote, queue_offsets,
 * max_physic_offset, ...), read and written here, so both paths always see one state.
 *
 * Whatever is not the common case is decided before anything is written and before the clock is read, and
 * answered None: the caller then runs the Python path, which does the same put its own way (a new segment,
 * a new queue or ConsumeQueue file, a page range to populate, an odd message, a refusal and its status). */
#include "native.h"
#include "put_common.h"
#include "formats/cq_unit.h"
#include "formats/record.h"
#include <string.h>

enum { T_NAME, T_TAIL, T_MAGIC, T_FAST, T_QUEUES, NT };
static const char *const TOPIC_SLOTS[NT] = {"name", "tail", "magic", "fast", "queues"};
enum { R_STATUS, R_PHYS, R_SIZE, R_QOFF, R_TS, R_NUM, R_HOST, R_QID, NR };
static const char *const RESULT_SLOTS[NR] = {"status", "physical_offset", "size", "queue_offset",
                                             "store_timestamp", "msg_num", "_host", "queue_id"};

typedef struct {
    PyObject_HEAD
    PyObject *writer, *acquire, *release, *topic_type, *cl_files, *queues_get, *cq_type, *checkpoint, *index,
        *reput, *arrivals, *health, *pipeline, *cleanup, *disk, *host, *clock, *result_type, *put_ok;
    Py_ssize_t max_body, max_record, build_at;
    Py_ssize_t t_off[NT], r_off[NR];
    /* what does not change in a mapped file (its size, start, buffer) or a queue (its segment queue, no ext),
     * kept for the last ones seen (held: identity tells they are still the ones in use) */
    struct file_cache { PyObject *mf, *buf; long long size, from, populated; } cl, cf;
    PyObject *cq, *cq_files;
} Lane;

static PyObject *s_files, *s_wbuf, *s_wrote, *s_file_size, *s_from, *s_populated, *s_buf, *s_store_ts, *s_last_phys,
    *s_queue_offsets, *s_topics, *s_ext, *s_max_phys, *s_logics_ts, *s_pending, *s_reput_from, *s_waiters,
    *s_notify, *s_writeable, *s_error, *s_plain, *s_next_check, *s_disk_full, *s_topic, *s_sys_flag,
    *s_store_host, *s_build;

static int lane_names(void) {
    if (s_files != NULL)
        return 0;
#define N(v, s) if ((v = PyUnicode_InternFromString(s)) == NULL) return -1;
    N(s_wbuf, "wbuf") N(s_wrote, "wrote") N(s_file_size, "file_size") N(s_from, "file_from_offset")
    N(s_populated, "_populated") N(s_buf, "buf") N(s_store_ts, "store_timestamp")
    N(s_last_phys, "last_physical_offset") N(s_queue_offsets, "queue_offsets") N(s_topics, "_topics")
    N(s_ext, "ext") N(s_max_phys, "max_physic_offset") N(s_logics_ts, "logics_msg_timestamp")
    N(s_pending, "_pending") N(s_reput_from, "reput_from_offset") N(s_waiters, "waiters") N(s_notify, "notify")
    N(s_writeable, "writeable") N(s_error, "error") N(s_plain, "plain") N(s_next_check, "next_disk_check")
    N(s_disk_full, "disk_full") N(s_topic, "topic") N(s_sys_flag, "sys_flag")
    N(s_store_host, "store_host") N(s_build, "build")
    N(s_files, "files")
#undef N
    return 0;
}

/* o.name as a long long: 1 and *out set, 0 when it is not an int that fits (no error), -1 on an error */
static int ll_attr(PyObject *o, PyObject *name, long long *out) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL)
        return -1;
    int ok = 0;
    if (PyLong_CheckExact(v)) {
        int overflow;
        *out = PyLong_AsLongLongAndOverflow(v, &overflow);
        ok = !overflow;
    }
    Py_DECREF(v);
    return ok;
}

static int set_ll(PyObject *o, PyObject *name, long long x) {
    PyObject *v = PyLong_FromLongLong(x);
    if (v == NULL)
        return -1;
    int r = PyObject_SetAttr(o, name, v);
    Py_DECREF(v);
    return r;
}

/* o.name is `want` (an identity check: True, False, None) */
static int attr_is(PyObject *o, PyObject *name, PyObject *want) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL)
        return -1;
    int r = v == want;
    Py_DECREF(v);
    return r;
}

/* The last mapped file of a MappedFileQueue (a list `files`): 1 and *wrote set, with c filled for it (its size,
 * start, buffer, populated end read when it is not the one cached, the populated end again when fewer than
 * `need` bytes after *wrote are populated); 0 (none, one with a write buffer), -1 */
static int last_file(PyObject *files_queue, struct file_cache *c, long long need, long long *wrote) {
    PyObject *files = PyObject_GetAttr(files_queue, s_files);
    if (files == NULL)
        return -1;
    if (!PyList_CheckExact(files) || PyList_GET_SIZE(files) == 0) {
        Py_DECREF(files);
        return 0;
    }
    PyObject *mf = PyList_GET_ITEM(files, PyList_GET_SIZE(files) - 1);
    int r = 1;
    if (mf != c->mf) {
        Py_CLEAR(c->mf);
        Py_CLEAR(c->buf);
        if ((r = attr_is(mf, s_wbuf, Py_None)) <= 0 || (r = ll_attr(mf, s_file_size, &c->size)) <= 0
                || (r = ll_attr(mf, s_from, &c->from)) <= 0 || (r = ll_attr(mf, s_populated, &c->populated)) <= 0)
            goto out;
        if ((c->buf = PyObject_GetAttr(mf, s_buf)) == NULL) {
            r = -1;
            goto out;
        }
        c->mf = Py_NewRef(mf);
    }
    if ((r = ll_attr(mf, s_wrote, wrote)) <= 0)
        goto out;
    if (*wrote + need > c->populated)   /* (only grows: MappedFile._populate) */
        r = ll_attr(mf, s_populated, &c->populated);
out:
    Py_DECREF(files);
    return r;
}

/* A writable view of a cached file's buffer holding [pos, pos + n): 1, 0 (it does not, or it was released:
 * the file was closed), -1 */
static int view_of(struct file_cache *c, long long pos, long long n, Py_buffer *v) {
    if (PyObject_GetBuffer(c->buf, v, PyBUF_WRITABLE) < 0) {
        if (!PyErr_ExceptionMatches(PyExc_ValueError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    if (pos < 0 || pos + n > v->len) {
        PyBuffer_Release(v);
        v->obj = NULL;
        return 0;
    }
    return 1;
}

/* The store's put gates (MessageStore.put: writeable, no dispatch error, no front/back dispatchers, the
 * disk not full and not due to be measured again): 1 open, 0 (Python decides), -1 */
static int gates_open(Lane *L) {
    int r;
    if ((r = attr_is(L->health, s_writeable, Py_True)) <= 0 || (r = attr_is(L->pipeline, s_error, Py_None)) <= 0
            || (r = attr_is(L->pipeline, s_plain, Py_True)) <= 0 || (r = attr_is(L->disk, s_disk_full, Py_False)) <= 0)
        return r;
    PyObject *next = PyObject_GetAttr(L->cleanup, s_next_check);
    if (next == NULL)
        return -1;
    double due = PyFloat_Check(next) ? PyFloat_AS_DOUBLE(next) : 0.0;
    Py_DECREF(next);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);    /* time.monotonic()'s clock */
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9 < due;
}

static PyObject *lane_put(Lane *L, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "put(msg, queue_id)");
        return NULL;
    }
    PyObject *msg = args[0], *qid_obj = args[1];
    if (!PyLong_CheckExact(qid_obj))
        Py_RETURN_NONE;
    int overflow;
    long long qid = PyLong_AsLongLongAndOverflow(qid_obj, &overflow);
    if (overflow || qid < 0 || qid > INT32_MAX)
        Py_RETURN_NONE;
    int r = gates_open(L);
    if (r <= 0)
        return r < 0 ? NULL : Py_NewRef(Py_None);
    /* MessageWriter.put's fast-path conditions, and a topic it has seen */
    PyObject *topic = PyObject_GetAttr(msg, s_topic), *topics = NULL, *key = NULL, *cq = NULL;
    PyObject *offsets = NULL, *pending = NULL, *out = NULL, *t = NULL;
    PyObject *o_phys = NULL, *o_size = NULL, *o_qoff = NULL, *o_ts = NULL, *o_end = NULL;
    rs_keyed k = {0};
    Py_buffer cv = {0}, qv = {0};
    int locked = 0;
    long long sys_flag;
    if (topic == NULL)
        return NULL;
    if (!PyUnicode_CheckExact(topic))
        goto none;
    if ((topics = PyObject_GetAttr(L->writer, s_topics)) == NULL)
        goto fail;
    t = PyDict_CheckExact(topics) ? PyDict_GetItemWithError(topics, topic) : NULL;
    if (t == NULL) {
        if (PyErr_Occurred())
            goto fail;
        goto none;
    }
    Py_INCREF(t);
#define TSLOT(i) (*(PyObject **)((char *)t + L->t_off[i]))
    if (Py_TYPE(t) != (PyTypeObject *)L->topic_type || TSLOT(T_FAST) != Py_True || TSLOT(T_NAME) == NULL
            || TSLOT(T_QUEUES) == NULL || !PyLong_CheckExact(TSLOT(T_QUEUES)) || TSLOT(T_TAIL) == NULL
            || !PyBytes_CheckExact(TSLOT(T_TAIL)) || TSLOT(T_MAGIC) == NULL || !PyLong_CheckExact(TSLOT(T_MAGIC)))
        goto none;
    long long queues = PyLong_AsLongLongAndOverflow(TSLOT(T_QUEUES), &overflow);
    if (overflow || queues <= qid)
        goto none;
    if ((r = ll_attr(msg, s_sys_flag, &sys_flag)) <= 0 || sys_flag != 0)
        goto answer;
    if ((r = attr_is(msg, s_store_host, Py_None)) <= 0)     /* (an IPv4 born host: rs_keyed_prepare) */
        goto answer;
    PyObject *tail = TSLOT(T_TAIL);
    if ((r = rs_keyed_prepare(msg, PyBytes_GET_SIZE(tail), L->max_body, L->max_record, &k)) <= 0)
        goto answer;
    long long size = k.size;
    /* under the put lock: the CommitLog's last segment, the queue offset, the queue's last file */
    PyObject *lr = PyObject_CallNoArgs(L->acquire);
    if (lr == NULL)
        goto fail;
    Py_DECREF(lr);
    locked = 1;
    long long wrote, cwrote;
    if ((r = last_file(L->cl_files, &L->cl, size, &wrote)) <= 0)
        goto answer;
    long long phys = L->cl.from + wrote, end = phys + size;
    if (L->cl.size - wrote < size + END_FILE_MIN_BLANK_LENGTH || wrote + size > L->cl.populated)
        goto none;      /* a new segment (BLANK filler first), or pages to populate: CommitLog.append */
    if ((key = PyTuple_Pack(2, topic, qid_obj)) == NULL || (offsets = PyObject_GetAttr(L->writer, s_queue_offsets)) == NULL)
        goto fail;
    if (!PyDict_CheckExact(offsets))
        goto none;
    PyObject *q = PyDict_GetItemWithError(offsets, key);
    long long qoff = 0;
    if (q == NULL && PyErr_Occurred())
        goto fail;
    if (q != NULL) {
        if (!PyLong_CheckExact(q))
            goto none;
        qoff = PyLong_AsLongLongAndOverflow(q, &overflow);
        if (overflow || qoff < 0 || qoff > (INT64_MAX - 1) / CQ_UNIT)
            goto none;
    }
    /* the queue: ConsumeQueue.put's common case (no ext, a started file with room, the unit it expects) */
    if ((cq = PyObject_CallOneArg(L->queues_get, key)) == NULL)
        goto fail;
    if (cq != L->cq) {
        if (Py_TYPE(cq) != (PyTypeObject *)L->cq_type)
            goto none;      /* a new queue (None), a batch ConsumeQueue */
        if ((r = attr_is(cq, s_ext, Py_None)) <= 0)
            goto answer;
        PyObject *files = PyObject_GetAttr(cq, s_files);
        if (files == NULL)
            goto fail;
        Py_XSETREF(L->cq_files, files);
        Py_XSETREF(L->cq, Py_NewRef(cq));
    }
    long long max_phys;
    if ((r = ll_attr(cq, s_max_phys, &max_phys)) <= 0 || (r = last_file(L->cq_files, &L->cf, CQ_UNIT, &cwrote)) <= 0)
        goto answer;
    if (!(cwrote > 0 && cwrote <= L->cf.size - CQ_UNIT && L->cf.from + cwrote == qoff * CQ_UNIT
          && cwrote + CQ_UNIT <= L->cf.populated && end > max_phys))
        goto none;
    if (L->index != Py_None) {
        if ((pending = PyObject_GetAttr(L->index, s_pending)) == NULL)
            goto fail;
        if (!PyList_CheckExact(pending))
            goto none;
    }
    if ((r = view_of(&L->cl, wrote, size, &cv)) <= 0 || (r = view_of(&L->cf, cwrote, CQ_UNIT, &qv)) <= 0)
        goto answer;
    /* decided: the clock, the record, the positions (as _put_keyed), then the dispatch (as pipeline.put) */
    long long store_ts;
    if ((!k.has_born && rs_clock_ms(L->clock, &k.born_ts) < 0) || rs_clock_ms(L->clock, &store_ts) < 0)
        goto fail;
    rs_keyed_write((unsigned char *)cv.buf + wrote, &k, (const unsigned char *)PyBytes_AS_STRING(tail),
                   PyBytes_GET_SIZE(tail), (int)PyLong_AsLong(TSLOT(T_MAGIC)), (int)qid, qoff, phys,
                   (const unsigned char *)PyBytes_AS_STRING(L->host), store_ts);
    unsigned char *u = (unsigned char *)qv.buf + cwrote;
    rs_put64(u + CQ_PHYS, (uint64_t)phys);
    rs_put32(u + CQ_SIZE, (uint32_t)size);
    rs_put64(u + CQ_TAGS, (uint64_t)PyLong_AsLongLong(PyTuple_GET_ITEM(k.info, 0)));
    if ((o_phys = PyLong_FromLongLong(phys)) == NULL || (o_size = PyLong_FromLongLong(size)) == NULL
            || (o_qoff = PyLong_FromLongLong(qoff)) == NULL || (o_ts = PyLong_FromLongLong(store_ts)) == NULL
            || (o_end = PyLong_FromLongLong(end)) == NULL)
        goto fail;
    PyObject *next_qoff = PyLong_FromLongLong(qoff + 1);
    if (next_qoff == NULL || PyDict_SetItem(offsets, key, next_qoff) < 0) {
        Py_XDECREF(next_qoff);
        goto fail;
    }
    Py_DECREF(next_qoff);
    if (set_ll(L->cl.mf, s_wrote, wrote + size) < 0 || PyObject_SetAttr(L->writer, s_last_phys, o_phys) < 0
            || PyObject_SetAttr(L->cl.mf, s_store_ts, o_ts) < 0 || PyObject_SetAttr(cq, s_max_phys, o_end) < 0
            || set_ll(L->cf.mf, s_wrote, cwrote + CQ_UNIT) < 0 || PyObject_SetAttr(L->checkpoint, s_logics_ts, o_ts) < 0)
        goto fail;
    if (pending != NULL) {      /* IndexService.add */
        PyObject *rec = PyTuple_New(6);
        if (rec == NULL)
            goto fail;
        PyTuple_SET_ITEM(rec, 0, Py_NewRef(TSLOT(T_NAME)));
        PyTuple_SET_ITEM(rec, 1, Py_NewRef(o_phys));
        PyTuple_SET_ITEM(rec, 2, Py_NewRef(o_ts));
        PyTuple_SET_ITEM(rec, 3, PyLong_FromLong(0));     /* (a small int: never NULL) */
        PyTuple_SET_ITEM(rec, 4, Py_NewRef(PyTuple_GET_ITEM(k.info, 2)));
        PyTuple_SET_ITEM(rec, 5, Py_NewRef(PyTuple_GET_ITEM(k.info, 1)));
        r = PyList_Append(pending, rec);
        Py_DECREF(rec);
        if (r < 0)
            goto fail;
        if (PyList_GET_SIZE(pending) >= L->build_at) {
            PyObject *b = PyObject_CallMethodNoArgs(L->index, s_build);
            if (b == NULL)
                goto fail;
            Py_DECREF(b);
        }
    }
    long long reput_from;
    if ((r = ll_attr(L->reput, s_reput_from, &reput_from)) < 0)
        goto fail;
    if ((r == 0 || end > reput_from) && PyObject_SetAttr(L->reput, s_reput_from, o_end) < 0)
        goto fail;
    PyObject *waiters = PyObject_GetAttr(L->arrivals, s_waiters);
    if (waiters == NULL)
        goto fail;
    int waiting = PyObject_IsTrue(waiters);
    Py_DECREF(waiters);
    if (waiting < 0)
        goto fail;
    if (waiting) {
        PyObject *n = PyObject_CallMethodNoArgs(L->arrivals, s_notify);
        if (n == NULL)
            goto fail;
        Py_DECREF(n);
    }
    /* PutResult(PUT_OK, phys, size, qoff, host, store_ts) with the queue id the store would set */
    PyObject *vals[NR] = {Py_NewRef(L->put_ok), Py_NewRef(o_phys), Py_NewRef(o_size), Py_NewRef(o_qoff),
                          Py_NewRef(o_ts), PyLong_FromLong(1), Py_NewRef(L->host), Py_NewRef(qid_obj)};
    out = rs_new_slotted((PyTypeObject *)L->result_type, L->r_off, vals, NR);
    goto done;
answer:
    if (r < 0)
        goto fail;
none:
    out = Py_NewRef(Py_None);
    goto done;
fail:
    out = NULL;
done:
#undef TSLOT
    if (cv.obj != NULL)
        PyBuffer_Release(&cv);
    if (qv.obj != NULL)
        PyBuffer_Release(&qv);
    if (locked) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyObject *rr = PyObject_CallNoArgs(L->release);
        if (rr == NULL) {
            Py_XDECREF(et);
            Py_XDECREF(ev);
            Py_XDECREF(tb);
            Py_CLEAR(out);
        } else {
            Py_DECREF(rr);
            PyErr_Restore(et, ev, tb);
        }
    }
    rs_keyed_clear(&k);
    Py_XDECREF(o_phys);
    Py_XDECREF(o_size);
    Py_XDECREF(o_qoff);
    Py_XDECREF(o_ts);
    Py_XDECREF(o_end);
    Py_XDECREF(t);
    Py_XDECREF(topic);
    Py_XDECREF(topics);
    Py_XDECREF(key);
    Py_XDECREF(cq);
    Py_XDECREF(offsets);
    Py_XDECREF(pending);
    return out;
}

static void lane_dealloc(Lane *L) {
    PyObject_GC_UnTrack(L);
    Py_CLEAR(L->writer); Py_CLEAR(L->acquire); Py_CLEAR(L->release); Py_CLEAR(L->topic_type);
    Py_CLEAR(L->cl_files); Py_CLEAR(L->queues_get); Py_CLEAR(L->cq_type); Py_CLEAR(L->checkpoint);
    Py_CLEAR(L->index); Py_CLEAR(L->reput); Py_CLEAR(L->arrivals); Py_CLEAR(L->health); Py_CLEAR(L->pipeline);
    Py_CLEAR(L->cleanup); Py_CLEAR(L->disk); Py_CLEAR(L->host); Py_CLEAR(L->clock); Py_CLEAR(L->result_type);
    Py_CLEAR(L->put_ok); Py_CLEAR(L->cl.mf); Py_CLEAR(L->cl.buf); Py_CLEAR(L->cf.mf); Py_CLEAR(L->cf.buf);
    Py_CLEAR(L->cq); Py_CLEAR(L->cq_files);
    Py_TYPE(L)->tp_free((PyObject *)L);
}

static int lane_traverse(Lane *L, visitproc visit, void *arg) {
    Py_VISIT(L->writer); Py_VISIT(L->acquire); Py_VISIT(L->release); Py_VISIT(L->topic_type);
    Py_VISIT(L->cl_files); Py_VISIT(L->queues_get); Py_VISIT(L->cq_type); Py_VISIT(L->checkpoint);
    Py_VISIT(L->index); Py_VISIT(L->reput); Py_VISIT(L->arrivals); Py_VISIT(L->health); Py_VISIT(L->pipeline);
    Py_VISIT(L->cleanup); Py_VISIT(L->disk); Py_VISIT(L->host); Py_VISIT(L->clock); Py_VISIT(L->result_type);
    Py_VISIT(L->put_ok); Py_VISIT(L->cl.mf); Py_VISIT(L->cl.buf); Py_VISIT(L->cf.mf); Py_VISIT(L->cf.buf);
    Py_VISIT(L->cq); Py_VISIT(L->cq_files);
    return 0;
}

static int lane_clear(Lane *L) {
    Py_CLEAR(L->writer); Py_CLEAR(L->acquire); Py_CLEAR(L->release); Py_CLEAR(L->topic_type);
    Py_CLEAR(L->cl_files); Py_CLEAR(L->queues_get); Py_CLEAR(L->cq_type); Py_CLEAR(L->checkpoint);
    Py_CLEAR(L->index); Py_CLEAR(L->reput); Py_CLEAR(L->arrivals); Py_CLEAR(L->health); Py_CLEAR(L->pipeline);
    Py_CLEAR(L->cleanup); Py_CLEAR(L->disk); Py_CLEAR(L->host); Py_CLEAR(L->clock); Py_CLEAR(L->result_type);
    Py_CLEAR(L->put_ok); Py_CLEAR(L->cl.mf); Py_CLEAR(L->cl.buf); Py_CLEAR(L->cf.mf); Py_CLEAR(L->cf.buf);
    Py_CLEAR(L->cq); Py_CLEAR(L->cq_files);
    return 0;
}

/* PutLane(writer, lock, topic_type, commitlog_files, queues_get, cq_type, checkpoint, index, reput, arrivals,
 * health, pipeline, cleanup, disk, host, clock, max_body, max_record, build_at, result_type, put_ok):
 * put_lane.py names each. */
static PyObject *lane_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
    PyObject *o[21 - 3], *lock;
    Py_ssize_t max_body, max_record, build_at;
    if (lane_names() < 0)
        return NULL;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOO!OnnnOO:PutLane", &o[0], &lock, &o[1], &o[2], &o[3], &o[4], &o[5],
                          &o[6], &o[7], &o[8], &o[9], &o[10], &o[11], &o[12], &PyBytes_Type, &o[13], &o[14],
                          &max_body, &max_record, &build_at, &o[15], &o[16]))
        return NULL;
    if (PyBytes_GET_SIZE(o[13]) != 8) {
        PyErr_SetString(PyExc_ValueError, "PutLane: the store host must be an IPv4 host (8 bytes)");
        return NULL;
    }
    if (!PyType_Check(o[1]) || !PyType_Check(o[4]) || !PyType_Check(o[15])) {
        PyErr_SetString(PyExc_TypeError, "PutLane: topic_type, cq_type and result_type must be classes");
        return NULL;
    }
    Lane *L = (Lane *)tp->tp_alloc(tp, 0);
    if (L == NULL)
        return NULL;
    if (rs_slot_offsets(o[1], TOPIC_SLOTS, NT, L->t_off) < 0 || rs_slot_offsets(o[15], RESULT_SLOTS, NR, L->r_off) < 0
            || (L->acquire = PyObject_GetAttrString(lock, "acquire")) == NULL
            || (L->release = PyObject_GetAttrString(lock, "release")) == NULL) {
        Py_DECREF(L);
        return NULL;
    }
    PyObject **dst[] = {&L->writer, &L->topic_type, &L->cl_files, &L->queues_get, &L->cq_type, &L->checkpoint,
                        &L->index, &L->reput, &L->arrivals, &L->health, &L->pipeline, &L->cleanup, &L->disk,
                        &L->host, &L->clock, &L->result_type, &L->put_ok};
    for (int i = 0; i < 17; i++)
        *dst[i] = Py_NewRef(o[i]);
    L->max_body = max_body;
    L->max_record = max_record;
    L->build_at = build_at;
    return (PyObject *)L;
}

static PyMethodDef lane_methods[] = {
    {"put", (PyCFunction)(void (*)(void))lane_put, METH_FASTCALL,
     "put(msg, queue_id) -> PutResult, or None: the Python path decides (nothing was written)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LaneType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rocketstore._native.PutLane",
    .tp_basicsize = sizeof(Lane),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "One store's put path for the common message, in C (see put_lane.py).",
    .tp_new = lane_new,
    .tp_dealloc = (destructor)lane_dealloc,
    .tp_traverse = (traverseproc)lane_traverse,
    .tp_clear = (inquiry)lane_clear,
    .tp_methods = lane_methods,
};

int rs_lane_init(PyObject *module) {
    if (PyType_Ready(&LaneType) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "PutLane", (PyObject *)&LaneType);
}
