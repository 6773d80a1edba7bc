/*
 * Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opsets 12
 * and 13), input (N, C, d1 .. dk) and target (N, d1 .. dk), optional
 * weight (C), reduction none / sum / mean, ignore_index.
 *
 * The target is an integer tensor, known on the host when the plan is
 * made, and so are the weights (a graph constant or a small input): each
 * element's loss is coef * input[n, target, d], coef = -weight[target]
 * (divided by the sum of the weights taken, for a mean; 0 where the target
 * is ignored), computed on the host.  On the device that is a gather of
 * the picked elements (their flat positions; an ignored one reads past
 * the end, which the gather gives as 0), a product with the coefficients
 * and for sum or mean a reduction.  SoftmaxCrossEntropyLoss first takes
 * the log-softmax over C (its log_prob output).  Inputs known on the host
 * fold there, in double.
 */
#include <config.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

enum { RED_NONE, RED_SUM, RED_MEAN };

/* A loss node's shapes and what the host computed for it. */
typedef struct loss_job {
    size_t N, C, D;   /* input (N, C, D), D the product of d1 .. dk */
    int red;          /* RED_* */
    double *coef;     /* (N, D) */
    int32_t *flat;    /* (N, D): positions in the input, or past its end */
    int orank;        /* the output: the target's shape, or a scalar */
    int64_t od[SN_MAX_DIMS];
} loss_job;

static void job_free(loss_job *j)
{
    free(j->coef);
    free(j->flat);
}

/* Read the attributes and the target and weights; fill j. */
static shardnet_status loss_prepare(sn_lower *L, const sn_node *n,
                                    const sn_rt *x, loss_job *j)
{
    sn_rt *t = sn_in(L, n, 1), *w = sn_in(L, n, 2);
    const char *red = sn_attr_string(n, "reduction", "mean");
    const sn_attr *iia = sn_node_attr(n, "ignore_index");
    int64_t ii = sn_attr_int(n, "ignore_index", 0);
    double denom = 0.0;
    size_t nd;

    memset(j, 0, sizeof *j);
    j->red = !strcmp(red, "none") ? RED_NONE
             : !strcmp(red, "sum") ? RED_SUM
             : !strcmp(red, "mean") ? RED_MEAN
                                    : -1;
    if (j->red < 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "reduction '%s' is not none, sum or mean", red);
    if (x->rank < 2 || !t || t->rank != x->rank - 1)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the input must be (N, C, ...) and the target "
                             "(N, ...), one rank less");
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] != x->dims[i ? i + 1 : 0])
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "target dimension %d is %lld, the input's "
                                 "is %lld",
                                 i, (long long)t->dims[i],
                                 (long long)x->dims[i ? i + 1 : 0]);
    if (!sn_host_known(t) || !sn_dtype_is_integer(t->dtype))
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "the target must be integers known when the "
                             "model is planned");
    j->N = (size_t)x->dims[0];
    j->C = (size_t)x->dims[1];
    j->D = sn_dims_product(2, x->rank, x->dims);
    if (w && (w->rank != 1 || (size_t)w->dims[0] != j->C))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the weights must be a vector of the %zu "
                             "classes",
                             j->C);
    if (w && !sn_host_known(w))
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "weights computed on the device are not "
                             "supported: they must be known when the model "
                             "is planned");
    if (sn_rt_elements(x) >= INT32_MAX)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "an input of %zu elements: losses index at "
                             "most 2^31 - 1",
                             sn_rt_elements(x));
    nd = j->N * j->D;
    j->coef = malloc((nd ? nd : 1) * sizeof *j->coef);
    j->flat = malloc((nd ? nd : 1) * sizeof *j->flat);
    if (!j->coef || !j->flat) {
        job_free(j);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "loss");
    }
    for (size_t k = 0; k < nd; k++) {
        int64_t c = sn_rt_get_int(t, k);
        size_t b = k / (j->D ? j->D : 1), d = k - b * j->D;
        double wv;
        if (iia && c == ii) {
            j->coef[k] = 0.0;
            j->flat[k] = INT32_MAX;
            continue;
        }
        if (c < 0 || (uint64_t)c >= j->C) {
            job_free(j);
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "target %lld at %zu is not a class in "
                                 "[0, %zu)",
                                 (long long)c, k, j->C);
        }
        wv = w ? sn_rt_get_double(w, (size_t)c) : 1.0;
        j->coef[k] = -wv;
        denom += wv;
        j->flat[k] = (int32_t)((b * j->C + (size_t)c) * j->D + d);
    }
    if (j->red == RED_MEAN)
        for (size_t k = 0; k < nd; k++)
            j->coef[k] /= denom;
    if (j->red == RED_NONE) {
        j->orank = t->rank;
        memcpy(j->od, t->dims, sizeof j->od);
    }
    return SHARDNET_OK;
}

/* The loss on the host from lp (the input, or its log-softmax), doubles
 * in the input's layout. */
static shardnet_status loss_host(sn_lower *L, const sn_node *n,
                                 const loss_job *j, sn_dtype type,
                                 const double *lp)
{
    size_t nd = j->N * j->D, no = j->red == RED_NONE ? nd : 1;
    void *y = sn_host_alloc(no, sn_dtype_size(type));
    double sum = 0.0;
    if (!y)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "loss");
    for (size_t k = 0; k < nd; k++) {
        double v = j->flat[k] == INT32_MAX ? 0.0 : j->coef[k] * lp[j->flat[k]];
        if (j->red == RED_NONE)
            sn_store_value(type, y, k, v, 0, 0);
        sum += v;
    }
    if (j->red != RED_NONE)
        sn_store_value(type, y, 0, j->red == RED_MEAN && nd == 0 ? NAN : sum,
                       0, 0);
    return sn_out_host(L, n, 0, type, j->orank, j->od, y);
}

/* The loss on the device from lp, the (log-)probabilities there. */
static shardnet_status loss_device(sn_lower *L, const sn_node *n,
                                   const loss_job *j, sn_dtype type,
                                   sn_view lp)
{
    size_t nd = j->N * j->D;
    float *cf = malloc((nd ? nd : 1) * sizeof *cf);
    /* the indices' bytes: the upload copies them as they are */
    float *ix = malloc((nd ? nd : 1) * sizeof *ix);
    sn_view cv, iv, picked, prod;
    sn_rt *out;
    shardnet_status st;

    if (!cf || !ix) {
        free(cf);
        free(ix);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "loss");
    }
    for (size_t k = 0; k < nd; k++)
        cf[k] = (float)j->coef[k];
    memcpy(ix, j->flat, nd * sizeof *j->flat);
    if ((st = sn_dev_upload(L, n, cf, nd, &cv)) != SHARDNET_OK) {
        free(ix);
        return st;
    }
    if ((st = sn_dev_upload(L, n, ix, nd, &iv)) != SHARDNET_OK ||
        (st = sn_out_device(L, n, 0, j->orank, j->od, &out)) != SHARDNET_OK)
        return st;
    out->dtype = type;
    if ((st = sn_scratch(L, nd, &picked)) != SHARDNET_OK)
        return st;
    prod = out->view;
    if (j->red != RED_NONE && (st = sn_scratch(L, nd, &prod)) != SHARDNET_OK)
        return st;
    sn_step g = {.kind = SN_KERNEL_GATHER};
    g.u.gather = (sn_gather_desc){.outer = 1,
                                  .axis_len = j->N * j->C * j->D,
                                  .inner = 1, .nidx = nd, .data = lp,
                                  .indices = iv, .out = picked};
    int64_t dn[1] = {(int64_t)nd};
    if ((st = sn_emit(L, n, &g)) != SHARDNET_OK ||
        (st = sn_emit_binary(L, n, SN_BINARY_MUL, 1, dn, picked, 1, dn, cv,
                             prod)) != SHARDNET_OK)
        return st;
    if (j->red == RED_NONE)
        return SHARDNET_OK;
    sn_step r = {.kind = SN_KERNEL_REDUCE};
    r.u.reduce = (sn_reduce_desc){.op = SN_REDUCE_SUM, .outer = 1,
                                  .len = nd, .inner = 1, .x = prod,
                                  .y = out->view};
    return sn_emit(L, n, &r);
}

/* The input as doubles on the host (x known there). */
static double *host_doubles(const sn_rt *x)
{
    size_t total = sn_rt_elements(x);
    double *v = malloc((total ? total : 1) * sizeof *v);
    if (v)
        for (size_t i = 0; i < total; i++)
            v[i] = sn_rt_get_double(x, i);
    return v;
}

/* The shared lowering: with softmax, SoftmaxCrossEntropyLoss. */
static shardnet_status lower_loss(sn_lower *L, const sn_node *n, int softmax)
{
    sn_rt *x = sn_in(L, n, 0);
    int want_lp = softmax && n->noutputs > 1 && n->outputs[1] >= 0;
    sn_dtype type;
    loss_job j;
    shardnet_status st;

    if ((st = sn_float_type(n, x, &type)) != SHARDNET_OK ||
        (st = loss_prepare(L, n, x, &j)) != SHARDNET_OK)
        return st;
    if (sn_host_known(x) || j.N * j.D == 0) {
        double *lp = host_doubles(x);
        if (!lp) {
            job_free(&j);
            return sn_error(SHARDNET_OUT_OF_MEMORY, "loss");
        }
        for (size_t o = 0; softmax && o < j.N; o++)
            for (size_t d = 0; d < j.D; d++) {
                double *r = lp + o * j.C * j.D + d, m = -INFINITY, s = 0.0;
                for (size_t c = 0; c < j.C; c++)
                    m = r[c * j.D] > m ? r[c * j.D] : m;
                for (size_t c = 0; c < j.C; c++)
                    s += exp(r[c * j.D] - m);
                for (size_t c = 0; c < j.C; c++)
                    r[c * j.D] = r[c * j.D] - m - log(s);
            }
        st = loss_host(L, n, &j, type, lp);
        if (st == SHARDNET_OK && want_lp) {
            size_t total = sn_rt_elements(x);
            void *y = sn_host_alloc(total, sn_dtype_size(type));
            if (!y)
                st = sn_error(SHARDNET_OUT_OF_MEMORY, "loss");
            for (size_t i = 0; y && i < total; i++)
                sn_store_value(type, y, i, lp[i], 0, 0);
            if (y)
                st = sn_out_host(L, n, 1, type, x->rank, x->dims, y);
        }
        free(lp);
        job_free(&j);
        return st;
    }

    sn_view xv, lpv;
    if ((st = sn_dev_view(L, n, x, &xv)) != SHARDNET_OK)
        goto done;
    lpv = xv;
    if (softmax) {
        sn_rt *lpo;
        sn_step s = {.kind = SN_KERNEL_SOFTMAX};
        if (want_lp) {
            if ((st = sn_out_device(L, n, 1, x->rank, x->dims, &lpo)) !=
                SHARDNET_OK)
                goto done;
            lpo->dtype = type;
            lpv = lpo->view;
        } else if ((st = sn_scratch(L, sn_rt_elements(x), &lpv)) !=
                   SHARDNET_OK) {
            goto done;
        }
        s.u.softmax = (sn_softmax_desc){.outer = j.N, .len = j.C,
                                        .inner = j.D, .log_softmax = 1,
                                        .x = xv, .y = lpv};
        if ((st = sn_emit(L, n, &s)) != SHARDNET_OK)
            goto done;
    }
    st = loss_device(L, n, &j, type, lpv);
done:
    job_free(&j);
    return st;
}

SN_LOWER(sn_lower_nll_loss)
{
    return lower_loss(L, n, 0);
}

SN_LOWER(sn_lower_softmax_cross_entropy_loss)
{
    return lower_loss(L, n, 1);
}
