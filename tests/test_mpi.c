/*
 * Collectives between the processes of an MPI job (tests/test_mpi.sh runs
 * this under mpirun -np 2 and -np 3, each process with its own simulated
 * devices).  Not a Criterion suite: Criterion runs tests in forked
 * children, which MPI does not allow.  Every process checks its own
 * results against a plain reference computed locally; process 0 prints the
 * summary "N passed, M failed, K skipped" after gathering everyone's
 * counts.
 *
 * Usage: test_mpi PROCESSES
 *        test_mpi --compare REFERENCE ANSWER TOLERANCE (see compare.h)
 */
#include <config.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "comm/collective.h"
#include "compare.h"
#include "comm/world.h"

static int passed, failed, skipped;
static unsigned me, np;

static void check(int ok, const char *fmt, const char *what, size_t n)
{
    if (ok) {
        passed++;
        return;
    }
    failed++;
    fprintf(stderr, "FAIL (process %u): ", me);
    fprintf(stderr, fmt, what, n);
    fputc('\n', stderr);
}

/* A value that differs by process, element and call. */
static float value(unsigned p, size_t i, unsigned salt)
{
    uint32_t h = (uint32_t)(i * 2654435761u) ^ (p * 40503u) ^ (salt * 97u);
    return (float)(h % 20011u) / 997.0f - 10.0f + 0.001f * (float)p;
}

static const size_t sizes[] = {1, 3, 1000, 65537, 262147, 1048579};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static void test_allreduce(sn_transport *t)
{
    for (size_t k = 0; k < NSIZES; k++) {
        size_t n = sizes[k];
        float *buf = malloc(n * sizeof *buf);
        int ok = 1;
        for (size_t i = 0; i < n; i++)
            buf[i] = value(me, i, 1);
        if (t->ops->allreduce(t, buf, n) != SHARDNET_OK) {
            check(0, "%s of %zu floats: %s", "all-reduce", n);
            fprintf(stderr, "  %s\n", shardnet_last_error());
            free(buf);
            continue;
        }
        for (size_t i = 0; i < n && ok; i++) {
            float s = value(0, i, 1);
            for (unsigned p = 1; p < np; p++)
                s += value(p, i, 1);
            ok = memcmp(&s, &buf[i], sizeof s) == 0;
        }
        check(ok, "%s of %zu floats: not the sum in process order",
              "all-reduce", n);
        free(buf);
    }
}

static void test_allgatherv(sn_transport *t)
{
    for (size_t k = 0; k < NSIZES; k++) {
        size_t n = sizes[k];
        size_t *counts = calloc(np, sizeof *counts);
        size_t *displs = calloc(np, sizeof *displs);
        float *buf = calloc(n + 1, sizeof *buf);
        int ok = 1;
        /* Uneven pieces; process 0 the smallest (maybe empty). */
        for (unsigned p = 0, at = 0; p < np; p++) {
            counts[p] = n / np + (p + 1 == np ? n % np : 0);
            displs[p] = at;
            at += (unsigned)counts[p];
        }
        for (size_t i = 0; i < counts[me]; i++)
            buf[displs[me] + i] = value(me, i, 2);
        if (t->ops->allgatherv(t, buf, counts, displs) != SHARDNET_OK)
            ok = 0;
        for (unsigned p = 0; p < np && ok; p++)
            for (size_t i = 0; i < counts[p] && ok; i++)
                ok = buf[displs[p] + i] == value(p, i, 2);
        check(ok, "%s of %zu floats in uneven pieces: wrong pieces",
              "all-gather", n);
        free(counts);
        free(displs);
        free(buf);
    }
}

static void test_broadcast_and_sendrecv(sn_transport *t)
{
    size_t n = 262147;
    float *buf = malloc(n * sizeof *buf);
    for (unsigned root = 0; root < np; root++) {
        int ok = 1;
        for (size_t i = 0; i < n; i++)
            buf[i] = value(me, i, 3);
        if (t->ops->broadcast(t, buf, n, root) != SHARDNET_OK)
            ok = 0;
        for (size_t i = 0; i < n && ok; i++)
            ok = buf[i] == value(root, i, 3);
        check(ok, "%s from process %zu: wrong data", "broadcast", root);
    }
    /* A ring: each process sends to the next, one pair at a time. */
    for (unsigned src = 0; src < np; src++) {
        unsigned dst = (src + 1) % np;
        int ok = 1;
        for (size_t i = 0; i < n; i++)
            buf[i] = value(me, i, 4);
        if (t->ops->sendrecv(t, buf, n, src, dst) != SHARDNET_OK)
            ok = 0;
        if (me == dst)
            for (size_t i = 0; i < n && ok; i++)
                ok = buf[i] == value(src, i, 4);
        check(ok, "%s from process %zu: wrong data", "send/recv", src);
    }
    free(buf);
}

/* The staged engine across processes: this process's cpu:0 and cpu:1 (or
 * its only device twice over as two buffers of one device is not allowed:
 * the test needs two local devices), the transport for the rest. */
static void test_engine(shardnet_context_t *ctx, sn_transport *t)
{
    sn_device *devs[2];
    size_t nd = 0;
    for (size_t i = 0; i < shardnet_device_count(ctx) && nd < 2; i++) {
        sn_device *d = sn_context_device(ctx, i);
        if (!d->remote && d->ops->buffer_alloc)
            devs[nd++] = d;
    }
    if (nd < 2) {
        skipped++;
        if (me == 0)
            printf("SKIP: the staged engine across processes (each process "
                   "has %zu device(s) with buffers, it needs 2)\n", nd);
        return;
    }
    sn_comm_opts o = {.transport = t};
    sn_comm *c = NULL;
    if (sn_comm_create(devs, 2, &o, &c) != SHARDNET_OK) {
        check(0, "%s: %s", "engine", 0);
        return;
    }
    for (size_t k = 0; k < NSIZES; k++) {
        size_t n = sizes[k];
        sn_buffer *b[2] = {NULL, NULL}, *r[2] = {NULL, NULL};
        sn_view v[2], rv[2];
        float *host = malloc(n * sizeof *host), *want = malloc(n * sizeof *want);
        size_t counts[2] = {n / 2, n - n / 2};
        int ok = 1;
        for (int d = 0; d < 2; d++) {
            sn_buffer_alloc(devs[d], n * sizeof(float), &b[d]);
            sn_buffer_alloc(devs[d], n * sizeof(float), &r[d]);
            for (size_t i = 0; i < n; i++)
                host[i] = value(me * 2 + (unsigned)d, i, 5);
            sn_buffer_write(b[d], 0, host, n * sizeof(float));
            v[d] = (sn_view){.buf = b[d], .offset = 0};
            rv[d] = (sn_view){.buf = r[d], .offset = 0};
        }
        /* Each process sums its two devices in order, then the processes
         * in order. */
        for (size_t i = 0; i < n; i++) {
            float s = 0;
            for (unsigned p = 0; p < np; p++) {
                float local = value(p * 2, i, 5) + value(p * 2 + 1, i, 5);
                s = p ? s + local : local;
            }
            want[i] = s;
        }
        if (sn_reduce_scatter(c, v, counts, rv) != SHARDNET_OK) {
            ok = 0;
            fprintf(stderr, "  %s\n", shardnet_last_error());
        }
        for (int d = 0; d < 2 && ok; d++) {
            sn_buffer_read(r[d], 0, host, counts[d] * sizeof(float));
            ok = memcmp(host, want + (d ? counts[0] : 0),
                        counts[d] * sizeof(float)) == 0;
        }
        check(ok, "%s of %zu floats across processes: wrong sums",
              "engine reduce-scatter", n);
        ok = 1;
        if (sn_allreduce(c, v, n) != SHARDNET_OK) {
            ok = 0;
            fprintf(stderr, "  %s\n", shardnet_last_error());
        }
        for (int d = 0; d < 2 && ok; d++) {
            sn_buffer_read(b[d], 0, host, n * sizeof(float));
            ok = memcmp(host, want, n * sizeof(float)) == 0;
        }
        check(ok, "%s of %zu floats across processes: wrong sums",
              "engine all-reduce", n);
        for (int d = 0; d < 2; d++) {
            sn_buffer_free(b[d]);
            sn_buffer_free(r[d]);
        }
        free(host);
        free(want);
    }
    /* Gathers across processes are refused, not answered wrongly. */
    {
        sn_buffer *b[2];
        sn_view v[2];
        size_t counts[2] = {4, 4};
        for (int d = 0; d < 2; d++) {
            sn_buffer_alloc(devs[d], 8 * sizeof(float), &b[d]);
            v[d] = (sn_view){.buf = b[d], .offset = 0};
        }
        check(sn_allgather(c, v, counts, v) == SHARDNET_UNSUPPORTED,
              "%s across processes: not refused (%zu)", "engine all-gather",
              0);
        for (int d = 0; d < 2; d++)
            sn_buffer_free(b[d]);
    }
    sn_comm_free(c);
}

/* Every process's devices, named P/KIND:N, in process order. */
static void test_devices(shardnet_context_t *ctx)
{
    size_t n = shardnet_device_count(ctx), local = 0;
    unsigned last = 0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        shardnet_device_info info;
        sn_device *d = sn_context_device(ctx, i);
        shardnet_device_get_info(ctx, i, &info);
        char want[32];
        snprintf(want, sizeof want, "%u/", d->process);
        ok &= strncmp(info.name, want, strlen(want)) == 0;
        ok &= d->process >= last;
        ok &= (d->process == me) == !d->remote;
        last = d->process;
        local += !d->remote;
    }
    check(ok && last == np - 1 && local > 0 && local < n,
          "%s: names, order or locality wrong (%zu devices)", "devices", n);
    /* Kernels on another process's device are refused clearly. */
    for (size_t i = 0; i < n; i++) {
        sn_device *d = sn_context_device(ctx, i);
        sn_buffer *b = NULL;
        if (!d->remote)
            continue;
        check(sn_buffer_alloc(d, 64, &b) == SHARDNET_UNSUPPORTED &&
                  strstr(shardnet_last_error(), "belongs to process"),
              "%s: a buffer on a remote device (%zu)", "devices", i);
        break;
    }
}

int main(int argc, char **argv)
{
    shardnet_context_t *ctx = NULL;
    if (argc == 5 && !strcmp(argv[1], "--compare"))
        return sn_test_compare(argv[2], argv[3], atof(argv[4]), stdout);
    unsigned want = argc > 1 ? (unsigned)atoi(argv[1]) : 2;
    if (shardnet_context_create(&ctx) != SHARDNET_OK) {
        fprintf(stderr, "FAIL: context: %s\n", shardnet_last_error());
        return 1;
    }
    me = sn_world_process();
    np = sn_world_processes();
    if (np != want) {
        fprintf(stderr, "FAIL: %u processes in the job, expected %u (run "
                        "under mpirun -np %u)\n",
                np, want, want);
        shardnet_context_free(ctx);
        return 1;
    }
    sn_transport *t = sn_world_transport();
    check(!strcmp(t->ops->name, "mpi") && t->processes == np,
          "%s: the transport is not MPI over the job (%zu)", "transport", 0);
    test_devices(ctx);
    test_allreduce(t);
    test_allgatherv(t);
    test_broadcast_and_sendrecv(t);
    test_engine(ctx, t);

    int mine[3] = {passed, failed, skipped}, *all = calloc(3 * np, sizeof *all);
    if (sn_world_allgather(mine, sizeof mine, all) != SHARDNET_OK) {
        fprintf(stderr, "FAIL: gathering the counts: %s\n",
                shardnet_last_error());
        return 1;
    }
    int p = 0, f = 0, k = 0;
    for (unsigned q = 0; q < np; q++) {
        p += all[3 * q];
        f += all[3 * q + 1];
        k += all[3 * q + 2];
    }
    if (me == 0)
        printf("%d passed, %d failed, %d skipped (%u processes)\n", p, f, k,
               np);
    free(all);
    shardnet_context_free(ctx);
    return f ? 1 : 0;
}
