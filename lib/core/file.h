/*
 * Opening a file that must be a regular one (private).  It is in core
 * because several layers read files a user names or a cache holds: the
 * model and its external data and tensor files (import), plan files (api)
 * and the device profiles (plan).
 */
#ifndef SN_FILE_H
#define SN_FILE_H

#include <stddef.h>
#include <sys/stat.h>

/* What sn_open_regular returns for a path that is no regular file. */
#define SN_NOT_REGULAR (-2)

/*
 * path opened read-only (with flags added, such as O_NOFOLLOW), *sb its
 * status: the descriptor; -1 when open failed (errno says why);
 * SN_NOT_REGULAR, closed again, when it is a FIFO, a device, a folder or
 * cannot be stat'ed.  O_NONBLOCK: opening a FIFO would otherwise wait for
 * a writer forever; no regular file is read before it is refused.
 */
int sn_open_regular(const char *path, int flags, struct stat *sb);

/*
 * Drop the whole pages around [start, start + bytes) from the process
 * (madvise), which must lie in a file mapped read-only (MAP_PRIVATE,
 * never written): reading them again brings them back from the file.
 * For weights a device has copied, so that they count once in memory.
 * What sn_prefetch_file_pages queued of them is cut from its queue first.
 */
void sn_drop_file_pages(const void *start, size_t bytes);
/* Have the pages of [start, start + bytes) of a mapped file read and
 * mapped ahead, in the background (queued to a thread of the library's,
 * range by range, in order): weights a device will read in place, so
 * that its first run does not wait for the disk page by page. */
void sn_prefetch_file_pages(const void *start, size_t bytes);
/* Hold that thread back until as many releases as holds: a plan
 * being built copies weights, whose pages come and go, while the thread
 * would map those read in place (see file.c). */
void sn_prefetch_hold(void);
void sn_prefetch_release(void);
/* [start, start + bytes) is about to be unmapped: cut it from that queue
 * (and wait for the thread if it is reading there). */
void sn_forget_file_pages(const void *start, size_t bytes);
/* Whether that thread has pages queued or in hand (a hint, read without
 * its lock: sn_wait_file_pages is cheap to skip while there are none). */
int sn_file_pages_pending(void);
/* [start, start + bytes) is about to be read: this waits until the
 * thread has mapped what it has queued of it (first, where more than
 * 64 MB is queued before it), so that the pages come from the file as
 * one stream in about the order the run reads them, not from page faults
 * beside the thread's reads.  Returns at once where nothing of it is
 * queued or in hand, or while a plan is being built (sn_prefetch_hold):
 * the pages then fault in as usual. */
void sn_wait_file_pages(const void *start, size_t bytes);
/* The ranges that thread has queued (not the chunk in hand), in the order
 * it takes them: the first max into start[] and bytes[]; how many are
 * queued.  For tests, which check the order while the thread is held
 * instead of racing it. */
size_t sn_prefetch_queued(const void **start, size_t *bytes, size_t max);

#endif /* SN_FILE_H */
