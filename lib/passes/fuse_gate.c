/*
 * The pass that fuses gates, x times a function of x, into one step.
 *
 * A Sigmoid or HardSigmoid of x whose result only a Mul by x reads (the
 * SiLU of YOLO and EfficientNet exports, x * Sigmoid(x); a hard swish as
 * x * HardSigmoid(x)): the unary node takes the Mul over, marked
 * gate_mul = 1, and its step multiplies by x as it stores (the unary's
 * result rounded to float first, as the Mul read it: the same bits).
 *
 * A hard swish exported as four nodes (PaddlePaddle's exporter; PyTorch's
 * before opset 14):
 *     t = Add(x, a)   c = Clip(t, 0, b)   m = Mul(x, c)   y = Div(m, b)
 * with a and b scalar float constants, b finite and above 0, and t, c, m
 * read by the chain alone.  The Clip takes the chain over: it reads x
 * alone, writes y, and carries the attributes gate_add = a and gate_max =
 * b; its lowering (ops_elementwise.c) emits one unary step, CLIP_GATE,
 * which rounds each of the four results to float in the same order, so
 * the bits are those of the four nodes, in one pass over the tensor
 * instead of four (24 chains, about 2 ms of PaddleOCR's text detector).
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>

#include "passes/rewrite.h"

/* A binary node of the chain: live, two inputs and one output, no
 * activation fused into it, no legacy broadcast. */
static int plain_binary(const sn_node *n, const char *op)
{
    return sn_pass_is_op(n, op) && n->ninputs == 2 && n->noutputs == 1 &&
           !sn_node_attr(n, "activation") && !sn_node_attr(n, "broadcast") &&
           !sn_node_attr(n, "axis");
}

/* The chain through Clip c (node index ci): 1 with *x, *a, *b, the Add,
 * Mul and Div set, where it is a hard swish as above. */
static int match(const sn_graph *g, const int *uses, size_t ci, int *x,
                 float *a, float *b, sn_node **add, sn_node **mul,
                 sn_node **div)
{
    const sn_node *c = &g->nodes[ci];
    float lo, d;
    int t;

    if (!sn_pass_is_op(c, "Clip") || c->noutputs != 1 || c->ninputs < 1 ||
        sn_node_attr(c, "gate_max") || (t = c->inputs[0]) < 0 ||
        uses[t] != 1 || g->values[t].producer < 0)
        return 0;
    *add = &g->nodes[g->values[t].producer];
    if (!plain_binary(*add, "Add"))
        return 0;
    /* x + a or a + x: the same sum */
    if (sn_pass_const_scalar(g, (*add)->inputs[1], a))
        *x = (*add)->inputs[0];
    else if (sn_pass_const_scalar(g, (*add)->inputs[0], a))
        *x = (*add)->inputs[1];
    else
        return 0;
    if (*x < 0 || !sn_pass_clip_bounds(g, c, &lo, b) || lo != 0.0f ||
        !isfinite(*b) || !(*b > 0.0f) || !isfinite(*a))
        return 0;
    *mul = sn_pass_sole_consumer((sn_graph *)g, uses, c->outputs[0]);
    if (!*mul || !plain_binary(*mul, "Mul") ||
        sn_pass_other_operand(*mul, "Mul", c->outputs[0]) != *x)
        return 0;
    *div = sn_pass_sole_consumer((sn_graph *)g, uses, (*mul)->outputs[0]);
    return *div && plain_binary(*div, "Div") &&
           (*div)->inputs[0] == (*mul)->outputs[0] &&
           sn_pass_const_scalar(g, (*div)->inputs[1], &d) && d == *b;
}

/* Sigmoid or HardSigmoid u (node ui) read by a Mul by its input alone:
 * that Mul, or NULL. */
static sn_node *gate_mul(const sn_graph *g, const int *uses, size_t ui)
{
    const sn_node *u = &g->nodes[ui];
    if ((!sn_pass_is_op(u, "Sigmoid") && !sn_pass_is_op(u, "HardSigmoid")) ||
        u->ninputs != 1 || u->noutputs != 1 || u->inputs[0] < 0 ||
        sn_node_attr(u, "gate_mul"))
        return NULL;
    sn_node *m = sn_pass_sole_consumer((sn_graph *)g, uses, u->outputs[0]);
    return m && plain_binary(m, "Mul") &&
                   sn_pass_other_operand(m, "Mul", u->outputs[0]) ==
                       u->inputs[0]
               ? m
               : NULL;
}

shardnet_status sn_pass_fuse_gate(sn_graph *g, size_t *fused)
{
    int *uses;
    *fused = 0;
    if (g->opset < 7) /* binary ops broadcast by attribute there */
        return SHARDNET_OK;
    if (!(uses = sn_pass_use_counts(g)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "fusing gates");
    for (size_t i = 0; i < g->nnodes; i++) {
        sn_node *add, *mul, *div;
        sn_attr *at;
        float a, b;
        int x;
        if ((mul = gate_mul(g, uses, i)) != NULL) {
            if (!(at = sn_node_add_attr(&g->nodes[i], "gate_mul",
                                        SN_ATTR_INT))) {
                free(uses);
                return sn_error(SHARDNET_OUT_OF_MEMORY, "fusing gates");
            }
            at->i = 1;
            sn_pass_absorb(g, i, mul);
            (*fused)++;
            continue;
        }
        if (!match(g, uses, i, &x, &a, &b, &add, &mul, &div))
            continue;
        /* (each attribute added may move the others) */
        if (!(at = sn_node_add_attr(&g->nodes[i], "gate_add",
                                    SN_ATTR_FLOAT))) {
            free(uses);
            return sn_error(SHARDNET_OUT_OF_MEMORY, "fusing gates");
        }
        at->f = a;
        if (!(at = sn_node_add_attr(&g->nodes[i], "gate_max",
                                    SN_ATTR_FLOAT))) {
            free(uses);
            return sn_error(SHARDNET_OUT_OF_MEMORY, "fusing gates");
        }
        at->f = b;
        g->nodes[i].inputs[0] = x;
        g->nodes[i].ninputs = 1;
        add->dead = 1;
        mul->dead = 1;
        sn_pass_absorb(g, i, div);
        (*fused)++;
    }
    free(uses);
    return SHARDNET_OK;
}
