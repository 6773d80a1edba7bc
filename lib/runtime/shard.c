/*
 * Tensor split (private): SPMD over the devices of one process.
 *
 * Every value of the model gets a layout (lib/plan/tensor_layout.h):
 *
 *   R            whole on every device (replicated);
 *   S(axis, c)   cut along one axis, device d holding c[d] entries of it;
 *   P            partial sums: the value is the sum over devices.
 *
 * A walk over the sorted live nodes chooses each node's layout from its
 * inputs' (the Megatron pattern falls out: a weight product fed a whole
 * input is cut by output columns, S(last); fed S(last) it is cut by rows
 * and gives P; MindSpore strategies in a plan file can force either, or a
 * cut of the rows).  Where a node cannot take an input's layout, the
 * input is converted:
 *
 *   S -> R   all-gather              P -> S   reduce-scatter
 *   P -> R   all-reduce              R -> S   a local slice (no traffic)
 *
 * and a P value meeting a non-linear op is reduce-scattered along its last
 * axis when that axis is wide enough, so the ops that follow work on a
 * slice (half the traffic of an all-reduce, a share of the work).
 *
 * The result is one graph per device, with the same nodes in the same
 * order: weight shards are constants of their own, reshape targets are the
 * local shapes, and each conversion is a "ShardCollective" node (domain
 * ai.shardnet).  Each device's graph is planned like any other; a plan
 * stops its queue at a collective step and hands it to the devices'
 * collective group (lib/comm/group.h), which runs it by the path that
 * fits: staged, host-shared or between processes.  One host thread
 * per device runs its plan, so every device computes at once.  Sums
 * change order against one device: results agree to rounding (tested
 * within 1e-4 relative), not bit for bit.
 *
 * The layouts' algebra (shares by speed, conversions), the strategies'
 * notation and the cost model are lib/plan's (tensor_layout.h,
 * strategy.h, tensor_costs.h).  The device graphs are written by
 * shard_graph.c (their building blocks), shard_rules.c and
 * shard_products.c (the walk over the nodes and the registry's shard
 * rules) and shard_strategy.c (a plan file's strategies, read and
 * recorded), sharing shard_build.h.  This file creates a split (the
 * graphs, then a plan per device) and gathers the figures of its
 * estimate; shard_run.c runs it and shard_collective.c lowers its
 * collective node, sharing shard_impl.h.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/codec.h"
#include "comm/world.h"
#include "core/config.h"
#include "core/trace.h"
#include "plan/profile.h"
#include "plan/share.h"
#include "plan/tensor_costs.h"
#include "plan/node_costs.h"
#include "runtime/shard_impl.h"

/* --- creation -------------------------------------------------------------- */

/* The collectives' seconds per run: their count and bytes, the devices'
 * profiles and, in a job, the measured link. */
static double collective_time(const sn_tensor_split *t)
{
    const sn_profile *prof[MAXD];
    sn_tensor_collectives c = {.count = t->ncoll,
                               .bytes = t->coll_bytes,
                               .nprocs = t->where->nprocs,
                               .codec = sn_config_or_env(t->dev[0]->config)
                                            ->comm};
    for (size_t d = 0; d < t->n; d++)
        prof[d] = sn_device_profile(t->dev[d]);
    if (c.nprocs > 1 &&
        sn_world_link(&c.link_lat_s, &c.link_bps) != SHARDNET_OK) {
        sn_error_clear();
        c.link_lat_s = SN_LINK_DEFAULT_LATENCY_S;
        c.link_bps = SN_LINK_DEFAULT_BPS;
    }
    return sn_tensor_cost_collectives(prof, t->n, &c);
}

/* The split's estimate (the slowest device plus the collectives), and
 * the first device whose shard overflows its memory (t->overflow).  In a
 * job each process times its own devices, and they share the figures. */
static double estimate(sn_tensor_split *t)
{
    double coll_s = collective_time(t);
    /* Per device: its time, and whether its shard overflows its memory.
     * The devices run at once: each at what it keeps of its speed beside
     * those it shares cores or memory with (plan/share.h). */
    double each[2 * MAXD] = {0}, keep[MAXD];
    if (sn_devices_contention(t->dev, t->n, t->me_owned_out, keep, NULL, 0,
                              NULL) !=
        SHARDNET_OK) {
        sn_error_clear();
        for (size_t d = 0; d < t->n; d++)
            keep[d] = 1;
    }
    for (size_t d = 0; d < t->n; d++) {
        if (!t->plan[d])
            continue; /* another process's: it tells its own below */
        uint64_t have = sn_device_memory(t->dev[d]);
        each[MAXD + d] = have && sn_plan_weight_bytes(t->plan[d]) +
                                         sn_plan_arena_bytes(t->plan[d]) >
                                     have;
        each[d] = sn_tensor_cost_device(sn_device_profile(t->dev[d]),
                                        t->sub[d], t->plan[d]) /
                  keep[d];
    }
    if (t->me_owned_out) {
        unsigned np = sn_world_processes();
        double *all = calloc((size_t)np * 2 * MAXD, sizeof *all);
        if (!all || sn_world_allgather(each, sizeof each, all) != SHARDNET_OK) {
            free(all);
            sn_error_clear();
            return 1e300;
        }
        for (size_t d = 0; d < t->n; d++) {
            const double *from = all + (size_t)t->dev[d]->process * 2 * MAXD;
            each[d] = from[d];
            each[MAXD + d] = from[MAXD + d];
        }
        free(all);
    }
    t->overflow = -1;
    for (size_t d = 0; d < t->n && t->overflow < 0; d++)
        if (each[MAXD + d] != 0)
            t->overflow = (int)d;
    return sn_tensor_cost(each, t->n, coll_s);
}

/* Two to MAXD devices, none listed twice. */
static shardnet_status check_devices(sn_device *const *devs, size_t ndev)
{
    if (ndev < 2 || ndev > MAXD)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "tensor split: 2 to %d devices", MAXD);
    for (size_t d = 0; d < ndev; d++)
        for (size_t e = 0; e < d; e++)
            if (devs[d] == devs[e])
                return sn_error(SHARDNET_INVALID_ARGUMENT,
                                "tensor split: %s is listed twice",
                                devs[d]->info.name);
    return SHARDNET_OK;
}

/* Twin devices (same kind, model, driver and cores) get their mean
 * speed: their profiles differ by measurement noise only, and shares
 * cut by that noise leave the larger share on the critical path. */
static void twin_speeds(sn_device *const *devs, size_t ndev,
                        const double *speed, double *twin)
{
    for (size_t d = 0; d < ndev; d++) {
        double sum = 0;
        size_t k = 0;
        for (size_t e = 0; e < ndev; e++) {
            const shardnet_device_info *a = &devs[d]->info, *c = &devs[e]->info;
            if (a->kind == c->kind && a->compute_units == c->compute_units &&
                !strcmp(a->model, c->model) && !strcmp(a->driver, c->driver)) {
                sum += speed[e];
                k++;
            }
        }
        twin[d] = sum / (double)k;
    }
}

/* The planner's state for model g over ndev devices of these speeds. */
static shardnet_status builder_init(bld *b, sn_graph *g, size_t ndev,
                                    const double *speed,
                                    const sn_strategy *strategies,
                                    size_t nstrategies)
{
    b->g = g;
    b->n = ndev;
    b->speed = speed;
    b->strat = strategies;
    b->nstrat = nstrategies;
    b->vi = calloc(g->nvalues + 1, sizeof *b->vi);
    b->strat_used = calloc(nstrategies + 1, 1);
    b->out_lay = calloc(g->noutputs + 1, sizeof *b->out_lay);
    if (!b->vi || !b->strat_used || !b->out_lay)
        return oom();
    for (size_t i = 0; i < g->nvalues; i++)
        b->vi[i].cnst_r = -1;
    return SHARDNET_OK;
}

/* Host results of the cut outputs, put together from the pieces (and of
 * every output when the split owns them: a job of several processes).
 * *out is set before anything can fail: the caller frees it. */
static shardnet_status host_outputs(const bld *b, int owned_out,
                                    sn_host_tensor **out)
{
    const sn_graph *g = b->g;
    sn_host_tensor *out_full = calloc(g->noutputs + 1, sizeof *out_full);
    *out = out_full;
    if (!out_full)
        return oom();
    for (size_t i = 0; i < g->noutputs; i++) {
        const sn_rt *fs = full(b, g->outputs[i]);
        if (b->out_lay[i].kind != SN_LAY_S && !owned_out)
            continue;
        out_full[i].dtype = fs->dtype;
        out_full[i].rank = fs->rank;
        memcpy(out_full[i].dims, fs->dims, sizeof out_full[i].dims);
        out_full[i].nbytes = sn_rt_elements(fs) * sn_dtype_size(fs->dtype);
        out_full[i].name = g->values[g->outputs[i]].name;
        if (!(out_full[i].data = malloc(out_full[i].nbytes + 1)))
            return oom();
    }
    return SHARDNET_OK;
}

/* The split takes the device graphs and what the planner found. */
static void take_build(sn_tensor_split *t, bld *b)
{
    memcpy(t->sub, b->sub, sizeof t->sub);
    memset(b->sub, 0, sizeof b->sub);
    t->ncoll = b->ncoll;
    t->coll_bytes = b->coll_bytes;
    t->chosen = b->chosen;
    t->nchosen = b->nchosen;
    b->chosen = NULL;
    t->out_lay = b->out_lay;
    b->out_lay = NULL;
}

/* This process plans (and uploads the shards of) its own devices; in a
 * job, every process learns whether every other's planning failed. */
static shardnet_status plan_devices(sn_tensor_split *t,
                                    sn_device *const *devs, size_t ndev,
                                    const sn_binding *inputs, int job)
{
    shardnet_status st = SHARDNET_OK;
    for (size_t d = 0; d < ndev; d++) {
        t->ctx[d].t = t;
        t->ctx[d].rank = d;
        if (devs[d]->remote)
            continue;
        if (st == SHARDNET_OK &&
            ((st = sn_weights_new(t->sub[d], devs[d], &t->w[d])) !=
                 SHARDNET_OK ||
             (st = sn_plan_build(t->sub[d], t->w[d], inputs, sn_shard_ops,
                                 &t->plan[d])) != SHARDNET_OK))
            st = sn_error_prefix(st, "tensor split on %s",
                                 devs[d]->info.name);
        if (st == SHARDNET_OK)
            sn_plan_set_collective(t->plan[d], sn_shard_rendezvous,
                                   &t->ctx[d]);
    }
    /* (Every process must know before any goes on to a collective.) */
    for (size_t k = 0; k < t->where->nprocs && job; k++) {
        unsigned q = t->where->procs[k];
        shardnet_status mine = q == t->where->me ? st : SHARDNET_OK;
        shardnet_status all = sn_world_share_status(
            q, mine, "tensor split: planning the shards");
        if (all != SHARDNET_OK && st == SHARDNET_OK)
            st = all;
    }
    return st;
}

/* What the planner's state still holds (the split took the rest). */
static void builder_free(bld *b)
{
    sn_plan_free(b->shape);
    for (size_t d = 0; d < MAXD; d++)
        sn_graph_free(b->sub[d]);
    free(b->vi);
    free(b->strat_used);
    free(b->desc);
    free(b->chosen);
    free(b->out_lay);
}

shardnet_status sn_tensor_split_create(sn_graph *g, sn_device *const *devs,
                                       size_t ndev, const double *speed,
                                       const sn_binding *inputs,
                                       const sn_strategy *strategies,
                                       size_t nstrategies, sn_device *home,
                                       sn_tensor_split **out)
{
    sn_tensor_split *t = NULL;
    sn_weights *w0 = NULL;
    sn_host_tensor *out_full = NULL;
    double twin[MAXD];
    bld b;
    shardnet_status st;
    *out = NULL;
    memset(&b, 0, sizeof b);
    if ((st = check_devices(devs, ndev)) != SHARDNET_OK)
        return st;
    twin_speeds(devs, ndev, speed, twin);
    /* The whole job takes part when a home device is given. */
    int job = home && sn_world_processes() > 1;
    if ((st = builder_init(&b, g, ndev, twin, strategies, nstrategies)) !=
            SHARDNET_OK ||
        /* What the planner starts from: every value's shape and every
         * node's work, from a plan of the whole graph on the shapes
         * device (nothing uploaded or run). */
        (st = sn_shape_plan(g, inputs, &w0, &b.shape)) !=
            SHARDNET_OK)
        goto fail;
    sn_shard_say(&b, "tensor split over %zu devices:", ndev);
    for (size_t d = 0; d < ndev; d++)
        sn_shard_say(&b, " %s (%.1f GFLOP/s)", devs[d]->info.name,
                     speed[d] * 1e-9);
    sn_shard_say(&b, "\n");
    if ((st = sn_shard_build(&b)) != SHARDNET_OK)
        goto fail;
    int owned_out = job;
    if ((st = host_outputs(&b, owned_out, &out_full)) != SHARDNET_OK)
        goto fail;
    sn_shape_plan_free(w0, b.shape);
    b.shape = NULL;
    w0 = NULL;

    t = calloc(1, sizeof *t);
    if (!t) {
        st = oom();
        goto fail;
    }
    t->g = g;
    t->n = ndev;
    memcpy(t->dev, devs, ndev * sizeof *devs);
    take_build(t, &b);
    t->out = out_full;
    out_full = NULL;
    t->bound = calloc(g->ninputs + 1, sizeof *t->bound);
    if (!t->bound) {
        st = oom();
        goto fail_t;
    }
    for (size_t i = 0; i < g->ninputs; i++) {
        t->bound[i] = inputs[i];
        t->bound[i].data = NULL;
    }
    t->me_owned_out = owned_out;
    /* The context's staged_collectives forces the staged path. */
    if ((st = sn_group_create(
             devs, ndev,
             sn_config_or_env(devs[0]->config)->staged_collectives,
             &t->group)) != SHARDNET_OK)
        goto fail_t;
    t->where = sn_group_where_of(t->group);
    if ((st = plan_devices(t, devs, ndev, inputs, job)) != SHARDNET_OK)
        goto fail_t;
    t->desc = b.desc;
    b.desc = NULL;
    t->estimate = estimate(t);
    /* A thread for each local device but the first (the caller's). */
    if ((st = sn_crew_start(t->dev, t->where->local, t->where->nlocal,
                            sn_shard_run_rank, t, &t->crew)) != SHARDNET_OK) {
        st = sn_error_prefix(st, "tensor split");
        goto fail_t;
    }
    builder_free(&b);
    *out = t;
    return SHARDNET_OK;
fail_t:
    t->desc = t->desc ? t->desc : b.desc;
    b.desc = NULL;
    sn_tensor_split_free(t);
fail:
    builder_free(&b);
    sn_weights_free(w0);
    for (size_t i = 0; out_full && i < g->noutputs; i++)
        free(out_full[i].data);
    free(out_full);
    return st;
}

void sn_tensor_split_free(sn_tensor_split *t)
{
    if (!t)
        return;
    sn_crew_stop(t->crew);
    for (size_t d = 0; d < t->n; d++)
        if (t->dev[d])
            sn_synchronize(t->dev[d]);
    sn_group_free(t->group);
    for (size_t d = 0; d < t->n; d++) {
        sn_plan_free(t->plan[d]);
        sn_weights_free(t->w[d]);
        sn_graph_free(t->sub[d]);
    }
    free(t->bound);
    for (size_t i = 0; t->out && t->out_lay && i < t->g->noutputs; i++)
        if (t->out_lay[i].kind == SN_LAY_S || t->me_owned_out)
            free(t->out[i].data);
    free(t->out);
    free(t->out_lay);
    free(t->out_wire);
    free(t->desc);
    free(t->chosen);
    free(t);
}

void sn_tensor_split_describe(const sn_tensor_split *t, char *buf, size_t cap)
{
    size_t len = strlen(buf);
    if (len >= cap)
        return;
    len += (size_t)snprintf(buf + len, cap - len, "%s", t->desc ? t->desc : "");
    for (size_t d = 0; d < t->n && len < cap; d++)
        len += (size_t)(t->plan[d]
                            ? snprintf(buf + len, cap - len,
                                       "  %s: weights %.2f MB, activations "
                                       "%.2f MB\n",
                                       t->dev[d]->info.name,
                                       sn_plan_weight_bytes(t->plan[d]) / 1e6,
                                       sn_plan_arena_bytes(t->plan[d]) / 1e6)
                            : snprintf(buf + len, cap - len,
                                       "  %s: on process %u\n",
                                       t->dev[d]->info.name,
                                       t->dev[d]->process));
    if (len < cap)
        len += (size_t)snprintf(buf + len, cap - len,
                                "  per run: %zu collectives moving %.2f MB\n",
                                t->ncoll, t->coll_bytes / 1e6);
    int codec = sn_config_or_env(t->dev[0]->config)->comm;
    if (t->where->nprocs > 1 && len < cap)
        snprintf(buf + len, cap - len,
                 "  between processes: %s (--comm), at most %.2f MB per "
                 "run%s\n",
                 sn_codec_name((sn_codec)codec),
                 t->coll_bytes * sn_codec_wire_ratio((sn_codec)codec) / 1e6,
                 codec ? ", less where values are mostly zeros" : "");
}

size_t sn_tensor_split_strategies(const sn_tensor_split *t,
                                  const sn_strategy **out)
{
    *out = t->chosen;
    return t->nchosen;
}

const char *sn_tensor_split_overflow(const sn_tensor_split *t)
{
    return t->overflow >= 0 ? t->dev[t->overflow]->info.name : NULL;
}

double sn_tensor_split_estimate(const sn_tensor_split *t)
{
    return t->estimate;
}

size_t sn_tensor_split_collectives(const sn_tensor_split *t, double *bytes)
{
    if (bytes)
        *bytes = t->coll_bytes;
    return t->ncoll;
}
