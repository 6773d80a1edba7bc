/*
 * The data split's planner (private): every device runs the whole model
 * on rows of the batch of its own, weights replicated, nothing crossing
 * between devices but the outputs; how many rows each gets and what that
 * is estimated to cost (data_costs.c).  The chooser (choose.c) weighs it
 * with the other splits; the runtime that runs it is
 * lib/runtime/data_split.c.
 */
#ifndef SN_DATA_SPLIT_H
#define SN_DATA_SPLIT_H

#include "plan/layer_costs.h"

/* Devices a data split may use. */
#define SN_DATA_MAX 64

typedef struct sn_data_rows {
    double est;               /* seconds per run; 1e300: not possible */
    size_t rows[SN_DATA_MAX]; /* rows of the batch per device (0: none) */
    double mem[SN_DATA_MAX];  /* bytes each device holds: every weight,
                                 and its rows' activations */
    char why[128];            /* not possible: why */
} sn_data_rows;

/* The data split of g over devs[0..ndev) for these inputs, from c (the
 * layer split's cost model of the same, sn_layer_costs_measure): its rows
 * per device and estimate in *out (not possible: est 1e300 and why), a
 * line per device and one for the split appended to report at *len (may
 * be NULL).  Collective in a job of several processes. */
shardnet_status sn_data_estimate(sn_graph *g, sn_device *const *devs,
                                 size_t ndev, const sn_binding *inputs,
                                 const sn_layer_costs *c, sn_data_rows *out,
                                 char *report, size_t cap, size_t *len);

#endif /* SN_DATA_SPLIT_H */
