/*
 * shardnet devices: one line per device of the device list (all by
 * default), with its kind, compute units, memory, NUMA node and CPUs, and
 * what the driver says it is.
 */
#include <config.h>

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s devices [--devices LIST]\n"
            "\n"
            "List the devices found on this machine: CPU packages (through\n"
            "hwloc), OpenCL devices (through the ICD loader) and, in a build\n"
            "with CUDA, NVIDIA GPUs (through the CUDA runtime).\n"
            "\n"
            "  -d, --devices LIST  show only these devices (default: all, or\n"
            "                      SHARDNET_DEVICES)\n"
            "  -h, --help          show this help\n"
            "\n"
            "A device list names devices (cpu:0, cl:1), kinds (cpu, cl) or all,\n"
            "and partitions of a CPU device, each a device of its own:\n"
            "  cpu:0[2-3]  cores 2 to 3 of cpu:0 (counted from 0 among its cores;\n"
            "              cpu:0[2] is core 2 alone)\n"
            "  cpu:0/2     cpu:0 cut into 2 parts of whole cores: both halves\n"
            "  cpu:0/2.1   the second of those halves\n"
            "A partition is named by its cores whichever way it was asked for\n"
            "(cpu:0/2.1 on 4 cores is cpu:0[2-3]).  An OpenCL CPU device is cut\n"
            "the same way into sub-devices of compute units where its driver\n"
            "allows.  The devices of one list may not share cores.\n",
            cli_prog);
}

/* Sets *SPEC from the options; CLI_GO_ON or the exit status. */
static int parse_options(int argc, char **argv, const char **spec)
{
    static const struct option opts[] = {{"devices", required_argument, 0, 'd'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int c, status;
    while ((c = cli_next_option(argc, argv, "d:h", opts, usage, &status)) !=
           -1)
        if (c == 'd')
            *spec = optarg;
    if (status != CLI_GO_ON)
        return status;
    if (cli_extra_argument("devices", argc, argv))
        return 2;
    return CLI_GO_ON;
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

static void print_device(const shardnet_device_info *info, int width)
{
    char mem[32], alloc[32], numa[16];
    format_bytes(mem, sizeof mem, info->global_mem);
    format_bytes(alloc, sizeof alloc, info->max_alloc);
    if (info->numa_node >= 0)
        snprintf(numa, sizeof numa, "%d", info->numa_node);
    else
        snprintf(numa, sizeof numa, "-");
    printf("%-*s %-6s %5u %10s %10s %7s %5s %-8s %s / %s / %s\n", width,
           info->name,
           kind_name(info->kind), info->compute_units, mem, alloc,
           info->host_unified ? "yes" : "no", numa,
           *info->cpuset ? info->cpuset : "-", info->model, info->vendor,
           info->driver);
}

int cli_devices(int argc, char **argv)
{
    const char *spec = NULL;
    shardnet_context_t *ctx;
    size_t idx[CLI_MAX_DEVICES], n;
    int rc;

    if ((rc = parse_options(argc, argv, &spec)) != CLI_GO_ON)
        return rc;
    if ((rc = cli_open_devices(spec, &ctx, idx, &n)) != 0)
        return rc;
    /* Seven columns, or a partition's longer name ("cpu:0[0-3]"). */
    int width = 7;
    for (size_t i = 0; i < n; i++) {
        shardnet_device_info info;
        if (shardnet_device_get_info(ctx, idx[i], &info) == SHARDNET_OK &&
            (int)strlen(info.name) > width)
            width = (int)strlen(info.name);
    }
    printf("%-*s %-6s %5s %10s %10s %7s %5s %-8s %s\n", width, "DEVICE",
           "KIND", "UNITS", "MEMORY", "MAX-ALLOC", "UNIFIED", "NUMA", "CPUS",
           "MODEL / VENDOR / DRIVER");
    int cuda_listed = 0;
    for (size_t i = 0; i < n; i++) {
        shardnet_device_info info;
        shardnet_device_get_info(ctx, idx[i], &info);
        print_device(&info, width);
        cuda_listed |= info.kind == SHARDNET_DEVICE_CUDA;
    }
#ifdef SN_HAVE_CUDA
    /* A build with the CUDA backend on a machine without a GPU or its
     * driver: say so, since an absent kind is otherwise silent (on
     * stderr: stdout is the table, which scripts count lines of). */
    if (!cuda_listed && (!spec || !strcmp(spec, "all")))
        fprintf(stderr, "%s: no CUDA device found (SHARDNET_LOG=info says "
                        "why)\n",
                cli_prog);
#else
    (void)cuda_listed;
#endif
    shardnet_context_free(ctx);
    return 0;
}
