/*
 * A small reader of the protobuf wire format (private), shared by the ONNX
 * importer (lib/import/onnx.c) and the tensor files (lib/import/tensorfile.c).
 *
 * Nothing here allocates or copies: a field of wire type LEN comes back as a
 * pointer into the caller's buffer.  Every length is checked against the
 * bytes that remain in the enclosing message; groups (wire types 3 and 4),
 * unknown wire types, field number 0, varints longer than 10 bytes and
 * lengths past the end are errors, reported through sn_error() with a short
 * reason that callers prefix with what they were parsing.
 *
 * The second half decodes a TensorProto (ONNX's tensor message) into its
 * parts, checking its shape and that its data has exactly the bytes the
 * shape asks for; lib/import/onnx.c then references raw_data in place and
 * lib/import/tensorfile.c copies it out.
 */
#ifndef SN_PBWIRE_H
#define SN_PBWIRE_H

#include <stddef.h>
#include <stdint.h>

#include "ir/graph.h"
#include "shardnet.h"

/* Wire types. */
enum {
    SN_PB_VARINT = 0,
    SN_PB_I64 = 1,
    SN_PB_LEN = 2,
    SN_PB_I32 = 5
};

/* A cursor over one message: the bytes [p, end). */
typedef struct sn_pb {
    const uint8_t *p;
    const uint8_t *end;
} sn_pb;

/* One field as read from the wire. */
typedef struct sn_pb_field {
    uint32_t num;        /* field number, >= 1 */
    unsigned wire;       /* SN_PB_* */
    uint64_t u;          /* VARINT, I64, I32: the value's bits */
    const uint8_t *data; /* LEN: the payload, inside the message */
    size_t len;          /* LEN: payload bytes */
} sn_pb_field;

void sn_pb_init(sn_pb *r, const void *data, size_t len);

/*
 * Read the next field.  Returns 1 and fills *f, 0 at the end of the
 * message, or -1 on malformed input (error set).
 */
int sn_pb_next(sn_pb *r, sn_pb_field *f);

/* Decode one varint from [*p, end), advancing *p; 0 on success, -1 (error
 * set) when it is truncated or longer than 10 bytes. */
int sn_pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *v);

/*
 * A repeated scalar field may arrive unpacked (one field per value, wire
 * type `elem_wire`) or packed (one LEN field holding the values back to
 * back).  The iterator walks the values of one such field occurrence.
 */
typedef struct sn_pb_rep {
    const uint8_t *p, *end; /* packed payload left */
    unsigned elem_wire;
    int single;             /* unpacked: one value in `value` */
    uint64_t value;
} sn_pb_rep;

/* Start on field f whose values have wire type elem_wire (VARINT, I32 or
 * I64).  Returns 0, or -1 (error set) when f has another wire type or a
 * packed payload is not a whole number of values. */
int sn_pb_rep_begin(sn_pb_rep *it, const sn_pb_field *f, unsigned elem_wire);
/* 1 and *v set, 0 at the end, -1 on a malformed varint (error set). */
int sn_pb_rep_next(sn_pb_rep *it, uint64_t *v);
/* Number of values in field f (checking every varint); -1 on error. */
int sn_pb_rep_count(const sn_pb_field *f, unsigned elem_wire, size_t *count);

/*
 * Error unless field f has wire type `wire`; `what` names the field in the
 * message ("field 3 (name) has wire type 0, expected 2").
 */
int sn_pb_expect(const sn_pb_field *f, unsigned wire, const char *what);

/*
 * Find the last well-formed LEN field number `num` of a message without
 * failing (used to name a message in an error about it).  Returns 1 and
 * sets *data and *dlen, or 0.
 */
int sn_pb_peek_len(const void *msg, size_t len, uint32_t num,
                   const uint8_t **data, size_t *dlen);

/*
 * Copy a string field into a NUL-terminated heap string.  Strings holding a
 * NUL byte or longer than max bytes are refused (error set, NULL returned;
 * NULL also when out of memory).
 */
char *sn_pb_strdup(const uint8_t *data, size_t len, size_t max,
                   const char *what);

/*
 * Copy up to cap-1 bytes of a string field into buf for an error message,
 * replacing non-printable bytes with '?'.  Returns buf.
 */
char *sn_pb_printable(char *buf, size_t cap, const uint8_t *data, size_t len);

/* TensorProto typed-data field numbers. */
enum {
    SN_TP_FLOAT_DATA = 4,
    SN_TP_INT32_DATA = 5,
    SN_TP_STRING_DATA = 6,
    SN_TP_INT64_DATA = 7,
    SN_TP_DOUBLE_DATA = 10,
    SN_TP_UINT64_DATA = 11
};

/* A TensorProto, decoded and checked but not copied. */
typedef struct sn_pb_tensor {
    const uint8_t *msg;   /* the message itself */
    size_t msg_len;
    const uint8_t *name;  /* name (8), not NUL-terminated; NULL if absent */
    size_t name_len;
    sn_dtype dtype;
    int rank;
    int64_t dims[SHARDNET_MAX_DIMS];
    uint64_t count;       /* elements: the product of dims (1 for rank 0) */
    size_t elem_size;     /* sn_dtype_size(dtype) */
    size_t nbytes;        /* count * elem_size */
    /* Exactly one of the three sources below holds the data, or none when
     * count is 0. */
    const uint8_t *raw;   /* raw_data (9), little-endian, unaligned */
    int has_raw;
    uint32_t typed_field; /* SN_TP_*, or 0: values spread over the message */
    int external;         /* data_location (14) == EXTERNAL */
    const uint8_t *location; /* external_data "location", "offset", "length" */
    size_t location_len;
    int has_location, has_offset, has_length;
    uint64_t offset, length;
} sn_pb_tensor;

/*
 * Decode and check a TensorProto: rank <= SHARDNET_MAX_DIMS, every dim >= 0, the
 * element count without overflow and <= SN_MAX_ELEMENTS, a numeric data
 * type, one data source, and exactly count elements of data (raw_data
 * bytes or typed values).  External data is checked only for the presence
 * of a location; the caller opens the file.  On error the message names the
 * tensor when it has a name.
 */
shardnet_status sn_pb_tensor_parse(const void *msg, size_t len,
                                   sn_pb_tensor *t);

/*
 * Convert the typed values of t (t->typed_field != 0) into `out`, which
 * holds t->nbytes bytes, as elements of t->dtype in C order.  Cannot fail
 * once sn_pb_tensor_parse() accepted t.
 */
void sn_pb_tensor_decode_typed(const sn_pb_tensor *t, void *out);

#endif /* SN_PBWIRE_H */
