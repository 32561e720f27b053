/* The scan path's record walk, shared by scan.c (decode_run) and verify.c (verify's record table). */
#ifndef ROCKETSTORE_SCAN_H
#define ROCKETSTORE_SCAN_H
#include "native.h"
#include "props.h"

#define MAGIC_V1 ((int32_t)0xDAA320A7)
#define MAGIC_V2 ((int32_t)0xDAA320AB)
#define MIN_RECORD 91
#define BORNHOST_V6_FLAG 0x10
#define STOREHOST_V6_FLAG 0x20
#define INNER_BATCH_FLAG 0x80

typedef struct {
    Py_ssize_t pos, size;
    int32_t qid, flags;
    int64_t qoff, phys, store_ts;
    Py_ssize_t topic_pos, topic_len, props_pos, props_len;
    rs_props props;
} rs_rec;

/* The fixed checks of record_scan.chain and record_scan.scan for the record at p (limit: where the run must
 * end). 0: not a record the bulk path takes; 1: r filled (props not yet: rs_props_find). No GIL needed. */
int rs_walk_one(const unsigned char *b, Py_ssize_t p, Py_ssize_t limit, rs_rec *r, int32_t *crc,
                Py_ssize_t *body_pos, Py_ssize_t *body_len);

/* verify.c: the VerifyRecords type, added to the module by rs_scan_init */
int rs_verify_init(PyObject *module);

#endif
