/*
 * Kernels along one axis: softmax, reductions, top k and cumulative sums
 * over the middle axis of x viewed as (outer, len, inner), and layer
 * normalisation over rows.
 *
 * One thread per line of the axis (an (outer, inner) pair; a row for layer
 * normalisation), which walks it in the C reference's order (tests/ref.c)
 * with the reference's arithmetic (but layer normalisation, in float
 * where the reference sums in double): the sums are sequential, r = 0,
 * 1, ..., so that a line gives the reference's bits wherever no math
 * library function is involved, whatever the grid.  Thread t takes line
 * t = o * inner + i: with inner > 1 neighbouring threads read neighbouring
 * floats at each step along the axis.  With inner == 1 each line is a
 * contiguous row of its own; nothing shared between threads (cu.h) is
 * allowed to split it.
 *
 * Every kernel here is called with len >= 1 (lib/backend/kernels.c returns
 * before the backend when there is nothing to read).
 */
#include "cu.h"

/* The maximum, NaN if either is NaN (the reference's max_of). */
static __device__ float axis_max(float m, float v)
{
    if (isnan(m) || isnan(v))
        return NAN;
    return v > m ? v : m;
}

/* --- softmax ------------------------------------------------------------ */

/*
 * y = exp(x - max) / sum, or (x - max) - log(sum): the maximum in order
 * from the first value, the sum of exponentials in order, each
 * exponential computed again for the output rather than kept in y (one
 * pass over memory fewer).  y may be x: the last pass reads each value
 * before it writes it.
 */
static __global__ void softmax(size_t n, size_t len, size_t inner,
                               const float *x, float *y, int log_softmax)
{
    SN_CU_FOR(t, n)
    {
        size_t o = t / inner, i = t - o * inner;
        size_t base = o * len * inner + i;
        const float *xc = x + base;
        float *yc = y + base;
        float m = xc[0], s = 0.0f;
        for (size_t r = 1; r < len; r++)
            m = axis_max(m, xc[r * inner]);
        for (size_t r = 0; r < len; r++)
            s += expf(xc[r * inner] - m);
        if (log_softmax) {
            float ls = logf(s);
            for (size_t r = 0; r < len; r++)
                yc[r * inner] = (xc[r * inner] - m) - ls;
        } else {
            for (size_t r = 0; r < len; r++)
                yc[r * inner] = expf(xc[r * inner] - m) / s;
        }
    }
}

int sn_cu_softmax(const sn_softmax_desc *d, void *stream)
{
    size_t n = d->outer * d->inner;
    return SN_CU_RUN(softmax, n, stream, n, d->len, d->inner,
                     (const float *)sn_cu_ptr(d->x), sn_cu_ptr(d->y),
                     d->log_softmax);
}

/* --- reductions --------------------------------------------------------- */

/* acc combined with the next value v, as the reference does. */
static __device__ float reduce_step(int op, float acc, float v)
{
    switch (op) {
    case SN_REDUCE_MAX:
        return axis_max(acc, v);
    case SN_REDUCE_MIN: /* NaN kept once seen */
        return v < acc || isnan(v) ? v : acc;
    case SN_REDUCE_PROD:
        return acc * v;
    case SN_REDUCE_SUM_SQUARE:
        return acc + v * v;
    case SN_REDUCE_SUM_ABS:
        return acc + fabsf(v);
    }
    return acc + v; /* SUM, MEAN */
}

/* y (outer, inner) = op over len of x (outer, len, inner).  MAX and MIN
 * start from the first value (combining it with itself changes nothing),
 * PROD from 1, the sums from 0 (so a sum of -0 alone is +0, as there);
 * MEAN is the float sum divided by len. */
static __global__ void reduce(size_t n, size_t len, size_t inner, int op,
                              const float *x, float *y)
{
    SN_CU_FOR(t, n)
    {
        size_t o = t / inner, i = t - o * inner;
        const float *xc = x + o * len * inner + i;
        float acc = op == SN_REDUCE_MAX || op == SN_REDUCE_MIN ? xc[0]
                    : op == SN_REDUCE_PROD                     ? 1.0f
                                                               : 0.0f;
        for (size_t r = 0; r < len; r++)
            acc = reduce_step(op, acc, xc[r * inner]);
        if (op == SN_REDUCE_MEAN)
            acc /= (float)len;
        y[t] = acc;
    }
}

int sn_cu_reduce(const sn_reduce_desc *d, void *stream)
{
    size_t n = d->outer * d->inner;
    return SN_CU_RUN(reduce, n, stream, n, d->len, d->inner, (int)d->op,
                     (const float *)sn_cu_ptr(d->x), sn_cu_ptr(d->y));
}

/* --- layer normalisation ------------------------------------------------ */

/*
 * One row of x (outer, len) into y: the mean, then the biased variance as
 * the mean of (x - mean)^2, both summed in float in order, then
 * y = (x - mean) / sqrt(var + epsilon) * scale (+ bias): OpenCL's
 * arithmetic, and the CPU backend's but for its order of summation (the
 * reference's is double; GPUs other than data-centre ones run double at a
 * small fraction of float's rate).  bias may be NULL.  y may be x: each
 * value is read before it is written.
 */
static __global__ void layernorm(size_t outer, size_t len, const float *x,
                                 const float *scale, const float *bias,
                                 float *y, float epsilon)
{
    SN_CU_FOR(o, outer)
    {
        const float *xr = x + o * len;
        float *yr = y + o * len;
        float mean = 0.0f, var = 0.0f, sd;
        for (size_t i = 0; i < len; i++)
            mean += xr[i];
        mean /= (float)len;
        for (size_t i = 0; i < len; i++) {
            float dv = xr[i] - mean;
            var += dv * dv;
        }
        var /= (float)len;
        sd = sqrtf(var + epsilon);
        for (size_t i = 0; i < len; i++) {
            float v = (xr[i] - mean) / sd * scale[i];
            yr[i] = bias ? v + bias[i] : v;
        }
    }
}

int sn_cu_layernorm(const sn_layernorm_desc *d, void *stream)
{
    return SN_CU_RUN(layernorm, d->outer, stream, d->outer, d->len,
                     (const float *)sn_cu_ptr(d->x),
                     (const float *)sn_cu_ptr(d->scale),
                     (const float *)sn_cu_ptr(d->bias), sn_cu_ptr(d->y),
                     d->epsilon);
}

/* --- top k -------------------------------------------------------------- */

/*
 * The ranking (sn_topk_desc): NaN first, then the largest (or smallest)
 * value, equal values by index, the lower first (the higher with
 * last_index).  Is (a, ia) ranked before (b, ib)?
 */
static __device__ int topk_before(float a, size_t ia, float b, size_t ib,
                                   int largest, int last_index)
{
    if (isnan(a) != isnan(b))
        return isnan(a);
    if (a != b && !isnan(a))
        return largest ? a > b : a < b;
    return last_index ? ia > ib : ia < ib;
}

/*
 * One line: each value along the axis in turn is inserted, in rank order,
 * into the k held so far (their indices, in the line's own column of
 * indices (outer, k, inner)) while fewer than k are held or where it ranks
 * before the last of them: len comparisons with the last held, and k
 * moves per insertion at worst.  The indices are floats there, exact up
 * to 2^24 (the launcher's bound).  The values are gathered at the end.
 */
static __global__ void topk_insert(size_t n, size_t len, size_t inner,
                                   size_t k, const float *x, float *values,
                                   float *indices, int largest,
                                   int last_index)
{
    SN_CU_FOR(t, n)
    {
        size_t o = t / inner, i = t - o * inner;
        const float *xc = x + o * len * inner + i;
        float *ic = indices + o * k * inner + i;
        size_t held = 0, last = 0; /* last: the last held, once k are */
        for (size_t r = 0; r < len; r++) {
            float v = xc[r * inner];
            size_t p;
            if (held < k)
                p = held++;
            else if (topk_before(v, r, xc[last * inner], last, largest,
                                 last_index))
                p = k - 1; /* the last held drops out */
            else
                continue;
            for (; p > 0; p--) {
                size_t q = (size_t)ic[(p - 1) * inner];
                if (!topk_before(v, r, xc[q * inner], q, largest,
                                 last_index))
                    break;
                ic[p * inner] = (float)q;
            }
            ic[p * inner] = (float)r;
            if (held == k)
                last = (size_t)ic[(k - 1) * inner];
        }
        if (values) {
            float *vc = values + o * k * inner + i;
            for (size_t s = 0; s < k; s++)
                vc[s * inner] = xc[(size_t)ic[s * inner] * inner];
        }
    }
}

/*
 * The same for an axis too long for float indices to hold every position:
 * k scans of the line, each picking the value ranked first among those
 * ranked after the previous pick (k * len comparisons, no memory but the
 * outputs).
 */
static __global__ void topk_select(size_t n, size_t len, size_t inner,
                                   size_t k, const float *x, float *values,
                                   float *indices, int largest,
                                   int last_index)
{
    SN_CU_FOR(t, n)
    {
        size_t o = t / inner, i = t - o * inner;
        const float *xc = x + o * len * inner + i;
        size_t at = o * k * inner + i, prev = 0;
        for (size_t s = 0; s < k; s++, at += inner) {
            size_t best = len;
            for (size_t r = 0; r < len; r++) {
                float v = xc[r * inner];
                if (s > 0 && !topk_before(xc[prev * inner], prev, v, r,
                                           largest, last_index))
                    continue;
                if (best == len || topk_before(v, r, xc[best * inner], best,
                                                largest, last_index))
                    best = r;
            }
            /* best < len: k <= len leaves a value after every pick */
            prev = best;
            if (values)
                values[at] = xc[best * inner];
            indices[at] = (float)best;
        }
    }
}

int sn_cu_topk(const sn_topk_desc *d, void *stream)
{
    size_t n = d->outer * d->inner;
    const float *x = sn_cu_ptr(d->x);
    float *values = sn_cu_ptr(d->values), *indices = sn_cu_ptr(d->indices);

    if (d->len <= (size_t)1 << 24)
        return SN_CU_RUN(topk_insert, n, stream, n, d->len, d->inner, d->k,
                         x, values, indices, d->largest, d->last_index);
    return SN_CU_RUN(topk_select, n, stream, n, d->len, d->inner, d->k, x,
                     values, indices, d->largest, d->last_index);
}

/* --- cumulative sums ---------------------------------------------------- */

/* y = running sums of x along the axis, from the end with reverse, each
 * value left out of its own with exclusive; y does not overlap x. */
static __global__ void scan(size_t n, size_t len, size_t inner,
                            const float *x, float *y, int exclusive,
                            int reverse)
{
    SN_CU_FOR(t, n)
    {
        size_t o = t / inner, i = t - o * inner;
        size_t base = o * len * inner + i;
        float acc = 0.0f;
        for (size_t s = 0; s < len; s++) {
            size_t at = base + (reverse ? len - 1 - s : s) * inner;
            float v = x[at];
            y[at] = exclusive ? acc : acc + v;
            acc += v;
        }
    }
}

int sn_cu_scan(const sn_scan_desc *d, void *stream)
{
    size_t n = d->outer * d->inner;
    return SN_CU_RUN(scan, n, stream, n, d->len, d->inner,
                     (const float *)sn_cu_ptr(d->x), sn_cu_ptr(d->y),
                     d->exclusive, d->reverse);
}
