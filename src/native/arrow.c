/* The Spark source's records -> Arrow columns (spark.record_batch.from_records_py is the reference).
 *
 * arrow_columns(buf, positions, sizes[, want]) walks the records of one mapped CommitLog segment at the given
 * positions (int64 arrays) with formats.record_scan.scan's bound checks, stops before the first record scan
 * refuses (an inner batch, a damaged record: the caller decodes that one alone), and fills the Arrow buffers
 * of every column of record_batch.SCHEMA for the records before it, in two passes without the GIL: the first
 * checks the records and measures the columns, the second writes them into buffers allocated in between.
 * With `want` (a bit per column of SCHEMA, in its order) only those columns are filled, the others' buffers
 * left empty: a query of a few columns copies no body. The first pass is the same whatever is asked for, so
 * which records are taken, and when the caller is sent to the reference, never depends on the columns.
 *
 * The properties are the map the reference makes: when every record's properties are exact
 * "name\x01value\x02" pairs and no host is IPv6, each pair as it is (split at its first \x01; TAGS and KEYS
 * the last pair of that name); else, as parse_properties (empty names or values dropped, a repeated name
 * keeps its first place and its last value). It answers None, and the caller runs the reference, for a
 * topic or properties that are not UTF-8 (the reference decodes those with "replace") and for a run with
 * an IPv6 host whose records decode_record would refuse. */
#include "native.h"
#include "formats/properties.h"
#include "formats/record.h"
#include <string.h>

#define HOST_MAX 52      /* 8 groups of 4 hex digits, 7 colons, ':' and a signed 32-bit port */

typedef struct {
    Py_ssize_t pos, size;
    Py_ssize_t born, store;          /* host bytes (ip + port): 8 or 20 */
    Py_ssize_t body_pos, body_len, topic_pos, topic_len, props_pos, props_len;
    int v2;
} rec_t;

/* RFC 3629 UTF-8 (no overlongs, no surrogates, nothing past U+10FFFF): what Arrow and Python accept. */
static int valid_utf8(const unsigned char *p, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        Py_ssize_t len;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF)
            len = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0)
                lo = 0xA0;
            else if (c == 0xED)
                hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0)
                lo = 0x90;
            else if (c == 0xF4)
                hi = 0x8F;
        } else
            return 0;
        if (i + len > n)
            return 0;
        if (p[i + 1] < lo || p[i + 1] > hi)
            return 0;
        for (Py_ssize_t k = 2; k < len; k++)
            if (p[i + k] < 0x80 || p[i + k] > 0xBF)
                return 0;
        i += len;
    }
    return 1;
}

/* scan's checks on one record (the record at pos of `size` bytes, its unit's size; the magic code is not
 * looked at); 0: scan would stop before it. */
static int check_record(const unsigned char *d, Py_ssize_t buflen, Py_ssize_t pos, Py_ssize_t size, rec_t *r) {
    if (pos < 0 || size < 0 || size > buflen || pos > buflen - size || size < REC_SYSFLAG + 4)
        return 0;
    rs_record rec;
    if (rs_record_layout(d + pos, size, &rec) != REC_OK || (rec.sysflag & INNER_BATCH_FLAG))
        return 0;
    r->pos = pos;
    r->size = size;
    r->born = rec.born_len;
    r->store = rec.store_len;
    r->v2 = rec.magic == MAGIC_V2;
    r->body_pos = pos + rec.body_pos;
    r->body_len = rec.body_len;
    r->topic_pos = pos + rec.topic_pos;
    r->topic_len = rec.topic_len;
    r->props_pos = pos + rec.props_pos;
    r->props_len = rec.props_len;
    return 1;
}

/* Are the properties exact "name\x01value\x02" pairs (the reference's Arrow split): each item with a \x01,
 * and a \x02 at the end (nothing after the last)? */
static int exact_pairs(const unsigned char *p, Py_ssize_t n) {
    Py_ssize_t at = 0;
    rs_prop it;
    while (rs_prop_next(p, n, &at, &it))
        if (it.ended ? it.value == NULL : it.len > 0)
            return 0;
    return 1;
}

typedef struct {
    Py_ssize_t name, name_len, value, value_len;     /* offsets into the properties */
} pair_t;

/* The map entries of one record's properties into `out` (room for n / 2 + 1); returns how many. exact: every
 * pair as it is; else parse_properties: split at \x02, each part at its first \x01, kept with a separator and
 * a non-empty name and value, a repeated name in its first place with its last value. */
static Py_ssize_t property_pairs(const unsigned char *p, Py_ssize_t n, int exact, pair_t *out) {
    Py_ssize_t count = 0, at = 0;
    rs_prop it;
    while (rs_prop_next(p, n, &at, &it)) {
        if (!it.ended && exact)
            break;                  /* exact pairs end with \x02: nothing after the last */
        if (it.value != NULL) {
            pair_t e = {it.item - p, it.name_len, it.value - p, it.value_len};
            if (exact)
                out[count++] = e;
            else if (rs_prop_kept(&it)) {
                Py_ssize_t k = 0;
                while (k < count && !(out[k].name_len == e.name_len
                                      && memcmp(p + out[k].name, p + e.name, (size_t)e.name_len) == 0))
                    k++;
                if (k < count) {
                    out[k].value = e.value;
                    out[k].value_len = e.value_len;
                } else
                    out[count++] = e;
            }
        }
    }
    return count;
}

/* "a.b.c.d:port" or the 8 groups of an IPv6 address in lower-case hex without leading zeros, ':' and the
 * port (formats.record.host_from_bytes); returns the length written (at most HOST_MAX). */
static Py_ssize_t format_host(const unsigned char *h, Py_ssize_t len, char *out) {
    int n = 0;
    if (len == REC_HOST_V4)
        n = sprintf(out, "%u.%u.%u.%u", h[0], h[1], h[2], h[3]);
    else
        for (int g = 0; g < 8; g++)
            n += sprintf(out + n, g ? ":%x" : "%x", (unsigned)rs_be16(h + 2 * g));
    n += sprintf(out + n, ":%d", (int)rs_be32(h + len - 4));
    return n;
}

/* format_host through a one-entry memo: a run's records mostly share their hosts. */
typedef struct {
    unsigned char raw[REC_HOST_V6];
    Py_ssize_t raw_len, text_len;
    char text[HOST_MAX];
} host_memo;

static Py_ssize_t format_host_memo(host_memo *m, const unsigned char *h, Py_ssize_t len, char *out) {
    if (m->raw_len != len || memcmp(m->raw, h, (size_t)len) != 0) {
        m->text_len = format_host(h, len, m->text);
        memcpy(m->raw, h, (size_t)len);
        m->raw_len = len;
    }
    memcpy(out, m->text, (size_t)m->text_len);
    return m->text_len;
}

static const char HEX[] = "0123456789ABCDEF";

enum {
    B_TOPIC_OFF, B_TOPIC, B_QID, B_QOFF, B_PHYS, B_MSGID_OFF, B_MSGID, B_TAGS_VALID, B_TAGS_OFF, B_TAGS,
    B_KEYS_VALID, B_KEYS_OFF, B_KEYS, B_BODY_OFF, B_BODY, B_MAP_OFF, B_NAME_OFF, B_NAME, B_VALUE_OFF, B_VALUE,
    B_BORN_TS, B_STORE_TS, B_BORN_OFF, B_BORN, B_STORE_OFF, B_STORE, B_SYSFLAG, B_RECONSUME, B_FLAG, B_CRC,
    B_COUNT
};

/* the columns of record_batch.SCHEMA, in its order: bit i of `want` asks for column i */
enum {
    C_TOPIC, C_QID, C_QOFF, C_PHYS, C_MSGID, C_TAGS, C_KEYS, C_BODY, C_PROPS, C_BORN_TS, C_STORE_TS, C_BORN,
    C_STORE, C_SYSFLAG, C_RECONSUME, C_FLAG, C_CRC, C_COUNT
};
#define ALL_COLUMNS ((1ULL << C_COUNT) - 1)
#define WANT(c) ((want >> (c)) & 1)

/* the column each buffer belongs to: a buffer of a column not asked for is left empty */
static const int column_of[B_COUNT] = {
    [B_TOPIC_OFF] = C_TOPIC, [B_TOPIC] = C_TOPIC, [B_QID] = C_QID, [B_QOFF] = C_QOFF, [B_PHYS] = C_PHYS,
    [B_MSGID_OFF] = C_MSGID, [B_MSGID] = C_MSGID, [B_TAGS_VALID] = C_TAGS, [B_TAGS_OFF] = C_TAGS, [B_TAGS] = C_TAGS,
    [B_KEYS_VALID] = C_KEYS, [B_KEYS_OFF] = C_KEYS, [B_KEYS] = C_KEYS, [B_BODY_OFF] = C_BODY, [B_BODY] = C_BODY,
    [B_MAP_OFF] = C_PROPS, [B_NAME_OFF] = C_PROPS, [B_NAME] = C_PROPS, [B_VALUE_OFF] = C_PROPS,
    [B_VALUE] = C_PROPS, [B_BORN_TS] = C_BORN_TS, [B_STORE_TS] = C_STORE_TS, [B_BORN_OFF] = C_BORN,
    [B_BORN] = C_BORN, [B_STORE_OFF] = C_STORE, [B_STORE] = C_STORE, [B_SYSFLAG] = C_SYSFLAG,
    [B_RECONSUME] = C_RECONSUME, [B_FLAG] = C_FLAG, [B_CRC] = C_CRC,
};

#define PUT(b, i, type, v) (((type *)PyBytes_AS_STRING(bufs[b]))[i] = (type)(v))

static PyObject *arrow_columns(PyObject *self, PyObject *args) {
    Py_buffer view, pv, sv;
    unsigned long long want = ALL_COLUMNS;
    if (!PyArg_ParseTuple(args, "y*y*y*|K:arrow_columns", &view, &pv, &sv, &want))
        return NULL;
    PyObject *result = NULL, *bufs[B_COUNT] = {NULL};
    rec_t *recs = NULL;
    pair_t *pairs = NULL;
    if (pv.len != sv.len || pv.len % 8) {
        PyErr_SetString(PyExc_ValueError, "arrow_columns: positions and sizes must be int64 arrays of one length");
        goto done;
    }
    const unsigned char *d = view.buf;
    const int64_t *positions = pv.buf, *sizes = sv.buf;
    Py_ssize_t total = pv.len / 8, n = 0;
    recs = PyMem_Malloc((size_t)(total ? total : 1) * sizeof(rec_t));
    if (recs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* pass 1: the records scan takes, whether their text is UTF-8, which properties map they make, sizes.
     * The properties are looked at only when a column made of them is asked for: the reference's other
     * columns are the same whatever the properties hold (it decodes them apart, with "replace"). */
    int utf8 = 1, exact = 1, whole = 1;
    int want_pairs = WANT(C_PROPS) || WANT(C_TAGS) || WANT(C_KEYS);
    Py_ssize_t topic_bytes = 0, body_bytes = 0, props_bytes = 0, max_props = 0, v6_records = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; n < total; n++) {
        rec_t *r = &recs[n];
        if (!check_record(d, view.len, (Py_ssize_t)positions[n], (Py_ssize_t)sizes[n], r))
            break;
        const unsigned char *props = d + r->props_pos;
        if (!valid_utf8(d + r->topic_pos, r->topic_len) || (want_pairs && !valid_utf8(props, r->props_len))) {
            utf8 = 0;
            break;
        }
        exact = exact && want_pairs && exact_pairs(props, r->props_len);
        int32_t magic = rs_be32(d + r->pos + REC_MAGIC);
        int64_t born_ts = rs_be64(d + r->pos + REC_BORN_TS), store_ts = rs_be64(d + r->pos + REC_STORE_TS(r->born));
        whole = whole && rs_be32(d + r->pos + REC_TOTALSIZE) == r->size && (magic == MAGIC_V1 || magic == MAGIC_V2)
                && born_ts <= INT64_MAX / 1000 && born_ts >= INT64_MIN / 1000
                && store_ts <= INT64_MAX / 1000 && store_ts >= INT64_MIN / 1000;
        v6_records += r->born == REC_HOST_V6 || r->store == REC_HOST_V6;
        topic_bytes += r->topic_len;
        body_bytes += r->body_len;
        props_bytes += r->props_len;
        if (r->props_len > max_props)
            max_props = r->props_len;
    }
    Py_END_ALLOW_THREADS
    /* the reference decodes a run with an IPv6 host record by record (decode_record), which also wants
     * each record's TOTALSIZE to be its unit's size and its magic code a message's, and builds the
     * timestamps from Python ints, which must fit in int64 microseconds: else it raises */
    if (!utf8 || (v6_records && !whole)) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (v6_records)
        exact = 0;                  /* the reference decodes a run with an IPv6 host record by record */
    if (body_bytes >= 0x7FFFFFFF || props_bytes >= 0x7FFFFFFF || topic_bytes >= 0x7FFFFFFF
            || n * HOST_MAX >= 0x7FFFFFFF) {
        PyErr_SetString(PyExc_ValueError, "a record batch over 2 GiB of bodies: lower maxRecordsPerBatch");
        goto done;
    }
    pairs = PyMem_Malloc((size_t)(max_props / 2 + 1) * sizeof(pair_t));
    if (pairs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t max_pairs = props_bytes / 2 + 1, bits = (n + 7) / 8 + 1;
    const Py_ssize_t sizes_of[B_COUNT] = {
        [B_TOPIC_OFF] = 4 * (n + 1), [B_TOPIC] = topic_bytes, [B_QID] = 4 * n, [B_QOFF] = 8 * n, [B_PHYS] = 8 * n,
        [B_MSGID_OFF] = 4 * (n + 1), [B_MSGID] = n * 32 + v6_records * 24,
        [B_TAGS_VALID] = bits, [B_TAGS_OFF] = 4 * (n + 1), [B_TAGS] = props_bytes,
        [B_KEYS_VALID] = bits, [B_KEYS_OFF] = 4 * (n + 1), [B_KEYS] = props_bytes,
        [B_BODY_OFF] = 4 * (n + 1), [B_BODY] = body_bytes, [B_MAP_OFF] = 4 * (n + 1),
        [B_NAME_OFF] = 4 * (max_pairs + 1), [B_NAME] = props_bytes, [B_VALUE_OFF] = 4 * (max_pairs + 1),
        [B_VALUE] = props_bytes, [B_BORN_TS] = 8 * n, [B_STORE_TS] = 8 * n,
        [B_BORN_OFF] = 4 * (n + 1), [B_BORN] = n * HOST_MAX, [B_STORE_OFF] = 4 * (n + 1), [B_STORE] = n * HOST_MAX,
        [B_SYSFLAG] = 4 * n, [B_RECONSUME] = 4 * n, [B_FLAG] = 4 * n, [B_CRC] = 4 * n,
    };
    for (int b = 0; b < B_COUNT; b++)
        if ((bufs[b] = PyBytes_FromStringAndSize(NULL, WANT(column_of[b]) ? sizes_of[b] : 0)) == NULL)
            goto done;
    if (WANT(C_TAGS))
        memset(PyBytes_AS_STRING(bufs[B_TAGS_VALID]), 0, (size_t)bits);
    if (WANT(C_KEYS))
        memset(PyBytes_AS_STRING(bufs[B_KEYS_VALID]), 0, (size_t)bits);
    /* pass 2: the columns asked for (the buffers are this function's alone until it returns) */
    Py_ssize_t at[B_COUNT] = {0}, m = 0;
    host_memo born_memo = {.raw_len = 0}, store_memo = {.raw_len = 0};
    Py_BEGIN_ALLOW_THREADS
    for (int b = 0; b < B_COUNT; b++)   /* every offsets buffer starts at 0 */
        if (WANT(column_of[b]) && (b == B_TOPIC_OFF || b == B_MSGID_OFF || b == B_TAGS_OFF || b == B_KEYS_OFF
                                   || b == B_BODY_OFF || b == B_MAP_OFF || b == B_NAME_OFF || b == B_VALUE_OFF
                                   || b == B_BORN_OFF || b == B_STORE_OFF))
            PUT(b, 0, int32_t, 0);
    for (Py_ssize_t i = 0; i < n; i++) {
        const rec_t *r = &recs[i];
        const unsigned char *p = d + r->pos, *props = d + r->props_pos;
        const unsigned char *store_host = p + REC_STOREHOST(r->born);
        int64_t phys = rs_be64(p + REC_PHYSICALOFFSET);
        char *out;
#define APPEND(b, src, len) (memcpy(PyBytes_AS_STRING(bufs[b]) + at[b], (src), (size_t)(len)), at[b] += (len))
        if (WANT(C_TOPIC)) {
            APPEND(B_TOPIC, d + r->topic_pos, r->topic_len);
            PUT(B_TOPIC_OFF, i + 1, int32_t, at[B_TOPIC]);
        }
        if (WANT(C_BODY)) {
            APPEND(B_BODY, d + r->body_pos, r->body_len);
            PUT(B_BODY_OFF, i + 1, int32_t, at[B_BODY]);
        }
        if (WANT(C_QID))
            PUT(B_QID, i, int32_t, rs_be32(p + REC_QUEUEID));
        if (WANT(C_FLAG))
            PUT(B_FLAG, i, int32_t, rs_be32(p + REC_FLAG));
        if (WANT(C_QOFF))
            PUT(B_QOFF, i, int64_t, rs_be64(p + REC_QUEUEOFFSET));
        if (WANT(C_PHYS))
            PUT(B_PHYS, i, int64_t, phys);
        if (WANT(C_CRC))
            PUT(B_CRC, i, int32_t, rs_be32(p + REC_BODYCRC));
        if (WANT(C_SYSFLAG))
            PUT(B_SYSFLAG, i, int32_t, rs_be32(p + REC_SYSFLAG));
        if (WANT(C_BORN_TS))
            PUT(B_BORN_TS, i, int64_t, (int64_t)((uint64_t)rs_be64(p + REC_BORN_TS) * 1000u));
        if (WANT(C_STORE_TS))
            PUT(B_STORE_TS, i, int64_t, (int64_t)((uint64_t)rs_be64(p + REC_STORE_TS(r->born)) * 1000u));
        if (WANT(C_RECONSUME))
            PUT(B_RECONSUME, i, int32_t, rs_be32(p + REC_RECONSUME(r->born, r->store)));
        if (WANT(C_MSGID)) {
            /* msgId: the store host's bytes and the physical offset, upper-case hex */
            out = PyBytes_AS_STRING(bufs[B_MSGID]) + at[B_MSGID];
            for (Py_ssize_t k = 0; k < r->store; k++) {
                *out++ = HEX[store_host[k] >> 4];
                *out++ = HEX[store_host[k] & 15];
            }
            for (int k = 56; k >= 0; k -= 8) {
                unsigned byte = (unsigned)((uint64_t)phys >> k) & 0xFF;
                *out++ = HEX[byte >> 4];
                *out++ = HEX[byte & 15];
            }
            at[B_MSGID] += 2 * (r->store + 8);
            PUT(B_MSGID_OFF, i + 1, int32_t, at[B_MSGID]);
        }
        if (WANT(C_BORN)) {
            at[B_BORN] += format_host_memo(&born_memo, p + REC_BORNHOST, r->born,
                                           PyBytes_AS_STRING(bufs[B_BORN]) + at[B_BORN]);
            PUT(B_BORN_OFF, i + 1, int32_t, at[B_BORN]);
        }
        if (WANT(C_STORE)) {
            at[B_STORE] += format_host_memo(&store_memo, store_host, r->store,
                                            PyBytes_AS_STRING(bufs[B_STORE]) + at[B_STORE]);
            PUT(B_STORE_OFF, i + 1, int32_t, at[B_STORE]);
        }
        if (!want_pairs)
            continue;
        /* properties: the map entries, and TAGS / KEYS (the last pair of that name) */
        Py_ssize_t k = property_pairs(props, r->props_len, exact, pairs), tags = -1, keys = -1;
        for (Py_ssize_t j = 0; j < k; j++) {
            const pair_t *e = &pairs[j];
            if (WANT(C_PROPS)) {
                APPEND(B_NAME, props + e->name, e->name_len);
                APPEND(B_VALUE, props + e->value, e->value_len);
                PUT(B_NAME_OFF, m + 1, int32_t, at[B_NAME]);
                PUT(B_VALUE_OFF, m + 1, int32_t, at[B_VALUE]);
                m++;
            }
            if (e->name_len == 4 && memcmp(props + e->name, "TAGS", 4) == 0)
                tags = j;
            else if (e->name_len == 4 && memcmp(props + e->name, "KEYS", 4) == 0)
                keys = j;
        }
        if (WANT(C_PROPS))
            PUT(B_MAP_OFF, i + 1, int32_t, m);
        if (WANT(C_TAGS)) {
            if (tags >= 0) {
                APPEND(B_TAGS, props + pairs[tags].value, pairs[tags].value_len);
                PyBytes_AS_STRING(bufs[B_TAGS_VALID])[i / 8] |= (char)(1 << (i % 8));
            }
            PUT(B_TAGS_OFF, i + 1, int32_t, at[B_TAGS]);
        }
        if (WANT(C_KEYS)) {
            if (keys >= 0) {
                APPEND(B_KEYS, props + pairs[keys].value, pairs[keys].value_len);
                PyBytes_AS_STRING(bufs[B_KEYS_VALID])[i / 8] |= (char)(1 << (i % 8));
            }
            PUT(B_KEYS_OFF, i + 1, int32_t, at[B_KEYS]);
        }
#undef APPEND
    }
    Py_END_ALLOW_THREADS
    PyObject *tuple = PyTuple_New(B_COUNT);
    if (tuple == NULL)
        goto done;
    for (int b = 0; b < B_COUNT; b++) {
        PyTuple_SET_ITEM(tuple, b, bufs[b]);
        bufs[b] = NULL;
    }
    result = Py_BuildValue("(nnN)", n, m, tuple);
done:
    for (int b = 0; b < B_COUNT; b++)
        Py_XDECREF(bufs[b]);
    PyMem_Free(recs);
    PyMem_Free(pairs);
    PyBuffer_Release(&view);
    PyBuffer_Release(&pv);
    PyBuffer_Release(&sv);
    return result;
}

PyMethodDef rs_arrow_methods[] = {
    {"arrow_columns", arrow_columns, METH_VARARGS,
     "arrow_columns(buf, positions, sizes[, want]) -> (count, pairs, buffers) | None: the Arrow buffers of the "
     "Spark source's columns (those whose bit is set in want: all by default) for the records scan takes (spark.record_batch.from_records_py is the reference)."},
    {NULL, NULL, 0, NULL},
};
