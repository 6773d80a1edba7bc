/* Protobuf wire-format reader and TensorProto decoder; see pbwire.h. */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "import/pbwire.h"

void sn_pb_init(sn_pb *r, const void *data, size_t len)
{
    r->p = data;
    r->end = r->p ? r->p + len : NULL;
}

/* Why a read failed, without touching the error state (sn_pb_peek_len
 * must not disturb it). */
typedef enum {
    PB_OK,
    PB_TRUNC_VARINT,
    PB_LONG_VARINT,
    PB_OVERFLOW_VARINT,
    PB_FIELD_ZERO,
    PB_FIELD_HUGE,
    PB_TRUNC_FIXED,
    PB_PAST_END,
    PB_GROUP,
    PB_BAD_WIRE
} pb_why;

static pb_why varint(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
    const uint8_t *p = *pp;
    uint64_t x = 0;
    for (unsigned i = 0; i < 10; i++) {
        uint8_t b;
        if (p == end)
            return PB_TRUNC_VARINT;
        b = *p++;
        if (i == 9) {
            /* The tenth byte carries bit 63 only. */
            if (b & 0x80)
                return PB_LONG_VARINT;
            if (b > 1)
                return PB_OVERFLOW_VARINT;
        }
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = x;
            *pp = p;
            return PB_OK;
        }
    }
    return PB_LONG_VARINT; /* not reached */
}

static const char *why_str(pb_why w)
{
    switch (w) {
    case PB_OK: return "no error";
    case PB_TRUNC_VARINT: return "varint cut off by the end of the data";
    case PB_LONG_VARINT: return "varint longer than 10 bytes";
    case PB_OVERFLOW_VARINT: return "varint overflows 64 bits";
    case PB_FIELD_ZERO: return "field number 0";
    case PB_FIELD_HUGE: return "field number above 2^29-1";
    case PB_TRUNC_FIXED: return "fixed-size value cut off by the end of the data";
    case PB_PAST_END: return "length runs past the end of the message";
    case PB_GROUP: return "groups (wire types 3 and 4) are not supported";
    case PB_BAD_WIRE: return "invalid wire type";
    }
    return "malformed";
}

static uint64_t get_le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static unsigned fixed_size(unsigned wire)
{
    return wire == SN_PB_I32 ? 4 : wire == SN_PB_I64 ? 8 : 0;
}

static pb_why next_field(sn_pb *r, sn_pb_field *f)
{
    uint64_t tag, len;
    pb_why w;
    memset(f, 0, sizeof *f);
    if ((w = varint(&r->p, r->end, &tag)) != PB_OK)
        return w;
    f->wire = (unsigned)(tag & 7);
    if ((tag >> 3) == 0)
        return PB_FIELD_ZERO;
    if ((tag >> 3) > 0x1fffffffu)
        return PB_FIELD_HUGE;
    f->num = (uint32_t)(tag >> 3);
    switch (f->wire) {
    case SN_PB_VARINT:
        return varint(&r->p, r->end, &f->u);
    case SN_PB_I64:
    case SN_PB_I32: {
        unsigned size = fixed_size(f->wire);
        if ((size_t)(r->end - r->p) < size)
            return PB_TRUNC_FIXED;
        f->u = get_le(r->p, size);
        r->p += size;
        return PB_OK;
    }
    case SN_PB_LEN:
        if ((w = varint(&r->p, r->end, &len)) != PB_OK)
            return w;
        if (len > (uint64_t)(r->end - r->p))
            return PB_PAST_END;
        f->data = r->p;
        f->len = (size_t)len;
        r->p += len;
        return PB_OK;
    case 3:
    case 4:
        return PB_GROUP;
    default:
        return PB_BAD_WIRE;
    }
}

int sn_pb_next(sn_pb *r, sn_pb_field *f)
{
    pb_why w;
    if (r->p == r->end)
        return 0;
    w = next_field(r, f);
    if (w == PB_OK)
        return 1;
    r->p = r->end; /* a failed cursor stays at its end */
    if (f->num)
        sn_error(SHARDNET_INVALID_ARGUMENT,
                 "malformed protobuf: field %" PRIu32 " (wire type %u): %s",
                 f->num, f->wire, why_str(w));
    else
        sn_error(SHARDNET_INVALID_ARGUMENT, "malformed protobuf: %s",
                 why_str(w));
    return -1;
}

int sn_pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    pb_why w = varint(p, end, v);
    if (w == PB_OK)
        return 0;
    sn_error(SHARDNET_INVALID_ARGUMENT, "malformed protobuf: %s", why_str(w));
    return -1;
}

int sn_pb_rep_begin(sn_pb_rep *it, const sn_pb_field *f, unsigned elem_wire)
{
    memset(it, 0, sizeof *it);
    it->elem_wire = elem_wire;
    if (f->wire == elem_wire) {
        it->single = 1;
        it->value = f->u;
        return 0;
    }
    if (f->wire != SN_PB_LEN) {
        sn_error(SHARDNET_INVALID_ARGUMENT,
                 "malformed protobuf: repeated field %" PRIu32
                 " has wire type %u, expected %u or 2 (packed)",
                 f->num, f->wire, elem_wire);
        return -1;
    }
    if (fixed_size(elem_wire) && f->len % fixed_size(elem_wire)) {
        sn_error(SHARDNET_INVALID_ARGUMENT,
                 "malformed protobuf: packed field %" PRIu32
                 " holds %zu bytes, not a multiple of %u",
                 f->num, f->len, fixed_size(elem_wire));
        return -1;
    }
    it->p = f->data;
    it->end = f->data + f->len;
    return 0;
}

int sn_pb_rep_next(sn_pb_rep *it, uint64_t *v)
{
    unsigned n;
    if (it->single) {
        it->single = 0;
        *v = it->value;
        it->p = it->end = NULL;
        return 1;
    }
    if (it->p == it->end)
        return 0;
    n = fixed_size(it->elem_wire);
    if (n) {
        /* sn_pb_rep_begin checked that whole values remain. */
        *v = get_le(it->p, n);
        it->p += n;
        return 1;
    }
    if (sn_pb_varint(&it->p, it->end, v) < 0) {
        it->p = it->end;
        return -1;
    }
    return 1;
}

int sn_pb_rep_count(const sn_pb_field *f, unsigned elem_wire, size_t *count)
{
    sn_pb_rep it;
    uint64_t v;
    size_t n = 0;
    int rc;
    if (sn_pb_rep_begin(&it, f, elem_wire) < 0)
        return -1;
    if (!it.single && fixed_size(elem_wire)) {
        *count = f->len / fixed_size(elem_wire);
        return 0;
    }
    while ((rc = sn_pb_rep_next(&it, &v)) > 0)
        n++;
    if (rc < 0)
        return -1;
    *count = n;
    return 0;
}

int sn_pb_expect(const sn_pb_field *f, unsigned wire, const char *what)
{
    if (f->wire == wire)
        return 0;
    sn_error(SHARDNET_INVALID_ARGUMENT,
             "malformed protobuf: %s (field %" PRIu32
             ") has wire type %u, expected %u",
             what, f->num, f->wire, wire);
    return -1;
}

int sn_pb_peek_len(const void *msg, size_t len, uint32_t num,
                   const uint8_t **data, size_t *dlen)
{
    sn_pb r;
    sn_pb_field f;
    int found = 0;
    sn_pb_init(&r, msg, len);
    while (r.p != r.end && next_field(&r, &f) == PB_OK) {
        if (f.num == num && f.wire == SN_PB_LEN) {
            *data = f.data;
            *dlen = f.len;
            found = 1;
        }
    }
    return found;
}

char *sn_pb_strdup(const uint8_t *data, size_t len, size_t max,
                   const char *what)
{
    char *s;
    if (len > max) {
        sn_error(SHARDNET_INVALID_ARGUMENT,
                 "%s is %zu bytes long (limit %zu)", what, len, max);
        return NULL;
    }
    if (len && memchr(data, 0, len)) {
        sn_error(SHARDNET_INVALID_ARGUMENT, "%s contains a NUL byte", what);
        return NULL;
    }
    s = malloc(len + 1);
    if (!s) {
        sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory copying %s", what);
        return NULL;
    }
    if (len)
        memcpy(s, data, len);
    s[len] = '\0';
    return s;
}

char *sn_pb_printable(char *buf, size_t cap, const uint8_t *data, size_t len)
{
    size_t n = 0;
    if (!cap)
        return buf;
    for (; n < len && n + 1 < cap; n++)
        buf[n] = (data[n] >= 0x20 && data[n] < 0x7f) ? (char)data[n] : '?';
    buf[n] = '\0';
    /* Mark a cut-off name so that it is not mistaken for the whole. */
    if (n < len && cap > 4)
        memcpy(buf + cap - 4, "...", 4);
    return buf;
}

/* TensorProto. */

enum {
    TP_DIMS = 1,
    TP_DATA_TYPE = 2,
    TP_SEGMENT = 3,
    TP_NAME = 8,
    TP_RAW_DATA = 9,
    TP_EXTERNAL_DATA = 13,
    TP_DATA_LOCATION = 14
};

static const char *typed_name(uint32_t field)
{
    switch (field) {
    case SN_TP_FLOAT_DATA: return "float_data";
    case SN_TP_INT32_DATA: return "int32_data";
    case SN_TP_STRING_DATA: return "string_data";
    case SN_TP_INT64_DATA: return "int64_data";
    case SN_TP_DOUBLE_DATA: return "double_data";
    case SN_TP_UINT64_DATA: return "uint64_data";
    }
    return "?";
}

static unsigned typed_wire(uint32_t field)
{
    switch (field) {
    case SN_TP_FLOAT_DATA: return SN_PB_I32;
    case SN_TP_DOUBLE_DATA: return SN_PB_I64;
    case SN_TP_STRING_DATA: return SN_PB_LEN;
    default: return SN_PB_VARINT;
    }
}

/* Values of the typed field per element of dtype, or 0 when that field
 * cannot hold it (complex numbers take two). */
static unsigned typed_per_elem(uint32_t field, sn_dtype dt)
{
    switch (field) {
    case SN_TP_FLOAT_DATA:
        return dt == SN_DT_FLOAT ? 1 : dt == SN_DT_COMPLEX64 ? 2 : 0;
    case SN_TP_DOUBLE_DATA:
        return dt == SN_DT_DOUBLE ? 1 : dt == SN_DT_COMPLEX128 ? 2 : 0;
    case SN_TP_INT32_DATA:
        switch (dt) {
        case SN_DT_INT32: case SN_DT_INT16: case SN_DT_INT8:
        case SN_DT_UINT16: case SN_DT_UINT8: case SN_DT_BOOL:
        case SN_DT_FLOAT16: case SN_DT_BFLOAT16:
            return 1;
        default:
            return 0;
        }
    case SN_TP_INT64_DATA:
        return dt == SN_DT_INT64;
    case SN_TP_UINT64_DATA:
        return dt == SN_DT_UINT32 || dt == SN_DT_UINT64;
    case SN_TP_STRING_DATA:
        return dt == SN_DT_STRING;
    }
    return 0;
}

/* A decimal string with no sign, no spaces and no overflow. */
static int parse_decimal(const uint8_t *s, size_t len, uint64_t *v)
{
    uint64_t x = 0;
    if (len == 0)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        if (x > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
            return -1;
        x = x * 10 + (uint64_t)(s[i] - '0');
    }
    *v = x;
    return 0;
}

static int key_is(const uint8_t *k, size_t klen, const char *want)
{
    return klen == strlen(want) && memcmp(k, want, klen) == 0;
}

static int parse_external_entry(sn_pb_tensor *t, const sn_pb_field *entry)
{
    sn_pb r;
    sn_pb_field f;
    const uint8_t *key = NULL, *val = NULL;
    size_t klen = 0, vlen = 0;
    char shown[64];
    int rc;
    if (sn_pb_expect(entry, SN_PB_LEN, "external_data") < 0)
        return -1;
    sn_pb_init(&r, entry->data, entry->len);
    while ((rc = sn_pb_next(&r, &f)) > 0) {
        if (f.num != 1 && f.num != 2)
            continue;
        if (sn_pb_expect(&f, SN_PB_LEN, f.num == 1 ? "key" : "value") < 0)
            return -1;
        if (f.num == 1) {
            key = f.data;
            klen = f.len;
        } else {
            val = f.data;
            vlen = f.len;
        }
    }
    if (rc < 0)
        return -1;
    if (!key)
        return 0;
    if (!val)
        val = (const uint8_t *)"";
    if (key_is(key, klen, "location")) {
        t->location = val;
        t->location_len = vlen;
        t->has_location = 1;
    } else if (key_is(key, klen, "offset") || key_is(key, klen, "length")) {
        int is_off = key_is(key, klen, "offset");
        uint64_t v;
        if (parse_decimal(val, vlen, &v) < 0) {
            sn_error(SHARDNET_INVALID_ARGUMENT,
                     "external_data %s '%s' is not a decimal number",
                     is_off ? "offset" : "length",
                     sn_pb_printable(shown, sizeof shown, val, vlen));
            return -1;
        }
        if (is_off) {
            t->offset = v;
            t->has_offset = 1;
        } else {
            t->length = v;
            t->has_length = 1;
        }
    }
    return 0;
}

/* What a first pass over a TensorProto saw besides what it put in the
 * tensor itself. */
typedef struct tensor_scan {
    size_t rank;        /* dims given (more than the limit: refused later) */
    size_t typed[16];   /* values per typed field number */
    uint64_t data_type;
    int segment;
} tensor_scan;

/* A typed field of values: counted, and noted as t's source (UINT32_MAX
 * when several are used, refused by tensor_source). */
static int scan_typed(sn_pb_tensor *t, const sn_pb_field *f, tensor_scan *sc)
{
    size_t n;
    if (f->num == SN_TP_STRING_DATA) {
        if (sn_pb_expect(f, SN_PB_LEN, "string_data") < 0)
            return -1;
        sc->typed[f->num]++;
        t->typed_field = t->typed_field && t->typed_field != f->num
                             ? UINT32_MAX : f->num;
        return 0;
    }
    if (sn_pb_rep_count(f, typed_wire(f->num), &n) < 0)
        return -1;
    sc->typed[f->num] += n;
    if (n && !t->typed_field)
        t->typed_field = f->num;
    else if (n && t->typed_field != f->num)
        t->typed_field = UINT32_MAX;
    return 0;
}

/* The first pass: every field's wire type checked, the parts noted in t
 * and sc; 0, or -1 with the error set. */
static int scan_tensor(const void *msg, size_t len, sn_pb_tensor *t,
                       tensor_scan *sc)
{
    sn_pb r;
    sn_pb_field f;
    sn_pb_rep it;
    uint64_t v;
    int rc;

    sn_pb_init(&r, msg, len);
    while ((rc = sn_pb_next(&r, &f)) > 0) {
        switch (f.num) {
        case TP_DIMS:
            if (sn_pb_rep_begin(&it, &f, SN_PB_VARINT) < 0)
                return -1;
            while ((rc = sn_pb_rep_next(&it, &v)) > 0) {
                if (sc->rank < SHARDNET_MAX_DIMS)
                    t->dims[sc->rank] = (int64_t)v;
                sc->rank++;
            }
            if (rc < 0)
                return -1;
            break;
        case TP_DATA_TYPE:
            if (sn_pb_expect(&f, SN_PB_VARINT, "data_type") < 0)
                return -1;
            sc->data_type = f.u;
            break;
        case TP_SEGMENT:
            sc->segment = 1;
            break;
        case SN_TP_FLOAT_DATA:
        case SN_TP_INT32_DATA:
        case SN_TP_INT64_DATA:
        case SN_TP_DOUBLE_DATA:
        case SN_TP_UINT64_DATA:
        case SN_TP_STRING_DATA:
            if (scan_typed(t, &f, sc) < 0)
                return -1;
            break;
        case TP_NAME:
            if (sn_pb_expect(&f, SN_PB_LEN, "name") < 0)
                return -1;
            t->name = f.data;
            t->name_len = f.len;
            break;
        case TP_RAW_DATA:
            if (sn_pb_expect(&f, SN_PB_LEN, "raw_data") < 0)
                return -1;
            t->raw = f.data;
            t->has_raw = 1;
            t->nbytes = f.len; /* checked against the shape later */
            break;
        case TP_EXTERNAL_DATA:
            if (parse_external_entry(t, &f) < 0)
                return -1;
            break;
        case TP_DATA_LOCATION:
            if (sn_pb_expect(&f, SN_PB_VARINT, "data_location") < 0)
                return -1;
            if (f.u > 1) {
                sn_error(SHARDNET_INVALID_ARGUMENT,
                         "unknown data_location %" PRIu64, f.u);
                return -1;
            }
            t->external = f.u == 1;
            break;
        default:
            break;
        }
    }
    return rc < 0 ? -1 : 0;
}

/* t's rank and element count, each dimension checked (shape: the dims
 * written out, for messages); 0, or -1 with the error set. */
static int tensor_count(sn_pb_tensor *t, size_t rank, char *shape,
                        size_t cap)
{
    if (rank > SHARDNET_MAX_DIMS) {
        sn_error(SHARDNET_INVALID_ARGUMENT,
                 "rank %zu exceeds the limit of %d dimensions", rank,
                 SHARDNET_MAX_DIMS);
        return -1;
    }
    t->rank = (int)rank;
    sn_format_dims(shape, cap, t->rank, t->dims);
    t->count = 1;
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i] < 0) {
            sn_error(SHARDNET_INVALID_ARGUMENT,
                     "dimension %d is negative (dims %s)", i, shape);
            return -1;
        }
        if (t->dims[i] > SN_MAX_ELEMENTS) {
            sn_error(SHARDNET_INVALID_ARGUMENT,
                     "dimension %d is %" PRId64
                     ", more than the 2^34 elements a tensor may hold",
                     i, t->dims[i]);
            return -1;
        }
    }
    for (int i = 0; i < t->rank; i++) {
        uint64_t d = (uint64_t)t->dims[i];
        if (d == 0) {
            t->count = 0;
            break;
        }
        if (t->count > (uint64_t)SN_MAX_ELEMENTS / d) {
            /* Stays exact for a zero dimension further on. */
            int zero = 0;
            for (int j = i + 1; j < t->rank; j++)
                zero |= t->dims[j] == 0;
            if (zero) {
                t->count = 0;
                break;
            }
            sn_error(SHARDNET_INVALID_ARGUMENT,
                     "dims %s give more than 2^34 elements", shape);
            return -1;
        }
        t->count *= d;
    }
    return 0;
}

/* t's element type: a numeric one, not segmented. */
static shardnet_status tensor_dtype(sn_pb_tensor *t, const tensor_scan *sc)
{
    uint64_t data_type = sc->data_type;
    if (data_type == SN_DT_UNDEFINED)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "has no data_type");
    if (data_type == SN_DT_STRING)
        return sn_error(SHARDNET_UNSUPPORTED,
                        "string tensors are not supported");
    if (data_type > SN_DT_BFLOAT16 || sn_dtype_size((sn_dtype)data_type) == 0)
        return sn_error(SHARDNET_UNSUPPORTED,
                        "data type %" PRIu64 " (%s) is not supported",
                        data_type,
                        data_type <= 64 ? sn_dtype_name((sn_dtype)data_type)
                                        : "?");
    t->dtype = (sn_dtype)data_type;
    t->elem_size = sn_dtype_size(t->dtype);
    if (sc->segment)
        return sn_error(SHARDNET_UNSUPPORTED,
                        "segmented tensors are not supported");
    return SHARDNET_OK;
}

/* t's one source of data, holding exactly the bytes its shape needs; 0, or
 * -1 with the error set. */
static int tensor_source(sn_pb_tensor *t, const tensor_scan *sc,
                         const char *shape)
{
    int nsources;
    if (t->typed_field == UINT32_MAX) {
        sn_error(SHARDNET_INVALID_ARGUMENT,
                 "holds values in more than one typed field");
        return -1;
    }
    nsources = t->has_raw + (t->typed_field != 0) + t->external;
    if (nsources > 1) {
        sn_error(SHARDNET_INVALID_ARGUMENT,
                 "has data in more than one place (%s%s%s)",
                 t->has_raw ? "raw_data " : "",
                 t->typed_field ? typed_name(t->typed_field) : "",
                 t->external ? " external data" : "");
        return -1;
    }

    if (t->external) {
        if (!t->has_location) {
            sn_error(SHARDNET_INVALID_ARGUMENT,
                     "external data has no 'location'");
            return -1;
        }
        t->nbytes = (size_t)t->count * t->elem_size;
    } else if (t->has_raw) {
        if ((uint64_t)t->nbytes != t->count * t->elem_size) {
            sn_error(SHARDNET_INVALID_ARGUMENT,
                     "raw_data holds %zu bytes but dims %s of %s need %" PRIu64,
                     t->nbytes, shape, sn_dtype_name(t->dtype),
                     t->count * t->elem_size);
            return -1;
        }
    } else if (t->typed_field) {
        unsigned per = typed_per_elem(t->typed_field, t->dtype);
        size_t have = sc->typed[t->typed_field];
        if (!per) {
            sn_error(SHARDNET_INVALID_ARGUMENT,
                     "%s cannot hold %s elements",
                     typed_name(t->typed_field), sn_dtype_name(t->dtype));
            return -1;
        }
        if ((uint64_t)have != t->count * per) {
            sn_error(SHARDNET_INVALID_ARGUMENT,
                     "%s holds %zu values but dims %s need %" PRIu64,
                     typed_name(t->typed_field), have, shape,
                     t->count * per);
            return -1;
        }
        t->nbytes = (size_t)t->count * t->elem_size;
    } else {
        if (t->count) {
            sn_error(SHARDNET_INVALID_ARGUMENT,
                     "has no data for its %" PRIu64 " elements (dims %s)",
                     t->count, shape);
            return -1;
        }
        t->nbytes = 0;
    }
    return 0;
}

shardnet_status sn_pb_tensor_parse(const void *msg, size_t len,
                                   sn_pb_tensor *t)
{
    tensor_scan sc;
    const uint8_t *nm;
    size_t nl;
    char label[SN_MAX_NAME < 200 ? SN_MAX_NAME : 200];
    char shape[256];
    shardnet_status st = SHARDNET_INVALID_ARGUMENT;

    memset(t, 0, sizeof *t);
    memset(&sc, 0, sizeof sc);
    t->msg = msg;
    t->msg_len = len;
    if (sn_pb_peek_len(msg, len, TP_NAME, &nm, &nl)) {
        char shown[160];
        snprintf(label, sizeof label, "tensor '%s'",
                 sn_pb_printable(shown, sizeof shown, nm, nl));
    } else {
        snprintf(label, sizeof label, "unnamed tensor");
    }
    if (scan_tensor(msg, len, t, &sc) < 0 ||
        tensor_count(t, sc.rank, shape, sizeof shape) < 0)
        goto fail;
    if ((st = tensor_dtype(t, &sc)) != SHARDNET_OK)
        goto fail;
    st = SHARDNET_INVALID_ARGUMENT;
    if (tensor_source(t, &sc, shape) < 0)
        goto fail;
    return SHARDNET_OK;

fail:
    return sn_error_prefix(st, "%s", label);
}

void sn_pb_tensor_decode_typed(const sn_pb_tensor *t, void *out)
{
    sn_pb r;
    sn_pb_field f;
    sn_pb_rep it;
    uint8_t *o = out;
    uint64_t v;
    unsigned per = typed_per_elem(t->typed_field, t->dtype);
    size_t width, limit, i = 0;
    if (!per || t->typed_field == SN_TP_STRING_DATA)
        return;
    /* Bytes per typed value as stored: a complex number is two. */
    width = t->elem_size / per;
    limit = t->nbytes / width;
    sn_pb_init(&r, t->msg, t->msg_len);
    while (sn_pb_next(&r, &f) > 0) {
        if (f.num != t->typed_field)
            continue;
        if (sn_pb_rep_begin(&it, &f, typed_wire(f.num)) < 0)
            return;
        while (i < limit && sn_pb_rep_next(&it, &v) > 0) {
            if (t->dtype == SN_DT_BOOL)
                v = v != 0;
            for (size_t k = 0; k < width; k++)
                o[i * width + k] = (uint8_t)(v >> (8 * k));
            i++;
        }
    }
}
