/* Puts to a batch-ConsumeQueue topic (RIP-26): the record of one message or inner batch, and the body of a
 * producer batch made into one inner batch (MessageDecoder.encodeMessages), and that body decoded again.
 *
 * The pure Python is the reference (put/batch_topic.py put_py / put_batch_py, formats/inner_batch.*_py);
 * tests/native/test_batchcq_native.py holds both to the same bytes. These functions handle the common
 * messages; anything else (raw_properties, a None property value, a separator in a text, an INNER_NUM that is
 * not a short, a record that does not fit the segment's room) answers None before any side effect, and
 * the caller runs the reference, which decides (and logs) as RocketMQ does. */
#include "native.h"
#include "put_common.h"
#include "formats/inner_batch.h"
#include "formats/properties.h"
#include "formats/record.h"
#include <stdlib.h>
#include <string.h>

static PyObject *n_raw_properties, *n_properties, *n_keys, *n_tags, *n_body, *n_flag, *n_sys_flag, *n_reconsume,
    *n_born_ts, *n_topic, *s_KEYS, *s_TAGS, *s_CRC32, *s_INNER_NUM, *s_INNER_BASE, *s_UNIQ_KEY, *s_space,
    *s_empty;

static int names_ready(void) {
    if (s_empty != NULL)
        return 0;
#define NAME(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return -1
    NAME(n_raw_properties, "raw_properties");
    NAME(n_properties, "properties");
    NAME(n_keys, "keys");
    NAME(n_tags, "tags");
    NAME(n_body, "body");
    NAME(n_flag, "flag");
    NAME(n_sys_flag, "sys_flag");
    NAME(n_reconsume, "reconsume_times");
    NAME(n_born_ts, "born_timestamp");
    NAME(n_topic, "topic");
    NAME(s_KEYS, "KEYS");
    NAME(s_TAGS, "TAGS");
    NAME(s_CRC32, "__CRC32#");
    NAME(s_INNER_NUM, "INNER_NUM");
    NAME(s_INNER_BASE, "INNER_BASE");
    NAME(s_UNIQ_KEY, "UNIQ_KEY");
    NAME(s_space, " ");
    NAME(s_empty, "");
#undef NAME
    return 0;
}

/* ---------------------------------------------------------------- text, Java's way */
/* Short.parseShort (inner_batch.parse_java_integer(text, 16)): an optional sign, then BMP decimal digits
 * of any script. 1 and *out set; 0 when it is not a short (Python's path logs and refuses it). */
static int parse_short(PyObject *s, long *out) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(s), i = 0;
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    int neg = 0;
    if (n > 0) {
        Py_UCS4 c = PyUnicode_READ(kind, data, 0);
        if (c == '+' || c == '-') {
            neg = c == '-';
            i = 1;
        }
    }
    if (i >= n)
        return 0;
    long v = 0;
    for (; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        int d = c > 0xFFFF ? -1 : Py_UNICODE_TODECIMAL(c);
        if (d < 0)
            return 0;
        v = v * 10 + d;
        if (v > 0x8000)
            return 0;
    }
    if (neg)
        v = -v;
    if (v < -0x8000 || v > 0x7FFF)
        return 0;
    *out = v;
    return 1;
}

/* ---------------------------------------------------------------- a message's property map */
typedef struct {
    PyObject *name, *value; /* owned str */
    Py_ssize_t nlen, vlen;  /* their UTF-8 ("replace") lengths */
} kv_t;

typedef struct {
    kv_t small[16];
    kv_t *items;
    Py_ssize_t n, cap;
} pmap_t;

static void pmap_init(pmap_t *m) {
    m->items = m->small;
    m->n = 0;
    m->cap = 16;
}

static void pmap_free(pmap_t *m) {
    for (Py_ssize_t i = 0; i < m->n; i++) {
        Py_DECREF(m->items[i].name);
        Py_DECREF(m->items[i].value);
    }
    if (m->items != m->small)
        PyMem_Free(m->items);
    m->n = 0;
}

static Py_ssize_t pmap_find(pmap_t *m, PyObject *name) {
    for (Py_ssize_t i = 0; i < m->n; i++)
        if (m->items[i].name == name || PyUnicode_Compare(m->items[i].name, name) == 0)
            return i;
    return -1;
}

/* Append (references borrowed, taken here); -1 on no memory. */
static int pmap_add(pmap_t *m, PyObject *name, PyObject *value) {
    if (m->n == m->cap) {
        Py_ssize_t cap = m->cap * 2;
        kv_t *items = PyMem_Malloc(sizeof(kv_t) * cap);
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(items, m->items, sizeof(kv_t) * m->n);
        if (m->items != m->small)
            PyMem_Free(m->items);
        m->items = items;
        m->cap = cap;
    }
    m->items[m->n].name = Py_NewRef(name);
    m->items[m->n].value = Py_NewRef(value);
    m->n++;
    return 0;
}

static void pmap_remove(pmap_t *m, Py_ssize_t i) {
    Py_DECREF(m->items[i].name);
    Py_DECREF(m->items[i].value);
    memmove(m->items + i, m->items + i + 1, sizeof(kv_t) * (m->n - i - 1));
    m->n--;
}

/* Message.property_map() without __CRC32# (put/batch_topic.py's `props`): the dict's pairs, then KEYS (a str,
 * or a non-empty list joined by spaces) and TAGS unless the dict names them. 1 when built; 0 when Python
 * decides (raw_properties, a type other than the documented ones, a None value, a separator: whatever
 * text_problem refuses or property_map/format_properties treat specially); -1 on an error. */
static int pmap_build(PyObject *msg, pmap_t *m) {
    PyObject *raw = NULL, *props = NULL, *keys = NULL, *tags = NULL, *joined = NULL;
    int r = 0;
    raw = PyObject_GetAttr(msg, n_raw_properties);
    if (raw == NULL)
        goto error;
    if (raw != Py_None)
        goto done;
    if ((props = PyObject_GetAttr(msg, n_properties)) == NULL || (keys = PyObject_GetAttr(msg, n_keys)) == NULL
            || (tags = PyObject_GetAttr(msg, n_tags)) == NULL)
        goto error;
    if (tags != Py_None && (!PyUnicode_CheckExact(tags) || rs_has_separator(tags)))
        goto done;
    if (props != Py_None) {
        if (!PyDict_CheckExact(props) || PyDict_GET_SIZE(props) > PUT_MAX_PAIRS)
            goto done;
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(props, &pos, &k, &v)) {
            if (!PyUnicode_CheckExact(k) || !PyUnicode_CheckExact(v) || rs_has_separator(k) || rs_has_separator(v))
                goto done;
            if (pmap_add(m, k, v) < 0)
                goto error;
        }
    }
    PyObject *kstr = NULL;
    if (keys == Py_None) {
    } else if (PyUnicode_CheckExact(keys)) {
        if (rs_has_separator(keys))
            goto done;
        if (PyUnicode_GET_LENGTH(keys) > 0)
            kstr = keys;
    } else if (PyList_CheckExact(keys) || PyTuple_CheckExact(keys)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(keys);
        PyObject **items = PySequence_Fast_ITEMS(keys);
        for (Py_ssize_t i = 0; i < n; i++)
            if (!PyUnicode_CheckExact(items[i]) || rs_has_separator(items[i]))
                goto done;
        if (n > 0) {
            if ((joined = PyUnicode_Join(s_space, keys)) == NULL)
                goto error;
            kstr = joined;
        }
    } else {
        goto done;
    }
    if (kstr != NULL && pmap_find(m, s_KEYS) < 0 && pmap_add(m, s_KEYS, kstr) < 0)
        goto error;
    if (tags != Py_None && PyUnicode_GET_LENGTH(tags) > 0 && pmap_find(m, s_TAGS) < 0 && pmap_add(m, s_TAGS, tags) < 0)
        goto error;
    Py_ssize_t crc = pmap_find(m, s_CRC32);
    if (crc >= 0)
        pmap_remove(m, crc);
    r = 1;
    goto done;
error:
    r = -1;
done:
    Py_XDECREF(raw);
    Py_XDECREF(props);
    Py_XDECREF(keys);
    Py_XDECREF(tags);
    Py_XDECREF(joined);
    return r;
}

/* The UTF-8 lengths of every pair and the length of "name\x01value\x02"...; -1 when over the limits. */
static Py_ssize_t pmap_measure(pmap_t *m) {
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < m->n; i++) {
        kv_t *kv = &m->items[i];
        kv->nlen = rs_utf8_len(kv->name);
        kv->vlen = rs_utf8_len(kv->value);
        if (kv->nlen > PUT_MAX_TEXT || kv->vlen > PUT_MAX_TEXT || total > PUT_MAX_TEXT)
            return -1;
        total += kv->nlen + kv->vlen + 2;
    }
    return total;
}

static unsigned char *pmap_put(unsigned char *o, pmap_t *m, const Py_ssize_t *order) {
    for (Py_ssize_t j = 0; j < m->n; j++) {
        kv_t *kv = &m->items[order ? order[j] : j];
        o = rs_utf8_put(o, kv->name);
        *o++ = 1;
        o = rs_utf8_put(o, kv->value);
        *o++ = 2;
    }
    return o;
}

/* java_hashmap_order: by bucket of a default-capacity java.util.HashMap holding these names (doubled past
 * 3/4 full), insertion order within a bucket. */
typedef struct {
    uint32_t bucket;
    Py_ssize_t index;
} slot_t;

static int slot_cmp(const void *a, const void *b) {
    const slot_t *x = a, *y = b;
    if (x->bucket != y->bucket)
        return x->bucket < y->bucket ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static int hashmap_order(pmap_t *m, Py_ssize_t *order) {
    uint32_t capacity = 16;
    while ((Py_ssize_t)m->n > (Py_ssize_t)capacity * 3 / 4)
        capacity *= 2;
    slot_t *slots = PyMem_Malloc(sizeof(slot_t) * (m->n ? m->n : 1));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < m->n; i++) {
        uint32_t h = (uint32_t)rs_java_hash_str(m->items[i].name);
        slots[i].bucket = (h ^ (h >> 16)) & (capacity - 1);
        slots[i].index = i;
    }
    qsort(slots, m->n, sizeof(slot_t), slot_cmp);
    for (Py_ssize_t i = 0; i < m->n; i++)
        order[i] = slots[i].index;
    PyMem_Free(slots);
    return 0;
}

/* The str parse_properties would read back for the pair at i (its encoded bytes decoded with "replace"). */
static PyObject *read_back(pmap_t *m, Py_ssize_t i, const unsigned char *raw, Py_ssize_t at) {
    PyObject *v = m->items[i].value;
    if (PyUnicode_IS_ASCII(v))
        return Py_NewRef(v);
    return PyUnicode_DecodeUTF8((const char *)raw + at, m->items[i].vlen, "replace");
}

/* ---------------------------------------------------------------- one record */
/* bcq_record(msg, topic_tail, magic, queue_id, queue_offset, phys, room, max_body, max_record, born_host,
 *            store_host, append_crc, clock)
 * -> (record, props, tags_code, batch_size, info, store_ts, sys_flag, takes_offset) | None:
 * put/batch_topic.py put_py's record of `msg` at `phys`: INNER_NUM read as a short, INNER_BASE = queue_offset
 * added to an inner batch that takes a queue offset with its properties in HashMap order, the appended CRC
 * when append_crc. `props` are the properties without the CRC entry (what the dispatch reads), `info` their
 * props_info as the index reads it ((tagsCode, KEYS or "", UNIQ_KEY or None, False)). None, before the clock
 * is read, for whatever Python decides (see pmap_build; an INNER_NUM on a message without INNER_BATCH_FLAG or
 * that is not a short; a body not bytes or over max_body; properties over 32767 bytes; a record over
 * max_record or that leaves less than 8 bytes of `room`). born_ts (unless the message has one), then
 * store_ts, come from clock() (None: the wall clock). */
static PyObject *bcq_record(PyObject *self, PyObject *args) {
    PyObject *msg, *ttail, *born, *store, *clock;
    int magic, queue_id, append_crc;
    long long qoff, phys;
    Py_ssize_t room, max_body, max_record;
    if (!PyArg_ParseTuple(args, "OO!iiLLnnnO!O!pO:bcq_record", &msg, &PyBytes_Type, &ttail, &magic, &queue_id,
                          &qoff, &phys, &room, &max_body, &max_record, &PyBytes_Type, &born, &PyBytes_Type, &store,
                          &append_crc, &clock))
        return NULL;
    Py_ssize_t bhl = PyBytes_GET_SIZE(born), shl = PyBytes_GET_SIZE(store);
    if ((bhl != REC_HOST_V4 && bhl != REC_HOST_V6) || (shl != REC_HOST_V4 && shl != REC_HOST_V6)) {
        PyErr_SetString(PyExc_ValueError, "bcq_record: a host is 8 (IPv4) or 20 (IPv6) bytes");
        return NULL;
    }
    if (names_ready() < 0)
        return NULL;
    pmap_t m;
    pmap_init(&m);
    PyObject *body = NULL, *born_obj = NULL, *base = NULL, *rec = NULL, *props = NULL, *out = NULL;
    PyObject *keys = NULL, *uniq = NULL;
    Py_ssize_t *order = NULL;
    long long flag, reconsume, sys_flag, born_ts, store_ts;
    int r;
    if ((r = rs_int_attr(msg, n_flag, INT32_MIN, INT32_MAX, &flag)) <= 0
            || (r = rs_int_attr(msg, n_reconsume, INT32_MIN, INT32_MAX, &reconsume)) <= 0
            || (r = rs_int_attr(msg, n_sys_flag, INT32_MIN, INT32_MAX, &sys_flag)) <= 0)
        goto answer;
    if ((born_obj = PyObject_GetAttr(msg, n_born_ts)) == NULL)
        goto fail;
    if (born_obj != Py_None && (r = rs_int_attr(msg, n_born_ts, INT64_MIN, INT64_MAX, &born_ts)) <= 0)
        goto answer;
    if ((body = PyObject_GetAttr(msg, n_body)) == NULL)
        goto fail;
    if (!PyBytes_CheckExact(body) || PyBytes_GET_SIZE(body) > max_body)
        goto none;
    if (sys_flag & HOST_V6_FLAGS)    /* host flags set by the caller: the reference's size and bytes decide */
        goto none;
    if ((r = pmap_build(msg, &m)) <= 0)
        goto answer;
    int inner = (sys_flag & INNER_BATCH_FLAG) != 0;
    int takes = rec_gets_queue_unit((int32_t)sys_flag); /* not prepared, not rolled back */
    long batch = 1;
    Py_ssize_t at = pmap_find(&m, s_INNER_NUM);
    if (at >= 0 && (!inner || !parse_short(m.items[at].value, &batch)))
        goto none;
    if (!takes)
        qoff = 0;
    if (inner && takes) { /* assignQueueOffset: INNER_BASE, then the map as a HashMap holds it */
        if ((base = PyUnicode_FromFormat("%lld", qoff)) == NULL)
            goto fail;
        Py_ssize_t b = pmap_find(&m, s_INNER_BASE);
        if (b >= 0) {
            Py_SETREF(m.items[b].value, Py_NewRef(base));
        } else if (pmap_add(&m, s_INNER_BASE, base) < 0) {
            goto fail;
        }
        if ((order = PyMem_Malloc(sizeof(Py_ssize_t) * (m.n ? m.n : 1))) == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        if (hashmap_order(&m, order) < 0)
            goto fail;
    }
    Py_ssize_t pl = pmap_measure(&m);
    if (pl < 0)
        goto none;
    Py_ssize_t stored = pl + (append_crc ? CRC32_PROPERTY_LEN : 0);
    if (stored > REC_MAX_PROPERTIES)
        goto none;
    Py_ssize_t bl = PyBytes_GET_SIZE(body), tl = PyBytes_GET_SIZE(ttail);
    Py_ssize_t size = REC_BODY(bhl, shl) + bl + tl + 2 + stored;
    if (size > max_record || size > INT32_MAX || room - END_FILE_MIN_BLANK_LENGTH < size)
        goto none;
    if (bhl == REC_HOST_V6)
        sys_flag |= BORNHOST_V6_FLAG;
    if (shl == REC_HOST_V6)
        sys_flag |= STOREHOST_V6_FLAG;
    if (born_obj == Py_None && rs_clock_ms(clock, &born_ts) < 0)
        goto fail;
    if (rs_clock_ms(clock, &store_ts) < 0)
        goto fail;
    if ((rec = PyBytes_FromStringAndSize(NULL, size)) == NULL)
        goto fail;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(rec);
    rs_record_fields f = {
        .size = size, .magic = magic, .queue_id = queue_id, .flag = flag, .qoff = qoff, .phys = phys,
        .sysflag = sys_flag, .born_ts = born_ts, .store_ts = store_ts, .reconsume = reconsume,
        .pto = 0,   /* preparedTransactionOffset: this path writes 0 */
        .born_host = (const unsigned char *)PyBytes_AS_STRING(born),
        .store_host = (const unsigned char *)PyBytes_AS_STRING(store),
        .body = (const unsigned char *)PyBytes_AS_STRING(body), .body_len = bl};
    unsigned char *q = rs_put_record(o, &f, (const unsigned char *)PyBytes_AS_STRING(ttail), tl, stored);
    unsigned char *praw = q;
    q = pmap_put(q, &m, order);
    if (append_crc)
        rs_put_crc_property(q, rs_crc32(o, size - CRC32_PROPERTY_LEN) & 0x7FFFFFFFu);
    if ((props = PyBytes_FromStringAndSize((const char *)praw, pl)) == NULL)
        goto fail;
    /* what the dispatch reads: tagsCode of the TAGS str (R.tags_code), KEYS and UNIQ_KEY as parse_properties
     * reads them back from `props` (empty values dropped) */
    int32_t code = 0;
    Py_ssize_t pos = 0;
    const unsigned char *pb = (const unsigned char *)PyBytes_AS_STRING(props);
    for (Py_ssize_t j = 0; j < m.n; j++) {
        Py_ssize_t i = order ? order[j] : j;
        kv_t *kv = &m.items[i];
        Py_ssize_t vat = pos + kv->nlen + 1;
        pos = vat + kv->vlen + 1;
        if (PyUnicode_GET_LENGTH(kv->value) == 0)
            continue;
        if (PyUnicode_Compare(kv->name, s_TAGS) == 0) {
            code = rs_java_hash_str(kv->value);
        } else if (PyUnicode_Compare(kv->name, s_KEYS) == 0) {
            Py_XSETREF(keys, read_back(&m, i, pb, vat));
            if (keys == NULL)
                goto fail;
        } else if (PyUnicode_Compare(kv->name, s_UNIQ_KEY) == 0) {
            Py_XSETREF(uniq, read_back(&m, i, pb, vat));
            if (uniq == NULL)
                goto fail;
        }
    }
    out = Py_BuildValue("(NNilNLLO)", rec, props, (int)code, batch,
                        Py_BuildValue("(iOOO)", (int)code, keys ? keys : s_empty, uniq ? uniq : Py_None, Py_False),
                        store_ts, sys_flag, takes ? Py_True : Py_False);
    rec = props = NULL;
    goto done;
answer:
    if (r < 0)
        goto fail;
none:
    out = Py_NewRef(Py_None);
    goto done;
fail:
    out = NULL;
done:
    pmap_free(&m);
    PyMem_Free(order);
    Py_XDECREF(body);
    Py_XDECREF(born_obj);
    Py_XDECREF(base);
    Py_XDECREF(rec);
    Py_XDECREF(props);
    Py_XDECREF(keys);
    Py_XDECREF(uniq);
    return out;
}

/* ---------------------------------------------------------------- a producer batch as one inner batch */
/* The properties of a message whose texts are immutable and those of the message before it (no properties
 * dict or raw_properties, the same tags and keys objects, a str or None): a producer batch mostly repeats
 * them, so the bytes are made once. 1 when `msg` may reuse `prev`'s (updated to this message's), else 0. */
typedef struct {
    PyObject *tags, *keys; /* owned; NULL: nothing to reuse */
} same_t;

static int same_texts(PyObject *msg, same_t *prev) {
    PyObject *raw = PyObject_GetAttr(msg, n_raw_properties);
    PyObject *props = raw ? PyObject_GetAttr(msg, n_properties) : NULL;
    PyObject *keys = props ? PyObject_GetAttr(msg, n_keys) : NULL;
    PyObject *tags = keys ? PyObject_GetAttr(msg, n_tags) : NULL;
    int immutable = tags != NULL && raw == Py_None && props == Py_None && (keys == Py_None || PyUnicode_CheckExact(keys))
                    && (tags == Py_None || PyUnicode_CheckExact(tags));
    int same = immutable && prev->tags == tags && prev->keys == keys;
    if (!same) {
        Py_CLEAR(prev->tags);
        Py_CLEAR(prev->keys);
        if (immutable) {
            prev->tags = Py_NewRef(tags);
            prev->keys = Py_NewRef(keys);
        }
    }
    PyErr_Clear(); /* an attribute that fails is pmap_build's to report */
    Py_XDECREF(raw);
    Py_XDECREF(props);
    Py_XDECREF(keys);
    Py_XDECREF(tags);
    return same;
}

/* inner_body(msgs, topic) -> bytes | None: inner_batch.encode_messages of (body, properties_bytes(drop_crc=
 * True), flag) of each message (TOTALSIZE, MAGICCODE 0, BODYCRC 0, FLAG, BODYLEN + body, PROPLEN +
 * properties). None for whatever Python decides: a message of another topic, a body not bytes, a flag not an
 * int32, properties pmap_build leaves to Python or over 32767 bytes. */
static PyObject *inner_body(PyObject *self, PyObject *args) {
    PyObject *msgs, *topic;
    if (!PyArg_ParseTuple(args, "O!U:inner_body", &PyList_Type, &msgs, &topic))
        return NULL;
    if (names_ready() < 0)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(msgs), done_n = 0;
    /* per message: its body and properties (owned; consecutive messages may share the properties) */
    PyObject **parts = PyMem_Calloc(2 * (n ? n : 1), sizeof(PyObject *));
    int32_t *flags = PyMem_Malloc(sizeof(int32_t) * (n ? n : 1));
    same_t prev = {NULL, NULL};
    PyObject *out = NULL;
    if (parts == NULL || flags == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *m = PyList_GET_ITEM(msgs, i);
        PyObject *t = PyObject_GetAttr(m, n_topic);
        if (t == NULL)
            goto done;
        int same = PyUnicode_CheckExact(t) && PyUnicode_Compare(t, topic) == 0;
        Py_DECREF(t);
        if (!same)
            goto none;
        long long flag;
        int r = rs_int_attr(m, n_flag, INT32_MIN, INT32_MAX, &flag);
        if (r < 0)
            goto done;
        if (r == 0)
            goto none;
        flags[i] = (int32_t)flag;
        PyObject *body = PyObject_GetAttr(m, n_body);
        if (body == NULL)
            goto done;
        parts[2 * i] = body;
        done_n = i + 1;
        if (!PyBytes_CheckExact(body))
            goto none;
        PyObject *props = NULL;
        if (i > 0 && same_texts(m, &prev)) {
            props = Py_NewRef(parts[2 * i - 1]);
        } else {
            if (i == 0)
                same_texts(m, &prev);
            pmap_t pm;
            pmap_init(&pm);
            r = pmap_build(m, &pm);
            Py_ssize_t pl = r > 0 ? pmap_measure(&pm) : -1;
            if (r > 0 && pl >= 0 && pl <= 0x7FFF && (props = PyBytes_FromStringAndSize(NULL, pl)) != NULL)
                pmap_put((unsigned char *)PyBytes_AS_STRING(props), &pm, NULL);
            pmap_free(&pm);
            if (r < 0 || (props == NULL && PyErr_Occurred()))
                goto done;
            if (props == NULL)
                goto none;
        }
        parts[2 * i + 1] = props;
        total += INNER_FIXED + PyBytes_GET_SIZE(body) + PyBytes_GET_SIZE(props);
        if (total > INT32_MAX)
            goto none;
    }
    if ((out = PyBytes_FromStringAndSize(NULL, total)) == NULL)
        goto done;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *body = parts[2 * i], *props = parts[2 * i + 1];
        o = rs_put_inner(o, PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body), PyBytes_AS_STRING(props),
                         PyBytes_GET_SIZE(props), flags[i]);
    }
    goto done;
none:
    out = Py_NewRef(Py_None);
done:
    if (parts != NULL)
        for (Py_ssize_t i = 0; i < 2 * done_n; i++)
            Py_XDECREF(parts[i]);
    PyMem_Free(parts);
    PyMem_Free(flags);
    Py_XDECREF(prev.tags);
    Py_XDECREF(prev.keys);
    return out;
}

/* inner_encode(messages) -> bytes | None: inner_batch.encode_messages_py of (body, properties, flag)
 * sequences whose body and properties are bytes and flag an int32 (each an InnerMessage or a tuple or list
 * of three); None for anything else (a str or dict of properties, a bytearray, too long properties: the
 * reference encodes or refuses it). */
static PyObject *inner_encode(PyObject *self, PyObject *arg) {
    if (!PyList_CheckExact(arg))
        return Py_NewRef(Py_None);
    Py_ssize_t n = PyList_GET_SIZE(arg), total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *m = PyList_GET_ITEM(arg, i);
        if (!(PyTuple_Check(m) || PyList_CheckExact(m)) || PySequence_Fast_GET_SIZE(m) != 3)
            return Py_NewRef(Py_None);
        PyObject **f = PySequence_Fast_ITEMS(m);
        if (!PyBytes_CheckExact(f[0]) || !PyBytes_CheckExact(f[1]) || !PyLong_CheckExact(f[2])
                || PyBytes_GET_SIZE(f[1]) > 0x7FFF)
            return Py_NewRef(Py_None);
        int overflow = 0;
        long long flag = PyLong_AsLongLongAndOverflow(f[2], &overflow);
        if (overflow || flag < INT32_MIN || flag > INT32_MAX)
            return Py_NewRef(Py_None);
        total += INNER_FIXED + PyBytes_GET_SIZE(f[0]) + PyBytes_GET_SIZE(f[1]);
        if (total > INT32_MAX)
            return Py_NewRef(Py_None);
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL)
        return NULL;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject **f = PySequence_Fast_ITEMS(PyList_GET_ITEM(arg, i));
        o = rs_put_inner(o, PyBytes_AS_STRING(f[0]), PyBytes_GET_SIZE(f[0]), PyBytes_AS_STRING(f[1]),
                         PyBytes_GET_SIZE(f[1]), (int32_t)PyLong_AsLongLong(f[2]));
    }
    return out;
}

/* ---------------------------------------------------------------- an inner batch decoded */
#define corrupt rs_corrupt

/* A contiguous buffer whose len() is its size in bytes (the reference's `end`): 1; 0 (no error) for
 * anything else (no buffer, a memoryview of wider items), which the reference judges. */
static int get_buffer(PyObject *o, Py_buffer *b) {
    if (PyObject_GetBuffer(o, b, PyBUF_SIMPLE) == 0) {
        if (PyObject_Length(o) == b->len)
            return 1;
        PyBuffer_Release(b);
    }
    PyErr_Clear();
    return 0;
}

/* The start and end within a buffer of len n, as Python's slice bounds are given to decode_messages:
 * end None is n; the reference reads struct.unpack_from(buf, p) with p in [start, end), so a start or end
 * outside [0, n] is left to Python (None). */
static int span(PyObject *start_o, PyObject *end_o, Py_ssize_t n, Py_ssize_t *start, Py_ssize_t *end) {
    *start = PyLong_AsSsize_t(start_o);
    if (*start == -1 && PyErr_Occurred())
        return -1;
    if (end_o == Py_None) {
        *end = n;
    } else {
        *end = PyLong_AsSsize_t(end_o);
        if (*end == -1 && PyErr_Occurred())
            return -1;
    }
    return *start >= 0 && *end <= n && *start <= *end;
}

/* inner_decode(buf, start, end, InnerMessage) -> list | None: inner_batch.decode_messages_py (the same
 * messages, the same CorruptDataError reasons and offsets); None for bounds the reference must judge. */
static PyObject *inner_decode(PyObject *self, PyObject *args) {
    Py_buffer b;
    PyObject *buf_o, *start_o, *end_o, *cls;
    if (!PyArg_ParseTuple(args, "OOOO!:inner_decode", &buf_o, &start_o, &end_o, &PyType_Type, &cls))
        return NULL;
    if (get_buffer(buf_o, &b) <= 0)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    PyObject *out = NULL;
    Py_ssize_t p, end;
    int r = span(start_o, end_o, b.len, &p, &end);
    if (r <= 0) {
        if (r == 0)
            out = Py_NewRef(Py_None);
        goto done;
    }
    if (!PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "inner_decode: a tuple subclass is needed");
        goto done;
    }
    const unsigned char *buf = b.buf;
    out = PyList_New(0);
    if (out == NULL)
        goto done;
    while (p < end) {
        if (end - p < INNER_FIXED) {
            corrupt(p, "truncated inner message: %zd bytes left, a message needs at least %d", end - p, INNER_FIXED);
            goto fail;
        }
        int32_t total = rs_be32(buf + p + INNER_TOTALSIZE), flag = rs_be32(buf + p + INNER_FLAG);
        int32_t blen = rs_be32(buf + p + INNER_BODYLEN);
        if (blen < 0 || blen > end - p - INNER_FIXED) {
            corrupt(p, "body length %d overruns the %zd bytes left", (int)blen, end - p);
            goto fail;
        }
        Py_ssize_t q = p + INNER_BODY + blen;
        int plen = (int16_t)rs_be16(buf + q);
        if (plen < 0 || plen > end - q - 2) {
            corrupt(p, "properties length %d overruns the %zd bytes left", plen, end - q - 2);
            goto fail;
        }
        if ((long long)total != (long long)INNER_FIXED + blen + plen) {
            corrupt(p, "total size %d does not match its fields (%lld bytes)", (int)total,
                    (long long)INNER_FIXED + blen + plen);
            goto fail;
        }
        PyTypeObject *tp = (PyTypeObject *)cls;
        PyObject *item = tp->tp_alloc(tp, 3);
        if (item == NULL)
            goto fail;
        PyObject *bo = PyBytes_FromStringAndSize((const char *)buf + p + INNER_BODY, blen);
        PyObject *po = PyBytes_FromStringAndSize((const char *)buf + q + 2, plen);
        PyObject *fo = PyLong_FromLong(flag);
        if (bo == NULL || po == NULL || fo == NULL) {
            Py_XDECREF(bo);
            Py_XDECREF(po);
            Py_XDECREF(fo);
            Py_DECREF(item);
            goto fail;
        }
        PyTuple_SET_ITEM(item, 0, bo);
        PyTuple_SET_ITEM(item, 1, po);
        PyTuple_SET_ITEM(item, 2, fo);
        r = PyList_Append(out, item);
        Py_DECREF(item);
        if (r < 0)
            goto fail;
        p += total;
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyBuffer_Release(&b);
    return out;
}

/* inner_count(buf, start, end) -> int | None: inner_batch.count_messages_py (walks by TOTALSIZE). */
static PyObject *inner_count(PyObject *self, PyObject *args) {
    Py_buffer b;
    PyObject *buf_o, *start_o, *end_o, *out = NULL;
    if (!PyArg_ParseTuple(args, "OOO:inner_count", &buf_o, &start_o, &end_o))
        return NULL;
    if (get_buffer(buf_o, &b) <= 0)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    Py_ssize_t p, end;
    int r = span(start_o, end_o, b.len, &p, &end);
    if (r <= 0) {
        if (r == 0)
            out = Py_NewRef(Py_None);
        goto done;
    }
    const unsigned char *buf = b.buf;
    Py_ssize_t n = 0;
    while (p < end) {
        if (end - p < 4) {
            corrupt(p, "truncated inner message: %zd bytes left", end - p);
            goto done;
        }
        int32_t total = rs_be32(buf + p);
        if (total < INNER_FIXED || total > end - p) {
            corrupt(p, "total size %d does not fit the %zd bytes left", (int)total, end - p);
            goto done;
        }
        p += total;
        n++;
    }
    out = PyLong_FromSsize_t(n);
done:
    PyBuffer_Release(&b);
    return out;
}

PyMethodDef rs_batchcq_methods[] = {
    {"bcq_record", bcq_record, METH_VARARGS, "The record of one message to a batch-CQ topic (see put/batch_topic.py)."},
    {"inner_body", inner_body, METH_VARARGS, "encodeMessages of a producer batch, or None."},
    {"inner_encode", inner_encode, METH_O, "encodeMessages of (body, properties, flag) bytes triples, or None."},
    {"inner_decode", inner_decode, METH_VARARGS, "decodeMessages of an inner batch, or None."},
    {"inner_count", inner_count, METH_VARARGS, "countInnerMsgNum of an inner batch, or None."},
    {NULL, NULL, 0, NULL},
};
