/*
 * Micro-batches: which batch a layer split may cut into micro-batches (the
 * first dimension of the inputs), whether the model's nodes keep its rows
 * apart so that the cut gives the whole batch's answer (by each
 * operator's rows rule), and how many micro-batches to cut it into.  The
 * cut planner weighs stages with these, and the pipeline's runtime asks
 * them once per batch size.  See layer_split.h.
 */
#include <config.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"
#include "ops/registry.h"
#include "plan/layer_split.h"
#include "plan/node_costs.h"
#include "comm/world.h"

/*
 * The batch that micro-batches cut: the first dimension of the first input
 * that has one.  1 (nothing to cut) when an input of that first dimension
 * is declared with a fixed size by the model: a model that fixes it has no
 * batch, its nodes may mix the rows (a Softmax over axis 0, a Reshape to a
 * fixed shape) and each stage's plan expects every row at once.
 */
size_t sn_batch_rows(const sn_graph *g, const sn_binding *in)
{
    size_t rows = 1, i;
    for (i = 0; i < g->ninputs && in[i].rank <= 0; i++)
        ;
    if (i == g->ninputs)
        return 1;
    rows = (size_t)in[i].dims[0];
    for (i = 0; i < g->ninputs; i++) {
        const sn_value *v = &g->values[g->inputs[i]];
        if (in[i].rank > 0 && (size_t)in[i].dims[0] == rows && v->rank > 0 &&
            v->dims[0] >= 0)
            return 1;
    }
    return rows;
}

/* --- whether micro-batches may cut the batch ------------------------------ */

static const sn_rt *fact(const sn_plan *plan, const sn_node *n, size_t j)
{
    const sn_rt *r = j < n->ninputs && n->inputs[j] >= 0
                         ? sn_plan_value(plan, (size_t)n->inputs[j])
                         : NULL;
    return r && r->known ? r : NULL;
}

/* Whether node n's `param` axes (of a tensor of rank r) name axis 0: 1
 * yes, 0 no, -1 when they cannot be read; absent, `absent`. */
static int axes_name_batch(const sn_graph *g, const sn_plan *plan,
                           const sn_node *n, const char *param, int r,
                           int absent)
{
    int64_t ax[SN_MAX_DIMS];
    size_t cnt;
    int k, given;
    if (sn_param_where(g, n, param, &k) != SHARDNET_OK ||
        sn_param_read(n, param, k, k >= 0 ? fact(plan, n, (size_t)k) : NULL,
                      ax, SN_MAX_DIMS, &cnt, &given) != SHARDNET_OK) {
        sn_error_clear();
        return -1;
    }
    if (!given || !cnt)
        return absent;
    for (size_t i = 0; i < cnt; i++)
        if (sn_axis(ax[i], r) <= 0)
            return 1;
    return 0;
}

/* Does node n, reading the batch (b[v]: value v carries it on axis 0),
 * keep the rows apart and give the batch on axis 0 of its outputs (of
 * rank ro)?  nb: how many of its inputs carry the batch.  By its
 * operator's rows rule (ops/registry.h). */
static int keeps_rows(const sn_graph *g, const sn_plan *plan,
                      const sn_node *n, const unsigned char *b, int nb,
                      int ro)
{
    const sn_operator *op = sn_operator_find(n->domain, n->op_type);
    const sn_rt *x = fact(plan, n, 0);
    int x_only = nb == 1 && n->inputs[0] >= 0 && b[n->inputs[0]] && x;
    switch (op ? op->rows : SN_ROWS_MIXED) {
    case SN_ROWS_MIXED:
        return 0;
    case SN_ROWS_EACH:
        return x_only;
    case SN_ROWS_CONV: {
        /* a fused residual carries the batch as the output does, or
         * broadcasts along it */
        const sn_rt *r = fact(plan, n, 3);
        if (n->ninputs < 4 || n->inputs[3] < 0)
            return x_only;
        if (!x || !r || n->inputs[0] < 0 || !b[n->inputs[0]])
            return 0;
        if (b[n->inputs[3]])
            return nb == 2 && r->rank == ro;
        return nb == 1 && (r->rank < ro || r->dims[0] == 1);
    }
    case SN_ROWS_BROADCAST:
        /* the batch's inputs as ranked as the output; the others
         * broadcast along axis 0 */
        for (size_t j = 0; j < n->ninputs; j++) {
            const sn_rt *r = fact(plan, n, j);
            if (n->inputs[j] < 0)
                continue;
            if (!r || (b[n->inputs[j]] ? r->rank != ro
                                       : r->rank == ro && r->dims[0] != 1))
                return 0;
        }
        return 1;
    case SN_ROWS_MATMUL: {
        const sn_rt *w = fact(plan, n, 1);
        if (!x || !w || !b[n->inputs[0]] || x->rank < 2 || x->rank != ro)
            return 0;
        if (b[n->inputs[1]]) /* batched products: both carry it */
            return w->rank == ro && ro >= 3;
        return w->rank <= 2 || w->rank < ro || w->dims[0] == 1;
    }
    case SN_ROWS_GEMM: {
        const sn_rt *c = fact(plan, n, 2);
        if (!x || !b[n->inputs[0]] || b[n->inputs[1]] ||
            sn_attr_int(n, "transA", 0))
            return 0;
        return !c || b[n->inputs[2]] || c->rank < 2 || c->dims[0] == 1;
    }
    case SN_ROWS_SOFTMAX:
        /* before opset 13 the axes from `axis` on are one: axis 0 too */
        return x_only &&
               sn_axis(sn_attr_int(n, "axis", g->opset >= 13 ? -1 : 1),
                       x->rank) >= 1;
    case SN_ROWS_LAYERNORM:
        return x_only && sn_axis(sn_attr_int(n, "axis", -1), x->rank) >= 1;
    case SN_ROWS_TRANSPOSE: {
        const sn_attr *perm = sn_node_attr(n, "perm");
        return x_only && (perm ? perm->type == SN_ATTR_INTS &&
                                     perm->count > 0 && perm->ints[0] == 0
                               : x->rank == 1);
    }
    case SN_ROWS_RESHAPE: {
        /* a target whose first entry keeps the batch (0: copied, -1: what
         * is left); the outputs' first dimension is checked before */
        const sn_rt *t = fact(plan, n, 1);
        int64_t first;
        if (!x_only || !t || !t->host || sn_rt_elements(t) < 1)
            return 0;
        first = sn_rt_get_int(t, 0);
        return first == 0 || first == -1;
    }
    case SN_ROWS_FLATTEN:
        return x_only && sn_axis(sn_attr_int(n, "axis", 1), x->rank) >= 1;
    case SN_ROWS_SQUEEZE:
        return x_only && axes_name_batch(g, plan, n, "axes", x->rank, 0) == 0;
    case SN_ROWS_UNSQUEEZE:
        return x_only && axes_name_batch(g, plan, n, "axes", ro, 1) == 0;
    case SN_ROWS_REDUCE:
        return x_only &&
               axes_name_batch(g, plan, n, "axes", x->rank,
                               !sn_attr_int(n, "noop_with_empty_axes", 0)) ==
                   0;
    case SN_ROWS_SLICE:
        return x_only && axes_name_batch(g, plan, n, "axes", x->rank, 1) == 0;
    case SN_ROWS_SPLIT:
        return x_only && sn_axis(sn_attr_int(n, "axis", 0), x->rank) >= 1;
    case SN_ROWS_CONCAT:
        for (size_t j = 0; j < n->ninputs; j++)
            if (n->inputs[j] >= 0 && !b[n->inputs[j]])
                return 0;
        return x && sn_axis(sn_attr_int(n, "axis", 0), x->rank) >= 1;
    case SN_ROWS_GATHER: {
        int64_t axis = sn_attr_int(n, "axis", 0);
        const sn_rt *idx = fact(plan, n, 1);
        if (!x || !idx || n->ninputs != 2)
            return 0;
        if (b[n->inputs[0]] && !b[n->inputs[1]])
            return sn_axis(axis, x->rank) >= 1;
        /* rows of indices into a whole table: an embedding */
        return !b[n->inputs[0]] && sn_axis(axis, x->rank) == 0 &&
               idx->rank >= 1;
    }
    }
    return 0;
}

/*
 * Do the nodes of g keep the rows of the batch apart, so that micro-batches
 * (cuts of axis 0 of the inputs whose first dimension is `rows`) give the
 * whole batch's answer?  Each value carries the batch on its axis 0 or does
 * not depend on it; a node that reads the batch must work row by row along
 * axis 0 (element-wise, rows times a matrix, images, normalisations and
 * reductions over other axes, reshapes that keep the rows, ...) and give
 * it on axis 0 again.  Anything else (a Softmax or a sum over axis 0,
 * Shape, an operator not listed) runs the batch whole.  plan: the whole
 * graph planned for these inputs (every value's shape).
 */
int sn_rows_apart(const sn_graph *g, const sn_plan *plan, size_t rows,
                  unsigned char *carries)
{
    unsigned char *b = carries ? carries : calloc(g->nvalues + 1, 1);
    int ok = 1;
    if (!b)
        return 0;
    if (carries)
        memset(carries, 0, g->nvalues);
    for (size_t i = 0; i < g->ninputs; i++) {
        const sn_rt *r = sn_plan_value(plan, (size_t)g->inputs[i]);
        if (r && r->known && r->rank > 0 && (size_t)r->dims[0] == rows)
            b[g->inputs[i]] = 1;
    }
    for (size_t i = 0; i < g->nnodes && ok; i++) {
        const sn_node *n = &g->nodes[i];
        int nb = 0, ro = -1;
        if (n->dead)
            continue;
        for (size_t j = 0; j < n->ninputs; j++)
            nb += n->inputs[j] >= 0 && b[n->inputs[j]];
        if (!nb)
            continue;
        for (size_t j = 0; j < n->noutputs && ok; j++) {
            const sn_rt *r = n->outputs[j] >= 0
                                 ? sn_plan_value(plan, (size_t)n->outputs[j])
                                 : NULL;
            if (n->outputs[j] < 0)
                continue;
            if (!r || !r->known || r->rank < 1 ||
                (size_t)r->dims[0] != rows)
                ok = 0;
            else if (ro < 0)
                ro = r->rank;
        }
        ok = ok && ro > 0 && (!*n->domain || !strcmp(n->domain, "ai.onnx")) &&
             keeps_rows(g, plan, n, b, nb, ro);
        if (!ok)
            sn_log(SHARDNET_LOG_DEBUG,
                   "layer split: node '%s' (%s) mixes the rows of the "
                   "batch: no micro-batches",
                   n->name, n->op_type);
        for (size_t j = 0; j < n->noutputs && ok; j++)
            if (n->outputs[j] >= 0)
                b[n->outputs[j]] = 1;
    }
    if (!carries)
        free(b);
    return ok;
}

/* rows_apart for graph g and these inputs, decided on dev's process and
 * shared with every process.  The plan it reads is of the shapes device
 * (node_costs.h), as the layer split's estimates are: planning on dev
 * itself would upload every weight there, which a GPU too small for the
 * whole model (the reason for the split) refuses, and the batch then ran
 * whole through stages planned for micro-batches.  A plan that fails
 * leaves the batch whole. */
shardnet_status sn_batch_apart(sn_graph *g, sn_device *dev,
                               const sn_binding *inputs, int *apart)
{
    unsigned char flag = 0;
    size_t rows = sn_batch_rows(g, inputs);
    shardnet_status st;
    if (!dev->remote && rows > 1) {
        sn_weights *w = NULL;
        sn_plan *plan = NULL;
        if (sn_shape_plan(g, inputs, &w, &plan) == SHARDNET_OK)
            flag = (unsigned char)sn_rows_apart(g, plan, rows, NULL);
        else
            sn_log(SHARDNET_LOG_DEBUG,
                   "layer split: no micro-batches (planning the shapes: "
                   "%s)",
                   shardnet_last_error());
        sn_error_clear();
        sn_shape_plan_free(w, plan);
    }
    if (sn_world_processes() > 1 &&
        (st = sn_world_bcast(dev->process, &flag, sizeof flag)) !=
            SHARDNET_OK)
        return st;
    *apart = flag;
    return SHARDNET_OK;
}

size_t sn_pipeline_micro_batches(size_t rows, size_t m)
{
    if (rows <= 1 || !m)
        return 1;
    if (m > rows)
        m = rows;
    size_t chunk = (rows + m - 1) / m;
    if (chunk < 2)
        chunk = 2;
    while (chunk < rows && rows % chunk == 1)
        chunk++;
    return (rows + chunk - 1) / chunk;
}

size_t sn_pipeline_default_micro(size_t rows, size_t stages)
{
    /* Enough micro-batches that the pipeline's fill and drain (stages - 1
     * of them) cost little, few enough that each keeps four rows or more
     * for the kernels to work on.  (A hand-off between stages costs about
     * a microsecond when the stages run on CPU devices; the transformer
     * at batch 64 runs 3% faster in 16 micro-batches than in 8, the MLP
     * at batch 1024 alike in 16 or 32.) */
    size_t m = rows / 4;
    if (m > 8 * stages)
        m = 8 * stages;
    return m > stages ? m : stages;
}
