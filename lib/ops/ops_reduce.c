/*
 * Reductions: ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceProd,
 * ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp and ReduceSumSquare
 * over any set of axes.  On the host when the input is a host value
 * (accumulated in int64 for integer types, in double for float types); on
 * the device, one reduce step per run of adjacent reduced axes, the first
 * run with the kernel's variant that maps each value (|x|, x * x) and the
 * later ones summing, then a unary step for L2's square root and the logs.
 * ReduceLogSumExp is stabilised by the maximum: m + log(sum(exp(x - m))).
 * Also CumSum (the scan kernel on the device) and LpNormalization (a
 * reduction and a division).
 */
#include <config.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

typedef enum red_kind {
    R_SUM,
    R_MEAN,
    R_MAX,
    R_MIN,
    R_PROD,
    R_L1,
    R_L2,
    R_LOG_SUM,
    R_LOG_SUM_EXP,
    R_SUM_SQUARE
} red_kind;

/* The reduce kernel's variants for the first run and for the later ones. */
static void kernel_ops(red_kind k, sn_reduce_op *first, sn_reduce_op *rest)
{
    static const sn_reduce_op f[] = {
        [R_SUM] = SN_REDUCE_SUM,         [R_MEAN] = SN_REDUCE_MEAN,
        [R_MAX] = SN_REDUCE_MAX,         [R_MIN] = SN_REDUCE_MIN,
        [R_PROD] = SN_REDUCE_PROD,       [R_L1] = SN_REDUCE_SUM_ABS,
        [R_L2] = SN_REDUCE_SUM_SQUARE,   [R_LOG_SUM] = SN_REDUCE_SUM,
        [R_LOG_SUM_EXP] = SN_REDUCE_SUM, [R_SUM_SQUARE] = SN_REDUCE_SUM_SQUARE};
    *first = f[k];
    *rest = k == R_L1 || k == R_L2 || k == R_SUM_SQUARE ? SN_REDUCE_SUM : f[k];
}

/* Accumulate v into acc (integers: wrapping, as int64 arithmetic does). */
static int64_t int_step(red_kind k, int64_t acc, int64_t v)
{
    uint64_t a = (uint64_t)acc, u = (uint64_t)v;
    switch (k) {
    case R_MAX:
        return v > acc ? v : acc;
    case R_MIN:
        return v < acc ? v : acc;
    case R_PROD:
        return (int64_t)(a * u);
    case R_L1:
        return (int64_t)(a + (v < 0 ? 0 - u : u));
    case R_L2:
    case R_SUM_SQUARE:
        return (int64_t)(a + u * u);
    default:
        return (int64_t)(a + u);
    }
}

static double float_step(red_kind k, double acc, double v)
{
    switch (k) {
    case R_MAX:
        return v > acc || isnan(v) ? v : acc;
    case R_MIN:
        return v < acc || isnan(v) ? v : acc;
    case R_PROD:
        return acc * v;
    case R_L1:
        return acc + fabs(v);
    case R_L2:
    case R_SUM_SQUARE:
        return acc + v * v;
    case R_LOG_SUM_EXP:
        return acc + exp(v);
    default:
        return acc + v;
    }
}

static double float_start(red_kind k)
{
    return k == R_MAX ? -INFINITY : k == R_MIN ? INFINITY : k == R_PROD;
}

/* The result from the accumulator: a mean's division, L2's root, a log. */
static double finish(red_kind k, double acc, size_t cnt)
{
    switch (k) {
    case R_MEAN:
        return acc / (double)cnt;
    case R_L2:
        return sqrt(acc);
    case R_LOG_SUM:
    case R_LOG_SUM_EXP:
        return log(acc);
    default:
        return acc;
    }
}

/* The reduction on the host: red[i] marks reduced axes; od (rank orank) is
 * the output shape. */
static shardnet_status host_reduce(sn_lower *L, const sn_node *n,
                                   red_kind kind, const sn_rt *x,
                                   const int *red, int orank,
                                   const int64_t *od)
{
    int64_t kd[SN_MAX_DIMS], ks[SN_MAX_DIMS], idx[SN_MAX_DIMS] = {0}, pos = 0;
    size_t total = sn_rt_elements(x), ocount = 1, cnt;
    /* integers accumulate in int64 but for exponentials */
    int isint = sn_dtype_is_integer(x->dtype) && kind != R_LOG_SUM_EXP;
    int exact = isint && kind != R_MEAN && kind != R_L2 && kind != R_LOG_SUM;
    double *fa = NULL, *mx = NULL;
    int64_t *ia = NULL;
    void *d;
    /* Numbers only: float, double and the integers but bool. */
    if (x->dtype == SN_DT_BOOL ||
        (!sn_dtype_is_integer(x->dtype) && x->dtype != SN_DT_FLOAT &&
         x->dtype != SN_DT_DOUBLE))
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
            ia[k] = kind == R_MAX   ? INT64_MIN
                    : kind == R_MIN ? INT64_MAX
                                    : kind == R_PROD;
        else
            fa[k] = float_start(kind);
    }
    if (kind == R_LOG_SUM_EXP) {
        /* the maximum first, in mx, which the exponentials are taken from */
        if (!(mx = malloc((ocount ? ocount : 1) * sizeof *mx))) {
            free(d);
            free(fa);
            return sn_error(SHARDNET_OUT_OF_MEMORY, "reduction");
        }
        for (size_t k = 0; k < ocount; k++)
            mx[k] = -INFINITY;
        for (size_t k = 0; k < total; k++) {
            mx[pos] = float_step(R_MAX, mx[pos], sn_rt_get_double(x, k));
            sn_index_next(x->rank, x->dims, idx, ks, &pos);
        }
    }
    for (size_t k = 0; k < total; k++) {
        if (isint)
            ia[pos] = int_step(kind, ia[pos], sn_rt_get_int(x, k));
        else
            fa[pos] = float_step(kind, fa[pos],
                                 sn_rt_get_double(x, k) - (mx ? mx[pos] : 0));
        sn_index_next(x->rank, x->dims, idx, ks, &pos);
    }
    for (size_t k = 0; k < ocount; k++) {
        double v;
        if (exact) {
            sn_store_value(x->dtype, d, k, 0, ia[k], 1);
            continue;
        }
        v = finish(kind, isint ? (double)ia[k] : fa[k], cnt);
        if (mx) /* an infinite maximum is the result (-inf - -inf is NaN) */
            v = isinf(mx[k]) ? mx[k] : v + mx[k];
        if (sn_dtype_is_integer(x->dtype) && !isfinite(v)) {
            free(d);
            free(ia);
            free(fa);
            free(mx);
            return sn_node_error(n, SHARDNET_UNSUPPORTED,
                                 "the %s result is not finite (%g)",
                                 sn_dtype_name(x->dtype), v);
        }
        sn_store_value(x->dtype, d, k, v, 0, 0);
    }
    free(ia);
    free(fa);
    free(mx);
    return sn_out_host(L, n, 0, x->dtype, orank, od, d);
}

/*
 * Reduce src (x's shape, rank dims) over the axes red marks into dst: one
 * reduce step per run of adjacent reduced axes (first op, then rest), runs
 * after the first reading the previous step's result from scratch.  With
 * no axis to reduce (rank 0), one step of length 1 (|x|, x * x).
 */
static shardnet_status emit_runs(sn_lower *L, const sn_node *n, int rank,
                                 const int64_t *dims, const int *red,
                                 sn_reduce_op first_op, sn_reduce_op rest_op,
                                 sn_view src, sn_view dst)
{
    int64_t cur[SN_MAX_DIMS];
    int runs = 0, end;
    shardnet_status st;

    for (int i = 0; i < rank; i++)
        runs += red[i] && (i == 0 || !red[i - 1]);
    if (runs == 0) {
        sn_step s = {.kind = SN_KERNEL_REDUCE};
        s.u.reduce = (sn_reduce_desc){.op = first_op,
                                      .outer = sn_dims_product(0, rank, dims),
                                      .len = 1, .inner = 1, .x = src,
                                      .y = dst};
        return sn_emit(L, n, &s);
    }
    memcpy(cur, dims, (size_t)rank * sizeof *cur);
    for (int i = 0; runs > 0; i = end) {
        sn_step s = {.kind = SN_KERNEL_REDUCE};
        sn_view out = dst;
        while (!red[i])
            i++;
        end = i;
        while (end < rank && red[end])
            end++;
        /* [i, end) is one run of reduced axes */
        s.u.reduce.op = first_op;
        s.u.reduce.outer = sn_dims_product(0, i, cur);
        s.u.reduce.len = sn_dims_product(i, end, cur);
        s.u.reduce.inner = sn_dims_product(end, rank, cur);
        for (int j = i; j < end; j++)
            cur[j] = 1;
        if (--runs > 0 &&
            (st = sn_scratch(L, sn_dims_product(0, rank, cur), &out)))
            return st;
        s.u.reduce.x = src;
        s.u.reduce.y = out;
        if ((st = sn_emit(L, n, &s)) != SHARDNET_OK)
            return st;
        src = out;
        first_op = rest_op;
    }
    return SHARDNET_OK;
}

static shardnet_status emit_unary(sn_lower *L, const sn_node *n,
                                  sn_unary_op op, size_t count, sn_view x,
                                  sn_view y)
{
    sn_step s = {.kind = SN_KERNEL_UNARY};
    s.u.unary = (sn_unary_desc){.op = op, .n = count, .x = x, .y = y};
    return sn_emit(L, n, &s);
}

/* m + log(sum(exp(x - m))), m the maximum over the reduced axes (kd: x's
 * shape with those axes 1), clipped to the finite floats: a line of -inf
 * then sums exp(-inf) = 0 and gives -inf, one holding +inf gives +inf,
 * where x - m would be NaN. */
static shardnet_status emit_log_sum_exp(sn_lower *L, const sn_node *n,
                                        const sn_rt *x, const int *red,
                                        sn_view src, sn_view dst)
{
    int64_t kd[SN_MAX_DIMS];
    size_t total = sn_rt_elements(x), ocount = 1;
    sn_view m, e, s;
    shardnet_status st;

    for (int i = 0; i < x->rank; i++) {
        kd[i] = red[i] ? 1 : x->dims[i];
        ocount *= (size_t)kd[i];
    }
    if ((st = sn_scratch(L, ocount, &m)) || (st = sn_scratch(L, total, &e)) ||
        (st = sn_scratch(L, ocount, &s)) ||
        (st = emit_runs(L, n, x->rank, x->dims, red, SN_REDUCE_MAX,
                        SN_REDUCE_MAX, src, m)))
        return st;
    sn_step c = {.kind = SN_KERNEL_UNARY};
    c.u.unary = (sn_unary_desc){.op = SN_UNARY_CLIP, .n = ocount, .x = m,
                                .y = m, .alpha = -FLT_MAX, .beta = FLT_MAX};
    if ((st = sn_emit(L, n, &c)) ||
        (st = sn_emit_binary(L, n, SN_BINARY_SUB, x->rank, x->dims, src,
                             x->rank, kd, m, e)) ||
        (st = emit_unary(L, n, SN_UNARY_EXP, total, e, e)) ||
        (st = emit_runs(L, n, x->rank, x->dims, red, SN_REDUCE_SUM,
                        SN_REDUCE_SUM, e, s)) ||
        (st = emit_unary(L, n, SN_UNARY_LOG, ocount, s, s)))
        return st;
    return sn_emit_binary(L, n, SN_BINARY_ADD, x->rank, kd, s, x->rank, kd, m,
                          dst);
}

/*
 * The reductions.  Axes come from the attribute, or from the optional
 * input (ReduceSum from opset 13, the others from 18); none (or an empty
 * list) reduces every axis, unless noop_with_empty_axes makes it a copy.
 */
static shardnet_status lower_reduce(sn_lower *L, const sn_node *n,
                                    red_kind kind)
{
    sn_rt *x = sn_in(L, n, 0), *out;
    int64_t axes[SN_MAX_DIMS], od[SN_MAX_DIMS];
    size_t na;
    int red[SN_MAX_DIMS] = {0}, r = 0, keep, noop, given;
    sn_reduce_op first, rest;
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
        return host_reduce(L, n, kind, x, red, r, od);

    sn_dtype t = SN_DT_FLOAT;
    sn_view src;
    if ((st = (kind == R_MAX || kind == R_MIN
                   ? sn_device_type(n, x->dtype, &t)
                   : sn_float_type(n, x, &t))) != SHARDNET_OK ||
        (st = sn_out_device(L, n, 0, r, od, &out)) != SHARDNET_OK)
        return st;
    out->dtype = t;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    if ((st = sn_dev_view(L, n, x, &src)) != SHARDNET_OK)
        return st;
    if (kind == R_LOG_SUM_EXP)
        return emit_log_sum_exp(L, n, x, red, src, out->view);
    kernel_ops(kind, &first, &rest);
    if ((st = emit_runs(L, n, x->rank, x->dims, red, first, rest, src,
                        out->view)) != SHARDNET_OK)
        return st;
    if (kind == R_L2 || kind == R_LOG_SUM)
        return emit_unary(L, n, kind == R_L2 ? SN_UNARY_SQRT : SN_UNARY_LOG,
                          sn_rt_elements(out), out->view, out->view);
    return SHARDNET_OK;
}

SN_LOWER(sn_lower_reduce_mean)
{
    return lower_reduce(L, n, R_MEAN);
}

SN_LOWER(sn_lower_reduce_sum)
{
    return lower_reduce(L, n, R_SUM);
}

SN_LOWER(sn_lower_reduce_max)
{
    return lower_reduce(L, n, R_MAX);
}

SN_LOWER(sn_lower_reduce_min)
{
    return lower_reduce(L, n, R_MIN);
}

SN_LOWER(sn_lower_reduce_prod)
{
    return lower_reduce(L, n, R_PROD);
}

SN_LOWER(sn_lower_reduce_l1)
{
    return lower_reduce(L, n, R_L1);
}

SN_LOWER(sn_lower_reduce_l2)
{
    return lower_reduce(L, n, R_L2);
}

SN_LOWER(sn_lower_reduce_log_sum)
{
    return lower_reduce(L, n, R_LOG_SUM);
}

SN_LOWER(sn_lower_reduce_log_sum_exp)
{
    return lower_reduce(L, n, R_LOG_SUM_EXP);
}

SN_LOWER(sn_lower_reduce_sum_square)
{
    return lower_reduce(L, n, R_SUM_SQUARE);
}

/* --- CumSum ---------------------------------------------------------------- */

/* The sums on the host: int64 (wrapping) or double, in x's type. */
static shardnet_status host_cumsum(sn_lower *L, const sn_node *n,
                                   const sn_rt *x, size_t outer, size_t len,
                                   size_t inner, int exclusive, int reverse)
{
    int isint = sn_dtype_is_integer(x->dtype);
    void *y = sn_host_alloc(sn_rt_elements(x), sn_dtype_size(x->dtype));
    if (x->dtype == SN_DT_BOOL ||
        (!isint && x->dtype != SN_DT_FLOAT && x->dtype != SN_DT_DOUBLE)) {
        free(y);
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "CumSum of %s tensors is not supported",
                             sn_dtype_name(x->dtype));
    }
    if (!y)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "CumSum");
    for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < inner; i++) {
            size_t base = o * len * inner + i;
            uint64_t ia = 0;
            double fa = 0.0;
            for (size_t t = 0; t < len; t++) {
                size_t r = reverse ? len - 1 - t : t;
                size_t at = base + r * inner;
                if (exclusive) {
                    sn_store_value(x->dtype, y, at, fa, (int64_t)ia, isint);
                }
                if (isint)
                    ia += (uint64_t)sn_rt_get_int(x, at);
                else
                    fa += sn_rt_get_double(x, at);
                if (!exclusive)
                    sn_store_value(x->dtype, y, at, fa, (int64_t)ia, isint);
            }
        }
    return sn_out_host(L, n, 0, x->dtype, x->rank, x->dims, y);
}

/*
 * CumSum along the axis (input 1, a host scalar): exclusive, reverse.  On
 * the device, one scan step over x viewed as (outer, len, inner).
 */
SN_LOWER(sn_lower_cumsum)
{
    sn_rt *x = sn_in(L, n, 0), *ax = sn_in(L, n, 1), *out;
    int exclusive = sn_attr_int(n, "exclusive", 0) != 0;
    int reverse = sn_attr_int(n, "reverse", 0) != 0;
    int64_t a[1];
    size_t cnt, outer, len, inner;
    int axis;
    shardnet_status st;

    if (!ax)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the axis input is missing");
    if ((st = sn_host_ints(n, ax, "axis", a, 1, &cnt)) != SHARDNET_OK)
        return st;
    if (cnt != 1 || (axis = sn_axis(a[0], x->rank)) < 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "axis must be one value in [-%d, %d)", x->rank,
                             x->rank);
    outer = sn_dims_product(0, axis, x->dims);
    len = (size_t)x->dims[axis];
    inner = sn_dims_product(axis + 1, x->rank, x->dims);
    if (sn_host_known(x))
        return host_cumsum(L, n, x, outer, len, inner, exclusive, reverse);

    sn_dtype t;
    sn_view xv;
    if ((st = sn_float_type(n, x, &t)) != SHARDNET_OK ||
        (st = sn_out_device(L, n, 0, x->rank, x->dims, &out)) !=
            SHARDNET_OK ||
        (st = sn_dev_view(L, n, x, &xv)) != SHARDNET_OK)
        return st;
    out->dtype = t;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    sn_step s = {.kind = SN_KERNEL_SCAN};
    s.u.scan = (sn_scan_desc){.outer = outer, .len = len, .inner = inner,
                              .exclusive = exclusive, .reverse = reverse,
                              .x = xv, .y = out->view};
    return sn_emit(L, n, &s);
}

/* --- LpNormalization ------------------------------------------------------- */

/*
 * x divided by its L1 or L2 norm along the axis (default -1): one reduce
 * step (sum of magnitudes or of squares), L2's square root, a broadcast
 * division.  A zero norm gives NaN or infinity, as x / 0 does.
 */
SN_LOWER(sn_lower_lp_normalization)
{
    sn_rt *x = sn_in(L, n, 0), *out;
    int64_t p = sn_attr_int(n, "p", 2), a = sn_attr_int(n, "axis", -1);
    int64_t kd[SN_MAX_DIMS];
    size_t outer, len, inner;
    int axis;
    shardnet_status st;

    if (p != 1 && p != 2)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "p = %lld: only 1 and 2 are defined",
                             (long long)p);
    if (x->rank == 0 || (axis = sn_axis(a, x->rank)) < 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "axis %lld out of range for rank %d",
                             (long long)a, x->rank);
    outer = sn_dims_product(0, axis, x->dims);
    len = (size_t)x->dims[axis];
    inner = sn_dims_product(axis + 1, x->rank, x->dims);
    if (sn_host_known(x)) {
        size_t total = sn_rt_elements(x);
        void *y;
        if ((st = sn_float_type(n, x, &(sn_dtype){0})) != SHARDNET_OK)
            return st;
        if (!(y = sn_host_alloc(total, sn_dtype_size(x->dtype))))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "LpNormalization");
        for (size_t o = 0; o < outer; o++)
            for (size_t i = 0; i < inner; i++) {
                size_t base = o * len * inner + i;
                double s = 0.0;
                for (size_t r = 0; r < len; r++) {
                    double v = sn_rt_get_double(x, base + r * inner);
                    s += p == 1 ? fabs(v) : v * v;
                }
                if (p == 2)
                    s = sqrt(s);
                for (size_t r = 0; r < len; r++)
                    sn_store_value(x->dtype, y, base + r * inner,
                                   sn_rt_get_double(x, base + r * inner) / s,
                                   0, 0);
            }
        return sn_out_host(L, n, 0, x->dtype, x->rank, x->dims, y);
    }

    sn_dtype t;
    sn_view xv, nrm;
    sn_step s = {.kind = SN_KERNEL_REDUCE};
    if ((st = sn_float_type(n, x, &t)) != SHARDNET_OK ||
        (st = sn_out_device(L, n, 0, x->rank, x->dims, &out)) !=
            SHARDNET_OK)
        return st;
    out->dtype = t;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    if ((st = sn_dev_view(L, n, x, &xv)) != SHARDNET_OK ||
        (st = sn_scratch(L, outer * inner, &nrm)) != SHARDNET_OK)
        return st;
    s.u.reduce = (sn_reduce_desc){.op = p == 1 ? SN_REDUCE_SUM_ABS
                                               : SN_REDUCE_SUM_SQUARE,
                                  .outer = outer, .len = len, .inner = inner,
                                  .x = xv, .y = nrm};
    if ((st = sn_emit(L, n, &s)) != SHARDNET_OK ||
        (p == 2 && (st = emit_unary(L, n, SN_UNARY_SQRT, outer * inner, nrm,
                                    nrm)) != SHARDNET_OK))
        return st;
    memcpy(kd, x->dims, sizeof kd);
    kd[axis] = 1;
    return sn_emit_binary(L, n, SN_BINARY_DIV, x->rank, x->dims, xv, x->rank,
                          kd, nrm, out->view);
}
