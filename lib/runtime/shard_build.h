/*
 * The tensor split's graph builder (private to lib/runtime/shard*.c): the
 * state of the walk that gives every value a layout (lib/plan/
 * tensor_layout.h, whose algebra decides the cuts and conversions) and
 * writes one graph per device.  shard_graph.c holds the building blocks
 * of the device graphs (values, constants, nodes, the conversions between
 * layouts), shard_rules.c the walk and the registry's shard rules but the
 * products', which are in shard_products.c, shard_strategy.c how the
 * walk finds and records strategies (lib/plan/strategy.h reads them);
 * shard.c creates a split from the result.
 */
#ifndef SN_SHARD_BUILD_H
#define SN_SHARD_BUILD_H

#include <string.h>

#include "core/error.h"
#include "exec/exec.h"
#include "ir/graph.h"
#include "ops/registry.h"
#include "plan/strategy.h"
#include "plan/tensor_layout.h"
#include "runtime/tensor_split.h"

#define MAXD SN_COLL_MAX
#define NVER 3 /* layouts remembered per value */
/* Weights of this many bytes or more are cut where their parts lie in one
 * run each (shard_products.c), not copied. */
#define SN_SHARD_COPY_MIN ((size_t)4 << 20)

typedef struct version {
    int sub; /* value index in every device graph */
    sn_layout l;
} version;

typedef struct vinfo {
    version v[NVER];
    int nv;     /* v[0]: as produced */
    int cnst_r; /* the constant, whole, or -1 */
} vinfo;

typedef struct bld {
    sn_graph *g;
    sn_plan *shape; /* the whole graph on one device: every value's shape */
    size_t n;
    const double *speed;
    sn_graph *sub[MAXD];
    vinfo *vi;
    const sn_strategy *strat;
    size_t nstrat;
    unsigned char *strat_used;
    unsigned counter; /* for unique value names */
    size_t ncoll;
    double coll_bytes;
    char *desc;
    size_t desc_len, desc_cap;
    sn_strategy *chosen;
    size_t nchosen, cap_chosen;
    shardnet_status why; /* why sn_shard_to_layout() failed (not memory) */
    sn_layout *out_lay;  /* per model output: its layout on the devices */
} bld;

/* --- small helpers --------------------------------------------------------- */

static inline shardnet_status oom(void)
{
    return sn_error(SHARDNET_OUT_OF_MEMORY, "tensor split");
}

/* The status behind a -1 from sn_shard_to_layout() and the builders below
 * it. */
static inline shardnet_status failed(const bld *b)
{
    return b->why ? b->why : oom();
}

static inline const sn_rt *full(const bld *b, int v)
{
    const sn_rt *rt = sn_plan_value(b->shape, (size_t)v);
    return rt && rt->known ? rt : NULL;
}

static inline int is_float(const bld *b, int v)
{
    const sn_rt *rt = full(b, v);
    return rt && rt->dtype == SN_DT_FLOAT;
}

static inline int is_const(const bld *b, int v)
{
    return v >= 0 && (b->g->values[v].flags & SN_VALUE_CONST);
}

static inline size_t prod(const int64_t *d, int from, int to)
{
    size_t p = 1;
    for (int i = from; i < to; i++)
        p *= (size_t)d[i];
    return p;
}

/* `total` cut into shares for b's devices by their speed
 * (sn_layout_shares). */
static inline int shares(const bld *b, size_t total, size_t gran,
                         size_t *cnt)
{
    return sn_layout_shares(b->speed, b->n, total, gran, cnt);
}

/* Node n's shard rule in the operator registry (ops/registry.h): what the
 * rules shared by several operators tell them apart by.  A linear op with
 * a fused activation (lib/passes/fuse_activation.c) is no longer
 * linear: partial sums must be summed before it. */
static inline sn_shard_rule rule_of(const sn_node *n)
{
    const sn_operator *op = sn_operator_find(n->domain, n->op_type);
    if (op && op->shard == SN_SHARD_ADDITIVE &&
        sn_node_attr(n, "activation"))
        return SN_SHARD_ELEMENTWISE;
    return op ? op->shard : SN_SHARD_REPLICATE;
}

/* --- shard_graph.c: the device graphs ------------------------------------- */

/* Append to the split's description (what `shardnet plan` shows). */
void sn_shard_say(bld *b, const char *fmt, ...) SN_PRINTF(2, 3);
/* A value named like `base` plus a suffix, in every device graph. */
int sn_shard_new_value(bld *b, const char *base, const char *suffix);
/* int64 constants, one per device: vals[d][0..len). */
int sn_shard_const_i64(bld *b, const char *base, size_t len,
                       int64_t (*vals)[SN_MAX_DIMS]);
/* Add a node to every device graph, attributes copied from `like` (may be
 * NULL) except the one named `drop`.  Its index, or -1. */
int sn_shard_add_node(bld *b, const sn_node *like, const char *op,
                      const char *domain, const int *in, size_t nin,
                      const int *out, size_t nout, const char *drop);
/* Set integer attribute `name` of node k on device d (added if absent). */
int sn_shard_set_int_attr(bld *b, int k, size_t d, const char *name,
                          int64_t v);
/* Model value v is device value `sub` in layout l. */
void sn_shard_remember(bld *b, int v, int sub, const sn_layout *l);
/* Model value v in layout `want` on every device (converted when needed);
 * -1 with an error set when it cannot be. */
int sn_shard_to_layout(bld *b, int v, const sn_layout *want);
/* The current (first) layout of model value v; R for constants. */
const sn_layout *sn_shard_layout_of(const bld *b, int v);
/* Output j of node n, as a fresh value named like the model's. */
int sn_shard_out_value(bld *b, const sn_node *n, size_t j);
/* Partial sums v reduce-scattered along `axis`, or R when too small. */
sn_layout sn_shard_p_target_axis(const bld *b, int v, int axis);
/* Where partial sums v go before a non-linear op. */
sn_layout sn_shard_p_target(const bld *b, int v);
/* Constant v (2-D) in blocks, copied: device d holds its rows
 * [at[d][0], at[d][0] + cnt[d][0]) and columns [at[d][1], at[d][1] +
 * cnt[d][1]).  Its index in every device graph, or -1. */
int sn_shard_const_blocks(bld *b, int v, const size_t (*at)[2],
                          const size_t (*cnt)[2]);
/* x (a value of every device graph, named like model value v's)
 * reshaped to dims[0..rank) (a Reshape whose shape is an input: opset 5
 * on).  The new value, or -1. */
int sn_shard_reshape(bld *b, int v, int x, const int64_t *dims, int rank);
/* x, each device's part of model value v (dims[0..rank) on every device),
 * all-gathered along a new first axis: [devices, dims...] on every
 * device, in device order.  The new value, or -1. */
int sn_shard_gather_parts(bld *b, int v, int x, const int64_t *dims,
                          int rank);
/* A slice of x (model value v's, on every device) along naxes axes:
 * device d's ax[d], from st[d] to en[d] (a Slice in the form of the
 * model's opset).  The new value, or -1. */
int sn_shard_slice(bld *b, int v, int x, size_t naxes,
                   int64_t (*st)[SN_MAX_DIMS], int64_t (*en)[SN_MAX_DIMS],
                   int64_t (*ax)[SN_MAX_DIMS]);
/* Model value v whole on every device from x, each device's tile of it
 * (tile[0..rank), the same on every device) on a mesh of parts[0] by
 * parts[1] by parts[2] (sn_cut's: device (i * parts[1] + k) * parts[2] +
 * j holds the k-th partial sum of the tile at part i of axis `axis`, -1
 * for none, and part j of the last axis): the tiles all-gathered, the
 * partial sums added (in k's order), the tiles put in place.  The new
 * value, or -1. */
int sn_shard_assemble_parts(bld *b, int v, int x, const int64_t *tile,
                            int rank, int axis, const unsigned parts[3]);
/* Copy node n with inputs in[] (sub indices); outputs get the layout l. */
shardnet_status sn_shard_emit_copy(bld *b, const sn_node *n, const int *in,
                                   const sn_layout *l, const char *drop);
/* Every input whole, the node computed whole on every device. */
shardnet_status sn_shard_replicate(bld *b, const sn_node *n);

/* --- shard_strategy.c: strategies ----------------------------------------- */

/* Keep the strategy `text` chosen for node n, for the plan file. */
void sn_shard_record_choice(bld *b, const sn_node *n, const char *text);
/* The strategy the plan file forces on node n (marked used), or NULL. */
const sn_strategy *sn_shard_find_strategy(bld *b, const sn_node *n);

/* --- shard_products.c: the products' shard rules -------------------------- */

/* Gemm cut when its weights are constant; MatMul too, and else by its
 * batch; Conv cut when its weights are constant.  *handled = 0: the
 * caller replicates the node. */
shardnet_status sn_shard_gemm(bld *b, const sn_node *n, int *handled);
shardnet_status sn_shard_matmul(bld *b, const sn_node *n, int *handled);
shardnet_status sn_shard_conv(bld *b, const sn_node *n, int *handled);
shardnet_status sn_shard_nbits(bld *b, const sn_node *n, int *handled);

/* --- shard_rules.c: the walk ---------------------------------------------- */

/* The device graphs of b->g: every live node laid out by its rule, the
 * model's outputs laid out for the host, each graph sorted. */
shardnet_status sn_shard_build(bld *b);

#endif /* SN_SHARD_BUILD_H */
