/*
 * Data split (private): every device runs the whole model on rows of the
 * batch of its own, with a copy of every weight; nothing crosses between
 * devices but the outputs, put together on the host in row order.  The
 * rows each device gets come from the planner (lib/plan/data_split.h).
 *
 * One host thread per local device runs its rows (the caller drives the
 * first), each bound to its device.  In a job of several processes every
 * process makes the split and every run alike: each runs the rows of its
 * own devices, and every process gets every output (their float32
 * values in the context's codec, --comm: comm/codec.h).
 */
#ifndef SN_DATA_SPLIT_RUN_H
#define SN_DATA_SPLIT_RUN_H

#include "exec/exec.h"

typedef struct sn_data_split sn_data_split;

/* A data split of graph g (sorted, passes run) over devs[0..ndev); the
 * weights of this process's devices are taken on (in place where a
 * device uses host memory) as their plans are built, at the first run. */
shardnet_status sn_data_split_create(sn_graph *g, sn_device *const *devs,
                                     size_t ndev, sn_data_split **out);
void sn_data_split_free(sn_data_split *s);
/* Run on the inputs, device d taking rows[d] rows of the batch (the first
 * dimension of the inputs, as sn_batch_rows says), in device order; the
 * rows add up to the batch.  A device given a batch of rows plans for it
 * once (three shapes are kept per device). */
shardnet_status sn_data_split_run(sn_data_split *s, const sn_binding *in,
                                  const size_t *rows);
/* Output i of the last run. */
const sn_host_tensor *sn_data_split_output(const sn_data_split *s, size_t i);

#endif /* SN_DATA_SPLIT_RUN_H */
