/* Message properties (formats/properties.py; RocketMQ's MessageDecoder.string2messageProperties): items
 * "name \x01 value" each ended by \x02. The one parser of the C engine: rs_prop_next splits the items, and
 * every reader of properties (the put path's props_info, the bulk decoder, verify's walk, the read path's key
 * check, the Arrow columns, parse_properties and property_values) goes through it. No GIL needed. */
#ifndef ROCKETSTORE_FORMATS_PROPERTIES_H
#define ROCKETSTORE_FORMATS_PROPERTIES_H
#include "native.h"
#include <string.h>

#define PROP_NAME_END 1   /* between a name and its value */
#define PROP_ITEM_END 2   /* after each item */

/* properties.crc32_property: "__CRC32#" \x01, ten digits (least significant first), \x02 */
#define CRC32_PROPERTY "__CRC32#"
#define CRC32_PROPERTY_LEN 20

/* One item of a properties string. */
typedef struct {
    const unsigned char *item;   /* the item's first byte */
    Py_ssize_t len;              /* up to its \x02 (or the end) */
    const unsigned char *value;  /* after the item's first \x01; NULL when it has none */
    Py_ssize_t name_len, value_len;
    int ended;                   /* a \x02 ends it (else the string's end does) */
} rs_prop;

/* The item starting at *at of p[0:n] (*at <= n), *at moved past its \x02: 1, or 0 when *at is past the last
 * item. The part after the last \x02 is an item too (empty when the string ends with \x02), so a string of
 * k separators has k + 1 items; readers that drop empty names or values (parse_properties) lose nothing by
 * it. */
static inline int rs_prop_next(const unsigned char *p, Py_ssize_t n, Py_ssize_t *at, rs_prop *it) {
    if (*at > n)
        return 0;
    const unsigned char *item = p + *at;
    const unsigned char *stop = *at < n ? memchr(item, PROP_ITEM_END, (size_t)(n - *at)) : NULL;
    Py_ssize_t len = stop ? stop - item : n - *at;
    const unsigned char *sep = len > 0 ? memchr(item, PROP_NAME_END, (size_t)len) : NULL;
    it->item = item;
    it->len = len;
    it->ended = stop != NULL;
    if (sep != NULL) {
        it->name_len = sep - item;
        it->value = sep + 1;
        it->value_len = len - it->name_len - 1;
    } else {
        it->name_len = len;
        it->value = NULL;
        it->value_len = 0;
    }
    *at += len + 1;
    return 1;
}

/* A pair parse_properties keeps: a \x01, a non-empty name and a non-empty value. */
static inline int rs_prop_kept(const rs_prop *it) {
    return it->value != NULL && it->name_len > 0 && it->value_len > 0;
}

/* Is the item's name `name` (of nl bytes, no \x01 in it)? */
static inline int rs_prop_named(const rs_prop *it, const char *name, Py_ssize_t nl) {
    return it->value != NULL && it->name_len == nl && memcmp(it->item, name, (size_t)nl) == 0;
}

/* What rs_props_find reads from a properties string (bulk_dispatch.props_info's rule): for TAGS, KEYS,
 * UNIQ_KEY, DELAY, INNER_NUM, INNER_BASE and __CRC32#, the last non-empty value. */
enum { P_TAGS, P_KEYS, P_UNIQ, P_DELAY, P_INNER_NUM, P_INNER_BASE, P_CRC32, P_COUNT };
typedef struct {
    Py_ssize_t pos[P_COUNT];   /* value's position in the string, -1 when absent (or only empty) */
    Py_ssize_t len[P_COUNT];
} rs_props;

void rs_props_find(const unsigned char *p, Py_ssize_t n, rs_props *out);   /* formats/properties.c */

#endif
