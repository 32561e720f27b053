/* The properties finder (formats/properties.h): the names the put path, the bulk decoder and verify read. */
#include "formats/properties.h"

static const char *const PROP_NAMES[P_COUNT] = {"TAGS", "KEYS", "UNIQ_KEY", "DELAY", "INNER_NUM", "INNER_BASE",
                                                CRC32_PROPERTY};
static const int PROP_LENS[P_COUNT] = {4, 4, 8, 5, 9, 10, 8};

void rs_props_find(const unsigned char *p, Py_ssize_t n, rs_props *out) {
    for (int k = 0; k < P_COUNT; k++) {
        out->pos[k] = -1;
        out->len[k] = 0;
    }
    Py_ssize_t at = 0;
    rs_prop it;
    while (rs_prop_next(p, n, &at, &it)) {
        if (it.value == NULL || it.value_len == 0)   /* an empty value does not count */
            continue;
        for (int k = 0; k < P_COUNT; k++)
            if (rs_prop_named(&it, PROP_NAMES[k], PROP_LENS[k])) {
                out->pos[k] = it.value - p;
                out->len[k] = it.value_len;
                break;
            }
    }
}
