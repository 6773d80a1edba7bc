/* Device profiles: measured once, cached on disk.  See profile.h. */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "error.h"
#include "profile.h"
#include "world.h"

#define PROFILE_FILE "profiles-1.txt"
#define MAX_PROFILES 64

/* mkdir -p; 0 on success (the folder exists afterwards). */
static int make_dirs(char *path)
{
    struct stat sb;
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST) {
            *p = '/';
            return -1;
        }
        *p = '/';
    }
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return -1;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) ? 0 : -1;
}

/* The cache folder, created if needed; 0 when there is none to use. */
int sn_cache_dir(char *dir, size_t cap)
{
    const char *env = getenv("SHARDNET_CACHE_DIR");
    int w;
    if (env && *env) {
        w = snprintf(dir, cap, "%s", env);
    } else if ((env = getenv("XDG_CACHE_HOME")) && *env) {
        w = snprintf(dir, cap, "%s/shardnet", env);
    } else if ((env = getenv("HOME")) && *env) {
        w = snprintf(dir, cap, "%s/.cache/shardnet", env);
    } else {
        return 0;
    }
    if (w < 0 || (size_t)w >= cap)
        return 0;
    if (make_dirs(dir) != 0) {
        sn_log(SHARDNET_LOG_DEBUG, "cache folder %s unusable: %s", dir,
               strerror(errno));
        return 0;
    }
    return 1;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Best flops/s of an n^3 product, over runs until `budget` seconds have
 * passed (at least 3 timed runs after 2 warm-ups); 0 on failure. */
static double gemm_speed(sn_device *dev, size_t n, double budget)
{
    sn_buffer *a = NULL, *b = NULL, *c = NULL;
    double best = 1e30;
    float *x = malloc(n * n * sizeof *x);
    if (!x)
        return 0;
    for (size_t i = 0; i < n * n; i++)
        x[i] = (float)(i % 17) * 0.01f;
    if (sn_buffer_alloc(dev, n * n * 4, &a) ||
        sn_buffer_alloc(dev, n * n * 4, &b) ||
        sn_buffer_alloc(dev, n * n * 4, &c) ||
        sn_buffer_write(a, 0, x, n * n * 4) ||
        sn_buffer_write(b, 0, x, n * n * 4))
        goto out;
    sn_gemm_desc d = {.m = n, .n = n, .k = n, .alpha = 1, .lda = n,
                      .ldb = n, .ldc = n, .batch = 1, .a = {a, 0},
                      .b = {b, 0}, .c = {c, 0}};
    double start = now_s();
    for (int r = 0; r < 1000; r++) {
        double t0 = now_s();
        if (sn_gemm(dev, &d) || sn_synchronize(dev))
            goto out;
        double t = now_s() - t0;
        if (r >= 2 && t < best)
            best = t;
        if (r >= 4 && now_s() - start > budget)
            break;
    }
out:
    sn_error_clear();
    sn_buffer_free(a);
    sn_buffer_free(b);
    sn_buffer_free(c);
    free(x);
    return best < 1e30 ? 2.0 * (double)(n * n * n) / best : 0;
}

/* Seconds of one tiny kernel launched and waited for (best of 20). */
static double launch_cost(sn_device *dev)
{
    sn_buffer *a = NULL;
    double best = 1e30;
    if (sn_buffer_alloc(dev, 64, &a) == SHARDNET_OK) {
        sn_unary_desc u = {.op = SN_UNARY_RELU, .n = 16, .x = {a, 0},
                           .y = {a, 0}};
        for (int r = 0; r < 22; r++) {
            double t0 = now_s();
            if (sn_unary(dev, &u) || sn_synchronize(dev))
                break;
            double t = now_s() - t0;
            if (r >= 2 && t < best)
                best = t;
        }
    }
    sn_error_clear();
    sn_buffer_free(a);
    return best < 1e30 ? best : 1e-4;
}

/* Bytes/s of writing (dir 0) or reading (dir 1) an 8 MiB buffer. */
static double bandwidth(sn_device *dev, int dir)
{
    enum { BYTES = 8 << 20 };
    sn_buffer *a = NULL;
    double best = 1e30;
    char *h = malloc(BYTES);
    if (h && sn_buffer_alloc(dev, BYTES, &a) == SHARDNET_OK) {
        memset(h, 1, BYTES);
        for (int r = 0; r < 5; r++) {
            double t0 = now_s();
            shardnet_status st = dir ? sn_buffer_read(a, 0, h, BYTES)
                                     : sn_buffer_write(a, 0, h, BYTES);
            if (st || sn_synchronize(dev))
                break;
            double t = now_s() - t0;
            if (r && t < best)
                best = t;
        }
    }
    sn_error_clear();
    sn_buffer_free(a);
    free(h);
    return best < 1e30 ? BYTES / best : 1e9;
}

static void measure(sn_device *dev, sn_profile *p)
{
    memset(p, 0, sizeof *p);
    /* Driven the way runs and splits drive it (a CPU device's kernels run
     * on this thread, its team pinned): queued to the device's worker while
     * this thread waited, a run could wait a scheduler tick for a core
     * (see tools/bench-steady.sh in the README). */
    sn_bind_thread(dev, 1);
    p->gemm_flops = gemm_speed(dev, 384, 0.05);
    p->gemm_small_flops = gemm_speed(dev, 64, 0.01);
    p->launch_s = launch_cost(dev);
    p->h2d_bps = bandwidth(dev, 0);
    p->d2h_bps = bandwidth(dev, 1);
    sn_bind_thread(dev, 0);
    if (p->gemm_flops <= 0)
        p->gemm_flops = 1e9;
    if (p->gemm_small_flops <= 0)
        p->gemm_small_flops = p->gemm_flops;
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
        if (*c == ' ' || *c == '\t' || *c == '\n')
            *c = '_';
}

static int read_cached(const char *path, const char *key, sn_profile *p)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    int found = 0;
    size_t klen = strlen(key);
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f)) {
        sn_profile q = {0};
        if (strncmp(line, key, klen) || line[klen] != '\t')
            continue;
        if (sscanf(line + klen + 1, "%lg %lg %lg %lg %lg", &q.gemm_flops,
                   &q.gemm_small_flops, &q.launch_s, &q.h2d_bps,
                   &q.d2h_bps) == 5 &&
            q.gemm_flops > 0 && q.gemm_small_flops > 0 && q.launch_s > 0 &&
            q.h2d_bps > 0 && q.d2h_bps > 0) {
            *p = q; /* the last good line wins */
            found = 1;
        }
    }
    fclose(f);
    return found;
}

static void write_cached(const char *path, const char *key,
                         const sn_profile *p)
{
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    fprintf(f, "%s\t%.6g %.6g %.6g %.6g %.6g\n", key, p->gemm_flops,
            p->gemm_small_flops, p->launch_s, p->h2d_bps, p->d2h_bps);
    fclose(f);
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    const sn_device *dev;
    char key[512];
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
                                   .d2h_bps = 1e9};

void sn_profile_remember(sn_device *dev, const sn_profile *p)
{
    char key[512];
    profile_key(dev, key, sizeof key);
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n; i++)
        if (cache[i].dev == dev && !strcmp(cache[i].key, key)) {
            cache[i].p = *p;
            pthread_mutex_unlock(&lock);
            return;
        }
    if (n < MAX_PROFILES) {
        cache[n].dev = dev;
        snprintf(cache[n].key, sizeof cache[n].key, "%s", key);
        cache[n++].p = *p;
    }
    pthread_mutex_unlock(&lock);
}

const sn_profile *sn_device_profile(sn_device *dev)
{
    char key[512], dir[4096], path[4200];
    const sn_profile *out = NULL;

    profile_key(dev, key, sizeof key);
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n && !out; i++)
        if (cache[i].dev == dev && !strcmp(cache[i].key, key))
            out = &cache[i].p;
    if (out || dev->remote) {
        pthread_mutex_unlock(&lock);
        return out ? out : &unknown;
    }
    /* Measured under the lock: two devices timed at once would each see
     * the other's load. */
    sn_profile p;
    const char *re = getenv("SHARDNET_REPROFILE");
    int have_dir = sn_cache_dir(dir, sizeof dir);
    if (have_dir)
        snprintf(path, sizeof path, "%s/%s", dir, PROFILE_FILE);
    if (have_dir && !(re && *re && strcmp(re, "0")) &&
        read_cached(path, key, &p)) {
        p.from_disk = 1;
    } else {
        measure(dev, &p);
        if (have_dir)
            write_cached(path, key, &p);
        sn_log(SHARDNET_LOG_INFO,
               "profile of %s: GEMM %.1f GFLOP/s (64^3: %.1f), launch %.1f "
               "us, host->device %.2f GB/s, device->host %.2f GB/s",
               dev->info.name, p.gemm_flops * 1e-9,
               p.gemm_small_flops * 1e-9, p.launch_s * 1e6, p.h2d_bps * 1e-9,
               p.d2h_bps * 1e-9);
    }
    if (n < MAX_PROFILES) {
        cache[n].dev = dev;
        snprintf(cache[n].key, sizeof cache[n].key, "%s", key);
        cache[n].p = p;
        out = &cache[n++].p;
    } else {
        fallback = p;
        out = &fallback;
    }
    pthread_mutex_unlock(&lock);
    return out;
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
