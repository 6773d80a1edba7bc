/*
 * The layer split's planner (private): where to cut a model into stages
 * (layer_cuts.c, over the cost model of layer_costs.c), how its batch may
 * be cut into micro-batches (micro_batch.c), and the estimates of one
 * device, a layer split and a hybrid split that a session chooses among
 * (choose.c).  The runtime that runs the cuts is lib/runtime/pipeline.c.
 */
#ifndef SN_LAYER_SPLIT_H
#define SN_LAYER_SPLIT_H

#include "exec/exec.h"
#include "plan/data_split.h"

/* Cuts of graph g's live nodes into nstages stages placed on units of
 * devs[0..ndev) (groups[u] consecutive devices each, NULL: one device
 * per stage; a group tensor-splits its stage, or, replicate, each of its
 * devices runs the stage on micro-batches of its own), for inputs shaped
 * like `inputs`: stage s starts at live node start[s].  *row_bytes rises
 * to the largest first output per row of the batch.  Collective in a job
 * of several processes. */
shardnet_status sn_layer_cuts(sn_graph *g, sn_device *const *devs,
                              size_t ndev, const size_t *groups,
                              size_t ngroups, int replicate,
                              const sn_binding *inputs,
                              size_t nstages, size_t *start,
                              double *row_bytes);

/* Most stages a replicated configuration the chooser weighs has (every
 * composition of up to four devices). */
#define SN_REPLICA_STAGES 4

/* The planner's estimates (seconds; HUGE_VAL-like 1e300 when a plan is
 * not possible or does not fit): one device (the best, best_dev, an index
 * into devs), a layer split over all of devs, the best hybrid split
 * (two stages, each on a group of consecutive devices, groups[0..ngroups)
 * devices each; with three devices or more), the best replicated split
 * (stages on reps[0..nreps) consecutive devices each, at least one on
 * several, each of which runs the stage on micro-batches of its own:
 * PipeDream's "2-1"), and a data split (its rows per device in data;
 * data.est is its estimate). */
typedef struct sn_split_choice {
    double none, layer, hybrid, replicated;
    size_t best_dev;
    size_t groups[2];
    size_t ngroups;
    double hybrid_stage[2]; /* the best hybrid's stages, seconds a batch */
    size_t reps[SN_REPLICA_STAGES];
    size_t nreps;
    sn_data_rows data;
} sn_split_choice;

/* PipeDream's notation of a replicated configuration, "2-1" (replicas of
 * each stage), in buf. */
void sn_replicas_format(const size_t *reps, size_t nreps, char *buf,
                        size_t cap);

/* Every alternative's estimate, from the cost model, and a readable
 * account of them in report (may be NULL). */
shardnet_status sn_split_choose(sn_graph *g, sn_device *const *devs,
                                size_t ndev, const sn_binding *inputs,
                                size_t micro, sn_split_choice *out,
                                char *report, size_t cap);

/* Micro-batches when none are asked for: rows / 4, at least one per stage
 * and at most eight per stage. */
size_t sn_pipeline_default_micro(size_t rows, size_t stages);
/* The micro-batches the pipeline cuts a batch of `rows` into when asked
 * for m: two rows or more each, and no last one of a single row (a CPU
 * sums a product of one row in an order of its own). */
size_t sn_pipeline_micro_batches(size_t rows, size_t m);
/* The batch micro-batches cut: the first dimension of the inputs, 1 when
 * the model fixes it (micro_batch.c). */
size_t sn_batch_rows(const sn_graph *g, const sn_binding *in);
/* Whether g's nodes keep the rows of a batch of `rows` apart, from plan
 * (g planned for those inputs on any device, the shapes device too):
 * every value that depends on the batch carries it on axis 0, and every
 * node that reads it works row by row.  carries (may be NULL;
 * g->nvalues entries): 1 for the values that carry the batch. */
int sn_rows_apart(const sn_graph *g, const sn_plan *plan, size_t rows,
                  unsigned char *carries);
/* Whether g's nodes keep the rows of that batch apart (micro-batches give
 * the whole batch's answer), decided on dev's process and shared with
 * every process; a plan that fails leaves the batch whole. */
shardnet_status sn_batch_apart(sn_graph *g, sn_device *dev,
                               const sn_binding *inputs, int *apart);

#endif /* SN_LAYER_SPLIT_H */
