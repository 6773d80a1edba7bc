/*
 * Layer split (private): a model cut into contiguous stages of its
 * topological order, one stage per device, with the batch cut into
 * micro-batches that flow through the stages at once (a pipeline).
 *
 * Each stage is a graph of its own (the nodes of its range; its inputs are
 * the values it reads from earlier stages or from the model's inputs; its
 * outputs are the values later stages or the model's outputs read) with its
 * own plans on its device.  Values cross stages through host memory.  One
 * thread per stage (per replica of a replicated stage) runs micro-batch j
 * once the stages it reads from have finished micro-batch j.
 *
 * Cuts come from the layer split's planner (lib/plan/layer_split.h): a
 * dynamic programme over the live nodes (PipeDream's partitioner for a
 * chain of heterogeneous devices in the given order): it minimises the
 * slowest stage, a stage costing its nodes' work divided by the device's
 * measured GEMM speed, plus a launch overhead per node, plus the bytes
 * entering it divided by the host staging bandwidth.
 */
#ifndef SN_PIPELINE_H
#define SN_PIPELINE_H

#include "exec/exec.h"
#include "plan/layer_split.h" /* the planner whose cuts and groups it runs */
#include "plan/strategy.h"

typedef struct sn_pipeline sn_pipeline;

/*
 * Cut graph g (sorted, passes run) across devs[0..ndev) for inputs shaped
 * like `inputs` (one binding per g->inputs entry; used to estimate costs).
 * cuts: NULL to let the planner choose, else ndev - 1 indices into the live
 * nodes (stage s starts at cuts[s - 1]).
 */
shardnet_status sn_pipeline_create(sn_graph *g, sn_device *const *devs,
                                   size_t ndev, const sn_binding *inputs,
                                   const size_t *cuts, sn_pipeline **out);
/*
 * A hybrid split: stage s runs on groups[s] consecutive devices of devs
 * (the groups cover devs), its nodes tensor-split across them when there
 * are several (lib/runtime/shard.c); the cut planner weighs each group as its
 * devices working together.  groups NULL: one device per stage, as
 * sn_pipeline_create().  A group stage's strategies are searched
 * (sn_tensor_split_search) for each micro-batch shape at its first run;
 * strat (may be NULL): strategies a plan file fixes, each for a node of
 * a group stage (else an error).
 */
shardnet_status sn_pipeline_create_groups(sn_graph *g, sn_device *const *devs,
                                          size_t ndev, const size_t *groups,
                                          size_t ngroups,
                                          const sn_binding *inputs,
                                          const size_t *cuts,
                                          const sn_strategy *strat,
                                          size_t nstrat, sn_pipeline **out);
/*
 * A replicated split (PipeDream's "2-1"): stage s runs on reps[s]
 * consecutive devices of devs (the counts cover devs), each holding the
 * stage's whole weights and running its own micro-batches: replica q the
 * micro-batches j with j % reps[s] == q, each on a thread of its own.
 * A stage's replicas are on one process, and a replicated stage's values
 * do not cross processes.  The cut planner weighs each stage by its
 * slowest replica's share of the micro-batches.
 */
shardnet_status sn_pipeline_create_replicated(sn_graph *g,
                                              sn_device *const *devs,
                                              size_t ndev, const size_t *reps,
                                              size_t nreps,
                                              const sn_binding *inputs,
                                              const size_t *cuts,
                                              sn_pipeline **out);
void sn_pipeline_free(sn_pipeline *p);

/*
 * A hybrid split's group stages searched for the micro-batches a run of
 * `inputs` (micro as sn_pipeline_run's) gives them, now rather than at
 * that run (which then finds the splits made): stage_s[s] (one per
 * stage) is stage s's tensor split's estimate for its first micro-batch,
 * 1e300 where it does not fit, -1 for a stage on one device or on
 * another process; *nmicro the run's micro-batches.  For the planner's
 * estimate of the split (lib/api/split.c).
 */
shardnet_status sn_pipeline_search_groups(sn_pipeline *p,
                                          const sn_binding *inputs,
                                          size_t micro, double *stage_s,
                                          size_t *nmicro);
/* Micro-batches of the last run. */
size_t sn_pipeline_micro(const sn_pipeline *p);
/* Run on inputs, the batch (first dimension of the inputs) cut into
 * `micro` micro-batches (0: sn_pipeline_default_micro()). */
shardnet_status sn_pipeline_run(sn_pipeline *p, const sn_binding *inputs,
                                size_t micro);
/* Streams: batch b's inputs (one binding per model input, valid until
 * batch b is drained) come from feed; drain is called with batch b's
 * outputs ready (sn_pipeline_output), in order. */
typedef shardnet_status (*sn_feed_fn)(void *user, size_t batch,
                                      const sn_binding **inputs);
typedef shardnet_status (*sn_drain_fn)(void *user, size_t batch);
/* Run nbatch batches back to back (all shaped like the first), each cut
 * into `micro` micro-batches: batch b + 1 enters the first stage while
 * batch b is in the later ones, so the pipeline fills and drains once per
 * stream, not once per batch.  feed is called for batch b + 1 before
 * drain for batch b. */
shardnet_status sn_pipeline_stream(sn_pipeline *p, size_t nbatch, size_t micro,
                                   sn_feed_fn feed, sn_drain_fn drain,
                                   void *user);
/* Output i of the last run (or of the batch being drained). */
const sn_host_tensor *sn_pipeline_output(const sn_pipeline *p, size_t i);

size_t sn_pipeline_stages(const sn_pipeline *p);
/* Devices replicating stage s (1: not replicated). */
size_t sn_pipeline_replicas(const sn_pipeline *p, size_t s);
/* First live node (index into the sorted live nodes) of stage s, and the
 * number of live nodes. */
size_t sn_pipeline_stage_start(const sn_pipeline *p, size_t s);
/* The strategies of group stage s's most recent tensor split (0 and NULL
 * for a stage on one device, or before its first run). */
size_t sn_pipeline_stage_strategies(const sn_pipeline *p, size_t s,
                                    const sn_strategy **out);
/* Each group stage of this process: its devices, what the strategy search
 * did and what its most recent tensor split cuts; appended to buf. */
void sn_pipeline_describe_groups(const sn_pipeline *p, char *buf, size_t cap);
size_t sn_pipeline_live_nodes(const sn_pipeline *p);

#endif /* SN_PIPELINE_H */
