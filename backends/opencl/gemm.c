/*
 * The OpenCL backend's GEMM: the product through CLBlast (one call per
 * batch item where CLBlast's batched call does not fit), then the fused
 * bias and ReLU epilogue as a kernel of elementwise.cl.  CLBlast's status
 * codes are named in the messages.
 */
#include <config.h>

#include <clblast_c.h>
#include <limits.h>

#include "opencl.h"
#include "core/error.h"

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
        /* In range: lib/backend/kernels.c checked the extent of every batch
         * item. */
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

/* The product alone: CLBlast, batched where it can. */
static shardnet_status gemm_product(sn_device *dev, const sn_gemm_desc *d)
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

/* Elements of C from c.offset that the batch spans (lib/backend/kernels.c has
 * checked that this does not overflow). */
static size_t gemm_c_extent(const sn_gemm_desc *d)
{
    return (d->batch - 1) * d->stride_c + (d->m - 1) * d->ldc + d->n;
}

/* C += bias, C += res, then ReLU, over every batch item: one work-item per
 * element.
 * The caller has checked the indices (epilogue_fits). */
static shardnet_status gemm_epilogue(sn_device *dev, const sn_gemm_desc *d)
{
    /* total <= the C extent: stride_c >= m * ldc when batch > 1. */
    size_t total = d->batch * d->m * d->n;
    cl_uint utotal = (cl_uint)total, m = (cl_uint)d->m, n = (cl_uint)d->n,
            c_off = (cl_uint)d->c.offset, ldc = (cl_uint)d->ldc,
            stride_c = d->batch > 1 ? (cl_uint)d->stride_c : 0,
            bias_off = d->bias.buf ? (cl_uint)d->bias.offset : 0,
            res_off = d->res.buf ? (cl_uint)d->res.offset : 0;
    cl_int has_bias = d->bias.buf != NULL, bias_rows = d->bias_rows != 0,
           has_res = d->res.buf != NULL, relu = (cl_int)d->act;
    cl_mem c = d->c.buf->handle;
    /* Without a bias or residual the kernel never reads it; any buffer
     * will do. */
    cl_mem bias = d->bias.buf ? d->bias.buf->handle : c;
    cl_mem res = d->res.buf ? d->res.buf->handle : c;
    karg args[] = {ARG(utotal),   ARG(m),         ARG(n),
                   ARG(c),        ARG(c_off),     ARG(ldc),
                   ARG(stride_c), ARG(bias),      ARG(bias_off),
                   ARG(has_bias), ARG(bias_rows), ARG(res),
                   ARG(res_off),  ARG(has_res),   ARG(relu)};

    return sn_cl_run_single(dev, K_GEMM_EPILOGUE, "gemm epilogue", args, 15,
                            total);
}

/* Every index the epilogue forms fits a kernel uint (checked before the
 * product runs, so that a refusal leaves C untouched). */
static shardnet_status epilogue_fits(const sn_device *dev,
                                     const sn_gemm_desc *d)
{
    size_t ec = gemm_c_extent(d), eb = d->bias_rows ? d->m : d->n;

    if (!fits_idx(d->c.offset, ec))
        return sn_cl_too_large(dev, "gemm epilogue", "C", d->c.offset, ec);
    if (d->bias.buf && !fits_idx(d->bias.offset, eb))
        return sn_cl_too_large(dev, "gemm epilogue", "bias", d->bias.offset,
                               eb);
    if (d->res.buf && !fits_idx(d->res.offset, ec))
        return sn_cl_too_large(dev, "gemm epilogue", "residual",
                               d->res.offset, ec);
    return SHARDNET_OK;
}

shardnet_status sn_cl_gemm(sn_device *dev, const sn_gemm_desc *d)
{
    int epilogue = d->bias.buf != NULL || d->res.buf != NULL ||
                   d->act != SN_ACT_NONE;
    shardnet_status st;

    if (epilogue && (st = epilogue_fits(dev, d)) != SHARDNET_OK)
        return st;
    st = gemm_product(dev, d);
    if (st == SHARDNET_OK && epilogue)
        st = gemm_epilogue(dev, d);
    return st;
}

/* The product by a quantized weight: a kernel of ours (conv.cl), one
 * work-item per output, each summing its column's bytes of q in float. */
shardnet_status sn_cl_qgemm(sn_device *dev, const sn_qgemm_desc *d)
{
    size_t total, rows = d->trans_b ? d->n : d->k;
    size_t qbytes, blocks = d->block ? (d->k + d->block - 1) / d->block : 1;
    if (__builtin_mul_overflow(d->m, d->n, &total) ||
        __builtin_mul_overflow(rows, d->ldq, &qbytes) ||
        __builtin_mul_overflow(qbytes, sn_qtype_bytes(d->qtype), &qbytes) ||
        total > UINT_MAX ||
        d->k > UINT_MAX || d->lda > UINT_MAX || d->ldq > UINT_MAX ||
        d->ldc > UINT_MAX || d->block > UINT_MAX)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "qgemm on %s: size overflows", dev->info.name);
    if (!fits_idx(d->a.offset, (d->m - 1) * d->lda + d->k))
        return sn_cl_too_large(dev, "qgemm", "A", d->a.offset,
                               (d->m - 1) * d->lda + d->k);
    if (!fits_idx(d->c.offset, (d->m - 1) * d->ldc + d->n))
        return sn_cl_too_large(dev, "qgemm", "C", d->c.offset,
                               (d->m - 1) * d->ldc + d->n);
    if (d->q.offset > UINT_MAX / 4 || !fits_idx(d->q.offset * 4, qbytes))
        return sn_cl_too_large(dev, "qgemm", "q", d->q.offset, qbytes / 4);
    if (!fits_idx(d->scale.offset, d->n * blocks) ||
        (d->zero.buf && !fits_idx(d->zero.offset, d->n * blocks)) ||
        (d->bias.buf && !fits_idx(d->bias.offset, d->n)))
        return sn_cl_too_large(dev, "qgemm", "scale", d->scale.offset,
                               d->n * blocks);
    cl_uint un = (cl_uint)total;
    cl_uint4 dims = {{(cl_uint)d->m, (cl_uint)d->n, (cl_uint)d->k,
                      (cl_uint)d->block}};
    cl_uint4 lds = {{(cl_uint)d->lda, (cl_uint)d->ldq, (cl_uint)d->ldc,
                     (cl_uint)d->qtype | (d->trans_b ? 8u : 0u)}};
    cl_mem a = d->a.buf->handle, q = d->q.buf->handle;
    cl_mem s = d->scale.buf->handle, c = d->c.buf->handle;
    cl_mem z = d->zero.buf ? d->zero.buf->handle : s;
    cl_mem b = d->bias.buf ? d->bias.buf->handle : s;
    cl_uint a_off = (cl_uint)d->a.offset, q_off = (cl_uint)d->q.offset * 4;
    cl_uint s_off = (cl_uint)d->scale.offset, c_off = (cl_uint)d->c.offset;
    cl_uint z_off = d->zero.buf ? (cl_uint)d->zero.offset : 0;
    cl_uint b_off = d->bias.buf ? (cl_uint)d->bias.offset : 0;
    cl_int has_zero = d->zero.buf != NULL, has_bias = d->bias.buf != NULL;
    cl_int act = (cl_int)d->act;
    cl_float zv = d->zero_value;
    karg args[] = {ARG(un),    ARG(dims),  ARG(lds),      ARG(a),
                   ARG(a_off), ARG(q),     ARG(q_off),    ARG(s),
                   ARG(s_off), ARG(z),     ARG(z_off),    ARG(has_zero),
                   ARG(zv),    ARG(b),     ARG(b_off),    ARG(has_bias),
                   ARG(c),     ARG(c_off), ARG(act)};
    return sn_cl_run_single(dev, K_QGEMM, "qgemm", args, 19, total);
}
