/*
 * Opening a file that must be a regular one (core/file.h).
 */
#include <config.h>

#include <fcntl.h>
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
