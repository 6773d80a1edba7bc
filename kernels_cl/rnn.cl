/*
 * One time step of a recurrent cell (ONNX RNN, GRU, LSTM) after the
 * products: sn_rnn_cell_desc in lib/backend/backend.h says what each cell
 * computes.  One work-item per (batch item, hidden unit), n of them; the
 * host rounds the global size up, checks that every uint index fits, and
 * passes the activations' and cells' numbers as backend.h's enums have
 * them (below).  The state h (and c) is updated in place: each work-item
 * reads and writes its own element only.
 */

/* sn_rnn_act */
#define ACT_SIGMOID 0
#define ACT_TANH 1
#define ACT_RELU 2
#define ACT_LEAKY_RELU 3
#define ACT_THRESHOLDED_RELU 4
#define ACT_SCALED_TANH 5
#define ACT_HARD_SIGMOID 6
#define ACT_ELU 7
#define ACT_SOFTSIGN 8
#define ACT_SOFTPLUS 9
#define ACT_AFFINE 10

/* sn_rnn_cell_kind */
#define CELL_SIMPLE 0
#define CELL_LSTM 1
#define CELL_GRU 2
#define CELL_GRU_RESET 3

static float rnn_act(int act, float alpha, float beta, float x)
{
    switch (act) {
    case ACT_SIGMOID:
        return 1.0f / (1.0f + exp(-x));
    case ACT_TANH:
        return tanh(x);
    case ACT_RELU:
        return x > 0.0f ? x : 0.0f;
    case ACT_LEAKY_RELU:
        return x < 0.0f ? alpha * x : x;
    case ACT_THRESHOLDED_RELU:
        return x >= alpha ? x : 0.0f;
    case ACT_SCALED_TANH:
        return alpha * tanh(beta * x);
    case ACT_HARD_SIGMOID:
        return fmax(0.0f, fmin(1.0f, alpha * x + beta));
    case ACT_ELU:
        return x < 0.0f ? alpha * (exp(x) - 1.0f) : x;
    case ACT_SOFTSIGN:
        return x / (1.0f + fabs(x));
    case ACT_SOFTPLUS:
        return x > 0.0f ? x + log1p(exp(-x)) : log1p(exp(x));
    case ACT_AFFINE:
        return alpha * x + beta;
    }
    return x;
}

/* Activation k (of acts, alphas, betas) on v clipped to [-clip, clip]
 * (clip > 0). */
static float act_k(int k, int4 acts, float4 alphas, float4 betas,
                   float clip, float v)
{
    int a[4] = {acts.s0, acts.s1, acts.s2, acts.s3};
    float al[4] = {alphas.s0, alphas.s1, alphas.s2, alphas.s3};
    float be[4] = {betas.s0, betas.s1, betas.s2, betas.s3};
    if (clip > 0.0f)
        v = fmin(fmax(v, -clip), clip);
    return rnn_act(a[k], al[k], be[k], v);
}

__kernel void rnn_cell(uint n, uint hidden, int cell, int4 acts,
                       float4 alphas, float4 betas, float clip,
                       int input_forget, __global const float *gates,
                       uint g_off, uint ld_g, __global const float *rec,
                       uint rec_off, int has_rec, __global const float *peep,
                       uint peep_off, int has_peep,
                       __global const float *mask, uint mask_off,
                       int has_mask, __global float *h, uint h_off,
                       __global float *c, uint c_off, __global float *y,
                       uint y_off, uint ld_y, int has_y)
{
    size_t gid = get_global_id(0);
    uint b, j, hi;
    float v = 0.0f, cn = 0.0f, hold;
    int live;
    __global const float *g;

    if (gid >= n)
        return;
    b = (uint)gid / hidden;
    j = (uint)gid - b * hidden;
    hi = b * hidden + j;
    g = gates + g_off + b * ld_g;
    hold = h[h_off + hi];
    live = !has_mask || mask[mask_off + b] != 0.0f;
    if (cell == CELL_GRU_RESET) {
        y[y_off + b * ld_y + j] =
            act_k(0, acts, alphas, betas, clip, g[hidden + j]) * hold;
        return;
    }
    if (cell == CELL_SIMPLE) {
        v = act_k(0, acts, alphas, betas, clip, g[j]);
    } else if (cell == CELL_LSTM) {
        float cold = c[c_off + hi];
        float pi = has_peep ? peep[peep_off + j] : 0.0f;
        float po = has_peep ? peep[peep_off + hidden + j] : 0.0f;
        float pf = has_peep ? peep[peep_off + 2 * hidden + j] : 0.0f;
        float i = act_k(0, acts, alphas, betas, clip, g[j] + pi * cold);
        float f = input_forget ? 1.0f - i
                               : act_k(0, acts, alphas, betas, clip,
                                       g[2 * hidden + j] + pf * cold);
        float o;
        cn = f * cold +
             i * act_k(1, acts, alphas, betas, clip, g[3 * hidden + j]);
        o = act_k(0, acts, alphas, betas, clip, g[hidden + j] + po * cn);
        v = o * rnn_act(acts.s2, alphas.s2, betas.s2, cn);
    } else {
        __global const float *r = rec + rec_off + b * 3 * hidden;
        float z = act_k(0, acts, alphas, betas, clip,
                        g[j] + (has_rec ? r[j] : 0.0f));
        float rr = act_k(0, acts, alphas, betas, clip,
                         g[hidden + j] + (has_rec ? r[hidden + j] : 0.0f));
        float hh = act_k(1, acts, alphas, betas, clip,
                         g[2 * hidden + j] +
                             (has_rec ? rr * r[2 * hidden + j] : 0.0f));
        v = (1.0f - z) * hh + z * hold;
    }
    if (has_y)
        y[y_off + b * ld_y + j] = live ? v : 0.0f;
    if (live) {
        h[h_off + hi] = v;
        if (cell == CELL_LSTM)
            c[c_off + hi] = cn;
    }
}
