/*
 * Element-wise kernels on the CPU: binary ops with broadcasting, unary ops.
 *
 * Binary ops first simplify the descriptor: dimensions of size 1 are dropped
 * and neighbours whose strides chain in both operands are merged (the same
 * rule as sn_binary_broadcast, applied again because a descriptor may come
 * from elsewhere).  The fast paths then fall out of the merged shape:
 *  - both operands contiguous with the output's shape: one row, strides 1/1;
 *  - one operand a scalar: one row, strides 0/1 or 1/0;
 *  - innermost stride 0 or 1 in both: rows of a plain `omp simd` loop;
 *  - anything else (a transposed view): a strided scalar loop per row.
 * The output index space is cut into one contiguous range per thread (when
 * it is larger than PARALLEL_MIN elements); a thread walks its range row by
 * row with an index counter over the merged shape.
 *
 * Semantics: MAX / MIN as fmaxf / fminf (a NaN operand yields the other
 * one), written as compare-and-select so that the loop vectorises; POW as
 * powf.  Unary ops use libm (expf, tanhf, erff, logf, sqrtf) as the plain C
 * reference does, built without -ffast-math, so results match it exactly;
 * sigmoid is 1 / (1 + expf(-x)); RELU passes NaN through.
 *
 * Aliasing: y may be x for unary ops; c may be a or b only where that
 * operand is read at the output's own index (same shape, contiguous).
 */
#include <config.h>

#include <math.h>
#include <omp.h>
#include <stddef.h>

#include "cpu_kernels.h"

/* Below this many output elements one thread is faster than a team. */
#define PARALLEL_MIN 32768
/* Per-thread ranges start on a multiple of this many floats (a cache line). */
#define RANGE_ALIGN 16

/* c[i] = a[i * sa] op b[i * sb] for i in [0, n); sa, sb in {0, 1} vectorise. */
typedef void (*row_fn)(size_t n, const float *a, size_t sa, const float *b,
                       size_t sb, float *c);

#define DEFINE_ROW(name, EXPR)                                                \
    static void row_##name(size_t n, const float *a, size_t sa,               \
                           const float *b, size_t sb, float *c)               \
    {                                                                         \
        if (sa == 1 && sb == 1) {                                             \
            _Pragma("omp simd") for (size_t i = 0; i < n; i++)                \
            {                                                                 \
                const float x = a[i], y = b[i];                               \
                c[i] = (EXPR);                                                \
            }                                                                 \
        } else if (sa == 1 && sb == 0) {                                      \
            const float y = b[0];                                             \
            _Pragma("omp simd") for (size_t i = 0; i < n; i++)                \
            {                                                                 \
                const float x = a[i];                                         \
                c[i] = (EXPR);                                                \
            }                                                                 \
        } else if (sa == 0 && sb == 1) {                                      \
            const float x = a[0];                                             \
            _Pragma("omp simd") for (size_t i = 0; i < n; i++)                \
            {                                                                 \
                const float y = b[i];                                         \
                c[i] = (EXPR);                                                \
            }                                                                 \
        } else {                                                              \
            for (size_t i = 0; i < n; i++) {                                  \
                const float x = a[i * sa], y = b[i * sb];                     \
                c[i] = (EXPR);                                                \
            }                                                                 \
        }                                                                     \
    }

DEFINE_ROW(add, x + y)
DEFINE_ROW(sub, x - y)
DEFINE_ROW(mul, x * y)
DEFINE_ROW(div, x / y)
/* fmaxf(x, y): the larger; a NaN operand gives the other operand. */
DEFINE_ROW(max, (x > y || isnan(y)) ? x : y)
DEFINE_ROW(min, (x < y || isnan(y)) ? x : y)

#undef DEFINE_ROW

/* powf is a scalar libm call: no simd variant exists without -ffast-math. */
static void row_pow(size_t n, const float *a, size_t sa, const float *b,
                    size_t sb, float *c)
{
    for (size_t i = 0; i < n; i++)
        c[i] = powf(a[i * sa], b[i * sb]);
}

static const row_fn row_fns[SN_BINARY_COUNT] = {
    [SN_BINARY_ADD] = row_add, [SN_BINARY_SUB] = row_sub,
    [SN_BINARY_MUL] = row_mul, [SN_BINARY_DIV] = row_div,
    [SN_BINARY_MAX] = row_max, [SN_BINARY_MIN] = row_min,
    [SN_BINARY_POW] = row_pow,
};

/* The descriptor with size-1 dimensions dropped and chained ones merged;
 * rank >= 1 (a rank-0 descriptor becomes one dimension of 1). */
typedef struct bshape {
    size_t rank, total;
    size_t shape[SN_MAX_DIMS], sa[SN_MAX_DIMS], sb[SN_MAX_DIMS];
} bshape;

static void simplify(const sn_binary_desc *d, bshape *s)
{
    size_t r = 0;

    s->total = 1;
    for (size_t j = 0; j < d->rank; j++) {
        const size_t n = d->shape[j];
        s->total *= n;
        if (n == 1)
            continue;
        if (r > 0 && s->sa[r - 1] == d->stride_a[j] * n &&
            s->sb[r - 1] == d->stride_b[j] * n) {
            s->shape[r - 1] *= n;
            s->sa[r - 1] = d->stride_a[j];
            s->sb[r - 1] = d->stride_b[j];
            continue;
        }
        s->shape[r] = n;
        s->sa[r] = d->stride_a[j];
        s->sb[r] = d->stride_b[j];
        r++;
    }
    if (r == 0) {
        s->shape[0] = 1;
        s->sa[0] = s->sb[0] = 0;
        r = 1;
    }
    s->rank = r;
}

/* Output elements [begin, end), walked row by row (a row: the innermost
 * merged dimension, or the part of it inside the range). */
static void binary_range(row_fn fn, const bshape *s, const float *a,
                         const float *b, float *c, size_t begin, size_t end)
{
    const size_t last = s->rank - 1, inner = s->shape[last];
    size_t idx[SN_MAX_DIMS], oa = 0, ob = 0, rem = begin;

    for (size_t j = s->rank; j-- > 0;) {
        idx[j] = rem % s->shape[j];
        rem /= s->shape[j];
        oa += idx[j] * s->sa[j];
        ob += idx[j] * s->sb[j];
    }
    while (begin < end) {
        size_t n = inner - idx[last];
        if (n > end - begin)
            n = end - begin;
        fn(n, a + oa, s->sa[last], b + ob, s->sb[last], c + begin);
        begin += n;
        /* Advance the counter by n; offsets wrap modulo SIZE_MAX + 1 on the
         * way back down, which unsigned arithmetic makes exact. */
        idx[last] += n;
        oa += n * s->sa[last];
        ob += n * s->sb[last];
        for (size_t j = last; j > 0 && idx[j] == s->shape[j]; j--) {
            oa -= s->shape[j] * s->sa[j];
            ob -= s->shape[j] * s->sb[j];
            idx[j] = 0;
            idx[j - 1]++;
            oa += s->sa[j - 1];
            ob += s->sb[j - 1];
        }
    }
}

/* This thread's share [*begin, *end) of n items, aligned to RANGE_ALIGN. */
static void thread_range(size_t n, size_t *begin, size_t *end)
{
    const size_t t = (size_t)omp_get_thread_num();
    const size_t nt = (size_t)omp_get_num_threads();
    size_t per = n / nt + (n % nt != 0);

    per = (per + RANGE_ALIGN - 1) / RANGE_ALIGN * RANGE_ALIGN;
    *begin = t * per < n ? t * per : n;
    *end = *begin + per < n ? *begin + per : n;
}

void sn_cpu_binary(const sn_binary_desc *d, const float *a, const float *b,
                   float *c)
{
    const row_fn fn = row_fns[d->op];
    bshape s;

    simplify(d, &s);
    if (s.total == 0)
        return;
    if (s.total > PARALLEL_MIN && omp_get_max_threads() > 1) {
#pragma omp parallel
        {
            size_t begin, end;
            thread_range(s.total, &begin, &end);
            if (begin < end)
                binary_range(fn, &s, a, b, c, begin, end);
        }
    } else {
        binary_range(fn, &s, a, b, c, 0, s.total);
    }
}

/* y[i] = op(x[i]) for i in [0, n).  No restrict: y may be x. */
static void unary_range(sn_unary_op op, size_t n, const float *x, float *y)
{
    switch (op) {
    case SN_UNARY_RELU:
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            y[i] = x[i] < 0.0f ? 0.0f : x[i];
        break;
    case SN_UNARY_SIGMOID:
        for (size_t i = 0; i < n; i++)
            y[i] = 1.0f / (1.0f + expf(-x[i]));
        break;
    case SN_UNARY_TANH:
        for (size_t i = 0; i < n; i++)
            y[i] = tanhf(x[i]);
        break;
    case SN_UNARY_ERF:
        for (size_t i = 0; i < n; i++)
            y[i] = erff(x[i]);
        break;
    case SN_UNARY_EXP:
        for (size_t i = 0; i < n; i++)
            y[i] = expf(x[i]);
        break;
    case SN_UNARY_LOG:
        for (size_t i = 0; i < n; i++)
            y[i] = logf(x[i]);
        break;
    case SN_UNARY_SQRT:
        for (size_t i = 0; i < n; i++)
            y[i] = sqrtf(x[i]);
        break;
    case SN_UNARY_NEG:
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            y[i] = -x[i];
        break;
    case SN_UNARY_ABS:
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            y[i] = fabsf(x[i]);
        break;
    case SN_UNARY_COUNT:
        break;
    }
}

void sn_cpu_unary(const sn_unary_desc *d, const float *x, float *y)
{
    if (d->n > PARALLEL_MIN && omp_get_max_threads() > 1) {
#pragma omp parallel
        {
            size_t begin, end;
            thread_range(d->n, &begin, &end);
            if (begin < end)
                unary_range(d->op, end - begin, x + begin, y + begin);
        }
    } else {
        unary_range(d->op, d->n, x, y);
    }
}
