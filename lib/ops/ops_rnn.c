/*
 * Recurrence: ONNX's RNN, GRU and LSTM (opsets 1-18), forward, reverse or
 * bidirectional, layout 0 (time first) or 1 (batch first).
 *
 * Per direction d, the input projection of every time step is one product
 * into scratch:  xw (steps and items, G hidden) = X W_d^T + biases,  its
 * rows (t, b) in layout 0 and (b, t) in layout 1, so that step t's rows
 * are xw + t * batch * G hidden one after the other, or xw + t * G hidden
 * seq * G hidden apart.  Then per step, in the order of the direction:
 *
 *   RNN, LSTM:  xw_t += H R^T (a product onto the step's rows), then the
 *               cell kernel (sn_rnn_cell_desc) turns the gates into H (C);
 *   GRU:        without linear_before_reset, xw_t[z, r] += H R_zr^T, the
 *               GRU_RESET cell gives r (.) H, xw_t[h] += (r (.) H) R_h^T,
 *               then the GRU cell; with it, rec = H R^T + R_b, then the GRU
 *               cell reading xw_t and rec.
 *
 * The state H (and C) of each direction is scratch, set from initial_h
 * (initial_c) or zeros by a copy at the start of every run; the cell writes
 * each step's H into Y directly (its rows strided as the layout has them)
 * and Y_h, Y_c are copies of the state at the end.  sequence_lens, an
 * integer input known when the plan is made, becomes a mask per step
 * (1 while t < the item's length): a masked item keeps its state and
 * gets zeros in Y, the spec's padding; in reverse, an item's sequence
 * runs from its own last step down.  The steps past the longest sequence
 * run no product and no cell: one copy zeroes their part of Y.
 *
 * clip bounds the gates' inputs, not the LSTM's cell state before h().
 * Opset 1's output_sequence is not read: Y is computed where the node
 * names it.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ops/ops.h"

/* What the node asks for. */
typedef struct rnn {
    sn_rnn_cell_kind cell; /* SIMPLE, LSTM or GRU */
    size_t ngates;         /* G: 1, 4, 3 */
    size_t nacts;          /* activations per direction: 1, 3, 2 */
    size_t dirs;           /* 1 or 2 */
    int reverse;           /* one direction, backwards */
    int layout;            /* 0: (seq, batch, ...); 1: (batch, seq, ...) */
    int lbr;               /* GRU's linear_before_reset */
    int input_forget;
    float clip;
    size_t seq, batch, input, hidden;
    size_t live; /* steps where some item runs: the longest sequence_lens */
    sn_rnn_act act[2][3];
    float alpha[2][3], beta[2][3];
} rnn;

static const char *const act_names[SN_RNN_ACT_COUNT] = {
#define SN_NAME_(name, str) str,
    SN_RNN_ACT_MAP(SN_NAME_)
#undef SN_NAME_
};

/* The spec's defaults: those of the ONNX operators of the same name. */
static void act_defaults(sn_rnn_act a, float *alpha, float *beta)
{
    *alpha = 1.0f;
    *beta = 0.0f;
    if (a == SN_RNN_ACT_LEAKY_RELU)
        *alpha = 0.01f;
    else if (a == SN_RNN_ACT_HARD_SIGMOID)
        *alpha = 0.2f, *beta = 0.5f;
    else if (a == SN_RNN_ACT_SCALED_TANH)
        *beta = 1.0f;
}

static int act_takes_alpha(sn_rnn_act a)
{
    return a == SN_RNN_ACT_LEAKY_RELU || a == SN_RNN_ACT_THRESHOLDED_RELU ||
           a == SN_RNN_ACT_SCALED_TANH || a == SN_RNN_ACT_HARD_SIGMOID ||
           a == SN_RNN_ACT_ELU || a == SN_RNN_ACT_AFFINE;
}

static int act_takes_beta(sn_rnn_act a)
{
    return a == SN_RNN_ACT_SCALED_TANH || a == SN_RNN_ACT_HARD_SIGMOID ||
           a == SN_RNN_ACT_AFFINE;
}

/*
 * The activations: `activations` lists nacts per direction (f, g, h;
 * for both directions, the forward ones first), or nacts for both.
 * activation_alpha and activation_beta are consumed in that order by the
 * activations that take one (as ONNX Runtime reads them); the others keep
 * their defaults.
 */
static shardnet_status parse_acts(const sn_node *n, rnn *r)
{
    static const sn_rnn_act defaults[3][3] = {
        [SN_RNN_CELL_SIMPLE] = {SN_RNN_ACT_TANH},
        [SN_RNN_CELL_LSTM] = {SN_RNN_ACT_SIGMOID, SN_RNN_ACT_TANH,
                              SN_RNN_ACT_TANH},
        [SN_RNN_CELL_GRU] = {SN_RNN_ACT_SIGMOID, SN_RNN_ACT_TANH}};
    const sn_attr *names = sn_node_attr(n, "activations");
    const sn_attr *al = sn_node_attr(n, "activation_alpha");
    const sn_attr *be = sn_node_attr(n, "activation_beta");
    size_t count = names ? names->count : 0, ia = 0, ib = 0;

    if (names && (names->type != SN_ATTR_STRINGS ||
                  (count != r->nacts && count != r->nacts * r->dirs)))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "activations lists %zu functions; the cell "
                             "takes %zu per direction",
                             count, r->nacts);
    for (size_t d = 0; d < r->dirs; d++)
        for (size_t k = 0; k < r->nacts; k++) {
            sn_rnn_act a = defaults[r->cell][k];
            if (names) {
                const char *s = names->strings[(d * r->nacts + k) % count];
                int found = -1;
                for (int i = 0; i < SN_RNN_ACT_COUNT; i++)
                    if (!strcasecmp(s, act_names[i]))
                        found = i;
                if (found < 0)
                    return sn_node_error(n, SHARDNET_UNSUPPORTED,
                                         "activation '%s' is not one the "
                                         "spec lists",
                                         s);
                a = (sn_rnn_act)found;
            }
            r->act[d][k] = a;
            act_defaults(a, &r->alpha[d][k], &r->beta[d][k]);
            if (act_takes_alpha(a) && al && al->type == SN_ATTR_FLOATS &&
                ia < al->count)
                r->alpha[d][k] = al->floats[ia++];
            if (act_takes_beta(a) && be && be->type == SN_ATTR_FLOATS &&
                ib < be->count)
                r->beta[d][k] = be->floats[ib++];
        }
    for (size_t k = r->nacts; k < 3; k++) /* unused: any valid one */
        for (size_t d = 0; d < 2; d++)
            r->act[d][k] = SN_RNN_ACT_TANH;
    if (r->dirs == 1)
        memcpy(r->act[1], r->act[0], sizeof r->act[0]);
    return SHARDNET_OK;
}

/* Attributes, and the sizes from X, W and R. */
static shardnet_status parse(sn_lower *L, const sn_node *n, rnn *r)
{
    const char *dir = sn_attr_string(n, "direction", "forward");
    sn_rt *x = sn_in(L, n, 0), *w = sn_in(L, n, 1), *rr = sn_in(L, n, 2);
    int64_t hs = sn_attr_int(n, "hidden_size", 0);
    int has_hs = sn_node_attr(n, "hidden_size") != NULL;
    size_t g;

    memset(r, 0, sizeof *r);
    if (!strcmp(n->op_type, "LSTM"))
        r->cell = SN_RNN_CELL_LSTM, r->ngates = 4, r->nacts = 3;
    else if (!strcmp(n->op_type, "GRU"))
        r->cell = SN_RNN_CELL_GRU, r->ngates = 3, r->nacts = 2;
    else
        r->cell = SN_RNN_CELL_SIMPLE, r->ngates = 1, r->nacts = 1;
    if (!strcmp(dir, "forward") || !strcmp(dir, "reverse"))
        r->dirs = 1, r->reverse = dir[0] == 'r';
    else if (!strcmp(dir, "bidirectional"))
        r->dirs = 2;
    else
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "direction '%s' is not forward, reverse or "
                             "bidirectional",
                             dir);
    r->layout = (int)sn_attr_int(n, "layout", 0);
    if (r->layout != 0 && (r->layout != 1 || L->g->opset < 14))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "layout %d (0, or 1 from opset 14)", r->layout);
    r->lbr = sn_attr_int(n, "linear_before_reset", 0) != 0;
    r->input_forget = sn_attr_int(n, "input_forget", 0) != 0;
    r->clip = sn_node_attr(n, "clip") ? sn_attr_float(n, "clip", 0.0f) : 0.0f;
    if (!(r->clip >= 0.0f))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "clip %g is negative", (double)r->clip);
    if (x->rank != 3 || w->rank != 3 || rr->rank != 3)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "X, W and R must have rank 3 (ranks %d, %d, %d)",
                             x->rank, w->rank, rr->rank);
    r->seq = (size_t)x->dims[r->layout];
    r->batch = (size_t)x->dims[1 - r->layout];
    r->input = (size_t)x->dims[2];
    r->hidden = (size_t)rr->dims[2];
    g = r->ngates * r->hidden;
    if ((has_hs && (hs < 0 || (size_t)hs != r->hidden)) ||
        (size_t)w->dims[0] != r->dirs || (size_t)rr->dims[0] != r->dirs ||
        (size_t)w->dims[1] != g || (size_t)w->dims[2] != r->input ||
        (size_t)rr->dims[1] != g)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "W (%lld, %lld, %lld) and R (%lld, %lld, %lld) "
                             "do not fit %zu direction(s) of %zu gates of "
                             "hidden size %zu over inputs of %zu",
                             (long long)w->dims[0], (long long)w->dims[1],
                             (long long)w->dims[2], (long long)rr->dims[0],
                             (long long)rr->dims[1], (long long)rr->dims[2],
                             r->dirs, r->ngates, r->hidden, r->input);
    return parse_acts(n, r);
}

/* An optional input has exactly the dims (rank 2 or 3) the others give
 * it (an error naming it if not). */
static shardnet_status check_dims(const sn_node *n, const sn_rt *t,
                                  const char *what, int rank,
                                  const int64_t *dims)
{
    char want[96];
    int ok = t->rank == rank;
    for (int i = 0; ok && i < rank; i++)
        ok = t->dims[i] == dims[i];
    if (ok)
        return SHARDNET_OK;
    if (rank == 2)
        snprintf(want, sizeof want, "(%lld, %lld)", (long long)dims[0],
                 (long long)dims[1]);
    else
        snprintf(want, sizeof want, "(%lld, %lld, %lld)", (long long)dims[0],
                 (long long)dims[1], (long long)dims[2]);
    return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                         "%s (rank %d) does not have the shape %s that X, W "
                         "and R give it",
                         what, t->rank, want);
}

/* The state's shape as initial_h and Y_h have it in the layout. */
static void state_dims(const rnn *r, int64_t *dims)
{
    dims[r->layout ? 1 : 0] = (int64_t)r->dirs;
    dims[r->layout ? 0 : 1] = (int64_t)r->batch;
    dims[2] = (int64_t)r->hidden;
}

/* A copy of a (batch, hidden) block between state `st` (contiguous) and a
 * tensor in the layout's (dirs, batch, hidden) or (batch, dirs, hidden),
 * direction d's block; to_state: from the tensor into the state.  src
 * with stride 0 everywhere repeats one zero. */
static shardnet_status emit_state_copy(sn_lower *L, const sn_node *n,
                                       const rnn *r, size_t d, sn_view st,
                                       sn_view t, int to_state, int zeros)
{
    sn_step s = {.kind = SN_KERNEL_COPY};
    ptrdiff_t h = (ptrdiff_t)r->hidden;
    ptrdiff_t row = r->layout ? (ptrdiff_t)r->dirs * h : h;
    sn_view other = t;
    other.offset += d * r->hidden * (r->layout ? 1 : r->batch);
    s.u.copy.rank = 2;
    s.u.copy.shape[0] = r->batch;
    s.u.copy.shape[1] = r->hidden;
    s.u.copy.src = to_state ? (zeros ? t : other) : st;
    s.u.copy.dst = to_state ? st : other;
    s.u.copy.src_stride[0] = zeros ? 0 : to_state ? row : h;
    s.u.copy.src_stride[1] = zeros ? 0 : 1;
    s.u.copy.dst_stride[0] = to_state ? h : row;
    s.u.copy.dst_stride[1] = 1;
    return sn_emit(L, n, &s);
}

/*
 * The input projection's bias of direction d (G hidden floats), or buf
 * NULL without B: W_b + R_b, but W_b alone for GRU with
 * linear_before_reset (its R_b goes with the recurrent product).  Summed on
 * the host where B is a constant, by a binary step otherwise.
 */
static shardnet_status proj_bias(sn_lower *L, const sn_node *n, const rnn *r,
                                 sn_rt *b, sn_view bv, size_t d, sn_view *out)
{
    size_t g = r->ngates * r->hidden, base = d * 2 * g;
    int with_r = !(r->cell == SN_RNN_CELL_GRU && r->lbr);
    int64_t len = (int64_t)g;
    sn_view wb = bv, rb = bv;
    float *v;
    shardnet_status st;

    out->buf = NULL;
    if (!b)
        return SHARDNET_OK;
    wb.offset += base;
    rb.offset += base + g;
    if (!with_r) {
        *out = wb;
        return SHARDNET_OK;
    }
    if (sn_rt_is_host(b)) {
        if (!(v = malloc(g * sizeof *v)))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "rnn bias");
        for (size_t i = 0; i < g; i++)
            v[i] = (float)(sn_rt_get_double(b, base + i) +
                           sn_rt_get_double(b, base + g + i));
        return sn_dev_upload(L, n, v, g, out);
    }
    if ((st = sn_scratch(L, g, out)) != SHARDNET_OK)
        return st;
    return sn_emit_binary(L, n, SN_BINARY_ADD, 1, &len, wb, 1, &len, rb,
                          *out);
}

/* The mask of each step (seq, batch): 1 while t < the item's length; buf
 * NULL when every item runs the whole sequence.  r->live: the longest. */
static shardnet_status seq_mask(sn_lower *L, const sn_node *n, rnn *r,
                                sn_view *out)
{
    sn_rt *lens = sn_in(L, n, 4);
    size_t count = r->seq * r->batch;
    int partial = 0;
    float *m;

    out->buf = NULL;
    r->live = r->seq;
    if (!lens)
        return SHARDNET_OK;
    if (!sn_rt_is_host(lens) || !sn_dtype_is_integer(lens->dtype))
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "sequence_lens must be integers known when the "
                             "plan is made (a graph input or a constant)");
    if (lens->rank != 1 || (size_t)lens->dims[0] != r->batch)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "sequence_lens must hold one length per batch "
                             "item (%zu)",
                             r->batch);
    r->live = 0;
    for (size_t b = 0; b < r->batch; b++) {
        int64_t len = sn_rt_get_int(lens, b);
        if (len < 0 || (uint64_t)len > r->seq)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "sequence_lens[%zu] = %lld is outside [0, "
                                 "%zu]",
                                 b, (long long)len, r->seq);
        partial |= (size_t)len < r->seq;
        if ((size_t)len > r->live)
            r->live = (size_t)len;
    }
    if (!partial || count == 0)
        return SHARDNET_OK;
    if (!(m = malloc(count * sizeof *m)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "rnn mask");
    for (size_t t = 0; t < r->seq; t++)
        for (size_t b = 0; b < r->batch; b++)
            m[t * r->batch + b] =
                (int64_t)t < sn_rt_get_int(lens, b) ? 1.0f : 0.0f;
    return sn_dev_upload(L, n, m, count, out);
}

/* The views one direction's steps share. */
typedef struct dir_views {
    sn_view x, w, r, bias, rbias, peep, mask, y;
    int w_const, r_const;
    sn_view xw;   /* the projection, then each step's gates */
    sn_view h, c; /* the state */
    sn_view rec;  /* GRU: the recurrent product, or r (.) H */
} dir_views;

/* out (rows m, ld ldc) += a (m x k, contiguous) b^T, b's rows k long. */
static shardnet_status emit_product(sn_lower *L, const sn_node *n, size_t m,
                                    size_t cols, size_t k, sn_view a,
                                    sn_view b, int b_const, sn_view c,
                                    size_t ldc, float beta, sn_view bias)
{
    sn_step s = {.kind = SN_KERNEL_GEMM};
    s.u.gemm = (sn_gemm_desc){.trans_b = 1, .m = m, .n = cols, .k = k,
                              .alpha = 1.0f, .beta = beta, .a = a, .b = b,
                              .c = c, .lda = k, .ldb = k, .ldc = ldc,
                              .batch = 1, .bias = bias, .b_const = b_const};
    return sn_emit(L, n, &s);
}

/* The cell step of direction d at time t. */
static shardnet_status emit_cell(sn_lower *L, const sn_node *n, const rnn *r,
                                 const dir_views *v, size_t d,
                                 sn_rnn_cell_kind cell, sn_view gates,
                                 size_t ld_gates, size_t t)
{
    sn_step s = {.kind = SN_KERNEL_RNN_CELL};
    sn_rnn_cell_desc *c = &s.u.rnn_cell;
    c->cell = cell;
    c->batch = r->batch;
    c->hidden = r->hidden;
    memcpy(c->act, r->act[d], sizeof c->act);
    memcpy(c->alpha, r->alpha[d], sizeof c->alpha);
    memcpy(c->beta, r->beta[d], sizeof c->beta);
    c->clip = r->clip;
    c->input_forget = r->input_forget;
    c->gates = gates;
    c->ld_gates = ld_gates;
    c->h = v->h;
    if (cell == SN_RNN_CELL_GRU_RESET) {
        c->y = v->rec;
        c->ld_y = r->hidden;
        return sn_emit(L, n, &s);
    }
    if (cell == SN_RNN_CELL_GRU && r->lbr)
        c->rec = v->rec;
    if (cell == SN_RNN_CELL_LSTM) {
        c->c = v->c;
        c->peep = v->peep;
    }
    if (v->mask.buf) {
        c->mask = v->mask;
        c->mask.offset += t * r->batch;
    }
    if (v->y.buf) { /* Y (seq, dirs, batch, hidden) or (batch, seq, dirs,
                       hidden) */
        c->y = v->y;
        c->y.offset +=
            (t * r->dirs + d) * r->hidden * (r->layout ? 1 : r->batch);
        c->ld_y = r->layout ? r->seq * r->dirs * r->hidden : r->hidden;
    }
    return sn_emit(L, n, &s);
}

/* Zeros into direction d's steps of Y from r->live on, where no item
 * runs (their products and cells are not emitted). */
static shardnet_status emit_dead_steps(sn_lower *L, const sn_node *n,
                                       const rnn *r, const dir_views *v,
                                       size_t d, sn_view zero)
{
    sn_step s = {.kind = SN_KERNEL_COPY};
    size_t hn = r->hidden, nd = r->dirs;
    if (!v->y.buf || r->live == r->seq)
        return SHARDNET_OK;
    s.u.copy.rank = 3;
    s.u.copy.shape[0] = r->seq - r->live;
    s.u.copy.shape[1] = r->batch;
    s.u.copy.shape[2] = hn;
    s.u.copy.src = zero;
    s.u.copy.dst = v->y;
    /* Y (seq, dirs, batch, hidden) or (batch, seq, dirs, hidden) */
    s.u.copy.dst.offset += (r->live * nd + d) * hn * (r->layout ? 1 : r->batch);
    s.u.copy.dst_stride[0] = (ptrdiff_t)(nd * hn * (r->layout ? 1 : r->batch));
    s.u.copy.dst_stride[1] = (ptrdiff_t)(r->layout ? r->seq * nd * hn : hn);
    s.u.copy.dst_stride[2] = 1;
    return sn_emit(L, n, &s);
}

/* The steps of direction d where some item runs, in its order. */
static shardnet_status emit_steps(sn_lower *L, const sn_node *n,
                                  const rnn *r, const dir_views *v, size_t d)
{
    size_t hn = r->hidden, g = r->ngates * hn;
    size_t ld = r->layout ? r->seq * g : g;
    int back = r->reverse || d == 1;
    shardnet_status st = SHARDNET_OK;

    for (size_t i = 0; i < r->live && st == SHARDNET_OK; i++) {
        size_t t = back ? r->live - 1 - i : i;
        sn_view gates = v->xw;
        gates.offset += t * g * (r->layout ? 1 : r->batch);
        if (r->cell != SN_RNN_CELL_GRU) {
            if ((st = emit_product(L, n, r->batch, g, hn, v->h, v->r,
                                   v->r_const, gates, ld, 1.0f,
                                   (sn_view){0})) == SHARDNET_OK)
                st = emit_cell(L, n, r, v, d, r->cell, gates, ld, t);
        } else if (r->lbr) {
            if ((st = emit_product(L, n, r->batch, g, hn, v->h, v->r,
                                   v->r_const, v->rec, g, 0.0f, v->rbias)) ==
                SHARDNET_OK)
                st = emit_cell(L, n, r, v, d, SN_RNN_CELL_GRU, gates, ld, t);
        } else {
            sn_view rh = v->r, gh = gates;
            rh.offset += 2 * hn * hn;
            gh.offset += 2 * hn;
            if ((st = emit_product(L, n, r->batch, 2 * hn, hn, v->h, v->r,
                                   v->r_const, gates, ld, 1.0f,
                                   (sn_view){0})) ||
                (st = emit_cell(L, n, r, v, d, SN_RNN_CELL_GRU_RESET, gates,
                                ld, t)) ||
                (st = emit_product(L, n, r->batch, hn, hn, v->rec, rh,
                                   v->r_const, gh, ld, 1.0f, (sn_view){0})))
                break;
            st = emit_cell(L, n, r, v, d, SN_RNN_CELL_GRU, gates, ld, t);
        }
    }
    return st;
}

/* Output i as a fresh device tensor of type t (as the device keeps it), or
 * NULL where the node leaves it out. */
static shardnet_status rnn_out(sn_lower *L, const sn_node *n, size_t i,
                               sn_dtype t, int rank, const int64_t *dims,
                               sn_rt **out)
{
    shardnet_status st;
    *out = NULL;
    if (i >= n->noutputs || n->outputs[i] < 0)
        return SHARDNET_OK;
    if ((st = sn_out_device(L, n, i, rank, dims, out)) != SHARDNET_OK)
        return st;
    (*out)->dtype = t;
    return SHARDNET_OK;
}

/* The optional inputs' shapes (B, initial_h, initial_c, P). */
static shardnet_status check_optional(sn_lower *L, const sn_node *n,
                                      const rnn *r)
{
    int lstm = r->cell == SN_RNN_CELL_LSTM;
    sn_rt *b = sn_in(L, n, 3), *h0 = sn_in(L, n, 5);
    sn_rt *c0 = lstm ? sn_in(L, n, 6) : NULL, *p = lstm ? sn_in(L, n, 7) : NULL;
    int64_t bd[2] = {(int64_t)r->dirs, (int64_t)(2 * r->ngates * r->hidden)};
    int64_t pd[2] = {(int64_t)r->dirs, (int64_t)(3 * r->hidden)};
    int64_t sd[3];
    shardnet_status st = SHARDNET_OK;
    state_dims(r, sd);
    if ((b && (st = check_dims(n, b, "B", 2, bd))) ||
        (h0 && (st = check_dims(n, h0, "initial_h", 3, sd))) ||
        (c0 && (st = check_dims(n, c0, "initial_c", 3, sd))) ||
        (p && (st = check_dims(n, p, "P", 2, pd))))
        return st;
    return SHARDNET_OK;
}

/* Scratch and initial state of direction d. */
static shardnet_status dir_setup(sn_lower *L, const sn_node *n, const rnn *r,
                                 size_t d, sn_view zero, dir_views *v)
{
    int lstm = r->cell == SN_RNN_CELL_LSTM;
    sn_rt *h0 = sn_in(L, n, 5), *c0 = lstm ? sn_in(L, n, 6) : NULL;
    sn_view h0v = zero, c0v = zero;
    size_t g = r->ngates * r->hidden, bh = r->batch * r->hidden;
    shardnet_status st;

    if ((st = sn_scratch(L, r->seq * r->batch * g, &v->xw)) ||
        (st = sn_scratch(L, bh, &v->h)) ||
        (lstm && (st = sn_scratch(L, bh, &v->c))) ||
        (r->cell == SN_RNN_CELL_GRU &&
         (st = sn_scratch(L, r->lbr ? r->batch * g : bh, &v->rec))) ||
        (h0 && (st = sn_dev_view(L, n, h0, &h0v))) ||
        (c0 && (st = sn_dev_view(L, n, c0, &c0v))) ||
        (st = emit_state_copy(L, n, r, d, v->h, h0v, 1, !h0)) ||
        (lstm && (st = emit_state_copy(L, n, r, d, v->c, c0v, 1, !c0))))
        return st;
    if (r->seq == 0)
        return SHARDNET_OK;
    /* the projection of every step: xw = X W^T + bias */
    return emit_product(L, n, r->seq * r->batch, g, r->input, v->x, v->w,
                        v->w_const, v->xw, g, 0.0f, v->bias);
}

SN_LOWER(sn_lower_rnn)
{
    sn_rt *x = sn_in(L, n, 0), *w = sn_in(L, n, 1), *rr = sn_in(L, n, 2);
    sn_rt *b = sn_in(L, n, 3), *p, *y, *yh, *yc;
    sn_view xv, wv, rv, bv = {0}, pv = {0}, mask, zero = {0};
    sn_dtype t, dt;
    int64_t yd[4], sd[3];
    size_t g, total;
    float *z;
    rnn r;
    shardnet_status st;

    if ((st = parse(L, n, &r)) || (st = sn_float_type(n, x, &t)) ||
        (st = sn_device_type(n, t, &dt)) ||
        (st = check_optional(L, n, &r)))
        return st;
    g = r.ngates * r.hidden;
    if (__builtin_mul_overflow(r.seq, r.batch, &total) ||
        __builtin_mul_overflow(total, g, &total) ||
        total > (size_t)SN_MAX_ELEMENTS)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "%zu steps of %zu items of %zu gates are too "
                             "many",
                             r.seq, r.batch, g);
    p = r.cell == SN_RNN_CELL_LSTM ? sn_in(L, n, 7) : NULL;
    yd[0] = (int64_t)(r.layout ? r.batch : r.seq);
    yd[1] = (int64_t)(r.layout ? r.seq : r.dirs);
    yd[2] = (int64_t)(r.layout ? r.dirs : r.batch);
    yd[3] = (int64_t)r.hidden;
    state_dims(&r, sd);
    if ((st = rnn_out(L, n, 0, dt, 4, yd, &y)) ||
        (st = rnn_out(L, n, 1, dt, 3, sd, &yh)) ||
        (st = rnn_out(L, n, 2, dt, 3, sd,
                      &yc)))
        return st;
    if (r.cell != SN_RNN_CELL_LSTM && yc)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "%s has two outputs, Y and Y_h", n->op_type);
    if (r.batch == 0 || r.hidden == 0)
        return SHARDNET_OK; /* every output is empty */
    if (r.input == 0 && r.seq > 0)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "an input size of 0 (an empty product)");
    if ((st = seq_mask(L, n, &r, &mask)) ||
        (st = sn_dev_view(L, n, x, &xv)) || (st = sn_dev_view(L, n, w, &wv)) ||
        (st = sn_dev_view(L, n, rr, &rv)) ||
        (b && (st = sn_dev_view(L, n, b, &bv))) ||
        (p && (st = sn_dev_view(L, n, p, &pv))))
        return st;
    if (!(z = calloc(1, sizeof *z)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "rnn state");
    if ((st = sn_dev_upload(L, n, z, 1, &zero)) != SHARDNET_OK)
        return st;
    for (size_t d = 0; d < r.dirs; d++) {
        dir_views v = {.x = xv, .w = wv, .r = rv, .mask = mask,
                       .w_const = sn_rt_is_weight(L, w),
                       .r_const = sn_rt_is_weight(L, rr)};
        v.w.offset += d * g * r.input;
        v.r.offset += d * g * r.hidden;
        if (p) {
            v.peep = pv;
            v.peep.offset += d * 3 * r.hidden;
        }
        if (b && r.cell == SN_RNN_CELL_GRU && r.lbr) {
            v.rbias = bv;
            v.rbias.offset += d * 2 * g + g;
        }
        if (y)
            v.y = y->view;
        if ((st = proj_bias(L, n, &r, b, bv, d, &v.bias)) ||
            (st = dir_setup(L, n, &r, d, zero, &v)) ||
            (st = emit_steps(L, n, &r, &v, d)) ||
            (st = emit_dead_steps(L, n, &r, &v, d, zero)) ||
            (yh && (st = emit_state_copy(L, n, &r, d, v.h, yh->view, 0, 0))) ||
            (yc && (st = emit_state_copy(L, n, &r, d, v.c, yc->view, 0, 0))))
            return st;
    }
    return SHARDNET_OK;
}
