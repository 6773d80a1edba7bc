/*
 * Convolution and pooling, the operators that slide a window over the
 * spatial axes: Conv, MaxPool and AveragePool (1-D to 3-D), and
 * GlobalAveragePool and GlobalMaxPool (a reduction over the spatial axes).
 * They share the window's geometry (kernel, strides, dilations, pads,
 * auto_pad, ceil_mode).  Convolution is im2col + GEMM, one image at a time;
 * every group of a grouped convolution is one batch item of the same GEMM;
 * a depthwise one (a group per input channel) is one direct kernel.
 */
#include <config.h>

#include <string.h>

#include "ops/ops.h"

/* Attribute values above this are refused: keeps window arithmetic in
 * int64 far from overflow. */
#define MAX_WINDOW ((int64_t)1 << 30)

/* Geometry of a window along the nd (1 to 3) spatial axes. */
typedef struct geom {
    int nd;
    int64_t in[3], k[3], stride[3], dil[3], pb[3], pe[3], out[3];
} geom;

/* Height and width views of a 1-D or 2-D geometry: a 1-D window has
 * height 1. */
#define G_H(g, f, one) ((g)->nd == 2 ? (size_t)(g)->f[0] : (size_t)(one))
#define G_W(g, f) ((size_t)(g)->f[(g)->nd - 1])

/*
 * Output size and pads of a window from the attributes strides, dilations,
 * pads and auto_pad; ceil_mode for pooling.  In ceil mode the last window
 * must start inside the input or its left padding (ONNX / PyTorch).
 */
static shardnet_status window_geometry(const sn_node *n, int nd,
                                       const int64_t *in, const int64_t *k,
                                       int ceil_mode, geom *g)
{
    int64_t v[6];
    size_t c;
    shardnet_status st;
    const char *ap = sn_attr_string(n, "auto_pad", "NOTSET");
    int same = 0, lower = 0;

    g->nd = nd;
    for (int i = 0; i < nd; i++) {
        if (k[i] < 1 || k[i] > MAX_WINDOW)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "kernel size %lld out of range",
                                 (long long)k[i]);
        g->in[i] = in[i];
        g->k[i] = k[i];
        g->stride[i] = g->dil[i] = 1;
        g->pb[i] = g->pe[i] = 0;
    }
    if ((st = sn_attr_ints(n, "strides", v, 6, &c, NULL)) != SHARDNET_OK)
        return st;
    if (c && c != (size_t)nd)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "strides has %zu values for %d spatial axes", c,
                             nd);
    for (size_t i = 0; i < c; i++) {
        if (v[i] < 1 || v[i] > MAX_WINDOW)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "stride %lld out of range", (long long)v[i]);
        g->stride[i] = v[i];
    }
    if ((st = sn_attr_ints(n, "dilations", v, 6, &c, NULL)) != SHARDNET_OK)
        return st;
    if (c && c != (size_t)nd)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "dilations has %zu values for %d spatial axes",
                             c, nd);
    for (size_t i = 0; i < c; i++) {
        if (v[i] < 1 || v[i] > MAX_WINDOW)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "dilation %lld out of range",
                                 (long long)v[i]);
        g->dil[i] = v[i];
    }
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
        same = 1;
        lower = ap[5] == 'L';
    } else if (strcmp(ap, "VALID") && strcmp(ap, "NOTSET") && *ap) {
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "unknown auto_pad '%s'", ap);
    } else if (!strcmp(ap, "NOTSET") || !*ap) {
        if ((st = sn_attr_ints(n, "pads", v, 6, &c, NULL)) != SHARDNET_OK)
            return st;
        if (c && c != 2 * (size_t)nd)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "pads has %zu values for %d spatial axes",
                                 c, nd);
        for (size_t i = 0; i < c; i++)
            if (v[i] < 0 || v[i] > MAX_WINDOW)
                return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                     "pad %lld out of range",
                                     (long long)v[i]);
        for (size_t i = 0; c && i < (size_t)nd; i++) {
            g->pb[i] = v[i];
            g->pe[i] = v[i + (size_t)nd];
        }
    }
    for (int i = 0; i < nd; i++) {
        int64_t eff = (g->k[i] - 1) * g->dil[i] + 1, s = g->stride[i];
        if (same) {
            int64_t total;
            g->out[i] = (g->in[i] + s - 1) / s;
            total = (g->out[i] - 1) * s + eff - g->in[i];
            if (total < 0)
                total = 0;
            g->pb[i] = lower ? total - total / 2 : total / 2;
            g->pe[i] = total - g->pb[i];
            continue;
        }
        int64_t num = g->in[i] + g->pb[i] + g->pe[i] - eff;
        if (num < 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "the window (%lld) is larger than the "
                                 "padded input (%lld)",
                                 (long long)eff,
                                 (long long)(g->in[i] + g->pb[i] + g->pe[i]));
        g->out[i] = (ceil_mode ? (num + s - 1) / s : num / s) + 1;
        if (ceil_mode && (g->out[i] - 1) * s >= g->in[i] + g->pb[i])
            g->out[i]--;
    }
    return SHARDNET_OK;
}

/* Input rank 3 (1-D), 4 (2-D) or, where allow_3d, 5 (3-D). */
static shardnet_status spatial_rank(const sn_node *n, const sn_rt *x,
                                    const char *what, int allow_3d, int *nd)
{
    if (x->rank == 5 && !allow_3d)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "3-D %s is not supported (1-D and 2-D only)",
                             what);
    if (x->rank != 3 && x->rank != 4 && x->rank != 5)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "input must be (N, C, W), (N, C, H, W) or (N, "
                             "C, D, H, W), not of rank %d",
                             x->rank);
    *nd = x->rank - 2;
    return SHARDNET_OK;
}

/* What a convolution's steps need, checked and derived by conv_check(). */
typedef struct conv_job {
    geom g;
    int64_t nimg, c, m, cg, group;
    sn_view vx, vw, vb; /* vb.buf NULL: no bias */
    size_t kh, kw, ih, iw, oh, ow;
    size_t krun; /* GEMMs over runs of this much of K (0: whole) */
} conv_job;

/* The checks of Conv's inputs and attributes; the output shape into od
 * (x's rank). */
static shardnet_status conv_check(const sn_node *n, const sn_rt *x,
                                  const sn_rt *w, const sn_rt *b, int nd,
                                  conv_job *j, int64_t *od)
{
    int64_t kern[2], ks[4];
    size_t nks;
    int given;
    shardnet_status st;

    if (w->rank != x->rank)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "weights of rank %d for an input of rank %d",
                             w->rank, x->rank);
    j->group = sn_attr_int(n, "group", 1);
    j->nimg = x->dims[0], j->c = x->dims[1], j->m = w->dims[0];
    j->cg = w->dims[1];
    int64_t cgg;
    if (j->group < 1 || __builtin_mul_overflow(j->cg, j->group, &cgg) ||
        cgg != j->c || j->m % j->group)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "group %lld does not fit %lld input channels "
                             "(weights take %lld per group) and %lld output "
                             "channels",
                             (long long)j->group, (long long)j->c,
                             (long long)j->cg, (long long)j->m);
    for (int i = 0; i < nd; i++)
        kern[i] = w->dims[2 + i];
    if ((st = sn_attr_ints(n, "kernel_shape", ks, 4, &nks, &given)))
        return st;
    if (given) {
        int same = nks == (size_t)nd;
        for (int i = 0; same && i < nd; i++)
            same = ks[i] == kern[i];
        if (!same)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "kernel_shape disagrees with the weights' "
                                 "shape");
    }
    if (b && (b->rank != 1 || b->dims[0] != j->m))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "bias must hold %lld values (one per output "
                             "channel)",
                             (long long)j->m);
    if ((st = window_geometry(n, nd, x->dims + 2, kern, 0, &j->g)))
        return st;
    od[0] = j->nimg;
    od[1] = j->m;
    for (int i = 0; i < nd; i++)
        od[2 + i] = j->g.out[i];
    j->kh = G_H(&j->g, k, 1), j->kw = G_W(&j->g, k);
    j->ih = G_H(&j->g, in, 1), j->iw = G_W(&j->g, in);
    j->oh = G_H(&j->g, out, 1), j->ow = G_W(&j->g, out);
    return SHARDNET_OK;
}

/* Depthwise (a group per input channel): one direct step over every
 * image and channel into y. */
static shardnet_status emit_dwconv(sn_lower *L, const sn_node *n,
                                   const conv_job *j, sn_view y, sn_act act)
{
    const geom *g = &j->g;
    sn_step dw = {.kind = SN_KERNEL_DWCONV};
    dw.u.dwconv = (sn_dwconv_desc){
        .images = (size_t)j->nimg, .channels = (size_t)j->c,
        .mult = (size_t)(j->m / j->c), .in_h = j->ih, .in_w = j->iw,
        .out_h = j->oh, .out_w = j->ow, .k_h = j->kh, .k_w = j->kw,
        .stride_h = G_H(g, stride, 1), .stride_w = G_W(g, stride),
        .dil_h = G_H(g, dil, 1), .dil_w = G_W(g, dil),
        .pad_top = G_H(g, pb, 0), .pad_left = G_W(g, pb), .src = j->vx,
        .weights = j->vw, .bias = j->vb, .dst = y, .act = act};
    return sn_emit(L, n, &dw);
}

/* Floats of the im2col matrix one band of output rows takes at most, per
 * compute unit of the device (4 MiB): an 80 x 80 image's 3 x 3
 * convolution of 96 channels took 22 MB whole, which the GEMM then read
 * back from memory.  PaddleOCR's text detector, medians of 5 runs, 1 / 2
 * threads (2-core AMD EPYC, 32 MiB L3): whole 32 / ~17 ms; bands of 1 MiB
 * 23.2 / 15.7; 4 MiB 22.1 / 12.6; 4 MiB per thread 22.1 / 12.2 (smaller
 * bands split between two threads pass the columns from core to core). */
#define COL_BAND ((size_t)1 << 20)

/*
 * The GEMMs of a convolution into y: per image, an im2col step (skipped
 * for 1x1 kernels with stride 1 and no padding, where the input already
 * is the column matrix) per band of output rows, then one GEMM W (M x
 * C/group*kh*kw) times the band's columns, batched over the groups; with
 * one group, the bias, the residual res (laid out as y; res.buf NULL:
 * none) and act are its epilogue.  With groups the bias differs per batch item: the caller adds
 * it (and res and act) after.
 */
static shardnet_status emit_gemms(sn_lower *L, const sn_node *n,
                                  const conv_job *j, sn_view y, sn_act act,
                                  sn_view res)
{
    const geom *g = &j->g;
    const size_t mg = (size_t)(j->m / j->group),
                 ck = (size_t)j->cg * j->kh * j->kw;
    const size_t ihw = j->ih * j->iw, ohw = j->oh * j->ow;
    const size_t in_img = (size_t)j->c * ihw, out_img = (size_t)j->m * ohw;
    int direct = j->kh == 1 && j->kw == 1;
    sn_view col = {0};
    shardnet_status st;

    for (int i = 0; i < g->nd; i++)
        direct &= g->stride[i] == 1 && g->pb[i] == 0 && g->pe[i] == 0;
    sn_step s = {.kind = SN_KERNEL_GEMM};
    s.u.gemm = (sn_gemm_desc){.m = mg, .n = ohw, .k = ck, .alpha = 1.0f,
                              .lda = ck, .ldb = ohw, .ldc = ohw,
                              .batch = (size_t)j->group,
                              .stride_a = mg * ck, .stride_b = ck * ohw,
                              .stride_c = mg * ohw, .a = j->vw, .act = act};
    if (j->group == 1) {
        s.u.gemm.bias = j->vb;
        s.u.gemm.bias_rows = 1;
    }
    if (direct && j->group == 1 && j->nimg > 1) {
        /* Every image in one batched GEMM, the weights shared. */
        s.u.gemm.batch = (size_t)j->nimg;
        s.u.gemm.stride_a = 0;
        s.u.gemm.stride_b = in_img;
        s.u.gemm.stride_c = out_img;
        s.u.gemm.b = j->vx;
        s.u.gemm.c = y;
        s.u.gemm.res = res;
        return sn_emit_gemm_runs(L, n, &s, j->krun);
    }
    /* im2col in bands of output rows, each at most COL_BAND floats per
     * compute unit, so that the GEMM reads the columns from the cache they
     * were written to (and the scratch stays small). */
    size_t band = j->oh;
    if (!direct) {
        const size_t per_row = (size_t)j->group * ck * j->ow;
        const size_t units = L->dev && L->dev->info.compute_units
                                 ? L->dev->info.compute_units
                                 : 1;
        const size_t cap = COL_BAND * units;
        if (per_row * j->oh > cap)
            band = cap / per_row ? cap / per_row : 1;
        if ((st = sn_scratch(L, per_row * band, &col)) != SHARDNET_OK)
            return st;
    }
    for (int64_t i = 0; i < j->nimg; i++) {
        sn_view src = {j->vx.buf, j->vx.offset + (size_t)i * in_img};
        for (size_t oy0 = 0; oy0 < j->oh; oy0 += band) {
            const size_t rows = j->oh - oy0 < band ? j->oh - oy0 : band;
            const size_t at = (size_t)i * out_img + oy0 * j->ow;
            if (!direct) {
                sn_step ic = {.kind = SN_KERNEL_IM2COL};
                ic.u.im2col = (sn_im2col_desc){
                    .channels = (size_t)j->c, .in_h = j->ih, .in_w = j->iw,
                    .out_h = rows, .out_w = j->ow, .k_h = j->kh,
                    .k_w = j->kw, .stride_h = G_H(g, stride, 1),
                    .stride_w = G_W(g, stride), .dil_h = G_H(g, dil, 1),
                    .dil_w = G_W(g, dil), .pad_top = G_H(g, pb, 0),
                    .pad_left = G_W(g, pb), .row0 = oy0, .src = src,
                    .dst = col};
                if ((st = sn_emit(L, n, &ic)) != SHARDNET_OK)
                    return st;
                s.u.gemm.n = s.u.gemm.ldb = rows * j->ow;
                s.u.gemm.stride_b = ck * rows * j->ow;
            }
            s.u.gemm.b = direct ? src : col;
            s.u.gemm.c = (sn_view){y.buf, y.offset + at};
            if (res.buf)
                s.u.gemm.res = (sn_view){res.buf, res.offset + at};
            if ((st = sn_emit_gemm_runs(L, n, &s, j->krun)) != SHARDNET_OK)
                return st;
        }
    }
    return SHARDNET_OK;
}

/*
 * Conv, with the residual a pass may have fused into it (input 3, see
 * lib/passes/fuse_residual.c): out = act(conv(x) + bias + residual).  A
 * residual of the convolution's shape is the GEMM's epilogue, after the
 * bias, as the Add was; otherwise (groups, depthwise, a residual that
 * broadcasts) an ADD step after the convolution adds it and applies act,
 * and a grouped convolution's bias (different per GEMM batch item) is a
 * broadcast ADD before it.
 */
SN_LOWER(sn_lower_conv)
{
    sn_rt *x = sn_in(L, n, 0), *w = sn_in(L, n, 1), *b = sn_in(L, n, 2);
    sn_rt *r = n->ninputs > 3 ? sn_in(L, n, 3) : NULL, *out;
    int64_t od[SN_MAX_DIMS], shp[SN_MAX_DIMS];
    int nd = 0, orank;
    conv_job j = {0};
    shardnet_status st;
    sn_view y, vr = {0};
    sn_act act = sn_fused_act(n);
    sn_dtype t = SN_DT_FLOAT, tr = SN_DT_FLOAT;

    if (n->ninputs > 3 && !sn_attr_int(n, "residual", 0))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "takes 2 or 3 inputs (%zu given)", n->ninputs);
    if ((st = spatial_rank(n, x, "convolution", 0, &nd)) != SHARDNET_OK ||
        (st = sn_float_type(n, x, &t)) != SHARDNET_OK ||
        (r && (st = sn_float_type(n, r, &tr)) != SHARDNET_OK) ||
        (st = conv_check(n, x, w, b, nd, &j, od)) != SHARDNET_OK)
        return st;
    orank = x->rank;
    memcpy(shp, od, (size_t)orank * sizeof od[0]);
    if (r && !sn_broadcast_shape(x->rank, od, r->rank, r->dims, &orank, shp))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the residual (rank %d) does not broadcast "
                             "with the convolution's output",
                             r->rank);
    /* The convolution's own output is the node's (else a scratch), and a
     * residual of the same shape goes into the GEMM's epilogue. */
    int whole = orank == x->rank &&
                !memcmp(shp, od, (size_t)orank * sizeof od[0]);
    int fused = r && whole && r->rank == x->rank &&
                !memcmp(r->dims, od, (size_t)orank * sizeof od[0]);
    if ((st = sn_out_device(L, n, 0, orank, shp, &out)) != SHARDNET_OK)
        return st;
    out->dtype = t;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    if (j.cg == 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "no input channels");
    if ((st = sn_dev_view(L, n, x, &j.vx)) != SHARDNET_OK ||
        (st = sn_dev_view(L, n, w, &j.vw)) != SHARDNET_OK ||
        (b && (st = sn_dev_view(L, n, b, &j.vb)) != SHARDNET_OK) ||
        (r && (st = sn_dev_view(L, n, r, &vr)) != SHARDNET_OK))
        return st;
    y = out->view;
    if (!whole &&
        (st = sn_scratch(L, sn_dims_product(0, x->rank, od), &y)) !=
            SHARDNET_OK)
        return st;

    int depthwise = j.group == j.c && j.cg == 1;
    /* What is left after the convolution's own step: the grouped bias,
     * then the residual, then act. */
    int grouped_bias = b && j.group > 1 && !depthwise;
    int add_after = r && (!fused || depthwise || j.group > 1);
    sn_act own = grouped_bias || add_after ? SN_ACT_NONE : act;
    if (depthwise)
        st = emit_dwconv(L, n, &j, y, own);
    else
        st = emit_gemms(L, n, &j, y, own,
                        fused && !add_after ? vr : (sn_view){0});
    if (st != SHARDNET_OK)
        return st;
    if (grouped_bias) {
        int64_t o3[3] = {j.nimg, j.m, (int64_t)(j.oh * j.ow)}, b2[2] = {j.m, 1};
        if ((st = sn_emit_binary_act(L, n, SN_BINARY_ADD,
                                     add_after ? SN_ACT_NONE : act, 3, o3, y,
                                     2, b2, j.vb, y)) != SHARDNET_OK)
            return st;
    }
    if (add_after)
        return sn_emit_binary_act(L, n, SN_BINARY_ADD, act, x->rank, od, y,
                                  r->rank, r->dims, vr, out->view);
    return SHARDNET_OK;
}

shardnet_status sn_conv_int_sums(sn_lower *L, const sn_node *n,
                                 const sn_rt *x, const sn_rt *w, sn_view vx,
                                 sn_view vw, size_t krun, sn_view y)
{
    int64_t od[SN_MAX_DIMS];
    int nd = 0;
    conv_job j = {0};
    shardnet_status st;
    if ((st = spatial_rank(n, x, "integer convolution on the device", 0,
                           &nd)) != SHARDNET_OK ||
        (st = conv_check(n, x, w, NULL, nd, &j, od)) != SHARDNET_OK)
        return st;
    if (j.cg == 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "no input channels");
    j.vx = vx;
    j.vw = vw;
    j.krun = krun;
    /* a depthwise window sums kh kw products in one step */
    if (j.group == j.c && j.cg == 1 && (!krun || krun >= j.kh * j.kw))
        return emit_dwconv(L, n, &j, y, SN_ACT_NONE);
    return emit_gemms(L, n, &j, y, SN_ACT_NONE, (sn_view){0});
}

/*
 * MaxPool and AveragePool, 1-D to 3-D.  A 3-D window is separable: a 2-D
 * pool over every (H, W) plane into scratch, then a (kd x 1) pool along D
 * over the (D, OH * OW) planes.  The maximum of maxima is the maximum, and
 * as a clipped box's position count is the product of its per-axis counts
 * (inside the input, or inside the padded input), the average of averages
 * is the average.
 */
static shardnet_status pool_3d(sn_lower *L, const sn_node *n, sn_pool_op op,
                               int cip, sn_rt *x, const geom *g, sn_view dst)
{
    size_t nc = (size_t)(x->dims[0] * x->dims[1]);
    size_t ohw = (size_t)(g->out[1] * g->out[2]);
    sn_step s = {.kind = SN_KERNEL_POOL};
    sn_view tmp;
    shardnet_status st;
    if ((st = sn_scratch(L, nc * (size_t)g->in[0] * ohw, &tmp)))
        return st;
    s.u.pool = (sn_pool_desc){
        .op = op, .count_include_pad = cip,
        .planes = nc * (size_t)g->in[0],
        .in_h = (size_t)g->in[1], .in_w = (size_t)g->in[2],
        .out_h = (size_t)g->out[1], .out_w = (size_t)g->out[2],
        .k_h = (size_t)g->k[1], .k_w = (size_t)g->k[2],
        .stride_h = (size_t)g->stride[1], .stride_w = (size_t)g->stride[2],
        .dil_h = (size_t)g->dil[1], .dil_w = (size_t)g->dil[2],
        .pad_top = (size_t)g->pb[1], .pad_left = (size_t)g->pb[2],
        .pad_bottom = (size_t)g->pe[1], .pad_right = (size_t)g->pe[2],
        .dst = tmp};
    if ((st = sn_dev_view(L, n, x, &s.u.pool.src)) != SHARDNET_OK ||
        (st = sn_emit(L, n, &s)) != SHARDNET_OK)
        return st;
    s.u.pool = (sn_pool_desc){
        .op = op, .count_include_pad = cip, .planes = nc,
        .in_h = (size_t)g->in[0], .in_w = ohw,
        .out_h = (size_t)g->out[0], .out_w = ohw,
        .k_h = (size_t)g->k[0], .k_w = 1,
        .stride_h = (size_t)g->stride[0], .stride_w = 1,
        .dil_h = (size_t)g->dil[0], .dil_w = 1,
        .pad_top = (size_t)g->pb[0], .pad_bottom = (size_t)g->pe[0],
        .src = tmp, .dst = dst};
    return sn_emit(L, n, &s);
}

static shardnet_status lower_pool(sn_lower *L, const sn_node *n,
                                  sn_pool_op op)
{
    sn_rt *x = sn_in(L, n, 0), *out;
    int64_t ks[6], od[5];
    size_t nks;
    int nd = 0;
    geom g;
    shardnet_status st;
    sn_step s = {.kind = SN_KERNEL_POOL};
    sn_dtype t = SN_DT_FLOAT;
    int ceil_mode = (int)sn_attr_int(n, "ceil_mode", 0);

    if ((st = spatial_rank(n, x, "pooling", 1, &nd)) != SHARDNET_OK)
        return st;
    if ((st = op == SN_POOL_AVG ? sn_float_type(n, x, &t)
                                : sn_device_type(n, x->dtype, &t)))
        return st;
    /* storage_order only changes the Indices output. */
    if (n->noutputs > 1 && n->outputs[1] >= 0)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "the Indices output is not supported");
    if ((st = sn_attr_ints(n, "kernel_shape", ks, 6, &nks, NULL)))
        return st;
    if (nks != (size_t)nd)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "kernel_shape needs %d values for an input of "
                             "rank %d, not %zu",
                             nd, x->rank, nks);
    if ((st = window_geometry(n, nd, x->dims + 2, ks, ceil_mode, &g)))
        return st;
    od[0] = x->dims[0];
    od[1] = x->dims[1];
    for (int i = 0; i < nd; i++)
        od[2 + i] = g.out[i];
    if ((st = sn_out_device(L, n, 0, x->rank, od, &out)) != SHARDNET_OK)
        return st;
    out->dtype = t;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    int cip = op == SN_POOL_AVG &&
              sn_attr_int(n, "count_include_pad", 0) != 0;
    if (nd == 3)
        return pool_3d(L, n, op, cip, x, &g, out->view);
    s.u.pool = (sn_pool_desc){
        .op = op,
        .count_include_pad = cip,
        .planes = (size_t)(x->dims[0] * x->dims[1]),
        .in_h = G_H(&g, in, 1), .in_w = G_W(&g, in),
        .out_h = G_H(&g, out, 1), .out_w = G_W(&g, out),
        .k_h = G_H(&g, k, 1), .k_w = G_W(&g, k),
        .stride_h = G_H(&g, stride, 1), .stride_w = G_W(&g, stride),
        .dil_h = G_H(&g, dil, 1), .dil_w = G_W(&g, dil),
        .pad_top = G_H(&g, pb, 0), .pad_left = G_W(&g, pb),
        .pad_bottom = G_H(&g, pe, 0), .pad_right = G_W(&g, pe),
        .dst = out->view};
    if ((st = sn_dev_view(L, n, x, &s.u.pool.src)) != SHARDNET_OK)
        return st;
    return sn_emit(L, n, &s);
}

SN_LOWER(sn_lower_maxpool)
{
    return lower_pool(L, n, SN_POOL_MAX);
}

SN_LOWER(sn_lower_avgpool)
{
    return lower_pool(L, n, SN_POOL_AVG);
}

/* GlobalAveragePool / GlobalMaxPool: a reduction over the spatial axes. */
static shardnet_status lower_global_pool(sn_lower *L, const sn_node *n,
                                         sn_reduce_op op)
{
    sn_rt *x = sn_in(L, n, 0), *out;
    int64_t od[SN_MAX_DIMS];
    sn_step s = {.kind = SN_KERNEL_REDUCE};
    shardnet_status st;
    sn_dtype t = SN_DT_FLOAT;

    if (x->rank < 2)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "input must be (N, C, ...), not of rank %d",
                             x->rank);
    if ((st = op == SN_REDUCE_MEAN ? sn_float_type(n, x, &t)
                                   : sn_device_type(n, x->dtype, &t)))
        return st;
    for (int i = 0; i < x->rank; i++)
        od[i] = i < 2 ? x->dims[i] : 1;
    if ((st = sn_out_device(L, n, 0, x->rank, od, &out)) != SHARDNET_OK)
        return st;
    out->dtype = t;
    s.u.reduce = (sn_reduce_desc){.op = op,
                                  .outer = sn_dims_product(0, 2, x->dims),
                                  .len = sn_dims_product(2, x->rank, x->dims),
                                  .inner = 1, .y = out->view};
    if (s.u.reduce.outer == 0)
        return SHARDNET_OK;
    if (s.u.reduce.len == 0)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "pooling over empty spatial axes");
    if ((st = sn_dev_view(L, n, x, &s.u.reduce.x)) != SHARDNET_OK)
        return st;
    return sn_emit(L, n, &s);
}

SN_LOWER(sn_lower_global_avgpool)
{
    return lower_global_pool(L, n, SN_REDUCE_MEAN);
}

SN_LOWER(sn_lower_global_maxpool)
{
    return lower_global_pool(L, n, SN_REDUCE_MAX);
}
