/*
 * The OpenCL device's buffers and its stream's copies and events: one
 * cl_mem each (host-allocated where the device shares the host's memory,
 * so that mapping is zero-copy), reads and writes on the device's in-order
 * queue, blocking or not, the buffer's list of outstanding mappings,
 * released with it, and events, each a marker on the queue.
 */
#include <config.h>

#include <pthread.h>
#include <stdlib.h>

#include "opencl.h"
#include "core/error.h"

/* --- buffers ----------------------------------------------------------- */

shardnet_status sn_cl_buffer_alloc(sn_device *dev, size_t bytes,
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
        return sn_error(sn_cl_status(err),
                        "%s: clCreateBuffer of %zu bytes failed: %s",
                        dev->info.name, bytes, sn_cl_error_name(err));
    }
    b->pub.dev = dev;
    b->pub.size = bytes;
    b->pub.handle = mem;
    *out = &b->pub;
    return SHARDNET_OK;
}

void sn_cl_buffer_free(sn_buffer *buf)
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

/* What a write or read of bytes at offset of buf returned (err),
 * as a status; doing: "writing" or "reading". */
static shardnet_status transfer_status(const sn_buffer *buf, cl_int err,
                                       const char *doing, size_t bytes,
                                       size_t offset)
{
    if (err != CL_SUCCESS)
        return sn_error(sn_cl_status(err), "%s: %s %zu bytes at %zu failed: %s",
                        buf->dev->info.name, doing, bytes, offset,
                        sn_cl_error_name(err));
    return SHARDNET_OK;
}

/* A copy into or out of a buffer, blocking or left on the queue: then the
 * driver reads `src` or fills `dst` when the copy's turn comes, so the
 * memory must outlive it (the caller's part of the contract, backend.h). */
static shardnet_status write_buffer(sn_buffer *buf, size_t offset,
                                    const void *src, size_t bytes,
                                    cl_bool block)
{
    cl_dev *cd = buf->dev->impl;
    cl_int err = clEnqueueWriteBuffer(cd->queue, buf->handle, block, offset,
                                      bytes, src, 0, NULL, NULL);
    return transfer_status(buf, err, "writing", bytes, offset);
}

static shardnet_status read_buffer(sn_buffer *buf, size_t offset, void *dst,
                                   size_t bytes, cl_bool block)
{
    cl_dev *cd = buf->dev->impl;
    cl_int err = clEnqueueReadBuffer(cd->queue, buf->handle, block, offset,
                                     bytes, dst, 0, NULL, NULL);
    return transfer_status(buf, err, "reading", bytes, offset);
}

shardnet_status sn_cl_buffer_write(sn_buffer *buf, size_t offset,
                                   const void *src, size_t bytes)
{
    return write_buffer(buf, offset, src, bytes, CL_TRUE);
}

shardnet_status sn_cl_buffer_read(sn_buffer *buf, size_t offset,
                                  void *dst, size_t bytes)
{
    return read_buffer(buf, offset, dst, bytes, CL_TRUE);
}

shardnet_status sn_cl_buffer_write_async(sn_buffer *buf, size_t offset,
                                         const void *src, size_t bytes)
{
    return write_buffer(buf, offset, src, bytes, CL_FALSE);
}

shardnet_status sn_cl_buffer_read_async(sn_buffer *buf, size_t offset,
                                        void *dst, size_t bytes)
{
    return read_buffer(buf, offset, dst, bytes, CL_FALSE);
}

shardnet_status sn_cl_buffer_map(sn_buffer *buf, size_t offset,
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
            return sn_error(sn_cl_status(err),
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

shardnet_status sn_cl_buffer_unmap(sn_buffer *buf, void *ptr)
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

/* --- events ------------------------------------------------------------- */

/*
 * An event is a marker with no wait list: on the in-order queue it
 * completes once every command enqueued before it has.  The queue is
 * flushed, so that the marker completes without anyone waiting (a caller
 * may only ever query it).  A command that failed before it makes its
 * status negative where the driver reports that.
 */
shardnet_status sn_cl_event_record(sn_device *dev, sn_event **out)
{
    cl_dev *cd = dev->impl;
    cl_marker *m = malloc(sizeof *m);
    cl_int err;

    if (!m)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s: event", dev->info.name);
    err = clEnqueueMarkerWithWaitList(cd->queue, 0, NULL, &m->ev);
    if (err != CL_SUCCESS) {
        free(m);
        return sn_error(sn_cl_status(err),
                        "%s: enqueueing a marker failed: %s", dev->info.name,
                        sn_cl_error_name(err));
    }
    if ((err = clFlush(cd->queue)) != CL_SUCCESS) {
        clReleaseEvent(m->ev);
        free(m);
        return sn_error(SHARDNET_DEVICE_ERROR, "%s: clFlush failed: %s",
                        dev->info.name, sn_cl_error_name(err));
    }
    m->pub.dev = dev;
    *out = &m->pub;
    return SHARDNET_OK;
}

/* The marker's status: CL_COMPLETE, a state before it, or an error
 * (negative), which comes back as the status the call returns too. */
static shardnet_status marker_status(sn_event *ev, cl_int *status)
{
    cl_int err = clGetEventInfo(((cl_marker *)ev)->ev,
                                CL_EVENT_COMMAND_EXECUTION_STATUS,
                                sizeof *status, status, NULL);
    if (err != CL_SUCCESS)
        return sn_error(SHARDNET_DEVICE_ERROR,
                        "%s: querying an event failed: %s",
                        ev->dev->info.name, sn_cl_error_name(err));
    if (*status < 0)
        return sn_error(SHARDNET_DEVICE_ERROR,
                        "%s: work enqueued before the event failed: %s",
                        ev->dev->info.name, sn_cl_error_name(*status));
    return SHARDNET_OK;
}

shardnet_status sn_cl_event_wait(sn_event *ev)
{
    cl_int status;
    cl_int err = clWaitForEvents(1, &((cl_marker *)ev)->ev);
    if (err != CL_SUCCESS &&
        err != CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
        return sn_error(SHARDNET_DEVICE_ERROR,
                        "%s: waiting for an event failed: %s",
                        ev->dev->info.name, sn_cl_error_name(err));
    return marker_status(ev, &status);
}

shardnet_status sn_cl_event_query(sn_event *ev, int *done)
{
    cl_int status = CL_QUEUED;
    shardnet_status st = marker_status(ev, &status);
    *done = status == CL_COMPLETE || status < 0;
    return st;
}

void sn_cl_event_free(sn_event *ev)
{
    clReleaseEvent(((cl_marker *)ev)->ev);
    free(ev);
}
