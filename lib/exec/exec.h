/*
 * Lowering and execution on one device (private).
 *
 * A plan turns the sorted graph, with every input's shape (and the values
 * of the inputs and constants that shapes depend on) known, into a list of
 * kernel launches on one device:
 *
 *   - every value gets an sn_rt: its static shape, and where its data is:
 *     on the host (a constant: initializer, Constant, folded shape
 *     arithmetic, an integer input) and/or on the device (a view);
 *   - each node's op (lib/ops/, table in registry.c) infers its outputs'
 *     shapes, then either folds on the host (shape arithmetic) or emits
 *     steps: kernel descriptors whose views name weights (uploaded once),
 *     input staging buffers, or activations;
 *   - activations live in one arena buffer: each is a virtual allocation
 *     with a lifetime (first and last step that touch it), and offsets are
 *     assigned afterwards so that allocations whose lifetimes overlap never
 *     share bytes.  Views into the arena are patched once offsets are known.
 *
 * Running a plan writes the float inputs into their staging buffers,
 * launches the steps in order on the device's in-order queue (no host round
 * trip between operators), synchronises once and reads the outputs.  The
 * one exception is a branch step (If on a condition computed on the
 * device): the run reads that one float and goes on in the branch taken.
 */
#ifndef SN_EXEC_H
#define SN_EXEC_H

#include "backend/backend.h"
#include "core/error.h"
#include "core/half.h"
#include "ir/graph.h"

/* The graph keeps shapes of the public API's rank; the kernels take them. */
_Static_assert(SN_MAX_DIMS == SHARDNET_MAX_DIMS,
               "kernel and graph ranks differ");

/* Runtime facts about one value under a plan. */
typedef struct sn_rt {
    int known;             /* shape and dtype below are valid */
    sn_dtype dtype;        /* logical type */
    int rank;
    int64_t dims[SN_MAX_DIMS];
    const void *host;      /* host data (dtype, C order), or NULL */
    void *host_owned;      /* heap memory behind host, freed with the plan */
    int on_device;         /* view holds the data as float32 */
    sn_view view;
    int on_device_idx;     /* idx_view holds it as int32 (gather indices) */
    sn_view idx_view;
} sn_rt;

/* A step's kind: one of the backend's kernels (sn_kernel), or these. */
#define SN_STEP_COLLECTIVE ((int)SN_KERNEL_COUNT)
/* A condition computed on the device (If's): the run waits for the
 * queue, reads the one float at branch.cond and, when it is 0, goes on
 * at step branch.target. */
#define SN_STEP_BRANCH ((int)SN_KERNEL_COUNT + 1)
/* Go on at step branch.target. */
#define SN_STEP_JUMP ((int)SN_KERNEL_COUNT + 2)

typedef struct sn_branch_desc {
    sn_view cond;  /* SN_STEP_BRANCH: (1) float, 0 = false */
    size_t target; /* a step index of the plan */
} sn_branch_desc;

/* A collective among the devices of a tensor split (lib/runtime/shard.c): every
 * device's plan holds the same sequence of them; the plan stops its queue
 * at each one and hands it to the hook set with sn_plan_set_collective(). */
typedef enum sn_coll_kind {
    SN_COLL_ALLREDUCE,
    SN_COLL_ALLGATHER,
    SN_COLL_REDUCE_SCATTER
} sn_coll_kind;

#define SN_COLL_MAX 16 /* = SN_COMM_MAX */

typedef struct sn_coll_desc {
    sn_coll_kind kind;
    size_t n;                    /* participants */
    size_t counts[SN_COLL_MAX];  /* floats per rank (all-gather's pieces,
                                    reduce-scatter's results); all-reduce:
                                    counts[0] = the whole count */
    sn_view send, recv;          /* all-reduce: in place, send == recv */
} sn_coll_desc;

typedef struct sn_step {
    int kind; /* an sn_kernel, or SN_STEP_COLLECTIVE, _BRANCH, _JUMP */
    int node; /* the graph node it implements, for errors and traces */
    sn_kernel_desc u; /* a kernel's: the member kind names */
    sn_coll_desc coll; /* SN_STEP_COLLECTIVE's */
    sn_branch_desc branch; /* SN_STEP_BRANCH's and SN_STEP_JUMP's */
} sn_step;

typedef struct sn_alloc sn_alloc; /* a virtual arena allocation */
typedef struct sn_plan sn_plan;

/* The lowering context handed to ops. */
typedef struct sn_lower {
    sn_graph *g;
    sn_device *dev;
    sn_plan *plan;
    sn_rt *rt; /* one per graph value */
    /* Lowering a control node's subgraph (sn_lower_subgraph): g is the
     * subgraph, and its steps count as node `owner` of the plan's graph;
     * its constants are uploaded per plan, not shared. */
    int in_sub;
    int owner;
} sn_lower;

/* An operator as the plan builder sees it: checks and lowers one node.
 * The operators are registered in lib/ops/registry.c, above this layer:
 * who builds a plan hands it the lookup. */
typedef struct sn_op_def {
    const char *op_type;
    int min_inputs, max_inputs; /* counting omitted optional ones */
    shardnet_status (*lower)(sn_lower *L, const sn_node *n);
    /* The opsets of its domain whose form of the operator the lowering
     * implements: since .. until (until 0: up to the newest).  A node of
     * the default domain in a model of another opset is refused. */
    int since, until;
} sn_op_def;

/* The operator op_type of domain, or NULL (sn_op_find in ops/registry.h,
 * or a runtime's own lookup that adds its nodes to it). */
typedef const sn_op_def *(*sn_op_lookup)(const char *domain,
                                         const char *op_type);
/* Does op implement node n's form in a model of the default domain's
 * opset `opset`?  Nodes of other domains always match (their opsets are
 * not tracked). */
int sn_op_opset_matches(const sn_op_def *op, const sn_node *n, int64_t opset);
/* op's opsets as text: "9 and later", "1 to 12". */
void sn_op_opsets(const sn_op_def *op, char *buf, size_t cap);

/* --- helpers for ops (lib/exec/lower.c) ------------------------------------ */

/* The node's input i (NULL when omitted); fails if its shape is unknown. */
sn_rt *sn_in(sn_lower *L, const sn_node *n, size_t i);
/* Number of elements of rt. */
size_t sn_rt_elements(const sn_rt *rt);
/* Error naming the node: "node 'x' (Op): <message>". */
shardnet_status sn_node_error(const sn_node *n, shardnet_status st,
                              const char *fmt, ...) SN_PRINTF(3, 4);

/* Output i as a fresh float32 device tensor of the given shape. */
shardnet_status sn_out_device(sn_lower *L, const sn_node *n, size_t i,
                              int rank, const int64_t *dims, sn_rt **out);
/* Output i as a view of `src`'s device data (Reshape, Flatten, ...): no
 * copy; element count must match. */
shardnet_status sn_out_alias(sn_lower *L, const sn_node *n, size_t i,
                             const sn_rt *src, int rank, const int64_t *dims);
/* Output i as the float32 elements [at, at + count) of src's device data,
 * in place (a Slice of consecutive elements): no copy. */
shardnet_status sn_out_range(sn_lower *L, const sn_node *n, size_t i,
                             const sn_rt *src, size_t at, int rank,
                             const int64_t *dims);
/* Output i as a host constant; takes ownership of data (malloc'ed). */
shardnet_status sn_out_host(sn_lower *L, const sn_node *n, size_t i,
                            sn_dtype dtype, int rank, const int64_t *dims,
                            void *data);
/* The device view of rt's data as float32, uploading host data (converted
 * from bool/integer/double types) into a weight buffer on first use. */
shardnet_status sn_dev_view(sn_lower *L, const sn_node *n, sn_rt *rt,
                            sn_view *out);
/* Is rt's device data a graph constant's shared, never-rewritten weight
 * buffer (after sn_dev_view)? */
int sn_rt_is_weight(const sn_lower *L, const sn_rt *rt);
/* A constant's bytes as they are (a quantized weight's integers, not
 * converted to float) on the plan's device: uploaded once per device and
 * shared by plans where rt is a graph constant (used in place where the
 * device uses host memory), else per plan; out is byte 0, at a 4-byte
 * boundary. */
shardnet_status sn_dev_bytes(sn_lower *L, const sn_node *n, sn_rt *rt,
                             sn_view *out);
/* The device view of rt's data as int32 indices (uploads and converts). */
shardnet_status sn_dev_indices(sn_lower *L, const sn_node *n, sn_rt *rt,
                               sn_view *out);
/* Upload `count` floats computed on the host (malloc'ed; taken and freed)
 * into a buffer the plan owns. */
shardnet_status sn_dev_upload(sn_lower *L, const sn_node *n, float *data,
                              size_t count, sn_view *out);
/* A scratch float32 device tensor used only by the steps of this node. */
shardnet_status sn_scratch(sn_lower *L, size_t elements, sn_view *out);
/* Append a step. */
shardnet_status sn_emit(sn_lower *L, const sn_node *n, const sn_step *s);
/* Append GEMM step s as GEMMs over runs of at most `run` of its K (0: one
 * GEMM), each added into C (beta 1 after the first), its epilogue (bias,
 * residual, act) on the last: sums of integers whose partial sums stay
 * below 2^24 in each run are exact in float whatever the kernel's order. */
/* Append y = x (count floats; y may be x) rounded to t, float16 or
 * bfloat16 (the unary ROUND_HALF or ROUND_BF16 step): how such a tensor
 * is held on a device. */
shardnet_status sn_emit_round_half(sn_lower *L, const sn_node *n,
                                   sn_dtype t, size_t count, sn_view x,
                                   sn_view y);
shardnet_status sn_emit_gemm_runs(sn_lower *L, const sn_node *n,
                                  const sn_step *s, size_t run);
/* The index the next step emitted will have. */
size_t sn_step_count(const sn_lower *L);
/* Point the branch or jump step at index `at` at step `target` (which
 * may be the plan's end). */
void sn_step_retarget(sn_lower *L, size_t at, size_t target);

/*
 * The nodes of subgraph sub (a control node n's branch or body, sorted)
 * lowered in a context of their own, with sub's values in rt (one per
 * value of sub, zeroed or kept from an earlier lowering of sub): the
 * caller binds its inputs and outer values; its constants not yet known
 * are bound here.  Its steps go to L's plan as node n's.  The host data
 * it makes stays in rt (host_owned) for the caller to keep or free.
 */
shardnet_status sn_lower_subgraph(sn_lower *L, const sn_node *n,
                                  sn_graph *sub, sn_rt *rt, sn_op_lookup ops);

/* IEEE half and bfloat16 conversions: core/half.h. */

/* Is t an integer type (bool included)?  Float types, float16 and
 * bfloat16 included, are not; nor are strings and complex numbers. */
int sn_dtype_is_integer(sn_dtype t);

/* Host values as int64 (integer/bool types) or double (float types). */
int sn_rt_is_host(const sn_rt *rt);
int64_t sn_rt_get_int(const sn_rt *rt, size_t i);
double sn_rt_get_double(const sn_rt *rt, size_t i);
/* Store a value (dv, or iv when is_int) as type t at element i of p. */
void sn_store_value(sn_dtype t, void *p, size_t i, double dv, int64_t iv,
                    int is_int);

/* --- plans ------------------------------------------------------------ */

/* A bound input: its shape and, for the plan, its host data. */
typedef struct sn_binding {
    sn_dtype dtype;
    int rank;
    int64_t dims[SN_MAX_DIMS];
    const void *data;
    size_t nbytes;
} sn_binding;

/*
 * Weights uploaded to one device, shared by the plans built for it (one
 * plan per input shape): each constant of the graph is uploaded once.
 */
typedef struct sn_weights {
    sn_device *dev;
    sn_buffer **f32;  /* per graph value: float32 copy, or NULL */
    sn_buffer **i32;  /* per graph value: int32 copy, or NULL */
    sn_buffer **raw;  /* per graph value: its bytes as stored, or NULL */
    size_t nvalues;
    size_t bytes;
} sn_weights;

shardnet_status sn_weights_new(const sn_graph *g, sn_device *dev,
                               sn_weights **out);
void sn_weights_free(sn_weights *w);

/*
 * Build a plan for graph g on the weights' device with the given inputs
 * (one binding per g->inputs entry, in order), lowering each node by the
 * operator `ops` finds for it.  Fails naming the node that cannot be run.
 */
shardnet_status sn_plan_build(sn_graph *g, sn_weights *w,
                              const sn_binding *inputs, sn_op_lookup ops,
                              sn_plan **out);
/* The plan for these inputs from a most-recently-used cache of n plans
 * (NULL slots at the end), built (evicting the oldest) when none fits. */
shardnet_status sn_plan_cache_get(sn_plan **cache, size_t n, sn_graph *g,
                                  sn_weights *w, const sn_binding *inputs,
                                  sn_op_lookup ops, sn_plan **out);
/* Whether bindings a[0..n) and b[0..n) have the same types and shapes. */
int sn_same_shapes(const sn_binding *a, const sn_binding *b, size_t n);
/* Does this plan fit these inputs (shapes, and values of host inputs)? */
int sn_plan_matches(const sn_plan *p, const sn_binding *inputs);
/* Run the plan; outputs land in host tensors owned by the plan, valid until
 * the next run or free. */
shardnet_status sn_plan_run(sn_plan *p, const sn_binding *inputs);
/* The hook that runs the plan's collective steps (called on the thread
 * running the plan, after the device's queue has drained; must block until
 * the collective is done on every device).  A plan without one fails at its
 * first collective step. */
typedef shardnet_status (*sn_coll_hook)(void *ctx, const sn_coll_desc *d);
void sn_plan_set_collective(sn_plan *p, sn_coll_hook hook, void *ctx);
/* Output i (g->outputs order) of the last run. */
const sn_host_tensor *sn_plan_output(const sn_plan *p, size_t i);
/* What the plan knows of graph value v (shape, type). */
const sn_rt *sn_plan_value(const sn_plan *p, size_t v);
size_t sn_plan_steps(const sn_plan *p);
/* The kernels the plan launches per graph node, in per_node[0 ..
 * g->nnodes) (a node run on the host: 0). */
void sn_plan_launches(const sn_plan *p, size_t *per_node);
size_t sn_plan_arena_bytes(const sn_plan *p);
size_t sn_plan_weight_bytes(const sn_plan *p);
void sn_plan_free(sn_plan *p);

#endif /* SN_EXEC_H */
