/*
 * The CUDA backend's kernels, as C sees them: one launcher per kernel of
 * the backend interface, each in the .cu file that holds its kernels.
 *
 * A launcher takes the descriptor the checked entry points have validated
 * (lib/backend/kernels.c: every view in bounds, sizes consistent), turns
 * its views into device pointers, enqueues its kernels on `stream` (a
 * cudaStream_t) and returns the launch's cudaError_t as an int: 0 when
 * enqueued.  It does not wait; errors of the kernel's execution come back
 * from the next synchronize or event.  kernels.c wraps each one as the
 * ops table's member, naming the kernel in any error.
 *
 *   elementwise.cu   binary, unary, where, the GEMM epilogue
 *   qgemm.cu         qgemm
 *   data.cu          copy, gather
 *   conv.cu          im2col, pool, dwconv
 *   reduce.cu        softmax, reduce, layernorm, topk, scan
 *   sample.cu        resample, grid_sample, roi_align
 *   rnn.cu           rnn_cell
 *   (the rest come with their .cu files)
 *
 * The same files compile, as plain C++, into the tests' emulation of a
 * device (cu.h says how), so the prototypes are C's.
 */
#ifndef SN_CUDA_KERNELS_H
#define SN_CUDA_KERNELS_H

#ifdef __cplusplus
extern "C" {
#endif

#include "backend/backend.h"

/* In the tests' emulation (SN_CUDA_EMULATE) the launchers have names of
 * their own, so that a test program that links the real backend as well
 * never mixes the two. */
#ifdef SN_CUDA_EMULATE
#define sn_cu_binary sn_cu_emu_binary
#define sn_cu_unary sn_cu_emu_unary
#define sn_cu_where sn_cu_emu_where
#define sn_cu_gemm_epilogue sn_cu_emu_gemm_epilogue
#define sn_cu_qgemm sn_cu_emu_qgemm
#define sn_cu_copy sn_cu_emu_copy
#define sn_cu_gather sn_cu_emu_gather
#define sn_cu_im2col sn_cu_emu_im2col
#define sn_cu_pool sn_cu_emu_pool
#define sn_cu_dwconv sn_cu_emu_dwconv
#define sn_cu_softmax sn_cu_emu_softmax
#define sn_cu_reduce sn_cu_emu_reduce
#define sn_cu_layernorm sn_cu_emu_layernorm
#define sn_cu_topk sn_cu_emu_topk
#define sn_cu_scan sn_cu_emu_scan
#define sn_cu_resample sn_cu_emu_resample
#define sn_cu_grid_sample sn_cu_emu_grid_sample
#define sn_cu_roi_align sn_cu_emu_roi_align
#define sn_cu_rnn_cell sn_cu_emu_rnn_cell
#endif

int sn_cu_binary(const sn_binary_desc *d, void *stream);
int sn_cu_unary(const sn_unary_desc *d, void *stream);
int sn_cu_where(const sn_where_desc *d, void *stream);
/* GEMM's fused epilogue (bias, residual, activation) over C, after the
 * product: nothing when d asks for none. */
int sn_cu_gemm_epilogue(const sn_gemm_desc *d, void *stream);
int sn_cu_qgemm(const sn_qgemm_desc *d, void *stream);
int sn_cu_copy(const sn_copy_desc *d, void *stream);
int sn_cu_gather(const sn_gather_desc *d, void *stream);
int sn_cu_im2col(const sn_im2col_desc *d, void *stream);
int sn_cu_pool(const sn_pool_desc *d, void *stream);
int sn_cu_dwconv(const sn_dwconv_desc *d, void *stream);
int sn_cu_softmax(const sn_softmax_desc *d, void *stream);
int sn_cu_reduce(const sn_reduce_desc *d, void *stream);
int sn_cu_layernorm(const sn_layernorm_desc *d, void *stream);
int sn_cu_topk(const sn_topk_desc *d, void *stream);
int sn_cu_scan(const sn_scan_desc *d, void *stream);
int sn_cu_resample(const sn_resample_desc *d, void *stream);
int sn_cu_grid_sample(const sn_grid_sample_desc *d, void *stream);
int sn_cu_roi_align(const sn_roi_align_desc *d, void *stream);
int sn_cu_rnn_cell(const sn_rnn_cell_desc *d, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* SN_CUDA_KERNELS_H */
