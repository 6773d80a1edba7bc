/*
 * All-reduce bandwidth between two devices, next to host memcpy.
 *
 * Prints, per message size, the median bandwidth in GB/s of: memcpy of
 * that size on the host (bytes copied / time); an all-reduce (sum) over
 * cpu:0 + cpu:1 and over cl:0 + cl:1 with host-unified devices mapped
 * (zero-copy); and the same over cl:0 + cl:1 staged through copies
 * (no_map).  These run the staged engine (comm/collective.c) from one
 * thread.  "cpu split" is the path a tensor split over CPU devices takes:
 * the collective group's host-shared path (comm/shared.c), each device's
 * thread (bound to it, as a split binds it) calling its side and reducing
 * its share; rank 0's time a call.  Its buffers stay where the last call
 * left them: each core finds its share of both in its own cache.  "split
 * written" is the same with each thread writing its whole buffer before
 * each call (untimed), as the kernel that made a partial sum would, so
 * that the reduction reads and writes lines the other core holds.  "pull
 * floor" is a floor under "split written": the threads write their
 * buffers and meet as there, then each only loads one float from every
 * line of its share of the other's buffer (the lines that the reduction
 * must bring over from the other core), nothing written, no barrier, no
 * map; rank 0's time.  "sum floor" is the reduction itself on those
 * terms: each thread sums its share of both buffers, just written, into
 * both (comm/sum.c, as the cpu split does), with no barrier and no map:
 * what "split written" would take if meeting cost nothing.  A pair whose
 * devices are absent prints "-".
 *
 * An all-reduce's GB/s is bytes per rank / time, and the percentage next
 * to it is that over memcpy's GB/s at the same size: memcpy's time over
 * the all-reduce's.  An all-reduce of n bytes per rank over two ranks
 * reads 2n bytes and writes 2n at least.  In the cpu split each of the two
 * cores sums half of the elements, so each reads n bytes and writes n,
 * what one core's memcpy of n bytes moves: 100% means each core streams
 * its share at memcpy's speed.  The staged engine's thread alone moves all
 * 4n bytes, twice memcpy's 2n; it still comes near memcpy where both are
 * bound by the caches, since an in-place sum writes only lines it has
 * just read, where memcpy reads each destination line before it writes
 * it.  Where memcpy's source and destination (2n) outgrow a core's L2
 * and a split core's share of both buffers (n) does not, the split
 * passes 100%.  The pull floor's GB/s is bytes per rank / time too, so
 * that its percentage bounds "split written"'s from above: that
 * all-reduce brings the same lines over, and writes, sums and meets at
 * two barriers besides.
 *
 * The columns are measured in rounds, each a few calls of every column in
 * turn, so that a load that comes and goes on a shared machine hits all
 * of them alike; the memcpy runs on cpu:0's core when there is one.
 * Usage: bench_collectives [max_mib]   (default 64)
 */
#include <config.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "comm/collective.h"
#include "comm/group.h"
#include "bench_time.h"

#define ROUNDS 10
#define PER_ROUND 5 /* timed calls of a column per round */
#define SAMPLES (ROUNDS * PER_ROUND)

/* One column's samples (seconds a call); n = 0 when it failed. */
typedef struct column {
    double t[SAMPLES];
    int n, failed;
    char why[256];
} column;

/* The column failed: keep the calling thread's error. */
static void failed(column *c)
{
    if (!c->failed)
        snprintf(c->why, sizeof c->why, "%s", shardnet_last_error());
    c->failed = 1;
}

static double gbps(size_t bytes, column *c)
{
    return c->n && !c->failed ? bytes / bench_median(c->t, c->n) / 1e9 : 0;
}

/* The memcpy column: its buffers, copied PER_ROUND times a round. */
typedef struct copy_run {
    char *a, *b;
    size_t bytes;
} copy_run;

static void copy_round(copy_run *m, column *c)
{
    for (int k = 0; k < PER_ROUND; k++) {
        double t0 = bench_now();
        memcpy(m->b, m->a, m->bytes);
        c->t[c->n++] = bench_now() - t0;
        m->a[(size_t)c->n % m->bytes] ^= m->b[(size_t)c->n * 7 % m->bytes];
    }
}

/* A staged-engine column: its comm and one buffer per rank. */
typedef struct staged_run {
    sn_comm *comm;
    sn_view v[2];
    size_t count;
} staged_run;

static void put_init(sn_buffer *buf, const float *init, size_t count,
                     column *c)
{
    if (!c->failed &&
        sn_buffer_write(buf, 0, init, count * sizeof(float)) != SHARDNET_OK)
        failed(c);
}

static void staged_setup(staged_run *s, sn_device **devs, int no_map,
                         const float *init, size_t count, column *c)
{
    sn_comm_opts opts = {.no_map = no_map};
    memset(s, 0, sizeof *s);
    s->count = count;
    if (sn_comm_create(devs, 2, &opts, &s->comm) != SHARDNET_OK) {
        failed(c);
        return;
    }
    for (int r = 0; r < 2 && !c->failed; r++) {
        if (sn_buffer_alloc(devs[r], count * sizeof(float), &s->v[r].buf) !=
            SHARDNET_OK)
            failed(c);
        put_init(s->v[r].buf, init, count, c);
    }
}

/* A warm-up call, then PER_ROUND timed ones. */
static void staged_round(staged_run *s, column *c)
{
    for (int k = -1; k < PER_ROUND && !c->failed; k++) {
        double t0 = bench_now();
        if (sn_allreduce(s->comm, s->v, s->count) != SHARDNET_OK)
            failed(c);
        else if (k >= 0)
            c->t[c->n++] = bench_now() - t0;
    }
}

static void staged_free(staged_run *s)
{
    for (int r = 0; r < 2; r++)
        sn_buffer_free(s->v[r].buf);
    sn_comm_free(s->comm);
}

/* One rank's thread of the group all-reduce in a round: a warm-up call
 * (the other thread may still be starting), then PER_ROUND timed ones.
 * With `init`, the thread writes its whole buffer before each call, as
 * the kernel that made a partial sum would, and the threads meet before
 * the call is timed: the reduction then reads and writes lines that the
 * other core holds, as in a tensor split; without, each core finds its
 * share of both buffers where it left it, in its own cache. */
typedef struct rank_run {
    sn_group *g;
    sn_device *dev;
    size_t rank, count;
    sn_view v;
    const float *init;
    const float *peer; /* the floors': the other rank's buffer */
    float *both[2];    /* the sum floor's: both buffers, rank order */
    atomic_uint *met;  /* both threads' arrivals before a call */
    atomic_uint *done; /* the pull floor's: and after it */
    column *col;       /* rank 0's records its times */
    uint32_t sink;     /* the pull floor's loads end here */
    shardnet_status st;
    char why[256];
} rank_run;

/* Write the buffer anew (untimed) and wait for the other thread. */
static void rewrite(rank_run *r, int k)
{
    unsigned target = 2 * (unsigned)(k + 2);
    if (sn_buffer_write(r->v.buf, 0, r->init, r->count * sizeof(float)) !=
        SHARDNET_OK)
        r->st = SHARDNET_INTERNAL;
    atomic_fetch_add(r->met, 1);
    while (atomic_load(r->met) < target)
        ;
}

/* This rank's share of an all-reduce's elements, [lo, hi): halves in
 * 16-float blocks, as comm/shared.c cuts them. */
static void share_of_rank(const rank_run *r, size_t *lo, size_t *hi)
{
    size_t blocks = (r->count + 15) / 16;
    *lo = blocks * r->rank / 2 * 16;
    *hi = blocks * (r->rank + 1) / 2 * 16;
    *hi = *hi < r->count ? *hi : r->count;
    *lo = *lo < *hi ? *lo : *hi;
}

/* The pull floor's call: a load from every line of this rank's share of
 * the other rank's buffer (the lines the all-reduce must bring over),
 * nothing written, no barrier. */
static void pull(rank_run *r)
{
    size_t lo, hi;
    share_of_rank(r, &lo, &hi);
    const volatile uint32_t *p = (const volatile uint32_t *)r->peer;
    uint32_t x0 = 0, x1 = 0; /* two chains of loads in flight */
    size_t j = lo;
    for (; j + 16 < hi; j += 32) {
        x0 ^= p[j];
        x1 ^= p[j + 16];
    }
    if (j < hi)
        x0 ^= p[j];
    r->sink = x0 ^ x1;
}

/* The sum floor's call: this rank's share of both buffers summed into
 * both, in place, with no barrier. */
static void sum_share(rank_run *r)
{
    size_t lo, hi;
    share_of_rank(r, &lo, &hi);
    const float *in[2] = {r->both[0] + lo, r->both[1] + lo};
    float *out[2] = {r->both[0] + lo, r->both[1] + lo};
    sn_comm_sum(out, 2, in, 2, hi - lo);
}

/* After a pull, the threads meet (untimed) before either writes its
 * buffer anew, which the other may still be reading. */
static void pulled(rank_run *r, int k)
{
    atomic_fetch_add(r->done, 1);
    while (atomic_load(r->done) < 2 * (unsigned)(k + 2))
        ;
}

static void *rank_main(void *arg)
{
    rank_run *r = arg;
    sn_group_call call = {.kind = SN_GROUP_ALLREDUCE, .n = 2,
                          .counts = {r->count}, .send = r->v, .recv = r->v};
    sn_bind_thread(r->dev, 1);
    for (int k = -1; k < PER_ROUND && r->st == SHARDNET_OK; k++) {
        if (r->init)
            rewrite(r, k);
        double t0 = bench_now();
        if (r->peer) {
            if (r->both[0])
                sum_share(r);
            else
                pull(r);
            if (k >= 0 && r->col)
                r->col->t[r->col->n++] = bench_now() - t0;
            pulled(r, k);
            continue;
        }
        r->st = sn_group_collective(r->g, r->rank, &call);
        if (r->st != SHARDNET_OK)
            snprintf(r->why, sizeof r->why, "%s", shardnet_last_error());
        else if (k >= 0 && r->col)
            r->col->t[r->col->n++] = bench_now() - t0;
    }
    sn_bind_thread(r->dev, 0);
    return NULL;
}

typedef struct split_run {
    sn_group *g;
    rank_run rank[2];
    atomic_uint met, done;
    void *mapped[2]; /* the pull floor's buffers, mapped */
} split_run;

/* The pull floor: each rank reads the other's buffer, mapped here. */
static void map_peers(split_run *s, size_t count, int sum, column *c)
{
    for (int r = 0; r < 2 && !c->failed; r++)
        if (sn_buffer_map(s->rank[r].v.buf, 0, count * sizeof(float),
                          SN_MAP_READ | SN_MAP_WRITE,
                          &s->mapped[r]) != SHARDNET_OK)
            failed(c);
    for (int r = 0; r < 2 && !c->failed; r++) {
        s->rank[r].peer = s->mapped[1 - r];
        s->rank[r].done = &s->done;
        for (int q = 0; q < 2 && sum; q++)
            s->rank[r].both[q] = s->mapped[q];
    }
}

/* A cpu split column: its group and buffers; written: rewritten before
 * each call; floor: 1 the pull floor's calls, 2 the sum floor's, 0 the
 * group's all-reduce. */
static void split_setup(split_run *s, sn_device **devs, const float *init,
                        int written, int floor, size_t count, column *c)
{
    memset(s, 0, sizeof *s);
    if (sn_group_create(devs, 2, 0, &s->g) != SHARDNET_OK) {
        failed(c);
        return;
    }
    for (int r = 0; r < 2 && !c->failed; r++) {
        s->rank[r] = (rank_run){.g = s->g, .dev = devs[r], .rank = (size_t)r,
                                .count = count,
                                .init = written ? init : NULL,
                                .met = &s->met, .col = r ? NULL : c};
        if (sn_buffer_alloc(devs[r], count * sizeof(float),
                            &s->rank[r].v.buf) != SHARDNET_OK)
            failed(c);
        put_init(s->rank[r].v.buf, init, count, c);
    }
    if (floor)
        map_peers(s, count, floor > 1, c);
}

static void split_round(split_run *s, column *c)
{
    pthread_t th[2];
    int started = 0;
    sn_group_begin(s->g);
    atomic_store(&s->met, 0);
    atomic_store(&s->done, 0);
    for (; started < 2; started++)
        if (pthread_create(&th[started], NULL, rank_main, &s->rank[started]))
            break;
    if (started < 2)
        sn_group_abort(s->g);
    for (int r = 0; r < started; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < 2 && !c->failed; r++)
        if (s->rank[r].st != SHARDNET_OK) {
            snprintf(c->why, sizeof c->why, "rank %d: %s", r,
                     s->rank[r].why);
            c->failed = 1;
        }
    if (started < 2) {
        snprintf(c->why, sizeof c->why, "cannot start a thread");
        c->failed = 1;
    }
}

static void split_free(split_run *s)
{
    for (int r = 0; r < 2; r++) {
        if (s->mapped[r])
            sn_buffer_unmap(s->rank[r].v.buf, s->mapped[r]);
        sn_buffer_free(s->rank[r].v.buf);
    }
    sn_group_free(s->g);
}

static sn_device *find(shardnet_context_t *ctx, const char *name)
{
    sn_device *d;
    for (size_t i = 0; (d = sn_context_device(ctx, i)) != NULL; i++)
        if (!strcmp(d->info.name, name))
            return d;
    return NULL;
}

enum { COPY, CPU, CL, CL_STAGED, SPLIT, SPLIT_WRITTEN, PULL, SUM, NCOLS };

typedef struct bench {
    sn_device *cpu[2], *cl[2];
    column col[NCOLS];
} bench;

static void report(bench *b, size_t bytes)
{
    static const char *const names[NCOLS] = {
        "memcpy", "cpu0+cpu1", "cl0+cl1", "cl staged", "cpu split",
        "split written", "pull floor", "sum floor"};
    double copy = gbps(bytes, &b->col[COPY]);
    printf("%10zu %8.2f", bytes, copy);
    for (int k = CPU; k < NCOLS; k++) {
        double v = gbps(bytes, &b->col[k]);
        if (!b->col[k].n && !b->col[k].failed)
            printf(" %15s", "-");
        else if (!v)
            printf(" %15s", "failed");
        else
            printf(" %8.2f (%3.0f%%)", v, copy ? 100 * v / copy : 0);
        if (b->col[k].failed)
            fprintf(stderr, "%s at %zu bytes: %s\n", names[k], bytes,
                    b->col[k].why);
    }
    printf("\n");
    fflush(stdout);
}

/* Every column at one size, round after round. */
static void bench_size(bench *b, size_t bytes, const float *init)
{
    size_t count = bytes / sizeof(float);
    int have_cpu = b->cpu[0] && b->cpu[1], have_cl = b->cl[0] && b->cl[1];
    copy_run m = {malloc(bytes), malloc(bytes), bytes};
    staged_run cpu = {0}, cl = {0}, cl_staged = {0};
    split_run split = {0}, written = {0}, pull = {0}, sum = {0};

    memset(b->col, 0, sizeof b->col);
    if (!m.a || !m.b) {
        snprintf(b->col[COPY].why, sizeof b->col[COPY].why, "out of memory");
        b->col[COPY].failed = 1;
    }
    else {
        memset(m.a, 1, bytes);
        memset(m.b, 2, bytes);
    }
    if (have_cpu) {
        staged_setup(&cpu, b->cpu, 0, init, count, &b->col[CPU]);
        split_setup(&split, b->cpu, init, 0, 0, count, &b->col[SPLIT]);
        split_setup(&written, b->cpu, init, 1, 0, count,
                    &b->col[SPLIT_WRITTEN]);
        split_setup(&pull, b->cpu, init, 1, 1, count, &b->col[PULL]);
        split_setup(&sum, b->cpu, init, 1, 2, count, &b->col[SUM]);
    }
    if (have_cl) {
        staged_setup(&cl, b->cl, 0, init, count, &b->col[CL]);
        staged_setup(&cl_staged, b->cl, 1, init, count, &b->col[CL_STAGED]);
    }
    for (int round = 0; round < ROUNDS; round++) {
        if (!b->col[COPY].failed) {
            if (b->cpu[0])
                sn_bind_thread(b->cpu[0], 1);
            copy_round(&m, &b->col[COPY]);
            if (b->cpu[0])
                sn_bind_thread(b->cpu[0], 0);
        }
        if (have_cpu && !b->col[CPU].failed)
            staged_round(&cpu, &b->col[CPU]);
        if (have_cl && !b->col[CL].failed)
            staged_round(&cl, &b->col[CL]);
        if (have_cl && !b->col[CL_STAGED].failed)
            staged_round(&cl_staged, &b->col[CL_STAGED]);
        if (have_cpu && !b->col[SPLIT].failed)
            split_round(&split, &b->col[SPLIT]);
        if (have_cpu && !b->col[SPLIT_WRITTEN].failed)
            split_round(&written, &b->col[SPLIT_WRITTEN]);
        if (have_cpu && !b->col[PULL].failed)
            split_round(&pull, &b->col[PULL]);
        if (have_cpu && !b->col[SUM].failed)
            split_round(&sum, &b->col[SUM]);
    }
    report(b, bytes);
    if (have_cpu) {
        staged_free(&cpu);
        split_free(&split);
        split_free(&written);
        split_free(&pull);
        split_free(&sum);
    }
    if (have_cl) {
        staged_free(&cl);
        staged_free(&cl_staged);
    }
    free(m.a);
    free(m.b);
}

int main(int argc, char **argv)
{
    shardnet_context_t *ctx = NULL;
    size_t max_mib = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 64;
    size_t max_bytes = max_mib << 20;
    float *init = malloc(max_bytes ? max_bytes : 1);
    bench b = {0};

    if (!init || shardnet_context_create(&ctx) != SHARDNET_OK) {
        fprintf(stderr, "bench_collectives: %s\n",
                init ? shardnet_last_error() : "out of memory");
        free(init);
        return 1;
    }
    for (size_t i = 0; i < max_bytes / sizeof(float); i++)
        init[i] = (float)(i % 97) * 0.25f;
    b.cpu[0] = find(ctx, "cpu:0");
    b.cpu[1] = find(ctx, "cpu:1");
    b.cl[0] = find(ctx, "cl:0");
    b.cl[1] = find(ctx, "cl:1");

    printf("all-reduce (sum) of one buffer per rank, 2 ranks: median GB/s "
           "= bytes per rank / time,\n(%%) = that over memcpy's GB/s "
           "(memcpy's time over the all-reduce's; each core of the cpu\n"
           "split moves what one core's memcpy does), %d rounds of %d calls "
           "interleaved\n",
           ROUNDS, PER_ROUND);
    printf("%10s %8s %15s %15s %15s %15s %15s %15s %15s\n", "bytes",
           "memcpy", "cpu0+cpu1", "cl0+cl1", "cl staged", "cpu split",
           "split written", "pull floor", "sum floor");
    for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 4)
        bench_size(&b, bytes, init);
    shardnet_context_free(ctx);
    free(init);
    return 0;
}
