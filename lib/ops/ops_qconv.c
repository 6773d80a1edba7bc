/*
 * ConvInteger and QLinearConv (opset 10), 1-D to 3-D, with groups,
 * strides, dilations, pads and auto_pad: exact int64 sums of (x - x_zero
 * point)(w - w_zero_point) over each window (padding adds nothing), on the
 * host, when the input and weights are known when the plan is built.
 * ConvInteger gives the int32 sums; QLinearConv adds its int32 bias,
 * scales by x_scale w_scale / y_scale (w_scale one or one per output
 * channel), rounds half to even, adds y_zero_point and saturates.  An
 * input computed on the device is summed there (device_sums) in runs that
 * keep every partial sum exact in float; ConvInteger's int32 results are
 * refused where the whole sums could pass 2^24, unless only their floats
 * are read (float_sums: passes/integer_sums.c).
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

#define MAX_WINDOW ((int64_t)1 << 30)

/* The window's geometry, every axis padded to 3 (an absent one: size 1). */
typedef struct qgeom {
    int nd;
    int64_t in[3], k[3], s[3], d[3], pb[3], out[3];
} qgeom;

static shardnet_status ints_attr(const sn_node *n, const char *name, int nd,
                                 size_t want, int64_t lo, int64_t dflt,
                                 int64_t *v)
{
    size_t c;
    shardnet_status st = sn_attr_ints(n, name, v, 6, &c, NULL);
    if (st != SHARDNET_OK)
        return st;
    if (c && c != want * (size_t)nd)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "%s has %zu values for %d spatial axes", name, c,
                             nd);
    for (size_t i = 0; i < want * (size_t)nd; i++) {
        if (!c)
            v[i] = dflt;
        else if (v[i] < lo || v[i] > MAX_WINDOW)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "%s value %lld out of range", name,
                                 (long long)v[i]);
    }
    return SHARDNET_OK;
}

static shardnet_status geometry(const sn_node *n, const sn_rt *x,
                                const sn_rt *w, qgeom *g)
{
    const char *ap = sn_attr_string(n, "auto_pad", "NOTSET");
    int64_t pads[6], ks[3];
    int nd = x->rank - 2, same = !strncmp(ap, "SAME_", 5);
    size_t c;
    shardnet_status st;
    if (nd < 1 || nd > 3 || w->rank != x->rank)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "input (rank %d) and weights (rank %d) must be "
                             "(N, C, D1, ...) and (M, C / group, k1, ...) "
                             "with 1 to 3 spatial axes",
                             x->rank, w->rank);
    g->nd = nd;
    if ((st = ints_attr(n, "strides", nd, 1, 1, 1, g->s)) ||
        (st = ints_attr(n, "dilations", nd, 1, 1, 1, g->d)) ||
        (st = ints_attr(n, "pads", nd, 2, 0, 0, pads)) ||
        (st = sn_attr_ints(n, "kernel_shape", ks, 3, &c, NULL)))
        return st;
    if (!same && *ap && strcmp(ap, "NOTSET") && strcmp(ap, "VALID"))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "unknown auto_pad '%s'", ap);
    for (int i = 0; i < 3; i++) {
        int64_t eff, pe;
        if (i >= nd) {
            g->in[i] = g->k[i] = g->s[i] = g->d[i] = g->out[i] = 1;
            g->pb[i] = 0;
            continue;
        }
        g->in[i] = x->dims[2 + i];
        g->k[i] = w->dims[2 + i];
        if (g->k[i] < 1 || g->k[i] > MAX_WINDOW ||
            (c && ks[i] != g->k[i]))
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "kernel size %lld out of range or not the "
                                 "weights'",
                                 (long long)g->k[i]);
        eff = (g->k[i] - 1) * g->d[i] + 1;
        g->pb[i] = pads[i];
        pe = pads[i + nd];
        if (!strcmp(ap, "VALID"))
            g->pb[i] = pe = 0;
        if (same) {
            int64_t o = (g->in[i] + g->s[i] - 1) / g->s[i];
            int64_t total = (o - 1) * g->s[i] + eff - g->in[i];
            total = total < 0 ? 0 : total;
            g->pb[i] = ap[5] == 'L' ? total - total / 2 : total / 2;
            pe = total - g->pb[i];
        }
        if (g->in[i] + g->pb[i] + pe < eff)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "the window is larger than the padded "
                                 "input");
        g->out[i] = (g->in[i] + g->pb[i] + pe - eff) / g->s[i] + 1;
    }
    return SHARDNET_OK;
}

/* The sums (N, M, out...) in int64. */
static int64_t *conv_sums(const sn_rt *x, const sn_rt *xzp, const sn_rt *w,
                          const sn_rt *wzp, const qgeom *g, size_t groups)
{
    size_t nn = (size_t)x->dims[0], cin = (size_t)x->dims[1];
    size_t m = (size_t)w->dims[0], cig = cin / groups, mog = m / groups;
    size_t ovol = (size_t)(g->out[0] * g->out[1] * g->out[2]);
    size_t ivol = (size_t)(g->in[0] * g->in[1] * g->in[2]);
    size_t kvol = (size_t)(g->k[0] * g->k[1] * g->k[2]);
    int64_t *s = sn_host_alloc(nn * m * ovol, sizeof *s);
    int64_t xz = (int64_t)sn_quant_param(xzp, 0, 0);
    if (!s)
        return NULL;
    for (size_t b = 0; b < nn; b++)
        for (size_t oc = 0; oc < m; oc++) {
            size_t gi = oc / mog;
            int64_t wz = (int64_t)sn_quant_param(wzp, oc, 0);
            for (size_t o = 0; o < ovol; o++) {
                int64_t oz = (int64_t)(o / (size_t)(g->out[1] * g->out[2]));
                int64_t oy = (int64_t)(o / (size_t)g->out[2]) % g->out[1];
                int64_t ox = (int64_t)o % g->out[2], acc = 0;
                for (size_t c = 0; c < cig; c++)
                    for (size_t q = 0; q < kvol; q++) {
                        int64_t kz = (int64_t)(q / (size_t)(g->k[1] * g->k[2]));
                        int64_t ky = (int64_t)(q / (size_t)g->k[2]) % g->k[1];
                        int64_t kx = (int64_t)q % g->k[2];
                        int64_t iz = oz * g->s[0] + kz * g->d[0] - g->pb[0];
                        int64_t iy = oy * g->s[1] + ky * g->d[1] - g->pb[1];
                        int64_t ix = ox * g->s[2] + kx * g->d[2] - g->pb[2];
                        size_t xi, wi;
                        if (iz < 0 || iz >= g->in[0] || iy < 0 ||
                            iy >= g->in[1] || ix < 0 || ix >= g->in[2])
                            continue;
                        xi = (b * cin + gi * cig + c) * ivol +
                             (size_t)((iz * g->in[1] + iy) * g->in[2] + ix);
                        wi = (oc * cig + c) * kvol + q;
                        acc += (sn_rt_get_int(x, xi) - xz) *
                               (sn_rt_get_int(w, wi) - wz);
                    }
                s[(b * m + oc) * ovol + o] = acc;
            }
        }
    return s;
}

/* Shapes, group and geometry of either operator; od the output's. */
static shardnet_status prepare(const sn_node *n, const sn_rt *x,
                               const sn_rt *w, qgeom *g, size_t *groups,
                               int64_t *od)
{
    int64_t gr = sn_attr_int(n, "group", 1);
    shardnet_status st = geometry(n, x, w, g);
    if (st != SHARDNET_OK)
        return st;
    if (gr < 1 || gr > MAX_WINDOW || x->dims[1] % gr || w->dims[0] % gr ||
        w->dims[1] * gr != x->dims[1])
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "%lld input channels, weights (%lld, %lld, ...) "
                             "and %lld groups do not fit",
                             (long long)x->dims[1], (long long)w->dims[0],
                             (long long)w->dims[1], (long long)gr);
    for (int i = 0; i < 2; i++) {
        sn_dtype t = (i ? w : x)->dtype;
        if (t != SN_DT_UINT8 && t != SN_DT_INT8)
            return sn_node_error(n, SHARDNET_UNSUPPORTED,
                                 "%s of type %s (uint8 or int8)",
                                 i ? "weights" : "an input",
                                 sn_dtype_name(t));
    }
    *groups = (size_t)gr;
    od[0] = x->dims[0];
    od[1] = w->dims[0];
    for (int i = 0; i < g->nd; i++)
        od[2 + i] = g->out[i];
    return SHARDNET_OK;
}

/*
 * Either operator on the device, its input computed there (a QOperator
 * model's activations): the input less its zero point on the device, the
 * weights less theirs on the host (they must be known: a model's
 * weights), then im2col and GEMMs whose runs of the reduced axis keep
 * every partial sum below 2^24, so exact in float (sn_conv_int_sums).
 * exact_total: the whole sums must stay below it too (ConvInteger's int32
 * results, carried as float); else the sums are refused.
 */
static shardnet_status device_sums(sn_lower *L, const sn_node *n, sn_rt *x,
                                   sn_rt *xzp, sn_rt *w, sn_rt *wzp,
                                   int exact_total, sn_view sums)
{
    size_t m = (size_t)w->dims[0], count = sn_rt_elements(w),
           per = m ? count / m : 0;
    double wmax = 0;
    sn_view vx, vw;
    shardnet_status st;
    if (!sn_host_known(w))
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "weights computed on the device: they must be "
                             "known when the model is planned");
    float *wf = malloc((count ? count : 1) * sizeof *wf);
    if (!wf)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "integer convolution");
    for (size_t i = 0; i < count; i++) {
        double v = (double)sn_rt_get_int(w, i) -
                   sn_quant_param(wzp, i / per, 0);
        wf[i] = (float)v;
        wmax = fabs(v) > wmax ? fabs(v) : wmax;
    }
    double per_k = sn_quant_max_offset(x, xzp) * wmax;
    size_t run = per_k > 0 && (double)per * per_k > SN_FLOAT_EXACT
                     ? (size_t)(SN_FLOAT_EXACT / per_k)
                     : 0;
    if (exact_total && run) {
        free(wf);
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "sums of up to %.0f (%zu products) computed on "
                             "the device would not be exact in float (at "
                             "most 2^24); the input must be known when the "
                             "model is planned",
                             (double)per * per_k, per);
    }
    if ((st = sn_dev_upload(L, n, wf, count, &vw)) ||
        (st = sn_quant_offset_device(L, n, x, xzp, 0, NULL, &vx)))
        return st;
    return sn_conv_int_sums(L, n, x, w, vx, vw, run, sums);
}

/* ConvInteger: the int32 sums; with float_sums (the integer_sums pass:
 * the Cast to float after it taken over) their floats, which on the
 * device may pass 2^24 (device_sums in runs).  x_zero_point may be
 * computed on the device (DynamicQuantizeLinear's). */
SN_LOWER(sn_lower_conv_integer)
{
    sn_rt *x = sn_in(L, n, 0), *w = sn_in(L, n, 1);
    sn_rt *xzp = sn_in(L, n, 2), *wzp = sn_in(L, n, 3);
    int as_float = sn_attr_int(n, "float_sums", 0) != 0;
    sn_dtype t = as_float ? SN_DT_FLOAT : SN_DT_INT32;
    int64_t od[5], *s;
    size_t groups, total;
    qgeom g;
    shardnet_status st;
    if ((st = prepare(n, x, w, &g, &groups, od)) ||
        (st = sn_quant_count(n, xzp, "x_zero_point", 1)) ||
        (st = sn_quant_host_param(n, wzp, "w_zero_point", (size_t)w->dims[0])))
        return st;
    if (!sn_host_known(x) || !sn_host_known(w) ||
        (xzp && !sn_host_known(xzp))) {
        sn_rt *out;
        if (!L->plan)
            return SHARDNET_UNSUPPORTED;
        if ((st = sn_out_device_as(L, n, t, x->rank, od, &out)))
            return st;
        return sn_rt_elements(out) ? device_sums(L, n, x, xzp, w, wzp,
                                                 !as_float, out->view)
                                   : SHARDNET_OK;
    }
    if (!(s = conv_sums(x, xzp, w, wzp, &g, groups)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "integer convolution");
    total = sn_dims_product(0, x->rank, od);
    return sn_out_host(L, n, 0, t, x->rank, od,
                       sn_narrow_sums(s, total, as_float));
}

/* QLinearConv on the device: the exact sums (device_sums), plus the int32
 * bias, times x_scale w_scale / y_scale per output channel in float32 (as
 * the host path and ONNX Runtime), rounded half to even, y_zero_point,
 * saturated (sn_requantize_device). */
static shardnet_status qlinear_conv_device(sn_lower *L, const sn_node *n,
                                           sn_rt *const in[9], sn_dtype t,
                                           double lo, double hi,
                                           const int64_t *od)
{
    sn_rt *x = in[0], *xs = in[1], *xzp = in[2], *w = in[3], *ws = in[4],
          *wzp = in[5], *ys = in[6], *yzp = in[7], *b = in[8], *out;
    size_t m = (size_t)w->dims[0];
    int64_t o3[3] = {od[0], od[1], (int64_t)sn_dims_product(2, x->rank, od)},
            m2[2] = {(int64_t)m, 1};
    sn_view sums;
    shardnet_status st;
    if (!L->plan)
        return SHARDNET_UNSUPPORTED;
    if ((st = sn_out_device_as(L, n, t, x->rank, od, &out)))
        return st;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    if ((st = sn_scratch(L, sn_rt_elements(out), &sums)) ||
        (st = device_sums(L, n, x, xzp, w, wzp, 0, sums)))
        return st;
    if (b && sn_rt_elements(b)) {
        sn_view vb;
        float *bf = malloc(m * sizeof *bf);
        if (!bf)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "QLinearConv bias");
        for (size_t c = 0; c < m; c++)
            bf[c] = (float)sn_quant_param(b, c, 0);
        if ((st = sn_dev_upload(L, n, bf, m, &vb)) ||
            (st = sn_emit_binary(L, n, SN_BINARY_ADD, 3, o3, sums, 2, m2, vb,
                                 sums)))
            return st;
    }
    float *mul = malloc(m * sizeof *mul);
    if (!mul)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "QLinearConv multipliers");
    for (size_t c = 0; c < m; c++)
        mul[c] = (float)sn_quant_param(xs, 0, 1) *
                 (float)sn_quant_param(ws, c, 1) /
                 (float)sn_quant_param(ys, 0, 1);
    return sn_requantize_device(L, n, 3, o3, sums, 2, m2, mul, lo, hi,
                                sn_quant_param(yzp, 0, 0), out->view);
}

SN_LOWER(sn_lower_qlinear_conv)
{
    sn_rt *x = sn_in(L, n, 0), *xs = sn_in(L, n, 1), *xzp = sn_in(L, n, 2);
    sn_rt *w = sn_in(L, n, 3), *ws = sn_in(L, n, 4), *wzp = sn_in(L, n, 5);
    sn_rt *ys = sn_in(L, n, 6), *yzp = sn_in(L, n, 7), *b = sn_in(L, n, 8);
    sn_dtype t = yzp ? yzp->dtype : SN_DT_UINT8;
    int64_t od[5], *s;
    size_t groups, total, ovol, m;
    double lo = t == SN_DT_INT8 ? -128 : 0, hi = t == SN_DT_INT8 ? 127 : 255;
    void *y;
    qgeom g;
    shardnet_status st;
    if (t != SN_DT_UINT8 && t != SN_DT_INT8)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "y of type %s (uint8 or int8)",
                             sn_dtype_name(t));
    if ((st = prepare(n, x, w, &g, &groups, od)))
        return st;
    m = (size_t)w->dims[0];
    if ((st = sn_quant_host_param(n, xs, "x_scale", 1)) ||
        (st = sn_quant_host_param(n, xzp, "x_zero_point", 1)) ||
        (st = sn_quant_host_param(n, ws, "w_scale", m)) ||
        (st = sn_quant_host_param(n, wzp, "w_zero_point", m)) ||
        (st = sn_quant_host_param(n, ys, "y_scale", 1)) ||
        (st = sn_quant_host_param(n, yzp, "y_zero_point", 1)) ||
        (st = sn_quant_host_param(n, b, "B", m)))
        return st;
    if (!sn_host_known(x) || !sn_host_known(w))
        return qlinear_conv_device(L, n, (sn_rt *const[9]){x, xs, xzp, w, ws,
                                                          wzp, ys, yzp, b},
                                   t, lo, hi, od);
    if (!(s = conv_sums(x, xzp, w, wzp, &g, groups)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "integer convolution");
    total = sn_dims_product(0, x->rank, od);
    ovol = sn_dims_product(2, x->rank, od);
    if (!(y = sn_host_alloc(total, sn_dtype_size(t)))) {
        free(s);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "integer convolution");
    }
    for (size_t i = 0; i < total; i++) {
        size_t oc = (i / ovol) % m;
        double z = sn_quant_param(yzp, 0, 0), r;
        double v = (double)(s[i] + (int64_t)sn_quant_param(b, oc, 0));
        /* the scale in float32, as x_scale w_scale / y_scale */
        float k = (float)sn_quant_param(xs, 0, 1) *
                  (float)sn_quant_param(ws, oc, 1) /
                  (float)sn_quant_param(ys, 0, 1);
        r = nearbyint(v * (double)k) + z;
        r = r < lo ? lo : r > hi ? hi : r;
        sn_store_value(t, y, i, r, (int64_t)r, 1);
    }
    free(s);
    return sn_out_host(L, n, 0, t, x->rank, od, y);
}
