/*
 * The CPU device's buffers: host memory, allocated bound to the package's
 * NUMA node (plain aligned memory where the OS cannot bind), so that
 * mapping is zero-copy and an input may lend its own memory.  Each
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

/* Allocation granule: a cache line, and room for vector loads. */
#define CPU_ALIGN 64

shardnet_status sn_cpu_buffer_alloc(sn_device *dev, size_t bytes,
                                    sn_buffer **out)
{
    cpu_device *cd = dev->impl;
    size_t len = bytes ? bytes : 1;
    cpu_buf *buf;
    void *mem = NULL;

    if (dev->info.max_alloc && bytes > dev->info.max_alloc)
        return sn_error(SHARDNET_OUT_OF_MEMORY,
                        "%s: buffer of %zu bytes exceeds the device's %llu",
                        dev->info.name, bytes,
                        (unsigned long long)dev->info.max_alloc);
    buf = calloc(1, sizeof *buf);
    if (!buf)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s: buffer", dev->info.name);
    if (cd->membind_ok)
        mem = hwloc_alloc_membind(cd->topo, len, cd->nodeset,
                                  HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET);
    if (mem) {
        buf->pub.handle = buf; /* marks hwloc memory, freed with hwloc_free */
    } else if (posix_memalign(&mem, CPU_ALIGN,
                              (len + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN)) {
        free(buf);
        return sn_error(SHARDNET_OUT_OF_MEMORY,
                        "%s: cannot allocate %zu bytes", dev->info.name, bytes);
    }
    buf->pub.dev = dev;
    buf->pub.size = bytes;
    buf->host = mem;
    *out = &buf->pub;
    return SHARDNET_OK;
}

void sn_cpu_buffer_free(sn_buffer *buf)
{
    cpu_device *cd = buf->dev->impl;
    /* A queued kernel may still use it: drain first (cheap when idle). */
    sn_cpu_synchronize(buf->dev);
    sn_cpu_drop_packed(cd, buf);
    cpu_buf *cb = (cpu_buf *)buf;
    void *mem = cb->own_host ? cb->own_host : cb->host; /* not a loan */
    if (buf->handle)
        hwloc_free(cd->topo, mem, buf->size ? buf->size : 1);
    else
        free(mem);
    free(buf);
}

shardnet_status sn_cpu_buffer_write(sn_buffer *buf, size_t offset,
                                    const void *src, size_t bytes)
{
    sn_cpu_synchronize(buf->dev); /* in order after queued kernels */
    memcpy((char *)((cpu_buf *)buf)->host + offset, src, bytes);
    return SHARDNET_OK;
}

shardnet_status sn_cpu_buffer_read(sn_buffer *buf, size_t offset, void *dst,
                                   size_t bytes)
{
    sn_cpu_synchronize(buf->dev);
    memcpy(dst, (char *)((cpu_buf *)buf)->host + offset, bytes);
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
    *ptr = (char *)((cpu_buf *)buf)->host + offset;
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
