/*
 * The pass that folds BatchNormalization into the Conv or Gemm before it.
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/rewrite.h"

/*
 * Conv (or Gemm) followed by BatchNormalization with constant parameters:
 * y = (conv(x) - mean) * s + beta, s = scale / sqrt(var + eps), becomes
 * one Conv with weights W * s (per output channel) and bias (b - mean) * s
 * + beta.  Valid for inference only, which is all shardnet does.
 */
static shardnet_status fold_one(sn_graph *g, sn_node *prod, sn_node *bn,
                                int *done)
{
    int is_conv = !strcmp(prod->op_type, "Conv");
    const sn_value *w = &g->values[prod->inputs[1]];
    int64_t oc;
    float eps = sn_attr_float(bn, "epsilon", 1e-5f);
    *done = 0;

    if (bn->ninputs != 5 || bn->noutputs < 1 ||
        (bn->noutputs > 1 && (bn->outputs[1] >= 0 || bn->outputs[2] >= 0)) ||
        sn_attr_int(bn, "training_mode", 0))
        return SHARDNET_OK;
    if (!(w->flags & SN_VALUE_CONST) || w->dtype != SN_DT_FLOAT || w->rank < 2)
        return SHARDNET_OK;
    if (is_conv) {
        oc = w->dims[0];
    } else {
        /* Gemm: only the plain form, bias 1-D or absent. */
        if (sn_attr_int(prod, "transA", 0) || w->rank != 2)
            return SHARDNET_OK;
        oc = sn_attr_int(prod, "transB", 0) ? w->dims[0] : w->dims[1];
    }
    float gemm_beta = is_conv ? 1.0f : sn_attr_float(prod, "beta", 1.0f);
    size_t wn = (size_t)sn_value_elements(w), per = wn / (size_t)oc;
    /* One block: scale, beta, mean, var, bias, s (oc each). */
    float *tmp = malloc(6 * (size_t)oc * sizeof *tmp);
    float *nw = malloc(wn * sizeof *nw), *nb = malloc((size_t)oc * sizeof *nb);
    if (!tmp || !nw || !nb) {
        free(tmp);
        free(nw);
        free(nb);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "folding batch norm");
    }
    const float *scale = sn_pass_const_floats(g, bn->inputs[1], (size_t)oc, tmp);
    const float *beta = sn_pass_const_floats(g, bn->inputs[2], (size_t)oc, tmp + oc);
    const float *mean = sn_pass_const_floats(g, bn->inputs[3], (size_t)oc, tmp + 2 * oc);
    const float *var = sn_pass_const_floats(g, bn->inputs[4], (size_t)oc, tmp + 3 * oc);
    const float *bias = NULL;
    float *s = tmp + 5 * oc;
    int usable = scale && beta && mean && var;
    if (usable && prod->ninputs > 2 && prod->inputs[2] >= 0) {
        bias = sn_pass_const_floats(g, prod->inputs[2], (size_t)oc, tmp + 4 * oc);
        usable = bias != NULL; /* a broadcast Gemm C: leave it */
    }
    if (!usable) {
        free(tmp);
        free(nw);
        free(nb);
        return SHARDNET_OK;
    }
    for (int64_t c = 0; c < oc; c++) {
        s[c] = scale[c] / sqrtf(var[c] + eps);
        nb[c] = ((bias ? gemm_beta * bias[c] : 0.0f) - mean[c]) * s[c] + beta[c];
    }
    memcpy(nw, w->data, wn * sizeof *nw); /* aligned copy, scaled in place */
    if (is_conv || sn_attr_int(prod, "transB", 0)) {
        for (size_t i = 0; i < wn; i++) /* rows are output channels */
            nw[i] *= s[i / per];
    } else {
        for (size_t i = 0; i < wn; i++) /* columns are output features */
            nw[i] *= s[i % (size_t)oc];
    }
    free(tmp);
    /* Adding values may move g->values: keep what is needed of w. */
    char *wname = strdup(w->name);
    int wrank = w->rank;
    int64_t wdims[SHARDNET_MAX_DIMS], bd = oc;
    memcpy(wdims, w->dims, sizeof wdims);
    if (!wname) {
        free(nw);
        free(nb);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "folding batch norm");
    }
    int wv = sn_pass_new_const(g, wname, "_bnfold", nw, wrank, wdims);
    if (wv < 0) {
        free(wname);
        free(nb);
        return SHARDNET_OUT_OF_MEMORY;
    }
    int bv = sn_pass_new_const(g, wname, "_bnbias", nb, 1, &bd);
    free(wname);
    if (bv < 0 || !sn_pass_ensure_inputs(prod, 3))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "folding batch norm");
    prod->inputs[1] = wv;
    prod->inputs[2] = bv;
    if (!is_conv) {
        sn_attr *a = (sn_attr *)sn_node_attr(prod, "beta");
        if (a)
            a->f = 1.0f;
    }
    /* The producer now writes what BatchNormalization wrote. */
    prod->outputs[0] = bn->outputs[0];
    g->values[bn->outputs[0]].producer = (int)(prod - g->nodes);
    bn->dead = 1;
    *done = 1;
    return SHARDNET_OK;
}

shardnet_status sn_pass_fold_batchnorm(sn_graph *g, size_t *folded)
{
    int *uses = sn_pass_use_counts(g);
    shardnet_status st = SHARDNET_OK;
    *folded = 0;
    if (!uses)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "folding batch norm");
    for (size_t i = 0; i < g->nnodes; i++) {
        sn_node *p = &g->nodes[i];
        int done;
        if ((!sn_pass_is_op(p, "Conv") && !sn_pass_is_op(p, "Gemm")) || p->ninputs < 2 ||
            p->noutputs != 1 || p->inputs[1] < 0)
            continue;
        sn_node *bn = sn_pass_sole_consumer(g, uses, p->outputs[0]);
        if (!sn_pass_is_op(bn, "BatchNormalization") || bn->inputs[0] != p->outputs[0])
            continue;
        /* BN after Gemm normalises axis 1 = the Gemm's columns: the same. */
        st = fold_one(g, p, bn, &done);
        if (st != SHARDNET_OK)
            break;
        *folded += (size_t)done;
        if (done) {
            free(uses); /* new values were added */
            if (!(uses = sn_pass_use_counts(g)))
                return sn_error(SHARDNET_OUT_OF_MEMORY, "folding batch norm");
        }
    }
    free(uses);
    return st;
}
