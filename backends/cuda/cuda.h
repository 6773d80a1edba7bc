/*
 * The CUDA backend's own declarations, shared by its files and seen
 * nowhere else: a device's state, its buffers and events, and the helpers
 * that turn a CUDA or cuBLAS failure into an error naming the call.
 *
 *   cuda.c     discovery, a device's life, synchronize, the ops table
 *   buffer.c   buffers, their copies (blocking and on the stream); events
 *   gemm.c     GEMM: the product through cuBLAS, then its epilogue
 *   lt.c       GEMM with a bias alone: through cuBLASLt's epilogue
 *   blas.c     cuBLAS and cuBLASLt, loaded when the first device is opened
 *   kernels.c  the other kernel members, each a launcher of kernels.h
 *   partition.c  partitions of a GPU's multiprocessors (green contexts)
 *   *.cu       those launchers and their kernels (cu.h: the rules)
 */
#ifndef SN_CUDA_BACKEND_H
#define SN_CUDA_BACKEND_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

/* cublasLt.h declares a function without a prototype (f(), not f(void)),
 * which -Werror=strict-prototypes would refuse in a header not ours. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cublasLt.h>
#pragma GCC diagnostic pop
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "backend/backend.h"
#include "core/error.h"

typedef struct cuda_dev {
    int ordinal;         /* the runtime's device number */
    cudaStream_t stream; /* the device's one in-order stream */
    cublasHandle_t blas; /* bound to stream */
    char label[192];     /* "cuda:0 (device name)", for messages */
    /* Guards the cuBLAS handle (not to be used by two threads at once)
     * and the device's opening. */
    pthread_mutex_t lock;
    /* Set once the stream and the cuBLAS handle are made: at the device's
     * first use (sn_cuda_enter), not at discovery, so that a process that
     * lists a GPU and runs on other devices gives it no context, no
     * stream and no cuBLAS (blas.c: 0.4 s and 200 MB). */
    atomic_int opened;
    /* A partition (partition.c): its green context (a CUgreenCtx) and
     * that as a CUcontext, made current instead of the device's primary
     * context; NULL for a whole device. */
    void *green, *green_ctx;
    /* Buffers in mapped pinned host memory, which the GPU reads and
     * writes over its link: an integrated GPU's (its memory is the
     * host's), or any GPU's with SHARDNET_CUDA_MAPPED=1 (to test this
     * path on a discrete GPU; slow there).  Mapping such a buffer is then
     * a pointer, no copy, and the device counts as host_unified. */
    int mapped;
    /* cuBLASLt's handle and the products planned for it (lt.c), made at
     * the first GEMM that it serves; NULL before. */
    struct sn_cuda_lt *lt;
} cuda_dev;

/* A buffer: where mapped, the host's pointer to it beside the device's
 * (buf.handle); NULL for device memory. */
typedef struct cuda_buf {
    sn_buffer pub;
    void *host;
} cuda_buf;

/* An event: the public part first, then the runtime's event, recorded on
 * the device's stream. */
typedef struct cuda_marker {
    sn_event pub;
    cudaEvent_t ev;
} cuda_marker;

/* A view's first element as a device pointer (buf->handle is the
 * cudaMalloc'd memory; offsets count floats). */
static inline float *cuda_ptr(sn_view v)
{
    return (float *)v.buf->handle + v.offset;
}

/* cuBLAS's functions, loaded on first use (blas.c says why): set once
 * sn_cublas_load has succeeded, which opening a device does first. */
typedef struct sn_cublas_fns {
    __typeof__(&cublasCreate) create;
    __typeof__(&cublasDestroy) destroy;
    __typeof__(&cublasSetStream) set_stream;
    __typeof__(&cublasSgemm) sgemm;
    __typeof__(&cublasSgemmStridedBatched) sgemm_strided_batched;
    __typeof__(&cublasGetStatusName) status_name;
    __typeof__(&cublasGetStatusString) status_string;
} sn_cublas_fns;
extern sn_cublas_fns sn_cublas;
/* Load cuBLAS once for the process; an error names dev and what failed. */
shardnet_status sn_cublas_load(const sn_device *dev);

/* cuBLASLt's functions, the same way, set once sn_cublaslt_load has
 * returned 1; 0: cuBLASLt is not to be used (not found, or
 * SHARDNET_CUDA_LT=0; the log says which, once). */
typedef struct sn_cublaslt_fns {
    __typeof__(&cublasLtCreate) create;
    __typeof__(&cublasLtDestroy) destroy;
    __typeof__(&cublasLtMatmulDescCreate) desc_create;
    __typeof__(&cublasLtMatmulDescDestroy) desc_destroy;
    __typeof__(&cublasLtMatmulDescSetAttribute) desc_set;
    __typeof__(&cublasLtMatrixLayoutCreate) layout_create;
    __typeof__(&cublasLtMatrixLayoutDestroy) layout_destroy;
    __typeof__(&cublasLtMatmulPreferenceCreate) pref_create;
    __typeof__(&cublasLtMatmulPreferenceDestroy) pref_destroy;
    __typeof__(&cublasLtMatmulPreferenceSetAttribute) pref_set;
    __typeof__(&cublasLtMatmulAlgoGetHeuristic) heuristic;
    __typeof__(&cublasLtMatmul) matmul;
} sn_cublaslt_fns;
extern sn_cublaslt_fns sn_cublaslt;
int sn_cublaslt_load(void);

/* The status a runtime error maps to: out of memory, or a device error. */
shardnet_status sn_cuda_status(cudaError_t err);
/* An error for dev: "cuda:0: <call> failed: cudaErrorX: its description",
 * call being printf's format and arguments.  Also clears the runtime's
 * last error, so that it is not reported again by an unrelated call. */
shardnet_status sn_cuda_error(const sn_device *dev, cudaError_t err,
                              const char *call, ...)
    SN_PRINTF(3, 4);
/* The same for a cuBLAS status (cublasGetStatusName, ...String). */
shardnet_status sn_cublas_error(const sn_device *dev, cublasStatus_t s,
                                const char *call, ...)
    SN_PRINTF(3, 4);
/* Make dev the calling thread's current device (the runtime's current
 * device is per thread, and a split drives each device from a thread of
 * its own); an error names the device. */
shardnet_status sn_cuda_enter(const sn_device *dev);
/* The same where nothing can be reported (releasing what dev holds): 1
 * when dev is current, else 0 with the error dropped. */
int sn_cuda_enter_quietly(const sn_device *dev);

/* cuda.c: release a device, whole or a partition (the ops table's
 * device_free); give dev (its stream made) a cuBLAS handle on its stream,
 * loading cuBLAS first. */
void sn_cuda_device_free(sn_device *dev);
shardnet_status sn_cuda_bind_blas(sn_device *dev);

/* partition.c: a partition of `count` multiprocessors from `first` (the
 * ops table's partition); make a partition's green context current on the
 * calling thread; destroy it (its stream and handle gone already). */
shardnet_status sn_cuda_partition(sn_device *whole, unsigned first,
                                  unsigned count, const char *name,
                                  sn_device **out);
shardnet_status sn_cuda_green_enter(const sn_device *dev);
void sn_cuda_green_free(cuda_dev *cd);

/* The ops table's members, by file. */
shardnet_status sn_cuda_buffer_alloc(sn_device *dev, size_t bytes,
                                     sn_buffer **out);
void sn_cuda_buffer_free(sn_buffer *buf);
shardnet_status sn_cuda_buffer_write(sn_buffer *buf, size_t offset,
                                     const void *src, size_t bytes);
shardnet_status sn_cuda_buffer_read(sn_buffer *buf, size_t offset, void *dst,
                                    size_t bytes);
shardnet_status sn_cuda_buffer_map(sn_buffer *buf, size_t offset,
                                   size_t bytes, int flags, void **ptr);
shardnet_status sn_cuda_buffer_unmap(sn_buffer *buf, void *ptr);
void *sn_cuda_host_alloc(sn_device *dev, size_t bytes);
void sn_cuda_host_free(sn_device *dev, void *ptr);
shardnet_status sn_cuda_buffer_write_async(sn_buffer *buf, size_t offset,
                                           const void *src, size_t bytes);
shardnet_status sn_cuda_buffer_read_async(sn_buffer *buf, size_t offset,
                                          void *dst, size_t bytes);
shardnet_status sn_cuda_event_record(sn_device *dev, sn_event **out);
shardnet_status sn_cuda_event_wait(sn_event *ev);
shardnet_status sn_cuda_event_query(sn_event *ev, int *done);
void sn_cuda_event_free(sn_event *ev);

shardnet_status sn_cuda_gemm(sn_device *dev, const sn_gemm_desc *d);
/* lt.c: the GEMM d, product and epilogue, through cuBLASLt where it
 * serves d (*done set; dev current, its lock held), else nothing done
 * (*done 0, SHARDNET_OK) and the cuBLAS path is for the caller; and
 * what a device's cuBLASLt holds released (dev current). */
shardnet_status sn_cuda_lt_gemm(sn_device *dev, const sn_gemm_desc *d,
                                int *done);
void sn_cuda_lt_free(cuda_dev *cd);
/* kernels.c: the members run by kernels of our own (kernels.h), and
 * what becomes of a launch of kernel k (variant: its op, or
 * SN_VARIANT_ANY): err (a cudaError_t) as an error naming the kernel,
 * and with SHARDNET_CUDA_CHECK=1 the kernel waited for at once. */
shardnet_status sn_cuda_launched(sn_device *dev, sn_kernel k, int variant,
                                 int err);
shardnet_status sn_cuda_binary(sn_device *dev, const sn_binary_desc *d);
shardnet_status sn_cuda_unary(sn_device *dev, const sn_unary_desc *d);
shardnet_status sn_cuda_where(sn_device *dev, const sn_where_desc *d);
shardnet_status sn_cuda_qgemm(sn_device *dev, const sn_qgemm_desc *d);
shardnet_status sn_cuda_copy(sn_device *dev, const sn_copy_desc *d);
shardnet_status sn_cuda_gather(sn_device *dev, const sn_gather_desc *d);
shardnet_status sn_cuda_im2col(sn_device *dev, const sn_im2col_desc *d);
shardnet_status sn_cuda_pool(sn_device *dev, const sn_pool_desc *d);
shardnet_status sn_cuda_dwconv(sn_device *dev, const sn_dwconv_desc *d);
shardnet_status sn_cuda_softmax(sn_device *dev, const sn_softmax_desc *d);
shardnet_status sn_cuda_reduce(sn_device *dev, const sn_reduce_desc *d);
shardnet_status sn_cuda_layernorm(sn_device *dev,
                                  const sn_layernorm_desc *d);
shardnet_status sn_cuda_topk(sn_device *dev, const sn_topk_desc *d);
shardnet_status sn_cuda_scan(sn_device *dev, const sn_scan_desc *d);
shardnet_status sn_cuda_resample(sn_device *dev, const sn_resample_desc *d);
shardnet_status sn_cuda_grid_sample(sn_device *dev,
                                    const sn_grid_sample_desc *d);
shardnet_status sn_cuda_roi_align(sn_device *dev, const sn_roi_align_desc *d);
shardnet_status sn_cuda_rnn_cell(sn_device *dev, const sn_rnn_cell_desc *d);

#endif /* SN_CUDA_BACKEND_H */
