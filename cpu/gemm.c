/*
 * GEMM on the CPU: OpenBLAS, single-threaded, inside the device's OpenMP team.
 *
 * Why not let OpenBLAS thread itself: the pthreads build of OpenBLAS has one
 * thread pool for the whole process.  Two CPU devices (one per package)
 * calling a multithreaded sgemm at the same time either serialise on the
 * pool's lock or, where they do not, put 2 x ncores busy threads on the
 * machine, and the pool's threads are not pinned to the caller's package.
 *
 * The scheme instead:
 *  - sn_cpu_gemm_init() sets OpenBLAS to one thread, once per process
 *    (pthread_once), so every OpenBLAS call runs on the thread that makes it
 *    and several calls may run at once without sharing anything, and stops
 *    the pool's threads: they are started when the library loads, and each
 *    polls for work (yielding) for 2^28 cycles, about 0.1 s, before it
 *    sleeps.  Unpinned, one then shared a core with a device's team thread
 *    in the first 0.1 s of a process: a short `shardnet run` ran at one
 *    core's speed now and then (1.2 against 0.63 ms for the MLP at batch
 *    100 on 2 cores).  An OpenBLAS call after openblas_set_num_threads(2)
 *    or more (the embedding program's) starts the pool again (checked);
 *  - the parallelism comes from the calling device's OpenMP team, which the
 *    backend has already pinned to its package's cores: sn_cpu_gemm opens one
 *    parallel region of omp_get_max_threads() threads, and each thread
 *    computes its own block of C with single-threaded cblas_sgemm calls
 *    (cblas_sgemv where the block is one row or one column of C).
 *
 * The partition.  The work is a list of "units" split evenly between the
 * threads, each thread taking a contiguous run of them:
 *  - batch items, when there are many of them (batch a multiple of the team
 *    size, or at least four per thread, so that whole items balance);
 *  - otherwise row blocks of C (8 rows each) or column blocks (16 columns),
 *    counted over all batch items, so that a run may end in the middle of an
 *    item.  The longer side of C is split, rows on a tie: columns for wide
 *    C (always for M = 1, batch-1 inference: each thread then streams only
 *    its own columns of B), rows otherwise.  On square problems the two
 *    measured within 2% of each other and of OpenBLAS's own threading (rows
 *    ahead at 2048^3; 2 cores, OpenBLAS 0.3.21).  Blocks are whole multiples
 *    of the grain except the last, and the grain falls to 1 where a thread
 *    would get fewer than four of them.
 * One-row blocks (M = 1) go to sgemv, which streams B once: OpenBLAS 0.3.21's
 * sgemm packs all of B first and was 3-4x slower there.
 * Problems under 64^3 multiply-adds run on the calling thread alone, without
 * opening a parallel region.
 *
 * Narrowing: m, n, k, lda, ldb, ldc and batch were checked to fit in int by
 * lib/backend/kernels.c (sn_gemm) before any backend sees them, and every block is a
 * sub-range of those, so the (blasint) casts below cannot truncate.  There is
 * deliberately no assert: the library never aborts.
 *
 * The epilogue (bias, residual, then RELU; see sn_gemm_desc) is applied by
 * the thread that computed a block, to that block, right after its BLAS
 * call, while the block is still in that core's cache; it costs no extra
 * pass over C and needs no synchronisation, because blocks do not overlap.
 *
 * AVX-512: on CPUs with AVX-512 F/BW/DQ/VL, cpu/sgemm_avx512.c's kernel
 * (B packed into 32-column panels) takes the call instead where it is
 * faster (sn_cpu_sgemm_avx512_worth, with the measurements): here only when
 * packing B per call still pays; the backend (backends/cpu/tasks.c) keeps
 * packed copies of constant B (b_const) and calls the kernel on them
 * directly, and reads a B that is not transposed in place, unpacked
 * (sn_cpu_sgemm_avx512_direct_takes).  SHARDNET_CPU_SGEMM=blas turns it off.
 *
 * beta == 0: BLAS semantics make C write-only then (NaN in C is not
 * propagated); OpenBLAS's sgemm honours this (tested with C full of NaN).
 * For the sgemv path the row/column of C is zeroed first anyway, because
 * some OpenBLAS releases scale y by beta with a multiply.
 */
#include <config.h>

#include <omp.h>
#include <pthread.h>
#include <stddef.h>

#include <cblas.h>

#include "cpu_kernels.h"

/* Below this many multiply-adds (per call, all batch items) one thread. */
#define SERIAL_WORK (64.0 * 64.0 * 64.0)
/* Block granularity: a multiple of the micro-kernels' tile sizes. */
#define ROW_GRAIN 8
#define COL_GRAIN 16

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

/* OpenBLAS's own (exported by its pthreads build, 0.3.21; weak, as other
 * builds and other BLAS libraries may lack it). */
extern int blas_thread_shutdown_(void) __attribute__((weak));

static void blas_single_threaded(void)
{
    openblas_set_num_threads(1);
    if (blas_thread_shutdown_)
        blas_thread_shutdown_();
}

void sn_cpu_gemm_init(void)
{
    pthread_once(&blas_once, blas_single_threaded);
}

/*
 * The epilogue on one block of C: cb (m x n, leading dimension ldc) is C's
 * element (r0, c0).  bias: NULL, n floats per row (indexed by column) or m
 * floats per column when bias_rows (indexed by row).  rb: NULL, or the
 * residual's element (r0, c0), laid out as C.
 */
static void epilogue(const sn_gemm_desc *d, const float *bias,
                     const float *rb, float *cb, size_t m, size_t n,
                     size_t r0, size_t c0)
{
    if (!bias && !rb && d->act == SN_ACT_NONE)
        return;
    for (size_t i = 0; i < m; i++) {
        float *row = cb + i * d->ldc;
        if (bias && d->bias_rows) {
            const float v = bias[r0 + i];
#pragma omp simd
            for (size_t j = 0; j < n; j++)
                row[j] += v;
        } else if (bias) {
            const float *bv = bias + c0;
#pragma omp simd
            for (size_t j = 0; j < n; j++)
                row[j] += bv[j];
        }
        if (rb) {
            const float *rr = rb + i * d->ldc;
#pragma omp simd
            for (size_t j = 0; j < n; j++)
                row[j] += rr[j];
        }
        if (d->act != SN_ACT_NONE) {
            /* The same expression as the RELU unary op: NaN passes. */
#pragma omp simd
            for (size_t j = 0; j < n; j++)
                row[j] = row[j] < 0.0f ? 0.0f : row[j];
        }
        if (d->act == SN_ACT_RELU6) {
            /* then CLIP's upper bound */
#pragma omp simd
            for (size_t j = 0; j < n; j++)
                row[j] = row[j] > 6.0f ? 6.0f : row[j];
        }
    }
}

/*
 * C[item] rows [r0, r1) x columns [c0, c1) on the calling thread, epilogue
 * included.  a, b, c: the descriptor's matrices (batch item 0); bias: the
 * resolved bias or NULL.
 */
static void gemm_block(const sn_gemm_desc *d, const float *a, const float *b,
                       float *c, const float *bias, const float *res,
                       size_t item, size_t r0, size_t r1, size_t c0,
                       size_t c1)
{
    const size_t m = r1 - r0, n = c1 - c0;
    /* op(A) rows r0..: stored A is m x k (row r0) or k x m (column r0). */
    const float *ab = a + item * d->stride_a + (d->trans_a ? r0 : r0 * d->lda);
    /* op(B) columns c0..: stored B is k x n (column c0) or n x k (row c0). */
    const float *bb = b + item * d->stride_b + (d->trans_b ? c0 * d->ldb : c0);
    float *cb = c + item * d->stride_c + r0 * d->ldc + c0;
    const float *rb = res ? res + item * d->stride_c + r0 * d->ldc + c0 : NULL;
    const blasint k = (blasint)d->k, lda = (blasint)d->lda,
                  ldb = (blasint)d->ldb, ldc = (blasint)d->ldc;

    if (m == 1) {
        /* c (1 x n) = alpha * a (1 x k) * op(B) (k x n), i.e. y = op(B)^T x. */
        const blasint inca = d->trans_a ? lda : 1;
        if (d->beta == 0.0f)
            for (size_t j = 0; j < n; j++)
                cb[j] = 0.0f;
        if (d->trans_b)
            cblas_sgemv(CblasRowMajor, CblasNoTrans, (blasint)n, k, d->alpha,
                        bb, ldb, ab, inca, d->beta, cb, 1);
        else
            cblas_sgemv(CblasRowMajor, CblasTrans, k, (blasint)n, d->alpha,
                        bb, ldb, ab, inca, d->beta, cb, 1);
    } else if (n == 1) {
        /* c (m x 1, stride ldc) = alpha * op(A) (m x k) * b (k x 1). */
        const blasint incb = d->trans_b ? 1 : ldb;
        if (d->beta == 0.0f)
            for (size_t i = 0; i < m; i++)
                cb[i * d->ldc] = 0.0f;
        if (d->trans_a)
            cblas_sgemv(CblasRowMajor, CblasTrans, k, (blasint)m, d->alpha,
                        ab, lda, bb, incb, d->beta, cb, ldc);
        else
            cblas_sgemv(CblasRowMajor, CblasNoTrans, (blasint)m, k, d->alpha,
                        ab, lda, bb, incb, d->beta, cb, ldc);
    } else {
        cblas_sgemm(CblasRowMajor, d->trans_a ? CblasTrans : CblasNoTrans,
                    d->trans_b ? CblasTrans : CblasNoTrans, (blasint)m,
                    (blasint)n, k, d->alpha, ab, lda, bb, ldb, d->beta, cb,
                    ldc);
    }
    epilogue(d, bias, rb, cb, m, n, r0, c0);
}

/* How the work is cut: `per_item` units of `grain` rows or columns each. */
typedef struct plan {
    int split_rows; /* units are row blocks (else column blocks) */
    size_t grain;   /* rows or columns per unit */
    size_t per_item; /* units per batch item; 1 = whole items */
    size_t units;    /* batch * per_item */
} plan;

static size_t ceil_div(size_t a, size_t b)
{
    return a / b + (a % b != 0);
}

static plan make_plan(const sn_gemm_desc *d, size_t nthreads)
{
    plan p = {1, d->m, 1, d->batch};
    size_t dim;

    if (d->batch >= nthreads &&
        (d->batch % nthreads == 0 || d->batch >= 4 * nthreads))
        return p;
    p.split_rows = d->m >= d->n;
    dim = p.split_rows ? d->m : d->n;
    p.grain = p.split_rows ? ROW_GRAIN : COL_GRAIN;
    /* Keep blocks aligned only where each thread gets several of them;
     * otherwise the rounding would unbalance the team. */
    if (dim / nthreads < 4 * p.grain)
        p.grain = 1;
    p.per_item = ceil_div(dim, p.grain);
    p.units = d->batch * p.per_item;
    return p;
}

/* Units [u0, u1) of the plan, one BLAS call per batch item touched. */
static void run_units(const sn_gemm_desc *d, const plan *p, const float *a,
                      const float *b, float *c, const float *bias,
                      const float *res, size_t u0, size_t u1)
{
    const size_t dim = p->split_rows ? d->m : d->n;

    while (u0 < u1) {
        size_t item = u0 / p->per_item, first = u0 % p->per_item;
        size_t last = p->per_item - first < u1 - u0 ? p->per_item
                                                    : first + (u1 - u0);
        size_t lo = first * p->grain, hi = last * p->grain;
        if (hi > dim)
            hi = dim;
        if (p->per_item == 1)
            gemm_block(d, a, b, c, bias, res, item, 0, d->m, 0, d->n);
        else if (p->split_rows)
            gemm_block(d, a, b, c, bias, res, item, lo, hi, 0, d->n);
        else
            gemm_block(d, a, b, c, bias, res, item, 0, d->m, lo, hi);
        u0 += last - first;
    }
}

void sn_cpu_gemm(const sn_gemm_desc *d, const float *a, const float *b,
                 float *c, const float *bias, const float *res)
{
    const size_t nthreads = (size_t)omp_get_max_threads();
    const double work = (double)d->m * (double)d->n * (double)d->k *
                        (double)d->batch;
    plan p;

    /* Idempotent and cheap: protects against a caller that skipped init. */
    sn_cpu_gemm_init();
    if (d->m == 0 || d->n == 0)
        return;
    /* Narrow, short B (attention's per-head products): no BLAS call. */
    if (sn_cpu_sgemm_small_takes(d)) {
        sn_cpu_sgemm_small(d, a, b, c, bias, res);
        return;
    }
    /* B not transposed (a 1x1 convolution's input, an im2col matrix): the
     * AVX-512 kernel reads it in place. */
    if (sn_cpu_sgemm_avx512_direct_takes(d)) {
        sn_cpu_sgemm_avx512_direct(d, a, b, c, bias, res);
        return;
    }
    /* The AVX-512 kernel packs B per call here (cached copies of constant
     * B: backends/cpu/tasks.c); see sn_cpu_sgemm_avx512_worth for where it
     * wins. */
    if (sn_cpu_sgemm_avx512_supports(d) && sn_cpu_sgemm_avx512_worth(d, 0) &&
        sn_cpu_sgemm_avx512(d, a, b, c, bias, res))
        return;
    if (nthreads > 1 && work >= SERIAL_WORK) {
        p = make_plan(d, nthreads);
        if (p.units > 1) {
#pragma omp parallel
            {
                size_t u0, u1;
                sn_cpu_thread_share(p.units, &u0, &u1);
                run_units(d, &p, a, b, c, bias, res, u0, u1);
            }
            return;
        }
    }
    for (size_t item = 0; item < d->batch; item++)
        gemm_block(d, a, b, c, bias, res, item, 0, d->m, 0, d->n);
}
