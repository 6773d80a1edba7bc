/*
 * GEMM benchmark: GFLOP/s of every device's GEMM through the backend
 * interface, next to the library underneath called directly: OpenBLAS
 * with the device's thread count for a CPU device, cuBLAS on the same GPU
 * (a handle and stream of its own) for a CUDA device; and CPU devices
 * running GEMM at the same time.
 *
 *   bench_gemm [--devices LIST] [--sizes 256,512,...] [--repeat R]
 *              [--concurrent]
 *
 * Operands are uploaded once; each timing covers the GEMM and the
 * device's synchronisation, not transfers.  Medians of R runs.
 */
#include <config.h>

#include <cblas.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "shardnet.h"
#include "bench_time.h"
#ifdef SN_HAVE_CUDA
#include "../backends/cuda/cuda.h" /* its device state, cuBLAS's table */
#endif

#define MAX_DEV 64


static void fill(float *x, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
}

typedef struct shape {
    size_t m, n, k;
} shape;

/* One device's GEMM of one shape, its operands resident on the device. */
typedef struct gemm_job {
    sn_device *dev;
    sn_gemm_desc d;
    sn_buffer *a, *b, *c;
} gemm_job;

static int job_init(gemm_job *j, sn_device *dev, shape s, const float *a,
                    const float *b)
{
    memset(j, 0, sizeof *j);
    j->dev = dev;
    if (sn_buffer_alloc(dev, s.m * s.k * 4, &j->a) ||
        sn_buffer_alloc(dev, s.k * s.n * 4, &j->b) ||
        sn_buffer_alloc(dev, s.m * s.n * 4, &j->c) ||
        sn_buffer_write(j->a, 0, a, s.m * s.k * 4) ||
        sn_buffer_write(j->b, 0, b, s.k * s.n * 4)) {
        fprintf(stderr, "%s: %s\n", dev->info.name, shardnet_last_error());
        return -1;
    }
    j->d = (sn_gemm_desc){.m = s.m, .n = s.n, .k = s.k, .alpha = 1.0f,
                          .lda = s.k, .ldb = s.n, .ldc = s.n, .batch = 1,
                          .a = {j->a, 0}, .b = {j->b, 0}, .c = {j->c, 0}};
    return 0;
}

static void job_free(gemm_job *j)
{
    sn_buffer_free(j->a);
    sn_buffer_free(j->b);
    sn_buffer_free(j->c);
}

static double job_run(gemm_job *j)
{
    double t0 = bench_now();
    if (sn_gemm(j->dev, &j->d) || sn_synchronize(j->dev)) {
        fprintf(stderr, "%s: %s\n", j->dev->info.name, shardnet_last_error());
        exit(1);
    }
    return bench_now() - t0;
}

/* Repeat until both R runs and ~0.3 s are done; returns the median time. */
static double time_job(gemm_job *j, int repeat)
{
    double t[1000], start = bench_now();
    int n = 0;
    job_run(j); /* warm-up: kernel builds, page faults */
    while (n < repeat || (bench_now() - start < 0.3 && n < 1000))
        t[n++] = job_run(j);
    return bench_median(t, n);
}

static double blas_run(shape s, const float *a, const float *b, float *c)
{
    double t0 = bench_now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)s.m, (int)s.n,
                (int)s.k, 1.0f, a, (int)s.k, b, (int)s.n, 0.0f, c, (int)s.n);
    return bench_now() - t0;
}

/*
 * The backend's GEMM and OpenBLAS called directly with `threads` threads,
 * measured in alternating blocks of ~0.25 s each so that both see the same
 * machine (this one is shared and noisy); medians of all runs of each.
 * Between blocks both sides rest 0.2 s: OpenBLAS's pool and the device's
 * OpenMP team each spin for a while after their last call, and a block
 * must not run against the other side's spinning threads.
 */
static void compare_with_blas(gemm_job *j, shape s, int threads,
                              const float *a, const float *b, float *c,
                              int repeat, double *t_backend, double *t_blas)
{
    static double tb[4000], to[4000];
    const struct timespec rest = {0, 200000000L};
    int nb = 0, no = 0, blocks = repeat < 4 ? 4 : repeat, per;
    double est;

    openblas_set_num_threads(threads);
    blas_run(s, a, b, c);
    est = blas_run(s, a, b, c);
    openblas_set_num_threads(1);
    per = (int)(0.25 / blocks * 4 / (est > 1e-7 ? est : 1e-7));
    per = per < 1 ? 1 : per > 1000 / blocks ? 1000 / blocks : per;
    for (int blk = 0; blk < blocks; blk++) {
        nanosleep(&rest, NULL);
        job_run(j); /* wake the team: not timed */
        for (int r = 0; r < per; r++)
            tb[nb++] = job_run(j);
        nanosleep(&rest, NULL);
        openblas_set_num_threads(threads);
        blas_run(s, a, b, c); /* wake OpenBLAS's threads: not timed */
        for (int r = 0; r < per; r++)
            to[no++] = blas_run(s, a, b, c);
        openblas_set_num_threads(1); /* what the CPU backend expects */
    }
    *t_backend = bench_median(tb, nb);
    *t_blas = bench_median(to, no);
}

#ifdef SN_HAVE_CUDA
/* A CUDA call in the benchmark: exit naming it when it fails. */
static void cu_check(cudaError_t err, const char *what)
{
    if (err != cudaSuccess) {
        fprintf(stderr, "bench_gemm: %s: %s\n", what, cudaGetErrorString(err));
        exit(1);
    }
}

/* cuBLAS's row-major C = A B, as the backend calls it (B first), with
 * the stream waited for. */
static double cublas_run(cublasHandle_t h, cudaStream_t st, shape s,
                         const float *a, const float *b, float *c)
{
    const float one = 1.0f, zero = 0.0f;
    double t0 = bench_now();
    if (sn_cublas.sgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)s.n, (int)s.m,
                        (int)s.k, &one, b, (int)s.n, a, (int)s.k, &zero, c,
                        (int)s.n) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "bench_gemm: cublasSgemm failed\n");
        exit(1);
    }
    cu_check(cudaStreamSynchronize(st), "cudaStreamSynchronize");
    return bench_now() - t0;
}

/* The backend's GEMM and cuBLAS called directly on the same GPU, with
 * operands of their own (copies of the job's), in alternating blocks of
 * the same number of runs; medians of each. */
static void compare_with_cublas(gemm_job *j, shape s, int repeat,
                                double *t_backend, double *t_direct)
{
    static double tb[4000], td[4000];
    const cuda_dev *cd = j->dev->impl;
    cublasHandle_t h;
    cudaStream_t st;
    float *a, *b, *c;
    int nb = 0, nd = 0, blocks = repeat < 4 ? 4 : repeat, per;
    double est;

    cu_check(cudaSetDevice(cd->ordinal), "cudaSetDevice");
    cu_check(cudaStreamCreate(&st), "cudaStreamCreate");
    if (sn_cublas.create(&h) != CUBLAS_STATUS_SUCCESS ||
        sn_cublas.set_stream(h, st) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "bench_gemm: cublasCreate failed\n");
        exit(1);
    }
    cu_check(cudaMalloc((void **)&a, s.m * s.k * 4), "cudaMalloc");
    cu_check(cudaMalloc((void **)&b, s.k * s.n * 4), "cudaMalloc");
    cu_check(cudaMalloc((void **)&c, s.m * s.n * 4), "cudaMalloc");
    cu_check(cudaMemcpy(a, j->a->handle, s.m * s.k * 4,
                        cudaMemcpyDeviceToDevice), "cudaMemcpy");
    cu_check(cudaMemcpy(b, j->b->handle, s.k * s.n * 4,
                        cudaMemcpyDeviceToDevice), "cudaMemcpy");
    job_run(j); /* warm-up of both: cuBLAS's kernels load on first use */
    cublas_run(h, st, s, a, b, c);
    est = cublas_run(h, st, s, a, b, c);
    per = (int)(0.25 / blocks * 4 / (est > 1e-7 ? est : 1e-7));
    per = per < 1 ? 1 : per > 1000 / blocks ? 1000 / blocks : per;
    for (int blk = 0; blk < blocks; blk++) {
        for (int r = 0; r < per; r++)
            tb[nb++] = job_run(j);
        for (int r = 0; r < per; r++)
            td[nd++] = cublas_run(h, st, s, a, b, c);
    }
    *t_backend = bench_median(tb, nb);
    *t_direct = bench_median(td, nd);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    sn_cublas.destroy(h);
    cudaStreamDestroy(st);
}
#endif

static double time_openblas(shape s, int threads, const float *a,
                            const float *b, float *c, int repeat)
{
    const struct timespec rest = {0, 200000000L};
    double t[1000], start;
    int n = 0;
    nanosleep(&rest, NULL); /* let the devices' teams stop spinning */
    openblas_set_num_threads(threads);
    blas_run(s, a, b, c);
    start = bench_now();
    while (n < repeat || (bench_now() - start < 0.3 && n < 1000))
        t[n++] = blas_run(s, a, b, c);
    openblas_set_num_threads(1);
    return bench_median(t, n);
}

static double gflops(shape s, double t)
{
    return 2.0 * (double)s.m * (double)s.n * (double)s.k / t * 1e-9;
}

typedef struct thread_arg {
    gemm_job *job;
    int repeat;
    pthread_barrier_t *start;
    double median_s;
} thread_arg;

static void *concurrent_main(void *p)
{
    thread_arg *ta = p;
    double t[1000];
    int n = 0;
    job_run(ta->job);
    pthread_barrier_wait(ta->start);
    double start = bench_now();
    while (n < ta->repeat || (bench_now() - start < 1.0 && n < 1000))
        t[n++] = job_run(ta->job);
    ta->median_s = bench_median(t, n);
    return NULL;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"devices", required_argument, 0, 'd'},
        {"sizes", required_argument, 0, 's'},
        {"repeat", required_argument, 0, 'r'},
        {"concurrent", no_argument, 0, 'c'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    const char *spec = NULL;
    char sizes_default[] = "256,512,1024,2048";
    char *sizes = sizes_default;
    int repeat = 5, concurrent = 0, ch;
    shape shapes[32];
    size_t nshapes = 0, idx[MAX_DEV], ndev;
    shardnet_context_t *ctx;

    while ((ch = getopt_long(argc, argv, "d:s:r:ch", opts, NULL)) != -1) {
        switch (ch) {
        case 'd':
            spec = optarg;
            break;
        case 's':
            sizes = optarg;
            break;
        case 'r':
            repeat = atoi(optarg);
            if (repeat < 1 || repeat > 1000)
                repeat = 5;
            break;
        case 'c':
            concurrent = 1;
            break;
        default:
            fprintf(stderr,
                    "usage: bench_gemm [--devices LIST] [--sizes 256,512] "
                    "[--repeat R] [--concurrent]\n");
            return ch == 'h' ? 0 : 2;
        }
    }
    for (char *tok = strtok(sizes, ","); tok && nshapes < 30;
         tok = strtok(NULL, ",")) {
        size_t v = strtoul(tok, NULL, 10);
        if (v)
            shapes[nshapes++] = (shape){v, v, v};
    }
    /* Batch-1 inference: one row times a weight matrix. */
    shapes[nshapes++] = (shape){1, 1024, 1024};
    shapes[nshapes++] = (shape){1, 4096, 4096};

    if (shardnet_context_create(&ctx) ||
        shardnet_devices_select(ctx, spec, idx, MAX_DEV, &ndev)) {
        fprintf(stderr, "bench_gemm: %s\n", shardnet_last_error());
        return 1;
    }

    if (!concurrent) {
        /* direct: OpenBLAS (cpu, with `threads`) or cuBLAS (cuda) */
        printf("%-7s %-16s %10s %10s %10s %8s\n", "device", "shape m x n x k",
               "GFLOP/s", "direct", "threads", "ratio");
        for (size_t si = 0; si < nshapes; si++) {
            shape s = shapes[si];
            float *a = malloc(s.m * s.k * 4), *b = malloc(s.k * s.n * 4),
                  *c = malloc(s.m * s.n * 4);
            fill(a, s.m * s.k, 1);
            fill(b, s.k * s.n, 2);
            for (size_t di = 0; di < ndev; di++) {
                sn_device *dev = sn_context_device(ctx, idx[di]);
                gemm_job j;
                char sh[32];
                snprintf(sh, sizeof sh, "%zux%zux%zu", s.m, s.n, s.k);
                if (job_init(&j, dev, s, a, b))
                    return 1;
                if (dev->info.kind == SHARDNET_DEVICE_CPU) {
                    int th = (int)dev->info.compute_units;
                    double tg, tob;
                    compare_with_blas(&j, s, th, a, b, c, repeat, &tg, &tob);
                    job_free(&j);
                    double g = gflops(s, tg), o = gflops(s, tob);
                    printf("%-7s %-16s %10.1f %10.1f %10d %8.3f\n",
                           dev->info.name, sh, g, o, th, g / o);
#ifdef SN_HAVE_CUDA
                } else if (dev->info.kind == SHARDNET_DEVICE_CUDA) {
                    double tg, td;
                    compare_with_cublas(&j, s, repeat, &tg, &td);
                    job_free(&j);
                    double g = gflops(s, tg), o = gflops(s, td);
                    printf("%-7s %-16s %10.1f %10.1f %10s %8.3f\n",
                           dev->info.name, sh, g, o, "-", g / o);
#endif
                } else {
                    double g = gflops(s, time_job(&j, repeat));
                    job_free(&j);
                    printf("%-7s %-16s %10.1f %10s %10s %8s\n", dev->info.name,
                           sh, g, "-", "-", "-");
                }
                fflush(stdout);
            }
            free(a);
            free(b);
            free(c);
        }
    } else {
        /* Every listed CPU device at once, each against its solo speed and
         * OpenBLAS direct on one thread per device core. */
        gemm_job jobs[MAX_DEV];
        thread_arg args[MAX_DEV];
        pthread_t th[MAX_DEV];
        size_t nj = 0;
        pthread_barrier_t bar;
        printf("%-7s %-16s %10s %10s %10s %12s\n", "device", "shape",
               "alone", "together", "OpenBLAS", "together/BLAS");
        for (size_t si = 0; si < nshapes; si++) {
            shape s = shapes[si];
            float *a = malloc(s.m * s.k * 4), *b = malloc(s.k * s.n * 4),
                  *c = malloc(s.m * s.n * 4);
            double alone[MAX_DEV];
            char sh[32];
            snprintf(sh, sizeof sh, "%zux%zux%zu", s.m, s.n, s.k);
            fill(a, s.m * s.k, 1);
            fill(b, s.k * s.n, 2);
            nj = 0;
            for (size_t di = 0; di < ndev; di++) {
                sn_device *dev = sn_context_device(ctx, idx[di]);
                if (dev->info.kind != SHARDNET_DEVICE_CPU)
                    continue;
                if (job_init(&jobs[nj], dev, s, a, b))
                    return 1;
                alone[nj] = gflops(s, time_job(&jobs[nj], repeat));
                nj++;
            }
            pthread_barrier_init(&bar, NULL, (unsigned)nj);
            for (size_t i = 0; i < nj; i++) {
                args[i] = (thread_arg){&jobs[i], repeat, &bar, 0};
                pthread_create(&th[i], NULL, concurrent_main, &args[i]);
            }
            for (size_t i = 0; i < nj; i++)
                pthread_join(th[i], NULL);
            pthread_barrier_destroy(&bar);
            for (size_t i = 0; i < nj; i++) {
                int t = (int)jobs[i].dev->info.compute_units;
                double o = gflops(s, time_openblas(s, t, a, b, c, repeat));
                double g = gflops(s, args[i].median_s);
                printf("%-7s %-16s %10.1f %10.1f %10.1f %12.3f\n",
                       jobs[i].dev->info.name, sh, alone[i], g, o, g / o);
                job_free(&jobs[i]);
            }
            fflush(stdout);
            free(a);
            free(b);
            free(c);
        }
    }
    shardnet_context_free(ctx);
    return 0;
}
