/*
 * shardnet ops: the operators shardnet runs, from the library's operator
 * registry (shardnet_operator_get), with the ONNX opsets of the form each
 * implements.  No device is opened.
 */
#include <config.h>

#include <getopt.h>
#include <stdio.h>

#include "cli.h"

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s ops\n"
            "\n"
            "List the ONNX operators shardnet runs, one a line: the\n"
            "operator, its domain and the opsets of its form that shardnet\n"
            "implements (\"13-\": opset 13 and later).  Every operator runs\n"
            "on every device kind.\n"
            "\n"
            "  -h, --help   show this help\n",
            cli_prog);
}

int cli_ops(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    size_t n = shardnet_operator_count();
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        usage(stderr);
        return 2;
    }
    if (cli_extra_argument("ops", argc, argv))
        return 2;
    printf("%-24s %-12s %s\n", "OPERATOR", "DOMAIN", "OPSETS");
    for (size_t i = 0; i < n; i++) {
        shardnet_operator_info op;
        shardnet_status st = shardnet_operator_get(i, &op);
        if (st != SHARDNET_OK)
            return cli_fail("reading the operator registry", st);
        if (op.until_opset)
            printf("%-24s %-12s %d-%d\n", op.name, op.domain, op.since_opset,
                   op.until_opset);
        else
            printf("%-24s %-12s %d-\n", op.name, op.domain, op.since_opset);
    }
    printf("%zu operators\n", n);
    return 0;
}
