/*
 * Layer normalisation on the CPU, over the last axis of x viewed as
 * (outer, len): y = (x - mean) / sqrt(var + epsilon) * scale + bias.
 *
 * Two passes over each row, as the textbook does it: the mean, then the
 * biased variance as the mean of (x - mean)^2 (not E[x^2] - mean^2, which
 * cancels catastrophically when |mean| is large next to the spread), then
 * one pass writing y.  Accumulation is in float, in LANES partial sums
 * (partial l takes the elements l, l + LANES, ... in order; then the
 * partials folded pairwise, l + LANES/2 into l, halving until one is left;
 * then the tail), so the order is fixed and does not depend on the thread
 * count; against the double-precision reference the error stays within a
 * few ulps times sqrt(len / LANES).  (The fold is a few vector adds where
 * the partials in order were fifteen dependent ones: for rows of 64 that
 * chain was most of a row's time.)  The rows are
 * shared between the threads when x is larger than PARALLEL_MIN.
 *
 * y may be x (each row is read in full before it is written).
 */
#include <config.h>

#include <math.h>
#include <omp.h>
#include <stddef.h>

#include "cpu_kernels.h"

/* Below this many elements one thread is faster than a team. */
#define PARALLEL_MIN 32768
#define LANES SN_LANES

/* sum of x[0..n) in the order described above. */
static inline __attribute__((always_inline)) float sum_of(const float *x,
                                                         size_t n)
{
    float acc[LANES] = {0.0f}, s;
    size_t i = 0;

    for (; i + LANES <= n; i += LANES) {
#pragma omp simd
        for (size_t l = 0; l < LANES; l++)
            acc[l] += x[i + l];
    }
    s = sn_fold_lanes(acc);
    for (; i < n; i++)
        s += x[i];
    return s;
}

/* sum of (x[i] - mean)^2 for i in [0, n), in the same order. */
static inline __attribute__((always_inline)) float
squares_of(const float *x, size_t n, float mean)
{
    float acc[LANES] = {0.0f}, s;
    size_t i = 0;

    for (; i + LANES <= n; i += LANES) {
#pragma omp simd
        for (size_t l = 0; l < LANES; l++) {
            const float v = x[i + l] - mean;
            acc[l] += v * v;
        }
    }
    s = sn_fold_lanes(acc);
    for (; i < n; i++) {
        const float v = x[i] - mean;
        s += v * v;
    }
    return s;
}

/* Rows [r0, r1).  x, y: (outer, len); scale, bias: (len), bias may be
 * NULL. */
SN_VECTOR_CLONES static void norm_rows(const sn_layernorm_desc *d,
                                       const float *x, const float *scale,
                                       const float *bias, float *y, size_t r0,
                                       size_t r1)
{
    const size_t n = d->len;

    for (size_t r = r0; r < r1; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        const float mean = sum_of(xr, n) / (float)n;
        const float var = squares_of(xr, n, mean) / (float)n;
        const float inv = 1.0f / sqrtf(var + d->epsilon);
        if (bias) {
#pragma omp simd
            for (size_t i = 0; i < n; i++)
                yr[i] = (xr[i] - mean) * inv * scale[i] + bias[i];
        } else {
#pragma omp simd
            for (size_t i = 0; i < n; i++)
                yr[i] = (xr[i] - mean) * inv * scale[i];
        }
    }
}

void sn_cpu_layernorm(const sn_layernorm_desc *d, const float *x,
                      const float *scale, const float *bias, float *y)
{
    if (d->outer == 0 || d->len == 0)
        return;
    if (d->outer * d->len > PARALLEL_MIN && d->outer > 1 &&
        omp_get_max_threads() > 1) {
#pragma omp parallel
        {
            size_t r0, r1;
            sn_cpu_thread_share(d->outer, &r0, &r1);
            norm_rows(d, x, scale, bias, y, r0, r1);
        }
    } else {
        norm_rows(d, x, scale, bias, y, 0, d->outer);
    }
}
