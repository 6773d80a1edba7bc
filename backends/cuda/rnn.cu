/*
 * One time step of a recurrent cell (ONNX RNN, GRU, LSTM) after the
 * products: sn_rnn_cell_desc in lib/backend/backend.h says what each cell
 * computes.  One thread per (batch item, hidden unit), adjacent threads on
 * adjacent units of an item; the state h (and c) is updated in place, each
 * thread reading and writing its own element only.  The arithmetic is the
 * CPU backend's (cpu/rnn.c), in float and in the same order; the
 * activations' exponentials and tanh are the device's.
 */
#include "cu.h"

/* The cell's activations f, g, h (sn_rnn_act), their alpha and beta, and
 * the clip, by value into the kernel. */
typedef struct rnn_acts {
    int act[3];
    float alpha[3], beta[3];
    float clip;
} rnn_acts;

/* backend.h's sn_rnn_act of x, as the CPU backend words each one. */
static __device__ float rnn_act(int act, float alpha, float beta, float x)
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
    case SN_RNN_ACT_HARD_SIGMOID: /* fminf, fmaxf: NaN gives 0 */
        return fmaxf(0.0f, fminf(1.0f, alpha * x + beta));
    case SN_RNN_ACT_ELU:
        return x < 0.0f ? alpha * (expf(x) - 1.0f) : x;
    case SN_RNN_ACT_SOFTSIGN:
        return x / (1.0f + fabsf(x));
    case SN_RNN_ACT_SOFTPLUS: /* log(1 + e^x) without overflow */
        return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
    case SN_RNN_ACT_AFFINE:
        return alpha * x + beta;
    }
    return x;
}

/* Activation k on v clipped to [-clip, clip] where clip > 0 (fminf and
 * fmaxf, as the CPU backend: a NaN gate input clips to -clip). */
static __device__ float rnn_gate(const rnn_acts *a, int k, float v)
{
    if (a->clip > 0.0f)
        v = fminf(fmaxf(v, -a->clip), a->clip);
    return rnn_act(a->act[k], a->alpha[k], a->beta[k], v);
}

/* LSTM unit j of an item (g: its gate row, i o f c): the new H, *c_new
 * the new C; peep NULL: no peepholes. */
static __device__ float rnn_lstm(const rnn_acts *a, int input_forget,
                                 const float *g, const float *peep,
                                 size_t hn, size_t j, float c_old,
                                 float *c_new)
{
    float pi = peep ? peep[j] : 0.0f, po = peep ? peep[hn + j] : 0.0f,
          pf = peep ? peep[2 * hn + j] : 0.0f;
    float i = rnn_gate(a, 0, g[j] + pi * c_old);
    float f = input_forget ? 1.0f - i
                           : rnn_gate(a, 0, g[2 * hn + j] + pf * c_old);
    float c = f * c_old + i * rnn_gate(a, 1, g[3 * hn + j]);
    float o = rnn_gate(a, 0, g[hn + j] + po * c);
    *c_new = c;
    return o * rnn_act(a->act[2], a->alpha[2], a->beta[2], c);
}

/* GRU unit j of an item (g: its gate row, z r h; rec its recurrent
 * row for linear_before_reset, or NULL). */
static __device__ float rnn_gru(const rnn_acts *a, const float *g,
                                const float *rec, size_t hn, size_t j,
                                float h_old)
{
    float z = rnn_gate(a, 0, g[j] + (rec ? rec[j] : 0.0f));
    float r = rnn_gate(a, 0, g[hn + j] + (rec ? rec[hn + j] : 0.0f));
    float hh =
        rnn_gate(a, 1, g[2 * hn + j] + (rec ? r * rec[2 * hn + j] : 0.0f));
    return (1.0f - z) * hh + z * h_old;
}

/* Element i of (batch, hn): a masked-out item (mask 0) keeps its state and
 * gets 0 in y; GRU_RESET only writes y. */
static __global__ void rnn_cell(size_t n, size_t hn, int cell, rnn_acts a,
                                int input_forget, const float *gates,
                                size_t ld_gates, const float *rec,
                                const float *peep, const float *mask,
                                float *h, float *c, float *y, size_t ld_y)
{
    SN_CU_FOR(i, n)
    {
        const size_t b = i / hn, j = i - b * hn;
        const float *g = gates + b * ld_gates;
        const int live = !mask || mask[b] != 0.0f;
        float v, c_new = 0.0f;
        switch (cell) {
        case SN_RNN_CELL_GRU_RESET:
            y[b * ld_y + j] = rnn_gate(&a, 0, g[hn + j]) * h[i];
            continue;
        case SN_RNN_CELL_LSTM:
            v = rnn_lstm(&a, input_forget, g, peep, hn, j, c[i], &c_new);
            break;
        case SN_RNN_CELL_GRU:
            v = rnn_gru(&a, g, rec ? rec + b * 3 * hn : NULL, hn, j, h[i]);
            break;
        default: /* SN_RNN_CELL_SIMPLE */
            v = rnn_gate(&a, 0, g[j]);
            break;
        }
        if (y)
            y[b * ld_y + j] = live ? v : 0.0f;
        if (live) {
            h[i] = v;
            if (cell == SN_RNN_CELL_LSTM)
                c[i] = c_new;
        }
    }
}

int sn_cu_rnn_cell(const sn_rnn_cell_desc *d, void *stream)
{
    size_t n = d->batch * d->hidden;
    int lstm = d->cell == SN_RNN_CELL_LSTM, gru = d->cell == SN_RNN_CELL_GRU;
    rnn_acts a;

    for (int k = 0; k < 3; k++) {
        a.act[k] = (int)d->act[k];
        a.alpha[k] = d->alpha[k];
        a.beta[k] = d->beta[k];
    }
    a.clip = d->clip;
    /* rec and peep only where the cell reads them (the entry point checks
     * them only there) */
    return SN_CU_RUN(rnn_cell, n, stream, n, d->hidden, (int)d->cell, a,
                     d->input_forget, (const float *)sn_cu_ptr(d->gates),
                     d->ld_gates,
                     (const float *)(gru ? sn_cu_ptr(d->rec) : 0),
                     (const float *)(lstm ? sn_cu_ptr(d->peep) : 0),
                     (const float *)sn_cu_ptr(d->mask), sn_cu_ptr(d->h),
                     lstm ? sn_cu_ptr(d->c) : (float *)0, sn_cu_ptr(d->y),
                     d->ld_y);
}
