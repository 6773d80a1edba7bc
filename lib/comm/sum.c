/*
 * The sum every path of a collective computes, in one pass: each element
 * of every input is read once and the sum written once to every output.
 * Summing into a scratch block and copying it out (sn_comm_add, then a
 * memcpy per device) reads and writes each element several times more,
 * which at sizes that stay in cache is most of an all-reduce's time.
 *
 * The adds are those of sn_comm_add, ((in[0] + in[1]) + in[2]) + ...,
 * each element on its own: vector or scalar, AVX-512 or SSE, upwards or
 * downwards, the result is the same bits.  See comm/collective.h.
 */
#include <config.h>

#include <string.h>

#include "comm/collective_impl.h"

#ifdef SN_HAVE_TARGET_CLONES
/* Compiled for AVX-512, AVX2 and the baseline; the loader picks one. */
#define VECTOR_CLONES                                                       \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3",        \
                                 "default")))
#else
#define VECTOR_CLONES
#endif

#if defined(__GNUC__)
/* 16 floats, at any float's address: loads and stores through it are
 * float accesses, so the compiler keeps the device pointers in registers
 * (a memcpy may write anything, a pointer too). */
typedef float v16 __attribute__((vector_size(64), aligned(4)));
#define VW 16
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define VW 0
#define ALWAYS_INLINE inline
#endif

/* One step of the sum: elements [j, j + 4 * VW), four vectors (four cache
 * lines of each input in flight).  Every input's vectors are loaded before
 * any output's are stored, so an output may be an input (in place).
 * Inlined with constant nin and nout, the loops over the devices unroll:
 * a fifth faster than with a variable count (64 KiB over two devices),
 * for a two-socket machine. */
static ALWAYS_INLINE void sum_step(float *const *out, size_t nout,
                                   const float *const *in, size_t nin,
                                   size_t j)
{
#if VW
    const v16 *s = (const v16 *)(in[0] + j);
    v16 a0 = s[0], a1 = s[1], a2 = s[2], a3 = s[3];
    for (size_t q = 1; q < nin; q++) {
        s = (const v16 *)(in[q] + j);
        a0 += s[0];
        a1 += s[1];
        a2 += s[2];
        a3 += s[3];
    }
    for (size_t o = 0; o < nout; o++) {
        v16 *d = (v16 *)(out[o] + j);
        d[0] = a0;
        d[1] = a1;
        d[2] = a2;
        d[3] = a3;
    }
#endif
}

/* The sum by whole steps: upwards from element 0, returning where it
 * stopped (elements [j, len) left), or downwards from element len,
 * returning where it stopped (elements [0, j) left). */
static ALWAYS_INLINE size_t sum_steps(float *const *out, size_t nout,
                                      const float *const *in, size_t nin,
                                      size_t len, int down)
{
    size_t j = down ? len : 0;
#if VW
    if (down)
        for (; j >= 4 * VW; j -= 4 * VW)
            sum_step(out, nout, in, nin, j - 4 * VW);
    else
        for (; j + 4 * VW <= len; j += 4 * VW)
            sum_step(out, nout, in, nin, j);
#endif
    return j;
}

/* Element j of the sum, on its own. */
static inline void sum_one(float *const *out, size_t nout,
                           const float *const *in, size_t nin, size_t j)
{
    float acc = in[0][j];
    for (size_t q = 1; q < nin; q++)
        acc += in[q][j];
    for (size_t o = 0; o < nout; o++)
        out[o][j] = acc;
}

static ALWAYS_INLINE void sum(float *const *out, size_t nout,
                              const float *const *in, size_t nin, size_t len,
                              int down)
{
    size_t j;
    if (nin == 2 && nout == 2) /* a two-device all-reduce */
        j = sum_steps(out, 2, in, 2, len, down);
    else if (nin == 2 && nout == 1) /* a two-device reduce-scatter */
        j = sum_steps(out, 1, in, 2, len, down);
    else
        j = sum_steps(out, nout, in, nin, len, down);
    if (down)
        while (j-- > 0)
            sum_one(out, nout, in, nin, j);
    else
        for (; j < len; j++)
            sum_one(out, nout, in, nin, j);
}

VECTOR_CLONES void sn_comm_sum(float *const *out, size_t nout,
                               const float *const *in, size_t nin, size_t len)
{
    sum(out, nout, in, nin, len, 0);
}

VECTOR_CLONES void sn_comm_sum_down(float *const *out, size_t nout,
                                    const float *const *in, size_t nin,
                                    size_t len)
{
    sum(out, nout, in, nin, len, 1);
}
