/* The CommitLog record (formats/record.py; RocketMQ's CommitLog.MessageExtEncoder and MessageDecoder):
 *
 *   TOTALSIZE 4, MAGICCODE 4, BODYCRC 4, QUEUEID 4, FLAG 4, QUEUEOFFSET 8, PHYSICALOFFSET 8, SYSFLAG 4,
 *   BORNTIMESTAMP 8, BORNHOST 8 | 20, STORETIMESTAMP 8, STOREHOSTADDRESS 8 | 20, RECONSUMETIMES 4,
 *   PREPAREDTRANSACTIONOFFSET 8, BODYLEN 4, BODY, TOPICLEN 1 (magic V1) | 2 (V2), TOPIC, PROPERTIESLEN 2,
 *   PROPERTIES
 *
 * A host is its IP (4 bytes, or 16 with SYSFLAG's V6 flag) and a port (4): the fields from STORETIMESTAMP on
 * lie where the hosts' widths put them (REC_STORE_TS and after, given those widths). */
#ifndef ROCKETSTORE_FORMATS_RECORD_H
#define ROCKETSTORE_FORMATS_RECORD_H
#include "native.h"

/* MAGICCODE */
#define MAGIC_V1 ((int32_t)0xDAA320A7)
#define MAGIC_V2 ((int32_t)0xDAA320AB)
#define BLANK_MAGIC ((int32_t)0xCBD43194)
/* a segment's end: a BLANK (TOTALSIZE and BLANK_MAGIC) needs this much room after the last record */
#define END_FILE_MIN_BLANK_LENGTH 8

/* SYSFLAG */
#define TRANSACTION_TYPE_MASK 0xC
#define TRANSACTION_NOT_TYPE 0x0
#define TRANSACTION_PREPARED_TYPE 0x4
#define TRANSACTION_COMMIT_TYPE 0x8
#define TRANSACTION_ROLLBACK_TYPE 0xC
#define BORNHOST_V6_FLAG 0x10
#define STOREHOST_V6_FLAG 0x20
#define HOST_V6_FLAGS (BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
#define INNER_BATCH_FLAG 0x80

/* the fixed fields' offsets up to the born host */
#define REC_TOTALSIZE 0
#define REC_MAGIC 4
#define REC_BODYCRC 8
#define REC_QUEUEID 12
#define REC_FLAG 16
#define REC_QUEUEOFFSET 20
#define REC_PHYSICALOFFSET 28
#define REC_SYSFLAG 36
#define REC_BORN_TS 40
#define REC_BORNHOST 48

/* a host's bytes: IPv4 + port, IPv6 + port */
#define REC_HOST_V4 8
#define REC_HOST_V6 20
/* the offsets after the born host, given the born (b) and store (s) hosts' widths */
#define REC_STORE_TS(b) (REC_BORNHOST + (b))
#define REC_STOREHOST(b) (REC_BORNHOST + (b) + 8)
#define REC_RECONSUME(b, s) (REC_BORNHOST + (b) + 8 + (s))
#define REC_PREPARED_TX(b, s) (REC_RECONSUME(b, s) + 4)
#define REC_BODYLEN(b, s) (REC_RECONSUME(b, s) + 12)
#define REC_BODY(b, s) (REC_RECONSUME(b, s) + 16)   /* the fixed part's length: 88 with IPv4 hosts */

/* the shortest record: IPv4 hosts, no body, a V1 topic length and an empty topic, PROPERTIESLEN */
#define REC_MIN_SIZE (REC_BODY(REC_HOST_V4, REC_HOST_V4) + 1 + 2)   /* 91 */
/* the longest PROPERTIES (Java writes PROPERTIESLEN as a short; a negative one reads as none) */
#define REC_MAX_PROPERTIES 0x7FFF

static inline Py_ssize_t rec_born_len(int32_t sysflag) {
    return (sysflag & BORNHOST_V6_FLAG) ? REC_HOST_V6 : REC_HOST_V4;
}
static inline Py_ssize_t rec_store_len(int32_t sysflag) {
    return (sysflag & STOREHOST_V6_FLAG) ? REC_HOST_V6 : REC_HOST_V4;
}
/* gets_queue_unit: a normal or committed message (not prepared, not rolled back) gets a ConsumeQueue unit */
static inline int rec_gets_queue_unit(int32_t sysflag) {
    int tran = sysflag & TRANSACTION_TYPE_MASK;
    return tran == TRANSACTION_NOT_TYPE || tran == TRANSACTION_COMMIT_TYPE;
}

/* ------------------------------------------------------------------ the parser */
/* Where one record's variable fields lie (offsets from the record's start). */
typedef struct {
    Py_ssize_t size;
    int32_t magic, sysflag, body_len;
    Py_ssize_t born_len, store_len;   /* the hosts' widths */
    Py_ssize_t body_pos, topic_pos, topic_len, props_pos, props_len;
} rs_record;

/* What rs_record_layout found wrong: the first field that does not fit the record. */
enum { REC_OK, REC_BAD_HOSTS, REC_BAD_BODY, REC_BAD_TOPIC, REC_BAD_SIZE };

/* The one record parser of the C engine: the layout of the record of `size` bytes at rec, by the bound checks
 * of formats.record (decode_record_py and record_scan.scan take the same records; the first says which field
 * is wrong). The caller has checked that `size` bytes are readable at rec and that size >= REC_SYSFLAG + 4;
 * MAGICCODE V2 means a 2-byte TOPICLEN (the caller checks the magic code, if it does). REC_OK with r filled,
 * or the field that does not fit, with r filled up to it (body_len; topic_len; props_pos + props_len: where
 * the fields end). No GIL needed. */
static inline int rs_record_layout(const unsigned char *rec, Py_ssize_t size, rs_record *r) {
    r->size = size;
    r->magic = rs_be32(rec + REC_MAGIC);
    r->sysflag = rs_be32(rec + REC_SYSFLAG);
    r->born_len = rec_born_len(r->sysflag);
    r->store_len = rec_store_len(r->sysflag);
    Py_ssize_t p = REC_BODY(r->born_len, r->store_len);
    /* what a record needs after its fixed part: TOPICLEN (1 at least) and PROPERTIESLEN */
    if (p + 3 > size)
        return REC_BAD_HOSTS;
    r->body_len = rs_be32(rec + p - 4);
    if (r->body_len < 0 || p + (Py_ssize_t)r->body_len + 3 > size)
        return REC_BAD_BODY;
    r->body_pos = p;
    p += r->body_len;
    if (r->magic == MAGIC_V2) {
        r->topic_len = rs_be16(rec + p);
        p += 2;
    } else {
        r->topic_len = rec[p];
        p += 1;
    }
    if (p + r->topic_len + 2 > size)
        return REC_BAD_TOPIC;
    r->topic_pos = p;
    p += r->topic_len;
    r->props_len = rs_be16(rec + p);
    if (r->props_len > REC_MAX_PROPERTIES)
        r->props_len = 0;    /* Java reads a negative short and skips the properties */
    r->props_pos = p + 2;
    return r->props_pos + r->props_len == size ? REC_OK : REC_BAD_SIZE;
}

/* ------------------------------------------------------------------ the scan path's walk */
#include "formats/properties.h"

/* A record as the scan path's walk takes it (positions in the walked buffer). */
typedef struct {
    Py_ssize_t pos, size;
    int32_t qid, flags;
    int64_t qoff, phys, store_ts;
    Py_ssize_t topic_pos, topic_len, props_pos, props_len;
    rs_props props;
} rs_rec;

/* The fixed checks of record_scan.chain and record_scan.scan for the record at b[p:] (limit: where the run
 * must end): a magic code of a message, a size of at least REC_MIN_SIZE inside the run, rs_record_layout's
 * fields, no inner batch. 0: not a record the bulk path takes; 1: r filled (props not yet: rs_props_find),
 * with the BODYCRC field and the body's place. Defined in formats/record.c (scan.c's decode_run, verify.c).
 * No GIL needed. */
int rs_walk_one(const unsigned char *b, Py_ssize_t p, Py_ssize_t limit, rs_rec *r, int32_t *crc,
                Py_ssize_t *body_pos, Py_ssize_t *body_len);

#endif
