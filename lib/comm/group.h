/*
 * A collective group (private): the devices of a tensor split, in one
 * process or spread over the processes of a job, and the one entry point
 * through which the split runs its collectives.
 *
 * Rank r is devs[r].  Each device of this process runs its part of the
 * model on a thread of its own and calls sn_group_collective() at every
 * collective with the same description; the group picks the path:
 *
 *   staged       one process, any devices: the last device to arrive runs
 *                the host-staged chunk pipeline (lib/comm/collective.c)
 *                for all (group.c);
 *   host-shared  one process, every device's memory shared with the host:
 *                each device maps its buffers and, between two barriers,
 *                reduces its share for all (shared.c);
 *   processes    devices on several processes: the last device of each
 *                process to arrive stages this process's ranks and the
 *                processes exchange what the others keep by messages of
 *                the job's transport (transport.h), then write the
 *                results back (across.c).
 *
 * Sums run in rank order within a process and in process order across
 * processes, so every path gives the same results bit for bit on
 * every run, and the staged and host-shared ones agree with each other.
 */
#ifndef SN_GROUP_H
#define SN_GROUP_H

#include <stddef.h>

#include "comm/collective.h"

typedef enum sn_group_kind {
    SN_GROUP_ALLREDUCE,     /* in place: send == recv */
    SN_GROUP_ALLGATHER,     /* rank r's counts[r] floats into every recv */
    SN_GROUP_REDUCE_SCATTER /* rank r's segment of the sum into its recv */
} sn_group_kind;

/* One device's side of a collective. */
typedef struct sn_group_call {
    sn_group_kind kind;
    size_t n;                   /* participants */
    size_t counts[SN_COMM_MAX]; /* floats per rank; all-reduce: counts[0] is
                                   the whole count */
    sn_view send, recv;         /* on this rank's device */
} sn_group_call;

/* Where the ranks run: fixed when the group is made. */
typedef struct sn_group_where {
    unsigned me;                   /* this process */
    size_t local[SN_COMM_MAX];     /* this process's ranks, ascending */
    size_t nlocal;
    unsigned procs[SN_COMM_MAX];   /* the processes owning ranks, ascending;
                                      procs[0] is the root */
    size_t nprocs;
} sn_group_where;

typedef struct sn_group sn_group;

/**
 * \brief Make a group of ndev devices (2..SN_COMM_MAX), this process's
 * devices those not marked remote.
 * \param staged  non-zero: never the host-shared path (tests compare
 *                the two).
 * \return SHARDNET_OK, SHARDNET_OUT_OF_MEMORY or the staged engine's error.
 */
shardnet_status sn_group_create(sn_device *const *devs, size_t ndev,
                                int staged, sn_group **out);
void sn_group_free(sn_group *g);
const sn_group_where *sn_group_where_of(const sn_group *g);

/* Before a run: forget an earlier run's failure. */
void sn_group_begin(sn_group *g);
/* A device failed: the others stop at their next collective (or now, if
 * they wait at one) with an error. */
void sn_group_abort(sn_group *g);
/* The same, for rank's failure `st` whose message is the calling
 * thread's last error: the others' errors repeat it (the first failure
 * of a run is the one they name), so that whichever device's error a
 * run reports, it names the cause. */
void sn_group_fail(sn_group *g, size_t rank, shardnet_status st);

/* Rank `rank`'s side of the current collective; returns when its results
 * are in place. */
shardnet_status sn_group_collective(sn_group *g, size_t rank,
                                    const sn_group_call *call);

/* Every rank's piece (counts[r] elements of `unit` bytes, at element
 * off[r] of full) onto every process that owns ranks: this process's
 * pieces are in full already.  Every owning process calls it alike;
 * scratch holds the whole.  A no-op in one process. */
shardnet_status sn_group_gather(sn_group *g, char *full, const size_t *counts,
                                const size_t *off, size_t unit, char *scratch);

/* off[r] = counts[0] + ... + counts[r - 1] for r < n; returns the sum of
 * all n. */
size_t sn_group_offsets(const size_t *counts, size_t n, size_t *off);

#endif /* SN_GROUP_H */
