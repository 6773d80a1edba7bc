/*
 * One time step of a recurrent cell on the CPU (sn_rnn_cell_desc in
 * backend.h): the gate arithmetic of ONNX's RNN, GRU and LSTM after the
 * products, element by element over (batch, hidden).  The state h (and c)
 * is updated in place: each element reads its own old value only.  The
 * steps of a sequence are small (batch x hidden), so one thread does them.
 */
#include <config.h>

#include <math.h>
#include <stddef.h>

#include "cpu_kernels.h"

float sn_cpu_rnn_act(sn_rnn_act act, float alpha, float beta, float x)
{
    switch (act) {
    case SN_RNN_ACT_SIGMOID:
        return 1.0f / (1.0f + expf(-x));
    case SN_RNN_ACT_TANH:
        return tanhf(x);
    case SN_RNN_ACT_RELU:
        return x > 0.0f ? x : 0.0f;
    case SN_RNN_ACT_LEAKY_RELU:
        return x < 0.0f ? alpha * x : x;
    case SN_RNN_ACT_THRESHOLDED_RELU:
        return x >= alpha ? x : 0.0f;
    case SN_RNN_ACT_SCALED_TANH:
        return alpha * tanhf(beta * x);
    case SN_RNN_ACT_HARD_SIGMOID:
        return fmaxf(0.0f, fminf(1.0f, alpha * x + beta));
    case SN_RNN_ACT_ELU:
        return x < 0.0f ? alpha * (expf(x) - 1.0f) : x;
    case SN_RNN_ACT_SOFTSIGN:
        return x / (1.0f + fabsf(x));
    case SN_RNN_ACT_SOFTPLUS:
        /* log(1 + e^x) without overflow for large x */
        return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
    case SN_RNN_ACT_AFFINE:
        return alpha * x + beta;
    case SN_RNN_ACT_COUNT:
        break;
    }
    return x;
}

static float clipped(const sn_rnn_cell_desc *d, float v)
{
    if (d->clip > 0.0f)
        v = fminf(fmaxf(v, -d->clip), d->clip);
    return v;
}

/* Activation k of the cell on clip(v). */
static float act(const sn_rnn_cell_desc *d, int k, float v)
{
    return sn_cpu_rnn_act(d->act[k], d->alpha[k], d->beta[k], clipped(d, v));
}

/* The new state of element j of item b (g: its gate row); *c_new for the
 * LSTM's cell. */
static float lstm_unit(const sn_rnn_cell_desc *d, const float *g,
                       const float *peep, size_t j, float c_old, float *c_new)
{
    size_t hn = d->hidden;
    float pi = peep ? peep[j] : 0.0f, po = peep ? peep[hn + j] : 0.0f,
          pf = peep ? peep[2 * hn + j] : 0.0f;
    float i = act(d, 0, g[j] + pi * c_old);
    float f =
        d->input_forget ? 1.0f - i : act(d, 0, g[2 * hn + j] + pf * c_old);
    float c = f * c_old + i * act(d, 1, g[3 * hn + j]);
    float o = act(d, 0, g[hn + j] + po * c);
    *c_new = c;
    return o * sn_cpu_rnn_act(d->act[2], d->alpha[2], d->beta[2], c);
}

static float gru_unit(const sn_rnn_cell_desc *d, const float *g,
                      const float *rec, size_t j, float h_old)
{
    size_t hn = d->hidden;
    float z = act(d, 0, g[j] + (rec ? rec[j] : 0.0f));
    float r = act(d, 0, g[hn + j] + (rec ? rec[hn + j] : 0.0f));
    float hh = act(d, 1, g[2 * hn + j] + (rec ? r * rec[2 * hn + j] : 0.0f));
    return (1.0f - z) * hh + z * h_old;
}

void sn_cpu_rnn_cell(const sn_rnn_cell_desc *d, const float *gates,
                     const float *rec, const float *peep, const float *mask,
                     float *h, float *c, float *y)
{
    size_t hn = d->hidden;
    for (size_t b = 0; b < d->batch; b++) {
        const float *g = gates + b * d->ld_gates;
        const float *rb = rec ? rec + b * 3 * hn : NULL;
        float *hb = h + b * hn, *cb = c ? c + b * hn : NULL;
        float *yb = y ? y + b * d->ld_y : NULL;
        int live = !mask || mask[b] != 0.0f;
        for (size_t j = 0; j < hn; j++) {
            float v, c_new = 0.0f;
            switch (d->cell) {
            case SN_RNN_CELL_GRU_RESET:
                yb[j] = act(d, 0, g[hn + j]) * hb[j];
                continue;
            case SN_RNN_CELL_SIMPLE:
                v = act(d, 0, g[j]);
                break;
            case SN_RNN_CELL_LSTM:
                v = lstm_unit(d, g, peep, j, cb[j], &c_new);
                break;
            case SN_RNN_CELL_GRU:
                v = gru_unit(d, g, rb, j, hb[j]);
                break;
            default:
                return; /* refused by sn_rnn_cell */
            }
            if (yb)
                yb[j] = live ? v : 0.0f;
            if (live) {
                hb[j] = v;
                if (cb)
                    cb[j] = c_new;
            }
        }
    }
}
