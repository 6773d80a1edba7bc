/*
 * Element-wise kernels: binary ops with broadcasting, unary ops.
 *
 * Every tensor is a float buffer plus an offset counted in elements.  The
 * host (backends/opencl/opencl.c) checks that every index a kernel forms
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

/*
 * Four kernels per binary op, binary_NAME_{same,scalar_a,scalar_b,bcast},
 * with the same first seven arguments:
 *   n       elements of c
 *   a, b    inputs, read from a_off / b_off
 *   c       output (n), contiguous from c_off
 * _same      a, b, c all contiguous with the same shape
 * _scalar_a  a is one element, b contiguous
 * _scalar_b  a contiguous, b is one element
 * _bcast     general case, four more arguments: rank, then the output
 *            shape and the per-dimension element strides of a and b (0
 *            where broadcast), C order, in the first rank lanes
 */
#define BINARY_KERNELS(NAME, OP)                                              \
    __kernel void binary_##NAME##_same(                                       \
        uint n, __global const float *a, uint a_off, __global const float *b, \
        uint b_off, __global float *c, uint c_off)                            \
    {                                                                         \
        size_t gid = get_global_id(0);                                        \
        uint i;                                                               \
        if (gid >= n)                                                         \
            return;                                                           \
        i = (uint)gid;                                                        \
        c[c_off + i] = OP(a[a_off + i], b[b_off + i]);                        \
    }                                                                         \
                                                                              \
    __kernel void binary_##NAME##_scalar_a(                                   \
        uint n, __global const float *a, uint a_off, __global const float *b, \
        uint b_off, __global float *c, uint c_off)                            \
    {                                                                         \
        size_t gid = get_global_id(0);                                        \
        uint i;                                                               \
        if (gid >= n)                                                         \
            return;                                                           \
        i = (uint)gid;                                                        \
        c[c_off + i] = OP(a[a_off], b[b_off + i]);                            \
    }                                                                         \
                                                                              \
    __kernel void binary_##NAME##_scalar_b(                                   \
        uint n, __global const float *a, uint a_off, __global const float *b, \
        uint b_off, __global float *c, uint c_off)                            \
    {                                                                         \
        size_t gid = get_global_id(0);                                        \
        uint i;                                                               \
        if (gid >= n)                                                         \
            return;                                                           \
        i = (uint)gid;                                                        \
        c[c_off + i] = OP(a[a_off + i], b[b_off]);                            \
    }                                                                         \
                                                                              \
    __kernel void binary_##NAME##_bcast(                                      \
        uint n, __global const float *a, uint a_off, __global const float *b, \
        uint b_off, __global float *c, uint c_off, uint rank, uint8 shape,    \
        uint8 stride_a, uint8 stride_b)                                       \
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
        c[c_off + (uint)gid] = OP(a[ia], b[ib]);                              \
    }

BINARY_KERNELS(add, OP_ADD)
BINARY_KERNELS(sub, OP_SUB)
BINARY_KERNELS(mul, OP_MUL)
BINARY_KERNELS(div, OP_DIV)
BINARY_KERNELS(max, OP_MAX)
BINARY_KERNELS(min, OP_MIN)
BINARY_KERNELS(pow, OP_POW)

/* ReLU maps NaN to 0, as x > 0 ? x : 0 does. */
#define UN_RELU(x) fmax((x), 0.0f)
#define UN_SIGMOID(x) (1.0f / (1.0f + exp(-(x))))
#define UN_TANH(x) tanh(x)
#define UN_ERF(x) erf(x)
#define UN_EXP(x) exp(x)
#define UN_LOG(x) log(x)
#define UN_SQRT(x) sqrt(x)
#define UN_NEG(x) (-(x))
#define UN_ABS(x) fabs(x)

/*
 * unary_NAME: y (n, from y_off) = op(x (n, from x_off)); x and y may be the
 * same memory.  The prefix keeps the names clear of the built-ins.
 */
#define UNARY_KERNEL(NAME, OP)                                                \
    __kernel void unary_##NAME(uint n, __global const float *x, uint x_off,   \
                               __global float *y, uint y_off)                 \
    {                                                                         \
        size_t gid = get_global_id(0);                                        \
        uint i;                                                               \
        float v;                                                              \
        if (gid >= n)                                                         \
            return;                                                           \
        i = (uint)gid;                                                        \
        v = x[x_off + i];                                                     \
        y[y_off + i] = OP(v);                                                 \
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
