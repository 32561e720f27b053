/* Message properties (formats/properties.parse_properties_py is the reference): a query re-checks every hit's
 * UNIQ_KEY and KEYS, and every decoded message reads its properties through this. */
#include "native.h"
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
    const char *p = view.buf, *end = p + view.len;
    for (;;) {
        const char *q = memchr(p, 2, (size_t)(end - p));
        if (q == NULL)
            q = end;
        const char *sep = memchr(p, 1, (size_t)(q - p));
        if (sep != NULL && sep > p && q > sep + 1) {
            PyObject *k = PyUnicode_DecodeUTF8(p, sep - p, "replace");
            PyObject *v = k == NULL ? NULL : PyUnicode_DecodeUTF8(sep + 1, q - sep - 1, "replace");
            int bad = v == NULL || PyDict_SetItem(out, k, v) < 0;
            Py_XDECREF(k);
            Py_XDECREF(v);
            if (bad) {
                Py_CLEAR(out);
                goto done;
            }
        }
        if (q == end)
            break;
        p = q + 1;
    }
done:
    PyBuffer_Release(&view);
    Py_XDECREF(enc);
    return out;
}

PyMethodDef rs_props_methods[] = {
    {"parse_properties", parse_properties, METH_O,
     "parse_properties(raw) -> dict (formats.properties.parse_properties_py is the reference)."},
    {NULL, NULL, 0, NULL},
};
