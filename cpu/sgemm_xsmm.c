/*
 * Products through libxsmm's JIT kernels, where configure found libxsmm
 * (--with-libxsmm, default: when found).  Measured on the 2-core AMD EPYC
 * (Zen 4) of the project, one thread, medians of 51 (product only):
 *   24 x 16384 x 24   own 231 us, libxsmm 202   (BlazeFace's 1x1 layers)
 *   64 x 4096 x 64    own 438 us, libxsmm 388
 *   128 x 1024 x 128  own 332 us, libxsmm 312
 *   256 x 256 x 256   own 312 us, libxsmm 294
 * The pixels of a 1x1 convolution (B's columns, C's columns) are the
 * vector dimension of a kernel of libxsmm's column-major form: C^T (n x
 * m) = B^T (n x k) A^T (k x m), blocks of PIX columns at a time, each
 * column's sum one FMA after another along k, as the AVX-512 kernel sums
 * a row of one K block (cpu/sgemm_avx512.c): so only products of one K
 * block (k <= 256) come here, and they give that kernel's bits.  The
 * epilogue (bias, residual, activation) follows on each block while it is
 * in cache, with gemm.c's expressions.  SHARDNET_CPU_SGEMM=own (or blas)
 * leaves libxsmm out.
 */
#include <config.h>

#include <pthread.h>
#include <stdint.h>

#include "core/config.h"
#include "cpu_kernels.h"

#if SN_HAVE_LIBXSMM
#include <libxsmm.h>
#endif

/* Columns of C per kernel call: four vectors. */
#define PIX 64
/* The K block of the AVX-512 kernel: one block, the same sums. */
#define XSMM_MAX_K 256

#if SN_HAVE_LIBXSMM
static pthread_once_t xsmm_once = PTHREAD_ONCE_INIT;
static int xsmm_on;

static void xsmm_start(void)
{
    xsmm_on = sn_config_env()->sgemm == SN_SGEMM_AUTO;
    if (xsmm_on)
        libxsmm_init();
}
#endif

int sn_cpu_sgemm_xsmm_takes(const sn_gemm_desc *d)
{
#if SN_HAVE_LIBXSMM
    pthread_once(&xsmm_once, xsmm_start);
    return xsmm_on && !d->trans_a && !d->trans_b && d->alpha == 1.0f &&
           d->beta == 0.0f && d->k > 0 && d->k <= XSMM_MAX_K && d->m >= 4 &&
           d->n >= PIX && d->m <= INT32_MAX && d->lda <= INT32_MAX &&
           d->ldb <= INT32_MAX && d->ldc <= INT32_MAX;
#else
    (void)d;
    return 0;
#endif
}

#if SN_HAVE_LIBXSMM
/* The kernel for blocks of `cols` columns of d's C. */
static libxsmm_smmfunction kernel_for(const sn_gemm_desc *d, size_t cols)
{
    const libxsmm_blasint m = (libxsmm_blasint)cols;
    const libxsmm_blasint n = (libxsmm_blasint)d->m;
    const libxsmm_blasint k = (libxsmm_blasint)d->k;
    const libxsmm_blasint lda = (libxsmm_blasint)d->ldb;
    const libxsmm_blasint ldb = (libxsmm_blasint)d->lda;
    const libxsmm_blasint ldc = (libxsmm_blasint)d->ldc;
    const float alpha = 1.0f, beta = 0.0f;
    return libxsmm_smmdispatch(m, n, k, &lda, &ldb, &ldc, &alpha, &beta,
                               NULL, NULL);
}
#endif

int sn_cpu_sgemm_xsmm(const sn_gemm_desc *d, const float *a, const float *b,
                      float *c, const float *bias, const float *res)
{
#if SN_HAVE_LIBXSMM
    const size_t blocks = d->n / PIX, tail = d->n % PIX;
    const size_t per_item = blocks + (tail != 0), units = d->batch * per_item;
    const libxsmm_smmfunction full = kernel_for(d, PIX);
    const libxsmm_smmfunction part = tail ? kernel_for(d, tail) : NULL;
    const double work = (double)d->m * (double)d->n * (double)d->k *
                        (double)d->batch;

    if (!full || (tail && !part))
        return 0;
#pragma omp parallel if (work >= 64.0 * 64.0 * 64.0 && units > 1)
    {
        size_t u0, u1;
        sn_cpu_thread_share(units, &u0, &u1);
        for (size_t u = u0; u < u1; u++) {
            const size_t item = u / per_item, blk = u % per_item;
            const size_t c0 = blk * PIX, cols = blk < blocks ? PIX : tail;
            float *cb = c + item * d->stride_c + c0;
            (blk < blocks ? full : part)(b + item * d->stride_b + c0,
                                         a + item * d->stride_a, cb);
            sn_cpu_gemm_epilogue(d, bias,
                                 res ? res + item * d->stride_c + c0 : NULL,
                                 cb, d->m, cols, 0, c0);
        }
    }
    return 1;
#else
    (void)d; (void)a; (void)b; (void)c; (void)bias; (void)res;
    return 0;
#endif
}
