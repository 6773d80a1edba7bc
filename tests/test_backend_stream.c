/*
 * A device's stream beyond its kernels: the asynchronous copies and the
 * events of the backend interface (lib/backend/backend.h), on every device
 * found (under `make check` the simulated cpu:0 cpu:1 cl:0 cl:1, see
 * Makefile.am), and the wrappers' stand-ins on a backend of this test's
 * own that lacks them.
 */
#include <config.h>

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "core/error.h"
#include "ref.h"
#include "shardnet.h"
#include "context_suite.h"

SN_CONTEXT_SUITE(stream, 600);

#define OK(call, dev)                                                         \
    cr_assert_eq((call), SHARDNET_OK, "%s: %s", (dev)->info.name,             \
                 shardnet_last_error())

static sn_buffer *alloc_floats(sn_device *dev, size_t n)
{
    sn_buffer *b = NULL;
    OK(sn_buffer_alloc(dev, n * sizeof(float), &b), dev);
    return b;
}

/* Elements of the tensors below, an odd number, placed AT elements into
 * their buffers: enough for the kernels to be still running when the
 * host is done enqueueing (a wait that does not wait shows). */
#define N ((1u << 20) + 3)
#define AT 3

/*
 * y = sigmoid(x) + x on dev, from x to y through two device buffers, and
 * x read back from the device into x_back: with the asynchronous copies
 * and one event wait when async is set, else with the blocking calls and
 * a synchronize.  The input goes in two copies, so that their order on the
 * queue counts too.  The buffers are the caller's to free once it has
 * looked at y and x_back (a free waits for the queue).
 */
static void sigmoid_plus_x(sn_device *dev, int async, const float *x,
                           float *y, float *x_back, sn_buffer **bufs)
{
    sn_buffer *in = bufs[0] = alloc_floats(dev, N + AT);
    sn_buffer *out = bufs[1] = alloc_floats(dev, N + AT);
    size_t half = N / 2 * sizeof(float), at = AT * sizeof(float);
    sn_unary_desc u = {.op = SN_UNARY_SIGMOID, .n = N, .x = {in, AT},
                       .y = {out, AT}};
    sn_binary_desc b = {.op = SN_BINARY_ADD, .rank = 1, .shape = {N},
                        .stride_a = {1}, .stride_b = {1}, .a = {out, AT},
                        .b = {in, AT}, .c = {out, AT}};
    if (async) {
        sn_event *ev = NULL;
        OK(sn_buffer_write_async(in, at, x, half), dev);
        OK(sn_buffer_write_async(in, at + half, (const char *)x + half,
                                 N * sizeof(float) - half),
           dev);
        OK(sn_unary(dev, &u), dev);
        OK(sn_binary(dev, &b), dev);
        OK(sn_buffer_read_async(out, at, y, N * sizeof(float)), dev);
        OK(sn_buffer_read_async(in, at, x_back, N * sizeof(float)), dev);
        OK(sn_event_record(dev, &ev), dev);
        OK(sn_event_wait(ev), dev);
        sn_event_free(ev);
    } else {
        OK(sn_buffer_write(in, at, x, N * sizeof(float)), dev);
        OK(sn_unary(dev, &u), dev);
        OK(sn_binary(dev, &b), dev);
        OK(sn_synchronize(dev), dev);
        OK(sn_buffer_read(out, at, y, N * sizeof(float)), dev);
        OK(sn_buffer_read(in, at, x_back, N * sizeof(float)), dev);
    }
}

Test(stream, async_copies_give_the_bytes_of_the_blocking_ones)
{
    float *x = malloc(N * sizeof *x), *back = malloc(N * sizeof *back);
    float *want = malloc(N * sizeof *want), *got = malloc(N * sizeof *got);
    cr_assert(x && back && want && got);
    ref_fill_random(x, N, 7, -4.0f, 4.0f);
    FOR_EACH_DEVICE(dev) {
        sn_buffer *bufs[2];
        sigmoid_plus_x(dev, 0, x, want, back, bufs);
        cr_assert(!memcmp(back, x, N * sizeof *x), "%s: blocking copies",
                  dev->info.name);
        sn_buffer_free(bufs[0]);
        sn_buffer_free(bufs[1]);
        memset(got, 0xff, N * sizeof *got);
        memset(back, 0xff, N * sizeof *back);
        sigmoid_plus_x(dev, 1, x, got, back, bufs);
        cr_assert(!memcmp(back, x, N * sizeof *x),
                  "%s: the input read back asynchronously differs",
                  dev->info.name);
        cr_assert(!memcmp(got, want, N * sizeof *got),
                  "%s: the asynchronous path gave other bytes",
                  dev->info.name);
        sn_buffer_free(bufs[0]);
        sn_buffer_free(bufs[1]);
    }
    free(x);
    free(back);
    free(want);
    free(got);
}

/* Queries ev until it says done, for up to about ten seconds. */
static int done_without_waiting(sn_event *ev)
{
    const struct timespec ms = {0, 1000000};
    int done = 0;
    for (int i = 0; i < 10000 && !done; i++) {
        OK(sn_event_query(ev, &done), ev->dev);
        if (!done)
            nanosleep(&ms, NULL);
    }
    return done;
}

Test(stream, an_event_on_an_idle_device_completes_at_once)
{
    FOR_EACH_DEVICE(dev) {
        sn_event *ev = NULL;
        int done = 0;
        OK(sn_synchronize(dev), dev);
        OK(sn_event_record(dev, &ev), dev);
        cr_assert_eq(ev->dev, dev);
        /* The CPU queue knows at once; an OpenCL marker is done once the
         * driver has passed it, which it does with no one waiting. */
        if (dev->info.kind == SHARDNET_DEVICE_CPU) {
            OK(sn_event_query(ev, &done), dev);
            cr_assert(done, "%s: an idle queue's event is pending",
                      dev->info.name);
        }
        cr_assert(done_without_waiting(ev), "%s: the event never completed",
                  dev->info.name);
        OK(sn_event_wait(ev), dev);
        OK(sn_event_wait(ev), dev); /* again: still done */
        sn_event_free(ev);
    }
}

Test(stream, events_complete_in_the_order_recorded)
{
    float *x = malloc(N * sizeof *x);
    cr_assert(x);
    ref_fill_random(x, N, 3, -1.0f, 1.0f);
    FOR_EACH_DEVICE(dev) {
        sn_buffer *b = alloc_floats(dev, N);
        sn_unary_desc u = {.op = SN_UNARY_TANH, .n = N, .x = {b, 0},
                           .y = {b, 0}};
        sn_event *first = NULL, *second = NULL;
        int done = 0;
        OK(sn_buffer_write_async(b, 0, x, N * sizeof *x), dev);
        OK(sn_unary(dev, &u), dev);
        OK(sn_event_record(dev, &first), dev);
        for (int i = 0; i < 8; i++)
            OK(sn_unary(dev, &u), dev);
        OK(sn_event_record(dev, &second), dev);
        OK(sn_event_wait(second), dev);
        OK(sn_event_query(first, &done), dev);
        cr_assert(done, "%s: a later event completed before an earlier one",
                  dev->info.name);
        sn_event_free(second);
        sn_event_free(first);
        sn_buffer_free(b);
    }
    free(x);
}

/* st is SHARDNET_INVALID_ARGUMENT and the message names `what`. */
static void expect_refused(shardnet_status st, const char *what,
                           const sn_device *dev)
{
    cr_assert_eq(st, SHARDNET_INVALID_ARGUMENT, "%s: %s accepted",
                 dev->info.name, what);
    cr_assert(strstr(shardnet_last_error(), what), "%s: %s", dev->info.name,
              shardnet_last_error());
}

Test(stream, async_copies_check_their_bounds)
{
    float x[4] = {1, 2, 3, 4}, y[4];
    FOR_EACH_DEVICE(dev) {
        sn_buffer *b = alloc_floats(dev, 16); /* 64 bytes */
        sn_event *ev = NULL;
        expect_refused(sn_buffer_write_async(b, 60, x, 8),
                       "asynchronous buffer write", dev);
        cr_assert(strstr(shardnet_last_error(),
                         "bytes [60, 60+8) outside a buffer of 64"),
                  "%s", shardnet_last_error());
        expect_refused(sn_buffer_read_async(b, 57, y, 8),
                       "asynchronous buffer read", dev);
        expect_refused(sn_buffer_read_async(b, SIZE_MAX, y, 2),
                       "asynchronous buffer read", dev);
        expect_refused(sn_buffer_write_async(b, 0, NULL, 4),
                       "asynchronous buffer write", dev);
        expect_refused(sn_buffer_read_async(NULL, 0, y, 4),
                       "asynchronous buffer read", dev);
        expect_refused(sn_event_record(dev, NULL), "event", dev);
        expect_refused(sn_event_wait(NULL), "event wait", dev);
        /* At the very end, nothing to copy: fine. */
        OK(sn_buffer_write_async(b, 64, x, 0), dev);
        OK(sn_buffer_read_async(b, 64, y, 0), dev);
        /* The refused copies left nothing behind on the queue. */
        OK(sn_buffer_write_async(b, 48, x, sizeof x), dev);
        OK(sn_buffer_read_async(b, 48, y, sizeof y), dev);
        OK(sn_event_record(dev, &ev), dev);
        OK(sn_event_wait(ev), dev);
        cr_assert(!memcmp(x, y, sizeof x), "%s", dev->info.name);
        sn_event_free(ev);
        sn_buffer_free(b);
    }
}

/* --- a backend of this test's own ----------------------------------------
 *
 * Its buffers are host memory and its only kernel is unary NEG, run at
 * once; with SN_UNARY_ABS it "fails asynchronously": the call succeeds,
 * and the failure is for a later wait to report, as a real device's would
 * be.  fake_plain_ops lacks the asynchronous copies and the events (the
 * wrappers stand in); fake_events_ops has events of its own, each the
 * number of kernels launched before it.
 */

typedef struct fake_state {
    unsigned launched;  /* kernels so far */
    unsigned failed_at; /* the first failing kernel's number, 0: none */
    unsigned syncs;     /* synchronize calls */
} fake_state;

typedef struct fake_event {
    sn_event pub;
    unsigned seq;
} fake_event;

static shardnet_status fake_alloc(sn_device *dev, size_t bytes,
                                  sn_buffer **out)
{
    sn_buffer *b = calloc(1, sizeof *b);
    cr_assert(b && (b->handle = calloc(1, bytes ? bytes : 1)));
    b->dev = dev;
    b->size = bytes;
    *out = b;
    return SHARDNET_OK;
}

static void fake_free(sn_buffer *b)
{
    free(b->handle);
    free(b);
}

static shardnet_status fake_write(sn_buffer *b, size_t off, const void *src,
                                  size_t bytes)
{
    memcpy((char *)b->handle + off, src, bytes);
    return SHARDNET_OK;
}

static shardnet_status fake_read(sn_buffer *b, size_t off, void *dst,
                                 size_t bytes)
{
    memcpy(dst, (char *)b->handle + off, bytes);
    return SHARDNET_OK;
}

static shardnet_status fake_unary(sn_device *dev, const sn_unary_desc *d)
{
    fake_state *fs = dev->impl;
    float *x = (float *)d->x.buf->handle + d->x.offset;
    float *y = (float *)d->y.buf->handle + d->y.offset;
    fs->launched++;
    if (d->op == SN_UNARY_ABS) {
        if (!fs->failed_at)
            fs->failed_at = fs->launched;
        return SHARDNET_OK;
    }
    for (size_t i = 0; i < d->n; i++)
        y[i] = -x[i];
    return SHARDNET_OK;
}

/* The first failure since the last synchronize, as a real queue's. */
static shardnet_status fake_sync(sn_device *dev)
{
    fake_state *fs = dev->impl;
    unsigned failed = fs->failed_at;
    fs->syncs++;
    fs->failed_at = 0;
    return failed ? sn_error(SHARDNET_DEVICE_ERROR, "%s: kernel %u failed",
                             dev->info.name, failed)
                  : SHARDNET_OK;
}

static shardnet_status fake_record(sn_device *dev, sn_event **out)
{
    fake_event *ev = calloc(1, sizeof *ev);
    cr_assert(ev);
    ev->pub.dev = dev;
    ev->seq = ((fake_state *)dev->impl)->launched;
    *out = &ev->pub;
    return SHARDNET_OK;
}

static shardnet_status fake_event_wait(sn_event *pub)
{
    const fake_state *fs = pub->dev->impl;
    unsigned seq = ((fake_event *)pub)->seq;
    if (fs->failed_at && fs->failed_at <= seq)
        return sn_error(SHARDNET_DEVICE_ERROR,
                        "%s: kernel %u, before the event, failed",
                        pub->dev->info.name, fs->failed_at);
    return SHARDNET_OK;
}

static void fake_event_free(sn_event *ev)
{
    free(ev);
}

#define FAKE_BUFFERS                                                          \
    .abi = SN_BACKEND_ABI, .kind = "fake", .buffer_alloc = fake_alloc,        \
    .buffer_free = fake_free, .buffer_write = fake_write,                     \
    .buffer_read = fake_read, .unary = fake_unary, .synchronize = fake_sync

static const sn_backend_ops fake_plain_ops = {FAKE_BUFFERS};
static const sn_backend_ops fake_events_ops = {
    FAKE_BUFFERS, .event_record = fake_record, .event_wait = fake_event_wait,
    .event_free = fake_event_free};

/* in (4 floats) written asynchronously, y = -in (fail: a failing kernel
 * after it), read back asynchronously into out; returns the event. */
static sn_event *negate(sn_device *dev, sn_buffer *b, const float *in,
                        float *out, int fail)
{
    sn_unary_desc neg = {.op = SN_UNARY_NEG, .n = 4, .x = {b, 0}, .y = {b, 4}};
    sn_unary_desc bad = {.op = SN_UNARY_ABS, .n = 4, .x = {b, 0}, .y = {b, 0}};
    sn_event *ev = NULL;
    OK(sn_buffer_write_async(b, 0, in, 4 * sizeof *in), dev);
    OK(sn_unary(dev, &neg), dev);
    if (fail)
        OK(sn_unary(dev, &bad), dev);
    OK(sn_buffer_read_async(b, 4 * sizeof *out, out, 4 * sizeof *out), dev);
    OK(sn_event_record(dev, &ev), dev);
    return ev;
}

Test(stream, without_backend_support_the_wrappers_block_and_synchronize)
{
    fake_state fs = {0};
    sn_device dev = {.ops = &fake_plain_ops, .info = {.name = "fake:0"},
                     .impl = &fs};
    const float in[4] = {1, -2, 3, -4}, want[4] = {-1, 2, -3, 4};
    float out[4] = {0};
    int done = 0;
    sn_buffer *b = alloc_floats(&dev, 8);
    sn_event *ev = negate(&dev, b, in, out, 0);
    /* The copies were the blocking ones: done on return. */
    cr_assert(!memcmp(out, want, sizeof out));
    cr_assert_eq(fs.syncs, 0, "recording waited");
    OK(sn_event_query(ev, &done), &dev);
    cr_assert(done);
    cr_assert_eq(fs.syncs, 1, "the query did not wait");
    OK(sn_event_wait(ev), &dev);
    cr_assert_eq(fs.syncs, 2, "the wait was not a synchronize");
    sn_event_free(ev);

    /* A kernel that failed: the event's wait is the synchronize that
     * reports it. */
    ev = negate(&dev, b, in, out, 1);
    cr_assert_eq(sn_event_wait(ev), SHARDNET_DEVICE_ERROR);
    cr_assert(strstr(shardnet_last_error(), "fake:0: kernel 3 failed"), "%s",
              shardnet_last_error());
    sn_event_free(ev);
    sn_buffer_free(b);
}

Test(stream, a_failed_kernel_comes_back_from_the_wait_of_a_later_event)
{
    fake_state fs = {0};
    sn_device dev = {.ops = &fake_events_ops, .info = {.name = "fake:0"},
                     .impl = &fs};
    const float in[4] = {1, -2, 3, -4};
    float out[4];
    int done = 0;
    sn_buffer *b = alloc_floats(&dev, 8);
    sn_event *before = negate(&dev, b, in, out, 0);
    sn_event *after = negate(&dev, b, in, out, 1);
    OK(sn_event_wait(before), &dev);
    cr_assert_eq(sn_event_wait(after), SHARDNET_DEVICE_ERROR);
    cr_assert(strstr(shardnet_last_error(),
                     "fake:0: kernel 3, before the event, failed"),
              "%s", shardnet_last_error());
    /* No event_query in the table: the query waits, and says so. */
    cr_assert_eq(sn_event_query(after, &done), SHARDNET_DEVICE_ERROR);
    cr_assert(done);
    cr_assert_eq(fs.syncs, 0, "the backend's own events were not used");
    sn_event_free(before);
    sn_event_free(after);
    sn_buffer_free(b);
}

/*
 * A constant GEMM operand (b_const) on every device, given as a buffer of
 * the device's own and, where the device uses host memory in place
 * (sn_buffer_wrap), as the caller's memory: the product is the reference
 * product, the same bits either way, and the operand's bytes are as
 * written when another kernel (an add), and then a blocking read, use
 * them after the product, however the backend keeps it (the CPU backend's
 * packed copy replaces the buffer's memory and gives the bytes back).
 */
Test(stream, a_constant_gemm_operand_keeps_its_bytes_after_the_product)
{
    enum { M = 5, K = 70, NC = 40 };
    float a[M * K], b[K * NC], want[M * NC], got[M * NC], got2[M * NC];
    float sum[K * NC], back[K * NC];
    ref_fill_random(a, M * K, 11, -1.0f, 1.0f);
    ref_fill_random(b, K * NC, 12, -1.0f, 1.0f);
    FOR_EACH_DEVICE(dev) {
        for (int trans_b = 0; trans_b < 2; trans_b++) {
            sn_buffer *ba = alloc_floats(dev, M * K),
                      *bb = alloc_floats(dev, K * NC),
                      *bc = alloc_floats(dev, M * NC),
                      *bs = alloc_floats(dev, K * NC), *bw = NULL;
            sn_gemm_desc g = {.trans_b = trans_b, .m = M, .n = NC, .k = K,
                              .alpha = 1.0f, .a = {ba, 0}, .b = {bb, 0},
                              .c = {bc, 0}, .lda = K,
                              .ldb = trans_b ? K : NC, .ldc = NC,
                              .batch = 1, .b_const = 1};
            sn_binary_desc add = {.op = SN_BINARY_ADD, .rank = 1,
                                  .shape = {K * NC}, .stride_a = {1},
                                  .stride_b = {1}, .a = {bb, 0},
                                  .b = {bb, 0}, .c = {bs, 0}};
            ref_gemm(&g, a, b, want, NULL, NULL);
            OK(sn_buffer_write(ba, 0, a, sizeof a), dev);
            OK(sn_buffer_write(bb, 0, b, sizeof b), dev);
            OK(sn_gemm(dev, &g), dev);
            OK(sn_binary(dev, &add), dev);
            OK(sn_buffer_read(bc, 0, got, sizeof got), dev);
            OK(sn_buffer_read(bs, 0, sum, sizeof sum), dev);
            OK(sn_buffer_read(bb, 0, back, sizeof back), dev);
            cr_assert(!memcmp(back, b, sizeof b),
                      "%s trans_b %d: the operand's bytes changed",
                      dev->info.name, trans_b);
            for (size_t i = 0; i < K * NC; i++)
                cr_assert_eq(sum[i], b[i] + b[i], "%s trans_b %d: add [%zu]",
                             dev->info.name, trans_b, i);
            for (size_t i = 0; i < M * NC; i++)
                cr_assert_float_eq(got[i], want[i], 1e-4f,
                                   "%s trans_b %d: C[%zu]", dev->info.name,
                                   trans_b, i);
            /* Again from the caller's memory, where the device takes it. */
            shardnet_status st = sn_buffer_wrap(dev, b, sizeof b, 0, &bw);
            if (st == SHARDNET_OK) {
                g.b.buf = bw;
                OK(sn_gemm(dev, &g), dev);
                OK(sn_buffer_read(bc, 0, got2, sizeof got2), dev);
                cr_assert(!memcmp(got, got2, sizeof got),
                          "%s trans_b %d: a wrapped operand gave other bits",
                          dev->info.name, trans_b);
                sn_buffer_free(bw);
            } else {
                cr_assert_eq(st, SHARDNET_UNSUPPORTED, "%s: wrap: %s",
                             dev->info.name, shardnet_last_error());
            }
            sn_buffer_free(ba);
            sn_buffer_free(bb);
            sn_buffer_free(bc);
            sn_buffer_free(bs);
        }
    }
}
