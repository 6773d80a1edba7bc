/*
 * All-reduce bandwidth between two devices, next to host memcpy.
 *
 * Prints, per message size, the median algorithm bandwidth (bytes of one
 * rank's buffer / time) in GB/s of: memcpy of that size on the host; an
 * all-reduce over cpu:0 + cpu:1 and over cl:0 + cl:1 with host-unified
 * devices mapped (zero-copy); and the same over cl:0 + cl:1 staged through
 * copies (no_map).  These run the staged engine (comm/collective.c) from
 * one thread.  "cpu split" is the path a tensor split over CPU devices
 * takes: the collective group's host-shared path (comm/shared.c), each
 * device's thread (bound to it, as a split binds it) calling its side and
 * reducing its share; rank 0's median time a call.  A pair whose devices
 * are absent prints "-".
 * Usage: bench_collectives [max_mib]   (default 64)
 */
#include <config.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "comm/collective.h"
#include "comm/group.h"
#include "bench_time.h"


#define MAX_REPS 50


static double bench_memcpy(size_t bytes)
{
    char *a = malloc(bytes), *b = malloc(bytes);
    double t[MAX_REPS], start = bench_now();
    int reps = 0;
    if (!a || !b) {
        free(a);
        free(b);
        return 0;
    }
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    while (reps < MAX_REPS && (reps < 5 || bench_now() - start < 0.3)) {
        double t0 = bench_now();
        memcpy(b, a, bytes);
        t[reps++] = bench_now() - t0;
        a[reps % bytes] ^= b[(reps * 7) % bytes]; /* keep the copy live */
    }
    double med = bench_median(t, reps);
    free(a);
    free(b);
    return bytes / med / 1e9;
}

/* GB/s of an all-reduce of `bytes` per rank over devs; 0 on failure. */
static double bench_allreduce(sn_device **devs, size_t bytes, int no_map)
{
    sn_comm_opts opts = {.no_map = no_map};
    sn_comm *comm = NULL;
    sn_view v[2] = {{0}};
    size_t count = bytes / sizeof(float);
    double t[MAX_REPS], start, med = 0;
    int reps = 0;
    float *init = calloc(count, sizeof(float));

    if (!init || sn_comm_create(devs, 2, &opts, &comm) != SHARDNET_OK)
        goto done;
    for (size_t i = 0; i < count; i++)
        init[i] = (float)(i % 97) * 0.25f;
    for (int r = 0; r < 2; r++)
        if (sn_buffer_alloc(devs[r], bytes, &v[r].buf) != SHARDNET_OK ||
            sn_buffer_write(v[r].buf, 0, init, bytes) != SHARDNET_OK)
            goto done;
    if (sn_allreduce(comm, v, count) != SHARDNET_OK) /* warm up */
        goto done;
    start = bench_now();
    while (reps < MAX_REPS && (reps < 5 || bench_now() - start < 0.3)) {
        double t0 = bench_now();
        if (sn_allreduce(comm, v, count) != SHARDNET_OK)
            goto done;
        t[reps++] = bench_now() - t0;
    }
    med = bytes / bench_median(t, reps) / 1e9;
done:
    if (!med)
        fprintf(stderr, "all-reduce on %s+%s: %s\n", devs[0]->info.name,
                devs[1]->info.name, shardnet_last_error());
    for (int r = 0; r < 2; r++)
        sn_buffer_free(v[r].buf);
    sn_comm_free(comm);
    free(init);
    return med;
}

/* One rank's thread of the group all-reduce: reps + 1 calls (the first a
 * warm-up), each timed. */
typedef struct rank_run {
    sn_group *g;
    sn_device *dev;
    size_t rank, count;
    sn_view v;
    int reps;
    double t[MAX_REPS];
    shardnet_status st;
} rank_run;

static void *rank_main(void *arg)
{
    rank_run *r = arg;
    sn_group_call call = {.kind = SN_GROUP_ALLREDUCE, .n = 2,
                          .counts = {r->count}, .send = r->v, .recv = r->v};
    sn_bind_thread(r->dev, 1);
    for (int k = -1; k < r->reps && r->st == SHARDNET_OK; k++) {
        double t0 = bench_now();
        r->st = sn_group_collective(r->g, r->rank, &call);
        if (k >= 0)
            r->t[k] = bench_now() - t0;
    }
    sn_bind_thread(r->dev, 0);
    return NULL;
}

/* GB/s of the group's all-reduce of `bytes` per rank over devs, each
 * rank on a thread of its own; 0 on failure. */
static double bench_group_allreduce(sn_device **devs, size_t bytes)
{
    sn_group *g = NULL;
    rank_run run[2] = {{0}};
    pthread_t th[2];
    size_t count = bytes / sizeof(float);
    double med = 0;
    int started = 0;
    float *init = calloc(count, sizeof(float));

    if (!init || sn_group_create(devs, 2, 0, &g) != SHARDNET_OK)
        goto done;
    for (size_t i = 0; i < count; i++)
        init[i] = (float)(i % 97) * 0.25f;
    /* as many calls as fit in about 0.3 s, at most MAX_REPS */
    int reps = MAX_REPS;
    for (int r = 0; r < 2; r++) {
        run[r] = (rank_run){.g = g, .dev = devs[r], .rank = (size_t)r,
                            .count = count, .reps = reps};
        if (sn_buffer_alloc(devs[r], bytes, &run[r].v.buf) != SHARDNET_OK ||
            sn_buffer_write(run[r].v.buf, 0, init, bytes) != SHARDNET_OK)
            goto done;
    }
    sn_group_begin(g);
    for (; started < 2; started++)
        if (pthread_create(&th[started], NULL, rank_main, &run[started]))
            break;
    if (started < 2)
        sn_group_abort(g);
    for (int r = 0; r < started; r++)
        pthread_join(th[r], NULL);
    if (started == 2 && run[0].st == SHARDNET_OK &&
        run[1].st == SHARDNET_OK)
        med = bytes / bench_median(run[0].t, reps) / 1e9;
done:
    if (!med)
        fprintf(stderr, "group all-reduce on %s+%s: %s\n", devs[0]->info.name,
                devs[1]->info.name, shardnet_last_error());
    for (int r = 0; r < 2; r++)
        sn_buffer_free(run[r].v.buf);
    sn_group_free(g);
    free(init);
    return med;
}

static sn_device *find(shardnet_context_t *ctx, const char *name)
{
    sn_device *d;
    for (size_t i = 0; (d = sn_context_device(ctx, i)) != NULL; i++)
        if (!strcmp(d->info.name, name))
            return d;
    return NULL;
}

static void cell(sn_device **pair, size_t bytes, int no_map)
{
    if (!pair[0] || !pair[1])
        printf(" %12s", "-");
    else
        printf(" %12.2f", bench_allreduce(pair, bytes, no_map));
}

int main(int argc, char **argv)
{
    shardnet_context_t *ctx = NULL;
    size_t max_mib = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 64;
    if (shardnet_context_create(&ctx) != SHARDNET_OK) {
        fprintf(stderr, "bench_collectives: %s\n", shardnet_last_error());
        return 1;
    }
    sn_device *cpu[2] = {find(ctx, "cpu:0"), find(ctx, "cpu:1")};
    sn_device *cl[2] = {find(ctx, "cl:0"), find(ctx, "cl:1")};

    printf("all-reduce (sum) of one buffer per rank, 2 ranks; median GB/s "
           "= bytes per rank / time\n");
    printf("%10s %12s %12s %12s %12s %12s\n", "bytes", "memcpy",
           "cpu0+cpu1", "cl0+cl1", "cl staged", "cpu split");
    for (size_t bytes = 4096; bytes <= max_mib << 20; bytes *= 4) {
        printf("%10zu %12.2f", bytes, bench_memcpy(bytes));
        fflush(stdout);
        cell(cpu, bytes, 0);
        cell(cl, bytes, 0);
        cell(cl, bytes, 1);
        if (!cpu[0] || !cpu[1])
            printf(" %12s", "-");
        else
            printf(" %12.2f", bench_group_allreduce(cpu, bytes));
        printf("\n");
        fflush(stdout);
    }
    shardnet_context_free(ctx);
    return 0;
}
