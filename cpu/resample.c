/*
 * Separable resampling on the CPU (backend.h's sn_resample_desc: Resize,
 * Upsample): one output row at a time (a plane and an index of every axis
 * but the last), the taps of the leading axes combined once per row into
 * (offset, weight) pairs, the last axis' taps per element.
 */
#include <config.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "vec16.h"

/* Rows of at least this many elements in all make the kernel parallel. */
#define PARALLEL_MIN 32768

/* One choice of a tap on every leading axis: where it reads in a plane,
 * and the product of its weights. */
typedef struct lead {
    size_t off;
    float w;
} lead;

/* The leading taps of output row o (indices of the leading axes) in c;
 * their count, or 0 when one lies outside the input (the row is fill). */
static size_t lead_taps(const sn_resample_desc *d, const float *t,
                        const size_t *istr, const size_t *o, lead *c)
{
    size_t nc = 1;
    c[0] = (lead){0, 1.0f};
    for (size_t i = 0; i + 1 < d->rank; i++) {
        const float *ti = t + d->table_off[i] + 2 * o[i] * d->taps[i];
        const size_t k = d->taps[i];
        /* in place, from the end: entry c * k + j only ever lands at or
         * after entry c, which is read first */
        for (size_t e = nc; e-- > 0;) {
            const lead base = c[e];
            for (size_t j = k; j-- > 0;) {
                float fi = ti[2 * j];
                if (!(fi >= 0.0f && fi < (float)d->in[i]))
                    return 0;
                c[e * k + j] = (lead){base.off + (size_t)fi * istr[i],
                                      base.w * ti[2 * j + 1]};
            }
        }
        nc *= k;
    }
    return nc;
}

/* One tap of weight 1 on every axis (nearest-neighbour resizing). */
static int is_nearest(const sn_resample_desc *d, const float *t)
{
    for (size_t i = 0; i < d->rank; i++) {
        const float *ti = t + d->table_off[i];
        if (d->taps[i] != 1)
            return 0;
        for (size_t o = 0; o < d->out[i]; o++)
            if (ti[2 * o + 1] != 1.0f)
                return 0;
    }
    return 1;
}

/* Output row yr (ow floats) of is_nearest()'s resampling from xr, the
 * input row its leading taps chose: each output its input element, copied
 * (the general sum, 0 + 1 * (0 + 1 * x), is x too, but for -0), or fill
 * where the tap lies outside. */
static void nearest_row(const sn_resample_desc *d, const float *tl,
                        const float *xr, float *restrict yr, size_t ow)
{
    const float in_last = (float)d->in[d->rank - 1];
    for (size_t q = 0; q < ow; q++) {
        const float fi = tl[2 * q];
        yr[q] = fi >= 0.0f && fi < in_last ? xr[(size_t)fi] : d->fill;
    }
}

/* f where the last axis' nearest taps read input element q / f for
 * output q (a whole upsampling factor: each input element f times over),
 * else 0. */
static size_t whole_factor(const sn_resample_desc *d, const float *tl)
{
    const size_t ow = d->out[d->rank - 1], in = d->in[d->rank - 1];
    const size_t f = in ? ow / in : 0;
    if (f < 2 || f * in != ow)
        return 0;
    for (size_t q = 0; q < ow; q++)
        if (tl[2 * q] != (float)(q / f))
            return 0;
    return f;
}

/* y: n elements of x, each twice over, 16 at a time. */
static SN_VECTOR_CLONES void twice_row(const float *x, float *restrict y,
                                       size_t n)
{
    const v16i lo = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7};
    const v16i hi = lo + 8;
    size_t i = 0;

    for (; i + 16 <= n; i += 16) {
        v16 v, a, b;
        __builtin_memcpy(&v, x + i, sizeof v);
        a = __builtin_shuffle(v, lo);
        b = __builtin_shuffle(v, hi);
        __builtin_memcpy(y + 2 * i, &a, sizeof a);
        __builtin_memcpy(y + 2 * i + 16, &b, sizeof b);
    }
    for (; i < n; i++)
        y[2 * i] = y[2 * i + 1] = x[i];
}

/*
 * The last axis' taps decoded once for every row: column q's taps read
 * input elements idx[q * tw + j] with weights w[...], or out[q] is set
 * where one lies outside (the output is the fill).  NULL members when
 * memory is short (the rows then decode the table per element).
 */
typedef struct cols {
    size_t *idx;
    float *w, *sum; /* sum: one row of the leading taps' sums */
    unsigned char *out;
    int two; /* two taps a column, every column inside (linear) */
} cols;

static void cols_free(cols *k)
{
    free(k->idx);
    free(k->w);
    free(k->sum);
    free(k->out);
}

/* 1 with k filled, 0 when memory is short or the row of sums would cost
 * more than the outputs (a large downsampling). */
static int cols_make(const sn_resample_desc *d, const float *tl, cols *k)
{
    const size_t last = d->rank - 1, ow = d->out[last], tw = d->taps[last];
    const size_t in = d->in[last];
    memset(k, 0, sizeof *k);
    if (in > 4 * ow * tw)
        return 0;
    k->idx = malloc(ow * tw * sizeof *k->idx);
    k->w = malloc(ow * tw * sizeof *k->w);
    k->sum = malloc((in ? in : 1) * sizeof *k->sum);
    k->out = calloc(ow ? ow : 1, 1);
    if (!k->idx || !k->w || !k->sum || !k->out) {
        cols_free(k);
        return 0;
    }
    for (size_t q = 0; q < ow; q++)
        for (size_t j = 0; j < tw; j++) {
            const float fi = tl[2 * (q * tw + j)];
            const int inside = fi >= 0.0f && fi < (float)in;
            k->out[q] |= !inside;
            k->idx[q * tw + j] = inside ? (size_t)fi : 0;
            k->w[q * tw + j] = tl[2 * (q * tw + j) + 1];
        }
    k->two = tw == 2 && !memchr(k->out, 1, ow);
    return 1;
}

/* Two taps a column (idx, w as in cols): y[q] = (0 + w[2q] s[idx[2q]]) +
 * w[2q + 1] s[idx[2q + 1]], each product rounded before its sum (no fused
 * multiply-add: the bits of the loop over taps in row_by_cols()), in one
 * vector loop. */
static SN_VECTOR_CLONES __attribute__((optimize("fp-contract=off"))) void
two_taps(size_t ow, const size_t *idx, const float *w, const float *s,
         float *restrict y)
{
#pragma omp simd
    for (size_t q = 0; q < ow; q++) {
        const float a = w[2 * q] * s[idx[2 * q]];
        const float b = w[2 * q + 1] * s[idx[2 * q + 1]];
        y[q] = (0.0f + a) + b;
    }
}

/* s[i] = (0 + w_0 x_0[i]) + w_1 x_1[i] + ... over the leading taps c,
 * each product rounded before its sum (no fused multiply-add, as the
 * loop over taps per element sums). */
static SN_VECTOR_CLONES __attribute__((optimize("fp-contract=off"))) void
lead_sums(size_t in, const lead *c, size_t nc, const float *xp,
          float *restrict s)
{
#pragma omp simd
    for (size_t i = 0; i < in; i++)
        s[i] = 0.0f;
    for (size_t e = 0; e < nc; e++) {
        const float w = c[e].w, *xr = xp + c[e].off;
#pragma omp simd
        for (size_t i = 0; i < in; i++)
            s[i] += w * xr[i];
    }
}

/* Output row yr of the general resampling with the taps of k: first the
 * leading taps' sum for every input column (each column's sum the same
 * whichever output reads it), then each output's taps over those sums:
 * the same additions in the same order as per element, without decoding
 * the table for every element and tap. */
static void row_by_cols(const sn_resample_desc *d, const cols *k,
                        const float *xp, const lead *c, size_t nc,
                        float *yr)
{
    const size_t last = d->rank - 1, ow = d->out[last], tw = d->taps[last];
    const size_t in = d->in[last];
    float *restrict s = k->sum;

    lead_sums(in, c, nc, xp, s);
    if (k->two) {
        two_taps(ow, k->idx, k->w, s, yr);
        return;
    }
    for (size_t q = 0; q < ow; q++) {
        const size_t *iq = k->idx + q * tw;
        const float *wq = k->w + q * tw;
        float acc = 0.0f;
        if (k->out[q]) {
            yr[q] = d->fill;
            continue;
        }
        for (size_t j = 0; j < tw; j++)
            acc += wq[j] * s[iq[j]];
        yr[q] = acc;
    }
}

/* Output rows [r0, r1). */
static void resample_rows(const sn_resample_desc *d, const float *x,
                          const float *t, float *y, size_t r0, size_t r1)
{
    const size_t last = d->rank - 1, ow = d->out[last], tw = d->taps[last];
    const float *tl = t + d->table_off[last];
    const float in_last = (float)d->in[last];
    size_t istr[SN_MAX_DIMS], in_plane = 1, rows_per_plane = 1;
    lead c[SN_RESAMPLE_MAX_TAPS];

    for (size_t i = d->rank; i-- > 0;) {
        istr[i] = in_plane;
        in_plane *= d->in[i];
    }
    for (size_t i = 0; i < last; i++)
        rows_per_plane *= d->out[i];
    const int nearest = is_nearest(d, t);
    const size_t f = nearest ? whole_factor(d, tl) : 0;
    size_t prev_off = SIZE_MAX; /* nearest: the input row that output row
                                 * r - 1 copied (SIZE_MAX: none) */
    cols k = {0};
    const int by_cols = !nearest && cols_make(d, tl, &k);
    for (size_t r = r0; r < r1; r++) {
        size_t o[SN_MAX_DIMS], rest = r % rows_per_plane, nc;
        const float *xp = x + (r / rows_per_plane) * in_plane;
        float *yr = y + r * ow;
        for (size_t i = last; i-- > 0;) {
            o[i] = rest % d->out[i];
            rest /= d->out[i];
        }
        if ((nc = lead_taps(d, t, istr, o, c)) == 0) {
            for (size_t q = 0; q < ow; q++)
                yr[q] = d->fill;
            prev_off = SIZE_MAX;
            continue;
        }
        if (nearest) {
            /* the row before, when it read the same input row: a copy */
            const size_t off = (size_t)(xp - x) + c[0].off;
            if (off == prev_off)
                memcpy(yr, yr - ow, ow * sizeof *yr);
            else if (f == 2)
                twice_row(xp + c[0].off, yr, ow / 2);
            else if (f)
                for (size_t q = 0; q < ow; q++)
                    yr[q] = xp[c[0].off + q / f];
            else
                nearest_row(d, tl, xp + c[0].off, yr, ow);
            prev_off = off;
            continue;
        }
        if (by_cols) {
            row_by_cols(d, &k, xp, c, nc, yr);
            continue;
        }
        for (size_t q = 0; q < ow; q++) {
            const float *tq = tl + 2 * q * tw;
            float acc = 0.0f;
            for (size_t j = 0; j < tw; j++) {
                const float fi = tq[2 * j];
                const float *xj;
                float s = 0.0f;
                if (!(fi >= 0.0f && fi < in_last)) {
                    acc = d->fill;
                    break;
                }
                xj = xp + (size_t)fi;
                for (size_t e = 0; e < nc; e++)
                    s += c[e].w * xj[c[e].off];
                acc += tq[2 * j + 1] * s;
            }
            yr[q] = acc;
        }
    }
    cols_free(&k);
}

void sn_cpu_resample(const sn_resample_desc *d, const float *x,
                     const float *table, float *y)
{
    size_t rows = d->planes, total;

    for (size_t i = 0; i + 1 < d->rank; i++)
        rows *= d->out[i];
    total = rows * d->out[d->rank - 1];
    if (total == 0)
        return;
    if (total > PARALLEL_MIN && rows > 1 && omp_get_max_threads() > 1) {
#pragma omp parallel
        {
            size_t u0, u1;
            sn_cpu_thread_share(rows, &u0, &u1);
            resample_rows(d, x, table, y, u0, u1);
        }
    } else {
        resample_rows(d, x, table, y, 0, rows);
    }
}
