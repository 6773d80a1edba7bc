/*
 * Graph rewriting helpers shared by the passes (private to lib/passes).
 * Every pass keeps the graph sorted and marks removed nodes dead.
 */
#ifndef SN_PASSES_REWRITE_H
#define SN_PASSES_REWRITE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "ir/graph.h"
#include "passes/passes.h"

/* How many live nodes read each value (graph outputs count as a use);
 * NULL when out of memory.  The caller frees it. */
int *sn_pass_use_counts(const sn_graph *g);
/* The only live consumer of value v, or NULL. */
sn_node *sn_pass_sole_consumer(sn_graph *g, const int *uses, int v);
/* Node n is live and of op type `op` in the default domain. */
int sn_pass_is_op(const sn_node *n, const char *op);
/* A float constant with exactly `count` elements, copied (aligned: the
 * mapped file's raw_data need not be) into `out`; NULL when v is not. */
const float *sn_pass_const_floats(const sn_graph *g, int v, size_t count,
                                  float *out);
/* Value v is a float constant of rank 0: its value in *out; 0 when not. */
int sn_pass_const_scalar(const sn_graph *g, int v, float *out);
/* A new constant value holding `data` (owned: freed on failure too) with
 * the given shape, named after `base` and `suffix`; its index, or -1. */
int sn_pass_new_const(sn_graph *g, const char *base, const char *suffix,
                      float *data, int rank, const int64_t *dims);
/* Give node n `count` input slots (new ones omitted); 0 when out of memory. */
int sn_pass_ensure_inputs(sn_node *n, size_t count);
/* Node r, the only reader of node p's output, done by p: p now writes r's
 * output, and r is dead. */
void sn_pass_absorb(sn_graph *g, size_t p, sn_node *r);
/* Clip c's bounds as constants into *lo and *hi (-inf / +inf where
 * absent), from its attributes or its inputs as the opset says; 0 where
 * one is not a constant scalar. */
int sn_pass_clip_bounds(const sn_graph *g, const sn_node *c, float *lo,
                        float *hi);
/* Node r, a live `op` of two inputs and one output without the attribute
 * axis (an opset 1-6 binary op aligns its operands otherwise), reading
 * value y: its other input (-1 where absent); -1 for any other node. */
int sn_pass_other_operand(const sn_node *r, const char *op, int y);

/*
 * Is n a DequantizeLinear or Cast of a constant weight kept for the
 * quantized product pass (quantized_products.c) instead of being folded
 * into floats: a DequantizeLinear of a matrix of int8 or uint8, its scale
 * a float scalar or vector and its zero point (if any) constants, or a
 * Cast to float of a float16 or bfloat16 matrix; its output read only as
 * the weight (input 1) of MatMul or Gemm nodes and not a graph output?
 */
int sn_pass_keeps_quantized(const sn_graph *g, const sn_node *n);
/* The node that produces value v (live), or NULL. */
sn_node *sn_pass_producer(sn_graph *g, int v);

#endif /* SN_PASSES_REWRITE_H */
