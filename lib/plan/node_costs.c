/*
 * Node costs: a node's seconds on a device from its shapes and the
 * device's profile (see node_costs.h).
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>

#include "ops/registry.h"
#include "plan/node_costs.h"

shardnet_status sn_shape_plan(sn_graph *g, const sn_binding *inputs,
                              sn_weights **w, sn_plan **out)
{
    shardnet_status st;
    *out = NULL;
    if ((st = sn_weights_new(g, sn_shapes_device(), w)) != SHARDNET_OK)
        return st;
    return sn_plan_build(g, *w, inputs, sn_op_find, out);
}

void sn_shape_plan_free(sn_weights *w, sn_plan *p)
{
    sn_plan_free(p);
    sn_weights_free(w);
}

/* Bytes of value v a node reads or writes: a constant's as stored, else
 * its shape's in its type (0 when the plan does not know it). */
static double value_bytes(const sn_graph *g, const sn_plan *p, int v)
{
    if (v < 0 || (size_t)v >= g->nvalues)
        return 0;
    if (g->values[v].flags & SN_VALUE_CONST)
        return (double)g->values[v].nbytes;
    const sn_rt *r = sn_plan_value(p, (size_t)v);
    return r && r->known ? (double)sn_rt_elements(r) *
                               (double)sn_dtype_size(r->dtype)
                         : 0;
}

/* Flops/s of a product of `flops`: the profile's 64^3 figure below that
 * size, its 384^3 one above, between them log-linear in the size. */
static double product_speed(const sn_profile *pr, double flops)
{
    const double lo = 2.0 * 64 * 64 * 64, hi = 2.0 * 384 * 384 * 384;
    if (flops <= lo)
        return pr->gemm_small_flops;
    if (flops >= hi)
        return pr->gemm_flops;
    double f = log(flops / lo) / log(hi / lo);
    return pr->gemm_small_flops * pow(pr->gemm_flops / pr->gemm_small_flops, f);
}

void sn_node_costs(const sn_profile *pr, const sn_graph *g, const sn_plan *p,
                   double *seconds)
{
    size_t *launches = malloc((g->nnodes + 1) * sizeof *launches);
    if (launches)
        sn_plan_launches(p, launches);
    for (size_t i = 0; i < g->nnodes; i++) {
        const sn_node *n = &g->nodes[i];
        seconds[i] = 0;
        if (n->dead)
            continue;
        double bytes = 0;
        for (size_t j = 0; j < n->ninputs; j++)
            bytes += value_bytes(g, p, n->inputs[j]);
        for (size_t j = 0; j < n->noutputs; j++)
            bytes += value_bytes(g, p, n->outputs[j]);
        double s = bytes / pr->read_bps;
        if (sn_node_is_product(n)) {
            double work = sn_node_work(g, p, n);
            double c = work > 0 ? work / product_speed(pr, work) : 0;
            if (c > s)
                s = c;
        }
        seconds[i] = s + pr->launch_s * (double)(launches ? launches[i] : 1);
    }
    free(launches);
}
