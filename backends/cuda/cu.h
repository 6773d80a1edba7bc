/*
 * What every .cu file of the CUDA backend includes: the launchers' common
 * shape, the grid they run on, and the host emulation that lets the tests
 * run the same kernel source on a machine without a GPU.
 *
 * The rules every kernel here keeps:
 *
 *   - a thread computes whole outputs of its kernel (an element, a row
 *     of a reduction, or a part of a row into scratch memory that a
 *     kernel after it combines) and loops over them grid-stride
 *     (SN_CU_FOR), so that any grid computes every output once;
 *   - no shared memory, no __syncthreads, no atomics, no warp intrinsics:
 *     an output depends on nothing another thread of its kernel writes;
 *   - kernels and their device functions are static, and their names
 *     start with their file's or kernel's (qgemm_half, pool_max_of): the
 *     emulation compiles every .cu file into one translation unit, where
 *     two files' static names would meet;
 *   - the arithmetic is the C reference's, in the same order, compiled
 *     without FMA contraction (nvcc --fmad=false, Makefile.am), so that
 *     the kernels give the CPU backend's bits wherever the math library
 *     is not involved.
 *
 * Those rules are what make SN_CUDA_EMULATE exact: defined (by
 * tests/cuda_emu_kernels.cc, compiling the .cu files as plain C++), a
 * launch runs every block and thread of a small grid one after the other
 * on the calling thread, device pointers being host pointers.  The
 * emulated grid is small on purpose (3 blocks of 2 threads), so that every
 * grid-stride loop takes more than one turn.
 *
 * With SN_CUDA_FAKE (the fake toolkit's nvcc, tools/cuda-fake.sh) the
 * kernels are the same host C++, but a launch takes its arguments and
 * enqueues the grid on the fake runtime's stream, where it runs when the
 * stream is waited for, and views resolve through the fake runtime's
 * device addresses (tests/fakecuda/).
 *
 * A launcher (kernels.h) takes its descriptor, resolves its views to
 * pointers, launches on the stream it is given and returns the launch's
 * cudaError_t as an int (0: enqueued).
 */
#ifndef SN_CUDA_CU_H
#define SN_CUDA_CU_H

#include <math.h>
#include <stddef.h>

#include "kernels.h"

#if defined(SN_CUDA_EMULATE) || defined(SN_CUDA_FAKE)

#ifdef SN_CUDA_FAKE
#include <cuda_runtime_api.h> /* its qualifiers expand to nothing in C++ */
#include <stdlib.h>
#include <new>
#include <tuple>
#include <sn_fakecuda.h> /* the fake toolkit's (tests/fakecuda/) */
#undef __global__
#undef __device__
#undef __forceinline__
#endif

#define __global__
#define __device__
#define __forceinline__ inline

typedef struct sn_cu_dim {
    unsigned x, y, z;
} sn_cu_dim;
/* Per thread: the fake runtime runs a stream's work on whichever thread
 * waits for it. */
static thread_local sn_cu_dim blockIdx, threadIdx, blockDim, gridDim;

#define SN_CU_THREADS 2u
#define SN_CU_MAX_BLOCKS 3u

/* Every block and thread of the grid, one after the other. */
#define SN_CU_RUN_GRID_(blocks, threads, call)                               \
    do {                                                                      \
        gridDim.x = (blocks);                                                 \
        blockDim.x = (threads);                                               \
        gridDim.y = gridDim.z = blockDim.y = blockDim.z = 1;                  \
        blockIdx.y = blockIdx.z = threadIdx.y = threadIdx.z = 0;              \
        for (blockIdx.x = 0; blockIdx.x < gridDim.x; blockIdx.x++)            \
            for (threadIdx.x = 0; threadIdx.x < blockDim.x; threadIdx.x++)    \
                call;                                                         \
    } while (0)

#ifdef SN_CUDA_EMULATE
/* At once, on the calling thread. */
#define SN_CU_LAUNCH(kernel, blocks, threads, stream, ...)                    \
    ((void)(stream), ({                                                       \
         SN_CU_RUN_GRID_(blocks, threads, kernel(__VA_ARGS__));               \
     }),                                                                      \
     0)
#else
/* The fake runtime's (tests/fakecuda/): the arguments taken now, the
 * grid run when the stream is waited for. */
template <class... P> struct sn_cu_fake_job {
    void (*kernel)(P...);
    std::tuple<P...> args;
    unsigned blocks, threads;
    static void run(void *p)
    {
        sn_cu_fake_job *j = static_cast<sn_cu_fake_job *>(p);
        SN_CU_RUN_GRID_(j->blocks, j->threads, std::apply(j->kernel, j->args));
        j->~sn_cu_fake_job();
        free(p);
    }
};

template <class... P, class... A>
static inline int sn_cu_fake_launch(void *stream, unsigned blocks,
                                    unsigned threads, void (*kernel)(P...),
                                    A... args)
{
    typedef sn_cu_fake_job<P...> job;
    void *mem = malloc(sizeof(job));
    if (!mem)
        return 2; /* cudaErrorMemoryAllocation */
    job *j = new (mem) job{kernel, std::tuple<P...>(args...), blocks, threads};
    int err = sn_fake_cuda_enqueue(stream, job::run, j);
    if (err != 0) {
        j->~job();
        free(mem);
    }
    return err;
}

#define SN_CU_LAUNCH(kernel, blocks, threads, stream, ...)                    \
    sn_cu_fake_launch((void *)(stream), (blocks), (threads), kernel,          \
                      __VA_ARGS__)
#endif

#else /* a real launch */

#include <cuda_runtime.h>

#define SN_CU_THREADS 256u
/* Enough threads to fill the largest GPUs (132 multiprocessors of 2048
 * threads on an H100 or H200) several times over; more outputs loop. */
#define SN_CU_MAX_BLOCKS 4096u

#define SN_CU_LAUNCH(kernel, blocks, threads, stream, ...)                    \
    (kernel<<<(blocks), (threads), 0, (cudaStream_t)(stream)>>>(__VA_ARGS__), \
     (int)cudaGetLastError())

#endif

/* Blocks for n outputs of SN_CU_THREADS threads each, at most
 * SN_CU_MAX_BLOCKS (n > 0). */
static inline unsigned sn_cu_blocks(size_t n)
{
    size_t b = (n + SN_CU_THREADS - 1) / SN_CU_THREADS;
    return b < SN_CU_MAX_BLOCKS ? (unsigned)b : SN_CU_MAX_BLOCKS;
}

/* Launch kernel over n outputs on stream; nothing (and success) when n is
 * 0.  Evaluates to the launch's error as an int. */
#define SN_CU_RUN(kernel, n, stream, ...)                                     \
    ((n) == 0 ? 0                                                             \
              : SN_CU_LAUNCH(kernel, sn_cu_blocks(n), SN_CU_THREADS, stream, \
                             __VA_ARGS__))

/* Every output index i in [0, n) this thread owns. */
#define SN_CU_FOR(i, n)                                                       \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);  \
         i += (size_t)gridDim.x * blockDim.x)

/* A view's first float as a device pointer (the buffer's handle is the
 * device allocation; views count floats). */
static inline float *sn_cu_ptr(sn_view v)
{
#ifdef SN_CUDA_FAKE /* the host memory behind the fake device's address */
    return v.buf ? (float *)sn_fake_cuda_host_address(v.buf->handle) +
                       v.offset
                 : (float *)0;
#else
    return v.buf ? (float *)v.buf->handle + v.offset : (float *)0;
#endif
}

/* Scratch device memory for a launcher's intermediate results, allocated
 * and freed in the stream's order (the runtime's stream-ordered pool):
 * what is enqueued after the allocation may use it, and the free comes
 * after the last of that.  Both evaluate to a cudaError_t as an int. */
#ifdef SN_CUDA_EMULATE
#include <stdlib.h>
static inline int sn_cu_scratch(float **p, size_t floats, void *stream)
{
    (void)stream;
    *p = (float *)malloc(floats ? floats * sizeof(float) : 1);
    return *p ? 0 : 2; /* cudaErrorMemoryAllocation */
}
static inline int sn_cu_scratch_free(float *p, void *stream)
{
    (void)stream;
    free(p);
    return 0;
}
#else
/* A device without stream-ordered memory pools (cudaMallocAsync says
 * cudaErrorNotSupported) gets cudaMalloc and cudaFree instead, the free
 * waiting for the device's work. */
static inline int sn_cu_scratch(float **p, size_t floats, void *stream)
{
    cudaError_t err = cudaMallocAsync((void **)p, floats * sizeof(float),
                                      (cudaStream_t)stream);
    if (err == cudaErrorNotSupported) {
        (void)cudaGetLastError();
        err = cudaMalloc((void **)p, floats * sizeof(float));
    }
#ifdef SN_CUDA_FAKE
    if (err == cudaSuccess)
        *p = (float *)sn_fake_cuda_host_address(*p);
#endif
    return (int)err;
}
static inline int sn_cu_scratch_free(float *p, void *stream)
{
    cudaError_t err = cudaFreeAsync(p, (cudaStream_t)stream);
    if (err == cudaErrorNotSupported) {
        (void)cudaGetLastError();
        err = cudaFree(p);
    }
    return (int)err;
}
#endif

/* A strided operand of an element-wise kernel (sn_binary_desc's,
 * sn_where_desc's shape and strides), by value into a kernel. */
typedef struct sn_cu_dims {
    size_t s[SN_MAX_DIMS];
} sn_cu_dims;

static inline sn_cu_dims sn_cu_dims_of(const size_t *s)
{
    sn_cu_dims r;
    for (size_t d = 0; d < SN_MAX_DIMS; d++)
        r.s[d] = s[d];
    return r;
}

static inline size_t sn_cu_elements(size_t rank, const size_t *shape)
{
    size_t n = 1;
    for (size_t d = 0; d < rank; d++)
        n *= shape[d];
    return n;
}

/* Output element i of a shape (rank dims, C order) as an offset by
 * per-dimension strides: the index peeled into coordinates, innermost
 * first, each times its stride. */
static __device__ inline size_t sn_cu_offset(size_t i, size_t rank,
                                             const size_t *shape,
                                             const size_t *stride)
{
    size_t at = 0;
    for (size_t d = rank; d-- > 0;) {
        size_t q = i / shape[d];
        at += (i - q * shape[d]) * stride[d];
        i = q;
    }
    return at;
}

#endif /* SN_CUDA_CU_H */
