/*
 * What the graph passes share (lib/passes/rewrite.h): who reads a value,
 * constants read and made, a node taking over the node after it.
 */
#include <config.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"
#include "passes/rewrite.h"

/* How many live nodes read each value; graph outputs count as a use. */
int *sn_pass_use_counts(const sn_graph *g)
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
sn_node *sn_pass_sole_consumer(sn_graph *g, const int *uses, int v)
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

int sn_pass_is_op(const sn_node *n, const char *op)
{
    return n && !n->dead && (!n->domain[0] || !strcmp(n->domain, "ai.onnx")) &&
           !strcmp(n->op_type, op);
}

/*
 * A float constant with exactly `count` elements, copied (aligned: the
 * mapped file's raw_data need not be) into the caller's buffer `out`.
 */
const float *sn_pass_const_floats(const sn_graph *g, int v, size_t count,
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
int sn_pass_new_const(sn_graph *g, const char *base, const char *suffix,
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
int sn_pass_ensure_inputs(sn_node *n, size_t count)
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

/* Node r's other input than y, where r is an `op` of two inputs (see
 * rewrite.h). */
int sn_pass_other_operand(const sn_node *r, const char *op, int y)
{
    if (!sn_pass_is_op(r, op) || r->ninputs != 2 || r->noutputs != 1 ||
        sn_node_attr(r, "axis"))
        return -1;
    return r->inputs[0] == y   ? r->inputs[1]
           : r->inputs[1] == y ? r->inputs[0]
                               : -1;
}

/* Node r, the only reader of node p's output, done by p: p now writes
 * r's output, and r is dead. */
void sn_pass_absorb(sn_graph *g, size_t p, sn_node *r)
{
    g->nodes[p].outputs[0] = r->outputs[0];
    g->values[r->outputs[0]].producer = (int)p;
    r->dead = 1;
}

int sn_pass_const_scalar(const sn_graph *g, int v, float *out)
{
    return v >= 0 && g->values[v].rank == 0 &&
           sn_pass_const_floats(g, v, 1, out) != NULL;
}

/* Clip c's bound `which` ("min" or "max"): its attribute or its input as
 * the opset says (absent: `absent`); 0 when it is not a constant scalar. */
static int clip_bound(const sn_graph *g, const sn_node *c, const char *which,
                      float absent, float *out)
{
    int k;
    if (sn_param_where(g, c, which, &k) != SHARDNET_OK)
        return 0;
    if (k < 0) {
        *out = sn_attr_float(c, which, absent);
        return 1;
    }
    if ((size_t)k >= c->ninputs || c->inputs[k] < 0) {
        *out = absent;
        return 1;
    }
    return sn_pass_const_scalar(g, c->inputs[k], out);
}

int sn_pass_clip_bounds(const sn_graph *g, const sn_node *c, float *lo,
                        float *hi)
{
    return clip_bound(g, c, "min", -INFINITY, lo) &&
           clip_bound(g, c, "max", INFINITY, hi);
}

sn_node *sn_pass_producer(sn_graph *g, int v)
{
    for (size_t i = 0; v >= 0 && i < g->nnodes; i++) {
        sn_node *n = &g->nodes[i];
        for (size_t o = 0; !n->dead && o < n->noutputs; o++)
            if (n->outputs[o] == v)
                return n;
    }
    return NULL;
}

/* Value v is a constant of type t (any, where t is UNDEFINED) and rank at
 * most max_rank. */
static int const_of(const sn_graph *g, int v, sn_dtype t, int max_rank)
{
    const sn_value *x = v >= 0 ? &g->values[v] : NULL;
    return x && (x->flags & SN_VALUE_CONST) && x->rank >= 0 &&
           x->rank <= max_rank && (t == SN_DT_UNDEFINED || x->dtype == t);
}

/* Is n a Cast to float of a constant fp16 or bf16 matrix? */
static int half_cast(const sn_graph *g, const sn_node *n)
{
    const sn_attr *to = sn_node_attr(n, "to");
    const sn_value *x = n->ninputs == 1 && n->inputs[0] >= 0
                            ? &g->values[n->inputs[0]]
                            : NULL;
    return sn_pass_is_op(n, "Cast") && to && to->i == SN_DT_FLOAT && x &&
           const_of(g, n->inputs[0], SN_DT_UNDEFINED, 2) && x->rank == 2 &&
           (x->dtype == SN_DT_FLOAT16 || x->dtype == SN_DT_BFLOAT16);
}

int sn_pass_keeps_quantized(const sn_graph *g, const sn_node *n)
{
    if (!n || n->noutputs != 1 || n->outputs[0] < 0 ||
        (g->values[n->outputs[0]].flags & SN_VALUE_OUTPUT))
        return 0;
    if (!half_cast(g, n)) {
        if (!sn_pass_is_op(n, "DequantizeLinear") || n->ninputs < 2 ||
            sn_node_attr(n, "block_size"))
            return 0;
        const sn_value *x =
            n->inputs[0] >= 0 ? &g->values[n->inputs[0]] : NULL;
        if (!x || !const_of(g, n->inputs[0], SN_DT_UNDEFINED, 2) ||
            x->rank != 2 ||
            (x->dtype != SN_DT_INT8 && x->dtype != SN_DT_UINT8) ||
            !const_of(g, n->inputs[1], SN_DT_FLOAT, 1) ||
            (n->ninputs > 2 && n->inputs[2] >= 0 &&
             !const_of(g, n->inputs[2], x->dtype, 1)))
            return 0;
    }
    int y = n->outputs[0], read = 0;
    for (size_t i = 0; i < g->nnodes; i++) {
        const sn_node *c = &g->nodes[i];
        for (size_t j = 0; !c->dead && j < c->ninputs; j++) {
            if (c->inputs[j] != y)
                continue;
            if (j != 1 || (!sn_pass_is_op(c, "MatMul") &&
                           !sn_pass_is_op(c, "Gemm")))
                return 0;
            read = 1;
        }
    }
    return read;
}
