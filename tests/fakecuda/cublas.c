/*
 * A fake cuBLAS (libcublas.so.13) for the fake CUDA toolkit (runtime.c):
 * the calls backends/cuda/blas.c loads, with cuBLAS's column-major
 * semantics and its argument checks (CUBLAS_STATUS_INVALID_VALUE for a
 * leading dimension too small for its matrix), each product enqueued on
 * the handle's stream and computed by a plain loop when the stream runs.
 */
#include <stdlib.h>

#include <cublas_api.h>

#include "sn_fakecuda.h"

#define SN_EXPORT __attribute__((visibility("default")))

struct cublasContext {
    cudaStream_t stream;
};

SN_EXPORT cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    if (!(*handle = calloc(1, sizeof **handle)))
        return CUBLAS_STATUS_ALLOC_FAILED;
    return CUBLAS_STATUS_SUCCESS;
}

SN_EXPORT cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}

SN_EXPORT cublasStatus_t cublasSetStream_v2(cublasHandle_t handle,
                                            cudaStream_t stream)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}

SN_EXPORT const char *cublasGetStatusName(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

SN_EXPORT const char *cublasGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    default: return "unknown error";
    }
}

/* One batch of C = alpha op(A) op(B) + beta C, column-major, the
 * operands as device pointers. */
typedef struct gemm_job {
    int ta, tb, m, n, k, lda, ldb, ldc, batch;
    long long sa, sb, sc;
    float alpha, beta;
    const float *a, *b;
    float *c;
} gemm_job;

static void run_gemm(void *arg)
{
    gemm_job *j = arg;
    const float *a0 = sn_fake_cuda_host_address(j->a);
    const float *b0 = sn_fake_cuda_host_address(j->b);
    float *c0 = sn_fake_cuda_host_address(j->c);
    for (int t = 0; t < j->batch; t++) {
        const float *a = a0 + t * j->sa, *b = b0 + t * j->sb;
        float *c = c0 + t * j->sc;
        for (int col = 0; col < j->n; col++)
            for (int row = 0; row < j->m; row++) {
                float acc = 0.0f;
                for (int p = 0; p < j->k; p++) {
                    float x = j->ta ? a[p + (size_t)row * j->lda]
                                    : a[row + (size_t)p * j->lda];
                    float y = j->tb ? b[col + (size_t)p * j->ldb]
                                    : b[p + (size_t)col * j->ldb];
                    acc += x * y;
                }
                float *out = &c[row + (size_t)col * j->ldc];
                /* beta 0: C is not read (a NaN there does not spread) */
                *out = j->beta == 0.0f ? j->alpha * acc
                                       : j->alpha * acc + j->beta * *out;
            }
    }
    free(j);
}

static int at_least(int ld, int rows)
{
    return ld >= (rows > 1 ? rows : 1);
}

static cublasStatus_t enqueue_gemm(cublasHandle_t h, cublasOperation_t ta,
                                   cublasOperation_t tb, int m, int n, int k,
                                   const float *alpha, const float *a,
                                   int lda, long long sa, const float *b,
                                   int ldb, long long sb, const float *beta,
                                   float *c, int ldc, long long sc, int batch)
{
    gemm_job *j;
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if ((ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) ||
        (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T) || m < 0 || n < 0 ||
        k < 0 || batch < 0 || !at_least(lda, ta == CUBLAS_OP_N ? m : k) ||
        !at_least(ldb, tb == CUBLAS_OP_N ? k : n) || !at_least(ldc, m))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0 || batch == 0)
        return CUBLAS_STATUS_SUCCESS;
    if (!(j = malloc(sizeof *j)))
        return CUBLAS_STATUS_ALLOC_FAILED;
    *j = (gemm_job){ta == CUBLAS_OP_T, tb == CUBLAS_OP_T, m, n, k, lda,
                    ldb, ldc, batch, sa, sb, sc, *alpha, *beta, a, b, c};
    if (sn_fake_cuda_enqueue(h->stream, run_gemm, j) != 0) {
        free(j);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    return CUBLAS_STATUS_SUCCESS;
}

SN_EXPORT cublasStatus_t cublasSgemm_v2(cublasHandle_t h,
                                        cublasOperation_t ta,
                                        cublasOperation_t tb, int m, int n,
                                        int k, const float *alpha,
                                        const float *a, int lda,
                                        const float *b, int ldb,
                                        const float *beta, float *c, int ldc)
{
    return enqueue_gemm(h, ta, tb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta,
                        c, ldc, 0, 1);
}

SN_EXPORT cublasStatus_t cublasSgemmStridedBatched(
    cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
    int n, int k, const float *alpha, const float *a, int lda, long long sa,
    const float *b, int ldb, long long sb, const float *beta, float *c,
    int ldc, long long sc, int batch)
{
    return enqueue_gemm(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb,
                        beta, c, ldc, sc, batch);
}
