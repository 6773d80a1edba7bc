/*
 * The operator registry (see registry.h): the one table of the operators
 * shardnet runs, and what is computed from an entry alone (a node's work,
 * whether a device runs the kernels of its uses).  The lowerings live
 * with their family (ops_shape.c, ops_elementwise.c, ops_nn.c, ops_conv.c,
 * ops_norm.c, ops_data.c, ops_reduce.c, ops_select.c, ops_loss.c); the shard and rows rules are
 * carried out by the splits that read them; the public API lists the
 * table (lib/api/operator.c).
 *
 * Adding an operator: its lowering in the file of its family (declared in
 * ops.h), then one line below.  since/until: the ONNX opsets whose form
 * of the operator the lowering implements (until 0: up to the newest).
 */
#include <config.h>

#include <string.h>

#include "ops/ops.h"
#include "ops/registry.h"

/* One entry: op type, input counts, lowering, first opset, shard rule,
 * rows rule, cost, and the kernels its lowering may launch, as USE(GEMM) |
 * USE(UNARY_RELU) | ...  (none: it runs on the host or aliases its input,
 * on every device). */
#define OP(name, lo, hi, fn, since, shard, rows, cost, uses)                  \
    {{name, lo, hi, fn, since, 0}, "", SN_SHARD_##shard, SN_ROWS_##rows,     \
     SN_COST_##cost, uses}
/* An entry of another domain than ONNX's own. */
#define OP_OF(domain, name, lo, hi, fn, since, shard, rows, cost, uses)       \
    {{name, lo, hi, fn, since, 0}, domain, SN_SHARD_##shard, SN_ROWS_##rows, \
     SN_COST_##cost, uses}
#define USE(u) SN_USES_BIT(SN_USE_##u)
#define HOST 0
/* A cast to bool or to an integer type on the device, or to float16 or
 * bfloat16 (ops_elementwise.c) */
#define CAST_USES                                                             \
    (USE(BINARY_EQUAL) | USE(BINARY_SUB) | USE(UNARY_ABS) |                   \
     USE(UNARY_FLOOR) | USE(UNARY_SIGN) | USE(BINARY_MUL) |                   \
     USE(UNARY_ROUND_HALF) | USE(UNARY_ROUND_BF16))
/* The shapes most entries share: a unary kernel of one variant, a binary
 * one with numpy broadcasting, a reduction over the axes given. */
#define UNARY(name, since, shard, variant)                                    \
    OP(name, 1, 1, sn_lower_unary, since, shard, EACH, ELEMENTS,              \
       USE(UNARY_##variant))
#define BINARY(name, shard, variant)                                          \
    OP(name, 2, 2, sn_lower_binary, 1, shard, BROADCAST, ELEMENTS,            \
       USE(BINARY_##variant))
#define REDUCE(name, fn, variant)                                             \
    OP(name, 1, 2, fn, 1, REPLICATE, REDUCE, ELEMENTS, USE(REDUCE_##variant))

/* The scatters' kernels (ops_index.c): copies into one source, a gather,
 * and the reductions' binary steps. */
#define INDEX_SCATTER_USES                                                    \
    (USE(COPY) | USE(GATHER) | USE(BINARY_ADD) | USE(BINARY_MUL) |            \
     USE(BINARY_MAX) | USE(BINARY_MIN))

static const sn_operator registry[] = {
    /* shapes, copies and constants (ops_shape.c; Cast in ops_elementwise.c) */
    OP("Identity", 1, 1, sn_lower_identity, 1, ADDITIVE, EACH, ELEMENTS, HOST),
    OP("Dropout", 1, 3, sn_lower_identity, 1, REPLICATE, EACH, ELEMENTS, HOST),
    OP("Reshape", 1, 2, sn_lower_reshape, 1, RESHAPE, RESHAPE, ELEMENTS, HOST),
    OP("Flatten", 1, 1, sn_lower_flatten, 1, FLATTEN, FLATTEN, ELEMENTS, HOST),
    OP("Squeeze", 1, 2, sn_lower_squeeze, 1, REPLICATE, SQUEEZE, ELEMENTS,
       HOST),
    OP("Unsqueeze", 1, 2, sn_lower_unsqueeze, 1, REPLICATE, UNSQUEEZE,
       ELEMENTS, HOST),
    OP("Shape", 1, 1, sn_lower_shape, 1, REPLICATE, MIXED, ELEMENTS, HOST),
    OP("Constant", 0, 0, sn_lower_constant, 1, REPLICATE, MIXED, ELEMENTS,
       HOST),
    OP("Cast", 1, 1, sn_lower_cast, 1, REPLICATE, EACH, ELEMENTS, CAST_USES),
    /* element-wise (ops_elementwise.c) */
    BINARY("Add", ADDITIVE, ADD),
    BINARY("Sub", ADDITIVE, SUB),
    BINARY("Mul", ELEMENTWISE, MUL),
    BINARY("Div", ELEMENTWISE, DIV),
    BINARY("Pow", ELEMENTWISE, POW),
    UNARY("Relu", 1, ELEMENTWISE, RELU),
    UNARY("Sigmoid", 1, ELEMENTWISE, SIGMOID),
    UNARY("Tanh", 1, ELEMENTWISE, TANH),
    UNARY("Erf", 9, ELEMENTWISE, ERF),
    UNARY("Exp", 1, ELEMENTWISE, EXP),
    UNARY("Log", 1, ELEMENTWISE, LOG),
    UNARY("Sqrt", 1, ELEMENTWISE, SQRT),
    UNARY("Neg", 1, ADDITIVE, NEG),
    UNARY("Abs", 1, ELEMENTWISE, ABS),
    UNARY("LeakyRelu", 1, ELEMENTWISE, LEAKY_RELU),
    UNARY("HardSigmoid", 1, ELEMENTWISE, HARD_SIGMOID),
    OP("Gelu", 1, 1, sn_lower_unary, 20, ELEMENTWISE, EACH, ELEMENTS,
       USE(UNARY_GELU) | USE(UNARY_GELU_TANH)),
    /* ONNX Runtime's GELU forms: its Gelu (the exact one, before opset
     * 20's), and with a bias added first (ops_elementwise.c) */
    OP_OF("com.microsoft", "Gelu", 1, 1, sn_lower_unary, 1, ELEMENTWISE, EACH,
          ELEMENTS, USE(UNARY_GELU)),
    OP_OF("com.microsoft", "BiasGelu", 2, 2, sn_lower_gelu_forms, 1,
          ELEMENTWISE, BROADCAST, ELEMENTS, USE(BINARY_ADD) | USE(UNARY_GELU)),
    OP_OF("com.microsoft", "FastGelu", 1, 2, sn_lower_gelu_forms, 1,
          ELEMENTWISE, BROADCAST, ELEMENTS,
          USE(BINARY_ADD) | USE(UNARY_GELU_TANH)),
    OP_OF("com.microsoft", "QuickGelu", 1, 1, sn_lower_gelu_forms, 1,
          ELEMENTWISE, EACH, ELEMENTS, USE(BINARY_MUL) | USE(UNARY_SIGMOID)),
    /* bounds computed on the device are applied by max and min */
    OP("Clip", 1, 3, sn_lower_unary, 1, ELEMENTWISE, EACH, ELEMENTS,
       USE(UNARY_CLIP) | USE(BINARY_MAX) | USE(BINARY_MIN) |
           USE(UNARY_CLIP_GATE)),
    OP("Reciprocal", 1, 1, sn_lower_reciprocal, 1, ELEMENTWISE, EACH,
       ELEMENTS, USE(BINARY_DIV)),
    OP("Not", 1, 1, sn_lower_not, 1, REPLICATE, EACH, ELEMENTS,
       USE(BINARY_SUB)),
    /* any number of inputs, broadcast together (ops_elementwise.c) */
    OP("Max", 1, 1 << 20, sn_lower_variadic, 1, ELEMENTWISE, BROADCAST,
       ELEMENTS, USE(BINARY_MAX)),
    OP("Min", 1, 1 << 20, sn_lower_variadic, 1, ELEMENTWISE, BROADCAST,
       ELEMENTS, USE(BINARY_MIN)),
    OP("Sum", 1, 1 << 20, sn_lower_variadic, 1, ADDITIVE, BROADCAST,
       ELEMENTS, USE(BINARY_ADD)),
    OP("Mean", 1, 1 << 20, sn_lower_variadic, 1, ELEMENTWISE, BROADCAST,
       ELEMENTS, USE(BINARY_ADD) | USE(BINARY_DIV)),
    /* issue 15's element-wise operators: unary (ops_elementwise.c) */
    UNARY("Sin", 7, ELEMENTWISE, SIN),
    UNARY("Cos", 7, ELEMENTWISE, COS),
    UNARY("Tan", 7, ELEMENTWISE, TAN),
    UNARY("Asin", 7, ELEMENTWISE, ASIN),
    UNARY("Acos", 7, ELEMENTWISE, ACOS),
    UNARY("Atan", 7, ELEMENTWISE, ATAN),
    UNARY("Sinh", 9, ELEMENTWISE, SINH),
    UNARY("Cosh", 9, ELEMENTWISE, COSH),
    UNARY("Asinh", 9, ELEMENTWISE, ASINH),
    UNARY("Acosh", 9, ELEMENTWISE, ACOSH),
    UNARY("Atanh", 9, ELEMENTWISE, ATANH),
    UNARY("Ceil", 1, ELEMENTWISE, CEIL),
    UNARY("Floor", 1, ELEMENTWISE, FLOOR),
    UNARY("Round", 11, ELEMENTWISE, ROUND),
    UNARY("Sign", 9, ELEMENTWISE, SIGN),
    UNARY("Elu", 1, ELEMENTWISE, ELU),
    UNARY("Selu", 1, ELEMENTWISE, SELU),
    UNARY("Celu", 12, ELEMENTWISE, CELU),
    UNARY("Softplus", 1, ELEMENTWISE, SOFTPLUS),
    UNARY("Softsign", 1, ELEMENTWISE, SOFTSIGN),
    UNARY("ThresholdedRelu", 1, ELEMENTWISE, THRESHOLDED_RELU),
    UNARY("Shrink", 9, ELEMENTWISE, SHRINK),
    UNARY("HardSwish", 14, ELEMENTWISE, HARD_SWISH),
    UNARY("Mish", 18, ELEMENTWISE, MISH),
    UNARY("IsNaN", 9, ELEMENTWISE, ISNAN),
    UNARY("IsInf", 10, ELEMENTWISE, ISINF),
    /* comparisons, logic, Mod, BitShift, PRelu (ops_logic.c); Less and
     * LessOrEqual are Greater and GreaterOrEqual swapped */
    OP("Equal", 2, 2, sn_lower_compare, 1, ELEMENTWISE, BROADCAST, ELEMENTS,
       USE(BINARY_EQUAL)),
    OP("Greater", 2, 2, sn_lower_compare, 1, ELEMENTWISE, BROADCAST,
       ELEMENTS, USE(BINARY_GREATER)),
    OP("GreaterOrEqual", 2, 2, sn_lower_compare, 12, ELEMENTWISE, BROADCAST,
       ELEMENTS, USE(BINARY_GREATER_EQUAL)),
    OP("Less", 2, 2, sn_lower_compare, 1, ELEMENTWISE, BROADCAST, ELEMENTS,
       USE(BINARY_GREATER)),
    OP("LessOrEqual", 2, 2, sn_lower_compare, 12, ELEMENTWISE, BROADCAST,
       ELEMENTS, USE(BINARY_GREATER_EQUAL)),
    OP("And", 2, 2, sn_lower_compare, 1, ELEMENTWISE, BROADCAST, ELEMENTS,
       USE(BINARY_AND)),
    OP("Or", 2, 2, sn_lower_compare, 1, ELEMENTWISE, BROADCAST, ELEMENTS,
       USE(BINARY_OR)),
    OP("Xor", 2, 2, sn_lower_compare, 1, ELEMENTWISE, BROADCAST, ELEMENTS,
       USE(BINARY_XOR)),
    OP("Mod", 2, 2, sn_lower_compare, 10, ELEMENTWISE, BROADCAST, ELEMENTS,
       USE(BINARY_MOD) | USE(BINARY_FMOD)),
    OP("BitShift", 2, 2, sn_lower_bitshift, 11, REPLICATE, BROADCAST,
       ELEMENTS, HOST),
    OP("PRelu", 2, 2, sn_lower_prelu, 1, ELEMENTWISE, BROADCAST, ELEMENTS,
       USE(BINARY_PRELU)),
    OP("CastLike", 2, 2, sn_lower_castlike, 15, REPLICATE, EACH, ELEMENTS,
       CAST_USES),
    /* linear algebra and layers (ops_nn.c); MatMul's third input is a
     * bias fused by a pass.  An empty product (k = 0) is a copy of C,
     * scaled by beta, or of zeros. */
    OP("Gemm", 2, 3, sn_lower_gemm, 1, GEMM, GEMM, GEMM,
       USE(GEMM) | USE(COPY) | USE(BINARY_MUL) | USE(UNARY_RELU) |
           USE(UNARY_CLIP)),
    OP("MatMul", 2, 3, sn_lower_matmul, 1, MATMUL, MATMUL, MATMUL,
       USE(GEMM) | USE(COPY) | USE(UNARY_RELU) | USE(UNARY_CLIP)),
    OP("Softmax", 1, 1, sn_lower_softmax, 1, SOFTMAX, SOFTMAX, ELEMENTS,
       USE(SOFTMAX)),
    OP("LogSoftmax", 1, 1, sn_lower_softmax, 1, SOFTMAX, SOFTMAX, ELEMENTS,
       USE(SOFTMAX)),
    /* convolution and pooling (ops_conv.c); a grouped convolution adds
     * its bias and activation after the products; Conv's fourth input is
     * a residual fused by a pass */
    OP("Conv", 2, 4, sn_lower_conv, 1, CONV, CONV, CONV,
       USE(GEMM) | USE(IM2COL) | USE(BINARY_ADD) | USE(UNARY_RELU) |
           USE(UNARY_CLIP) | USE(DWCONV)),
    OP("MaxPool", 1, 1, sn_lower_maxpool, 1, POOL, EACH, ELEMENTS,
       USE(POOL_MAX)),
    OP("AveragePool", 1, 1, sn_lower_avgpool, 1, POOL, EACH, ELEMENTS,
       USE(POOL_AVG)),
    OP("GlobalAveragePool", 1, 1, sn_lower_global_avgpool, 1, POOL, EACH,
       ELEMENTS, USE(REDUCE_MEAN)),
    OP("GlobalMaxPool", 1, 1, sn_lower_global_maxpool, 1, POOL, EACH,
       ELEMENTS, USE(REDUCE_MAX)),
    /* normalisation (ops_norm.c): statistics computed on the device (in
     * training mode, or for LayerNormalization's optional outputs) take
     * reductions and element-wise arithmetic */
    OP("BatchNormalization", 5, 5, sn_lower_batchnorm, 1, REPLICATE, EACH,
       ELEMENTS,
       USE(BINARY_ADD) | USE(BINARY_SUB) | USE(BINARY_MUL) | USE(BINARY_DIV) |
           USE(UNARY_SQRT) | USE(REDUCE_MEAN)),
    OP("LayerNormalization", 2, 3, sn_lower_layernorm, 17, LAYERNORM,
       LAYERNORM, ELEMENTS,
       USE(LAYERNORM) | USE(REDUCE_MEAN) | USE(BINARY_ADD) |
           USE(BINARY_SUB) | USE(BINARY_MUL) | USE(BINARY_POW)),
    /* data movement (ops_data.c) */
    OP("Transpose", 1, 1, sn_lower_transpose, 1, TRANSPOSE, TRANSPOSE,
       ELEMENTS, USE(COPY)),
    OP("Concat", 1, 1 << 20, sn_lower_concat, 1, REPLICATE, CONCAT, ELEMENTS,
       USE(COPY)),
    OP("Split", 1, 2, sn_lower_split, 1, REPLICATE, SPLIT, ELEMENTS,
       USE(COPY)),
    OP("Slice", 1, 5, sn_lower_slice, 1, REPLICATE, SLICE, ELEMENTS,
       USE(COPY)),
    OP("Gather", 2, 2, sn_lower_gather, 1, REPLICATE, GATHER, ELEMENTS,
       USE(GATHER)),
    OP("Expand", 2, 2, sn_lower_expand, 8, REPLICATE, MIXED, ELEMENTS,
       USE(COPY)),
    OP("Where", 3, 3, sn_lower_where, 9, REPLICATE, BROADCAST, ELEMENTS,
       USE(WHERE)),
    /* reductions (ops_reduce.c) */
    REDUCE("ReduceMean", sn_lower_reduce_mean, MEAN),
    REDUCE("ReduceSum", sn_lower_reduce_sum, SUM),
    REDUCE("ReduceMax", sn_lower_reduce_max, MAX),
    REDUCE("ReduceMin", sn_lower_reduce_min, MIN),
    REDUCE("ReduceProd", sn_lower_reduce_prod, PROD),
    OP("ReduceL1", 1, 2, sn_lower_reduce_l1, 1, REPLICATE, REDUCE, ELEMENTS,
       USE(REDUCE_SUM_ABS) | USE(REDUCE_SUM)),
    OP("ReduceL2", 1, 2, sn_lower_reduce_l2, 1, REPLICATE, REDUCE, ELEMENTS,
       USE(REDUCE_SUM_SQUARE) | USE(REDUCE_SUM) | USE(UNARY_SQRT)),
    OP("ReduceLogSum", 1, 2, sn_lower_reduce_log_sum, 1, REPLICATE, REDUCE,
       ELEMENTS, USE(REDUCE_SUM) | USE(UNARY_LOG)),
    OP("ReduceLogSumExp", 1, 2, sn_lower_reduce_log_sum_exp, 1, REPLICATE,
       REDUCE, ELEMENTS,
       USE(REDUCE_MAX) | USE(UNARY_CLIP) | USE(REDUCE_SUM) | USE(BINARY_SUB) |
           USE(UNARY_EXP) | USE(UNARY_LOG) | USE(BINARY_ADD)),
    OP("ReduceSumSquare", 1, 2, sn_lower_reduce_sum_square, 1, REPLICATE,
       REDUCE, ELEMENTS, USE(REDUCE_SUM_SQUARE) | USE(REDUCE_SUM)),
    /* a scan; a norm and a division */
    OP("CumSum", 2, 2, sn_lower_cumsum, 11, REPLICATE, MIXED, ELEMENTS,
       USE(SCAN)),
    OP("LpNormalization", 1, 1, sn_lower_lp_normalization, 1, REPLICATE,
       MIXED, ELEMENTS,
       USE(REDUCE_SUM_ABS) | USE(REDUCE_SUM_SQUARE) | USE(UNARY_SQRT) |
           USE(BINARY_DIV)),
    /* selection along an axis (ops_select.c): the top-k kernel ranks;
     * Hardmax's one-hot rows compare the index with a ramp */
    OP("ArgMax", 1, 1, sn_lower_argmax, 1, REPLICATE, MIXED, ELEMENTS,
       USE(TOPK)),
    OP("ArgMin", 1, 1, sn_lower_argmin, 1, REPLICATE, MIXED, ELEMENTS,
       USE(TOPK)),
    OP("Hardmax", 1, 1, sn_lower_hardmax, 1, REPLICATE, MIXED, ELEMENTS,
       USE(TOPK) | USE(BINARY_SUB) | USE(WHERE)),
    OP("TopK", 1, 2, sn_lower_topk, 1, REPLICATE, MIXED, ELEMENTS,
       USE(TOPK)),
    /* losses (ops_loss.c): the picked elements gathered, scaled by
     * coefficients made on the host from the target, summed */
    OP("NegativeLogLikelihoodLoss", 2, 3, sn_lower_nll_loss, 12, REPLICATE,
       MIXED, ELEMENTS, USE(GATHER) | USE(BINARY_MUL) | USE(REDUCE_SUM)),
    OP("SoftmaxCrossEntropyLoss", 2, 3, sn_lower_softmax_cross_entropy_loss,
       12, REPLICATE, MIXED, ELEMENTS,
       USE(SOFTMAX) | USE(GATHER) | USE(BINARY_MUL) | USE(REDUCE_SUM)),
    /* recurrence (ops_rnn.c): the input projection of every step in one
     * product, then per step the recurrent product and the cell; the
     * state set and the last one read out by copies */
    OP("RNN", 3, 6, sn_lower_rnn, 1, REPLICATE, MIXED, ELEMENTS,
       USE(GEMM) | USE(RNN_CELL) | USE(COPY) | USE(BINARY_ADD)),
    OP("GRU", 3, 6, sn_lower_rnn, 1, REPLICATE, MIXED, ELEMENTS,
       USE(GEMM) | USE(RNN_CELL) | USE(COPY) | USE(BINARY_ADD)),
    OP("LSTM", 3, 8, sn_lower_rnn, 1, REPLICATE, MIXED, ELEMENTS,
       USE(GEMM) | USE(RNN_CELL) | USE(COPY) | USE(BINARY_ADD)),
    /* a value made on the host (ops_shape.c) */
    OP("ConstantOfShape", 1, 1, sn_lower_constant_of_shape, 9, REPLICATE,
       MIXED, ELEMENTS, HOST),
    /* text features, counted on the host (ops_text.c) */
    OP("TfIdfVectorizer", 1, 1, sn_lower_tfidf, 9, REPLICATE, MIXED,
       ELEMENTS, HOST),
    /* indexing (ops_index.c): the indices known on the host make a map,
     * applied by one gather (a scatter's reduction: a gather and a binary
     * step per round); shapes from values or shapes (ops_index_host.c) */
    OP("GatherElements", 2, 2, sn_lower_gather_elements, 11, REPLICATE,
       MIXED, ELEMENTS, USE(GATHER)),
    OP("GatherND", 2, 2, sn_lower_gather_nd, 11, REPLICATE, MIXED, ELEMENTS,
       USE(GATHER)),
    OP("ScatterElements", 3, 3, sn_lower_scatter_elements, 11, REPLICATE,
       MIXED, ELEMENTS, INDEX_SCATTER_USES),
    {{"Scatter", 3, 3, sn_lower_scatter_elements, 9, 10}, "",
     SN_SHARD_REPLICATE, SN_ROWS_MIXED, SN_COST_ELEMENTS, INDEX_SCATTER_USES},
    OP("ScatterND", 3, 3, sn_lower_scatter_nd, 11, REPLICATE, MIXED,
       ELEMENTS, INDEX_SCATTER_USES),
    OP("OneHot", 3, 3, sn_lower_onehot, 9, REPLICATE, MIXED, ELEMENTS,
       USE(GATHER)),
    OP("Compress", 2, 2, sn_lower_compress, 9, REPLICATE, MIXED, ELEMENTS,
       USE(GATHER)),
    OP("NonZero", 1, 1, sn_lower_nonzero, 9, REPLICATE, MIXED, ELEMENTS,
       HOST),
    OP("Unique", 1, 1, sn_lower_unique, 11, REPLICATE, MIXED, ELEMENTS,
       HOST),
    OP("ReverseSequence", 2, 2, sn_lower_reverse_sequence, 10, REPLICATE,
       MIXED, ELEMENTS, USE(GATHER)),
    OP("Trilu", 1, 2, sn_lower_trilu, 14, REPLICATE, MIXED, ELEMENTS,
       USE(GATHER)),
    OP("EyeLike", 1, 1, sn_lower_eyelike, 9, REPLICATE, MIXED, ELEMENTS,
       HOST),
    OP("Range", 3, 3, sn_lower_range, 11, REPLICATE, MIXED, ELEMENTS, HOST),
    OP("Size", 1, 1, sn_lower_size, 1, REPLICATE, MIXED, ELEMENTS, HOST),
    /* signal processing (ops_signal.c): windows and mel filters made on
     * the host; a transform is a GEMM with a matrix made on the host */
    OP("HannWindow", 1, 1, sn_lower_window, 17, REPLICATE, MIXED, ELEMENTS,
       HOST),
    OP("HammingWindow", 1, 1, sn_lower_window, 17, REPLICATE, MIXED,
       ELEMENTS, HOST),
    OP("BlackmanWindow", 1, 1, sn_lower_window, 17, REPLICATE, MIXED,
       ELEMENTS, HOST),
    OP("MelWeightMatrix", 5, 5, sn_lower_mel_weight_matrix, 17, REPLICATE,
       MIXED, ELEMENTS, HOST),
    OP("DFT", 1, 3, sn_lower_dft, 17, REPLICATE, MIXED, ELEMENTS,
       USE(GEMM) | USE(COPY)),
    OP("STFT", 2, 4, sn_lower_stft, 17, REPLICATE, EACH, ELEMENTS,
       USE(GEMM) | USE(COPY) | USE(BINARY_MUL)),
    /* normalisation over a sample's axes (ops_norm.c): the layernorm
     * kernel with a scale of ones; MeanVarianceNormalization moves its
     * axes last and back */
    OP("InstanceNormalization", 3, 3, sn_lower_instancenorm, 1, REPLICATE,
       EACH, ELEMENTS,
       USE(LAYERNORM) | USE(BINARY_MUL) | USE(BINARY_ADD)),
    OP("MeanVarianceNormalization", 1, 1, sn_lower_mvn, 9, REPLICATE, MIXED,
       ELEMENTS, USE(LAYERNORM) | USE(COPY)),
    OP("GroupNormalization", 3, 3, sn_lower_groupnorm, 18, REPLICATE, EACH,
       ELEMENTS, USE(LAYERNORM) | USE(BINARY_MUL) | USE(BINARY_ADD)),
    /* the root of the mean square: a reduction and binary steps; ONNX
     * Runtime's form of it (an ONNX-domain entry of its own, version 1)
     * may also give the reciprocal root */
    OP("RMSNormalization", 2, 2, sn_lower_rmsnorm, 23, LAYERNORM, LAYERNORM,
       ELEMENTS,
       USE(REDUCE_SUM_SQUARE) | USE(BINARY_DIV) | USE(BINARY_ADD) |
           USE(BINARY_POW) | USE(BINARY_MUL)),
    OP("SimplifiedLayerNormalization", 2, 2, sn_lower_rmsnorm, 1, LAYERNORM,
       LAYERNORM, ELEMENTS,
       USE(REDUCE_SUM_SQUARE) | USE(BINARY_DIV) | USE(BINARY_ADD) |
           USE(BINARY_POW) | USE(BINARY_MUL)),
    /* ONNX Runtime's fusions of a residual Add with the normalisation
     * after it: the sums, then either normalisation */
    OP_OF("com.microsoft", "SkipLayerNormalization", 3, 5, sn_lower_skip_norm,
          1, REPLICATE, LAYERNORM, ELEMENTS,
          USE(BINARY_ADD) | USE(LAYERNORM)),
    OP_OF("com.microsoft", "SkipSimplifiedLayerNormalization", 3, 4,
          sn_lower_skip_norm, 1, REPLICATE, LAYERNORM, ELEMENTS,
          USE(REDUCE_SUM_SQUARE) | USE(BINARY_DIV) | USE(BINARY_ADD) |
              USE(BINARY_POW) | USE(BINARY_MUL)),
    /* a plain convolution over the input spread into zeros: copies and a
     * GEMM per group; windows that tile the output: a GEMM per group, a
     * copy and the bias's ADD (ops_convtranspose.c) */
    OP("ConvTranspose", 2, 3, sn_lower_convtranspose, 1, REPLICATE, EACH,
       CONV, USE(GEMM) | USE(COPY) | USE(BINARY_ADD)),
    /* contractions as batched GEMMs, with copies to lay the operands out
     * and a sum of what is left (ops_einsum.c) */
    OP("Einsum", 1, 1 << 20, sn_lower_einsum, 12, REPLICATE, MIXED,
       ELEMENTS, USE(GEMM) | USE(COPY) | USE(REDUCE_SUM)),
    /* determinants: on the host when known, else (up to 3 x 3) signed
     * products of strided elements (ops_linalg.c) */
    OP("Det", 1, 1, sn_lower_det, 11, REPLICATE, EACH, ELEMENTS,
       USE(COPY) | USE(BINARY_MUL) | USE(BINARY_ADD) | USE(BINARY_SUB)),
    /* a data-dependent count: boxes and scores known on the host
     * (ops_nms.c) */
    OP("NonMaxSuppression", 2, 5, sn_lower_nms, 10, REPLICATE, MIXED,
       ELEMENTS, HOST),
    /* quantization (ops_quant.c, ops_qconv.c): on the host when known,
     * else on the device where exact (Quantize, Dequantize, Dynamic-
     * QuantizeLinear; MatMulInteger with bounded sums; QLinearMatMul in
     * exact runs of K; the integer convolutions too, their weights
     * known) */
    OP("QuantizeLinear", 2, 3, sn_lower_quantize, 10, REPLICATE, EACH,
       ELEMENTS,
       USE(BINARY_DIV) | USE(BINARY_MAX) | USE(BINARY_MIN) | USE(BINARY_ADD) |
           USE(BINARY_SUB)),
    OP("DequantizeLinear", 2, 3, sn_lower_dequantize, 10, REPLICATE, EACH,
       ELEMENTS, USE(BINARY_SUB) | USE(BINARY_MUL)),
    OP("DynamicQuantizeLinear", 1, 1, sn_lower_dynamic_quantize, 11,
       REPLICATE, MIXED, ELEMENTS,
       USE(REDUCE_MAX) | USE(UNARY_NEG) | USE(WHERE) | USE(BINARY_MAX) |
           USE(BINARY_MIN) | USE(BINARY_ADD) | USE(BINARY_SUB) |
           USE(BINARY_DIV)),
    OP("MatMulInteger", 2, 4, sn_lower_matmul_integer, 10, REPLICATE, MIXED,
       ELEMENTS, USE(GEMM) | USE(BINARY_SUB)),
    OP("QLinearMatMul", 8, 8, sn_lower_qlinear_matmul, 10, REPLICATE, MIXED,
       ELEMENTS,
       USE(GEMM) | USE(BINARY_SUB) | USE(BINARY_MUL) | USE(BINARY_MAX) |
           USE(BINARY_MIN) | USE(BINARY_ADD)),
    OP("ConvInteger", 2, 4, sn_lower_conv_integer, 10, REPLICATE, MIXED,
       ELEMENTS,
       USE(GEMM) | USE(IM2COL) | USE(DWCONV) | USE(BINARY_SUB)),
    OP("QLinearConv", 8, 9, sn_lower_qlinear_conv, 10, REPLICATE, MIXED,
       ELEMENTS,
       USE(GEMM) | USE(IM2COL) | USE(DWCONV) | USE(BINARY_SUB) |
           USE(BINARY_ADD) | USE(BINARY_MUL) | USE(BINARY_MAX) |
           USE(BINARY_MIN)),
    /* A product by a quantized weight read as it is stored (a pass makes
     * it of DequantizeLinear and MatMul or Gemm, ops_qmatmul.c). */
    OP_OF("ai.shardnet", "QuantizedMatMul", 2, 5, sn_lower_quantized_matmul,
          1, QMATMUL, MATMUL, MATMUL, USE(QGEMM)),
    OP_OF("com.microsoft", "MatMulNBits", 3, 6, sn_lower_matmul_nbits, 1,
          NBITS, MATMUL, MATMUL, USE(QGEMM)),
    /* control flow (ops_control.c): subgraphs lowered inline; their steps
     * use whatever kernels their nodes' entries name.  The inputs past the
     * node's own are the outer values its subgraphs read. */
    OP("If", 1, 1 << 20, sn_lower_if, 1, REPLICATE, MIXED, ELEMENTS,
       USE(COPY)),
    OP("Loop", 0, 1 << 20, sn_lower_loop, 1, REPLICATE, MIXED, ELEMENTS,
       USE(COPY)),
    OP("Scan", 0, 1 << 20, sn_lower_scan, 8, REPLICATE, MIXED, ELEMENTS,
       USE(COPY)),
    /* spatial data movement (ops_spatial.c): strided copies, a constant
     * Pad's fill one of them */
    OP("Pad", 1, 4, sn_lower_pad, 1, REPLICATE, MIXED, ELEMENTS, USE(COPY)),
    OP("Tile", 2, 3, sn_lower_tile, 1, REPLICATE, MIXED, ELEMENTS, USE(COPY)),
    OP("DepthToSpace", 1, 1, sn_lower_depth_to_space, 1, REPLICATE, MIXED,
       ELEMENTS, USE(COPY)),
    OP("SpaceToDepth", 1, 1, sn_lower_space_to_depth, 1, REPLICATE, MIXED,
       ELEMENTS, USE(COPY)),
    /* resampling (ops_resize.c): a table made on the host, one step; and
     * sampling at places computed on the device */
    OP("Resize", 1, 4, sn_lower_resize, 10, REPLICATE, MIXED, ELEMENTS,
       USE(RESAMPLE)),
    OP("Upsample", 1, 2, sn_lower_resize, 7, REPLICATE, MIXED, ELEMENTS,
       USE(RESAMPLE)),
    OP("GridSample", 2, 2, sn_lower_grid_sample, 16, REPLICATE, MIXED,
       ELEMENTS, USE(GRID_SAMPLE)),
    OP("RoiAlign", 3, 3, sn_lower_roi_align, 10, REPLICATE, MIXED, ELEMENTS,
       USE(ROI_ALIGN)),
    /* a gather by a map made on the host; LRN's sum across channels is a
     * pooling (ops_spatial.c) */
    OP("MaxUnpool", 2, 3, sn_lower_max_unpool, 9, REPLICATE, MIXED, ELEMENTS,
       USE(GATHER)),
    OP("LRN", 1, 1, sn_lower_lrn, 1, REPLICATE, EACH, ELEMENTS,
       USE(BINARY_MUL) | USE(POOL_AVG) | USE(BINARY_ADD) | USE(BINARY_POW) |
           USE(BINARY_DIV)),
};

#define NOPS (sizeof registry / sizeof registry[0])

size_t sn_operator_count(void)
{
    return NOPS;
}

const sn_operator *sn_operator_at(size_t i)
{
    return i < NOPS ? &registry[i] : NULL;
}

const sn_operator *sn_operator_find(const char *domain, const char *op_type)
{
    if (domain && !strcmp(domain, "ai.onnx"))
        domain = "";
    for (size_t i = 0; i < NOPS; i++)
        if (!strcmp(registry[i].def.op_type, op_type) &&
            !strcmp(registry[i].domain, domain ? domain : ""))
            return &registry[i];
    return NULL;
}

const sn_op_def *sn_op_find(const char *domain, const char *op_type)
{
    const sn_operator *op = sn_operator_find(domain, op_type);
    return op ? &op->def : NULL;
}

/* --- uses ---------------------------------------------------------------- */

_Static_assert(SN_USES <= 128, "the uses no longer fit an sn_uses");

/* The kernels without variants, in the order of their uses. */
static const sn_kernel plain_kernels[] = {
    SN_KERNEL_GEMM, SN_KERNEL_SOFTMAX,   SN_KERNEL_WHERE, SN_KERNEL_COPY,
    SN_KERNEL_IM2COL, SN_KERNEL_LAYERNORM, SN_KERNEL_GATHER,
    SN_KERNEL_TOPK, SN_KERNEL_RNN_CELL, SN_KERNEL_RESAMPLE,
    SN_KERNEL_GRID_SAMPLE, SN_KERNEL_ROI_ALIGN, SN_KERNEL_SCAN,
    SN_KERNEL_DWCONV, SN_KERNEL_QGEMM};
_Static_assert(sizeof plain_kernels / sizeof plain_kernels[0] ==
                   SN_USE_BINARY_ADD,
               "a use per kernel without variants");

/* The kernels with variants: the use of each's first variant. */
static const struct {
    sn_kernel k;
    sn_use first;
} variant_kernels[] = {{SN_KERNEL_BINARY, SN_USE_BINARY_ADD},
                       {SN_KERNEL_UNARY, SN_USE_UNARY_RELU},
                       {SN_KERNEL_REDUCE, SN_USE_REDUCE_SUM},
                       {SN_KERNEL_POOL, SN_USE_POOL_MAX}};
#define NVARIANT_KERNELS (sizeof variant_kernels / sizeof variant_kernels[0])
_Static_assert(SN_USES - SN_USE_POOL_MAX == SN_POOL_COUNT,
               "a use per pooling variant");

sn_kernel sn_use_kernel(sn_use u, int *variant)
{
    *variant = SN_VARIANT_ANY;
    if (u < SN_USE_BINARY_ADD)
        return plain_kernels[u];
    for (size_t i = NVARIANT_KERNELS; i-- > 0;)
        if (u >= variant_kernels[i].first) {
            *variant = (int)(u - variant_kernels[i].first);
            return variant_kernels[i].k;
        }
    return SN_KERNEL_COUNT; /* not reached: every use is past the first */
}

int sn_use_of(sn_kernel k, int variant)
{
    for (size_t i = 0; i < SN_USE_BINARY_ADD; i++)
        if (plain_kernels[i] == k)
            return variant == SN_VARIANT_ANY ? (int)i : -1;
    for (size_t i = 0; i < NVARIANT_KERNELS; i++)
        if (variant_kernels[i].k == k)
            return variant >= 0 && variant < sn_kernel_variants(k)
                       ? (int)variant_kernels[i].first + variant
                       : -1;
    return -1;
}

int sn_device_runs(const sn_device *dev, sn_uses uses, sn_use *missing)
{
    for (int u = 0; u < SN_USES; u++) {
        int variant;
        sn_kernel k;
        if (!(uses & SN_USES_BIT(u)))
            continue;
        k = sn_use_kernel((sn_use)u, &variant);
        if (!sn_device_supports(dev, k, variant)) {
            if (missing)
                *missing = (sn_use)u;
            return 0;
        }
    }
    return 1;
}

/* --- the work of a node ----------------------------------------------------- */

double sn_node_work(const sn_graph *g, const sn_plan *p, const sn_node *n)
{
    const sn_operator *op = sn_operator_find(n->domain, n->op_type);
    const sn_rt *o = n->noutputs && n->outputs[0] >= 0
                         ? sn_plan_value(p, (size_t)n->outputs[0])
                         : NULL;
    const sn_rt *a = n->ninputs && n->inputs[0] >= 0
                         ? sn_plan_value(p, (size_t)n->inputs[0])
                         : NULL;
    const sn_rt *w = n->ninputs > 1 && n->inputs[1] >= 0
                         ? sn_plan_value(p, (size_t)n->inputs[1])
                         : NULL;
    double out = o && o->known ? (double)sn_rt_elements(o) : 0.0;
    (void)g;
    switch (op ? op->cost : SN_COST_ELEMENTS) {
    case SN_COST_MATMUL:
        if (a && a->known && a->rank)
            return 2.0 * out * (double)a->dims[a->rank - 1];
        break;
    case SN_COST_GEMM:
        if (a && a->known && a->rank == 2)
            return 2.0 * out * (double)(sn_attr_int(n, "transA", 0)
                                            ? a->dims[0]
                                            : a->dims[1]);
        break;
    case SN_COST_CONV:
        if (w && w->known && w->rank > 1)
            return 2.0 * out * (double)sn_rt_elements(w) / (double)w->dims[0];
        break;
    case SN_COST_ELEMENTS:
        break;
    }
    return out; /* element-wise and data movement: about one op per output */
}

int sn_node_is_product(const sn_node *n)
{
    const sn_operator *op = sn_operator_find(n->domain, n->op_type);
    return op && op->cost != SN_COST_ELEMENTS;
}
