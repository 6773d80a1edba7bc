/*
 * The read-ahead of a mapped model's weights (core/file.c): the thread
 * that maps the pages of weights read in place waits while a plan is
 * built (sn_prefetch_hold), maps them once released, and never maps back
 * pages a device has dropped (sn_drop_file_pages) or whose mapping is
 * about to go (sn_forget_file_pages).  Pages mapped are read from
 * /proc/self/smaps (the mapping's Rss).
 */
#include <config.h>

#include <criterion/criterion.h>
#include <errno.h>
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

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Rss of p's mapping once it reaches kb, or after 5 s, what it is. */
static long rss_reaching(const void *p, long kb)
{
    long got = rss_kb(p);
    for (int i = 0; i < 500 && got < kb; i++) {
        sleep_ms(10);
        got = rss_kb(p);
    }
    return got;
}

Test(file_pages, mapped_ahead_once_no_plan_is_being_built)
{
    const size_t bytes = 8 * MIB;
    char *p = map_file(bytes);
    cr_assert_eq(rss_kb(p), 0);
#ifdef MADV_POPULATE_READ
    if (madvise(p, 4096, MADV_POPULATE_READ) && errno == EINVAL) {
#else
    {
#endif
        munmap(p, bytes);
        cr_skip_test("this kernel has no MADV_POPULATE_READ (5.14 and "
                     "later): the pages are read ahead, not mapped");
    }
    madvise(p, bytes, MADV_DONTNEED); /* the probe's pages, and around */
    sn_prefetch_hold();
    sn_prefetch_file_pages(p, bytes);
    sleep_ms(100);
    cr_assert_eq(rss_kb(p), 0, "pages mapped while held");
    sn_prefetch_release();
    long kb = rss_reaching(p, (long)(bytes / 1024));
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
    long kb = rss_reaching(p, (long)(bytes / 2048));
    sleep_ms(100); /* the thread idle again */
    kb = rss_kb(p);
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
