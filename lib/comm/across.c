/*
 * The collective group between processes: devices of a tensor split that
 * belong to several processes of a job.  At each collective the last
 * device of every process to arrive stages this process's ranks through
 * host memory (summed in rank order), the processes exchange by messages
 * of the job's transport (transport.h) only the parts the others keep and
 * add them in process order, and the results are written back to this
 * process's devices.  sn_group_gather() serves the same exchange for host data (the
 * pieces of a cut output).  See comm/group.h.
 *
 * In a codec other than fp32 (the context's sn_config.comm; comm/codec.h)
 * every message of a collective is encoded by its sender and decoded by
 * its receiver, and the sums are made of decoded values in the same
 * order as ever.  What one process sends all (an all-reduce's share, an
 * all-gather's pieces) it also decodes itself, so every process holds the
 * same bits.  The outputs (sn_group_gather) go as they are.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/codec.h"
#include "comm/group_impl.h"
#include "core/config.h"
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

/* The codec of this group's messages: its context's (sn_config.comm). */
static sn_codec group_codec(const sn_group *g)
{
    int c = sn_config_or_env(g->dev[g->where.local[0]]->config)->comm;
    return c > SN_CODEC_FP32 && c < SN_CODEC_COUNT ? (sn_codec)c
                                                   : SN_CODEC_FP32;
}

static int grow_bytes(unsigned char **buf, size_t *cap, size_t bytes)
{
    if (*cap >= bytes)
        return 1;
    unsigned char *nb = realloc(*buf, bytes ? bytes : 1);
    if (!nb)
        return 0;
    *buf = nb;
    *cap = bytes;
    return 1;
}

/* A message received in the codec: where it lies in g->wire_in and where
 * its floats go once it is in. */
typedef struct coded_in {
    size_t at, n;
    float *to;
} coded_in;

/* The messages of one exchange: sent as floats, or encoded into
 * g->wire_out and received into g->wire_in, decoded by wire_decode()
 * after their wait. */
typedef struct wire {
    sn_group *g;
    sn_codec c;
    size_t out_at, in_at; /* bytes used of wire_out, wire_in */
    coded_in *in;
    size_t nin;
} wire;

static shardnet_status wire_send(wire *w, unsigned dst, const float *x,
                                 size_t n, sn_transport_req **req)
{
    if (w->c == SN_CODEC_FP32)
        return sn_transport_isend(w->g->net, dst, CROSS_TAG, x,
                                  n * sizeof(float), req);
    unsigned char *m = w->g->wire_out + w->out_at;
    size_t bytes = sn_codec_encode(w->c, x, n, m, NULL);
    if (!bytes)
        return sn_error(SHARDNET_UNSUPPORTED,
                        "tensor split: %zu floats in one message", n);
    w->out_at += bytes;
    return sn_transport_isend(w->g->net, dst, CROSS_TAG, m, bytes, req);
}

static shardnet_status wire_recv(wire *w, unsigned src, float *x, size_t n,
                                 sn_transport_req **req)
{
    if (w->c == SN_CODEC_FP32)
        return sn_transport_irecv(w->g->net, src, CROSS_TAG, x,
                                  n * sizeof(float), req);
    coded_in *ci = &w->in[w->nin++];
    ci->at = w->in_at;
    ci->n = n;
    ci->to = x;
    w->in_at += sn_codec_bound(n);
    return sn_transport_irecv(w->g->net, src, CROSS_TAG,
                              w->g->wire_in + ci->at, sn_codec_bound(n), req);
}

/* Decode what came in (after its wait), and start the next exchange. */
static shardnet_status wire_decode(wire *w)
{
    shardnet_status st = SHARDNET_OK;
    for (size_t i = 0; i < w->nin && st == SHARDNET_OK; i++)
        st = sn_codec_decode(w->g->wire_in + w->in[i].at,
                             sn_codec_bound(w->in[i].n), w->in[i].to,
                             w->in[i].n, NULL);
    w->nin = w->in_at = w->out_at = 0;
    return st;
}

/* Room for an exchange of `out` float bytes out and `in` in, in `msgs`
 * messages at most. */
static int wire_room(wire *w, size_t out, size_t in, size_t msgs)
{
    if (w->c == SN_CODEC_FP32)
        return 1;
    return grow_bytes(&w->g->wire_out, &w->g->wire_out_cap,
                      out + msgs * SN_CODEC_HEADER) &&
           grow_bytes(&w->g->wire_in, &w->g->wire_in_cap,
                      in + msgs * SN_CODEC_HEADER);
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
    /* In a codec: what is sent is at most the whole once (each part goes
     * to the one process keeping it), what comes in the others' parts of
     * ours, or the others' shares. */
    wire w = {.g = g, .c = group_codec(g)};
    size_t in_bytes = (g->where.nprocs - 1) * mine * sizeof(float);
    if (in_bytes < total * sizeof(float))
        in_bytes = total * sizeof(float);
    if (w.c != SN_CODEC_FP32)
        w.in = calloc(maxreq, sizeof *w.in);
    /* rest: the other processes' parts of what this one keeps, one block
     * of `mine` floats each, in process order. */
    if (!req || (w.c != SN_CODEC_FP32 && !w.in) ||
        !wire_room(&w, total * sizeof(float), in_bytes, maxreq) ||
        !grow(&g->rest, &g->rest_cap, g->where.nprocs * mine + 1) ||
        !grow(&g->host, &g->host_cap, total) ||
        !grow(&g->tmp, &g->tmp_cap, total)) {
        free(req);
        free(w.in);
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
                st = wire_recv(&w, g->where.procs[k], rest + k * mine + at,
                               b - a, &req[nreq++]);
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
                    st = wire_send(&w, g->where.procs[k], h + a, b - a,
                                   &req[nreq++]);
            }
        }
    }
    /* Every part in; every part of ours out (an all-reduce receives the
     * shares into the very ranges it sent from). */
    shardnet_status done = wait_all(g->net, req, nreq);
    if (st == SHARDNET_OK)
        st = done;
    if (st == SHARDNET_OK)
        st = wire_decode(&w);
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
            st = wire_recv(&w, g->where.procs[k], h + klo[0],
                           khi[0] - klo[0], &req[nreq++]);
        }
        const void *share = h + lo[0];
        size_t bytes = nk ? (hi[0] - lo[0]) * sizeof(float) : 0;
        /* In a codec: encoded once for all, and decoded here too, so that
         * this process holds the bits the others get. */
        if (st == SHARDNET_OK && nk && w.c != SN_CODEC_FP32) {
            share = g->wire_out;
            bytes = sn_codec_encode(w.c, h + lo[0], hi[0] - lo[0],
                                    g->wire_out, NULL);
            st = bytes ? sn_codec_decode(g->wire_out, bytes, h + lo[0],
                                         hi[0] - lo[0], NULL)
                       : sn_error(SHARDNET_UNSUPPORTED,
                                  "tensor split: %zu floats in one message",
                                  hi[0] - lo[0]);
        }
        for (size_t k = 0; k < g->where.nprocs && st == SHARDNET_OK && nk; k++)
            if (k != me_k)
                st = sn_transport_isend(g->net, g->where.procs[k], CROSS_TAG,
                                        share, bytes, &req[nreq++]);
    }
    done = wait_all(g->net, req, nreq);
    if (st == SHARDNET_OK)
        st = done;
    if (st == SHARDNET_OK)
        st = wire_decode(&w);
    if (st == SHARDNET_OK)
        st = unstage_chunk(g, kind, h, 0, total, counts, off);
#undef CH
#undef CE
    /* (After a failure the job ends; requests still out are left, with
     * their buffers.) */
    free(req);
    free(w.in);
    if (st != SHARDNET_OK) {
        g->rest = NULL;
        g->rest_cap = 0;
        g->wire_out = g->wire_in = NULL;
        g->wire_out_cap = g->wire_in_cap = 0;
    }
    return st;
}

/* This process's pieces of full (ranks' counts[r] floats at off[r]),
 * packed back to back into packed, or (unpack) back again. */
static size_t pack(const sn_group *g, unsigned q, float *full,
                   const size_t *counts, const size_t *off, float *packed,
                   int unpack)
{
    size_t at = 0;
    for (size_t r = 0; r < g->n; r++)
        if (g->dev[r]->process == q) {
            if (unpack)
                memcpy(full + off[r], packed + at, counts[r] * sizeof(float));
            else
                memcpy(packed + at, full + off[r], counts[r] * sizeof(float));
            at += counts[r];
        }
    return at;
}

/*
 * The all-gather of a collective in a codec: each process's pieces are
 * one message, sent to the root, which sends every process's messages,
 * as they came, back to back in process order, to every other; each
 * process decodes them all, its own included, so every process holds the
 * same bits.  tmp: scratch of total floats.
 */
static shardnet_status coded_gather(sn_group *g, sn_codec c, float *full,
                                    const size_t *counts, const size_t *off,
                                    float *tmp)
{
    const sn_group_where *w = &g->where;
    unsigned root = w->procs[0];
    size_t nown = pack(g, w->me, full, counts, off, tmp, 0), mine;
    size_t bound_all = 0, at;
    shardnet_status st = SHARDNET_OK;
    for (size_t k = 0; k < w->nprocs; k++)
        bound_all += sn_codec_bound(owned(g, w->procs[k], counts, 1));
    /* wire_out: this process's message, then (the root) all of them. */
    if (!grow_bytes(&g->wire_out, &g->wire_out_cap,
                    sn_codec_bound(nown) + bound_all) ||
        !grow_bytes(&g->wire_in, &g->wire_in_cap, bound_all))
        return oom();
    mine = sn_codec_encode(c, tmp, nown, g->wire_out, NULL);
    if (!mine)
        return sn_error(SHARDNET_UNSUPPORTED,
                        "tensor split: %zu floats in one message", nown);
    if (w->me != root) {
        if ((st = sn_transport_send(g->net, root, CROSS_TAG, g->wire_out,
                                    mine)) != SHARDNET_OK ||
            (st = sn_transport_recv(g->net, root, CROSS_TAG, g->wire_in,
                                    bound_all)) != SHARDNET_OK)
            return st;
    } else {
        /* The others' messages, each into room for its bound; then all,
         * back to back, after this process's own in wire_out. */
        unsigned char *cat = g->wire_out + mine;
        at = 0;
        for (size_t k = 1; k < w->nprocs && st == SHARDNET_OK; k++) {
            unsigned q = w->procs[k];
            st = sn_transport_recv(g->net, q, CROSS_TAG, g->wire_in + at,
                                   sn_codec_bound(owned(g, q, counts, 1)));
            at += sn_codec_bound(owned(g, q, counts, 1));
        }
        size_t len = mine, in_at = 0;
        memcpy(cat, g->wire_out, mine);
        for (size_t k = 1; k < w->nprocs && st == SHARDNET_OK; k++) {
            size_t n = owned(g, w->procs[k], counts, 1), used = 0;
            st = sn_codec_decode(g->wire_in + in_at, sn_codec_bound(n), tmp,
                                 n, &used);
            memcpy(cat + len, g->wire_in + in_at, used);
            len += used;
            in_at += sn_codec_bound(n);
        }
        for (size_t k = 1; k < w->nprocs && st == SHARDNET_OK; k++)
            st = sn_transport_send(g->net, w->procs[k], CROSS_TAG, cat, len);
        if (st != SHARDNET_OK)
            return st;
        memcpy(g->wire_in, cat, len);
    }
    /* Every process's message, in process order, into its pieces. */
    at = 0;
    for (size_t k = 0; k < w->nprocs && st == SHARDNET_OK; k++) {
        unsigned q = w->procs[k];
        size_t n = owned(g, q, counts, 1), used = 0;
        st = sn_codec_decode(g->wire_in + at, bound_all - at, tmp, n, &used);
        if (st == SHARDNET_OK)
            pack(g, q, full, counts, off, tmp, 1);
        at += used;
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
    sn_codec codec = group_codec(g);
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
        if (st == SHARDNET_OK && codec != SN_CODEC_FP32)
            st = coded_gather(g, codec, h, counts, off, g->tmp);
        else if (st == SHARDNET_OK)
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
    snprintf(where, sizeof where, " across %zu processes%s%s", w->nprocs,
             codec != SN_CODEC_FP32 ? ", " : "",
             codec != SN_CODEC_FP32 ? sn_codec_name(codec) : "");
    sn_group_trace(g, w->local, w->nlocal, d0, t0, where);
    return st;
}
