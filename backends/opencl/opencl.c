/*
 * The OpenCL backend: one sn_device per OpenCL device the ICD loader lists,
 * numbered cl:0, cl:1, ... in platform then device order.
 *
 * Each device has its own context and one in-order command queue.  Kernels
 * are enqueued without waiting and without events; buffer_write/read block
 * and so come after everything enqueued before them; synchronize is
 * clFinish.  GEMM goes to CLBlast, everything else to the kernels of
 * kernels_cl/, whose programs are built per device on first use (through
 * program.c and its binary cache) and whose cl_kernel objects are kept.
 *
 * Kernels index with uint: before narrowing, every index a kernel can form
 * (view offset + elements spanned) is checked against IDX_LIMIT.
 */
#include <config.h>

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "program.h"

#include <clblast_c.h>

#include "backend.h"
#include "error.h"

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

enum { PROG_ELEMENTWISE, PROG_REDUCE, PROG_COUNT };
static const char *const prog_files[PROG_COUNT] = {"elementwise.cl",
                                                   "reduce.cl"};

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
    K_REDUCE_COUNT
};
static const char *const reduce_kernels[K_REDUCE_COUNT] = {
    "reduce_sum_row",  "reduce_max_row", "reduce_sum_axis",
    "reduce_max_axis", "softmax_row",    "softmax_axis"};

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

/* --- devices ----------------------------------------------------------- */

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
        for (int p = 0; p < PROG_COUNT; p++)
            if (cd->programs[p])
                clReleaseProgram(cd->programs[p]);
        if (cd->queue)
            clReleaseCommandQueue(cd->queue);
        if (cd->ctx)
            clReleaseContext(cd->ctx);
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
shardnet_status sn_opencl_discover(sn_device_list *list)
{
    cl_uint nplat = 0;
    cl_platform_id *plats = NULL;
    cl_device_id *ids = NULL;
    unsigned index = 0;
    shardnet_status st = SHARDNET_OK;
    cl_int err = clGetPlatformIDs(0, NULL, &nplat);

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
    b->pub.host = NULL;
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
        /* In range: lib/kernels.c checked the extent of every batch item. */
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

static shardnet_status cl_gemm(sn_device *dev, const sn_gemm_desc *d)
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
        karg args[] = {ARG(n), ARG(x), ARG(x_off), ARG(y), ARG(y_off)};
        pthread_mutex_lock(&cd->lock);
        st = get_kernel(cd, &cd->unary[d->op], PROG_ELEMENTWISE, name);
        if (st == SHARDNET_OK)
            st = launch(dev, cd->unary[d->op], what, args, 5,
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
    .synchronize = cl_synchronize,
};
