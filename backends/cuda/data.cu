/*
 * Data movement: the strided copy and gather.  One thread per output
 * element, in the output's C order, so that adjacent threads read and
 * write adjacent elements wherever the layouts allow.  Both only move
 * floats: the results are the source's bits.
 */
#include <stdint.h>

#include "cu.h"

/* --- copy --------------------------------------------------------------- */

/* The copy's signed strides (sn_copy_desc's), by value into a kernel. */
typedef struct copy_strides {
    ptrdiff_t s[SN_MAX_DIMS];
} copy_strides;

static copy_strides copy_strides_of(const ptrdiff_t *s)
{
    copy_strides r;
    for (size_t d = 0; d < SN_MAX_DIMS; d++)
        r.s[d] = s[d];
    return r;
}

/* Element i of shape (C order) peeled into coordinates, innermost first,
 * each times its source and its destination stride; the offsets are
 * signed (a negative step reads or writes backwards from the view's
 * element (0, ..., 0)), a source stride of 0 repeats an element. */
static __global__ void copy_strided(size_t n, size_t rank, sn_cu_dims shape,
                                    const float *src, copy_strides ss,
                                    float *dst, copy_strides ds)
{
    SN_CU_FOR(i, n)
    {
        ptrdiff_t os = 0, od = 0;
        size_t rest = i;
        for (size_t d = rank; d-- > 0;) {
            size_t q = rest / shape.s[d];
            ptrdiff_t coord = (ptrdiff_t)(rest - q * shape.s[d]);
            os += coord * ss.s[d];
            od += coord * ds.s[d];
            rest = q;
        }
        dst[od] = src[os];
    }
}

int sn_cu_copy(const sn_copy_desc *d, void *stream)
{
    /* rank 0: one element; a dimension of 0: nothing */
    size_t n = sn_cu_elements(d->rank, d->shape);
    return SN_CU_RUN(copy_strided, n, stream, n, d->rank,
                     sn_cu_dims_of(d->shape), (const float *)sn_cu_ptr(d->src),
                     copy_strides_of(d->src_stride), sn_cu_ptr(d->dst),
                     copy_strides_of(d->dst_stride));
}

/* --- gather ------------------------------------------------------------- */

/* out (outer, nidx, inner) = data (outer, axis_len, inner)[o, idx[j], i]:
 * a negative index counts from the end, one still out of range gives 0.
 * The index is widened before axis_len is added, so that INT32_MIN and
 * INT32_MAX stay out of range. */
static __global__ void gather_axis(size_t n, const float *data,
                                   const int32_t *idx, float *out,
                                   size_t axis_len, size_t nidx, size_t inner)
{
    SN_CU_FOR(t, n)
    {
        size_t rest = t / inner, i = t - rest * inner;
        size_t o = rest / nidx, j = rest - o * nidx;
        long long k = idx[j];
        float v = 0.0f;
        if (k < 0)
            k += (long long)axis_len;
        if (k >= 0 && k < (long long)axis_len)
            v = data[(o * axis_len + (size_t)k) * inner + i];
        out[t] = v;
    }
}

int sn_cu_gather(const sn_gather_desc *d, void *stream)
{
    size_t n = d->outer * d->nidx * d->inner;
    /* the indices' view counts 4-byte elements, as a float view does */
    return SN_CU_RUN(gather_axis, n, stream, n,
                     (const float *)sn_cu_ptr(d->data),
                     (const int32_t *)sn_cu_ptr(d->indices), sn_cu_ptr(d->out),
                     d->axis_len, d->nidx, d->inner);
}
