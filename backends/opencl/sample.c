/*
 * The OpenCL launchers of the sampling kernels (sample.cl; backend.h's
 * GridSample and RoiAlign descriptors): sizes narrowed to the kernels'
 * uint arguments after checking that every index they form fits.
 */
#include <config.h>

#include "opencl.h"
#include "core/error.h"

shardnet_status sn_cl_grid_sample(sn_device *dev,
                                  const sn_grid_sample_desc *d)
{
    const char *what = "grid sample";
    /* lib/backend/kernels.c checked the products for overflow and the
     * views against their buffers */
    size_t n = d->batch * d->channels * d->out_h * d->out_w;
    size_t ein = d->batch * d->channels * d->in_h * d->in_w;
    size_t eg = d->batch * d->out_h * d->out_w * 2;
    cl_uint un, x_off, g_off, y_off, ch, ih, iw, oh, ow;
    cl_int mode = (cl_int)d->mode, pad = (cl_int)d->padding,
           ac = d->align_corners != 0;
    cl_mem x = d->x.buf->handle, grid = d->grid.buf->handle,
           y = d->y.buf->handle;

    if (n == 0)
        return SHARDNET_OK;
    if (!fits_idx(d->y.offset, n))
        return sn_cl_too_large(dev, what, "y", d->y.offset, n);
    if (!fits_idx(d->x.offset, ein))
        return sn_cl_too_large(dev, what, "x", d->x.offset, ein);
    if (!fits_idx(d->grid.offset, eg))
        return sn_cl_too_large(dev, what, "grid", d->grid.offset, eg);
    un = (cl_uint)n;
    x_off = (cl_uint)d->x.offset;
    g_off = (cl_uint)d->grid.offset;
    y_off = (cl_uint)d->y.offset;
    ch = (cl_uint)d->channels;
    ih = (cl_uint)d->in_h;
    iw = (cl_uint)d->in_w;
    oh = (cl_uint)d->out_h;
    ow = (cl_uint)d->out_w;
    {
        karg args[] = {ARG(un), ARG(x),  ARG(x_off), ARG(grid), ARG(g_off),
                       ARG(y),  ARG(y_off), ARG(ch), ARG(ih),   ARG(iw),
                       ARG(oh), ARG(ow), ARG(mode), ARG(pad),  ARG(ac)};
        return sn_cl_run_single(dev, K_GRID_SAMPLE, what, args, 15, n);
    }
}

shardnet_status sn_cl_roi_align(sn_device *dev, const sn_roi_align_desc *d)
{
    const char *what = "RoI align";
    size_t n = d->nrois * d->channels * d->out_h * d->out_w;
    size_t ein = d->batch * d->channels * d->in_h * d->in_w;
    cl_uint un, x_off, r_off, b_off, y_off, batch, ch, ih, iw, oh, ow, sr;
    cl_float scale = d->spatial_scale;
    cl_int mx = d->max_mode != 0, hp = d->half_pixel != 0;
    cl_mem x = d->x.buf->handle, rois = d->rois.buf->handle,
           bidx = d->batch_idx.buf->handle, y = d->y.buf->handle;

    if (n == 0)
        return SHARDNET_OK;
    if (!fits_idx(d->y.offset, n))
        return sn_cl_too_large(dev, what, "y", d->y.offset, n);
    if (!fits_idx(d->x.offset, ein))
        return sn_cl_too_large(dev, what, "x", d->x.offset, ein);
    if (!fits_idx(d->rois.offset, 4 * d->nrois))
        return sn_cl_too_large(dev, what, "rois", d->rois.offset,
                               4 * d->nrois);
    if (!fits_idx(d->batch_idx.offset, d->nrois))
        return sn_cl_too_large(dev, what, "batch_idx", d->batch_idx.offset,
                               d->nrois);
    un = (cl_uint)n;
    x_off = (cl_uint)d->x.offset;
    r_off = (cl_uint)d->rois.offset;
    b_off = (cl_uint)d->batch_idx.offset;
    y_off = (cl_uint)d->y.offset;
    batch = (cl_uint)d->batch;
    ch = (cl_uint)d->channels;
    ih = (cl_uint)d->in_h;
    iw = (cl_uint)d->in_w;
    oh = (cl_uint)d->out_h;
    ow = (cl_uint)d->out_w;
    sr = (cl_uint)d->sampling_ratio;
    {
        karg args[] = {ARG(un),    ARG(x),     ARG(x_off), ARG(rois),
                       ARG(r_off), ARG(bidx),  ARG(b_off), ARG(y),
                       ARG(y_off), ARG(batch), ARG(ch),    ARG(ih),
                       ARG(iw),    ARG(oh),    ARG(ow),    ARG(sr),
                       ARG(scale), ARG(mx),    ARG(hp)};
        return sn_cl_run_single(dev, K_ROI_ALIGN, what, args, 19, n);
    }
}
