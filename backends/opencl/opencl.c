/*
 * The OpenCL backend: one sn_device per OpenCL device the ICD loader lists,
 * numbered cl:0, cl:1, ... in platform then device order.
 *
 * Each device has its own context and one in-order command queue.  Kernels
 * are enqueued without waiting and without events; buffer_write/read block
 * and so come after everything enqueued before them; synchronize is
 * clFinish.  GEMM goes to CLBlast (its bias / ReLU epilogue to a kernel),
 * contiguous copies to clEnqueueCopyBuffer, everything else to the kernels
 * of kernels_cl/, whose programs are built per device on first use (through
 * program.c and its binary cache) and whose cl_kernel objects are kept.
 *
 * Kernels index with uint: before narrowing, every index a kernel can form
 * (view offset + elements spanned) is checked against IDX_LIMIT.  The
 * strided copy sums its signed offsets in long instead.
 */
#include <config.h>

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "program.h"

#include <clblast_c.h>

#include "backend/backend.h"
#include "core/error.h"

#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR -1001
#endif

/* Largest index a kernel may form, with room for one local size (at most
 * ROW_WG_MAX) on top so that strided loops never wrap a uint. */
#define IDX_LIMIT ((size_t)CL_UINT_MAX - 1024)
/* Local size of the one-work-group-per-row kernels, at most. */
#define ROW_WG_MAX 256
/* Global sizes of the one-work-item-per-element kernels are multiples of
 * this, so that the driver can pick a sensible local size. */
#define GLOBAL_ROUND 64

enum { PROG_ELEMENTWISE, PROG_REDUCE, PROG_DATA, PROG_CONV, PROG_COUNT };
static const char *const prog_files[PROG_COUNT] = {
    "elementwise.cl", "reduce.cl", "data.cl", "conv.cl"};

/* The four kernels of each binary op (see elementwise.cl). */
enum { BIN_SAME, BIN_SCALAR_A, BIN_SCALAR_B, BIN_BCAST, BIN_VARIANTS };
static const char *const bin_variants[BIN_VARIANTS] = {"same", "scalar_a",
                                                       "scalar_b", "bcast"};

/* The kernels of reduce.cl. */
enum {
    K_SUM_ROW,
    K_MAX_ROW,
    K_SUM_AXIS,
    K_MAX_AXIS,
    K_SOFTMAX_ROW,
    K_SOFTMAX_AXIS,
    K_LAYERNORM_ROW,
    K_REDUCE_COUNT
};
static const char *const reduce_kernels[K_REDUCE_COUNT] = {
    "reduce_sum_row",  "reduce_max_row", "reduce_sum_axis",
    "reduce_max_axis", "softmax_row",    "softmax_axis",
    "layernorm_row"};

/* The ops with one kernel each, one work-item per output element. */
enum {
    K_GEMM_EPILOGUE,
    K_COPY,
    K_WHERE,
    K_GATHER,
    K_IM2COL,
    K_POOL_MAX,
    K_POOL_AVG,
    K_SINGLE_COUNT
};
static const struct {
    int prog;
    const char *name;
} single_kernels[K_SINGLE_COUNT] = {
    [K_GEMM_EPILOGUE] = {PROG_ELEMENTWISE, "gemm_epilogue"},
    [K_COPY] = {PROG_DATA, "copy_strided"},
    [K_WHERE] = {PROG_DATA, "where_bcast"},
    [K_GATHER] = {PROG_DATA, "gather_axis"},
    [K_IM2COL] = {PROG_CONV, "im2col"},
    [K_POOL_MAX] = {PROG_CONV, "pool_max"},
    [K_POOL_AVG] = {PROG_CONV, "pool_avg"},
};

typedef struct cl_dev {
    cl_device_id id;
    cl_context ctx;
    cl_command_queue queue; /* in-order */
    size_t max_alloc;       /* CL_DEVICE_MAX_MEM_ALLOC_SIZE, bytes */
    size_t max_wg;          /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
    int host_unified;
    char label[192]; /* "cl:0 (device name)", for messages */
    /* Guards everything below and the mapping lists of the buffers; held
     * from kernel lookup to enqueue, since kernel arguments are shared. */
    pthread_mutex_t lock;
    cl_program programs[PROG_COUNT];
    cl_kernel binary[BIN_VARIANTS][SN_BINARY_COUNT];
    cl_kernel unary[SN_UNARY_COUNT];
    cl_kernel reduce[K_REDUCE_COUNT];
    size_t reduce_wg[K_REDUCE_COUNT]; /* CL_KERNEL_WORK_GROUP_SIZE */
    cl_kernel single[K_SINGLE_COUNT];
} cl_dev;

/* One outstanding buffer_map. */
typedef struct cl_mapping {
    void *ptr;
    int mapped; /* 0 for a zero-byte mapping, which OpenCL cannot make */
    struct cl_mapping *next;
} cl_mapping;

/* A buffer: the public part first, so that sn_buffer * converts back. */
typedef struct cl_buf {
    sn_buffer pub; /* pub.handle is the cl_mem */
    cl_mapping *maps;
} cl_buf;

static const sn_backend_ops cl_ops;

/* --- small helpers ---------------------------------------------------- */

static shardnet_status cl_status(cl_int err)
{
    return err == CL_OUT_OF_HOST_MEMORY ||
                   err == CL_MEM_OBJECT_ALLOCATION_FAILURE
               ? SHARDNET_OUT_OF_MEMORY
               : SHARDNET_DEVICE_ERROR;
}

#define CLBLAST_STATUS_MAP(X)                                                 \
    X(CLBlastSuccess) X(CLBlastOpenCLCompilerNotAvailable)                    \
    X(CLBlastTempBufferAllocFailure) X(CLBlastOpenCLOutOfResources)           \
    X(CLBlastOpenCLOutOfHostMemory) X(CLBlastOpenCLBuildProgramFailure)       \
    X(CLBlastInvalidValue) X(CLBlastInvalidCommandQueue)                      \
    X(CLBlastInvalidMemObject) X(CLBlastInvalidBinary)                        \
    X(CLBlastInvalidBuildOptions) X(CLBlastInvalidProgram)                    \
    X(CLBlastInvalidProgramExecutable) X(CLBlastInvalidKernelName)            \
    X(CLBlastInvalidKernelDefinition) X(CLBlastInvalidKernel)                 \
    X(CLBlastInvalidArgIndex) X(CLBlastInvalidArgValue)                       \
    X(CLBlastInvalidArgSize) X(CLBlastInvalidKernelArgs)                      \
    X(CLBlastInvalidLocalNumDimensions) X(CLBlastInvalidLocalThreadsTotal)    \
    X(CLBlastInvalidLocalThreadsDim) X(CLBlastInvalidGlobalOffset)            \
    X(CLBlastInvalidEventWaitList) X(CLBlastInvalidEvent)                     \
    X(CLBlastInvalidOperation) X(CLBlastInvalidBufferSize)                    \
    X(CLBlastInvalidGlobalWorkSize) X(CLBlastNotImplemented)                  \
    X(CLBlastInvalidMatrixA) X(CLBlastInvalidMatrixB)                         \
    X(CLBlastInvalidMatrixC) X(CLBlastInvalidVectorX)                         \
    X(CLBlastInvalidVectorY) X(CLBlastInvalidDimension)                       \
    X(CLBlastInvalidLeadDimA) X(CLBlastInvalidLeadDimB)                       \
    X(CLBlastInvalidLeadDimC) X(CLBlastInvalidIncrementX)                     \
    X(CLBlastInvalidIncrementY) X(CLBlastInsufficientMemoryA)                 \
    X(CLBlastInsufficientMemoryB) X(CLBlastInsufficientMemoryC)               \
    X(CLBlastInsufficientMemoryX) X(CLBlastInsufficientMemoryY)               \
    X(CLBlastInsufficientMemoryTemp) X(CLBlastInvalidBatchCount)              \
    X(CLBlastInvalidOverrideKernel) X(CLBlastMissingOverrideParameter)        \
    X(CLBlastInvalidLocalMemUsage) X(CLBlastNoHalfPrecision)                  \
    X(CLBlastNoDoublePrecision) X(CLBlastInvalidVectorScalar)                 \
    X(CLBlastInsufficientMemoryScalar) X(CLBlastDatabaseError)                \
    X(CLBlastUnknownError) X(CLBlastUnexpectedError)

static const char *clblast_name(CLBlastStatusCode s)
{
    switch (s) {
#define SN_CASE_(code)                                                        \
    case code:                                                                \
        return #code;
        CLBLAST_STATUS_MAP(SN_CASE_)
#undef SN_CASE_
    }
    return "unknown CLBlast status";
}

/* off + extent <= IDX_LIMIT: every index of the view fits a kernel uint. */
static int fits_idx(size_t off, size_t extent)
{
    return off <= IDX_LIMIT && extent <= IDX_LIMIT - off;
}

static shardnet_status too_large(const sn_device *dev, const char *what,
                                 const char *name, size_t off, size_t extent)
{
    return sn_error(SHARDNET_INVALID_ARGUMENT,
                    "%s on %s: %s spans elements [%zu, %zu+%zu), beyond the "
                    "%zu that the OpenCL kernels can index",
                    what, dev->info.name, name, off, off, extent, IDX_LIMIT);
}

static size_t round_up(size_t n, size_t m)
{
    return (n + m - 1) / m * m;
}

/* A device string, trimmed of the spaces some drivers pad with. */
static void device_string(cl_device_id id, cl_device_info param, char *dst,
                          size_t cap)
{
    size_t size = 0;
    char *s, *p;

    dst[0] = '\0';
    if (clGetDeviceInfo(id, param, 0, NULL, &size) != CL_SUCCESS ||
        size == 0 || !(s = malloc(size + 1)))
        return;
    if (clGetDeviceInfo(id, param, size, s, NULL) == CL_SUCCESS) {
        s[size] = '\0';
        for (p = s; *p == ' '; p++)
            ;
        snprintf(dst, cap, "%s", p);
        for (size_t n = strlen(dst); n > 0 && dst[n - 1] == ' '; n--)
            dst[n - 1] = '\0';
    }
    free(s);
}

/* Build the program on first use; the lock is held. */
static shardnet_status get_program(cl_dev *cd, int prog)
{
    if (cd->programs[prog])
        return SHARDNET_OK;
    return sn_cl_program_build(cd->ctx, cd->id, cd->label, prog_files[prog],
                               &cd->programs[prog]);
}

/* *slot, created from program `prog` on first use; the lock is held. */
static shardnet_status get_kernel(cl_dev *cd, cl_kernel *slot, int prog,
                                  const char *name)
{
    shardnet_status st;
    cl_int err;

    if (*slot)
        return SHARDNET_OK;
    if ((st = get_program(cd, prog)) != SHARDNET_OK)
        return st;
    *slot = clCreateKernel(cd->programs[prog], name, &err);
    if (!*slot || err != CL_SUCCESS) {
        *slot = NULL;
        return sn_error(SHARDNET_BUILD_ERROR,
                        "%s: kernel %s not found in %s: %s", cd->label, name,
                        prog_files[prog], sn_cl_error_name(err));
    }
    return SHARDNET_OK;
}

/* One kernel argument: clSetKernelArg's size and value (NULL: local). */
typedef struct karg {
    size_t size;
    const void *value;
} karg;

#define ARG(v)                                                                \
    {                                                                         \
        sizeof(v), &(v)                                                       \
    }

/* Set the arguments and enqueue; local 0 lets the driver choose. */
static shardnet_status launch(sn_device *dev, cl_kernel k, const char *what,
                              const karg *args, cl_uint nargs, size_t global,
                              size_t local)
{
    cl_dev *cd = dev->impl;
    cl_int err;

    for (cl_uint i = 0; i < nargs; i++) {
        err = clSetKernelArg(k, i, args[i].size, args[i].value);
        if (err != CL_SUCCESS)
            return sn_error(SHARDNET_DEVICE_ERROR,
                            "%s on %s: clSetKernelArg %u failed: %s", what,
                            dev->info.name, i, sn_cl_error_name(err));
    }
    err = clEnqueueNDRangeKernel(cd->queue, k, 1, NULL, &global,
                                 local ? &local : NULL, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return sn_error(cl_status(err),
                        "%s on %s: clEnqueueNDRangeKernel(global %zu, local "
                        "%zu) failed: %s",
                        what, dev->info.name, global, local,
                        sn_cl_error_name(err));
    return SHARDNET_OK;
}

/* Kernel k of single_kernels over n elements (n <= IDX_LIMIT). */
static shardnet_status run_single(sn_device *dev, int k, const char *what,
                                  const karg *args, cl_uint nargs, size_t n)
{
    cl_dev *cd = dev->impl;
    shardnet_status st;

    pthread_mutex_lock(&cd->lock);
    st = get_kernel(cd, &cd->single[k], single_kernels[k].prog,
                    single_kernels[k].name);
    if (st == SHARDNET_OK)
        st = launch(dev, cd->single[k], what, args, nargs,
                    round_up(n, GLOBAL_ROUND), 0);
    pthread_mutex_unlock(&cd->lock);
    return st;
}

/* --- devices ----------------------------------------------------------- */

/*
 * CLBlast keeps every program it builds in a process-wide cache keyed by
 * context and device, and the cached programs hold their context: without
 * a clear, each context made and freed kept its programs and its context
 * (about 2 MB a cycle on PoCL).  CLBlast can only clear the whole cache,
 * so it is cleared when the last OpenCL device of the process is freed,
 * when no other device can be using it.
 */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t open_devices;

static void cl_device_free(sn_device *dev)
{
    cl_dev *cd = dev ? dev->impl : NULL;

    if (cd) {
        if (cd->queue)
            clFinish(cd->queue);
        for (int v = 0; v < BIN_VARIANTS; v++)
            for (int op = 0; op < SN_BINARY_COUNT; op++)
                if (cd->binary[v][op])
                    clReleaseKernel(cd->binary[v][op]);
        for (int op = 0; op < SN_UNARY_COUNT; op++)
            if (cd->unary[op])
                clReleaseKernel(cd->unary[op]);
        for (int k = 0; k < K_REDUCE_COUNT; k++)
            if (cd->reduce[k])
                clReleaseKernel(cd->reduce[k]);
        for (int k = 0; k < K_SINGLE_COUNT; k++)
            if (cd->single[k])
                clReleaseKernel(cd->single[k]);
        for (int p = 0; p < PROG_COUNT; p++)
            if (cd->programs[p])
                clReleaseProgram(cd->programs[p]);
        if (cd->queue)
            clReleaseCommandQueue(cd->queue);
        if (cd->ctx) {
            clReleaseContext(cd->ctx);
            pthread_mutex_lock(&open_lock);
            if (--open_devices == 0)
                CLBlastClearCache();
            pthread_mutex_unlock(&open_lock);
        }
        pthread_mutex_destroy(&cd->lock);
        free(cd);
    }
    free(dev);
}

/* Describe one device and open its context and queue. */
static shardnet_status open_device(cl_platform_id platform, cl_device_id id,
                                   unsigned index, sn_device **out)
{
    sn_device *dev = calloc(1, sizeof *dev);
    cl_dev *cd = calloc(1, sizeof *cd);
    shardnet_device_info *info;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                     (cl_context_properties)platform, 0};
    cl_uint units = 0;
    cl_ulong global_mem = 0, max_alloc = 0;
    cl_bool unified = CL_FALSE;
    cl_device_type type = 0;
    size_t max_wg = 0;
    cl_int err;

    *out = NULL;
    if (!dev || !cd || pthread_mutex_init(&cd->lock, NULL) != 0) {
        free(dev);
        free(cd);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "cl:%u: device state", index);
    }
    dev->ops = &cl_ops;
    dev->impl = cd;
    cd->id = id;
    info = &dev->info;
    snprintf(info->name, sizeof info->name, "cl:%u", index);
    info->kind = SHARDNET_DEVICE_OPENCL;
    info->index = index;
    device_string(id, CL_DEVICE_NAME, info->model, sizeof info->model);
    device_string(id, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor);
    device_string(id, CL_DRIVER_VERSION, info->driver, sizeof info->driver);
    clGetDeviceInfo(id, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units,
                    NULL);
    clGetDeviceInfo(id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global_mem,
                    &global_mem, NULL);
    clGetDeviceInfo(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc,
                    &max_alloc, NULL);
    clGetDeviceInfo(id, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified,
                    &unified, NULL);
    clGetDeviceInfo(id, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    clGetDeviceInfo(id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg,
                    NULL);
    info->compute_units = units;
    info->global_mem = global_mem;
    info->max_alloc = max_alloc;
    info->host_unified = unified == CL_TRUE || (type & CL_DEVICE_TYPE_CPU);
    info->numa_node = -1;
    info->cpuset[0] = '\0';
    cd->max_alloc = max_alloc > SIZE_MAX ? SIZE_MAX : (size_t)max_alloc;
    cd->max_wg = max_wg ? max_wg : 1;
    cd->host_unified = info->host_unified;
    snprintf(cd->label, sizeof cd->label, "%s (%s)", info->name, info->model);

    cd->ctx = clCreateContext(props, 1, &id, NULL, NULL, &err);
    if (!cd->ctx || err != CL_SUCCESS) {
        cd->ctx = NULL;
        cl_device_free(dev);
        return sn_error(cl_status(err), "cl:%u: clCreateContext failed: %s",
                        index, sn_cl_error_name(err));
    }
    pthread_mutex_lock(&open_lock);
    open_devices++;
    pthread_mutex_unlock(&open_lock);
    cd->queue = clCreateCommandQueue(cd->ctx, id, 0, &err);
    if (!cd->queue || err != CL_SUCCESS) {
        cd->queue = NULL;
        cl_device_free(dev);
        return sn_error(cl_status(err),
                        "cl:%u: clCreateCommandQueue failed: %s", index,
                        sn_cl_error_name(err));
    }
    sn_log(SHARDNET_LOG_INFO, "%s: %s, %u compute units, %llu MiB",
           cd->label, info->vendor, units,
           (unsigned long long)(global_mem >> 20));
    *out = dev;
    return SHARDNET_OK;
}

/*
 * A device that cannot be opened (a broken driver among working ones) is
 * left out with a warning rather than failing the whole discovery; only
 * running out of host memory is an error.
 */
static shardnet_status cl_discover(sn_device_list *list,
                                   const sn_discover_args *args)
{
    cl_uint nplat = 0;
    cl_platform_id *plats = NULL;
    cl_device_id *ids = NULL;
    unsigned index = 0;
    shardnet_status st = SHARDNET_OK;
    cl_int err = clGetPlatformIDs(0, NULL, &nplat);

    (void)args; /* OpenCL devices are not shared out between processes */
    if (err == CL_PLATFORM_NOT_FOUND_KHR || (err == CL_SUCCESS && nplat == 0)) {
        sn_log(SHARDNET_LOG_DEBUG, "no OpenCL platform");
        return SHARDNET_OK;
    }
    if (err != CL_SUCCESS)
        return sn_error(SHARDNET_DEVICE_ERROR, "clGetPlatformIDs failed: %s",
                        sn_cl_error_name(err));
    plats = calloc(nplat, sizeof *plats);
    if (!plats)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "OpenCL platform list");
    err = clGetPlatformIDs(nplat, plats, NULL);
    if (err != CL_SUCCESS) {
        free(plats);
        return sn_error(SHARDNET_DEVICE_ERROR, "clGetPlatformIDs failed: %s",
                        sn_cl_error_name(err));
    }
    for (cl_uint p = 0; p < nplat && st == SHARDNET_OK; p++) {
        cl_uint ndev = 0;
        err = clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &ndev);
        if (err == CL_DEVICE_NOT_FOUND || (err == CL_SUCCESS && ndev == 0))
            continue;
        if (err != CL_SUCCESS ||
            !(ids = calloc(ndev, sizeof *ids)) ||
            (err = clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, ndev, ids,
                                  NULL)) != CL_SUCCESS) {
            sn_log(SHARDNET_LOG_WARN,
                   "OpenCL platform %u left out: clGetDeviceIDs: %s", p,
                   ids ? sn_cl_error_name(err) : "out of memory");
            free(ids);
            ids = NULL;
            continue;
        }
        for (cl_uint d = 0; d < ndev; d++) {
            sn_device *dev;
            st = open_device(plats[p], ids[d], index, &dev);
            if (st == SHARDNET_OUT_OF_MEMORY)
                break;
            if (st != SHARDNET_OK) {
                sn_log(SHARDNET_LOG_WARN, "OpenCL device left out: %s",
                       shardnet_last_error());
                sn_error_clear();
                st = SHARDNET_OK;
                continue;
            }
            st = sn_device_list_push(list, dev);
            if (st != SHARDNET_OK) {
                cl_device_free(dev);
                break;
            }
            index++;
        }
        free(ids);
        ids = NULL;
    }
    free(plats);
    return st;
}

static shardnet_status cl_synchronize(sn_device *dev)
{
    cl_dev *cd = dev->impl;
    cl_int err = clFinish(cd->queue);
    if (err != CL_SUCCESS)
        return sn_error(SHARDNET_DEVICE_ERROR,
                        "%s: clFinish failed: %s (work enqueued since the "
                        "last synchronize failed)",
                        dev->info.name, sn_cl_error_name(err));
    return SHARDNET_OK;
}

/* --- buffers ----------------------------------------------------------- */

static shardnet_status cl_buffer_alloc(sn_device *dev, size_t bytes,
                                       sn_buffer **out)
{
    cl_dev *cd = dev->impl;
    cl_mem_flags flags = CL_MEM_READ_WRITE;
    size_t real = bytes ? bytes : sizeof(float); /* OpenCL refuses 0 */
    cl_buf *b;
    cl_mem mem;
    cl_int err;

    if (bytes > cd->max_alloc)
        return sn_error(SHARDNET_OUT_OF_MEMORY,
                        "%s: a buffer of %zu bytes exceeds the device's "
                        "largest allocation of %zu bytes",
                        cd->label, bytes, cd->max_alloc);
    b = calloc(1, sizeof *b);
    if (!b)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s: buffer record",
                        dev->info.name);
    if (cd->host_unified)
        flags |= CL_MEM_ALLOC_HOST_PTR; /* mapping is then zero-copy */
    mem = clCreateBuffer(cd->ctx, flags, real, NULL, &err);
    if (!mem || err != CL_SUCCESS) {
        free(b);
        return sn_error(cl_status(err),
                        "%s: clCreateBuffer of %zu bytes failed: %s",
                        dev->info.name, bytes, sn_cl_error_name(err));
    }
    b->pub.dev = dev;
    b->pub.size = bytes;
    b->pub.handle = mem;
    *out = &b->pub;
    return SHARDNET_OK;
}

static void cl_buffer_free(sn_buffer *buf)
{
    cl_buf *b = (cl_buf *)buf;
    cl_dev *cd;
    cl_mapping *m;

    if (!buf)
        return;
    cd = buf->dev->impl;
    pthread_mutex_lock(&cd->lock);
    m = b->maps;
    b->maps = NULL;
    pthread_mutex_unlock(&cd->lock);
    while (m) {
        cl_mapping *next = m->next;
        if (m->mapped)
            clEnqueueUnmapMemObject(cd->queue, buf->handle, m->ptr, 0, NULL,
                                    NULL);
        free(m);
        m = next;
    }
    /* OpenCL keeps the memory until the commands using it have finished. */
    clReleaseMemObject(buf->handle);
    free(b);
}

static shardnet_status cl_buffer_write(sn_buffer *buf, size_t offset,
                                       const void *src, size_t bytes)
{
    cl_dev *cd = buf->dev->impl;
    cl_int err = clEnqueueWriteBuffer(cd->queue, buf->handle, CL_TRUE, offset,
                                      bytes, src, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return sn_error(cl_status(err),
                        "%s: writing %zu bytes at %zu failed: %s",
                        buf->dev->info.name, bytes, offset,
                        sn_cl_error_name(err));
    return SHARDNET_OK;
}

static shardnet_status cl_buffer_read(sn_buffer *buf, size_t offset,
                                      void *dst, size_t bytes)
{
    cl_dev *cd = buf->dev->impl;
    cl_int err = clEnqueueReadBuffer(cd->queue, buf->handle, CL_TRUE, offset,
                                     bytes, dst, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return sn_error(cl_status(err),
                        "%s: reading %zu bytes at %zu failed: %s",
                        buf->dev->info.name, bytes, offset,
                        sn_cl_error_name(err));
    return SHARDNET_OK;
}

static shardnet_status cl_buffer_map(sn_buffer *buf, size_t offset,
                                     size_t bytes, int flags, void **ptr)
{
    cl_dev *cd = buf->dev->impl;
    cl_buf *b = (cl_buf *)buf;
    cl_map_flags mf = 0;
    cl_mapping *m = calloc(1, sizeof *m);
    cl_int err;

    if (!m)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s: mapping record",
                        buf->dev->info.name);
    if (flags & SN_MAP_READ)
        mf |= CL_MAP_READ;
    if (flags & SN_MAP_WRITE)
        mf |= CL_MAP_WRITE;
    if (!mf)
        mf = CL_MAP_READ;
    if (bytes == 0) {
        m->ptr = m; /* unique, never dereferenced */
    } else {
        m->ptr = clEnqueueMapBuffer(cd->queue, buf->handle, CL_TRUE, mf,
                                    offset, bytes, 0, NULL, NULL, &err);
        if (!m->ptr || err != CL_SUCCESS) {
            free(m);
            return sn_error(cl_status(err),
                            "%s: mapping %zu bytes at %zu failed: %s",
                            buf->dev->info.name, bytes, offset,
                            sn_cl_error_name(err));
        }
        m->mapped = 1;
    }
    pthread_mutex_lock(&cd->lock);
    m->next = b->maps;
    b->maps = m;
    pthread_mutex_unlock(&cd->lock);
    *ptr = m->ptr;
    return SHARDNET_OK;
}

static shardnet_status cl_buffer_unmap(sn_buffer *buf, void *ptr)
{
    cl_dev *cd = buf->dev->impl;
    cl_buf *b = (cl_buf *)buf;
    cl_mapping *m, **link;
    cl_event ev = NULL;
    cl_int err = CL_SUCCESS;

    pthread_mutex_lock(&cd->lock);
    for (link = &b->maps; *link && (*link)->ptr != ptr; link = &(*link)->next)
        ;
    m = *link;
    if (m)
        *link = m->next;
    pthread_mutex_unlock(&cd->lock);
    if (!m)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "%s: unmapping %p, which is not mapped from this "
                        "buffer",
                        buf->dev->info.name, ptr);
    if (m->mapped) {
        err = clEnqueueUnmapMemObject(cd->queue, buf->handle, ptr, 0, NULL,
                                      &ev);
        if (err == CL_SUCCESS) {
            err = clWaitForEvents(1, &ev);
            clReleaseEvent(ev);
        }
    }
    free(m);
    if (err != CL_SUCCESS)
        return sn_error(SHARDNET_DEVICE_ERROR, "%s: unmapping failed: %s",
                        buf->dev->info.name, sn_cl_error_name(err));
    return SHARDNET_OK;
}

/* --- GEMM (CLBlast) ---------------------------------------------------- */

static shardnet_status clblast_error(const sn_device *dev, const char *fn,
                                     const sn_gemm_desc *d,
                                     CLBlastStatusCode s)
{
    return sn_error(SHARDNET_DEVICE_ERROR,
                    "gemm on %s: %s (m %zu, n %zu, k %zu, batch %zu) failed: "
                    "%d %s",
                    dev->info.name, fn, d->m, d->n, d->k, d->batch, (int)s,
                    clblast_name(s));
}

/* One CLBlastSgemm per batch item. */
static shardnet_status gemm_loop(sn_device *dev, const sn_gemm_desc *d)
{
    cl_dev *cd = dev->impl;
    CLBlastTranspose ta = d->trans_a ? CLBlastTransposeYes : CLBlastTransposeNo;
    CLBlastTranspose tb = d->trans_b ? CLBlastTransposeYes : CLBlastTransposeNo;

    for (size_t i = 0; i < d->batch; i++) {
        /* In range: lib/backend/kernels.c checked the extent of every batch item. */
        CLBlastStatusCode s = CLBlastSgemm(
            CLBlastLayoutRowMajor, ta, tb, d->m, d->n, d->k, d->alpha,
            d->a.buf->handle, d->a.offset + i * d->stride_a, d->lda,
            d->b.buf->handle, d->b.offset + i * d->stride_b, d->ldb, d->beta,
            d->c.buf->handle, d->c.offset + i * d->stride_c, d->ldc,
            &cd->queue, NULL);
        if (s != CLBlastSuccess)
            return clblast_error(dev, "CLBlastSgemm", d, s);
    }
    return SHARDNET_OK;
}

/* The product alone: CLBlast, batched where it can. */
static shardnet_status gemm_product(sn_device *dev, const sn_gemm_desc *d)
{
    cl_dev *cd = dev->impl;
    CLBlastTranspose ta = d->trans_a ? CLBlastTransposeYes : CLBlastTransposeNo;
    CLBlastTranspose tb = d->trans_b ? CLBlastTransposeYes : CLBlastTransposeNo;
    CLBlastStatusCode s;

    if (d->batch == 1)
        return gemm_loop(dev, d);
    s = CLBlastSgemmStridedBatched(
        CLBlastLayoutRowMajor, ta, tb, d->m, d->n, d->k, d->alpha,
        d->a.buf->handle, d->a.offset, d->lda, d->stride_a, d->b.buf->handle,
        d->b.offset, d->ldb, d->stride_b, d->beta, d->c.buf->handle,
        d->c.offset, d->ldc, d->stride_c, d->batch, &cd->queue, NULL);
    if (s == CLBlastSuccess)
        return SHARDNET_OK;
    if (d->stride_a == 0 || d->stride_b == 0) {
        sn_log(SHARDNET_LOG_DEBUG,
               "gemm on %s: CLBlastSgemmStridedBatched refused a zero "
               "stride (%s); one CLBlastSgemm per item",
               dev->info.name, clblast_name(s));
        return gemm_loop(dev, d);
    }
    return clblast_error(dev, "CLBlastSgemmStridedBatched", d, s);
}

/* Elements of C from c.offset that the batch spans (lib/backend/kernels.c has
 * checked that this does not overflow). */
static size_t gemm_c_extent(const sn_gemm_desc *d)
{
    return (d->batch - 1) * d->stride_c + (d->m - 1) * d->ldc + d->n;
}

/* C += bias, then ReLU, over every batch item: one work-item per element.
 * The caller has checked the indices (epilogue_fits). */
static shardnet_status gemm_epilogue(sn_device *dev, const sn_gemm_desc *d)
{
    /* total <= the C extent: stride_c >= m * ldc when batch > 1. */
    size_t total = d->batch * d->m * d->n;
    cl_uint utotal = (cl_uint)total, m = (cl_uint)d->m, n = (cl_uint)d->n,
            c_off = (cl_uint)d->c.offset, ldc = (cl_uint)d->ldc,
            stride_c = d->batch > 1 ? (cl_uint)d->stride_c : 0,
            bias_off = d->bias.buf ? (cl_uint)d->bias.offset : 0;
    cl_int has_bias = d->bias.buf != NULL, bias_rows = d->bias_rows != 0,
           relu = d->act == SN_ACT_RELU;
    cl_mem c = d->c.buf->handle;
    /* Without a bias the kernel never reads it; any buffer will do. */
    cl_mem bias = d->bias.buf ? d->bias.buf->handle : c;
    karg args[] = {ARG(utotal),   ARG(m),        ARG(n),
                   ARG(c),        ARG(c_off),    ARG(ldc),
                   ARG(stride_c), ARG(bias),     ARG(bias_off),
                   ARG(has_bias), ARG(bias_rows), ARG(relu)};

    return run_single(dev, K_GEMM_EPILOGUE, "gemm epilogue", args, 12,
                      total);
}

/* Every index the epilogue forms fits a kernel uint (checked before the
 * product runs, so that a refusal leaves C untouched). */
static shardnet_status epilogue_fits(const sn_device *dev,
                                     const sn_gemm_desc *d)
{
    size_t ec = gemm_c_extent(d), eb = d->bias_rows ? d->m : d->n;

    if (!fits_idx(d->c.offset, ec))
        return too_large(dev, "gemm epilogue", "C", d->c.offset, ec);
    if (d->bias.buf && !fits_idx(d->bias.offset, eb))
        return too_large(dev, "gemm epilogue", "bias", d->bias.offset, eb);
    return SHARDNET_OK;
}

static shardnet_status cl_gemm(sn_device *dev, const sn_gemm_desc *d)
{
    int epilogue = d->bias.buf != NULL || d->act != SN_ACT_NONE;
    shardnet_status st;

    if (epilogue && (st = epilogue_fits(dev, d)) != SHARDNET_OK)
        return st;
    st = gemm_product(dev, d);
    if (st == SHARDNET_OK && epilogue)
        st = gemm_epilogue(dev, d);
    return st;
}

/* --- element-wise ------------------------------------------------------ */

static shardnet_status cl_binary(sn_device *dev, const sn_binary_desc *d)
{
    cl_dev *cd = dev->impl;
    const char *what = sn_binary_op_name(d->op);
    size_t n = 1, ea = 1, eb = 1, t;
    int a_contig = 1, b_contig = 1, a_scalar = 1, b_scalar = 1, v;
    cl_uint8 shape, sa, sb;
    cl_uint un, a_off, b_off, c_off, rank;
    cl_mem a = d->a.buf->handle, b = d->b.buf->handle, c = d->c.buf->handle;
    char name[64];
    shardnet_status st;

    if (d->rank > SN_MAX_DIMS)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s on %s: rank %zu",
                        what, dev->info.name, d->rank);
    for (int i = 0; i < 8; i++) {
        shape.s[i] = 1;
        sa.s[i] = sb.s[i] = 0;
    }
    /* Innermost first: n is then the contiguous stride of dimension i. */
    for (size_t i = d->rank; i-- > 0;) {
        size_t s = d->shape[i];
        if (s == 0)
            return SHARDNET_OK;
        if (s > 1) {
            a_contig &= d->stride_a[i] == n;
            b_contig &= d->stride_b[i] == n;
            a_scalar &= d->stride_a[i] == 0;
            b_scalar &= d->stride_b[i] == 0;
            if (__builtin_mul_overflow(s - 1, d->stride_a[i], &t) ||
                __builtin_add_overflow(ea, t, &ea) ||
                __builtin_mul_overflow(s - 1, d->stride_b[i], &t) ||
                __builtin_add_overflow(eb, t, &eb))
                return sn_error(SHARDNET_INVALID_ARGUMENT,
                                "%s on %s: size overflows", what,
                                dev->info.name);
        }
        if (__builtin_mul_overflow(n, s, &n))
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "%s on %s: size overflows", what, dev->info.name);
    }
    if (!fits_idx(d->c.offset, n))
        return too_large(dev, what, "c", d->c.offset, n);
    if (!fits_idx(d->a.offset, ea))
        return too_large(dev, what, "a", d->a.offset, ea);
    if (!fits_idx(d->b.offset, eb))
        return too_large(dev, what, "b", d->b.offset, eb);
    /* Every shape, and every stride of a dimension above 1, is now below
     * IDX_LIMIT: (s - 1) * stride < extent. */
    for (size_t i = 0; i < d->rank; i++) {
        if (d->shape[i] > 1) {
            shape.s[i] = (cl_uint)d->shape[i];
            sa.s[i] = (cl_uint)d->stride_a[i];
            sb.s[i] = (cl_uint)d->stride_b[i];
        }
    }
    un = (cl_uint)n;
    a_off = (cl_uint)d->a.offset;
    b_off = (cl_uint)d->b.offset;
    c_off = (cl_uint)d->c.offset;
    rank = (cl_uint)d->rank;
    if (a_contig && b_contig)
        v = BIN_SAME;
    else if (a_scalar && b_contig)
        v = BIN_SCALAR_A;
    else if (a_contig && b_scalar)
        v = BIN_SCALAR_B;
    else
        v = BIN_BCAST;
    snprintf(name, sizeof name, "binary_%s_%s", what, bin_variants[v]);
    {
        karg args[] = {ARG(un),   ARG(a),  ARG(a_off), ARG(b),
                       ARG(b_off), ARG(c), ARG(c_off), ARG(rank),
                       ARG(shape), ARG(sa), ARG(sb)};
        pthread_mutex_lock(&cd->lock);
        st = get_kernel(cd, &cd->binary[v][d->op], PROG_ELEMENTWISE, name);
        if (st == SHARDNET_OK)
            st = launch(dev, cd->binary[v][d->op], what, args,
                        v == BIN_BCAST ? 11 : 7, round_up(n, GLOBAL_ROUND),
                        0);
        pthread_mutex_unlock(&cd->lock);
    }
    return st;
}

static shardnet_status cl_unary(sn_device *dev, const sn_unary_desc *d)
{
    cl_dev *cd = dev->impl;
    const char *what = sn_unary_op_name(d->op);
    cl_uint n, x_off, y_off;
    cl_float alpha = d->alpha, beta = d->beta;
    cl_mem x = d->x.buf->handle, y = d->y.buf->handle;
    char name[64];
    shardnet_status st;

    if (!fits_idx(d->x.offset, d->n))
        return too_large(dev, what, "x", d->x.offset, d->n);
    if (!fits_idx(d->y.offset, d->n))
        return too_large(dev, what, "y", d->y.offset, d->n);
    n = (cl_uint)d->n;
    x_off = (cl_uint)d->x.offset;
    y_off = (cl_uint)d->y.offset;
    snprintf(name, sizeof name, "unary_%s", what);
    {
        karg args[] = {ARG(n),     ARG(x),     ARG(x_off), ARG(y),
                       ARG(y_off), ARG(alpha), ARG(beta)};
        pthread_mutex_lock(&cd->lock);
        st = get_kernel(cd, &cd->unary[d->op], PROG_ELEMENTWISE, name);
        if (st == SHARDNET_OK)
            st = launch(dev, cd->unary[d->op], what, args, 7,
                        round_up(d->n, GLOBAL_ROUND), 0);
        pthread_mutex_unlock(&cd->lock);
    }
    return st;
}

/* --- reductions and softmax -------------------------------------------- */

/*
 * Local size for a one-work-group-per-row kernel: a power of two, at most
 * ROW_WG_MAX and what the device and kernel allow, and no larger than the
 * power of two that covers the row.  The lock is held.
 */
static size_t row_local_size(cl_dev *cd, int k, size_t len)
{
    size_t limit = ROW_WG_MAX, wg = 1;

    if (!cd->reduce_wg[k]) {
        size_t kwg = 0;
        if (clGetKernelWorkGroupInfo(cd->reduce[k], cd->id,
                                     CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg,
                                     &kwg, NULL) != CL_SUCCESS ||
            kwg == 0)
            kwg = 1;
        cd->reduce_wg[k] = kwg;
    }
    if (cd->max_wg < limit)
        limit = cd->max_wg;
    if (cd->reduce_wg[k] < limit)
        limit = cd->reduce_wg[k];
    while (wg * 2 <= limit && wg < len)
        wg *= 2;
    return wg;
}

/*
 * Run kernel k of reduce.cl over x (outer, len, inner) into y: the six
 * common arguments, then scratch (row kernels, inner == 1) or n and inner
 * (axis kernels).  The caller has checked that x and y fit the uint
 * indices; in_elems = outer * len * inner.
 */
static shardnet_status run_axis_kernel(sn_device *dev, const char *what,
                                       int k_row, int k_axis, size_t outer,
                                       size_t len, size_t inner, sn_view xv,
                                       sn_view yv, int flag)
{
    cl_dev *cd = dev->impl;
    int k = inner == 1 ? k_row : k_axis;
    cl_uint ulen = (cl_uint)len, x_off = (cl_uint)xv.offset,
            y_off = (cl_uint)yv.offset, n = (cl_uint)(outer * inner),
            uinner = (cl_uint)inner;
    cl_int iflag = flag;
    cl_mem x = xv.buf->handle, y = yv.buf->handle;
    shardnet_status st;

    pthread_mutex_lock(&cd->lock);
    st = get_kernel(cd, &cd->reduce[k], PROG_REDUCE, reduce_kernels[k]);
    if (st == SHARDNET_OK && k == k_row) {
        size_t wg = row_local_size(cd, k, len);
        karg args[] = {ARG(ulen),  ARG(x),     ARG(x_off),
                       ARG(y),     ARG(y_off), ARG(iflag),
                       {wg * sizeof(float), NULL}};
        if (outer > SIZE_MAX / wg) /* only where size_t is 32 bits */
            st = too_large(dev, what, "x", 0, outer * len);
        else
            st = launch(dev, cd->reduce[k], what, args, 7, outer * wg, wg);
    } else if (st == SHARDNET_OK) {
        karg args[] = {ARG(ulen),  ARG(x),     ARG(x_off), ARG(y),
                       ARG(y_off), ARG(iflag), ARG(n),     ARG(uinner)};
        st = launch(dev, cd->reduce[k], what, args, 8,
                    round_up(outer * inner, GLOBAL_ROUND), 0);
    }
    pthread_mutex_unlock(&cd->lock);
    return st;
}

/* outer * len * inner, checked against the kernels' index range. */
static shardnet_status axis_extent(const sn_device *dev, const char *what,
                                   size_t outer, size_t len, size_t inner,
                                   size_t *total)
{
    if (__builtin_mul_overflow(outer, len, total) ||
        __builtin_mul_overflow(*total, inner, total))
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s on %s: size overflows",
                        what, dev->info.name);
    if (*total > IDX_LIMIT)
        return too_large(dev, what, "x", 0, *total);
    return SHARDNET_OK;
}

static shardnet_status cl_softmax(sn_device *dev, const sn_softmax_desc *d)
{
    const char *what = d->log_softmax ? "log-softmax" : "softmax";
    size_t total;
    shardnet_status st;

    if ((st = axis_extent(dev, what, d->outer, d->len, d->inner, &total)) !=
        SHARDNET_OK)
        return st;
    if (total == 0)
        return SHARDNET_OK;
    if (!fits_idx(d->x.offset, total))
        return too_large(dev, what, "x", d->x.offset, total);
    if (!fits_idx(d->y.offset, total))
        return too_large(dev, what, "y", d->y.offset, total);
    return run_axis_kernel(dev, what, K_SOFTMAX_ROW, K_SOFTMAX_AXIS, d->outer,
                           d->len, d->inner, d->x, d->y, d->log_softmax != 0);
}

static shardnet_status cl_reduce(sn_device *dev, const sn_reduce_desc *d)
{
    const char *what = sn_reduce_op_name(d->op);
    size_t total;
    int is_max = d->op == SN_REDUCE_MAX;
    shardnet_status st;

    if ((st = axis_extent(dev, what, d->outer, d->len, d->inner, &total)) !=
        SHARDNET_OK)
        return st;
    if (total == 0)
        return SHARDNET_OK;
    if (!fits_idx(d->x.offset, total))
        return too_large(dev, what, "x", d->x.offset, total);
    /* outer * inner <= total */
    if (!fits_idx(d->y.offset, d->outer * d->inner))
        return too_large(dev, what, "y", d->y.offset, d->outer * d->inner);
    return run_axis_kernel(dev, what, is_max ? K_MAX_ROW : K_SUM_ROW,
                           is_max ? K_MAX_AXIS : K_SUM_AXIS, d->outer, d->len,
                           d->inner, d->x, d->y, d->op == SN_REDUCE_MEAN);
}

/* --- layer normalisation ----------------------------------------------- */

static shardnet_status cl_layernorm(sn_device *dev,
                                    const sn_layernorm_desc *d)
{
    const char *what = "layer normalisation";
    cl_dev *cd = dev->impl;
    size_t total, wg;
    cl_uint len, x_off, y_off, scale_off, bias_off;
    cl_int has_bias = d->bias.buf != NULL;
    cl_float eps = d->epsilon;
    cl_mem x = d->x.buf->handle, y = d->y.buf->handle,
           scale = d->scale.buf->handle;
    /* Without a bias the kernel never reads it; any buffer will do. */
    cl_mem bias = has_bias ? d->bias.buf->handle : scale;
    shardnet_status st;

    if ((st = axis_extent(dev, what, d->outer, d->len, 1, &total)) !=
        SHARDNET_OK)
        return st;
    if (total == 0)
        return SHARDNET_OK;
    if (!fits_idx(d->x.offset, total))
        return too_large(dev, what, "x", d->x.offset, total);
    if (!fits_idx(d->y.offset, total))
        return too_large(dev, what, "y", d->y.offset, total);
    if (!fits_idx(d->scale.offset, d->len))
        return too_large(dev, what, "scale", d->scale.offset, d->len);
    if (has_bias && !fits_idx(d->bias.offset, d->len))
        return too_large(dev, what, "bias", d->bias.offset, d->len);
    len = (cl_uint)d->len;
    x_off = (cl_uint)d->x.offset;
    y_off = (cl_uint)d->y.offset;
    scale_off = (cl_uint)d->scale.offset;
    bias_off = has_bias ? (cl_uint)d->bias.offset : 0;

    pthread_mutex_lock(&cd->lock);
    st = get_kernel(cd, &cd->reduce[K_LAYERNORM_ROW], PROG_REDUCE,
                    reduce_kernels[K_LAYERNORM_ROW]);
    wg = st == SHARDNET_OK ? row_local_size(cd, K_LAYERNORM_ROW, d->len) : 1;
    if (st == SHARDNET_OK && d->outer > SIZE_MAX / wg) /* 32-bit size_t */
        st = too_large(dev, what, "x", 0, total);
    if (st == SHARDNET_OK) {
        karg args[] = {ARG(len),       ARG(x),    ARG(x_off),
                       ARG(y),         ARG(y_off), ARG(scale),
                       ARG(scale_off), ARG(bias), ARG(bias_off),
                       ARG(has_bias),  ARG(eps),  {wg * sizeof(float), NULL}};
        st = launch(dev, cd->reduce[K_LAYERNORM_ROW], what, args, 12,
                    d->outer * wg, wg);
    }
    pthread_mutex_unlock(&cd->lock);
    return st;
}

/* --- data movement ----------------------------------------------------- */

/*
 * One operand of a broadcast kernel: check that every index it reaches
 * over `shape` (n > 0 elements) fits a uint, then narrow its strides into
 * *out (stride 0 for dimensions of size 1, whose stride is never used).
 */
static shardnet_status bcast_operand(const sn_device *dev, const char *what,
                                     const char *name, sn_view v, size_t rank,
                                     const size_t *shape,
                                     const size_t *stride, cl_uint8 *out)
{
    size_t extent = 1, t;

    for (size_t i = 0; i < rank; i++)
        if (shape[i] > 1 &&
            (__builtin_mul_overflow(shape[i] - 1, stride[i], &t) ||
             __builtin_add_overflow(extent, t, &extent)))
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "%s on %s: size overflows", what, dev->info.name);
    if (!fits_idx(v.offset, extent))
        return too_large(dev, what, name, v.offset, extent);
    /* (shape - 1) * stride < extent <= IDX_LIMIT */
    for (int i = 0; i < 8; i++)
        out->s[i] = (size_t)i < rank && shape[i] > 1 ? (cl_uint)stride[i] : 0;
    return SHARDNET_OK;
}

static shardnet_status cl_where(sn_device *dev, const sn_where_desc *d)
{
    const char *what = "where";
    size_t n = 1;
    cl_uint8 shape, sc, sx, sy;
    cl_uint un, c_off, x_off, y_off, o_off, rank;
    cl_mem cond = d->cond.buf->handle, x = d->x.buf->handle,
           y = d->y.buf->handle, out = d->out.buf->handle;
    shardnet_status st;

    if (d->rank > SN_MAX_DIMS)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s on %s: rank %zu",
                        what, dev->info.name, d->rank);
    for (size_t i = 0; i < d->rank; i++)
        if (__builtin_mul_overflow(n, d->shape[i], &n))
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "%s on %s: size overflows", what, dev->info.name);
    if (n == 0)
        return SHARDNET_OK;
    if (!fits_idx(d->out.offset, n))
        return too_large(dev, what, "out", d->out.offset, n);
    if ((st = bcast_operand(dev, what, "cond", d->cond, d->rank, d->shape,
                            d->stride_cond, &sc)) != SHARDNET_OK ||
        (st = bcast_operand(dev, what, "x", d->x, d->rank, d->shape,
                            d->stride_x, &sx)) != SHARDNET_OK ||
        (st = bcast_operand(dev, what, "y", d->y, d->rank, d->shape,
                            d->stride_y, &sy)) != SHARDNET_OK)
        return st;
    /* Every dimension is at most n <= IDX_LIMIT. */
    for (int i = 0; i < 8; i++)
        shape.s[i] = (size_t)i < d->rank ? (cl_uint)d->shape[i] : 1;
    un = (cl_uint)n;
    c_off = (cl_uint)d->cond.offset;
    x_off = (cl_uint)d->x.offset;
    y_off = (cl_uint)d->y.offset;
    o_off = (cl_uint)d->out.offset;
    rank = (cl_uint)d->rank;
    {
        karg args[] = {ARG(un),    ARG(cond),  ARG(c_off), ARG(x),
                       ARG(x_off), ARG(y),     ARG(y_off), ARG(out),
                       ARG(o_off), ARG(rank),  ARG(shape), ARG(sc),
                       ARG(sx),    ARG(sy)};
        return run_single(dev, K_WHERE, what, args, 14, n);
    }
}

/*
 * The copy's shape simplified: dimensions of size 1 dropped, and each
 * dimension merged into the one outside it where that one's stride is
 * exactly this one's span, in both source and destination.  The element
 * order, and so every (src, dst) pair, is unchanged.
 */
typedef struct copy_shape {
    size_t rank, n; /* n: elements */
    size_t shape[SN_MAX_DIMS];
    ptrdiff_t src[SN_MAX_DIMS], dst[SN_MAX_DIMS];
} copy_shape;

static int chains(ptrdiff_t outer, ptrdiff_t inner, size_t len)
{
    ptrdiff_t span;
    return len <= PTRDIFF_MAX &&
           !__builtin_mul_overflow(inner, (ptrdiff_t)len, &span) &&
           span == outer;
}

/* 0 when the element count overflows. */
static int copy_simplify(const sn_copy_desc *d, copy_shape *cs)
{
    cs->rank = 0;
    cs->n = 1;
    for (size_t i = 0; i < d->rank; i++)
        if (d->shape[i] == 0) {
            cs->n = 0;
            return 1;
        }
    for (size_t i = 0; i < d->rank; i++) {
        size_t len = d->shape[i], r = cs->rank;
        if (__builtin_mul_overflow(cs->n, len, &cs->n))
            return 0;
        if (len == 1)
            continue;
        if (r > 0 && chains(cs->src[r - 1], d->src_stride[i], len) &&
            chains(cs->dst[r - 1], d->dst_stride[i], len)) {
            cs->shape[r - 1] *= len; /* <= n, no overflow */
            cs->src[r - 1] = d->src_stride[i];
            cs->dst[r - 1] = d->dst_stride[i];
            continue;
        }
        cs->shape[r] = len;
        cs->src[r] = d->src_stride[i];
        cs->dst[r] = d->dst_stride[i];
        cs->rank++;
    }
    return 1;
}

static shardnet_status cl_copy(sn_device *dev, const sn_copy_desc *d)
{
    cl_dev *cd = dev->impl;
    const char *what = "copy";
    copy_shape cs;
    cl_uint8 shape;
    cl_long8 ss, ds;
    cl_uint un, rank;
    cl_ulong src_off = d->src.offset, dst_off = d->dst.offset;
    cl_mem src = d->src.buf->handle, dst = d->dst.buf->handle;

    if (d->rank > SN_MAX_DIMS)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s on %s: rank %zu",
                        what, dev->info.name, d->rank);
    if (!copy_simplify(d, &cs))
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s on %s: size overflows",
                        what, dev->info.name);
    if (cs.n == 0)
        return SHARDNET_OK;
    if (cs.rank == 0 || (cs.rank == 1 && cs.src[0] == 1 && cs.dst[0] == 1)) {
        /* Contiguous on both sides.  lib/backend/kernels.c checked both ranges
         * against their buffers, so the byte counts do not overflow. */
        size_t so = d->src.offset, dso = d->dst.offset;
        int same = d->src.buf == d->dst.buf;
        cl_int err;
        if (same && so == dso)
            return SHARDNET_OK;
        /* Overlapping ranges (which clEnqueueCopyBuffer refuses) go to
         * the kernel below. */
        if (!same || so + cs.n <= dso || dso + cs.n <= so) {
            err = clEnqueueCopyBuffer(cd->queue, src, dst, so * sizeof(float),
                                      dso * sizeof(float),
                                      cs.n * sizeof(float), 0, NULL, NULL);
            if (err != CL_SUCCESS)
                return sn_error(cl_status(err),
                                "%s on %s: clEnqueueCopyBuffer of %zu "
                                "elements failed: %s",
                                what, dev->info.name, cs.n,
                                sn_cl_error_name(err));
            return SHARDNET_OK;
        }
    }
    if (cs.n > IDX_LIMIT)
        return too_large(dev, what, "dst", d->dst.offset, cs.n);
    /* Every dimension is at most n; offsets and strides go as 64 bits. */
    for (int i = 0; i < 8; i++) {
        int used = (size_t)i < cs.rank;
        shape.s[i] = used ? (cl_uint)cs.shape[i] : 1;
        ss.s[i] = used ? (cl_long)cs.src[i] : 0;
        ds.s[i] = used ? (cl_long)cs.dst[i] : 0;
    }
    un = (cl_uint)cs.n;
    rank = (cl_uint)cs.rank;
    {
        karg args[] = {ARG(un),  ARG(rank),    ARG(shape),
                       ARG(src), ARG(src_off), ARG(ss),
                       ARG(dst), ARG(dst_off), ARG(ds)};
        return run_single(dev, K_COPY, what, args, 9, cs.n);
    }
}

static shardnet_status cl_gather(sn_device *dev, const sn_gather_desc *d)
{
    const char *what = "gather";
    size_t n, ein;
    cl_uint un, data_off, idx_off, out_off, nidx, inner;
    cl_int axis_len;
    cl_mem data = d->data.buf->handle, idx = d->indices.buf->handle,
           out = d->out.buf->handle;

    if (__builtin_mul_overflow(d->outer, d->nidx, &n) ||
        __builtin_mul_overflow(n, d->inner, &n) ||
        __builtin_mul_overflow(d->outer, d->axis_len, &ein) ||
        __builtin_mul_overflow(ein, d->inner, &ein))
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s on %s: size overflows",
                        what, dev->info.name);
    if (n == 0)
        return SHARDNET_OK;
    if (d->axis_len > INT_MAX)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "%s on %s: axis of %zu elements", what,
                        dev->info.name, d->axis_len);
    if (!fits_idx(d->out.offset, n))
        return too_large(dev, what, "out", d->out.offset, n);
    if (!fits_idx(d->data.offset, ein))
        return too_large(dev, what, "data", d->data.offset, ein);
    if (!fits_idx(d->indices.offset, d->nidx))
        return too_large(dev, what, "indices", d->indices.offset, d->nidx);
    /* nidx and inner are at most n. */
    un = (cl_uint)n;
    data_off = (cl_uint)d->data.offset;
    idx_off = (cl_uint)d->indices.offset;
    out_off = (cl_uint)d->out.offset;
    nidx = (cl_uint)d->nidx;
    inner = (cl_uint)d->inner;
    axis_len = (cl_int)d->axis_len;
    {
        karg args[] = {ARG(un),      ARG(data), ARG(data_off), ARG(idx),
                       ARG(idx_off), ARG(out),  ARG(out_off),  ARG(axis_len),
                       ARG(nidx),    ARG(inner)};
        return run_single(dev, K_GATHER, what, args, 10, n);
    }
}

/* --- convolution helpers ----------------------------------------------- */

/*
 * One spatial axis of a window op, checked so that conv.cl can work in
 * int: every input coordinate a window reaches lies in [-pad_begin,
 * (out - 1) * stride + (k - 1) * dil - pad_begin] and in + pad_end is
 * formed too, so all of these must fit.  A stride or dilation that is
 * never multiplied by a non-zero index (out or k of 1) is passed as 1.
 */
static int conv_axis(size_t in, size_t out, size_t k, size_t stride,
                     size_t dil, size_t pad_begin, size_t pad_end,
                     cl_int *o_stride, cl_int *o_dil)
{
    size_t a, b, reach, end;

    if (in > INT_MAX || out > INT_MAX || k > INT_MAX ||
        pad_begin > INT_MAX || pad_end > INT_MAX ||
        __builtin_mul_overflow(out - 1, stride, &a) ||
        __builtin_mul_overflow(k - 1, dil, &b) ||
        __builtin_add_overflow(a, b, &reach) || reach > INT_MAX ||
        __builtin_add_overflow(in, pad_end, &end) || end > INT_MAX)
        return 0;
    /* stride <= reach when out > 1, dil <= reach when k > 1 */
    *o_stride = out > 1 ? (cl_int)stride : 1;
    *o_dil = k > 1 ? (cl_int)dil : 1;
    return 1;
}

/*
 * The geometry vectors of conv.cl:
 *   g  = (in_h, in_w, out_h, out_w, k_h, k_w, stride_h, stride_w)
 *   g2 = (dil_h, dil_w, pad_top, pad_left, pad_bottom, pad_right, 0, 0)
 */
static shardnet_status conv_geometry(const sn_device *dev, const char *what,
                                     const size_t in[2], const size_t out[2],
                                     const size_t k[2], const size_t stride[2],
                                     const size_t dil[2],
                                     const size_t pad_begin[2],
                                     const size_t pad_end[2], cl_int8 *g,
                                     cl_int8 *g2)
{
    cl_int s[2], dl[2];

    for (int a = 0; a < 2; a++)
        if (!conv_axis(in[a], out[a], k[a], stride[a], dil[a], pad_begin[a],
                       pad_end[a], &s[a], &dl[a]))
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "%s on %s: the window geometry (input %zu x %zu, "
                            "output %zu x %zu, kernel %zu x %zu) reaches "
                            "coordinates beyond the OpenCL kernels' int range",
                            what, dev->info.name, in[0], in[1], out[0],
                            out[1], k[0], k[1]);
    for (int a = 0; a < 2; a++) {
        g->s[0 + a] = (cl_int)in[a];
        g->s[2 + a] = (cl_int)out[a];
        g->s[4 + a] = (cl_int)k[a];
        g->s[6 + a] = s[a];
        g2->s[0 + a] = dl[a];
        g2->s[2 + a] = (cl_int)pad_begin[a];
        g2->s[4 + a] = (cl_int)pad_end[a];
        g2->s[6 + a] = 0;
    }
    return SHARDNET_OK;
}

static shardnet_status cl_im2col(sn_device *dev, const sn_im2col_desc *d)
{
    const char *what = "im2col";
    const size_t in[2] = {d->in_h, d->in_w}, out[2] = {d->out_h, d->out_w},
                 k[2] = {d->k_h, d->k_w},
                 stride[2] = {d->stride_h, d->stride_w},
                 dil[2] = {d->dil_h, d->dil_w},
                 pad[2] = {d->pad_top, d->pad_left}, none[2] = {0, 0};
    size_t n, ein;
    cl_int8 g, g2;
    cl_uint un, src_off, dst_off;
    cl_mem src = d->src.buf->handle, dst = d->dst.buf->handle;
    shardnet_status st;

    if (__builtin_mul_overflow(d->channels, d->k_h, &n) ||
        __builtin_mul_overflow(n, d->k_w, &n) ||
        __builtin_mul_overflow(n, d->out_h, &n) ||
        __builtin_mul_overflow(n, d->out_w, &n) ||
        __builtin_mul_overflow(d->channels, d->in_h, &ein) ||
        __builtin_mul_overflow(ein, d->in_w, &ein))
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s on %s: size overflows",
                        what, dev->info.name);
    if (n == 0)
        return SHARDNET_OK;
    if (!fits_idx(d->dst.offset, n))
        return too_large(dev, what, "dst", d->dst.offset, n);
    if (!fits_idx(d->src.offset, ein))
        return too_large(dev, what, "src", d->src.offset, ein);
    if ((st = conv_geometry(dev, what, in, out, k, stride, dil, pad, none, &g,
                            &g2)) != SHARDNET_OK)
        return st;
    un = (cl_uint)n;
    src_off = (cl_uint)d->src.offset;
    dst_off = (cl_uint)d->dst.offset;
    {
        karg args[] = {ARG(un),      ARG(src), ARG(src_off), ARG(dst),
                       ARG(dst_off), ARG(g),   ARG(g2)};
        return run_single(dev, K_IM2COL, what, args, 7, n);
    }
}

static shardnet_status cl_pool(sn_device *dev, const sn_pool_desc *d)
{
    const char *what = d->op == SN_POOL_MAX ? "max pool" : "average pool";
    const size_t in[2] = {d->in_h, d->in_w}, out[2] = {d->out_h, d->out_w},
                 k[2] = {d->k_h, d->k_w},
                 stride[2] = {d->stride_h, d->stride_w},
                 dil[2] = {d->dil_h, d->dil_w},
                 pad_begin[2] = {d->pad_top, d->pad_left},
                 pad_end[2] = {d->pad_bottom, d->pad_right};
    size_t n, ein;
    cl_int8 g, g2;
    cl_uint un, src_off, dst_off;
    cl_int include_pad = d->count_include_pad != 0;
    cl_mem src = d->src.buf->handle, dst = d->dst.buf->handle;
    shardnet_status st;

    if (__builtin_mul_overflow(d->planes, d->out_h, &n) ||
        __builtin_mul_overflow(n, d->out_w, &n) ||
        __builtin_mul_overflow(d->planes, d->in_h, &ein) ||
        __builtin_mul_overflow(ein, d->in_w, &ein))
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s on %s: size overflows",
                        what, dev->info.name);
    if (n == 0)
        return SHARDNET_OK;
    if (!fits_idx(d->dst.offset, n))
        return too_large(dev, what, "dst", d->dst.offset, n);
    if (!fits_idx(d->src.offset, ein))
        return too_large(dev, what, "src", d->src.offset, ein);
    if ((st = conv_geometry(dev, what, in, out, k, stride, dil, pad_begin,
                            pad_end, &g, &g2)) != SHARDNET_OK)
        return st;
    un = (cl_uint)n;
    src_off = (cl_uint)d->src.offset;
    dst_off = (cl_uint)d->dst.offset;
    {
        karg args[] = {ARG(un),      ARG(src), ARG(src_off), ARG(dst),
                       ARG(dst_off), ARG(g),   ARG(g2),      ARG(include_pad)};
        return run_single(dev, d->op == SN_POOL_MAX ? K_POOL_MAX : K_POOL_AVG,
                          what, args, 8, n);
    }
}

static const sn_backend_ops cl_ops = {
    .abi = SN_BACKEND_ABI,
    .kind = "cl",
    .device_free = cl_device_free,
    .buffer_alloc = cl_buffer_alloc,
    .buffer_free = cl_buffer_free,
    .buffer_write = cl_buffer_write,
    .buffer_read = cl_buffer_read,
    .buffer_map = cl_buffer_map,
    .buffer_unmap = cl_buffer_unmap,
    .gemm = cl_gemm,
    .binary = cl_binary,
    .unary = cl_unary,
    .softmax = cl_softmax,
    .reduce = cl_reduce,
    .where = cl_where,
    .copy = cl_copy,
    .im2col = cl_im2col,
    .pool = cl_pool,
    .layernorm = cl_layernorm,
    .gather = cl_gather,
    .synchronize = cl_synchronize,
};

const sn_backend sn_opencl_backend = {
    .abi = SN_BACKEND_ABI,
    .kind = "cl",
    .discover = cl_discover,
};
