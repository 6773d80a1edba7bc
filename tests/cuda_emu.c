/*
 * The emulated CUDA device (cuda_emu.h): host-memory buffers, an "in-order
 * queue" that runs each kernel at once, the kernel members of the CUDA
 * backend's launchers.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda_emu.h"
/* the launchers' emulated names (backends/cuda/kernels.h) */
#define SN_CUDA_EMULATE 1
#include "kernels.h"
#include "ref.h"

static shardnet_status emu_alloc(sn_device *dev, size_t bytes, sn_buffer **out)
{
    sn_buffer *b = calloc(1, sizeof *b);
    void *mem = calloc(1, bytes ? bytes : sizeof(float));
    if (!b || !mem) {
        free(b);
        free(mem);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s: %zu bytes",
                        dev->info.name, bytes);
    }
    b->dev = dev;
    b->size = bytes;
    b->handle = mem;
    *out = b;
    return SHARDNET_OK;
}

static void emu_free(sn_buffer *buf)
{
    if (buf)
        free(buf->handle);
    free(buf);
}

static shardnet_status emu_write(sn_buffer *buf, size_t offset,
                                 const void *src, size_t bytes)
{
    memcpy((char *)buf->handle + offset, src, bytes);
    return SHARDNET_OK;
}

static shardnet_status emu_read(sn_buffer *buf, size_t offset, void *dst,
                                size_t bytes)
{
    memcpy(dst, (const char *)buf->handle + offset, bytes);
    return SHARDNET_OK;
}

static shardnet_status emu_map(sn_buffer *buf, size_t offset, size_t bytes,
                               int flags, void **ptr)
{
    (void)bytes;
    (void)flags;
    *ptr = (char *)buf->handle + offset;
    return SHARDNET_OK;
}

static shardnet_status emu_unmap(sn_buffer *buf, void *ptr)
{
    (void)buf;
    (void)ptr;
    return SHARDNET_OK;
}

static shardnet_status emu_sync(sn_device *dev)
{
    (void)dev;
    return SHARDNET_OK;
}

static shardnet_status launched(sn_device *dev, const char *kernel, int err)
{
    if (err == 0)
        return SHARDNET_OK;
    return sn_error(SHARDNET_DEVICE_ERROR, "%s: emulated %s failed (%d)",
                    dev->info.name, kernel, err);
}

static float *host(sn_view v)
{
    return v.buf ? (float *)v.buf->handle + v.offset : NULL;
}

/* cuBLAS's part (the product, alpha and beta) by the reference, then the
 * backend's epilogue kernel, as backends/cuda/gemm.c runs them. */
static shardnet_status emu_gemm(sn_device *dev, const sn_gemm_desc *d)
{
    sn_gemm_desc p = *d;
    p.bias.buf = NULL;
    p.res.buf = NULL;
    p.act = SN_ACT_NONE;
    ref_gemm(&p, host(d->a), host(d->b), host(d->c), NULL, NULL);
    return launched(dev, "gemm epilogue", sn_cu_gemm_epilogue(d, NULL));
}

#define EMU_MEMBER(name)                                                      \
    static shardnet_status emu_##name(sn_device *dev,                         \
                                      const sn_##name##_desc *d)              \
    {                                                                         \
        return launched(dev, #name, sn_cu_##name(d, NULL));                   \
    }

EMU_MEMBER(binary)
EMU_MEMBER(unary)
EMU_MEMBER(where)
EMU_MEMBER(qgemm)
EMU_MEMBER(copy)
EMU_MEMBER(gather)
EMU_MEMBER(im2col)
EMU_MEMBER(pool)
EMU_MEMBER(dwconv)
EMU_MEMBER(softmax)
EMU_MEMBER(reduce)
EMU_MEMBER(layernorm)
EMU_MEMBER(topk)
EMU_MEMBER(scan)
EMU_MEMBER(resample)
EMU_MEMBER(grid_sample)
EMU_MEMBER(roi_align)
EMU_MEMBER(rnn_cell)

static void emu_device_free(sn_device *dev)
{
    (void)dev;
}

static const sn_backend_ops emu_ops = {
    .abi = SN_BACKEND_ABI,
    .kind = "cuda",
    .device_free = emu_device_free,
    .buffer_alloc = emu_alloc,
    .buffer_free = emu_free,
    .buffer_write = emu_write,
    .buffer_read = emu_read,
    .buffer_map = emu_map,
    .buffer_unmap = emu_unmap,
    .gemm = emu_gemm,
    .binary = emu_binary,
    .unary = emu_unary,
    .where = emu_where,
    .qgemm = emu_qgemm,
    .copy = emu_copy,
    .gather = emu_gather,
    .im2col = emu_im2col,
    .pool = emu_pool,
    .dwconv = emu_dwconv,
    .softmax = emu_softmax,
    .reduce = emu_reduce,
    .layernorm = emu_layernorm,
    .topk = emu_topk,
    .scan = emu_scan,
    .resample = emu_resample,
    .grid_sample = emu_grid_sample,
    .roi_align = emu_roi_align,
    .rnn_cell = emu_rnn_cell,
    .synchronize = emu_sync,
};

sn_device *sn_cuda_emu_device(void)
{
    static sn_device dev = {
        .ops = &emu_ops,
        .info = {.name = "cuda-emu:0",
                 .kind = SHARDNET_DEVICE_CUDA,
                 .model = "the CUDA kernels, emulated on the host",
                 .compute_units = 1,
                 .global_mem = (uint64_t)1 << 34,
                 .max_alloc = (uint64_t)1 << 34,
                 .numa_node = -1},
    };
    return &dev;
}
