/*
 * Data movement: strided copy, where (select with broadcasting), gather.
 *
 * One work-item per output element; the host rounds the global size up and
 * passes the true count n, and work-items past n return at once.  Shapes
 * and strides come as 8-lane vectors, C order, in the first rank lanes
 * (the host fills the other lanes with shape 1, stride 0).  The host checks
 * that every uint index a kernel forms fits, as in elementwise.cl; the
 * copy, whose strides are signed, sums its offsets in long.
 */

/*
 * dst[dst_off + sum i_d * dst_stride[d]] = src[src_off + sum i_d *
 * src_stride[d]] for every index of shape (n elements).  Strides are
 * signed (a Slice with negative steps), so offsets are summed in long; the
 * host checks that every sum lands inside its buffer.
 */
__kernel void copy_strided(uint n, uint rank, uint8 shape,
                           __global const float *src, ulong src_off,
                           long8 src_stride, __global float *dst,
                           ulong dst_off, long8 dst_stride)
{
    size_t gid = get_global_id(0);
    uint sh[8];
    long ss[8], ds[8];
    long is = (long)src_off, id = (long)dst_off;
    uint rest;

    if (gid >= n)
        return;
    vstore8(shape, 0, sh);
    vstore8(src_stride, 0, ss);
    vstore8(dst_stride, 0, ds);
    /* Peel the linear index into coordinates, innermost first. */
    rest = (uint)gid;
    for (uint d = rank; d-- > 0;) {
        uint q = rest / sh[d];
        long coord = (long)(rest - q * sh[d]);
        is += coord * ss[d];
        id += coord * ds[d];
        rest = q;
    }
    dst[id] = src[is];
}

/*
 * out (n, contiguous from out_off) = cond != 0 ? x : y, each operand read
 * through its own broadcast strides (0 where broadcast) from its offset.
 */
__kernel void where_bcast(uint n, __global const float *cond, uint cond_off,
                          __global const float *x, uint x_off,
                          __global const float *y, uint y_off,
                          __global float *out, uint out_off, uint rank,
                          uint8 shape, uint8 stride_cond, uint8 stride_x,
                          uint8 stride_y)
{
    size_t gid = get_global_id(0);
    uint sh[8], sc[8], sx[8], sy[8];
    uint ic = cond_off, ix = x_off, iy = y_off, rest;

    if (gid >= n)
        return;
    vstore8(shape, 0, sh);
    vstore8(stride_cond, 0, sc);
    vstore8(stride_x, 0, sx);
    vstore8(stride_y, 0, sy);
    rest = (uint)gid;
    for (uint d = rank; d-- > 0;) {
        uint q = rest / sh[d];
        uint coord = rest - q * sh[d];
        ic += coord * sc[d];
        ix += coord * sx[d];
        iy += coord * sy[d];
        rest = q;
    }
    /* Only the chosen operand is read. */
    out[out_off + (uint)gid] = cond[ic] != 0.0f ? x[ix] : y[iy];
}

/*
 * out (outer, nidx, inner) = data (outer, axis_len, inner)[o, idx[j], i],
 * idx the nidx int32 values from idx_off.  A negative index counts from
 * the end; one still out of range gives 0.  n = outer * nidx * inner.
 */
__kernel void gather_axis(uint n, __global const float *data, uint data_off,
                          __global const int *idx, uint idx_off,
                          __global float *out, uint out_off, int axis_len,
                          uint nidx, uint inner)
{
    size_t gid = get_global_id(0);
    uint t, i, j, o;
    int k;

    if (gid >= n)
        return;
    t = (uint)gid / inner;
    i = (uint)gid - t * inner;
    o = t / nidx;
    j = t - o * nidx;
    k = idx[idx_off + j];
    if (k < 0)
        k += axis_len; /* no overflow: axis_len <= INT_MAX */
    out[out_off + (uint)gid] =
        k >= 0 && k < axis_len
            ? data[data_off + (o * (uint)axis_len + (uint)k) * inner + i]
            : 0.0f;
}
