/*
 * The OpenCL launchers that move data rather than compute on it: where
 * (a select over broadcast operands), the strided copy (contiguous runs
 * go to clEnqueueCopyBuffer), gather, and the sliding windows with the
 * geometry checks they share: the convolution's im2col, pooling and the
 * depthwise convolution.
 */
#include <config.h>

#include <limits.h>

#include "opencl.h"
#include "core/error.h"

/* --- data movement ----------------------------------------------------- */

/*
 * One operand of a broadcast kernel: check that every index it reaches
 * over `shape` (n > 0 elements) fits a uint, then narrow its strides into
 * *out (stride 0 for dimensions of size 1, whose stride is never used).
 */
static shardnet_status bcast_operand(const sn_device *dev, const char *what,
                                     const char *name, sn_view v, size_t rank,
                                     const size_t *shape,
                                     const size_t *stride, cl_uint8 *out)
{
    size_t extent = 1, t;

    for (size_t i = 0; i < rank; i++)
        if (shape[i] > 1 &&
            (__builtin_mul_overflow(shape[i] - 1, stride[i], &t) ||
             __builtin_add_overflow(extent, t, &extent)))
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "%s on %s: size overflows", what, dev->info.name);
    if (!fits_idx(v.offset, extent))
        return sn_cl_too_large(dev, what, name, v.offset, extent);
    /* (shape - 1) * stride < extent <= IDX_LIMIT */
    for (int i = 0; i < 8; i++)
        out->s[i] = (size_t)i < rank && shape[i] > 1 ? (cl_uint)stride[i] : 0;
    return SHARDNET_OK;
}

shardnet_status sn_cl_where(sn_device *dev, const sn_where_desc *d)
{
    const char *what = "where";
    size_t n = 1;
    cl_uint8 shape, sc, sx, sy;
    cl_uint un, c_off, x_off, y_off, o_off, rank;
    cl_mem cond = d->cond.buf->handle, x = d->x.buf->handle,
           y = d->y.buf->handle, out = d->out.buf->handle;
    shardnet_status st;

    if (d->rank > SN_MAX_DIMS)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s on %s: rank %zu",
                        what, dev->info.name, d->rank);
    for (size_t i = 0; i < d->rank; i++)
        if (__builtin_mul_overflow(n, d->shape[i], &n))
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "%s on %s: size overflows", what, dev->info.name);
    if (n == 0)
        return SHARDNET_OK;
    if (!fits_idx(d->out.offset, n))
        return sn_cl_too_large(dev, what, "out", d->out.offset, n);
    if ((st = bcast_operand(dev, what, "cond", d->cond, d->rank, d->shape,
                            d->stride_cond, &sc)) != SHARDNET_OK ||
        (st = bcast_operand(dev, what, "x", d->x, d->rank, d->shape,
                            d->stride_x, &sx)) != SHARDNET_OK ||
        (st = bcast_operand(dev, what, "y", d->y, d->rank, d->shape,
                            d->stride_y, &sy)) != SHARDNET_OK)
        return st;
    /* Every dimension is at most n <= IDX_LIMIT. */
    for (int i = 0; i < 8; i++)
        shape.s[i] = (size_t)i < d->rank ? (cl_uint)d->shape[i] : 1;
    un = (cl_uint)n;
    c_off = (cl_uint)d->cond.offset;
    x_off = (cl_uint)d->x.offset;
    y_off = (cl_uint)d->y.offset;
    o_off = (cl_uint)d->out.offset;
    rank = (cl_uint)d->rank;
    {
        karg args[] = {ARG(un),    ARG(cond),  ARG(c_off), ARG(x),
                       ARG(x_off), ARG(y),     ARG(y_off), ARG(out),
                       ARG(o_off), ARG(rank),  ARG(shape), ARG(sc),
                       ARG(sx),    ARG(sy)};
        return sn_cl_run_single(dev, K_WHERE, what, args, 14, n);
    }
}

/*
 * The copy's shape simplified: dimensions of size 1 dropped, and each
 * dimension merged into the one outside it where that one's stride is
 * exactly this one's span, in both source and destination.  The element
 * order, and so every (src, dst) pair, is unchanged.
 */
typedef struct copy_shape {
    size_t rank, n; /* n: elements */
    size_t shape[SN_MAX_DIMS];
    ptrdiff_t src[SN_MAX_DIMS], dst[SN_MAX_DIMS];
} copy_shape;

static int chains(ptrdiff_t outer, ptrdiff_t inner, size_t len)
{
    ptrdiff_t span;
    return len <= PTRDIFF_MAX &&
           !__builtin_mul_overflow(inner, (ptrdiff_t)len, &span) &&
           span == outer;
}

/* 0 when the element count overflows. */
static int copy_simplify(const sn_copy_desc *d, copy_shape *cs)
{
    cs->rank = 0;
    cs->n = 1;
    for (size_t i = 0; i < d->rank; i++)
        if (d->shape[i] == 0) {
            cs->n = 0;
            return 1;
        }
    for (size_t i = 0; i < d->rank; i++) {
        size_t len = d->shape[i], r = cs->rank;
        if (__builtin_mul_overflow(cs->n, len, &cs->n))
            return 0;
        if (len == 1)
            continue;
        if (r > 0 && chains(cs->src[r - 1], d->src_stride[i], len) &&
            chains(cs->dst[r - 1], d->dst_stride[i], len)) {
            cs->shape[r - 1] *= len; /* <= n, no overflow */
            cs->src[r - 1] = d->src_stride[i];
            cs->dst[r - 1] = d->dst_stride[i];
            continue;
        }
        cs->shape[r] = len;
        cs->src[r] = d->src_stride[i];
        cs->dst[r] = d->dst_stride[i];
        cs->rank++;
    }
    return 1;
}

shardnet_status sn_cl_copy(sn_device *dev, const sn_copy_desc *d)
{
    cl_dev *cd = dev->impl;
    const char *what = "copy";
    copy_shape cs;
    cl_uint8 shape;
    cl_long8 ss, ds;
    cl_uint un, rank;
    cl_ulong src_off = d->src.offset, dst_off = d->dst.offset;
    cl_mem src = d->src.buf->handle, dst = d->dst.buf->handle;

    if (d->rank > SN_MAX_DIMS)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s on %s: rank %zu",
                        what, dev->info.name, d->rank);
    if (!copy_simplify(d, &cs))
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s on %s: size overflows",
                        what, dev->info.name);
    if (cs.n == 0)
        return SHARDNET_OK;
    if (cs.rank == 0 || (cs.rank == 1 && cs.src[0] == 1 && cs.dst[0] == 1)) {
        /* Contiguous on both sides.  lib/backend/kernels.c checked both ranges
         * against their buffers, so the byte counts do not overflow. */
        size_t so = d->src.offset, dso = d->dst.offset;
        int same = d->src.buf == d->dst.buf;
        cl_int err;
        if (same && so == dso)
            return SHARDNET_OK;
        /* Overlapping ranges (which clEnqueueCopyBuffer refuses) go to
         * the kernel below. */
        if (!same || so + cs.n <= dso || dso + cs.n <= so) {
            err = clEnqueueCopyBuffer(cd->queue, src, dst, so * sizeof(float),
                                      dso * sizeof(float),
                                      cs.n * sizeof(float), 0, NULL, NULL);
            if (err != CL_SUCCESS)
                return sn_error(sn_cl_status(err),
                                "%s on %s: clEnqueueCopyBuffer of %zu "
                                "elements failed: %s",
                                what, dev->info.name, cs.n,
                                sn_cl_error_name(err));
            return SHARDNET_OK;
        }
    }
    if (cs.n > IDX_LIMIT)
        return sn_cl_too_large(dev, what, "dst", d->dst.offset, cs.n);
    /* Every dimension is at most n; offsets and strides go as 64 bits. */
    for (int i = 0; i < 8; i++) {
        int used = (size_t)i < cs.rank;
        shape.s[i] = used ? (cl_uint)cs.shape[i] : 1;
        ss.s[i] = used ? (cl_long)cs.src[i] : 0;
        ds.s[i] = used ? (cl_long)cs.dst[i] : 0;
    }
    un = (cl_uint)cs.n;
    rank = (cl_uint)cs.rank;
    {
        karg args[] = {ARG(un),  ARG(rank),    ARG(shape),
                       ARG(src), ARG(src_off), ARG(ss),
                       ARG(dst), ARG(dst_off), ARG(ds)};
        return sn_cl_run_single(dev, K_COPY, what, args, 9, cs.n);
    }
}

shardnet_status sn_cl_gather(sn_device *dev, const sn_gather_desc *d)
{
    const char *what = "gather";
    size_t n, ein;
    cl_uint un, data_off, idx_off, out_off, nidx, inner;
    cl_int axis_len;
    cl_mem data = d->data.buf->handle, idx = d->indices.buf->handle,
           out = d->out.buf->handle;

    if (__builtin_mul_overflow(d->outer, d->nidx, &n) ||
        __builtin_mul_overflow(n, d->inner, &n) ||
        __builtin_mul_overflow(d->outer, d->axis_len, &ein) ||
        __builtin_mul_overflow(ein, d->inner, &ein))
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s on %s: size overflows",
                        what, dev->info.name);
    if (n == 0)
        return SHARDNET_OK;
    if (d->axis_len > INT_MAX)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "%s on %s: axis of %zu elements", what,
                        dev->info.name, d->axis_len);
    if (!fits_idx(d->out.offset, n))
        return sn_cl_too_large(dev, what, "out", d->out.offset, n);
    if (!fits_idx(d->data.offset, ein))
        return sn_cl_too_large(dev, what, "data", d->data.offset, ein);
    if (!fits_idx(d->indices.offset, d->nidx))
        return sn_cl_too_large(dev, what, "indices", d->indices.offset,
                               d->nidx);
    /* nidx and inner are at most n. */
    un = (cl_uint)n;
    data_off = (cl_uint)d->data.offset;
    idx_off = (cl_uint)d->indices.offset;
    out_off = (cl_uint)d->out.offset;
    nidx = (cl_uint)d->nidx;
    inner = (cl_uint)d->inner;
    axis_len = (cl_int)d->axis_len;
    {
        karg args[] = {ARG(un),      ARG(data), ARG(data_off), ARG(idx),
                       ARG(idx_off), ARG(out),  ARG(out_off),  ARG(axis_len),
                       ARG(nidx),    ARG(inner)};
        return sn_cl_run_single(dev, K_GATHER, what, args, 10, n);
    }
}

/* --- convolution helpers ----------------------------------------------- */

/*
 * One spatial axis of a window op, checked so that conv.cl can work in
 * int: every input coordinate a window reaches lies in [-pad_begin,
 * (out - 1) * stride + (k - 1) * dil - pad_begin] and in + pad_end is
 * formed too, so all of these must fit.  A stride or dilation that is
 * never multiplied by a non-zero index (out or k of 1) is passed as 1.
 */
static int conv_axis(size_t in, size_t out, size_t k, size_t stride,
                     size_t dil, size_t pad_begin, size_t pad_end,
                     cl_int *o_stride, cl_int *o_dil)
{
    size_t a, b, reach, end;

    if (in > INT_MAX || out > INT_MAX || k > INT_MAX ||
        pad_begin > INT_MAX || pad_end > INT_MAX ||
        __builtin_mul_overflow(out - 1, stride, &a) ||
        __builtin_mul_overflow(k - 1, dil, &b) ||
        __builtin_add_overflow(a, b, &reach) || reach > INT_MAX ||
        __builtin_add_overflow(in, pad_end, &end) || end > INT_MAX)
        return 0;
    /* stride <= reach when out > 1, dil <= reach when k > 1 */
    *o_stride = out > 1 ? (cl_int)stride : 1;
    *o_dil = k > 1 ? (cl_int)dil : 1;
    return 1;
}

/* A window sliding over the two spatial axes (h, w) of planes: the
 * geometry im2col and the pools share. */
typedef struct window {
    size_t in[2], out[2], k[2], stride[2], dil[2], pad_begin[2], pad_end[2];
} window;

/*
 * The geometry vectors of conv.cl:
 *   g  = (in_h, in_w, out_h, out_w, k_h, k_w, stride_h, stride_w)
 *   g2 = (dil_h, dil_w, pad_top, pad_left, pad_bottom, pad_right, 0, 0)
 * (run_window() puts im2col's band row in g2.s6)
 */
static shardnet_status conv_geometry(const sn_device *dev, const char *what,
                                     const window *w, cl_int8 *g, cl_int8 *g2)
{
    cl_int s[2], dl[2];

    for (int a = 0; a < 2; a++)
        if (!conv_axis(w->in[a], w->out[a], w->k[a], w->stride[a], w->dil[a],
                       w->pad_begin[a], w->pad_end[a], &s[a], &dl[a]))
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "%s on %s: the window geometry (input %zu x %zu, "
                            "output %zu x %zu, kernel %zu x %zu) reaches "
                            "coordinates beyond the OpenCL kernels' int range",
                            what, dev->info.name, w->in[0], w->in[1],
                            w->out[0], w->out[1], w->k[0], w->k[1]);
    for (int a = 0; a < 2; a++) {
        g->s[0 + a] = (cl_int)w->in[a];
        g->s[2 + a] = (cl_int)w->out[a];
        g->s[4 + a] = (cl_int)w->k[a];
        g->s[6 + a] = s[a];
        g2->s[0 + a] = dl[a];
        g2->s[2 + a] = (cl_int)w->pad_begin[a];
        g2->s[4 + a] = (cl_int)w->pad_end[a];
        g2->s[6 + a] = 0;
    }
    return SHARDNET_OK;
}

/*
 * Kernel k of conv.cl over window w from src (planes of in_h x in_w) to
 * dst: one work item per output element, out_h x out_w of them per plane,
 * times k_h x k_w when per_tap (im2col's one row per kernel tap).  The
 * pools pass their include_pad flag (0 or 1) as the last argument; im2col,
 * which takes none, passes -1, and the first output row of its band in
 * row0 (the geometry is checked for rows up to row0 + out_h).
 */
static shardnet_status run_window(sn_device *dev, int k, const char *what,
                                  const window *w, size_t planes, int per_tap,
                                  sn_view srcv, sn_view dstv, int include_pad,
                                  size_t row0)
{
    size_t n, ein;
    cl_int8 g, g2;
    cl_uint un, src_off, dst_off;
    cl_int pad = include_pad > 0;
    cl_mem src = srcv.buf->handle, dst = dstv.buf->handle;
    shardnet_status st;

    if ((per_tap && (__builtin_mul_overflow(planes, w->k[0], &n) ||
                     __builtin_mul_overflow(n, w->k[1], &n))) ||
        __builtin_mul_overflow(per_tap ? n : planes, w->out[0], &n) ||
        __builtin_mul_overflow(n, w->out[1], &n) ||
        __builtin_mul_overflow(planes, w->in[0], &ein) ||
        __builtin_mul_overflow(ein, w->in[1], &ein))
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s on %s: size overflows",
                        what, dev->info.name);
    if (n == 0)
        return SHARDNET_OK;
    if (!fits_idx(dstv.offset, n))
        return sn_cl_too_large(dev, what, "dst", dstv.offset, n);
    if (!fits_idx(srcv.offset, ein))
        return sn_cl_too_large(dev, what, "src", srcv.offset, ein);
    window wb = *w;
    if (__builtin_add_overflow(w->out[0], row0, &wb.out[0]))
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s on %s: size overflows",
                        what, dev->info.name);
    if ((st = conv_geometry(dev, what, &wb, &g, &g2)) != SHARDNET_OK)
        return st;
    g.s[2] = (cl_int)w->out[0];
    g2.s[6] = (cl_int)row0;
    un = (cl_uint)n;
    src_off = (cl_uint)srcv.offset;
    dst_off = (cl_uint)dstv.offset;
    {
        karg args[] = {ARG(un),      ARG(src), ARG(src_off), ARG(dst),
                       ARG(dst_off), ARG(g),   ARG(g2),      ARG(pad)};
        return sn_cl_run_single(dev, k, what, args, include_pad < 0 ? 7 : 8,
                                n);
    }
}

shardnet_status sn_cl_im2col(sn_device *dev, const sn_im2col_desc *d)
{
    const window w = {.in = {d->in_h, d->in_w}, .out = {d->out_h, d->out_w},
                      .k = {d->k_h, d->k_w},
                      .stride = {d->stride_h, d->stride_w},
                      .dil = {d->dil_h, d->dil_w},
                      .pad_begin = {d->pad_top, d->pad_left},
                      .pad_end = {0, 0}};
    return run_window(dev, K_IM2COL, "im2col", &w, d->channels, 1, d->src,
                      d->dst, -1, d->row0);
}

shardnet_status sn_cl_pool(sn_device *dev, const sn_pool_desc *d)
{
    const window w = {.in = {d->in_h, d->in_w}, .out = {d->out_h, d->out_w},
                      .k = {d->k_h, d->k_w},
                      .stride = {d->stride_h, d->stride_w},
                      .dil = {d->dil_h, d->dil_w},
                      .pad_begin = {d->pad_top, d->pad_left},
                      .pad_end = {d->pad_bottom, d->pad_right}};
    return run_window(dev, d->op == SN_POOL_MAX ? K_POOL_MAX : K_POOL_AVG,
                      d->op == SN_POOL_MAX ? "max pool" : "average pool", &w,
                      d->planes, 0, d->src, d->dst,
                      d->count_include_pad != 0, 0);
}

shardnet_status sn_cl_dwconv(sn_device *dev, const sn_dwconv_desc *d)
{
    const window w = {.in = {d->in_h, d->in_w}, .out = {d->out_h, d->out_w},
                      .k = {d->k_h, d->k_w},
                      .stride = {d->stride_h, d->stride_w},
                      .dil = {d->dil_h, d->dil_w},
                      .pad_begin = {d->pad_top, d->pad_left},
                      .pad_end = {0, 0}};
    size_t n, ein, ew, nch;
    cl_int8 g, g2;
    cl_mem src = d->src.buf->handle, dst = d->dst.buf->handle;
    cl_mem wt = d->weights.buf->handle;
    cl_mem bias = d->bias.buf ? d->bias.buf->handle : wt;
    cl_uint un, src_off, dst_off, w_off, bias_off;
    cl_int has_bias = d->bias.buf != NULL, relu = (cl_int)d->act;
    cl_uint2 nc;
    shardnet_status st;

    /* The backend layer checked these products; here they must also fit
     * the kernel's uint indices. */
    if (__builtin_mul_overflow(d->channels, d->mult, &nch) ||
        __builtin_mul_overflow(nch, d->images, &n) ||
        __builtin_mul_overflow(n, d->out_h * d->out_w, &n) ||
        __builtin_mul_overflow(d->images * d->channels, d->in_h * d->in_w,
                               &ein) ||
        __builtin_mul_overflow(nch, d->k_h * d->k_w, &ew) ||
        d->channels > UINT_MAX || d->mult > UINT_MAX)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "dwconv on %s: size overflows", dev->info.name);
    if (!fits_idx(d->dst.offset, n))
        return sn_cl_too_large(dev, "dwconv", "dst", d->dst.offset, n);
    if (!fits_idx(d->src.offset, ein))
        return sn_cl_too_large(dev, "dwconv", "src", d->src.offset, ein);
    if (!fits_idx(d->weights.offset, ew))
        return sn_cl_too_large(dev, "dwconv", "weights", d->weights.offset,
                               ew);
    if (has_bias && !fits_idx(d->bias.offset, nch))
        return sn_cl_too_large(dev, "dwconv", "bias", d->bias.offset, nch);
    if ((st = conv_geometry(dev, "dwconv", &w, &g, &g2)) != SHARDNET_OK)
        return st;
    un = (cl_uint)n;
    src_off = (cl_uint)d->src.offset;
    dst_off = (cl_uint)d->dst.offset;
    w_off = (cl_uint)d->weights.offset;
    bias_off = has_bias ? (cl_uint)d->bias.offset : 0;
    nc.s[0] = (cl_uint)d->channels;
    nc.s[1] = (cl_uint)d->mult;
    {
        karg args[] = {ARG(un),    ARG(src),      ARG(src_off),
                       ARG(dst),   ARG(dst_off),  ARG(g),
                       ARG(g2),    ARG(wt),       ARG(w_off),
                       ARG(bias),  ARG(bias_off), ARG(has_bias),
                       ARG(relu),  ARG(nc)};
        return sn_cl_run_single(dev, K_DWCONV, "dwconv", args, 14, n);
    }
}
