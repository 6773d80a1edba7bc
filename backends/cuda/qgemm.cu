/*
 * The product by a quantized weight (sn_qgemm_desc): C = act(A W + bias),
 * W read in its small type (int8, uint8, uint4 two to a byte, half,
 * bfloat16) and turned into a float in registers, never dequantized into
 * memory.  One thread per output (i, j), adjacent threads on adjacent
 * columns: with the weight as K rows of N (trans_b 0) they read adjacent
 * bytes of q, and all of them a row of A's same element.
 *
 * The sums are the CPU backend's portable ones (cpu/qgemm.c, columns_c)
 * and OpenCL's (kernels_cl/conv.cl, qgemm), in their order: per block of
 * K, A times q less its zero point summed in float (q - z exact for the
 * integer types), then each block's sum times its scale added up, then
 * the bias and the activation.  The C reference sums in double, so the
 * results agree with it to float rounding of k terms, as the descriptor
 * allows; the CPU backend from 8 rows on dequantizes and runs its float
 * GEMM, another order again.
 *
 * Helpers carry the qgemm_ prefix: the emulation compiles every .cu file
 * into one translation unit, where static names of two files would meet.
 */
#include <string.h>

#include "cu.h"

/* What a qgemm kernel reads, by value (one argument, not nineteen). */
typedef struct qgemm_args {
    size_t n, k, block, blocks, lda, ldq, ldc;
    int qtype, trans_b, act;
    float zero_value;
    const float *a, *scale, *zero, *bias; /* zero, bias: NULL for none */
    const unsigned char *q;               /* byte 4 * q.offset on */
    float *c;
} qgemm_args;

/* A float from its bits (memcpy: no aliasing, on the device as on the
 * host). */
static __device__ float qgemm_bits(unsigned u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* An IEEE half's value, exact (every half is a float): the exponent
 * rebiased from 15 to 127, the subnormals (exponent 0) scaled by 2^-24,
 * infinities and NaNs (exponent 31) kept as such with their payload. */
static __device__ float qgemm_half(unsigned h)
{
    unsigned sign = (h & 0x8000u) << 16, e = h >> 10 & 0x1fu,
             man = h & 0x3ffu;
    if (e == 0) {
        float v = (float)man * 5.9604644775390625e-8f; /* 2^-24 */
        return sign ? -v : v;
    }
    if (e == 31)
        return qgemm_bits(sign | 0x7f800000u | man << 13);
    return qgemm_bits(sign | (e + 112) << 23 | man << 13);
}

/* q(kk, j) as a float, whatever its type (sn_qgemm_desc's layouts: uint4
 * only as N rows of K, the even kk in a byte's low nibble; the two-byte
 * types little-endian). */
static __device__ float qgemm_value(const qgemm_args *p, size_t kk, size_t j)
{
    size_t e = p->trans_b ? j * p->ldq + kk : kk * p->ldq + j;
    unsigned char b;
    unsigned h;
    switch (p->qtype) {
    case SN_QTYPE_U4:
        b = p->q[j * p->ldq + kk / 2];
        return (float)(kk % 2 ? b >> 4 : b & 15);
    case SN_QTYPE_F16:
        return qgemm_half((unsigned)p->q[2 * e] |
                          (unsigned)p->q[2 * e + 1] << 8);
    case SN_QTYPE_BF16: /* a float's top half */
        h = (unsigned)p->q[2 * e] | (unsigned)p->q[2 * e + 1] << 8;
        return qgemm_bits(h << 16);
    case SN_QTYPE_S8:
        return (float)(signed char)p->q[e];
    }
    return (float)p->q[e]; /* SN_QTYPE_U8 */
}

static __global__ void qgemm(size_t total, qgemm_args p)
{
    SN_CU_FOR(t, total)
    {
        size_t i = t / p.n, j = t - i * p.n;
        const float *ar = p.a + i * p.lda;
        float y = 0.0f;
        for (size_t b = 0; b < p.blocks; b++) {
            size_t k0 = b * p.block,
                   k1 = k0 + p.block < p.k ? k0 + p.block : p.k;
            size_t at = j * p.blocks + b;
            float s = 0.0f, z = p.zero ? p.zero[at] : p.zero_value;
            for (size_t kk = k0; kk < k1; kk++)
                s += ar[kk] * (qgemm_value(&p, kk, j) - z);
            y += p.scale[at] * s;
        }
        if (p.bias)
            y += p.bias[j];
        if (p.act != SN_ACT_NONE) /* NaN kept, as GEMM's */
            y = y < 0.0f ? 0.0f : y;
        if (p.act == SN_ACT_RELU6)
            y = y > 6.0f ? 6.0f : y;
        p.c[i * p.ldc + j] = y;
    }
}

int sn_cu_qgemm(const sn_qgemm_desc *d, void *stream)
{
    qgemm_args p;
    size_t total = d->m * d->n;
    p.n = d->n;
    p.k = d->k;
    /* block 0: one block of all K, one scale per column */
    p.block = d->block ? d->block : d->k;
    p.blocks = d->block ? (d->k + d->block - 1) / d->block : 1;
    p.lda = d->lda;
    p.ldq = d->ldq;
    p.ldc = d->ldc;
    p.qtype = (int)d->qtype;
    p.trans_b = d->trans_b;
    p.act = (int)d->act;
    p.zero_value = d->zero_value;
    p.a = sn_cu_ptr(d->a);
    p.scale = sn_cu_ptr(d->scale);
    p.zero = sn_cu_ptr(d->zero);
    p.bias = sn_cu_ptr(d->bias);
    p.q = (const unsigned char *)sn_cu_ptr(d->q);
    p.c = sn_cu_ptr(d->c);
    return SN_CU_RUN(qgemm, total, stream, total, p);
}
