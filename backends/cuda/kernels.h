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
int sn_cu_resample(const sn_resample_desc *d, void *stream);
int sn_cu_grid_sample(const sn_grid_sample_desc *d, void *stream);
int sn_cu_roi_align(const sn_roi_align_desc *d, void *stream);
int sn_cu_rnn_cell(const sn_rnn_cell_desc *d, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* SN_CUDA_KERNELS_H */
