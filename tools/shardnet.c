/* shardnet: the command-line tool.  Uses only the public API. */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shardnet.h"

#define MAX_DEVICES 256

typedef int (*command_fn)(int argc, char **argv);

static const char *prog = "shardnet";

static void usage_main(FILE *out)
{
    fprintf(out,
            "Usage: %s [--help] [--version] COMMAND [ARGS]\n"
            "\n"
            "Run neural networks across every CPU socket and OpenCL device.\n"
            "\n"
            "Commands:\n"
            "  devices   list the devices found on this machine\n"
            "  matmul    multiply two random matrices on each device and check\n"
            "            the result against a plain C product\n"
            "\n"
            "Run '%s COMMAND --help' for the options of a command.\n"
            "\n"
            "Devices are named KIND:N (cpu:0, cl:1); a device list is a\n"
            "comma-separated list of names, kinds (cpu, cl) or 'all'.  The\n"
            "environment variable SHARDNET_DEVICES gives the default list.\n",
            prog, prog);
}

/* Print the library's error detail after a failed call. */
static int fail(const char *what, shardnet_status st)
{
    const char *detail = shardnet_last_error();
    fprintf(stderr, "%s: %s: %s%s%s\n", prog, what, shardnet_status_str(st),
            *detail ? ": " : "", detail);
    return 1;
}

static void format_bytes(char *out, size_t cap, uint64_t bytes)
{
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    snprintf(out, cap, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

static const char *kind_name(shardnet_device_kind kind)
{
    switch (kind) {
    case SHARDNET_DEVICE_CPU:
        return "cpu";
    case SHARDNET_DEVICE_OPENCL:
        return "opencl";
    case SHARDNET_DEVICE_CUDA:
        return "cuda";
    }
    return "?";
}

/* Open the context and resolve the device list; prints its own errors. */
static int open_devices(const char *spec, shardnet_context_t **ctx,
                        size_t *idx, size_t *n)
{
    shardnet_status st = shardnet_context_create(ctx);
    if (st != SHARDNET_OK)
        return fail("device discovery", st);
    st = shardnet_devices_select(*ctx, spec, idx, MAX_DEVICES, n);
    if (st != SHARDNET_OK) {
        fail("device list", st);
        shardnet_context_free(*ctx);
        *ctx = NULL;
        return 2;
    }
    return 0;
}

static void usage_devices(FILE *out)
{
    fprintf(out,
            "Usage: %s devices [--devices LIST]\n"
            "\n"
            "List the devices found on this machine: CPU packages (through\n"
            "hwloc) and OpenCL devices (through the ICD loader).\n"
            "\n"
            "  -d, --devices LIST  show only these devices (default: all, or\n"
            "                      SHARDNET_DEVICES)\n"
            "  -h, --help          show this help\n",
            prog);
}

static int cmd_devices(int argc, char **argv)
{
    static const struct option opts[] = {{"devices", required_argument, 0, 'd'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *spec = NULL;
    shardnet_context_t *ctx;
    size_t idx[MAX_DEVICES], n;
    int c, rc;

    while ((c = getopt_long(argc, argv, "d:h", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
            spec = optarg;
            break;
        case 'h':
            usage_devices(stdout);
            return 0;
        default:
            usage_devices(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s devices: unexpected argument '%s'\n", prog,
                argv[optind]);
        return 2;
    }
    if ((rc = open_devices(spec, &ctx, idx, &n)) != 0)
        return rc;

    printf("%-7s %-6s %5s %10s %10s %7s %5s %-8s %s\n", "DEVICE", "KIND",
           "UNITS", "MEMORY", "MAX-ALLOC", "UNIFIED", "NUMA", "CPUS",
           "MODEL / VENDOR / DRIVER");
    for (size_t i = 0; i < n; i++) {
        shardnet_device_info info;
        char mem[32], alloc[32], numa[16];
        shardnet_device_get_info(ctx, idx[i], &info);
        format_bytes(mem, sizeof mem, info.global_mem);
        format_bytes(alloc, sizeof alloc, info.max_alloc);
        if (info.numa_node >= 0)
            snprintf(numa, sizeof numa, "%d", info.numa_node);
        else
            snprintf(numa, sizeof numa, "-");
        printf("%-7s %-6s %5u %10s %10s %7s %5s %-8s %s / %s / %s\n",
               info.name, kind_name(info.kind), info.compute_units, mem, alloc,
               info.host_unified ? "yes" : "no", numa,
               *info.cpuset ? info.cpuset : "-", info.model, info.vendor,
               info.driver);
    }
    shardnet_context_free(ctx);
    return 0;
}

static void usage_matmul(FILE *out)
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
            prog);
}

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

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmd_matmul(int argc, char **argv)
{
    static const struct option opts[] = {{"devices", required_argument, 0, 'd'},
                                         {"size", required_argument, 0, 's'},
                                         {"repeat", required_argument, 0, 'r'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *spec = NULL;
    size_t m = 512, n = 512, k = 512, idx[MAX_DEVICES], ndev;
    long repeat = 3;
    shardnet_context_t *ctx;
    float *a, *b, *c;
    double *ref;
    int ch, rc, bad = 0;

    while ((ch = getopt_long(argc, argv, "d:s:r:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'd':
            spec = optarg;
            break;
        case 's': {
            const char *p = optarg;
            int len = parse_size(p, &m);
            if (len < 0)
                goto bad_size;
            p += len;
            if (*p == '\0') {
                n = k = m;
                break;
            }
            if (*p++ != 'x' || (len = parse_size(p, &n)) < 0)
                goto bad_size;
            p += len;
            if (*p++ != 'x' || (len = parse_size(p, &k)) < 0 || p[len])
                goto bad_size;
            break;
        bad_size:
            fprintf(stderr,
                    "%s matmul: bad --size '%s' (expected M or MxNxK, each "
                    "1..65536)\n",
                    prog, optarg);
            return 2;
        }
        case 'r': {
            char *end;
            repeat = strtol(optarg, &end, 10);
            if (*end || repeat < 1 || repeat > 1000) {
                fprintf(stderr, "%s matmul: bad --repeat '%s' (1..1000)\n",
                        prog, optarg);
                return 2;
            }
            break;
        }
        case 'h':
            usage_matmul(stdout);
            return 0;
        default:
            usage_matmul(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s matmul: unexpected argument '%s'\n", prog,
                argv[optind]);
        return 2;
    }
    if ((rc = open_devices(spec, &ctx, idx, &ndev)) != 0)
        return rc;

    a = malloc(m * k * sizeof *a);
    b = malloc(k * n * sizeof *b);
    c = malloc(m * n * sizeof *c);
    ref = malloc(m * n * sizeof *ref);
    if (!a || !b || !c || !ref) {
        fprintf(stderr, "%s matmul: out of memory for %zux%zux%zu\n", prog, m,
                n, k);
        rc = 1;
        goto out;
    }
    srand(1);
    for (size_t i = 0; i < m * k; i++)
        a[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    for (size_t i = 0; i < k * n; i++)
        b[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    fprintf(stderr, "computing the %zux%zux%zu reference on the host...\n", m,
            n, k);
    for (size_t i = 0; i < m; i++) {
        for (size_t j = 0; j < n; j++)
            ref[i * n + j] = 0.0;
        for (size_t p = 0; p < k; p++) {
            double av = a[i * k + p];
            for (size_t j = 0; j < n; j++)
                ref[i * n + j] += av * b[p * n + j];
        }
    }

    printf("%-7s %12s %12s %10s  %s\n", "DEVICE", "GFLOP/s", "best ms",
           "max rel", "result");
    for (size_t d = 0; d < ndev; d++) {
        shardnet_device_info info;
        shardnet_status st;
        double best = 1e30, err = 0.0, scale = 0.0;
        shardnet_device_get_info(ctx, idx[d], &info);
        /* The first call also uploads and builds kernels: not timed. */
        st = shardnet_matmul(ctx, idx[d], m, n, k, a, b, c);
        for (long r = 0; st == SHARDNET_OK && r < repeat; r++) {
            double t0 = now_s();
            st = shardnet_matmul(ctx, idx[d], m, n, k, a, b, c);
            double t = now_s() - t0;
            if (t < best)
                best = t;
        }
        if (st != SHARDNET_OK) {
            char what[64];
            snprintf(what, sizeof what, "matmul on %s", info.name);
            fail(what, st);
            bad = 1;
            continue;
        }
        for (size_t i = 0; i < m * n; i++) {
            double e = fabs((double)c[i] - ref[i]);
            if (e > err)
                err = e;
            if (fabs(ref[i]) > scale)
                scale = fabs(ref[i]);
        }
        err = scale > 0 ? err / scale : err;
        printf("%-7s %12.2f %12.3f %10.2e  %s\n", info.name,
               2.0 * (double)m * (double)n * (double)k / best * 1e-9,
               best * 1e3, err, err < 1e-4 ? "ok" : "WRONG");
        if (!(err < 1e-4))
            bad = 1;
    }
    printf("(times include copying A and B to the device and C back)\n");
    rc = bad;
out:
    free(a);
    free(b);
    free(c);
    free(ref);
    shardnet_context_free(ctx);
    return rc;
}

static const struct {
    const char *name;
    command_fn fn;
} commands[] = {
    {"devices", cmd_devices},
    {"matmul", cmd_matmul},
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage_main(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        usage_main(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
        printf("shardnet %s (library %s)\n", SHARDNET_VERSION_STRING,
               shardnet_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (!strcmp(argv[1], commands[i].name)) {
            char name[64];
            snprintf(name, sizeof name, "%s %s", prog, commands[i].name);
            argv[1] = name;
            return commands[i].fn(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "%s: unknown command '%s' (try '%s --help')\n", prog,
            argv[1], prog);
    return 2;
}
