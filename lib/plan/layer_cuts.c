/*
 * The layer split's cuts: a dynamic programme over the live nodes
 * (PipeDream's partitioner for a chain of heterogeneous devices in the
 * given order) that minimises the slowest stage of the cost model
 * (layer_costs.h), each stage fitting its unit's memory.  See
 * layer_split.h.
 */
#include <config.h>

#include <stdlib.h>

#include "plan/layer_costs.h"
#include "plan/layer_split.h"

/* sn_layer_stage_time, or "never" when the stage does not fit its device. */
static double stage_cost(const sn_layer_costs *c, size_t s, size_t a, size_t b,
                         size_t m)
{
    if (sn_layer_stage_memory(c, a, b, m) > c->ulimit[s])
        return 1e300;
    return sn_layer_stage_time(c, s, a, b);
}

/*
 * Cuts minimising the slowest stage.  best[s][i]: the smallest possible
 * bottleneck when stages 0..s take live nodes [0, i).
 */
shardnet_status sn_layer_plan_cuts(const sn_layer_costs *c, size_t ns, size_t m,
                                   size_t *start)
{
    size_t nl = c->nlive;
    double *best = malloc(ns * (nl + 1) * sizeof *best);
    size_t *arg = malloc(ns * (nl + 1) * sizeof *arg);
    if (!best || !arg) {
        free(best);
        free(arg);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "planning the layer split");
    }
    for (size_t k = 0; k < ns * (nl + 1); k++) {
        best[k] = 1e300;
        arg[k] = 0;
    }
    for (size_t s = 0; s < ns; s++)
        for (size_t i = 0; i <= nl; i++) {
            if (i < s + 1)
                continue;
            if (s == 0) {
                best[i] = stage_cost(c, 0, 0, i, m);
                arg[i] = 0;
                continue;
            }
            for (size_t j = s; j < i; j++) {
                double prev = best[(s - 1) * (nl + 1) + j];
                double t = stage_cost(c, s, j, i, m);
                double v = prev > t ? prev : t;
                if (v < best[s * (nl + 1) + i]) {
                    best[s * (nl + 1) + i] = v;
                    arg[s * (nl + 1) + i] = j;
                }
            }
        }
    size_t i = nl;
    if (best[(ns - 1) * (nl + 1) + nl] >= 1e300) {
        free(best);
        free(arg);
        return sn_error(SHARDNET_OUT_OF_MEMORY,
                        "layer split: no cut fits the devices' memory");
    }
    for (size_t s = ns; s-- > 0;) {
        start[s] = arg[s * (nl + 1) + i];
        i = start[s];
    }
    free(best);
    free(arg);
    return SHARDNET_OK;
}

shardnet_status sn_layer_cuts(sn_graph *g, sn_device *const *devs, size_t ndev,
                              const size_t *groups, size_t ngroups,
                              int replicate, const sn_binding *inputs,
                              size_t nstages,
                              size_t *start, double *row_bytes)
{
    sn_layer_costs cm;
    shardnet_status st;
    if ((st = sn_layer_costs_measure(g, devs, ndev, inputs, &cm, NULL, 0,
                                      NULL)) !=
        SHARDNET_OK)
        return st;
    /* (The runtime's micro-batches when none are asked for: one per
     * device running a stage at least.) */
    size_t m = sn_pipeline_default_micro(cm.rows, replicate ? ndev : nstages);
    st = replicate ? sn_layer_set_replicas(&cm, groups, ngroups, m)
                   : sn_layer_set_units(&cm, groups, ngroups);
    if (st == SHARDNET_OK)
        st = sn_layer_plan_cuts(&cm, nstages, m, start);
    for (size_t i = 0; i < cm.nlive; i++)
        if (cm.rows && cm.obytes[i] / (double)cm.rows > *row_bytes)
            *row_bytes = cm.obytes[i] / (double)cm.rows;
    sn_layer_costs_free(&cm);
    return st;
}
