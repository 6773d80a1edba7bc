/*
 * Reductions and softmax along the middle axis of x viewed as
 * (outer, len, inner), layer normalisation (with its own arguments) over
 * rows, and top k and cumulative sums (at the end, with their own
 * arguments).
 *
 * Two shapes of kernel, with the same first six arguments
 * (len, x, x_off, y, y_off, flag):
 *   *_row   inner == 1, the common case: one work-group per row
 *           (get_group_id(0) = outer index), a power-of-two local size,
 *           and `scratch`, one float of local memory per work-item.
 *   *_axis  any inner: one work-item per (outer, inner) pair, two more
 *           arguments n = outer * inner (the global size is rounded up)
 *           and inner.
 * The host checks that every index fits in a uint with room for one
 * local size on top, so the strided loops never wrap.  Sums accumulate in
 * float.
 */

/* Tree reductions over the work-group; every work-item gets the result. */
#define GROUP_REDUCE(NAME, COMBINE)                                           \
    float NAME(float v, __local float *scratch)                               \
    {                                                                         \
        uint lid = get_local_id(0);                                           \
        scratch[lid] = v;                                                     \
        barrier(CLK_LOCAL_MEM_FENCE);                                         \
        for (uint h = get_local_size(0) / 2; h > 0; h /= 2) {                 \
            if (lid < h)                                                      \
                scratch[lid] = COMBINE(scratch[lid], scratch[lid + h]);       \
            barrier(CLK_LOCAL_MEM_FENCE);                                     \
        }                                                                     \
        v = scratch[0];                                                       \
        /* All have read scratch[0] before a later call overwrites it. */     \
        barrier(CLK_LOCAL_MEM_FENCE);                                         \
        return v;                                                             \
    }

#define COMBINE_SUM(a, b) ((a) + (b))
#define COMBINE_MAX(a, b) fmax((a), (b))

GROUP_REDUCE(group_sum, COMBINE_SUM)
GROUP_REDUCE(group_max, COMBINE_MAX)

/*
 * y (outer, from y_off) = sum of each row of x (outer, len, from x_off),
 * divided by len when mean is set.
 */
__kernel void reduce_sum_row(uint len, __global const float *x, uint x_off,
                             __global float *y, uint y_off, int mean,
                             __local float *scratch)
{
    uint row = (uint)get_group_id(0);
    __global const float *xr = x + x_off + row * len;
    float acc = 0.0f;

    for (uint i = get_local_id(0); i < len; i += get_local_size(0))
        acc += xr[i];
    acc = group_sum(acc, scratch);
    if (get_local_id(0) == 0)
        y[y_off + row] = mean ? acc / (float)len : acc;
}

/* y (outer, from y_off) = largest element of each row of x (outer, len). */
__kernel void reduce_max_row(uint len, __global const float *x, uint x_off,
                             __global float *y, uint y_off, int unused,
                             __local float *scratch)
{
    uint row = (uint)get_group_id(0);
    __global const float *xr = x + x_off + row * len;
    float acc = -INFINITY;

    for (uint i = get_local_id(0); i < len; i += get_local_size(0))
        acc = fmax(acc, xr[i]);
    acc = group_max(acc, scratch);
    if (get_local_id(0) == 0)
        y[y_off + row] = acc;
}

/* y (outer, inner) = sum over len of x (outer, len, inner), / len if mean. */
__kernel void reduce_sum_axis(uint len, __global const float *x, uint x_off,
                              __global float *y, uint y_off, int mean, uint n,
                              uint inner)
{
    size_t gid = get_global_id(0);
    uint o, i;
    __global const float *xc;
    float acc = 0.0f;

    if (gid >= n)
        return;
    o = (uint)gid / inner;
    i = (uint)gid - o * inner;
    xc = x + x_off + o * len * inner + i;
    for (uint j = 0; j < len; j++)
        acc += xc[j * inner];
    y[y_off + (uint)gid] = mean ? acc / (float)len : acc;
}

/* y (outer, inner) = max over len of x (outer, len, inner). */
__kernel void reduce_max_axis(uint len, __global const float *x, uint x_off,
                              __global float *y, uint y_off, int unused,
                              uint n, uint inner)
{
    size_t gid = get_global_id(0);
    uint o, i;
    __global const float *xc;
    float acc = -INFINITY;

    if (gid >= n)
        return;
    o = (uint)gid / inner;
    i = (uint)gid - o * inner;
    xc = x + x_off + o * len * inner + i;
    for (uint j = 0; j < len; j++)
        acc = fmax(acc, xc[j * inner]);
    y[y_off + (uint)gid] = acc;
}

/*
 * The other reductions, chosen by op: 0 minimum, 1 product, 2 sum of
 * squares, 3 sum of magnitudes.  The minimum propagates NaN.
 */
float op_first(int op, float v)
{
    return op == 2 ? v * v : op == 3 ? fabs(v) : v;
}

float op_combine(int op, float a, float b)
{
    if (op == 0)
        return isnan(a) || a < b ? a : b;
    return op == 1 ? a * b : a + b;
}

float op_identity(int op)
{
    return op == 0 ? INFINITY : op == 1 ? 1.0f : 0.0f;
}

/* y (outer, from y_off) = reduction `op` of each row of x (outer, len). */
__kernel void reduce_op_row(uint len, __global const float *x, uint x_off,
                            __global float *y, uint y_off, int op,
                            __local float *scratch)
{
    uint row = (uint)get_group_id(0);
    uint lid = get_local_id(0);
    __global const float *xr = x + x_off + row * len;
    float acc = op_identity(op);

    for (uint i = lid; i < len; i += get_local_size(0))
        acc = op_combine(op, acc, op_first(op, xr[i]));
    scratch[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = get_local_size(0) / 2; h > 0; h /= 2) {
        if (lid < h)
            scratch[lid] = op_combine(op, scratch[lid], scratch[lid + h]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        y[y_off + row] = scratch[0];
}

/* y (outer, inner) = reduction `op` over len of x (outer, len, inner). */
__kernel void reduce_op_axis(uint len, __global const float *x, uint x_off,
                             __global float *y, uint y_off, int op, uint n,
                             uint inner)
{
    size_t gid = get_global_id(0);
    uint o, i;
    __global const float *xc;
    float acc;

    if (gid >= n)
        return;
    o = (uint)gid / inner;
    i = (uint)gid - o * inner;
    xc = x + x_off + o * len * inner + i;
    acc = op_first(op, xc[0]);
    for (uint j = 1; j < len; j++)
        acc = op_combine(op, acc, op_first(op, xc[j * inner]));
    y[y_off + (uint)gid] = acc;
}

/*
 * y (outer, len, from y_off) = softmax of each row of x (outer, len), or
 * log-softmax when log_out is set.  y may be x: after the maximum (whose
 * group reduction is a barrier), each work-item reads and writes only its
 * own elements i = lid, lid + wg, ...
 */
__kernel void softmax_row(uint len, __global const float *x, uint x_off,
                          __global float *y, uint y_off, int log_out,
                          __local float *scratch)
{
    uint row = (uint)get_group_id(0);
    uint lid = get_local_id(0), wg = get_local_size(0);
    __global const float *xr = x + x_off + row * len;
    __global float *yr = y + y_off + row * len;
    float m = -INFINITY, sum = 0.0f;

    for (uint i = lid; i < len; i += wg)
        m = fmax(m, xr[i]);
    m = group_max(m, scratch);
    if (log_out) {
        for (uint i = lid; i < len; i += wg)
            sum += exp(xr[i] - m);
        sum = group_sum(sum, scratch);
        sum = log(sum);
        for (uint i = lid; i < len; i += wg)
            yr[i] = xr[i] - m - sum;
    } else {
        /* Keep exp(x - m) in y: one exp per element. */
        for (uint i = lid; i < len; i += wg) {
            float e = exp(xr[i] - m);
            yr[i] = e;
            sum += e;
        }
        sum = group_sum(sum, scratch);
        for (uint i = lid; i < len; i += wg)
            yr[i] /= sum;
    }
}

/* Softmax (or log-softmax) of x (outer, len, inner) over len, into y. */
__kernel void softmax_axis(uint len, __global const float *x, uint x_off,
                           __global float *y, uint y_off, int log_out, uint n,
                           uint inner)
{
    size_t gid = get_global_id(0);
    uint o, i;
    __global const float *xc;
    __global float *yc;
    float m = -INFINITY, sum = 0.0f;

    if (gid >= n)
        return;
    o = (uint)gid / inner;
    i = (uint)gid - o * inner;
    xc = x + x_off + o * len * inner + i;
    yc = y + y_off + o * len * inner + i;
    for (uint j = 0; j < len; j++)
        m = fmax(m, xc[j * inner]);
    if (log_out) {
        for (uint j = 0; j < len; j++)
            sum += exp(xc[j * inner] - m);
        sum = log(sum);
        for (uint j = 0; j < len; j++)
            yc[j * inner] = xc[j * inner] - m - sum;
    } else {
        for (uint j = 0; j < len; j++) {
            float e = exp(xc[j * inner] - m);
            yc[j * inner] = e;
            sum += e;
        }
        for (uint j = 0; j < len; j++)
            yc[j * inner] /= sum;
    }
}

/*
 * Layer normalisation of each row of x (outer, len, from x_off) into y:
 * y = (x - mean) / sqrt(var + epsilon) * scale + bias, var the biased
 * variance, computed in two passes (the mean, then the mean square
 * deviation) for accuracy.  scale and bias hold len floats from their
 * offsets; has_bias 0 means no bias (bias then points at any valid
 * buffer).  One work-group per row as in reduce_sum_row.  y may be x:
 * each work-item writes only the elements it alone reads last.
 */
__kernel void layernorm_row(uint len, __global const float *x, uint x_off,
                            __global float *y, uint y_off,
                            __global const float *scale, uint scale_off,
                            __global const float *bias, uint bias_off,
                            int has_bias, float epsilon,
                            __local float *scratch)
{
    uint row = (uint)get_group_id(0);
    uint lid = get_local_id(0), wg = get_local_size(0);
    __global const float *xr = x + x_off + row * len;
    __global float *yr = y + y_off + row * len;
    float mean = 0.0f, var = 0.0f, sd;

    for (uint i = lid; i < len; i += wg)
        mean += xr[i];
    mean = group_sum(mean, scratch) / (float)len;
    for (uint i = lid; i < len; i += wg) {
        float dv = xr[i] - mean;
        var += dv * dv;
    }
    var = group_sum(var, scratch) / (float)len;
    sd = sqrt(var + epsilon);
    for (uint i = lid; i < len; i += wg) {
        float v = (xr[i] - mean) / sd * scale[scale_off + i];
        yr[i] = has_bias ? v + bias[bias_off + i] : v;
    }
}

/*
 * Top k along the middle axis of x (outer, len, inner): one work-item per
 * (outer, inner) position, k scans of the axis, each picking the element
 * ranked first among those ranked after the previous pick.  The ranking:
 * NaN first, then the largest value (flags & 1) or the smallest; equal
 * values by index, the lower first (the higher with flags & 2).  Values
 * (outer, k, inner) are written where flags & 4, indices as floats.
 */
int ranks_before(int flags, float a, uint ia, float b, uint ib)
{
    if (isnan(a) != isnan(b))
        return isnan(a);
    if (a != b && !isnan(a))
        return (flags & 1) ? a > b : a < b;
    return (flags & 2) ? ia > ib : ia < ib;
}

__kernel void topk_axis(uint n, uint len, uint inner, uint k,
                        __global const float *x, uint x_off,
                        __global float *values, uint v_off,
                        __global float *indices, uint i_off, int flags)
{
    size_t gid = get_global_id(0);
    uint o, i, at, prev = 0;
    __global const float *xc;

    if (gid >= n)
        return;
    o = (uint)gid / inner;
    i = (uint)gid - o * inner;
    xc = x + x_off + o * len * inner + i;
    at = o * k * inner + i;
    for (uint t = 0; t < k; t++, at += inner) {
        uint best = len;
        for (uint r = 0; r < len; r++) {
            if (t > 0 &&
                !ranks_before(flags, xc[prev * inner], prev, xc[r * inner], r))
                continue;
            if (best == len ||
                ranks_before(flags, xc[r * inner], r, xc[best * inner], best))
                best = r;
        }
        prev = best;
        if (flags & 4)
            values[v_off + at] = xc[best * inner];
        indices[i_off + at] = (float)best;
    }
}

/*
 * Cumulative sums along the middle axis of x (outer, len, inner) into y:
 * one work-item per (outer, inner) line, in order along it; exclusive
 * (flags & 1) leaves each element out of its own sum, reverse (flags & 2)
 * runs from the end.
 */
__kernel void scan_axis(uint n, uint len, uint inner,
                        __global const float *x, uint x_off,
                        __global float *y, uint y_off, int flags)
{
    size_t gid = get_global_id(0);
    uint o, i;
    __global const float *xc;
    __global float *yc;
    float acc = 0.0f;

    if (gid >= n)
        return;
    o = (uint)gid / inner;
    i = (uint)gid - o * inner;
    xc = x + x_off + o * len * inner + i;
    yc = y + y_off + o * len * inner + i;
    for (uint t = 0; t < len; t++) {
        uint r = ((flags & 2) ? len - 1 - t : t) * inner;
        float v = xc[r];
        if (flags & 1) {
            yc[r] = acc;
            acc += v;
        } else {
            acc += v;
            yc[r] = acc;
        }
    }
}
