/*
 * The host-shared path of the collective group: devices whose memory
 * the host shares (CPU devices, integrated GPUs) run each collective
 * together, nothing staged.  Every device's thread maps its own buffers,
 * waits at a barrier until all are mapped, computes its share of the
 * result for every device (sums in rank order, as the staged engine
 * adds, so the two agree bit for bit), and waits at a second barrier
 * before anyone unmaps.  See comm/group.h.
 */
#include <config.h>

#include <string.h>

#include "comm/group_impl.h"
#include "core/trace.h"

/* How long a device waiting at a barrier polls before it sleeps. */
#define BARRIER_SPIN_S 200e-6
/* Floats of an all-reduce summed at a time (stays in L1). */
#define BLOCK 1024

typedef struct bar_wait {
    const sn_group *g;
    unsigned seen; /* the barrier generation seen */
} bar_wait;

static int barrier_passed(const void *arg)
{
    const bar_wait *w = arg;
    return atomic_load(&w->g->bar_gen) != w->seen || atomic_load(&w->g->abort);
}

/* Wait until every device has come here; 0 when another device failed.
 * The devices run on their own cores, so a short poll usually sees the
 * last one arrive, cheaper than a sleep and a wake-up. */
static int barrier(sn_group *g)
{
    unsigned gen = atomic_load(&g->bar_gen);
    if (atomic_fetch_add(&g->bar_count, 1) + 1 == g->where.nlocal) {
        atomic_store(&g->bar_count, 0);
        pthread_mutex_lock(&g->lock);
        atomic_fetch_add(&g->bar_gen, 1);
        pthread_cond_broadcast(&g->cond);
        pthread_mutex_unlock(&g->lock);
        return 1;
    }
    bar_wait w = {g, gen};
    sn_poll(barrier_passed, &w, BARRIER_SPIN_S);
    pthread_mutex_lock(&g->lock);
    while (!barrier_passed(&w))
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
    return atomic_load(&g->bar_gen) != gen;
}

static shardnet_status map_view(sn_view v, size_t count, float **p)
{
    void *ptr = NULL;
    *p = NULL;
    if (!count)
        return SHARDNET_OK;
    shardnet_status st = sn_buffer_map(v.buf, v.offset * sizeof(float),
                                       count * sizeof(float),
                                       SN_MAP_READ | SN_MAP_WRITE, &ptr);
    *p = ptr;
    return st;
}

/* [lo, hi) of count floats for rank r of n, in 16-float blocks. */
static void share_of(size_t count, size_t r, size_t n, size_t *lo, size_t *hi)
{
    size_t blocks = (count + 15) / 16;
    size_t a = blocks * r / n, b = blocks * (r + 1) / n;
    *lo = a * 16 < count ? a * 16 : count;
    *hi = b * 16 < count ? b * 16 : count;
}

/* out[i] = src[0][at + i] + src[1][at + i] + ... for i < k, in rank order,
 * a device at a time so that the adds vectorise. */
static void sum_rows(float *out, float *const *src, size_t n, size_t at,
                     size_t k)
{
    for (size_t q = 0; q < n; q++)
        sn_comm_add(out, src[q] + at, k, q == 0);
}

/* Device r's part of a collective. */
static void share(sn_group *g, size_t r, const sn_group_call *d)
{
    size_t n = g->n, lo, hi, off[SN_COMM_MAX];
    sn_group_offsets(d->counts, n, off);
    switch (d->kind) {
    case SN_GROUP_ALLREDUCE:
        /* In blocks that stay in L1: the sum of the devices' block, then
         * the sum copied to each. */
        share_of(d->counts[0], r, n, &lo, &hi);
        for (size_t i = lo; i < hi; i += BLOCK) {
            size_t k = hi - i < BLOCK ? hi - i : BLOCK;
            float sum[BLOCK];
            sum_rows(sum, g->send_p, n, i, k);
            for (size_t q = 0; q < n; q++)
                memcpy(g->send_p[q] + i, sum, k * sizeof(float));
        }
        break;
    case SN_GROUP_REDUCE_SCATTER:
        sum_rows(g->recv_p[r], g->send_p, n, off[r], d->counts[r]);
        break;
    default: /* all-gather: this device's piece into every device's result */
        for (size_t q = 0; q < n && d->counts[r]; q++)
            if (g->recv_p[q] + off[r] != g->send_p[r])
                memcpy(g->recv_p[q] + off[r], g->send_p[r],
                       d->counts[r] * sizeof(float));
        break;
    }
}

static shardnet_status unmap(sn_view v, float **p, shardnet_status st)
{
    shardnet_status st2 = SHARDNET_OK;
    if (*p)
        st2 = sn_buffer_unmap(v.buf, *p);
    *p = NULL;
    return st == SHARDNET_OK ? st2 : st;
}

shardnet_status sn_group_shared_run(sn_group *g, size_t r,
                                    const sn_group_call *d)
{
    shardnet_status st;
    size_t total = sn_group_total(g, d);
    double t0 = sn_trace_on() ? sn_trace_now() : 0;
    size_t nsend = d->kind == SN_GROUP_ALLREDUCE   ? d->counts[0]
                   : d->kind == SN_GROUP_ALLGATHER ? d->counts[r]
                                                   : total;
    size_t nrecv = d->kind == SN_GROUP_ALLREDUCE   ? 0
                   : d->kind == SN_GROUP_ALLGATHER ? total
                                                   : d->counts[r];
    g->pend[r] = *d;
    if ((st = map_view(d->send, nsend, &g->send_p[r])) == SHARDNET_OK)
        st = map_view(d->recv, nrecv, &g->recv_p[r]);
    if (st != SHARDNET_OK)
        sn_group_abort(g);
    if (!barrier(g) || st != SHARDNET_OK)
        goto unmap;
    /* Everyone's buffers are mapped and their descriptions agree? */
    if ((st = sn_group_agree(g, g->where.local, g->n, d)) == SHARDNET_OK)
        share(g, r, d);
    /* Nobody reuses its buffers while another device still reads them. */
    if (!barrier(g) && st == SHARDNET_OK)
        st = sn_group_stopped();
unmap:
    st = unmap(d->send, &g->send_p[r], st);
    st = unmap(d->recv, &g->recv_p[r], st);
    if (st == SHARDNET_OK && atomic_load(&g->abort))
        st = sn_group_stopped();
    sn_group_trace(g, &r, 1, d, t0, "");
    return st;
}
