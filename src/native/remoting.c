/* The remoting protocol's compact header (SerializeType.ROCKETMQ, RocketMQSerializable), read for
 * remoting/header_binary.py, whose pure decode is the reference and the path of every header this leaves to it. */
#include "native.h"
#include <string.h>

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

/* ---- the JSON header form, the plain shape (header_json.py): a flat object whose values are integers, strings,
 * null and, under "extFields", an object of strings. That is
 * what RocketMQ's fastjson and this server write, JSON's escapes decoded (a send's properties hold \u0001 and
 * \u0002); anything else is None, and header_json.decode reads it. */
struct json_in { const unsigned char *p; Py_ssize_t pos, n; };

static void ws(struct json_in *j) {
    while (j->pos < j->n && (j->p[j->pos] == ' ' || j->p[j->pos] == '\t' || j->p[j->pos] == '\n'
                             || j->p[j->pos] == '\r'))
        j->pos++;
}

static int hex4(const unsigned char *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = p[i], d = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f'
                                                                    ? (c | 0x20) - 'a' + 10 : 16;
        if (d == 16)
            return 0;
        v = v * 16 + d;
    }
    *out = v;
    return 1;
}

static char *put_utf8(char *w, unsigned cp) {
    if (cp < 0x80) {
        *w++ = (char)cp;
    } else if (cp < 0x800) {
        *w++ = (char)(0xC0 | cp >> 6);
        *w++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *w++ = (char)(0xE0 | cp >> 12);
        *w++ = (char)(0x80 | (cp >> 6 & 0x3F));
        *w++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *w++ = (char)(0xF0 | cp >> 18);
        *w++ = (char)(0x80 | (cp >> 12 & 0x3F));
        *w++ = (char)(0x80 | (cp >> 6 & 0x3F));
        *w++ = (char)(0x80 | (cp & 0x3F));
    }
    return w;
}

/* the escapes of JSON's string between p[start] and p[end) into UTF-8 at w (room: end - start bytes, which an
 * escape never outgrows): the bytes written, or -1 (a bad escape or a lone surrogate: not the plain shape) */
static Py_ssize_t unescape(const unsigned char *p, Py_ssize_t start, Py_ssize_t end, char *w0) {
    char *w = w0;
    for (Py_ssize_t i = start; i < end;) {
        if (p[i] != '\\') {
            *w++ = (char)p[i++];
            continue;
        }
        if (i + 1 >= end)
            return -1;
        unsigned char e = p[i + 1];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e != 0 && simple != NULL) {
            *w++ = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
            i += 2;
            continue;
        }
        unsigned cp, lo;
        if (e != 'u' || end - i < 6 || !hex4(p + i + 2, &cp))
            return -1;
        i += 6;
        if (cp >= 0xD800 && cp <= 0xDBFF) {     /* a pair, else a lone surrogate, which orjson refuses */
            if (end - i < 6 || p[i] != '\\' || p[i + 1] != 'u' || !hex4(p + i + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                return -1;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return -1;
        }
        w = put_utf8(w, cp);
    }
    return w - w0;
}

/* a string: a new str, or NULL with no error set (not the plain shape) or with one (memory) */
static PyObject *json_string(struct json_in *j) {
    if (j->pos >= j->n || j->p[j->pos] != '"')
        return NULL;
    Py_ssize_t start = ++j->pos;
    int escaped = 0;
    while (j->pos < j->n && j->p[j->pos] != '"') {
        if (j->p[j->pos] < 0x20)    /* a raw control character: not JSON */
            return NULL;
        if (j->p[j->pos] == '\\') {
            escaped = 1;
            j->pos++;       /* the escaped character (a quote too) is not the end */
        }
        j->pos++;
    }
    if (j->pos >= j->n)
        return NULL;
    Py_ssize_t end = j->pos++;
    if (!escaped) {
        PyObject *s = PyUnicode_DecodeUTF8((const char *)j->p + start, end - start, NULL);
        if (s == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            PyErr_Clear();
        return s;
    }
    char stack[512], *buf = end - start <= (Py_ssize_t)sizeof stack ? stack : PyMem_Malloc((size_t)(end - start));
    if (buf == NULL)
        return PyErr_NoMemory();
    Py_ssize_t n = unescape(j->p, start, end, buf);
    PyObject *s = n < 0 ? NULL : PyUnicode_DecodeUTF8(buf, n, NULL);
    if (s == NULL && PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
        PyErr_Clear();
    if (buf != stack)
        PyMem_Free(buf);
    return s;
}

/* an integer in int32 (JSON's form: no leading zero, an optional '-'): 1 and *out, else 0 */
static int json_int(struct json_in *j, long *out) {
    Py_ssize_t start = j->pos;
    int neg = j->pos < j->n && j->p[j->pos] == '-';
    j->pos += neg;
    Py_ssize_t d0 = j->pos;
    long long v = 0;
    while (j->pos < j->n && j->p[j->pos] >= '0' && j->p[j->pos] <= '9' && j->pos - d0 < 11)
        v = v * 10 + (j->p[j->pos++] - '0');
    Py_ssize_t digits = j->pos - d0;
    if (digits == 0 || digits > 10 || (digits > 1 && j->p[d0] == '0'))
        return 0;
    if (j->pos < j->n && (j->p[j->pos] == '.' || j->p[j->pos] == 'e' || j->p[j->pos] == 'E'
                          || (j->p[j->pos] >= '0' && j->p[j->pos] <= '9')))
        return 0;
    v = neg ? -v : v;
    if (v < INT32_MIN || v > INT32_MAX)
        return 0;
    (void)start;
    *out = (long)v;
    return 1;
}

static int json_null(struct json_in *j) {
    if (j->n - j->pos >= 4 && memcmp(j->p + j->pos, "null", 4) == 0) {
        j->pos += 4;
        return 1;
    }
    return 0;
}

/* "extFields": an object of string values into a new dict; 1, 0 (not plain), -1 */
static int json_ext(struct json_in *j, PyObject **out) {
    PyObject *d = PyDict_New();
    if (d == NULL)
        return -1;
    j->pos++;   /* '{' */
    ws(j);
    if (j->pos < j->n && j->p[j->pos] == '}') {
        j->pos++;
        *out = d;
        return 1;
    }
    for (;;) {
        ws(j);
        PyObject *k = json_string(j), *v = NULL;
        if (k != NULL) {
            ws(j);
            if (j->pos < j->n && j->p[j->pos] == ':') {
                j->pos++;
                ws(j);
                v = json_string(j);
            }
        }
        int r = k != NULL && v != NULL ? PyDict_SetItem(d, k, v) : PyErr_Occurred() ? -1 : 1;
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (r < 0 || k == NULL || v == NULL) {
            Py_DECREF(d);
            return r < 0 ? -1 : 0;
        }
        ws(j);
        if (j->pos < j->n && j->p[j->pos] == ',') {
            j->pos++;
            continue;
        }
        if (j->pos < j->n && j->p[j->pos] == '}') {
            j->pos++;
            *out = d;
            return 1;
        }
        Py_DECREF(d);
        return 0;
    }
}

enum { J_CODE, J_VERSION, J_OPAQUE, J_FLAG, J_INTS };
static const char *const J_INT_NAMES[J_INTS] = {"code", "version", "opaque", "flag"};

/* one top-level member (after its name): 1, 0 (not plain), -1 */
static int json_member(struct json_in *j, PyObject *name, PyObject *languages, long *ints, PyObject **language,
                       PyObject **remark, PyObject **ext) {
    Py_ssize_t klen;
    const char *key = PyUnicode_AsUTF8AndSize(name, &klen);
    if (key == NULL)
        return -1;
#define KEY_IS(s) (klen == (Py_ssize_t)strlen(s) && memcmp(key, s, (size_t)klen) == 0)  /* a NUL in it too */
    for (int i = 0; i < J_INTS; i++)
        if (KEY_IS(J_INT_NAMES[i]))
            return json_int(j, &ints[i]);
    if (KEY_IS("extFields")) {
        Py_CLEAR(*ext);
        if (json_null(j))
            return 1;
        return j->pos < j->n && j->p[j->pos] == '{' ? json_ext(j, ext) : 0;
    }
    int is_remark = KEY_IS("remark"), is_language = KEY_IS("language");
#undef KEY_IS
    if (is_remark && json_null(j)) {
        Py_CLEAR(*remark);
        return 1;
    }
    if (j->pos < j->n && j->p[j->pos] == '"') {
        PyObject *s = json_string(j);
        if (s == NULL)
            return PyErr_Occurred() ? -1 : 0;
        if (is_language) {
            PyObject *code = PyDict_GetItemWithError(languages, s);
            Py_DECREF(s);
            if (code == NULL)
                return PyErr_Occurred() ? -1 : 0;   /* an unknown name: decode_general's */
            Py_XSETREF(*language, Py_NewRef(code));
        } else if (is_remark) {
            Py_XSETREF(*remark, s);
        } else {
            Py_DECREF(s);   /* another member, a string (serializeTypeCurrentRPC) */
        }
        return 1;
    }
    if (is_language || is_remark)
        return 0;
    long ignored;
    return json_null(j) || json_int(j, &ignored);   /* another member: a null or an int32, else not plain */
}

/* decode_json_header(data, languages) -> (code, language, version, opaque, flag, remark, ext_fields) | None:
 * header_json.decode's fields for the plain shape (above; `languages`: LanguageCode's names -> codes), else None */
static PyObject *decode_json_header(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "decode_json_header(data, languages: dict)");
        return NULL;
    }
    Py_buffer b;
    if (PyObject_GetBuffer(args[0], &b, PyBUF_SIMPLE) < 0)
        return NULL;
    struct json_in j = {b.buf, 0, b.len};
    long ints[J_INTS] = {0, 0, 0, 0};
    PyObject *language = NULL, *remark = NULL, *ext = NULL, *out = NULL;
    int r = 0;
    ws(&j);
    if (j.pos >= j.n || j.p[j.pos] != '{')
        goto done;
    j.pos++;
    ws(&j);
    if (j.pos < j.n && j.p[j.pos] == '}') {
        j.pos++;
        r = 1;
    } else {
        for (;;) {
            ws(&j);
            PyObject *name = json_string(&j);
            if (name == NULL) {
                r = PyErr_Occurred() ? -1 : 0;
                break;
            }
            ws(&j);
            if (j.pos >= j.n || j.p[j.pos] != ':') {
                Py_DECREF(name);
                r = 0;
                break;
            }
            j.pos++;
            ws(&j);
            r = json_member(&j, name, args[1], ints, &language, &remark, &ext);
            Py_DECREF(name);
            if (r <= 0)
                break;
            ws(&j);
            if (j.pos < j.n && j.p[j.pos] == ',') {
                j.pos++;
                continue;
            }
            r = j.pos < j.n && j.p[j.pos] == '}';
            j.pos += r;
            break;
        }
    }
    if (r > 0) {
        ws(&j);
        if (j.pos != j.n)
            r = 0;      /* something after the object: not JSON */
    }
    if (r > 0 && language == NULL) {    /* no language: JAVA, as header_json.decode reads it */
        language = Py_XNewRef(PyDict_GetItemString(args[1], "JAVA"));
        if (language == NULL)
            r = 0;
    }
    if (r > 0)
        out = Py_BuildValue("(lOlllOO)", ints[J_CODE], language, ints[J_VERSION], ints[J_OPAQUE], ints[J_FLAG],
                            remark ? remark : Py_None, ext ? ext : Py_None);
done:
    if (r >= 0 && out == NULL && !PyErr_Occurred())
        out = Py_NewRef(Py_None);
    Py_XDECREF(language);
    Py_XDECREF(remark);
    Py_XDECREF(ext);
    PyBuffer_Release(&b);
    return out;
}

PyMethodDef rs_remoting_methods[] = {
    {"decode_json_header", (PyCFunction)(void (*)(void))decode_json_header, METH_FASTCALL,
     "decode_json_header(data, languages) -> (code, language, version, opaque, flag, remark, ext_fields) | None"},
    {"decode_binary_header", decode_binary_header, METH_O,
     "decode_binary_header(data) -> (code, language, version, opaque, flag, remark, ext_fields) | None"},
    {NULL, NULL, 0, NULL},
};
