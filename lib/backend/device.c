/*
 * The checked entry points that concern a device as a whole (see
 * backend.h): the names of its kernels and their variants, the supports
 * query, buffers and their copies, the stream's asynchronous copies and
 * events (with the stand-ins every caller may count on when a backend
 * lacks them), synchronize, the memory the planner may use, the binding
 * of a driving thread.  The kernels' own checks are in kernels.c; the
 * check both share is sn_check_device (check.h).
 */
#include <config.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "backend/check.h"
#include "core/config.h"
#include "core/error.h"

static const char *const binary_names[] = {
#define SN_NAME_(name, str) str,
    SN_BINARY_OP_MAP(SN_NAME_)};
static const char *const unary_names[] = {SN_UNARY_OP_MAP(SN_NAME_)};
static const char *const reduce_names[] = {SN_REDUCE_OP_MAP(SN_NAME_)};
static const char *const kernel_names[] = {SN_KERNEL_MAP(SN_NAME_)
#undef SN_NAME_
};

const char *sn_binary_op_name(sn_binary_op op)
{
    return (unsigned)op < SN_BINARY_COUNT ? binary_names[op] : "?";
}

const char *sn_unary_op_name(sn_unary_op op)
{
    return (unsigned)op < SN_UNARY_COUNT ? unary_names[op] : "?";
}

const char *sn_reduce_op_name(sn_reduce_op op)
{
    return (unsigned)op < SN_REDUCE_COUNT ? reduce_names[op] : "?";
}

const char *sn_kernel_name(sn_kernel k)
{
    return (unsigned)k < SN_KERNEL_COUNT ? kernel_names[k] : "?";
}

int sn_kernel_variants(sn_kernel k)
{
    switch (k) {
    case SN_KERNEL_BINARY:
        return SN_BINARY_COUNT;
    case SN_KERNEL_UNARY:
        return SN_UNARY_COUNT;
    case SN_KERNEL_REDUCE:
        return SN_REDUCE_COUNT;
    case SN_KERNEL_POOL:
        return SN_POOL_COUNT;
    default:
        return 0;
    }
}

const char *sn_kernel_variant_name(sn_kernel k, int variant, char *buf,
                                   size_t cap)
{
    const char *v = NULL;
    if (variant >= 0 && variant < sn_kernel_variants(k))
        v = k == SN_KERNEL_BINARY   ? sn_binary_op_name((sn_binary_op)variant)
            : k == SN_KERNEL_UNARY  ? sn_unary_op_name((sn_unary_op)variant)
            : k == SN_KERNEL_REDUCE ? sn_reduce_op_name((sn_reduce_op)variant)
            : variant == SN_POOL_MAX ? "max"
                                     : "avg";
    snprintf(buf, cap, "%s%s%s", sn_kernel_name(k), v ? "/" : "",
             v ? v : "");
    return buf;
}

int sn_kernel_desc_variant(sn_kernel k, const sn_kernel_desc *d)
{
    switch (k) {
    case SN_KERNEL_BINARY:
        return (int)d->binary.op;
    case SN_KERNEL_UNARY:
        return (int)d->unary.op;
    case SN_KERNEL_REDUCE:
        return (int)d->reduce.op;
    case SN_KERNEL_POOL:
        return (int)d->pool.op;
    default:
        return SN_VARIANT_ANY;
    }
}

/* Has ops the member that runs k? */
static int has_kernel(const sn_backend_ops *ops, sn_kernel k)
{
    switch (k) {
    case SN_KERNEL_GEMM:
        return ops->gemm != NULL;
    case SN_KERNEL_BINARY:
        return ops->binary != NULL;
    case SN_KERNEL_UNARY:
        return ops->unary != NULL;
    case SN_KERNEL_SOFTMAX:
        return ops->softmax != NULL;
    case SN_KERNEL_REDUCE:
        return ops->reduce != NULL;
    case SN_KERNEL_WHERE:
        return ops->where != NULL;
    case SN_KERNEL_COPY:
        return ops->copy != NULL;
    case SN_KERNEL_IM2COL:
        return ops->im2col != NULL;
    case SN_KERNEL_POOL:
        return ops->pool != NULL;
    case SN_KERNEL_LAYERNORM:
        return ops->layernorm != NULL;
    case SN_KERNEL_GATHER:
        return ops->gather != NULL;
    case SN_KERNEL_TOPK:
        return ops->topk != NULL;
    case SN_KERNEL_RNN_CELL:
        return ops->rnn_cell != NULL;
    case SN_KERNEL_RESAMPLE:
        return ops->resample != NULL;
    case SN_KERNEL_GRID_SAMPLE:
        return ops->grid_sample != NULL;
    case SN_KERNEL_ROI_ALIGN:
        return ops->roi_align != NULL;
    case SN_KERNEL_SCAN:
        return ops->scan != NULL;
    case SN_KERNEL_DWCONV:
        return ops->dwconv != NULL;
    case SN_KERNEL_QGEMM:
        return ops->qgemm != NULL;
    case SN_KERNEL_COUNT:
        break;
    }
    return 0;
}

int sn_device_supports(const sn_device *dev, sn_kernel k, int variant)
{
    if (!dev || dev->remote || (unsigned)k >= SN_KERNEL_COUNT ||
        !has_kernel(dev->ops, k))
        return 0;
    if (variant != SN_VARIANT_ANY &&
        (variant < 0 || variant >= sn_kernel_variants(k)))
        return 0;
    return dev->ops->supports
               ? dev->ops->supports((sn_device *)dev, k, variant) != 0
               : 1;
}

int sn_variants_within(const int implemented[SN_KERNEL_COUNT], sn_kernel k,
                       int variant)
{
    if ((unsigned)k >= SN_KERNEL_COUNT)
        return 0;
    if (variant == SN_VARIANT_ANY)
        return implemented[k] >= sn_kernel_variants(k);
    return variant >= 0 && variant < implemented[k];
}

shardnet_status sn_check_device(const sn_device *dev, const void *member,
                                const char *what)
{
    if (!dev)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s: no device", what);
    if (dev->remote)
        return sn_error(SHARDNET_UNSUPPORTED,
                        "%s: device %s belongs to process %u", what,
                        dev->info.name, dev->process);
    if (!member)
        return sn_error(SHARDNET_UNSUPPORTED, "%s is not supported on %s",
                        what, dev->info.name);
    return SHARDNET_OK;
}

shardnet_status sn_buffer_alloc(sn_device *dev, size_t bytes, sn_buffer **out)
{
    shardnet_status st = sn_check_device(
        dev, dev ? dev->ops->buffer_alloc : NULL, "buffer allocation");
    if (st != SHARDNET_OK)
        return st;
    if (!out)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "buffer: out is NULL");
    *out = NULL;
    return dev->ops->buffer_alloc(dev, bytes, out);
}

shardnet_status sn_buffer_wrap(sn_device *dev, const void *host, size_t bytes,
                               unsigned flags, sn_buffer **out)
{
    if (!dev || !dev->ops->buffer_wrap || !host || ((uintptr_t)host & 3))
        return SHARDNET_UNSUPPORTED;
    if (!out)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "buffer: out is NULL");
    *out = NULL;
    return dev->ops->buffer_wrap(dev, host, bytes, flags, out);
}

void sn_buffer_free(sn_buffer *buf)
{
    if (buf)
        buf->dev->ops->buffer_free(buf);
}

static shardnet_status check_range(const sn_buffer *buf, size_t offset,
                                   size_t bytes, const void *p,
                                   const char *what)
{
    size_t end;
    if (!buf || (!p && bytes))
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s: NULL argument", what);
    if (__builtin_add_overflow(offset, bytes, &end) || end > buf->size)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "%s on %s: bytes [%zu, %zu+%zu) outside a buffer of %zu",
                        what, buf->dev->info.name, offset, offset, bytes,
                        buf->size);
    return SHARDNET_OK;
}

shardnet_status sn_buffer_write(sn_buffer *buf, size_t offset, const void *src,
                                size_t bytes)
{
    shardnet_status st = check_range(buf, offset, bytes, src, "buffer write");
    if (st != SHARDNET_OK || bytes == 0)
        return st;
    return buf->dev->ops->buffer_write(buf, offset, src, bytes);
}

shardnet_status sn_buffer_read(sn_buffer *buf, size_t offset, void *dst,
                               size_t bytes)
{
    shardnet_status st = check_range(buf, offset, bytes, dst, "buffer read");
    if (st != SHARDNET_OK || bytes == 0)
        return st;
    return buf->dev->ops->buffer_read(buf, offset, dst, bytes);
}

shardnet_status sn_buffer_map(sn_buffer *buf, size_t offset, size_t bytes,
                              int flags, void **ptr)
{
    shardnet_status st = check_range(buf, offset, bytes, ptr, "buffer map");
    if (st != SHARDNET_OK)
        return st;
    if (!buf->dev->ops->buffer_map)
        return sn_error(SHARDNET_UNSUPPORTED, "mapping buffers on %s",
                        buf->dev->info.name);
    return buf->dev->ops->buffer_map(buf, offset, bytes, flags, ptr);
}

shardnet_status sn_buffer_unmap(sn_buffer *buf, void *ptr)
{
    if (!buf || !ptr)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "buffer unmap: NULL");
    if (!buf->dev->ops->buffer_unmap)
        return sn_error(SHARDNET_UNSUPPORTED, "unmapping buffers on %s",
                        buf->dev->info.name);
    return buf->dev->ops->buffer_unmap(buf, ptr);
}

/*
 * Staging memory: a header line, then the caller's bytes.  The header
 * says whose memory it is (the device whose backend gave it, or NULL for
 * plain memory where the backend has none or could not give it: pinned
 * memory is limited), so that it goes back where it came from.
 */
#define STAGING_HEAD 64

typedef struct staging_head {
    sn_device *owner;
} staging_head;

void *sn_staging_alloc(sn_device *dev, size_t bytes)
{
    char *base = NULL;
    sn_device *owner = NULL;
    if (bytes > SIZE_MAX - 2 * STAGING_HEAD) /* the size below would wrap */
        return NULL;
    size_t size =
        STAGING_HEAD + (bytes + STAGING_HEAD - 1) / STAGING_HEAD * STAGING_HEAD;
    if (dev && dev->ops->host_alloc && dev->ops->host_free &&
        (base = dev->ops->host_alloc(dev, size)) != NULL)
        owner = dev;
    if (!base && !(base = aligned_alloc(STAGING_HEAD, size)))
        return NULL;
    ((staging_head *)base)->owner = owner;
    return base + STAGING_HEAD;
}

sn_device *sn_staging_owner(sn_device *const *devs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!devs[i]->remote && devs[i]->ops->host_alloc &&
            devs[i]->ops->host_free)
            return devs[i];
    return NULL;
}

void sn_staging_free(void *ptr)
{
    char *base;
    sn_device *owner;
    if (!ptr)
        return;
    base = (char *)ptr - STAGING_HEAD;
    owner = ((staging_head *)base)->owner;
    if (owner)
        owner->ops->host_free(owner, base);
    else
        free(base);
}

/*
 * The stream's asynchronous copies and events.  A backend without them
 * still serves every caller: its copies block (done before the call
 * returns, which the contract allows), and its events are the device
 * alone, waited for by a synchronize.  Whether an event is the backend's
 * or such a stand-in follows from its device's table (event_record).
 */

shardnet_status sn_buffer_write_async(sn_buffer *buf, size_t offset,
                                      const void *src, size_t bytes)
{
    shardnet_status st =
        check_range(buf, offset, bytes, src, "asynchronous buffer write");
    if (st != SHARDNET_OK || bytes == 0)
        return st;
    if (!buf->dev->ops->buffer_write_async)
        return buf->dev->ops->buffer_write(buf, offset, src, bytes);
    return buf->dev->ops->buffer_write_async(buf, offset, src, bytes);
}

shardnet_status sn_buffer_read_async(sn_buffer *buf, size_t offset, void *dst,
                                     size_t bytes)
{
    shardnet_status st =
        check_range(buf, offset, bytes, dst, "asynchronous buffer read");
    if (st != SHARDNET_OK || bytes == 0)
        return st;
    if (!buf->dev->ops->buffer_read_async)
        return buf->dev->ops->buffer_read(buf, offset, dst, bytes);
    return buf->dev->ops->buffer_read_async(buf, offset, dst, bytes);
}

shardnet_status sn_event_record(sn_device *dev, sn_event **out)
{
    shardnet_status st =
        sn_check_device(dev, dev ? dev->ops->synchronize : NULL, "events");
    if (st != SHARDNET_OK)
        return st;
    if (!out)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "event: out is NULL");
    *out = NULL;
    if (dev->ops->event_record)
        return dev->ops->event_record(dev, out);
    if (!(*out = calloc(1, sizeof **out)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s: event", dev->info.name);
    (*out)->dev = dev;
    return SHARDNET_OK;
}

shardnet_status sn_event_wait(sn_event *ev)
{
    if (!ev)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "event wait: NULL");
    if (ev->dev->ops->event_record)
        return ev->dev->ops->event_wait(ev);
    return sn_synchronize(ev->dev);
}

shardnet_status sn_event_query(sn_event *ev, int *done)
{
    if (!ev || !done)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "event query: NULL");
    if (ev->dev->ops->event_record && ev->dev->ops->event_query)
        return ev->dev->ops->event_query(ev, done);
    /* No way to ask without waiting: wait, and the answer is yes. */
    *done = 1;
    return sn_event_wait(ev);
}

void sn_event_free(sn_event *ev)
{
    if (!ev)
        return;
    if (ev->dev->ops->event_record)
        ev->dev->ops->event_free(ev);
    else
        free(ev);
}

shardnet_status sn_synchronize(sn_device *dev)
{
    shardnet_status st =
        sn_check_device(dev, dev ? dev->ops->synchronize : NULL, "synchronize");
    if (st != SHARDNET_OK)
        return st;
    return dev->ops->synchronize(dev);
}

uint64_t sn_device_memory(const sn_device *dev)
{
    uint64_t have = dev ? dev->info.global_mem : 0;
    uint64_t cap = dev ? sn_config_or_env(dev->config)->memory_limit : 0;
    if (cap && (!have || cap < have))
        have = cap;
    return have;
}

void sn_bind_thread(sn_device *dev, int on)
{
    if (dev && dev->ops && dev->ops->bind_thread)
        dev->ops->bind_thread(dev, on);
}

shardnet_status sn_device_partition(sn_device *dev, unsigned first,
                                    unsigned count, const char *name,
                                    sn_device **out)
{
    unsigned units = dev ? dev->info.compute_units : 0;
    shardnet_status st;
    *out = NULL;
    if (!dev || !dev->ops)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "partition: no device");
    if (dev->remote)
        return sn_error(SHARDNET_UNSUPPORTED,
                        "%s is another process's device: only this "
                        "process's devices are cut into partitions",
                        dev->info.name);
    if (dev->whole)
        return sn_error(SHARDNET_UNSUPPORTED,
                        "%s is a partition already: cut %s instead",
                        dev->info.name, dev->whole->info.name);
    if (!dev->ops->partition)
        return sn_error(SHARDNET_UNSUPPORTED,
                        "%s (%s) cannot be cut into partitions: its "
                        "backend ('%s') has none",
                        dev->info.name, dev->info.model, dev->ops->kind);
    if (count == 0 || first >= units || count > units - first)
        return sn_error(SHARDNET_NO_DEVICE,
                        "%s has %u %s (0 to %u): no units %u to %u",
                        dev->info.name, units,
                        dev->info.kind == SHARDNET_DEVICE_CPU
                            ? "cores"
                            : "compute units",
                        units ? units - 1 : 0, first,
                        first + (count ? count - 1 : 0));
    if ((st = dev->ops->partition(dev, first, count, name, out)) !=
        SHARDNET_OK)
        return st;
    (*out)->whole = dev;
    (*out)->first_unit = first;
    (*out)->process = dev->process;
    (*out)->config = dev->config;
    return SHARDNET_OK;
}
