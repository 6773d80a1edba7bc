/*
 * Indexing helpers shared by ops_index.c (gathers) and ops_scatter.c
 * (scatters), private to lib/ops.  A map lists, per output block, the
 * block of a flat source it takes; indices are host integers.
 */
#ifndef SN_OPS_INDEX_H
#define SN_OPS_INDEX_H

#include "ops/ops.h"

/* One gather step: dst (count * inner floats) = the blocks of `inner`
 * floats of src (nblocks of them) that map names; a negative entry gives
 * zeros. */
shardnet_status sn_index_emit_map(sn_lower *L, const sn_node *n, sn_view src,
                                  size_t nblocks, size_t inner,
                                  const int64_t *map, size_t count,
                                  sn_view dst);
/* Indices of node n: int32 or int64, known on the host. */
shardnet_status sn_index_need(const sn_node *n, const sn_rt *idx);
/*
 * For every element of idx (an index along axis ax of data, C order over
 * idx's shape, the same rank as data's), the flat offset in data of the
 * element it names (*out, malloc'ed): GatherElements' sources,
 * ScatterElements' targets.  An index out of range is an error.
 */
shardnet_status sn_index_element_offsets(const sn_node *n, const sn_rt *data,
                                         const sn_rt *idx, int ax,
                                         int64_t **out);
/*
 * GatherND's and ScatterND's index tuples: idx is (..., k), each tuple of
 * its last axis naming a block of data after the first nb (batch) axes:
 * *map (malloc'ed) gets, per tuple (*ntuples), the block's index among
 * data's blocks of *inner elements (the axes from nb + k on).
 */
shardnet_status sn_index_tuple_blocks(const sn_node *n, const sn_rt *data,
                                      const sn_rt *idx, int nb, int64_t **map,
                                      size_t *ntuples, size_t *inner);

#endif /* SN_OPS_INDEX_H */
