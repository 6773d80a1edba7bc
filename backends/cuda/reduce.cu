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
 * floats at each step along the axis.  A long axis over few lines
 * (softmax and the reductions: a softmax over a vocabulary at batch 1) is
 * cut into parts instead, each part reduced by a thread into scratch
 * memory and the parts combined in order by a kernel after it: the sums
 * then run in another order, within float rounding of the reference's.
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

/*
 * A long axis over few lines (a softmax over a vocabulary at batch 1)
 * would leave one thread per line to walk all of it; instead the line is
 * cut into parts of AXIS_PART values, each a thread's, in five steps:
 * each part's maximum, each line's (the parts' in order), each part's sum
 * of exponentials, each line's (the parts' in order: another order of
 * summation than the one-thread walk's, within float rounding), then
 * every output element on its own thread.
 */
#define AXIS_PART 256
/* Cut the axis when it is at least two parts long and the lines alone
 * would not fill a large GPU's threads several times over. */
#define AXIS_CUT_LINES 16384

static int axis_cut(size_t lines, size_t len)
{
    return len >= 2 * AXIS_PART && lines < AXIS_CUT_LINES;
}

/* Part p of line l (t = p * lines + l: adjacent threads on adjacent
 * lines, adjacent in memory when inner > 1): [r0, r1) of the axis and
 * the line's first element. */
typedef struct axis_part {
    size_t line, r0, r1;
    size_t base; /* the line's element (o, 0, i) */
} axis_part;

static __device__ axis_part axis_part_of(size_t t, size_t lines,
                                         size_t len, size_t inner)
{
    axis_part a;
    size_t p = t / lines, o;
    a.line = t - p * lines;
    a.r0 = p * AXIS_PART;
    a.r1 = a.r0 + AXIS_PART < len ? a.r0 + AXIS_PART : len;
    o = a.line / inner;
    a.base = o * len * inner + (a.line - o * inner);
    return a;
}

static __global__ void softmax_part_max(size_t n, size_t lines, size_t len,
                                        size_t inner, const float *x,
                                        float *pmax)
{
    SN_CU_FOR(t, n)
    {
        axis_part a = axis_part_of(t, lines, len, inner);
        const float *xc = x + a.base;
        float m = xc[a.r0 * inner];
        for (size_t r = a.r0 + 1; r < a.r1; r++)
            m = axis_max(m, xc[r * inner]);
        pmax[t] = m;
    }
}

/* Line l's value from its parts' (in order): the maximum, or the sum
 * (with log_sum, its logarithm). */
static __global__ void softmax_line(size_t lines, size_t parts,
                                    const float *part, float *line, int sum,
                                    int log_sum)
{
    SN_CU_FOR(l, lines)
    {
        float v = part[l];
        for (size_t p = 1; p < parts; p++)
            v = sum ? v + part[p * lines + l]
                    : axis_max(v, part[p * lines + l]);
        line[l] = log_sum ? logf(v) : v;
    }
}

static __global__ void softmax_part_sum(size_t n, size_t lines, size_t len,
                                        size_t inner, const float *x,
                                        const float *lmax, float *psum)
{
    SN_CU_FOR(t, n)
    {
        axis_part a = axis_part_of(t, lines, len, inner);
        const float *xc = x + a.base;
        float m = lmax[a.line], s = 0.0f;
        for (size_t r = a.r0; r < a.r1; r++)
            s += expf(xc[r * inner] - m);
        psum[t] = s;
    }
}

/* Element e of (outer, len, inner) from its line's maximum and sum (its
 * logarithm, for a log-softmax). */
static __global__ void softmax_out(size_t n, size_t len, size_t inner,
                                   const float *x, const float *lmax,
                                   const float *lsum, float *y,
                                   int log_softmax)
{
    SN_CU_FOR(e, n)
    {
        size_t i = e % inner, o = e / (len * inner);
        size_t l = o * inner + i;
        float v = x[e] - lmax[l];
        y[e] = log_softmax ? v - lsum[l] : expf(v) / lsum[l];
    }
}

int sn_cu_softmax(const sn_softmax_desc *d, void *stream)
{
    size_t lines = d->outer * d->inner, len = d->len;
    size_t parts = (len + AXIS_PART - 1) / AXIS_PART, n = parts * lines;
    const float *x = sn_cu_ptr(d->x);
    float *y = sn_cu_ptr(d->y), *tmp, *pmax, *psum, *lmax, *lsum;
    int err;

    if (!axis_cut(lines, len))
        return SN_CU_RUN(softmax, lines, stream, lines, len, d->inner, x, y,
                         d->log_softmax);
    if ((err = sn_cu_scratch(&tmp, 2 * n + 2 * lines, stream)) != 0)
        return err;
    pmax = tmp;
    psum = tmp + n;
    lmax = tmp + 2 * n;
    lsum = lmax + lines;
    if (!(err = SN_CU_RUN(softmax_part_max, n, stream, n, lines, len,
                          d->inner, x, pmax)) &&
        !(err = SN_CU_RUN(softmax_line, lines, stream, lines, parts,
                          (const float *)pmax, lmax, 0, 0)) &&
        !(err = SN_CU_RUN(softmax_part_sum, n, stream, n, lines, len,
                          d->inner, x, (const float *)lmax, psum)) &&
        !(err = SN_CU_RUN(softmax_line, lines, stream, lines, parts,
                          (const float *)psum, lsum, 1, d->log_softmax)))
        err = SN_CU_RUN(softmax_out, lines * len, stream, lines * len, len,
                        d->inner, x, (const float *)lmax,
                        (const float *)lsum, y, d->log_softmax);
    sn_cu_scratch_free(tmp, stream);
    return err;
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

/* A long axis over few lines, cut as softmax's: each part reduced as a
 * line would be (its own first value for MAX and MIN, 1 for PROD, 0 for
 * the sums), then each line's parts combined in order (maxima and minima
 * as values, sums and products as partial results: SUM_SQUARE adds its
 * parts' sums of squares). */
static __global__ void reduce_parts(size_t n, size_t lines, size_t len,
                                    size_t inner, int op, const float *x,
                                    float *part)
{
    SN_CU_FOR(t, n)
    {
        axis_part a = axis_part_of(t, lines, len, inner);
        const float *xc = x + a.base;
        float acc = op == SN_REDUCE_MAX || op == SN_REDUCE_MIN
                        ? xc[a.r0 * inner]
                    : op == SN_REDUCE_PROD ? 1.0f
                                           : 0.0f;
        for (size_t r = a.r0; r < a.r1; r++)
            acc = reduce_step(op, acc, xc[r * inner]);
        part[t] = acc;
    }
}

static __global__ void reduce_lines(size_t lines, size_t parts, size_t len,
                                    int op, const float *part, float *y)
{
    /* parts' results combine as plain values for these */
    const int as_values = op == SN_REDUCE_MAX || op == SN_REDUCE_MIN ||
                          op == SN_REDUCE_PROD;
    SN_CU_FOR(l, lines)
    {
        float acc = part[l];
        for (size_t p = 1; p < parts; p++)
            acc = as_values ? reduce_step(op, acc, part[p * lines + l])
                            : acc + part[p * lines + l];
        if (op == SN_REDUCE_MEAN)
            acc /= (float)len;
        y[l] = acc;
    }
}

int sn_cu_reduce(const sn_reduce_desc *d, void *stream)
{
    size_t lines = d->outer * d->inner, len = d->len;
    size_t parts = (len + AXIS_PART - 1) / AXIS_PART, n = parts * lines;
    const float *x = sn_cu_ptr(d->x);
    float *y = sn_cu_ptr(d->y), *part;
    int err;

    if (!axis_cut(lines, len))
        return SN_CU_RUN(reduce, lines, stream, lines, len, d->inner,
                         (int)d->op, x, y);
    if ((err = sn_cu_scratch(&part, n, stream)) != 0)
        return err;
    if (!(err = SN_CU_RUN(reduce_parts, n, stream, n, lines, len, d->inner,
                          (int)d->op, x, part)))
        err = SN_CU_RUN(reduce_lines, lines, stream, lines, parts, len,
                        (int)d->op, (const float *)part, y);
    sn_cu_scratch_free(part, stream);
    return err;
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
