/*
 * Building the OpenCL programs of kernels_cl/, and the on-disk cache of their
 * binaries.
 *
 * Sources come from the table that tools/embed-cl.sh generates at build
 * time, or from <kernel_dir>/<name> when the context names a kernel_dir
 * (SHARDNET_CL_DIR; development: edit a .cl file and rerun without
 * rebuilding the library).
 *
 * The cache lives in the context's cache folder (sn_cache_dir: its option,
 * $SHARDNET_CACHE_DIR, else $XDG_CACHE_HOME/shardnet, else
 * $HOME/.cache/shardnet).  A file is named after a 64-bit FNV-1a hash of
 * everything that determines the binary (source text, build options, device
 * name, driver version, platform version) and holds a small header (magic,
 * key, payload size, payload hash) then the binary the driver gave back.
 * The cache is an optimisation only: a folder that cannot be made, a file
 * that cannot be written, or one that is short, corrupt or refused by the
 * driver all fall back to building from source, never to an error.  Files
 * are written to a temporary name in the same folder and renamed into
 * place, so a reader never sees half a file.
 */
#include <config.h>

/* mkstemp, fileno, fstat under a strict -std=c11 too. */
#if !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "core/cachedir.h"
#include "core/error.h"
#include "program.h"

#define CACHE_MAGIC "SNCLBIN1"
#define CACHE_PATH_MAX 4096
/* Largest source or cached binary read from disk; larger is corrupt. */
#define FILE_MAX ((size_t)256 << 20)
/* Build log bytes kept in the error detail (whose buffer is 4 KiB). */
#define LOG_KEEP 3300

typedef struct cache_header {
    char magic[8];
    uint64_t key;  /* the file's own key, against a renamed file */
    uint64_t size; /* payload bytes */
    uint64_t sum;  /* FNV-1a of the payload */
} cache_header;

#define CL_ERROR_MAP(X)                                                       \
    X(CL_SUCCESS) X(CL_DEVICE_NOT_FOUND) X(CL_DEVICE_NOT_AVAILABLE)           \
    X(CL_COMPILER_NOT_AVAILABLE) X(CL_MEM_OBJECT_ALLOCATION_FAILURE)          \
    X(CL_OUT_OF_RESOURCES) X(CL_OUT_OF_HOST_MEMORY)                           \
    X(CL_PROFILING_INFO_NOT_AVAILABLE) X(CL_MEM_COPY_OVERLAP)                 \
    X(CL_IMAGE_FORMAT_MISMATCH) X(CL_IMAGE_FORMAT_NOT_SUPPORTED)              \
    X(CL_BUILD_PROGRAM_FAILURE) X(CL_MAP_FAILURE)                             \
    X(CL_MISALIGNED_SUB_BUFFER_OFFSET)                                        \
    X(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)                           \
    X(CL_COMPILE_PROGRAM_FAILURE) X(CL_LINKER_NOT_AVAILABLE)                  \
    X(CL_LINK_PROGRAM_FAILURE) X(CL_DEVICE_PARTITION_FAILED)                  \
    X(CL_KERNEL_ARG_INFO_NOT_AVAILABLE) X(CL_INVALID_VALUE)                   \
    X(CL_INVALID_DEVICE_TYPE) X(CL_INVALID_PLATFORM) X(CL_INVALID_DEVICE)     \
    X(CL_INVALID_CONTEXT) X(CL_INVALID_QUEUE_PROPERTIES)                      \
    X(CL_INVALID_COMMAND_QUEUE) X(CL_INVALID_HOST_PTR)                        \
    X(CL_INVALID_MEM_OBJECT) X(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)            \
    X(CL_INVALID_IMAGE_SIZE) X(CL_INVALID_SAMPLER) X(CL_INVALID_BINARY)       \
    X(CL_INVALID_BUILD_OPTIONS) X(CL_INVALID_PROGRAM)                         \
    X(CL_INVALID_PROGRAM_EXECUTABLE) X(CL_INVALID_KERNEL_NAME)                \
    X(CL_INVALID_KERNEL_DEFINITION) X(CL_INVALID_KERNEL)                      \
    X(CL_INVALID_ARG_INDEX) X(CL_INVALID_ARG_VALUE) X(CL_INVALID_ARG_SIZE)    \
    X(CL_INVALID_KERNEL_ARGS) X(CL_INVALID_WORK_DIMENSION)                    \
    X(CL_INVALID_WORK_GROUP_SIZE) X(CL_INVALID_WORK_ITEM_SIZE)                \
    X(CL_INVALID_GLOBAL_OFFSET) X(CL_INVALID_EVENT_WAIT_LIST)                 \
    X(CL_INVALID_EVENT) X(CL_INVALID_OPERATION) X(CL_INVALID_GL_OBJECT)       \
    X(CL_INVALID_BUFFER_SIZE) X(CL_INVALID_MIP_LEVEL)                         \
    X(CL_INVALID_GLOBAL_WORK_SIZE) X(CL_INVALID_PROPERTY)                     \
    X(CL_INVALID_IMAGE_DESCRIPTOR) X(CL_INVALID_COMPILER_OPTIONS)             \
    X(CL_INVALID_LINKER_OPTIONS) X(CL_INVALID_DEVICE_PARTITION_COUNT)

const char *sn_cl_error_name(cl_int err)
{
    switch (err) {
#define SN_CASE_(code)                                                        \
    case code:                                                                \
        return #code;
        CL_ERROR_MAP(SN_CASE_)
#undef SN_CASE_
    case -1001:
        return "CL_PLATFORM_NOT_FOUND_KHR";
    }
    return "unknown OpenCL error";
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

#define FNV_BASIS UINT64_C(0xcbf29ce484222325)

/* Hash a string and its terminating NUL, so that fields cannot run
 * together ("ab" + "c" differs from "a" + "bc"). */
static uint64_t fnv1a_str(uint64_t h, const char *s)
{
    return fnv1a(h, s, strlen(s) + 1);
}

/*
 * Whole file as a malloc'ed buffer with a NUL after the last byte, or NULL
 * with errno set.  Files above FILE_MAX count as unreadable (EFBIG).
 */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    struct stat sb;
    char *buf = NULL;
    size_t n;

    if (!f)
        return NULL;
    if (fstat(fileno(f), &sb) != 0)
        goto error;
    if (!S_ISREG(sb.st_mode) || sb.st_size < 0 ||
        (uint64_t)sb.st_size > FILE_MAX) {
        errno = S_ISREG(sb.st_mode) ? EFBIG : EINVAL;
        goto error;
    }
    n = (size_t)sb.st_size;
    buf = malloc(n + 1);
    if (!buf)
        goto error;
    if (fread(buf, 1, n, f) != n) {
        errno = EIO;
        goto error;
    }
    buf[n] = '\0';
    fclose(f);
    *len = n;
    return buf;

error:
    {
        int saved = errno;
        free(buf);
        fclose(f);
        errno = saved;
    }
    return NULL;
}

/* The source text of `name`; *owned is what the caller frees (may be NULL). */
static shardnet_status load_source(const sn_config *config,
                                   const char *label, const char *name,
                                   char **owned, const char **text,
                                   size_t *len)
{
    const char *dir = sn_config_or_env(config)->kernel_dir;
    *owned = NULL;
    if (*dir) {
        char path[CACHE_PATH_MAX];
        int w = snprintf(path, sizeof path, "%s/%s", dir, name);
        if (w < 0 || (size_t)w >= sizeof path)
            return sn_error(SHARDNET_IO_ERROR,
                            "%s: kernel_dir (SHARDNET_CL_DIR) path too long "
                            "for %s",
                            label, name);
        *owned = read_file(path, len);
        if (!*owned)
            return sn_error(SHARDNET_IO_ERROR,
                            "%s: kernel_dir (SHARDNET_CL_DIR) is set but %s "
                            "cannot be read: %s",
                            label, path, strerror(errno));
        *text = *owned;
        sn_log(SHARDNET_LOG_DEBUG, "%s: %s from %s", label, name, path);
        return SHARDNET_OK;
    }
    for (size_t i = 0; i < sn_cl_source_count; i++) {
        if (strcmp(sn_cl_sources[i].name, name) == 0) {
            *text = sn_cl_sources[i].text;
            *len = sn_cl_sources[i].len;
            return SHARDNET_OK;
        }
    }
    return sn_error(SHARDNET_INTERNAL, "%s: no OpenCL source named %s is "
                    "built into the library", label, name);
}

/* A string property of the device (what == 'd') or of its platform. */
static char *info_string(cl_device_id device, int what, cl_uint param)
{
    size_t size = 0;
    char *s;
    cl_int err;
    cl_platform_id platform;

    if (what == 'd') {
        err = clGetDeviceInfo(device, param, 0, NULL, &size);
    } else {
        err = clGetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof platform,
                              &platform, NULL);
        if (err == CL_SUCCESS)
            err = clGetPlatformInfo(platform, param, 0, NULL, &size);
    }
    if (err != CL_SUCCESS || size == 0 || !(s = malloc(size + 1)))
        return NULL;
    if (what == 'd')
        err = clGetDeviceInfo(device, param, size, s, NULL);
    else
        err = clGetPlatformInfo(platform, param, size, s, NULL);
    if (err != CL_SUCCESS) {
        free(s);
        return NULL;
    }
    s[size] = '\0';
    return s;
}

/* Cache key; 0 (and no caching) when the device cannot be described. */
static int cache_key(cl_device_id device, const char *text, size_t len,
                     uint64_t *key)
{
    char *dev_name = info_string(device, 'd', CL_DEVICE_NAME);
    char *driver = info_string(device, 'd', CL_DRIVER_VERSION);
    char *platform = info_string(device, 'p', CL_PLATFORM_VERSION);
    int ok = dev_name && driver && platform;
    if (ok) {
        uint64_t h = fnv1a_str(FNV_BASIS, CACHE_MAGIC);
        h = fnv1a(h, text, len);
        h = fnv1a(h, "", 1);
        h = fnv1a_str(h, SN_CL_BUILD_OPTIONS);
        h = fnv1a_str(h, dev_name);
        h = fnv1a_str(h, driver);
        h = fnv1a_str(h, platform);
        *key = h;
    }
    free(dev_name);
    free(driver);
    free(platform);
    return ok;
}

/* The program held by a cache file, or NULL if there is no usable one. */
static cl_program load_cached(cl_context ctx, cl_device_id device,
                              const char *label, const char *path,
                              uint64_t key)
{
    size_t len = 0, size;
    char *file = read_file(path, &len);
    cache_header h;
    const unsigned char *payload;
    cl_int err, bin_status = CL_SUCCESS;
    cl_program prog;

    if (!file)
        return NULL;
    memcpy(&h, file, len < sizeof h ? len : sizeof h);
    if (len < sizeof h || memcmp(h.magic, CACHE_MAGIC, 8) != 0 ||
        h.key != key || h.size != len - sizeof h ||
        h.sum != fnv1a(FNV_BASIS, file + sizeof h, len - sizeof h) ||
        h.size == 0) {
        sn_log(SHARDNET_LOG_WARN, "%s: ignoring corrupt OpenCL cache file %s",
               label, path);
        free(file);
        return NULL;
    }
    payload = (const unsigned char *)file + sizeof h;
    size = (size_t)h.size;
    prog = clCreateProgramWithBinary(ctx, 1, &device, &size, &payload,
                                     &bin_status, &err);
    if (prog && err == CL_SUCCESS && bin_status == CL_SUCCESS)
        err = clBuildProgram(prog, 1, &device, SN_CL_BUILD_OPTIONS, NULL,
                             NULL);
    free(file);
    if (!prog || err != CL_SUCCESS || bin_status != CL_SUCCESS) {
        sn_log(SHARDNET_LOG_WARN,
               "%s: driver refused OpenCL cache file %s (%s); rebuilding",
               label, path,
               sn_cl_error_name(err != CL_SUCCESS ? err : bin_status));
        if (prog)
            clReleaseProgram(prog);
        return NULL;
    }
    return prog;
}

static int write_all(int fd, const void *data, size_t n)
{
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Save a built program's binary as `path`; failures are only logged. */
static void store_cached(cl_program prog, const char *label, const char *path,
                         uint64_t key)
{
    char tmp[CACHE_PATH_MAX + 64];
    size_t size = 0;
    unsigned char *bin = NULL;
    cache_header h;
    int fd;
    cl_uint ndev = 0;

    if (clGetProgramInfo(prog, CL_PROGRAM_NUM_DEVICES, sizeof ndev, &ndev,
                         NULL) != CL_SUCCESS ||
        ndev != 1 ||
        clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size,
                         NULL) != CL_SUCCESS ||
        size == 0 || size > FILE_MAX || !(bin = malloc(size)) ||
        clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) !=
            CL_SUCCESS) {
        sn_log(SHARDNET_LOG_DEBUG, "%s: no program binary to cache", label);
        goto done;
    }
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CACHE_MAGIC, 8);
    h.key = key;
    h.size = size;
    h.sum = fnv1a(FNV_BASIS, bin, size);
    snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
    fd = mkstemp(tmp);
    if (fd < 0) {
        sn_log(SHARDNET_LOG_DEBUG, "%s: cannot create %s: %s", label, tmp,
               strerror(errno));
        goto done;
    }
    if (write_all(fd, &h, sizeof h) != 0 || write_all(fd, bin, size) != 0) {
        close(fd);
        fd = -1;
    } else {
        fd = close(fd);
    }
    if (fd != 0 || rename(tmp, path) != 0) {
        sn_log(SHARDNET_LOG_DEBUG, "%s: cannot write %s: %s", label, path,
               strerror(errno));
        unlink(tmp);
        goto done;
    }
    sn_log(SHARDNET_LOG_DEBUG, "%s: cached program binary as %s", label, path);
done:
    free(bin);
}

/* The error for a program that failed to build, with its build log. */
static shardnet_status build_failure(cl_program prog, cl_device_id device,
                                     const char *label, const char *name,
                                     cl_int err)
{
    size_t size = 0, keep;
    char *log = NULL;
    shardnet_status st;

    if (clGetProgramBuildInfo(prog, device, CL_PROGRAM_BUILD_LOG, 0, NULL,
                              &size) == CL_SUCCESS &&
        size > 0 && (log = malloc(size + 1)) &&
        clGetProgramBuildInfo(prog, device, CL_PROGRAM_BUILD_LOG, size, log,
                              NULL) == CL_SUCCESS) {
        log[size] = '\0';
    } else {
        free(log);
        log = NULL;
    }
    if (!log) {
        return sn_error(SHARDNET_BUILD_ERROR,
                        "%s: building %s with \"%s\" failed (%s); no build "
                        "log",
                        label, name, SN_CL_BUILD_OPTIONS,
                        sn_cl_error_name(err));
    }
    size = strlen(log);
    while (size > 0 && (log[size - 1] == '\n' || log[size - 1] == ' ' ||
                        log[size - 1] == '\r' || log[size - 1] == '\t'))
        log[--size] = '\0';
    /* The first errors matter most: keep the head of a long log, cut at
     * the end of a line. */
    keep = size;
    if (size > LOG_KEEP) {
        keep = LOG_KEEP;
        while (keep > LOG_KEEP / 2 && log[keep - 1] != '\n')
            keep--;
        if (keep == LOG_KEEP / 2)
            keep = LOG_KEEP;
    }
    if (keep < size)
        st = sn_error(SHARDNET_BUILD_ERROR,
                      "%s: building %s with \"%s\" failed (%s); build log:\n"
                      "%.*s[... %zu more bytes of build log]",
                      label, name, SN_CL_BUILD_OPTIONS, sn_cl_error_name(err),
                      (int)keep, log, size - keep);
    else
        st = sn_error(SHARDNET_BUILD_ERROR,
                      "%s: building %s with \"%s\" failed (%s); build log:\n"
                      "%s",
                      label, name, SN_CL_BUILD_OPTIONS, sn_cl_error_name(err),
                      size ? log : "(empty)");
    free(log);
    return st;
}

static shardnet_status build_source(cl_context ctx, cl_device_id device,
                                    const char *label, const char *name,
                                    const char *text, size_t len,
                                    cl_program *out)
{
    cl_int err;
    shardnet_status st;
    cl_program prog = clCreateProgramWithSource(ctx, 1, &text, &len, &err);

    if (!prog || err != CL_SUCCESS)
        return sn_error(SHARDNET_DEVICE_ERROR,
                        "%s: clCreateProgramWithSource for %s failed: %s",
                        label, name, sn_cl_error_name(err));
    err = clBuildProgram(prog, 1, &device, SN_CL_BUILD_OPTIONS, NULL, NULL);
    if (err != CL_SUCCESS) {
        st = build_failure(prog, device, label, name, err);
        clReleaseProgram(prog);
        return st;
    }
    *out = prog;
    return SHARDNET_OK;
}

shardnet_status sn_cl_program_build(const sn_config *config, cl_context ctx,
                                    cl_device_id device, const char *label,
                                    const char *name, cl_program *out)
{
    char *owned = NULL;
    const char *text = NULL;
    size_t len = 0;
    char dir[CACHE_PATH_MAX], path[CACHE_PATH_MAX + 32];
    uint64_t key = 0;
    int cache = 0;
    cl_program prog = NULL;
    shardnet_status st;

    *out = NULL;
    st = load_source(config, label, name, &owned, &text, &len);
    if (st != SHARDNET_OK)
        return st;
    if (cache_key(device, text, len, &key) &&
        sn_cache_dir(config, dir, sizeof dir)) {
        snprintf(path, sizeof path, "%s/%016" PRIx64 ".bin", dir, key);
        cache = 1;
        prog = load_cached(ctx, device, label, path, key);
        if (prog) {
            sn_log(SHARDNET_LOG_DEBUG, "%s: %s loaded from cache %s", label,
                   name, path);
            free(owned);
            *out = prog;
            return SHARDNET_OK;
        }
    }
    sn_log(SHARDNET_LOG_DEBUG, "%s: building %s from source", label, name);
    st = build_source(ctx, device, label, name, text, len, &prog);
    if (st == SHARDNET_OK && cache)
        store_cached(prog, label, path, key);
    free(owned);
    if (st == SHARDNET_OK)
        *out = prog;
    return st;
}
