/*
 * A fake cuBLASLt (libcublasLt.so.13) for the fake CUDA toolkit
 * (runtime.c): the calls backends/cuda/lt.c loads, for float data and
 * float compute only, with the epilogues DEFAULT and BIAS, as the
 * cuBLASLt documentation and cublasLt.h define them:
 *
 *   - matrices are column-major; D = alpha op(A) op(B) + beta C, then
 *     the BIAS epilogue adds bias[row] to every column of D (the bias's
 *     length is D's row count);
 *   - attributes are set with the size of their type, else
 *     CUBLAS_STATUS_INVALID_VALUE;
 *   - the heuristic reads the bias pointer's value and the preferences'
 *     alignments (256 bytes unless set), and the algorithm it returns
 *     serves pointers aligned that well: cublasLtMatmul with a pointer
 *     aligned less (which a GPU may meet as a misaligned access) aborts
 *     with a message, as does an algorithm not from the heuristic, and a
 *     bias aligned less than 16 bytes (not documented, but others meet
 *     misaligned-address faults there: backends/cuda/lt.c);
 *   - C == D (in place) needs the same layout for both.
 *
 * The product is enqueued on the given stream and computed by a plain
 * loop when the stream runs, the bias added to alpha * the sum rounded
 * to float (what our own epilogue kernel does after cuBLAS).  The
 * runtime's injected failures reach cublasLtMatmul as
 * SN_FAKE_CUDA_FAIL=cublasLtMatmul:N (CUBLAS_STATUS_EXECUTION_FAILED).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "sn_fakecuda.h"

#define SN_EXPORT __attribute__((visibility("default")))

#define ALGO_MAGIC 0x666b4c74u /* an algorithm from the heuristic */

struct cublasLtContext {
    int live;
};

/* The opaque types of cublasLt.h are blocks of uint64_t; the fake keeps
 * its own structures in them, which the sizes below check. */
typedef struct desc {
    int32_t compute, scale, transa, transb;
    uint32_t epilogue;
    const void *bias;
} desc;
typedef struct layout {
    int32_t type;
    uint64_t rows, cols;
    int64_t ld;
} layout;
typedef struct pref {
    uint64_t workspace;
    uint32_t align[4]; /* A, B, C, D */
} pref;
typedef struct algo {
    uint32_t magic;
    uint32_t align[5]; /* A, B, C, D and the bias: what it serves */
} algo;
_Static_assert(sizeof(desc) <= sizeof(cublasLtMatmulDescOpaque_t), "desc");
_Static_assert(sizeof(layout) <= sizeof(cublasLtMatrixLayoutOpaque_t),
               "layout");
_Static_assert(sizeof(pref) <= sizeof(cublasLtMatmulPreferenceOpaque_t),
               "pref");
_Static_assert(sizeof(algo) <= sizeof(cublasLtMatmulAlgo_t), "algo");

static void fatal(const char *what)
{
    fprintf(stderr, "fake cuBLASLt: %s\n", what);
    abort();
}

/* --- handles and descriptors ------------------------------------------- */

SN_EXPORT cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
    if (!h)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!(*h = calloc(1, sizeof **h)))
        return CUBLAS_STATUS_ALLOC_FAILED;
    (*h)->live = 1;
    return CUBLAS_STATUS_SUCCESS;
}

SN_EXPORT cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
    if (!h || !h->live)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    h->live = 0;
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

SN_EXPORT cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *out,
                                                  cublasComputeType_t compute,
                                                  cudaDataType_t scale)
{
    desc *d;
    if (!out)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!(*out = calloc(1, sizeof **out)))
        return CUBLAS_STATUS_ALLOC_FAILED;
    d = (desc *)*out;
    d->compute = compute;
    d->scale = scale;
    d->transa = d->transb = CUBLAS_OP_N;
    d->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    return CUBLAS_STATUS_SUCCESS;
}

SN_EXPORT cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d)
{
    free(d);
    return CUBLAS_STATUS_SUCCESS;
}

/* Copy an attribute's value of `size` bytes, which must be its type's. */
static cublasStatus_t set(void *field, size_t size, const void *buf,
                          size_t given)
{
    if (!buf || given != size)
        return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(field, buf, size);
    return CUBLAS_STATUS_SUCCESS;
}

SN_EXPORT cublasStatus_t cublasLtMatmulDescSetAttribute(
    cublasLtMatmulDesc_t md, cublasLtMatmulDescAttributes_t attr,
    const void *buf, size_t size)
{
    desc *d = (desc *)md;
    if (!d)
        return CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
        return set(&d->transa, sizeof d->transa, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSB:
        return set(&d->transb, sizeof d->transb, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
        return set(&d->epilogue, sizeof d->epilogue, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
        return set(&d->bias, sizeof d->bias, buf, size);
    default: /* what the backend does not set */
        return CUBLAS_STATUS_INVALID_VALUE;
    }
}

SN_EXPORT cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *out,
                                                    cudaDataType type,
                                                    uint64_t rows,
                                                    uint64_t cols, int64_t ld)
{
    layout *l;
    if (!out)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!(*out = calloc(1, sizeof **out)))
        return CUBLAS_STATUS_ALLOC_FAILED;
    l = (layout *)*out;
    *l = (layout){type, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}

SN_EXPORT cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l)
{
    free(l);
    return CUBLAS_STATUS_SUCCESS;
}

SN_EXPORT cublasStatus_t cublasLtMatmulPreferenceCreate(
    cublasLtMatmulPreference_t *out)
{
    pref *p;
    if (!out)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!(*out = calloc(1, sizeof **out)))
        return CUBLAS_STATUS_ALLOC_FAILED;
    p = (pref *)*out;
    for (int i = 0; i < 4; i++)
        p->align[i] = 256;
    return CUBLAS_STATUS_SUCCESS;
}

SN_EXPORT cublasStatus_t cublasLtMatmulPreferenceDestroy(
    cublasLtMatmulPreference_t p)
{
    free(p);
    return CUBLAS_STATUS_SUCCESS;
}

SN_EXPORT cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t mp, cublasLtMatmulPreferenceAttributes_t attr,
    const void *buf, size_t size)
{
    pref *p = (pref *)mp;
    if (!p)
        return CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
        return set(&p->workspace, sizeof p->workspace, buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
        return set(&p->align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES],
                   sizeof p->align[0], buf, size);
    default:
        return CUBLAS_STATUS_INVALID_VALUE;
    }
}

/* --- the product ------------------------------------------------------- */

/* The largest power of two up to 256 that divides p's address. */
static uint32_t alignment(const void *p)
{
    uint32_t a = 256;
    while (a > 1 && (uintptr_t)p % a)
        a /= 2;
    return a;
}

/* op(X)'s rows and columns. */
static void op_dims(const layout *l, int32_t trans, uint64_t *rows,
                    uint64_t *cols)
{
    *rows = trans == CUBLAS_OP_N ? l->rows : l->cols;
    *cols = trans == CUBLAS_OP_N ? l->cols : l->rows;
}

/* What the fake supports, as a status: float everywhere, N or T, D's
 * shape op(A) op(B)'s, leading dimensions at least the rows, C's layout
 * D's. */
static cublasStatus_t check(const desc *d, const layout *a, const layout *b,
                            const layout *c, const layout *dl)
{
    uint64_t ar, ac, br, bc;
    const layout *ls[] = {a, b, c, dl};
    if (!d || !a || !b || !c || !dl)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (d->compute != CUBLAS_COMPUTE_32F || d->scale != CUDA_R_32F ||
        (d->epilogue != CUBLASLT_EPILOGUE_DEFAULT &&
         d->epilogue != CUBLASLT_EPILOGUE_BIAS))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if ((d->transa != CUBLAS_OP_N && d->transa != CUBLAS_OP_T) ||
        (d->transb != CUBLAS_OP_N && d->transb != CUBLAS_OP_T))
        return CUBLAS_STATUS_INVALID_VALUE;
    for (int i = 0; i < 4; i++) {
        if (ls[i]->type != CUDA_R_32F)
            return CUBLAS_STATUS_NOT_SUPPORTED;
        if (ls[i]->ld < 1 || (uint64_t)ls[i]->ld < ls[i]->rows)
            return CUBLAS_STATUS_INVALID_VALUE;
    }
    op_dims(a, d->transa, &ar, &ac);
    op_dims(b, d->transb, &br, &bc);
    if (ac != br || ar != dl->rows || bc != dl->cols ||
        c->rows != dl->rows || c->cols != dl->cols)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (d->epilogue == CUBLASLT_EPILOGUE_BIAS && !d->bias)
        return CUBLAS_STATUS_INVALID_VALUE;
    return CUBLAS_STATUS_SUCCESS;
}

SN_EXPORT cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t h, cublasLtMatmulDesc_t md, cublasLtMatrixLayout_t a,
    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
    cublasLtMatrixLayout_t dl, cublasLtMatmulPreference_t mp, int requested,
    cublasLtMatmulHeuristicResult_t results[], int *count)
{
    const desc *d = (const desc *)md;
    const pref *p = (const pref *)mp;
    cublasStatus_t s;
    algo al = {ALGO_MAGIC, {0}};
    if (!h || !h->live)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (requested <= 0 || !results || !count || !p)
        return CUBLAS_STATUS_INVALID_VALUE;
    *count = 0;
    s = check(d, (const layout *)a, (const layout *)b, (const layout *)c,
              (const layout *)dl);
    if (s != CUBLAS_STATUS_SUCCESS)
        return s;
    memcpy(al.align, p->align, sizeof p->align);
    al.align[4] = d->epilogue == CUBLASLT_EPILOGUE_BIAS ? alignment(d->bias)
                                                        : 1;
    memset(&results[0], 0, sizeof results[0]);
    memcpy(&results[0].algo, &al, sizeof al);
    results[0].workspaceSize = 0;
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *count = 1;
    return CUBLAS_STATUS_SUCCESS;
}

typedef struct job {
    int ta, tb;
    uint64_t m, n, k;
    int64_t lda, ldb, ldc, ldd;
    float alpha, beta;
    const float *a, *b, *c, *bias;
    float *d;
} job;

static void run_matmul(void *arg)
{
    job *j = arg;
    const float *a = sn_fake_cuda_host_address(j->a);
    const float *b = sn_fake_cuda_host_address(j->b);
    const float *c = sn_fake_cuda_host_address(j->c);
    const float *bias = j->bias ? sn_fake_cuda_host_address(j->bias) : NULL;
    float *d = sn_fake_cuda_host_address(j->d);
    for (uint64_t col = 0; col < j->n; col++)
        for (uint64_t row = 0; row < j->m; row++) {
            float acc = 0.0f, v;
            for (uint64_t p = 0; p < j->k; p++) {
                float x = j->ta ? a[p + row * j->lda] : a[row + p * j->lda];
                float y = j->tb ? b[col + p * j->ldb] : b[p + col * j->ldb];
                acc += x * y;
            }
            v = j->alpha * acc;
            if (j->beta != 0.0f) /* beta 0: C is not read */
                v += j->beta * c[row + col * j->ldc];
            if (bias)
                v += bias[row];
            d[row + col * j->ldd] = v;
        }
    free(j);
}

SN_EXPORT cublasStatus_t cublasLtMatmul(
    cublasLtHandle_t h, cublasLtMatmulDesc_t md, const void *alpha,
    const void *a, cublasLtMatrixLayout_t al, const void *b,
    cublasLtMatrixLayout_t bl, const void *beta, const void *c,
    cublasLtMatrixLayout_t cl, void *dp, cublasLtMatrixLayout_t dl,
    const cublasLtMatmulAlgo_t *chosen, void *workspace, size_t wsize,
    cudaStream_t stream)
{
    const desc *d = (const desc *)md;
    const layout *la = (const layout *)al, *lb = (const layout *)bl,
                 *lc = (const layout *)cl, *ld = (const layout *)dl;
    const void *ptrs[5] = {a, b, c, dp, NULL};
    algo g;
    cublasStatus_t s;
    job *j;
    (void)workspace;
    if (!h || !h->live)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!alpha || !beta || !chosen)
        return CUBLAS_STATUS_INVALID_VALUE;
    if ((s = check(d, la, lb, lc, ld)) != CUBLAS_STATUS_SUCCESS)
        return s;
    memcpy(&g, chosen, sizeof g);
    if (g.magic != ALGO_MAGIC)
        fatal("cublasLtMatmul with an algorithm not from the heuristic");
    if (wsize != 0)
        return CUBLAS_STATUS_INVALID_VALUE; /* the fake's algos need none */
    if (c == dp && memcmp(lc, ld, sizeof *lc) != 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    ptrs[4] = d->epilogue == CUBLASLT_EPILOGUE_BIAS ? d->bias : NULL;
    if (ptrs[4] && g.align[4] < 16)
        g.align[4] = 16;
    for (int i = 0; i < 5; i++)
        if (ptrs[i] && alignment(ptrs[i]) < g.align[i]) {
            char what[200];
            snprintf(what, sizeof what,
                     "cublasLtMatmul: %s at %p is aligned to %u bytes, the "
                     "algorithm to %u (%s)",
                     (const char *[]){"A", "B", "C", "D", "the bias"}[i],
                     ptrs[i], alignment(ptrs[i]), g.align[i],
                     i < 4 ? "set the heuristic's preferences"
                           : "a bias needs 16 bytes at least");
            fatal(what);
        }
    if (sn_fake_cuda_fails("cublasLtMatmul"))
        return CUBLAS_STATUS_EXECUTION_FAILED;
    if (ld->rows == 0 || ld->cols == 0)
        return CUBLAS_STATUS_SUCCESS;
    if (!(j = malloc(sizeof *j)))
        return CUBLAS_STATUS_ALLOC_FAILED;
    *j = (job){d->transa == CUBLAS_OP_T,
               d->transb == CUBLAS_OP_T,
               ld->rows,
               ld->cols,
               d->transa == CUBLAS_OP_N ? la->cols : la->rows,
               la->ld,
               lb->ld,
               lc->ld,
               ld->ld,
               *(const float *)alpha,
               *(const float *)beta,
               a,
               b,
               c,
               ptrs[4],
               dp};
    if (sn_fake_cuda_enqueue(stream, run_matmul, j) != 0) {
        free(j);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    return CUBLAS_STATUS_SUCCESS;
}
