/*
 * Convolution, pooling, normalisation, reductions and data movement:
 * Conv, MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool,
 * BatchNormalization, LayerNormalization, Transpose, Concat, Split, Slice,
 * Gather, Expand, Where, ReduceMean, ReduceSum, ReduceMax and
 * ConstantOfShape.
 *
 * The data-movement ops compute on the host when their inputs are host
 * values (shape arithmetic: any element type, copied byte for byte), and
 * otherwise emit strided copies (or gather / where steps) on the device.
 * Convolution is im2col + GEMM, one image at a time; every group of a
 * grouped convolution is one batch item of the same GEMM.
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* Attribute values above this are refused: keeps window arithmetic in
 * int64 far from overflow. */
#define MAX_WINDOW ((int64_t)1 << 30)

/* --- helpers ------------------------------------------------------------- */

/* The fused activation a pass attached to a node ("activation" = "Relu"). */
static sn_act fused_act(const sn_node *n)
{
    return strcmp(sn_attr_string(n, "activation", ""), "Relu") ? SN_ACT_NONE
                                                                : SN_ACT_RELU;
}

/* Product of dims[from, to). */
static size_t dims_product(int from, int to, const int64_t *dims)
{
    size_t p = 1;
    for (int i = from; i < to; i++)
        p *= (size_t)dims[i];
    return p;
}

/*
 * Is rt's data known on the host?  An empty tensor counts as known: there
 * is nothing to read (and empty constants have no data pointer).
 */
static int is_host(const sn_rt *rt)
{
    return rt->host != NULL || sn_rt_elements(rt) == 0;
}

/* sn_host_ints, accepting an empty tensor. */
static shardnet_status host_ints(const sn_node *n, const sn_rt *rt,
                                 const char *what, int64_t *out, size_t cap,
                                 size_t *count)
{
    if (sn_rt_elements(rt) == 0) {
        *count = 0;
        return SHARDNET_OK;
    }
    return sn_host_ints(n, rt, what, out, cap, count);
}

/* Bytes per element of host data of type t (any type with a fixed size). */
static shardnet_status host_elem_size(const sn_node *n, sn_dtype t,
                                      size_t *es)
{
    *es = sn_dtype_size(t);
    if (!*es || t == SN_DT_STRING)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "tensors of type %s are not supported",
                             sn_dtype_name(t));
    return SHARDNET_OK;
}

/* malloc for count elements of es bytes (at least one byte). */
/* Host memory for a folded tensor; NULL beyond SN_MAX_HOST_FOLD. */
static void *host_alloc(size_t count, size_t es)
{
    size_t bytes;
    if (__builtin_mul_overflow(count, es, &bytes) || bytes > SN_MAX_HOST_FOLD)
        return NULL;
    return malloc(bytes ? bytes : 1);
}

/*
 * The type a device output of data of type t reports: the device holds
 * float32 either way, converted back when the output is read, which the
 * executor does for these types only.
 */
static shardnet_status device_type(const sn_node *n, sn_dtype t,
                                   sn_dtype *out)
{
    switch (t) {
    case SN_DT_FLOAT:
    case SN_DT_DOUBLE:
    case SN_DT_INT64:
    case SN_DT_INT32:
    case SN_DT_INT8:
    case SN_DT_UINT8:
    case SN_DT_BOOL:
        *out = t;
        return SHARDNET_OK;
    default:
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "tensors of type %s are not supported on "
                             "devices",
                             sn_dtype_name(t));
    }
}

/* Float inputs only (float32, or float64 computed in float32). */
static shardnet_status float_type(const sn_node *n, const sn_rt *x,
                                  sn_dtype *out)
{
    if (x->dtype != SN_DT_FLOAT && x->dtype != SN_DT_DOUBLE)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "input of type %s is not supported (float "
                             "only)",
                             sn_dtype_name(x->dtype));
    *out = x->dtype;
    return SHARDNET_OK;
}

/* Strides (elements) of a (rank_a, dims_a) operand broadcast to `rank`
 * dims, right-aligned: 0 where it is broadcast. */
static void bcast_strides(int rank_a, const int64_t *dims_a, int rank,
                          int64_t *str)
{
    int64_t s[SN_MAX_DIMS];
    sn_strides(rank_a, dims_a, s);
    for (int i = 0; i < rank; i++) {
        int j = i - (rank - rank_a);
        str[i] = j < 0 || dims_a[j] == 1 ? 0 : s[j];
    }
}

/* dst (contiguous, C order over shape) = src elements at off + sum of
 * index * stride, es bytes each. */
static void host_strided(void *dst, const void *src, size_t es, int rank,
                         const int64_t *shape, const int64_t *stride,
                         int64_t off)
{
    int64_t idx[SN_MAX_DIMS] = {0}, pos = off;
    size_t total = dims_product(0, rank, shape);
    unsigned char *d = dst;
    const unsigned char *s = src;
    for (size_t k = 0; k < total; k++) {
        memcpy(d + k * es, s + (size_t)pos * es, es);
        for (int i = rank - 1; i >= 0; i--) {
            pos += stride[i];
            if (++idx[i] < shape[i])
                break;
            pos -= stride[i] * shape[i];
            idx[i] = 0;
        }
    }
}

/*
 * One copy step: dst[sum i * dst_stride] = src[sum i * src_stride] over
 * shape.  Dimensions of size 1 are dropped and dimensions that are
 * contiguous in both src and dst merged; nothing is emitted for an empty
 * shape.
 */
static shardnet_status emit_copy(sn_lower *L, const sn_node *n, sn_view src,
                                 sn_view dst, int rank, const int64_t *shape,
                                 const int64_t *sstr, const int64_t *dstr)
{
    sn_step s = {.kind = SN_STEP_COPY};
    sn_copy_desc *c = &s.u.copy;
    size_t r = 0;
    for (int i = 0; i < rank; i++) {
        if (shape[i] == 0)
            return SHARDNET_OK;
        if (shape[i] == 1)
            continue;
        if (r > 0 && c->src_stride[r - 1] == (ptrdiff_t)(sstr[i] * shape[i]) &&
            c->dst_stride[r - 1] == (ptrdiff_t)(dstr[i] * shape[i])) {
            c->shape[r - 1] *= (size_t)shape[i];
            c->src_stride[r - 1] = (ptrdiff_t)sstr[i];
            c->dst_stride[r - 1] = (ptrdiff_t)dstr[i];
            continue;
        }
        c->shape[r] = (size_t)shape[i];
        c->src_stride[r] = (ptrdiff_t)sstr[i];
        c->dst_stride[r] = (ptrdiff_t)dstr[i];
        r++;
    }
    if (r == 0) {
        c->shape[0] = 1;
        c->src_stride[0] = c->dst_stride[0] = 1;
        r = 1;
    }
    c->rank = r;
    c->src = src;
    c->dst = dst;
    return sn_emit(L, n, &s);
}

/* --- convolution and pooling windows ------------------------------------- */

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

/*
 * Conv: per image, an im2col step (skipped for 1x1 kernels with stride 1
 * and no padding, where the input already is the column matrix), then one
 * GEMM W (M x C/group*kh*kw) times the columns, batched over the groups.
 * The bias is the GEMM's epilogue (bias_rows: one value per output
 * channel); with groups, a broadcast ADD (and the fused Relu) after.
 */
SN_LOWER(sn_lower_conv)
{
    sn_rt *x = sn_in(L, n, 0), *w = sn_in(L, n, 1), *b = sn_in(L, n, 2), *out;
    int64_t group = sn_attr_int(n, "group", 1), kern[2], ks[4], od[4];
    size_t nks;
    int nd = 0, given;
    geom g;
    shardnet_status st;
    sn_view vx, vw, vb = {0}, col = {0};
    sn_act act = fused_act(n);
    sn_dtype t = SN_DT_FLOAT;

    if ((st = spatial_rank(n, x, "convolution", 0, &nd)) != SHARDNET_OK ||
        (st = float_type(n, x, &t)) != SHARDNET_OK)
        return st;
    if (w->rank != x->rank)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "weights of rank %d for an input of rank %d",
                             w->rank, x->rank);
    int64_t nimg = x->dims[0], c = x->dims[1], m = w->dims[0],
            cg = w->dims[1];
    int64_t cgg;
    if (group < 1 || __builtin_mul_overflow(cg, group, &cgg) || cgg != c ||
        m % group)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "group %lld does not fit %lld input channels "
                             "(weights take %lld per group) and %lld output "
                             "channels",
                             (long long)group, (long long)c, (long long)cg,
                             (long long)m);
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
    if (b && (b->rank != 1 || b->dims[0] != m))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "bias must hold %lld values (one per output "
                             "channel)",
                             (long long)m);
    if ((st = window_geometry(n, nd, x->dims + 2, kern, 0, &g)))
        return st;
    od[0] = nimg;
    od[1] = m;
    for (int i = 0; i < nd; i++)
        od[2 + i] = g.out[i];
    if ((st = sn_out_device(L, n, 0, x->rank, od, &out)) != SHARDNET_OK)
        return st;
    out->dtype = t;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    if (cg == 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "no input channels");
    if ((st = sn_dev_view(L, n, x, &vx)) != SHARDNET_OK ||
        (st = sn_dev_view(L, n, w, &vw)) != SHARDNET_OK ||
        (b && (st = sn_dev_view(L, n, b, &vb)) != SHARDNET_OK))
        return st;

    size_t kh = G_H(&g, k, 1), kw = G_W(&g, k);
    size_t ih = G_H(&g, in, 1), iw = G_W(&g, in);
    size_t oh = G_H(&g, out, 1), ow = G_W(&g, out);
    size_t mg = (size_t)(m / group), ck = (size_t)cg * kh * kw;
    size_t ihw = ih * iw, ohw = oh * ow;
    int direct = kh == 1 && kw == 1;
    for (int i = 0; i < nd; i++)
        direct &= g.stride[i] == 1 && g.pb[i] == 0 && g.pe[i] == 0;
    int split_bias = b && group > 1; /* differs per batch item */

    sn_step s = {.kind = SN_STEP_GEMM};
    s.u.gemm = (sn_gemm_desc){.m = mg, .n = ohw, .k = ck, .alpha = 1.0f,
                              .lda = ck, .ldb = ohw, .ldc = ohw,
                              .batch = (size_t)group, .stride_a = mg * ck,
                              .stride_b = ck * ohw, .stride_c = mg * ohw,
                              .a = vw, .act = split_bias ? SN_ACT_NONE : act};
    if (b && !split_bias) {
        s.u.gemm.bias = vb;
        s.u.gemm.bias_rows = 1;
    }
    if (direct && group == 1 && nimg > 1) {
        /* Every image in one batched GEMM, the weights shared. */
        s.u.gemm.batch = (size_t)nimg;
        s.u.gemm.stride_a = 0;
        s.u.gemm.stride_b = (size_t)c * ihw;
        s.u.gemm.stride_c = (size_t)m * ohw;
        s.u.gemm.b = vx;
        s.u.gemm.c = out->view;
        if ((st = sn_emit(L, n, &s)) != SHARDNET_OK)
            return st;
    } else {
        if (!direct &&
            (st = sn_scratch(L, (size_t)group * ck * ohw, &col)) != SHARDNET_OK)
            return st;
        for (int64_t i = 0; i < nimg; i++) {
            sn_view src = {vx.buf, vx.offset + (size_t)i * (size_t)c * ihw};
            if (!direct) {
                sn_step ic = {.kind = SN_STEP_IM2COL};
                ic.u.im2col = (sn_im2col_desc){
                    .channels = (size_t)c, .in_h = ih, .in_w = iw,
                    .out_h = oh, .out_w = ow, .k_h = kh, .k_w = kw,
                    .stride_h = G_H(&g, stride, 1),
                    .stride_w = G_W(&g, stride), .dil_h = G_H(&g, dil, 1),
                    .dil_w = G_W(&g, dil), .pad_top = G_H(&g, pb, 0),
                    .pad_left = G_W(&g, pb), .src = src, .dst = col};
                if ((st = sn_emit(L, n, &ic)) != SHARDNET_OK)
                    return st;
            }
            s.u.gemm.b = direct ? src : col;
            s.u.gemm.c = (sn_view){out->view.buf,
                                   out->view.offset +
                                       (size_t)i * (size_t)m * ohw};
            if ((st = sn_emit(L, n, &s)) != SHARDNET_OK)
                return st;
        }
    }
    if (split_bias) {
        int64_t o3[3] = {nimg, m, (int64_t)ohw}, b2[2] = {m, 1};
        if ((st = sn_emit_binary(L, n, SN_BINARY_ADD, 3, o3, out->view, 2,
                                    b2, vb, out->view)) != SHARDNET_OK)
            return st;
        if (act == SN_ACT_RELU) {
            sn_step u = {.kind = SN_STEP_UNARY};
            u.u.unary = (sn_unary_desc){.op = SN_UNARY_RELU,
                                        .n = sn_rt_elements(out),
                                        .x = out->view, .y = out->view};
            if ((st = sn_emit(L, n, &u)) != SHARDNET_OK)
                return st;
        }
    }
    return SHARDNET_OK;
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
    sn_step s = {.kind = SN_STEP_POOL};
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
    sn_step s = {.kind = SN_STEP_POOL};
    sn_dtype t = SN_DT_FLOAT;
    int ceil_mode = (int)sn_attr_int(n, "ceil_mode", 0);

    if ((st = spatial_rank(n, x, "pooling", 1, &nd)) != SHARDNET_OK)
        return st;
    if ((st = op == SN_POOL_AVG ? float_type(n, x, &t)
                                : device_type(n, x->dtype, &t)))
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
    sn_step s = {.kind = SN_STEP_REDUCE};
    shardnet_status st;
    sn_dtype t = SN_DT_FLOAT;

    if (x->rank < 2)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "input must be (N, C, ...), not of rank %d",
                             x->rank);
    if ((st = op == SN_REDUCE_MEAN ? float_type(n, x, &t)
                                   : device_type(n, x->dtype, &t)))
        return st;
    for (int i = 0; i < x->rank; i++)
        od[i] = i < 2 ? x->dims[i] : 1;
    if ((st = sn_out_device(L, n, 0, x->rank, od, &out)) != SHARDNET_OK)
        return st;
    out->dtype = t;
    s.u.reduce = (sn_reduce_desc){.op = op,
                                  .outer = dims_product(0, 2, x->dims),
                                  .len = dims_product(2, x->rank, x->dims),
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

/* --- normalisation ------------------------------------------------------ */

/* One unary step y = op(x) over count elements (alpha/beta unused). */
static shardnet_status emit_unary_view(sn_lower *L, const sn_node *n,
                                       sn_unary_op op, size_t count,
                                       sn_view x, sn_view y)
{
    sn_step s = {.kind = SN_STEP_UNARY};
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
    sn_step s = {.kind = SN_STEP_REDUCE};
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
    if ((st = float_type(n, x, &t)) != SHARDNET_OK)
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
    if (!is_host(p))
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "%s has fewer values than the normalised shape "
                             "and is computed on the device (only "
                             "constants are expanded)",
                             what);
    int64_t str[SN_MAX_DIMS], idx[SN_MAX_DIMS] = {0}, pos = 0;
    float *f = malloc((len ? len : 1) * sizeof *f);
    if (!f)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "layer normalisation");
    bcast_strides(pr, pd, nr, str);
    for (size_t k = 0; k < len; k++) {
        f[k] = (float)sn_rt_get_double(p, (size_t)pos);
        for (int i = nr - 1; i >= 0; i--) {
            pos += str[i];
            if (++idx[i] < nd[i])
                break;
            pos -= str[i] * nd[i];
            idx[i] = 0;
        }
    }
    return sn_dev_upload(L, n, f, len, out);
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
    int64_t sd[SN_MAX_DIMS], od2[2] = {(int64_t)outer, (int64_t)len};
    int64_t md2[2] = {(int64_t)outer, 1}, one = 1, ol = (int64_t)outer;
    int want_mean = n->noutputs > 1 && n->outputs[1] >= 0;
    int want_inv = n->noutputs > 2 && n->outputs[2] >= 0;
    sn_view vmean, diff, vinv;
    sn_rt *o;
    shardnet_status st;
    sn_step s = {.kind = SN_STEP_REDUCE};

    for (int i = 0; i < x->rank; i++)
        sd[i] = i < ax ? x->dims[i] : 1;
    if (want_mean) {
        if ((st = sn_out_device(L, n, 1, x->rank, sd, &o)) != SHARDNET_OK)
            return st;
        o->dtype = x->dtype;
        vmean = o->view;
    } else if ((st = sn_scratch(L, outer, &vmean)) != SHARDNET_OK) {
        return st;
    }
    if (want_inv) {
        if ((st = sn_out_device(L, n, 2, x->rank, sd, &o)) != SHARDNET_OK)
            return st;
        o->dtype = x->dtype;
        vinv = o->view;
    }
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
    sn_step s = {.kind = SN_STEP_LAYERNORM};
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
    if ((st = float_type(n, x, &t)) != SHARDNET_OK)
        return st;
    size_t len = dims_product(ax, x->rank, x->dims);
    int nr = x->rank - ax;
    const int64_t *nd = x->dims + ax;
    s.u.layernorm.outer = dims_product(0, ax, x->dims);
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

/* --- data movement ------------------------------------------------------- */

SN_LOWER(sn_lower_transpose)
{
    sn_rt *x = sn_in(L, n, 0), *out;
    int64_t perm[SN_MAX_DIMS], od[SN_MAX_DIMS], xs[SN_MAX_DIMS];
    int64_t ss[SN_MAX_DIMS], ds[SN_MAX_DIMS];
    int seen[SN_MAX_DIMS] = {0}, given, r = x->rank;
    size_t np;
    shardnet_status st;
    sn_dtype t = SN_DT_FLOAT;
    sn_view vx;

    if ((st = sn_attr_ints(n, "perm", perm, SN_MAX_DIMS, &np, &given)))
        return st;
    if (!given) {
        for (int i = 0; i < r; i++)
            perm[i] = r - 1 - i;
    } else if (np != (size_t)r) {
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "perm has %zu values for an input of rank %d",
                             np, r);
    }
    for (int i = 0; i < r; i++) {
        if (perm[i] < 0 || perm[i] >= r || seen[perm[i]]++)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "perm is not a permutation of 0..%d", r - 1);
    }
    sn_strides(r, x->dims, xs);
    for (int i = 0; i < r; i++) {
        od[i] = x->dims[perm[i]];
        ss[i] = xs[perm[i]];
    }
    if (is_host(x)) {
        size_t es;
        void *d;
        if ((st = host_elem_size(n, x->dtype, &es)) != SHARDNET_OK)
            return st;
        if (!(d = host_alloc(sn_rt_elements(x), es)))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "transpose");
        host_strided(d, x->host, es, r, od, ss, 0);
        return sn_out_host(L, n, 0, x->dtype, r, od, d);
    }
    /* Only unit dimensions move: the data stays as it is. */
    int moves = 0;
    for (int i = 0, last = -1; i < r; i++) {
        if (od[i] == 1)
            continue;
        moves |= perm[i] < last;
        last = (int)perm[i];
    }
    if (!moves)
        return sn_out_alias(L, n, 0, x, r, od);
    if ((st = device_type(n, x->dtype, &t)) != SHARDNET_OK ||
        (st = sn_out_device(L, n, 0, r, od, &out)) != SHARDNET_OK)
        return st;
    out->dtype = t;
    if ((st = sn_dev_view(L, n, x, &vx)) != SHARDNET_OK)
        return st;
    sn_strides(r, od, ds);
    return emit_copy(L, n, vx, out->view, r, od, ss, ds);
}

SN_LOWER(sn_lower_concat)
{
    sn_rt *first = sn_in(L, n, 0), *out;
    const sn_attr *aa = sn_node_attr(n, "axis");
    int64_t axis, od[SN_MAX_DIMS];
    int ax, all_host = 1, r;
    shardnet_status st;

    if (!first)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "input 0 is missing");
    if (aa && aa->type == SN_ATTR_INT)
        axis = aa->i;
    else if (!aa && L->g->opset < 4)
        axis = 1;
    else
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "needs an integer attribute 'axis'");
    r = first->rank;
    if (r < 1 || (ax = sn_axis(axis, r)) < 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "axis %lld out of range for rank %d",
                             (long long)axis, r);
    memcpy(od, first->dims, (size_t)r * sizeof *od);
    od[ax] = 0;
    for (size_t i = 0; i < n->ninputs; i++) {
        sn_rt *in = sn_in(L, n, i);
        if (!in)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "input %zu is missing", i);
        if (in->rank != r || in->dtype != first->dtype)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "input %zu is %s of rank %d; input 0 is %s "
                                 "of rank %d",
                                 i, sn_dtype_name(in->dtype), in->rank,
                                 sn_dtype_name(first->dtype), r);
        for (int d = 0; d < r; d++)
            if (d != ax && in->dims[d] != first->dims[d])
                return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                     "input %zu differs from input 0 in "
                                     "dimension %d (%lld, %lld)",
                                     i, d, (long long)in->dims[d],
                                     (long long)first->dims[d]);
        od[ax] += in->dims[ax];
        all_host &= is_host(in);
    }
    size_t outer = dims_product(0, ax, od), inner = dims_product(ax + 1, r, od);
    size_t total = (size_t)od[ax] * inner, at = 0;
    if (all_host) {
        size_t es;
        unsigned char *d;
        if ((st = host_elem_size(n, first->dtype, &es)) != SHARDNET_OK)
            return st;
        if (!(d = host_alloc(outer * total, es)))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "concat");
        for (size_t i = 0; i < n->ninputs; i++) {
            sn_rt *in = sn_in(L, n, i);
            size_t blk = (size_t)in->dims[ax] * inner * es;
            for (size_t o = 0; blk && o < outer; o++)
                memcpy(d + (o * total + at) * es,
                       (const unsigned char *)in->host + o * blk, blk);
            at += (size_t)in->dims[ax] * inner;
        }
        return sn_out_host(L, n, 0, first->dtype, r, od, d);
    }
    sn_dtype t = SN_DT_FLOAT;
    if ((st = device_type(n, first->dtype, &t)) != SHARDNET_OK ||
        (st = sn_out_device(L, n, 0, r, od, &out)) != SHARDNET_OK)
        return st;
    out->dtype = t;
    for (size_t i = 0; i < n->ninputs; i++) {
        sn_rt *in = sn_in(L, n, i);
        size_t blk = (size_t)in->dims[ax] * inner;
        int64_t shape[2] = {(int64_t)outer, (int64_t)blk};
        int64_t ss[2] = {(int64_t)blk, 1}, ds[2] = {(int64_t)total, 1};
        sn_view v;
        if (blk && outer) {
            if ((st = sn_dev_view(L, n, in, &v)) != SHARDNET_OK ||
                (st = emit_copy(L, n, v,
                                (sn_view){out->view.buf,
                                          out->view.offset + at},
                                2, shape, ss, ds)) != SHARDNET_OK)
                return st;
        }
        at += blk;
    }
    return SHARDNET_OK;
}

SN_LOWER(sn_lower_split)
{
    sn_rt *x = sn_in(L, n, 0), *out;
    int64_t axis = sn_attr_int(n, "axis", 0), *sizes, sum = 0;
    size_t nout = n->noutputs, count = 0;
    int ax, given;
    shardnet_status st = SHARDNET_OK;

    if (x->rank < 1 || (ax = sn_axis(axis, x->rank)) < 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "axis %lld out of range for rank %d",
                             (long long)axis, x->rank);
    if (nout == 0)
        return SHARDNET_OK;
    if (!(sizes = malloc(nout * sizeof *sizes)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "split");
    int64_t dim = x->dims[ax];
    st = sn_param_ints(L, n, "split", sizes, nout, &count, &given);
    if (st != SHARDNET_OK)
        goto done;
    if (given) {
        if (count != nout) {
            st = sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                               "%zu split sizes for %zu outputs", count,
                               nout);
            goto done;
        }
    } else if (sn_node_attr(n, "num_outputs")) {
        int64_t num = sn_attr_int(n, "num_outputs", 0);
        if (num != (int64_t)nout) {
            st = sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                               "num_outputs is %lld but the node has %zu "
                               "outputs",
                               (long long)num, nout);
            goto done;
        }
        int64_t chunk = (dim + num - 1) / num;
        for (size_t i = 0; i < nout; i++)
            sizes[i] = i + 1 < nout ? chunk : dim - chunk * (num - 1);
    } else {
        if (dim % (int64_t)nout) {
            st = sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                               "cannot split %lld into %zu equal parts",
                               (long long)dim, nout);
            goto done;
        }
        for (size_t i = 0; i < nout; i++)
            sizes[i] = dim / (int64_t)nout;
    }
    for (size_t i = 0; i < nout; i++) {
        if (sizes[i] < 0 || sizes[i] > dim - sum) {
            st = sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                               "split sizes do not add up to the axis' %lld",
                               (long long)dim);
            goto done;
        }
        sum += sizes[i];
    }
    if (sum != dim) {
        st = sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                           "split sizes add up to %lld, not the axis' %lld",
                           (long long)sum, (long long)dim);
        goto done;
    }

    size_t outer = dims_product(0, ax, x->dims);
    size_t inner = dims_product(ax + 1, x->rank, x->dims);
    int64_t od[SN_MAX_DIMS], at = 0;
    int64_t shape[2], ss[2] = {dim * (int64_t)inner, 1}, ds[2];
    size_t es = 0;
    sn_dtype t = x->dtype;
    sn_view vx = {0};
    memcpy(od, x->dims, sizeof od);
    if (is_host(x))
        st = host_elem_size(n, x->dtype, &es);
    else if ((st = device_type(n, x->dtype, &t)) == SHARDNET_OK)
        st = sn_dev_view(L, n, x, &vx);
    for (size_t i = 0; st == SHARDNET_OK && i < nout; i++) {
        int64_t off = at * (int64_t)inner;
        od[ax] = sizes[i];
        at += sizes[i];
        if (n->outputs[i] < 0)
            continue;
        shape[0] = (int64_t)outer;
        shape[1] = sizes[i] * (int64_t)inner;
        ds[0] = shape[1];
        ds[1] = 1;
        if (is_host(x)) {
            void *d = host_alloc(outer * (size_t)shape[1], es);
            if (!d) {
                st = sn_error(SHARDNET_OUT_OF_MEMORY, "split");
                break;
            }
            host_strided(d, x->host, es, 2, shape, ss, off);
            st = sn_out_host(L, n, i, x->dtype, x->rank, od, d);
            continue;
        }
        if (outer == 1 && sizes[i] && x->on_device &&
            x->dtype == SN_DT_FLOAT) { /* consecutive elements: a view */
            st = sn_out_range(L, n, i, x, (size_t)off, x->rank, od);
            continue;
        }
        if ((st = sn_out_device(L, n, i, x->rank, od, &out)) != SHARDNET_OK)
            break;
        out->dtype = t;
        st = emit_copy(L, n, (sn_view){vx.buf, vx.offset + (size_t)off},
                       out->view, 2, shape, ss, ds);
    }
done:
    free(sizes);
    return st;
}

SN_LOWER(sn_lower_slice)
{
    sn_rt *x = sn_in(L, n, 0), *out;
    int64_t starts[SN_MAX_DIMS], ends[SN_MAX_DIMS], axes[SN_MAX_DIMS];
    int64_t steps[SN_MAX_DIMS], od[SN_MAX_DIMS], xs[SN_MAX_DIMS];
    int64_t ss[SN_MAX_DIMS], ds[SN_MAX_DIMS], off = 0;
    size_t ns, ne, na, nst;
    int gs, ge, ga, gst, done[SN_MAX_DIMS] = {0}, r = x->rank;
    shardnet_status st;

    /* starts, ends, axes and steps: attributes before opset 10, inputs
     * from then on */
    if ((st = sn_param_ints(L, n, "starts", starts, SN_MAX_DIMS, &ns,
                            &gs)) ||
        (st = sn_param_ints(L, n, "ends", ends, SN_MAX_DIMS, &ne, &ge)) ||
        (st = sn_param_ints(L, n, "axes", axes, SN_MAX_DIMS, &na, &ga)) ||
        (st = sn_param_ints(L, n, "steps", steps, SN_MAX_DIMS, &nst, &gst)))
        return st;
    if (!gs || !ge)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "needs starts and ends");
    if (ns != ne || (ga && na != ns) || (gst && nst != ns))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "starts, ends, axes and steps differ in length "
                             "(%zu, %zu, %zu, %zu)",
                             ns, ne, ga ? na : ns, gst ? nst : ns);
    sn_strides(r, x->dims, xs);
    memcpy(od, x->dims, (size_t)r * sizeof *od);
    memcpy(ss, xs, (size_t)r * sizeof *ss);
    for (size_t i = 0; i < ns; i++) {
        int a = sn_axis(ga ? axes[i] : (int64_t)i, r);
        int64_t step = gst ? steps[i] : 1, dim, s, e, len;
        if (a < 0 || done[a]++)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "axis %lld out of range or repeated",
                                 (long long)(ga ? axes[i] : (int64_t)i));
        if (step == 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "step 0 on axis %d", a);
        if (step == INT64_MIN)
            step = -INT64_MAX;
        dim = x->dims[a];
        s = starts[i] < 0 ? starts[i] + dim : starts[i];
        e = ends[i] < 0 ? ends[i] + dim : ends[i];
        if (step > 0) {
            s = s < 0 ? 0 : s > dim ? dim : s;
            e = e < 0 ? 0 : e > dim ? dim : e;
            len = e > s ? (e - s - 1) / step + 1 : 0;
        } else {
            s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
            e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
            len = s > e ? (s - e - 1) / -step + 1 : 0;
        }
        od[a] = len;
        if (len > 0)
            off += s * xs[a];
        ss[a] = len > 1 ? xs[a] * step : 0;
    }
    if (is_host(x)) {
        size_t es;
        void *d;
        if ((st = host_elem_size(n, x->dtype, &es)) != SHARDNET_OK)
            return st;
        if (!(d = host_alloc(dims_product(0, r, od), es)))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "slice");
        host_strided(d, x->host, es, r, od, ss, off);
        return sn_out_host(L, n, 0, x->dtype, r, od, d);
    }
    sn_dtype t = SN_DT_FLOAT;
    sn_view vx;
    /* Consecutive elements of float data on the device (rows of a batch,
     * say): a view of them, no copy. */
    size_t count = dims_product(0, r, od);
    int consecutive = x->on_device && x->dtype == SN_DT_FLOAT && count;
    sn_strides(r, od, ds);
    for (int d = 0; d < r; d++)
        if (od[d] > 1 && ss[d] != ds[d])
            consecutive = 0;
    if (consecutive)
        return sn_out_range(L, n, 0, x, (size_t)off, r, od);
    if ((st = device_type(n, x->dtype, &t)) != SHARDNET_OK ||
        (st = sn_out_device(L, n, 0, r, od, &out)) != SHARDNET_OK)
        return st;
    out->dtype = t;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    if ((st = sn_dev_view(L, n, x, &vx)) != SHARDNET_OK)
        return st;
    return emit_copy(L, n, (sn_view){vx.buf, vx.offset + (size_t)off},
                     out->view, r, od, ss, ds);
}

SN_LOWER(sn_lower_gather)
{
    sn_rt *x = sn_in(L, n, 0), *idx = sn_in(L, n, 1), *out;
    int64_t axis = sn_attr_int(n, "axis", 0), od[SN_MAX_DIMS];
    int ax, r = 0;
    shardnet_status st;

    if (x->rank < 1 || (ax = sn_axis(axis, x->rank)) < 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "axis %lld out of range for rank %d",
                             (long long)axis, x->rank);
    if (idx->dtype != SN_DT_INT64 && idx->dtype != SN_DT_INT32)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "indices are %s, not int32 or int64",
                             sn_dtype_name(idx->dtype));
    if (x->rank - 1 + idx->rank > SN_MAX_DIMS)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the result would have rank above %d",
                             SN_MAX_DIMS);
    for (int i = 0; i < ax; i++)
        od[r++] = x->dims[i];
    for (int i = 0; i < idx->rank; i++)
        od[r++] = idx->dims[i];
    for (int i = ax + 1; i < x->rank; i++)
        od[r++] = x->dims[i];
    size_t outer = dims_product(0, ax, x->dims);
    size_t inner = dims_product(ax + 1, x->rank, x->dims);
    size_t nidx = sn_rt_elements(idx);
    int64_t dim = x->dims[ax];
    if (is_host(idx)) {
        for (size_t j = 0; j < nidx; j++) {
            int64_t v = sn_rt_get_int(idx, j);
            if (v < -dim || v >= dim)
                return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                     "index %lld (at %zu) is out of range "
                                     "for an axis of %lld",
                                     (long long)v, j, (long long)dim);
        }
    }
    if (is_host(x) && is_host(idx)) {
        size_t es;
        unsigned char *d;
        const unsigned char *src = x->host;
        if ((st = host_elem_size(n, x->dtype, &es)) != SHARDNET_OK)
            return st;
        if (!(d = host_alloc(outer * nidx * inner, es)))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "gather");
        for (size_t o = 0; inner && o < outer; o++)
            for (size_t j = 0; j < nidx; j++) {
                int64_t v = sn_rt_get_int(idx, j);
                if (v < 0)
                    v += dim;
                memcpy(d + ((o * nidx + j) * inner) * es,
                       src + ((o * (size_t)dim + (size_t)v) * inner) * es,
                       inner * es);
            }
        return sn_out_host(L, n, 0, x->dtype, r, od, d);
    }
    sn_dtype t = SN_DT_FLOAT;
    sn_step s = {.kind = SN_STEP_GATHER};
    if ((st = device_type(n, x->dtype, &t)) != SHARDNET_OK ||
        (st = sn_out_device(L, n, 0, r, od, &out)) != SHARDNET_OK)
        return st;
    out->dtype = t;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    s.u.gather = (sn_gather_desc){.outer = outer, .axis_len = (size_t)dim,
                                  .inner = inner, .nidx = nidx,
                                  .out = out->view};
    if ((st = sn_dev_indices(L, n, idx, &s.u.gather.indices)) != SHARDNET_OK ||
        (st = sn_dev_view(L, n, x, &s.u.gather.data)) != SHARDNET_OK)
        return st;
    return sn_emit(L, n, &s);
}

SN_LOWER(sn_lower_expand)
{
    sn_rt *x = sn_in(L, n, 0), *shape_in = sn_in(L, n, 1), *out;
    int64_t shape[SN_MAX_DIMS], od[SN_MAX_DIMS];
    size_t ns;
    int r;
    shardnet_status st;

    if ((st = host_ints(n, shape_in, "the shape", shape, SN_MAX_DIMS,
                           &ns)) != SHARDNET_OK)
        return st;
    for (size_t i = 0; i < ns; i++)
        if (shape[i] < 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "negative dimension %lld in the shape",
                                 (long long)shape[i]);
    if (!sn_broadcast_shape(x->rank, x->dims, (int)ns, shape, &r, od))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the input cannot be broadcast to the shape");
    if (is_host(x)) {
        int64_t str[SN_MAX_DIMS];
        size_t es;
        void *d;
        if ((st = host_elem_size(n, x->dtype, &es)) != SHARDNET_OK)
            return st;
        if (!(d = host_alloc(dims_product(0, r, od), es)))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "expand");
        bcast_strides(x->rank, x->dims, r, str);
        host_strided(d, x->host, es, r, od, str, 0);
        return sn_out_host(L, n, 0, x->dtype, r, od, d);
    }
    sn_dtype t = SN_DT_FLOAT;
    if ((st = device_type(n, x->dtype, &t)) != SHARDNET_OK ||
        (st = sn_out_device(L, n, 0, r, od, &out)) != SHARDNET_OK)
        return st;
    out->dtype = t;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    return sn_emit_broadcast_copy(L, n, x, r, od, out->view);
}

SN_LOWER(sn_lower_where)
{
    sn_rt *c = sn_in(L, n, 0), *x = sn_in(L, n, 1), *y = sn_in(L, n, 2), *out;
    int64_t t1[SN_MAX_DIMS], od[SN_MAX_DIMS];
    int64_t sc[SN_MAX_DIMS], sx[SN_MAX_DIMS], sy[SN_MAX_DIMS];
    int r1, r;
    shardnet_status st;

    if (x->dtype != y->dtype)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "X is %s but Y is %s", sn_dtype_name(x->dtype),
                             sn_dtype_name(y->dtype));
    if (!sn_broadcast_shape(c->rank, c->dims, x->rank, x->dims, &r1, t1) ||
        !sn_broadcast_shape(r1, t1, y->rank, y->dims, &r, od))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "condition, X and Y cannot be broadcast "
                             "together");
    bcast_strides(c->rank, c->dims, r, sc);
    bcast_strides(x->rank, x->dims, r, sx);
    bcast_strides(y->rank, y->dims, r, sy);
    if (is_host(c) && is_host(x) && is_host(y)) {
        int64_t idx[SN_MAX_DIMS] = {0}, pc = 0, px = 0, py = 0;
        size_t es, total = dims_product(0, r, od);
        unsigned char *d;
        if ((st = host_elem_size(n, x->dtype, &es)) != SHARDNET_OK)
            return st;
        if (!(d = host_alloc(total, es)))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "where");
        for (size_t k = 0; k < total; k++) {
            const unsigned char *src =
                sn_rt_get_int(c, (size_t)pc)
                    ? (const unsigned char *)x->host + (size_t)px * es
                    : (const unsigned char *)y->host + (size_t)py * es;
            memcpy(d + k * es, src, es);
            for (int i = r - 1; i >= 0; i--) {
                pc += sc[i];
                px += sx[i];
                py += sy[i];
                if (++idx[i] < od[i])
                    break;
                pc -= sc[i] * od[i];
                px -= sx[i] * od[i];
                py -= sy[i] * od[i];
                idx[i] = 0;
            }
        }
        return sn_out_host(L, n, 0, x->dtype, r, od, d);
    }
    sn_dtype t = SN_DT_FLOAT;
    sn_step s = {.kind = SN_STEP_WHERE};
    if ((st = device_type(n, x->dtype, &t)) != SHARDNET_OK ||
        (st = sn_out_device(L, n, 0, r, od, &out)) != SHARDNET_OK)
        return st;
    out->dtype = t;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    s.u.where.rank = r ? (size_t)r : 1;
    s.u.where.shape[0] = 1;
    for (int i = 0; i < r; i++) {
        s.u.where.shape[i] = (size_t)od[i];
        s.u.where.stride_cond[i] = (size_t)sc[i];
        s.u.where.stride_x[i] = (size_t)sx[i];
        s.u.where.stride_y[i] = (size_t)sy[i];
    }
    s.u.where.out = out->view;
    if ((st = sn_dev_view(L, n, c, &s.u.where.cond)) != SHARDNET_OK ||
        (st = sn_dev_view(L, n, x, &s.u.where.x)) != SHARDNET_OK ||
        (st = sn_dev_view(L, n, y, &s.u.where.y)) != SHARDNET_OK)
        return st;
    return sn_emit(L, n, &s);
}

/* --- reductions ---------------------------------------------------------- */

/* The reduction on the host: red[i] marks reduced axes; od (rank or) is
 * the output shape. */
static shardnet_status host_reduce(sn_lower *L, const sn_node *n,
                                   sn_reduce_op op, const sn_rt *x,
                                   const int *red, int orank,
                                   const int64_t *od)
{
    int64_t kd[SN_MAX_DIMS], ks[SN_MAX_DIMS], idx[SN_MAX_DIMS] = {0}, pos = 0;
    size_t total = sn_rt_elements(x), ocount = 1, cnt;
    int isint = sn_dtype_is_integer(x->dtype);
    double *fa = NULL;
    int64_t *ia = NULL;
    void *d;
    switch (x->dtype) {
    case SN_DT_FLOAT:
    case SN_DT_DOUBLE:
    case SN_DT_INT64:
    case SN_DT_INT32:
    case SN_DT_INT16:
    case SN_DT_INT8:
    case SN_DT_UINT8:
    case SN_DT_UINT16:
    case SN_DT_UINT32:
    case SN_DT_UINT64:
        break;
    default:
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "reduction of %s tensors is not supported",
                             sn_dtype_name(x->dtype));
    }
    for (int i = 0; i < x->rank; i++) {
        kd[i] = red[i] ? 1 : x->dims[i];
        ocount *= (size_t)kd[i];
    }
    sn_strides(x->rank, kd, ks);
    for (int i = 0; i < x->rank; i++)
        if (red[i])
            ks[i] = 0;
    cnt = ocount ? total / ocount : 0;
    d = host_alloc(ocount, sn_dtype_size(x->dtype));
    if (isint)
        ia = malloc((ocount ? ocount : 1) * sizeof *ia);
    else
        fa = malloc((ocount ? ocount : 1) * sizeof *fa);
    if (!d || (!ia && !fa)) {
        free(d);
        free(ia);
        free(fa);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "reduction");
    }
    for (size_t k = 0; k < ocount; k++) {
        if (isint)
            ia[k] = op == SN_REDUCE_MAX ? INT64_MIN : 0;
        else
            fa[k] = op == SN_REDUCE_MAX ? -INFINITY : 0.0;
    }
    for (size_t k = 0; k < total; k++) {
        if (isint) {
            int64_t v = sn_rt_get_int(x, k);
            if (op == SN_REDUCE_MAX)
                ia[pos] = v > ia[pos] ? v : ia[pos];
            else
                ia[pos] = (int64_t)((uint64_t)ia[pos] + (uint64_t)v);
        } else {
            double v = sn_rt_get_double(x, k);
            if (op == SN_REDUCE_MAX)
                fa[pos] = v > fa[pos] || isnan(v) ? v : fa[pos];
            else
                fa[pos] += v;
        }
        for (int i = x->rank - 1; i >= 0; i--) {
            pos += ks[i];
            if (++idx[i] < x->dims[i])
                break;
            pos -= ks[i] * x->dims[i];
            idx[i] = 0;
        }
    }
    for (size_t k = 0; k < ocount; k++) {
        if (op == SN_REDUCE_MEAN)
            sn_store_value(x->dtype, d, k,
                      (isint ? (double)ia[k] : fa[k]) / (double)cnt, 0, 0);
        else if (isint)
            sn_store_value(x->dtype, d, k, 0, ia[k], 1);
        else
            sn_store_value(x->dtype, d, k, fa[k], 0, 0);
    }
    free(ia);
    free(fa);
    return sn_out_host(L, n, 0, x->dtype, orank, od, d);
}

/*
 * ReduceMean / ReduceSum / ReduceMax.  Axes come from the attribute, or
 * from the optional input (ReduceSum from opset 13, the others from 18).
 * Each run of adjacent reduced axes is one (outer, len, inner) step; runs
 * after the first read the previous step's result from scratch.
 */
static shardnet_status lower_reduce(sn_lower *L, const sn_node *n,
                                    sn_reduce_op op)
{
    sn_rt *x = sn_in(L, n, 0), *out;
    int64_t axes[SN_MAX_DIMS], od[SN_MAX_DIMS], cur[SN_MAX_DIMS];
    size_t na;
    int red[SN_MAX_DIMS] = {0}, r = 0, keep, noop, given;
    shardnet_status st;

    keep = sn_attr_int(n, "keepdims", 1) != 0;
    noop = sn_attr_int(n, "noop_with_empty_axes", 0) != 0;
    st = sn_param_ints(L, n, "axes", axes, SN_MAX_DIMS, &na, &given);
    if (st != SHARDNET_OK)
        return st;
    if (na == 0 && noop)
        return sn_out_alias(L, n, 0, x, x->rank, x->dims);
    for (size_t i = 0; i < na; i++) {
        int a = sn_axis(axes[i], x->rank);
        if (a < 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "axis %lld out of range for rank %d",
                                 (long long)axes[i], x->rank);
        red[a] = 1;
    }
    for (int i = 0; i < x->rank; i++) {
        if (na == 0)
            red[i] = 1;
        if (!red[i])
            od[r++] = x->dims[i];
        else if (keep)
            od[r++] = 1;
    }
    if (is_host(x))
        return host_reduce(L, n, op, x, red, r, od);

    sn_dtype t = SN_DT_FLOAT;
    sn_view src, dst;
    if ((st = (op == SN_REDUCE_MAX ? device_type(n, x->dtype, &t)
                                   : float_type(n, x, &t))) != SHARDNET_OK ||
        (st = sn_out_device(L, n, 0, r, od, &out)) != SHARDNET_OK)
        return st;
    out->dtype = t;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    if (sn_rt_elements(x) == 0)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "reducing empty axes is not supported");
    if ((st = sn_dev_view(L, n, x, &src)) != SHARDNET_OK)
        return st;
    int first = 0, runs = 0;
    for (int i = 0; i < x->rank; i++)
        runs += red[i] && (i == 0 || !red[i - 1]);
    if (runs == 0) /* rank 0 (or nothing to reduce): a plain copy */
        return sn_out_alias(L, n, 0, x, r, od);
    memcpy(cur, x->dims, sizeof cur);
    for (int i = 0; i < x->rank; i = first) {
        sn_step s = {.kind = SN_STEP_REDUCE};
        while (i < x->rank && !red[i])
            i++;
        first = i;
        while (first < x->rank && red[first])
            first++;
        /* [i, first) is one run of reduced axes */
        s.u.reduce.op = op;
        s.u.reduce.outer = dims_product(0, i, cur);
        s.u.reduce.len = dims_product(i, first, cur);
        s.u.reduce.inner = dims_product(first, x->rank, cur);
        for (int j = i; j < first; j++)
            cur[j] = 1;
        if (--runs == 0)
            dst = out->view;
        else if ((st = sn_scratch(L, dims_product(0, x->rank, cur), &dst)))
            return st;
        s.u.reduce.x = src;
        s.u.reduce.y = dst;
        if ((st = sn_emit(L, n, &s)) != SHARDNET_OK)
            return st;
        src = dst;
        if (runs == 0)
            break;
    }
    return SHARDNET_OK;
}

SN_LOWER(sn_lower_reduce_mean)
{
    return lower_reduce(L, n, SN_REDUCE_MEAN);
}

SN_LOWER(sn_lower_reduce_sum)
{
    return lower_reduce(L, n, SN_REDUCE_SUM);
}

SN_LOWER(sn_lower_reduce_max)
{
    return lower_reduce(L, n, SN_REDUCE_MAX);
}

/* --- ConstantOfShape ------------------------------------------------------ */

SN_LOWER(sn_lower_constant_of_shape)
{
    sn_rt *shp = sn_in(L, n, 0);
    const sn_attr *a = sn_node_attr(n, "value");
    int64_t dims[SN_MAX_DIMS];
    size_t r, count = 1, es = sizeof(float);
    sn_dtype t = SN_DT_FLOAT;
    const void *val = NULL;
    unsigned char *d;
    shardnet_status st;

    if ((st = host_ints(n, shp, "the shape", dims, SN_MAX_DIMS, &r)))
        return st;
    for (size_t i = 0; i < r; i++) {
        if (dims[i] < 0 || dims[i] > SN_MAX_ELEMENTS ||
            __builtin_mul_overflow(count, (size_t)dims[i], &count) ||
            count > (size_t)SN_MAX_ELEMENTS)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "invalid or too large shape (dimension "
                                 "%zu is %lld)",
                                 i, (long long)dims[i]);
    }
    if (a) {
        const sn_value *v;
        if (a->type != SN_ATTR_TENSOR || a->tensor < 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "attribute 'value' must be a tensor");
        v = &L->g->values[a->tensor];
        t = v->dtype;
        if ((st = host_elem_size(n, t, &es)) != SHARDNET_OK)
            return st;
        if (sn_value_elements(v) != 1 || v->nbytes != es)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "attribute 'value' must hold one element");
        val = v->data;
    }
    if (!(d = host_alloc(count, es)))
        return sn_node_error(n, SHARDNET_OUT_OF_MEMORY,
                             "%zu elements: more than the %zu MiB a tensor "
                             "computed on the host may take, or no memory",
                             count, SN_MAX_HOST_FOLD >> 20);
    if (val)
        for (size_t i = 0; i < count; i++)
            memcpy(d + i * es, val, es);
    else
        memset(d, 0, count * es); /* float 0 */
    return sn_out_host(L, n, 0, t, (int)r, dims, d);
}
