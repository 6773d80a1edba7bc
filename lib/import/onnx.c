/*
 * ONNX import: a ModelProto file becomes an sn_graph.
 *
 * Why our own protobuf reader (lib/import/pbwire.c) and not protobuf-c or the
 * generated C++ code: weights must not be copied more than once on the
 * host.  The model file is mapped read-only and the raw_data of each
 * initializer is referenced where it lies in the mapping (sn_value.data
 * points into it, owned = NULL); external-data files are mapped the same
 * way.  protobuf-c unpacks a message by copying every bytes field into an
 * allocation of its own, so a 2 GB model would cost 2 GB more memory and a
 * full copy before the first kernel runs.  The wire format is small (four
 * wire types), and reading only the fields we use, checking each length
 * against what remains, keeps a hostile file from steering an allocation.
 * Only values that need converting are copied (typed repeated fields,
 * Constant attributes given as value_float & co.).
 *
 * Order of work in a graph: initializers, then inputs (those that are also
 * initializers are constants, as IR < 4 models list them in both), nodes
 * (values named by nodes are created on first sight, so the file's node
 * order does not matter), outputs, and last the value_info type hints.
 * Names that nothing defines are caught by sn_graph_sort(), not here.
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
#include "ir/graph.h"
#include "import/pbwire.h"

/* Opsets 1 to 6 load too: the lowerings (lib/ops*.c) read the old operator
 * versions' forms (broadcast and axis of the arithmetic and of Gemm, Cast's
 * type names, Reshape's shape and Split's split attributes, Concat's default
 * axis); consumed_inputs, and the is_test of Dropout and BatchNormalization
 * (inference either way), are ignored. */
#define OPSET_MIN 1
#define OPSET_MAX 18

/* ModelProto */
enum { MP_IR_VERSION = 1, MP_PRODUCER = 2, MP_GRAPH = 7, MP_OPSET = 8 };
/* GraphProto */
enum {
    GP_NODE = 1,
    GP_NAME = 2,
    GP_INITIALIZER = 5,
    GP_INPUT = 11,
    GP_OUTPUT = 12,
    GP_VALUE_INFO = 13,
    GP_SPARSE_INITIALIZER = 15
};
/* NodeProto */
enum {
    NP_INPUT = 1,
    NP_OUTPUT = 2,
    NP_NAME = 3,
    NP_OP_TYPE = 4,
    NP_ATTRIBUTE = 5,
    NP_DOMAIN = 7
};
/* AttributeProto */
enum {
    AP_NAME = 1,
    AP_F = 2,
    AP_I = 3,
    AP_S = 4,
    AP_T = 5,
    AP_G = 6,
    AP_FLOATS = 7,
    AP_INTS = 8,
    AP_STRINGS = 9,
    AP_TENSORS = 10,
    AP_GRAPHS = 11,
    AP_TP = 14,
    AP_TYPE_PROTOS = 15,
    AP_TYPE = 20,
    AP_SPARSE_TENSOR = 22,
    AP_SPARSE_TENSORS = 23
};

/* An external-data file, mapped once however many tensors it holds. */
typedef struct ext_file {
    char *location;
    const uint8_t *addr;
    size_t len;
} ext_file;

typedef struct ctx {
    sn_graph *g;
    const char *base_dir; /* NULL: external data refused */
    char *real_dir;       /* base_dir with its links resolved */
    int copy;             /* read files into memory instead of mapping */
    sn_model_file **files; /* files mapped, for later checks (or NULL) */
    size_t *nfiles;
    ext_file *ext;
    size_t next;
    uint64_t anon;        /* suffix for generated value names */
    char name[SN_MAX_NAME + 1];
} ctx;

/* A label for messages: 'name' cut to a printable excerpt. */
static const char *shown(char *buf, size_t cap, const uint8_t *s, size_t n)
{
    return sn_pb_printable(buf, cap, s, n);
}

/* A name from the file, NUL-terminated in c->name (valid until the next
 * call); NULL with error set when too long or holding a NUL byte. */
static const char *name_in(ctx *c, const uint8_t *s, size_t n,
                           const char *what)
{
    if (n > SN_MAX_NAME) {
        sn_error(SHARDNET_INVALID_ARGUMENT, "%s is %zu bytes long (limit %d)",
                 what, n, SN_MAX_NAME);
        return NULL;
    }
    if (n && memchr(s, 0, n)) {
        sn_error(SHARDNET_INVALID_ARGUMENT, "%s contains a NUL byte", what);
        return NULL;
    }
    if (n)
        memcpy(c->name, s, n);
    c->name[n] = '\0';
    return c->name;
}

/* The value named name, created when new; -1 with error set. */
static int value_of(ctx *c, const char *name)
{
    int v = sn_graph_find(c->g, name);
    return v >= 0 ? v : sn_graph_add_value(c->g, name);
}

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

/*
 * Open a file that must be a regular one.  O_NONBLOCK: opening a FIFO would
 * otherwise wait for a writer forever (a device could do anything); what
 * is not a regular file is refused before anything is read.
 */
static shardnet_status open_regular(const char *path, const char *what,
                                    int flags, int *fd, struct stat *sb)
{
    *fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | flags);
    if (*fd < 0)
        return sn_error(SHARDNET_IO_ERROR, "%s '%s': %s", what, path,
                        strerror(errno));
    if (fstat(*fd, sb) < 0 || !S_ISREG(sb->st_mode)) {
        close(*fd);
        *fd = -1;
        return sn_error(SHARDNET_IO_ERROR,
                        "%s '%s' is not a regular file (a FIFO, device or "
                        "folder cannot hold a model)",
                        what, path);
    }
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
static shardnet_status map_external(ctx *c, const char *loc, ext_file **out)
{
    struct stat sb;
    char *path = NULL, *real = NULL;
    void *addr = NULL;
    size_t plen, dlen;
    int fd = -1;
    ext_file *e = NULL;
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
        if (sn_graph_add_mapping(c->g, addr, (size_t)sb.st_size) < 0) {
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

static shardnet_status external_data(ctx *c, const sn_pb_tensor *t,
                                     const void **data)
{
    char *loc;
    ext_file *e = NULL;
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

/* A constant value named `name` holding tensor t; its index, or -1. */
static int tensor_value(ctx *c, const sn_pb_tensor *t, const char *name)
{
    sn_value *v;
    const void *data = NULL;
    void *owned = NULL;
    int vi;
    if (t->external) {
        shardnet_status st = external_data(c, t, &data);
        if (st != SHARDNET_OK) {
            sn_error_prefix(st, "tensor '%s'", name);
            return -1;
        }
    } else if (t->has_raw) {
        data = t->nbytes ? t->raw : NULL; /* in place, never copied */
    } else if (t->typed_field && t->nbytes) {
        owned = malloc(t->nbytes);
        if (!owned) {
            sn_error(SHARDNET_OUT_OF_MEMORY,
                     "tensor '%s': out of memory for %zu bytes", name,
                     t->nbytes);
            return -1;
        }
        sn_pb_tensor_decode_typed(t, owned);
        data = owned;
    }
    vi = sn_graph_add_value(c->g, name);
    if (vi < 0) {
        free(owned);
        return -1;
    }
    v = &c->g->values[vi];
    v->dtype = t->dtype;
    v->rank = t->rank;
    for (int d = 0; d < t->rank; d++)
        v->dims[d] = t->dims[d];
    v->data = data;
    v->nbytes = t->nbytes;
    v->owned = owned;
    v->flags |= SN_VALUE_CONST;
    return vi;
}

/* A value name no one has taken, starting from "<a>:<b>".  The parts are
 * cut short enough that the numbered suffix always fits, so the loop ends. */
static const char *fresh_name(ctx *c, const char *a, const char *b)
{
    snprintf(c->name, sizeof c->name, "%.1500s:%.1500s", a, b);
    while (sn_graph_find(c->g, c->name) >= 0)
        snprintf(c->name, sizeof c->name, "%.1500s:%.1500s#%" PRIu64, a, b,
                 c->anon++);
    return c->name;
}

/*
 * TypeProto -> dtype and shape of value vi.  Only tensor types carry what
 * we use; sequences, maps and the like leave the value unknown.
 */
static shardnet_status apply_type(ctx *c, int vi, const uint8_t *p, size_t n)
{
    sn_pb r, rt, rs, rd;
    sn_pb_field f, ft, fs, fd;
    const uint8_t *tensor = NULL, *shape = NULL;
    size_t tlen = 0, slen = 0, rank = 0;
    int64_t dims[SHARDNET_MAX_DIMS];
    char *params[SHARDNET_MAX_DIMS] = {0};
    uint64_t elem = 0;
    int rc, have_shape = 0;
    sn_value *v;

    sn_pb_init(&r, p, n);
    while ((rc = sn_pb_next(&r, &f)) > 0)
        if (f.num == 1) {
            if (sn_pb_expect(&f, SN_PB_LEN, "tensor_type") < 0)
                return SHARDNET_INVALID_ARGUMENT;
            tensor = f.data;
            tlen = f.len;
        }
    if (rc < 0)
        return SHARDNET_INVALID_ARGUMENT;
    if (!tensor)
        return SHARDNET_OK;
    sn_pb_init(&rt, tensor, tlen);
    while ((rc = sn_pb_next(&rt, &ft)) > 0) {
        if (ft.num == 1) {
            if (sn_pb_expect(&ft, SN_PB_VARINT, "elem_type") < 0)
                return SHARDNET_INVALID_ARGUMENT;
            elem = ft.u;
        } else if (ft.num == 2) {
            if (sn_pb_expect(&ft, SN_PB_LEN, "shape") < 0)
                return SHARDNET_INVALID_ARGUMENT;
            shape = ft.data;
            slen = ft.len;
            have_shape = 1;
        }
    }
    if (rc < 0)
        return SHARDNET_INVALID_ARGUMENT;

    if (have_shape) {
        sn_pb_init(&rs, shape, slen);
        while ((rc = sn_pb_next(&rs, &fs)) > 0) {
            int64_t dv = -1;
            const uint8_t *dp = NULL;
            size_t dplen = 0;
            if (fs.num != 1)
                continue;
            if (sn_pb_expect(&fs, SN_PB_LEN, "dim") < 0)
                goto fail;
            if (rank == SHARDNET_MAX_DIMS) {
                sn_error(SHARDNET_INVALID_ARGUMENT,
                         "shape has more than %d dimensions", SHARDNET_MAX_DIMS);
                goto fail;
            }
            sn_pb_init(&rd, fs.data, fs.len);
            while ((rc = sn_pb_next(&rd, &fd)) > 0) {
                if (fd.num == 1) {
                    if (sn_pb_expect(&fd, SN_PB_VARINT, "dim_value") < 0)
                        goto fail;
                    dv = (int64_t)fd.u;
                    dp = NULL;
                    if (dv < 0 || dv > SN_MAX_ELEMENTS) {
                        sn_error(SHARDNET_INVALID_ARGUMENT,
                                 "dimension %zu is %" PRId64
                                 " (must be 0 to 2^34)", rank, dv);
                        goto fail;
                    }
                } else if (fd.num == 2) {
                    if (sn_pb_expect(&fd, SN_PB_LEN, "dim_param") < 0)
                        goto fail;
                    dp = fd.data;
                    dplen = fd.len;
                    dv = -1;
                }
            }
            if (rc < 0)
                goto fail;
            dims[rank] = dv;
            if (dp) {
                params[rank] = sn_pb_strdup(dp, dplen, SN_MAX_NAME,
                                            "dim_param");
                if (!params[rank])
                    goto fail;
            }
            rank++;
        }
        if (rc < 0)
            goto fail;
    }

    v = &c->g->values[vi];
    if (elem >= 1 && elem <= SN_DT_BFLOAT16)
        v->dtype = (sn_dtype)elem;
    if (have_shape) {
        for (int d = 0; d < SHARDNET_MAX_DIMS; d++) {
            free(v->dim_param[d]);
            v->dim_param[d] = params[d];
            v->dims[d] = (size_t)d < rank ? dims[d] : -1;
        }
        v->rank = (int)rank;
    }
    return SHARDNET_OK;
fail:
    for (int d = 0; d < SHARDNET_MAX_DIMS; d++)
        free(params[d]);
    return SHARDNET_INVALID_ARGUMENT;
}

/* ValueInfoProto: its name (field 1) and type (field 2). */
static int value_info(const uint8_t *p, size_t n, const uint8_t **name,
                      size_t *nlen, const uint8_t **type, size_t *tlen)
{
    sn_pb r;
    sn_pb_field f;
    int rc;
    *name = *type = NULL;
    *nlen = *tlen = 0;
    sn_pb_init(&r, p, n);
    while ((rc = sn_pb_next(&r, &f)) > 0) {
        if (f.num == 1) {
            if (sn_pb_expect(&f, SN_PB_LEN, "name") < 0)
                return -1;
            *name = f.data;
            *nlen = f.len;
        } else if (f.num == 2) {
            if (sn_pb_expect(&f, SN_PB_LEN, "type") < 0)
                return -1;
            *type = f.data;
            *tlen = f.len;
        }
    }
    return rc;
}

/* A graph's ValueInfoProto field f, the k-th of its kind ("graph input",
 * ...): its name (in the ctx's scratch; what: how the name is called in
 * errors) and its type; NULL with the error set. */
static const char *value_name(ctx *c, const sn_pb_field *f, const char *kind,
                              const char *what, size_t k, const uint8_t **vt,
                              size_t *vt_len)
{
    const uint8_t *vn;
    size_t vn_len;
    const char *name;
    if (value_info(f->data, f->len, &vn, &vn_len, vt, vt_len) < 0 ||
        !(name = name_in(c, vn, vn_len, what))) {
        sn_error_prefix(SHARDNET_INVALID_ARGUMENT, "%s %zu", kind, k);
        return NULL;
    }
    return name;
}

/* AttributeProto: a first pass checks the fields and counts the repeated
 * values, so that their arrays are allocated once, at their size. */
static shardnet_status parse_attr(ctx *c, int ni, const uint8_t *p, size_t n)
{
    sn_pb r;
    sn_pb_field f;
    sn_pb_rep it;
    sn_attr *a;
    const uint8_t *name = NULL, *s = NULL, *t = NULL;
    size_t name_len = 0, s_len = 0, t_len = 0;
    size_t nfloats = 0, nints = 0, nstrings = 0, k;
    int has_f = 0, has_i = 0, has_s = 0, has_t = 0, has_g = 0, has_type = 0;
    int has_tensors = 0, has_graphs = 0, has_sparse = 0, has_sparses = 0;
    int has_tp = 0, has_tps = 0, rc;
    uint64_t type = 0, v;
    float fval = 0;
    int64_t ival = 0;
    const char *aname;
    sn_attr_type at;

    sn_pb_init(&r, p, n);
    while ((rc = sn_pb_next(&r, &f)) > 0) {
        switch (f.num) {
        case AP_NAME:
            if (sn_pb_expect(&f, SN_PB_LEN, "name") < 0)
                return SHARDNET_INVALID_ARGUMENT;
            name = f.data;
            name_len = f.len;
            break;
        case AP_F:
            if (sn_pb_expect(&f, SN_PB_I32, "f") < 0)
                return SHARDNET_INVALID_ARGUMENT;
            {
                uint32_t bits = (uint32_t)f.u;
                memcpy(&fval, &bits, sizeof fval);
            }
            has_f = 1;
            break;
        case AP_I:
            if (sn_pb_expect(&f, SN_PB_VARINT, "i") < 0)
                return SHARDNET_INVALID_ARGUMENT;
            ival = (int64_t)f.u;
            has_i = 1;
            break;
        case AP_S:
            if (sn_pb_expect(&f, SN_PB_LEN, "s") < 0)
                return SHARDNET_INVALID_ARGUMENT;
            s = f.data;
            s_len = f.len;
            has_s = 1;
            break;
        case AP_T:
            if (sn_pb_expect(&f, SN_PB_LEN, "t") < 0)
                return SHARDNET_INVALID_ARGUMENT;
            t = f.data;
            t_len = f.len;
            has_t = 1;
            break;
        case AP_G:
            has_g = 1;
            break;
        case AP_FLOATS:
        case AP_INTS:
            if (sn_pb_rep_count(&f, f.num == AP_FLOATS ? SN_PB_I32
                                                       : SN_PB_VARINT, &k) < 0)
                return SHARDNET_INVALID_ARGUMENT;
            *(f.num == AP_FLOATS ? &nfloats : &nints) += k;
            break;
        case AP_STRINGS:
            if (sn_pb_expect(&f, SN_PB_LEN, "strings") < 0)
                return SHARDNET_INVALID_ARGUMENT;
            nstrings++;
            break;
        case AP_TENSORS: has_tensors = 1; break;
        case AP_GRAPHS: has_graphs = 1; break;
        case AP_SPARSE_TENSOR: has_sparse = 1; break;
        case AP_SPARSE_TENSORS: has_sparses = 1; break;
        case AP_TP: has_tp = 1; break;
        case AP_TYPE_PROTOS: has_tps = 1; break;
        case AP_TYPE:
            if (sn_pb_expect(&f, SN_PB_VARINT, "type") < 0)
                return SHARDNET_INVALID_ARGUMENT;
            type = f.u;
            has_type = 1;
            break;
        default:
            break;
        }
    }
    if (rc < 0)
        return SHARDNET_INVALID_ARGUMENT;
    if (!name || !name_len)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "attribute has no name");
    if (has_type) {
        if (type > SN_ATTR_TYPE_PROTOS)
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "unknown attribute type %" PRIu64, type);
        at = (sn_attr_type)type;
    } else {
        /* IR version 1 files name no type: take it from the field set. */
        at = has_f ? SN_ATTR_FLOAT : has_i ? SN_ATTR_INT
           : has_s ? SN_ATTR_STRING : has_t ? SN_ATTR_TENSOR
           : has_g ? SN_ATTR_GRAPH : nfloats ? SN_ATTR_FLOATS
           : nints ? SN_ATTR_INTS : nstrings ? SN_ATTR_STRINGS
           : has_tensors ? SN_ATTR_TENSORS : has_graphs ? SN_ATTR_GRAPHS
           : has_sparse ? SN_ATTR_SPARSE_TENSOR
           : has_sparses ? SN_ATTR_SPARSE_TENSORS
           : has_tp ? SN_ATTR_TYPE_PROTO : has_tps ? SN_ATTR_TYPE_PROTOS
           : SN_ATTR_UNDEFINED;
    }
    if (at == SN_ATTR_TENSOR && !has_t)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "attribute of type TENSOR has no tensor");

    aname = name_in(c, name, name_len, "attribute name");
    if (!aname)
        return SHARDNET_INVALID_ARGUMENT;
    {
        /* parse_node sized the array for all of the node's attributes. */
        sn_node *nd = &c->g->nodes[ni];
        char *copy = malloc(strlen(aname) + 1);
        if (!copy)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
        strcpy(copy, aname);
        a = &nd->attrs[nd->nattrs++];
        memset(a, 0, sizeof *a);
        a->name = copy;
        a->type = at;
        a->tensor = -1;
    }
    a->i = ival;
    a->f = fval;
    switch (at) {
    case SN_ATTR_STRING:
        a->s = malloc(s_len + 1);
        if (!a->s)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
        if (s_len)
            memcpy(a->s, s, s_len);
        a->s[s_len] = '\0';
        break;
    case SN_ATTR_FLOATS:
    case SN_ATTR_INTS:
    case SN_ATTR_STRINGS: {
        size_t cnt = at == SN_ATTR_FLOATS ? nfloats
                   : at == SN_ATTR_INTS ? nints : nstrings;
        uint32_t want = at == SN_ATTR_FLOATS ? AP_FLOATS
                      : at == SN_ATTR_INTS ? AP_INTS : AP_STRINGS;
        k = 0;
        if (!cnt)
            break;
        if (at == SN_ATTR_FLOATS)
            a->floats = malloc(cnt * sizeof *a->floats);
        else if (at == SN_ATTR_INTS)
            a->ints = malloc(cnt * sizeof *a->ints);
        else
            a->strings = calloc(cnt, sizeof *a->strings);
        if (!a->floats && !a->ints && !a->strings)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
        sn_pb_init(&r, p, n);
        while (sn_pb_next(&r, &f) > 0 && k < cnt) {
            if (f.num != want)
                continue;
            if (at == SN_ATTR_STRINGS) {
                a->strings[k] = malloc(f.len + 1);
                if (!a->strings[k])
                    return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
                if (f.len)
                    memcpy(a->strings[k], f.data, f.len);
                a->strings[k][f.len] = '\0';
                a->count = ++k;
                continue;
            }
            if (sn_pb_rep_begin(&it, &f, at == SN_ATTR_FLOATS ? SN_PB_I32
                                                              : SN_PB_VARINT))
                return SHARDNET_INVALID_ARGUMENT;
            while (k < cnt && sn_pb_rep_next(&it, &v) > 0) {
                if (at == SN_ATTR_FLOATS) {
                    uint32_t bits = (uint32_t)v;
                    memcpy(&a->floats[k], &bits, sizeof bits);
                } else {
                    a->ints[k] = (int64_t)v;
                }
                a->count = ++k;
            }
        }
        break;
    }
    case SN_ATTR_TENSOR: {
        sn_pb_tensor tp;
        char node[SN_MAX_NAME + 1], attr[SN_MAX_NAME + 1];
        int vi;
        shardnet_status st = sn_pb_tensor_parse(t, t_len, &tp);
        if (st != SHARDNET_OK)
            return st;
        /* c->name is reused below; keep both parts apart. */
        snprintf(node, sizeof node, "%s", c->g->nodes[ni].name);
        snprintf(attr, sizeof attr, "%s", a->name);
        vi = tensor_value(c, &tp, fresh_name(c, node, attr));
        if (vi < 0)
            return SHARDNET_INVALID_ARGUMENT;
        a->tensor = vi; /* a stays put: only the values array grew */
        break;
    }
    default:
        break;
    }
    return SHARDNET_OK;
}

/* The Constant forms given as plain numbers become a tensor too. */
static shardnet_status constant_value(ctx *c, int ni)
{
    static const char *const forms[] = {
        "value", "value_float", "value_floats", "value_int", "value_ints",
        "value_string", "value_strings", "sparse_value"};
    const sn_attr *found = NULL;
    sn_node *n = &c->g->nodes[ni];
    size_t nfound = 0, count = 1, esize;
    int vi, rank;
    sn_dtype dt;
    sn_value *v;
    sn_attr *a;
    void *buf;
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        const sn_attr *x = sn_node_attr(n, forms[i]);
        if (x) {
            found = x;
            nfound++;
        }
    }
    if (nfound != 1)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "Constant needs exactly one value attribute, has %zu",
                        nfound);
    if (!strcmp(found->name, "value")) {
        if (found->type != SN_ATTR_TENSOR)
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "attribute 'value' is not a tensor");
        return SHARDNET_OK;
    }
    if (!strcmp(found->name, "value_float") && found->type == SN_ATTR_FLOAT) {
        dt = SN_DT_FLOAT, rank = 0;
    } else if (!strcmp(found->name, "value_floats") &&
               found->type == SN_ATTR_FLOATS) {
        dt = SN_DT_FLOAT, rank = 1, count = found->count;
    } else if (!strcmp(found->name, "value_int") &&
               found->type == SN_ATTR_INT) {
        dt = SN_DT_INT64, rank = 0;
    } else if (!strcmp(found->name, "value_ints") &&
               found->type == SN_ATTR_INTS) {
        dt = SN_DT_INT64, rank = 1, count = found->count;
    } else if (!strncmp(found->name, "value_", 6) &&
               (found->type == SN_ATTR_FLOAT || found->type == SN_ATTR_INT ||
                found->type == SN_ATTR_FLOATS ||
                found->type == SN_ATTR_INTS)) {
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "attribute '%s' has the wrong type", found->name);
    } else {
        return sn_error(SHARDNET_UNSUPPORTED,
                        "attribute '%s' is not supported", found->name);
    }
    esize = sn_dtype_size(dt);
    buf = malloc(count ? count * esize : 1);
    if (!buf)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
    if (found->type == SN_ATTR_FLOAT)
        memcpy(buf, &found->f, 4);
    else if (found->type == SN_ATTR_INT)
        memcpy(buf, &found->i, 8);
    else if (found->type == SN_ATTR_FLOATS && count)
        memcpy(buf, found->floats, count * 4);
    else if (found->type == SN_ATTR_INTS && count)
        memcpy(buf, found->ints, count * 8);
    vi = sn_graph_add_value(c->g, fresh_name(c, n->name, "value"));
    if (vi < 0) {
        free(buf);
        return SHARDNET_OUT_OF_MEMORY;
    }
    v = &c->g->values[vi];
    v->dtype = dt;
    v->rank = rank;
    if (rank)
        v->dims[0] = (int64_t)count;
    v->owned = buf;
    v->data = buf;
    v->nbytes = count * esize;
    v->flags |= SN_VALUE_CONST;
    a = sn_node_add_attr(n, "value", SN_ATTR_TENSOR);
    if (!a)
        return SHARDNET_OUT_OF_MEMORY;
    a->tensor = vi;
    return SHARDNET_OK;
}

static int cmp_attr_name(const void *a, const void *b)
{
    return strcmp((*(const sn_attr *const *)a)->name,
                  (*(const sn_attr *const *)b)->name);
}

/* Attribute names are unique: sorted, so that a node with thousands of
 * attributes costs n log n, not n^2. */
static shardnet_status unique_attrs(const sn_node *n)
{
    const sn_attr **by;
    shardnet_status st = SHARDNET_OK;
    if (n->nattrs < 2)
        return SHARDNET_OK;
    by = malloc(n->nattrs * sizeof *by);
    if (!by)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < n->nattrs; i++)
        by[i] = &n->attrs[i];
    qsort(by, n->nattrs, sizeof *by, cmp_attr_name);
    for (size_t i = 1; i < n->nattrs && st == SHARDNET_OK; i++)
        if (!strcmp(by[i - 1]->name, by[i]->name))
            st = sn_error(SHARDNET_INVALID_ARGUMENT,
                          "attribute '%s' given twice", by[i]->name);
    free(by);
    return st;
}

static shardnet_status parse_node(ctx *c, const uint8_t *p, size_t n,
                                  size_t index)
{
    sn_pb r;
    sn_pb_field f;
    const uint8_t *nm = NULL, *op = NULL, *dom = NULL;
    size_t nm_len = 0, op_len = 0, dom_len = 0, nin = 0, nout = 0, k;
    size_t nattrs = 0;
    int *ins = NULL, *outs = NULL, rc, ni = -1;
    char *name = NULL, *op_type = NULL, *domain = NULL;
    char label[SN_MAX_NAME < 300 ? SN_MAX_NAME : 300], b1[160], b2[100];
    shardnet_status st = SHARDNET_INVALID_ARGUMENT;

    /* Named for messages before anything can fail. */
    if (sn_pb_peek_len(p, n, NP_NAME, &nm, &nm_len) && nm_len)
        snprintf(label, sizeof label, "node '%s'",
                 shown(b1, sizeof b1, nm, nm_len));
    else
        snprintf(label, sizeof label, "node #%zu", index);
    if (sn_pb_peek_len(p, n, NP_OP_TYPE, &op, &op_len))
        snprintf(label + strlen(label), sizeof label - strlen(label), " (%s)",
                 shown(b2, sizeof b2, op, op_len));
    nm = op = NULL;
    nm_len = op_len = 0;

    sn_pb_init(&r, p, n);
    while ((rc = sn_pb_next(&r, &f)) > 0) {
        switch (f.num) {
        case NP_INPUT:
        case NP_OUTPUT:
        case NP_ATTRIBUTE:
            if (sn_pb_expect(&f, SN_PB_LEN, f.num == NP_INPUT ? "input"
                             : f.num == NP_OUTPUT ? "output" : "attribute") < 0)
                goto fail;
            nin += f.num == NP_INPUT;
            nout += f.num == NP_OUTPUT;
            nattrs += f.num == NP_ATTRIBUTE;
            break;
        case NP_NAME:
        case NP_OP_TYPE:
        case NP_DOMAIN:
            if (sn_pb_expect(&f, SN_PB_LEN, f.num == NP_NAME ? "name"
                             : f.num == NP_OP_TYPE ? "op_type" : "domain") < 0)
                goto fail;
            if (f.num == NP_NAME)
                nm = f.data, nm_len = f.len;
            else if (f.num == NP_OP_TYPE)
                op = f.data, op_len = f.len;
            else
                dom = f.data, dom_len = f.len;
            break;
        default:
            break;
        }
    }
    if (rc < 0)
        goto fail;
    if (!op || !op_len) {
        sn_error(SHARDNET_INVALID_ARGUMENT, "has no op_type");
        goto fail;
    }
    if (!(op_type = sn_pb_strdup(op, op_len, SN_MAX_NAME, "op_type")) ||
        !(name = sn_pb_strdup(nm ? nm : op, nm ? nm_len : 0, SN_MAX_NAME,
                              "name")) ||
        !(domain = sn_pb_strdup(dom ? dom : op, dom ? dom_len : 0,
                                SN_MAX_NAME, "domain")))
        goto fail;

    ins = malloc((nin ? nin : 1) * sizeof *ins);
    outs = malloc((nout ? nout : 1) * sizeof *outs);
    if (!ins || !outs) {
        st = sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
        goto fail;
    }
    nin = nout = 0;
    sn_pb_init(&r, p, n);
    while (sn_pb_next(&r, &f) > 0) {
        const char *vn;
        int vi;
        if (f.num != NP_INPUT && f.num != NP_OUTPUT)
            continue;
        if (!f.len) { /* an omitted optional input or output */
            if (f.num == NP_INPUT)
                ins[nin++] = -1;
            else
                outs[nout++] = -1;
            continue;
        }
        k = f.num == NP_INPUT ? nin : nout;
        vn = name_in(c, f.data, f.len, f.num == NP_INPUT ? "input name"
                                                         : "output name");
        if (!vn || (vi = value_of(c, vn)) < 0) {
            sn_error_prefix(SHARDNET_INVALID_ARGUMENT, "%s %zu",
                            f.num == NP_INPUT ? "input" : "output", k);
            goto fail;
        }
        if (f.num == NP_INPUT)
            ins[nin++] = vi;
        else
            outs[nout++] = vi;
    }
    ni = sn_graph_add_node(c->g, name, op_type, domain, ins, nin, outs, nout);
    if (ni < 0)
        goto fail;
    /* From here on the node's own name (generated when empty) labels it. */
    snprintf(label, sizeof label, "node '%s' (%s)", c->g->nodes[ni].name,
             op_type);

    if (nattrs) {
        c->g->nodes[ni].attrs = malloc(nattrs * sizeof(sn_attr));
        if (!c->g->nodes[ni].attrs) {
            st = sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
            goto fail;
        }
    }
    sn_pb_init(&r, p, n);
    k = 0;
    while (sn_pb_next(&r, &f) > 0) {
        const uint8_t *an;
        size_t an_len;
        if (f.num != NP_ATTRIBUTE)
            continue;
        st = parse_attr(c, ni, f.data, f.len);
        if (st != SHARDNET_OK) {
            if (sn_pb_peek_len(f.data, f.len, AP_NAME, &an, &an_len))
                sn_error_prefix(st, "attribute '%s'",
                                shown(b1, sizeof b1, an, an_len));
            else
                sn_error_prefix(st, "attribute #%zu", k);
            goto fail;
        }
        k++;
    }
    if ((st = unique_attrs(&c->g->nodes[ni])) != SHARDNET_OK)
        goto fail;
    if (!strcmp(op_type, "Constant") &&
        (!strcmp(domain, "") || !strcmp(domain, "ai.onnx"))) {
        st = constant_value(c, ni);
        if (st != SHARDNET_OK)
            goto fail;
    }
    free(ins);
    free(outs);
    free(name);
    free(op_type);
    free(domain);
    return SHARDNET_OK;

fail:
    free(ins);
    free(outs);
    free(name);
    free(op_type);
    free(domain);
    if (st == SHARDNET_OK)
        st = SHARDNET_INVALID_ARGUMENT;
    return sn_error_prefix(st, "%s", label);
}

static shardnet_status parse_graph(ctx *c, const uint8_t *p, size_t n)
{
    sn_graph *g = c->g;
    sn_pb r;
    sn_pb_field f;
    const uint8_t *gn;
    size_t gn_len, ninputs = 0, noutputs = 0, k;
    int rc;
    char label[200], b[160];
    shardnet_status st = SHARDNET_INVALID_ARGUMENT;

    if (sn_pb_peek_len(p, n, GP_NAME, &gn, &gn_len) && gn_len)
        snprintf(label, sizeof label, "graph '%s'",
                 shown(b, sizeof b, gn, gn_len));
    else
        snprintf(label, sizeof label, "graph");

    /* Check the framing once; the passes below can then not fail on it. */
    sn_pb_init(&r, p, n);
    while ((rc = sn_pb_next(&r, &f)) > 0) {
        switch (f.num) {
        case GP_NODE:
        case GP_INITIALIZER:
        case GP_INPUT:
        case GP_OUTPUT:
        case GP_VALUE_INFO:
        case GP_NAME:
            if (sn_pb_expect(&f, SN_PB_LEN, "graph field") < 0)
                goto fail;
            ninputs += f.num == GP_INPUT;
            noutputs += f.num == GP_OUTPUT;
            break;
        case GP_SPARSE_INITIALIZER:
            sn_error(SHARDNET_UNSUPPORTED,
                     "sparse initializers are not supported");
            st = SHARDNET_UNSUPPORTED;
            goto fail;
        default:
            break;
        }
    }
    if (rc < 0)
        goto fail;
    g->inputs = malloc((ninputs ? ninputs : 1) * sizeof *g->inputs);
    g->outputs = malloc((noutputs ? noutputs : 1) * sizeof *g->outputs);
    if (!g->inputs || !g->outputs) {
        st = sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
        goto fail;
    }

    k = 0;
    sn_pb_init(&r, p, n);
    while (sn_pb_next(&r, &f) > 0) {
        sn_pb_tensor t;
        const char *tn;
        if (f.num != GP_INITIALIZER)
            continue;
        if ((st = sn_pb_tensor_parse(f.data, f.len, &t)) != SHARDNET_OK) {
            sn_error_prefix(st, "initializer %zu", k);
            goto fail;
        }
        if (!t.name || !t.name_len) {
            sn_error(SHARDNET_INVALID_ARGUMENT, "initializer %zu has no name",
                     k);
            goto fail;
        }
        tn = name_in(c, t.name, t.name_len, "initializer name");
        if (!tn)
            goto fail;
        if (sn_graph_find(g, tn) >= 0) {
            sn_error(SHARDNET_INVALID_ARGUMENT,
                     "initializer '%s' is defined twice", tn);
            goto fail;
        }
        if (tensor_value(c, &t, tn) < 0) {
            st = SHARDNET_INVALID_ARGUMENT;
            goto fail;
        }
        k++;
    }

    k = 0;
    sn_pb_init(&r, p, n);
    while (sn_pb_next(&r, &f) > 0) {
        const uint8_t *vt;
        size_t vt_len;
        const char *name;
        int vi;
        if (f.num != GP_INPUT)
            continue;
        if (!(name = value_name(c, &f, "graph input", "input name", k, &vt,
                                &vt_len)))
            goto fail;
        if (!*name) {
            sn_error(SHARDNET_INVALID_ARGUMENT, "graph input %zu has no name",
                     k);
            goto fail;
        }
        vi = sn_graph_find(g, name);
        if (vi >= 0 && (g->values[vi].flags & SN_VALUE_CONST)) {
            k++;
            continue; /* an initializer: a constant, not bound */
        }
        if (vi >= 0) {
            sn_error(SHARDNET_INVALID_ARGUMENT,
                     "graph input '%s' is listed twice", name);
            goto fail;
        }
        if ((vi = sn_graph_add_value(g, name)) < 0)
            goto fail;
        g->values[vi].flags |= SN_VALUE_INPUT;
        g->inputs[g->ninputs++] = vi;
        if (vt && apply_type(c, vi, vt, vt_len) != SHARDNET_OK) {
            sn_error_prefix(SHARDNET_INVALID_ARGUMENT, "graph input '%s'",
                            g->values[vi].name);
            goto fail;
        }
        k++;
    }

    k = 0;
    sn_pb_init(&r, p, n);
    while (sn_pb_next(&r, &f) > 0) {
        if (f.num != GP_NODE)
            continue;
        if ((st = parse_node(c, f.data, f.len, g->nnodes)) != SHARDNET_OK)
            goto fail;
        k++;
    }

    k = 0;
    sn_pb_init(&r, p, n);
    while (sn_pb_next(&r, &f) > 0) {
        const uint8_t *vt;
        size_t vt_len;
        const char *name;
        int vi;
        if (f.num != GP_OUTPUT)
            continue;
        if (!(name = value_name(c, &f, "graph output", "output name", k, &vt,
                                &vt_len)))
            goto fail;
        if (!*name) {
            sn_error(SHARDNET_INVALID_ARGUMENT,
                     "graph output %zu has no name", k);
            goto fail;
        }
        if ((vi = value_of(c, name)) < 0)
            goto fail;
        g->values[vi].flags |= SN_VALUE_OUTPUT;
        g->outputs[g->noutputs++] = vi;
        if (vt && !(g->values[vi].flags & SN_VALUE_CONST) &&
            apply_type(c, vi, vt, vt_len) != SHARDNET_OK) {
            sn_error_prefix(SHARDNET_INVALID_ARGUMENT, "graph output '%s'",
                            g->values[vi].name);
            goto fail;
        }
        k++;
    }

    k = 0;
    sn_pb_init(&r, p, n);
    while (sn_pb_next(&r, &f) > 0) {
        const uint8_t *vt;
        size_t vt_len;
        const char *name;
        int vi;
        if (f.num != GP_VALUE_INFO)
            continue;
        if (!(name = value_name(c, &f, "value_info", "value_info name", k,
                                &vt, &vt_len)))
            goto fail;
        k++;
        /* A hint for a name no node uses says nothing we need. */
        vi = *name ? sn_graph_find(g, name) : -1;
        if (vi < 0 || !vt || (g->values[vi].flags & SN_VALUE_CONST))
            continue;
        if (apply_type(c, vi, vt, vt_len) != SHARDNET_OK) {
            sn_error_prefix(SHARDNET_INVALID_ARGUMENT, "value_info '%s'",
                            g->values[vi].name);
            goto fail;
        }
    }
    return SHARDNET_OK;

fail:
    /* st may still hold the OK of a step that went well before this one */
    if (st == SHARDNET_OK)
        st = SHARDNET_INVALID_ARGUMENT;
    return sn_error_prefix(st, "%s", label);
}

static shardnet_status parse_model(ctx *c, const uint8_t *p, size_t n)
{
    sn_graph *g = c->g;
    sn_pb r, ro;
    sn_pb_field f, fo;
    const uint8_t *graph = NULL;
    size_t graph_len = 0;
    int64_t opset = -1;
    int rc;

    sn_pb_init(&r, p, n);
    while ((rc = sn_pb_next(&r, &f)) > 0) {
        switch (f.num) {
        case MP_IR_VERSION:
            if (sn_pb_expect(&f, SN_PB_VARINT, "ir_version") < 0)
                goto fail;
            g->ir_version = (int64_t)f.u;
            break;
        case MP_PRODUCER:
            if (sn_pb_expect(&f, SN_PB_LEN, "producer_name") < 0)
                goto fail;
            free(g->producer);
            g->producer = sn_pb_strdup(f.data, f.len, SN_MAX_NAME,
                                       "producer_name");
            if (!g->producer)
                goto fail;
            break;
        case MP_GRAPH:
            if (sn_pb_expect(&f, SN_PB_LEN, "graph") < 0)
                goto fail;
            graph = f.data;
            graph_len = f.len;
            break;
        case MP_OPSET: {
            const uint8_t *dom = NULL;
            size_t dom_len = 0;
            int64_t version = 0;
            if (sn_pb_expect(&f, SN_PB_LEN, "opset_import") < 0)
                goto fail;
            sn_pb_init(&ro, f.data, f.len);
            while ((rc = sn_pb_next(&ro, &fo)) > 0) {
                if (fo.num == 1) {
                    if (sn_pb_expect(&fo, SN_PB_LEN, "domain") < 0)
                        goto fail;
                    dom = fo.data;
                    dom_len = fo.len;
                } else if (fo.num == 2) {
                    if (sn_pb_expect(&fo, SN_PB_VARINT, "version") < 0)
                        goto fail;
                    version = (int64_t)fo.u;
                }
            }
            if (rc < 0) {
                sn_error_prefix(SHARDNET_INVALID_ARGUMENT, "opset_import");
                goto fail;
            }
            if (dom_len == 0 ||
                (dom_len == 7 && memcmp(dom, "ai.onnx", 7) == 0)) {
                if (opset >= 0 && opset != version) {
                    sn_error(SHARDNET_INVALID_ARGUMENT,
                             "opset_import names the default domain twice "
                             "(opsets %" PRId64 " and %" PRId64 ")",
                             opset, version);
                    goto fail;
                }
                opset = version;
            }
            break;
        }
        default:
            break;
        }
    }
    if (rc < 0)
        goto fail;
    if (opset < 0) {
        sn_error(SHARDNET_INVALID_ARGUMENT,
                 "no opset_import for the default ONNX domain");
        goto fail;
    }
    if (opset < OPSET_MIN || opset > OPSET_MAX) {
        sn_error(SHARDNET_UNSUPPORTED,
                 "opset %" PRId64 " of the default ONNX domain is not "
                 "supported (supported: %d to %d)",
                 opset, OPSET_MIN, OPSET_MAX);
        return sn_error_prefix(SHARDNET_UNSUPPORTED, "model");
    }
    g->opset = opset;
    if (!graph) {
        sn_error(SHARDNET_INVALID_ARGUMENT, "no graph");
        goto fail;
    }
    return parse_graph(c, graph, graph_len);
fail:
    return sn_error_prefix(SHARDNET_INVALID_ARGUMENT, "model");
}

static shardnet_status load(sn_graph *g, const void *data, size_t len,
                            const char *base_dir, int copy,
                            sn_model_file **files, size_t *nfiles)
{
    ctx *c = calloc(1, sizeof *c);
    shardnet_status st;
    if (!c)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
    c->g = g;
    c->base_dir = base_dir;
    c->copy = copy;
    c->files = files;
    c->nfiles = nfiles;
    st = parse_model(c, data, len);
    for (size_t i = 0; i < c->next; i++)
        free(c->ext[i].location);
    free(c->ext);
    free(c->real_dir);
    free(c);
    return st;
}

shardnet_status sn_onnx_load_memory(const void *data, size_t len,
                                    const char *base_dir, sn_graph **out)
{
    sn_graph *g;
    shardnet_status st;
    if (!out)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "no place for the graph");
    *out = NULL;
    if (!data && len)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "no model data");
    if (!(g = sn_graph_new()))
        return SHARDNET_OUT_OF_MEMORY;
    st = load(g, data, len, base_dir, 0, NULL, NULL);
    if (st != SHARDNET_OK) {
        sn_graph_free(g);
        return st;
    }
    *out = g;
    return SHARDNET_OK;
}

shardnet_status sn_onnx_load(const char *path, sn_graph **out)
{
    sn_model_file *files = NULL;
    size_t nfiles = 0;
    shardnet_status st = sn_onnx_load_file(path, 0, out, &files, &nfiles);
    sn_model_files_free(files, nfiles);
    return st;
}

shardnet_status sn_onnx_load_file(const char *path, int copy, sn_graph **out,
                                  sn_model_file **files, size_t *nfiles)
{
    struct stat sb;
    sn_graph *g = NULL;
    void *addr = NULL;
    char *dir, *real = NULL;
    const char *slash;
    shardnet_status st;
    int fd;

    if (!out || !path || !files || !nfiles)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "no path or no out");
    *out = NULL;
    *files = NULL;
    *nfiles = 0;
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
    st = map_fd(fd, (size_t)sb.st_size, copy, path, &addr);
    close(fd);
    if (st == SHARDNET_OK && !copy)
        st = note_file(files, nfiles, real, &sb);
    free(real);
    if (st != SHARDNET_OK) {
        if (addr)
            munmap(addr, (size_t)sb.st_size);
        sn_model_files_free(*files, *nfiles);
        *files = NULL;
        *nfiles = 0;
        return st;
    }
    if (!(g = sn_graph_new())) {
        munmap(addr, (size_t)sb.st_size);
        st = SHARDNET_OUT_OF_MEMORY;
        goto fail;
    }
    if (sn_graph_add_mapping(g, addr, (size_t)sb.st_size) < 0) {
        munmap(addr, (size_t)sb.st_size);
        st = SHARDNET_OUT_OF_MEMORY;
        goto fail;
    }
    /* External data lives beside the model. */
    slash = strrchr(path, '/');
    if (!slash) {
        dir = strdup(".");
    } else {
        size_t n = slash == path ? 1 : (size_t)(slash - path);
        dir = malloc(n + 1);
        if (dir) {
            memcpy(dir, path, n);
            dir[n] = '\0';
        }
    }
    if (!dir) {
        st = sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
        goto fail;
    }
    st = load(g, addr, (size_t)sb.st_size, dir, copy, files, nfiles);
    free(dir);
    if (st != SHARDNET_OK) {
        sn_error_prefix(st, "%s", path);
        goto fail;
    }
    *out = g;
    return SHARDNET_OK;
fail:
    sn_graph_free(g);
    sn_model_files_free(*files, *nfiles);
    *files = NULL;
    *nfiles = 0;
    return st;
}
