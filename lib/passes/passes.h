/*
 * Graph passes (private): rewrites of a loaded graph, run once before any
 * plan.  Each takes a sorted graph and leaves it sorted; removed nodes are
 * marked dead.  One file per pass in lib/passes/.
 */
#ifndef SN_PASSES_H
#define SN_PASSES_H

#include <stddef.h>

#include "ir/graph.h"

/* Every node whose inputs are all constants and whose lowering computes on
 * the host, evaluated once: its outputs become constants
 * (fold_constants.c). */
shardnet_status sn_pass_fold_constants(sn_graph *g, size_t *folded);
/* A Pad of zeros before a Conv with finite constant weights, folded
 * into the Conv's pads (fold_pad.c). */
shardnet_status sn_pass_fold_pad(sn_graph *g, size_t *folded);
/* BatchNormalization after a Conv or Gemm with constant weights, folded
 * into them (batchnorm.c). */
shardnet_status sn_pass_fold_batchnorm(sn_graph *g, size_t *folded);
/* A Mul and an Add by constants (one value, or one per channel) after a
 * Conv, folded into its weights and bias (fold_affine.c). */
shardnet_status sn_pass_fold_affine(sn_graph *g, size_t *folded);
/* x times Sigmoid(x) or HardSigmoid(x), fused into the unary node; a
 * hard swish exported as Add, Clip, Mul and Div by constants, fused into
 * the Clip, which computes the four in one step (fuse_gate.c). */
shardnet_status sn_pass_fuse_gate(sn_graph *g, size_t *fused);
/* A constant bias added after a MatMul, moved into it (fuse_bias.c). */
shardnet_status sn_pass_fuse_bias(sn_graph *g, size_t *fused);
/* A Relu after a Gemm, MatMul or Conv, applied by its epilogue
 * (fuse_activation.c). */
shardnet_status sn_pass_fuse_activation(sn_graph *g, size_t *fused);
/* A Relu after an Add, Sub, Mul or Div, applied by its binary step
 * (fuse_activation.c). */
shardnet_status sn_pass_fuse_binary_activation(sn_graph *g, size_t *fused);
/* An Add (and its fused Relu) after a Conv, moved into it as a residual
 * input, added by its epilogue (fuse_residual.c). */
shardnet_status sn_pass_fuse_residual(sn_graph *g, size_t *fused);
/* quantized_products.c: MatMul and Gemm by a DequantizeLinear of constant
 * integers become QuantizedMatMul, which reads them as stored. */
shardnet_status sn_pass_quantized_products(sn_graph *g, size_t *fused);
/* integer_sums.c: ConvInteger and MatMulInteger read by one Cast to float
 * take it over, and may sum on the device past 2^24. */
shardnet_status sn_pass_integer_sums(sn_graph *g, size_t *fused);
/* Nodes nothing uses, removed (dead.c). */
shardnet_status sn_pass_remove_dead(sn_graph *g, size_t *removed);
/* All of them, constant folding first, in order (passes.c). */
shardnet_status sn_passes_run(sn_graph *g);

#endif /* SN_PASSES_H */
