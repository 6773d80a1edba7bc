/* shardnet: the command-line tool.  Uses only the public API. */
#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
            "  info      describe an ONNX model: inputs, outputs, operators\n"
            "  run       run an ONNX model on inputs from files\n"
            "  plan      show how a model would be split across devices, with\n"
            "            estimated and measured times\n"
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
    if (shardnet_job_processes() > 1)
        fprintf(stderr, "%s (process %u of %u): %s: %s%s%s\n", prog,
                shardnet_job_process(), shardnet_job_processes(), what,
                shardnet_status_str(st), *detail ? ": " : "", detail);
    else
        fprintf(stderr, "%s: %s: %s%s%s\n", prog, what,
                shardnet_status_str(st), *detail ? ": " : "", detail);
    return 1;
}

/* In an MPI job every process runs the command; process 0 speaks for all
 * (errors still come from whichever process has them). */
static void job_joined(void)
{
    if (shardnet_job_processes() > 1 && shardnet_job_process() != 0 &&
        !freopen("/dev/null", "w", stdout))
        fclose(stdout);
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
    job_joined();
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


static const char *dtype_name(shardnet_dtype t)
{
    switch (t) {
    case SHARDNET_DTYPE_FLOAT32:
        return "float32";
    case SHARDNET_DTYPE_FLOAT64:
        return "float64";
    case SHARDNET_DTYPE_INT64:
        return "int64";
    case SHARDNET_DTYPE_INT32:
        return "int32";
    case SHARDNET_DTYPE_INT8:
        return "int8";
    case SHARDNET_DTYPE_UINT8:
        return "uint8";
    case SHARDNET_DTYPE_BOOL:
        return "bool";
    default:
        return "?";
    }
}

static void print_tensor_info(const char *prefix, const shardnet_tensor_info *t)
{
    printf("%s%s: %s [", prefix, t->name, dtype_name(t->dtype));
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i] >= 0)
            printf("%s%lld", i ? ", " : "", (long long)t->dims[i]);
        else
            printf("%s%s", i ? ", " : "", t->dim_names[i] ? t->dim_names[i] : "?");
    }
    printf("]\n");
}

static void usage_info(FILE *out)
{
    fprintf(out,
            "Usage: %s info MODEL\n"
            "\n"
            "Describe an ONNX model: its inputs and outputs (symbolic\n"
            "dimensions by name), the operators it uses after simplification,\n"
            "its parameter count, and the operators shardnet cannot run.\n"
            "\n"
            "  -h, --help   show this help\n",
            prog);
}

static int cmd_info(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    shardnet_model_t *m;
    shardnet_status st;
    char text[8192];
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'h') {
            usage_info(stdout);
            return 0;
        }
        usage_info(stderr);
        return 2;
    }
    if (optind + 1 != argc) {
        usage_info(stderr);
        return 2;
    }
    st = shardnet_model_load(argv[optind], &m);
    if (st != SHARDNET_OK)
        return fail("loading the model", st);
    printf("model: %s\n", argv[optind]);
    for (size_t i = 0; i < shardnet_model_input_count(m); i++) {
        shardnet_tensor_info t;
        shardnet_model_input(m, i, &t);
        print_tensor_info("input ", &t);
    }
    for (size_t i = 0; i < shardnet_model_output_count(m); i++) {
        shardnet_tensor_info t;
        shardnet_model_output(m, i, &t);
        print_tensor_info("output ", &t);
    }
    shardnet_model_describe(m, text, sizeof text);
    fputs(text, stdout);
    shardnet_model_unsupported(m, text, sizeof text);
    printf("unsupported: %s\n", *text ? text : "none");
    shardnet_model_free(m);
    return 0;
}

static void usage_run(FILE *out)
{
    fprintf(out,
            "Usage: %s run MODEL [--devices LIST] [--input [NAME=]FILE]...\n"
            "                    [--output-dir DIR] [--batch B] [--repeat N]\n"
            "                    [--split none|layer|tensor|hybrid|auto]\n"
            "                    [--micro-batches M]\n"
            "                    [--trace FILE] [--plan FILE] [--stream]\n"
            "\n"
            "Run an ONNX model.  Inputs come from .npy or ONNX .pb tensor\n"
            "files; without NAME= they are taken in the model's input order.\n"
            "Without any --input, inputs are random (for timing).  Each\n"
            "output is written to DIR/<output name>.npy.\n"
            "\n"
            "  -d, --devices LIST   device to run on (default: SHARDNET_DEVICES,\n"
            "                       else the first device)\n"
            "  -i, --input SPEC     NAME=FILE or FILE; repeat for each input\n"
            "  -o, --output-dir DIR write the outputs here (created if needed)\n"
            "  -b, --batch B        run the inputs in batches of B rows (their\n"
            "                       first dimension); with random inputs, the\n"
            "                       size of symbolic dimensions (default 1)\n"
            "  -r, --repeat N       run N times and print latency and\n"
            "                       throughput (default 1)\n"
            "  -s, --split S        none (one device), layer (pipeline\n"
            "                       stages over the listed devices, cut to\n"
            "                       balance their measured speeds), tensor\n"
            "                       (every device runs the model on a\n"
            "                       shard of the weights, partial results\n"
            "                       combined by collectives), hybrid\n"
            "                       (pipeline stages, each tensor-split\n"
            "                       over a group of consecutive devices;\n"
            "                       three devices or more) or auto (the\n"
            "                       fastest estimate of none, layer, tensor\n"
            "                       and hybrid; the default with several\n"
            "                       devices)\n"
            "  -m, --micro-batches M  layer split: micro-batches per batch\n"
            "                       (default: rows / 4, 1 to 8 per device)\n"
            "  -p, --plan FILE      run as a plan saved by 'shardnet plan\n"
            "                       --save' says (split, devices, groups,\n"
            "                       cuts or per-operator strategies)\n"
            "      --stream         run the repeats as one stream of\n"
            "                       batches (a layer or hybrid split\n"
            "                       overlaps consecutive batches) and print\n"
            "                       its throughput\n"
            "  -t, --trace FILE     write a Chrome trace (Perfetto,\n"
            "                       chrome://tracing) of the runs: one track\n"
            "                       per device; kernels are waited for\n"
            "  -h, --help           show this help\n",
            prog);
}

/* Output names may hold '/' or ':'; keep file names tame. */
static void safe_name(char *dst, size_t cap, const char *name)
{
    size_t i = 0;
    for (; name[i] && i + 1 < cap; i++) {
        char ch = name[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                 (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.';
        dst[i] = ok && !(i == 0 && ch == '.') ? ch : '_';
    }
    dst[i] = '\0';
}

/* mkdir -p: DIR and the folders above it; -1 with errno set. */
static int make_dirs(const char *dir)
{
    char path[4096];
    struct stat sb;
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(path, dir, n + 1);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return -1;
    if (stat(path, &sb) != 0)
        return -1;
    if (!S_ISDIR(sb.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return access(path, W_OK | X_OK);
}

/*
 * Before the run: the output folder exists (created if needed) and no two
 * outputs map to one file name (safe_name makes 'a/b' and 'a_b' alike);
 * 2 with a message otherwise.
 */
static int check_outputs(shardnet_model_t *m, const char *outdir)
{
    size_t nout = shardnet_model_output_count(m);
    char (*names)[512] = calloc(nout ? nout : 1, sizeof *names);
    int rc = 0;
    if (!names) {
        fprintf(stderr, "%s run: out of memory\n", prog);
        return 1;
    }
    for (size_t o = 0; o < nout && !rc; o++) {
        shardnet_tensor_info t;
        shardnet_model_output(m, o, &t);
        safe_name(names[o], sizeof names[o], t.name);
        for (size_t q = 0; q < o; q++) {
            shardnet_tensor_info u;
            if (strcmp(names[q], names[o]))
                continue;
            shardnet_model_output(m, q, &u);
            fprintf(stderr,
                    "%s run: outputs '%s' and '%s' would both be written to "
                    "%s/%s.npy (file names keep letters, digits, '-', '_' "
                    "and '.'; the rest become '_')\n",
                    prog, u.name, t.name, outdir, names[o]);
            rc = 2;
            break;
        }
    }
    free(names);
    if (!rc && make_dirs(outdir) != 0) {
        fprintf(stderr, "%s run: cannot create the output folder %s: %s\n",
                prog, outdir, strerror(errno));
        rc = 2;
    }
    return rc;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define MAX_IO 64

/* --stream: batch b binds chunk b (mod the chunks) of every input. */
typedef struct stream_src {
    shardnet_tensor *in;
    size_t nin;
    int64_t rows, chunk;
} stream_src;

static shardnet_status feed_chunk(void *user, size_t b,
                                  shardnet_session_t *s)
{
    stream_src *src = user;
    /* No rows: one empty batch. */
    int64_t nchunks = src->rows ? (src->rows + src->chunk - 1) / src->chunk : 1;
    int64_t row = (int64_t)(b % (size_t)nchunks) * src->chunk;
    int64_t take = src->rows - row < src->chunk ? src->rows - row : src->chunk;
    for (size_t k = 0; k < src->nin; k++) {
        const shardnet_tensor *t = &src->in[k];
        int64_t dims[SHARDNET_MAX_DIMS];
        int whole = src->chunk == src->rows;
        size_t per = t->info.rank && src->rows
                         ? t->nbytes / (size_t)src->rows
                         : t->nbytes;
        memcpy(dims, t->info.dims, sizeof dims);
        if (!whole)
            dims[0] = take;
        shardnet_status st = shardnet_session_set_input(
            s, k, t->info.dtype, t->info.rank, dims,
            (const char *)t->data + (whole ? 0 : per * (size_t)row));
        if (st != SHARDNET_OK)
            return st;
    }
    return SHARDNET_OK;
}

static int cmd_run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"devices", required_argument, 0, 'd'},
        {"input", required_argument, 0, 'i'},
        {"output-dir", required_argument, 0, 'o'},
        {"batch", required_argument, 0, 'b'},
        {"repeat", required_argument, 0, 'r'},
        {"split", required_argument, 0, 's'},
        {"micro-batches", required_argument, 0, 'm'},
        {"trace", required_argument, 0, 't'},
        {"plan", required_argument, 0, 'p'},
        {"stream", no_argument, 0, 'T'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    shardnet_session_options sopts = {.split = NULL};
    int stream = 0;
    const char *spec = NULL, *outdir = NULL, *specs[MAX_IO], *trace = NULL;
    size_t nspecs = 0, nin, nout;
    long batch = 0, repeat = 1;
    shardnet_context_t *ctx = NULL;
    shardnet_model_t *m = NULL;
    shardnet_session_t *s = NULL;
    shardnet_tensor in[MAX_IO];
    void *outbuf[MAX_IO] = {0};
    int given[MAX_IO] = {0};
    size_t outbytes[MAX_IO] = {0};
    shardnet_tensor_info outinfo[MAX_IO];
    double *lat = NULL;
    int c, rc = 1;
    shardnet_status st;

    memset(in, 0, sizeof in);
    while ((c = getopt_long(argc, argv, "d:i:o:b:r:s:m:t:p:h", opts, NULL)) !=
           -1) {
        char *end;
        switch (c) {
        case 't':
            trace = optarg;
            break;
        case 'T':
            stream = 1;
            break;
        case 'p':
            sopts.plan_file = optarg;
            break;
        case 's':
            sopts.split = optarg;
            break;
        case 'm': {
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 65536) {
                fprintf(stderr, "%s run: bad --micro-batches '%s'\n", prog,
                        optarg);
                return 2;
            }
            sopts.micro_batches = (size_t)v;
            break;
        }
        case 'd':
            spec = optarg;
            break;
        case 'i':
            if (nspecs == MAX_IO) {
                fprintf(stderr, "%s run: too many inputs\n", prog);
                return 2;
            }
            specs[nspecs++] = optarg;
            break;
        case 'o':
            outdir = optarg;
            break;
        case 'b':
            batch = strtol(optarg, &end, 10);
            if (*end || batch < 1 || batch > (1L << 24)) {
                fprintf(stderr, "%s run: bad --batch '%s'\n", prog, optarg);
                return 2;
            }
            break;
        case 'r':
            repeat = strtol(optarg, &end, 10);
            if (*end || repeat < 1 || repeat > 1000000) {
                fprintf(stderr, "%s run: bad --repeat '%s'\n", prog, optarg);
                return 2;
            }
            break;
        case 'h':
            usage_run(stdout);
            return 0;
        default:
            usage_run(stderr);
            return 2;
        }
    }
    if (optind + 1 != argc) {
        usage_run(stderr);
        return 2;
    }
    if ((st = shardnet_model_load(argv[optind], &m)) != SHARDNET_OK)
        return fail("loading the model", st);
    nin = shardnet_model_input_count(m);
    nout = shardnet_model_output_count(m);
    if (nin > MAX_IO || nout > MAX_IO) {
        fprintf(stderr, "%s run: the model has too many inputs or outputs\n",
                prog);
        goto out;
    }
    if (outdir && (rc = check_outputs(m, outdir)) != 0)
        goto out;
    rc = 1;
    if ((st = shardnet_context_create(&ctx)) != SHARDNET_OK) {
        fail("device discovery", st);
        goto out;
    }
    job_joined();
    if (!spec && !getenv("SHARDNET_DEVICES") && !sopts.plan_file)
        spec = shardnet_device_count(ctx) ? "cpu:0" : NULL;
    if ((st = shardnet_session_create_with(ctx, m, spec, &sopts, &s)) !=
        SHARDNET_OK) {
        fail("creating the session", st);
        rc = st == SHARDNET_NO_DEVICE ? 2 : 1;
        goto out;
    }

    /* Inputs: from files (by name or in order), or random. */
    for (size_t k = 0; k < nspecs; k++) {
        const char *eq = strchr(specs[k], '=');
        const char *file = eq ? eq + 1 : specs[k];
        size_t idx = k;
        if (eq) {
            char name[1024];
            snprintf(name, sizeof name, "%.*s", (int)(eq - specs[k]), specs[k]);
            if ((st = shardnet_session_input_index(s, name, &idx))) {
                fail("--input", st);
                rc = 2;
                goto out;
            }
        } else if (k >= nin) {
            fprintf(stderr, "%s run: %zu inputs given, the model takes %zu\n",
                    prog, nspecs, nin);
            rc = 2;
            goto out;
        }
        if (given[idx]) {
            fprintf(stderr, "%s run: input %zu given twice\n", prog, idx);
            rc = 2;
            goto out;
        }
        if ((st = shardnet_tensor_load(file, &in[idx])) != SHARDNET_OK) {
            fail(file, st);
            goto out;
        }
        given[idx] = 1;
    }
    for (size_t k = 0; k < nin; k++) {
        shardnet_tensor_info t;
        size_t count = 1, es;
        if (given[k])
            continue;
        shardnet_model_input(m, k, &t);
        if (nspecs) {
            fprintf(stderr, "%s run: no file for input '%s'\n", prog, t.name);
            rc = 2;
            goto out;
        }
        in[k].info = t;
        in[k].info.name = NULL;
        es = shardnet_dtype_size(t.dtype);
        if (!es) {
            fprintf(stderr, "%s run: cannot make random data for input '%s'\n",
                    prog, t.name);
            goto out;
        }
        int big = 0;
        for (int d = 0; d < t.rank; d++) {
            if (in[k].info.dims[d] < 0)
                in[k].info.dims[d] = batch ? batch : 1;
            big |= __builtin_mul_overflow(count, (size_t)in[k].info.dims[d],
                                          &count);
        }
        big |= __builtin_mul_overflow(count, es, &in[k].nbytes);
        in[k].data = big ? NULL : calloc(count ? count : 1, es);
        if (!in[k].data) {
            fprintf(stderr,
                    "%s run: cannot allocate random data for input '%s' "
                    "(%.0f bytes with --batch %ld): %s\n",
                    prog, t.name, (double)count * (double)es,
                    batch ? batch : 1L, strerror(big ? EOVERFLOW : ENOMEM));
            goto out;
        }
        if (t.dtype == SHARDNET_DTYPE_FLOAT32)
            for (size_t e = 0; e < count; e++)
                ((float *)in[k].data)[e] = (float)rand() / (float)RAND_MAX;
    }

    /* Chunks of `batch` rows along the first dimension of every input. */
    int64_t rows = nin && in[0].info.rank ? in[0].info.dims[0] : 1;
    int64_t chunk = batch && batch < rows ? batch : rows;
    for (size_t k = 1; k < nin; k++)
        if (!in[k].info.rank || in[k].info.dims[0] != rows)
            chunk = rows; /* inputs disagree on a batch: run them whole */
    /* An input of no rows is one empty batch. */
    int64_t nchunks = rows ? (rows + chunk - 1) / chunk : 1;
    lat = calloc((size_t)repeat, sizeof *lat);
    if (!lat) {
        fprintf(stderr, "%s run: out of memory\n", prog);
        goto out;
    }
    if (trace)
        shardnet_trace_start();
    /* With --stream, one ordinary pass (the outputs, plans made), then the
     * repeats as one stream. */
    for (long r = 0; r < (stream ? 1 : repeat); r++) {
        double t0 = now_s();
        for (int64_t ci = 0; ci < nchunks; ci++) {
            int64_t row = ci * chunk;
            int64_t take = rows - row < chunk ? rows - row : chunk;
            for (size_t k = 0; k < nin; k++) {
                int64_t dims[SHARDNET_MAX_DIMS];
                size_t per = in[k].info.rank && rows
                                 ? in[k].nbytes / (size_t)rows
                                 : in[k].nbytes;
                memcpy(dims, in[k].info.dims, sizeof dims);
                if (chunk != rows)
                    dims[0] = take;
                st = shardnet_session_set_input(
                    s, k, in[k].info.dtype, in[k].info.rank, dims,
                    (const char *)in[k].data + (chunk != rows ? per * (size_t)row : 0));
                if (st != SHARDNET_OK) {
                    fail("binding an input", st);
                    goto out;
                }
            }
            if ((st = shardnet_session_run(s)) != SHARDNET_OK) {
                fail("running the model", st);
                goto out;
            }
            if (r > 0)
                continue;
            /* Gather each output's rows from every chunk. */
            for (size_t o = 0; o < nout; o++) {
                shardnet_tensor_info t;
                const void *data;
                shardnet_session_output(s, o, &t, &data);
                size_t bytes = shardnet_dtype_size(t.dtype);
                for (int d = 0; d < t.rank; d++)
                    bytes *= (size_t)t.dims[d];
                void *nb = realloc(outbuf[o], outbytes[o] + bytes + 1);
                if (!nb) {
                    fprintf(stderr, "%s run: out of memory for output '%s'\n",
                            prog, t.name);
                    goto out;
                }
                outbuf[o] = nb;
                memcpy((char *)nb + outbytes[o], data, bytes);
                outbytes[o] += bytes;
                if (row == 0)
                    outinfo[o] = t;
                else if (t.rank)
                    outinfo[o].dims[0] += t.dims[0];
            }
        }
        lat[r] = now_s() - t0;
    }

    double streamed = 0;
    size_t nbatches = 0;
    if (stream) {
        stream_src src = {in, nin, rows, chunk};
        nbatches = (size_t)repeat * (size_t)nchunks;
        double t0 = now_s();
        if ((st = shardnet_session_run_stream(s, nbatches, feed_chunk, NULL,
                                              &src)) != SHARDNET_OK) {
            fail("streaming", st);
            goto out;
        }
        streamed = now_s() - t0;
    }
    if (trace) {
        /* In an MPI job each process writes its own: FILE from process 0,
         * FILE.P from process P. */
        char path[4096];
        if (shardnet_job_process() != 0)
            snprintf(path, sizeof path, "%s.%u", trace, shardnet_job_process());
        else
            snprintf(path, sizeof path, "%s", trace);
        if ((st = shardnet_trace_stop(path)) != SHARDNET_OK) {
            fail("writing the trace", st);
            goto out;
        }
        printf("wrote trace %s%s\n", path,
               shardnet_job_processes() > 1 ? " (and FILE.P from process P)"
                                            : "");
    }
    /* In an MPI job every process has the outputs; process 0 writes them. */
    if (outdir && shardnet_job_process() != 0) {
        rc = 0;
        goto out;
    }
    if (outdir) {
        for (size_t o = 0; o < nout; o++) {
            char name[512], path[4096];
            safe_name(name, sizeof name, outinfo[o].name);
            snprintf(path, sizeof path, "%s/%s.npy", outdir, name);
            if ((st = shardnet_tensor_save(path, &outinfo[o], outbuf[o]))) {
                fail(path, st);
                goto out;
            }
            printf("wrote %s\n", path);
        }
    } else {
        for (size_t o = 0; o < nout; o++)
            print_tensor_info("output ", &outinfo[o]);
    }
    if (stream) {
        printf("stream: %zu batches of %lld rows in %.3f ms: %.1f rows/s, "
               "%.3f ms per batch\n",
               nbatches, (long long)chunk, streamed * 1e3,
               (double)nbatches * (double)chunk / streamed,
               streamed / (double)nbatches * 1e3);
    } else if (repeat > 1) {
        double sum = 0;
        for (long r = 0; r < repeat; r++)
            sum += lat[r];
        qsort(lat, (size_t)repeat, sizeof *lat, cmp_dbl);
        double med = repeat % 2 ? lat[repeat / 2]
                                : 0.5 * (lat[repeat / 2 - 1] + lat[repeat / 2]);
        printf("runs: %ld of %lld rows in batches of %lld\n", repeat,
               (long long)rows, (long long)chunk);
        printf("latency per run: median %.3f ms, mean %.3f ms, min %.3f ms\n",
               med * 1e3, sum / (double)repeat * 1e3, lat[0] * 1e3);
        printf("throughput: %.1f rows/s (median)\n", (double)rows / med);
    }
    rc = 0;
out:
    if (trace && rc)
        shardnet_trace_stop(NULL);
    for (size_t k = 0; k < MAX_IO; k++) {
        shardnet_tensor_release(&in[k]);
        free(outbuf[k]);
    }
    free(lat);
    shardnet_session_free(s);
    shardnet_context_free(ctx);
    shardnet_model_free(m);
    return rc;
}

static void usage_plan(FILE *out)
{
    fprintf(out,
            "Usage: %s plan MODEL [--devices LIST] [--split S] [--batch B]\n"
            "                     [--save FILE]\n"
            "\n"
            "Show how the model would run on the listed devices: the\n"
            "estimated time and memory of one device (each of them), of the\n"
            "layer split with its stages, of the hybrid splits (three\n"
            "devices or more) and of the tensor split, the bytes each moves,\n"
            "and the choice; what the tensor split cuts when it runs or is\n"
            "chosen; then run batches of zeros that way and report the time\n"
            "they took.  SHARDNET_MEMORY_LIMIT (e.g. 512M) caps the memory\n"
            "the planner may use on each device.\n"
            "\n"
            "  -d, --devices LIST   devices (default: all, or SHARDNET_DEVICES)\n"
            "  -s, --split S        none, layer, tensor, hybrid or auto\n"
            "                       (default: auto with several devices)\n"
            "  -b, --batch B        size of symbolic dimensions (default 1)\n"
            "  -m, --micro-batches M  layer split: micro-batches per batch\n"
            "  -S, --save FILE      write the plan chosen (split, devices,\n"
            "                       groups, cuts or strategies) for 'shardnet run\n"
            "                       --plan FILE'\n"
            "  -h, --help           show this help\n",
            prog);
}

static int cmd_plan(int argc, char **argv)
{
    static const struct option opts[] = {
        {"devices", required_argument, 0, 'd'},
        {"split", required_argument, 0, 's'},
        {"batch", required_argument, 0, 'b'},
        {"micro-batches", required_argument, 0, 'm'},
        {"save", required_argument, 0, 'S'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    shardnet_session_options sopts = {.split = NULL};
    const char *spec = NULL, *save = NULL;
    long batch = 1;
    shardnet_context_t *ctx = NULL;
    shardnet_model_t *m = NULL;
    shardnet_session_t *s = NULL;
    void *data[MAX_IO] = {0};
    char text[16384];
    int c, rc = 1;
    shardnet_status st;

    while ((c = getopt_long(argc, argv, "d:s:b:m:S:h", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'S':
            save = optarg;
            break;
        case 'd':
            spec = optarg;
            break;
        case 's':
            sopts.split = optarg;
            break;
        case 'b':
            batch = strtol(optarg, &end, 10);
            if (*end || batch < 1 || batch > (1L << 24)) {
                fprintf(stderr, "%s plan: bad --batch '%s'\n", prog, optarg);
                return 2;
            }
            break;
        case 'm':
            sopts.micro_batches = (size_t)strtoul(optarg, &end, 10);
            if (*end || !sopts.micro_batches) {
                fprintf(stderr, "%s plan: bad --micro-batches '%s'\n", prog,
                        optarg);
                return 2;
            }
            break;
        case 'h':
            usage_plan(stdout);
            return 0;
        default:
            usage_plan(stderr);
            return 2;
        }
    }
    if (optind + 1 != argc) {
        usage_plan(stderr);
        return 2;
    }
    if ((st = shardnet_model_load(argv[optind], &m)) != SHARDNET_OK)
        return fail("loading the model", st);
    if ((st = shardnet_context_create(&ctx)) != SHARDNET_OK) {
        fail("device discovery", st);
        goto out;
    }
    job_joined();
    if ((st = shardnet_session_create_with(ctx, m, spec, &sopts, &s))) {
        fail("creating the session", st);
        rc = st == SHARDNET_NO_DEVICE || st == SHARDNET_INVALID_ARGUMENT ? 2 : 1;
        goto out;
    }
    size_t nin = shardnet_model_input_count(m);
    for (size_t k = 0; k < nin && k < MAX_IO; k++) {
        shardnet_tensor_info t;
        size_t count = 1;
        shardnet_model_input(m, k, &t);
        for (int d = 0; d < t.rank; d++) {
            if (t.dims[d] < 0)
                t.dims[d] = batch;
            count *= (size_t)t.dims[d];
        }
        data[k] = calloc(count ? count : 1, shardnet_dtype_size(t.dtype) + 1);
        if (!data[k] ||
            (st = shardnet_session_set_input(s, k, t.dtype, t.rank, t.dims,
                                             data[k])) != SHARDNET_OK) {
            fail("binding inputs", st);
            goto out;
        }
    }
    shardnet_session_describe(s, text, sizeof text);
    fputs(text, stdout);
    double t0 = now_s();
    if ((st = shardnet_session_run(s)) != SHARDNET_OK) {
        fail("running the model", st);
        goto out;
    }
    double t1 = now_s(), runs[9];
    for (int r = 0; r < 9; r++) {
        double a = now_s();
        if ((st = shardnet_session_run(s)) != SHARDNET_OK) {
            fail("running the model", st);
            goto out;
        }
        runs[r] = now_s() - a;
    }
    qsort(runs, 9, sizeof runs[0], cmp_dbl);
    shardnet_session_describe(s, text, sizeof text);
    char *last = strstr(text, "running:");
    printf("%s", last ? last : "");
    printf("measured: first run %.3f ms (plans, uploads), then median of 9 "
           "runs %.3f ms\n",
           (t1 - t0) * 1e3, runs[4] * 1e3);
    if (save) {
        if ((st = shardnet_session_save_plan(s, save)) != SHARDNET_OK) {
            fail("saving the plan", st);
            goto out;
        }
        printf("wrote plan %s\n", save);
    }
    rc = 0;
out:
    for (size_t k = 0; k < MAX_IO; k++)
        free(data[k]);
    shardnet_session_free(s);
    shardnet_context_free(ctx);
    shardnet_model_free(m);
    return rc;
}

static const struct {
    const char *name;
    command_fn fn;
} commands[] = {
    {"devices", cmd_devices},
    {"info", cmd_info},
    {"run", cmd_run},
    {"plan", cmd_plan},
    {"matmul", cmd_matmul},
};

/*
 * OpenBLAS chooses its kernels when it is loaded; on a CPU it does not know
 * it may take kernels of half the speed (see shardnet_blas_coretype_hint).
 * Start again, once, with the right ones.  SHARDNET_NO_REEXEC=1 disables.
 */
static void choose_blas_kernels(char **argv)
{
    const char *hint = shardnet_blas_coretype_hint();
    if (!hint || getenv("SHARDNET_NO_REEXEC"))
        return;
    setenv("OPENBLAS_CORETYPE", hint, 1);
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE"); /* exec failed: carry on as we are */
}

static void log_stderr(shardnet_log_level level, const char *msg, void *user)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    (void)user;
    fprintf(stderr, "%s: %s: %s\n", prog,
            (unsigned)level < 4 ? names[level] : "log", msg);
}

/* SHARDNET_LOG=error|warn|info|debug prints the library's log. */
static void setup_log(void)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    const char *e = getenv("SHARDNET_LOG");
    if (!e || !*e)
        return;
    for (int i = 0; i < 4; i++)
        if (!strcmp(e, names[i])) {
            shardnet_set_log(log_stderr, (shardnet_log_level)i, NULL);
            return;
        }
    fprintf(stderr, "%s: SHARDNET_LOG='%s' is not error, warn, info or "
                    "debug; ignored\n",
            prog, e);
}

int main(int argc, char **argv)
{
    choose_blas_kernels(argv);
    setup_log();
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
