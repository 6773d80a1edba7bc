/*
 * The backend interface (private, never installed).
 *
 * Every backend fills one sn_backend_ops table with designated initialisers
 * in its own file under backends/<kind>/.  A member left NULL means "not
 * supported"; callers go through the sn_* wrappers in lib/kernels.c, which
 * validate every descriptor against the buffers' sizes before the backend
 * sees it, so backends may assume well-formed, in-bounds arguments.
 *
 * Execution model, the same on every backend: each device is an in-order
 * queue.  Kernels are enqueued and may run asynchronously; buffer_write and
 * buffer_read block and are ordered after everything enqueued before them;
 * synchronize waits for the queue to drain and returns the first error an
 * asynchronous kernel hit since the last synchronize (sticky until then).
 * Buffers passed to a kernel must stay alive until the kernel has finished.
 *
 * All tensors are float32, row-major (C order), addressed as a buffer plus an
 * offset counted in elements.
 */
#ifndef SN_BACKEND_H
#define SN_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "shardnet.h"

#define SN_BACKEND_ABI 1

/** Highest tensor rank the element-wise kernels accept. */
#define SN_MAX_DIMS 8

typedef struct sn_device sn_device;
typedef struct sn_buffer sn_buffer;

/** Memory owned by one device. */
struct sn_buffer {
    sn_device *dev;
    size_t size;  /* bytes */
    void *host;   /* cpu backend: the memory itself; NULL on others */
    void *handle; /* backend object (cl_mem on OpenCL) */
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
typedef struct sn_gemm_desc {
    int trans_a, trans_b; /* non-zero: use the transpose of the stored matrix */
    size_t m, n, k;
    float alpha, beta;
    sn_view a, b, c;
    size_t lda, ldb, ldc;
    size_t batch;                        /* >= 1 */
    size_t stride_a, stride_b, stride_c; /* elements between batch items */
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

#define SN_UNARY_OP_MAP(X)                                                    \
    X(RELU, "relu") X(SIGMOID, "sigmoid") X(TANH, "tanh") X(ERF, "erf")       \
    X(EXP, "exp") X(LOG, "log") X(SQRT, "sqrt") X(NEG, "neg") X(ABS, "abs")

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

/* Flags for buffer_map. */
#define SN_MAP_READ 1
#define SN_MAP_WRITE 2

/** One backend: a table of function pointers, filled once per backend. */
typedef struct sn_backend_ops {
    unsigned abi;     /* SN_BACKEND_ABI */
    const char *kind; /* "cpu", "cl" */

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

    shardnet_status (*gemm)(sn_device *dev, const sn_gemm_desc *d);
    shardnet_status (*binary)(sn_device *dev, const sn_binary_desc *d);
    shardnet_status (*unary)(sn_device *dev, const sn_unary_desc *d);
    shardnet_status (*softmax)(sn_device *dev, const sn_softmax_desc *d);
    shardnet_status (*reduce)(sn_device *dev, const sn_reduce_desc *d);

    shardnet_status (*synchronize)(sn_device *dev);
} sn_backend_ops;

/** One device, owned by the context that discovered it. */
struct sn_device {
    const sn_backend_ops *ops;
    shardnet_device_info info;
    void *impl; /* backend state */
};

/*
 * Discovery: each backend appends its devices to the list.  A backend whose
 * platform is absent (no OpenCL ICD) appends nothing and returns OK.
 */
typedef struct sn_device_list {
    sn_device **items;
    size_t count, cap;
} sn_device_list;

shardnet_status sn_device_list_push(sn_device_list *list, sn_device *dev);

shardnet_status sn_cpu_discover(sn_device_list *list);
#ifdef SN_HAVE_OPENCL
shardnet_status sn_opencl_discover(sn_device_list *list);
#endif

/* Checked entry points (lib/kernels.c): validate, then call the backend. */
shardnet_status sn_buffer_alloc(sn_device *dev, size_t bytes, sn_buffer **out);
void sn_buffer_free(sn_buffer *buf);
shardnet_status sn_buffer_write(sn_buffer *buf, size_t offset, const void *src,
                                size_t bytes);
shardnet_status sn_buffer_read(sn_buffer *buf, size_t offset, void *dst,
                               size_t bytes);
shardnet_status sn_buffer_map(sn_buffer *buf, size_t offset, size_t bytes,
                              int flags, void **ptr);
shardnet_status sn_buffer_unmap(sn_buffer *buf, void *ptr);
shardnet_status sn_gemm(sn_device *dev, const sn_gemm_desc *d);
shardnet_status sn_binary(sn_device *dev, const sn_binary_desc *d);
shardnet_status sn_unary(sn_device *dev, const sn_unary_desc *d);
shardnet_status sn_softmax(sn_device *dev, const sn_softmax_desc *d);
shardnet_status sn_reduce(sn_device *dev, const sn_reduce_desc *d);
shardnet_status sn_synchronize(sn_device *dev);

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

/* Context internals used by the CLI and the tests. */
sn_device *sn_context_device(shardnet_context_t *ctx, size_t index);

#endif /* SN_BACKEND_H */
