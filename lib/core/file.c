/*
 * Opening a file that must be a regular one, and dropping a mapped file's
 * pages (core/file.h).
 */
#include <config.h>

#include <fcntl.h>
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

void sn_prefetch_file_pages(const void *start, size_t bytes)
{
    advise_pages(start, bytes, MADV_WILLNEED);
}
