/*
 * Checked entry points into the backends' kernels.
 *
 * Every descriptor is validated here, once, against the sizes of the
 * buffers it names, so that a backend never reads or writes out of bounds
 * and never narrows a size that does not fit its integer types (BLAS and
 * OpenCL take int / cl_int).  Backends may then trust their arguments.
 * The device-level entry points (buffers, copies, events, supports) are
 * in device.c.
 */
#include <config.h>

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "backend/check.h"
#include "core/error.h"

#define FLOAT_BYTES sizeof(float)

/* a * b and a + b, reporting overflow as failure (0). */
static int mul_ok(size_t a, size_t b, size_t *r)
{
    return !__builtin_mul_overflow(a, b, r);
}

static int add_ok(size_t a, size_t b, size_t *r)
{
    return !__builtin_add_overflow(a, b, r);
}

static const char *dev_name(const sn_device *dev)
{
    return dev ? dev->info.name : "(null)";
}

/*
 * The view must lie on dev and hold `extent` elements from its offset.
 * extent 0 checks only the device.
 */
static shardnet_status check_view(const sn_device *dev, const char *what,
                                  const char *name, sn_view v, size_t extent)
{
    size_t end, bytes;
    if (!v.buf)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s on %s: %s is NULL",
                        what, dev_name(dev), name);
    if (v.buf->dev != dev)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "%s on %s: %s lives on %s", what, dev_name(dev), name,
                        dev_name(v.buf->dev));
    if (extent == 0)
        return SHARDNET_OK;
    if (!add_ok(v.offset, extent, &end) || !mul_ok(end, FLOAT_BYTES, &bytes) ||
        bytes > v.buf->size)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "%s on %s: %s needs elements [%zu, %zu+%zu) but its "
                        "buffer holds %zu",
                        what, dev_name(dev), name, v.offset, v.offset, extent,
                        v.buf->size / FLOAT_BYTES);
    return SHARDNET_OK;
}

/* Elements spanned by one stored rows x cols matrix with leading dim ld,
 * plus (batch - 1) * stride before its last copy. */
static int matrix_extent(size_t rows, size_t cols, size_t ld, size_t batch,
                         size_t stride, size_t *out)
{
    size_t last, span;
    if (!mul_ok(rows - 1, ld, &span) || !add_ok(span, cols, &span) ||
        !mul_ok(batch - 1, stride, &last) || !add_ok(last, span, out))
        return 0;
    return 1;
}

shardnet_status sn_gemm(sn_device *dev, const sn_gemm_desc *d)
{
    shardnet_status st =
        sn_check_device(dev, dev ? dev->ops->gemm : NULL, "gemm");
    size_t ar, ac, br, bc, ea, eb, ec;
    if (st != SHARDNET_OK)
        return st;
    if (!d)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "gemm: NULL descriptor");
    if (d->m == 0 || d->n == 0 || d->batch == 0)
        return SHARDNET_OK; /* empty product: nothing to write */
    if (d->k == 0)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "gemm on %s: k must be at least 1", dev->info.name);
    ar = d->trans_a ? d->k : d->m;
    ac = d->trans_a ? d->m : d->k;
    br = d->trans_b ? d->n : d->k;
    bc = d->trans_b ? d->k : d->n;
    /* BLAS and CLBlast sizes are int: check before anyone narrows. */
    if (d->m > INT_MAX || d->n > INT_MAX || d->k > INT_MAX ||
        d->lda > INT_MAX || d->ldb > INT_MAX || d->ldc > INT_MAX ||
        d->batch > INT_MAX)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "gemm on %s: a dimension exceeds %d", dev->info.name,
                        INT_MAX);
    if (d->lda < ac || d->ldb < bc || d->ldc < d->n)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "gemm on %s: leading dimensions (%zu, %zu, %zu) "
                        "smaller than the rows (%zu, %zu, %zu)",
                        dev->info.name, d->lda, d->ldb, d->ldc, ac, bc, d->n);
    if (d->batch > 1 && d->stride_c < d->m * d->ldc)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "gemm on %s: batched outputs overlap (stride_c %zu < "
                        "%zu)",
                        dev->info.name, d->stride_c, d->m * d->ldc);
    if (!matrix_extent(ar, ac, d->lda, d->batch, d->stride_a, &ea) ||
        !matrix_extent(br, bc, d->ldb, d->batch, d->stride_b, &eb) ||
        !matrix_extent(d->m, d->n, d->ldc, d->batch, d->stride_c, &ec))
        return sn_error(SHARDNET_INVALID_ARGUMENT, "gemm on %s: size overflows",
                        dev->info.name);
    if ((st = check_view(dev, "gemm", "A", d->a, ea)) != SHARDNET_OK ||
        (st = check_view(dev, "gemm", "B", d->b, eb)) != SHARDNET_OK ||
        (st = check_view(dev, "gemm", "C", d->c, ec)) != SHARDNET_OK)
        return st;
    if (d->bias.buf &&
        (st = check_view(dev, "gemm", "bias", d->bias,
                         d->bias_rows ? d->m : d->n)) != SHARDNET_OK)
        return st;
    if (d->res.buf &&
        (st = check_view(dev, "gemm", "residual", d->res, ec)) != SHARDNET_OK)
        return st;
    if (d->res.buf == d->c.buf && d->res.buf &&
        d->res.offset < d->c.offset + ec && d->c.offset < d->res.offset + ec)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "gemm on %s: the residual overlaps C",
                        dev->info.name);
    if ((unsigned)d->act > SN_ACT_RELU6)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "gemm on %s: bad activation",
                        dev->info.name);
    return dev->ops->gemm(dev, d);
}

shardnet_status sn_binary(sn_device *dev, const sn_binary_desc *d)
{
    shardnet_status st =
        sn_check_device(dev, dev ? dev->ops->binary : NULL, "binary op");
    size_t total = 1, ea = 1, eb = 1, t;
    if (st != SHARDNET_OK)
        return st;
    if (!d || (unsigned)d->op >= SN_BINARY_COUNT || d->rank > SN_MAX_DIMS ||
        (d->act != SN_ACT_NONE && d->act != SN_ACT_RELU))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "binary op on %s: bad descriptor", dev->info.name);
    for (size_t i = 0; i < d->rank; i++) {
        if (d->shape[i] == 0)
            return SHARDNET_OK; /* empty tensor */
        if (!mul_ok(total, d->shape[i], &total) ||
            !mul_ok(d->shape[i] - 1, d->stride_a[i], &t) || !add_ok(ea, t, &ea) ||
            !mul_ok(d->shape[i] - 1, d->stride_b[i], &t) || !add_ok(eb, t, &eb))
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "%s on %s: size overflows", sn_binary_op_name(d->op),
                            dev->info.name);
    }
    if ((st = check_view(dev, sn_binary_op_name(d->op), "a", d->a, ea)) ||
        (st = check_view(dev, sn_binary_op_name(d->op), "b", d->b, eb)) ||
        (st = check_view(dev, sn_binary_op_name(d->op), "c", d->c, total)))
        return st;
    return dev->ops->binary(dev, d);
}

shardnet_status sn_unary(sn_device *dev, const sn_unary_desc *d)
{
    shardnet_status st =
        sn_check_device(dev, dev ? dev->ops->unary : NULL, "unary op");
    if (st != SHARDNET_OK)
        return st;
    if (!d || (unsigned)d->op >= SN_UNARY_COUNT || (unsigned)d->gate > 1)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "unary op on %s: bad descriptor", dev->info.name);
    if (d->n == 0)
        return SHARDNET_OK;
    if ((st = check_view(dev, sn_unary_op_name(d->op), "x", d->x, d->n)) ||
        (st = check_view(dev, sn_unary_op_name(d->op), "y", d->y, d->n)))
        return st;
    return dev->ops->unary(dev, d);
}

/* outer * len * inner and outer * inner, checked; len >= 1. */
static shardnet_status axis_sizes(const sn_device *dev, const char *what,
                                  size_t outer, size_t len, size_t inner,
                                  size_t *in, size_t *out)
{
    if (len == 0)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "%s on %s: the reduced axis is empty", what,
                        dev->info.name);
    if (!mul_ok(outer, inner, out) || !mul_ok(*out, len, in))
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s on %s: size overflows",
                        what, dev->info.name);
    return SHARDNET_OK;
}

shardnet_status sn_softmax(sn_device *dev, const sn_softmax_desc *d)
{
    shardnet_status st =
        sn_check_device(dev, dev ? dev->ops->softmax : NULL, "softmax");
    size_t in = 0, out = 0;
    if (st != SHARDNET_OK)
        return st;
    if (!d)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "softmax: NULL descriptor");
    if ((st = axis_sizes(dev, "softmax", d->outer, d->len, d->inner, &in,
                         &out)) != SHARDNET_OK)
        return st;
    if (in == 0)
        return SHARDNET_OK;
    if ((st = check_view(dev, "softmax", "x", d->x, in)) ||
        (st = check_view(dev, "softmax", "y", d->y, in)))
        return st;
    return dev->ops->softmax(dev, d);
}

shardnet_status sn_reduce(sn_device *dev, const sn_reduce_desc *d)
{
    shardnet_status st =
        sn_check_device(dev, dev ? dev->ops->reduce : NULL, "reduction");
    size_t in = 0, out = 0;
    if (st != SHARDNET_OK)
        return st;
    if (!d || (unsigned)d->op >= SN_REDUCE_COUNT)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "reduction on %s: bad descriptor", dev->info.name);
    if ((st = axis_sizes(dev, sn_reduce_op_name(d->op), d->outer, d->len,
                         d->inner, &in, &out)) != SHARDNET_OK)
        return st;
    if (in == 0)
        return SHARDNET_OK;
    if ((st = check_view(dev, sn_reduce_op_name(d->op), "x", d->x, in)) ||
        (st = check_view(dev, sn_reduce_op_name(d->op), "y", d->y, out)))
        return st;
    return dev->ops->reduce(dev, d);
}

/* Elements spanned by `rank` dims of `shape` with unsigned strides (1 + the
 * offset of the last element); 0 for an empty shape. */
static int span_of(size_t rank, const size_t *shape, const size_t *stride,
                   size_t *out)
{
    size_t e = 1, t;
    for (size_t i = 0; i < rank; i++) {
        if (shape[i] == 0) {
            *out = 0;
            return 1;
        }
        if (!mul_ok(shape[i] - 1, stride[i], &t) || !add_ok(e, t, &e))
            return 0;
    }
    *out = e;
    return 1;
}

shardnet_status sn_where(sn_device *dev, const sn_where_desc *d)
{
    shardnet_status st =
        sn_check_device(dev, dev ? dev->ops->where : NULL, "where");
    size_t total = 1, ec, ex, ey;
    if (st != SHARDNET_OK)
        return st;
    if (!d || d->rank > SN_MAX_DIMS)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "where on %s: bad descriptor",
                        dev->info.name);
    for (size_t i = 0; i < d->rank; i++)
        if (!mul_ok(total, d->shape[i], &total))
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "where on %s: size overflows", dev->info.name);
    if (total == 0)
        return SHARDNET_OK;
    if (!span_of(d->rank, d->shape, d->stride_cond, &ec) ||
        !span_of(d->rank, d->shape, d->stride_x, &ex) ||
        !span_of(d->rank, d->shape, d->stride_y, &ey))
        return sn_error(SHARDNET_INVALID_ARGUMENT, "where on %s: size overflows",
                        dev->info.name);
    if ((st = check_view(dev, "where", "cond", d->cond, ec)) ||
        (st = check_view(dev, "where", "x", d->x, ex)) ||
        (st = check_view(dev, "where", "y", d->y, ey)) ||
        (st = check_view(dev, "where", "out", d->out, total)))
        return st;
    return dev->ops->where(dev, d);
}

/* The lowest and highest element offsets a signed-stride walk reaches. */
static int signed_extent(size_t rank, const size_t *shape,
                         const ptrdiff_t *stride, long long *lo, long long *hi)
{
    long long l = 0, h = 0, t;
    for (size_t i = 0; i < rank; i++) {
        if (shape[i] > (size_t)LLONG_MAX ||
            __builtin_mul_overflow((long long)shape[i] - 1,
                                   (long long)stride[i], &t))
            return 0;
        if (t < 0 ? __builtin_add_overflow(l, t, &l)
                  : __builtin_add_overflow(h, t, &h))
            return 0;
    }
    *lo = l;
    *hi = h;
    return 1;
}

static shardnet_status check_strided(const sn_device *dev, const char *name,
                                     sn_view v, size_t rank,
                                     const size_t *shape,
                                     const ptrdiff_t *stride)
{
    long long lo, hi;
    shardnet_status st = check_view(dev, "copy", name, v, 0);
    if (st != SHARDNET_OK)
        return st;
    if (!signed_extent(rank, shape, stride, &lo, &hi) ||
        (lo < 0 && (unsigned long long)-lo > v.offset))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "copy on %s: %s reaches before its buffer", dev->info.name,
                        name);
    return check_view(dev, "copy", name,
                      (sn_view){v.buf, v.offset - (size_t)-lo},
                      (size_t)(hi - lo) + 1);
}

shardnet_status sn_copy(sn_device *dev, const sn_copy_desc *d)
{
    shardnet_status st =
        sn_check_device(dev, dev ? dev->ops->copy : NULL, "copy");
    if (st != SHARDNET_OK)
        return st;
    if (!d || d->rank > SN_MAX_DIMS)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "copy on %s: bad descriptor",
                        dev->info.name);
    for (size_t i = 0; i < d->rank; i++)
        if (d->shape[i] == 0)
            return SHARDNET_OK;
    if ((st = check_strided(dev, "src", d->src, d->rank, d->shape,
                            d->src_stride)) ||
        (st = check_strided(dev, "dst", d->dst, d->rank, d->shape,
                            d->dst_stride)))
        return st;
    return dev->ops->copy(dev, d);
}

/* The product of n sizes, checked; 0 on overflow with *ok cleared. */
static size_t product(int *ok, size_t n, const size_t *v)
{
    size_t p = 1;
    for (size_t i = 0; i < n; i++)
        if (!mul_ok(p, v[i], &p))
            *ok = 0;
    return p;
}

/*
 * The sizes of a window kernel (im2col, pool): src holds ein elements, dst
 * eout; ok is 0 where their products overflowed, and the ni sizes in ints
 * (the input's height and width, the pads) must fit the int the kernels
 * keep coordinates in.  SHARDNET_OK without the views checked when eout is
 * 0: there is nothing to run.
 */
static shardnet_status check_window(const sn_device *dev, const char *what,
                                    int ok, const size_t *ints, size_t ni,
                                    sn_view src, size_t ein, sn_view dst,
                                    size_t eout)
{
    shardnet_status st;
    for (size_t i = 0; i < ni; i++)
        ok &= ints[i] <= INT_MAX;
    if (!ok)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s on %s: size overflows",
                        what, dev->info.name);
    if (eout == 0)
        return SHARDNET_OK;
    if ((st = check_view(dev, what, "src", src, ein)) ||
        (st = check_view(dev, what, "dst", dst, eout)))
        return st;
    return SHARDNET_OK;
}

shardnet_status sn_im2col(sn_device *dev, const sn_im2col_desc *d)
{
    shardnet_status st =
        sn_check_device(dev, dev ? dev->ops->im2col : NULL, "im2col");
    int ok = 1;
    if (st != SHARDNET_OK)
        return st;
    if (!d || !d->k_h || !d->k_w || !d->stride_h || !d->stride_w ||
        !d->dil_h || !d->dil_w)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "im2col on %s: kernel, stride and dilation must be >= 1",
                        dev->info.name);
    size_t in_sz[] = {d->channels, d->in_h, d->in_w};
    size_t out_sz[] = {d->channels, d->k_h, d->k_w, d->out_h, d->out_w};
    size_t ein = product(&ok, 3, in_sz), eout = product(&ok, 5, out_sz);
    size_t ints[] = {d->in_h, d->in_w, d->pad_top, d->pad_left, d->row0,
                     d->row0 + d->out_h};
    ok &= d->row0 + d->out_h >= d->row0;
    if ((st = check_window(dev, "im2col", ok, ints, 6, d->src, ein, d->dst,
                           eout)) != SHARDNET_OK ||
        eout == 0)
        return st;
    return dev->ops->im2col(dev, d);
}

shardnet_status sn_pool(sn_device *dev, const sn_pool_desc *d)
{
    shardnet_status st =
        sn_check_device(dev, dev ? dev->ops->pool : NULL, "pool");
    int ok = 1;
    if (st != SHARDNET_OK)
        return st;
    if (!d || (d->op != SN_POOL_MAX && d->op != SN_POOL_AVG) || !d->k_h ||
        !d->k_w || !d->stride_h || !d->stride_w || !d->dil_h || !d->dil_w)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "pool on %s: bad op, or kernel, stride or dilation 0",
                        dev->info.name);
    size_t in_sz[] = {d->planes, d->in_h, d->in_w};
    size_t out_sz[] = {d->planes, d->out_h, d->out_w};
    size_t ein = product(&ok, 3, in_sz), eout = product(&ok, 3, out_sz);
    size_t ints[] = {d->in_h,     d->in_w,      d->pad_top,
                     d->pad_left, d->pad_bottom, d->pad_right};
    if ((st = check_window(dev, "pool", ok, ints, 6, d->src, ein, d->dst,
                           eout)) != SHARDNET_OK ||
        eout == 0)
        return st;
    return dev->ops->pool(dev, d);
}

shardnet_status sn_layernorm(sn_device *dev, const sn_layernorm_desc *d)
{
    shardnet_status st = sn_check_device(dev, dev ? dev->ops->layernorm : NULL,
                                         "layer normalisation");
    size_t n;
    if (st != SHARDNET_OK)
        return st;
    if (!d || d->len == 0)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "layer normalisation on %s: empty axis", dev->info.name);
    if (!mul_ok(d->outer, d->len, &n))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "layer normalisation on %s: size overflows",
                        dev->info.name);
    if (n == 0)
        return SHARDNET_OK;
    if ((st = check_view(dev, "layernorm", "x", d->x, n)) ||
        (st = check_view(dev, "layernorm", "y", d->y, n)) ||
        (st = check_view(dev, "layernorm", "scale", d->scale, d->len)) ||
        (d->bias.buf &&
         (st = check_view(dev, "layernorm", "bias", d->bias, d->len))))
        return st;
    return dev->ops->layernorm(dev, d);
}

shardnet_status sn_gather(sn_device *dev, const sn_gather_desc *d)
{
    shardnet_status st =
        sn_check_device(dev, dev ? dev->ops->gather : NULL, "gather");
    int ok = 1;
    if (st != SHARDNET_OK)
        return st;
    if (!d || d->axis_len == 0 || d->axis_len > INT_MAX)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "gather on %s: axis of %zu elements", dev->info.name,
                        d ? d->axis_len : 0);
    size_t in_sz[] = {d->outer, d->axis_len, d->inner};
    size_t out_sz[] = {d->outer, d->nidx, d->inner};
    size_t ein = product(&ok, 3, in_sz), eout = product(&ok, 3, out_sz);
    if (!ok)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "gather on %s: size overflows",
                        dev->info.name);
    if (eout == 0)
        return SHARDNET_OK;
    if ((st = check_view(dev, "gather", "data", d->data, ein)) ||
        (st = check_view(dev, "gather", "indices", d->indices, d->nidx)) ||
        (st = check_view(dev, "gather", "out", d->out, eout)))
        return st;
    return dev->ops->gather(dev, d);
}

shardnet_status sn_topk(sn_device *dev, const sn_topk_desc *d)
{
    shardnet_status st =
        sn_check_device(dev, dev ? dev->ops->topk : NULL, "top-k");
    int ok = 1;
    if (st != SHARDNET_OK)
        return st;
    if (!d || d->k == 0 || d->k > d->len)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "top-k on %s: k of %zu along an axis of %zu",
                        dev->info.name, d ? d->k : 0, d ? d->len : 0);
    size_t in_sz[] = {d->outer, d->len, d->inner};
    size_t out_sz[] = {d->outer, d->k, d->inner};
    size_t ein = product(&ok, 3, in_sz), eout = product(&ok, 3, out_sz);
    if (!ok)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "top-k on %s: size overflows", dev->info.name);
    if (eout == 0)
        return SHARDNET_OK;
    if ((st = check_view(dev, "top-k", "x", d->x, ein)) ||
        (st = check_view(dev, "top-k", "indices", d->indices, eout)) ||
        (d->values.buf &&
         (st = check_view(dev, "top-k", "values", d->values, eout))))
        return st;
    return dev->ops->topk(dev, d);
}

/* The gates each recurrent cell reads per batch item, in hiddens. */
static const size_t rnn_gates[SN_RNN_CELL_COUNT] = {
    [SN_RNN_CELL_SIMPLE] = 1, [SN_RNN_CELL_LSTM] = 4,
    [SN_RNN_CELL_GRU] = 3, [SN_RNN_CELL_GRU_RESET] = 3};

shardnet_status sn_rnn_cell(sn_device *dev, const sn_rnn_cell_desc *d)
{
    const char *what = "rnn cell";
    shardnet_status st =
        sn_check_device(dev, dev ? dev->ops->rnn_cell : NULL, what);
    size_t gw, eg, eh, ey, e3, ld_y;
    int lstm, want_y;
    if (st != SHARDNET_OK)
        return st;
    if (!d || (unsigned)d->cell >= SN_RNN_CELL_COUNT)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s on %s: bad cell",
                        what, dev->info.name);
    for (int i = 0; i < 3; i++)
        if ((unsigned)d->act[i] >= SN_RNN_ACT_COUNT)
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "%s on %s: bad activation %d", what,
                            dev->info.name, (int)d->act[i]);
    lstm = d->cell == SN_RNN_CELL_LSTM;
    if (!mul_ok(d->hidden, rnn_gates[d->cell], &gw) ||
        !mul_ok(d->hidden, 3, &e3) || !mul_ok(d->batch, d->hidden, &eh))
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s on %s: size overflows",
                        what, dev->info.name);
    if (eh == 0)
        return SHARDNET_OK;
    want_y = d->y.buf || d->cell == SN_RNN_CELL_GRU_RESET;
    ld_y = want_y ? d->ld_y : d->hidden;
    if (d->ld_gates < gw || ld_y < d->hidden ||
        !matrix_extent(d->batch, gw, d->ld_gates, 1, 0, &eg) ||
        !matrix_extent(d->batch, d->hidden, ld_y, 1, 0, &ey))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "%s on %s: rows of %zu and %zu floats %zu and %zu "
                        "apart",
                        what, dev->info.name, gw, d->hidden, d->ld_gates,
                        ld_y);
    if ((st = check_view(dev, what, "gates", d->gates, eg)) ||
        (st = check_view(dev, what, "h", d->h, eh)) ||
        (lstm && (st = check_view(dev, what, "c", d->c, eh))) ||
        (want_y && (st = check_view(dev, what, "y", d->y, ey))) ||
        (d->mask.buf && (st = check_view(dev, what, "mask", d->mask,
                                         d->batch))) ||
        (lstm && d->peep.buf &&
         (st = check_view(dev, what, "peep", d->peep, e3))) ||
        (d->cell == SN_RNN_CELL_GRU && d->rec.buf &&
         (st = check_view(dev, what, "rec", d->rec, e3 * d->batch))))
        return st;
    return dev->ops->rnn_cell(dev, d);
}

shardnet_status sn_resample(sn_device *dev, const sn_resample_desc *d)
{
    shardnet_status st =
        sn_check_device(dev, dev ? dev->ops->resample : NULL, "resample");
    size_t ein, eout, combos = 1;
    int ok = 1;
    if (st != SHARDNET_OK)
        return st;
    if (!d || d->rank == 0 || d->rank > SN_MAX_DIMS)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "resample on %s: rank %zu",
                        dev->info.name, d ? d->rank : 0);
    for (size_t i = 0; i < d->rank; i++) {
        size_t end;
        if (d->in[i] == 0 || d->in[i] >= ((size_t)1 << 24) ||
            d->taps[i] == 0 || d->taps[i] > SN_RESAMPLE_MAX_TAPS ||
            (combos *= d->taps[i]) > SN_RESAMPLE_MAX_TAPS)
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "resample on %s: axis %zu of %zu elements with "
                            "%zu taps",
                            dev->info.name, i, d->in[i], d->taps[i]);
        if (!mul_ok(d->out[i], d->taps[i], &end) || !mul_ok(end, 2, &end) ||
            d->table_off[i] > d->table_len ||
            end > d->table_len - d->table_off[i])
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "resample on %s: axis %zu's taps run past the "
                            "table's %zu values",
                            dev->info.name, i, d->table_len);
    }
    ein = product(&ok, d->rank, d->in);
    eout = product(&ok, d->rank, d->out);
    if (!ok || !mul_ok(ein, d->planes, &ein) ||
        !mul_ok(eout, d->planes, &eout))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "resample on %s: size overflows", dev->info.name);
    if (eout == 0)
        return SHARDNET_OK;
    if ((st = check_view(dev, "resample", "x", d->x, ein)) ||
        (st = check_view(dev, "resample", "table", d->table, d->table_len)) ||
        (st = check_view(dev, "resample", "y", d->y, eout)))
        return st;
    return dev->ops->resample(dev, d);
}

/* The sizes of an image kernel: each below 2^24, so that a coordinate
 * in float names every pixel. */
static int image_sizes_ok(size_t n, const size_t *v)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] >= ((size_t)1 << 24))
            return 0;
    return 1;
}

shardnet_status sn_grid_sample(sn_device *dev, const sn_grid_sample_desc *d)
{
    shardnet_status st = sn_check_device(
        dev, dev ? dev->ops->grid_sample : NULL, "grid sample");
    int ok = 1;
    if (st != SHARDNET_OK)
        return st;
    if (!d || (unsigned)d->mode > SN_GRID_BICUBIC ||
        (unsigned)d->padding > SN_GRID_REFLECTION)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "grid sample on %s: bad mode or padding",
                        dev->info.name);
    size_t in_sz[] = {d->batch, d->channels, d->in_h, d->in_w};
    size_t out_sz[] = {d->batch, d->channels, d->out_h, d->out_w};
    size_t grid_sz[] = {d->batch, d->out_h, d->out_w, 2};
    size_t ein = product(&ok, 4, in_sz), eout = product(&ok, 4, out_sz);
    size_t eg = product(&ok, 4, grid_sz);
    if (!ok || !image_sizes_ok(2, in_sz + 2))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "grid sample on %s: size overflows", dev->info.name);
    if (eout == 0)
        return SHARDNET_OK;
    if (ein == 0)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "grid sample on %s: an empty input", dev->info.name);
    if ((st = check_view(dev, "grid sample", "x", d->x, ein)) ||
        (st = check_view(dev, "grid sample", "grid", d->grid, eg)) ||
        (st = check_view(dev, "grid sample", "y", d->y, eout)))
        return st;
    return dev->ops->grid_sample(dev, d);
}

shardnet_status sn_roi_align(sn_device *dev, const sn_roi_align_desc *d)
{
    shardnet_status st = sn_check_device(
        dev, dev ? dev->ops->roi_align : NULL, "RoI align");
    int ok = 1;
    if (st != SHARDNET_OK)
        return st;
    if (!d || d->sampling_ratio > 65536)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "RoI align on %s: sampling ratio %zu", dev->info.name,
                        d ? d->sampling_ratio : 0);
    size_t in_sz[] = {d->batch, d->channels, d->in_h, d->in_w};
    size_t out_sz[] = {d->nrois, d->channels, d->out_h, d->out_w};
    size_t ein = product(&ok, 4, in_sz), eout = product(&ok, 4, out_sz);
    size_t er;
    if (!mul_ok(d->nrois, 4, &er) || !ok || !image_sizes_ok(2, in_sz + 2) ||
        !image_sizes_ok(2, out_sz + 2))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "RoI align on %s: size overflows", dev->info.name);
    if (eout == 0)
        return SHARDNET_OK;
    if (ein == 0)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "RoI align on %s: an empty input", dev->info.name);
    if ((st = check_view(dev, "RoI align", "x", d->x, ein)) ||
        (st = check_view(dev, "RoI align", "rois", d->rois, er)) ||
        (st = check_view(dev, "RoI align", "batch_idx", d->batch_idx,
                         d->nrois)) ||
        (st = check_view(dev, "RoI align", "y", d->y, eout)))
        return st;
    return dev->ops->roi_align(dev, d);
}

shardnet_status sn_scan(sn_device *dev, const sn_scan_desc *d)
{
    shardnet_status st =
        sn_check_device(dev, dev ? dev->ops->scan : NULL, "cumulative sum");
    int ok = 1;
    if (st != SHARDNET_OK)
        return st;
    if (!d)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "cumulative sum on %s: NULL descriptor",
                        dev->info.name);
    size_t sz[] = {d->outer, d->len, d->inner};
    size_t n = product(&ok, 3, sz);
    if (!ok)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "cumulative sum on %s: size overflows",
                        dev->info.name);
    if (n == 0)
        return SHARDNET_OK;
    if ((st = check_view(dev, "cumulative sum", "x", d->x, n)) ||
        (st = check_view(dev, "cumulative sum", "y", d->y, n)))
        return st;
    return dev->ops->scan(dev, d);
}

shardnet_status sn_dwconv(sn_device *dev, const sn_dwconv_desc *d)
{
    shardnet_status st =
        sn_check_device(dev, dev ? dev->ops->dwconv : NULL, "dwconv");
    int ok = 1;
    if (st != SHARDNET_OK)
        return st;
    if (!d || !d->mult || !d->k_h || !d->k_w || !d->stride_h ||
        !d->stride_w || !d->dil_h || !d->dil_w ||
        (unsigned)d->act > SN_ACT_RELU6)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "dwconv on %s: bad activation, or multiplier, kernel, "
                        "stride or dilation 0",
                        dev->info.name);
    size_t in_sz[] = {d->images, d->channels, d->in_h, d->in_w};
    size_t out_sz[] = {d->images, d->channels, d->mult, d->out_h, d->out_w};
    size_t w_sz[] = {d->channels, d->mult, d->k_h, d->k_w};
    size_t ein = product(&ok, 4, in_sz), eout = product(&ok, 5, out_sz);
    size_t ew = product(&ok, 4, w_sz), nch = product(&ok, 2, w_sz);
    size_t ints[] = {d->in_h, d->in_w, d->pad_top, d->pad_left};
    if ((st = check_window(dev, "dwconv", ok, ints, 4, d->src, ein, d->dst,
                           eout)) != SHARDNET_OK ||
        eout == 0)
        return st;
    if ((st = check_view(dev, "dwconv", "weights", d->weights, ew)) ||
        (d->bias.buf &&
         (st = check_view(dev, "dwconv", "bias", d->bias, nch))))
        return st;
    return dev->ops->dwconv(dev, d);
}

shardnet_status sn_qgemm(sn_device *dev, const sn_qgemm_desc *d)
{
    shardnet_status st =
        sn_check_device(dev, dev ? dev->ops->qgemm : NULL, "qgemm");
    size_t ea, ec, rows, row_bytes, qbytes, blocks, es;
    int ok = 1;
    if (st != SHARDNET_OK)
        return st;
    if (!d)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "qgemm: NULL descriptor");
    if (d->m == 0 || d->n == 0)
        return SHARDNET_OK;
    if (d->k == 0 || (unsigned)d->qtype > SN_QTYPE_BF16 ||
        (d->qtype == SN_QTYPE_U4 && (!d->trans_b || d->block % 2)) ||
        (sn_qtype_bytes(d->qtype) == 2 &&
         (d->block || d->zero.buf || d->zero_value != 0.0f)) ||
        !(d->zero_value >= 0.0f && d->zero_value <= 255.0f) ||
        (unsigned)d->act > SN_ACT_RELU6)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "qgemm on %s: k 0, a bad type or activation, uint4 "
                        "not stored as N rows of K in even blocks, a "
                        "half-precision weight with blocks or zero points, "
                        "or a zero point outside 0..255",
                        dev->info.name);
    rows = d->trans_b ? d->n : d->k;
    row_bytes = d->trans_b ? d->k : d->n; /* in elements until the end */
    if (d->qtype == SN_QTYPE_U4)
        row_bytes = (row_bytes + 1) / 2;
    blocks = d->block ? (d->k + d->block - 1) / d->block : 1;
    if (d->lda < d->k || d->ldc < d->n || d->ldq < row_bytes)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "qgemm on %s: a row stride is shorter than its row",
                        dev->info.name);
    size_t a_sz[] = {d->m - 1, d->lda}, c_sz[] = {d->m - 1, d->ldc};
    size_t q_sz[] = {rows - 1, d->ldq}, s_sz[] = {d->n, blocks};
    size_t qe = sn_qtype_bytes(d->qtype);
    ea = product(&ok, 2, a_sz) + d->k;
    ec = product(&ok, 2, c_sz) + d->n;
    qbytes = product(&ok, 2, q_sz) + row_bytes;
    if (qbytes > SIZE_MAX / qe)
        ok = 0;
    qbytes *= qe;
    row_bytes *= qe;
    es = product(&ok, 2, s_sz);
    if (!ok || ea < d->k || ec < d->n || qbytes < row_bytes)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "qgemm on %s: size overflows", dev->info.name);
    if ((st = check_view(dev, "qgemm", "A", d->a, ea)) ||
        (st = check_view(dev, "qgemm", "C", d->c, ec)) ||
        (st = check_view(dev, "qgemm", "q", d->q,
                         (qbytes + FLOAT_BYTES - 1) / FLOAT_BYTES)) ||
        (st = check_view(dev, "qgemm", "scale", d->scale, es)) ||
        (d->zero.buf &&
         (st = check_view(dev, "qgemm", "zero", d->zero, es))) ||
        (d->bias.buf &&
         (st = check_view(dev, "qgemm", "bias", d->bias, d->n))))
        return st;
    return dev->ops->qgemm(dev, d);
}

shardnet_status sn_launch(sn_device *dev, sn_kernel k, const sn_kernel_desc *d)
{
    if (!d)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "launch: no descriptor");
    switch (k) {
    case SN_KERNEL_GEMM:
        return sn_gemm(dev, &d->gemm);
    case SN_KERNEL_BINARY:
        return sn_binary(dev, &d->binary);
    case SN_KERNEL_UNARY:
        return sn_unary(dev, &d->unary);
    case SN_KERNEL_SOFTMAX:
        return sn_softmax(dev, &d->softmax);
    case SN_KERNEL_REDUCE:
        return sn_reduce(dev, &d->reduce);
    case SN_KERNEL_WHERE:
        return sn_where(dev, &d->where);
    case SN_KERNEL_COPY:
        return sn_copy(dev, &d->copy);
    case SN_KERNEL_IM2COL:
        return sn_im2col(dev, &d->im2col);
    case SN_KERNEL_POOL:
        return sn_pool(dev, &d->pool);
    case SN_KERNEL_LAYERNORM:
        return sn_layernorm(dev, &d->layernorm);
    case SN_KERNEL_GATHER:
        return sn_gather(dev, &d->gather);
    case SN_KERNEL_TOPK:
        return sn_topk(dev, &d->topk);
    case SN_KERNEL_RNN_CELL:
        return sn_rnn_cell(dev, &d->rnn_cell);
    case SN_KERNEL_RESAMPLE:
        return sn_resample(dev, &d->resample);
    case SN_KERNEL_GRID_SAMPLE:
        return sn_grid_sample(dev, &d->grid_sample);
    case SN_KERNEL_ROI_ALIGN:
        return sn_roi_align(dev, &d->roi_align);
    case SN_KERNEL_SCAN:
        return sn_scan(dev, &d->scan);
    case SN_KERNEL_DWCONV:
        return sn_dwconv(dev, &d->dwconv);
    case SN_KERNEL_QGEMM:
        return sn_qgemm(dev, &d->qgemm);
    case SN_KERNEL_COUNT:
        break;
    }
    return sn_error(SHARDNET_INTERNAL, "launch: unknown kernel %d", (int)k);
}

shardnet_status sn_binary_broadcast(sn_binary_desc *d, size_t rank_a,
                                    const size_t *shape_a, size_t rank_b,
                                    const size_t *shape_b)
{
    size_t rank = rank_a > rank_b ? rank_a : rank_b;
    size_t shape[SN_MAX_DIMS], sa[SN_MAX_DIMS], sb[SN_MAX_DIMS];
    size_t acc_a = 1, acc_b = 1, r = 0;

    if (!d || rank_a > SN_MAX_DIMS || rank_b > SN_MAX_DIMS ||
        (rank_a && !shape_a) || (rank_b && !shape_b))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "broadcast: rank above %d or NULL shape", SN_MAX_DIMS);
    /* Right-align the shapes; walk from the innermost dimension. */
    for (size_t i = 0; i < rank; i++) {
        size_t da = i < rank_a ? shape_a[rank_a - 1 - i] : 1;
        size_t db = i < rank_b ? shape_b[rank_b - 1 - i] : 1;
        size_t j = rank - 1 - i;
        if (da != db && da != 1 && db != 1)
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "shapes cannot be broadcast: dimension %zu from "
                            "the end is %zu in one and %zu in the other",
                            i, da, db);
        shape[j] = da > db ? da : db;
        if (da == 0 || db == 0)
            shape[j] = 0;
        sa[j] = da == 1 ? 0 : acc_a;
        sb[j] = db == 1 ? 0 : acc_b;
        if (!mul_ok(acc_a, da, &acc_a) || !mul_ok(acc_b, db, &acc_b))
            return sn_error(SHARDNET_INVALID_ARGUMENT, "broadcast: overflow");
    }
    /* Drop size-1 dimensions, then merge neighbours whose strides chain
     * (both operands contiguous across them, or both broadcast). */
    for (size_t j = 0; j < rank; j++) {
        if (shape[j] == 1)
            continue;
        if (r > 0 && sa[r - 1] == sa[j] * shape[j] &&
            sb[r - 1] == sb[j] * shape[j]) {
            shape[r - 1] *= shape[j];
            sa[r - 1] = sa[j];
            sb[r - 1] = sb[j];
            continue;
        }
        shape[r] = shape[j];
        sa[r] = sa[j];
        sb[r] = sb[j];
        r++;
    }
    d->rank = r;
    for (size_t j = 0; j < r; j++) {
        d->shape[j] = shape[j];
        d->stride_a[j] = sa[j];
        d->stride_b[j] = sb[j];
    }
    return SHARDNET_OK;
}

size_t sn_kernel_views(int k, sn_kernel_desc *u, sn_view **v)
{
    switch (k) {
    case SN_KERNEL_GEMM:
        v[0] = &u->gemm.a, v[1] = &u->gemm.b, v[2] = &u->gemm.c;
        v[3] = &u->gemm.bias, v[4] = &u->gemm.res;
        return 5;
    case SN_KERNEL_BINARY:
        v[0] = &u->binary.a, v[1] = &u->binary.b, v[2] = &u->binary.c;
        return 3;
    case SN_KERNEL_UNARY:
        v[0] = &u->unary.x, v[1] = &u->unary.y;
        return 2;
    case SN_KERNEL_SOFTMAX:
        v[0] = &u->softmax.x, v[1] = &u->softmax.y;
        return 2;
    case SN_KERNEL_REDUCE:
        v[0] = &u->reduce.x, v[1] = &u->reduce.y;
        return 2;
    case SN_KERNEL_WHERE:
        v[0] = &u->where.cond, v[1] = &u->where.x;
        v[2] = &u->where.y, v[3] = &u->where.out;
        return 4;
    case SN_KERNEL_COPY:
        v[0] = &u->copy.src, v[1] = &u->copy.dst;
        return 2;
    case SN_KERNEL_IM2COL:
        v[0] = &u->im2col.src, v[1] = &u->im2col.dst;
        return 2;
    case SN_KERNEL_POOL:
        v[0] = &u->pool.src, v[1] = &u->pool.dst;
        return 2;
    case SN_KERNEL_LAYERNORM:
        v[0] = &u->layernorm.x, v[1] = &u->layernorm.scale;
        v[2] = &u->layernorm.bias, v[3] = &u->layernorm.y;
        return 4;
    case SN_KERNEL_GATHER:
        v[0] = &u->gather.data, v[1] = &u->gather.indices;
        v[2] = &u->gather.out;
        return 3;
    case SN_KERNEL_TOPK:
        v[0] = &u->topk.x, v[1] = &u->topk.values;
        v[2] = &u->topk.indices;
        return 3;
    case SN_KERNEL_RNN_CELL:
        v[0] = &u->rnn_cell.gates, v[1] = &u->rnn_cell.rec;
        v[2] = &u->rnn_cell.peep, v[3] = &u->rnn_cell.mask;
        v[4] = &u->rnn_cell.h, v[5] = &u->rnn_cell.c;
        v[6] = &u->rnn_cell.y;
        return 7;
    case SN_KERNEL_RESAMPLE:
        v[0] = &u->resample.x, v[1] = &u->resample.table;
        v[2] = &u->resample.y;
        return 3;
    case SN_KERNEL_GRID_SAMPLE:
        v[0] = &u->grid_sample.x, v[1] = &u->grid_sample.grid;
        v[2] = &u->grid_sample.y;
        return 3;
    case SN_KERNEL_ROI_ALIGN:
        v[0] = &u->roi_align.x, v[1] = &u->roi_align.rois;
        v[2] = &u->roi_align.batch_idx, v[3] = &u->roi_align.y;
        return 4;
    case SN_KERNEL_SCAN:
        v[0] = &u->scan.x, v[1] = &u->scan.y;
        return 2;
    case SN_KERNEL_DWCONV:
        v[0] = &u->dwconv.src, v[1] = &u->dwconv.weights;
        v[2] = &u->dwconv.bias, v[3] = &u->dwconv.dst;
        return 4;
    case SN_KERNEL_QGEMM:
        v[0] = &u->qgemm.a, v[1] = &u->qgemm.q, v[2] = &u->qgemm.scale;
        v[3] = &u->qgemm.zero, v[4] = &u->qgemm.bias, v[5] = &u->qgemm.c;
        return 6;
    }
    return 0;
}
