/*
 * The passes that fuse a Relu into the node before it, which applies it
 * as it stores each result, so the bits are those of the two nodes:
 *   - the GEMM or convolution (Gemm, MatMul, Conv): the kernel's epilogue,
 *     which also takes TensorFlow's Relu6 (a Clip with the constant bounds
 *     0 and 6, with the Clip's expression);
 *   - the element-wise Add, Sub, Mul or Div (a residual block's Add then
 *     Relu): the binary step, with the unary Relu's expression.  The
 *     tensor split treats such a node as element-wise, never as linear
 *     (shard_build.h's rule_of): the Relu must not see partial sums.
 */
#include <config.h>

#include <math.h>
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

/* The activation node r is, where `relu6` allows a Clip: "Relu",
 * "Relu6" (a Clip of bounds 0 and 6) or NULL. */
static const char *activation_of(const sn_graph *g, const sn_node *r,
                                 int relu6)
{
    float lo, hi;
    if (!r || r->noutputs != 1 || r->ninputs < 1)
        return NULL;
    if (sn_pass_is_op(r, "Relu") && r->ninputs == 1)
        return "Relu";
    if (relu6 && sn_pass_is_op(r, "Clip") && !sn_node_attr(r, "gate_max") &&
        !sn_node_attr(r, "relu6") && sn_pass_clip_bounds(g, r, &lo, &hi) &&
        lo == 0.0f && !signbit(lo) && hi == 6.0f)
        return "Relu6";
    return NULL;
}

/* Every node `takes` accepts, whose one output only a Relu (or, with
 * relu6, a Relu6) reads, gets the attribute activation and absorbs it. */
static shardnet_status fuse_relu(sn_graph *g, int (*takes)(const sn_node *),
                                 int relu6, size_t *fused)
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
        const char *act = activation_of(g, r, relu6);
        if (!act || r->inputs[0] != p->outputs[0])
            continue;
        sn_attr *a = sn_node_add_attr(p, "activation", SN_ATTR_STRING);
        if (!a || !(a->s = strdup(act))) {
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
    return fuse_relu(g, is_product, 1, fused);
}

/* Add / Sub / Mul / Div followed by Relu: the binary step applies it. */
shardnet_status sn_pass_fuse_binary_activation(sn_graph *g, size_t *fused)
{
    return fuse_relu(g, is_binary, 0, fused);
}
