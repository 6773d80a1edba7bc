/*
 * Sampling an image at computed places (backend.h): GridSample and
 * RoiAlign, as cpu/sample.c.  One work-item per output element; the host
 * rounds the global size up and passes the true count n, and checks that
 * every uint index fits.
 */

#define SN_GRID_ZEROS 0
#define SN_GRID_REFLECTION 2
#define SN_GRID_NEAREST 1
#define SN_GRID_BICUBIC 2
#define SN_ROI_MAX_SAMPLES 1024

static float unnormalize(float c, uint size, int align_corners)
{
    return align_corners ? (c + 1.0f) / 2.0f * (float)(size - 1)
                         : ((c + 1.0f) * (float)size - 1.0f) / 2.0f;
}

static float reflect_coord(float c, float lo2, float hi2)
{
    float lo = lo2 / 2.0f, span = (hi2 - lo2) / 2.0f, extra, flips;
    if (lo2 == hi2)
        return 0.0f;
    c = fabs(c - lo);
    extra = fmod(c, span);
    flips = floor(c / span);
    return fmod(flips, 2.0f) == 0.0f ? extra + lo : span - extra + lo;
}

static float pad_coord(float c, uint size, int pad, int align_corners)
{
    if (pad == SN_GRID_ZEROS)
        return c;
    if (pad == SN_GRID_REFLECTION)
        c = align_corners ? reflect_coord(c, 0.0f, 2.0f * (float)(size - 1))
                          : reflect_coord(c, -1.0f, 2.0f * (float)size - 1.0f);
    return fmin(fmax(c, 0.0f), (float)(size - 1));
}

static float at(__global const float *plane, uint h, uint w, float y,
                float x)
{
    if (!(x >= 0.0f && x < (float)w && y >= 0.0f && y < (float)h))
        return 0.0f;
    return plane[(uint)y * w + (uint)x];
}

static float cubic_w(float t, int i)
{
    const float A = -0.75f;
    float u = i == 0 ? t + 1.0f : i == 1 ? t : i == 2 ? 1.0f - t : 2.0f - t;
    if (i == 1 || i == 2)
        return ((A + 2.0f) * u - (A + 3.0f)) * u * u + 1.0f;
    return ((A * u - 5.0f * A) * u + 8.0f * A) * u - 4.0f * A;
}

/*
 * y (batch, channels, out_h, out_w) = x (batch, channels, in_h, in_w)
 * sampled at grid (batch, out_h, out_w, 2).
 */
__kernel void grid_sample(uint n, __global const float *x, uint x_off,
                          __global const float *grid, uint g_off,
                          __global float *y, uint y_off, uint channels,
                          uint in_h, uint in_w, uint out_h, uint out_w,
                          int mode, int pad, int align_corners)
{
    size_t gid = get_global_id(0);
    uint npix = out_h * out_w, p, u;
    __global const float *plane;
    float gx, gy, sx, sy, v;

    if (gid >= n)
        return;
    u = (uint)gid / npix;
    p = (uint)gid - u * npix;
    plane = x + x_off + u * in_h * in_w;
    gx = grid[g_off + ((u / channels) * npix + p) * 2];
    gy = grid[g_off + ((u / channels) * npix + p) * 2 + 1];
    sx = unnormalize(gx, in_w, align_corners);
    sy = unnormalize(gy, in_h, align_corners);
    if (mode == SN_GRID_BICUBIC) {
        float x0 = floor(sx), y0 = floor(sy);
        v = 0.0f;
        for (int i = 0; i < 4; i++) {
            float yy = pad_coord(y0 - 1.0f + (float)i, in_h, pad,
                                 align_corners);
            float row = 0.0f;
            for (int j = 0; j < 4; j++) {
                float xx = pad_coord(x0 - 1.0f + (float)j, in_w, pad,
                                     align_corners);
                row += cubic_w(sx - x0, j) * at(plane, in_h, in_w, yy, xx);
            }
            v += cubic_w(sy - y0, i) * row;
        }
    } else {
        sx = pad_coord(sx, in_w, pad, align_corners);
        sy = pad_coord(sy, in_h, pad, align_corners);
        if (mode == SN_GRID_NEAREST) {
            v = at(plane, in_h, in_w, rint(sy), rint(sx));
        } else {
            float x0 = floor(sx), y0 = floor(sy), tx = sx - x0,
                  ty = sy - y0;
            v = (1.0f - ty) * ((1.0f - tx) * at(plane, in_h, in_w, y0, x0) +
                               tx * at(plane, in_h, in_w, y0, x0 + 1.0f)) +
                ty * ((1.0f - tx) * at(plane, in_h, in_w, y0 + 1.0f, x0) +
                      tx * at(plane, in_h, in_w, y0 + 1.0f, x0 + 1.0f));
        }
    }
    y[y_off + (uint)gid] = v;
}

static float roi_sample(__global const float *plane, uint h, uint w, float y,
                        float x, int max_mode)
{
    uint yl, xl, yh, xh;
    float ly, lx, v0, v1, v2, v3;
    if (y < -1.0f || y > (float)h || x < -1.0f || x > (float)w)
        return 0.0f;
    y = y <= 0.0f ? 0.0f : y;
    x = x <= 0.0f ? 0.0f : x;
    yl = (uint)y;
    xl = (uint)x;
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
        return fmax(fmax(fmax(v0, v1), v2), v3);
    return v0 + v1 + v2 + v3;
}

static uint samples(float bin)
{
    float g = ceil(bin);
    return !(g > 0.0f) ? 0
           : g > (float)SN_ROI_MAX_SAMPLES ? SN_ROI_MAX_SAMPLES
                                           : (uint)g;
}

/*
 * y (nrois, channels, out_h, out_w): region r of rois (nrois, 4) pooled
 * from image batch_idx[r] of x (batch, channels, in_h, in_w).
 */
__kernel void roi_align(uint n, __global const float *x, uint x_off,
                        __global const float *rois, uint r_off,
                        __global const float *bidx, uint b_off,
                        __global float *y, uint y_off, uint batch,
                        uint channels, uint in_h, uint in_w, uint out_h,
                        uint out_w, uint sampling_ratio, float scale,
                        int max_mode, int half_pixel)
{
    size_t gid = get_global_id(0);
    uint npix = out_h * out_w, u, p, r, c, ph, pw, gh, gw;
    float off = half_pixel ? 0.5f : 0.0f, b, x0, y0, rw, rh, bh, bw;
    float acc = 0.0f;
    int first = 1;
    __global const float *roi, *plane;

    if (gid >= n)
        return;
    u = (uint)gid / npix;
    p = (uint)gid - u * npix;
    r = u / channels;
    c = u - r * channels;
    ph = p / out_w;
    pw = p - ph * out_w;
    roi = rois + r_off + 4 * r;
    b = bidx[b_off + r];
    if (!(b >= 0.0f && b < (float)batch)) {
        y[y_off + (uint)gid] = 0.0f;
        return;
    }
    plane = x + x_off + ((uint)b * channels + c) * in_h * in_w;
    x0 = roi[0] * scale - off;
    y0 = roi[1] * scale - off;
    rw = roi[2] * scale - off - x0;
    rh = roi[3] * scale - off - y0;
    if (!half_pixel) {
        rw = fmax(rw, 1.0f);
        rh = fmax(rh, 1.0f);
    }
    bh = rh / (float)out_h;
    bw = rw / (float)out_w;
    gh = sampling_ratio ? sampling_ratio : samples(bh);
    gw = sampling_ratio ? sampling_ratio : samples(bw);
    for (uint iy = 0; iy < gh; iy++) {
        float sy = y0 + (float)ph * bh + ((float)iy + 0.5f) * bh / (float)gh;
        for (uint ix = 0; ix < gw; ix++) {
            float sx = x0 + (float)pw * bw +
                       ((float)ix + 0.5f) * bw / (float)gw;
            float v = roi_sample(plane, in_h, in_w, sy, sx, max_mode);
            if (!max_mode)
                acc += v;
            else if (first || v > acc)
                acc = v;
            first = 0;
        }
    }
    y[y_off + (uint)gid] =
        max_mode ? acc : acc / (float)(gh * gw > 0 ? gh * gw : 1);
}
