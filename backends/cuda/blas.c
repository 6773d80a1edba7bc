/*
 * cuBLAS, loaded when the first CUDA device is opened rather than linked.
 *
 * Loading libcublas (and libcublasLt, which it pulls in) costs every
 * process about 0.4 s and 200 MB of resident memory at start, GPU or not:
 * linked, it would slow every run and test on a machine without a GPU and
 * break the peak-memory checks (tests/test_memory.sh).  The runtime
 * (libcudart) is light and stays linked.  The library is looked for in
 * the toolkit configure found, then by its name (the run path, then the
 * loader's usual places); the functions are the few this backend calls,
 * typed from cublas_v2.h.
 */
#include <config.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "cuda.h"

#define SN_STR_(x) #x
#define SN_STR(x) SN_STR_(x)
#define CUBLAS_SONAME "libcublas.so." SN_STR(CUBLAS_VER_MAJOR)

sn_cublas_fns sn_cublas;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[512]; /* why loading failed; "" once loaded */

static void *need(void *lib, const char *name)
{
    void *f = dlsym(lib, name);
    if (!f && !failure[0])
        snprintf(failure, sizeof failure, "%s has no %s", CUBLAS_SONAME,
                 name);
    return f;
}

static void load(void)
{
    void *lib = dlopen(SN_CUDA_LIBDIR "/" CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        lib = dlopen(CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(failure, sizeof failure, "dlopen %s: %s", CUBLAS_SONAME,
                 e ? e : "not found");
        return;
    }
    /* Each pointer takes its type from the header's declaration (the
     * names in dlsym are the exported ones that cublas_v2.h's macros map
     * cublasCreate, cublasSgemm... to). */
    sn_cublas.create = (__typeof__(sn_cublas.create))need(lib, "cublasCreate_v2");
    sn_cublas.destroy = (__typeof__(sn_cublas.destroy))need(lib, "cublasDestroy_v2");
    sn_cublas.set_stream = (__typeof__(sn_cublas.set_stream))need(lib, "cublasSetStream_v2");
    sn_cublas.sgemm = (__typeof__(sn_cublas.sgemm))need(lib, "cublasSgemm_v2");
    sn_cublas.sgemm_strided_batched =
        (__typeof__(sn_cublas.sgemm_strided_batched))need(
            lib, "cublasSgemmStridedBatched");
    sn_cublas.status_name = (__typeof__(sn_cublas.status_name))need(lib, "cublasGetStatusName");
    sn_cublas.status_string = (__typeof__(sn_cublas.status_string))need(lib, "cublasGetStatusString");
    /* A library without one of them stays loaded but unused: the process
     * may not open it twice, and it is small beside what failed. */
}

shardnet_status sn_cublas_load(const sn_device *dev)
{
    pthread_once(&once, load);
    if (failure[0])
        return sn_error(SHARDNET_DEVICE_ERROR, "%s: cuBLAS unavailable: %s",
                        dev->info.name, failure);
    return SHARDNET_OK;
}
