/*
 * The tensor split's rules for products (the registry's GEMM, MATMUL and
 * CONV shard rules): a weight product cut by output features, by its
 * reduced dimension into partial sums, or by the rows of its data; a
 * product of two computed values following their cuts; a convolution cut
 * by output channels, groups, input channels or the batch.  A plan file's
 * strategy may force the cut (shard_strategy.c).
 */
#include <config.h>

#include <stdio.h>
#include <string.h>

#include "ops/ops.h"
#include "runtime/shard_build.h"

/* Node n's fused activation (sn_act) as its own node x -> out on every
 * device: a Relu, or a Clip marked relu6 (bounds 0 and 6, read by the
 * Clip's lowering).  Its index, or -1. */
static int act_node(bld *b, sn_act act, int x, int out)
{
    int k = sn_shard_add_node(b, NULL, act == SN_ACT_RELU6 ? "Clip" : "Relu",
                              "", &x, 1, &out, 1, NULL);
    for (size_t d = 0; k >= 0 && act == SN_ACT_RELU6 && d < b->n; d++)
        if (sn_shard_set_int_attr(b, k, d, "relu6", 1) < 0)
            return -1;
    return k;
}

/*
 * Node n's output v was computed as partial sums into `part` (its fused
 * residual and activation left out): convert them to layout t, then add
 * the residual res (a model value; -1: none) in layout t and apply the
 * activation where n has one; v ends up as the last of those nodes'
 * output in layout t.
 */
static shardnet_status finish_after_sum(bld *b, const sn_node *n, int part,
                                        sn_layout t, int res)
{
    int v = n->outputs[0], out;
    sn_act act = sn_fused_act(n);
    sn_layout lp = sn_layout_p();
    sn_shard_remember(b, v, part, &lp); /* for to_layout: v as partial sums */
    int x = sn_shard_to_layout(b, v, &t);
    b->vi[v].nv = 0;           /* v is the last node's output, made below */
    int r = x >= 0 && res >= 0 ? sn_shard_to_layout(b, res, &t) : -1;
    if (x < 0 || (res >= 0 && r < 0))
        return failed(b);
    out = x; /* (called with a residual, an activation or both) */
    if (r >= 0) {
        int in[2] = {x, r};
        int y = act ? sn_shard_new_value(b, b->g->values[v].name, "residual")
                    : sn_shard_out_value(b, n, 0);
        if (y < 0 ||
            sn_shard_add_node(b, NULL, "Add", "", in, 2, &y, 1, NULL) < 0)
            return oom();
        x = y;
        out = y;
    }
    if (act && ((out = sn_shard_out_value(b, n, 0)) < 0 ||
                act_node(b, act, x, out) < 0))
        return oom();
    sn_shard_remember(b, v, out, &t);
    return SHARDNET_OK;
}

/* Whether a QuantizedMatMul's scale or zero point v holds one value per
 * column of N (cut with the columns), not one for all. */
static int per_column(const sn_value *v, size_t N)
{
    size_t count = 1;
    for (int d = 0; d < v->rank; d++)
        count *= (size_t)v->dims[d];
    return N > 1 && count == N && v->rank >= 1 &&
           (size_t)v->dims[v->rank - 1] == N;
}

/* A QuantizedMatMul's scale and zero point, whole on every device (rows
 * or data cut), into in[2], in[3]. */
static void whole_extras(bld *b, const sn_node *n, int qmm, int *in)
{
    sn_layout r = sn_layout_r();
    for (int i = 2; qmm && i < 4 && i < (int)n->ninputs; i++)
        if (n->inputs[i] >= 0)
            in[i] = sn_shard_to_layout(b, n->inputs[i], &r);
}

/*
 * A product A x W (2-D constant W; k_axis_w and n_axis_w its axes as
 * stored) cut on a mesh (sn_cut's SN_CUT_MIXED): device (i, k, j) takes
 * A's part i along the cut data axis and part k of its reduced axis
 * (sliced from A whole), W's block (k, j) (copied), and computes the
 * tile (i, j)'s k-th partial sum; the tiles are gathered to every device,
 * their partial sums added and put in place (sn_shard_assemble_parts),
 * then the bias C (input ci, or -1) and the fused activation applied to
 * the whole.  The cuts are even: a dimension that does not divide into
 * its parts is an error naming it.  The output is whole on every device.
 */
static shardnet_status mixed(bld *b, const sn_node *n, const sn_cut *cut,
                             const char *text, int k_axis_w, int ci)
{
    int A = n->inputs[0], W = n->inputs[1], v = n->outputs[0];
    int C = (int)n->ninputs > ci ? n->inputs[ci] : -1;
    const sn_rt *fa = full(b, A), *fo = full(b, v);
    int ra = fa->rank, last = ra - 1, axis = cut->axis;
    const unsigned *pt = cut->parts;
    int64_t M = axis >= 0 ? fa->dims[axis] : 1, K = fa->dims[last],
            N = fo->dims[fo->rank - 1];
    const char *why = NULL;
    if (M % pt[0] || K % pt[1] || N % pt[2])
        why = "a dimension cut does not divide into equal parts";
    else if (fo->rank != ra || ra + 3 > SN_MAX_DIMS || b->g->opset < 5)
        why = "the output is put together by reshapes this model's ranks "
              "or opset do not allow";
    else if (C >= 0 && rule_of(n) == SN_SHARD_GEMM &&
             sn_attr_float(n, "beta", 1.0f) != 1.0f)
        why = "the bias is added to the whole, where Gemm's beta is not 1";
    if (why)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "strategy %s for node '%s' (%s): %s (%lld rows, "
                        "%lld reduced, %lld columns into %u, %u and %u)",
                        text, n->name, n->op_type, why, (long long)M,
                        (long long)K, (long long)N, pt[0], pt[1], pt[2]);
    int64_t mp = M / pt[0], kq = K / pt[1], nr = N / pt[2];
    int64_t st[MAXD][SN_MAX_DIMS], en[MAXD][SN_MAX_DIMS],
        ax[MAXD][SN_MAX_DIMS];
    size_t at[MAXD][2], cnt[MAXD][2], naxes = 0;
    for (size_t d = 0; d < b->n; d++) {
        size_t i = d / (pt[1] * pt[2]), k = d / pt[2] % pt[1],
               j = d % pt[2], m = 0;
        if (axis >= 0) {
            ax[d][m] = axis;
            st[d][m] = (int64_t)i * mp;
            en[d][m++] = (int64_t)(i + 1) * mp;
        }
        if (pt[1] > 1) {
            ax[d][m] = last;
            st[d][m] = (int64_t)k * kq;
            en[d][m++] = (int64_t)(k + 1) * kq;
        }
        naxes = m;
        size_t kk = k_axis_w == 0 ? 0 : 1;
        at[d][kk] = k * (size_t)kq;
        cnt[d][kk] = (size_t)kq;
        at[d][1 - kk] = j * (size_t)nr;
        cnt[d][1 - kk] = (size_t)nr;
    }
    sn_layout r = sn_layout_r();
    int in[2] = {sn_shard_to_layout(b, A, &r), -1};
    if (in[0] >= 0 && naxes)
        in[0] = sn_shard_slice(b, A, in[0], naxes, st, en, ax);
    int cr = C >= 0 ? sn_shard_to_layout(b, C, &r) : -1;
    if (in[0] < 0 || (C >= 0 && cr < 0))
        return failed(b);
    if ((in[1] = sn_shard_const_blocks(b, W, at, cnt)) < 0)
        return oom();
    sn_shard_say(b, "  %s (%s) %s: mixed: data %u x reduced %u x columns %u "
                    "(a mesh), tiles gathered\n",
                 n->name, n->op_type, text, pt[0], pt[1], pt[2]);
    sn_shard_record_choice(b, n, text);
    int64_t tile[SN_MAX_DIMS];
    memcpy(tile, fo->dims, (size_t)ra * sizeof *tile);
    if (axis >= 0)
        tile[axis] = mp;
    tile[last] = nr;
    sn_act act = sn_fused_act(n);
    int part = sn_shard_new_value(b, b->g->values[v].name, "tile");
    int x = part < 0 || sn_shard_add_node(b, n, n->op_type, n->domain, in, 2,
                                          &part, 1, "activation") < 0
                ? -1
                : sn_shard_assemble_parts(b, v, part, tile, ra, axis, pt);
    if (x >= 0 && C >= 0) {
        int add[2] = {x, cr};
        int y = act ? sn_shard_new_value(b, b->g->values[v].name, "bias")
                    : sn_shard_out_value(b, n, 0);
        x = y < 0 || sn_shard_add_node(b, NULL, "Add", "", add, 2, &y, 1,
                                       NULL) < 0
                ? -1
                : y;
    }
    if (x >= 0 && act) {
        int y = sn_shard_out_value(b, n, 0);
        x = y < 0 || act_node(b, act, x, y) < 0 ? -1 : y;
    }
    if (x < 0)
        return oom();
    sn_shard_remember(b, v, x, &r);
    return SHARDNET_OK;
}

/*
 * A product with a constant weight: Gemm (A, B, C) or MatMul (A, B) with
 * B 2-D, or QuantizedMatMul (A, Q, scale, zero point, bias: Q's scales
 * and zero points, one or one per column, go with Q's columns).
 * Column-parallel (output features cut), row-parallel (the reduced
 * dimension cut, partial sums out: sum (q - z) a over a part of K is a
 * part of the sum, the scales apply to each), data-parallel (A's rows
 * cut, weight whole) or whole.
 */
static shardnet_status linear(bld *b, const sn_node *n, int *handled)
{
    int gemm = rule_of(n) == SN_SHARD_GEMM;
    int qmm = rule_of(n) == SN_SHARD_QMATMUL;
    int A = n->inputs[0], W = n->inputs[1];
    /* The bias: Gemm's C, MatMul's fused one, QuantizedMatMul's last. */
    int ci = qmm ? 4 : 2;
    int C = (int)n->ninputs > ci ? n->inputs[ci] : -1;
    const sn_rt *fa = full(b, A), *fw = full(b, W);
    const sn_rt *fo = full(b, n->outputs[0]);
    const sn_value *wv = &b->g->values[W];
    *handled = 0;
    if (!fa || !fw || !fo || !is_const(b, W) || wv->rank != 2 ||
        fa->rank < 2 || fo->dtype != SN_DT_FLOAT || n->noutputs != 1 ||
        (gemm && sn_attr_int(n, "transA", 0)))
        return SHARDNET_OK;
    int tb = (gemm || qmm) && sn_attr_int(n, "transB", 0);
    int k_axis_w = tb ? 1 : 0, n_axis_w = tb ? 0 : 1;
    size_t N = (size_t)wv->dims[n_axis_w];
    int ra = fa->rank, last = ra - 1;
    /* A bias C must be a vector over N (or [1, N]) to be cut. */
    const sn_value *cv = C >= 0 ? &b->g->values[C] : NULL;
    int c_ok = !cv || (is_const(b, C) &&
                       ((cv->rank == 1 && (size_t)cv->dims[0] == N) ||
                        (cv->rank == 2 && cv->dims[0] == 1 &&
                         (size_t)cv->dims[1] == N)));
    const sn_layout *la = sn_shard_layout_of(b, A);
    int mode, daxis = -1;
    const sn_strategy *s = sn_shard_find_strategy(b, n);
    shardnet_status st;
    if (s) {
        sn_product_axes ax = {ra, last, 2, k_axis_w, n_axis_w};
        sn_cut cut;
        if ((st = sn_strategy_cut(s, b->n, &ax, !qmm, n->name, n->op_type,
                                  &cut)) != SHARDNET_OK)
            return st;
        mode = cut.kind;
        daxis = cut.axis;
        if (mode == SN_CUT_MIXED) {
            char t[128];
            sn_strategy_format(s, t, sizeof t);
            *handled = 1;
            return mixed(b, n, &cut, t, k_axis_w, ci);
        }
    } else if (la->kind == SN_LAY_S && la->axis == last) {
        mode = SN_CUT_ROWS;
    } else if (la->kind == SN_LAY_S) {
        mode = SN_CUT_DATA;
        daxis = la->axis;
    } else if (la->kind == SN_LAY_P) {
        mode = SN_CUT_ROWS;
    } else {
        size_t cnt[MAXD];
        mode = shares(b, N, SN_FEATURE_GRAN, cnt) ? SN_CUT_COLUMNS
                                                   : SN_CUT_NONE;
    }
    /* A large weight is cut along its outermost axis, where each device's
     * part is one run of the weight as stored (used in place, in the
     * model's mapped file: a process touches only its part), not along the
     * other, which copies every part: one conversion of the input more
     * (a local slice, or an all-gather of what a cut along rows would
     * have reduce-scattered), where a copy of the weights costs memory
     * and time a product of such a weight does not save. */
    if (!s && wv->nbytes >= SN_SHARD_COPY_MIN) {
        size_t cnt[MAXD];
        if (mode == SN_CUT_ROWS && k_axis_w != 0 && c_ok &&
            shares(b, N, SN_FEATURE_GRAN, cnt))
            mode = SN_CUT_COLUMNS;
        else if (mode == SN_CUT_COLUMNS && n_axis_w != 0 &&
                 sn_shard_p_target_axis(b, A, last).kind == SN_LAY_S)
            mode = SN_CUT_ROWS;
    }
    if (mode == SN_CUT_NONE && s) {
        char t[128];
        sn_strategy_format(s, t, sizeof t);
        sn_shard_say(b, "  %s (%s) %s: whole on every device\n", n->name,
                     n->op_type, t);
        sn_shard_record_choice(b, n, t);
    }
    if ((mode == SN_CUT_COLUMNS && !c_ok) || mode == SN_CUT_NONE)
        return SHARDNET_OK; /* replicated by the caller */

    int in[5] = {-1, -1, -1, -1, -1}, out;
    sn_layout lo;
    const char *drop = NULL;
    char how[256], text[128];
    if (mode == SN_CUT_COLUMNS) {
        sn_layout r = sn_layout_r(), lw;
        size_t cnt[MAXD];
        if (!shares(b, N, SN_FEATURE_GRAN, cnt))
            return SHARDNET_OK;
        lw = sn_layout_s(n_axis_w, cnt, b->n);
        in[0] = sn_shard_to_layout(b, A, &r);
        in[1] = sn_shard_to_layout(b, W, &lw);
        if (C >= 0) {
            sn_layout lc = sn_layout_s(cv->rank - 1, cnt, b->n);
            in[ci] = sn_shard_to_layout(b, C, &lc);
        }
        /* Scales and zero points: one per column cut with them, one for
         * all whole. */
        for (int i = 2; qmm && i < 4 && i < (int)n->ninputs; i++) {
            int v = n->inputs[i];
            if (v < 0)
                continue;
            const sn_value *pv = &b->g->values[v];
            sn_layout lq = per_column(pv, N)
                               ? sn_layout_s(pv->rank - 1, cnt, b->n)
                               : sn_layout_r();
            in[i] = sn_shard_to_layout(b, v, &lq);
        }
        lo = sn_layout_s(fo->rank - 1, cnt, b->n);
        snprintf(how, sizeof how, "column-parallel: output features cut");
        sn_strategy_of_cut(b->n, (size_t)ra, -1, 2, n_axis_w, text,
                           sizeof text);
    } else if (mode == SN_CUT_ROWS) {
        sn_layout lk;
        if (la->kind == SN_LAY_S && la->axis == last) {
            lk = *la;
        } else {
            lk = sn_shard_p_target_axis(b, A, last);
            if (lk.kind != SN_LAY_S)
                return SHARDNET_OK;
        }
        sn_layout lw = sn_layout_s(k_axis_w, lk.cnt, b->n);
        in[0] = sn_shard_to_layout(b, A, &lk);
        in[1] = sn_shard_to_layout(b, W, &lw);
        if (C >= 0) {
            sn_layout lc = sn_layout_p();
            in[ci] = sn_shard_to_layout(b, C, &lc); /* added once: device 0 */
        }
        whole_extras(b, n, qmm, in);
        lo = sn_layout_p();
        drop = "activation";
        snprintf(how, sizeof how, "row-parallel: reduced dimension cut, "
                                  "partial sums");
        sn_strategy_of_cut(b->n, (size_t)ra, last, 2, k_axis_w, text,
                           sizeof text);
    } else {
        sn_layout ld;
        if (la->kind == SN_LAY_S && la->axis == daxis) {
            ld = *la;
        } else {
            if (daxis < 0 || daxis >= last ||
                !shares(b, (size_t)fa->dims[daxis], 1, ld.cnt))
                return SHARDNET_OK;
            ld = sn_layout_s(daxis, ld.cnt, b->n);
        }
        sn_layout r = sn_layout_r();
        in[0] = sn_shard_to_layout(b, A, &ld);
        in[1] = sn_shard_to_layout(b, W, &r);
        if (C >= 0)
            in[ci] = sn_shard_to_layout(b, C, &r);
        whole_extras(b, n, qmm, in);
        lo = sn_layout_s(daxis + (fo->rank - ra), ld.cnt, b->n);
        snprintf(how, sizeof how, "data-parallel: rows of the input cut, "
                                  "weights whole");
        sn_strategy_of_cut(b->n, (size_t)ra, daxis, 2, -1, text, sizeof text);
    }
    for (size_t i = 0; i < n->ninputs && i < 5; i++)
        if (n->inputs[i] >= 0 && in[i] < 0)
            return failed(b);
    *handled = 1;
    sn_shard_say(b, "  %s (%s) %s: %s\n", n->name, n->op_type, text, how);
    sn_shard_record_choice(b, n, text);
    int act = sn_fused_act(n) != SN_ACT_NONE;
    if (lo.kind == SN_LAY_P && act) {
        /* The activation waits for the sum: partial -> reduce-scatter (or
         * all-reduce) -> Relu. */
        int part =
            sn_shard_new_value(b, b->g->values[n->outputs[0]].name, "partial");
        if (part < 0 || sn_shard_add_node(b, n, n->op_type, n->domain, in,
                                          n->ninputs, &part, 1, drop) < 0)
            return oom();
        return finish_after_sum(b, n, part,
                                sn_shard_p_target(b, n->outputs[0]), -1);
    }
    if ((out = sn_shard_out_value(b, n, 0)) < 0 ||
        sn_shard_add_node(b, n, n->op_type, n->domain, in, n->ninputs, &out, 1,
                          drop) < 0)
        return oom();
    sn_shard_remember(b, n->outputs[0], out, &lo);
    return SHARDNET_OK;
}

/*
 * Conv with a constant weight (O, I/g, k...): output channels cut (whole
 * groups when grouped) from a whole input; from an input cut by channels,
 * each device convolves its own groups, or (one group) its own input
 * channels into partial sums.
 */
static shardnet_status conv(bld *b, const sn_node *n, int *handled)
{
    int X = n->inputs[0], W = n->inputs[1];
    int B = n->ninputs > 2 ? n->inputs[2] : -1;
    int R = n->ninputs > 3 ? n->inputs[3] : -1; /* a fused residual */
    const sn_rt *fx = full(b, X), *fo = full(b, n->outputs[0]);
    const sn_rt *fr = R >= 0 ? full(b, R) : NULL;
    const sn_value *wv = &b->g->values[W];
    *handled = 0;
    if (!fx || !fo || fo->dtype != SN_DT_FLOAT || !is_const(b, W) ||
        wv->rank < 3 || (B >= 0 && !is_const(b, B)) || n->noutputs != 1)
        return SHARDNET_OK;
    /* A residual is cut like the output: one that broadcasts is left to
     * the whole node. */
    if (R >= 0 && (!fr || fr->rank != fo->rank ||
                   memcmp(fr->dims, fo->dims,
                          (size_t)fo->rank * sizeof fo->dims[0])))
        return SHARDNET_OK;
    size_t groups = (size_t)sn_attr_int(n, "group", 1);
    size_t Co = (size_t)wv->dims[0], Cig = (size_t)wv->dims[1];
    if (!groups || Co % groups)
        return SHARDNET_OK;
    size_t Cog = Co / groups;
    const sn_layout *lx = sn_shard_layout_of(b, X);
    const sn_strategy *s = sn_shard_find_strategy(b, n);
    int mode = SN_CUT_NONE, daxis = -1;
    shardnet_status st;
    if (s) {
        sn_product_axes ax = {fx->rank, 1, wv->rank, 1, 0};
        sn_cut cut;
        if ((st = sn_strategy_cut(s, b->n, &ax, 0, n->name, n->op_type,
                                  &cut)) != SHARDNET_OK)
            return st;
        mode = cut.kind;
        daxis = cut.axis;
    } else if (lx->kind == SN_LAY_S && lx->axis == 1) {
        /* per group when the cut follows the groups, partial sums for one
         * group, else gather and cut the output channels */
        int aligned = 1;
        for (size_t d = 0; d < b->n; d++)
            aligned &= lx->cnt[d] % Cig == 0 && lx->cnt[d] > 0;
        mode = groups == 1 || aligned ? SN_CUT_ROWS : SN_CUT_COLUMNS;
    } else if (lx->kind == SN_LAY_S && lx->axis == 0) {
        mode = SN_CUT_DATA;
        daxis = 0;
    } else {
        mode = SN_CUT_COLUMNS;
    }
    int in[4] = {X, W, B, -1};
    size_t gcnt[MAXD]; /* groups per device */
    sn_layout lo, lin;
    int partial = 0;
    char how[160], text[128];
    if (mode == SN_CUT_COLUMNS) {
        size_t cnt[MAXD];
        if (!shares(b, groups > 1 ? groups : Co, 1, cnt))
            return SHARDNET_OK;
        for (size_t d = 0; d < b->n; d++) {
            gcnt[d] = groups > 1 ? cnt[d] : 1;
            lo.cnt[d] = groups > 1 ? cnt[d] * Cog : cnt[d];
            lin.cnt[d] = cnt[d] * Cig;
        }
        lo.kind = SN_LAY_S;
        lo.axis = 1;
        lin.kind = groups > 1 ? SN_LAY_S : SN_LAY_R;
        lin.axis = 1;
        snprintf(how, sizeof how, "output channels cut%s",
                 groups > 1 ? " (whole groups)" : "");
        sn_strategy_of_cut(b->n, (size_t)fx->rank, -1, (size_t)wv->rank, 0,
                           text, sizeof text);
    } else if (mode == SN_CUT_ROWS) {
        /* input channels cut: by whole groups, or partial sums */
        lin = lx->kind == SN_LAY_S && lx->axis == 1 ? *lx : sn_layout_r();
        if (lin.kind != SN_LAY_S) {
            if (!shares(b, (size_t)fx->dims[1], groups > 1 ? Cig : 1,
                                 lin.cnt))
                return SHARDNET_OK;
            lin.kind = SN_LAY_S;
            lin.axis = 1;
        }
        int aligned = 1;
        for (size_t d = 0; d < b->n; d++)
            aligned &= lin.cnt[d] % Cig == 0 && lin.cnt[d] > 0;
        if (groups > 1 && aligned) {
            for (size_t d = 0; d < b->n; d++) {
                gcnt[d] = lin.cnt[d] / Cig;
                lo.cnt[d] = gcnt[d] * Cog;
            }
            lo.kind = SN_LAY_S;
            lo.axis = 1;
            snprintf(how, sizeof how, "each device its own groups");
            sn_strategy_of_cut(b->n, (size_t)fx->rank, 1, (size_t)wv->rank, 0,
                               text, sizeof text);
        } else if (groups == 1) {
            for (size_t d = 0; d < b->n; d++)
                gcnt[d] = 1;
            lo = sn_layout_p();
            partial = 1;
            snprintf(how, sizeof how, "input channels cut, partial sums");
            sn_strategy_of_cut(b->n, (size_t)fx->rank, 1, (size_t)wv->rank, 1,
                               text, sizeof text);
        } else {
            return SHARDNET_OK;
        }
    } else if (mode == SN_CUT_DATA) {
        if (lx->kind == SN_LAY_S && lx->axis == daxis)
            lin = *lx;
        else if (daxis != 0 ||
                 !shares(b, (size_t)fx->dims[0], 1, lin.cnt))
            return SHARDNET_OK;
        lin.kind = SN_LAY_S;
        lin.axis = 0;
        lo = lin;
        for (size_t d = 0; d < b->n; d++)
            gcnt[d] = groups;
        snprintf(how, sizeof how, "data-parallel: batch cut");
        sn_strategy_of_cut(b->n, (size_t)fx->rank, 0, (size_t)wv->rank, -1,
                           text, sizeof text);
    } else {
        return SHARDNET_OK;
    }
    /* weights and bias of each device */
    if (mode == SN_CUT_DATA) {
        sn_layout r = sn_layout_r();
        in[1] = sn_shard_to_layout(b, W, &r);
        in[2] = B >= 0 ? sn_shard_to_layout(b, B, &r) : -1;
    } else if (partial) {
        sn_layout lw = sn_layout_s(1, lin.cnt, b->n), lp = sn_layout_p();
        in[1] = sn_shard_to_layout(b, W, &lw);
        in[2] = B >= 0 ? sn_shard_to_layout(b, B, &lp) : -1;
    } else {
        sn_layout lw = sn_layout_s(0, lo.cnt, b->n);
        in[1] = sn_shard_to_layout(b, W, &lw);
        in[2] = B >= 0 ? sn_shard_to_layout(b, B, &lw) : -1;
    }
    in[0] = sn_shard_to_layout(b, X, &lin);
    /* Partial sums take the residual after their sum. */
    if (R >= 0 && !partial)
        in[3] = sn_shard_to_layout(b, R, &lo);
    if (in[0] < 0 || in[1] < 0 || (B >= 0 && in[2] < 0) ||
        (R >= 0 && !partial && in[3] < 0))
        return failed(b);
    *handled = 1;
    sn_shard_say(b, "  %s (%s) %s: %s\n", n->name, n->op_type, text, how);
    sn_shard_record_choice(b, n, text);
    int act = sn_fused_act(n) != SN_ACT_NONE;
    int v = n->outputs[0];
    int after = partial && (act || R >= 0);
    int target = after
                     ? sn_shard_new_value(b, b->g->values[v].name, "partial")
                     : sn_shard_out_value(b, n, 0);
    int k = target < 0
                ? -1
                : sn_shard_add_node(b, n, "Conv", n->domain, in,
                                    partial && n->ninputs > 3 ? 3 : n->ninputs,
                                    &target, 1, partial ? "activation" : NULL);
    if (k < 0)
        return oom();
    for (size_t d = 0; d < b->n; d++)
        if (sn_shard_set_int_attr(b, k, d, "group", (int64_t)gcnt[d]))
            return oom();
    if (after)
        return finish_after_sum(b, n, target, sn_layout_r(), R);
    sn_shard_remember(b, v, target, &lo);
    return SHARDNET_OK;
}

/* MatMul of two computed values: batch dimensions follow their cut; A's
 * rows or B's columns may be cut; both cut along the reduced dimension give
 * partial sums. */
static shardnet_status matmul2(bld *b, const sn_node *n, int *handled)
{
    int A = n->inputs[0], B = n->inputs[1];
    const sn_rt *fa = full(b, A), *fb = full(b, B), *fo = full(b, n->outputs[0]);
    *handled = 0;
    if (!fa || !fb || !fo || fa->rank < 2 || fa->rank != fb->rank ||
        fo->dtype != SN_DT_FLOAT)
        return SHARDNET_OK;
    int r = fa->rank;
    const sn_layout *la = sn_shard_layout_of(b, A),
                    *lb = sn_shard_layout_of(b, B);
    sn_layout ta, tb, lo;
    if (la->kind == SN_LAY_S && la->axis < r - 2)
        ta = *la;
    else if (lb->kind == SN_LAY_S && lb->axis < r - 2)
        ta = *lb;
    else
        ta.kind = SN_LAY_R;
    if (ta.kind == SN_LAY_S) {
        /* a batch dimension: the other operand is cut the same way unless
         * it broadcasts along it */
        tb = ta;
        lo = ta;
        sn_layout rr = sn_layout_r();
        int ia = fa->dims[ta.axis] == 1 ? sn_shard_to_layout(b, A, &rr)
                                         : sn_shard_to_layout(b, A, &ta);
        int ib = fb->dims[ta.axis] == 1 ? sn_shard_to_layout(b, B, &rr)
                                         : sn_shard_to_layout(b, B, &tb);
        if (ia < 0 || ib < 0)
            return failed(b);
        int in[2] = {ia, ib};
        *handled = 1;
        return sn_shard_emit_copy(b, n, in, &lo, NULL);
    }
    if (la->kind == SN_LAY_S && la->axis == r - 2 && lb->kind != SN_LAY_P) {
        sn_layout rr = sn_layout_r();
        int in[2] = {sn_shard_to_layout(b, A, la),
                     sn_shard_to_layout(b, B, &rr)};
        lo = *la;
        if (in[0] < 0 || in[1] < 0)
            return failed(b);
        *handled = 1;
        return sn_shard_emit_copy(b, n, in, &lo, NULL);
    }
    if (lb->kind == SN_LAY_S && lb->axis == r - 1 && la->kind != SN_LAY_P) {
        sn_layout rr = sn_layout_r();
        int in[2] = {sn_shard_to_layout(b, A, &rr),
                     sn_shard_to_layout(b, B, lb)};
        lo = *lb;
        if (in[0] < 0 || in[1] < 0)
            return failed(b);
        *handled = 1;
        return sn_shard_emit_copy(b, n, in, &lo, NULL);
    }
    if (la->kind == SN_LAY_S && la->axis == r - 1 && lb->kind == SN_LAY_S &&
        lb->axis == r - 2 && !memcmp(la->cnt, lb->cnt, b->n * sizeof la->cnt[0])) {
        int in[2] = {sn_shard_to_layout(b, A, la),
                     sn_shard_to_layout(b, B, lb)};
        lo = sn_layout_p();
        if (in[0] < 0 || in[1] < 0)
            return failed(b);
        *handled = 1;
        return sn_shard_emit_copy(b, n, in, &lo, "activation");
    }
    return SHARDNET_OK;
}

/* The rules of the registry's products (ops/registry.h): Gemm (and
 * QuantizedMatMul) cut when its weights are constant; MatMul too, and
 * else by its batch. */
shardnet_status sn_shard_gemm(bld *b, const sn_node *n, int *handled)
{
    *handled = 0;
    return n->ninputs > 1 && is_const(b, n->inputs[1]) ? linear(b, n, handled)
                                                       : SHARDNET_OK;
}

/*
 * MatMulNBits (com.microsoft: B in blocks of K, 4 or 8 bits, a scale and
 * a zero point per column and block; input 4, g_idx, not taken):
 * column-parallel only.  B's columns are its outermost rows, so each
 * device's part is one run of the file; the scales', zero points' and
 * bias's rows go with them (each an outermost axis of N times some
 * number of entries), and N becomes each device's share.  Cutting K
 * would cut blocks and their packed zero points: the input is made whole
 * first instead.
 */
shardnet_status sn_shard_nbits(bld *b, const sn_node *n, int *handled)
{
    int64_t N = sn_attr_int(n, "N", -1);
    const sn_rt *fo = n->noutputs == 1 ? full(b, n->outputs[0]) : NULL;
    size_t cnt[MAXD];
    *handled = 0;
    if (N < 1 || n->ninputs < 3 || n->ninputs > 6 || !fo ||
        fo->dtype != SN_DT_FLOAT || fo->rank < 1 ||
        (n->ninputs > 4 && n->inputs[4] >= 0) ||
        !shares(b, (size_t)N, SN_FEATURE_GRAN, cnt))
        return SHARDNET_OK;
    /* Every constant input an outermost axis of N times r entries. */
    for (size_t i = 1; i < n->ninputs; i++) {
        int v = n->inputs[i];
        const sn_value *pv = v >= 0 ? &b->g->values[v] : NULL;
        if (pv && (!is_const(b, v) || pv->rank < 1 || pv->dims[0] < N ||
                   pv->dims[0] % N))
            return SHARDNET_OK;
    }
    int in[6] = {-1, -1, -1, -1, -1, -1};
    sn_layout r = sn_layout_r();
    in[0] = sn_shard_to_layout(b, n->inputs[0], &r);
    for (size_t i = 1; i < n->ninputs; i++) {
        int v = n->inputs[i];
        if (v < 0)
            continue;
        size_t per = (size_t)(b->g->values[v].dims[0] / N), c2[MAXD];
        for (size_t d = 0; d < b->n; d++)
            c2[d] = cnt[d] * per;
        sn_layout lv = sn_layout_s(0, c2, b->n);
        in[i] = sn_shard_to_layout(b, v, &lv);
    }
    for (size_t i = 0; i < n->ninputs; i++)
        if (n->inputs[i] >= 0 && in[i] < 0)
            return failed(b);
    sn_layout lo = sn_layout_s(fo->rank - 1, cnt, b->n);
    shardnet_status st = sn_shard_emit_copy(b, n, in, &lo, NULL);
    if (st != SHARDNET_OK)
        return st;
    int k = (int)b->sub[0]->nnodes - 1;
    for (size_t d = 0; d < b->n; d++)
        if (sn_shard_set_int_attr(b, k, d, "N", (int64_t)cnt[d]) < 0)
            return oom();
    *handled = 1;
    sn_shard_say(b, "  %s (%s): column-parallel: output features cut, "
                    "blocks whole\n", n->name, n->op_type);
    return SHARDNET_OK;
}

shardnet_status sn_shard_matmul(bld *b, const sn_node *n, int *handled)
{
    return n->ninputs > 1 && is_const(b, n->inputs[1]) ? linear(b, n, handled)
                                                       : matmul2(b, n, handled);
}

shardnet_status sn_shard_conv(bld *b, const sn_node *n, int *handled)
{
    *handled = 0;
    return n->ninputs > 1 && is_const(b, n->inputs[1]) ? conv(b, n, handled)
                                                       : SHARDNET_OK;
}
