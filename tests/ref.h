/*
 * The plain C reference for every kernel, used by all tests.
 *
 * Deliberately naive: straight loops in the order the descriptors' comments
 * define, no OpenMP, no BLAS, no vector tricks, so that it is obviously
 * correct by reading.  The functions take the descriptors of lib/backend.h
 * (their views are ignored) and plain pointers that already point at the
 * views' first elements.  GEMM accumulates in double and rounds once; the
 * other kernels compute in float with the same libm calls as the kernels.
 */
#ifndef SN_TESTS_REF_H
#define SN_TESTS_REF_H

#include <stddef.h>

#include "backend.h"

/* C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b]; beta == 0 ignores C. */
void ref_gemm(const sn_gemm_desc *d, const float *a, const float *b, float *c);
/* c (contiguous, d->shape) = a op b through d's broadcast strides. */
void ref_binary(const sn_binary_desc *d, const float *a, const float *b,
                float *c);
void ref_unary(const sn_unary_desc *d, const float *x, float *y);
/* x, y: (outer, len, inner). */
void ref_softmax(const sn_softmax_desc *d, const float *x, float *y);
/* x: (outer, len, inner); y: (outer, inner). */
void ref_reduce(const sn_reduce_desc *d, const float *x, float *y);

/* The scalar op of one binary / unary kernel, as the reference applies it. */
float ref_binary_op(sn_binary_op op, float x, float y);
float ref_unary_op(sn_unary_op op, float x);

/* x[0..n) = deterministic uniform values in [lo, hi) from seed (xorshift32). */
void ref_fill_random(float *x, size_t n, unsigned seed, float lo, float hi);

/*
 * Count the i in [0, n) where got[i] is not within atol + rtol * |want[i]|
 * of want[i].  NaN matches NaN only; an infinity matches the same infinity
 * only.  When there are mismatches and msg is not NULL, msg (msgcap bytes)
 * describes the first one and the count; otherwise msg is "".
 */
int ref_compare(const float *got, const float *want, size_t n, float rtol,
                float atol, char *msg, size_t msgcap);

#endif /* SN_TESTS_REF_H */
