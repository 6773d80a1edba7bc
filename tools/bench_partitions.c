/*
 * Partitions of one package: what a model's latency is worth in cores, and
 * what two models gain by sharing a package in partitions rather than in
 * turns.
 *
 * (a) Latency against share: each model on the first k cores of cpu:0
 *     (the partition cpu:0[0-(k-1)], k = 1 .. the package's cores; the
 *     last is cpu:0 itself), the median time of a run.
 * (b) Co-location: two models at once, each on its half of cpu:0
 *     (cpu:0/2.0 and cpu:0/2.1, one thread each, running back to back),
 *     against the same two taking turns on the whole of cpu:0 (one thread,
 *     A then B then A ...).  For each model: the median time of a run and
 *     its runs a second; for the two, their samples a second together and
 *     their pairs a second (one run of each: the slower one's runs/s).  In
 *     turns, a model's run also waits for the other's: 1 / (its runs/s)
 *     is the time from one of its runs to the next, at once as in turns.
 *
 * Rounds are interleaved (every cell of (a) once per round; (b)'s two ways
 * alternate which goes first) and each figure is the median over rounds
 * of a round's median, so that a neighbour's build shifts every column
 * alike.  Inputs are random; the models are the test fixtures.
 *
 * Usage: bench_partitions [--rounds R] [--seconds S] [--srcdir DIR]
 *   R rounds (default 7), S seconds per way of (b) per round (default 1),
 *   DIR the source tree (default $SHARDNET_SRCDIR, else .)
 * Run it on the machine as it is (not a simulated topology):
 *   env -u HWLOC_SYNTHETIC -u HWLOC_THISSYSTEM tools/bench_partitions
 */
#include <config.h>

#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardnet.h"
#include "bench_time.h"

#define MAX_ROUNDS 64
#define MAX_CORES 16
#define MAX_RUNS 100000

/* A model at a batch size, with its random input. */
typedef struct load {
    const char *label;
    const char *file;
    int64_t dims[4]; /* dims[0]: the batch */
    int rank;
    float *x;
    shardnet_model_t *model;
} load;

static load loads[] = {
    {"MLP, batch 64", "fashion_mlp.onnx", {64, 784}, 2, NULL, NULL},
    {"MLP, batch 1024", "fashion_mlp.onnx", {1024, 784}, 2, NULL, NULL},
    {"CNN, batch 64", "small_cnn.onnx", {64, 1, 28, 28}, 4, NULL, NULL},
    {"CNN, batch 512", "small_cnn.onnx", {512, 1, 28, 28}, 4, NULL, NULL},
};
#define NLOADS (sizeof loads / sizeof loads[0])

static shardnet_context_t *ctx;

static void die(const char *what)
{
    fprintf(stderr, "bench_partitions: %s: %s\n", what, shardnet_last_error());
    exit(1);
}

static size_t elements(const load *l)
{
    size_t n = 1;
    for (int d = 0; d < l->rank; d++)
        n *= (size_t)l->dims[d];
    return n;
}

static void load_models(const char *src)
{
    char path[4096];
    unsigned seed = 1;
    for (size_t i = 0; i < NLOADS; i++) {
        load *l = &loads[i];
        size_t n = elements(l);
        snprintf(path, sizeof path, "%s/tests/fixtures/%s", src, l->file);
        if (shardnet_model_load(path, &l->model) != SHARDNET_OK)
            die(path);
        if (!(l->x = malloc(n * sizeof *l->x))) {
            fprintf(stderr, "bench_partitions: out of memory\n");
            exit(1);
        }
        for (size_t k = 0; k < n; k++) {
            seed = seed * 1103515245u + 12345u;
            l->x[k] = (float)((seed >> 8) & 0xffff) / 65536.0f;
        }
    }
}

/* A session of load l on `devices`, its input bound and run once (its
 * plan made, its weights on the device). */
static shardnet_session_t *session(const load *l, const char *devices)
{
    shardnet_session_t *s;
    char what[160];
    snprintf(what, sizeof what, "%s on %s", l->label, devices);
    if (shardnet_session_create(ctx, l->model, devices, &s) != SHARDNET_OK ||
        shardnet_session_set_input(s, 0, SHARDNET_DTYPE_FLOAT32, l->rank, l->dims,
                                   l->x) != SHARDNET_OK ||
        shardnet_session_run(s) != SHARDNET_OK)
        die(what);
    return s;
}

/* Seconds of one run. */
static double timed_run(shardnet_session_t *s)
{
    double t0 = bench_now();
    if (shardnet_session_run(s) != SHARDNET_OK)
        die("run");
    return bench_now() - t0;
}

/* The median of `reps` runs of s, after one to warm it. */
static double median_run(shardnet_session_t *s, int reps)
{
    double t[64];
    if (reps > 64)
        reps = 64;
    timed_run(s);
    for (int r = 0; r < reps; r++)
        t[r] = timed_run(s);
    return bench_median(t, reps);
}

/* (a): latency of each load on 1 .. cores cores of cpu:0. */
static void latency_by_share(unsigned cores, int rounds)
{
    static double med[NLOADS][MAX_CORES][MAX_ROUNDS];
    shardnet_session_t *s[NLOADS][MAX_CORES];
    int reps[NLOADS];
    char dev[32];

    for (size_t i = 0; i < NLOADS; i++)
        for (unsigned k = 1; k <= cores; k++) {
            if (k == cores)
                snprintf(dev, sizeof dev, "cpu:0");
            else if (k == 1)
                snprintf(dev, sizeof dev, "cpu:0[0]");
            else
                snprintf(dev, sizeof dev, "cpu:0[0-%u]", k - 1);
            s[i][k - 1] = session(&loads[i], dev);
        }
    /* About 0.1 s a cell a round, from one core's time. */
    for (size_t i = 0; i < NLOADS; i++) {
        double one = timed_run(s[i][0]);
        reps[i] = one > 0 ? (int)(0.1 / one) : 64;
        reps[i] = reps[i] < 5 ? 5 : reps[i] > 64 ? 64 : reps[i];
    }
    for (int r = 0; r < rounds; r++)
        for (size_t i = 0; i < NLOADS; i++)
            for (unsigned k = 0; k < cores; k++)
                med[i][k][r] = median_run(s[i][k], reps[i]);

    printf("(a) latency against the share of cpu:0 (median ms a run; "
           "speed-up over one core)\n\n| model |");
    for (unsigned k = 1; k <= cores; k++)
        printf(" %u core%s |", k, k == 1 ? "" : "s");
    printf("\n|---|");
    for (unsigned k = 1; k <= cores; k++)
        printf("---|");
    printf("\n");
    for (size_t i = 0; i < NLOADS; i++) {
        double base = bench_median(med[i][0], rounds);
        printf("| %s | %.3f |", loads[i].label, base * 1e3);
        for (unsigned k = 2; k <= cores; k++) {
            double m = bench_median(med[i][k - 1], rounds);
            printf(" %.3f (%.2fx) |", m * 1e3, base / m);
        }
        printf("\n");
        for (unsigned k = 0; k < cores; k++)
            shardnet_session_free(s[i][k]);
    }
    printf("\n");
}

/* One thread of (b): sessions run back to back until `until`, each run's
 * time kept; with two sessions, in turns. */
typedef struct runner {
    shardnet_session_t *s[2];
    int ns;
    pthread_barrier_t *start;
    double seconds;
    double *t[2]; /* each session's run times */
    int n[2];
    double wall;
} runner;

static void *run_for(void *arg)
{
    runner *w = arg;
    double t0, until;
    if (w->start)
        pthread_barrier_wait(w->start);
    t0 = bench_now();
    until = t0 + w->seconds;
    w->n[0] = w->n[1] = 0;
    for (int k = 0; bench_now() < until; k = (k + 1) % w->ns)
        if (w->n[k] < MAX_RUNS)
            w->t[k][w->n[k]++] = timed_run(w->s[k]);
    w->wall = bench_now() - t0;
    return NULL;
}

/* (b): loads a and b at once on cpu:0's halves, against in turns on cpu:0. */
static void colocation(size_t a, size_t b, int rounds, double seconds)
{
    /* [way][model][round]: way 0 at once on halves, 1 in turns. */
    static double lat[2][2][MAX_ROUNDS], rate[2][2][MAX_ROUNDS];
    const load *l[2] = {&loads[a], &loads[b]};
    shardnet_session_t *half[2], *whole[2];
    runner w[2];
    double *times[2][2];
    pthread_barrier_t start;

    half[0] = session(l[0], "cpu:0/2.0");
    half[1] = session(l[1], "cpu:0/2.1");
    whole[0] = session(l[0], "cpu:0");
    whole[1] = session(l[1], "cpu:0");
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            if (!(times[i][j] = malloc(MAX_RUNS * sizeof(double)))) {
                fprintf(stderr, "bench_partitions: out of memory\n");
                exit(1);
            }
    for (int r = 0; r < rounds; r++) {
        for (int o = 0; o < 2; o++) {
            int way = (r + o) % 2;
            if (way == 0) {
                pthread_barrier_init(&start, NULL, 2);
                pthread_t th[2];
                for (int i = 0; i < 2; i++) {
                    w[i] = (runner){.s = {half[i]}, .ns = 1, .start = &start,
                                    .seconds = seconds,
                                    .t = {times[0][i]}};
                    pthread_create(&th[i], NULL, run_for, &w[i]);
                }
                for (int i = 0; i < 2; i++)
                    pthread_join(th[i], NULL);
                pthread_barrier_destroy(&start);
                for (int i = 0; i < 2; i++) {
                    lat[0][i][r] = bench_median(w[i].t[0], w[i].n[0]);
                    rate[0][i][r] = w[i].n[0] / w[i].wall;
                }
            } else {
                w[0] = (runner){.s = {whole[0], whole[1]}, .ns = 2,
                                .seconds = seconds,
                                .t = {times[1][0], times[1][1]}};
                run_for(&w[0]);
                for (int i = 0; i < 2; i++) {
                    lat[1][i][r] = bench_median(w[0].t[i], w[0].n[i]);
                    rate[1][i][r] = w[0].n[i] / w[0].wall;
                }
            }
        }
    }

    printf("(b) %s and %s: at once on cpu:0's halves (cpu:0/2.0, "
           "cpu:0/2.1) against in turns on the whole of cpu:0\n\n",
           l[0]->label, l[1]->label);
    printf("| way | %s: ms a run | runs/s | %s: ms a run | runs/s | "
           "samples/s, both | pairs/s |\n|---|---|---|---|---|---|---|\n",
           l[0]->label, l[1]->label);
    for (int way = 0; way < 2; way++) {
        double m[2], q[2];
        for (int i = 0; i < 2; i++) {
            m[i] = bench_median(lat[way][i], rounds);
            q[i] = bench_median(rate[way][i], rounds);
        }
        printf("| %s | %.3f | %.0f | %.3f | %.0f | %.0f | %.0f |\n",
               way ? "in turns, whole package" : "at once, a half each",
               m[0] * 1e3, q[0], m[1] * 1e3, q[1],
               q[0] * (double)l[0]->dims[0] + q[1] * (double)l[1]->dims[0],
               q[0] < q[1] ? q[0] : q[1]);
    }
    printf("\n");
    for (int i = 0; i < 2; i++) {
        shardnet_session_free(half[i]);
        shardnet_session_free(whole[i]);
        for (int j = 0; j < 2; j++)
            free(times[i][j]);
    }
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"rounds", required_argument, 0, 'r'},
                                         {"seconds", required_argument, 0, 's'},
                                         {"srcdir", required_argument, 0, 'd'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *src = getenv("SHARDNET_SRCDIR");
    int rounds = 7, ch;
    double seconds = 1.0;
    size_t idx[1], n;
    shardnet_device_info info;

    while ((ch = getopt_long(argc, argv, "r:s:d:h", opts, NULL)) != -1) {
        if (ch == 'r')
            rounds = atoi(optarg);
        else if (ch == 's')
            seconds = atof(optarg);
        else if (ch == 'd')
            src = optarg;
        else {
            fprintf(ch == 'h' ? stdout : stderr,
                    "usage: bench_partitions [--rounds R] [--seconds S] "
                    "[--srcdir DIR]\n");
            return ch == 'h' ? 0 : 2;
        }
    }
    if (rounds < 1 || rounds > MAX_ROUNDS || !(seconds > 0)) {
        fprintf(stderr, "bench_partitions: 1 to %d rounds of more than 0 "
                        "seconds\n",
                MAX_ROUNDS);
        return 2;
    }
    if (shardnet_context_create(&ctx) != SHARDNET_OK)
        die("context");
    if (shardnet_devices_select(ctx, "cpu:0", idx, 1, &n) != SHARDNET_OK ||
        shardnet_device_get_info(ctx, idx[0], &info) != SHARDNET_OK)
        die("cpu:0");
    if (info.compute_units < 2 || info.compute_units > MAX_CORES) {
        fprintf(stderr, "bench_partitions: cpu:0 has %u cores (2 to %d "
                        "needed)\n",
                info.compute_units, MAX_CORES);
        return 1;
    }
    printf("cpu:0: %u cores, PUs %s, %s; %d rounds\n\n", info.compute_units,
           info.cpuset, info.model, rounds);
    load_models(src ? src : ".");
    latency_by_share(info.compute_units, rounds);
    colocation(0, 2, rounds, seconds); /* MLP 64 with CNN 64 */
    colocation(1, 3, rounds, seconds); /* MLP 1024 with CNN 512 */
    for (size_t i = 0; i < NLOADS; i++) {
        shardnet_model_free(loads[i].model);
        free(loads[i].x);
    }
    shardnet_context_free(ctx);
    return 0;
}
