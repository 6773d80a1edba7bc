/*
 * The plain C reference (see ref.h): obviously-correct loops, nothing clever.
 */
#include <config.h>

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "ref.h"

void ref_gemm(const sn_gemm_desc *d, const float *a, const float *b, float *c,
              const float *bias)
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
                if (d->act == SN_ACT_RELU)
                    v = ref_unary_op(SN_UNARY_RELU, v, 0.0f, 0.0f);
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
    case SN_UNARY_GELU:
        return 0.5f * x * (1.0f + erff(x / 1.41421356237309505f));
    case SN_UNARY_GELU_TANH:
        return 0.5f * x *
               (1.0f + tanhf(0.797884560802865356f *
                             (x + 0.044715f * x * x * x)));
    case SN_UNARY_COUNT:
        break;
    }
    return NAN;
}

void ref_unary(const sn_unary_desc *d, const float *x, float *y)
{
    for (size_t i = 0; i < d->n; i++)
        y[i] = ref_unary_op(d->op, x[i], d->alpha, d->beta);
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
            float acc = d->op == SN_REDUCE_MAX
                            ? x[at(d->len, d->inner, o, 0, j)]
                            : 0.0f;
            for (size_t r = 0; r < d->len; r++) {
                float v = x[at(d->len, d->inner, o, r, j)];
                acc = d->op == SN_REDUCE_MAX ? max_of(acc, v) : acc + v;
            }
            if (d->op == SN_REDUCE_MEAN)
                acc /= (float)d->len;
            y[o * d->inner + j] = acc;
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
                    dst[((n * och + o) * d->out_h + oy) * d->out_w + ox] = acc;
                }
}
