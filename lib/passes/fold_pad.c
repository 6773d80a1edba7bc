/*
 * The pass that folds a zero Pad into the convolution after it: a Pad in
 * constant mode with the value 0, non-negative pads on the spatial axes
 * only, read by a Conv alone whose weights are finite constants and
 * whose padding is explicit (no auto_pad).  The Conv then reads the
 * Pad's input, the pads added to its own (tf2onnx exports TensorFlow's
 * "SAME" strided convolutions as Pad then Conv).  The padded zeros are
 * read by the same taps either way, w * 0 in the same place of the same
 * sums, so the bits are the same; the weights must be finite because an
 * infinite one times a padded zero is NaN, where the depthwise kernel
 * leaves taps outside the input out.  A copy of the tensor fewer (M-LSD:
 * six Pads, about 0.9 ms of 44).
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/rewrite.h"

/* Pad p's pads (2 * rank of them, begins then ends) when they are
 * constants: from the attribute before opset 11, else input 1.  Their
 * count in *n; 0 when not known here. */
static int pad_amounts(const sn_graph *g, const sn_node *p, int64_t *pads,
                       size_t *n)
{
    if (g->opset < 11) {
        const sn_attr *a = sn_node_attr(p, "pads");
        if (!a)
            a = sn_node_attr(p, "paddings");
        if (!a || a->type != SN_ATTR_INTS || a->count > 2 * SHARDNET_MAX_DIMS)
            return 0;
        memcpy(pads, a->ints, a->count * sizeof *pads);
        *n = a->count;
        return 1;
    }
    if (p->ninputs < 2 || p->inputs[1] < 0)
        return 0;
    const sn_value *v = &g->values[p->inputs[1]];
    if (!(v->flags & SN_VALUE_CONST) || v->dtype != SN_DT_INT64 ||
        v->rank != 1 || v->dims[0] < 0 || v->dims[0] > 2 * SHARDNET_MAX_DIMS ||
        v->nbytes != (size_t)v->dims[0] * sizeof *pads)
        return 0;
    memcpy(pads, v->data, v->nbytes);
    *n = (size_t)v->dims[0];
    return 1;
}

/* Pad p fills with +0: its value attribute (before opset 11) or its
 * constant_value input, absent or +0.0. */
static int pads_with_zero(const sn_graph *g, const sn_node *p)
{
    float v = 0.0f;
    if (g->opset < 11)
        v = sn_attr_float(p, "value", 0.0f);
    else if (p->ninputs > 2 && p->inputs[2] >= 0 &&
             !sn_pass_const_floats(g, p->inputs[2], 1, &v))
        return 0;
    return v == 0.0f && !signbit(v);
}

/* Every weight of Conv c is a finite float constant. */
static int finite_weights(const sn_graph *g, const sn_node *c)
{
    const sn_value *w = c->ninputs > 1 && c->inputs[1] >= 0
                            ? &g->values[c->inputs[1]]
                            : NULL;
    if (!w || !(w->flags & SN_VALUE_CONST) || w->dtype != SN_DT_FLOAT ||
        w->nbytes % sizeof(float))
        return 0;
    for (size_t i = 0; i < w->nbytes / sizeof(float); i++) {
        float x;
        memcpy(&x, (const char *)w->data + i * sizeof x, sizeof x);
        if (!isfinite(x))
            return 0;
    }
    return 1;
}

/* Zero Pad p (node pi) read by Conv c alone: fold it; 0 when it is not
 * such a pair, -1 when out of memory. */
static int fold_one(sn_graph *g, size_t pi, sn_node *c)
{
    sn_node *p = &g->nodes[pi];
    int64_t pads[2 * SHARDNET_MAX_DIMS];
    size_t np;
    sn_attr *cp;

    if (!sn_pass_is_op(c, "Conv") || c->ninputs < 2 ||
        c->inputs[0] != p->outputs[0] ||
        strcmp(sn_attr_string(c, "auto_pad", "NOTSET"), "NOTSET") ||
        strcmp(sn_attr_string(p, "mode", "constant"), "constant") ||
        (p->ninputs > 3 && p->inputs[3] >= 0) || /* axes */
        !pad_amounts(g, p, pads, &np) || np < 6 || np % 2 ||
        !pads_with_zero(g, p) || !finite_weights(g, c))
        return 0;
    const size_t r = np / 2, nd = r - 2;
    if (pads[0] || pads[1] || pads[r] || pads[r + 1])
        return 0; /* batch or channels padded */
    for (size_t i = 0; i < np; i++)
        if (pads[i] < 0 || pads[i] > SN_MAX_ELEMENTS)
            return 0;
    cp = (sn_attr *)sn_node_attr(c, "pads");
    if (cp && (cp->type != SN_ATTR_INTS || cp->count != 2 * nd))
        return 0;
    for (size_t i = 0; cp && i < 2 * nd; i++)
        if (cp->ints[i] < 0 || cp->ints[i] > SN_MAX_ELEMENTS)
            return 0; /* (the lowering refuses it) */
    if (!cp) {
        int64_t *z = calloc(2 * nd, sizeof *z);
        if (!z || !(cp = sn_node_add_attr(c, "pads", SN_ATTR_INTS))) {
            free(z);
            return -1;
        }
        cp->ints = z;
        cp->count = 2 * nd;
    }
    for (size_t i = 0; i < nd; i++) {
        cp->ints[i] += pads[2 + i];
        cp->ints[nd + i] += pads[r + 2 + i];
    }
    c->inputs[0] = p->inputs[0];
    p->dead = 1;
    return 1;
}

shardnet_status sn_pass_fold_pad(sn_graph *g, size_t *folded)
{
    int *uses = sn_pass_use_counts(g);
    *folded = 0;
    if (!uses)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "folding pads");
    for (size_t i = 0; i < g->nnodes; i++) {
        sn_node *p = &g->nodes[i];
        if (!sn_pass_is_op(p, "Pad") || p->ninputs < 1 || p->inputs[0] < 0 ||
            p->noutputs != 1)
            continue;
        sn_node *c = sn_pass_sole_consumer(g, uses, p->outputs[0]);
        int k = c ? fold_one(g, i, c) : 0;
        if (k < 0) {
            free(uses);
            return sn_error(SHARDNET_OUT_OF_MEMORY, "folding pads");
        }
        *folded += (size_t)k;
    }
    free(uses);
    return SHARDNET_OK;
}
