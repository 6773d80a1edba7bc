/*
 * The CUDA backend (backends/cuda/), what only a CUDA device has:
 * discovery, buffers and their copies on the stream, events, and GEMM
 * through cuBLAS with its epilogue kernel, against the plain C reference
 * (tests/ref.c).  The other kernels are tested with every device's by
 * tests/test_kernels.c (and, without a GPU, on an emulated device by
 * tests/test_kernels_cuda_emu).
 *
 * On a machine without an NVIDIA driver or without a GPU every test is
 * skipped, with the reason discovery logged ("cuda: no device (...)"),
 * which the first test checks is there.
 */
#include <config.h>

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "backend/backend.h"
#include "ref.h"
#include "shardnet.h"

static shardnet_context_t *ctx;
static sn_device *dev;
/* Discovery's log line about CUDA, if any. */
static char why[512];

static void catch_log(shardnet_log_level level, const char *msg, void *user)
{
    (void)level;
    (void)user;
    if (strncmp(msg, "cuda: ", 6) == 0 && !why[0])
        snprintf(why, sizeof why, "%s", msg);
}

static void setup(void)
{
    why[0] = '\0';
    shardnet_set_log(catch_log, SHARDNET_LOG_INFO, NULL);
    cr_assert_eq(shardnet_context_create(&ctx), SHARDNET_OK, "%s",
                 shardnet_last_error());
    shardnet_set_log(NULL, SHARDNET_LOG_WARN, NULL);
    dev = NULL;
    for (size_t i = 0; i < shardnet_device_count(ctx) && !dev; i++)
        if (sn_context_device(ctx, i)->info.kind == SHARDNET_DEVICE_CUDA)
            dev = sn_context_device(ctx, i);
}

static void teardown(void)
{
    shardnet_context_free(ctx);
}

TestSuite(cuda, .init = setup, .fini = teardown);

/* Skip, with discovery's reason, where there is no CUDA device. */
static void need_device(void)
{
    if (!dev)
        cr_skip_test("no CUDA device: %s",
                     why[0] ? why : "(discovery logged no reason)");
}

Test(cuda, discovery_without_a_device_says_why)
{
    if (dev) {
        cr_assert_str_eq(dev->info.name, "cuda:0");
        cr_assert(dev->info.compute_units > 0 && dev->info.global_mem > 0);
        cr_assert(strstr(dev->info.vendor, "compute capability"), "%s",
                  dev->info.vendor);
        return;
    }
    /* No device is not an error, and the log names the runtime's answer. */
    cr_assert(strstr(why, "cuda: no device ("), "log: '%s'", why);
    cr_skip_test("no CUDA device: %s", why);
}

/* Listing a GPU opens nothing: its stream and cuBLAS come with its first
 * use, so that a process that runs on other devices (a CPU session here)
 * gives it no context and never loads cuBLAS. */
static int opened_lines;

static void count_opened(shardnet_log_level level, const char *msg,
                         void *user)
{
    (void)level;
    (void)user;
    if (strstr(msg, ": opened (a stream, cuBLAS)"))
        opened_lines++;
}

Test(cuda, the_gpu_is_opened_at_its_first_use_only)
{
    need_device();
    const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
    float c[4];
    shardnet_context_t *other;
    sn_device *gpu = NULL;
    sn_buffer *x, *y;
    int listed, on_cpu, freed, used, again;
    opened_lines = 0;
    shardnet_set_log(count_opened, SHARDNET_LOG_INFO, NULL);
    /* A context's end waits for each of its devices: one never used has
     * nothing to wait for, and is not opened for it. */
    cr_assert_eq(shardnet_context_create(&other), SHARDNET_OK, "%s",
                 shardnet_last_error());
    shardnet_context_free(other);
    freed = opened_lines;
    cr_assert_eq(shardnet_context_create(&other), SHARDNET_OK, "%s",
                 shardnet_last_error());
    listed = opened_lines;
    cr_assert_eq(shardnet_matmul(other, 0, 2, 2, 2, a, b, c), SHARDNET_OK,
                 "%s", shardnet_last_error());
    on_cpu = opened_lines;
    for (size_t i = 0; i < shardnet_device_count(other) && !gpu; i++)
        if (sn_context_device(other, i)->info.kind == SHARDNET_DEVICE_CUDA)
            gpu = sn_context_device(other, i);
    cr_assert(gpu);
    cr_assert_eq(sn_buffer_alloc(gpu, 16, &x), SHARDNET_OK, "%s",
                 shardnet_last_error());
    used = opened_lines;
    cr_assert_eq(sn_buffer_alloc(gpu, 16, &y), SHARDNET_OK, "%s",
                 shardnet_last_error());
    again = opened_lines;
    shardnet_set_log(NULL, SHARDNET_LOG_WARN, NULL);
    sn_buffer_free(x);
    sn_buffer_free(y);
    shardnet_context_free(other);
    cr_assert_eq(freed, 0, "opened by the end of a context that did not "
                           "use it");
    cr_assert_eq(listed, 0, "opened as it was listed");
    cr_assert_eq(on_cpu, 0, "opened by a product on cpu:0");
    cr_assert_eq(used, 1, "not opened by its first buffer");
    cr_assert_eq(again, 1, "opened twice");
}

Test(cuda, buffer_round_trip)
{
    need_device();
    enum { N = 1000 };
    float in[N], out[N];
    sn_buffer *b;
    for (int i = 0; i < N; i++)
        in[i] = (float)i * 0.5f - 7.0f;
    cr_assert_eq(sn_buffer_alloc(dev, sizeof in, &b), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(sn_buffer_write(b, 0, in, sizeof in), SHARDNET_OK, "%s",
                 shardnet_last_error());
    /* A part, at an offset, read back over the whole. */
    cr_assert_eq(sn_buffer_write(b, 40 * sizeof(float), in, 10 * sizeof(float)),
                 SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(sn_buffer_read(b, 0, out, sizeof out), SHARDNET_OK, "%s",
                 shardnet_last_error());
    for (int i = 0; i < N; i++)
        cr_assert_eq(out[i], i >= 40 && i < 50 ? in[i - 40] : in[i],
                     "element %d", i);
    sn_buffer_free(b);
}

Test(cuda, async_round_trip_with_events)
{
    need_device();
    enum { N = 1 << 16 };
    float *in = malloc(N * sizeof *in), *out = calloc(N, sizeof *out);
    sn_buffer *b;
    sn_event *ev;
    int done = 0;
    cr_assert(in && out);
    for (int i = 0; i < N; i++)
        in[i] = (float)(i % 977);
    cr_assert_eq(sn_buffer_alloc(dev, N * sizeof *in, &b), SHARDNET_OK);
    cr_assert_eq(sn_buffer_write_async(b, 0, in, N * sizeof *in), SHARDNET_OK,
                 "%s", shardnet_last_error());
    cr_assert_eq(sn_buffer_read_async(b, 0, out, N * sizeof *out),
                 SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(sn_event_record(dev, &ev), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(sn_event_wait(ev), SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(sn_event_query(ev, &done), SHARDNET_OK);
    cr_assert(done);
    sn_event_free(ev);
    cr_assert_eq(memcmp(in, out, N * sizeof *in), 0);
    cr_assert_eq(sn_synchronize(dev), SHARDNET_OK);
    sn_buffer_free(b);
    free(in);
    free(out);
}

Test(cuda, errors_name_the_call)
{
    need_device();
    sn_buffer *b = NULL;
    /* More than any GPU has. */
    shardnet_status st = sn_buffer_alloc(dev, (size_t)1 << 58, &b);
    cr_assert_neq(st, SHARDNET_OK);
    const char *msg = shardnet_last_error();
    /* cudaHostAlloc where the buffers are mapped host memory */
    cr_assert(strstr(msg, "cuda:0") &&
                  (strstr(msg, "cudaMalloc") || strstr(msg, "cudaHostAlloc")) &&
                  strstr(msg, "cudaError"),
              "message: %s", msg);
    /* The device still works after it. */
    cr_assert_eq(sn_buffer_alloc(dev, 16, &b), SHARDNET_OK, "%s",
                 shardnet_last_error());
    sn_buffer_free(b);
}

Test(cuda, every_kernel_and_variant_is_supported)
{
    need_device();
    for (int k = 0; k < SN_KERNEL_COUNT; k++)
        cr_assert(sn_device_supports(dev, (sn_kernel)k, SN_VARIANT_ANY),
                  "%s", sn_kernel_name((sn_kernel)k));
}

/* The collectives' staging for a GPU is pinned host memory (so that its
 * copies run at the link's speed and asynchronously). */
Test(cuda, staging_memory_is_pinned)
{
    need_device();
    struct cudaPointerAttributes attr;
    float *p = sn_staging_alloc(dev, 1 << 20);
    cr_assert_not_null(p);
    cr_assert_eq(cudaPointerGetAttributes(&attr, p), cudaSuccess);
    cr_assert_eq(attr.type, cudaMemoryTypeHost, "memory type %d",
                 (int)attr.type);
    p[0] = p[(1 << 18) - 1] = 1.0f; /* all of it the caller's */
    sn_staging_free(p);
}

/* So is the host memory the API gives for a run's inputs on a list with a
 * GPU; for the CPU alone it is plain memory. */
Test(cuda, host_memory_of_the_api_is_pinned_for_a_gpu_only)
{
    need_device();
    struct cudaPointerAttributes attr;
    char list[64];
    snprintf(list, sizeof list, "cpu:0,%s", dev->info.name);
    float *p = shardnet_host_alloc(ctx, list, 1 << 20);
    cr_assert_not_null(p, "%s", shardnet_last_error());
    cr_assert_eq(cudaPointerGetAttributes(&attr, p), cudaSuccess);
    cr_assert_eq(attr.type, cudaMemoryTypeHost, "memory type %d",
                 (int)attr.type);
    p[0] = p[(1 << 18) - 1] = 1.0f;
    shardnet_host_free(p);
    p = shardnet_host_alloc(ctx, "cpu:0", 1 << 20);
    cr_assert_not_null(p, "%s", shardnet_last_error());
    cr_assert_eq(cudaPointerGetAttributes(&attr, p), cudaSuccess);
    cr_assert_eq(attr.type, cudaMemoryTypeUnregistered, "memory type %d",
                 (int)attr.type);
    shardnet_host_free(p);
}

/* A GPU that shares the host's memory (integrated, or any GPU with
 * SHARDNET_CUDA_MAPPED=1) keeps its buffers in mapped host memory: a
 * mapping is the buffer itself, no copy, seen by the next read and by
 * another mapping at once; a kernel's result is there once mapped. */
Test(cuda, mapped_buffers_are_the_buffer_itself)
{
    need_device();
    if (!dev->info.host_unified)
        cr_skip_test("%s is a discrete GPU (SHARDNET_CUDA_MAPPED=1 puts its "
                     "buffers in mapped host memory, to test this)",
                     dev->info.name);
    enum { N = 1000 };
    float in[N], out[N], *p, *q;
    struct cudaPointerAttributes attr;
    sn_buffer *b;
    for (int i = 0; i < N; i++)
        in[i] = (float)i - 300.0f;
    cr_assert_eq(sn_buffer_alloc(dev, sizeof in, &b), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(sn_buffer_write(b, 0, in, sizeof in), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(sn_buffer_map(b, 0, sizeof in, SN_MAP_READ | SN_MAP_WRITE,
                               (void **)&p),
                 SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(cudaPointerGetAttributes(&attr, p), cudaSuccess);
    cr_assert_eq(attr.type, cudaMemoryTypeHost, "memory type %d",
                 (int)attr.type);
    cr_assert_eq(memcmp(p, in, sizeof in), 0);
    p[7] = 42.0f;
    cr_assert_eq(sn_buffer_map(b, 5 * sizeof(float), 10 * sizeof(float),
                               SN_MAP_READ, (void **)&q),
                 SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(q, p + 5, "a second mapping is another copy");
    cr_assert_eq(q[2], 42.0f);
    cr_assert_eq(sn_buffer_unmap(b, q), SHARDNET_OK);
    cr_assert_eq(sn_buffer_unmap(b, p), SHARDNET_OK);
    /* A kernel (ReLU in place) writes it; mapping shows its result. */
    sn_unary_desc relu = {.op = SN_UNARY_RELU,
                          .x = {b, 0},
                          .y = {b, 0},
                          .n = N};
    cr_assert_eq(sn_unary(dev, &relu), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(sn_buffer_map(b, 0, sizeof in, SN_MAP_READ, (void **)&p),
                 SHARDNET_OK, "%s", shardnet_last_error());
    for (int i = 0; i < N; i++)
        cr_assert_eq(p[i], i == 7 ? 42.0f : fmaxf(in[i], 0.0f),
                     "element %d", i);
    cr_assert_eq(sn_buffer_unmap(b, p), SHARDNET_OK);
    cr_assert_eq(sn_buffer_read(b, 0, out, sizeof out), SHARDNET_OK);
    cr_assert_eq(memcmp(out, p, sizeof out), 0);
    sn_buffer_free(b);
}

/* A partition (a green context of whole groups of multiprocessors) is a
 * device of its own: the largest one of at most half the device that
 * the driver's grouping allows, with a kernel run on it; a range that
 * cuts a group is refused, naming the group size. */
Test(cuda, partitions_run_kernels_on_their_multiprocessors)
{
    need_device();
    unsigned units = dev->info.compute_units, got = 0;
    size_t idx[2], n = 0;
    char spec[64];
    shardnet_status st = SHARDNET_UNSUPPORTED;
    for (unsigned c = units / 2; c >= 1 && st != SHARDNET_OK; c--) {
        snprintf(spec, sizeof spec, "cuda:0[0-%u]", c - 1);
        st = shardnet_devices_select(ctx, spec, idx, 2, &n);
        if (st != SHARDNET_OK &&
            !strstr(shardnet_last_error(), "groups of"))
            break;
        got = c;
    }
    if (st == SHARDNET_UNSUPPORTED) {
        /* Only a driver older than green contexts' streams may refuse
         * (an H200's 13.0 driver once was refused, wrongly). */
        int driver = 0;
        cr_assert_eq(cudaDriverGetVersion(&driver), cudaSuccess);
        cr_assert_lt(driver, 12050, "driver %d: %s", driver,
                     shardnet_last_error());
        cr_skip_test("driver %d: %s", driver, shardnet_last_error());
    }
    cr_assert_eq(st, SHARDNET_OK, "%s: %s", spec, shardnet_last_error());
    sn_device *part = sn_context_device(ctx, idx[0]);
    cr_assert_eq(part->info.compute_units, got);
    float in[6] = {-2, -1, -0.0f, 0, 1, 2}, out[6];
    sn_buffer *b;
    cr_assert_eq(sn_buffer_alloc(part, sizeof in, &b), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(sn_buffer_write(b, 0, in, sizeof in), SHARDNET_OK);
    sn_unary_desc u = {.op = SN_UNARY_RELU, .n = 6, .x = {b, 0},
                       .y = {b, 0}};
    cr_assert_eq(sn_unary(part, &u), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(sn_buffer_read(b, 0, out, sizeof out), SHARDNET_OK, "%s",
                 shardnet_last_error());
    for (int i = 0; i < 6; i++)
        cr_assert_eq(out[i], in[i] < 0 ? 0.0f : in[i], "element %d", i);
    sn_buffer_free(b);
    /* One multiprocessor from the second: a group of its own, or a group
     * cut, refused as such. */
    st = shardnet_devices_select(ctx, "cuda:0[1-1]", idx, 2, &n);
    cr_assert(st == SHARDNET_OK || strstr(shardnet_last_error(), "groups of"),
              "%s", shardnet_last_error());
}

/* n floats in [-1, 1) from seed. */
static float *random_floats(size_t n, unsigned seed)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    cr_assert(p);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    return p;
}

/* A buffer of pad floats, then p's n floats. */
static sn_buffer *upload_at(const float *p, size_t n, size_t pad)
{
    sn_buffer *b;
    cr_assert_eq(sn_buffer_alloc(dev, (pad + n) * sizeof *p, &b),
                 SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(sn_buffer_write(b, pad * sizeof *p, p, n * sizeof *p),
                 SHARDNET_OK, "%s", shardnet_last_error());
    return b;
}

static sn_buffer *upload(const float *p, size_t n)
{
    return upload_at(p, n, 0);
}

/*
 * One GEMM on the device against ref_gemm: the matrices at an offset in
 * their buffers, leading dimensions padded by pad, batched (B shared with
 * stride 0 when share_b), with a bias (1: n floats, 2: m floats,
 * bias_rows; at an offset of pad floats in its buffer) and a residual when
 * asked.  The padding of C must come back untouched.
 */
static void gemm_case(size_t m, size_t n, size_t k, int ta, int tb,
                      size_t batch, int share_b, size_t pad, float alpha,
                      float beta, int bias_mode, int residual, sn_act act)
{
    sn_gemm_desc d = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k,
                      .alpha = alpha, .beta = beta, .batch = batch,
                      .bias_rows = bias_mode == 2, .act = act};
    const size_t off = 3;
    size_t sizes[3];
    ref_gemm_layout(&d, pad, share_b, off, sizes);
    size_t na = sizes[0], nb = sizes[1], nc = sizes[2];
    size_t nbias = bias_mode == 2 ? m : n;
    float *a = random_floats(na, 1), *b = random_floats(nb, 2);
    float *c = random_floats(nc, 3), *bias = random_floats(nbias, 4);
    float *res = random_floats(nc, 5);
    float *want = malloc(nc * sizeof *want), *got = malloc(nc * sizeof *got);
    cr_assert(want && got);
    memcpy(want, c, nc * sizeof *c);
    sn_buffer *ba = upload(a, na), *bb = upload(b, nb), *bcb = upload(c, nc);
    sn_buffer *bbias = bias_mode ? upload_at(bias, nbias, pad) : NULL;
    sn_buffer *bres = residual ? upload(res, nc) : NULL;
    d.a = (sn_view){ba, off};
    d.b = (sn_view){bb, off};
    d.c = (sn_view){bcb, off};
    d.bias = (sn_view){bbias, pad};
    d.res = (sn_view){bres, off};
    cr_assert_eq(sn_gemm(dev, &d), SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(sn_synchronize(dev), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(sn_buffer_read(bcb, 0, got, nc * sizeof *got), SHARDNET_OK);
    ref_gemm(&d, a + off, b + off, want + off, bias_mode ? bias : NULL,
             residual ? res + off : NULL);
    for (size_t i = 0; i < nc; i++)
        cr_assert(fabsf(got[i] - want[i]) <= 1e-4f + 2e-6f * (float)k,
                  "gemm %zux%zux%zu ta=%d tb=%d batch=%zu%s alpha=%g "
                  "beta=%g bias=%d residual=%d act=%d: element %zu is %g, "
                  "want %g",
                  m, n, k, ta, tb, batch, share_b ? " (shared B)" : "",
                  (double)alpha, (double)beta, bias_mode, residual, (int)act, i,
                  (double)got[i], (double)want[i]);
    sn_buffer_free(ba);
    sn_buffer_free(bb);
    sn_buffer_free(bcb);
    sn_buffer_free(bbias);
    sn_buffer_free(bres);
    free(a);
    free(b);
    free(c);
    free(bias);
    free(res);
    free(want);
    free(got);
}

Test(cuda, gemm_shapes_and_transposes)
{
    need_device();
    static const size_t shapes[][3] = {
        {1, 1, 1}, {3, 5, 7}, {16, 16, 16}, {33, 17, 65}, {1, 300, 64},
        {128, 96, 257}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                gemm_case(shapes[s][0], shapes[s][1], shapes[s][2], ta, tb, 1,
                          0, s % 3, 1.0f, 0.0f, 0, 0, SN_ACT_NONE);
}

Test(cuda, gemm_alpha_beta)
{
    need_device();
    gemm_case(9, 11, 13, 0, 0, 1, 0, 2, 0.5f, 1.0f, 0, 0, SN_ACT_NONE);
    gemm_case(9, 11, 13, 1, 0, 1, 0, 0, -2.0f, 0.25f, 0, 0, SN_ACT_NONE);
    gemm_case(9, 11, 13, 0, 1, 1, 0, 1, 1.0f, -1.0f, 0, 0, SN_ACT_NONE);
}

Test(cuda, gemm_batches)
{
    need_device();
    gemm_case(7, 5, 3, 0, 0, 4, 0, 1, 1.0f, 0.0f, 0, 0, SN_ACT_NONE);
    gemm_case(7, 5, 3, 1, 1, 3, 0, 0, 0.75f, 0.5f, 0, 0, SN_ACT_NONE);
    /* shared B */
    gemm_case(8, 6, 10, 0, 1, 5, 1, 2, 1.0f, 0.0f, 0, 0, SN_ACT_NONE);
}

Test(cuda, gemm_bias_and_residual)
{
    need_device();
    gemm_case(6, 10, 4, 0, 0, 1, 0, 1, 1.0f, 0.0f, 1, 0, SN_ACT_NONE);
    gemm_case(6, 10, 4, 0, 1, 2, 0, 0, 1.0f, 0.5f, 2, 0, SN_ACT_NONE);
    gemm_case(6, 10, 4, 1, 0, 3, 0, 2, 1.0f, 0.0f, 0, 1, SN_ACT_NONE);
    gemm_case(12, 3, 5, 0, 0, 2, 1, 1, 1.0f, 1.0f, 1, 1, SN_ACT_NONE);
}

/* The epilogue kernel after cuBLAS: ReLU and ReLU6 after the bias and
 * the residual, in that order. */
Test(cuda, gemm_relu_and_relu6_after_bias_and_residual)
{
    need_device();
    gemm_case(6, 10, 4, 0, 0, 1, 0, 1, 4.0f, 0.0f, 1, 0, SN_ACT_RELU);
    gemm_case(6, 10, 4, 1, 1, 2, 0, 0, 8.0f, 0.5f, 2, 1, SN_ACT_RELU6);
    gemm_case(12, 3, 5, 0, 1, 3, 1, 2, 9.0f, 1.0f, 1, 1, SN_ACT_RELU);
}

/* The fake CUDA runtime's count of the calls of a kind
 * (sn_fake_cuda_calls; tools/cuda-fake.sh), found with dlsym: NULL on a
 * real runtime, which keeps no count. */
typedef unsigned long (*calls_fn)(const char *call);
static calls_fn fake_calls(void)
{
    return (calls_fn)dlsym(RTLD_DEFAULT, "sn_fake_cuda_calls");
}

/* How many products the fake cuBLASLt has been given; (unsigned long)-1
 * on a real one. */
static unsigned long lt_products(void)
{
    calls_fn calls = fake_calls();
    return calls ? calls("cublasLtMatmul") : (unsigned long)-1;
}

/* A product with a bias alone (one product, beta 0, a bias per column of
 * C, no residual, no activation) goes through cuBLASLt's BIAS epilogue
 * (backends/cuda/lt.c), with its operands at offsets that leave them
 * aligned to 4 bytes only and its bias to 16, 32 or 256, and gives the
 * reference's answer; a bias aligned to 4 or 8 bytes, and every other
 * epilogue, go the cuBLAS way.  With SHARDNET_CUDA_LT=0 none goes through
 * cuBLASLt.  A real cuBLASLt keeps no count: there the answers are
 * checked and the paths are not. */
Test(cuda, a_bias_alone_goes_through_cublaslt)
{
    need_device();
    const char *off = getenv("SHARDNET_CUDA_LT");
    const int lt = !(off && strcmp(off, "0") == 0);
    static const struct {
        size_t m, n, k;
        int ta, tb;
        size_t batch, pad;
        float alpha, beta;
        int bias, res;
        sn_act act;
        int by_lt; /* whether cuBLASLt serves it */
    } cases[] = {
        {1, 10, 784, 0, 1, 1, 0, 1.0f, 0.0f, 1, 0, SN_ACT_NONE, 1},
        {8, 64, 32, 0, 0, 1, 4, 1.0f, 0.0f, 1, 0, SN_ACT_NONE, 1},
        {33, 17, 65, 1, 0, 1, 8, 0.5f, 0.0f, 1, 0, SN_ACT_NONE, 1},
        {5, 7, 3, 1, 1, 1, 12, -2.0f, 0.0f, 1, 0, SN_ACT_NONE, 1},
        /* the same shape again: its plan is kept */
        {8, 64, 32, 0, 0, 1, 4, 1.0f, 0.0f, 1, 0, SN_ACT_NONE, 1},
        /* a bias aligned to 4 or 8 bytes only */
        {8, 64, 32, 0, 0, 1, 1, 1.0f, 0.0f, 1, 0, SN_ACT_NONE, 0},
        {8, 64, 32, 0, 0, 1, 2, 1.0f, 0.0f, 1, 0, SN_ACT_NONE, 0},
        /* every other epilogue, the bias aligned to 16 bytes */
        {8, 64, 32, 0, 0, 1, 4, 1.0f, 0.0f, 1, 0, SN_ACT_RELU, 0},
        {8, 64, 32, 0, 0, 1, 4, 1.0f, 0.0f, 1, 1, SN_ACT_NONE, 0},
        {8, 64, 32, 0, 0, 1, 4, 1.0f, 0.0f, 2, 0, SN_ACT_NONE, 0},
        {8, 64, 32, 0, 0, 1, 4, 1.0f, 0.5f, 1, 0, SN_ACT_NONE, 0},
        {8, 64, 32, 0, 0, 2, 4, 1.0f, 0.0f, 1, 0, SN_ACT_NONE, 0},
        {8, 64, 32, 0, 0, 1, 4, 1.0f, 0.0f, 0, 0, SN_ACT_NONE, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned long before = lt_products();
        gemm_case(cases[i].m, cases[i].n, cases[i].k, cases[i].ta,
                  cases[i].tb, cases[i].batch, 0, cases[i].pad,
                  cases[i].alpha, cases[i].beta, cases[i].bias, cases[i].res,
                  cases[i].act);
        if (before == (unsigned long)-1)
            continue;
        cr_assert_eq(lt_products() - before,
                     (unsigned long)(lt && cases[i].by_lt),
                     "case %zu: %lu products by cuBLASLt, want %d", i,
                     lt_products() - before, lt && cases[i].by_lt);
    }
}

/* The fashion MLP's 8 first rows through a session: its 80 logits in
 * out; the run's status. */
static shardnet_status mlp_run(shardnet_session_t *s, const float *x,
                               float *out)
{
    const int64_t dims[] = {8, 784};
    shardnet_tensor_info info;
    const void *y;
    shardnet_status st;
    cr_assert_eq(shardnet_session_set_input(s, 0, SHARDNET_DTYPE_FLOAT32, 2,
                                            dims, x),
                 SHARDNET_OK);
    if ((st = shardnet_session_run(s)) != SHARDNET_OK)
        return st;
    cr_assert_eq(shardnet_session_output(s, 0, &info, &y), SHARDNET_OK);
    memcpy(out, y, 80 * sizeof(float));
    return SHARDNET_OK;
}

/* A run that fails on a GPU (a kernel's launch, a copy, the wait for its
 * work) returns the error naming it, and leaves its session able to run
 * again with the same answer, bit for bit: alone, in a layer split with
 * the CPU and in a tensor split over two GPUs.  A real GPU cannot be made
 * to fail on cue: this needs the fake CUDA runtime's failures
 * (tools/cuda-fake.sh; found with dlsym). */
Test(cuda, a_failed_run_leaves_its_session_usable)
{
    need_device();
    calls_fn calls = fake_calls();
    void (*fail_at)(const char *, unsigned long) =
        (void (*)(const char *, unsigned long))dlsym(RTLD_DEFAULT,
                                                     "sn_fake_cuda_fail_at");
    if (!calls || !fail_at)
        cr_skip_test("needs the fake CUDA runtime's failures on cue "
                     "(tools/cuda-fake.sh)");
    static const char *const sets[][2] = {{"cuda:0", "none"},
                                          {"cuda:0,cpu:0", "layer"},
                                          {"cuda:0,cuda:1", "tensor"}};
    static const char *const kinds[] = {"launch", "cudaMemcpyAsync",
                                        "cudaEventSynchronize",
                                        "cudaStreamSynchronize"};
    const char *src = getenv("SHARDNET_SRCDIR");
    char path[4096];
    shardnet_tensor x;
    shardnet_model_t *m;
    snprintf(path, sizeof path, "%s/tests/fixtures/fashion_mlp_input.npy",
             src ? src : ".");
    cr_assert_eq(shardnet_tensor_load(path, &x), SHARDNET_OK, "%s",
                 shardnet_last_error());
    snprintf(path, sizeof path, "%s/tests/fixtures/fashion_mlp.onnx",
             src ? src : ".");
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK, "%s",
                 shardnet_last_error());
    int launched = 0;
    for (size_t c = 0; c < sizeof sets / sizeof sets[0]; c++) {
        size_t idx[4], n;
        if (shardnet_devices_select(ctx, sets[c][0], idx, 4, &n) !=
            SHARDNET_OK) {
            cr_log_warn("%s: not here (%s)", sets[c][0],
                        shardnet_last_error());
            continue;
        }
        shardnet_session_options o = {.split = sets[c][1]};
        shardnet_session_t *s;
        float want[80], got[80];
        cr_assert_eq(shardnet_session_create_with(ctx, m, sets[c][0], &o, &s),
                     SHARDNET_OK, "%s: %s", sets[c][0], shardnet_last_error());
        cr_assert_eq(mlp_run(s, x.data, want), SHARDNET_OK, "%s: %s",
                     sets[c][0], shardnet_last_error());
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            /* the second call of the kind in the next run fails */
            unsigned long before = calls(kinds[k]);
            fail_at(kinds[k], before + 2);
            shardnet_status st = mlp_run(s, x.data, got);
            fail_at(NULL, 0);
            if (calls(kinds[k]) >= before + 2) {
                launched += !strcmp(kinds[k], "launch");
                cr_expect_neq(st, SHARDNET_OK, "%s, %s %s: the run did not "
                              "fail", sets[c][0], sets[c][1], kinds[k]);
                cr_expect(strstr(shardnet_last_error(), "cuda:"),
                          "%s, %s %s: the error names no GPU: %s",
                          sets[c][0], sets[c][1], kinds[k],
                          shardnet_last_error());
                cr_log_info("%s, %s, a failed %s: %s", sets[c][0],
                            sets[c][1], kinds[k], shardnet_last_error());
            }
            cr_assert_eq(mlp_run(s, x.data, got), SHARDNET_OK,
                         "%s, %s: the run after a failed %s: %s", sets[c][0],
                         sets[c][1], kinds[k], shardnet_last_error());
            cr_expect(!memcmp(got, want, sizeof want),
                      "%s, %s: the run after a failed %s differs",
                      sets[c][0], sets[c][1], kinds[k]);
        }
        shardnet_session_free(s);
    }
    cr_expect_gt(launched, 0, "no launch was made to fail");
    shardnet_model_free(m);
    shardnet_tensor_free(&x);
}
