/*
 * A small protobuf writer for the ONNX models the Criterion suites make by
 * hand (test_onnx, test_hostile): the wire format's fields, and the
 * TensorProto, ValueInfoProto, NodeProto and ModelProto messages of
 * onnx.proto by their field numbers.  Include after <criterion/criterion.h>.
 */
#ifndef SN_PBWRITER_H
#define SN_PBWRITER_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct pb {
    uint8_t *p;
    size_t n, cap;
} pb;

static inline void put_raw(pb *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        cr_assert(b->p);
    }
    if (n)
        memcpy(b->p + b->n, d, n);
    b->n += n;
}

static inline void put_varint(pb *b, uint64_t v)
{
    uint8_t c;
    do {
        c = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            c |= 0x80;
        put_raw(b, &c, 1);
    } while (v);
}

static inline void put_tag(pb *b, unsigned field, unsigned wire)
{
    put_varint(b, (uint64_t)field << 3 | wire);
}

static inline void put_int(pb *b, unsigned field, int64_t v)
{
    put_tag(b, field, 0);
    put_varint(b, (uint64_t)v);
}

static inline void put_bytes(pb *b, unsigned field, const void *d, size_t n)
{
    put_tag(b, field, 2);
    put_varint(b, n);
    put_raw(b, d, n);
}

static inline void put_str(pb *b, unsigned field, const char *s)
{
    put_bytes(b, field, s, strlen(s));
}

/* Appends sub as a LEN field and frees it. */
static inline void put_msg(pb *b, unsigned field, pb *sub)
{
    put_bytes(b, field, sub->p, sub->n);
    free(sub->p);
    memset(sub, 0, sizeof *sub);
}

static inline void put_f32(pb *b, unsigned field, float f)
{
    uint32_t u;
    uint8_t le[4];
    memcpy(&u, &f, 4);
    for (int i = 0; i < 4; i++)
        le[i] = (uint8_t)(u >> (8 * i));
    put_tag(b, field, 5);
    put_raw(b, le, 4);
}

static inline void pb_free(pb *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* TensorProto with raw_data. */
static inline pb tensor_raw(const char *name, int dtype, const int64_t *dims,
                     int rank, const void *raw, size_t rawlen)
{
    pb t = {0};
    for (int i = 0; i < rank; i++)
        put_int(&t, 1, dims[i]);
    put_int(&t, 2, dtype);
    if (name)
        put_str(&t, 8, name);
    if (raw)
        put_bytes(&t, 9, raw, rawlen);
    return t;
}

/* ValueInfoProto of a float tensor with the given dims (rank < 0: none). */
static inline pb value_info(const char *name, const int64_t *dims, int rank)
{
    pb v = {0}, type = {0}, tt = {0}, shape = {0};
    put_str(&v, 1, name);
    put_int(&tt, 1, 1);
    for (int i = 0; i < rank; i++) {
        pb dim = {0};
        put_int(&dim, 1, dims[i]);
        put_msg(&shape, 1, &dim);
    }
    if (rank >= 0)
        put_msg(&tt, 2, &shape);
    put_msg(&type, 1, &tt);
    put_msg(&v, 2, &type);
    return v;
}

/* NodeProto; ins/outs NULL-terminated lists. */
static inline pb node(const char *name, const char *op, const char *const *ins,
               const char *const *outs)
{
    pb n = {0};
    for (; ins && *ins; ins++)
        put_str(&n, 1, *ins);
    for (; outs && *outs; outs++)
        put_str(&n, 2, *outs);
    if (name)
        put_str(&n, 3, name);
    put_str(&n, 4, op);
    return n;
}

/* ModelProto around a graph (consumed), importing opset `opset`. */
static inline pb model(int64_t opset, pb *graph)
{
    pb m = {0}, os = {0};
    put_int(&m, 1, 8);
    put_str(&m, 2, "shardnet tests");
    put_msg(&m, 7, graph);
    put_str(&os, 1, "");
    put_int(&os, 2, opset);
    put_msg(&m, 8, &os);
    return m;
}

#endif
