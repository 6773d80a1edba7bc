/*
 * The CPU kernels of cpu/, called directly (no backend, no device), checked
 * against the plain C reference in ref.c with one and with several OpenMP
 * threads.
 */
#include <config.h>

#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
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
    };
    size_t na, nb, nc;
    float *a, *b, *got, *want;
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

    omp_set_num_threads(threads);
    sn_cpu_gemm_init();
    sn_cpu_gemm(&d, a, b, got);
    ref_gemm(&d, a, b, want);

    bad = ref_compare(got, want, nc, 1e-4f, 1e-4f, msg, sizeof msg);
    cr_assert_eq(bad, 0,
                 "gemm m=%zu n=%zu k=%zu ta=%d tb=%d pad=%zu batch=%zu "
                 "shared_b=%d alpha=%g beta=%g nan_c=%d threads=%d: %s",
                 g->m, g->n, g->k, g->ta, g->tb, g->pad, g->batch, g->shared_b,
                 (double)g->alpha, (double)g->beta, g->nan_c, threads, msg);
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

/* ---- binary -------------------------------------------------------------- */

/* Op names from the X-macro (lib/kernels.c is not linked into this test). */
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
    if (op == SN_UNARY_LOG || op == SN_UNARY_SQRT) {
        ref_fill_random(x, n, 303u, 1e-3f, 10.0f);
        x[0] = 1.0f;
        return;
    }
    ref_fill_random(x, n, 303u, -5.0f, 5.0f);
    x[0] = 0.0f;
    if (n > 1)
        x[1] = -0.0f;
    if (n > 2)
        x[2] = -1.0f;
}

static void check_unary(sn_unary_op op, size_t n, int in_place)
{
    float *x = alloc_floats(n), *got = alloc_floats(n), *want = alloc_floats(n);
    sn_unary_desc d = {.op = op, .n = n};
    char msg[256];

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

/* ---- softmax and reductions ----------------------------------------------- */

/* (outer, len, inner) shapes: the required ones, then ones that tile inner
 * (above 256 columns) and ones large enough to be split between threads. */
static const size_t axis_shapes[][3] = {
    {1, 1, 1},  {3, 5, 7},    {1, 1000, 1}, {2, 3, 1},   {1, 3, 4},
    {64, 10, 1}, {8, 50, 300}, {300, 200, 1}, {2, 40000, 1}, {1, 17, 3000},
    {5, 33, 17}};

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
