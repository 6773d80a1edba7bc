/*
 * The processes of a job: MPI, behind the MPI transport (transport.h) and
 * the job-wide calls of world.h.  The only file that calls MPI.
 *
 * Every exchange is non-blocking and then polled, so that it can give up
 * after SHARDNET_MPI_TIMEOUT seconds with the peer's name.  MPI runs on a
 * duplicate of MPI_COMM_WORLD (our tags never meet the program's),
 * returning errors instead of aborting; when MPI gives less than
 * MPI_THREAD_MULTIPLE, one lock serialises shardnet's calls.  After a
 * failed exchange the process aborts the job at exit rather than wait in
 * MPI_Finalize for peers that may never come.
 */
#include <config.h>

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "core/error.h"
#include "core/trace.h"
#include "comm/world.h"

#ifdef SN_HAVE_MPI
#include <mpi.h>
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static shardnet_status init_status = SHARDNET_OK;
static char init_message[256];
static unsigned me = 0, nprocs = 1;

#ifdef SN_HAVE_MPI

static MPI_Comm comm = MPI_COMM_NULL;
static int we_initialised;
static int serialise; /* MPI is not thread-multiple: one call at a time */
static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;
static double timeout_s = 30.0;
/* A task failed here (1; sn_world_failed) or an exchange between the
 * processes failed (2): abort at exit, so that peers do not wait for us.
 * Unless every process was told of the failure (failure_shared, by
 * sn_world_share_status) and no exchange failed: then none waits for
 * another, and an abort would only kill a peer before it said what
 * failed. */
static volatile int job_failed;
static volatile int failure_shared;

#define LOCK()                                                                \
    do {                                                                      \
        if (serialise)                                                        \
            pthread_mutex_lock(&mpi_lock);                                    \
    } while (0)
#define UNLOCK()                                                              \
    do {                                                                      \
        if (serialise)                                                        \
            pthread_mutex_unlock(&mpi_lock);                                  \
    } while (0)

static void at_exit(void)
{
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin)
        return;
    if (job_failed == 2 || (job_failed && !failure_shared)) {
        /* Peers may be waiting for us: end the job now, not at their
         * timeouts. */
        MPI_Abort(MPI_COMM_WORLD, 1);
        return;
    }
    if (comm != MPI_COMM_NULL)
        MPI_Comm_free(&comm);
    if (we_initialised)
        MPI_Finalize();
}

static int launched_by_mpirun(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") ||
           getenv("PMI_SIZE");
}

static void init_once(void)
{
    const sn_config *config = sn_config_env();
    int inited = 0, provided = 0, r = 0, n = 1;
    if (!config->mpi)
        return;
    if (config->mpi_timeout_s > 0)
        timeout_s = config->mpi_timeout_s;
    MPI_Initialized(&inited);
    if (!inited) {
        if (!launched_by_mpirun())
            return;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) !=
            MPI_SUCCESS) {
            init_status = SHARDNET_IO_ERROR;
            snprintf(init_message, sizeof init_message,
                     "MPI_Init_thread failed");
            return;
        }
        we_initialised = 1;
    } else {
        MPI_Query_thread(&provided);
        if (provided < MPI_THREAD_SERIALIZED) {
            init_status = SHARDNET_UNSUPPORTED;
            snprintf(init_message, sizeof init_message,
                     "MPI was initialised with a thread level below "
                     "MPI_THREAD_SERIALIZED; shardnet calls MPI from its "
                     "own threads");
            return;
        }
    }
    serialise = provided < MPI_THREAD_MULTIPLE;
    atexit(at_exit);
    if (MPI_Comm_dup(MPI_COMM_WORLD, &comm) != MPI_SUCCESS) {
        init_status = SHARDNET_IO_ERROR;
        snprintf(init_message, sizeof init_message, "MPI_Comm_dup failed");
        return;
    }
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    me = (unsigned)r;
    nprocs = (unsigned)n;
    sn_log(SHARDNET_LOG_INFO,
           "MPI: process %u of %u (thread level %s, timeout %.0f s)", me,
           nprocs, serialise ? "serialised" : "multiple", timeout_s);
}

static shardnet_status mpi_failed(int rc, const char *what)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    job_failed = 2;
    MPI_Error_string(rc, text, &len);
    return sn_error(SHARDNET_IO_ERROR, "process %u: %s: %.*s", me, what, len,
                    text);
}

/* Poll req until it completes, or fail after the timeout.  peer: the
 * process waited for (-1: any of a collective's). */
static shardnet_status wait_for(MPI_Request *req, const char *what, int peer)
{
    double t0 = sn_trace_now();
    unsigned spins = 0;
    for (;;) {
        int done = 0, rc;
        LOCK();
        rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        UNLOCK();
        if (rc != MPI_SUCCESS)
            return mpi_failed(rc, what);
        if (done)
            return SHARDNET_OK;
        if (sn_trace_now() - t0 > timeout_s) {
            job_failed = 2;
            if (peer >= 0)
                return sn_error(SHARDNET_IO_ERROR,
                                "process %u: %s: no answer from process %d "
                                "within %.0f s (SHARDNET_MPI_TIMEOUT)",
                                me, what, peer, timeout_s);
            return sn_error(SHARDNET_IO_ERROR,
                            "process %u: %s: not every process took part "
                            "within %.0f s (SHARDNET_MPI_TIMEOUT)",
                            me, what, timeout_s);
        }
        /* Yield the core at once (a peer may share it), and after a while
         * sleep a little between polls. */
        if (++spins < 20000) {
            sched_yield();
        } else {
            struct timespec ns = {0, 50000};
            nanosleep(&ns, NULL);
        }
    }
}

static int count_ok(size_t n)
{
    return n <= (size_t)INT32_MAX;
}

#define CHECK_COUNT(n, what)                                                  \
    do {                                                                      \
        if (!count_ok(n))                                                     \
            return sn_error(SHARDNET_UNSUPPORTED,                             \
                            "%s: %zu bytes in one message", what,             \
                            (size_t)(n));                                     \
    } while (0)

/* --- the MPI transport (transport.h) ------------------------------------- */

struct sn_transport_req {
    MPI_Request req;
    unsigned peer;
    int sending;
};

static shardnet_status mpi_start(int sending, unsigned peer, int tag,
                                 void *buf, size_t bytes,
                                 sn_transport_req **out)
{
    const char *what = sending ? "send" : "receive";
    int rc;
    CHECK_COUNT(bytes, what);
    sn_transport_req *r = calloc(1, sizeof *r);
    if (!r)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s", what);
    r->peer = peer;
    r->sending = sending;
    LOCK();
    rc = sending ? MPI_Isend(buf, (int)bytes, MPI_BYTE, (int)peer, tag, comm,
                             &r->req)
                 : MPI_Irecv(buf, (int)bytes, MPI_BYTE, (int)peer, tag, comm,
                             &r->req);
    UNLOCK();
    if (rc != MPI_SUCCESS) {
        free(r);
        return mpi_failed(rc, what);
    }
    *out = r;
    return SHARDNET_OK;
}

static shardnet_status mpi_isend(sn_transport *t, unsigned dst, int tag,
                                 const void *buf, size_t bytes,
                                 sn_transport_req **req)
{
    (void)t;
    return mpi_start(1, dst, tag, (void *)(uintptr_t)buf, bytes, req);
}

static shardnet_status mpi_irecv(sn_transport *t, unsigned src, int tag,
                                 void *buf, size_t bytes,
                                 sn_transport_req **req)
{
    (void)t;
    return mpi_start(0, src, tag, buf, bytes, req);
}

static shardnet_status mpi_wait(sn_transport *t, sn_transport_req *req)
{
    (void)t;
    shardnet_status st = wait_for(&req->req, req->sending ? "send" : "receive",
                                  (int)req->peer);
    free(req);
    return st;
}

static shardnet_status mpi_bcast(sn_transport *t, unsigned root, void *buf,
                                 size_t bytes)
{
    MPI_Request req;
    int rc;
    (void)t;
    CHECK_COUNT(bytes, "broadcast");
    LOCK();
    rc = MPI_Ibcast(buf, (int)bytes, MPI_BYTE, (int)root, comm, &req);
    UNLOCK();
    if (rc != MPI_SUCCESS)
        return mpi_failed(rc, "broadcast");
    return wait_for(&req, "broadcast", (int)root);
}

static shardnet_status mpi_allgather(sn_transport *t, const void *mine,
                                     size_t bytes, void *all)
{
    MPI_Request req;
    int rc;
    (void)t;
    CHECK_COUNT(bytes * nprocs, "all-gather");
    LOCK();
    rc = MPI_Iallgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE,
                        comm, &req);
    UNLOCK();
    if (rc != MPI_SUCCESS)
        return mpi_failed(rc, "all-gather");
    return wait_for(&req, "all-gather", -1);
}

static const sn_transport_ops mpi_ops = {
    .name = "mpi",
    .isend = mpi_isend,
    .irecv = mpi_irecv,
    .wait = mpi_wait,
    .bcast = mpi_bcast,
    .allgather = mpi_allgather,
};

static sn_transport mpi_transport = {.ops = &mpi_ops};

#endif /* SN_HAVE_MPI */

/* --- the job -------------------------------------------------------------- */

shardnet_status sn_world_init(void)
{
#ifdef SN_HAVE_MPI
    pthread_once(&once, init_once);
#else
    (void)once;
#endif
    if (init_status != SHARDNET_OK)
        return sn_error(init_status, "%s", init_message);
    return SHARDNET_OK;
}

#ifdef SN_HAVE_MPI
/* A launcher's count: a plain decimal number below 1 << 20, else -1. */
static long launcher_count(const char *name)
{
    const char *v = getenv(name);
    char *end;
    long n;
    if (!v || !*v)
        return -1;
    n = strtol(v, &end, 10);
    return *end || n < 0 || n >= 1L << 20 ? -1 : n;
}
#endif

void sn_world_node_share(unsigned *rank, unsigned *size)
{
    *rank = 0;
    *size = 1;
#ifdef SN_HAVE_MPI
    static const char *const names[][2] = {
        {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
        {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    };
    if (!sn_config_env()->mpi)
        return;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        long r = launcher_count(names[i][0]), n = launcher_count(names[i][1]);
        if (r >= 0 && n > r) {
            *rank = (unsigned)r;
            *size = (unsigned)n;
            return;
        }
    }
#endif
}

unsigned sn_world_process(void)
{
    return me;
}

unsigned sn_world_processes(void)
{
    return nprocs;
}

sn_transport *sn_world_transport(void)
{
#ifdef SN_HAVE_MPI
    if (nprocs > 1) {
        mpi_transport.process = me;
        mpi_transport.processes = nprocs;
        return &mpi_transport;
    }
#endif
    return sn_transport_local();
}

shardnet_status sn_world_bcast(unsigned root, void *buf, size_t bytes)
{
    return sn_transport_bcast(sn_world_transport(), root, buf, bytes);
}

shardnet_status sn_world_allgather(const void *mine, size_t bytes, void *all)
{
    return sn_transport_allgather(sn_world_transport(), mine, bytes, all);
}

shardnet_status sn_world_link(double *latency, double *bandwidth)
{
    *latency = 0;
    *bandwidth = 1e30;
    if (nprocs == 1)
        return SHARDNET_OK;
#ifdef SN_HAVE_MPI
    static int measured;
    static double lat, bw;
    if (!measured) {
        enum { ROUNDS = 20, BIG_ROUNDS = 3, TAG = 32000 };
        const size_t big = 4u << 20;
        sn_transport *t = sn_world_transport();
        char *buf = malloc(big);
        shardnet_status st = SHARDNET_OK;
        if (!buf)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "measuring the link");
        memset(buf, 0, big);
        lat = 0;
        bw = 1e30;
        for (unsigned q = 1; q < nprocs && st == SHARDNET_OK; q++) {
            double best_small = 1e30, best_big = 1e30;
            if (me != 0 && me != q)
                continue;
            unsigned peer = me == 0 ? q : 0;
            for (int r = 0; r < ROUNDS + BIG_ROUNDS && st == SHARDNET_OK;
                 r++) {
                size_t bytes = r < ROUNDS ? 8 : big;
                double t0 = sn_trace_now();
                if (me == 0) {
                    if ((st = sn_transport_send(t, peer, TAG, buf, bytes)) ==
                        SHARDNET_OK)
                        st = sn_transport_recv(t, peer, TAG, buf, bytes);
                } else {
                    if ((st = sn_transport_recv(t, peer, TAG, buf, bytes)) ==
                        SHARDNET_OK)
                        st = sn_transport_send(t, peer, TAG, buf, bytes);
                }
                double half = (sn_trace_now() - t0) / 2;
                if (r < ROUNDS && half < best_small)
                    best_small = half;
                if (r >= ROUNDS && half < best_big)
                    best_big = half;
            }
            double b = (double)big / (best_big > best_small
                                          ? best_big - best_small
                                          : best_big);
            if (best_small > lat)
                lat = best_small;
            if (b < bw)
                bw = b;
        }
        free(buf);
        /* Process 0 saw every pair: it tells the others. */
        double fig[2] = {lat, bw};
        if (st == SHARDNET_OK)
            st = sn_world_bcast(0, fig, sizeof fig);
        if (st != SHARDNET_OK)
            return sn_error_prefix(st, "measuring the link between processes");
        lat = fig[0];
        bw = fig[1];
        measured = 1;
        sn_log(SHARDNET_LOG_INFO,
               "link between processes: %.1f us, %.2f GB/s", lat * 1e6,
               bw * 1e-9);
    }
    *latency = lat;
    *bandwidth = bw;
#endif
    /* To plan as if the machines were further apart: the figures given. */
    const sn_config *config = sn_config_env();
    if (config->link_latency_s > 0)
        *latency = config->link_latency_s;
    if (config->link_bytes_per_s > 0)
        *bandwidth = config->link_bytes_per_s;
    return SHARDNET_OK;
}

shardnet_status sn_world_share_status(unsigned owner, shardnet_status mine,
                                      const char *what)
{
    int32_t code = (int32_t)mine;
    shardnet_status st;
    if (nprocs == 1)
        return mine;
    if ((st = sn_world_bcast(owner, &code, sizeof code)) != SHARDNET_OK)
        return st;
#ifdef SN_HAVE_MPI
    if (code != SHARDNET_OK)
        failure_shared = 1;
#endif
    if (me == owner || code == SHARDNET_OK)
        return (shardnet_status)code;
    return sn_error((shardnet_status)code, "%s failed on process %u", what,
                    owner);
}

void sn_world_failed(void)
{
#ifdef SN_HAVE_MPI
    if (nprocs > 1)
        job_failed = job_failed ? job_failed : 1;
#endif
}
