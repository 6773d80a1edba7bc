/*
 * Convolution helpers on the CPU: im2col (a convolution then being one GEMM
 * per image, weights (out_ch, ch * k_h * k_w) times the im2col matrix),
 * 2-D max / average pooling, and the depthwise convolution, computed
 * directly (a GEMM per channel would have one row).
 *
 * Both kernels reduce every window to index ranges before touching data:
 * for one output row and one kernel tap, the output columns whose input
 * column lies inside the image form one contiguous range (span()), so the
 * inner loops run without bounds tests, as a memcpy where the stride is 1,
 * and the padding is written with memset.  Positions are computed in
 * signed 64-bit arithmetic; lib/backend/kernels.c bounded the image sizes and pads
 * by INT_MAX, and position() caps products of unbounded strides and
 * dilations, so nothing overflows whatever the descriptor holds.
 *
 * im2col: one work unit per (dst row, output row), i.e. out_w floats of
 * dst, in dst order; a thread takes a contiguous run of units.
 *
 * Pooling: one work unit per (plane, output row), accumulated in the
 * output row tap after tap (see pool_row()).  MAX starts from -inf and
 * propagates NaN (like the reductions); AVG sums the window in row-major
 * tap order, in float, exactly as the plain C reference does, and divides
 * by the count the descriptor defines (positions inside the input, or with
 * count_include_pad inside the padded input).  A window with no position
 * inside the input (only possible with inconsistent descriptors) gives
 * -inf for MAX and 0 / count for AVG (NaN when the count is 0 too).
 *
 * Depthwise convolution: one work unit per (output plane, output row),
 * 16 outputs at a time in a vector register (see dw_rows()), from a copy of
 * the plane's rows between zeros made once per plane and thread (narrow
 * rows copied 16 floats at a time, where calls to memcpy per row cost more
 * than the copy).
 */
#include <config.h>

#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "vec16.h"

/* Below this many output elements (times the window, for pooling) one
 * thread is faster than a team. */
#define PARALLEL_MIN 32768

/* Rows per thread from which a team splits rows of every plane rather
 * than whole planes (see plane_rows_parallel()): with 8, BlazeFace's
 * 16 x 16 depthwise layers took 26 us at two threads where whole planes
 * took 16.5 (a call per plane and thread); 64 x 64 ones gain with 32. */
#define BAND_MIN 32

/* Units [u0, u1) of a kernel over `ctx`, unit u = plane u / rows, output
 * row u % rows; a run may start and end inside a plane. */
typedef void (*units_fn)(const void *ctx, size_t u0, size_t u1);

/*
 * fn over planes x rows units, with `work` deciding whether a team is
 * worth it.  Each thread of the team takes a band of rows of every plane
 * where the planes are tall enough (BAND_MIN rows a thread or more), else a
 * run of whole planes: the band holds the same pixels of every channel as
 * the thread's columns of the GEMMs between these kernels (cpu/gemm.c,
 * cpu/sgemm_avx512.c split pixels into contiguous runs), so that a
 * 1x1 convolution, the depthwise one after it and the next 1x1 one find
 * their data in the same core's cache, where a split by planes had each
 * core read half its input from the other's (BlazeFace at two threads).
 */
static void plane_rows_parallel(size_t planes, size_t rows, double work,
                                units_fn fn, const void *ctx)
{
    const size_t units = planes * rows;
    if (units == 0)
        return;
    if (work <= PARALLEL_MIN || units < 2 || omp_get_max_threads() < 2) {
        fn(ctx, 0, units);
        return;
    }
#pragma omp parallel
    {
        size_t u0, u1;
        if (rows / (size_t)omp_get_num_threads() >= BAND_MIN) {
            sn_cpu_thread_share(rows, &u0, &u1);
            for (size_t p = 0; p < planes && u0 < u1; p++)
                fn(ctx, p * rows + u0, p * rows + u1);
        } else {
            sn_cpu_thread_share(units, &u0, &u1);
            fn(ctx, u0, u1);
        }
    }
}

/*
 * i * step - pad, or `cap` where i * step overflows or lands at or past
 * cap + pad: a position past the end, which is all the callers need to
 * know.  pad and cap are at most about 2^32 (see above).
 */
static long long position(size_t i, size_t step, size_t pad, long long cap)
{
    size_t p;
    if (__builtin_mul_overflow(i, step, &p) || p >= (size_t)cap + pad)
        return cap;
    return (long long)p - (long long)pad;
}

static unsigned long long ceil_div(unsigned long long a, size_t b)
{
    return a / b + (a % b != 0);
}

/* [*first, *last): the j in [0, n) with lo <= base + j * step < hi, for
 * step >= 1 (the range is contiguous because step is positive). */
static void span(long long base, size_t step, long long lo, long long hi,
                 size_t n, size_t *first, size_t *last)
{
    unsigned long long f = 0, l;

    if (base >= hi) {
        *first = *last = 0;
        return;
    }
    if (base < lo)
        f = ceil_div((unsigned long long)(lo - base), step);
    l = ceil_div((unsigned long long)(hi - base), step);
    if (l > n)
        l = n;
    if (f > l)
        f = l;
    *first = (size_t)f;
    *last = (size_t)l;
}

/* ---- im2col -------------------------------------------------------------- */

/* out[j] = in[j * s] for j < n: a vector loop (permutes of two loads for
 * s = 2, the strided stems), where the plain loop was scalar. */
static SN_VECTOR_CLONES void copy_strided(float *restrict out,
                                          const float *restrict in, size_t n,
                                          size_t s)
{
    if (s == 2) {
#pragma omp simd
        for (size_t j = 0; j < n; j++)
            out[j] = in[2 * j];
    } else {
#pragma omp simd
        for (size_t j = 0; j < n; j++)
            out[j] = in[j * s];
    }
}

/*
 * Output rows [oy, oy + n) of one tap (img's plane, tap origin by, bx;
 * rows [y0, y1) and columns [x0, x1) inside the input, x0 < x1) into out,
 * where both strides are 1 and rows are as wide as the input's: then the
 * rows inside read one contiguous run of the plane, (row, x0) to (last
 * row, x1 - 1), which a single copy moves, and the columns outside
 * [x0, x1) that it fills with the neighbouring rows' ends are zeroed
 * after (a 3 x 3 convolution's one column each side), where a copy and
 * two clears per row cost more than the copying.
 */
static void rows_shifted(const sn_im2col_desc *d, const float *img,
                         long long by, long long bx, size_t oy, size_t n,
                         size_t y0, size_t y1, size_t x0, size_t x1,
                         float *out)
{
    const size_t w = d->out_w, end = oy + n;
    const size_t a = oy > y0 ? oy : y0, b = end < y1 ? end : y1;

    if (a >= b) { /* every row outside */
        memset(out, 0, n * w * sizeof *out);
        return;
    }
    memset(out, 0, ((a - oy) * w + x0) * sizeof *out);
    memcpy(out + (a - oy) * w + x0,
           img + (size_t)(by + (long long)a) * w + (size_t)(bx + (long long)x0),
           ((b - a - 1) * w + (x1 - x0)) * sizeof *out);
    memset(out + (b - 1 - oy) * w + x1, 0,
           ((end - b) * w + (w - x1)) * sizeof *out);
    for (size_t y = a; y + 1 < b; y++) { /* the wrapped columns */
        float *r = out + (y - oy) * w;
        for (size_t x = x1; x < w; x++)
            r[x] = 0.0f;
        for (size_t x = 0; x < x0; x++)
            r[w + x] = 0.0f;
    }
}

/*
 * Units [u0, u1) of im2col, unit u = dst row u / out_h (channel c, tap ky,
 * kx), output row u % out_h.  src: (channels, in_h, in_w); dst: (channels *
 * k_h * k_w, out_h * out_w).
 */
static void im2col_units(const sn_im2col_desc *d, const float *src,
                         float *dst, size_t u0, size_t u1)
{
    const size_t taps = d->k_h * d->k_w, plane = d->in_h * d->in_w;
    const long long in_h = (long long)d->in_h, in_w = (long long)d->in_w;

    while (u0 < u1) {
        const size_t row = u0 / d->out_h, c = row / taps;
        const size_t ky = row % taps / d->k_w, kx = row % taps % d->k_w;
        const size_t oy_end = (row + 1) * d->out_h < u1 ? (row + 1) * d->out_h
                                                        : u1;
        /* Input row / column of output (0, 0) for this tap: the band's
         * first row (past the end where row0 * stride_h reaches in_h +
         * pad_top, capped there: then every tap row lies past it). */
        long long by = position(ky, d->dil_h, d->pad_top, in_h);
        const long long bx = position(kx, d->dil_w, d->pad_left, in_w);
        if (by < in_h)
            by += position(d->row0, d->stride_h, 0,
                           in_h + (long long)d->pad_top);
        const float *img = src + c * plane;
        size_t y0, y1, x0, x1;

        span(by, d->stride_h, 0, in_h, d->out_h, &y0, &y1);
        span(bx, d->stride_w, 0, in_w, d->out_w, &x0, &x1);
        if (d->stride_w == 1 && d->stride_h == 1 && d->in_w == d->out_w &&
            x0 < x1) {
            const size_t oy = u0 % d->out_h, n = oy_end - u0;
            rows_shifted(d, img, by, bx, oy, n, y0, y1, x0, x1,
                         dst + u0 * d->out_w);
            u0 = oy_end;
            continue;
        }
        for (size_t oy = u0 % d->out_h; u0 < oy_end; u0++, oy++) {
            float *out = dst + u0 * d->out_w; /* dst row `row`, row oy */
            if (oy < y0 || oy >= y1 || x0 == x1) {
                memset(out, 0, d->out_w * sizeof *out);
                continue;
            }
            /* Inside [y0, y1) and [x0, x1) the positions are in the image. */
            const float *in =
                img + (size_t)(by + (long long)(oy * d->stride_h)) * d->in_w;
            memset(out, 0, x0 * sizeof *out);
            memset(out + x1, 0, (d->out_w - x1) * sizeof *out);
            if (d->stride_w == 1) {
                memcpy(out + x0, in + (bx + (long long)x0),
                       (x1 - x0) * sizeof *out);
            } else {
                copy_strided(out + x0,
                             in + (bx + (long long)(x0 * d->stride_w)),
                             x1 - x0, d->stride_w);
            }
        }
    }
}

void sn_cpu_im2col(const sn_im2col_desc *d, const float *src, float *dst)
{
    const size_t units = d->channels * d->k_h * d->k_w * d->out_h;

    if (units == 0 || d->out_w == 0)
        return;
    if (units * d->out_w > PARALLEL_MIN && units > 1 &&
        omp_get_max_threads() > 1) {
#pragma omp parallel
        {
            size_t u0, u1;
            sn_cpu_thread_share(units, &u0, &u1);
            im2col_units(d, src, dst, u0, u1);
        }
    } else {
        im2col_units(d, src, dst, 0, units);
    }
}

/* ---- pooling ------------------------------------------------------------- */

/* A window along one axis: taps [first, last) inside the input, `count`
 * taps that the divisor counts, and the input position of tap 0. */
typedef struct window {
    size_t first, last, count;
    long long base;
} window;

/*
 * The window of output index o along an axis with `in` inputs, k taps,
 * stride, dilation and pads.  `span_all` is (k - 1) * dil (or SIZE_MAX when
 * that overflows): a window whose taps are all inside skips the divisions.
 */
static window axis_window(size_t o, size_t in, size_t k, size_t stride,
                          size_t dil, size_t pad0, size_t pad1,
                          size_t span_all, int include_pad)
{
    const long long end = (long long)in, pad_end = end + (long long)pad1;
    window w;

    w.base = position(o, stride, pad0, pad_end);
    if (w.base >= 0 && span_all < in && (size_t)w.base < in - span_all) {
        w.first = 0;
        w.last = w.count = k;
        return w;
    }
    span(w.base, dil, 0, end, k, &w.first, &w.last);
    w.count = w.last - w.first;
    if (include_pad) {
        size_t f, l;
        span(w.base, dil, -(long long)pad0, pad_end, k, &f, &l);
        w.count = l - f;
    }
    return w;
}

static size_t tap_extent(size_t k, size_t dil)
{
    size_t e;
    return __builtin_mul_overflow(k - 1, dil, &e) ? (size_t)-1 : e;
}

/*
 * Output row oy of pooling one plane: out (out_w) from img (in_h, in_w).
 * The row is the accumulator (-inf for MAX, 0 for AVG): it takes one tap
 * after the other, (ky, kx) in order, each over the range of output
 * columns whose input is inside the image, so that every output still
 * sees its taps in the plain loop's order, and the loops over the range
 * are vector loops; AVG then divides each output by its count.
 */
static SN_VECTOR_CLONES void pool_row(const sn_pool_desc *d, const float *img,
                                      size_t oy, size_t ext_h, size_t ext_w,
                                      float *restrict out)
{
    const long long in_w = (long long)d->in_w;
    const size_t ow = d->out_w, sw = d->stride_w;
    const int avg = d->op == SN_POOL_AVG;
    const window wy = axis_window(oy, d->in_h, d->k_h, d->stride_h,
                                  d->dil_h, d->pad_top, d->pad_bottom, ext_h,
                                  d->count_include_pad);
    const float init = avg ? 0.0f : -INFINITY;

    for (size_t ox = 0; ox < ow; ox++)
        out[ox] = init;
    for (size_t ky = wy.first; ky < wy.last; ky++) {
        /* Taps in [first, last) lie inside the image. */
        const float *row =
            img + (size_t)(wy.base + (long long)(ky * d->dil_h)) * d->in_w;
        for (size_t kx = 0; kx < d->k_w; kx++) {
            const long long bx = position(kx, d->dil_w, d->pad_left, in_w);
            size_t x0, x1;
            span(bx, sw, 0, in_w, ow, &x0, &x1);
            if (x0 == x1)
                continue;
            const float *restrict in = row + (bx + (long long)(x0 * sw));
            float *restrict o = out + x0;
            const size_t n = x1 - x0;
            if (avg && sw == 1) {
#pragma omp simd
                for (size_t j = 0; j < n; j++)
                    o[j] += in[j];
            } else if (avg) {
#pragma omp simd
                for (size_t j = 0; j < n; j++)
                    o[j] += in[j * sw];
            } else if (sw == 2) {
#pragma omp simd
                for (size_t j = 0; j < n; j++) {
                    const float v = in[2 * j];
                    o[j] = v > o[j] || v != v ? v : o[j]; /* NaN stays */
                }
            } else {
#pragma omp simd
                for (size_t j = 0; j < n; j++) {
                    const float v = in[j * sw];
                    o[j] = v > o[j] || v != v ? v : o[j];
                }
            }
        }
    }
    if (!avg)
        return;
    for (size_t ox = 0; ox < ow; ox++) {
        const window wx = axis_window(ox, d->in_w, d->k_w, sw, d->dil_w,
                                      d->pad_left, d->pad_right, ext_w,
                                      d->count_include_pad);
        out[ox] /= (float)(wy.count * wx.count);
    }
}

/* A 2 x 2 MaxPool with stride 2, no padding or dilation, whose windows all
 * lie inside the input: the common downsampling step. */
static int is_max2x2(const sn_pool_desc *d)
{
    return d->op == SN_POOL_MAX && d->k_h == 2 && d->k_w == 2 &&
           d->stride_h == 2 && d->stride_w == 2 && d->dil_h == 1 &&
           d->dil_w == 1 && !d->pad_top && !d->pad_left && !d->pad_bottom &&
           !d->pad_right && d->in_h / 2 >= d->out_h && d->in_w / 2 >= d->out_w;
}

/* o = v > o || v != v ? v : o, pool_row()'s step, lane by lane: v where it
 * is greater, then v where it is NaN (its magnitude's bits above
 * infinity's: the sign of infinity's bits minus them), each select one
 * mask and no float "unordered" test, the forms GCC 12 keeps in vector
 * registers in target clones (others it splits into scalar compares).  A
 * macro: vectors passed to a function change its ABI between clones. */
#define MAX_STEP(o, v)                                                        \
    do {                                                                      \
        const v16 v_ = (v);                                                   \
        const v16i gt_ = v_ > (o);                                            \
        v16i nan_;                                                            \
        (o) = (v16)(((v16i)v_ & gt_) | ((v16i)(o) & ~gt_));                   \
        nan_ = (0x7f800000 - ((v16i)v_ & 0x7fffffff)) >> 31;                  \
        (o) = (v16)(((v16i)v_ & nan_) | ((v16i)(o) & ~nan_));                 \
    } while (0)

/* Output row oy of is_max2x2()'s pooling: 16 outputs at a time from two
 * vectors of each of the two input rows, split into their even and odd
 * columns; the taps in pool_row()'s order with its step, so the same bits
 * (NaN included).  Output x reads input columns 2x and 2x + 1 < in_w. */
static SN_VECTOR_CLONES void max2x2_row(const sn_pool_desc *d,
                                        const float *img, size_t oy,
                                        float *restrict out)
{
    const v16i even = {0,  2,  4,  6,  8,  10, 12, 14,
                       16, 18, 20, 22, 24, 26, 28, 30};
    const v16i odd = even + 1;
    const float *r0 = img + 2 * oy * d->in_w, *r1 = r0 + d->in_w;
    size_t ox = 0;

    for (; ox + 16 <= d->out_w; ox += 16) {
        v16 a0, a1, b0, b1, o = {0};
        memcpy(&a0, r0 + 2 * ox, sizeof a0);
        memcpy(&a1, r0 + 2 * ox + 16, sizeof a1);
        memcpy(&b0, r1 + 2 * ox, sizeof b0);
        memcpy(&b1, r1 + 2 * ox + 16, sizeof b1);
        o -= INFINITY;
        MAX_STEP(o, __builtin_shuffle(a0, a1, even));
        MAX_STEP(o, __builtin_shuffle(a0, a1, odd));
        MAX_STEP(o, __builtin_shuffle(b0, b1, even));
        MAX_STEP(o, __builtin_shuffle(b0, b1, odd));
        memcpy(out + ox, &o, sizeof o);
    }
    for (; ox < d->out_w; ox++) {
        const float t[4] = {r0[2 * ox], r0[2 * ox + 1], r1[2 * ox],
                            r1[2 * ox + 1]};
        float o = -INFINITY;
        for (int i = 0; i < 4; i++)
            o = t[i] > o || t[i] != t[i] ? t[i] : o;
        out[ox] = o;
    }
}

/* Units [u0, u1) of pooling, unit u = plane u / out_h, output row
 * u % out_h.  src: (planes, in_h, in_w); dst: (planes, out_h, out_w). */
static void pool_units(const sn_pool_desc *d, const float *src, float *dst,
                       size_t u0, size_t u1)
{
    const size_t ext_h = tap_extent(d->k_h, d->dil_h);
    const size_t ext_w = tap_extent(d->k_w, d->dil_w);
    const int fast = is_max2x2(d);

    for (size_t u = u0; u < u1; u++) {
        const float *img = src + u / d->out_h * d->in_h * d->in_w;
        if (fast)
            max2x2_row(d, img, u % d->out_h, dst + u * d->out_w);
        else
            pool_row(d, img, u % d->out_h, ext_h, ext_w, dst + u * d->out_w);
    }
}

typedef struct pool_job {
    const sn_pool_desc *d;
    const float *src;
    float *dst;
} pool_job;

static void pool_job_units(const void *ctx, size_t u0, size_t u1)
{
    const pool_job *j = ctx;
    pool_units(j->d, j->src, j->dst, u0, u1);
}

void sn_cpu_pool(const sn_pool_desc *d, const float *src, float *dst)
{
    const pool_job j = {d, src, dst};
    const double work = (double)d->planes * (double)d->out_h *
                        (double)d->out_w * (double)d->k_h * (double)d->k_w;

    if (d->out_w == 0)
        return;
    plane_rows_parallel(d->planes, d->out_h, work, pool_job_units, &j);
}

/* ---- depthwise convolution ----------------------------------------------- */

/* Largest scratch of padded input rows a thread takes (floats); past it,
 * the rows are summed one output at a time. */
#define PAD_MAX ((size_t)1 << 22)

/* Padded rows of at most this many floats are copied 16 at a time (see
 * pad_rows_narrow()); wider ones by memcpy. */
#define NARROW 64

/* *v = p[0], p[s], ..., p[15 s]: reads p[0 .. 15 s] and nothing past it. */
static inline __attribute__((always_inline)) void load16(v16 *v,
                                                         const float *p,
                                                         size_t s)
{
    v16 b;
    memcpy(v, p, sizeof *v);
    if (s == 2) {
        memcpy(&b, p + 15, sizeof b); /* p[15 .. 30] */
        *v = __builtin_shuffle(*v, b,
                               (v16i){0, 2, 4, 6, 8, 10, 12, 14, 17, 19, 21,
                                      23, 25, 27, 29, 31});
    } else if (s > 2) {
        for (size_t j = 0; j < VW; j++)
            (*v)[j] = p[j * s];
    }
}

static inline __attribute__((always_inline)) float act1(sn_act act, float v)
{
    if (act != SN_ACT_NONE && v < 0.0f)
        v = 0.0f;
    return act == SN_ACT_RELU6 && v > 6.0f ? 6.0f : v;
}

/* The 16 sums *acc of one output block plus the bias, through act1()'s
 * activation (masks that keep NaN), into o: 16 outputs, or the `left`
 * ones left in the row. */
static inline __attribute__((always_inline)) void
store_block(sn_act act, const v16 *acc, float bias, float *o, size_t left)
{
    v16 v = *acc + bias;
    if (act != SN_ACT_NONE) /* v < 0 ? 0 : v */
        v = (v16)((v16i)v & ~(v < 0.0f));
    if (act == SN_ACT_RELU6) { /* then v > 6 ? 6 : v */
        const v16 six = {6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6};
        const v16i gt = v > six;
        v = (v16)(((v16i)v & ~gt) | ((v16i)six & gt));
    }
    if (left >= VW) {
        memcpy(o, &v, sizeof v);
    } else {
        for (size_t i = 0; i < left; i++)
            o[i] = v[i];
    }
}

/* The geometry of one plane's output row: input rows [k0, k1) of the
 * taps (the others are outside), the input row of tap 0 and the input
 * column of output 0, tap 0. */
typedef struct dw_rowgeom {
    size_t k0, k1;
    long long by, bx;
} dw_rowgeom;

static dw_rowgeom dw_geom(const sn_dwconv_desc *d, size_t oy)
{
    dw_rowgeom r;
    r.by = position(oy, d->stride_h, d->pad_top, (long long)d->in_h);
    r.bx = -(long long)d->pad_left;
    span(r.by, d->dil_h, 0, (long long)d->in_h, d->k_h, &r.k0, &r.k1);
    return r;
}

/* Floats in one padded row: every column the 16-wide blocks of an output
 * row read, (blocks * 16 - 1) * stride + extent + 1; 0 where that
 * overflows or passes PAD_MAX. */
static size_t dw_pad_width(const sn_dwconv_desc *d)
{
    size_t n = (d->out_w + VW - 1) / VW * VW, e;
    if (__builtin_mul_overflow(n - 1, d->stride_w, &n) ||
        __builtin_mul_overflow(d->k_w - 1, d->dil_w, &e) ||
        __builtin_add_overflow(n, e + 1, &n) || n > PAD_MAX)
        return 0;
    return n;
}

/*
 * Output row oy of one plane, summed one output at a time: out (out_w)
 * from the input plane img (in_h, in_w) and the plane's weights w (k_h,
 * k_w).  Each output sums its taps inside the input in (ky, kx) order,
 * then adds the bias and applies the activation.
 */
static void dw_row_scalar(const sn_dwconv_desc *d, const float *img,
                          const float *w, float bias, size_t oy, float *out)
{
    const dw_rowgeom g = dw_geom(d, oy);
    const long long in_w = (long long)d->in_w;

    for (size_t ox = 0; ox < d->out_w; ox++) {
        const long long x0 = g.bx + (long long)(ox * d->stride_w);
        float acc = 0.0f;
        for (size_t ky = g.k0; ky < g.k1; ky++) {
            const float *row =
                img + (size_t)(g.by + (long long)(ky * d->dil_h)) * d->in_w;
            for (size_t kx = 0; kx < d->k_w; kx++) {
                const long long x = x0 + (long long)(kx * d->dil_w);
                if (x >= 0 && x < in_w)
                    acc += w[ky * d->k_w + kx] * row[x];
            }
        }
        out[ox] = act1(d->act, acc + bias);
    }
}

/* The padded rows that output rows oy0 on read: padded row j < rows is
 * input row oy0 * stride_h - pad_top + j, pw floats: zeros (the whole row
 * where it is outside the input), else pad_left zeros, the row, zeros.
 * Zeros of up to 16 floats at either end are one store of 16, not a call
 * to memset: on the right it may spill into the next row, written after
 * it, or past the last into VW floats of slack that pad must have. */
static void pad_rows(const sn_dwconv_desc *d, const float *img, size_t oy0,
                     size_t rows, size_t pw, float *pad)
{
    const size_t left = d->pad_left < pw ? d->pad_left : pw;
    const size_t copy = d->in_w < pw - left ? d->in_w : pw - left;
    const long long top = (long long)(oy0 * d->stride_h) -
                          (long long)d->pad_top;
    const v16 zero = {0};

    for (size_t j = 0; j < rows; j++) {
        const long long iy = top + (long long)j;
        float *pr = pad + j * pw;
        if (iy < 0 || iy >= (long long)d->in_h) {
            memset(pr, 0, pw * sizeof *pr);
            continue;
        }
        if (left <= VW && pw >= VW) /* a store, not a call */
            memcpy(pr, &zero, sizeof zero);
        else
            memset(pr, 0, left * sizeof *pr);
        memcpy(pr + left, img + (size_t)iy * d->in_w, copy * sizeof *pr);
        if (pw - left - copy <= VW) /* may spill into the next row */
            memcpy(pr + left + copy, &zero, sizeof zero);
        else
            memset(pr + left + copy, 0, (pw - left - copy) * sizeof *pr);
    }
}

/* pad_rows() for narrow rows, pw a multiple of 16 (see NARROW): 16
 * floats at a time, a load of the plane with its lanes outside the row
 * masked, where the calls to memcpy and memset per row cost more than the
 * copy.  A chunk outside the row is zeros; one whose load would leave the
 * plane (at its first and last rows) copies the lanes inside. */
static inline __attribute__((always_inline)) void
pad_rows_narrow(const sn_dwconv_desc *d, const float *img, size_t oy0,
                size_t rows, size_t pw, float *pad)
{
    const v16i lanes = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    const long long in_w = (long long)d->in_w, in_h = (long long)d->in_h;
    const long long plane = in_h * in_w, left = (long long)d->pad_left;
    const long long top = (long long)(oy0 * d->stride_h) -
                          (long long)d->pad_top;

    for (size_t j = 0; j < rows; j++) {
        const long long iy = top + (long long)j;
        float *pr = pad + j * pw;
        if (iy < 0 || iy >= in_h) {
            memset(pr, 0, pw * sizeof *pr);
            continue;
        }
        for (size_t c = 0; c < pw; c += VW) {
            const long long x0 = (long long)c - left; /* column of lane 0 */
            const long long off = iy * in_w + x0;
            v16 v = {0};
            if (x0 >= in_w || x0 + VW <= 0) {
                /* outside the row: zeros */
            } else if (off >= 0 && off + VW <= plane) {
                const v16u x = (v16u)(lanes + (int)x0);
                memcpy(&v, img + off, sizeof v);
                v = (v16)((v16i)v & (v16i)(x < (unsigned)in_w));
            } else {
                const long long a = x0 < 0 ? -x0 : 0;
                const long long b = in_w - x0 < VW ? in_w - x0 : VW;
                float t[VW] = {0};
                memcpy(t + a, img + off + a, (size_t)(b - a) * sizeof *t);
                memcpy(&v, t, sizeof v);
            }
            memcpy(pr + c, &v, sizeof v);
        }
    }
}

/* The number of 16-output blocks summed together: independent chains of
 * FMAs, where one block alone waits on each FMA's latency. */
#define NBLK 4

/* The taps of NBLK blocks starting at base[i], into a[i], at stride s (a
 * constant where the caller is inlined with one, so that load16's tests
 * fold away); four named accumulators stay in registers. */
static inline __attribute__((always_inline)) void
taps4(const sn_dwconv_desc *d, const float *const base[NBLK], size_t rstep,
      const float *w, size_t s, v16 a[NBLK])
{
    v16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, x0, x1, x2, x3;
    const size_t kw = d->k_w, dw = d->dil_w;

    for (size_t ky = 0; ky < d->k_h; ky++)
        for (size_t kx = 0; kx < kw; kx++) {
            const float wv = w[ky * kw + kx];
            const size_t off = ky * rstep + kx * dw;
            load16(&x0, base[0] + off, s);
            load16(&x1, base[1] + off, s);
            load16(&x2, base[2] + off, s);
            load16(&x3, base[3] + off, s);
            a0 += wv * x0;
            a1 += wv * x1;
            a2 += wv * x2;
            a3 += wv * x3;
        }
    a[0] = a0;
    a[1] = a1;
    a[2] = a2;
    a[3] = a3;
}

/*
 * dw_rows()'s sums where the taps are kw (a constant where inlined) apart
 * by one column (stride and dilation 1 across) and each row has nb blocks
 * or more (nb a constant too): nb blocks of a row at a time, each 16
 * floats of a padded row loaded once, at a multiple of 16 (pad is aligned
 * and pw a multiple of 16 at least 16 more than the blocks span), the taps
 * to their right made by shifting them with the next 16, instead of a
 * load at every tap.  A row's last run of nb blocks ends at its last
 * block (some blocks computed twice, the same values stored twice).  The
 * same FMAs in the same order as taps4().
 */
static inline __attribute__((always_inline)) void
dw_rows_s1(const sn_dwconv_desc *d, const float *pad, size_t pw,
           const float *w, float bias, size_t nrows, float *restrict out,
           const int kw, const size_t nb)
{
    const size_t ow = d->out_w, nbx = (ow + VW - 1) / VW;
    const size_t rstep = d->dil_h * pw, rows_in = d->stride_h * pw;
    const v16i lanes = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

    for (size_t r = 0; r < nrows; r++) {
        for (size_t b0 = 0; b0 < nbx; b0 += nb) {
            const size_t c0 = nbx - b0 < nb ? nbx - nb : b0;
            const float *p = pad + r * rows_in + c0 * VW;
            v16 acc[8] = {0}, x[9];
            for (size_t ky = 0; ky < d->k_h; ky++, p += rstep) {
#pragma GCC unroll 9
                for (size_t j = 0; j <= nb; j++)
                    memcpy(&x[j], p + j * VW, sizeof x[j]);
#pragma GCC unroll 5
                for (int kx = 0; kx < kw; kx++) {
                    const float wv = w[ky * (size_t)kw + (size_t)kx];
#pragma GCC unroll 8
                    for (size_t j = 0; j < nb; j++) /* x[j] from kx on */
                        acc[j] += wv * (kx ? __builtin_shuffle(x[j], x[j + 1],
                                                               lanes + kx)
                                           : x[j]);
                }
            }
#pragma GCC unroll 8
            for (size_t j = 0; j < nb; j++) {
                const size_t col = (c0 + j) * VW;
                store_block(d->act, &acc[j], bias, out + r * ow + col,
                            ow - col);
            }
        }
    }
}

/* Does dw_rows() take dw_rows_s1() for d: the taps one column apart, 3
 * or 5 of them across, and rows of 4 blocks or more? */
static int dw_takes_s1(const sn_dwconv_desc *d)
{
    return d->stride_w == 1 && d->dil_w == 1 &&
           (d->k_w == 3 || d->k_w == 5) && d->out_w > 3 * VW;
}

/*
 * Output rows [oy0, oy0 + nrows) of the plane img, 16 outputs at a time as
 * vectors in registers, NBLK blocks at once, from pad: the prows input
 * rows the run reads, pw floats each, with zero rows and columns for the
 * padding, copied first (pad_rows(), or pad_rows_narrow() whose vectors
 * take this function's clones), so that every tap of every block reads
 * inside: a tap on a zero adds w * 0 = +-0, which leaves the sum as it is
 * (it starts at +0 and is never -0) as long as w is finite, which the
 * caller checked.  The sums are then the same as dw_row_scalar's, in the
 * same order.  out: (nrows, out_w).
 */
static SN_VECTOR_CLONES void dw_rows(const sn_dwconv_desc *d,
                                     const float *img, size_t oy0,
                                     size_t prows, float *pad, size_t pw,
                                     const float *w, float bias,
                                     size_t nrows, float *restrict out)
{
    const size_t ow = d->out_w, sw = d->stride_w;
    const size_t nbx = (ow + VW - 1) / VW, nb = nrows * nbx;
    const size_t rstep = d->dil_h * pw;
    /* Block b0's output row and column block, stepped along without a
     * division per block (with 3 x 3 taps, those divisions cost as much
     * as the sums). */
    size_t row0 = 0, cb0 = 0;

    if (pw <= NARROW)
        pad_rows_narrow(d, img, oy0, prows, pw, pad);
    else
        pad_rows(d, img, oy0, prows, pw, pad);
    if (dw_takes_s1(d)) {
        if (d->k_w == 3 && nbx >= 8)
            dw_rows_s1(d, pad, pw, w, bias, nrows, out, 3, 8);
        else if (d->k_w == 3)
            dw_rows_s1(d, pad, pw, w, bias, nrows, out, 3, 4);
        else if (nbx >= 8)
            dw_rows_s1(d, pad, pw, w, bias, nrows, out, 5, 8);
        else
            dw_rows_s1(d, pad, pw, w, bias, nrows, out, 5, 4);
        return;
    }
    for (size_t b0 = 0; b0 < nb; b0 += NBLK) {
        const size_t n = nb - b0 < NBLK ? nb - b0 : NBLK;
        const float *base[NBLK];
        size_t rows[NBLK], cols[NBLK];
        v16 acc[NBLK];
        size_t r = row0, cb = cb0;
        for (size_t i = 0; i < NBLK; i++) {
            if (i < n) { /* past n: block b0 again */
                rows[i] = r;
                cols[i] = cb * VW;
            } else {
                rows[i] = row0;
                cols[i] = cb0 * VW;
            }
            base[i] = pad + rows[i] * d->stride_h * pw + cols[i] * sw;
            if (++cb == nbx) {
                cb = 0;
                r++;
            }
        }
        row0 = r; /* block b0 + NBLK */
        cb0 = cb;
        if (sw == 1)
            taps4(d, base, rstep, w, 1, acc);
        else if (sw == 2)
            taps4(d, base, rstep, w, 2, acc);
        else
            taps4(d, base, rstep, w, sw, acc);
        for (size_t i = 0; i < n; i++)
            store_block(d->act, &acc[i], bias, out + rows[i] * ow + cols[i],
                        ow - cols[i]);
    }
}

/* How many padded rows output rows [oy0, oy0 + nrows) read: (nrows - 1) *
 * stride_h + extent + 1, or 0 where that overflows or the rows would pass
 * PAD_MAX floats of pw each. */
static size_t pad_row_count(const sn_dwconv_desc *d, size_t nrows, size_t pw)
{
    size_t n, e;
    if (!pw || __builtin_mul_overflow(nrows - 1, d->stride_h, &n) ||
        __builtin_mul_overflow(d->k_h - 1, d->dil_h, &e) ||
        __builtin_add_overflow(n, e + 1, &n) || n > PAD_MAX / pw)
        return 0;
    return n;
}

static int all_finite(const float *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(w[i]))
            return 0;
    return 1;
}

/*
 * Units [u0, u1) of a depthwise convolution, unit u = output plane
 * u / out_h, output row u % out_h.  The input rows a plane's run of units
 * reads are padded once and the run's rows read them (see dw_rows()); a
 * plane whose rows would take more than PAD_MAX floats, or
 * whose weights are not all finite, is summed one output at a time.
 */
static void dw_units(const sn_dwconv_desc *d, const float *src,
                     const float *w, const float *bias, float *dst, size_t u0,
                     size_t u1)
{
    const size_t och = d->channels * d->mult, taps = d->k_h * d->k_w;
    const size_t pw0 = dw_pad_width(d);
    /* narrow rows rounded up to whole chunks of 16 (see pad_rows_narrow);
     * for dw_rows_s1(), a chunk past the blocks */
    const size_t pw = !pw0                ? 0
                      : dw_takes_s1(d)     ? (d->out_w + 2 * VW - 1) / VW * VW
                      : pw0 <= NARROW      ? (pw0 + VW - 1) / VW * VW
                                           : pw0;
    float *pad = NULL;
    size_t have = 0; /* floats in pad */

    while (u0 < u1) {
        const size_t p = u0 / d->out_h, o = p % och, oy0 = u0 % d->out_h;
        const size_t nrows = u1 - u0 < d->out_h - oy0 ? u1 - u0
                                                      : d->out_h - oy0;
        const float *img =
            src + (p / och * d->channels + o / d->mult) * d->in_h * d->in_w;
        const float *wo = w + o * taps, b = bias ? bias[o] : 0.0f;
        float *out = dst + u0 * d->out_w;
        size_t rows = all_finite(wo, taps) ? pad_row_count(d, nrows, pw) : 0;

        if (rows && rows * pw > have) {
            free(pad);
            have = 0;
            /* + VW: see pad_rows(); aligned: see dw_rows_s1() */
            if ((pad = aligned_alloc(sizeof(v16),
                                     (rows * pw / VW + 2) * sizeof(v16))))
                have = rows * pw;
            else
                rows = 0;
        }
        if (rows) {
            dw_rows(d, img, oy0, rows, pad, pw, wo, b, nrows, out);
        } else {
            for (size_t r = 0; r < nrows; r++)
                dw_row_scalar(d, img, wo, b, oy0 + r, out + r * d->out_w);
        }
        u0 += nrows;
    }
    free(pad);
}

typedef struct dw_job {
    const sn_dwconv_desc *d;
    const float *src, *w, *bias;
    float *dst;
} dw_job;

static void dw_job_units(const void *ctx, size_t u0, size_t u1)
{
    const dw_job *j = ctx;
    dw_units(j->d, j->src, j->w, j->bias, j->dst, u0, u1);
}

void sn_cpu_dwconv(const sn_dwconv_desc *d, const float *src, const float *w,
                   const float *bias, float *dst)
{
    const dw_job j = {d, src, w, bias, dst};
    const size_t planes = d->images * d->channels * d->mult;
    const double work = (double)planes * (double)d->out_h *
                        (double)d->out_w * (double)d->k_h * (double)d->k_w;

    if (d->out_w == 0)
        return;
    plane_rows_parallel(planes, d->out_h, work, dw_job_units, &j);
}
