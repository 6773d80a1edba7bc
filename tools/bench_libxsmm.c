/*
 * The products of 1x1 convolutions (C = W X: W m x k, X k x n pixels) on
 * cpu:0 through the backend interface, bare and with a bias and Relu in
 * the epilogue, next to libxsmm's JIT kernels called on blocks of 64
 * pixels in the same layout (C^T = X^T W^T in libxsmm's column-major
 * form), bare and then with that epilogue as a pass over each block.  One
 * thread each (run it with SHARDNET_CPU_THREADS=1); medians of R runs.
 *
 *   bench_libxsmm [--repeat R]
 *
 * Built only where configure found libxsmm (Debian: libxsmm-dev); the
 * library does not use it: the README's section on benchmarks says why.
 */
#include <config.h>

#include <getopt.h>
#include <libxsmm.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "bench_time.h"
#include "shardnet.h"

#define PIX 64

static int repeat = 101;

typedef struct shape {
    size_t m, n, k;
} shape;

/* Deterministic values in [-1, 1]. */
static float *values(size_t n, unsigned seed)
{
    float *p = malloc(n * sizeof *p);
    if (!p) {
        fprintf(stderr, "bench_libxsmm: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        p[i] = (float)((i * 2654435761u + seed) % 2001u) / 1000.0f - 1.0f;
    return p;
}

/* shardnet's GEMM on dev (bias per row and Relu where epi), median us. */
static double time_shardnet(sn_device *dev, shape s, const float *w,
                            const float *x, const float *bias, int epi)
{
    sn_buffer *bw = NULL, *bx = NULL, *bc = NULL, *bb = NULL;
    double *t = malloc((size_t)repeat * sizeof *t), m = -1;
    if (!t || sn_buffer_alloc(dev, s.m * s.k * 4, &bw) ||
        sn_buffer_alloc(dev, s.k * s.n * 4, &bx) ||
        sn_buffer_alloc(dev, s.m * s.n * 4, &bc) ||
        sn_buffer_alloc(dev, s.m * 4, &bb) ||
        sn_buffer_write(bw, 0, w, s.m * s.k * 4) ||
        sn_buffer_write(bx, 0, x, s.k * s.n * 4) ||
        sn_buffer_write(bb, 0, bias, s.m * 4))
        goto out;
    sn_gemm_desc d = {.m = s.m, .n = s.n, .k = s.k, .alpha = 1.0f,
                      .lda = s.k, .ldb = s.n, .ldc = s.n, .batch = 1,
                      .a = {bw, 0}, .b = {bx, 0}, .c = {bc, 0},
                      .bias = {epi ? bb : NULL, 0}, .bias_rows = 1,
                      .act = epi ? SN_ACT_RELU : SN_ACT_NONE};
    for (int i = -2; i < repeat; i++) { /* two to warm up */
        double t0 = bench_now();
        if (sn_gemm(dev, &d) || sn_synchronize(dev))
            goto out;
        if (i >= 0)
            t[i] = bench_now() - t0;
    }
    m = bench_median(t, repeat) * 1e6;
out:
    sn_buffer_free(bw);
    sn_buffer_free(bx);
    sn_buffer_free(bc);
    sn_buffer_free(bb);
    free(t);
    return m;
}

/* libxsmm's kernels on blocks of PIX pixels (n a multiple of PIX), then,
 * where epi, the bias and Relu over each block; median us. */
static double time_libxsmm(shape s, const float *w, const float *x,
                           const float *bias, int epi)
{
    const libxsmm_blasint m = PIX, n = (libxsmm_blasint)s.m,
                          k = (libxsmm_blasint)s.k,
                          lda = (libxsmm_blasint)s.n,
                          ldb = (libxsmm_blasint)s.k,
                          ldc = (libxsmm_blasint)s.n;
    const float alpha = 1.0f, beta = 0.0f;
    libxsmm_smmfunction f = libxsmm_smmdispatch(m, n, k, &lda, &ldb, &ldc,
                                                &alpha, &beta, NULL, NULL);
    float *c = malloc(s.m * s.n * sizeof *c);
    double *t = malloc((size_t)repeat * sizeof *t), med = -1;
    if (f && c && t) {
        for (int i = -2; i < repeat; i++) {
            double t0 = bench_now();
            for (size_t p = 0; p < s.n; p += PIX) {
                f(x + p, w, c + p);
                for (size_t r = 0; epi && r < s.m; r++) {
                    float *row = c + r * s.n + p;
                    for (size_t j = 0; j < PIX; j++) {
                        float v = row[j] + bias[r];
                        row[j] = v < 0.0f ? 0.0f : v;
                    }
                }
            }
            if (i >= 0)
                t[i] = bench_now() - t0;
        }
        med = bench_median(t, repeat) * 1e6;
    }
    free(c);
    free(t);
    return med;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"repeat", required_argument, 0, 'r'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    /* BlazeFace's, a MobileNet's and PaddleOCR det's 1x1 layers */
    static const shape shapes[] = {{24, 16384, 24},
                                   {64, 4096, 64},
                                   {128, 1024, 128},
                                   {256, 256, 256}};
    shardnet_context_t *ctx;
    size_t idx, nd;
    int ch;

    while ((ch = getopt_long(argc, argv, "r:h", opts, NULL)) != -1) {
        if (ch == 'r' && atoi(optarg) > 0 && atoi(optarg) <= 100000) {
            repeat = atoi(optarg);
            continue;
        }
        fprintf(stderr, "usage: bench_libxsmm [--repeat R]\n");
        return ch == 'h' ? 0 : 2;
    }
    if (shardnet_context_create(&ctx) ||
        shardnet_devices_select(ctx, "cpu:0", &idx, 1, &nd) || nd != 1) {
        fprintf(stderr, "bench_libxsmm: %s\n", shardnet_last_error());
        return 1;
    }
    libxsmm_init();
    sn_device *dev = sn_context_device(ctx, idx);
    printf("cpu:0 (%u threads) and libxsmm (1 thread), medians of %d runs, "
           "microseconds\n",
           dev->info.compute_units, repeat);
    printf("%-18s %10s %10s   %14s %14s\n", "m x n x k", "shardnet",
           "libxsmm", "shardnet+epi", "libxsmm+epi");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape s = shapes[i];
        float *w = values(s.m * s.k, 1), *x = values(s.k * s.n, 2);
        float *b = values(s.m, 3);
        char name[32];
        snprintf(name, sizeof name, "%zux%zux%zu", s.m, s.n, s.k);
        printf("%-18s %10.1f %10.1f   %14.1f %14.1f\n", name,
               time_shardnet(dev, s, w, x, b, 0),
               time_libxsmm(s, w, x, b, 0), time_shardnet(dev, s, w, x, b, 1),
               time_libxsmm(s, w, x, b, 1));
        free(w);
        free(x);
        free(b);
    }
    libxsmm_finalize();
    shardnet_context_free(ctx);
    return 0;
}
