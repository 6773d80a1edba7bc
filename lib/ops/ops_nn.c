/* Linear algebra and neural-network layers: Gemm, MatMul, Softmax. */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/*
 * A product over an empty inner dimension (k = 0) sums nothing: the output
 * (rank, dims) is beta * add broadcast into it, or zeros without add (no
 * GEMM is run: BLAS and CLBlast refuse k = 0).
 */

/* Gemm's C broadcasts to the m x n result (dims). */
static shardnet_status c_broadcasts(const sn_node *n, const sn_rt *c,
                                    const int64_t *dims)
{
    int64_t cd[2] = {1, 1};
    int r;
    if (!sn_broadcast_shape(c->rank, c->dims, 2, dims, &r, cd) ||
        cd[0] != dims[0] || cd[1] != dims[1])
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "C cannot be broadcast to %lldx%lld",
                             (long long)dims[0], (long long)dims[1]);
    return SHARDNET_OK;
}

static shardnet_status empty_product(sn_lower *L, const sn_node *n,
                                     sn_rt *add, float beta, int rank,
                                     const int64_t *dims, sn_view out)
{
    int64_t one = 1;
    size_t count = 1;
    sn_view kv;
    float *v;
    shardnet_status st;
    for (int i = 0; i < rank; i++)
        count *= (size_t)dims[i];
    if (count == 0)
        return SHARDNET_OK;
    if (!(v = malloc(sizeof *v)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "empty product");
    *v = add ? beta : 0.0f;
    if ((st = sn_dev_upload(L, n, v, 1, &kv)) != SHARDNET_OK)
        return st;
    if (!add) { /* zeros: the scalar copied with stride 0 */
        sn_step s = {.kind = SN_KERNEL_COPY};
        int64_t str[SN_MAX_DIMS];
        sn_strides(rank, dims, str);
        s.u.copy.src = kv;
        s.u.copy.dst = out;
        s.u.copy.rank = (size_t)rank;
        for (int i = 0; i < rank; i++) {
            s.u.copy.shape[i] = (size_t)dims[i];
            s.u.copy.src_stride[i] = 0;
            s.u.copy.dst_stride[i] = (ptrdiff_t)str[i];
        }
        st = sn_emit(L, n, &s);
    } else if ((st = sn_emit_broadcast_copy(L, n, add, rank, dims, out)) ==
                   SHARDNET_OK &&
               beta != 1.0f) {
        st = sn_emit_binary(L, n, SN_BINARY_MUL, rank, dims, out, 1, &one, kv,
                            out);
    }
    /* an empty product's output takes the activation fused into n too */
    return st != SHARDNET_OK ? st
                             : sn_emit_act(L, n, sn_fused_act(n), count, out);
}

SN_LOWER(sn_lower_gemm)
{
    sn_rt *a = sn_in(L, n, 0), *b = sn_in(L, n, 1), *c = sn_in(L, n, 2), *out;
    int ta = (int)sn_attr_int(n, "transA", 0), tb = (int)sn_attr_int(n, "transB", 0);
    float alpha = sn_attr_float(n, "alpha", 1.0f);
    float beta = sn_attr_float(n, "beta", 1.0f);
    sn_step s = {.kind = SN_KERNEL_GEMM};
    shardnet_status st;
    int64_t m, k, k2, nn, dims[2];

    if (a->rank != 2 || b->rank != 2)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "A and B must be matrices (ranks %d and %d)",
                             a->rank, b->rank);
    m = ta ? a->dims[1] : a->dims[0];
    k = ta ? a->dims[0] : a->dims[1];
    k2 = tb ? b->dims[1] : b->dims[0];
    nn = tb ? b->dims[0] : b->dims[1];
    if (k != k2)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "inner dimensions differ: A gives %lld, B %lld",
                             (long long)k, (long long)k2);
    dims[0] = m;
    dims[1] = nn;
    if ((st = sn_out_device(L, n, 0, 2, dims, &out)) != SHARDNET_OK)
        return st;
    if (k == 0) {
        if (c && beta != 0.0f &&
            (st = c_broadcasts(n, c, dims)) != SHARDNET_OK)
            return st;
        return empty_product(L, n, c && beta != 0.0f ? c : NULL, beta, 2,
                             dims, out->view);
    }
    s.u.gemm = (sn_gemm_desc){.trans_a = ta, .trans_b = tb, .m = (size_t)m,
                              .n = (size_t)nn, .k = (size_t)k, .alpha = alpha,
                              .lda = (size_t)a->dims[1],
                              .ldb = (size_t)b->dims[1], .ldc = (size_t)nn,
                              .batch = 1, .c = out->view,
                              .act = sn_fused_act(n)};
    if ((st = sn_dev_view(L, n, a, &s.u.gemm.a)) != SHARDNET_OK ||
        (st = sn_dev_view(L, n, b, &s.u.gemm.b)) != SHARDNET_OK)
        return st;
    s.u.gemm.b_const = sn_rt_is_weight(L, b); /* uploaded once, never rewritten */
    /* Before opset 7, C broadcasts only when the attribute broadcast is 1. */
    if (c && L->g->opset < 7 && !sn_attr_int(n, "broadcast", 0) &&
        (c->rank != 2 || c->dims[0] != m || c->dims[1] != nn))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "C must be %lldx%lld: before opset 7 it "
                             "broadcasts only when broadcast is 1",
                             (long long)m, (long long)nn);
    if (c && beta != 0.0f) {
        if ((st = c_broadcasts(n, c, dims)) != SHARDNET_OK)
            return st;
        size_t cn = sn_rt_elements(c);
        int row_vec = beta == 1.0f && cn == (size_t)nn &&
                      (c->rank == 1 || (c->rank == 2 && c->dims[0] == 1));
        int col_vec = beta == 1.0f && c->rank == 2 && c->dims[1] == 1 &&
                      c->dims[0] == m && m != 1;
        if (row_vec || col_vec) {
            /* A bias: the GEMM's epilogue adds it. */
            if ((st = sn_dev_view(L, n, c, &s.u.gemm.bias)) != SHARDNET_OK)
                return st;
            s.u.gemm.bias_rows = col_vec;
        } else {
            /* General C: broadcast it into the output, then accumulate. */
            if ((st = sn_emit_broadcast_copy(L, n, c, 2, dims, out->view)))
                return st;
            s.u.gemm.beta = beta;
        }
    }
    return sn_emit(L, n, &s);
}

/*
 * MatMul with numpy semantics: batch dimensions broadcast, a 1-D operand
 * gains (and then loses) a unit dimension.  The innermost batch dimension
 * becomes one strided batched GEMM; outer ones, if any, loop.
 */
SN_LOWER(sn_lower_matmul)
{
    sn_rt *a = sn_in(L, n, 0), *b = sn_in(L, n, 1), *bias = sn_in(L, n, 2);
    sn_rt *out;
    int64_t ad[SN_MAX_DIMS + 1], bd[SN_MAX_DIMS + 1];
    int ar = a->rank, br = b->rank;
    int64_t bs[SN_MAX_DIMS], od[SN_MAX_DIMS + 2];
    int bsr, orank = 0;
    shardnet_status st;
    sn_view va, vb;

    if (ar < 1 || br < 1)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "operands must have rank 1 or more");
    if (n->ninputs > 2 && !sn_attr_int(n, "bias", 0))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "takes two inputs (%zu given)", n->ninputs);
    memcpy(ad, a->dims, (size_t)ar * sizeof *ad);
    memcpy(bd, b->dims, (size_t)br * sizeof *bd);
    if (ar == 1) { /* (K) -> (1, K) */
        ad[1] = ad[0];
        ad[0] = 1;
        ar = 2;
    }
    if (br == 1) { /* (K) -> (K, 1) */
        bd[1] = 1;
        br = 2;
    }
    int64_t m = ad[ar - 2], k = ad[ar - 1], nn = bd[br - 1];
    if (bd[br - 2] != k)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "inner dimensions differ: %lld and %lld",
                             (long long)k, (long long)bd[br - 2]);
    if (!sn_broadcast_shape(ar - 2, ad, br - 2, bd, &bsr, bs))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "batch dimensions cannot be broadcast");
    for (int i = 0; i < bsr; i++)
        od[orank++] = bs[i];
    if (a->rank > 1)
        od[orank++] = m;
    if (b->rank > 1)
        od[orank++] = nn;
    if (orank > SN_MAX_DIMS)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT, "rank too high");
    if ((st = sn_out_device(L, n, 0, orank, od, &out)) != SHARDNET_OK)
        return st;
    if (k == 0) {
        if (bias && (bias->rank != 1 || bias->dims[0] != nn))
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "a fused bias needs a vector of B's %lld "
                                 "columns",
                                 (long long)nn);
        return empty_product(L, n, bias, 1.0f, orank, od, out->view);
    }
    if ((st = sn_dev_view(L, n, a, &va)) != SHARDNET_OK ||
        (st = sn_dev_view(L, n, b, &vb)) != SHARDNET_OK)
        return st;

    sn_step s = {.kind = SN_KERNEL_GEMM};
    s.u.gemm = (sn_gemm_desc){.m = (size_t)m, .n = (size_t)nn, .k = (size_t)k,
                              .alpha = 1.0f, .lda = (size_t)k,
                              .ldb = (size_t)nn, .ldc = (size_t)nn,
                              .batch = 1, .act = sn_fused_act(n),
                              .b_const = sn_rt_is_weight(L, b)};
    int b_batched = 0;
    for (int i = 0; i < br - 2; i++)
        b_batched |= bd[i] != 1;
    if (bias) {
        /* A bias fused by a pass: a vector over the columns of one B. */
        if (b_batched || bias->rank != 1 || bias->dims[0] != nn)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "a fused bias needs one matrix B and a "
                                 "vector of its %lld columns",
                                 (long long)nn);
        if ((st = sn_dev_view(L, n, bias, &s.u.gemm.bias)) != SHARDNET_OK)
            return st;
    }
    if (!b_batched) {
        /* B is one matrix: fold every batch dimension of A into M. */
        size_t rows = sn_rt_elements(a) / (size_t)k;
        s.u.gemm.m = rows;
        s.u.gemm.a = va;
        s.u.gemm.b = vb;
        s.u.gemm.c = out->view;
        return sn_emit(L, n, &s);
    }

    /* Batch strides of A and B per broadcast batch dimension. */
    int64_t sa[SN_MAX_DIMS] = {0}, sb[SN_MAX_DIMS] = {0}, acc;
    acc = m * k;
    for (int i = ar - 3, j = bsr - 1; i >= 0; i--, j--) {
        sa[j] = ad[i] == 1 ? 0 : acc;
        acc *= ad[i];
    }
    acc = k * nn;
    for (int i = br - 3, j = bsr - 1; i >= 0; i--, j--) {
        sb[j] = bd[i] == 1 ? 0 : acc;
        acc *= bd[i];
    }
    /* One step covers the trailing batch dimensions along which both
     * operands advance evenly (every one, for contiguous operands): the
     * batch item i + 1 of a step is one stride past item i. */
    int first = bsr - 1;
    while (first > 0 && sa[first - 1] == sa[first] * bs[first] &&
           sb[first - 1] == sb[first] * bs[first])
        first--;
    int64_t inner = 1, outer = 1, idx[SN_MAX_DIMS] = {0};
    for (int i = first; i < bsr; i++)
        inner *= bs[i];
    for (int i = 0; i < first; i++)
        outer *= bs[i];
    s.u.gemm.batch = (size_t)inner;
    s.u.gemm.stride_a = (size_t)sa[bsr - 1];
    s.u.gemm.stride_b = (size_t)sb[bsr - 1];
    s.u.gemm.stride_c = (size_t)(m * nn);
    for (int64_t o = 0; o < outer; o++) {
        int64_t oa = 0, ob = 0;
        for (int i = 0; i < first; i++) {
            oa += idx[i] * sa[i];
            ob += idx[i] * sb[i];
        }
        s.u.gemm.a = (sn_view){va.buf, va.offset + (size_t)oa};
        s.u.gemm.b = (sn_view){vb.buf, vb.offset + (size_t)ob};
        s.u.gemm.c = (sn_view){out->view.buf,
                               out->view.offset + (size_t)(o * inner * m * nn)};
        if ((st = sn_emit(L, n, &s)) != SHARDNET_OK)
            return st;
        for (int i = first - 1; i >= 0 && ++idx[i] == bs[i]; i--)
            idx[i] = 0;
    }
    return SHARDNET_OK;
}

SN_LOWER(sn_lower_softmax)
{
    sn_rt *x = sn_in(L, n, 0), *out;
    int legacy = L->g->opset < 13;
    int64_t axis = sn_attr_int(n, "axis", legacy ? 1 : -1);
    sn_step s = {.kind = SN_KERNEL_SOFTMAX};
    shardnet_status st;
    int ax = x->rank ? sn_axis(axis, x->rank) : 0;
    size_t outer = 1, len = 1, inner = 1;

    if (ax < 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "axis %lld out of range for rank %d",
                             (long long)axis, x->rank);
    for (int i = 0; i < x->rank; i++) {
        size_t d = (size_t)x->dims[i];
        if (i < ax)
            outer *= d;
        else if (i == ax || legacy) /* before 13: rows of the 2-D coercion */
            len *= d;
        else
            inner *= d;
    }
    if ((st = sn_out_device(L, n, 0, x->rank, x->dims, &out)) != SHARDNET_OK)
        return st;
    if (len == 0 || outer * inner == 0)
        return SHARDNET_OK;
    s.u.softmax = (sn_softmax_desc){.outer = outer, .len = len, .inner = inner,
                                    .log_softmax =
                                        !strcmp(n->op_type, "LogSoftmax"),
                                    .y = out->view};
    if ((st = sn_dev_view(L, n, x, &s.u.softmax.x)) != SHARDNET_OK)
        return st;
    return sn_emit(L, n, &s);
}
