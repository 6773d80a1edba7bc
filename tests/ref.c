/*
 * The plain C reference (see ref.h): obviously-correct loops, nothing clever.
 */
#include <config.h>

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "core/half.h"
#include "ref.h"

void ref_gemm_layout(sn_gemm_desc *d, size_t pad, int share_b, size_t off,
                     size_t n[3])
{
    size_t ar = d->trans_a ? d->k : d->m, ac = d->trans_a ? d->m : d->k;
    size_t br = d->trans_b ? d->n : d->k, bc = d->trans_b ? d->k : d->n;
    d->lda = ac + pad;
    d->ldb = bc + pad;
    d->ldc = d->n + pad;
    d->stride_a = ar * d->lda;
    d->stride_b = share_b ? 0 : br * d->ldb;
    d->stride_c = d->m * d->ldc;
    n[0] = off + d->batch * d->stride_a;
    n[1] = off + (share_b ? 1 : d->batch) * br * d->ldb;
    n[2] = off + d->batch * d->stride_c;
}

void ref_gemm(const sn_gemm_desc *d, const float *a, const float *b, float *c,
              const float *bias, const float *res)
{
    for (size_t bi = 0; bi < d->batch; bi++) {
        const float *ab = a + bi * d->stride_a; /* m x k, or k x m stored */
        const float *bb = b + bi * d->stride_b; /* k x n, or n x k stored */
        float *cb = c + bi * d->stride_c;       /* m x n */
        for (size_t i = 0; i < d->m; i++) {
            for (size_t j = 0; j < d->n; j++) {
                double acc = 0.0, out;
                for (size_t p = 0; p < d->k; p++) {
                    double av = d->trans_a ? ab[p * d->lda + i]
                                           : ab[i * d->lda + p];
                    double bv = d->trans_b ? bb[j * d->ldb + p]
                                           : bb[p * d->ldb + j];
                    acc += av * bv;
                }
                out = (double)d->alpha * acc;
                if (d->beta != 0.0f)
                    out += (double)d->beta * cb[i * d->ldc + j];
                float v = (float)out;
                if (bias)
                    v += d->bias_rows ? bias[i] : bias[j];
                if (res)
                    v += res[bi * d->stride_c + i * d->ldc + j];
                if (d->act == SN_ACT_RELU)
                    v = ref_unary_op(SN_UNARY_RELU, v, 0.0f, 0.0f);
                if (d->act == SN_ACT_RELU6)
                    v = ref_unary_op(SN_UNARY_CLIP, v, 0.0f, 6.0f);
                cb[i * d->ldc + j] = v;
            }
        }
    }
}

float ref_binary_op(sn_binary_op op, float x, float y)
{
    switch (op) {
    case SN_BINARY_ADD:
        return x + y;
    case SN_BINARY_SUB:
        return x - y;
    case SN_BINARY_MUL:
        return x * y;
    case SN_BINARY_DIV:
        return x / y;
    case SN_BINARY_MAX:
        return fmaxf(x, y);
    case SN_BINARY_MIN:
        return fminf(x, y);
    case SN_BINARY_POW:
        return powf(x, y);
    case SN_BINARY_MOD: {
        float r = fmodf(x, y);
        return r != 0.0f && (r < 0.0f) != (y < 0.0f) ? r + y : r;
    }
    case SN_BINARY_FMOD:
        return fmodf(x, y);
    case SN_BINARY_EQUAL:
        return x == y ? 1.0f : 0.0f;
    case SN_BINARY_GREATER:
        return x > y ? 1.0f : 0.0f;
    case SN_BINARY_GREATER_EQUAL:
        return x >= y ? 1.0f : 0.0f;
    case SN_BINARY_AND:
        return x != 0.0f && y != 0.0f ? 1.0f : 0.0f;
    case SN_BINARY_OR:
        return x != 0.0f || y != 0.0f ? 1.0f : 0.0f;
    case SN_BINARY_XOR:
        return (x != 0.0f) != (y != 0.0f) ? 1.0f : 0.0f;
    case SN_BINARY_PRELU:
        return x < 0.0f ? y * x : x;
    case SN_BINARY_COUNT:
        break;
    }
    return NAN;
}

void ref_binary(const sn_binary_desc *d, const float *a, const float *b,
                float *c)
{
    size_t idx[SN_MAX_DIMS] = {0};
    size_t total = 1;

    for (size_t j = 0; j < d->rank; j++)
        total *= d->shape[j];
    for (size_t i = 0; i < total; i++) {
        size_t oa = 0, ob = 0;
        for (size_t j = 0; j < d->rank; j++) {
            oa += idx[j] * d->stride_a[j];
            ob += idx[j] * d->stride_b[j];
        }
        c[i] = ref_binary_op(d->op, a[oa], b[ob]);
        if (d->act == SN_ACT_RELU)
            c[i] = ref_unary_op(SN_UNARY_RELU, c[i], 0.0f, 0.0f);
        /* Next output index in C order. */
        for (size_t j = d->rank; j-- > 0;) {
            if (++idx[j] < d->shape[j])
                break;
            idx[j] = 0;
        }
    }
}

/*
 * The unary ops as sn_unary_desc defines them.  Where a formula compares
 * (LEAKY_RELU, HARD_SIGMOID, CLIP) the comparisons are ordered so that a
 * NaN input stays NaN: a false comparison keeps the value.
 */
float ref_unary_op(sn_unary_op op, float x, float alpha, float beta)
{
    float t;

    switch (op) {
    case SN_UNARY_RELU:
        return x < 0.0f ? 0.0f : x;
    case SN_UNARY_SIGMOID:
        return 1.0f / (1.0f + expf(-x));
    case SN_UNARY_TANH:
        return tanhf(x);
    case SN_UNARY_ERF:
        return erff(x);
    case SN_UNARY_EXP:
        return expf(x);
    case SN_UNARY_LOG:
        return logf(x);
    case SN_UNARY_SQRT:
        return sqrtf(x);
    case SN_UNARY_NEG:
        return -x;
    case SN_UNARY_ABS:
        return fabsf(x);
    case SN_UNARY_LEAKY_RELU:
        return x < 0.0f ? alpha * x : x;
    case SN_UNARY_HARD_SIGMOID:
        t = alpha * x + beta;
        t = t > 1.0f ? 1.0f : t; /* min(1, t) */
        return t < 0.0f ? 0.0f : t; /* max(0, t) */
    case SN_UNARY_CLIP:
        t = x < alpha ? alpha : x; /* max(x, alpha) */
        return t > beta ? beta : t; /* min(t, beta) */
    case SN_UNARY_CLIP_GATE:
        t = x + alpha;
        t = t < 0.0f ? 0.0f : t;
        t = t > beta ? beta : t;
        t = x * t; /* rounded to float before the division */
        return t / beta;
    case SN_UNARY_GELU:
        return 0.5f * x * (1.0f + erff(x / 1.41421356237309505f));
    case SN_UNARY_GELU_TANH:
        return 0.5f * x *
               (1.0f + tanhf(0.797884560802865356f *
                             (x + 0.044715f * x * x * x)));
    case SN_UNARY_SIN:
        return sinf(x);
    case SN_UNARY_COS:
        return cosf(x);
    case SN_UNARY_TAN:
        return tanf(x);
    case SN_UNARY_ASIN:
        return asinf(x);
    case SN_UNARY_ACOS:
        return acosf(x);
    case SN_UNARY_ATAN:
        return atanf(x);
    case SN_UNARY_SINH:
        return sinhf(x);
    case SN_UNARY_COSH:
        return coshf(x);
    case SN_UNARY_ASINH:
        return asinhf(x);
    case SN_UNARY_ACOSH:
        return acoshf(x);
    case SN_UNARY_ATANH:
        return atanhf(x);
    case SN_UNARY_CEIL:
        return ceilf(x);
    case SN_UNARY_FLOOR:
        return floorf(x);
    case SN_UNARY_ROUND:
        return rintf(x); /* the default rounding: halves to even */
    case SN_UNARY_SIGN:
        return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x;
    case SN_UNARY_ELU:
        return x < 0.0f ? alpha * expm1f(x) : x;
    case SN_UNARY_SELU:
        return x <= 0.0f ? beta * (alpha * expm1f(x)) : beta * x;
    case SN_UNARY_CELU: /* the exponential term has x's sign */
        return x > 0.0f ? x : alpha * expm1f(x / alpha);
    case SN_UNARY_SOFTPLUS:
        return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
    case SN_UNARY_SOFTSIGN:
        return x / (1.0f + fabsf(x));
    case SN_UNARY_THRESHOLDED_RELU:
        return x > alpha ? x : 0.0f;
    case SN_UNARY_SHRINK:
        return x < -alpha ? x + beta : x > alpha ? x - beta : 0.0f;
    case SN_UNARY_HARD_SWISH:
        t = x / 6.0f + 0.5f;
        t = t > 1.0f ? 1.0f : t;
        return x * (t < 0.0f ? 0.0f : t);
    case SN_UNARY_MISH:
        t = x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
        return x * tanhf(t);
    case SN_UNARY_ISNAN:
        return isnan(x) ? 1.0f : 0.0f;
    case SN_UNARY_ISINF:
        return (isinf(x) && ((x > 0.0f && alpha != 0.0f) ||
                             (x < 0.0f && beta != 0.0f)))
                   ? 1.0f
                   : 0.0f;
    case SN_UNARY_ROUND_HALF: /* through the host's conversions */
        return sn_half_to_float(sn_float_to_half(x));
    case SN_UNARY_ROUND_BF16:
        return sn_bf16_to_float(sn_float_to_bf16(x));
    case SN_UNARY_COUNT:
        break;
    }
    return NAN;
}

void ref_unary(const sn_unary_desc *d, const float *x, float *y)
{
    for (size_t i = 0; i < d->n; i++) {
        const float v = ref_unary_op(d->op, x[i], d->alpha, d->beta);
        y[i] = d->gate ? x[i] * v : v;
    }
}

/* Element (o, r, j) of an (outer, len, inner) tensor. */
static size_t at(size_t len, size_t inner, size_t o, size_t r, size_t j)
{
    return (o * len + r) * inner + j;
}

/* The maximum, NaN if any value is NaN. */
static float max_of(float m, float v)
{
    if (isnan(m) || isnan(v))
        return NAN;
    return v > m ? v : m;
}

void ref_softmax(const sn_softmax_desc *d, const float *x, float *y)
{
    for (size_t o = 0; o < d->outer; o++) {
        for (size_t j = 0; j < d->inner; j++) {
            float m = x[at(d->len, d->inner, o, 0, j)], s = 0.0f;
            for (size_t r = 1; r < d->len; r++)
                m = max_of(m, x[at(d->len, d->inner, o, r, j)]);
            for (size_t r = 0; r < d->len; r++)
                s += expf(x[at(d->len, d->inner, o, r, j)] - m);
            for (size_t r = 0; r < d->len; r++) {
                size_t i = at(d->len, d->inner, o, r, j);
                y[i] = d->log_softmax ? (x[i] - m) - logf(s)
                                      : expf(x[i] - m) / s;
            }
        }
    }
}

void ref_reduce(const sn_reduce_desc *d, const float *x, float *y)
{
    for (size_t o = 0; o < d->outer; o++) {
        for (size_t j = 0; j < d->inner; j++) {
            float acc = d->op == SN_REDUCE_MAX || d->op == SN_REDUCE_MIN
                            ? x[at(d->len, d->inner, o, 0, j)]
                        : d->op == SN_REDUCE_PROD ? 1.0f
                                                  : 0.0f;
            for (size_t r = 0; r < d->len; r++) {
                float v = x[at(d->len, d->inner, o, r, j)];
                switch (d->op) {
                case SN_REDUCE_MAX:
                    acc = max_of(acc, v);
                    break;
                case SN_REDUCE_MIN:
                    acc = v < acc || isnan(v) ? v : acc;
                    break;
                case SN_REDUCE_PROD:
                    acc *= v;
                    break;
                case SN_REDUCE_SUM_SQUARE:
                    acc += v * v;
                    break;
                case SN_REDUCE_SUM_ABS:
                    acc += fabsf(v);
                    break;
                default:
                    acc += v;
                }
            }
            if (d->op == SN_REDUCE_MEAN)
                acc /= (float)d->len;
            y[o * d->inner + j] = acc;
        }
    }
}

void ref_scan(const sn_scan_desc *d, const float *x, float *y)
{
    for (size_t o = 0; o < d->outer; o++)
        for (size_t j = 0; j < d->inner; j++) {
            float acc = 0.0f;
            for (size_t t = 0; t < d->len; t++) {
                size_t r = d->reverse ? d->len - 1 - t : t;
                size_t i = at(d->len, d->inner, o, r, j);
                float v = x[i];
                y[i] = d->exclusive ? acc : acc + v;
                acc += v;
            }
        }
}

void ref_topk(const sn_topk_desc *d, const float *x, float *values,
              float *indices)
{
    for (size_t o = 0; o < d->outer; o++)
        for (size_t j = 0; j < d->inner; j++) {
            /* insertion sort of the indices by the ranking */
            size_t order[64];
            size_t m = 0;
            for (size_t r = 0; r < d->len && r < 64; r++) {
                float v = x[at(d->len, d->inner, o, r, j)];
                size_t p = m++;
                for (; p > 0; p--) {
                    float w = x[at(d->len, d->inner, o, order[p - 1], j)];
                    int before = isnan(v) != isnan(w) ? isnan(v)
                                 : v != w && !isnan(v)
                                     ? (d->largest ? v > w : v < w)
                                     : d->last_index != 0;
                    if (!before)
                        break;
                    order[p] = order[p - 1];
                }
                order[p] = r;
            }
            for (size_t t = 0; t < d->k && t < m; t++) {
                size_t i = (o * d->k + t) * d->inner + j;
                if (values)
                    values[i] = x[at(d->len, d->inner, o, order[t], j)];
                indices[i] = (float)order[t];
            }
        }
}

/* Step the C-order index idx over shape (rank dims); 0 after the last. */
static int next_index(size_t rank, const size_t *shape, size_t *idx)
{
    for (size_t j = rank; j-- > 0;) {
        if (++idx[j] < shape[j])
            return 1;
        idx[j] = 0;
    }
    return 0;
}

void ref_where(const sn_where_desc *d, const float *cond, const float *x,
               const float *y, float *out)
{
    size_t idx[SN_MAX_DIMS] = {0}, total = 1;

    for (size_t j = 0; j < d->rank; j++)
        total *= d->shape[j];
    for (size_t i = 0; i < total; i++) {
        size_t oc = 0, ox = 0, oy = 0;
        for (size_t j = 0; j < d->rank; j++) {
            oc += idx[j] * d->stride_cond[j];
            ox += idx[j] * d->stride_x[j];
            oy += idx[j] * d->stride_y[j];
        }
        out[i] = cond[oc] != 0.0f ? x[ox] : y[oy];
        next_index(d->rank, d->shape, idx);
    }
}

void ref_copy(const sn_copy_desc *d, const float *src, float *dst)
{
    size_t idx[SN_MAX_DIMS] = {0};

    for (size_t j = 0; j < d->rank; j++)
        if (d->shape[j] == 0)
            return;
    do {
        ptrdiff_t os = 0, od = 0;
        for (size_t j = 0; j < d->rank; j++) {
            os += (ptrdiff_t)idx[j] * d->src_stride[j];
            od += (ptrdiff_t)idx[j] * d->dst_stride[j];
        }
        dst[od] = src[os];
    } while (next_index(d->rank, d->shape, idx));
}

void ref_im2col(const sn_im2col_desc *d, const float *src, float *dst)
{
    const size_t cols = d->out_h * d->out_w;

    for (size_t c = 0; c < d->channels; c++)
        for (size_t ky = 0; ky < d->k_h; ky++)
            for (size_t kx = 0; kx < d->k_w; kx++) {
                size_t row = (c * d->k_h + ky) * d->k_w + kx;
                for (size_t oy = 0; oy < d->out_h; oy++)
                    for (size_t ox = 0; ox < d->out_w; ox++) {
                        long long iy = (long long)(oy * d->stride_h +
                                                   ky * d->dil_h) -
                                       (long long)d->pad_top;
                        long long ix = (long long)(ox * d->stride_w +
                                                   kx * d->dil_w) -
                                       (long long)d->pad_left;
                        float v = 0.0f;
                        if (iy >= 0 && iy < (long long)d->in_h && ix >= 0 &&
                            ix < (long long)d->in_w)
                            v = src[(c * d->in_h + (size_t)iy) * d->in_w +
                                    (size_t)ix];
                        dst[row * cols + oy * d->out_w + ox] = v;
                    }
            }
}

/* lo <= v < hi */
static int inside(long long v, long long lo, long long hi)
{
    return v >= lo && v < hi;
}

void ref_pool(const sn_pool_desc *d, const float *src, float *dst)
{
    const long long h = (long long)d->in_h, w = (long long)d->in_w;

    for (size_t p = 0; p < d->planes; p++)
        for (size_t oy = 0; oy < d->out_h; oy++)
            for (size_t ox = 0; ox < d->out_w; ox++) {
                float acc = d->op == SN_POOL_MAX ? -INFINITY : 0.0f;
                size_t count = 0;
                for (size_t ky = 0; ky < d->k_h; ky++)
                    for (size_t kx = 0; kx < d->k_w; kx++) {
                        long long iy = (long long)(oy * d->stride_h) -
                                       (long long)d->pad_top +
                                       (long long)(ky * d->dil_h);
                        long long ix = (long long)(ox * d->stride_w) -
                                       (long long)d->pad_left +
                                       (long long)(kx * d->dil_w);
                        int in = inside(iy, 0, h) && inside(ix, 0, w);
                        if (d->count_include_pad
                                ? inside(iy, -(long long)d->pad_top,
                                         h + (long long)d->pad_bottom) &&
                                      inside(ix, -(long long)d->pad_left,
                                             w + (long long)d->pad_right)
                                : in)
                            count++;
                        if (!in)
                            continue;
                        float v = src[(p * d->in_h + (size_t)iy) * d->in_w +
                                      (size_t)ix];
                        acc = d->op == SN_POOL_MAX ? max_of(acc, v) : acc + v;
                    }
                if (d->op == SN_POOL_AVG)
                    acc /= (float)count;
                dst[(p * d->out_h + oy) * d->out_w + ox] = acc;
            }
}

void ref_layernorm(const sn_layernorm_desc *d, const float *x,
                   const float *scale, const float *bias, float *y)
{
    for (size_t o = 0; o < d->outer; o++) {
        const float *xr = x + o * d->len;
        double mean = 0.0, var = 0.0;
        for (size_t i = 0; i < d->len; i++)
            mean += xr[i];
        mean /= (double)d->len;
        for (size_t i = 0; i < d->len; i++)
            var += (xr[i] - mean) * (xr[i] - mean);
        var /= (double)d->len;
        for (size_t i = 0; i < d->len; i++) {
            double v = (xr[i] - mean) / sqrt(var + (double)d->epsilon) *
                       scale[i];
            if (bias)
                v += bias[i];
            y[o * d->len + i] = (float)v;
        }
    }
}

void ref_gather(const sn_gather_desc *d, const float *data,
                const int32_t *indices, float *out)
{
    for (size_t o = 0; o < d->outer; o++)
        for (size_t j = 0; j < d->nidx; j++) {
            long long k = indices[j];
            if (k < 0)
                k += (long long)d->axis_len;
            for (size_t i = 0; i < d->inner; i++) {
                float v = 0.0f;
                if (k >= 0 && k < (long long)d->axis_len)
                    v = data[(o * d->axis_len + (size_t)k) * d->inner + i];
                out[(o * d->nidx + j) * d->inner + i] = v;
            }
        }
}

void ref_resample(const sn_resample_desc *d, const float *x,
                  const float *table, float *y)
{
    size_t nout = d->planes, in_plane = 1, out_plane = 1;
    for (size_t i = 0; i < d->rank; i++) {
        in_plane *= d->in[i];
        out_plane *= d->out[i];
    }
    nout *= out_plane;
    for (size_t e = 0; e < nout; e++) {
        size_t o[SN_MAX_DIMS], j[SN_MAX_DIMS] = {0}, rest = e % out_plane;
        const float *xp = x + (e / out_plane) * in_plane;
        double acc = 0.0;
        int outside = 0;
        for (size_t i = d->rank; i-- > 0;) {
            o[i] = rest % d->out[i];
            rest /= d->out[i];
        }
        for (;;) {
            size_t off = 0, i;
            double w = 1.0;
            for (i = 0; i < d->rank; i++) {
                const float *t =
                    table + d->table_off[i] + 2 * (o[i] * d->taps[i] + j[i]);
                if (!(t[0] >= 0.0f && t[0] < (float)d->in[i]))
                    outside = 1;
                else
                    off = off * d->in[i] + (size_t)t[0];
                w *= t[1];
            }
            if (outside)
                break;
            acc += w * xp[off];
            for (i = d->rank; i-- > 0;) {
                if (++j[i] < d->taps[i])
                    break;
                j[i] = 0;
            }
            if (i == (size_t)-1)
                break;
        }
        y[e] = outside ? d->fill : (float)acc;
    }
}

/* GridSample's padding of a pixel coordinate c on an axis of n. */
static double grid_pad(const sn_grid_sample_desc *d, double c, size_t n)
{
    double lo, span, e, hi = (double)n - 1.0;
    if (d->padding == SN_GRID_ZEROS)
        return c;
    if (d->padding == SN_GRID_REFLECTION) {
        lo = d->align_corners ? 0.0 : -0.5;
        span = d->align_corners ? hi : (double)n;
        if (span > 0.0) {
            e = fmod(fabs(c - lo), span);
            c = (long long)floor(fabs(c - lo) / span) % 2 ? span - e + lo
                                                         : e + lo;
        } else {
            c = 0.0;
        }
    }
    return c < 0.0 ? 0.0 : c > hi ? hi : c;
}

static double grid_at(const float *p, size_t h, size_t w, double y, double x)
{
    if (!(x >= 0.0 && x < (double)w && y >= 0.0 && y < (double)h))
        return 0.0;
    return p[(size_t)y * w + (size_t)x];
}

static double ref_cubic(double t)
{
    const double A = -0.75;
    t = fabs(t);
    if (t <= 1.0)
        return ((A + 2.0) * t - (A + 3.0)) * t * t + 1.0;
    if (t < 2.0)
        return ((A * t - 5.0 * A) * t + 8.0 * A) * t - 4.0 * A;
    return 0.0;
}

void ref_grid_sample(const sn_grid_sample_desc *d, const float *x,
                     const float *grid, float *y)
{
    const size_t h = d->in_h, w = d->in_w, npix = d->out_h * d->out_w;
    for (size_t u = 0; u < d->batch * d->channels; u++)
        for (size_t p = 0; p < npix; p++) {
            const float *g = grid + ((u / d->channels) * npix + p) * 2;
            const float *pl = x + u * h * w;
            double sx = d->align_corners
                            ? (g[0] + 1.0) / 2.0 * ((double)w - 1.0)
                            : ((g[0] + 1.0) * (double)w - 1.0) / 2.0;
            double sy = d->align_corners
                            ? (g[1] + 1.0) / 2.0 * ((double)h - 1.0)
                            : ((g[1] + 1.0) * (double)h - 1.0) / 2.0;
            double v = 0.0;
            if (d->mode == SN_GRID_BICUBIC) {
                double x0 = floor(sx), y0 = floor(sy);
                for (int i = -1; i < 3; i++)
                    for (int j = -1; j < 3; j++)
                        v += ref_cubic(sy - (y0 + i)) *
                             ref_cubic(sx - (x0 + j)) *
                             grid_at(pl, h, w, grid_pad(d, y0 + i, h),
                                     grid_pad(d, x0 + j, w));
            } else {
                sx = grid_pad(d, sx, w);
                sy = grid_pad(d, sy, h);
                if (d->mode == SN_GRID_NEAREST) {
                    v = grid_at(pl, h, w, nearbyint(sy), nearbyint(sx));
                } else {
                    double x0 = floor(sx), y0 = floor(sy);
                    double tx = sx - x0, ty = sy - y0;
                    v = (1 - ty) * (1 - tx) * grid_at(pl, h, w, y0, x0) +
                        (1 - ty) * tx * grid_at(pl, h, w, y0, x0 + 1) +
                        ty * (1 - tx) * grid_at(pl, h, w, y0 + 1, x0) +
                        ty * tx * grid_at(pl, h, w, y0 + 1, x0 + 1);
                }
            }
            y[u * npix + p] = (float)v;
        }
}

static double roi_bilinear(const float *pl, size_t h, size_t w, double y,
                           double x, int max_mode)
{
    double v[4], ly, lx;
    size_t y0, x0, y1, x1;
    if (y < -1.0 || y > (double)h || x < -1.0 || x > (double)w)
        return 0.0;
    y = y < 0.0 ? 0.0 : y;
    x = x < 0.0 ? 0.0 : x;
    y0 = (size_t)y;
    x0 = (size_t)x;
    if (y0 >= h - 1)
        y = (double)(y0 = h - 1);
    if (x0 >= w - 1)
        x = (double)(x0 = w - 1);
    y1 = y0 + 1 < h ? y0 + 1 : y0;
    x1 = x0 + 1 < w ? x0 + 1 : x0;
    ly = y - (double)y0;
    lx = x - (double)x0;
    v[0] = (1 - ly) * (1 - lx) * pl[y0 * w + x0];
    v[1] = (1 - ly) * lx * pl[y0 * w + x1];
    v[2] = ly * (1 - lx) * pl[y1 * w + x0];
    v[3] = ly * lx * pl[y1 * w + x1];
    if (max_mode)
        return fmax(fmax(v[0], v[1]), fmax(v[2], v[3]));
    return v[0] + v[1] + v[2] + v[3];
}

void ref_roi_align(const sn_roi_align_desc *d, const float *x,
                   const float *rois, const float *batch_idx, float *y)
{
    const double off = d->half_pixel ? 0.5 : 0.0, s = d->spatial_scale;
    for (size_t r = 0; r < d->nrois; r++)
        for (size_t c = 0; c < d->channels; c++) {
            const float *roi = rois + 4 * r;
            const double b = batch_idx[r];
            double x0 = roi[0] * s - off, y0 = roi[1] * s - off;
            double rw = roi[2] * s - off - x0, rh = roi[3] * s - off - y0;
            if (!d->half_pixel) {
                rw = fmax(rw, 1.0);
                rh = fmax(rh, 1.0);
            }
            double bh = rh / (double)d->out_h, bw = rw / (double)d->out_w;
            double ch = ceil(bh), cw = ceil(bw);
            size_t gh = d->sampling_ratio ? d->sampling_ratio
                        : ch > 0 ? (size_t)ch : 0;
            size_t gw = d->sampling_ratio ? d->sampling_ratio
                        : cw > 0 ? (size_t)cw : 0;
            for (size_t ph = 0; ph < d->out_h; ph++)
                for (size_t pw = 0; pw < d->out_w; pw++) {
                    float *o = y + ((r * d->channels + c) * d->out_h + ph) *
                                       d->out_w + pw;
                    double acc = 0.0;
                    if (!(b >= 0.0 && b < (double)d->batch)) {
                        *o = 0.0f;
                        continue;
                    }
                    const float *pl =
                        x + (((size_t)b * d->channels + c) * d->in_h) *
                                d->in_w;
                    for (size_t iy = 0; iy < gh; iy++)
                        for (size_t ix = 0; ix < gw; ix++) {
                            double v = roi_bilinear(
                                pl, d->in_h, d->in_w,
                                y0 + ph * bh + (iy + 0.5) * bh / gh,
                                x0 + pw * bw + (ix + 0.5) * bw / gw,
                                d->max_mode);
                            acc = !d->max_mode            ? acc + v
                                  : (iy == 0 && ix == 0) ? v
                                                         : fmax(acc, v);
                        }
                    size_t count = gh * gw > 0 ? gh * gw : 1;
                    *o = (float)(d->max_mode ? acc : acc / (double)count);
                }
        }
}

void ref_fill_random(float *x, size_t n, unsigned seed, float lo, float hi)
{
    /* xorshift32; a zero state would stay zero. */
    uint32_t s = seed ? (uint32_t)seed : 0x9e3779b9u;

    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        /* 24 random bits: exactly representable, uniform in [0, 1). */
        x[i] = lo + (hi - lo) * ((float)(s >> 8) / 16777216.0f);
    }
}

static int matches(float got, float want, float rtol, float atol)
{
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got))
        return got == want;
    return fabsf(got - want) <= atol + rtol * fabsf(want);
}

int ref_compare(const float *got, const float *want, size_t n, float rtol,
                float atol, char *msg, size_t msgcap)
{
    size_t bad = 0, first = 0;

    for (size_t i = 0; i < n; i++) {
        if (!matches(got[i], want[i], rtol, atol)) {
            if (bad == 0)
                first = i;
            bad++;
        }
    }
    if (msg && msgcap > 0) {
        msg[0] = '\0';
        if (bad > 0)
            snprintf(msg, msgcap,
                     "%zu of %zu values differ; first at %zu: got %.9g, "
                     "want %.9g (rtol %g, atol %g)",
                     bad, n, first, (double)got[first], (double)want[first],
                     (double)rtol, (double)atol);
    }
    return bad > INT_MAX ? INT_MAX : (int)bad;
}

/* A recurrent cell's activation, in double, as the RNN spec words it. */
static double ref_rnn_act(sn_rnn_act a, double alpha, double beta, double x)
{
    switch (a) {
    case SN_RNN_ACT_SIGMOID:
        return 1.0 / (1.0 + exp(-x));
    case SN_RNN_ACT_TANH:
        return tanh(x);
    case SN_RNN_ACT_RELU:
        return x > 0.0 ? x : 0.0;
    case SN_RNN_ACT_LEAKY_RELU:
        return x >= 0.0 ? x : alpha * x;
    case SN_RNN_ACT_THRESHOLDED_RELU:
        return x >= alpha ? x : 0.0;
    case SN_RNN_ACT_SCALED_TANH:
        return alpha * tanh(beta * x);
    case SN_RNN_ACT_HARD_SIGMOID:
        return fmin(fmax(alpha * x + beta, 0.0), 1.0);
    case SN_RNN_ACT_ELU:
        return x >= 0.0 ? x : alpha * (exp(x) - 1.0);
    case SN_RNN_ACT_SOFTSIGN:
        return x / (1.0 + fabs(x));
    case SN_RNN_ACT_SOFTPLUS:
        return log(1.0 + exp(x));
    case SN_RNN_ACT_AFFINE:
        return alpha * x + beta;
    case SN_RNN_ACT_COUNT:
        break;
    }
    return x;
}

/* Activation k of d on v, clipped first where d->clip > 0. */
static double ref_cell_act(const sn_rnn_cell_desc *d, int k, double v)
{
    if (d->clip > 0.0f)
        v = fmin(fmax(v, -(double)d->clip), (double)d->clip);
    return ref_rnn_act(d->act[k], d->alpha[k], d->beta[k], v);
}

void ref_rnn_cell(const sn_rnn_cell_desc *d, const float *gates,
                  const float *rec, const float *peep, const float *mask,
                  float *h, float *c, float *y)
{
    size_t hn = d->hidden;
    for (size_t b = 0; b < d->batch; b++)
        for (size_t j = 0; j < hn; j++) {
            const float *g = gates + b * d->ld_gates;
            const float *r = rec ? rec + b * 3 * hn : NULL;
            double hold = h[b * hn + j], v = 0.0, cn = 0.0;
            int live = !mask || mask[b] != 0.0f;
            if (d->cell == SN_RNN_CELL_GRU_RESET) {
                y[b * d->ld_y + j] =
                    (float)(ref_cell_act(d, 0, g[hn + j]) * hold);
                continue;
            }
            if (d->cell == SN_RNN_CELL_SIMPLE) {
                v = ref_cell_act(d, 0, g[j]);
            } else if (d->cell == SN_RNN_CELL_LSTM) {
                double cold = c[b * hn + j];
                double pi = peep ? peep[j] : 0.0;
                double po = peep ? peep[hn + j] : 0.0;
                double pf = peep ? peep[2 * hn + j] : 0.0;
                double it = ref_cell_act(d, 0, g[j] + pi * cold);
                double ft = d->input_forget
                                ? 1.0 - it
                                : ref_cell_act(d, 0, g[2 * hn + j] + pf * cold);
                double ct = ref_cell_act(d, 1, g[3 * hn + j]);
                double ot;
                cn = ft * cold + it * ct;
                ot = ref_cell_act(d, 0, g[hn + j] + po * cn);
                v = ot * ref_rnn_act(d->act[2], d->alpha[2], d->beta[2], cn);
            } else {
                double z = ref_cell_act(d, 0, g[j] + (r ? r[j] : 0.0));
                double rt =
                    ref_cell_act(d, 0, g[hn + j] + (r ? r[hn + j] : 0.0));
                double ht = ref_cell_act(
                    d, 1, g[2 * hn + j] + (r ? rt * r[2 * hn + j] : 0.0));
                v = (1.0 - z) * ht + z * hold;
            }
            if (y)
                y[b * d->ld_y + j] = live ? (float)v : 0.0f;
            if (live) {
                h[b * hn + j] = (float)v;
                if (d->cell == SN_RNN_CELL_LSTM)
                    c[b * hn + j] = (float)cn;
            }
        }
}

void ref_dwconv(const sn_dwconv_desc *d, const float *src, const float *w,
                const float *bias, float *dst)
{
    const long long h = (long long)d->in_h, iw = (long long)d->in_w;
    const size_t och = d->channels * d->mult;

    for (size_t n = 0; n < d->images; n++)
        for (size_t o = 0; o < och; o++)
            for (size_t oy = 0; oy < d->out_h; oy++)
                for (size_t ox = 0; ox < d->out_w; ox++) {
                    const float *img =
                        src + (n * d->channels + o / d->mult) * d->in_h *
                                  d->in_w;
                    float acc = 0.0f;
                    for (size_t ky = 0; ky < d->k_h; ky++)
                        for (size_t kx = 0; kx < d->k_w; kx++) {
                            long long iy = (long long)(oy * d->stride_h +
                                                       ky * d->dil_h) -
                                           (long long)d->pad_top;
                            long long ix = (long long)(ox * d->stride_w +
                                                       kx * d->dil_w) -
                                           (long long)d->pad_left;
                            if (inside(iy, 0, h) && inside(ix, 0, iw))
                                acc += w[(o * d->k_h + ky) * d->k_w + kx] *
                                       img[(size_t)iy * d->in_w + (size_t)ix];
                        }
                    if (bias)
                        acc += bias[o];
                    if (d->act == SN_ACT_RELU && acc < 0.0f)
                        acc = 0.0f;
                    if (d->act == SN_ACT_RELU6)
                        acc = ref_unary_op(SN_UNARY_CLIP, acc, 0.0f, 6.0f);
                    dst[((n * och + o) * d->out_h + oy) * d->out_w + ox] = acc;
                }
}

double ref_half_value(int bf16, unsigned h)
{
    int sign = h >> 15 ? -1 : 1;
    if (bf16) { /* a float's top half: 8 exponent bits, 7 of mantissa */
        int e = (int)(h >> 7 & 0xff);
        double man = (double)(h & 0x7f);
        return e == 0 ? sign * ldexp(man, -133)
                      : sign * ldexp(128.0 + man, e - 134);
    }
    int e = (int)(h >> 10 & 0x1f);
    double man = (double)(h & 0x3ff);
    return e == 0 ? sign * ldexp(man, -24) : sign * ldexp(1024.0 + man, e - 25);
}

void ref_qgemm(const sn_qgemm_desc *d, const float *a, const unsigned char *q,
               const float *scale, const float *zero, const float *bias,
               float *c)
{
    size_t blocks = d->block ? (d->k + d->block - 1) / d->block : 1;
    for (size_t i = 0; i < d->m; i++)
        for (size_t j = 0; j < d->n; j++) {
            double sum = 0.0;
            for (size_t kk = 0; kk < d->k; kk++) {
                size_t s = j * blocks + (d->block ? kk / d->block : 0);
                int v;
                double hv = 0.0;
                if (d->qtype == SN_QTYPE_F16 || d->qtype == SN_QTYPE_BF16) {
                    size_t e = d->trans_b ? j * d->ldq + kk
                                          : kk * d->ldq + j;
                    hv = ref_half_value(d->qtype == SN_QTYPE_BF16,
                                        (unsigned)(q[2 * e] |
                                                   q[2 * e + 1] << 8));
                    v = 0;
                } else if (d->qtype == SN_QTYPE_U4) {
                    unsigned char b = q[j * d->ldq + kk / 2];
                    v = kk % 2 ? b >> 4 : b & 15;
                } else {
                    unsigned char b = d->trans_b ? q[j * d->ldq + kk]
                                                 : q[kk * d->ldq + j];
                    v = d->qtype == SN_QTYPE_S8 ? (int)(signed char)b
                                                : (int)b;
                }
                double w =
                    ((double)v + hv - (zero ? zero[s] : d->zero_value)) *
                    scale[s];
                sum += (double)a[i * d->lda + kk] * w;
            }
            if (bias)
                sum += bias[j];
            float y = (float)sum;
            if (d->act != SN_ACT_NONE && y < 0.0f)
                y = 0.0f;
            if (d->act == SN_ACT_RELU6 && y > 6.0f)
                y = 6.0f;
            c[i * d->ldc + j] = y;
        }
}
