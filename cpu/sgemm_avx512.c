/*
 * An AVX-512 SGEMM for the CPU backend, with B packed into column panels.
 *
 * Layout of a packed B (op(B), k x n): panels of NR = 32 columns; panel p
 * holds columns [32p, 32p + 32) as k rows of 32 contiguous floats (64-byte
 * aligned), zero-padded past column n.  A K block [k0, k0 + kc) of a panel
 * is therefore one contiguous run of kc * 32 floats.
 *
 * Micro-kernel: MR = 12 rows x 32 columns of C in 24 zmm accumulators; per
 * k step two aligned loads of B and 12 broadcasts of A, read in place from
 * A's rows (trans_a = 0 only; trans_a goes to OpenBLAS).  Remainder rows use
 * the same kernel instantiated for MR = 1..11, so every element of C is one
 * chain of FMAs in K order whatever M is and wherever its row falls: a
 * micro-batch's rows come out bit-identical to the whole batch's.  (A
 * one-row kernel with K split four ways, to hide the FMA latency, summed in
 * another order and measured no faster: one row is bound by reading B.)
 * Column edges use masked loads and stores.  In place ("direct"), for a B
 * that is neither transposed nor constant, the same tile reads op(B)'s rows
 * where they lie (masked loads at the edge) instead of a packed panel.
 *
 * Blocking: K is split into even blocks of at most KC (so a 32-column B
 * block, kc x 32 floats, stays in L1 while MR-row tiles of A stream past),
 * rows into blocks of MC (an MC x kc block of A stays in L2 across the
 * panels).  The first K block writes C = alpha * AB + beta * C (beta == 0:
 * C is write-only, NaN in C does not propagate), later blocks add
 * alpha * AB to C, and the last applies the epilogue (bias per column or per
 * row, the residual, then RELU: x < 0 ? 0 : x, NaN passes) on the tile in
 * registers before the store.
 *
 * Threading follows cpu/gemm.c: one parallel region over the device's team;
 * column panels are split between the threads where C is wider than tall
 * (M = 1, M = 64 x N = 512), row blocks of MR otherwise.  Per-call packing
 * is shared by the team (omp for over the panels, then the barrier).
 *
 * The functions carry target attributes, so the rest of the build stays
 * generic; sn_cpu_sgemm_avx512_available() checks the CPU at run time.
 */
#include <config.h>

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/config.h"
#include "cpu_kernels.h"

#if defined(__GNUC__) && defined(__x86_64__)
#define SN_HAVE_AVX512_SGEMM 1
#include <immintrin.h>
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))
#else
#define SN_HAVE_AVX512_SGEMM 0
#endif

#define NR 32
#define MR 12
#define KC 256
#define MC 96

struct sn_cpu_packed_b {
    size_t k, n, npanels;
    float *data; /* npanels * k * NR floats */
};

static size_t ceil_div(size_t a, size_t b)
{
    return a / b + (a % b != 0);
}

/* The rows of K a block holds: K split into even blocks of at most KC.
 * The same K blocks for every M (one row included): each block's sum is
 * added to C, so the blocks fix the order of the additions, and a row
 * must be summed alike in a micro-batch and in the whole batch. */
static size_t k_block(size_t k)
{
    return ceil_div(k, ceil_div(k, KC));
}

/* Bit 0: AVX-512 F, BW, DQ and VL; bit 1: VNNI as well (checked once). */
static int cpu_features(void)
{
#if SN_HAVE_AVX512_SGEMM
    static int cached = -1;
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx512f") &&
            __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512dq") &&
            __builtin_cpu_supports("avx512vl");
        if (v && __builtin_cpu_supports("avx512vnni"))
            v |= 2;
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
#else
    return 0;
#endif
}

int sn_cpu_has_avx512(void)
{
    return cpu_features() & 1;
}

int sn_cpu_has_avx512_vnni(void)
{
    return (cpu_features() & 2) != 0;
}

int sn_cpu_sgemm_avx512_available(void)
{
    return sn_cpu_has_avx512() && !sn_config_env()->sgemm_blas;
}

int sn_cpu_sgemm_avx512_supports(const sn_gemm_desc *d)
{
    return sn_cpu_sgemm_avx512_available() && !d->trans_a &&
           (d->batch == 1 || d->stride_b == 0) && d->k > 0;
}

/* Huge pages' size on x86-64. */
#define HUGE_BYTES ((size_t)2 << 20)

sn_cpu_packed_b *sn_cpu_packed_b_alloc(size_t k, size_t n)
{
    sn_cpu_packed_b *p = calloc(1, sizeof *p);
    size_t bytes;
    if (!p)
        return NULL;
    p->k = k;
    p->n = n;
    p->npanels = ceil_div(n, NR);
    bytes = p->npanels * (k ? k : 1) * NR * sizeof(float);
    /* A large weight's packed copy in huge pages where the kernel gives
     * them (written once, at first use: a fault per 2 MiB, not per 4 KiB,
     * is most of what packing a big model costs). */
    size_t align = bytes >= HUGE_BYTES ? HUGE_BYTES : 64;
    size_t padded = (bytes + align - 1) / align * align;
    p->data = aligned_alloc(align, padded);
    if (!p->data) {
        free(p);
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    if (align == HUGE_BYTES)
        madvise(p->data, padded, MADV_HUGEPAGE);
#endif
    return p;
}

void sn_cpu_packed_b_free(sn_cpu_packed_b *p)
{
    if (p) {
        free(p->data);
        free(p);
    }
}

static void pack_panel(sn_cpu_packed_b *p, const float *b, size_t ldb,
                       int trans_b, size_t pi);

/* Pack panel `pi` of op(B) (b: batch item 0's B, descriptor's ldb/trans_b),
 * portable version. */
static void pack_panel_c(sn_cpu_packed_b *p, const float *b, size_t ldb,
                       int trans_b, size_t pi)
{
    const size_t j0 = pi * NR, k = p->k;
    const size_t nc = p->n - j0 < NR ? p->n - j0 : NR;
    float *dst = p->data + pi * k * NR;

    if (!trans_b) {
        for (size_t kk = 0; kk < k; kk++) {
            const float *src = b + kk * ldb + j0;
            float *o = dst + kk * NR;
            size_t j = 0;
            for (; j < nc; j++)
                o[j] = src[j];
            for (; j < NR; j++)
                o[j] = 0.0f;
        }
    } else {
        /* op(B)(kk, j) = B(j, kk): column j of the panel is row j0 + j. */
        if (nc < NR)
            memset(dst, 0, k * NR * sizeof *dst);
        for (size_t kb = 0; kb < k; kb += 64) {
            const size_t ke = kb + 64 < k ? kb + 64 : k;
            for (size_t j = 0; j < nc; j++) {
                const float *src = b + (j0 + j) * ldb;
                for (size_t kk = kb; kk < ke; kk++)
                    dst[kk * NR + j] = src[kk];
            }
        }
    }
}

/* Packing a weight of this many floats or more is shared by the device's
 * team: a big model's first run is mostly packing (reading B, and the
 * kernel clearing the new pages), which one thread does at a fraction of
 * the memory's speed. */
#define PACK_PARALLEL_FLOATS ((size_t)1 << 20)

void sn_cpu_pack_b(sn_cpu_packed_b *p, const sn_gemm_desc *d, const float *b)
{
    const int par = p->npanels > 1 && p->npanels * p->k * NR >=
                                          PACK_PARALLEL_FLOATS;
#pragma omp parallel for schedule(static) if (par)
    for (size_t pi = 0; pi < p->npanels; pi++)
        pack_panel(p, b, d->ldb, d->trans_b, pi);
}

void sn_cpu_unpack_b(const sn_cpu_packed_b *p, int trans_b, size_t ldb,
                     float *b)
{
    for (size_t kk = 0; kk < p->k; kk++)
        for (size_t j = 0; j < p->n; j++) {
            float v = p->data[(j / NR) * p->k * NR + kk * NR + j % NR];
            if (trans_b)
                b[j * ldb + kk] = v;
            else
                b[kk * ldb + j] = v;
        }
}

#if SN_HAVE_AVX512_SGEMM

typedef struct tile_args {
    const float *a; /* A(r, k0) */
    size_t lda;
    const float *b; /* B block: kc x NR, rows ldb apart */
    size_t ldb;     /* NR (packed) or op(B)'s row stride (direct) */
    size_t kc;
    float *c; /* C(r, c0) */
    size_t ldc;
    __mmask16 m0, m1; /* columns c0..c0+15, c0+16..c0+31 */
    int first, last;
    float alpha, beta;
    const float *bias_col; /* bias + c0, or NULL */
    const float *bias_row; /* bias + r, or NULL */
    const float *res;      /* the residual's element (r, c0), or NULL */
    sn_act act;
} tile_args;

/* The sums of one row, before the store: v0/v1 hold A B for the row and
 * get alpha, beta C (or the earlier K blocks' C) and, after the last K
 * block, the bias and the residual. */
static inline __attribute__((always_inline)) AVX512 void
finish_row(const tile_args *t, size_t i, __m512 *v0p, __m512 *v1p)
{
    const float *cr = t->c + i * t->ldc;
    __m512 v0 = *v0p, v1 = *v1p;
    const __m512 al = _mm512_set1_ps(t->alpha);
    v0 = _mm512_mul_ps(v0, al);
    v1 = _mm512_mul_ps(v1, al);
    if (!t->first) {
        v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(t->m0, cr));
        v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(t->m1, cr + 16));
    } else if (t->beta != 0.0f) {
        const __m512 be = _mm512_set1_ps(t->beta);
        v0 = _mm512_fmadd_ps(be, _mm512_maskz_loadu_ps(t->m0, cr), v0);
        v1 = _mm512_fmadd_ps(be, _mm512_maskz_loadu_ps(t->m1, cr + 16), v1);
    }
    if (t->last) {
        if (t->bias_col) {
            v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(t->m0, t->bias_col));
            v1 = _mm512_add_ps(v1,
                               _mm512_maskz_loadu_ps(t->m1, t->bias_col + 16));
        } else if (t->bias_row) {
            const __m512 bv = _mm512_set1_ps(t->bias_row[i]);
            v0 = _mm512_add_ps(v0, bv);
            v1 = _mm512_add_ps(v1, bv);
        }
        if (t->res) {
            const float *rr = t->res + i * t->ldc;
            v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(t->m0, rr));
            v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(t->m1, rr + 16));
        }
    }
    *v0p = v0;
    *v1p = v1;
}

/* The store of one row finished by finish_row(): RELU after the last K
 * block, then C. */
static inline __attribute__((always_inline)) AVX512 void
store_row(const tile_args *t, size_t i, __m512 v0, __m512 v1)
{
    float *cr = t->c + i * t->ldc;
    if (t->last && t->act != SN_ACT_NONE) {
        const __m512 z = _mm512_setzero_ps();
        v0 = _mm512_mask_mov_ps(v0, _mm512_cmp_ps_mask(v0, z, _CMP_LT_OQ), z);
        v1 = _mm512_mask_mov_ps(v1, _mm512_cmp_ps_mask(v1, z, _CMP_LT_OQ), z);
        if (t->act == SN_ACT_RELU6) {
            const __m512 six = _mm512_set1_ps(6.0f);
            v0 = _mm512_mask_mov_ps(
                v0, _mm512_cmp_ps_mask(v0, six, _CMP_GT_OQ), six);
            v1 = _mm512_mask_mov_ps(
                v1, _mm512_cmp_ps_mask(v1, six, _CMP_GT_OQ), six);
        }
    }
    _mm512_mask_storeu_ps(cr, t->m0, v0);
    _mm512_mask_storeu_ps(cr + 16, t->m1, v1);
}

/* direct: B read in place (masked loads at the column edge), else from
 * an aligned packed panel. */
static inline __attribute__((always_inline)) AVX512 void
tile_mr(const int mr, const int halves, const int direct, const tile_args *t)
{
    __m512 acc0[MR], acc1[MR];
    const float *a = t->a, *b = t->b;
    const size_t lda = t->lda, ldb = direct ? t->ldb : NR;

#pragma GCC unroll 12
    for (int i = 0; i < mr; i++) {
        acc0[i] = _mm512_setzero_ps();
        acc1[i] = _mm512_setzero_ps();
    }
    for (size_t kk = 0; kk < t->kc; kk++) {
        const __m512 b0 = direct ? _mm512_maskz_loadu_ps(t->m0, b)
                                 : _mm512_load_ps(b);
        const __m512 b1 = halves != 2 ? b0
                          : direct    ? _mm512_maskz_loadu_ps(t->m1, b + 16)
                                      : _mm512_load_ps(b + 16);
#pragma GCC unroll 12
        for (int i = 0; i < mr; i++) {
            const __m512 av = _mm512_set1_ps(a[i * lda]);
            acc0[i] = _mm512_fmadd_ps(av, b0, acc0[i]);
            if (halves == 2)
                acc1[i] = _mm512_fmadd_ps(av, b1, acc1[i]);
        }
        a++;
        b += ldb;
    }
    /* Every load of the epilogue (C, the residual) before the first
     * store: rows of C and of the residual lie a power of two apart in
     * many convolutions (128 x 128 planes), where a load after a store to
     * an address equal in its low 12 bits waits on that store (4K
     * aliasing); the residual add then cost more than a pass of its own. */
#pragma GCC unroll 12
    for (int i = 0; i < mr; i++)
        finish_row(t, (size_t)i, &acc0[i], &acc1[i]);
#pragma GCC unroll 12
    for (int i = 0; i < mr; i++)
        store_row(t, (size_t)i, acc0[i], acc1[i]);
}

/* halves: 2 for 17..32 columns, 1 for at most 16 (the N = 10 classifier).
 * direct: B in place (see tile_mr). */
static AVX512 void tile_any(int mr, int halves, int direct, const tile_args *t)
{
#define SN_TILE_CASES(h, dr)                                                  \
    switch (mr) {                                                             \
    case 12: tile_mr(12, h, dr, t); break;                                    \
    case 11: tile_mr(11, h, dr, t); break;                                    \
    case 10: tile_mr(10, h, dr, t); break;                                    \
    case 9: tile_mr(9, h, dr, t); break;                                      \
    case 8: tile_mr(8, h, dr, t); break;                                      \
    case 7: tile_mr(7, h, dr, t); break;                                      \
    case 6: tile_mr(6, h, dr, t); break;                                      \
    case 5: tile_mr(5, h, dr, t); break;                                      \
    case 4: tile_mr(4, h, dr, t); break;                                      \
    case 3: tile_mr(3, h, dr, t); break;                                      \
    case 2: tile_mr(2, h, dr, t); break;                                      \
    default: tile_mr(1, h, dr, t); break;                                     \
    }
    if (direct && halves == 2)
        SN_TILE_CASES(2, 1)
    else if (direct)
        SN_TILE_CASES(1, 1)
    else if (halves == 2)
        SN_TILE_CASES(2, 0)
    else
        SN_TILE_CASES(1, 0)
#undef SN_TILE_CASES
}

/* Rows [r0, r1) x panels [p0, p1) of one batch item, on this thread.
 * B: the packed pb, or where pb is NULL op(B) itself, b (k x n, rows
 * d->ldb apart: trans_b = 0), its panels read in place. */
static AVX512 void sgemm_block(const sn_gemm_desc *d, const float *a,
                               const sn_cpu_packed_b *pb, const float *b,
                               float *c, const float *bias,
                               const float *res, size_t r0, size_t r1,
                               size_t p0, size_t p1)
{
    const size_t k = d->k, kc_even = k_block(k);
    tile_args t;

    t.lda = d->lda;
    t.ldb = pb ? NR : d->ldb;
    t.ldc = d->ldc;
    t.alpha = d->alpha;
    t.beta = d->beta;
    t.act = d->act;
    for (size_t k0 = 0; k0 < k; k0 += kc_even) {
        const size_t kc = k - k0 < kc_even ? k - k0 : kc_even;
        t.kc = kc;
        t.first = k0 == 0;
        t.last = k0 + kc == k;
        for (size_t m0 = r0; m0 < r1; m0 += MC) {
            const size_t m1 = r1 - m0 < MC ? r1 : m0 + MC;
            for (size_t p = p0; p < p1; p++) {
                const size_t c0 = p * NR;
                const size_t nc = d->n - c0 < NR ? d->n - c0 : NR;
                t.m0 = nc >= 16 ? 0xffff : (__mmask16)((1u << nc) - 1u);
                t.m1 = nc <= 16 ? 0
                       : nc >= 32 ? 0xffff
                                  : (__mmask16)((1u << (nc - 16)) - 1u);
                t.b = pb ? pb->data + p * k * NR + k0 * NR
                         : b + k0 * d->ldb + c0;
                t.bias_col = bias && !d->bias_rows ? bias + c0 : NULL;
                for (size_t i = m0; i < m1; i += MR) {
                    const size_t mr = m1 - i < MR ? m1 - i : MR;
                    t.a = a + i * d->lda + k0;
                    t.c = c + i * d->ldc + c0;
                    t.bias_row = bias && d->bias_rows ? bias + i : NULL;
                    t.res = res ? res + i * d->ldc + c0 : NULL;
                    tile_any((int)mr, nc > 16 ? 2 : 1, !pb, &t);
                }
            }
        }
    }
}

/* 16 x 16 transpose: r[j] holds 16 floats of row j; out[x] gets column x. */
static inline __attribute__((always_inline)) AVX512 void
transpose16(const __m512 *r, __m512 *out)
{
    __m512 t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        const __m512d a0 = _mm512_castps_pd(t[4 * i]),
                      a1 = _mm512_castps_pd(t[4 * i + 1]),
                      a2 = _mm512_castps_pd(t[4 * i + 2]),
                      a3 = _mm512_castps_pd(t[4 * i + 3]);
        u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
        u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
        u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
        u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
    }
    /* u[4g + c], lane l: rows 4g..4g+3 of column 4l + c. */
    for (int c = 0; c < 4; c++) {
        const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44),
                     v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xEE),
                     v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44),
                     v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xEE);
        out[c] = _mm512_shuffle_f32x4(v0, v2, 0x88);
        out[4 + c] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
        out[8 + c] = _mm512_shuffle_f32x4(v1, v3, 0x88);
        out[12 + c] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
    }
}

static AVX512 void pack_panel_avx512(sn_cpu_packed_b *p, const float *b,
                                     size_t ldb, int trans_b, size_t pi)
{
    const size_t j0 = pi * NR, k = p->k;
    const size_t nc = p->n - j0 < NR ? p->n - j0 : NR;
    const __mmask16 m0 = nc >= 16 ? 0xffff : (__mmask16)((1u << nc) - 1u);
    const __mmask16 m1 = nc <= 16   ? 0
                         : nc >= 32 ? 0xffff
                                    : (__mmask16)((1u << (nc - 16)) - 1u);
    float *dst = p->data + pi * k * NR;

    if (!trans_b) {
        for (size_t kk = 0; kk < k; kk++) {
            const float *src = b + kk * ldb + j0;
            _mm512_store_ps(dst + kk * NR, _mm512_maskz_loadu_ps(m0, src));
            _mm512_store_ps(dst + kk * NR + 16,
                            _mm512_maskz_loadu_ps(m1, src + 16));
        }
        return;
    }
    /* op(B)(kk, j) = B(j0 + j, kk): 16 x 16 blocks, transposed. */
    for (size_t kk = 0; kk < k; kk += 16) {
        const size_t kn = k - kk < 16 ? k - kk : 16;
        const __mmask16 km = kn == 16 ? 0xffff : (__mmask16)((1u << kn) - 1u);
        for (size_t h = 0; h < 2; h++) {
            __m512 r[16], out[16];
            for (size_t j = 0; j < 16; j++) {
                const size_t jj = h * 16 + j;
                r[j] = jj < nc ? _mm512_maskz_loadu_ps(
                                     km, b + (j0 + jj) * ldb + kk)
                               : _mm512_setzero_ps();
            }
            transpose16(r, out);
            for (size_t x = 0; x < kn; x++)
                _mm512_store_ps(dst + (kk + x) * NR + h * 16, out[x]);
        }
    }
}

/*
 * One row of A times row j of B (B^T's column j), where it lies: two
 * accumulators of 16 lanes (K's 32-float steps, the last step masked),
 * added, then summed across the lanes; the sum depends on K alone, not on
 * where the row falls.  Rows one after another: a thread reads B as one
 * stream, and asks for its lines DOT_AHEAD bytes on (the hardware's
 * prefetchers stop at each 4 KiB page), as non-temporal (they pass by
 * once; A's row stays).  Measured on a 2-core Zen 5 reading 88 GB/s, the
 * MLP of make_big_model at batch 1, interleaved: 6.6 ms (81 GB/s) against
 * 7.3 with the lines asked for into every cache level (T0), 8.4 into L2
 * (T1), 7.6 for groups of eight rows side by side without the prefetch
 * (as before); 4, 12 and 16 KiB ahead: 6.8, 7.3 and 7.0 ms.
 */
#define DOT_AHEAD 8192

static inline __attribute__((always_inline)) AVX512 void
dot_row(const sn_gemm_desc *d, const float *a, const float *b, float *c,
        const float *bias, const float *res, size_t j)
{
    const size_t k = d->k;
    const float *row = b + j * d->ldb;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    size_t kk = 0;
    for (; kk + 32 <= k; kk += 32) {
        const float *r = row + kk;
        _mm_prefetch((const char *)r + DOT_AHEAD, _MM_HINT_NTA);
        _mm_prefetch((const char *)r + DOT_AHEAD + 64, _MM_HINT_NTA);
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + kk), _mm512_loadu_ps(r), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + kk + 16),
                             _mm512_loadu_ps(r + 16), s1);
    }
    if (kk < k) {
        const size_t left = k - kk;
        const __mmask16 m0 =
            left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1u);
        const __mmask16 m1 = left <= 16 ? 0
                             : left >= 32
                                 ? 0xffff
                                 : (__mmask16)((1u << (left - 16)) - 1u);
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, a + kk),
                             _mm512_maskz_loadu_ps(m0, row + kk), s0);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, a + kk + 16),
                             _mm512_maskz_loadu_ps(m1, row + kk + 16), s1);
    }
    float y = d->alpha * _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    if (d->beta != 0.0f)
        y += d->beta * c[j];
    if (bias)
        y += d->bias_rows ? bias[0] : bias[j];
    if (res)
        y += res[j];
    if (d->act != SN_ACT_NONE) {
        y = y < 0.0f ? 0.0f : y; /* NaN passes */
        if (d->act == SN_ACT_RELU6)
            y = y > 6.0f ? 6.0f : y;
    }
    c[j] = y;
}

/* Rows of B a unit of the threads' shares. */
#define DOT_ROWS 8

static AVX512 void dot_rows(const sn_gemm_desc *d, const float *a,
                            const float *b, float *c, const float *bias,
                            const float *res, size_t j0, size_t j1)
{
    for (size_t j = j0; j < j1; j++)
        dot_row(d, a, b, c, bias, res, j);
}

/* Columns [32 p0, 32 p1) of C from the K blocks' sums (part: nch blocks
 * of n floats), added to C in block order by the tile's own epilogue
 * (finish_row, store_row), as sgemm_block would. */
static AVX512 void row_finish(const sn_gemm_desc *d, const float *part,
                              size_t nch, float *c, const float *bias,
                              const float *res, size_t p0, size_t p1)
{
    tile_args t;
    memset(&t, 0, sizeof t);
    t.alpha = d->alpha;
    t.beta = d->beta;
    t.act = d->act;
    t.ldc = d->ldc;
    t.bias_row = bias && d->bias_rows ? bias : NULL;
    for (size_t p = p0; p < p1; p++) {
        const size_t c0 = p * NR, nc = d->n - c0 < NR ? d->n - c0 : NR;
        t.m0 = nc >= 16 ? 0xffff : (__mmask16)((1u << nc) - 1u);
        t.m1 = nc <= 16   ? 0
               : nc >= 32 ? 0xffff
                          : (__mmask16)((1u << (nc - 16)) - 1u);
        t.c = c + c0;
        t.bias_col = bias && !d->bias_rows ? bias + c0 : NULL;
        t.res = res ? res + c0 : NULL;
        for (size_t ch = 0; ch < nch; ch++) {
            const float *pp = part + ch * d->n + c0;
            __m512 v0 = _mm512_maskz_loadu_ps(t.m0, pp),
                   v1 = _mm512_maskz_loadu_ps(t.m1, pp + 16);
            t.first = ch == 0;
            t.last = ch + 1 == nch;
            finish_row(&t, 0, &v0, &v1);
            store_row(&t, 0, v0, v1);
        }
    }
}

/* nr rows of B from row kk into the partial sums part (n columns): per
 * column the same chain of FMAs (row kk, then kk + 1, ...), its sum held
 * in a register between them. */
static inline __attribute__((always_inline)) AVX512 void
row_pass(const int nr, const sn_gemm_desc *d, const float *a, const float *b,
         size_t kk, float *part)
{
    const size_t n = d->n, full = n / 16 * 16;
    const __mmask16 mt = (__mmask16)((1u << (n - full)) - 1u);
    __m512 av[4];
    const float *r[4];
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++) {
        av[i] = _mm512_set1_ps(a[kk + (size_t)i]);
        r[i] = b + (kk + (size_t)i) * d->ldb;
    }
    const size_t next = (size_t)nr * d->ldb; /* the next pass's rows */
    for (size_t j = 0; j < n; j += 16) {
        const __mmask16 m = j < full ? 0xffff : mt;
        __m512 v = _mm512_maskz_loadu_ps(m, part + j);
#pragma GCC unroll 4
        for (int i = 0; i < nr; i++) {
            _mm_prefetch((const char *)(r[i] + j + next), _MM_HINT_NTA);
            v = _mm512_fmadd_ps(av[i], _mm512_maskz_loadu_ps(m, r[i] + j), v);
        }
        _mm512_mask_storeu_ps(part + j, m, v);
    }
}

/* The partial sum over B's rows [k0, k1) of one row of A times B (rows
 * ldb apart, n columns) into part, from zero, in K order, four rows a
 * pass (one row a pass stored each column's sum between rows and ran at
 * 57% of the packed kernel's speed). */
static AVX512 void row_chunk(const sn_gemm_desc *d, const float *a,
                             const float *b, size_t k0, size_t k1,
                             float *part)
{
    size_t kk = k0;
    memset(part, 0, d->n * sizeof *part);
    for (; kk + 4 <= k1; kk += 4)
        row_pass(4, d, a, b, kk, part);
    for (; kk < k1; kk++)
        row_pass(1, d, a, b, kk, part);
}

#endif /* SN_HAVE_AVX512_SGEMM */

static void pack_panel(sn_cpu_packed_b *p, const float *b, size_t ldb,
                       int trans_b, size_t pi)
{
#if SN_HAVE_AVX512_SGEMM
    if (sn_cpu_sgemm_avx512_available()) {
        pack_panel_avx512(p, b, ldb, trans_b, pi);
        return;
    }
#endif
    pack_panel_c(p, b, ldb, trans_b, pi);
}

/*
 * The whole gemm (every batch item) with a packed B (batch item 0's, or the
 * only one: the caller checked sn_cpu_sgemm_avx512_supports).  b: the raw B
 * when pb must be packed here (pack != 0), else unused.  pb NULL: B is read
 * in place, b being op(B) (trans_b = 0), each batch item's own.
 */
static void sgemm_run(const sn_gemm_desc *d, const float *a, const float *b,
                      sn_cpu_packed_b *pb, int pack, float *c,
                      const float *bias, const float *res)
{
#if SN_HAVE_AVX512_SGEMM
    const size_t nthreads = (size_t)omp_get_max_threads();
    const double work = (double)d->m * (double)d->n * (double)d->k *
                        (double)d->batch;
    const int par = nthreads > 1 && work >= 64.0 * 64.0 * 64.0;

#pragma omp parallel if (par)
    {
        const size_t nt = (size_t)omp_get_num_threads();
        /* Split rows (in MR blocks) when C is at least as tall as wide and
         * there are enough blocks; otherwise panels. */
        const size_t rblocks = ceil_div(d->m, MR);
        const int split_rows = d->m >= d->n && rblocks >= nt;
        const size_t npanels = ceil_div(d->n, NR);
        const size_t units = split_rows ? rblocks : npanels;
        size_t u0, u1;
        sn_cpu_thread_share(units, &u0, &u1);

        if (pack && pb) {
            if (split_rows) {
#pragma omp for schedule(static)
                for (size_t pi = 0; pi < pb->npanels; pi++)
                    pack_panel(pb, b, d->ldb, d->trans_b, pi);
            } else {
                /* Each thread packs the panels it computes. */
                for (size_t pi = u0; pi < u1; pi++)
                    pack_panel(pb, b, d->ldb, d->trans_b, pi);
            }
        }
        if (u0 < u1)
            for (size_t item = 0; item < d->batch; item++) {
                const float *ai = a + item * d->stride_a;
                const float *bi = pb ? NULL : b + item * d->stride_b;
                float *ci = c + item * d->stride_c;
                const float *ri = res ? res + item * d->stride_c : NULL;
                if (split_rows) {
                    const size_t r0 = u0 * MR;
                    const size_t r1 = u1 * MR < d->m ? u1 * MR : d->m;
                    sgemm_block(d, ai, pb, bi, ci, bias, ri, r0, r1, 0,
                                npanels);
                } else {
                    sgemm_block(d, ai, pb, bi, ci, bias, ri, 0, d->m, u0, u1);
                }
            }
    }
#else
    (void)d; (void)a; (void)b; (void)pb; (void)pack; (void)c; (void)bias;
    (void)res;
#endif
}

void sn_cpu_sgemm_avx512_packed(const sn_gemm_desc *d, const float *a,
                                const sn_cpu_packed_b *pb, float *c,
                                const float *bias, const float *res)
{
    if (d->m == 0 || d->n == 0)
        return;
    sgemm_run(d, a, NULL, (sn_cpu_packed_b *)pb, 0, c, bias, res);
}

/*
 * B not transposed and not constant (a 1x1 convolution's input, an im2col
 * matrix, an activation times an activation): the tile reads op(B)'s rows
 * in place, 32 columns at a time, instead of packing B first.  Minimum
 * times of 31 runs, 1 thread, same 2-vCPU AMD EPYC as below (packing per
 * call / in place, microseconds, bias per row and RELU):
 *   24 x 16384 x 24     287 / 230     (BlazeFace's 1x1 convolutions)
 *   32 x 16384 x 24     326 / 283
 *   24 x 16384 x 75     931 / 633     (its 5x5 stem after im2col)
 *   48 x 4096 x 48      230 / 191
 *   96 x 1024 x 96      198 / 181
 *   64 x 4096 x 256    1501 / 1285
 *   128 x 1024 x 512   1337 / 1250
 *   256 x 256 x 1024   1373 / 1313
 *   64 x 16384 x 64    2084 / 1778
 * so in place wherever packing per call was taken (M >= 4, N > 16); the
 * sums are the same FMAs in the same order, so the bits are the packed
 * kernel's.
 */
int sn_cpu_sgemm_avx512_direct_takes(const sn_gemm_desc *d)
{
    return sn_cpu_sgemm_avx512_available() && !d->trans_a && !d->trans_b &&
           d->k > 0 && d->m >= 4 && d->n > 16;
}

void sn_cpu_sgemm_avx512_direct(const sn_gemm_desc *d, const float *a,
                                const float *b, float *c, const float *bias,
                                const float *res)
{
    if (d->m == 0 || d->n == 0)
        return;
    sgemm_run(d, a, b, NULL, 0, c, bias, res);
}

/*
 * One row of A times a constant B^T (batch-1 inference through a weight
 * stored [N, K], as PyTorch's Linear exports it): each column of C is the
 * dot product of A's row with one of B's rows, read where it lies (the
 * model's mapped file), so a batch-1 run needs no packed copy at all: a
 * big model's first run was mostly packing (the kernel clearing the
 * copy's new pages), and a weight used in place counts once in memory.
 * The threads take runs of B's rows.  The sums are not the packed
 * kernel's (K order per column): one-row products always come here, and a
 * pipeline never cuts a batch into micro-batches of one row (see
 * lib/runtime/pipeline_run.c), so a micro-batch's rows are still the
 * whole batch's.  Returns 1 (the signature of _rows, below).
 */
int sn_cpu_sgemm_avx512_dot_takes(const sn_gemm_desc *d)
{
    return sn_cpu_sgemm_avx512_available() && d->b_const && !d->trans_a &&
           d->trans_b && d->m == 1 && d->batch == 1 && d->k > 0;
}

int sn_cpu_sgemm_avx512_dot(const sn_gemm_desc *d, const float *a,
                            const float *b, float *c, const float *bias,
                            const float *res)
{
#if SN_HAVE_AVX512_SGEMM
    const int par = omp_get_max_threads() > 1 &&
                    (double)d->n * (double)d->k >= 64.0 * 64.0 * 64.0;
#pragma omp parallel if (par)
    {
        size_t u0, u1;
        sn_cpu_thread_share(ceil_div(d->n, DOT_ROWS), &u0, &u1);
        u1 = u1 * DOT_ROWS < d->n ? u1 * DOT_ROWS : d->n;
        if (u0 * DOT_ROWS < u1)
            dot_rows(d, a, b, c, bias, res, u0 * DOT_ROWS, u1);
    }
    return 1;
#else
    (void)d; (void)a; (void)b; (void)c; (void)bias; (void)res;
    return 0;
#endif
}

/*
 * One row of A times a constant B not transposed (a MatMul's [K, N]
 * weight at batch 1): B read where it lies, a K block of whole rows at a
 * time (one run of the file, streamed by one thread), so that batch 1
 * needs no packed copy.  Each block's sums start from zero and run in K
 * order, and the blocks are added in order at the end as finish_row adds
 * them to C (alpha, beta, then the bias, the residual and RELU): the
 * packed kernel's bits, on any thread count.  Returns 0, computing
 * nothing, when out of memory for the blocks' sums.
 */
int sn_cpu_sgemm_avx512_rows_takes(const sn_gemm_desc *d)
{
    return sn_cpu_sgemm_avx512_available() && d->b_const && !d->trans_a &&
           !d->trans_b && d->m == 1 && d->batch == 1 && d->k > 0;
}

int sn_cpu_sgemm_avx512_rows(const sn_gemm_desc *d, const float *a,
                             const float *b, float *c, const float *bias,
                             const float *res)
{
#if SN_HAVE_AVX512_SGEMM
    const size_t kc_even = k_block(d->k); /* sgemm_block's K blocks */
    const size_t n = d->n, nch = ceil_div(d->k, kc_even);
    float *part;
    if (n == 0)
        return 1;
    if (!(part = malloc(nch * n * sizeof *part)))
        return 0;
    const int par = omp_get_max_threads() > 1 &&
                    (double)n * (double)d->k >= 64.0 * 64.0 * 64.0;
#pragma omp parallel if (par)
    {
#pragma omp for schedule(static)
        for (size_t ch = 0; ch < nch; ch++) {
            size_t k0 = ch * kc_even,
                   k1 = k0 + kc_even < d->k ? k0 + kc_even : d->k;
            row_chunk(d, a, b, k0, k1, part + ch * n);
        }
        size_t u0, u1;
        sn_cpu_thread_share(ceil_div(n, NR), &u0, &u1);
        if (u0 < u1)
            row_finish(d, part, nch, c, bias, res, u0, u1);
    }
    free(part);
    return 1;
#else
    (void)d; (void)a; (void)b; (void)c; (void)bias; (void)res;
    return 0;
#endif
}

int sn_cpu_sgemm_avx512(const sn_gemm_desc *d, const float *a, const float *b,
                        float *c, const float *bias, const float *res)
{
    sn_cpu_packed_b *pb;
    if (d->m == 0 || d->n == 0)
        return 1;
    pb = sn_cpu_packed_b_alloc(d->k, d->n);
    if (!pb)
        return 0;
    sgemm_run(d, a, b, pb, 1, c, bias, res);
    sn_cpu_packed_b_free(pb);
    return 1;
}

/*
 * OpenBLAS's "small matrix" SGEMM (its SkylakeX-family kernels only: the
 * Haswell/Zen ones have none) skips packing and is the fastest thing on this
 * machine for small A B^T.  gemm.c calls it, per thread, for blocks of
 * m_t x n_t where OpenBLAS 0.3.21's permit function (column-major, so A B^T
 * is its "TN" case) takes the block: m_t n_t k <= 100^3, m_t n_t <= 1200,
 * k >= 32.  m_t or n_t = 1 goes to sgemv instead.
 */
static int blas_small_kernel_wins(const sn_gemm_desc *d)
{
    static int skx = -1;
    size_t nt = (size_t)omp_get_max_threads(), mt = d->m, ntc = d->n;
    int v = __atomic_load_n(&skx, __ATOMIC_RELAXED);
    if (v < 0) {
        extern char *openblas_get_corename(void);
        const char *core = openblas_get_corename();
        v = core && (!strcmp(core, "SkylakeX") || !strcmp(core, "Cooperlake") ||
                     !strcmp(core, "SapphireRapids"));
        __atomic_store_n(&skx, v, __ATOMIC_RELAXED);
    }
    if (!v || !d->trans_b || d->trans_a || d->k < 32)
        return 0;
    if (nt > 1 && (double)d->m * (double)d->n * (double)d->k *
                          (double)d->batch >= 64.0 * 64.0 * 64.0) {
        if (d->m >= d->n)
            mt = ceil_div(d->m, nt);
        else
            ntc = ceil_div(d->n, nt);
    }
    return mt >= 2 && ntc >= 2 && mt * ntc <= 1200 &&
           (double)mt * (double)ntc * (double)d->k <= 1e6;
}

/*
 * Where this kernel beats the OpenBLAS path (gemm.c), measured on a 2-vCPU
 * AMD EPYC with AVX-512 (OpenBLAS 0.3.21, OPENBLAS_CORETYPE=SkylakeX, its
 * fastest kernels here; GFLOP/s, ours on a packed B / ours packing per call
 * / OpenBLAS):
 *   1 thread:
 *   M x N x K         transB=1           transB=0
 *   1 x 512 x 784     56 / 5 / 48        61 / 8 / 45
 *   4 x 512 x 784     187 / 35 / 38      187 / 57 / 39
 *   16 x 512 x 784    232 / 97 / 106     227 / 135 / 111
 *   64 x 512 x 784    241 / 182 / 186    237 / 204 / 190
 *   256 x 512 x 784   243 / 225 / 228    238 / 230 / 226
 *   1024 x 512 x 512  246 / 239 / 232    244 / 240 / 233
 *   1 x 10 x 512      20 / 4 / 46        20 / 3 / 14
 *   64 x 10 x 512     118 / 83 / 182     118 / 101 / 103
 *   128 x 10 x 512    124 / 101 / 64     124 / 117 / 110
 *   1024 x 10 x 512   117 / 114 / 69     117 / 113 / 68
 *   2 threads:
 *   4 x 512 x 784     312 / 74 / 327     369 / 115 / 334
 *   64 x 512 x 784    478 / 356 / 314    477 / 397 / 351
 *   1024 x 512 x 512  484 / 465 / 447    486 / 473 / 460
 *   128 x 10 x 512    207 / 137 / 275    209 / 155 / 191
 * The OpenBLAS wins are its sgemv for 1 x 10 (B^T) and its small-matrix
 * kernel (blas_small_kernel_wins);
 * under OPENBLAS_CORETYPE=Haswell (this machine's default environment)
 * there is none and OpenBLAS is slower everywhere (e.g. 64 x 512 x 784:
 * 1 thread ~105 GFLOP/s).  So: on a packed B (a constant B, packed once)
 * always ours (its few losses are tiny products, and one path for every M
 * keeps a micro-batch's rows bit-identical to the whole batch's); packing
 * per call pays
 * for N > 16 from M = 4 (B not transposed: a plain copy) or M = 512
 * (transposed: 16 x 16 transposes), for N <= 16 from M = 128.
 */
int sn_cpu_sgemm_avx512_worth(const sn_gemm_desc *d, int b_packed)
{
    /* A constant B (a weight) always comes here, whatever M: the rows of a
     * micro-batch (a layer split's, down to one row) must be computed as
     * the same rows of the whole batch are, bit for bit, and the OpenBLAS
     * paths that win for some M (its sgemv for one row times a narrow B^T,
     * its small-matrix kernel) sum in other orders. */
    if (b_packed)
        return 1;
    if (blas_small_kernel_wins(d))
        return 0;
    /* One row of C times a narrow B^T: OpenBLAS's sgemv does n dot products
     * on B's rows; ours would stream a 32-wide panel for n <= 16 columns. */
    if (d->m == 1 && d->n <= 16 && d->trans_b)
        return 0;
    if (d->n <= 16)
        return d->m >= 128;
    return d->m >= (d->trans_b ? 512u : 4u);
}
