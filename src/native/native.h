/* rocketstore._native: the per-message loops in C (see README, "The native engine").
 *
 * Every size and offset read from a buffer is checked against the buffer before it is used; the pure
 * Python modules are the reference, and the tests require the same answers and the same errors from both.
 *
 * The on-disk formats are the headers in formats/ (one each, as the Python formats/ package), with the one record
 * parser (formats/record.h) and the one properties parser (formats/properties.h) every file reads through. */
#ifndef ROCKETSTORE_NATIVE_H
#define ROCKETSTORE_NATIVE_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>

/* Method tables of the parts of the module, joined at import (module.c). */
extern PyMethodDef rs_common_methods[];
extern PyMethodDef rs_put_methods[];
extern PyMethodDef rs_scan_methods[];
int rs_scan_init(void);                 /* scan.c */
int rs_verify_init(PyObject *module);   /* verify.c: the VerifyRecords type */
extern PyMethodDef rs_arrow_methods[];  /* arrow.c */
extern PyMethodDef rs_index_methods[];  /* index.c */
extern PyMethodDef rs_props_methods[];  /* props.c */
extern PyMethodDef rs_remoting_methods[];  /* remoting.c: the remoting protocol's compact header */
extern PyMethodDef rs_batchcq_methods[];  /* put_batchcq.c */
extern PyMethodDef rs_meter_methods[];  /* meter.c: the remoting meter's per-request work */
int rs_meter_init(PyObject *module);  /* and the Counts type */
int rs_meter_send(PyObject *state, PyObject *code, PyObject *topic, Py_ssize_t size, double millis);
extern PyMethodDef rs_fastsend_methods[];  /* fastsend.c: the common send in one call */
int rs_fastsend_init(PyObject *module);

/* rocketstore.errors.CorruptDataError, looked up at import. */
extern PyObject *rs_CorruptDataError;

/* Java's String.hashCode over the UTF-16 code units of a str (int32, wrapping). */
Py_ssize_t rs_utf8_len(PyObject *s);
unsigned char *rs_utf8_put(unsigned char *o, PyObject *s);
int32_t rs_java_hash_str(PyObject *s);
/* IndexFile's key hash of "topic#key" (index.c). */
int32_t rs_index_key_hash(PyObject *topic, PyObject *key);

/* Big-endian reads from a byte pointer; callers check bounds first. */
static inline int32_t rs_be32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}
static inline int64_t rs_be64(const unsigned char *p) {
    return (int64_t)(((uint64_t)(uint32_t)rs_be32(p) << 32) | (uint64_t)(uint32_t)rs_be32(p + 4));
}
static inline int rs_be16(const unsigned char *p) { return (p[0] << 8) | p[1]; }
static inline void rs_put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16); p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}
static inline void rs_put64(unsigned char *p, uint64_t v) {
    rs_put32(p, (uint32_t)(v >> 32)); rs_put32(p + 4, (uint32_t)v);
}
static inline void rs_put16(unsigned char *p, unsigned v) { p[0] = (unsigned char)(v >> 8); p[1] = (unsigned char)v; }

/* common.c (GIL held for these but rs_crc32) */
/* bytes -> str (UTF-8, "replace") through a small cache: topics repeat */
PyObject *rs_cached_str(const unsigned char *p, Py_ssize_t n);
/* zlib's crc32 of n bytes (no mask) */
uint32_t rs_crc32(const unsigned char *p, Py_ssize_t n);
/* the offsets of a __slots__ class's members, and a new instance with them set (references stolen) */
int rs_slot_offsets(PyObject *type, const char *const *names, int n, Py_ssize_t *offsets);
PyObject *rs_new_slotted(PyTypeObject *tp, const Py_ssize_t *offsets, PyObject **vals, int n);
/* raises CorruptDataError(reason, pos), the reason formatted as printf does (at most 255 bytes); NULL */
PyObject *rs_corrupt(Py_ssize_t pos, const char *fmt, ...);


/* lane.c: the PutLane type */
int rs_lane_init(PyObject *module);

/* put.c: one keyed (or plain) message's record on the plain put path, for keyed_record and the put lane; a
 * message with raw_properties or an IPv4 born host ("a.b.c.d:port", as a broker's send names its producer) too */
typedef struct {
    PyObject *props, *info, *body;  /* PROPERTIES bytes, their props_info, the body (held) */
    long long flag, reconsume, pto, born_ts;
    int has_born;                   /* born_ts is the message's (else the clock's, read by the caller) */
    int has_born_host;              /* born_host holds the message's IPv4 born host (else the store host's) */
    unsigned char born_host[8];
    Py_ssize_t size;                /* the record's length */
} rs_keyed;
int rs_keyed_prepare(PyObject *msg, Py_ssize_t tail_len, Py_ssize_t max_body, Py_ssize_t max_record, rs_keyed *k);
void rs_keyed_write(unsigned char *o, const rs_keyed *k, const unsigned char *ttail, Py_ssize_t tl, int magic,
                    int queue_id, long long qoff, long long phys, const unsigned char *h, long long store_ts);
void rs_keyed_clear(rs_keyed *k);

#endif
