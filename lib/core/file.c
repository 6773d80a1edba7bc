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
 * mapped into the process) a chunk at a time, in order.  The first run,
 * computing meanwhile, finds its weights mapped already, or waits only for
 * the pages it reaches before the thread does; the disk streams the file
 * at its own pace (measured on this project's host, a cold 537 MB file:
 * 0.143 s populated by the thread, 0.145 s by the run's own page faults,
 * 0.18 to 0.3 s advised with MADV_WILLNEED).  Kernels before 5.14 lack
 * that advice: MADV_WILLNEED (read into the page cache, not mapped) then.
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
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cond = PTHREAD_COND_INITIALIZER;
static pthread_once_t q_once = PTHREAD_ONCE_INIT;

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
        pthread_mutex_unlock(&q_lock);
        if (madvise((void *)busy.start, busy.end - busy.start, advice) &&
            errno == EINVAL && advice == MADV_POPULATE_READ) {
            advice = MADV_WILLNEED; /* an older kernel */
            madvise((void *)busy.start, busy.end - busy.start, advice);
        }
        pthread_mutex_lock(&q_lock);
        busy.start = busy.end = 0;
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
        queue[(q_head + q_len) % PREFETCH_QUEUE] = r;
        q_len++;
        pthread_cond_broadcast(&q_cond);
    }
    pthread_mutex_unlock(&q_lock);
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
        struct range r = queue[(q_head + i) % PREFETCH_QUEUE];
        struct range before = {r.start, r.end < cut.start ? r.end : cut.start},
                     after = {r.start > cut.end ? r.start : cut.end, r.end};
        if (before.start < before.end && n < PREFETCH_QUEUE)
            kept[n++] = before;
        if (after.start < after.end && n < PREFETCH_QUEUE)
            kept[n++] = after;
    }
    for (size_t i = 0; i < n; i++)
        queue[(q_head + i) % PREFETCH_QUEUE] = kept[i];
    q_len = n;
    while (busy.end > cut.start && busy.start < cut.end)
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
