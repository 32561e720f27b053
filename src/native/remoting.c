/* The remoting protocol's compact header (SerializeType.ROCKETMQ, RocketMQSerializable), read for
 * remoting/header_binary.py, whose pure decode is the reference and the path of every header this leaves to it. */
#include "native.h"

static int16_t s16(const unsigned char *p) {
    return (int16_t)((p[0] << 8) | p[1]);
}

static int32_t s32(const unsigned char *p) {
    return rs_be32(p);
}

/* readStr: a UTF-8 text of n bytes at *pos, NULL-as-None for n == 0 (a new reference in *out); 0 when the text
 * runs past `end`, n is negative or the bytes are not UTF-8 (the pure decoder then says so), -1 on an error. */
static int text(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end, long long n, PyObject **out) {
    if (n < 0 || n > end - *pos)
        return 0;
    if (n == 0) {
        *out = Py_NewRef(Py_None);
        return 1;
    }
    *out = PyUnicode_DecodeUTF8((const char *)p + *pos, (Py_ssize_t)n, NULL);
    if (*out == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    *pos += (Py_ssize_t)n;
    return 1;
}

/* The extFields area p[pos, end) into a dict (an entry with a null key or value is dropped, a repeated key's
 * last value wins): 1, 0 for what the pure decoder refuses, -1 on an error. */
static int ext_fields(const unsigned char *p, Py_ssize_t pos, Py_ssize_t end, PyObject *ext) {
    while (pos < end) {
        PyObject *key = NULL, *value = NULL;
        if (end - pos < 2)
            return 0;
        long long klen = s16(p + pos);
        pos += 2;
        int r = text(p, &pos, end, klen, &key);
        if (r <= 0)
            return r;
        if (end - pos < 4) {
            Py_DECREF(key);
            return 0;
        }
        long long vlen = s32(p + pos);
        pos += 4;
        r = text(p, &pos, end, vlen, &value);
        if (r <= 0) {
            Py_DECREF(key);
            return r;
        }
        if (key != Py_None && value != Py_None && PyDict_SetItem(ext, key, value) < 0)
            r = -1;
        Py_DECREF(key);
        Py_DECREF(value);
        if (r < 0)
            return -1;
    }
    return 1;
}

/* decode_binary_header(data) -> (code, language, version, opaque, flag, remark, ext_fields) | None: the fields of
 * header_binary.decode; None for a header it refuses (truncated, a negative length, text that is not UTF-8), so
 * that its own message is the answer. */
static PyObject *decode_binary_header(PyObject *self, PyObject *arg) {
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *p = b.buf;
    Py_ssize_t n = b.len, pos = 17;
    PyObject *remark = NULL, *ext = NULL, *out = NULL;
    if (n < 17)
        goto none;
    int r = text(p, &pos, n, s32(p + 13), &remark);
    if (r < 0)
        goto done;
    if (r == 0 || n - pos < 4)
        goto none;
    long long ext_len = s32(p + pos);
    pos += 4;
    if (ext_len < 0 || ext_len > n - pos)
        goto none;
    if (ext_len > 0) {
        if ((ext = PyDict_New()) == NULL)
            goto done;
        r = ext_fields(p, pos, pos + (Py_ssize_t)ext_len, ext);
        if (r < 0)
            goto done;
        if (r == 0)
            goto none;
    }
    out = Py_BuildValue("(iiiiiOO)", (int)s16(p), (int)p[2], (int)s16(p + 3), (int)s32(p + 5), (int)s32(p + 9),
                        remark, ext ? ext : Py_None);
    goto done;
none:
    out = Py_NewRef(Py_None);
done:
    Py_XDECREF(remark);
    Py_XDECREF(ext);
    PyBuffer_Release(&b);
    return out;
}

PyMethodDef rs_remoting_methods[] = {
    {"decode_binary_header", decode_binary_header, METH_O,
     "decode_binary_header(data) -> (code, language, version, opaque, flag, remark, ext_fields) | None"},
    {NULL, NULL, 0, NULL},
};
