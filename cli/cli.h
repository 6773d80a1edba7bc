/*
 * What the files of the shardnet command share: the program's name, the
 * entry point of each command (one file each, listed in main.c's table) and
 * the helpers two commands or more use (common.c).  The command is a client
 * of the public API (shardnet.h) only; nothing here reaches into lib/.
 */
#ifndef SHARDNET_CLI_H
#define SHARDNET_CLI_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "shardnet.h"

/* Devices one command may name, and inputs or outputs one model may have. */
#define CLI_MAX_DEVICES 256
#define CLI_MAX_IO 64

/* What a command's option parser returns when the command goes on (else the
 * exit status: 0 after --help, 2 for a bad option). */
#define CLI_GO_ON (-1)

/* The program's name, at the start of every message. */
extern const char cli_prog[];

/* The commands: argv[0] is "shardnet COMMAND", the rest its arguments;
 * each returns the process's exit status. */
int cli_devices(int argc, char **argv);
int cli_info(int argc, char **argv);
int cli_ops(int argc, char **argv);
int cli_run(int argc, char **argv);
int cli_plan(int argc, char **argv);
int cli_matmul(int argc, char **argv);
int cli_quantize(int argc, char **argv);

/* Print WHAT failed with ST and the library's detail; returns 1. */
int cli_fail(const char *what, shardnet_status st);

/* In an MPI job every process runs the command; process 0 speaks for all
 * (errors still come from whichever process has them). */
void cli_job_joined(void);

/* Open the context and resolve the device list SPEC (NULL: the default)
 * into IDX[0..*N); 0, or the exit status after printing what failed. */
int cli_open_devices(const char *spec, shardnet_context_t **ctx, size_t *idx,
                     size_t *n);

/* The options run and plan share: where and how the model runs. */
typedef struct cli_session_args {
    const char *spec;               /* --devices LIST */
    shardnet_session_options sopts; /* --split, --micro-batches (run: --plan) */
    long batch;                     /* --batch */
    int progress;                   /* --progress: even off a terminal */
    int comm;                       /* --comm: a shardnet_comm, 0 unset */
} cli_session_args;

/* Their short and long options, to begin a command's lists with. */
#define CLI_SESSION_SHORTOPTS "d:s:b:m:"
#define CLI_SESSION_LONGOPTS                                                  \
    {"devices", required_argument, 0, 'd'},                                   \
        {"split", required_argument, 0, 's'},                                 \
        {"batch", required_argument, 0, 'b'},                                 \
        {"micro-batches", required_argument, 0, 'm'},                        \
        {"progress", no_argument, 0, 'P'},                                   \
        {"comm", required_argument, 0, 'C'}

/* The help text of --comm, which every command with a session takes. */
#define CLI_COMM_HELP                                                         \
    "      --comm C         how float values cross between MPI\n"            \
    "                       processes: fp32 (as they are; the\n"             \
    "                       default, or SHARDNET_COMM), fp16, bf16\n"        \
    "                       or int8 (a scale per 256 values); a\n"           \
    "                       mostly-zero value goes sparse.  Adds an\n"       \
    "                       error per value of 2^-11 relative\n"             \
    "                       (fp16), 2^-8 (bf16), half its chunk's\n"         \
    "                       scale (int8)\n"

/* Option C of COMMAND, with optarg, into *A when it is one of them: 0, or 2
 * (the exit status) after saying its value is bad; -1 when C is none of
 * them. */
int cli_session_option(const char *command, int c, cli_session_args *a);

/* A context for A's session: the progress of long work (uploading and
 * packing weights, profiling devices, timing for the planner) on one line
 * of standard error, rewritten in place, where that is a terminal or A
 * asks for it (--progress). */
shardnet_status cli_context_create(const cli_session_args *a,
                                   shardnet_context_t **ctx);
/* The progress line's end: the next output starts on a line of its own. */
void cli_progress_end(void);

/* getopt_long's next option over ARGV (SHORTOPTS, LONGOPTS), with --help
 * and a bad option handled here: the option for the command to take, or -1
 * when there is none, *STATUS then CLI_GO_ON (the options are over), 0
 * (--help: USAGE printed on stdout) or 2 (a bad option: USAGE on stderr). */
int cli_next_option(int argc, char **argv, const char *shortopts,
                    const struct option *longopts, void (*usage)(FILE *),
                    int *status);

/* The options of a command whose only option is --help: CLI_GO_ON, or the
 * exit status as cli_next_option gives it. */
int cli_help_only(int argc, char **argv, void (*usage)(FILE *));

/* optarg, the value of COMMAND's option --NAME, as a whole number in LO..HI
 * into *OUT; 0, or 2 (the exit status) after saying it is bad. */
int cli_number_option(const char *command, const char *name, long lo,
                      long hi, long *out);

/* After getopt: says so and returns 1 when an argument is left over
 * (COMMAND takes none), else 0. */
int cli_extra_argument(const char *command, int argc, char **argv);

/* Seconds on a monotonic clock. */
double cli_now(void);

/* qsort's comparison for doubles, ascending. */
int cli_cmp_double(const void *a, const void *b);

/* Print "PREFIXname: dtype [dims]", symbolic dimensions by name. */
void cli_print_tensor_info(const char *prefix, const shardnet_tensor_info *t);

#endif
