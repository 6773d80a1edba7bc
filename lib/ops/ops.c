/*
 * Helpers the operators share, and the element-wise and shape operators
 * (the table that names them is lib/ops/registry.c).  Integer tensors (shapes, axes, indices) are computed on the
 * host when the model is planned; float tensors live on the device.
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

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

void sn_strides(int rank, const int64_t *dims, int64_t *strides)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i];
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
    sn_step s = {.kind = SN_STEP_COPY};
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

/* --- aliases: Identity, Dropout, Reshape, Flatten, Squeeze, Unsqueeze --- */

SN_LOWER(sn_lower_identity)
{
    sn_rt *x = sn_in(L, n, 0), *ratio = sn_in(L, n, 1);
    sn_rt *training = sn_in(L, n, 2);
    shardnet_status st;
    /* In training mode a ratio of 0 still drops nothing. */
    int drops = ratio ? !ratio->host || sn_rt_get_double(ratio, 0) != 0.0
                      : sn_attr_float(n, "ratio", 0.5f) != 0.0f;
    if (training && (!training->host || sn_rt_get_int(training, 0)) && drops)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "training_mode is not supported: shardnet runs "
                             "inference, where dropout passes its input on");
    st = sn_out_alias(L, n, 0, x, x->rank, x->dims);
    if (st != SHARDNET_OK)
        return st;
    /* Dropout's optional mask: all true in inference. */
    if (n->noutputs > 1 && n->outputs[1] >= 0) {
        size_t c = sn_rt_elements(x);
        unsigned char *m = malloc(c ? c : 1);
        if (!m)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "dropout mask");
        memset(m, 1, c);
        return sn_out_host(L, n, 1, SN_DT_BOOL, x->rank, x->dims, m);
    }
    return SHARDNET_OK;
}

SN_LOWER(sn_lower_reshape)
{
    sn_rt *x = sn_in(L, n, 0), *shape_in = sn_in(L, n, 1);
    int64_t shape[SN_MAX_DIMS + 1];
    size_t rank = 0, known = 1;
    int infer = -1;
    int allowzero = (int)sn_attr_int(n, "allowzero", 0);
    shardnet_status st;

    if (shape_in) {
        st = sn_host_ints(n, shape_in, "the target shape", shape,
                          SN_MAX_DIMS, &rank);
        if (st != SHARDNET_OK)
            return st;
    } else {
        const sn_attr *a = sn_node_attr(n, "shape");
        if (!a || a->type != SN_ATTR_INTS || a->count > SN_MAX_DIMS)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "needs a shape input or attribute of at "
                                 "most %d values",
                                 SN_MAX_DIMS);
        rank = a->count;
        memcpy(shape, a->ints, rank * sizeof *shape);
    }
    for (size_t i = 0; i < rank; i++) {
        if (shape[i] == 0 && !allowzero) {
            if ((int)i >= x->rank)
                return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                     "0 in the shape at %zu copies a "
                                     "dimension the input lacks",
                                     i);
            shape[i] = x->dims[i];
        }
        if (shape[i] == -1) {
            if (infer >= 0)
                return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                     "more than one -1 in the shape");
            infer = (int)i;
            continue;
        }
        if (shape[i] < 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "negative dimension %lld in the shape",
                                 (long long)shape[i]);
        known *= (size_t)shape[i];
    }
    if (infer >= 0) {
        if (known == 0 || sn_rt_elements(x) % known)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "cannot infer the -1 dimension: %zu "
                                 "elements into blocks of %zu",
                                 sn_rt_elements(x), known);
        shape[infer] = (int64_t)(sn_rt_elements(x) / known);
    }
    return sn_out_alias(L, n, 0, x, (int)rank, shape);
}

SN_LOWER(sn_lower_flatten)
{
    sn_rt *x = sn_in(L, n, 0);
    int64_t axis = sn_attr_int(n, "axis", 1), d[2] = {1, 1};
    if (axis < 0)
        axis += x->rank;
    if (axis < 0 || axis > x->rank)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "axis %lld out of range for rank %d",
                             (long long)sn_attr_int(n, "axis", 1), x->rank);
    for (int i = 0; i < x->rank; i++)
        d[i < axis ? 0 : 1] *= x->dims[i];
    return sn_out_alias(L, n, 0, x, 2, d);
}

/* The axes of Squeeze/Unsqueeze: an attribute before opset 13, an input
 * from then on. */
static shardnet_status axes_of(sn_lower *L, const sn_node *n, int64_t *axes,
                               size_t *count, int *given)
{
    return sn_param_ints(L, n, "axes", axes, SN_MAX_DIMS, count, given);
}

SN_LOWER(sn_lower_squeeze)
{
    sn_rt *x = sn_in(L, n, 0);
    int64_t axes[SN_MAX_DIMS], out[SN_MAX_DIMS];
    size_t naxes;
    int given, drop[SN_MAX_DIMS] = {0}, r = 0;
    shardnet_status st = axes_of(L, n, axes, &naxes, &given);
    if (st != SHARDNET_OK)
        return st;
    for (size_t i = 0; i < naxes; i++) {
        int a = sn_axis(axes[i], x->rank);
        if (a < 0 || x->dims[a] != 1)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "axis %lld is not a dimension of size 1",
                                 (long long)axes[i]);
        drop[a] = 1;
    }
    for (int i = 0; i < x->rank; i++) {
        if (given ? drop[i] : x->dims[i] == 1)
            continue;
        out[r++] = x->dims[i];
    }
    return sn_out_alias(L, n, 0, x, r, out);
}

SN_LOWER(sn_lower_unsqueeze)
{
    sn_rt *x = sn_in(L, n, 0);
    int64_t axes[SN_MAX_DIMS], out[SN_MAX_DIMS];
    size_t naxes;
    int given, ins[SN_MAX_DIMS] = {0}, rank, j = 0;
    shardnet_status st = axes_of(L, n, axes, &naxes, &given);
    if (st != SHARDNET_OK)
        return st;
    rank = x->rank + (int)naxes;
    if (!given || rank > SN_MAX_DIMS)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             given ? "result would have rank above %d"
                                   : "needs axes (at most %d dimensions)",
                             SN_MAX_DIMS);
    for (size_t i = 0; i < naxes; i++) {
        int a = sn_axis(axes[i], rank);
        if (a < 0 || ins[a])
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "axis %lld out of range or repeated",
                                 (long long)axes[i]);
        ins[a] = 1;
    }
    for (int i = 0; i < rank; i++)
        out[i] = ins[i] ? 1 : x->dims[j++];
    return sn_out_alias(L, n, 0, x, rank, out);
}

/* --- host-side values: Shape, Constant, Cast --------------------------- */

SN_LOWER(sn_lower_shape)
{
    sn_rt *x = sn_in(L, n, 0);
    int64_t start = sn_attr_int(n, "start", 0);
    int64_t end = sn_attr_int(n, "end", x->rank);
    int64_t *d, len;
    if (start < 0)
        start += x->rank;
    if (end < 0)
        end += x->rank;
    start = start < 0 ? 0 : start > x->rank ? x->rank : start;
    end = end < 0 ? 0 : end > x->rank ? x->rank : end;
    len = end > start ? end - start : 0;
    d = malloc((size_t)(len ? len : 1) * sizeof *d);
    if (!d)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "shape");
    for (int64_t i = 0; i < len; i++)
        d[i] = x->dims[start + i];
    return sn_out_host(L, n, 0, SN_DT_INT64, 1, &len, d);
}

SN_LOWER(sn_lower_constant)
{
    const sn_attr *a = n->nattrs ? &n->attrs[0] : NULL;
    for (size_t i = 0; i < n->nattrs; i++)
        if (!strncmp(n->attrs[i].name, "value", 5))
            a = &n->attrs[i];
    if (!a)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT, "has no value");
    if (!strcmp(a->name, "value") && a->type == SN_ATTR_TENSOR &&
        a->tensor >= 0) {
        const sn_value *v = &L->g->values[a->tensor];
        size_t bytes = v->nbytes;
        void *d = malloc(bytes ? bytes : 1);
        if (!d)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "constant");
        if (bytes) /* an empty constant may have no data */
            memcpy(d, v->data, bytes);
        return sn_out_host(L, n, 0, v->dtype, v->rank, v->dims, d);
    }
    if (!strcmp(a->name, "value_float") || !strcmp(a->name, "value_int")) {
        int isf = a->name[6] == 'f';
        void *d = malloc(8);
        if (!d)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "constant");
        if (isf)
            *(float *)d = a->f;
        else
            *(int64_t *)d = a->i;
        return sn_out_host(L, n, 0, isf ? SN_DT_FLOAT : SN_DT_INT64, 0, NULL,
                           d);
    }
    if ((!strcmp(a->name, "value_floats") && a->type == SN_ATTR_FLOATS) ||
        (!strcmp(a->name, "value_ints") && a->type == SN_ATTR_INTS)) {
        int isf = a->type == SN_ATTR_FLOATS;
        int64_t len = (int64_t)a->count;
        size_t es = isf ? sizeof(float) : sizeof(int64_t);
        void *d = malloc(a->count ? a->count * es : 1);
        if (!d)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "constant");
        memcpy(d, isf ? (void *)a->floats : (void *)a->ints, a->count * es);
        return sn_out_host(L, n, 0, isf ? SN_DT_FLOAT : SN_DT_INT64, 1, &len,
                           d);
    }
    return sn_node_error(n, SHARDNET_UNSUPPORTED,
                         "constant attribute '%s' is not supported", a->name);
}

void sn_store_value(sn_dtype t, void *p, size_t i, double dv, int64_t iv,
                    int is_int)
{
    switch (t) {
    case SN_DT_FLOAT:
        ((float *)p)[i] = is_int ? (float)iv : (float)dv;
        break;
    case SN_DT_DOUBLE:
        ((double *)p)[i] = is_int ? (double)iv : dv;
        break;
    case SN_DT_INT64:
        ((int64_t *)p)[i] = is_int ? iv : (int64_t)dv;
        break;
    case SN_DT_INT32:
        ((int32_t *)p)[i] = (int32_t)(is_int ? iv : (int64_t)dv);
        break;
    case SN_DT_INT16:
        ((int16_t *)p)[i] = (int16_t)(is_int ? iv : (int64_t)dv);
        break;
    case SN_DT_INT8:
        ((int8_t *)p)[i] = (int8_t)(is_int ? iv : (int64_t)dv);
        break;
    case SN_DT_UINT8:
        ((uint8_t *)p)[i] = (uint8_t)(is_int ? iv : (int64_t)dv);
        break;
    case SN_DT_UINT16:
        ((uint16_t *)p)[i] = (uint16_t)(is_int ? iv : (int64_t)dv);
        break;
    case SN_DT_UINT32:
        ((uint32_t *)p)[i] = (uint32_t)(is_int ? iv : (int64_t)dv);
        break;
    case SN_DT_UINT64:
        ((uint64_t *)p)[i] = (uint64_t)(is_int ? iv : (int64_t)dv);
        break;
    case SN_DT_BOOL:
        ((uint8_t *)p)[i] = is_int ? iv != 0 : dv != 0.0;
        break;
    case SN_DT_FLOAT16:
        ((uint16_t *)p)[i] = sn_float_to_half(is_int ? (float)iv : (float)dv);
        break;
    case SN_DT_BFLOAT16:
        ((uint16_t *)p)[i] = sn_float_to_bf16(is_int ? (float)iv : (float)dv);
        break;
    default:
        break;
    }
}

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

SN_LOWER(sn_lower_cast)
{
    sn_rt *x = sn_in(L, n, 0);
    sn_dtype to = cast_target(n);
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
    /* Device tensors are float32: a cast to a float type is a relabel; a
     * cast to anything else is only done where the result leaves the model
     * (converted when read back), since nothing here computes on it. */
    if (to == SN_DT_FLOAT || to == SN_DT_DOUBLE || consumed_only_as_output(L, n)) {
        shardnet_status st = sn_out_alias(L, n, 0, x, x->rank, x->dims);
        if (st == SHARDNET_OK)
            L->rt[n->outputs[0]].dtype = to;
        return st;
    }
    return sn_node_error(n, SHARDNET_UNSUPPORTED,
                         "cast of a tensor computed on the device to %s is "
                         "not supported",
                         sn_dtype_name(to));
}

/* --- element-wise binary ops -------------------------------------------- */

static const struct {
    const char *name;
    sn_binary_op op;
} binary_ops[] = {{"Add", SN_BINARY_ADD}, {"Sub", SN_BINARY_SUB},
                  {"Mul", SN_BINARY_MUL}, {"Div", SN_BINARY_DIV},
                  {"Pow", SN_BINARY_POW}, {"Max", SN_BINARY_MAX},
                  {"Min", SN_BINARY_MIN}};

static int64_t int_op(sn_binary_op op, int64_t a, int64_t b)
{
    switch (op) {
    case SN_BINARY_ADD:
        return (int64_t)((uint64_t)a + (uint64_t)b);
    case SN_BINARY_SUB:
        return (int64_t)((uint64_t)a - (uint64_t)b);
    case SN_BINARY_MUL:
        return (int64_t)((uint64_t)a * (uint64_t)b);
    case SN_BINARY_DIV:
        return b == 0 || (a == INT64_MIN && b == -1) ? 0 : a / b;
    case SN_BINARY_MAX:
        return a > b ? a : b;
    case SN_BINARY_MIN:
        return a < b ? a : b;
    case SN_BINARY_POW: {
        int64_t r = 1;
        for (int64_t i = 0; i < b && i < 64; i++)
            r *= a;
        return b < 0 ? 0 : r;
    }
    default:
        return 0;
    }
}

static double float_op(sn_binary_op op, double a, double b)
{
    switch (op) {
    case SN_BINARY_ADD:
        return a + b;
    case SN_BINARY_SUB:
        return a - b;
    case SN_BINARY_MUL:
        return a * b;
    case SN_BINARY_DIV:
        return a / b;
    case SN_BINARY_MAX:
        return fmax(a, b);
    case SN_BINARY_MIN:
        return fmin(a, b);
    case SN_BINARY_POW:
        return pow(a, b);
    default:
        return 0;
    }
}

/* Shape arithmetic on the host: both inputs known. */
static shardnet_status fold_binary(sn_lower *L, const sn_node *n,
                                   sn_binary_op op, sn_rt *a, sn_rt *b,
                                   int rank, const int64_t *dims)
{
    int64_t sa[SN_MAX_DIMS], sb[SN_MAX_DIMS], idx[SN_MAX_DIMS] = {0};
    int64_t out_count = 1;
    sn_dtype t = a->dtype;
    size_t es = sn_dtype_size(t);
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
        if (is_float_type(t))
            sn_store_value(t, d, (size_t)k,
                  float_op(op, sn_rt_get_double(a, ia),
                           sn_rt_get_double(b, ib)),
                  0, 0);
        else
            sn_store_value(t, d, (size_t)k, 0,
                  int_op(op, sn_rt_get_int(a, ia), sn_rt_get_int(b, ib)), 1);
        for (int i = rank - 1; i >= 0 && ++idx[i] == dims[i]; i--)
            idx[i] = 0;
    }
    return sn_out_host(L, n, 0, t, rank, dims, d);
}

/* One binary step c = a op b with numpy broadcasting. */
shardnet_status sn_emit_binary(sn_lower *L, const sn_node *n,
                               sn_binary_op op, int ra, const int64_t *da,
                               sn_view a, int rb, const int64_t *db, sn_view b,
                               sn_view c)
{
    sn_step s = {.kind = SN_STEP_BINARY};
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
    return sn_emit(L, n, &s);
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
 * Before opset 7, Add, Sub, Mul, Div and Pow broadcast only when the
 * attribute broadcast is 1, and only B onto A: B's shape is a contiguous
 * run of A's, aligned at the end, or at `axis` when given (A (2,3,4,5),
 * B (3,4), axis 1).  B's shape, padded with ones after the run, then
 * broadcasts the numpy way.  Without broadcast, the shapes must be equal.
 * *bl is b with that shape (same data).
 */
static shardnet_status legacy_broadcast(const sn_node *n, const sn_rt *a,
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
        if ((st = legacy_broadcast(n, a, b, &bl)) != SHARDNET_OK)
            return st;
    } else {
        bl = *b;
    }
    if (!sn_broadcast_shape(a->rank, a->dims, bl.rank, bl.dims, &rank, dims))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "input shapes cannot be broadcast together");
    /* fold_binary reads only bl's shape and host data. */
    if (a->host && b->host && !is_float_type(a->dtype))
        return fold_binary(L, n, op, a, &bl, rank, dims);
    if (a->host && b->host && sn_rt_elements(a) <= 64 &&
        sn_rt_elements(b) <= 64)
        return fold_binary(L, n, op, a, &bl, rank, dims);
    if ((st = sn_out_device(L, n, 0, rank, dims, &out)) != SHARDNET_OK)
        return st;
    out->dtype = a->dtype; /* computed in float32, read back as this */
    /* The views come from the graph's own values (b, not its copy bl). */
    if ((st = sn_dev_view(L, n, a, &va)) != SHARDNET_OK ||
        (st = sn_dev_view(L, n, b, &vb)) != SHARDNET_OK)
        return st;
    return sn_emit_binary(L, n, op, a->rank, a->dims, va, bl.rank, bl.dims,
                          vb, out->view);
}

/* --- element-wise unary ops --------------------------------------------- */

static const struct {
    const char *name;
    sn_unary_op op;
    float alpha, beta; /* defaults of the op's attributes */
} unary_ops[] = {
    {"Relu", SN_UNARY_RELU, 0, 0},
    {"Sigmoid", SN_UNARY_SIGMOID, 0, 0},
    {"Tanh", SN_UNARY_TANH, 0, 0},
    {"Erf", SN_UNARY_ERF, 0, 0},
    {"Exp", SN_UNARY_EXP, 0, 0},
    {"Log", SN_UNARY_LOG, 0, 0},
    {"Sqrt", SN_UNARY_SQRT, 0, 0},
    {"Neg", SN_UNARY_NEG, 0, 0},
    {"Abs", SN_UNARY_ABS, 0, 0},
    {"LeakyRelu", SN_UNARY_LEAKY_RELU, 0.01f, 0},
    {"HardSigmoid", SN_UNARY_HARD_SIGMOID, 0.2f, 0.5f},
    {"Gelu", SN_UNARY_GELU, 0, 0},
    {"Clip", SN_UNARY_CLIP, -INFINITY, INFINITY},
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

SN_LOWER(sn_lower_unary)
{
    sn_rt *x = sn_in(L, n, 0), *out, *lo_dev = NULL, *hi_dev = NULL;
    sn_step s = {.kind = SN_STEP_UNARY};
    shardnet_status st;
    size_t k = 0;

    while (strcmp(unary_ops[k].name, n->op_type))
        k++;
    s.u.unary.op = unary_ops[k].op;
    s.u.unary.alpha = sn_attr_float(n, "alpha", unary_ops[k].alpha);
    s.u.unary.beta = sn_attr_float(n, "beta", unary_ops[k].beta);
    if (s.u.unary.op == SN_UNARY_GELU &&
        !strcmp(sn_attr_string(n, "approximate", "none"), "tanh"))
        s.u.unary.op = SN_UNARY_GELU_TANH;
    if (s.u.unary.op == SN_UNARY_CLIP) {
        s.u.unary.alpha = -INFINITY;
        s.u.unary.beta = INFINITY;
        if ((st = clip_bound(L, n, "min", &s.u.unary.alpha, &lo_dev)) ||
            (st = clip_bound(L, n, "max", &s.u.unary.beta, &hi_dev)))
            return st;
    }
    if ((st = sn_out_device(L, n, 0, x->rank, x->dims, &out)) != SHARDNET_OK)
        return st;
    out->dtype = x->dtype; /* computed in float32, read back as this */
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

/* Not: booleans are 0 and 1 on the device, so 1 - x. */
SN_LOWER(sn_lower_not)
{
    return emit_from_one(L, n, SN_BINARY_SUB);
}
