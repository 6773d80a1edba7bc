/*
 * The tensor split's layout algebra (see tensor_layout.h): shares of a
 * dimension by device speed, the cut a reduction lands in, and the
 * conversion between two layouts.  Pure functions of their arguments: the
 * planner of lib/runtime/shard*.c asks them and writes the device graphs.
 */
#include <config.h>

#include "plan/tensor_layout.h"

int sn_layout_shares(const double *speed, size_t n, size_t total,
                     size_t gran, size_t *cnt)
{
    size_t units = gran ? total / gran : 0, at = 0;
    double sum = 0;
    if (gran == 0 || units < n)
        return 0;
    for (size_t d = 0; d < n; d++)
        sum += speed[d];
    for (size_t d = 0; d < n; d++) {
        size_t u = (size_t)((double)units * speed[d] / sum + 0.5);
        if (u < 1)
            u = 1;
        /* leave at least one unit to each later device */
        if (at + u + (n - 1 - d) > units)
            u = units - at - (n - 1 - d);
        if (d == n - 1)
            u = units - at;
        cnt[d] = u * gran;
        at += u;
    }
    cnt[n - 1] += total - units * gran;
    return 1;
}

sn_layout sn_layout_cut_axis(const double *speed, size_t n,
                             const int64_t *dims, int rank, int axis)
{
    sn_layout l = sn_layout_r();
    if (axis >= 0 && axis < rank &&
        sn_layout_shares(speed, n, (size_t)dims[axis],
                         axis == rank - 1 ? SN_FEATURE_GRAN : 1, l.cnt)) {
        l.kind = SN_LAY_S;
        l.axis = axis;
    }
    return l;
}

sn_layout sn_layout_reduce_target(const double *speed, size_t n,
                                  const int64_t *dims, int rank)
{
    for (int a = 0; a < rank; a++) {
        sn_layout l = sn_layout_cut_axis(speed, n, dims, rank, a);
        if (l.kind == SN_LAY_S)
            return l;
    }
    return sn_layout_r();
}

sn_layout_conversion sn_layout_convert(const sn_layout *have,
                                       const sn_layout *want)
{
    if (want->kind == SN_LAY_R)
        return have->kind == SN_LAY_P   ? SN_CONVERT_ALLREDUCE
               : have->kind == SN_LAY_S ? SN_CONVERT_ALLGATHER
                                        : SN_CONVERT_NONE;
    if (want->kind == SN_LAY_S)
        return have->kind == SN_LAY_R   ? SN_CONVERT_SLICE
               : have->kind == SN_LAY_P ? SN_CONVERT_REDUCE_SCATTER
                                        : SN_CONVERT_GATHER_SLICE;
    return SN_CONVERT_NONE;
}

double sn_layout_collective_bytes(size_t elements)
{
    return 4.0 * (double)elements;
}
