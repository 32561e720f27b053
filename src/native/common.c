/* Shared pieces: Java's String.hashCode (tagsCode, index keys), UTF-8 Java's way, zlib's crc32, a str cache,
 * __slots__ instances built directly, CorruptDataError. */
#include "native.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>
#include <structmember.h>

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

/* ------------------------------------------------------------------ __slots__ classes */
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

/* ------------------------------------------------------------------ errors */
PyObject *rs_corrupt(Py_ssize_t pos, const char *fmt, ...) {
    char text[256];
    va_list va;
    va_start(va, fmt);
    vsnprintf(text, sizeof text, fmt, va);
    va_end(va);
    PyObject *exc = PyObject_CallFunction(rs_CorruptDataError, "sn", text, pos);
    if (exc != NULL) {
        PyErr_SetObject(rs_CorruptDataError, exc);
        Py_DECREF(exc);
    }
    return NULL;
}
