/*
 * Helpers the operator files share (declared in ops.h): axes, broadcast
 * shapes and strides; parameters that moved between attribute and input;
 * host folding (integer inputs, element sizes, bounded allocations, storing
 * a value of any type); the types a device output may report.  The
 * lowerings live in one file per family (ops_shape.c, ops_elementwise.c,
 * ops_nn.c, ops_conv.c, ops_norm.c, ops_data.c, ops_reduce.c), and the
 * table that names them is lib/ops/registry.c.  Integer tensors (shapes,
 * axes, indices) are computed on the host when the model is planned; float
 * tensors live on the device.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

sn_act sn_fused_act(const sn_node *n)
{
    const char *a = sn_attr_string(n, "activation", "");
    return !strcmp(a, "Relu")    ? SN_ACT_RELU
           : !strcmp(a, "Relu6") ? SN_ACT_RELU6
                                 : SN_ACT_NONE;
}

int sn_axis(int64_t axis, int rank)
{
    if (axis < -rank || axis >= rank)
        return -1;
    return (int)(axis < 0 ? axis + rank : axis);
}

int sn_broadcast_shape(int ra, const int64_t *a, int rb, const int64_t *b,
                       int *rank, int64_t *out)
{
    int r = ra > rb ? ra : rb;
    for (int i = 0; i < r; i++) {
        int64_t da = i < ra ? a[ra - 1 - i] : 1;
        int64_t db = i < rb ? b[rb - 1 - i] : 1;
        if (da != db && da != 1 && db != 1)
            return 0;
        out[r - 1 - i] = da == 1 ? db : da;
    }
    *rank = r;
    return 1;
}

shardnet_status sn_broadcast_error(const sn_node *n, int ra, const int64_t *a,
                                   int rb, const int64_t *b)
{
    char fa[160], fb[160];
    return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                         "input shapes %s and %s cannot be broadcast together",
                         sn_format_dims(fa, sizeof fa, ra, a),
                         sn_format_dims(fb, sizeof fb, rb, b));
}

shardnet_status sn_broadcast_into(const sn_node *n, const sn_rt *a,
                                  const sn_rt *b, const char *what)
{
    int64_t dims[SN_MAX_DIMS];
    int rank;
    if (!sn_broadcast_shape(a->rank, a->dims, b->rank, b->dims, &rank, dims))
        return sn_broadcast_error(n, a->rank, a->dims, b->rank, b->dims);
    if (rank != a->rank ||
        memcmp(dims, a->dims, (size_t)rank * sizeof *dims))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "%s widens the input's shape", what);
    return SHARDNET_OK;
}

void sn_strides(int rank, const int64_t *dims, int64_t *strides)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i];
    }
}

void sn_index_next(int rank, const int64_t *dims, int64_t *idx,
                   const int64_t *str, int64_t *pos)
{
    for (int i = rank - 1; i >= 0; i--) {
        *pos += str[i];
        if (++idx[i] < dims[i])
            return;
        *pos -= str[i] * dims[i];
        idx[i] = 0;
    }
}

shardnet_status sn_host_ints(const sn_node *n, const sn_rt *rt,
                             const char *what, int64_t *out, size_t cap,
                             size_t *count)
{
    size_t c;
    if (!rt->host)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "%s must be known when the model is planned "
                             "(a constant or an integer input), not computed "
                             "on the device",
                             what);
    c = sn_rt_elements(rt);
    if (c > cap)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "%s has %zu values, at most %zu allowed", what, c,
                             cap);
    for (size_t i = 0; i < c; i++)
        out[i] = sn_rt_get_int(rt, i);
    *count = c;
    return SHARDNET_OK;
}

static const struct moved_param {
    const char *op, *param;
    int input;
    int64_t since;
    /* Below this opset the input form is accepted too (an input given
     * there wins over the attribute): Split-1 had both. */
    int64_t both_before;
} moved_params[] = {
    {"Slice", "starts", 1, 10, 0},    {"Slice", "ends", 2, 10, 0},
    {"Slice", "axes", 3, 10, 0},      {"Slice", "steps", 4, 10, 0},
    {"Clip", "min", 1, 11, 0},        {"Clip", "max", 2, 11, 0},
    {"Squeeze", "axes", 1, 13, 0},    {"Unsqueeze", "axes", 1, 13, 0},
    {"Split", "split", 1, 13, 2},     {"ReduceSum", "axes", 1, 13, 0},
    {"ReduceMean", "axes", 1, 18, 0}, {"ReduceMax", "axes", 1, 18, 0},
    {"ReduceMin", "axes", 1, 18, 0},  {"ReduceProd", "axes", 1, 18, 0},
    {"ReduceL1", "axes", 1, 18, 0},   {"ReduceL2", "axes", 1, 18, 0},
    {"ReduceLogSum", "axes", 1, 18, 0},
    {"ReduceLogSumExp", "axes", 1, 18, 0},
    {"ReduceSumSquare", "axes", 1, 18, 0},
    {"TopK", "k", 1, 10, 0},
};

static const struct moved_param *moved_param(const char *op,
                                             const char *param)
{
    for (size_t i = 0; i < sizeof moved_params / sizeof moved_params[0];
         i++)
        if (!strcmp(moved_params[i].op, op) &&
            !strcmp(moved_params[i].param, param))
            return &moved_params[i];
    return NULL;
}

int sn_param_input(const char *op, const char *param, int64_t opset,
                   int64_t *since)
{
    const struct moved_param *m = moved_param(op, param);
    if (!m)
        return -2;
    if (since)
        *since = m->since;
    return opset >= m->since ? m->input : -1;
}

shardnet_status sn_param_where(const sn_graph *g, const sn_node *n,
                               const char *param, int *input)
{
    int64_t since = 0;
    int k = sn_param_input(n->op_type, param, g->opset, &since);
    if (k == -2)
        return sn_node_error(n, SHARDNET_INTERNAL,
                             "'%s' is not a parameter that moved between "
                             "attribute and input",
                             param);
    if (k < 0) {
        /* The input it would be, had the opset been `since`. */
        const struct moved_param *m = moved_param(n->op_type, param);
        int at = m->input;
        int has = (size_t)at < n->ninputs && n->inputs[at] >= 0;
        if (has && g->opset < m->both_before)
            k = at; /* an old version that took either form */
        else if (has)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "'%s' is an attribute before opset %lld, "
                                 "not input %d (the model's opset is %lld)",
                                 param, (long long)since, at,
                                 (long long)g->opset);
    } else if (sn_node_attr(n, param)) {
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "'%s' is input %d from opset %lld, not an "
                             "attribute (the model's opset is %lld)",
                             param, k, (long long)since,
                             (long long)g->opset);
    }
    *input = k;
    return SHARDNET_OK;
}

shardnet_status sn_attr_ints(const sn_node *n, const char *name,
                             int64_t *out, size_t cap, size_t *count,
                             int *given)
{
    const sn_attr *a = sn_node_attr(n, name);
    *count = 0;
    if (given)
        *given = 0;
    if (!a)
        return SHARDNET_OK;
    if (a->type != SN_ATTR_INTS)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "attribute '%s' must be a list of integers",
                             name);
    if (a->count > cap)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "attribute '%s' has %zu values, at most %zu "
                             "allowed",
                             name, a->count, cap);
    memcpy(out, a->ints, a->count * sizeof *out);
    *count = a->count;
    if (given)
        *given = 1;
    return SHARDNET_OK;
}

shardnet_status sn_param_read(const sn_node *n, const char *param,
                              int input, const sn_rt *in, int64_t *out,
                              size_t cap, size_t *count, int *given)
{
    *count = 0;
    *given = 0;
    if (input >= 0) {
        if (!in)
            return SHARDNET_OK;
        *given = 1;
        if (sn_rt_elements(in) == 0) /* an empty list: nothing to read */
            return SHARDNET_OK;
        return sn_host_ints(n, in, param, out, cap, count);
    }
    return sn_attr_ints(n, param, out, cap, count, given);
}

shardnet_status sn_param_ints(sn_lower *L, const sn_node *n,
                              const char *param, int64_t *out, size_t cap,
                              size_t *count, int *given)
{
    int k;
    shardnet_status st = sn_param_where(L->g, n, param, &k);
    *count = 0;
    *given = 0;
    if (st != SHARDNET_OK)
        return st;
    return sn_param_read(n, param, k, k >= 0 ? sn_in(L, n, (size_t)k) : NULL,
                         out, cap, count, given);
}

shardnet_status sn_emit_broadcast_copy(sn_lower *L, const sn_node *n,
                                       sn_rt *src, int rank,
                                       const int64_t *dims, sn_view dst)
{
    sn_step s = {.kind = SN_KERNEL_COPY};
    int64_t sstr[SN_MAX_DIMS], dstr[SN_MAX_DIMS];
    shardnet_status st = sn_dev_view(L, n, src, &s.u.copy.src);
    if (st != SHARDNET_OK)
        return st;
    sn_strides(src->rank, src->dims, sstr);
    sn_strides(rank, dims, dstr);
    s.u.copy.dst = dst;
    s.u.copy.rank = (size_t)rank;
    for (int i = 0; i < rank; i++) {
        int j = i - (rank - src->rank); /* src dimension, right-aligned */
        s.u.copy.shape[i] = (size_t)dims[i];
        s.u.copy.dst_stride[i] = (ptrdiff_t)dstr[i];
        s.u.copy.src_stride[i] =
            j < 0 || src->dims[j] == 1 ? 0 : (ptrdiff_t)sstr[j];
    }
    return sn_emit(L, n, &s);
}

size_t sn_dims_product(int from, int to, const int64_t *dims)
{
    size_t p = 1;
    for (int i = from; i < to; i++)
        p *= (size_t)dims[i];
    return p;
}

int sn_host_known(const sn_rt *rt)
{
    return rt->host != NULL || sn_rt_elements(rt) == 0;
}

shardnet_status sn_host_ints_or_empty(const sn_node *n, const sn_rt *rt,
                                      const char *what, int64_t *out,
                                      size_t cap, size_t *count)
{
    if (sn_rt_elements(rt) == 0) {
        *count = 0;
        return SHARDNET_OK;
    }
    return sn_host_ints(n, rt, what, out, cap, count);
}

shardnet_status sn_host_elem_size(const sn_node *n, sn_dtype t, size_t *es)
{
    *es = sn_dtype_size(t);
    if (!*es || t == SN_DT_STRING)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "tensors of type %s are not supported",
                             sn_dtype_name(t));
    return SHARDNET_OK;
}

void *sn_host_alloc(size_t count, size_t es)
{
    size_t bytes;
    if (__builtin_mul_overflow(count, es, &bytes) || bytes > SN_MAX_HOST_FOLD)
        return NULL;
    return malloc(bytes ? bytes : 1);
}

shardnet_status sn_device_type(const sn_node *n, sn_dtype t, sn_dtype *out)
{
    switch (t) {
    case SN_DT_FLOAT:
    case SN_DT_DOUBLE:
    case SN_DT_INT64:
    case SN_DT_INT32:
    case SN_DT_INT8:
    case SN_DT_UINT8:
    case SN_DT_BOOL:
        *out = t;
        return SHARDNET_OK;
    case SN_DT_FLOAT16: /* floats, rounded to t by exec.c */
    case SN_DT_BFLOAT16:
        *out = SN_DT_FLOAT;
        return SHARDNET_OK;
    default:
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "tensors of type %s are not supported on "
                             "devices",
                             sn_dtype_name(t));
    }
}

shardnet_status sn_out_device_as(sn_lower *L, const sn_node *n, sn_dtype t,
                                 int rank, const int64_t *dims, sn_rt **out)
{
    sn_dtype dt = SN_DT_FLOAT;
    shardnet_status st;
    if ((st = sn_device_type(n, t, &dt)) != SHARDNET_OK ||
        (st = sn_out_device(L, n, 0, rank, dims, out)) != SHARDNET_OK)
        return st;
    (*out)->dtype = dt;
    return SHARDNET_OK;
}

shardnet_status sn_float_type(const sn_node *n, const sn_rt *x, sn_dtype *out)
{
    if (x->dtype == SN_DT_FLOAT16 || x->dtype == SN_DT_BFLOAT16) {
        *out = SN_DT_FLOAT; /* rounded to x's type by exec.c */
        return SHARDNET_OK;
    }
    if (x->dtype != SN_DT_FLOAT && x->dtype != SN_DT_DOUBLE)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "input of type %s is not supported (float "
                             "only)",
                             sn_dtype_name(x->dtype));
    *out = x->dtype;
    return SHARDNET_OK;
}

void sn_bcast_strides(int rank_a, const int64_t *dims_a, int rank,
                      int64_t *str)
{
    int64_t s[SN_MAX_DIMS];
    sn_strides(rank_a, dims_a, s);
    for (int i = 0; i < rank; i++) {
        int j = i - (rank - rank_a);
        str[i] = j < 0 || dims_a[j] == 1 ? 0 : s[j];
    }
}
