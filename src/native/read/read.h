/* The read path (read/): one record into a StoredMessage (message.c), a get (get.c), a query (query.c), a
 * queue's offset by time (by_time.c), over the files of a MappedFileQueue (mapped.c). GIL held. */
#ifndef ROCKETSTORE_READ_READ_H
#define ROCKETSTORE_READ_READ_H
#include "native.h"
#include "formats/record.h"

/* ---------------------------------------------------------------- message.c */
/* set_message_type's class (StoredMessage), NULL before; the offsets of its slots an eager decode fills */
#define NMSG 5   /* _f, body, topic, _props_raw, _props; the sixth, _r, is a lazy message's record */
#define MSG_TOPIC 2
extern PyTypeObject *rs_message_type;
extern Py_ssize_t rs_msg_offsets[NMSG];
/* The checks of formats.record.decode_record_py on the record at buf[pos:end] (end bounded by buflen too):
 * 0 and *ri filled, or -1 with the same CorruptDataError. */
int rs_check_record(const unsigned char *buf, Py_ssize_t buflen, Py_ssize_t pos, Py_ssize_t end, rs_record *ri);
/* A StoredMessage of the record at buf[pos:end] (rs_check_record's errors), with or without its body. */
PyObject *rs_decode_buffer(const unsigned char *buf, Py_ssize_t buflen, Py_ssize_t pos, Py_ssize_t end,
                           int with_body);
/* A lazy StoredMessage: a copy of a record rs_check_record accepted, decoded on first use. */
PyObject *rs_lazy_message(const unsigned char *rec, Py_ssize_t size);

/* ---------------------------------------------------------------- mapped.c */
/* One mapped file of a MappedFileQueue's list, as files.find(offset) finds it: its start, read position and
 * a held view of its buffer. */
typedef struct {
    long long from, readpos;
    Py_buffer view;
    int held;
} rs_mapped;

extern PyObject *rs_S_from, *rs_S_buf;   /* "file_from_offset", "buf" */
/* an int attribute: 0, or -1 with an error */
int rs_attr_ll(PyObject *o, PyObject *name, long long *v);
/* MappedFile.read_position */
int rs_read_position(PyObject *mf, long long *v);
void rs_mapped_release(rs_mapped *m);
/* 1: found (m filled, its buffer held), 0: no file holds `offset` (or it has no buffer), -1: error */
int rs_find_mapped(PyObject *files, long long file_size, long long offset, rs_mapped *m);

/* ---------------------------------------------------------------- the method tables, the interned names */
extern PyMethodDef rs_message_methods[], rs_get_methods[], rs_query_methods[], rs_by_time_methods[];
int rs_message_init(void);
int rs_mapped_init(void);
int rs_query_init(void);

#endif
