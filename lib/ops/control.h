/*
 * Control flow (private to lib/ops/ops_control.c and ops_scan.c): the
 * helpers that lower a control node's subgraphs inline and carry values
 * between their lowerings.  See ops_control.c for the model.
 */
#ifndef SN_OPS_CONTROL_H
#define SN_OPS_CONTROL_H

#include "ops/ops.h"

/* Iterations a Loop or Scan may unroll into one plan. */
#define SN_CTL_MAX_UNROLL 65536

/* dst (its host data freed) becomes src, with host data of its own. */
shardnet_status sn_ctl_rt_set(const sn_node *n, sn_rt *dst, const sn_rt *src);
/* The host data of rt[0 .. n) freed, then rt. */
void sn_ctl_rts_free(sn_rt *rt, size_t n);
/* *out (zeroed first): x with axis `axis` fixed at `at` (and removed): a
 * view where its elements are consecutive, else a copy. */
shardnet_status sn_ctl_slice(sn_lower *L, const sn_node *n, const sn_rt *x,
                             int axis, int64_t at, sn_rt *out);
/* *out (zeroed first): the count items (of one shape and type) stacked
 * along a new axis `axis`; with none, an empty tensor shaped as `like`. */
shardnet_status sn_ctl_stack(sn_lower *L, const sn_node *n,
                             const sn_rt *items, size_t count, int axis,
                             const sn_value *like, sn_rt *out);
/* The subgraph attribute `name` of n, required. */
shardnet_status sn_ctl_graph(const sn_node *n, const char *name,
                             sn_graph **out);
/* A fresh value array (*out) for one lowering of sub, attribute attr of
 * n: its outer values borrowed from n's inputs, or with prev, the
 * constants and outer values of the previous lowering kept. */
shardnet_status sn_ctl_begin(sn_lower *L, const sn_node *n, const char *attr,
                             const sn_graph *sub, const sn_rt *prev,
                             sn_rt **out);
/* sub lowered with its values in rt; every output of it made. */
shardnet_status sn_ctl_run(sn_lower *L, const sn_node *n, const char *attr,
                           sn_graph *sub, sn_rt *rt);
/* Output i of n, when the node has it, becomes src. */
shardnet_status sn_ctl_output(sn_lower *L, const sn_node *n, size_t i,
                              const sn_rt *src);

#endif /* SN_OPS_CONTROL_H */
