/*
 * The pass that folds a constant scale and shift after a Conv into its
 * weights and bias: Conv, then Mul by a constant, then Add of a constant
 * (either one alone too), each constant one value or one per output
 * channel (PaddleOCR's "learnable affine" blocks, a BatchNormalization
 * exported as Mul and Add).  y = (conv(x) + b) * s + t becomes one Conv
 * with weights W * s (per output channel) and bias b * s + t, as the
 * batch-norm fold does: the rounding differs, the maths does not.
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/rewrite.h"

/* Constant value v's floats, one per output channel of a convolution
 * whose output has rank `rank` and `oc` channels, into out (oc floats):
 * v holds one value, or oc along axis 1 and ones elsewhere (aligned at
 * the end, no more axes than the output), all finite.  0 when v is not
 * such. */
static int per_channel(const sn_graph *g, int v, int rank, int64_t oc,
                       float *out)
{
    const sn_value *c = v >= 0 ? &g->values[v] : NULL;
    if (!c || !(c->flags & SN_VALUE_CONST) || c->dtype != SN_DT_FLOAT ||
        c->rank > rank)
        return 0;
    int64_t n = sn_value_elements(c);
    for (int i = 0; i < c->rank; i++) {
        int axis = rank - c->rank + i; /* the output axis it aligns with */
        if (c->dims[i] != 1 && !(axis == 1 && c->dims[i] == oc))
            return 0;
    }
    if (n != 1 && n != oc)
        return 0;
    float one;
    const float *d = sn_pass_const_floats(g, v, (size_t)n, n == 1 ? &one : out);
    if (!d)
        return 0;
    for (int64_t i = 0; i < oc; i++) {
        out[i] = d[n == 1 ? 0 : i];
        /* An infinite scale times each weight could sum Inf - Inf where
         * the product scaled gives Inf: folded only when finite. */
        if (!isfinite(out[i]))
            return 0;
    }
    return 1;
}

/* Node r (Mul or Add, reading conv output y, without a legacy broadcast
 * or a fused activation): its other input, or -1. */
static int other_input(const sn_node *r, const char *op, int y)
{
    if (sn_node_attr(r, "broadcast") || sn_node_attr(r, "activation"))
        return -1;
    return sn_pass_other_operand(r, op, y);
}

/* Conv p, whose output only r reads: fold r (a Mul or an Add by a per
 * channel finite constant) into it; *done says whether it did. */
static shardnet_status fold_one(sn_graph *g, size_t pi, sn_node *r, int *done)
{
    sn_node *p = &g->nodes[pi];
    const sn_value *w = &g->values[p->inputs[1]];
    int mul = sn_pass_is_op(r, "Mul");
    int k = other_input(r, mul ? "Mul" : "Add", p->outputs[0]);
    *done = 0;
    if (k < 0 || !(w->flags & SN_VALUE_CONST) || w->dtype != SN_DT_FLOAT ||
        w->rank < 3 || w->dims[0] < 1)
        return SHARDNET_OK;
    const int64_t oc = w->dims[0];
    const size_t wn = (size_t)sn_value_elements(w), per = wn / (size_t)oc;
    float *c = malloc((size_t)oc * sizeof *c);
    float *nb = calloc((size_t)oc, sizeof *nb);
    float *nw = mul ? malloc(wn * sizeof *nw) : NULL;
    if (!c || !nb || (mul && !nw)) {
        free(c);
        free(nb);
        free(nw);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "folding a scale or shift");
    }
    int has_b = p->ninputs > 2 && p->inputs[2] >= 0;
    if (!per_channel(g, k, w->rank, oc, c) ||
        (has_b && !sn_pass_const_floats(g, p->inputs[2], (size_t)oc, nb))) {
        free(c);
        free(nb);
        free(nw);
        return SHARDNET_OK;
    }
    for (int64_t i = 0; i < oc; i++)
        nb[i] = mul ? nb[i] * c[i] : nb[i] + c[i];
    if (mul) {
        memcpy(nw, w->data, wn * sizeof *nw);
        for (size_t i = 0; i < wn; i++)
            nw[i] *= c[i / per];
    }
    free(c);
    /* Adding values may move g->values: keep what is needed of w. */
    char *wname = strdup(w->name);
    int wrank = w->rank;
    int64_t wdims[SHARDNET_MAX_DIMS];
    memcpy(wdims, w->dims, sizeof wdims);
    int wv = -1, bv = -1;
    if (wname && mul)
        wv = sn_pass_new_const(g, wname, "_scaled", nw, wrank, wdims);
    else
        free(nw);
    if (wname && (!mul || wv >= 0))
        bv = sn_pass_new_const(g, wname, mul ? "_sbias" : "_tbias", nb, 1, &oc);
    else
        free(nb);
    free(wname);
    p = &g->nodes[pi];
    if (bv < 0 || !sn_pass_ensure_inputs(p, 3))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "folding a scale or shift");
    if (mul)
        p->inputs[1] = wv;
    p->inputs[2] = bv;
    sn_pass_absorb(g, pi, r);
    *done = 1;
    return SHARDNET_OK;
}

shardnet_status sn_pass_fold_affine(sn_graph *g, size_t *folded)
{
    int *uses = sn_pass_use_counts(g);
    *folded = 0;
    if (!uses)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "folding a scale or shift");
    for (size_t i = 0; i < g->nnodes; i++) {
        sn_node *p = &g->nodes[i];
        int done = 1;
        /* A Conv with a fused activation or residual applies them first. */
        while (done && sn_pass_is_op(p, "Conv") && p->ninputs >= 2 &&
               p->ninputs <= 3 && p->noutputs == 1 && p->inputs[1] >= 0 &&
               !sn_node_attr(p, "activation")) {
            sn_node *r = sn_pass_sole_consumer(g, uses, p->outputs[0]);
            shardnet_status st = r ? fold_one(g, i, r, &done)
                                   : SHARDNET_OK;
            if (st != SHARDNET_OK) {
                free(uses);
                return st;
            }
            if (!r)
                done = 0;
            *folded += (size_t)done;
            p = &g->nodes[i];
            if (done) {
                free(uses); /* new values were added */
                if (!(uses = sn_pass_use_counts(g)))
                    return sn_error(SHARDNET_OUT_OF_MEMORY,
                                    "folding a scale or shift");
            }
        }
    }
    free(uses);
    return SHARDNET_OK;
}
