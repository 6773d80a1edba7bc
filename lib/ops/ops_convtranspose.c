/*
 * ConvTranspose (opsets 1 and 11), 1-D to 3-D, with groups, strides,
 * dilations, pads, auto_pad, output_padding and output_shape.
 *
 * A transposed convolution is a plain one (stride 1, the same dilation)
 * of the kernel flipped in space, with input and output channels swapped,
 * over the input spread out by the strides into a zero-filled buffer P
 * whose borders make the result exactly the output:
 *
 *   y[o] = sum_j,q x[j] w[q] over j s + q d - pad_begin = o
 *        = sum_q' P[o + q' d] w[k - 1 - q'],
 *   P[j s + (k - 1) d - pad_begin] = x[j]
 *
 * All steps are copies and one GEMM per group: P zero-filled and x copied
 * into it (strided), the kernel flipped and regrouped, the columns of
 * the convolution (N, C_in, K, O) gathered by one copy per kernel
 * position, then out[n, g] = w'[g] (C_out/g, C_in/g K) x cols[n, g]
 * (C_in/g K, O) for every image n at once, the bias fused.
 *
 * Where the windows do not overlap (stride = kernel, no dilation, pads or
 * output padding: the 2 x 2, stride 2 upsampling of segmentation heads)
 * every output takes one product of each input channel: one GEMM per
 * group, Z[n] ((C_out/g) K, J) = w[g]^T x[n, g] over the input positions
 * J, then one copy per image that puts z[o, q, j] at y[o, j k + q], and
 * the bias as a broadcast ADD (see emit_tiles()): no zero-filled buffer
 * and no columns, K times fewer multiplies.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* Attribute values above this are refused: keeps the arithmetic in int64
 * far from overflow. */
#define MAX_WINDOW ((int64_t)1 << 30)

/* Highest number of spatial axes: the kernel's regrouping copy has rank
 * 3 + nd. */
#define MAX_SPATIAL (SN_MAX_DIMS - 3)

typedef struct tgeom {
    int nd;
    int64_t in[MAX_SPATIAL], k[MAX_SPATIAL], s[MAX_SPATIAL], d[MAX_SPATIAL];
    int64_t pb[MAX_SPATIAL], out[MAX_SPATIAL];
    int64_t p[MAX_SPATIAL]; /* P's size: out + (k - 1) d */
} tgeom;

/* An INTS attribute of nd values (or absent: dflt), each within
 * [lo, MAX_WINDOW]. */
static shardnet_status attr_axes(const sn_node *n, const char *name, int nd,
                                 size_t want, int64_t lo, int64_t dflt,
                                 int64_t *out, int *given)
{
    size_t c;
    shardnet_status st = sn_attr_ints(n, name, out, 2 * MAX_SPATIAL, &c,
                                      given);
    if (st != SHARDNET_OK)
        return st;
    if (!c) {
        for (size_t i = 0; i < want * (size_t)nd; i++)
            out[i] = dflt;
        return SHARDNET_OK;
    }
    if (c != want * (size_t)nd)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "%s has %zu values for %d spatial axes", name, c,
                             nd);
    for (size_t i = 0; i < c; i++)
        if (out[i] < lo || out[i] > MAX_WINDOW)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "%s value %lld out of range", name,
                                 (long long)out[i]);
    return SHARDNET_OK;
}

/* The output size and begin pads from the attributes. */
static shardnet_status geometry(const sn_node *n, const sn_rt *x,
                                const sn_rt *w, tgeom *g)
{
    int64_t ks[MAX_SPATIAL], pads[2 * MAX_SPATIAL], op[MAX_SPATIAL];
    int64_t os[MAX_SPATIAL + 2];
    const char *ap = sn_attr_string(n, "auto_pad", "NOTSET");
    int nd = g->nd, kgiven, osgiven, same, upper;
    size_t c;
    shardnet_status st;

    same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
    upper = !strcmp(ap, "SAME_UPPER");
    if (!same && *ap && strcmp(ap, "NOTSET") && strcmp(ap, "VALID"))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "unknown auto_pad '%s'", ap);
    if ((st = attr_axes(n, "kernel_shape", nd, 1, 1, 1, ks, &kgiven)) ||
        (st = attr_axes(n, "strides", nd, 1, 1, 1, g->s, NULL)) ||
        (st = attr_axes(n, "dilations", nd, 1, 1, 1, g->d, NULL)) ||
        (st = attr_axes(n, "pads", nd, 2, 0, 0, pads, NULL)) ||
        (st = attr_axes(n, "output_padding", nd, 1, 0, 0, op, NULL)) ||
        (st = sn_attr_ints(n, "output_shape", os, MAX_SPATIAL + 2, &c,
                           &osgiven)))
        return st;
    if (osgiven && c != (size_t)nd && c != (size_t)nd + 2)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "output_shape has %zu values for %d spatial "
                             "axes",
                             c, nd);
    if (!strcmp(ap, "VALID"))
        memset(pads, 0, sizeof pads);
    for (int i = 0; i < nd; i++) {
        int64_t natural, total, half;
        g->in[i] = x->dims[2 + i];
        g->k[i] = w->dims[2 + i];
        if ((kgiven && ks[i] != g->k[i]) || g->k[i] < 1 ||
            g->k[i] > MAX_WINDOW || g->in[i] > MAX_WINDOW)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "kernel size %lld (kernel_shape %lld) out "
                                 "of range or not the weights'",
                                 (long long)g->k[i],
                                 (long long)(kgiven ? ks[i] : g->k[i]));
        natural = g->s[i] * (g->in[i] - 1) + op[i] +
                  (g->k[i] - 1) * g->d[i] + 1;
        if (osgiven || same) {
            int64_t o = osgiven ? os[c - (size_t)nd + (size_t)i]
                                : g->in[i] * g->s[i];
            if (o < 0 || o > MAX_WINDOW)
                return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                     "output size %lld out of range",
                                     (long long)o);
            /* half of the total padding, rounded down, begins the
             * axis with SAME_UPPER, ends it otherwise */
            total = natural - o;
            half = total >= 0 ? total / 2 : -((1 - total) / 2);
            g->pb[i] = upper ? half : total - half;
            g->out[i] = o;
        } else {
            g->pb[i] = pads[i];
            g->out[i] = natural - pads[i] - pads[i + nd];
        }
        if (g->out[i] < 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "the pads leave no output along axis %d",
                                 i + 2);
        g->p[i] = g->out[i] + (g->k[i] - 1) * g->d[i];
    }
    return SHARDNET_OK;
}

/* *out = a * b, refused past SN_MAX_ELEMENTS. */
static int mul_ok(size_t a, size_t b, size_t *out)
{
    return !__builtin_mul_overflow(a, b, out) &&
           *out <= (size_t)SN_MAX_ELEMENTS;
}

/* P (n, c, p...) zero-filled, then x (n, c, in...) spread into it. */
static shardnet_status emit_spread(sn_lower *L, const sn_node *n,
                                   const tgeom *g, size_t nc, size_t pvol,
                                   sn_view vx, sn_view vp)
{
    sn_step s = {.kind = SN_KERNEL_COPY};
    int64_t xs[SN_MAX_DIMS], ps[SN_MAX_DIMS], xd[SN_MAX_DIMS];
    int64_t pd[SN_MAX_DIMS];
    size_t xoff = 0, poff = 0;
    float *zero = malloc(sizeof *zero);
    sn_view vz;
    shardnet_status st;
    if (!zero)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "transposed convolution");
    *zero = 0.0f;
    if ((st = sn_dev_upload(L, n, zero, 1, &vz)) != SHARDNET_OK)
        return st;
    s.u.copy = (sn_copy_desc){.rank = 1, .shape = {nc * pvol},
                              .src_stride = {0}, .dst_stride = {1},
                              .src = vz, .dst = vp};
    if ((st = sn_emit(L, n, &s)) != SHARDNET_OK)
        return st;
    xd[0] = pd[0] = (int64_t)nc;
    for (int i = 0; i < g->nd; i++) {
        xd[1 + i] = g->in[i];
        pd[1 + i] = g->p[i];
    }
    sn_strides(1 + g->nd, xd, xs);
    sn_strides(1 + g->nd, pd, ps);
    s.u.copy = (sn_copy_desc){.rank = (size_t)(1 + g->nd), .shape = {nc},
                              .src_stride = {(ptrdiff_t)xs[0]},
                              .dst_stride = {(ptrdiff_t)ps[0]}};
    for (int i = 0; i < g->nd; i++) {
        /* the samples j whose place j s + (k - 1) d - pb is inside P */
        int64_t base = (g->k[i] - 1) * g->d[i] - g->pb[i], lo = 0, hi;
        if (base < 0)
            lo = (-base + g->s[i] - 1) / g->s[i];
        hi = g->p[i] - 1 - base < 0 ? -1 : (g->p[i] - 1 - base) / g->s[i];
        if (hi > g->in[i] - 1)
            hi = g->in[i] - 1;
        if (hi < lo)
            return SHARDNET_OK; /* nothing lands inside: P stays zeros */
        s.u.copy.shape[1 + i] = (size_t)(hi - lo + 1);
        s.u.copy.src_stride[1 + i] = (ptrdiff_t)xs[1 + i];
        s.u.copy.dst_stride[1 + i] = (ptrdiff_t)(ps[1 + i] * g->s[i]);
        xoff += (size_t)(lo * xs[1 + i]);
        poff += (size_t)((lo * g->s[i] + base) * ps[1 + i]);
    }
    s.u.copy.src = (sn_view){vx.buf, vx.offset + xoff};
    s.u.copy.dst = (sn_view){vp.buf, vp.offset + poff};
    return sn_emit(L, n, &s);
}

/* w' (g, cog, cig, k...) = w (g cig, cog, k...) flipped in space. */
static shardnet_status emit_flip(sn_lower *L, const sn_node *n,
                                 const tgeom *g, const sn_rt *w,
                                 int64_t groups, sn_view vw, sn_view vf)
{
    sn_step s = {.kind = SN_KERNEL_COPY};
    int64_t ws[SN_MAX_DIMS], fd[SN_MAX_DIMS], fs[SN_MAX_DIMS];
    int64_t cig = w->dims[0] / groups, cog = w->dims[1];
    size_t off = 0;
    int r = 3 + g->nd;
    sn_strides(w->rank, w->dims, ws);
    fd[0] = groups;
    fd[1] = cog;
    fd[2] = cig;
    for (int i = 0; i < g->nd; i++)
        fd[3 + i] = g->k[i];
    sn_strides(r, fd, fs);
    s.u.copy.rank = (size_t)r;
    s.u.copy.src_stride[0] = (ptrdiff_t)(cig * ws[0]);
    s.u.copy.src_stride[1] = (ptrdiff_t)ws[1];
    s.u.copy.src_stride[2] = (ptrdiff_t)ws[0];
    for (int i = 0; i < g->nd; i++) {
        s.u.copy.src_stride[3 + i] = -(ptrdiff_t)ws[2 + i];
        off += (size_t)((g->k[i] - 1) * ws[2 + i]);
    }
    for (int i = 0; i < r; i++) {
        s.u.copy.shape[i] = (size_t)fd[i];
        s.u.copy.dst_stride[i] = (ptrdiff_t)fs[i];
    }
    s.u.copy.src = (sn_view){vw.buf, vw.offset + off};
    s.u.copy.dst = vf;
    return sn_emit(L, n, &s);
}

/* cols (nc, K, O): row (c, q) of image-channel c holds P[c, o + q d]. */
static shardnet_status emit_columns(sn_lower *L, const sn_node *n,
                                    const tgeom *g, size_t nc, size_t kvol,
                                    size_t ovol, sn_view vp, sn_view vc)
{
    sn_step s = {.kind = SN_KERNEL_COPY};
    int64_t pd[SN_MAX_DIMS], ps[SN_MAX_DIMS], os[SN_MAX_DIMS];
    int64_t q[MAX_SPATIAL] = {0};
    shardnet_status st;
    pd[0] = (int64_t)nc;
    for (int i = 0; i < g->nd; i++)
        pd[1 + i] = g->p[i];
    sn_strides(1 + g->nd, pd, ps);
    sn_strides(g->nd, g->out, os);
    s.u.copy.rank = (size_t)(1 + g->nd);
    s.u.copy.shape[0] = nc;
    s.u.copy.src_stride[0] = (ptrdiff_t)ps[0];
    s.u.copy.dst_stride[0] = (ptrdiff_t)(kvol * ovol);
    for (int i = 0; i < g->nd; i++) {
        s.u.copy.shape[1 + i] = (size_t)g->out[i];
        s.u.copy.src_stride[1 + i] = (ptrdiff_t)ps[1 + i];
        s.u.copy.dst_stride[1 + i] = (ptrdiff_t)os[i];
    }
    for (size_t kk = 0; kk < kvol; kk++) {
        size_t off = 0;
        for (int i = 0; i < g->nd; i++)
            off += (size_t)(q[i] * g->d[i] * ps[1 + i]);
        s.u.copy.src = (sn_view){vp.buf, vp.offset + off};
        s.u.copy.dst = (sn_view){vc.buf, vc.offset + kk * ovol};
        if ((st = sn_emit(L, n, &s)) != SHARDNET_OK)
            return st;
        for (int i = g->nd - 1; i >= 0; i--) { /* next kernel position */
            if (++q[i] < g->k[i])
                break;
            q[i] = 0;
        }
    }
    return SHARDNET_OK;
}

/* Stride = kernel, no dilation, no pads or output padding: windows that
 * tile the output. */
static int tiles_output(const tgeom *g)
{
    for (int i = 0; i < g->nd; i++)
        if (g->s[i] != g->k[i] || (g->k[i] > 1 && g->d[i] != 1) ||
            g->pb[i] != 0 || g->out[i] != g->in[i] * g->k[i])
            return 0;
    return 1;
}

/*
 * tiles_output()'s transposed convolution: per group gi, Z[n, gi] (cog K,
 * J) = w[gi]^T (stored (cig, cog K)) x[n, gi] (cig, J), all images in one
 * batched GEMM; then per image the copy y[n, o, j1 k1 + q1, ...] = Z[n, o,
 * q, j] (rank 1 + 2 nd: o, then j_i and q_i for each axis), then the bias.
 * Each output is one product sum in channel order, as the general path's
 * (its other terms multiply zeros).
 */
static shardnet_status emit_tiles(sn_lower *L, const sn_node *n,
                                  const tgeom *g, const sn_rt *x,
                                  const sn_rt *b, int64_t groups, size_t cog,
                                  size_t kvol, sn_view vx, sn_view vw,
                                  sn_view vb, const sn_rt *out)
{
    const size_t nn = (size_t)x->dims[0], cin = (size_t)x->dims[1];
    const size_t cig = cin / (size_t)groups, cout = cog * (size_t)groups;
    size_t jvol = 1, zsz;
    int64_t zs_q[MAX_SPATIAL], zs_j[MAX_SPATIAL], ys[SN_MAX_DIMS];
    sn_view vz;
    shardnet_status st;

    for (int i = 0; i < g->nd; i++)
        jvol *= (size_t)g->in[i];
    if (!mul_ok(nn * cout * kvol, jvol, &zsz))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the products are too large");
    if ((st = sn_scratch(L, zsz, &vz)) != SHARDNET_OK)
        return st;
    for (size_t gi = 0; gi < (size_t)groups; gi++) {
        sn_step s = {.kind = SN_KERNEL_GEMM};
        s.u.gemm = (sn_gemm_desc){
            .trans_a = 1, .m = cog * kvol, .n = jvol, .k = cig,
            .alpha = 1.0f,
            .a = {vw.buf, vw.offset + gi * cig * cog * kvol},
            .b = {vx.buf, vx.offset + gi * cig * jvol},
            .c = {vz.buf, vz.offset + gi * cog * kvol * jvol},
            .lda = cog * kvol, .ldb = jvol, .ldc = jvol, .batch = nn,
            .stride_a = 0, .stride_b = cin * jvol,
            .stride_c = cout * kvol * jvol};
        if ((st = sn_emit(L, n, &s)) != SHARDNET_OK)
            return st;
    }
    /* Strides of q_i (within K, times J) and j_i (within J) in Z. */
    for (int i = g->nd - 1, qs = 1, js = 1; i >= 0; i--) {
        zs_q[i] = (int64_t)qs * (int64_t)jvol;
        zs_j[i] = js;
        qs *= (int)g->k[i];
        js *= (int)g->in[i];
    }
    sn_strides(out->rank - 1, out->dims + 1, ys);
    for (size_t im = 0; im < nn; im++) {
        sn_step s = {.kind = SN_KERNEL_COPY};
        s.u.copy.rank = (size_t)(1 + 2 * g->nd);
        s.u.copy.shape[0] = cout;
        s.u.copy.src_stride[0] = (ptrdiff_t)(kvol * jvol);
        s.u.copy.dst_stride[0] = (ptrdiff_t)ys[0];
        for (int i = 0; i < g->nd; i++) {
            s.u.copy.shape[1 + 2 * i] = (size_t)g->in[i];
            s.u.copy.src_stride[1 + 2 * i] = (ptrdiff_t)zs_j[i];
            s.u.copy.dst_stride[1 + 2 * i] = (ptrdiff_t)(ys[1 + i] * g->k[i]);
            s.u.copy.shape[2 + 2 * i] = (size_t)g->k[i];
            s.u.copy.src_stride[2 + 2 * i] = (ptrdiff_t)zs_q[i];
            s.u.copy.dst_stride[2 + 2 * i] = (ptrdiff_t)ys[1 + i];
        }
        s.u.copy.src = (sn_view){vz.buf, vz.offset + im * cout * kvol * jvol};
        s.u.copy.dst = (sn_view){out->view.buf,
                                 out->view.offset + im * cout * kvol * jvol};
        if ((st = sn_emit(L, n, &s)) != SHARDNET_OK)
            return st;
    }
    if (!b)
        return SHARDNET_OK;
    int64_t bd[SN_MAX_DIMS];
    bd[0] = (int64_t)cout;
    for (int i = 1; i < out->rank - 1; i++)
        bd[i] = 1;
    return sn_emit_binary(L, n, SN_BINARY_ADD, out->rank, out->dims,
                          out->view, out->rank - 1, bd, vb, out->view);
}

/* Checks of the inputs' shapes; the group count. */
static shardnet_status check_inputs(const sn_node *n, const sn_rt *x,
                                    const sn_rt *w, const sn_rt *b,
                                    int64_t *groups)
{
    int64_t gr = sn_attr_int(n, "group", 1);
    if (x->rank < 3 || x->rank > 2 + MAX_SPATIAL || w->rank != x->rank)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "input (rank %d) and weights (rank %d) must be "
                             "(N, C, D1, ...) and (C, M / group, k1, ...) "
                             "with 1 to %d spatial axes",
                             x->rank, w->rank, MAX_SPATIAL);
    if (gr < 1 || gr > MAX_WINDOW || x->dims[1] != w->dims[0] ||
        w->dims[0] % gr || x->dims[1] == 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "%lld input channels, weights for %lld, "
                             "%lld groups",
                             (long long)x->dims[1], (long long)w->dims[0],
                             (long long)gr);
    if (b && (b->rank != 1 || b->dims[0] != w->dims[1] * gr))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the bias must have %lld values (one per "
                             "output channel)",
                             (long long)(w->dims[1] * gr));
    *groups = gr;
    return SHARDNET_OK;
}

SN_LOWER(sn_lower_convtranspose)
{
    sn_rt *x = sn_in(L, n, 0), *w = sn_in(L, n, 1), *b = sn_in(L, n, 2);
    sn_rt *out;
    int64_t groups = 1, od[SN_MAX_DIMS];
    size_t nn, cin, cog, cig, pvol = 1, kvol = 1, ovol = 1, sz;
    tgeom g = {.nd = x->rank - 2};
    sn_view vx, vw, vb = {0}, vp, vf, vc;
    sn_dtype t;
    shardnet_status st;

    if ((st = sn_float_type(n, x, &t)) ||
        (st = check_inputs(n, x, w, b, &groups)) ||
        (st = geometry(n, x, w, &g)))
        return st;
    nn = (size_t)x->dims[0];
    cin = (size_t)x->dims[1];
    cog = (size_t)w->dims[1];
    cig = cin / (size_t)groups;
    od[0] = (int64_t)nn;
    od[1] = (int64_t)cog * groups;
    for (int i = 0; i < g.nd; i++) {
        od[2 + i] = g.out[i];
        if (!mul_ok(pvol, (size_t)g.p[i], &pvol) ||
            !mul_ok(kvol, (size_t)g.k[i], &kvol) ||
            !mul_ok(ovol, (size_t)g.out[i], &ovol))
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "the output or its padded input is too "
                                 "large");
    }
    if (!mul_ok(nn * cin, pvol, &sz) || !mul_ok(nn * cin * kvol, ovol, &sz))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the columns of the convolution are too large");
    if (!L->plan)
        return SHARDNET_UNSUPPORTED; /* not foldable */
    if ((st = sn_out_device(L, n, 0, x->rank, od, &out)) != SHARDNET_OK)
        return st;
    out->dtype = t;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    if ((st = sn_dev_view(L, n, x, &vx)) || (st = sn_dev_view(L, n, w, &vw)) ||
        (b && (st = sn_dev_view(L, n, b, &vb))))
        return st;
    if (tiles_output(&g))
        return emit_tiles(L, n, &g, x, b, groups, cog, kvol, vx, vw, vb, out);
    if ((st = sn_scratch(L, nn * cin * pvol, &vp)) ||
        (st = sn_scratch(L, sn_rt_elements(w), &vf)) ||
        (st = sn_scratch(L, sz, &vc)) ||
        (st = emit_spread(L, n, &g, nn * cin, pvol, vx, vp)) ||
        (st = emit_flip(L, n, &g, w, groups, vw, vf)) ||
        (st = emit_columns(L, n, &g, nn * cin, kvol, ovol, vp, vc)))
        return st;
    for (size_t gi = 0; gi < (size_t)groups; gi++) {
        sn_step s = {.kind = SN_KERNEL_GEMM};
        size_t kk = cig * kvol;
        s.u.gemm = (sn_gemm_desc){
            .m = cog, .n = ovol, .k = kk, .alpha = 1.0f,
            .a = {vf.buf, vf.offset + gi * cog * kk},
            .b = {vc.buf, vc.offset + gi * kk * ovol},
            .c = {out->view.buf, out->view.offset + gi * cog * ovol},
            .lda = kk, .ldb = ovol, .ldc = ovol, .batch = nn,
            .stride_a = 0, .stride_b = cin * kvol * ovol,
            .stride_c = (size_t)groups * cog * ovol};
        if (b) {
            s.u.gemm.bias = (sn_view){vb.buf, vb.offset + gi * cog};
            s.u.gemm.bias_rows = 1;
        }
        if ((st = sn_emit(L, n, &s)) != SHARDNET_OK)
            return st;
    }
    return SHARDNET_OK;
}
