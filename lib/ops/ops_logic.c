/*
 * Comparisons, logic and the integer-minded element-wise operators:
 * Equal, Greater, GreaterOrEqual, Less, LessOrEqual, And, Or, Xor, Mod,
 * BitShift and PRelu.  Numpy broadcasting, or before opset 7 the legacy
 * `broadcast` / `axis` form (sn_legacy_broadcast).  Inputs known on the
 * host fold there in their own type (integers and bools always are, as
 * bound inputs; floats when small), ops_math.c computing each value; a
 * bool result is stored as bool.  Otherwise one BINARY step on the device,
 * where tensors are float32: a comparison or logic op gives 0.0 / 1.0
 * (read back as bool), Less and LessOrEqual are Greater and
 * GreaterOrEqual with the operands swapped.  BitShift has no device form:
 * a shifted value can leave the float-exact range or wrap in its type.
 */
#include <config.h>

#include <string.h>

#include "ops/ops.h"

static const struct {
    const char *name;
    sn_binary_op op;
    int swap;    /* b op a */
    int boolean; /* the output is bool */
} compare_ops[] = {
    {"Equal", SN_BINARY_EQUAL, 0, 1},
    {"Greater", SN_BINARY_GREATER, 0, 1},
    {"GreaterOrEqual", SN_BINARY_GREATER_EQUAL, 0, 1},
    {"Less", SN_BINARY_GREATER, 1, 1},
    {"LessOrEqual", SN_BINARY_GREATER_EQUAL, 1, 1},
    {"And", SN_BINARY_AND, 0, 1},
    {"Or", SN_BINARY_OR, 0, 1},
    {"Xor", SN_BINARY_XOR, 0, 1},
    {"Mod", SN_BINARY_MOD, 0, 0},
};

static int is_float(sn_dtype t)
{
    return t == SN_DT_FLOAT || t == SN_DT_DOUBLE || t == SN_DT_FLOAT16 ||
           t == SN_DT_BFLOAT16;
}

/* Both inputs of a type the host and device can compute on. */
static shardnet_status check_types(const sn_node *n, const sn_rt *a,
                                   const sn_rt *b)
{
    if (!(is_float(a->dtype) || sn_dtype_is_integer(a->dtype)) ||
        !(is_float(b->dtype) || sn_dtype_is_integer(b->dtype)))
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "inputs of type %s and %s are not supported",
                             sn_dtype_name(a->dtype),
                             sn_dtype_name(b->dtype));
    if (is_float(a->dtype) != is_float(b->dtype))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "inputs of type %s and %s: the types differ",
                             sn_dtype_name(a->dtype),
                             sn_dtype_name(b->dtype));
    return SHARDNET_OK;
}

/* The broadcast output shape of a and b (the legacy form before opset 7:
 * *bl is b reshaped for it). */
static shardnet_status out_shape(sn_lower *L, const sn_node *n,
                                 const sn_rt *a, const sn_rt *b, sn_rt *bl,
                                 int *rank, int64_t *dims)
{
    shardnet_status st;
    *bl = *b;
    if (L->g->opset < 7 && (st = sn_legacy_broadcast(n, a, b, bl)))
        return st;
    if (!sn_broadcast_shape(a->rank, a->dims, bl->rank, bl->dims, rank, dims))
        return sn_broadcast_error(n, a->rank, a->dims, bl->rank, bl->dims);
    return SHARDNET_OK;
}

/* out = a op b (a, b in the order the op reads them): folded on the host
 * when both are known there and integers or small, else a device step. */
static shardnet_status lower_op(sn_lower *L, const sn_node *n, int op,
                                const sn_rt *a, const sn_rt *b, sn_rt *va_rt,
                                sn_rt *vb_rt, int rank, const int64_t *dims,
                                sn_dtype t)
{
    sn_view va, vb;
    sn_rt *out;
    shardnet_status st;
    if (a->host && b->host &&
        ((!is_float(a->dtype) && !is_float(b->dtype)) ||
         (sn_rt_elements(a) <= 64 && sn_rt_elements(b) <= 64))) {
        void *d;
        if ((st = sn_fold_broadcast(n, op, a, b, rank, dims, t, &d)))
            return st;
        return sn_out_host(L, n, 0, t, rank, dims, d);
    }
    if (op >= SN_BINARY_COUNT)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "only inputs known when the plan is made are "
                             "supported (computed on the host)");
    if ((st = sn_out_device(L, n, 0, rank, dims, &out)) != SHARDNET_OK)
        return st;
    out->dtype = t; /* computed in float32, read back as this */
    /* The views come from the graph's own values (not the reshaped
     * copies a and b may be). */
    if ((st = sn_dev_view(L, n, va_rt, &va)) != SHARDNET_OK ||
        (st = sn_dev_view(L, n, vb_rt, &vb)) != SHARDNET_OK)
        return st;
    return sn_emit_binary(L, n, (sn_binary_op)op, a->rank, a->dims, va,
                          b->rank, b->dims, vb, out->view);
}

SN_LOWER(sn_lower_compare)
{
    sn_rt *a = sn_in(L, n, 0), *b = sn_in(L, n, 1), bl;
    int64_t dims[SN_MAX_DIMS];
    int rank, op;
    size_t k = 0;
    shardnet_status st;

    while (strcmp(compare_ops[k].name, n->op_type))
        k++;
    op = compare_ops[k].op;
    if ((st = check_types(n, a, b)) ||
        (st = out_shape(L, n, a, b, &bl, &rank, dims)))
        return st;
    if (op == SN_BINARY_MOD && sn_attr_int(n, "fmod", 0))
        op = SN_BINARY_FMOD;
    if (compare_ops[k].swap)
        return lower_op(L, n, op, &bl, a, b, a, rank, dims,
                        compare_ops[k].boolean ? SN_DT_BOOL : a->dtype);
    return lower_op(L, n, op, a, &bl, a, b, rank, dims,
                    compare_ops[k].boolean ? SN_DT_BOOL : a->dtype);
}

/* BitShift: integers (unsigned in ONNX), always known on the host. */
SN_LOWER(sn_lower_bitshift)
{
    sn_rt *a = sn_in(L, n, 0), *b = sn_in(L, n, 1), bl;
    const char *dir = sn_attr_string(n, "direction", "");
    int64_t dims[SN_MAX_DIMS];
    int rank, op;
    shardnet_status st;

    if (!strcmp(dir, "LEFT"))
        op = SN_FOLD_SHIFT_LEFT;
    else if (!strcmp(dir, "RIGHT"))
        op = SN_FOLD_SHIFT_RIGHT;
    else
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "direction '%s': LEFT or RIGHT", dir);
    if ((st = check_types(n, a, b)))
        return st;
    if (is_float(a->dtype))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "input of type %s: integers only",
                             sn_dtype_name(a->dtype));
    if ((st = out_shape(L, n, a, b, &bl, &rank, dims)))
        return st;
    return lower_op(L, n, op, a, &bl, a, b, rank, dims, a->dtype);
}

/*
 * PRelu: x < 0 ? slope x : x, the slope broadcast to x's shape (one way:
 * the output has x's shape).  Before opset 7 the slope is one value or,
 * one per channel, C values broadcast along axis 1 of x (N, C, ...).
 */
SN_LOWER(sn_lower_prelu)
{
    sn_rt *x = sn_in(L, n, 0), *slope = sn_in(L, n, 1), sl;
    int64_t dims[SN_MAX_DIMS];
    int rank;
    shardnet_status st;

    if ((st = check_types(n, x, slope)))
        return st;
    sl = *slope;
    if (L->g->opset < 7 && sn_rt_elements(slope) == 1) {
        sl.rank = 0;
    } else if (L->g->opset < 7 && slope->rank == 1 && x->rank >= 2 &&
               slope->dims[0] == x->dims[1]) {
        sl.rank = x->rank - 1;
        for (int i = 1; i < sl.rank; i++)
            sl.dims[i] = 1;
    }
    if (!sn_broadcast_shape(x->rank, x->dims, sl.rank, sl.dims, &rank,
                            dims) ||
        rank != x->rank ||
        memcmp(dims, x->dims, (size_t)rank * sizeof dims[0]))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the slope's shape does not broadcast to the "
                             "input's");
    return lower_op(L, n, SN_BINARY_PRELU, x, &sl, x, slope, rank, dims,
                    x->dtype);
}
