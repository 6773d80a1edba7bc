/*
 * Node timing (private): seconds each node of a graph takes on a device,
 * the figures both splits' planners weigh their cuts with.  See timing.c.
 */
#ifndef SN_TIMING_H
#define SN_TIMING_H

#include "exec/exec.h"

/* Seconds each node of graph g takes on dev for these inputs (a plan of
 * the whole graph, run waiting for each step, best of three runs), in
 * best[0 .. g->nnodes).  Measured once per graph, device and input shapes
 * in a process; asked again, the same figures come back. */
shardnet_status sn_time_nodes(sn_graph *g, sn_device *dev,
                              const sn_binding *inputs, double *best);
/* sn_time_nodes on dev's own process (t: g->nnodes seconds); with shared
 * (a task every process of the job runs alike), the times, or how timing
 * failed, are broadcast from there to every process. */
shardnet_status sn_time_nodes_shared(sn_graph *g, sn_device *dev,
                                     const sn_binding *inputs, double *t,
                                     int shared);
/* Whether bindings a[0..n) and b[0..n) have the same types and shapes
 * (the key of the timings; a stream's batches must match too). */
int sn_same_shapes(const sn_binding *a, const sn_binding *b, size_t n);

#endif /* SN_TIMING_H */
