/*
 * Separable resampling (backend.h's sn_resample_desc: Resize, Upsample).
 * One work-item per output element; the host rounds the global size up and
 * passes the true count n.  The shapes come as 8-lane vectors, C order, in
 * the first rank lanes; table_off holds where each axis' (index, weight)
 * pairs start in table.  The host checks that every uint index fits.
 */
__kernel void resample(uint n, __global const float *x, uint x_off,
                       __global const float *table, uint t_off,
                       __global float *y, uint y_off, uint rank, uint8 in,
                       uint8 out, uint8 taps, uint8 table_off, uint ncomb,
                       float fill)
{
    size_t gid = get_global_id(0);
    uint sin[8], sout[8], st[8], so[8], o[8], j[8], istr[8];
    uint rest, plane = 1, xb;
    float acc = 0.0f;

    if (gid >= n)
        return;
    vstore8(in, 0, sin);
    vstore8(out, 0, sout);
    vstore8(taps, 0, st);
    vstore8(table_off, 0, so);
    rest = (uint)gid;
    for (uint d = rank; d-- > 0;) {
        uint q = rest / sout[d];
        o[d] = rest - q * sout[d];
        rest = q;
        j[d] = 0;
        istr[d] = plane;
        plane *= sin[d];
    }
    xb = x_off + rest * plane;
    for (uint c = 0; c < ncomb; c++) {
        uint off = 0;
        float w = 1.0f;
        for (uint d = 0; d < rank; d++) {
            uint e = t_off + so[d] + 2 * (o[d] * st[d] + j[d]);
            float fi = table[e];
            if (!(fi >= 0.0f && fi < (float)sin[d])) {
                y[y_off + (uint)gid] = fill;
                return;
            }
            off += (uint)fi * istr[d];
            w *= table[e + 1];
        }
        acc += w * x[xb + off];
        for (uint d = rank; d-- > 0;) {
            if (++j[d] < st[d])
                break;
            j[d] = 0;
        }
    }
    y[y_off + (uint)gid] = acc;
}

/*
 * The same for rank 2 (an image's height and width, its batch and
 * channels the planes): the common case, without the general kernel's
 * per-axis loops.  toff_h and toff_w: where the two axes' pairs start.
 */
__kernel void resample_2d(uint n, __global const float *x, uint x_off,
                          __global const float *table, uint t_off,
                          __global float *y, uint y_off, uint in_h,
                          uint in_w, uint out_h, uint out_w, uint taps_h,
                          uint taps_w, uint toff_h, uint toff_w, float fill)
{
    size_t gid = get_global_id(0);
    uint ox, oy, t, plane;
    __global const float *xp, *th, *tw;
    float acc = 0.0f;

    if (gid >= n)
        return;
    t = (uint)gid / out_w;
    ox = (uint)gid - t * out_w;
    plane = t / out_h;
    oy = t - plane * out_h;
    xp = x + x_off + plane * in_h * in_w;
    th = table + t_off + toff_h + 2 * oy * taps_h;
    tw = table + t_off + toff_w + 2 * ox * taps_w;
    for (uint i = 0; i < taps_h; i++) {
        float fy = th[2 * i], row = 0.0f;
        if (!(fy >= 0.0f && fy < (float)in_h)) {
            acc = fill;
            break;
        }
        for (uint j = 0; j < taps_w; j++) {
            float fx = tw[2 * j];
            if (!(fx >= 0.0f && fx < (float)in_w)) {
                y[y_off + (uint)gid] = fill;
                return;
            }
            row += tw[2 * j + 1] * xp[(uint)fy * in_w + (uint)fx];
        }
        acc += th[2 * i + 1] * row;
    }
    y[y_off + (uint)gid] = acc;
}
