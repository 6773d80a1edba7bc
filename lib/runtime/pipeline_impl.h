/*
 * Layer split's runtime (private to lib/runtime/pipeline*.c): a stage, its
 * replicas and the pipeline as pipeline.c builds them (the stages' graphs,
 * devices and who reads whose values) and pipeline_run.c runs them (a
 * thread per replica and the micro-batch bookkeeping they share).
 */
#ifndef SN_PIPELINE_IMPL_H
#define SN_PIPELINE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "comm/transport.h"
#include "runtime/pipeline.h"
#include "runtime/tensor_split.h"

/* Plans kept per stage, one per micro-batch shape. */
#define STAGE_PLANS 3

struct stage;

/* A group stage's tensor split for one micro-batch shape, and what the
 * strategy search that laid it out said (pipeline_run.c). */
typedef struct stage_split {
    sn_tensor_split *ts;
    char *search;
} stage_split;

/* A device running a stage, with its own thread, plans and copy of the
 * stage's weights.  A replicated stage has several: replica q takes the
 * items j with j % nrep == q (PipeDream's round robin), so the stage's
 * items may finish out of order. */
typedef struct replica {
    struct stage *st;
    size_t q;
    sn_device *dev;
    sn_weights *w;
    sn_plan *plans[STAGE_PLANS];
    pthread_t thread;
    int started;
} replica;

typedef struct stage {
    sn_graph *g;        /* the stage's own graph (its replicas share it) */
    sn_device *dev;     /* rep[0].dev */
    replica rep[SN_COLL_MAX];
    size_t nrep;        /* 1, or a replicated stage's devices */
    int *in_parent;     /* per stage input: parent value index */
    int *out_parent;    /* per stage output: parent value index */
    /* A hybrid stage: its nodes tensor-split over a group of devices
     * (grp[0] == dev), one split per micro-batch shape. */
    sn_device *grp[SN_COLL_MAX];
    size_t ngrp;
    stage_split split[STAGE_PLANS];
    sn_strategy *strat;        /* a plan file's strategies for its nodes */
    size_t nstrat;
    struct sn_pipeline *p;
    size_t index;
    /* Processes (lib/comm/world.h): the stage runs on its devices' process; a
     * thread there runs it, and a "proxy" thread on each other process
     * that reads its values receives them (lib/comm/transport.h). */
    unsigned owner;
    int local;          /* owner == this process */
    int proxy;          /* remote, and a local stage reads its values */
    unsigned char *dep; /* per earlier stage: this stage reads its values */
    int **send;         /* local: per process, the values it reads of ours */
    size_t *nsend;
    int *recv;          /* proxy: the values local stages read of ours */
    size_t nrecv;
    /* Values in a codec (lib/comm/codec.h, sn_config.comm), kept from
     * run to run: a local stage's encoded sends, per value slot and value
     * sent ([slot][value], nenc of them), and a proxy's message in. */
    unsigned char **enc;
    size_t *enc_cap, nenc;
    unsigned char *wire;
    size_t wire_cap;
} stage;

struct sn_pipeline {
    sn_graph *g;
    size_t nstages;
    stage *st;
    size_t nlive;
    size_t *start; /* first live node of each stage */

    /* One run: micro-batch bookkeeping, shared by the stage threads.  The
     * counters change under the lock (and the condition is broadcast), and
     * may be read without it by a thread polling for them. */
    pthread_mutex_t lock;
    pthread_cond_t cond;   /* the stages wait on it */
    pthread_cond_t caller; /* the caller waits on it: batches out, the end
                              (not woken by every item) */
    atomic_size_t *done; /* items finished per stage (in any order) */
    /* [stage * nslots + item % nslots]: 1 + the last item finished in
     * that slot; an item is ready for the stages reading it once its
     * slot says so (a replicated stage finishes items out of order). */
    atomic_size_t *item;
    size_t nslots;       /* 2 * micro: the items two batches hold */
    atomic_int failed;
    shardnet_status fail_st;
    char fail_msg[1024];
    size_t micro, rows, chunk;
    int apart;         /* micro-batches may cut the batch (sn_batch_apart) */
    size_t apart_rows; /* the batch `apart` was decided for */
    /* A job: nbatch batches of micro micro-batches each ("items", batch b's
     * micro-batch j being item b * micro + j), up to two batches in
     * flight: batch b's inputs in bin[b % 2], its boundary values in vals
     * [(b % 2) * micro + j]. */
    size_t nbatch;
    atomic_size_t fed;     /* batches whose inputs are in bin */
    double row_bytes;      /* the largest activation per row (0: unknown) */
    sn_binding *bin[2];
    sn_host_tensor **vals; /* [micro][parent value]: boundary values, their
                              memory kept from run to run */
    size_t **cap;          /* [micro][parent value]: bytes allocated */
    /* Whose staging memory (sn_staging_alloc) holds vals' data: the first
     * local device with host memory of its own (pinned, for a GPU), so
     * that a GPU stage's copies to and from it run at the link's speed;
     * NULL when none has (plain memory). */
    sn_device *val_dev;
    size_t nvals;          /* micro-batches vals has room for */
    sn_host_tensor *outputs;
    size_t *out_cap;
    unsigned char *out_wire; /* outputs between processes in the codec */
    size_t out_wire_cap;

    /* Stage threads, started by the first run and parked between runs. */
    atomic_uint job;       /* bumped to start a run */
    size_t finished;       /* threads done with the current run */
    size_t nthreads;       /* local replicas and proxies */
    size_t nworkers;       /* devices running stages: stages, replicas
                              counted */
    atomic_int quit;
    int started;
    int *prod;             /* per parent value: the stage producing it, -1 */
    unsigned me, nproc;    /* this process, processes in the job */
    sn_transport *net;     /* the job's: values and outputs between them */
};

/* Stop and join the stage threads (pipeline_run.c). */
void sn_pipeline_stop_stages(sn_pipeline *p);

#endif /* SN_PIPELINE_IMPL_H */
