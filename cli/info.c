/*
 * shardnet info: what an ONNX model takes and gives (symbolic dimensions by
 * name), the operators it uses after simplification, its parameters, and
 * the operators shardnet cannot run.  No device is opened.
 */
#include <config.h>

#include <getopt.h>
#include <stdio.h>

#include "cli.h"

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s info MODEL\n"
            "\n"
            "Describe an ONNX model: its inputs and outputs (symbolic\n"
            "dimensions by name), the operators it uses after simplification,\n"
            "its parameter count, and the operators shardnet cannot run.\n"
            "\n"
            "  -h, --help   show this help\n",
            cli_prog);
}

int cli_info(int argc, char **argv)
{
    shardnet_model_t *m;
    shardnet_status st;
    char text[8192];
    int status = cli_help_only(argc, argv, usage);
    if (status != CLI_GO_ON)
        return status;
    if (optind + 1 != argc) {
        usage(stderr);
        return 2;
    }
    st = shardnet_model_load(argv[optind], &m);
    if (st != SHARDNET_OK)
        return cli_fail("loading the model", st);
    printf("model: %s\n", argv[optind]);
    for (size_t i = 0; i < shardnet_model_input_count(m); i++) {
        shardnet_tensor_info t;
        shardnet_model_input(m, i, &t);
        cli_print_tensor_info("input ", &t);
    }
    for (size_t i = 0; i < shardnet_model_output_count(m); i++) {
        shardnet_tensor_info t;
        shardnet_model_output(m, i, &t);
        cli_print_tensor_info("output ", &t);
    }
    shardnet_model_describe(m, text, sizeof text);
    fputs(text, stdout);
    shardnet_model_unsupported(m, text, sizeof text);
    printf("unsupported: %s\n", *text ? text : "none");
    shardnet_model_free(m);
    return 0;
}
