/*
 * The collective group's state, shared by its paths (private to
 * lib/comm: group.c, shared.c, across.c).  See comm/group.h.
 */
#ifndef SN_GROUP_IMPL_H
#define SN_GROUP_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "comm/group.h"
#include "comm/transport.h"
#include "core/error.h"

/* A cache line: what one device writes at every collective of the
 * host-shared path starts on one of its own, so that the others' reads
 * cost one transfer, not a fight over a line written by both. */
#define SN_GROUP_LINE 64

/* Rank r's side of the host-shared path's current collective: written
 * by r's thread before it reaches a barrier, read by the others after. */
typedef struct sn_group_slot {
    _Alignas(SN_GROUP_LINE) atomic_ulong reached; /* barriers reached */
    float *send_p, *recv_p; /* r's buffers, mapped */
    sn_group_call call;
} sn_group_slot;

struct sn_group {
    size_t n;
    sn_device *dev[SN_COMM_MAX];
    sn_group_where where;
    int spans;            /* ranks on several processes */
    int shared;           /* the host-shared path */
    sn_comm *comm;        /* the staged engine (one process, all devices
                             here), else NULL */
    sn_transport *net;    /* the job's transport (world.h): between
                             processes */

    /* The rendezvous: the last device to arrive runs the collective. */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    size_t arrived;       /* devices waiting at the collective */
    unsigned gen;         /* collectives completed */
    sn_group_call pend[SN_COMM_MAX];
    shardnet_status st;   /* the completed collective's, and its message */
    char msg[1024];
    atomic_int abort;     /* a device failed: the others stop */
    shardnet_status cause_st; /* why (sn_group_fail), for their errors */
    char cause[1024];

    /* Host-shared: each rank's side, and the devices asleep at a
     * barrier (shared.c). */
    sn_group_slot slot[SN_COMM_MAX];
    _Alignas(SN_GROUP_LINE) atomic_uint sleepers;

    /* Between processes: host staging, reused by every call. */
    float *host, *tmp, *rest;
    size_t host_cap, tmp_cap, rest_cap;
    /* Messages in a codec (comm/codec.h) out and in, when the context
     * says so (sn_config.comm). */
    unsigned char *wire_out, *wire_in;
    size_t wire_out_cap, wire_in_cap;
};

/* The host-shared path: rank r's side (shared.c). */
shardnet_status sn_group_shared_run(sn_group *g, size_t r,
                                    const sn_group_call *call);
/* Between processes: the collective all local ranks have arrived at
 * (across.c). */
shardnet_status sn_group_across_run(sn_group *g);

/* Do two devices' descriptions of a collective agree? */
int sn_group_same(const sn_group *g, const sn_group_call *a,
                  const sn_group_call *b);
/* Do the descriptions of ranks[0 .. nranks) agree with call's? */
shardnet_status sn_group_agree(const sn_group *g, const size_t *ranks,
                               size_t nranks, const sn_group_call *call);
/* The error of a device that stops because another failed. */
shardnet_status sn_group_stopped(sn_group *g);
/* Floats the collective covers: the all-reduce's count, or all pieces. */
size_t sn_group_total(const sn_group *g, const sn_group_call *call);
/* Record [t0, now) as the collective on ranks[0 .. nranks)'s devices in
 * the trace (when tracing); `where` is appended to its name. */
void sn_group_trace(const sn_group *g, const size_t *ranks, size_t nranks,
                    const sn_group_call *call, double t0, const char *where);

#endif /* SN_GROUP_IMPL_H */
