/*
 * The OpenCL backend: one sn_device per OpenCL device the ICD loader lists,
 * numbered cl:0, cl:1, ... in platform then device order.
 *
 * A CPU device may be cut into sub-devices (device fission) where its
 * driver allows (cl_partition), each a device of its own.
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
 *
 * This file finds the devices and holds the ops table; opencl.h lists the
 * backend's other files (buffers, launching, GEMM, data movement).
 */
#include <config.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <clblast_c.h>

#include "opencl.h"
#include "core/error.h"

#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR -1001
#endif

static const sn_backend_ops cl_ops;

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

/* The n kernels built into slots (NULL where never built), released. */
static void release_kernels(cl_kernel *slots, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (slots[i])
            clReleaseKernel(slots[i]);
}

static void cl_device_free(sn_device *dev)
{
    cl_dev *cd = dev ? dev->impl : NULL;

    if (cd) {
        if (cd->queue)
            clFinish(cd->queue);
        for (int v = 0; v < BIN_VARIANTS; v++)
            release_kernels(cd->binary[v], SN_BINARY_COUNT);
        release_kernels(cd->unary, SN_UNARY_COUNT);
        release_kernels(cd->reduce, K_REDUCE_COUNT);
        release_kernels(cd->single, K_SINGLE_COUNT);
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
        if (cd->sub)
            clReleaseDevice(cd->id);
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
    dev->host_cores = (type & CL_DEVICE_TYPE_CPU) != 0;
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
        return sn_error(sn_cl_status(err), "cl:%u: clCreateContext failed: %s",
                        index, sn_cl_error_name(err));
    }
    pthread_mutex_lock(&open_lock);
    open_devices++;
    pthread_mutex_unlock(&open_lock);
    cd->queue = clCreateCommandQueue(cd->ctx, id, 0, &err);
    if (!cd->queue || err != CL_SUCCESS) {
        cd->queue = NULL;
        cl_device_free(dev);
        return sn_error(sn_cl_status(err),
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
 * A partition of a CPU device by device fission (OpenCL 1.2's
 * clCreateSubDevices): `count` of its compute units as a sub-device, with
 * a context and queue of its own.  OpenCL lets a program choose how many
 * compute units a sub-device has, not which: the driver picks them, and
 * `first` only places the partition in its device list's bookkeeping.
 * Refused, naming the device and why, for a device that is not a CPU or
 * whose driver does not partition by counts.
 */
static shardnet_status cl_partition(sn_device *whole, unsigned first,
                                    unsigned count, const char *name,
                                    sn_device **out)
{
    cl_dev *of = whole->impl;
    cl_device_type type = 0;
    cl_device_partition_property kinds[8] = {0};
    cl_device_partition_property by_counts[] = {
        CL_DEVICE_PARTITION_BY_COUNTS, (cl_device_partition_property)count,
        CL_DEVICE_PARTITION_BY_COUNTS_LIST_END, 0};
    cl_platform_id platform = NULL;
    cl_device_id sub = NULL;
    cl_uint made = 0;
    size_t size = 0;
    int can = 0;
    shardnet_status st;
    cl_int err;

    (void)first;
    *out = NULL;
    clGetDeviceInfo(of->id, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    if (!(type & CL_DEVICE_TYPE_CPU))
        return sn_error(SHARDNET_UNSUPPORTED,
                        "%s is not a CPU device: only CPU devices are cut "
                        "into partitions",
                        of->label);
    err = clGetDeviceInfo(of->id, CL_DEVICE_PARTITION_PROPERTIES,
                          sizeof kinds, kinds, &size);
    for (size_t i = 0; err == CL_SUCCESS && i < size / sizeof kinds[0]; i++)
        can |= kinds[i] == CL_DEVICE_PARTITION_BY_COUNTS;
    if (!can)
        return sn_error(SHARDNET_UNSUPPORTED,
                        "%s: its driver (%s) does not partition it by counts "
                        "of compute units (CL_DEVICE_PARTITION_PROPERTIES%s)",
                        of->label, whole->info.driver,
                        err == CL_SUCCESS ? "" : ": not answered");
    err = clGetDeviceInfo(of->id, CL_DEVICE_PLATFORM, sizeof platform,
                          &platform, NULL);
    if (err == CL_SUCCESS)
        err = clCreateSubDevices(of->id, by_counts, 1, &sub, &made);
    if (err != CL_SUCCESS || made != 1)
        return sn_error(SHARDNET_DEVICE_ERROR,
                        "%s: clCreateSubDevices of %u compute units failed: "
                        "%s",
                        of->label, count,
                        err == CL_SUCCESS ? "no sub-device"
                                          : sn_cl_error_name(err));
    if ((st = open_device(platform, sub, whole->info.index, out)) !=
        SHARDNET_OK) {
        clReleaseDevice(sub);
        return st;
    }
    cl_dev *cd = (*out)->impl;
    cd->sub = 1;
    cd->config = of->config;
    snprintf((*out)->info.name, sizeof (*out)->info.name, "%s", name);
    snprintf(cd->label, sizeof cd->label, "%s (%s)", name,
             (*out)->info.model);
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

    /* OpenCL devices are not shared out between processes: of args, only
     * the context's configuration matters. */
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
            ((cl_dev *)dev->impl)->config = args->config;
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

/* How far the kernels of kernels_cl/ go in each kernel's variants
 * (backend.h's enums, in order): elementwise.cl has a binary_<op>_* and a
 * unary_<op> kernel for each one, reduce.cl sums (a mean is a sum scaled)
 * and maxima, and the other reductions in reduce_op_*, conv.cl pool_max
 * and pool_avg. */
static const int cl_variants[SN_KERNEL_COUNT] = {
    [SN_KERNEL_BINARY] = SN_BINARY_COUNT,
    [SN_KERNEL_UNARY] = SN_UNARY_COUNT,
    [SN_KERNEL_REDUCE] = SN_REDUCE_COUNT,
    [SN_KERNEL_POOL] = SN_POOL_COUNT,
};

static int cl_supports(sn_device *dev, sn_kernel k, int variant)
{
    (void)dev;
    return sn_variants_within(cl_variants, k, variant);
}

static const sn_backend_ops cl_ops = {
    .abi = SN_BACKEND_ABI,
    .kind = "cl",
    .device_free = cl_device_free,
    .buffer_alloc = sn_cl_buffer_alloc,
    .buffer_free = sn_cl_buffer_free,
    .buffer_write = sn_cl_buffer_write,
    .buffer_read = sn_cl_buffer_read,
    .buffer_map = sn_cl_buffer_map,
    .buffer_unmap = sn_cl_buffer_unmap,
    .buffer_write_async = sn_cl_buffer_write_async,
    .buffer_read_async = sn_cl_buffer_read_async,
    .gemm = sn_cl_gemm,
    .binary = sn_cl_binary,
    .unary = sn_cl_unary,
    .softmax = sn_cl_softmax,
    .reduce = sn_cl_reduce,
    .where = sn_cl_where,
    .copy = sn_cl_copy,
    .im2col = sn_cl_im2col,
    .pool = sn_cl_pool,
    .dwconv = sn_cl_dwconv,
    .qgemm = sn_cl_qgemm,
    .layernorm = sn_cl_layernorm,
    .gather = sn_cl_gather,
    .topk = sn_cl_topk,
    .rnn_cell = sn_cl_rnn_cell,
    .resample = sn_cl_resample,
    .grid_sample = sn_cl_grid_sample,
    .roi_align = sn_cl_roi_align,
    .scan = sn_cl_scan,
    .supports = cl_supports,
    .synchronize = cl_synchronize,
    .event_record = sn_cl_event_record,
    .event_wait = sn_cl_event_wait,
    .event_query = sn_cl_event_query,
    .event_free = sn_cl_event_free,
    .partition = cl_partition,
};

const sn_backend sn_opencl_backend = {
    .abi = SN_BACKEND_ABI,
    .kind = "cl",
    .discover = cl_discover,
};
