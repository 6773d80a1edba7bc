/*
 * Convolution helpers: im2col (the convolution itself is then a cuBLAS
 * GEMM), 2-D pooling and the depthwise convolution.  One thread per output
 * element, in the output's C order (adjacent threads on adjacent columns
 * of a row, reading adjacent input columns at unit stride).  A window's
 * input coordinates are signed (padding reaches before the input), formed
 * as the C reference forms them; positions outside the input are read as
 * 0 (im2col) or left out (pool, dwconv).  The geometry comes into the
 * kernels as the descriptor itself, by value (its views, host pointers,
 * unused there).
 */
#include "cu.h"

/* lo <= v < hi */
static __device__ inline int conv_inside(long long v, long long lo,
                                         long long hi)
{
    return v >= lo && v < hi;
}

/* --- im2col ------------------------------------------------------------- */

/* dst row (c, ky, kx), column (oy, ox) of the band from output row row0:
 * src[c, (row0 + oy) * stride_h + ky * dil_h - pad_top,
 *        ox * stride_w + kx * dil_w - pad_left], or 0 outside. */
static __global__ void im2col_band(size_t n, sn_im2col_desc g,
                                   const float *src, float *dst)
{
    const size_t pixels = g.out_h * g.out_w, taps = g.k_h * g.k_w;
    SN_CU_FOR(t, n)
    {
        size_t row = t / pixels, col = t - row * pixels;
        size_t oy = col / g.out_w, ox = col - oy * g.out_w;
        size_t c = row / taps, tap = row - c * taps;
        size_t ky = tap / g.k_w, kx = tap - ky * g.k_w;
        long long iy = (long long)((g.row0 + oy) * g.stride_h +
                                   ky * g.dil_h) -
                       (long long)g.pad_top;
        long long ix = (long long)(ox * g.stride_w + kx * g.dil_w) -
                       (long long)g.pad_left;
        float v = 0.0f;
        if (conv_inside(iy, 0, (long long)g.in_h) &&
            conv_inside(ix, 0, (long long)g.in_w))
            v = src[(c * g.in_h + (size_t)iy) * g.in_w + (size_t)ix];
        dst[t] = v;
    }
}

int sn_cu_im2col(const sn_im2col_desc *d, void *stream)
{
    size_t n = d->channels * d->k_h * d->k_w * d->out_h * d->out_w;
    return SN_CU_RUN(im2col_band, n, stream, n, *d,
                     (const float *)sn_cu_ptr(d->src), sn_cu_ptr(d->dst));
}

/* --- pool --------------------------------------------------------------- */

/* The reference's running maximum: NaN once either is NaN. */
static __device__ inline float pool_max_of(float m, float v)
{
    if (isnan(m) || isnan(v))
        return NAN;
    return v > m ? v : m;
}

/* dst (planes, out_h, out_w) over windows of src (planes, in_h, in_w),
 * positions visited in (ky, kx) order.  MAX starts from -inf (a window
 * wholly outside the input gives -inf); AVG sums the positions inside the
 * input in that order, then divides by their count, or with
 * count_include_pad by the count of positions inside the padded input. */
static __global__ void pool_window(size_t n, sn_pool_desc g, const float *src,
                                   float *dst)
{
    const long long h = (long long)g.in_h, w = (long long)g.in_w;
    const size_t pixels = g.out_h * g.out_w;
    const int is_max = g.op == SN_POOL_MAX;
    SN_CU_FOR(t, n)
    {
        size_t p = t / pixels, rest = t - p * pixels;
        size_t oy = rest / g.out_w, ox = rest - oy * g.out_w;
        const float *sp = src + p * g.in_h * g.in_w;
        float acc = is_max ? -INFINITY : 0.0f;
        size_t count = 0;
        for (size_t ky = 0; ky < g.k_h; ky++) {
            long long iy = (long long)(oy * g.stride_h) -
                           (long long)g.pad_top + (long long)(ky * g.dil_h);
            for (size_t kx = 0; kx < g.k_w; kx++) {
                long long ix = (long long)(ox * g.stride_w) -
                               (long long)g.pad_left +
                               (long long)(kx * g.dil_w);
                int in = conv_inside(iy, 0, h) && conv_inside(ix, 0, w);
                if (g.count_include_pad
                        ? conv_inside(iy, -(long long)g.pad_top,
                                      h + (long long)g.pad_bottom) &&
                              conv_inside(ix, -(long long)g.pad_left,
                                          w + (long long)g.pad_right)
                        : in)
                    count++;
                if (!in)
                    continue;
                float v = sp[(size_t)iy * g.in_w + (size_t)ix];
                acc = is_max ? pool_max_of(acc, v) : acc + v;
            }
        }
        if (!is_max)
            acc /= (float)count;
        dst[t] = acc;
    }
}

int sn_cu_pool(const sn_pool_desc *d, void *stream)
{
    size_t n = d->planes * d->out_h * d->out_w;
    return SN_CU_RUN(pool_window, n, stream, n, *d,
                     (const float *)sn_cu_ptr(d->src), sn_cu_ptr(d->dst));
}

/* --- dwconv ------------------------------------------------------------- */

/* dst[nn, o, oy, ox] (C order) = act(sum over (ky, kx), in that order, of
 * w[o, ky, kx] * src[nn, o / mult, iy, ix] for the positions inside the
 * input, + bias[o]); Relu6 is the unary Clip to [0, 6], NaN kept. */
static __global__ void dwconv_window(size_t n, sn_dwconv_desc g,
                                     const float *src, const float *w,
                                     const float *bias, float *dst)
{
    const long long h = (long long)g.in_h, iw = (long long)g.in_w;
    const size_t pixels = g.out_h * g.out_w, och = g.channels * g.mult;
    SN_CU_FOR(t, n)
    {
        size_t plane = t / pixels, rest = t - plane * pixels;
        size_t nn = plane / och, o = plane - nn * och;
        size_t oy = rest / g.out_w, ox = rest - oy * g.out_w;
        const float *img =
            src + (nn * g.channels + o / g.mult) * g.in_h * g.in_w;
        const float *wo = w + o * g.k_h * g.k_w;
        float acc = 0.0f;
        for (size_t ky = 0; ky < g.k_h; ky++) {
            long long iy = (long long)(oy * g.stride_h + ky * g.dil_h) -
                           (long long)g.pad_top;
            if (!conv_inside(iy, 0, h))
                continue;
            for (size_t kx = 0; kx < g.k_w; kx++) {
                long long ix = (long long)(ox * g.stride_w + kx * g.dil_w) -
                               (long long)g.pad_left;
                if (conv_inside(ix, 0, iw))
                    acc += wo[ky * g.k_w + kx] *
                           img[(size_t)iy * g.in_w + (size_t)ix];
            }
        }
        if (bias)
            acc += bias[o];
        if (g.act == SN_ACT_RELU && acc < 0.0f)
            acc = 0.0f;
        if (g.act == SN_ACT_RELU6) {
            acc = acc < 0.0f ? 0.0f : acc;
            acc = acc > 6.0f ? 6.0f : acc;
        }
        dst[t] = acc;
    }
}

int sn_cu_dwconv(const sn_dwconv_desc *d, void *stream)
{
    size_t n = d->images * d->channels * d->mult * d->out_h * d->out_w;
    return SN_CU_RUN(dwconv_window, n, stream, n, *d,
                     (const float *)sn_cu_ptr(d->src),
                     (const float *)sn_cu_ptr(d->weights),
                     (const float *)sn_cu_ptr(d->bias), sn_cu_ptr(d->dst));
}
