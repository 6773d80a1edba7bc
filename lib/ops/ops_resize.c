/*
 * Resampling and sampling.  Resize (opsets 10 to 18) and Upsample (7 to
 * 9): the output
 * size, the scales, the region of interest and every attribute are known
 * when the plan is made, so the host works out, per axis and output
 * index, which input indices it reads with which weights (the ONNX
 * reference's one-dimensional interpolation, taps clamped to the edge),
 * and one separable resample step (backend.h's sn_resample_desc) applies
 * that table on the device.  Leading axes that are copied as they are
 * (the batch and channels of an image) become the step's planes.
 * GridSample and RoiAlign read at places that may be computed on the
 * device: one step each (sn_grid_sample_desc, sn_roi_align_desc).
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

enum interp { NEAREST, LINEAR, CUBIC };
enum coord {
    HALF_PIXEL,
    PYTORCH_HALF_PIXEL,
    ALIGN_CORNERS,
    ASYMMETRIC,
    TF_HALF_PIXEL_FOR_NN,
    TF_CROP_AND_RESIZE
};
/* SIMPLE: the opsets before Resize-11 (and Upsample): down when the axis
 * grows, up when it shrinks. */
enum nearest { ROUND_PREFER_FLOOR, ROUND_PREFER_CEIL, FLOOR, CEIL, SIMPLE };

/* Everything that decides the table, for the whole node. */
typedef struct resize_args {
    enum interp mode;
    enum coord coord;
    enum nearest nearest;
    double cubic_a;
    int exclude_outside, antialias;
    float extrapolation;
} resize_args;

/* One axis: its sizes, scale, region of interest. */
typedef struct resize_axis {
    int64_t in, out;
    double scale, roi0, roi1;
} resize_axis;

/* Where output index x of an axis lands in the input (ONNX's coordinate
 * transformations); 0 when it lies outside (tf_crop_and_resize). */
static int source_coord(const resize_args *a, const resize_axis *ax,
                        int64_t x, double *xo)
{
    double in = (double)ax->in, ow = ax->scale * in, s = ax->scale;
    switch (a->coord) {
    case HALF_PIXEL:
        *xo = ((double)x + 0.5) / s - 0.5;
        break;
    case PYTORCH_HALF_PIXEL:
        *xo = ow == 1.0 ? -0.5 : ((double)x + 0.5) / s - 0.5;
        break;
    case ALIGN_CORNERS:
        *xo = ow == 1.0 ? 0.0 : (double)x * (in - 1.0) / (ow - 1.0);
        break;
    case ASYMMETRIC:
        *xo = (double)x / s;
        break;
    case TF_HALF_PIXEL_FOR_NN:
        *xo = ((double)x + 0.5) / s;
        break;
    case TF_CROP_AND_RESIZE: {
        double span = (double)((float)ax->roi1 - (float)ax->roi0);
        *xo = ow == 1.0 ? span * (in - 1.0) / 2.0
                        : (double)x * span * (in - 1.0) / (ow - 1.0);
        *xo += ax->roi0 * (in - 1.0);
        return *xo >= 0.0 && *xo <= in - 1.0;
    }
    }
    return 1;
}

/* The cubic convolution kernel of parameter A at distance t. */
static double cubic(double A, double t)
{
    t = fabs(t);
    if (t <= 1.0)
        return ((A + 2.0) * t - (A + 3.0)) * t * t + 1.0;
    if (t < 2.0)
        return ((A * t - 5.0 * A) * t + 8.0 * A) * t - 4.0 * A;
    return 0.0;
}

/* Taps a mode reads per output index: for linear and cubic, an
 * antialiased shrink widens the kernel by 1 / scale; *first: the first
 * tap's place relative to the base index. */
static int64_t tap_count(const resize_args *a, double scale, int64_t *first)
{
    double s = a->antialias && scale < 1.0 ? scale : 1.0;
    switch (a->mode) {
    case NEAREST:
        *first = 0;
        return 1;
    case LINEAR:
    case CUBIC: {
        double f = floor((a->mode == LINEAR ? -1.0 : -2.0) / s) + 1.0;
        if (!(f > -SN_RESAMPLE_MAX_TAPS)) /* a shrink past the taps */
            return SN_RESAMPLE_MAX_TAPS + 1;
        *first = (int64_t)f;
        return 2 - 2 * *first;
    }
    }
    return 0;
}

/* The nearest mode's pick between base and base + 1 at ratio in (0, 1]. */
static int64_t nearest_pick(const resize_args *a, double scale, int64_t base,
                            double ratio)
{
    int up;
    if (ratio == 1.0)
        return base + 1;
    switch (a->nearest) {
    case ROUND_PREFER_FLOOR:
        up = ratio > 0.5;
        break;
    case ROUND_PREFER_CEIL:
        up = ratio >= 0.5;
        break;
    case FLOOR:
        up = 0;
        break;
    case CEIL:
        up = 1;
        break;
    default: /* SIMPLE */
        up = scale < 1.0;
        break;
    }
    return base + up;
}

/*
 * The (index, weight) pairs of output index x in t (k of them; index -1
 * everywhere when x lies outside).  As ONNX's reference: the source
 * coordinate's base is the index below it (one below when it is whole,
 * so the ratio lies in (0, 1]); the taps around it read the input padded
 * by its edge values, that is clamped; exclude_outside drops the taps
 * past the edge and renormalises.
 */
static void axis_taps(const resize_args *a, const resize_axis *ax, int64_t x,
                      int64_t k, int64_t first, float *t)
{
    double xo = 0.0, ratio, w[4 * SN_RESAMPLE_MAX_TAPS], sum = 0.0;
    int64_t base, idx;
    if (!source_coord(a, ax, x, &xo)) {
        for (int64_t j = 0; j < k; j++) {
            t[2 * j] = -1.0f;
            t[2 * j + 1] = 0.0f;
        }
        return;
    }
    base = (int64_t)floor(xo);
    if (xo == floor(xo))
        base -= 1;
    ratio = xo - (double)base;
    if (a->mode == NEAREST) {
        idx = nearest_pick(a, ax->scale, base, ratio);
        idx = idx < 0 ? 0 : idx >= ax->in ? ax->in - 1 : idx;
        t[0] = (float)idx;
        t[1] = 1.0f;
        return;
    }
    double s = a->antialias && ax->scale < 1.0 ? ax->scale : 1.0;
    for (int64_t j = 0; j < k; j++) {
        double d = ((double)(first + j) - ratio) * s;
        if (a->mode == LINEAR)
            w[j] = d < -1.0 || d > 1.0 ? 0.0 : 1.0 - fabs(d);
        else
            w[j] = cubic(a->cubic_a, d);
        idx = base + first + j;
        if (a->exclude_outside && (idx < 0 || idx >= ax->in))
            w[j] = 0.0;
        sum += w[j];
    }
    for (int64_t j = 0; j < k; j++) {
        idx = base + first + j;
        idx = idx < 0 ? 0 : idx >= ax->in ? ax->in - 1 : idx;
        if ((a->exclude_outside || a->antialias) && sum != 0.0)
            w[j] /= sum;
        t[2 * j] = (float)idx;
        t[2 * j + 1] = (float)w[j];
    }
}

/*
 * Axis d's table in *table (out * *taps pairs, malloc'ed), with the taps
 * of weight 0 dropped where every output index has fewer (a whole source
 * coordinate reads one input, whatever the mode).  *identity: each output
 * index reads its own input index with weight 1.
 */
static shardnet_status axis_table(const sn_node *n, const resize_args *a,
                                  const resize_axis *ax, float **table,
                                  int64_t *taps, int *identity)
{
    int64_t first = 0, k = tap_count(a, ax->scale, &first), keep = 1;
    float *t, *c;
    if (k < 1 || k > SN_RESAMPLE_MAX_TAPS)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "scale %g needs more taps per output element "
                             "than the %d supported",
                             ax->scale, SN_RESAMPLE_MAX_TAPS);
    if (ax->out > (int64_t)(SN_MAX_HOST_FOLD / (2 * sizeof *t) / (size_t)k))
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "an axis of %lld outputs with %lld taps each: "
                             "a table beyond the host's %zu bytes",
                             (long long)ax->out, (long long)k,
                             SN_MAX_HOST_FOLD);
    if (!(t = malloc((size_t)(ax->out * k * 2 + 2) * sizeof *t)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "node '%s'", n->name);
    for (int64_t x = 0; x < ax->out; x++)
        axis_taps(a, ax, x, k, first, t + 2 * x * k);
    /* the most taps of non-zero weight any output index has */
    for (int64_t x = 0; x < ax->out; x++) {
        int64_t m = 0;
        for (int64_t j = 0; j < k; j++)
            m += t[2 * (x * k + j) + 1] != 0.0f;
        keep = m > keep ? m : keep;
    }
    *identity = ax->in == ax->out;
    if (keep < k) { /* compact in place: row x's kept taps, then padding */
        c = t;
        for (int64_t x = 0; x < ax->out; x++) {
            const float *row = t + 2 * x * k;
            float pad = row[0], got[2 * SN_RESAMPLE_MAX_TAPS];
            int64_t m = 0;
            for (int64_t j = 0; j < k && m < keep; j++)
                if (row[2 * j + 1] != 0.0f || row[2 * j] < 0.0f) {
                    got[2 * m] = row[2 * j];
                    got[2 * m + 1] = row[2 * j + 1];
                    m++;
                }
            for (; m < keep; m++) {
                got[2 * m] = pad;
                got[2 * m + 1] = 0.0f;
            }
            memcpy(c + 2 * x * keep, got, (size_t)(2 * keep) * sizeof *c);
        }
        k = keep;
    }
    for (int64_t x = 0; *identity && x < ax->out; x++)
        *identity = k == 1 && t[2 * x] == (float)x && t[2 * x + 1] == 1.0f;
    *table = t;
    *taps = k;
    return SHARDNET_OK;
}

/* Emit the resample step of x into output 0, shape (rank, dims of ax). */
static shardnet_status emit_resample(sn_lower *L, const sn_node *n, sn_rt *x,
                                     const resize_args *a,
                                     const resize_axis *ax)
{
    int r = x->rank, lead = 0;
    int64_t od[SN_MAX_DIMS], taps[SN_MAX_DIMS];
    float *tab[SN_MAX_DIMS] = {0}, *all = NULL;
    int ident[SN_MAX_DIMS];
    size_t total = 0;
    sn_step s = {.kind = SN_KERNEL_RESAMPLE};
    sn_resample_desc *d = &s.u.resample;
    sn_rt *out;
    shardnet_status st;

    for (int i = 0; i < r; i++)
        od[i] = ax[i].out;
    if ((st = sn_out_device_as(L, n, x->dtype, r, od, &out)) != SHARDNET_OK)
        return st;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    for (int i = 0; i < r; i++) {
        if (ax[i].in == 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "resizing an empty axis %d to %lld", i,
                                 (long long)ax[i].out);
        if (ax[i].in >= ((int64_t)1 << 24)) /* indices go as floats */
            return sn_node_error(n, SHARDNET_UNSUPPORTED,
                                 "axis %d of %lld elements (at most 2^24 - "
                                 "1 are supported)",
                                 i, (long long)ax[i].in);
    }
    for (int i = 0; i < r && st == SHARDNET_OK; i++)
        st = axis_table(n, a, &ax[i], &tab[i], &taps[i], &ident[i]);
    /* leading axes copied as they are become planes (the last one stays,
     * the step needs an axis) */
    while (st == SHARDNET_OK && lead < r - 1 && ident[lead])
        lead++;
    d->planes = sn_dims_product(0, lead, od);
    d->rank = (size_t)(r - lead);
    if (r == 0)
        st = sn_node_error(n, SHARDNET_INVALID_ARGUMENT, "a scalar input");
    for (int i = lead; st == SHARDNET_OK && i < r; i++) {
        d->in[i - lead] = (size_t)ax[i].in;
        d->out[i - lead] = (size_t)ax[i].out;
        d->taps[i - lead] = (size_t)taps[i];
        d->table_off[i - lead] = total;
        total += 2 * (size_t)(ax[i].out * taps[i]);
    }
    size_t combos = 1;
    for (int i = lead; st == SHARDNET_OK && i < r; i++)
        if ((combos *= (size_t)taps[i]) > SN_RESAMPLE_MAX_TAPS)
            st = sn_node_error(n, SHARDNET_UNSUPPORTED,
                               "more than %d taps per output element (an "
                               "antialiased shrink of several axes by much)",
                               SN_RESAMPLE_MAX_TAPS);
    if (st == SHARDNET_OK && !(all = malloc(total * sizeof *all)))
        st = sn_error(SHARDNET_OUT_OF_MEMORY, "node '%s'", n->name);
    for (int i = lead; st == SHARDNET_OK && i < r; i++)
        memcpy(all + d->table_off[i - lead], tab[i],
               2 * (size_t)(ax[i].out * taps[i]) * sizeof *all);
    for (int i = 0; i < r; i++)
        free(tab[i]);
    if (st != SHARDNET_OK) {
        free(all);
        return st;
    }
    d->table_len = total;
    d->fill = a->extrapolation;
    d->y = out->view;
    if ((st = sn_dev_upload(L, n, all, total, &d->table)) != SHARDNET_OK ||
        (st = sn_dev_view(L, n, x, &d->x)) != SHARDNET_OK)
        return st;
    return sn_emit(L, n, &s);
}

/* --- reading the node ----------------------------------------------------- */

static int pick(const char *s, const char *const *names, int count)
{
    for (int i = 0; i < count; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

/* The float values of host input rt (scales, roi), at most cap. */
static shardnet_status host_floats(const sn_node *n, const sn_rt *rt,
                                   const char *what, double *out, size_t cap,
                                   size_t *count)
{
    size_t c = sn_rt_elements(rt);
    if (c && !sn_rt_is_host(rt))
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "%s must be known when the model is planned "
                             "(a constant, or an input of at most 64 "
                             "values), not computed on the device",
                             what);
    if (c > cap)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "%s has %zu values, at most %zu allowed", what, c,
                             cap);
    for (size_t i = 0; i < c; i++)
        out[i] = sn_dtype_is_integer(rt->dtype)
                     ? (double)sn_rt_get_int(rt, i)
                     : sn_rt_get_double(rt, i);
    *count = c;
    return SHARDNET_OK;
}

/* Input i of the node, or NULL when omitted. */
static sn_rt *opt_in(sn_lower *L, const sn_node *n, size_t i)
{
    return i < n->ninputs && n->inputs[i] >= 0 ? sn_in(L, n, i) : NULL;
}

/* Scales given per axis (count for the rank): the output sizes, floored
 * as ONNX's reference does. */
static shardnet_status from_scales(const sn_node *n, const sn_rt *x,
                                   const double *scales, resize_axis *ax)
{
    for (int i = 0; i < x->rank; i++) {
        double o = scales[i] * (double)x->dims[i];
        if (!(scales[i] > 0.0) || !(o < (double)SN_MAX_ELEMENTS))
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "scale %g on axis %d", scales[i], i);
        ax[i].scale = scales[i];
        ax[i].out = (int64_t)floor(o);
    }
    return SHARDNET_OK;
}

/* Resize-11 on: sizes or scales (of the axes given, opset 18), the
 * keep_aspect_ratio_policy, the region of interest. */
static shardnet_status resize_sizes(sn_lower *L, const sn_node *n,
                                    const sn_rt *x, resize_axis *ax)
{
    sn_rt *roi = opt_in(L, n, 1), *sc = opt_in(L, n, 2),
          *sz = opt_in(L, n, 3);
    int64_t axes[SN_MAX_DIMS], sizes[SN_MAX_DIMS];
    double scales[SN_MAX_DIMS], rois[2 * SN_MAX_DIMS], full[SN_MAX_DIMS];
    int ax_of[SN_MAX_DIMS], r = x->rank;
    size_t na = 0, ns = 0, nr = 0;
    int given;
    shardnet_status st;

    if ((st = sn_attr_ints(n, "axes", axes, SN_MAX_DIMS, &na, &given)))
        return st;
    if (!given)
        na = (size_t)r;
    for (size_t i = 0; i < na; i++)
        if ((ax_of[i] = given ? sn_axis(axes[i], r) : (int)i) < 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "axis %lld out of range for rank %d",
                                 (long long)axes[i], r);
    for (int i = 0; i < r; i++) {
        ax[i].in = ax[i].out = x->dims[i];
        ax[i].scale = full[i] = 1.0;
        ax[i].roi0 = 0.0;
        ax[i].roi1 = 1.0;
    }
    if (roi && (st = host_floats(n, roi, "roi", rois, 2 * SN_MAX_DIMS,
                                 &nr)) != SHARDNET_OK)
        return st;
    if (nr && nr != 2 * na)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "roi has %zu values for %zu axes", nr, na);
    for (size_t i = 0; i < na && nr; i++) {
        ax[ax_of[i]].roi0 = rois[i];
        ax[ax_of[i]].roi1 = rois[na + i];
    }
    if (sz && sn_rt_elements(sz)) {
        const char *policy =
            sn_attr_string(n, "keep_aspect_ratio_policy", "stretch");
        int kp = pick(policy, (const char *const[]){"stretch", "not_larger",
                                                    "not_smaller"},
                      3);
        double keep = kp == 1 ? INFINITY : 0.0;
        if (sc && sn_rt_elements(sc))
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "both scales and sizes are given");
        if (kp < 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "keep_aspect_ratio_policy '%s'", policy);
        if ((st = sn_host_ints(n, sz, "sizes", sizes, SN_MAX_DIMS, &ns)))
            return st;
        if (ns != na)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "%zu sizes for %zu axes", ns, na);
        for (size_t i = 0; i < na; i++) {
            resize_axis *a = &ax[ax_of[i]];
            if (sizes[i] < 0 || sizes[i] > SN_MAX_ELEMENTS)
                return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                     "size %lld on axis %d",
                                     (long long)sizes[i], ax_of[i]);
            a->out = sizes[i];
            a->scale = a->in ? (double)sizes[i] / (double)a->in : 1.0;
            keep = kp == 1 ? fmin(keep, a->scale) : fmax(keep, a->scale);
        }
        for (size_t i = 0; kp > 0 && i < na; i++) {
            resize_axis *a = &ax[ax_of[i]];
            a->scale = keep;
            a->out = (int64_t)floor(keep * (double)a->in + 0.5);
        }
        return SHARDNET_OK;
    }
    if (!sc || !sn_rt_elements(sc))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "needs scales or sizes");
    if ((st = host_floats(n, sc, "scales", scales, SN_MAX_DIMS, &ns)))
        return st;
    if (ns != na)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "%zu scales for %zu axes", ns, na);
    for (size_t i = 0; i < na; i++)
        full[ax_of[i]] = scales[i];
    return from_scales(n, x, full, ax);
}

/* The attributes of Resize-11 on. */
static shardnet_status resize_attrs(const sn_node *n, resize_args *a)
{
    static const char *const coords[] = {
        "half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
        "tf_half_pixel_for_nn", "tf_crop_and_resize"};
    static const char *const nearests[] = {"round_prefer_floor",
                                           "round_prefer_ceil", "floor",
                                           "ceil"};
    const char *c = sn_attr_string(n, "coordinate_transformation_mode",
                                   "half_pixel");
    const char *nm = sn_attr_string(n, "nearest_mode", "round_prefer_floor");
    int ci = pick(c, coords, 6), ni = pick(nm, nearests, 4);
    if (ci < 0)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "coordinate_transformation_mode '%s'", c);
    if (ni < 0)
        return sn_node_error(n, SHARDNET_UNSUPPORTED, "nearest_mode '%s'",
                             nm);
    a->coord = (enum coord)ci;
    a->nearest = (enum nearest)ni;
    a->cubic_a = sn_attr_float(n, "cubic_coeff_a", -0.75f);
    a->exclude_outside = sn_attr_int(n, "exclude_outside", 0) != 0;
    a->antialias = sn_attr_int(n, "antialias", 0) != 0;
    a->extrapolation = sn_attr_float(n, "extrapolation_value", 0.0f);
    return SHARDNET_OK;
}

SN_LOWER(sn_lower_resize)
{
    sn_rt *x = sn_in(L, n, 0);
    const char *ms = sn_attr_string(n, "mode", "nearest");
    int mode = pick(ms, (const char *const[]){"nearest", "linear", "cubic"},
                    3);
    resize_args a = {.coord = ASYMMETRIC, .nearest = SIMPLE};
    resize_axis ax[SN_MAX_DIMS];
    shardnet_status st;

    /* Upsample and Resize-10: nearest or (bi)linear, scales only, the
     * asymmetric coordinates */
    int legacy = strcmp(n->op_type, "Resize") || L->g->opset < 11;
    if (mode < 0 && legacy && !strcmp(ms, "bilinear"))
        mode = LINEAR;
    if (mode < 0 || (legacy && mode == CUBIC))
        return sn_node_error(n, SHARDNET_UNSUPPORTED, "mode '%s'", ms);
    a.mode = (enum interp)mode;
    if (x->rank < 1)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT, "a scalar input");
    if (legacy) {
        double scales[SN_MAX_DIMS];
        size_t ns = 0;
        const sn_attr *at = sn_node_attr(n, "scales");
        sn_rt *sc = opt_in(L, n, 1);
        if (sc) {
            if ((st = host_floats(n, sc, "scales", scales, SN_MAX_DIMS, &ns)))
                return st;
        } else if (at && at->type == SN_ATTR_FLOATS &&
                   at->count <= SN_MAX_DIMS) {
            for (size_t i = 0; i < at->count; i++)
                scales[i] = at->floats[i];
            ns = at->count;
        } else {
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "needs scales");
        }
        if (ns != (size_t)x->rank)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "%zu scales for an input of rank %d", ns,
                                 x->rank);
        for (int i = 0; i < x->rank; i++)
            ax[i].in = x->dims[i];
        if ((st = from_scales(n, x, scales, ax)) != SHARDNET_OK)
            return st;
    } else if ((st = resize_attrs(n, &a)) != SHARDNET_OK ||
               (st = resize_sizes(L, n, x, ax)) != SHARDNET_OK) {
        return st;
    }
    return emit_resample(L, n, x, &a, ax);
}

/* --- GridSample and RoiAlign ---------------------------------------------- */

/*
 * GridSample (opset 16; 20's names linear and cubic too): a 4-D input
 * sampled on the device at the grid's places, which may be computed.
 */
SN_LOWER(sn_lower_grid_sample)
{
    sn_rt *x = sn_in(L, n, 0), *grid = sn_in(L, n, 1), *out;
    const char *ms = sn_attr_string(n, "mode", "bilinear");
    const char *ps = sn_attr_string(n, "padding_mode", "zeros");
    int mode = pick(ms, (const char *const[]){"bilinear", "nearest",
                                              "bicubic", "linear", "cubic"},
                    5);
    int pad = pick(ps, (const char *const[]){"zeros", "border", "reflection"},
                   3);
    int64_t od[4];
    sn_step s = {.kind = SN_KERNEL_GRID_SAMPLE};
    sn_grid_sample_desc *d = &s.u.grid_sample;
    shardnet_status st;

    if (mode < 0 || pad < 0)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "mode '%s' with padding_mode '%s'", ms, ps);
    if (x->rank != 4 || grid->rank != 4 || grid->dims[0] != x->dims[0] ||
        grid->dims[3] != 2)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "a 4-D input (N, C, H, W) and a grid (N, H_out, "
                             "W_out, 2) are supported");
    od[0] = x->dims[0];
    od[1] = x->dims[1];
    od[2] = grid->dims[1];
    od[3] = grid->dims[2];
    if ((st = sn_out_device_as(L, n, x->dtype, 4, od, &out)) != SHARDNET_OK)
        return st;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    if (x->dims[2] == 0 || x->dims[3] == 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "sampling an empty image");
    *d = (sn_grid_sample_desc){
        .mode = mode == 3 ? SN_GRID_BILINEAR
                : mode == 4 ? SN_GRID_BICUBIC
                            : (sn_grid_mode)mode,
        .padding = (sn_grid_padding)pad,
        .align_corners = sn_attr_int(n, "align_corners", 0) != 0,
        .batch = (size_t)od[0], .channels = (size_t)od[1],
        .in_h = (size_t)x->dims[2], .in_w = (size_t)x->dims[3],
        .out_h = (size_t)od[2], .out_w = (size_t)od[3], .y = out->view};
    if ((st = sn_dev_view(L, n, x, &d->x)) != SHARDNET_OK ||
        (st = sn_dev_view(L, n, grid, &d->grid)) != SHARDNET_OK)
        return st;
    return sn_emit(L, n, &s);
}

/*
 * RoiAlign (opsets 10 and 16; 10 has no half-pixel shift): the regions
 * and their image indices may be computed on the device; indices known on
 * the host are checked here.
 */
SN_LOWER(sn_lower_roi_align)
{
    sn_rt *x = sn_in(L, n, 0), *rois = sn_in(L, n, 1),
          *bi = sn_in(L, n, 2), *out;
    const char *ms = sn_attr_string(n, "mode", "avg");
    const char *cs = sn_attr_string(
        n, "coordinate_transformation_mode",
        L->g->opset < 16 ? "output_half_pixel" : "half_pixel");
    int64_t oh = sn_attr_int(n, "output_height", 1);
    int64_t ow = sn_attr_int(n, "output_width", 1);
    int64_t sr = sn_attr_int(n, "sampling_ratio", 0), od[4];
    sn_step s = {.kind = SN_KERNEL_ROI_ALIGN};
    sn_roi_align_desc *d = &s.u.roi_align;
    shardnet_status st;

    if (strcmp(ms, "avg") && strcmp(ms, "max"))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT, "mode '%s'", ms);
    if (strcmp(cs, "half_pixel") && strcmp(cs, "output_half_pixel"))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "coordinate_transformation_mode '%s'", cs);
    if (x->rank != 4 || rois->rank != 2 || rois->dims[1] != 4 ||
        bi->rank != 1 || bi->dims[0] != rois->dims[0])
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "needs X (N, C, H, W), rois (R, 4) and "
                             "batch_indices (R)");
    if (oh < 1 || ow < 1 || oh > 65536 || ow > 65536 || sr < 0 ||
        sr > 65536)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "output %lld x %lld, sampling_ratio %lld",
                             (long long)oh, (long long)ow, (long long)sr);
    if (sn_host_known(bi))
        for (size_t i = 0; i < sn_rt_elements(bi); i++) {
            int64_t v = sn_rt_get_int(bi, i);
            if (v < 0 || v >= x->dims[0])
                return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                     "batch index %lld (at %zu) out of "
                                     "range for a batch of %lld",
                                     (long long)v, i, (long long)x->dims[0]);
        }
    od[0] = rois->dims[0];
    od[1] = x->dims[1];
    od[2] = oh;
    od[3] = ow;
    if ((st = sn_out_device_as(L, n, x->dtype, 4, od, &out)) != SHARDNET_OK)
        return st;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    if (x->dims[2] == 0 || x->dims[3] == 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "pooling from an empty image");
    *d = (sn_roi_align_desc){
        .max_mode = !strcmp(ms, "max"), .half_pixel = !strcmp(cs, "half_pixel"),
        .batch = (size_t)x->dims[0], .channels = (size_t)x->dims[1],
        .in_h = (size_t)x->dims[2], .in_w = (size_t)x->dims[3],
        .nrois = (size_t)od[0], .out_h = (size_t)oh, .out_w = (size_t)ow,
        .sampling_ratio = (size_t)sr,
        .spatial_scale = sn_attr_float(n, "spatial_scale", 1.0f),
        .y = out->view};
    if ((st = sn_dev_view(L, n, x, &d->x)) != SHARDNET_OK ||
        (st = sn_dev_view(L, n, rois, &d->rois)) != SHARDNET_OK ||
        (st = sn_dev_view(L, n, bi, &d->batch_idx)) != SHARDNET_OK)
        return st;
    return sn_emit(L, n, &s);
}
