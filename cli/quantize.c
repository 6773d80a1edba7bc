/*
 * shardnet quantize: write a copy of an ONNX model with smaller weights
 * (int8, 4-bit or float16) that shardnet and ONNX Runtime both run, through
 * shardnet_model_quantize.  No device is opened.
 */
#include <config.h>

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s quantize MODEL OUT [--weights int8|int4|fp16]\n"
            "                         [--per-channel] [--block N]\n"
            "                         [--min-elements N]\n"
            "\n"
            "Write OUT, a standard ONNX model whose weights are smaller: each\n"
            "float32 weight of a MatMul or Gemm (and of nothing else) becomes\n"
            "  int8  integers with a scale (symmetric, zero point 0) read\n"
            "        through a DequantizeLinear: the graph is otherwise the\n"
            "        same (per-channel needs opset 13 or later)\n"
            "  int4  4 bits in blocks, one scale per block and column: the\n"
            "        product becomes com.microsoft's MatMulNBits (a Gemm only\n"
            "        with transA 0, alpha and beta 1; others stay float32)\n"
            "  fp16  float16, read through a Cast to float\n"
            "Everything else is written as MODEL has it; external data is\n"
            "written inline (up to 2 GiB in all).  OUT may be MODEL.\n"
            "\n"
            "  -w, --weights FORM    int8 (default), int4 or fp16\n"
            "  -c, --per-channel     int8: one scale per output column\n"
            "                        (default: one per weight)\n"
            "  -b, --block N         int4: elements per block, a power of\n"
            "                        two from 16 to 65536 (default 32)\n"
            "  -m, --min-elements N  leave weights of fewer elements float32\n"
            "                        (default %d)\n"
            "  -h, --help            show this help\n"
            "\n"
            "SHARDNET_LOG=info says why each weight left float32 stays so.\n",
            cli_prog, SHARDNET_QUANTIZE_MIN_ELEMENTS);
}

static const char *const forms[] = {"int8", "int4", "fp16"};

/* FORM into *o; 0, or 2 after saying it is none of them. */
static int parse_form(const char *s, shardnet_quantize_options *o)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, forms[i])) {
            o->weights = (shardnet_quantize_weights)i;
            return 0;
        }
    fprintf(stderr, "%s quantize: unknown --weights '%s' (int8, int4 or "
                    "fp16)\n",
            cli_prog, s);
    return 2;
}

/* The options into *o: CLI_GO_ON, or the exit status. */
static int parse(int argc, char **argv, shardnet_quantize_options *o)
{
    static const struct option longopts[] = {
        {"weights", required_argument, 0, 'w'},
        {"per-channel", no_argument, 0, 'c'},
        {"block", required_argument, 0, 'b'},
        {"min-elements", required_argument, 0, 'm'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int c, status;
    long v;
    while ((c = cli_next_option(argc, argv, "w:cb:m:h", longopts, usage,
                                &status)) != -1) {
        if (c == 'w' && parse_form(optarg, o))
            return 2;
        if (c == 'c')
            o->flags |= SHARDNET_QUANTIZE_PER_CHANNEL;
        if (c == 'b') {
            if (cli_number_option("quantize", "block", 1, 1L << 30, &v))
                return 2;
            o->block_size = (size_t)v;
        }
        if (c == 'm') {
            if (cli_number_option("quantize", "min-elements", 1, 1L << 40,
                                  &v))
                return 2;
            o->min_elements = (size_t)v;
        }
    }
    return status;
}

/* "int8 per channel", "int4 in blocks of 32", "fp16". */
static void describe(const shardnet_quantize_options *o, char *buf,
                     size_t cap)
{
    const char *form = forms[o->weights];
    if (o->weights == SHARDNET_QUANTIZE_INT8)
        snprintf(buf, cap, "%s per %s", form,
                 o->flags & SHARDNET_QUANTIZE_PER_CHANNEL ? "channel"
                                                          : "tensor");
    else if (o->weights == SHARDNET_QUANTIZE_INT4)
        snprintf(buf, cap, "%s in blocks of %zu", form,
                 o->block_size ? o->block_size : 32);
    else
        snprintf(buf, cap, "%s", form);
}

int cli_quantize(int argc, char **argv)
{
    shardnet_quantize_options o = {.size = sizeof o};
    shardnet_quantize_report r = {.size = sizeof r};
    char form[64];
    int status = parse(argc, argv, &o);
    if (status != CLI_GO_ON)
        return status;
    if (optind + 2 != argc) {
        usage(stderr);
        return 2;
    }
    /* Options the library refuses are the caller's mistake: status 2. */
    shardnet_status st = shardnet_model_quantize(argv[optind],
                                                 argv[optind + 1], &o, &r);
    if (st != SHARDNET_OK) {
        cli_fail("quantize", st);
        return strstr(shardnet_last_error(), "quantize options:") ? 2 : 1;
    }
    describe(&o, form, sizeof form);
    printf("wrote %s: %zu weight%s as %s (%.2f MB as float32, %.2f MB "
           "now), %zu left float32; %.2f MB in all\n",
           argv[optind + 1], r.converted, r.converted == 1 ? "" : "s", form,
           (double)r.bytes_before / 1e6, (double)r.bytes_after / 1e6, r.kept,
           (double)r.file_bytes / 1e6);
    return 0;
}
