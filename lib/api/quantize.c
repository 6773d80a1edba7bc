/*
 * shardnet_model_quantize: a copy of an ONNX model with smaller weights
 * (see include/shardnet.h for what it writes).
 *
 * The model is imported (lib/import: checked, its files mapped, external
 * data included) but not simplified, so that its graph's nodes are the
 * file's, in order.  From that graph we choose the weights: float32
 * initializers used only as the B input of MatMul or Gemm, since those
 * are the uses whose output axis we know, and a weight shared with any
 * other use is left alone rather than changed under that use.  Each chosen
 * weight is encoded (quantize_encode.c), then the model is written again
 * by lib/import/onnx_write.c, which asks us, node by node and initializer
 * by initializer, what to change: a chosen initializer gives way to its
 * encoded tensors, node 0 gets the DequantizeLinear or Cast nodes in front
 * of it (they read initializers only, so the front is always in order),
 * and in int4 each product by a chosen weight becomes a MatMulNBits.
 */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_impl.h"
#include "api/quantize.h"
#include "core/error.h"
#include "import/onnx.h"
#include "import/onnx_write.h"

/* int4's block when the options give none, and the largest accepted. */
#define DEFAULT_BLOCK 32
#define MAX_BLOCK 65536

/* The opsets of the default domain the forms need: DequantizeLinear (its
 * axis from 13), Cast with a numeric `to` (6), Add that broadcasts (7). */
#define OPSET_DEQUANTIZE 10
#define OPSET_DEQUANTIZE_AXIS 13
#define OPSET_CAST 6
#define OPSET_ADD 7

/* A tensor written in place of a weight. */
typedef struct new_tensor {
    char *name;
    sn_dtype dtype;
    int rank;
    int64_t dims[3];
    void *data;
    size_t nbytes;
} new_tensor;

/* A weight converted: its value, its output axis (1 for [K, N], 0 for
 * [N, K]), K and N, and what replaces it (int8: integers, scales, zero
 * points; int4: blocks, scales; fp16: halves). */
typedef struct qweight {
    int value;
    int axis;
    size_t k, n;
    new_tensor t[3];
    size_t nt;
} qweight;

/* int4: a node that becomes a MatMulNBits, and the name of its product
 * when an Add of the Gemm's bias follows. */
typedef struct nbits_node {
    int weight; /* its qweight, or -1: the node stays */
    char *product;
} nbits_node;

/* How a value is used. */
typedef struct uses {
    size_t weight;     /* as the B of MatMul or Gemm */
    size_t other;      /* otherwise (an input, a graph output, a node's
                          output) */
    int axis;          /* the output axis of the first weight use */
    int mixed;         /* weight uses of different output axes */
    const char *nbits; /* int4: why a use cannot become MatMulNBits */
} uses;

typedef struct quant {
    shardnet_quantize_options o;
    sn_graph *g;
    size_t nvalues;    /* g's values as imported (names made come after) */
    uses *use;         /* per value */
    int *weight_of;    /* per value: its qweight, or -1 */
    nbits_node *nodes; /* int4: per node */
    qweight *w;
    size_t nw, kept, written;
    uint64_t before, after;
    char why[256];
} quant;

/* ---- Options ------------------------------------------------------- */

static shardnet_status check_form(const shardnet_quantize_options *o)
{
    if (o->weights != SHARDNET_QUANTIZE_INT8 &&
        o->weights != SHARDNET_QUANTIZE_INT4 &&
        o->weights != SHARDNET_QUANTIZE_FP16)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "quantize options: weights %d is none of "
                        "SHARDNET_QUANTIZE_INT8, _INT4, _FP16",
                        (int)o->weights);
    if (o->flags & ~SHARDNET_QUANTIZE_PER_CHANNEL)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "quantize options: unknown flags 0x%x",
                        o->flags & ~SHARDNET_QUANTIZE_PER_CHANNEL);
    if ((o->flags & SHARDNET_QUANTIZE_PER_CHANNEL) &&
        o->weights != SHARDNET_QUANTIZE_INT8)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "quantize options: per-channel scales are for int8 "
                        "(int4 has a scale per block, fp16 none)");
    if (o->block_size && o->weights != SHARDNET_QUANTIZE_INT4)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "quantize options: a block size is for int4 only");
    return SHARDNET_OK;
}

/* The caller's options into q->o, checked, the defaults filled in. */
static shardnet_status read_options(const shardnet_quantize_options *in,
                                    shardnet_quantize_options *o)
{
    shardnet_status st = sn_options_read(in, o, sizeof *o, sizeof *o,
                                         "quantize");
    if (st != SHARDNET_OK || (st = check_form(o)) != SHARDNET_OK)
        return st;
    if (o->weights == SHARDNET_QUANTIZE_INT4) {
        size_t b = o->block_size ? o->block_size : DEFAULT_BLOCK;
        if (b < 16 || b > MAX_BLOCK || (b & (b - 1)))
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "quantize options: block size %zu is not a "
                            "power of two from 16 to %d",
                            b, MAX_BLOCK);
        o->block_size = b;
    }
    if (!o->min_elements)
        o->min_elements = SHARDNET_QUANTIZE_MIN_ELEMENTS;
    return SHARDNET_OK;
}

/* The model's default-domain opset against what the form needs. */
static shardnet_status check_opset(const quant *q)
{
    int64_t have = q->g->opset;
    int per_channel = (q->o.flags & SHARDNET_QUANTIZE_PER_CHANNEL) != 0;
    if (q->o.weights == SHARDNET_QUANTIZE_INT8 && per_channel &&
        have < OPSET_DEQUANTIZE_AXIS)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "per-channel int8 needs DequantizeLinear's axis, "
                        "opset %d or later, and the model's is %" PRId64
                        " (quantize per tensor, or convert the model to a "
                        "later opset first)",
                        OPSET_DEQUANTIZE_AXIS, have);
    if (q->o.weights == SHARDNET_QUANTIZE_INT8 && have < OPSET_DEQUANTIZE)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "int8 weights need DequantizeLinear, opset %d or "
                        "later, and the model's is %" PRId64,
                        OPSET_DEQUANTIZE, have);
    if (q->o.weights == SHARDNET_QUANTIZE_FP16 && have < OPSET_CAST)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "fp16 weights need Cast with a numeric 'to', opset "
                        "%d or later, and the model's is %" PRId64,
                        OPSET_CAST, have);
    return SHARDNET_OK;
}

/* ---- Choosing the weights ------------------------------------------ */

static int default_domain(const char *d)
{
    return !*d || !strcmp(d, "ai.onnx");
}

/* The output axis of the weight input `slot` of node n: 1 when it is
 * [K, N], 0 when [N, K]; -1 when that input is no MatMul's or Gemm's B. */
static int weight_axis(const sn_node *n, size_t slot)
{
    if (slot != 1 || !default_domain(n->domain) || n->inputs[0] < 0 ||
        n->noutputs < 1 || n->outputs[0] < 0)
        return -1;
    if (!strcmp(n->op_type, "MatMul"))
        return 1;
    if (!strcmp(n->op_type, "Gemm"))
        return sn_attr_int(n, "transB", 0) ? 0 : 1;
    return -1;
}

/* Why node n (a MatMul or Gemm) cannot become a MatMulNBits, or NULL. */
static const char *nbits_refusal(const sn_graph *g, const sn_node *n)
{
    int has_c = n->ninputs > 2 && n->inputs[2] >= 0;
    if (strcmp(n->op_type, "Gemm"))
        return NULL;
    if (sn_attr_int(n, "transA", 0))
        return "a Gemm with transA";
    if (sn_attr_float(n, "alpha", 1.0f) != 1.0f ||
        (has_c && sn_attr_float(n, "beta", 1.0f) != 1.0f))
        return "a Gemm with alpha or beta other than 1";
    if (has_c && g->opset < OPSET_ADD)
        return "a Gemm with a bias, whose Add below opset 7 does not "
               "broadcast";
    return NULL;
}

/* Node n's reading of input slot: a use of that value. */
static void note_use(quant *q, const sn_node *n, size_t slot)
{
    uses *u = &q->use[n->inputs[slot]];
    int axis = weight_axis(n, slot);
    if (axis < 0) {
        u->other++;
        return;
    }
    if (u->weight && u->axis != axis)
        u->mixed = 1;
    u->axis = axis;
    u->weight++;
    if (q->o.weights == SHARDNET_QUANTIZE_INT4 && !u->nbits)
        u->nbits = nbits_refusal(q->g, n);
}

/* Every use of every value of the main graph.  A subgraph's reads of the
 * main graph's values are its control node's last inputs, so they count
 * as that node's (other) uses. */
static void count_uses(quant *q)
{
    const sn_graph *g = q->g;
    for (size_t i = 0; i < g->nnodes; i++) {
        const sn_node *n = &g->nodes[i];
        for (size_t s = 0; s < n->ninputs; s++)
            if (n->inputs[s] >= 0)
                note_use(q, n, s);
        for (size_t s = 0; s < n->noutputs; s++)
            if (n->outputs[s] >= 0)
                q->use[n->outputs[s]].other++;
    }
    for (size_t i = 0; i < g->noutputs; i++)
        q->use[g->outputs[i]].other++;
}

/* Why weight v, of uses u, stays float32 (in q->why), or NULL to convert
 * it. */
static const char *refusal(quant *q, const sn_value *v, const uses *u)
{
    int one_axis = q->o.weights == SHARDNET_QUANTIZE_INT4 ||
                   (q->o.flags & SHARDNET_QUANTIZE_PER_CHANNEL);
    int64_t count = sn_value_elements(v);
    if (v->dtype != SN_DT_FLOAT)
        snprintf(q->why, sizeof q->why, "it is %s, not float32",
                 sn_dtype_name(v->dtype));
    else if (v->rank != 2)
        snprintf(q->why, sizeof q->why, "it has %d dimensions, not 2",
                 v->rank);
    else if (count < 0 || (uint64_t)count < q->o.min_elements)
        snprintf(q->why, sizeof q->why,
                 "it has %" PRId64 " elements, fewer than %zu", count,
                 q->o.min_elements);
    else if (u->other)
        snprintf(q->why, sizeof q->why,
                 "it has other uses than the weight of MatMul or Gemm");
    else if (u->mixed && one_axis)
        snprintf(q->why, sizeof q->why,
                 "its uses take its outputs along different axes");
    else if (u->nbits)
        snprintf(q->why, sizeof q->why, "it is the weight of %s", u->nbits);
    else
        return NULL;
    return q->why;
}

/* ---- Names --------------------------------------------------------- */

/* Whether a value of g or of a subgraph within it is named name. */
static int name_taken(const sn_graph *g, const char *name)
{
    if (sn_graph_find(g, name) >= 0)
        return 1;
    for (size_t i = 0; i < g->nnodes; i++)
        for (size_t a = 0; a < g->nodes[i].nattrs; a++) {
            const sn_attr *at = &g->nodes[i].attrs[a];
            if (at->type == SN_ATTR_GRAPH && at->graph &&
                name_taken(at->graph, name))
                return 1;
        }
    return 0;
}

/* A new value name, base and suffix, numbered where that is taken; added
 * to the graph so that no later name takes it.  NULL when out of memory
 * (error set). */
static char *fresh_name(quant *q, const char *base, const char *suffix)
{
    size_t cap = strlen(base) + strlen(suffix) + 24;
    char *name = malloc(cap);
    if (!name) {
        sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
        return NULL;
    }
    snprintf(name, cap, "%s%s", base, suffix);
    for (unsigned k = 1; name_taken(q->g, name); k++)
        snprintf(name, cap, "%s%s_%u", base, suffix, k);
    if (sn_graph_add_value(q->g, name) < 0) {
        free(name);
        return NULL;
    }
    return name;
}

/* ---- Encoding ------------------------------------------------------ */

/* Tensor t of w: named base + suffix, of dtype and dims, with room for
 * its data; SHARDNET_OK or out of memory. */
static shardnet_status add_tensor(quant *q, qweight *w, const char *suffix,
                                  sn_dtype dtype, int rank, const int64_t *dims)
{
    new_tensor *t = &w->t[w->nt++];
    size_t count = 1;
    *t = (new_tensor){.dtype = dtype, .rank = rank};
    for (int i = 0; i < rank; i++)
        count *= (size_t)(t->dims[i] = dims[i]);
    t->nbytes = count * sn_dtype_size(dtype);
    t->name = fresh_name(q, q->g->values[w->value].name, suffix);
    if (!t->name)
        return SHARDNET_OUT_OF_MEMORY;
    if (!(t->data = calloc(1, t->nbytes ? t->nbytes : 1)))
        return sn_error(SHARDNET_OUT_OF_MEMORY,
                        "out of memory for %zu bytes of weight", t->nbytes);
    return SHARDNET_OK;
}

static shardnet_status encode_int8(quant *q, qweight *w, const float *f,
                                   const int64_t *dims)
{
    int per_channel = (q->o.flags & SHARDNET_QUANTIZE_PER_CHANNEL) != 0;
    int64_t ns = (int64_t)w->n;
    shardnet_status st;
    if ((st = add_tensor(q, w, "_quantized", SN_DT_INT8, 2, dims)) ||
        (st = add_tensor(q, w, "_scale", SN_DT_FLOAT, per_channel, &ns)) ||
        (st = add_tensor(q, w, "_zero_point", SN_DT_INT8, per_channel, &ns)))
        return st;
    sn_q_int8(f, (size_t)dims[0], (size_t)dims[1], per_channel ? w->axis : -1,
              w->t[0].data, w->t[1].data);
    return SHARDNET_OK; /* the zero points stay 0 */
}

static shardnet_status encode_int4(quant *q, qweight *w, const float *f,
                                   const int64_t *dims)
{
    size_t bs = q->o.block_size, blocks = sn_q_int4_blocks(w->k, bs);
    int64_t bd[3] = {(int64_t)w->n, (int64_t)blocks, (int64_t)(bs / 2)};
    int64_t sd = (int64_t)(w->n * blocks);
    shardnet_status st;
    if ((st = add_tensor(q, w, "_q4", SN_DT_UINT8, 3, bd)) ||
        (st = add_tensor(q, w, "_scales", SN_DT_FLOAT, 1, &sd)))
        return st;
    sn_q_int4(f, (size_t)dims[0], (size_t)dims[1], w->axis, bs, w->t[0].data,
              w->t[1].data);
    return SHARDNET_OK;
}

/* fp16; *fits 0 (and nothing kept) when a value overflows float16. */
static shardnet_status encode_fp16(quant *q, qweight *w, const float *f,
                                   const int64_t *dims, int *fits)
{
    shardnet_status st = add_tensor(q, w, "_fp16", SN_DT_FLOAT16, 2, dims);
    if (st == SHARDNET_OK)
        *fits = sn_q_fp16(f, (size_t)(dims[0] * dims[1]), w->t[0].data);
    return st;
}

static void free_weight(qweight *w)
{
    for (size_t i = 0; i < w->nt; i++) {
        free(w->t[i].name);
        free(w->t[i].data);
    }
    w->nt = 0;
}

/* Value v, chosen, encoded into w; *done 0 (w emptied) when its values
 * say it must stay float32 after all, with the reason in q->why. */
static shardnet_status encode(quant *q, qweight *w, const sn_value *v,
                              int *done)
{
    size_t count = (size_t)(v->dims[0] * v->dims[1]);
    float *f = malloc(count * sizeof *f);
    int64_t dims[2] = {v->dims[0], v->dims[1]};
    shardnet_status st = SHARDNET_OK;
    *done = 0;
    if (!f)
        return sn_error(SHARDNET_OUT_OF_MEMORY,
                        "out of memory for weight '%s'", v->name);
    memcpy(f, v->data, count * sizeof *f); /* the file's are unaligned */
    if (!sn_q_finite(f, count)) {
        snprintf(q->why, sizeof q->why, "it holds NaN or infinity");
    } else if (q->o.weights == SHARDNET_QUANTIZE_INT8) {
        st = encode_int8(q, w, f, dims);
        *done = 1;
    } else if (q->o.weights == SHARDNET_QUANTIZE_INT4) {
        st = encode_int4(q, w, f, dims);
        *done = 1;
    } else {
        st = encode_fp16(q, w, f, dims, done);
        if (!*done)
            snprintf(q->why, sizeof q->why,
                     "its values go beyond float16's range");
    }
    free(f);
    if (st != SHARDNET_OK || !*done)
        free_weight(w);
    return st;
}

/* Value vi converted: the next qweight, or a note of why it stays. */
static shardnet_status choose(quant *q, int vi)
{
    const sn_value *v = &q->g->values[vi];
    const uses *u = &q->use[vi];
    const char *why = refusal(q, v, u);
    qweight *w = &q->w[q->nw];
    int done = 0;
    shardnet_status st = SHARDNET_OK;
    if (!why) {
        *w = (qweight){.value = vi, .axis = u->axis};
        w->k = (size_t)v->dims[u->axis == 1 ? 0 : 1];
        w->n = (size_t)v->dims[u->axis];
        if ((st = encode(q, w, v, &done)) != SHARDNET_OK)
            return st;
        why = done ? NULL : q->why;
    }
    /* The names encoding added may have moved the values. */
    v = &q->g->values[vi];
    if (why) {
        sn_log(SHARDNET_LOG_INFO, "quantize: weight '%s' stays float32: %s",
               v->name, why);
        q->kept++;
        return SHARDNET_OK;
    }
    /* Its float bytes are not written: their pages can go (a big model
     * then peaks at its converted weights, not at all of its floats). */
    sn_value_drop_pages(v);
    q->weight_of[vi] = (int)q->nw++;
    q->before += v->nbytes;
    for (size_t i = 0; i < w->nt; i++)
        q->after += w->t[i].nbytes;
    return SHARDNET_OK;
}

/* int4: the nodes that read a converted weight become MatMulNBits; a
 * Gemm's product gets a name of its own when its bias is added after. */
static shardnet_status plan_nbits(quant *q)
{
    const sn_graph *g = q->g;
    for (size_t i = 0; i < g->nnodes; i++) {
        const sn_node *n = &g->nodes[i];
        int w = n->ninputs > 1 && n->inputs[1] >= 0 &&
                        (size_t)n->inputs[1] < q->nvalues
                    ? q->weight_of[n->inputs[1]]
                    : -1;
        q->nodes[i].weight = w;
        if (w < 0 || n->ninputs < 3 || n->inputs[2] < 0)
            continue;
        q->nodes[i].product = fresh_name(
            q, q->g->values[n->outputs[0]].name, "_matmul");
        if (!q->nodes[i].product)
            return SHARDNET_OUT_OF_MEMORY;
    }
    return SHARDNET_OK;
}

/* Every weight chosen and encoded (q's arrays allocated). */
static shardnet_status plan(quant *q)
{
    shardnet_status st;
    count_uses(q);
    for (size_t v = 0; v < q->nvalues; v++) {
        q->weight_of[v] = -1;
        if (q->use[v].weight && (q->g->values[v].flags & SN_VALUE_CONST) &&
            (st = choose(q, (int)v)) != SHARDNET_OK)
            return st;
    }
    return q->o.weights == SHARDNET_QUANTIZE_INT4 ? plan_nbits(q)
                                                   : SHARDNET_OK;
}

/* ---- Writing ------------------------------------------------------- */

static const char *value_name(const quant *q, int vi)
{
    return q->g->values[vi].name;
}

/* The DequantizeLinear or Cast that gives weight w its float values under
 * its own name. */
static void put_weight_node(const quant *q, const qweight *w, sn_pbw *out)
{
    const char *v = value_name(q, w->value);
    const char *in[3] = {w->t[0].name, w->nt > 1 ? w->t[1].name : "",
                         w->nt > 2 ? w->t[2].name : ""};
    char name[SN_MAX_NAME + 32];
    if (q->o.weights == SHARDNET_QUANTIZE_FP16) {
        sn_onnx_int_attr to = {"to", SN_DT_FLOAT};
        snprintf(name, sizeof name, "%s/Cast", v);
        sn_onnx_put_node(out, name, "Cast", "", in, 1, v, &to, 1);
        return;
    }
    sn_onnx_int_attr axis = {"axis", w->axis};
    int per_channel = (q->o.flags & SHARDNET_QUANTIZE_PER_CHANNEL) != 0;
    snprintf(name, sizeof name, "%s/DequantizeLinear", v);
    sn_onnx_put_node(out, name, "DequantizeLinear", "", in, 3, v, &axis,
                     per_channel ? 1 : 0);
}

/* Node i as a MatMulNBits of its weight w, and an Add of a Gemm's bias
 * after it. */
static void put_nbits(const quant *q, size_t i, const qweight *w,
                      sn_pbw *out)
{
    const sn_node *n = &q->g->nodes[i];
    const char *product = q->nodes[i].product;
    const char *y = value_name(q, n->outputs[0]);
    const char *in[3] = {value_name(q, n->inputs[0]), w->t[0].name,
                         w->t[1].name};
    sn_onnx_int_attr attrs[4] = {{"K", (int64_t)w->k},
                                 {"N", (int64_t)w->n},
                                 {"bits", 4},
                                 {"block_size", (int64_t)q->o.block_size}};
    char name[SN_MAX_NAME + 32];
    sn_onnx_put_node(out, n->name, "MatMulNBits", "com.microsoft", in, 3,
                     product ? product : y, attrs, 4);
    if (!product)
        return;
    const char *add_in[2] = {product, value_name(q, n->inputs[2])};
    snprintf(name, sizeof name, "%s/Add", n->name);
    sn_onnx_put_node(out, name, "Add", "", add_in, 2, y, NULL, 0);
}

/* What goes before node index, and whether it stays. */
static void edit_node(quant *q, size_t index, sn_pbw *before, int *keep)
{
    if (index == 0 && q->o.weights != SHARDNET_QUANTIZE_INT4)
        for (size_t i = 0; i < q->nw; i++)
            put_weight_node(q, &q->w[i], before);
    if (q->o.weights == SHARDNET_QUANTIZE_INT4 && q->nodes[index].weight >= 0) {
        put_nbits(q, index, &q->w[q->nodes[index].weight], before);
        *keep = 0;
    }
}

/* sn_onnx_edit_fn: the rewrite's questions, answered from the plan. */
static shardnet_status edit(void *user, sn_onnx_part part, size_t index,
                            const char *name, sn_pbw *before, int *keep)
{
    quant *q = user;
    if (part == SN_ONNX_NODE) {
        if (index >= q->g->nnodes)
            return sn_error(SHARDNET_INTERNAL, "node %zu of %zu", index,
                            q->g->nnodes);
        edit_node(q, index, before, keep);
        return SHARDNET_OK;
    }
    int vi = sn_graph_find(q->g, name);
    if (vi < 0 || (size_t)vi >= q->nvalues || q->weight_of[vi] < 0)
        return SHARDNET_OK;
    const qweight *w = &q->w[q->weight_of[vi]];
    for (size_t i = 0; i < w->nt; i++) {
        const new_tensor *t = &w->t[i];
        if (part == SN_ONNX_INITIALIZER)
            sn_onnx_put_tensor(before, t->name, t->dtype, t->rank, t->dims,
                               t->data, t->nbytes);
        else
            sn_onnx_put_input(before, t->name, t->dtype, t->rank, t->dims);
    }
    q->written += part == SN_ONNX_INITIALIZER;
    *keep = 0;
    return SHARDNET_OK;
}

/* The model written again into out, the file at path. */
static shardnet_status write_model(quant *q, const char *path,
                                   uint64_t *bytes)
{
    static const sn_onnx_opset microsoft = {"com.microsoft", 1};
    int nbits = q->o.weights == SHARDNET_QUANTIZE_INT4 && q->nw;
    sn_pbw out;
    shardnet_status st;
    sn_pbw_init(&out);
    st = sn_onnx_rewrite(q->g, edit, q, &microsoft, nbits ? 1 : 0, &out);
    if (st == SHARDNET_OK && q->written != q->nw)
        st = sn_error(SHARDNET_INTERNAL,
                      "%zu weights converted, %zu initializers replaced",
                      q->nw, q->written);
    if (st == SHARDNET_OK)
        st = sn_pbw_write_file(&out, path);
    *bytes = out.size;
    sn_pbw_free(&out);
    return st;
}

/* ---- The entry point ----------------------------------------------- */

static void free_quant(quant *q)
{
    for (size_t i = 0; i < q->nw; i++)
        free_weight(&q->w[i]);
    if (q->nodes)
        for (size_t i = 0; q->g && i < q->g->nnodes; i++)
            free(q->nodes[i].product);
    free(q->w);
    free(q->use);
    free(q->weight_of);
    free(q->nodes);
    sn_graph_free(q->g);
}

/* q's per-value and per-node arrays. */
static shardnet_status alloc_plan(quant *q)
{
    size_t nv = q->nvalues ? q->nvalues : 1;
    size_t nn = q->g->nnodes ? q->g->nnodes : 1;
    q->use = calloc(nv, sizeof *q->use);
    q->weight_of = calloc(nv, sizeof *q->weight_of);
    q->w = calloc(nv, sizeof *q->w);
    q->nodes = calloc(nn, sizeof *q->nodes);
    if (!q->use || !q->weight_of || !q->w || !q->nodes)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
    return SHARDNET_OK;
}

static void fill_report(const quant *q, uint64_t bytes,
                        shardnet_quantize_report *report)
{
    shardnet_quantize_report r = {.size = sizeof r};
    size_t n;
    if (!report)
        return;
    n = report->size && report->size < sizeof r ? report->size : sizeof r;
    r.converted = q->nw;
    r.kept = q->kept;
    r.bytes_before = q->before;
    r.bytes_after = q->after;
    r.file_bytes = bytes;
    if (n > sizeof r.size)
        memcpy((char *)report + sizeof r.size, (char *)&r + sizeof r.size,
               n - sizeof r.size);
}

shardnet_status shardnet_model_quantize(
    const char *in_path, const char *out_path,
    const shardnet_quantize_options *options,
    shardnet_quantize_report *report)
{
    quant q = {0};
    sn_model_file *files = NULL;
    size_t nfiles = 0;
    uint64_t bytes = 0;
    shardnet_status st;
    if (!in_path || !out_path)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "quantize: NULL model or output path");
    sn_error_clear();
    if ((st = read_options(options, &q.o)) != SHARDNET_OK)
        return st;
    st = sn_onnx_load_file(in_path, 0, &q.g, &files, &nfiles);
    sn_model_files_free(files, nfiles);
    if (st != SHARDNET_OK)
        return st; /* the error names the file */
    q.nvalues = q.g->nvalues;
    if ((st = check_opset(&q)) == SHARDNET_OK &&
        (st = alloc_plan(&q)) == SHARDNET_OK &&
        (st = plan(&q)) == SHARDNET_OK)
        st = write_model(&q, out_path, &bytes);
    if (st == SHARDNET_OK)
        fill_report(&q, bytes, report);
    else if (strncmp(shardnet_last_error(), out_path, strlen(out_path)))
        sn_error_prefix(st, "%s", in_path);
    free_quant(&q);
    return st;
}
