/*
 * Every kernel of the backend interface, on every device found, against the
 * plain C reference (tests/ref.c).  Under `make check` the devices are the
 * simulated cpu:0 cpu:1 cl:0 cl:1 (see Makefile.am).
 */
#include <config.h>

#include <criterion/criterion.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "ref.h"
#include "shardnet.h"

static shardnet_context_t *ctx;

static void setup(void)
{
    cr_assert_eq(shardnet_context_create(&ctx), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_gt(shardnet_device_count(ctx), 0);
}

static void teardown(void)
{
    shardnet_context_free(ctx);
}

TestSuite(kernels, .init = setup, .fini = teardown, .timeout = 600);

#define FOR_EACH_DEVICE(dev)                                                  \
    for (size_t dev##_i = 0; dev##_i < shardnet_device_count(ctx);           \
         dev##_i++)                                                           \
        for (sn_device *dev = sn_context_device(ctx, dev##_i); dev; dev = NULL)

/* A device buffer holding `n` floats, filled from `x` (or left as is). */
static sn_buffer *make_buffer(sn_device *dev, const float *x, size_t n)
{
    sn_buffer *b = NULL;
    cr_assert_eq(sn_buffer_alloc(dev, n * sizeof(float), &b), SHARDNET_OK,
                 "%s: %s", dev->info.name, shardnet_last_error());
    if (x)
        cr_assert_eq(sn_buffer_write(b, 0, x, n * sizeof(float)), SHARDNET_OK,
                     "%s: %s", dev->info.name, shardnet_last_error());
    return b;
}

static void read_back(sn_buffer *b, float *x, size_t n)
{
    cr_assert_eq(sn_synchronize(b->dev), SHARDNET_OK, "%s: %s",
                 b->dev->info.name, shardnet_last_error());
    cr_assert_eq(sn_buffer_read(b, 0, x, n * sizeof(float)), SHARDNET_OK,
                 "%s: %s", b->dev->info.name, shardnet_last_error());
}

static float *random_floats(size_t n, unsigned seed, float lo, float hi)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    cr_assert_not_null(x);
    ref_fill_random(x, n, seed, lo, hi);
    return x;
}

static void expect_close(const sn_device *dev, const char *what,
                         const float *got, const float *want, size_t n,
                         float rtol, float atol)
{
    char msg[256];
    size_t bad = ref_compare(got, want, n, rtol, atol, msg, sizeof msg);
    cr_expect_eq(bad, 0, "%s on %s: %zu of %zu wrong; %s", what,
                 dev->info.name, bad, n, msg);
}

/*
 * One GEMM case: C (m x n, ldc) = alpha op(A) op(B) + beta C, with the
 * matrices placed at an offset inside larger buffers and leading dimensions
 * padded by `pad`, batched `batch` times (stride_b 0 when share_b).
 */
static void gemm_case(sn_device *dev, size_t m, size_t n, size_t k, int ta,
                      int tb, size_t batch, int share_b, size_t pad,
                      float alpha, float beta)
{
    sn_gemm_desc d = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k,
                      .alpha = alpha, .beta = beta, .batch = batch};
    size_t ar = ta ? k : m, ac = ta ? m : k;
    size_t br = tb ? n : k, bc = tb ? k : n;
    const size_t off = 3;
    d.lda = ac + pad;
    d.ldb = bc + pad;
    d.ldc = n + pad;
    d.stride_a = ar * d.lda;
    d.stride_b = share_b ? 0 : br * d.ldb;
    d.stride_c = m * d.ldc;
    size_t na = off + batch * d.stride_a;
    size_t nb = off + (share_b ? 1 : batch) * br * d.ldb;
    size_t nc = off + batch * d.stride_c;
    float *a = random_floats(na, 1, -1, 1);
    float *b = random_floats(nb, 2, -1, 1);
    float *c = random_floats(nc, 3, -1, 1);
    if (beta == 0.0f) /* C is overwritten: garbage in it must not leak */
        for (size_t i = 0; i < nc; i++)
            c[i] = NAN;
    float *want = malloc(nc * sizeof *want);
    float *got = malloc(nc * sizeof *got);
    cr_assert(want && got);
    memcpy(want, c, nc * sizeof *c);
    if (beta == 0.0f) /* the reference reads C; the padding stays NaN */
        for (size_t bi = 0; bi < batch; bi++)
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < n; j++)
                    want[off + bi * d.stride_c + i * d.ldc + j] = 0.0f;

    sn_buffer *ba = make_buffer(dev, a, na);
    sn_buffer *bb = make_buffer(dev, b, nb);
    sn_buffer *bc_ = make_buffer(dev, c, nc);
    d.a = (sn_view){ba, off};
    d.b = (sn_view){bb, off};
    d.c = (sn_view){bc_, off};
    cr_assert_eq(sn_gemm(dev, &d), SHARDNET_OK, "%s: %s", dev->info.name,
                 shardnet_last_error());
    read_back(bc_, got, nc);
    ref_gemm(&d, a + off, b + off, want + off);

    char what[128];
    snprintf(what, sizeof what, "gemm %zux%zux%zu ta=%d tb=%d batch=%zu%s",
             m, n, k, ta, tb, batch, share_b ? " (shared B)" : "");
    /* float sums of k products of values in [-1, 1] */
    expect_close(dev, what, got, want, nc, 1e-4f, 2e-6f * (float)k);
    sn_buffer_free(ba);
    sn_buffer_free(bb);
    sn_buffer_free(bc_);
    free(a);
    free(b);
    free(c);
    free(want);
    free(got);
}

Test(kernels, gemm_matches_reference_on_odd_shapes)
{
    static const size_t shapes[][3] = {
        {1, 1, 1}, {7, 13, 5}, {513, 257, 129}, {1, 257, 513}, {64, 1, 33}};
    FOR_EACH_DEVICE(dev)
    {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            gemm_case(dev, shapes[s][0], shapes[s][1], shapes[s][2], 0, 0, 1, 0,
                      0, 1.0f, 0.0f);
    }
}

Test(kernels, gemm_handles_transposes_offsets_and_padding)
{
    FOR_EACH_DEVICE(dev)
    {
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                gemm_case(dev, 7, 13, 5, ta, tb, 1, 0, 3, 0.5f, 0.25f);
                gemm_case(dev, 1, 300, 77, ta, tb, 1, 0, 2, 1.0f, 0.0f);
                gemm_case(dev, 1, 13, 5, ta, tb, 2, 1, 1, 0.5f, 0.25f);
                gemm_case(dev, 513, 257, 129, ta, tb, 1, 0, 1, 1.0f, 0.0f);
            }
    }
}

Test(kernels, gemm_batched_with_shared_and_separate_operands)
{
    FOR_EACH_DEVICE(dev)
    {
        gemm_case(dev, 7, 13, 5, 0, 0, 3, 0, 0, 1.0f, 0.0f);
        gemm_case(dev, 7, 13, 5, 1, 1, 4, 1, 2, 1.0f, 1.0f);
        gemm_case(dev, 33, 17, 65, 0, 1, 5, 1, 0, 2.0f, 0.0f);
    }
}

static void binary_case(sn_device *dev, sn_binary_op op, size_t ra,
                        const size_t *sa, size_t rb, const size_t *sb)
{
    sn_binary_desc d = {.op = op};
    size_t na = 1, nb = 1, nc = 1;
    cr_assert_eq(sn_binary_broadcast(&d, ra, sa, rb, sb), SHARDNET_OK, "%s",
                 shardnet_last_error());
    for (size_t i = 0; i < ra; i++)
        na *= sa[i];
    for (size_t i = 0; i < rb; i++)
        nb *= sb[i];
    for (size_t i = 0; i < d.rank; i++)
        nc *= d.shape[i];
    /* POW and DIV want positive, non-tiny operands. */
    float lo = (op == SN_BINARY_POW || op == SN_BINARY_DIV) ? 0.5f : -2.0f;
    float *a = random_floats(na, 11, lo, 2.0f);
    float *b = random_floats(nb, 12, lo, 2.0f);
    float *want = malloc(nc * sizeof *want), *got = malloc(nc * sizeof *got);
    cr_assert(want && got);
    sn_buffer *ba = make_buffer(dev, a, na), *bb = make_buffer(dev, b, nb);
    sn_buffer *bc = make_buffer(dev, NULL, nc);
    d.a = (sn_view){ba, 0};
    d.b = (sn_view){bb, 0};
    d.c = (sn_view){bc, 0};
    cr_assert_eq(sn_binary(dev, &d), SHARDNET_OK, "%s: %s", dev->info.name,
                 shardnet_last_error());
    read_back(bc, got, nc);
    ref_binary(&d, a, b, want);
    char what[64];
    snprintf(what, sizeof what, "%s (rank %zu vs %zu)", sn_binary_op_name(op),
             ra, rb);
    expect_close(dev, what, got, want, nc, 2e-6f, 1e-7f);
    sn_buffer_free(ba);
    sn_buffer_free(bb);
    sn_buffer_free(bc);
    free(a);
    free(b);
    free(want);
    free(got);
}

Test(kernels, binary_ops_broadcast_like_numpy)
{
    static const size_t s335[] = {3, 1, 5}, s41[] = {4, 1}, s23[] = {2, 3},
                        s5[] = {5}, s1[] = {1}, s2141[] = {2, 1, 4, 1},
                        s315[] = {3, 1, 5}, big[] = {300, 257}, brow[] = {257},
                        bcol[] = {300, 1};
    FOR_EACH_DEVICE(dev)
    {
        for (int op = 0; op < SN_BINARY_COUNT; op++) {
            binary_case(dev, op, 3, s335, 2, s41);
            binary_case(dev, op, 2, s23, 0, NULL);
            binary_case(dev, op, 1, s1, 1, s5);
            binary_case(dev, op, 4, s2141, 3, s315);
            binary_case(dev, op, 2, big, 2, big);
            binary_case(dev, op, 2, big, 1, brow);
            binary_case(dev, op, 2, bcol, 2, big);
        }
    }
}

Test(kernels, unary_ops_match_libm)
{
    const size_t n = 10007;
    float *x = random_floats(n, 21, -6.0f, 6.0f);
    float *xpos = random_floats(n, 22, 1e-3f, 50.0f);
    float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    cr_assert(want && got);
    x[0] = 0.0f;
    x[1] = -0.0f;
    FOR_EACH_DEVICE(dev)
    {
        for (int op = 0; op < SN_UNARY_COUNT; op++) {
            const float *in =
                (op == SN_UNARY_LOG || op == SN_UNARY_SQRT) ? xpos : x;
            sn_buffer *bx = make_buffer(dev, in, n);
            sn_buffer *by = make_buffer(dev, NULL, n);
            sn_unary_desc d = {.op = op, .n = n, .x = {bx, 0}, .y = {by, 0}};
            cr_assert_eq(sn_unary(dev, &d), SHARDNET_OK, "%s: %s",
                         dev->info.name, shardnet_last_error());
            read_back(by, got, n);
            ref_unary(&d, in, want);
            expect_close(dev, sn_unary_op_name(op), got, want, n, 1e-5f,
                         1e-6f);
            /* In place, at an offset. */
            d.x = (sn_view){bx, 5};
            d.y = (sn_view){bx, 5};
            d.n = n - 5;
            cr_assert_eq(sn_unary(dev, &d), SHARDNET_OK);
            read_back(bx, got, n);
            expect_close(dev, "in-place unary", got + 5, want + 5, n - 5,
                         1e-5f, 1e-6f);
            sn_buffer_free(bx);
            sn_buffer_free(by);
        }
    }
    free(x);
    free(xpos);
    free(want);
    free(got);
}

/* (outer, len, inner) shapes: odd axes, a long row, a single element. */
static const size_t axis_shapes[][3] = {{1, 1, 1},    {3, 5, 7},   {1, 1000, 1},
                                        {2, 3, 1},    {1, 3, 4},   {64, 10, 1},
                                        {5, 1, 9},    {7, 333, 3}, {2, 4097, 1}};

Test(kernels, softmax_over_any_axis)
{
    FOR_EACH_DEVICE(dev)
    {
        for (size_t s = 0; s < sizeof axis_shapes / sizeof axis_shapes[0]; s++)
            for (int lg = 0; lg < 2; lg++) {
                size_t n = axis_shapes[s][0] * axis_shapes[s][1] *
                           axis_shapes[s][2];
                float *x = random_floats(n, 31 + (unsigned)s, -8.0f, 8.0f);
                float *want = malloc(n * sizeof *want);
                float *got = malloc(n * sizeof *got);
                cr_assert(want && got);
                sn_buffer *bx = make_buffer(dev, x, n);
                sn_buffer *by = make_buffer(dev, NULL, n);
                sn_softmax_desc d = {.outer = axis_shapes[s][0],
                                     .len = axis_shapes[s][1],
                                     .inner = axis_shapes[s][2],
                                     .log_softmax = lg,
                                     .x = {bx, 0},
                                     .y = {by, 0}};
                cr_assert_eq(sn_softmax(dev, &d), SHARDNET_OK, "%s: %s",
                             dev->info.name, shardnet_last_error());
                read_back(by, got, n);
                ref_softmax(&d, x, want);
                char what[96];
                snprintf(what, sizeof what, "%s (%zu,%zu,%zu)",
                         lg ? "log-softmax" : "softmax", d.outer, d.len,
                         d.inner);
                expect_close(dev, what, got, want, n, 1e-5f, 1e-6f);
                sn_buffer_free(bx);
                sn_buffer_free(by);
                free(x);
                free(want);
                free(got);
            }
    }
}

Test(kernels, reductions_over_any_axis)
{
    FOR_EACH_DEVICE(dev)
    {
        for (size_t s = 0; s < sizeof axis_shapes / sizeof axis_shapes[0]; s++)
            for (int op = 0; op < SN_REDUCE_COUNT; op++) {
                size_t outer = axis_shapes[s][0], len = axis_shapes[s][1],
                       inner = axis_shapes[s][2];
                size_t n = outer * len * inner, no = outer * inner;
                float *x = random_floats(n, 41 + (unsigned)s, -1.0f, 1.0f);
                float *want = malloc(no * sizeof *want);
                float *got = malloc(no * sizeof *got);
                cr_assert(want && got);
                sn_buffer *bx = make_buffer(dev, x, n);
                sn_buffer *by = make_buffer(dev, NULL, no);
                sn_reduce_desc d = {.op = op, .outer = outer, .len = len,
                                    .inner = inner, .x = {bx, 0}, .y = {by, 0}};
                cr_assert_eq(sn_reduce(dev, &d), SHARDNET_OK, "%s: %s",
                             dev->info.name, shardnet_last_error());
                read_back(by, got, no);
                ref_reduce(&d, x, want);
                char what[96];
                snprintf(what, sizeof what, "reduce %s (%zu,%zu,%zu)",
                         sn_reduce_op_name(op), outer, len, inner);
                /* float sums in a different order than the reference */
                expect_close(dev, what, got, want, no, 1e-5f,
                             2e-7f * (float)len);
                sn_buffer_free(bx);
                sn_buffer_free(by);
                free(x);
                free(want);
                free(got);
            }
    }
}

Test(kernels, out_of_bounds_views_are_rejected_before_the_backend)
{
    FOR_EACH_DEVICE(dev)
    {
        sn_buffer *b = make_buffer(dev, NULL, 16);
        sn_gemm_desc g = {.m = 4, .n = 4, .k = 4, .alpha = 1, .lda = 4,
                          .ldb = 4, .ldc = 4, .batch = 1,
                          .a = {b, 0}, .b = {b, 0}, .c = {b, 1}};
        cr_assert_eq(sn_gemm(dev, &g), SHARDNET_INVALID_ARGUMENT);
        cr_assert(strstr(shardnet_last_error(), "buffer holds 16"), "%s",
                  shardnet_last_error());
        g.c.offset = 0;
        g.lda = 3;
        cr_assert_eq(sn_gemm(dev, &g), SHARDNET_INVALID_ARGUMENT);
        g.lda = 4;
        g.m = (size_t)1 << 40;
        cr_assert_eq(sn_gemm(dev, &g), SHARDNET_INVALID_ARGUMENT);

        sn_unary_desc u = {.op = SN_UNARY_RELU, .n = 17, .x = {b, 0},
                           .y = {b, 0}};
        cr_assert_eq(sn_unary(dev, &u), SHARDNET_INVALID_ARGUMENT);
        u.n = 16;
        u.x.offset = SIZE_MAX;
        cr_assert_eq(sn_unary(dev, &u), SHARDNET_INVALID_ARGUMENT);
        u.x.offset = 0;
        u.op = SN_UNARY_COUNT;
        cr_assert_eq(sn_unary(dev, &u), SHARDNET_INVALID_ARGUMENT);

        sn_reduce_desc r = {.op = SN_REDUCE_SUM, .outer = 4, .len = 0,
                            .inner = 1, .x = {b, 0}, .y = {b, 0}};
        cr_assert_eq(sn_reduce(dev, &r), SHARDNET_INVALID_ARGUMENT);
        r.len = 5;
        cr_assert_eq(sn_reduce(dev, &r), SHARDNET_INVALID_ARGUMENT);

        char bytes[8];
        cr_assert_eq(sn_buffer_read(b, 60, bytes, 8),
                     SHARDNET_INVALID_ARGUMENT);
        cr_assert_eq(sn_buffer_write(b, SIZE_MAX, bytes, 8),
                     SHARDNET_INVALID_ARGUMENT);
        sn_buffer_free(b);
    }
}

Test(kernels, buffers_from_another_device_are_rejected)
{
    if (shardnet_device_count(ctx) < 2)
        cr_skip_test("needs two devices");
    sn_device *d0 = sn_context_device(ctx, 0), *d1 = sn_context_device(ctx, 1);
    sn_buffer *b0 = make_buffer(d0, NULL, 4), *b1 = make_buffer(d1, NULL, 4);
    sn_unary_desc u = {.op = SN_UNARY_EXP, .n = 4, .x = {b0, 0}, .y = {b1, 0}};
    cr_assert_eq(sn_unary(d0, &u), SHARDNET_INVALID_ARGUMENT);
    cr_assert(strstr(shardnet_last_error(), "lives on"));
    sn_buffer_free(b0);
    sn_buffer_free(b1);
}

Test(kernels, mapped_buffers_see_device_writes)
{
    FOR_EACH_DEVICE(dev)
    {
        const float x[4] = {-1, 2, -3, 4};
        sn_buffer *b = make_buffer(dev, x, 4);
        sn_unary_desc u = {.op = SN_UNARY_RELU, .n = 4, .x = {b, 0},
                           .y = {b, 0}};
        void *p = NULL;
        cr_assert_eq(sn_unary(dev, &u), SHARDNET_OK);
        cr_assert_eq(sn_synchronize(dev), SHARDNET_OK);
        cr_assert_eq(sn_buffer_map(b, 0, sizeof x, SN_MAP_READ | SN_MAP_WRITE,
                                   &p),
                     SHARDNET_OK, "%s: %s", dev->info.name,
                     shardnet_last_error());
        float *f = p;
        cr_assert_float_eq(f[0], 0.0f, 0);
        cr_assert_float_eq(f[3], 4.0f, 0);
        f[0] = 9.0f;
        cr_assert_eq(sn_buffer_unmap(b, p), SHARDNET_OK);
        float back[4];
        cr_assert_eq(sn_buffer_read(b, 0, back, sizeof back), SHARDNET_OK);
        cr_assert_float_eq(back[0], 9.0f, 0);
        cr_assert_float_eq(back[1], 2.0f, 0);
        sn_buffer_free(b);
    }
}
