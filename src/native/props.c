/* Message properties (formats/properties.parse_properties_py is the reference): a query re-checks every hit's
 * UNIQ_KEY and KEYS, and every decoded message reads its properties through this. */
#include "native.h"
#include "formats/properties.h"
#include <string.h>

/* parse_properties(raw) -> dict: string2messageProperties over `name \x01 value \x02` pairs (bytes-like, or a
 * str taken as its UTF-8 with surrogates passed): a part without \x01, with an empty name or an empty value is
 * dropped, a later pair with the same name replaces the value in place, text decodes as UTF-8 with
 * replacement characters. */
static PyObject *parse_properties(PyObject *self, PyObject *arg) {
    PyObject *enc = NULL, *out = NULL;
    Py_buffer view;
    if (PyUnicode_Check(arg)) {
        enc = PyUnicode_AsEncodedString(arg, "utf-8", "surrogatepass");
        if (enc == NULL)
            return NULL;
        arg = enc;
    }
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        Py_XDECREF(enc);
        return NULL;
    }
    out = PyDict_New();
    if (out == NULL)
        goto done;
    Py_ssize_t at = 0;
    rs_prop it;
    while (rs_prop_next(view.buf, view.len, &at, &it)) {
        if (rs_prop_kept(&it)) {
            PyObject *k = PyUnicode_DecodeUTF8((const char *)it.item, it.name_len, "replace");
            PyObject *v = k == NULL ? NULL : PyUnicode_DecodeUTF8((const char *)it.value, it.value_len, "replace");
            int bad = v == NULL || PyDict_SetItem(out, k, v) < 0;
            Py_XDECREF(k);
            Py_XDECREF(v);
            if (bad) {
                Py_CLEAR(out);
                goto done;
            }
        }
    }
done:
    PyBuffer_Release(&view);
    Py_XDECREF(enc);
    return out;
}

#define MAX_NAMES 64

/* The names property_values looks for: an ASCII name is matched on its bytes (text that decodes to ASCII is
 * those very bytes: a bad byte decodes to U+FFFD), any other name on the decoded name. */
typedef struct {
    Py_ssize_t n;
    PyObject *obj[MAX_NAMES];
    const char *bytes[MAX_NAMES];
    Py_ssize_t len[MAX_NAMES];
} names_t;

/* One raw properties' pairs (p NULL: none): where the value of each name is (vp NULL: absent). -1 with an
 * exception set. */
static int scan_values(const char *raw, Py_ssize_t n, const names_t *nm, const char **vp, Py_ssize_t *vl) {
    for (Py_ssize_t j = 0; j < nm->n; j++)
        vp[j] = NULL;
    if (raw == NULL)
        return 0;
    Py_ssize_t at = 0;
    rs_prop it;
    while (rs_prop_next((const unsigned char *)raw, n, &at, &it)) {
        if (rs_prop_kept(&it)) {  /* parse_properties keeps this pair */
            const char *p = (const char *)it.item;
            Py_ssize_t kl = it.name_len;
            PyObject *key = NULL;
            for (Py_ssize_t j = 0; j < nm->n; j++) {
                int same;
                if (nm->bytes[j] != NULL) {
                    same = kl == nm->len[j] && memcmp(p, nm->bytes[j], (size_t)kl) == 0;
                } else {
                    if (key == NULL && (key = PyUnicode_DecodeUTF8(p, kl, "replace")) == NULL)
                        return -1;
                    same = PyUnicode_Compare(key, nm->obj[j]) == 0;
                    if (!same && PyErr_Occurred()) {
                        Py_DECREF(key);
                        return -1;
                    }
                }
                if (same) {  /* a later pair replaces the value */
                    vp[j] = (const char *)it.value;
                    vl[j] = it.value_len;
                }
            }
            Py_XDECREF(key);
        }
    }
    return 0;
}

/* property_values(raws, names) -> list of tuples: for each raw properties (bytes-like, a str taken as its UTF-8
 * with surrogates passed, or None: no properties), the value parse_properties(raw).get(name) gives for each of
 * `names` (at most 64), in order: the last pair of that name with a non-empty value, or None. */
static PyObject *property_values(PyObject *self, PyObject *args) {
    PyObject *raws_arg, *names_arg, *raws = NULL, *names = NULL, *out = NULL;
    names_t nm;
    const char *vp[MAX_NAMES];
    Py_ssize_t vl[MAX_NAMES];
    /* each name's last decoded value and its bytes: runs repeat values, which then share one str */
    PyObject *prev[MAX_NAMES] = {NULL}, *prev_raw[MAX_NAMES] = {NULL};
    if (!PyArg_ParseTuple(args, "OO:property_values", &raws_arg, &names_arg))
        return NULL;
    raws = PySequence_Fast(raws_arg, "raws must be a sequence");
    if (raws == NULL)
        return NULL;
    names = PySequence_Fast(names_arg, "names must be a sequence");
    if (names == NULL)
        goto fail;
    nm.n = PySequence_Fast_GET_SIZE(names);
    if (nm.n > MAX_NAMES) {
        PyErr_SetString(PyExc_ValueError, "property_values takes at most 64 names");
        goto fail;
    }
    for (Py_ssize_t j = 0; j < nm.n; j++) {
        PyObject *name = PySequence_Fast_GET_ITEM(names, j);
        if (!PyUnicode_Check(name)) {
            PyErr_SetString(PyExc_TypeError, "names must be str");
            goto fail;
        }
        nm.obj[j] = name;
        nm.bytes[j] = NULL;
        if (PyUnicode_IS_ASCII(name) && (nm.bytes[j] = PyUnicode_AsUTF8AndSize(name, &nm.len[j])) == NULL)
            goto fail;
    }
    Py_ssize_t nr = PySequence_Fast_GET_SIZE(raws);
    out = PyList_New(nr);
    if (out == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < nr; i++) {
        PyObject *raw = PySequence_Fast_GET_ITEM(raws, i);
        int bad;
        if (raw == Py_None) {
            bad = scan_values(NULL, 0, &nm, vp, vl);
        } else {
            PyObject *enc = NULL;
            Py_buffer view;
            if (PyUnicode_Check(raw)) {
                enc = PyUnicode_AsEncodedString(raw, "utf-8", "surrogatepass");
                if (enc == NULL)
                    goto fail;
                raw = enc;
            }
            if (PyObject_GetBuffer(raw, &view, PyBUF_SIMPLE) < 0) {
                Py_XDECREF(enc);
                goto fail;
            }
            const char *p = view.buf;
            bad = scan_values(p, view.len, &nm, vp, vl);
            /* the values are decoded while the buffer is held */
            PyObject *row = bad ? NULL : PyTuple_New(nm.n);
            for (Py_ssize_t j = 0; row != NULL && j < nm.n; j++) {
                PyObject *v;
                if (vp[j] == NULL) {
                    v = Py_NewRef(Py_None);
                } else if (prev[j] != NULL && PyBytes_GET_SIZE(prev_raw[j]) == vl[j]
                           && memcmp(PyBytes_AS_STRING(prev_raw[j]), vp[j], (size_t)vl[j]) == 0) {
                    v = Py_NewRef(prev[j]);  /* the previous record's value again: the same str */
                } else if ((v = PyUnicode_DecodeUTF8(vp[j], vl[j], "replace")) != NULL) {
                    PyObject *r = PyBytes_FromStringAndSize(vp[j], vl[j]);
                    if (r == NULL) {
                        Py_CLEAR(v);
                    } else {
                        Py_XSETREF(prev_raw[j], r);
                        Py_XSETREF(prev[j], Py_NewRef(v));
                    }
                }
                if (v == NULL)
                    Py_CLEAR(row);
                else
                    PyTuple_SET_ITEM(row, j, v);
            }
            PyBuffer_Release(&view);
            Py_XDECREF(enc);
            if (row == NULL)
                goto fail;
            PyList_SET_ITEM(out, i, row);
            continue;
        }
        if (bad)
            goto fail;
        PyObject *row = PyTuple_New(nm.n);
        if (row == NULL)
            goto fail;
        for (Py_ssize_t j = 0; j < nm.n; j++)
            PyTuple_SET_ITEM(row, j, Py_NewRef(Py_None));
        PyList_SET_ITEM(out, i, row);
    }
    Py_DECREF(raws);
    Py_DECREF(names);
    for (Py_ssize_t j = 0; j < MAX_NAMES; j++) {
        Py_XDECREF(prev[j]);
        Py_XDECREF(prev_raw[j]);
    }
    return out;
fail:
    Py_XDECREF(raws);
    Py_XDECREF(names);
    Py_XDECREF(out);
    for (Py_ssize_t j = 0; j < MAX_NAMES; j++) {
        Py_XDECREF(prev[j]);
        Py_XDECREF(prev_raw[j]);
    }
    return NULL;
}

PyMethodDef rs_props_methods[] = {
    {"property_values", property_values, METH_VARARGS,
     "property_values(raws, names) -> list of tuples (formats.properties.property_values_py is the reference)."},
    {"parse_properties", parse_properties, METH_O,
     "parse_properties(raw) -> dict (formats.properties.parse_properties_py is the reference)."},
    {NULL, NULL, 0, NULL},
};
