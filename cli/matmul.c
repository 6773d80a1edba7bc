/*
 * shardnet matmul: C = A * B on random float32 matrices, on every listed
 * device, each result checked against a product in double precision on the
 * host, with the speed.  A quick check that a device computes what it
 * should, through the library's shardnet_matmul.
 */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

/* The largest relative error a device's product may have. */
#define MAX_REL_ERROR 1e-4

typedef struct matmul_opts {
    const char *spec;
    size_t m, n, k; /* A is MxK, B is KxN */
    long repeat;
} matmul_opts;

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s matmul [--devices LIST] [--size M[xNxK]] [--repeat R]\n"
            "\n"
            "Multiply two random float32 matrices, C = A * B (A is MxK, B is\n"
            "KxN), on every listed device; check C against a plain C product\n"
            "computed on the host and report the error and the speed.\n"
            "\n"
            "  -d, --devices LIST  devices to use (default: all, or\n"
            "                      SHARDNET_DEVICES)\n"
            "  -s, --size M[xNxK]  matrix sizes (default 512; M alone means\n"
            "                      MxMxM)\n"
            "  -r, --repeat R      timed repetitions per device (default 3)\n"
            "  -h, --help          show this help\n"
            "\n"
            "Exit status: 0 when every device matches (relative error below\n"
            "1e-4), 1 otherwise.\n",
            cli_prog);
}

/* One size at the start of S into *OUT: the digits read, or -1. */
static int parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v;
    errno = 0;
    if (*s < '0' || *s > '9')
        return -1;
    v = strtoull(s, &end, 10);
    if (errno || v == 0 || v > 65536)
        return -1;
    *out = (size_t)v;
    return (int)(end - s);
}

/* --size M or MxNxK; 0, or -1 if ARG is neither. */
static int parse_dims(const char *arg, matmul_opts *o)
{
    const char *p = arg;
    int len = parse_size(p, &o->m);
    if (len < 0)
        return -1;
    p += len;
    if (*p == '\0') {
        o->n = o->k = o->m;
        return 0;
    }
    if (*p++ != 'x' || (len = parse_size(p, &o->n)) < 0)
        return -1;
    p += len;
    if (*p++ != 'x' || (len = parse_size(p, &o->k)) < 0 || p[len])
        return -1;
    return 0;
}

/* Fills *O from the options; CLI_GO_ON or the exit status. */
static int parse_options(int argc, char **argv, matmul_opts *o)
{
    static const struct option opts[] = {{"devices", required_argument, 0, 'd'},
                                         {"size", required_argument, 0, 's'},
                                         {"repeat", required_argument, 0, 'r'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int ch, status;
    while ((ch = cli_next_option(argc, argv, "d:s:r:h", opts, usage,
                                 &status)) != -1) {
        switch (ch) {
        case 'd':
            o->spec = optarg;
            break;
        case 's':
            if (parse_dims(optarg, o) != 0) {
                fprintf(stderr,
                        "%s matmul: bad --size '%s' (expected M or MxNxK, "
                        "each 1..65536)\n",
                        cli_prog, optarg);
                return 2;
            }
            break;
        case 'r':
            if (cli_number_option("matmul", "repeat", 1, 1000, &o->repeat))
                return 2;
            break;
        }
    }
    if (status != CLI_GO_ON)
        return status;
    if (cli_extra_argument("matmul", argc, argv))
        return 2;
    return CLI_GO_ON;
}

/* A (MxK) and B (KxN) with entries in [-0.5, 0.5], the same on every run. */
static void random_matrices(const matmul_opts *o, float *a, float *b)
{
    srand(1);
    for (size_t i = 0; i < o->m * o->k; i++)
        a[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    for (size_t i = 0; i < o->k * o->n; i++)
        b[i] = (float)rand() / (float)RAND_MAX - 0.5f;
}

/* REF (MxN) = A * B, summed in double precision. */
static void host_product(const matmul_opts *o, const float *a, const float *b,
                         double *ref)
{
    size_t m = o->m, n = o->n, k = o->k;
    for (size_t i = 0; i < m; i++) {
        for (size_t j = 0; j < n; j++)
            ref[i * n + j] = 0.0;
        for (size_t p = 0; p < k; p++) {
            double av = a[i * k + p];
            for (size_t j = 0; j < n; j++)
                ref[i * n + j] += av * b[p * n + j];
        }
    }
}

/* The product on device DEV, its best time of the repeats into *BEST. */
static shardnet_status time_device(shardnet_context_t *ctx, size_t dev,
                                   const matmul_opts *o, const float *a,
                                   const float *b, float *c, double *best)
{
    /* The first call also uploads and builds kernels: not timed. */
    shardnet_status st = shardnet_matmul(ctx, dev, o->m, o->n, o->k, a, b, c);
    *best = 1e30;
    for (long r = 0; st == SHARDNET_OK && r < o->repeat; r++) {
        double t0 = cli_now();
        st = shardnet_matmul(ctx, dev, o->m, o->n, o->k, a, b, c);
        double t = cli_now() - t0;
        if (t < *best)
            *best = t;
    }
    return st;
}

/* The largest difference between C and REF over the largest |REF|. */
static double max_rel_error(const float *c, const double *ref, size_t count)
{
    double err = 0.0, scale = 0.0;
    for (size_t i = 0; i < count; i++) {
        double e = fabs((double)c[i] - ref[i]);
        if (e > err)
            err = e;
        if (fabs(ref[i]) > scale)
            scale = fabs(ref[i]);
    }
    return scale > 0 ? err / scale : err;
}

/* One line per device; 1 if any failed or was wrong, else 0. */
static int check_devices(shardnet_context_t *ctx, const size_t *idx,
                         size_t ndev, const matmul_opts *o, const float *a,
                         const float *b, float *c, const double *ref)
{
    int bad = 0;
    printf("%-7s %12s %12s %10s  %s\n", "DEVICE", "GFLOP/s", "best ms",
           "max rel", "result");
    for (size_t d = 0; d < ndev; d++) {
        shardnet_device_info info;
        shardnet_status st;
        double best, err;
        shardnet_device_get_info(ctx, idx[d], &info);
        st = time_device(ctx, idx[d], o, a, b, c, &best);
        if (st != SHARDNET_OK) {
            char what[64];
            snprintf(what, sizeof what, "matmul on %s", info.name);
            cli_fail(what, st);
            bad = 1;
            continue;
        }
        err = max_rel_error(c, ref, o->m * o->n);
        printf("%-7s %12.2f %12.3f %10.2e  %s\n", info.name,
               2.0 * (double)o->m * (double)o->n * (double)o->k / best * 1e-9,
               best * 1e3, err, err < MAX_REL_ERROR ? "ok" : "WRONG");
        if (!(err < MAX_REL_ERROR))
            bad = 1;
    }
    printf("(times include copying A and B to the device and C back)\n");
    return bad;
}

int cli_matmul(int argc, char **argv)
{
    matmul_opts o = {.m = 512, .n = 512, .k = 512, .repeat = 3};
    size_t idx[CLI_MAX_DEVICES], ndev;
    shardnet_context_t *ctx;
    float *a, *b, *c;
    double *ref;
    int rc;

    if ((rc = parse_options(argc, argv, &o)) != CLI_GO_ON)
        return rc;
    if ((rc = cli_open_devices(o.spec, &ctx, idx, &ndev)) != 0)
        return rc;
    a = malloc(o.m * o.k * sizeof *a);
    b = malloc(o.k * o.n * sizeof *b);
    c = malloc(o.m * o.n * sizeof *c);
    ref = malloc(o.m * o.n * sizeof *ref);
    if (!a || !b || !c || !ref) {
        fprintf(stderr, "%s matmul: out of memory for %zux%zux%zu\n", cli_prog,
                o.m, o.n, o.k);
        rc = 1;
    } else {
        random_matrices(&o, a, b);
        fprintf(stderr, "computing the %zux%zux%zu reference on the host...\n",
                o.m, o.n, o.k);
        host_product(&o, a, b, ref);
        rc = check_devices(ctx, idx, ndev, &o, a, b, c, ref);
    }
    free(a);
    free(b);
    free(c);
    free(ref);
    shardnet_context_free(ctx);
    return rc;
}
