/*
 * The plain C reference for every kernel, used by all tests.
 *
 * Deliberately naive: straight loops in the order the descriptors' comments
 * define, no OpenMP, no BLAS, no vector tricks, so that it is obviously
 * correct by reading.  The functions take the descriptors of lib/backend/backend.h
 * (their views are ignored) and plain pointers that already point at the
 * views' first elements.  GEMM accumulates in double and rounds once (the
 * epilogue then adds the bias in float); layer normalisation computes in
 * double; the other kernels compute in float with the same libm calls as
 * the kernels.
 */
#ifndef SN_TESTS_REF_H
#define SN_TESTS_REF_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

/* C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b]; beta == 0 ignores C.
 * Then the epilogue: C += bias (n floats, or m with d->bias_rows), unless
 * bias is NULL, C += res (laid out as C) unless res is NULL, and RELU when
 * d->act asks for it.  d->bias and d->res are ignored. */
void ref_gemm(const sn_gemm_desc *d, const float *a, const float *b, float *c,
              const float *bias, const float *res);
/* The layout of a GEMM test case in d (its m, n, k, transposes and batch
 * set): leading dimensions padded by pad, batch strides (B's 0 when
 * share_b); the floats each of A, B and C needs when it starts `off`
 * floats into its buffer, into n[0..3). */
void ref_gemm_layout(sn_gemm_desc *d, size_t pad, int share_b, size_t off,
                     size_t n[3]);
/* c (contiguous, d->shape) = a op b through d's broadcast strides. */
void ref_binary(const sn_binary_desc *d, const float *a, const float *b,
                float *c);
void ref_unary(const sn_unary_desc *d, const float *x, float *y);
/* x, y: (outer, len, inner). */
void ref_softmax(const sn_softmax_desc *d, const float *x, float *y);
/* x: (outer, len, inner); y: (outer, inner). */
void ref_reduce(const sn_reduce_desc *d, const float *x, float *y);
/* out (contiguous, d->shape) = cond != 0 ? x : y through the strides. */
void ref_where(const sn_where_desc *d, const float *cond, const float *x,
               const float *y, float *out);
/* src and dst point at element (0, ..., 0); strides may be negative. */
void ref_copy(const sn_copy_desc *d, const float *src, float *dst);
/* src (channels, in_h, in_w); dst (channels * k_h * k_w, out_h * out_w). */
void ref_im2col(const sn_im2col_desc *d, const float *src, float *dst);
/* src (planes, in_h, in_w); dst (planes, out_h, out_w).  An empty window
 * gives -inf (MAX) or 0 / count (AVG); MAX propagates NaN. */
void ref_pool(const sn_pool_desc *d, const float *src, float *dst);
/* bias may be NULL */
void ref_dwconv(const sn_dwconv_desc *d, const float *src, const float *w,
                const float *bias, float *dst);
/* x, y (outer, len); scale, bias (len); bias may be NULL. */
void ref_layernorm(const sn_layernorm_desc *d, const float *x,
                   const float *scale, const float *bias, float *y);
/* data (outer, axis_len, inner); indices (nidx); out (outer, nidx, inner). */
void ref_scan(const sn_scan_desc *d, const float *x, float *y);
/* len <= 64 */
void ref_topk(const sn_topk_desc *d, const float *x, float *values,
              float *indices);
void ref_gather(const sn_gather_desc *d, const float *data,
                const int32_t *indices, float *out);
/* x (planes, in...); table (table_len); y (planes, out...): every output
 * element summed in double over every choice of one tap per axis. */
void ref_resample(const sn_resample_desc *d, const float *x,
                  const float *table, float *y);
/* x (batch, channels, in_h, in_w); grid (batch, out_h, out_w, 2); y
 * (batch, channels, out_h, out_w); in double, as PyTorch's grid_sample. */
void ref_grid_sample(const sn_grid_sample_desc *d, const float *x,
                     const float *grid, float *y);
/* y (nrois, channels, out_h, out_w), in double, as ONNX Runtime's. */
void ref_roi_align(const sn_roi_align_desc *d, const float *x,
                   const float *rois, const float *batch_idx, float *y);

/* One step of a recurrent cell, in double, from the spec's equations:
 * gates (batch, G hidden) rows d->ld_gates apart; rec, peep, mask, c and y
 * may be NULL where the descriptor's views are; h and c are updated. */
void ref_rnn_cell(const sn_rnn_cell_desc *d, const float *gates,
                  const float *rec, const float *peep, const float *mask,
                  float *h, float *c, float *y);

/* The scalar op of one binary / unary kernel, as the reference applies it. */
float ref_binary_op(sn_binary_op op, float x, float y);
float ref_unary_op(sn_unary_op op, float x, float alpha, float beta);

/* x[0..n) = deterministic uniform values in [lo, hi) from seed (xorshift32). */
void ref_fill_random(float *x, size_t n, unsigned seed, float lo, float hi);
/* The value of a finite IEEE half (bf16 0) or bfloat16 (1), bits h. */
double ref_half_value(int bf16, unsigned h);
/* The quantized product, plainly: each weight dequantized, (q - zero) *
 * scale, summed in double in kk order, then bias and activation; q the
 * weight's bytes (the descriptor's layout), zero NULL for the
 * descriptor's zero_value, bias NULL for none. */
void ref_qgemm(const sn_qgemm_desc *d, const float *a, const unsigned char *q,
               const float *scale, const float *zero, const float *bias,
               float *c);

/*
 * Count the i in [0, n) where got[i] is not within atol + rtol * |want[i]|
 * of want[i].  NaN matches NaN only; an infinity matches the same infinity
 * only.  When there are mismatches and msg is not NULL, msg (msgcap bytes)
 * describes the first one and the count; otherwise msg is "".
 */
int ref_compare(const float *got, const float *want, size_t n, float rtol,
                float atol, char *msg, size_t msgcap);

#endif /* SN_TESTS_REF_H */
