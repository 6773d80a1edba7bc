/*
 * shardnet quantize: a model's float weights rewritten as int8, int4 or
 * fp16 into a new standard ONNX file (shardnet_model_quantize).
 */
#include <config.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s quantize MODEL OUT [--weights int8|int4|fp16]\n"
            "                         [--per-channel] [--block N]\n"
            "\n"
            "Write MODEL to OUT with its MatMul and Gemm weights small, as a\n"
            "standard ONNX model that shardnet and ONNX Runtime both run:\n"
            "int8 integers and scales with a DequantizeLinear (the default),\n"
            "ONNX Runtime's MatMulNBits with uint4 in blocks (int4; weights of\n"
            "Gemm nodes get int8), or float16 with a Cast (fp16).  Everything\n"
            "else is copied as it was.\n"
            "\n"
            "  -w, --weights T      int8, int4 or fp16 (default int8)\n"
            "  -c, --per-channel    int8: a scale per output column, not one\n"
            "                       per weight (needs opset 13 or later)\n"
            "  -k, --block N        int4: K values per scale, a power of two\n"
            "                       from 16 (default 32)\n"
            "  -h, --help           show this help\n",
            cli_prog);
}

int cli_quantize(int argc, char **argv)
{
    static const struct option opts[] = {
        {"weights", required_argument, 0, 'w'},
        {"per-channel", no_argument, 0, 'c'},
        {"block", required_argument, 0, 'k'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    shardnet_quantize_options o = {.size = sizeof o};
    shardnet_quantize_result r;
    shardnet_status st;
    long block;
    int c, status;
    while ((c = cli_next_option(argc, argv, "w:ck:h", opts, usage,
                                &status)) != -1) {
        switch (c) {
        case 'w':
            if (strcmp(optarg, "int8") && strcmp(optarg, "int4") &&
                strcmp(optarg, "fp16")) {
                fprintf(stderr,
                        "%s quantize: --weights '%s': int8, int4 or fp16\n",
                        cli_prog, optarg);
                return 2;
            }
            o.weights = optarg;
            break;
        case 'c':
            o.per_channel = 1;
            break;
        case 'k':
            if (cli_number_option("quantize", "block", 16, 65536, &block))
                return 2;
            o.block = (size_t)block;
            break;
        }
    }
    if (status != CLI_GO_ON)
        return status;
    if (optind + 2 != argc) {
        usage(stderr);
        return 2;
    }
    if ((st = shardnet_model_quantize(argv[optind], argv[optind + 1], &o,
                                      &r)) != SHARDNET_OK)
        return cli_fail("quantizing", st);
    const char *as = o.weights ? o.weights : "int8";
    if (!strcmp(as, "int4") && r.nbits < r.weights)
        printf("wrote %s: %zu weights, %zu as int4 (MatMulNBits), %zu of Gemm "
               "nodes as int8, %.2f MB where they took %.2f MB\n",
               argv[optind + 1], r.weights, r.nbits, r.weights - r.nbits,
               (double)r.bytes_after / 1e6, (double)r.bytes_before / 1e6);
    else
        printf("wrote %s: %zu weights as %s, %.2f MB where they took %.2f "
               "MB\n",
               argv[optind + 1], r.weights, as, (double)r.bytes_after / 1e6,
               (double)r.bytes_before / 1e6);
    return 0;
}
