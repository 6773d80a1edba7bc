/*
 * CPU kernels (private), called by backends/cpu/ on a device's worker
 * thread.  Each function may open OpenMP parallel regions; the team size is
 * the worker's nthreads-var (set to the package's core count when the
 * device is opened) and the team's threads are already pinned to the
 * package's cores.  Pointers are resolved (buffer base + view offset);
 * descriptors were validated by lib/backend/kernels.c.
 */
#ifndef SN_CPU_KERNELS_H
#define SN_CPU_KERNELS_H

#include <omp.h>
#include <stddef.h>

#include "backend/backend.h"

/* On x86-64 with GCC, a function marked SN_VECTOR_CLONES is compiled three
 * times (AVX-512, AVX2 with FMA, and the baseline) and the loader picks the
 * best one the CPU runs.  Elsewhere it is compiled once.  (Products may be
 * fused into FMAs in the wider clones: results can differ in the last bit
 * between machines, never between runs on one machine.) */
#ifdef SN_HAVE_TARGET_CLONES
#define SN_VECTOR_CLONES                                                      \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3",         \
                                 "default")))
#else
#define SN_VECTOR_CLONES
#endif

/* Inside a parallel region: this thread's share [*u0, *u1) of n units,
 * contiguous and balanced (the first n % nthreads threads one more). */
static inline void sn_cpu_thread_share(size_t n, size_t *u0, size_t *u1)
{
    const size_t t = (size_t)omp_get_thread_num();
    const size_t nt = (size_t)omp_get_num_threads();
    const size_t q = n / nt, r = n % nt;

    *u0 = q * t + (t < r ? t : r);
    *u1 = *u0 + q + (t < r);
}

/* Partial sums a row is accumulated in (one AVX-512 register): partial l
 * takes the elements l, l + 16, ... in order. */
#define SN_LANES 16

/* The partials folded pairwise, l + 8 into l, then l + 4 into l, ..., down
 * to one: a fixed order whatever the vector width, a few vector adds
 * instead of fifteen dependent scalar ones.  acc is overwritten. */
static inline __attribute__((always_inline)) float
sn_fold_lanes(float acc[SN_LANES])
{
#pragma GCC unroll 4
    for (unsigned w = SN_LANES / 2; w; w /= 2) {
#pragma omp simd
        for (unsigned l = 0; l < w; l++)
            acc[l] += acc[l + w];
    }
    return acc[0];
}

/* Must be called once per process before sn_cpu_gemm (see gemm.c). */
void sn_cpu_gemm_init(void);
/* bias, res: NULL, or the resolved d->bias and d->res (see sn_gemm_desc's
 * epilogue); so in every GEMM entry below. */
void sn_cpu_gemm(const sn_gemm_desc *d, const float *a, const float *b,
                 float *c, const float *bias, const float *res);

/*
 * The AVX-512 SGEMM (cpu/sgemm_avx512.c), B packed into 32-column panels.
 * _available: the CPU has AVX-512 F/BW/DQ/VL (checked once) and
 * SHARDNET_CPU_SGEMM is not "blas".  _supports: available, and d is a shape
 * it takes (trans_a = 0, k > 0, one B for all batch items).  _worth: it is
 * faster than the OpenBLAS path for d, B packed already (b_packed) or packed
 * per call.  sn_cpu_sgemm_avx512 packs B per call (returns 0, computing
 * nothing, when out of memory); _packed uses pb, made by sn_cpu_pack_b from
 * the same d's ldb, trans_b, k, n.
 */
typedef struct sn_cpu_packed_b sn_cpu_packed_b;
int sn_cpu_sgemm_avx512_available(void);
int sn_cpu_sgemm_avx512_supports(const sn_gemm_desc *d);
int sn_cpu_sgemm_avx512_worth(const sn_gemm_desc *d, int b_packed);
/* Does this CPU have AVX-512 F, BW, DQ and VL (checked once)? */
int sn_cpu_has_avx512(void);
/* And AVX-512 VNNI (byte products), checked with it. */
int sn_cpu_has_avx512_vnni(void);
sn_cpu_packed_b *sn_cpu_packed_b_alloc(size_t k, size_t n);
void sn_cpu_packed_b_free(sn_cpu_packed_b *p);
void sn_cpu_pack_b(sn_cpu_packed_b *p, const sn_gemm_desc *d, const float *b);
/* The inverse: op(B) back into b, stored as it was packed from (B^T's rows
 * where trans_b, leading dimension ldb). */
void sn_cpu_unpack_b(const sn_cpu_packed_b *p, int trans_b, size_t ldb,
                     float *b);
int sn_cpu_sgemm_avx512(const sn_gemm_desc *d, const float *a, const float *b,
                        float *c, const float *bias, const float *res);
void sn_cpu_sgemm_avx512_packed(const sn_gemm_desc *d, const float *a,
                                const sn_cpu_packed_b *pb, float *c,
                                const float *bias, const float *res);
/* The same kernel reading B in place, unpacked (trans_a = trans_b = 0, any
 * batch strides): _takes says whether d is a shape where that beats
 * packing B per call; the result is bit-identical to the packed kernel's. */
int sn_cpu_sgemm_avx512_direct_takes(const sn_gemm_desc *d);
/* One row of A times a constant B^T (m = batch = 1, trans_b): dot
 * products with B's rows in place; its own order of the sums (see
 * sgemm_avx512.c), the same for any thread count. */
int sn_cpu_sgemm_avx512_dot_takes(const sn_gemm_desc *d);
int sn_cpu_sgemm_avx512_dot(const sn_gemm_desc *d, const float *a,
                            const float *b, float *c, const float *bias,
                            const float *res);
/* One row of A times a constant B not transposed (m = batch = 1): B's
 * rows in place, in blocks summed apart and added in order (the same
 * bits on any thread count); 0 when out of memory, computing nothing. */
int sn_cpu_sgemm_avx512_rows_takes(const sn_gemm_desc *d);
int sn_cpu_sgemm_avx512_rows(const sn_gemm_desc *d, const float *a,
                             const float *b, float *c, const float *bias,
                             const float *res);
void sn_cpu_sgemm_avx512_direct(const sn_gemm_desc *d, const float *a,
                                const float *b, float *c, const float *bias,
                                const float *res);

/*
 * Small products (cpu/sgemm_small.c): B narrow and short (trans_a = 0,
 * n <= 32, k <= 128), A, B and C read in place, no BLAS call, the same
 * bits whatever the batch size or thread count.  _takes looks at trans_a,
 * n and k only (never m or the batch), so a micro-batched model takes the
 * same path as the whole batch; it is false without AVX-512 (or with
 * SHARDNET_CPU_SGEMM=blas).
 */
int sn_cpu_sgemm_small_takes(const sn_gemm_desc *d);
void sn_cpu_sgemm_small(const sn_gemm_desc *d, const float *a, const float *b,
                        float *c, const float *bias, const float *res);

void sn_cpu_binary(const sn_binary_desc *d, const float *a, const float *b,
                   float *c);
void sn_cpu_unary(const sn_unary_desc *d, const float *x, float *y);
/* y[i] = op(x[i]) for i in [0, n) for the ops of SN_UNARY_MATH_MAP
 * (cpu/unary_math.c); y may be x. */
void sn_cpu_unary_math(const sn_unary_desc *d, size_t n, const float *x,
                       float *y);
void sn_cpu_softmax(const sn_softmax_desc *d, const float *x, float *y);
void sn_cpu_reduce(const sn_reduce_desc *d, const float *x, float *y);
void sn_cpu_where(const sn_where_desc *d, const float *cond, const float *x,
                  const float *y, float *out);
void sn_cpu_copy(const sn_copy_desc *d, const float *src, float *dst);
void sn_cpu_im2col(const sn_im2col_desc *d, const float *src, float *dst);
void sn_cpu_pool(const sn_pool_desc *d, const float *src, float *dst);
/* The quantized product (cpu/qgemm.c): q the bytes of the weight, zero
 * and bias may be NULL; 0 when out of memory for its sums (C then holds
 * garbage). */
int sn_cpu_qgemm(const sn_qgemm_desc *d, const float *a, const void *q,
                 const float *scale, const float *zero, const float *bias,
                 float *c);
/* bias may be NULL */
void sn_cpu_dwconv(const sn_dwconv_desc *d, const float *src, const float *w,
                   const float *bias, float *dst);
/* bias may be NULL */
void sn_cpu_layernorm(const sn_layernorm_desc *d, const float *x,
                      const float *scale, const float *bias, float *y);
void sn_cpu_scan(const sn_scan_desc *d, const float *x, float *y);
/* values may be NULL (not written). */
void sn_cpu_topk(const sn_topk_desc *d, const float *x, float *values,
                 float *indices);
void sn_cpu_gather(const sn_gather_desc *d, const float *data,
                   const int32_t *indices, float *out);
/* A recurrent cell's activation (backend.h's sn_rnn_act) of x; and one
 * time step of a cell (rec, peep, mask, c and y may be NULL where the
 * descriptor's views are). */
float sn_cpu_rnn_act(sn_rnn_act act, float alpha, float beta, float x);
void sn_cpu_rnn_cell(const sn_rnn_cell_desc *d, const float *gates,
                     const float *rec, const float *peep, const float *mask,
                     float *h, float *c, float *y);
void sn_cpu_resample(const sn_resample_desc *d, const float *x,
                     const float *table, float *y);
void sn_cpu_grid_sample(const sn_grid_sample_desc *d, const float *x,
                        const float *grid, float *y);
void sn_cpu_roi_align(const sn_roi_align_desc *d, const float *x,
                      const float *rois, const float *batch_idx, float *y);

#endif /* SN_CPU_KERNELS_H */
