/*
 * The arithmetic of shardnet_model_quantize (private to lib/api): a float
 * weight matrix turned into the stored forms quantize.c writes.  Pure
 * functions on memory the caller owns.
 *
 * A weight is rows x cols floats in C order with an output axis: 1 when
 * it is [K, N] (MatMul's B, Gemm's B without transB), 0 when it is
 * [N, K] (Gemm with transB); the N outputs lie along that axis and the K
 * inputs along the other.  Rounding is to the nearest, ties to even
 * (nearbyint in the default rounding mode, which the library never
 * changes).
 */
#ifndef SN_API_QUANTIZE_H
#define SN_API_QUANTIZE_H

#include <stddef.h>
#include <stdint.h>

/* The range of the symmetric integers: int8 and 4-bit. */
#define SN_Q8_MAX 127
#define SN_Q4_MAX 7
/* MatMulNBits's implicit zero point for 4 bits (2^(bits - 1)). */
#define SN_Q4_ZERO 8

/* 1 when every one of the n floats at w is finite. */
int sn_q_finite(const float *w, size_t n);

/*
 * int8, symmetric: q = round(w / scale) in [-127, 127], scale the largest
 * magnitude over 127 (1 for a group of zeros).  axis -1: one scale for
 * the whole weight; 0 or 1: one per output (rows, or cols, scales).
 */
void sn_q_int8(const float *w, size_t rows, size_t cols, int axis, int8_t *q,
               float *scale);

/* The bytes of MatMulNBits's B per output: blocks of block elements of K,
 * block / 2 bytes each. */
size_t sn_q_int4_blocks(size_t k, size_t block);

/*
 * 4-bit in blocks, MatMulNBits's layout: for each output n and each block
 * of `block` inputs along K, scale = the block's largest magnitude over 7
 * (1 for zeros), q = round(w / scale) in [-7, 7] stored as q + 8, two to
 * a byte (element 2i in the low half, 2i + 1 in the high), a short last
 * block padded with zeros (8).  b: N x blocks x block / 2 bytes, scales:
 * N x blocks.  block is even.
 */
void sn_q_int4(const float *w, size_t rows, size_t cols, int axis,
               size_t block, uint8_t *b, float *scales);

/* float16 (IEEE half, ties to even) of each of the n floats; 1 when every
 * one fits (none was finite and became an infinity), else 0. */
int sn_q_fp16(const float *w, size_t n, uint16_t *h);

#endif /* SN_API_QUANTIZE_H */
