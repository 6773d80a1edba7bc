/*
 * IEEE half and bfloat16 to and from float (round to nearest even): the
 * model's fp16 and bf16 tensors (lib/exec/dtype.c) and the CPU's product
 * by a half-precision weight (cpu/qgemm.c) convert alike.
 */
#include <config.h>

#include <string.h>

#include "core/half.h"

float sn_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff, bits;
    float f;
    if (exp == 0x1f) { /* inf, NaN */
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp) {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man) { /* subnormal: value = man * 2^-24 */
        f = (float)man * 0x1p-24f;
        return sign ? -f : f;
    } else {
        bits = sign;
    }
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t sn_float_to_half(float f)
{
    uint32_t x, sign, exp, man;
    memcpy(&x, &f, sizeof x);
    sign = (x >> 16) & 0x8000;
    exp = (x >> 23) & 0xff;
    man = x & 0x7fffff;
    if (exp == 0xff) /* inf, NaN (kept quiet) */
        return (uint16_t)(sign | 0x7c00 | (man ? 0x200 | (man >> 13) : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 0x1f)
        return (uint16_t)(sign | 0x7c00);
    if (e <= 0) { /* subnormal half, or zero */
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = man >> shift, rest = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rest > mid || (rest == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = sign | ((uint32_t)e << 10) | (man >> 13), rest = man & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
        h++; /* may carry into the exponent: still right */
    return (uint16_t)h;
}

float sn_bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t sn_float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffff) > 0x7f800000) /* NaN stays NaN */
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}
