/*
 * exp and erf of one float, written so that a loop over an array of them
 * vectorises: straight-line polynomial code, the cases chosen by selects
 * (no branches, no calls), quiet comparisons only (a vectoriser may not
 * if-convert a signalling one).
 *
 * Accuracy against double-precision exp() and erf(), over every seventh
 * float: exp within 1.1 ulp (AVX2 and AVX-512 builds; 1.4 in the baseline
 * build, without FMA) over its whole range, subnormal results included;
 * erf within 2.4 ulp.  tests/test_cpu_kernels.c checks every 997th float
 * against bounds of 2 and 3 ulp.  NaN passes through; exp(+inf) = inf, exp(-inf) = 0, erf(+-inf) =
 * +-1.
 *
 * The polynomials are our own fits (Chebyshev nodes, least squares, in
 * double precision; tools/fit-vmath.py prints them):
 *  - exp(x) = 2^n exp(r), n = round(x / ln 2), r = x - n ln 2 (ln 2 in two
 *    parts, Cody and Waite's reduction), |r| <= ln 2 / 2, exp(r) by a
 *    degree-6 polynomial (relative error 3e-9); 2^n is applied as two
 *    factors 2^(n/2) and 2^(n - n/2), each a normal float, so that results
 *    down to the smallest subnormal and up to overflow come out right;
 *  - erf(x) for |x| < 0.875: x P(x^2), P of degree 5 (relative error
 *    1e-8); for 0.875 <= |x| < 3.92: a degree-14 polynomial in
 *    u = (|x| - 2.3975) / 1.5225 (absolute error 1e-8); beyond, +-1.
 */
#ifndef SN_CPU_VMATH_H
#define SN_CPU_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float sn_bits_to_float(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static inline uint32_t sn_float_to_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static inline float sn_exp1(float x)
{
    /* Past these the result is inf, or 0 (below the smallest subnormal). */
    float c = __builtin_isless(x, -104.0f) ? -104.0f : x;
    c = __builtin_isgreater(c, 89.0f) ? 89.0f : c;
    /* n = round(c / ln 2): adding 1.5 * 2^23 rounds to an integer, which
     * then sits in the low bits of the sum. */
    const float shift = 12582912.0f;
    const float t = c * 1.44269502e+00f + shift;
    const float n = t - shift;
    const int32_t k = (int32_t)(sn_float_to_bits(t) - sn_float_to_bits(shift));
    const float r = (c - n * 6.93145752e-01f) - n * 1.42860677e-06f;
    float p = 1.39497829e-03f;
    p = p * r + 8.37597082e-03f;
    p = p * r + 4.16662000e-02f;
    p = p * r + 1.66664053e-01f;
    p = p * r + 5.00000011e-01f;
    p = p * r + 1.00000004e+00f;
    p = p * r + 1.00000000e+00f;
    const int32_t k1 = k >> 1, k2 = k - k1;
    const float s1 = sn_bits_to_float((uint32_t)(k1 + 127) << 23);
    const float s2 = sn_bits_to_float((uint32_t)(k2 + 127) << 23);
    const float y = p * s1 * s2;
    return x != x ? x : y;
}

static inline float sn_erf1(float x)
{
    const float a = fabsf(x), t = a * a;
    float q = -6.218503337e-04f;
    q = q * t + 5.035122163e-03f;
    q = q * t + -2.679345259e-02f;
    q = q * t + 1.128251045e-01f;
    q = q * t + -3.761255584e-01f;
    q = q * t + 1.128379158e+00f;
    const float small = a * q;
    const float u = (a - 2.3975f) * 6.568144499e-01f;
    float p = 4.864344084e-04f;
    p = p * u + -2.778706594e-04f;
    p = p * u + -2.910846246e-03f;
    p = p * u + 4.037770135e-03f;
    p = p * u + 3.947970824e-03f;
    p = p * u + -1.519171813e-02f;
    p = p * u + 1.531954574e-02f;
    p = p * u + 4.603826560e-03f;
    p = p * u + -3.847135474e-02f;
    p = p * u + 6.487285566e-02f;
    p = p * u + -6.563793650e-02f;
    p = p * u + 4.443896927e-02f;
    p = p * u + -1.999884102e-02f;
    p = p * u + 5.478630717e-03f;
    p = p * u + 9.993025449e-01f;
    float y = __builtin_isless(a, 0.875f) ? small : p;
    y = __builtin_isless(a, 3.92f) ? y : 1.0f;
    y = copysignf(y, x);
    return x != x ? x : y;
}

#endif /* SN_CPU_VMATH_H */
