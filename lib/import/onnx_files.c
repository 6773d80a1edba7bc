/*
 * The files behind an ONNX model: the model file mapped (or read, when the
 * caller asks for a copy), its external-data files mapped the same way
 * once each, and a note of every mapped file so that a later run can see
 * that one was replaced or modified under the model (sn_model_files_check),
 * as its weights are referenced where they lie, not copied.
 *
 * A hostile model steers paths here: a location must be relative and stay
 * inside the model's folder, also once its links are followed, and only
 * regular files are opened (a FIFO would block, a device could do anything).
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "import/onnx_read.h"
#include "import/onnx.h"

/* A location inside the model's folder: relative, no ".." component. */
static int location_ok(const char *loc)
{
    const char *p = loc;
    if (!*loc)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "external data location is empty"), 0;
    if (loc[0] == '/')
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "external data location '%s' is an absolute path",
                        loc), 0;
    while (*p) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "external data location '%s' leaves the model's "
                            "folder ('..')", loc), 0;
        p += n;
        if (*p == '/')
            p++;
    }
    return 1;
}

/* sn_open_regular, its failures said naming the file as `what`. */
static shardnet_status open_regular(const char *path, const char *what,
                                    int flags, int *fd, struct stat *sb)
{
    *fd = sn_open_regular(path, flags, sb);
    if (*fd == SN_NOT_REGULAR) {
        *fd = -1;
        return sn_error(SHARDNET_IO_ERROR,
                        "%s '%s' is not a regular file (a FIFO, device or "
                        "folder cannot hold a model)",
                        what, path);
    }
    if (*fd < 0)
        return sn_error(SHARDNET_IO_ERROR, "%s '%s': %s", what, path,
                        strerror(errno));
    return SHARDNET_OK;
}

/*
 * The len bytes of fd in memory: mapped from the file, or (copy) read into
 * an anonymous mapping of the model's own, so that sn_graph_free() unmaps
 * either alike and nothing done to the file later reaches the model.
 */
static shardnet_status map_fd(int fd, size_t len, int copy, const char *path,
                              void **out)
{
    void *addr;
    size_t got = 0;
    if (!copy) {
        addr = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (addr == MAP_FAILED)
            return sn_error(SHARDNET_IO_ERROR, "%s: cannot map: %s", path,
                            strerror(errno));
        *out = addr;
        return SHARDNET_OK;
    }
    addr = mmap(NULL, len, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (addr == MAP_FAILED)
        return sn_error(SHARDNET_OUT_OF_MEMORY,
                        "%s: no memory to read its %zu bytes into", path, len);
    while (got < len) {
        ssize_t r = read(fd, (char *)addr + got, len - got);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r <= 0) {
            shardnet_status st = sn_error(
                SHARDNET_IO_ERROR, "%s: %s", path,
                r < 0 ? strerror(errno) : "the file shrank while it was read");
            munmap(addr, len);
            return st;
        }
        got += (size_t)r;
    }
    mprotect(addr, len, PROT_READ);
    *out = addr;
    return SHARDNET_OK;
}

/* Remember what a mapped file was (copies need no check). */
static shardnet_status note_file(sn_model_file **files, size_t *n,
                                 const char *real, const struct stat *sb)
{
    sn_model_file *nf, *f;
    if (!files)
        return SHARDNET_OK;
    nf = realloc(*files, (*n + 1) * sizeof *nf);
    if (!nf)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
    *files = nf;
    f = &nf[*n];
    if (!(f->path = strdup(real)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
    f->dev = (unsigned long long)sb->st_dev;
    f->ino = (unsigned long long)sb->st_ino;
    f->size = (long long)sb->st_size;
    f->mtime_s = (long long)sb->st_mtim.tv_sec;
    f->mtime_ns = (long long)sb->st_mtim.tv_nsec;
    (*n)++;
    return SHARDNET_OK;
}

void sn_model_files_free(sn_model_file *files, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(files[i].path);
    free(files);
}

shardnet_status sn_model_files_check(const sn_model_file *files, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const sn_model_file *f = &files[i];
        struct stat sb;
        if (stat(f->path, &sb) < 0)
            return sn_error(SHARDNET_IO_ERROR,
                            "model file '%s' is gone since the model was "
                            "loaded (%s); load it again",
                            f->path, strerror(errno));
        if ((unsigned long long)sb.st_dev != f->dev ||
            (unsigned long long)sb.st_ino != f->ino)
            return sn_error(SHARDNET_IO_ERROR,
                            "model file '%s' was replaced by another file "
                            "since the model was loaded; load it again",
                            f->path);
        if ((long long)sb.st_size != f->size)
            return sn_error(SHARDNET_IO_ERROR,
                            "model file '%s' changed size since the model was "
                            "loaded (%lld bytes, now %lld): its weights are "
                            "mapped, not copied; load it again (or with "
                            "SHARDNET_MODEL_READ)",
                            f->path, f->size, (long long)sb.st_size);
        if ((long long)sb.st_mtim.tv_sec != f->mtime_s ||
            (long long)sb.st_mtim.tv_nsec != f->mtime_ns)
            return sn_error(SHARDNET_IO_ERROR,
                            "model file '%s' was modified since the model was "
                            "loaded: its weights are mapped, not copied; load "
                            "it again (or with SHARDNET_MODEL_READ)",
                            f->path);
    }
    return SHARDNET_OK;
}

/*
 * The external-data file at loc, mapped (or read).  The check on loc's text
 * (location_ok) is not enough: a symbolic link inside the folder may point
 * anywhere, so the real path is resolved and must lie inside the model's
 * real folder.
 */
static shardnet_status map_external(sn_onnx_ctx *c, const char *loc,
                                    sn_onnx_ext_file **out)
{
    struct stat sb;
    char *path = NULL, *real = NULL;
    void *addr = NULL;
    size_t plen, dlen;
    int fd = -1;
    sn_onnx_ext_file *e = NULL;
    shardnet_status st;
    for (size_t i = 0; i < c->next; i++)
        if (strcmp(c->ext[i].location, loc) == 0) {
            *out = &c->ext[i];
            return SHARDNET_OK;
        }
    e = realloc(c->ext, (c->next + 1) * sizeof *e);
    if (!e)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
    c->ext = e;
    plen = strlen(c->base_dir) + strlen(loc) + 2;
    path = malloc(plen);
    if (!path)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
    snprintf(path, plen, "%s/%s", c->base_dir, loc);
    if (!c->real_dir && !(c->real_dir = realpath(c->base_dir, NULL))) {
        st = sn_error(SHARDNET_IO_ERROR, "model folder '%s': %s",
                      c->base_dir, strerror(errno));
        goto out;
    }
    if (!(real = realpath(path, NULL))) {
        st = sn_error(SHARDNET_IO_ERROR, "external data file '%s': %s", path,
                      strerror(errno));
        goto out;
    }
    dlen = strlen(c->real_dir);
    if (strncmp(real, c->real_dir, dlen) != 0 ||
        (real[dlen] != '/' && strcmp(c->real_dir, "/") != 0)) {
        st = sn_error(SHARDNET_INVALID_ARGUMENT,
                      "external data file '%s' is '%s' once its links are "
                      "followed, outside the model's folder '%s'",
                      path, real, c->real_dir);
        goto out;
    }
    /* O_NOFOLLOW: the resolved path must not have become a link since. */
    if ((st = open_regular(real, "external data file", O_NOFOLLOW, &fd,
                           &sb)) != SHARDNET_OK)
        goto out;
    if (sb.st_size > 0) {
        if ((st = map_fd(fd, (size_t)sb.st_size, c->copy, real, &addr)) !=
            SHARDNET_OK)
            goto out;
        /* The model's graph owns it, whichever subgraph asked first. */
        if (sn_graph_add_mapping(c->root ? c->root : c->g, addr,
                                 (size_t)sb.st_size) < 0) {
            munmap(addr, (size_t)sb.st_size);
            st = SHARDNET_OUT_OF_MEMORY;
            goto out;
        }
        if (!c->copy &&
            (st = note_file(c->files, c->nfiles, real, &sb)) != SHARDNET_OK)
            goto out;
    }
    e = &c->ext[c->next];
    e->location = malloc(strlen(loc) + 1);
    if (!e->location) {
        st = sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    strcpy(e->location, loc);
    e->addr = addr;
    e->len = (size_t)sb.st_size;
    c->next++;
    *out = e;
    st = SHARDNET_OK;
out:
    if (fd >= 0)
        close(fd);
    free(real);
    free(path);
    return st;
}

shardnet_status sn_onnx_external_data(sn_onnx_ctx *c, const sn_pb_tensor *t,
                                      const void **data)
{
    char *loc;
    sn_onnx_ext_file *e = NULL;
    uint64_t off, len;
    shardnet_status st = SHARDNET_INVALID_ARGUMENT;
    if (!c->base_dir)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "uses external data, which a model loaded from "
                        "memory cannot have (no folder to look in)");
    /* A copy of its own: c->name may hold the tensor's name. */
    loc = sn_pb_strdup(t->location, t->location_len, SN_MAX_NAME,
                       "external data location");
    if (!loc)
        return SHARDNET_INVALID_ARGUMENT;
    if (!location_ok(loc))
        goto out;
    if ((st = map_external(c, loc, &e)) != SHARDNET_OK)
        goto out;
    st = SHARDNET_INVALID_ARGUMENT;
    off = t->has_offset ? t->offset : 0;
    if (off > e->len) {
        sn_error(st, "external data offset %" PRIu64
                 " is past the end of '%s' (%zu bytes)", off, loc, e->len);
        goto out;
    }
    len = t->has_length ? t->length : e->len - off;
    if (len > e->len - off) {
        sn_error(st, "external data at offset %" PRIu64 ", length %" PRIu64
                 " runs past the end of '%s' (%zu bytes)",
                 off, len, loc, e->len);
        goto out;
    }
    if (len != t->nbytes) {
        sn_error(st, "external data length %" PRIu64
                 " but %" PRIu64 " elements of %s need %zu bytes",
                 len, t->count, sn_dtype_name(t->dtype), t->nbytes);
        goto out;
    }
    *data = len ? e->addr + off : NULL;
    st = SHARDNET_OK;
out:
    free(loc);
    return st;
}

shardnet_status sn_onnx_map_model(const char *path, int copy, void **addr,
                                  size_t *len, sn_model_file **files,
                                  size_t *nfiles)
{
    struct stat sb;
    char *real = NULL;
    shardnet_status st;
    int fd;

    *addr = NULL;
    if ((st = open_regular(path, "model file", 0, &fd, &sb)) != SHARDNET_OK)
        return st;
    if (sb.st_size == 0) {
        close(fd);
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s: empty file", path);
    }
    if (!copy && !(real = realpath(path, NULL))) {
        st = sn_error(SHARDNET_IO_ERROR, "%s: %s", path, strerror(errno));
        close(fd);
        return st;
    }
    st = map_fd(fd, (size_t)sb.st_size, copy, path, addr);
    close(fd);
    if (st == SHARDNET_OK && !copy)
        st = note_file(files, nfiles, real, &sb);
    free(real);
    if (st != SHARDNET_OK) {
        if (*addr)
            munmap(*addr, (size_t)sb.st_size);
        *addr = NULL;
        return st;
    }
    *len = (size_t)sb.st_size;
    return SHARDNET_OK;
}
