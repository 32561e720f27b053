/* The put lane: MessageStore.put of a common message in one C call (put/lane.py says when a store has one).
 *
 * The lane is handed one object, the writer's PutState (put/state.py), and reads its fields by index through
 * their slots: STATE_FIELDS below is state.py's FIELDS, in order (exported as PUT_STATE_FIELDS; PutLane
 * refuses a state whose __slots__ differ, and tests/native/test_put_state.py holds the two equal). Of the
 * objects the state names it reads and writes only the public attributes of LANE_ATTRIBUTES (exported as
 * PUT_LANE_ATTRIBUTES; the test checks none is private), and its answers are copies of the state's put_ok.
 *
 * The data path is the Python one, step for step: the store's gates, the writer's checks (put/single.py put
 * and put_keyed), the record encoded straight into the mapped CommitLog segment, the queue offset taken,
 * then the dispatch of pipeline.put: the 20-byte unit into the mapped ConsumeQueue file (ConsumeQueue.put's
 * common case), the record put on the index's pending list (state.index), the reput offset moved, long polls woken.
 * The positions are the state's (queue_offsets, last_physical_offset) and the files' own (MappedFile.wrote,
 * max_physic_offset), so both paths always see one state.
 *
 * Whatever is not the common case is decided before anything is written and before the clock is read, and
 * answered None: the caller then runs the Python path, which does the same put its own way (a new segment,
 * a new queue or ConsumeQueue file, an odd message, a refusal and its status). */
#include "native.h"
#include "put_common.h"
#include "formats/cq_unit.h"
#include "formats/record.h"
#include <structmember.h>
#include <string.h>

/* PutState's fields (put/state.py FIELDS), in its order */
enum {
    PS_TOPICS, PS_QUEUE_OFFSETS, PS_LAST_PHYS, PS_LOCK, PS_STORE_HOST, PS_CLOCK, PS_MAX_BODY, PS_MAX_RECORD, PS_PUT_OK,
    PS_TOPIC_TYPE, PS_COMMITLOG, PS_QUEUE_OF, PS_QUEUE_TYPE, PS_CHECKPOINT, PS_INDEX, PS_INDEX_BUILD_AT, PS_REPUT,
    PS_ARRIVALS,
    PS_HEALTH, PS_PIPELINE, PS_DISK, PS_CLEANUP, NPS
};
static const char *const STATE_FIELDS[NPS] = {
    "topics", "queue_offsets", "last_physical_offset", "lock", "store_host", "clock", "max_body", "max_record",
    "put_ok", "topic_type", "commitlog", "queue_of", "queue_type", "checkpoint", "index", "index_build_at", "reput",
    "arrivals", "health", "pipeline", "disk", "cleanup"};

/* the public attributes the lane reads or writes on the objects the state names (and on the message) */
enum {
    A_TOPIC, A_SYS_FLAG, A_STORE_HOST,                                          /* Message */
    A_FILES, A_WBUF, A_FILE_SIZE, A_FROM, A_BUF, A_WROTE, A_STORE_TS,           /* MappedFileQueue, MappedFile */
    A_EXT, A_MAX_PHYS,                                                          /* ConsumeQueue */
    A_LOGICS_TS, A_REPUT_FROM, A_WAITERS, A_NOTIFY,                             /* checkpoint, reput, arrivals */
    A_PENDING, A_BUILD,                                                         /* IndexService */
    A_WRITEABLE, A_ERROR, A_PLAIN, A_DISK_FULL, A_NEXT_CHECK,                   /* the gates */
    A_ACQUIRE, A_RELEASE,                                                       /* the lock */
    NA
};
static const char *const LANE_ATTRIBUTES[NA] = {
    "topic", "sys_flag", "store_host", "files", "wbuf", "file_size", "file_from_offset", "buf", "wrote",
    "store_timestamp", "ext", "max_physic_offset", "logics_msg_timestamp", "reput_from_offset", "waiters",
    "notify", "pending", "build", "writeable", "error", "plain", "disk_full", "next_disk_check", "acquire", "release"};
static PyObject *attr[NA];      /* interned */

/* TopicInfo's slots the lane reads (put/topic.py), and the PutResult slots it sets on a copy of put_ok */
enum { T_NAME, T_TAIL, T_MAGIC, T_FAST, T_QUEUES, NT };
static const char *const TOPIC_SLOTS[NT] = {"name", "tail", "magic", "fast", "queues"};
enum { R_PHYS, R_SIZE, R_QOFF, R_TS, R_QID, NR };
static const char *const RESULT_SLOTS[NR] = {"physical_offset", "size", "queue_offset", "store_timestamp",
                                             "queue_id"};

typedef struct {
    PyObject_HEAD
    PyObject *state;
    Py_ssize_t f_off[NPS], t_off[NT], r_off[NR];
    /* derived once from fields fixed for the state's life (state.py says which) */
    PyObject *acquire, *release;
    Py_ssize_t max_body, max_record;
    /* what does not change in a mapped file (its size, start, buffer) or a queue (its segment queue, no ext),
     * kept for the last ones seen (held: identity tells they are still the ones in use) */
    struct file_cache { PyObject *mf, *buf; long long size, from; } cl, cf;
    PyObject *cq, *cq_files;
} Lane;

#define FIELD(L, i) (*(PyObject **)((char *)(L)->state + (L)->f_off[i]))

static int lane_names(void) {
    if (attr[0] != NULL)
        return 0;
    for (int i = 0; i < NA; i++)
        if ((attr[i] = PyUnicode_InternFromString(LANE_ATTRIBUTES[i])) == NULL)
            return -1;
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
 * start, buffer read when it is not the one cached); 0 (none, one with a write buffer), -1. The lane writes
 * past the pages MappedFile.append populated ahead: they fault in as written (a minor fault per page). */
static int last_file(PyObject *files_queue, struct file_cache *c, long long *wrote) {
    PyObject *files = PyObject_GetAttr(files_queue, attr[A_FILES]);
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
        if ((r = attr_is(mf, attr[A_WBUF], Py_None)) <= 0 || (r = ll_attr(mf, attr[A_FILE_SIZE], &c->size)) <= 0
                || (r = ll_attr(mf, attr[A_FROM], &c->from)) <= 0)
            goto out;
        if ((c->buf = PyObject_GetAttr(mf, attr[A_BUF])) == NULL) {
            r = -1;
            goto out;
        }
        c->mf = Py_NewRef(mf);
    }
    r = ll_attr(mf, attr[A_WROTE], wrote);
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
    if ((r = attr_is(FIELD(L, PS_HEALTH), attr[A_WRITEABLE], Py_True)) <= 0
            || (r = attr_is(FIELD(L, PS_PIPELINE), attr[A_ERROR], Py_None)) <= 0
            || (r = attr_is(FIELD(L, PS_PIPELINE), attr[A_PLAIN], Py_True)) <= 0
            || (r = attr_is(FIELD(L, PS_DISK), attr[A_DISK_FULL], Py_False)) <= 0)
        return r;
    PyObject *next = PyObject_GetAttr(FIELD(L, PS_CLEANUP), attr[A_NEXT_CHECK]);
    if (next == NULL)
        return -1;
    double due = PyFloat_Check(next) ? PyFloat_AS_DOUBLE(next) : 0.0;
    Py_DECREF(next);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);    /* time.monotonic()'s clock */
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9 < due;
}

/* A copy of the state's put_ok (every slot, whatever its name: PutResult's private ones included) with the
 * record's numbers in its public slots (references to vals stolen; none may be NULL) */
static PyObject *ok_result(Lane *L, PyObject **vals) {
    PyObject *proto = FIELD(L, PS_PUT_OK);
    PyTypeObject *tp = Py_TYPE(proto);
    PyObject *o = tp->tp_alloc(tp, 0);
    if (o != NULL) {
        for (PyTypeObject *t = tp; t != NULL && t != &PyBaseObject_Type; t = t->tp_base)
            for (PyMemberDef *m = t->tp_members; m != NULL && m->name != NULL; m++)
                if (m->type == T_OBJECT_EX)
                    *(PyObject **)((char *)o + m->offset) = Py_XNewRef(*(PyObject **)((char *)proto + m->offset));
    }
    for (int k = 0; k < NR; k++) {
        if (o == NULL) {
            Py_DECREF(vals[k]);
            continue;
        }
        PyObject **slot = (PyObject **)((char *)o + L->r_off[k]);
        Py_XSETREF(*slot, vals[k]);
    }
    return o;
}

/* IndexService.add without the call: the record's entry (topic, phy, store time, sysFlag 0, UNIQ_KEY, KEYS) on
 * the service's pending list, which build() places once index_build_at are waiting. 0, -1 */
static int index_add(Lane *L, PyObject *index, PyObject *name, PyObject *o_phys, PyObject *o_ts, PyObject *info) {
    PyObject *pending = PyObject_GetAttr(index, attr[A_PENDING]);
    if (pending == NULL)
        return -1;
    int r = -1;
    if (!PyList_CheckExact(pending)) {
        PyErr_SetString(PyExc_TypeError, "IndexService.pending is not a list");
        goto done;
    }
    PyObject *rec = PyTuple_New(6);
    if (rec == NULL)
        goto done;
    PyTuple_SET_ITEM(rec, 0, Py_NewRef(name));
    PyTuple_SET_ITEM(rec, 1, Py_NewRef(o_phys));
    PyTuple_SET_ITEM(rec, 2, Py_NewRef(o_ts));
    PyTuple_SET_ITEM(rec, 3, PyLong_FromLong(0));     /* (a small int: never NULL) */
    PyTuple_SET_ITEM(rec, 4, Py_NewRef(PyTuple_GET_ITEM(info, 2)));
    PyTuple_SET_ITEM(rec, 5, Py_NewRef(PyTuple_GET_ITEM(info, 1)));
    int appended = PyList_Append(pending, rec);
    Py_DECREF(rec);
    if (appended < 0)
        goto done;
    Py_ssize_t build_at = PyLong_AsSsize_t(FIELD(L, PS_INDEX_BUILD_AT));
    if (build_at == -1 && PyErr_Occurred())
        goto done;
    if (PyList_GET_SIZE(pending) >= build_at) {
        PyObject *b = PyObject_CallMethodObjArgs(index, attr[A_BUILD], NULL);
        if (b == NULL)
            goto done;
        Py_DECREF(b);
    }
    r = 0;
done:
    Py_DECREF(pending);
    return r;
}

/* The dispatch's effects after the unit (pipeline.put, ConsumeQueue dispatcher and index): the checkpoint's
 * logics time, the index, reput's offset, long polls. 0, -1 */
static int dispatched(Lane *L, PyObject *name, PyObject *o_phys, PyObject *o_ts, PyObject *o_end, long long end,
                      PyObject *info) {
    if (PyObject_SetAttr(FIELD(L, PS_CHECKPOINT), attr[A_LOGICS_TS], o_ts) < 0)
        return -1;
    PyObject *index = FIELD(L, PS_INDEX);
    if (index != Py_None && index_add(L, index, name, o_phys, o_ts, info) < 0)
        return -1;
    PyObject *reput = FIELD(L, PS_REPUT);
    long long reput_from;
    int r = ll_attr(reput, attr[A_REPUT_FROM], &reput_from);
    if (r < 0 || ((r == 0 || end > reput_from) && PyObject_SetAttr(reput, attr[A_REPUT_FROM], o_end) < 0))
        return -1;
    PyObject *arrivals = FIELD(L, PS_ARRIVALS);
    PyObject *waiters = PyObject_GetAttr(arrivals, attr[A_WAITERS]);
    if (waiters == NULL)
        return -1;
    int waiting = PyObject_IsTrue(waiters);
    Py_DECREF(waiters);
    if (waiting < 0)
        return -1;
    if (waiting) {
        PyObject *n = PyObject_CallMethodNoArgs(arrivals, attr[A_NOTIFY]);
        if (n == NULL)
            return -1;
        Py_DECREF(n);
    }
    return 0;
}

/* queue_of(key). QueueTable.get_by_key is a dict's bound get: the lane then looks the key up in that dict
 * itself, the same answer without the call (dict_get: dict.get's C function, found at the first PutLane) */
static PyCFunction dict_get;

static PyObject *queue_for(PyObject *queue_of, PyObject *key) {
    if (PyCFunction_Check(queue_of) && PyCFunction_GET_FUNCTION(queue_of) == dict_get) {
        PyObject *d = PyCFunction_GET_SELF(queue_of);
        if (d != NULL && PyDict_CheckExact(d)) {
            PyObject *q = PyDict_GetItemWithError(d, key);
            return q != NULL ? Py_NewRef(q) : PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
        }
    }
    return PyObject_CallOneArg(queue_of, key);
}

static int find_dict_get(void) {
    if (dict_get != NULL)
        return 0;
    PyObject *d = PyDict_New(), *get = d != NULL ? PyObject_GetAttrString(d, "get") : NULL;
    if (get != NULL && PyCFunction_Check(get))
        dict_get = PyCFunction_GET_FUNCTION(get);
    Py_XDECREF(get);
    Py_XDECREF(d);
    return d == NULL || get == NULL ? -1 : 0;
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
    PyObject *topic = PyObject_GetAttr(msg, attr[A_TOPIC]), *key = NULL, *cq = NULL, *out = NULL, *t = NULL;
    PyObject *o_phys = NULL, *o_size = NULL, *o_qoff = NULL, *o_ts = NULL, *o_end = NULL;
    rs_keyed k = {0};
    Py_buffer cv = {0}, qv = {0};
    int locked = 0;
    long long sys_flag;
    if (topic == NULL)
        return NULL;
    if (!PyUnicode_CheckExact(topic))
        goto none;
    PyObject *topics = FIELD(L, PS_TOPICS);
    t = PyDict_CheckExact(topics) ? PyDict_GetItemWithError(topics, topic) : NULL;
    if (t == NULL) {
        if (PyErr_Occurred())
            goto fail;
        goto none;
    }
    Py_INCREF(t);
#define TSLOT(i) (*(PyObject **)((char *)t + L->t_off[i]))
    if (Py_TYPE(t) != (PyTypeObject *)FIELD(L, PS_TOPIC_TYPE) || TSLOT(T_FAST) != Py_True || TSLOT(T_NAME) == NULL
            || TSLOT(T_QUEUES) == NULL || !PyLong_CheckExact(TSLOT(T_QUEUES)) || TSLOT(T_TAIL) == NULL
            || !PyBytes_CheckExact(TSLOT(T_TAIL)) || TSLOT(T_MAGIC) == NULL || !PyLong_CheckExact(TSLOT(T_MAGIC)))
        goto none;
    long long queues = PyLong_AsLongLongAndOverflow(TSLOT(T_QUEUES), &overflow);
    if (overflow || queues <= qid)
        goto none;
    if ((r = ll_attr(msg, attr[A_SYS_FLAG], &sys_flag)) <= 0 || sys_flag != 0)
        goto answer;
    if ((r = attr_is(msg, attr[A_STORE_HOST], Py_None)) <= 0)     /* (an IPv4 born host: rs_keyed_prepare) */
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
    if ((r = last_file(FIELD(L, PS_COMMITLOG), &L->cl, &wrote)) <= 0)
        goto answer;
    long long phys = L->cl.from + wrote, end = phys + size;
    if (L->cl.size - wrote < size + END_FILE_MIN_BLANK_LENGTH)
        goto none;      /* a new segment (BLANK filler first): CommitLog.append */
    PyObject *offsets = FIELD(L, PS_QUEUE_OFFSETS);
    if (!PyDict_CheckExact(offsets))
        goto none;
    if ((key = PyTuple_Pack(2, topic, qid_obj)) == NULL)
        goto fail;
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
    if ((cq = queue_for(FIELD(L, PS_QUEUE_OF), key)) == NULL)
        goto fail;
    if (cq != L->cq) {
        if (Py_TYPE(cq) != (PyTypeObject *)FIELD(L, PS_QUEUE_TYPE))
            goto none;      /* a new queue (None), a batch ConsumeQueue */
        if ((r = attr_is(cq, attr[A_EXT], Py_None)) <= 0)
            goto answer;
        PyObject *files = PyObject_GetAttr(cq, attr[A_FILES]);
        if (files == NULL)
            goto fail;
        Py_XSETREF(L->cq_files, files);
        Py_XSETREF(L->cq, Py_NewRef(cq));
    }
    long long max_phys;
    if ((r = ll_attr(cq, attr[A_MAX_PHYS], &max_phys)) <= 0 || (r = last_file(L->cq_files, &L->cf, &cwrote)) <= 0)
        goto answer;
    if (!(cwrote > 0 && cwrote <= L->cf.size - CQ_UNIT && L->cf.from + cwrote == qoff * CQ_UNIT && end > max_phys))
        goto none;
    if ((r = view_of(&L->cl, wrote, size, &cv)) <= 0 || (r = view_of(&L->cf, cwrote, CQ_UNIT, &qv)) <= 0)
        goto answer;
    /* decided: the clock, the record, the positions (as put_keyed), then the dispatch (as pipeline.put) */
    PyObject *clock = FIELD(L, PS_CLOCK), *host = FIELD(L, PS_STORE_HOST);
    long long store_ts;
    if ((!k.has_born && rs_clock_ms(clock, &k.born_ts) < 0) || rs_clock_ms(clock, &store_ts) < 0)
        goto fail;
    rs_keyed_write((unsigned char *)cv.buf + wrote, &k, (const unsigned char *)PyBytes_AS_STRING(tail),
                   PyBytes_GET_SIZE(tail), (int)PyLong_AsLong(TSLOT(T_MAGIC)), (int)qid, qoff, phys,
                   (const unsigned char *)PyBytes_AS_STRING(host), store_ts);
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
    Py_XSETREF(FIELD(L, PS_LAST_PHYS), Py_NewRef(o_phys));
    if (set_ll(L->cl.mf, attr[A_WROTE], wrote + size) < 0 || PyObject_SetAttr(L->cl.mf, attr[A_STORE_TS], o_ts) < 0
            || PyObject_SetAttr(cq, attr[A_MAX_PHYS], o_end) < 0
            || set_ll(L->cf.mf, attr[A_WROTE], cwrote + CQ_UNIT) < 0
            || dispatched(L, TSLOT(T_NAME), o_phys, o_ts, o_end, end, k.info) < 0)
        goto fail;
    /* PutResult(PUT_OK, phys, size, qoff, host, store_ts) with the queue id the store would set */
    PyObject *vals[NR] = {Py_NewRef(o_phys), Py_NewRef(o_size), Py_NewRef(o_qoff), Py_NewRef(o_ts),
                          Py_NewRef(qid_obj)};
    out = ok_result(L, vals);
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
    Py_XDECREF(key);
    Py_XDECREF(cq);
    return out;
}

static int lane_clear(Lane *L) {
    Py_CLEAR(L->state); Py_CLEAR(L->acquire); Py_CLEAR(L->release);
    Py_CLEAR(L->cl.mf); Py_CLEAR(L->cl.buf); Py_CLEAR(L->cf.mf); Py_CLEAR(L->cf.buf);
    Py_CLEAR(L->cq); Py_CLEAR(L->cq_files);
    return 0;
}

static void lane_dealloc(Lane *L) {
    PyObject_GC_UnTrack(L);
    lane_clear(L);
    Py_TYPE(L)->tp_free((PyObject *)L);
}

static int lane_traverse(Lane *L, visitproc visit, void *arg) {
    Py_VISIT(L->state); Py_VISIT(L->acquire); Py_VISIT(L->release);
    Py_VISIT(L->cl.mf); Py_VISIT(L->cl.buf); Py_VISIT(L->cf.mf); Py_VISIT(L->cf.buf);
    Py_VISIT(L->cq); Py_VISIT(L->cq_files);
    return 0;
}

/* A tuple of C strings */
static PyObject *names_tuple(const char *const *names, int n) {
    PyObject *t = PyTuple_New(n);
    if (t == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *s = PyUnicode_FromString(names[i]);
        if (s == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, s);
    }
    return t;
}

/* type(state).__slots__ is STATE_FIELDS, in order: 1, 0 (not), -1 */
static int state_matches(PyObject *state) {
    PyObject *slots = PyObject_GetAttrString((PyObject *)Py_TYPE(state), "__slots__");
    if (slots == NULL) {
        PyErr_Clear();
        return 0;
    }
    PyObject *want = names_tuple(STATE_FIELDS, NPS);
    int r = -1;
    if (want != NULL) {
        PyObject *got = PySequence_Tuple(slots);
        if (got != NULL) {
            r = PyObject_RichCompareBool(got, want, Py_EQ);
            Py_DECREF(got);
        }
        Py_DECREF(want);
    }
    Py_DECREF(slots);
    return r;
}

/* A field that is an int fitting Py_ssize_t: 0, -1 (TypeError) */
static int ssize_field(Lane *L, int i, Py_ssize_t *out) {
    PyObject *v = FIELD(L, i);
    *out = v != NULL && PyLong_CheckExact(v) ? PyLong_AsSsize_t(v) : -1;
    if (*out < 0) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "PutLane: state.%s must be a non-negative int", STATE_FIELDS[i]);
        return -1;
    }
    return 0;
}

/* PutLane(state): state is a PutState (put/state.py) with every field set (clock and index may be None) */
static PyObject *lane_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
    PyObject *state;
    if (lane_names() < 0 || find_dict_get() < 0 || !PyArg_ParseTuple(args, "O:PutLane", &state))
        return NULL;
    int r = state_matches(state);
    if (r <= 0) {
        if (r == 0)
            PyErr_SetString(PyExc_TypeError, "PutLane: the state's __slots__ must be PUT_STATE_FIELDS, in order");
        return NULL;
    }
    Lane *L = (Lane *)tp->tp_alloc(tp, 0);
    if (L == NULL)
        return NULL;
    L->state = Py_NewRef(state);
    if (rs_slot_offsets((PyObject *)Py_TYPE(state), STATE_FIELDS, NPS, L->f_off) < 0)
        goto fail;
    for (int i = 0; i < NPS; i++)
        if (FIELD(L, i) == NULL || (FIELD(L, i) == Py_None && i != PS_CLOCK && i != PS_INDEX)) {
            PyErr_Format(PyExc_ValueError, "PutLane: state.%s is not set", STATE_FIELDS[i]);
            goto fail;
        }
    PyObject *host = FIELD(L, PS_STORE_HOST);
    if (!PyBytes_CheckExact(host) || PyBytes_GET_SIZE(host) != 8) {
        PyErr_SetString(PyExc_ValueError, "PutLane: the store host must be an IPv4 host (8 bytes)");
        goto fail;
    }
    if (!PyType_Check(FIELD(L, PS_TOPIC_TYPE)) || !PyType_Check(FIELD(L, PS_QUEUE_TYPE))) {
        PyErr_SetString(PyExc_TypeError, "PutLane: topic_type and queue_type must be classes");
        goto fail;
    }
    if (rs_slot_offsets(FIELD(L, PS_TOPIC_TYPE), TOPIC_SLOTS, NT, L->t_off) < 0
            || rs_slot_offsets((PyObject *)Py_TYPE(FIELD(L, PS_PUT_OK)), RESULT_SLOTS, NR, L->r_off) < 0
            || ssize_field(L, PS_MAX_BODY, &L->max_body) < 0 || ssize_field(L, PS_MAX_RECORD, &L->max_record) < 0
            || (L->acquire = PyObject_GetAttr(FIELD(L, PS_LOCK), attr[A_ACQUIRE])) == NULL
            || (L->release = PyObject_GetAttr(FIELD(L, PS_LOCK), attr[A_RELEASE])) == NULL)
        goto fail;
    return (PyObject *)L;
fail:
    Py_DECREF(L);
    return NULL;
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
    .tp_doc = "One store's put path for the common message, in C, over its PutState (see put/lane.py).",
    .tp_new = lane_new,
    .tp_dealloc = (destructor)lane_dealloc,
    .tp_traverse = (traverseproc)lane_traverse,
    .tp_clear = (inquiry)lane_clear,
    .tp_methods = lane_methods,
};

int rs_lane_init(PyObject *module) {
    if (PyType_Ready(&LaneType) < 0 || PyModule_AddObjectRef(module, "PutLane", (PyObject *)&LaneType) < 0)
        return -1;
    PyObject *fields = names_tuple(STATE_FIELDS, NPS), *attrs = names_tuple(LANE_ATTRIBUTES, NA);
    if (fields == NULL || PyModule_AddObject(module, "PUT_STATE_FIELDS", fields) < 0) {
        Py_XDECREF(fields);
        Py_XDECREF(attrs);
        return -1;
    }
    if (attrs == NULL || PyModule_AddObject(module, "PUT_LANE_ATTRIBUTES", attrs) < 0) {
        Py_XDECREF(attrs);
        return -1;
    }
    return 0;
}
