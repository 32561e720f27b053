/* The put path's loops (see native.h): the PROPERTIES bytes of messages, what the queues and the index read
 * from them (props_info, exported for the scan path too), whole records of a producer batch with their
 * CRCs (the index keys of dispatched records are index.c's).
 *
 * The pure Python modules are the reference (put/encode.py, put/batch.py, message.py,
 * services/bulk_dispatch.props_info, services/index_service.put_batch); tests/native/test_put_native.py holds both to
 * the same bytes. Anything these functions do not handle the way the reference does (an unusual type, a
 * separator in a text) is handed back to Python: they answer None and the caller runs the reference. */
#include "native.h"
#include "put_common.h"
#include "formats/properties.h"
#include "formats/record.h"
#include <string.h>

static PyObject *crc32(PyObject *self, PyObject *arg) {
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t c = rs_crc32(b.buf, b.len);
    PyBuffer_Release(&b);
    return PyLong_FromUnsignedLong(c);
}

/* ---------------------------------------------------------------- UTF-8 of a str, Java's way */
/* Bytes of s.encode("utf-8", "replace"): an unpaired surrogate becomes "?" (as Java's getBytes(UTF_8)).
 * *bad is set when s holds \x01 or \x02 (not storable as it is: the caller leaves it to Python). An ASCII
 * str (the usual tag, key and id) is scanned once. */
static Py_ssize_t utf8_len(PyObject *s, int *bad) {
    if (rs_has_separator(s))
        *bad = 1;
    return rs_utf8_len(s);
}

/* Which of the names props_info reads (or __CRC32#) an ASCII property name is; -1 for any other. */
enum { N_KEYS, N_TAGS, N_UNIQ, N_DELAY, N_INNER, N_CRC32 };
static int special_name(PyObject *k) {
    if (!PyUnicode_IS_ASCII(k))
        return -1;
    const char *p = PyUnicode_DATA(k);
    switch (PyUnicode_GET_LENGTH(k)) {
    case 4: return memcmp(p, "KEYS", 4) == 0 ? N_KEYS : memcmp(p, "TAGS", 4) == 0 ? N_TAGS : -1;
    case 5: return memcmp(p, "DELAY", 5) == 0 ? N_DELAY : -1;
    case 8: return memcmp(p, "UNIQ_KEY", 8) == 0 ? N_UNIQ : memcmp(p, "__CRC32#", 8) == 0 ? N_CRC32 : -1;
    case 9: return memcmp(p, "INNER_NUM", 9) == 0 ? N_INNER : -1;
    case 10: return memcmp(p, "INNER_BASE", 10) == 0 ? N_INNER : -1;
    default: return -1;
    }
}

/* ---------------------------------------------------------------- a message's PROPERTIES bytes */
static PyObject *s_raw_properties, *s_properties, *s_keys, *s_tags, *s_space;

static int names_ready(void) {
    if (s_raw_properties != NULL)
        return 0;
    s_raw_properties = PyUnicode_InternFromString("raw_properties");
    s_properties = PyUnicode_InternFromString("properties");
    s_keys = PyUnicode_InternFromString("keys");
    s_tags = PyUnicode_InternFromString("tags");
    s_space = PyUnicode_InternFromString(" ");
    if (!s_raw_properties || !s_properties || !s_keys || !s_tags || !s_space) {
        s_raw_properties = NULL;
        return -1;
    }
    return 0;
}


typedef struct {
    PyObject *name;             /* a str, or NULL with `lit` a literal "KEYS"/"TAGS" */
    const char *lit;
    PyObject *value;            /* a str */
    Py_ssize_t nlen, vlen;      /* their UTF-8 lengths */
} pair_t;

static PyObject *direct_info(PyObject *tags, PyObject *kstr, PyObject *uniq);

/* The PROPERTIES bytes of one message, as put/encode.py message_props / Message.properties_bytes make them;
 * Py_None (a new reference) when the message is not one this handles (raw_properties, a type other than
 * the documented ones, a separator in a text): the caller then runs the Python path, which decides.
 * With `info` given, *info is set to props_info of the bytes made straight from the message's own texts
 * when that is sure to be the same (ASCII texts, none of the names but UNIQ_KEY in the dict; it is left NULL
 * otherwise): a producer's keyed message then needs no parse of its bytes back. */
static PyObject *message_props_one(PyObject *msg, int drop_crc, PyObject **info) {
    PyObject *raw = NULL, *props = NULL, *keys = NULL, *tags = NULL, *joined = NULL, *out = NULL;
    PyObject *uniq = NULL;      /* the dict's UNIQ_KEY value (borrowed) */
    pair_t pairs_small[8];
    pair_t *pairs = pairs_small;
    Py_ssize_t np_ = 0, tags_len = 0, kstr_len = 0;
    int direct = info != NULL;
    raw = PyObject_GetAttr(msg, s_raw_properties);
    if (raw == NULL)
        goto fallback;
    if (raw != Py_None)
        goto fallback;
    props = PyObject_GetAttr(msg, s_properties);
    keys = props ? PyObject_GetAttr(msg, s_keys) : NULL;
    tags = keys ? PyObject_GetAttr(msg, s_tags) : NULL;
    if (tags == NULL)
        goto fallback;
    if (tags != Py_None && !PyUnicode_CheckExact(tags))
        goto fallback;
    if (props != Py_None && !PyDict_CheckExact(props))
        goto fallback;
    int with_dict = props != Py_None && PyDict_GET_SIZE(props) > 0;
    /* KEYS: a str, or a list/tuple of str joined by spaces. Without a properties dict a KEYS that joins to
     * "" is left out (put/encode.py message_props_py's common case); with one, any non-empty list counts
     * (Message.property_map). */
    PyObject *kstr = NULL;
    int keys_present = 0;
    if (keys == Py_None) {
    } else if (PyUnicode_CheckExact(keys)) {
        kstr = keys;
        keys_present = PyUnicode_GET_LENGTH(keys) > 0;
    } else if (PyList_CheckExact(keys) || PyTuple_CheckExact(keys)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(keys);
        PyObject **items = PySequence_Fast_ITEMS(keys);
        for (Py_ssize_t i = 0; i < n; i++)
            if (!PyUnicode_CheckExact(items[i]))
                goto fallback;
        if (n > 0) {
            joined = PyUnicode_Join(s_space, keys);
            if (joined == NULL)
                goto fallback;
            kstr = joined;
            keys_present = with_dict ? 1 : PyUnicode_GET_LENGTH(joined) > 0;
        }
    } else {
        goto fallback;
    }
    int tags_present = tags != Py_None && PyUnicode_GET_LENGTH(tags) > 0;
    if (tags != Py_None) {      /* checked even when empty: text_problem refuses separators in any tags */
        int bad = 0;
        tags_len = utf8_len(tags, &bad);
        if (bad)
            goto fallback;
    }
    if (kstr != NULL) {
        int bad = 0;
        kstr_len = utf8_len(kstr, &bad);
        if (bad)
            goto fallback;
    }
    /* the pairs, in property_map's order: the dict's, then KEYS and TAGS unless the dict names them */
    Py_ssize_t cap = 2 + (with_dict ? PyDict_GET_SIZE(props) : 0);
    if (cap > PUT_MAX_PAIRS)
        goto fallback;
    if (cap > 8) {
        pairs = PyMem_Malloc(sizeof(pair_t) * cap);
        if (pairs == NULL) {
            PyErr_NoMemory();
            goto error;
        }
    }
    int dict_keys = 0, dict_tags = 0;
    if (with_dict) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(props, &pos, &k, &v)) {
            if (!PyUnicode_CheckExact(k) || (v != Py_None && !PyUnicode_CheckExact(v)))
                goto fallback;
            int bad = 0;
            Py_ssize_t nl = utf8_len(k, &bad), vl = v != Py_None ? utf8_len(v, &bad) : 0;
            if (bad)
                goto fallback;
            int which = special_name(k);
            if (which == N_KEYS)
                dict_keys = 1;
            else if (which == N_TAGS)
                dict_tags = 1;
            if (which == N_UNIQ)
                uniq = v;
            else if (which != -1 && which != N_CRC32)
                direct = 0;     /* KEYS, TAGS, DELAY or INNER_* in the dict: props_info reads the bytes */
            if (v == Py_None)
                continue;
            if (drop_crc && which == N_CRC32)
                continue;
            if (np_ >= cap)
                goto fallback;      /* the dict grew while read: let Python do it */
            pairs[np_] = (pair_t){k, NULL, v, nl, vl};
            np_++;
        }
    }
    if (keys_present && !dict_keys && np_ < cap) {
        pairs[np_] = (pair_t){NULL, "KEYS", kstr, 4, kstr_len};
        np_++;
    }
    if (tags_present && !dict_tags && np_ < cap) {
        pairs[np_] = (pair_t){NULL, "TAGS", tags, 4, tags_len};
        np_++;
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < np_; i++) {
        if (pairs[i].nlen > PUT_MAX_TEXT || pairs[i].vlen > PUT_MAX_TEXT || total > PUT_MAX_TEXT)
            goto fallback;
        total += pairs[i].nlen + pairs[i].vlen + 2;
    }
    out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL)
        goto error;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < np_; i++) {
        if (pairs[i].lit) {
            memcpy(o, pairs[i].lit, 4);
            o += 4;
        } else {
            o = rs_utf8_put(o, pairs[i].name);
        }
        *o++ = 1;
        o = rs_utf8_put(o, pairs[i].value);
        *o++ = 2;
    }
    if (direct && (uniq == NULL || uniq == Py_None || PyUnicode_IS_ASCII(uniq))
            && (!tags_present || PyUnicode_IS_ASCII(tags)) && (!keys_present || PyUnicode_IS_ASCII(kstr))) {
        *info = direct_info(tags_present ? tags : NULL, keys_present ? kstr : NULL, uniq);
        if (*info == NULL)
            goto error;
    }
    goto done;
fallback:
    PyErr_Clear();
    Py_XDECREF(out);
    out = Py_NewRef(Py_None);
    goto done;
error:
    Py_CLEAR(out);
done:
    if (pairs != pairs_small)
        PyMem_Free(pairs);
    Py_XDECREF(raw);
    Py_XDECREF(props);
    Py_XDECREF(keys);
    Py_XDECREF(tags);
    Py_XDECREF(joined);
    return out;
}

static PyObject *message_props(PyObject *self, PyObject *args) {
    PyObject *msg;
    int drop_crc;
    if (!PyArg_ParseTuple(args, "Op:message_props", &msg, &drop_crc))
        return NULL;
    if (names_ready() < 0)
        return NULL;
    return message_props_one(msg, drop_crc, NULL);
}

/* ---------------------------------------------------------------- props_info */
static PyObject *no_keys_info;      /* (0, "", None, False): properties without any of the names */

static PyObject *decode(const unsigned char *p, Py_ssize_t n) {
    return PyUnicode_DecodeUTF8((const char *)p, n, "replace");
}

/* bulk_dispatch.props_info over n bytes: (tagsCode, KEYS, UNIQ_KEY, has DELAY), names at item starts,
 * the last non-empty value wins; Py_None when INNER_NUM or INNER_BASE has a value (the careful path). */
static PyObject *props_info_bytes(const unsigned char *p, Py_ssize_t n) {
    rs_props f;
    rs_props_find(p, n, &f);
    if (f.pos[P_INNER_NUM] >= 0 || f.pos[P_INNER_BASE] >= 0)
        Py_RETURN_NONE;
    const unsigned char *tags = f.pos[P_TAGS] >= 0 ? p + f.pos[P_TAGS] : NULL;
    const unsigned char *keys = f.pos[P_KEYS] >= 0 ? p + f.pos[P_KEYS] : NULL;
    const unsigned char *uniq = f.pos[P_UNIQ] >= 0 ? p + f.pos[P_UNIQ] : NULL;
    Py_ssize_t tl = f.len[P_TAGS], kl = f.len[P_KEYS], ul = f.len[P_UNIQ];
    int delay = f.pos[P_DELAY] >= 0;
    if (!tags && !keys && !uniq && !delay && no_keys_info != NULL)
        return Py_NewRef(no_keys_info);
    int32_t code = 0;
    if (tags) {
        Py_ssize_t j = 0;
        uint32_t h = 0;
        while (j < tl && tags[j] < 0x80)
            h = 31u * h + tags[j++];
        if (j < tl) {       /* not ASCII: hash what Python decodes (U+FFFD for bad bytes) */
            PyObject *s = decode(tags, tl);
            if (s == NULL)
                return NULL;
            code = rs_java_hash_str(s);
            Py_DECREF(s);
        } else {
            code = (int32_t)h;
        }
    }
    PyObject *k = keys ? decode(keys, kl) : PyUnicode_New(0, 0);
    if (k == NULL)
        return NULL;
    PyObject *u = uniq ? decode(uniq, ul) : Py_NewRef(Py_None);
    if (u == NULL) {
        Py_DECREF(k);
        return NULL;
    }
    PyObject *c = PyLong_FromLong(code);
    if (c == NULL) {
        Py_DECREF(k);
        Py_DECREF(u);
        return NULL;
    }
    PyObject *t = PyTuple_New(4);
    if (t == NULL) {
        Py_DECREF(k); Py_DECREF(u); Py_DECREF(c);
        return NULL;
    }
    PyTuple_SET_ITEM(t, 0, c);
    PyTuple_SET_ITEM(t, 1, k);
    PyTuple_SET_ITEM(t, 2, u);
    PyTuple_SET_ITEM(t, 3, Py_NewRef(delay ? Py_True : Py_False));
    return t;
}

static int info_ready(void) {
    if (no_keys_info != NULL)
        return 0;
    PyObject *empty = PyUnicode_New(0, 0);
    if (empty == NULL)
        return -1;
    no_keys_info = Py_BuildValue("(iNOO)", 0, empty, Py_None, Py_False);
    return no_keys_info ? 0 : -1;
}

/* props_info's tuple from a message's own texts (message_props_one decided it is the same): tagsCode of
 * `tags` (ASCII: Java's hash over its bytes), KEYS (`kstr` or ""), UNIQ_KEY (None when absent or empty). */
static PyObject *direct_info(PyObject *tags, PyObject *kstr, PyObject *uniq) {
    if (uniq != NULL && (uniq == Py_None || PyUnicode_GET_LENGTH(uniq) == 0))
        uniq = NULL;
    if (kstr != NULL && PyUnicode_GET_LENGTH(kstr) == 0)
        kstr = NULL;
    if (tags == NULL && kstr == NULL && uniq == NULL && no_keys_info != NULL)
        return Py_NewRef(no_keys_info);
    PyObject *k = kstr ? Py_NewRef(kstr) : PyUnicode_New(0, 0);
    if (k == NULL)
        return NULL;
    PyObject *t = Py_BuildValue("(iNOO)", tags ? rs_java_hash_str(tags) : 0, k, uniq ? uniq : Py_None, Py_False);
    return t;
}

static PyObject *props_info(PyObject *self, PyObject *arg) {
    Py_buffer b;
    if (info_ready() < 0)
        return NULL;
    if (PyBytes_CheckExact(arg))
        return props_info_bytes((const unsigned char *)PyBytes_AS_STRING(arg), PyBytes_GET_SIZE(arg));
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *r = props_info_bytes(b.buf, b.len);
    PyBuffer_Release(&b);
    return r;
}

/* batch_props(msgs, drop_crc) -> (props list, infos list, uniform, careful, codes): each message's
 * PROPERTIES bytes (None where Python must decide) and props_info of them (None where the bytes are None
 * or props_info says None); uniform when every message has the same bytes; careful when a bytes or an info
 * is None or an info has DELAY (the caller looks closer); codes: each info's tagsCode as native int64 bytes
 * (0 for a None). A message whose bytes equal the previous one's shares its bytes and info objects. */
static PyObject *batch_props(PyObject *self, PyObject *args) {
    PyObject *msgs;
    int drop_crc;
    if (!PyArg_ParseTuple(args, "O!p:batch_props", &PyList_Type, &msgs, &drop_crc))
        return NULL;
    if (names_ready() < 0 || info_ready() < 0)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(msgs);
    PyObject *plist = PyList_New(n), *ilist = PyList_New(n), *codes = PyBytes_FromStringAndSize(NULL, n * 8);
    if (plist == NULL || ilist == NULL || codes == NULL)
        goto error;
    int64_t *code = (int64_t *)PyBytes_AS_STRING(codes);
    PyObject *prev = NULL, *prev_info = NULL;
    int uniform = 1, careful = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *info = NULL;
        PyObject *props = message_props_one(PyList_GET_ITEM(msgs, i), drop_crc, &info);
        if (props == NULL)
            goto error;
        if (props == Py_None) {
            info = Py_NewRef(Py_None);
            uniform = 0;
        } else if (prev != NULL && PyBytes_GET_SIZE(prev) == PyBytes_GET_SIZE(props)
                   && memcmp(PyBytes_AS_STRING(prev), PyBytes_AS_STRING(props), PyBytes_GET_SIZE(props)) == 0) {
            Py_DECREF(props);
            Py_XDECREF(info);
            props = Py_NewRef(prev);
            info = Py_NewRef(prev_info);
        } else {
            if (prev != NULL)
                uniform = 0;
            if (info == NULL)
                info = props_info_bytes((const unsigned char *)PyBytes_AS_STRING(props), PyBytes_GET_SIZE(props));
            if (info == NULL) {
                Py_DECREF(props);
                goto error;
            }
            prev = props;
            prev_info = info;
        }
        PyList_SET_ITEM(plist, i, props);
        PyList_SET_ITEM(ilist, i, info);
        if (info == Py_None) {
            careful = 1;
            code[i] = 0;
        } else {
            code[i] = PyLong_AsLong(PyTuple_GET_ITEM(info, 0));     /* an int32 made above */
            if (PyTuple_GET_ITEM(info, 3) == Py_True)
                careful = 1;
        }
    }
    return Py_BuildValue("(NNOON)", plist, ilist, uniform ? Py_True : Py_False, careful ? Py_True : Py_False,
                         codes);
error:
    Py_XDECREF(plist);
    Py_XDECREF(ilist);
    Py_XDECREF(codes);
    return NULL;
}

/* ---------------------------------------------------------------- records of a producer batch */
/* encode_batch(template, bodies, props_list, topic_tail, reserve, flags, first_queue_offset, phys, total,
 * append_crc) -> bytes: the records of a batch end to end, as put/batch.py's append_numpy writes them. `template`
 * is the fixed part (TOTALSIZE .. BODYLEN) with the fields all records share; each record gets its own
 * TOTALSIZE, BODYCRC, FLAG, QUEUEOFFSET, PHYSICALOFFSET and BODYLEN, then body, topic tail, PROPLEN,
 * properties and `reserve` bytes: with append_crc, the __CRC32# entry over the record before it.
 * Bodies are bytes, props_list a list of bytes (or one bytes for all), flags a list of int32. The
 * records must add up to `total` bytes (else ValueError: the caller sized them). */
static PyObject *encode_batch(PyObject *self, PyObject *args) {
    Py_buffer tmpl, ttail;
    PyObject *bodies, *props, *flags;
    Py_ssize_t reserve, total;
    long long first_qoff, phys;
    int append_crc;
    if (!PyArg_ParseTuple(args, "y*O!Oy*nO!LLnp:encode_batch", &tmpl, &PyList_Type, &bodies, &props, &ttail,
                          &reserve, &PyList_Type, &flags, &first_qoff, &phys, &total, &append_crc))
        return NULL;
    PyObject *out = NULL;
    Py_ssize_t n = PyList_GET_SIZE(bodies);
    Py_ssize_t fl = tmpl.len;
    int one_props = PyBytes_Check(props);
    if (fl < 64 || fl > 256 || reserve < 0 || reserve > 64 || total < 0 || PyList_GET_SIZE(flags) != n
            || (!one_props && (!PyList_Check(props) || PyList_GET_SIZE(props) != n))
            || (append_crc && reserve != CRC32_PROPERTY_LEN)) {
        PyErr_SetString(PyExc_ValueError, "encode_batch: inconsistent arguments");
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL)
        goto done;
    unsigned char *base = (unsigned char *)PyBytes_AS_STRING(out), *o = base, *end = base + total;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *body = PyList_GET_ITEM(bodies, i);
        PyObject *pr = one_props ? props : PyList_GET_ITEM(props, i);
        if (!PyBytes_Check(body) || !PyBytes_Check(pr)) {
            PyErr_SetString(PyExc_TypeError, "encode_batch: bodies and properties must be bytes");
            goto fail;
        }
        long flag = PyLong_AsLong(PyList_GET_ITEM(flags, i));
        if ((flag == -1 && PyErr_Occurred()) || flag < INT32_MIN || flag > INT32_MAX) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "encode_batch: a flag is not an int32");
            goto fail;
        }
        Py_ssize_t bl = PyBytes_GET_SIZE(body), pl = PyBytes_GET_SIZE(pr);
        if (pl + reserve > 0xFFFF || bl > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "encode_batch: properties or body too long");
            goto fail;
        }
        Py_ssize_t size = fl + bl + ttail.len + 2 + pl + reserve;
        if (size > INT32_MAX || size > end - o) {
            PyErr_SetString(PyExc_ValueError, "encode_batch: the records do not add up to the total");
            goto fail;
        }
        const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(body);
        memcpy(o, tmpl.buf, fl);
        rs_put32(o, (uint32_t)size);
        rs_put32(o + REC_BODYCRC, rs_crc32(b, bl) & 0x7FFFFFFFu);
        rs_put32(o + REC_FLAG, (uint32_t)flag);
        rs_put64(o + REC_QUEUEOFFSET, (uint64_t)(first_qoff + i));
        rs_put64(o + REC_PHYSICALOFFSET, (uint64_t)(phys + (o - base)));
        rs_put32(o + fl - 4, (uint32_t)bl);
        unsigned char *q = o + fl;
        memcpy(q, b, bl);
        q += bl;
        memcpy(q, ttail.buf, ttail.len);
        q += ttail.len;
        rs_put16(q, (unsigned)(pl + reserve));
        q += 2;
        memcpy(q, PyBytes_AS_STRING(pr), pl);
        q += pl;
        if (append_crc)
            rs_put_crc_property(q, rs_crc32(o, q - o) & 0x7FFFFFFFu);
        else
            memset(q, 0, reserve);
        o += size;
    }
    if (o != end) {
        PyErr_SetString(PyExc_ValueError, "encode_batch: the records do not add up to the total");
        goto fail;
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyBuffer_Release(&tmpl);
    PyBuffer_Release(&ttail);
    return out;
}

/* ---------------------------------------------------------------- one keyed message */
static PyObject *s_body, *s_flag, *s_reconsume, *s_pto, *s_born_ts, *s_born_host_attr;

static int rs_keyed_names(void) {
    s_body = PyUnicode_InternFromString("body");
    s_flag = PyUnicode_InternFromString("flag");
    s_reconsume = PyUnicode_InternFromString("reconsume_times");
    s_pto = PyUnicode_InternFromString("prepared_transaction_offset");
    s_born_ts = PyUnicode_InternFromString("born_timestamp");
    s_born_host_attr = PyUnicode_InternFromString("born_host");
    if (!s_body || !s_flag || !s_reconsume || !s_pto || !s_born_ts || !s_born_host_attr) {
        s_body = NULL;
        return -1;
    }
    return 0;
}

/* A decimal number of 1..maxd digits without a leading zero (but "0"), at most `max`: its value, or -1. */
static long long canonical_number(const char *p, Py_ssize_t n, int maxd, long long max) {
    if (n < 1 || n > maxd || (n > 1 && p[0] == '0'))
        return -1;
    long long v = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v <= max ? v : -1;
}

/* record.host_to_bytes of "a.b.c.d:port" written canonically (decimal octets without leading zeros, a port of
 * 0..2^32-1 in plain digits) into out[8]: 1; 0 for anything else, which the Python path converts or refuses. */
static int ipv4_host(PyObject *host, unsigned char out[8]) {
    Py_ssize_t n;
    const char *p = PyUnicode_CheckExact(host) ? PyUnicode_AsUTF8AndSize(host, &n) : NULL;
    if (p == NULL) {
        PyErr_Clear();
        return 0;
    }
    const char *colon = memchr(p, ':', (size_t)n);
    if (colon == NULL)
        return 0;
    long long port = canonical_number(colon + 1, n - (colon + 1 - p), 10, 0xFFFFFFFFLL);
    if (port < 0)
        return 0;
    const char *q = p;
    for (int i = 0; i < 4; i++) {
        const char *stop = i < 3 ? memchr(q, '.', (size_t)(colon - q)) : colon;
        long long octet = stop ? canonical_number(q, stop - q, 3, 255) : -1;
        if (octet < 0)
            return 0;
        out[i] = (unsigned char)octet;
        q = stop + 1;
    }
    rs_put32(out + 4, (uint32_t)port);
    return 1;
}

/* The PROPERTIES bytes of a message's raw_properties as Message.properties_bytes makes them (no CRC to drop: the
 * plain path appends none): a str encoded as UTF-8 ("?" for an unpaired surrogate), bytes as they are; NULL with
 * no error for any other type (Python decides). */
static PyObject *raw_props(PyObject *raw) {
    if (PyBytes_CheckExact(raw))
        return Py_NewRef(raw);
    if (PyUnicode_CheckExact(raw))
        return PyUnicode_AsEncodedString(raw, "utf-8", "replace");
    return NULL;
}

/* The parts of one keyed message's record on the plain path (see native.h, rs_keyed; its properties from the
 * dict, keys and tags, or its raw_properties; its born host none or canonical IPv4): 1 and *k filled (its
 * references held), 0 when Python decides (nothing held, no error: properties the C leaves to Python or with
 * INNER_NUM/INNER_BASE, a field that is not an int of its width, a body that is not bytes or is over max_body,
 * properties over 32767 bytes, a record over max_record), -1 on an error. The clock is not read. */
int rs_keyed_prepare(PyObject *msg, Py_ssize_t tail_len, Py_ssize_t max_body, Py_ssize_t max_record, rs_keyed *k) {
    if (names_ready() < 0 || info_ready() < 0)
        return -1;
    if (s_body == NULL && rs_keyed_names() < 0)
        return -1;
    PyObject *props = NULL, *info = NULL, *body = NULL, *born = NULL;
    int r;
    if ((r = rs_int_attr(msg, s_flag, INT32_MIN, INT32_MAX, &k->flag)) <= 0
            || (r = rs_int_attr(msg, s_reconsume, INT32_MIN, INT32_MAX, &k->reconsume)) <= 0
            || (r = rs_int_attr(msg, s_pto, INT64_MIN, INT64_MAX, &k->pto)) <= 0)
        return r;
    born = PyObject_GetAttr(msg, s_born_ts);
    if (born == NULL)
        return -1;
    k->has_born = born != Py_None;
    if (k->has_born) {      /* int_attr's rule: an int (not a bool) of the width */
        int overflow = 0;
        k->born_ts = PyLong_CheckExact(born) ? PyLong_AsLongLongAndOverflow(born, &overflow) : 0;
        r = PyLong_CheckExact(born) && !overflow;
        if (k->born_ts == -1 && PyErr_Occurred())
            r = -1;
        if (r <= 0) {
            Py_DECREF(born);
            return r;
        }
    }
    Py_DECREF(born);
    born = PyObject_GetAttr(msg, s_born_host_attr);
    if (born == NULL)
        return -1;
    k->has_born_host = born != Py_None && !(PyUnicode_CheckExact(born) && PyUnicode_GET_LENGTH(born) == 0);
    r = !k->has_born_host || ipv4_host(born, k->born_host);
    Py_DECREF(born);
    if (!r)
        return 0;
    body = PyObject_GetAttr(msg, s_body);
    if (body == NULL)
        return -1;
    if (!PyBytes_CheckExact(body) || PyBytes_GET_SIZE(body) > max_body)
        goto none;
    PyObject *raw = PyObject_GetAttr(msg, s_raw_properties);
    if (raw == NULL)
        goto fail;
    props = raw != Py_None ? raw_props(raw) : message_props_one(msg, 0, &info);
    Py_DECREF(raw);
    if (props == NULL) {        /* an error, or raw properties of a type Python decides on */
        if (PyErr_Occurred())
            goto fail;
        goto none;
    }
    if (props == Py_None)
        goto none;
    if (info == NULL)
        info = props_info_bytes((const unsigned char *)PyBytes_AS_STRING(props), PyBytes_GET_SIZE(props));
    if (info == NULL)
        goto fail;
    if (info == Py_None)
        goto none;
    Py_ssize_t bl = PyBytes_GET_SIZE(body), pl = PyBytes_GET_SIZE(props);
    if (pl > REC_MAX_PROPERTIES)
        goto none;
    k->size = REC_BODY(REC_HOST_V4, REC_HOST_V4) + bl + tail_len + 2 + pl;
    if (k->size > max_record || k->size > INT32_MAX)
        goto none;
    k->props = props;
    k->info = info;
    k->body = body;
    return 1;
none:
    Py_XDECREF(props);
    Py_XDECREF(info);
    Py_DECREF(body);
    return 0;
fail:
    Py_XDECREF(props);
    Py_XDECREF(info);
    Py_DECREF(body);
    return -1;
}

void rs_keyed_clear(rs_keyed *k) {
    Py_CLEAR(k->props);
    Py_CLEAR(k->info);
    Py_CLEAR(k->body);
}

/* The record of rs_keyed_prepare's parts at o (k->size bytes): fixed fields (IPv4 host `h` as born and store
 * host, sysFlag 0), body, topic tail, PROPLEN, properties, as put/single.py put_general writes them. */
void rs_keyed_write(unsigned char *o, const rs_keyed *k, const unsigned char *ttail, Py_ssize_t tl, int magic,
                    int queue_id, long long qoff, long long phys, const unsigned char *h, long long store_ts) {
    Py_ssize_t pl = PyBytes_GET_SIZE(k->props);
    rs_record_fields f = {
        .size = k->size, .magic = magic, .queue_id = queue_id, .flag = k->flag, .qoff = qoff, .phys = phys,
        .sysflag = 0, .born_ts = k->born_ts, .store_ts = store_ts, .reconsume = k->reconsume, .pto = k->pto,
        .born_host = k->has_born_host ? k->born_host : h, .store_host = h,
        .body = (const unsigned char *)PyBytes_AS_STRING(k->body), .body_len = PyBytes_GET_SIZE(k->body)};
    unsigned char *q = rs_put_record(o, &f, ttail, tl, pl);
    memcpy(q, PyBytes_AS_STRING(k->props), pl);
}

/* keyed_record(msg, topic_tail, magic, queue_id, queue_offset, phys, room, max_body, max_record, host, clock)
 * -> (record, props, info, store_ts) | None: put/single.py's plain-path record of one message (IPv4 hosts `host`
 * for both, sysFlag 0, no appended CRC) at `phys` with `queue_offset`, as put/single.py put_general writes it:
 * fixed fields, body, topic tail, PROPLEN, properties. `props` and `info` are message_props and props_info
 * of the message. None, before the clock is read, for whatever Python decides (rs_keyed_prepare) and for a
 * record that does not leave 8 bytes of `room`. Then born_ts (unless the message has one) and store_ts are
 * read from clock(), in that order (clock None: the wall clock, config.wall_clock_ms, read here). */
static PyObject *keyed_record(PyObject *self, PyObject *args) {
    PyObject *msg, *ttail, *host, *clock;
    int magic, queue_id;
    long long qoff, phys;
    Py_ssize_t room, max_body, max_record;
    if (!PyArg_ParseTuple(args, "OO!iiLLnnnO!O:keyed_record", &msg, &PyBytes_Type, &ttail, &magic, &queue_id, &qoff,
                          &phys, &room, &max_body, &max_record, &PyBytes_Type, &host, &clock))
        return NULL;
    if (PyBytes_GET_SIZE(host) != 8) {
        PyErr_SetString(PyExc_ValueError, "keyed_record: the store host must be an IPv4 host (8 bytes)");
        return NULL;
    }
    rs_keyed k = {0};
    long long store_ts;
    int r = rs_keyed_prepare(msg, PyBytes_GET_SIZE(ttail), max_body, max_record, &k);
    if (r < 0)
        return NULL;
    if (r == 0)
        Py_RETURN_NONE;
    PyObject *out = NULL;
    if (room - END_FILE_MIN_BLANK_LENGTH < k.size) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    if (!k.has_born && rs_clock_ms(clock, &k.born_ts) < 0)
        goto done;
    if (rs_clock_ms(clock, &store_ts) < 0)
        goto done;
    PyObject *rec = PyBytes_FromStringAndSize(NULL, k.size);
    if (rec == NULL)
        goto done;
    rs_keyed_write((unsigned char *)PyBytes_AS_STRING(rec), &k, (const unsigned char *)PyBytes_AS_STRING(ttail),
                   PyBytes_GET_SIZE(ttail), magic, queue_id, qoff, phys, (const unsigned char *)PyBytes_AS_STRING(host),
                   store_ts);
    out = Py_BuildValue("(NOOL)", rec, k.props, k.info, store_ts);
done:
    rs_keyed_clear(&k);
    return out;
}

/* batch_fields(msgs, topic) -> (bodies, flags, body lengths) | None: put_batch's per-message columns and
 * checks in one pass, for a batch of `topic` whose bodies are all bytes and flags all int32 (exactly: no
 * subclass, no bool); None otherwise, and then put/batch.py's own checks decide (and say what is wrong). */
static PyObject *s_topic_attr;

static PyObject *batch_fields(PyObject *self, PyObject *args) {
    PyObject *msgs, *topic;
    if (!PyArg_ParseTuple(args, "O!U:batch_fields", &PyList_Type, &msgs, &topic))
        return NULL;
    if (names_ready() < 0 || (s_body == NULL && rs_keyed_names() < 0))
        return NULL;
    if (s_topic_attr == NULL && (s_topic_attr = PyUnicode_InternFromString("topic")) == NULL)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(msgs);
    PyObject *bodies = PyList_New(n), *flags = PyList_New(n), *lens = PyList_New(n);
    if (bodies == NULL || flags == NULL || lens == NULL)
        goto error;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *m = PyList_GET_ITEM(msgs, i);
        PyObject *t = PyObject_GetAttr(m, s_topic_attr);
        if (t == NULL)
            goto error;
        int same = t == topic || (PyUnicode_CheckExact(t) && PyUnicode_Compare(t, topic) == 0);
        Py_DECREF(t);
        if (!same)
            goto none;
        PyObject *b = PyObject_GetAttr(m, s_body);
        if (b == NULL)
            goto error;
        PyList_SET_ITEM(bodies, i, b);
        if (!PyBytes_CheckExact(b))
            goto none;
        PyObject *f = PyObject_GetAttr(m, s_flag);
        if (f == NULL)
            goto error;
        PyList_SET_ITEM(flags, i, f);
        int overflow = 0;
        long long v = PyLong_CheckExact(f) ? PyLong_AsLongLongAndOverflow(f, &overflow) : 0;
        if (!PyLong_CheckExact(f) || overflow || v < INT32_MIN || v > INT32_MAX)
            goto none;
        PyObject *len = PyLong_FromSsize_t(PyBytes_GET_SIZE(b));
        if (len == NULL)
            goto error;
        PyList_SET_ITEM(lens, i, len);
    }
    return Py_BuildValue("(NNN)", bodies, flags, lens);
none:
    Py_DECREF(bodies);
    Py_DECREF(flags);
    Py_DECREF(lens);
    Py_RETURN_NONE;
error:
    Py_XDECREF(bodies);
    Py_XDECREF(flags);
    Py_XDECREF(lens);
    return NULL;
}

/* fill_crc(record: bytearray) -> None: the appended __CRC32# entry over the record's last 20 bytes
 * (R.fill_crc_property, in place). */
static PyObject *fill_crc(PyObject *self, PyObject *arg) {
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_WRITABLE) < 0)
        return NULL;
    if (b.len < CRC32_PROPERTY_LEN) {
        PyBuffer_Release(&b);
        PyErr_SetString(PyExc_ValueError, "fill_crc: a record is longer than its CRC entry");
        return NULL;
    }
    unsigned char *p = b.buf;
    rs_put_crc_property(p + b.len - CRC32_PROPERTY_LEN, rs_crc32(p, b.len - CRC32_PROPERTY_LEN) & 0x7FFFFFFFu);
    PyBuffer_Release(&b);
    Py_RETURN_NONE;
}

/* index_records(topic, offsets, store_ts, sys_flag, infos) -> [(topic, offset, store_ts, sys_flag, UNIQ_KEY,
 * KEYS)]: the records of a producer batch as IndexService.add takes them, from each one's props_info. */
static PyObject *index_records(PyObject *self, PyObject *args) {
    PyObject *topic, *offsets, *ts, *flag, *infos;
    if (!PyArg_ParseTuple(args, "UO!OOO!:index_records", &topic, &PyList_Type, &offsets, &ts, &flag, &PyList_Type,
                          &infos))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(offsets);
    if (PyList_GET_SIZE(infos) != n) {
        PyErr_SetString(PyExc_ValueError, "index_records: one info per offset");
        return NULL;
    }
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *info = PyList_GET_ITEM(infos, i);
        if (!PyTuple_Check(info) || PyTuple_GET_SIZE(info) != 4) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_TypeError, "index_records: an info is not a props_info tuple");
            return NULL;
        }
        PyObject *t = PyTuple_Pack(6, topic, PyList_GET_ITEM(offsets, i), ts, flag, PyTuple_GET_ITEM(info, 2),
                                   PyTuple_GET_ITEM(info, 1));
        if (t == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, t);
    }
    return out;
}

PyMethodDef rs_put_methods[] = {
    {"crc32", crc32, METH_O, "zlib.crc32 of a bytes-like object (unsigned)."},
    {"message_props", message_props, METH_VARARGS,
     "message_props(msg, drop_crc) -> a message's PROPERTIES bytes, or None: the Python path decides."},
    {"props_info", props_info, METH_O,
     "props_info(raw) -> (tagsCode, KEYS, UNIQ_KEY, has DELAY) | None, as services.bulk_dispatch.props_info."},
    {"batch_props", batch_props, METH_VARARGS,
     "batch_props(msgs, drop_crc) -> (properties bytes or None each, props_info each, all the same, careful,"
     " tagsCodes)."},
    {"index_records", index_records, METH_VARARGS,
     "index_records(topic, offsets, store_ts, sys_flag, infos) -> the records IndexService.add takes."},
    {"encode_batch", encode_batch, METH_VARARGS,
     "encode_batch(template, bodies, props, topic_tail, reserve, flags, first_qoff, phys, total, append_crc)"
     " -> the records of a producer batch."},
    {"batch_fields", batch_fields, METH_VARARGS,
     "batch_fields(msgs, topic) -> (bodies, flags, body lengths) | None: put_batch's columns, checked."},
    {"keyed_record", keyed_record, METH_VARARGS,
     "keyed_record(msg, topic_tail, magic, queue_id, queue_offset, phys, room, max_body, max_record, host, clock)"
     " -> (record, props, info, store_ts) | None: one keyed message's record on the plain put path."},
    {"fill_crc", fill_crc, METH_O, "fill_crc(record) fills the appended __CRC32# entry in place."},
    {NULL, NULL, 0, NULL},
};
