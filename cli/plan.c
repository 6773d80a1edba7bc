/*
 * shardnet plan: how a model would run on the listed devices (the
 * library's estimates for each split and its choice), then a few runs on
 * inputs of zeros to set the measured time beside the estimate; --save
 * writes the plan for 'shardnet run --plan'.
 */
#include <config.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Timed runs after the first, of which the median is reported. */
#define TIMED_RUNS 9

typedef struct plan_opts {
    cli_session_args sa;
    const char *model, *save;
} plan_opts;

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s plan MODEL [--devices LIST] [--split S] [--batch B]\n"
            "                     [--comm fp32|fp16|bf16|int8] [--save FILE]\n"
            "                     [--progress]\n"
            "\n"
            "Show how the model would run on the listed devices: the\n"
            "estimated time and memory of one device (each of them), of the\n"
            "layer split with its stages, of the hybrid splits (three\n"
            "devices or more), of the replicated splits (stages on groups\n"
            "of devices taking micro-batches in turn, PipeDream's '2-1'),\n"
            "of the data split with its rows per device\n"
            "and of the tensor split, the bytes each moves,\n"
            "with each product's strategies the search priced\n"
            "and the choice; what the tensor split cuts when it runs or is\n"
            "chosen; then run batches of zeros that way and report the time\n"
            "they took (and, for a hybrid split, what its group stages'\n"
            "searched tensor splits cut).  SHARDNET_MEMORY_LIMIT (e.g. 512M)\n"
            "caps the memory the planner may use on each device.\n"
            "\n"
            "  -d, --devices LIST   devices (default: all, or SHARDNET_DEVICES)\n"
            "  -s, --split S        none, layer, tensor, hybrid, replicated,\n"
            "                       data or auto\n"
            "                       (default: auto with several devices)\n"
            "  -b, --batch B        size of symbolic dimensions (default 1)\n"
            "  -m, --micro-batches M  layer split: micro-batches per batch\n"
            "                       (two rows or more each)\n"
            CLI_COMM_HELP
            "  -S, --save FILE      write the plan chosen (split, devices,\n"
            "                       groups, replicas, cuts, rows or\n"
            "                       strategies) for\n"
            "                       'shardnet run --plan FILE'\n"
            "      --progress       show the progress of long work even where\n"
            "                       standard error is not a terminal\n"
            "  -h, --help           show this help\n",
            cli_prog);
}

/* Fills *O from the options; CLI_GO_ON or the exit status. */
static int parse_options(int argc, char **argv, plan_opts *o)
{
    static const struct option opts[] = {
        CLI_SESSION_LONGOPTS,
        {"save", required_argument, 0, 'S'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int c, status;

    while ((c = cli_next_option(argc, argv, CLI_SESSION_SHORTOPTS "S:h", opts,
                                usage, &status)) != -1) {
        if (c == 'S')
            o->save = optarg;
        else if (cli_session_option("plan", c, &o->sa) > 0)
            return 2;
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

/* Bind zeros to every input, symbolic dimensions --batch, into DATA[k];
 * 0 or 1. */
static int bind_zeros(shardnet_model_t *m, shardnet_session_t *s, long batch,
                      void **data)
{
    size_t nin = shardnet_model_input_count(m);
    shardnet_status st = SHARDNET_OK;
    for (size_t k = 0; k < nin && k < CLI_MAX_IO; k++) {
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
                                             data[k])) != SHARDNET_OK)
            return cli_fail("binding inputs", st);
    }
    return 0;
}

/* The first run (plans, uploads) and the median of the timed runs after
 * it, with what the session says of the running; 0 or 1. */
static int time_runs(shardnet_session_t *s)
{
    shardnet_status st;
    double runs[TIMED_RUNS], t0 = cli_now(), t1;
    char text[16384];
    st = shardnet_session_run(s);
    cli_progress_end();
    if (st != SHARDNET_OK)
        return cli_fail("running the model", st);
    t1 = cli_now();
    for (int r = 0; r < TIMED_RUNS; r++) {
        double a = cli_now();
        if ((st = shardnet_session_run(s)) != SHARDNET_OK)
            return cli_fail("running the model", st);
        runs[r] = cli_now() - a;
    }
    qsort(runs, TIMED_RUNS, sizeof runs[0], cli_cmp_double);
    shardnet_session_describe(s, text, sizeof text);
    char *last = strstr(text, "running:");
    printf("%s", last ? last : "");
    printf("measured: first run %.3f ms (plans, uploads), then median of %d "
           "runs %.3f ms\n",
           (t1 - t0) * 1e3, TIMED_RUNS, runs[TIMED_RUNS / 2] * 1e3);
    return 0;
}

/* After the session is made: the plan, the runs, --save; 0 or 1. */
static int show_plan(const plan_opts *o, shardnet_model_t *m,
                     shardnet_session_t *s, void **data)
{
    shardnet_status st;
    char text[16384];
    int rc;
    if ((rc = bind_zeros(m, s, o->sa.batch, data)) != 0)
        return rc;
    shardnet_session_describe(s, text, sizeof text);
    fputs(text, stdout);
    if ((rc = time_runs(s)) != 0)
        return rc;
    if (o->save) {
        if ((st = shardnet_session_save_plan(s, o->save)) != SHARDNET_OK)
            return cli_fail("saving the plan", st);
        printf("wrote plan %s\n", o->save);
    }
    return 0;
}

int cli_plan(int argc, char **argv)
{
    plan_opts o = {.sa.batch = 1};
    shardnet_context_t *ctx = NULL;
    shardnet_model_t *m = NULL;
    shardnet_session_t *s = NULL;
    void *data[CLI_MAX_IO] = {0};
    shardnet_status st;
    int rc;

    if ((rc = parse_options(argc, argv, &o)) != CLI_GO_ON)
        return rc;
    if ((st = shardnet_model_load(o.model, &m)) != SHARDNET_OK)
        return cli_fail("loading the model", st);
    if ((st = cli_context_create(&o.sa, &ctx)) != SHARDNET_OK) {
        rc = cli_fail("device discovery", st);
        goto out;
    }
    cli_job_joined();
    if ((st = shardnet_session_create_with(ctx, m, o.sa.spec, &o.sa.sopts, &s))) {
        cli_fail("creating the session", st);
        rc = st == SHARDNET_NO_DEVICE || st == SHARDNET_INVALID_ARGUMENT ? 2 : 1;
        goto out;
    }
    rc = show_plan(&o, m, s, data);
out:
    for (size_t k = 0; k < CLI_MAX_IO; k++)
        free(data[k]);
    shardnet_session_free(s);
    shardnet_context_free(ctx);
    shardnet_model_free(m);
    return rc;
}
