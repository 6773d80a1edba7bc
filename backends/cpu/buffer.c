/*
 * The CPU device's buffers: host memory, allocated bound to the package's
 * NUMA node (plain aligned memory where the OS cannot bind), so that
 * mapping is zero-copy and an input may lend its own memory; or the
 * caller's memory in place (a weight's, buffer_wrap).  A constant GEMM
 * operand's packed copy may replace the buffer's memory (tasks.c); its
 * bytes are unpacked again if anything else reads them.  Each
 * blocking access first drains the device's queue, which keeps it in
 * order with the tasks queued before it; an asynchronous copy is a task
 * of its own on the queue (tasks.c makes it).
 */
#include <config.h>

#include <hwloc.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "core/error.h"
#include "core/file.h"

/* Allocation granule: a cache line, and room for vector loads. */
#define CPU_ALIGN 64

/* len bytes of host memory for cb, bound to the package's node where the
 * OS can (cb->pub.handle then marks hwloc memory); 0 when out of memory. */
static int alloc_host(cpu_device *cd, cpu_buf *cb, size_t len)
{
    void *mem = NULL;
    cb->pub.handle = NULL;
    if (cd->membind_ok)
        mem = hwloc_alloc_membind(cd->topo, len, cd->nodeset,
                                  HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET);
    if (mem)
        cb->pub.handle = cb; /* freed with hwloc_free */
    else if (posix_memalign(&mem, CPU_ALIGN,
                            (len + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN))
        return 0;
    cb->host = mem;
    return 1;
}

static void free_host(cpu_device *cd, cpu_buf *cb, void *mem)
{
    if (cb->pub.handle)
        hwloc_free(cd->topo, mem, cb->pub.size ? cb->pub.size : 1);
    else
        free(mem);
}

shardnet_status sn_cpu_buffer_alloc(sn_device *dev, size_t bytes,
                                    sn_buffer **out)
{
    cpu_device *cd = dev->impl;
    cpu_buf *buf;

    if (dev->info.max_alloc && bytes > dev->info.max_alloc)
        return sn_error(SHARDNET_OUT_OF_MEMORY,
                        "%s: buffer of %zu bytes exceeds the device's %llu",
                        dev->info.name, bytes,
                        (unsigned long long)dev->info.max_alloc);
    buf = calloc(1, sizeof *buf);
    if (!buf)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s: buffer", dev->info.name);
    buf->pub.dev = dev;
    buf->pub.size = bytes;
    if (!alloc_host(cd, buf, bytes ? bytes : 1)) {
        free(buf);
        return sn_error(SHARDNET_OUT_OF_MEMORY,
                        "%s: cannot allocate %zu bytes", dev->info.name, bytes);
    }
    *out = &buf->pub;
    return SHARDNET_OK;
}

int sn_cpu_buffer_replace(cpu_device *cd, cpu_buf *cb,
                          const struct packed_entry *e)
{
    size_t rows = e->trans_b ? e->n : e->k, cols = e->trans_b ? e->k : e->n;
    if (cb->wrapped || cb->own_host || !cb->host || !cb->pub.size ||
        e->offset != 0 ||
        e->ldb != cols || rows * cols * sizeof(float) != cb->pub.size)
        return 0;
    free_host(cd, cb, cb->host);
    cb->host = NULL;
    cb->replaced = e;
    return 1;
}

void *sn_cpu_buffer_host(cpu_buf *cb)
{
    const struct packed_entry *e = cb->replaced;
    if (cb->host || !e)
        return cb->host;
    if (!alloc_host(cb->pub.dev->impl, cb, cb->pub.size))
        return NULL;
    sn_cpu_unpack_b(e->pb, e->trans_b, e->ldb, cb->host);
    cb->replaced = NULL;
    return cb->host;
}

/* The buffer's memory for a blocking access, restored if a packed copy
 * replaced it; NULL (error set) when out of memory. */
static char *host_of(sn_buffer *buf)
{
    char *h = sn_cpu_buffer_host((cpu_buf *)buf);
    if (!h)
        sn_error(SHARDNET_OUT_OF_MEMORY,
                 "%s: no memory to restore a packed weight's %zu bytes",
                 buf->dev->info.name, buf->size);
    return h;
}

shardnet_status sn_cpu_buffer_wrap(sn_device *dev, const void *host,
                                   size_t bytes, unsigned flags,
                                   sn_buffer **out)
{
    cpu_buf *buf = calloc(1, sizeof *buf);
    if (!buf)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s: buffer", dev->info.name);
    buf->pub.dev = dev;
    buf->pub.size = bytes;
    buf->host = (void *)host; /* never written: a constant's */
    buf->wrapped = 1;
    buf->wrap_flags = flags;
    *out = &buf->pub;
    return SHARDNET_OK;
}

void sn_cpu_buffer_drop_pages(const sn_buffer *buf, const void *start,
                              size_t bytes)
{
    const cpu_buf *cb = (const cpu_buf *)buf;
    if (cb->wrapped && (cb->wrap_flags & SN_WRAP_DROPPABLE))
        sn_drop_file_pages(start, bytes);
}

void sn_cpu_buffer_free(sn_buffer *buf)
{
    cpu_device *cd = buf->dev->impl;
    /* A queued kernel may still use it: drain first (cheap when idle). */
    sn_cpu_synchronize(buf->dev);
    sn_cpu_drop_packed(cd, buf);
    cpu_buf *cb = (cpu_buf *)buf;
    void *mem = cb->own_host ? cb->own_host : cb->host; /* not a loan */
    if (!cb->wrapped && mem) /* NULL: a packed copy replaced it */
        free_host(cd, cb, mem);
    free(buf);
}

shardnet_status sn_cpu_buffer_write(sn_buffer *buf, size_t offset,
                                    const void *src, size_t bytes)
{
    sn_cpu_synchronize(buf->dev); /* in order after queued kernels */
    char *h = host_of(buf);
    if (!h)
        return SHARDNET_OUT_OF_MEMORY;
    memcpy(h + offset, src, bytes);
    return SHARDNET_OK;
}

shardnet_status sn_cpu_buffer_read(sn_buffer *buf, size_t offset, void *dst,
                                   size_t bytes)
{
    sn_cpu_synchronize(buf->dev);
    char *h = host_of(buf);
    if (!h)
        return SHARDNET_OUT_OF_MEMORY;
    memcpy(dst, h + offset, bytes);
    return SHARDNET_OK;
}

static shardnet_status enqueue_copy(int kind, sn_buffer *buf, size_t offset,
                                    const void *src, void *dst, size_t bytes)
{
    task t = {.kind = kind,
              .host = {.buf = buf, .offset = offset, .bytes = bytes,
                       .src = src, .dst = dst}};
    return sn_cpu_enqueue(buf->dev, &t);
}

shardnet_status sn_cpu_buffer_write_async(sn_buffer *buf, size_t offset,
                                          const void *src, size_t bytes)
{
    return enqueue_copy(TASK_WRITE, buf, offset, src, NULL, bytes);
}

shardnet_status sn_cpu_buffer_read_async(sn_buffer *buf, size_t offset,
                                         void *dst, size_t bytes)
{
    return enqueue_copy(TASK_READ, buf, offset, NULL, dst, bytes);
}

shardnet_status sn_cpu_buffer_map(sn_buffer *buf, size_t offset, size_t bytes,
                                  int flags, void **ptr)
{
    sn_cpu_synchronize(buf->dev);
    char *h = host_of(buf);
    if (!h)
        return SHARDNET_OUT_OF_MEMORY;
    *ptr = h + offset;
    return SHARDNET_OK;
}

shardnet_status sn_cpu_buffer_unmap(sn_buffer *buf, void *ptr)
{
    return SHARDNET_OK;
}

shardnet_status sn_cpu_buffer_lend(sn_buffer *buf, void *ptr)
{
    cpu_buf *cb = (cpu_buf *)buf;
    sn_cpu_synchronize(buf->dev); /* queued kernels still use the old memory */
    if (!host_of(buf))
        return SHARDNET_OUT_OF_MEMORY;
    if (ptr) {
        if (!cb->own_host)
            cb->own_host = cb->host;
        cb->host = ptr;
    } else if (cb->own_host) {
        cb->host = cb->own_host;
        cb->own_host = NULL;
    }
    return SHARDNET_OK;
}
