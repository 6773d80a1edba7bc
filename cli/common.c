/*
 * Helpers two commands or more share: error messages in the library's
 * words, MPI jobs where process 0 speaks, opening the devices of a device
 * list, the options (--help, a bad option, numbers, a stray argument), the
 * progress line, the clock, and printing a tensor's shape.
 */
#include <config.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

int cli_fail(const char *what, shardnet_status st)
{
    const char *detail = shardnet_last_error();
    if (shardnet_job_processes() > 1)
        fprintf(stderr, "%s (process %u of %u): %s: %s%s%s\n", cli_prog,
                shardnet_job_process(), shardnet_job_processes(), what,
                shardnet_status_str(st), *detail ? ": " : "", detail);
    else
        fprintf(stderr, "%s: %s: %s%s%s\n", cli_prog, what,
                shardnet_status_str(st), *detail ? ": " : "", detail);
    return 1;
}

void cli_job_joined(void)
{
    if (shardnet_job_processes() > 1 && shardnet_job_process() != 0 &&
        !freopen("/dev/null", "w", stdout))
        fclose(stdout);
}

int cli_open_devices(const char *spec, shardnet_context_t **ctx, size_t *idx,
                     size_t *n)
{
    shardnet_status st = shardnet_context_create(ctx);
    if (st != SHARDNET_OK)
        return cli_fail("device discovery", st);
    cli_job_joined();
    st = shardnet_devices_select(*ctx, spec, idx, CLI_MAX_DEVICES, n);
    if (st != SHARDNET_OK) {
        cli_fail("device list", st);
        shardnet_context_free(*ctx);
        *ctx = NULL;
        return 2;
    }
    return 0;
}

int cli_next_option(int argc, char **argv, const char *shortopts,
                    const struct option *longopts, void (*usage)(FILE *),
                    int *status)
{
    int c = getopt_long(argc, argv, shortopts, longopts, NULL);
    *status = CLI_GO_ON;
    if (c == 'h') {
        usage(stdout);
        *status = 0;
    } else if (c == '?' || c == ':') {
        usage(stderr);
        *status = 2;
    }
    return *status == CLI_GO_ON ? c : -1;
}

int cli_help_only(int argc, char **argv, void (*usage)(FILE *))
{
    static const struct option opts[] = {{"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int status;
    /* --help ends the options, as a bad option does: one call is all. */
    cli_next_option(argc, argv, "h", opts, usage, &status);
    return status;
}

int cli_number_option(const char *command, const char *name, long lo,
                      long hi, long *out)
{
    char *end;
    long v = strtol(optarg, &end, 10);
    if (!*end && v >= lo && v <= hi) {
        *out = v;
        return 0;
    }
    fprintf(stderr, "%s %s: bad --%s '%s' (%ld..%ld)\n", cli_prog, command,
            name, optarg, lo, hi);
    return 2;
}

int cli_session_option(const char *command, int c, cli_session_args *a)
{
    long v;
    switch (c) {
    case 'd':
        a->spec = optarg;
        return 0;
    case 's':
        a->sopts.split = optarg;
        return 0;
    case 'b':
        return cli_number_option(command, "batch", 1, 1L << 24, &a->batch);
    case 'm':
        if (cli_number_option(command, "micro-batches", 1, 65536, &v))
            return 2;
        a->sopts.micro_batches = (size_t)v;
        return 0;
    case 'P':
        a->progress = 1;
        return 0;
    case 'C': {
        static const char *const names[] = {"fp32", "fp16", "bf16", "int8"};
        for (int k = 0; k < 4; k++)
            if (!strcmp(optarg, names[k])) {
                a->comm = SHARDNET_COMM_FP32 + k;
                return 0;
            }
        fprintf(stderr, "%s %s: bad --comm '%s' (fp32, fp16, bf16 or int8)\n",
                cli_prog, command, optarg);
        return 2;
    }
    default:
        return -1;
    }
}

double cli_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int cli_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int cli_extra_argument(const char *command, int argc, char **argv)
{
    if (optind >= argc)
        return 0;
    fprintf(stderr, "%s %s: unexpected argument '%s'\n", cli_prog, command,
            argv[optind]);
    return 1;
}

void cli_print_tensor_info(const char *prefix, const shardnet_tensor_info *t)
{
    printf("%s%s: %s [", prefix, t->name, shardnet_dtype_name(t->dtype));
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i] >= 0)
            printf("%s%lld", i ? ", " : "", (long long)t->dims[i]);
        else
            printf("%s%s", i ? ", " : "", t->dim_names[i] ? t->dim_names[i] : "?");
    }
    printf("]\n");
}

/* The stage the progress line shows ("" when none is open). */
static char progress_what[128];

static void show_progress(void *user, const char *what, uint64_t done,
                          uint64_t total)
{
    (void)user;
    if (progress_what[0] && strcmp(progress_what, what) != 0)
        fputc('\n', stderr); /* another stage: the last one stays shown */
    snprintf(progress_what, sizeof progress_what, "%s", what);
    if (total)
        fprintf(stderr, "\r%s: %3.0f%%\033[K", what,
                100.0 * (double)done / (double)total);
    else
        fprintf(stderr, "\r%s: %.0f MB\033[K", what, (double)done / 1e6);
    if (total && done >= total) {
        fputc('\n', stderr);
        progress_what[0] = '\0';
    }
    fflush(stderr);
}

void cli_progress_end(void)
{
    if (progress_what[0]) {
        fputc('\n', stderr);
        fflush(stderr);
        progress_what[0] = '\0';
    }
}

shardnet_status cli_context_create(const cli_session_args *a,
                                   shardnet_context_t **ctx)
{
    shardnet_context_options o = {.size = sizeof o, .comm = a->comm};
    if (a->progress || isatty(STDERR_FILENO))
        o.progress = show_progress;
    return shardnet_context_create_with(&o, ctx);
}
