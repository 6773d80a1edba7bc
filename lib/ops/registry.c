/*
 * The operator registry (see registry.h): the one table of the operators
 * shardnet runs, and what is computed from an entry alone (a node's work).
 * The lowerings live with their family (ops_shape.c, ops_elementwise.c,
 * ops_nn.c, ops_conv.c, ops_norm.c, ops_data.c, ops_reduce.c); the shard
 * and rows rules are carried out by the splits that read them.
 *
 * Adding an operator: its lowering in the file of its family (declared in
 * ops.h), then one line below.  since/until: the ONNX opsets whose form
 * of the operator the lowering implements (until 0: up to the newest).
 */
#include <config.h>

#include <string.h>

#include "ops/ops.h"
#include "ops/registry.h"
#include "shardnet.h"

#define OP(name, lo, hi, fn, since, shard, rows, cost)                        \
    {{name, lo, hi, fn}, "", since, 0, SN_SHARD_##shard, SN_ROWS_##rows,     \
     SN_COST_##cost}

static const sn_operator registry[] = {
    /* shapes, copies and constants (ops_shape.c; Cast in ops_elementwise.c) */
    OP("Identity", 1, 1, sn_lower_identity, 1, ADDITIVE, EACH, ELEMENTS),
    OP("Dropout", 1, 3, sn_lower_identity, 1, REPLICATE, EACH, ELEMENTS),
    OP("Reshape", 1, 2, sn_lower_reshape, 1, RESHAPE, RESHAPE, ELEMENTS),
    OP("Flatten", 1, 1, sn_lower_flatten, 1, FLATTEN, FLATTEN, ELEMENTS),
    OP("Squeeze", 1, 2, sn_lower_squeeze, 1, REPLICATE, SQUEEZE, ELEMENTS),
    OP("Unsqueeze", 1, 2, sn_lower_unsqueeze, 1, REPLICATE, UNSQUEEZE,
       ELEMENTS),
    OP("Shape", 1, 1, sn_lower_shape, 1, REPLICATE, MIXED, ELEMENTS),
    OP("Constant", 0, 0, sn_lower_constant, 1, REPLICATE, MIXED, ELEMENTS),
    OP("Cast", 1, 1, sn_lower_cast, 1, REPLICATE, EACH, ELEMENTS),
    /* element-wise (ops_elementwise.c) */
    OP("Add", 2, 2, sn_lower_binary, 1, ADDITIVE, BROADCAST, ELEMENTS),
    OP("Sub", 2, 2, sn_lower_binary, 1, ADDITIVE, BROADCAST, ELEMENTS),
    OP("Mul", 2, 2, sn_lower_binary, 1, ELEMENTWISE, BROADCAST, ELEMENTS),
    OP("Div", 2, 2, sn_lower_binary, 1, ELEMENTWISE, BROADCAST, ELEMENTS),
    OP("Pow", 2, 2, sn_lower_binary, 1, ELEMENTWISE, BROADCAST, ELEMENTS),
    OP("Relu", 1, 1, sn_lower_unary, 1, ELEMENTWISE, EACH, ELEMENTS),
    OP("Sigmoid", 1, 1, sn_lower_unary, 1, ELEMENTWISE, EACH, ELEMENTS),
    OP("Tanh", 1, 1, sn_lower_unary, 1, ELEMENTWISE, EACH, ELEMENTS),
    OP("Erf", 1, 1, sn_lower_unary, 9, ELEMENTWISE, EACH, ELEMENTS),
    OP("Exp", 1, 1, sn_lower_unary, 1, ELEMENTWISE, EACH, ELEMENTS),
    OP("Log", 1, 1, sn_lower_unary, 1, ELEMENTWISE, EACH, ELEMENTS),
    OP("Sqrt", 1, 1, sn_lower_unary, 1, ELEMENTWISE, EACH, ELEMENTS),
    OP("Neg", 1, 1, sn_lower_unary, 1, ADDITIVE, EACH, ELEMENTS),
    OP("Abs", 1, 1, sn_lower_unary, 1, ELEMENTWISE, EACH, ELEMENTS),
    OP("LeakyRelu", 1, 1, sn_lower_unary, 1, ELEMENTWISE, EACH, ELEMENTS),
    OP("HardSigmoid", 1, 1, sn_lower_unary, 1, ELEMENTWISE, EACH, ELEMENTS),
    OP("Gelu", 1, 1, sn_lower_unary, 20, ELEMENTWISE, EACH, ELEMENTS),
    OP("Clip", 1, 3, sn_lower_unary, 1, ELEMENTWISE, EACH, ELEMENTS),
    OP("Reciprocal", 1, 1, sn_lower_reciprocal, 1, ELEMENTWISE, EACH,
       ELEMENTS),
    OP("Not", 1, 1, sn_lower_not, 1, REPLICATE, EACH, ELEMENTS),
    /* linear algebra and layers (ops_nn.c); MatMul's third input is a
     * bias fused by a pass */
    OP("Gemm", 2, 3, sn_lower_gemm, 1, GEMM, GEMM, GEMM),
    OP("MatMul", 2, 3, sn_lower_matmul, 1, MATMUL, MATMUL, MATMUL),
    OP("Softmax", 1, 1, sn_lower_softmax, 1, SOFTMAX, SOFTMAX, ELEMENTS),
    OP("LogSoftmax", 1, 1, sn_lower_softmax, 1, SOFTMAX, SOFTMAX,
       ELEMENTS),
    /* convolution and pooling (ops_conv.c) */
    OP("Conv", 2, 3, sn_lower_conv, 1, CONV, EACH, CONV),
    OP("MaxPool", 1, 1, sn_lower_maxpool, 1, POOL, EACH, ELEMENTS),
    OP("AveragePool", 1, 1, sn_lower_avgpool, 1, POOL, EACH, ELEMENTS),
    OP("GlobalAveragePool", 1, 1, sn_lower_global_avgpool, 1, POOL, EACH,
       ELEMENTS),
    OP("GlobalMaxPool", 1, 1, sn_lower_global_maxpool, 1, POOL, EACH,
       ELEMENTS),
    /* normalisation (ops_norm.c) */
    OP("BatchNormalization", 5, 5, sn_lower_batchnorm, 1, REPLICATE, EACH,
       ELEMENTS),
    OP("LayerNormalization", 2, 3, sn_lower_layernorm, 17, LAYERNORM,
       LAYERNORM, ELEMENTS),
    /* data movement (ops_data.c) */
    OP("Transpose", 1, 1, sn_lower_transpose, 1, TRANSPOSE, TRANSPOSE,
       ELEMENTS),
    OP("Concat", 1, 1 << 20, sn_lower_concat, 1, REPLICATE, CONCAT,
       ELEMENTS),
    OP("Split", 1, 2, sn_lower_split, 1, REPLICATE, SPLIT, ELEMENTS),
    OP("Slice", 1, 5, sn_lower_slice, 1, REPLICATE, SLICE, ELEMENTS),
    OP("Gather", 2, 2, sn_lower_gather, 1, REPLICATE, GATHER, ELEMENTS),
    OP("Expand", 2, 2, sn_lower_expand, 8, REPLICATE, MIXED, ELEMENTS),
    OP("Where", 3, 3, sn_lower_where, 9, REPLICATE, BROADCAST, ELEMENTS),
    /* reductions (ops_reduce.c) */
    OP("ReduceMean", 1, 2, sn_lower_reduce_mean, 1, REPLICATE, REDUCE,
       ELEMENTS),
    OP("ReduceSum", 1, 2, sn_lower_reduce_sum, 1, REPLICATE, REDUCE,
       ELEMENTS),
    OP("ReduceMax", 1, 2, sn_lower_reduce_max, 1, REPLICATE, REDUCE,
       ELEMENTS),
    /* a value made on the host (ops_shape.c) */
    OP("ConstantOfShape", 1, 1, sn_lower_constant_of_shape, 9, REPLICATE,
       MIXED, ELEMENTS),
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

/* --- the public listing (shardnet.h) --------------------------------------- */

size_t shardnet_operator_count(void)
{
    return NOPS;
}

shardnet_status shardnet_operator_get(size_t i, shardnet_operator_info *info)
{
    if (!info)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "info is NULL");
    if (i >= NOPS)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "operator %zu: the registry has %zu", i, NOPS);
    info->name = registry[i].def.op_type;
    info->domain = *registry[i].domain ? registry[i].domain : "ai.onnx";
    info->since_opset = registry[i].since;
    info->until_opset = registry[i].until;
    return SHARDNET_OK;
}
