/*
 * Convolution helpers: im2col (the convolution itself is then a CLBlast
 * GEMM) and 2-D pooling.
 *
 * One work-item per output element; the host rounds the global size up and
 * passes the true count n.  The geometry comes as two int8 vectors,
 *   g  = (in_h, in_w, out_h, out_w, k_h, k_w, stride_h, stride_w)
 *   g2 = (dil_h, dil_w, pad_top, pad_left, pad_bottom, pad_right, -, -)
 * and the host checks that every input coordinate a window reaches, and
 * in + pad_end, fits an int, and every element index a uint.  im2col
 * takes the first output row of its band in g2.s6.
 */

/* Input coordinate of window position k of output position o. */
#define IN_COORD(o, stride, k, dil, pad) ((o) * (stride) + (k) * (dil) - (pad))

/*
 * dst (channels * k_h * k_w, out_h * out_w) from src (channels, in_h, in_w):
 * row (c, ky, kx), column (oy, ox) holds src[c, iy, ix] with iy, ix from
 * IN_COORD, or 0 outside the input.  n = channels * k_h * k_w * out_h *
 * out_w; consecutive work-items write consecutive columns.
 */
__kernel void im2col(uint n, __global const float *src, uint src_off,
                     __global float *dst, uint dst_off, int8 g, int8 g2)
{
    size_t gid = get_global_id(0);
    int in_h = g.s0, in_w = g.s1, out_w = g.s3, k_h = g.s4, k_w = g.s5;
    uint pixels = (uint)g.s2 * (uint)out_w, taps = (uint)k_h * (uint)k_w;
    uint row, col, c, rest;
    int ky, kx, oy, ox, iy, ix;
    float v = 0.0f;

    if (gid >= n)
        return;
    row = (uint)gid / pixels;
    col = (uint)gid - row * pixels;
    oy = (int)(col / (uint)out_w);
    ox = (int)col - oy * out_w;
    c = row / taps;
    rest = row - c * taps;
    ky = (int)(rest / (uint)k_w);
    kx = (int)rest - ky * k_w;
    iy = IN_COORD(oy + g2.s6, g.s6, ky, g2.s0, g2.s2);
    ix = IN_COORD(ox, g.s7, kx, g2.s1, g2.s3);
    if (iy >= 0 && iy < in_h && ix >= 0 && ix < in_w)
        v = src[src_off + (c * (uint)in_h + (uint)iy) * (uint)in_w +
                (uint)ix];
    dst[dst_off + (uint)gid] = v;
}

/*
 * dst (planes, out_h, out_w) = largest element of each window of src
 * (planes, in_h, in_w), positions outside the input ignored; a NaN in the
 * window gives NaN, and a window with no position inside gives -inf.
 * n = planes * out_h * out_w.
 */
__kernel void pool_max(uint n, __global const float *src, uint src_off,
                       __global float *dst, uint dst_off, int8 g, int8 g2,
                       int count_include_pad)
{
    size_t gid = get_global_id(0);
    int in_h = g.s0, in_w = g.s1, out_h = g.s2, out_w = g.s3;
    uint plane_px = (uint)out_h * (uint)out_w, p, rest;
    int oy, ox;
    __global const float *sp;
    float m = -INFINITY;

    if (gid >= n)
        return;
    p = (uint)gid / plane_px;
    rest = (uint)gid - p * plane_px;
    oy = (int)(rest / (uint)out_w);
    ox = (int)rest - oy * out_w;
    sp = src + src_off + p * (uint)in_h * (uint)in_w;
    for (int ky = 0; ky < g.s4; ky++) {
        int iy = IN_COORD(oy, g.s6, ky, g2.s0, g2.s2);
        if (iy < 0 || iy >= in_h)
            continue;
        for (int kx = 0; kx < g.s5; kx++) {
            int ix = IN_COORD(ox, g.s7, kx, g2.s1, g2.s3);
            float v;
            if (ix < 0 || ix >= in_w)
                continue;
            v = sp[(uint)iy * (uint)in_w + (uint)ix];
            if (v > m || isnan(v))
                m = v;
        }
    }
    dst[dst_off + (uint)gid] = m;
}

/*
 * dst (planes, out_h, out_w) = mean of each window of src (planes, in_h,
 * in_w): the sum of the positions inside the input, divided by their count,
 * or with count_include_pad by the count of positions inside the padded
 * input [-pad_top, in_h + pad_bottom) x [-pad_left, in_w + pad_right)
 * (a window running past it in ceil mode counts only the part inside).
 * The window is a product of rows and columns, so each count is rows
 * inside times columns inside.  n = planes * out_h * out_w.
 */
__kernel void pool_avg(uint n, __global const float *src, uint src_off,
                       __global float *dst, uint dst_off, int8 g, int8 g2,
                       int count_include_pad)
{
    size_t gid = get_global_id(0);
    int in_h = g.s0, in_w = g.s1, out_h = g.s2, out_w = g.s3;
    int end_h = in_h + g2.s4, end_w = in_w + g2.s5;
    uint plane_px = (uint)out_h * (uint)out_w, p, rest;
    int oy, ox, rows_in = 0, rows_pad = 0, cols_in = 0, cols_pad = 0;
    __global const float *sp;
    float sum = 0.0f;

    if (gid >= n)
        return;
    p = (uint)gid / plane_px;
    rest = (uint)gid - p * plane_px;
    oy = (int)(rest / (uint)out_w);
    ox = (int)rest - oy * out_w;
    sp = src + src_off + p * (uint)in_h * (uint)in_w;
    for (int kx = 0; kx < g.s5; kx++) {
        int ix = IN_COORD(ox, g.s7, kx, g2.s1, g2.s3);
        cols_in += ix >= 0 && ix < in_w;
        cols_pad += ix >= -g2.s3 && ix < end_w;
    }
    for (int ky = 0; ky < g.s4; ky++) {
        int iy = IN_COORD(oy, g.s6, ky, g2.s0, g2.s2);
        rows_pad += iy >= -g2.s2 && iy < end_h;
        if (iy < 0 || iy >= in_h)
            continue;
        rows_in++;
        for (int kx = 0; kx < g.s5; kx++) {
            int ix = IN_COORD(ox, g.s7, kx, g2.s1, g2.s3);
            if (ix >= 0 && ix < in_w)
                sum += sp[(uint)iy * (uint)in_w + (uint)ix];
        }
    }
    /* Counts multiplied in float: their int product may overflow. */
    dst[dst_off + (uint)gid] =
        count_include_pad ? sum / ((float)rows_pad * (float)cols_pad)
                          : sum / ((float)rows_in * (float)cols_in);
}

/*
 * Depthwise convolution: dst (images, channels * mult, out_h, out_w) from
 * src (images, channels, in_h, in_w) and w (channels * mult, k_h, k_w);
 * output channel o reads input channel o / mult.  Taps summed in (ky, kx)
 * order, positions outside the input left out, then the bias (has_bias)
 * and the activation (relu: 1 v < 0 ? 0 : v, 2 then v > 6 ? 6 : v).
 * nc = (channels, mult); n = images *
 * channels * mult * out_h * out_w.
 */
__kernel void dwconv(uint n, __global const float *src, uint src_off,
                     __global float *dst, uint dst_off, int8 g, int8 g2,
                     __global const float *w, uint w_off,
                     __global const float *bias, uint bias_off, int has_bias,
                     int relu, uint2 nc)
{
    size_t gid = get_global_id(0);
    int in_h = g.s0, in_w = g.s1, out_h = g.s2, out_w = g.s3;
    int k_h = g.s4, k_w = g.s5;
    uint plane_px = (uint)out_h * (uint)out_w, och = nc.s0 * nc.s1;
    uint p, o, rest;
    int oy, ox;
    __global const float *sp, *wp;
    float acc = 0.0f;

    if (gid >= n)
        return;
    p = (uint)gid / plane_px;
    rest = (uint)gid - p * plane_px;
    o = p % och;
    oy = (int)(rest / (uint)out_w);
    ox = (int)rest - oy * out_w;
    sp = src + src_off +
         (p / och * nc.s0 + o / nc.s1) * (uint)in_h * (uint)in_w;
    wp = w + w_off + o * (uint)k_h * (uint)k_w;
    for (int ky = 0; ky < k_h; ky++) {
        int iy = IN_COORD(oy, g.s6, ky, g2.s0, g2.s2);
        if (iy < 0 || iy >= in_h)
            continue;
        for (int kx = 0; kx < k_w; kx++) {
            int ix = IN_COORD(ox, g.s7, kx, g2.s1, g2.s3);
            if (ix >= 0 && ix < in_w)
                acc += wp[ky * k_w + kx] * sp[iy * in_w + ix];
        }
    }
    if (has_bias)
        acc += bias[bias_off + o];
    if (relu)
        acc = acc < 0.0f ? 0.0f : acc;
    if (relu == 2)
        acc = acc > 6.0f ? 6.0f : acc;
    dst[dst_off + (uint)gid] = acc;
}

/*
 * The product by a quantized weight (sn_qgemm_desc): one work-item per
 * output (i, j), summing q less its zero point times A in float per block
 * of K, then scaling the block's sum.
 * dims: m, n, k, block (0: all of K); lds: lda, ldq (elements), ldc, and
 * the type (0 int8, 1 uint8, 2 uint4, 3 half, 4 bfloat16) plus 8 where q
 * holds N rows of K.
 */
__kernel void qgemm(uint total, uint4 dims, uint4 lds,
                    __global const float *a, uint a_off,
                    __global const uchar *q, uint q_off,
                    __global const float *scale, uint s_off,
                    __global const float *zero, uint z_off, int has_zero,
                    float zero_value,
                    __global const float *bias, uint b_off, int has_bias,
                    __global float *c, uint c_off, int act)
{
    size_t gid = get_global_id(0);
    if (gid >= total)
        return;
    uint n = dims.s1, k = dims.s2, block = dims.s3 ? dims.s3 : k;
    uint i = (uint)gid / n, j = (uint)gid - i * n;
    uint type = lds.s3 & 7u, rows_of_k = lds.s3 & 8u;
    uint blocks = (k + block - 1) / block;
    __global const float *ar = a + a_off + i * lds.s0;
    __global const uchar *qb = q + q_off;
    float y = 0.0f;
    for (uint b = 0; b < blocks; b++) {
        uint k0 = b * block, k1 = min(k0 + block, k);
        uint at = j * blocks + b;
        float s = 0.0f, z = has_zero ? zero[z_off + at] : zero_value;
        for (uint kk = k0; kk < k1; kk++) {
            float v;
            uint e = rows_of_k ? j * lds.s1 + kk : kk * lds.s1 + j;
            if (type == 2u) {
                uchar x = qb[j * lds.s1 + kk / 2];
                v = (float)(kk % 2 ? x >> 4 : x & 15);
            } else if (type == 3u) {
                v = vload_half(e, (__global const half *)qb);
            } else if (type == 4u) {
                uint h = (uint)qb[2 * e] | (uint)qb[2 * e + 1] << 8;
                v = as_float(h << 16);
            } else {
                uchar x = qb[e];
                v = type == 0u ? (float)(char)x : (float)x;
            }
            s += ar[kk] * (v - z);
        }
        y += scale[s_off + at] * s;
    }
    if (has_bias)
        y += bias[b_off + j];
    if (act)
        y = y < 0.0f ? 0.0f : y;
    if (act == 2)
        y = y > 6.0f ? 6.0f : y;
    c[c_off + i * lds.s2 + j] = y;
}
