/*
 * Opening a file that must be a regular one, and dropping a mapped file's
 * pages or having them read ahead (core/file.h).
 */
#include <config.h>

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

/* madvise(advice) on the whole pages of a mapping's [start, start+bytes):
 * those at the ends lie in the same mapping, which begins and ends on
 * page boundaries. */
static void advise_pages(const void *start, size_t bytes, int advice)
{
    long page = sysconf(_SC_PAGESIZE);
    if (!start || !bytes || page <= 0)
        return;
    uintptr_t a = (uintptr_t)start / (uintptr_t)page * (uintptr_t)page,
              e = ((uintptr_t)start + bytes + (uintptr_t)page - 1) /
                  (uintptr_t)page * (uintptr_t)page;
    madvise((void *)a, e - a, advice);
}

void sn_drop_file_pages(const void *start, size_t bytes)
{
    advise_pages(start, bytes, MADV_DONTNEED);
}

/*
 * Read-ahead runs on a thread of its own: MADV_WILLNEED submits the reads
 * of its whole range before it returns, so advised where the weights are
 * uploaded it would read a big model's file before the first run could
 * start using it.  Queued here, in order, the reads overlap the first
 * run, which waits only for the pages it reaches before they arrive.  A
 * range whose mapping went away before its turn is advised harmlessly
 * (ENOMEM); a full queue drops the hint.
 */
#define PREFETCH_QUEUE 256
static struct range {
    const void *start;
    size_t bytes;
} queue[PREFETCH_QUEUE];
static size_t q_head, q_len;
static int q_thread; /* the thread is running (in this process) */
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cond = PTHREAD_COND_INITIALIZER;
static pthread_once_t q_once = PTHREAD_ONCE_INIT;

static void *prefetcher(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&q_lock);
        while (!q_len)
            pthread_cond_wait(&q_cond, &q_lock);
        struct range r = queue[q_head];
        q_head = (q_head + 1) % PREFETCH_QUEUE;
        q_len--;
        pthread_mutex_unlock(&q_lock);
        advise_pages(r.start, r.bytes, MADV_WILLNEED);
    }
    return NULL;
}

/* A child of fork has no prefetcher thread (and its queue is not its
 * own): it starts one when it needs it. */
static void forked(void)
{
    q_thread = 0;
    q_head = q_len = 0;
    pthread_mutex_init(&q_lock, NULL);
}

static void at_fork(void)
{
    pthread_atfork(NULL, NULL, forked);
}

void sn_prefetch_file_pages(const void *start, size_t bytes)
{
    if (!start || !bytes)
        return;
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
        queue[(q_head + q_len) % PREFETCH_QUEUE] = (struct range){start, bytes};
        q_len++;
        pthread_cond_signal(&q_cond);
    }
    pthread_mutex_unlock(&q_lock);
}
