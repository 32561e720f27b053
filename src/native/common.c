/* Shared pieces: Java's String.hashCode (tagsCode, index keys). */
#include "native.h"

int32_t rs_java_hash_str(PyObject *s) {
    /* Java hashes UTF-16 code units: a code point past U+FFFF counts as its surrogate pair. Lone surrogates
     * in the str (from "surrogatepass") are single units, as in Java. */
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    uint32_t h = 0;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *p = data;
        for (Py_ssize_t i = 0; i < n; i++)
            h = 31u * h + p[i];
    } else if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *p = data;
        for (Py_ssize_t i = 0; i < n; i++)
            h = 31u * h + p[i];
    } else {
        const Py_UCS4 *p = data;
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS4 c = p[i];
            if (c > 0xFFFF) {
                c -= 0x10000;
                h = 31u * h + (0xD800u + (c >> 10));
                h = 31u * h + (0xDC00u + (c & 0x3FF));
            } else {
                h = 31u * h + c;
            }
        }
    }
    return (int32_t)h;
}

static PyObject *java_string_hash(PyObject *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "java_string_hash: a str is needed");
        return NULL;
    }
    return PyLong_FromLong(rs_java_hash_str(arg));
}

PyMethodDef rs_common_methods[] = {
    {"java_string_hash", java_string_hash, METH_O, "Java's String.hashCode of a str (int32)."},
    {NULL, NULL, 0, NULL},
};

/* len(s.encode("utf-8", "replace")): an unpaired surrogate is one "?", as Java's getBytes(UTF_8) writes it. */
Py_ssize_t rs_utf8_len(PyObject *s) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (PyUnicode_IS_ASCII(s))
        return n;
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    Py_ssize_t len = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        len += c < 0x80 ? 1 : c < 0x800 ? 2 : (c >= 0xD800 && c <= 0xDFFF) ? 1 : c < 0x10000 ? 3 : 4;
    }
    return len;
}

/* Writes s as rs_utf8_len counted it; returns the end. */
unsigned char *rs_utf8_put(unsigned char *o, PyObject *s) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (PyUnicode_IS_ASCII(s)) {
        memcpy(o, PyUnicode_DATA(s), n);
        return o + n;
    }
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c < 0x80) {
            *o++ = (unsigned char)c;
        } else if (c < 0x800) {
            *o++ = (unsigned char)(0xC0 | (c >> 6));
            *o++ = (unsigned char)(0x80 | (c & 0x3F));
        } else if (c >= 0xD800 && c <= 0xDFFF) {
            *o++ = '?';
        } else if (c < 0x10000) {
            *o++ = (unsigned char)(0xE0 | (c >> 12));
            *o++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            *o++ = (unsigned char)(0x80 | (c & 0x3F));
        } else {
            *o++ = (unsigned char)(0xF0 | (c >> 18));
            *o++ = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
            *o++ = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            *o++ = (unsigned char)(0x80 | (c & 0x3F));
        }
    }
    return o;
}
