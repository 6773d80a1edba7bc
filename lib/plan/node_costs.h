/*
 * Node costs (private): the seconds each node of a graph would take on a
 * device, estimated from the device's profile (plan/profile.h) and the
 * node's shapes, never by running the model on the device.  A model larger
 * than any one device plans in the memory of its graph: its shapes come
 * from a plan on the shapes device (backend.h), which uploads no weight.
 * Both splits' planners weigh their cuts with these figures.  See
 * node_costs.c.
 */
#ifndef SN_NODE_COSTS_H
#define SN_NODE_COSTS_H

#include "exec/exec.h"
#include "plan/profile.h"

/* A plan of g for these inputs on the shapes device (*w its weights, of
 * no memory): every value's shape, every node's work, the arena's size.
 * Free both with sn_shape_plan_free, also after a failure. */
shardnet_status sn_shape_plan(sn_graph *g, const sn_binding *inputs,
                              sn_weights **w, sn_plan **out);
void sn_shape_plan_free(sn_weights *w, sn_plan *p);

/* Seconds of every node of g (p: a plan of g, on any device) on a device of
 * profile pr, in seconds[0 .. g->nnodes) (0 for a dead node):
 *
 *   each kernel it launches      launch_s
 *   a product (MatMul, Gemm,     the larger of its flops at the GEMM speed
 *   Conv...)                     of its size (between the profile's 64^3
 *                                and 384^3 figures) and its bytes read at
 *                                read_bps (a batch-1 product: its weights)
 *   any other node               its bytes (inputs and outputs) at read_bps
 *
 * where a constant input counts the bytes it is stored in (int8 weights:
 * one byte each). */
void sn_node_costs(const sn_profile *pr, const sn_graph *g, const sn_plan *p,
                   double *seconds);

#endif /* SN_NODE_COSTS_H */
