/*
 * Tensor split (private): one model run by several devices at once, each
 * holding a shard of the weights, partial results combined through the
 * devices' collective group (lib/comm/group.h).  See lib/runtime/shard.c.
 */
#ifndef SN_TENSOR_SPLIT_H
#define SN_TENSOR_SPLIT_H

#include "exec/exec.h"
#include "plan/strategy.h"

typedef struct sn_tensor_split sn_tensor_split;

/*
 * Shard graph g (sorted, passes run) over devs[0..ndev) for inputs shaped
 * like `inputs` (one binding per g->inputs entry): every value gets a
 * layout (whole on every device, cut along one axis, or partial sums),
 * weights are cut in proportion to speed[d] (flops/s), and each device
 * gets a graph of its own with the collectives that change layouts as
 * nodes.  strategies (may be NULL) force the cut of named operators.
 * The split is built for these input shapes: sn_tensor_split_matches()
 * says whether it fits others.
 *
 * In a job of several processes (lib/comm/world.h) every process calls this
 * (and then each run) alike: each plans and runs only its own devices,
 * collectives between devices of different processes go through messages,
 * and every process gets the outputs: that is when home is given (a device
 * of this process, for working out shapes when none of devs is here).
 * home NULL: only this process, every device its own.
 */
shardnet_status sn_tensor_split_create(sn_graph *g, sn_device *const *devs,
                                       size_t ndev, const double *speed,
                                       const sn_binding *inputs,
                                       const sn_strategy *strategies,
                                       size_t nstrategies, sn_device *home,
                                       sn_tensor_split **out);
/*
 * The split as sn_tensor_split_create makes it with the strategies given
 * (fixed), then a search for cheaper strategies of the other products by
 * a constant weight (shard_search.c: one product's strategy changed at a
 * time, each candidate built and priced by the cost model, kept when
 * cheaper and every shard fits); what the search did, with each
 * product's strategies and their prices, in report (may be NULL).  In a
 * job, called by every process alike, as sn_tensor_split_create.
 */
shardnet_status sn_tensor_split_search(sn_graph *g, sn_device *const *devs,
                                       size_t ndev, const double *speed,
                                       const sn_binding *inputs,
                                       const sn_strategy *fixed, size_t nfixed,
                                       sn_device *home, sn_tensor_split **out,
                                       char *report, size_t cap);
/* Bytes that hold sn_tensor_split_search's whole report on g (its first
 * line, then a line per product). */
size_t sn_tensor_split_search_room(const sn_graph *g);
void sn_tensor_split_free(sn_tensor_split *t);
int sn_tensor_split_matches(const sn_tensor_split *t, const sn_binding *in);
/* Run on the inputs; outputs in sn_tensor_split_output(). */
shardnet_status sn_tensor_split_run(sn_tensor_split *t, const sn_binding *in);
const sn_host_tensor *sn_tensor_split_output(const sn_tensor_split *t,
                                             size_t i);

/* What the split does: one line per node that is cut (its strategy in
 * MindSpore's notation and how), memory per device and bytes moved per
 * run; appended to buf. */
void sn_tensor_split_describe(const sn_tensor_split *t, char *buf,
                              size_t cap);
/* The strategies chosen for the cut matrix products and convolutions
 * (named nodes), to save in a plan file. */
size_t sn_tensor_split_strategies(const sn_tensor_split *t,
                                  const sn_strategy **out);
/* Estimated seconds per run (lib/plan/tensor_costs.h): the slowest
 * device's work at its speed plus launch costs, plus the collectives at
 * the measured host bandwidth. */
double sn_tensor_split_estimate(const sn_tensor_split *t);
/* The first device whose shard (weights and activations) exceeds its
 * memory, or NULL when every shard fits; in a job, the same answer on
 * every process. */
const char *sn_tensor_split_overflow(const sn_tensor_split *t);
/* Collectives per run and the float bytes they move. */
size_t sn_tensor_split_collectives(const sn_tensor_split *t, double *bytes);

#endif /* SN_TENSOR_SPLIT_H */
