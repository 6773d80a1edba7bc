/*
 * The job's transport (messages, broadcasts, all-gathers) and the
 * collective group across processes of an MPI job (tests/test_mpi.sh runs
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
#include "comm/group.h"
#include "comm/world.h"
#include "compare.h"

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

static void test_allgather(sn_transport *t)
{
    for (size_t k = 0; k < NSIZES; k++) {
        size_t n = sizes[k];
        float *mine = malloc(n * sizeof *mine);
        float *all = malloc(np * n * sizeof *all);
        int ok = 1;
        for (size_t i = 0; i < n; i++)
            mine[i] = value(me, i, 2);
        if (sn_transport_allgather(t, mine, n * sizeof *mine, all) !=
            SHARDNET_OK) {
            ok = 0;
            fprintf(stderr, "  %s\n", shardnet_last_error());
        }
        for (unsigned p = 0; p < np && ok; p++)
            for (size_t i = 0; i < n && ok; i++)
                ok = all[p * n + i] == value(p, i, 2);
        check(ok, "%s of %zu floats a process: wrong pieces", "all-gather",
              n);
        free(mine);
        free(all);
    }
}

static void test_broadcast(sn_transport *t)
{
    size_t n = 262147;
    float *buf = malloc(n * sizeof *buf);
    for (unsigned root = 0; root < np; root++) {
        int ok = 1;
        for (size_t i = 0; i < n; i++)
            buf[i] = value(me, i, 3);
        if (sn_transport_bcast(t, root, buf, n * sizeof *buf) != SHARDNET_OK)
            ok = 0;
        for (size_t i = 0; i < n && ok; i++)
            ok = buf[i] == value(root, i, 3);
        check(ok, "%s from process %zu: wrong data", "broadcast", root);
    }
    free(buf);
}

static void test_messages(sn_transport *t)
{
    size_t n = 262147;
    float *buf = malloc(n * sizeof *buf);
    /* A ring of blocking messages: each process sends to the next, one
     * pair at a time. */
    for (unsigned src = 0; src < np; src++) {
        unsigned dst = (src + 1) % np;
        int ok = 1;
        for (size_t i = 0; i < n; i++)
            buf[i] = value(me, i, 4);
        if (me == src)
            ok = sn_transport_send(t, dst, 7, buf, n * sizeof *buf) ==
                 SHARDNET_OK;
        else if (me == dst)
            ok = sn_transport_recv(t, src, 7, buf, n * sizeof *buf) ==
                 SHARDNET_OK;
        if (me == dst)
            for (size_t i = 0; i < n && ok; i++)
                ok = buf[i] == value(src, i, 4);
        check(ok, "%s from process %zu: wrong data", "send/recv", src);
    }
    free(buf);

    /* Every process to every other at once, started and then waited for
     * (in the order started). */
    size_t m = 65537;
    float *out = malloc(m * sizeof *out), *in = malloc(np * m * sizeof *in);
    sn_transport_req **req = calloc(2 * np, sizeof *req);
    int ok = 1;
    for (size_t i = 0; i < m; i++)
        out[i] = value(me, i, 6);
    for (unsigned q = 0; q < np && ok; q++)
        if (q != me)
            ok = sn_transport_irecv(t, q, 8, in + q * m, m * sizeof *in,
                                    &req[2 * q]) == SHARDNET_OK &&
                 sn_transport_isend(t, q, 8, out, m * sizeof *out,
                                    &req[2 * q + 1]) == SHARDNET_OK;
    for (unsigned k = 0; k < 2 * np; k++)
        ok &= sn_transport_wait(t, req[k]) == SHARDNET_OK;
    for (unsigned q = 0; q < np && ok; q++)
        for (size_t i = 0; q != me && i < m && ok; i++)
            ok = in[q * m + i] == value(q, i, 6);
    check(ok, "%s of %zu floats between every pair: wrong data",
          "non-blocking messages", m);
    free(out);
    free(in);
    free(req);

    /* Messages to no process, or to this one, are refused, naming it. */
    float x = 0;
    check(sn_transport_send(t, np, 9, &x, sizeof x) ==
                  SHARDNET_INVALID_ARGUMENT &&
              strstr(shardnet_last_error(), "no process"),
          "%s to process %zu: not refused", "send", np);
    check(sn_transport_recv(t, me, 9, &x, sizeof x) ==
                  SHARDNET_INVALID_ARGUMENT &&
              strstr(shardnet_last_error(), "this process"),
          "%s from this process (%zu): not refused", "receive", me);
}

/* Process p's own sum over the ranks it holds, then the processes in
 * order: with one rank a process, v(0) + v(1) + ... */
static float sum_over(size_t i, unsigned salt)
{
    float s = value(0, i, salt);
    for (unsigned p = 1; p < np; p++)
        s += value(p, i, salt);
    return s;
}

/* The collective group across processes (across.c, over the transport):
 * one device a process, this one's the first with buffers, each process's
 * rank its index. */
static void test_group(shardnet_context_t *ctx)
{
    sn_device *devs[SN_COMM_MAX];
    size_t nd = 0;
    for (size_t i = 0; i < shardnet_device_count(ctx) && nd < np; i++) {
        sn_device *d = sn_context_device(ctx, i);
        if (d->process == nd && (d->remote || d->ops->buffer_alloc))
            devs[nd++] = d;
    }
    sn_group *g = NULL;
    if (nd != np || sn_group_create(devs, nd, 0, &g) != SHARDNET_OK) {
        check(0, "%s: no group of one device a process (%zu)", "group", nd);
        return;
    }
    sn_group_begin(g);
    for (size_t k = 0; k < NSIZES; k++) {
        size_t n = sizes[k], counts[SN_COMM_MAX] = {0}, off = 0;
        float *host = malloc(n * sizeof *host);
        sn_buffer *b = NULL, *r = NULL;
        sn_buffer_alloc(devs[me], n * sizeof(float), &b);
        sn_buffer_alloc(devs[me], n * sizeof(float), &r);
        /* Uneven shares; process 0's the smallest (maybe empty). */
        for (unsigned p = 0; p < np; p++)
            counts[p] = n / np + (p + 1 == np ? n % np : 0);
        for (unsigned p = 0; p < me; p++)
            off += counts[p];

        sn_group_call call = {.kind = SN_GROUP_REDUCE_SCATTER, .n = np,
                              .send = {.buf = b}, .recv = {.buf = r}};
        memcpy(call.counts, counts, sizeof counts);
        for (size_t i = 0; i < n; i++)
            host[i] = value(me, i, 5);
        sn_buffer_write(b, 0, host, n * sizeof(float));
        int ok = sn_group_collective(g, me, &call) == SHARDNET_OK;
        if (ok)
            sn_buffer_read(r, 0, host, counts[me] * sizeof(float));
        for (size_t i = 0; i < counts[me] && ok; i++)
            ok = memcmp(&host[i], &(float){sum_over(off + i, 5)},
                        sizeof(float)) == 0;
        check(ok, "%s of %zu floats across processes: not the sums in "
                  "process order",
              "group reduce-scatter", n);

        call.kind = SN_GROUP_ALLREDUCE;
        call.counts[0] = n;
        call.recv = call.send;
        for (size_t i = 0; i < n; i++)
            host[i] = value(me, i, 5);
        sn_buffer_write(b, 0, host, n * sizeof(float));
        ok = sn_group_collective(g, me, &call) == SHARDNET_OK;
        if (ok)
            sn_buffer_read(b, 0, host, n * sizeof(float));
        for (size_t i = 0; i < n && ok; i++)
            ok = memcmp(&host[i], &(float){sum_over(i, 5)},
                        sizeof(float)) == 0;
        check(ok, "%s of %zu floats across processes: not the sums in "
                  "process order",
              "group all-reduce", n);

        call.kind = SN_GROUP_ALLGATHER;
        memcpy(call.counts, counts, sizeof counts);
        call.recv = (sn_view){.buf = r};
        for (size_t i = 0; i < counts[me]; i++)
            host[i] = value(me, i, 6);
        sn_buffer_write(b, 0, host, counts[me] * sizeof(float));
        ok = sn_group_collective(g, me, &call) == SHARDNET_OK;
        if (ok)
            sn_buffer_read(r, 0, host, n * sizeof(float));
        for (unsigned p = 0, at = 0; p < np && ok; at += counts[p++])
            for (size_t i = 0; i < counts[p] && ok; i++)
                ok = host[at + i] == value(p, i, 6);
        check(ok, "%s of %zu floats across processes: wrong pieces",
              "group all-gather", n);
        if (!ok)
            fprintf(stderr, "  %s\n", shardnet_last_error());
        sn_buffer_free(b);
        sn_buffer_free(r);
        free(host);
    }
    sn_group_free(g);
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
    check(!strcmp(t->ops->name, "mpi") && t->processes == np &&
              t->process == me,
          "%s: the transport is not MPI over the job (%zu)", "transport", 0);
    test_devices(ctx);
    test_allgather(t);
    test_broadcast(t);
    test_messages(t);
    test_group(ctx);

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
