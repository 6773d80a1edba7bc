/*
 * Host-staged collectives: one chunk pipeline serves them all.
 *
 * A call is described as a "job" over a global index space [0, total):
 * rank r reads its input segment [ilo, ihi) from view in (global index g at
 * element in.offset + g - ilo) and writes its output segment [olo, ohi) to
 * view out.  In REDUCE mode every input spans [0, total) and the chunk's
 * result is their sum; in GATHER mode inputs are disjoint and the chunk's
 * result is their union.  All-reduce, reduce-scatter, all-gather, broadcast
 * and send/recv differ only in these segments (set, with the checks of
 * each call, by collective_calls.c; this file runs the jobs and owns the
 * comm's threads and memory).
 *
 * Chunk i = [i * chunk, min(total, (i + 1) * chunk)) moves through SLOTS
 * host slots: helper r reads chunk k, then writes chunk k - 1, while the
 * calling thread computes chunk k - 1 or k.  Progress is three counters
 * (read_done, write_done per helper; computed for the caller) under one
 * mutex; every wait also watches `abort`, so a failing device stops the
 * whole job and no thread stays blocked.
 */
#include <config.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/collective_impl.h"

/* --- job state ---------------------------------------------------------- */

/* Record the first failure (with the failing thread's message) and stop
 * everyone.  Called with comm->mu held. */
static void fail_locked(sn_comm *c, shardnet_status st)
{
    if (!c->err) {
        c->err = st;
        snprintf(c->errmsg, sizeof c->errmsg, "%s", shardnet_last_error());
    }
    c->abort = 1;
    pthread_cond_broadcast(&c->cv);
}

static void fail(sn_comm *c, shardnet_status st)
{
    pthread_mutex_lock(&c->mu);
    fail_locked(c, st);
    pthread_mutex_unlock(&c->mu);
}

static size_t chunk_lo(const sn_comm *c, size_t i)
{
    return i * c->chunk;
}

static size_t chunk_hi(const sn_comm *c, size_t i)
{
    size_t hi = (i + 1) * c->chunk;
    return hi < c->total ? hi : c->total;
}

/* Every helper that copies has written chunks below `upto`. */
static int writes_done_locked(const sn_comm *c, size_t upto)
{
    for (size_t r = 0; r < c->n; r++)
        if (!c->w[r].mapped && c->w[r].write_done < upto)
            return 0;
    return 1;
}

/* --- helper threads ----------------------------------------------------- */

static shardnet_status map_views(worker *w)
{
    int has_in = w->ilo < w->ihi, has_out = w->olo < w->ohi;
    size_t in_lo = w->in.offset, in_hi = in_lo + (w->ihi - w->ilo);
    size_t out_lo = w->out.offset, out_hi = out_lo + (w->ohi - w->olo);
    shardnet_status st;
    void *p;

    if (has_in && has_out && w->in.buf == w->out.buf) {
        /* One mapping over both, so in-place elements are one address. */
        size_t lo = in_lo < out_lo ? in_lo : out_lo;
        size_t hi = in_hi > out_hi ? in_hi : out_hi;
        st = sn_buffer_map(w->in.buf, lo * sizeof(float),
                           (hi - lo) * sizeof(float),
                           SN_MAP_READ | SN_MAP_WRITE, &p);
        if (st != SHARDNET_OK)
            return st;
        w->map_in = p;
        w->inp = (float *)p + (in_lo - lo);
        w->outp = (float *)p + (out_lo - lo);
        return SHARDNET_OK;
    }
    if (has_in) {
        st = sn_buffer_map(w->in.buf, in_lo * sizeof(float),
                           (in_hi - in_lo) * sizeof(float), SN_MAP_READ, &p);
        if (st != SHARDNET_OK)
            return st;
        w->map_in = p;
        w->inp = p;
    }
    if (has_out) {
        st = sn_buffer_map(w->out.buf, out_lo * sizeof(float),
                           (out_hi - out_lo) * sizeof(float), SN_MAP_WRITE,
                           &p);
        if (st != SHARDNET_OK)
            return st;
        w->map_out = p;
        w->outp = p;
    }
    return SHARDNET_OK;
}

static shardnet_status unmap_views(worker *w)
{
    shardnet_status st = SHARDNET_OK, st2;
    if (w->map_in) {
        st = sn_buffer_unmap(w->in.buf, w->map_in);
        w->map_in = NULL;
    }
    if (w->map_out) {
        st2 = sn_buffer_unmap(w->out.buf, w->map_out);
        w->map_out = NULL;
        if (st == SHARDNET_OK)
            st = st2;
    }
    return st;
}

/* Read chunk k of w's input into its slot; called without the lock. */
static shardnet_status read_chunk(sn_comm *c, worker *w, size_t k)
{
    size_t a = chunk_lo(c, k), b = chunk_hi(c, k), lo, hi;
    float *dst;

    if (!sn_comm_clip(a, b, w->ilo, w->ihi, &lo, &hi))
        return SHARDNET_OK;
    if (c->mode == JOB_REDUCE)
        dst = c->stage[w->rank] + (k % SLOTS) * c->chunk + (lo - a);
    else
        dst = c->res + (k % SLOTS) * c->chunk + (lo - a);
    return sn_buffer_read(w->in.buf,
                          (w->in.offset + (lo - w->ilo)) * sizeof(float), dst,
                          (hi - lo) * sizeof(float));
}

static shardnet_status write_chunk(sn_comm *c, worker *w, size_t j,
                                   const float *src)
{
    size_t a = chunk_lo(c, j), b = chunk_hi(c, j), lo, hi;

    if (!sn_comm_clip(a, b, w->olo, w->ohi, &lo, &hi))
        return SHARDNET_OK;
    return sn_buffer_write(w->out.buf,
                           (w->out.offset + (lo - w->olo)) * sizeof(float),
                           src + (lo - a), (hi - lo) * sizeof(float));
}

/* The copy pipeline of one helper: read k, then write k - 1. */
static void run_copies(sn_comm *c, worker *w)
{
    size_t m = c->nchunks;

    for (size_t k = 0; k <= m; k++) {
        shardnet_status st;
        if (k < m) {
            size_t a = chunk_lo(c, k), b = chunk_hi(c, k), lo, hi;
            if (sn_comm_clip(a, b, w->ilo, w->ihi, &lo, &hi)) {
                /* The slot is free once chunk k - SLOTS is computed and,
                 * when we read into the shared result slot, written back. */
                size_t free_at = k >= SLOTS ? k - SLOTS + 1 : 0;
                pthread_mutex_lock(&c->mu);
                while (!c->abort &&
                       (c->computed < free_at ||
                        (c->mode == JOB_GATHER &&
                         !writes_done_locked(c, free_at))))
                    pthread_cond_wait(&c->cv, &c->mu);
                int stop = c->abort;
                pthread_mutex_unlock(&c->mu);
                if (stop)
                    return;
                st = read_chunk(c, w, k);
                if (st != SHARDNET_OK) {
                    fail(c, st);
                    return;
                }
            }
            pthread_mutex_lock(&c->mu);
            w->read_done = k + 1;
            pthread_cond_broadcast(&c->cv);
            pthread_mutex_unlock(&c->mu);
        }
        if (k >= 1) {
            size_t j = k - 1, a = chunk_lo(c, j), b = chunk_hi(c, j), lo, hi;
            if (sn_comm_clip(a, b, w->olo, w->ohi, &lo, &hi)) {
                const float *src;
                pthread_mutex_lock(&c->mu);
                while (!c->abort && c->computed < j + 1)
                    pthread_cond_wait(&c->cv, &c->mu);
                src = c->src[j % SLOTS];
                int stop = c->abort;
                pthread_mutex_unlock(&c->mu);
                if (stop)
                    return;
                st = write_chunk(c, w, j, src);
                if (st != SHARDNET_OK) {
                    fail(c, st);
                    return;
                }
            }
            pthread_mutex_lock(&c->mu);
            w->write_done = j + 1;
            pthread_cond_broadcast(&c->cv);
            pthread_mutex_unlock(&c->mu);
        }
    }
}

static void run_job(sn_comm *c, worker *w)
{
    shardnet_status st = SHARDNET_OK;

    if (w->mapped)
        st = map_views(w);
    pthread_mutex_lock(&c->mu);
    if (st != SHARDNET_OK)
        fail_locked(c, st);
    w->ready = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);

    if (!w->mapped) {
        run_copies(c, w);
        pthread_mutex_lock(&c->mu);
        w->copies_over = 1;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        return;
    }
    /* The caller reads and writes the mapping, and helpers may write from
     * it (a broadcast root): release it once all of them are done. */
    pthread_mutex_lock(&c->mu);
    for (;;) {
        int busy = !c->caller_done;
        for (size_t r = 0; r < c->n && !busy; r++)
            busy = !c->w[r].mapped && !c->w[r].copies_over;
        if (!busy)
            break;
        pthread_cond_wait(&c->cv, &c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    st = unmap_views(w);
    if (st != SHARDNET_OK)
        fail(c, st);
}

static void *helper_main(void *arg)
{
    worker *w = arg;
    sn_comm *c = w->comm;

    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->quit && c->job == w->seen)
            pthread_cond_wait(&c->cv, &c->mu);
        if (c->quit)
            break;
        w->seen = c->job;
        pthread_mutex_unlock(&c->mu);
        run_job(c, w);
        pthread_mutex_lock(&c->mu);
        c->finished++;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* --- the calling thread's part ----------------------------------------- */

/* Where rank r's input for global index g lies on the host. */
static const float *input_at(const sn_comm *c, const worker *w, size_t g)
{
    if (w->mapped)
        return w->inp + (g - w->ilo);
    return c->stage[w->rank] + ((g / c->chunk) % SLOTS) * c->chunk +
           (g % c->chunk);
}

/* Write global elements [lo, hi) to the mapped outputs; result holds
 * global element a. */
static void store_mapped(sn_comm *c, const float *result, size_t a, size_t lo,
                         size_t hi)
{
    for (size_t r = 0; r < c->n; r++) {
        worker *w = &c->w[r];
        size_t s, e;
        if (!w->mapped || !sn_comm_clip(lo, hi, w->olo, w->ohi, &s, &e))
            continue;
        float *dst = w->outp + (s - w->olo);
        const float *src = result + (s - a);
        if (dst != src)
            memmove(dst, src, (e - s) * sizeof(float));
    }
}

/* Where [lo, b) first crosses the start or end of a mapped output's
 * segment (b if nowhere): up to there the same outputs take the sum. */
static size_t next_cut(const sn_comm *c, size_t lo, size_t b)
{
    for (size_t r = 0; r < c->n; r++) {
        const worker *w = &c->w[r];
        if (w->mapped && w->olo > lo && w->olo < b)
            b = w->olo;
        if (w->mapped && w->ohi > lo && w->ohi < b)
            b = w->ohi;
    }
    return b;
}

/* The sum of global elements [lo, hi) in one pass from every rank's
 * input into out[0 .. nout) and, where first is NULL, into every mapped
 * output whose segment holds [lo, hi). */
static void sum_range(sn_comm *c, size_t lo, size_t hi, float *first)
{
    const float *in[SN_COMM_MAX];
    float *out[SN_COMM_MAX + 1];
    size_t nout = 0;
    for (size_t r = 0; r < c->n; r++)
        in[r] = input_at(c, &c->w[r], lo);
    if (first)
        out[nout++] = first;
    for (size_t r = 0; r < c->n && !first; r++) {
        const worker *w = &c->w[r];
        if (w->mapped && w->olo <= lo && hi <= w->ohi)
            out[nout++] = w->outp + (lo - w->olo);
    }
    if (nout)
        sn_comm_sum(out, nout, in, c->n, hi - lo);
}

/* Chunk i of a sum; use_res: into the chunk's result slot (some helper
 * writes it back), then copied to the mapped outputs; else straight into
 * the mapped outputs, in pieces that the same outputs take. */
static void compute_reduce(sn_comm *c, size_t i, int use_res)
{
    size_t a = chunk_lo(c, i), b = chunk_hi(c, i);
    float *res = c->res + (i % SLOTS) * c->chunk;

    if (!use_res) {
        for (size_t lo = a, hi; lo < b; lo = hi) {
            hi = next_cut(c, lo, b);
            sum_range(c, lo, hi, NULL);
        }
        c->src[i % SLOTS] = NULL;
        return;
    }
    sum_range(c, a, b, res);
    store_mapped(c, res, a, a, b);
    c->src[i % SLOTS] = res;
}

static void compute_gather(sn_comm *c, size_t i)
{
    size_t a = chunk_lo(c, i), b = chunk_hi(c, i), lo, hi;
    float *res = c->res + (i % SLOTS) * c->chunk;
    const float *result = res;

    for (size_t r = 0; r < c->n; r++) {
        worker *w = &c->w[r];
        if (!w->mapped || !sn_comm_clip(a, b, w->ilo, w->ihi, &lo, &hi))
            continue;
        if (lo == a && hi == b)
            result = w->inp + (a - w->ilo); /* one source: no copy */
        else
            memcpy(res + (lo - a), w->inp + (lo - w->ilo),
                   (hi - lo) * sizeof(float));
    }
    store_mapped(c, result, a, a, b);
    c->src[i % SLOTS] = result;
}

const char *sn_comm_op_name(job_op op)
{
    switch (op) {
    case OP_ALLREDUCE: return "all-reduce";
    case OP_ALLGATHER: return "all-gather";
    case OP_REDUCE_SCATTER: return "reduce-scatter";
    case OP_BROADCAST: return "broadcast";
    case OP_SENDRECV: return "send/recv";
    }
    return "collective";
}

/* The job whose segments are in c->w[*]: its chunks through the helpers
 * and the caller. */
shardnet_status sn_comm_run(sn_comm *c)
{
    int any_copy_out = 0;
    shardnet_status st = SHARDNET_OK;

    for (size_t r = 0; r < c->n; r++) {
        worker *w = &c->w[r];
        sn_device *dev = c->devs[r];
        w->mapped = !c->no_map && dev->info.host_unified &&
                    dev->ops->buffer_map && dev->ops->buffer_unmap;
        w->inp = w->outp = NULL;
        w->map_in = w->map_out = NULL;
        w->ready = 0;
        w->copies_over = 0;
        w->read_done = w->write_done = 0;
        if (!w->mapped && w->olo < w->ohi)
            any_copy_out = 1;
    }
    c->nchunks = (c->total + c->chunk - 1) / c->chunk;
    c->computed = 0;
    c->caller_done = 0;
    c->abort = 0;
    c->err = SHARDNET_OK;
    c->errmsg[0] = '\0';
    for (size_t s = 0; s < SLOTS; s++)
        c->src[s] = NULL;

    /* Every device shares memory with the host: this thread maps, reduces
     * and unmaps by itself; waking helpers would cost more than it saves. */
    int all_mapped = 1;
    for (size_t r = 0; r < c->n; r++)
        all_mapped &= c->w[r].mapped;
    if (all_mapped) {
        size_t r_mapped = 0;
        for (; r_mapped < c->n && st == SHARDNET_OK; r_mapped++)
            st = map_views(&c->w[r_mapped]);
        for (size_t i = 0; i < c->nchunks && st == SHARDNET_OK; i++) {
            if (c->mode == JOB_REDUCE)
                compute_reduce(c, i, 0);
            else
                compute_gather(c, i);
        }
        for (size_t r = 0; r < r_mapped; r++) {
            shardnet_status st2 = unmap_views(&c->w[r]);
            if (st == SHARDNET_OK)
                st = st2;
        }
        if (st != SHARDNET_OK)
            return sn_error_prefix(st, "%s over %zu devices",
                                   sn_comm_op_name(c->op), c->n);
        return SHARDNET_OK;
    }

    pthread_mutex_lock(&c->mu);
    c->finished = 0;
    c->job++;
    pthread_cond_broadcast(&c->cv);
    for (size_t r = 0; r < c->n; r++)
        while (!c->abort && !c->w[r].ready)
            pthread_cond_wait(&c->cv, &c->mu);

    for (size_t i = 0; i < c->nchunks && !c->abort; i++) {
        size_t free_at = i >= SLOTS ? i - SLOTS + 1 : 0;
        for (size_t r = 0; r < c->n && !c->abort; r++) {
            worker *w = &c->w[r];
            while (!c->abort && !w->mapped &&
                   (w->read_done < i + 1 || w->write_done < free_at))
                pthread_cond_wait(&c->cv, &c->mu);
        }
        if (c->abort)
            break;
        pthread_mutex_unlock(&c->mu);
        if (c->mode == JOB_REDUCE)
            compute_reduce(c, i, any_copy_out);
        else
            compute_gather(c, i);
        pthread_mutex_lock(&c->mu);
        c->computed = i + 1;
        pthread_cond_broadcast(&c->cv);
    }
    c->caller_done = 1;
    pthread_cond_broadcast(&c->cv);
    while (c->finished < c->n)
        pthread_cond_wait(&c->cv, &c->mu);
    st = c->err;
    pthread_mutex_unlock(&c->mu);
    if (st != SHARDNET_OK)
        return sn_error(st, "%s over %zu devices: %s",
                        sn_comm_op_name(c->op), c->n, c->errmsg);
    return SHARDNET_OK;
}

/* --- lifetime ------------------------------------------------------------ */

/* Staging for dev of count floats (sn_staging_alloc: pinned where its
 * backend has it; aligned to ALIGN and rounded up to whole lines). */
static float *staging_floats(sn_device *dev, size_t count)
{
    return sn_staging_alloc(dev, count * sizeof(float));
}

shardnet_status sn_comm_create(sn_device *const *devs, size_t n,
                               const sn_comm_opts *opts, sn_comm **out)
{
    sn_comm_opts o = {0};
    sn_comm *c;
    size_t chunk_bytes;
    int rc;

    if (!out)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "comm: out is NULL");
    *out = NULL;
    if (n == 0 || n > SN_COMM_MAX)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "comm: %zu devices; a comm takes 1 to %d", n,
                        SN_COMM_MAX);
    if (!devs)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "comm: devices are NULL");
    for (size_t r = 0; r < n; r++) {
        if (!devs[r])
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "comm: device of rank %zu is NULL", r);
        for (size_t q = 0; q < r; q++)
            if (devs[q] == devs[r])
                return sn_error(SHARDNET_INVALID_ARGUMENT,
                                "comm: %s is both rank %zu and rank %zu; "
                                "ranks need distinct devices",
                                devs[r]->info.name, q, r);
    }
    if (opts)
        o = *opts;
    chunk_bytes = o.chunk_bytes ? o.chunk_bytes : DEFAULT_CHUNK_BYTES;
    chunk_bytes = (chunk_bytes + ALIGN - 1) / ALIGN * ALIGN;
    if (chunk_bytes > ((size_t)1 << 30))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "comm: chunk of %zu bytes (at most 1 GiB)",
                        chunk_bytes);

    c = aligned_alloc(ALIGN, (sizeof *c + ALIGN - 1) / ALIGN * ALIGN);
    if (!c)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "comm: record");
    memset(c, 0, sizeof *c);
    c->n = n;
    c->chunk = chunk_bytes / sizeof(float);
    c->no_map = o.no_map;
    for (size_t r = 0; r < n; r++)
        c->devs[r] = devs[r];
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);

    /* The results every device reads: in one device's staging memory. */
    c->res = staging_floats(sn_staging_owner(devs, n), SLOTS * c->chunk);
    if (!c->res)
        goto oom;
    for (size_t r = 0; r < n; r++) {
        if (!c->no_map && devs[r]->info.host_unified &&
            devs[r]->ops->buffer_map && devs[r]->ops->buffer_unmap)
            continue; /* mapped: no staging */
        c->stage[r] = staging_floats(devs[r], SLOTS * c->chunk);
        if (!c->stage[r])
            goto oom;
    }
    for (size_t r = 0; r < n; r++) {
        c->w[r].comm = c;
        c->w[r].rank = r;
        rc = pthread_create(&c->w[r].thread, NULL, helper_main, &c->w[r]);
        if (rc != 0) {
            sn_comm_free(c);
            return sn_error(SHARDNET_INTERNAL,
                            "comm: starting helper thread %zu failed: %s", r,
                            strerror(rc));
        }
        c->started++;
    }
    *out = c;
    return SHARDNET_OK;

oom:
    sn_comm_free(c);
    return sn_error(SHARDNET_OUT_OF_MEMORY,
                    "comm: %zu bytes of staging per device",
                    SLOTS * chunk_bytes);
}

void sn_comm_free(sn_comm *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->quit = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    for (size_t r = 0; r < c->started; r++)
        pthread_join(c->w[r].thread, NULL);
    for (size_t r = 0; r < c->n; r++)
        sn_staging_free(c->stage[r]);
    sn_staging_free(c->res);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

size_t sn_comm_size(const sn_comm *c)
{
    return c ? c->n : 0;
}

sn_device *sn_comm_device(const sn_comm *c, size_t r)
{
    return c && r < c->n ? c->devs[r] : NULL;
}
