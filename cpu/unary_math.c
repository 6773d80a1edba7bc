/*
 * The unary ops of SN_UNARY_MATH_MAP on the CPU (backend.h): the
 * trigonometric and hyperbolic functions and their inverses, rounding,
 * sign, the exponential activations (ELU, SELU, CELU, softplus, Mish),
 * the piecewise ones (softsign, thresholded ReLU, shrink, hard swish) and
 * the NaN and infinity tests.
 *
 * Each is the libm float function or the formula sn_unary_desc states,
 * element by element, written as the plain C reference writes it (built
 * without -ffast-math, so the results are the reference's): expm1f where
 * exp(x) - 1 would cancel, softplus as x + log1p(exp(-x)) above zero so
 * that it does not overflow.  Comparisons are ordered so that NaN gives
 * NaN (or 0 for ISNAN's and ISINF's false).  sn_cpu_unary hands its
 * per-thread ranges here; y may be x.
 */
#include <config.h>

#include <math.h>
#include <stddef.h>

#include "cpu_kernels.h"

/* log(1 + exp(x)) without overflow. */
static float softplus(float x)
{
    return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
}

static float one(sn_unary_op op, float x, float alpha, float beta)
{
    float t;

    switch (op) {
    case SN_UNARY_SIN:
        return sinf(x);
    case SN_UNARY_COS:
        return cosf(x);
    case SN_UNARY_TAN:
        return tanf(x);
    case SN_UNARY_ASIN:
        return asinf(x);
    case SN_UNARY_ACOS:
        return acosf(x);
    case SN_UNARY_ATAN:
        return atanf(x);
    case SN_UNARY_SINH:
        return sinhf(x);
    case SN_UNARY_COSH:
        return coshf(x);
    case SN_UNARY_ASINH:
        return asinhf(x);
    case SN_UNARY_ACOSH:
        return acoshf(x);
    case SN_UNARY_ATANH:
        return atanhf(x);
    case SN_UNARY_CEIL:
        return ceilf(x);
    case SN_UNARY_FLOOR:
        return floorf(x);
    case SN_UNARY_ROUND:
        return rintf(x); /* round to nearest, halves to even */
    case SN_UNARY_SIGN:
        return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x;
    case SN_UNARY_ELU:
        return x < 0.0f ? alpha * expm1f(x) : x;
    case SN_UNARY_SELU:
        return x <= 0.0f ? beta * (alpha * expm1f(x)) : beta * x;
    case SN_UNARY_CELU: /* the exponential term has x's sign */
        return x > 0.0f ? x : alpha * expm1f(x / alpha);
    case SN_UNARY_SOFTPLUS:
        return softplus(x);
    case SN_UNARY_SOFTSIGN:
        return x / (1.0f + fabsf(x));
    case SN_UNARY_THRESHOLDED_RELU:
        return x > alpha ? x : 0.0f;
    case SN_UNARY_SHRINK:
        return x < -alpha ? x + beta : x > alpha ? x - beta : 0.0f;
    case SN_UNARY_HARD_SWISH:
        t = x / 6.0f + 0.5f;
        t = t > 1.0f ? 1.0f : t;
        return x * (t < 0.0f ? 0.0f : t);
    case SN_UNARY_MISH:
        return x * tanhf(softplus(x));
    case SN_UNARY_ISNAN:
        return isnan(x) ? 1.0f : 0.0f;
    case SN_UNARY_ISINF:
        return isinf(x) && ((x > 0.0f && alpha != 0.0f) ||
                            (x < 0.0f && beta != 0.0f))
                   ? 1.0f
                   : 0.0f;
    default:
        return NAN; /* not an op of this file */
    }
}

void sn_cpu_unary_math(const sn_unary_desc *d, size_t n, const float *x,
                       float *y)
{
    const sn_unary_op op = d->op;
    const float alpha = d->alpha, beta = d->beta;

    switch (op) {
    case SN_UNARY_CEIL:
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            y[i] = ceilf(x[i]);
        break;
    case SN_UNARY_FLOOR:
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            y[i] = floorf(x[i]);
        break;
    default:
        for (size_t i = 0; i < n; i++)
            y[i] = one(op, x[i], alpha, beta);
        break;
    }
}
