/*
 * shardnet ops: the operators shardnet runs, from the library's operator
 * registry (shardnet_operator_get), with the ONNX opsets of the form each
 * implements and the backends whose devices here run it
 * (shardnet_operator_backends: the devices are discovered for it).
 */
#include <config.h>

#include <stdio.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: %s ops\n"
            "\n"
            "List the ONNX operators shardnet runs, one a line: the\n"
            "operator, its domain, the opsets of its form that shardnet\n"
            "implements (\"13-\": opset 13 and later) and the backends\n"
            "whose devices on this machine run it (\"cpu cl\"; \"-\": none\n"
            "of the devices found).  A backend of which no device is found\n"
            "is not listed.\n"
            "\n"
            "  -h, --help   show this help\n",
            cli_prog);
}

int cli_ops(int argc, char **argv)
{
    size_t n = shardnet_operator_count();
    shardnet_context_t *ctx;
    shardnet_status st;
    int status = cli_help_only(argc, argv, usage);
    if (status != CLI_GO_ON)
        return status;
    if (cli_extra_argument("ops", argc, argv))
        return 2;
    if ((st = shardnet_context_create(&ctx)) != SHARDNET_OK) {
        fprintf(stderr, "%s: no devices: %s\n", cli_prog,
                shardnet_last_error());
        ctx = NULL;
    }
    printf("%-32s %-13s %-8s %s\n", "OPERATOR", "DOMAIN", "OPSETS",
           "BACKENDS");
    for (size_t i = 0; i < n; i++) {
        shardnet_operator_info op;
        char opsets[32], kinds[64] = "";
        if ((st = shardnet_operator_get(i, &op)) != SHARDNET_OK ||
            (ctx && (st = shardnet_operator_backends(ctx, i, kinds,
                                                     sizeof kinds)) !=
                        SHARDNET_OK)) {
            shardnet_context_free(ctx);
            return cli_fail("reading the operator registry", st);
        }
        if (op.until_opset)
            snprintf(opsets, sizeof opsets, "%d-%d", op.since_opset,
                     op.until_opset);
        else
            snprintf(opsets, sizeof opsets, "%d-", op.since_opset);
        for (char *comma = kinds; (comma = strchr(comma, ',')) != NULL;)
            *comma = ' ';
        printf("%-32s %-13s %-8s %s\n", op.name, op.domain, opsets,
               *kinds ? kinds : "-");
    }
    if (!shardnet_device_count(ctx))
        printf("no device found: the backends column is empty\n");
    shardnet_context_free(ctx);
    printf("%zu operators\n", n);
    return 0;
}
