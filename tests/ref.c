/*
 * The plain C reference (see ref.h): obviously-correct loops, nothing clever.
 */
#include <config.h>

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "ref.h"

void ref_gemm(const sn_gemm_desc *d, const float *a, const float *b, float *c)
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
                cb[i * d->ldc + j] = (float)out;
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

float ref_unary_op(sn_unary_op op, float x)
{
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
    case SN_UNARY_COUNT:
        break;
    }
    return NAN;
}

void ref_unary(const sn_unary_desc *d, const float *x, float *y)
{
    for (size_t i = 0; i < d->n; i++)
        y[i] = ref_unary_op(d->op, x[i]);
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
