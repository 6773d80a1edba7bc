/*
 * Small products on the CPU: C = op(A) B with B narrow (n <= 32 columns)
 * and short (k <= 128), usually many of them at once (attention's per-head
 * Q K^T and P V: 16 x 16 x 16 items by the hundred).
 *
 * Why not OpenBLAS: its sgemm costs about half a microsecond a call before
 * any arithmetic (argument checks, a buffer from its pool taken under one
 * process-wide lock, packing), which is most of a 16 x 16 x 16 product;
 * and two CPU devices calling it at once take turns on that lock (a traced
 * tensor split showed the two sockets' attention products alternating in
 * bursts, each waiting ~9 us for the other).  Here nothing is shared and
 * nothing is allocated: B's rows are read in place (one or two zmm per row,
 * masked at the edge), op(B) of a transposed B is first copied into a
 * k x 32 block on the stack, and a tile of up to 8 rows of C (16 columns)
 * or 4 rows (32 columns) stays in registers over the whole K loop.
 *
 * Every element of C is sum_k a[i][k] b[k][j], accumulated in order
 * k = 0, 1, ... with one fused multiply-add a step, then alpha and beta,
 * then the epilogue (bias, RELU) as in gemm.c.  That sequence depends on
 * neither the row tile an element falls in, nor the batch size, nor the
 * thread count, and sn_cpu_sgemm_small_takes() looks only at trans_a, n and
 * k: a model cut into micro-batches (the layer split) gets the same bits as
 * the whole batch.
 */
#include <config.h>

#include <omp.h>
#include <stddef.h>

#include "cpu_kernels.h"

#if defined(__GNUC__) && defined(__x86_64__)
#define SN_HAVE_SMALL 1
#include <immintrin.h>
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))
#else
#define SN_HAVE_SMALL 0
#endif

#define SMALL_MAX_N 32
#define SMALL_MAX_K 128
/* Below this many multiply-adds (all items) one thread. */
#define SMALL_SERIAL_WORK (64.0 * 64.0 * 64.0)

int sn_cpu_sgemm_small_takes(const sn_gemm_desc *d)
{
    return sn_cpu_sgemm_avx512_available() && !d->trans_a && d->n >= 1 &&
           d->n <= SMALL_MAX_N && d->k >= 1 && d->k <= SMALL_MAX_K;
}

#if SN_HAVE_SMALL

/*
 * Rows [0, R) of one item's C tile: a points at row 0 of A, c at row 0 of
 * C, b at op(B) row 0 (stride ldb).  NV: zmm per row (1: n <= 16, 2: n <=
 * 32); masks m0, m1 for the column edge.  Forced inline with R and NV
 * constant, so the accumulators are registers.
 */
static inline __attribute__((always_inline)) AVX512 void
tile(const sn_gemm_desc *d, const int R, const int NV, const float *a,
     const float *b, size_t ldb, float *c, const float *bias,
     const float *res, size_t r0, __mmask16 m0, __mmask16 m1)
{
    __m512 acc[8][2];
    const size_t k = d->k, lda = d->lda, ldc = d->ldc;

#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++)
            acc[r][v] = _mm512_setzero_ps();
    for (size_t kk = 0; kk < k; kk++) {
        const float *brow = b + kk * ldb;
        const __m512 b0 = _mm512_maskz_loadu_ps(m0, brow);
        const __m512 b1 = NV > 1 ? _mm512_maskz_loadu_ps(m1, brow + 16)
                                 : _mm512_setzero_ps();
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const __m512 av = _mm512_set1_ps(a[(size_t)r * lda + kk]);
            acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
            if (NV > 1)
                acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
        }
    }
    const __m512 alpha = _mm512_set1_ps(d->alpha);
    const __m512 beta = _mm512_set1_ps(d->beta);
    const __m512 zero = _mm512_setzero_ps(), six = _mm512_set1_ps(6.0f);
    __m512 bcol[2] = {zero, zero};
    if (bias && !d->bias_rows) {
        bcol[0] = _mm512_maskz_loadu_ps(m0, bias);
        if (NV > 1)
            bcol[1] = _mm512_maskz_loadu_ps(m1, bias + 16);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        float *crow = c + (size_t)r * ldc;
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) {
            const __mmask16 mk = v ? m1 : m0;
            __m512 x = acc[r][v];
            if (d->alpha != 1.0f)
                x = _mm512_mul_ps(alpha, x);
            if (d->beta != 0.0f)
                x = _mm512_add_ps(
                    x, _mm512_mul_ps(beta,
                                     _mm512_maskz_loadu_ps(mk, crow + 16 * v)));
            if (bias && d->bias_rows)
                x = _mm512_add_ps(x, _mm512_set1_ps(bias[r0 + (size_t)r]));
            else if (bias)
                x = _mm512_add_ps(x, bcol[v]);
            if (res)
                x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(
                                         mk, res + (size_t)r * ldc + 16 * v));
            if (d->act != SN_ACT_NONE) /* x < 0 ? 0 : x; NaN passes */
                x = _mm512_mask_blend_ps(
                    _mm512_cmp_ps_mask(x, zero, _CMP_LT_OQ), x, zero);
            if (d->act == SN_ACT_RELU6) /* then x > 6 ? 6 : x */
                x = _mm512_mask_blend_ps(
                    _mm512_cmp_ps_mask(x, six, _CMP_GT_OQ), x, six);
            _mm512_mask_storeu_ps(crow + 16 * v, mk, x);
        }
    }
}

/* Rows [r0, r1) of one item in tiles of 8 rows (NV = 1) or 4 (NV = 2),
 * then the remaining rows as one smaller tile. */
static inline __attribute__((always_inline)) AVX512 void
row_tiles(const sn_gemm_desc *d, const int NV, const float *ai,
          const float *bi, size_t ldb, float *ci, const float *bias,
          const float *ri, size_t r0, size_t r1, __mmask16 m0, __mmask16 m1)
{
    const size_t rb = NV > 1 ? 4 : 8;
    size_t r = r0;

    for (; r + rb <= r1; r += rb)
        tile(d, (int)rb, NV, ai + r * d->lda, bi, ldb, ci + r * d->ldc, bias,
             ri ? ri + r * d->ldc : NULL, r, m0, m1);
    switch (r1 - r) { /* < rb */
#define TAIL(R)                                                                \
    case R:                                                                    \
        tile(d, R, NV, ai + r * d->lda, bi, ldb, ci + r * d->ldc, bias,     \
             ri ? ri + r * d->ldc : NULL, r, m0, m1);                          \
        break;
        TAIL(1) TAIL(2) TAIL(3) TAIL(4) TAIL(5) TAIL(6) TAIL(7)
#undef TAIL
    default:
        break;
    }
}

/* Rows [r0, r1) of item `item`. */
static AVX512 void rows(const sn_gemm_desc *d, const float *a, const float *b,
                        float *c, const float *bias, const float *res,
                        size_t item, size_t r0, size_t r1)
{
    const size_t n = d->n, k = d->k;
    const __mmask16 m0 = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
    const __mmask16 m1 =
        n >= 32 ? 0xffff : n > 16 ? (__mmask16)((1u << (n - 16)) - 1) : 0;
    const float *ai = a + item * d->stride_a;
    const float *bi = b + item * d->stride_b;
    float *ci = c + item * d->stride_c;
    const float *ri = res ? res + item * d->stride_c : NULL;
    float bt[SMALL_MAX_K * SMALL_MAX_N];
    size_t ldb = d->ldb;

    if (d->trans_b) {
        /* op(B) row kk = stored column kk: copied into k rows of 32. */
        for (size_t kk = 0; kk < k; kk++)
            for (size_t j = 0; j < n; j++)
                bt[kk * SMALL_MAX_N + j] = bi[j * d->ldb + kk];
        bi = bt;
        ldb = SMALL_MAX_N;
    }
    if (n <= 16)
        row_tiles(d, 1, ai, bi, ldb, ci, bias, ri, r0, r1, m0, m1);
    else
        row_tiles(d, 2, ai, bi, ldb, ci, bias, ri, r0, r1, m0, m1);
}

#define ROW_UNIT 8 /* rows per work unit when items are few */

void sn_cpu_sgemm_small(const sn_gemm_desc *d, const float *a, const float *b,
                        float *c, const float *bias, const float *res)
{
    const size_t nthreads = (size_t)omp_get_max_threads();
    const double work = (double)d->m * (double)d->n * (double)d->k *
                        (double)d->batch;

    if (d->m == 0)
        return;
    if (nthreads < 2 || work < SMALL_SERIAL_WORK) {
        for (size_t item = 0; item < d->batch; item++)
            rows(d, a, b, c, bias, res, item, 0, d->m);
        return;
    }
    /* Whole items when there are enough of them, else blocks of rows. */
    const size_t per_item =
        d->batch >= 2 * nthreads ? 1 : (d->m + ROW_UNIT - 1) / ROW_UNIT;
    const size_t units = d->batch * per_item;
#pragma omp parallel for schedule(static)
    for (size_t u = 0; u < units; u++) {
        const size_t item = u / per_item, blk = u % per_item;
        const size_t r0 = per_item == 1 ? 0 : blk * ROW_UNIT;
        const size_t r1 =
            per_item == 1 || r0 + ROW_UNIT > d->m ? d->m : r0 + ROW_UNIT;
        rows(d, a, b, c, bias, res, item, r0, r1);
    }
}

#else

void sn_cpu_sgemm_small(const sn_gemm_desc *d, const float *a, const float *b,
                        float *c, const float *bias, const float *res)
{
    (void)d, (void)a, (void)b, (void)c, (void)bias, (void)res;
}

#endif
