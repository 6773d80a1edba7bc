/*
 * Selection along an axis: ArgMax, ArgMin, Hardmax and TopK.  All four
 * rank the elements of each line along the axis (NaN first, then the
 * largest or smallest value, ties by index) with the top-k kernel on the
 * device, or the same ranking on the host when the input is known there.
 * Indices are int64 outputs, carried as floats on the device (exact while
 * the axis is shorter than 2^24).  Hardmax's one-hot rows are the arg-max
 * index compared with 0, 1, ..., len - 1: a subtraction and a where.
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* Indices carried as floats are exact below this. */
#define FLOAT_EXACT ((int64_t)1 << 24)

/* The axis viewed as the middle of (outer, len, inner). */
typedef struct line_shape {
    size_t outer, len, inner;
} line_shape;

static line_shape around_axis(const sn_rt *x, int axis)
{
    line_shape s = {sn_dims_product(0, axis, x->dims), (size_t)x->dims[axis],
                    sn_dims_product(axis + 1, x->rank, x->dims)};
    return s;
}

/* Is (a, ia) ranked before (b, ib)?  As sn_topk_desc's ranking. */
static int ranks_before(int largest, int last, double a, size_t ia, double b,
                        size_t ib)
{
    if (isnan(a) != isnan(b))
        return isnan(a);
    if (a != b && !isnan(a))
        return largest ? a > b : a < b;
    return last ? ia > ib : ia < ib;
}

/*
 * The top k of each line of host tensor x (shape s): values (may be NULL,
 * as doubles) and indices, (outer, k, inner) each.
 */
static void host_topk(const sn_rt *x, line_shape s, size_t k, int largest,
                      int last, double *values, int64_t *indices)
{
    for (size_t o = 0; o < s.outer; o++)
        for (size_t i = 0; i < s.inner; i++) {
            size_t base = o * s.len * s.inner + i, prev = 0;
            for (size_t t = 0; t < k; t++) {
                size_t best = s.len, at = (o * k + t) * s.inner + i;
                for (size_t r = 0; r < s.len; r++) {
                    double v = sn_rt_get_double(x, base + r * s.inner);
                    if (t > 0 &&
                        !ranks_before(largest, last,
                                      sn_rt_get_double(x, base + prev *
                                                                  s.inner),
                                      prev, v, r))
                        continue;
                    if (best == s.len ||
                        ranks_before(largest, last, v, r,
                                     sn_rt_get_double(x, base + best *
                                                                 s.inner),
                                     best))
                        best = r;
                }
                prev = best;
                if (values)
                    values[at] = sn_rt_get_double(x, base + best * s.inner);
                indices[at] = (int64_t)best;
            }
        }
}

/* Numbers only, on the host: float, double and the integers but bool. */
static shardnet_status host_numbers(const sn_node *n, const sn_rt *x)
{
    if (x->dtype == SN_DT_BOOL ||
        (!sn_dtype_is_integer(x->dtype) && x->dtype != SN_DT_FLOAT &&
         x->dtype != SN_DT_DOUBLE))
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "%s tensors are not supported",
                             sn_dtype_name(x->dtype));
    return SHARDNET_OK;
}

/* Indices carried as floats must be exact. */
static shardnet_status check_exact(const sn_node *n, size_t len)
{
    if ((int64_t)len > FLOAT_EXACT)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "an axis of %zu elements: indices on a device "
                             "are floats, exact below 2^24",
                             len);
    return SHARDNET_OK;
}

static shardnet_status emit_topk(sn_lower *L, const sn_node *n, line_shape s,
                                 size_t k, int largest, int last, sn_view x,
                                 sn_view values, sn_view indices)
{
    sn_step st = {.kind = SN_KERNEL_TOPK};
    st.u.topk = (sn_topk_desc){.outer = s.outer, .len = s.len,
                               .inner = s.inner, .k = k, .largest = largest,
                               .last_index = last, .x = x, .values = values,
                               .indices = indices};
    return sn_emit(L, n, &st);
}

/* The axis attribute, checked against x's rank (at least 1). */
static shardnet_status read_axis(const sn_node *n, const sn_rt *x,
                                 int64_t dflt, int *axis)
{
    int64_t a = sn_attr_int(n, "axis", dflt);
    if (x->rank == 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the input is a scalar: it has no axis");
    if ((*axis = sn_axis(a, x->rank)) < 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "axis %lld out of range for rank %d",
                             (long long)a, x->rank);
    if (x->dims[*axis] == 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "axis %d is empty: there is nothing to select",
                             *axis);
    return SHARDNET_OK;
}

/* ArgMax and ArgMin: axis, keepdims, select_last_index (opset 12). */
static shardnet_status lower_arg(sn_lower *L, const sn_node *n, int largest)
{
    sn_rt *x = sn_in(L, n, 0), *out;
    int64_t od[SN_MAX_DIMS];
    int axis, r = 0, keep = sn_attr_int(n, "keepdims", 1) != 0;
    int last = sn_attr_int(n, "select_last_index", 0) != 0;
    shardnet_status st;
    line_shape s;
    sn_view xv;

    if ((st = read_axis(n, x, 0, &axis)) != SHARDNET_OK)
        return st;
    s = around_axis(x, axis);
    for (int i = 0; i < x->rank; i++)
        if (i != axis)
            od[r++] = x->dims[i];
        else if (keep)
            od[r++] = 1;
    if (sn_host_known(x)) {
        int64_t *idx;
        if ((st = host_numbers(n, x)) != SHARDNET_OK)
            return st;
        if (!(idx = sn_host_alloc(s.outer * s.inner, sizeof *idx)))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "arg-reduction");
        host_topk(x, s, 1, largest, last, NULL, idx);
        return sn_out_host(L, n, 0, SN_DT_INT64, r, od, idx);
    }
    if ((st = check_exact(n, s.len)) != SHARDNET_OK ||
        (st = sn_out_device_as(L, n, SN_DT_INT64, r, od, &out)) !=
            SHARDNET_OK ||
        (st = sn_dev_view(L, n, x, &xv)) != SHARDNET_OK)
        return st;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    return emit_topk(L, n, s, 1, largest, last, xv, (sn_view){0},
                     out->view);
}

SN_LOWER(sn_lower_argmax)
{
    return lower_arg(L, n, 1);
}

SN_LOWER(sn_lower_argmin)
{
    return lower_arg(L, n, 0);
}

/*
 * Hardmax: 1 where the line's first maximum is, 0 elsewhere.  From opset
 * 13 the line is the axis (default -1); before, x is flattened to 2-D at
 * axis (default 1) and the line is a whole row.
 */
SN_LOWER(sn_lower_hardmax)
{
    sn_rt *x = sn_in(L, n, 0), *out;
    int legacy = L->g->opset < 13, axis;
    int64_t a = sn_attr_int(n, "axis", legacy ? 1 : -1);
    line_shape s;
    shardnet_status st;

    if (legacy) {
        /* axis in [-rank, rank]: rows of dims[axis..) */
        if (a < -x->rank || a > x->rank)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "axis %lld out of range for rank %d",
                                 (long long)a, x->rank);
        axis = a < 0 ? (int)(a + x->rank) : (int)a;
        s.outer = sn_dims_product(0, axis, x->dims);
        s.len = sn_dims_product(axis, x->rank, x->dims);
        s.inner = 1;
    } else {
        if ((st = read_axis(n, x, -1, &axis)) != SHARDNET_OK)
            return st;
        s = around_axis(x, axis);
    }
    if (sn_rt_elements(x) == 0)
        return sn_out_host(L, n, 0, x->dtype, x->rank, x->dims,
                           sn_host_alloc(0, 1));
    if (sn_host_known(x)) {
        size_t total = sn_rt_elements(x);
        int64_t *idx = sn_host_alloc(s.outer * s.inner, sizeof *idx);
        void *y = sn_host_alloc(total, sn_dtype_size(x->dtype));
        if ((st = host_numbers(n, x)) != SHARDNET_OK || !idx || !y) {
            free(idx);
            free(y);
            return st != SHARDNET_OK
                       ? st
                       : sn_error(SHARDNET_OUT_OF_MEMORY, "Hardmax");
        }
        host_topk(x, s, 1, 1, 0, NULL, idx);
        for (size_t k = 0; k < total; k++) {
            size_t o = k / (s.len * s.inner), i = k % s.inner;
            size_t r = k / s.inner % s.len;
            sn_store_value(x->dtype, y, k, 0,
                           idx[o * s.inner + i] == (int64_t)r, 1);
        }
        free(idx);
        return sn_out_host(L, n, 0, x->dtype, x->rank, x->dims, y);
    }

    sn_dtype t;
    sn_view xv, idx, diff, iota, consts;
    float *ramp, *c01;
    int64_t dl[3] = {1, (int64_t)s.len, 1};
    int64_t di[3] = {(int64_t)s.outer, 1, (int64_t)s.inner};
    if ((st = sn_float_type(n, x, &t)) != SHARDNET_OK ||
        (st = check_exact(n, s.len)) != SHARDNET_OK ||
        (st = sn_out_device(L, n, 0, x->rank, x->dims, &out)) !=
            SHARDNET_OK ||
        (st = sn_dev_view(L, n, x, &xv)) != SHARDNET_OK)
        return st;
    out->dtype = t;
    ramp = malloc(s.len * sizeof *ramp);
    c01 = malloc(2 * sizeof *c01);
    if (!ramp || !c01) {
        free(ramp);
        free(c01);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "Hardmax");
    }
    for (size_t r = 0; r < s.len; r++)
        ramp[r] = (float)r;
    c01[0] = 0.0f;
    c01[1] = 1.0f;
    if ((st = sn_dev_upload(L, n, ramp, s.len, &iota)) != SHARDNET_OK) {
        free(c01);
        return st;
    }
    if ((st = sn_dev_upload(L, n, c01, 2, &consts)) != SHARDNET_OK ||
        (st = sn_scratch(L, s.outer * s.inner, &idx)) != SHARDNET_OK ||
        (st = sn_scratch(L, sn_rt_elements(x), &diff)) != SHARDNET_OK ||
        (st = emit_topk(L, n, s, 1, 1, 0, xv, (sn_view){0}, idx)) !=
            SHARDNET_OK ||
        (st = sn_emit_binary(L, n, SN_BINARY_SUB, 3, dl, iota, 3, di, idx,
                             diff)) != SHARDNET_OK)
        return st;
    /* out = diff != 0 ? 0 : 1 */
    sn_step w = {.kind = SN_KERNEL_WHERE};
    sn_view one = consts;
    one.offset += 1;
    w.u.where = (sn_where_desc){.rank = 1,
                                .shape = {sn_rt_elements(x)},
                                .stride_cond = {1},
                                .cond = diff,
                                .x = consts,
                                .y = one,
                                .out = out->view};
    return sn_emit(L, n, &w);
}

/*
 * TopK: k from input 1 (opset 10) or the attribute (before); axis
 * (default -1), largest and sorted (opset 11; results are always sorted,
 * which sorted = 0 allows).  Values in x's type, indices int64.
 */
SN_LOWER(sn_lower_topk)
{
    sn_rt *x = sn_in(L, n, 0), *kin = sn_in(L, n, 1), *vals, *idxs;
    int64_t od[SN_MAX_DIMS], k;
    int axis, largest = sn_attr_int(n, "largest", 1) != 0;
    line_shape s;
    shardnet_status st;
    sn_view xv;

    if (n->noutputs < 2)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "TopK has two outputs, values and indices");
    if (kin) {
        int64_t kv[1];
        size_t cnt;
        if ((st = sn_host_ints(n, kin, "k", kv, 1, &cnt)) != SHARDNET_OK)
            return st;
        if (cnt != 1)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "k must hold one value, not %zu", cnt);
        k = kv[0];
    } else if (sn_node_attr(n, "k")) {
        k = sn_attr_int(n, "k", -1);
    } else {
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT, "k is missing");
    }
    if ((st = read_axis(n, x, -1, &axis)) != SHARDNET_OK)
        return st;
    if (k < 0 || k > x->dims[axis])
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "k = %lld, beyond the %lld elements of axis %d",
                             (long long)k, (long long)x->dims[axis], axis);
    s = around_axis(x, axis);
    memcpy(od, x->dims, sizeof od);
    od[axis] = k;
    if (sn_host_known(x) || k == 0) {
        size_t no = s.outer * (size_t)k * s.inner;
        double *v = malloc((no ? no : 1) * sizeof *v);
        int64_t *idx = sn_host_alloc(no, sizeof *idx);
        void *y = sn_host_alloc(no, sn_dtype_size(x->dtype));
        if ((st = host_numbers(n, x)) != SHARDNET_OK || !v || !idx || !y) {
            free(v);
            free(idx);
            free(y);
            return st != SHARDNET_OK ? st
                                     : sn_error(SHARDNET_OUT_OF_MEMORY, "TopK");
        }
        host_topk(x, s, (size_t)k, largest, 0, v, idx);
        for (size_t i = 0; i < no; i++) {
            if (sn_dtype_is_integer(x->dtype))
                sn_store_value(x->dtype, y, i, 0, (int64_t)v[i], 1);
            else
                sn_store_value(x->dtype, y, i, v[i], 0, 0);
        }
        free(v);
        if ((st = sn_out_host(L, n, 0, x->dtype, x->rank, od, y)) !=
            SHARDNET_OK) {
            free(idx);
            return st;
        }
        return sn_out_host(L, n, 1, SN_DT_INT64, x->rank, od, idx);
    }
    sn_dtype it;
    if ((st = check_exact(n, s.len)) != SHARDNET_OK ||
        (st = sn_device_type(n, SN_DT_INT64, &it)) != SHARDNET_OK ||
        (st = sn_out_device_as(L, n, x->dtype, x->rank, od, &vals)) !=
            SHARDNET_OK ||
        (st = sn_out_device(L, n, 1, x->rank, od, &idxs)) != SHARDNET_OK ||
        (st = sn_dev_view(L, n, x, &xv)) != SHARDNET_OK)
        return st;
    idxs->dtype = it;
    return emit_topk(L, n, s, (size_t)k, largest, 0, xv, vals->view,
                     idxs->view);
}
