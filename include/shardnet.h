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

/** Version of the headers as one number, 0xMMmmpp (major, minor, patch one
 * byte each, as libuv and hwloc write theirs): versions compare as numbers,
 * e.g. `#if SHARDNET_VERSION_HEX >= 0x000200`.  shardnet_version_hex() is
 * the library's. */
#define SHARDNET_VERSION_HEX                                                  \
    ((SHARDNET_VERSION_MAJOR << 16) | (SHARDNET_VERSION_MINOR << 8) |         \
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
 * \brief Version of the library loaded at run time, as SHARDNET_VERSION_HEX
 * writes it (0xMMmmpp): a program can check that the library it runs with
 * is at least the one whose headers it was compiled against.
 */
SHARDNET_API unsigned shardnet_version_hex(void);

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

/**
 * \brief The OpenBLAS kernels this CPU deserves, when OpenBLAS chose older
 * ones.
 *
 * OpenBLAS picks its kernels when it is loaded, from a table that may not
 * know a newer CPU: on CPUs with AVX-512 it can fall back to its AVX2
 * ("Haswell") kernels, at half the speed.  The choice can only be changed
 * before the process starts, through the environment variable
 * OPENBLAS_CORETYPE; the `shardnet` tool re-executes itself with it.
 * \return "SkylakeX" when this CPU has AVX-512 (F, BW, DQ, VL), OpenBLAS
 *         runs AVX2 or older kernels, and OPENBLAS_CORETYPE is not set;
 *         otherwise NULL.
 */
SHARDNET_API const char *shardnet_blas_coretype_hint(void);

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
 * \brief Discover the devices of this machine: shardnet_context_create_with()
 * with no options (every setting as the environment says).
 *
 * CPU packages are found through hwloc, OpenCL devices through the ICD
 * loader; a machine without an OpenCL platform simply has no "cl" devices.
 * \param[out] out  new context, to be released with shardnet_context_free().
 * \return SHARDNET_OK, or an error with shardnet_last_error() set.
 */
SHARDNET_API shardnet_status shardnet_context_create(shardnet_context_t **out);

/**
 * What a context's devices are and how they are used, for the settings
 * that the environment variables SHARDNET_* give otherwise.
 *
 * Precedence: a member set here wins over its environment variable; a
 * member left unset (0 or NULL, as in a zeroed struct) takes the
 * variable's value, read once per process at the first context, or the
 * default.  An environment variable set to a value shardnet cannot use
 * fails every context's creation, whatever the options say.  Strings are
 * copied: they need to live only through shardnet_context_create_with().
 *
 * The struct can grow as shardnet_session_options does: the library reads
 * the \p size bytes the caller states (0: this first version's size) and
 * refuses a larger struct from a newer program when one of the fields it
 * does not know is set.
 */
/**
 * Progress of long work (shardnet_context_options.progress): \p what is
 * being done, as a short phrase naming the device ("uploading weights to
 * cl:0", "packing weights on cpu:0", "profiling cpu:0", "timing the model
 * on cpu:0"), and how far: \p done of \p total units (bytes, or steps),
 * \p total 0 where the end is not known.  A stage ends with a call whose
 * done equals its total (or, with total 0, with done as it ends).  Called
 * from the thread doing the work, several times a second at most; it
 * must return quickly and not call into the library.
 */
typedef void (*shardnet_progress_fn)(void *user, const char *what,
                                     uint64_t done, uint64_t total);

/**
 * How float32 values cross between the processes of a job
 * (shardnet_context_options.comm): the tensor split's collectives between
 * processes and the layer split's values between stages on different
 * processes.  Each message is sent in the codec, dense or, where the
 * value is mostly zeros and that is smaller, as the values that are not
 * zero and where they are; a message whose values the codec cannot carry
 * (a finite value past fp16's or bf16's range, a NaN or an infinity in
 * int8) goes as float32.  The error per value x (zeros exact):
 * fp16 2^-11 |x| (2^-25 below 2^-14), bf16 2^-8 |x|, int8 half the
 * scale of its chunk of 256 values (the largest |x| of the chunk / 127).
 * The outputs every process gets are sent as float32.  Every process of
 * a job must use the same codec.
 */
typedef enum shardnet_comm {
    SHARDNET_COMM_DEFAULT = 0, /**< SHARDNET_COMM, else fp32 */
    SHARDNET_COMM_FP32,        /**< the floats as they are */
    SHARDNET_COMM_FP16,        /**< IEEE half, rounded to nearest even */
    SHARDNET_COMM_BF16,        /**< bfloat16, rounded to nearest even */
    SHARDNET_COMM_INT8         /**< int8, symmetric, a scale per 256 */
} shardnet_comm;

typedef struct shardnet_context_options {
    /** sizeof(shardnet_context_options), or 0. */
    size_t size;
    /** The default device list, used where a device list given to
     * shardnet_devices_select() or a session is NULL or "" (at most 1023
     * bytes; NULL or "": SHARDNET_DEVICES, else "all"). */
    const char *devices;
    /** Bytes the planner may use on each device, below the device's own
     * memory (0: SHARDNET_MEMORY_LIMIT, else the device's memory). */
    uint64_t memory_limit;
    /** Threads of each CPU device's team at most, on its first cores, up
     * to 1 << 20 (0: SHARDNET_CPU_THREADS, else one per core). */
    unsigned cpu_threads;
    /** The folder of the device profiles and the compiled OpenCL programs,
     * made if missing (at most 4095 bytes; NULL or "": SHARDNET_CACHE_DIR,
     * else $XDG_CACHE_HOME/shardnet, else ~/.cache/shardnet). */
    const char *cache_dir;
    /** Positive: measure each device's profile again at its first use and
     * replace the cached one; negative: use the cache; 0:
     * SHARDNET_REPROFILE (0 or 1), else the cache. */
    int reprofile;
    /** Positive: the tensor split's collectives go through host memory
     * (the staged engine) even where every device shares host memory;
     * negative: the transport the devices allow; 0:
     * SHARDNET_STAGED_COLLECTIVES (0 or 1), else the transport they
     * allow. */
    int staged_collectives;
    /** A folder holding the OpenCL sources (kernels_cl/<name>.cl), read
     * instead of those built in, for kernel development (at most 4095
     * bytes; NULL or "": SHARDNET_CL_DIR, else those built in). */
    const char *kernel_dir;
    /** Called with the progress of long work (reading, packing and
     * uploading a model's weights, profiling a device, timing a model for
     * the planner), NULL for none; \p progress_user is its first
     * argument. */
    shardnet_progress_fn progress;
    void *progress_user;
    /** How float32 values cross between processes (a ::shardnet_comm;
     * 0: SHARDNET_COMM, fp32 fp16 bf16 or int8, else fp32). */
    int comm;
} shardnet_context_options;

/**
 * \brief shardnet_context_create() with options (NULL: none).
 * \param[out] out  new context, to be released with shardnet_context_free().
 * \return SHARDNET_INVALID_ARGUMENT for options this library cannot read
 *         (a size too small, or fields of a newer shardnet set), a string
 *         too long, cpu_threads above 1 << 20, or an environment variable
 *         with a value it cannot use; the message names the member or the
 *         variable.
 */
SHARDNET_API shardnet_status shardnet_context_create_with(
    const shardnet_context_options *options, shardnet_context_t **out);

/**
 * \brief This process's index in its job, and the job's processes.
 *
 * A program started by mpirun (shardnet built with MPI) joins the job when
 * it creates its first context: the job's devices are then every process's,
 * named "P/KIND:N" (e.g. "1/cpu:0"), and every process runs the same calls
 * (SPMD).  Outside MPI: process 0 of 1.
 */
SHARDNET_API unsigned shardnet_job_process(void);
SHARDNET_API unsigned shardnet_job_processes(void);

/** \brief Release a context and every device it opened. NULL is ignored. */
SHARDNET_API void shardnet_context_free(shardnet_context_t *ctx);

/** \brief Number of devices found by shardnet_context_create(), and the
 * partitions device lists have named since (shardnet_devices_select()). */
SHARDNET_API size_t shardnet_device_count(const shardnet_context_t *ctx);

/**
 * \brief Host memory for a run's inputs (or anything else the caller moves
 * to and from the devices \p devices names, a list as for
 * shardnet_devices_select(); NULL: the default list): page-locked
 * ("pinned") memory where one of them has it (a CUDA GPU: copies from it
 * to any GPU run at the link's speed, where the driver stages pageable
 * memory through a pinned buffer of its own first; the first such call
 * opens the GPU's CUDA context, not cuBLAS), else plain memory.  Aligned
 * to 64 bytes either way; \p bytes may be 0.  Pinned memory is limited:
 * where the driver refuses it, this gives plain memory instead.
 * \return NULL when out of memory, for a list that names no device, or
 *         when \p ctx is NULL, with the reason in shardnet_last_error().
 */
SHARDNET_API void *shardnet_host_alloc(shardnet_context_t *ctx,
                                       const char *devices, size_t bytes);

/** \brief Release memory of shardnet_host_alloc() (before the context that
 * gave it is freed).  NULL is ignored. */
SHARDNET_API void shardnet_host_free(void *ptr);

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
 * every device of that kind, or one device "kind:N", or a partition of one:
 * "cpu:0[2-3]" (its cores 2 to 3), "cpu:0/2" (both halves), "cpu:0/2.1"
 * (the second half); an OpenCL CPU device's by device fission, where its
 * driver allows.  A partition is a device of its own, named by its cores,
 * added to the context (after the devices discovery found, so that
 * shardnet_device_count() grows) the first time a list names it; "all"
 * and kinds never include one, and devices of one list may not share
 * cores.  NULL or "" means the
 * context's default list (shardnet_context_options.devices, else the
 * environment variable SHARDNET_DEVICES), or "all" when it has none.  A device
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

/* ------------------------------------------------------------------------
 * Models and sessions
 * ---------------------------------------------------------------------- */

/** Highest tensor rank shardnet handles. */
#define SHARDNET_MAX_DIMS 8

/** Element types (the numbers are ONNX's TensorProto.DataType). */
typedef enum shardnet_dtype {
    SHARDNET_DTYPE_UNDEFINED = 0,
    SHARDNET_DTYPE_FLOAT32 = 1,
    SHARDNET_DTYPE_UINT8 = 2,
    SHARDNET_DTYPE_INT8 = 3,
    SHARDNET_DTYPE_UINT16 = 4,
    SHARDNET_DTYPE_INT16 = 5,
    SHARDNET_DTYPE_INT32 = 6,
    SHARDNET_DTYPE_INT64 = 7,
    SHARDNET_DTYPE_BOOL = 9,
    SHARDNET_DTYPE_FLOAT16 = 10,
    SHARDNET_DTYPE_FLOAT64 = 11,
    SHARDNET_DTYPE_UINT32 = 12,
    SHARDNET_DTYPE_UINT64 = 13,
    SHARDNET_DTYPE_BFLOAT16 = 16
} shardnet_dtype;

/** Bytes per element of \p dtype; 0 for types shardnet does not handle. */
SHARDNET_API size_t shardnet_dtype_size(shardnet_dtype dtype);

/**
 * \brief Name of \p dtype: the enumerator's in lower case ("float32",
 * "int64", "bfloat16", "undefined").
 * \return a static string; "unknown" for a value that is not a
 *         ::shardnet_dtype.
 */
SHARDNET_API const char *shardnet_dtype_name(shardnet_dtype dtype);

/** Name, type and shape of a model input or output, or of a result. */
typedef struct shardnet_tensor_info {
    const char *name;        /**< owned by the model or session */
    shardnet_dtype dtype;
    int rank;
    int64_t dims[SHARDNET_MAX_DIMS]; /**< -1 where the model leaves it open */
    const char *dim_names[SHARDNET_MAX_DIMS]; /**< symbolic names, or NULL */
} shardnet_tensor_info;

/** Opaque handle: an imported model (ONNX). */
typedef struct shardnet_model shardnet_model_t;

/**
 * \brief Import an ONNX model (opsets 7 to 18).
 *
 * The file (and any external-data files beside it) is memory-mapped;
 * weights are not copied until a session uploads them to its device (see
 * shardnet_model_options for what that promises, and how to read the files
 * into memory instead).  External data must lie inside the model's folder
 * once symbolic links are resolved; the model and its external data must be
 * regular files (a FIFO or a device is refused, never waited on).  The
 * graph is checked (shapes, cycles, missing inputs) and simplified
 * (constant folding, BatchNorm folded into Conv/Gemm, activations fused,
 * dead nodes removed).  A model that uses operators shardnet lacks still
 * loads, so that it can be inspected: shardnet_model_unsupported() lists
 * them and shardnet_session_create() refuses it.
 * \param[out] out  the model, released with shardnet_model_free().
 * \return SHARDNET_IO_ERROR (unreadable file), SHARDNET_INVALID_ARGUMENT
 *         (malformed model, with the node and reason in shardnet_last_error()).
 */
SHARDNET_API shardnet_status shardnet_model_load(const char *path,
                                                 shardnet_model_t **out);

/** shardnet_model_options.flags: read the model's files into memory of the
 * model's own instead of mapping them. */
#define SHARDNET_MODEL_READ 1u

/**
 * How shardnet_model_load_with() reads a model.
 *
 * What a mapped model (the default) promises: its weights are the model's
 * files themselves, mapped read-only, not copied, so the files must stay as
 * they were while the model lives.  Every session creation, every run and
 * the start of every stream check that each file still has the size,
 * modification time and identity (device and inode) it had when loaded,
 * and refuse with SHARDNET_IO_ERROR naming the file when one changed, so a
 * file changed between two runs is never run with a mix of old and new
 * weights.  No check can cover a file truncated while a run reads it: the
 * process then receives SIGBUS (weights a session already copied to a
 * device's own memory are safe, but CPU devices may read them in place).
 * A program that cannot rule that out (a long-running server whose models
 * others may rewrite) sets SHARDNET_MODEL_READ: the files are read once, at
 * load, into memory of the model's own, and nothing done to them later
 * reaches the model.
 */
typedef struct shardnet_model_options {
    /** sizeof(shardnet_model_options), so that the struct can grow: fields
     * past the size given keep their defaults. */
    size_t size;
    /** SHARDNET_MODEL_READ, or 0 (map). */
    unsigned flags;
    /** Must be 0. */
    unsigned reserved[7];
} shardnet_model_options;

/**
 * \brief shardnet_model_load() with options (NULL: map, as
 * shardnet_model_load() does).
 * \return SHARDNET_INVALID_ARGUMENT for an unknown flag, a size smaller
 *         than the first two fields, or reserved fields not 0.
 */
SHARDNET_API shardnet_status shardnet_model_load_with(
    const char *path, const shardnet_model_options *options,
    shardnet_model_t **out);

/** \brief Release a model (after every session using it). NULL is ignored. */
SHARDNET_API void shardnet_model_free(shardnet_model_t *model);

/** \brief Number of inputs the caller binds (weights excluded). */
SHARDNET_API size_t shardnet_model_input_count(const shardnet_model_t *model);
/** \brief Number of outputs. */
SHARDNET_API size_t shardnet_model_output_count(const shardnet_model_t *model);
/** \brief Describe input \p index. */
SHARDNET_API shardnet_status shardnet_model_input(const shardnet_model_t *model,
                                                  size_t index,
                                                  shardnet_tensor_info *info);
/** \brief Describe output \p index. */
SHARDNET_API shardnet_status shardnet_model_output(
    const shardnet_model_t *model, size_t index, shardnet_tensor_info *info);

/**
 * \brief Summary of the model for people: the operators and how often each
 * is used (after simplification), the number of parameters, the opset and
 * producer, one item per line.
 * \param buf, cap  receives the NUL-terminated text (truncated to cap).
 * \return the length of the full text.
 */
SHARDNET_API size_t shardnet_model_describe(const shardnet_model_t *model,
                                           char *buf, size_t cap);

/** \brief Number of weights (elements of the initializers). */
SHARDNET_API uint64_t shardnet_model_parameter_count(
    const shardnet_model_t *model);

/**
 * \brief The operators of the model that shardnet cannot run, as
 * "Op (node name), ...", or "" when it can run them all; an operator
 * shardnet runs only in other opsets than the model's is listed as "Op
 * (node name, runs in opsets 9 and later, not the model's 8)".  The nodes
 * of subgraphs (If's branches, Loop's and Scan's bodies) are listed too.
 * \return the length of the full text.
 */
SHARDNET_API size_t shardnet_model_unsupported(const shardnet_model_t *model,
                                              char *buf, size_t cap);

/** The form shardnet_model_quantize() gives the weights. */
typedef enum shardnet_quantize_weights {
    /** int8, symmetric (zero point 0), scales per tensor or per output
     * column, read through a DequantizeLinear (opset 10, per column 13). */
    SHARDNET_QUANTIZE_INT8 = 0,
    /** 4-bit in blocks along K, one scale per block and column, as the
     * com.microsoft MatMulNBits operator ONNX Runtime runs. */
    SHARDNET_QUANTIZE_INT4 = 1,
    /** float16, read through a Cast to float. */
    SHARDNET_QUANTIZE_FP16 = 2
} shardnet_quantize_weights;

/** shardnet_quantize_options.flags: int8 with one scale per output column
 * instead of one per tensor. */
#define SHARDNET_QUANTIZE_PER_CHANNEL 1u

/** Weights of fewer elements stay float32 unless the options say
 * otherwise (their scales would weigh more than what is saved). */
#define SHARDNET_QUANTIZE_MIN_ELEMENTS 256

/** How shardnet_model_quantize() writes the weights.  It can grow as
 * shardnet_session_options does (see there): \p size first. */
typedef struct shardnet_quantize_options {
    /** sizeof(shardnet_quantize_options); 0 means the first version's. */
    size_t size;
    /** SHARDNET_QUANTIZE_INT8 (the default), _INT4 or _FP16. */
    shardnet_quantize_weights weights;
    /** SHARDNET_QUANTIZE_PER_CHANNEL (int8 only), or 0. */
    unsigned flags;
    /** int4: elements of K per block, a power of two from 16 (0: 32);
     * must be 0 for the other forms. */
    size_t block_size;
    /** The fewest elements a weight must have to be converted (0:
     * SHARDNET_QUANTIZE_MIN_ELEMENTS). */
    size_t min_elements;
} shardnet_quantize_options;

/** What shardnet_model_quantize() did.  The caller sets \p size; the
 * library fills the fields that fit in it. */
typedef struct shardnet_quantize_report {
    /** sizeof(shardnet_quantize_report). */
    size_t size;
    /** Weights converted. */
    size_t converted;
    /** Weights of MatMul or Gemm left as float32: too small, shared with
     * other uses, not finite, or (int4) of a Gemm that cannot become a
     * MatMulNBits; the library's log says why at SHARDNET_LOG_INFO. */
    size_t kept;
    /** Bytes of the converted weights as float32, and as written (the
     * integers or halves with their scales). */
    uint64_t bytes_before, bytes_after;
    /** Bytes of the file written. */
    uint64_t file_bytes;
} shardnet_quantize_report;

/**
 * \brief Write a copy of an ONNX model whose weights are smaller.
 *
 * Each float32 initializer of at least \p min_elements that is only ever
 * the weight (input B) of MatMul ([K, N]) or Gemm (either transB) in the
 * main graph is converted.  int8 and fp16 replace it with the smaller
 * tensor and a DequantizeLinear or Cast node that gives the float weight
 * under its own name, so the rest of the graph is unchanged; int4 replaces
 * each MatMul using it with a MatMulNBits (and a Gemm, when it has
 * transA 0 and alpha and beta 1, with a MatMulNBits and an Add of its
 * bias), importing the com.microsoft domain.  Rounding is to the nearest,
 * ties to even; int8 scales are the largest magnitude over 127, int4's
 * over 7.  Everything else is written as the input has it, byte for byte;
 * weights held in external data are written inline, and a result over
 * 2 GiB is refused.  The output is written under a temporary name and
 * renamed, so \p out_path may be \p in_path.  ONNX Runtime and shardnet
 * both run what is written.
 * \param options  NULL: int8 per tensor.
 * \param report   NULL, or filled (see shardnet_quantize_report).
 * \return SHARDNET_IO_ERROR (unreadable input, unwritable output),
 *         SHARDNET_INVALID_ARGUMENT (bad options, a malformed model, or
 *         one whose opset lacks what the form needs: DequantizeLinear
 *         below opset 10, its axis for per-channel int8 below 13),
 *         SHARDNET_UNSUPPORTED (a result over 2 GiB).
 */
SHARDNET_API shardnet_status shardnet_model_quantize(
    const char *in_path, const char *out_path,
    const shardnet_quantize_options *options,
    shardnet_quantize_report *report);

/** Opaque handle: a model placed on devices, ready to run. */
typedef struct shardnet_session shardnet_session_t;

/**
 * \brief Place a model on devices.
 * \param devices  a device list (see shardnet_devices_select()) naming one
 *                 device; for several, see shardnet_session_create_with().
 * \param[out] out  the session, released with shardnet_session_free().
 * \return SHARDNET_UNSUPPORTED listing every operator shardnet lacks.
 */
SHARDNET_API shardnet_status shardnet_session_create(shardnet_context_t *ctx,
                                                     shardnet_model_t *model,
                                                     const char *devices,
                                                     shardnet_session_t **out);

/**
 * How a session spreads a model over several devices.
 *
 * The struct can grow without breaking programs built against an older
 * one: the library reads only the \p size bytes the caller states, and
 * fields past them keep their defaults.  A program built against a newer
 * header gives a larger size; this library accepts it when every byte past
 * the fields it knows is 0 (the newer options left unset), and refuses it
 * with SHARDNET_INVALID_ARGUMENT otherwise.
 */
typedef struct shardnet_session_options {
    /**
     * sizeof(shardnet_session_options).  0 stands for the size of the first
     * version of the struct (up to plan_file), so that a struct initialised
     * with only the fields it sets (`{.split = "layer"}`) is valid.
     */
    size_t size;
    /**
     * NULL: "none" with one device, "auto" with several.
     * "none": one device runs everything;
     * "layer": contiguous ranges of the model's layers become pipeline
     * stages, one per listed device in order, cut where the measured
     * device speeds balance them; the batch flows through in micro-batches;
     * "tensor": a perceptron (a chain of Gemm layers) sharded across the
     * devices in Megatron pairs: a column-parallel layer, then a
     * row-parallel one whose partial sums an all-reduce combines; feature
     * slices follow the devices' measured speeds;
     * "hybrid": pipeline stages, each tensor-split over a group of
     * consecutive devices (three devices or more);
     * "replicated": pipeline stages, each on a group of consecutive
     * devices that each hold the stage whole and take its micro-batches
     * in turn (PipeDream's "2-1"; two devices or more): the planner's
     * best grouping, or a plan file's replicas;
     * "data": every device runs the whole model (a copy of every weight
     * each) on rows of the batch of its own, as many as the cost model
     * says it finishes with the others, the outputs put together in row
     * order; a batch whose rows the model's nodes mix (or of fewer than
     * four rows) runs whole on the fastest device;
     * "auto": at the first run, the cost model estimates one device (each
     * listed one), the layer, hybrid, replicated, data and tensor
     * splits, and the fastest estimate is used.
     */
    const char *split;
    /** Layer split: micro-batches per run; 0 = one per device.  Each
     * keeps at least two rows of a batch larger than one (a batch of 4
     * asked for 4 micro-batches gets 2), so that every row comes out as
     * it does in the whole batch on one device. */
    size_t micro_batches;
    /**
     * A plan file written by shardnet_session_save_plan() (NULL: none): it
     * fixes the split, the devices (used when the devices argument is NULL
     * or empty), the micro-batches, the layer split's cuts, the hybrid
     * split's groups, the replicated split's replicas per stage, the
     * data split's rows per device and the tensor split's strategies.
     */
    const char *plan_file;
} shardnet_session_options;

/**
 * \brief shardnet_session_create() with options (NULL = defaults).
 * \return SHARDNET_INVALID_ARGUMENT for an unknown split, several
 *         devices with split "none", or options whose size this library
 *         cannot read (see shardnet_session_options).  A model the tensor split cannot shard
 *         fails at its first run with SHARDNET_UNSUPPORTED.
 */
SHARDNET_API shardnet_status shardnet_session_create_with(
    shardnet_context_t *ctx, shardnet_model_t *model, const char *devices,
    const shardnet_session_options *options, shardnet_session_t **out);

/**
 * \brief The plan alternatives and their estimated times for the bound
 * inputs (one device, each listed device; the layer split and its stages),
 * the choice, and what the session runs, one item per line.
 * \return the length of the full text.
 */
SHARDNET_API size_t shardnet_session_describe(shardnet_session_t *session,
                                             char *buf, size_t cap);

/**
 * \brief Write the plan the session runs (after a run: "auto" decides then)
 * as a small text file: the split, the devices, the micro-batches and the
 * layer split's cuts (indices of the first node of each stage after the
 * first, in the model's sorted, simplified node order), one "key value"
 * per line.  It can be edited and given back through
 * shardnet_session_options.plan_file.
 */
SHARDNET_API shardnet_status shardnet_session_save_plan(
    shardnet_session_t *session, const char *path);

/** \brief Release a session. NULL is ignored. */
SHARDNET_API void shardnet_session_free(shardnet_session_t *session);

/**
 * \brief Bind input \p index (model order) to caller memory.
 *
 * The data is read at each shardnet_session_run() and must stay valid until
 * then.  Symbolic dimensions (a batch size) take the given sizes; a new
 * shape re-plans the model on the next run (plans are cached per shape).
 * \param dims  rank sizes; the data holds their product of elements.
 */
SHARDNET_API shardnet_status shardnet_session_set_input(
    shardnet_session_t *session, size_t index, shardnet_dtype dtype, int rank,
    const int64_t *dims, const void *data);

/** \brief The index of the input called \p name, or SHARDNET_INVALID_ARGUMENT. */
SHARDNET_API shardnet_status shardnet_session_input_index(
    const shardnet_session_t *session, const char *name, size_t *index);

/** \brief Run the model on the bound inputs; blocks until the outputs are
 * on the host. */
SHARDNET_API shardnet_status shardnet_session_run(shardnet_session_t *session);

/** A stream's source: bind batch \p batch's inputs with
 * shardnet_session_set_input(); their memory must stay valid until that
 * batch is drained (two batches may be in flight: use two buffers). */
typedef shardnet_status (*shardnet_feed_fn)(void *user, size_t batch,
                                            shardnet_session_t *session);
/** A stream's sink: batch \p batch's outputs are ready
 * (shardnet_session_output(), valid until this call returns). */
typedef shardnet_status (*shardnet_drain_fn)(void *user, size_t batch,
                                             shardnet_session_t *session);

/**
 * \brief Run \p count batches back to back, for throughput.
 *
 * Batches are fed and drained in order; every batch must be shaped like the
 * first.  A layer, hybrid or replicated split overlaps consecutive
 * batches: batch b + 1
 * enters the first stage while batch b is in the later ones, so the
 * pipeline fills and empties once per stream instead of once per batch (the
 * feed of batch b + 1 comes before the drain of batch b).  Other splits run
 * the batches one after another.  A callback's error stops the stream and
 * is returned.
 */
SHARDNET_API shardnet_status shardnet_session_run_stream(
    shardnet_session_t *session, size_t count, shardnet_feed_fn feed,
    shardnet_drain_fn drain, void *user);

/**
 * \brief Output \p index of the last run.
 * \param[out] info  its name, type and shape.
 * \param[out] data  host memory owned by the session, valid until the next
 *                   run or shardnet_session_free().
 */
SHARDNET_API shardnet_status shardnet_session_output(
    shardnet_session_t *session, size_t index, shardnet_tensor_info *info,
    const void **data);

/* ------------------------------------------------------------------------
 * Traces
 * ---------------------------------------------------------------------- */

/**
 * \brief Start recording what every device does (process-wide): kernels,
 * transfers, pipeline micro-batches.  While recording, each kernel is
 * waited for, so runs are slower.
 */
SHARDNET_API shardnet_status shardnet_trace_start(void);

/**
 * \brief Stop recording and write the trace to \p path (NULL: discard) as
 * Chrome trace-event JSON, one track per device; open it in Perfetto or
 * chrome://tracing.
 */
SHARDNET_API shardnet_status shardnet_trace_stop(const char *path);

/* ------------------------------------------------------------------------
 * Tensor files
 * ---------------------------------------------------------------------- */

/** A tensor in host memory, as read from a file. */
typedef struct shardnet_tensor {
    shardnet_tensor_info info; /**< info.name: the file's tensor name or NULL */
    void *data;                /**< owned; freed by shardnet_tensor_free() */
    size_t nbytes;
} shardnet_tensor;

/**
 * \brief Read a tensor file: NumPy .npy, or an ONNX TensorProto .pb (the
 * format of the ONNX test data), chosen by the file's extension.  A tensor
 * with a zero dimension is valid: it loads with data NULL and nbytes 0.
 * \param[out] out  filled on success; release with shardnet_tensor_free().
 */
SHARDNET_API shardnet_status shardnet_tensor_load(const char *path,
                                                  shardnet_tensor *out);

/** \brief Write a tensor as a NumPy .npy file (version 1.0, C order); data
 * may be NULL when a dimension is zero (no elements). */
SHARDNET_API shardnet_status shardnet_tensor_save(
    const char *path, const shardnet_tensor_info *info, const void *data);

/** \brief Free what shardnet_tensor_load() allocated (the tensor's data and
 * name; the struct itself is the caller's). NULL is ignored. */
SHARDNET_API void shardnet_tensor_free(shardnet_tensor *tensor);

/** \brief The earlier name of shardnet_tensor_free(), kept so that programs
 * built against it still link; new code calls shardnet_tensor_free(). */
SHARDNET_API void shardnet_tensor_release(shardnet_tensor *tensor);

/* --- Operators ------------------------------------------------------------ */

/** \brief One ONNX operator shardnet runs (see shardnet_operator_get()). */
typedef struct shardnet_operator_info {
    const char *name;   /**< op_type, e.g. "MatMul" (static storage) */
    const char *domain; /**< "ai.onnx" for the default domain */
    int since_opset;    /**< the first opset of the form implemented */
    int until_opset;    /**< the last one; 0: up to the newest */
} shardnet_operator_info;

/** \brief Number of operators in shardnet's operator registry. */
SHARDNET_API size_t shardnet_operator_count(void);

/** \brief Operator i (0 <= i < shardnet_operator_count()) of the registry.
 * \return SHARDNET_INVALID_ARGUMENT when i is out of range or info NULL. */
SHARDNET_API shardnet_status shardnet_operator_get(
    size_t i, shardnet_operator_info *info);

/**
 * \brief The backend kinds that run operator i (0 <= i <
 * shardnet_operator_count()) among the devices of ctx, as "cpu,cl".
 *
 * A kind is listed, once, in the order of the context's devices, when one
 * of its devices (of this process) runs every kernel the operator's
 * lowering may launch.  The answer speaks of the devices ctx found, not of
 * the backends the library was built with: a kind of which no device was
 * found is absent, and a context without devices gives "".
 * \param buf, cap  receives the NUL-terminated list (truncated to cap).
 * \return SHARDNET_INVALID_ARGUMENT when ctx is NULL, i is out of range,
 *         or buf is NULL with cap > 0.
 */
SHARDNET_API shardnet_status shardnet_operator_backends(
    const shardnet_context_t *ctx, size_t i, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* SHARDNET_H */
