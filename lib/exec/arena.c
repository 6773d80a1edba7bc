/* The activation arena: every device tensor a plan's lowering asks for
 * (sn_out_device, sn_scratch) is an allocation with a placeholder buffer;
 * the steps that touch it give its lifetime, and once every node is
 * lowered the allocations get offsets in one device buffer, overlapping
 * where their lifetimes do not, and the steps' views are patched to it. */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "exec/exec_impl.h"

/* Activations start on this boundary (bytes): a cache line. */
#define ARENA_ALIGN 64

shardnet_status sn_alloc_new(sn_plan *p, size_t bytes, sn_alloc **out)
{
    sn_alloc *a, **na = sn_grow(p->allocs, &p->cap_allocs, p->nallocs,
                                sizeof *na, 64);
    if (!na)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "plan");
    p->allocs = na;
    a = calloc(1, sizeof *a);
    if (!a)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "plan");
    a->bytes = bytes ? bytes : sizeof(float);
    a->first = a->last = -1;
    a->ph.size = a->bytes;
    a->ph.handle = a; /* dev == NULL marks a placeholder */
    p->allocs[p->nallocs++] = a;
    *out = a;
    return SHARDNET_OK;
}

/* Pointers to every view a step uses, for lifetimes and patching. */
size_t sn_step_views(sn_step *s, sn_view **v)
{
    switch (s->kind) {
    case SN_KERNEL_GEMM:
        v[0] = &s->u.gemm.a, v[1] = &s->u.gemm.b, v[2] = &s->u.gemm.c;
        v[3] = &s->u.gemm.bias, v[4] = &s->u.gemm.res;
        return 5;
    case SN_KERNEL_BINARY:
        v[0] = &s->u.binary.a, v[1] = &s->u.binary.b, v[2] = &s->u.binary.c;
        return 3;
    case SN_KERNEL_UNARY:
        v[0] = &s->u.unary.x, v[1] = &s->u.unary.y;
        return 2;
    case SN_KERNEL_SOFTMAX:
        v[0] = &s->u.softmax.x, v[1] = &s->u.softmax.y;
        return 2;
    case SN_KERNEL_REDUCE:
        v[0] = &s->u.reduce.x, v[1] = &s->u.reduce.y;
        return 2;
    case SN_KERNEL_WHERE:
        v[0] = &s->u.where.cond, v[1] = &s->u.where.x;
        v[2] = &s->u.where.y, v[3] = &s->u.where.out;
        return 4;
    case SN_KERNEL_COPY:
        v[0] = &s->u.copy.src, v[1] = &s->u.copy.dst;
        return 2;
    case SN_KERNEL_IM2COL:
        v[0] = &s->u.im2col.src, v[1] = &s->u.im2col.dst;
        return 2;
    case SN_KERNEL_POOL:
        v[0] = &s->u.pool.src, v[1] = &s->u.pool.dst;
        return 2;
    case SN_KERNEL_LAYERNORM:
        v[0] = &s->u.layernorm.x, v[1] = &s->u.layernorm.scale;
        v[2] = &s->u.layernorm.bias, v[3] = &s->u.layernorm.y;
        return 4;
    case SN_KERNEL_GATHER:
        v[0] = &s->u.gather.data, v[1] = &s->u.gather.indices;
        v[2] = &s->u.gather.out;
        return 3;
    case SN_KERNEL_TOPK:
        v[0] = &s->u.topk.x, v[1] = &s->u.topk.values;
        v[2] = &s->u.topk.indices;
        return 3;
    case SN_KERNEL_RNN_CELL:
        v[0] = &s->u.rnn_cell.gates, v[1] = &s->u.rnn_cell.rec;
        v[2] = &s->u.rnn_cell.peep, v[3] = &s->u.rnn_cell.mask;
        v[4] = &s->u.rnn_cell.h, v[5] = &s->u.rnn_cell.c;
        v[6] = &s->u.rnn_cell.y;
        return 7;
    case SN_KERNEL_RESAMPLE:
        v[0] = &s->u.resample.x, v[1] = &s->u.resample.table;
        v[2] = &s->u.resample.y;
        return 3;
    case SN_KERNEL_GRID_SAMPLE:
        v[0] = &s->u.grid_sample.x, v[1] = &s->u.grid_sample.grid;
        v[2] = &s->u.grid_sample.y;
        return 3;
    case SN_KERNEL_ROI_ALIGN:
        v[0] = &s->u.roi_align.x, v[1] = &s->u.roi_align.rois;
        v[2] = &s->u.roi_align.batch_idx, v[3] = &s->u.roi_align.y;
        return 4;
    case SN_KERNEL_SCAN:
        v[0] = &s->u.scan.x, v[1] = &s->u.scan.y;
        return 2;
        return 3;
    case SN_KERNEL_DWCONV:
        v[0] = &s->u.dwconv.src, v[1] = &s->u.dwconv.weights;
        v[2] = &s->u.dwconv.bias, v[3] = &s->u.dwconv.dst;
        return 4;
    case SN_STEP_COLLECTIVE:
        v[0] = &s->coll.send, v[1] = &s->coll.recv;
        return 2;
    case SN_STEP_BRANCH:
        v[0] = &s->branch.cond;
        return 1;
    }
    return 0;
}

sn_alloc *sn_alloc_of(const sn_view *v)
{
    return v->buf && !v->buf->dev ? (sn_alloc *)v->buf->handle : NULL;
}

/*
 * Offsets for every allocation: largest first, each at the lowest aligned
 * offset that no allocation with an overlapping lifetime occupies.
 */
static int by_size_desc(const void *x, const void *y)
{
    const sn_alloc *a = *(sn_alloc *const *)x, *b = *(sn_alloc *const *)y;
    return (a->bytes < b->bytes) - (a->bytes > b->bytes);
}

static size_t align_up(size_t v)
{
    return (v + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
}

static shardnet_status assign_offsets(sn_plan *p)
{
    size_t n = p->nallocs, total = 0;
    sn_alloc **order = malloc((n ? n : 1) * sizeof *order);
    if (!order)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "plan");
    if (n)
        memcpy(order, p->allocs, n * sizeof *order);
    qsort(order, n, sizeof *order, by_size_desc);
    for (size_t i = 0; i < n; i++) {
        sn_alloc *a = order[i];
        size_t off = 0;
        int moved = 1;
        if (a->first < 0) /* never used by a step */
            a->first = a->last = 0;
        /* Move past every placed, live-at-the-same-time neighbour that
         * overlaps, until a gap fits. */
        while (moved) {
            moved = 0;
            for (size_t j = 0; j < i; j++) {
                sn_alloc *b = order[j];
                if (b->last < a->first || a->last < b->first)
                    continue;
                if (off < b->offset + align_up(b->bytes) &&
                    b->offset < off + align_up(a->bytes)) {
                    off = b->offset + align_up(b->bytes);
                    moved = 1;
                }
            }
        }
        a->offset = off;
        if (off + align_up(a->bytes) > total)
            total = off + align_up(a->bytes);
    }
    free(order);
    p->arena_bytes = total;
    return SHARDNET_OK;
}

static void patch_view(sn_plan *p, sn_view *v)
{
    sn_alloc *a = sn_alloc_of(v);
    if (a) {
        v->buf = p->arena;
        v->offset += a->offset / sizeof(float);
    }
}

shardnet_status sn_arena_finish(sn_plan *p)
{
    shardnet_status st;
    sn_view *v[8];
    /* Graph outputs must survive to the end of the run. */
    for (size_t i = 0; i < p->g->noutputs; i++) {
        sn_rt *rt = &p->rt[p->g->outputs[i]];
        sn_alloc *a = rt->on_device ? sn_alloc_of(&rt->view) : NULL;
        if (a)
            a->last = (long)p->nsteps;
    }
    if ((st = assign_offsets(p)) != SHARDNET_OK)
        return st;
    if ((st = sn_buffer_alloc(p->dev, p->arena_bytes ? p->arena_bytes : 64,
                              &p->arena)) != SHARDNET_OK)
        return sn_error_prefix(st, "activation arena of %zu bytes",
                               p->arena_bytes);
    for (size_t s = 0; s < p->nsteps; s++) {
        size_t nv = sn_step_views(&p->steps[s], v);
        for (size_t i = 0; i < nv; i++)
            patch_view(p, v[i]);
    }
    for (size_t i = 0; i < p->g->nvalues; i++)
        if (p->rt[i].on_device)
            patch_view(p, &p->rt[i].view);
    return SHARDNET_OK;
}
