/*
 * All-reduce bandwidth between two devices, next to host memcpy.
 *
 * Prints, per message size, the median algorithm bandwidth (bytes of one
 * rank's buffer / time) in GB/s of: memcpy of that size on the host; an
 * all-reduce over cpu:0 + cpu:1 and over cl:0 + cl:1 with host-unified
 * devices mapped (zero-copy); and the same over cl:0 + cl:1 staged through
 * copies (no_map).  A pair whose devices are absent prints "-".
 * Usage: bench_collectives [max_mib]   (default 64)
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "comm/collective.h"
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
    printf("%10s %12s %12s %12s %12s\n", "bytes", "memcpy", "cpu0+cpu1",
           "cl0+cl1", "cl staged");
    for (size_t bytes = 4096; bytes <= max_mib << 20; bytes *= 4) {
        printf("%10zu %12.2f", bytes, bench_memcpy(bytes));
        fflush(stdout);
        cell(cpu, bytes, 0);
        cell(cl, bytes, 0);
        cell(cl, bytes, 1);
        printf("\n");
        fflush(stdout);
    }
    shardnet_context_free(ctx);
    return 0;
}
