/*
 * The collective group between processes: devices of a tensor split that
 * belong to several processes of a job.  At each collective the last
 * device of every process to arrive stages this process's ranks through
 * host memory (summed in rank order), the processes exchange by messages
 * of the job's transport (transport.h) only the parts the others keep and
 * add them in process order, and the results are written back to this
 * process's devices.  sn_group_gather() serves the same exchange for host data (the
 * pieces of a cut output).  See comm/group.h.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/group_impl.h"
#include "core/trace.h"

#define CROSS_TAG 31000

static shardnet_status oom(void)
{
    return sn_error(SHARDNET_OUT_OF_MEMORY, "tensor split");
}

static int grow(float **buf, size_t *cap, size_t count)
{
    if (*cap >= count)
        return 1;
    float *nb = realloc(*buf, (count ? count : 1) * sizeof *nb);
    if (!nb)
        return 0;
    *buf = nb;
    *cap = count;
    return 1;
}

/* Bytes of the pieces process q owns (elements `unit` bytes each; counts
 * per global rank). */
static size_t owned(const sn_group *g, unsigned q, const size_t *counts,
                    size_t unit)
{
    size_t n = 0;
    for (size_t r = 0; r < g->n; r++)
        if (g->dev[r]->process == q)
            n += counts[r] * unit;
    return n;
}

/* The others' pieces come through the root, which sends the whole back;
 * packed: scratch of this process's pieces, back to back. */
shardnet_status sn_group_gather(sn_group *g, char *full, const size_t *counts,
                                const size_t *off, size_t unit, char *packed)
{
    unsigned root = g->where.procs[0];
    size_t total = 0, at = 0;
    shardnet_status st = SHARDNET_OK;
    if (!g->spans)
        return SHARDNET_OK;
    for (size_t r = 0; r < g->n; r++)
        total += counts[r] * unit;
    if (g->where.me != root) {
        for (size_t r = 0; r < g->n; r++)
            if (g->dev[r]->process == g->where.me) {
                memcpy(packed + at, full + off[r] * unit, counts[r] * unit);
                at += counts[r] * unit;
            }
        if ((st = sn_transport_send(g->net, root, CROSS_TAG, packed, at)) ==
            SHARDNET_OK)
            st = sn_transport_recv(g->net, root, CROSS_TAG, full, total);
        return st;
    }
    for (size_t k = 1; k < g->where.nprocs && st == SHARDNET_OK; k++) {
        unsigned q = g->where.procs[k];
        size_t bytes = owned(g, q, counts, unit);
        if ((st = sn_transport_recv(g->net, q, CROSS_TAG, packed, bytes)) !=
            SHARDNET_OK)
            break;
        at = 0;
        for (size_t r = 0; r < g->n; r++)
            if (g->dev[r]->process == q) {
                memcpy(full + off[r] * unit, packed + at, counts[r] * unit);
                at += counts[r] * unit;
            }
    }
    for (size_t k = 1; k < g->where.nprocs && st == SHARDNET_OK; k++)
        st = sn_transport_send(g->net, g->where.procs[k], CROSS_TAG, full,
                               total);
    return st;
}

/* Finish requests req[0 .. n) (and clear them); the first error. */
static shardnet_status wait_all(sn_transport *t, sn_transport_req **req,
                                size_t n)
{
    shardnet_status st = SHARDNET_OK;
    for (size_t r = 0; r < n; r++) {
        shardnet_status s2 = sn_transport_wait(t, req[r]);
        req[r] = NULL;
        if (st == SHARDNET_OK)
            st = s2;
    }
    return st;
}

/* Floats per chunk of a sum across processes (2 MiB). */
#define CROSS_CHUNK (512u * 1024u)

/* Stage chunk [a, b) of this process's ranks' inputs, summed in rank
 * order, into h + a. */
static shardnet_status stage_chunk(sn_group *g, float *h, size_t a,
                                   size_t b)
{
    shardnet_status st = SHARDNET_OK;
    float *tmp = g->tmp + a;
    for (size_t k = 0; k < g->where.nlocal && st == SHARDNET_OK; k++) {
        size_t r = g->where.local[k];
        st = sn_buffer_read(g->pend[r].send.buf,
                            (g->pend[r].send.offset + a) * sizeof(float),
                            k ? tmp : h + a, (b - a) * sizeof(float));
        if (k && st == SHARDNET_OK)
            sn_comm_add(h + a, tmp, b - a, 0);
    }
    return st;
}

/* Write chunk [a, b) of the sum (res) back: every rank's all of it
 * (all-reduce, in place) or each rank the part of its own segment. */
static shardnet_status unstage_chunk(sn_group *g, sn_group_kind kind,
                                     const float *res, size_t a, size_t b,
                                     const size_t *counts, const size_t *off)
{
    shardnet_status st = SHARDNET_OK;
    for (size_t k = 0; k < g->where.nlocal && st == SHARDNET_OK; k++) {
        size_t r = g->where.local[k], lo, hi;
        if (kind == SN_GROUP_ALLREDUCE) {
            st = sn_buffer_write(g->pend[r].send.buf,
                                 (g->pend[r].send.offset + a) * sizeof(float),
                                 res + a, (b - a) * sizeof(float));
            continue;
        }
        if (sn_comm_clip(a, b, off[r], off[r] + counts[r], &lo, &hi))
            st = sn_buffer_write(g->pend[r].recv.buf,
                                 (g->pend[r].recv.offset + lo - off[r]) *
                                     sizeof(float),
                                 res + lo, (hi - lo) * sizeof(float));
    }
    return st;
}

/* The ranges of [0, total) whose sums process k of procs keeps: its
 * ranks' segments (reduce-scatter), or its k-th share (all-reduce).  At
 * most SN_COMM_MAX ranges, in order. */
static size_t kept(const sn_group *g, sn_group_kind kind, size_t k,
                   const size_t *counts, const size_t *off, size_t total,
                   size_t *lo, size_t *hi)
{
    size_t n = 0;
    if (kind == SN_GROUP_ALLREDUCE) {
        lo[0] = total * k / g->where.nprocs;
        hi[0] = total * (k + 1) / g->where.nprocs;
        return lo[0] < hi[0];
    }
    for (size_t r = 0; r < g->n; r++)
        if (g->dev[r]->process == g->where.procs[k] && counts[r]) {
            if (n && hi[n - 1] == off[r]) {
                hi[n - 1] += counts[r];
                continue;
            }
            lo[n] = off[r];
            hi[n++] = off[r] + counts[r];
        }
    return n;
}

/*
 * A sum across processes (all-reduce or reduce-scatter of `total` floats)
 * as a reduce-scatter between processes: each process stages its ranks'
 * sum chunk by chunk and sends every other process the parts that process
 * keeps as soon as they are staged; each adds what it keeps over the
 * processes in process order; an all-reduce then sends each kept share to
 * all.  Each process moves the others' parts only, not the whole.
 */
static shardnet_status cross_reduce(sn_group *g, sn_group_kind kind,
                                    const size_t *counts, const size_t *off,
                                    size_t total)
{
    size_t me_k = 0, nch = (total + CROSS_CHUNK - 1) / CROSS_CHUNK;
    size_t lo[SN_COMM_MAX], hi[SN_COMM_MAX], nk, mine = 0, nreq = 0, maxreq;
    shardnet_status st = SHARDNET_OK;
    for (size_t k = 0; k < g->where.nprocs; k++)
        if (g->where.procs[k] == g->where.me)
            me_k = k;
    nk = kept(g, kind, me_k, counts, off, total, lo, hi);
    for (size_t q = 0; q < nk; q++)
        mine += hi[q] - lo[q];
    /* Every piece is at most one message: (ranges + chunks) per peer, each
     * way, plus the all-reduce's shares. */
    maxreq = 4 * g->where.nprocs * (SN_COMM_MAX + nch + 2) + 8;
    sn_transport_req **req = calloc(maxreq, sizeof *req);
    /* rest: the other processes' parts of what this one keeps, one block
     * of `mine` floats each, in process order. */
    if (!req || !grow(&g->rest, &g->rest_cap, g->where.nprocs * mine + 1) ||
        !grow(&g->host, &g->host_cap, total) ||
        !grow(&g->tmp, &g->tmp_cap, total)) {
        free(req);
        return oom();
    }
    float *h = g->host, *rest = g->rest;
#define CH(c) ((c) * (size_t)CROSS_CHUNK)
#define CE(c) (CH(c) + CROSS_CHUNK < total ? CH(c) + CROSS_CHUNK : total)
    /* Receive: from each other process, the pieces of what this one keeps,
     * chunk by chunk, in the order they are sent. */
    for (size_t k = 0; k < g->where.nprocs && st == SHARDNET_OK; k++) {
        if (k == me_k)
            continue;
        size_t at = 0;
        for (size_t c = 0; c < nch && st == SHARDNET_OK; c++)
            for (size_t q = 0; q < nk && st == SHARDNET_OK; q++) {
                size_t a, b;
                if (!sn_comm_clip(CH(c), CE(c), lo[q], hi[q], &a, &b))
                    continue;
                st = sn_transport_irecv(g->net, g->where.procs[k], CROSS_TAG,
                                        rest + k * mine + at,
                                        (b - a) * sizeof(float),
                                        &req[nreq++]);
                at += b - a;
            }
    }
    /* Stage and send, chunk by chunk. */
    for (size_t c = 0; c < nch && st == SHARDNET_OK; c++) {
        st = stage_chunk(g, h, CH(c), CE(c));
        for (size_t k = 0; k < g->where.nprocs && st == SHARDNET_OK; k++) {
            size_t klo[SN_COMM_MAX], khi[SN_COMM_MAX], kn;
            if (k == me_k)
                continue;
            kn = kept(g, kind, k, counts, off, total, klo, khi);
            for (size_t q = 0; q < kn && st == SHARDNET_OK; q++) {
                size_t a, b;
                if (sn_comm_clip(CH(c), CE(c), klo[q], khi[q], &a, &b))
                    st = sn_transport_isend(g->net, g->where.procs[k],
                                            CROSS_TAG, h + a,
                                            (b - a) * sizeof(float),
                                            &req[nreq++]);
            }
        }
    }
    /* Every part in; every part of ours out (an all-reduce receives the
     * shares into the very ranges it sent from). */
    shardnet_status done = wait_all(g->net, req, nreq);
    if (st == SHARDNET_OK)
        st = done;
    nreq = 0;
    /* What this process keeps: the processes' parts in process order. */
    if (st == SHARDNET_OK) {
        /* This process's own part into its block too, then the sum into h. */
        size_t at = 0;
        for (size_t q = 0; q < nk; q++) {
            memcpy(rest + me_k * mine + at, h + lo[q],
                   (hi[q] - lo[q]) * sizeof(float));
            at += hi[q] - lo[q];
        }
        at = 0;
        for (size_t q = 0; q < nk; q++)
            for (size_t i = lo[q]; i < hi[q]; i++, at++) {
                float sum = rest[at];
                for (size_t k = 1; k < g->where.nprocs; k++)
                    sum += rest[k * mine + at];
                h[i] = sum;
            }
    }
    /* An all-reduce: every process sends its share to all. */
    if (st == SHARDNET_OK && kind == SN_GROUP_ALLREDUCE) {
        for (size_t k = 0; k < g->where.nprocs && st == SHARDNET_OK; k++) {
            size_t klo[SN_COMM_MAX], khi[SN_COMM_MAX];
            if (k == me_k || !kept(g, kind, k, counts, off, total, klo, khi))
                continue;
            st = sn_transport_irecv(g->net, g->where.procs[k], CROSS_TAG,
                                    h + klo[0],
                                    (khi[0] - klo[0]) * sizeof(float),
                                    &req[nreq++]);
        }
        for (size_t k = 0; k < g->where.nprocs && st == SHARDNET_OK && nk; k++)
            if (k != me_k)
                st = sn_transport_isend(g->net, g->where.procs[k], CROSS_TAG,
                                        h + lo[0],
                                        (hi[0] - lo[0]) * sizeof(float),
                                        &req[nreq++]);
    }
    done = wait_all(g->net, req, nreq);
    if (st == SHARDNET_OK)
        st = done;
    if (st == SHARDNET_OK)
        st = unstage_chunk(g, kind, h, 0, total, counts, off);
#undef CH
#undef CE
    /* (After a failure the job ends; requests still out are left, with
     * their buffers.) */
    free(req);
    if (st != SHARDNET_OK) {
        g->rest = NULL;
        g->rest_cap = 0;
    }
    return st;
}

/* A collective over devices on several processes, run by the last local
 * device to arrive: this process's ranks staged through host memory (in
 * global rank order), the processes combined by messages, the results
 * written back. */
shardnet_status sn_group_across_run(sn_group *g)
{
    const sn_group_where *w = &g->where;
    const sn_group_call *d0 = &g->pend[w->local[0]];
    size_t counts[SN_COMM_MAX] = {0}, off[SN_COMM_MAX], total;
    shardnet_status st = sn_group_agree(g, w->local, w->nlocal, d0);
    double t0 = sn_trace_on() ? sn_trace_now() : 0;
    char where[48];
    if (st != SHARDNET_OK)
        return st;
    if (d0->kind != SN_GROUP_ALLREDUCE)
        memcpy(counts, d0->counts, g->n * sizeof counts[0]);
    sn_group_offsets(counts, g->n, off);
    total = sn_group_total(g, d0);
    if (!grow(&g->host, &g->host_cap, total) ||
        !grow(&g->tmp, &g->tmp_cap, total))
        return oom();
    float *h = g->host;
    if (d0->kind == SN_GROUP_ALLGATHER) {
        for (size_t k = 0; k < w->nlocal && st == SHARDNET_OK; k++) {
            size_t r = w->local[k];
            if (counts[r])
                st = sn_buffer_read(g->pend[r].send.buf,
                                    g->pend[r].send.offset * sizeof(float),
                                    h + off[r], counts[r] * sizeof(float));
        }
        if (st == SHARDNET_OK)
            st = sn_group_gather(g, (char *)h, counts, off, sizeof(float),
                                 (char *)g->tmp);
        for (size_t k = 0; k < w->nlocal && st == SHARDNET_OK; k++) {
            size_t r = w->local[k];
            st = sn_buffer_write(g->pend[r].recv.buf,
                                 g->pend[r].recv.offset * sizeof(float), h,
                                 total * sizeof(float));
        }
    } else {
        st = cross_reduce(g, d0->kind, counts, off, total);
    }
    snprintf(where, sizeof where, " across %zu processes", w->nprocs);
    sn_group_trace(g, w->local, w->nlocal, d0, t0, where);
    return st;
}
