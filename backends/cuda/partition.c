/*
 * Partitions of a GPU: `count` of its multiprocessors from `first` on, a
 * device of its own, as a green context (the driver's, CUDA 12.5 and
 * later: a green context's own streams came then).  The driver splits
 * the device's multiprocessors into groups of the size its architecture
 * allows (cuDevSmResourceSplitByCount); a partition is a run of whole
 * groups, made one descriptor, then a green context with a stream of its
 * own, and a cuBLAS handle on that stream.
 * Memory is the device's (a green context shares its primary context's),
 * so a partition's buffers and the whole device's are alike; its kernels
 * run on its multiprocessors only.  A partition's calls run with its
 * green context current on the calling thread (sn_cuda_green_enter)
 * instead of the primary context.
 *
 * The driver's functions come from the runtime
 * (cudaGetDriverEntryPointByVersion), so that nothing links the driver
 * library: a driver too old for green contexts refuses the partition
 * with a message that says so.
 */
#include <config.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda.h> /* the driver API's types, from the toolkit */

#include "cuda.h"

#if CUDART_VERSION >= 12050

/* The driver functions a partition needs. */
static struct {
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*get_resource)(CUdevice, CUdevResource *, CUdevResourceType);
    CUresult (*split)(CUdevResource *, unsigned *, const CUdevResource *,
                      CUdevResource *, unsigned, unsigned);
    CUresult (*describe)(CUdevResourceDesc *, CUdevResource *, unsigned);
    CUresult (*create)(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned);
    CUresult (*destroy)(CUgreenCtx);
    CUresult (*as_ctx)(CUcontext *, CUgreenCtx);
    CUresult (*stream_create)(CUstream *, CUgreenCtx, unsigned, int);
    CUresult (*set_current)(CUcontext);
    CUresult (*error_name)(CUresult, const char **);
} drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;
static const char *drv_missing; /* the first function not found, or NULL */

/* Each function at the driver version it came with (cudaTypedefs.h names
 * them so: PFN_cuGreenCtxStreamCreate_v12050): asked for at an older
 * version, the runtime answers that the driver has none. */
static void drv_load(void)
{
    const struct {
        const char *name;
        void **fn;
        unsigned since;
    } fns[] = {
        {"cuDeviceGet", (void **)&drv.device_get, 2000},
        {"cuDeviceGetDevResource", (void **)&drv.get_resource, 12040},
        {"cuDevSmResourceSplitByCount", (void **)&drv.split, 12040},
        {"cuDevResourceGenerateDesc", (void **)&drv.describe, 12040},
        {"cuGreenCtxCreate", (void **)&drv.create, 12040},
        {"cuGreenCtxDestroy", (void **)&drv.destroy, 12040},
        {"cuCtxFromGreenCtx", (void **)&drv.as_ctx, 12040},
        {"cuGreenCtxStreamCreate", (void **)&drv.stream_create, 12050},
        {"cuCtxSetCurrent", (void **)&drv.set_current, 4000},
        {"cuGetErrorName", (void **)&drv.error_name, 6000},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        enum cudaDriverEntryPointQueryResult found;
        if (cudaGetDriverEntryPointByVersion(fns[i].name, fns[i].fn,
                                             fns[i].since, cudaEnableDefault,
                                             &found) != cudaSuccess ||
            found != cudaDriverEntryPointSuccess || !*fns[i].fn) {
            (void)cudaGetLastError();
            drv_missing = fns[i].name;
            return;
        }
    }
}

/* "DEV: CALL failed: CUDA_ERROR_X" for a driver call's result. */
static shardnet_status drv_error(const sn_device *dev, CUresult r,
                                 const char *call)
{
    const char *name = NULL;
    if (drv.error_name(r, &name) != CUDA_SUCCESS || !name)
        name = "an unknown driver error";
    return sn_error(r == CUDA_ERROR_OUT_OF_MEMORY ? SHARDNET_OUT_OF_MEMORY
                                                  : SHARDNET_DEVICE_ERROR,
                    "%s: %s failed: %s", dev->info.name, call, name);
}

shardnet_status sn_cuda_green_enter(const sn_device *dev)
{
    const cuda_dev *cd = dev->impl;
    CUresult r = drv.set_current((CUcontext)cd->green_ctx);
    return r == CUDA_SUCCESS ? SHARDNET_OK
                             : drv_error(dev, r, "cuCtxSetCurrent");
}

void sn_cuda_green_free(cuda_dev *cd)
{
    drv.destroy((CUgreenCtx)cd->green);
    cd->green = cd->green_ctx = NULL;
}

/* The device's multiprocessors split into the driver's smallest groups,
 * in res (room for cap); their number in *groups. */
static shardnet_status split_all(const sn_device *dev, CUdevice cudev,
                                 CUdevResource *whole, CUdevResource *res,
                                 unsigned cap, unsigned *groups)
{
    CUresult r = drv.get_resource(cudev, whole, CU_DEV_RESOURCE_TYPE_SM);
    unsigned n = 0;
    if (r != CUDA_SUCCESS)
        return drv_error(dev, r, "cuDeviceGetDevResource");
    /* minCount 1: the driver rounds it up to the least it allows */
    if ((r = drv.split(NULL, &n, whole, NULL, 0, 1)) != CUDA_SUCCESS)
        return drv_error(dev, r, "cuDevSmResourceSplitByCount (counting)");
    if (n == 0 || n > cap)
        return sn_error(SHARDNET_UNSUPPORTED,
                        "%s: the driver splits its %u multiprocessors into "
                        "%u groups (1 to %u supported)",
                        dev->info.name, whole->sm.smCount, n, cap);
    if ((r = drv.split(res, &n, whole, NULL, 0, 1)) != CUDA_SUCCESS)
        return drv_error(dev, r, "cuDevSmResourceSplitByCount");
    *groups = n;
    return SHARDNET_OK;
}

shardnet_status sn_cuda_partition(sn_device *whole, unsigned first,
                                  unsigned count, const char *name,
                                  sn_device **out)
{
    enum { MAX_GROUPS = 1024 };
    const cuda_dev *of = whole->impl;
    CUdevResource all, *res = NULL;
    CUdevResourceDesc desc;
    CUgreenCtx green = NULL;
    CUcontext ctx = NULL;
    CUstream stream = NULL;
    CUdevice cudev;
    CUresult r;
    unsigned groups = 0, size;
    sn_device *dev = NULL;
    cuda_dev *cd = NULL;
    shardnet_status st;

    *out = NULL;
    pthread_once(&drv_once, drv_load);
    if (drv_missing)
        return sn_error(SHARDNET_UNSUPPORTED,
                        "%s cannot be cut into partitions: its driver has "
                        "no %s (green contexts need CUDA 12.5 or later)",
                        whole->info.name, drv_missing);
    if ((st = sn_cuda_enter(whole)) != SHARDNET_OK)
        return st;
    if ((r = drv.device_get(&cudev, of->ordinal)) != CUDA_SUCCESS)
        return drv_error(whole, r, "cuDeviceGet");
    if (!(res = calloc(MAX_GROUPS, sizeof *res)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s: partition",
                        whole->info.name);
    st = split_all(whole, cudev, &all, res, MAX_GROUPS, &groups);
    size = st == SHARDNET_OK ? res[0].sm.smCount : 0;
    /* Whole groups only, within those the split made (its remainder, if
     * any, the driver does not vouch for). */
    if (st == SHARDNET_OK &&
        (size == 0 || first % size || count % size ||
         (first + count) / size > groups))
        st = sn_error(SHARDNET_UNSUPPORTED,
                      "%s cannot be cut at multiprocessors %u to %u: the "
                      "driver cuts it in groups of %u (%u groups of its "
                      "%u), so a partition's first and count must be "
                      "multiples of %u within the first %u",
                      whole->info.name, first, first + count - 1, size,
                      groups, all.sm.smCount, size, groups * size);
    if (st == SHARDNET_OK &&
        (r = drv.describe(&desc, res + first / size, count / size)) !=
            CUDA_SUCCESS)
        st = drv_error(whole, r, "cuDevResourceGenerateDesc");
    free(res);
    if (st == SHARDNET_OK &&
        (r = drv.create(&green, desc, cudev, CU_GREEN_CTX_DEFAULT_STREAM)) !=
            CUDA_SUCCESS)
        st = drv_error(whole, r, "cuGreenCtxCreate");
    if (st == SHARDNET_OK &&
        (r = drv.as_ctx(&ctx, green)) != CUDA_SUCCESS)
        st = drv_error(whole, r, "cuCtxFromGreenCtx");
    if (st == SHARDNET_OK &&
        (r = drv.stream_create(&stream, green, CU_STREAM_NON_BLOCKING, 0)) !=
            CUDA_SUCCESS)
        st = drv_error(whole, r, "cuGreenCtxStreamCreate");
    if (st == SHARDNET_OK &&
        (!(dev = calloc(1, sizeof *dev)) || !(cd = calloc(1, sizeof *cd)) ||
         pthread_mutex_init(&cd->lock, NULL) != 0))
        st = sn_error(SHARDNET_OUT_OF_MEMORY, "%s: partition",
                      whole->info.name);
    if (st != SHARDNET_OK) {
        if (stream && drv.set_current(ctx) == CUDA_SUCCESS)
            cudaStreamDestroy((cudaStream_t)stream);
        if (green)
            drv.destroy(green);
        free(cd);
        free(dev);
        (void)cudaGetLastError();
        return st;
    }
    dev->ops = whole->ops;
    dev->impl = cd;
    dev->info = whole->info;
    snprintf(dev->info.name, sizeof dev->info.name, "%s", name);
    dev->info.compute_units = count;
    cd->ordinal = of->ordinal;
    cd->mapped = of->mapped;
    cd->stream = (cudaStream_t)stream;
    cd->green = green;
    cd->green_ctx = ctx;
    atomic_store(&cd->opened, 1); /* its stream is made; its cuBLAS next */
    snprintf(cd->label, sizeof cd->label, "%s (%u multiprocessors of %.96s)",
             name, count, whole->info.model);
    if ((st = sn_cuda_green_enter(dev)) != SHARDNET_OK ||
        (st = sn_cuda_bind_blas(dev)) != SHARDNET_OK) {
        sn_cuda_device_free(dev);
        return st;
    }
    *out = dev;
    return SHARDNET_OK;
}

#else /* a toolkit without the runtime's driver entry points */

shardnet_status sn_cuda_green_enter(const sn_device *dev)
{
    return sn_error(SHARDNET_INTERNAL, "%s: no green contexts",
                    dev->info.name);
}

void sn_cuda_green_free(cuda_dev *cd)
{
    (void)cd;
}

shardnet_status sn_cuda_partition(sn_device *whole, unsigned first,
                                  unsigned count, const char *name,
                                  sn_device **out)
{
    (void)first;
    (void)count;
    (void)name;
    *out = NULL;
    return sn_error(SHARDNET_UNSUPPORTED,
                    "%s cannot be cut into partitions: shardnet was built "
                    "with a CUDA toolkit older than 12.5",
                    whole->info.name);
}

#endif
