/*
 * The layer split's cost model: every live node of a graph costed on every
 * device (node_costs.h), the bytes that cross a cut before each node, the
 * weights each stage would hold, and each device's memory and launch
 * cost; then, for the "units" stages are placed on (a device, or a group
 * tensor-splitting its stage), the seconds and bytes of a stage over a
 * range of nodes.
 * The cut planner (layer_cuts.c) and the chooser (choose.c) read it.  See
 * layer_costs.h.
 */
#include <config.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plan/layer_costs.h"
#include "plan/layer_split.h"
#include "plan/profile.h"
#include "plan/node_costs.h"
#include "plan/share.h"
#include "comm/codec.h"
#include "comm/world.h"

void sn_layer_costs_free(sn_layer_costs *c)
{
    free(c->pre);
    free(c->xfer);
    free(c->xbytes);
    free(c->wpre);
    free(c->limit);
    free(c->launch);
    free(c->keep);
    free(c->obytes);
    free(c->weighted);
    free(c->upre);
    free(c->ulimit);
    free(c->ucross);
    free(c->ufirst);
    free(c->urep);
    free(c->proc);
    free(c->speed);
}

/* The shapes' part of the cost model, from shape_plan (a plan of g). */
static shardnet_status shape_costs(const sn_graph *g,
                                   const sn_plan *shape_plan,
                                   const size_t *order, sn_layer_costs *c)
{
    unsigned char *seen = calloc(g->nvalues + 1, 1);
    if (!seen)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "cost model");
    for (size_t i = 0; i < c->nlive; i++) {
        /* Bytes crossing a cut before node i: values produced before it
         * (or model inputs) that it or the next nodes read. */
        for (size_t k = i; k < c->nlive && k < i + 64; k++) {
            const sn_node *m = &g->nodes[order[k]];
            for (size_t j = 0; j < m->ninputs; j++) {
                int v = m->inputs[j];
                if (v < 0 || (g->values[v].flags & SN_VALUE_CONST))
                    continue;
                int pr = g->values[v].producer;
                const sn_rt *r = sn_plan_value(shape_plan, (size_t)v);
                if ((pr < 0 || pr < (int)order[i]) && r && r->known)
                    c->xbytes[i] += (double)sn_rt_elements(r) *
                                    (double)sn_dtype_size(r->dtype);
            }
        }
    }
    /* Weights: each constant counted at the first live node reading it
     * (a stage holds the weights its nodes read). */
    for (size_t i = 0; i < c->nlive; i++) {
        const sn_node *m = &g->nodes[order[i]];
        double w = 0;
        const sn_rt *o = m->noutputs && m->outputs[0] >= 0
                             ? sn_plan_value(shape_plan, (size_t)m->outputs[0])
                             : NULL;
        if (o && o->known)
            c->obytes[i] = (double)sn_rt_elements(o) *
                           (double)sn_dtype_size(o->dtype);
        for (size_t j = 0; j < m->ninputs; j++) {
            int v = m->inputs[j];
            if (v < 0 || !(g->values[v].flags & SN_VALUE_CONST))
                continue;
            if (g->values[v].rank >= 2)
                c->weighted[i] = 1;
            if (seen[v])
                continue;
            seen[v] = 1;
            const sn_rt *r = sn_plan_value(shape_plan, (size_t)v);
            if (r && r->known)
                w += (double)sn_rt_elements(r) * (double)sn_dtype_size(r->dtype);
        }
        c->wpre[i + 1] = c->wpre[i] + w;
    }
    c->arena = (double)sn_plan_arena_bytes(shape_plan);
    c->apart = c->rows > 1 && sn_rows_apart(g, shape_plan, c->rows, NULL);
    for (size_t i = 0; i < g->noutputs; i++) {
        const sn_rt *r = sn_plan_value(shape_plan, (size_t)g->outputs[i]);
        if (r && r->known)
            c->out_bytes +=
                (double)sn_rt_elements(r) * (double)sn_dtype_size(r->dtype);
    }
    free(seen);
    return SHARDNET_OK;
}

/*
 * Every device's profile, the shapes (a plan on the shapes device: no
 * weight uploaded) and every node's cost on every device from them
 * (node_costs.h).  In a job of several processes this is collective: each
 * device is profiled on its own process and the figures broadcast, and
 * the link between processes is measured once; the shapes and costs are
 * the same on every process.
 */
shardnet_status sn_layer_costs_measure(sn_graph *g, sn_device *const *devs,
                                       size_t ndev, const sn_binding *inputs,
                                       sn_layer_costs *c, char *report,
                                       size_t cap, size_t *len)
{
    size_t *order = malloc((g->nnodes + 1) * sizeof *order);
    double *t = calloc(g->nnodes + 1, sizeof *t);
    sn_weights *w0 = NULL;
    sn_plan *shape_plan = NULL;
    shardnet_status st = SHARDNET_OK;
    int multi = sn_world_processes() > 1;
    memset(c, 0, sizeof *c);
    if (!order || !t) {
        free(order);
        free(t);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "cost model");
    }
    for (size_t i = 0; i < g->nnodes; i++)
        if (!g->nodes[i].dead)
            order[c->nlive++] = i;
    c->ndev = ndev;
    c->xfer = calloc(c->nlive + 1, sizeof *c->xfer);
    c->xbytes = calloc(c->nlive + 1, sizeof *c->xbytes);
    c->wpre = calloc(c->nlive + 1, sizeof *c->wpre);
    c->limit = calloc(ndev + 1, sizeof *c->limit);
    c->launch = calloc(ndev + 1, sizeof *c->launch);
    c->keep = calloc(ndev + 1, sizeof *c->keep);
    c->obytes = calloc(c->nlive + 1, sizeof *c->obytes);
    c->weighted = calloc(c->nlive + 1, 1);
    c->speed = calloc(ndev + 1, sizeof *c->speed);
    c->proc = calloc(ndev + 1, sizeof *c->proc);
    c->pre = calloc(ndev * (c->nlive + 1) + 1, sizeof *c->pre);
    if (!c->xfer || !c->xbytes || !c->wpre || !c->limit || !c->speed ||
        !c->pre || !c->obytes || !c->weighted || !c->launch || !c->proc ||
        !c->keep) {
        st = sn_error(SHARDNET_OUT_OF_MEMORY, "cost model");
        goto out;
    }
    c->bw = 1e30;
    c->rows = sn_batch_rows(g, inputs);
    if ((st = sn_profiles_share(devs, ndev)) != SHARDNET_OK ||
        (st = sn_devices_contention(devs, ndev, 1, c->keep, report, cap,
                                    len)) != SHARDNET_OK ||
        (st = sn_shape_plan(g, inputs, &w0, &shape_plan)) != SHARDNET_OK ||
        (st = shape_costs(g, shape_plan, order, c)) != SHARDNET_OK)
        goto out;
    for (size_t d = 0; d < ndev; d++) {
        const sn_profile *pr = sn_device_profile(devs[d]);
        uint64_t mem = devs[d]->remote ? 0 : sn_device_memory(devs[d]);
        unsigned owner = devs[d]->process;
        c->proc[d] = owner;
        if (multi &&
            (st = sn_world_bcast(owner, &mem, sizeof mem)) != SHARDNET_OK)
            goto out;
        c->limit[d] = mem ? (double)mem : 1e300;
        c->speed[d] = pr->gemm_flops;
        c->launch[d] = pr->launch_s;
        if (sn_profile_staging_bw(pr) < c->bw)
            c->bw = sn_profile_staging_bw(pr);
        double *pre = &c->pre[d * (c->nlive + 1)];
        sn_node_costs(pr, g, shape_plan, t);
        for (size_t i = 0; i < c->nlive; i++)
            pre[i + 1] = pre[i] + t[order[i]];
    }
    for (size_t i = 0; i < c->nlive; i++)
        c->xfer[i] = c->xbytes[i] / c->bw;
    /* The link between processes, when the devices span several. */
    c->link_lat = 0;
    c->link_bw = c->bw;
    for (size_t d = 1; d < ndev; d++)
        if (c->proc[d] != c->proc[0]) {
            st = sn_world_link(&c->link_lat, &c->link_bw);
            /* Values cross in the context's codec: its bytes, and its
             * conversion, as a slower link (comm/codec.h). */
            int k = sn_config_or_env(devs[0]->config)->comm;
            if (st == SHARDNET_OK && k != SN_CODEC_FP32)
                c->link_bw = 1.0 / (sn_codec_wire_ratio((sn_codec)k) /
                                        c->link_bw +
                                    SN_CODEC_S_PER_BYTE);
            break;
        }
out:
    sn_shape_plan_free(w0, shape_plan);
    free(order);
    free(t);
    if (st != SHARDNET_OK)
        sn_layer_costs_free(c);
    return st;
}

/* Estimated seconds of stage s over live nodes [a, b): its nodes' costs
 * on the stage's device. */
double sn_layer_dev_time(const sn_layer_costs *c, size_t d, size_t a, size_t b)
{
    const double *pre = &c->pre[d * (c->nlive + 1)];
    return pre[b] - pre[a];
}

double sn_layer_dev_time_shared(const sn_layer_costs *c, size_t d, size_t a,
                                size_t b)
{
    return sn_layer_dev_time(c, d, a, b) / c->keep[d];
}

/*
 * The units stages go to: groups[u] consecutive devices each (NULL: one
 * device per unit).  A group's time for a node: every device launches its
 * share (the slowest launch counts once), and the rest of the node's
 * cost is shared at the devices' rates (1 / sum of 1 / t); each
 * product with a weight matrix adds half a collective (the Megatron pairs:
 * one per two products) of its output bytes, staged out and back in, with
 * a fixed cost.  A group holds a stage when its share fits the smallest
 * device of the group.
 */
static shardnet_status set_units(sn_layer_costs *c, const size_t *groups,
                                 size_t ngroups, int replicate, size_t m)
{
    size_t nl = c->nlive, n = groups ? ngroups : c->ndev;
    free(c->upre);
    free(c->ulimit);
    free(c->ucross);
    free(c->ufirst);
    free(c->urep);
    c->upre = calloc(n * (nl + 1) + 1, sizeof *c->upre);
    c->ulimit = calloc(n + 1, sizeof *c->ulimit);
    c->ucross = calloc(n + 1, 1);
    c->ufirst = calloc(n + 1, sizeof *c->ufirst);
    c->urep = calloc(n + 1, sizeof *c->urep);
    if (!c->upre || !c->ulimit || !c->ucross || !c->ufirst || !c->urep)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "cost model");
    c->nunits = n;
    c->umicro = m;
    size_t first = 0;
    for (size_t u = 0; u < n; u++) {
        size_t k = groups ? groups[u] : 1;
        double *up = &c->upre[u * (nl + 1)];
        if (!k || first + k > c->ndev)
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "split: the groups name more devices than "
                            "there are");
        c->ulimit[u] = 1e300;
        c->ucross[u] = first > 0 && c->proc[first] != c->proc[first - 1];
        c->ufirst[u] = first;
        c->urep[u] = replicate ? k : 1;
        /* A tensor-split group holds a k-th of the stage per device; each
         * replica holds all of it. */
        double share = replicate ? 1.0 : (double)k;
        for (size_t d = first; d < first + k; d++)
            if (c->limit[d] * share < c->ulimit[u])
                c->ulimit[u] = c->limit[d] * share;
        if (replicate && k > 1) {
            /* (Read by none: sn_layer_stage_time weighs the replicas.) */
            first += k;
            continue;
        }
        for (size_t i = 0; i < nl; i++) {
            double rate = 0, fixed = 0, t;
            for (size_t d = first; d < first + k; d++) {
                double td = sn_layer_dev_time_shared(c, d, i, i + 1);
                double f = k > 1 && c->launch[d] < td ? c->launch[d] : 0;
                if (f > fixed)
                    fixed = f;
                rate += td - f > 0 ? 1.0 / (td - f) : 1e12;
            }
            t = fixed + 1.0 / rate;
            if (k > 1 && c->weighted[i])
                t += 0.5 * (SN_COLL_LATENCY_S + 2.0 * c->obytes[i] / c->bw);
            up[i + 1] = up[i] + t;
        }
        first += k;
    }
    return SHARDNET_OK;
}

shardnet_status sn_layer_set_units(sn_layer_costs *c, const size_t *groups,
                                   size_t ngroups)
{
    return set_units(c, groups, ngroups, 0, 0);
}

/*
 * A replicated unit: replica q takes the micro-batches j with j % R == q,
 * so over a batch it runs its count of the m micro-batches, each at its
 * own speed (the whole stage on a micro-batch: no collective); the unit
 * is as fast as its slowest replica's share.  Each replica holds the
 * stage's weights and its micro-batch's activations: the unit's memory is
 * its smallest device's.
 */
shardnet_status sn_layer_set_replicas(sn_layer_costs *c, const size_t *reps,
                                      size_t nreps, size_t m)
{
    return set_units(c, reps, nreps, 1, m);
}

/* Estimated seconds of a stage on unit u over live nodes [a, b): its
 * nodes' costs, and what enters it across a cut. */
double sn_layer_stage_time(const sn_layer_costs *c, size_t u, size_t a,
                           size_t b)
{
    const double *pre = &c->upre[u * (c->nlive + 1)];
    double in = !a            ? 0.0
                : c->ucross[u] ? c->link_lat + c->xbytes[a] / c->link_bw
                               : c->xfer[a];
    if (c->urep[u] > 1) {
        size_t r = c->urep[u], m = c->umicro ? c->umicro : r, first =
                                                                 c->ufirst[u];
        double worst = 0;
        for (size_t q = 0; q < r; q++) {
            double share = (double)(m / r + (q < m % r)) / (double)m;
            double t = share *
                       (sn_layer_dev_time_shared(c, first + q, a, b) + in);
            if (t > worst)
                worst = t;
        }
        return worst;
    }
    return pre[b] - pre[a] + in;
}

/* Estimated device bytes of stage s over live nodes [a, b) with m
 * micro-batches: the weights its nodes read, and activations at most the
 * whole graph's for one micro-batch. */
double sn_layer_stage_memory(const sn_layer_costs *c, size_t a, size_t b,
                             size_t m)
{
    return c->wpre[b] - c->wpre[a] + c->arena / (double)(m ? m : 1);
}
