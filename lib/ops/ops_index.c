/*
 * Indexing operators: GatherElements, GatherND, OneHot, Compress,
 * ReverseSequence and Trilu (the scatters are ops_scatter.c).
 *
 * Their indices (and Compress's condition, ReverseSequence's lengths,
 * Trilu's k) are integer tensors, bound by value, so known on the host
 * when the plan is made.  Each lowering computes there, for every output
 * element (or block of consecutive elements), the element of its source
 * that it takes: a map.  With the source known on the host too, the map
 * is applied there, byte for byte in the source's type; otherwise it
 * becomes one gather step over the flat source on the device (the map
 * uploaded as int32 indices, an entry past the source giving 0).
 *
 * The operators whose output shape depends on values (NonZero, Unique,
 * Range) and those made from shapes alone (EyeLike, Size) are in
 * ops_index_host.c.
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"
#include "ops/ops_index.h"

/* A map entry that gives a zero. */
#define ZERO_ENTRY (-1)

/* --- maps ---------------------------------------------------------------- */

/* One gather step: dst (count * inner floats) = the blocks of `inner`
 * floats of src (nblocks of them) that map names; ZERO_ENTRY gives zeros. */
shardnet_status sn_index_emit_map(sn_lower *L, const sn_node *n, sn_view src,
                                  size_t nblocks, size_t inner,
                                  const int64_t *map, size_t count, sn_view dst)
{
    sn_step s = {.kind = SN_KERNEL_GATHER};
    float *idx;
    shardnet_status st;

    if (count == 0 || inner == 0)
        return SHARDNET_OK;
    if (nblocks == 0 || nblocks > INT32_MAX)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "a source of %zu blocks cannot be indexed on "
                             "the device",
                             nblocks);
    /* int32 indices, stored bit for bit in the uploaded buffer */
    if (!(idx = sn_host_alloc(count, sizeof *idx)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "indices");
    for (size_t i = 0; i < count; i++) {
        int32_t v = map[i] < 0 ? (int32_t)nblocks : (int32_t)map[i];
        memcpy(&idx[i], &v, sizeof v);
    }
    s.u.gather = (sn_gather_desc){.outer = 1,
                                  .axis_len = nblocks,
                                  .inner = inner,
                                  .nidx = count,
                                  .data = src,
                                  .out = dst};
    if ((st = sn_dev_upload(L, n, idx, count, &s.u.gather.indices)) !=
        SHARDNET_OK)
        return st;
    return sn_emit(L, n, &s);
}

/* Output 0 (shape rank, dims) = the blocks of `inner` elements of src
 * that map names (count entries; ZERO_ENTRY: zeros), on the host when src
 * is known there, else by a gather step. */
static shardnet_status apply_map(sn_lower *L, const sn_node *n, sn_rt *src,
                                 const int64_t *map, size_t count, size_t inner,
                                 int rank, const int64_t *dims)
{
    size_t total = sn_rt_elements(src), nblocks = inner ? total / inner : 0;
    shardnet_status st;
    sn_rt *out;
    sn_view v;

    for (size_t i = 0; i < count; i++)
        if (inner && map[i] >= (int64_t)nblocks)
            return sn_node_error(n, SHARDNET_INTERNAL,
                                 "map entry %lld past %zu blocks",
                                 (long long)map[i], nblocks);
    if (sn_host_known(src)) {
        size_t es, blk;
        unsigned char *d;
        if ((st = sn_host_elem_size(n, src->dtype, &es)) != SHARDNET_OK)
            return st;
        if (!(d = sn_host_alloc(count * inner, es)))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "%s", n->op_type);
        blk = inner * es;
        for (size_t i = 0; i < count; i++) {
            if (map[i] < 0)
                memset(d + i * blk, 0, blk);
            else
                memcpy(d + i * blk,
                       (const unsigned char *)src->host + (size_t)map[i] * blk,
                       blk);
        }
        return sn_out_host(L, n, 0, src->dtype, rank, dims, d);
    }
    if ((st = sn_out_device_as(L, n, src->dtype, rank, dims, &out)) !=
        SHARDNET_OK)
        return st;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    if ((st = sn_dev_view(L, n, src, &v)) != SHARDNET_OK)
        return st;
    return sn_index_emit_map(L, n, v, nblocks, inner, map, count, out->view);
}

/* An index along an axis of `dim` elements, negative ones counted from
 * the end, or -1 (an error naming the node is the caller's). */
static int64_t wrap_index(int64_t v, int64_t dim)
{
    if (v < 0)
        v += dim;
    return v >= 0 && v < dim ? v : -1;
}

static shardnet_status bad_index(const sn_node *n, int64_t v, size_t at,
                                 int64_t dim)
{
    return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                         "index %lld (at %zu) is out of range for an axis "
                         "of %lld",
                         (long long)v, at, (long long)dim);
}

shardnet_status sn_index_need(const sn_node *n, const sn_rt *idx)
{
    if (idx->dtype != SN_DT_INT64 && idx->dtype != SN_DT_INT32)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "indices are %s, not int32 or int64",
                             sn_dtype_name(idx->dtype));
    if (!sn_host_known(idx))
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "indices computed on the device are not "
                             "supported; they must be known when the model "
                             "is planned");
    return SHARDNET_OK;
}

/*
 * For every element of idx (an index along axis ax of data, C order over
 * idx's shape, the same rank as data's), the flat offset in data of the
 * element it names: GatherElements' sources, ScatterElements' targets.
 */
shardnet_status sn_index_element_offsets(const sn_node *n, const sn_rt *data,
                                         const sn_rt *idx, int ax,
                                         int64_t **out)
{
    int64_t pos[SN_MAX_DIMS] = {0}, ds[SN_MAX_DIMS], *map;
    int r = data->rank;
    size_t count = sn_rt_elements(idx);

    for (int d = 0; d < r; d++)
        if (d != ax && idx->dims[d] > data->dims[d])
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "indices dimension %d (%lld) exceeds the "
                                 "data's (%lld)",
                                 d, (long long)idx->dims[d],
                                 (long long)data->dims[d]);
    if (!(map = sn_host_alloc(count, sizeof *map)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s", n->op_type);
    sn_strides(r, data->dims, ds);
    for (size_t i = 0; i < count; i++) {
        int64_t v = sn_rt_get_int(idx, i), w = wrap_index(v, data->dims[ax]);
        int64_t off = 0;
        if (w < 0) {
            free(map);
            return bad_index(n, v, i, data->dims[ax]);
        }
        for (int d = 0; d < r; d++)
            off += (d == ax ? w : pos[d]) * ds[d];
        map[i] = off;
        for (int d = r - 1; d >= 0; d--) {
            if (++pos[d] < idx->dims[d])
                break;
            pos[d] = 0;
        }
    }
    *out = map;
    return SHARDNET_OK;
}

SN_LOWER(sn_lower_gather_elements)
{
    sn_rt *x = sn_in(L, n, 0), *idx = sn_in(L, n, 1);
    int64_t axis = sn_attr_int(n, "axis", 0), *map = NULL;
    int ax;
    shardnet_status st;

    if (x->rank < 1 || (ax = sn_axis(axis, x->rank)) < 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "axis %lld out of range for rank %d",
                             (long long)axis, x->rank);
    if ((st = sn_index_need(n, idx)) != SHARDNET_OK)
        return st;
    if (idx->rank != x->rank)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "indices of rank %d for data of rank %d",
                             idx->rank, x->rank);
    if ((st = sn_index_element_offsets(n, x, idx, ax, &map)) != SHARDNET_OK)
        return st;
    st = apply_map(L, n, x, map, sn_rt_elements(idx), 1, idx->rank, idx->dims);
    free(map);
    return st;
}

/*
 * GatherND's and ScatterND's index tuples: idx is (..., k), each tuple of
 * its last axis naming a block of data after the first nb (batch) axes:
 * *map gets, per tuple, the block's index among data's blocks of
 * *inner elements (the axes from nb + k on).
 */
shardnet_status sn_index_tuple_blocks(const sn_node *n, const sn_rt *data,
                                      const sn_rt *idx, int nb, int64_t **map,
                                      size_t *ntuples, size_t *inner)
{
    int r = data->rank, k;
    size_t per_batch, blocks_per_batch;

    if (idx->rank < 1 || idx->rank <= nb)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "indices of rank %d (batch_dims %d)", idx->rank,
                             nb);
    if (idx->dims[idx->rank - 1] > r - nb)
        k = r + 1; /* refused below, without narrowing a huge one */
    else
        k = (int)idx->dims[idx->rank - 1];
    if (k < 0 || nb + k > r)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "index tuples of %lld for data of rank %d "
                             "(batch_dims %d)",
                             (long long)idx->dims[idx->rank - 1], r, nb);
    for (int d = 0; d < nb; d++)
        if (idx->dims[d] != data->dims[d])
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "batch dimension %d differs (%lld, %lld)", d,
                                 (long long)idx->dims[d],
                                 (long long)data->dims[d]);
    *ntuples = sn_dims_product(0, idx->rank - 1, idx->dims);
    *inner = sn_dims_product(nb + k, r, data->dims);
    per_batch = sn_dims_product(nb, idx->rank - 1, idx->dims);
    blocks_per_batch = sn_dims_product(nb, nb + k, data->dims);
    if (!(*map = sn_host_alloc(*ntuples, sizeof **map)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s", n->op_type);
    for (size_t t = 0; t < *ntuples; t++) {
        int64_t b = 0;
        for (int j = 0; j < k; j++) {
            size_t at = t * (size_t)k + (size_t)j;
            int64_t dim = data->dims[nb + j];
            int64_t v = sn_rt_get_int(idx, at), w = wrap_index(v, dim);
            if (w < 0) {
                free(*map);
                *map = NULL;
                return bad_index(n, v, at, dim);
            }
            b = b * dim + w;
        }
        (*map)[t] =
            (int64_t)((per_batch ? t / per_batch : 0) * blocks_per_batch) + b;
    }
    return SHARDNET_OK;
}

SN_LOWER(sn_lower_gather_nd)
{
    sn_rt *x = sn_in(L, n, 0), *idx = sn_in(L, n, 1);
    int64_t bd = sn_attr_int(n, "batch_dims", 0), od[SN_MAX_DIMS], *map;
    size_t ntuples, inner;
    int r = 0, k;
    shardnet_status st;

    if ((st = sn_index_need(n, idx)) != SHARDNET_OK)
        return st;
    if (bd < 0 || bd >= x->rank || bd >= idx->rank)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "batch_dims %lld for data of rank %d and "
                             "indices of rank %d",
                             (long long)bd, x->rank, idx->rank);
    if ((st = sn_index_tuple_blocks(n, x, idx, (int)bd, &map, &ntuples,
                                    &inner)) != SHARDNET_OK)
        return st;
    k = (int)idx->dims[idx->rank - 1];
    if (idx->rank - 1 + x->rank - (int)bd - k > SN_MAX_DIMS) {
        free(map);
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the result would have rank above %d",
                             SN_MAX_DIMS);
    }
    for (int d = 0; d < idx->rank - 1; d++)
        od[r++] = idx->dims[d];
    for (int d = (int)bd + k; d < x->rank; d++)
        od[r++] = x->dims[d];
    st = apply_map(L, n, x, map, ntuples, inner, r, od);
    free(map);
    return st;
}

/* --- one-hot, compress, reverse, triangles ------------------------------- */

SN_LOWER(sn_lower_onehot)
{
    sn_rt *idx = sn_in(L, n, 0), *depth_in = sn_in(L, n, 1);
    sn_rt *values = sn_in(L, n, 2);
    int64_t axis = sn_attr_int(n, "axis", -1), od[SN_MAX_DIMS], depth, *map;
    int r = idx->rank + 1, ax;
    size_t count, nidx = sn_rt_elements(idx), inner;
    shardnet_status st;

    if (r > SN_MAX_DIMS || (ax = sn_axis(axis, r)) < 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "axis %lld out of range for rank %d",
                             (long long)axis, r);
    if (!sn_host_known(idx) || !depth_in->host)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "indices and depth must be known when the "
                             "model is planned (constants or integer "
                             "inputs), not computed on the device");
    if (sn_rt_elements(depth_in) != 1 || sn_rt_elements(values) != 2)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "depth must hold one value and values two");
    depth = sn_dtype_is_integer(depth_in->dtype)
                ? sn_rt_get_int(depth_in, 0)
                : (int64_t)fmin(sn_rt_get_double(depth_in, 0), 1e15);
    if (depth < 1)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "depth %lld is not positive", (long long)depth);
    for (int d = 0, s = 0; d < r; d++)
        od[d] = d == ax ? depth : idx->dims[s++];
    if (__builtin_mul_overflow(nidx, (size_t)depth, &count) ||
        count > SN_MAX_HOST_FOLD / sizeof *map)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "depth %lld makes the output too large",
                             (long long)depth);
    if (!(map = sn_host_alloc(count, sizeof *map)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s", n->op_type);
    inner = sn_dims_product(ax + 1, r, od);
    for (size_t i = 0; i < count; i++) {
        size_t o = i / ((size_t)depth * inner),
               rest = i % ((size_t)depth * inner);
        int64_t c = (int64_t)(rest / inner);
        size_t at = o * inner + rest % inner;
        int64_t v =
            sn_dtype_is_integer(idx->dtype)
                ? sn_rt_get_int(idx, at)
                : (int64_t)fmax(fmin(sn_rt_get_double(idx, at), 1e15), -1e15);
        if (v < 0 && L->g->opset >= 11)
            v += depth; /* negative indices from opset 11 */
        map[i] = v == c ? 1 : 0;
    }
    st = apply_map(L, n, values, map, count, 1, r, od);
    free(map);
    return st;
}

SN_LOWER(sn_lower_compress)
{
    sn_rt *x = sn_in(L, n, 0), *cond = sn_in(L, n, 1);
    const sn_attr *aa = sn_node_attr(n, "axis");
    int64_t od[SN_MAX_DIMS], *map;
    size_t outer = 1, inner = 1, ncond = sn_rt_elements(cond), kept = 0;
    int64_t dim;
    int ax = -1, r;
    shardnet_status st;

    if (!sn_host_known(cond))
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "the condition must be known when the model is "
                             "planned (a constant or a bool input), not "
                             "computed on the device");
    if (cond->rank != 1)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the condition has rank %d, not 1", cond->rank);
    if (aa) {
        if (x->rank < 1 || (ax = sn_axis(aa->i, x->rank)) < 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "axis %lld out of range for rank %d",
                                 (long long)aa->i, x->rank);
        outer = sn_dims_product(0, ax, x->dims);
        inner = sn_dims_product(ax + 1, x->rank, x->dims);
        dim = x->dims[ax];
    } else {
        dim = (int64_t)sn_rt_elements(x);
    }
    if ((int64_t)ncond > dim)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the condition has %zu values for %lld slices",
                             ncond, (long long)dim);
    for (size_t i = 0; i < ncond; i++)
        kept += sn_rt_get_double(cond, i) != 0.0;
    if (!(map = sn_host_alloc(outer * kept, sizeof *map)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s", n->op_type);
    for (size_t o = 0, m = 0; o < outer; o++)
        for (size_t i = 0; i < ncond; i++)
            if (sn_rt_get_double(cond, i) != 0.0)
                map[m++] = (int64_t)(o * (size_t)dim + i);
    if (ax < 0) {
        r = 1;
        od[0] = (int64_t)kept;
    } else {
        r = x->rank;
        memcpy(od, x->dims, (size_t)r * sizeof *od);
        od[ax] = (int64_t)kept;
    }
    st = apply_map(L, n, x, map, outer * kept, inner, r, od);
    free(map);
    return st;
}

SN_LOWER(sn_lower_reverse_sequence)
{
    sn_rt *x = sn_in(L, n, 0), *lens = sn_in(L, n, 1);
    int64_t ba = sn_attr_int(n, "batch_axis", 1);
    int64_t ta = sn_attr_int(n, "time_axis", 0), *map;
    size_t inner, nb, count;
    shardnet_status st;

    if (x->rank < 2 || (ba != 0 && ba != 1) || (ta != 0 && ta != 1) || ba == ta)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "batch_axis %lld and time_axis %lld must be 0 "
                             "and 1 (either way) of an input of rank 2 or "
                             "more, not %d",
                             (long long)ba, (long long)ta, x->rank);
    if (!sn_host_known(lens) || !sn_dtype_is_integer(lens->dtype))
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "sequence_lens must be integers known when the "
                             "model is planned");
    nb = (size_t)x->dims[ba];
    if (lens->rank != 1 || sn_rt_elements(lens) != nb)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "sequence_lens must hold one length per batch "
                             "item (%zu)",
                             nb);
    for (size_t b = 0; b < nb; b++) {
        int64_t v = sn_rt_get_int(lens, b);
        if (v < 0 || v > x->dims[ta])
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "sequence length %lld (batch %zu) outside "
                                 "[0, %lld]",
                                 (long long)v, b, (long long)x->dims[ta]);
    }
    inner = sn_dims_product(2, x->rank, x->dims);
    count = sn_dims_product(0, 2, x->dims);
    if (!(map = sn_host_alloc(count, sizeof *map)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s", n->op_type);
    for (size_t i = 0; i < count; i++) {
        int64_t c0 = (int64_t)i / x->dims[1], c1 = (int64_t)i % x->dims[1];
        int64_t b = ba == 0 ? c0 : c1, t = ba == 0 ? c1 : c0;
        int64_t len = sn_rt_get_int(lens, (size_t)b);
        if (t < len)
            t = len - 1 - t;
        map[i] = ba == 0 ? b * x->dims[1] + t : t * x->dims[1] + b;
    }
    st = apply_map(L, n, x, map, count, inner, x->rank, x->dims);
    free(map);
    return st;
}

SN_LOWER(sn_lower_trilu)
{
    sn_rt *x = sn_in(L, n, 0), *kin = n->ninputs > 1 ? sn_in(L, n, 1) : NULL;
    int64_t k = 0, upper = sn_attr_int(n, "upper", 1), *map, rows, cols;
    size_t count = sn_rt_elements(x);
    shardnet_status st;

    if (x->rank < 2)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "input of rank %d; at least 2", x->rank);
    if (kin) {
        if (!kin->host || !sn_dtype_is_integer(kin->dtype) ||
            sn_rt_elements(kin) != 1)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "k must be one integer known when the "
                                 "model is planned");
        k = sn_rt_get_int(kin, 0);
    }
    rows = x->dims[x->rank - 2];
    cols = x->dims[x->rank - 1];
    if (!(map = sn_host_alloc(count, sizeof *map)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s", n->op_type);
    for (size_t i = 0; rows && cols && i < count; i++) {
        int64_t j = (int64_t)i % cols, r = (int64_t)i / cols % rows;
        /* j - r compared with k without overflow: |j - r| < 2^62 */
        int keep = upper ? (j - r >= k) : (j - r <= k);
        map[i] = keep ? (int64_t)i : ZERO_ENTRY;
    }
    st = apply_map(L, n, x, map, count, 1, x->rank, x->dims);
    free(map);
    return st;
}
