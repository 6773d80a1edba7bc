/*
 * CPU kernels (private), called by backends/cpu/ on a device's worker
 * thread.  Each function may open OpenMP parallel regions; the team size is
 * the worker's nthreads-var (set to the package's core count when the
 * device is opened) and the team's threads are already pinned to the
 * package's cores.  Pointers are resolved (buffer base + view offset);
 * descriptors were validated by lib/kernels.c.
 */
#ifndef SN_CPU_KERNELS_H
#define SN_CPU_KERNELS_H

#include "backend.h"

/* Must be called once per process before sn_cpu_gemm (see gemm.c). */
void sn_cpu_gemm_init(void);
/* bias: NULL, or the resolved d->bias (see sn_gemm_desc's epilogue). */
void sn_cpu_gemm(const sn_gemm_desc *d, const float *a, const float *b,
                 float *c, const float *bias);
void sn_cpu_binary(const sn_binary_desc *d, const float *a, const float *b,
                   float *c);
void sn_cpu_unary(const sn_unary_desc *d, const float *x, float *y);
void sn_cpu_softmax(const sn_softmax_desc *d, const float *x, float *y);
void sn_cpu_reduce(const sn_reduce_desc *d, const float *x, float *y);
void sn_cpu_where(const sn_where_desc *d, const float *cond, const float *x,
                  const float *y, float *out);
void sn_cpu_copy(const sn_copy_desc *d, const float *src, float *dst);
void sn_cpu_im2col(const sn_im2col_desc *d, const float *src, float *dst);
void sn_cpu_pool(const sn_pool_desc *d, const float *src, float *dst);
/* bias may be NULL */
void sn_cpu_layernorm(const sn_layernorm_desc *d, const float *x,
                      const float *scale, const float *bias, float *y);
void sn_cpu_gather(const sn_gather_desc *d, const float *data,
                   const int32_t *indices, float *out);

#endif /* SN_CPU_KERNELS_H */
