/*
 * The tensor split's run-time side: one host thread per local device runs
 * its plan (a crew, crew.h: the caller drives the first), a plan stops at each collective
 * and hands it to the devices' group, and the outputs are put together on
 * the host (cut ones from every device's piece) and, in a job of several
 * processes, shared with every process.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/world.h"
#include "core/trace.h"
#include "runtime/shard_impl.h"

/* After a run: every process gets every output.  A whole output comes
 * from the root (it has a device, so the result); a cut one is put
 * together at the root from every owning process's pieces; then the root
 * broadcasts each to all processes (devices or not). */
static shardnet_status share_outputs(sn_tensor_split *t)
{
    shardnet_status st = SHARDNET_OK;
    unsigned root = t->where->procs[0];
    for (size_t i = 0; i < t->g->noutputs && st == SHARDNET_OK; i++) {
        sn_host_tensor *o = &t->out[i];
        const sn_layout *l = &t->out_lay[i];
        if (l->kind == SN_LAY_S) {
            /* Per index of the axes before the cut one: each rank's rows
             * of `inner` bytes, gathered. */
            size_t es = sn_dtype_size(o->dtype);
            size_t outer = prod(o->dims, 0, l->axis),
                   inner = prod(o->dims, l->axis + 1, o->rank) * es;
            size_t off[MAXD];
            sn_group_offsets(l->cnt, t->n, off);
            size_t len = (size_t)o->dims[l->axis];
            char *scratch = malloc(len * inner + 1);
            if (!scratch)
                return oom();
            for (size_t k = 0; k < outer && st == SHARDNET_OK; k++) {
                char *full = (char *)o->data + k * len * inner;
                st = sn_group_gather(t->group, full, l->cnt, off, inner,
                                     scratch);
            }
            free(scratch);
        }
        /* float32 in the codec, as the collectives between processes */
        if (st == SHARDNET_OK && o->dtype == SN_DT_FLOAT)
            st = sn_transport_bcast_floats(
                sn_world_transport(), root,
                sn_config_or_env(t->dev[0]->config)->comm, o->data,
                o->nbytes / sizeof(float), &t->out_wire, &t->out_wire_cap,
                NULL);
        else if (st == SHARDNET_OK)
            st = sn_transport_bcast(sn_world_transport(), root, o->data,
                                    o->nbytes);
    }
    return st;
}

/* The hook every device's plan calls at a collective: the group runs it. */
_Static_assert(SN_COLL_MAX == SN_COMM_MAX, "a plan's collective fits a group");
shardnet_status sn_shard_rendezvous(void *ctx, const sn_coll_desc *d)
{
    static const sn_group_kind kinds[] = {
        [SN_COLL_ALLREDUCE] = SN_GROUP_ALLREDUCE,
        [SN_COLL_ALLGATHER] = SN_GROUP_ALLGATHER,
        [SN_COLL_REDUCE_SCATTER] = SN_GROUP_REDUCE_SCATTER};
    const rank_ctx *rc = ctx;
    sn_group_call call = {.kind = kinds[d->kind], .n = d->n,
                          .send = d->send, .recv = d->recv};
    memcpy(call.counts, d->counts, sizeof call.counts);
    return sn_group_collective(rc->t->group, rc->rank, &call);
}

/* Device r's piece of each cut output, copied into the host result. */
static shardnet_status put_pieces(sn_tensor_split *t, size_t r)
{
    for (size_t i = 0; i < t->g->noutputs; i++) {
        const sn_layout *l = &t->out_lay[i];
        sn_host_tensor *o = &t->out[i];
        const sn_host_tensor *piece = sn_plan_output(t->plan[r], i);
        if (l->kind != SN_LAY_S || !piece->nbytes)
            continue;
        size_t es = sn_dtype_size(o->dtype), pre = sn_layout_offset(l, r);
        size_t outer = prod(o->dims, 0, l->axis),
               inner = prod(o->dims, l->axis + 1, o->rank) * es,
               len = (size_t)o->dims[l->axis];
        if (piece->nbytes != outer * l->cnt[r] * inner)
            return sn_error(SHARDNET_INTERNAL,
                            "tensor split: output '%s' on %s is %zu bytes, "
                            "not its share", o->name, t->dev[r]->info.name,
                            piece->nbytes);
        for (size_t k = 0; k < outer; k++)
            memcpy((char *)o->data + (k * len + pre) * inner,
                   (const char *)piece->data + k * l->cnt[r] * inner,
                   l->cnt[r] * inner);
    }
    return SHARDNET_OK;
}

shardnet_status sn_shard_run_rank(void *split, size_t r)
{
    sn_tensor_split *t = split;
    double t0 = sn_trace_on() ? sn_trace_now() : 0;
    shardnet_status st = sn_plan_run(t->plan[r], t->in);
    if (st == SHARDNET_OK)
        st = put_pieces(t, r);
    if (sn_trace_on())
        sn_trace_add(t->dev[r]->info.name, "shard", "tensor-split run", t0,
                     sn_trace_now());
    if (st != SHARDNET_OK)
        sn_group_fail(t->group, r, st);
    return st;
}

shardnet_status sn_tensor_split_run(sn_tensor_split *t, const sn_binding *in)
{
    shardnet_status st;
    if (!sn_tensor_split_matches(t, in))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "tensor split: inputs shaped unlike the ones it was "
                        "built for");
    /* The local devices at once, the caller driving the first. */
    sn_group_begin(t->group);
    t->in = in;
    if ((st = sn_crew_run(t->crew)) != SHARDNET_OK)
        return st;
    for (size_t i = 0; i < t->g->noutputs; i++)
        if (t->out_lay[i].kind != SN_LAY_S && t->where->nlocal) {
            const sn_host_tensor *o =
                sn_plan_output(t->plan[t->where->local[0]], i);
            if (t->me_owned_out) {
                /* An owned buffer (a job of several processes). */
                if (o->nbytes != t->out[i].nbytes)
                    return sn_error(SHARDNET_INTERNAL,
                                    "tensor split: output %zu's size", i);
                memcpy(t->out[i].data, o->data, o->nbytes);
            } else {
                t->out[i] = *o;
                t->out[i].name = t->g->values[t->g->outputs[i]].name;
            }
        }
    if (t->me_owned_out && (st = share_outputs(t)) != SHARDNET_OK)
        return sn_error_prefix(st, "tensor split: sharing the outputs");
    return SHARDNET_OK;
}

const sn_host_tensor *sn_tensor_split_output(const sn_tensor_split *t,
                                             size_t i)
{
    return i < t->g->noutputs ? &t->out[i] : NULL;
}

/* Inputs shaped as the split was built for, and, where a device's plan
 * took an input's values (integer inputs: indices, shapes), the same
 * values: a plan built for other indices would gather the wrong rows. */
int sn_tensor_split_matches(const sn_tensor_split *t, const sn_binding *in)
{
    for (size_t i = 0; i < t->g->ninputs; i++) {
        const sn_binding *a = &t->bound[i], *c = &in[i];
        if (a->dtype != c->dtype || a->rank != c->rank ||
            memcmp(a->dims, c->dims, (size_t)a->rank * sizeof a->dims[0]))
            return 0;
    }
    for (size_t k = 0; k < t->where->nlocal; k++)
        if (!sn_plan_matches(t->plan[t->where->local[k]], in))
            return 0;
    return 1;
}
