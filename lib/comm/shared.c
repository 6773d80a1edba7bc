/*
 * The host-shared path of the collective group: devices whose memory
 * the host shares (CPU devices, integrated GPUs) run each collective
 * together, nothing staged.  Every device's thread maps its own buffers
 * and leaves them, with its description of the call, in its slot; waits
 * at a barrier until every device has; checks that the descriptions
 * agree; computes its share of the result for every device (sums in rank
 * order, as the staged engine adds, so the two agree bit for bit); and
 * waits at a second barrier before anyone unmaps or returns.  Both
 * barriers are needed: nobody may read a device's buffer before that
 * device's kernels have written it, nor may a device go on to use its
 * buffer while another still writes its share of the result there.
 * See comm/group.h.
 */
#include <config.h>

#include <string.h>

#include "comm/collective_impl.h"
#include "comm/group_impl.h"
#include "core/trace.h"

/* How many times a device waiting at a barrier spins (about 25 us of
 * pauses on a recent x86 core: the other devices usually come within a
 * few microseconds, and a yield alone costs about one), then how long it
 * polls, yielding the core, before it sleeps. */
#define BARRIER_SPINS 1024
#define BARRIER_POLL_S 200e-6

typedef struct bar_wait {
    const sn_group *g;
    unsigned long target; /* the barrier's number */
} bar_wait;

static int all_reached(const void *arg)
{
    const bar_wait *w = arg;
    for (size_t q = 0; q < w->g->n; q++)
        if (atomic_load_explicit(&w->g->slot[q].reached,
                                 memory_order_acquire) < w->target)
            return 0;
    return 1;
}

static int barrier_passed(const void *arg)
{
    const bar_wait *w = arg;
    return all_reached(w) || atomic_load(&w->g->abort);
}

/* Wake the devices asleep at a barrier, if any: the common case, nobody
 * asleep, takes no lock.  The caller has stored its arrival and seen the
 * barrier pass.  A device counts itself a sleeper (a sequentially
 * consistent add) before it looks at the slots for the last time, and
 * the fence here comes after the caller's arrival: either the fence
 * comes first, and the sleeper sees that arrival, or the add does, and
 * this sees the sleeper.  The fence sits here, after the wait, rather
 * than in the arrival's store: there it would hold the device until the
 * line of its slot had left the other cores' caches, one transfer
 * between cores, before it even looked at theirs; here that transfer is
 * usually over. */
static void wake_sleepers(sn_group *g)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (!atomic_load_explicit(&g->sleepers, memory_order_relaxed))
        return;
    pthread_mutex_lock(&g->lock);
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

/* Device r has come here: wait until every device has; 0 when one failed
 * first.  Each device counts the barriers it has reached in its own slot,
 * so arriving is one store to a line nobody else writes, and a device
 * sees the last one come as soon as that line reaches its core.  The
 * store releases what r wrote before (its description and mapped
 * buffers, its share of the result), and the loads that see it acquire
 * them.  They run on cores of their own, so the last one usually comes
 * soon: spin first, then yield, then sleep. */
static int barrier(sn_group *g, size_t r)
{
    bar_wait w = {g, atomic_load_explicit(&g->slot[r].reached,
                                          memory_order_relaxed) + 1};
    atomic_store_explicit(&g->slot[r].reached, w.target,
                          memory_order_release);
    if (sn_spin(barrier_passed, &w, BARRIER_SPINS) ||
        sn_poll(barrier_passed, &w, BARRIER_POLL_S)) {
        wake_sleepers(g);
        return all_reached(&w);
    }
    pthread_mutex_lock(&g->lock);
    atomic_fetch_add(&g->sleepers, 1);
    while (!barrier_passed(&w))
        pthread_cond_wait(&g->cond, &g->lock);
    atomic_fetch_sub(&g->sleepers, 1);
    pthread_mutex_unlock(&g->lock);
    wake_sleepers(g);
    return all_reached(&w);
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

/* Map rank r's buffers: floats of its send and recv views the collective
 * touches. */
static shardnet_status map_sides(const sn_group *g, size_t r,
                                 const sn_group_call *d, float **send_p,
                                 float **recv_p)
{
    size_t total = sn_group_total(g, d);
    size_t nsend = d->kind == SN_GROUP_ALLREDUCE   ? d->counts[0]
                   : d->kind == SN_GROUP_ALLGATHER ? d->counts[r]
                                                   : total;
    size_t nrecv = d->kind == SN_GROUP_ALLREDUCE   ? 0
                   : d->kind == SN_GROUP_ALLGATHER ? total
                                                   : d->counts[r];
    *recv_p = NULL;
    shardnet_status st = map_view(d->send, nsend, send_p);
    if (st == SHARDNET_OK)
        st = map_view(d->recv, nrecv, recv_p);
    return st;
}

static shardnet_status unmap(sn_view v, float *p, shardnet_status st)
{
    shardnet_status st2 = SHARDNET_OK;
    if (p)
        st2 = sn_buffer_unmap(v.buf, p);
    return st == SHARDNET_OK ? st2 : st;
}

/* Does every device describe the collective as d does? */
static shardnet_status agree(const sn_group *g, const sn_group_call *d)
{
    for (size_t q = 0; q < g->n; q++)
        if (!sn_group_same(g, &g->slot[q].call, d))
            return sn_error(SHARDNET_INTERNAL,
                            "tensor split: devices disagree on a collective");
    return SHARDNET_OK;
}

/* [lo, hi) of count floats for rank r of n, in 16-float blocks (a cache
 * line where the buffers are aligned: no line is written by two). */
static void share_of(size_t count, size_t r, size_t n, size_t *lo, size_t *hi)
{
    size_t blocks = (count + 15) / 16;
    size_t a = blocks * r / n, b = blocks * (r + 1) / n;
    *lo = a * 16 < count ? a * 16 : count;
    *hi = b * 16 < count ? b * 16 : count;
}

/* The most bytes (over all the buffers it touches) a device's sum turns
 * around for, by turns (see share()): four L1s of 32 KiB.  Past that,
 * what L1 keeps of the last sum is little of it, and a downward sum
 * streams worse from L2 or another core's cache than an upward one (an
 * all-reduce of 256 KiB over two devices whose kernels had just written
 * their buffers: 69-73% of memcpy's speed downwards by turns, 78-87%
 * always upwards; tools/bench_collectives). */
#define TURN_BYTES_MAX (128u * 1024u)

/* Does a sum of k floats of nbuf buffers run downwards on this turn? */
static int turned(int down, size_t k, size_t nbuf)
{
    return down && k * nbuf * sizeof(float) <= TURN_BYTES_MAX;
}

/* Elements [at, at + k) of every device's send buffer summed, in rank
 * order, into out[0 .. nout) (each pointing where element `at`'s sum
 * goes), from the last element to the first when `down`. */
static void sum_from_all(const sn_group *g, size_t at, size_t k,
                         float *const *out, size_t nout, int down)
{
    const float *in[SN_COMM_MAX];
    for (size_t q = 0; q < g->n; q++)
        in[q] = g->slot[q].send_p + at;
    if (down)
        sn_comm_sum_down(out, nout, in, g->n, k);
    else
        sn_comm_sum(out, nout, in, g->n, k);
}

/* Device r's part of a collective.  A device sums its share upwards and
 * downwards by turns: a collective often follows one over the same
 * buffers, and what a core touched last is what its L1 still holds.  Run
 * the same way as the last time, a sum would meet first the lines lost
 * longest ago, and each line it loaded would push out one it needs
 * later, so that a share outgrowing L1 (64 KiB over two devices: 32 KiB
 * of each buffer) came whole from L2; turned around, it meets first the
 * lines still there: 64 KiB over two devices took about 40% less.
 * Which way does not change a bit of the result: every element is
 * summed on its own. */
static void share(sn_group *g, size_t r, const sn_group_call *d)
{
    size_t n = g->n, lo, hi, off[SN_COMM_MAX];
    float *out[SN_COMM_MAX];
    /* Two barriers a collective: the collective's number gives the turn. */
    int down = (int)(atomic_load_explicit(&g->slot[r].reached,
                                          memory_order_relaxed) >> 1 & 1);
    sn_group_offsets(d->counts, n, off);
    switch (d->kind) {
    case SN_GROUP_ALLREDUCE: /* its share of the sum, into every buffer */
        share_of(d->counts[0], r, n, &lo, &hi);
        for (size_t q = 0; q < n && lo < hi; q++)
            out[q] = g->slot[q].send_p + lo;
        if (lo < hi) /* in place: n buffers */
            sum_from_all(g, lo, hi - lo, out, n, turned(down, hi - lo, n));
        break;
    case SN_GROUP_REDUCE_SCATTER:
        if (d->counts[r])
            sum_from_all(g, off[r], d->counts[r], &g->slot[r].recv_p, 1,
                         turned(down, d->counts[r], n + 1));
        break;
    default: /* all-gather: this device's piece into every device's result */
        for (size_t q = 0; q < n && d->counts[r]; q++)
            if (g->slot[q].recv_p + off[r] != g->slot[r].send_p)
                memcpy(g->slot[q].recv_p + off[r], g->slot[r].send_p,
                       d->counts[r] * sizeof(float));
        break;
    }
}

shardnet_status sn_group_shared_run(sn_group *g, size_t r,
                                    const sn_group_call *d)
{
    sn_group_slot *me = &g->slot[r];
    float *send_p, *recv_p;
    double t0 = sn_trace_on() ? sn_trace_now() : 0;
    shardnet_status st = map_sides(g, r, d, &send_p, &recv_p);
    if (st != SHARDNET_OK)
        sn_group_fail(g, r, st);
    /* The slot is written only now, just before the barrier publishes it:
     * the others read its line at every barrier, so writing it takes the
     * line back from their caches, and a map (which may lock, a full
     * fence) in between would wait for that.  It is not cleared on the
     * way out either, for the same reason: nobody reads it before the
     * next collective's first barrier, and by then it is written anew. */
    me->send_p = send_p;
    me->recv_p = recv_p;
    me->call = *d;
    if (!barrier(g, r) || st != SHARDNET_OK)
        goto unmap;
    /* Everyone's buffers are mapped and their descriptions agree? */
    if ((st = agree(g, d)) == SHARDNET_OK)
        share(g, r, d);
    /* Nobody reuses its buffers while another device still uses them. */
    if (!barrier(g, r) && st == SHARDNET_OK)
        st = sn_group_stopped(g);
unmap:
    st = unmap(d->send, send_p, st);
    st = unmap(d->recv, recv_p, st);
    if (st == SHARDNET_OK && atomic_load(&g->abort))
        st = sn_group_stopped(g);
    sn_group_trace(g, &r, 1, d, t0, "");
    return st;
}
