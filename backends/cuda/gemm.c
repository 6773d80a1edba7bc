/*
 * The CUDA backend's GEMM on the device's stream: the product through
 * cuBLAS (cublasSgemm, or cublasSgemmStridedBatched for a batch), then the
 * fused epilogue (bias, residual, ReLU or ReLU6) in one pass of our own
 * kernel over C (elementwise.cu), which adds in the reference's order.
 * A product with a bias alone goes through cuBLASLt, whose epilogue adds
 * the bias without that pass (lt.c, which says why that case only).
 *
 * cuBLAS is column-major and shardnet row-major: a row-major m x n matrix
 * with leading dimension ld is, read column-major, its n x m transpose
 * with the same ld.  So C = op(A) op(B) is computed as
 * C^T = op(B)^T op(A)^T: B first, A second, n and m swapped, each keeping
 * its own transpose flag.
 */
#include <config.h>

#include <limits.h>
#include <stdlib.h>

#include "cuda.h"
#include "kernels.h"

/* cuBLAS counts in int: every size that it is given must fit. */
static shardnet_status check_int(const sn_device *dev, const char *what,
                                 size_t v)
{
    if (v > INT_MAX)
        return sn_error(SHARDNET_UNSUPPORTED,
                        "gemm on %s: %s %zu exceeds cuBLAS's int sizes",
                        dev->info.name, what, v);
    return SHARDNET_OK;
}

static shardnet_status check_sizes(const sn_device *dev, const sn_gemm_desc *d)
{
    const struct {
        const char *what;
        size_t v;
    } sizes[] = {{"m", d->m},     {"n", d->n},     {"k", d->k},
                 {"lda", d->lda}, {"ldb", d->ldb}, {"ldc", d->ldc},
                 {"batch", d->batch}};
    shardnet_status st = SHARDNET_OK;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0] && !st; i++)
        st = check_int(dev, sizes[i].what, sizes[i].v);
    return st;
}

/* C = alpha op(A) op(B) + beta C, every batch item. */
static shardnet_status product(sn_device *dev, const sn_gemm_desc *d)
{
    cuda_dev *cd = dev->impl;
    cublasOperation_t ta = d->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = d->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    int m = (int)d->m, n = (int)d->n, k = (int)d->k;
    cublasStatus_t s;

    if (d->batch == 1) {
        s = sn_cublas.sgemm(cd->blas, tb, ta, n, m, k, &d->alpha, cuda_ptr(d->b),
                        (int)d->ldb, cuda_ptr(d->a), (int)d->lda, &d->beta,
                        cuda_ptr(d->c), (int)d->ldc);
        if (s != CUBLAS_STATUS_SUCCESS)
            return sn_cublas_error(dev, s,
                                   "cublasSgemm (m %zu, n %zu, k %zu)", d->m,
                                   d->n, d->k);
        return SHARDNET_OK;
    }
    /* A stride of 0 reuses one matrix for every item, which cuBLAS
     * allows for the inputs. */
    s = sn_cublas.sgemm_strided_batched(
        cd->blas, tb, ta, n, m, k, &d->alpha, cuda_ptr(d->b), (int)d->ldb,
        (long long)d->stride_b, cuda_ptr(d->a), (int)d->lda,
        (long long)d->stride_a, &d->beta, cuda_ptr(d->c), (int)d->ldc,
        (long long)d->stride_c, (int)d->batch);
    if (s != CUBLAS_STATUS_SUCCESS)
        return sn_cublas_error(dev, s,
                               "cublasSgemmStridedBatched (m %zu, n %zu, "
                               "k %zu, batch %zu)",
                               d->m, d->n, d->k, d->batch);
    return SHARDNET_OK;
}

shardnet_status sn_cuda_gemm(sn_device *dev, const sn_gemm_desc *d)
{
    cuda_dev *cd = dev->impl;
    shardnet_status st;
    int done = 0; /* by cuBLASLt, epilogue and all */

    if ((st = check_sizes(dev, d)) != SHARDNET_OK)
        return st;
    if (d->m == 0 || d->n == 0)
        return SHARDNET_OK;
    if ((st = sn_cuda_enter(dev)) != SHARDNET_OK)
        return st;
    pthread_mutex_lock(&cd->lock);
    st = sn_cuda_lt_gemm(dev, d, &done);
    if (st == SHARDNET_OK && !done)
        st = product(dev, d);
    pthread_mutex_unlock(&cd->lock);
    if (st == SHARDNET_OK)
        st = sn_cuda_launched(dev, SN_KERNEL_GEMM, SN_VARIANT_ANY,
                              done ? cudaSuccess
                                   : sn_cu_gemm_epilogue(d, cd->stream));
    return st;
}
