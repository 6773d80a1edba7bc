/*
 * Normalisation: BatchNormalization (inference, and training mode with the
 * batch's own statistics and the running ones updated),
 * LayerNormalization (with its optional Mean and InvStdDev outputs),
 * InstanceNormalization, GroupNormalization, RMSNormalization and
 * MeanVarianceNormalization.
 * Per-channel factors are computed on the host where the parameters are
 * constants; everything else is binary, unary, reduce and layernorm steps
 * on the device.
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* One unary step y = op(x) over count elements (alpha/beta unused). */
static shardnet_status emit_unary_view(sn_lower *L, const sn_node *n,
                                       sn_unary_op op, size_t count,
                                       sn_view x, sn_view y)
{
    sn_step s = {.kind = SN_KERNEL_UNARY};
    s.u.unary = (sn_unary_desc){.op = op, .n = count, .x = x, .y = y};
    return sn_emit(L, n, &s);
}

/*
 * BatchNormalization with training_mode = 1 (opset 14+): normalise with the
 * batch's own statistics and return the updated running ones:
 *   mean, var = mean and (population) variance of x over all but axis 1
 *   y = (x - mean) / sqrt(var + epsilon) * scale + B
 *   running_mean = input_mean * momentum + mean * (1 - momentum), and
 *   running_var likewise.
 * x (N, C, S...) is reduced over S (rows of N*C), then over N.
 */
static shardnet_status batchnorm_training(sn_lower *L, const sn_node *n)
{
    sn_rt *x = sn_in(L, n, 0), *p[4], *out, *o;
    float eps = sn_attr_float(n, "epsilon", 1e-5f);
    float mom = sn_attr_float(n, "momentum", 0.9f);
    sn_view vx, vp[4], mean, var, diff, nc, k;
    int64_t c, nn, sp = 1, cd[SN_MAX_DIMS], one = 1;
    shardnet_status st;
    sn_step s = {.kind = SN_KERNEL_REDUCE};
    int r = x->rank;

    if (r < 2)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "input must be (N, C, ...), not of rank %d", r);
    nn = x->dims[0];
    c = x->dims[1];
    for (int i = 2; i < r; i++)
        sp *= x->dims[i];
    cd[0] = c;
    for (int i = 1; i < r - 1; i++)
        cd[i] = 1;
    for (int i = 0; i < 4; i++) {
        p[i] = sn_in(L, n, (size_t)i + 1);
        if (sn_rt_elements(p[i]) != (size_t)c)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "parameter %d has %zu values for %lld "
                                 "channels",
                                 i + 1, sn_rt_elements(p[i]), (long long)c);
    }
    if (!L->plan)
        return SHARDNET_UNSUPPORTED;
    float *kv = malloc(3 * sizeof *kv);
    if (!kv)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "batch normalisation");
    kv[0] = eps;
    kv[1] = mom;
    kv[2] = 1.0f - mom;
    if ((st = sn_dev_upload(L, n, kv, 3, &k)) != SHARDNET_OK ||
        (st = sn_dev_view(L, n, x, &vx)) != SHARDNET_OK)
        return st;
    for (int i = 0; i < 4; i++)
        if ((st = sn_dev_view(L, n, p[i], &vp[i])) != SHARDNET_OK)
            return st;
    if ((st = sn_out_device(L, n, 0, r, x->dims, &out)) != SHARDNET_OK ||
        (st = sn_scratch(L, (size_t)c, &mean)) ||
        (st = sn_scratch(L, (size_t)c, &var)) ||
        (st = sn_scratch(L, (size_t)(nn * c), &nc)) ||
        (st = sn_scratch(L, sn_rt_elements(x), &diff)))
        return st;
    if (sn_rt_elements(x) == 0)
        return SHARDNET_OK;
    sn_view keps = k, kmom = {k.buf, k.offset + 1}, krest = {k.buf, k.offset + 2};
    /* mean over S, then over N; the same for the squared deviations. */
    sn_view srcs[2] = {vx, diff}, dsts[2] = {mean, var};
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 &&
            ((st = sn_emit_binary(L, n, SN_BINARY_SUB, r, x->dims, vx,
                                     r - 1, cd, mean, diff)) ||
             (st = sn_emit_binary(L, n, SN_BINARY_MUL, r, x->dims, diff, r,
                                     x->dims, diff, out->view))))
            return st;
        s.u.reduce = (sn_reduce_desc){.op = SN_REDUCE_MEAN,
                                      .outer = (size_t)(nn * c),
                                      .len = (size_t)sp, .inner = 1,
                                      .x = pass ? out->view : srcs[0],
                                      .y = nc};
        if ((st = sn_emit(L, n, &s)) != SHARDNET_OK)
            return st;
        s.u.reduce = (sn_reduce_desc){.op = SN_REDUCE_MEAN, .outer = 1,
                                      .len = (size_t)nn, .inner = (size_t)c,
                                      .x = nc, .y = dsts[pass]};
        if ((st = sn_emit(L, n, &s)) != SHARDNET_OK)
            return st;
    }
    /* Running statistics, before var is turned into the scale. */
    for (int i = 0; i < 2; i++) {
        size_t slot = (size_t)i + 1;
        if (slot >= n->noutputs || n->outputs[slot] < 0)
            continue;
        sn_view stat = i ? var : mean, in = vp[2 + i];
        if ((st = sn_out_device(L, n, slot, 1, &c, &o)) != SHARDNET_OK ||
            (st = sn_emit_binary(L, n, SN_BINARY_MUL, 1, &c, in, 1, &one,
                                    kmom, o->view)) ||
            (st = sn_emit_binary(L, n, SN_BINARY_MUL, 1, &c, stat, 1, &one,
                                    krest, nc)) ||
            (st = sn_emit_binary(L, n, SN_BINARY_ADD, 1, &c, o->view, 1, &c,
                                    nc, o->view)))
            return st;
        o->dtype = x->dtype;
    }
    /* a = scale / sqrt(var + eps); y = diff * a + B */
    if ((st = sn_emit_binary(L, n, SN_BINARY_ADD, 1, &c, var, 1, &one, keps,
                                var)) ||
        (st = emit_unary_view(L, n, SN_UNARY_SQRT, (size_t)c, var, var)) ||
        (st = sn_emit_binary(L, n, SN_BINARY_DIV, 1, &c, vp[0], 1, &c, var,
                                var)) ||
        (st = sn_emit_binary(L, n, SN_BINARY_MUL, r, x->dims, diff, r - 1,
                                cd, var, out->view)))
        return st;
    out->dtype = x->dtype;
    return sn_emit_binary(L, n, SN_BINARY_ADD, r, x->dims, out->view, r - 1,
                             cd, vp[1], out->view);
}

/*
 * BatchNormalization in inference: y = x * a + b per channel.  With
 * constant parameters (the usual case), a = scale / sqrt(var + epsilon) and
 * b = B - mean * a are computed on the host, then a MUL and an ADD step
 * broadcast (C, 1, ..., 1) over the input.  Parameters computed on the
 * device take the long way: a from var, epsilon and scale in three small
 * steps, then y = (x - mean) * a + B.
 */
SN_LOWER(sn_lower_batchnorm)
{
    sn_rt *x = sn_in(L, n, 0), *out, *p[4];
    static const char *const names[4] = {"scale", "B", "mean", "var"};
    float eps = sn_attr_float(n, "epsilon", 1e-5f), *a, *bb;
    int64_t cd[SN_MAX_DIMS], one = 1;
    sn_view va, vb, vx;
    shardnet_status st;
    sn_dtype t = SN_DT_FLOAT;
    int all_host = 1;

    if (sn_attr_int(n, "training_mode", 0))
        return batchnorm_training(L, n);
    for (size_t i = 1; i < n->noutputs; i++)
        if (n->outputs[i] >= 0)
            return sn_node_error(n, SHARDNET_UNSUPPORTED,
                                 "the running or saved mean and variance "
                                 "outputs (training) are not supported");
    if (x->rank < 2)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "input must be (N, C, ...), not of rank %d",
                             x->rank);
    if ((st = sn_float_type(n, x, &t)) != SHARDNET_OK)
        return st;
    /* c parameters of shape cd (rank - 1), broadcast over the batch: one
     * per channel, or with spatial = 0 (opsets 1 to 8) one per element of a
     * sample (C, D1, ...). */
    int spatial = sn_attr_int(n, "spatial", 1) != 0;
    int64_t c = 1;
    for (int i = 1; i < x->rank; i++) {
        cd[i - 1] = spatial && i > 1 ? 1 : x->dims[i];
        c *= cd[i - 1];
    }
    for (int i = 0; i < 4; i++) {
        p[i] = sn_in(L, n, (size_t)i + 1);
        all_host &= p[i]->host != NULL;
        if (sn_rt_elements(p[i]) != (size_t)c)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "%s has %zu values for %lld %s",
                                 names[i], sn_rt_elements(p[i]),
                                 (long long)c,
                                 spatial ? "channels"
                                         : "elements of a sample (spatial=0)");
    }
    if (!L->plan)
        return SHARDNET_UNSUPPORTED; /* not foldable */
    if (!all_host) {
        sn_view ve, vs, vbias, vmean, vvar, tmp;
        float *e = malloc(sizeof *e);
        if (!e)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "batch normalisation");
        *e = eps;
        if ((st = sn_dev_upload(L, n, e, 1, &ve)) != SHARDNET_OK ||
            (st = sn_out_device(L, n, 0, x->rank, x->dims, &out)) ||
            (st = sn_dev_view(L, n, x, &vx)) != SHARDNET_OK ||
            (st = sn_dev_view(L, n, p[0], &vs)) != SHARDNET_OK ||
            (st = sn_dev_view(L, n, p[1], &vbias)) != SHARDNET_OK ||
            (st = sn_dev_view(L, n, p[2], &vmean)) != SHARDNET_OK ||
            (st = sn_dev_view(L, n, p[3], &vvar)) != SHARDNET_OK ||
            (st = sn_scratch(L, (size_t)c, &tmp)) != SHARDNET_OK)
            return st;
        out->dtype = t;
        if (sn_rt_elements(out) == 0)
            return SHARDNET_OK;
        int r = x->rank;
        if ((st = sn_emit_binary(L, n, SN_BINARY_ADD, 1, &c, vvar, 1, &one,
                                    ve, tmp)) ||
            (st = emit_unary_view(L, n, SN_UNARY_SQRT, (size_t)c, tmp, tmp)) ||
            (st = sn_emit_binary(L, n, SN_BINARY_DIV, 1, &c, vs, 1, &c, tmp,
                                    tmp)) ||
            (st = sn_emit_binary(L, n, SN_BINARY_SUB, r, x->dims, vx, r - 1,
                                    cd, vmean, out->view)) ||
            (st = sn_emit_binary(L, n, SN_BINARY_MUL, r, x->dims,
                                    out->view, r - 1, cd, tmp, out->view)))
            return st;
        return sn_emit_binary(L, n, SN_BINARY_ADD, r, x->dims, out->view,
                                 r - 1, cd, vbias, out->view);
    }
    a = malloc(((size_t)c ? (size_t)c : 1) * sizeof *a);
    bb = malloc(((size_t)c ? (size_t)c : 1) * sizeof *bb);
    if (!a || !bb) {
        free(a);
        free(bb);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "batch normalisation");
    }
    for (size_t i = 0; i < (size_t)c; i++) {
        double s = sn_rt_get_double(p[0], i) /
                   sqrt(sn_rt_get_double(p[3], i) + (double)eps);
        a[i] = (float)s;
        bb[i] = (float)(sn_rt_get_double(p[1], i) -
                        sn_rt_get_double(p[2], i) * s);
    }
    if ((st = sn_dev_upload(L, n, a, (size_t)c, &va)) != SHARDNET_OK) {
        free(bb);
        return st;
    }
    if ((st = sn_dev_upload(L, n, bb, (size_t)c, &vb)) != SHARDNET_OK)
        return st;
    if ((st = sn_out_device(L, n, 0, x->rank, x->dims, &out)) != SHARDNET_OK)
        return st;
    out->dtype = t;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    if ((st = sn_dev_view(L, n, x, &vx)) != SHARDNET_OK)
        return st;
    if ((st = sn_emit_binary(L, n, SN_BINARY_MUL, x->rank, x->dims, vx,
                                x->rank - 1, cd, va, out->view)))
        return st;
    return sn_emit_binary(L, n, SN_BINARY_ADD, x->rank, x->dims, out->view,
                             x->rank - 1, cd, vb, out->view);
}

/*
 * The device view of LayerNormalization's Scale or B: its shape must
 * broadcast to the normalised shape (nr dims, len elements); one with
 * fewer elements is expanded on the host when it is a constant.
 */
static shardnet_status norm_param(sn_lower *L, const sn_node *n, sn_rt *p,
                                  const char *what, int nr,
                                  const int64_t *nd, size_t len, sn_view *out)
{
    int pr = p->rank, ok;
    const int64_t *pd = p->dims;
    while (pr > nr && pd[0] == 1) {
        pd++;
        pr--;
    }
    ok = pr <= nr;
    for (int i = 0; ok && i < pr; i++) {
        int64_t want = nd[nr - pr + i];
        ok = pd[i] == 1 || pd[i] == want;
    }
    if (!ok)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "%s does not broadcast to the normalised "
                             "shape (the input's dimensions from axis on)",
                             what);
    if (sn_rt_elements(p) == len)
        return sn_dev_view(L, n, p, out);
    if (!sn_host_known(p))
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "%s has fewer values than the normalised shape "
                             "and is computed on the device (only "
                             "constants are expanded)",
                             what);
    int64_t str[SN_MAX_DIMS], idx[SN_MAX_DIMS] = {0}, pos = 0;
    float *f = malloc((len ? len : 1) * sizeof *f);
    if (!f)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "layer normalisation");
    sn_bcast_strides(pr, pd, nr, str);
    for (size_t k = 0; k < len; k++) {
        f[k] = (float)sn_rt_get_double(p, (size_t)pos);
        sn_index_next(nr, nd, idx, str, &pos);
    }
    return sn_dev_upload(L, n, f, len, out);
}

/* The type of LayerNormalization's Mean and InvStdDev (its U, float or
 * bfloat16, not the input's float16): as the model declares output i, else
 * float where the input is half (though lib/exec/exec.c rounds an
 * undeclared one to the input's type with the node's other results), else
 * the input's. */
static sn_dtype stats_type(const sn_lower *L, const sn_node *n, size_t i,
                           const sn_rt *x)
{
    sn_dtype d = L->g->values[n->outputs[i]].dtype;
    if (d == SN_DT_FLOAT || d == SN_DT_BFLOAT16 || d == SN_DT_FLOAT16)
        return d;
    return x->dtype == SN_DT_FLOAT16 || x->dtype == SN_DT_BFLOAT16
               ? SN_DT_FLOAT
               : x->dtype;
}

/* Output i of a normalisation over the axes from ax of x, of type t, shaped
 * as x up to ax, then ones (a statistic; ax = x's rank: x's own shape, as
 * a skip form's sum); its view. */
static shardnet_status norm_out(sn_lower *L, const sn_node *n, size_t i,
                                 const sn_rt *x, int ax, sn_dtype t,
                                 sn_view *v)
{
    int64_t sd[SN_MAX_DIMS];
    sn_rt *o;
    shardnet_status st;
    for (int k = 0; k < x->rank; k++)
        sd[k] = k < ax ? x->dims[k] : 1;
    if ((st = sn_out_device(L, n, i, x->rank, sd, &o)) != SHARDNET_OK)
        return st;
    o->dtype = t;
    *v = o->view;
    return SHARDNET_OK;
}

/*
 * LayerNormalization's optional outputs Mean and InvStdDev (shape
 * dims[:axis] followed by ones): mean, then 1 / sqrt(mean((x - mean)^2) +
 * epsilon), in separate steps next to the fused layernorm kernel.  ce holds
 * {epsilon, -0.5} on the device.
 */
static shardnet_status norm_stats(sn_lower *L, const sn_node *n, sn_rt *x,
                                  int ax, size_t outer, size_t len,
                                  sn_view vx, sn_view ce)
{
    int64_t od2[2] = {(int64_t)outer, (int64_t)len};
    int64_t md2[2] = {(int64_t)outer, 1}, one = 1, ol = (int64_t)outer;
    int want_mean = n->noutputs > 1 && n->outputs[1] >= 0;
    int want_inv = n->noutputs > 2 && n->outputs[2] >= 0;
    sn_view vmean, diff, vinv;
    shardnet_status st;
    sn_step s = {.kind = SN_KERNEL_REDUCE};

    if ((st = want_mean
                  ? norm_out(L, n, 1, x, ax, stats_type(L, n, 1, x), &vmean)
                  : sn_scratch(L, outer, &vmean)) ||
        (want_inv &&
         (st = norm_out(L, n, 2, x, ax, stats_type(L, n, 2, x), &vinv))))
        return st;
    if (outer == 0)
        return SHARDNET_OK;
    s.u.reduce = (sn_reduce_desc){.op = SN_REDUCE_MEAN, .outer = outer,
                                  .len = len, .inner = 1, .x = vx,
                                  .y = vmean};
    if ((st = sn_emit(L, n, &s)) != SHARDNET_OK || !want_inv)
        return st;
    sn_view eps = ce, mhalf = {ce.buf, ce.offset + 1};
    if ((st = sn_scratch(L, outer * len, &diff)) != SHARDNET_OK ||
        (st = sn_emit_binary(L, n, SN_BINARY_SUB, 2, od2, vx, 2, md2,
                                vmean, diff)) ||
        (st = sn_emit_binary(L, n, SN_BINARY_MUL, 2, od2, diff, 2, od2,
                                diff, diff)))
        return st;
    s.u.reduce.x = diff;
    s.u.reduce.y = vinv;
    if ((st = sn_emit(L, n, &s)) ||
        (st = sn_emit_binary(L, n, SN_BINARY_ADD, 1, &ol, vinv, 1, &one,
                                eps, vinv)))
        return st;
    return sn_emit_binary(L, n, SN_BINARY_POW, 1, &ol, vinv, 1, &one,
                             mhalf, vinv);
}

SN_LOWER(sn_lower_layernorm)
{
    sn_rt *x = sn_in(L, n, 0), *scale = sn_in(L, n, 1), *bias = sn_in(L, n, 2);
    sn_rt *out;
    int64_t axis = sn_attr_int(n, "axis", -1);
    sn_step s = {.kind = SN_KERNEL_LAYERNORM};
    shardnet_status st;
    sn_dtype t = SN_DT_FLOAT;
    sn_view ce = {0};
    int ax, stats = 0;

    if (x->rank < 1 || (ax = sn_axis(axis, x->rank)) < 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "axis %lld out of range for rank %d",
                             (long long)axis, x->rank);
    for (size_t i = 1; i < n->noutputs && i < 3; i++)
        stats |= n->outputs[i] >= 0;
    if ((st = sn_float_type(n, x, &t)) != SHARDNET_OK)
        return st;
    size_t len = sn_dims_product(ax, x->rank, x->dims);
    int nr = x->rank - ax;
    const int64_t *nd = x->dims + ax;
    s.u.layernorm.outer = sn_dims_product(0, ax, x->dims);
    s.u.layernorm.len = len;
    s.u.layernorm.epsilon = sn_attr_float(n, "epsilon", 1e-5f);
    if (!L->plan)
        return SHARDNET_UNSUPPORTED; /* not foldable */
    if (len == 0 && s.u.layernorm.outer)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "normalising over empty axes");
    if ((st = norm_param(L, n, scale, "Scale", nr, nd, len,
                         &s.u.layernorm.scale)) != SHARDNET_OK ||
        (bias && (st = norm_param(L, n, bias, "B", nr, nd, len,
                                  &s.u.layernorm.bias)) != SHARDNET_OK))
        return st;
    if (stats) {
        float *c2 = malloc(2 * sizeof *c2);
        if (!c2)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "layer normalisation");
        c2[0] = s.u.layernorm.epsilon;
        c2[1] = -0.5f;
        if ((st = sn_dev_upload(L, n, c2, 2, &ce)) != SHARDNET_OK)
            return st;
    }
    if ((st = sn_out_device(L, n, 0, x->rank, x->dims, &out)) != SHARDNET_OK)
        return st;
    out->dtype = t;
    s.u.layernorm.y = out->view;
    if ((st = sn_dev_view(L, n, x, &s.u.layernorm.x)) != SHARDNET_OK)
        return st;
    if (sn_rt_elements(out) && (st = sn_emit(L, n, &s)) != SHARDNET_OK)
        return st;
    if (stats)
        return norm_stats(L, n, x, ax, s.u.layernorm.outer, len,
                          s.u.layernorm.x, ce);
    return SHARDNET_OK;
}

/* y (outer, len) = x normalised over len, with no scale or bias: the
 * layernorm kernel with a scale of ones. */
static shardnet_status emit_standardise(sn_lower *L, const sn_node *n,
                                        size_t outer, size_t len, float eps,
                                        sn_view x, sn_view y)
{
    sn_step s = {.kind = SN_KERNEL_LAYERNORM};
    float *ones = malloc((len ? len : 1) * sizeof *ones);
    shardnet_status st;
    if (!ones)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "normalisation");
    for (size_t i = 0; i < len; i++)
        ones[i] = 1.0f;
    s.u.layernorm = (sn_layernorm_desc){.outer = outer, .len = len,
                                        .epsilon = eps, .x = x, .y = y};
    if ((st = sn_dev_upload(L, n, ones, len ? len : 1,
                            &s.u.layernorm.scale)) != SHARDNET_OK)
        return st;
    return outer && len ? sn_emit(L, n, &s) : SHARDNET_OK;
}

/*
 * x (N, C, D1, ...) with its C channels in `groups` groups of consecutive
 * channels, each sample's group normalised over its channels and D1...;
 * then times scale plus bias, `per` values each (per: the channels, or
 * the groups, each value over its group's channels), `names` them in
 * errors and `one` says what each value is for.
 */
static shardnet_status normalise_groups(sn_lower *L, const sn_node *n,
                                        int64_t groups, int64_t per,
                                        const char *names, const char *one)
{
    sn_rt *x = sn_in(L, n, 0), *scale = sn_in(L, n, 1), *bias = sn_in(L, n, 2);
    sn_rt *out;
    float eps = sn_attr_float(n, "epsilon", 1e-5f);
    int64_t d3[3], pd[2];
    sn_view vx, vs, vb;
    sn_dtype t = SN_DT_FLOAT;
    shardnet_status st;

    if (sn_rt_elements(scale) != (size_t)per ||
        sn_rt_elements(bias) != (size_t)per)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "%s must have %lld values (one per %s), not "
                             "%zu and %zu",
                             names, (long long)per, one,
                             sn_rt_elements(scale), sn_rt_elements(bias));
    if ((st = sn_float_type(n, x, &t)) != SHARDNET_OK)
        return st;
    if (!L->plan)
        return SHARDNET_UNSUPPORTED; /* not foldable */
    if ((st = sn_dev_view(L, n, x, &vx)) ||
        (st = sn_dev_view(L, n, scale, &vs)) ||
        (st = sn_dev_view(L, n, bias, &vb)) ||
        (st = sn_out_device(L, n, 0, x->rank, x->dims, &out)))
        return st;
    out->dtype = t;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    /* (N, groups, rest) standardised; then (N, per, rest / per) against
     * (per, 1) */
    size_t samples = (size_t)x->dims[0], each = sn_rt_elements(x) / samples;
    d3[0] = x->dims[0];
    d3[1] = per;
    d3[2] = (int64_t)(each / (size_t)per);
    pd[0] = per;
    pd[1] = 1;
    if ((st = emit_standardise(L, n, samples * (size_t)groups,
                               each / (size_t)groups, eps, vx, out->view)) ||
        (st = sn_emit_binary(L, n, SN_BINARY_MUL, 3, d3, out->view, 2, pd, vs,
                             out->view)))
        return st;
    return sn_emit_binary(L, n, SN_BINARY_ADD, 3, d3, out->view, 2, pd, vb,
                          out->view);
}

/* The input (N, C, ...) of an instance or group normalisation: its C. */
static shardnet_status channels(const sn_node *n, const sn_rt *x, int64_t *c)
{
    if (x->rank < 2)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "input must be (N, C, ...), not of rank %d",
                             x->rank);
    *c = x->dims[1];
    return SHARDNET_OK;
}

/*
 * InstanceNormalization (opsets 1 and 6; opset 1's consumed_inputs is
 * ignored): x (N, C, D1, ...) normalised over D1... per sample and
 * channel, then times scale (C) plus B (C) per channel.
 */
SN_LOWER(sn_lower_instancenorm)
{
    int64_t c = 0;
    shardnet_status st = channels(n, sn_in(L, n, 0), &c);
    return st ? st : normalise_groups(L, n, c, c, "scale and B", "channel");
}

/*
 * GroupNormalization (opsets 18 and 21): groups of consecutive channels
 * normalised together (num_groups of them), then a scale and a bias a
 * channel (opset 21) or a group (18).  stash_type (21: the statistics'
 * precision) is float here whatever it says.
 */
SN_LOWER(sn_lower_groupnorm)
{
    int64_t c = 0, groups = sn_attr_int(n, "num_groups", 0);
    int per_channel = L->g->opset >= 21;
    shardnet_status st = channels(n, sn_in(L, n, 0), &c);
    if (st)
        return st;
    if (groups < 1 || groups > c || c % groups)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "num_groups %lld does not divide the input's "
                             "%lld channels into groups",
                             (long long)groups, (long long)c);
    return normalise_groups(L, n, groups, per_channel ? c : groups,
                            "scale and bias",
                            per_channel ? "channel, opset 21"
                                        : "group, opset 18");
}

/*
 * y (outer, len) = x normalised by the root of the mean of its squares
 * over len, plus eps, times scale (len values): the squares' sum, divided
 * by the count, plus eps, to the power -1/2 (into inv, outer values),
 * then the two products.
 */
static shardnet_status emit_rms(sn_lower *L, const sn_node *n, size_t outer,
                                size_t len, float eps, sn_view vx,
                                sn_view vs, sn_view inv, sn_view vy)
{
    int64_t od2[2] = {(int64_t)outer, (int64_t)len};
    int64_t md2[2] = {(int64_t)outer, 1}, ol = (int64_t)outer, one = 1;
    sn_step s = {.kind = SN_KERNEL_REDUCE};
    sn_view c3;
    shardnet_status st;
    float *k = malloc(3 * sizeof *k);
    if (!k)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "RMS normalisation");
    k[0] = (float)len;
    k[1] = eps;
    k[2] = -0.5f;
    if ((st = sn_dev_upload(L, n, k, 3, &c3)) != SHARDNET_OK || outer == 0)
        return st;
    sn_view veps = {c3.buf, c3.offset + 1}, vpow = {c3.buf, c3.offset + 2};
    s.u.reduce = (sn_reduce_desc){.op = SN_REDUCE_SUM_SQUARE, .outer = outer,
                                  .len = len, .inner = 1, .x = vx, .y = inv};
    if ((st = sn_emit(L, n, &s)) ||
        (st = sn_emit_binary(L, n, SN_BINARY_DIV, 1, &ol, inv, 1, &one, c3,
                             inv)) ||
        (st = sn_emit_binary(L, n, SN_BINARY_ADD, 1, &ol, inv, 1, &one, veps,
                             inv)) ||
        (st = sn_emit_binary(L, n, SN_BINARY_POW, 1, &ol, inv, 1, &one, vpow,
                             inv)) ||
        (st = sn_emit_binary(L, n, SN_BINARY_MUL, 2, od2, vx, 2, md2, inv,
                             vy)))
        return st;
    return sn_emit_binary(L, n, SN_BINARY_MUL, 2, od2, vy, 1, od2 + 1, vs,
                          vy);
}

/*
 * RMSNormalization (opset 23), and ONNX Runtime's SimplifiedLayerNormalization
 * (in ONNX's domain, its version 1): x over its axes from `axis` (default
 * -1) divided by the root of the mean of their squares plus epsilon, times
 * Scale; SimplifiedLayerNormalization's optional second output is that
 * 1 / root.  stash_type is float here whatever it says.
 */
SN_LOWER(sn_lower_rmsnorm)
{
    sn_rt *x = sn_in(L, n, 0), *scale = sn_in(L, n, 1), *out;
    int64_t axis = sn_attr_int(n, "axis", -1);
    sn_dtype t = SN_DT_FLOAT;
    sn_view vx, vs, inv;
    shardnet_status st;
    int ax;

    if (x->rank < 1 || (ax = sn_axis(axis, x->rank)) < 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "axis %lld out of range for rank %d",
                             (long long)axis, x->rank);
    if ((st = sn_float_type(n, x, &t)) != SHARDNET_OK)
        return st;
    size_t outer = sn_dims_product(0, ax, x->dims);
    size_t len = sn_dims_product(ax, x->rank, x->dims);
    if (!L->plan)
        return SHARDNET_UNSUPPORTED; /* not foldable */
    if (len == 0 && outer)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "normalising over empty axes");
    if ((st = norm_param(L, n, scale, "Scale", x->rank - ax, x->dims + ax,
                         len, &vs)) ||
        (st = sn_dev_view(L, n, x, &vx)) ||
        (st = sn_out_device(L, n, 0, x->rank, x->dims, &out)))
        return st;
    out->dtype = t;
    if ((st = n->noutputs > 1 && n->outputs[1] >= 0
                  ? norm_out(L, n, 1, x, ax, t, &inv)
                  : sn_scratch(L, outer ? outer : 1, &inv)))
        return st;
    return emit_rms(L, n, outer, len, sn_attr_float(n, "epsilon", 1e-5f), vx,
                    vs, inv, out->view);
}

/*
 * ONNX Runtime's SkipLayerNormalization and SkipSimplifiedLayerNormalization
 * (com.microsoft): s = input + skip (+ bias, a value a column), then s's
 * layer normalisation over the last axis times gamma plus beta (beta
 * optional), or its RMS normalisation times gamma.  skip has the input's
 * shape or broadcasts to it ((1, S, H), (S, H)).  Output 3, where asked,
 * is s; the RMS form's output 2, its 1 / root; the mean and the layer
 * normalisation's inverse deviation (outputs 1 and 2) are refused.
 */
SN_LOWER(sn_lower_skip_norm)
{
    int rms = !strcmp(n->op_type, "SkipSimplifiedLayerNormalization");
    sn_rt *x = sn_in(L, n, 0), *skip = sn_in(L, n, 1), *gamma = sn_in(L, n, 2);
    sn_rt *beta = rms ? NULL : sn_in(L, n, 3), *bias = sn_in(L, n, rms ? 3 : 4);
    sn_rt *out;
    float eps = sn_attr_float(n, "epsilon", 1e-5f);
    sn_dtype t = SN_DT_FLOAT;
    sn_view vx, vk, vg, vbeta = {0}, vbias, sum, inv;
    shardnet_status st;
    int r = x->rank;

    if ((st = sn_float_type(n, x, &t)) != SHARDNET_OK)
        return st;
    if (r < 1)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the input is a scalar");
    for (size_t i = 1; i < 3 && i < n->noutputs; i++)
        if (n->outputs[i] >= 0 && !(rms && i == 2))
            return sn_node_error(n, SHARDNET_UNSUPPORTED,
                                 "output %zu (the %s) is not supported", i,
                                 i == 1 ? "mean" : "inverse deviation");
    if ((st = sn_broadcast_into(n, x, skip, "skip")) != SHARDNET_OK)
        return st;
    size_t len = (size_t)x->dims[r - 1], outer = sn_dims_product(0, r - 1,
                                                                 x->dims);
    int64_t od2[2] = {(int64_t)outer, (int64_t)len}, ln = (int64_t)len;
    sn_step s = {.kind = SN_KERNEL_LAYERNORM};
    if (!L->plan)
        return SHARDNET_UNSUPPORTED; /* not foldable */
    if (len == 0 && outer)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "normalising over an empty axis");
    if ((st = norm_param(L, n, gamma, "gamma", 1, x->dims + r - 1, len,
                         &vg)) ||
        (beta && (st = norm_param(L, n, beta, "beta", 1, x->dims + r - 1,
                                  len, &vbeta))) ||
        (bias && (st = norm_param(L, n, bias, "bias", 1, x->dims + r - 1,
                                  len, &vbias))) ||
        (st = sn_dev_view(L, n, x, &vx)) ||
        (st = sn_dev_view(L, n, skip, &vk)) ||
        (st = sn_out_device(L, n, 0, r, x->dims, &out)))
        return st;
    out->dtype = t;
    if ((st = n->noutputs > 3 && n->outputs[3] >= 0
                  ? norm_out(L, n, 3, x, r, t, &sum)
                  : sn_scratch(L, outer * len > 0 ? outer * len : 1, &sum)) ||
        (rms && (st = n->noutputs > 2 && n->outputs[2] >= 0
                          ? norm_out(L, n, 2, x, r - 1, t, &inv)
                          : sn_scratch(L, outer ? outer : 1, &inv))))
        return st;
    if (outer * len == 0)
        return SHARDNET_OK;
    if ((st = sn_emit_binary(L, n, SN_BINARY_ADD, r, x->dims, vx, skip->rank,
                             skip->dims, vk, sum)) ||
        (bias && (st = sn_emit_binary(L, n, SN_BINARY_ADD, 2, od2, sum, 1,
                                      &ln, vbias, sum))))
        return st;
    if (rms)
        return emit_rms(L, n, outer, len, eps, sum, vg, inv, out->view);
    s.u.layernorm = (sn_layernorm_desc){.outer = outer, .len = len,
                                        .epsilon = eps, .x = sum,
                                        .scale = vg, .bias = vbeta,
                                        .y = out->view};
    return sn_emit(L, n, &s);
}

/* A copy of x (rank r, dims) with its axes in the order perm, into dst. */
static shardnet_status emit_permute(sn_lower *L, const sn_node *n, int r,
                                    const int64_t *dims, const int *perm,
                                    int inverse, sn_view src, sn_view dst)
{
    sn_step s = {.kind = SN_KERNEL_COPY};
    int64_t str[SN_MAX_DIMS], pd[SN_MAX_DIMS], pstr[SN_MAX_DIMS];
    sn_strides(r, dims, str);
    for (int i = 0; i < r; i++)
        pd[i] = dims[perm[i]];
    sn_strides(r, pd, pstr);
    s.u.copy = (sn_copy_desc){.rank = (size_t)r, .src = src, .dst = dst};
    for (int i = 0; i < r; i++) {
        /* walk the permuted shape; inverse: write x's order from it */
        s.u.copy.shape[i] = (size_t)pd[i];
        s.u.copy.src_stride[i] = (ptrdiff_t)(inverse ? pstr[i] : str[perm[i]]);
        s.u.copy.dst_stride[i] = (ptrdiff_t)(inverse ? str[perm[i]] : pstr[i]);
    }
    return sn_emit(L, n, &s);
}

/*
 * MeanVarianceNormalization (opsets 9 and 13): y = (x - mean) / (sqrt(var)
 * + 1e-9), mean and the biased variance over `axes` (default 0, 2, 3).
 * The axes are moved last (a copy, when they are not already), the
 * layernorm kernel normalises with an epsilon of 1e-18 inside the square
 * root (1e-9 outside it for a constant input, as the ONNX definition;
 * elsewhere the two differ by less than float precision unless the
 * variance is below ~1e-16), and the result is moved back.
 */
SN_LOWER(sn_lower_mvn)
{
    sn_rt *x = sn_in(L, n, 0), *out;
    int64_t axes[SN_MAX_DIMS] = {0, 2, 3};
    size_t na = 3, outer = 1, len = 1;
    int red[SN_MAX_DIMS] = {0}, perm[SN_MAX_DIMS], np = 0, r = x->rank;
    int trailing = 1, given;
    sn_view vx, a, b;
    sn_dtype t = SN_DT_FLOAT;
    shardnet_status st;

    if ((st = sn_float_type(n, x, &t)) ||
        (st = sn_attr_ints(n, "axes", axes, SN_MAX_DIMS, &na, &given)))
        return st;
    if (!given)
        na = 3;
    for (size_t i = 0; i < na; i++) {
        int ax = sn_axis(axes[i], r);
        if (ax < 0 || red[ax])
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "axis %lld out of range or repeated for "
                                 "rank %d",
                                 (long long)axes[i], r);
        red[ax] = 1;
    }
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < r; i++)
            if (red[i] == pass) {
                perm[np++] = i;
                if (pass)
                    len *= (size_t)x->dims[i];
                else
                    outer *= (size_t)x->dims[i];
            }
    for (int i = 0; i < r; i++)
        trailing &= perm[i] == i;
    if (!L->plan)
        return SHARDNET_UNSUPPORTED; /* not foldable */
    if ((st = sn_dev_view(L, n, x, &vx)) ||
        (st = sn_out_device(L, n, 0, r, x->dims, &out)))
        return st;
    out->dtype = t;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    if (trailing)
        return emit_standardise(L, n, outer, len, 1e-18f, vx, out->view);
    if ((st = sn_scratch(L, outer * len, &a)) ||
        (st = sn_scratch(L, outer * len, &b)) ||
        (st = emit_permute(L, n, r, x->dims, perm, 0, vx, a)) ||
        (st = emit_standardise(L, n, outer, len, 1e-18f, a, b)))
        return st;
    return emit_permute(L, n, r, x->dims, perm, 1, b, out->view);
}
