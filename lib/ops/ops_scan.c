/*
 * Scan: its body lowered inline (lib/ops/ops_control.c's helpers), once
 * per element of its sequences, the states carried from one to the next.
 * Opset 8's form has a batch axis (0) before the sequence axis (1) and
 * runs each batch on its own; opsets 9 and later cut each scan input
 * along its own axis, either way round, and stack each scan output along
 * its own.  A slice of consecutive elements is a view; others are
 * copies, as is each stacked output.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "ops/control.h"

/* A Scan's body and how it walks its sequences: nstate states, nin scan
 * inputs (each cut along in_axis, backwards where in_rev), nout scan
 * outputs (stacked along out_axis, backwards where out_rev). */
typedef struct scan_spec {
    sn_graph *body;
    size_t nstate, nin, nout;
    int64_t *in_axis, *in_rev, *out_axis, *out_rev;
} scan_spec;

/* The body run over the sequences xs (nin of them, length T): the final
 * states in finals (nstate), the stacked scan outputs in outs (nout);
 * both zeroed first, their host data the caller's to free. */
static shardnet_status scan_run(sn_lower *L, const sn_node *n,
                                const scan_spec *sp, const sn_rt *init,
                                const sn_rt *xs, size_t T, sn_rt *finals,
                                sn_rt *outs)
{
    sn_graph *b = sp->body;
    sn_rt *items = calloc(T * sp->nout + 1, sizeof *items);
    sn_rt *col = calloc(T + 1, sizeof *col);
    sn_rt *prev = NULL, *rt = NULL;
    shardnet_status st = SHARDNET_OK;
    memset(finals, 0, sp->nstate * sizeof *finals);
    memset(outs, 0, sp->nout * sizeof *outs);
    if (!items || !col)
        st = sn_node_error(n, SHARDNET_OUT_OF_MEMORY, "out of memory");
    for (size_t k = 0; k < sp->nstate && st == SHARDNET_OK; k++)
        st = sn_ctl_rt_set(n, &finals[k], &init[k]);
    for (size_t t = 0; t < T && st == SHARDNET_OK; t++) {
        rt = NULL;
        st = sn_ctl_begin(L, n, "body", b, prev, &rt);
        for (size_t k = 0; k < sp->nstate && st == SHARDNET_OK; k++)
            st = sn_ctl_rt_set(n, &rt[b->inputs[k]], &finals[k]);
        for (size_t j = 0; j < sp->nin && st == SHARDNET_OK; j++) {
            sn_rt *in = &rt[b->inputs[sp->nstate + j]];
            size_t at = sp->in_rev[j] ? T - 1 - t : t;
            free(in->host_owned);
            st = sn_ctl_slice(L, n, &xs[j], (int)sp->in_axis[j], (int64_t)at,
                            in);
        }
        if (st == SHARDNET_OK)
            st = sn_ctl_run(L, n, "body", b, rt);
        for (size_t k = 0; k < sp->nstate && st == SHARDNET_OK; k++)
            st = sn_ctl_rt_set(n, &finals[k], &rt[b->outputs[k]]);
        for (size_t j = 0; j < sp->nout && st == SHARDNET_OK; j++)
            st = sn_ctl_rt_set(n, &items[t * sp->nout + j],
                        &rt[b->outputs[sp->nstate + j]]);
        sn_ctl_rts_free(prev, b->nvalues);
        prev = rt;
    }
    for (size_t j = 0; j < sp->nout && st == SHARDNET_OK; j++) {
        const sn_value *like = &b->values[b->outputs[sp->nstate + j]];
        int rank = T ? items[j].rank : like->rank >= 0 ? like->rank : 0;
        int axis = sn_axis(sp->out_axis[j], rank + 1);
        for (size_t t = 0; t < T; t++)
            col[sp->out_rev[j] ? T - 1 - t : t] = items[t * sp->nout + j];
        if (axis < 0)
            st = sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                               "scan output axis %lld is out of range for "
                               "rank %d", (long long)sp->out_axis[j],
                               rank + 1);
        else
            st = sn_ctl_stack(L, n, col, T, axis, like, &outs[j]);
    }
    sn_ctl_rts_free(prev, b->nvalues);
    for (size_t i = 0; items && i < T * sp->nout; i++)
        free(items[i].host_owned);
    free(items);
    free(col);
    return st;
}

/* Integer list attribute `name` of n into out (count entries, default
 * dflt), each within [lo, hi]. */
static shardnet_status scan_attr(const sn_node *n, const char *name,
                                 size_t count, int64_t dflt, int64_t lo,
                                 int64_t hi, int64_t *out)
{
    const sn_attr *a = sn_node_attr(n, name);
    if (a && (a->type != SN_ATTR_INTS || a->count != count))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "attribute '%s' must list %zu integers", name,
                             count);
    for (size_t i = 0; i < count; i++) {
        out[i] = a ? a->ints[i] : dflt;
        if (out[i] < lo || out[i] > hi)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "attribute '%s' holds %lld (must be %lld "
                                 "to %lld)", name, (long long)out[i],
                                 (long long)lo, (long long)hi);
    }
    return SHARDNET_OK;
}

/* The spec of Scan node n whose own inputs after `skip` (opset 8's
 * sequence_lens) are states and scan inputs. */
static shardnet_status scan_spec_read(const sn_node *n, size_t skip,
                                      scan_spec *sp)
{
    size_t own = n->ninputs - sn_node_implicit_inputs(n);
    int64_t m = sn_attr_int(n, "num_scan_inputs", -1);
    int v8 = skip > 0;
    shardnet_status st;
    memset(sp, 0, sizeof *sp);
    if ((st = sn_ctl_graph(n, "body", &sp->body)) != SHARDNET_OK)
        return st;
    if (own < skip || m < 1 || (uint64_t)m > own - skip)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "num_scan_inputs is %lld with %zu inputs",
                             (long long)m, own);
    sp->nin = (size_t)m;
    sp->nstate = own - skip - sp->nin;
    if (sp->body->ninputs != sp->nstate + sp->nin ||
        sp->body->noutputs < sp->nstate)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the body has %zu inputs and %zu outputs; it "
                             "needs %zu inputs and at least %zu outputs",
                             sp->body->ninputs, sp->body->noutputs,
                             sp->nstate + sp->nin, sp->nstate);
    sp->nout = sp->body->noutputs - sp->nstate;
    if (n->noutputs > sp->nstate + sp->nout)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "has %zu outputs; its body gives %zu",
                             n->noutputs, sp->nstate + sp->nout);
    sp->in_axis = calloc(2 * sp->nin + 2 * sp->nout + 1, sizeof(int64_t));
    if (!sp->in_axis)
        return sn_node_error(n, SHARDNET_OUT_OF_MEMORY, "out of memory");
    sp->in_rev = sp->in_axis + sp->nin;
    sp->out_axis = sp->in_rev + sp->nin;
    sp->out_rev = sp->out_axis + sp->nout;
    if (v8)
        return scan_attr(n, "directions", sp->nin, 0, 0, 1, sp->in_rev);
    if ((st = scan_attr(n, "scan_input_directions", sp->nin, 0, 0, 1,
                        sp->in_rev)) != SHARDNET_OK ||
        (st = scan_attr(n, "scan_output_directions", sp->nout, 0, 0, 1,
                        sp->out_rev)) != SHARDNET_OK ||
        (st = scan_attr(n, "scan_input_axes", sp->nin, 0, -SN_MAX_DIMS,
                        SN_MAX_DIMS, sp->in_axis)) != SHARDNET_OK ||
        (st = scan_attr(n, "scan_output_axes", sp->nout, 0, -SN_MAX_DIMS - 1,
                        SN_MAX_DIMS, sp->out_axis)) != SHARDNET_OK)
        return st;
    return SHARDNET_OK;
}

/* The sequence length T of the scan inputs xs along their axes (made
 * non-negative in sp) and each x's rank at least min_rank. */
static shardnet_status scan_length(const sn_node *n, scan_spec *sp,
                                   const sn_rt *const *xs, int min_rank,
                                   size_t *T)
{
    for (size_t j = 0; j < sp->nin; j++) {
        int axis;
        if (!xs[j] || xs[j]->rank < min_rank ||
            (axis = sn_axis(sp->in_axis[j], xs[j]->rank)) < 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "scan input %zu is missing, or has no axis "
                                 "%lld", j, (long long)sp->in_axis[j]);
        sp->in_axis[j] = axis;
        if (j && (size_t)xs[j]->dims[axis] != *T)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "scan inputs differ in length");
        *T = (size_t)xs[j]->dims[axis];
    }
    if (*T > SN_CTL_MAX_UNROLL)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "a sequence of %zu is more than the %d "
                             "iterations shardnet unrolls into a plan",
                             *T, SN_CTL_MAX_UNROLL);
    return SHARDNET_OK;
}

/* Scan of opset 9 and later: no batch axis. */
static shardnet_status scan9(sn_lower *L, const sn_node *n, scan_spec *sp)
{
    size_t T = 0, N = sp->nstate, M = sp->nin;
    const sn_rt **in = calloc(N + M + 1, sizeof *in);
    sn_rt *init = calloc(N + M + 1, sizeof *init);
    sn_rt *res = calloc(N + sp->nout + 1, sizeof *res);
    shardnet_status st = SHARDNET_OK;
    if (!in || !init || !res)
        st = sn_node_error(n, SHARDNET_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < N + M && st == SHARDNET_OK; i++)
        if (!(in[i] = sn_in(L, n, i)))
            st = sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                               "input %zu is missing", i);
        else
            init[i] = *in[i];
    if (st == SHARDNET_OK)
        st = scan_length(n, sp, in + N, 1, &T);
    if (st == SHARDNET_OK)
        st = scan_run(L, n, sp, init, init + N, T, res, res + N);
    for (size_t i = 0; st == SHARDNET_OK && i < N + sp->nout; i++)
        st = sn_ctl_output(L, n, i, &res[i]);
    for (size_t i = 0; res && i < N + sp->nout; i++)
        free(res[i].host_owned);
    free(res);
    free(init);
    free(in);
    return st;
}

/* Scan of opset 8: axis 0 of every input is the batch, axis 1 of a scan
 * input the sequence; each batch runs the body on its own. */
static shardnet_status scan8(sn_lower *L, const sn_node *n, scan_spec *sp)
{
    size_t T = 0, B, N = sp->nstate, M = sp->nin, K = sp->nout;
    const sn_rt **in = calloc(N + M + 1, sizeof *in);
    const sn_rt *lens = sn_in(L, n, 0);
    sn_rt *cut = calloc(N + M + 1, sizeof *cut);
    sn_rt *res = calloc((N + K) * 2 + 1, sizeof *res);
    sn_rt *per = NULL; /* (B * (N + K)) */
    shardnet_status st = SHARDNET_OK;
    if (!in || !cut || !res)
        st = sn_node_error(n, SHARDNET_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < N + M && st == SHARDNET_OK; i++)
        if (!(in[i] = sn_in(L, n, 1 + i)) || in[i]->rank < 1 + (i >= N))
            st = sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                               "input %zu is missing or lacks the batch "
                               "axis", 1 + i);
    for (size_t j = 0; j < M; j++)
        sp->in_axis[j] = 1;
    if (st == SHARDNET_OK)
        st = scan_length(n, sp, in + N, 2, &T);
    B = st == SHARDNET_OK ? (size_t)in[0]->dims[0] : 0;
    for (size_t i = 1; i < N + M && st == SHARDNET_OK; i++)
        if ((size_t)in[i]->dims[0] != B)
            st = sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                               "inputs differ in batch size");
    if (st == SHARDNET_OK && lens) {
        if (!lens->host || sn_rt_elements(lens) != B)
            st = sn_node_error(n, SHARDNET_UNSUPPORTED,
                               "sequence_lens must be known when the model "
                               "is planned, one per batch");
        for (size_t b = 0; st == SHARDNET_OK && b < B; b++)
            if (sn_rt_get_int(lens, b) != (int64_t)T)
                st = sn_node_error(n, SHARDNET_UNSUPPORTED,
                                   "sequence_lens shorter than the "
                                   "sequences are not supported");
    }
    for (size_t j = 0; j < M; j++)
        sp->in_axis[j] = 0; /* of each batch's slice */
    if (st == SHARDNET_OK &&
        !(per = calloc(B * (N + K) + 1, sizeof *per)))
        st = sn_node_error(n, SHARDNET_OUT_OF_MEMORY, "out of memory");
    for (size_t b = 0; b < B && st == SHARDNET_OK; b++) {
        for (size_t i = 0; i < N + M && st == SHARDNET_OK; i++) {
            free(cut[i].host_owned);
            st = sn_ctl_slice(L, n, in[i], 0, (int64_t)b, &cut[i]);
        }
        if (st == SHARDNET_OK)
            st = scan_run(L, n, sp, cut, cut + N, T, per + b * (N + K),
                          per + b * (N + K) + N);
    }
    for (size_t i = 0; i < N + K && st == SHARDNET_OK; i++) {
        sn_graph *body = sp->body;
        sn_rt *col = res + N + K;
        for (size_t b = 0; b < B; b++)
            col[b] = per[b * (N + K) + i];
        st = sn_ctl_stack(L, n, col, B, 0, &body->values[body->outputs[i]],
                        &res[i]);
        if (st == SHARDNET_OK)
            st = sn_ctl_output(L, n, i, &res[i]);
    }
    for (size_t i = 0; per && i < B * (N + K); i++)
        free(per[i].host_owned);
    for (size_t i = 0; res && i < N + K; i++)
        free(res[i].host_owned);
    for (size_t i = 0; cut && i < N + M; i++)
        free(cut[i].host_owned);
    free(per);
    free(res);
    free(cut);
    free(in);
    return st;
}

SN_LOWER(sn_lower_scan)
{
    scan_spec sp;
    int v8 = L->g->opset < 9;
    shardnet_status st = scan_spec_read(n, v8 ? 1 : 0, &sp);
    if (st == SHARDNET_OK)
        st = v8 ? scan8(L, n, &sp) : scan9(L, n, &sp);
    free(sp.in_axis);
    return st;
}
