/*
 * The CUDA backend: one sn_device per device the CUDA runtime lists,
 * named cuda:N after the runtime's device number N (as nvidia-smi and
 * CUDA_VISIBLE_DEVICES count them).
 *
 * A machine without an NVIDIA driver, or with a driver and no GPU, has no
 * CUDA devices: discovery appends none and says why in the log (at info
 * level, with the runtime's error name and text), which is not an error.
 *
 * Each device has one stream of its own (non-blocking, so that it never
 * waits on the legacy default stream) and one cuBLAS handle bound to it,
 * both made at its first use: discovery reads the device's properties
 * only, so that a process that runs on other devices never opens the GPU.
 * Kernels and asynchronous copies are enqueued on the stream; blocking
 * copies enqueue and then wait for the stream; synchronize waits for it;
 * events are runtime events recorded on it.  Every entry point first
 * makes the device current for the calling thread, and opens it the
 * first time (sn_cuda_enter).  GEMM goes through cuBLAS (gemm.c), the
 * other kernels are our own (kernels.c, *.cu).
 */
#include <config.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"

static const sn_backend_ops cuda_ops;

/* --- errors ------------------------------------------------------------ */

shardnet_status sn_cuda_status(cudaError_t err)
{
    return err == cudaErrorMemoryAllocation ? SHARDNET_OUT_OF_MEMORY
                                            : SHARDNET_DEVICE_ERROR;
}

/* "DEV: CALL failed: NAME: TEXT", CALL formatted from call and ap. */
static shardnet_status call_failed(const sn_device *dev, shardnet_status st,
                                   const char *name, const char *text,
                                   const char *call, va_list ap)
{
    char what[256];
    vsnprintf(what, sizeof what, call, ap);
    return sn_error(st, "%s: %s failed: %s: %s", dev->info.name, what, name,
                    text);
}

shardnet_status sn_cuda_error(const sn_device *dev, cudaError_t err,
                              const char *call, ...)
{
    /* The runtime keeps the last error until read: read it here, so that a
     * later call that went well does not report this one. */
    (void)cudaGetLastError();
    va_list ap;
    va_start(ap, call);
    shardnet_status st =
        call_failed(dev, sn_cuda_status(err), cudaGetErrorName(err),
                    cudaGetErrorString(err), call, ap);
    va_end(ap);
    return st;
}

shardnet_status sn_cublas_error(const sn_device *dev, cublasStatus_t s,
                                const char *call, ...)
{
    va_list ap;
    va_start(ap, call);
    shardnet_status st = call_failed(
        dev,
        s == CUBLAS_STATUS_ALLOC_FAILED ? SHARDNET_OUT_OF_MEMORY
                                        : SHARDNET_DEVICE_ERROR,
        sn_cublas.status_name(s), sn_cublas.status_string(s), call, ap);
    va_end(ap);
    return st;
}

/* The device's context current for the calling thread. */
static shardnet_status make_current(const sn_device *dev)
{
    const cuda_dev *cd = dev->impl;
    cudaError_t err;
    if (cd->green) /* a partition: its green context */
        return sn_cuda_green_enter(dev);
    err = cudaSetDevice(cd->ordinal);
    if (err != cudaSuccess)
        return sn_cuda_error(dev, err, "cudaSetDevice(%d)", cd->ordinal);
    return SHARDNET_OK;
}

static void keep_pool(int ordinal);

/* The stream and the cuBLAS handle, once, by whichever thread comes
 * first; a failure leaves nothing made, and the next call tries again. */
static shardnet_status open_device_state(const sn_device *dev)
{
    cuda_dev *cd = dev->impl;
    shardnet_status st = SHARDNET_OK;
    cudaError_t err;
    pthread_mutex_lock(&cd->lock);
    if (!atomic_load_explicit(&cd->opened, memory_order_relaxed)) {
        err = cudaStreamCreateWithFlags(&cd->stream, cudaStreamNonBlocking);
        if (err != cudaSuccess) {
            st = sn_cuda_error(dev, err, "cudaStreamCreateWithFlags");
            cd->stream = NULL;
        } else if ((st = sn_cuda_bind_blas((sn_device *)dev)) !=
                   SHARDNET_OK) {
            cudaStreamDestroy(cd->stream);
            (void)cudaGetLastError();
            cd->stream = NULL;
        } else {
            keep_pool(cd->ordinal);
            atomic_store_explicit(&cd->opened, 1, memory_order_release);
            sn_log(SHARDNET_LOG_INFO, "%s: opened (a stream, cuBLAS)",
                   cd->label);
        }
    }
    pthread_mutex_unlock(&cd->lock);
    return st;
}

shardnet_status sn_cuda_enter(const sn_device *dev)
{
    const cuda_dev *cd = dev->impl;
    shardnet_status st = make_current(dev);
    if (st == SHARDNET_OK &&
        !atomic_load_explicit(&cd->opened, memory_order_acquire))
        st = open_device_state(dev);
    return st;
}

int sn_cuda_enter_quietly(const sn_device *dev)
{
    if (make_current(dev) == SHARDNET_OK)
        return 1;
    sn_error_clear();
    return 0;
}

/* --- devices ----------------------------------------------------------- */

void sn_cuda_device_free(sn_device *dev)
{
    cuda_dev *cd = dev ? dev->impl : NULL;

    if (cd) {
        /* Nothing can be reported from here: a device whose driver fails
         * at this point is released as far as it goes. */
        if (atomic_load(&cd->opened) && sn_cuda_enter_quietly(dev)) {
            if (cd->stream)
                cudaStreamSynchronize(cd->stream);
            sn_cuda_lt_free(cd);
            if (cd->blas)
                sn_cublas.destroy(cd->blas);
            if (cd->stream)
                cudaStreamDestroy(cd->stream);
        }
        if (cd->green)
            sn_cuda_green_free(cd);
        (void)cudaGetLastError();
        pthread_mutex_destroy(&cd->lock);
        free(cd);
    }
    free(dev);
}

/* The versions, "CUDA driver 13.0, runtime 13.0", in buf. */
static void versions(char *buf, size_t cap)
{
    int drv = 0, rt = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    snprintf(buf, cap, "CUDA driver %d.%d, runtime %d.%d", drv / 1000,
             drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
}

/* The kernels' scratch memory comes from the device's stream-ordered
 * pool (cu.h, sn_cu_scratch): let the pool keep what is freed rather than
 * give it back to the driver at every synchronize, so that a reduction's
 * scratch costs no allocation after the first.  A device without pools
 * is left as it is (the kernels then allocate plainly). */
static void keep_pool(int ordinal)
{
    cudaMemPool_t pool;
    uint64_t keep = UINT64_MAX;
    if (cudaDeviceGetDefaultMemPool(&pool, ordinal) != cudaSuccess ||
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold,
                                &keep) != cudaSuccess)
        (void)cudaGetLastError();
}

shardnet_status sn_cuda_bind_blas(sn_device *dev)
{
    cuda_dev *cd = dev->impl;
    const char *call = "cublasCreate";
    shardnet_status st = sn_cublas_load(dev);
    cublasStatus_t s;
    if (st != SHARDNET_OK)
        return st;
    s = sn_cublas.create(&cd->blas);
    if (s == CUBLAS_STATUS_SUCCESS) {
        call = "cublasSetStream";
        s = sn_cublas.set_stream(cd->blas, cd->stream);
    } else {
        cd->blas = NULL;
    }
    if (s != CUBLAS_STATUS_SUCCESS)
        return sn_cublas_error(dev, s, "%s", call);
    return SHARDNET_OK;
}

/* Describe device `ordinal` from its properties (its stream and cuBLAS
 * handle come with its first use, sn_cuda_enter). */
static shardnet_status find_device(int ordinal, sn_device **out)
{
    sn_device *dev = calloc(1, sizeof *dev);
    cuda_dev *cd = calloc(1, sizeof *cd);
    shardnet_device_info *info;
    struct cudaDeviceProp prop;
    cudaError_t err;

    *out = NULL;
    if (!dev || !cd || pthread_mutex_init(&cd->lock, NULL) != 0) {
        free(dev);
        free(cd);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "cuda:%d: device state",
                        ordinal);
    }
    dev->ops = &cuda_ops;
    dev->impl = cd;
    cd->ordinal = ordinal;
    info = &dev->info;
    snprintf(info->name, sizeof info->name, "cuda:%d", ordinal);
    info->kind = SHARDNET_DEVICE_CUDA;
    info->index = (unsigned)ordinal;
    info->numa_node = -1;
    snprintf(cd->label, sizeof cd->label, "%s", info->name);

    if ((err = cudaGetDeviceProperties(&prop, ordinal)) != cudaSuccess) {
        shardnet_status st =
            sn_cuda_error(dev, err, "cudaGetDeviceProperties");
        sn_cuda_device_free(dev);
        return st;
    }
    snprintf(info->model, sizeof info->model, "%.*s",
             (int)sizeof info->model - 1, prop.name);
    snprintf(info->vendor, sizeof info->vendor,
             "NVIDIA, compute capability %d.%d", prop.major, prop.minor);
    versions(info->driver, sizeof info->driver);
    info->compute_units = (unsigned)prop.multiProcessorCount;
    info->global_mem = prop.totalGlobalMem;
    /* The runtime sets no limit on one allocation below the memory. */
    info->max_alloc = prop.totalGlobalMem;
    /* An integrated GPU (Jetson) shares the host's memory: its buffers
     * are mapped host memory, and mapping one is a pointer. */
    const char *force = getenv("SHARDNET_CUDA_MAPPED");
    cd->mapped = prop.canMapHostMemory &&
                 (prop.integrated || (force && !strcmp(force, "1")));
    info->host_unified = cd->mapped;
    snprintf(cd->label, sizeof cd->label, "%s (%s)", info->name,
             info->model);

    /* The stream and cuBLAS wait for the device's first use
     * (sn_cuda_enter). */
    sn_log(SHARDNET_LOG_INFO,
           "%s: compute capability %d.%d, %d multiprocessors, %llu MiB%s%s",
           cd->label, prop.major, prop.minor, prop.multiProcessorCount,
           (unsigned long long)(prop.totalGlobalMem >> 20),
           prop.integrated ? ", integrated" : "",
           cd->mapped ? ", buffers in mapped host memory" : "");
    *out = dev;
    return SHARDNET_OK;
}

/*
 * No driver, or no GPU, is a machine without CUDA devices: nothing is
 * appended and the log says why.  A device whose properties cannot be
 * read among working ones is left out with a warning; only running out of
 * host memory is an error.  (One that cannot be opened at its first use
 * fails that use, naming the call.)
 */
static shardnet_status cuda_discover(sn_device_list *list,
                                     const sn_discover_args *args)
{
    int count = 0;
    shardnet_status st = SHARDNET_OK;
    cudaError_t err = cudaGetDeviceCount(&count);

    /* GPUs are not shared out between the processes of a job. */
    (void)args;
    if (err != cudaSuccess) {
        sn_log(SHARDNET_LOG_INFO, "cuda: no device (cudaGetDeviceCount: %s: %s)",
               cudaGetErrorName(err), cudaGetErrorString(err));
        (void)cudaGetLastError();
        return SHARDNET_OK;
    }
    if (count == 0) {
        sn_log(SHARDNET_LOG_INFO,
               "cuda: no device (cudaGetDeviceCount found none)");
        return SHARDNET_OK;
    }
    for (int i = 0; i < count; i++) {
        sn_device *dev;
        st = find_device(i, &dev);
        if (st == SHARDNET_OUT_OF_MEMORY)
            break;
        if (st != SHARDNET_OK) {
            sn_log(SHARDNET_LOG_WARN, "CUDA device left out: %s",
                   shardnet_last_error());
            sn_error_clear();
            st = SHARDNET_OK;
            continue;
        }
        if ((st = sn_device_list_push(list, dev)) != SHARDNET_OK) {
            sn_cuda_device_free(dev);
            break;
        }
    }
    return st;
}

static shardnet_status cuda_synchronize(sn_device *dev)
{
    cuda_dev *cd = dev->impl;
    shardnet_status st;
    cudaError_t err;
    /* A device never used has nothing to wait for, and is not opened for
     * it: a context's end waits for every device it lists. */
    if (!atomic_load_explicit(&cd->opened, memory_order_acquire))
        return SHARDNET_OK;
    if ((st = sn_cuda_enter(dev)) != SHARDNET_OK)
        return st;
    if ((err = cudaStreamSynchronize(cd->stream)) != cudaSuccess)
        return sn_cuda_error(dev, err,
                             "cudaStreamSynchronize (work enqueued since the "
                             "last synchronize)");
    return SHARDNET_OK;
}

/* How far the kernels of the .cu files go in each kernel's variants
 * (backend.h's enums, in order): each switches on its op over all of them.
 * A kernel without variants is supported exactly when its member is set. */
static const int cuda_variants[SN_KERNEL_COUNT] = {
    [SN_KERNEL_BINARY] = SN_BINARY_COUNT,
    [SN_KERNEL_UNARY] = SN_UNARY_COUNT,
    [SN_KERNEL_POOL] = SN_POOL_COUNT,
    [SN_KERNEL_REDUCE] = SN_REDUCE_COUNT,
};

static int cuda_supports(sn_device *dev, sn_kernel k, int variant)
{
    (void)dev;
    return sn_variants_within(cuda_variants, k, variant);
}

static const sn_backend_ops cuda_ops = {
    .abi = SN_BACKEND_ABI,
    .kind = "cuda",
    .device_free = sn_cuda_device_free,
    .buffer_alloc = sn_cuda_buffer_alloc,
    .buffer_free = sn_cuda_buffer_free,
    .buffer_write = sn_cuda_buffer_write,
    .buffer_read = sn_cuda_buffer_read,
    .buffer_map = sn_cuda_buffer_map,
    .buffer_unmap = sn_cuda_buffer_unmap,
    .host_alloc = sn_cuda_host_alloc,
    .host_free = sn_cuda_host_free,
    .partition = sn_cuda_partition,
    .buffer_write_async = sn_cuda_buffer_write_async,
    .buffer_read_async = sn_cuda_buffer_read_async,
    .gemm = sn_cuda_gemm,
    .binary = sn_cuda_binary,
    .unary = sn_cuda_unary,
    .where = sn_cuda_where,
    .qgemm = sn_cuda_qgemm,
    .copy = sn_cuda_copy,
    .gather = sn_cuda_gather,
    .im2col = sn_cuda_im2col,
    .pool = sn_cuda_pool,
    .dwconv = sn_cuda_dwconv,
    .softmax = sn_cuda_softmax,
    .reduce = sn_cuda_reduce,
    .layernorm = sn_cuda_layernorm,
    .topk = sn_cuda_topk,
    .scan = sn_cuda_scan,
    .resample = sn_cuda_resample,
    .grid_sample = sn_cuda_grid_sample,
    .roi_align = sn_cuda_roi_align,
    .rnn_cell = sn_cuda_rnn_cell,
    .supports = cuda_supports,
    .synchronize = cuda_synchronize,
    .event_record = sn_cuda_event_record,
    .event_wait = sn_cuda_event_wait,
    .event_query = sn_cuda_event_query,
    .event_free = sn_cuda_event_free,
};

const sn_backend sn_cuda_backend = {
    .abi = SN_BACKEND_ABI,
    .kind = "cuda",
    .discover = cuda_discover,
};
