/* A MappedFileQueue's files as the read path finds them (files.find): the file holding an offset, its
 * read position and a held view of its buffer. */
#include "native.h"
#include "read/read.h"

PyObject *rs_S_from, *rs_S_buf;
static PyObject *S_wbuf, *S_wrote, *S_committed;

int rs_attr_ll(PyObject *o, PyObject *name, long long *v) {
    PyObject *a = PyObject_GetAttr(o, name);
    if (a == NULL)
        return -1;
    *v = PyLong_AsLongLong(a);
    Py_DECREF(a);
    return (*v == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* MappedFile.read_position (what readers may see: `wrote`, or with a write buffer `committed`), read from
 * its attributes: a property call per get costs more than the rest of a short one. */
int rs_read_position(PyObject *mf, long long *v) {
    PyObject *wbuf = PyObject_GetAttr(mf, S_wbuf);
    if (wbuf == NULL)
        return -1;
    int direct = wbuf == Py_None;
    Py_DECREF(wbuf);
    return rs_attr_ll(mf, direct ? S_wrote : S_committed, v);
}

void rs_mapped_release(rs_mapped *m) {
    if (m->held)
        PyBuffer_Release(&m->view);
    m->held = 0;
}

/* 1: found (m filled, its buffer held), 0: no file holds `offset` (or it has no buffer), -1: error */
int rs_find_mapped(PyObject *files, long long file_size, long long offset, rs_mapped *m) {
    rs_mapped_release(m);
    if (!PyList_Check(files) || file_size <= 0 || offset < 0 || PyList_GET_SIZE(files) == 0)
        return 0;
    long long first;
    if (rs_attr_ll(PyList_GET_ITEM(files, 0), rs_S_from, &first) < 0)
        return -1;
    if (first < 0)
        return 0;
    long long idx = offset / file_size - first / file_size;
    if (idx < 0 || idx >= PyList_GET_SIZE(files))
        return 0;
    PyObject *mf = PyList_GET_ITEM(files, idx);
    Py_INCREF(mf);   /* the read_position property runs Python code: the list may change meanwhile */
    int r = 0;
    PyObject *buf = NULL;
    if (rs_attr_ll(mf, rs_S_from, &m->from) < 0)
        goto fail;
    if (!(m->from <= offset && offset < m->from + file_size))
        goto out;
    if ((buf = PyObject_GetAttr(mf, rs_S_buf)) == NULL)
        goto fail;
    if (buf == Py_None)
        goto out;
    if (PyObject_GetBuffer(buf, &m->view, PyBUF_SIMPLE) < 0)
        goto fail;
    m->held = 1;
    if (rs_read_position(mf, &m->readpos) < 0) {
        rs_mapped_release(m);
        goto fail;
    }
    r = 1;
out:
    Py_XDECREF(buf);
    Py_DECREF(mf);
    return r;
fail:
    Py_XDECREF(buf);
    Py_DECREF(mf);
    return -1;
}

int rs_mapped_init(void) {
    rs_S_from = PyUnicode_InternFromString("file_from_offset");
    rs_S_buf = PyUnicode_InternFromString("buf");
    S_wbuf = PyUnicode_InternFromString("wbuf");
    S_wrote = PyUnicode_InternFromString("wrote");
    S_committed = PyUnicode_InternFromString("committed");
    return (rs_S_from && rs_S_buf && S_wbuf && S_wrote && S_committed) ? 0 : -1;
}
