/*
 * Products by weights kept in their quantized bytes (issue 16), read by
 * the quantized product (sn_qgemm): QuantizedMatMul, and ONNX Runtime's
 * MatMulNBits.
 *
 * QuantizedMatMul (shardnet's domain; lib/passes/quantized_products.c
 * makes it): A times a weight kept as stored integers,
 *
 *   inputs  A (float, [..., K]), Q (int8 or uint8 constant, [K, N], or
 *           [N, K] with transB), scale (float constant: one, or one per
 *           column), zero point (Q's type, shaped like scale; optional),
 *           bias (float, N; optional); or Q a float16 or bfloat16
 *           constant (a Cast of the weight to float) with neither scale
 *           nor zero point
 *   output  [..., N] = act(A dequant(Q) + bias)
 *
 * Q stays in its bytes, uploaded once per device (used in place in the
 * mapped model on a CPU), and the quantized product (sn_qgemm) reads it;
 * the scales and zero points go as one float per column.
 */
#include <config.h>

#include <stdint.h>
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

SN_LOWER(sn_lower_quantized_matmul)
{
    sn_rt *a = sn_in(L, n, 0), *q = sn_in(L, n, 1), *s = sn_in(L, n, 2);
    sn_rt *z = sn_in(L, n, 3), *bias = sn_in(L, n, 4), *out;
    int trans_b = (int)sn_attr_int(n, "transB", 0);
    shardnet_status st;

    int half = q->dtype == SN_DT_FLOAT16 || q->dtype == SN_DT_BFLOAT16;
    if (!q->host || q->rank != 2 ||
        (q->dtype != SN_DT_INT8 && q->dtype != SN_DT_UINT8 && !half) ||
        (half ? s || z
              : !s || !s->host || (z && (!z->host || z->dtype != q->dtype))))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the weight must be a constant int8 or uint8 "
                             "matrix with constant scales and zero points "
                             "of its type, or a float16 or bfloat16 one "
                             "with neither");
    size_t k = (size_t)q->dims[trans_b ? 1 : 0],
           nn = (size_t)q->dims[trans_b ? 0 : 1];
    size_t ns = half ? 1 : sn_rt_elements(s);
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

    float *scale = half ? malloc((nn ? nn : 1) * sizeof *scale)
                        : per_column(s, nn);
    float *zero = z ? per_column(z, nn) : NULL;
    for (size_t j = 0; half && scale && j < nn; j++)
        scale[j] = 1.0f;
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
    sn_step g = {.kind = SN_KERNEL_QGEMM};
    g.u.qgemm = (sn_qgemm_desc){
        .m = rows, .n = nn, .k = k,
        .qtype = q->dtype == SN_DT_INT8      ? SN_QTYPE_S8
                 : q->dtype == SN_DT_UINT8   ? SN_QTYPE_U8
                 : q->dtype == SN_DT_FLOAT16 ? SN_QTYPE_F16
                                             : SN_QTYPE_BF16,
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

/*
 * MatMulNBits (com.microsoft; the 4-bit weights exported language models
 * use): A [..., K] times B of N rows of K quantized in blocks of
 * block_size, uint4 two to a byte (bits 4) or uint8 (bits 8), stored
 * [N, blocks, block_size * bits / 8]; scales [N * blocks]; zero points
 * optional, packed like B (uint8) or float like the scales, else
 * 2^(bits - 1); an optional bias [N] (input 5).  The quantized product
 * reads B as stored.
 */
SN_LOWER(sn_lower_matmul_nbits)
{
    sn_rt *a = sn_in(L, n, 0), *q = sn_in(L, n, 1), *s = sn_in(L, n, 2);
    sn_rt *z = sn_in(L, n, 3), *gidx = sn_in(L, n, 4), *bias = sn_in(L, n, 5);
    int64_t k = sn_attr_int(n, "K", -1), nn = sn_attr_int(n, "N", -1);
    int64_t bits = sn_attr_int(n, "bits", 4);
    int64_t bs = sn_attr_int(n, "block_size", -1);
    sn_rt *out;
    shardnet_status st;

    if (k < 1 || nn < 1 || (bits != 4 && bits != 8) || bs < 16 ||
        (bs & (bs - 1)) || k > INT32_MAX || nn > INT32_MAX)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "K and N must be positive, bits 4 or 8 and "
                             "block_size a power of two from 16 (K %lld, N "
                             "%lld, bits %lld, block_size %lld)",
                             (long long)k, (long long)nn, (long long)bits,
                             (long long)bs);
    if (gidx)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "g_idx (act-order) is not supported");
    size_t blocks = (size_t)((k + bs - 1) / bs),
           blob = (size_t)(bs * bits / 8), ldq = blocks * blob;
    if (!q->host || q->dtype != SN_DT_UINT8 ||
        sn_rt_elements(q) != (size_t)nn * ldq || !s->host ||
        s->dtype != SN_DT_FLOAT || sn_rt_elements(s) != (size_t)nn * blocks)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "B must be a constant uint8 of N x %zu blocks x "
                             "%zu bytes and the scales N x %zu constant "
                             "floats",
                             blocks, blob, blocks);
    if (a->rank < 1 || a->dims[a->rank - 1] != k ||
        (bias && sn_rt_elements(bias) != (size_t)nn))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "A's last dimension must be K (%lld), the bias "
                             "N (%lld) values",
                             (long long)k, (long long)nn);
    /* The zero points as one float per column and block; none given,
     * 2^(bits - 1) for all, which the product takes as one value. */
    size_t ns = (size_t)nn * blocks, zrow = (blocks + 1) / 2;
    float *zero = z ? malloc(ns * sizeof *zero) : NULL;
    if (z && !zero)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "zero points");
    int packed = z && z->dtype == SN_DT_UINT8 && bits == 4;
    if (z && (!z->host ||
              (z->dtype == SN_DT_UINT8
                   ? sn_rt_elements(z) != (packed ? (size_t)nn * zrow : ns)
                   : z->dtype != SN_DT_FLOAT || sn_rt_elements(z) != ns))) {
        free(zero);
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "zero points must be constants: uint8 packed "
                             "like B, or floats like the scales");
    }
    for (size_t j = 0; z && j < (size_t)nn; j++)
        for (size_t b = 0; b < blocks; b++) {
            float v = (float)(1 << (bits - 1));
            if (packed) {
                int64_t byte = sn_rt_get_int(z, j * zrow + b / 2);
                v = (float)(b % 2 ? byte >> 4 : byte & 15);
            } else if (z) {
                v = (float)sn_rt_get_double(z, j * blocks + b);
            }
            zero[j * blocks + b] = v;
        }
    int64_t od[SN_MAX_DIMS];
    for (int i = 0; i < a->rank; i++)
        od[i] = a->dims[i];
    od[a->rank - 1] = nn;
    size_t rows = 1;
    for (int i = 0; i + 1 < a->rank; i++)
        rows *= (size_t)a->dims[i];
    sn_step g = {.kind = SN_KERNEL_QGEMM};
    g.u.qgemm = (sn_qgemm_desc){
        .m = rows, .n = (size_t)nn, .k = (size_t)k,
        .qtype = bits == 4 ? SN_QTYPE_U4 : SN_QTYPE_U8, .trans_b = 1,
        .block = (size_t)bs, .lda = (size_t)k, .ldq = ldq,
        .ldc = (size_t)nn, .act = sn_fused_act(n),
        .zero_value = z ? 0.0f : (float)(1 << (bits - 1))};
    if ((st = sn_out_device(L, n, 0, a->rank, od, &out)) != SHARDNET_OK ||
        rows == 0 || (st = sn_dev_view(L, n, a, &g.u.qgemm.a)) ||
        (st = sn_dev_bytes(L, n, q, &g.u.qgemm.q)) ||
        (st = sn_dev_view(L, n, s, &g.u.qgemm.scale)) ||
        (bias && (st = sn_dev_view(L, n, bias, &g.u.qgemm.bias)))) {
        free(zero);
        return st;
    }
    if (z && (st = sn_dev_upload(L, n, zero, ns, &g.u.qgemm.zero)) !=
                 SHARDNET_OK)
        return st;
    g.u.qgemm.c = out->view;
    return sn_emit(L, n, &g);
}
