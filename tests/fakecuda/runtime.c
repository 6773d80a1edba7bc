/*
 * A fake CUDA runtime (libcudart.so.13) for testing the CUDA backend's
 * host code on a machine without a GPU: the calls backends/cuda/ makes,
 * with the semantics the CUDA documentation gives them, run on host
 * memory; tools/cuda-fake.sh builds a toolkit of it, the fake cuBLAS
 * and cuBLASLt (cublas.c, cublaslt.c) and a fake nvcc (nvcc.in) that
 * compiles the kernel files as host C++ (cu.h, SN_CUDA_FAKE), and runs
 * the test suites against it.
 *
 * It is stricter than a GPU where a GPU's timing could hide a bug:
 *
 *   - Device memory is host memory at an address with bit 62 set (a
 *     non-canonical x86-64 address): host code that reads a device
 *     pointer as host memory faults, as it would on a discrete GPU.
 *     Kernels and cuBLAS reach it through sn_fake_cuda_host_address().
 *   - Work enqueued on a stream (copies, kernels, cuBLAS calls, stream-
 *     ordered frees) runs only when something waits for it: a stream or
 *     event synchronize, a cudaFree (which waits for the device), or an
 *     event query (the first query of an unfinished event says
 *     cudaErrorNotReady, the next one runs the work).  A result read
 *     before its wait is not there yet.  The only exception is the one
 *     the documentation makes: a copy from pageable host memory takes
 *     its source at the call.
 *   - Work is enqueued only on a stream of the current device (else
 *     cudaErrorInvalidResourceHandle, as a real launch says).
 *   - Copies are checked: each device or pinned range must lie inside
 *     one allocation, and the kind must match the pointers
 *     (cudaMemcpyDefault takes them as they are).  cudaFreeHost of
 *     pinned memory that a copy still waiting on a stream uses aborts
 *     with a message: nothing may free memory a pending copy uses.
 *
 * Partitions get the driver's green contexts (through
 * cudaGetDriverEntryPointByVersion, as partition.c asks): a device's 8
 * multiprocessors, split in groups of 2.
 *
 * Environment: SN_FAKE_CUDA_DEVICES (how many devices; 1), ..._MEMORY
 * (bytes of each; 1 GiB), ..._INTEGRATED=1 (they say they are
 * integrated), ..._FAIL=CALL:N (the Nth call of CALL fails: cudaMalloc,
 * cudaHostAlloc, cudaMallocHost, cudaMallocAsync, cudaMemcpyAsync,
 * cudaStreamSynchronize, cudaEventSynchronize, cudaStreamCreateWithFlags,
 * cudaEventCreateWithFlags, launch (a kernel or cuBLAS call),
 * cublasLtMatmul (the fake cuBLASLt's, cublaslt.c)),
 * ..._CALLS=FILE (how many calls of each of those the process made,
 * written to FILE at its exit), ..._TRACE=1 (each allocation and free
 * on standard error).
 *
 * This is a test double, not an emulator of a GPU's arithmetic: kernels
 * run as the host C++ the emulation compiles (cu.h), cuBLAS as a plain
 * loop (cublas.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h> /* the driver's types, for green contexts */
#include <cuda_runtime_api.h>

#include "sn_fakecuda.h"

#define SN_EXPORT __attribute__((visibility("default")))

#define TAG ((uintptr_t)1 << 62)

static void *tagged(void *p)
{
    return (void *)((uintptr_t)p | TAG);
}

static int is_tagged(const void *p)
{
    return ((uintptr_t)p & TAG) != 0;
}

SN_EXPORT void *sn_fake_cuda_host_address(const void *p)
{
    return (void *)((uintptr_t)p & ~TAG);
}

/* --- configuration and injected failures -------------------------------- */

static int env_int(const char *name, long long dflt, long long *out)
{
    const char *v = getenv(name);
    char *end;
    long long n;
    if (!v || !*v) {
        *out = dflt;
        return 0;
    }
    errno = 0;
    n = strtoll(v, &end, 10);
    if (errno || *end || n < 0) {
        fprintf(stderr, "fake CUDA: %s=%s is not a count\n", name, v);
        abort();
    }
    *out = n;
    return 1;
}

static int device_count(void)
{
    long long n;
    env_int("SN_FAKE_CUDA_DEVICES", 1, &n);
    return n > 64 ? 64 : (int)n;
}

static size_t device_memory(void)
{
    long long n;
    env_int("SN_FAKE_CUDA_MEMORY", 1LL << 30, &n);
    return (size_t)n;
}

/* The calls that can be made to fail, each with its count of calls so
 * far. */
static const char *const failing[] = {
    "cudaMalloc", "cudaHostAlloc", "cudaMallocHost", "cudaMallocAsync",
    "cudaMemcpyAsync", "cudaStreamSynchronize", "cudaEventSynchronize",
    "cudaStreamCreateWithFlags", "cudaEventCreateWithFlags", "launch",
    "cublasLtMatmul"};
#define FAILING (sizeof failing / sizeof failing[0])
static atomic_ulong calls[FAILING];

/* The failure a program asked for (sn_fake_cuda_fail_at): the kind's
 * index and the call's number, 0 for none. */
static atomic_ulong inject_kind, inject_nth;

static size_t kind_of(const char *call)
{
    size_t i = 0;
    while (i < FAILING && strcmp(failing[i], call) != 0)
        i++;
    return i;
}

/* Count a call of `call`; whether it is the one SN_FAKE_CUDA_FAIL or
 * sn_fake_cuda_fail_at names. */
static int fails(const char *call)
{
    const char *v = getenv("SN_FAKE_CUDA_FAIL"), *colon;
    size_t i = kind_of(call);
    if (i == FAILING)
        abort(); /* a call missing from the list */
    unsigned long nth = atomic_fetch_add(&calls[i], 1) + 1;
    if (atomic_load(&inject_kind) == i && atomic_load(&inject_nth) == nth)
        return 1;
    if (!v || !(colon = strchr(v, ':')) || (size_t)(colon - v) != strlen(call) ||
        strncmp(call, v, strlen(call)) != 0)
        return 0;
    return nth == strtoul(colon + 1, NULL, 10);
}

SN_EXPORT int sn_fake_cuda_fails(const char *call)
{
    return fails(call);
}

SN_EXPORT unsigned long sn_fake_cuda_calls(const char *call)
{
    size_t i = kind_of(call);
    return i < FAILING ? atomic_load(&calls[i]) : 0;
}

SN_EXPORT void sn_fake_cuda_fail_at(const char *call, unsigned long nth)
{
    size_t i = call ? kind_of(call) : FAILING;
    atomic_store(&inject_nth, i < FAILING ? nth : 0);
    atomic_store(&inject_kind, i);
}

/* With SN_FAKE_CUDA_CALLS=FILE, how many calls of each kind the process
 * made, a line each ("cudaMalloc 12"), written to FILE at its exit: how
 * far SN_FAKE_CUDA_FAIL's N can go (tests/fakecuda/failures.sh). */
__attribute__((destructor)) static void count_calls(void)
{
    const char *path = getenv("SN_FAKE_CUDA_CALLS");
    FILE *f;
    if (!path || !*path || !(f = fopen(path, "w")))
        return;
    for (size_t i = 0; i < FAILING; i++)
        fprintf(f, "%s %lu\n", failing[i], atomic_load(&calls[i]));
    fclose(f);
}

/* --- errors --------------------------------------------------------------- */

static _Thread_local cudaError_t last_error;
static _Thread_local int current_device;
static _Thread_local struct CUctx_st *current_ctx; /* NULL: primary */

static cudaError_t fail(cudaError_t err)
{
    last_error = err;
    return err;
}

SN_EXPORT cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

static const struct {
    cudaError_t err;
    const char *name, *text;
} errors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation",
     "out of memory"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice",
     "invalid device ordinal"},
    {cudaErrorNoDevice, "cudaErrorNoDevice",
     "no CUDA-capable device is detected"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure",
     "unspecified launch failure"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle",
     "invalid resource handle"},
};

SN_EXPORT const char *cudaGetErrorName(cudaError_t err)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].err == err)
            return errors[i].name;
    return "cudaErrorUnknown";
}

SN_EXPORT const char *cudaGetErrorString(cudaError_t err)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].err == err)
            return errors[i].text;
    return "unknown error";
}

/* --- devices -------------------------------------------------------------- */

SN_EXPORT cudaError_t cudaGetDeviceCount(int *count)
{
    *count = 0;
    if (device_count() == 0)
        return fail(cudaErrorNoDevice);
    *count = device_count();
    return cudaSuccess;
}

SN_EXPORT cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop,
                                              int device)
{
    long long integrated;
    if (device < 0 || device >= device_count())
        return fail(cudaErrorInvalidDevice);
    env_int("SN_FAKE_CUDA_INTEGRATED", 0, &integrated);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "shardnet fake CUDA device %d",
             device);
    prop->major = 9;
    prop->minor = 0;
    prop->totalGlobalMem = device_memory();
    prop->multiProcessorCount = 8;
    prop->integrated = integrated != 0;
    prop->canMapHostMemory = 1;
    prop->unifiedAddressing = 1;
    return cudaSuccess;
}

SN_EXPORT cudaError_t cudaSetDevice(int device)
{
    if (device < 0 || device >= device_count())
        return fail(cudaErrorInvalidDevice);
    current_device = device;
    current_ctx = NULL; /* the device's primary context */
    return cudaSuccess;
}

SN_EXPORT cudaError_t cudaDriverGetVersion(int *v)
{
    *v = CUDART_VERSION;
    return cudaSuccess;
}

SN_EXPORT cudaError_t cudaRuntimeGetVersion(int *v)
{
    *v = CUDART_VERSION;
    return cudaSuccess;
}

/* --- the driver's green contexts (partitions) ---------------------------- */

/* A device's 8 multiprocessors split in groups of 2 at least. */
enum { SMS = 8, SM_GROUP = 2 };

struct CUctx_st {
    int device;
};

struct CUgreenCtx_st {
    struct CUctx_st ctx;
    unsigned sms;
};

struct CUdevResourceDesc_st {
    int device;
    unsigned sms;
    struct CUdevResourceDesc_st *next; /* the driver keeps them all */
};

static struct {
    pthread_mutex_t lock;
    struct CUdevResourceDesc_st *all;
} descs = {.lock = PTHREAD_MUTEX_INITIALIZER};

static CUresult drv_device_get(CUdevice *d, int ordinal)
{
    if (ordinal < 0 || ordinal >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}

static CUresult drv_get_resource(CUdevice d, CUdevResource *r,
                                 CUdevResourceType type)
{
    if (type != CU_DEV_RESOURCE_TYPE_SM || d < 0 || d >= device_count())
        return CUDA_ERROR_INVALID_VALUE;
    memset(r, 0, sizeof *r);
    r->type = type;
    r->sm.smCount = SMS;
    r->sm.minSmPartitionSize = SM_GROUP;
    r->sm.smCoscheduledAlignment = SM_GROUP;
    memcpy(r->_internal_padding, &d, sizeof d); /* whose it is */
    return CUDA_SUCCESS;
}

static CUresult drv_split(CUdevResource *out, unsigned *groups,
                          const CUdevResource *in, CUdevResource *rest,
                          unsigned flags, unsigned min_count)
{
    unsigned size = min_count < SM_GROUP ? SM_GROUP
                                         : (min_count + SM_GROUP - 1) /
                                               SM_GROUP * SM_GROUP;
    unsigned n = in->sm.smCount / size;
    if (flags || !groups)
        return CUDA_ERROR_INVALID_VALUE;
    if (out) {
        n = *groups < n ? *groups : n;
        for (unsigned i = 0; i < n; i++) {
            out[i] = *in;
            out[i].sm.smCount = size;
        }
    }
    if (rest) {
        *rest = *in;
        rest->sm.smCount = in->sm.smCount - n * size;
    }
    *groups = n;
    return CUDA_SUCCESS;
}

static CUresult drv_describe(CUdevResourceDesc *desc, CUdevResource *res,
                             unsigned n)
{
    struct CUdevResourceDesc_st *d = calloc(1, sizeof *d);
    if (!d)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(&d->device, res[0]._internal_padding, sizeof d->device);
    for (unsigned i = 0; i < n; i++)
        d->sms += res[i].sm.smCount;
    pthread_mutex_lock(&descs.lock);
    d->next = descs.all;
    descs.all = d;
    pthread_mutex_unlock(&descs.lock);
    *desc = d;
    return CUDA_SUCCESS;
}

static CUresult drv_create(CUgreenCtx *out, CUdevResourceDesc desc,
                           CUdevice d, unsigned flags)
{
    struct CUgreenCtx_st *g;
    if (flags != CU_GREEN_CTX_DEFAULT_STREAM || !desc || desc->device != d)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(g = calloc(1, sizeof *g)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    g->ctx.device = d;
    g->sms = desc->sms;
    *out = g;
    return CUDA_SUCCESS;
}

static CUresult drv_destroy(CUgreenCtx g)
{
    if (!g)
        return CUDA_ERROR_INVALID_HANDLE;
    if (current_ctx == &g->ctx)
        current_ctx = NULL;
    free(g);
    return CUDA_SUCCESS;
}

static CUresult drv_as_ctx(CUcontext *ctx, CUgreenCtx g)
{
    *ctx = &g->ctx;
    return CUDA_SUCCESS;
}

static struct CUstream_st *new_stream(int device);

static CUresult drv_stream_create(CUstream *s, CUgreenCtx g, unsigned flags,
                                  int priority)
{
    (void)priority;
    if (flags != CU_STREAM_NON_BLOCKING || !g)
        return CUDA_ERROR_INVALID_VALUE;
    return (*s = new_stream(g->ctx.device)) ? CUDA_SUCCESS
                                            : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult drv_set_current(CUcontext ctx)
{
    current_ctx = ctx;
    if (ctx)
        current_device = ctx->device;
    return CUDA_SUCCESS;
}

static CUresult drv_error_name(CUresult r, const char **name)
{
    switch (r) {
    case CUDA_SUCCESS: *name = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_INVALID_DEVICE: *name = "CUDA_ERROR_INVALID_DEVICE"; break;
    case CUDA_ERROR_INVALID_HANDLE: *name = "CUDA_ERROR_INVALID_HANDLE"; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

/* The driver functions partitions ask for, at the versions they came
 * with; no others. */
SN_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(
    const char *symbol, void **fn, unsigned int version,
    unsigned long long flags, enum cudaDriverEntryPointQueryResult *status)
{
    static const struct {
        const char *name;
        void *fn;
        unsigned since;
    } fns[] = {
        {"cuDeviceGet", (void *)drv_device_get, 2000},
        {"cuDeviceGetDevResource", (void *)drv_get_resource, 12040},
        {"cuDevSmResourceSplitByCount", (void *)drv_split, 12040},
        {"cuDevResourceGenerateDesc", (void *)drv_describe, 12040},
        {"cuGreenCtxCreate", (void *)drv_create, 12040},
        {"cuGreenCtxDestroy", (void *)drv_destroy, 12040},
        {"cuCtxFromGreenCtx", (void *)drv_as_ctx, 12040},
        {"cuGreenCtxStreamCreate", (void *)drv_stream_create, 12050},
        {"cuCtxSetCurrent", (void *)drv_set_current, 4000},
        {"cuGetErrorName", (void *)drv_error_name, 6000},
    };
    (void)flags;
    *fn = NULL;
    if (status)
        *status = cudaDriverEntryPointSymbolNotFound;
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        if (!strcmp(symbol, fns[i].name)) {
            if (version < fns[i].since) {
                if (status)
                    *status = cudaDriverEntryPointVersionNotSufficent;
                return cudaSuccess;
            }
            *fn = fns[i].fn;
            if (status)
                *status = cudaDriverEntryPointSuccess;
        }
    return cudaSuccess;
}

/* --- allocations ---------------------------------------------------------- */

enum { DEVICE_MEMORY, PINNED_MEMORY };

typedef struct alloc {
    char *lo, *hi; /* host addresses */
    int kind, device;
} alloc;

static struct {
    pthread_mutex_t lock;
    alloc *v;
    size_t n, cap;
    size_t used[64]; /* device bytes allocated, per device */
} mem = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* With SN_FAKE_CUDA_TRACE=1, each allocation and free on standard
 * error, with the device's bytes in use after it; with mem.lock. */
static void trace(const char *what, int device, size_t bytes, int kind)
{
    const char *on = getenv("SN_FAKE_CUDA_TRACE");
    if (!on || strcmp(on, "1") != 0)
        return;
    fprintf(stderr, "fake CUDA: %s %zu bytes of %s (cuda:%d: %zu in use)\n",
            what, bytes, kind == DEVICE_MEMORY ? "device memory" : "pinned memory",
            device, mem.used[device]);
}

/* The allocation holding host address p, or NULL; with mem.lock. */
static alloc *find_locked(const char *p)
{
    size_t lo = 0, hi = mem.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p < mem.v[mid].lo)
            hi = mid;
        else if (p >= mem.v[mid].hi && !(p == mem.v[mid].lo))
            lo = mid + 1;
        else
            return &mem.v[mid];
    }
    return NULL;
}

static cudaError_t add(char *p, size_t bytes, int kind, int device)
{
    size_t at = 0;
    pthread_mutex_lock(&mem.lock);
    if (kind == DEVICE_MEMORY && mem.used[device] + bytes > device_memory()) {
        trace("refused", device, bytes, kind);
        pthread_mutex_unlock(&mem.lock);
        return cudaErrorMemoryAllocation;
    }
    if (mem.n == mem.cap) {
        size_t cap = mem.cap ? 2 * mem.cap : 256;
        alloc *v = realloc(mem.v, cap * sizeof *v);
        if (!v) {
            pthread_mutex_unlock(&mem.lock);
            return cudaErrorMemoryAllocation;
        }
        mem.v = v;
        mem.cap = cap;
    }
    while (at < mem.n && mem.v[at].lo < p)
        at++;
    memmove(&mem.v[at + 1], &mem.v[at], (mem.n - at) * sizeof *mem.v);
    mem.v[at] = (alloc){p, p + bytes, kind, device};
    mem.n++;
    if (kind == DEVICE_MEMORY)
        mem.used[device] += bytes;
    trace("allocated", device, bytes, kind);
    pthread_mutex_unlock(&mem.lock);
    return cudaSuccess;
}

/* Forget the allocation starting at p, of `kind`: 0, or -1 if there is
 * none. */
static int drop(char *p, int kind)
{
    int found = -1;
    pthread_mutex_lock(&mem.lock);
    alloc *a = find_locked(p);
    if (a && a->lo == p && a->kind == kind) {
        if (kind == DEVICE_MEMORY)
            mem.used[a->device] -= (size_t)(a->hi - a->lo);
        trace("freed", a->device, (size_t)(a->hi - a->lo), kind);
        memmove(a, a + 1, (size_t)(mem.v + mem.n - (a + 1)) * sizeof *a);
        mem.n--;
        found = 0;
    }
    pthread_mutex_unlock(&mem.lock);
    return found;
}

static cudaError_t new_memory(void **out, size_t bytes, int kind)
{
    void *p = NULL;
    cudaError_t err;
    *out = NULL;
    /* More than a device has (or than any host has, for pinned memory)
     * is refused before asking the host for it.  Aligned as cudaMalloc
     * aligns, and no larger than asked (a byte for 0, so that each
     * allocation has an address of its own), so that a sanitizer sees a
     * kernel that reads past the end. */
    if (bytes > (kind == DEVICE_MEMORY ? device_memory() : (size_t)1 << 40) ||
        posix_memalign(&p, 256, bytes ? bytes : 1) != 0)
        p = NULL;
    if (!p)
        return fail(cudaErrorMemoryAllocation);
    if ((err = add(p, bytes, kind, current_device)) != cudaSuccess) {
        free(p);
        return fail(err);
    }
    *out = kind == DEVICE_MEMORY ? tagged(p) : p;
    return cudaSuccess;
}

SN_EXPORT cudaError_t cudaMalloc(void **p, size_t bytes)
{
    if (fails("cudaMalloc"))
        return fail(cudaErrorMemoryAllocation);
    return new_memory(p, bytes, DEVICE_MEMORY);
}

SN_EXPORT cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned flags)
{
    (void)flags; /* with unified addressing, all pinned memory is mapped */
    if (fails("cudaHostAlloc"))
        return fail(cudaErrorMemoryAllocation);
    return new_memory(p, bytes, PINNED_MEMORY);
}

SN_EXPORT cudaError_t cudaMallocHost(void **p, size_t bytes)
{
    if (fails("cudaMallocHost"))
        return fail(cudaErrorMemoryAllocation);
    return new_memory(p, bytes, PINNED_MEMORY);
}

SN_EXPORT cudaError_t cudaHostGetDevicePointer(void **dptr, void *host,
                                               unsigned flags)
{
    int ok;
    (void)flags;
    pthread_mutex_lock(&mem.lock);
    alloc *a = find_locked(host);
    ok = a && a->kind == PINNED_MEMORY;
    pthread_mutex_unlock(&mem.lock);
    if (!ok)
        return fail(cudaErrorInvalidValue);
    *dptr = host; /* unified addressing: the same address */
    return cudaSuccess;
}

/* What a pointer is: device memory, pinned (registered) host memory, or
 * plain host memory. */
SN_EXPORT cudaError_t cudaPointerGetAttributes(
    struct cudaPointerAttributes *attr, const void *p)
{
    char *h = sn_fake_cuda_host_address(p);
    memset(attr, 0, sizeof *attr);
    pthread_mutex_lock(&mem.lock);
    alloc *a = find_locked(h);
    if (a && (a->kind == PINNED_MEMORY) == !is_tagged(p)) {
        attr->type = a->kind == DEVICE_MEMORY ? cudaMemoryTypeDevice
                                              : cudaMemoryTypeHost;
        attr->device = a->device;
        attr->devicePointer = (void *)p;
        attr->hostPointer = a->kind == PINNED_MEMORY ? h : NULL;
    } else {
        attr->type = cudaMemoryTypeUnregistered;
    }
    pthread_mutex_unlock(&mem.lock);
    return cudaSuccess;
}

/* --- streams -------------------------------------------------------------- */

typedef struct op {
    void (*run)(void *);
    void *arg;
    const char *what;
    const char *lo, *hi; /* host memory a copy uses, for cudaFreeHost */
    struct op *next;
} op;

struct CUstream_st {
    int device;
    int destroyed;
    pthread_mutex_t lock;
    op *head, **tail;
    unsigned long long queued, done;
    struct CUstream_st *next; /* every stream ever made (never freed) */
};

static struct {
    pthread_mutex_t lock;
    struct CUstream_st *all;
    struct CUstream_st *legacy[64];
} streams = {.lock = PTHREAD_MUTEX_INITIALIZER};

static struct CUstream_st *new_stream(int device)
{
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->device = device;
    pthread_mutex_init(&s->lock, NULL);
    s->tail = &s->head;
    pthread_mutex_lock(&streams.lock);
    s->next = streams.all;
    streams.all = s;
    pthread_mutex_unlock(&streams.lock);
    return s;
}

/* The stream `s` names: NULL is the current device's default stream. */
static struct CUstream_st *stream_of(cudaStream_t s)
{
    struct CUstream_st *st;
    if (s)
        return s;
    pthread_mutex_lock(&streams.lock);
    st = streams.legacy[current_device];
    pthread_mutex_unlock(&streams.lock);
    if (!st) {
        st = new_stream(current_device);
        pthread_mutex_lock(&streams.lock);
        if (streams.legacy[current_device])
            st = streams.legacy[current_device]; /* the other stays listed */
        else
            streams.legacy[current_device] = st;
        pthread_mutex_unlock(&streams.lock);
    }
    return st;
}

/* Run s's work up to the `upto`th operation enqueued on it. */
static void drain(struct CUstream_st *s, unsigned long long upto)
{
    pthread_mutex_lock(&s->lock);
    while (s->done < upto && s->head) {
        op *o = s->head;
        if (!(s->head = o->next))
            s->tail = &s->head;
        o->run(o->arg);
        s->done++;
        free(o);
    }
    pthread_mutex_unlock(&s->lock);
}

static void drain_all(struct CUstream_st *s)
{
    drain(s, ~0ULL);
}

/* Wait for every stream of the device, as cudaFree does. */
static void drain_device(int device)
{
    pthread_mutex_lock(&streams.lock);
    for (struct CUstream_st *s = streams.all; s; s = s->next)
        if (s->device == device)
            drain_all(s);
    pthread_mutex_unlock(&streams.lock);
}

static cudaError_t enqueue(cudaStream_t stream, void (*run)(void *),
                           void *arg, const char *what, const char *lo,
                           const char *hi)
{
    struct CUstream_st *s = stream_of(stream);
    op *o = calloc(1, sizeof *o);
    if (!s || !o) {
        free(o);
        return fail(cudaErrorMemoryAllocation);
    }
    /* A stream takes work from its own device's context only: work
     * enqueued with another device current is a missing cudaSetDevice. */
    if (s->destroyed || s->device != current_device) {
        free(o);
        return fail(cudaErrorInvalidResourceHandle);
    }
    *o = (op){run, arg, what, lo, hi, NULL};
    pthread_mutex_lock(&s->lock);
    *s->tail = o;
    s->tail = &o->next;
    s->queued++;
    pthread_mutex_unlock(&s->lock);
    return cudaSuccess;
}

SN_EXPORT int sn_fake_cuda_enqueue(void *stream, void (*run)(void *),
                                   void *arg)
{
    if (fails("launch"))
        return fail(cudaErrorLaunchFailure);
    return enqueue((cudaStream_t)stream, run, arg, "a kernel", NULL, NULL);
}

SN_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out,
                                                unsigned flags)
{
    (void)flags;
    *out = NULL;
    if (fails("cudaStreamCreateWithFlags") ||
        !(*out = new_stream(current_device)))
        return fail(cudaErrorMemoryAllocation);
    return cudaSuccess;
}

SN_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    struct CUstream_st *s = stream_of(stream);
    if (!s)
        return fail(cudaErrorMemoryAllocation);
    drain_all(s);
    if (fails("cudaStreamSynchronize"))
        return fail(cudaErrorLaunchFailure);
    return cudaSuccess;
}

/* The stream's work runs (the runtime lets it finish); the stream itself
 * stays listed, so that events recorded on it remain valid. */
SN_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    if (!stream || stream->destroyed)
        return fail(cudaErrorInvalidResourceHandle);
    drain_all(stream);
    stream->destroyed = 1;
    return cudaSuccess;
}

/* --- copies --------------------------------------------------------------- */

typedef struct copy_job {
    void *dst;
    const void *src;
    size_t bytes;
    void *snapshot; /* the pageable source's bytes, freed after */
} copy_job;

static void run_copy(void *arg)
{
    copy_job *j = arg;
    memcpy(j->dst, j->src, j->bytes);
    free(j->snapshot);
    free(j);
}

enum { PAGEABLE, PINNED, ON_DEVICE };

/* Where [p, p + bytes) is, and its host address in *host; -1 for a device
 * or pinned range that does not lie inside one allocation. */
static int place(const void *p, size_t bytes, char **host)
{
    int where;
    char *h = sn_fake_cuda_host_address(p);
    pthread_mutex_lock(&mem.lock);
    alloc *a = find_locked(h);
    if (is_tagged(p))
        where = a && a->kind == DEVICE_MEMORY && bytes <= (size_t)(a->hi - h)
                    ? ON_DEVICE
                    : -1;
    else if (a && a->kind == PINNED_MEMORY)
        where = bytes <= (size_t)(a->hi - h) ? PINNED : -1;
    else
        where = PAGEABLE;
    pthread_mutex_unlock(&mem.lock);
    *host = h;
    return where;
}

SN_EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src,
                                      size_t bytes, enum cudaMemcpyKind kind,
                                      cudaStream_t stream)
{
    char *d, *s;
    int to = place(dst, bytes, &d), from = place(src, bytes, &s);
    copy_job *j;
    cudaError_t err;

    if (fails("cudaMemcpyAsync"))
        return fail(cudaErrorLaunchFailure);
    if (to < 0 || from < 0)
        return fail(cudaErrorInvalidValue);
    switch (kind) {
    case cudaMemcpyHostToDevice:
        if (to != ON_DEVICE || from == ON_DEVICE)
            return fail(cudaErrorInvalidValue);
        break;
    case cudaMemcpyDeviceToHost:
        if (to == ON_DEVICE || from != ON_DEVICE)
            return fail(cudaErrorInvalidValue);
        break;
    case cudaMemcpyDeviceToDevice:
        if (to != ON_DEVICE || from != ON_DEVICE)
            return fail(cudaErrorInvalidValue);
        break;
    case cudaMemcpyDefault:
        break;
    default:
        return fail(cudaErrorInvalidValue);
    }
    if (!(j = calloc(1, sizeof *j)))
        return fail(cudaErrorMemoryAllocation);
    *j = (copy_job){d, s, bytes, NULL};
    /* Pageable memory to the device is staged at the call: the caller
     * may reuse it as soon as the call returns. */
    if (from == PAGEABLE && to == ON_DEVICE) {
        if (!(j->snapshot = malloc(bytes ? bytes : 1))) {
            free(j);
            return fail(cudaErrorMemoryAllocation);
        }
        memcpy(j->snapshot, s, bytes);
        j->src = j->snapshot;
    }
    /* The host range cudaFreeHost must not take from under the copy. */
    const char *lo = to == PINNED ? d : from == PINNED ? s : NULL;
    err = enqueue(stream, run_copy, j, "a copy", lo, lo ? lo + bytes : NULL);
    if (err != cudaSuccess) {
        free(j->snapshot);
        free(j);
    }
    return err;
}

/* --- freeing -------------------------------------------------------------- */

/* The allocation of `kind` that starts at host address h (a copy), or
 * one with lo NULL. */
static alloc starting_at(const char *h, int kind)
{
    alloc found = {0};
    pthread_mutex_lock(&mem.lock);
    const alloc *a = find_locked(h);
    if (a && a->lo == h && a->kind == kind)
        found = *a;
    pthread_mutex_unlock(&mem.lock);
    return found;
}

SN_EXPORT cudaError_t cudaFree(void *p)
{
    char *h = sn_fake_cuda_host_address(p);
    alloc a;
    if (!p)
        return cudaSuccess;
    if (!is_tagged(p) || !(a = starting_at(h, DEVICE_MEMORY)).lo)
        return fail(cudaErrorInvalidValue);
    drain_device(a.device);
    drop(h, DEVICE_MEMORY);
    free(h);
    return cudaSuccess;
}

/* Pinned memory that no pending copy uses, or abort naming the copy. */
static void check_unused(const char *lo, const char *hi)
{
    pthread_mutex_lock(&streams.lock);
    for (struct CUstream_st *s = streams.all; s; s = s->next) {
        pthread_mutex_lock(&s->lock);
        for (const op *o = s->head; o; o = o->next)
            if (o->lo && o->lo < hi && lo < o->hi) {
                fprintf(stderr,
                        "fake CUDA: cudaFreeHost(%p) while %s enqueued on "
                        "stream %p and not waited for still uses it\n",
                        (const void *)lo, o->what, (void *)s);
                abort();
            }
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_unlock(&streams.lock);
}

SN_EXPORT cudaError_t cudaFreeHost(void *p)
{
    char *lo = p, *hi;
    if (!p)
        return cudaSuccess;
    if (!(hi = starting_at(lo, PINNED_MEMORY).hi))
        return fail(cudaErrorInvalidValue);
    check_unused(lo, hi);
    drop(lo, PINNED_MEMORY);
    free(lo);
    return cudaSuccess;
}

/* --- stream-ordered memory ------------------------------------------------ */

SN_EXPORT cudaError_t cudaMallocAsync(void **p, size_t bytes,
                                      cudaStream_t stream)
{
    (void)stream; /* available at once: a later use is ordered after */
    if (fails("cudaMallocAsync"))
        return fail(cudaErrorMemoryAllocation);
    return new_memory(p, bytes, DEVICE_MEMORY);
}

static void run_free(void *arg)
{
    drop(arg, DEVICE_MEMORY);
    free(arg);
}

SN_EXPORT cudaError_t cudaFreeAsync(void *p, cudaStream_t stream)
{
    char *h = sn_fake_cuda_host_address(p);
    if (!p)
        return cudaSuccess;
    if (!starting_at(h, DEVICE_MEMORY).lo)
        return fail(cudaErrorInvalidValue);
    return enqueue(stream, run_free, h, "a free", NULL, NULL);
}

static struct CUmemPoolHandle_st {
    int unused;
} pools[64];

SN_EXPORT cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool,
                                                  int device)
{
    if (device < 0 || device >= device_count())
        return fail(cudaErrorInvalidDevice);
    *pool = &pools[device];
    return cudaSuccess;
}

SN_EXPORT cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool,
                                              enum cudaMemPoolAttr attr,
                                              void *value)
{
    (void)pool;
    (void)attr;
    (void)value;
    return cudaSuccess;
}

/* --- events --------------------------------------------------------------- */

struct CUevent_st {
    struct CUstream_st *stream; /* NULL until recorded */
    unsigned long long seq;     /* the stream's operations before it */
    int asked;                  /* queried once while not reached */
};

SN_EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev,
                                               unsigned flags)
{
    (void)flags;
    *ev = NULL;
    if (fails("cudaEventCreateWithFlags") || !(*ev = calloc(1, sizeof **ev)))
        return fail(cudaErrorMemoryAllocation);
    return cudaSuccess;
}

SN_EXPORT cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t stream)
{
    struct CUstream_st *s = stream_of(stream);
    if (!ev || !s)
        return fail(cudaErrorInvalidResourceHandle);
    pthread_mutex_lock(&s->lock);
    ev->stream = s;
    ev->seq = s->queued;
    ev->asked = 0;
    pthread_mutex_unlock(&s->lock);
    return cudaSuccess;
}

SN_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
    if (!ev)
        return fail(cudaErrorInvalidResourceHandle);
    if (ev->stream)
        drain(ev->stream, ev->seq);
    if (fails("cudaEventSynchronize"))
        return fail(cudaErrorLaunchFailure);
    return cudaSuccess;
}

SN_EXPORT cudaError_t cudaEventQuery(cudaEvent_t ev)
{
    int reached;
    if (!ev)
        return fail(cudaErrorInvalidResourceHandle);
    if (!ev->stream)
        return cudaSuccess;
    pthread_mutex_lock(&ev->stream->lock);
    reached = ev->stream->done >= ev->seq;
    pthread_mutex_unlock(&ev->stream->lock);
    if (reached)
        return cudaSuccess;
    if (!ev->asked) {
        ev->asked = 1;
        return cudaErrorNotReady; /* not an error: nothing is recorded */
    }
    drain(ev->stream, ev->seq);
    return cudaSuccess;
}

SN_EXPORT cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    if (!ev)
        return fail(cudaErrorInvalidResourceHandle);
    free(ev);
    return cudaSuccess;
}
