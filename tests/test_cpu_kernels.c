/*
 * The CPU kernels of cpu/, called directly (no backend, no device), checked
 * against the plain C reference in ref.c with one and with several OpenMP
 * threads.
 */
#include <config.h>

#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "ref.h"

#define ARRAY_LEN(x) (sizeof(x) / sizeof((x)[0]))

/* Team sizes every parallel kernel is run with (3 oversubscribes 2 cores on
 * purpose: the partitions must not assume a power of two). */
static const int team_sizes[] = {1, 2, 3};

static float *alloc_floats(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    cr_assert_not_null(p, "out of memory for %zu floats", n);
    return p;
}

static float *copy_floats(const float *x, size_t n)
{
    float *p = alloc_floats(n);
    memcpy(p, x, n * sizeof *p);
    return p;
}

static void fill_value(float *x, size_t n, float v)
{
    for (size_t i = 0; i < n; i++)
        x[i] = v;
}

/* ---- gemm ---------------------------------------------------------------- */

typedef struct gemm_case {
    size_t m, n, k;
    int ta, tb;
    size_t pad; /* extra elements at the end of every row of A, B and C */
    size_t batch;
    int shared_b; /* stride_b = 0: every item uses the same B */
    float alpha, beta;
    int nan_c; /* C starts as NaN (with beta == 0 it must not leak) */
    int bias;  /* 0: none; 1: n floats, one per column; 2: m, one per row */
    sn_act act;
    int b_const; /* sets the descriptor's b_const */
    int res;     /* a residual laid out as C, added after the bias */
    /* 0: sn_cpu_gemm; 1: the AVX-512 kernel packing B per call;
     * 2: the AVX-512 kernel on a B packed beforehand (sn_cpu_pack_b);
     * 3: the small-product kernel (sn_cpu_sgemm_small);
     * 4: the AVX-512 kernel reading B in place (sn_cpu_sgemm_avx512_direct);
     * 5: one row's dot products with B's rows (sn_cpu_sgemm_avx512_dot). */
    int kernel;
} gemm_case;

/* One gemm case, run with `threads` OpenMP threads; compares the whole of C,
 * padding and gaps between batch items included (they must be untouched). */
static void check_gemm(const gemm_case *g, int threads)
{
    const size_t ar = g->ta ? g->k : g->m, ac = g->ta ? g->m : g->k;
    const size_t br = g->tb ? g->n : g->k, bc = g->tb ? g->k : g->n;
    sn_gemm_desc d = {
        .trans_a = g->ta, .trans_b = g->tb,
        .m = g->m, .n = g->n, .k = g->k,
        .alpha = g->alpha, .beta = g->beta,
        .lda = ac + g->pad, .ldb = bc + g->pad, .ldc = g->n + g->pad,
        .batch = g->batch,
        .bias_rows = g->bias == 2,
        .act = g->act,
        .b_const = g->b_const,
    };
    size_t na, nb, nc;
    float *a, *b, *got, *want, *bias = NULL, *res = NULL;
    char msg[256];
    int bad;

    /* Batch items with a small gap between them. */
    d.stride_a = ar * d.lda + 3;
    d.stride_b = g->shared_b ? 0 : br * d.ldb + 5;
    d.stride_c = g->m * d.ldc + 7;
    na = (g->batch - 1) * d.stride_a + ar * d.lda;
    nb = (g->batch - 1) * d.stride_b + br * d.ldb;
    nc = (g->batch - 1) * d.stride_c + g->m * d.ldc;

    a = alloc_floats(na);
    b = alloc_floats(nb);
    got = alloc_floats(nc);
    ref_fill_random(a, na, 11u + (unsigned)g->m, -1.0f, 1.0f);
    ref_fill_random(b, nb, 23u + (unsigned)g->n, -1.0f, 1.0f);
    if (g->nan_c)
        fill_value(got, nc, NAN);
    else
        ref_fill_random(got, nc, 37u + (unsigned)g->k, -1.0f, 1.0f);
    want = copy_floats(got, nc);
    if (g->bias) {
        const size_t nbias = g->bias == 2 ? g->m : g->n;
        bias = alloc_floats(nbias);
        ref_fill_random(bias, nbias, 41u, -1.0f, 1.0f);
    }
    if (g->res) {
        res = alloc_floats(nc);
        ref_fill_random(res, nc, 43u, -1.0f, 1.0f);
    }

    omp_set_num_threads(threads);
    sn_cpu_gemm_init();
    if (g->kernel == 0) {
        sn_cpu_gemm(&d, a, b, got, bias, res);
    } else if (g->kernel == 1) {
        cr_assert(sn_cpu_sgemm_avx512(&d, a, b, got, bias, res),
                  "sn_cpu_sgemm_avx512: out of memory");
    } else if (g->kernel == 4) {
        sn_cpu_sgemm_avx512_direct(&d, a, b, got, bias, res);
    } else if (g->kernel == 5) {
        cr_assert(sn_cpu_sgemm_avx512_dot_takes(&d), "the dot kernel refuses "
                  "m=%zu n=%zu k=%zu", g->m, g->n, g->k);
        sn_cpu_sgemm_avx512_dot(&d, a, b, got, bias, res);
    } else if (g->kernel == 3) {
        cr_assert(sn_cpu_sgemm_small_takes(&d), "the small kernel refuses "
                  "m=%zu n=%zu k=%zu", g->m, g->n, g->k);
        sn_cpu_sgemm_small(&d, a, b, got, bias, res);
    } else {
        sn_cpu_packed_b *pb = sn_cpu_packed_b_alloc(d.k, d.n);
        cr_assert_not_null(pb, "sn_cpu_packed_b_alloc: out of memory");
        sn_cpu_pack_b(pb, &d, b);
        sn_cpu_sgemm_avx512_packed(&d, a, pb, got, bias, res);
        sn_cpu_packed_b_free(pb);
    }
    ref_gemm(&d, a, b, want, bias, res);

    bad = ref_compare(got, want, nc, 1e-4f, 1e-4f, msg, sizeof msg);
    cr_assert_eq(bad, 0,
                 "gemm m=%zu n=%zu k=%zu ta=%d tb=%d pad=%zu batch=%zu "
                 "shared_b=%d alpha=%g beta=%g nan_c=%d bias=%d act=%d "
                 "b_const=%d res=%d kernel=%d threads=%d: %s",
                 g->m, g->n, g->k, g->ta, g->tb, g->pad, g->batch, g->shared_b,
                 (double)g->alpha, (double)g->beta, g->nan_c, g->bias,
                 (int)g->act, g->b_const, g->res, g->kernel, threads, msg);
    free(bias);
    free(res);
    free(a);
    free(b);
    free(got);
    free(want);
}

static void check_gemm_all_teams(const gemm_case *g)
{
    for (size_t t = 0; t < ARRAY_LEN(team_sizes); t++)
        check_gemm(g, team_sizes[t]);
}

Test(cpu_gemm, matches_reference_on_odd_shapes)
{
    static const size_t shapes[][3] = {
        {1, 1, 1}, {7, 13, 5}, {513, 257, 129}, {257, 513, 65}, {3, 200, 700}};
    for (size_t i = 0; i < ARRAY_LEN(shapes); i++) {
        gemm_case g = {.m = shapes[i][0], .n = shapes[i][1],
                       .k = shapes[i][2], .batch = 1, .alpha = 1.0f};
        check_gemm_all_teams(&g);
    }
}

Test(cpu_gemm, matches_reference_for_a_single_row_times_a_matrix)
{
    for (int ta = 0; ta < 2; ta++) {
        for (int tb = 0; tb < 2; tb++) {
            gemm_case g = {.m = 1, .n = 1024, .k = 1000, .ta = ta, .tb = tb,
                           .batch = 1, .alpha = 1.0f};
            check_gemm_all_teams(&g);
        }
    }
}

Test(cpu_gemm, matches_reference_for_a_matrix_times_a_column)
{
    for (int ta = 0; ta < 2; ta++) {
        for (int tb = 0; tb < 2; tb++) {
            gemm_case g = {.m = 1000, .n = 1, .k = 300, .ta = ta, .tb = tb,
                           .batch = 1, .alpha = 1.0f};
            check_gemm_all_teams(&g);
        }
    }
}

Test(cpu_gemm, matches_reference_for_all_four_transpose_combinations)
{
    static const size_t shapes[][3] = {{7, 13, 5}, {65, 70, 33},
                                       {200, 130, 90}, {130, 200, 90}};
    for (size_t i = 0; i < ARRAY_LEN(shapes); i++) {
        for (int ta = 0; ta < 2; ta++) {
            for (int tb = 0; tb < 2; tb++) {
                gemm_case g = {.m = shapes[i][0], .n = shapes[i][1],
                               .k = shapes[i][2], .ta = ta, .tb = tb,
                               .batch = 1, .alpha = 1.0f};
                check_gemm_all_teams(&g);
            }
        }
    }
}

Test(cpu_gemm, honours_leading_dimensions_larger_than_minimal)
{
    static const size_t shapes[][3] = {
        {7, 13, 5}, {100, 90, 80}, {1, 300, 200}, {300, 1, 200}};
    for (size_t i = 0; i < ARRAY_LEN(shapes); i++) {
        for (int ta = 0; ta < 2; ta++) {
            for (int tb = 0; tb < 2; tb++) {
                gemm_case g = {.m = shapes[i][0], .n = shapes[i][1],
                               .k = shapes[i][2], .ta = ta, .tb = tb,
                               .pad = 9, .batch = 1, .alpha = 1.0f};
                check_gemm_all_teams(&g);
            }
        }
    }
}

Test(cpu_gemm, computes_every_batch_item_with_own_or_shared_operands)
{
    static const size_t shapes[][3] = {{7, 13, 5}, {96, 80, 70}, {1, 256, 300}};
    static const size_t batches[] = {2, 3, 8, 9};
    for (size_t i = 0; i < ARRAY_LEN(shapes); i++) {
        for (size_t nb = 0; nb < ARRAY_LEN(batches); nb++) {
            for (int shared = 0; shared < 2; shared++) {
                gemm_case g = {.m = shapes[i][0], .n = shapes[i][1],
                               .k = shapes[i][2], .tb = shared, .pad = 2,
                               .batch = batches[nb], .shared_b = shared,
                               .alpha = 1.0f};
                check_gemm_all_teams(&g);
            }
        }
    }
}

Test(cpu_gemm, scales_by_alpha_and_adds_beta_times_c)
{
    static const size_t shapes[][3] = {
        {7, 13, 5}, {150, 120, 70}, {1, 500, 300}, {500, 1, 300}};
    for (size_t i = 0; i < ARRAY_LEN(shapes); i++) {
        gemm_case g = {.m = shapes[i][0], .n = shapes[i][1], .k = shapes[i][2],
                       .pad = 1, .batch = 3, .alpha = 0.5f, .beta = 0.25f};
        check_gemm_all_teams(&g);
    }
}

Test(cpu_gemm, overwrites_nan_in_c_when_beta_is_zero)
{
    static const size_t shapes[][3] = {
        {1, 1, 1},   {7, 13, 5},   {513, 257, 129},
        {1, 1024, 1000}, {600, 1, 300}};
    for (size_t i = 0; i < ARRAY_LEN(shapes); i++) {
        for (int ta = 0; ta < 2; ta++) {
            gemm_case g = {.m = shapes[i][0], .n = shapes[i][1],
                           .k = shapes[i][2], .ta = ta, .tb = !ta, .pad = 3,
                           .batch = 2, .alpha = 0.5f, .beta = 0.0f,
                           .nan_c = 1};
            check_gemm_all_teams(&g);
        }
    }
}

Test(cpu_gemm, adds_bias_per_column_or_per_row_then_applies_relu)
{
    /* sgemm blocks split by rows and by columns, and both sgemv paths. */
    static const size_t shapes[][3] = {
        {7, 13, 5}, {513, 257, 129}, {130, 300, 40}, {1, 300, 77}, {300, 1, 77}};
    for (size_t i = 0; i < ARRAY_LEN(shapes); i++) {
        for (int bias = 0; bias < 3; bias++) {
            for (int act = 0; act < 2; act++) {
                gemm_case g = {.m = shapes[i][0], .n = shapes[i][1],
                               .k = shapes[i][2], .tb = (int)(i & 1),
                               .pad = 2, .batch = 3, .alpha = 0.5f,
                               .beta = act ? 0.0f : 0.25f, .nan_c = act,
                               .bias = bias, .act = (sn_act)act};
                check_gemm_all_teams(&g);
                /* a residual too, also through BLAS (transposed A) */
                g.res = 1;
                g.ta = act;
                check_gemm_all_teams(&g);
            }
        }
    }
}

Test(cpu_gemm, applies_the_epilogue_to_every_batch_item_and_no_padding)
{
    /* Many small items: whole items per thread. */
    gemm_case g = {.m = 9, .n = 17, .k = 40, .pad = 3, .batch = 16,
                   .alpha = 1.0f, .bias = 2, .act = SN_ACT_RELU};
    check_gemm_all_teams(&g);
    g.bias = 1;
    g.shared_b = 1;
    check_gemm_all_teams(&g);
    g.res = 1;
    check_gemm_all_teams(&g);
}

/* ---- binary -------------------------------------------------------------- */

/* Op names from the X-macro (lib/backend/kernels.c is not linked into this test). */
static const char *binary_name(sn_binary_op op)
{
    static const char *const names[] = {
#define NAME_(name, str) str,
        SN_BINARY_OP_MAP(NAME_)
#undef NAME_
    };
    return (unsigned)op < ARRAY_LEN(names) ? names[op] : "?";
}

static const char *unary_name(sn_unary_op op)
{
    static const char *const names[] = {
#define NAME_(name, str) str,
        SN_UNARY_OP_MAP(NAME_)
#undef NAME_
    };
    return (unsigned)op < ARRAY_LEN(names) ? names[op] : "?";
}

static const char *reduce_name(sn_reduce_op op)
{
    static const char *const names[] = {
#define NAME_(name, str) str,
        SN_REDUCE_OP_MAP(NAME_)
#undef NAME_
    };
    return (unsigned)op < ARRAY_LEN(names) ? names[op] : "?";
}

/* Numpy broadcasting of two contiguous shapes into d, dimension by
 * dimension (unlike sn_binary_broadcast, nothing is merged). */
static void broadcast(sn_binary_desc *d, size_t ra, const size_t *sa,
                      size_t rb, const size_t *sb)
{
    size_t rank = ra > rb ? ra : rb, acc_a = 1, acc_b = 1;

    cr_assert_leq(rank, SN_MAX_DIMS);
    d->rank = rank;
    for (size_t i = 0; i < rank; i++) {
        size_t da = i < ra ? sa[ra - 1 - i] : 1;
        size_t db = i < rb ? sb[rb - 1 - i] : 1;
        size_t j = rank - 1 - i;
        cr_assert(da == db || da == 1 || db == 1,
                  "test bug: shapes do not broadcast");
        d->shape[j] = da > db ? da : db;
        d->stride_a[j] = da == 1 ? 0 : acc_a;
        d->stride_b[j] = db == 1 ? 0 : acc_b;
        acc_a *= da;
        acc_b *= db;
    }
}

static size_t product(size_t rank, const size_t *shape)
{
    size_t n = 1;
    for (size_t i = 0; i < rank; i++)
        n *= shape[i];
    return n;
}

/* Elements of a or b that d reads: 1 + sum (shape - 1) * stride. */
static size_t extent(const sn_binary_desc *d, const size_t *stride)
{
    size_t e = 1;
    for (size_t i = 0; i < d->rank; i++)
        e += (d->shape[i] - 1) * stride[i];
    return e;
}

/* Inputs in the domain where the op is well-conditioned and finite. */
static void fill_operands(sn_binary_op op, float *a, size_t na, float *b,
                          size_t nb)
{
    ref_fill_random(a, na, 101u, -2.0f, 2.0f);
    ref_fill_random(b, nb, 202u, -2.0f, 2.0f);
    if (op == SN_BINARY_DIV)
        ref_fill_random(b, nb, 202u, 0.5f, 2.0f);
    if (op == SN_BINARY_POW)
        ref_fill_random(a, na, 101u, 0.1f, 3.0f);
}

/* Run op on d (shape and strides filled in) with fresh random operands. */
static void check_binary_desc(sn_binary_desc *d, const char *what)
{
    const size_t na = extent(d, d->stride_a), nb = extent(d, d->stride_b);
    const size_t nc = product(d->rank, d->shape);
    float *a = alloc_floats(na), *b = alloc_floats(nb);
    float *got = alloc_floats(nc), *want = alloc_floats(nc);
    char msg[256];

    fill_operands(d->op, a, na, b, nb);
    ref_binary(d, a, b, want);
    for (size_t t = 0; t < ARRAY_LEN(team_sizes); t++) {
        int bad;
        fill_value(got, nc, NAN);
        omp_set_num_threads(team_sizes[t]);
        sn_cpu_binary(d, a, b, got);
        bad = ref_compare(got, want, nc, 2e-6f, 1e-7f, msg, sizeof msg);
        cr_assert_eq(bad, 0, "%s %s, threads=%d: %s", what,
                     binary_name(d->op), team_sizes[t], msg);
    }
    free(a);
    free(b);
    free(got);
    free(want);
}

/* c = a op b for every op, shapes broadcast numpy-style. */
static void check_broadcast(size_t ra, const size_t *sa, size_t rb,
                            const size_t *sb, const char *what)
{
    for (int op = 0; op < SN_BINARY_COUNT; op++) {
        sn_binary_desc d = {.op = (sn_binary_op)op};
        broadcast(&d, ra, sa, rb, sb);
        check_binary_desc(&d, what);
    }
}

Test(cpu_binary, matches_reference_with_broadcasting)
{
    static const size_t a1[] = {3, 1, 5}, b1[] = {4, 1};
    static const size_t a2[] = {2, 3};
    static const size_t a3[] = {1}, b3[] = {5};
    static const size_t a4[] = {2, 1, 4, 1}, b4[] = {3, 1, 5};
    check_broadcast(3, a1, 2, b1, "(3,1,5) by (4,1)");
    check_broadcast(2, a2, 0, NULL, "(2,3) by ()");
    check_broadcast(1, a3, 1, b3, "(1,) by (5,)");
    check_broadcast(4, a4, 3, b4, "(2,1,4,1) by (3,1,5)");
    check_broadcast(3, b4, 4, a4, "(3,1,5) by (2,1,4,1)");
}

Test(cpu_binary, matches_reference_on_contiguous_operands_of_equal_shape)
{
    static const size_t small[] = {3, 7}, large[] = {100003};
    static const size_t rank8[] = {2, 3, 1, 2, 5, 1, 3, 2};
    check_broadcast(2, small, 2, small, "(3,7) by (3,7)");
    check_broadcast(1, large, 1, large, "(100003,) by (100003,)");
    check_broadcast(8, rank8, 8, rank8, "rank 8 by rank 8");
}

Test(cpu_binary, matches_reference_with_a_scalar_on_either_side)
{
    static const size_t small[] = {5}, large[] = {300, 401};
    check_broadcast(1, small, 0, NULL, "(5,) by ()");
    check_broadcast(0, NULL, 1, small, "() by (5,)");
    check_broadcast(2, large, 0, NULL, "(300,401) by ()");
    check_broadcast(0, NULL, 2, large, "() by (300,401)");
}

Test(cpu_binary, matches_reference_on_large_broadcasts_split_between_threads)
{
    static const size_t a1[] = {64, 1, 129}, b1[] = {37, 1};
    static const size_t a2[] = {33, 1, 7, 1, 9}, b2[] = {5, 1, 11, 1};
    static const size_t a3[] = {40000, 1}, b3[] = {1, 3};
    check_broadcast(3, a1, 2, b1, "(64,1,129) by (37,1)");
    check_broadcast(5, a2, 4, b2, "(33,1,7,1,9) by (5,1,11,1)");
    check_broadcast(2, a3, 2, b3, "(40000,1) by (1,3)");
}

Test(cpu_binary, computes_one_element_at_rank_zero)
{
    for (int op = 0; op < SN_BINARY_COUNT; op++) {
        sn_binary_desc d = {.op = (sn_binary_op)op, .rank = 0};
        check_binary_desc(&d, "() by ()");
    }
}

Test(cpu_binary, follows_strides_that_are_neither_zero_nor_one)
{
    /* a is a transposed view: stored (cols, rows), read as (rows, cols). */
    static const size_t dims[][2] = {{5, 7}, {300, 200}};
    for (size_t i = 0; i < ARRAY_LEN(dims); i++) {
        for (int op = 0; op < SN_BINARY_COUNT; op++) {
            sn_binary_desc d = {
                .op = (sn_binary_op)op, .rank = 2,
                .shape = {dims[i][0], dims[i][1]},
                .stride_a = {1, dims[i][0]},
                .stride_b = {dims[i][1], 1},
            };
            check_binary_desc(&d, "transposed a by b");
            /* and b broadcast along rows while read with stride 2 */
            d.stride_b[0] = 0;
            d.stride_b[1] = 2;
            check_binary_desc(&d, "transposed a by strided row b");
        }
    }
}

Test(cpu_binary, max_and_min_ignore_a_nan_operand_like_fmaxf)
{
    const float a[] = {NAN, 1.0f, NAN, -3.0f};
    const float b[] = {2.0f, NAN, NAN, 4.0f};
    const float want_max[] = {2.0f, 1.0f, NAN, 4.0f};
    const float want_min[] = {2.0f, 1.0f, NAN, -3.0f};
    sn_binary_desc d = {.rank = 1, .shape = {4}, .stride_a = {1},
                        .stride_b = {1}};
    float got[4];
    char msg[256];

    d.op = SN_BINARY_MAX;
    sn_cpu_binary(&d, a, b, got);
    cr_assert_eq(ref_compare(got, want_max, 4, 0.0f, 0.0f, msg, sizeof msg),
                 0, "max: %s", msg);
    d.op = SN_BINARY_MIN;
    sn_cpu_binary(&d, a, b, got);
    cr_assert_eq(ref_compare(got, want_min, 4, 0.0f, 0.0f, msg, sizeof msg),
                 0, "min: %s", msg);
}

Test(cpu_binary, writes_in_place_over_an_operand_of_the_output_shape)
{
    static const size_t n = 50000;
    sn_binary_desc d = {.op = SN_BINARY_MUL, .rank = 1, .shape = {n},
                        .stride_a = {1}, .stride_b = {0}};
    float *a = alloc_floats(n), *want = alloc_floats(n);
    const float b = 1.5f;
    char msg[256];

    ref_fill_random(a, n, 5u, -1.0f, 1.0f);
    ref_binary(&d, a, &b, want);
    omp_set_num_threads(2);
    sn_cpu_binary(&d, a, &b, a);
    cr_assert_eq(ref_compare(a, want, n, 0.0f, 0.0f, msg, sizeof msg), 0,
                 "%s", msg);
    free(a);
    free(want);
}

/* ---- unary --------------------------------------------------------------- */

/* Inputs for op: [-5, 5] with an exact zero and negative zero, or positive
 * values only for LOG and SQRT. */
static void fill_unary_input(sn_unary_op op, float *x, size_t n)
{
    if (op == SN_UNARY_LOG || op == SN_UNARY_SQRT || op == SN_UNARY_ACOSH) {
        ref_fill_random(x, n, 303u, 1e-3f, 10.0f);
        x[0] = 1.0f;
        return;
    }
    if (op == SN_UNARY_ASIN || op == SN_UNARY_ACOS || op == SN_UNARY_ATANH) {
        ref_fill_random(x, n, 303u, -0.999f, 0.999f);
        return;
    }
    ref_fill_random(x, n, 303u, -5.0f, 5.0f);
    x[0] = 0.0f;
    if (n > 1)
        x[1] = -0.0f;
    if (n > 2)
        x[2] = -1.0f;
}

/* Parameters that make each op non-trivial (others ignore them). */
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

static void check_unary(sn_unary_op op, size_t n, int in_place)
{
    float *x = alloc_floats(n), *got = alloc_floats(n), *want = alloc_floats(n);
    sn_unary_desc d = {.op = op, .n = n};
    char msg[256];

    unary_params(&d);

    fill_unary_input(op, x, n);
    ref_unary(&d, x, want);
    for (size_t t = 0; t < ARRAY_LEN(team_sizes); t++) {
        int bad;
        omp_set_num_threads(team_sizes[t]);
        if (in_place) {
            memcpy(got, x, n * sizeof *got);
            sn_cpu_unary(&d, got, got);
        } else {
            fill_value(got, n, NAN);
            sn_cpu_unary(&d, x, got);
        }
        bad = ref_compare(got, want, n, 2e-6f, 1e-7f, msg, sizeof msg);
        cr_assert_eq(bad, 0, "%s n=%zu in_place=%d threads=%d: %s",
                     unary_name(op), n, in_place, team_sizes[t], msg);
    }
    free(x);
    free(got);
    free(want);
}

Test(cpu_unary, matches_reference_for_every_op)
{
    static const size_t sizes[] = {1, 1000, 100003};
    for (int op = 0; op < SN_UNARY_COUNT; op++)
        for (size_t i = 0; i < ARRAY_LEN(sizes); i++)
            check_unary((sn_unary_op)op, sizes[i], 0);
}

Test(cpu_unary, writes_in_place_when_y_is_x)
{
    for (int op = 0; op < SN_UNARY_COUNT; op++)
        check_unary((sn_unary_op)op, 70001, 1);
}

/* Error of got against the double-precision value want, in units of the
 * last place of want rounded to float (subnormal spacing below FLT_MIN). */
static double ulps(float got, double want)
{
    const float w = (float)fabs(want);
    const double ulp = w < FLT_MIN ? ldexp(1.0, -149)
                                   : (double)nextafterf(w, INFINITY) - w;
    return fabs((double)got - want) / ulp;
}

/* EXP and ERF (cpu/vmath.h) against double exp and erf over every 997th
 * float of their ranges, both signs: within 2 and 3 ulp. */
static void check_vmath(sn_unary_op op, float hi, double (*ref)(double),
                        double bound)
{
    enum { CHUNK = 4096 };
    float x[CHUNK], y[CHUNK];
    double worst = 0.0;
    float at = 0.0f;
    uint32_t top;
    memcpy(&top, &hi, sizeof top);
    size_t k = 0;
    for (uint32_t b = 0; b <= top; b += 997) {
        float v;
        memcpy(&v, &b, sizeof v);
        x[k++] = v;
        x[k++] = -v;
        if (k == CHUNK || b + 997 > top) {
            sn_unary_desc d = {.op = op, .n = k};
            sn_cpu_unary(&d, x, y);
            for (size_t i = 0; i < k; i++) {
                double e = ulps(y[i], ref((double)x[i]));
                if (e > worst) {
                    worst = e;
                    at = x[i];
                }
            }
            k = 0;
        }
    }
    cr_assert(worst <= bound, "%s: %.2f ulp at %.9g (bound %.1f)",
              unary_name(op), worst, (double)at, bound);
}

Test(cpu_unary, exp_and_erf_are_within_a_few_ulp)
{
    check_vmath(SN_UNARY_EXP, 88.7f, exp, 2.0); /* -88.7: subnormals */
    check_vmath(SN_UNARY_ERF, 4.5f, erf, 3.0);
}

Test(cpu_unary, handles_nan_and_infinities_like_the_reference)
{
    const float x[] = {NAN, INFINITY, -INFINITY, 0.0f, 88.0f, -104.0f};
    const size_t n = ARRAY_LEN(x);
    float got[ARRAY_LEN(x)], want[ARRAY_LEN(x)];
    char msg[256];

    for (int op = 0; op < SN_UNARY_COUNT; op++) {
        sn_unary_desc d = {.op = (sn_unary_op)op, .n = n};
        ref_unary(&d, x, want);
        sn_cpu_unary(&d, x, got);
        cr_assert_eq(ref_compare(got, want, n, 2e-6f, 1e-7f, msg, sizeof msg),
                     0, "%s: %s", unary_name(d.op), msg);
    }
}

Test(cpu_unary, parameterised_ops_follow_their_formulas)
{
    static const struct {
        sn_unary_op op;
        float alpha, beta;
        float x[6], y[6];
    } cases[] = {
        {SN_UNARY_LEAKY_RELU, 0.01f, 0.0f,
         {-2.0f, 3.0f, 0.0f, -0.5f, 1e-3f, NAN},
         {-0.02f, 3.0f, 0.0f, -0.005f, 1e-3f, NAN}},
        {SN_UNARY_HARD_SIGMOID, 0.2f, 0.5f,
         {-10.0f, 10.0f, 0.0f, 1.0f, -2.5f, NAN},
         {0.0f, 1.0f, 0.5f, 0.7f, 0.0f, NAN}},
        {SN_UNARY_CLIP, -1.0f, 1.0f,
         {-3.0f, 0.5f, 7.0f, -1.0f, INFINITY, NAN},
         {-1.0f, 0.5f, 1.0f, -1.0f, 1.0f, NAN}},
        /* min(max(x, 2), 1) is 1 whatever x is */
        {SN_UNARY_CLIP, 2.0f, 1.0f,
         {-3.0f, 0.5f, 7.0f, 1.5f, 2.0f, -INFINITY},
         {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f}},
        /* GELU(1) = Phi(1) = 0.841344746...; GELU_TANH(1) = 0.841191990... */
        {SN_UNARY_GELU, 0.0f, 0.0f,
         {0.0f, 1.0f, -1.0f, 10.0f, -10.0f, NAN},
         {0.0f, 0.841344746f, -0.158655254f, 10.0f, 0.0f, NAN}},
        {SN_UNARY_GELU_TANH, 0.0f, 0.0f,
         {0.0f, 1.0f, -1.0f, 10.0f, -10.0f, NAN},
         {0.0f, 0.841191990f, -0.158808009f, 10.0f, 0.0f, NAN}},
        /* issue 15's: halves to even, sign, ELU, SELU, CELU, shrink,
         * thresholded ReLU, hard swish, IsInf of +inf only */
        {SN_UNARY_ROUND, 0.0f, 0.0f,
         {0.5f, 1.5f, 2.5f, -2.5f, -0.4f, 2.6f},
         {0.0f, 2.0f, 2.0f, -2.0f, -0.0f, 3.0f}},
        {SN_UNARY_SIGN, 0.0f, 0.0f,
         {-3.0f, 0.0f, 2.0f, -INFINITY, 1e-30f, NAN},
         {-1.0f, 0.0f, 1.0f, -1.0f, 1.0f, NAN}},
        {SN_UNARY_ELU, 2.0f, 0.0f,
         {-1.0f, 0.0f, 3.0f, -INFINITY, -0.5f, NAN},
         {-1.26424112f, 0.0f, 3.0f, -2.0f, -0.786938681f, NAN}},
        {SN_UNARY_SELU, 2.0f, 3.0f,
         {-1.0f, 0.0f, 1.0f, -INFINITY, 2.0f, NAN},
         {-3.79272335f, 0.0f, 3.0f, -6.0f, 6.0f, NAN}},
        {SN_UNARY_CELU, 2.0f, 0.0f,
         {-1.0f, 0.0f, 3.0f, -INFINITY, 1.0f, NAN},
         {-0.786938681f, 0.0f, 3.0f, -2.0f, 1.0f, NAN}},
        {SN_UNARY_SHRINK, 1.5f, 0.5f,
         {-2.0f, -1.0f, 0.0f, 1.0f, 2.0f, NAN},
         {-1.5f, 0.0f, 0.0f, 0.0f, 1.5f, 0.0f}},
        {SN_UNARY_THRESHOLDED_RELU, 1.0f, 0.0f,
         {-2.0f, 1.0f, 1.5f, 0.5f, INFINITY, NAN},
         {0.0f, 0.0f, 1.5f, 0.0f, INFINITY, 0.0f}},
        {SN_UNARY_HARD_SWISH, 0.0f, 0.0f,
         {-4.0f, -3.0f, 0.0f, 1.0f, 3.0f, 4.0f},
         {-0.0f, -0.0f, 0.0f, 0.666666687f, 3.0f, 4.0f}},
        {SN_UNARY_ISINF, 1.0f, 0.0f,
         {INFINITY, -INFINITY, NAN, 0.0f, 1e38f, -1.0f},
         {1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        sn_unary_desc d = {.op = cases[i].op, .n = 6, .alpha = cases[i].alpha,
                           .beta = cases[i].beta};
        float got[6], want[6];
        char msg[256];
        sn_cpu_unary(&d, cases[i].x, got);
        cr_assert_eq(ref_compare(got, cases[i].y, 6, 1e-6f, 1e-7f, msg,
                                 sizeof msg),
                     0, "%s(alpha=%g, beta=%g): %s", unary_name(d.op),
                     (double)d.alpha, (double)d.beta, msg);
        /* and the reference agrees with the hand-computed values */
        ref_unary(&d, cases[i].x, want);
        cr_assert_eq(ref_compare(want, cases[i].y, 6, 1e-6f, 1e-7f, msg,
                                 sizeof msg),
                     0, "reference %s: %s", unary_name(d.op), msg);
    }
}

/* ---- softmax and reductions ----------------------------------------------- */

/* (outer, len, inner) shapes: the required ones, then ones that tile inner
 * (above 256 columns) and ones large enough to be split between threads. */
static const size_t axis_shapes[][3] = {
    {1, 1, 1},  {3, 5, 7},    {1, 1000, 1}, {2, 3, 1},   {1, 3, 4},
    {64, 10, 1}, {8, 50, 300}, {300, 200, 1}, {2, 40000, 1}, {1, 17, 3000},
    {5, 33, 17}, {40, 16, 1}, {9, 33, 1}, {7, 32, 1}};

static void check_softmax(size_t outer, size_t len, size_t inner, int log_sm,
                          float lo, float hi)
{
    const size_t n = outer * len * inner;
    float *x = alloc_floats(n), *got = alloc_floats(n), *want = alloc_floats(n);
    sn_softmax_desc d = {.outer = outer, .len = len, .inner = inner,
                         .log_softmax = log_sm};
    char msg[256];

    ref_fill_random(x, n, 404u, lo, hi);
    ref_softmax(&d, x, want);
    for (size_t t = 0; t < ARRAY_LEN(team_sizes); t++) {
        int bad;
        fill_value(got, n, NAN);
        omp_set_num_threads(team_sizes[t]);
        sn_cpu_softmax(&d, x, got);
        bad = ref_compare(got, want, n, 1e-5f, 1e-7f, msg, sizeof msg);
        cr_assert_eq(bad, 0, "%ssoftmax (%zu,%zu,%zu) threads=%d: %s",
                     log_sm ? "log_" : "", outer, len, inner, team_sizes[t],
                     msg);
    }
    free(x);
    free(got);
    free(want);
}

Test(cpu_softmax, matches_reference_on_every_shape)
{
    for (size_t i = 0; i < ARRAY_LEN(axis_shapes); i++)
        for (int log_sm = 0; log_sm < 2; log_sm++)
            check_softmax(axis_shapes[i][0], axis_shapes[i][1],
                          axis_shapes[i][2], log_sm, -5.0f, 5.0f);
}

Test(cpu_softmax, stays_finite_for_large_inputs)
{
    for (int log_sm = 0; log_sm < 2; log_sm++) {
        const size_t outer = 3, len = 50, inner = 7, n = outer * len * inner;
        sn_softmax_desc d = {.outer = outer, .len = len, .inner = inner,
                             .log_softmax = log_sm};
        float *x = alloc_floats(n), *y = alloc_floats(n);
        ref_fill_random(x, n, 505u, 1000.0f, 1010.0f);
        sn_cpu_softmax(&d, x, y);
        for (size_t i = 0; i < n; i++)
            cr_assert(isfinite(y[i]), "y[%zu] = %g for x = %g", i,
                      (double)y[i], (double)x[i]);
        free(x);
        free(y);
        check_softmax(outer, len, inner, log_sm, 1000.0f, 1010.0f);
    }
}

Test(cpu_softmax, gives_rows_that_sum_to_one)
{
    const size_t outer = 3, len = 5, inner = 7, n = outer * len * inner;
    sn_softmax_desc d = {.outer = outer, .len = len, .inner = inner};
    float *x = alloc_floats(n), *y = alloc_floats(n);

    ref_fill_random(x, n, 606u, -5.0f, 5.0f);
    sn_cpu_softmax(&d, x, y);
    for (size_t o = 0; o < outer; o++) {
        for (size_t j = 0; j < inner; j++) {
            double s = 0.0;
            for (size_t r = 0; r < len; r++)
                s += y[(o * len + r) * inner + j];
            cr_assert(fabs(s - 1.0) < 1e-6, "sum at (%zu, %zu) is %.9g", o, j,
                      s);
        }
    }
    free(x);
    free(y);
}

Test(cpu_softmax, writes_in_place_when_y_is_x)
{
    static const size_t shapes[][3] = {{64, 10, 1}, {8, 50, 300}};
    for (size_t i = 0; i < ARRAY_LEN(shapes); i++) {
        for (int log_sm = 0; log_sm < 2; log_sm++) {
            const size_t n = shapes[i][0] * shapes[i][1] * shapes[i][2];
            sn_softmax_desc d = {.outer = shapes[i][0], .len = shapes[i][1],
                                 .inner = shapes[i][2], .log_softmax = log_sm};
            float *x = alloc_floats(n), *want = alloc_floats(n);
            char msg[256];
            ref_fill_random(x, n, 707u, -5.0f, 5.0f);
            ref_softmax(&d, x, want);
            omp_set_num_threads(2);
            sn_cpu_softmax(&d, x, x);
            cr_assert_eq(ref_compare(x, want, n, 1e-5f, 1e-7f, msg,
                                     sizeof msg),
                         0, "%s", msg);
            free(x);
            free(want);
        }
    }
}

static void check_reduce(sn_reduce_op op, size_t outer, size_t len,
                         size_t inner)
{
    const size_t n = outer * len * inner, m = outer * inner;
    float *x = alloc_floats(n), *got = alloc_floats(m), *want = alloc_floats(m);
    sn_reduce_desc d = {.op = op, .outer = outer, .len = len, .inner = inner};
    char msg[256];

    ref_fill_random(x, n, 808u, -1.0f, 1.0f);
    ref_reduce(&d, x, want);
    for (size_t t = 0; t < ARRAY_LEN(team_sizes); t++) {
        int bad;
        fill_value(got, m, NAN);
        omp_set_num_threads(team_sizes[t]);
        sn_cpu_reduce(&d, x, got);
        /* atol: float sums of len values in [-1, 1] summed in another order
         * differ by about sqrt(len) ulps of the partial sums. */
        bad = ref_compare(got, want, m, 1e-5f, 1e-5f, msg, sizeof msg);
        cr_assert_eq(bad, 0, "%s (%zu,%zu,%zu) threads=%d: %s",
                     reduce_name(op), outer, len, inner, team_sizes[t], msg);
    }
    free(x);
    free(got);
    free(want);
}

Test(cpu_reduce, matches_reference_for_sum_mean_and_max_on_every_shape)
{
    for (int op = 0; op < SN_REDUCE_COUNT; op++)
        for (size_t i = 0; i < ARRAY_LEN(axis_shapes); i++)
            check_reduce((sn_reduce_op)op, axis_shapes[i][0],
                         axis_shapes[i][1], axis_shapes[i][2]);
}

Test(cpu_reduce, max_is_nan_when_any_value_is_nan)
{
    /* (outer, len, inner) = (2, 20, 1) then (1, 20, 2); one NaN each. */
    float x[40];
    float y[2];
    sn_reduce_desc d = {.op = SN_REDUCE_MAX, .outer = 2, .len = 20,
                        .inner = 1};

    ref_fill_random(x, 40, 909u, -1.0f, 1.0f);
    x[17] = NAN;
    sn_cpu_reduce(&d, x, y);
    cr_assert(isnan(y[0]) && !isnan(y[1]), "got %g %g", (double)y[0],
              (double)y[1]);
    d.outer = 1;
    d.inner = 2;
    sn_cpu_reduce(&d, x, y);
    cr_assert(!isnan(y[0]) && isnan(y[1]), "got %g %g", (double)y[0],
              (double)y[1]);
}

/* ---- where ---------------------------------------------------------------- */

/* Numpy broadcasting of `count` contiguous shapes into out_shape and one
 * stride array per operand (0 where broadcast); returns the output rank. */
static size_t broadcast_n(size_t count, const size_t *ranks,
                          const size_t *const *shapes, size_t *out_shape,
                          size_t (*strides)[SN_MAX_DIMS])
{
    size_t rank = 0, acc[4] = {1, 1, 1, 1};

    cr_assert_leq(count, 4);
    for (size_t k = 0; k < count; k++)
        rank = ranks[k] > rank ? ranks[k] : rank;
    cr_assert_leq(rank, SN_MAX_DIMS);
    for (size_t i = 0; i < rank; i++) {
        const size_t j = rank - 1 - i;
        size_t n = 1;
        for (size_t k = 0; k < count; k++) {
            size_t dk = i < ranks[k] ? shapes[k][ranks[k] - 1 - i] : 1;
            cr_assert(dk == 1 || n == 1 || dk == n,
                      "test bug: shapes do not broadcast");
            n = dk > n ? dk : n;
        }
        out_shape[j] = n;
        for (size_t k = 0; k < count; k++) {
            size_t dk = i < ranks[k] ? shapes[k][ranks[k] - 1 - i] : 1;
            strides[k][j] = dk == 1 ? 0 : acc[k];
            acc[k] *= dk;
        }
    }
    return rank;
}

/* out = where(cond, x, y) for three numpy-broadcast shapes; cond holds
 * zeros, ones, other values and NaN (true). */
static void check_where(size_t rc, const size_t *sc, size_t rx,
                        const size_t *sx, size_t ry, const size_t *sy)
{
    const size_t ranks[] = {rc, rx, ry};
    const size_t *const shapes[] = {sc, sx, sy};
    size_t strides[3][SN_MAX_DIMS] = {{0}};
    sn_where_desc d = {0};
    size_t nc = product(rc, sc), nx = product(rx, sx), ny = product(ry, sy);
    char msg[256];

    d.rank = broadcast_n(3, ranks, shapes, d.shape, strides);
    memcpy(d.stride_cond, strides[0], sizeof d.stride_cond);
    memcpy(d.stride_x, strides[1], sizeof d.stride_x);
    memcpy(d.stride_y, strides[2], sizeof d.stride_y);
    const size_t n = product(d.rank, d.shape);
    float *c = alloc_floats(nc), *x = alloc_floats(nx), *y = alloc_floats(ny);
    float *got = alloc_floats(n), *want = alloc_floats(n);
    ref_fill_random(c, nc, 61u, -1.0f, 2.0f);
    for (size_t i = 0; i < nc; i++)
        c[i] = c[i] < 0.0f ? 0.0f : c[i] < 1.0f ? 1.0f : c[i];
    if (nc > 2)
        c[2] = NAN;
    if (nc > 3)
        c[3] = -0.0f;
    ref_fill_random(x, nx, 62u, -1.0f, 1.0f);
    ref_fill_random(y, ny, 63u, 10.0f, 11.0f);
    ref_where(&d, c, x, y, want);
    for (size_t t = 0; t < ARRAY_LEN(team_sizes); t++) {
        fill_value(got, n, NAN);
        omp_set_num_threads(team_sizes[t]);
        sn_cpu_where(&d, c, x, y, got);
        cr_assert_eq(ref_compare(got, want, n, 0.0f, 0.0f, msg, sizeof msg),
                     0, "where rank %zu/%zu/%zu -> %zu elements, threads=%d: %s",
                     rc, rx, ry, n, team_sizes[t], msg);
    }
    free(c);
    free(x);
    free(y);
    free(got);
    free(want);
}

Test(cpu_where, selects_with_broadcasting_of_all_three_operands)
{
    static const size_t c1[] = {2, 1, 5}, x1[] = {3, 1}, s7[] = {7},
                        c2[] = {4, 6}, c3[] = {40, 1, 1}, x3[] = {30, 1},
                        y3[] = {100}, c4[] = {40, 30, 100},
                        c5[] = {2, 1, 3, 1, 4}, x5[] = {5, 1, 1, 1},
                        y5[] = {1, 3, 1, 4};
    check_where(3, c1, 2, x1, 0, NULL);    /* y a scalar */
    check_where(1, s7, 1, s7, 1, s7);      /* all contiguous */
    check_where(0, NULL, 2, c2, 2, c2);    /* one condition for all */
    check_where(2, c2, 0, NULL, 1, c2 + 1);
    check_where(3, c3, 2, x3, 1, y3);      /* large: split between threads */
    check_where(3, c4, 3, c4, 3, c4);
    check_where(5, c5, 4, x5, 4, y5);
}

/* ---- strided copy --------------------------------------------------------- */

/*
 * One copy: src_len floats with the view at src_off, dst_len floats with
 * the view at dst_off.  The whole destination buffer is compared, so what
 * the copy must not touch (NaN before) is checked too.
 */
static void check_copy(const sn_copy_desc *d, size_t src_len, size_t src_off,
                       size_t dst_len, size_t dst_off, const char *what)
{
    float *src = alloc_floats(src_len), *got = alloc_floats(dst_len);
    float *want = alloc_floats(dst_len);
    char msg[256];

    ref_fill_random(src, src_len, 71u, -1.0f, 1.0f);
    fill_value(want, dst_len, NAN);
    ref_copy(d, src + src_off, want + dst_off);
    for (size_t t = 0; t < ARRAY_LEN(team_sizes); t++) {
        fill_value(got, dst_len, NAN);
        omp_set_num_threads(team_sizes[t]);
        sn_cpu_copy(d, src + src_off, got + dst_off);
        cr_assert_eq(ref_compare(got, want, dst_len, 0.0f, 0.0f, msg,
                                 sizeof msg),
                     0, "copy %s, threads=%d: %s", what, team_sizes[t], msg);
    }
    free(src);
    free(got);
    free(want);
}

/* Contiguous strides of shape (rank dims). */
static void contiguous(size_t rank, const size_t *shape, ptrdiff_t *stride)
{
    ptrdiff_t s = 1;
    for (size_t j = rank; j-- > 0;) {
        stride[j] = s;
        s *= (ptrdiff_t)shape[j];
    }
}

/* Transpose of a contiguous (n0, n1, n2) tensor by permutation perm: output
 * dimension j is input dimension perm[j]. */
static void check_transpose(const size_t *in_shape, const size_t *perm)
{
    ptrdiff_t in_stride[3];
    sn_copy_desc d = {.rank = 3};
    char what[96];

    contiguous(3, in_shape, in_stride);
    for (size_t j = 0; j < 3; j++) {
        d.shape[j] = in_shape[perm[j]];
        d.src_stride[j] = in_stride[perm[j]];
    }
    contiguous(3, d.shape, d.dst_stride);
    snprintf(what, sizeof what, "transpose (%zu,%zu,%zu) by (%zu,%zu,%zu)",
             in_shape[0], in_shape[1], in_shape[2], perm[0], perm[1], perm[2]);
    check_copy(&d, product(3, in_shape), 0, product(3, in_shape), 0, what);
}

Test(cpu_copy, transposes_by_every_permutation_of_three_axes)
{
    /* (2, 8200, 3): an NHWC image to NCHW cuts its one panel into
     * chunks of columns, the last one short; (1, 37, 3): three channels
     * de-interleaved 16 pixels at a time, then a tail */
    static const size_t shapes[][3] = {{3, 5, 7},      {1, 4, 9},
                                       {37, 65, 129},  {300, 2, 171},
                                       {2, 8200, 3},   {1, 37, 3}};
    static const size_t perms[][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                      {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    for (size_t s = 0; s < ARRAY_LEN(shapes); s++)
        for (size_t p = 0; p < ARRAY_LEN(perms); p++)
            check_transpose(shapes[s], perms[p]);
}

Test(cpu_copy, slices_with_negative_steps)
{
    /* src (10, 20): rows 8, 5, 2 and columns 19, 17, ..., 1. */
    sn_copy_desc d = {.rank = 2, .shape = {3, 10}, .src_stride = {-60, -2},
                      .dst_stride = {10, 1}};
    check_copy(&d, 200, 8 * 20 + 19, 30, 0, "rows 8:0:-3, columns 19::-2");
    /* A reversed contiguous range: x[::-1] of 100003 floats. */
    sn_copy_desc r = {.rank = 1, .shape = {100003}, .src_stride = {-1},
                      .dst_stride = {1}};
    check_copy(&r, 100003, 100002, 100003, 0, "x[::-1]");
    /* (50, 40, 30)[:, ::-1, 2:28:5] */
    sn_copy_desc s3 = {.rank = 3, .shape = {50, 40, 6},
                       .src_stride = {1200, -30, 5}, .dst_stride = {240, 6, 1}};
    check_copy(&s3, 60000, 39 * 30 + 2, 12000, 0, "[:, ::-1, 2:28:5]");
}

Test(cpu_copy, writes_through_negative_destination_strides)
{
    /* dst[::-1, ::-1] = src: both strides negative, the view at the end. */
    sn_copy_desc d = {.rank = 2, .shape = {70, 500}, .src_stride = {500, 1},
                      .dst_stride = {-500, -1}};
    check_copy(&d, 35000, 0, 35000, 34999, "into dst[::-1, ::-1]");
}

Test(cpu_copy, expands_with_zero_source_strides)
{
    sn_copy_desc col = {.rank = 2, .shape = {3, 4}, .src_stride = {1, 0},
                        .dst_stride = {4, 1}};
    sn_copy_desc row = {.rank = 2, .shape = {3, 4}, .src_stride = {0, 1},
                        .dst_stride = {4, 1}};
    sn_copy_desc scalar = {.rank = 3, .shape = {5, 6, 7}, .src_stride = {0},
                           .dst_stride = {42, 7, 1}};
    sn_copy_desc big = {.rank = 3, .shape = {64, 33, 40},
                        .src_stride = {40, 0, 1},
                        .dst_stride = {1320, 40, 1}};
    check_copy(&col, 3, 0, 12, 0, "(3,1) to (3,4)");
    check_copy(&row, 4, 0, 12, 0, "(1,4) to (3,4)");
    check_copy(&scalar, 1, 0, 210, 0, "() to (5,6,7)");
    check_copy(&big, 2560, 0, 84480, 0, "(64,1,40) to (64,33,40)");
}

Test(cpu_copy, places_blocks_for_concat_and_copies_plain_ranges)
{
    /* (4, 5) into columns 3..7 of (4, 10), leaving the rest alone. */
    sn_copy_desc cat = {.rank = 2, .shape = {4, 5}, .src_stride = {5, 1},
                        .dst_stride = {10, 1}};
    sn_copy_desc plain = {.rank = 1, .shape = {100003}, .src_stride = {1},
                          .dst_stride = {1}};
    sn_copy_desc one = {.rank = 0};
    sn_copy_desc ones = {.rank = 4, .shape = {1, 1, 1, 1}};
    check_copy(&cat, 20, 0, 40, 3, "concat block");
    check_copy(&plain, 100003, 0, 100003, 0, "plain copy");
    check_copy(&one, 1, 0, 3, 1, "rank 0");
    check_copy(&ones, 1, 0, 3, 1, "rank 4 of ones");
}

/* ---- gather --------------------------------------------------------------- */

static void check_gather(size_t outer, size_t axis_len, size_t inner,
                         const int32_t *idx, size_t nidx)
{
    const size_t nd = outer * axis_len * inner, no = outer * nidx * inner;
    sn_gather_desc d = {.outer = outer, .axis_len = axis_len, .inner = inner,
                        .nidx = nidx};
    float *data = alloc_floats(nd), *got = alloc_floats(no);
    float *want = alloc_floats(no);
    char msg[256];

    ref_fill_random(data, nd, 81u, -1.0f, 1.0f);
    ref_gather(&d, data, idx, want);
    for (size_t t = 0; t < ARRAY_LEN(team_sizes); t++) {
        fill_value(got, no, NAN);
        omp_set_num_threads(team_sizes[t]);
        sn_cpu_gather(&d, data, idx, got);
        cr_assert_eq(ref_compare(got, want, no, 0.0f, 0.0f, msg, sizeof msg),
                     0, "gather (%zu,%zu,%zu) by %zu indices, threads=%d: %s",
                     outer, axis_len, inner, nidx, team_sizes[t], msg);
    }
    free(data);
    free(got);
    free(want);
}

Test(cpu_gather, counts_negative_indices_from_the_end_and_zeroes_out_of_range)
{
    static const int32_t idx[] = {0, -1, 6, 7, -8, -7, 3, INT32_MIN,
                                  INT32_MAX};
    const size_t n = ARRAY_LEN(idx);
    check_gather(3, 7, 5, idx, n);
    check_gather(1, 7, 1, idx, n);
    check_gather(4, 7, 1, idx, n);
    check_gather(1, 7, 300, idx, n);
}

Test(cpu_gather, looks_up_embedding_rows_split_between_threads)
{
    enum { N = 500 };
    int32_t idx[N];
    for (size_t i = 0; i < N; i++)
        idx[i] = (int32_t)((i * 7919) % 1000) - (i % 3 == 0 ? 1000 : 0);
    check_gather(1, 1000, 256, idx, N);
    check_gather(300, 1000, 1, idx, N);
}

/* ---- layer normalisation -------------------------------------------------- */

static void check_layernorm(size_t outer, size_t len, int with_bias, float lo,
                            float hi, float tol, int in_place)
{
    const size_t n = outer * len;
    sn_layernorm_desc d = {.outer = outer, .len = len, .epsilon = 1e-5f};
    float *x = alloc_floats(n), *got = alloc_floats(n), *want = alloc_floats(n);
    float *scale = alloc_floats(len), *bias = NULL;
    char msg[256];

    ref_fill_random(x, n, 91u, lo, hi);
    ref_fill_random(scale, len, 92u, 0.5f, 1.5f);
    if (with_bias) {
        bias = alloc_floats(len);
        ref_fill_random(bias, len, 93u, -1.0f, 1.0f);
    }
    ref_layernorm(&d, x, scale, bias, want);
    for (size_t t = 0; t < ARRAY_LEN(team_sizes); t++) {
        omp_set_num_threads(team_sizes[t]);
        if (in_place) {
            memcpy(got, x, n * sizeof *got);
            sn_cpu_layernorm(&d, got, scale, bias, got);
        } else {
            fill_value(got, n, NAN);
            sn_cpu_layernorm(&d, x, scale, bias, got);
        }
        cr_assert_eq(ref_compare(got, want, n, tol, tol, msg, sizeof msg), 0,
                     "layernorm (%zu,%zu) bias=%d x in [%g,%g) in_place=%d "
                     "threads=%d: %s",
                     outer, len, with_bias, (double)lo, (double)hi, in_place,
                     team_sizes[t], msg);
    }
    free(x);
    free(got);
    free(want);
    free(scale);
    free(bias);
}

Test(cpu_layernorm, matches_the_double_reference_with_and_without_bias)
{
    static const size_t shapes[][2] = {{1, 1}, {3, 7}, {5, 768}, {64, 1000},
                                       {2, 4097}, {300, 17}};
    for (size_t s = 0; s < ARRAY_LEN(shapes); s++)
        for (int b = 0; b < 2; b++)
            check_layernorm(shapes[s][0], shapes[s][1], b, -2.0f, 3.0f, 1e-4f,
                            0);
}

Test(cpu_layernorm, stays_accurate_when_the_mean_dwarfs_the_spread)
{
    /* x in [1000, 1001): var = 1/12 next to x^2 = 1e6; E[x^2] - mean^2 in
     * float would lose every digit.  The float mean's rounding (~6e-5)
     * bounds what two passes can do. */
    check_layernorm(8, 1000, 1, 1000.0f, 1001.0f, 2e-3f, 0);
}

Test(cpu_layernorm, writes_in_place_when_y_is_x)
{
    check_layernorm(64, 1000, 1, -2.0f, 3.0f, 1e-4f, 1);
}

/* ---- im2col --------------------------------------------------------------- */

/* The output size of a convolution / pooling axis, floor or ceil mode. */
static size_t out_size(size_t in, size_t k, size_t stride, size_t dil,
                       size_t pad0, size_t pad1, int ceil_mode)
{
    const size_t span = dil * (k - 1) + 1, padded = in + pad0 + pad1;
    if (padded < span)
        return 0;
    return (padded - span + (ceil_mode ? stride - 1 : 0)) / stride + 1;
}

typedef struct conv_case {
    size_t ch, in_h, in_w, k_h, k_w, s_h, s_w, d_h, d_w;
    size_t pt, pl, pb, pr;
} conv_case;

static void check_im2col(const conv_case *c)
{
    sn_im2col_desc d = {
        .channels = c->ch, .in_h = c->in_h, .in_w = c->in_w,
        .k_h = c->k_h, .k_w = c->k_w, .stride_h = c->s_h, .stride_w = c->s_w,
        .dil_h = c->d_h, .dil_w = c->d_w, .pad_top = c->pt, .pad_left = c->pl,
    };
    d.out_h = out_size(c->in_h, c->k_h, c->s_h, c->d_h, c->pt, c->pb, 0);
    d.out_w = out_size(c->in_w, c->k_w, c->s_w, c->d_w, c->pl, c->pr, 0);
    const size_t ns = c->ch * c->in_h * c->in_w;
    const size_t nd = c->ch * c->k_h * c->k_w * d.out_h * d.out_w;
    float *src = alloc_floats(ns), *got = alloc_floats(nd),
          *want = alloc_floats(nd);
    char msg[256];

    cr_assert_gt(nd, 0, "test bug: empty im2col");
    ref_fill_random(src, ns, 101u, -1.0f, 1.0f);
    ref_im2col(&d, src, want);
    for (size_t t = 0; t < ARRAY_LEN(team_sizes); t++) {
        fill_value(got, nd, NAN);
        omp_set_num_threads(team_sizes[t]);
        sn_cpu_im2col(&d, src, got);
        cr_assert_eq(ref_compare(got, want, nd, 0.0f, 0.0f, msg, sizeof msg),
                     0,
                     "im2col C=%zu in %zux%zu k %zux%zu stride %zu,%zu dil "
                     "%zu,%zu pad %zu,%zu -> %zux%zu, threads=%d: %s",
                     c->ch, c->in_h, c->in_w, c->k_h, c->k_w, c->s_h, c->s_w,
                     c->d_h, c->d_w, c->pt, c->pl, d.out_h, d.out_w,
                     team_sizes[t], msg);
    }
    free(src);
    free(got);
    free(want);
}

Test(cpu_im2col, matches_reference_with_pads_strides_and_dilations)
{
    static const conv_case cases[] = {
        /* ch  ih  iw kh kw sh sw dh dw pt pl pb pr */
        {3, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
        {2, 11, 10, 3, 2, 2, 3, 2, 1, 2, 1, 0, 2},
        {1, 5, 5, 5, 5, 1, 1, 1, 1, 0, 0, 0, 0},  /* one output */
        {4, 3, 4, 3, 3, 1, 1, 2, 2, 3, 3, 3, 3},  /* taps in padding only */
        {2, 6, 7, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0},  /* 1x1, strided */
        {5, 9, 13, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3},
        {16, 56, 56, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, /* split between threads */
        {8, 30, 31, 3, 3, 2, 2, 3, 3, 4, 4, 4, 4},
        {3, 67, 259, 5, 5, 2, 2, 1, 1, 1, 1, 2, 2}, /* a stem, wide rows */
        {2, 9, 70, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++)
        check_im2col(&cases[i]);
}

Test(cpu_im2col, handles_the_one_dimensional_case)
{
    static const conv_case cases[] = {
        {3, 1, 50, 1, 5, 1, 3, 1, 2, 0, 2, 0, 2},
        {1, 1, 7, 1, 3, 1, 1, 1, 1, 0, 1, 0, 1},
        {64, 1, 1000, 1, 9, 1, 1, 1, 1, 0, 4, 0, 4},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++)
        check_im2col(&cases[i]);
}

/* ---- pooling -------------------------------------------------------------- */

typedef struct pool_case {
    size_t planes, in_h, in_w, k_h, k_w, s_h, s_w, d_h, d_w;
    size_t pt, pl, pb, pr;
    int ceil_mode;
} pool_case;

static void check_pool(const pool_case *c, sn_pool_op op, int include_pad,
                       float *nan_at)
{
    sn_pool_desc d = {
        .op = op, .count_include_pad = include_pad, .planes = c->planes,
        .in_h = c->in_h, .in_w = c->in_w, .k_h = c->k_h, .k_w = c->k_w,
        .stride_h = c->s_h, .stride_w = c->s_w, .dil_h = c->d_h,
        .dil_w = c->d_w, .pad_top = c->pt, .pad_left = c->pl,
        .pad_bottom = c->pb, .pad_right = c->pr,
    };
    d.out_h = out_size(c->in_h, c->k_h, c->s_h, c->d_h, c->pt, c->pb,
                       c->ceil_mode);
    d.out_w = out_size(c->in_w, c->k_w, c->s_w, c->d_w, c->pl, c->pr,
                       c->ceil_mode);
    const size_t ns = c->planes * c->in_h * c->in_w;
    const size_t nd = c->planes * d.out_h * d.out_w;
    float *src = alloc_floats(ns), *got = alloc_floats(nd),
          *want = alloc_floats(nd);
    char msg[256];

    cr_assert_gt(nd, 0, "test bug: empty pooling");
    ref_fill_random(src, ns, 111u, -1.0f, 1.0f);
    if (nan_at)
        src[ns / 2] = NAN;
    ref_pool(&d, src, want);
    for (size_t t = 0; t < ARRAY_LEN(team_sizes); t++) {
        fill_value(got, nd, 12345.0f);
        omp_set_num_threads(team_sizes[t]);
        sn_cpu_pool(&d, src, got);
        cr_assert_eq(ref_compare(got, want, nd, 0.0f, 0.0f, msg, sizeof msg),
                     0,
                     "%s pool (include_pad=%d) P=%zu in %zux%zu k %zux%zu "
                     "stride %zu,%zu dil %zu,%zu pad %zu,%zu,%zu,%zu ceil=%d "
                     "-> %zux%zu, threads=%d: %s",
                     op == SN_POOL_MAX ? "max" : "avg", include_pad, c->planes,
                     c->in_h, c->in_w, c->k_h, c->k_w, c->s_h, c->s_w, c->d_h,
                     c->d_w, c->pt, c->pl, c->pb, c->pr, c->ceil_mode, d.out_h,
                     d.out_w, team_sizes[t], msg);
    }
    if (nan_at) /* the window holding the NaN: somewhere got NaN */
        *nan_at = 0.0f;
    for (size_t i = 0; nan_at && i < nd; i++)
        if (isnan(got[i]))
            *nan_at = 1.0f;
    free(src);
    free(got);
    free(want);
}

static const pool_case pool_cases[] = {
    /* P  ih  iw kh kw sh sw dh dw pt pl pb pr ceil */
    {3, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0},
    {2, 6, 6, 3, 3, 2, 2, 1, 1, 0, 0, 0, 0, 1},  /* ceil: last window runs past */
    {2, 8, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},  /* ceil: past the padding too */
    {2, 9, 10, 2, 3, 1, 2, 2, 2, 1, 2, 0, 1, 1}, /* dilation, uneven pads */
    {1, 5, 5, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 0},  /* windows mostly padding */
    {4, 1, 50, 1, 4, 1, 3, 1, 1, 0, 1, 0, 2, 1}, /* one-dimensional */
    {1, 4, 4, 4, 4, 1, 1, 1, 1, 0, 0, 0, 0, 0},  /* global */
    {32, 56, 56, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0}, /* split between threads */
    /* 2 x 2, stride 2 (MAX: the vector path): tail columns only, vectors
     * and a tail, an odd input (floor), ceil mode past it (generic), many
     * planes between threads */
    {3, 8, 8, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 0},
    {2, 64, 70, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 0},
    {2, 33, 65, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 0},
    {2, 33, 65, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 1},
    {24, 128, 128, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, 0},
};

Test(cpu_pool, max_matches_reference_with_pads_ceil_windows_and_dilation)
{
    for (size_t i = 0; i < ARRAY_LEN(pool_cases); i++)
        check_pool(&pool_cases[i], SN_POOL_MAX, 0, NULL);
}

Test(cpu_pool, avg_counts_padding_only_when_asked)
{
    for (size_t i = 0; i < ARRAY_LEN(pool_cases); i++)
        for (int inc = 0; inc < 2; inc++)
            check_pool(&pool_cases[i], SN_POOL_AVG, inc, NULL);
}

Test(cpu_pool, avg_divides_by_the_documented_counts)
{
    /* One plane of ones, 4 x 4, kernel 3, stride 2, pad 1 all round, ceil
     * mode: out 3 x 3 (floor would give 2).  Rows of the windows: {-1,0,1},
     * {1,2,3}, {3,4,5}: inside the input 2, 3, 1 rows; inside the padded
     * input [-1, 5) 3, 3, 2 rows. */
    float src[16], got[9];
    const float ones_only[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    static const float cnt_in[3] = {2, 3, 1}, cnt_pad[3] = {3, 3, 2};
    sn_pool_desc d = {.op = SN_POOL_AVG, .planes = 1, .in_h = 4, .in_w = 4,
                      .out_h = 3, .out_w = 3, .k_h = 3, .k_w = 3,
                      .stride_h = 2, .stride_w = 2, .dil_h = 1, .dil_w = 1,
                      .pad_top = 1, .pad_left = 1, .pad_bottom = 1,
                      .pad_right = 1};
    char msg[256];

    fill_value(src, 16, 1.0f);
    sn_cpu_pool(&d, src, got);
    cr_assert_eq(ref_compare(got, ones_only, 9, 0.0f, 0.0f, msg, sizeof msg),
                 0, "exclude pad: %s", msg);
    d.count_include_pad = 1;
    sn_cpu_pool(&d, src, got);
    for (size_t y = 0; y < 3; y++)
        for (size_t x = 0; x < 3; x++) {
            float want = cnt_in[y] * cnt_in[x] / (cnt_pad[y] * cnt_pad[x]);
            cr_assert_float_eq(got[y * 3 + x], want, 1e-6f,
                               "(%zu, %zu): got %g, want %g", y, x,
                               (double)got[y * 3 + x], (double)want);
        }
}

Test(cpu_pool, max_propagates_nan)
{
    float seen = 0.0f;
    check_pool(&pool_cases[0], SN_POOL_MAX, 0, &seen);
    cr_assert(seen == 1.0f, "no output is NaN");
    seen = 0.0f; /* the 2 x 2 vector path */
    check_pool(&pool_cases[ARRAY_LEN(pool_cases) - 4], SN_POOL_MAX, 0, &seen);
    cr_assert(seen == 1.0f, "no output is NaN (2 x 2)");
}

/* ---- the AVX-512 SGEMM (cpu/sgemm_avx512.c), called directly ------------- */

/* Shapes off the kernel's blocking (12 x 32 tiles, K blocks of <= 256):
 * N < 32 and N <= 16 (the half-width tile), K = 1, K just over a block,
 * M = 1 (the one-row kernel) and M = 12k + 1..11 remainders. */
static const size_t avx512_shapes[][3] = {
    {1, 1, 1},    {7, 13, 5},    {13, 31, 1},  {25, 33, 257}, {1, 10, 512},
    {1, 47, 300}, {64, 10, 129}, {12, 32, 256}, {130, 70, 520}, {3, 17, 7}};

Test(cpu_sgemm_avx512, matches_reference_on_odd_shapes_packed_or_not)
{
    if (!sn_cpu_sgemm_avx512_available())
        cr_skip_test("no AVX-512 on this CPU (or SHARDNET_CPU_SGEMM=blas)");
    for (size_t i = 0; i < ARRAY_LEN(avx512_shapes); i++)
        for (int tb = 0; tb < 2; tb++)
            for (int kernel = 1; kernel <= 2; kernel++) {
                gemm_case g = {.m = avx512_shapes[i][0],
                               .n = avx512_shapes[i][1],
                               .k = avx512_shapes[i][2], .tb = tb,
                               .pad = (size_t)kernel * 3 - 3, .batch = 1,
                               .alpha = 1.0f, .b_const = kernel == 2,
                               .kernel = kernel};
                check_gemm_all_teams(&g);
            }
}

Test(cpu_sgemm_avx512, applies_bias_relu_alpha_and_beta_in_registers)
{
    if (!sn_cpu_sgemm_avx512_available())
        cr_skip_test("no AVX-512 on this CPU (or SHARDNET_CPU_SGEMM=blas)");
    for (size_t i = 0; i < ARRAY_LEN(avx512_shapes); i++)
        for (int tb = 0; tb < 2; tb++)
            for (int bias = 0; bias <= 2; bias++)
                for (int beta = 0; beta < 2; beta++) {
                    /* beta 0: C starts as NaN, which must not leak. */
                    gemm_case g = {.m = avx512_shapes[i][0],
                                   .n = avx512_shapes[i][1],
                                   .k = avx512_shapes[i][2], .tb = tb,
                                   .pad = 1, .batch = 1,
                                   .alpha = beta ? 0.75f : 1.0f,
                                   .beta = beta ? 0.5f : 0.0f,
                                   .nan_c = !beta, .bias = bias,
                                   .act = (i + (size_t)bias) % 2
                                              ? SN_ACT_RELU
                                              : SN_ACT_NONE,
                                   .b_const = beta, .res = (int)(i + 1) % 2,
                                   .kernel = 1 + beta};
                    check_gemm_all_teams(&g);
                    g.kernel = 2 - beta;
                    g.act = g.act == SN_ACT_RELU ? SN_ACT_NONE : SN_ACT_RELU;
                    check_gemm_all_teams(&g);
                }
}

Test(cpu_sgemm_avx512, reads_b_in_place_with_bias_relu_beta_and_batches)
{
    if (!sn_cpu_sgemm_avx512_available())
        cr_skip_test("no AVX-512 on this CPU (or SHARDNET_CPU_SGEMM=blas)");
    for (size_t i = 0; i < ARRAY_LEN(avx512_shapes); i++)
        for (int bias = 0; bias <= 2; bias++)
            for (int beta = 0; beta < 2; beta++) {
                /* Own B per item (gaps between them) or one shared B. */
                gemm_case g = {.m = avx512_shapes[i][0],
                               .n = avx512_shapes[i][1],
                               .k = avx512_shapes[i][2], .pad = i % 3,
                               .batch = 1 + i % 3, .shared_b = beta,
                               .alpha = beta ? 0.75f : 1.0f,
                               .beta = beta ? 0.5f : 0.0f, .nan_c = !beta,
                               .bias = bias,
                               .act = (i + (size_t)bias) % 2 ? SN_ACT_RELU
                                                             : SN_ACT_NONE,
                               .res = (int)i % 2, .kernel = 4};
                check_gemm_all_teams(&g);
            }
}

Test(cpu_sgemm_avx512, one_row_by_a_weight_in_place_with_every_epilogue)
{
    /* K around the 32-float steps and their masked tail, N around the
     * groups of 8 rows. */
    static const size_t ks[] = {1, 15, 16, 17, 31, 32, 33, 300, 1000};
    static const size_t ns[] = {1, 7, 8, 9, 47, 100};
    if (!sn_cpu_sgemm_avx512_available())
        cr_skip_test("no AVX-512 on this CPU (or SHARDNET_CPU_SGEMM=blas)");
    for (size_t i = 0; i < ARRAY_LEN(ks); i++)
        for (size_t j = 0; j < ARRAY_LEN(ns); j++)
            for (int e = 0; e < 4; e++) {
                /* e: plain; bias per column, RELU, C NaN; bias per row,
                 * residual, alpha and beta; RELU6 and padding. */
                gemm_case g = {.m = 1, .n = ns[j], .k = ks[i], .tb = 1,
                               .pad = e == 3 ? 5 : 0, .batch = 1,
                               .alpha = e == 2 ? 0.75f : 1.0f,
                               .beta = e == 2 ? 0.5f : 0.0f,
                               .nan_c = e == 1, .bias = e == 1 ? 1
                                                        : e == 2 ? 2 : 0,
                               .act = e == 1   ? SN_ACT_RELU
                                      : e == 3 ? SN_ACT_RELU6
                                               : SN_ACT_NONE,
                               .b_const = 1, .res = e == 2, .kernel = 5};
                check_gemm_all_teams(&g);
            }
}

Test(cpu_sgemm_avx512, one_row_by_a_weight_gives_the_same_bits_on_any_team)
{
    const size_t n = 1003, k = 4097;
    sn_gemm_desc d = {.m = 1, .n = n, .k = k, .alpha = 1.0f, .lda = k,
                      .ldb = k, .ldc = n, .batch = 1, .trans_b = 1,
                      .b_const = 1};
    if (!sn_cpu_sgemm_avx512_available())
        cr_skip_test("no AVX-512 on this CPU (or SHARDNET_CPU_SGEMM=blas)");
    float *a = alloc_floats(k), *b = alloc_floats(n * k),
          *c1 = alloc_floats(n), *c2 = alloc_floats(n);
    ref_fill_random(a, k, 3u, -1.0f, 1.0f);
    ref_fill_random(b, n * k, 5u, -1.0f, 1.0f);
    omp_set_num_threads(1);
    sn_cpu_sgemm_avx512_dot(&d, a, b, c1, NULL, NULL);
    for (size_t t = 0; t < ARRAY_LEN(team_sizes); t++) {
        omp_set_num_threads(team_sizes[t]);
        sn_cpu_sgemm_avx512_dot(&d, a, b, c2, NULL, NULL);
        cr_assert(memcmp(c1, c2, n * sizeof *c1) == 0,
                  "%d threads differ from one", team_sizes[t]);
    }
    /* A column split's device (B's rows 512.. alone) sums its columns as
     * the whole product does. */
    sn_gemm_desc half = d;
    half.n = n - 512;
    sn_cpu_sgemm_avx512_dot(&half, a, b + 512 * k, c2, NULL, NULL);
    cr_assert(memcmp(c1 + 512, c2, half.n * sizeof *c1) == 0,
              "a run of B's rows alone differs");
    free(a);
    free(b);
    free(c1);
    free(c2);
}

/* One row by a weight stored [K, N] (a MatMul's), read in place a K
 * block at a time: the packed kernel's bits, every epilogue, any team. */
Test(cpu_sgemm_avx512, one_row_by_a_k_by_n_weight_gives_the_packed_bits)
{
    static const size_t shapes[][2] = {{1, 1},    {7, 13},   {33, 257},
                                       {100, 300}, {47, 1000}, {1003, 4097}};
    if (!sn_cpu_sgemm_avx512_available())
        cr_skip_test("no AVX-512 on this CPU (or SHARDNET_CPU_SGEMM=blas)");
    for (size_t i = 0; i < ARRAY_LEN(shapes); i++)
        for (int e = 0; e < 4; e++) {
            const size_t n = shapes[i][0], k = shapes[i][1], ldb = n + 3;
            sn_gemm_desc d = {.m = 1, .n = n, .k = k, .lda = k, .ldb = ldb,
                              .ldc = n, .batch = 1, .b_const = 1,
                              .alpha = e == 2 ? 0.75f : 1.0f,
                              .beta = e == 2 ? 0.5f : 0.0f,
                              .bias_rows = e == 3,
                              .act = e == 1   ? SN_ACT_RELU
                                     : e == 3 ? SN_ACT_RELU6
                                              : SN_ACT_NONE};
            float *a = alloc_floats(k), *b = alloc_floats(k * ldb),
                  *bias = alloc_floats(n), *res = alloc_floats(n),
                  *want = alloc_floats(n), *got = alloc_floats(n);
            ref_fill_random(a, k, 3u, -1.0f, 1.0f);
            ref_fill_random(b, k * ldb, 5u, -1.0f, 1.0f);
            ref_fill_random(bias, n, 7u, -1.0f, 1.0f);
            ref_fill_random(res, n, 9u, -1.0f, 1.0f);
            const float *bs = e ? bias : NULL, *rs = e >= 2 ? res : NULL;
            sn_cpu_packed_b *pb = sn_cpu_packed_b_alloc(k, n);
            cr_assert_not_null(pb);
            sn_cpu_pack_b(pb, &d, b);
            for (size_t t = 0; t < ARRAY_LEN(team_sizes); t++) {
                ref_fill_random(want, n, 11u, -1.0f, 1.0f);
                memcpy(got, want, n * sizeof *got);
                omp_set_num_threads(team_sizes[t]);
                sn_cpu_sgemm_avx512_packed(&d, a, pb, want, bs, rs);
                cr_assert(sn_cpu_sgemm_avx512_rows_takes(&d));
                cr_assert(sn_cpu_sgemm_avx512_rows(&d, a, b, got, bs, rs));
                cr_assert(memcmp(want, got, n * sizeof *got) == 0,
                          "n=%zu k=%zu epilogue %d threads=%d: differs from "
                          "the packed kernel", n, k, e, team_sizes[t]);
            }
            sn_cpu_packed_b_free(pb);
            free(a);
            free(b);
            free(bias);
            free(res);
            free(want);
            free(got);
        }
}

Test(cpu_sgemm_avx512, gives_the_same_bits_in_place_as_packed)
{
    /* 1x1 convolutions' shapes: wide B, K under and over one K block. */
    static const size_t shapes[][3] = {{24, 4099, 24}, {37, 1000, 300}};
    if (!sn_cpu_sgemm_avx512_available())
        cr_skip_test("no AVX-512 on this CPU (or SHARDNET_CPU_SGEMM=blas)");
    for (size_t i = 0; i < ARRAY_LEN(shapes); i++)
        for (size_t t = 0; t < ARRAY_LEN(team_sizes); t++) {
            const size_t m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
            sn_gemm_desc d = {.m = m, .n = n, .k = k, .alpha = 1.0f,
                              .lda = k, .ldb = n, .ldc = n, .batch = 1,
                              .bias_rows = 1, .act = SN_ACT_RELU};
            float *a = alloc_floats(m * k), *b = alloc_floats(k * n),
                  *bias = alloc_floats(m), *c1 = alloc_floats(m * n),
                  *c2 = alloc_floats(m * n);
            ref_fill_random(a, m * k, 3u, -1.0f, 1.0f);
            ref_fill_random(b, k * n, 5u, -1.0f, 1.0f);
            ref_fill_random(bias, m, 7u, -1.0f, 1.0f);
            omp_set_num_threads(team_sizes[t]);
            cr_assert(sn_cpu_sgemm_avx512(&d, a, b, c1, bias, NULL),
                      "sn_cpu_sgemm_avx512: out of memory");
            sn_cpu_sgemm_avx512_direct(&d, a, b, c2, bias, NULL);
            cr_assert(memcmp(c1, c2, m * n * sizeof *c1) == 0,
                      "m=%zu n=%zu k=%zu threads=%d: in place differs from "
                      "packed", m, n, k, team_sizes[t]);
            free(a);
            free(b);
            free(bias);
            free(c1);
            free(c2);
        }
}

Test(cpu_sgemm_avx512, computes_batches_sharing_one_packed_b)
{
    if (!sn_cpu_sgemm_avx512_available())
        cr_skip_test("no AVX-512 on this CPU (or SHARDNET_CPU_SGEMM=blas)");
    for (int kernel = 1; kernel <= 2; kernel++)
        for (int tb = 0; tb < 2; tb++) {
            gemm_case g = {.m = 29, .n = 45, .k = 70, .tb = tb, .pad = 2,
                           .batch = 3, .shared_b = 1, .alpha = 1.0f,
                           .bias = 1, .act = SN_ACT_RELU,
                           .b_const = 1, .kernel = kernel};
            check_gemm_all_teams(&g);
        }
}

Test(cpu_sgemm_avx512, gives_each_row_the_same_bits_alone_or_in_any_block)
{
    if (!sn_cpu_sgemm_avx512_available())
        cr_skip_test("no AVX-512 on this CPU (or SHARDNET_CPU_SGEMM=blas)");
    /* The layer split's promise for a weight: 40 rows at once on 4 threads,
     * each row alone (M = 1) and blocks of 13 (a remainder row of one) on
     * one thread give the same bits; K spans several K blocks, B is
     * transposed (a Gemm from PyTorch) and both column halves are used. */
    const size_t m = 40, n = 10 + 32, k = 784;
    sn_gemm_desc d = {.m = m, .n = n, .k = k, .alpha = 1.0f, .lda = k,
                      .ldb = k, .ldc = n, .batch = 1, .trans_b = 1,
                      .act = SN_ACT_RELU};
    float *a = alloc_floats(m * k), *b = alloc_floats(n * k);
    float *bias = alloc_floats(n);
    float *all = alloc_floats(m * n), *part = alloc_floats(m * n);
    ref_fill_random(a, m * k, 15u, -1.0f, 1.0f);
    ref_fill_random(b, n * k, 16u, -1.0f, 1.0f);
    ref_fill_random(bias, n, 17u, -1.0f, 1.0f);
    sn_cpu_packed_b *pb = sn_cpu_packed_b_alloc(k, n);
    cr_assert(pb);
    sn_cpu_pack_b(pb, &d, b);
    cr_assert(sn_cpu_sgemm_avx512_worth(&d, 1));
    omp_set_num_threads(4);
    sn_cpu_sgemm_avx512_packed(&d, a, pb, all, bias, NULL);
    omp_set_num_threads(1);
    const size_t blocks[] = {1, 13};
    for (size_t bi = 0; bi < 2; bi++) {
        memset(part, 0, m * n * sizeof *part);
        for (size_t r = 0; r < m; r += blocks[bi]) {
            sn_gemm_desc d1 = d;
            d1.m = m - r < blocks[bi] ? m - r : blocks[bi];
            cr_assert(sn_cpu_sgemm_avx512_worth(&d1, 1), "M = %zu", d1.m);
            sn_cpu_sgemm_avx512_packed(&d1, a + r * k, pb, part + r * n,
                                       bias, NULL);
        }
        for (size_t i = 0; i < m * n; i++)
            cr_assert(!memcmp(&part[i], &all[i], sizeof *part),
                      "row %zu, column %zu: %.9g in blocks of %zu, %.9g "
                      "all at once",
                      i / n, i % n, (double)part[i], blocks[bi],
                      (double)all[i]);
    }
    sn_cpu_packed_b_free(pb);
    free(a);
    free(b);
    free(bias);
    free(all);
    free(part);
}

Test(cpu_sgemm_avx512, sn_cpu_gemm_takes_it_only_where_it_supports_the_shape)
{
    sn_gemm_desc d = {.m = 1024, .n = 10, .k = 512, .batch = 1};
    if (!sn_cpu_sgemm_avx512_available())
        cr_skip_test("no AVX-512 on this CPU (or SHARDNET_CPU_SGEMM=blas)");
    cr_assert(sn_cpu_sgemm_avx512_supports(&d));
    d.trans_a = 1;
    cr_expect_not(sn_cpu_sgemm_avx512_supports(&d), "trans_a goes to BLAS");
    d.trans_a = 0;
    d.batch = 2;
    d.stride_b = 5;
    cr_expect_not(sn_cpu_sgemm_avx512_supports(&d), "one B per item");
    d.stride_b = 0;
    cr_expect(sn_cpu_sgemm_avx512_supports(&d));
    d.k = 0;
    cr_expect_not(sn_cpu_sgemm_avx512_supports(&d), "K = 0");
}

/* ---- small products (cpu/sgemm_small.c), called directly ---------------- */

/* Row tiles of 8 (n <= 16) and 4 (n <= 32) with every remainder, column
 * masks at 1, 15, 16, 17, 31 and 32, K from 1 to the limit of 128. */
static const size_t small_shapes[][3] = {
    {1, 1, 1},   {8, 16, 16},  {16, 16, 16}, {15, 15, 7}, {9, 17, 128},
    {4, 32, 64}, {7, 31, 3},   {3, 32, 1},   {33, 5, 100}, {2, 20, 17}};

Test(cpu_sgemm_small, matches_reference_on_every_tile_and_mask)
{
    if (!sn_cpu_sgemm_avx512_available())
        cr_skip_test("no AVX-512 on this CPU (or SHARDNET_CPU_SGEMM=blas)");
    for (size_t i = 0; i < ARRAY_LEN(small_shapes); i++)
        for (int tb = 0; tb < 2; tb++)
            for (int bias = 0; bias <= 2; bias++) {
                gemm_case g = {.m = small_shapes[i][0],
                               .n = small_shapes[i][1],
                               .k = small_shapes[i][2], .tb = tb,
                               .pad = (size_t)bias, .batch = 1 + i % 3,
                               .alpha = bias == 1 ? 0.75f : 1.0f,
                               .beta = bias == 1 ? 0.5f : 0.0f,
                               .nan_c = bias != 1, .bias = bias,
                               .act = (i + (size_t)bias) % 2 ? SN_ACT_RELU
                                                             : SN_ACT_NONE,
                               .res = (int)(i + (size_t)tb) % 2, .kernel = 3};
                check_gemm_all_teams(&g);
            }
}

Test(cpu_sgemm_small, computes_many_items_with_own_operands_on_any_team)
{
    if (!sn_cpu_sgemm_avx512_available())
        cr_skip_test("no AVX-512 on this CPU (or SHARDNET_CPU_SGEMM=blas)");
    /* Enough work to open a parallel region: by items, then by rows. */
    gemm_case g = {.m = 16, .n = 16, .k = 16, .batch = 300, .alpha = 1.0f,
                   .kernel = 3};
    check_gemm_all_teams(&g);
    g = (gemm_case){.m = 1000, .n = 24, .k = 40, .batch = 3, .alpha = 1.0f,
                    .kernel = 3};
    check_gemm_all_teams(&g);
    g.shared_b = 1;
    check_gemm_all_teams(&g);
    g.res = 1;
    check_gemm_all_teams(&g);
}

Test(cpu_sgemm_small, gives_each_row_the_same_bits_in_any_batch_or_team)
{
    if (!sn_cpu_sgemm_avx512_available())
        cr_skip_test("no AVX-512 on this CPU (or SHARDNET_CPU_SGEMM=blas)");
    /* The layer split's promise: 40 items at once, and each item alone
     * (a micro-batch of one), give the same bits on 1 and 4 threads. */
    const size_t m = 13, n = 27, k = 77, items = 40;
    sn_gemm_desc d = {.m = m, .n = n, .k = k, .alpha = 1.0f, .lda = k,
                      .ldb = n, .ldc = n, .batch = items, .stride_a = m * k,
                      .stride_b = k * n, .stride_c = m * n};
    float *a = alloc_floats(items * m * k), *b = alloc_floats(items * k * n);
    float *all = alloc_floats(items * m * n), *one = alloc_floats(m * n);
    ref_fill_random(a, items * m * k, 5u, -1.0f, 1.0f);
    ref_fill_random(b, items * k * n, 6u, -1.0f, 1.0f);
    cr_assert(sn_cpu_sgemm_small_takes(&d));
    omp_set_num_threads(4);
    sn_cpu_sgemm_small(&d, a, b, all, NULL, NULL);
    omp_set_num_threads(1);
    for (size_t it = 0; it < items; it++) {
        sn_gemm_desc d1 = d;
        d1.batch = 1;
        for (size_t r = 0; r < m; r++) {
            /* one row at a time: a different row tile every time */
            d1.m = 1;
            sn_cpu_sgemm_small(&d1, a + it * m * k + r * k, b + it * k * n,
                               one + r * n, NULL, NULL);
        }
        cr_assert(!memcmp(one, all + it * m * n, m * n * sizeof *one),
                  "item %zu differs alone", it);
    }
    free(a);
    free(b);
    free(all);
    free(one);
}

Test(cpu_sgemm_small, takes_only_narrow_short_untransposed_a)
{
    sn_gemm_desc d = {.m = 1000, .n = 32, .k = 128, .batch = 7};
    if (!sn_cpu_sgemm_avx512_available())
        cr_skip_test("no AVX-512 on this CPU (or SHARDNET_CPU_SGEMM=blas)");
    cr_assert(sn_cpu_sgemm_small_takes(&d));
    d.n = 33;
    cr_assert(!sn_cpu_sgemm_small_takes(&d));
    d.n = 32, d.k = 129;
    cr_assert(!sn_cpu_sgemm_small_takes(&d));
    d.k = 16, d.trans_a = 1;
    cr_assert(!sn_cpu_sgemm_small_takes(&d));
}

/* ---- depthwise convolution ----------------------------------------------- */

typedef struct dw_case {
    size_t images, ch, mult, in_h, in_w, k_h, k_w, s_h, s_w, d_h, d_w;
    size_t pt, pb, pl, pr;
    int bias, relu; /* relu: 0 none, 1 Relu, 2 Relu6 */
    float bad; /* 0, or one weight of output channel 0 (Inf, NaN) */
} dw_case;

/* Outputs along one axis; 0 where the window never fits. */
static size_t dw_out_size(size_t in, size_t k, size_t s, size_t dil,
                          size_t p0, size_t p1)
{
    const size_t ext = (k - 1) * dil + 1, full = in + p0 + p1;
    return full < ext ? 0 : (full - ext) / s + 1;
}

/*
 * Whether the kernel fuses a product into its sum (an FMA, as its x86-64-v3
 * and v4 clones do, or any build where the compiler contracts), found by
 * summing a * a - a * a (a = 1 + 2^-12), which is 0 unfused and the
 * rounding error of a * a, -2^-24, fused.  `scalar`: on a plane with a
 * non-finite weight (the Inf here falls on the padding), which the kernel
 * sums apart from the others.
 */
static int dw_fuses(int scalar)
{
    const float a = 1.0f + 0x1p-12f;
    const float x[2] = {a, a}, w[3] = {a, -a, INFINITY};
    sn_dwconv_desc d = {
        .images = 1, .channels = 1, .mult = 1, .in_h = 1, .in_w = 2,
        .out_h = 1, .out_w = 1, .k_h = 1, .k_w = scalar ? 3 : 2,
        .stride_h = 1, .stride_w = 1, .dil_h = 1, .dil_w = 1,
    };
    float y = 1.0f;
    sn_cpu_dwconv(&d, x, w, NULL, &y);
    return y != 0.0f;
}

/* Output (oy, ox) of plane img (in_h, in_w) with weights wo (k_h, k_w),
 * summed as the kernel sums it: the taps inside the input in (ky, kx)
 * order (a zero of the padding adds nothing), each product fused into the
 * sum where `fused`, else rounded first (volatile: never contracted). */
static float dw_expect_one(const sn_dwconv_desc *d, const float *img,
                           const float *wo, size_t oy, size_t ox, int fused)
{
    float acc = 0.0f;

    for (size_t ky = 0; ky < d->k_h; ky++)
        for (size_t kx = 0; kx < d->k_w; kx++) {
            const long long iy = (long long)(oy * d->stride_h +
                                             ky * d->dil_h) -
                                 (long long)d->pad_top;
            const long long ix = (long long)(ox * d->stride_w +
                                             kx * d->dil_w) -
                                 (long long)d->pad_left;
            if (iy < 0 || iy >= (long long)d->in_h || ix < 0 ||
                ix >= (long long)d->in_w)
                continue;
            const float x = img[(size_t)iy * d->in_w + (size_t)ix];
            const float wv = wo[ky * d->k_w + kx];
            if (fused) {
                acc = fmaf(wv, x, acc);
            } else {
                volatile float p = wv * x;
                acc += p;
            }
        }
    return acc;
}

/* The whole output as the kernel computes it: the planes whose weights
 * are all finite (its vector path) fused where fused[0], the others (its
 * path for other weights) where fused[1]; then the bias and the Relu. */
static void dw_expect(const sn_dwconv_desc *d, const float *src,
                      const float *w, const float *bias, const int fused[2],
                      float *dst)
{
    const size_t och = d->channels * d->mult, taps = d->k_h * d->k_w;

    for (size_t n = 0; n < d->images; n++)
        for (size_t o = 0; o < och; o++) {
            const float *img =
                src + (n * d->channels + o / d->mult) * d->in_h * d->in_w;
            const float *wo = w + o * taps;
            int fin = 1;
            for (size_t t = 0; t < taps; t++)
                fin &= isfinite(wo[t]) != 0;
            for (size_t oy = 0; oy < d->out_h; oy++)
                for (size_t ox = 0; ox < d->out_w; ox++) {
                    float v = dw_expect_one(d, img, wo, oy, ox,
                                            fused[!fin]);
                    v += bias ? bias[o] : 0.0f; /* as the kernel: + 0 */
                    if (d->act != SN_ACT_NONE && v < 0.0f)
                        v = 0.0f;
                    if (d->act == SN_ACT_RELU6 && v > 6.0f)
                        v = 6.0f;
                    dst[((n * och + o) * d->out_h + oy) * d->out_w + ox] = v;
                }
        }
}

/* One case with `threads` threads: bit for bit the sums in the kernel's
 * order (dw_expect()), and within a tolerance of the plain reference. */
static void check_dwconv(const dw_case *c, int threads)
{
    sn_dwconv_desc d = {
        .images = c->images, .channels = c->ch, .mult = c->mult,
        .in_h = c->in_h, .in_w = c->in_w, .k_h = c->k_h, .k_w = c->k_w,
        .stride_h = c->s_h, .stride_w = c->s_w, .dil_h = c->d_h,
        .dil_w = c->d_w, .pad_top = c->pt, .pad_left = c->pl,
        .act = (sn_act)c->relu, /* 0, 1 Relu, 2 Relu6 */
    };
    d.out_h = dw_out_size(c->in_h, c->k_h, c->s_h, c->d_h, c->pt, c->pb);
    d.out_w = dw_out_size(c->in_w, c->k_w, c->s_w, c->d_w, c->pl, c->pr);
    const size_t och = c->ch * c->mult;
    const size_t ns = c->images * c->ch * c->in_h * c->in_w;
    const size_t nw = och * c->k_h * c->k_w;
    const size_t nd = c->images * och * d.out_h * d.out_w;
    const int fused[2] = {dw_fuses(0), dw_fuses(1)};
    /* exact sizes: ASan sees any read past the input */
    float *src = alloc_floats(ns), *w = alloc_floats(nw);
    float *bias = alloc_floats(och), *got = alloc_floats(nd);
    float *want = alloc_floats(nd), *ref = alloc_floats(nd);
    char msg[256];

    ref_fill_random(src, ns, 71u + (unsigned)ns, -1.0f, 1.0f);
    /* Relu6: weights in [-4, 4], so that sums pass 6 */
    ref_fill_random(w, nw, 72u + (unsigned)nw, c->relu == 2 ? -4.0f : -1.0f,
                    c->relu == 2 ? 4.0f : 1.0f);
    ref_fill_random(bias, och, 73u, -1.0f, 1.0f);
    if (c->bad != 0.0f)
        w[nw > 1 ? 1 : 0] = c->bad;
    fill_value(got, nd, 1234.5f);
    omp_set_num_threads(threads);
    sn_cpu_dwconv(&d, src, w, c->bias ? bias : NULL, got);
    dw_expect(&d, src, w, c->bias ? bias : NULL, fused, want);
    ref_dwconv(&d, src, w, c->bias ? bias : NULL, ref);

    snprintf(msg, sizeof msg,
             "dwconv n%zu c%zu x%zu %zux%zu k %zux%zu s %zu,%zu d %zu,%zu "
             "pads t%zu l%zu b%zu r%zu -> %zux%zu%s%s bad %g, %d threads",
             c->images, c->ch, c->mult, c->in_h, c->in_w, c->k_h, c->k_w,
             c->s_h, c->s_w, c->d_h, c->d_w, c->pt, c->pl, c->pb, c->pr,
             d.out_h, d.out_w, c->bias ? " bias" : "",
             c->relu == 2 ? " relu6" : c->relu ? " relu" : "",
             (double)c->bad, threads);
    size_t i = 0;
    while (i < nd && !memcmp(&got[i], &want[i], sizeof *got))
        i++;
    cr_assert_eq(i, nd, "%s: output %zu is %a, summed in order %a", msg, i,
                 i < nd ? (double)got[i] : 0.0,
                 i < nd ? (double)want[i] : 0.0);
    char why[160];
    cr_assert_eq(ref_compare(got, ref, nd, 1e-5f, 1e-5f, why, sizeof why), 0,
                 "%s: %s", msg, why);
    free(src);
    free(w);
    free(bias);
    free(got);
    free(want);
    free(ref);
}

static void check_dwconv_all_teams(const dw_case *c)
{
    for (size_t t = 0; t < ARRAY_LEN(team_sizes); t++)
        check_dwconv(c, team_sizes[t]);
}

Test(cpu_dwconv, sums_in_order_on_every_width_stride_dilation_and_pad)
{
    static const size_t widths[] = {1, 15, 16, 17, 33, 128};
    static const size_t heights[] = {1, 2, 3, 7};
    static const size_t ks[] = {1, 3, 5};
    unsigned long long seed = 0x9e3779b97f4a7c15ull;
    size_t ran = 0;

    /* every width and height with 3 x 3 taps, pad 1 (the common layer),
     * strides 1 and 2 */
    for (size_t i = 0; i < ARRAY_LEN(widths); i++)
        for (size_t j = 0; j < ARRAY_LEN(heights); j++)
            for (size_t s = 1; s <= 2; s++) {
                const dw_case c = {1, 2, 1, heights[j], widths[i], 3, 3, s,
                                   s, 1, 1, 1, 1, 1, 1, 1, 1, 0.0f};
                check_dwconv_all_teams(&c);
                ran++;
            }
    /* and a spread of the rest: kernels 1, 3, 5 each way, strides 1-3,
     * dilations 1-2, pads 0..k on each side, multiplier 2 */
    for (int it = 0; it < 400; it++) {
        dw_case c;
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        unsigned long long r = seed >> 11;
#define PICK(n) (r % (n) + (r /= (n), 0))
        c.images = 1 + PICK(2);
        c.ch = 1 + PICK(2);
        c.mult = 1 + PICK(2);
        c.in_w = widths[PICK(ARRAY_LEN(widths))];
        c.in_h = heights[PICK(ARRAY_LEN(heights))];
        c.k_h = ks[PICK(3)];
        c.k_w = ks[PICK(3)];
        c.s_h = 1 + PICK(3);
        c.s_w = 1 + PICK(3);
        c.d_h = 1 + PICK(2);
        c.d_w = 1 + PICK(2);
        c.pt = PICK(c.k_h + 1);
        c.pb = PICK(c.k_h + 1);
        c.pl = PICK(c.k_w + 1);
        c.pr = PICK(c.k_w + 1);
        c.bias = (int)PICK(2);
        c.relu = (int)PICK(3);
        c.bad = 0.0f;
#undef PICK
        if (!dw_out_size(c.in_h, c.k_h, c.s_h, c.d_h, c.pt, c.pb) ||
            !dw_out_size(c.in_w, c.k_w, c.s_w, c.d_w, c.pl, c.pr))
            continue;
        check_dwconv_all_teams(&c);
        ran++;
    }
    cr_assert_gt(ran, 300, "only %zu cases had an output", ran);
}

Test(cpu_dwconv, rows_of_four_blocks_or_more_with_3_or_5_taps_one_column_apart)
{
    /* the path that loads each 16 input columns once and shifts them (3
     * or 5 taps across, stride and dilation 1 across, rows of more than
     * 48 outputs): run lengths 4 and 8 blocks, a last run that overlaps
     * the one before, a partial last block, any pads, strides and
     * dilations down the rows */
    static const size_t widths[] = {49, 64, 65, 100, 127, 128, 129, 200};
    unsigned long long seed = 0x2545f4914f6cdd1dull;
    size_t ran = 0;

    for (size_t i = 0; i < ARRAY_LEN(widths); i++)
        for (size_t k = 3; k <= 5; k += 2)
            for (int it = 0; it < 4; it++) {
                dw_case c;
                seed = seed * 6364136223846793005ull +
                       1442695040888963407ull;
                unsigned long long r = seed >> 11;
#define PICK(n) (r % (n) + (r /= (n), 0))
                c.images = 1 + PICK(2);
                c.ch = 1 + PICK(3);
                c.mult = 1 + PICK(2);
                c.in_w = widths[i];
                c.in_h = 1 + PICK(9);
                c.k_h = 1 + 2 * PICK(3);
                c.k_w = k;
                c.s_h = 1 + PICK(2);
                c.s_w = 1;
                c.d_h = 1 + PICK(2);
                c.d_w = 1;
                c.pt = PICK(c.k_h + 1);
                c.pb = PICK(c.k_h + 1);
                c.pl = PICK(k + 1);
                c.pr = PICK(k + 1);
                c.bias = (int)PICK(2);
                c.relu = (int)PICK(3);
                c.bad = it == 3 ? INFINITY : 0.0f;
#undef PICK
                if (!dw_out_size(c.in_h, c.k_h, c.s_h, c.d_h, c.pt, c.pb))
                    continue;
                check_dwconv_all_teams(&c);
                ran++;
            }
    cr_assert_gt(ran, 50, "only %zu cases had an output", ran);
}

Test(cpu_dwconv, splits_planes_between_threads_mid_plane)
{
    /* enough work for a team; the rows of a plane are shared out, so runs
     * start and end inside planes */
    static const dw_case cases[] = {
        {1, 3, 2, 33, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0.0f},
        {2, 2, 1, 47, 33, 5, 5, 2, 1, 2, 1, 2, 2, 0, 3, 1, 0, 0.0f},
        {1, 8, 1, 64, 17, 3, 5, 1, 2, 1, 2, 0, 3, 2, 1, 0, 1, 0.0f},
        {1, 24, 1, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0.0f},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++)
        check_dwconv_all_teams(&cases[i]);
}

Test(cpu_dwconv, sums_a_plane_with_a_non_finite_weight_like_the_reference)
{
    /* the plane with Inf or NaN is summed without the padding (Inf * 0
     * would be NaN), the others as always */
    static const dw_case cases[] = {
        {1, 2, 2, 9, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, INFINITY},
        {1, 2, 1, 5, 33, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 1, -INFINITY},
        {2, 1, 1, 3, 16, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 1, 1, NAN},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++)
        check_dwconv_all_teams(&cases[i]);
}

/* uint4 (MatMulNBits) at batch 1 to 7 (u4_vnni_column where K is a
 * multiple of 128 and the CPU has VNNI, else u4_column): K a multiple of
 * 128, of 32 or neither, blocks of 32, 64, 96 (blocks ending inside a
 * step of 128), 128 and 256, one zero point for all (8, 0, or 7.5: the
 * float path) or an array of whole numbers or one of them a fraction,
 * rows of tiny and of huge values and one with a NaN: each row gives the
 * plain product's answer within float rounding of its sums. */
Test(cpu_qgemm, uint4_matches_the_reference_for_any_block_and_k)
{
    static const size_t ks[] = {32, 100, 128, 129, 255, 256, 300, 1024, 1184};
    static const size_t blocks[] = {32, 64, 96, 128, 256};
    static const float sizes[] = {1.0f, 1e-30f, 1e30f};
    const size_t n = 21, m_max = 7;
    char msg[256];
    size_t ran = 0;
    for (size_t ki = 0; ki < ARRAY_LEN(ks); ki++)
        for (size_t bi = 0; bi < ARRAY_LEN(blocks); bi++)
            for (int zero = 0; zero < 5; zero++) {
                size_t k = ks[ki], block = blocks[bi],
                       nb = (k + block - 1) / block, ldq = nb * block / 2;
                size_t m = 1 + (ki + bi + (size_t)zero) % m_max;
                unsigned char *q = malloc(n * ldq);
                float *a = alloc_floats(m * k), *s = alloc_floats(n * nb),
                      *z = alloc_floats(n * nb), *bias = alloc_floats(n),
                      *got = alloc_floats(m * n), *want = alloc_floats(m * n);
                cr_assert_not_null(q);
                for (size_t i = 0; i < n * ldq; i++)
                    q[i] = (unsigned char)(i * 151u + k + block);
                ref_fill_random(s, n * nb, 5u + (unsigned)k, 0.001f, 0.05f);
                ref_fill_random(bias, n, 6u, -1.0f, 1.0f);
                for (size_t i = 0; i < n * nb; i++) /* 0 .. 15 */
                    z[i] = (float)((i * 7u + k) % 16u);
                if (zero == 2)
                    z[n * nb / 2] += 0.5f; /* one column's, no whole one */
                ref_fill_random(a, m * k, 7u + (unsigned)block, -1.0f, 1.0f);
                for (size_t i = 0; i < m; i++)
                    for (size_t kk = 0; kk < k; kk++)
                        a[i * k + kk] *= sizes[(i + ki) % ARRAY_LEN(sizes)];
                if (ki == 3 && m > 1)
                    a[k + 3] = NAN; /* row 1: the float path, a NaN out */
                sn_qgemm_desc d = {.m = m, .n = n, .k = k,
                                   .qtype = SN_QTYPE_U4, .trans_b = 1,
                                   .block = block, .lda = k, .ldq = ldq,
                                   .ldc = n,
                                   .zero_value = zero == 3   ? 0.0f
                                                 : zero == 4 ? 7.5f
                                                             : 8.0f,
                                   .act = (sn_act)(ki % 3)};
                const float *za = zero == 1 || zero == 2 ? z : NULL;
                ref_qgemm(&d, a, q, s, za, bias, want);
                omp_set_num_threads(2);
                cr_assert(sn_cpu_qgemm(&d, a, q, s, za, bias, got));
                /* each row within rounding of its own size's sums */
                for (size_t i = 0; i < m; i++) {
                    float size = sizes[(i + ki) % ARRAY_LEN(sizes)];
                    int bad = ref_compare(got + i * n, want + i * n, n, 1e-5f,
                                          1e-5f * (float)k * size, msg,
                                          sizeof msg);
                    cr_assert_eq(bad, 0,
                                 "k %zu, block %zu, zero %d, row %zu of %zu: "
                                 "%s",
                                 k, block, zero, i, m, msg);
                }
                ran++;
                free(q);
                free(a);
                free(s);
                free(z);
                free(bias);
                free(got);
                free(want);
            }
    cr_assert_eq(ran, ARRAY_LEN(ks) * ARRAY_LEN(blocks) * 5);
}

/* int8 at batch 1 takes A's row as bytes where the CPU has VNNI (scaled
 * by the row's largest value): rows of tiny values, of huge ones, of a
 * NaN or an infinity (the float path then: they propagate) and of zeros
 * all give the plain product's answer. */
Test(cpu_qgemm, one_row_of_any_size_or_a_nan_matches_the_reference)
{
    const size_t n = 37, k = 200;
    static const float scales[] = {1e-36f, 1e-20f, 1.0f, 1e30f, 0.0f};
    unsigned char *q = malloc(n * k);
    float *a = alloc_floats(k), *s = alloc_floats(n), *got = alloc_floats(n),
          *want = alloc_floats(n);
    char msg[256];
    cr_assert_not_null(q);
    for (size_t i = 0; i < n * k; i++)
        q[i] = (unsigned char)(i * 37u + 11u);
    ref_fill_random(s, n, 9u, 0.001f, 0.01f);
    for (int qt = 0; qt < 2; qt++)
        for (size_t c = 0; c < ARRAY_LEN(scales) + 2; c++) {
            sn_qgemm_desc d = {.m = 1, .n = n, .k = k,
                               .qtype = qt ? SN_QTYPE_U8 : SN_QTYPE_S8,
                               .trans_b = 1, .lda = k, .ldq = k, .ldc = n,
                               .zero_value = qt ? 3.0f : 0.0f};
            ref_fill_random(a, k, 3u, -1.0f, 1.0f);
            for (size_t i = 0; i < k; i++)
                a[i] *= c < ARRAY_LEN(scales) ? scales[c] : 1.0f;
            if (c == ARRAY_LEN(scales))
                a[17] = NAN;
            if (c == ARRAY_LEN(scales) + 1)
                a[17] = -INFINITY;
            ref_qgemm(&d, a, q, s, NULL, NULL, want);
            omp_set_num_threads(2);
            cr_assert(sn_cpu_qgemm(&d, a, q, s, NULL, NULL, got));
            /* float's smallest normal: products of tiny rows round there */
            int bad = ref_compare(got, want, n, 1e-5f, 1e-37f, msg,
                                  sizeof msg);
            cr_assert_eq(bad, 0, "type %d, case %zu: %s", qt, c, msg);
        }
    free(q);
    free(a);
    free(s);
    free(got);
    free(want);
}
