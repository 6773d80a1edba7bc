/*
 * The layer split's cost model (private to lib/plan/: the cut planner and
 * the chooser read it): what each live node costs on each device, what a
 * cut costs, and what a stage over a range of nodes costs on the unit it
 * is placed on.  See layer_costs.c.
 */
#ifndef SN_LAYER_COSTS_H
#define SN_LAYER_COSTS_H

#include "exec/exec.h"

/*
 * The cost model's inputs for a graph, its input shapes and devices: every
 * live node costed on every device from its shapes and the device's
 * profile (node_costs.h: nothing is run), and what a cut costs.
 */
typedef struct sn_layer_costs {
    size_t nlive, ndev;
    double *xfer;  /* per live node: seconds to move what crosses a cut
                      just before it */
    double *speed; /* per device: GEMM flops/s (for the report) */
    double *pre;   /* [d * (nlive + 1) + i]: seconds of live nodes [0, i)
                      on device d */
    double bw;     /* bytes/s across a cut: the slowest device's staging */
    double *xbytes; /* per live node: bytes crossing a cut just before it */
    double *wpre;  /* per live node i: weight bytes first read by live
                      nodes [0, i) */
    double arena;  /* activation bytes of the whole graph, whole batch */
    double *limit; /* per device: bytes it has (global memory) */
    double *launch; /* per device: seconds to launch a kernel */
    double *keep;  /* per device: the share of its speed it keeps while
                      the listed devices it shares with compute too
                      (plan/share.h); splits that run devices at once
                      divide its times by it */
    size_t rows;   /* the batch */
    int apart;     /* the nodes keep its rows apart (sn_rows_apart) */
    double out_bytes; /* the model's outputs, whole batch */
    double *obytes; /* per live node: bytes of its first output */
    unsigned char *weighted; /* per live node: reads a constant matrix */
    /* What the cut planner places stages on: "units", each one device, a
     * group tensor-splitting its stage (sn_layer_set_units) or a group
     * replicating it (sn_layer_set_replicas). */
    size_t nunits;
    size_t *ufirst; /* per unit: its first device */
    size_t *urep;   /* per unit: devices replicating its stage (1: none) */
    size_t umicro;  /* micro-batches the replicas take in turn */
    double *upre;  /* [u * (nlive + 1) + i]: seconds of live nodes [0, i) */
    double *ulimit; /* per unit: bytes of a stage it can hold */
    unsigned char *ucross; /* per unit: on another process than the one
                              before it */
    unsigned *proc;        /* per device: its process */
    double link_lat, link_bw; /* between processes */
} sn_layer_costs;

/* Every device's profile and node times, and the shapes, for g with these
 * inputs on devs[0..ndev) (collective in a job of several processes),
 * and what the devices keep of their speeds at once, with a line per
 * group that shares something appended to report at *len (may be NULL).
 * Freed by sn_layer_costs_free; on failure, freed already. */
shardnet_status sn_layer_costs_measure(sn_graph *g, sn_device *const *devs,
                                       size_t ndev, const sn_binding *inputs,
                                       sn_layer_costs *c, char *report,
                                       size_t cap, size_t *len);
void sn_layer_costs_free(sn_layer_costs *c);
/* Seconds of live nodes [a, b) on device d alone. */
double sn_layer_dev_time(const sn_layer_costs *c, size_t d, size_t a,
                         size_t b);
/* The same while the devices it shares with compute too. */
double sn_layer_dev_time_shared(const sn_layer_costs *c, size_t d, size_t a,
                                size_t b);
/* The units stages go to: groups[u] consecutive devices each (NULL: one
 * device per unit). */
shardnet_status sn_layer_set_units(sn_layer_costs *c, const size_t *groups,
                                   size_t ngroups);
/* The units stages go to: reps[u] consecutive devices each, every device
 * of a unit running the whole stage on its own micro-batches (of m, taken
 * in turn). */
shardnet_status sn_layer_set_replicas(sn_layer_costs *c, const size_t *reps,
                                      size_t nreps, size_t m);
/* Seconds of a stage on unit u over live nodes [a, b), what enters it
 * included (a replicated unit: its slowest replica's share of the
 * micro-batches). */
double sn_layer_stage_time(const sn_layer_costs *c, size_t u, size_t a,
                           size_t b);
/* Device bytes of a stage over live nodes [a, b) with m micro-batches. */
double sn_layer_stage_memory(const sn_layer_costs *c, size_t a, size_t b,
                             size_t m);
/* Cuts of the live nodes into ns stages on the first ns units, with m
 * micro-batches, minimising the slowest stage: stage s starts at
 * start[s]. */
shardnet_status sn_layer_plan_cuts(const sn_layer_costs *c, size_t ns,
                                   size_t m, size_t *start);

#endif /* SN_LAYER_COSTS_H */
