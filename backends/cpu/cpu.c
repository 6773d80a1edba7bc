/*
 * The CPU backend: one device per CPU package (socket) found by hwloc.
 *
 * Each device owns a worker thread, bound to its package's cores with its
 * memory policy bound to the package's NUMA node.  The worker is the device's
 * in-order queue: kernels are enqueued as tasks and run there, one after the
 * other, so two CPU devices compute at once just as two OpenCL queues do.
 * The worker is also the master of an OpenMP team of one thread per core of
 * the package; each team thread is pinned to its own core once, when the
 * worker starts, and libgomp keeps reusing that team (same master, same
 * size) for every parallel region the kernels in cpu/ open.  OpenBLAS runs
 * single-threaded inside that team (see cpu/gemm.c), so the process never
 * has more busy threads than cores, however many CPU devices work at once.
 *
 * A device uses the cores of its package that this process may run on: a
 * process bound by its launcher (mpirun binds each of two processes to a
 * core) keeps to its cores, and its team is as big as they are.  A process
 * free to run anywhere that shares the machine with other processes of its
 * job (mpirun --bind-to none) takes its even share of each package's cores,
 * by its rank on the machine (sn_discover_args: the context, which knows
 * the job, passes it), so that two processes opening the same package do
 * not pin their teams onto the same cores.  A process bound
 * outside a package (a simulated package, or one its launcher gave to
 * another process) uses the whole package where the system lets it bind
 * there; where it cannot (a simulated topology with more PUs than the
 * machine) the device warns once and its threads run unbound: slower,
 * never wrong.
 *
 * Buffers are allocated bound to the package's NUMA node (falling back to
 * plain aligned memory where the OS cannot bind, e.g. on a simulated
 * topology); they are host memory, so mapping is zero-copy.
 */
#include <config.h>

#include <hwloc.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend/backend.h"
#include "cpu_kernels.h"
#include "core/error.h"
#include "core/trace.h"

/* The topology, shared by every CPU device of the process. */
static struct {
    pthread_mutex_t lock;
    hwloc_topology_t topo;
    unsigned refs;
} shared_topo = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};

typedef enum task_kind {
    TASK_GEMM,
    TASK_BINARY,
    TASK_UNARY,
    TASK_SOFTMAX,
    TASK_REDUCE,
    TASK_WHERE,
    TASK_COPY,
    TASK_IM2COL,
    TASK_POOL,
    TASK_LAYERNORM,
    TASK_GATHER,
    TASK_RELEASE_TEAM /* the worker's: its OpenMP team goes (see below) */
} task_kind;

typedef struct task {
    task_kind kind;
    union {
        sn_gemm_desc gemm;
        sn_binary_desc binary;
        sn_unary_desc unary;
        sn_softmax_desc softmax;
        sn_reduce_desc reduce;
        sn_where_desc where;
        sn_copy_desc copy;
        sn_im2col_desc im2col;
        sn_pool_desc pool;
        sn_layernorm_desc layernorm;
        sn_gather_desc gather;
    } u;
} task;

typedef struct cpu_device {
    char name[16];
    hwloc_topology_t topo;
    hwloc_cpuset_t cpuset;   /* the package's PUs that this process uses */
    hwloc_nodeset_t nodeset; /* its NUMA node(s) */
    hwloc_cpuset_t *cores;   /* one cpuset per core, ncores of them */
    unsigned ncores;
    int membind_ok; /* hwloc_alloc_membind works here */
    int one_node;   /* the machine has one NUMA node */
    atomic_int bind_warned; /* a failed binding was reported */

    /* The queue: a ring of tasks, grown under the lock when full. */
    pthread_mutex_t lock;
    pthread_cond_t wake; /* worker: work arrived or quit */
    pthread_cond_t idle; /* waiters: queue drained */
    task *ring;
    size_t cap, head, count;
    atomic_size_t pending; /* tasks queued or running; read while spinning */
    atomic_int sleepers;   /* synchronize callers waiting on `idle` */
    atomic_int worker_team; /* the worker has an OpenMP team (worker_main) */
    int running;           /* the worker is executing a task */
    int quit;
    pthread_t worker;
    int worker_started;

    /* Packed copies of constant GEMM B operands (b_const), for the AVX-512
     * SGEMM: made on first use on the worker, dropped when their buffer is
     * freed.  The lock orders the worker against cpu_buffer_free. */
    pthread_mutex_t pack_lock;
    struct packed_entry *packs;
} cpu_device;

typedef struct packed_entry {
    const sn_buffer *buf;
    size_t offset, ldb, k, n;
    int trans_b;
    sn_cpu_packed_b *pb;
    struct packed_entry *next;
} packed_entry;

static const sn_backend_ops cpu_ops;

static float *view_ptr(sn_view v)
{
    return (float *)v.buf->host + v.offset;
}

/* An optional operand (a bias): NULL when the view has no buffer. */
static const float *view_ptr_or_null(sn_view v)
{
    return v.buf ? view_ptr(v) : NULL;
}

/* Gather's indices: int32 stored bit for bit, the offset in 4-byte units. */
static const int32_t *index_ptr(sn_view v)
{
    return (const int32_t *)v.buf->host + v.offset;
}

/* The packed copy of d's constant B, made now if missing; NULL where the
 * AVX-512 kernel does not take d or memory is short. */
static const sn_cpu_packed_b *packed_b(cpu_device *cd, const sn_gemm_desc *d)
{
    packed_entry *e;
    sn_cpu_packed_b *pb = NULL;

    if (!d->b_const || !sn_cpu_sgemm_avx512_supports(d) ||
        !sn_cpu_sgemm_avx512_worth(d, 1))
        return NULL;
    pthread_mutex_lock(&cd->pack_lock);
    for (e = cd->packs; e; e = e->next)
        if (e->buf == d->b.buf && e->offset == d->b.offset &&
            e->ldb == d->ldb && e->trans_b == !!d->trans_b && e->k == d->k &&
            e->n == d->n) {
            pb = e->pb;
            break;
        }
    pthread_mutex_unlock(&cd->pack_lock);
    if (pb)
        return pb;
    /* Packed outside the lock: only this worker adds entries, and the
     * buffer cannot be freed while its task runs (cpu_buffer_free drains). */
    e = malloc(sizeof *e);
    pb = e ? sn_cpu_packed_b_alloc(d->k, d->n) : NULL;
    if (!pb) {
        free(e);
        return NULL;
    }
    sn_cpu_pack_b(pb, d, view_ptr(d->b));
    *e = (packed_entry){d->b.buf, d->b.offset, d->ldb, d->k, d->n,
                        !!d->trans_b, pb, NULL};
    pthread_mutex_lock(&cd->pack_lock);
    e->next = cd->packs;
    cd->packs = e;
    pthread_mutex_unlock(&cd->pack_lock);
    return pb;
}

/* Drops the packed copies of buf's contents (every one where buf is NULL). */
static void drop_packed(cpu_device *cd, const sn_buffer *buf)
{
    packed_entry **pe, *e;
    pthread_mutex_lock(&cd->pack_lock);
    for (pe = &cd->packs; (e = *pe);) {
        if (!buf || e->buf == buf) {
            *pe = e->next;
            sn_cpu_packed_b_free(e->pb);
            free(e);
        } else {
            pe = &e->next;
        }
    }
    pthread_mutex_unlock(&cd->pack_lock);
}

static void run_task(cpu_device *cd, const task *t)
{
    const sn_cpu_packed_b *pb;

    switch (t->kind) {
    case TASK_GEMM:
        if ((pb = packed_b(cd, &t->u.gemm))) {
            sn_cpu_sgemm_avx512_packed(&t->u.gemm, view_ptr(t->u.gemm.a), pb,
                                       view_ptr(t->u.gemm.c),
                                       view_ptr_or_null(t->u.gemm.bias));
            break;
        }
        sn_cpu_gemm(&t->u.gemm, view_ptr(t->u.gemm.a), view_ptr(t->u.gemm.b),
                    view_ptr(t->u.gemm.c), view_ptr_or_null(t->u.gemm.bias));
        break;
    case TASK_BINARY:
        sn_cpu_binary(&t->u.binary, view_ptr(t->u.binary.a),
                      view_ptr(t->u.binary.b), view_ptr(t->u.binary.c));
        break;
    case TASK_UNARY:
        sn_cpu_unary(&t->u.unary, view_ptr(t->u.unary.x),
                     view_ptr(t->u.unary.y));
        break;
    case TASK_SOFTMAX:
        sn_cpu_softmax(&t->u.softmax, view_ptr(t->u.softmax.x),
                       view_ptr(t->u.softmax.y));
        break;
    case TASK_REDUCE:
        sn_cpu_reduce(&t->u.reduce, view_ptr(t->u.reduce.x),
                      view_ptr(t->u.reduce.y));
        break;
    case TASK_WHERE:
        sn_cpu_where(&t->u.where, view_ptr(t->u.where.cond),
                     view_ptr(t->u.where.x), view_ptr(t->u.where.y),
                     view_ptr(t->u.where.out));
        break;
    case TASK_COPY:
        sn_cpu_copy(&t->u.copy, view_ptr(t->u.copy.src),
                    view_ptr(t->u.copy.dst));
        break;
    case TASK_IM2COL:
        sn_cpu_im2col(&t->u.im2col, view_ptr(t->u.im2col.src),
                      view_ptr(t->u.im2col.dst));
        break;
    case TASK_POOL:
        sn_cpu_pool(&t->u.pool, view_ptr(t->u.pool.src),
                    view_ptr(t->u.pool.dst));
        break;
    case TASK_LAYERNORM:
        sn_cpu_layernorm(&t->u.layernorm, view_ptr(t->u.layernorm.x),
                         view_ptr(t->u.layernorm.scale),
                         view_ptr_or_null(t->u.layernorm.bias),
                         view_ptr(t->u.layernorm.y));
        break;
    case TASK_GATHER:
        sn_cpu_gather(&t->u.gather, view_ptr(t->u.gather.data),
                      index_ptr(t->u.gather.indices),
                      view_ptr(t->u.gather.out));
        break;
    case TASK_RELEASE_TEAM: /* the worker's own (worker_main) */
        break;
    }
}

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
 * While a thread drives the device (cpu_bind_thread), the worker gives its
 * team back to libgomp: two teams of one package's size are more threads
 * than the process has cores, and libgomp then cuts every thread's spin at
 * a barrier to a few iterations (its throttled spin count), so that each
 * parallel kernel of the driving thread wakes its team from sleep (on the
 * 2-core machine: the MLP at batch 100 in 0.83 against 0.70 ms).  The
 * worker pins a new team when it next runs a kernel.
 */
static void *worker_main(void *arg)
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
            run_task(cd, &t);
        }

        pthread_mutex_lock(&cd->lock);
        cd->running = 0;
        atomic_fetch_sub(&cd->pending, 1);
        if (cd->count == 0)
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
static shardnet_status cpu_synchronize(sn_device *dev);
static shardnet_status enqueue(sn_device *dev, const task *t);
static _Thread_local hwloc_bitmap_t saved_binding;
static _Thread_local hwloc_bitmap_t *saved_team; /* per team thread */
static _Thread_local hwloc_nodeset_t saved_nodes; /* NULL: not known */
static _Thread_local hwloc_membind_policy_t saved_policy;
static _Thread_local int saved_threads, saved_dynamic;

static void cpu_bind_thread(sn_device *dev, int on)
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
        enqueue(dev, &release);
    }
    cpu_synchronize(dev);
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

static shardnet_status enqueue(sn_device *dev, const task *t)
{
    cpu_device *cd = dev->impl;
    if (driving == cd) {
        /* Counted as pending, so that a synchronize from another thread (a
         * collective mapping this device's buffer) waits for it. */
        atomic_fetch_add(&cd->pending, 1);
        run_task(cd, t);
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
    atomic_fetch_add(&cd->pending, 1);
    pthread_cond_signal(&cd->wake);
    pthread_mutex_unlock(&cd->lock);
    return SHARDNET_OK;
}

/* How long a synchronising caller polls before it sleeps. */
#define SYNC_SPIN_S 1e-3

static shardnet_status cpu_synchronize(sn_device *dev)
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
    pthread_mutex_unlock(&cd->lock);
    return SHARDNET_OK;
}

/* Kernels are tasks on the device's queue: the descriptor is copied in. */
#define CPU_KERNEL(fn, desc, kind_, member)                                   \
    static shardnet_status fn(sn_device *dev, const desc *d)                  \
    {                                                                         \
        task t = {.kind = kind_, .u.member = *d};                             \
        return enqueue(dev, &t);                                              \
    }

CPU_KERNEL(cpu_gemm, sn_gemm_desc, TASK_GEMM, gemm)
CPU_KERNEL(cpu_binary, sn_binary_desc, TASK_BINARY, binary)
CPU_KERNEL(cpu_unary, sn_unary_desc, TASK_UNARY, unary)
CPU_KERNEL(cpu_softmax, sn_softmax_desc, TASK_SOFTMAX, softmax)
CPU_KERNEL(cpu_reduce, sn_reduce_desc, TASK_REDUCE, reduce)
CPU_KERNEL(cpu_where, sn_where_desc, TASK_WHERE, where)
CPU_KERNEL(cpu_copy, sn_copy_desc, TASK_COPY, copy)
CPU_KERNEL(cpu_im2col, sn_im2col_desc, TASK_IM2COL, im2col)
CPU_KERNEL(cpu_pool, sn_pool_desc, TASK_POOL, pool)
CPU_KERNEL(cpu_layernorm, sn_layernorm_desc, TASK_LAYERNORM, layernorm)
CPU_KERNEL(cpu_gather, sn_gather_desc, TASK_GATHER, gather)

/* Allocation granule: a cache line, and room for vector loads. */
#define CPU_ALIGN 64

static shardnet_status cpu_buffer_alloc(sn_device *dev, size_t bytes,
                                        sn_buffer **out)
{
    cpu_device *cd = dev->impl;
    size_t len = bytes ? bytes : 1;
    sn_buffer *buf;
    void *mem = NULL;

    if (dev->info.max_alloc && bytes > dev->info.max_alloc)
        return sn_error(SHARDNET_OUT_OF_MEMORY,
                        "%s: buffer of %zu bytes exceeds the device's %llu",
                        dev->info.name, bytes,
                        (unsigned long long)dev->info.max_alloc);
    buf = calloc(1, sizeof *buf);
    if (!buf)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s: buffer", dev->info.name);
    if (cd->membind_ok)
        mem = hwloc_alloc_membind(cd->topo, len, cd->nodeset,
                                  HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET);
    if (mem) {
        buf->handle = buf; /* marks hwloc memory, freed with hwloc_free */
    } else if (posix_memalign(&mem, CPU_ALIGN,
                              (len + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN)) {
        free(buf);
        return sn_error(SHARDNET_OUT_OF_MEMORY,
                        "%s: cannot allocate %zu bytes", dev->info.name, bytes);
    }
    buf->dev = dev;
    buf->size = bytes;
    buf->host = mem;
    *out = buf;
    return SHARDNET_OK;
}

static void cpu_buffer_free(sn_buffer *buf)
{
    cpu_device *cd = buf->dev->impl;
    /* A queued kernel may still use it: drain first (cheap when idle). */
    cpu_synchronize(buf->dev);
    drop_packed(cd, buf);
    void *mem = buf->own_host ? buf->own_host : buf->host; /* not a loan */
    if (buf->handle)
        hwloc_free(cd->topo, mem, buf->size ? buf->size : 1);
    else
        free(mem);
    free(buf);
}

static shardnet_status cpu_buffer_write(sn_buffer *buf, size_t offset,
                                        const void *src, size_t bytes)
{
    cpu_synchronize(buf->dev); /* in order after queued kernels */
    memcpy((char *)buf->host + offset, src, bytes);
    return SHARDNET_OK;
}

static shardnet_status cpu_buffer_read(sn_buffer *buf, size_t offset,
                                       void *dst, size_t bytes)
{
    cpu_synchronize(buf->dev);
    memcpy(dst, (char *)buf->host + offset, bytes);
    return SHARDNET_OK;
}

static shardnet_status cpu_buffer_map(sn_buffer *buf, size_t offset,
                                      size_t bytes, int flags, void **ptr)
{
    cpu_synchronize(buf->dev);
    *ptr = (char *)buf->host + offset;
    return SHARDNET_OK;
}

static shardnet_status cpu_buffer_unmap(sn_buffer *buf, void *ptr)
{
    return SHARDNET_OK;
}

static shardnet_status cpu_buffer_lend(sn_buffer *buf, void *ptr)
{
    cpu_synchronize(buf->dev); /* queued kernels still use the old memory */
    if (ptr) {
        if (!buf->own_host)
            buf->own_host = buf->host;
        buf->host = ptr;
    } else if (buf->own_host) {
        buf->host = buf->own_host;
        buf->own_host = NULL;
    }
    return SHARDNET_OK;
}

static void release_topology(void)
{
    pthread_mutex_lock(&shared_topo.lock);
    if (shared_topo.refs && --shared_topo.refs == 0) {
        hwloc_topology_destroy(shared_topo.topo);
        shared_topo.topo = NULL;
    }
    pthread_mutex_unlock(&shared_topo.lock);
}

static void cpu_device_free(sn_device *dev)
{
    cpu_device *cd = dev->impl;
    if (cd) {
        if (cd->worker_started) {
            pthread_mutex_lock(&cd->lock);
            cd->quit = 1;
            pthread_cond_signal(&cd->wake);
            pthread_mutex_unlock(&cd->lock);
            pthread_join(cd->worker, NULL);
        }
        pthread_mutex_destroy(&cd->lock);
        pthread_cond_destroy(&cd->wake);
        pthread_cond_destroy(&cd->idle);
        free(cd->ring);
        drop_packed(cd, NULL);
        pthread_mutex_destroy(&cd->pack_lock);
        for (unsigned i = 0; i < cd->ncores; i++)
            hwloc_bitmap_free(cd->cores[i]);
        free(cd->cores);
        hwloc_bitmap_free(cd->cpuset);
        hwloc_bitmap_free(cd->nodeset);
        free(cd);
        release_topology();
    }
    free(dev);
}

static shardnet_status acquire_topology(hwloc_topology_t *out)
{
    shardnet_status st = SHARDNET_OK;
    pthread_mutex_lock(&shared_topo.lock);
    if (!shared_topo.topo) {
        hwloc_topology_t topo;
        if (hwloc_topology_init(&topo) < 0) {
            st = sn_error(SHARDNET_DEVICE_ERROR, "hwloc: cannot initialise");
            goto out;
        }
        /* No I/O discovery: hwloc's OpenCL/CUDA plugins would re-enter the
         * ICD loader behind the OpenCL backend's back. */
        hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
        if (hwloc_topology_load(topo) < 0) {
            hwloc_topology_destroy(topo);
            st = sn_error(SHARDNET_DEVICE_ERROR,
                          "hwloc: cannot load the topology (HWLOC_SYNTHETIC "
                          "or HWLOC_XMLFILE may be malformed)");
            goto out;
        }
        shared_topo.topo = topo;
    }
    shared_topo.refs++;
    *out = shared_topo.topo;
out:
    pthread_mutex_unlock(&shared_topo.lock);
    return st;
}

/* Copy the first two words of OpenBLAS's configuration ("OpenBLAS 0.3.21"). */
static void blas_version(char *out, size_t cap)
{
    extern char *openblas_get_config(void);
    const char *cfg = openblas_get_config();
    size_t n = 0;
    int spaces = 0;
    while (cfg && cfg[n] && n + 1 < cap) {
        if (cfg[n] == ' ' && ++spaces == 2)
            break;
        n++;
    }
    memcpy(out, cfg ? cfg : "", n);
    out[n] = '\0';
}

static const char *obj_info(hwloc_topology_t topo, hwloc_obj_t pkg,
                            const char *name)
{
    const char *v = hwloc_obj_get_info_by_name(pkg, name);
    if (!v)
        v = hwloc_obj_get_info_by_name(hwloc_get_root_obj(topo), name);
    return v;
}

/* A simulated topology (HWLOC_SYNTHETIC) carries no CPU model: ask Linux. */
static void cpuinfo_field(const char *key, char *out, size_t cap)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    size_t klen = strlen(key);
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, key, klen) || !colon)
            continue;
        colon += 1 + (colon[1] == ' ');
        colon[strcspn(colon, "\n")] = '\0';
        snprintf(out, cap, "%s", colon);
        break;
    }
    fclose(f);
}

/* The cores (or, without a core level, PUs) of `pkg` that meet `use`, each
 * restricted to `use`: cores[0..*n) (malloc'ed). */
static shardnet_status usable_cores(hwloc_topology_t topo, hwloc_obj_t pkg,
                                    hwloc_const_cpuset_t use,
                                    hwloc_cpuset_t **cores, unsigned *n)
{
    hwloc_obj_type_t type = HWLOC_OBJ_CORE;
    int total = hwloc_get_nbobjs_inside_cpuset_by_type(topo, pkg->cpuset, type);
    if (total <= 0) {
        type = HWLOC_OBJ_PU;
        total = hwloc_get_nbobjs_inside_cpuset_by_type(topo, pkg->cpuset, type);
    }
    *n = 0;
    *cores = calloc(total > 0 ? (size_t)total : 1, sizeof **cores);
    if (!*cores)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "cpu device");
    for (int i = 0; i < total; i++) {
        hwloc_obj_t core = hwloc_get_obj_inside_cpuset_by_type(
            topo, pkg->cpuset, type, (unsigned)i);
        if (!core || !hwloc_bitmap_intersects(core->cpuset, use))
            continue;
        if (!((*cores)[*n] = hwloc_bitmap_alloc()))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "cpu device");
        hwloc_bitmap_and((*cores)[(*n)++], core->cpuset, use);
    }
    if (*n == 0) { /* no core object: the whole set is one */
        if (!((*cores)[0] = hwloc_bitmap_dup(use)))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "cpu device");
        *n = 1;
    }
    return SHARDNET_OK;
}

/* Device `index` on package `pkg`, using its PUs in `use` (see the top of
 * this file). */
static shardnet_status open_package(sn_device_list *list,
                                    hwloc_topology_t topo, hwloc_obj_t pkg,
                                    hwloc_const_cpuset_t use, unsigned index)
{
    sn_device *dev = calloc(1, sizeof *dev);
    cpu_device *cd = calloc(1, sizeof *cd);
    shardnet_device_info *info;
    hwloc_obj_t node = NULL;
    char *list_str = NULL;
    shardnet_status st;

    if (!dev || !cd) {
        free(dev);
        free(cd);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "cpu device");
    }
    /* From here on cpu_device_free() owns the clean-up. */
    dev->ops = &cpu_ops;
    dev->impl = cd;
    cd->topo = topo;
    pthread_mutex_init(&cd->lock, NULL);
    pthread_mutex_init(&cd->pack_lock, NULL);
    pthread_cond_init(&cd->wake, NULL);
    pthread_cond_init(&cd->idle, NULL);
    atomic_init(&cd->pending, 0);
    atomic_init(&cd->bind_warned, 0);
    snprintf(cd->name, sizeof cd->name, "cpu:%u", index);
    cd->nodeset = hwloc_bitmap_dup(pkg->nodeset);
    cd->cpuset = hwloc_bitmap_alloc();
    if (!cd->cpuset || !cd->nodeset) {
        st = sn_error(SHARDNET_OUT_OF_MEMORY, "cpu device");
        goto error;
    }
    if ((st = usable_cores(topo, pkg, use, &cd->cores, &cd->ncores)) !=
        SHARDNET_OK)
        goto error;
    {
        /* SHARDNET_CPU_THREADS caps each CPU device's team (benchmarks,
         * sharing the machine); the first usable cores are used. */
        const char *cap = getenv("SHARDNET_CPU_THREADS");
        long v = cap ? strtol(cap, NULL, 10) : 0;
        while (v > 0 && (unsigned long)v < cd->ncores)
            hwloc_bitmap_free(cd->cores[--cd->ncores]);
    }
    for (unsigned i = 0; i < cd->ncores; i++)
        hwloc_bitmap_or(cd->cpuset, cd->cpuset, cd->cores[i]);

    info = &dev->info;
    snprintf(info->name, sizeof info->name, "cpu:%u", index);
    info->kind = SHARDNET_DEVICE_CPU;
    info->index = index;
    {
        const char *model = obj_info(topo, pkg, "CPUModel");
        const char *vendor = obj_info(topo, pkg, "CPUVendor");
        snprintf(info->model, sizeof info->model, "%s",
                 model ? model : "CPU package");
        snprintf(info->vendor, sizeof info->vendor, "%s",
                 vendor ? vendor : "unknown");
        if (!model)
            cpuinfo_field("model name", info->model, sizeof info->model);
        if (!vendor)
            cpuinfo_field("vendor_id", info->vendor, sizeof info->vendor);
    }
    blas_version(info->driver, sizeof info->driver);
    info->compute_units = cd->ncores;
    info->numa_node = -1;
    while ((node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE,
                                              node)) != NULL) {
        if (!hwloc_bitmap_intersects(node->nodeset, pkg->nodeset))
            continue;
        if (info->numa_node < 0)
            info->numa_node = (int)node->os_index;
        info->global_mem += node->attr->numanode.local_memory;
    }
    if (info->global_mem == 0)
        info->global_mem = hwloc_get_root_obj(topo)->total_memory;
    info->max_alloc = info->global_mem;
    info->host_unified = 1;
    if (hwloc_bitmap_list_asprintf(&list_str, cd->cpuset) >= 0 && list_str) {
        snprintf(info->cpuset, sizeof info->cpuset, "%s", list_str);
        free(list_str);
    }

    /* Can this system bind memory?  (Not with every simulated topology.) */
    {
        const struct hwloc_topology_support *sup =
            hwloc_topology_get_support(topo);
        cd->membind_ok = sup->membind->alloc_membind && sup->membind->bind_membind;
        cd->one_node = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE) <= 1;
    }

    if (pthread_create(&cd->worker, NULL, worker_main, cd) != 0) {
        st = sn_error(SHARDNET_DEVICE_ERROR, "%s: cannot start worker thread",
                      info->name);
        goto error;
    }
    cd->worker_started = 1;
    st = sn_device_list_push(list, dev);
    if (st != SHARDNET_OK)
        goto error;
    return SHARDNET_OK;
error:
    cpu_device_free(dev);
    return st;
}

/* Where this process may run: the discovering thread's binding (taken
 * before any device thread exists; a launcher's binding is every thread's),
 * within the topology's allowed PUs; all of them where the system cannot
 * say (a simulated topology).  *bound: narrower than the machine. */
static hwloc_bitmap_t process_cpus(hwloc_topology_t topo, int *bound)
{
    hwloc_const_cpuset_t all = hwloc_topology_get_allowed_cpuset(topo);
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    *bound = 0;
    if (!set)
        return NULL;
    if (hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_THREAD) < 0 ||
        hwloc_bitmap_iszero(set) || hwloc_bitmap_isincluded(all, set)) {
        hwloc_bitmap_copy(set, all);
        return set;
    }
    *bound = 1;
    return set;
}

/* The PUs of `pkg` that device `index` uses (malloc'ed), from the
 * process's PUs `mine` (see the top of this file): processes sharing the
 * machine unbound get the `share`th of `shares` even parts of its cores. */
static hwloc_bitmap_t package_share(hwloc_topology_t topo, hwloc_obj_t pkg,
                                    hwloc_const_cpuset_t mine, int bound,
                                    unsigned share, unsigned shares,
                                    unsigned index)
{
    hwloc_bitmap_t use = hwloc_bitmap_alloc();
    char *a = NULL, *b = NULL;
    if (!use)
        return NULL;
    hwloc_bitmap_and(use, pkg->cpuset, mine);
    if (hwloc_bitmap_iszero(use)) {
        hwloc_bitmap_copy(use, pkg->cpuset);
        if (hwloc_bitmap_list_asprintf(&a, mine) >= 0 &&
            hwloc_bitmap_list_asprintf(&b, pkg->cpuset) >= 0)
            sn_log(SHARDNET_LOG_DEBUG,
                   "cpu:%u: this process runs on PUs %s, none of the "
                   "package's (%s): the device binds its threads to the "
                   "package",
                   index, a, b);
        free(a);
        free(b);
        return use;
    }
    if (!bound && shares > 1) {
        hwloc_cpuset_t *cores = NULL;
        unsigned n = 0;
        if (usable_cores(topo, pkg, use, &cores, &n) == SHARDNET_OK) {
            /* Cores [lo, hi): at least one each (processes beyond the
             * cores double up). */
            unsigned lo = (unsigned)((unsigned long long)share * n / shares);
            unsigned hi = (unsigned)((unsigned long long)(share + 1) * n /
                                     shares);
            if (hi <= lo)
                hi = lo + 1;
            hwloc_bitmap_zero(use);
            for (unsigned i = lo; i < hi && i < n; i++)
                hwloc_bitmap_or(use, use, cores[i]);
        }
        for (unsigned i = 0; cores && i < n; i++)
            hwloc_bitmap_free(cores[i]);
        free(cores);
    }
    return use;
}

static shardnet_status cpu_discover(sn_device_list *list,
                                    const sn_discover_args *args)
{
    hwloc_topology_t topo;
    shardnet_status st = acquire_topology(&topo);
    hwloc_bitmap_t mine, use;
    unsigned share, shares;
    int npkg, bound;

    if (st != SHARDNET_OK)
        return st;
    sn_cpu_gemm_init();
    share = args->node_rank;
    shares = args->node_size;
    if (!(mine = process_cpus(topo, &bound))) {
        release_topology();
        return sn_error(SHARDNET_OUT_OF_MEMORY, "cpu devices");
    }
    npkg = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
    for (int i = 0; i < (npkg > 0 ? npkg : 1); i++) {
        /* Some virtual machines report no package: the machine is one. */
        hwloc_obj_t pkg = npkg > 0 ? hwloc_get_obj_by_type(
                                         topo, HWLOC_OBJ_PACKAGE, (unsigned)i)
                                   : hwloc_get_root_obj(topo);
        if (i > 0) /* each device holds one reference */
            acquire_topology(&topo);
        use = package_share(topo, pkg, mine, bound, share, shares,
                            (unsigned)i);
        st = use ? open_package(list, topo, pkg, use, (unsigned)i)
                 : (release_topology(),
                    sn_error(SHARDNET_OUT_OF_MEMORY, "cpu devices"));
        hwloc_bitmap_free(use);
        if (st != SHARDNET_OK) /* open_package released its reference */
            break;
    }
    hwloc_bitmap_free(mine);
    return st;
}

const char *shardnet_blas_coretype_hint(void)
{
    extern char *openblas_get_corename(void);
    const char *core = openblas_get_corename();
    static const char *const older[] = {"Haswell", "Zen", "Sandybridge",
                                        "Nehalem", "Core2", "Prescott"};
    int is_older = 0;
    if (getenv("OPENBLAS_CORETYPE") || !core)
        return NULL;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init(); /* a shared library may run before libgcc's */
    if (!__builtin_cpu_supports("avx512f") ||
        !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512dq") ||
        !__builtin_cpu_supports("avx512vl"))
        return NULL;
#else
    return NULL;
#endif
    for (size_t i = 0; i < sizeof older / sizeof older[0]; i++)
        is_older |= !strcasecmp(core, older[i]);
    return is_older ? "SkylakeX" : NULL;
}

static const sn_backend_ops cpu_ops = {
    .abi = SN_BACKEND_ABI,
    .kind = "cpu",
    .device_free = cpu_device_free,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_free = cpu_buffer_free,
    .buffer_write = cpu_buffer_write,
    .buffer_read = cpu_buffer_read,
    .buffer_map = cpu_buffer_map,
    .buffer_unmap = cpu_buffer_unmap,
    .buffer_lend = cpu_buffer_lend,
    .gemm = cpu_gemm,
    .binary = cpu_binary,
    .unary = cpu_unary,
    .softmax = cpu_softmax,
    .reduce = cpu_reduce,
    .where = cpu_where,
    .copy = cpu_copy,
    .im2col = cpu_im2col,
    .pool = cpu_pool,
    .layernorm = cpu_layernorm,
    .gather = cpu_gather,
    .synchronize = cpu_synchronize,
    .bind_thread = cpu_bind_thread,
};

const sn_backend sn_cpu_backend = {
    .abi = SN_BACKEND_ABI,
    .kind = "cpu",
    .discover = cpu_discover,
};
