/* Layer split: its stages, built at the cuts of its planner
 * (lib/plan/layer_split.h): each stage's graph and device (or a hybrid
 * stage's group, or a replicated stage's replicas), who reads whose
 * values, and what a pipeline holds.  pipeline_run.c runs them.  See
 * pipeline.h. */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/pipeline_impl.h"
#include "plan/layer_split.h"
#include "comm/world.h"

/* --- stage graphs -------------------------------------------------------- */

/* Add parent value v to sub (metadata; constant data is borrowed). */
static int add_value(sn_graph *sub, const sn_graph *g, int v, int *map)
{
    const sn_value *pv = &g->values[v];
    int s = sn_graph_add_value(sub, pv->name);
    if (s < 0)
        return 0;
    sn_value *sv = &sub->values[s];
    sv->dtype = pv->dtype;
    sv->rank = pv->rank;
    memcpy(sv->dims, pv->dims, sizeof sv->dims);
    if (pv->flags & SN_VALUE_CONST) {
        sv->flags |= pv->flags & (SN_VALUE_CONST | SN_VALUE_MAPPED);
        sv->data = pv->data;
        sv->nbytes = pv->nbytes;
    }
    map[v] = s;
    return 1;
}

/*
 * The graph of live nodes order[a..b): its inputs are what it reads and
 * does not produce (constants excepted); its outputs what it produces and
 * later nodes or the model's outputs read.
 */
static shardnet_status build_stage(const sn_graph *g, const size_t *order,
                                   size_t nlive, size_t a, size_t b,
                                   stage *st)
{
    int *map = malloc(g->nvalues * sizeof *map);
    unsigned char *mine = calloc(g->nnodes + 1, 1);
    unsigned char *later = calloc(g->nvalues + 1, 1);
    sn_graph *sub = sn_graph_new();
    size_t nin = 0, nout = 0;
    shardnet_status st_ = SHARDNET_OK;

    if (!map || !mine || !later || !sub)
        goto oom;
    for (size_t i = 0; i < g->nvalues; i++)
        map[i] = -1;
    for (size_t i = a; i < b; i++)
        mine[order[i]] = 1;
    for (size_t i = b; i < nlive; i++) {
        const sn_node *n = &g->nodes[order[i]];
        for (size_t j = 0; j < n->ninputs; j++)
            if (n->inputs[j] >= 0)
                later[n->inputs[j]] = 1;
    }
    for (size_t i = 0; i < g->noutputs; i++)
        later[g->outputs[i]] = 1;
    sub->opset = g->opset;
    sub->ir_version = g->ir_version;
    sub->inputs = malloc((g->nvalues + 1) * sizeof *sub->inputs);
    sub->outputs = malloc((g->nvalues + 1) * sizeof *sub->outputs);
    st->in_parent = malloc((g->nvalues + 1) * sizeof *st->in_parent);
    st->out_parent = malloc((g->nvalues + 1) * sizeof *st->out_parent);
    if (!sub->inputs || !sub->outputs || !st->in_parent || !st->out_parent)
        goto oom;

    /* Values read from outside: constants come along, the rest are inputs. */
    for (size_t i = a; i < b; i++) {
        const sn_node *n = &g->nodes[order[i]];
        for (size_t j = 0; j < n->ninputs + n->nattrs; j++) {
            int v = j < n->ninputs ? n->inputs[j]
                                   : n->attrs[j - n->ninputs].tensor;
            if (v < 0 || map[v] >= 0)
                continue;
            int p = g->values[v].producer;
            if (!(g->values[v].flags & SN_VALUE_CONST) && p >= 0 && mine[p])
                continue; /* produced here: added with its node */
            if (!add_value(sub, g, v, map))
                goto oom;
            if (!(g->values[v].flags & SN_VALUE_CONST)) {
                sub->values[map[v]].flags |= SN_VALUE_INPUT;
                sub->inputs[nin] = map[v];
                st->in_parent[nin++] = v;
            }
        }
        for (size_t j = 0; j < n->noutputs; j++) {
            int v = n->outputs[j];
            if (v < 0 || map[v] >= 0)
                continue;
            if (!add_value(sub, g, v, map))
                goto oom;
            if (later[v]) {
                sub->values[map[v]].flags |= SN_VALUE_OUTPUT;
                sub->outputs[nout] = map[v];
                st->out_parent[nout++] = v;
            }
        }
    }
    sub->ninputs = nin;
    sub->noutputs = nout;

    for (size_t i = a; i < b; i++) {
        const sn_node *n = &g->nodes[order[i]];
        /* a control node reads every outside value of its subgraphs */
        int *in = malloc((n->ninputs + n->noutputs + 1) * sizeof *in);
        int *out = in + n->ninputs;
        if (!in)
            goto oom;
        for (size_t j = 0; j < n->ninputs; j++)
            in[j] = n->inputs[j] >= 0 ? map[n->inputs[j]] : -1;
        for (size_t j = 0; j < n->noutputs; j++)
            out[j] = n->outputs[j] >= 0 ? map[n->outputs[j]] : -1;
        int k = sn_graph_add_node(sub, n->name, n->op_type, n->domain, in,
                                  n->ninputs, out, n->noutputs);
        free(in);
        if (k < 0)
            goto oom;
        sn_node *sn = &sub->nodes[k];
        if (n->nattrs) {
            sn->attrs = calloc(n->nattrs, sizeof *sn->attrs);
            if (!sn->attrs)
                goto oom;
            for (size_t j = 0; j < n->nattrs; j++) {
                sn->nattrs = j + 1;
                if (!sn_attr_copy(&sn->attrs[j], &n->attrs[j], map))
                    goto oom;
            }
        }
    }
    if ((st_ = sn_graph_sort(sub)) != SHARDNET_OK)
        goto fail;
    st->g = sub;
    free(map);
    free(mine);
    free(later);
    return SHARDNET_OK;
oom:
    st_ = sn_error(SHARDNET_OUT_OF_MEMORY, "building a pipeline stage");
fail:
    sn_graph_free(sub);
    free(map);
    free(mine);
    free(later);
    return st_;
}

/* Add v to a sorted list without repeats (room for nvalues). */
static void add_sorted(int *list, size_t *n, int v)
{
    size_t k = 0;
    while (k < *n && list[k] < v)
        k++;
    if (k < *n && list[k] == v)
        return;
    memmove(list + k + 1, list + k, (*n - k) * sizeof *list);
    list[k] = v;
    (*n)++;
}

/* Who reads whose values: each value's producing stage, each stage's
 * earlier stages it reads from, and across processes what each local
 * stage sends where and what each proxy receives (both sides compute the
 * same sorted lists, so messages match in order). */
static shardnet_status link_stages(sn_pipeline *p)
{
    const sn_graph *g = p->g;
    if (!(p->prod = malloc((g->nvalues + 1) * sizeof *p->prod)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "pipeline");
    for (size_t v = 0; v < g->nvalues; v++)
        p->prod[v] = -1;
    for (size_t s = 0; s < p->nstages; s++)
        for (size_t i = 0; i < p->st[s].g->noutputs; i++)
            p->prod[p->st[s].out_parent[i]] = (int)s;
    for (size_t s = 0; s < p->nstages; s++) {
        stage *st = &p->st[s];
        st->dep = calloc(p->nstages + 1, 1);
        st->send = calloc(p->nproc, sizeof *st->send);
        st->nsend = calloc(p->nproc, sizeof *st->nsend);
        st->recv = malloc((g->nvalues + 1) * sizeof *st->recv);
        if (!st->dep || !st->send || !st->nsend || !st->recv)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "pipeline");
        for (size_t i = 0; i < st->g->ninputs; i++) {
            int t = p->prod[st->in_parent[i]];
            if (t >= 0 && (size_t)t < s)
                st->dep[t] = 1;
        }
    }
    for (size_t t = 0; t < p->nstages; t++) {
        stage *reader = &p->st[t];
        for (size_t i = 0; i < reader->g->ninputs; i++) {
            int v = reader->in_parent[i], s = p->prod[v];
            if (s < 0)
                continue;
            stage *maker = &p->st[s];
            if (maker->owner == reader->owner)
                continue;
            /* maker sends v to reader's process; there a proxy gets it. */
            if (maker->local) {
                unsigned q = reader->owner;
                if (!maker->send[q] &&
                    !(maker->send[q] =
                          malloc((g->nvalues + 1) * sizeof(int))))
                    return sn_error(SHARDNET_OUT_OF_MEMORY, "pipeline");
                add_sorted(maker->send[q], &maker->nsend[q], v);
            }
            if (reader->local) {
                maker->proxy = 1;
                add_sorted(maker->recv, &maker->nrecv, v);
            }
        }
    }
    return SHARDNET_OK;
}

static shardnet_status create(sn_graph *g, sn_device *const *devs,
                              size_t ndev, const size_t *groups,
                              size_t ngroups, int replicate,
                              const sn_binding *inputs, const size_t *cuts,
                              const sn_strategy *strat, size_t nstrat,
                              sn_pipeline **out);

shardnet_status sn_pipeline_create(sn_graph *g, sn_device *const *devs,
                                   size_t ndev, const sn_binding *inputs,
                                   const size_t *cuts, sn_pipeline **out)
{
    return create(g, devs, ndev, NULL, 0, 0, inputs, cuts, NULL, 0, out);
}

shardnet_status sn_pipeline_create_groups(sn_graph *g, sn_device *const *devs,
                                          size_t ndev, const size_t *groups,
                                          size_t ngroups,
                                          const sn_binding *inputs,
                                          const size_t *cuts,
                                          const sn_strategy *strat,
                                          size_t nstrat, sn_pipeline **out)
{
    return create(g, devs, ndev, groups, ngroups, 0, inputs, cuts, strat,
                  nstrat, out);
}

shardnet_status sn_pipeline_create_replicated(sn_graph *g,
                                              sn_device *const *devs,
                                              size_t ndev, const size_t *reps,
                                              size_t nreps,
                                              const sn_binding *inputs,
                                              const size_t *cuts,
                                              sn_pipeline **out)
{
    if (!reps)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "replicated split: no replicas per stage");
    return create(g, devs, ndev, reps, nreps, 1, inputs, cuts, NULL, 0, out);
}

/* A replicated stage's values stay in its process: its replicas finish
 * items out of order, and a process receiving them takes them in order
 * (both sides find the same answer). */
static shardnet_status check_replicas(const sn_pipeline *p)
{
    for (size_t t = 0; t < p->nstages; t++) {
        const stage *reader = &p->st[t];
        for (size_t i = 0; i < reader->g->ninputs; i++) {
            int s = p->prod[reader->in_parent[i]];
            if (s < 0 || p->st[s].nrep < 2 ||
                p->st[s].owner == reader->owner)
                continue;
            return sn_error(SHARDNET_UNSUPPORTED,
                            "replicated split: stage %zu (on %zu replicas "
                            "of process %u) feeds stage %zu on process %u; "
                            "a replicated stage's values stay in its "
                            "process",
                            (size_t)s, p->st[s].nrep, p->st[s].owner, t,
                            reader->owner);
        }
    }
    return SHARDNET_OK;
}

/* Stage s's node named `name`, or NULL. */
static const sn_node *stage_node(const stage *sg, const char *name)
{
    for (size_t i = 0; i < sg->g->nnodes; i++)
        if (!sg->g->nodes[i].dead && !strcmp(sg->g->nodes[i].name, name))
            return &sg->g->nodes[i];
    return NULL;
}

/* A plan file's strategies go to the group stages whose nodes they name;
 * a strategy for a node of a one-device stage, or of none, is refused. */
static shardnet_status give_strategies(sn_pipeline *p,
                                       const sn_strategy *strat,
                                       size_t nstrat)
{
    for (size_t i = 0; i < nstrat; i++) {
        size_t s = 0;
        while (s < p->nstages && !stage_node(&p->st[s], strat[i].node))
            s++;
        if (s == p->nstages)
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "hybrid split: strategy for node '%s': no such "
                            "node (or it was folded away)",
                            strat[i].node);
        stage *sg = &p->st[s];
        if (sg->ngrp < 2)
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "hybrid split: strategy for node '%s', which "
                            "stage %zu runs on one device (%s); strategies "
                            "are for the nodes of stages on several",
                            strat[i].node, s, sg->dev->info.name);
        sn_strategy *more =
            realloc(sg->strat, (sg->nstrat + 1) * sizeof *more);
        if (!more)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "hybrid split");
        sg->strat = more;
        sg->strat[sg->nstrat++] = strat[i];
    }
    return SHARDNET_OK;
}

/* groups: devices per stage (NULL: one each), a stage's devices
 * tensor-splitting it (strat: a plan file's strategies for their nodes),
 * or, replicate, each running it whole on micro-batches of its own. */
static shardnet_status create(sn_graph *g, sn_device *const *devs,
                              size_t ndev, const size_t *groups,
                              size_t ngroups, int replicate,
                              const sn_binding *inputs, const size_t *cuts,
                              const sn_strategy *strat, size_t nstrat,
                              sn_pipeline **out)
{
    const char *what = replicate ? "replicated split" : "hybrid split";
    sn_pipeline *p = calloc(1, sizeof *p);
    size_t *order = NULL;
    shardnet_status st = SHARDNET_OK;
    *out = NULL;
    if (!p)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "pipeline");
    p->g = g;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    pthread_cond_init(&p->caller, NULL);
    order = malloc((g->nnodes + 1) * sizeof *order);
    if (!order)
        goto oom;
    for (size_t i = 0; i < g->nnodes; i++)
        if (!g->nodes[i].dead)
            order[p->nlive++] = i;
    if (groups) {
        size_t total = 0;
        for (size_t u = 0; u < ngroups; u++) {
            if (!groups[u] || groups[u] > SN_COLL_MAX) {
                st = sn_error(SHARDNET_INVALID_ARGUMENT,
                              "%s: stage %zu has %zu devices (1 to %d)",
                              what, u, groups[u], SN_COLL_MAX);
                goto fail;
            }
            total += groups[u];
        }
        if (total != ndev) {
            st = sn_error(SHARDNET_INVALID_ARGUMENT,
                          "%s: the stages have %zu devices, the list %zu",
                          what, total, ndev);
            goto fail;
        }
        p->nstages = ngroups < p->nlive ? ngroups : p->nlive;
        if (p->nstages < ngroups) {
            st = sn_error(SHARDNET_INVALID_ARGUMENT,
                          "%s: %zu stages for %zu nodes", what, ngroups,
                          p->nlive);
            goto fail;
        }
    } else {
        p->nstages = ndev < p->nlive ? ndev : p->nlive;
    }
    if (p->nstages == 0) {
        st = sn_error(SHARDNET_INVALID_ARGUMENT,
                      "layer split: no devices, or a model without nodes");
        goto fail;
    }
    p->st = calloc(p->nstages, sizeof *p->st);
    p->start = calloc(p->nstages + 1, sizeof *p->start);
    if (!p->st || !p->start)
        goto oom;

    if (cuts) {
        p->start[0] = 0;
        for (size_t s = 1; s < p->nstages; s++) {
            p->start[s] = cuts[s - 1];
            if (p->start[s] <= p->start[s - 1] || p->start[s] >= p->nlive) {
                st = sn_error(SHARDNET_INVALID_ARGUMENT,
                              "layer split: cut %zu at node %zu is out of "
                              "order or range (%zu nodes)",
                              s, cuts[s - 1], p->nlive);
                goto fail;
            }
        }
    } else if ((st = sn_layer_cuts(g, devs, groups ? ndev : p->nstages,
                                   groups, ngroups, replicate, inputs,
                                   p->nstages, p->start, &p->row_bytes)) !=
               SHARDNET_OK) {
        goto fail;
    }
    p->start[p->nstages] = p->nlive;
    p->net = sn_world_transport();
    p->me = p->net->process;
    p->nproc = p->net->processes;
    size_t nworkers = 0;
    for (size_t s = 0, first = 0; s < p->nstages; s++) {
        stage *sg = &p->st[s];
        size_t k = groups ? groups[s] : 1;
        sg->ngrp = replicate ? 1 : k;
        sg->nrep = replicate ? k : 1;
        memcpy(sg->grp, devs + first, sg->ngrp * sizeof *devs);
        sg->dev = devs[first];
        sg->owner = sg->dev->process;
        sg->local = !sg->dev->remote;
        for (size_t q = 0; q < sg->nrep; q++) {
            sg->rep[q].st = sg;
            sg->rep[q].q = q;
            sg->rep[q].dev = devs[first + q];
        }
        for (size_t d = first + 1; d < first + k; d++)
            if (devs[d]->process != sg->owner) {
                st = sn_error(SHARDNET_UNSUPPORTED,
                              "%s: stage %zu's devices span processes (%s "
                              "and %s); %s stays inside one process",
                              what, s, sg->dev->info.name,
                              devs[d]->info.name,
                              replicate ? "a stage's replicas"
                                        : "a tensor split");
                goto fail;
            }
        first += k;
        nworkers += sg->nrep;
        if ((st = build_stage(g, order, p->nlive, p->start[s],
                              p->start[s + 1], sg)) != SHARDNET_OK)
            goto fail;
        /* A group's weights are its tensor split's shards, made with it;
         * another process's stage has none here; each replica holds the
         * whole stage's. */
        for (size_t q = 0; sg->ngrp == 1 && sg->local && q < sg->nrep; q++)
            if ((st = sn_weights_new(sg->g, sg->rep[q].dev, &sg->rep[q].w)) !=
                SHARDNET_OK)
                goto fail;
    }
    p->nworkers = nworkers;
    p->val_dev = sn_staging_owner(devs, ndev);
    if ((st = link_stages(p)) != SHARDNET_OK ||
        (st = check_replicas(p)) != SHARDNET_OK ||
        (st = give_strategies(p, strat, nstrat)) != SHARDNET_OK)
        goto fail;
    p->outputs = calloc(g->noutputs + 1, sizeof *p->outputs);
    p->out_cap = calloc(g->noutputs + 1, sizeof *p->out_cap);
    if (!p->outputs || !p->out_cap)
        goto oom;
    free(order);
    *out = p;
    return SHARDNET_OK;
oom:
    st = sn_error(SHARDNET_OUT_OF_MEMORY, "pipeline");
fail:
    free(order);
    sn_pipeline_free(p);
    return st;
}

void sn_pipeline_free(sn_pipeline *p)
{
    if (!p)
        return;
    sn_pipeline_stop_stages(p);
    for (size_t j = 0; j < p->nvals; j++) {
        for (size_t v = 0; v < p->g->nvalues; v++)
            sn_staging_free(p->vals[j][v].data);
        free(p->vals[j]);
        free(p->cap[j]);
    }
    free(p->vals);
    free(p->cap);
    free(p->done);
    free(p->item);
    free(p->bin[0]);
    free(p->bin[1]);
    free(p->prod);
    free(p->out_cap);
    free(p->out_wire);
    for (size_t s = 0; p->st && s < p->nstages; s++) {
        for (int k = 0; k < STAGE_PLANS; k++) {
            sn_tensor_split_free(p->st[s].split[k].ts);
            free(p->st[s].split[k].search);
        }
        free(p->st[s].strat);
        for (size_t q = 0; q < p->st[s].nrep; q++) {
            for (int k = 0; k < STAGE_PLANS; k++)
                sn_plan_free(p->st[s].rep[q].plans[k]);
            sn_weights_free(p->st[s].rep[q].w);
        }
        sn_graph_free(p->st[s].g);
        free(p->st[s].in_parent);
        free(p->st[s].out_parent);
        free(p->st[s].dep);
        for (unsigned q = 0; p->st[s].send && q < p->nproc; q++)
            free(p->st[s].send[q]);
        free(p->st[s].send);
        free(p->st[s].nsend);
        free(p->st[s].recv);
        for (size_t k = 0; k < p->st[s].nenc; k++)
            free(p->st[s].enc[k]);
        free(p->st[s].enc);
        free(p->st[s].enc_cap);
        free(p->st[s].wire);
    }
    free(p->st);
    free(p->start);
    for (size_t i = 0; p->outputs && i < p->g->noutputs; i++)
        free(p->outputs[i].data);
    free(p->outputs);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    pthread_cond_destroy(&p->caller);
    free(p);
}

size_t sn_pipeline_micro(const sn_pipeline *p)
{
    return p->micro;
}

size_t sn_pipeline_stages(const sn_pipeline *p)
{
    return p->nstages;
}

size_t sn_pipeline_replicas(const sn_pipeline *p, size_t s)
{
    return s < p->nstages ? p->st[s].nrep : 0;
}

size_t sn_pipeline_stage_strategies(const sn_pipeline *p, size_t s,
                                    const sn_strategy **out)
{
    *out = NULL;
    return s < p->nstages && p->st[s].split[0].ts
               ? sn_tensor_split_strategies(p->st[s].split[0].ts, out)
               : 0;
}

void sn_pipeline_describe_groups(const sn_pipeline *p, char *buf, size_t cap)
{
    size_t len = strlen(buf);
    for (size_t s = 0; s < p->nstages && len < cap; s++) {
        const stage *sg = &p->st[s];
        const stage_split *last = &sg->split[0];
        if (sg->ngrp < 2 || !sg->local)
            continue;
        len += (size_t)snprintf(buf + len, cap - len, "hybrid stage %zu on",
                                s);
        for (size_t d = 0; d < sg->ngrp && len < cap; d++)
            len += (size_t)snprintf(buf + len, cap - len, "%s%s",
                                    d ? "+" : " ", sg->grp[d]->info.name);
        if (len < cap && !last->ts)
            len += (size_t)snprintf(buf + len, cap - len,
                                    ": its tensor split is laid out at the "
                                    "first run, for the micro-batches' "
                                    "shape\n");
        else if (len < cap)
            len += (size_t)snprintf(buf + len, cap - len,
                                    ", its last micro-batches' tensor "
                                    "split:\n%s",
                                    last->search ? last->search : "");
        if (last->ts && len < cap) {
            sn_tensor_split_describe(last->ts, buf, cap);
            len = strlen(buf);
        }
    }
}

size_t sn_pipeline_stage_start(const sn_pipeline *p, size_t s)
{
    return s <= p->nstages ? p->start[s] : p->nlive;
}

size_t sn_pipeline_live_nodes(const sn_pipeline *p)
{
    return p->nlive;
}

const sn_host_tensor *sn_pipeline_output(const sn_pipeline *p, size_t i)
{
    return i < p->g->noutputs ? &p->outputs[i] : NULL;
}
