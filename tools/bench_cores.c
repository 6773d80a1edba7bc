/*
 * bench_cores: does this machine give its cores' compute in parallel now?
 *
 * Times a fixed amount of vector multiply-add work (12 independent
 * accumulators, so throughput-bound, not latency-bound) on one core alone,
 * then on every core the process may use at once, one thread pinned to
 * each, and prints
 *     cores N alone T1 ms together TN ms ratio R
 * where R = (slowest thread together) / (alone).  R near 1: the cores are
 * independent.  R near N: they share one core's arithmetic units, as when a
 * virtual machine's vCPUs run on the two hyperthreads of one physical core
 * (seen on the 2-core development machine, in spells: two threads of
 * AVX-512 then run at one thread's speed).  A latency-bound loop would not
 * show it, as hyperthreads hide each other's latency.
 *
 * tools/bench-steady.sh runs it before and after each process it times, to
 * tell the machine's spells from shardnet's own variation.
 * Usage: bench_cores [ITERATIONS]   (default 2000000, about 20 ms a run)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef float vec __attribute__((vector_size(64)));

static long iterations = 2000000;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

__attribute__((target_clones("avx512f", "avx2", "default"))) static float
multiply_adds(long n)
{
    vec a[12], m, b;
    for (int j = 0; j < 16; j++) {
        m[j] = 1.0000001f;
        b[j] = 1e-9f;
    }
    for (int k = 0; k < 12; k++)
        for (int j = 0; j < 16; j++)
            a[k][j] = (float)(k + j);
    for (long i = 0; i < n; i++)
        for (int k = 0; k < 12; k++)
            a[k] = a[k] * m + b;
    float s = 0;
    for (int k = 0; k < 12; k++)
        for (int j = 0; j < 16; j++)
            s += a[k][j];
    return s;
}

typedef struct {
    int cpu;
    double seconds;
    float sink;
} job;

static void *run(void *arg)
{
    job *j = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(j->cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        j->cpu = -1;
    double t0 = now();
    j->sink = multiply_adds(iterations);
    j->seconds = now() - t0;
    return NULL;
}

int main(int argc, char **argv)
{
    cpu_set_t allowed;
    int cpus[CPU_SETSIZE], n = 0;

    if (argc > 1 && (iterations = strtol(argv[1], NULL, 10)) <= 0) {
        fprintf(stderr, "usage: bench_cores [ITERATIONS]\n");
        return 2;
    }
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        perror("bench_cores: sched_getaffinity");
        return 1;
    }
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed))
            cpus[n++] = c;

    job alone = {.cpu = cpus[0]};
    run(&alone);

    job *jobs = calloc((size_t)n, sizeof *jobs);
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    if (!jobs || !threads) {
        fprintf(stderr, "bench_cores: out of memory\n");
        return 1;
    }
    for (int i = 0; i < n; i++) {
        jobs[i].cpu = cpus[i];
        if (pthread_create(&threads[i], NULL, run, &jobs[i]) != 0) {
            fprintf(stderr, "bench_cores: cannot start a thread\n");
            return 1;
        }
    }
    double slowest = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(threads[i], NULL);
        if (jobs[i].cpu < 0 || alone.cpu < 0) {
            fprintf(stderr, "bench_cores: cannot pin a thread to CPU %d\n",
                    cpus[i]);
            return 1;
        }
        if (jobs[i].seconds > slowest)
            slowest = jobs[i].seconds;
    }
    printf("cores %d alone %.2f ms together %.2f ms ratio %.2f\n", n,
           alone.seconds * 1e3, slowest * 1e3, slowest / alone.seconds);
    free(jobs);
    free(threads);
    return 0;
}
