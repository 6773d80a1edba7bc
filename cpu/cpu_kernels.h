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
void sn_cpu_gemm(const sn_gemm_desc *d, const float *a, const float *b,
                 float *c);
void sn_cpu_binary(const sn_binary_desc *d, const float *a, const float *b,
                   float *c);
void sn_cpu_unary(const sn_unary_desc *d, const float *x, float *y);
void sn_cpu_softmax(const sn_softmax_desc *d, const float *x, float *y);
void sn_cpu_reduce(const sn_reduce_desc *d, const float *x, float *y);

#endif /* SN_CPU_KERNELS_H */
