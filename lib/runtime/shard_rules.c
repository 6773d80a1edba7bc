/*
 * The walk of the tensor split's planner: every live node of the model,
 * in order, laid out by its shard rule in the operator registry
 * (ops/registry.h), the element-wise, normalising, transposing, reshaping
 * and pooling rules here, the products' in shard_products.c; a node no
 * rule takes is replicated.  Then the model's outputs are laid out for
 * the host and each device's graph is sorted.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "runtime/shard_build.h"

/* Local dims of value v (full shape fs) under layout l on device d. */
static void local_dims(const sn_rt *fs, const sn_layout *l, size_t d,
                       int64_t *dims)
{
    memcpy(dims, fs->dims, sizeof fs->dims);
    if (l->kind == SN_LAY_S)
        dims[l->axis] = (int64_t)l->cnt[d];
}

/*
 * Element-wise ops (with broadcasting) follow their cut inputs: the
 * others are sliced locally to match, or used whole where they broadcast
 * along the cut axis.  Sums and differences of partial sums stay partial.
 */
static shardnet_status elementwise(bld *b, const sn_node *n, int *handled)
{
    const sn_rt *fo = full(b, n->outputs[0]);
    *handled = 0;
    if (!fo || fo->dtype != SN_DT_FLOAT || n->ninputs > 8)
        return SHARDNET_OK;
    int r = fo->rank;
    int linear = rule_of(n) == SN_SHARD_ADDITIVE;
    int nP = 0, nS = 0, nOther = 0;
    sn_layout target = sn_layout_r();
    for (size_t j = 0; j < n->ninputs; j++) {
        int v = n->inputs[j];
        if (v < 0)
            continue;
        const sn_layout *l = sn_shard_layout_of(b, v);
        const sn_rt *fi = full(b, v);
        if (!fi)
            return SHARDNET_OK;
        if (l->kind == SN_LAY_P)
            nP++;
        else if (l->kind == SN_LAY_S) {
            if (!nS) {
                target = *l;
                target.axis = l->axis + (r - fi->rank);
            }
            nS++;
        } else
            nOther++;
    }
    if (nP && !nS && !nOther && linear) {
        int in[8];
        for (size_t j = 0; j < n->ninputs; j++)
            in[j] = n->inputs[j] < 0 ? -1 : b->vi[n->inputs[j]].v[0].sub;
        sn_layout lp = sn_layout_p();
        *handled = 1;
        return sn_shard_emit_copy(b, n, in, &lp, NULL);
    }
    if (!nS && nP) {
        /* partial sums meeting a non-linear op: reduce-scatter along the
         * last axis when it is wide enough, else all-reduce */
        target = sn_shard_p_target(b, n->outputs[0]);
        for (size_t j = 0; j < n->ninputs && target.kind == SN_LAY_S; j++) {
            int v = n->inputs[j];
            const sn_rt *fi = v >= 0 ? full(b, v) : NULL;
            if (fi && sn_shard_layout_of(b, v)->kind == SN_LAY_P &&
                (fi->rank != r ||
                 memcmp(fi->dims, fo->dims, (size_t)r * sizeof fi->dims[0])))
                target = sn_layout_r(); /* broadcast partial sums: sum first */
        }
    }
    if (target.kind != SN_LAY_S)
        return SHARDNET_OK; /* all whole: replicated */
    int in[8];
    for (size_t j = 0; j < n->ninputs; j++) {
        int v = n->inputs[j];
        in[j] = -1;
        if (v < 0)
            continue;
        const sn_rt *fi = full(b, v);
        int ai = target.axis - (r - fi->rank);
        sn_layout want = target, rr = sn_layout_r();
        want.axis = ai;
        if (ai < 0 || fi->dims[ai] == 1)
            in[j] = sn_shard_to_layout(b, v, &rr);
        else if (fi->dims[ai] == fo->dims[target.axis])
            in[j] = sn_shard_to_layout(b, v, &want);
        else
            return SHARDNET_OK;
        if (in[j] < 0)
            return failed(b);
    }
    *handled = 1;
    return sn_shard_emit_copy(b, n, in, &target, NULL);
}

/* Softmax, LogSoftmax and LayerNormalization keep a cut outside the axes
 * they normalise over. */
static shardnet_status normalise(bld *b, const sn_node *n, int *handled)
{
    int X = n->inputs[0];
    const sn_rt *fx = full(b, X);
    const sn_layout *l = sn_shard_layout_of(b, X);
    *handled = 0;
    if (!fx || l->kind != SN_LAY_S)
        return SHARDNET_OK;
    for (size_t j = 1; j < n->noutputs; j++)
        if (n->outputs[j] >= 0)
            return SHARDNET_OK;
    int r = fx->rank, ln = rule_of(n) == SN_SHARD_LAYERNORM;
    int64_t axis = sn_attr_int(n, "axis", ln || b->g->opset >= 13 ? -1 : 1);
    if (axis < 0)
        axis += r;
    int from = (int)axis, to = ln || b->g->opset < 13 ? r : (int)axis + 1;
    if (l->axis >= from && l->axis < to)
        return SHARDNET_OK;
    int in[3] = {-1, -1, -1};
    sn_layout rr = sn_layout_r(), lo = *l;
    in[0] = sn_shard_to_layout(b, X, l);
    for (size_t j = 1; j < n->ninputs && j < 3; j++)
        if (n->inputs[j] >= 0 &&
            (in[j] = sn_shard_to_layout(b, n->inputs[j], &rr)) < 0)
            return failed(b);
    if (in[0] < 0 || n->ninputs > 3)
        return SHARDNET_OK;
    *handled = 1;
    return sn_shard_emit_copy(b, n, in, &lo, NULL);
}

static shardnet_status transpose(bld *b, const sn_node *n, int *handled)
{
    int X = n->inputs[0];
    const sn_rt *fx = full(b, X);
    const sn_layout *l = sn_shard_layout_of(b, X);
    *handled = 0;
    if (!fx || l->kind == SN_LAY_R)
        return SHARDNET_OK;
    sn_layout lo = *l;
    if (l->kind == SN_LAY_S) {
        const sn_attr *pa = sn_node_attr(n, "perm");
        int found = -1;
        for (int j = 0; j < fx->rank; j++) {
            int pj = pa && pa->count == (size_t)fx->rank ? (int)pa->ints[j]
                                                         : fx->rank - 1 - j;
            if (pj == l->axis)
                found = j;
        }
        if (found < 0)
            return SHARDNET_OK;
        lo.axis = found;
    }
    int in[1] = {b->vi[X].v[0].sub};
    for (int i = 0; i < b->vi[X].nv; i++)
        if (sn_layout_eq(&b->vi[X].v[i].l, l, b->n))
            in[0] = b->vi[X].v[i].sub;
    *handled = 1;
    return sn_shard_emit_copy(b, n, in, &lo, NULL);
}

/*
 * Where axis `a` of a tensor shaped in[] lands in the same data shaped
 * out[], for a cut cnt[]: the output axis and its cut.  0 when the cut
 * does not map onto one output axis.
 */
static int map_axis(const bld *b, int rin, const int64_t *in, int a,
                    const size_t *cnt, int rout, const int64_t *out,
                    int *ob, size_t *ocnt)
{
    size_t pre = prod(in, 0, a), p = 1;
    size_t inner_in = prod(in, a + 1, rin);
    for (int k = 0; k < rout; k++) {
        if (p == pre && out[k] != 1) {
            size_t inner_out = prod(out, k + 1, rout);
            size_t A = (size_t)in[a], O = (size_t)out[k];
            if (O == A && inner_out == inner_in) {
                memcpy(ocnt, cnt, b->n * sizeof *cnt);
            } else if (A % O == 0 && inner_out == (A / O) * inner_in) {
                /* the cut axis split in two: cut the outer part */
                size_t rr = A / O;
                for (size_t d = 0; d < b->n; d++) {
                    if (cnt[d] % rr)
                        return 0;
                    ocnt[d] = cnt[d] / rr;
                }
            } else if (O % A == 0 && inner_in == (O / A) * inner_out) {
                /* the cut axis merged with the ones after it */
                for (size_t d = 0; d < b->n; d++)
                    ocnt[d] = cnt[d] * (O / A);
            } else {
                return 0;
            }
            *ob = k;
            return 1;
        }
        p *= (size_t)out[k];
        if (p > pre)
            return 0;
    }
    return 0;
}

/* Reshape and Flatten: a cut follows the data when it maps onto one output
 * axis; Reshape's target becomes each device's local shape. */
static shardnet_status reshape(bld *b, const sn_node *n, int *handled)
{
    int X = n->inputs[0];
    const sn_rt *fx = full(b, X), *fo = full(b, n->outputs[0]);
    const sn_layout *l = sn_shard_layout_of(b, X);
    int is_reshape = rule_of(n) == SN_SHARD_RESHAPE;
    *handled = 0;
    if (!fx || !fo || l->kind == SN_LAY_R ||
        (is_reshape && (n->ninputs != 2 || !is_const(b, n->inputs[1]))))
        return SHARDNET_OK;
    sn_layout lo = *l;
    if (l->kind == SN_LAY_S &&
        !map_axis(b, fx->rank, fx->dims, l->axis, l->cnt, fo->rank, fo->dims,
                  &lo.axis, lo.cnt))
        return SHARDNET_OK;
    int in[2] = {b->vi[X].v[0].sub, -1};
    for (int i = 0; i < b->vi[X].nv; i++)
        if (sn_layout_eq(&b->vi[X].v[i].l, l, b->n))
            in[0] = b->vi[X].v[i].sub;
    if (is_reshape) {
        int64_t vals[MAXD][SN_MAX_DIMS];
        for (size_t d = 0; d < b->n; d++)
            local_dims(fo, &lo, d, vals[d]);
        if ((in[1] = sn_shard_const_i64(b, b->g->values[n->inputs[1]].name,
                                        (size_t)fo->rank, vals)) < 0)
            return oom();
    }
    *handled = 1;
    return sn_shard_emit_copy(b, n, in, &lo, NULL);
}

/* Pools work per image and channel: a cut of either passes through. */
static shardnet_status pool(bld *b, const sn_node *n, int *handled)
{
    int X = n->inputs[0];
    const sn_layout *l = sn_shard_layout_of(b, X);
    *handled = 0;
    if (l->kind != SN_LAY_S || l->axis > 1)
        return SHARDNET_OK;
    for (size_t j = 1; j < n->noutputs; j++)
        if (n->outputs[j] >= 0)
            return SHARDNET_OK;
    int in[1] = {sn_shard_to_layout(b, X, l)};
    sn_layout lo = *l;
    if (in[0] < 0)
        return oom();
    *handled = 1;
    return sn_shard_emit_copy(b, n, in, &lo, NULL);
}

/* Each shard rule of the registry, by its enum; NULL: replicated. */
typedef shardnet_status (*shard_rule_fn)(bld *b, const sn_node *n,
                                         int *handled);
static const shard_rule_fn shard_rules[SN_SHARD_RULES] = {
    [SN_SHARD_REPLICATE] = NULL,
    [SN_SHARD_GEMM] = sn_shard_gemm,
    [SN_SHARD_MATMUL] = sn_shard_matmul,
    [SN_SHARD_QMATMUL] = sn_shard_gemm, /* linear() tells them apart */
    [SN_SHARD_NBITS] = sn_shard_nbits,
    [SN_SHARD_CONV] = sn_shard_conv,
    [SN_SHARD_ELEMENTWISE] = elementwise,
    [SN_SHARD_ADDITIVE] = elementwise,
    [SN_SHARD_SOFTMAX] = normalise,
    [SN_SHARD_LAYERNORM] = normalise,
    [SN_SHARD_TRANSPOSE] = transpose,
    [SN_SHARD_RESHAPE] = reshape,
    [SN_SHARD_FLATTEN] = reshape,
    [SN_SHARD_POOL] = pool,
};

static shardnet_status shard_node(bld *b, const sn_node *n)
{
    sn_shard_rule r = rule_of(n);
    int handled = 0;
    shardnet_status st = SHARDNET_OK;
    const sn_strategy *s = NULL;
    if (shard_rules[r])
        st = shard_rules[r](b, n, &handled);
    if (st != SHARDNET_OK)
        return st;
    if (!handled) {
        if ((s = sn_shard_find_strategy(b, n)) != NULL) {
            char t[256];
            sn_strategy_format(s, t, sizeof t);
            if (r != SN_SHARD_GEMM && r != SN_SHARD_MATMUL &&
                r != SN_SHARD_CONV && r != SN_SHARD_QMATMUL)
                return sn_error(SHARDNET_INVALID_ARGUMENT,
                                "strategy %s for node '%s' (%s): strategies "
                                "are taken for MatMul, Gemm, Conv and "
                                "QuantizedMatMul with "
                                "constant weights",
                                t, n->name, n->op_type);
        }
        sn_error_clear();
        return sn_shard_replicate(b, n);
    }
    return SHARDNET_OK;
}

shardnet_status sn_shard_build(bld *b)
{
    sn_graph *g = b->g;
    shardnet_status st;
    for (size_t d = 0; d < b->n; d++) {
        if (!(b->sub[d] = sn_graph_new()))
            return oom();
        b->sub[d]->opset = g->opset;
        b->sub[d]->ir_version = g->ir_version;
        b->sub[d]->inputs = malloc((g->ninputs + 1) * sizeof(int));
        b->sub[d]->outputs = malloc((g->noutputs + 1) * sizeof(int));
        if (!b->sub[d]->inputs || !b->sub[d]->outputs)
            return oom();
    }
    /* The model's inputs: whole on every device. */
    for (size_t i = 0; i < g->ninputs; i++) {
        int v = g->inputs[i];
        const sn_value *pv = &g->values[v];
        int k = sn_shard_new_value(b, pv->name, NULL);
        if (k < 0)
            return oom();
        for (size_t d = 0; d < b->n; d++) {
            sn_value *sv = &b->sub[d]->values[k];
            sv->dtype = pv->dtype;
            sv->rank = pv->rank;
            memcpy(sv->dims, pv->dims, sizeof sv->dims);
            sv->flags |= SN_VALUE_INPUT;
            b->sub[d]->inputs[i] = k;
            b->sub[d]->ninputs = i + 1;
        }
        sn_layout r = sn_layout_r();
        sn_shard_remember(b, v, k, &r);
    }
    for (size_t i = 0; i < g->nnodes; i++) {
        const sn_node *n = &g->nodes[i];
        int live = 0;
        if (n->dead)
            continue;
        for (size_t j = 0; j < n->noutputs; j++)
            if (n->outputs[j] >= 0 && !is_const(b, n->outputs[j]))
                live = 1;
        if (!live)
            continue;
        if ((st = shard_node(b, n)) != SHARDNET_OK)
            return st;
        if (n->noutputs && n->outputs[0] >= 0 && b->vi[n->outputs[0]].nv) {
            const sn_layout *l = &b->vi[n->outputs[0]].v[0].l;
            sn_log(SHARDNET_LOG_DEBUG, "tensor split: %s (%s) -> %s axis %d",
                   n->name, n->op_type,
                   l->kind == SN_LAY_R   ? "whole"
                   : l->kind == SN_LAY_S ? "cut"
                                         : "partial",
                   l->axis);
        }
    }
    for (size_t i = 0; i < b->nstrat; i++)
        if (!b->strat_used[i])
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "strategy for node '%s': no such node (or it "
                            "was folded away)",
                            b->strat[i].node);
    /* The model's outputs: a cut output stays cut, and each device writes
     * its piece into the host result (no all-gather: only the host needs
     * it whole); partial sums are reduce-scattered first. */
    for (size_t i = 0; i < g->noutputs; i++) {
        const sn_layout *cur = sn_shard_layout_of(b, g->outputs[i]);
        const sn_rt *fs = full(b, g->outputs[i]);
        sn_layout want =
            cur->kind == SN_LAY_S   ? *cur
            : cur->kind == SN_LAY_P ? sn_shard_p_target(b, g->outputs[i])
                                    : sn_layout_r();
        if (!fs)
            want = sn_layout_r();
        int k = sn_shard_to_layout(b, g->outputs[i], &want);
        b->out_lay[i] = want;
        if (k >= 0 && want.kind == SN_LAY_S)
            sn_shard_say(b, "  output '%s': cut along axis %d, each device "
                            "writes its part of the host result\n",
                         g->values[g->outputs[i]].name, want.axis);
        if (k < 0)
            return failed(b);
        for (size_t d = 0; d < b->n; d++) {
            b->sub[d]->values[k].flags |= SN_VALUE_OUTPUT;
            b->sub[d]->outputs[i] = k;
            b->sub[d]->noutputs = i + 1;
        }
    }
    for (size_t d = 0; d < b->n; d++)
        if ((st = sn_graph_sort(b->sub[d])) != SHARDNET_OK)
            return sn_error_prefix(st, "tensor split: device graph");
    return SHARDNET_OK;
}
