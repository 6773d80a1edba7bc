/*
 * The backend interface (private, never installed).
 *
 * Every backend fills one sn_backend_ops table with designated initialisers
 * in its own file under backends/<kind>/.  A member left NULL means "not
 * supported", and a kernel's variants may be refused one by one (the
 * supports member); sn_device_supports asks, before a plan uses a kernel.
 * Callers go through the sn_* wrappers in lib/backend/ (kernels.c,
 * device.c), which validate every descriptor against the buffers' sizes
 * before the backend sees it, so backends may assume well-formed,
 * in-bounds arguments.
 *
 * Execution model, the same on every backend: each device is one stream,
 * an in-order queue.  What is enqueued on it runs one command after the
 * other, in the order enqueued, and may run after the call that enqueued
 * it has returned:
 *
 *   - kernels (gemm ... gather) are always enqueued;
 *   - buffer_write_async and buffer_read_async enqueue a copy between a
 *     buffer and host memory; the host memory must stay alive and
 *     untouched (a write's source unchanged, a read's destination unread)
 *     until an event recorded after the copy has completed or the device
 *     has been synchronized;
 *   - buffer_write, buffer_read, buffer_map and buffer_lend block: they
 *     wait for what was enqueued before them, then do their work;
 *   - event_record enqueues a marker: the event completes once everything
 *     enqueued before it has finished.  event_wait blocks the host thread
 *     until then and returns the first error of that work (as synchronize
 *     does); event_query says whether it has completed, without blocking;
 *   - synchronize waits for the queue to drain and returns the first
 *     error an enqueued command hit since the last synchronize.
 *
 * The asynchronous copies and the events are optional members: where a
 * backend lacks them, the wrappers (lib/backend/device.c) copy with the
 * blocking calls and make an event whose wait is a synchronize, so that
 * callers need no special case.  Buffers passed to a kernel or a copy must
 * stay alive until it has finished.
 *
 * All tensors are float32, row-major (C order), addressed as a buffer plus an
 * offset counted in elements.
 */
#ifndef SN_BACKEND_H
#define SN_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "shardnet.h"

/* The number of this interface: every backend states the one it was
 * written against (sn_backend.abi, sn_backend_ops.abi) and the registry
 * refuses one that differs.  Raise it with every change to the structs and
 * the vtable below. */
#define SN_BACKEND_ABI 7

/** Highest tensor rank the element-wise kernels accept. */
#define SN_MAX_DIMS 8

typedef struct sn_device sn_device;
typedef struct sn_buffer sn_buffer;
typedef struct sn_event sn_event;

/** Memory owned by one device.  A backend that keeps more per buffer (the
 * CPU backend its host memory) embeds this struct as the first member of
 * its own, so that an sn_buffer * converts back. */
struct sn_buffer {
    sn_device *dev;
    size_t size;  /* bytes */
    void *handle; /* backend object (cl_mem on OpenCL) */
};

/** A point in a device's stream (event_record).  A backend that keeps
 * more per event embeds this struct as the first member of its own. */
struct sn_event {
    sn_device *dev;
};

/** A float tensor's first element: buffer + offset in elements. */
typedef struct sn_view {
    sn_buffer *buf;
    size_t offset;
} sn_view;

/*
 * C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b]  for b in [0, batch).
 * op(A) is m x k, op(B) is k x n, C is m x n, all row-major with leading
 * dimensions lda/ldb/ldc (elements between rows as stored).  Batch item b of
 * A starts at a.offset + b * stride_a (stride 0 reuses one matrix).
 */
typedef enum sn_act {
    SN_ACT_NONE = 0,
    SN_ACT_RELU = 1
} sn_act;

/*
 * Fused epilogue (optional): after the product, C += bias, then C = act(C).
 * bias.buf NULL means no bias; otherwise bias holds n floats added to every
 * row (a Gemm/MatMul bias), or m floats added to every column when
 * bias_rows is set (a convolution's per-output-channel bias, C being
 * channels x pixels).  The same bias serves every batch item.
 */
typedef struct sn_gemm_desc {
    int trans_a, trans_b; /* non-zero: use the transpose of the stored matrix */
    size_t m, n, k;
    float alpha, beta;
    sn_view a, b, c;
    size_t lda, ldb, ldc;
    size_t batch;                        /* >= 1 */
    size_t stride_a, stride_b, stride_c; /* elements between batch items */
    sn_view bias;
    int bias_rows;
    sn_act act;
    /* B's contents never change while its buffer lives (a weight): a
     * backend may keep a repacked copy of it, keyed by buffer and layout. */
    int b_const;
} sn_gemm_desc;

#define SN_BINARY_OP_MAP(X) X(ADD, "add") X(SUB, "sub") X(MUL, "mul") X(DIV, "div") X(MAX, "max") X(MIN, "min") X(POW, "pow")

typedef enum sn_binary_op {
#define SN_ENUM_(name, str) SN_BINARY_##name,
    SN_BINARY_OP_MAP(SN_ENUM_)
#undef SN_ENUM_
    SN_BINARY_COUNT
} sn_binary_op;

/*
 * c[i] = a[ia] op b[ib] over the output shape `shape` (rank dims, C order,
 * rank 0 = one element).  stride_a / stride_b give, per output dimension,
 * the element stride in a / b: 0 where that operand is broadcast.  The
 * output c is contiguous.  sn_binary_broadcast() fills shape and strides
 * from two numpy-broadcastable shapes.
 */
typedef struct sn_binary_desc {
    sn_binary_op op;
    size_t rank;
    size_t shape[SN_MAX_DIMS];
    size_t stride_a[SN_MAX_DIMS];
    size_t stride_b[SN_MAX_DIMS];
    sn_view a, b, c;
} sn_binary_desc;

/*
 * Unary ops; alpha and beta are the op's parameters:
 *   LEAKY_RELU   x < 0 ? alpha * x : x
 *   HARD_SIGMOID max(0, min(1, alpha * x + beta))
 *   CLIP         min(max(x, alpha), beta)   (NaN stays NaN)
 *   GELU         0.5 x (1 + erf(x / sqrt(2)))
 *   GELU_TANH    0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
 *   RELU         x > 0 ? x : 0 (NaN stays NaN); SIGMOID 1 / (1 + exp(-x))
 */
#define SN_UNARY_OP_MAP(X)                                                    \
    X(RELU, "relu") X(SIGMOID, "sigmoid") X(TANH, "tanh") X(ERF, "erf")       \
    X(EXP, "exp") X(LOG, "log") X(SQRT, "sqrt") X(NEG, "neg") X(ABS, "abs")   \
    X(LEAKY_RELU, "leaky_relu") X(HARD_SIGMOID, "hard_sigmoid")               \
    X(CLIP, "clip") X(GELU, "gelu") X(GELU_TANH, "gelu_tanh")

typedef enum sn_unary_op {
#define SN_ENUM_(name, str) SN_UNARY_##name,
    SN_UNARY_OP_MAP(SN_ENUM_)
#undef SN_ENUM_
    SN_UNARY_COUNT
} sn_unary_op;

/* y[i] = op(x[i]) for i in [0, n); x and y may be the same memory. */
typedef struct sn_unary_desc {
    sn_unary_op op;
    size_t n;
    sn_view x, y;
    float alpha, beta;
} sn_unary_desc;

/*
 * Softmax over the middle axis of x viewed as (outer, len, inner), written
 * to y of the same shape: y = exp(x - max) / sum(exp(x - max)), or its log
 * when log_softmax is set.
 */
typedef struct sn_softmax_desc {
    size_t outer, len, inner;
    int log_softmax;
    sn_view x, y;
} sn_softmax_desc;

#define SN_REDUCE_OP_MAP(X) X(SUM, "sum") X(MEAN, "mean") X(MAX, "max")

typedef enum sn_reduce_op {
#define SN_ENUM_(name, str) SN_REDUCE_##name,
    SN_REDUCE_OP_MAP(SN_ENUM_)
#undef SN_ENUM_
    SN_REDUCE_COUNT
} sn_reduce_op;

/* x viewed as (outer, len, inner) reduced over len into y (outer, inner). */
typedef struct sn_reduce_desc {
    sn_reduce_op op;
    size_t outer, len, inner;
    sn_view x, y;
} sn_reduce_desc;

/*
 * Where: out[i] = cond[ic] != 0 ? x[ix] : y[iy] over the output shape, each
 * operand with its own broadcast strides (0 where broadcast), like
 * sn_binary_desc.  cond holds floats (0.0f is false).  out is contiguous.
 */
typedef struct sn_where_desc {
    size_t rank;
    size_t shape[SN_MAX_DIMS];
    size_t stride_cond[SN_MAX_DIMS];
    size_t stride_x[SN_MAX_DIMS];
    size_t stride_y[SN_MAX_DIMS];
    sn_view cond, x, y, out;
} sn_where_desc;

/*
 * Strided copy: dst[sum i_d * dst_stride[d]] = src[sum i_d * src_stride[d]]
 * for every index (i_0 .. i_rank-1) of shape; views give element (0, ..., 0).
 * Strides are signed (a Slice with negative steps), and a source stride of
 * 0 repeats (Expand).  This one kernel moves data for Transpose, Slice,
 * Concat, Split, Expand and plain copies.  dst elements must not overlap.
 */
typedef struct sn_copy_desc {
    size_t rank;
    size_t shape[SN_MAX_DIMS];
    ptrdiff_t src_stride[SN_MAX_DIMS];
    ptrdiff_t dst_stride[SN_MAX_DIMS];
    sn_view src, dst;
} sn_copy_desc;

/*
 * im2col for a 2-D convolution (a 1-D one has in_h = k_h = out_h = 1):
 * src is (channels, in_h, in_w); dst is (channels * k_h * k_w, out_h * out_w)
 * row-major, row (c, ky, kx) and column (oy, ox) holding
 *   src[c, oy * stride_h + ky * dil_h - pad_top, ox * stride_w + kx * dil_w - pad_left]
 * or 0 where that falls outside the input.
 */
typedef struct sn_im2col_desc {
    size_t channels, in_h, in_w, out_h, out_w, k_h, k_w;
    size_t stride_h, stride_w, dil_h, dil_w, pad_top, pad_left;
    sn_view src, dst;
} sn_im2col_desc;

typedef enum sn_pool_op {
    SN_POOL_MAX,
    SN_POOL_AVG,
    SN_POOL_COUNT
} sn_pool_op;

/*
 * 2-D pooling over `planes` planes (N * C), src (planes, in_h, in_w), dst
 * (planes, out_h, out_w).  Window (oy, ox) covers input rows
 * oy * stride_h - pad_top + ky * dil_h for ky < k_h (columns alike).  MAX
 * ignores positions outside the input.  AVG divides by the number of
 * positions inside the input, or with count_include_pad by the number
 * inside the padded input [-pad_top, in_h + pad_bottom) x [-pad_left,
 * in_w + pad_right) (a window that runs past that, in ceil mode, counts
 * only the part inside).
 */
typedef struct sn_pool_desc {
    sn_pool_op op;
    int count_include_pad;
    size_t planes, in_h, in_w, out_h, out_w, k_h, k_w;
    size_t stride_h, stride_w, dil_h, dil_w;
    size_t pad_top, pad_left, pad_bottom, pad_right;
    sn_view src, dst;
} sn_pool_desc;

/*
 * Depthwise 2-D convolution, a grouped convolution with one input channel
 * per group (a 1-D one has in_h = k_h = out_h = 1): src (images, channels,
 * in_h, in_w), weights (channels * mult, k_h, k_w), dst (images, channels *
 * mult, out_h, out_w); output channel o reads input channel o / mult:
 *   dst[n, o, oy, ox] = act(sum over ky, kx of w[o, ky, kx] *
 *       src[n, o / mult, oy * stride_h + ky * dil_h - pad_top,
 *                        ox * stride_w + kx * dil_w - pad_left] + bias[o])
 * summed in (ky, kx) order, positions outside the input left out.
 * bias.buf NULL: no bias.
 */
typedef struct sn_dwconv_desc {
    size_t images, channels, mult, in_h, in_w, out_h, out_w, k_h, k_w;
    size_t stride_h, stride_w, dil_h, dil_w, pad_top, pad_left;
    sn_view src, weights, bias, dst;
    sn_act act;
} sn_dwconv_desc;

/*
 * Layer normalisation over the last axis of x viewed as (outer, len):
 * y = (x - mean) / sqrt(var + epsilon) * scale + bias, var the biased
 * variance; scale has len floats, bias has len floats or bias.buf is NULL.
 */
typedef struct sn_layernorm_desc {
    size_t outer, len;
    float epsilon;
    sn_view x, scale, bias, y;
} sn_layernorm_desc;

/*
 * Gather along the middle axis of data viewed as (outer, axis_len, inner):
 * out (outer, nidx, inner) = data[o, idx[j], i].  indices holds nidx int32
 * values (the buffer stores them bit for bit; views count 4-byte elements);
 * a negative index counts from the end; one still out of range gives 0.
 */
typedef struct sn_gather_desc {
    size_t outer, axis_len, inner, nidx;
    sn_view data, indices, out;
} sn_gather_desc;

/*
 * The kernels, one per kernel member of sn_backend_ops, for asking a
 * device whether it runs one (sn_device_supports).  Four have variants:
 * binary (an sn_binary_op), unary (an sn_unary_op), reduce (an
 * sn_reduce_op) and pool (an sn_pool_op).
 */
#define SN_KERNEL_MAP(X)                                                      \
    X(GEMM, "gemm") X(BINARY, "binary") X(UNARY, "unary")                     \
    X(SOFTMAX, "softmax") X(REDUCE, "reduce") X(WHERE, "where")               \
    X(COPY, "copy") X(IM2COL, "im2col") X(POOL, "pool")                       \
    X(LAYERNORM, "layernorm") X(GATHER, "gather")                             \
    X(DWCONV, "dwconv")

typedef enum sn_kernel {
#define SN_ENUM_(name, str) SN_KERNEL_##name,
    SN_KERNEL_MAP(SN_ENUM_)
#undef SN_ENUM_
    SN_KERNEL_COUNT
} sn_kernel;

/* sn_device_supports's variant for "any variant", and for the kernels
 * without variants. */
#define SN_VARIANT_ANY (-1)

/* Any kernel's descriptor: the member its sn_kernel names (a plan's step,
 * a CPU device's queued task). */
typedef union sn_kernel_desc {
    sn_gemm_desc gemm;
    sn_binary_desc binary;
    sn_unary_desc unary;
    sn_softmax_desc softmax;
    sn_reduce_desc reduce;
    sn_where_desc where;
    sn_copy_desc copy;
    sn_im2col_desc im2col;
    sn_pool_desc pool;
    sn_layernorm_desc layernorm;
    sn_gather_desc gather;
    sn_dwconv_desc dwconv;
} sn_kernel_desc;

/* Flags for buffer_map. */
#define SN_MAP_READ 1
#define SN_MAP_WRITE 2

/** One backend: a table of function pointers, filled once per backend. */
typedef struct sn_backend_ops {
    unsigned abi;     /* SN_BACKEND_ABI */
    const char *kind; /* as device strings name it: "cpu" in "cpu:0" */

    /* Release everything the device holds (called once, after a sync). */
    void (*device_free)(sn_device *dev);

    shardnet_status (*buffer_alloc)(sn_device *dev, size_t bytes,
                                    sn_buffer **out);
    void (*buffer_free)(sn_buffer *buf);
    shardnet_status (*buffer_write)(sn_buffer *buf, size_t offset,
                                    const void *src, size_t bytes);
    shardnet_status (*buffer_read)(sn_buffer *buf, size_t offset, void *dst,
                                   size_t bytes);
    /* Optional: host pointer to [offset, offset + bytes), valid until unmap.
     * Zero-copy where the device shares memory with the host. */
    shardnet_status (*buffer_map)(sn_buffer *buf, size_t offset, size_t bytes,
                                  int flags, void **ptr);
    shardnet_status (*buffer_unmap)(sn_buffer *buf, void *ptr);
    /* Optional, for buffers that are host memory: until called again with
     * NULL, the buffer's storage is the caller's `ptr` (buf->size bytes,
     * any alignment), so that inputs need no copy.  Ordered like a write. */
    shardnet_status (*buffer_lend)(sn_buffer *buf, void *ptr);
    /* Optional: buffer_write and buffer_read enqueued on the stream
     * instead of blocking (see the execution model above for how long the
     * host memory must stay as it is). */
    shardnet_status (*buffer_write_async)(sn_buffer *buf, size_t offset,
                                          const void *src, size_t bytes);
    shardnet_status (*buffer_read_async)(sn_buffer *buf, size_t offset,
                                         void *dst, size_t bytes);

    shardnet_status (*gemm)(sn_device *dev, const sn_gemm_desc *d);
    shardnet_status (*binary)(sn_device *dev, const sn_binary_desc *d);
    shardnet_status (*unary)(sn_device *dev, const sn_unary_desc *d);
    shardnet_status (*softmax)(sn_device *dev, const sn_softmax_desc *d);
    shardnet_status (*reduce)(sn_device *dev, const sn_reduce_desc *d);
    shardnet_status (*where)(sn_device *dev, const sn_where_desc *d);
    shardnet_status (*copy)(sn_device *dev, const sn_copy_desc *d);
    shardnet_status (*im2col)(sn_device *dev, const sn_im2col_desc *d);
    shardnet_status (*pool)(sn_device *dev, const sn_pool_desc *d);
    shardnet_status (*layernorm)(sn_device *dev, const sn_layernorm_desc *d);
    shardnet_status (*gather)(sn_device *dev, const sn_gather_desc *d);
    shardnet_status (*dwconv)(sn_device *dev, const sn_dwconv_desc *d);

    /* Optional: does dev run kernel k, of variant `variant` (an
     * sn_unary_op, sn_binary_op, sn_reduce_op or sn_pool_op where k has
     * variants, in range; SN_VARIANT_ANY: every variant)?  Asked only for
     * a kernel whose member is set; without this member, the device runs
     * every variant of every kernel it has a member for. */
    int (*supports)(sn_device *dev, sn_kernel k, int variant);

    shardnet_status (*synchronize)(sn_device *dev);

    /* Optional, all three or none: an event recorded after everything
     * enqueued so far; waiting for it (the first error of that work, or
     * SHARDNET_OK); freeing it, done or not.  event_query, optional on
     * top: *done set non-zero once the event has completed, without
     * blocking; an error of the work before it may come back here too. */
    shardnet_status (*event_record)(sn_device *dev, sn_event **out);
    shardnet_status (*event_wait)(sn_event *ev);
    shardnet_status (*event_query)(sn_event *ev, int *done);
    void (*event_free)(sn_event *ev);

    /* Optional: with on, run the calling host thread near the device (a
     * CPU device: on its package), for the threads that drive one device
     * each in a split; otherwise such a thread, polling for its kernels,
     * lands on a core another device computes on.  With !on, give the
     * thread back the binding it had before. */
    void (*bind_thread)(sn_device *dev, int on);
} sn_backend_ops;

/** One device, owned by the context that discovered it. */
struct sn_device {
    const sn_backend_ops *ops;
    shardnet_device_info info;
    void *impl; /* backend state */
    /* In a job of several processes (lib/comm/world.h): the process the device
     * is on.  A remote device (another process's) is a description only:
     * its ops have no buffers and no kernels. */
    unsigned process;
    int remote;
    /* The configuration of the context the device belongs to (its memory
     * limit, its cache folder...), set by the context; NULL outside one
     * (sn_config_or_env: the process's). */
    const sn_config *config;
};

/* --- the registry (lib/backend/registry.c) ------------------------------ */

/* The devices discovered so far, in discovery order; each backend appends
 * its own.  sn_device_list_push refuses a device whose ops state another
 * SN_BACKEND_ABI. */
typedef struct sn_device_list {
    sn_device **items;
    size_t count, cap;
} sn_device_list;

shardnet_status sn_device_list_push(sn_device_list *list, sn_device *dev);
/* Free every device of the list (device_free) and empty the list. */
void sn_device_list_free(sn_device_list *list);

/* What discovery needs to know that only layers above the backends can
 * tell (a backend sees only this interface and lib/core): this process's
 * place among the processes of its job on the same machine that the
 * launcher left unbound, node_rank of node_size (0 of 1 outside a job),
 * and the configuration of the context being made (NULL: the process's).
 * The CPU backend gives such processes even shares of the cores and sizes
 * its teams by config's cpu_threads; the OpenCL backend keeps config for
 * its kernel sources and program cache. */
typedef struct sn_discover_args {
    unsigned node_rank, node_size;
    const sn_config *config;
} sn_discover_args;

/*
 * One backend, as its folder exports it (backends/<kind>/): the interface
 * number it was written against, its kind as device strings name it, and
 * its discovery, which appends the backend's devices to the list.  A
 * backend whose platform is absent (no OpenCL ICD) appends nothing and
 * returns OK.
 */
typedef struct sn_backend {
    unsigned abi; /* SN_BACKEND_ABI */
    const char *kind;
    shardnet_status (*discover)(sn_device_list *list,
                                const sn_discover_args *args);
} sn_backend;

/* Every compiled backend's devices, in the registry's order, appended to
 * list; on failure the list is left as it was. */
shardnet_status sn_backends_discover(sn_device_list *list,
                                     const sn_discover_args *args);
/* One backend's devices: a backend that states another SN_BACKEND_ABI is
 * refused with SHARDNET_INTERNAL and a message that says so.  (The
 * registry's own check, open to the tests.) */
shardnet_status sn_backend_discover(const sn_backend *backend,
                                    sn_device_list *list,
                                    const sn_discover_args *args);
/* Is kind (len bytes, not NUL-terminated) a kind device strings may name,
 * built in or not? */
int sn_backend_kind_known(const char *kind, size_t len);
/* The kinds device strings may name, as "cpu, cl, cuda", in buf (cap
 * bytes, truncated). */
void sn_backend_kinds(char *buf, size_t cap);
/* A device of another process of the job: its description only (no
 * buffers, no kernels), under its kind's name; freed by device_free. */
shardnet_status sn_remote_device_new(const shardnet_device_info *info,
                                     sn_device **out);

/* Checked entry points (lib/backend/device.c and kernels.c): validate,
 * then call the backend. */
shardnet_status sn_buffer_alloc(sn_device *dev, size_t bytes, sn_buffer **out);
void sn_buffer_free(sn_buffer *buf);
shardnet_status sn_buffer_write(sn_buffer *buf, size_t offset, const void *src,
                                size_t bytes);
shardnet_status sn_buffer_read(sn_buffer *buf, size_t offset, void *dst,
                               size_t bytes);
shardnet_status sn_buffer_map(sn_buffer *buf, size_t offset, size_t bytes,
                              int flags, void **ptr);
shardnet_status sn_buffer_unmap(sn_buffer *buf, void *ptr);
/* Asynchronous copies, checked like the blocking ones; on a backend
 * without them, the blocking copy.  The host memory must stay as it is
 * until an event recorded after the copy has completed (or the device is
 * synchronized). */
shardnet_status sn_buffer_write_async(sn_buffer *buf, size_t offset,
                                      const void *src, size_t bytes);
shardnet_status sn_buffer_read_async(sn_buffer *buf, size_t offset, void *dst,
                                     size_t bytes);
/* Events: *out completes when everything enqueued on dev before it has
 * finished.  sn_event_wait blocks until then and returns the first error
 * of that work; sn_event_query sets *done without blocking.  On a backend
 * without events, the event's wait is a synchronize of its device and its
 * query waits (so says done, always).  sn_event_free takes NULL. */
shardnet_status sn_event_record(sn_device *dev, sn_event **out);
shardnet_status sn_event_wait(sn_event *ev);
shardnet_status sn_event_query(sn_event *ev, int *done);
void sn_event_free(sn_event *ev);
shardnet_status sn_gemm(sn_device *dev, const sn_gemm_desc *d);
shardnet_status sn_binary(sn_device *dev, const sn_binary_desc *d);
shardnet_status sn_unary(sn_device *dev, const sn_unary_desc *d);
shardnet_status sn_softmax(sn_device *dev, const sn_softmax_desc *d);
shardnet_status sn_reduce(sn_device *dev, const sn_reduce_desc *d);
shardnet_status sn_where(sn_device *dev, const sn_where_desc *d);
shardnet_status sn_copy(sn_device *dev, const sn_copy_desc *d);
shardnet_status sn_im2col(sn_device *dev, const sn_im2col_desc *d);
shardnet_status sn_pool(sn_device *dev, const sn_pool_desc *d);
shardnet_status sn_layernorm(sn_device *dev, const sn_layernorm_desc *d);
shardnet_status sn_gather(sn_device *dev, const sn_gather_desc *d);
shardnet_status sn_dwconv(sn_device *dev, const sn_dwconv_desc *d);
shardnet_status sn_synchronize(sn_device *dev);
/* Kernel k with its descriptor d: the checked entry point above that k
 * names. */
shardnet_status sn_launch(sn_device *dev, sn_kernel k, const sn_kernel_desc *d);
/* The variant of kernel k that d asks for (its op), SN_VARIANT_ANY for a
 * kernel without variants. */
int sn_kernel_desc_variant(sn_kernel k, const sn_kernel_desc *d);
/* Does dev run kernel k of variant `variant` (see sn_backend_ops.supports;
 * SN_VARIANT_ANY: all of its variants)?  0 for a remote device, a kernel
 * member left NULL, or a variant out of the kernel's range; else the
 * backend's answer, or 1 when it has no supports member. */
int sn_device_supports(const sn_device *dev, sn_kernel k, int variant);
/* How many variants kernel k has (SN_BINARY_COUNT for binary, ...); 0 for
 * a kernel without variants. */
int sn_kernel_variants(sn_kernel k);
/* For a backend's supports member: is `variant` of k one of the first
 * implemented[k] variants of its enum (for SN_VARIANT_ANY: are they all of
 * them)?  A backend lists how far its kernels go, so that a variant added
 * to an enum is refused until the backend implements it. */
int sn_variants_within(const int implemented[SN_KERNEL_COUNT], sn_kernel k,
                       int variant);
/* Bytes the planner may use on dev: its memory, capped by its context's
 * memory limit (sn_config.memory_limit) when set; 0 when unknown. */
uint64_t sn_device_memory(const sn_device *dev);
/* The calling thread drives dev from now on (bind_thread, if any); with
 * !on, the thread's earlier binding comes back. */
void sn_bind_thread(sn_device *dev, int on);

/*
 * Fill d->rank, d->shape, d->stride_a, d->stride_b for c = a op b with numpy
 * broadcasting of shape_a (rank_a dims) and shape_b (rank_b dims), both
 * contiguous.  Dimensions that can be merged are merged, so d->rank may be
 * smaller than max(rank_a, rank_b).  Fails on incompatible shapes.
 */
shardnet_status sn_binary_broadcast(sn_binary_desc *d, size_t rank_a,
                                    const size_t *shape_a, size_t rank_b,
                                    const size_t *shape_b);

const char *sn_binary_op_name(sn_binary_op op);
const char *sn_unary_op_name(sn_unary_op op);
const char *sn_reduce_op_name(sn_reduce_op op);
const char *sn_kernel_name(sn_kernel k);
/* "unary/erf", "gemm": kernel k and, where it has variants and variant is
 * one, the variant's name, in buf (cap bytes, truncated); returns buf. */
const char *sn_kernel_variant_name(sn_kernel k, int variant, char *buf,
                                   size_t cap);

/* Context internals used by the CLI and the tests. */
sn_device *sn_context_device(const shardnet_context_t *ctx, size_t index);

#endif /* SN_BACKEND_H */
