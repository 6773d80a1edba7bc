/*
 * shardnet run: run an ONNX model on inputs from files (or random ones),
 * whole or split over devices, in batches of rows, repeated or as a
 * stream; write the outputs as .npy files and print the times.  The steps
 * follow the order of a run: options, the session, the inputs, the runs,
 * the trace, the outputs and the times.
 */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

typedef struct run_opts {
    cli_session_args sa; /* and --plan; batch 0: --batch not given */
    const char *model, *outdir, *trace;
    const char *inputs[CLI_MAX_IO]; /* --input: NAME=FILE or FILE */
    size_t ninputs;
    long repeat;
    int stream;
} run_opts;

/* What a run holds, released by release_job. */
typedef struct run_job {
    shardnet_model_t *m;
    shardnet_context_t *ctx;
    shardnet_session_t *s;
    size_t nin, nout;
    shardnet_tensor in[CLI_MAX_IO]; /* data: shardnet_host_alloc's, once
                                       run_model has moved it there */
    int moved[CLI_MAX_IO];          /* in[k].data is host memory */
    int given[CLI_MAX_IO]; /* in[k] came from a file */
    /* The inputs run in batches of CHUNK rows of their first dimension,
     * NCHUNKS of them for the ROWS of a run. */
    int64_t rows, chunk, nchunks;
    /* Each output of the first run, its rows gathered over the batches. */
    void *outbuf[CLI_MAX_IO];
    size_t outbytes[CLI_MAX_IO];
    shardnet_tensor_info outinfo[CLI_MAX_IO];
    double *lat; /* seconds of each run, --repeat of them */
    double streamed; /* seconds of the --stream */
    size_t nbatches; /* batches in the stream */
} run_job;

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s run MODEL [--devices LIST] [--input [NAME=]FILE]...\n"
            "                    [--output-dir DIR] [--batch B] [--repeat N]\n"
            "                    [--split none|layer|tensor|hybrid|replicated|\n"
            "                             data|auto]\n"
            "                    [--micro-batches M] [--comm fp32|fp16|bf16|int8]\n"
            "                    [--trace FILE] [--plan FILE] [--stream]\n"
            "                    [--progress]\n"
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
            "                       three devices or more), replicated\n"
            "                       (pipeline stages, each on a group of\n"
            "                       consecutive devices that take its\n"
            "                       micro-batches in turn, each holding\n"
            "                       the stage whole; the planner's best\n"
            "                       grouping, or a plan's 'replicas 2,1'),\n"
            "                       data (every device runs the whole\n"
            "                       model on rows of\n"
            "                       the batch of its own, as many as its\n"
            "                       measured speed finishes with the others)\n"
            "                       or auto (the fastest estimate of none,\n"
            "                       layer, tensor, hybrid, replicated and\n"
            "                       data; the default with several devices)\n"
            "  -m, --micro-batches M  layer split: micro-batches per batch\n"
            "                       (default: rows / 4, 1 to 8 per device;\n"
            "                       two rows or more each)\n"
            CLI_COMM_HELP
            "  -p, --plan FILE      run as a plan saved by 'shardnet plan\n"
            "                       --save' says (split, devices, groups,\n"
            "                       replicas, cuts, rows or per-operator\n"
            "                       strategies)\n"
            "      --stream         run the repeats as one stream of\n"
            "                       batches (a layer, hybrid or replicated\n"
            "                       split overlaps consecutive batches) and\n"
            "                       print\n"
            "                       its throughput\n"
            "  -t, --trace FILE     write a Chrome trace (Perfetto,\n"
            "                       chrome://tracing) of the runs: one track\n"
            "                       per device; kernels are waited for\n"
            "      --progress       show the progress of long work (weights\n"
            "                       uploaded and packed, devices profiled)\n"
            "                       even where standard error is not a\n"
            "                       terminal (where it is, always)\n"
            "  -h, --help           show this help\n",
            cli_prog);
}

/* Fills *O from the options; CLI_GO_ON or the exit status. */
static int parse_options(int argc, char **argv, run_opts *o)
{
    static const struct option opts[] = {
        CLI_SESSION_LONGOPTS,
        {"input", required_argument, 0, 'i'},
        {"output-dir", required_argument, 0, 'o'},
        {"repeat", required_argument, 0, 'r'},
        {"trace", required_argument, 0, 't'},
        {"plan", required_argument, 0, 'p'},
        {"stream", no_argument, 0, 'T'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int c, status;

    while ((c = cli_next_option(argc, argv, CLI_SESSION_SHORTOPTS "i:o:r:t:p:h",
                                opts, usage, &status)) != -1) {
        switch (c) {
        case 't':
            o->trace = optarg;
            break;
        case 'T':
            o->stream = 1;
            break;
        case 'p':
            o->sa.sopts.plan_file = optarg;
            break;
        case 'i':
            if (o->ninputs == CLI_MAX_IO) {
                fprintf(stderr, "%s run: too many inputs\n", cli_prog);
                return 2;
            }
            o->inputs[o->ninputs++] = optarg;
            break;
        case 'o':
            o->outdir = optarg;
            break;
        case 'r':
            if (cli_number_option("run", "repeat", 1, 1000000, &o->repeat))
                return 2;
            break;
        default:
            if (cli_session_option("run", c, &o->sa) > 0)
                return 2;
        }
    }
    if (status != CLI_GO_ON)
        return status;
    if (optind + 1 != argc) {
        usage(stderr);
        return 2;
    }
    o->model = argv[optind];
    return CLI_GO_ON;
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
        fprintf(stderr, "%s run: out of memory\n", cli_prog);
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
                    cli_prog, u.name, t.name, outdir, names[o]);
            rc = 2;
            break;
        }
    }
    free(names);
    if (!rc && make_dirs(outdir) != 0) {
        fprintf(stderr, "%s run: cannot create the output folder %s: %s\n",
                cli_prog, outdir, strerror(errno));
        rc = 2;
    }
    return rc;
}

/* The model, the output folder, the context and the session; 0 or the exit
 * status. */
static int open_session(run_opts *o, run_job *job)
{
    shardnet_status st;
    int rc;
    if ((st = shardnet_model_load(o->model, &job->m)) != SHARDNET_OK)
        return cli_fail("loading the model", st);
    job->nin = shardnet_model_input_count(job->m);
    job->nout = shardnet_model_output_count(job->m);
    if (job->nin > CLI_MAX_IO || job->nout > CLI_MAX_IO) {
        fprintf(stderr, "%s run: the model has too many inputs or outputs\n",
                cli_prog);
        return 1;
    }
    if (o->outdir && (rc = check_outputs(job->m, o->outdir)) != 0)
        return rc;
    if ((st = cli_context_create(&o->sa, &job->ctx)) != SHARDNET_OK)
        return cli_fail("device discovery", st);
    cli_job_joined();
    if (!o->sa.spec && !getenv("SHARDNET_DEVICES") && !o->sa.sopts.plan_file)
        o->sa.spec = shardnet_device_count(job->ctx) ? "cpu:0" : NULL;
    if ((st = shardnet_session_create_with(job->ctx, job->m, o->sa.spec,
                                           &o->sa.sopts, &job->s)) !=
        SHARDNET_OK) {
        cli_fail("creating the session", st);
        return st == SHARDNET_NO_DEVICE ? 2 : 1;
    }
    return 0;
}

/* The inputs --input names, by name or in order; 0 or the exit status. */
static int read_inputs(const run_opts *o, run_job *job)
{
    shardnet_status st;
    for (size_t k = 0; k < o->ninputs; k++) {
        const char *eq = strchr(o->inputs[k], '=');
        const char *file = eq ? eq + 1 : o->inputs[k];
        size_t idx = k;
        if (eq) {
            char name[1024];
            snprintf(name, sizeof name, "%.*s", (int)(eq - o->inputs[k]),
                     o->inputs[k]);
            if ((st = shardnet_session_input_index(job->s, name, &idx))) {
                cli_fail("--input", st);
                return 2;
            }
        } else if (k >= job->nin) {
            fprintf(stderr, "%s run: %zu inputs given, the model takes %zu\n",
                    cli_prog, o->ninputs, job->nin);
            return 2;
        }
        if (job->given[idx]) {
            fprintf(stderr, "%s run: input %zu given twice\n", cli_prog, idx);
            return 2;
        }
        if ((st = shardnet_tensor_load(file, &job->in[idx])) != SHARDNET_OK)
            return cli_fail(file, st);
        job->given[idx] = 1;
    }
    return 0;
}

/* IN: random data of T's shape, symbolic dimensions BATCH (1 if 0); float32
 * in [0, 1], other types zeros.  0, or 1 after a message. */
static int random_input(const shardnet_tensor_info *t, long batch,
                        shardnet_tensor *in)
{
    size_t count = 1, es = shardnet_dtype_size(t->dtype);
    int big = 0;
    in->info = *t;
    in->info.name = NULL;
    if (!es) {
        fprintf(stderr, "%s run: cannot make random data for input '%s'\n",
                cli_prog, t->name);
        return 1;
    }
    for (int d = 0; d < t->rank; d++) {
        if (in->info.dims[d] < 0)
            in->info.dims[d] = batch ? batch : 1;
        big |= __builtin_mul_overflow(count, (size_t)in->info.dims[d], &count);
    }
    big |= __builtin_mul_overflow(count, es, &in->nbytes);
    in->data = big ? NULL : calloc(count ? count : 1, es);
    if (!in->data) {
        fprintf(stderr,
                "%s run: cannot allocate random data for input '%s' "
                "(%.0f bytes with --batch %ld): %s\n",
                cli_prog, t->name, (double)count * (double)es,
                batch ? batch : 1L, strerror(big ? EOVERFLOW : ENOMEM));
        return 1;
    }
    if (t->dtype == SHARDNET_DTYPE_FLOAT32)
        for (size_t e = 0; e < count; e++)
            ((float *)in->data)[e] = (float)rand() / (float)RAND_MAX;
    return 0;
}

/* Without any --input, random inputs; with some, each input must have had
 * one.  0 or the exit status. */
static int missing_inputs(const run_opts *o, run_job *job)
{
    for (size_t k = 0; k < job->nin; k++) {
        shardnet_tensor_info t;
        if (job->given[k])
            continue;
        shardnet_model_input(job->m, k, &t);
        if (o->ninputs) {
            fprintf(stderr, "%s run: no file for input '%s'\n", cli_prog,
                    t.name);
            return 2;
        }
        if (random_input(&t, o->sa.batch, &job->in[k]) != 0)
            return 1;
    }
    return 0;
}

/* Batches of --batch rows along the first dimension of every input. */
static void split_batches(const run_opts *o, run_job *job)
{
    const shardnet_tensor *in = job->in;
    job->rows = job->nin && in[0].info.rank ? in[0].info.dims[0] : 1;
    job->chunk =
        o->sa.batch && o->sa.batch < job->rows ? o->sa.batch : job->rows;
    for (size_t k = 1; k < job->nin; k++)
        if (!in[k].info.rank || in[k].info.dims[0] != job->rows)
            job->chunk = job->rows; /* inputs disagree on a batch: run them whole */
    /* An input of no rows is one empty batch. */
    job->nchunks =
        job->rows ? (job->rows + job->chunk - 1) / job->chunk : 1;
}

/* Bind batch B (mod the batches) of every input to the session. */
static shardnet_status bind_batch(const run_job *job, size_t b,
                                  shardnet_session_t *s)
{
    int64_t row = (int64_t)(b % (size_t)job->nchunks) * job->chunk;
    int64_t left = job->rows - row;
    int whole = job->chunk == job->rows;
    for (size_t k = 0; k < job->nin; k++) {
        const shardnet_tensor *t = &job->in[k];
        int64_t dims[SHARDNET_MAX_DIMS];
        size_t per = t->info.rank && job->rows ? t->nbytes / (size_t)job->rows
                                               : t->nbytes;
        memcpy(dims, t->info.dims, sizeof dims);
        if (!whole)
            dims[0] = left < job->chunk ? left : job->chunk;
        shardnet_status st = shardnet_session_set_input(
            s, k, t->info.dtype, t->info.rank, dims,
            (const char *)t->data + (whole ? 0 : per * (size_t)row));
        if (st != SHARDNET_OK)
            return st;
    }
    return SHARDNET_OK;
}

/* --stream asks for batch B. */
static shardnet_status feed_batch(void *user, size_t b, shardnet_session_t *s)
{
    return bind_batch(user, b, s);
}

/* Append each output of batch B to the outputs of the run; 0 or 1. */
static int gather_outputs(run_job *job, int64_t b)
{
    for (size_t o = 0; o < job->nout; o++) {
        shardnet_tensor_info t;
        const void *data;
        shardnet_session_output(job->s, o, &t, &data);
        size_t bytes = shardnet_dtype_size(t.dtype);
        for (int d = 0; d < t.rank; d++)
            bytes *= (size_t)t.dims[d];
        void *nb = realloc(job->outbuf[o], job->outbytes[o] + bytes + 1);
        if (!nb) {
            fprintf(stderr, "%s run: out of memory for output '%s'\n",
                    cli_prog, t.name);
            return 1;
        }
        job->outbuf[o] = nb;
        memcpy((char *)nb + job->outbytes[o], data, bytes);
        job->outbytes[o] += bytes;
        if (b == 0)
            job->outinfo[o] = t;
        else if (t.rank)
            job->outinfo[o].dims[0] += t.dims[0];
    }
    return 0;
}

/* A run on one device that ran out of its memory: what to try (other
 * devices are here to split it over). */
static void out_of_memory_hint(const run_opts *o, const run_job *job)
{
    const char *split = o->sa.sopts.split;
    if ((split && strcmp(split, "none") != 0) ||
        (o->sa.spec && strchr(o->sa.spec, ',')) ||
        shardnet_device_count(job->ctx) < 2 || shardnet_job_process() != 0)
        return;
    fprintf(stderr,
            "%s: the model does not fit on one device: list several with "
            "--devices and split it (--split layer holds each stage's "
            "weights on its own device), or run smaller batches "
            "(--batch)\n",
            cli_prog);
}

/* The runs, each timed, the outputs kept from the first; with --stream one
 * ordinary run (the outputs, plans made) before the stream.  0 or 1. */
static int run_repeats(const run_opts *o, run_job *job)
{
    shardnet_status st;
    for (long r = 0; r < (o->stream ? 1 : o->repeat); r++) {
        double t0 = cli_now();
        for (int64_t b = 0; b < job->nchunks; b++) {
            if ((st = bind_batch(job, (size_t)b, job->s)) != SHARDNET_OK)
                return cli_fail("binding an input", st);
            if ((st = shardnet_session_run(job->s)) != SHARDNET_OK) {
                cli_fail("running the model", st);
                if (st == SHARDNET_OUT_OF_MEMORY)
                    out_of_memory_hint(o, job);
                return 1;
            }
            if (r == 0 && gather_outputs(job, b) != 0)
                return 1;
        }
        job->lat[r] = cli_now() - t0;
    }
    return 0;
}

/* --stream: the repeats as one stream of batches, timed.  0 or 1. */
static int run_stream(const run_opts *o, run_job *job)
{
    shardnet_status st;
    job->nbatches = (size_t)o->repeat * (size_t)job->nchunks;
    double t0 = cli_now();
    if ((st = shardnet_session_run_stream(job->s, job->nbatches, feed_batch,
                                          NULL, job)) != SHARDNET_OK)
        return cli_fail("streaming", st);
    job->streamed = cli_now() - t0;
    return 0;
}

/* --trace: in an MPI job each process writes its own: FILE from process 0,
 * FILE.P from process P.  0 or 1. */
static int write_trace(const char *trace)
{
    char path[4096];
    shardnet_status st;
    if (shardnet_job_process() != 0)
        snprintf(path, sizeof path, "%s.%u", trace, shardnet_job_process());
    else
        snprintf(path, sizeof path, "%s", trace);
    if ((st = shardnet_trace_stop(path)) != SHARDNET_OK)
        return cli_fail("writing the trace", st);
    printf("wrote trace %s%s\n", path,
           shardnet_job_processes() > 1 ? " (and FILE.P from process P)" : "");
    return 0;
}

/* Every input's data into host memory for the run's devices
 * (shardnet_host_alloc: pinned where they include a GPU, whose copies then
 * run at the link's speed, as a program would feed it); 0 or 1. */
static int move_inputs(const run_opts *o, run_job *job)
{
    for (size_t k = 0; k < job->nin; k++) {
        shardnet_tensor *t = &job->in[k];
        void *p = shardnet_host_alloc(job->ctx, o->sa.spec, t->nbytes);
        if (!p)
            return cli_fail("input memory", SHARDNET_OUT_OF_MEMORY);
        if (t->nbytes)
            memcpy(p, t->data, t->nbytes);
        free(t->data);
        t->data = p;
        job->moved[k] = 1;
    }
    return 0;
}

/* Run the model as the options say, traced with --trace; 0 or 1. */
static int run_model(const run_opts *o, run_job *job)
{
    int rc;
    if ((rc = move_inputs(o, job)) != 0)
        return rc;
    split_batches(o, job);
    job->lat = calloc((size_t)o->repeat, sizeof *job->lat);
    if (!job->lat) {
        fprintf(stderr, "%s run: out of memory\n", cli_prog);
        return 1;
    }
    if (o->trace)
        shardnet_trace_start();
    rc = run_repeats(o, job);
    cli_progress_end(); /* the first run's uploads and packing are over */
    if (rc != 0)
        return rc;
    if (o->stream && (rc = run_stream(o, job)) != 0)
        return rc;
    return o->trace ? write_trace(o->trace) : 0;
}

/* Each output to DIR/<name>.npy; 0 or 1. */
static int write_outputs(const char *outdir, const run_job *job)
{
    for (size_t o = 0; o < job->nout; o++) {
        char name[512], path[4096];
        shardnet_status st;
        safe_name(name, sizeof name, job->outinfo[o].name);
        snprintf(path, sizeof path, "%s/%s.npy", outdir, name);
        if ((st = shardnet_tensor_save(path, &job->outinfo[o],
                                       job->outbuf[o])))
            return cli_fail(path, st);
        printf("wrote %s\n", path);
    }
    return 0;
}

/* The stream's throughput, or with --repeat the latency of the runs. */
static void print_times(const run_opts *o, run_job *job)
{
    if (o->stream) {
        double streamed = job->streamed, nbatches = (double)job->nbatches;
        printf("stream: %zu batches of %lld rows in %.3f ms: %.1f rows/s, "
               "%.3f ms per batch\n",
               job->nbatches, (long long)job->chunk, streamed * 1e3,
               nbatches * (double)job->chunk / streamed,
               streamed / nbatches * 1e3);
    } else if (o->repeat > 1) {
        long repeat = o->repeat;
        double *lat = job->lat, sum = 0;
        for (long r = 0; r < repeat; r++)
            sum += lat[r];
        qsort(lat, (size_t)repeat, sizeof *lat, cli_cmp_double);
        double med = repeat % 2 ? lat[repeat / 2]
                                : 0.5 * (lat[repeat / 2 - 1] + lat[repeat / 2]);
        printf("runs: %ld of %lld rows in batches of %lld\n", repeat,
               (long long)job->rows, (long long)job->chunk);
        printf("latency per run: median %.3f ms, mean %.3f ms, min %.3f ms\n",
               med * 1e3, sum / (double)repeat * 1e3, lat[0] * 1e3);
        printf("throughput: %.1f rows/s (median)\n", (double)job->rows / med);
    }
}

/* The outputs (written, or their shapes printed) and the times; 0 or 1. */
static int report(const run_opts *o, run_job *job)
{
    int rc;
    /* In an MPI job every process has the outputs; process 0 writes them. */
    if (o->outdir && shardnet_job_process() != 0)
        return 0;
    if (o->outdir) {
        if ((rc = write_outputs(o->outdir, job)) != 0)
            return rc;
    } else {
        for (size_t k = 0; k < job->nout; k++)
            cli_print_tensor_info("output ", &job->outinfo[k]);
    }
    print_times(o, job);
    return 0;
}

static void release_job(run_job *job)
{
    for (size_t k = 0; k < CLI_MAX_IO; k++) {
        if (job->moved[k]) {
            shardnet_host_free(job->in[k].data);
            job->in[k].data = NULL;
        }
        shardnet_tensor_free(&job->in[k]);
        free(job->outbuf[k]);
    }
    free(job->lat);
    shardnet_session_free(job->s);
    shardnet_context_free(job->ctx);
    shardnet_model_free(job->m);
}

int cli_run(int argc, char **argv)
{
    run_opts o = {.repeat = 1};
    run_job job;
    int rc;

    if ((rc = parse_options(argc, argv, &o)) != CLI_GO_ON)
        return rc;
    memset(&job, 0, sizeof job);
    if ((rc = open_session(&o, &job)) == 0 &&
        (rc = read_inputs(&o, &job)) == 0 &&
        (rc = missing_inputs(&o, &job)) == 0 && (rc = run_model(&o, &job)) == 0)
        rc = report(&o, &job);
    if (o.trace && rc)
        shardnet_trace_stop(NULL); /* no trace of a failed run */
    release_job(&job);
    return rc;
}
