/*
 * The pass that moves a residual block's Add into the convolution before
 * it: Conv, then Add of another tensor (the block's input), then perhaps
 * a Relu (already fused into the Add by the binary-activation pass).  The
 * Add's other operand becomes the Conv's fourth input, marked by the
 * attribute "residual" (a model's Conv given four inputs is refused), and
 * the Add's activation the Conv's; the lowering (ops_conv.c) adds the residual
 * in the GEMM's epilogue, after the bias and before the Relu, where the
 * shapes agree: the same float additions, in the same order, as the Add
 * did, so the same bits.  Elsewhere (a grouped or depthwise convolution,
 * a residual that broadcasts) the lowering emits the Add itself.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "passes/rewrite.h"

/* Conv p's output is read by Add r alone: r's other operand, if it can be
 * p's residual (a float value made before p), else -1. */
static int residual_of(const sn_graph *g, size_t p, const sn_node *r)
{
    const int y = g->nodes[p].outputs[0];
    /* An Add with a broadcast attribute (opsets 1-6) aligns its operands
     * otherwise, as one with an axis does. */
    const int v = sn_pass_other_operand(r, "Add", y);
    if (v < 0 || v == y || sn_node_attr(r, "broadcast"))
        return -1;
    const sn_value *rv = &g->values[v];
    /* Made before p, so that the graph stays sorted with p reading it. */
    if (rv->producer >= (int)p)
        return -1;
    return rv->dtype == SN_DT_FLOAT || rv->dtype == SN_DT_UNDEFINED ? v : -1;
}

shardnet_status sn_pass_fuse_residual(sn_graph *g, size_t *fused)
{
    int *uses;
    *fused = 0;
    if (g->opset < 7) /* Add broadcasts only by attribute there */
        return SHARDNET_OK;
    if (!(uses = sn_pass_use_counts(g)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "fusing residual adds");
    for (size_t i = 0; i < g->nnodes; i++) {
        sn_node *p = &g->nodes[i];
        if (!sn_pass_is_op(p, "Conv") || p->ninputs < 2 || p->ninputs > 3 ||
            p->noutputs != 1 || sn_node_attr(p, "activation") ||
            sn_node_attr(p, "residual"))
            continue;
        sn_node *r = sn_pass_sole_consumer(g, uses, p->outputs[0]);
        int v = r ? residual_of(g, i, r) : -1;
        if (v < 0)
            continue;
        const char *act = sn_attr_string(r, "activation", NULL);
        sn_attr *a = sn_node_add_attr(p, "residual", SN_ATTR_INT);
        if (a)
            a->i = 1;
        /* (each attribute added may move the others) */
        if (a && act && (a = sn_node_add_attr(p, "activation",
                                              SN_ATTR_STRING)) != NULL)
            a->s = strdup(act);
        if (!a || (act && !a->s) || !sn_pass_ensure_inputs(p, 4)) {
            free(uses);
            return sn_error(SHARDNET_OUT_OF_MEMORY, "fusing residual adds");
        }
        p->inputs[3] = v;
        sn_pass_absorb(g, i, r);
        (*fused)++;
    }
    free(uses);
    return SHARDNET_OK;
}
