/* What the files of the public API (lib/api) share and nobody else sees:
 * the model and session behind include/shardnet.h's handles, what a plan
 * file says, and the steps of a session's run that pass between creating
 * it (session.c), plan files (planfile.c), choosing its split (split.c)
 * and running it (run.c). */
#ifndef SN_API_IMPL_H
#define SN_API_IMPL_H

#include "exec/exec.h"
#include "import/onnx.h"
#include "runtime/data_split.h"
#include "runtime/pipeline.h"
#include "runtime/tensor_split.h"

/* Plans kept per session, one per input shape seen recently. */
#define PLAN_CACHE 4

struct shardnet_model {
    sn_graph *g;
    sn_model_file *files; /* the files mapped (none when read) */
    size_t nfiles;
};

/* Devices a layer split may use. */
#define MAX_SPLIT 16

struct shardnet_session {
    shardnet_model_t *model;
    sn_device *dev;
    sn_device *devs[MAX_SPLIT]; /* the listed devices, in order */
    size_t nlisted;
    size_t ndev;                /* devices in use: 1, or all for layer */
    int choose;                 /* split "auto": decide at the first run */
    size_t micro;
    size_t cuts[MAX_SPLIT];     /* from a plan file: the layer split's cuts */
    int have_cuts;
    size_t groups[MAX_SPLIT];   /* hybrid split: devices per stage */
    size_t ngroups;             /* 0: a layer split (one device a stage) */
    int hybrid_default;         /* groups not given: the planner's */
    int replicated;             /* split "replicated" */
    size_t reps[MAX_SPLIT];     /* replicated split: devices per stage, each
                                   running it on micro-batches in turn */
    size_t nreps;
    int replicated_default;     /* reps not given: the planner's */
    int multi;                  /* an MPI job: every process runs the
                                   session, and gets its outputs */
    sn_device *home;            /* a device of this process */
    sn_pipeline *pipe;          /* layer split, made at the first run */
    sn_pipeline *hyb_probe;     /* the planner's best hybrid (hyb_groups),
                                   made to search its group stages for
                                   its estimate; becomes pipe where it is
                                   chosen */
    size_t hyb_groups[2];
    /* Its estimate and the report's line on it, for the input shapes of
     * hyb_for and hyb_groups (describing again searches nothing). */
    sn_binding *hyb_for;
    double hyb_est;
    char *hyb_said;
    int tensor;                 /* split "tensor" */
    sn_tensor_split *ts;        /* made at the first run (per input shape) */
    int data;                   /* split "data" */
    sn_data_split *ds;          /* made at the first run */
    size_t data_rows[MAX_SPLIT]; /* rows per listed device, */
    size_t data_batch;          /* for batches of this many rows */
    int have_data_rows;         /* from "auto"'s estimate, or a plan file */
    int data_rows_fixed;        /* from a plan file: every batch is cut in
                                   the proportions of data_plan_rows */
    size_t data_plan_rows[MAX_SPLIT];
    sn_strategy *strat;         /* from a plan file: forced strategies */
    size_t nstrat;
    /* The strategy search's last answer (none fixed), for the input
     * shapes of found_for: its strategies and report, so that describing
     * and running again build that split once instead of searching. */
    sn_binding *found_for;
    sn_strategy *found;
    size_t nfound;
    char *found_report;
    sn_weights *w;
    sn_binding *inputs;
    int *bound;
    sn_plan *plans[PLAN_CACHE]; /* most recently used first */
    sn_plan *last;              /* the plan of the last run */
    double est_s;               /* "auto": the chosen plan's estimate */
    int64_t est_rows;           /* the batch it was estimated for */
    double run_s;               /* the fastest run checked against it */
    int nruns;
};

/* What a plan file says. */
typedef struct plan_file {
    char split[16];
    char devices[512];
    size_t micro;
    size_t cuts[MAX_SPLIT];
    size_t ncuts;
    int have_cuts;
    size_t groups[MAX_SPLIT];
    size_t ngroups;
    size_t reps[MAX_SPLIT]; /* replicated split: replicas per stage */
    size_t nreps;
    size_t rows[MAX_SPLIT]; /* data split: rows per device */
    size_t nrows;
    sn_strategy *strat; /* malloc'ed */
    size_t nstrat;
} plan_file;

/* An options struct of the caller's that leads with its size, in (NULL:
 * every option unset), as this library's, out (known bytes, zeroed
 * first): the size the caller states (0: first, the first version's),
 * fields past it left unset; refused when smaller than the first version,
 * or when it sets a byte past known (an option of a newer shardnet).
 * what names the struct in messages: "session" for
 * shardnet_session_options (options.c). */
shardnet_status sn_options_read(const void *in, void *out, size_t first,
                                size_t known, const char *what);

/* The plan file at path read into *pf (planfile.c). */
shardnet_status sn_plan_file_read(const char *path, plan_file *pf);

/* The session's tensor split over its listed devices for its bound
 * inputs, the strategies given fixed and the rest searched
 * (sn_tensor_split_search); what the search did in report (may be
 * NULL) (split.c). */
shardnet_status sn_session_tensor_search(shardnet_session_t *session,
                                         const sn_strategy *fixed,
                                         size_t nfixed, sn_tensor_split **out,
                                         char *report, size_t cap);
/* The batch of the bound inputs: the first input's first dimension. */
int64_t sn_session_rows(const shardnet_session_t *session);
/* Decide what "auto", a hybrid without groups or a replicated split
 * without replicas leaves open, for the bound inputs, and make the
 * pipeline of a layer, hybrid or replicated split (split.c). */
shardnet_status sn_session_prepare(shardnet_session_t *session);

#endif
