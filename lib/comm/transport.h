/*
 * Transports (private): how bytes move between the processes of a job.
 *
 * Everything that crosses from one process to another goes through the
 * job's transport (sn_world_transport()): the pipeline's values between
 * stage owners and its outputs (lib/runtime/pipeline_run.c), the tensor
 * split's outputs (lib/runtime/shard_run.c), the collective group's
 * exchanges between processes (across.c) and the job-wide figures and
 * statuses of lib/comm/world.h.  Devices of one process never need it:
 * their collectives run in this process (collective.c, shared.c).
 *
 * A transport is a table of byte-message primitives, filled by each kind:
 *
 *   local  a job of one process (transport.c):
 *          nothing ever crosses, so every member is NULL and the calls
 *          below answer alone (a broadcast is nothing, an all-gather a
 *          copy, a message to another process is refused);
 *   mpi    the processes of an MPI job (world.c, the only file that calls
 *          MPI).
 *
 * The calls below check their arguments (no such process, this process
 * itself) for every transport and build the blocking messages on the
 * non-blocking ones.  A transport's error names the process it waited
 * for ("no answer from process 2 within 30 s"), so a job whose peer died
 * stops with a message instead of waiting forever.
 */
#ifndef SN_TRANSPORT_H
#define SN_TRANSPORT_H

#include <stddef.h>

#include "core/error.h"

typedef struct sn_transport sn_transport;
/* A message in flight: made by the transport that started it, freed by
 * sn_transport_wait(). */
typedef struct sn_transport_req sn_transport_req;

/* What a transport implements.  Every process calls bcast and allgather
 * with the same sizes, in the same order; a message is matched by its
 * peer and tag, in the order sent. */
typedef struct sn_transport_ops {
    const char *name; /* "local", "mpi" */
    shardnet_status (*isend)(sn_transport *t, unsigned dst, int tag,
                             const void *buf, size_t bytes,
                             sn_transport_req **req);
    shardnet_status (*irecv)(sn_transport *t, unsigned src, int tag,
                             void *buf, size_t bytes, sn_transport_req **req);
    shardnet_status (*wait)(sn_transport *t, sn_transport_req *req);
    shardnet_status (*bcast)(sn_transport *t, unsigned root, void *buf,
                             size_t bytes);
    shardnet_status (*allgather)(sn_transport *t, const void *mine,
                                 size_t bytes, void *all);
} sn_transport_ops;

/* A transport: its table and where this process stands in the job. */
struct sn_transport {
    const sn_transport_ops *ops;
    unsigned process;   /* this process's index */
    unsigned processes; /* processes in the job, >= 1 */
};

/* The transport of a job of one process (static; never freed). */
sn_transport *sn_transport_local(void);

/* Start sending (receiving) `bytes` bytes to process dst (from src); the
 * buffer stays untouched (unread) until sn_transport_wait(*req). */
shardnet_status sn_transport_isend(sn_transport *t, unsigned dst, int tag,
                                   const void *buf, size_t bytes,
                                   sn_transport_req **req);
shardnet_status sn_transport_irecv(sn_transport *t, unsigned src, int tag,
                                   void *buf, size_t bytes,
                                   sn_transport_req **req);
/* Finish a message and free req (NULL: nothing to do); gives up after the
 * job's timeout, naming the peer. */
shardnet_status sn_transport_wait(sn_transport *t, sn_transport_req *req);
/* A message, started and waited for. */
shardnet_status sn_transport_send(sn_transport *t, unsigned dst, int tag,
                                  const void *buf, size_t bytes);
shardnet_status sn_transport_recv(sn_transport *t, unsigned src, int tag,
                                  void *buf, size_t bytes);
/* buf (bytes) of process root, copied to every process. */
shardnet_status sn_transport_bcast(sn_transport *t, unsigned root, void *buf,
                                   size_t bytes);
/*
 * n float32 values x from process root to every process in codec c
 * (comm/codec.h), the way the splits send values between processes:
 * SN_CODEC_FP32, or more values than one message takes, as they are;
 * else root encodes them into *wire (grown to sn_codec_bound(n) where
 * smaller; *cap its bytes: a caller that must learn early that memory is
 * short grows it first), broadcasts the message's length, then the
 * message, and every process, root too, decodes it into x, so that all
 * hold the same bits.  A root that could not encode sends a length past
 * the bound: every process then fails alike, none waits.  *form (may be
 * NULL) gets the form root's message took (on root).
 */
shardnet_status sn_transport_bcast_floats(sn_transport *t, unsigned root,
                                          int codec, float *x, size_t n,
                                          unsigned char **wire, size_t *cap,
                                          int *form);
/* Each process gives `bytes` bytes (the same count everywhere); all gets
 * processes * bytes, process p's at p * bytes. */
shardnet_status sn_transport_allgather(sn_transport *t, const void *mine,
                                       size_t bytes, void *all);

/* Bytes this process has handed to its transports to send to others
 * since it started (messages, and its part of broadcasts and
 * all-gathers: its bytes once per other process), for benchmarks. */
unsigned long long sn_transport_bytes_sent(void);

#endif /* SN_TRANSPORT_H */
