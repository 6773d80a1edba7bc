/*
 * The tensor split's layouts (private): how one value lies over the
 * devices of a tensor split, and the pure algebra of layouts that its
 * planner decides with: cutting a dimension into shares by device speed,
 * where a device's share starts, which conversion takes one layout to
 * another and what it moves.  Nothing here writes a graph: the runtime's
 * builder (lib/runtime/shard_graph.c and the shard rules) does, from
 * these answers.  See tensor_layout.c.
 *
 *   R            whole on every device (replicated);
 *   S(axis, c)   cut along one axis, device d holding c[d] entries of it;
 *   P            partial sums: the value is the sum over devices.
 */
#ifndef SN_TENSOR_LAYOUT_H
#define SN_TENSOR_LAYOUT_H

#include <stdint.h>
#include <string.h>

#include "exec/exec.h"

#define SN_LAYOUT_MAX_DEV SN_COLL_MAX
#define SN_FEATURE_GRAN 16 /* feature cuts: multiples of this many */

enum { SN_LAY_R, SN_LAY_S, SN_LAY_P };

typedef struct sn_layout {
    int kind, axis;                /* axis: of S only */
    size_t cnt[SN_LAYOUT_MAX_DEV]; /* S: entries of the axis per device */
} sn_layout;

static inline sn_layout sn_layout_r(void)
{
    sn_layout l = {.kind = SN_LAY_R};
    return l;
}

static inline sn_layout sn_layout_p(void)
{
    sn_layout l = {.kind = SN_LAY_P};
    return l;
}

/* S(axis, cnt[0..n)). */
static inline sn_layout sn_layout_s(int axis, const size_t *cnt, size_t n)
{
    sn_layout l = {.kind = SN_LAY_S, .axis = axis};
    memcpy(l.cnt, cnt, n * sizeof *cnt);
    return l;
}

/* Whether a and c are the same layout over n devices. */
static inline int sn_layout_eq(const sn_layout *a, const sn_layout *c,
                               size_t n)
{
    if (a->kind != c->kind)
        return 0;
    if (a->kind != SN_LAY_S)
        return 1;
    return a->axis == c->axis && !memcmp(a->cnt, c->cnt, n * sizeof a->cnt[0]);
}

/* Where device d's share of an S layout starts along its axis. */
static inline size_t sn_layout_offset(const sn_layout *l, size_t d)
{
    size_t at = 0;
    for (size_t e = 0; e < d; e++)
        at += l->cnt[e];
    return at;
}

/*
 * Cut `total` into n shares proportional to speed[0..n), each a multiple
 * of gran and at least gran (the last takes what is left over).  0 when
 * the total is too small to give every device a share.
 */
int sn_layout_shares(const double *speed, size_t n, size_t total,
                     size_t gran, size_t *cnt);

/* Axis `axis` of a value of dims[0..rank) cut by speed (the last axis,
 * the features, in units of SN_FEATURE_GRAN, other axes by rows); R when
 * that axis is too small for every device to get a share. */
sn_layout sn_layout_cut_axis(const double *speed, size_t n,
                             const int64_t *dims, int rank, int axis);
/* Where partial sums of that shape go before a non-linear op: cut along
 * the first axis wide enough (the batch, as in Megatron's sequence
 * parallelism: the ops that follow work on a slice of rows and the next
 * product needs no gather), else R (all-reduced). */
sn_layout sn_layout_reduce_target(const double *speed, size_t n,
                                  const int64_t *dims, int rank);

/*
 * The conversion that takes a value from layout `have` to `want` (not the
 * same layout):
 *
 *   S -> R   all-gather              P -> S   reduce-scatter
 *   P -> R   all-reduce              R -> S   a local slice (no traffic)
 *   S -> S'  all-gather, then a local slice
 *
 * and nothing makes partial sums (SN_CONVERT_NONE).
 */
typedef enum sn_layout_conversion {
    SN_CONVERT_NONE,
    SN_CONVERT_ALLREDUCE,
    SN_CONVERT_ALLGATHER,
    SN_CONVERT_REDUCE_SCATTER,
    SN_CONVERT_SLICE,
    SN_CONVERT_GATHER_SLICE,
} sn_layout_conversion;

sn_layout_conversion sn_layout_convert(const sn_layout *have,
                                       const sn_layout *want);
/* Bytes a collective over a float value of `elements` is counted as
 * moving: the whole value, whatever its layouts. */
double sn_layout_collective_bytes(size_t elements);

#endif /* SN_TENSOR_LAYOUT_H */
