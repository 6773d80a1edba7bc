/*
 * Element-wise kernels: binary ops with broadcasting, unary ops.
 *
 * Every tensor is a float buffer plus an offset counted in elements.  The
 * host (backends/opencl/launch.c) checks that every index a kernel forms
 * fits in a uint, rounds the global size up and passes the true count n;
 * work-items past n return at once.  Outputs may alias inputs (in-place
 * ops): each work-item reads its inputs before it writes its one output.
 */

#define OP_ADD(a, b) ((a) + (b))
#define OP_SUB(a, b) ((a) - (b))
#define OP_MUL(a, b) ((a) * (b))
#define OP_DIV(a, b) ((a) / (b))
#define OP_MAX(a, b) fmax((a), (b))
#define OP_MIN(a, b) fmin((a), (b))
#define OP_POW(a, b) pow((a), (b))

/* numpy's remainder: fmod (exact) moved to the divisor's sign */
float op_mod(float a, float b)
{
    float r = fmod(a, b);
    return r != 0.0f && (r < 0.0f) != (b < 0.0f) ? r + b : r;
}
#define OP_MOD(a, b) op_mod((a), (b))
#define OP_FMOD(a, b) fmod((a), (b))
/* comparisons and logic give 1 or 0; a NaN compares false */
#define OP_EQUAL(a, b) ((a) == (b) ? 1.0f : 0.0f)
#define OP_GREATER(a, b) ((a) > (b) ? 1.0f : 0.0f)
#define OP_GREATER_EQUAL(a, b) ((a) >= (b) ? 1.0f : 0.0f)
#define OP_AND(a, b) ((a) != 0.0f && (b) != 0.0f ? 1.0f : 0.0f)
#define OP_OR(a, b) ((a) != 0.0f || (b) != 0.0f ? 1.0f : 0.0f)
#define OP_XOR(a, b) (((a) != 0.0f) != ((b) != 0.0f) ? 1.0f : 0.0f)
#define OP_PRELU(a, b) ((a) < 0.0f ? (b) * (a) : (a))

/*
 * Four kernels per binary op, binary_NAME_{same,scalar_a,scalar_b,bcast},
 * with the same first eight arguments:
 *   n       elements of c
 *   a, b    inputs, read from a_off / b_off
 *   c       output (n), contiguous from c_off
 *   relu    non-zero: a fused Relu on each result (v < 0 ? 0 : v, as
 *           UN_RELU: NaN and -0 kept)
 * _same      a, b, c all contiguous with the same shape
 * _scalar_a  a is one element, b contiguous
 * _scalar_b  a contiguous, b is one element
 * _bcast     general case, four more arguments: rank, then the output
 *            shape and the per-dimension element strides of a and b (0
 *            where broadcast), C order, in the first rank lanes
 */

/* A result v through the fused Relu when relu is set. */
float bin_act(float v, int relu)
{
    return relu && v < 0.0f ? 0.0f : v;
}

#define BINARY_KERNELS(NAME, OP)                                              \
    __kernel void binary_##NAME##_same(                                       \
        uint n, __global const float *a, uint a_off, __global const float *b, \
        uint b_off, __global float *c, uint c_off, int relu)                  \
    {                                                                         \
        size_t gid = get_global_id(0);                                        \
        uint i;                                                               \
        if (gid >= n)                                                         \
            return;                                                           \
        i = (uint)gid;                                                        \
        c[c_off + i] = bin_act(OP(a[a_off + i], b[b_off + i]), relu);         \
    }                                                                         \
                                                                              \
    __kernel void binary_##NAME##_scalar_a(                                   \
        uint n, __global const float *a, uint a_off, __global const float *b, \
        uint b_off, __global float *c, uint c_off, int relu)                  \
    {                                                                         \
        size_t gid = get_global_id(0);                                        \
        uint i;                                                               \
        if (gid >= n)                                                         \
            return;                                                           \
        i = (uint)gid;                                                        \
        c[c_off + i] = bin_act(OP(a[a_off], b[b_off + i]), relu);             \
    }                                                                         \
                                                                              \
    __kernel void binary_##NAME##_scalar_b(                                   \
        uint n, __global const float *a, uint a_off, __global const float *b, \
        uint b_off, __global float *c, uint c_off, int relu)                  \
    {                                                                         \
        size_t gid = get_global_id(0);                                        \
        uint i;                                                               \
        if (gid >= n)                                                         \
            return;                                                           \
        i = (uint)gid;                                                        \
        c[c_off + i] = bin_act(OP(a[a_off + i], b[b_off]), relu);             \
    }                                                                         \
                                                                              \
    __kernel void binary_##NAME##_bcast(                                      \
        uint n, __global const float *a, uint a_off, __global const float *b, \
        uint b_off, __global float *c, uint c_off, int relu, uint rank,       \
        uint8 shape, uint8 stride_a, uint8 stride_b)                          \
    {                                                                         \
        size_t gid = get_global_id(0);                                        \
        uint sh[8], sa[8], sb[8];                                             \
        uint rest, ia = a_off, ib = b_off;                                    \
        if (gid >= n)                                                         \
            return;                                                           \
        vstore8(shape, 0, sh);                                                \
        vstore8(stride_a, 0, sa);                                             \
        vstore8(stride_b, 0, sb);                                             \
        /* Peel the output index into coordinates, innermost first. */        \
        rest = (uint)gid;                                                     \
        for (uint d = rank; d-- > 0;) {                                       \
            uint q = rest / sh[d];                                            \
            uint coord = rest - q * sh[d];                                    \
            ia += coord * sa[d];                                              \
            ib += coord * sb[d];                                              \
            rest = q;                                                         \
        }                                                                     \
        c[c_off + (uint)gid] = bin_act(OP(a[ia], b[ib]), relu);               \
    }

BINARY_KERNELS(add, OP_ADD)
BINARY_KERNELS(sub, OP_SUB)
BINARY_KERNELS(mul, OP_MUL)
BINARY_KERNELS(div, OP_DIV)
BINARY_KERNELS(max, OP_MAX)
BINARY_KERNELS(min, OP_MIN)
BINARY_KERNELS(pow, OP_POW)
BINARY_KERNELS(mod, OP_MOD)
BINARY_KERNELS(fmod, OP_FMOD)
BINARY_KERNELS(equal, OP_EQUAL)
BINARY_KERNELS(greater, OP_GREATER)
BINARY_KERNELS(greater_equal, OP_GREATER_EQUAL)
BINARY_KERNELS(and, OP_AND)
BINARY_KERNELS(or, OP_OR)
BINARY_KERNELS(xor, OP_XOR)
BINARY_KERNELS(prelu, OP_PRELU)

/*
 * Unary ops as OP(x, alpha, beta); only the parametric ones read alpha and
 * beta.  ReLU, leaky ReLU, clip and hard sigmoid compare so that a NaN
 * falls through unchanged (fmax would turn it into the other operand).
 */
#define UN_RELU(x, a, b) ((x) < 0.0f ? 0.0f : (x))
#define UN_SIGMOID(x, a, b) (1.0f / (1.0f + exp(-(x))))
#define UN_TANH(x, a, b) tanh(x)
#define UN_ERF(x, a, b) erf(x)
#define UN_EXP(x, a, b) exp(x)
#define UN_LOG(x, a, b) log(x)
#define UN_SQRT(x, a, b) sqrt(x)
#define UN_NEG(x, a, b) (-(x))
#define UN_ABS(x, a, b) fabs(x)
#define UN_LEAKY_RELU(x, a, b) ((x) < 0.0f ? (a) * (x) : (x))
#define UN_GELU(x, a, b) (0.5f * (x) * (1.0f + erf((x) / M_SQRT2_F)))
/*
 * 0.5 x (1 + tanh(u)) with u = sqrt(2 / pi) (x + 0.044715 x^3), computed as
 * the equal x / (1 + exp(-2u)): 1 + tanh(u) cancels for negative x (30%
 * off at x = -5 in float), this form does not.  Infinities and NaN come
 * out as from the tanh form (-inf gives NaN, as -inf * 0 does).
 */
#define GELU_2K 1.5957691216057308f /* 2 sqrt(2 / pi) */
#define UN_GELU_TANH(x, a, b)                                                 \
    ((x) / (1.0f + exp(-GELU_2K * ((x) + 0.044715f * (x) * (x) * (x)))))

/* min(max(x, lo), hi) */
float un_clip(float x, float lo, float hi)
{
    float v = x < lo ? lo : x;
    return v > hi ? hi : v;
}
#define UN_CLIP(x, a, b) un_clip((x), (a), (b))
/* (x * min(max(x + a, 0), b)) / b, each step rounded */
#define UN_CLIP_GATE(x, a, b) ((x) * un_clip((x) + (a), 0.0f, (b)) / (b))

/* max(0, min(1, t)) */
float un_hard_sigmoid(float x, float alpha, float beta)
{
    float t = alpha * x + beta;
    t = t > 1.0f ? 1.0f : t;
    return t < 0.0f ? 0.0f : t;
}
#define UN_HARD_SIGMOID(x, a, b) un_hard_sigmoid((x), (a), (b))

/* The ops of backend.h's SN_UNARY_MATH_MAP. */
#define UN_SIN(x, a, b) sin(x)
#define UN_COS(x, a, b) cos(x)
#define UN_TAN(x, a, b) tan(x)
#define UN_ASIN(x, a, b) asin(x)
#define UN_ACOS(x, a, b) acos(x)
#define UN_ATAN(x, a, b) atan(x)
#define UN_SINH(x, a, b) sinh(x)
#define UN_COSH(x, a, b) cosh(x)
#define UN_ASINH(x, a, b) asinh(x)
#define UN_ACOSH(x, a, b) acosh(x)
#define UN_ATANH(x, a, b) atanh(x)
#define UN_CEIL(x, a, b) ceil(x)
#define UN_FLOOR(x, a, b) floor(x)
#define UN_ROUND(x, a, b) rint(x) /* halves to even */
#define UN_SIGN(x, a, b) ((x) > 0.0f ? 1.0f : (x) < 0.0f ? -1.0f : (x))
#define UN_ELU(x, a, b) ((x) < 0.0f ? (a) * expm1(x) : (x))
#define UN_SELU(x, a, b) ((x) <= 0.0f ? (b) * ((a) * expm1(x)) : (b) * (x))
#define UN_SOFTSIGN(x, a, b) ((x) / (1.0f + fabs(x)))
#define UN_THRESHOLDED_RELU(x, a, b) ((x) > (a) ? (x) : 0.0f)
#define UN_SHRINK(x, a, b)                                                    \
    ((x) < -(a) ? (x) + (b) : (x) > (a) ? (x) - (b) : 0.0f)
#define UN_ISNAN(x, a, b) (isnan(x) ? 1.0f : 0.0f)
#define UN_ISINF(x, a, b)                                                     \
    (isinf(x) && (((x) > 0.0f && (a) != 0.0f) || ((x) < 0.0f && (b) != 0.0f)) \
         ? 1.0f                                                               \
         : 0.0f)

/* x rounded to the nearest IEEE half, halves to even, as a float: below
 * 2^-14 (the halves' subnormals) to a multiple of 2^-24; from there up,
 * the 13 low mantissa bits rounded off; from 65520 up, inf. */
float un_round_half(float x)
{
    uint u = as_uint(x);
    if (!(fabs(x) < 65520.0f))
        return isnan(x) ? x : copysign(INFINITY, x);
    if (fabs(x) < 6.103515625e-05f)
        return rint(x * 16777216.0f) * 5.9604644775390625e-08f;
    return as_float((u + 0xFFFu + ((u >> 13) & 1u)) & ~0x1FFFu);
}
#define UN_ROUND_HALF(x, a, b) un_round_half(x)

/* x rounded to the nearest bfloat16, halves to even */
float un_round_bf16(float x)
{
    uint u = as_uint(x);
    return isnan(x) ? x
                    : as_float((u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u);
}
#define UN_ROUND_BF16(x, a, b) un_round_bf16(x)

/* log(1 + exp(x)) without overflow */
float un_softplus(float x)
{
    return x > 0.0f ? x + log1p(exp(-x)) : log1p(exp(x));
}
#define UN_SOFTPLUS(x, a, b) un_softplus(x)
#define UN_MISH(x, a, b) ((x) * tanh(un_softplus(x)))

/* max(0, x) + min(0, alpha (exp(x / alpha) - 1)): the second term has
 * x's sign, so one or the other */
#define UN_CELU(x, a, b) ((x) > 0.0f ? (x) : (a) * expm1((x) / (a)))

/* x max(0, min(1, x / 6 + 1 / 2)) */
float un_hard_swish(float x)
{
    float t = x / 6.0f + 0.5f;
    t = t > 1.0f ? 1.0f : t;
    return x * (t < 0.0f ? 0.0f : t);
}
#define UN_HARD_SWISH(x, a, b) un_hard_swish(x)

/*
 * unary_NAME: y (n, from y_off) = op(x (n, from x_off)) with the op's
 * parameters alpha and beta, times x where gate is set; x and y may be
 * the same memory.  The prefix keeps the names clear of the built-ins.
 */
#define UNARY_KERNEL(NAME, OP)                                                \
    __kernel void unary_##NAME(uint n, __global const float *x, uint x_off,   \
                               __global float *y, uint y_off, float alpha,    \
                               float beta, int gate)                          \
    {                                                                         \
        size_t gid = get_global_id(0);                                        \
        uint i;                                                               \
        float v;                                                              \
        if (gid >= n)                                                         \
            return;                                                           \
        i = (uint)gid;                                                        \
        v = x[x_off + i];                                                     \
        y[y_off + i] = gate ? v * (float)(OP(v, alpha, beta))                 \
                            : OP(v, alpha, beta);                             \
    }

UNARY_KERNEL(relu, UN_RELU)
UNARY_KERNEL(sigmoid, UN_SIGMOID)
UNARY_KERNEL(tanh, UN_TANH)
UNARY_KERNEL(erf, UN_ERF)
UNARY_KERNEL(exp, UN_EXP)
UNARY_KERNEL(log, UN_LOG)
UNARY_KERNEL(sqrt, UN_SQRT)
UNARY_KERNEL(neg, UN_NEG)
UNARY_KERNEL(abs, UN_ABS)
UNARY_KERNEL(leaky_relu, UN_LEAKY_RELU)
UNARY_KERNEL(hard_sigmoid, UN_HARD_SIGMOID)
UNARY_KERNEL(clip, UN_CLIP)
UNARY_KERNEL(gelu, UN_GELU)
UNARY_KERNEL(gelu_tanh, UN_GELU_TANH)
UNARY_KERNEL(clip_gate, UN_CLIP_GATE)
UNARY_KERNEL(sin, UN_SIN)
UNARY_KERNEL(cos, UN_COS)
UNARY_KERNEL(tan, UN_TAN)
UNARY_KERNEL(asin, UN_ASIN)
UNARY_KERNEL(acos, UN_ACOS)
UNARY_KERNEL(atan, UN_ATAN)
UNARY_KERNEL(sinh, UN_SINH)
UNARY_KERNEL(cosh, UN_COSH)
UNARY_KERNEL(asinh, UN_ASINH)
UNARY_KERNEL(acosh, UN_ACOSH)
UNARY_KERNEL(atanh, UN_ATANH)
UNARY_KERNEL(ceil, UN_CEIL)
UNARY_KERNEL(floor, UN_FLOOR)
UNARY_KERNEL(round, UN_ROUND)
UNARY_KERNEL(sign, UN_SIGN)
UNARY_KERNEL(elu, UN_ELU)
UNARY_KERNEL(selu, UN_SELU)
UNARY_KERNEL(celu, UN_CELU)
UNARY_KERNEL(softplus, UN_SOFTPLUS)
UNARY_KERNEL(softsign, UN_SOFTSIGN)
UNARY_KERNEL(thresholded_relu, UN_THRESHOLDED_RELU)
UNARY_KERNEL(shrink, UN_SHRINK)
UNARY_KERNEL(hard_swish, UN_HARD_SWISH)
UNARY_KERNEL(mish, UN_MISH)
UNARY_KERNEL(isnan, UN_ISNAN)
UNARY_KERNEL(isinf, UN_ISINF)
UNARY_KERNEL(round_half, UN_ROUND_HALF)
UNARY_KERNEL(round_bf16, UN_ROUND_BF16)

/*
 * The fused GEMM epilogue, run after CLBlast over C (batch, m, n) stored
 * with leading dimension ldc and batch stride stride_c from c_off:
 * C += bias, then C += res, then ReLU when relu is set (and Relu6's upper
 * bound, v > 6 ? 6 : v, when it is 2).  bias is n floats
 * from bias_off (one per column), m floats (one per row) when bias_rows is
 * set, or absent when has_bias is 0 (bias then points at any valid
 * buffer); res is laid out as C from res_off, or absent when has_res is 0
 * (likewise).  total = batch * m * n; the global size is rounded up.
 */
__kernel void gemm_epilogue(uint total, uint m, uint n, __global float *c,
                            uint c_off, uint ldc, uint stride_c,
                            __global const float *bias, uint bias_off,
                            int has_bias, int bias_rows,
                            __global const float *res, uint res_off,
                            int has_res, int relu)
{
    size_t gid = get_global_id(0);
    uint j, i, b, t, at;
    float v;

    if (gid >= total)
        return;
    t = (uint)gid / n;
    j = (uint)gid - t * n;
    b = t / m;
    i = t - b * m;
    at = c_off + b * stride_c + i * ldc + j;
    v = c[at];
    if (has_bias)
        v += bias[bias_off + (bias_rows ? i : j)];
    if (has_res)
        v += res[res_off + b * stride_c + i * ldc + j];
    if (relu)
        v = UN_RELU(v, 0.0f, 0.0f);
    if (relu == 2)
        v = v > 6.0f ? 6.0f : v;
    c[at] = v;
}
