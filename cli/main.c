/*
 * shardnet: the command-line tool.  This file holds what comes before a
 * command: the general usage, --version, the library's log on stderr, the
 * choice of BLAS kernels, and the dispatch to a command by its name.  Each
 * command lives in a file of its own under cli/ (devices.c, info.c, ops.c,
 * run.c, plan.c, matmul.c, quantize.c), helpers they share in common.c,
 * and everything uses the public API (shardnet.h) only.
 *
 * Adding a command NAME: write cli/NAME.c with `int cli_NAME(int argc,
 * char **argv)` (its own --help, options and exit status; see info.c for a
 * small one), declare it in cli.h, add one row to `commands` below (it also
 * puts the command in 'shardnet --help'), and list the file in
 * shardnet_SOURCES in Makefile.am.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

const char cli_prog[] = "shardnet";

/* The commands, in the order 'shardnet --help' lists them; a summary of
 * more than one line has '\n' between its lines. */
static const struct {
    const char *name;
    const char *summary;
    int (*fn)(int argc, char **argv);
} commands[] = {
    {"devices", "list the devices found on this machine", cli_devices},
    {"info", "describe an ONNX model: inputs, outputs, operators", cli_info},
    {"ops", "list the ONNX operators shardnet runs, with their opsets",
     cli_ops},
    {"run", "run an ONNX model on inputs from files", cli_run},
    {"plan",
     "show how a model would be split across devices, with\n"
     "estimated and measured times",
     cli_plan},
    {"matmul",
     "multiply two random matrices on each device and check\n"
     "the result against a plain C product",
     cli_matmul},
    {"quantize",
     "write a copy of an ONNX model with smaller weights\n"
     "(int8, int4 or fp16)",
     cli_quantize},
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage_main(FILE *out)
{
    fprintf(out,
            "Usage: %s [--help] [--version] COMMAND [ARGS]\n"
            "\n"
            "Run neural networks across every CPU socket and OpenCL device.\n"
            "\n"
            "Commands:\n",
            cli_prog);
    for (size_t i = 0; i < NCOMMANDS; i++) {
        const char *line = commands[i].summary, *nl;
        fprintf(out, "  %-10s", commands[i].name);
        /* Further lines of the summary under its first. */
        while ((nl = strchr(line, '\n')) != NULL) {
            fprintf(out, "%.*s\n%12s", (int)(nl - line), line, "");
            line = nl + 1;
        }
        fprintf(out, "%s\n", line);
    }
    fprintf(out,
            "\n"
            "Run '%s COMMAND --help' for the options of a command.\n"
            "\n"
            "Devices are named KIND:N (cpu:0, cl:1); a device list is a\n"
            "comma-separated list of names, kinds (cpu, cl) or 'all'.  The\n"
            "environment variable SHARDNET_DEVICES gives the default list.\n",
            cli_prog);
}

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

static const char *const log_names[] = {"error", "warn", "info", "debug"};

static void log_stderr(shardnet_log_level level, const char *msg, void *user)
{
    (void)user;
    fprintf(stderr, "%s: %s: %s\n", cli_prog,
            (unsigned)level < 4 ? log_names[level] : "log", msg);
}

/* SHARDNET_LOG=error|warn|info|debug prints the library's log. */
static void setup_log(void)
{
    const char *e = getenv("SHARDNET_LOG");
    if (!e || !*e)
        return;
    for (int i = 0; i < 4; i++)
        if (!strcmp(e, log_names[i])) {
            shardnet_set_log(log_stderr, (shardnet_log_level)i, NULL);
            return;
        }
    fprintf(stderr, "%s: SHARDNET_LOG='%s' is not error, warn, info or "
                    "debug; ignored\n",
            cli_prog, e);
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
    for (size_t i = 0; i < NCOMMANDS; i++) {
        if (!strcmp(argv[1], commands[i].name)) {
            /* getopt's messages then name the command too. */
            char name[64];
            snprintf(name, sizeof name, "%s %s", cli_prog, commands[i].name);
            argv[1] = name;
            return commands[i].fn(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "%s: unknown command '%s' (try '%s --help')\n", cli_prog,
            argv[1], cli_prog);
    return 2;
}
