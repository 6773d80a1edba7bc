/*
 * The tensor split's cost model (see tensor_costs.h): a device's time from
 * its nodes, the collectives' time, and the split's estimate.  The
 * runtime (lib/runtime/shard.c) gathers the figures and keeps the result;
 * the split chooser (choose.c) weighs it against the other splits.
 */
#include <config.h>

#include "plan/tensor_costs.h"

void sn_tensor_cost_node(sn_tensor_device_cost *c, const sn_profile *p,
                         double work, int product, double whole_s,
                         double whole_work)
{
    if (whole_work > 0) {
        c->work_s += whole_s * work / whole_work;
        return;
    }
    if (product)
        c->work_s += work / p->gemm_flops;
    else
        c->work_s += 8.0 * work / sn_profile_staging_bw(p);
    c->launches += 1;
}

double sn_tensor_cost_device(const sn_tensor_device_cost *c,
                             const sn_profile *p)
{
    return c->work_s + p->launch_s * c->launches;
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
    if (c->nprocs > 1)
        s += (double)c->count * 2.0 * c->link_lat_s +
             2.0 * c->bytes * (double)(c->nprocs - 1) / c->link_bps;
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
