/*
 * Element-wise kernels on the CPU: binary ops with broadcasting, unary ops,
 * where, the strided copy and gather.
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
 * powf; MOD, FMOD, the comparisons, the logic ops and PRELU as backend.h
 * states them, comparisons written as selects.  EXP and ERF use the vectorised exp and erf of vmath.h (within 2
 * and 3 ulp; the plain C reference's libm differs from them by a few ulp),
 * SIGMOID is 1 / (1 + exp(-x)) with that exp; the other unary ops use libm
 * (tanhf, logf, sqrtf, and erff for GELU, whose 1 + erf(x) cancels for
 * negative x and so needs erf correctly rounded) as the reference does,
 * built without -ffast-math, so they match it exactly.  RELU passes NaN
 * through.  The ops of SN_UNARY_MATH_MAP are in unary_math.c.
 *
 * The parameterised unary ops follow sn_unary_desc literally, with the
 * comparisons ordered so that NaN stays NaN (LEAKY_RELU, HARD_SIGMOID and
 * CLIP), GELU as 0.5 x (1 + erff(x / sqrt 2)) and GELU_TANH with tanhf;
 * the constants are rounded to float once, as in the reference.
 *
 * Where walks its three operands like a binary op (same simplification,
 * same per-thread ranges); a NaN condition counts as true (NaN != 0).
 *
 * The strided copy first brings the descriptor to a canonical form that
 * visits the same (source, destination) pairs: size-1 dimensions dropped,
 * negative destination strides flipped, dimensions sorted by decreasing
 * destination stride, chained ones merged.  Then each unit of work is
 *  - a row of the innermost dimension: memcpy when both strides are 1, a
 *    fill when the source stride is 0 (Expand), a strided loop otherwise;
 *  - or, for a transpose (writes contiguous along the innermost dimension,
 *    reads contiguous along another), a panel of PANEL_ROWS source-contiguous
 *    rows by the innermost dimension, copied in blocks of PANEL_COLS columns
 *    so that each source cache line is loaded once per block.
 * Units are shared between the threads in contiguous runs when the copy
 * moves more than PARALLEL_MIN elements.
 *
 * Gather copies rows of `inner` floats (zeros for an index out of range
 * after adding axis_len to a negative one), rows shared between threads.
 *
 * Aliasing: y may be x for unary ops; c may be a or b only where that
 * operand is read at the output's own index (same shape, contiguous).
 * The outputs of where, copy and gather must not overlap their inputs.
 */
#include <config.h>

#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu_kernels.h"
#include "vec16.h"
#include "vmath.h"

/* GELU's constants, rounded to float once: sqrt(2) and sqrt(2 / pi). */
#define GELU_SQRT2 1.41421356237309505f
#define GELU_SQRT_2_PI 0.797884560802865356f

/* Below this many output elements one thread is faster than a team. */
#define PARALLEL_MIN 32768
/* Per-thread ranges start on a multiple of this many floats (a cache line). */
#define RANGE_ALIGN 16

/* c[i] = a[i * sa] op b[i * sb] for i in [0, n); sa, sb in {0, 1} vectorise. */
typedef void (*row_fn)(size_t n, const float *a, size_t sa, const float *b,
                       size_t sb, float *c);

/* (One operation per element, nothing to fuse: every clone gives the same
 * bits.) */
#define DEFINE_ROW(name, EXPR)                                                \
    SN_VECTOR_CLONES static void row_##name(size_t n, const float *a,         \
                                            size_t sa, const float *b,        \
                                            size_t sb, float *c)              \
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

/* MOD: numpy's remainder, the divisor's sign (fmodf is exact). */
static inline float mod_floor(float x, float y)
{
    const float r = fmodf(x, y);
    return r != 0.0f && (r < 0.0f) != (y < 0.0f) ? r + y : r;
}

DEFINE_ROW(mod, mod_floor(x, y))
DEFINE_ROW(fmod, fmodf(x, y))
DEFINE_ROW(equal, x == y ? 1.0f : 0.0f)
DEFINE_ROW(greater, x > y ? 1.0f : 0.0f)
DEFINE_ROW(greater_equal, x >= y ? 1.0f : 0.0f)
DEFINE_ROW(and, x != 0.0f && y != 0.0f ? 1.0f : 0.0f)
DEFINE_ROW(or, x != 0.0f || y != 0.0f ? 1.0f : 0.0f)
DEFINE_ROW(xor, (x != 0.0f) != (y != 0.0f) ? 1.0f : 0.0f)
DEFINE_ROW(prelu, x < 0.0f ? y * x : x)

/* With the fused Relu in the same loop (the unary RELU's expression, on
 * the rounded result: the bits of the two steps). */
#define RELU_OF(v) ((v) < 0.0f ? 0.0f : (v))
DEFINE_ROW(add_relu, RELU_OF(x + y))
DEFINE_ROW(sub_relu, RELU_OF(x - y))
DEFINE_ROW(mul_relu, RELU_OF(x * y))
DEFINE_ROW(div_relu, RELU_OF(x / y))
#undef RELU_OF

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
    [SN_BINARY_MOD] = row_mod, [SN_BINARY_FMOD] = row_fmod,
    [SN_BINARY_EQUAL] = row_equal, [SN_BINARY_GREATER] = row_greater,
    [SN_BINARY_GREATER_EQUAL] = row_greater_equal,
    [SN_BINARY_AND] = row_and, [SN_BINARY_OR] = row_or,
    [SN_BINARY_XOR] = row_xor, [SN_BINARY_PRELU] = row_prelu,
};

/* The ops with the Relu in their loop; the others apply it per chunk. */
static const row_fn row_relu_fns[SN_BINARY_COUNT] = {
    [SN_BINARY_ADD] = row_add_relu, [SN_BINARY_SUB] = row_sub_relu,
    [SN_BINARY_MUL] = row_mul_relu, [SN_BINARY_DIV] = row_div_relu,
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

/* Floats of a row that a fused Relu outside the op's loop follows while
 * they are in the L1 cache. */
#define RELU_CHUNK 2048

/* A row of fn with the Relu applied chunk by chunk after it: the unary
 * RELU's expression, so the bits are those of the unfused form. */
static void row_then_relu(row_fn fn, size_t n, const float *a, size_t sa,
                          const float *b, size_t sb, float *c)
{
    for (size_t i = 0; i < n; i += RELU_CHUNK) {
        const size_t m = n - i < RELU_CHUNK ? n - i : RELU_CHUNK;
        fn(m, a + i * sa, sa, b + i * sb, sb, c + i);
#pragma omp simd
        for (size_t j = 0; j < m; j++)
            c[i + j] = c[i + j] < 0.0f ? 0.0f : c[i + j];
    }
}

/* Output elements [begin, end), walked row by row (a row: the innermost
 * merged dimension, or the part of it inside the range); with relu set
 * (an op without a fused row function), each through row_then_relu. */
static void binary_range(row_fn fn, int relu, const bshape *s, const float *a,
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
        if (relu)
            row_then_relu(fn, n, a + oa, s->sa[last], b + ob, s->sb[last],
                          c + begin);
        else
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
    const int fused = d->act == SN_ACT_RELU && row_relu_fns[d->op];
    const row_fn fn = fused ? row_relu_fns[d->op] : row_fns[d->op];
    const int relu = d->act == SN_ACT_RELU && !fused;
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
                binary_range(fn, relu, &s, a, b, c, begin, end);
        }
    } else {
        binary_range(fn, relu, &s, a, b, c, 0, s.total);
    }
}

/* The unary ops of vmath.h, compiled for each vector width.  (Only these:
 * in the wider clones products may fuse into FMAs, which the ops that
 * match the reference exactly must not see.) */
SN_VECTOR_CLONES static void vmath_range(sn_unary_op op, size_t n,
                                         const float *x, float *y)
{
    switch (op) {
    case SN_UNARY_SIGMOID:
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            y[i] = 1.0f / (1.0f + sn_exp1(-x[i]));
        break;
    case SN_UNARY_ERF:
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            y[i] = sn_erf1(x[i]);
        break;
    default: /* SN_UNARY_EXP */
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            y[i] = sn_exp1(x[i]);
        break;
    }
}

/* y[i] = op(x[i]) for i in [0, n).  No restrict: y may be x. */
static void unary_range(const sn_unary_desc *d, size_t n, const float *x,
                        float *y)
{
    const float alpha = d->alpha, beta = d->beta;

    switch (d->op) {
    case SN_UNARY_RELU:
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            y[i] = x[i] < 0.0f ? 0.0f : x[i];
        break;
    case SN_UNARY_SIGMOID:
    case SN_UNARY_ERF:
    case SN_UNARY_EXP:
        vmath_range(d->op, n, x, y);
        break;
    case SN_UNARY_TANH:
        for (size_t i = 0; i < n; i++)
            y[i] = tanhf(x[i]);
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
    case SN_UNARY_LEAKY_RELU:
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            y[i] = x[i] < 0.0f ? alpha * x[i] : x[i];
        break;
    case SN_UNARY_HARD_SIGMOID:
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            const float v = alpha * x[i] + beta;
            const float t = v > 1.0f ? 1.0f : v;
            y[i] = t < 0.0f ? 0.0f : t;
        }
        break;
    case SN_UNARY_CLIP:
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            const float t = x[i] < alpha ? alpha : x[i];
            y[i] = t > beta ? beta : t;
        }
        break;
    case SN_UNARY_GELU:
        for (size_t i = 0; i < n; i++)
            y[i] = 0.5f * x[i] * (1.0f + erff(x[i] / GELU_SQRT2));
        break;
    case SN_UNARY_CLIP_GATE:
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            const float v = x[i], t = v + alpha;
            const float lo = t < 0.0f ? 0.0f : t;
            const float c = lo > beta ? beta : lo;
            y[i] = v * c / beta;
        }
        break;
    case SN_UNARY_GELU_TANH:
        for (size_t i = 0; i < n; i++) {
            const float v = x[i];
            y[i] = 0.5f * v *
                   (1.0f + tanhf(GELU_SQRT_2_PI * (v + 0.044715f * v * v * v)));
        }
        break;
    case SN_UNARY_COUNT:
        break;
    default: /* SN_UNARY_MATH_MAP's */
        sn_cpu_unary_math(d, n, x, y);
        break;
    }
}

/* Floats of op(x) a gated range computes at a time (on the stack). */
#define GATE_CHUNK 1024

/* unary_range(), then y = x * op(x) where d->gate: op(x) into a chunk on
 * the stack (y may be x), then the products. */
static void unary_gated(const sn_unary_desc *d, size_t n, const float *x,
                        float *y)
{
    float t[GATE_CHUNK];
    if (!d->gate) {
        unary_range(d, n, x, y);
        return;
    }
    for (size_t i0 = 0; i0 < n; i0 += GATE_CHUNK) {
        const size_t m = n - i0 < GATE_CHUNK ? n - i0 : GATE_CHUNK;
        unary_range(d, m, x + i0, t);
#pragma omp simd
        for (size_t i = 0; i < m; i++)
            y[i0 + i] = x[i0 + i] * t[i];
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
                unary_gated(d, end - begin, x + begin, y + begin);
        }
    } else {
        unary_gated(d, d->n, x, y);
    }
}

/* ---- where ---------------------------------------------------------------- */

/* A where descriptor with size-1 dimensions dropped and chained ones merged
 * (chained in all three operands), as simplify() does for binary ops. */
typedef struct wshape {
    size_t rank, total;
    size_t shape[SN_MAX_DIMS], sc[SN_MAX_DIMS], sx[SN_MAX_DIMS],
        sy[SN_MAX_DIMS];
} wshape;

static void where_simplify(const sn_where_desc *d, wshape *s)
{
    size_t r = 0;

    s->total = 1;
    for (size_t j = 0; j < d->rank; j++) {
        const size_t n = d->shape[j];
        s->total *= n;
        if (n == 1)
            continue;
        if (r > 0 && s->sc[r - 1] == d->stride_cond[j] * n &&
            s->sx[r - 1] == d->stride_x[j] * n &&
            s->sy[r - 1] == d->stride_y[j] * n) {
            s->shape[r - 1] *= n;
            s->sc[r - 1] = d->stride_cond[j];
            s->sx[r - 1] = d->stride_x[j];
            s->sy[r - 1] = d->stride_y[j];
            continue;
        }
        s->shape[r] = n;
        s->sc[r] = d->stride_cond[j];
        s->sx[r] = d->stride_x[j];
        s->sy[r] = d->stride_y[j];
        r++;
    }
    if (r == 0) {
        s->shape[0] = 1;
        s->sc[0] = s->sx[0] = s->sy[0] = 0;
        r = 1;
    }
    s->rank = r;
}

/* out[i] = c[i * sc] != 0 ? x[i * sx] : y[i * sy] for i in [0, n).  A NaN
 * condition is true (NaN != 0). */
static void where_row(size_t n, const float *c, size_t sc, const float *x,
                      size_t sx, const float *y, size_t sy, float *out)
{
    if (sc == 1 && sx == 1 && sy == 1) {
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            out[i] = c[i] != 0.0f ? x[i] : y[i];
    } else if (sc == 0) {
        /* One condition for the whole row: a copy of x or of y. */
        const float *v = c[0] != 0.0f ? x : y;
        const size_t sv = c[0] != 0.0f ? sx : sy;
        if (sv == 1)
            memcpy(out, v, n * sizeof *out);
        else
            for (size_t i = 0; i < n; i++)
                out[i] = v[i * sv];
    } else {
        for (size_t i = 0; i < n; i++)
            out[i] = c[i * sc] != 0.0f ? x[i * sx] : y[i * sy];
    }
}

/* Output elements [begin, end), row by row, like binary_range(). */
static void where_range(const wshape *s, const float *c, const float *x,
                        const float *y, float *out, size_t begin, size_t end)
{
    const size_t last = s->rank - 1, inner = s->shape[last];
    size_t idx[SN_MAX_DIMS], oc = 0, ox = 0, oy = 0, rem = begin;

    for (size_t j = s->rank; j-- > 0;) {
        idx[j] = rem % s->shape[j];
        rem /= s->shape[j];
        oc += idx[j] * s->sc[j];
        ox += idx[j] * s->sx[j];
        oy += idx[j] * s->sy[j];
    }
    while (begin < end) {
        size_t n = inner - idx[last];
        if (n > end - begin)
            n = end - begin;
        where_row(n, c + oc, s->sc[last], x + ox, s->sx[last], y + oy,
                  s->sy[last], out + begin);
        begin += n;
        idx[last] += n;
        oc += n * s->sc[last];
        ox += n * s->sx[last];
        oy += n * s->sy[last];
        for (size_t j = last; j > 0 && idx[j] == s->shape[j]; j--) {
            oc -= s->shape[j] * s->sc[j];
            ox -= s->shape[j] * s->sx[j];
            oy -= s->shape[j] * s->sy[j];
            idx[j] = 0;
            idx[j - 1]++;
            oc += s->sc[j - 1];
            ox += s->sx[j - 1];
            oy += s->sy[j - 1];
        }
    }
}

void sn_cpu_where(const sn_where_desc *d, const float *cond, const float *x,
                  const float *y, float *out)
{
    wshape s;

    where_simplify(d, &s);
    if (s.total == 0)
        return;
    if (s.total > PARALLEL_MIN && omp_get_max_threads() > 1) {
#pragma omp parallel
        {
            size_t begin, end;
            thread_range(s.total, &begin, &end);
            if (begin < end)
                where_range(&s, cond, x, y, out, begin, end);
        }
    } else {
        where_range(&s, cond, x, y, out, 0, s.total);
    }
}

/* ---- strided copy --------------------------------------------------------- */

/* A transpose panel is PANEL_ROWS elements along the dimension read
 * contiguously (two cache lines of the source per column) by PANEL_COLS
 * along the one written contiguously: 32 x 32 beat 16 x 64 and 64 x 16 on
 * power-of-two strides (a 2048^2 transpose, where 64 source lines map to
 * one L1 set), and matched them elsewhere (2 cores, AVX-512, noisy). */
#define PANEL_ROWS 32
#define PANEL_COLS 32
/* Panels are also cut along the innermost dimension, into chunks of this
 * many columns, so that a transpose with few panels (an image's NHWC to
 * NCHW: 3 channels, one panel) still spreads over the team. */
#define PANEL_CHUNK 4096

/* A copy's shape and signed strides; also used for the grid of work units. */
typedef struct cshape {
    size_t rank;
    size_t shape[SN_MAX_DIMS];
    ptrdiff_t ss[SN_MAX_DIMS], ds[SN_MAX_DIMS];
} cshape;

/*
 * Canonical form of a copy, the same set of (source, destination) pairs:
 * size-1 dimensions dropped; a dimension with a negative destination stride
 * walked backwards (both strides negated, both start offsets moved to its
 * far end); dimensions ordered by decreasing destination stride, so that
 * the innermost one writes most contiguously; chained neighbours merged.
 * *so and *dso receive the moves of the start offsets, in elements.
 */
static void copy_simplify(const sn_copy_desc *d, cshape *s, ptrdiff_t *so,
                          ptrdiff_t *dso)
{
    cshape t = {0};
    size_t r = 0;

    *so = *dso = 0;
    for (size_t j = 0; j < d->rank; j++) {
        const size_t n = d->shape[j];
        ptrdiff_t ss = d->src_stride[j], ds = d->dst_stride[j];
        size_t at;
        if (n == 1)
            continue;
        if (ds < 0) {
            *so += (ptrdiff_t)(n - 1) * ss;
            *dso += (ptrdiff_t)(n - 1) * ds;
            ss = -ss;
            ds = -ds;
        }
        /* Insertion into t, kept sorted by decreasing ds (stable). */
        for (at = t.rank; at > 0 && t.ds[at - 1] < ds; at--) {
            t.shape[at] = t.shape[at - 1];
            t.ss[at] = t.ss[at - 1];
            t.ds[at] = t.ds[at - 1];
        }
        t.shape[at] = n;
        t.ss[at] = ss;
        t.ds[at] = ds;
        t.rank++;
    }
    for (size_t j = 0; j < t.rank; j++) {
        const ptrdiff_t n = (ptrdiff_t)t.shape[j];
        if (r > 0 && s->ss[r - 1] == t.ss[j] * n &&
            s->ds[r - 1] == t.ds[j] * n) {
            s->shape[r - 1] *= t.shape[j];
            s->ss[r - 1] = t.ss[j];
            s->ds[r - 1] = t.ds[j];
            continue;
        }
        s->shape[r] = t.shape[j];
        s->ss[r] = t.ss[j];
        s->ds[r] = t.ds[j];
        r++;
    }
    if (r == 0) {
        s->shape[0] = 1;
        s->ss[0] = s->ds[0] = 0;
        r = 1;
    }
    s->rank = r;
}

/* dst[i * ds] = src[i * ss] for i in [0, n). */
static void copy_row(size_t n, const float *src, ptrdiff_t ss, float *dst,
                     ptrdiff_t ds)
{
    if (ss == 1 && ds == 1) {
        memcpy(dst, src, n * sizeof *dst);
    } else if (ds == 1 && ss == 0) {
        const float v = src[0];
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            dst[i] = v;
    } else if (ds == 1) {
        for (size_t i = 0; i < n; i++)
            dst[i] = src[(ptrdiff_t)i * ss];
    } else {
        for (size_t i = 0; i < n; i++)
            dst[(ptrdiff_t)i * ds] = src[(ptrdiff_t)i * ss];
    }
}

/*
 * The panel of a three-channel interleaved image (rows = 3, sp = 1, sl =
 * 3: an RGB image from NHWC to NCHW): 16 columns at a time from three
 * loads, each channel's 16 gathered by two permutes of them, where the
 * loop below moved one float at a time.
 */
static SN_VECTOR_CLONES void deinterleave3(size_t n, const float *src,
                                           float *dst, ptrdiff_t dp)
{
    /* Channel i's elements i, i + 3, ..., i + 45 of the 48 loaded: those
     * below 32 from the first two vectors, then the rest from the third. */
    static const v16i lo[3] = {
        {0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 0, 0, 0, 0, 0},
        {1, 4, 7, 10, 13, 16, 19, 22, 25, 28, 31, 0, 0, 0, 0, 0},
        {2, 5, 8, 11, 14, 17, 20, 23, 26, 29, 0, 0, 0, 0, 0, 0}};
    static const v16i hi[3] = {
        {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 17, 20, 23, 26, 29},
        {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 18, 21, 24, 27, 30},
        {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 19, 22, 25, 28, 31}};
    size_t j = 0;
    for (; j + VW <= n; j += VW) {
        v16 a, b, c;
        memcpy(&a, src + 3 * j, sizeof a);
        memcpy(&b, src + 3 * j + 16, sizeof b);
        memcpy(&c, src + 3 * j + 32, sizeof c);
        for (int i = 0; i < 3; i++) {
            const v16 t = __builtin_shuffle(a, b, lo[i]);
            const v16 r = __builtin_shuffle(t, c, hi[i]);
            memcpy(dst + (ptrdiff_t)i * dp + (ptrdiff_t)j, &r, sizeof r);
        }
    }
    for (; j < n; j++)
        for (int i = 0; i < 3; i++)
            dst[(ptrdiff_t)i * dp + (ptrdiff_t)j] = src[3 * j + (size_t)i];
}

/*
 * The panel of two interleaved rows (n = 2 columns, sp = 1, dp = 2: a
 * stride-2 transposed convolution's 2-wide tiles into their rows): dst[2
 * i + j] = src[i + j sl], 16 of each row at a time, merged by two
 * permutes.
 */
static SN_VECTOR_CLONES void interleave2(size_t rows, const float *src,
                                         ptrdiff_t sl, float *dst)
{
    const v16i lo = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23};
    const v16i hi = lo + 8;
    size_t i = 0;
    for (; i + VW <= rows; i += VW) {
        v16 a, b, r;
        memcpy(&a, src + i, sizeof a);
        memcpy(&b, src + sl + (ptrdiff_t)i, sizeof b);
        r = __builtin_shuffle(a, b, lo);
        memcpy(dst + 2 * i, &r, sizeof r);
        r = __builtin_shuffle(a, b, hi);
        memcpy(dst + 2 * i + VW, &r, sizeof r);
    }
    for (; i < rows; i++) {
        dst[2 * i] = src[i];
        dst[2 * i + 1] = src[sl + (ptrdiff_t)i];
    }
}

/* Is a panel two interleaved rows (see interleave2())? */
static int is_interleave2(size_t n, ptrdiff_t sp, ptrdiff_t dp)
{
    return n == 2 && sp == 1 && dp == 2;
}

/*
 * A panel: rows [0, rows) of a dimension read contiguously (source stride
 * sp = +-1, destination stride dp) by all n columns of the innermost
 * dimension (source stride sl, destination stride 1).  Blocked by
 * PANEL_COLS columns so that the source lines a block touches are loaded
 * once for all its rows.
 */
static void copy_panel(size_t rows, size_t n, const float *src, ptrdiff_t sp,
                       ptrdiff_t sl, float *dst, ptrdiff_t dp)
{
    if (rows == 3 && sp == 1 && sl == 3) {
        deinterleave3(n, src, dst, dp);
        return;
    }
    if (is_interleave2(n, sp, dp)) {
        interleave2(rows, src, sl, dst);
        return;
    }
    for (size_t j0 = 0; j0 < n; j0 += PANEL_COLS) {
        const size_t j1 = j0 + PANEL_COLS < n ? j0 + PANEL_COLS : n;
        for (size_t i = 0; i < rows; i++) {
            const float *s = src + (ptrdiff_t)i * sp;
            float *o = dst + (ptrdiff_t)i * dp;
            for (size_t j = j0; j < j1; j++)
                o[j] = s[(ptrdiff_t)j * sl];
        }
    }
}

/* How a copy is cut: a grid of units over the outer dimensions, each unit
 * one row (or one panel) of the inner ones. */
typedef struct copy_plan {
    cshape grid;   /* units: shape and strides of their first elements */
    size_t units;  /* product of grid.shape */
    int panel;     /* units are panels (else rows) */
    size_t n;      /* innermost length */
    ptrdiff_t ss, ds; /* innermost strides */
    size_t prows;  /* panel: length of the contiguously read dimension */
    size_t pstep;  /* panel: its rows per unit (PANEL_ROWS, or
                    * PANEL_CHUNK for two interleaved rows) */
    ptrdiff_t sp, dp; /* panel: its strides */
    size_t chunk;  /* panel: columns per unit (n, or PANEL_CHUNK) */
} copy_plan;

static void copy_make_plan(const cshape *s, copy_plan *p)
{
    const size_t last = s->rank - 1;
    size_t pick = last;

    memset(p, 0, sizeof *p);
    p->n = s->shape[last];
    p->ss = s->ss[last];
    p->ds = s->ds[last];
    /* A transpose: writes contiguous along the innermost dimension, reads
     * contiguous along another one. */
    if (p->ds == 1 && p->ss != 1 && p->ss != -1 && p->ss != 0)
        for (size_t j = 0; j < last; j++)
            if (s->ss[j] == 1 || s->ss[j] == -1)
                pick = j;
    p->panel = pick != last;
    for (size_t j = 0; j < last; j++) {
        if (j == pick)
            continue;
        p->grid.shape[p->grid.rank] = s->shape[j];
        p->grid.ss[p->grid.rank] = s->ss[j];
        p->grid.ds[p->grid.rank] = s->ds[j];
        p->grid.rank++;
    }
    if (p->panel) {
        /* The picked dimension, cut into panels, becomes the grid's
         * innermost dimension; the last panel may be short. */
        p->prows = s->shape[pick];
        p->sp = s->ss[pick];
        p->dp = s->ds[pick];
        p->pstep = is_interleave2(p->n, p->sp, p->dp) ? PANEL_CHUNK
                                                      : PANEL_ROWS;
        p->grid.shape[p->grid.rank] = (p->prows + p->pstep - 1) / p->pstep;
        p->grid.ss[p->grid.rank] = p->sp * (ptrdiff_t)p->pstep;
        p->grid.ds[p->grid.rank] = p->dp * (ptrdiff_t)p->pstep;
        p->grid.rank++;
        /* Then the chunks of columns, innermost. */
        p->chunk = p->n > PANEL_CHUNK ? PANEL_CHUNK : p->n;
        p->grid.shape[p->grid.rank] = (p->n + p->chunk - 1) / p->chunk;
        p->grid.ss[p->grid.rank] = p->ss * (ptrdiff_t)p->chunk;
        p->grid.ds[p->grid.rank] = p->ds * (ptrdiff_t)p->chunk;
        p->grid.rank++;
    }
    p->units = 1;
    for (size_t j = 0; j < p->grid.rank; j++)
        p->units *= p->grid.shape[j];
}

/* Units [u0, u1) of the plan, walked with an index counter over the grid. */
static void copy_units(const copy_plan *p, const float *src, float *dst,
                       size_t u0, size_t u1)
{
    const cshape *g = &p->grid;
    size_t idx[SN_MAX_DIMS] = {0}, rem = u0;
    ptrdiff_t so = 0, dso = 0;

    for (size_t j = g->rank; j-- > 0;) {
        idx[j] = rem % g->shape[j];
        rem /= g->shape[j];
        so += (ptrdiff_t)idx[j] * g->ss[j];
        dso += (ptrdiff_t)idx[j] * g->ds[j];
    }
    for (size_t u = u0; u < u1; u++) {
        if (p->panel) {
            const size_t first = idx[g->rank - 2] * p->pstep;
            const size_t rows = p->prows - first < p->pstep
                                    ? p->prows - first
                                    : p->pstep;
            const size_t c0 = idx[g->rank - 1] * p->chunk;
            const size_t cols = p->n - c0 < p->chunk ? p->n - c0 : p->chunk;
            copy_panel(rows, cols, src + so, p->sp, p->ss, dst + dso, p->dp);
        } else {
            copy_row(p->n, src + so, p->ss, dst + dso, p->ds);
        }
        /* Next unit; a rank-0 grid has one unit only. */
        for (size_t j = g->rank; j-- > 0;) {
            so += g->ss[j];
            dso += g->ds[j];
            if (++idx[j] < g->shape[j])
                break;
            so -= (ptrdiff_t)g->shape[j] * g->ss[j];
            dso -= (ptrdiff_t)g->shape[j] * g->ds[j];
            idx[j] = 0;
        }
    }
}

void sn_cpu_copy(const sn_copy_desc *d, const float *src, float *dst)
{
    cshape s;
    copy_plan p;
    ptrdiff_t so, dso;
    size_t total = 1;

    for (size_t j = 0; j < d->rank; j++)
        total *= d->shape[j];
    if (total == 0)
        return;
    copy_simplify(d, &s, &so, &dso);
    copy_make_plan(&s, &p);
    src += so;
    dst += dso;
    if (total > PARALLEL_MIN && p.units > 1 && omp_get_max_threads() > 1) {
#pragma omp parallel
        {
            size_t u0, u1;
            sn_cpu_thread_share(p.units, &u0, &u1);
            copy_units(&p, src, dst, u0, u1);
        }
    } else {
        copy_units(&p, src, dst, 0, p.units);
    }
}

/* ---- gather --------------------------------------------------------------- */

/* Output rows [u0, u1) of (outer * nidx) rows of inner floats each. */
static void gather_rows(const sn_gather_desc *d, const float *data,
                        const int32_t *indices, float *out, size_t u0,
                        size_t u1)
{
    const long long len = (long long)d->axis_len;
    size_t o = u0 / d->nidx, j = u0 % d->nidx;

    for (size_t u = u0; u < u1; u++) {
        long long v = indices[j];
        float *row = out + u * d->inner;
        if (v < 0)
            v += len;
        if (v < 0 || v >= len) {
            memset(row, 0, d->inner * sizeof *row);
        } else {
            const float *from = data + (o * d->axis_len + (size_t)v) * d->inner;
            if (d->inner == 1)
                row[0] = from[0];
            else
                memcpy(row, from, d->inner * sizeof *row);
        }
        if (++j == d->nidx) {
            j = 0;
            o++;
        }
    }
}

void sn_cpu_gather(const sn_gather_desc *d, const float *data,
                   const int32_t *indices, float *out)
{
    const size_t rows = d->outer * d->nidx;

    if (rows == 0 || d->inner == 0)
        return;
    if (rows * d->inner > PARALLEL_MIN && rows > 1 &&
        omp_get_max_threads() > 1) {
#pragma omp parallel
        {
            size_t u0, u1;
            sn_cpu_thread_share(rows, &u0, &u1);
            gather_rows(d, data, indices, out, u0, u1);
        }
    } else {
        gather_rows(d, data, indices, out, 0, rows);
    }
}
