/*
 * The tensor split's run-time state (private to lib/runtime/shard*.c):
 * shard.c creates and frees it, shard_run.c runs it (a crew: one thread
 * per local device), shard_collective.c lowers the split's own collective node.
 */
#ifndef SN_SHARD_IMPL_H
#define SN_SHARD_IMPL_H

#include "comm/group.h"
#include "runtime/crew.h"
#include "runtime/shard_build.h"

typedef struct rank_ctx {
    struct sn_tensor_split *t;
    size_t rank;
} rank_ctx;

struct sn_tensor_split {
    sn_graph *g;
    size_t n;
    sn_device *dev[MAXD];
    sn_graph *sub[MAXD];
    sn_weights *w[MAXD];
    sn_plan *plan[MAXD];
    sn_binding *bound; /* shapes it was built for */
    sn_host_tensor *out;
    char *desc;
    sn_strategy *chosen;
    size_t nchosen;
    size_t ncoll;
    double coll_bytes;
    double estimate;
    sn_layout *out_lay;          /* per model output: R, or cut (S) and put
                              together on the host from every device */

    /* the collectives, and the workers */
    sn_group *group;
    /* The group's places: this process plans and runs only its own
     * devices, ranks where->local[0 .. nlocal), the first driven by the
     * caller; in a job every process gets the outputs. */
    const sn_group_where *where;
    sn_crew *crew;         /* the local devices' threads */
    const sn_binding *in;  /* the current run's inputs */
    int me_owned_out;  /* every output has a buffer of its own (a job of
                          several processes) */
    unsigned char *out_wire; /* the outputs' messages in the codec, kept */
    size_t out_wire_cap;
    int overflow;      /* the first device whose shard exceeds its memory
                          (known to every process of a job), or -1 */
    rank_ctx ctx[MAXD];    /* the collective hook's argument per device */
};

/* The hook every device's plan calls at a collective: the group runs it
 * (ctx: the device's rank_ctx). */
shardnet_status sn_shard_rendezvous(void *ctx, const sn_coll_desc *d);
/* Device r's part of a run (t: the split), as its crew calls it; on
 * failure the others are told to stop. */
shardnet_status sn_shard_run_rank(void *t, size_t r);
/* The operators of the devices' graphs (the split's own node among them). */
const sn_op_def *sn_shard_ops(const char *domain, const char *op_type);

#endif /* SN_SHARD_IMPL_H */
