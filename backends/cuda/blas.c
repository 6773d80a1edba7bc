/*
 * cuBLAS and cuBLASLt, loaded when the first CUDA device is opened rather
 * than linked.
 *
 * Loading libcublas (and libcublasLt, which it pulls in) costs every
 * process about 0.4 s and 200 MB of resident memory at start, GPU or not:
 * linked, it would slow every run and test on a machine without a GPU and
 * break the peak-memory checks (tests/test_memory.sh).  The runtime
 * (libcudart) is light and stays linked.  Each library is looked for in
 * the toolkit configure found, then by its name (the run path, then the
 * loader's usual places); the functions are the few this backend calls,
 * typed from cublas_v2.h and cublasLt.h.  cuBLAS is needed; cuBLASLt is
 * not (lt.c: without it, a bias is added by our own kernel).
 */
#include <config.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"

#define SN_STR_(x) #x
#define SN_STR(x) SN_STR_(x)
#define CUBLAS_SONAME "libcublas.so." SN_STR(CUBLAS_VER_MAJOR)
#define CUBLASLT_SONAME "libcublasLt.so." SN_STR(CUBLAS_VER_MAJOR)

sn_cublas_fns sn_cublas;
sn_cublaslt_fns sn_cublaslt;

/* One library: where its loading stopped, "" once loaded. */
typedef struct library {
    const char *soname;
    void *lib;
    char failure[512];
} library;

static pthread_once_t once = PTHREAD_ONCE_INIT, once_lt = PTHREAD_ONCE_INIT;
static library cublas_lib = {CUBLAS_SONAME, NULL, ""};
static library cublaslt_lib = {CUBLASLT_SONAME, NULL, ""};

static int open_library(library *l)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", SN_CUDA_LIBDIR, l->soname);
    l->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!l->lib)
        l->lib = dlopen(l->soname, RTLD_NOW | RTLD_LOCAL);
    if (!l->lib) {
        const char *e = dlerror();
        snprintf(l->failure, sizeof l->failure, "dlopen %s: %s", l->soname,
                 e ? e : "not found");
    }
    return l->lib != NULL;
}

static void *need(library *l, const char *name)
{
    void *f = dlsym(l->lib, name);
    if (!f && !l->failure[0])
        snprintf(l->failure, sizeof l->failure, "%s has no %s", l->soname,
                 name);
    return f;
}

/* Each pointer takes its type from the header's declaration (the names
 * in dlsym are the exported ones, which cublas_v2.h's macros map
 * cublasCreate, cublasSgemm... to).  A library without one of them stays
 * loaded but unused: the process may not open it twice, and it is small
 * beside what failed. */
#define NEED(l, fns, member, name) \
    ((fns).member = (__typeof__((fns).member))need(l, name))

static void load(void)
{
    library *l = &cublas_lib;
    if (!open_library(l))
        return;
    NEED(l, sn_cublas, create, "cublasCreate_v2");
    NEED(l, sn_cublas, destroy, "cublasDestroy_v2");
    NEED(l, sn_cublas, set_stream, "cublasSetStream_v2");
    NEED(l, sn_cublas, sgemm, "cublasSgemm_v2");
    NEED(l, sn_cublas, sgemm_strided_batched, "cublasSgemmStridedBatched");
    NEED(l, sn_cublas, status_name, "cublasGetStatusName");
    NEED(l, sn_cublas, status_string, "cublasGetStatusString");
}

static void load_lt_functions(library *l)
{
    NEED(l, sn_cublaslt, create, "cublasLtCreate");
    NEED(l, sn_cublaslt, destroy, "cublasLtDestroy");
    NEED(l, sn_cublaslt, desc_create, "cublasLtMatmulDescCreate");
    NEED(l, sn_cublaslt, desc_destroy, "cublasLtMatmulDescDestroy");
    NEED(l, sn_cublaslt, desc_set, "cublasLtMatmulDescSetAttribute");
    NEED(l, sn_cublaslt, layout_create, "cublasLtMatrixLayoutCreate");
    NEED(l, sn_cublaslt, layout_destroy, "cublasLtMatrixLayoutDestroy");
    NEED(l, sn_cublaslt, pref_create, "cublasLtMatmulPreferenceCreate");
    NEED(l, sn_cublaslt, pref_destroy, "cublasLtMatmulPreferenceDestroy");
    NEED(l, sn_cublaslt, pref_set, "cublasLtMatmulPreferenceSetAttribute");
    NEED(l, sn_cublaslt, heuristic, "cublasLtMatmulAlgoGetHeuristic");
    NEED(l, sn_cublaslt, matmul, "cublasLtMatmul");
}

static void load_lt(void)
{
    library *l = &cublaslt_lib;
    const char *off = getenv("SHARDNET_CUDA_LT");
    if (off && strcmp(off, "0") == 0)
        snprintf(l->failure, sizeof l->failure, "SHARDNET_CUDA_LT=0");
    else if (open_library(l))
        load_lt_functions(l);
    if (l->failure[0])
        sn_log(SHARDNET_LOG_INFO,
               "cuBLASLt left unused (%s): a GEMM's bias is added by a "
               "kernel of our own",
               l->failure);
    else
        sn_log(SHARDNET_LOG_INFO, "cuBLASLt loaded: a GEMM's bias alone is "
                                  "added by its epilogue");
}

shardnet_status sn_cublas_load(const sn_device *dev)
{
    pthread_once(&once, load);
    if (cublas_lib.failure[0])
        return sn_error(SHARDNET_DEVICE_ERROR, "%s: cuBLAS unavailable: %s",
                        dev->info.name, cublas_lib.failure);
    return SHARDNET_OK;
}

int sn_cublaslt_load(void)
{
    pthread_once(&once_lt, load_lt);
    return cublaslt_lib.failure[0] == '\0';
}
