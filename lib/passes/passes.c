/*
 * Graph passes: BatchNorm folded into the Conv/Gemm before it, an
 * activation fused into the GEMM or convolution before it, dead-node
 * removal.  (Constant folding is in fold_constants.c.)
 * Every pass keeps the graph sorted and marks removed nodes dead.
 */
#include <config.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"

/* How many live nodes read each value; graph outputs count as a use. */
static int *use_counts(const sn_graph *g)
{
    int *uses = calloc(g->nvalues + 1, sizeof *uses);
    if (!uses)
        return NULL;
    for (size_t i = 0; i < g->nnodes; i++) {
        const sn_node *n = &g->nodes[i];
        if (n->dead)
            continue;
        for (size_t j = 0; j < n->ninputs; j++)
            if (n->inputs[j] >= 0)
                uses[n->inputs[j]]++;
    }
    for (size_t i = 0; i < g->noutputs; i++)
        uses[g->outputs[i]]++;
    return uses;
}

/* The only live consumer of value v, or NULL. */
static sn_node *sole_consumer(sn_graph *g, const int *uses, int v)
{
    if (v < 0 || uses[v] != 1 || (g->values[v].flags & SN_VALUE_OUTPUT))
        return NULL;
    for (size_t i = 0; i < g->nnodes; i++) {
        sn_node *n = &g->nodes[i];
        if (n->dead)
            continue;
        for (size_t j = 0; j < n->ninputs; j++)
            if (n->inputs[j] == v)
                return n;
    }
    return NULL;
}

static int is_op(const sn_node *n, const char *op)
{
    return n && !n->dead && (!n->domain[0] || !strcmp(n->domain, "ai.onnx")) &&
           !strcmp(n->op_type, op);
}

/*
 * A float constant with exactly `count` elements, copied (aligned: the
 * mapped file's raw_data need not be) into the caller's buffer `out`.
 */
static const float *const_floats(const sn_graph *g, int v, size_t count,
                                 float *out)
{
    const sn_value *val;
    if (v < 0)
        return NULL;
    val = &g->values[v];
    if (!(val->flags & SN_VALUE_CONST) || val->dtype != SN_DT_FLOAT ||
        sn_value_elements(val) != (int64_t)count)
        return NULL;
    memcpy(out, val->data, count * sizeof *out);
    return out;
}

/* A new constant value holding `data` (owned), 1-D or with the given dims. */
static int new_const(sn_graph *g, const char *base, const char *suffix,
                     float *data, int rank, const int64_t *dims)
{
    char name[SN_MAX_NAME + 32];
    int v;
    size_t count = 1;
    for (int i = 0; i < rank; i++)
        count *= (size_t)dims[i];
    for (int k = 0;; k++) {
        snprintf(name, sizeof name, "%.*s%s%d", SN_MAX_NAME, base, suffix, k);
        if (sn_graph_find(g, name) < 0)
            break;
    }
    v = sn_graph_add_value(g, name);
    if (v < 0) {
        free(data);
        return -1;
    }
    sn_value *val = &g->values[v];
    val->dtype = SN_DT_FLOAT;
    val->rank = rank;
    memcpy(val->dims, dims, (size_t)rank * sizeof *dims);
    val->data = val->owned = data;
    val->nbytes = count * sizeof(float);
    val->flags = SN_VALUE_CONST;
    val->producer = -1;
    return v;
}

/* Give node n a third input slot if it has only two (Conv/Gemm bias). */
static int ensure_inputs(sn_node *n, size_t count)
{
    if (n->ninputs >= count)
        return 1;
    int *in = realloc(n->inputs, count * sizeof *in);
    if (!in)
        return 0;
    for (size_t i = n->ninputs; i < count; i++)
        in[i] = -1;
    n->inputs = in;
    n->ninputs = count;
    return 1;
}

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
    const float *scale = const_floats(g, bn->inputs[1], (size_t)oc, tmp);
    const float *beta = const_floats(g, bn->inputs[2], (size_t)oc, tmp + oc);
    const float *mean = const_floats(g, bn->inputs[3], (size_t)oc, tmp + 2 * oc);
    const float *var = const_floats(g, bn->inputs[4], (size_t)oc, tmp + 3 * oc);
    const float *bias = NULL;
    float *s = tmp + 5 * oc;
    int usable = scale && beta && mean && var;
    if (usable && prod->ninputs > 2 && prod->inputs[2] >= 0) {
        bias = const_floats(g, prod->inputs[2], (size_t)oc, tmp + 4 * oc);
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
    int64_t wdims[SN_MAX_DIMS], bd = oc;
    memcpy(wdims, w->dims, sizeof wdims);
    if (!wname) {
        free(nw);
        free(nb);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "folding batch norm");
    }
    int wv = new_const(g, wname, "_bnfold", nw, wrank, wdims);
    if (wv < 0) {
        free(wname);
        free(nb);
        return SHARDNET_OUT_OF_MEMORY;
    }
    int bv = new_const(g, wname, "_bnbias", nb, 1, &bd);
    free(wname);
    if (bv < 0 || !ensure_inputs(prod, 3))
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
    int *uses = use_counts(g);
    shardnet_status st = SHARDNET_OK;
    *folded = 0;
    if (!uses)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "folding batch norm");
    for (size_t i = 0; i < g->nnodes; i++) {
        sn_node *p = &g->nodes[i];
        int done;
        if ((!is_op(p, "Conv") && !is_op(p, "Gemm")) || p->ninputs < 2 ||
            p->noutputs != 1 || p->inputs[1] < 0)
            continue;
        sn_node *bn = sole_consumer(g, uses, p->outputs[0]);
        if (!is_op(bn, "BatchNormalization") || bn->inputs[0] != p->outputs[0])
            continue;
        /* BN after Gemm normalises axis 1 = the Gemm's columns: the same. */
        st = fold_one(g, p, bn, &done);
        if (st != SHARDNET_OK)
            break;
        *folded += (size_t)done;
        if (done) {
            free(uses); /* new values were added */
            if (!(uses = use_counts(g)))
                return sn_error(SHARDNET_OUT_OF_MEMORY, "folding batch norm");
        }
    }
    free(uses);
    return st;
}

/* Node r, the only reader of node p's output, done by p: p now writes
 * r's output, and r is dead. */
static void absorb(sn_graph *g, size_t p, sn_node *r)
{
    g->nodes[p].outputs[0] = r->outputs[0];
    g->values[r->outputs[0]].producer = (int)p;
    r->dead = 1;
}

/*
 * MatMul by a constant matrix whose only reader adds a constant vector over
 * its columns (a linear layer as PyTorch exports it: MatMul, then Add of
 * the bias): the bias becomes the MatMul's third input, marked by the
 * attribute "bias", and the GEMM's epilogue adds it.  The epilogue adds the
 * same two floats the Add did, so the result is the same bit for bit.
 */
shardnet_status sn_pass_fuse_bias(sn_graph *g, size_t *fused)
{
    int *uses = use_counts(g);
    *fused = 0;
    if (!uses)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "fusing biases");
    for (size_t i = 0; i < g->nnodes; i++) {
        sn_node *p = &g->nodes[i];
        if (!is_op(p, "MatMul") || p->ninputs != 2 || p->noutputs != 1 ||
            p->inputs[1] < 0 || sn_node_attr(p, "activation"))
            continue;
        const sn_value *w = &g->values[p->inputs[1]];
        if (!(w->flags & SN_VALUE_CONST) || w->dtype != SN_DT_FLOAT ||
            w->rank != 2)
            continue;
        sn_node *r = sole_consumer(g, uses, p->outputs[0]);
        /* An Add with an axis (opsets 1-6) aligns its B otherwise. */
        if (!is_op(r, "Add") || r->ninputs != 2 || r->noutputs != 1 ||
            sn_node_attr(r, "axis"))
            continue;
        int bias = r->inputs[0] == p->outputs[0] ? r->inputs[1] : r->inputs[0];
        const sn_value *bv = bias >= 0 ? &g->values[bias] : NULL;
        /* A vector of the output's width; any other shape would broadcast
         * differently (a [1, N] bias would add a dimension to a 1-D
         * product). */
        if (!bv || bias == p->outputs[0] || !(bv->flags & SN_VALUE_CONST) ||
            bv->dtype != SN_DT_FLOAT || bv->rank != 1 ||
            bv->dims[0] != w->dims[1])
            continue;
        sn_attr *a = sn_node_add_attr(p, "bias", SN_ATTR_INT);
        if (!a || !ensure_inputs(p, 3)) {
            free(uses);
            return sn_error(SHARDNET_OUT_OF_MEMORY, "fusing biases");
        }
        a->i = 1;
        p->inputs[2] = bias;
        absorb(g, i, r);
        (*fused)++;
    }
    free(uses);
    return SHARDNET_OK;
}

/* Gemm / MatMul / Conv followed by Relu: the kernel's epilogue applies it. */
shardnet_status sn_pass_fuse_activation(sn_graph *g, size_t *fused)
{
    int *uses = use_counts(g);
    *fused = 0;
    if (!uses)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "fusing activations");
    for (size_t i = 0; i < g->nnodes; i++) {
        sn_node *p = &g->nodes[i];
        if ((!is_op(p, "Gemm") && !is_op(p, "MatMul") && !is_op(p, "Conv")) ||
            p->noutputs != 1 || sn_node_attr(p, "activation"))
            continue;
        sn_node *r = sole_consumer(g, uses, p->outputs[0]);
        if (!is_op(r, "Relu"))
            continue;
        sn_attr *a = sn_node_add_attr(p, "activation", SN_ATTR_STRING);
        if (!a || !(a->s = strdup("Relu"))) {
            free(uses);
            return sn_error(SHARDNET_OUT_OF_MEMORY, "fusing activations");
        }
        absorb(g, i, r);
        (*fused)++;
    }
    free(uses);
    return SHARDNET_OK;
}

/* Nodes none of whose outputs is used (transitively) by a graph output. */
shardnet_status sn_pass_remove_dead(sn_graph *g, size_t *removed)
{
    int *uses = use_counts(g);
    *removed = 0;
    if (!uses)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "removing dead nodes");
    /* Sorted: walking backwards sees every consumer before its producer. */
    for (size_t k = g->nnodes; k-- > 0;) {
        sn_node *n = &g->nodes[k];
        int live = 0;
        if (n->dead)
            continue;
        for (size_t j = 0; j < n->noutputs; j++)
            if (n->outputs[j] >= 0 && uses[n->outputs[j]] > 0)
                live = 1;
        if (live)
            continue;
        n->dead = 1;
        (*removed)++;
        for (size_t j = 0; j < n->ninputs; j++)
            if (n->inputs[j] >= 0)
                uses[n->inputs[j]]--;
    }
    free(uses);
    return SHARDNET_OK;
}

shardnet_status sn_passes_run(sn_graph *g)
{
    size_t n;
    shardnet_status st;
    if ((st = sn_pass_fold_constants(g, &n)) != SHARDNET_OK)
        return st;
    sn_log(SHARDNET_LOG_DEBUG, "passes: %zu nodes folded to constants", n);
    if ((st = sn_pass_fold_batchnorm(g, &n)) != SHARDNET_OK)
        return st;
    sn_log(SHARDNET_LOG_DEBUG, "passes: %zu batch norms folded", n);
    if ((st = sn_pass_fuse_bias(g, &n)) != SHARDNET_OK)
        return st;
    sn_log(SHARDNET_LOG_DEBUG, "passes: %zu biases fused", n);
    if ((st = sn_pass_fuse_activation(g, &n)) != SHARDNET_OK)
        return st;
    sn_log(SHARDNET_LOG_DEBUG, "passes: %zu activations fused", n);
    if ((st = sn_pass_remove_dead(g, &n)) != SHARDNET_OK)
        return st;
    sn_log(SHARDNET_LOG_DEBUG, "passes: %zu dead nodes removed", n);
    return SHARDNET_OK;
}
