/* Host-staged collectives and the collective group's paths, checked bit for
 * bit against a host reference. */
#include <config.h>

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "comm/collective.h"
#include "comm/group.h"
#include "core/error.h"
#include "context_suite.h"

SN_CONTEXT_SUITE(collectives, 300);

/* The mixes of DESIGN.md's simulated machine. */
static const char *const groups[][4] = {
    {"cpu:0", "cl:0", NULL, NULL},
    {"cpu:0", "cpu:1", "cl:1", NULL},
    {"cpu:0", "cpu:1", "cl:0", "cl:1"},
    {"cpu:0", "cpu:1", NULL, NULL}, /* a build without OpenCL too */
};
#define NGROUPS (sizeof groups / sizeof groups[0])

static const size_t sizes[] = {1, 7, 1000, ((size_t)1 << 20) + 3};
#define NSIZES (sizeof sizes / sizeof sizes[0])

/* Staging modes: mapped where possible (default chunk), and every device
 * copied through staging with small chunks (many pipeline steps). */
static const sn_comm_opts modes[] = {
    {.chunk_bytes = 0, .no_map = 0},
    {.chunk_bytes = 64 * 1024, .no_map = 1},
};
#define NMODES (sizeof modes / sizeof modes[0])

static size_t group_size(size_t g)
{
    size_t n = 0;
    while (n < 4 && groups[g][n])
        n++;
    return n;
}

static sn_device *find_device(const char *name)
{
    sn_device *d;
    for (size_t i = 0; (d = sn_context_device(ctx, i)) != NULL; i++)
        if (!strcmp(d->info.name, name))
            return d;
    return NULL;
}

/* Is every device of group g here? */
static int group_here(size_t g)
{
    for (size_t r = 0; r < group_size(g); r++)
        if (!find_device(groups[g][r]))
            return 0;
    return 1;
}

/* The first group from g on whose devices are all here (NGROUPS: none);
 * the ones passed over are logged. */
static size_t next_group(size_t g)
{
    for (; g < NGROUPS && !group_here(g); g++)
        cr_log_info("group %zu (%s, %s%s%s) not tested: a device is absent",
                    g, groups[g][0], groups[g][1], groups[g][2] ? ", ..." : "",
                    "");
    return g;
}

/* The first group here; skips the test when there is none. */
static size_t first_group(void)
{
    size_t g = next_group(0);
    if (g == NGROUPS)
        cr_skip_test("no group of devices is here (needs cpu:0 and cpu:1, "
                     "or cpu:0 and cl:0)");
    return g;
}

/* Fills devs for group g (which is here). */
static size_t get_group(size_t g, sn_device **devs)
{
    size_t n = group_size(g);
    for (size_t r = 0; r < n; r++)
        devs[r] = find_device(groups[g][r]);
    return n;
}

/* Group `want` if it is here, else the largest group here of at most
 * `most` devices; skips the test when there is none. */
static size_t pick_group(size_t want, size_t most, sn_device **devs)
{
    size_t best = NGROUPS;
    if (group_here(want))
        return get_group(want, devs);
    for (size_t g = first_group(); g < NGROUPS; g = next_group(g + 1))
        if (group_here(g) && group_size(g) <= most &&
            (best == NGROUPS || group_size(g) > group_size(best)))
            best = g;
    if (best == NGROUPS)
        cr_skip_test("no group of at most %zu devices is here", most);
    cr_log_info("group %zu is absent; testing group %zu", want, best);
    return get_group(best, devs);
}

/* Values of mixed magnitude, so that the order of a sum shows in its bits. */
static void fill(float *x, size_t count, uint32_t seed)
{
    uint32_t s = seed * 2654435761u + 12345u;
    for (size_t i = 0; i < count; i++) {
        s = s * 1664525u + 1013904223u;
        float v = (float)(s >> 8) / (float)(1u << 24) - 0.5f;
        x[i] = v * (float)(1u << ((s >> 3) % 12));
    }
}

static float *floats(size_t count)
{
    float *p = malloc((count ? count : 1) * sizeof(float));
    cr_assert(p, "out of memory");
    return p;
}

/* A device buffer of pad + count + pad floats; the view starts after pad. */
#define PAD 5
static sn_view upload(sn_device *dev, const float *x, size_t count)
{
    sn_buffer *b = NULL;
    size_t total = count + 2 * PAD;
    float *init = floats(total);
    cr_assert_eq(sn_buffer_alloc(dev, total * sizeof(float), &b), SHARDNET_OK,
                 "%s", shardnet_last_error());
    for (size_t i = 0; i < total; i++)
        init[i] = -7.0f;
    if (x)
        memcpy(init + PAD, x, count * sizeof(float));
    cr_assert_eq(sn_buffer_write(b, 0, init, total * sizeof(float)),
                 SHARDNET_OK, "%s", shardnet_last_error());
    free(init);
    return (sn_view){.buf = b, .offset = PAD};
}

/* Reads the view back and checks the padding around it is untouched. */
static float *download(sn_view v, size_t count)
{
    size_t total = count + 2 * PAD;
    float *all = floats(total);
    float *x = floats(count);
    cr_assert_eq(sn_buffer_read(v.buf, 0, all, total * sizeof(float)),
                 SHARDNET_OK, "%s", shardnet_last_error());
    for (size_t i = 0; i < PAD; i++) {
        cr_assert_eq(all[i], -7.0f, "padding before the view was written");
        cr_assert_eq(all[PAD + count + i], -7.0f,
                     "padding after the view was written");
    }
    memcpy(x, all + PAD, count * sizeof(float));
    free(all);
    return x;
}

static void expect_same(const float *got, const float *want, size_t count,
                        const char *what, const char *dev, size_t n,
                        size_t size, size_t mode)
{
    for (size_t i = 0; i < count; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
            cr_assert_fail("%s on %zu devices, size %zu, mode %zu: %s element "
                           "%zu is %.9g, want %.9g",
                           what, n, size, mode, dev, i, got[i], want[i]);
}

static sn_comm *make_comm(sn_device **devs, size_t n, size_t mode)
{
    sn_comm *comm = NULL;
    cr_assert_eq(sn_comm_create(devs, n, &modes[mode], &comm), SHARDNET_OK,
                 "%s", shardnet_last_error());
    return comm;
}

/* Uneven counts with a zero: rank 1 contributes nothing. */
static void uneven(size_t n, size_t size, size_t *counts, size_t *off)
{
    off[0] = 0;
    for (size_t r = 0; r < n; r++) {
        counts[r] = r == 1 ? 0 : size + r * 3 + (r == 2 ? size / 2 : 0);
        off[r + 1] = off[r] + counts[r];
    }
}

Test(collectives, allreduce_equals_rank_order_host_sum_bit_for_bit)
{
    for (size_t g = first_group(); g < NGROUPS; g = next_group(g + 1))
        for (size_t s = 0; s < NSIZES; s++)
            for (size_t m = 0; m < NMODES; m++) {
                sn_device *devs[4];
                size_t n = get_group(g, devs), count = sizes[s];
                sn_view v[4];
                float *x[4], *want = floats(count);
                sn_comm *comm = make_comm(devs, n, m);
                for (size_t r = 0; r < n; r++) {
                    x[r] = floats(count);
                    fill(x[r], count, (uint32_t)(r + 1));
                    v[r] = upload(devs[r], x[r], count);
                }
                for (size_t i = 0; i < count; i++) {
                    float acc = x[0][i];
                    for (size_t r = 1; r < n; r++)
                        acc += x[r][i];
                    want[i] = acc;
                }
                cr_assert_eq(sn_allreduce(comm, v, count), SHARDNET_OK, "%s",
                             shardnet_last_error());
                for (size_t r = 0; r < n; r++) {
                    float *got = download(v[r], count);
                    expect_same(got, want, count, "all-reduce",
                                devs[r]->info.name, n, count, m);
                    free(got);
                    sn_buffer_free(v[r].buf);
                    free(x[r]);
                }
                free(want);
                sn_comm_free(comm);
            }
}

Test(collectives, allgather_concatenates_uneven_counts_in_rank_order)
{
    for (size_t g = first_group(); g < NGROUPS; g = next_group(g + 1))
        for (size_t s = 0; s < NSIZES; s++)
            for (size_t m = 0; m < NMODES; m++) {
                sn_device *devs[4];
                size_t n = get_group(g, devs), counts[4], off[5];
                sn_view send[4], recv[4];
                sn_comm *comm = make_comm(devs, n, m);
                uneven(n, sizes[s], counts, off);
                size_t total = off[n];
                float *want = floats(total);
                for (size_t r = 0; r < n; r++) {
                    fill(want + off[r], counts[r], (uint32_t)(r + 7));
                    send[r] = upload(devs[r], want + off[r], counts[r]);
                    recv[r] = upload(devs[r], NULL, total);
                }
                cr_assert_eq(sn_allgather(comm, send, counts, recv),
                             SHARDNET_OK, "%s", shardnet_last_error());
                for (size_t r = 0; r < n; r++) {
                    float *got = download(recv[r], total);
                    expect_same(got, want, total, "all-gather",
                                devs[r]->info.name, n, sizes[s], m);
                    free(got);
                    sn_buffer_free(send[r].buf);
                    sn_buffer_free(recv[r].buf);
                }
                free(want);
                sn_comm_free(comm);
            }
}

Test(collectives, allgather_in_place_keeps_each_ranks_own_part)
{
    sn_device *devs[4];
    size_t n = pick_group(2, 4, devs), counts[4], off[5];
    for (size_t m = 0; m < NMODES; m++) {
        sn_comm *comm = make_comm(devs, n, m);
        sn_view send[4], recv[4];
        uneven(n, 100000, counts, off);
        float *want = floats(off[n]);
        fill(want, off[n], 3);
        float *init = floats(off[n]);
        for (size_t r = 0; r < n; r++) {
            /* Only the rank's own part is there; the gather fills the rest. */
            memset(init, 0, off[n] * sizeof(float));
            memcpy(init + off[r], want + off[r], counts[r] * sizeof(float));
            recv[r] = upload(devs[r], init, off[n]);
            send[r] = (sn_view){recv[r].buf, recv[r].offset + off[r]};
        }
        free(init);
        cr_assert_eq(sn_allgather(comm, send, counts, recv), SHARDNET_OK,
                     "%s", shardnet_last_error());
        for (size_t r = 0; r < n; r++) {
            float *got = download(recv[r], off[n]);
            expect_same(got, want, off[n], "in-place all-gather",
                        devs[r]->info.name, n, 100000, m);
            free(got);
            sn_buffer_free(recv[r].buf);
        }
        free(want);
        sn_comm_free(comm);
    }
}

Test(collectives, reduce_scatter_gives_each_rank_its_slice_of_the_sum)
{
    for (size_t g = first_group(); g < NGROUPS; g = next_group(g + 1))
        for (size_t s = 0; s < NSIZES; s++)
            for (size_t m = 0; m < NMODES; m++) {
                sn_device *devs[4];
                size_t n = get_group(g, devs), counts[4], off[5];
                sn_view send[4], recv[4];
                float *x[4];
                sn_comm *comm = make_comm(devs, n, m);
                uneven(n, sizes[s], counts, off);
                size_t total = off[n];
                float *want = floats(total);
                for (size_t r = 0; r < n; r++) {
                    x[r] = floats(total);
                    fill(x[r], total, (uint32_t)(r + 11));
                    send[r] = upload(devs[r], x[r], total);
                    recv[r] = upload(devs[r], NULL, counts[r]);
                }
                for (size_t i = 0; i < total; i++) {
                    float acc = x[0][i];
                    for (size_t r = 1; r < n; r++)
                        acc += x[r][i];
                    want[i] = acc;
                }
                cr_assert_eq(sn_reduce_scatter(comm, send, counts, recv),
                             SHARDNET_OK, "%s", shardnet_last_error());
                for (size_t r = 0; r < n; r++) {
                    float *got = download(recv[r], counts[r]);
                    expect_same(got, want + off[r], counts[r],
                                "reduce-scatter", devs[r]->info.name, n,
                                sizes[s], m);
                    free(got);
                    float *sent = download(send[r], total);
                    expect_same(sent, x[r], total, "reduce-scatter input",
                                devs[r]->info.name, n, sizes[s], m);
                    free(sent);
                    sn_buffer_free(send[r].buf);
                    sn_buffer_free(recv[r].buf);
                    free(x[r]);
                }
                free(want);
                sn_comm_free(comm);
            }
}

Test(collectives, broadcast_copies_the_root_to_every_rank)
{
    for (size_t g = first_group(); g < NGROUPS; g = next_group(g + 1))
        for (size_t s = 0; s < NSIZES; s++)
            for (size_t m = 0; m < NMODES; m++) {
                sn_device *devs[4];
                size_t n = get_group(g, devs), count = sizes[s];
                size_t root = (g + s + m) % n;
                sn_view v[4];
                float *want = floats(count);
                sn_comm *comm = make_comm(devs, n, m);
                fill(want, count, 99);
                for (size_t r = 0; r < n; r++)
                    v[r] = upload(devs[r], r == root ? want : NULL, count);
                cr_assert_eq(sn_broadcast(comm, v, count, root), SHARDNET_OK,
                             "%s", shardnet_last_error());
                for (size_t r = 0; r < n; r++) {
                    float *got = download(v[r], count);
                    expect_same(got, want, count, "broadcast",
                                devs[r]->info.name, n, count, m);
                    free(got);
                    sn_buffer_free(v[r].buf);
                }
                free(want);
                sn_comm_free(comm);
            }
}

Test(collectives, sendrecv_copies_between_every_pair_of_ranks)
{
    sn_device *devs[4];
    size_t n = pick_group(2, 4, devs);
    for (size_t m = 0; m < NMODES; m++) {
        sn_comm *comm = make_comm(devs, n, m);
        for (size_t s = 0; s < NSIZES; s++)
            for (size_t a = 0; a < n; a++)
                for (size_t b = 0; b < n; b++) {
                    size_t count = sizes[s];
                    float *want = floats(count);
                    fill(want, count, (uint32_t)(a * 4 + b));
                    sn_view src = upload(devs[a], want, count);
                    sn_view dst = upload(devs[b], NULL, count);
                    cr_assert_eq(sn_sendrecv(comm, a, src, b, dst, count),
                                 SHARDNET_OK, "%s", shardnet_last_error());
                    float *got = download(dst, count);
                    expect_same(got, want, count, "send/recv",
                                devs[b]->info.name, n, count, m);
                    free(got);
                    free(want);
                    sn_buffer_free(src.buf);
                    sn_buffer_free(dst.buf);
                }
        sn_comm_free(comm);
    }
}

Test(collectives, one_rank_comm_leaves_data_as_is)
{
    sn_device *devs[4];
    pick_group(0, 2, devs);
    sn_comm *comm = make_comm(devs, 1, 1);
    float x[7];
    fill(x, 7, 5);
    sn_view v = upload(devs[0], x, 7);
    cr_assert_eq(sn_allreduce(comm, &v, 7), SHARDNET_OK, "%s",
                 shardnet_last_error());
    float *got = download(v, 7);
    expect_same(got, x, 7, "all-reduce", devs[0]->info.name, 1, 7, 1);
    free(got);
    sn_buffer_free(v.buf);
    sn_comm_free(comm);
}

static void expect_error(shardnet_status st, const char *needle)
{
    cr_assert_eq(st, SHARDNET_INVALID_ARGUMENT, "want an invalid argument");
    cr_assert(strstr(shardnet_last_error(), needle),
              "message '%s' lacks '%s'", shardnet_last_error(), needle);
}

Test(collectives, create_rejects_empty_oversized_and_repeated_groups)
{
    sn_device *devs[SN_COMM_MAX + 1];
    sn_comm *comm = NULL;
    pick_group(0, 2, devs);
    expect_error(sn_comm_create(devs, 0, NULL, &comm), "0 devices");
    cr_assert_null(comm);
    for (size_t r = 1; r <= SN_COMM_MAX; r++)
        devs[r] = devs[0];
    expect_error(sn_comm_create(devs, SN_COMM_MAX + 1, NULL, &comm),
                 "1 to 16");
    expect_error(sn_comm_create(devs, 2, NULL, &comm), "distinct devices");
}

Test(collectives, rejects_views_on_the_wrong_device_or_too_small)
{
    sn_device *devs[4];
    pick_group(0, 2, devs);
    sn_comm *comm = make_comm(devs, 2, 0);
    sn_view v[2] = {upload(devs[0], NULL, 10), upload(devs[1], NULL, 10)};
    sn_view swapped[2] = {v[1], v[0]};
    size_t counts[2] = {4, 6}, bad_counts[2] = {4, 12};
    sn_view small[2] = {upload(devs[0], NULL, 4), upload(devs[1], NULL, 6)};

    expect_error(sn_allreduce(comm, swapped, 10), "rank 0 is cpu:0");
    expect_error(sn_allreduce(comm, v, 16), "outside a buffer");
    expect_error(sn_broadcast(comm, v, 10, 2), "root 2");
    expect_error(sn_sendrecv(comm, 0, v[0], 3, v[1], 1), "ranks 0 -> 3");
    cr_assert_eq(sn_allgather(comm, small, counts, v), SHARDNET_OK, "%s",
                 shardnet_last_error());
    /* send[1] holds 6 (+ padding) floats, not 12. */
    expect_error(sn_allgather(comm, small, bad_counts, v), "outside a buffer");
    expect_error(sn_reduce_scatter(comm, small, counts, v),
                 "outside a buffer");
    for (size_t r = 0; r < 2; r++) {
        sn_buffer_free(v[r].buf);
        sn_buffer_free(small[r].buf);
    }
    sn_comm_free(comm);
}

Test(collectives, rejects_input_and_output_that_overlap_out_of_place)
{
    sn_device *devs[4];
    pick_group(0, 2, devs);
    sn_comm *comm = make_comm(devs, 2, 0);
    sn_view big[2] = {upload(devs[0], NULL, 20), upload(devs[1], NULL, 20)};
    sn_view send[2] = {big[0], big[1]};
    sn_view recv[2] = {{big[0].buf, big[0].offset + 1}, big[1]};
    size_t counts[2] = {4, 4};
    expect_error(sn_allgather(comm, send, counts, recv), "overlap");
    expect_error(sn_sendrecv(comm, 0, send[0], 0, recv[0], 8), "overlap");
    for (size_t r = 0; r < 2; r++)
        sn_buffer_free(big[r].buf);
    sn_comm_free(comm);
}

/* A device whose reads fail once armed: a stand-in for a lost GPU.  Its
 * buffers are host memory, behind the public part as a backend's are. */
static int fake_fail;

typedef struct fake_buffer {
    sn_buffer pub;
    void *host;
} fake_buffer;

static void *fake_host(sn_buffer *b)
{
    return ((fake_buffer *)b)->host;
}

static shardnet_status fake_alloc(sn_device *dev, size_t bytes,
                                  sn_buffer **out)
{
    fake_buffer *b = calloc(1, sizeof *b);
    cr_assert(b);
    b->pub.dev = dev;
    b->pub.size = bytes;
    b->host = calloc(1, bytes ? bytes : 1);
    *out = &b->pub;
    return SHARDNET_OK;
}

static void fake_free(sn_buffer *b)
{
    free(fake_host(b));
    free(b);
}

static shardnet_status fake_write(sn_buffer *b, size_t off, const void *src,
                                  size_t bytes)
{
    memcpy((char *)fake_host(b) + off, src, bytes);
    return SHARDNET_OK;
}

static shardnet_status fake_read(sn_buffer *b, size_t off, void *dst,
                                 size_t bytes)
{
    if (fake_fail && off > 0)
        return sn_error(SHARDNET_DEVICE_ERROR, "fake:0: the device is lost");
    memcpy(dst, (char *)fake_host(b) + off, bytes);
    return SHARDNET_OK;
}

static const sn_backend_ops fake_ops = {
    .abi = SN_BACKEND_ABI,
    .kind = "fake",
    .buffer_alloc = fake_alloc,
    .buffer_free = fake_free,
    .buffer_write = fake_write,
    .buffer_read = fake_read,
};

Test(collectives, device_failure_aborts_with_its_error_and_comm_recovers)
{
    sn_device *devs[4];
    sn_device fake = {.ops = &fake_ops};
    size_t count = 300000;
    size_t n = pick_group(1, 3, devs) + 1; /* and the fake device last */
    snprintf(fake.info.name, sizeof fake.info.name, "fake:0");
    devs[n - 1] = &fake;
    sn_comm_opts opts = {.chunk_bytes = 64 * 1024};
    sn_comm *comm = NULL;
    cr_assert_eq(sn_comm_create(devs, n, &opts, &comm), SHARDNET_OK, "%s",
                 shardnet_last_error());
    sn_view v[4];
    float *x = floats(count);
    fill(x, count, 1);
    for (size_t r = 0; r < n; r++)
        v[r] = upload(devs[r], x, count);

    fake_fail = 1;
    cr_assert_eq(sn_allreduce(comm, v, count), SHARDNET_DEVICE_ERROR);
    cr_assert(strstr(shardnet_last_error(), "the device is lost"),
              "message: %s", shardnet_last_error());
    cr_assert_eq(sn_broadcast(comm, v, count, n - 1), SHARDNET_DEVICE_ERROR);

    fake_fail = 0; /* the same comm works again */
    for (size_t r = 0; r < n; r++)
        cr_assert_eq(sn_buffer_write(v[r].buf, PAD * sizeof(float), x,
                                     count * sizeof(float)),
                     SHARDNET_OK);
    cr_assert_eq(sn_allreduce(comm, v, count), SHARDNET_OK, "%s",
                 shardnet_last_error());
    float *got = download(v[n - 1], count);
    for (size_t i = 0; i < count; i++) {
        float want = x[i];
        for (size_t r = 1; r < n; r++)
            want += x[i];
        cr_assert_eq(got[i], want, "element %zu", i);
    }
    free(got);
    for (size_t r = 0; r < n; r++)
        sn_buffer_free(v[r].buf);
    free(x);
    sn_comm_free(comm);
}

/* ---- the collective group: each device on a thread of its own ---------- */

#define GROUP_CALLS 240
#define SENTINEL -7.0f

/* Floats of call k, a different size each time (vector steps and their
 * remainders, a share of one block, sizes past the caches). */
static size_t call_count(size_t k)
{
    static const size_t counts[] = {1, 7, 16, 33, 64, 100, 1000, 4101,
                                    65539, 262147};
    return counts[k % (sizeof counts / sizeof counts[0])];
}
/* More floats than the largest call takes (uneven pieces on four devices,
 * at an offset). */
#define GROUP_MOST (4 * 262147)

/* Rank r's input to call k. */
static uint32_t call_seed(size_t k, size_t r)
{
    return (uint32_t)(k * 16 + r + 1);
}

/* One device's side of a run of collectives; `fail` holds the first thing
 * that went wrong (Criterion asserts only on the test's thread). */
typedef struct group_side {
    sn_group *g;
    sn_device *dev;
    size_t rank, n;
    int mixed;      /* all three kinds in turn, else all-reduces only */
    size_t calls;
    sn_buffer *buf; /* room for the largest call, views at moving offsets */
    float *x, *image, *got;
    char fail[256];
} group_side;

/* Call k's description: an all-reduce in place or (mixed) an in-place
 * reduce-scatter or all-gather of uneven counts, at a moving offset. */
static sn_group_call describe(const group_side *s, size_t k, size_t *off)
{
    size_t count = call_count(k), at = k % 5;
    int kind = s->mixed ? (int)(k % 3) : 0;
    sn_group_call c = {.kind = kind == 0   ? SN_GROUP_ALLREDUCE
                               : kind == 1 ? SN_GROUP_REDUCE_SCATTER
                                           : SN_GROUP_ALLGATHER,
                       .n = s->n};
    uneven(s->n, count, c.counts, off);
    if (kind == 0) {
        memset(c.counts, 0, sizeof c.counts);
        c.counts[0] = count;
        off[s->n] = count;
    }
    c.send = c.recv = (sn_view){s->buf, at};
    if (kind == 1)
        c.recv.offset += off[s->rank];
    if (kind == 2)
        c.send.offset += off[s->rank];
    return c;
}

/* The buffer's floats [0, at + total + 1) before call k (sentinels around
 * the call's floats; an all-gather's other pieces are stale values) ... */
static void input_image(const group_side *s, size_t k, size_t at,
                        const size_t *off, float *img)
{
    size_t total = off[s->n];
    for (size_t i = 0; i < at; i++)
        img[i] = SENTINEL;
    if (s->mixed && k % 3 == 2) {
        fill(img + at, total, 0xdead0000u + (uint32_t)k);
        fill(img + at + off[s->rank], off[s->rank + 1] - off[s->rank],
             call_seed(k, s->rank));
    } else
        fill(img + at, total, call_seed(k, s->rank));
    img[at + total] = SENTINEL;
}

/* ... and after it: the rank-order sum where the call puts it, every
 * rank's piece after an all-gather. */
static void output_image(group_side *s, size_t k, size_t at, const size_t *off)
{
    size_t total = off[s->n], lo = 0, hi = total;
    input_image(s, k, at, off, s->image);
    if (s->mixed && k % 3 == 2) {
        for (size_t q = 0; q < s->n; q++)
            fill(s->image + at + off[q], off[q + 1] - off[q],
                 call_seed(k, q));
        return;
    }
    if (s->mixed && k % 3 == 1) {
        lo = off[s->rank];
        hi = off[s->rank + 1];
    }
    for (size_t q = 0; q < s->n; q++) {
        fill(s->x, total, call_seed(k, q));
        for (size_t i = lo; i < hi; i++)
            s->image[at + i] = q ? s->image[at + i] + s->x[i] : s->x[i];
    }
}

/* The others stop at their next collective instead of waiting for this
 * device for ever. */
static void side_failed(group_side *s, size_t k, const char *what)
{
    snprintf(s->fail, sizeof s->fail, "%s, call %zu: %s: %s",
             s->dev->info.name, k, what, shardnet_last_error());
    sn_group_abort(s->g);
}

/* Call k on this rank: its input written, the collective, and the
 * whole region read back and compared. */
static void group_call(group_side *s, size_t k)
{
    size_t off[SN_COMM_MAX + 1], at = k % 5;
    sn_group_call c = describe(s, k, off);
    size_t len = at + off[s->n] + 1;
    input_image(s, k, at, off, s->got);
    if (sn_buffer_write(s->buf, 0, s->got, len * sizeof(float)) !=
        SHARDNET_OK) {
        side_failed(s, k, "write");
        return;
    }
    if (s->rank == s->n - 1 && k % 60 == 59) {
        /* late: the others go to sleep at the barrier, and must wake */
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    if (sn_group_collective(s->g, s->rank, &c) != SHARDNET_OK) {
        side_failed(s, k, "collective");
        return;
    }
    if (sn_buffer_read(s->buf, 0, s->got, len * sizeof(float)) !=
        SHARDNET_OK) {
        side_failed(s, k, "read");
        return;
    }
    output_image(s, k, at, off);
    for (size_t i = 0; i < len; i++)
        if (memcmp(&s->got[i], &s->image[i], sizeof(float))) {
            snprintf(s->fail, sizeof s->fail,
                     "%s, call %zu (kind %d, %zu floats at %zu): element "
                     "%zu is %.9g, want %.9g", s->dev->info.name, k,
                     (int)c.kind, off[s->n], at, i, s->got[i], s->image[i]);
            sn_group_abort(s->g);
            return;
        }
}

static void *group_side_main(void *arg)
{
    group_side *s = arg;
    sn_bind_thread(s->dev, 1);
    for (size_t k = 0; k < s->calls && !s->fail[0]; k++)
        group_call(s, k);
    sn_bind_thread(s->dev, 0);
    return NULL;
}

/* `calls` collectives back to back on g, each device on a thread; every
 * result checked bit for bit. */
static void run_sides(sn_group *g, sn_device **devs, size_t n, int mixed,
                      size_t calls, const char *what)
{
    group_side side[4];
    pthread_t th[4];
    sn_group_begin(g);
    for (size_t r = 0; r < n; r++) {
        side[r] = (group_side){.g = g, .dev = devs[r], .rank = r, .n = n,
                               .mixed = mixed, .calls = calls,
                               .x = floats(GROUP_MOST),
                               .image = floats(GROUP_MOST),
                               .got = floats(GROUP_MOST)};
        cr_assert_eq(sn_buffer_alloc(devs[r], GROUP_MOST * sizeof(float),
                                     &side[r].buf),
                     SHARDNET_OK, "%s", shardnet_last_error());
    }
    for (size_t r = 0; r < n; r++)
        cr_assert_eq(
            pthread_create(&th[r], NULL, group_side_main, &side[r]), 0);
    for (size_t r = 0; r < n; r++)
        pthread_join(th[r], NULL);
    for (size_t r = 0; r < n; r++) {
        cr_expect(!side[r].fail[0], "%s: %s", what, side[r].fail);
        sn_buffer_free(side[r].buf);
        free(side[r].x);
        free(side[r].image);
        free(side[r].got);
    }
}

/* On every group here, host-shared (where the devices allow) and staged. */
static void run_group_calls(int mixed)
{
    for (size_t gi = first_group(); gi < NGROUPS; gi = next_group(gi + 1))
        for (int staged = 0; staged < 2; staged++) {
            sn_device *devs[4];
            size_t n = get_group(gi, devs);
            sn_group *g = NULL;
            char what[64];
            cr_assert_eq(sn_group_create(devs, n, staged, &g), SHARDNET_OK,
                         "%s", shardnet_last_error());
            snprintf(what, sizeof what, "group %zu, %s", gi,
                     staged ? "staged" : "host-shared");
            run_sides(g, devs, n, mixed, GROUP_CALLS, what);
            sn_group_free(g);
        }
}

Test(collectives, group_allreduces_back_to_back_of_changing_sizes_are_exact)
{
    run_group_calls(0);
}

Test(collectives, group_mixed_collectives_back_to_back_are_exact)
{
    run_group_calls(1);
}

/* Rank 0 at an all-reduce that rank 1 never joins. */
typedef struct lone_wait {
    sn_group *g;
    sn_view v;
    shardnet_status st;
    char msg[1024]; /* its error */
} lone_wait;

static void *lone_main(void *arg)
{
    lone_wait *w = arg;
    sn_group_call c = {.kind = SN_GROUP_ALLREDUCE, .n = 2, .counts = {16},
                       .send = w->v, .recv = w->v};
    w->st = sn_group_collective(w->g, 0, &c);
    snprintf(w->msg, sizeof w->msg, "%s", shardnet_last_error());
    return NULL;
}

/* A device that fails stops the others, waiting or not, with its own
 * error (sn_group_fail), so that the run's error names the cause
 * whichever device reports it (a fake GPU's injected failures found a
 * tensor split reporting only "stopped"); a plain abort stops them too;
 * the next run forgets either. */
Test(collectives, group_abort_or_failure_stops_a_waiting_device)
{
    sn_device *devs[4];
    size_t n = pick_group(3, 2, devs);
    for (int staged = 0; staged < 2; staged++)
        for (int failed = 0; failed < 2; failed++) {
            const char *path = staged ? "staged" : "shared";
            sn_group *g = NULL;
            pthread_t th;
            /* long enough to fall asleep */
            struct timespec wait = {0, 5000000};
            cr_assert_eq(sn_group_create(devs, n, staged, &g), SHARDNET_OK,
                         "%s", shardnet_last_error());
            sn_group_begin(g);
            lone_wait w = {g, upload(devs[0], NULL, 16), SHARDNET_OK, ""};
            cr_assert_eq(pthread_create(&th, NULL, lone_main, &w), 0);
            nanosleep(&wait, NULL);
            if (failed) {
                sn_error(SHARDNET_OUT_OF_MEMORY, "the injected failure");
                sn_group_fail(g, 1, SHARDNET_OUT_OF_MEMORY);
            } else {
                sn_group_abort(g);
            }
            pthread_join(th, NULL);
            cr_expect_neq(w.st, SHARDNET_OK, "%s path: rank 0 not stopped",
                          path);
            if (failed) {
                char want[128];
                snprintf(want, sizeof want, "%s failed: the injected failure",
                         devs[1]->info.name);
                cr_expect_eq(w.st, SHARDNET_OUT_OF_MEMORY,
                             "%s path: status %d: %s", path, (int)w.st,
                             w.msg);
                cr_expect(strstr(w.msg, want),
                          "%s path: '%s' does not say '%s'", path, w.msg,
                          want);
                sn_error_clear();
            }
            sn_buffer_free(w.v.buf);
            run_sides(g, devs, n, 0, 20,
                      failed ? "after the failure" : "after the abort");
            sn_group_free(g);
        }
}
