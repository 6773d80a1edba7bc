/*
 * The operators that compute no element on the device: aliases, which give
 * their input's data another shape (Identity and Dropout, Reshape,
 * Flatten, Squeeze, Unsqueeze), and values made on the host when the model
 * is planned (Shape, Constant, ConstantOfShape).  One file for the shape
 * operators, which check attributes and shapes and emit no step.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

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

/* --- host-side values: Shape, Constant, ConstantOfShape ---------------- */

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

SN_LOWER(sn_lower_constant_of_shape)
{
    sn_rt *shp = sn_in(L, n, 0);
    const sn_attr *a = sn_node_attr(n, "value");
    int64_t dims[SN_MAX_DIMS];
    size_t r, count = 1, es = sizeof(float);
    sn_dtype t = SN_DT_FLOAT;
    const void *val = NULL;
    unsigned char *d;
    shardnet_status st;

    if ((st = sn_host_ints_or_empty(n, shp, "the shape", dims, SN_MAX_DIMS,
                                    &r)))
        return st;
    for (size_t i = 0; i < r; i++) {
        if (dims[i] < 0 || dims[i] > SN_MAX_ELEMENTS ||
            __builtin_mul_overflow(count, (size_t)dims[i], &count) ||
            count > (size_t)SN_MAX_ELEMENTS)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "invalid or too large shape (dimension "
                                 "%zu is %lld)",
                                 i, (long long)dims[i]);
    }
    if (a) {
        const sn_value *v;
        if (a->type != SN_ATTR_TENSOR || a->tensor < 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "attribute 'value' must be a tensor");
        v = &L->g->values[a->tensor];
        t = v->dtype;
        if ((st = sn_host_elem_size(n, t, &es)) != SHARDNET_OK)
            return st;
        if (sn_value_elements(v) != 1 || v->nbytes != es)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "attribute 'value' must hold one element");
        val = v->data;
    }
    if (!(d = sn_host_alloc(count, es)))
        return sn_node_error(n, SHARDNET_OUT_OF_MEMORY,
                             "%zu elements: more than the %zu MiB a tensor "
                             "computed on the host may take, or no memory",
                             count, SN_MAX_HOST_FOLD >> 20);
    if (val)
        for (size_t i = 0; i < count; i++)
            memcpy(d + i * es, val, es);
    else
        memset(d, 0, count * es); /* float 0 */
    return sn_out_host(L, n, 0, t, (int)r, dims, d);
}
