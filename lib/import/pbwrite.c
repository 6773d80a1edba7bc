/* Protobuf wire-format writer; see pbwrite.h. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "import/pbwire.h"
#include "import/pbwrite.h"

/* Runs shorter than this are copied rather than referenced: a piece of
 * their own would cost more than the bytes. */
#define REF_MIN 256

void sn_pbw_init(sn_pbw *w)
{
    memset(w, 0, sizeof *w);
}

void sn_pbw_free(sn_pbw *w)
{
    free(w->own);
    free(w->pieces);
    sn_pbw_init(w);
}

/* Room for one more piece; 0 when there is none (the writer is marked). */
static int piece_room(sn_pbw *w)
{
    if (w->npieces < w->cap_pieces)
        return 1;
    size_t cap = w->cap_pieces ? 2 * w->cap_pieces : 16;
    sn_pbw_piece *p = realloc(w->pieces, cap * sizeof *p);
    if (!p) {
        w->failed = 1;
        return 0;
    }
    w->pieces = p;
    w->cap_pieces = cap;
    return 1;
}

void sn_pbw_bytes(sn_pbw *w, const void *p, size_t n)
{
    if (w->failed || !n)
        return;
    if (w->own_len + n > w->own_cap) {
        size_t cap = 2 * (w->own_len + n) + 64;
        uint8_t *o = realloc(w->own, cap);
        if (!o) {
            w->failed = 1;
            return;
        }
        w->own = o;
        w->own_cap = cap;
    }
    /* The last piece grows when it ends where the new bytes go. */
    sn_pbw_piece *last = w->npieces ? &w->pieces[w->npieces - 1] : NULL;
    if (!last || last->ext || last->off + last->len != w->own_len) {
        if (!piece_room(w))
            return;
        last = &w->pieces[w->npieces++];
        *last = (sn_pbw_piece){.ext = NULL, .off = w->own_len, .len = 0};
    }
    memcpy(w->own + w->own_len, p, n);
    w->own_len += n;
    last->len += n;
    w->size += n;
}

void sn_pbw_ref(sn_pbw *w, const void *p, size_t n)
{
    if (n < REF_MIN) {
        sn_pbw_bytes(w, p, n);
        return;
    }
    if (w->failed || !piece_room(w))
        return;
    w->pieces[w->npieces++] = (sn_pbw_piece){.ext = p, .off = 0, .len = n};
    w->size += n;
}

void sn_pbw_append(sn_pbw *w, const sn_pbw *sub)
{
    if (sub->failed) {
        w->failed = 1;
        return;
    }
    for (size_t i = 0; i < sub->npieces; i++) {
        const sn_pbw_piece *p = &sub->pieces[i];
        if (p->ext)
            sn_pbw_ref(w, p->ext, p->len);
        else
            sn_pbw_bytes(w, sub->own + p->off, p->len);
    }
}

void sn_pbw_varint(sn_pbw *w, uint64_t v)
{
    uint8_t b[10];
    size_t n = 0;
    do {
        b[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            b[n] |= 0x80;
        n++;
    } while (v);
    sn_pbw_bytes(w, b, n);
}

void sn_pbw_tag(sn_pbw *w, uint32_t num, unsigned wire)
{
    sn_pbw_varint(w, (uint64_t)num << 3 | wire);
}

void sn_pbw_int(sn_pbw *w, uint32_t num, int64_t v)
{
    sn_pbw_tag(w, num, SN_PB_VARINT);
    sn_pbw_varint(w, (uint64_t)v);
}

void sn_pbw_float(sn_pbw *w, uint32_t num, float v)
{
    uint32_t bits;
    uint8_t b[4];
    memcpy(&bits, &v, sizeof bits);
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(bits >> (8 * i)); /* little-endian on the wire */
    sn_pbw_tag(w, num, SN_PB_I32);
    sn_pbw_bytes(w, b, sizeof b);
}

void sn_pbw_string(sn_pbw *w, uint32_t num, const char *s)
{
    sn_pbw_len(w, num, s, strlen(s));
}

void sn_pbw_len(sn_pbw *w, uint32_t num, const void *p, size_t n)
{
    sn_pbw_tag(w, num, SN_PB_LEN);
    sn_pbw_varint(w, n);
    sn_pbw_bytes(w, p, n);
}

void sn_pbw_len_ref(sn_pbw *w, uint32_t num, const void *p, size_t n)
{
    sn_pbw_tag(w, num, SN_PB_LEN);
    sn_pbw_varint(w, n);
    sn_pbw_ref(w, p, n);
}

void sn_pbw_message(sn_pbw *w, uint32_t num, const sn_pbw *sub)
{
    sn_pbw_tag(w, num, SN_PB_LEN);
    sn_pbw_varint(w, sub->size);
    sn_pbw_append(w, sub);
}

shardnet_status sn_pbw_check(const sn_pbw *w, const char *what)
{
    return w->failed ? sn_error(SHARDNET_OUT_OF_MEMORY,
                                "%s: out of memory while writing it", what)
                     : SHARDNET_OK;
}

/* All n bytes at p to fd; 0, or an errno. */
static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k < 0 ? errno : EIO;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The message's pieces to fd, then to the disk; 0, or an errno. */
static int write_pieces(const sn_pbw *w, int fd)
{
    for (size_t i = 0; i < w->npieces; i++) {
        const sn_pbw_piece *p = &w->pieces[i];
        int err = write_all(fd, p->ext ? p->ext : w->own + p->off, p->len);
        if (err)
            return err;
    }
    return fsync(fd) ? errno : 0;
}

shardnet_status sn_pbw_write_file(const sn_pbw *w, const char *path)
{
    static unsigned serial;
    unsigned k = __atomic_fetch_add(&serial, 1, __ATOMIC_RELAXED);
    size_t plen = strlen(path) + 48;
    char *tmp;
    int fd, err;

    if (w->failed)
        return sn_pbw_check(w, path);
    if (!(tmp = malloc(plen)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s: out of memory", path);
    snprintf(tmp, plen, "%s.%ld.%u.tmp", path, (long)getpid(), k);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        err = errno;
        free(tmp);
        return sn_error(SHARDNET_IO_ERROR, "%s: cannot create it: %s", path,
                        strerror(err));
    }
    err = write_pieces(w, fd);
    if (close(fd) && !err)
        err = errno;
    if (!err && rename(tmp, path))
        err = errno;
    if (err)
        unlink(tmp);
    free(tmp);
    if (err)
        return sn_error(SHARDNET_IO_ERROR,
                        "%s: write failed: %s (nothing written)", path,
                        strerror(err));
    return SHARDNET_OK;
}
