/*
 * Element-wise kernels: binary ops with broadcasting, unary ops, Where.
 * One thread per output element; an operand's element is found by peeling
 * the output index into coordinates (innermost first) and summing each
 * coordinate times that operand's stride, 0 where it is broadcast.  An
 * output may be an input's memory (in-place ops): each element reads its
 * inputs before it writes.  The formulas are the C reference's
 * (tests/ref.c), with the same comparisons, so a NaN goes where it goes
 * there.
 */
#include "cu.h"

/* --- binary ------------------------------------------------------------- */

static __device__ float binary_op(int op, float x, float y)
{
    float r;
    switch (op) {
    case SN_BINARY_ADD:
        return x + y;
    case SN_BINARY_SUB:
        return x - y;
    case SN_BINARY_MUL:
        return x * y;
    case SN_BINARY_DIV:
        return x / y;
    case SN_BINARY_MAX:
        return fmaxf(x, y);
    case SN_BINARY_MIN:
        return fminf(x, y);
    case SN_BINARY_POW:
        return powf(x, y);
    case SN_BINARY_MOD: /* fmod (exact), moved to the divisor's sign */
        r = fmodf(x, y);
        return r != 0.0f && (r < 0.0f) != (y < 0.0f) ? r + y : r;
    case SN_BINARY_FMOD:
        return fmodf(x, y);
    case SN_BINARY_EQUAL:
        return x == y ? 1.0f : 0.0f;
    case SN_BINARY_GREATER:
        return x > y ? 1.0f : 0.0f;
    case SN_BINARY_GREATER_EQUAL:
        return x >= y ? 1.0f : 0.0f;
    case SN_BINARY_AND:
        return x != 0.0f && y != 0.0f ? 1.0f : 0.0f;
    case SN_BINARY_OR:
        return x != 0.0f || y != 0.0f ? 1.0f : 0.0f;
    case SN_BINARY_XOR:
        return (x != 0.0f) != (y != 0.0f) ? 1.0f : 0.0f;
    case SN_BINARY_PRELU:
        return x < 0.0f ? y * x : x;
    }
    return NAN;
}

/* The fused Relu: v < 0 ? 0 : v, NaN and -0 kept (the unary RELU). */
static __device__ float binary_relu_if(float v, int relu)
{
    return relu && v < 0.0f ? 0.0f : v;
}

/* Shapes merged to rank 1 or less: both operands contiguous or one. */
static __global__ void binary_flat(size_t n, int op, const float *a,
                                   size_t sa, const float *b, size_t sb,
                                   float *c, int relu)
{
    SN_CU_FOR(i, n)
    {
        c[i] = binary_relu_if(binary_op(op, a[i * sa], b[i * sb]), relu);
    }
}

static __global__ void binary_bcast(size_t n, int op, size_t rank,
                                    sn_cu_dims shape, const float *a,
                                    sn_cu_dims sa, const float *b,
                                    sn_cu_dims sb, float *c, int relu)
{
    SN_CU_FOR(i, n)
    {
        float x = a[sn_cu_offset(i, rank, shape.s, sa.s)];
        float y = b[sn_cu_offset(i, rank, shape.s, sb.s)];
        c[i] = binary_relu_if(binary_op(op, x, y), relu);
    }
}

int sn_cu_binary(const sn_binary_desc *d, void *stream)
{
    size_t n = sn_cu_elements(d->rank, d->shape);
    const float *a = sn_cu_ptr(d->a), *b = sn_cu_ptr(d->b);
    float *c = sn_cu_ptr(d->c);
    int relu = d->act == SN_ACT_RELU;

    if (d->rank == 0)
        return SN_CU_RUN(binary_flat, n, stream, n, (int)d->op, a, 0, b, 0,
                         c, relu);
    if (d->rank == 1)
        return SN_CU_RUN(binary_flat, n, stream, n, (int)d->op, a,
                         d->stride_a[0], b, d->stride_b[0], c, relu);
    return SN_CU_RUN(binary_bcast, n, stream, n, (int)d->op, d->rank,
                     sn_cu_dims_of(d->shape), a, sn_cu_dims_of(d->stride_a), b,
                     sn_cu_dims_of(d->stride_b), c, relu);
}

/* --- unary -------------------------------------------------------------- */

/* log(1 + exp(x)) without overflow */
static __device__ float unary_softplus(float x)
{
    return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
}

/* The float bits of v, and back (a union: nvcc and the host compiler of
 * the emulation both take it). */
static __device__ unsigned bits_of(float v)
{
    union { float f; unsigned u; } b;
    b.f = v;
    return b.u;
}

static __device__ float float_of(unsigned u)
{
    union { float f; unsigned u; } b;
    b.u = u;
    return b.f;
}

/* v rounded to the nearest IEEE half, halves to even, as a float: below
 * 2^-14 (the halves' subnormals) to a multiple of 2^-24; from there up,
 * the 13 low mantissa bits rounded off; from 65520 up, inf. */
static __device__ float round_half(float v)
{
    const unsigned u = bits_of(v);
    if (!(fabsf(v) < 65520.0f))
        return isnan(v) ? v : copysignf(INFINITY, v);
    if (fabsf(v) < 6.103515625e-05f)
        return rintf(v * 16777216.0f) * 5.9604644775390625e-08f;
    return float_of((u + 0xFFFu + ((u >> 13) & 1u)) & ~0x1FFFu);
}

/* v rounded to the nearest bfloat16, halves to even */
static __device__ float round_bf16(float v)
{
    const unsigned u = bits_of(v);
    return isnan(v) ? v
                    : float_of((u + 0x7FFFu + ((u >> 16) & 1u)) &
                               0xFFFF0000u);
}

static __device__ float unary_op(int op, float x, float alpha, float beta)
{
    float t;
    switch (op) {
    case SN_UNARY_RELU:
        return x < 0.0f ? 0.0f : x;
    case SN_UNARY_SIGMOID:
        return 1.0f / (1.0f + expf(-x));
    case SN_UNARY_TANH:
        return tanhf(x);
    case SN_UNARY_ERF:
        return erff(x);
    case SN_UNARY_EXP:
        return expf(x);
    case SN_UNARY_LOG:
        return logf(x);
    case SN_UNARY_SQRT:
        return sqrtf(x);
    case SN_UNARY_NEG:
        return -x;
    case SN_UNARY_ABS:
        return fabsf(x);
    case SN_UNARY_LEAKY_RELU:
        return x < 0.0f ? alpha * x : x;
    case SN_UNARY_HARD_SIGMOID: /* max(0, min(1, t)), NaN kept */
        t = alpha * x + beta;
        t = t > 1.0f ? 1.0f : t;
        return t < 0.0f ? 0.0f : t;
    case SN_UNARY_CLIP: /* min(max(x, alpha), beta), NaN kept */
        t = x < alpha ? alpha : x;
        return t > beta ? beta : t;
    case SN_UNARY_CLIP_GATE: /* each step rounded to float */
        t = x + alpha;
        t = t < 0.0f ? 0.0f : t;
        t = t > beta ? beta : t;
        t = x * t;
        return t / beta;
    case SN_UNARY_GELU:
        return 0.5f * x * (1.0f + erff(x / 1.41421356237309505f));
    case SN_UNARY_GELU_TANH:
        return 0.5f * x *
               (1.0f + tanhf(0.797884560802865356f *
                             (x + 0.044715f * x * x * x)));
    case SN_UNARY_SIN:
        return sinf(x);
    case SN_UNARY_COS:
        return cosf(x);
    case SN_UNARY_TAN:
        return tanf(x);
    case SN_UNARY_ASIN:
        return asinf(x);
    case SN_UNARY_ACOS:
        return acosf(x);
    case SN_UNARY_ATAN:
        return atanf(x);
    case SN_UNARY_SINH:
        return sinhf(x);
    case SN_UNARY_COSH:
        return coshf(x);
    case SN_UNARY_ASINH:
        return asinhf(x);
    case SN_UNARY_ACOSH:
        return acoshf(x);
    case SN_UNARY_ATANH:
        return atanhf(x);
    case SN_UNARY_CEIL:
        return ceilf(x);
    case SN_UNARY_FLOOR:
        return floorf(x);
    case SN_UNARY_ROUND: /* the default rounding: halves to even */
        return rintf(x);
    case SN_UNARY_SIGN:
        return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x;
    case SN_UNARY_ELU:
        return x < 0.0f ? alpha * expm1f(x) : x;
    case SN_UNARY_SELU:
        return x <= 0.0f ? beta * (alpha * expm1f(x)) : beta * x;
    case SN_UNARY_CELU: /* the exponential term has x's sign */
        return x > 0.0f ? x : alpha * expm1f(x / alpha);
    case SN_UNARY_SOFTPLUS:
        return unary_softplus(x);
    case SN_UNARY_SOFTSIGN:
        return x / (1.0f + fabsf(x));
    case SN_UNARY_THRESHOLDED_RELU:
        return x > alpha ? x : 0.0f;
    case SN_UNARY_SHRINK:
        return x < -alpha ? x + beta : x > alpha ? x - beta : 0.0f;
    case SN_UNARY_HARD_SWISH:
        t = x / 6.0f + 0.5f;
        t = t > 1.0f ? 1.0f : t;
        return x * (t < 0.0f ? 0.0f : t);
    case SN_UNARY_MISH:
        return x * tanhf(unary_softplus(x));
    case SN_UNARY_ISNAN:
        return isnan(x) ? 1.0f : 0.0f;
    case SN_UNARY_ISINF:
        return isinf(x) && ((x > 0.0f && alpha != 0.0f) ||
                            (x < 0.0f && beta != 0.0f))
                   ? 1.0f
                   : 0.0f;
    case SN_UNARY_ROUND_HALF:
        return round_half(x);
    case SN_UNARY_ROUND_BF16:
        return round_bf16(x);
    }
    return NAN;
}

static __global__ void unary_each(size_t n, int op, const float *x,
                                  float *y, float alpha, float beta, int gate)
{
    SN_CU_FOR(i, n)
    {
        float v = x[i], r = unary_op(op, v, alpha, beta);
        y[i] = gate ? v * r : r;
    }
}

int sn_cu_unary(const sn_unary_desc *d, void *stream)
{
    return SN_CU_RUN(unary_each, d->n, stream, d->n, (int)d->op,
                     sn_cu_ptr(d->x), sn_cu_ptr(d->y), d->alpha, d->beta,
                     d->gate);
}

/* --- where -------------------------------------------------------------- */

static __global__ void where_select(size_t n, size_t rank, sn_cu_dims shape,
                                    const float *cond, sn_cu_dims sc,
                                    const float *x, sn_cu_dims sx,
                                    const float *y, sn_cu_dims sy, float *out)
{
    SN_CU_FOR(i, n)
    {
        float c = cond[sn_cu_offset(i, rank, shape.s, sc.s)];
        out[i] = c != 0.0f ? x[sn_cu_offset(i, rank, shape.s, sx.s)]
                           : y[sn_cu_offset(i, rank, shape.s, sy.s)];
    }
}

int sn_cu_where(const sn_where_desc *d, void *stream)
{
    size_t n = sn_cu_elements(d->rank, d->shape);
    return SN_CU_RUN(where_select, n, stream, n, d->rank,
                     sn_cu_dims_of(d->shape),
                     sn_cu_ptr(d->cond), sn_cu_dims_of(d->stride_cond),
                     sn_cu_ptr(d->x), sn_cu_dims_of(d->stride_x),
                     sn_cu_ptr(d->y), sn_cu_dims_of(d->stride_y),
                     sn_cu_ptr(d->out));
}

/* --- the GEMM epilogue -------------------------------------------------- */

/* After cuBLAS's product, over C (batch, m, n; rows ldc apart, items
 * stride_c apart): C += bias (per column, or per row with bias_rows),
 * then C += res (laid out as C), then the activation, each rounded to
 * float in that order as the C reference does. */
static __global__ void gemm_epilogue(size_t total, size_t m, size_t n,
                                     float *c, size_t ldc, size_t stride_c,
                                     const float *bias, int bias_rows,
                                     const float *res, int act)
{
    SN_CU_FOR(t, total)
    {
        size_t rest = t / n, j = t - rest * n, b = rest / m, i = rest - b * m;
        size_t at = b * stride_c + i * ldc + j;
        float v = c[at];
        if (bias)
            v += bias[bias_rows ? i : j];
        if (res)
            v += res[at];
        if (act != SN_ACT_NONE)
            v = v < 0.0f ? 0.0f : v;
        if (act == SN_ACT_RELU6)
            v = v > 6.0f ? 6.0f : v;
        c[at] = v;
    }
}

int sn_cu_gemm_epilogue(const sn_gemm_desc *d, void *stream)
{
    size_t total = d->batch * d->m * d->n;
    if (!d->bias.buf && !d->res.buf && d->act == SN_ACT_NONE)
        return 0;
    return SN_CU_RUN(gemm_epilogue, total, stream, total, d->m, d->n,
                     sn_cu_ptr(d->c), d->ldc, d->stride_c,
                     (const float *)sn_cu_ptr(d->bias), d->bias_rows,
                     (const float *)sn_cu_ptr(d->res), (int)d->act);
}
