/*
 * The tensor split's cost model (see tensor_costs.h): a device's time from
 * its nodes, the collectives' time, and the split's estimate.  The
 * runtime (lib/runtime/shard.c) gathers the figures and keeps the result;
 * the split chooser (choose.c) weighs it against the other splits.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "comm/codec.h"
#include "plan/node_costs.h"
#include "plan/tensor_costs.h"

double sn_tensor_cost_device(const sn_profile *p, const sn_graph *g,
                             const sn_plan *plan)
{
    double *each = malloc((g->nnodes + 1) * sizeof *each), s = 0;
    if (!each)
        return 1e300;
    sn_node_costs(p, g, plan, each);
    for (size_t i = 0; i < g->nnodes; i++)
        if (strcmp(g->nodes[i].op_type, "ShardCollective"))
            s += each[i];
    free(each);
    return s;
}

double sn_tensor_cost_collectives(const sn_profile *const *p, size_t n,
                                  const sn_tensor_collectives *c)
{
    double bw = 1e30, launch = 0, s;
    for (size_t d = 0; d < n; d++) {
        if (sn_profile_staging_bw(p[d]) < bw)
            bw = sn_profile_staging_bw(p[d]);
        if (p[d]->launch_s > launch)
            launch = p[d]->launch_s;
    }
    s = (double)c->count * (SN_COLL_LATENCY_S + launch) + 2.0 * c->bytes / bw;
    if (c->nprocs > 1) {
        double wire = sn_codec_wire_ratio((sn_codec)c->codec);
        s += (double)c->count * 2.0 * c->link_lat_s +
             2.0 * c->bytes * (double)(c->nprocs - 1) * wire / c->link_bps;
        if (c->codec != SN_CODEC_FP32)
            s += 2.0 * c->bytes * SN_CODEC_S_PER_BYTE;
    }
    return s;
}

double sn_tensor_cost(const double *dev_s, size_t n, double coll_s)
{
    double worst = 0;
    for (size_t d = 0; d < n; d++)
        if (dev_s[d] > worst)
            worst = dev_s[d];
    return worst + coll_s;
}
