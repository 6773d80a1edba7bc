/**
 * \file shardnet.h
 * \brief Public interface of libshardnet.
 *
 * shardnet runs trained neural networks across every compute device a
 * machine has.  This header is the only one installed.  Every call that can
 * fail returns a ::shardnet_status; objects come back through
 * out-parameters; the detail of the last failure on the calling thread is
 * available from shardnet_last_error().  The library never prints unless a
 * log callback is installed (shardnet_set_log()) and never exits.
 */
#ifndef SHARDNET_H
#define SHARDNET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SHARDNET_BUILDING) && defined(__GNUC__)
#define SHARDNET_API __attribute__((visibility("default")))
#else
#define SHARDNET_API
#endif

/* SHARDNET_VERSION_MAJOR/MINOR/PATCH and SHARDNET_VERSION_STRING: the version
 * of the headers this program was compiled against (generated from VERSION). */
#include <shardnet-version.h>

/** Version as one number: major * 10000 + minor * 100 + patch. */
#define SHARDNET_VERSION_HEX                                                  \
    (SHARDNET_VERSION_MAJOR * 10000 + SHARDNET_VERSION_MINOR * 100 +          \
     SHARDNET_VERSION_PATCH)

/**
 * Status codes and their messages, from one list.
 * X(name, value, message)
 */
#define SHARDNET_STATUS_MAP(X)                                                \
    X(OK, 0, "success")                                                       \
    X(INVALID_ARGUMENT, 1, "invalid argument")                                \
    X(OUT_OF_MEMORY, 2, "out of memory")                                      \
    X(NO_DEVICE, 3, "no such device")                                         \
    X(DEVICE_ERROR, 4, "device error")                                        \
    X(BUILD_ERROR, 5, "kernel build failed")                                  \
    X(UNSUPPORTED, 6, "operation not supported by this device")               \
    X(IO_ERROR, 7, "input/output error")                                      \
    X(INTERNAL, 8, "internal error")

/** Result of every fallible call. */
typedef enum shardnet_status {
#define SHARDNET_STATUS_ENUM_(name, value, msg) SHARDNET_##name = value,
    SHARDNET_STATUS_MAP(SHARDNET_STATUS_ENUM_)
#undef SHARDNET_STATUS_ENUM_
} shardnet_status;

/**
 * \brief Version of the library loaded at run time, as "major.minor.patch".
 * \return a static string; never NULL.
 */
SHARDNET_API const char *shardnet_version(void);

/**
 * \brief Short message describing a status code.
 * \return a static string; unknown codes give "unknown status".
 */
SHARDNET_API const char *shardnet_status_str(shardnet_status status);

/**
 * \brief Detail of the last failed call made by this thread.
 *
 * The message names what failed and why (a device, an OpenCL build log, a
 * CLBlast status, a bad token in a device list).
 * \return a thread-local string, valid until the next call into the library
 *         from this thread; "" when no call has failed.
 */
SHARDNET_API const char *shardnet_last_error(void);

/** Severity of a log message. */
typedef enum shardnet_log_level {
    SHARDNET_LOG_ERROR = 0,
    SHARDNET_LOG_WARN = 1,
    SHARDNET_LOG_INFO = 2,
    SHARDNET_LOG_DEBUG = 3
} shardnet_log_level;

/** Log callback: \p msg is a complete line without the trailing newline. */
typedef void (*shardnet_log_fn)(shardnet_log_level level, const char *msg,
                                void *user);

/**
 * \brief Install a log callback (process-wide).
 * \param fn     called for messages at \p level or more severe; NULL turns
 *               logging off (the default).
 * \param level  most verbose level passed to \p fn.
 * \param user   passed back to \p fn.
 */
SHARDNET_API void shardnet_set_log(shardnet_log_fn fn, shardnet_log_level level,
                                   void *user);

/** Kind of compute device. */
typedef enum shardnet_device_kind {
    SHARDNET_DEVICE_CPU = 0,    /**< one CPU package (socket), "cpu:N" */
    SHARDNET_DEVICE_OPENCL = 1, /**< one OpenCL device, "cl:N" */
    SHARDNET_DEVICE_CUDA = 2    /**< one CUDA device, "cuda:N" */
} shardnet_device_kind;

/** What shardnet knows about one device. Strings are NUL-terminated. */
typedef struct shardnet_device_info {
    char name[16];              /**< "cpu:0", "cl:1" */
    shardnet_device_kind kind;  /**< backend kind */
    unsigned index;             /**< N in "kind:N" */
    char model[128];            /**< CPU model or OpenCL device name */
    char vendor[64];            /**< vendor */
    char driver[64];            /**< driver / library version */
    unsigned compute_units;     /**< cores (cpu) or compute units (cl) */
    uint64_t global_mem;        /**< bytes of memory local to the device */
    uint64_t max_alloc;         /**< largest single buffer, bytes */
    int host_unified;           /**< 1 if the device shares memory with the host */
    int numa_node;              /**< NUMA node (cpu), -1 when unknown */
    char cpuset[64];            /**< cores as a list, e.g. "0-3" (cpu), "" else */
} shardnet_device_info;

/** Opaque handle: the devices of this machine and their backends. */
typedef struct shardnet_context shardnet_context_t;

/**
 * \brief Discover the devices of this machine.
 *
 * CPU packages are found through hwloc, OpenCL devices through the ICD
 * loader; a machine without an OpenCL platform simply has no "cl" devices.
 * \param[out] out  new context, to be released with shardnet_context_free().
 * \return SHARDNET_OK, or an error with shardnet_last_error() set.
 */
SHARDNET_API shardnet_status shardnet_context_create(shardnet_context_t **out);

/** \brief Release a context and every device it opened. NULL is ignored. */
SHARDNET_API void shardnet_context_free(shardnet_context_t *ctx);

/** \brief Number of devices found by shardnet_context_create(). */
SHARDNET_API size_t shardnet_device_count(const shardnet_context_t *ctx);

/**
 * \brief Describe device \p index (0 .. shardnet_device_count() - 1).
 * \param[out] info  filled on success.
 */
SHARDNET_API shardnet_status shardnet_device_get_info(
    const shardnet_context_t *ctx, size_t index, shardnet_device_info *info);

/**
 * \brief Resolve a device list string to device indices.
 *
 * A list is comma-separated items, each "all", a kind ("cpu", "cl") meaning
 * every device of that kind, or one device "kind:N".  NULL or "" means the
 * environment variable SHARDNET_DEVICES, or "all" when it is unset.  A device
 * named twice is taken once, in the order first named.
 * \param spec       the list.
 * \param[out] idx   receives up to \p cap indices (may be NULL if cap is 0).
 * \param cap        capacity of \p idx.
 * \param[out] count number of devices selected (may exceed \p cap, in which
 *                   case only \p cap were written and SHARDNET_INVALID_ARGUMENT
 *                   is returned).
 * \return SHARDNET_NO_DEVICE for an unknown kind, index or empty selection,
 *         with the offending item in shardnet_last_error().
 */
SHARDNET_API shardnet_status shardnet_devices_select(
    const shardnet_context_t *ctx, const char *spec, size_t *idx, size_t cap,
    size_t *count);

/**
 * \brief C = A * B on one device (row-major, float32).
 *
 * Copies \p a (m x k) and \p b (k x n) to the device, multiplies them there
 * and copies \p c (m x n) back.  Blocks until done.
 * \param device  index of the device, from shardnet_devices_select().
 */
SHARDNET_API shardnet_status shardnet_matmul(shardnet_context_t *ctx,
                                             size_t device, size_t m, size_t n,
                                             size_t k, const float *a,
                                             const float *b, float *c);

#ifdef __cplusplus
}
#endif

#endif /* SHARDNET_H */
