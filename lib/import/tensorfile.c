/*
 * Tensor files: NumPy .npy and ONNX TensorProto .pb (the format of the ONNX
 * test data's inputs and outputs).  Every length read from a file is
 * checked against the file's own size before anything is allocated.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "ir/graph.h"
#include "import/pbwire.h"
#include "import/tensorfile.h"

/* The start of a loader: *out cleared, and the whole file at path in one
 * allocation of its size. */
static shardnet_status read_file(const char *path, sn_host_tensor *out,
                                 uint8_t **buf, size_t *len)
{
    struct stat sb;
    uint8_t *b;
    size_t got = 0;
    int fd;
    if (!out)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "no tensor to load into");
    memset(out, 0, sizeof *out);
    fd = sn_open_regular(path, 0, &sb);
    *buf = NULL;
    *len = 0;
    if (fd == SN_NOT_REGULAR)
        return sn_error(SHARDNET_IO_ERROR,
                        "%s: not a regular file (a FIFO, device or folder "
                        "cannot hold a tensor)",
                        path);
    if (fd < 0)
        return sn_error(SHARDNET_IO_ERROR, "%s: %s", path, strerror(errno));
    b = malloc(sb.st_size ? (size_t)sb.st_size : 1);
    if (!b) {
        close(fd);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    while (got < (size_t)sb.st_size) {
        ssize_t r = read(fd, b + got, (size_t)sb.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            shardnet_status st = sn_error(SHARDNET_IO_ERROR, "%s: %s", path,
                                          r < 0 ? strerror(errno)
                                                : "file shrank while read");
            close(fd);
            free(b);
            return st;
        }
        got += (size_t)r;
    }
    close(fd);
    *buf = b;
    *len = got;
    return SHARDNET_OK;
}

/* NumPy type strings we read and write, without the byte-order mark. */
static const struct {
    const char *code;
    sn_dtype dtype;
} npy_types[] = {
    {"f4", SN_DT_FLOAT},  {"f8", SN_DT_DOUBLE}, {"i4", SN_DT_INT32},
    {"i8", SN_DT_INT64},  {"u1", SN_DT_UINT8},  {"i1", SN_DT_INT8},
    {"b1", SN_DT_BOOL},   {"i2", SN_DT_INT16},  {"u2", SN_DT_UINT16},
    {"f2", SN_DT_FLOAT16}, {"u4", SN_DT_UINT32}, {"u8", SN_DT_UINT64},
};

typedef struct lex {
    const char *p, *end;
} lex;

static void skip_ws(lex *l)
{
    while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\n'))
        l->p++;
}

static int eat(lex *l, char c)
{
    skip_ws(l);
    if (l->p < l->end && *l->p == c) {
        l->p++;
        return 1;
    }
    return 0;
}

/* A Python string literal without escapes, into buf. */
static int lex_string(lex *l, char *buf, size_t cap)
{
    char q;
    size_t n = 0;
    skip_ws(l);
    if (l->p >= l->end || (*l->p != '\'' && *l->p != '"'))
        return -1;
    q = *l->p++;
    while (l->p < l->end && *l->p != q) {
        if (*l->p == '\\' || n + 1 >= cap)
            return -1;
        buf[n++] = *l->p++;
    }
    if (l->p >= l->end)
        return -1;
    l->p++;
    buf[n] = '\0';
    return 0;
}

static int lex_word(lex *l, const char *w)
{
    size_t n = strlen(w);
    skip_ws(l);
    if ((size_t)(l->end - l->p) >= n && memcmp(l->p, w, n) == 0) {
        l->p += n;
        return 1;
    }
    return 0;
}

static shardnet_status parse_npy_header(const char *path, const char *h,
                                        size_t hlen, sn_host_tensor *t,
                                        int *have_shape)
{
    lex l = {h, h + hlen};
    char key[32], descr[16];
    int have_descr = 0, have_order = 0;
    *have_shape = 0;
    if (!eat(&l, '{'))
        goto bad;
    for (;;) {
        if (eat(&l, '}'))
            break;
        if (lex_string(&l, key, sizeof key) < 0 || !eat(&l, ':'))
            goto bad;
        if (!strcmp(key, "descr")) {
            size_t i;
            const char *code;
            if (lex_string(&l, descr, sizeof descr) < 0)
                goto bad;
            if (strlen(descr) < 2)
                goto bad;
            code = descr + 1;
            for (i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
                if (!strcmp(code, npy_types[i].code))
                    break;
            if (i == sizeof npy_types / sizeof npy_types[0] ||
                !strchr("<|=>", descr[0]))
                return sn_error(SHARDNET_INVALID_ARGUMENT,
                                "%s: NumPy type '%s' is not supported: the "
                                "file cannot be read (shardnet reads bool, "
                                "integers and floats)",
                                path, descr);
            t->dtype = npy_types[i].dtype;
            /* Bytes in big-endian order, or no order for wide types: no. */
            if (sn_dtype_size(t->dtype) > 1 && descr[0] != '<' &&
                descr[0] != '=')
                return sn_error(SHARDNET_INVALID_ARGUMENT,
                                "%s: NumPy type '%s' cannot be read: its "
                                "bytes are not in little-endian order (save "
                                "it with .astype('<...'))",
                                path, descr);
            have_descr = 1;
        } else if (!strcmp(key, "fortran_order")) {
            if (lex_word(&l, "True"))
                return sn_error(SHARDNET_INVALID_ARGUMENT,
                                "%s: cannot be read: the array is in Fortran "
                                "order (save it with np.ascontiguousarray)",
                                path);
            if (!lex_word(&l, "False"))
                goto bad;
            have_order = 1;
        } else if (!strcmp(key, "shape")) {
            int rank = 0;
            if (!eat(&l, '('))
                goto bad;
            for (;;) {
                int64_t d = 0;
                int digits = 0;
                if (eat(&l, ')'))
                    break;
                skip_ws(&l);
                while (l.p < l.end && *l.p >= '0' && *l.p <= '9') {
                    d = d * 10 + (*l.p++ - '0');
                    if (d > SN_MAX_ELEMENTS)
                        return sn_error(SHARDNET_INVALID_ARGUMENT,
                                        "%s: a dimension exceeds 2^34", path);
                    digits++;
                }
                if (!digits)
                    goto bad;
                if (l.p < l.end && *l.p == 'L') /* Python 2 long */
                    l.p++;
                if (rank == SHARDNET_MAX_DIMS)
                    return sn_error(SHARDNET_INVALID_ARGUMENT,
                                    "%s: more than %d dimensions", path,
                                    SHARDNET_MAX_DIMS);
                t->dims[rank++] = d;
                if (eat(&l, ')'))
                    break;
                if (!eat(&l, ','))
                    goto bad;
            }
            t->rank = rank;
            *have_shape = 1;
        } else {
            goto bad;
        }
        if (eat(&l, '}'))
            break;
        if (!eat(&l, ','))
            goto bad;
    }
    skip_ws(&l);
    if (l.p != l.end || !have_descr || !have_order || !*have_shape)
        goto bad;
    return SHARDNET_OK;
bad:
    return sn_error(SHARDNET_INVALID_ARGUMENT,
                    "%s: malformed .npy header (near byte %zu of %zu)", path,
                    (size_t)(l.p - h), hlen);
}

shardnet_status sn_tensor_load_npy(const char *path, sn_host_tensor *out)
{
    static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    uint8_t *buf;
    size_t len, hstart, hlen, data_at;
    uint64_t count = 1;
    int have_shape;
    sn_host_tensor t;
    shardnet_status st;

    if ((st = read_file(path, out, &buf, &len)) != SHARDNET_OK)
        return st;
    memset(&t, 0, sizeof t);
    if (len < 10 || memcmp(buf, magic, 6) != 0) {
        st = sn_error(SHARDNET_INVALID_ARGUMENT, "%s: not a .npy file", path);
        goto fail;
    }
    if (buf[6] == 1 && buf[7] == 0) {
        hstart = 10;
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
    } else if ((buf[6] == 2 || buf[6] == 3) && buf[7] == 0) {
        if (len < 12) {
            st = sn_error(SHARDNET_INVALID_ARGUMENT, "%s: truncated header",
                          path);
            goto fail;
        }
        hstart = 12;
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 |
               (size_t)buf[11] << 24;
    } else {
        st = sn_error(SHARDNET_INVALID_ARGUMENT,
                      "%s: .npy version %u.%u cannot be read (1.0 to 3.0 "
                      "can)",
                      path, buf[6], buf[7]);
        goto fail;
    }
    if (hlen > len - hstart) {
        st = sn_error(SHARDNET_INVALID_ARGUMENT,
                      "%s: header of %zu bytes runs past the end of the file",
                      path, hlen);
        goto fail;
    }
    st = parse_npy_header(path, (const char *)buf + hstart, hlen, &t,
                          &have_shape);
    if (st != SHARDNET_OK)
        goto fail;
    for (int i = 0; i < t.rank; i++) {
        if (t.dims[i] == 0) {
            count = 0;
            break;
        }
        if (count > (uint64_t)SN_MAX_ELEMENTS / (uint64_t)t.dims[i]) {
            st = sn_error(SHARDNET_INVALID_ARGUMENT,
                          "%s: shape gives more than 2^34 elements", path);
            goto fail;
        }
        count *= (uint64_t)t.dims[i];
    }
    data_at = hstart + hlen;
    t.nbytes = (size_t)count * sn_dtype_size(t.dtype);
    if (len - data_at != t.nbytes) {
        st = sn_error(SHARDNET_INVALID_ARGUMENT,
                      "%s: %zu bytes of data, but %" PRIu64
                      " elements of %s need %zu",
                      path, len - data_at, count, sn_dtype_name(t.dtype),
                      t.nbytes);
        goto fail;
    }
    /* The data moves to the front of the buffer: no second allocation. */
    if (t.nbytes) {
        uint8_t *shrunk;
        memmove(buf, buf + data_at, t.nbytes);
        shrunk = realloc(buf, t.nbytes);
        t.data = shrunk ? shrunk : buf;
    } else {
        free(buf);
        t.data = NULL;
    }
    *out = t;
    return SHARDNET_OK;
fail:
    free(buf);
    return st;
}

shardnet_status sn_tensor_load_pb(const char *path, sn_host_tensor *out)
{
    uint8_t *buf;
    size_t len;
    sn_pb_tensor pt;
    sn_host_tensor t;
    shardnet_status st;

    memset(&t, 0, sizeof t);
    if ((st = read_file(path, out, &buf, &len)) != SHARDNET_OK)
        return st;
    if ((st = sn_pb_tensor_parse(buf, len, &pt)) != SHARDNET_OK)
        goto fail;
    if (pt.external) {
        st = sn_error(SHARDNET_INVALID_ARGUMENT,
                      "cannot be read: the tensor's data is in another file "
                      "(external data), which a tensor file cannot use");
        goto fail;
    }
    if (pt.name && pt.name_len) {
        t.name = sn_pb_strdup(pt.name, pt.name_len, SN_MAX_NAME, "name");
        if (!t.name) {
            st = SHARDNET_INVALID_ARGUMENT;
            goto fail;
        }
    }
    t.dtype = pt.dtype;
    t.rank = pt.rank;
    for (int i = 0; i < pt.rank; i++)
        t.dims[i] = pt.dims[i];
    t.nbytes = pt.nbytes;
    if (pt.nbytes) {
        t.data = malloc(pt.nbytes);
        if (!t.data) {
            st = sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
            goto fail;
        }
        if (pt.has_raw)
            memcpy(t.data, pt.raw, pt.nbytes);
        else
            sn_pb_tensor_decode_typed(&pt, t.data);
    }
    free(buf);
    *out = t;
    return SHARDNET_OK;
fail:
    free(buf);
    sn_host_tensor_free(&t);
    /* A tensor of a kind shardnet cannot hold (strings, segments) is a
     * problem of the file, not of a device. */
    if (st == SHARDNET_UNSUPPORTED)
        st = SHARDNET_INVALID_ARGUMENT;
    return sn_error_prefix(st, "%s", path);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

shardnet_status sn_tensor_load(const char *path, sn_host_tensor *out)
{
    if (!path)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "no path");
    if (ends_with(path, ".npy"))
        return sn_tensor_load_npy(path, out);
    if (ends_with(path, ".pb"))
        return sn_tensor_load_pb(path, out);
    if (out)
        memset(out, 0, sizeof *out);
    return sn_error(SHARDNET_INVALID_ARGUMENT,
                    "%s: unknown tensor file type (expected .npy or .pb)",
                    path);
}

shardnet_status sn_tensor_save_npy(const char *path, const sn_host_tensor *t)
{
    char header[256];
    const char *code = NULL;
    size_t n, total;
    int64_t count = 1;
    FILE *f;
    int bad;

    if (!t || !path)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "no tensor or no path");
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
        if (npy_types[i].dtype == t->dtype)
            code = npy_types[i].code;
    if (!code)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "%s: cannot save %s tensors as .npy", path,
                        sn_dtype_name(t->dtype));
    if (t->rank < 0 || t->rank > SHARDNET_MAX_DIMS)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s: rank %d", path,
                        t->rank);
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i] < 0 || t->dims[i] > SN_MAX_ELEMENTS)
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "%s: dimension %d is %" PRId64, path, i,
                            t->dims[i]);
        count *= t->dims[i];
        if (count > SN_MAX_ELEMENTS)
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "%s: more than 2^34 elements", path);
    }
    if ((uint64_t)t->nbytes != (uint64_t)count * sn_dtype_size(t->dtype) ||
        (t->nbytes && !t->data))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "%s: %zu bytes of data for %" PRId64 " elements of %s",
                        path, t->nbytes, count, sn_dtype_name(t->dtype));

    n = (size_t)snprintf(header, sizeof header,
                         "{'descr': '%c%s', 'fortran_order': False, "
                         "'shape': (",
                         sn_dtype_size(t->dtype) == 1 ? '|' : '<', code);
    for (int i = 0; i < t->rank; i++)
        n += (size_t)snprintf(header + n, sizeof header - n, "%s%" PRId64,
                              i ? ", " : "", t->dims[i]);
    n += (size_t)snprintf(header + n, sizeof header - n, "%s), }",
                          t->rank == 1 ? "," : "");
    /* Magic (6) + version (2) + length (2) + header + '\n': a multiple of
     * 64, as NumPy writes it. */
    total = (10 + n + 1 + 63) / 64 * 64;
    while (10 + n + 1 < total)
        header[n++] = ' ';
    header[n++] = '\n';

    /* Written under a temporary name in the same folder, then renamed over
     * path: a full disk or a crash leaves the old file or none, never a
     * truncated one. */
    static unsigned serial;
    unsigned k = __atomic_fetch_add(&serial, 1, __ATOMIC_RELAXED);
    size_t plen = strlen(path) + 48;
    char *tmp = malloc(plen);
    int fd, err = 0;
    if (!tmp)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s: out of memory", path);
    snprintf(tmp, plen, "%s.%ld.%u.tmp", path, (long)getpid(), k);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 || !(f = fdopen(fd, "wb"))) {
        shardnet_status st = sn_error(SHARDNET_IO_ERROR, "%s: %s", path,
                                      strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        free(tmp);
        return st;
    }
    {
        uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                           (uint8_t)(n & 0xff), (uint8_t)(n >> 8)};
        bad = fwrite(pre, 1, sizeof pre, f) != sizeof pre ||
              fwrite(header, 1, n, f) != n ||
              (t->nbytes && fwrite(t->data, 1, t->nbytes, f) != t->nbytes) ||
              fflush(f) != 0;
        if (bad)
            err = errno;
    }
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    if (!bad && rename(tmp, path) != 0) {
        bad = 1;
        err = errno;
    }
    if (bad) {
        unlink(tmp);
        free(tmp);
        return sn_error(SHARDNET_IO_ERROR, "%s: write failed: %s (nothing "
                        "written)", path, strerror(err ? err : EIO));
    }
    free(tmp);
    return SHARDNET_OK;
}
