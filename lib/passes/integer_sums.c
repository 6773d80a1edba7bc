/*
 * The pass that lets a dynamically quantized model's integer products run
 * on the device: a ConvInteger or MatMulInteger whose int32 sums are read
 * by one Cast to float alone (ONNX Runtime's quantize_dynamic writes
 * DynamicQuantizeLinear, the integer product, Cast to float, Mul by the
 * scales) takes the Cast over: it writes the Cast's float output and is
 * marked by the attribute "float_sums".
 *
 * The lowering (ops_qconv.c, ops_quant.c) then sums on the device even
 * where a sum can pass 2^24, in runs of the reduced axis whose partial
 * sums stay below it (each run exact in float, whatever the order), the
 * runs added in float: the result is the float the Cast would have given
 * (the exact sum, rounded once) to within one rounding per run, where the
 * unmarked product must refuse the sums (its int32 results would not be
 * exact).
 */
#include <config.h>

#include <stdlib.h>

#include "passes/rewrite.h"

shardnet_status sn_pass_integer_sums(sn_graph *g, size_t *fused)
{
    int *uses;
    *fused = 0;
    if (!(uses = sn_pass_use_counts(g)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "integer sums");
    for (size_t i = 0; i < g->nnodes; i++) {
        sn_node *p = &g->nodes[i];
        if ((!sn_pass_is_op(p, "ConvInteger") &&
             !sn_pass_is_op(p, "MatMulInteger")) ||
            p->noutputs != 1 || sn_node_attr(p, "float_sums"))
            continue;
        sn_node *c = sn_pass_sole_consumer(g, uses, p->outputs[0]);
        const sn_attr *to = c ? sn_node_attr(c, "to") : NULL;
        if (!sn_pass_is_op(c, "Cast") || c->ninputs != 1 ||
            c->noutputs != 1 || !to || to->type != SN_ATTR_INT ||
            to->i != SN_DT_FLOAT)
            continue;
        sn_attr *a = sn_node_add_attr(p, "float_sums", SN_ATTR_INT);
        if (!a) {
            free(uses);
            return sn_error(SHARDNET_OUT_OF_MEMORY, "integer sums");
        }
        a->i = 1;
        sn_pass_absorb(g, i, c);
        (*fused)++;
    }
    free(uses);
    return SHARDNET_OK;
}
