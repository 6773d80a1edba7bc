/*
 * The tensor split's cost model (private): seconds per run of a tensor
 * split from figures its runtime gathers (each device's graph and plan;
 * the collectives it wrote; the link between processes) and the devices'
 * profiles.  lib/runtime/shard.c walks its device graphs and
 * asks these; the layer split's cost model is layer_costs.h.  See
 * tensor_costs.c.
 */
#ifndef SN_TENSOR_COSTS_H
#define SN_TENSOR_COSTS_H

#include <stddef.h>

#include "exec/exec.h"
#include "plan/profile.h"

/* The link between processes when it could not be measured. */
#define SN_LINK_DEFAULT_LATENCY_S 1e-4
#define SN_LINK_DEFAULT_BPS 1e9

/* A device's seconds per run of its graph g (plan: g's plan on it) on a
 * device of profile p: its nodes' costs (node_costs.h), but the
 * collective nodes' (costed apart, below). */
double sn_tensor_cost_device(const sn_profile *p, const sn_graph *g,
                             const sn_plan *plan);

/* What a tensor split's collectives are per run. */
typedef struct sn_tensor_collectives {
    size_t count;
    double bytes;     /* float bytes they move */
    unsigned nprocs;  /* processes the devices are on */
    double link_lat_s, link_bps; /* between processes (nprocs > 1) */
    int codec;        /* what crosses the link is in (comm/codec.h's
                         sn_codec; 0: the floats as they are) */
} sn_tensor_collectives;

/*
 * Seconds of the collectives per run over devices of profiles p[0..n):
 * a fixed cost each (SN_COLL_LATENCY_S and the slowest launch) and the
 * bytes staged twice (out of and back into the devices) at the slowest
 * staging bandwidth; across processes each also crosses the link: two
 * latencies and its bytes per other process (an upper bound: processes
 * exchange only the parts the others keep), in the codec: its dense
 * bytes (sn_codec_wire_ratio) and its conversion (SN_CODEC_S_PER_BYTE).
 */
double sn_tensor_cost_collectives(const sn_profile *const *p, size_t n,
                                  const sn_tensor_collectives *c);
/* The split's seconds per run: the slowest of dev_s[0..n), the devices'
 * times, plus coll_s, its collectives'. */
double sn_tensor_cost(const double *dev_s, size_t n, double coll_s);

#endif /* SN_TENSOR_COSTS_H */
