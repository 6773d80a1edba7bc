/*
 * The ops table's kernel members: each enqueues its launcher (kernels.h)
 * on the device's stream, with the device current on the calling thread,
 * and turns a failed launch into an error that names the device, the
 * kernel (with its variant) and the CUDA error.
 */
#include <config.h>

#include "core/config.h"
#include "cuda.h"
#include "kernels.h"

/* A launch's outcome.  An error of the kernel's execution comes back
 * later, from whatever waits for the stream next, and cannot tell which
 * kernel it was; with SHARDNET_CUDA_CHECK=1 each kernel is waited for at
 * once, so that its error names it (slow: for finding a failing
 * kernel). */
shardnet_status sn_cuda_launched(sn_device *dev, sn_kernel k, int variant,
                                 int err)
{
    char name[64];
    cudaError_t ran;
    if (err != 0)
        return sn_cuda_error(dev, (cudaError_t)err, "launch of kernel %s",
                             sn_kernel_variant_name(k, variant, name,
                                                    sizeof name));
    if (!sn_config_or_env(dev->config)->cuda_check)
        return SHARDNET_OK;
    ran = cudaStreamSynchronize(((cuda_dev *)dev->impl)->stream);
    if (ran != cudaSuccess)
        return sn_cuda_error(dev, ran,
                             "kernel %s (or the work before it, waited for "
                             "at once: SHARDNET_CUDA_CHECK)",
                             sn_kernel_variant_name(k, variant, name,
                                                    sizeof name));
    return SHARDNET_OK;
}

#define SN_CUDA_MEMBER(name, KIND, variant)                                   \
    shardnet_status sn_cuda_##name(sn_device *dev, const sn_##name##_desc *d) \
    {                                                                         \
        shardnet_status st = sn_cuda_enter(dev);                              \
        if (st != SHARDNET_OK)                                                \
            return st;                                                        \
        return sn_cuda_launched(                                              \
            dev, SN_KERNEL_##KIND, (variant),                                 \
            sn_cu_##name(d, ((cuda_dev *)dev->impl)->stream));                \
    }

SN_CUDA_MEMBER(binary, BINARY, (int)d->op)
SN_CUDA_MEMBER(unary, UNARY, (int)d->op)
SN_CUDA_MEMBER(where, WHERE, SN_VARIANT_ANY)
SN_CUDA_MEMBER(qgemm, QGEMM, SN_VARIANT_ANY)
SN_CUDA_MEMBER(copy, COPY, SN_VARIANT_ANY)
SN_CUDA_MEMBER(gather, GATHER, SN_VARIANT_ANY)
SN_CUDA_MEMBER(im2col, IM2COL, SN_VARIANT_ANY)
SN_CUDA_MEMBER(pool, POOL, (int)d->op)
SN_CUDA_MEMBER(dwconv, DWCONV, SN_VARIANT_ANY)
SN_CUDA_MEMBER(softmax, SOFTMAX, SN_VARIANT_ANY)
SN_CUDA_MEMBER(reduce, REDUCE, (int)d->op)
SN_CUDA_MEMBER(layernorm, LAYERNORM, SN_VARIANT_ANY)
SN_CUDA_MEMBER(topk, TOPK, SN_VARIANT_ANY)
SN_CUDA_MEMBER(scan, SCAN, SN_VARIANT_ANY)
SN_CUDA_MEMBER(resample, RESAMPLE, SN_VARIANT_ANY)
SN_CUDA_MEMBER(grid_sample, GRID_SAMPLE, SN_VARIANT_ANY)
SN_CUDA_MEMBER(roi_align, ROI_ALIGN, SN_VARIANT_ANY)
SN_CUDA_MEMBER(rnn_cell, RNN_CELL, SN_VARIANT_ANY)
