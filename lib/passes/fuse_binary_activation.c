/*
 * The pass that fuses a Relu into the element-wise Add, Sub, Mul or Div
 * before it (a residual block's Add then Relu): the binary step applies
 * it as it stores each result, with the unary Relu's expression, so the
 * bits are those of the two nodes.  The tensor split treats such a node
 * as element-wise, never as linear (shard_build.h's rule_of): the Relu
 * must not see partial sums.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "passes/rewrite.h"

/* The binary ops whose lowering (sn_lower_binary) reads the attribute. */
static int takes_activation(const sn_node *n)
{
    return sn_pass_is_op(n, "Add") || sn_pass_is_op(n, "Sub") ||
           sn_pass_is_op(n, "Mul") || sn_pass_is_op(n, "Div");
}

shardnet_status sn_pass_fuse_binary_activation(sn_graph *g, size_t *fused)
{
    int *uses = sn_pass_use_counts(g);
    *fused = 0;
    if (!uses)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "fusing activations");
    for (size_t i = 0; i < g->nnodes; i++) {
        sn_node *p = &g->nodes[i];
        if (!takes_activation(p) || p->ninputs != 2 || p->noutputs != 1 ||
            sn_node_attr(p, "activation"))
            continue;
        sn_node *r = sn_pass_sole_consumer(g, uses, p->outputs[0]);
        if (!sn_pass_is_op(r, "Relu") || r->ninputs != 1 ||
            r->noutputs != 1)
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
