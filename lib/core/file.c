/*
 * Opening a file that must be a regular one, and dropping a mapped file's
 * pages or having them read ahead (core/file.h).
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/file.h"

int sn_open_regular(const char *path, int flags, struct stat *sb)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | flags);
    if (fd < 0)
        return -1;
    if (fstat(fd, sb) < 0 || !S_ISREG(sb->st_mode)) {
        close(fd);
        return SN_NOT_REGULAR;
    }
    return fd;
}

/*
 * Read-ahead runs on a thread of its own, which populates the ranges
 * queued to it (MADV_POPULATE_READ: the pages read from the file and
 * mapped into the process) a chunk at a time, in the order of their
 * addresses: a mapped file's order, which is about the order a model's
 * layers read their weights.  The first run, computing meanwhile, waits
 * for the thread before a kernel reads a weight in place
 * (sn_wait_file_pages) rather than fault its pages in beside it: the disk
 * then streams the file as one sequential read (measured on this
 * project's host, a cold 537 MB file: 0.143 s populated by the thread,
 * 0.145 s by a run's own page faults, 0.18 to 0.3 s advised with
 * MADV_WILLNEED; but two devices of a tensor split faulting their halves
 * beside the thread took the first run 0.19 to 0.21 s, waiting for it
 * 0.15 s).  A range a run waits for with more than PREFETCH_NEAR queued
 * before it goes first.  Kernels before 5.14 lack that advice:
 * MADV_WILLNEED (read into the page cache, not mapped) then.
 *
 * While a plan is built (sn_prefetch_hold), the thread waits: the
 * weights a device copies are read, copied and dropped one by one, and
 * the pages of those it reads in place, mapped meanwhile, would add to
 * that the peak memory (33 MB more for an fp16 model whose halves are
 * copied for lack of alignment).
 *
 * Pages dropped from the process (sn_drop_file_pages) or whose mapping
 * goes (sn_forget_file_pages) are first cut from the queue, and the chunk
 * in flight, if it overlaps them, is waited for: the thread never maps
 * back pages a device has copied and let go.  A full queue drops a hint.
 */
#define PREFETCH_QUEUE 256
#define PREFETCH_CHUNK ((size_t)4 << 20)
#define PREFETCH_NEAR ((size_t)64 << 20)
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
struct range {
    uintptr_t start, end;
};
static struct range queue[PREFETCH_QUEUE];
static size_t q_head, q_len;
static struct range busy;  /* the chunk the thread is advising, or empty */
static int q_thread;       /* the thread is running (in this process) */
static int q_hold;         /* plans being built: the thread waits */
static int q_pending;      /* q_len or a chunk in hand (read unlocked) */
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cond = PTHREAD_COND_INITIALIZER;
static pthread_once_t q_once = PTHREAD_ONCE_INIT;

/* q_pending anew, under q_lock. */
static void note_pending(void)
{
    __atomic_store_n(&q_pending, q_len > 0 || busy.end > busy.start,
                     __ATOMIC_RELAXED);
}

static void *prefetcher(void *arg)
{
    (void)arg;
    int advice = MADV_POPULATE_READ;
    for (;;) {
        pthread_mutex_lock(&q_lock);
        while (!q_len || q_hold)
            pthread_cond_wait(&q_cond, &q_lock);
        struct range *r = &queue[q_head];
        busy.start = r->start;
        busy.end = r->end - r->start > PREFETCH_CHUNK
                       ? r->start + PREFETCH_CHUNK
                       : r->end;
        r->start = busy.end;
        if (r->start == r->end) {
            q_head = (q_head + 1) % PREFETCH_QUEUE;
            q_len--;
        }
        note_pending();
        pthread_mutex_unlock(&q_lock);
        if (madvise((void *)busy.start, busy.end - busy.start, advice) &&
            errno == EINVAL && advice == MADV_POPULATE_READ) {
            advice = MADV_WILLNEED; /* an older kernel */
            madvise((void *)busy.start, busy.end - busy.start, advice);
        }
        pthread_mutex_lock(&q_lock);
        busy.start = busy.end = 0;
        note_pending();
        pthread_cond_broadcast(&q_cond);
        pthread_mutex_unlock(&q_lock);
    }
    return NULL;
}

/* A child of fork has no prefetcher thread (and its queue is not its
 * own): it starts one when it needs it. */
static void forked(void)
{
    q_thread = 0;
    q_head = q_len = 0;
    q_hold = 0;
    busy.start = busy.end = 0;
    q_pending = 0;
    pthread_mutex_init(&q_lock, NULL);
    pthread_cond_init(&q_cond, NULL);
}

static void at_fork(void)
{
    pthread_atfork(NULL, NULL, forked);
}

/* The whole pages around [start, start + bytes): those at the ends lie in
 * the same mapping, which begins and ends on page boundaries. */
static struct range whole_pages(const void *start, size_t bytes)
{
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t p = page > 0 ? (uintptr_t)page : 4096;
    return (struct range){(uintptr_t)start / p * p,
                          ((uintptr_t)start + bytes + p - 1) / p * p};
}

void sn_prefetch_file_pages(const void *start, size_t bytes)
{
    if (!start || !bytes)
        return;
    struct range r = whole_pages(start, bytes);
    pthread_once(&q_once, at_fork);
    pthread_mutex_lock(&q_lock);
    if (!q_thread) {
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        q_thread = pthread_create(&t, &at, prefetcher, NULL) == 0;
        pthread_attr_destroy(&at);
    }
    if (q_thread && q_len < PREFETCH_QUEUE) {
        size_t at = q_len; /* in address order: the file's, for a mapping */
        for (; at > 0 && queue[(q_head + at - 1) % PREFETCH_QUEUE].start >
                              r.start;
             at--)
            queue[(q_head + at) % PREFETCH_QUEUE] =
                queue[(q_head + at - 1) % PREFETCH_QUEUE];
        queue[(q_head + at) % PREFETCH_QUEUE] = r;
        q_len++;
        note_pending();
        pthread_cond_broadcast(&q_cond);
    }
    pthread_mutex_unlock(&q_lock);
}

/* Whether ranges a and b share a byte (an empty one shares none). */
static int overlaps(struct range a, struct range b)
{
    return a.end > b.start && a.start < b.end;
}

/* The parts of r outside w, in order, into part; how many (0 to 2). */
static size_t outside(struct range r, struct range w, struct range part[2])
{
    struct range before = {r.start, r.end < w.start ? r.end : w.start},
                 after = {r.start > w.end ? r.start : w.end, r.end};
    size_t n = 0;
    if (before.start < before.end)
        part[n++] = before;
    if (after.start < after.end)
        part[n++] = after;
    return n;
}

/* Cut [cut.start, cut.end) from the queued ranges (a range it splits
 * keeps its first part where no slot is left for the second), then wait
 * for a chunk in flight that overlaps it.  The queue's order is kept. */
static void cut_from_queue(struct range cut)
{
    pthread_once(&q_once, at_fork);
    pthread_mutex_lock(&q_lock);
    struct range kept[PREFETCH_QUEUE];
    size_t n = 0;
    for (size_t i = 0; i < q_len; i++) {
        struct range part[2];
        size_t np = outside(queue[(q_head + i) % PREFETCH_QUEUE], cut, part);
        for (size_t k = 0; k < np && n < PREFETCH_QUEUE; k++)
            kept[n++] = part[k];
    }
    for (size_t i = 0; i < n; i++)
        queue[(q_head + i) % PREFETCH_QUEUE] = kept[i];
    q_len = n;
    note_pending();
    /* A wait for pages just cut ends (sn_wait_file_pages): with nothing
     * left to map, the thread would never wake it. */
    pthread_cond_broadcast(&q_cond);
    while (overlaps(busy, cut))
        pthread_cond_wait(&q_cond, &q_lock);
    pthread_mutex_unlock(&q_lock);
}

void sn_drop_file_pages(const void *start, size_t bytes)
{
    if (!start || !bytes)
        return;
    struct range r = whole_pages(start, bytes);
    cut_from_queue(r);
    madvise((void *)r.start, r.end - r.start, MADV_DONTNEED);
}

void sn_forget_file_pages(const void *start, size_t bytes)
{
    if (start && bytes)
        cut_from_queue(whole_pages(start, bytes));
}

void sn_prefetch_hold(void)
{
    pthread_once(&q_once, at_fork);
    pthread_mutex_lock(&q_lock);
    q_hold++;
    pthread_cond_broadcast(&q_cond); /* sn_wait_file_pages stops waiting */
    pthread_mutex_unlock(&q_lock);
}

void sn_prefetch_release(void)
{
    pthread_mutex_lock(&q_lock);
    if (q_hold > 0)
        q_hold--;
    pthread_cond_broadcast(&q_cond);
    pthread_mutex_unlock(&q_lock);
}

int sn_file_pages_pending(void)
{
    return __atomic_load_n(&q_pending, __ATOMIC_RELAXED);
}

size_t sn_prefetch_queued(const void **start, size_t *bytes, size_t max)
{
    pthread_once(&q_once, at_fork);
    pthread_mutex_lock(&q_lock);
    size_t n = q_len;
    for (size_t i = 0; i < n && i < max; i++) {
        struct range r = queue[(q_head + i) % PREFETCH_QUEUE];
        start[i] = (const void *)r.start;
        bytes[i] = r.end - r.start;
    }
    pthread_mutex_unlock(&q_lock);
    return n;
}

/* Whether a queued range or the chunk in hand overlaps w (under q_lock). */
static int queued_in(struct range w)
{
    if (overlaps(busy, w))
        return 1;
    for (size_t i = 0; i < q_len; i++)
        if (overlaps(queue[(q_head + i) % PREFETCH_QUEUE], w))
            return 1;
    return 0;
}

void sn_wait_file_pages(const void *start, size_t bytes)
{
    if (!start || !bytes || !sn_file_pages_pending())
        return;
    struct range w = whole_pages(start, bytes);
    pthread_once(&q_once, at_fork);
    pthread_mutex_lock(&q_lock);
    /* The bytes queued before w's first queued part: more than
     * PREFETCH_NEAR, and w's parts go first (the rest keeps its order;
     * nothing moves where the queue has no room for a range w cuts). */
    size_t ahead = 0, i = 0;
    for (; i < q_len; i++) {
        struct range r = queue[(q_head + i) % PREFETCH_QUEUE];
        if (overlaps(r, w)) {
            ahead += r.start < w.start ? w.start - r.start : 0;
            break;
        }
        ahead += r.end - r.start;
    }
    if (i < q_len && ahead > PREFETCH_NEAR) {
        struct range front[PREFETCH_QUEUE], rest[2 * PREFETCH_QUEUE];
        size_t nf = 0, nr = 0;
        for (i = 0; i < q_len; i++) {
            struct range r = queue[(q_head + i) % PREFETCH_QUEUE];
            if (!overlaps(r, w)) {
                rest[nr++] = r;
                continue;
            }
            front[nf++] = (struct range){r.start > w.start ? r.start : w.start,
                                         r.end < w.end ? r.end : w.end};
            nr += outside(r, w, rest + nr);
        }
        if (nf + nr <= PREFETCH_QUEUE) {
            for (i = 0; i < nf + nr; i++)
                queue[(q_head + i) % PREFETCH_QUEUE] =
                    i < nf ? front[i] : rest[i - nf];
            q_len = nf + nr;
        }
    }
    while (q_thread && !q_hold && queued_in(w))
        pthread_cond_wait(&q_cond, &q_lock);
    pthread_mutex_unlock(&q_lock);
}
