/*
 * The backend interface (private, never installed).
 *
 * Every backend fills one sn_backend_ops table with designated initialisers
 * in its own file under backends/<kind>/.  A member left NULL means "not
 * supported", and a kernel's variants may be refused one by one (the
 * supports member); sn_device_supports asks, before a plan uses a kernel.
 * Callers go through the sn_* wrappers in lib/backend/ (kernels.c,
 * device.c), which validate every descriptor against the buffers' sizes
 * before the backend sees it, so backends may assume well-formed,
 * in-bounds arguments.
 *
 * Execution model, the same on every backend: each device is one stream,
 * an in-order queue.  What is enqueued on it runs one command after the
 * other, in the order enqueued, and may run after the call that enqueued
 * it has returned:
 *
 *   - kernels (gemm ... gather) are always enqueued;
 *   - buffer_write_async and buffer_read_async enqueue a copy between a
 *     buffer and host memory; the host memory must stay alive and
 *     untouched (a write's source unchanged, a read's destination unread)
 *     until an event recorded after the copy has completed or the device
 *     has been synchronized;
 *   - buffer_write, buffer_read, buffer_map and buffer_lend block: they
 *     wait for what was enqueued before them, then do their work;
 *   - event_record enqueues a marker: the event completes once everything
 *     enqueued before it has finished.  event_wait blocks the host thread
 *     until then and returns the first error of that work (as synchronize
 *     does); event_query says whether it has completed, without blocking;
 *   - synchronize waits for the queue to drain and returns the first
 *     error an enqueued command hit since the last synchronize.
 *
 * The asynchronous copies and the events are optional members: where a
 * backend lacks them, the wrappers (lib/backend/device.c) copy with the
 * blocking calls and make an event whose wait is a synchronize, so that
 * callers need no special case.  Buffers passed to a kernel or a copy must
 * stay alive until it has finished.
 *
 * All tensors are float32, row-major (C order), addressed as a buffer plus an
 * offset counted in elements.
 */
#ifndef SN_BACKEND_H
#define SN_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "shardnet.h"

/* The number of this interface: every backend states the one it was
 * written against (sn_backend.abi, sn_backend_ops.abi) and the registry
 * refuses one that differs.  Raise it with every change to the structs and
 * the vtable below. */
#define SN_BACKEND_ABI 12

/** Highest tensor rank the element-wise kernels accept. */
#define SN_MAX_DIMS 8

typedef struct sn_device sn_device;
typedef struct sn_buffer sn_buffer;
typedef struct sn_event sn_event;

/** Memory owned by one device.  A backend that keeps more per buffer (the
 * CPU backend its host memory) embeds this struct as the first member of
 * its own, so that an sn_buffer * converts back. */
struct sn_buffer {
    sn_device *dev;
    size_t size;  /* bytes */
    void *handle; /* backend object (cl_mem on OpenCL) */
};

/** A point in a device's stream (event_record).  A backend that keeps
 * more per event embeds this struct as the first member of its own. */
struct sn_event {
    sn_device *dev;
};

/** A float tensor's first element: buffer + offset in elements. */
typedef struct sn_view {
    sn_buffer *buf;
    size_t offset;
} sn_view;

/*
 * C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b]  for b in [0, batch).
 * op(A) is m x k, op(B) is k x n, C is m x n, all row-major with leading
 * dimensions lda/ldb/ldc (elements between rows as stored).  Batch item b of
 * A starts at a.offset + b * stride_a (stride 0 reuses one matrix).
 */
/* A fused activation: RELU x < 0 ? 0 : x; RELU6 then t > 6 ? 6 : t (the
 * unary CLIP's expression with bounds 0 and 6, TensorFlow's Relu6 after
 * a convolution); NaN passes both.  Binary ops take RELU only. */
typedef enum sn_act {
    SN_ACT_NONE = 0,
    SN_ACT_RELU = 1,
    SN_ACT_RELU6 = 2
} sn_act;

/*
 * Fused epilogue (optional): after the product, C += bias, then C += res,
 * then C = act(C).
 * bias.buf NULL means no bias; otherwise bias holds n floats added to every
 * row (a Gemm/MatMul bias), or m floats added to every column when
 * bias_rows is set (a convolution's per-output-channel bias, C being
 * channels x pixels).  The same bias serves every batch item.
 * res.buf NULL means no residual; otherwise res is laid out as C (element
 * (b, i, j) at res.offset + b * stride_c + i * ldc + j), a residual
 * block's other operand added to the biased sum, and must not overlap C
 * (C may hold partial sums before the last step of the product).
 */
typedef struct sn_gemm_desc {
    int trans_a, trans_b; /* non-zero: use the transpose of the stored matrix */
    size_t m, n, k;
    float alpha, beta;
    sn_view a, b, c;
    size_t lda, ldb, ldc;
    size_t batch;                        /* >= 1 */
    size_t stride_a, stride_b, stride_c; /* elements between batch items */
    sn_view bias;
    int bias_rows;
    sn_view res;
    sn_act act;
    /* B's contents never change while its buffer lives (a weight): a
     * backend may keep a repacked copy of it, keyed by buffer and layout. */
    int b_const;
} sn_gemm_desc;

/*
 * Binary ops past POW (issue 15): MOD is numpy's (a result takes the
 * divisor's sign), FMOD C's fmod (the dividend's); the comparisons give
 * 1.0 or 0.0 (false for a NaN operand); AND, OR, XOR read a non-zero
 * operand as true and give 1.0 or 0.0; PRELU is a < 0 ? b * a : a.
 */
#define SN_BINARY_OP_MAP(X) X(ADD, "add") X(SUB, "sub") X(MUL, "mul") X(DIV, "div") X(MAX, "max") X(MIN, "min") X(POW, "pow") \
    X(MOD, "mod") X(FMOD, "fmod") X(EQUAL, "equal") X(GREATER, "greater")    \
    X(GREATER_EQUAL, "greater_equal") X(AND, "and") X(OR, "or")               \
    X(XOR, "xor") X(PRELU, "prelu")

typedef enum sn_binary_op {
#define SN_ENUM_(name, str) SN_BINARY_##name,
    SN_BINARY_OP_MAP(SN_ENUM_)
#undef SN_ENUM_
    SN_BINARY_COUNT
} sn_binary_op;

/*
 * c[i] = a[ia] op b[ib] over the output shape `shape` (rank dims, C order,
 * rank 0 = one element).  stride_a / stride_b give, per output dimension,
 * the element stride in a / b: 0 where that operand is broadcast.  The
 * output c is contiguous.  sn_binary_broadcast() fills shape and strides
 * from two numpy-broadcastable shapes.  act (a Relu fused by a pass) is
 * applied to each result as it is stored: c < 0 ? 0 : c, NaN and -0
 * kept, the unary RELU's bits.
 */
typedef struct sn_binary_desc {
    sn_binary_op op;
    size_t rank;
    size_t shape[SN_MAX_DIMS];
    size_t stride_a[SN_MAX_DIMS];
    size_t stride_b[SN_MAX_DIMS];
    sn_view a, b, c;
    sn_act act;
} sn_binary_desc;

/*
 * Unary ops; alpha and beta are the op's parameters:
 *   LEAKY_RELU   x < 0 ? alpha * x : x
 *   HARD_SIGMOID max(0, min(1, alpha * x + beta))
 *   CLIP         min(max(x, alpha), beta)   (NaN stays NaN)
 *   GELU         0.5 x (1 + erf(x / sqrt(2)))
 *   GELU_TANH    0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
 *   RELU         x > 0 ? x : 0 (NaN stays NaN); SIGMOID 1 / (1 + exp(-x))
 *   CLIP_GATE    t = x + alpha, c = min(max(t, 0), beta) (CLIP's),
 *                then (x * c) / beta, each step rounded to float: a
 *                hard swish exported as Add, Clip, Mul and Div, which a
 *                pass fuses (lib/passes/fuse_gate.c) with the same bits
 */
/*
 * Unary ops of issue 15 (the trigonometric and hyperbolic functions and
 * their inverses, then):
 *   ROUND        to the nearest integer, halves to even
 *   SIGN         -1, 0 or 1 (NaN stays NaN)
 *   ELU          x < 0 ? alpha (exp(x) - 1) : x
 *   SELU         beta (x <= 0 ? alpha (exp(x) - 1) : x)
 *   CELU         max(0, x) + min(0, alpha (exp(x / alpha) - 1)), NaN
 *                staying NaN
 *   SOFTPLUS     log(1 + exp(x)); SOFTSIGN x / (1 + |x|)
 *   THRESHOLDED_RELU  x > alpha ? x : 0
 *   SHRINK       x < -alpha ? x + beta : x > alpha ? x - beta : 0
 *   HARD_SWISH   x max(0, min(1, x / 6 + 1 / 2))
 *   MISH         x tanh(softplus(x))
 *   ISNAN        1 or 0
 *   ISINF        1 for +inf when alpha != 0, for -inf when beta != 0, else 0
 *   ROUND_HALF   to the nearest IEEE half (binary16), halves to even: the
 *                float of a float16 (|x| >= 65520 gives inf, NaN stays
 *                NaN); ROUND_BF16 likewise to the nearest bfloat16.  A
 *                float16 or bfloat16 tensor on a device is its values so
 *                rounded, carried as float (exec.c rounds each result)
 */
#define SN_UNARY_MATH_MAP(X)                                                  \
    X(SIN, "sin") X(COS, "cos") X(TAN, "tan") X(ASIN, "asin")                 \
    X(ACOS, "acos") X(ATAN, "atan") X(SINH, "sinh") X(COSH, "cosh")           \
    X(ASINH, "asinh") X(ACOSH, "acosh") X(ATANH, "atanh") X(CEIL, "ceil")     \
    X(FLOOR, "floor") X(ROUND, "round") X(SIGN, "sign") X(ELU, "elu")         \
    X(SELU, "selu") X(CELU, "celu") X(SOFTPLUS, "softplus")                   \
    X(SOFTSIGN, "softsign") X(THRESHOLDED_RELU, "thresholded_relu")           \
    X(SHRINK, "shrink") X(HARD_SWISH, "hard_swish") X(MISH, "mish")           \
    X(ISNAN, "isnan") X(ISINF, "isinf") X(ROUND_HALF, "round_half")          \
    X(ROUND_BF16, "round_bf16")

#define SN_UNARY_OP_MAP(X)                                                    \
    X(RELU, "relu") X(SIGMOID, "sigmoid") X(TANH, "tanh") X(ERF, "erf")       \
    X(EXP, "exp") X(LOG, "log") X(SQRT, "sqrt") X(NEG, "neg") X(ABS, "abs")   \
    X(LEAKY_RELU, "leaky_relu") X(HARD_SIGMOID, "hard_sigmoid")               \
    X(CLIP, "clip") X(GELU, "gelu") X(GELU_TANH, "gelu_tanh")               \
    X(CLIP_GATE, "clip_gate")                                                 \
    SN_UNARY_MATH_MAP(X)

typedef enum sn_unary_op {
#define SN_ENUM_(name, str) SN_UNARY_##name,
    SN_UNARY_OP_MAP(SN_ENUM_)
#undef SN_ENUM_
    SN_UNARY_COUNT
} sn_unary_op;

/* y[i] = op(x[i]) for i in [0, n); x and y may be the same memory.  With
 * gate set, y[i] = x[i] * op(x[i]), op's result rounded to float first:
 * a Mul of x by Sigmoid(x) (the SiLU) or HardSigmoid(x), fused by a pass
 * (lib/passes/fuse_gate.c) with the bits of the two nodes. */
typedef struct sn_unary_desc {
    sn_unary_op op;
    size_t n;
    sn_view x, y;
    float alpha, beta;
    int gate;
} sn_unary_desc;

/*
 * Softmax over the middle axis of x viewed as (outer, len, inner), written
 * to y of the same shape: y = exp(x - max) / sum(exp(x - max)), or its log
 * when log_softmax is set.
 */
typedef struct sn_softmax_desc {
    size_t outer, len, inner;
    int log_softmax;
    sn_view x, y;
} sn_softmax_desc;

/*
 * MIN, PROD; SUM_SQUARE sums x * x, SUM_ABS sums |x| (ReduceSumSquare and
 * ReduceL1, and the first step of ReduceL2).
 */
#define SN_REDUCE_OP_MAP(X)                                                   \
    X(SUM, "sum") X(MEAN, "mean") X(MAX, "max")                               \
    X(MIN, "min") X(PROD, "prod") X(SUM_SQUARE, "sum_square")                 \
    X(SUM_ABS, "sum_abs")

typedef enum sn_reduce_op {
#define SN_ENUM_(name, str) SN_REDUCE_##name,
    SN_REDUCE_OP_MAP(SN_ENUM_)
#undef SN_ENUM_
    SN_REDUCE_COUNT
} sn_reduce_op;

/* x viewed as (outer, len, inner) reduced over len into y (outer, inner). */
typedef struct sn_reduce_desc {
    sn_reduce_op op;
    size_t outer, len, inner;
    sn_view x, y;
} sn_reduce_desc;

/*
 * Where: out[i] = cond[ic] != 0 ? x[ix] : y[iy] over the output shape, each
 * operand with its own broadcast strides (0 where broadcast), like
 * sn_binary_desc.  cond holds floats (0.0f is false).  out is contiguous.
 */
typedef struct sn_where_desc {
    size_t rank;
    size_t shape[SN_MAX_DIMS];
    size_t stride_cond[SN_MAX_DIMS];
    size_t stride_x[SN_MAX_DIMS];
    size_t stride_y[SN_MAX_DIMS];
    sn_view cond, x, y, out;
} sn_where_desc;

/*
 * Strided copy: dst[sum i_d * dst_stride[d]] = src[sum i_d * src_stride[d]]
 * for every index (i_0 .. i_rank-1) of shape; views give element (0, ..., 0).
 * Strides are signed (a Slice with negative steps), and a source stride of
 * 0 repeats (Expand).  This one kernel moves data for Transpose, Slice,
 * Concat, Split, Expand and plain copies.  dst elements must not overlap.
 */
typedef struct sn_copy_desc {
    size_t rank;
    size_t shape[SN_MAX_DIMS];
    ptrdiff_t src_stride[SN_MAX_DIMS];
    ptrdiff_t dst_stride[SN_MAX_DIMS];
    sn_view src, dst;
} sn_copy_desc;

/*
 * im2col for a 2-D convolution (a 1-D one has in_h = k_h = out_h = 1):
 * src is (channels, in_h, in_w); dst is (channels * k_h * k_w, out_h * out_w)
 * row-major, row (c, ky, kx) and column (oy, ox) holding
 *   src[c, (row0 + oy) * stride_h + ky * dil_h - pad_top, ox * stride_w + kx * dil_w - pad_left]
 * or 0 where that falls outside the input: a band of out_h output rows
 * from row row0 (0: the convolution's first).
 */
typedef struct sn_im2col_desc {
    size_t channels, in_h, in_w, out_h, out_w, k_h, k_w;
    size_t stride_h, stride_w, dil_h, dil_w, pad_top, pad_left;
    size_t row0;
    sn_view src, dst;
} sn_im2col_desc;

typedef enum sn_pool_op {
    SN_POOL_MAX,
    SN_POOL_AVG,
    SN_POOL_COUNT
} sn_pool_op;

/*
 * 2-D pooling over `planes` planes (N * C), src (planes, in_h, in_w), dst
 * (planes, out_h, out_w).  Window (oy, ox) covers input rows
 * oy * stride_h - pad_top + ky * dil_h for ky < k_h (columns alike).  MAX
 * ignores positions outside the input.  AVG divides by the number of
 * positions inside the input, or with count_include_pad by the number
 * inside the padded input [-pad_top, in_h + pad_bottom) x [-pad_left,
 * in_w + pad_right) (a window that runs past that, in ceil mode, counts
 * only the part inside).
 */
typedef struct sn_pool_desc {
    sn_pool_op op;
    int count_include_pad;
    size_t planes, in_h, in_w, out_h, out_w, k_h, k_w;
    size_t stride_h, stride_w, dil_h, dil_w;
    size_t pad_top, pad_left, pad_bottom, pad_right;
    sn_view src, dst;
} sn_pool_desc;

/*
 * Depthwise 2-D convolution, a grouped convolution with one input channel
 * per group (a 1-D one has in_h = k_h = out_h = 1): src (images, channels,
 * in_h, in_w), weights (channels * mult, k_h, k_w), dst (images, channels *
 * mult, out_h, out_w); output channel o reads input channel o / mult:
 *   dst[n, o, oy, ox] = act(sum over ky, kx of w[o, ky, kx] *
 *       src[n, o / mult, oy * stride_h + ky * dil_h - pad_top,
 *                        ox * stride_w + kx * dil_w - pad_left] + bias[o])
 * summed in (ky, kx) order, positions outside the input left out.
 * bias.buf NULL: no bias.
 */
typedef struct sn_dwconv_desc {
    size_t images, channels, mult, in_h, in_w, out_h, out_w, k_h, k_w;
    size_t stride_h, stride_w, dil_h, dil_w, pad_top, pad_left;
    sn_view src, weights, bias, dst;
    sn_act act;
} sn_dwconv_desc;

/*
 * A product whose B is a quantized weight (issue 16), read in its small
 * type: C (m x n, row stride ldc) = act(A W + bias), A float (m x k, row
 * stride lda), W(kk, j) = scale[s] * (q(kk, j) - zero[s]) with
 * s = j * blocks + kk / block (block 0: one scale per column, blocks = 1),
 * zero.buf NULL for every zero point zero_value (0 unless set).  q's values lie in its buffer's bytes
 * from byte 4 * q.offset, as elements of its type (one byte, or two for
 * F16 and BF16, little-endian): trans_b 0, K rows of N, q(kk, j) at
 * element kk * ldq + j; trans_b 1, N rows of K, at element j * ldq + kk,
 * or for U4 (trans_b 1 only) two to a byte, byte j * ldq + kk / 2, the
 * even kk in the low nibble.  F16 and BF16 are a half-precision weight
 * (scale 1, no zero point, in practice) kept in its two bytes.  bias.buf
 * NULL: no bias (else n floats); act as GEMM's.  The sum may run in any
 * order (a kernel sums q times A, then scales).
 */
typedef enum sn_qtype {
    SN_QTYPE_S8 = 0,  /* int8 */
    SN_QTYPE_U8 = 1,  /* uint8 */
    SN_QTYPE_U4 = 2,  /* uint4, two to a byte */
    SN_QTYPE_F16 = 3, /* IEEE half */
    SN_QTYPE_BF16 = 4 /* bfloat16: a float's top 16 bits */
} sn_qtype;

/* Bytes of one element of q (U4: 1, two elements to it). */
static inline size_t sn_qtype_bytes(sn_qtype t)
{
    return t == SN_QTYPE_F16 || t == SN_QTYPE_BF16 ? 2 : 1;
}

typedef struct sn_qgemm_desc {
    size_t m, n, k;
    sn_qtype qtype;
    int trans_b;
    size_t block;
    sn_view a, q, scale, zero, bias, c;
    float zero_value; /* every zero point, where zero.buf is NULL */
    size_t lda, ldq, ldc;
    sn_act act;
} sn_qgemm_desc;

/*
 * Layer normalisation over the last axis of x viewed as (outer, len):
 * y = (x - mean) / sqrt(var + epsilon) * scale + bias, var the biased
 * variance; scale has len floats, bias has len floats or bias.buf is NULL.
 */
typedef struct sn_layernorm_desc {
    size_t outer, len;
    float epsilon;
    sn_view x, scale, bias, y;
} sn_layernorm_desc;

/*
 * Gather along the middle axis of data viewed as (outer, axis_len, inner):
 * out (outer, nidx, inner) = data[o, idx[j], i].  indices holds nidx int32
 * values (the buffer stores them bit for bit; views count 4-byte elements);
 * a negative index counts from the end; one still out of range gives 0.
 */
typedef struct sn_gather_desc {
    size_t outer, axis_len, inner, nidx;
    sn_view data, indices, out;
} sn_gather_desc;

/*
 * Top k along the middle axis of x viewed as (outer, len, inner), for each
 * (o, i) on its own: the k elements ranked first, written in rank order to
 * values (outer, k, inner; not written where values.buf is NULL) and their
 * indices along the axis, as floats, to indices (outer, k, inner).  The
 * ranking: NaN first, then the largest (or with !largest the smallest)
 * value; equal values by their index, the lower first (the higher with
 * last_index).  1 <= k <= len.  ArgMax, ArgMin, Hardmax and TopK.
 */
typedef struct sn_topk_desc {
    size_t outer, len, inner, k;
    int largest, last_index;
    sn_view x, values, indices;
} sn_topk_desc;

/*
 * One time step of a recurrent cell (ONNX RNN, GRU, LSTM) over a batch,
 * after the products: gates holds, per batch item, the cell's gate inputs
 * X_t W^T + H_{t-1} R^T + biases, G * hidden floats in ONNX's gate order
 * (RNN: i; GRU: z, r, h; LSTM: i, o, f, c), rows ld_gates apart.  With
 * (b, j) an item and a hidden unit, clip(v) = min(max(v, -clip), clip)
 * (clip > 0; else v) and f, g, h = act[0], act[1], act[2]:
 *
 *   SIMPLE:    H = f(clip(i))
 *   LSTM:      i = f(clip(gi + P_i C)), f = input_forget ? 1 - i
 *              : f(clip(gf + P_f C)), C' = f C + i g(clip(gc)),
 *              o = f(clip(go + P_o C')), H = o h(C')
 *   GRU:       z = f(clip(gz + rz)), r = f(clip(gr + rr)),
 *              H = (1 - z) g(clip(gh + r rh)) + z H
 *   GRU_RESET: y = f(clip(gr)) H   (the r (.) H_{t-1} that GRU without
 *              linear_before_reset multiplies by R_h before its GRU step)
 *
 * peep (LSTM: P_i, P_o, P_f, 3 hidden floats) and rec (GRU: rz, rr, rh,
 * (batch, 3 hidden) contiguous, H_{t-1} R^T + R_b for linear_before_reset)
 * count as 0 when their buf is NULL.  h (and c, LSTM) is the state
 * (batch, hidden), read and written in place; y (rows ld_y apart, buf NULL:
 * none) gets the new H.  mask (batch floats, buf NULL: all 1): where 0, the
 * item's sequence has ended, its state stays and its y is 0.
 */
#define SN_RNN_ACT_MAP(X)                                                     \
    X(SIGMOID, "Sigmoid") X(TANH, "Tanh") X(RELU, "Relu")                     \
    X(LEAKY_RELU, "LeakyRelu") X(THRESHOLDED_RELU, "ThresholdedRelu")         \
    X(SCALED_TANH, "ScaledTanh") X(HARD_SIGMOID, "HardSigmoid")               \
    X(ELU, "Elu") X(SOFTSIGN, "Softsign") X(SOFTPLUS, "Softplus")             \
    X(AFFINE, "Affine")

/* The activations, with their alpha and beta: LEAKY_RELU x < 0 ? alpha x
 * : x; THRESHOLDED_RELU x >= alpha ? x : 0; SCALED_TANH alpha tanh(beta x);
 * HARD_SIGMOID max(0, min(1, alpha x + beta)); ELU x < 0 ? alpha (e^x - 1)
 * : x; SOFTSIGN x / (1 + |x|); SOFTPLUS log(1 + e^x); AFFINE alpha x +
 * beta. */
typedef enum sn_rnn_act {
#define SN_ENUM_(name, str) SN_RNN_ACT_##name,
    SN_RNN_ACT_MAP(SN_ENUM_)
#undef SN_ENUM_
    SN_RNN_ACT_COUNT
} sn_rnn_act;

typedef enum sn_rnn_cell_kind {
    SN_RNN_CELL_SIMPLE,
    SN_RNN_CELL_LSTM,
    SN_RNN_CELL_GRU,
    SN_RNN_CELL_GRU_RESET,
    SN_RNN_CELL_COUNT
} sn_rnn_cell_kind;

typedef struct sn_rnn_cell_desc {
    sn_rnn_cell_kind cell;
    size_t batch, hidden;
    sn_rnn_act act[3]; /* f, g, h: the cell uses the first 1, 2 or 3 */
    float alpha[3], beta[3];
    float clip;       /* > 0: gate inputs clipped to [-clip, clip] */
    int input_forget; /* LSTM: f = 1 - i */
    sn_view gates;    /* (batch, G hidden), rows ld_gates apart */
    size_t ld_gates;
    sn_view rec;      /* GRU: (batch, 3 hidden), or buf NULL */
    sn_view peep;     /* LSTM: (3 hidden), or buf NULL */
    sn_view mask;     /* (batch), or buf NULL */
    sn_view h;        /* (batch, hidden), in and out */
    sn_view c;        /* LSTM: (batch, hidden), in and out */
    sn_view y;        /* (batch, hidden) rows ld_y apart, or buf NULL */
    size_t ld_y;
} sn_rnn_cell_desc;

/*
 * Separable resampling (Resize, Upsample): y (planes, out[0], ...,
 * out[rank-1]) from x (planes, in[0], ..., in[rank-1]), both contiguous.
 * Along axis d, output index o reads taps[d] input indices, each with a
 * weight: table[table_off[d] + 2 * (o * taps[d] + j)] holds the index of
 * tap j (a whole number as a float) and the element after it its weight.
 * An output element is the sum, over every choice of one tap per axis, of
 * the product of their weights times x at their indices; where a chosen
 * index lies outside [0, in[d]) (-1), the element is `fill` instead
 * (tf_crop_and_resize's extrapolation value).  table holds table_len
 * floats; each in[d] is below 2^24, the product of the taps at most
 * SN_RESAMPLE_MAX_TAPS.  y must not overlap x or table.
 */
#define SN_RESAMPLE_MAX_TAPS 1024
typedef struct sn_resample_desc {
    size_t planes, rank;
    size_t in[SN_MAX_DIMS], out[SN_MAX_DIMS], taps[SN_MAX_DIMS];
    size_t table_off[SN_MAX_DIMS];
    size_t table_len;
    float fill;
    sn_view x, table, y;
} sn_resample_desc;

/*
 * GridSample (2-D, as PyTorch's grid_sample): y (batch, channels, out_h,
 * out_w) samples x (batch, channels, in_h, in_w) at grid (batch, out_h,
 * out_w, 2), each pair an (x, y) in [-1, 1] across the input (the corner
 * pixels' centres with align_corners, else their outer edges).  mode:
 * bilinear, nearest (half to even) or bicubic (A = -0.75); padding: zeros
 * (reads outside give 0), border (coordinates clamped to the edge) or
 * reflection (reflected at the edges, then clamped).
 */
typedef enum sn_grid_mode {
    SN_GRID_BILINEAR,
    SN_GRID_NEAREST,
    SN_GRID_BICUBIC
} sn_grid_mode;
typedef enum sn_grid_padding {
    SN_GRID_ZEROS,
    SN_GRID_BORDER,
    SN_GRID_REFLECTION
} sn_grid_padding;
typedef struct sn_grid_sample_desc {
    sn_grid_mode mode;
    sn_grid_padding padding;
    int align_corners;
    size_t batch, channels, in_h, in_w, out_h, out_w;
    sn_view x, grid, y;
} sn_grid_sample_desc;

/*
 * RoiAlign: y (nrois, channels, out_h, out_w) pools x (batch, channels,
 * in_h, in_w) over each region rois[r] = (x1, y1, x2, y2), scaled by
 * spatial_scale (and shifted by half a pixel with half_pixel; without it,
 * at least 1 x 1), in the image batch_idx[r] (a whole number as a float;
 * outside [0, batch): zeros).  Each output bin averages (or, with max, takes
 * the largest of the weighted corners of) sampling_ratio x sampling_ratio
 * bilinear samples, or ceil(bin size) per axis when sampling_ratio is 0
 * (at most SN_ROI_MAX_SAMPLES); a sample more than a pixel outside the
 * image counts as 0.
 */
#define SN_ROI_MAX_SAMPLES 1024
typedef struct sn_roi_align_desc {
    int max_mode, half_pixel;
    size_t batch, channels, in_h, in_w, nrois, out_h, out_w;
    size_t sampling_ratio;
    float spatial_scale;
    sn_view x, rois, batch_idx, y;
} sn_roi_align_desc;

/*
 * Cumulative sums along the middle axis of x viewed as (outer, len, inner)
 * into y of the same shape: y[o, r, i] = the sum of x[o, j, i] over
 * j <= r (j < r with exclusive; j >= r, or j > r, with reverse), in float,
 * in order along the axis.  y must not overlap x.  CumSum.
 */
typedef struct sn_scan_desc {
    size_t outer, len, inner;
    int exclusive, reverse;
    sn_view x, y;
} sn_scan_desc;

/*
 * The kernels, one per kernel member of sn_backend_ops, for asking a
 * device whether it runs one (sn_device_supports).  Four have variants:
 * binary (an sn_binary_op), unary (an sn_unary_op), reduce (an
 * sn_reduce_op) and pool (an sn_pool_op).
 */
#define SN_KERNEL_MAP(X)                                                      \
    X(GEMM, "gemm") X(BINARY, "binary") X(UNARY, "unary")                     \
    X(SOFTMAX, "softmax") X(REDUCE, "reduce") X(WHERE, "where")               \
    X(COPY, "copy") X(IM2COL, "im2col") X(POOL, "pool")                       \
    X(LAYERNORM, "layernorm") X(GATHER, "gather") X(TOPK, "topk")           \
    X(RNN_CELL, "rnn_cell") X(RESAMPLE, "resample")                           \
    X(GRID_SAMPLE, "grid_sample") X(ROI_ALIGN, "roi_align") X(SCAN, "scan")   \
    X(DWCONV, "dwconv") X(QGEMM, "qgemm")

typedef enum sn_kernel {
#define SN_ENUM_(name, str) SN_KERNEL_##name,
    SN_KERNEL_MAP(SN_ENUM_)
#undef SN_ENUM_
    SN_KERNEL_COUNT
} sn_kernel;

/* sn_device_supports's variant for "any variant", and for the kernels
 * without variants. */
#define SN_VARIANT_ANY (-1)

/* Any kernel's descriptor: the member its sn_kernel names (a plan's step,
 * a CPU device's queued task). */
typedef union sn_kernel_desc {
    sn_gemm_desc gemm;
    sn_binary_desc binary;
    sn_unary_desc unary;
    sn_softmax_desc softmax;
    sn_reduce_desc reduce;
    sn_where_desc where;
    sn_copy_desc copy;
    sn_im2col_desc im2col;
    sn_pool_desc pool;
    sn_layernorm_desc layernorm;
    sn_gather_desc gather;
    sn_topk_desc topk;
    sn_rnn_cell_desc rnn_cell;
    sn_resample_desc resample;
    sn_grid_sample_desc grid_sample;
    sn_roi_align_desc roi_align;
    sn_scan_desc scan;
    sn_dwconv_desc dwconv;
    sn_qgemm_desc qgemm;
} sn_kernel_desc;

/* Flags for buffer_map. */
#define SN_MAP_READ 1
#define SN_MAP_WRITE 2

/** One backend: a table of function pointers, filled once per backend. */
typedef struct sn_backend_ops {
    unsigned abi;     /* SN_BACKEND_ABI */
    const char *kind; /* as device strings name it: "cpu" in "cpu:0" */

    /* Release everything the device holds (called once, after a sync). */
    void (*device_free)(sn_device *dev);

    shardnet_status (*buffer_alloc)(sn_device *dev, size_t bytes,
                                    sn_buffer **out);
    void (*buffer_free)(sn_buffer *buf);
    shardnet_status (*buffer_write)(sn_buffer *buf, size_t offset,
                                    const void *src, size_t bytes);
    shardnet_status (*buffer_read)(sn_buffer *buf, size_t offset, void *dst,
                                   size_t bytes);
    /* Optional: host pointer to [offset, offset + bytes), valid until unmap.
     * Zero-copy where the device shares memory with the host. */
    shardnet_status (*buffer_map)(sn_buffer *buf, size_t offset, size_t bytes,
                                  int flags, void **ptr);
    shardnet_status (*buffer_unmap)(sn_buffer *buf, void *ptr);
    /* Optional, for buffers that are host memory: until called again with
     * NULL, the buffer's storage is the caller's `ptr` (buf->size bytes,
     * any alignment), so that inputs need no copy.  Ordered like a write. */
    shardnet_status (*buffer_lend)(sn_buffer *buf, void *ptr);
    /* Optional, for devices whose memory is the host's: a buffer of
     * `bytes` whose storage is the caller's `host` (4-byte aligned), for a
     * constant: it stays alive and unchanged until the buffer is freed,
     * and nothing writes the buffer.  With SN_WRAP_DROPPABLE the memory is
     * a file's pages mapped read-only (a model's weights): the backend may
     * drop them from the process (madvise) once it holds a copy of its own,
     * such as a packed one, and reading them again brings them back from
     * the file. */
    shardnet_status (*buffer_wrap)(sn_device *dev, const void *host,
                                   size_t bytes, unsigned flags,
                                   sn_buffer **out);
    /* Optional, both or neither: host memory that the device copies to
     * and from fastest (a CUDA device's pinned memory), `bytes` of it,
     * 64-byte aligned (NULL when it cannot be had), and its release, for
     * the buffers that data is staged through on its way between
     * devices.  Without them, or when it gives none, plain host memory
     * (sn_staging_alloc). */
    void *(*host_alloc)(sn_device *dev, size_t bytes);
    void (*host_free)(sn_device *dev, void *ptr);
    /* Optional: buffer_write and buffer_read enqueued on the stream
     * instead of blocking (see the execution model above for how long the
     * host memory must stay as it is). */
    shardnet_status (*buffer_write_async)(sn_buffer *buf, size_t offset,
                                          const void *src, size_t bytes);
    shardnet_status (*buffer_read_async)(sn_buffer *buf, size_t offset,
                                         void *dst, size_t bytes);

    shardnet_status (*gemm)(sn_device *dev, const sn_gemm_desc *d);
    shardnet_status (*binary)(sn_device *dev, const sn_binary_desc *d);
    shardnet_status (*unary)(sn_device *dev, const sn_unary_desc *d);
    shardnet_status (*softmax)(sn_device *dev, const sn_softmax_desc *d);
    shardnet_status (*reduce)(sn_device *dev, const sn_reduce_desc *d);
    shardnet_status (*where)(sn_device *dev, const sn_where_desc *d);
    shardnet_status (*copy)(sn_device *dev, const sn_copy_desc *d);
    shardnet_status (*im2col)(sn_device *dev, const sn_im2col_desc *d);
    shardnet_status (*pool)(sn_device *dev, const sn_pool_desc *d);
    shardnet_status (*layernorm)(sn_device *dev, const sn_layernorm_desc *d);
    shardnet_status (*gather)(sn_device *dev, const sn_gather_desc *d);
    shardnet_status (*topk)(sn_device *dev, const sn_topk_desc *d);
    shardnet_status (*rnn_cell)(sn_device *dev, const sn_rnn_cell_desc *d);
    shardnet_status (*resample)(sn_device *dev, const sn_resample_desc *d);
    shardnet_status (*grid_sample)(sn_device *dev,
                                   const sn_grid_sample_desc *d);
    shardnet_status (*roi_align)(sn_device *dev, const sn_roi_align_desc *d);
    shardnet_status (*scan)(sn_device *dev, const sn_scan_desc *d);
    shardnet_status (*dwconv)(sn_device *dev, const sn_dwconv_desc *d);
    shardnet_status (*qgemm)(sn_device *dev, const sn_qgemm_desc *d);

    /* Optional: does dev run kernel k, of variant `variant` (an
     * sn_unary_op, sn_binary_op, sn_reduce_op or sn_pool_op where k has
     * variants, in range; SN_VARIANT_ANY: every variant)?  Asked only for
     * a kernel whose member is set; without this member, the device runs
     * every variant of every kernel it has a member for. */
    int (*supports)(sn_device *dev, sn_kernel k, int variant);

    shardnet_status (*synchronize)(sn_device *dev);

    /* Optional, all three or none: an event recorded after everything
     * enqueued so far; waiting for it (the first error of that work, or
     * SHARDNET_OK); freeing it, done or not.  event_query, optional on
     * top: *done set non-zero once the event has completed, without
     * blocking; an error of the work before it may come back here too. */
    shardnet_status (*event_record)(sn_device *dev, sn_event **out);
    shardnet_status (*event_wait)(sn_event *ev);
    shardnet_status (*event_query)(sn_event *ev, int *done);
    void (*event_free)(sn_event *ev);

    /* Optional: with on, run the calling host thread near the device (a
     * CPU device: on its package), for the threads that drive one device
     * each in a split; otherwise such a thread, polling for its kernels,
     * lands on a core another device computes on.  With !on, give the
     * thread back the binding it had before. */
    void (*bind_thread)(sn_device *dev, int on);

    /* Optional: a device of its own made of `count` of dev's units from
     * unit `first` on (a CPU device's cores, counted among those it uses;
     * an OpenCL CPU device's compute units, by device fission), named
     * `name`, in *out; device_free frees it, before or after dev.  A
     * backend that cannot cut this device says which and why.  Called
     * through sn_device_partition, which checks the range. */
    shardnet_status (*partition)(sn_device *dev, unsigned first,
                                 unsigned count, const char *name,
                                 sn_device **out);
} sn_backend_ops;

/** One device, owned by the context that discovered it. */
struct sn_device {
    const sn_backend_ops *ops;
    shardnet_device_info info;
    void *impl; /* backend state */
    /* In a job of several processes (lib/comm/world.h): the process the device
     * is on.  A remote device (another process's) is a description only:
     * its ops have no buffers and no kernels. */
    unsigned process;
    int remote;
    /* The configuration of the context the device belongs to (its memory
     * limit, its cache folder...), set by the context; NULL outside one
     * (sn_config_or_env: the process's). */
    const sn_config *config;
    /* A partition (sn_device_partition): the device it was cut from, and
     * its first unit there (it has info.compute_units of them); NULL for
     * a device discovery found. */
    sn_device *whole;
    unsigned first_unit;
    /* It computes on the host's CPU cores (an OpenCL CPU device such as
     * PoCL's): it shares them with the CPU devices (lib/plan/share.c). */
    int host_cores;
};

/* --- the registry (lib/backend/registry.c) ------------------------------ */

/* The devices discovered so far, in discovery order; each backend appends
 * its own.  sn_device_list_push refuses a device whose ops state another
 * SN_BACKEND_ABI. */
typedef struct sn_device_list {
    sn_device **items;
    size_t count, cap;
} sn_device_list;

shardnet_status sn_device_list_push(sn_device_list *list, sn_device *dev);
/* Free every device of the list (device_free) and empty the list. */
void sn_device_list_free(sn_device_list *list);

/* What discovery needs to know that only layers above the backends can
 * tell (a backend sees only this interface and lib/core): this process's
 * place among the processes of its job on the same machine that the
 * launcher left unbound, node_rank of node_size (0 of 1 outside a job),
 * and the configuration of the context being made (NULL: the process's).
 * The CPU backend gives such processes even shares of the cores and sizes
 * its teams by config's cpu_threads; the OpenCL backend keeps config for
 * its kernel sources and program cache. */
typedef struct sn_discover_args {
    unsigned node_rank, node_size;
    const sn_config *config;
} sn_discover_args;

/*
 * One backend, as its folder exports it (backends/<kind>/): the interface
 * number it was written against, its kind as device strings name it, and
 * its discovery, which appends the backend's devices to the list.  A
 * backend whose platform is absent (no OpenCL ICD) appends nothing and
 * returns OK.
 */
typedef struct sn_backend {
    unsigned abi; /* SN_BACKEND_ABI */
    const char *kind;
    shardnet_status (*discover)(sn_device_list *list,
                                const sn_discover_args *args);
} sn_backend;

/* Every compiled backend's devices, in the registry's order, appended to
 * list; on failure the list is left as it was. */
shardnet_status sn_backends_discover(sn_device_list *list,
                                     const sn_discover_args *args);
/* One backend's devices: a backend that states another SN_BACKEND_ABI is
 * refused with SHARDNET_INTERNAL and a message that says so.  (The
 * registry's own check, open to the tests.) */
shardnet_status sn_backend_discover(const sn_backend *backend,
                                    sn_device_list *list,
                                    const sn_discover_args *args);
/* Is kind (len bytes, not NUL-terminated) a kind device strings may name,
 * built in or not? */
int sn_backend_kind_known(const char *kind, size_t len);
/* The kinds device strings may name, as "cpu, cl, cuda", in buf (cap
 * bytes, truncated). */
void sn_backend_kinds(char *buf, size_t cap);
/* A device of another process of the job: its description only (no
 * buffers, no kernels), under its kind's name; freed by device_free. */
shardnet_status sn_remote_device_new(const shardnet_device_info *info,
                                     sn_device **out);

/* The shapes device (lib/backend/shapes.c): buffers with a size and no
 * memory, kernels that do nothing, every kernel supported.  A plan built
 * on it tells every value's shape and the arena's size without a weight
 * uploaded or read; it must never run.  One for the process. */
sn_device *sn_shapes_device(void);
int sn_device_is_shapes(const sn_device *dev);

/* Checked entry points (lib/backend/device.c and kernels.c): validate,
 * then call the backend. */
shardnet_status sn_buffer_alloc(sn_device *dev, size_t bytes, sn_buffer **out);
/* buffer_wrap's flags */
#define SN_WRAP_DROPPABLE 1u
/* A buffer over the caller's host memory (see buffer_wrap);
 * SHARDNET_UNSUPPORTED, quietly (no error message set), where the device
 * cannot use host memory in place, or host is not 4-byte aligned. */
shardnet_status sn_buffer_wrap(sn_device *dev, const void *host, size_t bytes,
                               unsigned flags, sn_buffer **out);
void sn_buffer_free(sn_buffer *buf);
shardnet_status sn_buffer_write(sn_buffer *buf, size_t offset, const void *src,
                                size_t bytes);
shardnet_status sn_buffer_read(sn_buffer *buf, size_t offset, void *dst,
                               size_t bytes);
shardnet_status sn_buffer_map(sn_buffer *buf, size_t offset, size_t bytes,
                              int flags, void **ptr);
shardnet_status sn_buffer_unmap(sn_buffer *buf, void *ptr);
/* Host memory for staging data on its way to and from dev (NULL: any
 * device): the backend's host_alloc where it has one and it gives it
 * (pinned memory), else plain memory; 64-byte aligned; NULL when out of
 * memory.  Released by sn_staging_free, to whichever gave it (a NULL
 * ptr: nothing), while that device lives. */
void *sn_staging_alloc(sn_device *dev, size_t bytes);
void sn_staging_free(void *ptr);
/* The first of devs[0 .. n) of this process with staging memory of its
 * own (a GPU's pinned memory), whose staging then serves them all; NULL
 * when none has. */
sn_device *sn_staging_owner(sn_device *const *devs, size_t n);
/* Asynchronous copies, checked like the blocking ones; on a backend
 * without them, the blocking copy.  The host memory must stay as it is
 * until an event recorded after the copy has completed (or the device is
 * synchronized). */
shardnet_status sn_buffer_write_async(sn_buffer *buf, size_t offset,
                                      const void *src, size_t bytes);
shardnet_status sn_buffer_read_async(sn_buffer *buf, size_t offset, void *dst,
                                     size_t bytes);
/* Events: *out completes when everything enqueued on dev before it has
 * finished.  sn_event_wait blocks until then and returns the first error
 * of that work; sn_event_query sets *done without blocking.  On a backend
 * without events, the event's wait is a synchronize of its device and its
 * query waits (so says done, always).  sn_event_free takes NULL. */
shardnet_status sn_event_record(sn_device *dev, sn_event **out);
shardnet_status sn_event_wait(sn_event *ev);
shardnet_status sn_event_query(sn_event *ev, int *done);
void sn_event_free(sn_event *ev);
shardnet_status sn_gemm(sn_device *dev, const sn_gemm_desc *d);
shardnet_status sn_binary(sn_device *dev, const sn_binary_desc *d);
shardnet_status sn_unary(sn_device *dev, const sn_unary_desc *d);
shardnet_status sn_softmax(sn_device *dev, const sn_softmax_desc *d);
shardnet_status sn_reduce(sn_device *dev, const sn_reduce_desc *d);
shardnet_status sn_where(sn_device *dev, const sn_where_desc *d);
shardnet_status sn_copy(sn_device *dev, const sn_copy_desc *d);
shardnet_status sn_im2col(sn_device *dev, const sn_im2col_desc *d);
shardnet_status sn_pool(sn_device *dev, const sn_pool_desc *d);
shardnet_status sn_layernorm(sn_device *dev, const sn_layernorm_desc *d);
shardnet_status sn_gather(sn_device *dev, const sn_gather_desc *d);
shardnet_status sn_topk(sn_device *dev, const sn_topk_desc *d);
shardnet_status sn_rnn_cell(sn_device *dev, const sn_rnn_cell_desc *d);
shardnet_status sn_resample(sn_device *dev, const sn_resample_desc *d);
shardnet_status sn_grid_sample(sn_device *dev, const sn_grid_sample_desc *d);
shardnet_status sn_roi_align(sn_device *dev, const sn_roi_align_desc *d);
shardnet_status sn_scan(sn_device *dev, const sn_scan_desc *d);
shardnet_status sn_dwconv(sn_device *dev, const sn_dwconv_desc *d);
shardnet_status sn_qgemm(sn_device *dev, const sn_qgemm_desc *d);
shardnet_status sn_synchronize(sn_device *dev);
/* Kernel k with its descriptor d: the checked entry point above that k
 * names. */
shardnet_status sn_launch(sn_device *dev, sn_kernel k, const sn_kernel_desc *d);
/* Pointers to the views (buffer + offset) kernel k's descriptor holds, in
 * v (room for 8): its inputs and outputs, an unused optional one with a
 * NULL buffer.  How many; 0 for a k that is no kernel. */
size_t sn_kernel_views(int k, sn_kernel_desc *u, sn_view **v);
/* The variant of kernel k that d asks for (its op), SN_VARIANT_ANY for a
 * kernel without variants. */
int sn_kernel_desc_variant(sn_kernel k, const sn_kernel_desc *d);
/* Does dev run kernel k of variant `variant` (see sn_backend_ops.supports;
 * SN_VARIANT_ANY: all of its variants)?  0 for a remote device, a kernel
 * member left NULL, or a variant out of the kernel's range; else the
 * backend's answer, or 1 when it has no supports member. */
int sn_device_supports(const sn_device *dev, sn_kernel k, int variant);
/* How many variants kernel k has (SN_BINARY_COUNT for binary, ...); 0 for
 * a kernel without variants. */
int sn_kernel_variants(sn_kernel k);
/* For a backend's supports member: is `variant` of k one of the first
 * implemented[k] variants of its enum (for SN_VARIANT_ANY: are they all of
 * them)?  A backend lists how far its kernels go, so that a variant added
 * to an enum is refused until the backend implements it. */
int sn_variants_within(const int implemented[SN_KERNEL_COUNT], sn_kernel k,
                       int variant);
/* Bytes the planner may use on dev: its memory, capped by its context's
 * memory limit (sn_config.memory_limit) when set; 0 when unknown. */
uint64_t sn_device_memory(const sn_device *dev);
/* The calling thread drives dev from now on (bind_thread, if any); with
 * !on, the thread's earlier binding comes back. */
void sn_bind_thread(sn_device *dev, int on);
/* A partition of dev: `count` of its units from unit `first` on (see the
 * ops table's partition), named `name`, a device of its own in *out, with
 * whole, first_unit, process and config set.  Refused, with a message
 * that names dev and says why, where the range is empty or beyond dev's
 * units, dev is itself a partition or another process's, or its backend
 * cannot cut it. */
shardnet_status sn_device_partition(sn_device *dev, unsigned first,
                                    unsigned count, const char *name,
                                    sn_device **out);

/*
 * Fill d->rank, d->shape, d->stride_a, d->stride_b for c = a op b with numpy
 * broadcasting of shape_a (rank_a dims) and shape_b (rank_b dims), both
 * contiguous.  Dimensions that can be merged are merged, so d->rank may be
 * smaller than max(rank_a, rank_b).  Fails on incompatible shapes.
 */
shardnet_status sn_binary_broadcast(sn_binary_desc *d, size_t rank_a,
                                    const size_t *shape_a, size_t rank_b,
                                    const size_t *shape_b);

const char *sn_binary_op_name(sn_binary_op op);
const char *sn_unary_op_name(sn_unary_op op);
const char *sn_reduce_op_name(sn_reduce_op op);
const char *sn_kernel_name(sn_kernel k);
/* "unary/erf", "gemm": kernel k and, where it has variants and variant is
 * one, the variant's name, in buf (cap bytes, truncated); returns buf. */
const char *sn_kernel_variant_name(sn_kernel k, int variant, char *buf,
                                   size_t cap);

/* Context internals used by the CLI and the tests. */
sn_device *sn_context_device(const shardnet_context_t *ctx, size_t index);

#endif /* SN_BACKEND_H */
