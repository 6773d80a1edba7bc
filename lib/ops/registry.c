/*
 * The operator registry (see registry.h): the one table of the operators
 * shardnet runs, and what is computed from an entry alone (a node's work,
 * whether a device runs the kernels of its uses).  The lowerings live
 * with their family (ops_shape.c, ops_elementwise.c, ops_nn.c, ops_conv.c,
 * ops_norm.c, ops_data.c, ops_reduce.c); the shard and rows rules are
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
#define USE(u) SN_USES_BIT(SN_USE_##u)
#define HOST 0
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
    OP("Cast", 1, 1, sn_lower_cast, 1, REPLICATE, EACH, ELEMENTS, HOST),
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
    /* bounds computed on the device are applied by max and min */
    OP("Clip", 1, 3, sn_lower_unary, 1, ELEMENTWISE, EACH, ELEMENTS,
       USE(UNARY_CLIP) | USE(BINARY_MAX) | USE(BINARY_MIN)),
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
    /* linear algebra and layers (ops_nn.c); MatMul's third input is a
     * bias fused by a pass.  An empty product (k = 0) is a copy of C,
     * scaled by beta, or of zeros. */
    OP("Gemm", 2, 3, sn_lower_gemm, 1, GEMM, GEMM, GEMM,
       USE(GEMM) | USE(COPY) | USE(BINARY_MUL)),
    OP("MatMul", 2, 3, sn_lower_matmul, 1, MATMUL, MATMUL, MATMUL,
       USE(GEMM) | USE(COPY)),
    OP("Softmax", 1, 1, sn_lower_softmax, 1, SOFTMAX, SOFTMAX, ELEMENTS,
       USE(SOFTMAX)),
    OP("LogSoftmax", 1, 1, sn_lower_softmax, 1, SOFTMAX, SOFTMAX, ELEMENTS,
       USE(SOFTMAX)),
    /* convolution and pooling (ops_conv.c); a grouped convolution adds
     * its bias and activation after the products */
    OP("Conv", 2, 3, sn_lower_conv, 1, CONV, EACH, CONV,
       USE(GEMM) | USE(IM2COL) | USE(BINARY_ADD) | USE(UNARY_RELU) |
           USE(DWCONV)),
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
    /* a value made on the host (ops_shape.c) */
    OP("ConstantOfShape", 1, 1, sn_lower_constant_of_shape, 9, REPLICATE,
       MIXED, ELEMENTS, HOST),
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

_Static_assert(SN_USES <= 64, "the uses no longer fit an sn_uses");

/* The kernels without variants, in the order of their uses. */
static const sn_kernel plain_kernels[] = {
    SN_KERNEL_GEMM, SN_KERNEL_SOFTMAX,   SN_KERNEL_WHERE, SN_KERNEL_COPY,
    SN_KERNEL_IM2COL, SN_KERNEL_LAYERNORM, SN_KERNEL_GATHER,
    SN_KERNEL_DWCONV};
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
