/*
 * Softmax, reductions and top k over the middle axis of x viewed as
 * (outer, len, inner).
 *
 * Two layouts, both vectorised:
 *  - inner == 1: each output reduces one contiguous row of len floats;
 *  - inner > 1: the len rows of one outer slice are accumulated element-wise
 *    into a vector of inner floats, one tile of TILE columns at a time so
 *    that the accumulators stay in L1; the inner loop runs along inner.
 * Work units (an outer index, or an outer index and a column tile) are
 * shared between the OpenMP team when x is larger than PARALLEL_MIN.
 *
 * Accumulation is in float, and the order is fixed (it does not depend on
 * the thread count or the vector width):
 *  - inner > 1: each output sums its len values in order r = 0, 1, ...,
 *    exactly as the plain C reference does;
 *  - inner == 1, SUM / MEAN: LANES partial sums, partial l taking the values
 *    r = l, l + LANES, ... in order, then the partials added in order
 *    0..LANES-1, then the tail (len % LANES values) in order;
 *  - softmax, inner > 1: each sum of exponentials in order r = 0, 1, ...,
 *    as the reference does; inner == 1: in LANES partials (partial l takes
 *    r = l, l + LANES, ..., the tail r = LANES q + l into partial l), then
 *    folded pairwise (l + LANES/2 into l, halving; cpu_kernels.h): a few
 *    vector adds where sixteen dependent ones made most of a short row's
 *    time.  The exponentials are the vectorised exp of vmath.h (within
 *    2 ulp), so results differ from the reference's libm expf by a few
 *    ulp.
 * MAX (and the softmax's max) is exact in any order; it propagates NaN,
 * as MIN does.  MEAN is the float sum divided by len.  MIN, PROD,
 * SUM_SQUARE and SUM_ABS run in order r = 0, 1, ... in both layouts, as
 * the reference does.  Softmax is stabilised by the
 * maximum: y = exp(x - max) / sum, log-softmax y = (x - max) - log(sum).
 * Softmax may run in place (y == x); a reduction's y must not overlap x.
 *
 * Cumulative sums: each (outer, inner) line in order along the axis, the
 * inner positions of one outer slice side by side (vectorised).
 *
 * Top k (at the end): for each (outer, inner) position, k scans of the
 * axis, each picking the element ranked first among those ranked after
 * the previous pick: no memory beyond the outputs, k * len comparisons.
 */
#include <config.h>

#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <string.h>

#include "cpu_kernels.h"
#include "vmath.h"

/* Below this many input elements one thread is faster than a team. */
#define PARALLEL_MIN 32768
/* Columns of inner per work unit when inner > 1 (two 1 KiB accumulators). */
#define TILE 256
/* Partial sums per row when inner == 1 (one AVX-512 register). */
#define LANES SN_LANES

/* max(m, v) that keeps a NaN once seen; vectorises to compare + blend. */
static inline float max_nan(float m, float v)
{
    return (v > m || isnan(v)) ? v : m;
}

static int go_parallel(size_t elements, size_t units)
{
    return elements > PARALLEL_MIN && units > 1 && omp_get_max_threads() > 1;
}

/* ---- reductions ---------------------------------------------------------- */

/* Sum of x[0..n) in the LANES-partials order documented above. */
static float row_sum(const float *x, size_t n)
{
    float acc[LANES] = {0.0f};
    size_t i = 0;
    float s = 0.0f;

    for (; i + LANES <= n; i += LANES) {
#pragma omp simd
        for (size_t l = 0; l < LANES; l++)
            acc[l] += x[i + l];
    }
    for (size_t l = 0; l < LANES; l++)
        s += acc[l];
    for (; i < n; i++)
        s += x[i];
    return s;
}

/* The last n % LANES values of a row (the tail), in a whole vector whose
 * other lanes hold `pad` (masked loads where the CPU has them): every loop
 * below runs over whole vectors. */
static inline __attribute__((always_inline)) void
tail_lanes(const float *x, size_t n, float pad, float t[LANES])
{
    const size_t i = n - n % LANES, r = n % LANES;
#pragma omp simd
    for (size_t l = 0; l < LANES; l++)
        t[l] = l < r ? x[i + l] : pad;
}

/* Maximum of x[0..n), n >= 1: LANES running maxima folded pairwise (any
 * order gives the same maximum; the lanes let it vectorise).  Inlined, so
 * the softmax clones compile it for their own vector width. */
static inline __attribute__((always_inline)) float row_max(const float *x,
                                                           size_t n)
{
    float acc[LANES];
    size_t i = 0;

    /* x[0] pads: the maximum includes it anyway */
    tail_lanes(x, n, x[0], acc);
    for (; i + LANES <= n; i += LANES) {
#pragma omp simd
        for (size_t l = 0; l < LANES; l++)
            acc[l] = max_nan(acc[l], x[i + l]);
    }
#pragma GCC unroll 4
    for (size_t w = LANES / 2; w; w /= 2) {
#pragma omp simd
        for (size_t l = 0; l < w; l++)
            acc[l] = max_nan(acc[l], acc[l + w]);
    }
    return acc[0];
}

/* min(m, v) that keeps a NaN once seen, as max_nan. */
static inline float min_nan(float m, float v)
{
    return (v < m || isnan(v)) ? v : m;
}

/* y[0..w) = reduction over r of x[r * inner + 0..w): one tile of a slice. */
static void tile_reduce(sn_reduce_op op, const float *x, size_t len,
                        size_t inner, size_t w, float *y)
{
    for (size_t j = 0; j < w; j++)
        y[j] = op == SN_REDUCE_SUM_SQUARE ? x[j] * x[j]
               : op == SN_REDUCE_SUM_ABS  ? fabsf(x[j])
                                          : x[j];
    for (size_t r = 1; r < len; r++) {
        const float *row = x + r * inner;
        switch (op) {
        case SN_REDUCE_MAX:
#pragma omp simd
            for (size_t j = 0; j < w; j++)
                y[j] = max_nan(y[j], row[j]);
            break;
        case SN_REDUCE_MIN:
#pragma omp simd
            for (size_t j = 0; j < w; j++)
                y[j] = min_nan(y[j], row[j]);
            break;
        case SN_REDUCE_PROD:
#pragma omp simd
            for (size_t j = 0; j < w; j++)
                y[j] *= row[j];
            break;
        case SN_REDUCE_SUM_SQUARE:
#pragma omp simd
            for (size_t j = 0; j < w; j++)
                y[j] += row[j] * row[j];
            break;
        case SN_REDUCE_SUM_ABS:
#pragma omp simd
            for (size_t j = 0; j < w; j++)
                y[j] += fabsf(row[j]);
            break;
        default: /* SUM, MEAN */
#pragma omp simd
            for (size_t j = 0; j < w; j++)
                y[j] += row[j];
            break;
        }
    }
    if (op == SN_REDUCE_MEAN) {
        const float n = (float)len;
#pragma omp simd
        for (size_t j = 0; j < w; j++)
            y[j] /= n;
    }
}

/* Work unit u: outer index u / tiles, column tile u % tiles. */
static void reduce_unit(const sn_reduce_desc *d, size_t tiles, const float *x,
                        float *y, size_t u)
{
    const size_t o = u / tiles, j0 = (u % tiles) * TILE;
    const float *xs = x + o * d->len * d->inner;

    if (d->inner == 1) {
        if (d->op == SN_REDUCE_MAX)
            y[o] = row_max(xs, d->len);
        else if (d->op == SN_REDUCE_SUM)
            y[o] = row_sum(xs, d->len);
        else if (d->op == SN_REDUCE_MEAN)
            y[o] = row_sum(xs, d->len) / (float)d->len;
        else /* the others in order, as a tile one column wide */
            tile_reduce(d->op, xs, d->len, 1, 1, y + o);
        return;
    }
    tile_reduce(d->op, xs + j0, d->len, d->inner,
                d->inner - j0 < TILE ? d->inner - j0 : TILE,
                y + o * d->inner + j0);
}

void sn_cpu_reduce(const sn_reduce_desc *d, const float *x, float *y)
{
    const size_t tiles = d->inner == 1 ? 1 : (d->inner + TILE - 1) / TILE;
    const size_t units = d->outer * tiles;

    if (units == 0 || d->len == 0)
        return;
    if (go_parallel(d->outer * d->len * d->inner, units)) {
#pragma omp parallel for schedule(static)
        for (size_t u = 0; u < units; u++)
            reduce_unit(d, tiles, x, y, u);
    } else {
        for (size_t u = 0; u < units; u++)
            reduce_unit(d, tiles, x, y, u);
    }
}

/* ---- softmax ------------------------------------------------------------- */

/*
 * exp(d) for d = x - max <= 0, with results under FLT_MIN flushed to 0:
 * d is clamped to -87 before the exponential (exp(-87) = 1.6e-38 is still
 * normal) and the result replaced by 0 below it.  Every sum it enters is at
 * least 1 (the maximum's own exp(0)), so the flushed terms, each under
 * 1.7e-38, cannot change it, and an output of 0 where the exact one is
 * under 1.7e-38 is within any tolerance.  Subnormal results cost about
 * three times the time of normal ones (a microcode assist per vector on
 * this machine's AMD EPYC): rows of scores spread over more than 87 took
 * 42 ns per 16 values against 14.
 */
static inline __attribute__((always_inline)) float exp_shifted(float d)
{
    const float e = sn_exp1(d < -87.0f ? -87.0f : d);
    return d < -87.0f ? 0.0f : e;
}

/* One row (inner == 1): y = exp(x - max) / sum, the exponentials summed in
 * LANES partials (the tail into the first partials; -inf pads the tail's
 * vector, whose exponentials, 0, add nothing) folded pairwise. */
static inline __attribute__((always_inline)) void
softmax_row(const float *x, size_t n, int log_softmax, float *y)
{
    const float m = row_max(x, n);
    const size_t whole = n - n % LANES;
    float acc[LANES] = {0.0f}, t[LANES], e[LANES], s;

    for (size_t i = 0; i < whole; i += LANES) {
#pragma omp simd
        for (size_t l = 0; l < LANES; l++) {
            e[l] = exp_shifted(x[i + l] - m);
            acc[l] += e[l];
        }
        if (!log_softmax) /* y may be x: x[i..i+LANES) was read */
            memcpy(y + i, e, sizeof e);
    }
    if (whole < n) {
        tail_lanes(x, n, -INFINITY, t);
#pragma omp simd
        for (size_t l = 0; l < LANES; l++) {
            e[l] = exp_shifted(t[l] - m);
            acc[l] += e[l];
        }
        if (!log_softmax) {
            const size_t r = n - whole;
#pragma omp simd
            for (size_t l = 0; l < LANES; l++)
                if (l < r)
                    y[whole + l] = e[l];
        }
    }
    s = sn_fold_lanes(acc);
    if (log_softmax) {
        s = logf(s);
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            y[i] = (x[i] - m) - s;
        return;
    }
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        y[i] /= s;
}

/* Rows [r0, r1) of x, y (inner == 1), each of n values: one call into the
 * vector clone for a block of rows. */
SN_VECTOR_CLONES static void softmax_rows(const float *x, size_t n,
                                          size_t r0, size_t r1,
                                          int log_softmax, float *y)
{
    for (size_t r = r0; r < r1; r++)
        softmax_row(x + r * n, n, log_softmax, y + r * n);
}

/* One tile of w columns of one slice: x, y point at row 0, column j0. */
SN_VECTOR_CLONES static void softmax_tile(const float *x, size_t len,
                                          size_t inner, size_t w,
                                          int log_softmax, float *y)
{
    float m[TILE], s[TILE];

    for (size_t j = 0; j < w; j++) {
        m[j] = x[j];
        s[j] = 0.0f;
    }
    for (size_t r = 1; r < len; r++) {
        const float *row = x + r * inner;
#pragma omp simd
        for (size_t j = 0; j < w; j++)
            m[j] = max_nan(m[j], row[j]);
    }
    for (size_t r = 0; r < len; r++) {
        const float *row = x + r * inner;
        float *out = y + r * inner;
        if (log_softmax) {
#pragma omp simd
            for (size_t j = 0; j < w; j++)
                s[j] += exp_shifted(row[j] - m[j]);
            continue;
        }
#pragma omp simd
        for (size_t j = 0; j < w; j++) {
            const float e = exp_shifted(row[j] - m[j]);
            out[j] = e;
            s[j] += e;
        }
    }
    if (log_softmax) {
        for (size_t j = 0; j < w; j++)
            s[j] = logf(s[j]);
        for (size_t r = 0; r < len; r++) {
            const float *row = x + r * inner;
            float *out = y + r * inner;
#pragma omp simd
            for (size_t j = 0; j < w; j++)
                out[j] = (row[j] - m[j]) - s[j];
        }
        return;
    }
    for (size_t r = 0; r < len; r++) {
        float *out = y + r * inner;
#pragma omp simd
        for (size_t j = 0; j < w; j++)
            out[j] /= s[j];
    }
}

static void softmax_unit(const sn_softmax_desc *d, size_t tiles,
                         const float *x, float *y, size_t u)
{
    const size_t o = u / tiles, j0 = (u % tiles) * TILE;
    const size_t base = o * d->len * d->inner + j0;

    softmax_tile(x + base, d->len, d->inner,
                 d->inner - j0 < TILE ? d->inner - j0 : TILE, d->log_softmax,
                 y + base);
}

void sn_cpu_softmax(const sn_softmax_desc *d, const float *x, float *y)
{
    const size_t tiles = d->inner == 1 ? 1 : (d->inner + TILE - 1) / TILE;
    const size_t units = d->outer * tiles;

    if (units == 0 || d->len == 0)
        return;
    if (d->inner == 1) {
        /* Rows: an even share of them per thread. */
        if (go_parallel(d->outer * d->len, d->outer)) {
#pragma omp parallel
            {
                size_t r0, r1;
                sn_cpu_thread_share(d->outer, &r0, &r1);
                softmax_rows(x, d->len, r0, r1, d->log_softmax, y);
            }
        } else {
            softmax_rows(x, d->len, 0, d->outer, d->log_softmax, y);
        }
        return;
    }
    if (go_parallel(d->outer * d->len * d->inner, units)) {
#pragma omp parallel for schedule(static)
        for (size_t u = 0; u < units; u++)
            softmax_unit(d, tiles, x, y, u);
    } else {
        for (size_t u = 0; u < units; u++)
            softmax_unit(d, tiles, x, y, u);
    }
}

/* ---- top k --------------------------------------------------------------- */

/* Is (a, ia) ranked before (b, ib) (sn_topk_desc's order)? */
static int ranks_before(const sn_topk_desc *d, float a, size_t ia, float b,
                        size_t ib)
{
    if (isnan(a) != isnan(b))
        return isnan(a);
    if (a != b && !isnan(a))
        return d->largest ? a > b : a < b;
    return d->last_index ? ia > ib : ia < ib;
}

static void topk_unit(const sn_topk_desc *d, const float *x, float *values,
                      float *indices, size_t u)
{
    const size_t o = u / d->inner, i = u % d->inner;
    const float *xc = x + o * d->len * d->inner + i;
    size_t prev = 0, at = o * d->k * d->inner + i;

    for (size_t t = 0; t < d->k; t++, at += d->inner) {
        size_t best = d->len;
        for (size_t r = 0; r < d->len; r++) {
            if (t > 0 && !ranks_before(d, xc[prev * d->inner], prev,
                                       xc[r * d->inner], r))
                continue;
            if (best == d->len || ranks_before(d, xc[r * d->inner], r,
                                               xc[best * d->inner], best))
                best = r;
        }
        /* best < len: k <= len leaves an element after every pick */
        prev = best;
        if (values)
            values[at] = xc[best * d->inner];
        indices[at] = (float)best;
    }
}

void sn_cpu_topk(const sn_topk_desc *d, const float *x, float *values,
                 float *indices)
{
    const size_t units = d->outer * d->inner;

    if (go_parallel(units * d->len * d->k, units)) {
#pragma omp parallel for schedule(static)
        for (size_t u = 0; u < units; u++)
            topk_unit(d, x, values, indices, u);
    } else {
        for (size_t u = 0; u < units; u++)
            topk_unit(d, x, values, indices, u);
    }
}

/* ---- cumulative sums ----------------------------------------------------- */

static void scan_slice(const sn_scan_desc *d, const float *x, float *y,
                       size_t o)
{
    const size_t in = d->inner, base = o * d->len * in;

    for (size_t j = 0; j < in; j++) {
        const float *xc = x + base + j;
        float *yc = y + base + j;
        float acc = 0.0f;
        for (size_t t = 0; t < d->len; t++) {
            size_t r = (d->reverse ? d->len - 1 - t : t) * in;
            if (d->exclusive) {
                yc[r] = acc;
                acc += xc[r];
            } else {
                acc += xc[r];
                yc[r] = acc;
            }
        }
    }
}

void sn_cpu_scan(const sn_scan_desc *d, const float *x, float *y)
{
    if (go_parallel(d->outer * d->len * d->inner, d->outer)) {
#pragma omp parallel for schedule(static)
        for (size_t o = 0; o < d->outer; o++)
            scan_slice(d, x, y, o);
    } else {
        for (size_t o = 0; o < d->outer; o++)
            scan_slice(d, x, y, o);
    }
}
