/*
 * The OpenCL launcher of the separable resampling kernels (resample.cl;
 * backend.h's sn_resample_desc): the shapes narrowed to the kernels' uint
 * arguments after checking that every index they form fits; rank 2 (an
 * image) has a kernel of its own.
 */
#include <config.h>

#include "opencl.h"
#include "core/error.h"

shardnet_status sn_cl_resample(sn_device *dev, const sn_resample_desc *d)
{
    const char *what = "resample";
    size_t n = d->planes, ein = d->planes, combos = 1;
    cl_uint8 in, out, taps, toff;
    cl_uint un, x_off, t_off, y_off, rank, ncomb;
    cl_float fill = d->fill;
    cl_mem x = d->x.buf->handle, table = d->table.buf->handle,
           y = d->y.buf->handle;

    /* lib/backend/kernels.c checked the sizes for overflow, the taps
     * against the table and every view against its buffer. */
    for (size_t i = 0; i < d->rank; i++) {
        n *= d->out[i];
        ein *= d->in[i];
        combos *= d->taps[i];
    }
    if (n == 0)
        return SHARDNET_OK;
    if (!fits_idx(d->y.offset, n))
        return sn_cl_too_large(dev, what, "y", d->y.offset, n);
    if (!fits_idx(d->x.offset, ein))
        return sn_cl_too_large(dev, what, "x", d->x.offset, ein);
    if (!fits_idx(d->table.offset, d->table_len))
        return sn_cl_too_large(dev, what, "table", d->table.offset,
                               d->table_len);
    for (int i = 0; i < 8; i++) {
        int used = (size_t)i < d->rank;
        in.s[i] = used ? (cl_uint)d->in[i] : 1;
        out.s[i] = used ? (cl_uint)d->out[i] : 1;
        taps.s[i] = used ? (cl_uint)d->taps[i] : 1;
        toff.s[i] = used ? (cl_uint)d->table_off[i] : 0;
    }
    un = (cl_uint)n;
    x_off = (cl_uint)d->x.offset;
    t_off = (cl_uint)d->table.offset;
    y_off = (cl_uint)d->y.offset;
    rank = (cl_uint)d->rank;
    ncomb = (cl_uint)combos;
    if (d->rank == 2) { /* an image: the kernel without per-axis loops */
        karg args[] = {ARG(un),       ARG(x),        ARG(x_off),
                       ARG(table),    ARG(t_off),    ARG(y),
                       ARG(y_off),    ARG(in.s[0]),  ARG(in.s[1]),
                       ARG(out.s[0]), ARG(out.s[1]), ARG(taps.s[0]),
                       ARG(taps.s[1]), ARG(toff.s[0]), ARG(toff.s[1]),
                       ARG(fill)};
        return sn_cl_run_single(dev, K_RESAMPLE_2D, what, args, 16, n);
    }
    {
        karg args[] = {ARG(un),    ARG(x),   ARG(x_off), ARG(table),
                       ARG(t_off), ARG(y),   ARG(y_off), ARG(rank),
                       ARG(in),    ARG(out), ARG(taps),  ARG(toff),
                       ARG(ncomb), ARG(fill)};
        return sn_cl_run_single(dev, K_RESAMPLE, what, args, 14, n);
    }
}
