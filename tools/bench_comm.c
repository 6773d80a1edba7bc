/*
 * bench_comm: what the codecs of values between processes (--comm,
 * lib/comm/codec.h) save, under mpirun -np 2:
 *
 *   mpirun -np 2 tools/bench_comm MODEL BATCH ROUNDS RUNS DEVICES PLAN...
 *
 * One context per codec (fp32, fp16, bf16, int8), and per PLAN file
 * (shardnet plan --save: the same split, devices and cuts for every
 * codec) a session in each; the model's first input random in [0, 1) of
 * BATCH rows.  ROUNDS rounds, each running every (plan, codec) pair RUNS
 * times in turn, so that the machine's load falls on all alike; per pair
 * the median over rounds of the time per run, and the bytes both
 * processes handed their transport per run (every message between them:
 * the collectives' or the stages' values, the outputs every process
 * gets).  Process 0 prints one line per pair.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/transport.h"
#include "comm/world.h"
#include "shardnet.h"
#include "bench_time.h"

#define NCODEC 4
#define MAXPLANS 4

static const char *const names[NCODEC] = {"fp32", "fp16", "bf16", "int8"};

static int fail(const char *what)
{
    fprintf(stderr, "bench_comm (process %u): %s: %s\n",
            shardnet_job_process(), what, shardnet_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 7 || argc > 6 + MAXPLANS) {
        fprintf(stderr, "Usage: mpirun -np 2 %s MODEL BATCH ROUNDS RUNS "
                        "DEVICES PLAN...\n",
                argv[0]);
        return 2;
    }
    long batch = atol(argv[2]), rounds = atol(argv[3]), runs = atol(argv[4]);
    const char *devices = argv[5];
    int nplans = argc - 6;
    if (batch < 1 || rounds < 1 || runs < 1)
        return 2;
    shardnet_context_t *ctx[NCODEC];
    shardnet_session_t *s[MAXPLANS][NCODEC];
    shardnet_model_t *m;
    if (shardnet_model_load(argv[1], &m) != SHARDNET_OK)
        return fail("model");
    for (int c = 0; c < NCODEC; c++) {
        shardnet_context_options o = {.size = sizeof o,
                                      .comm = SHARDNET_COMM_FP32 + c};
        if (shardnet_context_create_with(&o, &ctx[c]) != SHARDNET_OK)
            return fail("context");
    }
    shardnet_tensor_info in;
    if (shardnet_model_input(m, 0, &in) != SHARDNET_OK)
        return fail("input");
    int64_t dims[SHARDNET_MAX_DIMS];
    size_t count = 1;
    for (int d = 0; d < in.rank; d++) {
        dims[d] = d == 0 || in.dims[d] < 0 ? batch : in.dims[d];
        count *= (size_t)dims[d];
    }
    float *x = malloc(count * sizeof *x);
    srand(1);
    for (size_t i = 0; x && i < count; i++)
        x[i] = (float)rand() / (float)RAND_MAX;
    for (int p = 0; p < nplans; p++)
        for (int c = 0; c < NCODEC; c++) {
            shardnet_session_options so = {.size = sizeof so,
                                           .plan_file = argv[6 + p]};
            if (shardnet_session_create_with(ctx[c], m, devices, &so,
                                             &s[p][c]) != SHARDNET_OK ||
                shardnet_session_set_input(s[p][c], 0, SHARDNET_DTYPE_FLOAT32,
                                           in.rank, dims, x) != SHARDNET_OK ||
                shardnet_session_run(s[p][c]) != SHARDNET_OK) /* warm */
                return fail("session");
        }
    double *t = calloc((size_t)(nplans * NCODEC * rounds), sizeof *t);
    double bytes[MAXPLANS][NCODEC] = {{0}};
    for (long r = 0; r < rounds; r++)
        for (int p = 0; p < nplans; p++)
            for (int c = 0; c < NCODEC; c++) {
                unsigned long long b0 = sn_transport_bytes_sent();
                double t0 = bench_now();
                for (long k = 0; k < runs; k++)
                    if (shardnet_session_run(s[p][c]) != SHARDNET_OK)
                        return fail("run");
                t[(p * NCODEC + c) * rounds + r] =
                    (bench_now() - t0) / (double)runs;
                bytes[p][c] = (double)(sn_transport_bytes_sent() - b0) /
                              (double)runs;
            }
    /* Both processes' bytes, and process 0's times (every run ends with
     * the outputs on every process: the times agree). */
    double all[2 * MAXPLANS * NCODEC];
    if (sn_world_allgather(bytes, sizeof bytes, all) != SHARDNET_OK)
        return fail("all-gather");
    if (shardnet_job_process() == 0) {
        printf("%-28s %-5s %12s %14s %8s\n", "plan", "comm", "ms/run",
               "bytes/run", "bytes");
        for (int p = 0; p < nplans; p++)
            for (int c = 0; c < NCODEC; c++) {
                double b = 0, b32 = 0;
                for (unsigned q = 0; q < shardnet_job_processes() && q < 2;
                     q++) {
                    b += all[q * MAXPLANS * NCODEC + p * NCODEC + c];
                    b32 += all[q * MAXPLANS * NCODEC + p * NCODEC];
                }
                const char *plan = strrchr(argv[6 + p], '/');
                printf("%-28s %-5s %12.3f %14.0f %7.1f%%\n",
                       plan ? plan + 1 : argv[6 + p], names[c],
                       1e3 * bench_median(t + (p * NCODEC + c) * rounds,
                                          (int)rounds),
                       b, 100.0 * b / b32);
            }
    }
    for (int p = 0; p < nplans; p++)
        for (int c = 0; c < NCODEC; c++)
            shardnet_session_free(s[p][c]);
    for (int c = 0; c < NCODEC; c++)
        shardnet_context_free(ctx[c]);
    shardnet_model_free(m);
    free(x);
    free(t);
    return 0;
}
