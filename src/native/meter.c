/* The remoting meter's work for one answered request (remoting/broker/metered.py, whose meter_remoting_py is the
 * reference): in one call, so that metrics cost a send about a hundredth of its server time, not 4%.
 *
 * The tallies are the broker's (broker/metrics.py new_tally): Counts, below (lists with the pure engine), found
 * through the meter's two-level caches (code -> answer, topic -> message type, topic -> group); a label set seen
 * for the first time is made by the state's `miss` (Python). A bump adds to a Counts' field in C (a list's item
 * is replaced by the sum, as Python adds): no Python code runs between the first and the last bump of a Counts,
 * so a scrape on another thread, copying it under the GIL, sees all of a request's bumps of it or none; the
 * event loop's thread is the only one bumping. */
#include "native.h"

/* MeterState's fields (metered.py), by position */
enum { S_CLOCK, S_RPC, S_INS, S_OUTS, S_MISS, S_TYPED, S_MESSAGE_TYPE, S_PULL, S_RECORDS_IN, S_RPC_BOUNDS,
       S_SIZE_BOUNDS, S_FIELDS };

static PyObject *s_code, *s_body, *s_ext_fields, *s_stored, *s_records, *s_normal, *s_empty, *s_topic, *s_group,
    *s_zero;

/* Counts(n, float_at=-1): a tally of n numbers, ints (int64) but the one at float_at (a double sum); the C
 * side of metrics.py's new_tally (a list there). The meter bumps its fields, Python reads and writes it as a
 * sequence (add_rpc, add_in, the collector), and list(t) copies it in one step under the GIL: a scrape's copy
 * holds all of a request's bumps of it or none. */
typedef struct {
    PyObject_VAR_HEAD
    Py_ssize_t float_at;
    double f;
    long long v[1];
} Counts;

static PyTypeObject CountsType;
#define COUNTS_MAX 4096

static PyObject *counts_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kw[] = {"n", "float_at", NULL};
    Py_ssize_t n, float_at = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "n|n:Counts", kw, &n, &float_at))
        return NULL;
    if (n < 1 || n > COUNTS_MAX || float_at >= n) {  /* a tally is a dozen numbers: bound n before allocating */
        PyErr_Format(PyExc_ValueError, "Counts(n, float_at): 1 <= n <= %d and float_at < n", COUNTS_MAX);
        return NULL;
    }
    Counts *c = (Counts *)type->tp_alloc(type, n);
    if (c == NULL)
        return NULL;
    c->float_at = float_at < 0 ? -1 : float_at;
    return (PyObject *)c;  /* tp_alloc zeroed v and f */
}

static Py_ssize_t counts_len(PyObject *o) { return Py_SIZE(o); }

static PyObject *counts_item(PyObject *o, Py_ssize_t i) {
    Counts *c = (Counts *)o;
    if (i < 0 || i >= Py_SIZE(o)) {
        PyErr_SetString(PyExc_IndexError, "Counts index out of range");
        return NULL;
    }
    return i == c->float_at ? PyFloat_FromDouble(c->f) : PyLong_FromLongLong(c->v[i]);
}

static int counts_ass_item(PyObject *o, Py_ssize_t i, PyObject *value) {
    Counts *c = (Counts *)o;
    if (value == NULL || i < 0 || i >= Py_SIZE(o)) {
        PyErr_SetString(PyExc_IndexError, "Counts index out of range (and its items stay)");
        return -1;
    }
    if (i == c->float_at) {
        double d = PyFloat_AsDouble(value);
        if (d == -1.0 && PyErr_Occurred())
            return -1;
        c->f = d;
        return 0;
    }
    long long v = PyLong_AsLongLong(value);
    if (v == -1 && PyErr_Occurred())
        return -1;
    c->v[i] = v;
    return 0;
}

/* the numbers as a list, copied in one step */
static PyObject *counts_list(PyObject *o) {
    PyObject *out = PyList_New(Py_SIZE(o));
    for (Py_ssize_t i = 0; out != NULL && i < Py_SIZE(o); i++) {
        PyObject *x = counts_item(o, i);
        if (x == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, x);
    }
    return out;
}

static PyObject *counts_iter(PyObject *o) {
    PyObject *l = counts_list(o);
    if (l == NULL)
        return NULL;
    PyObject *it = PyObject_GetIter(l);
    Py_DECREF(l);
    return it;
}

static PyObject *counts_repr(PyObject *o) {
    PyObject *l = counts_list(o);
    if (l == NULL)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("Counts(%R)", l);
    Py_DECREF(l);
    return r;
}

static PySequenceMethods counts_seq = {
    .sq_length = counts_len, .sq_item = counts_item, .sq_ass_item = counts_ass_item,
};

static PyTypeObject CountsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rocketstore._native.Counts",
    .tp_basicsize = offsetof(Counts, v),
    .tp_itemsize = sizeof(long long),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Counts(n, float_at=-1): a tally of n int64 numbers, the one at float_at a double",
    .tp_new = counts_new,
    .tp_as_sequence = &counts_seq,
    .tp_iter = counts_iter,
    .tp_repr = counts_repr,
};

/* t[i] += d on a Counts: 1 when t is one, -1 when the int64 would overflow (OverflowError set) */
static inline int counts_add(PyObject *t, Py_ssize_t i, long long d, double f) {
    if (Py_TYPE(t) != &CountsType)
        return 0;
    if (i == ((Counts *)t)->float_at)
        ((Counts *)t)->f += f;
    else {
        long long sum;
        if (__builtin_add_overflow(((Counts *)t)->v[i], d, &sum)) {  /* the count stays as it was */
            PyErr_SetString(PyExc_OverflowError, "a metrics counter passed 2**63 - 1");
            return -1;
        }
        ((Counts *)t)->v[i] = sum;
    }
    return 1;
}

/* the tally of labels (a, b): the cached one (a None cached is a miss, as in the reference), else what the
 * state's `miss` makes (which: its kind); a new reference, NULL on an error */
static PyObject *tally(PyObject *state, int outer, int which, PyObject *a, PyObject *b, Py_ssize_t len) {
    PyObject *t = NULL, *inner = PyDict_GetItemWithError(PyTuple_GET_ITEM(state, outer), a);
    if (inner != NULL && PyDict_Check(inner)) {
        Py_INCREF(inner);  /* b's __eq__ could change the cache under the lookup */
        t = Py_XNewRef(PyDict_GetItemWithError(inner, b));
        Py_DECREF(inner);
    }
    if (PyErr_Occurred()) {
        Py_XDECREF(t);
        return NULL;
    }
    if (t == NULL || t == Py_None) {
        Py_XDECREF(t);
        t = PyObject_CallFunction(PyTuple_GET_ITEM(state, S_MISS), "iOO", which, a, b);
    }
    if (t != NULL && !(Py_TYPE(t) == &CountsType && Py_SIZE(t) >= len)
            && !(PyList_CheckExact(t) && PyList_GET_SIZE(t) >= len)) {
        PyErr_Format(PyExc_TypeError, "a tally is a Counts or a list of at least %zd items", len);
        Py_CLEAR(t);
    }
    return t;
}

/* t[i] += delta on a list tally (the pure side's, made before a switch of engines), as Python adds: the item
 * read with a reference held, the sum stored by PyList_SetItem (bounds checked: the addition may run code) */
static int add_to_list(PyObject *t, Py_ssize_t i, PyObject *delta) {
    if (delta == NULL)
        return -1;
    PyObject *old = Py_NewRef(PyList_GET_ITEM(t, i));
    PyObject *now = PyNumber_Add(old, delta);
    Py_DECREF(old);
    Py_DECREF(delta);
    return now == NULL ? -1 : PyList_SetItem(t, i, now);
}

/* t[i] += d, for an int item */
static int add_int(PyObject *t, Py_ssize_t i, long long d) {
    int r = counts_add(t, i, d, 0.0);
    return r < 0 ? -1 : r ? 0 : add_to_list(t, i, PyLong_FromLongLong(d));
}

/* t[i] += d, for a float item (the same double addition Python does) */
static int add_float(PyObject *t, Py_ssize_t i, double d) {
    int r = counts_add(t, i, 0, d);
    return r < 0 ? -1 : r ? 0 : add_to_list(t, i, PyFloat_FromDouble(d));
}

/* bisect_left(bounds, x): how many of the (ascending) bounds are below x */
static Py_ssize_t bucket(PyObject *bounds, double x) {
    Py_ssize_t i = 0, n = PyTuple_GET_SIZE(bounds);
    while (i < n && PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(bounds, i)) < x)
        i++;
    return i;
}

/* the state's bucket bounds are tuples of floats (bucket reads them unchecked) */
static int bounds_ok(PyObject *bounds) {
    if (!PyTuple_CheckExact(bounds))
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(bounds); i++)
        if (!PyFloat_CheckExact(PyTuple_GET_ITEM(bounds, i)))
            return 0;
    return 1;
}

/* the rpc tally (count, milliseconds, latency buckets): 0, -1 on an error */
static int count_rpc(PyObject *state, PyObject *code, PyObject *answer, double millis) {
    PyObject *bounds = PyTuple_GET_ITEM(state, S_RPC_BOUNDS);
    PyObject *t = tally(state, S_RPC, 0, code, answer, 3 + PyTuple_GET_SIZE(bounds));
    if (t == NULL)
        return -1;
    int r = add_int(t, 0, 1) < 0 || add_float(t, 1, millis) < 0 || add_int(t, 2 + bucket(bounds, millis), 1) < 0;
    Py_DECREF(t);
    return r ? -1 : 0;
}

/* "normal" for properties naming none of TYPED_NAMES (a dict's look at each of its names), else message_type's
 * answer: a new reference */
static PyObject *kind_of(PyObject *state, PyObject *props) {
    if (PyDict_CheckExact(props)) {
        Py_ssize_t pos = 0;
        PyObject *name, *value;
        int typed = 0;
        while (!typed && PyDict_Next(props, &pos, &name, &value)) {
            if (!PyUnicode_CheckExact(name)) {  /* a name whose __eq__ could change the dict: message_type decides */
                typed = 1;
                break;
            }
            if ((typed = PySet_Contains(PyTuple_GET_ITEM(state, S_TYPED), name)) < 0)
                return NULL;
        }
        if (!typed)
            return Py_NewRef(s_normal);
    }
    return PyObject_CallOneArg(PyTuple_GET_ITEM(state, S_MESSAGE_TYPE), props);
}

/* a send's stored (topic, properties, count) into the in tally (messages, bytes, size sum, size buckets) */
static int count_in(PyObject *state, PyObject *cmd, PyObject *stored) {
    if (!PyTuple_Check(stored) || PyTuple_GET_SIZE(stored) != 3) {
        PyErr_SetString(PyExc_TypeError, "stored is (topic, properties, count)");
        return -1;
    }
    PyObject *topic = PyTuple_GET_ITEM(stored, 0), *bounds = PyTuple_GET_ITEM(state, S_SIZE_BOUNDS);
    long long count = PyLong_AsLongLong(PyTuple_GET_ITEM(stored, 2));
    if (count == -1 && PyErr_Occurred())
        return -1;
    PyObject *body = PyObject_GetAttr(cmd, s_body);
    Py_ssize_t size = body == NULL ? -1 : body == Py_None ? 0 : PyObject_Size(body);  /* no body: 0 bytes */
    Py_XDECREF(body);
    if (size < 0)
        return -1;
    PyObject *kind = kind_of(state, PyTuple_GET_ITEM(stored, 1));
    if (kind == NULL)
        return -1;
    PyObject *t = tally(state, S_INS, 1, topic, kind, 4 + PyTuple_GET_SIZE(bounds));
    Py_DECREF(kind);
    if (t == NULL)
        return -1;
    long long each = count > 1 ? size / count : size;
    int r = add_int(t, 0, count) < 0 || add_int(t, 1, size) < 0 || add_int(t, 2, each) < 0
            || add_int(t, 3 + bucket(bounds, (double)each), 1) < 0;
    Py_DECREF(t);
    return r ? -1 : 0;
}

/* ext_fields.get(name, ""), ext_fields None or empty: "" (a borrowed reference) */
static PyObject *ext_get(PyObject *ext, PyObject *name) {
    if (ext == Py_None)
        return s_empty;
    if (!PyDict_Check(ext)) {
        PyErr_SetString(PyExc_TypeError, "ext_fields is a dict");
        return NULL;
    }
    PyObject *v = PyDict_GetItemWithError(ext, name);
    return v != NULL || PyErr_Occurred() ? v : s_empty;
}

/* a pull's records (the count its processor hangs on the answer, else records_in of the body) and bytes into
 * the out tally of its topic and group; in the reference's order: the count first, then the labels (held:
 * `miss` runs Python code before they are stored) */
static int count_out(PyObject *state, PyObject *cmd, PyObject *response, PyObject *body) {
    PyObject *records = PyObject_GetAttr(response, s_records), *ext = NULL, *topic = NULL, *group = NULL, *t = NULL;
    int r = -1;
    if (records == Py_None)
        Py_SETREF(records, PyObject_CallOneArg(PyTuple_GET_ITEM(state, S_RECORDS_IN), body));
    if (records == NULL)
        return -1;
    long long n = PyLong_AsLongLong(records);
    Py_ssize_t size = n == -1 && PyErr_Occurred() ? -1 : PyObject_Size(body);
    if (size < 0 || (ext = PyObject_GetAttr(cmd, s_ext_fields)) == NULL)
        goto done;
    if ((topic = Py_XNewRef(ext_get(ext, s_topic))) == NULL || (group = Py_XNewRef(ext_get(ext, s_group))) == NULL)
        goto done;
    if ((t = tally(state, S_OUTS, 2, topic, group, 2)) != NULL)
        r = add_int(t, 0, n) < 0 || add_int(t, 1, size) < 0 ? -1 : 0;
done:
    Py_XDECREF(t);
    Py_XDECREF(group);
    Py_XDECREF(topic);
    Py_XDECREF(ext);
    Py_DECREF(records);
    return r;
}

/* a successful pull's answer with a body: 1, 0 when not one, -1 on an error (*body: a new reference when 1) */
static int is_pull(PyObject *state, PyObject *code, PyObject *answer, PyObject *response, PyObject **body) {
    int ok = PyObject_RichCompareBool(answer, s_zero, Py_EQ);
    if (ok > 0)
        ok = PySet_Contains(PyTuple_GET_ITEM(state, S_PULL), code);
    if (ok <= 0)
        return ok;
    if ((*body = PyObject_GetAttr(response, s_body)) == NULL)
        return -1;
    if ((ok = PyObject_IsTrue(*body)) <= 0)
        Py_CLEAR(*body);
    return ok;
}

/* the rest of the answer's counting, its rpc latency counted: a send's messages in, a pull's records out */
static int count_answer(PyObject *state, PyObject *cmd, PyObject *response, PyObject *code, PyObject *answer) {
    PyObject *stored = PyObject_GetAttr(response, s_stored), *body = NULL;
    if (stored == NULL)
        return -1;
    int r = stored != Py_None ? count_in(state, cmd, stored) : is_pull(state, code, answer, response, &body);
    Py_DECREF(stored);
    if (body != NULL) {
        r = count_out(state, cmd, response, body);
        Py_DECREF(body);
    }
    return r < 0 ? -1 : 0;
}

/* meter_remoting(state, cmd, response, started) -> None: metered.py's meter_remoting_py */
static PyObject *meter_remoting(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != S_FIELDS
            || !bounds_ok(PyTuple_GET_ITEM(args[0], S_RPC_BOUNDS))
            || !bounds_ok(PyTuple_GET_ITEM(args[0], S_SIZE_BOUNDS))) {
        PyErr_SetString(PyExc_TypeError,
                        "meter_remoting(state: MeterState, its bounds tuples of floats; cmd, response, started)");
        return NULL;
    }
    PyObject *state = args[0], *cmd = args[1], *response = args[2];
    double started = PyFloat_AsDouble(args[3]);
    if (started == -1.0 && PyErr_Occurred())
        return NULL;
    PyObject *now = PyObject_CallNoArgs(PyTuple_GET_ITEM(state, S_CLOCK));
    if (now == NULL)
        return NULL;
    double millis = (PyFloat_AsDouble(now) - started) * 1000.0;
    Py_DECREF(now);
    if (PyErr_Occurred())
        return NULL;
    PyObject *code = PyObject_GetAttr(cmd, s_code), *answer = NULL;
    if (code == NULL)
        return NULL;
    answer = response == Py_None ? Py_NewRef(Py_None) : PyObject_GetAttr(response, s_code);
    int r = answer == NULL ? -1 : count_rpc(state, code, answer, millis);
    if (r == 0 && response != Py_None)
        r = count_answer(state, cmd, response, code, answer);
    Py_DECREF(code);
    Py_XDECREF(answer);
    return r < 0 ? NULL : Py_NewRef(Py_None);
}

/* A plain send answered SUCCESS, one "normal" message of `size` bytes, `millis` after its start (fastsend.c):
 * metered.py's count_send_py. 0, -1 on an error. */
int rs_meter_send(PyObject *state, PyObject *code, PyObject *topic, Py_ssize_t size, double millis) {
    if (!PyTuple_Check(state) || PyTuple_GET_SIZE(state) != S_FIELDS || !bounds_ok(PyTuple_GET_ITEM(state, S_RPC_BOUNDS))
            || !bounds_ok(PyTuple_GET_ITEM(state, S_SIZE_BOUNDS))) {
        PyErr_SetString(PyExc_TypeError, "the meter's state: a MeterState, its bounds tuples of floats");
        return -1;
    }
    if (count_rpc(state, code, s_zero, millis) < 0)
        return -1;
    PyObject *bounds = PyTuple_GET_ITEM(state, S_SIZE_BOUNDS);
    PyObject *t = tally(state, S_INS, 1, topic, s_normal, 4 + PyTuple_GET_SIZE(bounds));
    if (t == NULL)
        return -1;
    int r = add_int(t, 0, 1) < 0 || add_int(t, 1, size) < 0 || add_int(t, 2, size) < 0
            || add_int(t, 3 + bucket(bounds, (double)size), 1) < 0;
    Py_DECREF(t);
    return r ? -1 : 0;
}

int rs_meter_init(PyObject *module) {
    const char *names[] = {"code", "body", "ext_fields", "stored", "records", "normal", "", "topic", "consumerGroup"};
    PyObject **slots[] = {&s_code, &s_body, &s_ext_fields, &s_stored, &s_records, &s_normal, &s_empty, &s_topic,
                          &s_group};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if ((*slots[i] = PyUnicode_InternFromString(names[i])) == NULL)
            return -1;
    if ((s_zero = PyLong_FromLong(0)) == NULL || PyType_Ready(&CountsType) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "Counts", (PyObject *)&CountsType);
}

PyMethodDef rs_meter_methods[] = {
    {"meter_remoting", (PyCFunction)(void (*)(void))meter_remoting, METH_FASTCALL,
     "meter_remoting(state, cmd, response, started) -> None: one answered request into the broker's tallies"},
    {NULL, NULL, 0, NULL},
};
