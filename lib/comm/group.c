/*
 * The collective group: making it, the rendezvous every device of this
 * process calls at a collective, and the staged path (one process:
 * the last device to arrive runs the host-staged engine of collective.c
 * for all).  The host-shared path is in shared.c, the one between
 * processes in across.c.  See comm/group.h.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/group_impl.h"
#include "comm/world.h"
#include "core/trace.h"

size_t sn_group_offsets(const size_t *counts, size_t n, size_t *off)
{
    size_t at = 0;
    for (size_t r = 0; r < n; r++) {
        off[r] = at;
        at += counts[r];
    }
    return at;
}

size_t sn_group_total(const sn_group *g, const sn_group_call *call)
{
    size_t total = 0;
    if (call->kind == SN_GROUP_ALLREDUCE)
        return call->counts[0];
    for (size_t r = 0; r < g->n; r++)
        total += call->counts[r];
    return total;
}

int sn_group_same(const sn_group *g, const sn_group_call *a,
                  const sn_group_call *b)
{
    return a->kind == b->kind &&
           (a->kind == SN_GROUP_ALLREDUCE || a->n == g->n) &&
           !memcmp(a->counts, b->counts, g->n * sizeof a->counts[0]);
}

shardnet_status sn_group_agree(const sn_group *g, const size_t *ranks,
                               size_t nranks, const sn_group_call *call)
{
    for (size_t k = 0; k < nranks; k++)
        if (!sn_group_same(g, &g->pend[ranks[k]], call))
            return sn_error(SHARDNET_INTERNAL,
                            "tensor split: devices disagree on a collective");
    return SHARDNET_OK;
}

void sn_group_trace(const sn_group *g, const size_t *ranks, size_t nranks,
                    const sn_group_call *call, double t0, const char *where)
{
    static const char *const names[] = {"all-reduce", "all-gather",
                                        "reduce-scatter"};
    char name[96];
    if (!sn_trace_on())
        return;
    snprintf(name, sizeof name, "%s %zu floats%s", names[call->kind],
             sn_group_total(g, call), where);
    for (size_t k = 0; k < nranks; k++)
        sn_trace_add(g->dev[ranks[k]]->info.name, "collective", name, t0,
                     sn_trace_now());
}

/* The staged path: the collective every device has arrived at, run
 * by the last one for all. */
static shardnet_status staged_run(sn_group *g)
{
    sn_view send[SN_COMM_MAX], recv[SN_COMM_MAX];
    const sn_group_call *d0 = &g->pend[0];
    shardnet_status st = sn_group_agree(g, g->where.local, g->n, d0);
    if (st != SHARDNET_OK)
        return st;
    for (size_t r = 0; r < g->n; r++) {
        send[r] = g->pend[r].send;
        recv[r] = g->pend[r].recv;
    }
    double t0 = sn_trace_on() ? sn_trace_now() : 0;
    switch (d0->kind) {
    case SN_GROUP_ALLREDUCE:
        st = sn_allreduce(g->comm, send, d0->counts[0]);
        break;
    case SN_GROUP_ALLGATHER:
        st = sn_allgather(g->comm, send, d0->counts, recv);
        break;
    default:
        st = sn_reduce_scatter(g->comm, send, d0->counts, recv);
        break;
    }
    sn_group_trace(g, g->where.local, g->n, d0, t0, "");
    return st;
}

shardnet_status sn_group_stopped(sn_group *g)
{
    shardnet_status st = SHARDNET_INTERNAL;
    char cause[sizeof g->cause];
    pthread_mutex_lock(&g->lock);
    if (g->cause[0])
        st = g->cause_st;
    snprintf(cause, sizeof cause, "%s", g->cause);
    pthread_mutex_unlock(&g->lock);
    if (!cause[0])
        return sn_error(st, "tensor split: stopped, another device failed");
    return sn_error(st, "tensor split: stopped, as %s", cause);
}

shardnet_status sn_group_collective(sn_group *g, size_t rank,
                                    const sn_group_call *call)
{
    shardnet_status st;
    if (g->shared)
        return sn_group_shared_run(g, rank, call);
    pthread_mutex_lock(&g->lock);
    if (g->abort) {
        pthread_mutex_unlock(&g->lock);
        return sn_group_stopped(g);
    }
    g->pend[rank] = *call;
    if (++g->arrived == g->where.nlocal) {
        pthread_mutex_unlock(&g->lock);
        st = g->spans ? sn_group_across_run(g) : staged_run(g);
        pthread_mutex_lock(&g->lock);
        g->st = st;
        if (st != SHARDNET_OK)
            snprintf(g->msg, sizeof g->msg, "%s", shardnet_last_error());
        g->arrived = 0;
        g->gen++;
        pthread_cond_broadcast(&g->cond);
        pthread_mutex_unlock(&g->lock);
        return st;
    }
    unsigned gen = g->gen;
    while (g->gen == gen && !g->abort)
        pthread_cond_wait(&g->cond, &g->lock);
    if (g->gen == gen) {
        pthread_mutex_unlock(&g->lock);
        return sn_group_stopped(g);
    }
    st = g->st;
    pthread_mutex_unlock(&g->lock);
    if (st != SHARDNET_OK)
        return sn_error(st, "%s", g->msg);
    return SHARDNET_OK;
}

void sn_group_begin(sn_group *g)
{
    pthread_mutex_lock(&g->lock);
    g->abort = 0;
    g->cause[0] = '\0';
    for (size_t r = 0; r < g->n; r++)
        atomic_store(&g->slot[r].reached, 0);
    g->arrived = 0;
    pthread_mutex_unlock(&g->lock);
}

void sn_group_abort(sn_group *g)
{
    pthread_mutex_lock(&g->lock);
    g->abort = 1;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

void sn_group_fail(sn_group *g, size_t rank, shardnet_status st)
{
    const char *why = shardnet_last_error();
    pthread_mutex_lock(&g->lock);
    if (!g->cause[0]) {
        g->cause_st = st;
        snprintf(g->cause, sizeof g->cause, "%s failed: %s",
                 rank < g->n ? g->dev[rank]->info.name : "a device",
                 why && *why ? why : "(no message)");
    }
    g->abort = 1;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

const sn_group_where *sn_group_where_of(const sn_group *g)
{
    return &g->where;
}

/* The processes owning devices, ascending, and this process's ranks. */
static void find_places(sn_group *g)
{
    sn_group_where *w = &g->where;
    w->me = g->net->process;
    for (size_t d = 0; d < g->n; d++) {
        unsigned p = g->dev[d]->process;
        int known = 0;
        for (size_t k = 0; k < w->nprocs; k++)
            known |= w->procs[k] == p;
        if (!known) {
            size_t k = w->nprocs++;
            while (k > 0 && w->procs[k - 1] > p) {
                w->procs[k] = w->procs[k - 1];
                k--;
            }
            w->procs[k] = p;
        }
        if (!g->dev[d]->remote)
            w->local[w->nlocal++] = d;
    }
    g->spans = w->nprocs > 1;
}

shardnet_status sn_group_create(sn_device *const *devs, size_t ndev,
                                int staged, sn_group **out)
{
    shardnet_status st;
    *out = NULL;
    if (ndev < 1 || ndev > SN_COMM_MAX)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "collective group of %zu devices", ndev);
    /* aligned: the host-shared path's slots are a cache line each */
    size_t bytes = (sizeof(sn_group) + SN_GROUP_LINE - 1) / SN_GROUP_LINE *
                   SN_GROUP_LINE;
    sn_group *g = aligned_alloc(SN_GROUP_LINE, bytes);
    if (!g)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
    memset(g, 0, bytes);
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cond, NULL);
    g->n = ndev;
    g->net = sn_world_transport();
    for (size_t d = 0; d < ndev; d++)
        g->dev[d] = devs[d];
    find_places(g);
    /* Host-shared when every device's memory is the host's. */
    g->shared = !g->spans && !staged;
    for (size_t d = 0; d < ndev; d++)
        if (!devs[d]->info.host_unified || !devs[d]->ops->buffer_map)
            g->shared = 0;
    if (!g->spans && g->where.nlocal == ndev &&
        (st = sn_comm_create(devs, ndev, NULL, &g->comm)) != SHARDNET_OK) {
        sn_group_free(g);
        return st;
    }
    *out = g;
    return SHARDNET_OK;
}

void sn_group_free(sn_group *g)
{
    if (!g)
        return;
    sn_comm_free(g->comm);
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->cond);
    free(g->host);
    free(g->tmp);
    free(g->rest);
    free(g->wire_out);
    free(g->wire_in);
    free(g);
}
