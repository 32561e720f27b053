/* verify's record table (VerifyRecords; verify._Records is the pure reference): the records the CommitLog
 * walk found, by physical offset, kept in C arrays instead of one Python object each, so that checking the
 * ConsumeQueue units and index entries against them, and the dispatch coverage, are C loops.
 *
 * A row is a record the compiled walk took (its fields read from the mapped segment, which the table keeps a
 * buffer of so get() can rebuild its _Record) or one verify's own check added (its _Record kept as is). Rows
 * keep their first insertion's place, a later add for the same offset replaces the row: a dict's order. */
#include "native.h"
#include "formats/cq_unit.h"
#include "formats/index.h"
#include "formats/record.h"
#include <string.h>

static const char SCHEDULE[] = "SCHEDULE_TOPIC_XXXX";

typedef struct {
    int64_t phys, qoff, tags, store_ts, pos;
    int32_t size, qid, flags, topic;  /* topic: an id in topics, one per distinct str */
    int32_t seg;                      /* the segment it was walked in; -1: added from Python (py_rows) */
    uint32_t hoff, hn;                /* its index key hashes: hashes[hoff, hoff + hn) */
    uint8_t covered, tags_none;
} vrow;

typedef struct {
    Py_buffer view;
    PyObject *obj, *rel;
} vseg;

static const char *const SLOTS[] = {"topic", "queue_id", "queue_offset", "size", "tags_code", "store_ts",
                                    "sys_flag", "inner_num", "keys", "uniq", "file", "pos"};
enum { S_TOPIC, S_QID, S_QOFF, S_SIZE, S_TAGS, S_TS, S_FLAG, S_INNER, S_KEYS, S_UNIQ, S_FILE, S_POS, NSLOTS };

typedef struct {
    PyObject_HEAD
    PyTypeObject *rtype;
    Py_ssize_t offs[NSLOTS];
    vrow *rows;
    Py_ssize_t n, cap, cursor;
    int64_t max_phys;    /* the highest offset of a row: a walk's next record is past it, and new */
    int sorted;          /* rows in increasing phys (the usual case): found by a search from the cursor */
    int32_t *table;      /* else open addressing over phys: row index + 1, 0 empty (built when needed) */
    Py_ssize_t tsize;    /* a power of two, at least twice n; 0 while sorted */
    int32_t *hashes;
    Py_ssize_t nh, hcap;
    vseg *segs;
    Py_ssize_t nseg, segcap;
    PyObject *topics;    /* list: id -> str */
    PyObject *topic_ids; /* dict: str -> id */
    PyObject *py_rows;   /* dict: row index -> _Record */
    rs_rec *scratch;     /* walk's records before they become rows (kept: a fresh one each call faults in) */
    Py_ssize_t scratch_cap;
} VRecords;

/* ------------------------------------------------------------------ the table */
static inline Py_ssize_t slot_of(const VRecords *t, int64_t phys) {
    return (Py_ssize_t)(((uint64_t)phys * 0x9E3779B97F4A7C15ull) >> 20) & (t->tsize - 1);
}

/* Sorted rows: the row of phys or -1, galloping from the cursor (units and index entries mostly come in
 * record order, a queue's units a few records apart) and then a binary search in the range found. */
static Py_ssize_t find_sorted(VRecords *t, int64_t phys) {
    const vrow *rows = t->rows;
    Py_ssize_t n = t->n, lo, hi;   /* the answer, if any, is in [lo, hi) */
    Py_ssize_t c = t->cursor < n ? t->cursor : 0;
    if (n == 0)
        return -1;
    if (rows[c].phys == phys)
        return c;
    if (rows[c].phys < phys) {
        Py_ssize_t step = 1;
        lo = c + 1;
        while (lo + step - 1 < n && rows[lo + step - 1].phys < phys) {
            lo += step;
            step *= 2;
        }
        hi = lo + step < n ? lo + step : n;
    } else {
        lo = 0;
        hi = c;
    }
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (rows[mid].phys < phys)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < n && rows[lo].phys == phys) {
        t->cursor = lo;
        return lo;
    }
    return -1;
}

/* The row of phys or -1. No GIL needed once the hash table exists (build_table, under the GIL). */
static Py_ssize_t find(VRecords *t, int64_t phys) {
    if (t->sorted)
        return find_sorted(t, phys);
    if (t->rows[t->cursor].phys == phys)
        return t->cursor;
    for (Py_ssize_t s = slot_of(t, phys);; s = (s + 1) & (t->tsize - 1)) {
        int32_t v = t->table[s];
        if (v == 0)
            return -1;
        if (t->rows[v - 1].phys == phys) {
            t->cursor = v - 1;
            return v - 1;
        }
    }
}

static int grow_table(VRecords *t, Py_ssize_t want) {
    if (t->sorted)
        return 0;
    Py_ssize_t size = t->tsize ? t->tsize : 1024;
    while (size < 2 * want)
        size *= 2;
    if (size == t->tsize)
        return 0;
    int32_t *table = PyMem_RawCalloc((size_t)size, sizeof(int32_t));
    if (table == NULL)
        return -1;
    PyMem_RawFree(t->table);
    t->table = table;
    t->tsize = size;
    for (Py_ssize_t r = 0; r < t->n; r++) {
        Py_ssize_t s = slot_of(t, t->rows[r].phys);
        while (table[s])
            s = (s + 1) & (size - 1);
        table[s] = (int32_t)(r + 1);
    }
    return 0;
}

/* Room for `more` new rows (GIL held: it may fail with MemoryError). */
static int reserve(VRecords *t, Py_ssize_t more) {
    if (t->n + more > INT32_MAX - 1) {
        PyErr_SetString(PyExc_OverflowError, "VerifyRecords: too many records");
        return -1;
    }
    if (t->n + more > t->cap) {
        Py_ssize_t cap = t->cap ? t->cap : 4096;
        while (cap < t->n + more)
            cap *= 2;
        vrow *rows = PyMem_RawRealloc(t->rows, sizeof(vrow) * (size_t)cap);
        if (rows == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        t->rows = rows;
        t->cap = cap;
    }
    if (!t->sorted && 2 * (t->n + more) > t->tsize && grow_table(t, t->n + more) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* The row for phys: the existing one (a dict's replace) or a new one (room reserved); -1: MemoryError. */
static Py_ssize_t row_for(VRecords *t, int64_t phys, int *is_new) {
    Py_ssize_t r = t->n > 0 && phys <= t->max_phys ? find(t, phys) : -1;
    *is_new = r < 0;
    if (r >= 0)
        return r;
    r = t->n;
    if (t->sorted && r > 0 && phys < t->max_phys) {   /* out of order from now on: the hash table */
        t->sorted = 0;
        if (grow_table(t, t->cap) < 0) {   /* room for every reserved row */
            t->sorted = 1;
            PyErr_NoMemory();
            return -1;
        }
    }
    t->n++;
    if (!t->sorted) {
        Py_ssize_t s = slot_of(t, phys);
        while (t->table[s])
            s = (s + 1) & (t->tsize - 1);
        t->table[s] = (int32_t)(r + 1);
    }
    t->rows[r].phys = phys;
    t->rows[r].covered = 0;
    if (r == 0 || phys > t->max_phys)
        t->max_phys = phys;
    return r;
}

static int push_hash(VRecords *t, int32_t h) {
    if (t->nh == t->hcap) {
        Py_ssize_t cap = t->hcap ? 2 * t->hcap : 16384;
        int32_t *a = PyMem_RawRealloc(t->hashes, sizeof(int32_t) * (size_t)cap);
        if (a == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        t->hashes = a;
        t->hcap = cap;
    }
    t->hashes[t->nh++] = h;
    return 0;
}

/* ------------------------------------------------------------------ topics and hashes */
static int topic_id(VRecords *t, PyObject *topic, int32_t *id) {
    PyObject *v = PyDict_GetItemWithError(t->topic_ids, topic);
    if (v != NULL) {
        *id = (int32_t)PyLong_AsLong(v);
        return 0;
    }
    if (PyErr_Occurred())
        return -1;
    Py_ssize_t n = PyList_GET_SIZE(t->topics);
    PyObject *nid = PyLong_FromSsize_t(n);
    int rc = nid == NULL || PyDict_SetItem(t->topic_ids, topic, nid) < 0 || PyList_Append(t->topics, topic) < 0;
    Py_XDECREF(nid);
    *id = (int32_t)n;
    return rc ? -1 : 0;
}

/* Java's String.hashCode continued over s[from:to] (UTF-16 units: a code point past U+FFFF is a pair). */
static uint32_t hash_str(uint32_t h, PyObject *s, Py_ssize_t from, Py_ssize_t to) {
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    for (Py_ssize_t i = from; i < to; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c > 0xFFFF) {
            c -= 0x10000;
            h = 31u * h + (0xD800u + (c >> 10));
            h = 31u * h + (0xDC00u + (c & 0x3FF));
        } else {
            h = 31u * h + c;
        }
    }
    return h;
}

/* ASCII bytes are their own UTF-16 units */
static uint32_t hash_ascii(uint32_t h, const unsigned char *p, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        h = 31u * h + p[i];
    return h;
}

static int is_ascii(const unsigned char *p, Py_ssize_t n) {
    unsigned char o = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        o |= p[i];
    return o < 0x80;
}

/* IndexFile's key hash (index_key_hash): |hashCode|, 0 for Integer.MIN_VALUE */
static int32_t index_hash(uint32_t h) {
    int32_t v = (int32_t)h;
    return v == INT32_MIN ? 0 : (v < 0 ? -v : v);
}

/* The index hashes of topic#UNIQ_KEY and topic#token of KEYS (split on " ", empty tokens skipped), as
 * verify.Verifier.check_index computes them, from str objects (uniq may be None). */
static int hashes_of_strs(VRecords *t, PyObject *topic, PyObject *keys, PyObject *uniq, vrow *row) {
    row->hoff = (uint32_t)t->nh;
    uint32_t prefix = 31u * hash_str(0, topic, 0, PyUnicode_GET_LENGTH(topic)) + '#';
    if (uniq != Py_None && push_hash(t, index_hash(hash_str(prefix, uniq, 0, PyUnicode_GET_LENGTH(uniq)))) < 0)
        return -1;
    int kind = PyUnicode_KIND(keys);
    const void *data = PyUnicode_DATA(keys);
    Py_ssize_t n = PyUnicode_GET_LENGTH(keys), start = 0;
    for (Py_ssize_t i = 0; i <= n; i++)
        if (i == n || PyUnicode_READ(kind, data, i) == ' ') {
            if (i > start && push_hash(t, index_hash(hash_str(prefix, keys, start, i))) < 0)
                return -1;
            start = i + 1;
        }
    row->hn = (uint32_t)(t->nh - row->hoff);
    return 0;
}

static int hashes_of_ascii(VRecords *t, const unsigned char *topic, Py_ssize_t tlen, const unsigned char *keys,
                           Py_ssize_t klen, const unsigned char *uniq, Py_ssize_t ulen, vrow *row) {
    row->hoff = (uint32_t)t->nh;
    uint32_t prefix = 31u * hash_ascii(0, topic, tlen) + '#';
    if (uniq != NULL && push_hash(t, index_hash(hash_ascii(prefix, uniq, ulen))) < 0)
        return -1;
    Py_ssize_t start = 0;
    for (Py_ssize_t i = 0; i <= klen; i++)
        if (i == klen || keys[i] == ' ') {
            if (i > start && push_hash(t, index_hash(hash_ascii(prefix, keys + start, i - start))) < 0)
                return -1;
            start = i + 1;
        }
    row->hn = (uint32_t)(t->nh - row->hoff);
    return 0;
}

static PyObject *decode(const unsigned char *p, Py_ssize_t n) {
    return PyUnicode_DecodeUTF8((const char *)p, n, "replace");
}

/* ------------------------------------------------------------------ the walk */
/* verify._check_record reports nothing for the record (bounds, body CRC done by the caller)? The careful
 * path takes an inner batch, INNER_NUM, a PHYSICALOFFSET that is not where the record sits, a missing
 * wanted CRC property and a CRC property that is not ASCII digits of a non-negative int. */
static int verify_ok(const unsigned char *b, const rs_rec *r, int64_t base, int crc_wanted) {
    if (r->phys != base + r->pos)
        return 0;
    const rs_props *pr = &r->props;
    if (pr->pos[P_INNER_NUM] >= 0)
        return 0;
    Py_ssize_t cp = pr->pos[P_CRC32];
    if (cp < 0)
        return !crc_wanted;
    /* parse_crc32_digits: least-significant digit first, no validation, Java int wrap; non-ASCII text is
     * left to the Python check (it reads code points) */
    const unsigned char *d = b + r->props_pos + cp;
    uint32_t expected = 0;
    for (Py_ssize_t i = pr->len[P_CRC32] - 1; i >= 0; i--) {
        if (d[i] >= 0x80)
            return 0;
        expected = expected * 10u + (uint32_t)((int)d[i] - 48);
    }
    if (expected & 0x80000000u)
        return 0;    /* negative: never a CRC */
    /* the CRC of the record before its __CRC32# item, the record's last */
    return (rs_crc32(b + r->pos, r->size - CRC32_PROPERTY_LEN) & 0x7FFFFFFFu) == expected;
}

static Py_ssize_t walk_verify(const unsigned char *b, Py_ssize_t pos, Py_ssize_t limit, Py_ssize_t max_records,
                              int64_t base, int crc_wanted, rs_rec *recs) {
    Py_ssize_t n = 0, p = pos;
    while (n < max_records) {
        rs_rec *r = &recs[n];
        int32_t crc;
        Py_ssize_t bpos, blen;
        if (!rs_walk_one(b, p, limit, r, &crc, &bpos, &blen))
            break;
        if (blen > 0 && (int64_t)(rs_crc32(b + bpos, blen) & 0x7FFFFFFFu) != (int64_t)crc)
            break;
        rs_props_find(b + r->props_pos, r->props_len, &r->props);
        if (!verify_ok(b, r, base, crc_wanted))
            break;
        n++;
        p += r->size;
    }
    return n;
}

/* The segment buf is walked in (the last one, or a new entry holding a buffer of it). */
static Py_ssize_t segment(VRecords *t, PyObject *buf, PyObject *rel) {
    if (t->nseg > 0 && t->segs[t->nseg - 1].obj == buf)
        return t->nseg - 1;
    if (t->nseg == t->segcap) {
        Py_ssize_t cap = t->segcap ? 2 * t->segcap : 16;
        vseg *a = PyMem_Realloc(t->segs, sizeof(vseg) * (size_t)cap);
        if (a == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        t->segs = a;
        t->segcap = cap;
    }
    vseg *s = &t->segs[t->nseg];
    if (PyObject_GetBuffer(buf, &s->view, PyBUF_SIMPLE) < 0)
        return -1;
    Py_INCREF(buf);
    Py_INCREF(rel);
    s->obj = buf;
    s->rel = rel;
    return t->nseg++;
}

/* A walked record's topic id, tagsCode and key hashes into row (GIL held). 1: delay_code refused it with a
 * ValueError (the run ends before it), 0 done, -1 error. */
static int fill_row(VRecords *t, const unsigned char *b, const rs_rec *r, PyObject *delay_code, vrow *row,
                    const unsigned char **memo_topic, Py_ssize_t *memo_tlen, int32_t *memo_id,
                    const unsigned char **memo_tags, Py_ssize_t *memo_taglen, int64_t *memo_code) {
    const unsigned char *props = b + r->props_pos, *tp = b + r->topic_pos;
    Py_ssize_t tlen = r->topic_len;
    PyObject *topic = NULL;
    if (*memo_topic != NULL && *memo_tlen == tlen && memcmp(*memo_topic, tp, (size_t)tlen) == 0) {
        row->topic = *memo_id;
    } else {
        if ((topic = rs_cached_str(tp, tlen)) == NULL || topic_id(t, topic, &row->topic) < 0)
            goto fail;
        *memo_topic = tp;
        *memo_tlen = tlen;
        *memo_id = row->topic;
    }
    int64_t code = 0;
    Py_ssize_t gp = r->props.pos[P_TAGS], gl = r->props.len[P_TAGS];
    if (gp >= 0) {
        const unsigned char *g = props + gp;
        if (*memo_tags != NULL && *memo_taglen == gl && memcmp(*memo_tags, g, (size_t)gl) == 0) {
            code = *memo_code;
        } else {
            if (is_ascii(g, gl)) {
                code = (int32_t)hash_ascii(0, g, gl);
            } else {
                PyObject *s = decode(g, gl);
                if (s == NULL)
                    goto fail;
                code = rs_java_hash_str(s);
                Py_DECREF(s);
            }
            *memo_tags = g;
            *memo_taglen = gl;
            *memo_code = code;
        }
    }
    if (r->props.pos[P_DELAY] >= 0 && tlen == (Py_ssize_t)sizeof(SCHEDULE) - 1
            && memcmp(tp, SCHEDULE, sizeof(SCHEDULE) - 1) == 0) {
        PyObject *raw = PyBytes_FromStringAndSize((const char *)props, r->props_len), *c = NULL;
        if (raw != NULL && (topic != NULL || (topic = rs_cached_str(tp, tlen)) != NULL))
            c = PyObject_CallFunction(delay_code, "OOLi", topic, raw, (long long)r->store_ts, (int)r->flags);
        Py_XDECREF(raw);
        if (c == NULL) {
            if (PyErr_ExceptionMatches(PyExc_ValueError)) {
                PyErr_Clear();
                Py_XDECREF(topic);
                return 1;
            }
            goto fail;
        }
        code = PyLong_AsLongLong(c);
        Py_DECREF(c);
        if (code == -1 && PyErr_Occurred())
            goto fail;
    }
    row->tags = code;
    row->tags_none = 0;
    Py_ssize_t kp = r->props.pos[P_KEYS], kl = r->props.len[P_KEYS];
    Py_ssize_t up = r->props.pos[P_UNIQ], ul = r->props.len[P_UNIQ];
    const unsigned char *keys = kp >= 0 ? props + kp : props, *uniq = up >= 0 ? props + up : NULL;
    if (kp < 0)
        kl = 0;
    if (is_ascii(tp, tlen) && is_ascii(keys, kl) && (uniq == NULL || is_ascii(uniq, ul))) {
        if (hashes_of_ascii(t, tp, tlen, keys, kl, uniq, ul, row) < 0)
            goto fail;
    } else {
        /* UTF-8 decoded with "replace", hashed over UTF-16 units: through str objects */
        PyObject *ks = decode(keys, kl), *us = uniq ? decode(uniq, ul) : Py_NewRef(Py_None);
        if (topic == NULL)
            topic = rs_cached_str(tp, tlen);
        int rc = topic == NULL || ks == NULL || us == NULL || hashes_of_strs(t, topic, ks, us, row) < 0;
        Py_XDECREF(ks);
        Py_XDECREF(us);
        if (rc)
            goto fail;
    }
    Py_XDECREF(topic);
    return 0;
fail:
    Py_XDECREF(topic);
    return -1;
}

/* walk(buf, pos, limit, max_records, base, crc_wanted, delay_code, file) -> (records taken, position after)
 * The records verify finds nothing wrong with (verify.Verifier._check_record reports no problem) from pos
 * on, each a row; stops before the first record that has anything to report or needs a closer look. */
static PyObject *vr_walk(VRecords *t, PyObject *args) {
    PyObject *buf, *delay_code, *rel;
    Py_ssize_t pos, limit, max_records;
    long long base;
    int crc_wanted;
    if (!PyArg_ParseTuple(args, "OnnnLpOU:walk", &buf, &pos, &limit, &max_records, &base, &crc_wanted,
                          &delay_code, &rel))
        return NULL;
    Py_ssize_t seg = segment(t, buf, rel);
    if (seg < 0)
        return NULL;
    const Py_buffer *view = &t->segs[seg].view;
    if (limit > view->len)
        limit = view->len;
    if (pos < 0 || max_records < 0) {
        PyErr_SetString(PyExc_ValueError, "walk: negative position or count");
        return NULL;
    }
    Py_ssize_t cap = limit > pos ? (limit - pos) / REC_MIN_SIZE + 1 : 1;   /* bounded by the bytes */
    if (cap > max_records)
        cap = max_records;
    if (cap < 1)
        cap = 1;
    if (cap > t->scratch_cap) {
        rs_rec *a = PyMem_RawRealloc(t->scratch, sizeof(rs_rec) * (size_t)cap);
        if (a == NULL)
            return PyErr_NoMemory();
        t->scratch = a;
        t->scratch_cap = cap;
    }
    rs_rec *recs = t->scratch;
    const unsigned char *b = view->buf;
    Py_ssize_t n;
    Py_BEGIN_ALLOW_THREADS
    n = walk_verify(b, pos, limit, cap, (int64_t)base, crc_wanted, recs);
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (reserve(t, n) < 0)
        goto out;
    const unsigned char *mt = NULL, *mg = NULL;
    Py_ssize_t mtl = 0, mgl = 0;
    int32_t mid = 0;
    int64_t mcode = 0;
    Py_ssize_t done = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        const rs_rec *r = &recs[i];
        vrow tmp;
        int rc = fill_row(t, b, r, delay_code, &tmp, &mt, &mtl, &mid, &mg, &mgl, &mcode);
        if (rc < 0)
            goto out;
        if (rc > 0) {
            done = i;
            break;
        }
        int is_new;
        Py_ssize_t k = row_for(t, r->phys, &is_new);
        if (k < 0)
            goto out;
        vrow *row = &t->rows[k];
        if (!is_new && row->seg < 0) {   /* a row from Python replaced */
            PyObject *key = PyLong_FromSsize_t(k);
            if (key == NULL || PyDict_DelItem(t->py_rows, key) < 0) {
                Py_XDECREF(key);
                goto out;
            }
            Py_DECREF(key);
        }
        row->qoff = r->qoff;
        row->tags = tmp.tags;
        row->tags_none = 0;
        row->store_ts = r->store_ts;
        row->pos = r->pos;
        row->size = (int32_t)r->size;
        row->qid = r->qid;
        row->flags = r->flags;
        row->topic = tmp.topic;
        row->seg = (int32_t)seg;
        row->hoff = tmp.hoff;
        row->hn = tmp.hn;
    }
    result = Py_BuildValue("(nn)", done, done ? recs[done - 1].pos + recs[done - 1].size : pos);
out:
    return result;
}

/* ------------------------------------------------------------------ rows from Python */
static PyObject *slot(VRecords *t, PyObject *o, int k) {
    PyObject *v = *(PyObject **)((char *)o + t->offs[k]);
    if (v == NULL)
        PyErr_Format(PyExc_AttributeError, "_Record.%s is not set", SLOTS[k]);
    return v;
}

static int slot_ll(VRecords *t, PyObject *o, int k, long long *out) {
    PyObject *v = slot(t, o, k);
    if (v == NULL)
        return -1;
    *out = PyLong_AsLongLong(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* add(phys, record): records[phys] = record (a _Record verify's own check made) */
static PyObject *vr_add(VRecords *t, PyObject *args) {
    long long phys;
    PyObject *o;
    if (!PyArg_ParseTuple(args, "LO:add", &phys, &o))
        return NULL;
    if (Py_TYPE(o) != t->rtype)
        return PyErr_Format(PyExc_TypeError, "add: a %s is needed", t->rtype->tp_name);
    long long qid, qoff, size, ts, flags, tags = 0;
    PyObject *topic = slot(t, o, S_TOPIC), *keys = slot(t, o, S_KEYS), *uniq = slot(t, o, S_UNIQ);
    PyObject *tc = slot(t, o, S_TAGS);
    if (topic == NULL || keys == NULL || uniq == NULL || tc == NULL || slot_ll(t, o, S_QID, &qid) < 0
            || slot_ll(t, o, S_QOFF, &qoff) < 0 || slot_ll(t, o, S_SIZE, &size) < 0 || slot_ll(t, o, S_TS, &ts) < 0
            || slot_ll(t, o, S_FLAG, &flags) < 0 || (tc != Py_None && slot_ll(t, o, S_TAGS, &tags) < 0))
        return NULL;
    if (!PyUnicode_Check(topic) || !PyUnicode_Check(keys) || (uniq != Py_None && !PyUnicode_Check(uniq)))
        return PyErr_Format(PyExc_TypeError, "add: topic, keys and uniq must be str (uniq or None)");
    if (reserve(t, 1) < 0)
        return NULL;
    vrow tmp;
    if (topic_id(t, topic, &tmp.topic) < 0 || hashes_of_strs(t, topic, keys, uniq, &tmp) < 0)
        return NULL;
    int is_new;
    Py_ssize_t k = row_for(t, phys, &is_new);
    if (k < 0)
        return NULL;
    PyObject *key = PyLong_FromSsize_t(k);
    if (key == NULL || PyDict_SetItem(t->py_rows, key, o) < 0) {
        Py_XDECREF(key);
        return NULL;
    }
    Py_DECREF(key);
    vrow *row = &t->rows[k];
    row->qoff = qoff;
    row->tags = tags;
    row->tags_none = tc == Py_None;
    row->store_ts = ts;
    row->pos = -1;
    row->size = (int32_t)size;
    row->qid = (int32_t)qid;
    row->flags = (int32_t)flags;
    row->topic = tmp.topic;
    row->seg = -1;
    row->hoff = tmp.hoff;
    row->hn = tmp.hn;
    if ((long long)row->size != size || (long long)row->qid != qid || (long long)row->flags != flags)
        row->topic = -1;   /* out of the columns' range: no unit matches it in C, the Python check judges */
    Py_RETURN_NONE;
}

/* get(phys) -> the _Record at phys, or None */
static PyObject *vr_get(VRecords *t, PyObject *arg) {
    long long phys = PyLong_AsLongLong(arg);
    if (phys == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t k = find(t, phys);
    if (k < 0)
        Py_RETURN_NONE;
    const vrow *row = &t->rows[k];
    if (row->seg < 0) {
        PyObject *key = PyLong_FromSsize_t(k);
        if (key == NULL)
            return NULL;
        PyObject *o = PyDict_GetItemWithError(t->py_rows, key);
        Py_DECREF(key);
        if (o == NULL && !PyErr_Occurred())
            PyErr_SetString(PyExc_SystemError, "VerifyRecords: a Python row without its record");
        return Py_XNewRef(o);
    }
    const vseg *s = &t->segs[row->seg];
    const unsigned char *b = s->view.buf;
    rs_rec r;
    int32_t crc;
    Py_ssize_t bp, bl;
    if (!rs_walk_one(b, (Py_ssize_t)row->pos, s->view.len, &r, &crc, &bp, &bl)) {
        PyErr_SetString(PyExc_SystemError, "VerifyRecords: a walked record no longer reads");
        return NULL;
    }
    const unsigned char *props = b + r.props_pos;
    rs_props_find(props, r.props_len, &r.props);
    PyObject *keys = r.props.pos[P_KEYS] >= 0 ? decode(props + r.props.pos[P_KEYS], r.props.len[P_KEYS])
                                              : PyUnicode_New(0, 0);
    PyObject *uniq = r.props.pos[P_UNIQ] >= 0 ? decode(props + r.props.pos[P_UNIQ], r.props.len[P_UNIQ])
                                              : Py_NewRef(Py_None);
    PyObject *vals[NSLOTS] = {
        Py_XNewRef(PyList_GetItem(t->topics, row->topic)), PyLong_FromLong(row->qid),
        PyLong_FromLongLong(row->qoff), PyLong_FromLong(row->size), PyLong_FromLongLong(row->tags),
        PyLong_FromLongLong(row->store_ts), PyLong_FromLong(row->flags), Py_NewRef(Py_None), keys, uniq,
        Py_NewRef(s->rel), PyLong_FromLongLong(row->pos)};
    int bad = 0;
    for (int i = 0; i < NSLOTS; i++)
        bad |= vals[i] == NULL;
    if (bad) {
        for (int i = 0; i < NSLOTS; i++)
            Py_XDECREF(vals[i]);
        return NULL;
    }
    return rs_new_slotted(t->rtype, t->offs, vals, NSLOTS);
}

/* cover(phys): a queue unit points at the record at phys */
static PyObject *vr_cover(VRecords *t, PyObject *arg) {
    long long phys = PyLong_AsLongLong(arg);
    if (phys == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t k = find(t, phys);
    if (k < 0) {
        PyErr_SetObject(PyExc_KeyError, arg);
        return NULL;
    }
    t->rows[k].covered = 1;
    Py_RETURN_NONE;
}

/* uncovered() -> (frontier, lag, offsets): the dispatched frontier (the highest covered offset, -1 if none);
 * of the records that get a queue unit (gets_queue_unit) and have none, how many lie after it and the offsets
 * of the others, in record order */
static PyObject *vr_uncovered(VRecords *t, PyObject *unused) {
    int64_t frontier = -1;
    for (Py_ssize_t k = 0; k < t->n; k++)
        if (t->rows[k].covered && t->rows[k].phys > frontier)
            frontier = t->rows[k].phys;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    Py_ssize_t lag = 0;
    for (Py_ssize_t k = 0; k < t->n; k++) {
        const vrow *row = &t->rows[k];
        if (row->covered || !rec_gets_queue_unit(row->flags))
            continue;
        if (row->phys > frontier) {
            lag++;
            continue;
        }
        PyObject *p = PyLong_FromLongLong(row->phys);
        if (p == NULL || PyList_Append(out, p) < 0) {
            Py_XDECREF(p);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(p);
    }
    return Py_BuildValue("(LnN)", (long long)frontier, lag, out);
}

/* offsets() -> the offsets of the records, in record order */
static PyObject *vr_offsets(VRecords *t, PyObject *unused) {
    PyObject *out = PyList_New(t->n);
    for (Py_ssize_t k = 0; out != NULL && k < t->n; k++) {
        PyObject *p = PyLong_FromLongLong(t->rows[k].phys);
        if (p == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, k, p);
    }
    return out;
}

/* ------------------------------------------------------------------ units and index entries */
/* units(units, first_offset, topic, queue_id, min_offset, ext_max) -> units taken
 * The ConsumeQueue units verify.Verifier.check_consume_queues finds nothing to say about: written, not a
 * pre-blank, not an ext address, pointing at a record (not expired) of the unit's size, topic, queue, queue
 * offset and tagsCode. Each one's record is covered; stops before the first other unit. */
static PyObject *vr_units(VRecords *t, PyObject *args) {
    Py_buffer units;
    long long first, qid, min_offset, ext_max;
    PyObject *topic;
    if (!PyArg_ParseTuple(args, "y*LULLL:units", &units, &first, &topic, &qid, &min_offset, &ext_max))
        return NULL;
    PyObject *v = PyDict_GetItemWithError(t->topic_ids, topic);
    if (v == NULL && PyErr_Occurred()) {
        PyBuffer_Release(&units);
        return NULL;
    }
    int32_t tid = v == NULL ? -2 : (int32_t)PyLong_AsLong(v);
    const unsigned char *u = units.buf;
    Py_ssize_t n = units.len / CQ_UNIT, k = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; k < n; k++) {
        const unsigned char *e = u + CQ_UNIT * k;
        int64_t phys = rs_be64(e + CQ_PHYS), tags = rs_be64(e + CQ_TAGS);
        int32_t size = rs_be32(e + CQ_SIZE);
        if (phys < 0 || size <= 0 || (size == 0x7FFFFFFF && phys == 0) || phys < min_offset || tags <= ext_max)
            break;
        Py_ssize_t r = find(t, phys);
        if (r < 0)
            break;
        vrow *row = &t->rows[r];
        if (row->size != size || row->qid != qid || row->qoff != first + k || row->topic != tid
                || (!row->tags_none && row->tags != tags))
            break;
        row->covered = 1;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&units);
    return PyLong_FromSsize_t(k);
}

/* index(buf, slots, e_from, count, min_offset) -> (entries taken, expired)
 * The index entries from e_from on (below count) verify.Verifier.check_index finds nothing to say about: a
 * prevIndexNo naming an earlier entry, and an expired offset or one of a record whose keys hash to the
 * entry's hash. Stops before the first other entry. */
static PyObject *vr_index(VRecords *t, PyObject *args) {
    Py_buffer view;
    Py_ssize_t slots, e_from, count;
    long long min_offset;
    if (!PyArg_ParseTuple(args, "y*nnnL:index", &view, &slots, &e_from, &count, &min_offset))
        return NULL;
    if (slots < 0 || e_from < 1) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "index: bad slot count or entry");
        return NULL;
    }
    const unsigned char *b = view.buf;
    Py_ssize_t base = IDX_ENTRIES(slots), e = e_from, expired = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; e < count; e++) {
        Py_ssize_t at = base + e * IDX_ENTRY;
        if (at + IDX_ENTRY > view.len)
            break;
        int32_t key_hash = rs_be32(b + at + IDX_E_HASH), prev = rs_be32(b + at + IDX_E_PREV);
        int64_t phys = rs_be64(b + at + IDX_E_PHY);
        if (prev < 0 || prev >= e)
            break;
        if (phys < min_offset) {
            expired++;
            continue;
        }
        Py_ssize_t r = find(t, phys);
        if (r < 0)
            break;
        const vrow *row = &t->rows[r];
        const int32_t *h = t->hashes + row->hoff;
        uint32_t i = 0;
        while (i < row->hn && h[i] != key_hash)
            i++;
        if (i == row->hn)
            break;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return Py_BuildValue("(nn)", e - e_from, expired);
}

/* ------------------------------------------------------------------ the type */
static void release(VRecords *t) {
    for (Py_ssize_t i = 0; i < t->nseg; i++) {
        PyBuffer_Release(&t->segs[i].view);
        Py_DECREF(t->segs[i].obj);
        Py_DECREF(t->segs[i].rel);
    }
    PyMem_Free(t->segs);
    PyMem_RawFree(t->rows);
    PyMem_RawFree(t->table);
    PyMem_RawFree(t->hashes);
    PyMem_RawFree(t->scratch);
    t->scratch = NULL;
    t->scratch_cap = 0;
    t->segs = NULL;
    t->rows = NULL;
    t->table = NULL;
    t->hashes = NULL;
    t->nseg = t->segcap = t->n = t->cap = t->tsize = t->nh = t->hcap = t->cursor = 0;
    t->sorted = 1;
    if (t->py_rows)
        PyDict_Clear(t->py_rows);
}

static PyObject *vr_clear(VRecords *t, PyObject *unused) {
    release(t);
    Py_RETURN_NONE;
}

static Py_ssize_t vr_len(VRecords *t) { return t->n; }

static int vr_init(VRecords *t, PyObject *args, PyObject *kw) {
    PyObject *rtype;
    if (!PyArg_ParseTuple(args, "O:VerifyRecords", &rtype) || rs_slot_offsets(rtype, SLOTS, NSLOTS, t->offs) < 0)
        return -1;
    release(t);
    Py_XSETREF(t->rtype, (PyTypeObject *)Py_NewRef(rtype));
    if (t->topics == NULL && (t->topics = PyList_New(0)) == NULL)
        return -1;
    if (t->topic_ids == NULL && (t->topic_ids = PyDict_New()) == NULL)
        return -1;
    if (t->py_rows == NULL && (t->py_rows = PyDict_New()) == NULL)
        return -1;
    return 0;
}

static void vr_dealloc(VRecords *t) {
    release(t);
    Py_XDECREF(t->rtype);
    Py_XDECREF(t->topics);
    Py_XDECREF(t->topic_ids);
    Py_XDECREF(t->py_rows);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static PyMethodDef vr_methods[] = {
    {"walk", (PyCFunction)vr_walk, METH_VARARGS, "Take the records with nothing to report (see verify.c)."},
    {"add", (PyCFunction)vr_add, METH_VARARGS, "records[phys] = a _Record verify's own check made."},
    {"get", (PyCFunction)vr_get, METH_O, "The _Record at phys, or None."},
    {"offsets", (PyCFunction)vr_offsets, METH_NOARGS, "The offsets of the records, in record order."},
    {"cover", (PyCFunction)vr_cover, METH_O, "A queue unit points at the record at phys."},
    {"uncovered", (PyCFunction)vr_uncovered, METH_NOARGS, "(frontier, lag, offsets) of records without a queue unit."},
    {"units", (PyCFunction)vr_units, METH_VARARGS, "Take the ConsumeQueue units with nothing to report."},
    {"index", (PyCFunction)vr_index, METH_VARARGS, "Take the index entries with nothing to report."},
    {"clear", (PyCFunction)vr_clear, METH_NOARGS, "Forget every record (and release the segments' buffers)."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods vr_seq = {.sq_length = (lenfunc)vr_len};

static PyTypeObject VRecordsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rocketstore._native.VerifyRecords",
    .tp_basicsize = sizeof(VRecords),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "verify's records by physical offset (verify._Records is the pure reference).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)vr_init,
    .tp_dealloc = (destructor)vr_dealloc,
    .tp_methods = vr_methods,
    .tp_as_sequence = &vr_seq,
};

int rs_verify_init(PyObject *m) {
    if (PyType_Ready(&VRecordsType) < 0)
        return -1;
    Py_INCREF(&VRecordsType);
    if (PyModule_AddObject(m, "VerifyRecords", (PyObject *)&VRecordsType) < 0) {
        Py_DECREF(&VRecordsType);
        return -1;
    }
    return 0;
}
