/*
 * Operators (private): the lowering functions of lib/ops/ops_*.c, one file
 * per family, and the helpers they share (in ops.c; sn_emit_binary in
 * ops_elementwise.c).  The table naming them (with each operator's opsets,
 * shard rule and cost) is lib/ops/registry.c.
 *
 * A lowering function reads its inputs with sn_in(), checks attributes and
 * shapes (every error names the node and says why), then either folds on
 * the host (sn_out_host: shape arithmetic on integer tensors) or emits
 * kernel steps on the device (sn_out_device / sn_out_alias + sn_emit).
 */
#ifndef SN_OPS_H
#define SN_OPS_H

#include "exec/exec.h"

#define SN_LOWER(name) shardnet_status name(sn_lower *L, const sn_node *n)

/* Normalise an axis in [-rank, rank) to [0, rank); -1 if out of range. */
int sn_axis(int64_t axis, int rank);
/* Numpy-broadcast two shapes into out (rank max(ra, rb)); 0 on mismatch. */
int sn_broadcast_shape(int ra, const int64_t *a, int rb, const int64_t *b,
                       int *rank, int64_t *out);
/* Row-major strides (elements) of a shape. */
void sn_strides(int rank, const int64_t *dims, int64_t *strides);
/* Step idx, a position in a (rank, dims) walk in C order, to the next one,
 * and move *pos, the offset of that position in a tensor of strides str,
 * along with it (back to the start after the last position). */
void sn_index_next(int rank, const int64_t *dims, int64_t *idx,
                   const int64_t *str, int64_t *pos);
/* Copy src (any layout on device) broadcast into a fresh output: used by
 * Expand, Gemm's C, ... ; src_dims right-aligned against dims. */
shardnet_status sn_emit_broadcast_copy(sn_lower *L, const sn_node *n,
                                       sn_rt *src, int rank,
                                       const int64_t *dims, sn_view dst);
/* One binary step c = a op b on device views, numpy-broadcasting shape da
 * (rank ra) against db (rank rb). */
shardnet_status sn_emit_binary(sn_lower *L, const sn_node *n,
                               sn_binary_op op, int ra, const int64_t *da,
                               sn_view a, int rb, const int64_t *db, sn_view b,
                               sn_view c);
/* The integer values of a host input (shape, axes, ...), at most cap. */
shardnet_status sn_host_ints(const sn_node *n, const sn_rt *rt,
                             const char *what, int64_t *out, size_t cap,
                             size_t *count);

/*
 * Parameters that moved from an attribute to an input at some opset:
 * Slice's starts, ends, axes and steps (inputs 1-4 from opset 10), Clip's
 * min and max (1-2, opset 11), the axes of Squeeze, Unsqueeze and
 * ReduceSum and Split's split (input 1, opset 13; Split-1 took either
 * form), the axes of ReduceMean and ReduceMax (input 1, opset 18).  One table, read by the lowering and
 * by the splits that write such nodes.
 *
 * The input that carries `param` of `op` in a graph of `opset`, or -1
 * where it is an attribute; *since (may be NULL): the opset it became an
 * input.  -2 for a parameter the table does not know.
 */
int sn_param_input(const char *op, const char *param, int64_t opset,
                   int64_t *since);
/*
 * Node n's integer parameter `param` (see sn_param_input), from its input
 * or its attribute as the graph's opset says, at most cap values;
 * *given: whether the node has it.  An input where the opset wants the
 * attribute (or the reverse) is an error naming the node.
 */
shardnet_status sn_param_ints(sn_lower *L, const sn_node *n,
                              const char *param, int64_t *out, size_t cap,
                              size_t *count, int *given);
/* The input carrying `param` of node n of graph g (as sn_param_input),
 * after checking the node does not give it in the other form. */
shardnet_status sn_param_where(const sn_graph *g, const sn_node *n,
                               const char *param, int *input);
/* The INTS attribute `name` of node n into out (at most cap values);
 * *given (may be NULL) says whether it is there. */
shardnet_status sn_attr_ints(const sn_node *n, const char *name,
                             int64_t *out, size_t cap, size_t *count,
                             int *given);
/* `param` of node n where sn_param_where says: from in (the input's
 * runtime facts, its data on the host; NULL when the node lacks it) when
 * input >= 0, else from the attribute. */
shardnet_status sn_param_read(const sn_node *n, const char *param,
                              int input, const sn_rt *in, int64_t *out,
                              size_t cap, size_t *count, int *given);

/* Largest tensor computed on the host when folding (bytes): a hostile
 * model's shape arithmetic must not make the host allocate without bound. */
#define SN_MAX_HOST_FOLD ((size_t)256 << 20)

/* Product of dims[from, to). */
size_t sn_dims_product(int from, int to, const int64_t *dims);
/*
 * Is rt's data known on the host?  An empty tensor counts as known: there
 * is nothing to read (and empty constants have no data pointer).
 */
int sn_host_known(const sn_rt *rt);
/* sn_host_ints, accepting an empty tensor. */
shardnet_status sn_host_ints_or_empty(const sn_node *n, const sn_rt *rt,
                                      const char *what, int64_t *out,
                                      size_t cap, size_t *count);
/* Bytes per element of host data of type t (any type with a fixed size). */
shardnet_status sn_host_elem_size(const sn_node *n, sn_dtype t, size_t *es);
/* Host memory for a folded tensor of count elements of es bytes (at least
 * one byte); NULL beyond SN_MAX_HOST_FOLD. */
void *sn_host_alloc(size_t count, size_t es);
/*
 * The type a device output of data of type t reports: the device holds
 * float32 either way, converted back when the output is read, which the
 * executor does for these types only.
 */
shardnet_status sn_device_type(const sn_node *n, sn_dtype t, sn_dtype *out);
/* Output 0 as a fresh device tensor of shape (rank, dims) holding elements
 * of type t as the device keeps them (sn_device_type). */
shardnet_status sn_out_device_as(sn_lower *L, const sn_node *n, sn_dtype t,
                                 int rank, const int64_t *dims, sn_rt **out);
/* Float inputs only (float32, or float64 computed in float32). */
shardnet_status sn_float_type(const sn_node *n, const sn_rt *x, sn_dtype *out);
/* Strides (elements) of a (rank_a, dims_a) operand broadcast to `rank`
 * dims, right-aligned: 0 where it is broadcast. */
void sn_bcast_strides(int rank_a, const int64_t *dims_a, int rank,
                      int64_t *str);

/* lib/ops/ops_shape.c: aliases and values made on the host. */
SN_LOWER(sn_lower_identity);
SN_LOWER(sn_lower_reshape);
SN_LOWER(sn_lower_flatten);
SN_LOWER(sn_lower_squeeze);
SN_LOWER(sn_lower_unsqueeze);
SN_LOWER(sn_lower_shape);
SN_LOWER(sn_lower_constant);
SN_LOWER(sn_lower_constant_of_shape);

/* lib/ops/ops_elementwise.c: Cast and the element-wise operators. */
SN_LOWER(sn_lower_cast);
SN_LOWER(sn_lower_binary);
SN_LOWER(sn_lower_unary);
SN_LOWER(sn_lower_reciprocal);
SN_LOWER(sn_lower_variadic);
SN_LOWER(sn_lower_not);

/* lib/ops/ops_nn.c: linear algebra and neural-network layers. */
SN_LOWER(sn_lower_gemm);
SN_LOWER(sn_lower_matmul);
SN_LOWER(sn_lower_softmax);

/* lib/ops/ops_conv.c: convolution and pooling. */
SN_LOWER(sn_lower_conv);
SN_LOWER(sn_lower_maxpool);
SN_LOWER(sn_lower_avgpool);
SN_LOWER(sn_lower_global_avgpool);
SN_LOWER(sn_lower_global_maxpool);

/* lib/ops/ops_norm.c: normalisation. */
SN_LOWER(sn_lower_batchnorm);
SN_LOWER(sn_lower_layernorm);

/* lib/ops/ops_data.c: data movement. */
SN_LOWER(sn_lower_transpose);
SN_LOWER(sn_lower_concat);
SN_LOWER(sn_lower_split);
SN_LOWER(sn_lower_slice);
SN_LOWER(sn_lower_gather);
SN_LOWER(sn_lower_expand);
SN_LOWER(sn_lower_where);

/* lib/ops/ops_reduce.c: reductions. */
SN_LOWER(sn_lower_reduce_mean);
SN_LOWER(sn_lower_reduce_sum);
SN_LOWER(sn_lower_reduce_max);

/* lib/ops/ops_rnn.c: recurrence (RNN, GRU, LSTM). */
SN_LOWER(sn_lower_rnn);

#endif /* SN_OPS_H */
