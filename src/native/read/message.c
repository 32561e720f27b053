/* The read path's messages: one record into a StoredMessage (formats.record.decode_record_py is the
 * reference), eager or lazy, and the getters of its fixed fields. */
#include "native.h"
#include "read/read.h"
#include <string.h>

#define corrupt rs_corrupt

/* ------------------------------------------------------------------ decode_record */
PyTypeObject *rs_message_type = NULL;
static const char *const MSG_SLOTS[] = {"_f", "body", "topic", "_props_raw", "_props", "_r"};
Py_ssize_t rs_msg_offsets[NMSG];
static Py_ssize_t lazy_offsets[2];   /* _r, _props */

/* set_message_type(StoredMessage): the class decode_record builds (its __slots__ are filled directly). */
static PyObject *set_message_type(PyObject *self, PyObject *type) {
    Py_ssize_t offs[NMSG + 1];
    if (rs_slot_offsets(type, MSG_SLOTS, NMSG + 1, offs) < 0)
        return NULL;
    memcpy(rs_msg_offsets, offs, sizeof rs_msg_offsets);
    lazy_offsets[0] = offs[5];
    lazy_offsets[1] = offs[4];
    Py_INCREF(type);
    Py_XSETREF(rs_message_type, (PyTypeObject *)type);
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
int rs_check_record(const unsigned char *buf, Py_ssize_t buflen, Py_ssize_t pos, Py_ssize_t end, rs_record *ri) {
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
    return rs_new_slotted(rs_message_type, rs_msg_offsets, vals, NMSG);
}

/* A StoredMessage holding only a copy of its record (slot _r; _props None): StoredMessage.__getattr__
 * decodes the other slots on first use. Only for a record check_record accepted, so that decode cannot
 * fail. What a get builds: one copy and one object per message instead of twenty. */
PyObject *rs_lazy_message(const unsigned char *rec, Py_ssize_t size) {
    PyObject *vals[2];
    vals[0] = PyBytes_FromStringAndSize((const char *)rec, size);
    if (vals[0] == NULL)
        return NULL;
    vals[1] = Py_None;
    Py_INCREF(Py_None);
    return rs_new_slotted(rs_message_type, lazy_offsets, vals, 2);
}

PyObject *rs_decode_buffer(const unsigned char *buf, Py_ssize_t buflen, Py_ssize_t pos, Py_ssize_t end,
                               int with_body) {
    if (rs_message_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "decode_record: set_message_type was not called");
        return NULL;
    }
    rs_record ri;
    if (rs_check_record(buf, buflen, pos, end, &ri) < 0)
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
    PyObject *m = rs_decode_buffer(view.buf, view.len, pos, end, with_body);
    PyBuffer_Release(&view);
    return m;
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
    if (rs_message_type != NULL && Py_TYPE(msg) == rs_message_type
            && (f = *(PyObject **)((char *)msg + rs_msg_offsets[0])) != NULL) {
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

int rs_message_init(void) {
    S_f = PyUnicode_InternFromString("_f");
    return S_f ? 0 : -1;
}

PyMethodDef rs_message_methods[] = {
    {"set_message_type", set_message_type, METH_O, "The StoredMessage class decode_record builds."},
    {"decode_record", (PyCFunction)(void (*)(void))decode_record, METH_FASTCALL | METH_KEYWORDS,
     "One CommitLog record as a StoredMessage (formats.record.decode_record_py is the reference)."},
    {"fixed_field", fixed_field, METH_O, "A getter of StoredMessage._f[index] for a property (see read.c)."},
    {NULL, NULL, 0, NULL},
};
