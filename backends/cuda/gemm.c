/*
 * The CUDA backend's GEMM, all through cuBLAS on the device's stream: the
 * product (cublasSgemm, or cublasSgemmStridedBatched for a batch), then
 * the epilogue's bias as a rank-one product by a column of ones and its
 * residual by cublasSgeam.  The fused activation (ReLU, ReLU6) needs a
 * kernel of our own (or cuBLASLt's epilogues) and is refused, before
 * anything runs, with a message that says so.
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

/* At least len ones in cd->ones (the device's lock held). */
static shardnet_status ensure_ones(sn_device *dev, size_t len)
{
    cuda_dev *cd = dev->impl;
    float *host, *mem = NULL;
    cudaError_t err;

    if (cd->ones_len >= len)
        return SHARDNET_OK;
    if (!(host = malloc(len * sizeof *host)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s: gemm bias ones",
                        dev->info.name);
    for (size_t i = 0; i < len; i++)
        host[i] = 1.0f;
    err = cudaMalloc((void **)&mem, len * sizeof *mem);
    if (err == cudaSuccess)
        err = cudaMemcpyAsync(mem, host, len * sizeof *mem,
                              cudaMemcpyHostToDevice, cd->stream);
    /* The host copy is freed below: wait until it has been read. */
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(cd->stream);
    free(host);
    if (err != cudaSuccess) {
        if (mem)
            cudaFree(mem);
        return sn_cuda_error(dev, err, "the gemm bias's column of %zu ones",
                             len);
    }
    if (cd->ones)
        cudaFree(cd->ones); /* waits for the work that may read it */
    cd->ones = mem;
    cd->ones_len = len;
    return SHARDNET_OK;
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

/* C += bias in every batch item: C^T (n x m) += bias ones^T for a bias
 * of n (one per column of C), or ones bias^T for one of m (bias_rows), a
 * product with k = 1 whose every term is bias times one, so the sums are
 * the plain float additions of the reference. */
static shardnet_status add_bias(sn_device *dev, const sn_gemm_desc *d)
{
    cuda_dev *cd = dev->impl;
    const float one = 1.0f;
    int m = (int)d->m, n = (int)d->n;
    shardnet_status st = ensure_ones(dev, d->m > d->n ? d->m : d->n);
    const float *left, *right;
    cublasStatus_t s;

    if (st != SHARDNET_OK)
        return st;
    left = d->bias_rows ? cd->ones : cuda_ptr(d->bias);  /* n x 1 */
    right = d->bias_rows ? cuda_ptr(d->bias) : cd->ones; /* 1 x m */
    s = sn_cublas.sgemm_strided_batched(cd->blas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, 1,
                                  &one, left, n, 0, right, 1, 0, &one,
                                  cuda_ptr(d->c), (int)d->ldc,
                                  (long long)d->stride_c, (int)d->batch);
    if (s != CUBLAS_STATUS_SUCCESS)
        return sn_cublas_error(dev, s,
                               "cublasSgemmStridedBatched adding the bias "
                               "(m %zu, n %zu, batch %zu)",
                               d->m, d->n, d->batch);
    return SHARDNET_OK;
}

/* C += res, laid out as C, one cublasSgeam per batch item (in place:
 * cuBLAS allows C to be its first operand with the same leading
 * dimension and no transpose). */
static shardnet_status add_residual(sn_device *dev, const sn_gemm_desc *d)
{
    cuda_dev *cd = dev->impl;
    const float one = 1.0f;
    for (size_t b = 0; b < d->batch; b++) {
        float *c = cuda_ptr(d->c) + b * d->stride_c;
        const float *r = cuda_ptr(d->res) + b * d->stride_c;
        cublasStatus_t s = sn_cublas.sgeam(
            cd->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)d->n, (int)d->m, &one, c,
            (int)d->ldc, &one, r, (int)d->ldc, c, (int)d->ldc);
        if (s != CUBLAS_STATUS_SUCCESS)
            return sn_cublas_error(dev, s,
                                   "cublasSgeam adding the residual (m %zu, "
                                   "n %zu, batch item %zu)",
                                   d->m, d->n, b);
    }
    return SHARDNET_OK;
}

shardnet_status sn_cuda_gemm(sn_device *dev, const sn_gemm_desc *d)
{
    cuda_dev *cd = dev->impl;
    shardnet_status st;

    /* Refused before anything runs, so that C is left as it was. */
    if (d->act != SN_ACT_NONE)
        return sn_error(SHARDNET_UNSUPPORTED,
                        "gemm on %s: a fused %s is not supported yet on CUDA "
                        "devices (it needs a kernel of its own, issue 18)",
                        dev->info.name,
                        d->act == SN_ACT_RELU6 ? "ReLU6" : "ReLU");
    if ((st = check_sizes(dev, d)) != SHARDNET_OK)
        return st;
    if (d->m == 0 || d->n == 0)
        return SHARDNET_OK;
    if ((st = sn_cuda_enter(dev)) != SHARDNET_OK)
        return st;
    pthread_mutex_lock(&cd->lock);
    st = product(dev, d);
    if (st == SHARDNET_OK && d->bias.buf)
        st = add_bias(dev, d);
    if (st == SHARDNET_OK && d->res.buf)
        st = add_residual(dev, d);
    pthread_mutex_unlock(&cd->lock);
    return st;
}
