/*
 * Quantization: QuantizeLinear and DequantizeLinear (opsets 10 and 13:
 * per tensor, or per axis; 21's 16-bit types and output_dtype, not its
 * blocks), DynamicQuantizeLinear (11), MatMulInteger and
 * QLinearMatMul (10).  Integer results must be exact:
 *
 *   - on the host when every input is known when the plan is built
 *     (constants, integer inputs, small float inputs), in the arithmetic
 *     the ONNX definitions use: float32 for scales and divisions, int64
 *     for integer sums, rounding half to even, then saturation;
 *   - on the device where float32 is exact: QuantizeLinear divides,
 *     clamps to the type's range less the zero point (so rounding cannot
 *     leave it), rounds half to even by adding and taking away 1.5 * 2^23
 *     (exact for |v| < 2^22, two float32 steps), and adds the zero point;
 *     DequantizeLinear subtracts the zero point and scales, both exact
 *     on integers carried as float; DynamicQuantizeLinear finds its range
 *     by reductions and quantizes the same way;
 *   - MatMulInteger runs on the device as a float GEMM only where every
 *     sum is bounded below 2^24 (K times the largest operands), else it
 *     is refused with that reason (its int32 sums, carried as float,
 *     would not be exact); QLinearMatMul runs there as GEMMs over runs of
 *     K that keep each sum exact, then requantizes as ONNX Runtime does
 *     (qlinear_matmul_device).
 *
 * Scales and zero points are constants as a rule; the ones
 * DynamicQuantizeLinear computes on the device are taken as they are by
 * DequantizeLinear and MatMulInteger.
 *
 * Quantized tensors on a device are their integers carried as float
 * (sn_device_type), like every integer result there.
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* 1.5 * 2^23: adding it to a float32 |v| < 2^22 and taking it away rounds
 * v to an integer, half to even. */
#define ROUNDER 12582912.0f


/* The range of a quantized type. */
static shardnet_status qrange(const sn_node *n, sn_dtype t, double *lo,
                             double *hi)
{
    switch (t) {
    case SN_DT_UINT8:
        *lo = 0;
        *hi = 255;
        return SHARDNET_OK;
    case SN_DT_INT8:
        *lo = -128;
        *hi = 127;
        return SHARDNET_OK;
    case SN_DT_UINT16: /* opset 21 on */
        *lo = 0;
        *hi = 65535;
        return SHARDNET_OK;
    case SN_DT_INT16:
        *lo = -32768;
        *hi = 32767;
        return SHARDNET_OK;
    case SN_DT_INT32:
        *lo = -2147483648.0;
        *hi = 2147483647.0;
        return SHARDNET_OK;
    default:
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "quantized type %s is not supported (uint8, "
                             "int8, uint16, int16, and int32 for "
                             "dequantizing)",
                             sn_dtype_name(t));
    }
}

/* round half to even, then into [lo, hi] */
static double saturate(double v, double lo, double hi)
{
    v = nearbyint(v);
    return v < lo ? lo : v > hi ? hi : v;
}

/*
 * Per-tensor or per-axis parameters: scale (and zero point) of one value,
 * or of dims[axis] values, which element i of x takes as its channel
 * (i / inner) % d.
 */
typedef struct qaxis {
    size_t d, inner;
    int ax, rank;     /* the parameters' broadcast shape against x: */
    int64_t pd[SN_MAX_DIMS]; /* (d, 1, ..., 1) of rank x->rank - ax */
} qaxis;

static shardnet_status param_axis(const sn_node *n, const sn_rt *x,
                                  const sn_rt *scale, const sn_rt *zp,
                                  qaxis *q)
{
    size_t cnt = sn_rt_elements(scale);
    int64_t axis = sn_attr_int(n, "axis", 1);
    int64_t block = sn_attr_int(n, "block_size", 0);
    if (block)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "blocked quantization (block_size %lld, opset "
                             "21) is not supported: a scale per tensor or "
                             "per axis only",
                             (long long)block);
    q->d = 1;
    q->inner = 1;
    q->ax = 0;
    q->rank = 0;
    if (zp && sn_rt_elements(zp) != cnt)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the scale has %zu values and the zero point "
                             "%zu",
                             cnt, sn_rt_elements(zp));
    if (cnt == 1 && scale->rank <= 1)
        return SHARDNET_OK; /* per tensor (one value per axis: the same) */
    q->ax = x->rank ? sn_axis(axis, x->rank) : -1;
    if (scale->rank != 1 || q->ax < 0 || (size_t)x->dims[q->ax] != cnt)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "a scale of %zu values for axis %lld of an "
                             "input of rank %d",
                             cnt, (long long)axis, x->rank);
    q->d = cnt;
    q->inner = sn_dims_product(q->ax + 1, x->rank, x->dims);
    q->rank = x->rank - q->ax;
    q->pd[0] = (int64_t)cnt;
    for (int i = 1; i < q->rank; i++)
        q->pd[i] = 1;
    return SHARDNET_OK;
}

static size_t channel(const qaxis *q, size_t i)
{
    return q->d == 1 ? 0 : (i / q->inner) % q->d;
}

/* Scales and zero points must be known on the host. */
static shardnet_status known_params(const sn_node *n, const sn_rt *scale,
                                    const sn_rt *zp)
{
    if (!sn_host_known(scale) || (zp && !sn_host_known(zp)))
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "scales and zero points computed on the device "
                             "are not supported: they must be known when "
                             "the model is planned");
    return SHARDNET_OK;
}

/* count floats add + p[i] + sign zp[i] (p, zp may be NULL) uploaded;
 * *out their view. */
static shardnet_status upload_params(sn_lower *L, const sn_node *n,
                                     size_t count, const sn_rt *p,
                                     double add, double mul_zp_sign,
                                     const sn_rt *zp, sn_view *out)
{
    float *f = malloc((count ? count : 1) * sizeof *f);
    if (!f)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "quantization parameters");
    for (size_t i = 0; i < count; i++) {
        double v = add;
        if (p)
            v += sn_rt_get_double(p, i);
        if (zp)
            v += mul_zp_sign * (double)sn_rt_get_int(zp, i);
        f[i] = (float)v;
    }
    return sn_dev_upload(L, n, f, count ? count : 1, out);
}

/* y (dims, rank r), scaled already, into [vlo, vhi] (the type's range
 * less the zero point), rounded half to even (adding and taking away
 * 1.5 * 2^23), plus the zero point vz (vz.buf NULL: none); vlo, vhi and
 * vz shaped pd (rank pr) to broadcast: the end of QuantizeLinear and of
 * the QLinear operators' requantization on the device. */
static shardnet_status emit_round_saturate(sn_lower *L, const sn_node *n,
                                           int r, const int64_t *dims,
                                           sn_view y, int pr,
                                           const int64_t *pd, sn_view vlo,
                                           sn_view vhi, sn_view vz)
{
    sn_view vr;
    shardnet_status st;
    float *rounder = malloc(sizeof *rounder);
    if (!rounder)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "quantization");
    *rounder = ROUNDER;
    if ((st = sn_dev_upload(L, n, rounder, 1, &vr)) ||
        (st = sn_emit_binary(L, n, SN_BINARY_MAX, r, dims, y, pr, pd, vlo,
                             y)) ||
        (st = sn_emit_binary(L, n, SN_BINARY_MIN, r, dims, y, pr, pd, vhi,
                             y)) ||
        (st = sn_emit_binary(L, n, SN_BINARY_ADD, r, dims, y, 0, NULL, vr,
                             y)) ||
        (st = sn_emit_binary(L, n, SN_BINARY_SUB, r, dims, y, 0, NULL, vr,
                             y)))
        return st;
    return vz.buf ? sn_emit_binary(L, n, SN_BINARY_ADD, r, dims, y, pr, pd,
                                   vz, y)
                  : SHARDNET_OK;
}

/* QuantizeLinear on the device: y = clamp(x / s, lo - zp, hi - zp),
 * rounded, + zp. */
static shardnet_status quantize_device(sn_lower *L, const sn_node *n,
                                       sn_rt *x, sn_rt *scale, sn_rt *zp,
                                       const qaxis *q, double lo, double hi,
                                       sn_view y)
{
    sn_view vx, vs, vlo, vhi, vz = {0};
    shardnet_status st;
    if ((st = sn_dev_view(L, n, x, &vx)) ||
        (st = sn_dev_view(L, n, scale, &vs)) ||
        (st = upload_params(L, n, q->d, NULL, lo, -1.0, zp, &vlo)) ||
        (st = upload_params(L, n, q->d, NULL, hi, -1.0, zp, &vhi)) ||
        (zp && (st = upload_params(L, n, q->d, NULL, 0.0, 1.0, zp, &vz))) ||
        (st = sn_emit_binary(L, n, SN_BINARY_DIV, x->rank, x->dims, vx,
                             q->rank, q->pd, vs, y)))
        return st;
    return emit_round_saturate(L, n, x->rank, x->dims, y, q->rank, q->pd, vlo,
                               vhi, vz);
}

SN_LOWER(sn_lower_quantize)
{
    sn_rt *x = sn_in(L, n, 0), *scale = sn_in(L, n, 1), *zp = sn_in(L, n, 2);
    sn_rt *out;
    /* the zero point's type, else output_dtype's (opset 21), else uint8 */
    int64_t odt = sn_attr_int(n, "output_dtype", 0);
    sn_dtype t = zp ? zp->dtype : odt ? (sn_dtype)odt : SN_DT_UINT8;
    double lo = 0, hi = 255;
    qaxis q;
    shardnet_status st;

    if (zp && odt && (sn_dtype)odt != zp->dtype)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "output_dtype %s is not the zero point's type "
                             "%s",
                             sn_dtype_name((sn_dtype)odt),
                             sn_dtype_name(zp->dtype));
    if (zp && sn_rt_elements(zp) == 0)
        zp = NULL;
    if ((st = qrange(n, t, &lo, &hi)) ||
        (t == SN_DT_INT32 &&
         (st = sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "quantizing to int32 is not supported"))) ||
        (st = param_axis(n, x, scale, zp, &q)) ||
        (st = known_params(n, scale, zp)))
        return st;
    if (x->dtype != SN_DT_FLOAT && x->dtype != SN_DT_DOUBLE &&
        x->dtype != SN_DT_INT32)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "quantizing %s is not supported",
                             sn_dtype_name(x->dtype));
    if (sn_host_known(x)) {
        size_t count = sn_rt_elements(x);
        void *d = sn_host_alloc(count, sn_dtype_size(t));
        if (!d)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "quantization");
        for (size_t i = 0; i < count; i++) {
            size_t c = channel(&q, i);
            /* x / scale in float32, as the definition */
            float v = (float)sn_rt_get_double(x, i) /
                      (float)sn_rt_get_double(scale, c);
            double z = zp ? (double)sn_rt_get_int(zp, c) : 0.0;
            double r = saturate((double)v, lo - z, hi - z) + z;
            sn_store_value(t, d, i, r, (int64_t)r, 1);
        }
        return sn_out_host(L, n, 0, t, x->rank, x->dims, d);
    }
    if (!L->plan)
        return SHARDNET_UNSUPPORTED;
    if ((st = sn_out_device_as(L, n, t, x->rank, x->dims, &out)))
        return st;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    return quantize_device(L, n, x, scale, zp, &q, lo, hi, out->view);
}

SN_LOWER(sn_lower_dequantize)
{
    sn_rt *x = sn_in(L, n, 0), *scale = sn_in(L, n, 1), *zp = sn_in(L, n, 2);
    sn_rt *out;
    double lo = 0, hi = 255;
    qaxis q;
    sn_view vx, vs, vz;
    shardnet_status st;

    if (zp && sn_rt_elements(zp) == 0)
        zp = NULL;
    if ((st = qrange(n, x->dtype, &lo, &hi)) ||
        (st = param_axis(n, x, scale, zp, &q)))
        return st;
    if (zp && zp->dtype != x->dtype)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the zero point is %s for %s data",
                             sn_dtype_name(zp->dtype),
                             sn_dtype_name(x->dtype));
    if (sn_host_known(x) && sn_host_known(scale) &&
        (!zp || sn_host_known(zp))) {
        size_t count = sn_rt_elements(x);
        float *d = sn_host_alloc(count, sizeof *d);
        if (!d)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "dequantization");
        for (size_t i = 0; i < count; i++) {
            size_t c = channel(&q, i);
            int64_t z = zp ? sn_rt_get_int(zp, c) : 0;
            d[i] = (float)(sn_rt_get_int(x, i) - z) *
                   (float)sn_rt_get_double(scale, c);
        }
        return sn_out_host(L, n, 0, SN_DT_FLOAT, x->rank, x->dims, d);
    }
    if (!L->plan)
        return SHARDNET_UNSUPPORTED;
    if ((st = sn_out_device(L, n, 0, x->rank, x->dims, &out)))
        return st;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    if ((st = sn_dev_view(L, n, x, &vx)) ||
        (st = sn_dev_view(L, n, scale, &vs)))
        return st;
    if (zp) {
        /* a zero point computed on the device (DynamicQuantizeLinear's)
         * is subtracted as it is */
        if ((st = sn_host_known(zp)
                      ? upload_params(L, n, q.d, NULL, 0.0, 1.0, zp, &vz)
                      : sn_dev_view(L, n, zp, &vz)) ||
            (st = sn_emit_binary(L, n, SN_BINARY_SUB, x->rank, x->dims, vx,
                                 q.rank, q.pd, vz, out->view)))
            return st;
        vx = out->view;
    }
    return sn_emit_binary(L, n, SN_BINARY_MUL, x->rank, x->dims, vx, q.rank,
                          q.pd, vs, out->view);
}

/* A step of one binary op over one element each (rank-1 views). */
static shardnet_status emit_one(sn_lower *L, const sn_node *n,
                                sn_binary_op op, sn_view a, sn_view b,
                                sn_view c)
{
    int64_t one = 1;
    return sn_emit_binary(L, n, op, 1, &one, a, 1, &one, b, c);
}

/* Output i of node n as one device float reported as type t, or scratch
 * when the node does not ask for it. */
static shardnet_status scalar_out(sn_lower *L, const sn_node *n, size_t i,
                                  sn_dtype t, sn_view *v)
{
    sn_rt *o;
    int64_t one = 1;
    shardnet_status st;
    if (i >= n->noutputs || n->outputs[i] < 0)
        return sn_scratch(L, 1, v);
    if ((st = sn_out_device(L, n, i, 0, &one, &o)) != SHARDNET_OK)
        return st;
    o->dtype = t;
    *v = o->view;
    return SHARDNET_OK;
}

/*
 * DynamicQuantizeLinear on the device, in the definition's float32 steps:
 * hi = max(0, max x) and -lo = max(0, max -x) by reductions; the scale
 * (hi - lo, or 1 where that is 0, over 255) chosen by a where step; the
 * zero point -lo / scale clamped to 255 and rounded; y = round(x / scale)
 * + zero point clamped to [0, 255], rounding as QuantizeLinear does
 * (|x / scale| <= 255 here).
 */
static shardnet_status dynamic_device(sn_lower *L, const sn_node *n,
                                      sn_rt *x)
{
    size_t count = sn_rt_elements(x);
    int r = x->rank;
    float *kv = malloc(4 * sizeof *kv);
    sn_view vx, k, zero, one, c255, rnd, neg, hi, mlo, vs, vz;
    sn_rt *out;
    sn_step s = {.kind = SN_KERNEL_REDUCE};
    shardnet_status st;
    if (!kv)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "dynamic quantization");
    kv[0] = 0.0f;
    kv[1] = 1.0f;
    kv[2] = 255.0f;
    kv[3] = ROUNDER;
    if ((st = sn_dev_upload(L, n, kv, 4, &k)) ||
        (st = sn_dev_view(L, n, x, &vx)) ||
        (st = sn_out_device_as(L, n, SN_DT_UINT8, r, x->dims, &out)) ||
        (st = scalar_out(L, n, 1, SN_DT_FLOAT, &vs)) ||
        (st = scalar_out(L, n, 2, SN_DT_UINT8, &vz)) ||
        (st = sn_scratch(L, count, &neg)) || (st = sn_scratch(L, 1, &hi)) ||
        (st = sn_scratch(L, 1, &mlo)))
        return st;
    zero = k;
    one = (sn_view){k.buf, k.offset + 1};
    c255 = (sn_view){k.buf, k.offset + 2};
    rnd = (sn_view){k.buf, k.offset + 3};
    s.u.reduce = (sn_reduce_desc){.op = SN_REDUCE_MAX, .outer = 1,
                                  .len = count, .inner = 1, .x = vx,
                                  .y = hi};
    if ((st = sn_emit(L, n, &s)) != SHARDNET_OK)
        return st;
    s.u.reduce.x = neg;
    s.u.reduce.y = mlo;
    sn_step u = {.kind = SN_KERNEL_UNARY};
    u.u.unary = (sn_unary_desc){.op = SN_UNARY_NEG, .n = count, .x = vx,
                                .y = neg};
    sn_step w = {.kind = SN_KERNEL_WHERE};
    /* the scale: where(hi - lo, hi - lo, 1) / 255, hi - lo in vs */
    w.u.where = (sn_where_desc){.rank = 1, .shape = {1},
                                .stride_cond = {1}, .stride_x = {1},
                                .stride_y = {1}, .cond = vs, .x = vs,
                                .y = one, .out = vs};
    if ((st = emit_one(L, n, SN_BINARY_MAX, hi, zero, hi)) ||
        (st = sn_emit(L, n, &u)) || (st = sn_emit(L, n, &s)) ||
        (st = emit_one(L, n, SN_BINARY_MAX, mlo, zero, mlo)) ||
        (st = emit_one(L, n, SN_BINARY_ADD, hi, mlo, vs)) ||
        (st = sn_emit(L, n, &w)) ||
        (st = emit_one(L, n, SN_BINARY_DIV, vs, c255, vs)) ||
        (st = emit_one(L, n, SN_BINARY_DIV, mlo, vs, vz)) ||
        (st = emit_one(L, n, SN_BINARY_MIN, vz, c255, vz)) ||
        (st = emit_one(L, n, SN_BINARY_ADD, vz, rnd, vz)) ||
        (st = emit_one(L, n, SN_BINARY_SUB, vz, rnd, vz)))
        return st;
    int64_t od = 1;
    sn_view y = out->view;
    if ((st = sn_emit_binary(L, n, SN_BINARY_DIV, r, x->dims, vx, 1, &od, vs,
                             y)) ||
        (st = sn_emit_binary(L, n, SN_BINARY_ADD, r, x->dims, y, 1, &od, rnd,
                             y)) ||
        (st = sn_emit_binary(L, n, SN_BINARY_SUB, r, x->dims, y, 1, &od, rnd,
                             y)) ||
        (st = sn_emit_binary(L, n, SN_BINARY_ADD, r, x->dims, y, 1, &od, vz,
                             y)) ||
        (st = sn_emit_binary(L, n, SN_BINARY_MAX, r, x->dims, y, 1, &od,
                             zero, y)))
        return st;
    return sn_emit_binary(L, n, SN_BINARY_MIN, r, x->dims, y, 1, &od, c255,
                          y);
}

/*
 * DynamicQuantizeLinear, on the host where its input is known: the scale maps
 * [min(0, min x), max(0, max x)] onto [0, 255] (1 / 255 when the range is
 * empty), the zero point is where 0 lands, rounded; all in float32.
 */
SN_LOWER(sn_lower_dynamic_quantize)
{
    sn_rt *x = sn_in(L, n, 0);
    size_t count = sn_rt_elements(x);
    float mx = 0.0f, mn = 0.0f, scale, *ps;
    uint8_t *y, *pz;
    shardnet_status st;
    if (x->dtype != SN_DT_FLOAT)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "input of type %s (float only)",
                             sn_dtype_name(x->dtype));
    if (count == 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "an empty input has no range");
    if (!sn_host_known(x))
        return L->plan ? dynamic_device(L, n, x) : SHARDNET_UNSUPPORTED;
    for (size_t i = 0; i < count; i++) {
        float v = (float)sn_rt_get_double(x, i);
        mx = v > mx ? v : mx;
        mn = v < mn ? v : mn;
    }
    scale = (mx == mn ? 1.0f : mx - mn) / 255.0f;
    y = sn_host_alloc(count, 1);
    ps = malloc(sizeof *ps);
    pz = malloc(1);
    if (!y || !ps || !pz) {
        free(y);
        free(ps);
        free(pz);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "dynamic quantization");
    }
    *ps = scale;
    *pz = (uint8_t)saturate((double)(0.0f - mn / scale), 0, 255);
    for (size_t i = 0; i < count; i++) {
        float v = (float)sn_rt_get_double(x, i) / scale;
        y[i] = (uint8_t)(saturate((double)v, -(double)*pz, 255.0 - *pz) +
                         *pz);
    }
    if ((st = sn_out_host(L, n, 0, SN_DT_UINT8, x->rank, x->dims, y))) {
        free(ps);
        free(pz);
        return st;
    }
    if (n->noutputs > 1 && n->outputs[1] >= 0) {
        if ((st = sn_out_host(L, n, 1, SN_DT_FLOAT, 0, NULL, ps))) {
            free(pz);
            return st;
        }
    } else {
        free(ps);
    }
    if (n->noutputs > 2 && n->outputs[2] >= 0)
        return sn_out_host(L, n, 2, SN_DT_UINT8, 0, NULL, pz);
    free(pz);
    return SHARDNET_OK;
}

/* --- integer matrix products ------------------------------------------ */

/* The shapes of an integer product: a (batch, m, k) x b (batch or shared,
 * k, n) = (batch, m, n), and the output's dims. */
typedef struct qmm {
    size_t batch, m, k, n;
    int b_shared; /* b is one (k, n) matrix for every batch item */
    int rank;
    int64_t dims[SN_MAX_DIMS];
} qmm;

static shardnet_status qmm_shape(const sn_node *n, const sn_rt *a,
                                 const sn_rt *b, qmm *q)
{
    int ra = a->rank, rb = b->rank;
    int64_t ka = ra ? a->dims[ra - 1] : 0;
    int64_t kb = rb >= 2 ? b->dims[rb - 2] : rb ? b->dims[0] : 0;
    if (ra < 1 || rb < 1 || ka != kb ||
        (rb > 2 && (ra != rb || memcmp(a->dims, b->dims,
                                       (size_t)(ra - 2) * sizeof *a->dims))))
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "operands of ranks %d and %d: a product of "
                             "(..., M, K) by (K, N) or by the same batch of "
                             "(K, N) is supported",
                             ra, rb);
    q->k = (size_t)ka;
    q->m = ra >= 2 ? (size_t)a->dims[ra - 2] : 1;
    q->n = rb >= 2 ? (size_t)b->dims[rb - 1] : 1;
    q->batch = ra > 2 ? sn_dims_product(0, ra - 2, a->dims) : 1;
    q->b_shared = rb <= 2;
    q->rank = 0;
    for (int i = 0; i < ra - 2; i++)
        q->dims[q->rank++] = a->dims[i];
    if (ra >= 2)
        q->dims[q->rank++] = (int64_t)q->m;
    if (rb >= 2)
        q->dims[q->rank++] = (int64_t)q->n;
    return SHARDNET_OK;
}

double sn_quant_param(const sn_rt *p, size_t i, double dflt)
{
    if (!p || sn_rt_elements(p) == 0)
        return dflt;
    return sn_rt_get_double(p, sn_rt_elements(p) == 1 ? 0 : i);
}

shardnet_status sn_quant_count(const sn_node *n, const sn_rt *p,
                               const char *what, size_t want)
{
    size_t c = p ? sn_rt_elements(p) : 0;
    if (c > 1 && c != want)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "%s has %zu values, not 1 or %zu", what, c, want);
    return SHARDNET_OK;
}

shardnet_status sn_quant_host_param(const sn_node *n, const sn_rt *p,
                                    const char *what, size_t want)
{
    shardnet_status st = sn_quant_count(n, p, what, want);
    if (st == SHARDNET_OK && p && !sn_host_known(p))
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "%s must be known when the model is planned",
                             what);
    return st;
}

/* The operands of MatMulInteger and QLinearMatMul: uint8 or int8. */
static shardnet_status eight_bit_operands(const sn_node *n, const sn_rt *a,
                                          const sn_rt *b)
{
    for (int i = 0; i < 2; i++) {
        sn_dtype t = (i ? b : a)->dtype;
        if (t != SN_DT_UINT8 && t != SN_DT_INT8)
            return sn_node_error(n, SHARDNET_UNSUPPORTED,
                                 "operands of type %s (uint8 or int8)",
                                 sn_dtype_name(t));
    }
    return SHARDNET_OK;
}

/* The exact sums (a - azp)(b - bzp) (batch, m, n) in int64, on the host. */
static int64_t *int_products(const sn_rt *a, const sn_rt *azp,
                             const sn_rt *b, const sn_rt *bzp, const qmm *q)
{
    size_t total = q->batch * q->m * q->n;
    int64_t *s = sn_host_alloc(total, sizeof *s);
    if (!s)
        return NULL;
    for (size_t t = 0; t < q->batch; t++)
        for (size_t i = 0; i < q->m; i++)
            for (size_t j = 0; j < q->n; j++) {
                int64_t acc = 0, za = (int64_t)sn_quant_param(azp, i, 0);
                int64_t zb = (int64_t)sn_quant_param(bzp, j, 0);
                size_t ao = (t * q->m + i) * q->k;
                size_t bo = q->b_shared ? 0 : t * q->k * q->n;
                for (size_t k = 0; k < q->k; k++)
                    acc += (sn_rt_get_int(a, ao + k) - za) *
                           (sn_rt_get_int(b, bo + k * q->n + j) - zb);
                s[(t * q->m + i) * q->n + j] = acc;
            }
    return s;
}

/* The largest |v - z| over v's values (its elements when known, else its
 * type's range) and the zero points z (one or more; none: 0; computed on
 * the device: any of v's type). */
double sn_quant_max_offset(const sn_rt *v, const sn_rt *zp)
{
    double tlo = v->dtype == SN_DT_INT8 ? -128 : 0, thi = tlo + 255;
    double lo = tlo, hi = thi, m = 0;
    size_t cnt = v->host ? sn_rt_elements(v) : 0;
    size_t nz = zp ? sn_rt_elements(zp) : 0;
    if (cnt) {
        lo = hi = (double)sn_rt_get_int(v, 0);
        for (size_t i = 1; i < cnt; i++) {
            double x = (double)sn_rt_get_int(v, i);
            lo = x < lo ? x : lo;
            hi = x > hi ? x : hi;
        }
    }
    if (nz && !zp->host) /* unknown, but of v's type */
        return fmax(hi - tlo, thi - lo);
    for (size_t i = 0; i < (nz ? nz : 1); i++) {
        double z = nz ? sn_rt_get_double(zp, i) : 0.0;
        m = fmax(m, fmax(fabs(lo - z), fabs(hi - z)));
    }
    return m;
}

/* v - z on the device into a fresh scratch (z one value, or one per row
 * (zdims (rows, 1)) or per column (zdims (cols))), or v's own view
 * without zero points. */
shardnet_status sn_quant_offset_device(sn_lower *L, const sn_node *n,
                                       sn_rt *v, sn_rt *zp, int zrank,
                                       const int64_t *zdims, sn_view *out)
{
    sn_view vv, vz;
    shardnet_status st;
    if ((st = sn_dev_view(L, n, v, &vv)) != SHARDNET_OK)
        return st;
    if (!zp || sn_rt_elements(zp) == 0) {
        *out = vv;
        return SHARDNET_OK;
    }
    if (sn_rt_elements(zp) == 1)
        zrank = 0;
    if ((st = zp->host ? upload_params(L, n, sn_rt_elements(zp), NULL, 0.0,
                                       1.0, zp, &vz)
                       : sn_dev_view(L, n, zp, &vz)) ||
        (st = sn_scratch(L, sn_rt_elements(v), out)))
        return st;
    return sn_emit_binary(L, n, SN_BINARY_SUB, v->rank, v->dims, vv, zrank,
                          zdims, vz, *out);
}

/* MatMulInteger on the device: a - a_zero_point and b - b_zero_point by
 * subtraction, then one batched GEMM where every sum is below 2^24 in
 * magnitude (exact in float); past that, with as_float (its float sums
 * are all that is read), GEMMs over runs of K whose partial sums stay
 * below it, else refused. */
static shardnet_status matmul_integer_device(sn_lower *L, const sn_node *n,
                                             sn_rt *a, sn_rt *azp, sn_rt *b,
                                             sn_rt *bzp, const qmm *q,
                                             int as_float)
{
    int64_t rd[2] = {(int64_t)q->m, 1}, cd[1] = {(int64_t)q->n};
    double per_k = sn_quant_max_offset(a, azp) * sn_quant_max_offset(b, bzp);
    double bound = (double)q->k * per_k;
    size_t run = bound > SN_FLOAT_EXACT ? (size_t)(SN_FLOAT_EXACT / per_k)
                                        : 0;
    sn_step s = {.kind = SN_KERNEL_GEMM};
    sn_view va, vb;
    sn_rt *out;
    shardnet_status st;
    if (run && !as_float)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "sums of up to %.0f (K = %zu) computed on the "
                             "device would not be exact in float (at most "
                             "2^24); the operands must be known when the "
                             "model is planned",
                             bound, q->k);
    if (!L->plan)
        return SHARDNET_UNSUPPORTED;
    if ((st = sn_out_device_as(L, n, as_float ? SN_DT_FLOAT : SN_DT_INT32,
                               q->rank, q->dims, &out)))
        return st;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    if ((st = sn_quant_offset_device(L, n, a, azp, a->rank >= 2 ? 2 : 1,
                          a->rank >= 2 ? rd : rd + 1, &va)) ||
        (st = sn_quant_offset_device(L, n, b, bzp, b->rank >= 2 ? 1 : 0, cd,
                                     &vb)))
        return st;
    if (q->k == 0)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "an empty product (K = 0) on the device");
    s.u.gemm = (sn_gemm_desc){
        .m = q->m, .n = q->n, .k = q->k, .alpha = 1.0f, .a = va, .b = vb,
        .c = out->view, .lda = q->k, .ldb = q->n, .ldc = q->n,
        .batch = q->batch, .stride_a = q->m * q->k,
        .stride_b = q->b_shared ? 0 : q->k * q->n, .stride_c = q->m * q->n};
    return sn_emit_gemm_runs(L, n, &s, run);
}

void *sn_narrow_sums(int64_t *s, size_t count, int as_float)
{
    /* in place: an int32 or a float fits where an int64 was */
    int32_t *y = (int32_t *)s;
    float *f = (float *)s;
    for (size_t i = 0; i < count; i++) {
        int32_t v = (int32_t)(uint32_t)(uint64_t)s[i];
        if (as_float)
            f[i] = (float)v;
        else
            y[i] = v;
    }
    return s;
}

/* MatMulInteger (opset 10): int32 (a - a_zero_point)(b - b_zero_point),
 * a's zero point one or one per row, b's one or one per column; on the
 * host where both operands are known, else on the device where exact or
 * read as float (float_sums, as ConvInteger). */
SN_LOWER(sn_lower_matmul_integer)
{
    sn_rt *a = sn_in(L, n, 0), *b = sn_in(L, n, 1);
    sn_rt *azp = sn_in(L, n, 2), *bzp = sn_in(L, n, 3);
    int as_float = sn_attr_int(n, "float_sums", 0) != 0;
    qmm q;
    int64_t *s;
    size_t total;
    shardnet_status st;
    if ((st = eight_bit_operands(n, a, b)))
        return st;
    if ((st = qmm_shape(n, a, b, &q)) ||
        (st = sn_quant_count(n, azp, "a_zero_point", q.m)) ||
        (st = sn_quant_count(n, bzp, "b_zero_point", q.n)))
        return st;
    if (!sn_host_known(a) || !sn_host_known(b) ||
        (azp && !sn_host_known(azp)) || (bzp && !sn_host_known(bzp)))
        return matmul_integer_device(L, n, a, azp, b, bzp, &q, as_float);
    total = q.batch * q.m * q.n;
    if (!(s = int_products(a, azp, b, bzp, &q)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "integer product");
    return sn_out_host(L, n, 0, as_float ? SN_DT_FLOAT : SN_DT_INT32, q.rank,
                       q.dims, sn_narrow_sums(s, total, as_float));
}

/*
 * QLinearMatMul on the device (an operand computed there, such as a
 * QuantizeLinear's activations): the integer sums (a - azp)(b - bzp) by
 * GEMMs over runs of K short enough that every partial sum stays below
 * 2^24 (so exact in float whatever the order), each run added into the
 * sums; times the multiplier a_scale b_scale / y_scale computed in
 * float32 (per row of a and column of b), as ONNX Runtime requantizes;
 * then rounded half to even, y_zero_point added, saturated.  Sums whose
 * magnitude passes 2^24 are rounded to float as their runs are added
 * (ONNX Runtime converts its int32 sum to float once): a result can then
 * differ by one where the product lands on a tie, and only there.
 */
static shardnet_status qlinear_matmul_device(sn_lower *L, const sn_node *n,
                                             sn_rt *const in[8], sn_dtype t,
                                             double lo, double hi,
                                             const qmm *q)
{
    sn_rt *a = in[0], *as = in[1], *azp = in[2], *b = in[3], *bs = in[4],
          *bzp = in[5], *ys = in[6], *yzp = in[7];
    int64_t rd[2] = {(int64_t)q->m, 1}, cd[1] = {(int64_t)q->n};
    double per_k = sn_quant_max_offset(a, azp) * sn_quant_max_offset(b, bzp);
    size_t run = per_k > 0 && (double)q->k * per_k > SN_FLOAT_EXACT
                     ? (size_t)(SN_FLOAT_EXACT / per_k)
                     : q->k;
    size_t rows = as && sn_rt_elements(as) > 1 ? q->m : 1,
           cols = bs && sn_rt_elements(bs) > 1 ? q->n : 1;
    sn_view va, vb, vsum;
    sn_rt *out;
    shardnet_status st;
    if (!L->plan)
        return SHARDNET_UNSUPPORTED;
    if ((st = sn_out_device_as(L, n, t, q->rank, q->dims, &out)))
        return st;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    if (q->k == 0)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "an empty product (K = 0) on the device");
    if ((st = sn_quant_offset_device(L, n, a, azp, a->rank >= 2 ? 2 : 1,
                          a->rank >= 2 ? rd : rd + 1, &va)) ||
        (st = sn_quant_offset_device(L, n, b, bzp, b->rank >= 2 ? 1 : 0, cd,
                                     &vb)) ||
        (st = sn_scratch(L, q->batch * q->m * q->n, &vsum)))
        return st;
    sn_step s = {.kind = SN_KERNEL_GEMM};
    s.u.gemm = (sn_gemm_desc){
        .m = q->m, .n = q->n, .k = q->k, .alpha = 1.0f, .a = va, .b = vb,
        .c = vsum, .lda = q->k, .ldb = q->n, .ldc = q->n, .batch = q->batch,
        .stride_a = q->m * q->k, .stride_b = q->b_shared ? 0 : q->k * q->n,
        .stride_c = q->m * q->n};
    if ((st = sn_emit_gemm_runs(L, n, &s, run)))
        return st;
    /* the multipliers, (rows, cols) broadcast over the sums */
    float *mul = malloc(rows * cols * sizeof *mul);
    if (!mul)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "QLinearMatMul multipliers");
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            mul[r * cols + c] = (float)sn_quant_param(as, r, 1) *
                                (float)sn_quant_param(bs, c, 1) /
                                (float)sn_quant_param(ys, 0, 1);
    int64_t md[2] = {(int64_t)rows, (int64_t)cols};
    return sn_requantize_device(L, n, q->rank, q->dims, vsum,
                                rows > 1 ? 2 : cols > 1 ? 1 : 0,
                                rows > 1 ? md : md + 1, mul, lo, hi,
                                sn_quant_param(yzp, 0, 0), out->view);
}

shardnet_status sn_requantize_device(sn_lower *L, const sn_node *n, int rank,
                                     const int64_t *dims, sn_view sums,
                                     int mrank, const int64_t *mdims,
                                     float *mul, double lo, double hi,
                                     double z, sn_view y)
{
    sn_view vmul, vlo, vhi, vz = {0};
    shardnet_status st;
    if ((st = sn_dev_upload(L, n, mul, sn_dims_product(0, mrank, mdims),
                            &vmul)) ||
        (st = upload_params(L, n, 1, NULL, lo - z, 0.0, NULL, &vlo)) ||
        (st = upload_params(L, n, 1, NULL, hi - z, 0.0, NULL, &vhi)) ||
        (z != 0.0 &&
         (st = upload_params(L, n, 1, NULL, z, 0.0, NULL, &vz))) ||
        (st = sn_emit_binary(L, n, SN_BINARY_MUL, rank, dims, sums, mrank,
                             mdims, vmul, y)))
        return st;
    return emit_round_saturate(L, n, rank, dims, y, 0, NULL, vlo, vhi, vz);
}

/* QLinearMatMul (opset 10): round((a - azp)(b - bzp) a_scale b_scale /
 * y_scale) + y_zero_point, saturated to y's type; scales and zero points
 * of a one or one per row, of b one or one per column; on the host where
 * both operands are known, else on the device (qlinear_matmul_device). */
SN_LOWER(sn_lower_qlinear_matmul)
{
    sn_rt *a = sn_in(L, n, 0), *as = sn_in(L, n, 1), *azp = sn_in(L, n, 2);
    sn_rt *b = sn_in(L, n, 3), *bs = sn_in(L, n, 4), *bzp = sn_in(L, n, 5);
    sn_rt *ys = sn_in(L, n, 6), *yzp = sn_in(L, n, 7);
    sn_dtype t = yzp ? yzp->dtype : SN_DT_UINT8;
    double lo = 0, hi = 255;
    qmm q;
    int64_t *s;
    void *y;
    size_t total;
    shardnet_status st;
    if ((st = qrange(n, t, &lo, &hi)) || (st = qmm_shape(n, a, b, &q)) ||
        (st = sn_quant_host_param(n, as, "a_scale", q.m)) ||
        (st = sn_quant_host_param(n, azp, "a_zero_point", q.m)) ||
        (st = sn_quant_host_param(n, bs, "b_scale", q.n)) ||
        (st = sn_quant_host_param(n, bzp, "b_zero_point", q.n)) ||
        (st = sn_quant_host_param(n, ys, "y_scale", 1)) ||
        (st = sn_quant_host_param(n, yzp, "y_zero_point", 1)))
        return st;
    if ((st = eight_bit_operands(n, a, b)))
        return st;
    if (t == SN_DT_INT32)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "a y_zero_point of type int32 (uint8 or int8)");
    if (!sn_host_known(a) || !sn_host_known(b)) {
        sn_rt *const in[8] = {a, as, azp, b, bs, bzp, ys, yzp};
        return qlinear_matmul_device(L, n, in, t, lo, hi, &q);
    }
    total = q.batch * q.m * q.n;
    if (!(s = int_products(a, azp, b, bzp, &q)) ||
        !(y = sn_host_alloc(total, sn_dtype_size(t)))) {
        free(s);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "integer product");
    }
    for (size_t i = 0; i < total; i++) {
        size_t r = (i / q.n) % q.m, c = i % q.n;
        double z = sn_quant_param(yzp, 0, 0);
        double v = (double)s[i] * sn_quant_param(as, r, 1) * sn_quant_param(bs, c, 1) /
                   sn_quant_param(ys, 0, 1);
        double out = saturate(v, lo - z, hi - z) + z;
        sn_store_value(t, y, i, out, (int64_t)out, 1);
    }
    free(s);
    return sn_out_host(L, n, 0, t, q.rank, q.dims, y);
}
