/*
 * Sampling an image at computed places on the CPU (backend.h): GridSample
 * (bilinear, nearest or bicubic reads at a grid of normalised
 * coordinates, with zeros, border or reflection padding) and RoiAlign
 * (bilinear samples averaged, or maxed, over the bins of regions).  One
 * output plane (a channel of an image or region) per unit of work.
 */
#include <config.h>

#include <math.h>

#include "cpu_kernels.h"

/* --- GridSample ----------------------------------------------------------- */

/* A normalised coordinate in [-1, 1] to pixels of an axis of `size`. */
static float unnormalize(float c, size_t size, int align_corners)
{
    return align_corners ? (c + 1.0f) / 2.0f * (float)(size - 1)
                         : ((c + 1.0f) * (float)size - 1.0f) / 2.0f;
}

/* Reflect c into [lo2 / 2, hi2 / 2] (bounds given doubled). */
static float reflect(float c, float lo2, float hi2)
{
    float lo = lo2 / 2.0f, span = (hi2 - lo2) / 2.0f, extra, flips;
    if (lo2 == hi2)
        return 0.0f;
    c = fabsf(c - lo);
    extra = fmodf(c, span);
    flips = floorf(c / span);
    return fmodf(flips, 2.0f) == 0.0f ? extra + lo : span - extra + lo;
}

/* A pixel coordinate after the padding mode: clamped (border), reflected
 * then clamped (reflection), or as it is (zeros). */
static float pad_coord(float c, size_t size, sn_grid_padding pad,
                       int align_corners)
{
    if (pad == SN_GRID_ZEROS)
        return c;
    if (pad == SN_GRID_REFLECTION)
        c = align_corners ? reflect(c, 0.0f, 2.0f * (float)(size - 1))
                          : reflect(c, -1.0f, 2.0f * (float)size - 1.0f);
    return fminf(fmaxf(c, 0.0f), (float)(size - 1));
}

/* plane[y][x], or 0 outside. */
static float at(const float *plane, size_t h, size_t w, float y, float x)
{
    if (!(x >= 0.0f && x < (float)w && y >= 0.0f && y < (float)h))
        return 0.0f;
    return plane[(size_t)y * w + (size_t)x];
}

static void cubic_weights(float t, float c[4])
{
    const float A = -0.75f;
    float t1 = t + 1.0f, t2 = 1.0f - t, t3 = 2.0f - t;
    c[0] = ((A * t1 - 5.0f * A) * t1 + 8.0f * A) * t1 - 4.0f * A;
    c[1] = ((A + 2.0f) * t - (A + 3.0f)) * t * t + 1.0f;
    c[2] = ((A + 2.0f) * t2 - (A + 3.0f)) * t2 * t2 + 1.0f;
    c[3] = ((A * t3 - 5.0f * A) * t3 + 8.0f * A) * t3 - 4.0f * A;
}

/* One output element: plane (in_h, in_w) sampled at normalised (gx, gy). */
static float grid_value(const sn_grid_sample_desc *d, const float *plane,
                        float gx, float gy)
{
    const size_t h = d->in_h, w = d->in_w;
    float x = unnormalize(gx, w, d->align_corners);
    float y = unnormalize(gy, h, d->align_corners);
    if (d->mode == SN_GRID_BICUBIC) {
        float x0 = floorf(x), y0 = floorf(y), cx[4], cy[4], acc = 0.0f;
        cubic_weights(x - x0, cx);
        cubic_weights(y - y0, cy);
        for (int i = 0; i < 4; i++) {
            float yy = pad_coord(y0 - 1.0f + (float)i, h, d->padding,
                                 d->align_corners);
            float row = 0.0f;
            for (int j = 0; j < 4; j++) {
                float xx = pad_coord(x0 - 1.0f + (float)j, w, d->padding,
                                     d->align_corners);
                row += cx[j] * at(plane, h, w, yy, xx);
            }
            acc += cy[i] * row;
        }
        return acc;
    }
    x = pad_coord(x, w, d->padding, d->align_corners);
    y = pad_coord(y, h, d->padding, d->align_corners);
    if (d->mode == SN_GRID_NEAREST)
        return at(plane, h, w, rintf(y), rintf(x));
    float x0 = floorf(x), y0 = floorf(y), tx = x - x0, ty = y - y0;
    return (1.0f - ty) * ((1.0f - tx) * at(plane, h, w, y0, x0) +
                          tx * at(plane, h, w, y0, x0 + 1.0f)) +
           ty * ((1.0f - tx) * at(plane, h, w, y0 + 1.0f, x0) +
                 tx * at(plane, h, w, y0 + 1.0f, x0 + 1.0f));
}

/* Output planes [u0, u1) of batch * channels. */
static void grid_planes(const sn_grid_sample_desc *d, const float *x,
                        const float *grid, float *y, size_t u0, size_t u1)
{
    const size_t in_plane = d->in_h * d->in_w, npix = d->out_h * d->out_w;
    for (size_t u = u0; u < u1; u++) {
        const float *plane = x + u * in_plane;
        const float *g = grid + (u / d->channels) * npix * 2;
        float *out = y + u * npix;
        for (size_t p = 0; p < npix; p++)
            out[p] = grid_value(d, plane, g[2 * p], g[2 * p + 1]);
    }
}

void sn_cpu_grid_sample(const sn_grid_sample_desc *d, const float *x,
                        const float *grid, float *y)
{
    const size_t planes = d->batch * d->channels;
    if (planes * d->out_h * d->out_w == 0)
        return;
    if (planes > 1 && omp_get_max_threads() > 1) {
#pragma omp parallel
        {
            size_t u0, u1;
            sn_cpu_thread_share(planes, &u0, &u1);
            grid_planes(d, x, grid, y, u0, u1);
        }
    } else {
        grid_planes(d, x, grid, y, 0, planes);
    }
}

/* --- RoiAlign ------------------------------------------------------------- */

/* One bilinear sample's contribution (as ONNX Runtime's RoiAlign): for
 * avg, the weighted sum of the four corners; for max, the largest weighted
 * corner.  A sample more than a pixel outside gives 0. */
static float roi_sample(const float *plane, size_t h, size_t w, float y,
                        float x, int max_mode)
{
    size_t yl, xl, yh, xh;
    float ly, lx, v[4];
    if (y < -1.0f || y > (float)h || x < -1.0f || x > (float)w)
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
    v[0] = (1.0f - ly) * (1.0f - lx) * plane[yl * w + xl];
    v[1] = (1.0f - ly) * lx * plane[yl * w + xh];
    v[2] = ly * (1.0f - lx) * plane[yh * w + xl];
    v[3] = ly * lx * plane[yh * w + xh];
    if (max_mode)
        return fmaxf(fmaxf(fmaxf(v[0], v[1]), v[2]), v[3]);
    return v[0] + v[1] + v[2] + v[3];
}

/* Samples per bin along an axis without a sampling ratio: ceil(bin),
 * none for an empty or inverted bin, at most SN_ROI_MAX_SAMPLES. */
static size_t samples(float bin)
{
    float g = ceilf(bin);
    return !(g > 0.0f) ? 0
           : g > (float)SN_ROI_MAX_SAMPLES ? SN_ROI_MAX_SAMPLES
                                           : (size_t)g;
}

/* Output planes [u0, u1) of nrois * channels. */
static void roi_planes(const sn_roi_align_desc *d, const float *x,
                       const float *rois, const float *bidx, float *y,
                       size_t u0, size_t u1)
{
    const size_t in_plane = d->in_h * d->in_w, npix = d->out_h * d->out_w;
    const float off = d->half_pixel ? 0.5f : 0.0f;
    for (size_t u = u0; u < u1; u++) {
        const size_t r = u / d->channels, c = u % d->channels;
        const float *roi = rois + 4 * r, b = bidx[r];
        float *out = y + u * npix;
        float x0 = roi[0] * d->spatial_scale - off;
        float y0 = roi[1] * d->spatial_scale - off;
        float rw = roi[2] * d->spatial_scale - off - x0;
        float rh = roi[3] * d->spatial_scale - off - y0;
        if (!(b >= 0.0f && b < (float)d->batch)) {
            for (size_t p = 0; p < npix; p++)
                out[p] = 0.0f;
            continue;
        }
        const float *plane = x + ((size_t)b * d->channels + c) * in_plane;
        if (!d->half_pixel) {
            rw = fmaxf(rw, 1.0f);
            rh = fmaxf(rh, 1.0f);
        }
        float bh = rh / (float)d->out_h, bw = rw / (float)d->out_w;
        size_t gh = d->sampling_ratio ? d->sampling_ratio : samples(bh);
        size_t gw = d->sampling_ratio ? d->sampling_ratio : samples(bw);
        float count = (float)(gh * gw > 0 ? gh * gw : 1);
        for (size_t ph = 0; ph < d->out_h; ph++)
            for (size_t pw = 0; pw < d->out_w; pw++) {
                float acc = 0.0f;
                int first = 1;
                for (size_t iy = 0; iy < gh; iy++) {
                    float sy = y0 + (float)ph * bh +
                               ((float)iy + 0.5f) * bh / (float)gh;
                    for (size_t ix = 0; ix < gw; ix++) {
                        float sx = x0 + (float)pw * bw +
                                   ((float)ix + 0.5f) * bw / (float)gw;
                        float v = roi_sample(plane, d->in_h, d->in_w, sy, sx,
                                             d->max_mode);
                        if (!d->max_mode)
                            acc += v;
                        else if (first || v > acc)
                            acc = v;
                        first = 0;
                    }
                }
                out[ph * d->out_w + pw] = d->max_mode ? acc : acc / count;
            }
    }
}

void sn_cpu_roi_align(const sn_roi_align_desc *d, const float *x,
                      const float *rois, const float *batch_idx, float *y)
{
    const size_t planes = d->nrois * d->channels;
    if (planes * d->out_h * d->out_w == 0)
        return;
    if (planes > 1 && omp_get_max_threads() > 1) {
#pragma omp parallel
        {
            size_t u0, u1;
            sn_cpu_thread_share(planes, &u0, &u1);
            roi_planes(d, x, rois, batch_idx, y, u0, u1);
        }
    } else {
        roi_planes(d, x, rois, batch_idx, y, 0, planes);
    }
}
