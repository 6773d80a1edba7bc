/*
 * The CPU device's in-order queue: its worker thread, which runs the tasks
 * queued for it with an OpenMP team pinned to the package's cores, and the
 * host thread that drives a device of a split itself, running its tasks
 * in place of the worker (see cpu.c for the whole picture); and the
 * queue's events, each a count of tasks the worker is to have finished.
 */
#include <config.h>

#include <hwloc.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu.h"
#include "core/error.h"
#include "core/trace.h"

/* Bind the calling thread to `set`; a failure (PUs this machine lacks, or
 * that the process may not use) is reported once per device, and the
 * thread runs where it ran. */
static void bind_to(cpu_device *cd, hwloc_const_cpuset_t set)
{
    char *list = NULL;
    if (hwloc_set_cpubind(cd->topo, set, HWLOC_CPUBIND_THREAD) == 0 ||
        atomic_exchange(&cd->bind_warned, 1))
        return;
    if (hwloc_bitmap_list_asprintf(&list, set) < 0)
        list = NULL;
    sn_log(SHARDNET_LOG_WARN,
           "%s: cannot bind a thread to PUs %s (not on this machine, or not "
           "allowed to this process): its threads run unbound",
           cd->name, list ? list : "?");
    free(list);
}

/* While a trace is recorded: where the calling thread, thread t of a team
 * of the device's, is bound and runs, read back from the system (what the
 * thread has, not what it asked for), as an event on the device's track:
 * what shows that a partition's threads keep to its cores. */
static void trace_binding(cpu_device *cd, unsigned t)
{
    hwloc_bitmap_t set, here;
    char *list = NULL, what[96];
    double now;
    if (!sn_trace_on())
        return;
    now = sn_trace_now();
    set = hwloc_bitmap_alloc();
    here = hwloc_bitmap_alloc();
    if (set && here &&
        hwloc_get_cpubind(cd->topo, set, HWLOC_CPUBIND_THREAD) == 0 &&
        hwloc_get_last_cpu_location(cd->topo, here, HWLOC_CPUBIND_THREAD) ==
            0 &&
        hwloc_bitmap_list_asprintf(&list, set) >= 0) {
        snprintf(what, sizeof what, "team thread %u bound to PUs %s, on PU %d",
                 t, list, hwloc_bitmap_first(here));
        sn_trace_add(cd->name, "bind", what, now, now);
    }
    free(list);
    hwloc_bitmap_free(set);
    hwloc_bitmap_free(here);
}

/* Bind each thread of the calling thread's team (the caller is thread 0)
 * to one core of the package; where `was` is not NULL (a thread that
 * drives the device), team thread t > 0 keeps its earlier binding in
 * was[t] first (NULL where it cannot say).  The caller keeps the core it
 * is on when that core is the package's (a driving thread binds for each
 * run: an unbound caller is then not moved, which costs hundreds of
 * microseconds on a busy machine), and the team takes the other cores in
 * turn.  Each thread on a core of its own: a caller bound to the whole
 * package was left by the scheduler on its team thread's core, and a
 * two-core package then ran at one core's speed (1.3 against 0.8 ms for
 * the MLP at batch 100).  (The team's threads are bound before the caller,
 * so that a thread the region creates starts where the caller was.)  The
 * memory policy is left alone on a machine of one NUMA node. */
static void pin_team(cpu_device *cd, hwloc_bitmap_t *was)
{
    if (!cd->one_node &&
        hwloc_set_membind(cd->topo, cd->nodeset, HWLOC_MEMBIND_BIND,
                          HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET) < 0)
        sn_log(SHARDNET_LOG_DEBUG, "cpu: memory binding unavailable");
    omp_set_dynamic(0);
    omp_set_num_threads((int)cd->ncores);
    if (cd->ncores == 1) {
        bind_to(cd, cd->cpuset);
        trace_binding(cd, 0);
        return;
    }
    /* The core the caller is on, when it is one of the package's. */
    unsigned first = 0;
    hwloc_bitmap_t here = hwloc_bitmap_alloc();
    if (here && hwloc_get_last_cpu_location(cd->topo, here,
                                            HWLOC_CPUBIND_THREAD) == 0)
        for (unsigned c = 0; c < cd->ncores; c++)
            if (hwloc_bitmap_intersects(here, cd->cores[c])) {
                first = c;
                break;
            }
    hwloc_bitmap_free(here);
#pragma omp parallel num_threads((int)cd->ncores)
    {
        unsigned t = (unsigned)omp_get_thread_num() % cd->ncores;
        if (t && was && (was[t] = hwloc_bitmap_alloc()) &&
            hwloc_get_cpubind(cd->topo, was[t], HWLOC_CPUBIND_THREAD) < 0) {
            hwloc_bitmap_free(was[t]);
            was[t] = NULL;
        }
        bind_to(cd, cd->cores[(first + t) % cd->ncores]);
        trace_binding(cd, t);
    }
}

/* How long an idle worker polls for the next task before it sleeps. */
#define SPIN_S 100e-6

static int work_queued(const void *arg)
{
    const cpu_device *cd = arg;
    return atomic_load(&cd->pending) != 0;
}

static int queue_idle(const void *arg)
{
    const cpu_device *cd = arg;
    return atomic_load(&cd->pending) == 0;
}

static void spin_for_work(cpu_device *cd)
{
    sn_poll(work_queued, cd, SPIN_S);
}

/*
 * The worker's OpenMP team exists only while the worker runs kernels.
 * While a thread drives the device (sn_cpu_bind_thread), the worker gives its
 * team back to libgomp: two teams of one package's size are more threads
 * than the process has cores, and libgomp then cuts every thread's spin at
 * a barrier to a few iterations (its throttled spin count), so that each
 * parallel kernel of the driving thread wakes its team from sleep (on the
 * 2-core machine: the MLP at batch 100 in 0.83 against 0.70 ms).  The
 * worker pins a new team when it next runs a kernel.
 */
void *sn_cpu_worker_main(void *arg)
{
    cpu_device *cd = arg;
    pthread_mutex_lock(&cd->lock);
    for (;;) {
        while (cd->count == 0 && !cd->quit) {
            /* Spin a little before sleeping: a kernel usually follows the
             * last one within microseconds, and a condition-variable wake
             * costs tens of them. */
            pthread_mutex_unlock(&cd->lock);
            spin_for_work(cd);
            pthread_mutex_lock(&cd->lock);
            if (cd->count == 0 && !cd->quit)
                pthread_cond_wait(&cd->wake, &cd->lock);
        }
        if (cd->count == 0 && cd->quit)
            break;
        task t = cd->ring[cd->head];
        cd->head = (cd->head + 1) % cd->cap;
        cd->count--;
        cd->running = 1;
        pthread_mutex_unlock(&cd->lock);

        if (t.kind == TASK_RELEASE_TEAM) {
            if (atomic_exchange(&cd->worker_team, 0))
                omp_pause_resource_all(omp_pause_soft);
        } else {
            if (!atomic_load(&cd->worker_team))
                pin_team(cd, NULL);
            atomic_store(&cd->worker_team, 1);
            sn_cpu_run_task(cd, &t);
        }

        pthread_mutex_lock(&cd->lock);
        cd->running = 0;
        atomic_fetch_add(&cd->finished, 1);
        atomic_fetch_sub(&cd->pending, 1);
        if (cd->count == 0 || cd->event_sleepers)
            pthread_cond_broadcast(&cd->idle);
    }
    pthread_mutex_unlock(&cd->lock);
    return NULL;
}

/*
 * A host thread that drives one device of a split (a pipeline stage, a
 * tensor-split rank) binds itself to the device's package and runs the
 * device's kernels itself, in order, instead of queueing them for the
 * worker: on a package of one core a queue would make the driving thread
 * and the worker take turns on that core, and each hand-off costs a
 * scheduler round trip.  The thread's team (its OpenMP threads) is pinned
 * like the worker's.  Its earlier binding (of the thread and of its team),
 * memory policy, team size and dynamic adjustment come back when it lets
 * go.
 */
static _Thread_local cpu_device *driving;
static _Thread_local hwloc_bitmap_t saved_binding;
static _Thread_local hwloc_bitmap_t *saved_team; /* per team thread */
static _Thread_local hwloc_nodeset_t saved_nodes; /* NULL: not known */
static _Thread_local hwloc_membind_policy_t saved_policy;
static _Thread_local int saved_threads, saved_dynamic;

void sn_cpu_bind_thread(sn_device *dev, int on)
{
    cpu_device *cd = dev->impl;
    if (!on) {
        if (driving != cd)
            return;
        driving = NULL;
        /* saved_binding and saved_team are this thread's: the team
         * threads read copies of the pointers (their own thread-local ones
         * are NULL).  The team is the one pin_team pinned (ncores threads,
         * asked for before the team size goes back); a team thread whose
         * binding was not known gets the caller's. */
        hwloc_bitmap_t was = saved_binding, *team = saved_team;
        saved_binding = NULL;
        saved_team = NULL;
        if (was)
            hwloc_set_cpubind(cd->topo, was, HWLOC_CPUBIND_THREAD);
        if (team && cd->ncores > 1) {
#pragma omp parallel num_threads((int)cd->ncores)
            {
                unsigned t = (unsigned)omp_get_thread_num() % cd->ncores;
                hwloc_const_bitmap_t to = t && team[t] ? team[t] : was;
                if (t && to)
                    hwloc_set_cpubind(cd->topo, to, HWLOC_CPUBIND_THREAD);
            }
        }
        for (unsigned t = 0; team && t < cd->ncores; t++)
            hwloc_bitmap_free(team[t]);
        free(team);
        hwloc_bitmap_free(was);
        if (saved_nodes) {
            hwloc_set_membind(cd->topo, saved_nodes, saved_policy,
                              HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET);
            hwloc_bitmap_free(saved_nodes);
            saved_nodes = NULL;
        }
        omp_set_num_threads(saved_threads);
        omp_set_dynamic(saved_dynamic);
        return;
    }
    if (driving)
        return; /* one device per thread */
    /* What was queued before runs first; the worker's team goes (a round
     * trip to the worker only when it has one: a sleeping worker's wake-up
     * can wait for a scheduler tick, 4 ms, and a thread binds for each
     * run). */
    if (atomic_load(&cd->worker_team)) {
        task release = {.kind = TASK_RELEASE_TEAM};
        sn_cpu_enqueue(dev, &release);
    }
    sn_cpu_synchronize(dev);
    saved_threads = omp_get_max_threads();
    saved_dynamic = omp_get_dynamic();
    if ((saved_binding = hwloc_bitmap_alloc()) &&
        hwloc_get_cpubind(cd->topo, saved_binding, HWLOC_CPUBIND_THREAD) < 0) {
        hwloc_bitmap_free(saved_binding);
        saved_binding = NULL;
    }
    if (!cd->one_node && (saved_nodes = hwloc_bitmap_alloc()) &&
        hwloc_get_membind(cd->topo, saved_nodes, &saved_policy,
                          HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET) < 0) {
        hwloc_bitmap_free(saved_nodes);
        saved_nodes = NULL;
    }
    saved_team = calloc(cd->ncores, sizeof *saved_team);
    pin_team(cd, saved_team);
    driving = cd;
}

shardnet_status sn_cpu_enqueue(sn_device *dev, const task *t)
{
    cpu_device *cd = dev->impl;
    if (driving == cd) {
        /* Counted as pending, so that a synchronize from another thread (a
         * collective mapping this device's buffer) waits for it. */
        atomic_fetch_add(&cd->pending, 1);
        sn_cpu_run_task(cd, t);
        /* Wake a synchronize only when one sleeps (it counts itself in
         * before it looks at pending, under the lock). */
        if (atomic_fetch_sub(&cd->pending, 1) == 1 &&
            atomic_load(&cd->sleepers) > 0) {
            pthread_mutex_lock(&cd->lock);
            pthread_cond_broadcast(&cd->idle);
            pthread_mutex_unlock(&cd->lock);
        }
        return SHARDNET_OK;
    }
    pthread_mutex_lock(&cd->lock);
    if (cd->count == cd->cap) {
        size_t cap = cd->cap ? 2 * cd->cap : 64;
        task *ring = malloc(cap * sizeof *ring);
        if (!ring) {
            pthread_mutex_unlock(&cd->lock);
            return sn_error(SHARDNET_OUT_OF_MEMORY, "%s: task queue",
                            dev->info.name);
        }
        for (size_t i = 0; i < cd->count; i++)
            ring[i] = cd->ring[(cd->head + i) % cd->cap];
        free(cd->ring);
        cd->ring = ring;
        cd->cap = cap;
        cd->head = 0;
    }
    cd->ring[(cd->head + cd->count) % cd->cap] = *t;
    cd->count++;
    cd->queued++;
    atomic_fetch_add(&cd->pending, 1);
    pthread_cond_signal(&cd->wake);
    pthread_mutex_unlock(&cd->lock);
    return SHARDNET_OK;
}

void sn_cpu_task_failed(cpu_device *cd, const char *why)
{
    pthread_mutex_lock(&cd->lock);
    if (!cd->failed) {
        cd->failed = 1;
        snprintf(cd->failure, sizeof cd->failure, "%s: %s", cd->name, why);
    }
    pthread_mutex_unlock(&cd->lock);
}

/* The failure of a task since the last one was taken, as an error (the
 * caller holds the lock). */
static shardnet_status take_failure(cpu_device *cd)
{
    if (!cd->failed)
        return SHARDNET_OK;
    cd->failed = 0;
    return sn_error(SHARDNET_OUT_OF_MEMORY, "%s", cd->failure);
}

/* How long a synchronising caller polls before it sleeps. */
#define SYNC_SPIN_S 1e-3

shardnet_status sn_cpu_synchronize(sn_device *dev)
{
    cpu_device *cd = dev->impl;
    /*
     * Poll first, yielding the core: the caller usually shares a core with
     * the device's team (more threads than cores), and a yielding poller
     * gives the team its core back at once and notices completion within
     * microseconds, where a sleeper needs a wake-up of tens of them.
     */
    sn_poll(queue_idle, cd, SYNC_SPIN_S);
    pthread_mutex_lock(&cd->lock);
    atomic_fetch_add(&cd->sleepers, 1);
    while (cd->count > 0 || cd->running || atomic_load(&cd->pending) != 0)
        pthread_cond_wait(&cd->idle, &cd->lock);
    atomic_fetch_sub(&cd->sleepers, 1);
    shardnet_status st = take_failure(cd);
    pthread_mutex_unlock(&cd->lock);
    return st;
}

/*
 * Events.  The worker runs the ring's tasks in order, so an event is the
 * number of tasks queued when it was recorded: it has completed once the
 * worker has finished that many.  A task that the driving thread runs
 * itself is done when its enqueue returns, before any event that thread
 * records.  A wait, like a synchronize, reports a task that could not run
 * (sn_cpu_task_failed).
 */
static int event_passed(const void *arg)
{
    const cpu_event *ev = arg;
    cpu_device *cd = ev->pub.dev->impl;
    return atomic_load(&cd->finished) >= ev->seq;
}

shardnet_status sn_cpu_event_record(sn_device *dev, sn_event **out)
{
    cpu_device *cd = dev->impl;
    cpu_event *ev = malloc(sizeof *ev);
    if (!ev)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s: event", dev->info.name);
    ev->pub.dev = dev;
    pthread_mutex_lock(&cd->lock);
    ev->seq = cd->queued;
    pthread_mutex_unlock(&cd->lock);
    *out = &ev->pub;
    return SHARDNET_OK;
}

/* Polls first, then sleeps, as sn_cpu_synchronize does; the worker wakes
 * event sleepers after every task (it counts the task in `finished` under
 * the lock). */
shardnet_status sn_cpu_event_wait(sn_event *pub)
{
    cpu_event *ev = (cpu_event *)pub;
    cpu_device *cd = pub->dev->impl;
    shardnet_status st;
    if (!sn_poll(event_passed, ev, SYNC_SPIN_S)) {
        pthread_mutex_lock(&cd->lock);
        cd->event_sleepers++;
        while (!event_passed(ev))
            pthread_cond_wait(&cd->idle, &cd->lock);
        cd->event_sleepers--;
        pthread_mutex_unlock(&cd->lock);
    }
    pthread_mutex_lock(&cd->lock);
    st = take_failure(cd);
    pthread_mutex_unlock(&cd->lock);
    return st;
}

shardnet_status sn_cpu_event_query(sn_event *ev, int *done)
{
    *done = event_passed(ev);
    return SHARDNET_OK;
}

void sn_cpu_event_free(sn_event *ev)
{
    free(ev);
}
