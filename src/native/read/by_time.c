/* getOffsetInQueueByTime: a ConsumeQueue's binary search over its records' store times. */
#include "native.h"
#include "read/read.h"
#include "formats/cq_unit.h"

/* ------------------------------------------------------------------ a queue's offset by time */
/* CommitLog.pickupStoreTimestamp of the record a unit points at, or -1 (outside the log, not written that far,
 * shorter than a record's header, or its STORETIMESTAMP field beyond `size`). */
static long long unit_store_ts(PyObject *cl_files, long long cl_fs, long long cl_min, long long cl_max,
                               long long pos, long long size, rs_mapped *seg, int *err) {
    if (!(pos >= cl_min && pos + size <= cl_max) || size < 64)
        return -1;
    if (!(seg->held && seg->from <= pos && pos < seg->from + cl_fs)) {
        int r = rs_find_mapped(cl_files, cl_fs, pos, seg);
        if (r < 0) {
            *err = 1;
            return -1;
        }
        if (r == 0)
            return -1;
    }
    long long at = pos - seg->from;
    if (at + size > seg->readpos || at + size > seg->view.len)
        return -1;
    const unsigned char *rec = (const unsigned char *)seg->view.buf + at;
    long long ts_pos = REC_STORE_TS(rec_born_len(rs_be32(rec + REC_SYSFLAG)));
    if (ts_pos + 8 > size)
        return -1;
    return (long long)rs_be64(rec + ts_pos);
}

static long long floor_div20(long long x) {   /* Python's x // 20: a unit's number */
    long long q = x / CQ_UNIT;
    return (x % CQ_UNIT != 0 && x < 0) ? q - 1 : q;
}

/* search_by_time(cq_buf, base, floor, ceiling, timestamp, lower, min_phy, cl_files, cl_file_size, cl_min, cl_max)
 *   -> queue offset
 * ConsumeQueue._search_by_time from its first probe on (the reference), over one ConsumeQueue file's units
 * [floor, ceiling] (byte positions; the caller has checked that the file is written that far). */
static PyObject *search_by_time(PyObject *self, PyObject *args) {
    Py_buffer b;
    PyObject *cl_files;
    long long base, floor, ceiling, ts, min_phy, cl_fs, cl_min, cl_max;
    int lower;
    if (!PyArg_ParseTuple(args, "y*LLLLpLOLLL:search_by_time", &b, &base, &floor, &ceiling, &ts, &lower, &min_phy,
                          &cl_files, &cl_fs, &cl_min, &cl_max))
        return NULL;
    const unsigned char *buf = b.buf;
    rs_mapped seg = {0};
    int err = 0;
    long long answer = 0, t, low = floor, high = ceiling, target = -1, left = -1, right = -1;
    if (floor < 0 || ceiling < floor || ceiling + CQ_UNIT > b.len) {
        PyErr_Format(PyExc_ValueError, "search_by_time: units [%lld, %lld] outside a buffer of %zd bytes", floor,
                     ceiling, b.len);
        goto fail;
    }
#define UNIT_TS(p) unit_store_ts(cl_files, cl_fs, cl_min, cl_max, (long long)rs_be64(buf + (p) + CQ_PHYS), \
                                 (long long)rs_be32(buf + (p) + CQ_SIZE), &seg, &err)
    t = UNIT_TS(ceiling);
    if (err)
        goto fail;
    if (t < ts) {
        answer = lower ? floor_div20(base + ceiling + CQ_UNIT) : floor_div20(base + ceiling);
        goto out;
    }
    t = UNIT_TS(floor);
    if (err)
        goto fail;
    if (t > ts) {
        answer = lower ? floor_div20(base) : 0;
        goto out;
    }
    while (high >= low) {
        long long mid = (low + high) / (2 * CQ_UNIT) * CQ_UNIT;
        if ((long long)rs_be64(buf + mid + CQ_PHYS) < min_phy) {
            low = mid + CQ_UNIT;
            left = mid;
            continue;
        }
        t = UNIT_TS(mid);
        if (err)
            goto fail;
        if (t < 0)
            goto out;   /* answer 0 */
        if (t == ts) {
            target = mid;
            break;
        }
        if (t > ts) {
            high = mid - CQ_UNIT;
            right = mid;
        } else {
            low = mid + CQ_UNIT;
            left = mid;
        }
    }
    long long offset;
    if (target != -1) {
        long long step = lower ? -CQ_UNIT : CQ_UNIT, prev = target;
        for (;;) {
            long long attempt = prev + step;
            if (attempt < floor || attempt > ceiling)
                break;
            t = UNIT_TS(attempt);
            if (err)
                goto fail;
            if (t != ts)
                break;
            prev = attempt;
        }
        offset = prev;
    } else {
        offset = lower ? right : left;
    }
    answer = floor_div20(base + offset);
#undef UNIT_TS
out:
    rs_mapped_release(&seg);
    PyBuffer_Release(&b);
    return PyLong_FromLongLong(answer);
fail:
    rs_mapped_release(&seg);
    PyBuffer_Release(&b);
    return NULL;
}

PyMethodDef rs_by_time_methods[] = {
    {"search_by_time", search_by_time, METH_VARARGS,
     "getOffsetInQueueByTime's binary search (log.consume_queue.ConsumeQueue._search_by_time is the reference)."},
    {NULL, NULL, 0, NULL},
};
