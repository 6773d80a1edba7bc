/*
 * The passes that fuse a Relu into the node before it, which applies it
 * as it stores each result, so the bits are those of the two nodes:
 *   - the GEMM or convolution (Gemm, MatMul, Conv): the kernel's epilogue;
 *   - the element-wise Add, Sub, Mul or Div (a residual block's Add then
 *     Relu): the binary step, with the unary Relu's expression.  The
 *     tensor split treats such a node as element-wise, never as linear
 *     (shard_build.h's rule_of): the Relu must not see partial sums.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "passes/rewrite.h"

static int is_product(const sn_node *n)
{
    return (sn_pass_is_op(n, "Gemm") || sn_pass_is_op(n, "MatMul") ||
            sn_pass_is_op(n, "Conv")) &&
           n->noutputs == 1;
}

/* The binary ops whose lowering (sn_lower_binary) reads the attribute. */
static int is_binary(const sn_node *n)
{
    return (sn_pass_is_op(n, "Add") || sn_pass_is_op(n, "Sub") ||
            sn_pass_is_op(n, "Mul") || sn_pass_is_op(n, "Div")) &&
           n->ninputs == 2 && n->noutputs == 1;
}

/* Every node `takes` accepts, whose one output only a Relu reads, gets
 * the attribute activation=Relu and absorbs the Relu. */
static shardnet_status fuse_relu(sn_graph *g, int (*takes)(const sn_node *),
                                 size_t *fused)
{
    int *uses = sn_pass_use_counts(g);
    *fused = 0;
    if (!uses)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "fusing activations");
    for (size_t i = 0; i < g->nnodes; i++) {
        sn_node *p = &g->nodes[i];
        if (!takes(p) || sn_node_attr(p, "activation"))
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

/* Gemm / MatMul / Conv followed by Relu: the kernel's epilogue applies it. */
shardnet_status sn_pass_fuse_activation(sn_graph *g, size_t *fused)
{
    return fuse_relu(g, is_product, fused);
}

/* Add / Sub / Mul / Div followed by Relu: the binary step applies it. */
shardnet_status sn_pass_fuse_binary_activation(sn_graph *g, size_t *fused)
{
    return fuse_relu(g, is_binary, fused);
}
