/*
 * Launching OpenCL kernels: the programs of kernels_cl/ built and their
 * kernels made on a device's first use of them, arguments set and the
 * kernel enqueued; and the launchers of the element-wise ops, the
 * reductions, softmax and layer normalisation (reduce.cl's row and axis
 * kernels), top k and cumulative sums.  The other launchers are in gemm.c
 * and data.c.
 */
#include <config.h>

#include <pthread.h>
#include <stdio.h>

#include "opencl.h"
#include "core/error.h"

/* The kernels_cl/ file of each program. */
static const char *const prog_files[PROG_COUNT] = {
    "elementwise.cl", "reduce.cl", "data.cl",  "conv.cl",
    "rnn.cl",         "resample.cl", "sample.cl"};

/* The four kernels of each binary op (see elementwise.cl). */
static const char *const bin_variants[BIN_VARIANTS] = {"same", "scalar_a",
                                                       "scalar_b", "bcast"};

/* The kernels of reduce.cl. */
static const char *const reduce_kernels[K_REDUCE_COUNT] = {
    "reduce_sum_row",  "reduce_max_row", "reduce_sum_axis",
    "reduce_max_axis", "softmax_row",    "softmax_axis",
    "layernorm_row",
    "reduce_op_row",   "reduce_op_axis"};

/* The ops with one kernel each, one work-item per output element. */
static const struct {
    int prog;
    const char *name;
} single_kernels[K_SINGLE_COUNT] = {
    [K_GEMM_EPILOGUE] = {PROG_ELEMENTWISE, "gemm_epilogue"},
    [K_COPY] = {PROG_DATA, "copy_strided"},
    [K_WHERE] = {PROG_DATA, "where_bcast"},
    [K_GATHER] = {PROG_DATA, "gather_axis"},
    [K_IM2COL] = {PROG_CONV, "im2col"},
    [K_POOL_MAX] = {PROG_CONV, "pool_max"},
    [K_POOL_AVG] = {PROG_CONV, "pool_avg"},
    [K_TOPK] = {PROG_REDUCE, "topk_axis"},
    [K_RNN_CELL] = {PROG_RNN, "rnn_cell"},
    [K_RESAMPLE] = {PROG_RESAMPLE, "resample"},
    [K_RESAMPLE_2D] = {PROG_RESAMPLE, "resample_2d"},
    [K_GRID_SAMPLE] = {PROG_SAMPLE, "grid_sample"},
    [K_ROI_ALIGN] = {PROG_SAMPLE, "roi_align"},
    [K_SCAN] = {PROG_REDUCE, "scan_axis"},
    [K_DWCONV] = {PROG_CONV, "dwconv"},
    [K_QGEMM] = {PROG_CONV, "qgemm"},
};

/* --- small helpers ---------------------------------------------------- */

shardnet_status sn_cl_status(cl_int err)
{
    return err == CL_OUT_OF_HOST_MEMORY ||
                   err == CL_MEM_OBJECT_ALLOCATION_FAILURE
               ? SHARDNET_OUT_OF_MEMORY
               : SHARDNET_DEVICE_ERROR;
}

shardnet_status sn_cl_too_large(const sn_device *dev, const char *what,
                                const char *name, size_t off, size_t extent)
{
    return sn_error(SHARDNET_INVALID_ARGUMENT,
                    "%s on %s: %s spans elements [%zu, %zu+%zu), beyond the "
                    "%zu that the OpenCL kernels can index",
                    what, dev->info.name, name, off, off, extent, IDX_LIMIT);
}

/* Build the program on first use; the lock is held. */
static shardnet_status get_program(cl_dev *cd, int prog)
{
    if (cd->programs[prog])
        return SHARDNET_OK;
    return sn_cl_program_build(cd->config, cd->ctx, cd->id, cd->label,
                               prog_files[prog], &cd->programs[prog]);
}

/* *slot, created from program `prog` on first use; the lock is held. */
shardnet_status sn_cl_get_kernel(cl_dev *cd, cl_kernel *slot, int prog,
                                 const char *name)
{
    shardnet_status st;
    cl_int err;

    if (*slot)
        return SHARDNET_OK;
    if ((st = get_program(cd, prog)) != SHARDNET_OK)
        return st;
    *slot = clCreateKernel(cd->programs[prog], name, &err);
    if (!*slot || err != CL_SUCCESS) {
        *slot = NULL;
        return sn_error(SHARDNET_BUILD_ERROR,
                        "%s: kernel %s not found in %s: %s", cd->label, name,
                        prog_files[prog], sn_cl_error_name(err));
    }
    return SHARDNET_OK;
}

/* Set the arguments and enqueue; local 0 lets the driver choose. */
shardnet_status sn_cl_launch(sn_device *dev, cl_kernel k, const char *what,
                             const karg *args, cl_uint nargs, size_t global,
                             size_t local)
{
    cl_dev *cd = dev->impl;
    cl_int err;

    for (cl_uint i = 0; i < nargs; i++) {
        err = clSetKernelArg(k, i, args[i].size, args[i].value);
        if (err != CL_SUCCESS)
            return sn_error(SHARDNET_DEVICE_ERROR,
                            "%s on %s: clSetKernelArg %u failed: %s", what,
                            dev->info.name, i, sn_cl_error_name(err));
    }
    err = clEnqueueNDRangeKernel(cd->queue, k, 1, NULL, &global,
                                 local ? &local : NULL, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return sn_error(sn_cl_status(err),
                        "%s on %s: clEnqueueNDRangeKernel(global %zu, local "
                        "%zu) failed: %s",
                        what, dev->info.name, global, local,
                        sn_cl_error_name(err));
    return SHARDNET_OK;
}

/* Kernel `name` of program prog, built once into *slot, over n elements
 * (n <= IDX_LIMIT), one work item each. */
static shardnet_status run_kernel(sn_device *dev, cl_kernel *slot, int prog,
                                  const char *name, const char *what,
                                  const karg *args, cl_uint nargs, size_t n)
{
    cl_dev *cd = dev->impl;
    shardnet_status st;

    pthread_mutex_lock(&cd->lock);
    st = sn_cl_get_kernel(cd, slot, prog, name);
    if (st == SHARDNET_OK)
        st = sn_cl_launch(dev, *slot, what, args, nargs,
                          round_up(n, GLOBAL_ROUND), 0);
    pthread_mutex_unlock(&cd->lock);
    return st;
}

/* Kernel k of single_kernels over n elements (n <= IDX_LIMIT). */
shardnet_status sn_cl_run_single(sn_device *dev, int k, const char *what,
                                 const karg *args, cl_uint nargs, size_t n)
{
    cl_dev *cd = dev->impl;
    return run_kernel(dev, &cd->single[k], single_kernels[k].prog,
                      single_kernels[k].name, what, args, nargs, n);
}

/* --- element-wise ------------------------------------------------------ */

shardnet_status sn_cl_binary(sn_device *dev, const sn_binary_desc *d)
{
    cl_dev *cd = dev->impl;
    const char *what = sn_binary_op_name(d->op);
    size_t n = 1, ea = 1, eb = 1, t;
    int a_contig = 1, b_contig = 1, a_scalar = 1, b_scalar = 1, v;
    cl_uint8 shape, sa, sb;
    cl_uint un, a_off, b_off, c_off, rank;
    cl_int relu;
    cl_mem a = d->a.buf->handle, b = d->b.buf->handle, c = d->c.buf->handle;
    char name[64];

    if (d->rank > SN_MAX_DIMS)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s on %s: rank %zu",
                        what, dev->info.name, d->rank);
    for (int i = 0; i < 8; i++) {
        shape.s[i] = 1;
        sa.s[i] = sb.s[i] = 0;
    }
    /* Innermost first: n is then the contiguous stride of dimension i. */
    for (size_t i = d->rank; i-- > 0;) {
        size_t s = d->shape[i];
        if (s == 0)
            return SHARDNET_OK;
        if (s > 1) {
            a_contig &= d->stride_a[i] == n;
            b_contig &= d->stride_b[i] == n;
            a_scalar &= d->stride_a[i] == 0;
            b_scalar &= d->stride_b[i] == 0;
            if (__builtin_mul_overflow(s - 1, d->stride_a[i], &t) ||
                __builtin_add_overflow(ea, t, &ea) ||
                __builtin_mul_overflow(s - 1, d->stride_b[i], &t) ||
                __builtin_add_overflow(eb, t, &eb))
                return sn_error(SHARDNET_INVALID_ARGUMENT,
                                "%s on %s: size overflows", what,
                                dev->info.name);
        }
        if (__builtin_mul_overflow(n, s, &n))
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "%s on %s: size overflows", what, dev->info.name);
    }
    if (!fits_idx(d->c.offset, n))
        return sn_cl_too_large(dev, what, "c", d->c.offset, n);
    if (!fits_idx(d->a.offset, ea))
        return sn_cl_too_large(dev, what, "a", d->a.offset, ea);
    if (!fits_idx(d->b.offset, eb))
        return sn_cl_too_large(dev, what, "b", d->b.offset, eb);
    /* Every shape, and every stride of a dimension above 1, is now below
     * IDX_LIMIT: (s - 1) * stride < extent. */
    for (size_t i = 0; i < d->rank; i++) {
        if (d->shape[i] > 1) {
            shape.s[i] = (cl_uint)d->shape[i];
            sa.s[i] = (cl_uint)d->stride_a[i];
            sb.s[i] = (cl_uint)d->stride_b[i];
        }
    }
    un = (cl_uint)n;
    a_off = (cl_uint)d->a.offset;
    b_off = (cl_uint)d->b.offset;
    c_off = (cl_uint)d->c.offset;
    rank = (cl_uint)d->rank;
    relu = d->act == SN_ACT_RELU;
    if (a_contig && b_contig)
        v = BIN_SAME;
    else if (a_scalar && b_contig)
        v = BIN_SCALAR_A;
    else if (a_contig && b_scalar)
        v = BIN_SCALAR_B;
    else
        v = BIN_BCAST;
    snprintf(name, sizeof name, "binary_%s_%s", what, bin_variants[v]);
    {
        karg args[] = {ARG(un),    ARG(a),    ARG(a_off), ARG(b),
                       ARG(b_off), ARG(c),    ARG(c_off), ARG(relu),
                       ARG(rank),  ARG(shape), ARG(sa),   ARG(sb)};
        return run_kernel(dev, &cd->binary[v][d->op], PROG_ELEMENTWISE, name,
                          what, args, v == BIN_BCAST ? 12 : 8, n);
    }
}

shardnet_status sn_cl_unary(sn_device *dev, const sn_unary_desc *d)
{
    cl_dev *cd = dev->impl;
    const char *what = sn_unary_op_name(d->op);
    cl_uint n, x_off, y_off;
    cl_float alpha = d->alpha, beta = d->beta;
    cl_int gate = d->gate;
    cl_mem x = d->x.buf->handle, y = d->y.buf->handle;
    char name[64];

    if (!fits_idx(d->x.offset, d->n))
        return sn_cl_too_large(dev, what, "x", d->x.offset, d->n);
    if (!fits_idx(d->y.offset, d->n))
        return sn_cl_too_large(dev, what, "y", d->y.offset, d->n);
    n = (cl_uint)d->n;
    x_off = (cl_uint)d->x.offset;
    y_off = (cl_uint)d->y.offset;
    snprintf(name, sizeof name, "unary_%s", what);
    {
        karg args[] = {ARG(n),     ARG(x),     ARG(x_off), ARG(y),
                       ARG(y_off), ARG(alpha), ARG(beta),  ARG(gate)};
        return run_kernel(dev, &cd->unary[d->op], PROG_ELEMENTWISE, name,
                          what, args, 8, d->n);
    }
}

/* --- reductions and softmax -------------------------------------------- */

/*
 * Local size for a one-work-group-per-row kernel: a power of two, at most
 * ROW_WG_MAX and what the device and kernel allow, and no larger than the
 * power of two that covers the row.  The lock is held.
 */
static size_t row_local_size(cl_dev *cd, int k, size_t len)
{
    size_t limit = ROW_WG_MAX, wg = 1;

    if (!cd->reduce_wg[k]) {
        size_t kwg = 0;
        if (clGetKernelWorkGroupInfo(cd->reduce[k], cd->id,
                                     CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg,
                                     &kwg, NULL) != CL_SUCCESS ||
            kwg == 0)
            kwg = 1;
        cd->reduce_wg[k] = kwg;
    }
    if (cd->max_wg < limit)
        limit = cd->max_wg;
    if (cd->reduce_wg[k] < limit)
        limit = cd->reduce_wg[k];
    while (wg * 2 <= limit && wg < len)
        wg *= 2;
    return wg;
}

/*
 * Run kernel k of reduce.cl over x (outer, len, inner) into y: the six
 * common arguments, then scratch (row kernels, inner == 1) or n and inner
 * (axis kernels).  The caller has checked that x and y fit the uint
 * indices; in_elems = outer * len * inner.
 */
static shardnet_status run_axis_kernel(sn_device *dev, const char *what,
                                       int k_row, int k_axis, size_t outer,
                                       size_t len, size_t inner, sn_view xv,
                                       sn_view yv, int flag)
{
    cl_dev *cd = dev->impl;
    int k = inner == 1 ? k_row : k_axis;
    cl_uint ulen = (cl_uint)len, x_off = (cl_uint)xv.offset,
            y_off = (cl_uint)yv.offset, n = (cl_uint)(outer * inner),
            uinner = (cl_uint)inner;
    cl_int iflag = flag;
    cl_mem x = xv.buf->handle, y = yv.buf->handle;
    shardnet_status st;

    pthread_mutex_lock(&cd->lock);
    st = sn_cl_get_kernel(cd, &cd->reduce[k], PROG_REDUCE, reduce_kernels[k]);
    if (st == SHARDNET_OK && k == k_row) {
        size_t wg = row_local_size(cd, k, len);
        karg args[] = {ARG(ulen),  ARG(x),     ARG(x_off),
                       ARG(y),     ARG(y_off), ARG(iflag),
                       {wg * sizeof(float), NULL}};
        if (outer > SIZE_MAX / wg) /* only where size_t is 32 bits */
            st = sn_cl_too_large(dev, what, "x", 0, outer * len);
        else
            st =
                sn_cl_launch(dev, cd->reduce[k], what, args, 7, outer * wg, wg);
    } else if (st == SHARDNET_OK) {
        karg args[] = {ARG(ulen),  ARG(x),     ARG(x_off), ARG(y),
                       ARG(y_off), ARG(iflag), ARG(n),     ARG(uinner)};
        st = sn_cl_launch(dev, cd->reduce[k], what, args, 8,
                          round_up(outer * inner, GLOBAL_ROUND), 0);
    }
    pthread_mutex_unlock(&cd->lock);
    return st;
}

/* outer * len * inner, checked against the kernels' index range. */
static shardnet_status axis_extent(const sn_device *dev, const char *what,
                                   size_t outer, size_t len, size_t inner,
                                   size_t *total)
{
    if (__builtin_mul_overflow(outer, len, total) ||
        __builtin_mul_overflow(*total, inner, total))
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s on %s: size overflows",
                        what, dev->info.name);
    if (*total > IDX_LIMIT)
        return sn_cl_too_large(dev, what, "x", 0, *total);
    return SHARDNET_OK;
}

/*
 * run_axis_kernel once x (outer, len, inner) and y are checked against the
 * uint indices: y is x's shape (softmax) or, reduced, (outer, inner).
 */
static shardnet_status run_axis(sn_device *dev, const char *what, int k_row,
                                int k_axis, size_t outer, size_t len,
                                size_t inner, sn_view xv, sn_view yv,
                                int reduced, int flag)
{
    size_t total, ny;
    shardnet_status st;

    if ((st = axis_extent(dev, what, outer, len, inner, &total)) !=
        SHARDNET_OK)
        return st;
    if (total == 0)
        return SHARDNET_OK;
    if (!fits_idx(xv.offset, total))
        return sn_cl_too_large(dev, what, "x", xv.offset, total);
    ny = reduced ? outer * inner : total; /* outer * inner <= total */
    if (!fits_idx(yv.offset, ny))
        return sn_cl_too_large(dev, what, "y", yv.offset, ny);
    return run_axis_kernel(dev, what, k_row, k_axis, outer, len, inner, xv,
                           yv, flag);
}

shardnet_status sn_cl_softmax(sn_device *dev, const sn_softmax_desc *d)
{
    return run_axis(dev, d->log_softmax ? "log-softmax" : "softmax",
                    K_SOFTMAX_ROW, K_SOFTMAX_AXIS, d->outer, d->len, d->inner,
                    d->x, d->y, 0, d->log_softmax != 0);
}

shardnet_status sn_cl_reduce(sn_device *dev, const sn_reduce_desc *d)
{
    int is_max = d->op == SN_REDUCE_MAX;
    /* reduce_op_*'s op: 0 min, 1 prod, 2 sum of squares, 3 of magnitudes */
    if (d->op >= SN_REDUCE_MIN)
        return run_axis(dev, sn_reduce_op_name(d->op), K_OP_ROW, K_OP_AXIS,
                        d->outer, d->len, d->inner, d->x, d->y, 1,
                        (int)(d->op - SN_REDUCE_MIN));
    return run_axis(dev, sn_reduce_op_name(d->op),
                    is_max ? K_MAX_ROW : K_SUM_ROW,
                    is_max ? K_MAX_AXIS : K_SUM_AXIS, d->outer, d->len,
                    d->inner, d->x, d->y, 1, d->op == SN_REDUCE_MEAN);
}

/* --- top k and cumulative sums ----------------------------------------- */

shardnet_status sn_cl_topk(sn_device *dev, const sn_topk_desc *d)
{
    const char *what = "top-k";
    size_t total, nout, n = d->outer * d->inner; /* n <= total, checked */
    cl_uint ulen, x_off, v_off, i_off, un, uk, uinner;
    cl_int flags = (d->largest ? 1 : 0) | (d->last_index ? 2 : 0) |
                   (d->values.buf ? 4 : 0);
    cl_mem x = d->x.buf->handle, idx = d->indices.buf->handle;
    cl_mem val = d->values.buf ? d->values.buf->handle : idx;
    shardnet_status st;

    if ((st = axis_extent(dev, what, d->outer, d->len, d->inner, &total)) !=
        SHARDNET_OK)
        return st;
    nout = n * d->k; /* k <= len: nout <= total */
    if (nout == 0)
        return SHARDNET_OK;
    if (!fits_idx(d->x.offset, total))
        return sn_cl_too_large(dev, what, "x", d->x.offset, total);
    if (!fits_idx(d->indices.offset, nout))
        return sn_cl_too_large(dev, what, "indices", d->indices.offset, nout);
    if (d->values.buf && !fits_idx(d->values.offset, nout))
        return sn_cl_too_large(dev, what, "values", d->values.offset, nout);
    ulen = (cl_uint)d->len;
    x_off = (cl_uint)d->x.offset;
    v_off = d->values.buf ? (cl_uint)d->values.offset : 0;
    i_off = (cl_uint)d->indices.offset;
    un = (cl_uint)n;
    uk = (cl_uint)d->k;
    uinner = (cl_uint)d->inner;
    {
        karg args[] = {ARG(un),  ARG(ulen),  ARG(uinner), ARG(uk),
                       ARG(x),   ARG(x_off), ARG(val),    ARG(v_off),
                       ARG(idx), ARG(i_off), ARG(flags)};
        return sn_cl_run_single(dev, K_TOPK, what, args, 11, n);
    }
}

shardnet_status sn_cl_scan(sn_device *dev, const sn_scan_desc *d)
{
    const char *what = "cumulative sum";
    size_t total, n = d->outer * d->inner; /* n <= total, checked */
    cl_uint ulen, x_off, y_off, un, uinner;
    cl_int flags = (d->exclusive ? 1 : 0) | (d->reverse ? 2 : 0);
    cl_mem x = d->x.buf->handle, y = d->y.buf->handle;
    shardnet_status st;

    if ((st = axis_extent(dev, what, d->outer, d->len, d->inner, &total)) !=
        SHARDNET_OK)
        return st;
    if (total == 0)
        return SHARDNET_OK;
    if (!fits_idx(d->x.offset, total))
        return sn_cl_too_large(dev, what, "x", d->x.offset, total);
    if (!fits_idx(d->y.offset, total))
        return sn_cl_too_large(dev, what, "y", d->y.offset, total);
    ulen = (cl_uint)d->len;
    x_off = (cl_uint)d->x.offset;
    y_off = (cl_uint)d->y.offset;
    un = (cl_uint)n;
    uinner = (cl_uint)d->inner;
    {
        karg args[] = {ARG(un), ARG(ulen),  ARG(uinner), ARG(x),
                       ARG(x_off), ARG(y), ARG(y_off), ARG(flags)};
        return sn_cl_run_single(dev, K_SCAN, what, args, 8, n);
    }
}

/* --- layer normalisation ----------------------------------------------- */

shardnet_status sn_cl_layernorm(sn_device *dev,
                                const sn_layernorm_desc *d)
{
    const char *what = "layer normalisation";
    cl_dev *cd = dev->impl;
    size_t total, wg;
    cl_uint len, x_off, y_off, scale_off, bias_off;
    cl_int has_bias = d->bias.buf != NULL;
    cl_float eps = d->epsilon;
    cl_mem x = d->x.buf->handle, y = d->y.buf->handle,
           scale = d->scale.buf->handle;
    /* Without a bias the kernel never reads it; any buffer will do. */
    cl_mem bias = has_bias ? d->bias.buf->handle : scale;
    shardnet_status st;

    if ((st = axis_extent(dev, what, d->outer, d->len, 1, &total)) !=
        SHARDNET_OK)
        return st;
    if (total == 0)
        return SHARDNET_OK;
    if (!fits_idx(d->x.offset, total))
        return sn_cl_too_large(dev, what, "x", d->x.offset, total);
    if (!fits_idx(d->y.offset, total))
        return sn_cl_too_large(dev, what, "y", d->y.offset, total);
    if (!fits_idx(d->scale.offset, d->len))
        return sn_cl_too_large(dev, what, "scale", d->scale.offset, d->len);
    if (has_bias && !fits_idx(d->bias.offset, d->len))
        return sn_cl_too_large(dev, what, "bias", d->bias.offset, d->len);
    len = (cl_uint)d->len;
    x_off = (cl_uint)d->x.offset;
    y_off = (cl_uint)d->y.offset;
    scale_off = (cl_uint)d->scale.offset;
    bias_off = has_bias ? (cl_uint)d->bias.offset : 0;

    pthread_mutex_lock(&cd->lock);
    st = sn_cl_get_kernel(cd, &cd->reduce[K_LAYERNORM_ROW], PROG_REDUCE,
                          reduce_kernels[K_LAYERNORM_ROW]);
    wg = st == SHARDNET_OK ? row_local_size(cd, K_LAYERNORM_ROW, d->len) : 1;
    if (st == SHARDNET_OK && d->outer > SIZE_MAX / wg) /* 32-bit size_t */
        st = sn_cl_too_large(dev, what, "x", 0, total);
    if (st == SHARDNET_OK) {
        karg args[] = {ARG(len),       ARG(x),    ARG(x_off),
                       ARG(y),         ARG(y_off), ARG(scale),
                       ARG(scale_off), ARG(bias), ARG(bias_off),
                       ARG(has_bias),  ARG(eps),  {wg * sizeof(float), NULL}};
        st = sn_cl_launch(dev, cd->reduce[K_LAYERNORM_ROW], what, args, 12,
                          d->outer * wg, wg);
    }
    pthread_mutex_unlock(&cd->lock);
    return st;
}
