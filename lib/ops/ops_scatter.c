/*
 * The scatters: ScatterElements (and the older Scatter, its opset 9-10
 * name) and ScatterND, with their reductions (none, add, mul, max, min).
 * The indices, known on the host, give each update's target block
 * (ops_index.h).  With data and updates known on the host too, the
 * scatter runs there in their type.  On the device, one without reduction
 * copies the data, then each run of updates to consecutive blocks over it
 * (a cache written at a few positions), or where the runs are many
 * gathers from data and updates laid end to end, each block from the last
 * update to land on it; one with a reduction applies the updates in
 * rounds: round r gathers every block's r-th update (or the reduction's
 * identity) and combines it into the output with a binary step, so that
 * updates landing on the same element are applied in their order.
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"
#include "ops/ops_index.h"

/* A reduction's rounds on the device: each costs a gather and a binary
 * step over the whole output. */
#define MAX_SCATTER_ROUNDS 64
/* Copy steps a scatter without reduction takes before gathering instead. */
#define MAX_COPY_RUNS 8

typedef enum reduction {
    RED_NONE,
    RED_ADD,
    RED_MUL,
    RED_MAX,
    RED_MIN
} reduction;

static shardnet_status read_reduction(const sn_node *n, reduction *out)
{
    static const char *const names[] = {"none", "add", "mul", "max", "min"};
    const char *s = sn_attr_string(n, "reduction", "none");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(s, names[i])) {
            *out = (reduction)i;
            return SHARDNET_OK;
        }
    return sn_node_error(n, SHARDNET_INVALID_ARGUMENT, "unknown reduction '%s'",
                         s);
}

static double combine_double(reduction red, double a, double b)
{
    switch (red) {
    case RED_ADD:
        return a + b;
    case RED_MUL:
        return a * b;
    case RED_MAX:
        return a > b || isnan(a) ? a : b;
    case RED_MIN:
        return a < b || isnan(a) ? a : b;
    default:
        return b;
    }
}

static int64_t combine_int(reduction red, int64_t a, int64_t b)
{
    switch (red) {
    case RED_ADD:
        return (int64_t)((uint64_t)a + (uint64_t)b);
    case RED_MUL:
        return (int64_t)((uint64_t)a * (uint64_t)b);
    case RED_MAX:
        return a > b ? a : b;
    case RED_MIN:
        return a < b ? a : b;
    default:
        return b;
    }
}

/* The scatter on the host: out = data, block j of upd applied to block
 * dst[j] in order. */
static shardnet_status scatter_host(sn_lower *L, const sn_node *n,
                                    const sn_rt *data, const sn_rt *upd,
                                    const int64_t *dst, size_t count,
                                    size_t inner, reduction red)
{
    size_t es, total = sn_rt_elements(data);
    unsigned char *d;
    int is_int = sn_dtype_is_integer(data->dtype);
    shardnet_status st;

    if ((st = sn_host_elem_size(n, data->dtype, &es)) != SHARDNET_OK)
        return st;
    if (!(d = sn_host_alloc(total, es)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s", n->op_type);
    if (total)
        memcpy(d, data->host, total * es);
    sn_rt cur = {.dtype = data->dtype, .host = d};
    for (size_t j = 0; j < count; j++)
        for (size_t b = 0; b < inner; b++) {
            size_t p = (size_t)dst[j] * inner + b, q = j * inner + b;
            if (red == RED_NONE)
                memcpy(d + p * es, (const unsigned char *)upd->host + q * es,
                       es);
            else if (is_int)
                sn_store_value(data->dtype, d, p, 0,
                               combine_int(red, sn_rt_get_int(&cur, p),
                                           sn_rt_get_int(upd, q)),
                               1);
            else
                sn_store_value(data->dtype, d, p,
                               combine_double(red, sn_rt_get_double(&cur, p),
                                              sn_rt_get_double(upd, q)),
                               0, 0);
        }
    return sn_out_host(L, n, 0, data->dtype, data->rank, data->dims, d);
}

static shardnet_status emit_flat_copy(sn_lower *L, const sn_node *n,
                                      sn_view src, sn_view dst, size_t count)
{
    sn_step s = {.kind = SN_KERNEL_COPY};
    if (count == 0)
        return SHARDNET_OK;
    s.u.copy.rank = 1;
    s.u.copy.shape[0] = count;
    s.u.copy.src_stride[0] = s.u.copy.dst_stride[0] = 1;
    s.u.copy.src = src;
    s.u.copy.dst = dst;
    return sn_emit(L, n, &s);
}

/* Updates landing on runs of consecutive blocks (a cache written at a few
 * positions): the data copied, then each run copied over it in order, a
 * later update to a block replacing an earlier one.  Past MAX_COPY_RUNS
 * runs, scatter_replace's one gather moves less. */
static shardnet_status scatter_runs(sn_lower *L, const sn_node *n, sn_view vd,
                                    sn_view vu, size_t nblocks,
                                    const int64_t *dst, size_t count,
                                    size_t inner, sn_view out, int *done)
{
    size_t runs = 1;
    shardnet_status st;

    *done = 0;
    for (size_t j = 1; j < count; j++)
        runs += dst[j] != dst[j - 1] + 1;
    if (runs > MAX_COPY_RUNS)
        return SHARDNET_OK;
    *done = 1;
    if ((st = emit_flat_copy(L, n, vd, out, nblocks * inner)) != SHARDNET_OK)
        return st;
    for (size_t j = 0, start = 0; j < count; j++) {
        if (j + 1 < count && dst[j + 1] == dst[j] + 1)
            continue;
        st = emit_flat_copy(
            L, n, (sn_view){vu.buf, vu.offset + start * inner},
            (sn_view){out.buf, out.offset + (size_t)dst[start] * inner},
            (j + 1 - start) * inner);
        if (st != SHARDNET_OK)
            return st;
        start = j + 1;
    }
    return SHARDNET_OK;
}

/* Without a reduction: out gathers from [data | updates], each block from
 * the last update to land on it, or from data. */
static shardnet_status scatter_replace(sn_lower *L, const sn_node *n,
                                       sn_view vd, sn_view vu, size_t nblocks,
                                       const int64_t *dst, size_t count,
                                       size_t inner, sn_view out)
{
    int64_t *map = sn_host_alloc(nblocks, sizeof *map);
    sn_view cat;
    shardnet_status st;

    if (!map)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s", n->op_type);
    for (size_t p = 0; p < nblocks; p++)
        map[p] = (int64_t)p;
    for (size_t j = 0; j < count; j++)
        map[dst[j]] = (int64_t)(nblocks + j);
    st = sn_scratch(L, (nblocks + count) * inner, &cat);
    if (st == SHARDNET_OK)
        st = emit_flat_copy(L, n, vd, cat, nblocks * inner);
    if (st == SHARDNET_OK)
        st = emit_flat_copy(L, n, vu,
                            (sn_view){cat.buf, cat.offset + nblocks * inner},
                            count * inner);
    if (st == SHARDNET_OK)
        st = sn_index_emit_map(L, n, cat, nblocks + count, inner, map, nblocks,
                               out);
    free(map);
    return st;
}

/* With a reduction: round r gathers every block's r-th update from
 * [updates | identity] and combines it into out. */
static shardnet_status scatter_rounds(sn_lower *L, const sn_node *n, sn_view vd,
                                      sn_view vu, size_t nblocks,
                                      const int64_t *dst, size_t count,
                                      size_t inner, reduction red, sn_view out)
{
    static const sn_binary_op ops[] = {SN_BINARY_ADD, SN_BINARY_ADD,
                                       SN_BINARY_MUL, SN_BINARY_MAX,
                                       SN_BINARY_MIN};
    static const float identity[] = {0.0f, 0.0f, 1.0f, -INFINITY, INFINITY};
    size_t *seen = calloc(nblocks ? nblocks : 1, sizeof *seen), rounds = 0;
    int64_t *map = sn_host_alloc(nblocks, sizeof *map);
    int64_t dims[1] = {(int64_t)(nblocks * inner)};
    sn_view src, ident, g;
    float *id = malloc((inner ? inner : 1) * sizeof *id);
    shardnet_status st = SHARDNET_OK;

    if (!seen || !map || !id) {
        st = sn_error(SHARDNET_OUT_OF_MEMORY, "%s", n->op_type);
        goto done;
    }
    for (size_t j = 0; j < count; j++)
        if (++seen[dst[j]] > rounds)
            rounds = seen[dst[j]];
    if (rounds > MAX_SCATTER_ROUNDS) {
        st = sn_node_error(n, SHARDNET_UNSUPPORTED,
                           "%zu updates land on one element; on the device "
                           "a reduction applies them one round each, at "
                           "most %d",
                           rounds, MAX_SCATTER_ROUNDS);
        goto done;
    }
    if (rounds == 0) {
        st = emit_flat_copy(L, n, vd, out, nblocks * inner);
        goto done;
    }
    for (size_t b = 0; b < inner; b++)
        id[b] = identity[red];
    if ((st = sn_dev_upload(L, n, id, inner, &ident)) != SHARDNET_OK) {
        id = NULL; /* taken */
        goto done;
    }
    id = NULL;
    if ((st = sn_scratch(L, (count + 1) * inner, &src)) != SHARDNET_OK ||
        (st = sn_scratch(L, nblocks * inner, &g)) != SHARDNET_OK ||
        (st = emit_flat_copy(L, n, vu, src, count * inner)) != SHARDNET_OK ||
        (st = emit_flat_copy(L, n, ident,
                             (sn_view){src.buf, src.offset + count * inner},
                             inner)) != SHARDNET_OK)
        goto done;
    for (size_t r = 0; r < rounds; r++) {
        memset(seen, 0, nblocks * sizeof *seen);
        for (size_t p = 0; p < nblocks; p++)
            map[p] = (int64_t)count; /* the identity */
        for (size_t j = 0; j < count; j++)
            if (seen[dst[j]]++ == r)
                map[dst[j]] = (int64_t)j;
        if ((st = sn_index_emit_map(L, n, src, count + 1, inner, map, nblocks,
                                    g)) != SHARDNET_OK ||
            (st = sn_emit_binary(L, n, ops[red], 1, dims, r ? out : vd, 1, dims,
                                 g, out)) != SHARDNET_OK)
            goto done;
    }
done:
    free(seen);
    free(map);
    free(id);
    return st;
}

/* Output 0 = data with the blocks of `inner` elements of upd applied, in
 * order, to the blocks dst names (count of them). */
static shardnet_status scatter(sn_lower *L, const sn_node *n, sn_rt *data,
                               sn_rt *upd, const int64_t *dst, size_t count,
                               size_t inner, reduction red)
{
    size_t nblocks = inner ? sn_rt_elements(data) / inner : 0;
    sn_view vd, vu = {0};
    sn_rt *out;
    shardnet_status st;

    if (upd->dtype != data->dtype)
        return sn_node_error(
            n, SHARDNET_INVALID_ARGUMENT, "updates are %s but data is %s",
            sn_dtype_name(upd->dtype), sn_dtype_name(data->dtype));
    if (sn_host_known(data) && sn_host_known(upd))
        return scatter_host(L, n, data, upd, dst, count, inner, red);
    if ((st = sn_out_device_as(L, n, data->dtype, data->rank, data->dims,
                               &out)) != SHARDNET_OK)
        return st;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    if ((st = sn_dev_view(L, n, data, &vd)) != SHARDNET_OK)
        return st;
    if (count * inner != 0 && (st = sn_dev_view(L, n, upd, &vu)) != SHARDNET_OK)
        return st;
    if (count == 0)
        return emit_flat_copy(L, n, vd, out->view, nblocks * inner);
    if (red == RED_NONE) {
        int done;
        st = scatter_runs(L, n, vd, vu, nblocks, dst, count, inner, out->view,
                          &done);
        if (st != SHARDNET_OK || done)
            return st;
        return scatter_replace(L, n, vd, vu, nblocks, dst, count, inner,
                               out->view);
    }
    return scatter_rounds(L, n, vd, vu, nblocks, dst, count, inner, red,
                          out->view);
}

SN_LOWER(sn_lower_scatter_elements)
{
    sn_rt *x = sn_in(L, n, 0), *idx = sn_in(L, n, 1), *upd = sn_in(L, n, 2);
    int64_t axis = sn_attr_int(n, "axis", 0), *map = NULL;
    reduction red;
    int ax;
    shardnet_status st;

    if ((st = read_reduction(n, &red)) != SHARDNET_OK ||
        (st = sn_index_need(n, idx)) != SHARDNET_OK)
        return st;
    if (x->rank < 1 || (ax = sn_axis(axis, x->rank)) < 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "axis %lld out of range for rank %d",
                             (long long)axis, x->rank);
    if (idx->rank != x->rank || upd->rank != idx->rank ||
        memcmp(idx->dims, upd->dims, (size_t)idx->rank * sizeof *idx->dims))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "data, indices and updates must have one rank, "
                             "indices and updates one shape");
    if ((st = sn_index_element_offsets(n, x, idx, ax, &map)) != SHARDNET_OK)
        return st;
    st = scatter(L, n, x, upd, map, sn_rt_elements(idx), 1, red);
    free(map);
    return st;
}

SN_LOWER(sn_lower_scatter_nd)
{
    sn_rt *x = sn_in(L, n, 0), *idx = sn_in(L, n, 1), *upd = sn_in(L, n, 2);
    int64_t *map = NULL;
    size_t ntuples, inner;
    reduction red;
    int k, ur;
    shardnet_status st;

    if ((st = read_reduction(n, &red)) != SHARDNET_OK ||
        (st = sn_index_need(n, idx)) != SHARDNET_OK)
        return st;
    if (x->rank < 1)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "data must have rank 1 or more");
    if ((st = sn_index_tuple_blocks(n, x, idx, 0, &map, &ntuples, &inner)) !=
        SHARDNET_OK)
        return st;
    /* updates: indices' shape but the last axis, then data's after k */
    k = (int)idx->dims[idx->rank - 1];
    ur = idx->rank - 1 + x->rank - k;
    int ok = upd->rank == ur;
    for (int d = 0; ok && d < idx->rank - 1; d++)
        ok = upd->dims[d] == idx->dims[d];
    for (int d = k; ok && d < x->rank; d++)
        ok = upd->dims[idx->rank - 1 + d - k] == x->dims[d];
    if (!ok) {
        free(map);
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "updates must have the indices' shape but the "
                             "last axis, then the data's from axis %d",
                             k);
    }
    st = scatter(L, n, x, upd, map, ntuples, inner, red);
    free(map);
    return st;
}
