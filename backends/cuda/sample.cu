/*
 * Sampling kernels: separable resampling (Resize, Upsample), GridSample and
 * RoiAlign.  One thread per output element, which reads what it needs of
 * the input and writes its element only (no output overlaps an input).
 * The arithmetic is the CPU backend's (cpu/resample.c, cpu/sample.c), in
 * float and in the same order, so that no math library call comes in and
 * the bits are the CPU's; tests/ref.c's references, in double, agree
 * within the tests' tolerances.
 */
#include "cu.h"

/* --- resample ----------------------------------------------------------- */

/* sn_resample_desc's per-axis arrays, by value into the kernel, with what
 * the launcher derives from them: each input axis' stride in a plane, the
 * choices of one tap on every axis but the last, and whether every axis
 * has one tap (nearest-neighbour resizing). */
typedef struct resample_axes {
    size_t in[SN_MAX_DIMS], out[SN_MAX_DIMS], taps[SN_MAX_DIMS];
    size_t table_off[SN_MAX_DIMS], istride[SN_MAX_DIMS];
    size_t lead;
    int one_tap;
} resample_axes;

/* A table entry t (index, weight) of an axis of n: whether its index lies
 * in [0, n) (NaN does not). */
static __device__ inline int resample_inside(const float *t, size_t n)
{
    return t[0] >= 0.0f && t[0] < (float)n;
}

/* One tap on every axis: 1 with *v the input element it reads, copied (0 +
 * 1 (0 + 1 x) would turn -0 into +0, and the CPU backend copies), or the
 * fill where it lies outside; 0 where a weight is not 1 (the sum then).
 * The CPU backend decides once for the whole table (every weight 1), this
 * per element: they differ only in a zero's sign, and only for a table
 * that mixes weights of 1 with others. */
static __device__ int resample_nearest(const resample_axes *a, size_t rank,
                                       const size_t *o, const float *xp,
                                       const float *table, float fill,
                                       float *v)
{
    size_t off = 0;
    for (size_t i = 0; i < rank; i++) {
        const float *t = table + a->table_off[i] + 2 * o[i];
        if (!resample_inside(t, a->in[i])) {
            *v = fill;
            return 1;
        }
        if (t[1] != 1.0f)
            return 0;
        off += (size_t)t[0] * a->istride[i];
    }
    *v = xp[off];
    return 1;
}

/*
 * Output element o (an index per axis) of the plane at xp, in the CPU
 * backend's order: over the last axis' taps j, acc += w_j * s_j, where s_j
 * sums, from 0 and over every choice of one tap on each leading axis (axis
 * 0 outermost, as an odometer), the product of their weights (axis 0's
 * first) times x at their indices and j's.  The fill as soon as a tap
 * lies outside: every tap is read on the way, so any outside one is met.
 */
static __device__ float resample_at(const resample_axes *a, size_t rank,
                                    const size_t *o, const float *xp,
                                    const float *table, float fill)
{
    const size_t last = rank - 1, tw = a->taps[last];
    const float *tl = table + a->table_off[last] + 2 * o[last] * tw;
    size_t k[SN_MAX_DIMS] = {0}; /* the leading taps chosen */
    float acc = 0.0f;

    for (size_t j = 0; j < tw; j++) {
        float s = 0.0f;
        if (!resample_inside(tl + 2 * j, a->in[last]))
            return fill;
        for (size_t c = 0; c < a->lead; c++) {
            size_t off = (size_t)tl[2 * j], i;
            float w = 1.0f;
            for (i = 0; i < last; i++) {
                const float *t =
                    table + a->table_off[i] + 2 * (o[i] * a->taps[i] + k[i]);
                if (!resample_inside(t, a->in[i]))
                    return fill;
                off += (size_t)t[0] * a->istride[i];
                w *= t[1];
            }
            s += w * xp[off];
            /* the next choice; after the last, all zeros again */
            for (i = last; i-- > 0;) {
                if (++k[i] < a->taps[i])
                    break;
                k[i] = 0;
            }
        }
        acc += tl[2 * j + 1] * s;
    }
    return acc;
}

/* Adjacent threads take adjacent outputs along the last axis, reading
 * adjacent table entries and, mostly, nearby input. */
static __global__ void resample(size_t n, size_t rank, resample_axes a,
                                size_t in_plane, const float *x,
                                const float *table, float fill, float *y)
{
    SN_CU_FOR(e, n)
    {
        size_t o[SN_MAX_DIMS], rest = e;
        const float *xp;
        float v;
        for (size_t i = rank; i-- > 0;) {
            size_t q = rest / a.out[i];
            o[i] = rest - q * a.out[i];
            rest = q;
        }
        xp = x + rest * in_plane;
        if (!a.one_tap || !resample_nearest(&a, rank, o, xp, table, fill, &v))
            v = resample_at(&a, rank, o, xp, table, fill);
        y[e] = v;
    }
}

int sn_cu_resample(const sn_resample_desc *d, void *stream)
{
    resample_axes a;
    size_t n = d->planes * sn_cu_elements(d->rank, d->out), in_plane = 1;

    a.lead = 1;
    a.one_tap = 1;
    for (size_t i = SN_MAX_DIMS; i-- > 0;) {
        int axis = i < d->rank;
        a.in[i] = axis ? d->in[i] : 1;
        a.out[i] = axis ? d->out[i] : 1;
        a.taps[i] = axis ? d->taps[i] : 1;
        a.table_off[i] = axis ? d->table_off[i] : 0;
        a.istride[i] = in_plane;
        in_plane *= a.in[i];
        if (i + 1 < d->rank)
            a.lead *= a.taps[i];
        a.one_tap &= a.taps[i] == 1;
    }
    return SN_CU_RUN(resample, n, stream, n, d->rank, a, in_plane,
                     (const float *)sn_cu_ptr(d->x),
                     (const float *)sn_cu_ptr(d->table), d->fill,
                     sn_cu_ptr(d->y));
}

/* --- grid_sample -------------------------------------------------------- */

/* A normalised coordinate in [-1, 1] to pixels of an axis of `size`. */
static __device__ float grid_unnormalize(float c, size_t size,
                                         int align_corners)
{
    return align_corners ? (c + 1.0f) / 2.0f * (float)(size - 1)
                         : ((c + 1.0f) * (float)size - 1.0f) / 2.0f;
}

/* c reflected into [lo2 / 2, hi2 / 2] (the bounds given doubled). */
static __device__ float grid_reflect(float c, float lo2, float hi2)
{
    float lo = lo2 / 2.0f, span = (hi2 - lo2) / 2.0f, extra, flips;
    if (lo2 == hi2)
        return 0.0f;
    c = fabsf(c - lo);
    extra = fmodf(c, span);
    flips = floorf(c / span);
    return fmodf(flips, 2.0f) == 0.0f ? extra + lo : span - extra + lo;
}

/* A pixel coordinate after the padding: clamped (border), reflected then
 * clamped (reflection), or as it is (zeros: reads outside give 0). */
static __device__ float grid_pad(float c, size_t size, int pad,
                                 int align_corners)
{
    if (pad == SN_GRID_ZEROS)
        return c;
    if (pad == SN_GRID_REFLECTION)
        c = align_corners
                ? grid_reflect(c, 0.0f, 2.0f * (float)(size - 1))
                : grid_reflect(c, -1.0f, 2.0f * (float)size - 1.0f);
    return fminf(fmaxf(c, 0.0f), (float)(size - 1));
}

/* plane[y][x], or 0 outside (NaN is outside). */
static __device__ float grid_at(const float *plane, size_t h, size_t w,
                                float y, float x)
{
    if (!(x >= 0.0f && x < (float)w && y >= 0.0f && y < (float)h))
        return 0.0f;
    return plane[(size_t)y * w + (size_t)x];
}

/* The bicubic weights (A = -0.75) of the taps at -1, 0, 1, 2 from a
 * point t past tap 0. */
static __device__ void grid_cubic(float t, float c[4])
{
    const float A = -0.75f;
    float t1 = t + 1.0f, t2 = 1.0f - t, t3 = 2.0f - t;
    c[0] = ((A * t1 - 5.0f * A) * t1 + 8.0f * A) * t1 - 4.0f * A;
    c[1] = ((A + 2.0f) * t - (A + 3.0f)) * t * t + 1.0f;
    c[2] = ((A + 2.0f) * t2 - (A + 3.0f)) * t2 * t2 + 1.0f;
    c[3] = ((A * t3 - 5.0f * A) * t3 + 8.0f * A) * t3 - 4.0f * A;
}

/* plane (h, w) sampled at normalised (gx, gy): the bicubic taps summed by
 * rows, or the padded coordinate's nearest pixel (half to even) or
 * bilinear corners. */
static __device__ float grid_value(const float *plane, size_t h, size_t w,
                                   int mode, int pad, int align_corners,
                                   float gx, float gy)
{
    float x = grid_unnormalize(gx, w, align_corners);
    float y = grid_unnormalize(gy, h, align_corners);
    float x0, y0, tx, ty;
    if (mode == SN_GRID_BICUBIC) {
        float cx[4], cy[4], acc = 0.0f;
        x0 = floorf(x);
        y0 = floorf(y);
        grid_cubic(x - x0, cx);
        grid_cubic(y - y0, cy);
        for (int i = 0; i < 4; i++) {
            float yy = grid_pad(y0 - 1.0f + (float)i, h, pad, align_corners);
            float row = 0.0f;
            for (int j = 0; j < 4; j++) {
                float xx =
                    grid_pad(x0 - 1.0f + (float)j, w, pad, align_corners);
                row += cx[j] * grid_at(plane, h, w, yy, xx);
            }
            acc += cy[i] * row;
        }
        return acc;
    }
    x = grid_pad(x, w, pad, align_corners);
    y = grid_pad(y, h, pad, align_corners);
    if (mode == SN_GRID_NEAREST)
        return grid_at(plane, h, w, rintf(y), rintf(x));
    x0 = floorf(x);
    y0 = floorf(y);
    tx = x - x0;
    ty = y - y0;
    return (1.0f - ty) * ((1.0f - tx) * grid_at(plane, h, w, y0, x0) +
                          tx * grid_at(plane, h, w, y0, x0 + 1.0f)) +
           ty * ((1.0f - tx) * grid_at(plane, h, w, y0 + 1.0f, x0) +
                 tx * grid_at(plane, h, w, y0 + 1.0f, x0 + 1.0f));
}

/* Output e of (batch, channels, out_h, out_w), npix = out_h * out_w of
 * them a plane; adjacent threads read adjacent grid pairs. */
static __global__ void grid_sample(size_t n, size_t npix, size_t channels,
                                   size_t h, size_t w, int mode, int pad,
                                   int align_corners, const float *x,
                                   const float *grid, float *y)
{
    SN_CU_FOR(e, n)
    {
        size_t u = e / npix, p = e - u * npix;
        const float *g = grid + ((u / channels) * npix + p) * 2;
        y[e] = grid_value(x + u * h * w, h, w, mode, pad, align_corners,
                          g[0], g[1]);
    }
}

int sn_cu_grid_sample(const sn_grid_sample_desc *d, void *stream)
{
    size_t npix = d->out_h * d->out_w, n = d->batch * d->channels * npix;
    return SN_CU_RUN(grid_sample, n, stream, n, npix, d->channels, d->in_h,
                     d->in_w, (int)d->mode, (int)d->padding,
                     d->align_corners, (const float *)sn_cu_ptr(d->x),
                     (const float *)sn_cu_ptr(d->grid), sn_cu_ptr(d->y));
}

/* --- roi_align ---------------------------------------------------------- */

/* One bilinear sample's contribution (as ONNX Runtime's RoiAlign): for
 * avg, the weighted sum of the four corners; for max, the largest weighted
 * corner.  A sample more than a pixel outside gives 0, and so does a NaN
 * one (a NaN region's), which has no corners to read (where the CPU
 * backend's conversion of NaN to an index is undefined). */
static __device__ float roi_sample(const float *plane, size_t h, size_t w,
                                   float y, float x, int max_mode)
{
    size_t yl, xl, yh, xh;
    float ly, lx, v0, v1, v2, v3;
    if (!(y >= -1.0f && y <= (float)h && x >= -1.0f && x <= (float)w))
        return 0.0f;
    y = y <= 0.0f ? 0.0f : y;
    x = x <= 0.0f ? 0.0f : x;
    yl = (size_t)y;
    xl = (size_t)x;
    if (yl >= h - 1) {
        yh = yl = h - 1;
        y = (float)yl;
    } else {
        yh = yl + 1;
    }
    if (xl >= w - 1) {
        xh = xl = w - 1;
        x = (float)xl;
    } else {
        xh = xl + 1;
    }
    ly = y - (float)yl;
    lx = x - (float)xl;
    v0 = (1.0f - ly) * (1.0f - lx) * plane[yl * w + xl];
    v1 = (1.0f - ly) * lx * plane[yl * w + xh];
    v2 = ly * (1.0f - lx) * plane[yh * w + xl];
    v3 = ly * lx * plane[yh * w + xh];
    if (max_mode)
        return fmaxf(fmaxf(fmaxf(v0, v1), v2), v3);
    return v0 + v1 + v2 + v3;
}

/* Samples per bin along an axis without a sampling ratio: ceil(bin),
 * none for an empty or inverted bin (or NaN), at most
 * SN_ROI_MAX_SAMPLES. */
static __device__ size_t roi_samples(float bin)
{
    float g = ceilf(bin);
    return !(g > 0.0f)                     ? 0
           : g > (float)SN_ROI_MAX_SAMPLES ? SN_ROI_MAX_SAMPLES
                                           : (size_t)g;
}

/* The sizes of a RoiAlign, by value into its kernel. */
typedef struct roi_dims {
    size_t batch, channels, in_h, in_w, out_h, out_w, ratio;
    float scale;
    int max_mode, half_pixel;
} roi_dims;

/* Output e of (nrois, channels, out_h, out_w): its region's bin (ph, pw)
 * in channel c of the region's image, the region's geometry worked out
 * per output as the CPU backend does per plane (the same float steps);
 * adjacent threads take adjacent bins of a plane. */
static __global__ void roi_align(size_t n, roi_dims s, const float *x,
                                 const float *rois, const float *bidx,
                                 float *y)
{
    SN_CU_FOR(e, n)
    {
        const size_t npix = s.out_h * s.out_w;
        const size_t u = e / npix, p = e - u * npix;
        const size_t r = u / s.channels, c = u - r * s.channels;
        const size_t ph = p / s.out_w, pw = p - ph * s.out_w;
        const float off = s.half_pixel ? 0.5f : 0.0f;
        const float *roi = rois + 4 * r, *plane;
        const float b = bidx[r];
        float x0 = roi[0] * s.scale - off, y0 = roi[1] * s.scale - off;
        float rw = roi[2] * s.scale - off - x0;
        float rh = roi[3] * s.scale - off - y0;
        float bh, bw, count, acc = 0.0f;
        size_t gh, gw;
        int first = 1;
        if (!(b >= 0.0f && b < (float)s.batch)) {
            y[e] = 0.0f;
            continue;
        }
        plane = x + ((size_t)b * s.channels + c) * s.in_h * s.in_w;
        if (!s.half_pixel) {
            rw = fmaxf(rw, 1.0f);
            rh = fmaxf(rh, 1.0f);
        }
        bh = rh / (float)s.out_h;
        bw = rw / (float)s.out_w;
        gh = s.ratio ? s.ratio : roi_samples(bh);
        gw = s.ratio ? s.ratio : roi_samples(bw);
        count = (float)(gh * gw > 0 ? gh * gw : 1);
        for (size_t iy = 0; iy < gh; iy++) {
            float sy = y0 + (float)ph * bh +
                       ((float)iy + 0.5f) * bh / (float)gh;
            for (size_t ix = 0; ix < gw; ix++) {
                float sx = x0 + (float)pw * bw +
                           ((float)ix + 0.5f) * bw / (float)gw;
                float v = roi_sample(plane, s.in_h, s.in_w, sy, sx,
                                     s.max_mode);
                if (!s.max_mode)
                    acc += v;
                else if (first || v > acc)
                    acc = v;
                first = 0;
            }
        }
        y[e] = s.max_mode ? acc : acc / count;
    }
}

int sn_cu_roi_align(const sn_roi_align_desc *d, void *stream)
{
    size_t n = d->nrois * d->channels * d->out_h * d->out_w;
    roi_dims s = {d->batch,          d->channels,      d->in_h,
                  d->in_w,           d->out_h,         d->out_w,
                  d->sampling_ratio, d->spatial_scale, d->max_mode,
                  d->half_pixel};
    return SN_CU_RUN(roi_align, n, stream, n, s,
                     (const float *)sn_cu_ptr(d->x),
                     (const float *)sn_cu_ptr(d->rois),
                     (const float *)sn_cu_ptr(d->batch_idx), sn_cu_ptr(d->y));
}
