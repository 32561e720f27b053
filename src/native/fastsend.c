/* fast_send(state, cmd, remote) -> bytes | None: the common send answered in one call (remoting/broker/
 * fast_send.py, whose fast_send_py is the reference and says which requests it takes). The request's header
 * fields are read from its extFields, the topic's permit and the properties' stored order from the state's
 * caches (made by Python on a miss), the message put through the store's put (the put lane's C for the common
 * one), the answer frame written here, the metrics bumped in meter.c. Whatever is not the plain case is None
 * before anything is written: the server hands the request to send.py. */
#include "native.h"
#include <structmember.h>
#include <string.h>
#include <time.h>

/* FastSendState's fields (fast_send.py), by position */
enum { FS_PUT, FS_LANE, FS_MESSAGE, FS_STORE, FS_PERMITS, FS_SEEN, FS_PERMIT, FS_ORDERS, FS_ORDER, FS_CLUSTER, FS_OK,
       FS_WAITERS, FS_ARRIVED, FS_ANSWER, FS_VERSION, FS_METER, FS_FIELDS };

/* the header fields, in fast_send.py's _FIELDS order: the V2 request's short names, SEND_MESSAGE's long ones */
enum { H_GROUP, H_TOPIC, H_DEFAULT_TOPIC, H_DEFAULT_QUEUES, H_QUEUE, H_SYS_FLAG, H_BORN, H_FLAG, H_PROPS,
       H_RECONSUME, H_MAX_RECONSUME, H_BATCH, NH };
static const char *const V2_NAMES[NH] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "l", "m"};
static const char *const V1_NAMES[NH] = {
    "producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag", "bornTimestamp", "flag",
    "properties", "reconsumeTimes", "maxReconsumeTimes", "batch"};
static PyObject *v2[NH], *v1[NH];

/* property names a plain message does not carry (fast_send.py NOT_PLAIN: metrics.TYPED_NAMES and CLUSTER;
 * exported as FAST_SEND_NOT_PLAIN, a test holds the two equal) */
static const char *const NOT_PLAIN[] = {"TRAN_MSG", "__SHARDINGKEY", "__STARTDELIVERTIME", "DELAY",
                                        "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS", "CLUSTER"};
#define N_NOT_PLAIN (sizeof(NOT_PLAIN) / sizeof(NOT_PLAIN[0]))
#define MAX_PAIRS 128   /* more properties than a producer sets: send.py takes them */

static PyObject *s_code, *s_flag, *s_ext, *s_body, *s_opaque, *s_topic_configs, *s_status, *s_phys, *s_qoff,
    *s_host, *s_put, *kwnames;

/* LaneMessage: what the put lane reads of a Message (lane.c, put.c rs_keyed_prepare), and no more: the send's
 * message for the lane without a Message's __init__ (a fifth of a send's instructions). The lane answers None
 * for anything it does not put, and a real Message goes to the store's put then. */
typedef struct {
    PyObject_HEAD
    PyObject *topic, *body, *flag, *sys_flag, *born_timestamp, *born_host, *reconsume_times, *pto, *store_host,
        *raw_properties;
} LaneMessage;

static PyMemberDef lane_message_members[] = {
    {"topic", T_OBJECT_EX, offsetof(LaneMessage, topic), READONLY, NULL},
    {"body", T_OBJECT_EX, offsetof(LaneMessage, body), READONLY, NULL},
    {"flag", T_OBJECT_EX, offsetof(LaneMessage, flag), READONLY, NULL},
    {"sys_flag", T_OBJECT_EX, offsetof(LaneMessage, sys_flag), READONLY, NULL},
    {"born_timestamp", T_OBJECT_EX, offsetof(LaneMessage, born_timestamp), READONLY, NULL},
    {"born_host", T_OBJECT_EX, offsetof(LaneMessage, born_host), READONLY, NULL},
    {"reconsume_times", T_OBJECT_EX, offsetof(LaneMessage, reconsume_times), READONLY, NULL},
    {"prepared_transaction_offset", T_OBJECT_EX, offsetof(LaneMessage, pto), READONLY, NULL},
    {"store_host", T_OBJECT_EX, offsetof(LaneMessage, store_host), READONLY, NULL},
    {"raw_properties", T_OBJECT_EX, offsetof(LaneMessage, raw_properties), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static void lane_message_dealloc(LaneMessage *m) {
    Py_XDECREF(m->topic); Py_XDECREF(m->body); Py_XDECREF(m->flag); Py_XDECREF(m->sys_flag);
    Py_XDECREF(m->born_timestamp); Py_XDECREF(m->born_host); Py_XDECREF(m->reconsume_times); Py_XDECREF(m->pto);
    Py_XDECREF(m->store_host); Py_XDECREF(m->raw_properties);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

static PyTypeObject LaneMessageType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rocketstore._native.LaneMessage",
    .tp_basicsize = sizeof(LaneMessage),
    .tp_dealloc = (destructor)lane_message_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A send's message as the put lane reads it (fastsend.c): no constructor from Python.",
    .tp_members = lane_message_members,
};

/* steals nothing: each field gets its own reference */
static PyObject *lane_message(PyObject *topic, PyObject *body, PyObject *flag, PyObject *zero, PyObject *born,
                              PyObject *born_host, PyObject *reconsume, PyObject *props) {
    LaneMessage *m = PyObject_New(LaneMessage, &LaneMessageType);
    if (m == NULL)
        return NULL;
    m->topic = Py_NewRef(topic); m->body = Py_NewRef(body); m->flag = Py_NewRef(flag); m->sys_flag = Py_NewRef(zero);
    m->born_timestamp = Py_NewRef(born); m->born_host = Py_NewRef(born_host);
    m->reconsume_times = Py_NewRef(reconsume); m->pto = Py_NewRef(zero); m->store_host = Py_NewRef(Py_None);
    m->raw_properties = Py_NewRef(props);
    return (PyObject *)m;
}

/* the decimal digits of v at w: their count */
static int put_decimal(char *w, long long v) {
    char tmp[24];
    int n = 0, neg = v < 0;
    unsigned long long u = neg ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    int len = 0;
    if (neg)
        w[len++] = '-';
    while (n)
        w[len++] = tmp[--n];
    return len;
}

static char *put_text(char *w, const char *s) {
    size_t n = strlen(s);
    memcpy(w, s, n);
    return w + n;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1000.0 + (double)t.tv_nsec / 1e6;
}

/* a header number written plainly (an optional '-', 1..19 ASCII digits) within [lo, hi]: 1 and *out; else 0 */
static int plain_number(PyObject *text, long long lo, long long hi, long long *out) {
    Py_ssize_t n;
    const char *p = PyUnicode_AsUTF8AndSize(text, &n);
    if (p == NULL) {
        PyErr_Clear();
        return 0;
    }
    int neg = n > 0 && p[0] == '-';
    Py_ssize_t i = neg, digits = n - neg;
    if (digits < 1 || digits > 19)
        return 0;
    unsigned long long v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return 0;
        v = v * 10 + (unsigned long long)(p[i] - '0');    /* 19 digits fit 64 unsigned bits */
    }
    if (neg ? v > (unsigned long long)INT64_MAX + 1ULL : v > (unsigned long long)INT64_MAX)
        return 0;
    long long x = neg ? (long long)(0ULL - v) : (long long)v;
    if (x < lo || x > hi)
        return 0;
    *out = x;
    return 1;
}

static int ascii_true(PyObject *text) {     /* Boolean.parseBoolean: "true" in any case */
    Py_ssize_t n;
    const char *p = PyUnicode_AsUTF8AndSize(text, &n);
    if (p == NULL) {
        PyErr_Clear();
        return -1;
    }
    if (n != 4)
        return 0;
    const char *t = "true";
    for (int i = 0; i < 4; i++)
        if ((p[i] | 0x20) != t[i])
            return 0;
    return 1;
}

struct pair { Py_ssize_t a, b, c, e; };     /* name [a, b), value [c, e) in the properties' UTF-8 */

/* fast_send.py _plain_pairs: the pairs of a plain properties text, and UNIQ_KEY's; the count, or -1 (not plain) */
static Py_ssize_t plain_pairs(const char *p, Py_ssize_t n, struct pair *out, Py_ssize_t *uniq) {
    Py_ssize_t count = 0, pos = 0;
    *uniq = -1;
    while (pos <= n) {
        const char *stop = memchr(p + pos, '\x02', (size_t)(n - pos));
        Py_ssize_t end = stop ? stop - p : n;
        if (end > pos) {
            const char *sep = memchr(p + pos, '\x01', (size_t)(end - pos));
            if (sep == NULL || sep == p + pos || sep == p + end - 1 || count == MAX_PAIRS)
                return -1;
            struct pair q = {pos, sep - p, sep - p + 1, end};
            size_t len = (size_t)(q.b - q.a);
            for (size_t k = 0; k < N_NOT_PLAIN; k++)
                if (strlen(NOT_PLAIN[k]) == len && memcmp(NOT_PLAIN[k], p + q.a, len) == 0)
                    return -1;
            for (Py_ssize_t k = 0; k < count; k++)
                if (out[k].b - out[k].a == q.b - q.a && memcmp(p + out[k].a, p + q.a, len) == 0)
                    return -1;
            if (len == 8 && memcmp(p + q.a, "UNIQ_KEY", 8) == 0) {
                for (Py_ssize_t k = q.c; k < q.e; k++)     /* printable ASCII but '"' and '\\' */
                    if (p[k] < 0x20 || p[k] > 0x7e || p[k] == '"' || p[k] == '\\')
                        return -1;
                *uniq = count;
            }
            out[count++] = q;
        } else if (end != n) {      /* an empty pair inside (parse_properties drops it): only the last may be */
            return -1;
        }
        if (stop == NULL)
            break;
        pos = end + 1;
    }
    return *uniq >= 0 ? count : -1;
}

/* the cached stored order of these names (a tuple of n + 1 indexes, n: CLUSTER), else the state's order() */
static PyObject *stored_order(PyObject *state, const char *p, struct pair *pairs, Py_ssize_t n) {
    Py_ssize_t len = n - 1;
    for (Py_ssize_t i = 0; i < n; i++)
        len += pairs[i].b - pairs[i].a;
    PyObject *key = PyBytes_FromStringAndSize(NULL, len);
    if (key == NULL)
        return NULL;
    char *k = PyBytes_AS_STRING(key);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i)
            *k++ = '\x01';
        memcpy(k, p + pairs[i].a, (size_t)(pairs[i].b - pairs[i].a));
        k += pairs[i].b - pairs[i].a;
    }
    PyObject *order = Py_XNewRef(PyDict_GetItemWithError(PyTuple_GET_ITEM(state, FS_ORDERS), key));
    if (order == NULL && !PyErr_Occurred())
        order = PyObject_CallOneArg(PyTuple_GET_ITEM(state, FS_ORDER), key);
    Py_DECREF(key);
    if (order == NULL)
        return NULL;
    /* a permutation of 0..n: stored_properties writes each pair once into a buffer of their size */
    unsigned char seen[MAX_PAIRS + 1] = {0};
    int ok = PyTuple_CheckExact(order) && PyTuple_GET_SIZE(order) == n + 1;
    for (Py_ssize_t i = 0; ok && i <= n; i++) {
        PyObject *x = PyTuple_GET_ITEM(order, i);
        long v = PyLong_CheckExact(x) ? PyLong_AsLong(x) : -1;
        ok = v >= 0 && v <= n && !seen[v];
        if (ok)
            seen[v] = 1;
    }
    if (!ok) {
        Py_DECREF(order);
        PyErr_SetString(PyExc_TypeError, "a properties order is a permutation of range(len(names) + 1)");
        return NULL;
    }
    return order;
}

/* the properties as the broker stores them: the pairs in `order`, CLUSTER's at index n */
static PyObject *stored_properties(const char *p, struct pair *pairs, Py_ssize_t n, PyObject *order,
                                   PyObject *cluster) {
    Py_ssize_t len = 8 + PyBytes_GET_SIZE(cluster) + 1;
    for (Py_ssize_t i = 0; i < n; i++)
        len += pairs[i].e - pairs[i].a + 1;
    PyObject *out = PyBytes_FromStringAndSize(NULL, len);
    if (out == NULL)
        return NULL;
    char *w = PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i <= n; i++) {
        long j = PyLong_AsLong(PyTuple_GET_ITEM(order, i));
        if (j == n) {
            memcpy(w, "CLUSTER\x01", 8);
            memcpy(w + 8, PyBytes_AS_STRING(cluster), (size_t)PyBytes_GET_SIZE(cluster));
            w += 8 + PyBytes_GET_SIZE(cluster);
        } else {
            memcpy(w, p + pairs[j].a, (size_t)(pairs[j].e - pairs[j].a));
            w += pairs[j].e - pairs[j].a;
        }
        *w++ = '\x02';
    }
    return out;
}

/* send.py's answer frame for a stored message (fast_send.py _answer) */
static PyObject *answer_frame(PyObject *host, long long phys, long long qid, long long qoff, const char *uniq,
                              Py_ssize_t uniq_len, long long opaque, long long version) {
    static const char hex[] = "0123456789ABCDEF";
    char msg_id[33];
    const unsigned char *h = (const unsigned char *)PyBytes_AS_STRING(host);
    for (int i = 0; i < 8; i++) {
        msg_id[2 * i] = hex[h[i] >> 4];
        msg_id[2 * i + 1] = hex[h[i] & 15];
    }
    for (int i = 0; i < 8; i++) {
        unsigned char b = (unsigned char)((unsigned long long)phys >> (56 - 8 * i));
        msg_id[16 + 2 * i] = hex[b >> 4];
        msg_id[17 + 2 * i] = hex[b & 15];
    }
    msg_id[32] = 0;
    /* the header: under 300 bytes of text and four numbers of at most 20 characters, and the transaction id */
    Py_ssize_t most = 300 + 4 * 20 + uniq_len;
    char *buf = PyMem_Malloc((size_t)most), *w = buf;
    if (buf == NULL)
        return PyErr_NoMemory();
    w = put_text(w, "{\"code\":0,\"extFields\":{\"msgId\":\"");
    memcpy(w, msg_id, 32);
    w = put_text(w + 32, "\",\"queueId\":\"");
    w += put_decimal(w, qid);
    w = put_text(w, "\",\"queueOffset\":\"");
    w += put_decimal(w, qoff);
    w = put_text(w, "\",\"transactionId\":\"");
    memcpy(w, uniq, (size_t)uniq_len);
    w = put_text(w + uniq_len, "\",\"MSG_REGION\":\"DefaultRegion\",\"TRACE_ON\":\"true\"},\"flag\":1,"
                 "\"language\":\"JAVA\",\"opaque\":");
    w += put_decimal(w, opaque);
    w = put_text(w, ",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":");
    w += put_decimal(w, version);
    *w++ = '}';
    Py_ssize_t header = w - buf;
    PyObject *out = PyBytes_FromStringAndSize(NULL, 8 + header);
    if (out != NULL) {
        unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
        rs_put32(o, (uint32_t)(4 + header));
        rs_put32(o + 4, (uint32_t)header);
        memcpy(o + 8, buf, (size_t)header);
    }
    PyMem_Free(buf);
    return out;
}

/* an int attribute (an IntEnum's too, as a request code may be): 1, 0 (not an int), -1 */
static int ll_of(PyObject *o, PyObject *name, long long *out) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL)
        return -1;
    int ok = PyLong_Check(v) && !PyBool_Check(v);
    *out = ok ? PyLong_AsLongLong(v) : 0;
    Py_DECREF(v);
    if (ok && *out == -1 && PyErr_Occurred())
        return -1;
    return ok;
}

static PyObject *fast_send(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != FS_FIELDS
            || !PyBytes_CheckExact(PyTuple_GET_ITEM(args[0], FS_CLUSTER))
            || !PyDict_CheckExact(PyTuple_GET_ITEM(args[0], FS_PERMITS))
            || !PyDict_CheckExact(PyTuple_GET_ITEM(args[0], FS_ORDERS))
            || !PyList_CheckExact(PyTuple_GET_ITEM(args[0], FS_SEEN)) || PyList_GET_SIZE(PyTuple_GET_ITEM(args[0], FS_SEEN)) != 1) {
        PyErr_SetString(PyExc_TypeError, "fast_send(state: FastSendState, cmd, remote)");
        return NULL;
    }
    double started = now_ms();
    PyObject *state = args[0], *cmd = args[1], *remote = args[2];
    PyObject *h[NH] = {0}, *ext = NULL, *code = NULL, *configs = NULL, *order = NULL, *props = NULL, *qid_obj = NULL;
    PyObject *msg = NULL, *r = NULL, *status = NULL, *body = NULL, *host = NULL, *out = NULL, *uniq = NULL;
    long long c, flag, qid, sys_flag, born, mflag, reconsume = 0, x, limit, phys, qoff, opaque, version;
    int k;
    if ((k = ll_of(cmd, s_code, &c)) <= 0 || (k = ll_of(cmd, s_flag, &flag)) <= 0)
        goto answer;
    PyObject *const *names = c == 310 ? v2 : c == 10 ? v1 : NULL;
    if (names == NULL || flag & 2)
        goto none;
    if ((ext = PyObject_GetAttr(cmd, s_ext)) == NULL)
        goto fail;
    if (!PyDict_CheckExact(ext))
        goto none;
    for (int i = 0; i < NH; i++) {
        h[i] = PyDict_GetItemWithError(ext, names[i]);
        if (h[i] == NULL && PyErr_Occurred())
            goto fail;
        if ((h[i] == NULL && i <= H_FLAG) || (h[i] != NULL && !PyUnicode_CheckExact(h[i])))
            goto none;
        Py_XINCREF(h[i]);
    }
    if (!plain_number(h[H_QUEUE], INT32_MIN, INT32_MAX, &qid) || !plain_number(h[H_SYS_FLAG], INT32_MIN, INT32_MAX, &sys_flag)
            || !plain_number(h[H_BORN], INT64_MIN, INT64_MAX, &born) || !plain_number(h[H_FLAG], INT32_MIN, INT32_MAX, &mflag)
            || !plain_number(h[H_DEFAULT_QUEUES], INT32_MIN, INT32_MAX, &x) || sys_flag != 0
            || (h[H_RECONSUME] != NULL && !plain_number(h[H_RECONSUME], INT32_MIN, INT32_MAX, &reconsume))
            || (h[H_MAX_RECONSUME] != NULL && !plain_number(h[H_MAX_RECONSUME], INT32_MIN, INT32_MAX, &x))
            || (h[H_BATCH] != NULL && ascii_true(h[H_BATCH]) != 0))
        goto none;
    /* the topic's permit, for the configs it was made from */
    PyObject *topic = h[H_TOPIC], *permits = PyTuple_GET_ITEM(state, FS_PERMITS);
    PyObject *seen = PyTuple_GET_ITEM(state, FS_SEEN);
    if ((configs = PyObject_GetAttr(PyTuple_GET_ITEM(state, FS_STORE), s_topic_configs)) == NULL)
        goto fail;
    if (PyList_GET_ITEM(seen, 0) != configs) {
        PyDict_Clear(permits);
        if (PyList_SetItem(seen, 0, Py_NewRef(configs)) < 0)
            goto fail;
    }
    PyObject *lim = Py_XNewRef(PyDict_GetItemWithError(permits, topic));
    if (lim == NULL) {
        if (PyErr_Occurred() || (lim = PyObject_CallOneArg(PyTuple_GET_ITEM(state, FS_PERMIT), topic)) == NULL)
            goto fail;
    }
    limit = PyLong_CheckExact(lim) ? PyLong_AsLongLong(lim) : -1;
    Py_DECREF(lim);
    if (limit == -1 && PyErr_Occurred())
        goto fail;
    if (qid < 0 || qid >= limit)
        goto none;
    /* the properties: plain, with UNIQ_KEY; stored in HashMap order with CLUSTER */
    if (h[H_PROPS] == NULL)
        goto none;
    Py_ssize_t plen, u;
    const char *p = PyUnicode_AsUTF8AndSize(h[H_PROPS], &plen);
    if (p == NULL) {
        PyErr_Clear();
        goto none;
    }
    struct pair pairs[MAX_PAIRS];
    Py_ssize_t n = plen ? plain_pairs(p, plen, pairs, &u) : -1;
    if (n < 0)
        goto none;
    if ((order = stored_order(state, p, pairs, n)) == NULL
            || (props = stored_properties(p, pairs, n, order, PyTuple_GET_ITEM(state, FS_CLUSTER))) == NULL
            || (uniq = PyUnicode_FromStringAndSize(p + pairs[u].c, pairs[u].e - pairs[u].c)) == NULL
            || (body = PyObject_GetAttr(cmd, s_body)) == NULL || (qid_obj = PyLong_FromLongLong(qid)) == NULL)
        goto fail;
    /* the lane first, with a LaneMessage; for what it leaves (None), a Message to the store's put:
     * Message(topic, body, flag=, sys_flag=0, born_timestamp=, born_host=, reconsume_times=, raw_properties=) */
    {
        PyObject *o_flag = PyLong_FromLongLong(mflag), *o_born = PyLong_FromLongLong(born);
        PyObject *o_rec = PyLong_FromLongLong(reconsume), *o_zero = PyLong_FromLong(0);
        PyObject *lane = PyTuple_GET_ITEM(state, FS_LANE);
        int failed = !(o_flag && o_born && o_rec && o_zero);
        if (!failed && lane != Py_None) {
            PyObject *lm = lane_message(topic, body, o_flag, o_zero, o_born, remote, o_rec, props);
            r = lm == NULL ? NULL : PyObject_CallMethodObjArgs(lane, s_put, lm, qid_obj, NULL);
            Py_XDECREF(lm);
            failed = r == NULL;
            if (r == Py_None)
                Py_CLEAR(r);
        }
        if (!failed && r == NULL) {
            PyObject *margs[] = {NULL, topic, body, o_flag, o_zero, o_born, remote, o_rec, props};
            msg = PyObject_Vectorcall(PyTuple_GET_ITEM(state, FS_MESSAGE), margs + 1,
                                      2 | PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames);
            if (msg != NULL)
                r = PyObject_CallFunctionObjArgs(PyTuple_GET_ITEM(state, FS_PUT), msg, qid_obj, NULL);
        }
        Py_XDECREF(o_flag);
        Py_XDECREF(o_born);
        Py_XDECREF(o_rec);
        Py_XDECREF(o_zero);
    }
    if (r == NULL || (status = PyObject_GetAttr(r, s_status)) == NULL)
        goto fail;
    if (status != PyTuple_GET_ITEM(state, FS_OK))
        goto python_answers;
    if ((host = PyObject_GetAttr(r, s_host)) == NULL || (k = ll_of(r, s_phys, &phys)) < 0
            || ll_of(r, s_qoff, &qoff) < 0 || ll_of(cmd, s_opaque, &opaque) < 0)
        goto fail;
    PyObject *v = PyTuple_GET_ITEM(state, FS_VERSION);
    version = PyLong_Check(v) ? PyLong_AsLongLong(v) : -1;  /* an IntEnum (Version) */
    if (!PyBytes_CheckExact(host) || PyBytes_GET_SIZE(host) != 8 || version < 0)
        goto python_answers;
    PyObject *waiters = PyTuple_GET_ITEM(state, FS_WAITERS);
    if (!PyDict_Check(waiters) || PyDict_GET_SIZE(waiters) > 0) {  /* held pulls look again */
        PyObject *a = PyObject_CallFunctionObjArgs(PyTuple_GET_ITEM(state, FS_ARRIVED), topic, qid_obj, r, NULL);
        if (a == NULL)
            goto fail;
        Py_DECREF(a);
    }
    out = answer_frame(host, phys, qid, qoff, p + pairs[u].c, pairs[u].e - pairs[u].c, opaque, version);
    PyObject *meter = PyTuple_GET_ITEM(state, FS_METER);
    if (out != NULL && meter != Py_None) {
        Py_ssize_t size = body == Py_None ? 0 : PyObject_Size(body);
        if ((code = PyLong_FromLongLong(c)) == NULL || size < 0
                || rs_meter_send(meter, code, topic, size, now_ms() - started) < 0)
            PyErr_WriteUnraisable(meter);   /* the message is stored: its answer goes out, uncounted */
    }
    goto done;
python_answers:     /* a put not PUT_OK (or an odd result): send.py's own answer */
    {
        PyObject *at = PyFloat_FromDouble(started / 1000.0);     /* CLOCK_MONOTONIC: perf_counter's clock */
        out = at == NULL ? NULL : PyObject_CallFunctionObjArgs(PyTuple_GET_ITEM(state, FS_ANSWER), cmd, r, qid_obj,
                                                               uniq, at, NULL);
        Py_XDECREF(at);
    }
    goto done;
answer:
    if (k < 0)
        goto fail;
none:
    out = Py_NewRef(Py_None);
    goto done;
fail:
    out = NULL;
done:
    for (int i = 0; i < NH; i++)
        Py_XDECREF(h[i]);
    Py_XDECREF(ext);
    Py_XDECREF(code);
    Py_XDECREF(configs);
    Py_XDECREF(order);
    Py_XDECREF(props);
    Py_XDECREF(qid_obj);
    Py_XDECREF(msg);
    Py_XDECREF(r);
    Py_XDECREF(status);
    Py_XDECREF(body);
    Py_XDECREF(host);
    Py_XDECREF(uniq);
    return out;
}

int rs_fastsend_init(PyObject *module) {
    const char *attrs[] = {"code", "flag", "ext_fields", "body", "opaque", "topic_configs", "status",
                           "physical_offset", "queue_offset", "store_host", "put"};
    PyObject **slots[] = {&s_code, &s_flag, &s_ext, &s_body, &s_opaque, &s_topic_configs, &s_status, &s_phys,
                          &s_qoff, &s_host, &s_put};
    for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++)
        if ((*slots[i] = PyUnicode_InternFromString(attrs[i])) == NULL)
            return -1;
    for (int i = 0; i < NH; i++)
        if ((v2[i] = PyUnicode_InternFromString(V2_NAMES[i])) == NULL
                || (v1[i] = PyUnicode_InternFromString(V1_NAMES[i])) == NULL)
            return -1;
    if (PyType_Ready(&LaneMessageType) < 0)
        return -1;
    kwnames = Py_BuildValue("(ssssss)", "flag", "sys_flag", "born_timestamp", "born_host", "reconsume_times",
                            "raw_properties");
    PyObject *not_plain = PyTuple_New(N_NOT_PLAIN);
    if (kwnames == NULL || not_plain == NULL)
        return -1;
    for (size_t i = 0; i < N_NOT_PLAIN; i++) {
        PyObject *s = PyUnicode_FromString(NOT_PLAIN[i]);
        if (s == NULL) {
            Py_DECREF(not_plain);
            return -1;
        }
        PyTuple_SET_ITEM(not_plain, i, s);
    }
    int r = PyModule_AddObjectRef(module, "FAST_SEND_NOT_PLAIN", not_plain);
    Py_DECREF(not_plain);
    return r;
}

PyMethodDef rs_fastsend_methods[] = {
    {"fast_send", (PyCFunction)(void (*)(void))fast_send, METH_FASTCALL,
     "fast_send(state, cmd, remote) -> bytes | None: a plain send put and answered in one call"},
    {NULL, NULL, 0, NULL},
};
