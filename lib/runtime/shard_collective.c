/*
 * The tensor split's own operator, ShardCollective (domain ai.shardnet),
 * lowered into a collective step of the device's plan, with the copies
 * that group each rank's block when the cut axis is not the first; and
 * the operator lookup of the devices' graphs, which adds it to the
 * registry's.
 */
#include <config.h>

#include <string.h>

#include "runtime/shard_impl.h"

/*
 * Copies between a tensor [outer, total, inner] (full) and the same data
 * grouped by rank, rank r's [outer, cnt[r], inner] block at outer * pre[r]
 * * inner (blocks): to_blocks = 1 gathers full into blocks, 0 the reverse.
 */
static shardnet_status regroup(sn_lower *L, const sn_node *n, sn_view full,
                               sn_view blocks, size_t outer, size_t inner,
                               const size_t *cnt, const size_t *pre,
                               size_t ranks, int to_blocks)
{
    size_t total = pre[ranks - 1] + cnt[ranks - 1];
    for (size_t r = 0; r < ranks; r++) {
        if (!cnt[r])
            continue;
        sn_step c = {.kind = SN_KERNEL_COPY};
        sn_view f = full, bl = blocks;
        ptrdiff_t fs = (ptrdiff_t)(total * inner),
                  bs = (ptrdiff_t)(cnt[r] * inner);
        f.offset += pre[r] * inner;
        bl.offset += outer * pre[r] * inner;
        c.u.copy.rank = 2;
        c.u.copy.shape[0] = outer;
        c.u.copy.shape[1] = cnt[r] * inner;
        c.u.copy.src_stride[0] = to_blocks ? fs : bs;
        c.u.copy.dst_stride[0] = to_blocks ? bs : fs;
        c.u.copy.src_stride[1] = c.u.copy.dst_stride[1] = 1;
        c.u.copy.src = to_blocks ? f : bl;
        c.u.copy.dst = to_blocks ? bl : f;
        shardnet_status st = sn_emit(L, n, &c);
        if (st != SHARDNET_OK)
            return st;
    }
    return SHARDNET_OK;
}

static shardnet_status lower_collective(sn_lower *L, const sn_node *n)
{
    sn_rt *x = sn_in(L, n, 0);
    sn_coll_kind kind = (sn_coll_kind)sn_attr_int(n, "kind", -1);
    size_t rank = (size_t)sn_attr_int(n, "rank", -1);
    const sn_attr *ca = sn_node_attr(n, "counts");
    sn_step s = {.kind = SN_STEP_COLLECTIVE};
    sn_coll_desc *d = &s.coll;
    sn_view xv;
    sn_rt *y;
    shardnet_status st;
    if (!x || x->dtype != SN_DT_FLOAT)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "needs a float input");
    if ((st = sn_dev_view(L, n, x, &xv)) != SHARDNET_OK)
        return st;
    if (kind == SN_COLL_ALLREDUCE) {
        /* in place: the partial sums become the sum */
        if ((st = sn_out_alias(L, n, 0, x, x->rank, x->dims)) != SHARDNET_OK)
            return st;
        d->kind = kind;
        d->n = 0; /* all the split's devices */
        d->counts[0] = sn_rt_elements(x);
        d->send = d->recv = xv;
        return sn_emit(L, n, &s);
    }
    int64_t axis = sn_attr_int(n, "axis", -1);
    if ((kind != SN_COLL_ALLGATHER && kind != SN_COLL_REDUCE_SCATTER) ||
        !ca || ca->type != SN_ATTR_INTS || !ca->count ||
        ca->count > SN_COLL_MAX || rank >= ca->count || axis < 0 ||
        axis >= x->rank)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "bad collective attributes");
    size_t total = 0, cnt[SN_COLL_MAX], pre[SN_COLL_MAX];
    for (size_t r = 0; r < ca->count; r++) {
        if (ca->ints[r] < 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT, "bad counts");
        pre[r] = total;
        cnt[r] = (size_t)ca->ints[r];
        total += cnt[r];
    }
    int64_t dims[SN_MAX_DIMS];
    memcpy(dims, x->dims, sizeof dims);
    size_t outer = prod(x->dims, 0, (int)axis),
           inner = prod(x->dims, (int)axis + 1, x->rank);
    int gather = kind == SN_COLL_ALLGATHER;
    if ((size_t)x->dims[axis] != (gather ? cnt[rank] : total))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "input does not match the counts");
    dims[axis] = (int64_t)(gather ? total : cnt[rank]);
    if ((st = sn_out_device(L, n, 0, x->rank, dims, &y)) != SHARDNET_OK)
        return st;
    d->kind = kind;
    d->n = ca->count;
    for (size_t r = 0; r < ca->count; r++)
        d->counts[r] = outer * cnt[r] * inner;
    if (outer == 1) {
        d->send = xv;
        d->recv = y->view;
        return sn_emit(L, n, &s);
    }
    /* Rank blocks are contiguous in the collective's buffer: regroup. */
    sn_view blocks;
    if ((st = sn_scratch(L, outer * total * inner, &blocks)) != SHARDNET_OK)
        return st;
    if (!gather) {
        if ((st = regroup(L, n, xv, blocks, outer, inner, cnt, pre,
                          ca->count, 1)) != SHARDNET_OK)
            return st;
        d->send = blocks;
        d->recv = y->view;
        return sn_emit(L, n, &s);
    }
    d->send = xv;
    d->recv = blocks;
    if ((st = sn_emit(L, n, &s)) != SHARDNET_OK)
        return st;
    return regroup(L, n, y->view, blocks, outer, inner, cnt, pre, ca->count,
                   0);
}

/* The operators of a device's graph: the registry's, and the split's own
 * node (a model file naming it finds it unsupported). */
const sn_op_def *sn_shard_ops(const char *domain, const char *op_type)
{
    static const sn_op_def collective = {"ShardCollective", 1, 1,
                                         lower_collective, 1, 0};
    if (!strcmp(domain, "ai.shardnet") && !strcmp(op_type, collective.op_type))
        return &collective;
    return sn_op_find(domain, op_type);
}
