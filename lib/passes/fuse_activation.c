/*
 * The pass that fuses a Relu into the GEMM or convolution before it.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "passes/rewrite.h"

/* Gemm / MatMul / Conv followed by Relu: the kernel's epilogue applies it. */
shardnet_status sn_pass_fuse_activation(sn_graph *g, size_t *fused)
{
    int *uses = sn_pass_use_counts(g);
    *fused = 0;
    if (!uses)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "fusing activations");
    for (size_t i = 0; i < g->nnodes; i++) {
        sn_node *p = &g->nodes[i];
        if ((!sn_pass_is_op(p, "Gemm") && !sn_pass_is_op(p, "MatMul") && !sn_pass_is_op(p, "Conv")) ||
            p->noutputs != 1 || sn_node_attr(p, "activation"))
            continue;
        sn_node *r = sn_pass_sole_consumer(g, uses, p->outputs[0]);
        if (!sn_pass_is_op(r, "Relu"))
            continue;
        sn_attr *a = sn_node_add_attr(p, "activation", SN_ATTR_STRING);
        if (!a || !(a->s = strdup("Relu"))) {
            free(uses);
            return sn_error(SHARDNET_OUT_OF_MEMORY, "fusing activations");
        }
        sn_pass_absorb(g, i, r);
        (*fused)++;
    }
    free(uses);
    return SHARDNET_OK;
}
