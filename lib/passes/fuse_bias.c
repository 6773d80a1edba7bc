/*
 * The pass that moves a constant bias added after a MatMul into it.
 */
#include <config.h>

#include <stdlib.h>

#include "passes/rewrite.h"

/*
 * MatMul by a constant matrix (or a quantized one, sn_pass_keeps_quantized)
 * whose only reader adds a constant vector over
 * its columns (a linear layer as PyTorch exports it: MatMul, then Add of
 * the bias): the bias becomes the MatMul's third input, marked by the
 * attribute "bias", and the GEMM's epilogue adds it.  The epilogue adds the
 * same two floats the Add did, so the result is the same bit for bit.
 */
shardnet_status sn_pass_fuse_bias(sn_graph *g, size_t *fused)
{
    int *uses = sn_pass_use_counts(g);
    *fused = 0;
    if (!uses)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "fusing biases");
    for (size_t i = 0; i < g->nnodes; i++) {
        sn_node *p = &g->nodes[i];
        if (!sn_pass_is_op(p, "MatMul") || p->ninputs != 2 || p->noutputs != 1 ||
            p->inputs[1] < 0 || sn_node_attr(p, "activation"))
            continue;
        const sn_value *w = &g->values[p->inputs[1]];
        if (!(w->flags & SN_VALUE_CONST) || w->dtype != SN_DT_FLOAT ||
            w->rank != 2) {
            /* A quantized weight kept as it is stored: its integers have
             * the float matrix's shape. */
            const sn_node *dq = sn_pass_producer(g, p->inputs[1]);
            if (!sn_pass_keeps_quantized(g, dq))
                continue;
            w = &g->values[dq->inputs[0]];
        }
        sn_node *r = sn_pass_sole_consumer(g, uses, p->outputs[0]);
        int bias = sn_pass_other_operand(r, "Add", p->outputs[0]);
        const sn_value *bv = bias >= 0 ? &g->values[bias] : NULL;
        /* A vector of the output's width; any other shape would broadcast
         * differently (a [1, N] bias would add a dimension to a 1-D
         * product). */
        if (!bv || bias == p->outputs[0] || !(bv->flags & SN_VALUE_CONST) ||
            bv->dtype != SN_DT_FLOAT || bv->rank != 1 ||
            bv->dims[0] != w->dims[1])
            continue;
        sn_attr *a = sn_node_add_attr(p, "bias", SN_ATTR_INT);
        if (!a || !sn_pass_ensure_inputs(p, 3)) {
            free(uses);
            return sn_error(SHARDNET_OUT_OF_MEMORY, "fusing biases");
        }
        a->i = 1;
        p->inputs[2] = bias;
        sn_pass_absorb(g, i, r);
        (*fused)++;
    }
    free(uses);
    return SHARDNET_OK;
}
