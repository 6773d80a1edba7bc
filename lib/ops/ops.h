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
/* n's error for input shapes a and b that do not broadcast together,
 * naming both. */
shardnet_status sn_broadcast_error(const sn_node *n, int ra, const int64_t *a,
                                   int rb, const int64_t *b);
/* n's error unless b broadcasts into a's shape without widening it (a
 * bias or a residual added to a); what names b in it. */
shardnet_status sn_broadcast_into(const sn_node *n, const sn_rt *a,
                                  const sn_rt *b, const char *what);
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
 * (rank ra) against db (rank rb); _act applies act to each result. */
shardnet_status sn_emit_binary(sn_lower *L, const sn_node *n,
                               sn_binary_op op, int ra, const int64_t *da,
                               sn_view a, int rb, const int64_t *db, sn_view b,
                               sn_view c);
shardnet_status sn_emit_binary_act(sn_lower *L, const sn_node *n,
                                   sn_binary_op op, sn_act act, int ra,
                                   const int64_t *da, sn_view a, int rb,
                                   const int64_t *db, sn_view b, sn_view c);
/* Activation act (a Relu, or a Relu6 as the CLIP to 0 and 6 the epilogues
 * compute) as a step of its own on the count floats at v, in place;
 * nothing for SN_ACT_NONE. */
shardnet_status sn_emit_act(sn_lower *L, const sn_node *n, sn_act act,
                            size_t count, sn_view v);
/* The activation a pass fused into node n (attribute activation = "Relu"
 * or "Relu6"; see lib/passes/fuse_activation.c), or none. */
sn_act sn_fused_act(const sn_node *n);
/* The integer values of a host input (shape, axes, ...), at most cap. */
shardnet_status sn_host_ints(const sn_node *n, const sn_rt *rt,
                             const char *what, int64_t *out, size_t cap,
                             size_t *count);

/*
 * Parameters that moved from an attribute to an input at some opset:
 * Slice's starts, ends, axes and steps (inputs 1-4 from opset 10), Clip's
 * min and max (1-2, opset 11), the axes of Squeeze, Unsqueeze and
 * ReduceSum and Split's split (input 1, opset 13; Split-1 took either
 * form), the axes of the other reductions (input 1, opset 18), TopK's k
 * (input 1, opset 10).  One table, read by the lowering and
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
SN_LOWER(sn_lower_gelu_forms);
SN_LOWER(sn_lower_reciprocal);
SN_LOWER(sn_lower_variadic);
SN_LOWER(sn_lower_not);

/* lib/ops/ops_logic.c: comparisons, logic, Mod, BitShift, PRelu. */
SN_LOWER(sn_lower_compare);
SN_LOWER(sn_lower_bitshift);
SN_LOWER(sn_lower_prelu);
/* (ops_elementwise.c, beside Cast) */
SN_LOWER(sn_lower_castlike);

/*
 * Folding element-wise ops on the host (lib/ops/ops_math.c): op is an
 * sn_binary_op or one of the integer-only ops below; values as
 * sn_rt_get_int / sn_rt_get_double read them (uns: the type is unsigned,
 * compare and divide as uint64).
 */
#define SN_FOLD_SHIFT_LEFT (SN_BINARY_COUNT)
#define SN_FOLD_SHIFT_RIGHT (SN_BINARY_COUNT + 1)
int64_t sn_fold_int(int op, int64_t a, int64_t b, int uns);
double sn_fold_double(int op, double a, double b);
double sn_fold_unary(sn_unary_op op, double x, double alpha, double beta);
/* op of an integer x where integers have their own form (Abs, Neg, Sign,
 * Relu, Clip): 1 and *out, else 0 (compute in double). */
int sn_fold_unary_int(sn_unary_op op, int64_t x, double alpha, double beta,
                      int64_t *out);
/* a op b broadcast to (rank, dims), both on the host, into a fresh buffer
 * of type t (ops_elementwise.c); ints when both inputs are integers. */
shardnet_status sn_fold_broadcast(const sn_node *n, int op, const sn_rt *a,
                                  const sn_rt *b, int rank,
                                  const int64_t *dims, sn_dtype t,
                                  void **out);
/* Before opset 7, B's shape for the legacy `broadcast` / `axis` form
 * (ops_elementwise.c): *bl is b with that shape. */
shardnet_status sn_legacy_broadcast(const sn_node *n, const sn_rt *a,
                                    const sn_rt *b, sn_rt *bl);
/* Cast x to type `to` as node n's output 0 (ops_elementwise.c). */
shardnet_status sn_cast_to(sn_lower *L, const sn_node *n, sn_rt *x,
                           sn_dtype to);

/* lib/ops/ops_nn.c: linear algebra and neural-network layers. */
SN_LOWER(sn_lower_gemm);
SN_LOWER(sn_lower_matmul);
SN_LOWER(sn_lower_softmax);

/* lib/ops/ops_conv.c: convolution and pooling. */
/* The integer sums of a convolution (ConvInteger, QLinearConv) on the
 * device: vx and vw the input and the weights less their zero points, as
 * floats of x's and w's shapes; each output's sum in runs of krun (0:
 * whole) of its C / group x kernel products, so that every partial sum
 * stays exact; into y (the output's shape).  1-D and 2-D. */
shardnet_status sn_conv_int_sums(sn_lower *L, const sn_node *n,
                                 const sn_rt *x, const sn_rt *w, sn_view vx,
                                 sn_view vw, size_t krun, sn_view y);
SN_LOWER(sn_lower_conv);
SN_LOWER(sn_lower_maxpool);
SN_LOWER(sn_lower_avgpool);
SN_LOWER(sn_lower_global_avgpool);
SN_LOWER(sn_lower_global_maxpool);

/* lib/ops/ops_norm.c: normalisation. */
SN_LOWER(sn_lower_batchnorm);
SN_LOWER(sn_lower_layernorm);
SN_LOWER(sn_lower_instancenorm);
SN_LOWER(sn_lower_groupnorm);
SN_LOWER(sn_lower_rmsnorm);
SN_LOWER(sn_lower_skip_norm);
SN_LOWER(sn_lower_mvn);

/* lib/ops/ops_data.c: data movement. */
SN_LOWER(sn_lower_transpose);
SN_LOWER(sn_lower_concat);
SN_LOWER(sn_lower_split);
SN_LOWER(sn_lower_slice);
SN_LOWER(sn_lower_gather);
SN_LOWER(sn_lower_expand);
SN_LOWER(sn_lower_where);
/* lib/ops/ops_control.c: control flow (If, Loop, Scan). */
SN_LOWER(sn_lower_if);
SN_LOWER(sn_lower_loop);
SN_LOWER(sn_lower_scan);

/* lib/ops/ops_reduce.c: reductions, cumulative sums, Lp normalisation. */
SN_LOWER(sn_lower_reduce_mean);
SN_LOWER(sn_lower_reduce_sum);
SN_LOWER(sn_lower_reduce_max);
SN_LOWER(sn_lower_reduce_min);
SN_LOWER(sn_lower_reduce_prod);
SN_LOWER(sn_lower_reduce_l1);
SN_LOWER(sn_lower_reduce_l2);
SN_LOWER(sn_lower_reduce_log_sum);
SN_LOWER(sn_lower_reduce_log_sum_exp);
SN_LOWER(sn_lower_reduce_sum_square);
SN_LOWER(sn_lower_cumsum);
SN_LOWER(sn_lower_lp_normalization);

/* lib/ops/ops_select.c: selection along an axis. */
SN_LOWER(sn_lower_argmax);
SN_LOWER(sn_lower_argmin);
SN_LOWER(sn_lower_hardmax);
SN_LOWER(sn_lower_topk);

/* lib/ops/ops_text.c: text features. */
SN_LOWER(sn_lower_tfidf);

/* lib/ops/ops_index.c: indexing by host-known indices (gather maps). */
SN_LOWER(sn_lower_gather_elements);
SN_LOWER(sn_lower_gather_nd);
SN_LOWER(sn_lower_scatter_elements);
SN_LOWER(sn_lower_scatter_nd);
SN_LOWER(sn_lower_onehot);
SN_LOWER(sn_lower_compress);
SN_LOWER(sn_lower_reverse_sequence);
SN_LOWER(sn_lower_trilu);
/* lib/ops/ops_index_host.c: data-dependent shapes, values from shapes. */
SN_LOWER(sn_lower_nonzero);
SN_LOWER(sn_lower_unique);
SN_LOWER(sn_lower_range);
SN_LOWER(sn_lower_eyelike);
SN_LOWER(sn_lower_size);

/* lib/ops/ops_convtranspose.c: the transposed convolution. */
SN_LOWER(sn_lower_convtranspose);

/* lib/ops/ops_einsum.c: Einsum as copies, GEMMs and a sum. */
SN_LOWER(sn_lower_einsum);

/* lib/ops/ops_linalg.c: determinants. */
SN_LOWER(sn_lower_det);

/* lib/ops/ops_nms.c: non-max suppression, on the host. */
SN_LOWER(sn_lower_nms);

/* lib/ops/ops_quant.c: quantization and integer products. */
/* The largest integer float32 holds exactly (2^24): sums of integers stay
 * exact in float below it, in any order. */
#define SN_FLOAT_EXACT 16777216.0
/* A zero point or scale p of one value or one per row or channel: element
 * i's (dflt where p is absent or empty). */
double sn_quant_param(const sn_rt *p, size_t i, double dflt);
/* p (may be NULL) holds 1 or want values, else an error naming `what`. */
shardnet_status sn_quant_count(const sn_node *n, const sn_rt *p,
                               const char *what, size_t want);
/* sn_quant_count, and p's values known when the model is planned. */
shardnet_status sn_quant_host_param(const sn_node *n, const sn_rt *p,
                                    const char *what, size_t want);
/* The largest |v - z| over v's values (its elements when known, else its
 * type's range) and its zero points zp (NULL: 0). */
double sn_quant_max_offset(const sn_rt *v, const sn_rt *zp);
/* v - zp on the device into a scratch (zp one value, or shaped zdims of
 * rank zrank to broadcast), or v's own view without zero points. */
shardnet_status sn_quant_offset_device(sn_lower *L, const sn_node *n,
                                       sn_rt *v, sn_rt *zp, int zrank,
                                       const int64_t *zdims, sn_view *out);
/* y = integer sums times the multipliers mul (malloc'ed, taken; shaped
 * mdims, broadcast over dims), saturated to [lo - z, hi - z], rounded half
 * to even, plus z: a QLinear operator's requantization on the device. */
shardnet_status sn_requantize_device(sn_lower *L, const sn_node *n, int rank,
                                     const int64_t *dims, sn_view sums,
                                     int mrank, const int64_t *mdims,
                                     float *mul, double lo, double hi,
                                     double z, sn_view y);
/* Integer products' exact sums s (count of them, malloc'ed) narrowed in
 * place to int32, wrapping as int32 sums do, or with as_float to the
 * float of that int32 (a Cast to float taken over: passes/integer_sums.c);
 * returns s. */
void *sn_narrow_sums(int64_t *s, size_t count, int as_float);
SN_LOWER(sn_lower_quantize);
SN_LOWER(sn_lower_dequantize);
SN_LOWER(sn_lower_dynamic_quantize);
SN_LOWER(sn_lower_matmul_integer);
SN_LOWER(sn_lower_qlinear_matmul);

/* lib/ops/ops_qconv.c: integer convolutions, on the host. */
SN_LOWER(sn_lower_conv_integer);
SN_LOWER(sn_lower_qlinear_conv);
SN_LOWER(sn_lower_quantized_matmul);
SN_LOWER(sn_lower_matmul_nbits);

/* lib/ops/ops_signal.c: windows, mel filters, DFT and STFT. */
SN_LOWER(sn_lower_window);
SN_LOWER(sn_lower_mel_weight_matrix);
SN_LOWER(sn_lower_dft);
SN_LOWER(sn_lower_stft);

/* lib/ops/ops_loss.c: losses. */
SN_LOWER(sn_lower_nll_loss);
SN_LOWER(sn_lower_softmax_cross_entropy_loss);

/* lib/ops/ops_spatial.c: spatial data movement. */
SN_LOWER(sn_lower_pad);
SN_LOWER(sn_lower_tile);
SN_LOWER(sn_lower_depth_to_space);
SN_LOWER(sn_lower_space_to_depth);
SN_LOWER(sn_lower_max_unpool);
SN_LOWER(sn_lower_lrn);

/* lib/ops/ops_resize.c: resampling and sampling (Resize, Upsample,
 * GridSample, RoiAlign). */
SN_LOWER(sn_lower_resize);
SN_LOWER(sn_lower_grid_sample);
SN_LOWER(sn_lower_roi_align);

/* lib/ops/ops_rnn.c: recurrence (RNN, GRU, LSTM). */
SN_LOWER(sn_lower_rnn);

#endif /* SN_OPS_H */
