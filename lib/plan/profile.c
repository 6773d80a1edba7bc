/* Device profiles: measured once, cached on disk.  See profile.h. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "core/cachedir.h"
#include "core/error.h"
#include "core/file.h"
#include "core/trace.h"
#include "plan/profile.h"
#include "comm/world.h"

#define PROFILE_FILE "profiles-2.txt"
#define MAX_PROFILES 64

/* One measured operation: a kernel or a copy, enqueued on dev. */
typedef struct timed_op {
    sn_kernel kernel;         /* SN_KERNEL_COUNT: the copy below */
    sn_kernel_desc desc;
    sn_buffer *buf;           /* the copy: of `bytes` at host */
    void *host;
    size_t bytes;
    int read;                 /* the copy's way: 1 device->host */
} timed_op;

/* The best seconds of op, enqueued and waited for, after `warm` untimed
 * runs (first use: packing, caches, page faults): at least `timed` timed
 * runs, more (up to 1000 runs) until `budget` seconds have passed; a run
 * that fails ends the loop with the best so far.  1e30 without a timed
 * run. */
static double best_time(sn_device *dev, const timed_op *op, int warm,
                        int timed, double budget)
{
    double best = 1e30, start = sn_trace_now();
    for (int r = 0; r < 1000; r++) {
        double t0 = sn_trace_now();
        shardnet_status st =
            op->kernel < SN_KERNEL_COUNT ? sn_launch(dev, op->kernel, &op->desc)
            : op->read ? sn_buffer_read(op->buf, 0, op->host, op->bytes)
                       : sn_buffer_write(op->buf, 0, op->host, op->bytes);
        if (st || sn_synchronize(dev))
            break;
        double t = sn_trace_now() - t0;
        if (r >= warm && t < best)
            best = t;
        if (r + 1 >= warm + timed && sn_trace_now() - start > budget)
            break;
    }
    return best;
}

/* Best seconds of an m x k times k x n product (B constant: b_const, as a
 * weight is; its buffers filled with small values), as best_time takes
 * them; 1e30 when it cannot be measured. */
static double product_time(sn_device *dev, size_t m, size_t k, size_t n,
                           int b_const, int warm, int timed, double budget)
{
    sn_buffer *a = NULL, *b = NULL, *c = NULL;
    double best = 1e30;
    size_t most = (m > n ? m : n) * k;
    float *x = malloc(most * sizeof *x);
    for (size_t i = 0; x && i < most; i++)
        x[i] = (float)(i % 17) * 0.01f;
    if (x && !sn_buffer_alloc(dev, m * k * 4, &a) &&
        !sn_buffer_alloc(dev, k * n * 4, &b) &&
        !sn_buffer_alloc(dev, m * n * 4, &c) &&
        !sn_buffer_write(a, 0, x, m * k * 4) &&
        !sn_buffer_write(b, 0, x, k * n * 4)) {
        timed_op op = {.kernel = SN_KERNEL_GEMM,
                       .desc.gemm = {.m = m, .n = n, .k = k, .alpha = 1,
                                     .lda = k, .ldb = n, .ldc = n,
                                     .batch = 1, .b_const = b_const,
                                     .a = {a, 0}, .b = {b, 0},
                                     .c = {c, 0}}};
        best = best_time(dev, &op, warm, timed, budget);
    }
    sn_error_clear();
    sn_buffer_free(a);
    sn_buffer_free(b);
    sn_buffer_free(c);
    free(x);
    return best;
}

/* Best flops/s of an n^3 product, over runs until `budget` seconds have
 * passed (at least `timed` timed runs after 2 warm-ups); 0 on failure. */
static double gemm_speed(sn_device *dev, size_t n, double budget, int timed)
{
    double t = product_time(dev, n, n, n, 0, 2, timed, budget);
    return t < 1e30 ? 2.0 * (double)(n * n * n) / t : 0;
}

/* Seconds of one tiny kernel launched and waited for (best of reps, after
 * two warm-ups). */
static double launch_cost(sn_device *dev, int reps)
{
    sn_buffer *a = NULL;
    double best = 1e30;
    if (sn_buffer_alloc(dev, 64, &a) == SHARDNET_OK) {
        timed_op op = {.kernel = SN_KERNEL_UNARY,
                       .desc.unary = {.op = SN_UNARY_RELU, .n = 16,
                                      .x = {a, 0}, .y = {a, 0}}};
        best = best_time(dev, &op, 2, reps, 0);
    }
    sn_error_clear();
    sn_buffer_free(a);
    return best < 1e30 ? best : 1e-4;
}

/* Bytes/s of writing (dir 0) or reading (dir 1) a buffer of `bytes` (best
 * of reps after one warm-up). */
static double bandwidth(sn_device *dev, int dir, int reps, size_t bytes)
{
    sn_buffer *a = NULL;
    double best = 1e30;
    char *h = malloc(bytes);
    if (h && sn_buffer_alloc(dev, bytes, &a) == SHARDNET_OK) {
        memset(h, 1, bytes);
        timed_op op = {.kernel = SN_KERNEL_COUNT, .buf = a, .host = h,
                       .bytes = bytes, .read = dir};
        best = best_time(dev, &op, 1, reps, 0);
    }
    sn_error_clear();
    sn_buffer_free(a);
    free(h);
    return best < 1e30 ? (double)bytes / best : 1e9;
}

/* The copies' buffer: 8 MiB to profile; 1 MiB for the quick check of a
 * cached profile, which each split's first run makes on every device (the
 * 8 MiB ones, new pages written and freed four times a device, took 17 ms
 * of a tensor split's 45 ms first run over two sockets).  A smaller copy
 * only ever measures slower, so it never overrules a cached figure. */
#define COPY_BYTES ((size_t)8 << 20)
#define QUICK_COPY_BYTES ((size_t)1 << 20)

/* Bytes/s of a weight streamed by a one-row product (1 x K times a
 * constant K x N of READ_K x READ_N floats, 32 MiB: past the caches of
 * most machines), the best of reps after one untimed run (which packs
 * the weight where the device does): the speed of a batch-1 product,
 * whose time is reading its weights.  1e9 when it cannot be measured. */
#define READ_K 2048
#define READ_N 4096
static double read_speed(sn_device *dev, int reps)
{
    double t = product_time(dev, 1, READ_K, READ_N, 1, 1, reps, 0);
    return t < 1e30 ? (double)READ_K * READ_N * sizeof(float) / t : 1e9;
}

/* What the cache file and the warnings call a profile's figures, which way
 * is better, and the range a real device can have: a figure outside it (0,
 * 1e-300, inf, NaN, a negative) is a damaged entry, never a device. */
static const struct field {
    const char *name;
    size_t off;
    int lower_better;
    double lo, hi;
} fields[] = {
    {"gemm_flops", offsetof(sn_profile, gemm_flops), 0, 1e6, 1e17},
    {"gemm_small_flops", offsetof(sn_profile, gemm_small_flops), 0, 1e6,
     1e17},
    {"launch_s", offsetof(sn_profile, launch_s), 1, 1e-9, 10},
    {"h2d_bps", offsetof(sn_profile, h2d_bps), 0, 1e4, 1e14},
    {"d2h_bps", offsetof(sn_profile, d2h_bps), 0, 1e4, 1e14},
    {"read_bps", offsetof(sn_profile, read_bps), 0, 1e4, 1e14},
};
#define NFIELDS (sizeof fields / sizeof fields[0])

static double *fld(sn_profile *p, size_t i)
{
    return (double *)(void *)((char *)p + fields[i].off);
}

static double fget(const sn_profile *p, size_t i)
{
    return *(const double *)(const void *)((const char *)p + fields[i].off);
}

/* Does a beat b on figure i by more than factor? */
static int beats(const sn_profile *a, const sn_profile *b, size_t i,
                 double factor)
{
    return fields[i].lower_better ? fget(a, i) * factor < fget(b, i)
                                  : fget(a, i) > fget(b, i) * factor;
}

/* Each figure of *p: the better of p's and q's. */
static void best_of(sn_profile *p, const sn_profile *q)
{
    for (size_t i = 0; i < NFIELDS; i++)
        if (beats(q, p, i, 1.0))
            *fld(p, i) = fget(q, i);
}

/*
 * A profile: the full one (about a tenth of a second), or the quick one
 * that checks a cached profile (a few milliseconds: a 64^3 product, a few
 * launches, one 8 MiB copy each way).  Figures are kept within the range a
 * cache read accepts, so what is measured can always be read back.
 */
static void measure(sn_device *dev, sn_profile *p, int quick)
{
    memset(p, 0, sizeof *p);
    /* Driven the way runs and splits drive it (a CPU device's kernels run
     * on this thread, its team pinned): queued to the device's worker while
     * this thread waited, a run could wait a scheduler tick for a core
     * (see tools/bench-steady.sh in the README). */
    sn_bind_thread(dev, 1);
    double stamp = 0;
    const char *what = quick ? "checking the profile of %s" : "profiling %s";
    int steps = quick ? 5 : 6;
    sn_progress(dev->config, &stamp, 0, 0, steps, what, dev->info.name);
    /* Many short runs of the small product: on a busy machine one of them
     * more likely runs undisturbed. */
    p->gemm_small_flops = gemm_speed(dev, 64, quick ? 0 : 0.02, quick ? 3 : 20);
    sn_progress(dev->config, &stamp, 0, 1, steps, what, dev->info.name);
    p->gemm_flops =
        quick ? p->gemm_small_flops : gemm_speed(dev, 384, 0.05, 3);
    sn_progress(dev->config, &stamp, 0, 2, steps, what, dev->info.name);
    p->launch_s = launch_cost(dev, quick ? 3 : 20);
    sn_progress(dev->config, &stamp, 0, 3, steps, what, dev->info.name);
    p->h2d_bps = bandwidth(dev, 0, quick ? 1 : 4,
                           quick ? QUICK_COPY_BYTES : COPY_BYTES);
    sn_progress(dev->config, &stamp, 0, 4, steps, what, dev->info.name);
    p->d2h_bps = bandwidth(dev, 1, quick ? 1 : 4,
                           quick ? QUICK_COPY_BYTES : COPY_BYTES);
    /* The quick check leaves the read speed out (a 32 MiB weight is more
     * than a few milliseconds on a slow device): the lowest figure, which
     * never beats a cached one. */
    if (!quick) {
        sn_progress(dev->config, &stamp, 0, 5, steps, what, dev->info.name);
        p->read_bps = read_speed(dev, 3);
    }
    sn_progress(dev->config, &stamp, 1, steps, steps, what, dev->info.name);
    sn_bind_thread(dev, 0);
    if (p->gemm_flops <= 0)
        p->gemm_flops = 1e9;
    if (p->gemm_small_flops <= 0)
        p->gemm_small_flops = p->gemm_flops;
    /* No device runs the large product slower than the small one; on a
     * busy machine its fewer, longer runs are the likelier to be slowed. */
    if (!quick && p->gemm_flops < p->gemm_small_flops)
        p->gemm_flops = p->gemm_small_flops;
    for (size_t i = 0; i < NFIELDS; i++) {
        double *v = fld(p, i);
        if (!(*v >= fields[i].lo))
            *v = fields[i].lo;
        if (*v > fields[i].hi)
            *v = fields[i].hi;
    }
}

static void log_profile(const sn_device *dev, const sn_profile *p)
{
    sn_log(SHARDNET_LOG_INFO,
           "profile of %s: GEMM %.1f GFLOP/s (64^3: %.1f), launch %.1f "
           "us, host->device %.2f GB/s, device->host %.2f GB/s, weights "
           "read by a one-row product %.2f GB/s",
           dev->info.name, p->gemm_flops * 1e-9, p->gemm_small_flops * 1e-9,
           p->launch_s * 1e6, p->h2d_bps * 1e-9, p->d2h_bps * 1e-9,
           p->read_bps * 1e-9);
}

/* The cache key: what makes a profile this device's (no spaces). */
static void profile_key(const sn_device *dev, char *key, size_t cap)
{
    const shardnet_device_info *i = &dev->info;
    const char *blas = getenv("OPENBLAS_CORETYPE");
    snprintf(key, cap, "%s|%s|%s|%s|%u|%s|%s|%s", i->name, dev->ops->kind,
             i->model, i->driver, i->compute_units, i->cpuset, PACKAGE_VERSION,
             blas ? blas : "");
    for (char *c = key; *c; c++)
        if ((unsigned char)*c <= ' ' || *c == 0x7f)
            *c = '_'; /* what a cache line's key may not hold */
}

/* --- the cache file ---------------------------------------------------------
 *
 * A text file: the header line, then one line per key,
 *     KEY<TAB>gemm_flops gemm_small_flops launch_s h2d_bps d2h_bps read_bps
 * (format 1, profiles-1.txt, had no read_bps: it is left as it is).  It is
 * only ever replaced whole (a temporary file renamed over it), one entry per
 * key.  What is read is checked: a file that is not a regular file, is
 * larger than any cache (MAX_FILE_BYTES), holds a NUL byte or does not begin
 * with the header or an entry is not a profile cache and is ignored as a
 * whole; a line whose key or figures are damaged (a figure not a number,
 * not finite or outside its field's range) is ignored.  Each with a
 * warning naming the file and what is wrong, and the devices concerned are
 * measured again and written cleanly.
 */
#define PROFILE_HEADER "# shardnet device profiles, format 2"
#define MAX_FILE_BYTES ((off_t)1 << 20)
#define MAX_ENTRIES 256
#define KEY_MAX 512
#define LINE_WARNINGS 3

typedef struct entry {
    char key[KEY_MAX];
    sn_profile p;
} entry;

/* Where warnings about one read go: to the log when warn, once a file. */
typedef struct reader {
    const char *path;
    int warn, said;
} reader;

static void say(reader *r, const char *fmt, ...) SN_PRINTF(2, 3);
static void say(reader *r, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    r->said = 1;
    if (!r->warn)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sn_log(SHARDNET_LOG_WARN, "profile cache %s: %s", r->path, msg);
}

/* One line into *e; 0, or -1 with the reason in why. */
static int parse_entry(char *line, entry *e, char *why, size_t cap)
{
    char *tab = strchr(line, '\t'), *s;
    size_t klen;
    memset(e, 0, sizeof *e);
    if (!tab) {
        snprintf(why, cap, "no tab between a key and its figures");
        return -1;
    }
    klen = (size_t)(tab - line);
    if (!klen || klen >= KEY_MAX) {
        snprintf(why, cap, "a key of %zu characters (1 to %d)", klen,
                 KEY_MAX - 1);
        return -1;
    }
    for (size_t k = 0; k < klen; k++)
        if ((unsigned char)line[k] <= ' ' || line[k] == 0x7f) {
            snprintf(why, cap, "character %zu of the key is a control "
                               "character or a space", k + 1);
            return -1;
        }
    memcpy(e->key, line, klen);
    s = tab + 1;
    for (size_t i = 0; i < NFIELDS; i++) {
        char *end;
        while (*s == ' ' || *s == '\t')
            s++;
        double v = strtod(s, &end);
        size_t tok = strcspn(s, " \t");
        if (end == s || (*end && *end != ' ' && *end != '\t')) {
            if (!*s)
                snprintf(why, cap, "field %s is missing", fields[i].name);
            else
                snprintf(why, cap, "field %s: '%.*s' is not a number",
                         fields[i].name, tok > 40 ? 40 : (int)tok, s);
            return -1;
        }
        if (!isfinite(v)) {
            snprintf(why, cap, "field %s: %g is not a finite number",
                     fields[i].name, v);
            return -1;
        }
        if (v < fields[i].lo || v > fields[i].hi) {
            snprintf(why, cap, "field %s: %g is outside the range a device "
                               "can have (%g to %g)",
                     fields[i].name, v, fields[i].lo, fields[i].hi);
            return -1;
        }
        *fld(&e->p, i) = v;
        s = end;
    }
    while (*s == ' ' || *s == '\t')
        s++;
    if (*s) {
        snprintf(why, cap, "text after the %zu figures", NFIELDS);
        return -1;
    }
    return 0;
}

/*
 * Every valid entry of the cache file at path: *out (malloc'ed, room for
 * MAX_ENTRIES; NULL when there is none), *nout of them.  A key found
 * twice (files of earlier versions appended) keeps the best of each
 * figure.  A missing file is an empty cache.
 */
static void load_file(reader *r, entry **out, size_t *nout)
{
    char *buf = NULL, why[256];
    size_t got = 0, lineno = 0, bad = 0;
    struct stat sb;
    int fd;
    *out = NULL;
    *nout = 0;
    /* A FIFO put in the cache's place must not block: see core/file.h. */
    fd = sn_open_regular(r->path, O_NOCTTY, &sb);
    if (fd == SN_NOT_REGULAR) {
        say(r, "not a regular file: ignored");
        return;
    }
    if (fd < 0) {
        if (errno != ENOENT)
            say(r, "cannot be opened (%s): ignored", strerror(errno));
        return;
    }
    if (sb.st_size > MAX_FILE_BYTES) {
        say(r, "%lld bytes, more than a profile cache holds (at most %lld): "
               "not a profile cache, ignored",
            (long long)sb.st_size, (long long)MAX_FILE_BYTES);
        goto out;
    }
    if (!(buf = malloc((size_t)sb.st_size + 1)) ||
        !(*out = malloc(MAX_ENTRIES * sizeof **out))) {
        say(r, "no memory to read it: ignored");
        goto out;
    }
    while (got < (size_t)sb.st_size) {
        ssize_t k = read(fd, buf + got, (size_t)sb.st_size - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            say(r, "read failed (%s): ignored", strerror(errno));
            goto out;
        }
        if (k == 0)
            break;
        got += (size_t)k;
    }
    buf[got] = '\0';
    if (memchr(buf, '\0', got)) {
        say(r, "binary data (a NUL byte at offset %zu): not a profile "
               "cache, ignored",
            (size_t)((char *)memchr(buf, '\0', got) - buf));
        goto out;
    }
    for (char *line = buf, *next; *line; line = next) {
        entry e;
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        else
            next = line + strlen(line);
        lineno++;
        size_t len = strlen(line);
        if (len && line[len - 1] == '\r')
            line[--len] = '\0';
        if (lineno == 1 && !strcmp(line, PROFILE_HEADER))
            continue;
        if (lineno == 1 && (line[0] == '#' || parse_entry(line, &e, why,
                                                          sizeof why))) {
            say(r, "line 1 is neither '%s' nor a profile entry: not a "
                   "profile cache, ignored",
                PROFILE_HEADER);
            *nout = 0;
            goto out;
        }
        if (!len || line[0] == '#')
            continue;
        if (lineno > 1 && parse_entry(line, &e, why, sizeof why)) {
            if (++bad <= LINE_WARNINGS)
                say(r, "line %zu: %s: entry ignored", lineno, why);
            continue;
        }
        size_t k = 0;
        while (k < *nout && strcmp((*out)[k].key, e.key))
            k++;
        if (k < *nout)
            best_of(&(*out)[k].p, &e.p);
        else if (*nout < MAX_ENTRIES)
            (*out)[(*nout)++] = e;
    }
    if (bad > LINE_WARNINGS)
        say(r, "%zu more damaged lines ignored", bad - LINE_WARNINGS);
out:
    free(buf);
    close(fd);
    if (!*nout) {
        free(*out);
        *out = NULL;
    }
}

/* The folder's warnings, once per process and file: every device's lookup
 * reads the file again. */
static char warned_path[4200];

/* key's profile from the cache file at path: 1 if found; *damaged: the
 * file had something to warn about. */
static int read_cached(const char *path, const char *key, sn_profile *p,
                       int *damaged)
{
    reader r = {path, strcmp(warned_path, path) != 0, 0};
    entry *all;
    size_t nall;
    int found = 0;
    load_file(&r, &all, &nall);
    if (r.said)
        snprintf(warned_path, sizeof warned_path, "%s", path);
    *damaged = r.said;
    for (size_t i = 0; i < nall && !found; i++)
        if (!strcmp(all[i].key, key)) {
            *p = all[i].p;
            found = 1;
        }
    free(all);
    return found;
}

/*
 * key's entry becomes p; every other valid entry is kept, damaged ones
 * are dropped.  The file is written whole to a temporary name and renamed
 * over the cache (a reader sees the old file or the new one, never a part),
 * under a lock on a file beside it so that the processes of a job sharing
 * the folder do not drop each other's entries.
 */
static void save_entry(const char *path, const char *key, const sn_profile *p)
{
    char lockp[4300], tmp[4300];
    reader r = {path, 0, 0};
    entry *all = NULL;
    size_t nall = 0, k = 0;
    FILE *f = NULL;
    int lfd, fd = -1, ok = 0, made = 0;
    snprintf(lockp, sizeof lockp, "%s.lock", path);
    snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
    lfd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0600);
    if (lfd >= 0)
        while (flock(lfd, LOCK_EX) != 0 && errno == EINTR)
            ;
    load_file(&r, &all, &nall);
    if (!all && !(all = malloc(MAX_ENTRIES * sizeof *all)))
        goto out;
    while (k < nall && strcmp(all[k].key, key))
        k++;
    if (k == nall) {
        if (nall == MAX_ENTRIES)
            k = --nall; /* full: the last entry gives way */
        nall++;
        snprintf(all[k].key, sizeof all[k].key, "%s", key);
    }
    all[k].p = *p;
    if ((fd = mkstemp(tmp)) < 0)
        goto out;
    made = 1;
    if (!(f = fdopen(fd, "w")))
        goto out;
    fd = -1;
    fprintf(f, "%s\n", PROFILE_HEADER);
    for (size_t i = 0; i < nall; i++) {
        fprintf(f, "%s\t", all[i].key);
        for (size_t j = 0; j < NFIELDS; j++)
            fprintf(f, "%.9g%c", fget(&all[i].p, j),
                    j + 1 < NFIELDS ? ' ' : '\n');
    }
    ok = fflush(f) == 0 && !ferror(f);
    ok = fclose(f) == 0 && ok;
    f = NULL;
    ok = ok && rename(tmp, path) == 0;
out:
    if (!ok)
        sn_log(SHARDNET_LOG_WARN,
               "profile cache %s: cannot be rewritten (%s); the profile of "
               "this process is not kept",
               path, strerror(errno));
    if (f)
        fclose(f);
    if (fd >= 0)
        close(fd);
    if (!ok && made)
        unlink(tmp);
    free(all);
    if (lfd >= 0)
        close(lfd); /* drops the lock */
}

/* --- the profiles of this process ----------------------------------------- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    const sn_device *dev;
    char key[KEY_MAX];
    sn_profile p;
} cache[MAX_PROFILES];
static size_t n;
static sn_profile fallback;

/* Another process's device, before its profile came: plain guesses, so
 * that nothing divides by zero. */
static const sn_profile unknown = {.gemm_flops = 1e10,
                                   .gemm_small_flops = 1e9,
                                   .launch_s = 1e-5,
                                   .h2d_bps = 1e9,
                                   .d2h_bps = 1e9,
                                   .read_bps = 1e10};

/* The entry of dev in this process, or NULL; under the lock. */
static sn_profile *find(const sn_device *dev, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (cache[i].dev == dev && !strcmp(cache[i].key, key))
            return &cache[i].p;
    return NULL;
}

/* dev's entry in this process becomes p (a new one when it had none);
 * under the lock. */
static sn_profile *keep(const sn_device *dev, const char *key,
                        const sn_profile *p)
{
    sn_profile *q = find(dev, key);
    if (!q && n < MAX_PROFILES) {
        cache[n].dev = dev;
        snprintf(cache[n].key, sizeof cache[n].key, "%s", key);
        q = &cache[n++].p;
    }
    if (!q)
        q = &fallback;
    *q = *p;
    return q;
}

void sn_profile_remember(sn_device *dev, const sn_profile *p)
{
    char key[KEY_MAX];
    profile_key(dev, key, sizeof key);
    pthread_mutex_lock(&lock);
    keep(dev, key, p);
    pthread_mutex_unlock(&lock);
}

/* The cache file's path in path, in the folder of dev's context; 0 when
 * there is no folder to use. */
static int cache_path(const sn_device *dev, char *path, size_t cap)
{
    char dir[4096];
    if (!sn_cache_dir(dev->config, dir, sizeof dir))
        return 0;
    return snprintf(path, cap, "%s/%s", dir, PROFILE_FILE) < (int)cap;
}

/*
 * A profile read from the cache, checked against a quick measurement now.
 * A busy machine only ever makes a measurement slower, so a figure the
 * device beats now by more than HEAL_FACTOR was taken under load (or
 * damaged): the device is measured again, each figure becomes the best of
 * the cached, the quick and the new measurement, and the cache is
 * rewritten.  A figure slower now is kept: the machine may be busy now.
 * The quick check times a 64^3 product only; a device's 384^3 product is
 * never slower than that, so the large product's figure is compared with it.
 * It leaves the one-row product's read speed out (its lowest figure).
 */
#define HEAL_FACTOR 5.0
#define LAUNCH_FLOOR_S 1e-5

static int check_cached(sn_device *dev, const char *path, const char *key,
                        sn_profile *p)
{
    sn_profile q, m;
    size_t i = 0;
    measure(dev, &q, 1);
    /* Launch costs of a few microseconds vary by more than the factor
     * from one measurement to the next, and that little steers no plan. */
    sn_profile qf = q;
    if (qf.launch_s < LAUNCH_FLOOR_S)
        qf.launch_s = LAUNCH_FLOOR_S;
    while (i < NFIELDS && !beats(&qf, p, i, HEAL_FACTOR))
        i++;
    if (i == NFIELDS)
        return 0;
    sn_log(SHARDNET_LOG_WARN,
           "profile cache %s: %s of %s is %g there but %g now: measured "
           "under load or damaged; measuring %s again",
           path, fields[i].name, dev->info.name, fget(p, i), fget(&q, i),
           dev->info.name);
    measure(dev, &m, 0);
    q.gemm_flops = m.gemm_flops; /* the quick one is of the small product */
    best_of(&m, &q);
    best_of(&m, p);
    *p = m;
    save_entry(path, key, p);
    log_profile(dev, p);
    return 1;
}

const sn_profile *sn_device_profile(sn_device *dev)
{
    char key[KEY_MAX], path[4200];
    const sn_profile *out;
    sn_profile p;

    profile_key(dev, key, sizeof key);
    pthread_mutex_lock(&lock);
    out = find(dev, key);
    if (out || dev->remote) {
        pthread_mutex_unlock(&lock);
        return out ? out : &unknown;
    }
    /* Measured under the lock: two devices timed at once would each see
     * the other's load. */
    int have_path = cache_path(dev, path, sizeof path), damaged = 0;
    if (have_path && !sn_config_or_env(dev->config)->reprofile &&
        read_cached(path, key, &p, &damaged)) {
        p.from_disk = 1;
        /* A damaged file is written cleanly at once (when the check does
         * not): a warning once, not in every process. */
        if (!check_cached(dev, path, key, &p) && damaged)
            save_entry(path, key, &p);
    } else {
        measure(dev, &p, 0);
        if (have_path)
            save_entry(path, key, &p);
        log_profile(dev, &p);
    }
    out = keep(dev, key, &p);
    pthread_mutex_unlock(&lock);
    return out;
}

/* A run this far from its plan's estimate, either way, and by more than
 * RUN_MARGIN_S (small runs are mostly fixed costs the estimates leave
 * out), has the devices measured again (see profile.h). */
#define RUN_FACTOR 10.0
#define RUN_MARGIN_S 1e-3

void sn_profiles_check_run(sn_device *const *devs, size_t ndev,
                           double estimate_s, double measured_s)
{
    char key[KEY_MAX], path[4200];
    int have_path;
    if (!(estimate_s > 0) || !(measured_s > 0) || estimate_s >= 1e300 ||
        fabs(measured_s - estimate_s) <= RUN_MARGIN_S ||
        (measured_s <= RUN_FACTOR * estimate_s &&
         measured_s * RUN_FACTOR >= estimate_s))
        return;
    pthread_mutex_lock(&lock);
    have_path = ndev && cache_path(devs[0], path, sizeof path);
    for (size_t d = 0; d < ndev; d++) {
        size_t e = 0;
        while (e < d && devs[e] != devs[d])
            e++;
        if (e < d || devs[d]->remote)
            continue; /* listed twice, or measured on its own process */
        sn_profile m;
        sn_log(SHARDNET_LOG_WARN,
               "a run took %.3f ms where the plan estimated %.3f ms: "
               "measuring the profile of %s again",
               measured_s * 1e3, estimate_s * 1e3, devs[d]->info.name);
        measure(devs[d], &m, 0);
        profile_key(devs[d], key, sizeof key);
        keep(devs[d], key, &m);
        if (have_path)
            save_entry(path, key, &m);
        log_profile(devs[d], &m);
    }
    pthread_mutex_unlock(&lock);
}

void sn_profiles_forget(void)
{
    pthread_mutex_lock(&lock);
    n = 0;
    warned_path[0] = '\0';
    pthread_mutex_unlock(&lock);
}

double sn_device_speed(sn_device *dev)
{
    return sn_device_profile(dev)->gemm_flops;
}

double sn_profile_staging_bw(const sn_profile *p)
{
    return p->h2d_bps < p->d2h_bps ? p->h2d_bps : p->d2h_bps;
}

shardnet_status sn_profiles_share(sn_device *const *devs, size_t ndev)
{
    if (sn_world_processes() == 1)
        return SHARDNET_OK;
    for (size_t d = 0; d < ndev; d++) {
        sn_profile p = {0};
        shardnet_status st;
        if (!devs[d]->remote)
            p = *sn_device_profile(devs[d]);
        if ((st = sn_world_bcast(devs[d]->process, &p, sizeof p)) !=
            SHARDNET_OK)
            return st;
        if (devs[d]->remote)
            sn_profile_remember(devs[d], &p);
    }
    return SHARDNET_OK;
}
