/*
 * The host-staged engine's state (private to lib/comm: collective.c runs
 * the chunk pipeline, collective_calls.c checks each call's views and
 * describes it as a job).  See comm/collective.h.
 */
#ifndef SN_COLLECTIVE_IMPL_H
#define SN_COLLECTIVE_IMPL_H

#include <pthread.h>

#include "comm/collective.h"
#include "core/error.h"


#define SLOTS 3
#define ALIGN 64
#define DEFAULT_CHUNK_BYTES (512u * 1024u)

typedef enum { JOB_REDUCE, JOB_GATHER } job_mode;
typedef enum { OP_ALLREDUCE, OP_ALLGATHER, OP_REDUCE_SCATTER, OP_BROADCAST,
               OP_SENDRECV } job_op;

typedef struct worker {
    sn_comm *comm;
    size_t rank;
    pthread_t thread;
    unsigned long seen; /* last job taken */

    /* Per job, set by the caller before the job starts. */
    sn_view in, out;
    size_t ilo, ihi, olo, ohi;
    int mapped;
    /* Per job, set by the helper. */
    float *inp, *outp;      /* mapped: elements ilo and olo */
    void *map_in, *map_out; /* mappings to release (map_out NULL if shared) */
    int ready;
    int copies_over; /* run_copies returned: no more device traffic */
    size_t read_done, write_done; /* chunks finished */
} worker;

struct sn_comm {
    size_t n;
    sn_device *devs[SN_COMM_MAX];
    size_t chunk; /* floats */
    int no_map;
    float *res;                  /* SLOTS * chunk: chunk results */
    float *stage[SN_COMM_MAX];   /* SLOTS * chunk for ranks read by copy */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t started; /* helper threads running */
    int quit;
    unsigned long job;
    size_t finished;

    /* Per job. */
    job_op op;
    job_mode mode;
    size_t total, nchunks, computed;
    int caller_done; /* the caller no longer touches mappings */
    const float *src[SLOTS]; /* what helpers write back, per slot */
    int abort;
    shardnet_status err;
    char errmsg[512];
    worker w[SN_COMM_MAX];
};

/* sn_comm_sum (comm/collective.h) from the last element to the first:
 * the same sums, for a caller whose last-touched lines are at the end
 * (comm/shared.c). */
void sn_comm_sum_down(float *const *out, size_t nout, const float *const *in,
                      size_t nin, size_t len);

/* The call's name, for messages. */
const char *sn_comm_op_name(job_op op);
/* Run the job whose segments are in c->w[*]; total > 0. */
shardnet_status sn_comm_run(sn_comm *c);

#endif /* SN_COLLECTIVE_IMPL_H */
