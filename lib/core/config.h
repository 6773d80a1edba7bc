/*
 * The library's configuration (private): every setting the SHARDNET_*
 * environment variables give, one typed field each, read from the
 * environment once per process (the CLI's own variables, SHARDNET_LOG and
 * SHARDNET_NO_REEXEC, are not the library's).
 *
 * It is in core because every layer reads some of it, backends and the
 * CPU kernels included, which see only lib/backend and lib/core.  Two
 * kinds of settings:
 *
 * - a context's own (the first group of fields): a context copies the
 *   process's, lays the options of shardnet_context_create_with() over
 *   them and keeps the result; its devices point at it (sn_device.config),
 *   and the CPU backend's discovery is given it (sn_discover_args), so a
 *   setting is read where it is used from the context it belongs to;
 * - the process's (the second group): read where no context is at hand
 *   (joining MPI, the link between processes, the GEMM kernel) from
 *   sn_config_env().
 */
#ifndef SN_CONFIG_H
#define SN_CONFIG_H

#include <stdint.h>

#include "shardnet.h"

/* Room for a device list and for a folder's path, with the NUL. */
#define SN_CONFIG_LIST_MAX 1024
#define SN_CONFIG_PATH_MAX 4096

typedef struct sn_config {
    /* A context's own. */
    uint64_t memory_limit;  /* SHARDNET_MEMORY_LIMIT: bytes the planner may
                               use on each device; 0: the device's memory */
    unsigned cpu_threads;   /* SHARDNET_CPU_THREADS: threads of each CPU
                               device's team at most; 0: one per core */
    char devices[SN_CONFIG_LIST_MAX]; /* SHARDNET_DEVICES: the default
                                         device list; "": all */
    int reprofile;          /* SHARDNET_REPROFILE: measure the devices
                               again instead of reading their profiles */
    int staged_collectives; /* SHARDNET_STAGED_COLLECTIVES: the staged
                               transport even where devices share memory */
    int tensor_rules;       /* SHARDNET_TENSOR_RULES: the tensor split's
                               rule-based layout, no strategy search */
    char kernel_dir[SN_CONFIG_PATH_MAX]; /* SHARDNET_CL_DIR: the OpenCL
                                            sources from this folder; "":
                                            those built in */
    char cache_dir[SN_CONFIG_PATH_MAX];  /* SHARDNET_CACHE_DIR: profiles and
                                            program binaries; "": see
                                            sn_cache_dir */
    int comm;               /* SHARDNET_COMM: how float values cross between
                               processes, as lib/comm/codec.h's sn_codec
                               (0 fp32, the floats as they are; 1 fp16;
                               2 bf16; 3 int8) */
    shardnet_progress_fn progress; /* the context options' (no variable):
                                      sn_progress reports to it */
    void *progress_user;
    /* The process's. */
    int mpi;                 /* SHARDNET_MPI: join the job under mpirun (1,
                                the default) or stay out (0) */
    double mpi_timeout_s;    /* SHARDNET_MPI_TIMEOUT: a wait between
                                processes gives up after this; 0: world.c's
                                default */
    double link_latency_s;   /* SHARDNET_LINK_LATENCY_US, in seconds: the
                                link between processes; 0: measured */
    double link_bytes_per_s; /* SHARDNET_LINK_GBPS, in bytes per second */
    int sgemm_blas;          /* SHARDNET_CPU_SGEMM=blas: OpenBLAS for every
                                GEMM, not cpu/'s AVX-512 kernel ("auto") */
    int cuda_check;          /* SHARDNET_CUDA_CHECK=1: wait for each CUDA
                                kernel, so that an error names it */
} sn_config;

/*
 * Report the progress of long work to the configuration's callback, if
 * any (what as a printf format): at most every 0.2 s, and always when
 * done reaches a non-zero total or `last` is set (the stage's end).
 * Thread-safe per stage: each stage keeps its own time of the last report
 * in *stamp (0 before the first).
 */
/* Weights below this many bytes are not counted in uploads' progress. */
#define SN_PROGRESS_MIN 4096
void sn_progress(const sn_config *c, double *stamp, int last, uint64_t done,
                 uint64_t total, const char *what, ...)
    __attribute__((format(printf, 6, 7)));

/* The process's configuration, read from the environment at the first call
 * (thread-safe) and never again; never NULL.  A variable set to a value
 * that cannot be used keeps its default here, and the first such is
 * sn_config_env_status()'s error. */
const sn_config *sn_config_env(void);

/* SHARDNET_OK, or SHARDNET_INVALID_ARGUMENT with the message (sn_error)
 * naming the first variable of the environment whose value cannot be used,
 * the value, and what it should be. */
shardnet_status sn_config_env_status(void);

/* config, or the process's where it is NULL (a device made outside any
 * context, by the tests). */
const sn_config *sn_config_or_env(const sn_config *config);

#endif /* SN_CONFIG_H */
