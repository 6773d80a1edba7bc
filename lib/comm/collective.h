/*
 * Host-staged collectives between devices of any backends (private).
 *
 * A communicator (sn_comm) is a group of n participants, one device each,
 * rank = position in the array it was created from.  Every collective moves
 * float32 data through host memory, cut into chunks and pipelined: one
 * helper thread per participant (created with the comm, parked between
 * calls) reads chunk i+1 from its device and writes chunk i-1 back, while
 * the calling thread reduces chunk i.  A device whose memory the host shares
 * (info.host_unified) is mapped instead, and the calling thread reduces
 * straight from and into the mapping.  Sums always run in rank order
 * (((x0 + x1) + x2) + ...), so results are the same bit for bit on every
 * run and match a plain host loop in that order.
 *
 * All participants live in this process: devices of other processes take
 * part in a collective through the collective group (group.h), whose
 * exchanges between processes go through the job's transport
 * (transport.h).
 */
#ifndef SN_COLLECTIVE_H
#define SN_COLLECTIVE_H

#include <stddef.h>
#include <string.h>

#include "backend/backend.h"

/** Most participants in one comm. */
#define SN_COMM_MAX 16

typedef struct sn_comm sn_comm;

/** Options for sn_comm_create(); a zeroed struct (or NULL) means defaults. */
typedef struct sn_comm_opts {
    size_t chunk_bytes; /* pipeline chunk; 0 = 512 KiB; rounded to 64 bytes */
    int no_map;         /* non-zero: stage every device through copies, even
                           host-unified ones (tests, benchmarks) */
} sn_comm_opts;

/**
 * \brief Create a comm of n participants (1..SN_COMM_MAX distinct devices).
 *
 * Starts one helper thread per participant and allocates the host staging
 * memory (64-byte aligned, reused by every call).
 * \param devs  n devices, rank r = devs[r]; borrowed, must outlive the comm.
 * \param opts  options or NULL.
 * \param[out] out  new comm, to be released with sn_comm_free().
 * \return SHARDNET_OK, SHARDNET_INVALID_ARGUMENT (n, NULL or repeated
 *         devices), SHARDNET_OUT_OF_MEMORY or SHARDNET_INTERNAL (threads).
 */
shardnet_status sn_comm_create(sn_device *const *devs, size_t n,
                               const sn_comm_opts *opts, sn_comm **out);

/** Stop the helper threads and free the comm (NULL is fine). */
void sn_comm_free(sn_comm *comm);

/** Participants in the comm. */
size_t sn_comm_size(const sn_comm *comm);

/** Device of rank r, or NULL when r is out of range. */
sn_device *sn_comm_device(const sn_comm *comm, size_t r);

/*
 * The collectives below are called from one thread at a time per comm and
 * block until every device holds its result.  Views are checked first: each
 * must be on its rank's device and inside its buffer, and a rank's input and
 * output may overlap only where they are the same memory element for
 * element (in place).  A backend error aborts the call with that error
 * (devices may then hold partial results) and the comm stays usable.
 */

/**
 * \brief All-reduce (sum): every bufs[r] ends up holding sum over r of bufs[r].
 * \param bufs   n views, bufs[r] on rank r's device, count floats each.
 */
shardnet_status sn_allreduce(sn_comm *comm, const sn_view *bufs, size_t count);

/**
 * \brief All-gather with uneven counts: recv[r] receives send[0] (counts[0]
 * floats), then send[1] (counts[1] floats), ..., on every rank.
 * \param send    n views, send[r] holds counts[r] floats.
 * \param counts  n counts (any may be 0).
 * \param recv    n views of sum(counts) floats each.
 */
shardnet_status sn_allgather(sn_comm *comm, const sn_view *send,
                             const size_t *counts, const sn_view *recv);

/**
 * \brief Reduce-scatter with uneven counts: recv[r] receives elements
 * [counts[0] + ... + counts[r-1], + counts[r]) of the sum over ranks.
 * \param send    n views of sum(counts) floats each.
 * \param counts  n counts (any may be 0).
 * \param recv    n views, recv[r] of counts[r] floats.
 */
shardnet_status sn_reduce_scatter(sn_comm *comm, const sn_view *send,
                                  const size_t *counts, const sn_view *recv);

/**
 * \brief Broadcast: bufs[root] (count floats) is copied to every bufs[r].
 */
shardnet_status sn_broadcast(sn_comm *comm, const sn_view *bufs, size_t count,
                             size_t root);

/**
 * \brief Point to point: count floats from send (on rank src's device) to
 * recv (on rank dst's device).  src == dst copies within one device.
 */
shardnet_status sn_sendrecv(sn_comm *comm, size_t src, sn_view send,
                            size_t dst, sn_view recv, size_t count);

/* [lo, hi) = [a, b) intersected with [s, e); 0 when empty.  Every
 * path of the collective group cuts its chunks and segments with it. */
static inline int sn_comm_clip(size_t a, size_t b, size_t s, size_t e,
                               size_t *lo, size_t *hi)
{
    *lo = a > s ? a : s;
    *hi = b < e ? b : e;
    return *lo < *hi;
}

/* d[j] = s[j] (first) or d[j] += s[j]: one step of a sum in rank order,
 * vectorisable, the same additions on every run.  Every path sums with
 * it or with sn_comm_sum (the same additions in one pass), so their
 * results agree bit for bit. */
static inline void sn_comm_add(float *restrict d, const float *restrict s,
                               size_t len, int first)
{
    if (first) {
        memcpy(d, s, len * sizeof(float));
        return;
    }
#pragma omp simd
    for (size_t j = 0; j < len; j++)
        d[j] += s[j];
}

/* out[o][j] = in[0][j] + in[1][j] + ... (in rank order, the adds of
 * sn_comm_add) for every o < nout and j < len, in one pass (comm/sum.c).
 * An output may be an input element for element (in place), and
 * otherwise must not overlap one. */
void sn_comm_sum(float *const *out, size_t nout, const float *const *in,
                 size_t nin, size_t len);

#endif /* SN_COLLECTIVE_H */
