/* The arithmetic of shardnet_model_quantize; see quantize.h. */
#include <config.h>

#include <math.h>

#include "api/quantize.h"
#include "exec/exec.h"

int sn_q_finite(const float *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(w[i]))
            return 0;
    return 1;
}

/* Element k of output j of a weight of `cols` columns, output axis axis. */
static float at(const float *w, size_t cols, int axis, size_t j, size_t k)
{
    return axis == 1 ? w[k * cols + j] : w[j * cols + k];
}

/* The scale that maps amax to top; 1 where amax is 0 (or so small that
 * the scale would vanish), so that zeros stay zeros and nothing divides
 * by 0. */
static float scale_for(float amax, int top)
{
    float s = amax / (float)top;
    return s > 0 ? s : 1.0f;
}

/* round(v / s) into [-top, top], ties to even. */
static int quantize(float v, float s, int top)
{
    double r = nearbyint((double)v / (double)s);
    return r < -top ? -top : r > top ? top : (int)r;
}

/* Which scale element (r, c) of an int8 weight takes. */
static size_t group(int axis, size_t r, size_t c)
{
    return axis < 0 ? 0 : axis == 1 ? c : r;
}

void sn_q_int8(const float *w, size_t rows, size_t cols, int axis, int8_t *q,
               float *scale)
{
    size_t nout = axis < 0 ? 1 : axis == 1 ? cols : rows;
    /* The largest magnitudes first, in scale, reading w in order. */
    for (size_t j = 0; j < nout; j++)
        scale[j] = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            float *m = &scale[group(axis, r, c)];
            *m = fmaxf(*m, fabsf(w[r * cols + c]));
        }
    for (size_t j = 0; j < nout; j++)
        scale[j] = scale_for(scale[j], SN_Q8_MAX);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            q[r * cols + c] = (int8_t)quantize(
                w[r * cols + c], scale[group(axis, r, c)], SN_Q8_MAX);
}

size_t sn_q_int4_blocks(size_t k, size_t block)
{
    return (k + block - 1) / block;
}

/* Block b of output j (inputs k0 .. k0 + block, k0 = b * block) into its
 * block / 2 bytes at out; its scale. */
static float int4_block(const float *w, size_t cols, int axis, size_t nin,
                        size_t j, size_t k0, size_t block, uint8_t *out)
{
    size_t end = k0 + block < nin ? k0 + block : nin;
    float amax = 0;
    for (size_t k = k0; k < end; k++)
        amax = fmaxf(amax, fabsf(at(w, cols, axis, j, k)));
    float s = scale_for(amax, SN_Q4_MAX);
    for (size_t i = 0; i < block; i += 2) {
        int lo = SN_Q4_ZERO, hi = SN_Q4_ZERO;
        if (k0 + i < end)
            lo += quantize(at(w, cols, axis, j, k0 + i), s, SN_Q4_MAX);
        if (k0 + i + 1 < end)
            hi += quantize(at(w, cols, axis, j, k0 + i + 1), s, SN_Q4_MAX);
        out[i / 2] = (uint8_t)(lo | hi << 4);
    }
    return s;
}

void sn_q_int4(const float *w, size_t rows, size_t cols, int axis,
               size_t block, uint8_t *b, float *scales)
{
    size_t nout = axis == 1 ? cols : rows, nin = axis == 1 ? rows : cols;
    size_t blocks = sn_q_int4_blocks(nin, block), blob = block / 2;
    for (size_t j = 0; j < nout; j++)
        for (size_t bi = 0; bi < blocks; bi++)
            scales[j * blocks + bi] =
                int4_block(w, cols, axis, nin, j, bi * block, block,
                           b + (j * blocks + bi) * blob);
}

int sn_q_fp16(const float *w, size_t n, uint16_t *h)
{
    int fits = 1;
    for (size_t i = 0; i < n; i++) {
        h[i] = sn_float_to_half(w[i]);
        /* An exponent of all ones from a finite float: it overflowed. */
        if ((h[i] & 0x7c00) == 0x7c00 && isfinite(w[i]))
            fits = 0;
    }
    return fits;
}
