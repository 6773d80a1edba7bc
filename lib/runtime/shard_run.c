/*
 * The tensor split's run-time side: one host thread per local device runs
 * its plan (the caller drives the first), a plan stops at each collective
 * and hands it to the devices' group, and the outputs are put together on
 * the host (cut ones from every device's piece) and, in a job of several
 * processes, shared with every process.
 */
#include <config.h>

#include <pthread.h>
#include <stdatomic.h>
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
        if (st == SHARDNET_OK)
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

/* How long a worker polls for the next run, and the caller for the
 * workers' end, before sleeping. */
#define WAKE_SPIN_S 200e-6

typedef struct split_wait {
    const sn_tensor_split *t;
    unsigned seen; /* the job seen */
} split_wait;

static int job_posted(const void *arg)
{
    const split_wait *w = arg;
    return atomic_load(&w->t->job) != w->seen;
}

static int workers_done(const void *arg)
{
    const split_wait *w = arg;
    return atomic_load(&w->t->done) >= w->t->where->nlocal - 1;
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

/* Device r's part of a run; on failure the others are told to stop. */
static shardnet_status run_rank(sn_tensor_split *t, size_t r)
{
    double t0 = sn_trace_on() ? sn_trace_now() : 0;
    shardnet_status st = sn_plan_run(t->plan[r], t->in);
    if (st == SHARDNET_OK)
        st = put_pieces(t, r);
    if (sn_trace_on())
        sn_trace_add(t->dev[r]->info.name, "shard", "tensor-split run", t0,
                     sn_trace_now());
    if (st != SHARDNET_OK)
        sn_group_abort(t->group);
    return st;
}

void *sn_shard_worker_main(void *arg)
{
    worker *w = arg;
    sn_tensor_split *t = w->t;
    unsigned seen = 0;
    sn_bind_thread(t->dev[w->rank], 1);
    for (;;) {
        /* Poll a little first: runs often follow each other closely, and
         * a sleeping worker starts late by a wake-up. */
        split_wait sw = {t, seen};
        sn_poll(job_posted, &sw, WAKE_SPIN_S);
        pthread_mutex_lock(&t->lock);
        while (!t->quit && t->job == seen)
            pthread_cond_wait(&t->cond, &t->lock);
        if (t->quit) {
            pthread_mutex_unlock(&t->lock);
            sn_bind_thread(t->dev[w->rank], 0);
            return NULL;
        }
        seen = t->job;
        pthread_mutex_unlock(&t->lock);
        shardnet_status st = run_rank(t, w->rank);
        pthread_mutex_lock(&t->lock);
        w->st = st;
        if (st != SHARDNET_OK)
            snprintf(w->msg, sizeof w->msg, "%s", shardnet_last_error());
        t->done++;
        pthread_cond_broadcast(&t->cond);
        pthread_mutex_unlock(&t->lock);
    }
}

shardnet_status sn_tensor_split_run(sn_tensor_split *t, const sn_binding *in)
{
    shardnet_status st;
    if (!sn_tensor_split_matches(t, in))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "tensor split: inputs shaped unlike the ones it was "
                        "built for");
    pthread_mutex_lock(&t->lock);
    sn_group_begin(t->group);
    t->in = in;
    t->done = 0;
    t->job++;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
    /* The caller drives this process's first device for the run, then gets
     * its binding back. */
    st = SHARDNET_OK;
    if (t->where->nlocal) {
        size_t lead = t->where->local[0];
        sn_bind_thread(t->dev[lead], 1);
        st = run_rank(t, lead);
        sn_bind_thread(t->dev[lead], 0);
        split_wait sw = {t, 0};
        sn_poll(workers_done, &sw, WAKE_SPIN_S);
        pthread_mutex_lock(&t->lock);
        while (!workers_done(&sw))
            pthread_cond_wait(&t->cond, &t->lock);
        pthread_mutex_unlock(&t->lock);
        if (st != SHARDNET_OK)
            return st;
        for (size_t k = 1; k < t->where->nlocal; k++) {
            size_t r = t->where->local[k];
            if (t->wk[r].st != SHARDNET_OK)
                return sn_error(t->wk[r].st, "on %s: %s",
                                t->dev[r]->info.name, t->wk[r].msg);
        }
    }
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
