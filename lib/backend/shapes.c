/*
 * The shapes device (see backend.h, sn_shapes_device): a device of no
 * backend whose buffers have a size and no memory and whose kernels do
 * nothing.  The planners build a plan of a whole model on it to learn
 * every value's shape, every node's work and the arena's size: no weight
 * is uploaded or read (their buffers wrap nothing), so a model larger
 * than any device plans in the memory of its graph.  It runs every kernel
 * (a shape does not depend on the device), and a plan built on it must
 * never run: a read gives zeros.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"

static shardnet_status buffer_alloc(sn_device *dev, size_t bytes,
                                    sn_buffer **out)
{
    sn_buffer *b = calloc(1, sizeof *b);
    if (!b)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "planning: buffers");
    b->dev = dev;
    b->size = bytes;
    *out = b;
    return SHARDNET_OK;
}

static shardnet_status buffer_wrap(sn_device *dev, const void *host,
                                   size_t bytes, unsigned flags,
                                   sn_buffer **out)
{
    (void)host;
    (void)flags;
    return buffer_alloc(dev, bytes, out);
}

static void buffer_free(sn_buffer *buf)
{
    free(buf);
}

static shardnet_status buffer_write(sn_buffer *buf, size_t offset,
                                    const void *src, size_t bytes)
{
    (void)buf;
    (void)offset;
    (void)src;
    (void)bytes;
    return SHARDNET_OK;
}

static shardnet_status buffer_read(sn_buffer *buf, size_t offset, void *dst,
                                   size_t bytes)
{
    (void)buf;
    (void)offset;
    memset(dst, 0, bytes);
    return SHARDNET_OK;
}

static shardnet_status synchronize(sn_device *dev)
{
    (void)dev;
    return SHARDNET_OK;
}

/* Every kernel: nothing to do. */
#define NOTHING_(name, desc)                                                  \
    static shardnet_status name(sn_device *dev, const desc *d)               \
    {                                                                         \
        (void)dev;                                                            \
        (void)d;                                                              \
        return SHARDNET_OK;                                                   \
    }
NOTHING_(gemm, sn_gemm_desc)
NOTHING_(binary, sn_binary_desc)
NOTHING_(unary, sn_unary_desc)
NOTHING_(softmax, sn_softmax_desc)
NOTHING_(reduce, sn_reduce_desc)
NOTHING_(where, sn_where_desc)
NOTHING_(copy, sn_copy_desc)
NOTHING_(im2col, sn_im2col_desc)
NOTHING_(pool, sn_pool_desc)
NOTHING_(layernorm, sn_layernorm_desc)
NOTHING_(gather, sn_gather_desc)
NOTHING_(topk, sn_topk_desc)
NOTHING_(rnn_cell, sn_rnn_cell_desc)
NOTHING_(resample, sn_resample_desc)
NOTHING_(grid_sample, sn_grid_sample_desc)
NOTHING_(roi_align, sn_roi_align_desc)
NOTHING_(scan, sn_scan_desc)
NOTHING_(dwconv, sn_dwconv_desc)
NOTHING_(qgemm, sn_qgemm_desc)
#undef NOTHING_

static const sn_backend_ops shapes_ops = {
    .abi = SN_BACKEND_ABI,
    .kind = "shapes",
    .buffer_alloc = buffer_alloc,
    .buffer_free = buffer_free,
    .buffer_write = buffer_write,
    .buffer_read = buffer_read,
    .buffer_wrap = buffer_wrap,
    .gemm = gemm,
    .binary = binary,
    .unary = unary,
    .softmax = softmax,
    .reduce = reduce,
    .where = where,
    .copy = copy,
    .im2col = im2col,
    .pool = pool,
    .layernorm = layernorm,
    .gather = gather,
    .topk = topk,
    .rnn_cell = rnn_cell,
    .resample = resample,
    .grid_sample = grid_sample,
    .roi_align = roi_align,
    .scan = scan,
    .dwconv = dwconv,
    .qgemm = qgemm,
    .synchronize = synchronize,
};

static sn_device shapes_device = {
    .ops = &shapes_ops,
    .info = {.name = "shapes", .model = "shapes only", .driver = "none"},
};

sn_device *sn_shapes_device(void)
{
    return &shapes_device;
}

int sn_device_is_shapes(const sn_device *dev)
{
    return dev && dev->ops == &shapes_ops;
}
