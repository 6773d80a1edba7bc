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
    case SN_STEP_COLLECTIVE:
        v[0] = &s->coll.send, v[1] = &s->coll.recv;
        return 2;
    case SN_STEP_BRANCH:
        v[0] = &s->branch.cond;
        return 1;
    }
    return sn_kernel_views(s->kind, &s->u, v);
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
