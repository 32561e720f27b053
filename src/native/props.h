/* The properties finder shared by the put path's props_info (put.c), the bulk decoder (scan.c) and verify's
 * walk (verify.c); defined in props.c. No GIL needed. */
#ifndef ROCKETSTORE_PROPS_H
#define ROCKETSTORE_PROPS_H
#include "native.h"

/* What rs_props_find reads from a properties string (bulk_dispatch.props_info's rule): for TAGS, KEYS,
 * UNIQ_KEY, DELAY, INNER_NUM, INNER_BASE and __CRC32# at an item start ("name\x01"), the last non-empty value
 * (up to the next \x02). */
enum { P_TAGS, P_KEYS, P_UNIQ, P_DELAY, P_INNER_NUM, P_INNER_BASE, P_CRC32, P_COUNT };
typedef struct {
    Py_ssize_t pos[P_COUNT];   /* value's position in the buffer, -1 when absent (or only empty) */
    Py_ssize_t len[P_COUNT];
} rs_props;

void rs_props_find(const unsigned char *p, Py_ssize_t n, rs_props *out);

#endif
