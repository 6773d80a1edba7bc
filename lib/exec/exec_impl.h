/* What the files of lib/exec share and nobody else sees: the plan and its
 * arena allocations, and the helpers that pass between lowering
 * (lower.c), the arena (arena.c), element types (dtype.c), building
 * (exec.c) and running (run.c).  Everyone else goes through exec.h. */
#ifndef SN_EXEC_IMPL_H
#define SN_EXEC_IMPL_H

#include "exec/exec.h"

/* An activation of the arena: a placeholder buffer until offsets are
 * assigned from the lifetimes of all of them (arena.c). */
struct sn_alloc {
    size_t bytes;
    long first, last; /* steps touching it; -1 = none yet */
    size_t offset;    /* in the arena, once assigned */
    sn_buffer ph;     /* placeholder that views point at until patched */
};

struct sn_plan {
    sn_graph *g;
    sn_device *dev;
    sn_weights *w;
    sn_rt *rt;
    sn_step *steps;
    size_t nsteps, cap_steps;
    sn_alloc **allocs;
    size_t nallocs, cap_allocs;
    sn_buffer *arena;
    size_t arena_bytes;
    sn_buffer **owned_bufs; /* uploads of folded constants, input staging */
    size_t nowned, cap_owned;
    sn_buffer **input_buf;  /* per graph input: staging buffer or NULL */
    sn_binding *bound;      /* shapes (and host data) it was built for */
    void **bound_data;      /* copies of the host inputs' data */
    sn_host_tensor *outputs;
    sn_coll_hook coll_hook; /* runs SN_STEP_COLLECTIVE steps */
    void *coll_ctx;
    /* The weights this build uploads (the constants not on the device
     * yet), for the progress callback: bytes done of total. */
    uint64_t up_done, up_total;
    double up_stamp;
};

/* --- element types (dtype.c) -------------------------------------------- */

/* Host data of n elements of type t converted to float32 (malloc'ed). */
float *sn_to_float(sn_dtype t, const void *data, size_t n);
/* Convert count floats into dtype t at dst. */
void sn_from_float(sn_dtype t, const float *src, void *dst, size_t count);
/* Whether devices can hold t (sn_dtype_is_integer: exec.h). */
int sn_dtype_on_device(sn_dtype t);

/* --- lowering (lower.c) ------------------------------------------------- */

/* b, owned by p from now on (freed with it). */
shardnet_status sn_plan_own_buffer(sn_plan *p, sn_buffer *b);
/* Whether a shape is valid (rank, dimensions, size); *count its elements. */
int sn_check_dims(int rank, const int64_t *dims, size_t *count);

/* --- the arena (arena.c) ------------------------------------------------ */

/* A new activation of `bytes` in p's arena. */
shardnet_status sn_alloc_new(sn_plan *p, size_t bytes, sn_alloc **out);
/* The activation v points into, or NULL when v is not in the arena. */
sn_alloc *sn_alloc_of(const sn_view *v);
/* Pointers to every view a step uses (at most 8), their count. */
size_t sn_step_views(sn_step *s, sn_view **v);
/* Offsets for every activation, the arena allocated, views patched. */
shardnet_status sn_arena_finish(sn_plan *p);

#endif
