/*
 * Reductions: ReduceMean, ReduceSum and ReduceMax over any set of axes.
 * On the host when the input is a host value (accumulated in int64 for
 * integer types, in double for float types); on the device, one reduce step
 * per run of adjacent reduced axes.
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* The reduction on the host: red[i] marks reduced axes; od (rank or) is
 * the output shape. */
static shardnet_status host_reduce(sn_lower *L, const sn_node *n,
                                   sn_reduce_op op, const sn_rt *x,
                                   const int *red, int orank,
                                   const int64_t *od)
{
    int64_t kd[SN_MAX_DIMS], ks[SN_MAX_DIMS], idx[SN_MAX_DIMS] = {0}, pos = 0;
    size_t total = sn_rt_elements(x), ocount = 1, cnt;
    int isint = sn_dtype_is_integer(x->dtype);
    double *fa = NULL;
    int64_t *ia = NULL;
    void *d;
    /* Numbers only: float, double and the integers but bool. */
    if (x->dtype == SN_DT_BOOL ||
        (!isint && x->dtype != SN_DT_FLOAT && x->dtype != SN_DT_DOUBLE))
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "reduction of %s tensors is not supported",
                             sn_dtype_name(x->dtype));
    for (int i = 0; i < x->rank; i++) {
        kd[i] = red[i] ? 1 : x->dims[i];
        ocount *= (size_t)kd[i];
    }
    sn_strides(x->rank, kd, ks);
    for (int i = 0; i < x->rank; i++)
        if (red[i])
            ks[i] = 0;
    cnt = ocount ? total / ocount : 0;
    d = sn_host_alloc(ocount, sn_dtype_size(x->dtype));
    if (isint)
        ia = malloc((ocount ? ocount : 1) * sizeof *ia);
    else
        fa = malloc((ocount ? ocount : 1) * sizeof *fa);
    if (!d || (!ia && !fa)) {
        free(d);
        free(ia);
        free(fa);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "reduction");
    }
    for (size_t k = 0; k < ocount; k++) {
        if (isint)
            ia[k] = op == SN_REDUCE_MAX ? INT64_MIN : 0;
        else
            fa[k] = op == SN_REDUCE_MAX ? -INFINITY : 0.0;
    }
    for (size_t k = 0; k < total; k++) {
        if (isint) {
            int64_t v = sn_rt_get_int(x, k);
            if (op == SN_REDUCE_MAX)
                ia[pos] = v > ia[pos] ? v : ia[pos];
            else
                ia[pos] = (int64_t)((uint64_t)ia[pos] + (uint64_t)v);
        } else {
            double v = sn_rt_get_double(x, k);
            if (op == SN_REDUCE_MAX)
                fa[pos] = v > fa[pos] || isnan(v) ? v : fa[pos];
            else
                fa[pos] += v;
        }
        sn_index_next(x->rank, x->dims, idx, ks, &pos);
    }
    for (size_t k = 0; k < ocount; k++) {
        if (op == SN_REDUCE_MEAN)
            sn_store_value(x->dtype, d, k,
                      (isint ? (double)ia[k] : fa[k]) / (double)cnt, 0, 0);
        else if (isint)
            sn_store_value(x->dtype, d, k, 0, ia[k], 1);
        else
            sn_store_value(x->dtype, d, k, fa[k], 0, 0);
    }
    free(ia);
    free(fa);
    return sn_out_host(L, n, 0, x->dtype, orank, od, d);
}

/*
 * ReduceMean / ReduceSum / ReduceMax.  Axes come from the attribute, or
 * from the optional input (ReduceSum from opset 13, the others from 18).
 * Each run of adjacent reduced axes is one (outer, len, inner) step; runs
 * after the first read the previous step's result from scratch.
 */
static shardnet_status lower_reduce(sn_lower *L, const sn_node *n,
                                    sn_reduce_op op)
{
    sn_rt *x = sn_in(L, n, 0), *out;
    int64_t axes[SN_MAX_DIMS], od[SN_MAX_DIMS], cur[SN_MAX_DIMS];
    size_t na;
    int red[SN_MAX_DIMS] = {0}, r = 0, keep, noop, given;
    shardnet_status st;

    keep = sn_attr_int(n, "keepdims", 1) != 0;
    noop = sn_attr_int(n, "noop_with_empty_axes", 0) != 0;
    st = sn_param_ints(L, n, "axes", axes, SN_MAX_DIMS, &na, &given);
    if (st != SHARDNET_OK)
        return st;
    if (na == 0 && noop)
        return sn_out_alias(L, n, 0, x, x->rank, x->dims);
    for (size_t i = 0; i < na; i++) {
        int a = sn_axis(axes[i], x->rank);
        if (a < 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "axis %lld out of range for rank %d",
                                 (long long)axes[i], x->rank);
        red[a] = 1;
    }
    for (int i = 0; i < x->rank; i++) {
        if (na == 0)
            red[i] = 1;
        if (!red[i])
            od[r++] = x->dims[i];
        else if (keep)
            od[r++] = 1;
    }
    if (sn_host_known(x))
        return host_reduce(L, n, op, x, red, r, od);

    sn_dtype t = SN_DT_FLOAT;
    sn_view src, dst;
    if ((st = (op == SN_REDUCE_MAX ? sn_device_type(n, x->dtype, &t)
                                   : sn_float_type(n, x, &t))) != SHARDNET_OK ||
        (st = sn_out_device(L, n, 0, r, od, &out)) != SHARDNET_OK)
        return st;
    out->dtype = t;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    if (sn_rt_elements(x) == 0)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "reducing empty axes is not supported");
    if ((st = sn_dev_view(L, n, x, &src)) != SHARDNET_OK)
        return st;
    int first = 0, runs = 0;
    for (int i = 0; i < x->rank; i++)
        runs += red[i] && (i == 0 || !red[i - 1]);
    if (runs == 0) /* rank 0 (or nothing to reduce): a plain copy */
        return sn_out_alias(L, n, 0, x, r, od);
    memcpy(cur, x->dims, sizeof cur);
    for (int i = 0; i < x->rank; i = first) {
        sn_step s = {.kind = SN_KERNEL_REDUCE};
        while (i < x->rank && !red[i])
            i++;
        first = i;
        while (first < x->rank && red[first])
            first++;
        /* [i, first) is one run of reduced axes */
        s.u.reduce.op = op;
        s.u.reduce.outer = sn_dims_product(0, i, cur);
        s.u.reduce.len = sn_dims_product(i, first, cur);
        s.u.reduce.inner = sn_dims_product(first, x->rank, cur);
        for (int j = i; j < first; j++)
            cur[j] = 1;
        if (--runs == 0)
            dst = out->view;
        else if ((st = sn_scratch(L, sn_dims_product(0, x->rank, cur), &dst)))
            return st;
        s.u.reduce.x = src;
        s.u.reduce.y = dst;
        if ((st = sn_emit(L, n, &s)) != SHARDNET_OK)
            return st;
        src = dst;
        if (runs == 0)
            break;
    }
    return SHARDNET_OK;
}

SN_LOWER(sn_lower_reduce_mean)
{
    return lower_reduce(L, n, SN_REDUCE_MEAN);
}

SN_LOWER(sn_lower_reduce_sum)
{
    return lower_reduce(L, n, SN_REDUCE_SUM);
}

SN_LOWER(sn_lower_reduce_max)
{
    return lower_reduce(L, n, SN_REDUCE_MAX);
}
