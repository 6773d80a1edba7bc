/* Layer split: running the stages (pipeline.c builds them): one thread per
 * stage (per replica of a replicated stage, each taking its share of the
 * micro-batches in turn), micro-batches handed from stage to stage through
 * host memory or, between processes, by messages, and batches streamed
 * back to back.  See pipeline.h. */
#include <config.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/codec.h"
#include "ops/registry.h"
#include "runtime/pipeline_impl.h"
#include "plan/layer_split.h"
#include "plan/node_costs.h"
#include "plan/profile.h"
#include "core/trace.h"

/* --- running ------------------------------------------------------------- */

static int graph_input_slot(const sn_graph *g, int v)
{
    for (size_t i = 0; i < g->ninputs; i++)
        if (g->inputs[i] == v)
            return (int)i;
    return -1;
}

/* Item k's binding of parent value v for a stage input. */
static int bind_input(sn_pipeline *p, size_t k, int v, sn_binding *b)
{
    int slot = graph_input_slot(p->g, v);
    size_t j = k % p->micro;
    if (slot >= 0) {
        const sn_binding *in = &p->bin[(k / p->micro) % 2][slot];
        *b = *in;
        if (p->micro > 1 && in->rank > 0 && (size_t)in->dims[0] == p->rows) {
            size_t row = in->nbytes / p->rows;
            size_t first = j * p->chunk;
            size_t take = p->rows - first < p->chunk ? p->rows - first
                                                      : p->chunk;
            b->dims[0] = (int64_t)take;
            b->data = (const char *)in->data + first * row;
            b->nbytes = take * row;
        }
        return 1;
    }
    const sn_host_tensor *t = &p->vals[k % (2 * p->micro)][v];
    if (!t->data && t->nbytes)
        return 0;
    b->dtype = t->dtype;
    b->rank = t->rank;
    memcpy(b->dims, t->dims, sizeof b->dims);
    b->data = t->data ? t->data : "";
    b->nbytes = t->nbytes;
    return 1;
}

/* Room for `bytes` in boundary value v of micro-batch slot `slot`, its
 * memory kept while big enough: staging memory of p->val_dev (pinned for
 * a GPU).  On failure the value has none. */
static shardnet_status value_room(sn_pipeline *p, size_t slot, size_t v,
                                  size_t bytes)
{
    sn_host_tensor *d = &p->vals[slot][v];
    size_t *cap = &p->cap[slot][v];
    if (d->data && *cap >= bytes)
        return SHARDNET_OK;
    sn_staging_free(d->data);
    *cap = 0;
    if (!(d->data = sn_staging_alloc(p->val_dev, bytes ? bytes : 1)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "pipeline values");
    *cap = bytes;
    return SHARDNET_OK;
}

/* A group stage's tensor split for inputs shaped like b: kept per shape
 * (most recent first), made on first use, its strategies searched (those
 * a plan file fixed kept) and what the search did kept beside it. */
static shardnet_status stage_split_for(stage *st, const sn_binding *b,
                                       sn_tensor_split **out)
{
    double speed[SN_COLL_MAX];
    shardnet_status rc;
    for (int k = 0; k < STAGE_PLANS; k++)
        if (st->split[k].ts && sn_tensor_split_matches(st->split[k].ts, b)) {
            stage_split hit = st->split[k];
            memmove(&st->split[1], &st->split[0],
                    (size_t)k * sizeof st->split[0]);
            st->split[0] = hit;
            *out = hit.ts;
            return SHARDNET_OK;
        }
    for (size_t d = 0; d < st->ngrp; d++)
        speed[d] = sn_device_profile(st->grp[d])->gemm_flops;
    size_t cap = sn_tensor_split_search_room(st->g);
    stage_split made = {.search = malloc(cap)};
    if ((rc = sn_tensor_split_search(st->g, st->grp, st->ngrp, speed, b,
                                     st->strat, st->nstrat, NULL, &made.ts,
                                     made.search,
                                     made.search ? cap : 0)) != SHARDNET_OK) {
        free(made.search);
        return rc;
    }
    sn_tensor_split_free(st->split[STAGE_PLANS - 1].ts);
    free(st->split[STAGE_PLANS - 1].search);
    memmove(&st->split[1], &st->split[0],
            (STAGE_PLANS - 1) * sizeof st->split[0]);
    st->split[0] = made;
    *out = made.ts;
    return SHARDNET_OK;
}

static shardnet_status run_stage(sn_pipeline *p, replica *r, size_t j)
{
    stage *st = r->st;
    size_t s = st->index;
    sn_binding b[64];
    sn_plan *plan = NULL;
    shardnet_status rc;
    if (st->g->ninputs > 64)
        return sn_error(SHARDNET_UNSUPPORTED, "stage %zu has too many inputs", s);
    for (size_t i = 0; i < st->g->ninputs; i++)
        if (!bind_input(p, j, st->in_parent[i], &b[i]))
            return sn_error(SHARDNET_INTERNAL, "stage %zu: missing input", s);
    sn_tensor_split *ts = NULL;
    if (st->ngrp > 1) {
        if ((rc = stage_split_for(st, b, &ts)) != SHARDNET_OK ||
            (rc = sn_tensor_split_run(ts, b)) != SHARDNET_OK)
            return sn_error_prefix(rc, "stage %zu (tensor split over %zu "
                                   "devices)", s, st->ngrp);
    } else {
        if ((rc = sn_plan_cache_get(r->plans, STAGE_PLANS, st->g, r->w, b,
                                    sn_op_find, &plan)) != SHARDNET_OK)
            return sn_error_prefix(rc, "stage %zu on %s", s,
                                   r->dev->info.name);
        if ((rc = sn_plan_run(plan, b)) != SHARDNET_OK)
            return sn_error_prefix(rc, "stage %zu on %s", s,
                                   r->dev->info.name);
    }
    /* Keep what later stages read, for this micro-batch. */
    for (size_t i = 0; i < st->g->noutputs; i++) {
        const sn_host_tensor *t = ts ? sn_tensor_split_output(ts, i)
                                     : sn_plan_output(plan, i);
        size_t slot = j % (2 * p->micro), v = (size_t)st->out_parent[i];
        sn_host_tensor *d = &p->vals[slot][v];
        if ((rc = value_room(p, slot, v, t->nbytes)) != SHARDNET_OK)
            return rc;
        void *data = d->data;
        *d = *t;
        d->name = NULL;
        d->data = data;
        memcpy(d->data, t->data, t->nbytes);
    }
    return SHARDNET_OK;
}

/* Stage s has finished item j (its slot is not reused before every stage
 * reading it is through: two batches are in flight at most). */
static int item_finished(const sn_pipeline *p, size_t s, size_t j)
{
    return atomic_load(&p->item[s * p->nslots + j % p->nslots]) > j;
}

/* Item j's inputs of stage s are there: its batch is fed and every stage
 * it reads from has finished the item (lock held). */
static int inputs_ready(const sn_pipeline *p, size_t s, size_t j)
{
    if (p->fed <= j / p->micro)
        return 0;
    for (size_t t = 0; t < s; t++)
        if (p->st[s].dep[t] && !item_finished(p, t, j))
            return 0;
    return 1;
}

/* Header of a value between processes, then its bytes: nbytes of them,
 * or a message of `wire` bytes in a codec (codec.h; float32 values, when
 * the sender's context says so). */
typedef struct wire_value {
    int32_t dtype, rank;
    int64_t dims[SN_MAX_DIMS];
    uint64_t nbytes;
    uint64_t wire; /* 0: the bytes as they are */
} wire_value;

/* Sends of a local stage still in flight: per value slot, each value's
 * header and data requests (the header kept alive with them). */
typedef struct in_flight {
    sn_transport *net;      /* the job's, that carries them */
    size_t nper;            /* values sent per item, over all processes */
    sn_transport_req **req; /* [slot][2 * nper] */
    wire_value *hdr;        /* [slot][nper] */
    size_t slots;
} in_flight;

/* Finish the sends of one slot (before its values are written again). */
static shardnet_status finish_sends(in_flight *f, size_t slot)
{
    shardnet_status rc = SHARDNET_OK;
    for (size_t k = 0; f->req && k < 2 * f->nper; k++) {
        sn_transport_req **r = &f->req[slot * 2 * f->nper + k];
        shardnet_status r2 = sn_transport_wait(f->net, *r);
        *r = NULL;
        if (rc == SHARDNET_OK)
            rc = r2;
    }
    return rc;
}

/* The codec stage s's float32 values travel in to other processes (its
 * device's context's), and the buffer of slot's value `at` encoded. */
static sn_codec stage_codec(const stage *st)
{
    int c = sn_config_or_env(st->dev->config)->comm;
    return c > SN_CODEC_FP32 && c < SN_CODEC_COUNT ? (sn_codec)c
                                                   : SN_CODEC_FP32;
}

static unsigned char *enc_buffer(stage *st, const in_flight *f, size_t slot,
                                 size_t at, size_t bytes)
{
    size_t k = slot * f->nper + at;
    if (st->nenc < f->slots * f->nper) {
        size_t n = f->slots * f->nper;
        unsigned char **e = realloc(st->enc, n * sizeof *e);
        if (!e)
            return NULL;
        st->enc = e;
        size_t *c = realloc(st->enc_cap, n * sizeof *c);
        if (!c)
            return NULL;
        st->enc_cap = c;
        for (size_t i = st->nenc; i < n; i++)
            st->enc[i] = NULL, st->enc_cap[i] = 0;
        st->nenc = n;
    }
    if (st->enc_cap[k] < bytes) {
        unsigned char *b = realloc(st->enc[k], bytes);
        if (!b)
            return NULL;
        st->enc[k] = b;
        st->enc_cap[k] = bytes;
    }
    return st->enc[k];
}

/* Start sending item j's values that other processes read from local stage
 * s; they go while the stage computes the next items. */
static shardnet_status send_values(sn_pipeline *p, size_t s, size_t j,
                                   in_flight *f)
{
    stage *st = &p->st[s];
    sn_codec codec = stage_codec(st);
    size_t slot = j % (2 * p->micro), at = 0;
    sn_host_tensor *vals = p->vals[slot];
    shardnet_status rc = SHARDNET_OK;
    for (unsigned q = 0; q < p->nproc && rc == SHARDNET_OK; q++)
        for (size_t k = 0; k < st->nsend[q] && rc == SHARDNET_OK; k++, at++) {
            const sn_host_tensor *t = &vals[st->send[q][k]];
            wire_value *h = &f->hdr[slot * f->nper + at];
            sn_transport_req **r = &f->req[slot * 2 * f->nper + 2 * at];
            memset(h, 0, sizeof *h);
            h->dtype = (int32_t)t->dtype;
            h->rank = t->rank;
            h->nbytes = t->nbytes;
            memcpy(h->dims, t->dims, sizeof h->dims);
            const void *data = t->data;
            size_t n = t->nbytes / sizeof(float);
            if (codec != SN_CODEC_FP32 && t->dtype == SN_DT_FLOAT && n &&
                n <= SN_CODEC_MAX_N) {
                unsigned char *e =
                    enc_buffer(st, f, slot, at, sn_codec_bound(n));
                if (!e)
                    return sn_error(SHARDNET_OUT_OF_MEMORY, "pipeline sends");
                h->wire = sn_codec_encode(codec, t->data, n, e, NULL);
                data = e;
            }
            if ((rc = sn_transport_isend(p->net, q, (int)s, h, sizeof *h,
                                         &r[0])) == SHARDNET_OK &&
                t->nbytes)
                rc = sn_transport_isend(p->net, q, (int)s, data,
                                        h->wire ? h->wire : t->nbytes, &r[1]);
        }
    return rc;
}

/* Receive item j's values of remote stage s into vals. */
static shardnet_status recv_values(sn_pipeline *p, size_t s, size_t j)
{
    stage *st = &p->st[s];
    size_t slot = j % (2 * p->micro);
    for (size_t k = 0; k < st->nrecv; k++) {
        int v = st->recv[k];
        sn_host_tensor *d = &p->vals[slot][v];
        wire_value h;
        shardnet_status rc =
            sn_transport_recv(p->net, st->owner, (int)s, &h, sizeof h);
        if (rc != SHARDNET_OK)
            return rc;
        if (h.rank < 0 || h.rank > SN_MAX_DIMS ||
            h.nbytes > SN_MAX_ELEMENTS * 8 ||
            (h.wire && (h.dtype != SN_DT_FLOAT || h.nbytes % sizeof(float) ||
                        h.wire > sn_codec_bound(h.nbytes / sizeof(float)))))
            return sn_error(SHARDNET_INTERNAL,
                            "stage %zu: a malformed value from process %u", s,
                            st->owner);
        if ((rc = value_room(p, slot, (size_t)v, h.nbytes)) != SHARDNET_OK)
            return rc;
        d->dtype = (sn_dtype)h.dtype;
        d->rank = h.rank;
        memcpy(d->dims, h.dims, sizeof d->dims);
        d->nbytes = h.nbytes;
        d->name = NULL;
        if (h.wire) {
            if (st->wire_cap < h.wire) {
                unsigned char *b = realloc(st->wire, h.wire);
                if (!b)
                    return sn_error(SHARDNET_OUT_OF_MEMORY, "pipeline values");
                st->wire = b;
                st->wire_cap = h.wire;
            }
            if ((rc = sn_transport_recv(p->net, st->owner, (int)s, st->wire,
                                        h.wire)) != SHARDNET_OK ||
                (rc = sn_codec_decode(st->wire, h.wire, d->data,
                                      h.nbytes / sizeof(float), NULL)) !=
                    SHARDNET_OK)
                return rc;
        } else if (h.nbytes &&
                   (rc = sn_transport_recv(p->net, st->owner, (int)s, d->data,
                                           h.nbytes)) != SHARDNET_OK) {
            return rc;
        }
    }
    return SHARDNET_OK;
}

/*
 * Waiting.  A thread that drives a CPU device has the device's cores to
 * itself, so before it sleeps on the condition it polls a while: the item
 * it waits for is usually one upstream micro-batch away, and a poll sees it
 * within microseconds where a wake-up from sleep takes tens of them (on
 * every hand-off, on the critical path).  Threads that share cores with a
 * device's own (OpenCL) sleep at once.
 */
#define STAGE_POLL_S 1e-3 /* a stage, for its next item's inputs */
#define JOB_POLL_S 500e-6 /* a stage, for the next run */
#define OUT_POLL_S 1e-3   /* the caller, for a batch's outputs */

typedef struct wait_for {
    const sn_pipeline *p;
    size_t s, j;
    unsigned seen;
} wait_for;

static int polls(const stage *st, const sn_device *dev)
{
    return st->local && dev->info.kind == SHARDNET_DEVICE_CPU;
}

static int item_ready(const void *arg)
{
    const wait_for *w = arg;
    return atomic_load(&w->p->failed) || inputs_ready(w->p, w->s, w->j);
}

static int job_posted(const void *arg)
{
    const wait_for *w = arg;
    return atomic_load(&w->p->quit) || atomic_load(&w->p->job) != w->seen;
}

/* Batch w->j is out: every local stage that makes an output is through it
 * (or the run failed). */
static int batch_out(const void *arg)
{
    const wait_for *w = arg;
    const sn_pipeline *p = w->p;
    if (atomic_load(&p->failed))
        return 1;
    for (size_t i = 0; i < p->g->noutputs; i++) {
        int s = p->prod[p->g->outputs[i]];
        if (s < 0 || !p->st[s].local)
            continue;
        for (size_t j = w->j * p->micro; j < (w->j + 1) * p->micro; j++)
            if (!item_finished(p, (size_t)s, j))
                return 0;
    }
    return 1;
}

/* The caller polls for the outputs only once the local stages that make
 * none are through the whole job (their cores are free then; before, a
 * poller would take turns with them). */
static int outputs_awaited(const sn_pipeline *p)
{
    for (size_t s = 0; s < p->nstages; s++) {
        if (!polls(&p->st[s], p->st[s].dev))
            continue;
        int makes = 0;
        for (size_t i = 0; i < p->g->noutputs; i++)
            makes |= p->prod[p->g->outputs[i]] == (int)s;
        if (!makes && atomic_load(&p->done[s]) < p->nbatch * p->micro)
            return 0;
    }
    return 1;
}

/* Record a failure of the run (lock held). */
static void run_failed(sn_pipeline *p, shardnet_status rc)
{
    if (rc != SHARDNET_OK && !p->failed) {
        p->failed = 1;
        p->fail_st = rc;
        snprintf(p->fail_msg, sizeof p->fail_msg, "%s", shardnet_last_error());
    }
    pthread_cond_broadcast(&p->cond);
    pthread_cond_broadcast(&p->caller);
}

/* Record stage s's result for item j (lock taken here). */
static void item_done(sn_pipeline *p, size_t s, size_t j, shardnet_status rc)
{
    pthread_mutex_lock(&p->lock);
    if (rc != SHARDNET_OK) {
        run_failed(p, rc);
    } else {
        atomic_store(&p->item[s * p->nslots + j % p->nslots], j + 1);
        atomic_fetch_add(&p->done[s], 1);
        pthread_cond_broadcast(&p->cond);
        /* The caller waits for whole batches; a replicated stage's last
         * item of a batch need not be the last to finish. */
        if ((j + 1) % p->micro == 0 || p->st[s].nrep > 1)
            pthread_cond_broadcast(&p->caller);
    }
    pthread_mutex_unlock(&p->lock);
}

/* A proxy's job: receive remote stage s's values, item by item, once the
 * item's slot is free (its batch fed here). */
static void receive_micro_batches(sn_pipeline *p, size_t s)
{
    for (size_t j = 0; j < p->nbatch * p->micro; j++) {
        pthread_mutex_lock(&p->lock);
        while (!p->failed && p->fed <= j / p->micro)
            pthread_cond_wait(&p->cond, &p->lock);
        int stop = p->failed;
        pthread_mutex_unlock(&p->lock);
        if (stop)
            break;
        shardnet_status rc = recv_values(p, s, j);
        if (rc != SHARDNET_OK)
            rc = sn_error_prefix(rc, "stage %zu's values", s);
        item_done(p, s, j, rc);
        if (rc != SHARDNET_OK)
            break;
    }
}

/* A job's items through replica r of its stage (every item, or, of a
 * replicated stage, those j with j % nrep == q), each once its inputs are
 * there. */
static void run_micro_batches(sn_pipeline *p, replica *r)
{
    const stage *st = r->st;
    size_t s = st->index;
    in_flight f = {.net = p->net};
    for (unsigned q = 0; q < p->nproc; q++)
        f.nper += st->nsend[q];
    if (f.nper) {
        f.slots = 2 * p->micro;
        f.req = calloc(f.slots * 2 * f.nper, sizeof *f.req);
        f.hdr = calloc(f.slots * f.nper, sizeof *f.hdr);
        if (!f.req || !f.hdr) {
            free(f.req);
            free(f.hdr);
            pthread_mutex_lock(&p->lock);
            run_failed(p, sn_error(SHARDNET_OUT_OF_MEMORY, "pipeline sends"));
            pthread_mutex_unlock(&p->lock);
            return;
        }
    }
    for (size_t j = r->q; j < p->nbatch * p->micro; j += st->nrep) {
        wait_for w = {.p = p, .s = s, .j = j};
        if (polls(st, r->dev))
            sn_poll(item_ready, &w, STAGE_POLL_S);
        pthread_mutex_lock(&p->lock);
        while (!item_ready(&w))
            pthread_cond_wait(&p->cond, &p->lock);
        int stop = p->failed;
        pthread_mutex_unlock(&p->lock);
        if (stop)
            break;
        double t0 = sn_trace_on() ? sn_trace_now() : 0;
        /* The slot's values of two batches ago must be out first. */
        shardnet_status rc = f.nper ? finish_sends(&f, j % f.slots)
                                    : SHARDNET_OK;
        if (rc == SHARDNET_OK)
            rc = run_stage(p, r, j);
        if (rc == SHARDNET_OK && f.nper)
            rc = send_values(p, s, j, &f);
        if (sn_trace_on()) {
            char name[96];
            if (p->nbatch > 1)
                snprintf(name, sizeof name,
                         "micro-batch %zu (stage %zu) of batch %zu",
                         j % p->micro, s, j / p->micro);
            else
                snprintf(name, sizeof name, "micro-batch %zu (stage %zu)", j,
                         s);
            sn_trace_add(r->dev->info.name, "micro-batch", name, t0,
                         sn_trace_now());
        }
        item_done(p, s, j, rc);
        if (rc != SHARDNET_OK)
            break;
    }
    /* Every send done before the job ends (its buffers may go). */
    for (size_t slot = 0; slot < f.slots; slot++) {
        shardnet_status rc = finish_sends(&f, slot);
        if (rc != SHARDNET_OK) {
            pthread_mutex_lock(&p->lock);
            run_failed(p, rc);
            pthread_mutex_unlock(&p->lock);
            break;
        }
    }
    free(f.req);
    free(f.hdr);
}

/* A stage's (a replica's) thread: bound to its device for its whole life,
 * it runs each run's micro-batches and parks in between. */
static void *stage_main(void *arg)
{
    replica *r = arg;
    stage *me = r->st;
    sn_pipeline *p = me->p;
    size_t s = me->index;
    unsigned seen = 0;
    /* (A group stage's tensor split binds the thread to its first device
     * for each run itself; a proxy only waits for messages.) */
    if (me->ngrp == 1 && me->local)
        sn_bind_thread(r->dev, 1);
    for (;;) {
        wait_for w = {.p = p, .seen = seen};
        if (polls(me, r->dev))
            sn_poll(job_posted, &w, JOB_POLL_S);
        pthread_mutex_lock(&p->lock);
        while (!job_posted(&w))
            pthread_cond_wait(&p->cond, &p->lock);
        if (p->quit) {
            pthread_mutex_unlock(&p->lock);
            break;
        }
        seen = p->job;
        pthread_mutex_unlock(&p->lock);
        if (me->local)
            run_micro_batches(p, r);
        else
            receive_micro_batches(p, s);
        pthread_mutex_lock(&p->lock);
        p->finished++;
        pthread_cond_broadcast(&p->caller);
        pthread_mutex_unlock(&p->lock);
    }
    if (me->local)
        sn_bind_thread(r->dev, 0);
    return NULL;
}

/* Output i of batch b: the micro-batches' pieces concatenated along the
 * batch, or, for an output without the batch dimension, the first
 * micro-batch's. */
static shardnet_status gather_output(sn_pipeline *p, size_t i, size_t b)
{
    int v = p->g->outputs[i];
    sn_host_tensor *o = &p->outputs[i];
    sn_host_tensor **vals = p->vals + (b % 2) * p->micro;
    const sn_value *gv = &p->g->values[v];
    /* An output no stage makes, known when the model loaded (a Constant
     * folded into a value): the constant itself. */
    sn_host_tensor konst = {.dtype = gv->dtype, .rank = gv->rank,
                            .data = (void *)gv->data, .nbytes = gv->nbytes};
    memcpy(konst.dims, gv->dims, sizeof konst.dims);
    int is_const = p->prod[v] < 0 && (gv->flags & SN_VALUE_CONST);
    const sn_host_tensor *first = is_const ? &konst : &vals[0][v];
    if (is_const)
        vals = NULL;
    int batched = !is_const && p->micro > 1 && first->rank > 0 &&
                  (size_t)first->dims[0] <= p->chunk;
    size_t parts = batched ? p->micro : 1, bytes = 0, at = 0;
    for (size_t j = 0; j < parts; j++)
        bytes += j ? vals[j][v].nbytes : first->nbytes;
    if (!o->data || p->out_cap[i] < bytes) {
        free(o->data);
        p->out_cap[i] = 0;
        if (!(o->data = malloc(bytes ? bytes : 1)))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "pipeline outputs");
        p->out_cap[i] = bytes;
    }
    o->name = p->g->values[v].name;
    o->dtype = first->dtype;
    o->rank = first->rank;
    memcpy(o->dims, first->dims, sizeof o->dims);
    o->nbytes = bytes;
    for (size_t j = 0; j < parts; j++) {
        const sn_host_tensor *t = j ? &vals[j][v] : first;
        if (t->nbytes)
            memcpy((char *)o->data + at, t->data, t->nbytes);
        at += t->nbytes;
        if (j && o->rank > 0)
            o->dims[0] += t->dims[0];
    }
    return SHARDNET_OK;
}

/* Room for n micro-batches' boundary values (kept from run to run). */
static shardnet_status reserve_vals(sn_pipeline *p, size_t n)
{
    if (n <= p->nvals)
        return SHARDNET_OK;
    sn_host_tensor **v = realloc(p->vals, n * sizeof *v);
    if (v)
        p->vals = v;
    size_t **c = realloc(p->cap, n * sizeof *c);
    if (c)
        p->cap = c;
    if (!v || !c)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "pipeline");
    for (; p->nvals < n; p->nvals++) {
        p->vals[p->nvals] = calloc(p->g->nvalues + 1, sizeof **p->vals);
        p->cap[p->nvals] = calloc(p->g->nvalues + 1, sizeof **p->cap);
        if (!p->vals[p->nvals] || !p->cap[p->nvals]) {
            free(p->vals[p->nvals]);
            free(p->cap[p->nvals]);
            return sn_error(SHARDNET_OUT_OF_MEMORY, "pipeline");
        }
    }
    return SHARDNET_OK;
}

/* Stop and join the stage threads. */
void sn_pipeline_stop_stages(sn_pipeline *p)
{
    pthread_mutex_lock(&p->lock);
    p->quit = 1;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    for (size_t s = 0; p->st && s < p->nstages; s++)
        for (size_t q = 0; q < p->st[s].nrep; q++)
            if (p->st[s].rep[q].started) {
                pthread_join(p->st[s].rep[q].thread, NULL);
                p->st[s].rep[q].started = 0;
            }
}

/*
 * Micro-batches per batch of a stream when none are asked for.  A stream
 * fills the pipeline once, so bubbles cost little and fewer, larger
 * micro-batches waste less per hand-off; but a micro-batch whose
 * activations stay in cache runs faster per row.  So: enough that the
 * largest activation of a micro-batch is about 512 KiB, from one to eight
 * per stage (per replica: a replicated stage needs one for each).
 */
#define STREAM_MICRO_BYTES (512.0 * 1024.0)
static size_t stream_micro(const sn_pipeline *p)
{
    size_t m = (size_t)(p->row_bytes * (double)p->rows / STREAM_MICRO_BYTES +
                        0.999);
    if (m < p->nworkers)
        m = p->nworkers;
    if (m > 8 * p->nworkers)
        m = 8 * p->nworkers;
    return m;
}

/* Output i, made on process root: broadcast to every process. */
static shardnet_status share_output(sn_pipeline *p, size_t i, unsigned root)
{
    sn_host_tensor *o = &p->outputs[i];
    wire_value h = {0};
    shardnet_status st;
    if (p->me == root) {
        h.dtype = (int32_t)o->dtype;
        h.rank = o->rank;
        memcpy(h.dims, o->dims, sizeof h.dims);
        h.nbytes = o->nbytes;
    }
    if ((st = sn_transport_bcast(p->net, root, &h, sizeof h)) != SHARDNET_OK)
        return st;
    if (p->me != root) {
        if (h.rank < 0 || h.rank > SN_MAX_DIMS ||
            h.nbytes > SN_MAX_ELEMENTS * 8)
            return sn_error(SHARDNET_INTERNAL,
                            "output %zu: malformed from process %u", i, root);
        if (!o->data || p->out_cap[i] < h.nbytes) {
            free(o->data);
            p->out_cap[i] = 0;
            if (!(o->data = malloc(h.nbytes ? h.nbytes : 1)))
                return sn_error(SHARDNET_OUT_OF_MEMORY, "pipeline outputs");
            p->out_cap[i] = h.nbytes;
        }
        o->name = p->g->values[p->g->outputs[i]].name;
        o->dtype = (sn_dtype)h.dtype;
        o->rank = h.rank;
        memcpy(o->dims, h.dims, sizeof o->dims);
        o->nbytes = h.nbytes;
    }
    /* float32 in the codec, as the values between stages */
    if (o->dtype == SN_DT_FLOAT)
        return sn_transport_bcast_floats(
            p->net, root, stage_codec(&p->st[0]), o->data,
            o->nbytes / sizeof(float), &p->out_wire, &p->out_wire_cap, NULL);
    return sn_transport_bcast(p->net, root, o->data, o->nbytes);
}

/* Take batch b's inputs from feed into bin[b % 2]. */
static shardnet_status take_batch(sn_pipeline *p, size_t b, sn_feed_fn feed,
                                  void *user)
{
    const sn_binding *in = NULL;
    shardnet_status st = feed(user, b, &in);
    if (st != SHARDNET_OK)
        return st;
    if (b && !sn_same_shapes(in, p->bin[0], p->g->ninputs) &&
        !sn_same_shapes(in, p->bin[1], p->g->ninputs))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "stream: batch %zu is shaped unlike the first", b);
    memcpy(p->bin[b % 2], in, p->g->ninputs * sizeof *in);
    return SHARDNET_OK;
}

/* The geometry of a run of inputs `in` (micro as sn_pipeline_run's;
 * nbatch batches streamed): p->rows, the batch cut only where the nodes
 * keep its rows apart (decided once per batch size), p->micro
 * micro-batches of p->chunk rows. */
static shardnet_status batch_geometry(sn_pipeline *p, const sn_binding *in,
                                      size_t micro, size_t nbatch)
{
    shardnet_status st;
    /* The batch, cut only where the nodes keep its rows apart (decided
     * once per batch size). */
    p->rows = sn_batch_rows(p->g, in);
    if (p->rows > 1 && p->rows != p->apart_rows) {
        /* Decided on the first stage's process (on the shapes device,
         * so no device is preferred) and shared. */
        if ((st = sn_batch_apart(p->g, p->st[0].dev, in, &p->apart)) !=
            SHARDNET_OK)
            return st;
        p->apart_rows = p->rows;
    }
    if (!p->apart && p->rows > 1)
        p->rows = 1;
    p->micro = micro                ? micro
               : nbatch > 1 ? stream_micro(p)
                            : sn_pipeline_default_micro(p->rows, p->nworkers);
    if (p->micro > p->rows)
        p->micro = p->rows ? p->rows : 1;
    p->chunk = (p->rows + p->micro - 1) / p->micro;
    /* No micro-batch of one row out of a larger batch: a product of one
     * row sums in its own order on a CPU (cpu/sgemm_avx512.c's dot
     * products with a weight in place), so such a row would not come out
     * as the whole batch's. */
    if (p->rows > 1 && p->chunk < 2)
        p->chunk = 2;
    while (p->chunk < p->rows && p->rows % p->chunk == 1)
        p->chunk++;
    p->micro = p->chunk ? (p->rows + p->chunk - 1) / p->chunk : 1;
    if (!p->micro)
        p->micro = 1;
    return SHARDNET_OK;
}

shardnet_status sn_pipeline_search_groups(sn_pipeline *p,
                                          const sn_binding *inputs,
                                          size_t micro, double *stage_s,
                                          size_t *nmicro)
{
    sn_graph *g = p->g;
    shardnet_status st;
    sn_binding *in = calloc(g->ninputs + 1, sizeof *in);
    if (!in)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "pipeline");
    if ((st = batch_geometry(p, inputs, micro, 1)) != SHARDNET_OK) {
        free(in);
        return st;
    }
    /* The first micro-batch's inputs: their first chunk of rows, as
     * bind_input cuts them. */
    for (size_t i = 0; i < g->ninputs; i++) {
        in[i] = inputs[i];
        if (p->micro > 1 && in[i].rank > 0 &&
            (size_t)in[i].dims[0] == p->rows) {
            size_t row = in[i].nbytes / p->rows;
            in[i].dims[0] = (int64_t)p->chunk;
            in[i].nbytes = p->chunk * row;
        }
    }
    *nmicro = p->micro;
    sn_weights *sw = NULL;
    sn_plan *shapes = NULL;
    if ((st = sn_shape_plan(g, in, &sw, &shapes)) != SHARDNET_OK) {
        free(in);
        return st;
    }
    for (size_t s = 0; s < p->nstages && st == SHARDNET_OK; s++) {
        stage *sg = &p->st[s];
        stage_s[s] = -1;
        if (sg->ngrp < 2 || !sg->local)
            continue;
        sn_binding b[64];
        void *buf[64] = {0};
        size_t nin = sg->g->ninputs;
        if (nin > 64)
            st = sn_error(SHARDNET_UNSUPPORTED, "stage %zu has too many "
                                                "inputs", s);
        /* Each input shaped as the micro-batch makes it, zeros: the
         * search builds splits for the shapes and reads no values. */
        for (size_t i = 0; i < nin && st == SHARDNET_OK; i++) {
            int v = sg->in_parent[i], slot = graph_input_slot(g, v);
            const sn_rt *rt = sn_plan_value(shapes, (size_t)v);
            if (slot >= 0) {
                b[i] = in[slot];
                continue;
            }
            if (!rt || !rt->known) {
                st = sn_error(SHARDNET_INTERNAL,
                              "stage %zu: input %zu has no shape", s, i);
                break;
            }
            b[i] = (sn_binding){.dtype = rt->dtype, .rank = rt->rank};
            memcpy(b[i].dims, rt->dims, sizeof b[i].dims);
            b[i].nbytes = sn_rt_elements(rt) * sn_dtype_size(rt->dtype);
            if (!(buf[i] = calloc(b[i].nbytes + 1, 1)))
                st = sn_error(SHARDNET_OUT_OF_MEMORY, "pipeline");
            b[i].data = buf[i];
        }
        sn_tensor_split *ts = NULL;
        if (st == SHARDNET_OK &&
            (st = stage_split_for(sg, b, &ts)) == SHARDNET_OK)
            stage_s[s] = sn_tensor_split_overflow(ts)
                             ? 1e300
                             : sn_tensor_split_estimate(ts);
        for (size_t i = 0; i < nin; i++)
            free(buf[i]);
    }
    sn_shape_plan_free(sw, shapes);
    free(in);
    return st;
}

shardnet_status sn_pipeline_stream(sn_pipeline *p, size_t nbatch, size_t micro,
                                   sn_feed_fn feed, sn_drain_fn drain,
                                   void *user)
{
    sn_graph *g = p->g;
    shardnet_status st = SHARDNET_OK;
    if (!nbatch)
        return SHARDNET_OK;
    for (int k = 0; k < 2; k++)
        if (!p->bin[k] &&
            !(p->bin[k] = calloc(g->ninputs + 1, sizeof *p->bin[k])))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "pipeline");
    if ((st = take_batch(p, 0, feed, user)) != SHARDNET_OK)
        return st;
    memcpy(p->bin[1], p->bin[0], g->ninputs * sizeof *p->bin[0]);
    if ((st = batch_geometry(p, p->bin[0], micro, nbatch)) != SHARDNET_OK)
        return st;
    if ((st = reserve_vals(p, 2 * p->micro)) != SHARDNET_OK)
        return st;
    if (!p->done && !(p->done = calloc(p->nstages, sizeof *p->done)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "pipeline");
    if (p->nslots < 2 * p->micro) {
        atomic_size_t *item =
            calloc(p->nstages * 2 * p->micro, sizeof *p->item);
        if (!item)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "pipeline");
        free(p->item);
        p->item = item;
    }
    /* (The threads are parked: nothing reads the slots until the job.) */
    p->nslots = 2 * p->micro;
    if (!p->started) {
        p->nthreads = 0;
        for (size_t s = 0; s < p->nstages; s++) {
            p->st[s].p = p;
            p->st[s].index = s;
            if (!p->st[s].local && !p->st[s].proxy)
                continue;
            /* (A proxy receives a remote stage's values: one thread.) */
            size_t nthr = p->st[s].local ? p->st[s].nrep : 1;
            for (size_t q = 0; q < nthr; q++) {
                replica *r = &p->st[s].rep[q];
                if (pthread_create(&r->thread, NULL, stage_main, r)) {
                    sn_pipeline_stop_stages(p);
                    p->quit = 0;
                    return sn_error(SHARDNET_INTERNAL,
                                    "cannot start a stage");
                }
                r->started = 1;
                p->nthreads++;
            }
        }
        p->started = 1;
    }
    pthread_mutex_lock(&p->lock);
    p->nbatch = nbatch;
    p->fed = 1;
    p->failed = 0;
    p->finished = 0;
    for (size_t s = 0; s < p->nstages; s++)
        atomic_store(&p->done[s], 0);
    for (size_t k = 0; k < p->nstages * p->nslots; k++)
        atomic_store(&p->item[k], 0);
    p->job++;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    /* Feed batch b + 1 while batch b is in the stages, then hand batch b
     * out; batch b + 1 reuses the slots of batch b - 1, handed out
     * already. */
    for (size_t b = 0; b < nbatch; b++) {
        if (b + 1 < nbatch) {
            shardnet_status fs = take_batch(p, b + 1, feed, user);
            pthread_mutex_lock(&p->lock);
            if (fs != SHARDNET_OK && !p->failed) {
                p->failed = 1;
                p->fail_st = fs;
                snprintf(p->fail_msg, sizeof p->fail_msg, "%s",
                         shardnet_last_error());
            }
            p->fed = b + 2;
            pthread_cond_broadcast(&p->cond);
            pthread_mutex_unlock(&p->lock);
        }
        /* Batch b is out once every local stage that makes an output has
         * finished it (then every stage before it has too). */
        wait_for w = {.p = p, .j = b};
        if (b + 1 == nbatch) {
            pthread_mutex_lock(&p->lock);
            while (!p->failed && !outputs_awaited(p))
                pthread_cond_wait(&p->caller, &p->lock);
            pthread_mutex_unlock(&p->lock);
            sn_poll(batch_out, &w, OUT_POLL_S);
        }
        pthread_mutex_lock(&p->lock);
        while (!batch_out(&w))
            pthread_cond_wait(&p->caller, &p->lock);
        int failed = p->failed;
        pthread_mutex_unlock(&p->lock);
        if (failed)
            break;
        for (size_t i = 0; i < g->noutputs && st == SHARDNET_OK; i++) {
            int s = p->prod[g->outputs[i]];
            if (s < 0 || p->st[s].local)
                st = gather_output(p, i, b);
            /* Every process gets the outputs, from the process that made
             * each. */
            if (st == SHARDNET_OK && p->nproc > 1)
                st = share_output(p, i, s < 0 ? 0 : p->st[s].owner);
        }
        if (st == SHARDNET_OK && drain)
            st = drain(user, b);
        if (st != SHARDNET_OK) {
            pthread_mutex_lock(&p->lock);
            if (!p->failed) {
                p->failed = 1;
                p->fail_st = st;
                snprintf(p->fail_msg, sizeof p->fail_msg, "%s",
                         shardnet_last_error());
            }
            pthread_cond_broadcast(&p->cond);
            pthread_mutex_unlock(&p->lock);
            break;
        }
    }
    pthread_mutex_lock(&p->lock);
    while (p->finished < p->nthreads)
        pthread_cond_wait(&p->caller, &p->lock);
    pthread_mutex_unlock(&p->lock);
    if (p->failed)
        return sn_error(p->fail_st, "%s", p->fail_msg);
    return SHARDNET_OK;
}

/* sn_pipeline_run: one batch, its inputs given. */
static shardnet_status feed_one(void *user, size_t b, const sn_binding **in)
{
    (void)b;
    *in = user;
    return SHARDNET_OK;
}

shardnet_status sn_pipeline_run(sn_pipeline *p, const sn_binding *inputs,
                                size_t micro)
{
    return sn_pipeline_stream(p, 1, micro, feed_one, NULL,
                              (void *)(uintptr_t)inputs);
}

