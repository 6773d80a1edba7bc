/*
 * A GEMM whose epilogue is a bias alone, through cuBLASLt: its BIAS
 * epilogue adds the bias as the product is stored, which saves our
 * epilogue kernel's pass over C (gemm.c).
 *
 * Only where cuBLASLt's answer is the one our kernel gives:
 *   - a bias per column of C (a Gemm's or MatMul's, n floats added to
 *     every row): read column-major, as cuBLAS reads C, that is a bias per
 *     row of D, which is what the BIAS epilogue adds.  A bias per row of C
 *     (a convolution's, per channel) has no epilogue of cuBLASLt's.
 *   - no activation: cuBLASLt's ReLU is max(x, 0), which turns a NaN into
 *     0 where ours passes it on (backend.h, sn_act); it has no ReLU6.
 *   - no residual, beta 0 and one product (no batch): the order in which
 *     cuBLASLt adds C and the bias is not documented, nor is a bias
 *     shared by a batch's items other than through a stride of 0.
 * There the bias is added to the product rounded to float, as our kernel
 * adds it; the product itself is cuBLAS's as much as cublasSgemm's is
 * (float compute, CUBLAS_COMPUTE_32F, no TF32).
 *
 * Each device keeps, for each shape and alignment it has met (a model has
 * a few), the descriptors and the algorithm cuBLASLt's heuristic chose:
 * the heuristic costs more than a small product.  The heuristic is told
 * how well each pointer is aligned (its preferences default to 256 bytes,
 * and an algorithm chosen for them may fault on a view at an odd offset)
 * and the bias pointer's value, from which it reads the bias's alignment;
 * a bias aligned less than 16 bytes is not given to cuBLASLt at all
 * (LT_BIAS_ALIGN).  No workspace is offered.  A shape cuBLASLt has no algorithm for, or says
 * it does not support, goes the cuBLAS way from then on; SHARDNET_CUDA_LT=0
 * sends every shape that way (blas.c).
 */
#include <config.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"

#define LT_PLANS 32 /* shapes kept per device */
/* A bias aligned less than this goes the cuBLAS way: others report
 * misaligned-address faults in the bias epilogue below 16 bytes (on
 * A100), though the heuristic is documented to read the bias pointer's
 * alignment. */
#define LT_BIAS_ALIGN 16

/* A product as the heuristic sees it; compared with memcmp, so made with
 * its padding zeroed. */
typedef struct lt_key {
    int ta, tb;
    size_t m, n, k, lda, ldb, ldc;
    uint32_t align[4]; /* bytes: A's, B's, C's, the bias's */
} lt_key;

typedef struct lt_plan {
    lt_key key;
    int usable; /* 0: this shape goes the cuBLAS way */
    cublasLtMatmulDesc_t op;
    /* cuBLASLt's A, B and D (C too, in place), column-major: our B, our
     * A, our C (gemm.c says why they swap). */
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
} lt_plan;

struct sn_cuda_lt {
    cublasLtHandle_t handle; /* NULL: cuBLASLt unusable on this device */
    lt_plan plans[LT_PLANS];
    size_t count, next; /* plans made; the one to replace when full */
};

/* The largest power of two up to 256 that divides p's address. */
static uint32_t alignment(const void *p)
{
    uint32_t a = 256;
    while (a > 1 && (uintptr_t)p % a)
        a /= 2;
    return a;
}

/* Whether cuBLASLt can give d's answer (the comment at the top). */
static int served(const sn_gemm_desc *d)
{
    return d->batch == 1 && d->beta == 0.0f && d->bias.buf &&
           !d->bias_rows && !d->res.buf && d->act == SN_ACT_NONE &&
           alignment(cuda_ptr(d->bias)) >= LT_BIAS_ALIGN;
}

static void plan_release(lt_plan *p)
{
    if (p->op)
        sn_cublaslt.desc_destroy(p->op);
    if (p->la)
        sn_cublaslt.layout_destroy(p->la);
    if (p->lb)
        sn_cublaslt.layout_destroy(p->lb);
    if (p->ld)
        sn_cublaslt.layout_destroy(p->ld);
    memset(p, 0, sizeof *p);
}

/* The heuristic's preferences: no workspace, the pointers' alignments. */
static cublasStatus_t preferences(cublasLtMatmulPreference_t pref,
                                  const lt_key *k)
{
    const cublasLtMatmulPreferenceAttributes_t at[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    /* cuBLASLt's A is our B, its B our A, its C and D our C. */
    const uint32_t align[] = {k->align[1], k->align[0], k->align[2],
                              k->align[2]};
    uint64_t workspace = 0;
    cublasStatus_t s = sn_cublaslt.pref_set(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
        sizeof workspace);
    for (size_t i = 0; i < 4 && s == CUBLAS_STATUS_SUCCESS; i++)
        s = sn_cublaslt.pref_set(pref, at[i], &align[i], sizeof align[i]);
    return s;
}

/* Describe p's product to cuBLASLt and ask its heuristic for an
 * algorithm; p->usable says whether one came.  A failure is a status of
 * cuBLAS's for the log, p left unusable. */
static cublasStatus_t plan_make(cublasLtHandle_t h, lt_plan *p,
                                const float *bias, const char **call)
{
    const lt_key *k = &p->key;
    const int32_t ta = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N; /* our B */
    const int32_t tb = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N; /* our A */
    const uint32_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    cublasStatus_t s;

    /* Stored matrices, column-major: our B is op(A) = n x k, our A is
     * op(B) = k x m, our C is D = n x m. */
    *call = "cublasLtMatmulDescCreate";
    s = sn_cublaslt.desc_create(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (s == CUBLAS_STATUS_SUCCESS) {
        *call = "cublasLtMatmulDescSetAttribute";
        s = sn_cublaslt.desc_set(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta,
                                 sizeof ta);
    }
    if (s == CUBLAS_STATUS_SUCCESS)
        s = sn_cublaslt.desc_set(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb,
                                 sizeof tb);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = sn_cublaslt.desc_set(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                 &epilogue, sizeof epilogue);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = sn_cublaslt.desc_set(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                 &bias, sizeof bias);
    if (s == CUBLAS_STATUS_SUCCESS) {
        *call = "cublasLtMatrixLayoutCreate";
        s = sn_cublaslt.layout_create(&p->la, CUDA_R_32F, k->tb ? k->k : k->n,
                                      k->tb ? k->n : k->k,
                                      (int64_t)k->ldb);
    }
    if (s == CUBLAS_STATUS_SUCCESS)
        s = sn_cublaslt.layout_create(&p->lb, CUDA_R_32F, k->ta ? k->m : k->k,
                                      k->ta ? k->k : k->m,
                                      (int64_t)k->lda);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = sn_cublaslt.layout_create(&p->ld, CUDA_R_32F, k->n, k->m,
                                      (int64_t)k->ldc);
    if (s == CUBLAS_STATUS_SUCCESS) {
        *call = "cublasLtMatmulPreferenceCreate";
        s = sn_cublaslt.pref_create(&pref);
    }
    if (s == CUBLAS_STATUS_SUCCESS) {
        *call = "cublasLtMatmulPreferenceSetAttribute";
        s = preferences(pref, k);
    }
    if (s == CUBLAS_STATUS_SUCCESS) {
        *call = "cublasLtMatmulAlgoGetHeuristic";
        s = sn_cublaslt.heuristic(h, p->op, p->la, p->lb, p->ld, p->ld, pref,
                                  1, &result, &found);
    }
    if (pref)
        sn_cublaslt.pref_destroy(pref);
    if (s == CUBLAS_STATUS_SUCCESS && found >= 1 &&
        result.state == CUBLAS_STATUS_SUCCESS && result.workspaceSize == 0) {
        p->algo = result.algo;
        p->usable = 1;
    }
    return s;
}

/* The plan for d (its key made from d), found or made. */
static lt_plan *plan_for(sn_device *dev, struct sn_cuda_lt *lt,
                         const sn_gemm_desc *d)
{
    lt_key key;
    lt_plan *p;
    const char *call = "";
    cublasStatus_t s;

    memset(&key, 0, sizeof key);
    key.ta = d->trans_a != 0;
    key.tb = d->trans_b != 0;
    key.m = d->m;
    key.n = d->n;
    key.k = d->k;
    key.lda = d->lda;
    key.ldb = d->ldb;
    key.ldc = d->ldc;
    key.align[0] = alignment(cuda_ptr(d->a));
    key.align[1] = alignment(cuda_ptr(d->b));
    key.align[2] = alignment(cuda_ptr(d->c));
    key.align[3] = alignment(cuda_ptr(d->bias));
    for (size_t i = 0; i < lt->count; i++)
        if (memcmp(&lt->plans[i].key, &key, sizeof key) == 0)
            return &lt->plans[i];
    if (lt->count < LT_PLANS) {
        p = &lt->plans[lt->count++];
    } else {
        p = &lt->plans[lt->next];
        lt->next = (lt->next + 1) % LT_PLANS;
        plan_release(p);
    }
    p->key = key;
    s = plan_make(lt->handle, p, cuda_ptr(d->bias), &call);
    if (!p->usable)
        sn_log(SHARDNET_LOG_INFO,
               "%s: a GEMM (m %zu, n %zu, k %zu) with its bias goes the "
               "cuBLAS way: %s",
               dev->info.name, d->m, d->n, d->k,
               s == CUBLAS_STATUS_SUCCESS ? "cuBLASLt's heuristic has no "
                                            "algorithm for it without a "
                                            "workspace"
                                          : call);
    if (s != CUBLAS_STATUS_SUCCESS && s != CUBLAS_STATUS_NOT_SUPPORTED)
        sn_log(SHARDNET_LOG_WARN, "%s: %s failed: %s", dev->info.name, call,
               sn_cublas.status_name(s));
    return p;
}

/* The device's cuBLASLt state, made at its first use; NULL where
 * cuBLASLt is not to be used. */
static struct sn_cuda_lt *lt_of(sn_device *dev)
{
    cuda_dev *cd = dev->impl;
    cublasStatus_t s;
    if (cd->lt)
        return cd->lt->handle ? cd->lt : NULL;
    if (!sn_cublaslt_load() || !(cd->lt = calloc(1, sizeof *cd->lt)))
        return NULL;
    s = sn_cublaslt.create(&cd->lt->handle);
    if (s != CUBLAS_STATUS_SUCCESS) {
        cd->lt->handle = NULL; /* stays unused on this device */
        sn_log(SHARDNET_LOG_WARN,
               "%s: cublasLtCreate failed: %s; a GEMM's bias is added by a "
               "kernel of our own",
               dev->info.name, sn_cublas.status_name(s));
        return NULL;
    }
    return cd->lt;
}

shardnet_status sn_cuda_lt_gemm(sn_device *dev, const sn_gemm_desc *d,
                                int *done)
{
    cuda_dev *cd = dev->impl;
    struct sn_cuda_lt *lt;
    lt_plan *p;
    const float *bias;
    const float beta = 0.0f;
    float *c;
    cublasStatus_t s;

    *done = 0;
    if (!served(d) || !(lt = lt_of(dev)) || !(p = plan_for(dev, lt, d))->usable)
        return SHARDNET_OK;
    bias = cuda_ptr(d->bias);
    c = cuda_ptr(d->c);
    s = sn_cublaslt.desc_set(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                             sizeof bias);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = sn_cublaslt.matmul(lt->handle, p->op, &d->alpha, cuda_ptr(d->b),
                               p->la, cuda_ptr(d->a), p->lb, &beta, c, p->ld,
                               c, p->ld, &p->algo, NULL, 0, cd->stream);
    if (s == CUBLAS_STATUS_NOT_SUPPORTED) {
        p->usable = 0;
        sn_log(SHARDNET_LOG_INFO,
               "%s: cublasLtMatmul does not support a GEMM (m %zu, n %zu, "
               "k %zu) with its bias: it goes the cuBLAS way",
               dev->info.name, d->m, d->n, d->k);
        return SHARDNET_OK;
    }
    if (s != CUBLAS_STATUS_SUCCESS)
        return sn_cublas_error(dev, s,
                               "cublasLtMatmul (m %zu, n %zu, k %zu, bias "
                               "epilogue)",
                               d->m, d->n, d->k);
    *done = 1;
    return SHARDNET_OK;
}

void sn_cuda_lt_free(cuda_dev *cd)
{
    struct sn_cuda_lt *lt = cd->lt;
    if (!lt)
        return;
    for (size_t i = 0; i < lt->count; i++)
        plan_release(&lt->plans[i]);
    if (lt->handle)
        sn_cublaslt.destroy(lt->handle);
    free(lt);
    cd->lt = NULL;
}
