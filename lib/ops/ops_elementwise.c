/*
 * Element-wise operators: Cast, the binary ops (Add, Sub, Mul, Div, Pow:
 * numpy broadcasting, or before opset 7 the legacy form), the unary ops
 * (Relu to IsInf, one table) and Reciprocal and Not.  Integer tensors
 * (shape arithmetic) and small float ones fold on the host (ops_math.c
 * computes each value); otherwise each is one BINARY or UNARY step on the
 * device.  sn_emit_binary, the binary step
 * with broadcasting, serves the other operator files too (ops.h).
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* --- Cast ---------------------------------------------------------------- */

static int is_float_type(sn_dtype t)
{
    return t == SN_DT_FLOAT || t == SN_DT_DOUBLE || t == SN_DT_FLOAT16 ||
           t == SN_DT_BFLOAT16;
}

/* Is node n's output 0 a graph output that no other node reads? */
static int consumed_only_as_output(const sn_lower *L, const sn_node *n)
{
    int v = n->outputs[0];
    if (v < 0 || !(L->g->values[v].flags & SN_VALUE_OUTPUT))
        return 0;
    for (size_t i = 0; i < L->g->nnodes; i++) {
        const sn_node *m = &L->g->nodes[i];
        if (m->dead)
            continue;
        for (size_t j = 0; j < m->ninputs; j++)
            if (m->inputs[j] == v)
                return 0;
    }
    return 1;
}

/* Cast's target: a TensorProto type number, or before opset 6 its name
 * ("FLOAT", "INT64", ...); SN_DT_UNDEFINED if neither. */
static sn_dtype cast_target(const sn_node *n)
{
    const sn_attr *a = sn_node_attr(n, "to");
    if (a && a->type == SN_ATTR_STRING && a->s) {
        for (int t = SN_DT_FLOAT; t <= SN_DT_BFLOAT16; t++) {
            const char *name = sn_dtype_name((sn_dtype)t);
            size_t i = 0;
            while (name[i] && a->s[i] &&
                   (a->s[i] | 0x20) == name[i]) /* upper or lower case */
                i++;
            if (!name[i] && !a->s[i])
                return (sn_dtype)t;
        }
        return SN_DT_UNDEFINED;
    }
    return (sn_dtype)sn_attr_int(n, "to", SN_DT_UNDEFINED);
}

/* One unary step y = op(x) over count elements. */
static shardnet_status emit_unary(sn_lower *L, const sn_node *n,
                                  sn_unary_op op, size_t count, sn_view x,
                                  sn_view y)
{
    sn_step s = {.kind = SN_KERNEL_UNARY};
    s.u.unary.op = op;
    s.u.unary.n = count;
    s.u.unary.x = x;
    s.u.unary.y = y;
    return sn_emit(L, n, &s);
}

/*
 * A float tensor on the device cast to bool or an integer type, still as
 * float32: bool is 1 - (x == 0) (NaN is true); an integer type truncates
 * toward zero, sign(x) * floor(|x|).  Values beyond the target type's
 * range are undefined in ONNX; they stay as they are.
 */
static shardnet_status cast_on_device(sn_lower *L, const sn_node *n,
                                      sn_rt *x, sn_dtype to)
{
    size_t count = sn_rt_elements(x);
    int64_t flat = (int64_t)count;
    sn_rt *out;
    sn_view vx, a, b;
    shardnet_status st;
    if ((st = sn_dev_view(L, n, x, &vx)) != SHARDNET_OK ||
        (st = sn_scratch(L, count, &a)) != SHARDNET_OK ||
        (st = sn_out_device(L, n, 0, x->rank, x->dims, &out)) != SHARDNET_OK)
        return st;
    out->dtype = to;
    if (to == SN_DT_BOOL) {
        float *k = malloc(2 * sizeof *k); /* 0 and 1 */
        if (!k)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "node '%s'", n->name);
        k[0] = 0.0f;
        k[1] = 1.0f;
        if ((st = sn_dev_upload(L, n, k, 2, &b)) != SHARDNET_OK)
            return st;
        sn_view zero = b, one = b;
        one.offset += 1;
        if ((st = sn_emit_binary(L, n, SN_BINARY_EQUAL, 1, &flat, vx, 0,
                                 NULL, zero, a)) != SHARDNET_OK)
            return st;
        return sn_emit_binary(L, n, SN_BINARY_SUB, 0, NULL, one, 1, &flat, a,
                              out->view);
    }
    if ((st = sn_scratch(L, count, &b)) != SHARDNET_OK ||
        (st = emit_unary(L, n, SN_UNARY_ABS, count, vx, a)) != SHARDNET_OK ||
        (st = emit_unary(L, n, SN_UNARY_FLOOR, count, a, a)) != SHARDNET_OK ||
        (st = emit_unary(L, n, SN_UNARY_SIGN, count, vx, b)) != SHARDNET_OK)
        return st;
    return sn_emit_binary(L, n, SN_BINARY_MUL, 1, &flat, a, 1, &flat, b,
                          out->view);
}

SN_LOWER(sn_lower_cast)
{
    return sn_cast_to(L, n, sn_in(L, n, 0), cast_target(n));
}

/* CastLike: a Cast to the type of input 1 (only its type is read). */
SN_LOWER(sn_lower_castlike)
{
    sn_rt *x = sn_in(L, n, 0), *like = sn_in(L, n, 1);
    if (!x || !like)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "CastLike takes two inputs");
    return sn_cast_to(L, n, x, like->dtype);
}

shardnet_status sn_cast_to(sn_lower *L, const sn_node *n, sn_rt *x,
                           sn_dtype to)
{
    size_t es = sn_dtype_size(to), c = sn_rt_elements(x);
    if (!es || to == SN_DT_STRING || x->dtype == SN_DT_STRING)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "cast to type %s is not supported",
                             sn_dtype_name(to));
    if (x->host) {
        void *d = malloc(c ? c * es : 1);
        if (!d)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "cast");
        for (size_t i = 0; i < c; i++) {
            if (is_float_type(x->dtype))
                sn_store_value(to, d, i, sn_rt_get_double(x, i), 0, 0);
            else
                sn_store_value(to, d, i, 0, sn_rt_get_int(x, i), 1);
        }
        return sn_out_host(L, n, 0, to, x->rank, x->dims, d);
    }
    /* Device tensors are float32: a cast to a float type, or of whole
     * numbers (integers, booleans) to an integer type, is a relabel, and
     * so is any cast whose result only leaves the model (converted when
     * read back); otherwise the values are made whole on the device. */
    if (to == SN_DT_FLOAT || to == SN_DT_DOUBLE ||
        (!is_float_type(x->dtype) && to != SN_DT_BOOL) ||
        x->dtype == to || consumed_only_as_output(L, n)) {
        shardnet_status st = sn_out_alias(L, n, 0, x, x->rank, x->dims);
        if (st == SHARDNET_OK)
            L->rt[n->outputs[0]].dtype = to;
        return st;
    }
    if (to == SN_DT_FLOAT16 || to == SN_DT_BFLOAT16) {
        /* rounded to the type, carried as float (backend.h) */
        sn_view vx;
        sn_rt *out;
        shardnet_status st;
        if ((st = sn_dev_view(L, n, x, &vx)) != SHARDNET_OK ||
            (st = sn_out_device(L, n, 0, x->rank, x->dims, &out)))
            return st;
        out->dtype = to;
        return c ? sn_emit_round_half(L, n, to, c, vx, out->view)
                 : SHARDNET_OK;
    }
    return cast_on_device(L, n, x, to);
}

/* --- element-wise binary ops -------------------------------------------- */

static const struct {
    const char *name;
    sn_binary_op op;
} binary_ops[] = {{"Add", SN_BINARY_ADD}, {"Sub", SN_BINARY_SUB},
                  {"Mul", SN_BINARY_MUL}, {"Div", SN_BINARY_DIV},
                  {"Pow", SN_BINARY_POW}, {"Max", SN_BINARY_MAX},
                  {"Min", SN_BINARY_MIN}};

/* a op b on the host, both known, into *out (rank, dims; type t; the
 * caller frees it): in int64 when both inputs are integers, else in
 * double. */
shardnet_status sn_fold_broadcast(const sn_node *n, int op, const sn_rt *a,
                                  const sn_rt *b, int rank,
                                  const int64_t *dims, sn_dtype t, void **out)
{
    int64_t sa[SN_MAX_DIMS], sb[SN_MAX_DIMS], idx[SN_MAX_DIMS] = {0};
    int64_t out_count = 1;
    size_t es = sn_dtype_size(t);
    int ints = !is_float_type(a->dtype) && !is_float_type(b->dtype);
    int uns = a->dtype == SN_DT_UINT64 || a->dtype == SN_DT_UINT32;
    void *d;
    for (int i = 0; i < rank; i++)
        if (__builtin_mul_overflow(out_count, dims[i], &out_count))
            out_count = INT64_MAX;
    if ((uint64_t)out_count > SN_MAX_HOST_FOLD / es)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "folding on the host would need more than %zu "
                             "MiB",
                             SN_MAX_HOST_FOLD >> 20);
    d = malloc(out_count ? (size_t)out_count * es : 1);
    if (!d)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "folding");
    sn_strides(a->rank, a->dims, sa);
    sn_strides(b->rank, b->dims, sb);
    for (int64_t k = 0; k < out_count; k++) {
        size_t ia = 0, ib = 0;
        for (int i = 0; i < rank; i++) {
            int ja = i - (rank - a->rank), jb = i - (rank - b->rank);
            if (ja >= 0 && a->dims[ja] != 1)
                ia += (size_t)(idx[i] * sa[ja]);
            if (jb >= 0 && b->dims[jb] != 1)
                ib += (size_t)(idx[i] * sb[jb]);
        }
        if (!ints)
            sn_store_value(t, d, (size_t)k,
                           sn_fold_double(op, sn_rt_get_double(a, ia),
                                          sn_rt_get_double(b, ib)),
                           0, 0);
        else
            sn_store_value(t, d, (size_t)k, 0,
                           sn_fold_int(op, sn_rt_get_int(a, ia),
                                       sn_rt_get_int(b, ib), uns),
                           1);
        for (int i = rank - 1; i >= 0 && ++idx[i] == dims[i]; i--)
            idx[i] = 0;
    }
    *out = d;
    return SHARDNET_OK;
}

/* Shape arithmetic on the host: both inputs known; then the fused Relu
 * (act) on every element below zero. */
static shardnet_status fold_binary(sn_lower *L, const sn_node *n,
                                   sn_binary_op op, sn_act act, sn_rt *a,
                                   sn_rt *b, int rank, const int64_t *dims)
{
    void *d;
    shardnet_status st =
        sn_fold_broadcast(n, op, a, b, rank, dims, a->dtype, &d);
    if (st != SHARDNET_OK)
        return st;
    if (act != SN_ACT_NONE) {
        sn_rt r = {.dtype = a->dtype, .rank = rank, .host = d};
        memcpy(r.dims, dims, (size_t)rank * sizeof *dims);
        for (size_t k = 0, count = sn_rt_elements(&r); k < count; k++) {
            const double v = sn_rt_get_double(&r, k);
            if (v < 0.0 || (act == SN_ACT_RELU6 && v > 6.0))
                sn_store_value(a->dtype, d, k, v < 0.0 ? 0.0 : 6.0,
                               v < 0.0 ? 0 : 6, !is_float_type(a->dtype));
        }
    }
    return sn_out_host(L, n, 0, a->dtype, rank, dims, d);
}

shardnet_status sn_emit_binary_act(sn_lower *L, const sn_node *n,
                                   sn_binary_op op, sn_act act, int ra,
                                   const int64_t *da, sn_view a, int rb,
                                   const int64_t *db, sn_view b, sn_view c)
{
    sn_step s = {.kind = SN_KERNEL_BINARY};
    size_t sa[SN_MAX_DIMS], sb[SN_MAX_DIMS];
    shardnet_status st;
    for (int i = 0; i < ra; i++)
        sa[i] = (size_t)da[i];
    for (int i = 0; i < rb; i++)
        sb[i] = (size_t)db[i];
    s.u.binary.op = op;
    if ((st = sn_binary_broadcast(&s.u.binary, (size_t)ra, sa, (size_t)rb,
                                  sb)) != SHARDNET_OK)
        return sn_node_error(n, st, "%s", shardnet_last_error());
    s.u.binary.a = a;
    s.u.binary.b = b;
    s.u.binary.c = c;
    /* The binary kernels apply a Relu only; a Relu6 (a grouped
     * convolution's bias or residual added after it) is a step of its own
     * on c after the binary one. */
    s.u.binary.act = act == SN_ACT_RELU6 ? SN_ACT_NONE : act;
    if ((st = sn_emit(L, n, &s)) != SHARDNET_OK || act != SN_ACT_RELU6)
        return st;
    size_t count = 1;
    for (size_t i = 0; i < s.u.binary.rank; i++)
        count *= s.u.binary.shape[i];
    return sn_emit_act(L, n, act, count, c);
}

shardnet_status sn_emit_act(sn_lower *L, const sn_node *n, sn_act act,
                            size_t count, sn_view v)
{
    sn_step s = {.kind = SN_KERNEL_UNARY};
    if (act == SN_ACT_NONE)
        return SHARDNET_OK;
    s.u.unary = (sn_unary_desc){
        .op = act == SN_ACT_RELU ? SN_UNARY_RELU : SN_UNARY_CLIP,
        .n = count, .x = v, .y = v, .alpha = 0.0f, .beta = 6.0f};
    return sn_emit(L, n, &s);
}

/* One binary step c = a op b with numpy broadcasting. */
shardnet_status sn_emit_binary(sn_lower *L, const sn_node *n,
                               sn_binary_op op, int ra, const int64_t *da,
                               sn_view a, int rb, const int64_t *db, sn_view b,
                               sn_view c)
{
    return sn_emit_binary_act(L, n, op, SN_ACT_NONE, ra, da, a, rb, db, b, c);
}

/* Emit out = a op b for two values, uploading them as needed. */
static shardnet_status emit_binary(sn_lower *L, const sn_node *n,
                                   sn_binary_op op, sn_rt *a, sn_rt *b,
                                   sn_view out)
{
    sn_view va, vb;
    shardnet_status st;
    if ((st = sn_dev_view(L, n, a, &va)) != SHARDNET_OK ||
        (st = sn_dev_view(L, n, b, &vb)) != SHARDNET_OK)
        return st;
    return sn_emit_binary(L, n, op, a->rank, a->dims, va, b->rank, b->dims,
                          vb, out);
}

/*
 * Before opset 7, Add, Sub, Mul, Div and Pow (and the comparisons and
 * logic ops of ops_logic.c) broadcast only when the
 * attribute broadcast is 1, and only B onto A: B's shape is a contiguous
 * run of A's, aligned at the end, or at `axis` when given (A (2,3,4,5),
 * B (3,4), axis 1).  B's shape, padded with ones after the run, then
 * broadcasts the numpy way.  Without broadcast, the shapes must be equal.
 * *bl is b with that shape (same data).
 */
shardnet_status sn_legacy_broadcast(const sn_node *n, const sn_rt *a,
                                    const sn_rt *b, sn_rt *bl)
{
    const sn_attr *ax = sn_node_attr(n, "axis");
    *bl = *b;
    if (!sn_attr_int(n, "broadcast", 0)) {
        if (a->rank != b->rank ||
            memcmp(a->dims, b->dims, (size_t)a->rank * sizeof a->dims[0]))
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "before opset 7 the inputs must have the "
                                 "same shape unless broadcast is 1");
        return SHARDNET_OK;
    }
    if (b->rank > a->rank)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "broadcast: B has rank %d, more than A's %d",
                             b->rank, a->rank);
    if (ax && b->rank > 0) {
        int at = ax->type == SN_ATTR_INT ? sn_axis(ax->i, a->rank) : -1;
        if (at < 0 || at + b->rank > a->rank)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "broadcast axis %lld does not fit B of rank "
                                 "%d in A of rank %d",
                                 ax->type == SN_ATTR_INT ? (long long)ax->i
                                                         : -1LL,
                                 b->rank, a->rank);
        bl->rank = a->rank - at;
        for (int i = b->rank; i < bl->rank; i++)
            bl->dims[i] = 1;
    }
    for (int i = 0; i < bl->rank; i++) {
        int64_t da = a->dims[a->rank - bl->rank + i];
        if (bl->dims[i] != da && bl->dims[i] != 1)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "broadcast: B's dimension %d is %lld where "
                                 "A's is %lld",
                                 i, (long long)bl->dims[i], (long long)da);
    }
    return SHARDNET_OK;
}

SN_LOWER(sn_lower_binary)
{
    sn_rt *a = sn_in(L, n, 0), *b = sn_in(L, n, 1), *out, bl;
    int64_t dims[SN_MAX_DIMS];
    int rank;
    sn_binary_op op = SN_BINARY_ADD;
    sn_view va, vb;
    shardnet_status st;

    for (size_t i = 0; i < sizeof binary_ops / sizeof binary_ops[0]; i++)
        if (!strcmp(n->op_type, binary_ops[i].name))
            op = binary_ops[i].op;
    if (L->g->opset < 7) {
        if ((st = sn_legacy_broadcast(n, a, b, &bl)) != SHARDNET_OK)
            return st;
    } else {
        bl = *b;
    }
    if (!sn_broadcast_shape(a->rank, a->dims, bl.rank, bl.dims, &rank, dims))
        return sn_broadcast_error(n, a->rank, a->dims, bl.rank, bl.dims);
    /* fold_binary reads only bl's shape and host data. */
    if (a->host && b->host && !is_float_type(a->dtype))
        return fold_binary(L, n, op, sn_fused_act(n), a, &bl, rank, dims);
    if (a->host && b->host && sn_rt_elements(a) <= 64 &&
        sn_rt_elements(b) <= 64)
        return fold_binary(L, n, op, sn_fused_act(n), a, &bl, rank, dims);
    if ((st = sn_out_device(L, n, 0, rank, dims, &out)) != SHARDNET_OK)
        return st;
    out->dtype = a->dtype; /* computed in float32, read back as this */
    /* The views come from the graph's own values (b, not its copy bl). */
    if ((st = sn_dev_view(L, n, a, &va)) != SHARDNET_OK ||
        (st = sn_dev_view(L, n, b, &vb)) != SHARDNET_OK)
        return st;
    return sn_emit_binary_act(L, n, op, sn_fused_act(n), a->rank, a->dims, va,
                           bl.rank, bl.dims, vb, out->view);
}

/* --- element-wise unary ops --------------------------------------------- */

/* An op, the attributes that carry its alpha and beta (NULL: none) and
 * their defaults. */
static const struct {
    const char *name;
    sn_unary_op op;
    float alpha, beta;
    const char *alpha_attr, *beta_attr;
} unary_ops[] = {
    {"Relu", SN_UNARY_RELU, 0, 0, "alpha", "beta"},
    {"Sigmoid", SN_UNARY_SIGMOID, 0, 0, "alpha", "beta"},
    {"Tanh", SN_UNARY_TANH, 0, 0, "alpha", "beta"},
    {"Erf", SN_UNARY_ERF, 0, 0, "alpha", "beta"},
    {"Exp", SN_UNARY_EXP, 0, 0, "alpha", "beta"},
    {"Log", SN_UNARY_LOG, 0, 0, "alpha", "beta"},
    {"Sqrt", SN_UNARY_SQRT, 0, 0, "alpha", "beta"},
    {"Neg", SN_UNARY_NEG, 0, 0, "alpha", "beta"},
    {"Abs", SN_UNARY_ABS, 0, 0, "alpha", "beta"},
    {"LeakyRelu", SN_UNARY_LEAKY_RELU, 0.01f, 0, "alpha", "beta"},
    {"HardSigmoid", SN_UNARY_HARD_SIGMOID, 0.2f, 0.5f, "alpha", "beta"},
    {"Gelu", SN_UNARY_GELU, 0, 0, "alpha", "beta"},
    {"Clip", SN_UNARY_CLIP, -INFINITY, INFINITY, "alpha", "beta"},
    {"Sin", SN_UNARY_SIN, 0, 0, NULL, NULL},
    {"Cos", SN_UNARY_COS, 0, 0, NULL, NULL},
    {"Tan", SN_UNARY_TAN, 0, 0, NULL, NULL},
    {"Asin", SN_UNARY_ASIN, 0, 0, NULL, NULL},
    {"Acos", SN_UNARY_ACOS, 0, 0, NULL, NULL},
    {"Atan", SN_UNARY_ATAN, 0, 0, NULL, NULL},
    {"Sinh", SN_UNARY_SINH, 0, 0, NULL, NULL},
    {"Cosh", SN_UNARY_COSH, 0, 0, NULL, NULL},
    {"Asinh", SN_UNARY_ASINH, 0, 0, NULL, NULL},
    {"Acosh", SN_UNARY_ACOSH, 0, 0, NULL, NULL},
    {"Atanh", SN_UNARY_ATANH, 0, 0, NULL, NULL},
    {"Ceil", SN_UNARY_CEIL, 0, 0, NULL, NULL},
    {"Floor", SN_UNARY_FLOOR, 0, 0, NULL, NULL},
    {"Round", SN_UNARY_ROUND, 0, 0, NULL, NULL},
    {"Sign", SN_UNARY_SIGN, 0, 0, NULL, NULL},
    {"Elu", SN_UNARY_ELU, 1.0f, 0, "alpha", NULL},
    {"Selu", SN_UNARY_SELU, 1.67326319217681884765625f,
     1.05070102214813232421875f, "alpha", "gamma"},
    {"Celu", SN_UNARY_CELU, 1.0f, 0, "alpha", NULL},
    {"Softplus", SN_UNARY_SOFTPLUS, 0, 0, NULL, NULL},
    {"Softsign", SN_UNARY_SOFTSIGN, 0, 0, NULL, NULL},
    {"ThresholdedRelu", SN_UNARY_THRESHOLDED_RELU, 1.0f, 0, "alpha", NULL},
    {"Shrink", SN_UNARY_SHRINK, 0.5f, 0, "lambd", "bias"},
    {"HardSwish", SN_UNARY_HARD_SWISH, 0, 0, NULL, NULL},
    {"Mish", SN_UNARY_MISH, 0, 0, NULL, NULL},
    {"IsNaN", SN_UNARY_ISNAN, 0, 0, NULL, NULL},
    {"IsInf", SN_UNARY_ISINF, 1, 1, NULL, NULL},
};

/* Clip's bounds: attributes before opset 11, optional inputs after. */
static shardnet_status clip_bound(sn_lower *L, const sn_node *n,
                                  const char *attr, float *v, sn_rt **dev)
{
    sn_rt *in;
    int k;
    shardnet_status st = sn_param_where(L->g, n, attr, &k);
    *dev = NULL;
    if (st != SHARDNET_OK)
        return st;
    if (k < 0) {
        *v = sn_attr_float(n, attr, *v);
        return SHARDNET_OK;
    }
    if (!(in = sn_in(L, n, (size_t)k)))
        return SHARDNET_OK;
    if (sn_rt_elements(in) != 1)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the %s bound must be a scalar", attr);
    if (in->host)
        *v = (float)sn_rt_get_double(in, 0);
    else
        *dev = in; /* computed on the device: a MAX/MIN step */
    return SHARDNET_OK;
}

/* The output type of op on x's type: IsNaN and IsInf give bools. */
static sn_dtype unary_type(sn_unary_op op, sn_dtype x)
{
    return op == SN_UNARY_ISNAN || op == SN_UNARY_ISINF ? SN_DT_BOOL : x;
}

/* x known on the host: op folded there, integers in their own type. */
static shardnet_status fold_unary(sn_lower *L, const sn_node *n,
                                  const sn_unary_desc *u, const sn_rt *x)
{
    sn_dtype t = unary_type(u->op, x->dtype);
    size_t c = sn_rt_elements(x), es = sn_dtype_size(t);
    void *d;
    if (!es || x->dtype == SN_DT_STRING)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "input of type %s is not supported",
                             sn_dtype_name(x->dtype));
    if (!(d = sn_host_alloc(c, es)))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "folding on the host would need more than %zu "
                             "MiB",
                             SN_MAX_HOST_FOLD >> 20);
    for (size_t i = 0; i < c; i++) {
        int64_t v;
        if (!is_float_type(x->dtype) &&
            sn_fold_unary_int(u->op, sn_rt_get_int(x, i), u->alpha, u->beta,
                              &v))
            sn_store_value(t, d, i, 0, v, 1);
        else if (u->gate) /* x times op(x) rounded to float, as a Mul */
            sn_store_value(t, d, i,
                           sn_rt_get_double(x, i) *
                               (float)sn_fold_unary(u->op,
                                                    sn_rt_get_double(x, i),
                                                    u->alpha, u->beta),
                           0, 0);
        else
            sn_store_value(t, d, i,
                           sn_fold_unary(u->op, sn_rt_get_double(x, i),
                                         u->alpha, u->beta),
                           0, 0);
    }
    return sn_out_host(L, n, 0, t, x->rank, x->dims, d);
}

SN_LOWER(sn_lower_unary)
{
    sn_rt *x = sn_in(L, n, 0), *out, *lo_dev = NULL, *hi_dev = NULL;
    sn_step s = {.kind = SN_KERNEL_UNARY};
    shardnet_status st;
    size_t k = 0;

    while (strcmp(unary_ops[k].name, n->op_type))
        k++;
    s.u.unary.op = unary_ops[k].op;
    s.u.unary.alpha = unary_ops[k].alpha;
    s.u.unary.beta = unary_ops[k].beta;
    if (unary_ops[k].alpha_attr)
        s.u.unary.alpha = sn_attr_float(n, unary_ops[k].alpha_attr,
                                        s.u.unary.alpha);
    if (unary_ops[k].beta_attr)
        s.u.unary.beta = sn_attr_float(n, unary_ops[k].beta_attr,
                                       s.u.unary.beta);
    if (s.u.unary.op == SN_UNARY_ISINF) {
        s.u.unary.alpha = sn_attr_int(n, "detect_positive", 1) != 0;
        s.u.unary.beta = sn_attr_int(n, "detect_negative", 1) != 0;
    }
    /* Mul(x, Sigmoid(x)) or Mul(x, HardSigmoid(x)) fused by
     * lib/passes/fuse_gate.c */
    s.u.unary.gate = sn_attr_int(n, "gate_mul", 0) != 0 &&
                     (s.u.unary.op == SN_UNARY_SIGMOID ||
                      s.u.unary.op == SN_UNARY_HARD_SIGMOID);
    if (s.u.unary.op == SN_UNARY_GELU &&
        !strcmp(sn_attr_string(n, "approximate", "none"), "tanh"))
        s.u.unary.op = SN_UNARY_GELU_TANH;
    if (s.u.unary.op == SN_UNARY_CLIP && sn_node_attr(n, "gate_max")) {
        /* a hard swish fused by lib/passes/fuse_gate.c: x alone */
        if (n->ninputs != 1 || !is_float_type(x->dtype))
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "a Clip marked gate_max (a fused hard "
                                 "swish) takes one float input");
        s.u.unary.op = SN_UNARY_CLIP_GATE;
        s.u.unary.alpha = sn_attr_float(n, "gate_add", 0.0f);
        s.u.unary.beta = sn_attr_float(n, "gate_max", 0.0f);
    } else if (s.u.unary.op == SN_UNARY_CLIP && sn_attr_int(n, "relu6", 0)) {
        /* a Relu6 the tensor split applies after a sum of partial sums
         * (lib/runtime/shard_products.c): x alone */
        s.u.unary.alpha = 0.0f;
        s.u.unary.beta = 6.0f;
    } else if (s.u.unary.op == SN_UNARY_CLIP) {
        s.u.unary.alpha = -INFINITY;
        s.u.unary.beta = INFINITY;
        if ((st = clip_bound(L, n, "min", &s.u.unary.alpha, &lo_dev)) ||
            (st = clip_bound(L, n, "max", &s.u.unary.beta, &hi_dev)))
            return st;
    }
    if (x->host && !lo_dev && !hi_dev &&
        (!is_float_type(x->dtype) || sn_rt_elements(x) <= 64))
        return fold_unary(L, n, &s.u.unary, x);
    if ((st = sn_out_device(L, n, 0, x->rank, x->dims, &out)) != SHARDNET_OK)
        return st;
    /* computed in float32, read back as this */
    out->dtype = unary_type(s.u.unary.op, x->dtype);
    if ((st = sn_dev_view(L, n, x, &s.u.unary.x)) != SHARDNET_OK)
        return st;
    s.u.unary.y = out->view;
    s.u.unary.n = sn_rt_elements(x);
    if ((st = sn_emit(L, n, &s)) != SHARDNET_OK)
        return st;
    /* Bounds only known on the device: clamp with broadcast MAX / MIN. */
    if (lo_dev && (st = emit_binary(L, n, SN_BINARY_MAX, out, lo_dev,
                                    out->view)) != SHARDNET_OK)
        return st;
    if (hi_dev && (st = emit_binary(L, n, SN_BINARY_MIN, out, hi_dev,
                                    out->view)) != SHARDNET_OK)
        return st;
    return SHARDNET_OK;
}

/* --- ONNX Runtime's GELU forms -------------------------------------------- */

/*
 * com.microsoft's BiasGelu, gelu(A + B); FastGelu, the tanh approximation
 * of gelu(X + bias), bias optional; QuickGelu, x * sigmoid(alpha x), alpha
 * 1.702 by default.  The bias broadcasts into the input's shape (a value a
 * column, as a rule): a binary step, then the unary one in place.
 * QuickGelu: alpha x, its sigmoid, the product with x.
 */
SN_LOWER(sn_lower_gelu_forms)
{
    sn_rt *x = sn_in(L, n, 0), *b = sn_in(L, n, 1), *out;
    int quick = !strcmp(n->op_type, "QuickGelu");
    sn_dtype t = SN_DT_FLOAT;
    sn_view vx, vb, tmp;
    sn_step s = {.kind = SN_KERNEL_UNARY};
    shardnet_status st;

    if ((st = sn_float_type(n, x, &t)) ||
        (b && (st = sn_broadcast_into(n, x, b, "the bias"))))
        return st;
    if (!L->plan)
        return SHARDNET_UNSUPPORTED; /* not foldable */
    if ((st = sn_dev_view(L, n, x, &vx)) ||
        (st = sn_out_device(L, n, 0, x->rank, x->dims, &out)))
        return st;
    out->dtype = t;
    s.u.unary.n = sn_rt_elements(x);
    if (s.u.unary.n == 0)
        return SHARDNET_OK;
    if (quick) {
        float *alpha = malloc(sizeof *alpha);
        if (!alpha)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "QuickGelu");
        *alpha = sn_attr_float(n, "alpha", 1.702f);
        if ((st = sn_dev_upload(L, n, alpha, 1, &tmp)) ||
            (st = sn_emit_binary(L, n, SN_BINARY_MUL, x->rank, x->dims, vx,
                                 0, NULL, tmp, out->view)))
            return st;
        s.u.unary.op = SN_UNARY_SIGMOID;
        s.u.unary.x = s.u.unary.y = out->view;
        if ((st = sn_emit(L, n, &s)) != SHARDNET_OK)
            return st;
        return sn_emit_binary(L, n, SN_BINARY_MUL, x->rank, x->dims, vx,
                              x->rank, x->dims, out->view, out->view);
    }
    s.u.unary.op = strcmp(n->op_type, "FastGelu") ? SN_UNARY_GELU
                                                   : SN_UNARY_GELU_TANH;
    s.u.unary.x = vx;
    if (b) {
        if ((st = sn_dev_view(L, n, b, &vb)) ||
            (st = sn_emit_binary(L, n, SN_BINARY_ADD, x->rank, x->dims, vx,
                                 b->rank, b->dims, vb, out->view)))
            return st;
        s.u.unary.x = out->view;
    }
    s.u.unary.y = out->view;
    return sn_emit(L, n, &s);
}

/* --- one minus x, one over x ---------------------------------------------- */

/* out = 1 op x: a broadcast binary step against a device scalar 1. */
static shardnet_status emit_from_one(sn_lower *L, const sn_node *n,
                                     sn_binary_op op)
{
    sn_rt *x = sn_in(L, n, 0), *out;
    sn_view one, vx;
    float *data = malloc(sizeof *data);
    shardnet_status st;
    if (!data)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "node '%s'", n->name);
    *data = 1.0f;
    if ((st = sn_dev_upload(L, n, data, 1, &one)) != SHARDNET_OK ||
        (st = sn_dev_view(L, n, x, &vx)) != SHARDNET_OK ||
        (st = sn_out_device(L, n, 0, x->rank, x->dims, &out)) != SHARDNET_OK)
        return st;
    out->dtype = x->dtype; /* computed in float32, read back as this */
    return sn_emit_binary(L, n, op, 0, NULL, one, x->rank, x->dims, vx,
                          out->view);
}

/* Reciprocal: 1 / x. */
SN_LOWER(sn_lower_reciprocal)
{
    return emit_from_one(L, n, SN_BINARY_DIV);
}

/* Not: on the host where its input is known there (shape arithmetic: a
 * test of a Size); booleans are 0 and 1 on the device, so 1 - x. */
SN_LOWER(sn_lower_not)
{
    sn_rt *x = sn_in(L, n, 0);
    if (x && sn_host_known(x)) {
        size_t c = sn_rt_elements(x);
        unsigned char *d = sn_host_alloc(c, 1);
        if (!d)
            return sn_node_error(n, SHARDNET_OUT_OF_MEMORY,
                                 "%zu booleans on the host", c);
        for (size_t i = 0; i < c; i++)
            d[i] = sn_rt_get_double(x, i) == 0;
        return sn_out_host(L, n, 0, SN_DT_BOOL, x->rank, x->dims, d);
    }
    return emit_from_one(L, n, SN_BINARY_SUB);
}

/* --- Max, Min, Sum, Mean of any number of inputs ------------------------- */

#define MAX_VARIADIC 64

/* The element-wise op a variadic node folds its inputs with, left to
 * right; Mean is the sum divided by the count. */
static sn_binary_op variadic_op(const sn_node *n)
{
    return !strcmp(n->op_type, "Max")   ? SN_BINARY_MAX
           : !strcmp(n->op_type, "Min") ? SN_BINARY_MIN
                                        : SN_BINARY_ADD;
}

/* All inputs on the host: fold them there, in the inputs' type. */
static shardnet_status fold_variadic(sn_lower *L, const sn_node *n,
                                     sn_binary_op op, sn_rt **in, size_t k)
{
    sn_rt acc = *in[0];
    void *held = NULL;
    shardnet_status st = SHARDNET_OK;
    for (size_t i = 1; i < k && st == SHARDNET_OK; i++) {
        int64_t dims[SN_MAX_DIMS];
        int rank;
        void *d = NULL;
        sn_broadcast_shape(acc.rank, acc.dims, in[i]->rank, in[i]->dims,
                           &rank, dims);
        st = sn_fold_broadcast(n, op, &acc, in[i], rank, dims, acc.dtype,
                               &d);
        free(held);
        held = d;
        acc.host = d;
        acc.rank = rank;
        memcpy(acc.dims, dims, sizeof dims);
    }
    if (st == SHARDNET_OK && !strcmp(n->op_type, "Mean"))
        for (size_t e = 0, c = sn_rt_elements(&acc); e < c; e++)
            sn_store_value(acc.dtype, held, e,
                           sn_rt_get_double(&acc, e) / (double)k, 0, 0);
    if (st != SHARDNET_OK) {
        free(held);
        return st;
    }
    return sn_out_host(L, n, 0, acc.dtype, acc.rank, acc.dims, held);
}

/* Max, Min, Sum and Mean: numpy broadcasting over all inputs, one binary
 * step per input after the first (the running result in scratch), Mean's
 * sum then divided by the count.  One input is passed on as it is. */
SN_LOWER(sn_lower_variadic)
{
    sn_rt *in[MAX_VARIADIC], *out;
    sn_binary_op op = variadic_op(n);
    int mean = !strcmp(n->op_type, "Mean"), all_host = 1;
    int64_t dims[SN_MAX_DIMS];
    int rank = 0;
    size_t k = 0;
    shardnet_status st;
    for (size_t i = 0; i < n->ninputs; i++) {
        sn_rt *x = sn_in(L, n, i);
        if (!x)
            continue;
        if (k == MAX_VARIADIC)
            return sn_node_error(n, SHARDNET_UNSUPPORTED,
                                 "more than %d inputs", MAX_VARIADIC);
        if (k && x->dtype != in[0]->dtype)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "input %zu is %s, input 0 %s", i,
                                 sn_dtype_name(x->dtype),
                                 sn_dtype_name(in[0]->dtype));
        if (k ? !sn_broadcast_shape(rank, dims, x->rank, x->dims, &rank, dims)
              : (memcpy(dims, x->dims, sizeof dims), rank = x->rank, 0))
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "input %zu cannot be broadcast with the "
                                 "ones before it",
                                 i);
        all_host &= x->host != NULL;
        in[k++] = x;
    }
    if (!k)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT, "no input");
    if (k == 1)
        return sn_out_alias(L, n, 0, in[0], in[0]->rank, in[0]->dims);
    if (all_host)
        return fold_variadic(L, n, op, in, k);
    if ((st = sn_out_device(L, n, 0, rank, dims, &out)) != SHARDNET_OK)
        return st;
    out->dtype = in[0]->dtype; /* computed in float32, read back as this */
    /* The running result: its shape grows as the inputs broadcast in. */
    sn_rt acc = *in[0];
    sn_view vacc;
    if ((st = sn_dev_view(L, n, in[0], &vacc)) != SHARDNET_OK)
        return st;
    for (size_t i = 1; i < k; i++) {
        sn_view vx, dst = out->view;
        int r;
        int64_t d[SN_MAX_DIMS];
        sn_broadcast_shape(acc.rank, acc.dims, in[i]->rank, in[i]->dims, &r,
                           d);
        if ((i + 1 < k || mean) &&
            (st = sn_scratch(L, sn_dims_product(0, r, d), &dst)) !=
                SHARDNET_OK)
            return st;
        if ((st = sn_dev_view(L, n, in[i], &vx)) != SHARDNET_OK ||
            (st = sn_emit_binary(L, n, op, acc.rank, acc.dims, vacc,
                                 in[i]->rank, in[i]->dims, vx, dst)) !=
                SHARDNET_OK)
            return st;
        vacc = dst;
        acc.rank = r;
        memcpy(acc.dims, d, sizeof d);
    }
    if (mean) {
        sn_view count;
        float *c = malloc(sizeof *c);
        if (!c)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "node '%s'", n->name);
        *c = (float)k;
        if ((st = sn_dev_upload(L, n, c, 1, &count)) != SHARDNET_OK)
            return st;
        return sn_emit_binary(L, n, SN_BINARY_DIV, acc.rank, acc.dims, vacc,
                              0, NULL, count, out->view);
    }
    return SHARDNET_OK;
}
