/*
 * The processes of a job (private): one process, or the ranks of an MPI job
 * (lib/comm/world.c is the only file that calls MPI).
 *
 * A program started by mpirun (Open MPI: OMPI_COMM_WORLD_SIZE in the
 * environment) joins the job when its first context is created: MPI is
 * initialised then (unless the program did it already) and finalised at
 * exit.  Anything else, or a build without MPI, is a job of one process
 * and every call below is a local no-op.  SHARDNET_MPI=0 keeps a process
 * out of MPI even under mpirun.
 *
 * Every call between processes waits at most SHARDNET_MPI_TIMEOUT seconds
 * (default 30) for its peers; past that it fails with a message that names
 * the process that did not answer, so a job whose peer died or hangs stops
 * instead of waiting forever.  (Open MPI also stops the whole job when one
 * of its processes dies.)
 */
#ifndef SN_WORLD_H
#define SN_WORLD_H

#include <stddef.h>

#include "comm/transport.h"

/* Join the job (idempotent; thread-safe). */
shardnet_status sn_world_init(void);
/* This process's index and the number of processes (1 outside MPI). */
unsigned sn_world_process(void);
unsigned sn_world_processes(void);
/* This process's place among the job's processes on its own machine, as
 * the launcher tells it before MPI starts (Open MPI's
 * OMPI_COMM_WORLD_LOCAL_RANK/SIZE, MPICH's MPI_LOCALRANKID/LOCALNRANKS):
 * *rank of *size.  0 of 1 outside a job, under SHARDNET_MPI=0, or in a
 * build without MPI.  Needs no sn_world_init (CPU device discovery, which
 * comes first, shares the cores between the processes with it). */
void sn_world_node_share(unsigned *rank, unsigned *size);
/* The job's transport (transport.h): MPI in a job of several processes,
 * else the local one.  Every message between processes goes through it. */
sn_transport *sn_world_transport(void);

/* Figures and statuses every process shares (the planner's, the API's),
 * through the job's transport; every process calls them with the same
 * sizes, in the same order.  buf (bytes) of process root, copied to every
 * process. */
shardnet_status sn_world_bcast(unsigned root, void *buf, size_t bytes);
/* Each process gives `bytes` bytes (the same count everywhere); all gets
 * processes * bytes, process p's at p * bytes. */
shardnet_status sn_world_allgather(const void *mine, size_t bytes, void *all);
/* Process `owner` tells every process how its part of a collective task
 * went: its own status comes back to it (its message kept); the others get
 * that status with a message naming `what` and the owner. */
shardnet_status sn_world_share_status(unsigned owner, shardnet_status mine,
                                      const char *what);
/* A job-wide task failed on this process: at exit, end the whole job
 * (MPI_Abort) instead of waiting in MPI_Finalize for peers that may wait
 * for us. */
void sn_world_failed(void);
/* The link between processes, measured once (collective, the first call
 * on every process): a one-way latency in seconds and a bandwidth in
 * bytes/s, the worst between process 0 and each other process (ping-pongs
 * of 8 bytes and of 4 MiB).  One process: 0 and a huge bandwidth.
 * SHARDNET_LINK_LATENCY_US and SHARDNET_LINK_GBPS replace the figures
 * (to plan as if the machines were further apart). */
shardnet_status sn_world_link(double *latency, double *bandwidth);

#endif /* SN_WORLD_H */
