/*
 * The OpenCL backend's own declarations, shared by its files and seen
 * nowhere else: a device's state, its buffers, the kernels it keeps, and
 * the launch helpers every kernel's launcher uses.
 *
 *   opencl.c   discovery, a device's life, synchronize, the ops table
 *   buffer.c   buffers, their copies and mappings; events
 *   launch.c   programs and kernels on first use, launching one; the
 *              element-wise, reduction, softmax and layer-norm launchers
 *   gemm.c     GEMM through CLBlast, its bias / ReLU epilogue
 *   data.c     where, copies, gather, im2col and pooling
 *   resample.c separable resampling (Resize, Upsample)
 *   sample.c   sampling at computed places (GridSample, RoiAlign)
 *   program.c  building programs, their on-disk binary cache (program.h)
 */
#ifndef SN_CL_BACKEND_H
#define SN_CL_BACKEND_H

#include <pthread.h>
#include <stddef.h>

#include "program.h"

#include "backend/backend.h"

/* Largest index a kernel may form, with room for one local size (at most
 * ROW_WG_MAX) on top so that strided loops never wrap a uint. */
#define IDX_LIMIT ((size_t)CL_UINT_MAX - 1024)
/* Local size of the one-work-group-per-row kernels, at most. */
#define ROW_WG_MAX 256
/* Global sizes of the one-work-item-per-element kernels are multiples of
 * this, so that the driver can pick a sensible local size. */
#define GLOBAL_ROUND 64

enum {
    PROG_ELEMENTWISE,
    PROG_REDUCE,
    PROG_DATA,
    PROG_CONV,
    PROG_RNN,
    PROG_RESAMPLE,
    PROG_SAMPLE,
    PROG_COUNT
};

/* The four kernels of each binary op (see elementwise.cl). */
enum { BIN_SAME, BIN_SCALAR_A, BIN_SCALAR_B, BIN_BCAST, BIN_VARIANTS };

/* The kernels of reduce.cl. */
enum {
    K_SUM_ROW,
    K_MAX_ROW,
    K_SUM_AXIS,
    K_MAX_AXIS,
    K_SOFTMAX_ROW,
    K_SOFTMAX_AXIS,
    K_LAYERNORM_ROW,
    K_OP_ROW, /* min, prod, sum of squares, sum of magnitudes */
    K_OP_AXIS,
    K_REDUCE_COUNT
};

/* The ops with one kernel each, one work-item per output element. */
enum {
    K_GEMM_EPILOGUE,
    K_COPY,
    K_WHERE,
    K_GATHER,
    K_IM2COL,
    K_POOL_MAX,
    K_POOL_AVG,
    K_TOPK, /* one work-item per (outer, inner) position */
    K_RNN_CELL,
    K_RESAMPLE,
    K_RESAMPLE_2D,
    K_GRID_SAMPLE,
    K_ROI_ALIGN,
    K_SCAN, /* as K_TOPK */
    K_DWCONV,
    K_QGEMM,
    K_SINGLE_COUNT
};

typedef struct cl_dev {
    cl_device_id id;
    cl_context ctx;
    cl_command_queue queue; /* in-order */
    size_t max_alloc;       /* CL_DEVICE_MAX_MEM_ALLOC_SIZE, bytes */
    size_t max_wg;          /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
    int host_unified;
    int sub; /* id is a sub-device (a partition): released with the device */
    char label[192]; /* "cl:0 (device name)", for messages */
    const sn_config *config; /* its context's (kernel sources, cache) */
    /* Guards everything below and the mapping lists of the buffers; held
     * from kernel lookup to enqueue, since kernel arguments are shared. */
    pthread_mutex_t lock;
    cl_program programs[PROG_COUNT];
    cl_kernel binary[BIN_VARIANTS][SN_BINARY_COUNT];
    cl_kernel unary[SN_UNARY_COUNT];
    cl_kernel reduce[K_REDUCE_COUNT];
    size_t reduce_wg[K_REDUCE_COUNT]; /* CL_KERNEL_WORK_GROUP_SIZE */
    cl_kernel single[K_SINGLE_COUNT];
} cl_dev;

/* One outstanding buffer_map. */
typedef struct cl_mapping {
    void *ptr;
    int mapped; /* 0 for a zero-byte mapping, which OpenCL cannot make */
    struct cl_mapping *next;
} cl_mapping;

/* A buffer: the public part first, so that sn_buffer * converts back. */
typedef struct cl_buf {
    sn_buffer pub; /* pub.handle is the cl_mem */
    cl_mapping *maps;
} cl_buf;

/* An event: the public part first, then its marker on the queue. */
typedef struct cl_marker {
    sn_event pub;
    cl_event ev;
} cl_marker;

/* One kernel argument: clSetKernelArg's size and value (NULL: local). */
typedef struct karg {
    size_t size;
    const void *value;
} karg;

#define ARG(v)                                                                \
    {                                                                         \
        sizeof(v), &(v)                                                       \
    }

/* off + extent <= IDX_LIMIT: every index of the view fits a kernel uint. */
static inline int fits_idx(size_t off, size_t extent)
{
    return off <= IDX_LIMIT && extent <= IDX_LIMIT - off;
}

static inline size_t round_up(size_t n, size_t m)
{
    return (n + m - 1) / m * m;
}

/* launch.c: the status an OpenCL error maps to (out of memory or a device
 * error); the error for a view beyond IDX_LIMIT; kernel *slot of program
 * prog, made on first use (the device's lock held); set a kernel's
 * arguments and enqueue it; kernel k of single_kernels over n elements. */
shardnet_status sn_cl_status(cl_int err);
shardnet_status sn_cl_too_large(const sn_device *dev, const char *what,
                                const char *name, size_t off, size_t extent);
shardnet_status sn_cl_get_kernel(cl_dev *cd, cl_kernel *slot, int prog,
                                 const char *name);
shardnet_status sn_cl_launch(sn_device *dev, cl_kernel k, const char *what,
                             const karg *args, cl_uint nargs, size_t global,
                             size_t local);
shardnet_status sn_cl_run_single(sn_device *dev, int k, const char *what,
                                 const karg *args, cl_uint nargs, size_t n);

/* The ops table's members, by file. */
shardnet_status sn_cl_buffer_alloc(sn_device *dev, size_t bytes,
                                   sn_buffer **out);
void sn_cl_buffer_free(sn_buffer *buf);
shardnet_status sn_cl_buffer_write(sn_buffer *buf, size_t offset,
                                   const void *src, size_t bytes);
shardnet_status sn_cl_buffer_read(sn_buffer *buf, size_t offset, void *dst,
                                  size_t bytes);
shardnet_status sn_cl_buffer_write_async(sn_buffer *buf, size_t offset,
                                         const void *src, size_t bytes);
shardnet_status sn_cl_buffer_read_async(sn_buffer *buf, size_t offset,
                                        void *dst, size_t bytes);
shardnet_status sn_cl_buffer_map(sn_buffer *buf, size_t offset, size_t bytes,
                                 int flags, void **ptr);
shardnet_status sn_cl_buffer_unmap(sn_buffer *buf, void *ptr);
shardnet_status sn_cl_event_record(sn_device *dev, sn_event **out);
shardnet_status sn_cl_event_wait(sn_event *ev);
shardnet_status sn_cl_event_query(sn_event *ev, int *done);
void sn_cl_event_free(sn_event *ev);

shardnet_status sn_cl_binary(sn_device *dev, const sn_binary_desc *d);
shardnet_status sn_cl_unary(sn_device *dev, const sn_unary_desc *d);
shardnet_status sn_cl_softmax(sn_device *dev, const sn_softmax_desc *d);
shardnet_status sn_cl_reduce(sn_device *dev, const sn_reduce_desc *d);
shardnet_status sn_cl_layernorm(sn_device *dev, const sn_layernorm_desc *d);
shardnet_status sn_cl_topk(sn_device *dev, const sn_topk_desc *d);
shardnet_status sn_cl_scan(sn_device *dev, const sn_scan_desc *d);

shardnet_status sn_cl_gemm(sn_device *dev, const sn_gemm_desc *d);

shardnet_status sn_cl_where(sn_device *dev, const sn_where_desc *d);
shardnet_status sn_cl_copy(sn_device *dev, const sn_copy_desc *d);
shardnet_status sn_cl_gather(sn_device *dev, const sn_gather_desc *d);
/* resample.c */
shardnet_status sn_cl_resample(sn_device *dev, const sn_resample_desc *d);
/* sample.c */
shardnet_status sn_cl_grid_sample(sn_device *dev,
                                  const sn_grid_sample_desc *d);
shardnet_status sn_cl_roi_align(sn_device *dev, const sn_roi_align_desc *d);
shardnet_status sn_cl_im2col(sn_device *dev, const sn_im2col_desc *d);
shardnet_status sn_cl_pool(sn_device *dev, const sn_pool_desc *d);
shardnet_status sn_cl_dwconv(sn_device *dev, const sn_dwconv_desc *d);
shardnet_status sn_cl_qgemm(sn_device *dev, const sn_qgemm_desc *d);

shardnet_status sn_cl_rnn_cell(sn_device *dev, const sn_rnn_cell_desc *d);

#endif /* SN_CL_BACKEND_H */
