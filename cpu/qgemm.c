/*
 * The product of float activations by a quantized weight (issue 16), read
 * in its small type: int8 and uint8 (a DequantizeLinear on a weight,
 * per tensor or per output column), uint4 two to a byte (MatMulNBits,
 * per block of K), and half-precision weights, fp16 or bf16 (a Cast of
 * the weight to float), converted in registers (half_rows_of_k, and
 * rows_of_n; one scale per column, no zero point).  See
 * sn_qgemm_desc (lib/backend/backend.h).
 *
 * Batch 1 and small batches are bound by reading the weight, so the
 * kernels read each weight byte once per call and turn it into a float in
 * registers: q less its zero point (exact in float: integers up to 255)
 * times A is summed in float per block, and only the block's sum is
 * scaled:
 *   y[i, j] = sum over blocks b of s[j, b] * sum_b (q(kk, j) - z[j, b]) a[i, kk]
 * (the zero point taken away before the product, not as z times the sum
 * of A after it, which cancels digits away).  The order of the sums
 * differs from a float GEMM on the dequantized weight, so results agree
 * with it to float rounding, not bit for bit.
 *
 * From GEMM_ROWS rows of A on, the weight is dequantized once per call
 * and the float GEMM (cpu/gemm.c) runs: the products are then bound by
 * arithmetic, which converting each weight for each row would multiply.
 *
 * Where the CPU has AVX-512 VNNI, int8 and uint8 stored as N rows of K
 * (one scale per column) take A's rows as bytes instead (vnni_rows,
 * vnni_column): products of bytes summed exactly in integers, A rounded
 * to 23 bits of its largest value, which is within float's own rounding
 * of the sums; the float path below had been bound by converting the
 * bytes.
 *
 * Columns are shared between the device's team threads.  Two layouts:
 *   - K rows of N (trans_b 0; DequantizeLinear's [K, N] for MatMul): a
 *     tile of 64 columns streams down the K rows, a cache line per row,
 *     for up to 4 rows of A at a time;
 *   - N rows of K (trans_b 1; Gemm's transB, MatMulNBits): a column's row
 *     of q stays in L1 while every row of A takes its dot product.
 * AVX-512 (F, BW, VL) versions carry target attributes and are chosen at
 * run time; the portable loops compute the same sums in the same order
 * per column where no AVX-512 is found.
 */
#include <config.h>

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "cpu_kernels.h"

#if defined(__GNUC__) && defined(__x86_64__)
#define SN_HAVE_AVX512_QGEMM 1
#include <immintrin.h>
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))
#else
#define SN_HAVE_AVX512_QGEMM 0
#endif

/*
 * A weight's row streamed by one thread asks for its lines this many
 * bytes ahead (_mm_prefetch, into every cache level: non-temporal was
 * slower here for fp16 and int4): the hardware's prefetchers stop at each
 * 4 KiB page.  On a 2-core Zen 5 reading 88 GB/s, the MLP of
 * make_big_model at batch 1: int8 (vnni_column) 1.50 against 1.98 ms
 * without (90 GB/s against 68), fp16 3.0 against 6.6 (with half_column's
 * one stream, not four), int4 1.76 against 1.90; 8 KiB ahead: int8 1.61,
 * fp16 3.3; 4 KiB: 1.83, 3.7.
 */
#define STREAM_AHEAD 16384
/* Below this many weight bytes one thread does it all. */
#define SERIAL_BYTES (64u * 1024u)

typedef struct qargs {
    const sn_qgemm_desc *d;
    const float *a, *scale, *zero, *bias;
    const uint8_t *q;
    float *c;
    size_t blocks, block;
    int failed;        /* a thread found no memory for its sums */
    const float *aq;   /* m rows of A in the quad layout (quad16) or, for
                        * uint4, the octet and pair layouts (u4_column); or
                        * NULL */
    const float *as;   /* uint4 with zero points: each row's sums of 8 of
                        * its values, 16 a step of u4_column; or NULL */
    const struct vnni_row *vr; /* m rows of A as bytes (vnni_rows) or NULL */
} qargs;

/*
 * A row of A for the byte products (AVX-512 VNNI): a = scale * v, v an
 * integer of 23 bits (rounded to nearest: |a| / max |a| to 2^-22), held
 * as three planes of signed bytes, v = 65536 p2 + 256 p1 + p0 (balanced
 * digits, each -128..127), K rounded up to 64 with zeros.  psum: each
 * plane's sum; vsum: v's.  For uint4 (u4_vnni_column) each 128 digits of
 * a plane lie as the 64 of the even k, then the 64 of the odd k (a
 * byte's low and high nibbles), and lsum holds each 8 values' sum of v
 * (weights 8 l to 8 l + 7 of a step of 128, 16 a step) times zmul (NULL
 * for int8).
 */
typedef struct vnni_row {
    double scale;
    int64_t psum[3], vsum;
    int8_t *plane[3];
    int32_t *lsum;
} vnni_row;

static float act(sn_act k, float v)
{
    if (k == SN_ACT_NONE)
        return v;
    v = v < 0.0f ? 0.0f : v;
    return k == SN_ACT_RELU6 && v > 6.0f ? 6.0f : v;
}

/* q(kk, j) as an integer. */
static int qget(const sn_qgemm_desc *d, const uint8_t *q, size_t kk, size_t j)
{
    if (d->qtype == SN_QTYPE_U4) {
        uint8_t b = q[j * d->ldq + kk / 2];
        return kk % 2 ? b >> 4 : b & 15;
    }
    uint8_t b = d->trans_b ? q[j * d->ldq + kk] : q[kk * d->ldq + j];
    return d->qtype == SN_QTYPE_S8 ? (int)(int8_t)b : (int)b;
}

/* q(kk, j) as a float, whatever its type. */
static float qvalue(const sn_qgemm_desc *d, const uint8_t *q, size_t kk,
                    size_t j)
{
    if (d->qtype == SN_QTYPE_F16 || d->qtype == SN_QTYPE_BF16) {
        size_t at = d->trans_b ? j * d->ldq + kk : kk * d->ldq + j;
        uint16_t h = (uint16_t)(q[2 * at] | q[2 * at + 1] << 8);
        return d->qtype == SN_QTYPE_F16 ? sn_half_to_float(h)
                                        : sn_bf16_to_float(h);
    }
    return (float)qget(d, q, kk, j);
}

/* The scaled sum of column j from its per-block sums dot[b] (zero points
 * taken away already). */
static float finish(const qargs *x, size_t j, const float *dot)
{
    const sn_qgemm_desc *d = x->d;
    float y = 0.0f;
    for (size_t b = 0; b < x->blocks; b++) {
        y += x->scale[j * x->blocks + b] * dot[b];
    }
    if (x->bias)
        y += x->bias[j];
    return act(d->act, y);
}

/* Column j's zero point in block b (0 without zero points). */
static float zero_at(const qargs *x, size_t j, size_t b)
{
    return x->zero ? x->zero[j * x->blocks + b] : x->d->zero_value;
}

/* Columns [j0, j1), every row, in plain C. */
static void columns_c(const qargs *x, size_t j0, size_t j1)
{
    const sn_qgemm_desc *d = x->d;
    float stack[64], *dot = x->blocks <= 64 ? stack : NULL;
    if (!dot && !(dot = malloc(x->blocks * sizeof *dot))) {
        __atomic_store_n(&((qargs *)x)->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    for (size_t j = j0; j < j1; j++)
        for (size_t i = 0; i < d->m; i++) {
            const float *ar = x->a + i * d->lda;
            for (size_t b = 0; b < x->blocks; b++) {
                size_t k0 = b * x->block,
                       k1 = k0 + x->block < d->k ? k0 + x->block : d->k;
                float s = 0.0f, z = zero_at(x, j, b);
                for (size_t kk = k0; kk < k1; kk++)
                    s += ar[kk] * (qvalue(d, x->q, kk, j) - z);
                dot[b] = s;
            }
            x->c[i * d->ldc + j] = finish(x, j, dot);
        }
    if (dot != stack)
        free(dot);
}

#if SN_HAVE_AVX512_QGEMM

static AVX512 __m512 load16(const sn_qgemm_desc *d, const uint8_t *p,
                            __mmask16 m)
{
    __m128i b = _mm_maskz_loadu_epi8(m, p);
    return _mm512_cvtepi32_ps(d->qtype == SN_QTYPE_S8
                                  ? _mm512_cvtepi8_epi32(b)
                                  : _mm512_cvtepu8_epi32(b));
}

/*
 * The 64 integers of one cache line of q as four float vectors without a
 * shuffle (the widening loads were the loop's bottleneck, measured 30%
 * slower): lane l of vector b holds byte 4 l + b, moved to the top of its
 * 32-bit lane and shifted back down, arithmetically for int8.  Whoever
 * multiplies them takes A's values in the same order (a "quad" layout).
 */
static AVX512 void quad16(const sn_qgemm_desc *d, const uint8_t *p,
                          __m512 v[4])
{
    __m512i w = _mm512_loadu_si512(p);
    if (d->qtype == SN_QTYPE_S8) {
        v[0] = _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(w, 24), 24));
        v[1] = _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(w, 16), 24));
        v[2] = _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(w, 8), 24));
        v[3] = _mm512_cvtepi32_ps(_mm512_srai_epi32(w, 24));
    } else {
        const __m512i ff = _mm512_set1_epi32(255);
        v[0] = _mm512_cvtepi32_ps(_mm512_and_si512(w, ff));
        v[1] = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(w, 8), ff));
        v[2] = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(w, 16), ff));
        v[3] = _mm512_cvtepi32_ps(_mm512_srli_epi32(w, 24));
    }
}

static AVX512 float hsum(__m512 v)
{
    return _mm512_reduce_add_ps(v);
}

/* 16 halves (F16 or BF16) from p, lanes past mask m zero, as floats. */
static inline __attribute__((always_inline)) AVX512 __m512
half16(const sn_qgemm_desc *d, const uint16_t *p, __mmask16 m)
{
    __m256i h = _mm256_maskz_loadu_epi16(m, p);
    if (d->qtype == SN_QTYPE_F16)
        return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/*
 * K rows of N, one scale per column (block 0): columns [j0, j1) in tiles
 * of 64, rows of A four at a time.  Lane l of accumulator t sums column
 * j + 16 t + l in kk order, as columns_c does.  Halves (F16, BF16) load
 * 16 columns a vector; bytes, a whole tile in the quad layout.
 */
static AVX512 void rows_of_n(const qargs *x, size_t j0, size_t j1)
{
    const sn_qgemm_desc *d = x->d;
    const int half = sn_qtype_bytes(d->qtype) == 2;
    for (size_t j = j0; j < j1; j += 64) {
        size_t w = j1 - j < 64 ? j1 - j : 64;
        __mmask16 mk[4];
        for (int t = 0; t < 4; t++) {
            size_t lo = 16 * (size_t)t, cnt = w > lo ? w - lo : 0;
            mk[t] = cnt >= 16 ? 0xffff : (__mmask16)((1u << cnt) - 1u);
        }
        /* The tile's zero points, in the order its vectors hold columns. */
        __m512 zv[4];
        for (int t = 0; t < 4; t++) {
            float z[16];
            for (int l = 0; l < 16; l++) {
                size_t col = w == 64 && !half ? 4 * (size_t)l + (size_t)t
                                              : 16 * (size_t)t + (size_t)l;
                z[l] = col < w ? zero_at(x, j + col, 0) : 0.0f;
            }
            zv[t] = _mm512_loadu_ps(z);
        }
        for (size_t i0 = 0; i0 < d->m; i0 += 4) {
            size_t rows = d->m - i0 < 4 ? d->m - i0 : 4;
            __m512 acc[4][4];
            for (size_t r = 0; r < 4; r++)
                for (int t = 0; t < 4; t++)
                    acc[r][t] = _mm512_setzero_ps();
            for (size_t kk = 0; kk < d->k; kk++) {
                const uint8_t *qr = x->q + kk * d->ldq + j;
                __m512 wv[4];
                if (half)
                    for (int t = 0; t < 4; t++)
                        wv[t] = half16(d,
                                       (const uint16_t *)x->q + kk * d->ldq +
                                           j + 16 * (size_t)t,
                                       mk[t]);
                else if (w == 64) /* vector t lane l: column 4 l + t */
                    quad16(d, qr, wv);
                else
                    for (int t = 0; t < 4; t++)
                        wv[t] = load16(d, qr + 16 * t, mk[t]);
                if (x->zero || d->zero_value != 0.0f)
                    for (int t = 0; t < 4; t++)
                        wv[t] = _mm512_sub_ps(wv[t], zv[t]);
                for (size_t r = 0; r < rows; r++) {
                    __m512 av = _mm512_set1_ps(x->a[(i0 + r) * d->lda + kk]);
                    for (int t = 0; t < 4; t++)
                        acc[r][t] = _mm512_fmadd_ps(av, wv[t], acc[r][t]);
                }
            }
            for (size_t r = 0; r < rows; r++) {
                float dot[64];
                for (int t = 0; t < 4; t++)
                    _mm512_storeu_ps(dot + 16 * t, acc[r][t]);
                if (w == 64 && !half) { /* back from the quad layout */
                    float lin[64];
                    for (int t = 0; t < 4; t++)
                        for (int l = 0; l < 16; l++)
                            lin[4 * l + t] = dot[16 * t + l];
                    memcpy(dot, lin, sizeof lin);
                }
                for (size_t l = 0; l < w; l++)
                    x->c[(i0 + r) * d->ldc + j + l] = finish(x, j + l, &dot[l]);
            }
        }
    }
}

/*
 * One block of a row of q (N rows of K) times the same block of a row of
 * A: kn values from kk = k0, summed in four lanes of 16 then reduced.
 */
static inline __attribute__((always_inline)) AVX512 float
block_dot_as(const sn_qgemm_desc *d, const uint8_t *qrow, const float *ar,
             const float *aq, size_t k0, size_t kn, float z, const int hz)
{
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    const __m512 zv = _mm512_set1_ps(z);
    size_t kk = 0;
#define SN_LESS_Z(v) (hz ? _mm512_sub_ps(v, zv) : (v))
    if (d->qtype == SN_QTYPE_U4) {
        /* 32 values in 16 bytes: the low nibbles are the even kk, the
         * high the odd; A's 32 values split the same way. */
        const __m512i lo4 = _mm512_set1_epi32(15);
        const __m512i idx = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16,
                                             14, 12, 10, 8, 6, 4, 2, 0);
        const __m512i idx1 = _mm512_add_epi32(idx, _mm512_set1_epi32(1));
        for (; kk + 32 <= kn; kk += 32) {
            __m512i b = _mm512_cvtepu8_epi32(
                _mm_loadu_si128((const __m128i *)(qrow + (k0 + kk) / 2)));
            __m512 ev = SN_LESS_Z(_mm512_cvtepi32_ps(_mm512_and_si512(b, lo4)));
            __m512 od = SN_LESS_Z(_mm512_cvtepi32_ps(_mm512_srli_epi32(b, 4)));
            __m512 a0 = _mm512_loadu_ps(ar + k0 + kk),
                   a1 = _mm512_loadu_ps(ar + k0 + kk + 16);
            __m512 ae = _mm512_permutex2var_ps(a0, idx, a1),
                   ao = _mm512_permutex2var_ps(a0, idx1, a1);
            acc0 = _mm512_fmadd_ps(ae, ev, acc0);
            acc1 = _mm512_fmadd_ps(ao, od, acc1);
        }
    } else {
        /* Four chains, a cache line of q a step: the loop is bound by
         * reading q, not by the adds' latency. */
        __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
        const float *ak = ar + k0;
        const uint8_t *qk = qrow + k0;
        /* aq: A's values in the quad layout (from k0 = 0), for quad16. */
#define SN_QUAD_STEP(lo8, hi8, shr)                                          \
    for (; aq && kk + 64 <= kn; kk += 64) {                                   \
        __m512i w = _mm512_loadu_si512(qk + kk);                              \
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(aq + kk),                      \
                               SN_LESS_Z(_mm512_cvtepi32_ps(lo8)), acc0);     \
        acc1 = _mm512_fmadd_ps(                                               \
            _mm512_loadu_ps(aq + kk + 16),                                    \
            SN_LESS_Z(_mm512_cvtepi32_ps(hi8(w, 16))), acc1);                 \
        acc2 = _mm512_fmadd_ps(                                               \
            _mm512_loadu_ps(aq + kk + 32),                                    \
            SN_LESS_Z(_mm512_cvtepi32_ps(hi8(w, 8))), acc2);                  \
        acc3 = _mm512_fmadd_ps(_mm512_loadu_ps(aq + kk + 48),                 \
                               SN_LESS_Z(_mm512_cvtepi32_ps(shr(w, 24))),     \
                               acc3);                                         \
    }
        if (d->qtype == SN_QTYPE_S8) {
            /* byte b of each 32-bit lane: up to the top, then down */
#define SN_S8_AT(w, up) _mm512_srai_epi32(_mm512_slli_epi32(w, up), 24)
            SN_QUAD_STEP(SN_S8_AT(w, 24), SN_S8_AT, _mm512_srai_epi32)
        } else {
#define SN_U8_AT(w, up)                                                       \
    _mm512_and_si512(_mm512_srli_epi32(w, 24 - (up)), _mm512_set1_epi32(255))
            SN_QUAD_STEP(SN_U8_AT(w, 24), SN_U8_AT, _mm512_srli_epi32)
        }
#undef SN_QUAD_STEP
#undef SN_S8_AT
#undef SN_U8_AT
        for (; kk + 64 <= kn; kk += 64) {
            acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(ak + kk),
                                   SN_LESS_Z(load16(d, qk + kk, 0xffff)), acc0);
            acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(ak + kk + 16),
                                   SN_LESS_Z(load16(d, qk + kk + 16, 0xffff)),
                                   acc1);
            acc2 = _mm512_fmadd_ps(_mm512_loadu_ps(ak + kk + 32),
                                   SN_LESS_Z(load16(d, qk + kk + 32, 0xffff)),
                                   acc2);
            acc3 = _mm512_fmadd_ps(_mm512_loadu_ps(ak + kk + 48),
                                   SN_LESS_Z(load16(d, qk + kk + 48, 0xffff)),
                                   acc3);
        }
        for (; kk + 16 <= kn; kk += 16)
            acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(ak + kk),
                                   SN_LESS_Z(load16(d, qk + kk, 0xffff)), acc0);
        acc0 = _mm512_add_ps(acc0, acc2);
        acc1 = _mm512_add_ps(acc1, acc3);
    }
    float s = hsum(_mm512_add_ps(acc0, acc1));
    for (; kk < kn; kk++) {
        size_t at = k0 + kk;
        int v = d->qtype == SN_QTYPE_U4
                    ? (at % 2 ? qrow[at / 2] >> 4 : qrow[at / 2] & 15)
                : d->qtype == SN_QTYPE_S8 ? (int)(int8_t)qrow[at]
                                          : (int)qrow[at];
        s += ar[at] * ((float)v - z);
    }
#undef SN_LESS_Z
    return s;
}

/* block_dot_as made twice, hz a constant in each: without a zero point
 * the loops have no subtraction, and no select (measured: a select in
 * the loop cost int8 a quarter of its speed). */
static AVX512 float block_dot(const sn_qgemm_desc *d, const uint8_t *qrow,
                              const float *ar, const float *aq, size_t k0,
                              size_t kn, float z)
{
    return z == 0.0f ? block_dot_as(d, qrow, ar, aq, k0, kn, 0.0f, 0)
                     : block_dot_as(d, qrow, ar, aq, k0, kn, z, 1);
}

/*
 * A step of 128 uint4 weights (u4_column, u4_vnni_column), its 16 lane
 * sums v, lane l those of weights 128 g + 8 l to + 7: each block's lanes
 * scaled by the block's scale into a chain of their own (acc[0] to acc[3]
 * for blocks of 32, a block per 4 lanes; acc[0] for any other multiple
 * of 32, under a mask of the lanes in each block).  hz: zero points per
 * block, each lane less its block's z times s, its sum of A's 8 values.
 */
static inline __attribute__((always_inline)) AVX512 void
u4_scale_step(const qargs *x, const float *scale, const float *zero,
              size_t g, __m512 v, __m512 s, __m512 acc[4], const int hz,
              const int b32)
{
#define SN_U4_SCALE(acc, bb, mask)                                            \
    do {                                                                      \
        __m512 w_ = hz ? _mm512_fnmadd_ps(_mm512_set1_ps(zero[bb]), s, v)     \
                       : v;                                                   \
        acc = _mm512_mask3_fmadd_ps(w_, _mm512_set1_ps(scale[bb]), acc,       \
                                    (__mmask16)(mask));                       \
    } while (0)
    if (b32) {
        SN_U4_SCALE(acc[0], g * 4, 0x000f);
        SN_U4_SCALE(acc[1], g * 4 + 1, 0x00f0);
        SN_U4_SCALE(acc[2], g * 4 + 2, 0x0f00);
        SN_U4_SCALE(acc[3], g * 4 + 3, 0xf000);
    } else { /* lane l in block (128 g + 8 l) / block */
        size_t k0 = g * 128, bb = k0 / x->block;
        for (unsigned lane = 0; lane < 16; bb++) {
            size_t end = ((bb + 1) * x->block - k0) / 8;
            unsigned e = end < 16 ? (unsigned)end : 16;
            SN_U4_SCALE(acc[0], bb, (1u << e) - (1u << lane));
            lane = e;
        }
    }
#undef SN_U4_SCALE
}

/*
 * uint4 in blocks of a multiple of 32 (MatMulNBits) where the CPU has no
 * VNNI or A's row is not finite: column j for row i of A, in floats.  The
 * 16 values q - z are a table the nibbles index (vpermps reads an index's
 * low four bits): no conversion of the integers and no subtraction per
 * weight.  K goes 128 weights a step: 64 bytes of q read as 16 dwords of
 * 8 nibbles each, nibble n of dword l being weight 8 l + n, so a shift by
 * 4 n puts 16 weights where vpermps reads them (8 shuffles a step where
 * bytes widened to dwords took 12).  x->aq holds A's rows in that order
 * (the octet layout: each 128 values as the 16 of n = 0, then of n = 1,
 * ...), and K's last 32s short of a 128 in the pair layout (each 32 as
 * the 16 even ones, then the 16 odd ones, matching a byte's low and high
 * nibbles).  With a zero point per block the table holds q, and each
 * lane takes off z times its 8 values' sum, x->as (the lanes of a step
 * can lie in different blocks; one table serves them all).
 */
static inline __attribute__((always_inline)) AVX512 float
u4_column_as(const qargs *x, size_t i, size_t j, const int hz, const int b32)
{
    const sn_qgemm_desc *d = x->d;
    const uint8_t *qrow = x->q + j * d->ldq;
    const float *ap = x->aq + i * d->k, *scale = x->scale + j * x->blocks;
    const float *zero = hz ? x->zero + j * x->blocks : NULL;
    const float *as = hz && x->as ? x->as + i * (d->k / 128 * 16) : NULL;
    const __m512 iota = _mm512_set_ps(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5,
                                      4, 3, 2, 1, 0);
    const __m512 t0 =
        hz ? iota : _mm512_sub_ps(iota, _mm512_set1_ps(d->zero_value));
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(),
                     _mm512_setzero_ps(), _mm512_setzero_ps()};
    size_t steps = d->k / 128, full = d->k / 32 * 32;
    for (size_t g = 0; g < steps; g++) {
        const float *a = ap + g * 128;
        const __m512i w = _mm512_loadu_si512(qrow + g * 64);
        _mm_prefetch((const char *)(qrow + g * 64 + STREAM_AHEAD),
                     _MM_HINT_T0);
#define SN_U4_NIB(n) _mm512_permutexvar_ps(_mm512_srli_epi32(w, 4 * (n)), t0)
        __m512 v0 = _mm512_mul_ps(_mm512_loadu_ps(a), SN_U4_NIB(0));
        __m512 v1 = _mm512_mul_ps(_mm512_loadu_ps(a + 16), SN_U4_NIB(1));
        __m512 v2 = _mm512_mul_ps(_mm512_loadu_ps(a + 32), SN_U4_NIB(2));
        __m512 v3 = _mm512_mul_ps(_mm512_loadu_ps(a + 48), SN_U4_NIB(3));
        v0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + 64), SN_U4_NIB(4), v0);
        v1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + 80), SN_U4_NIB(5), v1);
        v2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + 96), SN_U4_NIB(6), v2);
        v3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + 112), SN_U4_NIB(7), v3);
#undef SN_U4_NIB
        const __m512 v = _mm512_add_ps(_mm512_add_ps(v0, v2),
                                       _mm512_add_ps(v1, v3));
        u4_scale_step(x, scale, zero, g, v,
                      hz ? _mm512_loadu_ps(as + g * 16) : v, acc, hz, b32);
    }
    /* 32s short of a step: the pair layout, q - z in the table */
    for (size_t kk = steps * 128; kk < full; kk += 32) {
        const __m512 t =
            hz ? _mm512_sub_ps(iota, _mm512_set1_ps(zero[kk / x->block]))
               : t0;
        __m512i w = _mm512_cvtepu8_epi32(
            _mm_loadu_si128((const __m128i *)(qrow + kk / 2)));
        __m512 v = _mm512_mul_ps(_mm512_loadu_ps(ap + kk),
                                 _mm512_permutexvar_ps(w, t));
        v = _mm512_fmadd_ps(_mm512_loadu_ps(ap + kk + 16),
                            _mm512_permutexvar_ps(_mm512_srli_epi32(w, 4), t),
                            v);
        acc[1] = _mm512_fmadd_ps(v, _mm512_set1_ps(scale[kk / x->block]),
                                 acc[1]);
    }
    float y = hsum(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]),
                                 _mm512_add_ps(acc[2], acc[3])));
    /* K past the last 32: its block's scale and zero point. */
    const float *ar = x->a + i * d->lda;
    for (size_t kk = full; kk < d->k; kk++) {
        size_t bk = kk / x->block;
        int v = kk % 2 ? qrow[kk / 2] >> 4 : qrow[kk / 2] & 15;
        y += scale[bk] * ar[kk] * ((float)v - zero_at(x, j, bk));
    }
    if (x->bias)
        y += x->bias[j];
    return act(d->act, y);
}

/* A uint4 kernel f(x, i, j, hz, b32) made for each case, the branches
 * constant in each: zero points per block or not, blocks of 32 or not. */
#define SN_U4_CASES(f, x, i, j)                                               \
    ((x)->block == 32                                                         \
         ? ((x)->zero ? f(x, i, j, 1, 1) : f(x, i, j, 0, 1))                  \
         : ((x)->zero ? f(x, i, j, 1, 0) : f(x, i, j, 0, 0)))

static AVX512 float u4_column(const qargs *x, size_t i, size_t j)
{
    return SN_U4_CASES(u4_column_as, x, i, j);
}

#define VNNI __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")))

/* v's sixteen 32-bit lanes, sign-extended, added pairwise into eight
 * 64-bit lanes (sums of many of them overflow 32 bits). */
static inline __attribute__((always_inline)) VNNI __m512i
widen_pairs(__m512i v)
{
    return _mm512_add_epi64(
        _mm512_cvtepi32_epi64(_mm512_castsi512_si256(v)),
        _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(v, 1)));
}

/* The byte planes of A's m rows (vnni_row) in one allocation, or NULL
 * where a row holds a NaN or an infinity (the float path takes them) or
 * memory is short; u4: in uint4's order, with lane sums times zmul (K a
 * multiple of 128).  16 values a step: the planes of a big model's layer
 * are made in microseconds. */
static VNNI vnni_row *vnni_rows(const sn_qgemm_desc *d, const float *a,
                                int u4, int32_t zmul)
{
    size_t kp = (d->k + 63) / 64 * 64;
    /* The rows, then the planes on a cache line's start (the kernels read
     * them 64 bytes at a time: a load across two lines costs two; from
     * malloc's 16-byte alignment, int8's planes took two 1024 x 4096
     * products 0.087 ms against 0.075 on two Zen 5 cores, and the 537 MB
     * MLP's int8 form 2.4 against 1.35 ms at 80 GB/s), then the lane
     * sums. */
    size_t head = (d->m * sizeof(vnni_row) + 63) / 64 * 64,
           lanes = u4 ? d->k / 8 : 0,
           size = head + d->m * (3 * kp + lanes * sizeof(int32_t));
    void *mem = NULL;
    if (posix_memalign(&mem, 64, size))
        return NULL;
    memset(mem, 0, size);
    vnni_row *rows = mem;
    int8_t *bytes = (int8_t *)mem + head;
    int32_t *lsums = (int32_t *)(bytes + d->m * 3 * kp);
    /* 16 digits' even ones, then the odd ones */
    const __m128i split = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5,
                                        7, 9, 11, 13, 15);
    const __m512 mag = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    const __m512i k128 = _mm512_set1_epi32(128), k255 = _mm512_set1_epi32(255);
    for (size_t i = 0; i < d->m; i++) {
        const float *ar = a + i * d->lda;
        vnni_row *r = &rows[i];
        __m512 mx = _mm512_setzero_ps();
        __mmask16 bad = 0;
        for (size_t k = 0; k < d->k; k += 16) {
            __mmask16 m = d->k - k >= 16 ? 0xffff
                                         : (__mmask16)((1u << (d->k - k)) - 1u);
            __m512 v = _mm512_and_ps(_mm512_maskz_loadu_ps(m, ar + k), mag);
            bad |= _mm512_cmp_ps_mask(v, _mm512_set1_ps(3.4028235e38f),
                                      _CMP_NLE_UQ); /* NaN or infinite */
            mx = _mm512_max_ps(mx, v);
        }
        float amax = _mm512_reduce_max_ps(mx);
        /* (and rows so small that 2^22 / max overflows a float) */
        if (bad || (amax > 0.0f && !(4194303.0 / (double)amax <= 3.0e38))) {
            free(rows);
            return NULL;
        }
        /* v within 2^22, so that the top digit is within 64 */
        r->scale = (double)amax / 4194303.0;
        for (int p = 0; p < 3; p++)
            r->plane[p] = bytes + (3 * i + (size_t)p) * kp;
        r->lsum = u4 ? lsums + i * lanes : NULL;
        if (amax == 0.0f)
            continue;
        const __m512 inv = _mm512_set1_ps((float)(4194303.0 / (double)amax));
        __m512i ps[3] = {_mm512_setzero_si512(), _mm512_setzero_si512(),
                         _mm512_setzero_si512()};
        __m512i vs = _mm512_setzero_si512(); /* 64-bit lanes */
        for (size_t k = 0; k < d->k; k += 16) {
            __mmask16 m = d->k - k >= 16 ? 0xffff
                                         : (__mmask16)((1u << (d->k - k)) - 1u);
            __m512i v = _mm512_cvtps_epi32(
                _mm512_mul_ps(_mm512_maskz_loadu_ps(m, ar + k), inv));
            vs = _mm512_add_epi64(vs, widen_pairs(v));
            if (u4) { /* within 2^25, times a zero point within 2^4 */
                r->lsum[k / 8] =
                    zmul * _mm512_mask_reduce_add_epi32(0x00ff, v);
                r->lsum[k / 8 + 1] =
                    zmul * _mm512_mask_reduce_add_epi32(0xff00, v);
            }
            for (int p = 0; p < 3; p++) {
                __m512i digit = _mm512_sub_epi32(
                    _mm512_and_si512(_mm512_add_epi32(v, k128), k255), k128);
                __m128i d8 = _mm512_cvtepi32_epi8(digit);
                if (u4) { /* k's 128: even digits at k / 2, odd 64 on */
                    int8_t *at = r->plane[p] + k / 128 * 128 + k % 128 / 2;
                    d8 = _mm_shuffle_epi8(d8, split);
                    _mm_storel_epi64((__m128i *)at, d8);
                    _mm_storel_epi64((__m128i *)(at + 64),
                                     _mm_unpackhi_epi64(d8, d8));
                } else {
                    _mm_mask_storeu_epi8(r->plane[p] + k, m, d8);
                }
                ps[p] = _mm512_add_epi32(ps[p], digit);
                v = _mm512_srai_epi32(_mm512_sub_epi32(v, digit), 8);
            }
        }
        for (int p = 0; p < 3; p++)
            r->psum[p] = _mm512_reduce_add_epi32(ps[p]);
        r->vsum = _mm512_reduce_add_epi64(vs);
    }
    return rows;
}

/*
 * int8 or uint8, N rows of K, one block, by a row of A as bytes: vpdpbusd
 * sums four byte products a lane, exactly, in 32-bit integers: per 64
 * weights one load and three products, where the float path converts the
 * bytes with eleven shifts and conversions and was bound by them (71% of
 * a 42.8 GB/s read bandwidth).  q's bytes are the unsigned operand (int8
 * flipped to q + 128, taken back as 128 times the plane's sum).  The sum
 * is exact but for A's rounding to 23 bits; the zero point is taken away
 * as z times v's sum, exactly, in 64-bit integers.
 */
static VNNI float vnni_column(const qargs *x, size_t i, size_t j)
{
    const sn_qgemm_desc *d = x->d;
    const vnni_row *r = &x->vr[i];
    const uint8_t *qrow = x->q + j * d->ldq;
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    const int s8 = d->qtype == SN_QTYPE_S8;
    __m512i acc0 = _mm512_setzero_si512(), acc1 = _mm512_setzero_si512(),
            acc2 = _mm512_setzero_si512();
    for (size_t kk = 0; kk < d->k; kk += 64) {
        size_t left = d->k - kk;
        __m512i w = left >= 64
                        ? _mm512_loadu_si512(qrow + kk)
                        : _mm512_maskz_loadu_epi8(
                              ((__mmask64)1 << left) - 1, qrow + kk);
        _mm_prefetch((const char *)(qrow + kk + STREAM_AHEAD), _MM_HINT_T0);
        if (s8)
            w = _mm512_xor_si512(w, flip);
        acc0 = _mm512_dpbusd_epi32(acc0, w,
                                   _mm512_loadu_si512(r->plane[0] + kk));
        acc1 = _mm512_dpbusd_epi32(acc1, w,
                                   _mm512_loadu_si512(r->plane[1] + kk));
        acc2 = _mm512_dpbusd_epi32(acc2, w,
                                   _mm512_loadu_si512(r->plane[2] + kk));
    }
    int64_t sum[3];
    const __m512i accs[3] = {acc0, acc1, acc2};
    for (int p = 0; p < 3; p++) {
        sum[p] = _mm512_reduce_add_epi64(widen_pairs(accs[p]));
        if (s8)
            sum[p] -= 128 * r->psum[p];
    }
    int64_t qv = sum[2] * 65536 + sum[1] * 256 + sum[0];
    double dot = (double)qv - (double)zero_at(x, j, 0) * (double)r->vsum;
    float f = (float)(dot * r->scale);
    return finish(x, j, &f);
}

/*
 * uint4 in blocks of a multiple of 32, K a multiple of 128, by a row of A
 * as bytes (vnni_rows' uint4 order): a step's 64 bytes of q, masked and
 * shifted into the low and the high nibbles, are the unsigned operands of
 * vpdpbusd against A's digits, two products a plane, so that lane l of
 * the sums is exactly the sum of q times v over weights 8 l to 8 l + 7
 * (below 2^29: v within 2^22).  One zero point for all (an integer):
 * lsum holds z times the lane's sum of v, taken off exactly in integers;
 * zero points per block: each lane takes off its block's z times that
 * sum in floats (u4_scale_step).  A block's lanes are then scaled as
 * u4_column's.  Per 128 weights 22 operations where u4_column's floats
 * take 36: one Zen 5 core from L2, 67 against 46 Gweights/s; the 537 MB
 * MLP's int4 form at batch 1 on two, 1.35 against 1.79 ms for the
 * floats 32 weights a step (interleaved, at 50 GB/s).  A is rounded to
 * 23 bits, as for int8 (vnni_column).
 */
static inline __attribute__((always_inline)) VNNI float
u4_vnni_column_as(const qargs *x, size_t i, size_t j, const int hz,
                  const int b32)
{
    const sn_qgemm_desc *d = x->d;
    const vnni_row *r = &x->vr[i];
    const uint8_t *qrow = x->q + j * d->ldq;
    const float *scale = x->scale + j * x->blocks;
    const float *zero = hz ? x->zero + j * x->blocks : NULL;
    const __m512i nib = _mm512_set1_epi8(0x0f);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(),
                     _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (size_t g = 0, steps = d->k / 128; g < steps; g++) {
        const __m512i w = _mm512_loadu_si512(qrow + g * 64);
        _mm_prefetch((const char *)(qrow + g * 64 + STREAM_AHEAD),
                     _MM_HINT_T0);
        const __m512i lo = _mm512_and_si512(w, nib),
                      hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), nib);
#define SN_U4_PLANE(p)                                                        \
    _mm512_dpbusd_epi32(                                                      \
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo,                       \
                            _mm512_loadu_si512(r->plane[p] + g * 128)),       \
        hi, _mm512_loadu_si512(r->plane[p] + g * 128 + 64))
        const __m512i c0 = SN_U4_PLANE(0), c1 = SN_U4_PLANE(1),
                      c2 = SN_U4_PLANE(2);
#undef SN_U4_PLANE
        __m512i c = _mm512_add_epi32(
            _mm512_add_epi32(_mm512_slli_epi32(c2, 16),
                             _mm512_slli_epi32(c1, 8)),
            c0);
        const __m512i ls = _mm512_loadu_si512(r->lsum + g * 16);
        if (!hz)
            c = _mm512_sub_epi32(c, ls);
        u4_scale_step(x, scale, zero, g, _mm512_cvtepi32_ps(c),
                      _mm512_cvtepi32_ps(ls), acc, hz, b32);
    }
    float sum = hsum(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]),
                                   _mm512_add_ps(acc[2], acc[3])));
    float y = (float)(r->scale * (double)sum);
    if (x->bias)
        y += x->bias[j];
    return act(d->act, y);
}

static VNNI float u4_vnni_column(const qargs *x, size_t i, size_t j)
{
    return SN_U4_CASES(u4_vnni_column_as, x, i, j);
}

/* N rows of K: columns [j0, j1), each row of q against every row of A. */
static AVX512 void rows_of_k(const qargs *x, size_t j0, size_t j1)
{
    const sn_qgemm_desc *d = x->d;
    if (x->vr) {
        for (size_t j = j0; j < j1; j++)
            for (size_t i = 0; i < d->m; i++)
                x->c[i * d->ldc + j] = d->qtype == SN_QTYPE_U4
                                           ? u4_vnni_column(x, i, j)
                                           : vnni_column(x, i, j);
        return;
    }
    if (d->qtype == SN_QTYPE_U4 && x->aq) {
        for (size_t j = j0; j < j1; j++)
            for (size_t i = 0; i < d->m; i++)
                x->c[i * d->ldc + j] = u4_column(x, i, j);
        return;
    }
    float stack[256], *dot = x->blocks <= 256 ? stack : NULL;
    if (!dot && !(dot = malloc(x->blocks * sizeof *dot))) {
        __atomic_store_n(&((qargs *)x)->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    for (size_t j = j0; j < j1; j++) {
        const uint8_t *qrow = x->q + j * d->ldq;
        for (size_t i = 0; i < d->m; i++) {
            const float *ar = x->a + i * d->lda;
            for (size_t b = 0; b < x->blocks; b++) {
                size_t k0 = b * x->block,
                       kn = k0 + x->block < d->k ? x->block : d->k - k0;
                dot[b] = block_dot(d, qrow, ar,
                                   x->aq ? x->aq + i * d->k : NULL, k0, kn,
                                   zero_at(x, j, b));
            }
            x->c[i * d->ldc + j] = finish(x, j, dot);
        }
    }
    if (dot != stack)
        free(dot);
}


/* Column j of a half-precision weight stored as N rows of K, for row i
 * of A: two chains of 16 lanes each, q's row read ahead (STREAM_AHEAD).
 * Columns one after another, one stream a thread: 3.0 ms for the fp16
 * MLP of make_big_model at batch 1 (89 GB/s), where four rows side by
 * side took 6.9 ms (4.5 with the prefetch). */
static AVX512 void half_column(const qargs *x, size_t i, size_t j)
{
    const sn_qgemm_desc *d = x->d;
    const float *ar = x->a + i * d->lda;
    const uint16_t *q = (const uint16_t *)x->q + j * d->ldq;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    size_t kk = 0;
    for (; kk + 32 <= d->k; kk += 32) {
        const uint16_t *r = q + kk;
        _mm_prefetch((const char *)r + STREAM_AHEAD, _MM_HINT_T0);
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(ar + kk), half16(d, r, 0xffff),
                             s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(ar + kk + 16),
                             half16(d, r + 16, 0xffff), s1);
    }
    for (; kk < d->k; kk += 16) {
        size_t left = d->k - kk;
        __mmask16 m = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1u);
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, ar + kk),
                             half16(d, q + kk, m), s0);
    }
    float dot = hsum(_mm512_add_ps(s0, s1));
    x->c[i * d->ldc + j] = finish(x, j, &dot);
}

/* A half-precision weight (one block, no zero point), N rows of K:
 * columns [j0, j1) against every row of A. */
static AVX512 void half_rows_of_k(const qargs *x, size_t j0, size_t j1)
{
    for (size_t j = j0; j < j1; j++)
        for (size_t i = 0; i < x->d->m; i++)
            half_column(x, i, j);
}

#endif /* SN_HAVE_AVX512_QGEMM */

static void columns(const qargs *x, size_t j0, size_t j1)
{
#if SN_HAVE_AVX512_QGEMM
    if (sn_cpu_has_avx512()) {
        if (sn_qtype_bytes(x->d->qtype) == 2 && x->d->trans_b)
            half_rows_of_k(x, j0, j1);
        else if (x->d->trans_b)
            rows_of_k(x, j0, j1);
        else if (x->blocks == 1)
            rows_of_n(x, j0, j1);
        else
            columns_c(x, j0, j1);
        return;
    }
#endif
    columns_c(x, j0, j1);
}

/*
 * Many rows of A: the weight dequantized once, (q - z) * s in float as
 * DequantizeLinear computes it, into w (stored as q is), for the float
 * GEMM, which reuses each weight across the rows where the paths above
 * convert it again for each row.
 */
static void dequantize(const qargs *x, float *w)
{
    const sn_qgemm_desc *d = x->d;
    size_t rows = d->trans_b ? d->n : d->k, cols = d->trans_b ? d->k : d->n;
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            size_t j = d->trans_b ? r : c, kk = d->trans_b ? c : r;
            size_t b = kk / x->block;
            w[r * cols + c] =
                (qvalue(d, x->q, kk, j) - zero_at(x, j, b)) *
                x->scale[j * x->blocks + b];
        }
}

/* From this many rows of A on, dequantizing once and the float GEMM win
 * (the Fashion-MNIST MLP as int8 at batch 1000 ran 3.6x slower than as
 * fp32 before). */
#define GEMM_ROWS 8

/* n floats from a cache line's start (the kernels read them 64 bytes at
 * a time: a load across two lines costs two), or NULL. */
static float *line_floats(size_t n)
{
    void *p = NULL;
    return posix_memalign(&p, 64, n * sizeof(float)) ? NULL : p;
}

int sn_cpu_qgemm(const sn_qgemm_desc *d, const float *a, const void *q,
                 const float *scale, const float *zero, const float *bias,
                 float *c)
{
    qargs x = {.d = d, .a = a, .q = q, .scale = scale, .zero = zero,
               .bias = bias, .c = c,
               .block = d->block ? d->block : d->k,
               .blocks = d->block ? (d->k + d->block - 1) / d->block : 1};
    float *aq = NULL;
    vnni_row *vr = NULL;
    if (d->m >= GEMM_ROWS) {
        float *w = malloc(d->k * d->n * sizeof *w);
        if (!w)
            return 0;
        dequantize(&x, w);
        sn_gemm_desc g = {.trans_b = d->trans_b, .m = d->m, .n = d->n,
                          .k = d->k, .alpha = 1.0f, .lda = d->lda,
                          .ldb = d->trans_b ? d->k : d->n, .ldc = d->ldc,
                          .batch = 1, .act = d->act};
        sn_cpu_gemm(&g, a, w, c, bias, NULL);
        free(w);
        return 1;
    }
#if SN_HAVE_AVX512_QGEMM
    /* Bytes by bytes where the CPU has VNNI (vnni_column). */
    if (d->trans_b && x.blocks == 1 && sn_qtype_bytes(d->qtype) == 1 &&
        d->qtype != SN_QTYPE_U4 && d->k <= ((size_t)1 << 20) &&
        sn_cpu_has_avx512_vnni())
        x.vr = vr = vnni_rows(d, a, 0, 0);
    /* Rows of q against rows of A, whole K per column: A's rows in the
     * quad layout once, so that q's bytes need no shuffle. */
    if (!vr && d->trans_b && x.blocks == 1 && d->qtype != SN_QTYPE_U4 &&
        sn_qtype_bytes(d->qtype) == 1 &&
        d->k >= 64 && sn_cpu_has_avx512() && (aq = line_floats(d->m * d->k))) {
        for (size_t i = 0; i < d->m; i++)
            for (size_t k0 = 0; k0 + 64 <= d->k; k0 += 64)
                for (size_t t = 0; t < 4; t++)
                    for (size_t l = 0; l < 16; l++)
                        aq[i * d->k + k0 + 16 * t + l] =
                            a[i * d->lda + k0 + 4 * l + t];
        x.aq = aq;
    }
    /* uint4 by bytes where the CPU has VNNI (u4_vnni_column), with zero
     * points per block or one for all that is a whole number */
    if (d->qtype == SN_QTYPE_U4 && d->block && d->block % 32 == 0 &&
        d->k % 128 == 0 && d->k <= ((size_t)1 << 20) &&
        (zero || (d->zero_value >= -15.0f && d->zero_value <= 15.0f &&
                  d->zero_value == (float)(int)d->zero_value)) &&
        sn_cpu_has_avx512_vnni())
        x.vr = vr = vnni_rows(d, a, 1, zero ? 1 : (int32_t)d->zero_value);
    /* uint4 in blocks of multiples of 32 otherwise: A's rows in the octet
     * and pair layouts, and with zero points the sums of each 8
     * (u4_column). */
    if (!vr && d->qtype == SN_QTYPE_U4 && d->block && d->block % 32 == 0 &&
        d->k >= 32 && sn_cpu_has_avx512() &&
        (aq = line_floats(d->m * d->k + (zero ? d->m * (d->k / 128) * 16
                                              : 0)))) {
        size_t steps = d->k / 128, full = d->k / 32 * 32;
        float *as = zero ? aq + d->m * d->k : NULL;
        for (size_t i = 0; i < d->m; i++) {
            const float *ar = a + i * d->lda;
            float *to = aq + i * d->k;
            for (size_t k0 = 0; k0 < steps * 128; k0 += 128)
                for (size_t l = 0; l < 16; l++) {
                    float sum = 0.0f;
                    for (size_t n = 0; n < 8; n++) {
                        to[k0 + 16 * n + l] = ar[k0 + 8 * l + n];
                        sum += ar[k0 + 8 * l + n];
                    }
                    if (as)
                        as[(i * steps + k0 / 128) * 16 + l] = sum;
                }
            for (size_t k0 = steps * 128; k0 < full; k0 += 32)
                for (size_t l = 0; l < 16; l++) {
                    to[k0 + l] = ar[k0 + 2 * l];
                    to[k0 + 16 + l] = ar[k0 + 2 * l + 1];
                }
        }
        x.aq = aq;
        x.as = as;
    }
#endif
    size_t rows = d->trans_b ? d->n : d->k;
    /* Tiles of 64 columns keep each thread's bytes of a row in whole
     * cache lines. */
    size_t grain = d->trans_b ? 1 : 64;
    size_t units = (d->n + grain - 1) / grain;
    if ((double)rows * (double)d->ldq * (double)sn_qtype_bytes(d->qtype) <
            SERIAL_BYTES ||
        units < 2 ||
        omp_get_max_threads() < 2) {
        columns(&x, 0, d->n);
    } else {
#pragma omp parallel
        {
            size_t nt = (size_t)omp_get_num_threads(),
                   t = (size_t)omp_get_thread_num();
            size_t u0 = units * t / nt, u1 = units * (t + 1) / nt;
            size_t j0 = u0 * grain, j1 = u1 * grain < d->n ? u1 * grain : d->n;
            if (j0 < j1)
                columns(&x, j0, j1);
        }
    }
    free(aq);
    free(vr);
    return !x.failed;
}
