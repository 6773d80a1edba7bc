/*
 * QuantizedMatMul (shardnet's domain; lib/passes/quantized_products.c
 * makes it): A times a weight kept as stored integers,
 *
 *   inputs  A (float, [..., K]), Q (int8 or uint8 constant, [K, N], or
 *           [N, K] with transB), scale (float constant: one, or one per
 *           column), zero point (Q's type, shaped like scale; optional),
 *           bias (float, N; optional)
 *   output  [..., N] = act(A dequant(Q) + bias)
 *
 * On a device with the quantized product (sn_qgemm) Q stays in its bytes,
 * uploaded once per device (used in place in the mapped model on a CPU);
 * the scales and zero points go as one float per column.  Elsewhere the
 * weight is dequantized on the host, (q - zero) * scale in float as
 * DequantizeLinear computes it, and the ordinary GEMM runs.
 */
#include <config.h>

#include <stdlib.h>

#include "ops/ops.h"

/* One float per column from a constant of one value or of n. */
static float *per_column(const sn_rt *v, size_t n)
{
    float *f = malloc((n ? n : 1) * sizeof *f);
    size_t count = sn_rt_elements(v);
    for (size_t j = 0; f && j < n; j++)
        f[j] = (float)sn_rt_get_double(v, count == 1 ? 0 : j);
    return f;
}

/* The weight as floats, stored as Q is. */
static float *dequantized(const sn_rt *q, const float *scale,
                          const float *zero, int trans_b, size_t k, size_t n)
{
    float *w = malloc((k * n > 0 ? k * n : 1) * sizeof *w);
    for (size_t r = 0; w && r < (trans_b ? n : k); r++)
        for (size_t c = 0; c < (trans_b ? k : n); c++) {
            size_t j = trans_b ? r : c, at = r * (trans_b ? k : n) + c;
            float v = (float)sn_rt_get_int(q, at) - (zero ? zero[j] : 0.0f);
            w[at] = v * scale[j];
        }
    return w;
}

SN_LOWER(sn_lower_quantized_matmul)
{
    sn_rt *a = sn_in(L, n, 0), *q = sn_in(L, n, 1), *s = sn_in(L, n, 2);
    sn_rt *z = sn_in(L, n, 3), *bias = sn_in(L, n, 4), *out;
    int trans_b = (int)sn_attr_int(n, "transB", 0);
    shardnet_status st;

    if (!q->host || q->rank != 2 ||
        (q->dtype != SN_DT_INT8 && q->dtype != SN_DT_UINT8) || !s->host ||
        (z && (!z->host || z->dtype != q->dtype)))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the weight must be a constant int8 or uint8 "
                             "matrix with constant scales and zero points "
                             "of its type");
    size_t k = (size_t)q->dims[trans_b ? 1 : 0],
           nn = (size_t)q->dims[trans_b ? 0 : 1];
    size_t ns = sn_rt_elements(s);
    if (a->rank < 1 || (size_t)a->dims[a->rank - 1] != k ||
        (ns != 1 && ns != nn) || (z && sn_rt_elements(z) != ns) ||
        (bias && sn_rt_elements(bias) != nn))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "A's last dimension must be the weight's K "
                             "(%zu), the scales and zero points one or one "
                             "per column (%zu), the bias one per column",
                             k, nn);
    int64_t od[SN_MAX_DIMS];
    for (int i = 0; i < a->rank; i++)
        od[i] = a->dims[i];
    od[a->rank - 1] = (int64_t)nn;
    if ((st = sn_out_device(L, n, 0, a->rank, od, &out)) != SHARDNET_OK)
        return st;
    size_t rows = 1;
    for (int i = 0; i + 1 < a->rank; i++)
        rows *= (size_t)a->dims[i];
    if (k == 0 && rows > 0 && nn > 0)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "a weight of no rows (K = 0)");
    if (rows == 0 || nn == 0)
        return SHARDNET_OK;

    float *scale = per_column(s, nn), *zero = z ? per_column(z, nn) : NULL;
    if (!scale || (z && !zero)) {
        free(scale);
        free(zero);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "quantized weight");
    }
    sn_view va, vb = {0};
    if ((st = sn_dev_view(L, n, a, &va)) != SHARDNET_OK ||
        (bias && (st = sn_dev_view(L, n, bias, &vb)) != SHARDNET_OK)) {
        free(scale);
        free(zero);
        return st;
    }
    if (!sn_device_supports(L->dev, SN_KERNEL_QGEMM, SN_VARIANT_ANY)) {
        float *w = dequantized(q, scale, zero, trans_b, k, nn);
        free(scale);
        free(zero);
        sn_step g = {.kind = SN_KERNEL_GEMM};
        g.u.gemm = (sn_gemm_desc){.trans_b = trans_b, .m = rows, .n = nn,
                                  .k = k, .alpha = 1.0f, .a = va,
                                  .c = out->view, .lda = k,
                                  .ldb = trans_b ? k : nn, .ldc = nn,
                                  .batch = 1, .bias = vb,
                                  .act = sn_fused_act(n)};
        if (!w)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "quantized weight");
        if ((st = sn_dev_upload(L, n, w, k * nn, &g.u.gemm.b)) != SHARDNET_OK)
            return st;
        return sn_emit(L, n, &g);
    }
    sn_step g = {.kind = SN_KERNEL_QGEMM};
    g.u.qgemm = (sn_qgemm_desc){
        .m = rows, .n = nn, .k = k,
        .qtype = q->dtype == SN_DT_INT8 ? SN_QTYPE_S8 : SN_QTYPE_U8,
        .trans_b = trans_b, .a = va, .bias = vb, .c = out->view, .lda = k,
        .ldq = trans_b ? k : nn, .ldc = nn, .act = sn_fused_act(n)};
    if ((st = sn_dev_bytes(L, n, q, &g.u.qgemm.q)) != SHARDNET_OK ||
        (st = sn_dev_upload(L, n, scale, nn, &g.u.qgemm.scale)) !=
            SHARDNET_OK) {
        free(zero);
        return st;
    }
    if (zero && (st = sn_dev_upload(L, n, zero, nn, &g.u.qgemm.zero)) !=
                    SHARDNET_OK)
        return st;
    return sn_emit(L, n, &g);
}
