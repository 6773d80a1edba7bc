/*
 * The read-ahead of a mapped model's weights (core/file.c): the thread
 * that maps the pages of weights read in place waits while a plan is
 * built (sn_prefetch_hold), maps them once released, and never maps back
 * pages a device has dropped (sn_drop_file_pages) or whose mapping is
 * about to go (sn_forget_file_pages); a run about to read a range waits
 * until the thread has mapped it, that range first where much is queued
 * before it (sn_wait_file_pages).  Pages mapped are read from
 * /proc/self/smaps (the mapping's Rss) and /proc/self/pagemap (a page's
 * present bit).
 */
#include <config.h>

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/file.h"

#define MIB ((size_t)1 << 20)

/* A file of `bytes` (not all zeros) mapped read-only (at hint where the
 * kernel takes it), its path unlinked. */
static char *map_file_at(size_t bytes, void *hint)
{
    char path[] = "/tmp/shardnet-pages.XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    unlink(path);
    char chunk[65536];
    for (size_t i = 0; i < sizeof chunk; i++)
        chunk[i] = (char)(i * 131u + 7u);
    for (size_t done = 0; done < bytes; done += sizeof chunk)
        cr_assert_eq(write(fd, chunk, sizeof chunk), (ssize_t)sizeof chunk);
    char *p = mmap(hint, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    cr_assert_neq(p, MAP_FAILED);
    close(fd);
    return p;
}

static char *map_file(size_t bytes)
{
    return map_file_at(bytes, NULL);
}

/* The kB of the mapping that starts at p mapped into the process. */
static long rss_kb(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    cr_assert_not_null(f);
    char line[512], want[32];
    snprintf(want, sizeof want, "%lx-", (unsigned long)(uintptr_t)p);
    long kb = -1;
    int in = 0;
    while (fgets(line, sizeof line, f)) {
        if (strchr(line, '-') && strchr(line, ' ') &&
            strchr(line, '-') < strchr(line, ' ')) /* a mapping's header */
            in = !strncmp(line, want, strlen(want));
        else if (in && sscanf(line, "Rss: %ld kB", &kb) == 1)
            break;
    }
    fclose(f);
    cr_assert_geq(kb, 0, "no mapping at %p in /proc/self/smaps", p);
    return kb;
}

/* How many of the pages of [p, p + bytes) are mapped into the process
 * (/proc/self/pagemap: bit 63 of a page's entry). */
static size_t mapped_pages(const void *p, size_t bytes)
{
    long page = sysconf(_SC_PAGESIZE);
    int fd = open("/proc/self/pagemap", O_RDONLY);
    cr_assert_geq(fd, 0);
    size_t n = bytes / (size_t)page, got = 0;
    uint64_t *e = malloc(n * sizeof *e); /* one read: the thread goes on */
    cr_assert_not_null(e);
    off_t at = (off_t)((uintptr_t)p / (uintptr_t)page * 8);
    cr_assert_eq(pread(fd, e, n * 8, at), (ssize_t)(n * 8));
    for (size_t i = 0; i < n; i++)
        got += (size_t)(e[i] >> 63);
    free(e);
    close(fd);
    return got;
}

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Skip where the kernel cannot populate a mapping; the probe's pages
 * (and those around) dropped again. */
static void need_populate(char *p, size_t bytes)
{
#ifdef MADV_POPULATE_READ
    if (madvise(p, 4096, MADV_POPULATE_READ) && errno == EINVAL) {
#else
    {
#endif
        munmap(p, bytes);
        cr_skip_test("this kernel has no MADV_POPULATE_READ (5.14 and "
                     "later): the pages are read ahead, not mapped");
    }
    madvise(p, bytes, MADV_DONTNEED);
}

Test(file_pages, mapped_ahead_once_no_plan_is_being_built)
{
    const size_t bytes = 8 * MIB;
    char *p = map_file(bytes);
    cr_assert_eq(rss_kb(p), 0);
    need_populate(p, bytes);
    sn_prefetch_hold();
    sn_prefetch_file_pages(p, bytes);
    sleep_ms(100);
    cr_assert_eq(rss_kb(p), 0, "pages mapped while held");
    sn_prefetch_release();
    sn_wait_file_pages(p, bytes);
    long kb = rss_kb(p);
    cr_assert_eq(kb, (long)(bytes / 1024), "%ld of %zu kB mapped ahead", kb,
                 bytes / 1024);
    sn_forget_file_pages(p, bytes);
    munmap(p, bytes);
}

Test(file_pages, dropped_pages_are_not_mapped_back)
{
    /* queued (held), then the first half dropped, then released: only
     * the second half comes */
    const size_t bytes = 16 * MIB;
    char *p = map_file(bytes);
    sn_prefetch_hold();
    sn_prefetch_file_pages(p, bytes);
    sn_drop_file_pages(p, bytes / 2);
    sn_prefetch_release();
    sn_wait_file_pages(p, bytes); /* the thread idle again */
    long kb = rss_kb(p);
    cr_assert_eq(kb, (long)(bytes / 2048),
                 "%ld kB mapped: the dropped half came back", kb);

    /* dropped while the thread works on it: nothing of it stays */
    sn_drop_file_pages(p, bytes);
    cr_assert_eq(rss_kb(p), 0);
    for (int round = 0; round < 20; round++) {
        sn_prefetch_file_pages(p, bytes);
        sleep_ms(round % 3); /* somewhere along the queue */
        sn_drop_file_pages(p, bytes);
        sleep_ms(20);
        kb = rss_kb(p);
        cr_assert_eq(kb, 0, "round %d: %ld kB mapped after the drop", round,
                     kb);
    }
    sn_forget_file_pages(p, bytes);
    munmap(p, bytes);
}

Test(file_pages, a_mapping_forgotten_before_it_goes_is_not_touched)
{
    /* many queued ranges forgotten and unmapped at once: the thread
     * touches none of them after (a fault there would end the test) */
    for (int round = 0; round < 10; round++) {
        const size_t bytes = 4 * MIB;
        char *p = map_file(bytes);
        for (size_t at = 0; at < bytes; at += 64 * 1024)
            sn_prefetch_file_pages(p + at, 64 * 1024);
        sn_forget_file_pages(p, bytes);
        munmap(p, bytes);
        /* another file mapped at the same addresses: its pages read
         * ahead would count here */
        char *q = map_file_at(bytes, p);
        sleep_ms(20);
        cr_assert_eq(rss_kb(q), 0, "round %d: a forgotten range was read",
                     round);
        munmap(q, bytes);
    }
}

Test(file_pages, a_wait_returns_once_its_range_is_mapped, .timeout = 30)
{
    /* three ranges queued highest first: waiting for each, in any order,
     * returns with all of it mapped */
    const size_t bytes = 24 * MIB, part = bytes / 3;
    char *p = map_file(bytes);
    need_populate(p, bytes);
    long page = sysconf(_SC_PAGESIZE);
    static const int order[] = {1, 0, 2};
    for (int round = 0; round < 3; round++) {
        sn_prefetch_hold();
        for (int k = 2; k >= 0; k--)
            sn_prefetch_file_pages(p + (size_t)k * part, part);
        sn_prefetch_release();
        for (int i = 0; i < 3; i++) {
            char *r = p + (size_t)order[(i + round) % 3] * part;
            sn_wait_file_pages(r, part);
            size_t got = mapped_pages(r, part);
            cr_assert_eq(got, part / (size_t)page,
                         "round %d: %zu of %zu pages mapped after the wait",
                         round, got, part / (size_t)page);
        }
        sn_drop_file_pages(p, bytes);
    }
    sn_forget_file_pages(p, bytes);
    munmap(p, bytes);
}

Test(file_pages, a_wait_never_waits_for_a_held_thread_or_pages_not_queued,
     .timeout = 30)
{
    const size_t bytes = 8 * MIB;
    char *p = map_file(bytes);
    need_populate(p, bytes);
    sn_prefetch_hold();
    sn_prefetch_file_pages(p, bytes / 2);
    sn_wait_file_pages(p, bytes / 2);     /* held: at once */
    sn_wait_file_pages(p + bytes / 2, bytes / 2); /* not queued */
    cr_assert_eq(rss_kb(p), 0, "pages mapped while held");
    sn_prefetch_release();
    sn_wait_file_pages(p + bytes / 2, bytes / 2); /* never queued */
    sn_wait_file_pages(p, bytes / 2);
    cr_assert_eq(mapped_pages(p, bytes / 2),
                 bytes / 2 / (size_t)sysconf(_SC_PAGESIZE));
    sn_forget_file_pages(p, bytes);
    munmap(p, bytes);
}

/* The ranges queued, in the thread's order, checked against want
 * (n pairs of start, bytes). */
static void expect_queue(const char *what, size_t n,
                         const void *const *want_start,
                         const size_t *want_bytes)
{
    const void *start[8];
    size_t bytes[8];
    size_t got = sn_prefetch_queued(start, bytes, 8);
    cr_assert_eq(got, n, "%s: %zu ranges queued, not %zu", what, got, n);
    for (size_t i = 0; i < n; i++)
        cr_assert(start[i] == want_start[i] && bytes[i] == want_bytes[i],
                  "%s: range %zu is %p + %zu MB, not %p + %zu MB", what, i,
                  start[i], bytes[i] / MIB, want_start[i],
                  want_bytes[i] / MIB);
}

Test(file_pages, a_range_far_down_the_queue_goes_first, .timeout = 60)
{
    /* 96 MB queued as one range while the thread is held.  A wait for a
     * MB 32 MB down it (near) leaves the queue as it is; a wait for a MB
     * at 90, more than 64 MB down, returns at once (held) with that MB
     * first and the rest in order.  The order is read from the queue,
     * not raced against the thread. */
    const size_t bytes = 96 * MIB;
    char *p = map_file(bytes);
    need_populate(p, bytes);
    long page = sysconf(_SC_PAGESIZE);
    char *near = p + 32 * MIB, *r = p + 90 * MIB;
    sn_prefetch_hold();
    sn_prefetch_file_pages(p, bytes);
    sn_wait_file_pages(near, MIB);
    expect_queue("near", 1, (const void *[]){p}, (size_t[]){bytes});
    sn_wait_file_pages(r, MIB);
    expect_queue("far", 3, (const void *[]){r, p, r + MIB},
                 (size_t[]){MIB, 90 * MIB, 5 * MIB});
    cr_assert_eq(mapped_pages(p, bytes), 0, "pages mapped while held");
    sn_prefetch_release();
    sn_wait_file_pages(p, bytes);
    cr_assert_eq(mapped_pages(p, bytes), bytes / (size_t)page);
    expect_queue("done", 0, NULL, NULL);
    sn_forget_file_pages(p, bytes);
    munmap(p, bytes);
}

Test(file_pages, ranges_are_mapped_in_the_order_of_their_addresses,
     .timeout = 60)
{
    /* the file's last 20 MB queued, then its first 4, then 4 between:
     * the thread takes them in the file's order (a run reads a model's
     * weights in about that order), read from the queue while held */
    const size_t bytes = 28 * MIB, head = 4 * MIB;
    char *p = map_file(bytes);
    need_populate(p, bytes);
    long page = sysconf(_SC_PAGESIZE);
    sn_prefetch_hold();
    sn_prefetch_file_pages(p + 2 * head, bytes - 2 * head);
    sn_prefetch_file_pages(p, head);
    sn_prefetch_file_pages(p + head, head);
    expect_queue("queued", 3, (const void *[]){p, p + head, p + 2 * head},
                 (size_t[]){head, head, bytes - 2 * head});
    sn_prefetch_release();
    sn_wait_file_pages(p, bytes);
    cr_assert_eq(mapped_pages(p, bytes), bytes / (size_t)page);
    sn_forget_file_pages(p, bytes);
    munmap(p, bytes);
}

/* A run waits for a weight's pages while another device, having copied
 * the weight, drops them (they are cut from the queue): the wait must
 * end even when the cut empties the queue and no chunk is left to end
 * it.  The window is a race (the thread may take the range first), so it
 * is run 500 times (without the wake-up it hangs within the first
 * hundred here); a wait that outlives its range fails the test. */
static char *cut_pages;
static atomic_int cut_round, cut_seen;

static void *waiter(void *arg)
{
    (void)arg;
    for (int seen = 0;;) {
        int r;
        while ((r = atomic_load(&cut_round)) == seen)
            sched_yield();
        if (r < 0)
            return NULL;
        sn_wait_file_pages(cut_pages, MIB);
        atomic_store(&cut_seen, seen = r);
    }
}

Test(file_pages, a_wait_ends_when_its_range_is_cut_from_the_queue,
     .timeout = 120)
{
    pthread_t t;
    cut_pages = map_file(MIB);
    need_populate(cut_pages, MIB);
    cr_assert_eq(pthread_create(&t, NULL, waiter, NULL), 0);
    for (int round = 1; round <= 500; round++) {
        sn_prefetch_hold();
        sn_prefetch_file_pages(cut_pages, MIB);
        atomic_store(&cut_round, round);
        sn_prefetch_release();
        sn_forget_file_pages(cut_pages, MIB);
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (atomic_load(&cut_seen) != round) {
            struct timespec t1;
            clock_gettime(CLOCK_MONOTONIC, &t1);
            cr_assert_lt(t1.tv_sec - t0.tv_sec, 5,
                         "round %d: a wait for a range cut from the queue "
                         "did not end",
                         round);
            nanosleep(&(struct timespec){0, 50000}, NULL);
        }
        madvise(cut_pages, MIB, MADV_DONTNEED);
    }
    atomic_store(&cut_round, -1);
    pthread_join(t, NULL);
    munmap(cut_pages, MIB);
}
