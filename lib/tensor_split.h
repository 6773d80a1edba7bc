/* Tensor split of a perceptron across devices (private): see
 * tensor_split.c. */
#ifndef SN_TENSOR_SPLIT_H
#define SN_TENSOR_SPLIT_H

#include "exec.h"

typedef struct sn_tensor_split sn_tensor_split;

/* Shard graph g (a chain of Gemm layers, passes run) over devs, features
 * in proportion to speed[d] (flops/s). */
shardnet_status sn_tensor_split_create(sn_graph *g, sn_device *const *devs,
                                       size_t ndev, const double *speed,
                                       sn_tensor_split **out);
void sn_tensor_split_free(sn_tensor_split *t);
/* Run on the one input; the output lands in sn_tensor_split_output(). */
shardnet_status sn_tensor_split_run(sn_tensor_split *t, const sn_binding *in);
const sn_host_tensor *sn_tensor_split_output(const sn_tensor_split *t);

#endif /* SN_TENSOR_SPLIT_H */
