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
