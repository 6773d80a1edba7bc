/*
 * A crew of device-bound threads (crew.h).  A run bumps a job counter
 * under the lock and wakes the workers; each polls for it a little
 * first (runs often follow each other closely, and a sleeping worker
 * starts late by a wake-up), runs its part, and counts itself done.
 */
#include <config.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/trace.h"
#include "runtime/crew.h"

/* How long a worker polls for the next run, and the caller for the
 * workers' end, before sleeping. */
#define WAKE_SPIN_S 200e-6

typedef struct member {
    struct sn_crew *c;
    size_t index; /* into the crew's devs */
    sn_device *dev;
    pthread_t thread;
    int started;
    shardnet_status st;
    char msg[1024];
} member;

struct sn_crew {
    sn_crew_fn fn;
    void *ctx;
    size_t n;
    member *m;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    atomic_uint job;    /* bumped to start a run */
    atomic_size_t done; /* workers finished with the current run */
    int quit;
};

typedef struct crew_wait {
    const sn_crew *c;
    unsigned seen; /* the job seen */
} crew_wait;

static int job_posted(const void *arg)
{
    const crew_wait *w = arg;
    return atomic_load(&w->c->job) != w->seen;
}

static int workers_done(const void *arg)
{
    const crew_wait *w = arg;
    return atomic_load(&w->c->done) + 1 >= w->c->n;
}

static void *worker_main(void *arg)
{
    member *m = arg;
    sn_crew *c = m->c;
    unsigned seen = 0;
    sn_bind_thread(m->dev, 1);
    for (;;) {
        crew_wait cw = {c, seen};
        sn_poll(job_posted, &cw, WAKE_SPIN_S);
        pthread_mutex_lock(&c->lock);
        while (!c->quit && c->job == seen)
            pthread_cond_wait(&c->cond, &c->lock);
        if (c->quit) {
            pthread_mutex_unlock(&c->lock);
            break;
        }
        seen = c->job;
        pthread_mutex_unlock(&c->lock);
        shardnet_status st = c->fn(c->ctx, m->index);
        pthread_mutex_lock(&c->lock);
        m->st = st;
        if (st != SHARDNET_OK)
            snprintf(m->msg, sizeof m->msg, "%s", shardnet_last_error());
        c->done++;
        pthread_cond_broadcast(&c->cond);
        pthread_mutex_unlock(&c->lock);
    }
    sn_bind_thread(m->dev, 0);
    return NULL;
}

shardnet_status sn_crew_start(sn_device *const *devs, const size_t *members,
                              size_t n, sn_crew_fn fn, void *ctx,
                              sn_crew **out)
{
    sn_crew *c = calloc(1, sizeof *c);
    *out = NULL;
    if (!c || !(c->m = calloc(n + 1, sizeof *c->m))) {
        free(c);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "the devices' threads");
    }
    c->fn = fn;
    c->ctx = ctx;
    c->n = n;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    for (size_t k = 0; k < n; k++) {
        c->m[k].c = c;
        c->m[k].index = members[k];
        c->m[k].dev = devs[members[k]];
    }
    for (size_t k = 1; k < n; k++) {
        if (pthread_create(&c->m[k].thread, NULL, worker_main, &c->m[k])) {
            shardnet_status st =
                sn_error(SHARDNET_INTERNAL, "cannot start a thread for %s",
                         c->m[k].dev->info.name);
            sn_crew_stop(c);
            return st;
        }
        c->m[k].started = 1;
    }
    *out = c;
    return SHARDNET_OK;
}

shardnet_status sn_crew_run(sn_crew *c)
{
    shardnet_status st = SHARDNET_OK;
    if (!c->n)
        return SHARDNET_OK;
    pthread_mutex_lock(&c->lock);
    c->done = 0;
    c->job++;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    member *lead = &c->m[0];
    sn_bind_thread(lead->dev, 1);
    st = c->fn(c->ctx, lead->index);
    sn_bind_thread(lead->dev, 0);
    crew_wait cw = {c, 0};
    sn_poll(workers_done, &cw, WAKE_SPIN_S);
    pthread_mutex_lock(&c->lock);
    while (!workers_done(&cw))
        pthread_cond_wait(&c->cond, &c->lock);
    pthread_mutex_unlock(&c->lock);
    for (size_t k = 1; k < c->n && st == SHARDNET_OK; k++)
        if (c->m[k].st != SHARDNET_OK)
            st = sn_error(c->m[k].st, "on %s: %s", c->m[k].dev->info.name,
                          c->m[k].msg);
    return st;
}

void sn_crew_stop(sn_crew *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->lock);
    c->quit = 1;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    for (size_t k = 1; k < c->n; k++)
        if (c->m[k].started)
            pthread_join(c->m[k].thread, NULL);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    free(c->m);
    free(c);
}
