/*
 * The operator registry: one entry per ONNX operator shardnet runs, naming
 * everything the layers above need to know about it: the opsets it
 * implements, its input counts and lowering (sn_op_def, what the plan
 * builder of lib/exec calls), how the tensor split lays it out over
 * devices (its shard rule), whether it keeps the rows of a batch apart
 * (its rows rule, for the layer split's micro-batches), its work (its
 * cost) and the kernels its lowering may launch (its uses: which devices
 * run it).  The rules are enums: the tensor split
 * (lib/runtime/shard_rules.c) and the planner (lib/plan/micro_batch.c)
 * keep the code of each rule and dispatch on the enum, so that adding an
 * operator is its lowering plus one entry in lib/ops/registry.c.
 */
#ifndef SN_OPS_REGISTRY_H
#define SN_OPS_REGISTRY_H

#include <stdint.h>

#include "backend/backend.h"
#include "exec/exec.h"

/* How the tensor split lays an operator out over devices. */
typedef enum sn_shard_rule {
    SN_SHARD_REPLICATE,   /* whole on every device */
    SN_SHARD_GEMM,        /* constant weights: cut its rows or columns */
    SN_SHARD_MATMUL,      /* as Gemm; two activations: cut the batch */
    SN_SHARD_CONV,        /* constant weights: cut the output channels */
    SN_SHARD_ELEMENTWISE, /* follows its cut inputs, with broadcasting */
    SN_SHARD_ADDITIVE,    /* element-wise and linear: partial sums stay
                             partial */
    SN_SHARD_SOFTMAX,     /* normalised over the axes from `axis` on (its
                             default by opset): cut the others */
    SN_SHARD_LAYERNORM,   /* as Softmax, `axis` -1 by default */
    SN_SHARD_TRANSPOSE,   /* the cut axis follows the permutation */
    SN_SHARD_RESHAPE,     /* a cut that maps onto one axis of the target
                             (input 1, constant) */
    SN_SHARD_FLATTEN,     /* as Reshape, to two axes at `axis` */
    SN_SHARD_POOL,        /* images: cut the batch or the channels */
    SN_SHARD_QMATMUL,     /* as Gemm, the weight quantized: its scales and
                             zero points cut with its columns */
    SN_SHARD_NBITS,       /* MatMulNBits: its columns cut, with their
                             scales, zero points and bias */
    SN_SHARD_RULES
} sn_shard_rule;

/* Whether an operator keeps the rows of a batch (axis 0) apart. */
typedef enum sn_rows_rule {
    SN_ROWS_MIXED,     /* no (or not known): the batch runs whole */
    SN_ROWS_EACH,      /* its first input row by row (element-wise, images) */
    SN_ROWS_BROADCAST, /* element-wise with numpy broadcasting */
    SN_ROWS_MATMUL,
    SN_ROWS_GEMM,
    SN_ROWS_SOFTMAX,   /* axis attribute, default by opset */
    SN_ROWS_LAYERNORM, /* axis attribute, default -1 */
    SN_ROWS_TRANSPOSE,
    SN_ROWS_RESHAPE,
    SN_ROWS_FLATTEN,
    SN_ROWS_SQUEEZE,
    SN_ROWS_UNSQUEEZE,
    SN_ROWS_REDUCE,
    SN_ROWS_SLICE,
    SN_ROWS_SPLIT, /* axis attribute, default 0 */
    SN_ROWS_CONCAT,
    SN_ROWS_GATHER,
    SN_ROWS_CONV /* each image; a fused residual (input 3) rows too */
} sn_rows_rule;

/* An operator's work (sn_node_work). */
typedef enum sn_cost_rule {
    SN_COST_ELEMENTS, /* about one operation per output element */
    SN_COST_MATMUL,   /* products: two flops per multiply-add */
    SN_COST_GEMM,
    SN_COST_CONV
} sn_cost_rule;

/*
 * The kernels an operator's lowering may launch (backend/backend.h's
 * sn_kernel): one use per kernel without variants, one per variant of
 * those with (binary, unary, reduce, pool), as bits of an sn_uses.  A
 * device runs the operator where it supports every use its entry names.
 */
typedef enum sn_use {
    SN_USE_GEMM,
    SN_USE_SOFTMAX,
    SN_USE_WHERE,
    SN_USE_COPY,
    SN_USE_IM2COL,
    SN_USE_LAYERNORM,
    SN_USE_GATHER,
    SN_USE_TOPK,
    SN_USE_RNN_CELL,
    SN_USE_RESAMPLE,
    SN_USE_GRID_SAMPLE,
    SN_USE_ROI_ALIGN,
    SN_USE_SCAN,
    SN_USE_DWCONV,
    SN_USE_QGEMM,
#define SN_USE_(name, str) SN_USE_BINARY_##name,
    SN_BINARY_OP_MAP(SN_USE_)
#undef SN_USE_
#define SN_USE_(name, str) SN_USE_UNARY_##name,
    SN_UNARY_OP_MAP(SN_USE_)
#undef SN_USE_
#define SN_USE_(name, str) SN_USE_REDUCE_##name,
    SN_REDUCE_OP_MAP(SN_USE_)
#undef SN_USE_
    SN_USE_POOL_MAX,
    SN_USE_POOL_AVG,
    SN_USES
} sn_use;

/* bit u: use u; 128 bits since issue 15's unary and binary variants
 * passed 64 uses (a GCC/Clang type, as the build already assumes) */
__extension__ typedef unsigned __int128 sn_uses;
#define SN_USES_BIT(u) ((sn_uses)1 << (u))

/* Use u as a kernel and its variant (SN_VARIANT_ANY for a kernel without
 * variants). */
sn_kernel sn_use_kernel(sn_use u, int *variant);
/* The use of kernel k of variant `variant`, or -1 if there is none. */
int sn_use_of(sn_kernel k, int variant);
/* Does dev run every kernel of uses (sn_device_supports)?  With
 * missing, the first use it lacks. */
int sn_device_runs(const sn_device *dev, sn_uses uses, sn_use *missing);

typedef struct sn_operator {
    sn_op_def def;      /* op_type, input counts, lowering, opsets */
    const char *domain; /* "" for ai.onnx */
    sn_shard_rule shard;
    sn_rows_rule rows;
    sn_cost_rule cost;
    sn_uses uses;       /* the kernels its lowering may launch */
} sn_operator;

/* The registry's entries, in its order. */
size_t sn_operator_count(void);
const sn_operator *sn_operator_at(size_t i);
/* The operator op_type of domain ("" and "ai.onnx" are the default one),
 * or NULL. */
const sn_operator *sn_operator_find(const char *domain, const char *op_type);
/* Its lowering: the sn_op_lookup the plan builder is handed. */
const sn_op_def *sn_op_find(const char *domain, const char *op_type);

/* Work of node n in flops (products, see sn_cost_rule) or elements
 * touched, from the shapes of plan p (a plan of the graph g). */
double sn_node_work(const sn_graph *g, const sn_plan *p, const sn_node *n);
/* Whether n's work counts at a device's GEMM speed (a product). */
int sn_node_is_product(const sn_node *n);

#endif /* SN_OPS_REGISTRY_H */
