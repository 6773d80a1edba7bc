/*
 * bench_auto: "auto" over a list of devices against the best of them
 * alone, in one process, runs interleaved:
 *
 *   tools/bench_auto DEVICES ROUNDS RUNS MODEL[:BATCH,...]...
 *
 * For each model and batch (1, 64 and 1024 unless given), ROUNDS rounds,
 * each with sessions made anew: one of split auto over DEVICES and one of
 * split none on each device of the list, their input random in [0, 1) of
 * BATCH rows, each run once (auto decides then); then every session run
 * RUNS times in turn, timed, after 30 ms of pause and one run untimed
 * (the order turned each round), so that the machine's load and where
 * each session's memory lands fall on all alike, and each block times
 * runs that follow one another.  Per session the median of all its
 * runs' times, each run timed alone (a mean over a block would carry
 * whatever interrupted one of its runs); the best single device is the
 * one of the smallest median; ratio = its median over auto's (1 or more:
 * auto is not slower).  "twins": the first device's session against a second one
 * just like it, measured alike: how far apart two sessions that run the
 * same plan come out here (1 in truth).  What auto chose is the
 * "running:" line of its description in the first round (and in how many
 * rounds, where it chose otherwise in some).
 * One process for all: what differs between processes (where the
 * weights lie, the cores' state as it starts) does not fall on one
 * column only, as it does between `shardnet plan` runs.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardnet.h"
#include "bench_time.h"

#define MAXDEV 6
#define MAXBATCH 8

static int fail(const char *what, const char *detail)
{
    fprintf(stderr, "bench_auto: %s %s: %s\n", what, detail,
            shardnet_last_error());
    return 1;
}

/* A session of m on devices with split, its input x of dims, run once. */
static shardnet_session_t *session(shardnet_context_t *ctx,
                                   shardnet_model_t *m, const char *devices,
                                   const char *split, int rank,
                                   const int64_t *dims, const float *x)
{
    shardnet_session_options o = {.size = sizeof o, .split = split};
    shardnet_session_t *s = NULL;
    if (shardnet_session_create_with(ctx, m, devices, &o, &s) !=
            SHARDNET_OK ||
        shardnet_session_set_input(s, 0, SHARDNET_DTYPE_FLOAT32, rank, dims,
                                   x) != SHARDNET_OK ||
        shardnet_session_run(s) != SHARDNET_OK) {
        fail("session on", devices);
        shardnet_session_free(s);
        return NULL;
    }
    return s;
}

/* What a session runs: its description's "running: " line. */
static void running(shardnet_session_t *s, char *out, size_t cap)
{
    static char text[1 << 16];
    shardnet_session_describe(s, text, sizeof text);
    const char *p = strstr(text, "running: ");
    size_t n = p ? strcspn(p + 9, "\n") : 0;
    snprintf(out, cap, "%.*s", (int)n, p ? p + 9 : "?");
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "Usage: %s DEVICES ROUNDS RUNS MODEL[:BATCH,...]...\n",
                argv[0]);
        return 2;
    }
    const char *devices = argv[1];
    long rounds = atol(argv[2]), runs = atol(argv[3]);
    if (rounds < 1 || runs < 1)
        return 2;
    char names[MAXDEV][64];
    size_t ndev = 0;
    for (const char *p = devices; *p && ndev < MAXDEV;) {
        size_t n = strcspn(p, ",");
        snprintf(names[ndev++], sizeof names[0], "%.*s", (int)n, p);
        p += n + (p[n] == ',');
    }
    shardnet_context_t *ctx;
    if (shardnet_context_create(&ctx) != SHARDNET_OK)
        return fail("context", "");
    printf("auto over %s against the best device alone, one process, "
           "median run of %ld rounds of %ld runs each\n",
           devices, rounds, runs);
    printf("| model | batch | best alone | its ms | auto ms | ratio | "
           "twins | auto runs |\n|---|---|---|---|---|---|---|---|\n");
    for (int a = 4; a < argc; a++) {
        char path[4096];
        long batches[MAXBATCH] = {1, 64, 1024};
        size_t nb = 3;
        snprintf(path, sizeof path, "%s", argv[a]);
        char *colon = strrchr(path, ':');
        if (colon) {
            *colon = '\0';
            nb = 0;
            for (char *q = colon + 1; *q && nb < MAXBATCH;) {
                batches[nb++] = strtol(q, &q, 10);
                q += *q == ',';
            }
        }
        shardnet_model_t *m;
        shardnet_tensor_info in;
        if (shardnet_model_load(path, &m) != SHARDNET_OK ||
            shardnet_model_input(m, 0, &in) != SHARDNET_OK)
            return fail("model", path);
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        for (size_t k = 0; k < nb; k++) {
            int64_t dims[SHARDNET_MAX_DIMS];
            size_t count = 1;
            for (int d = 0; d < in.rank; d++) {
                dims[d] = d == 0 ? batches[k] : in.dims[d] < 0 ? 1 : in.dims[d];
                count *= (size_t)dims[d];
            }
            float *x = malloc(count * sizeof *x);
            if (!x)
                return fail("memory", "");
            srand(1);
            for (size_t i = 0; i < count; i++)
                x[i] = (float)rand() / (float)RAND_MAX;
            /* [0]: auto, [1 + d]: device d alone, [ns - 1]: a twin of
             * the first device's session (the spread between two
             * sessions alike, measured beside the rest).  Made anew each
             * round: where a session's memory lands moves its time by
             * several percent, by luck, for as long as it lives (two
             * sessions of one plan measured 0.92-1.10x apart here), so
             * that luck is drawn again each round and the medians
             * average it out.  Auto decides anew each round too. */
            shardnet_session_t *s[MAXDEV + 2];
            size_t ns = ndev + 2;
            char chose[256] = "", now[256];
            long same = 0;
            /* every run's time: session q's are t[q * per ...] */
            size_t per = (size_t)rounds * (size_t)runs;
            double *t = calloc(ns * per, sizeof *t);
            if (!t)
                return fail("memory", "");
            for (long r = 0; r < rounds; r++) {
                for (size_t i = 0; i < ns; i++) {
                    size_t q = (i + (size_t)r) % ns;
                    s[q] = session(ctx, m,
                                   q == 0 ? devices
                                          : names[q == ns - 1 ? 0 : q - 1],
                                   q == 0 ? "auto" : "none", in.rank, dims,
                                   x);
                    if (!s[q])
                        return 1;
                }
                running(s[0], now, sizeof now);
                if (!r)
                    snprintf(chose, sizeof chose, "%s", now);
                same += !strcmp(now, chose);
                for (size_t i = 0; i < ns; i++) {
                    size_t q = (i + (size_t)r) % ns;
                    /* A pause first: the workers of a device that ran
                     * last (PoCL's spin a while before they sleep) are
                     * asleep again, whichever session comes after them. */
                    nanosleep(&(struct timespec){0, 30000000}, NULL);
                    /* Then one run untimed: the session's memory back in
                     * the caches and its device's threads awake, which
                     * the session before it had; a block times the runs
                     * that follow one another, as a stream of requests. */
                    if (shardnet_session_run(s[q]) != SHARDNET_OK)
                        return fail("run", q ? names[q - 1] : devices);
                    for (long j = 0; j < runs; j++) {
                        double t0 = bench_now();
                        if (shardnet_session_run(s[q]) != SHARDNET_OK)
                            return fail("run", q ? names[q - 1] : devices);
                        t[q * per + (size_t)(r * runs + j)] =
                            bench_now() - t0;
                    }
                }
                for (size_t q = 0; q < ns; q++)
                    shardnet_session_free(s[q]);
            }
            double med[MAXDEV + 2];
            size_t best = 1;
            for (size_t q = 0; q < ns; q++) {
                med[q] = bench_median(t + q * per, (int)per);
                if (q && q < ns - 1 && med[q] < med[best])
                    best = q;
            }
            printf("| %s | %ld | %s | %.3f | %.3f | %.3f | %.3f | %s",
                   base, batches[k], names[best - 1], med[best] * 1e3,
                   med[0] * 1e3, med[best] / med[0], med[1] / med[ns - 1],
                   chose);
            if (same < rounds)
                printf(" (in %ld of %ld rounds; others differ)", same,
                       rounds);
            printf(" |\n");
            fflush(stdout);
            free(t);
            free(x);
        }
        shardnet_model_free(m);
    }
    shardnet_context_free(ctx);
    return 0;
}
