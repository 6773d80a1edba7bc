/*
 * The CPU backend's own declarations, shared by its files and seen nowhere
 * else: a device's state and its queue of tasks, its buffers, and what one
 * file of the backend calls in another.
 *
 *   cpu.c     discovery (hwloc packages, this process's share of their
 *             cores), partitions (some of a device's cores), a device's
 *             life, the ops table
 *   queue.c   the worker thread and its queue, the thread that drives a
 *             device itself, binding threads and teams to the package,
 *             events (a place in the queue)
 *   tasks.c   one task run on the package's cores: the cpu/ kernel it
 *             calls or the copy it makes, the packed copies of constant
 *             GEMM operands
 *   buffer.c  buffers: host memory bound to the package's NUMA node, and
 *             their copies, blocking or queued
 */
#ifndef SN_CPU_BACKEND_H
#define SN_CPU_BACKEND_H

#include <hwloc.h>
#include <pthread.h>
#include <stdatomic.h>

#include "backend/backend.h"
#include "cpu_kernels.h"

/* A task's kind beyond the kernels (sn_kernel): the copies of the stream
 * and the worker's own. */
enum {
    TASK_WRITE = SN_KERNEL_COUNT, /* host memory into a buffer
                                     (buffer_write_async) */
    TASK_READ,        /* a buffer into host memory (buffer_read_async) */
    TASK_RELEASE_TEAM /* the worker's: its OpenMP team goes (queue.c) */
};

/* A queued copy between bytes [offset, offset + bytes) of buf and host
 * memory: src for a TASK_WRITE, dst for a TASK_READ.  The buffer's memory
 * is looked up when the task runs (a lend may have changed it). */
typedef struct host_copy {
    sn_buffer *buf;
    size_t offset, bytes;
    const void *src;
    void *dst;
} host_copy;

typedef struct task {
    int kind;         /* an sn_kernel, or one of the TASK_ kinds above */
    sn_kernel_desc u; /* a kernel's: the member kind names */
    host_copy host;   /* TASK_WRITE's and TASK_READ's */
} task;

typedef struct cpu_device {
    char name[16]; /* info.name: "cpu:0", a partition's "cpu:0[0-1]" */
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
    atomic_int worker_team; /* the worker has an OpenMP team (queue.c) */
    int running;           /* the worker is executing a task */
    /* Events: tasks ever put in the ring, and ever finished by the worker
     * (in order, so every task up to `finished` is done); event waiters
     * asleep on `idle`, which then hear of every finished task. */
    uint64_t queued;
    _Atomic uint64_t finished;
    int event_sleepers;
    int quit;
    pthread_t worker;
    int worker_started;

    /* Packed copies of constant GEMM B operands (b_const), for the AVX-512
     * SGEMM: made on first use on the worker, dropped when their buffer is
     * freed.  The lock orders the worker against sn_cpu_buffer_free. */
    pthread_mutex_t pack_lock;
    struct packed_entry *packs;
    uint64_t packed_bytes; /* packed so far, for the progress callback */
    double pack_stamp;

    /* A task that could not run (out of memory restoring a packed
     * weight): the first one's message, reported and cleared by the next
     * synchronize or event wait.  Under `lock`. */
    int failed;
    char failure[256];
} cpu_device;

typedef struct packed_entry {
    const sn_buffer *buf;
    size_t offset, ldb, k, n;
    int trans_b;
    sn_cpu_packed_b *pb;
    struct packed_entry *next;
} packed_entry;

/* A buffer: the public part first, so that sn_buffer * converts back. */
typedef struct cpu_buf {
    sn_buffer pub;  /* pub.handle marks hwloc memory (buffer.c) */
    void *host;     /* the memory itself */
    void *own_host; /* host's own memory while it is lent */
    int wrapped;    /* host is the caller's (buffer_wrap): never freed */
    unsigned wrap_flags; /* buffer_wrap's flags */
    /* host is NULL: this packed copy of the whole buffer replaced it
     * (sn_cpu_buffer_replace), until sn_cpu_buffer_host restores it. */
    const struct packed_entry *replaced;
} cpu_buf;

/* An event: done once the worker has finished `seq` tasks. */
typedef struct cpu_event {
    sn_event pub;
    uint64_t seq;
} cpu_event;

/* tasks.c: run t on the calling thread (the worker, or the thread that
 * drives the device); drop the packed copies of buf's contents (every one
 * where buf is NULL). */
void sn_cpu_run_task(cpu_device *cd, const task *t);
/* queue.c: note that a task failed (the first failure's why is kept). */
void sn_cpu_task_failed(cpu_device *cd, const char *why);
void sn_cpu_drop_packed(cpu_device *cd, const sn_buffer *buf);

/* queue.c: the worker's loop (its thread's start routine); queue a task
 * (run it at once on the driving thread); wait for the queue to drain;
 * the ops table's bind_thread. */
void *sn_cpu_worker_main(void *arg);
shardnet_status sn_cpu_enqueue(sn_device *dev, const task *t);
shardnet_status sn_cpu_synchronize(sn_device *dev);
void sn_cpu_bind_thread(sn_device *dev, int on);
/* queue.c: the ops table's event members. */
shardnet_status sn_cpu_event_record(sn_device *dev, sn_event **out);
shardnet_status sn_cpu_event_wait(sn_event *ev);
shardnet_status sn_cpu_event_query(sn_event *ev, int *done);
void sn_cpu_event_free(sn_event *ev);

/* buffer.c: the ops table's buffer members. */
shardnet_status sn_cpu_buffer_alloc(sn_device *dev, size_t bytes,
                                    sn_buffer **out);
void sn_cpu_buffer_free(sn_buffer *buf);
shardnet_status sn_cpu_buffer_wrap(sn_device *dev, const void *host,
                                   size_t bytes, unsigned flags,
                                   sn_buffer **out);
/* buffer.c: let packed copy e, which holds all of cb's bytes (a constant
 * GEMM operand filling its buffer), replace cb's memory; 0 where it does
 * not hold them all, or cb's memory is not the buffer's own. */
int sn_cpu_buffer_replace(cpu_device *cd, cpu_buf *cb,
                          const struct packed_entry *e);
/* buffer.c: cb's memory, unpacked again where a packed copy replaced it;
 * NULL when out of memory for that. */
void *sn_cpu_buffer_host(cpu_buf *cb);
/* buffer.c: drop the pages of a droppable wrapped buffer's bytes
 * [start, start + bytes), now that a copy of them is kept elsewhere. */
void sn_cpu_buffer_drop_pages(const sn_buffer *buf, const void *start,
                              size_t bytes);
shardnet_status sn_cpu_buffer_write(sn_buffer *buf, size_t offset,
                                    const void *src, size_t bytes);
shardnet_status sn_cpu_buffer_read(sn_buffer *buf, size_t offset, void *dst,
                                   size_t bytes);
shardnet_status sn_cpu_buffer_write_async(sn_buffer *buf, size_t offset,
                                          const void *src, size_t bytes);
shardnet_status sn_cpu_buffer_read_async(sn_buffer *buf, size_t offset,
                                         void *dst, size_t bytes);
shardnet_status sn_cpu_buffer_map(sn_buffer *buf, size_t offset, size_t bytes,
                                  int flags, void **ptr);
shardnet_status sn_cpu_buffer_unmap(sn_buffer *buf, void *ptr);
shardnet_status sn_cpu_buffer_lend(sn_buffer *buf, void *ptr);

#endif /* SN_CPU_BACKEND_H */
