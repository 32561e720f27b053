/* What the two put paths share (put_common.c): put.c (plain topics, the put lane's records) and put_batchcq.c
 * (batch-ConsumeQueue topics): reading a message's fields, the clock, the texts they refuse, and the
 * record's bytes as MessageWriter writes them. GIL held. */
#ifndef ROCKETSTORE_PUT_COMMON_H
#define ROCKETSTORE_PUT_COMMON_H
#include "native.h"

#define PUT_MAX_PAIRS 4096          /* more properties than this: Python's path (PROPERTIES holds 32767 bytes) */
#define PUT_MAX_TEXT (1 << 30)      /* a text this long is Python's to refuse */

/* An attribute that must be an int (exactly: not a bool) within [lo, hi]: 1 and *out set, 0 (no error) when it
 * is not such an int, -1 on an error. */
int rs_int_attr(PyObject *msg, PyObject *name, long long lo, long long hi, long long *out);

/* clock() as an int; clock None: config.wall_clock_ms's time.time_ns() // 1_000_000 (CLOCK_REALTIME, as
 * time.time_ns reads it on POSIX) without a Python call. 0, or -1 on an error. */
int rs_clock_ms(PyObject *clock, long long *out);

/* Does a str hold \x01 or \x02 (Message.text_problem refuses it; Python's path then answers)? */
int rs_has_separator(PyObject *s);

/* properties.crc32_property of crc at p: CRC32_PROPERTY_LEN bytes. */
void rs_put_crc_property(unsigned char *p, uint32_t crc);

/* A record's fixed part, TOTALSIZE .. BODYLEN (formats/record.h), as MessageWriter writes it. */
typedef struct {
    long long size, magic, queue_id, flag, qoff, phys, sysflag, born_ts, store_ts, reconsume, pto;
    const unsigned char *born_host, *store_host;   /* 8 or 20 bytes, as sysflag says */
    const unsigned char *body;                      /* BODYCRC is its CRC */
    Py_ssize_t body_len;
} rs_record_fields;

/* The record of f at o: its fixed part, the body, the topic tail (TOPICLEN and TOPIC) and PROPERTIESLEN
 * (props_len); returns where the properties go. */
unsigned char *rs_put_record(unsigned char *o, const rs_record_fields *f, const unsigned char *ttail,
                             Py_ssize_t tl, Py_ssize_t props_len);

/* One inner batch message at o (formats/inner_batch.h); returns its end. */
unsigned char *rs_put_inner(unsigned char *o, const char *body, Py_ssize_t bl, const char *props, Py_ssize_t pl,
                            int32_t flag);

#endif
