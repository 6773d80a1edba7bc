/*
 * The CUDA device's buffers and its stream's copies and events: one
 * cudaMalloc'd allocation per buffer, copies enqueued on the device's
 * stream (a blocking one then waits for the stream, so that it comes
 * after everything enqueued before it, as backend.h's execution model
 * asks), mappings (a copy of the range in pinned host memory, written
 * back on unmap when writable), pinned host memory for the collectives'
 * staging, and events, each a runtime event recorded on the stream.
 *
 * The asynchronous copies hand the caller's memory to cudaMemcpyAsync as
 * it is.  With pageable memory the runtime may finish the copy before
 * returning (a read always does), which the contract allows; only pinned
 * memory makes them truly overlap: the collectives' staging, a plan's
 * outputs and a pipeline's boundary values live in pinned memory of a
 * device's (host_alloc, through sn_staging_alloc); a run's inputs are the
 * caller's memory, taken as it is.
 */
#include <config.h>

#include <stdlib.h>

#include "cuda.h"

/* --- buffers ----------------------------------------------------------- */

/* Mapped pinned host memory of `bytes` for a buffer of dev's: its host
 * pointer in b->host, the device's pointer to it in *dptr. */
static shardnet_status alloc_mapped(sn_device *dev, cuda_buf *b, size_t bytes,
                                    void **dptr)
{
    cudaError_t err =
        cudaHostAlloc(&b->host, bytes, cudaHostAllocMapped |
                                           cudaHostAllocPortable);
    if (err != cudaSuccess) {
        b->host = NULL;
        return sn_cuda_error(dev, err, "cudaHostAlloc (mapped) of %zu bytes",
                             bytes);
    }
    if ((err = cudaHostGetDevicePointer(dptr, b->host, 0)) != cudaSuccess) {
        shardnet_status st =
            sn_cuda_error(dev, err, "cudaHostGetDevicePointer");
        cudaFreeHost(b->host);
        b->host = NULL;
        return st;
    }
    return SHARDNET_OK;
}

shardnet_status sn_cuda_buffer_alloc(sn_device *dev, size_t bytes,
                                     sn_buffer **out)
{
    const cuda_dev *cd = dev->impl;
    cuda_buf *b;
    void *mem = NULL;
    cudaError_t err;
    shardnet_status st = sn_cuda_enter(dev);

    if (st != SHARDNET_OK)
        return st;
    if (!(b = calloc(1, sizeof *b)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s: buffer record",
                        dev->info.name);
    /* An allocation of 0 bytes gives no pointer: an empty buffer still
     * gets one float, so that its handle is a real allocation. */
    if (cd->mapped) {
        st = alloc_mapped(dev, b, bytes ? bytes : sizeof(float), &mem);
        if (st != SHARDNET_OK) {
            free(b);
            return st;
        }
    } else if ((err = cudaMalloc(&mem, bytes ? bytes : sizeof(float))) !=
               cudaSuccess) {
        free(b);
        return sn_cuda_error(dev, err, "cudaMalloc of %zu bytes", bytes);
    }
    b->pub.dev = dev;
    b->pub.size = bytes;
    b->pub.handle = mem;
    *out = &b->pub;
    return SHARDNET_OK;
}

void sn_cuda_buffer_free(sn_buffer *buf)
{
    cuda_buf *b = (cuda_buf *)buf;
    if (!buf)
        return;
    /* cudaFree waits for the work in flight on the device before it frees
     * (and can report nothing from here); for mapped memory the stream is
     * waited for first, as cudaFreeHost does not. */
    if (sn_cuda_enter_quietly(buf->dev)) {
        if (b->host) {
            cudaStreamSynchronize(((cuda_dev *)buf->dev->impl)->stream);
            cudaFreeHost(b->host);
        } else {
            cudaFree(buf->handle);
        }
    }
    (void)cudaGetLastError();
    free(b);
}

/* A copy of bytes between host memory and buf at offset, enqueued on the
 * device's stream, then waited for when block is set. */
static shardnet_status copy(sn_buffer *buf, size_t offset, void *host,
                            size_t bytes, int to_device, int block)
{
    sn_device *dev = buf->dev;
    cuda_dev *cd = dev->impl;
    char *mem = (char *)buf->handle + offset;
    cudaError_t err;
    shardnet_status st = sn_cuda_enter(dev);

    if (st != SHARDNET_OK || bytes == 0)
        return st;
    /* Mapped memory is the host's on both sides: the runtime tells the
     * direction from the pointers (unified addressing). */
    enum cudaMemcpyKind kind = ((const cuda_buf *)buf)->host ? cudaMemcpyDefault
                               : to_device ? cudaMemcpyHostToDevice
                                           : cudaMemcpyDeviceToHost;
    err = cudaMemcpyAsync(to_device ? (void *)mem : host,
                          to_device ? (const void *)host : mem, bytes, kind,
                          cd->stream);
    if (err != cudaSuccess)
        return sn_cuda_error(dev, err, "cudaMemcpyAsync %s %zu bytes at %zu",
                             to_device ? "writing" : "reading", bytes,
                             offset);
    if (block && (err = cudaStreamSynchronize(cd->stream)) != cudaSuccess)
        return sn_cuda_error(dev, err,
                             "cudaStreamSynchronize after %s %zu bytes at "
                             "%zu",
                             to_device ? "writing" : "reading", bytes, offset);
    return SHARDNET_OK;
}

shardnet_status sn_cuda_buffer_write(sn_buffer *buf, size_t offset,
                                     const void *src, size_t bytes)
{
    return copy(buf, offset, (void *)src, bytes, 1, 1);
}

shardnet_status sn_cuda_buffer_read(sn_buffer *buf, size_t offset, void *dst,
                                    size_t bytes)
{
    return copy(buf, offset, dst, bytes, 0, 1);
}

shardnet_status sn_cuda_buffer_write_async(sn_buffer *buf, size_t offset,
                                           const void *src, size_t bytes)
{
    return copy(buf, offset, (void *)src, bytes, 1, 0);
}

shardnet_status sn_cuda_buffer_read_async(sn_buffer *buf, size_t offset,
                                          void *dst, size_t bytes)
{
    return copy(buf, offset, dst, bytes, 0, 0);
}

/* --- mapping ----------------------------------------------------------- */

/* A mapping is pinned host memory holding a copy of the range: this
 * header, then the floats from SN_CUDA_MAP_HEAD bytes on (the pointer the
 * caller gets, aligned for any type). */
typedef struct cuda_mapping {
    size_t offset, bytes;
    int flags;
} cuda_mapping;
#define SN_CUDA_MAP_HEAD 64

/* A buffer in mapped host memory is mapped by waiting for the stream
 * (the work before the mapping has written it) and handing out its host
 * pointer; unmapping it does nothing.  Otherwise the range is always read
 * in, write-only or not, so that unmapping a write-only mapping that set
 * part of it writes back what was there. */
shardnet_status sn_cuda_buffer_map(sn_buffer *buf, size_t offset,
                                   size_t bytes, int flags, void **ptr)
{
    sn_device *dev = buf->dev;
    const cuda_buf *b = (const cuda_buf *)buf;
    char *base = NULL;
    cudaError_t err;
    shardnet_status st = sn_cuda_enter(dev);

    if (st != SHARDNET_OK)
        return st;
    if (b->host) {
        if ((st = sn_synchronize(dev)) != SHARDNET_OK)
            return st;
        *ptr = (char *)b->host + offset;
        return SHARDNET_OK;
    }
    err = cudaMallocHost((void **)&base, SN_CUDA_MAP_HEAD + bytes);
    if (err != cudaSuccess)
        return sn_cuda_error(dev, err,
                             "cudaMallocHost of %zu bytes to map a buffer",
                             bytes);
    *(cuda_mapping *)base = (cuda_mapping){offset, bytes, flags};
    st = copy(buf, offset, base + SN_CUDA_MAP_HEAD, bytes, 0, 1);
    if (st != SHARDNET_OK) {
        cudaFreeHost(base);
        return st;
    }
    *ptr = base + SN_CUDA_MAP_HEAD;
    return SHARDNET_OK;
}

/* A writable mapping's contents go back to the buffer (waited for: the
 * pinned memory is freed next). */
shardnet_status sn_cuda_buffer_unmap(sn_buffer *buf, void *ptr)
{
    if (((const cuda_buf *)buf)->host) /* the buffer's own memory */
        return SHARDNET_OK;
    char *base = (char *)ptr - SN_CUDA_MAP_HEAD;
    const cuda_mapping *m = (const cuda_mapping *)base;
    shardnet_status st = SHARDNET_OK;
    if (m->flags & SN_MAP_WRITE)
        st = copy(buf, m->offset, ptr, m->bytes, 1, 1);
    if (sn_cuda_enter_quietly(buf->dev))
        cudaFreeHost(base);
    (void)cudaGetLastError();
    return st;
}

/* --- staging memory ---------------------------------------------------- */

/* Pinned host memory, portable (every device's copies run from it at the
 * link's speed, and asynchronously), for the collectives' staging.  NULL
 * when the runtime refuses (pinned memory is limited): the caller falls
 * back to plain memory. */
void *sn_cuda_host_alloc(sn_device *dev, size_t bytes)
{
    void *p = NULL;
    if (!sn_cuda_enter_quietly(dev))
        return NULL;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return p;
}

void sn_cuda_host_free(sn_device *dev, void *ptr)
{
    if (sn_cuda_enter_quietly(dev))
        cudaFreeHost(ptr);
    (void)cudaGetLastError();
}

/* --- events ------------------------------------------------------------ */

shardnet_status sn_cuda_event_record(sn_device *dev, sn_event **out)
{
    cuda_dev *cd = dev->impl;
    cuda_marker *m;
    cudaError_t err;
    shardnet_status st = sn_cuda_enter(dev);

    if (st != SHARDNET_OK)
        return st;
    if (!(m = calloc(1, sizeof *m)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s: event", dev->info.name);
    /* No timing: the cheapest event, which is all a marker needs. */
    err = cudaEventCreateWithFlags(&m->ev, cudaEventDisableTiming);
    if (err != cudaSuccess) {
        free(m);
        return sn_cuda_error(dev, err, "cudaEventCreateWithFlags");
    }
    if ((err = cudaEventRecord(m->ev, cd->stream)) != cudaSuccess) {
        cudaEventDestroy(m->ev);
        free(m);
        return sn_cuda_error(dev, err, "cudaEventRecord");
    }
    m->pub.dev = dev;
    *out = &m->pub;
    return SHARDNET_OK;
}

shardnet_status sn_cuda_event_wait(sn_event *ev)
{
    cuda_marker *m = (cuda_marker *)ev;
    cudaError_t err;
    shardnet_status st = sn_cuda_enter(ev->dev);

    if (st != SHARDNET_OK)
        return st;
    /* An error of the work before the event comes back here. */
    if ((err = cudaEventSynchronize(m->ev)) != cudaSuccess)
        return sn_cuda_error(ev->dev, err,
                             "cudaEventSynchronize (the work before the "
                             "event)");
    return SHARDNET_OK;
}

shardnet_status sn_cuda_event_query(sn_event *ev, int *done)
{
    cuda_marker *m = (cuda_marker *)ev;
    cudaError_t err;
    shardnet_status st = sn_cuda_enter(ev->dev);

    if (st != SHARDNET_OK)
        return st;
    err = cudaEventQuery(m->ev);
    if (err == cudaErrorNotReady) {
        *done = 0;
        return SHARDNET_OK;
    }
    if (err != cudaSuccess)
        return sn_cuda_error(ev->dev, err,
                             "cudaEventQuery (the work before the event)");
    *done = 1;
    return SHARDNET_OK;
}

void sn_cuda_event_free(sn_event *ev)
{
    cuda_marker *m = (cuda_marker *)ev;
    if (!ev)
        return;
    /* Destroying an event not yet reached is allowed: the runtime frees it
     * once it completes. */
    if (sn_cuda_enter_quietly(ev->dev))
        cudaEventDestroy(m->ev);
    (void)cudaGetLastError();
    free(m);
}
