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

#include "backend/backend.h"
#include "ref.h"
#include "shardnet.h"
#include "context_suite.h"

SN_CONTEXT_SUITE(kernels, 600);

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
 * padded by `pad`, batched `batch` times (stride_b 0 when share_b); then
 * the epilogue: bias_mode 0 none, 1 n floats (per column), 2 m floats (per
 * row, bias_rows), a residual laid out as C (at another offset, in a
 * buffer of its own) where `residual` is set, and act.
 */
static void gemm_case_epilogue(sn_device *dev, size_t m, size_t n, size_t k,
                               int ta, int tb, size_t batch, int share_b,
                               size_t pad, float alpha, float beta,
                               int bias_mode, int residual, sn_act act)
{
    sn_gemm_desc d = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k,
                      .alpha = alpha, .beta = beta, .batch = batch,
                      .bias_rows = bias_mode == 2, .act = act};
    const size_t off = 3;
    size_t sizes[3];
    ref_gemm_layout(&d, pad, share_b, off, sizes);
    size_t na = sizes[0], nb = sizes[1], nc = sizes[2];
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
    /* The bias at an offset too, in a buffer of its own. */
    const size_t nbias = bias_mode == 2 ? m : n, bias_off = 5;
    float *bias = random_floats(bias_off + nbias, 4, -1, 1);
    sn_buffer *bbias = NULL;
    if (bias_mode) {
        bbias = make_buffer(dev, bias, bias_off + nbias);
        d.bias = (sn_view){bbias, bias_off};
    }
    const size_t res_off = 2;
    float *res = random_floats(res_off + nc - off, 5, -1, 1);
    sn_buffer *bres = NULL;
    if (residual) {
        bres = make_buffer(dev, res, res_off + nc - off);
        d.res = (sn_view){bres, res_off};
    }
    cr_assert_eq(sn_gemm(dev, &d), SHARDNET_OK, "%s: %s", dev->info.name,
                 shardnet_last_error());
    read_back(bc_, got, nc);
    ref_gemm(&d, a + off, b + off, want + off,
             bias_mode ? bias + bias_off : NULL,
             residual ? res + res_off : NULL);

    char what[160];
    snprintf(what, sizeof what,
             "gemm %zux%zux%zu ta=%d tb=%d batch=%zu%s bias=%s%s act=%s", m,
             n, k, ta, tb, batch, share_b ? " (shared B)" : "",
             bias_mode == 2 ? "rows" : bias_mode ? "columns" : "none",
             residual ? " residual" : "",
             act == SN_ACT_RELU6 ? "relu6" : act ? "relu" : "none");
    /* float sums of k products of values in [-1, 1] */
    expect_close(dev, what, got, want, nc, 1e-4f, 2e-6f * (float)k);
    sn_buffer_free(ba);
    sn_buffer_free(bb);
    sn_buffer_free(bc_);
    sn_buffer_free(bbias);
    sn_buffer_free(bres);
    free(res);
    free(a);
    free(b);
    free(c);
    free(bias);
    free(want);
    free(got);
}

static void gemm_case(sn_device *dev, size_t m, size_t n, size_t k, int ta,
                      int tb, size_t batch, int share_b, size_t pad,
                      float alpha, float beta)
{
    gemm_case_epilogue(dev, m, n, k, ta, tb, batch, share_b, pad, alpha, beta,
                       0, 0, SN_ACT_NONE);
}

/*
 * One quantized product on dev (where it runs it): A (m x k, row stride
 * k + 3, at an offset) times a weight of qtype in the given layout and
 * blocks, zero points (0 none, 1 an array, 2 an array of fractions, 3
 * one value for all) and bias as asked, against ref_qgemm within float
 * rounding of sums of k terms.
 */
static void qgemm_case(sn_device *dev, size_t m, size_t n, size_t k,
                       sn_qtype qt, int trans_b, size_t block, int zero,
                       int bias, sn_act act)
{
    size_t lda = k + 3, at = 5;
    size_t blocks = block ? (k + block - 1) / block : 1;
    size_t row = trans_b ? (qt == SN_QTYPE_U4 ? (k + 1) / 2 : k) : n;
    size_t ldq = row + 2, rows = trans_b ? n : k;
    int half = qt == SN_QTYPE_F16 || qt == SN_QTYPE_BF16;
    size_t qbytes = rows * ldq * (half ? 2 : 1), qfloats = (qbytes + 3) / 4 + 1;
    float *a = random_floats(at + m * lda, 31, -1.0f, 1.0f);
    float *sc = random_floats(n * blocks, 32, 0.001f, 0.05f);
    float *zp = random_floats(n * blocks, 33, 0.0f, 15.0f);
    float *bs = random_floats(n, 34, -1.0f, 1.0f);
    float *want = calloc(m * n, sizeof *want), *got = calloc(m * n,
                                                             sizeof *got);
    float *qf = calloc(qfloats, sizeof *qf);
    cr_assert(want && got && qf);
    unsigned char *q = (unsigned char *)(qf + 1); /* byte 4: offset 1 */
    unsigned x = 12345u + (unsigned)(m * 7 + n * 3 + k);
    for (size_t i = 0; i < qbytes; i++) {
        x = x * 1103515245u + 12345u;
        q[i] = (unsigned char)(x >> 16);
    }
    /* Halves: finite values from 2^-6 to 2 in size, either sign (the
     * exponent's bits drawn in range), subnormal ones among them. */
    for (size_t i = 0; half && i + 1 < qbytes; i += 2) {
        unsigned h = (unsigned)(q[i] | q[i + 1] << 8);
        if (qt == SN_QTYPE_F16)
            h = (h & 0x83ff) | (unsigned)((9 + (h >> 10) % 8) % 16) << 10;
        else
            h = (h & 0x807f) | (unsigned)(121 + (h >> 7) % 8) << 7;
        if (i % 22 == 0)
            h &= qt == SN_QTYPE_F16 ? 0x83ff : 0x807f; /* subnormal */
        q[i] = (unsigned char)h;
        q[i + 1] = (unsigned char)(h >> 8);
    }
    for (size_t i = 0; i < n * blocks; i++) /* zero 2: not whole numbers */
        zp[i] = (float)(int)zp[i] - (qt == SN_QTYPE_S8 ? 8.0f : 0.0f) +
                (zero == 2 ? 0.25f : 0.0f);
    sn_qgemm_desc d = {.m = m, .n = n, .k = k, .qtype = qt,
                       .trans_b = trans_b, .block = block, .lda = lda,
                       .ldq = ldq, .ldc = n, .act = act};
    if (zero == 3) /* one zero point for all, no array */
        d.zero_value = qt == SN_QTYPE_U4 ? 8.0f : 3.0f;
    int zarray = zero == 1 || zero == 2;
    ref_qgemm(&d, a + at, q, sc, zarray ? zp : NULL, bias ? bs : NULL, want);
    sn_buffer *ba = make_buffer(dev, a, at + m * lda);
    sn_buffer *bq = make_buffer(dev, qf, qfloats);
    sn_buffer *bsc = make_buffer(dev, sc, n * blocks);
    sn_buffer *bz = make_buffer(dev, zp, n * blocks);
    sn_buffer *bb = make_buffer(dev, bs, n);
    sn_buffer *bc = make_buffer(dev, NULL, m * n);
    d.a = (sn_view){ba, at};
    d.q = (sn_view){bq, 1};
    d.scale = (sn_view){bsc, 0};
    d.zero = zarray ? (sn_view){bz, 0} : (sn_view){0};
    d.bias = bias ? (sn_view){bb, 0} : (sn_view){0};
    d.c = (sn_view){bc, 0};
    cr_assert_eq(sn_qgemm(dev, &d), SHARDNET_OK, "%s: %s", dev->info.name,
                 shardnet_last_error());
    read_back(bc, got, m * n);
    char what[160];
    snprintf(what, sizeof what,
             "qgemm %zux%zux%zu type %d trans_b %d block %zu zero %d bias %d "
             "act %d", m, n, k, (int)qt, trans_b, block, zero, bias,
             (int)act);
    expect_close(dev, what, got, want, m * n, 1e-5f, 1e-5f * (float)k);
    sn_buffer_free(ba);
    sn_buffer_free(bq);
    sn_buffer_free(bsc);
    sn_buffer_free(bz);
    sn_buffer_free(bb);
    sn_buffer_free(bc);
    free(a);
    free(sc);
    free(zp);
    free(bs);
    free(want);
    free(got);
    free(qf);
}

Test(kernels, qgemm_matches_reference_in_every_layout)
{
    /* 20 rows: the CPU dequantizes once and runs the float GEMM */
    static const size_t ms[] = {1, 3, 6, 20}, ns[] = {1, 17, 70, 130},
                        ks[] = {1, 33, 100};
    FOR_EACH_DEVICE(dev) {
        if (!sn_device_supports(dev, SN_KERNEL_QGEMM, SN_VARIANT_ANY))
            continue; /* its products get the weight dequantized */
        for (size_t mi = 0; mi < 4; mi++)
            for (size_t ni = 0; ni < 4; ni++)
                for (size_t ki = 0; ki < 3; ki++) {
                    size_t m = ms[mi], n = ns[ni], k = ks[ki];
                    int v = (int)(mi + ni + ki);
                    sn_act act = (sn_act)(v % 3);
                    for (int tb = 0; tb < 2; tb++) {
                        qgemm_case(dev, m, n, k, SN_QTYPE_S8, tb, 0, v % 2,
                                   (v + 1) % 2, act);
                        qgemm_case(dev, m, n, k, SN_QTYPE_U8, tb, 0, 1, 1,
                                   act);
                        qgemm_case(dev, m, n, k, SN_QTYPE_S8, tb, 32, 1, 0,
                                   SN_ACT_NONE);
                    }
                    qgemm_case(dev, m, n, k, SN_QTYPE_U4, 1, 32, 1, 1, act);
                    qgemm_case(dev, m, n, k, SN_QTYPE_U4, 1, 32, 2, 0, act);
                    qgemm_case(dev, m, n, k, SN_QTYPE_U8, 1, 0, 2, 0, act);
                    qgemm_case(dev, m, n, k, SN_QTYPE_U4, 1, 16, 0, 0, act);
                    qgemm_case(dev, m, n, k, SN_QTYPE_U4, 1, 0, 1, 0, act);
                    qgemm_case(dev, m, n, k, SN_QTYPE_U4, 1, 32, 3, 1, act);
                    qgemm_case(dev, m, n, k, SN_QTYPE_U8, 0, 0, 3, 0, act);
                    qgemm_case(dev, m, n, k, SN_QTYPE_U8, 1, 0, 3, 1, act);
                    for (int tb = 0; tb < 2; tb++) {
                        qgemm_case(dev, m, n, k, SN_QTYPE_F16, tb, 0, 0,
                                   v % 2, act);
                        qgemm_case(dev, m, n, k, SN_QTYPE_BF16, tb, 0, 0,
                                   (v + 1) % 2, act);
                    }
                }
    }
}

Test(kernels, qgemm_refuses_bad_descriptors)
{
    FOR_EACH_DEVICE(dev) {
        if (!sn_device_supports(dev, SN_KERNEL_QGEMM, SN_VARIANT_ANY))
            continue;
        sn_buffer *b = make_buffer(dev, NULL, 64);
        sn_qgemm_desc d = {.m = 2, .n = 4, .k = 8, .qtype = SN_QTYPE_S8,
                           .trans_b = 1, .lda = 8, .ldq = 8, .ldc = 4,
                           .a = {b, 0}, .q = {b, 0}, .scale = {b, 0},
                           .c = {b, 32}};
        sn_qgemm_desc bad = d;
        bad.ldq = 4; /* shorter than a row of K */
        cr_expect_eq(sn_qgemm(dev, &bad), SHARDNET_INVALID_ARGUMENT);
        bad = d;
        bad.qtype = SN_QTYPE_U4;
        bad.trans_b = 0; /* uint4 only as N rows of K */
        cr_expect_eq(sn_qgemm(dev, &bad), SHARDNET_INVALID_ARGUMENT);
        bad = d;
        bad.c = (sn_view){b, 60}; /* C runs past the buffer */
        cr_expect_eq(sn_qgemm(dev, &bad), SHARDNET_INVALID_ARGUMENT);
        bad = d;
        bad.qtype = SN_QTYPE_F16;
        bad.zero = (sn_view){b, 0}; /* halves have no zero points */
        cr_expect_eq(sn_qgemm(dev, &bad), SHARDNET_INVALID_ARGUMENT);
        bad = d;
        bad.qtype = SN_QTYPE_BF16;
        bad.block = 4; /* nor blocks */
        cr_expect_eq(sn_qgemm(dev, &bad), SHARDNET_INVALID_ARGUMENT);
        bad = d;
        bad.zero_value = NAN; /* zero points are bytes */
        cr_expect_eq(sn_qgemm(dev, &bad), SHARDNET_INVALID_ARGUMENT);
        bad.zero_value = 256.0f;
        cr_expect_eq(sn_qgemm(dev, &bad), SHARDNET_INVALID_ARGUMENT);
        bad = d;
        bad.qtype = (sn_qtype)7;
        cr_expect_eq(sn_qgemm(dev, &bad), SHARDNET_INVALID_ARGUMENT);
        cr_expect_eq(sn_qgemm(dev, &d), SHARDNET_OK, "%s",
                     shardnet_last_error());
        cr_expect_eq(sn_synchronize(dev), SHARDNET_OK);
        sn_buffer_free(b);
    }
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

Test(kernels, gemm_adds_bias_per_column_or_per_row_then_applies_relu)
{
    static const size_t shapes[][3] = {
        {7, 13, 5}, {1, 300, 77}, {300, 1, 77}, {130, 70, 33}};
    FOR_EACH_DEVICE(dev)
    {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int bias = 0; bias < 3; bias++)
                for (int act = 0; act < 2; act++) {
                    gemm_case_epilogue(dev, shapes[s][0], shapes[s][1],
                                       shapes[s][2], 0, (int)(s & 1), 1, 0, 1,
                                       1.0f, 0.0f, bias, 0, (sn_act)act);
                    gemm_case_epilogue(dev, shapes[s][0], shapes[s][1],
                                       shapes[s][2], 1, 0, 3, 1, 0, 0.5f,
                                       0.25f, bias, 0, (sn_act)act);
                }
    }
}

/* A residual block's Add fused into the epilogue: (product + bias) +
 * residual, then Relu, on every CPU kernel's shapes (small products, B in
 * place, K in several blocks, transposed A through BLAS) and batches. */
Test(kernels, gemm_adds_a_residual_after_the_bias_then_applies_relu)
{
    static const size_t shapes[][3] = {{7, 13, 5},    {24, 1024, 24},
                                       {13, 70, 600}, {1, 300, 77},
                                       {300, 1, 77},  {5, 30, 100}};
    FOR_EACH_DEVICE(dev)
    {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int bias = 0; bias < 3; bias++) {
                gemm_case_epilogue(dev, shapes[s][0], shapes[s][1],
                                   shapes[s][2], 0, 0, 1, 0, 1, 1.0f, 0.0f,
                                   bias, 1, (sn_act)(bias & 1));
                gemm_case_epilogue(dev, shapes[s][0], shapes[s][1],
                                   shapes[s][2], (int)(s & 1), 0, 3, 1, 0,
                                   0.5f, 0.25f, bias, 1, SN_ACT_RELU);
            }
    }
}

/* Relu6 in the epilogue, on every CPU kernel's shapes (small products, B
 * in place, transposed A through BLAS, one row, one column): sums of
 * many products pass 6 both ways. */
Test(kernels, gemm_applies_relu6_after_the_bias_and_residual)
{
    static const size_t shapes[][3] = {{5, 20, 128},   {24, 300, 600},
                                       {13, 70, 600},  {1, 300, 700},
                                       {300, 1, 700}};
    FOR_EACH_DEVICE(dev)
    {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            gemm_case_epilogue(dev, shapes[s][0], shapes[s][1],
                               shapes[s][2], 0, 0, 1, 0, 1, 1.0f, 0.0f, 2,
                               (int)(s & 1), SN_ACT_RELU6);
            gemm_case_epilogue(dev, shapes[s][0], shapes[s][1],
                               shapes[s][2], 1, (int)(s & 1), 2, 1, 0, 0.5f,
                               0.25f, 1, 0, SN_ACT_RELU6);
        }
    }
}

Test(kernels, gemm_refuses_a_residual_that_overlaps_c)
{
    FOR_EACH_DEVICE(dev)
    {
        float zeros[64] = {0};
        sn_buffer *buf = make_buffer(dev, zeros, 64);
        sn_gemm_desc d = {.m = 2, .n = 4, .k = 2, .alpha = 1.0f, .lda = 2,
                          .ldb = 4, .ldc = 4, .batch = 1,
                          .a = {buf, 0}, .b = {buf, 8}, .c = {buf, 16},
                          .res = {buf, 20}};
        cr_expect_eq(sn_gemm(dev, &d), SHARDNET_INVALID_ARGUMENT, "%s",
                     dev->info.name);
        cr_expect(strstr(shardnet_last_error(), "residual overlaps C"), "%s",
                  shardnet_last_error());
        d.res.offset = 24; /* just past C: fine */
        cr_expect_eq(sn_gemm(dev, &d), SHARDNET_OK, "%s: %s", dev->info.name,
                     shardnet_last_error());
        sn_buffer_free(buf);
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

/* Issue 15's binary ops on operands chosen to hit their edges: equal
 * values, zeros (false), NaN, remainders of either sign. */
Test(kernels, comparison_logic_and_remainder_ops_match_the_reference)
{
    static const float a[] = {1.0f, 2.0f, -3.0f, 0.0f, NAN,  5.5f,
                              -7.0f, 7.0f, 0.0f, -0.0f, 4.0f, -1.5f};
    static const float b[] = {1.0f, 3.0f, -3.0f, 2.0f, 1.0f, -2.0f,
                              2.0f, -2.0f, 0.0f, 0.0f, NAN,  3.0f};
    static const sn_binary_op ops[] = {
        SN_BINARY_MOD, SN_BINARY_FMOD, SN_BINARY_EQUAL, SN_BINARY_GREATER,
        SN_BINARY_GREATER_EQUAL, SN_BINARY_AND, SN_BINARY_OR, SN_BINARY_XOR,
        SN_BINARY_PRELU};
    const size_t n = sizeof a / sizeof a[0];
    float want[sizeof a / sizeof a[0]], got[sizeof a / sizeof a[0]];
    FOR_EACH_DEVICE(dev)
    {
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            sn_binary_desc d = {.op = ops[k], .rank = 1, .shape = {n},
                                .stride_a = {1}, .stride_b = {1}};
            sn_buffer *ba = make_buffer(dev, a, n), *bb = make_buffer(dev, b, n);
            sn_buffer *bc = make_buffer(dev, NULL, n);
            d.a = (sn_view){ba, 0};
            d.b = (sn_view){bb, 0};
            d.c = (sn_view){bc, 0};
            cr_assert_eq(sn_binary(dev, &d), SHARDNET_OK, "%s: %s",
                         dev->info.name, shardnet_last_error());
            read_back(bc, got, n);
            ref_binary(&d, a, b, want);
            expect_close(dev, sn_binary_op_name(ops[k]), got, want, n, 0.0f,
                         0.0f);
            sn_buffer_free(ba);
            sn_buffer_free(bb);
            sn_buffer_free(bc);
        }
    }
}

/* Both NaN, or the same bits (-0 is not 0). */
static void expect_same_bits(const sn_device *dev, const char *what,
                             const float *got, const float *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cr_assert(
            (isnan(got[i]) && isnan(want[i])) ||
                !memcmp(&got[i], &want[i], sizeof got[i]),
            "%s on %s: element %zu is %a, the reference %a", what,
            dev->info.name, i, (double)got[i], (double)want[i]);
}

/* One binary op with the fused Relu, a's elements seeded with NaN and
 * -0 (-0 + -0 and -0 * 1 stay -0 through Relu), against the reference. */
static void binary_relu_case(sn_device *dev, sn_binary_op op, size_t ra,
                             const size_t *sa, size_t rb, const size_t *sb)
{
    sn_binary_desc d = {.op = op, .act = SN_ACT_RELU};
    size_t na = 1, nb = 1, nc = 1;
    cr_assert_eq(sn_binary_broadcast(&d, ra, sa, rb, sb), SHARDNET_OK, "%s",
                 shardnet_last_error());
    for (size_t i = 0; i < ra; i++)
        na *= sa[i];
    for (size_t i = 0; i < rb; i++)
        nb *= sb[i];
    for (size_t i = 0; i < d.rank; i++)
        nc *= d.shape[i];
    float *a = random_floats(na, 21, -2.0f, 2.0f);
    float *b = random_floats(nb, 22, -2.0f, 2.0f);
    for (size_t i = 0; i < na; i += 7)
        a[i] = i % 2 ? NAN : -0.0f;
    if (nb > 3)
        b[3] = -0.0f;
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
    snprintf(what, sizeof what, "%s+relu (rank %zu vs %zu)",
             sn_binary_op_name(op), ra, rb);
    expect_same_bits(dev, what, got, want, nc);
    sn_buffer_free(ba);
    sn_buffer_free(bb);
    sn_buffer_free(bc);
    free(a);
    free(b);
    free(want);
    free(got);
}

/* The Relu a pass fuses into Add, Sub, Mul and Div (and any binary op
 * given one), bit for bit, in every form of the kernel: same shapes,
 * either operand a scalar, broadcast, and large enough for the CPU's
 * threads. */
Test(kernels, binary_ops_with_a_fused_relu_match_the_reference_bit_exactly)
{
    static const size_t big[] = {300, 257}, brow[] = {257}, bcol[] = {300, 1},
                        s1[] = {1}, s335[] = {3, 1, 5}, s41[] = {4, 1};
    /* (MAX and PRELU: the CPU's Relu after the op's loop, by chunks.) */
    static const sn_binary_op ops[] = {SN_BINARY_ADD, SN_BINARY_SUB,
                                       SN_BINARY_MUL, SN_BINARY_DIV,
                                       SN_BINARY_MAX, SN_BINARY_PRELU};
    FOR_EACH_DEVICE(dev)
    {
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            binary_relu_case(dev, ops[k], 2, big, 2, big);
            binary_relu_case(dev, ops[k], 2, big, 1, brow);
            binary_relu_case(dev, ops[k], 2, bcol, 2, big);
            binary_relu_case(dev, ops[k], 1, s1, 2, big);
            binary_relu_case(dev, ops[k], 2, big, 1, s1);
            binary_relu_case(dev, ops[k], 3, s335, 2, s41);
        }
    }
}

/* An activation the binary step does not know is refused, not ignored. */
Test(kernels, binary_op_refuses_an_unknown_activation)
{
    FOR_EACH_DEVICE(dev)
    {
        sn_buffer *bx = make_buffer(dev, NULL, 4);
        sn_binary_desc d = {.op = SN_BINARY_ADD, .rank = 1, .shape = {4},
                            .stride_a = {1}, .stride_b = {1},
                            .act = (sn_act)7};
        d.a = d.b = d.c = (sn_view){bx, 0};
        cr_assert_eq(sn_binary(dev, &d), SHARDNET_INVALID_ARGUMENT);
        sn_buffer_free(bx);
    }
}

/* Parameters that make each op non-trivial (the others ignore them). */
static void unary_params(sn_unary_desc *d)
{
    switch (d->op) {
    case SN_UNARY_LEAKY_RELU:
        d->alpha = 0.1f;
        break;
    case SN_UNARY_HARD_SIGMOID:
        d->alpha = 0.2f;
        d->beta = 0.5f;
        break;
    case SN_UNARY_CLIP:
        d->alpha = -1.5f;
        d->beta = 2.5f;
        break;
    case SN_UNARY_CLIP_GATE: /* a hard swish's corners within the inputs */
        d->alpha = 1.5f;
        d->beta = 3.0f;
        break;
    /* issue 15's parameterised ops */
    case SN_UNARY_ELU:
    case SN_UNARY_CELU:
        d->alpha = 0.7f;
        break;
    case SN_UNARY_SELU:
        d->alpha = 1.6732632f;
        d->beta = 1.050701f;
        break;
    case SN_UNARY_THRESHOLDED_RELU:
        d->alpha = 0.5f;
        break;
    case SN_UNARY_SHRINK:
        d->alpha = 1.5f;
        d->beta = 0.25f;
        break;
    case SN_UNARY_ISINF:
        d->alpha = 1.0f;
        d->beta = 0.0f;
        break;
    default:
        break;
    }
}

/* The input of op: x, or xpos for ops defined on positive numbers only,
 * xunit for those defined on (-1, 1), and for ACOSH xpos + 1. */
static const float *unary_input(int op, const float *x, const float *xpos,
                                const float *xunit, float *scratch, size_t n)
{
    if (op == SN_UNARY_LOG || op == SN_UNARY_SQRT)
        return xpos;
    if (op == SN_UNARY_ASIN || op == SN_UNARY_ACOS || op == SN_UNARY_ATANH)
        return xunit;
    if (op == SN_UNARY_ACOSH) {
        for (size_t i = 0; i < n; i++)
            scratch[i] = xpos[i] + 1.0f;
        return scratch;
    }
    return x;
}

Test(kernels, unary_ops_match_libm)
{
    const size_t n = 10007;
    float *x = random_floats(n, 21, -6.0f, 6.0f);
    float *xpos = random_floats(n, 22, 1e-3f, 50.0f);
    float *xunit = random_floats(n, 23, -0.999f, 0.999f);
    float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    float *scratch = malloc(n * sizeof *scratch);
    cr_assert(want && got && scratch);
    /* NaN and infinities for ISNAN and ISINF (and where they go in the
     * others), and halves for ROUND */
    x[2] = NAN;
    x[3] = INFINITY;
    x[4] = -INFINITY;
    x[5] = 2.5f;
    x[6] = -0.5f;
    x[7] = 1.5f;
    x[0] = 0.0f;
    x[1] = -0.0f;
    FOR_EACH_DEVICE(dev)
    {
        for (int op = 0; op < SN_UNARY_COUNT; op++) {
            const float *in = unary_input(op, x, xpos, xunit, scratch, n);
            sn_buffer *bx = make_buffer(dev, in, n);
            sn_buffer *by = make_buffer(dev, NULL, n);
            sn_unary_desc d = {.op = op, .n = n, .x = {bx, 0}, .y = {by, 0}};
            unary_params(&d);
            cr_assert_eq(sn_unary(dev, &d), SHARDNET_OK, "%s: %s",
                         dev->info.name, shardnet_last_error());
            read_back(by, got, n);
            ref_unary(&d, in, want);
            expect_close(dev, sn_unary_op_name(op), got, want, n, 1e-5f,
                         1e-6f);
            /* Gated (times x), as a pass fuses x * Sigmoid(x). */
            d.gate = 1;
            cr_assert_eq(sn_unary(dev, &d), SHARDNET_OK, "%s: %s",
                         dev->info.name, shardnet_last_error());
            read_back(by, got, n);
            ref_unary(&d, in, want);
            expect_close(dev, "gated unary", got, want, n, 1e-5f, 1e-6f);
            /* In place, at an offset (gated; the op alone below). */
            sn_buffer *bg = make_buffer(dev, in, n);
            d.x = (sn_view){bg, 5};
            d.y = (sn_view){bg, 5};
            d.n = n - 5;
            cr_assert_eq(sn_unary(dev, &d), SHARDNET_OK);
            read_back(bg, got, n);
            expect_close(dev, "in-place gated unary", got + 5, want + 5,
                         n - 5, 1e-5f, 1e-6f);
            sn_buffer_free(bg);
            d.gate = 0;
            d.x = (sn_view){bx, 0};
            d.n = n;
            ref_unary(&d, in, want);
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
    free(xunit);
    free(scratch);
    free(want);
    free(got);
}

/* (outer, len, inner) shapes: odd axes, a long row, a single element. */
static const size_t axis_shapes[][3] = {{1, 1, 1},    {3, 5, 7},   {1, 1000, 1},
                                        {2, 3, 1},    {1, 3, 4},   {64, 10, 1},
                                        {5, 1, 9},    {7, 333, 3}, {2, 4097, 1}};

/* Rounding to half and to bfloat16, bit for bit the host conversions'
 * (lib/core/half.c) on every device: ties to even in the normal and the
 * subnormal range, the largest finite values, overflow to inf, signed
 * zeros, NaN and infinities, and float32 subnormals. */
Test(kernels, rounding_to_half_and_bfloat16_is_the_host_conversion)
{
    static const float edge[] = {
        0.0f, -0.0f, 1.0f, -1.0f, 1.00048828125f /* 1 + 2^-11: to 1 */,
        1.00146484375f /* 1 + 3 * 2^-11: up to 1 + 2^-9 */, 65504.0f,
        65519.99f, 65520.0f, -65520.0f, 1e6f, 6.103515625e-05f,
        6.1e-05f, 8.940697e-08f /* 1.5 * 2^-24: to 2^-23 */,
        2.9802322e-08f /* 2^-25: to 0 */, -4.4703484e-08f, 3.0e-5f,
        -1.2345e-6f, 1e-40f, 3.3895314e38f, 3.4028235e38f, INFINITY,
        -INFINITY, NAN, 1.0039062f /* 1 + 2^-8: bf16 tie to even */,
        1.01171875f /* 1 + 3 * 2^-8 */, -2.7182817f, 3.1415927f};
    const size_t n = sizeof edge / sizeof edge[0], total = n + 4096;
    float *x = random_floats(total, 31, -70000.0f, 70000.0f);
    float got[sizeof edge / sizeof edge[0] + 4096],
        want[sizeof edge / sizeof edge[0] + 4096];
    memcpy(x, edge, sizeof edge);
    FOR_EACH_DEVICE(dev)
    {
        for (int op = SN_UNARY_ROUND_HALF; op <= SN_UNARY_ROUND_BF16; op++) {
            sn_buffer *bx = make_buffer(dev, x, total);
            sn_unary_desc d = {.op = op, .n = total, .x = {bx, 0},
                               .y = {bx, 0}};
            cr_assert_eq(sn_unary(dev, &d), SHARDNET_OK, "%s: %s",
                         dev->info.name, shardnet_last_error());
            read_back(bx, got, total);
            ref_unary(&d, x, want);
            for (size_t i = 0; i < total; i++)
                cr_assert(memcmp(&got[i], &want[i], sizeof got[i]) == 0 ||
                              (isnan(got[i]) && isnan(want[i])),
                          "%s %s(%.9g): %.9g, not %.9g", dev->info.name,
                          sn_unary_op_name(op), (double)x[i],
                          (double)got[i], (double)want[i]);
            sn_buffer_free(bx);
        }
    }
    free(x);
}

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

/* ---- the ONNX milestone's kernels ----------------------------------------- */

/* A device buffer holding n int32 values, bit for bit. */
static sn_buffer *make_index_buffer(sn_device *dev, const int32_t *x, size_t n)
{
    sn_buffer *b = NULL;
    cr_assert_eq(sn_buffer_alloc(dev, n * sizeof *x, &b), SHARDNET_OK,
                 "%s: %s", dev->info.name, shardnet_last_error());
    cr_assert_eq(sn_buffer_write(b, 0, x, n * sizeof *x), SHARDNET_OK,
                 "%s: %s", dev->info.name, shardnet_last_error());
    return b;
}

/* Views start this many elements into their buffers. */
#define VIEW_OFF 3

/* out = where(cond, x, y), cond (2,1,5), x (3,1), y (5) or a scalar, and a
 * large case with all three broadcast. */
static void where_case(sn_device *dev, size_t rank, const size_t *shape,
                       const size_t *sc, const size_t *sx, const size_t *sy,
                       size_t nc, size_t nx, size_t ny)
{
    sn_where_desc d = {.rank = rank};
    size_t n = 1;
    for (size_t j = 0; j < rank; j++) {
        d.shape[j] = shape[j];
        d.stride_cond[j] = sc[j];
        d.stride_x[j] = sx[j];
        d.stride_y[j] = sy[j];
        n *= shape[j];
    }
    float *c = random_floats(VIEW_OFF + nc, 51, -1.0f, 2.0f);
    float *x = random_floats(VIEW_OFF + nx, 52, -1.0f, 1.0f);
    float *y = random_floats(VIEW_OFF + ny, 53, 10.0f, 11.0f);
    for (size_t i = 0; i < VIEW_OFF + nc; i++)
        c[i] = c[i] < 0.0f ? 0.0f : c[i];
    c[VIEW_OFF] = NAN; /* true */
    float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    cr_assert(want && got);
    sn_buffer *bc = make_buffer(dev, c, VIEW_OFF + nc);
    sn_buffer *bx = make_buffer(dev, x, VIEW_OFF + nx);
    sn_buffer *by = make_buffer(dev, y, VIEW_OFF + ny);
    sn_buffer *bo = make_buffer(dev, NULL, n);
    d.cond = (sn_view){bc, VIEW_OFF};
    d.x = (sn_view){bx, VIEW_OFF};
    d.y = (sn_view){by, VIEW_OFF};
    d.out = (sn_view){bo, 0};
    cr_assert_eq(sn_where(dev, &d), SHARDNET_OK, "%s: %s", dev->info.name,
                 shardnet_last_error());
    read_back(bo, got, n);
    ref_where(&d, c + VIEW_OFF, x + VIEW_OFF, y + VIEW_OFF, want);
    expect_close(dev, "where", got, want, n, 0.0f, 0.0f);
    sn_buffer_free(bc);
    sn_buffer_free(bx);
    sn_buffer_free(by);
    sn_buffer_free(bo);
    free(c);
    free(x);
    free(y);
    free(want);
    free(got);
}

Test(kernels, where_selects_with_broadcasting)
{
    FOR_EACH_DEVICE(dev)
    {
        /* cond (2,1,5), x (3,1), y (5) -> (2,3,5) */
        static const size_t s1[] = {2, 3, 5}, c1[] = {5, 0, 1},
                            x1[] = {0, 1, 0}, y1[] = {0, 0, 1};
        where_case(dev, 3, s1, c1, x1, y1, 10, 3, 5);
        /* cond (40,1,1), x (30,1), y scalar -> (40,30,100) */
        static const size_t s2[] = {40, 30, 100}, c2[] = {1, 0, 0},
                            x2[] = {0, 1, 0}, y2[] = {0, 0, 0};
        where_case(dev, 3, s2, c2, x2, y2, 40, 30, 1);
        /* all contiguous (7), and rank 0 */
        static const size_t s3[] = {7}, o3[] = {1};
        where_case(dev, 1, s3, o3, o3, o3, 7, 7, 7);
        where_case(dev, 0, NULL, NULL, NULL, NULL, 1, 1, 1);
    }
}

/* One copy on dev: the whole destination buffer (dst_len, NaN before) is
 * compared, so what the copy must not touch is checked too. */
static void copy_case(sn_device *dev, const sn_copy_desc *desc,
                      size_t src_len, size_t src_off, size_t dst_len,
                      size_t dst_off, const char *what)
{
    sn_copy_desc d = *desc;
    float *src = random_floats(src_len, 61, -1.0f, 1.0f);
    float *want = malloc(dst_len * sizeof *want);
    float *got = malloc(dst_len * sizeof *got);
    cr_assert(want && got);
    for (size_t i = 0; i < dst_len; i++)
        want[i] = NAN;
    sn_buffer *bs = make_buffer(dev, src, src_len);
    sn_buffer *bd = make_buffer(dev, want, dst_len);
    d.src = (sn_view){bs, src_off};
    d.dst = (sn_view){bd, dst_off};
    cr_assert_eq(sn_copy(dev, &d), SHARDNET_OK, "%s: %s: %s", what,
                 dev->info.name, shardnet_last_error());
    read_back(bd, got, dst_len);
    ref_copy(&d, src + src_off, want + dst_off);
    expect_close(dev, what, got, want, dst_len, 0.0f, 0.0f);
    sn_buffer_free(bs);
    sn_buffer_free(bd);
    free(src);
    free(want);
    free(got);
}

Test(kernels, copy_transposes_slices_and_expands)
{
    /* Transpose (37,65,129) -> (129,37,65): out dim j = in dim (2,0,1)[j]. */
    const sn_copy_desc tr = {.rank = 3, .shape = {129, 37, 65},
                             .src_stride = {1, 65 * 129, 129},
                             .dst_stride = {37 * 65, 65, 1}};
    const sn_copy_desc tr2 = {.rank = 3, .shape = {5, 3, 7},
                              .src_stride = {1, 35, 5},
                              .dst_stride = {21, 7, 1}};
    /* src (10, 20)[8:0:-3, 19::-2] */
    const sn_copy_desc sl = {.rank = 2, .shape = {3, 10},
                             .src_stride = {-60, -2}, .dst_stride = {10, 1}};
    /* (3,1) and a scalar expanded; a (4,5) block placed for a concat */
    const sn_copy_desc ex = {.rank = 2, .shape = {3, 4}, .src_stride = {1, 0},
                             .dst_stride = {4, 1}};
    const sn_copy_desc ex0 = {.rank = 3, .shape = {50, 60, 70},
                              .src_stride = {0, 0, 0},
                              .dst_stride = {4200, 70, 1}};
    const sn_copy_desc cat = {.rank = 2, .shape = {4, 5},
                              .src_stride = {5, 1}, .dst_stride = {10, 1}};
    /* written backwards: dst[::-1, ::-1] = src */
    const sn_copy_desc rev = {.rank = 2, .shape = {70, 500},
                              .src_stride = {500, 1},
                              .dst_stride = {-500, -1}};
    /* 2 x 2 tiles into their image, as a stride-2 ConvTranspose places
     * them: Z (c, qy, qx, y, x) -> out (c, 2 y + qy, 2 x + qx), rows of
     * 37 (whole vectors and a tail) and of 4100 (more than one unit) */
    const sn_copy_desc tile = {
        .rank = 5, .shape = {3, 5, 2, 37, 2},
        .src_stride = {4 * 185, 37, 2 * 185, 1, 185},
        .dst_stride = {4 * 185, 2 * 74, 74, 2, 1}};
    const sn_copy_desc tile_wide = {
        .rank = 3, .shape = {2, 4100, 2}, .src_stride = {2 * 4100, 1, 4100},
        .dst_stride = {2 * 4100, 2, 1}};
    FOR_EACH_DEVICE(dev)
    {
        copy_case(dev, &tile, 3 * 4 * 185, 0, 3 * 4 * 185, 0,
                  "2x2 tiles into rows");
        copy_case(dev, &tile_wide, 4 * 4100 + VIEW_OFF, VIEW_OFF,
                  4 * 4100 + 1, 1, "two long rows interleaved");
        copy_case(dev, &tr, 37 * 65 * 129, 0, 37 * 65 * 129, 0,
                  "transpose (2,0,1)");
        copy_case(dev, &tr2, 105 + VIEW_OFF, VIEW_OFF, 105 + 2, 2,
                  "small transpose at offsets");
        copy_case(dev, &sl, 200, 8 * 20 + 19, 30, 0, "negative-step slice");
        copy_case(dev, &ex, 3 + VIEW_OFF, VIEW_OFF, 12, 0, "expand (3,1)");
        copy_case(dev, &ex0, 1, 0, 210000, 0, "expand a scalar");
        copy_case(dev, &cat, 20, 0, 40, 3, "concat block");
        copy_case(dev, &rev, 35000, 0, 35000, 34999, "reversed destination");
    }
}

static void gather_case(sn_device *dev, size_t outer, size_t axis_len,
                        size_t inner, const int32_t *idx, size_t nidx)
{
    const size_t nd = outer * axis_len * inner, no = outer * nidx * inner;
    sn_gather_desc d = {.outer = outer, .axis_len = axis_len, .inner = inner,
                        .nidx = nidx};
    float *data = random_floats(VIEW_OFF + nd, 71, -1.0f, 1.0f);
    int32_t *ibuf = malloc((VIEW_OFF + nidx) * sizeof *ibuf);
    float *want = malloc(no * sizeof *want), *got = malloc(no * sizeof *got);
    cr_assert(ibuf && want && got);
    for (size_t i = 0; i < VIEW_OFF; i++)
        ibuf[i] = 0;
    memcpy(ibuf + VIEW_OFF, idx, nidx * sizeof *idx);
    sn_buffer *bd = make_buffer(dev, data, VIEW_OFF + nd);
    sn_buffer *bi = make_index_buffer(dev, ibuf, VIEW_OFF + nidx);
    sn_buffer *bo = make_buffer(dev, NULL, no);
    d.data = (sn_view){bd, VIEW_OFF};
    d.indices = (sn_view){bi, VIEW_OFF};
    d.out = (sn_view){bo, 0};
    cr_assert_eq(sn_gather(dev, &d), SHARDNET_OK, "%s: %s", dev->info.name,
                 shardnet_last_error());
    read_back(bo, got, no);
    ref_gather(&d, data + VIEW_OFF, idx, want);
    char what[96];
    snprintf(what, sizeof what, "gather (%zu,%zu,%zu) by %zu", outer,
             axis_len, inner, nidx);
    expect_close(dev, what, got, want, no, 0.0f, 0.0f);
    sn_buffer_free(bd);
    sn_buffer_free(bi);
    sn_buffer_free(bo);
    free(data);
    free(ibuf);
    free(want);
    free(got);
}

Test(kernels, gather_counts_negative_indices_and_zeroes_out_of_range)
{
    static const int32_t idx[] = {0, -1, 6, 7, -8, -7, 3, INT32_MIN,
                                  INT32_MAX};
    const size_t n = sizeof idx / sizeof idx[0];
    int32_t many[500];
    for (size_t i = 0; i < 500; i++)
        many[i] = (int32_t)((i * 7919) % 1000) - (i % 3 == 0 ? 1000 : 0);
    FOR_EACH_DEVICE(dev)
    {
        gather_case(dev, 3, 7, 5, idx, n);
        gather_case(dev, 4, 7, 1, idx, n);
        gather_case(dev, 1, 1000, 256, many, 500);
    }
}

static void topk_case(sn_device *dev, size_t outer, size_t len,
                      size_t inner, size_t k, int largest, int last_index,
                      int with_values)
{
    const size_t nx = outer * len * inner, no = outer * k * inner;
    sn_topk_desc d = {.outer = outer, .len = len, .inner = inner, .k = k,
                      .largest = largest, .last_index = last_index};
    float *x = random_floats(VIEW_OFF + nx, 91, -2.0f, 2.0f);
    float *want = malloc(2 * no * sizeof *want);
    float *got = malloc(2 * no * sizeof *got);
    cr_assert(want && got);
    /* few distinct values, so that ties are common, and a NaN */
    for (size_t i = 0; i < nx; i++)
        x[VIEW_OFF + i] = roundf(x[VIEW_OFF + i] * 2.0f) / 2.0f;
    x[VIEW_OFF + nx / 2] = NAN;
    sn_buffer *bx = make_buffer(dev, x, VIEW_OFF + nx);
    sn_buffer *bv = make_buffer(dev, NULL, no);
    sn_buffer *bi = make_buffer(dev, NULL, no + VIEW_OFF);
    d.x = (sn_view){bx, VIEW_OFF};
    d.values = (sn_view){with_values ? bv : NULL, 0};
    d.indices = (sn_view){bi, VIEW_OFF};
    cr_assert_eq(sn_topk(dev, &d), SHARDNET_OK, "%s: %s", dev->info.name,
                 shardnet_last_error());
    ref_topk(&d, x + VIEW_OFF, want, want + no);
    char what[96];
    snprintf(what, sizeof what, "top-%zu (%zu,%zu,%zu) largest %d last %d", k,
             outer, len, inner, largest, last_index);
    if (with_values) {
        read_back(bv, got, no);
        for (size_t i = 0; i < no; i++)
            cr_assert(got[i] == want[i] || (isnan(got[i]) && isnan(want[i])),
                      "%s on %s: value %zu is %g, expected %g", what,
                      dev->info.name, i, got[i], want[i]);
    }
    float *gi = malloc((no + VIEW_OFF) * sizeof *gi);
    cr_assert(gi);
    read_back(bi, gi, no + VIEW_OFF);
    expect_close(dev, what, gi + VIEW_OFF, want + no, no, 0.0f, 0.0f);
    sn_buffer_free(bx);
    sn_buffer_free(bv);
    sn_buffer_free(bi);
    free(x);
    free(want);
    free(got);
    free(gi);
}

Test(kernels, topk_ranks_nan_first_and_breaks_ties_by_index)
{
    FOR_EACH_DEVICE(dev)
    {
        for (int largest = 0; largest < 2; largest++)
            for (int last = 0; last < 2; last++) {
                topk_case(dev, 3, 7, 5, 1, largest, last, 1);
                topk_case(dev, 3, 7, 5, 3, largest, last, 0);
                topk_case(dev, 2, 7, 1, 7, largest, last, 1);
                topk_case(dev, 4, 50, 1, 5, largest, last, 1);
            }
        /* k beyond the axis is refused before the backend */
        sn_buffer *b = make_buffer(dev, NULL, 16);
        sn_topk_desc r = {.outer = 2, .len = 4, .inner = 2, .k = 5,
                          .largest = 1, .x = {b, 0}, .indices = {b, 0}};
        cr_assert_eq(sn_topk(dev, &r), SHARDNET_INVALID_ARGUMENT);
        r.k = 0;
        cr_assert_eq(sn_topk(dev, &r), SHARDNET_INVALID_ARGUMENT);
        r.k = 2;
        r.indices.offset = 9;
        cr_assert_eq(sn_topk(dev, &r), SHARDNET_INVALID_ARGUMENT);
        sn_buffer_free(b);
    }
}

Test(kernels, scan_sums_in_order_both_ways)
{
    FOR_EACH_DEVICE(dev)
    {
        for (size_t sh = 0; sh < sizeof axis_shapes / sizeof axis_shapes[0];
             sh++)
            for (int f = 0; f < 4; f++) {
                size_t outer = axis_shapes[sh][0], len = axis_shapes[sh][1],
                       inner = axis_shapes[sh][2];
                size_t n = outer * len * inner;
                float *x = random_floats(VIEW_OFF + n, 93 + (unsigned)sh,
                                         -1.0f, 1.0f);
                float *want = malloc(n * sizeof *want);
                float *got = malloc(n * sizeof *got);
                cr_assert(want && got);
                sn_buffer *bx = make_buffer(dev, x, VIEW_OFF + n);
                sn_buffer *by = make_buffer(dev, NULL, n);
                sn_scan_desc d = {.outer = outer, .len = len, .inner = inner,
                                  .exclusive = f & 1, .reverse = f >> 1,
                                  .x = {bx, VIEW_OFF}, .y = {by, 0}};
                cr_assert_eq(sn_scan(dev, &d), SHARDNET_OK, "%s: %s",
                             dev->info.name, shardnet_last_error());
                read_back(by, got, n);
                ref_scan(&d, x + VIEW_OFF, want);
                char what[96];
                snprintf(what, sizeof what,
                         "scan (%zu,%zu,%zu) exclusive %d reverse %d", outer,
                         len, inner, f & 1, f >> 1);
                /* the same sums in the same order */
                expect_close(dev, what, got, want, n, 0.0f, 0.0f);
                sn_buffer_free(bx);
                sn_buffer_free(by);
                free(x);
                free(want);
                free(got);
            }
    }
}

static void layernorm_case(sn_device *dev, size_t outer, size_t len,
                           int with_bias)
{
    const size_t n = outer * len;
    sn_layernorm_desc d = {.outer = outer, .len = len, .epsilon = 1e-5f};
    float *x = random_floats(VIEW_OFF + n, 81, -2.0f, 3.0f);
    float *scale = random_floats(VIEW_OFF + len, 82, 0.5f, 1.5f);
    float *bias = random_floats(VIEW_OFF + len, 83, -1.0f, 1.0f);
    float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    cr_assert(want && got);
    sn_buffer *bx = make_buffer(dev, x, VIEW_OFF + n);
    sn_buffer *bs = make_buffer(dev, scale, VIEW_OFF + len);
    sn_buffer *bb = with_bias ? make_buffer(dev, bias, VIEW_OFF + len) : NULL;
    sn_buffer *by = make_buffer(dev, NULL, n);
    d.x = (sn_view){bx, VIEW_OFF};
    d.scale = (sn_view){bs, VIEW_OFF};
    d.bias = (sn_view){bb, VIEW_OFF};
    d.y = (sn_view){by, 0};
    cr_assert_eq(sn_layernorm(dev, &d), SHARDNET_OK, "%s: %s",
                 dev->info.name, shardnet_last_error());
    read_back(by, got, n);
    ref_layernorm(&d, x + VIEW_OFF, scale + VIEW_OFF,
                  with_bias ? bias + VIEW_OFF : NULL, want);
    char what[96];
    snprintf(what, sizeof what, "layernorm (%zu,%zu)%s", outer, len,
             with_bias ? " with bias" : "");
    /* float accumulation against the double reference */
    expect_close(dev, what, got, want, n, 1e-4f, 1e-4f);
    sn_buffer_free(bx);
    sn_buffer_free(bs);
    sn_buffer_free(bb);
    sn_buffer_free(by);
    free(x);
    free(scale);
    free(bias);
    free(want);
    free(got);
}

Test(kernels, layernorm_over_the_last_axis_with_and_without_bias)
{
    static const size_t shapes[][2] = {{1, 1}, {3, 7}, {5, 768}, {64, 1000}};
    FOR_EACH_DEVICE(dev)
    {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int b = 0; b < 2; b++)
                layernorm_case(dev, shapes[s][0], shapes[s][1], b);
    }
}

/* Convolution / pooling geometry: channels or planes, input, kernel,
 * strides, dilations, pads (top, left, bottom, right), ceil mode. */
typedef struct window_case {
    size_t ch, in_h, in_w, k_h, k_w, s_h, s_w, d_h, d_w, pt, pl, pb, pr;
    int ceil_mode;
} window_case;

static size_t out_size(size_t in, size_t k, size_t stride, size_t dil,
                       size_t pad0, size_t pad1, int ceil_mode)
{
    const size_t span = dil * (k - 1) + 1, padded = in + pad0 + pad1;
    return (padded - span + (ceil_mode ? stride - 1 : 0)) / stride + 1;
}

static const window_case window_cases[] = {
    /* ch ih  iw kh kw sh sw dh dw pt pl pb pr ceil */
    {3, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0},
    {2, 11, 10, 3, 2, 2, 3, 2, 1, 2, 1, 0, 2, 0},
    {2, 8, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},   /* ceil: past the padding */
    {2, 6, 6, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, 1},   /* ceil: past the input */
    {2, 9, 10, 2, 3, 1, 2, 2, 2, 1, 2, 0, 1, 1},  /* dilation */
    {4, 1, 50, 1, 5, 1, 3, 1, 2, 0, 2, 0, 2, 0},  /* one-dimensional */
    {16, 56, 56, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0},
};

static void im2col_case(sn_device *dev, const window_case *c)
{
    sn_im2col_desc d = {
        .channels = c->ch, .in_h = c->in_h, .in_w = c->in_w,
        .k_h = c->k_h, .k_w = c->k_w, .stride_h = c->s_h, .stride_w = c->s_w,
        .dil_h = c->d_h, .dil_w = c->d_w, .pad_top = c->pt, .pad_left = c->pl,
    };
    /* im2col has no bottom / right pad: out_h and out_w say where to stop */
    d.out_h = out_size(c->in_h, c->k_h, c->s_h, c->d_h, c->pt, c->pb,
                       c->ceil_mode);
    d.out_w = out_size(c->in_w, c->k_w, c->s_w, c->d_w, c->pl, c->pr,
                       c->ceil_mode);
    const size_t ns = c->ch * c->in_h * c->in_w;
    const size_t nd = c->ch * c->k_h * c->k_w * d.out_h * d.out_w;
    float *src = random_floats(VIEW_OFF + ns, 91, -1.0f, 1.0f);
    float *want = malloc(nd * sizeof *want), *got = malloc(nd * sizeof *got);
    cr_assert(want && got);
    sn_buffer *bs = make_buffer(dev, src, VIEW_OFF + ns);
    sn_buffer *bd = make_buffer(dev, NULL, VIEW_OFF + nd);
    d.src = (sn_view){bs, VIEW_OFF};
    d.dst = (sn_view){bd, VIEW_OFF};
    cr_assert_eq(sn_im2col(dev, &d), SHARDNET_OK, "%s: %s", dev->info.name,
                 shardnet_last_error());
    cr_assert_eq(sn_synchronize(dev), SHARDNET_OK);
    cr_assert_eq(sn_buffer_read(bd, VIEW_OFF * sizeof(float), got,
                                nd * sizeof(float)),
                 SHARDNET_OK);
    ref_im2col(&d, src + VIEW_OFF, want);
    char what[128];
    snprintf(what, sizeof what, "im2col C=%zu %zux%zu k %zux%zu -> %zux%zu",
             c->ch, c->in_h, c->in_w, c->k_h, c->k_w, d.out_h, d.out_w);
    expect_close(dev, what, got, want, nd, 0.0f, 0.0f);
    /* Then in bands of 1 to 3 output rows (row0): each band's columns are
     * the whole matrix's columns of those rows. */
    const size_t taps = c->ch * c->k_h * c->k_w, ow = d.out_w, oh = d.out_h;
    for (size_t band = 1; band <= 3; band++)
        for (size_t r0 = 0; r0 < oh; r0 += band) {
            sn_im2col_desc db = d;
            db.row0 = r0;
            db.out_h = oh - r0 < band ? oh - r0 : band;
            const size_t cols = db.out_h * ow;
            cr_assert_eq(sn_im2col(dev, &db), SHARDNET_OK, "%s: %s",
                         dev->info.name, shardnet_last_error());
            cr_assert_eq(sn_synchronize(dev), SHARDNET_OK);
            cr_assert_eq(sn_buffer_read(bd, VIEW_OFF * sizeof(float), got,
                                        taps * cols * sizeof(float)),
                         SHARDNET_OK);
            for (size_t t = 0; t < taps; t++)
                for (size_t k = 0; k < cols; k++)
                    cr_assert(got[t * cols + k] == want[t * oh * ow + r0 * ow + k],
                              "%s: %s, band of %zu rows from row %zu: row %zu "
                              "column %zu is %g, not %g",
                              dev->info.name, what, band, r0, t, k,
                              (double)got[t * cols + k],
                              (double)want[t * oh * ow + r0 * ow + k]);
        }
    sn_buffer_free(bs);
    sn_buffer_free(bd);
    free(src);
    free(want);
    free(got);
}

Test(kernels, im2col_with_pads_strides_dilations_and_one_dimension)
{
    FOR_EACH_DEVICE(dev)
    {
        for (size_t i = 0; i < sizeof window_cases / sizeof window_cases[0];
             i++)
            im2col_case(dev, &window_cases[i]);
    }
}

/* Unit strides with rows as wide as the input's (a "same" convolution):
 * the rows a tap reads inside the input are one contiguous run of it,
 * copied at once, the wrapped columns cleared after; 5 x 5, dilation 2,
 * 1 x 3, pads larger than the kernel (taps whose rows are all outside),
 * asymmetric pads. */
Test(kernels, im2col_of_same_convolutions_copies_runs_of_rows)
{
    static const window_case cases[] = {
        /* ch ih iw kh kw sh sw dh dw pt pl pb pr ceil */
        {2, 9, 7, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 0},
        {3, 6, 12, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 0},
        {2, 5, 8, 1, 3, 1, 1, 1, 1, 0, 1, 0, 1, 0},
        {2, 4, 9, 3, 3, 1, 1, 1, 1, 3, 1, 3, 1, 0},
        {2, 7, 10, 3, 3, 1, 1, 1, 1, 1, 2, 1, 0, 0},
        {1, 3, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0},
    };
    FOR_EACH_DEVICE(dev)
    {
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            im2col_case(dev, &cases[i]);
    }
}

static void pool_case(sn_device *dev, const window_case *c, sn_pool_op op,
                      int include_pad)
{
    sn_pool_desc d = {
        .op = op, .count_include_pad = include_pad, .planes = c->ch,
        .in_h = c->in_h, .in_w = c->in_w, .k_h = c->k_h, .k_w = c->k_w,
        .stride_h = c->s_h, .stride_w = c->s_w, .dil_h = c->d_h,
        .dil_w = c->d_w, .pad_top = c->pt, .pad_left = c->pl,
        .pad_bottom = c->pb, .pad_right = c->pr,
    };
    d.out_h = out_size(c->in_h, c->k_h, c->s_h, c->d_h, c->pt, c->pb,
                       c->ceil_mode);
    d.out_w = out_size(c->in_w, c->k_w, c->s_w, c->d_w, c->pl, c->pr,
                       c->ceil_mode);
    const size_t ns = c->ch * c->in_h * c->in_w;
    const size_t nd = c->ch * d.out_h * d.out_w;
    float *src = random_floats(VIEW_OFF + ns, 101, -1.0f, 1.0f);
    float *want = malloc(nd * sizeof *want), *got = malloc(nd * sizeof *got);
    cr_assert(want && got);
    sn_buffer *bs = make_buffer(dev, src, VIEW_OFF + ns);
    sn_buffer *bd = make_buffer(dev, NULL, nd);
    d.src = (sn_view){bs, VIEW_OFF};
    d.dst = (sn_view){bd, 0};
    cr_assert_eq(sn_pool(dev, &d), SHARDNET_OK, "%s: %s", dev->info.name,
                 shardnet_last_error());
    read_back(bd, got, nd);
    ref_pool(&d, src + VIEW_OFF, want);
    char what[160];
    snprintf(what, sizeof what,
             "%s pool%s P=%zu %zux%zu k %zux%zu s %zu,%zu d %zu,%zu "
             "pads %zu,%zu,%zu,%zu -> %zux%zu",
             op == SN_POOL_MAX ? "max" : "avg",
             include_pad ? " (count_include_pad)" : "", c->ch, c->in_h,
             c->in_w, c->k_h, c->k_w, c->s_h, c->s_w, c->d_h, c->d_w, c->pt,
             c->pl, c->pb, c->pr, d.out_h, d.out_w);
    /* MAX is exact; AVG may sum in another order */
    expect_close(dev, what, got, want, nd, 1e-6f, 1e-6f);
    sn_buffer_free(bs);
    sn_buffer_free(bd);
    free(src);
    free(want);
    free(got);
}

Test(kernels, pool_max_and_avg_with_pads_ceil_windows_and_dilation)
{
    FOR_EACH_DEVICE(dev)
    {
        for (size_t i = 0; i < sizeof window_cases / sizeof window_cases[0];
             i++) {
            pool_case(dev, &window_cases[i], SN_POOL_MAX, 0);
            pool_case(dev, &window_cases[i], SN_POOL_AVG, 0);
            pool_case(dev, &window_cases[i], SN_POOL_AVG, 1);
        }
    }
}

/*
 * One recurrent cell step on dev against the reference: gates rows padded
 * by 3 floats, y rows by 2, every view at an offset; the activations
 * picked from `first` on (all eleven over the cases), half the items
 * masked out where with_mask is set.
 */
static void rnn_cell_case(sn_device *dev, sn_rnn_cell_kind cell, size_t batch,
                          size_t hidden, int first, float clip, int extras)
{
    static const size_t ngates[] = {1, 4, 3, 3};
    const size_t hn = hidden, bh = batch * hn, g = ngates[cell] * hn;
    const int with_mask = extras & 1, with_side = extras & 2;
    sn_rnn_cell_desc d = {.cell = cell, .batch = batch, .hidden = hidden,
                          .clip = clip, .input_forget = (extras & 4) != 0,
                          .ld_gates = g + 3, .ld_y = hn + 2};
    const size_t ng = batch * d.ld_gates, ny = batch * d.ld_y;
    float *gates = random_floats(VIEW_OFF + ng, 91, -3.0f, 3.0f);
    float *rec = random_floats(VIEW_OFF + 3 * bh, 92, -1.0f, 1.0f);
    float *peep = random_floats(VIEW_OFF + 3 * hn, 93, -1.0f, 1.0f);
    float *h = random_floats(VIEW_OFF + bh, 94, -1.0f, 1.0f);
    float *c = random_floats(VIEW_OFF + bh, 95, -2.0f, 2.0f);
    float *mask = calloc(VIEW_OFF + batch, sizeof *mask);
    float *y = calloc(VIEW_OFF + ny, sizeof *y);
    float *wh = malloc(bh * sizeof *wh), *wc = malloc(bh * sizeof *wc);
    float *wy = calloc(ny, sizeof *wy), *got = malloc((ny + bh) * sizeof *got);
    cr_assert(mask && y && wh && wc && wy && got);
    for (int k = 0; k < 3; k++) {
        d.act[k] = (sn_rnn_act)((first + 4 * k) % SN_RNN_ACT_COUNT);
        d.alpha[k] = 0.3f + 0.2f * (float)k;
        d.beta[k] = 0.5f - 0.25f * (float)k;
    }
    for (size_t b = 0; b < batch; b++)
        mask[VIEW_OFF + b] = b % 2 ? 0.0f : 1.0f;
    sn_buffer *bg = make_buffer(dev, gates, VIEW_OFF + ng);
    sn_buffer *br = make_buffer(dev, rec, VIEW_OFF + 3 * bh);
    sn_buffer *bp = make_buffer(dev, peep, VIEW_OFF + 3 * hn);
    sn_buffer *bm = make_buffer(dev, mask, VIEW_OFF + batch);
    sn_buffer *bhh = make_buffer(dev, h, VIEW_OFF + bh);
    sn_buffer *bc = make_buffer(dev, c, VIEW_OFF + bh);
    sn_buffer *by = make_buffer(dev, y, VIEW_OFF + ny);
    d.gates = (sn_view){bg, VIEW_OFF};
    d.h = (sn_view){bhh, VIEW_OFF};
    d.y = (sn_view){by, VIEW_OFF};
    if (cell == SN_RNN_CELL_LSTM)
        d.c = (sn_view){bc, VIEW_OFF};
    if (with_side && cell == SN_RNN_CELL_LSTM)
        d.peep = (sn_view){bp, VIEW_OFF};
    if (with_side && cell == SN_RNN_CELL_GRU)
        d.rec = (sn_view){br, VIEW_OFF};
    if (with_mask)
        d.mask = (sn_view){bm, VIEW_OFF};
    cr_assert_eq(sn_rnn_cell(dev, &d), SHARDNET_OK, "%s: %s", dev->info.name,
                 shardnet_last_error());
    memcpy(wh, h + VIEW_OFF, bh * sizeof *wh);
    memcpy(wc, c + VIEW_OFF, bh * sizeof *wc);
    ref_rnn_cell(&d, gates + VIEW_OFF, d.rec.buf ? rec + VIEW_OFF : NULL,
                 d.peep.buf ? peep + VIEW_OFF : NULL,
                 with_mask ? mask + VIEW_OFF : NULL, wh, wc, wy);
    char what[128];
    snprintf(what, sizeof what,
             "rnn cell %d (%zu,%zu) acts from %d clip %g extras %d", (int)cell,
             batch, hidden, first, (double)clip, extras);
    read_back(by, y, VIEW_OFF + ny);
    for (size_t b = 0; b < batch; b++) /* the rows, not the padding */
        for (size_t j = 0; j < hn; j++) {
            got[b * hn + j] = y[VIEW_OFF + b * d.ld_y + j];
            wy[b * hn + j] = wy[b * d.ld_y + j];
        }
    expect_close(dev, what, got, wy, bh, 1e-4f, 1e-5f);
    read_back(bhh, got, VIEW_OFF + bh);
    expect_close(dev, what, got + VIEW_OFF, wh, bh, 1e-4f, 1e-5f);
    if (cell == SN_RNN_CELL_LSTM) {
        read_back(bc, got, VIEW_OFF + bh);
        expect_close(dev, what, got + VIEW_OFF, wc, bh, 1e-4f, 1e-5f);
    }
    sn_buffer_free(bg);
    sn_buffer_free(br);
    sn_buffer_free(bp);
    sn_buffer_free(bm);
    sn_buffer_free(bhh);
    sn_buffer_free(bc);
    sn_buffer_free(by);
    free(gates);
    free(rec);
    free(peep);
    free(h);
    free(c);
    free(mask);
    free(y);
    free(wh);
    free(wc);
    free(wy);
    free(got);
}

Test(kernels, rnn_cell_steps_every_cell_with_every_activation)
{
    FOR_EACH_DEVICE(dev)
    {
        for (int cell = 0; cell < SN_RNN_CELL_COUNT; cell++)
            for (int first = 0; first < SN_RNN_ACT_COUNT; first++)
                rnn_cell_case(dev, (sn_rnn_cell_kind)cell, 3, 5, first,
                              first % 3 ? 0.0f : 1.5f, first % 8);
        rnn_cell_case(dev, SN_RNN_CELL_LSTM, 17, 130, 0, 0.0f, 3);
        rnn_cell_case(dev, SN_RNN_CELL_GRU, 17, 130, 0, 0.0f, 3);
    }
}

/*
 * One resample case: planes of (in...) to (out...) with `taps` taps per
 * axis, random in-range indices and weights, and every `outside`-th
 * output index of the last axis reading outside (index -1: fill).
 */
/* d's resampling of x (nx floats) by the table t (nt floats), both at
 * VIEW_OFF in their buffers, into ny floats on dev, against the
 * reference within tol (absolute and relative). */
static void resample_check(sn_device *dev, sn_resample_desc *d,
                           const float *x, size_t nx, const float *t,
                           size_t nt, size_t ny, const char *what, float tol)
{
    float *want = malloc(ny * sizeof *want), *got = malloc(ny * sizeof *got);
    cr_assert(want && got);
    sn_buffer *bx = make_buffer(dev, x, VIEW_OFF + nx);
    sn_buffer *bt = make_buffer(dev, t, VIEW_OFF + nt);
    sn_buffer *by = make_buffer(dev, NULL, ny);
    d->x = (sn_view){bx, VIEW_OFF};
    d->table = (sn_view){bt, VIEW_OFF};
    d->y = (sn_view){by, 0};
    cr_assert_eq(sn_resample(dev, d), SHARDNET_OK, "%s: %s", dev->info.name,
                 shardnet_last_error());
    read_back(by, got, ny);
    ref_resample(d, x + VIEW_OFF, t + VIEW_OFF, want);
    expect_close(dev, what, got, want, ny, tol, tol);
    sn_buffer_free(bx);
    sn_buffer_free(bt);
    sn_buffer_free(by);
    free(want);
    free(got);
}

static void resample_case(sn_device *dev, size_t planes, size_t rank,
                          const size_t *in, const size_t *out,
                          const size_t *taps, size_t outside)
{
    sn_resample_desc d = {.planes = planes, .rank = rank, .fill = 7.5f};
    size_t nx = planes, ny = planes, nt = 0;
    for (size_t i = 0; i < rank; i++) {
        d.in[i] = in[i];
        d.out[i] = out[i];
        d.taps[i] = taps[i];
        d.table_off[i] = nt;
        nt += 2 * out[i] * taps[i];
        nx *= in[i];
        ny *= out[i];
    }
    d.table_len = nt;
    float *x = random_floats(VIEW_OFF + nx, 91, -1.0f, 1.0f);
    float *t = random_floats(VIEW_OFF + nt, 92, 0.0f, 1.0f);
    for (size_t i = 0; i < rank; i++)
        for (size_t e = 0; e < out[i] * taps[i]; e++) {
            float *pair = t + VIEW_OFF + d.table_off[i] + 2 * e;
            pair[0] = (float)((e * 7 + i) % in[i]);
            if (outside && i + 1 == rank && (e / taps[i]) % outside == 1)
                pair[0] = -1.0f;
        }
    char what[96];
    snprintf(what, sizeof what, "resample rank %zu, %zu planes, %zu taps",
             rank, planes, taps[rank - 1]);
    resample_check(dev, &d, x, nx, t, nt, ny, what, 1e-5f);
    free(x);
    free(t);
}

Test(kernels, resample_sums_weighted_taps_per_axis_and_fills_outside)
{
    /* nearest-like (1 tap), bilinear (2), bicubic (4), 3-D with unequal
     * taps, a large image for the parallel path, out-of-range taps */
    static const size_t in2[] = {5, 7}, out2[] = {10, 3};
    static const size_t t1[] = {1, 1}, t2[] = {2, 2}, t4[] = {4, 4};
    static const size_t in3[] = {3, 4, 5}, out3[] = {6, 2, 9},
                        t3[] = {1, 3, 2};
    static const size_t inb[] = {64, 96}, outb[] = {128, 192};
    static const size_t in1[] = {6}, out1[] = {13}, tw[] = {5};
    /* a large downsampling: the taps decoded per element */
    static const size_t ind[] = {3, 200}, outd[] = {2, 3};
    FOR_EACH_DEVICE(dev)
    {
        resample_case(dev, 3, 2, in2, out2, t1, 0);
        resample_case(dev, 2, 2, in2, out2, t2, 0);
        resample_case(dev, 1, 2, in2, out2, t4, 3);
        resample_case(dev, 2, 3, in3, out3, t3, 0);
        resample_case(dev, 3, 2, inb, outb, t2, 0);
        resample_case(dev, 4, 1, in1, out1, tw, 4);
        resample_case(dev, 2, 2, ind, outd, t2, 0);
        resample_case(dev, 2, 2, ind, outd, t2, 2);
    }
}

/* Nearest upsampling by whole factors f (output o reads input o / f on
 * every axis, weight 1), as Resize and Upsample lower it: the copy paths
 * (a row read twice, each element f times over); with `hole`, leading
 * row 1 of every plane reads outside (a fill row between rows that read
 * the same input row). */
static void upsample_case(sn_device *dev, size_t planes, size_t rank,
                          const size_t *in, const size_t *f, int hole)
{
    sn_resample_desc d = {.planes = planes, .rank = rank, .fill = 7.5f};
    size_t nx = planes, ny = planes, nt = 0;
    for (size_t i = 0; i < rank; i++) {
        d.in[i] = in[i];
        d.out[i] = in[i] * f[i];
        d.taps[i] = 1;
        d.table_off[i] = nt;
        nt += 2 * d.out[i];
        nx *= in[i];
        ny *= d.out[i];
    }
    d.table_len = nt;
    float *x = random_floats(VIEW_OFF + nx, 93, -1.0f, 1.0f);
    float *t = random_floats(VIEW_OFF + nt, 94, 0.0f, 1.0f);
    for (size_t i = 0; i < rank; i++)
        for (size_t o = 0; o < d.out[i]; o++) {
            float *pair = t + VIEW_OFF + d.table_off[i] + 2 * o;
            pair[0] = (float)(o / f[i]);
            pair[1] = 1.0f;
            if (hole && rank > 1 && i == 0 && o == 1)
                pair[0] = (float)in[0];
        }
    char what[96];
    snprintf(what, sizeof what, "upsample rank %zu x%zu, %zu planes%s", rank,
             f[rank - 1], planes, hole ? ", a fill row" : "");
    resample_check(dev, &d, x, nx, t, nt, ny, what, 0.0f);
    free(x);
    free(t);
}

Test(kernels, resample_upsamples_by_whole_factors_exactly)
{
    /* factor 2 with rows of 16 and more and a tail, 3, 1 along the rows,
     * 3-D, a large image for the parallel path */
    static const size_t in2[] = {5, 23}, f22[] = {2, 2}, f33[] = {3, 3},
                        f12[] = {1, 2}, f21[] = {2, 1};
    static const size_t in3[] = {3, 4, 9}, f3[] = {2, 2, 2};
    static const size_t inb[] = {40, 40};
    FOR_EACH_DEVICE(dev)
    {
        for (int hole = 0; hole < 2; hole++) {
            upsample_case(dev, 3, 2, in2, f22, hole);
            upsample_case(dev, 2, 2, in2, f33, hole);
            upsample_case(dev, 2, 2, in2, f12, hole);
            upsample_case(dev, 2, 2, in2, f21, hole);
            upsample_case(dev, 2, 3, in3, f3, hole);
            upsample_case(dev, 24, 2, inb, f22, hole);
        }
        upsample_case(dev, 4, 1, in2 + 1, f22, 0);
    }
}

Test(kernels, resample_refuses_taps_past_the_table)
{
    FOR_EACH_DEVICE(dev)
    {
        sn_buffer *b = make_buffer(dev, NULL, 64);
        sn_resample_desc d = {.planes = 1, .rank = 1, .in = {4},
                              .out = {8}, .taps = {2}, .table_len = 32,
                              .x = {b, 0}, .table = {b, 0}, .y = {b, 32}};
        cr_assert_eq(sn_resample(dev, &d), SHARDNET_OK, "%s: %s",
                     dev->info.name, shardnet_last_error());
        d.table_len = 31;
        cr_expect_eq(sn_resample(dev, &d), SHARDNET_INVALID_ARGUMENT);
        d.table_len = 32;
        d.in[0] = (size_t)1 << 24;
        cr_expect_eq(sn_resample(dev, &d), SHARDNET_INVALID_ARGUMENT);
        d.in[0] = 4;
        d.taps[0] = SN_RESAMPLE_MAX_TAPS + 1;
        cr_expect_eq(sn_resample(dev, &d), SHARDNET_INVALID_ARGUMENT);
        cr_assert_eq(sn_synchronize(dev), SHARDNET_OK);
        sn_buffer_free(b);
    }
}

/* GridSample of 2 x 3 images of 5 x 7 at a 4 x 6 grid reaching past the
 * edges, in one mode, padding and alignment. */
static void grid_sample_case(sn_device *dev, sn_grid_mode mode,
                             sn_grid_padding pad, int align)
{
    sn_grid_sample_desc d = {.mode = mode, .padding = pad,
                             .align_corners = align, .batch = 2,
                             .channels = 3, .in_h = 5, .in_w = 7,
                             .out_h = 4, .out_w = 6};
    const size_t nx = 2 * 3 * 5 * 7, ng = 2 * 4 * 6 * 2, ny = 2 * 3 * 4 * 6;
    float *x = random_floats(VIEW_OFF + nx, 101, -1.0f, 1.0f);
    float *g = random_floats(VIEW_OFF + ng, 102, -1.4f, 1.4f);
    float *want = malloc(ny * sizeof *want), *got = malloc(ny * sizeof *got);
    cr_assert(want && got);
    g[VIEW_OFF] = g[VIEW_OFF + 1] = -1.0f; /* corners and a centre exactly */
    g[VIEW_OFF + 2] = g[VIEW_OFF + 3] = 1.0f;
    g[VIEW_OFF + 4] = g[VIEW_OFF + 5] = 0.0f;
    sn_buffer *bx = make_buffer(dev, x, VIEW_OFF + nx);
    sn_buffer *bg = make_buffer(dev, g, VIEW_OFF + ng);
    sn_buffer *by = make_buffer(dev, NULL, ny);
    d.x = (sn_view){bx, VIEW_OFF};
    d.grid = (sn_view){bg, VIEW_OFF};
    d.y = (sn_view){by, 0};
    cr_assert_eq(sn_grid_sample(dev, &d), SHARDNET_OK, "%s: %s",
                 dev->info.name, shardnet_last_error());
    read_back(by, got, ny);
    ref_grid_sample(&d, x + VIEW_OFF, g + VIEW_OFF, want);
    char what[96];
    snprintf(what, sizeof what, "grid sample mode %d padding %d align %d",
             (int)mode, (int)pad, align);
    expect_close(dev, what, got, want, ny, 1e-4f, 1e-5f);
    sn_buffer_free(bx);
    sn_buffer_free(bg);
    sn_buffer_free(by);
    free(x);
    free(g);
    free(want);
    free(got);
}

Test(kernels, grid_sample_in_every_mode_padding_and_alignment)
{
    FOR_EACH_DEVICE(dev)
    {
        for (int m = 0; m < 3; m++)
            for (int p = 0; p < 3; p++)
                for (int a = 0; a < 2; a++)
                    grid_sample_case(dev, (sn_grid_mode)m,
                                     (sn_grid_padding)p, a);
    }
}

/* RoiAlign of 4 regions (one past the image, one of a batch index out of
 * range) over 2 x 3 images of 9 x 11. */
static void roi_align_case(sn_device *dev, int max_mode, int half_pixel,
                           size_t ratio)
{
    sn_roi_align_desc d = {.max_mode = max_mode, .half_pixel = half_pixel,
                           .batch = 2, .channels = 3, .in_h = 9, .in_w = 11,
                           .nrois = 4, .out_h = 3, .out_w = 2,
                           .sampling_ratio = ratio, .spatial_scale = 0.5f};
    static const float rois[] = {0, 0, 20, 16, 3, 2, 9, 13,
                                 -4, 10, 30, 40, 1, 1, 2, 2};
    static const float bidx[] = {0, 1, 1, 7};
    const size_t nx = 2 * 3 * 9 * 11, ny = 4 * 3 * 3 * 2;
    float *x = random_floats(VIEW_OFF + nx, 111, -1.0f, 1.0f);
    float *want = malloc(ny * sizeof *want), *got = malloc(ny * sizeof *got);
    cr_assert(want && got);
    sn_buffer *bx = make_buffer(dev, x, VIEW_OFF + nx);
    sn_buffer *br = make_buffer(dev, rois, 16);
    sn_buffer *bb = make_buffer(dev, bidx, 4);
    sn_buffer *by = make_buffer(dev, NULL, ny);
    d.x = (sn_view){bx, VIEW_OFF};
    d.rois = (sn_view){br, 0};
    d.batch_idx = (sn_view){bb, 0};
    d.y = (sn_view){by, 0};
    cr_assert_eq(sn_roi_align(dev, &d), SHARDNET_OK, "%s: %s",
                 dev->info.name, shardnet_last_error());
    read_back(by, got, ny);
    ref_roi_align(&d, x + VIEW_OFF, rois, bidx, want);
    char what[96];
    snprintf(what, sizeof what, "RoI align %s%s, ratio %zu",
             max_mode ? "max" : "avg", half_pixel ? " half pixel" : "",
             ratio);
    expect_close(dev, what, got, want, ny, 1e-4f, 1e-5f);
    sn_buffer_free(bx);
    sn_buffer_free(br);
    sn_buffer_free(bb);
    sn_buffer_free(by);
    free(x);
    free(want);
    free(got);
}

Test(kernels, roi_align_averages_or_maxes_bilinear_samples_per_bin)
{
    FOR_EACH_DEVICE(dev)
    {
        for (int m = 0; m < 2; m++)
            for (int h = 0; h < 2; h++) {
                roi_align_case(dev, m, h, 0);
                roi_align_case(dev, m, h, 2);
            }
    }
}

/* Depthwise convolution over the window cases: two images, a channel
 * multiplier of 1 or 2, with and without bias and Relu. */
/* with_bias: 0 neither, 1 a bias and a Relu, 2 a bias and a Relu6 (the
 * weights then in [-4, 4], so that sums pass 6). */
static void dwconv_case(sn_device *dev, const window_case *c, size_t mult,
                        int with_bias)
{
    sn_dwconv_desc d = {
        .images = 2, .channels = c->ch, .mult = mult, .in_h = c->in_h,
        .in_w = c->in_w, .k_h = c->k_h, .k_w = c->k_w, .stride_h = c->s_h,
        .stride_w = c->s_w, .dil_h = c->d_h, .dil_w = c->d_w,
        .pad_top = c->pt, .pad_left = c->pl, .act = (sn_act)with_bias,
    };
    const float wmax = with_bias == 2 ? 4.0f : 1.0f;
    d.out_h = out_size(c->in_h, c->k_h, c->s_h, c->d_h, c->pt, c->pb,
                       c->ceil_mode);
    d.out_w = out_size(c->in_w, c->k_w, c->s_w, c->d_w, c->pl, c->pr,
                       c->ceil_mode);
    const size_t och = c->ch * mult;
    const size_t ns = 2 * c->ch * c->in_h * c->in_w;
    const size_t nw = och * c->k_h * c->k_w;
    const size_t nd = 2 * och * d.out_h * d.out_w;
    float *src = random_floats(VIEW_OFF + ns, 93, -1.0f, 1.0f);
    float *w = random_floats(VIEW_OFF + nw, 94, -wmax, wmax);
    float *bias = random_floats(VIEW_OFF + och, 95, -1.0f, 1.0f);
    float *want = malloc(nd * sizeof *want), *got = malloc(nd * sizeof *got);
    cr_assert(want && got);
    sn_buffer *bs = make_buffer(dev, src, VIEW_OFF + ns);
    sn_buffer *bw = make_buffer(dev, w, VIEW_OFF + nw);
    sn_buffer *bb = with_bias ? make_buffer(dev, bias, VIEW_OFF + och) : NULL;
    sn_buffer *bd = make_buffer(dev, NULL, VIEW_OFF + nd);
    d.src = (sn_view){bs, VIEW_OFF};
    d.weights = (sn_view){bw, VIEW_OFF};
    d.bias = (sn_view){bb, VIEW_OFF};
    d.dst = (sn_view){bd, VIEW_OFF};
    cr_assert_eq(sn_dwconv(dev, &d), SHARDNET_OK, "%s: %s", dev->info.name,
                 shardnet_last_error());
    cr_assert_eq(sn_synchronize(dev), SHARDNET_OK);
    cr_assert_eq(sn_buffer_read(bd, VIEW_OFF * sizeof(float), got,
                                nd * sizeof(float)),
                 SHARDNET_OK);
    ref_dwconv(&d, src + VIEW_OFF, w + VIEW_OFF,
               with_bias ? bias + VIEW_OFF : NULL, want);
    char what[128];
    snprintf(what, sizeof what,
             "dwconv C=%zu x%zu %zux%zu k %zux%zu -> %zux%zu%s", c->ch, mult,
             c->in_h, c->in_w, c->k_h, c->k_w, d.out_h, d.out_w,
             with_bias == 2 ? " bias relu6" : with_bias ? " bias relu" : "");
    /* the same sum in the same order; FMAs may round differently */
    expect_close(dev, what, got, want, nd, 1e-5f, 1e-5f);
    sn_buffer_free(bs);
    sn_buffer_free(bw);
    sn_buffer_free(bb);
    sn_buffer_free(bd);
    free(src);
    free(w);
    free(bias);
    free(want);
    free(got);
}

Test(kernels, dwconv_with_pads_strides_dilations_multiplier_and_bias)
{
    FOR_EACH_DEVICE(dev)
    {
        for (size_t i = 0; i < sizeof window_cases / sizeof window_cases[0];
             i++)
            for (size_t mult = 1; mult <= 2; mult++)
                for (int b = 0; b < 3; b++)
                    dwconv_case(dev, &window_cases[i], mult, b);
    }
}
