/* What the two put paths share (put_common.h). */
#include "put_common.h"
#include "formats/inner_batch.h"
#include "formats/properties.h"
#include "formats/record.h"
#include <string.h>
#include <time.h>

int rs_int_attr(PyObject *msg, PyObject *name, long long lo, long long hi, long long *out) {
    PyObject *v = PyObject_GetAttr(msg, name);
    if (v == NULL)
        return -1;
    int ok = 0;
    if (PyLong_CheckExact(v)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (x == -1 && PyErr_Occurred()) {
            Py_DECREF(v);
            return -1;
        }
        if (!overflow && x >= lo && x <= hi) {
            *out = x;
            ok = 1;
        }
    }
    Py_DECREF(v);
    return ok;
}

int rs_clock_ms(PyObject *clock, long long *out) {
    if (clock == Py_None) {
        struct timespec ts;
        if (clock_gettime(CLOCK_REALTIME, &ts) != 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        *out = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        return 0;
    }
    PyObject *v = PyObject_CallNoArgs(clock);
    if (v == NULL)
        return -1;
    *out = PyLong_AsLongLong(v);    /* as struct.pack("q") takes it: an int that fits, else an error */
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

int rs_has_separator(PyObject *s) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (PyUnicode_IS_ASCII(s)) {
        const char *p = PyUnicode_DATA(s);
        return memchr(p, PROP_NAME_END, n) != NULL || memchr(p, PROP_ITEM_END, n) != NULL;
    }
    return PyUnicode_FindChar(s, PROP_NAME_END, 0, n, 1) != -1 || PyUnicode_FindChar(s, PROP_ITEM_END, 0, n, 1) != -1;
}

void rs_put_crc_property(unsigned char *p, uint32_t crc) {
    memcpy(p, CRC32_PROPERTY "\x01", 9);
    for (int i = 0; i < 10; i++) {
        p[9 + i] = (unsigned char)('0' + crc % 10);
        crc /= 10;
    }
    p[19] = PROP_ITEM_END;
}

unsigned char *rs_put_record(unsigned char *o, const rs_record_fields *f, const unsigned char *ttail,
                             Py_ssize_t tl, Py_ssize_t props_len) {
    Py_ssize_t bl = rec_born_len((int32_t)f->sysflag), sl = rec_store_len((int32_t)f->sysflag);
    rs_put32(o + REC_TOTALSIZE, (uint32_t)f->size);
    rs_put32(o + REC_MAGIC, (uint32_t)f->magic);
    rs_put32(o + REC_BODYCRC, rs_crc32(f->body, f->body_len) & 0x7FFFFFFFu);
    rs_put32(o + REC_QUEUEID, (uint32_t)f->queue_id);
    rs_put32(o + REC_FLAG, (uint32_t)f->flag);
    rs_put64(o + REC_QUEUEOFFSET, (uint64_t)f->qoff);
    rs_put64(o + REC_PHYSICALOFFSET, (uint64_t)f->phys);
    rs_put32(o + REC_SYSFLAG, (uint32_t)f->sysflag);
    rs_put64(o + REC_BORN_TS, (uint64_t)f->born_ts);
    memcpy(o + REC_BORNHOST, f->born_host, (size_t)bl);
    rs_put64(o + REC_STORE_TS(bl), (uint64_t)f->store_ts);
    memcpy(o + REC_STOREHOST(bl), f->store_host, (size_t)sl);
    rs_put32(o + REC_RECONSUME(bl, sl), (uint32_t)f->reconsume);
    rs_put64(o + REC_PREPARED_TX(bl, sl), (uint64_t)f->pto);
    rs_put32(o + REC_BODYLEN(bl, sl), (uint32_t)f->body_len);
    unsigned char *q = o + REC_BODY(bl, sl);
    memcpy(q, f->body, (size_t)f->body_len);
    q += f->body_len;
    memcpy(q, ttail, (size_t)tl);
    q += tl;
    rs_put16(q, (unsigned)props_len);
    return q + 2;
}

unsigned char *rs_put_inner(unsigned char *o, const char *body, Py_ssize_t bl, const char *props, Py_ssize_t pl,
                            int32_t flag) {
    rs_put32(o + INNER_TOTALSIZE, (uint32_t)(INNER_FIXED + bl + pl));
    rs_put32(o + INNER_MAGIC, 0);
    rs_put32(o + INNER_BODYCRC, 0);
    rs_put32(o + INNER_FLAG, (uint32_t)flag);
    rs_put32(o + INNER_BODYLEN, (uint32_t)bl);
    memcpy(o + INNER_BODY, body, (size_t)bl);
    o += INNER_BODY + bl;
    rs_put16(o, (unsigned)pl);
    memcpy(o + 2, props, (size_t)pl);
    return o + 2 + pl;
}
