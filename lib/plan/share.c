/*
 * What devices share, and what running them at once costs each (share.h).
 *
 * Sharing is read from what discovery found: a CPU device's cores (its
 * cpuset, from hwloc) and NUMA node, a partition's whole device, an
 * OpenCL device's type (a CPU device computes on the host's cores: PoCL's
 * threads go wherever the system puts them) and whether its memory is
 * the host's.  What sharing costs is not guessed from that: every device
 * of a group that shares runs products in a loop, alone, then all at
 * once, for three rounds, and each keeps the ratio of its best rates.  On this project's
 * 2-core host a CPU device and PoCL's device on the same cores keep about
 * half of their speeds or less each; two simulated one-core packages,
 * which share only memory, keep most of theirs.
 */
#include <config.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/world.h"
#include "core/trace.h"
#include "plan/share.h"

#define MAX_PUS 1024
#define MAX_GROUP 16
/* The product each device repeats, and for how long. */
#define LOOP_N 256
#define ALONE_S 0.02
#define TOGETHER_S 0.03
#define ROUNDS 3

typedef struct pus {
    unsigned char bit[MAX_PUS / 8];
    int any;
} pus;

/* A cpuset list ("0-3,8") as bits; any is 0 for an empty or unreadable
 * one. */
static pus parse_cpuset(const char *list)
{
    pus p = {0};
    const char *s = list;
    while (*s) {
        char *end;
        long a = strtol(s, &end, 10), b = a;
        if (end == s || a < 0)
            return (pus){0};
        s = end;
        if (*s == '-') {
            b = strtol(s + 1, &end, 10);
            if (end == s + 1 || b < a)
                return (pus){0};
            s = end;
        }
        for (long i = a; i <= b && i < MAX_PUS; i++) {
            p.bit[i / 8] |= (unsigned char)(1u << (i % 8));
            p.any = 1;
        }
        if (*s == ',')
            s++;
        else if (*s)
            return (pus){0};
    }
    return p;
}

static int pus_meet(const pus *a, const pus *b)
{
    for (size_t i = 0; i < sizeof a->bit; i++)
        if (a->bit[i] & b->bit[i])
            return 1;
    return 0;
}

static const sn_device *root_of(const sn_device *d)
{
    return d->whole ? d->whole : d;
}

sn_sharing sn_devices_sharing(const sn_device *a, const sn_device *b)
{
    int cpu_a = a->info.kind == SHARDNET_DEVICE_CPU,
        cpu_b = b->info.kind == SHARDNET_DEVICE_CPU;
    if (a == b || a->process != b->process || a->remote || b->remote)
        return SN_SHARES_NOTHING;
    if ((a->host_cores && (cpu_b || b->host_cores)) ||
        (b->host_cores && cpu_a))
        return SN_SHARES_CORES;
    if (cpu_a && cpu_b) {
        pus pa = parse_cpuset(a->info.cpuset), pb = parse_cpuset(b->info.cpuset);
        if (pa.any && pb.any && pus_meet(&pa, &pb))
            return SN_SHARES_CORES;
        if (root_of(a) == root_of(b) ||
            (a->info.numa_node >= 0 && a->info.numa_node == b->info.numa_node))
            return SN_SHARES_MEMORY;
        return SN_SHARES_NOTHING;
    }
    if (a->whole && root_of(a) == root_of(b))
        return SN_SHARES_CORES;
    if ((cpu_a && b->info.host_unified) || (cpu_b && a->info.host_unified))
        return SN_SHARES_MEMORY;
    return SN_SHARES_NOTHING;
}

/* --- measuring ------------------------------------------------------------ */

/* One device's product, ready to launch. */
typedef struct looper {
    sn_device *dev;
    sn_buffer *a, *b, *c;
    sn_kernel_desc desc;
    double rate; /* products per second */
    int ok;
    atomic_int *go;
    double until_s; /* how long to loop once go is set */
} looper;

static shardnet_status looper_make(looper *l, sn_device *dev)
{
    const size_t n = LOOP_N, bytes = n * n * sizeof(float);
    float *x = malloc(bytes);
    shardnet_status st;
    memset(l, 0, sizeof *l);
    l->dev = dev;
    if (!x)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "measuring contention");
    for (size_t i = 0; i < n * n; i++)
        x[i] = (float)(i % 13) * 0.01f;
    if ((st = sn_buffer_alloc(dev, bytes, &l->a)) == SHARDNET_OK &&
        (st = sn_buffer_alloc(dev, bytes, &l->b)) == SHARDNET_OK &&
        (st = sn_buffer_alloc(dev, bytes, &l->c)) == SHARDNET_OK &&
        (st = sn_buffer_write(l->a, 0, x, bytes)) == SHARDNET_OK)
        st = sn_buffer_write(l->b, 0, x, bytes);
    free(x);
    l->desc.gemm = (sn_gemm_desc){.m = n, .n = n, .k = n, .alpha = 1,
                                  .lda = n, .ldb = n, .ldc = n, .batch = 1,
                                  .a = {l->a, 0}, .b = {l->b, 0},
                                  .c = {l->c, 0}};
    return st;
}

static void looper_free(looper *l)
{
    sn_buffer_free(l->a);
    sn_buffer_free(l->b);
    sn_buffer_free(l->c);
}

/* Products launched and waited for until `seconds` have passed: the
 * rate, 0 when one fails. */
static double loop_rate(looper *l, double seconds)
{
    double t0 = sn_trace_now(), t;
    size_t runs = 0;
    do {
        if (sn_launch(l->dev, SN_KERNEL_GEMM, &l->desc) ||
            sn_synchronize(l->dev)) {
            sn_error_clear();
            return 0;
        }
        runs++;
    } while ((t = sn_trace_now() - t0) < seconds);
    return (double)runs / t;
}

static void *loop_main(void *arg)
{
    looper *l = arg;
    sn_bind_thread(l->dev, 1);
    loop_rate(l, 0.002); /* warm: kernels built, caches filled */
    atomic_fetch_add(l->go, 1);
    while (atomic_load(l->go) >= 0 && atomic_load(l->go) < 1000)
        sched_yield();
    l->rate = loop_rate(l, l->until_s);
    sn_bind_thread(l->dev, 0);
    return NULL;
}

/* Every device of l[0..k) looping at once, each on a thread bound to its
 * device, all warm before any is timed: their rates in l[i].rate. */
static shardnet_status together(looper *l, size_t k)
{
    pthread_t th[MAX_GROUP];
    atomic_int go = 0;
    shardnet_status st = SHARDNET_OK;
    size_t started = 0;
    for (size_t i = 0; i < k && st == SHARDNET_OK; i++) {
        l[i].go = &go;
        l[i].until_s = TOGETHER_S;
        l[i].rate = 0;
        if (pthread_create(&th[i], NULL, loop_main, &l[i]))
            st = sn_error(SHARDNET_INTERNAL, "measuring contention: threads");
        else
            started++;
    }
    while (st == SHARDNET_OK && atomic_load(&go) < (int)k)
        sched_yield();
    atomic_store(&go, st == SHARDNET_OK ? 1000 : -1);
    for (size_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    return st;
}

/* keep[i] of group[0..k), measured: rounds of each device alone, then
 * all at once, the best rate of each kept (other work on the machine
 * only ever slows a round down, as with the profiles). */
static shardnet_status measure_group(sn_device *const *group, size_t k,
                                     double *keep)
{
    looper l[MAX_GROUP];
    double alone[MAX_GROUP] = {0}, both[MAX_GROUP] = {0};
    shardnet_status st = SHARDNET_OK;
    size_t made = 0;
    for (; made < k && st == SHARDNET_OK; made++)
        st = looper_make(&l[made], group[made]);
    for (int round = 0; round < ROUNDS && st == SHARDNET_OK; round++) {
        for (size_t i = 0; i < k; i++) {
            sn_bind_thread(group[i], 1);
            loop_rate(&l[i], 0.002);
            double r = loop_rate(&l[i], ALONE_S);
            sn_bind_thread(group[i], 0);
            if (r > alone[i])
                alone[i] = r;
        }
        if ((st = together(l, k)) != SHARDNET_OK)
            break;
        for (size_t i = 0; i < k; i++)
            if (l[i].rate > both[i])
                both[i] = l[i].rate;
    }
    for (size_t i = 0; i < k && st == SHARDNET_OK; i++) {
        double r = alone[i] > 0 ? both[i] / alone[i] : 1;
        keep[i] = r < 0.02 ? 0.02 : r > 1 ? 1 : r;
    }
    for (size_t i = 0; i < made; i++)
        looper_free(&l[i]);
    return st;
}

/* Groups measured in this process, by their devices. */
typedef struct kept {
    const sn_device *dev[MAX_GROUP];
    size_t k;
    double keep[MAX_GROUP];
} kept;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static kept *known;
static size_t nknown;

static const kept *find(sn_device *const *group, size_t k)
{
    for (size_t i = 0; i < nknown; i++)
        if (known[i].k == k &&
            !memcmp(known[i].dev, group, k * sizeof group[0]))
            return &known[i];
    return NULL;
}

static const char *what(sn_sharing s)
{
    return s == SN_SHARES_CORES ? "cores" : "memory";
}

shardnet_status sn_devices_contention(sn_device *const *devs, size_t n,
                                      int job, double *keep, char *report,
                                      size_t cap, size_t *len)
{
    size_t comp[64];
    shardnet_status st = SHARDNET_OK;
    if (n > 64)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "contention: 64 devices");
    for (size_t d = 0; d < n; d++) {
        keep[d] = 1;
        comp[d] = d;
    }
    /* Groups: devices joined by what they share. */
    for (size_t d = 0; d < n; d++)
        for (size_t e = d + 1; e < n; e++)
            if (sn_devices_sharing(devs[d], devs[e]) != SN_SHARES_NOTHING) {
                size_t from = comp[e], to = comp[d];
                for (size_t x = 0; x < n; x++)
                    if (comp[x] == from)
                        comp[x] = to;
            }
    pthread_mutex_lock(&lock);
    for (size_t r = 0; r < n && st == SHARDNET_OK; r++) {
        sn_device *group[MAX_GROUP];
        size_t at[MAX_GROUP], k = 0;
        for (size_t d = 0; d < n; d++)
            if (comp[d] == r && k < MAX_GROUP) {
                at[k] = d;
                group[k++] = devs[d];
            }
        if (k < 2)
            continue;
        const kept *m = find(group, k);
        if (!m) {
            kept *grown = realloc(known, (nknown + 1) * sizeof *known);
            if (!grown) {
                st = sn_error(SHARDNET_OUT_OF_MEMORY, "contention");
                break;
            }
            known = grown;
            kept *e = &known[nknown];
            memset(e, 0, sizeof *e);
            memcpy(e->dev, group, k * sizeof group[0]);
            e->k = k;
            if ((st = measure_group(group, k, e->keep)) != SHARDNET_OK)
                break;
            m = &known[nknown++];
            for (size_t i = 0; i < k; i++)
                sn_log(SHARDNET_LOG_INFO,
                       "contention: %s keeps %.0f%% of its speed while the "
                       "devices it shares with compute too",
                       group[i]->info.name, 100 * m->keep[i]);
        }
        for (size_t i = 0; i < k; i++)
            keep[at[i]] = m->keep[i];
        if (report && *len < cap) {
            *len += (size_t)snprintf(report + *len, cap - *len, "sharing:");
            for (size_t i = 0; i < k && *len < cap; i++)
                for (size_t j = i + 1; j < k && *len < cap; j++) {
                    sn_sharing s = sn_devices_sharing(group[i], group[j]);
                    if (s != SN_SHARES_NOTHING)
                        *len += (size_t)snprintf(
                            report + *len, cap - *len, " %s and %s share %s;",
                            group[i]->info.name, group[j]->info.name,
                            what(s));
                }
            for (size_t i = 0; i < k && *len < cap; i++)
                *len += (size_t)snprintf(report + *len, cap - *len,
                                         "%s %s keeps %.0f%%",
                                         i ? "," : " measured at once:",
                                         group[i]->info.name,
                                         100 * m->keep[i]);
            if (*len < cap)
                *len += (size_t)snprintf(report + *len, cap - *len,
                                         " of its speed\n");
        }
    }
    pthread_mutex_unlock(&lock);
    /* In a job, each device's figure is its own process's. */
    for (size_t d = 0; d < n && st == SHARDNET_OK && job &&
                       sn_world_processes() > 1;
         d++)
        st = sn_world_bcast(devs[d]->process, &keep[d], sizeof keep[d]);
    return st;
}
