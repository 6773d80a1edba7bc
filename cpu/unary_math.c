/*
 * The unary ops of SN_UNARY_MATH_MAP on the CPU (backend.h): the
 * trigonometric and hyperbolic functions and their inverses, rounding,
 * sign, the exponential activations (ELU, SELU, CELU, softplus, Mish),
 * the piecewise ones (softsign, thresholded ReLU, shrink, hard swish),
 * the NaN and infinity tests, and the rounding to half or bfloat16.
 *
 * Each is the libm float function or the formula sn_unary_desc states,
 * element by element, written as the plain C reference writes it (built
 * without -ffast-math, so the results are the reference's): expm1f where
 * exp(x) - 1 would cancel, softplus as x + log1p(exp(-x)) above zero so
 * that it does not overflow.  A NaN gives NaN, except where the formula
 * selects a constant on a false comparison (thresholded ReLU and shrink
 * give 0, ISNAN and ISINF their answer).  sn_cpu_unary hands its
 * per-thread ranges here; y may be x (each element is read before its
 * own is written).
 */
#include <config.h>

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu_kernels.h"
#include "vmath.h"

/* log(1 + exp(x)) without overflow. */
static float softplus(float x)
{
    return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
}

/* y[i] = EXPR of v = x[i]: a loop per op, the op's switch outside it;
 * SIMD_LOOP for the ops without a libm call, which vectorise. */
#define LOOP(EXPR)                                                            \
    for (size_t i = 0; i < n; i++) {                                          \
        const float v = x[i];                                                 \
        y[i] = (EXPR);                                                        \
    }                                                                         \
    break
#define SIMD_LOOP(EXPR)                                                       \
    _Pragma("omp simd") for (size_t i = 0; i < n; i++)                        \
    {                                                                         \
        const float v = x[i];                                                 \
        y[i] = (EXPR);                                                        \
    }                                                                         \
    break

/* v rounded to the nearest IEEE half, halves to even, as a float: below
 * 2^-14 (the halves' subnormals) to a multiple of 2^-24 (|v| + 1/2 has
 * that spacing, and 1/2 is an even multiple); from there up, the 13 low
 * mantissa bits rounded off; from 65520 up, inf.  Without branches, so
 * that the loop vectorises. */
static inline float round_half(float v)
{
    const float a = fabsf(v);
    const uint32_t u = sn_float_to_bits(v);
    const float sub = copysignf((a + 0.5f) - 0.5f, v);
    const float normal =
        sn_bits_to_float((u + 0xFFFu + ((u >> 13) & 1u)) & ~0x1FFFu);
    const float r = a < 6.103515625e-05f ? sub : normal;
    return a < 65520.0f ? r : a == a ? copysignf(INFINITY, v) : v;
}

/* v rounded to the nearest bfloat16, halves to even (the 16 low bits
 * rounded off; a carry out of the largest finite ones gives inf). */
static inline float round_bf16(float v)
{
    const uint32_t u = sn_float_to_bits(v);
    const float r =
        sn_bits_to_float((u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u);
    return v == v ? r : v;
}

/* max(0, min(1, t)) */
static inline float unit_clamp(float t)
{
    t = t > 1.0f ? 1.0f : t;
    return t < 0.0f ? 0.0f : t;
}

void sn_cpu_unary_math(const sn_unary_desc *d, size_t n, const float *x,
                       float *y)
{
    const float alpha = d->alpha, beta = d->beta;

    switch (d->op) {
    case SN_UNARY_SIN:
        LOOP(sinf(v));
    case SN_UNARY_COS:
        LOOP(cosf(v));
    case SN_UNARY_TAN:
        LOOP(tanf(v));
    case SN_UNARY_ASIN:
        LOOP(asinf(v));
    case SN_UNARY_ACOS:
        LOOP(acosf(v));
    case SN_UNARY_ATAN:
        LOOP(atanf(v));
    case SN_UNARY_SINH:
        LOOP(sinhf(v));
    case SN_UNARY_COSH:
        LOOP(coshf(v));
    case SN_UNARY_ASINH:
        LOOP(asinhf(v));
    case SN_UNARY_ACOSH:
        LOOP(acoshf(v));
    case SN_UNARY_ATANH:
        LOOP(atanhf(v));
    case SN_UNARY_CEIL:
        SIMD_LOOP(ceilf(v));
    case SN_UNARY_FLOOR:
        SIMD_LOOP(floorf(v));
    case SN_UNARY_ROUND: /* round to nearest, halves to even */
        SIMD_LOOP(rintf(v));
    case SN_UNARY_SIGN:
        SIMD_LOOP(v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : v);
    case SN_UNARY_ELU:
        LOOP(v < 0.0f ? alpha * expm1f(v) : v);
    case SN_UNARY_SELU:
        LOOP(v <= 0.0f ? beta * (alpha * expm1f(v)) : beta * v);
    case SN_UNARY_CELU: /* the exponential term has x's sign */
        LOOP(v > 0.0f ? v : alpha * expm1f(v / alpha));
    case SN_UNARY_SOFTPLUS:
        LOOP(softplus(v));
    case SN_UNARY_SOFTSIGN:
        SIMD_LOOP(v / (1.0f + fabsf(v)));
    case SN_UNARY_THRESHOLDED_RELU:
        SIMD_LOOP(v > alpha ? v : 0.0f);
    case SN_UNARY_SHRINK:
        SIMD_LOOP(v < -alpha ? v + beta : v > alpha ? v - beta : 0.0f);
    case SN_UNARY_HARD_SWISH:
        SIMD_LOOP(v * unit_clamp(v / 6.0f + 0.5f));
    case SN_UNARY_MISH:
        LOOP(v * tanhf(softplus(v)));
    case SN_UNARY_ISNAN:
        SIMD_LOOP(isnan(v) ? 1.0f : 0.0f);
    case SN_UNARY_ISINF:
        SIMD_LOOP(isinf(v) && ((v > 0.0f && alpha != 0.0f) ||
                               (v < 0.0f && beta != 0.0f))
                      ? 1.0f
                      : 0.0f);
    case SN_UNARY_ROUND_HALF:
        SIMD_LOOP(round_half(v));
    case SN_UNARY_ROUND_BF16:
        SIMD_LOOP(round_bf16(v));
    default: /* not an op of this file */
        break;
    }
}
