/*
 * Node timing: how long each node of a graph takes on a device, measured by
 * running a plan of the whole graph and remembered per graph, device and
 * input shapes.  The layer split's cost model and the tensor split's
 * planner both weigh their cuts with these figures, so the timing lives
 * in the planning layer, under both.  See timing.h.
 */
#include <config.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ops/registry.h"
#include "plan/timing.h"
#include "comm/world.h"

/* Runs timed per node; the median is kept. */
#define TIMED_RUNS 5

/* Seconds per graph node of the whole graph on dev: the median of
 * TIMED_RUNS runs after one untimed (a node's best run would sum to less
 * than any real run takes). */
static shardnet_status time_nodes(sn_graph *g, sn_device *dev,
                                  const sn_binding *inputs, double *best)
{
    sn_weights *w = NULL;
    sn_plan *p = NULL;
    double *t = calloc(TIMED_RUNS * g->nnodes + 1, sizeof *t);
    shardnet_status st;
    if (!t)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "cost model");
    if ((st = sn_weights_new(g, dev, &w)) != SHARDNET_OK ||
        (st = sn_plan_build(g, w, inputs, sn_op_find, &p)) != SHARDNET_OK)
        goto out;
    /* Driven the way a split drives it: by a thread of its own, bound to
     * it (a CPU device then runs the kernels on that thread). */
    sn_bind_thread(dev, 1);
    /* A first run untimed: weights packed on first use, arena pages. */
    double stamp = 0;
    st = sn_plan_run(p, inputs);
    for (int r = 0; r < TIMED_RUNS && st == SHARDNET_OK; r++) {
        sn_progress(dev->config, &stamp, 0, (uint64_t)r + 1, TIMED_RUNS + 1,
                    "timing the model on %s", dev->info.name);
        st = sn_plan_time_nodes(p, inputs, &t[(size_t)r * g->nnodes]);
    }
    sn_progress(dev->config, &stamp, 1, TIMED_RUNS + 1, TIMED_RUNS + 1,
                "timing the model on %s", dev->info.name);
    sn_bind_thread(dev, 0);
    if (st != SHARDNET_OK)
        goto out;
    for (size_t i = 0; i < g->nnodes; i++) {
        double v[TIMED_RUNS];
        for (int r = 0; r < TIMED_RUNS; r++) {
            double x = t[(size_t)r * g->nnodes + i];
            int k = r;
            for (; k > 0 && v[k - 1] > x; k--)
                v[k] = v[k - 1];
            v[k] = x;
        }
        best[i] = v[TIMED_RUNS / 2];
    }
out:
    free(t);
    sn_plan_free(p);
    sn_weights_free(w);
    return st;
}

/*
 * Timings already taken in this process, by graph, device and input
 * shapes: the planner asks for the same ones several times (the layer
 * split's estimate, the tensor split's, the layer split it then builds).
 */
#define TIME_CACHE 16
static struct timed {
    unsigned long graph;
    const sn_device *dev;
    size_t nnodes, ninputs;
    sn_binding *shapes; /* data pointers cleared */
    double *t;
} time_cache[TIME_CACHE];
static size_t time_next;
static pthread_mutex_t time_lock = PTHREAD_MUTEX_INITIALIZER;

int sn_same_shapes(const sn_binding *a, const sn_binding *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i].dtype != b[i].dtype || a[i].rank != b[i].rank ||
            memcmp(a[i].dims, b[i].dims,
                   (size_t)a[i].rank * sizeof a[i].dims[0]))
            return 0;
    return 1;
}

shardnet_status sn_time_nodes_shared(sn_graph *g, sn_device *dev,
                                     const sn_binding *inputs, double *t,
                                     int shared)
{
    shardnet_status st = SHARDNET_OK;
    if (!dev->remote && (st = sn_time_nodes(g, dev, inputs, t)) != SHARDNET_OK)
        st = sn_error_prefix(st, "timing the model on %s", dev->info.name);
    if (!shared || sn_world_processes() == 1)
        return st;
    if ((st = sn_world_share_status(dev->process, st, "timing the model")) !=
        SHARDNET_OK)
        return st;
    return sn_world_bcast(dev->process, t, g->nnodes * sizeof *t);
}

shardnet_status sn_time_nodes(sn_graph *g, sn_device *dev,
                              const sn_binding *inputs, double *best)
{
    shardnet_status st;
    pthread_mutex_lock(&time_lock);
    for (size_t k = 0; k < TIME_CACHE; k++) {
        struct timed *e = &time_cache[k];
        if (e->t && e->graph == g->id && e->dev == dev &&
            e->nnodes == g->nnodes && e->ninputs == g->ninputs &&
            sn_same_shapes(e->shapes, inputs, g->ninputs)) {
            memcpy(best, e->t, g->nnodes * sizeof *best);
            pthread_mutex_unlock(&time_lock);
            return SHARDNET_OK;
        }
    }
    pthread_mutex_unlock(&time_lock);
    if ((st = time_nodes(g, dev, inputs, best)) != SHARDNET_OK)
        return st;
    double *t = malloc((g->nnodes + 1) * sizeof *t);
    sn_binding *shapes = malloc((g->ninputs + 1) * sizeof *shapes);
    if (!t || !shapes) { /* not remembered: still a good answer */
        free(t);
        free(shapes);
        return SHARDNET_OK;
    }
    memcpy(t, best, g->nnodes * sizeof *t);
    for (size_t i = 0; i < g->ninputs; i++) {
        shapes[i] = inputs[i];
        shapes[i].data = NULL;
    }
    pthread_mutex_lock(&time_lock);
    struct timed *e = &time_cache[time_next++ % TIME_CACHE];
    free(e->t);
    free(e->shapes);
    *e = (struct timed){g->id, dev, g->nnodes, g->ninputs, shapes, t};
    pthread_mutex_unlock(&time_lock);
    return SHARDNET_OK;
}
