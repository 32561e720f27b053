/* The scan path's record walk (formats/record.h): one record's fixed checks, for the bulk decoder (scan.c)
 * and verify's record table (verify.c). */
#include "formats/record.h"

int rs_walk_one(const unsigned char *b, Py_ssize_t p, Py_ssize_t limit, rs_rec *r, int32_t *crc,
                Py_ssize_t *body_pos, Py_ssize_t *body_len) {
    if (p + 8 > limit)
        return 0;
    int32_t size = rs_be32(b + p + REC_TOTALSIZE), magic = rs_be32(b + p + REC_MAGIC);
    if ((magic != MAGIC_V1 && magic != MAGIC_V2) || size < REC_MIN_SIZE || (Py_ssize_t)size > limit - p)
        return 0;
    rs_record rec;
    if (rs_record_layout(b + p, size, &rec) != REC_OK || (rec.sysflag & INNER_BATCH_FLAG))
        return 0;
    r->pos = p;
    r->size = size;
    r->qid = rs_be32(b + p + REC_QUEUEID);
    r->flags = rec.sysflag;
    r->qoff = rs_be64(b + p + REC_QUEUEOFFSET);
    r->phys = rs_be64(b + p + REC_PHYSICALOFFSET);
    r->store_ts = rs_be64(b + p + REC_STORE_TS(rec.born_len));
    r->topic_pos = p + rec.topic_pos;
    r->topic_len = rec.topic_len;
    r->props_pos = p + rec.props_pos;
    r->props_len = rec.props_len;
    *crc = rs_be32(b + p + REC_BODYCRC);
    *body_pos = p + rec.body_pos;
    *body_len = rec.body_len;
    return 1;
}
