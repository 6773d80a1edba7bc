/*
 * Convolution layers of the conv-net benchmark (issue 15) on cpu:0,
 * through the backend interface (the device's pinned team, its thread
 * count set by SHARDNET_CPU_THREADS), next to XNNPACK's operators with a
 * thread pool of the same size: its NCHW operators (shardnet's layout)
 * and its NHWC ones (XNNPACK's own, which would need the layout changed
 * around them).  Medians of R runs of each, the layers in turns.
 *
 *   bench_xnnpack [--repeat R]
 *
 * Built only where configure found XNNPACK (Debian: libxnnpack-dev
 * libpthreadpool-dev); shardnet does not use it otherwise: the README's
 * section on benchmarks says what these figures decided.
 */
#include <config.h>

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xnnpack.h>

#include "backend/backend.h"
#include "shardnet.h"
#include "bench_time.h"


static int repeat = 201;

/* The device buffers of the layer being timed (freed after it). */
static sn_buffer *bufs[8];
static size_t nbufs;

static void free_buffers(void)
{
    while (nbufs)
        sn_buffer_free(bufs[--nbufs]);
}

/* One thing to time: shardnet's steps on a device, or an XNNPACK op. */
typedef struct runner {
    sn_device *dev;
    sn_kernel kind[2];
    sn_kernel_desc desc[2];
    int nsteps;
    xnn_operator_t op;
    pthreadpool_t pool;
} runner;

static int run_once(const runner *r)
{
    if (r->op)
        return xnn_run_operator(r->op, r->pool) == xnn_status_success ? 0
                                                                      : -1;
    for (int i = 0; i < r->nsteps; i++)
        if (sn_launch(r->dev, r->kind[i], &r->desc[i]) != SHARDNET_OK)
            return -1;
    return sn_synchronize(r->dev) == SHARDNET_OK ? 0 : -1;
}

/* The median time of r in microseconds; NAN where it cannot run. */
static double median_us(const runner *r)
{
    double *t = malloc((size_t)repeat * sizeof *t), m;
    if (!t || run_once(r) || run_once(r)) { /* warm-up */
        free(t);
        return NAN;
    }
    for (int i = 0; i < repeat; i++) {
        double t0 = bench_now();
        run_once(r);
        t[i] = bench_now() - t0;
    }
    m = bench_median(t, repeat) * 1e6;
    free(t);
    return m;
}

/* Deterministic values in [-1, 1]. */
static float *values(size_t n, unsigned seed)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) {
        fprintf(stderr, "bench_xnnpack: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        p[i] = (float)((i * 2654435761u + seed) % 2001u) / 1000.0f - 1.0f;
    return p;
}

/* A device buffer holding n floats of `values` (see free_buffers()). */
static sn_view upload(sn_device *dev, size_t n, unsigned seed)
{
    sn_buffer *b = NULL;
    float *h = values(n, seed);
    if (sn_buffer_alloc(dev, (n ? n : 1) * sizeof(float), &b) ||
        sn_buffer_write(b, 0, h, n * sizeof(float))) {
        fprintf(stderr, "bench_xnnpack: %s\n", shardnet_last_error());
        exit(1);
    }
    free(h);
    bufs[nbufs++] = b;
    return (sn_view){b, 0};
}

/* One layer: ch_in -> ch_out at h x h, k x k taps, stride s, pad k / 2;
 * depthwise when dw. */
typedef struct layer {
    const char *what;
    size_t ch_in, ch_out, h, k, s;
    int dw;
} layer;

static void print_row(const layer *l, double sn, double nchw, double nhwc)
{
    printf("%-26s %4zu %4zu %4zu  %10.1f %10.1f %10.1f   %5.2fx\n", l->what,
           l->ch_in, l->ch_out, l->h, sn, nchw, nhwc,
           fmin(nchw, nhwc) / sn);
}

/* XNNPACK's operator for l in its NCHW (nchw) or NHWC form; NULL where it
 * has none for the shape. */
static xnn_operator_t xnn_layer(const layer *l, int nchw, const float *w,
                                const float *b, const float *x, float *y)
{
    const uint32_t p = (uint32_t)(l->k / 2), k = (uint32_t)l->k,
                   s = (uint32_t)l->s;
    const size_t groups = l->dw ? l->ch_in : 1;
    const size_t gin = l->dw ? 1 : l->ch_in, gout = l->dw ? 1 : l->ch_out;
    xnn_operator_t op = NULL;
    enum xnn_status st;
    if (nchw)
        st = xnn_create_convolution2d_nchw_f32(
            p, p, p, p, k, k, s, s, 1, 1, (uint32_t)groups, gin, gout,
            l->ch_in, l->ch_out, w, b, -INFINITY, INFINITY, 0, &op);
    else
        st = xnn_create_convolution2d_nhwc_f32(
            p, p, p, p, k, k, s, s, 1, 1, (uint32_t)groups, gin, gout,
            l->ch_in, l->ch_out, w, b, -INFINITY, INFINITY,
            l->dw ? XNN_FLAG_DEPTHWISE_CONVOLUTION : 0, &op);
    if (st != xnn_status_success)
        return NULL;
    st = nchw ? xnn_setup_convolution2d_nchw_f32(op, 1, l->h, l->h, x, y,
                                                 NULL)
              : xnn_setup_convolution2d_nhwc_f32(op, 1, l->h, l->h, x, y,
                                                 NULL);
    if (st != xnn_status_success) {
        xnn_delete_operator(op);
        return NULL;
    }
    return op;
}

/* shardnet's steps for l: the depthwise kernel, one GEMM (1x1), or
 * im2col then a GEMM. */
static void sn_layer(runner *r, const layer *l, size_t oh)
{
    const size_t pix = oh * oh, taps = l->k * l->k;
    const size_t kk = l->ch_in * taps;
    sn_view x = upload(r->dev, l->ch_in * l->h * l->h, 1);
    sn_view w = upload(r->dev, l->dw ? l->ch_out * taps : l->ch_out * kk, 2);
    sn_view b = upload(r->dev, l->ch_out, 3);
    sn_view y = upload(r->dev, l->ch_out * pix, 4);
    if (l->dw) {
        r->kind[0] = SN_KERNEL_DWCONV;
        r->desc[0].dwconv = (sn_dwconv_desc){
            .images = 1, .channels = l->ch_in, .mult = 1, .in_h = l->h,
            .in_w = l->h, .out_h = oh, .out_w = oh, .k_h = l->k,
            .k_w = l->k, .stride_h = l->s, .stride_w = l->s, .dil_h = 1,
            .dil_w = 1, .pad_top = l->k / 2, .pad_left = l->k / 2, .src = x,
            .weights = w, .bias = b, .dst = y};
        r->nsteps = 1;
        return;
    }
    sn_gemm_desc g = {.m = l->ch_out, .n = pix, .k = kk, .alpha = 1.0f,
                      .lda = kk, .ldb = pix, .ldc = pix, .batch = 1,
                      .a = w, .b = x, .c = y, .bias = b, .bias_rows = 1};
    r->nsteps = 0;
    if (l->k > 1) {
        sn_view col = upload(r->dev, kk * pix, 5);
        r->kind[r->nsteps] = SN_KERNEL_IM2COL;
        r->desc[r->nsteps++].im2col = (sn_im2col_desc){
            .channels = l->ch_in, .in_h = l->h, .in_w = l->h, .out_h = oh,
            .out_w = oh, .k_h = l->k, .k_w = l->k, .stride_h = l->s,
            .stride_w = l->s, .dil_h = 1, .dil_w = 1, .pad_top = l->k / 2,
            .pad_left = l->k / 2, .src = x, .dst = col};
        g.b = col;
    }
    r->kind[r->nsteps] = SN_KERNEL_GEMM;
    r->desc[r->nsteps++].gemm = g;
}

static void bench_layer(sn_device *dev, pthreadpool_t pool, const layer *l)
{
    const size_t oh = (l->h + 2 * (l->k / 2) - l->k) / l->s + 1;
    const size_t nw = l->dw ? l->ch_out * l->k * l->k
                            : l->ch_out * l->ch_in * l->k * l->k;
    float *w = values(nw, 2), *b = values(l->ch_out, 3);
    float *x = values(l->ch_in * l->h * l->h, 1);
    float *y = values(l->ch_out * oh * oh, 4);
    runner s = {.dev = dev}, xn = {.pool = pool}, xh = {.pool = pool};
    double t[3] = {NAN, NAN, NAN};

    sn_layer(&s, l, oh);
    /* XNNPACK's NHWC weights are (out, kh, kw, in): the values differ
     * from the NCHW ones, the work does not */
    xn.op = xnn_layer(l, 1, w, b, x, y);
    xh.op = xnn_layer(l, 0, w, b, x, y);
    t[0] = median_us(&s);
    if (xn.op)
        t[1] = median_us(&xn);
    if (xh.op)
        t[2] = median_us(&xh);
    print_row(l, t[0], t[1], t[2]);
    if (xn.op)
        xnn_delete_operator(xn.op);
    if (xh.op)
        xnn_delete_operator(xh.op);
    free_buffers();
    free(w);
    free(b);
    free(x);
    free(y);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"repeat", required_argument, 0, 'r'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    /* BlazeFace's and a MobileNet's layers, PaddleOCR det's 3x3 ones */
    static const layer layers[] = {
        {"depthwise 3x3", 24, 24, 128, 3, 1, 1},
        {"depthwise 3x3", 24, 24, 64, 3, 1, 1},
        {"depthwise 3x3", 64, 64, 64, 3, 1, 1},
        {"depthwise 3x3", 128, 128, 32, 3, 1, 1},
        {"depthwise 3x3", 96, 96, 16, 3, 1, 1},
        {"depthwise 3x3 stride 2", 24, 24, 128, 3, 2, 1},
        {"1x1 convolution", 24, 24, 128, 1, 1, 0},
        {"1x1 convolution", 24, 24, 64, 1, 1, 0},
        {"1x1 convolution", 64, 64, 64, 1, 1, 0},
        {"1x1 convolution", 128, 128, 32, 1, 1, 0},
        {"1x1 convolution", 256, 256, 16, 1, 1, 0},
        {"3x3 convolution", 96, 24, 80, 3, 1, 0},
        {"3x3 convolution", 96, 24, 40, 3, 1, 0},
    };
    shardnet_context_t *ctx;
    size_t idx, n;
    pthreadpool_t pool = NULL;
    int ch, threads;

    while ((ch = getopt_long(argc, argv, "r:h", opts, NULL)) != -1) {
        if (ch == 'r' && atoi(optarg) > 0 && atoi(optarg) <= 100000) {
            repeat = atoi(optarg);
            continue;
        }
        fprintf(stderr, "usage: bench_xnnpack [--repeat R]\n");
        return ch == 'h' ? 0 : 2;
    }
    if (shardnet_context_create(&ctx) ||
        shardnet_devices_select(ctx, "cpu:0", &idx, 1, &n) || n != 1) {
        fprintf(stderr, "bench_xnnpack: %s\n", shardnet_last_error());
        return 1;
    }
    if (xnn_initialize(NULL) != xnn_status_success) {
        fprintf(stderr, "bench_xnnpack: XNNPACK does not run on this CPU\n");
        return 1;
    }
    sn_device *dev = sn_context_device(ctx, idx);
    threads = (int)dev->info.compute_units;
    if (threads > 1 && !(pool = pthreadpool_create((size_t)threads))) {
        fprintf(stderr, "bench_xnnpack: no thread pool\n");
        return 1;
    }
    printf("cpu:0 and XNNPACK with %d thread%s, medians of %d runs, "
           "microseconds\n",
           threads, threads == 1 ? "" : "s", repeat);
    printf("%-26s %4s %4s %4s  %10s %10s %10s   %6s\n", "layer", "in", "out",
           "size", "shardnet", "XNN NCHW", "XNN NHWC", "best/sn");
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++)
        bench_layer(dev, pool, &layers[i]);
    if (pool)
        pthreadpool_destroy(pool);
    xnn_deinitialize();
    shardnet_context_free(ctx);
    return 0;
}
