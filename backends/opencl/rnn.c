/*
 * The recurrent cell's launcher (kernels_cl/rnn.cl): one time step of an
 * RNN, GRU or LSTM after the products, its views checked against the
 * kernel's uint indices.
 */
#include <config.h>

#include "opencl.h"
#include "core/error.h"

/* The rnn.cl numbers of backend.h's enums. */
_Static_assert(SN_RNN_ACT_AFFINE == 10 && SN_RNN_ACT_SOFTPLUS == 9 &&
                   SN_RNN_ACT_SIGMOID == 0,
               "rnn.cl numbers the activations as backend.h");
_Static_assert(SN_RNN_CELL_SIMPLE == 0 && SN_RNN_CELL_LSTM == 1 &&
                   SN_RNN_CELL_GRU == 2 && SN_RNN_CELL_GRU_RESET == 3,
               "rnn.cl numbers the cells as backend.h");

/* An optional view's buffer and offset (any buffer where it is absent:
 * the kernel never reads it), checked to fit extent elements. */
static shardnet_status opt_view(sn_device *dev, const char *name, sn_view v,
                                size_t extent, cl_mem fallback, cl_mem *mem,
                                cl_uint *off, cl_int *has)
{
    *has = v.buf != NULL;
    *mem = v.buf ? v.buf->handle : fallback;
    *off = 0;
    if (!v.buf)
        return SHARDNET_OK;
    if (!fits_idx(v.offset, extent))
        return sn_cl_too_large(dev, "rnn cell", name, v.offset, extent);
    *off = (cl_uint)v.offset;
    return SHARDNET_OK;
}

shardnet_status sn_cl_rnn_cell(sn_device *dev, const sn_rnn_cell_desc *d)
{
    static const size_t ngates[] = {1, 4, 3, 3};
    const char *what = "rnn cell";
    size_t n = d->batch * d->hidden; /* checked by sn_rnn_cell */
    size_t gw = ngates[d->cell] * d->hidden;
    size_t eg = (d->batch - 1) * d->ld_gates + gw;
    size_t ey = d->y.buf ? (d->batch - 1) * d->ld_y + d->hidden : 0;
    cl_mem gates = d->gates.buf->handle, h = d->h.buf->handle, rec, peep,
           mask, c, y;
    cl_uint un, hid, g_off, ld_g, h_off, rec_off, peep_off, mask_off, c_off,
        y_off, ld_y;
    cl_int cell = (cl_int)d->cell, input_forget = d->input_forget != 0,
           has_rec, has_peep, has_mask, has_c, has_y;
    cl_int4 acts = {{(cl_int)d->act[0], (cl_int)d->act[1], (cl_int)d->act[2],
                     0}};
    cl_float4 alphas = {{d->alpha[0], d->alpha[1], d->alpha[2], 0.0f}};
    cl_float4 betas = {{d->beta[0], d->beta[1], d->beta[2], 0.0f}};
    cl_float clip = d->clip;
    shardnet_status st;

    if (n == 0)
        return SHARDNET_OK;
    if (!fits_idx(d->gates.offset, eg))
        return sn_cl_too_large(dev, what, "gates", d->gates.offset, eg);
    if (!fits_idx(d->h.offset, n))
        return sn_cl_too_large(dev, what, "h", d->h.offset, n);
    if ((st = opt_view(dev, "rec", d->rec, 3 * n, gates, &rec, &rec_off,
                       &has_rec)) ||
        (st = opt_view(dev, "peep", d->peep, 3 * d->hidden, gates, &peep,
                       &peep_off, &has_peep)) ||
        (st = opt_view(dev, "mask", d->mask, d->batch, gates, &mask,
                       &mask_off, &has_mask)) ||
        (st = opt_view(dev, "c", d->c, n, h, &c, &c_off, &has_c)) ||
        (st = opt_view(dev, "y", d->y, ey, h, &y, &y_off, &has_y)))
        return st;
    if (d->cell != SN_RNN_CELL_GRU)
        has_rec = 0;
    if (d->cell != SN_RNN_CELL_LSTM)
        has_peep = 0;
    un = (cl_uint)n;
    hid = (cl_uint)d->hidden;
    g_off = (cl_uint)d->gates.offset;
    ld_g = (cl_uint)d->ld_gates; /* at most eg */
    h_off = (cl_uint)d->h.offset;
    ld_y = has_y ? (cl_uint)d->ld_y : 0;
    {
        karg args[] = {ARG(un),       ARG(hid),      ARG(cell),
                       ARG(acts),     ARG(alphas),   ARG(betas),
                       ARG(clip),     ARG(input_forget), ARG(gates),
                       ARG(g_off),    ARG(ld_g),     ARG(rec),
                       ARG(rec_off),  ARG(has_rec),  ARG(peep),
                       ARG(peep_off), ARG(has_peep), ARG(mask),
                       ARG(mask_off), ARG(has_mask), ARG(h),
                       ARG(h_off),    ARG(c),        ARG(c_off),
                       ARG(y),        ARG(y_off),    ARG(ld_y),
                       ARG(has_y)};
        return sn_cl_run_single(dev, K_RNN_CELL, what, args,
                                sizeof args / sizeof args[0], n);
    }
}
