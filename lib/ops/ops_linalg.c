/*
 * Det (opset 11 on): the determinants of x (..., M, M).  Known on the
 * host (a constant, a small input): LU with partial pivoting in double,
 * any M.  On the device, for M up to 3: the sum over permutations of the
 * signed products of one element per row, as binary steps over strided
 * views of the matrices (larger matrices computed on the device are
 * refused: that would need a factorisation kernel).
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* Largest M computed on the device. */
#define MAX_DEVICE_M 3

/* The determinant of the m x m matrix a (row-major, overwritten). */
static double lu_det(double *a, size_t m)
{
    double det = 1.0;
    for (size_t c = 0; c < m; c++) {
        size_t piv = c;
        for (size_t r = c + 1; r < m; r++)
            if (fabs(a[r * m + c]) > fabs(a[piv * m + c]))
                piv = r;
        if (a[piv * m + c] == 0.0)
            return 0.0;
        if (piv != c) {
            for (size_t k = 0; k < m; k++) {
                double t = a[c * m + k];
                a[c * m + k] = a[piv * m + k];
                a[piv * m + k] = t;
            }
            det = -det;
        }
        det *= a[c * m + c];
        for (size_t r = c + 1; r < m; r++) {
            double f = a[r * m + c] / a[c * m + c];
            for (size_t k = c; k < m; k++)
                a[r * m + k] -= f * a[c * m + k];
        }
    }
    return det;
}

/* Every matrix's determinant on the host (M = 0 gives 1). */
static shardnet_status det_host(sn_lower *L, const sn_node *n, const sn_rt *x,
                                size_t batch, size_t m)
{
    size_t es;
    void *d;
    double *a;
    shardnet_status st;
    if ((st = sn_host_elem_size(n, x->dtype, &es)) != SHARDNET_OK)
        return st;
    d = sn_host_alloc(batch, es);
    a = malloc((m ? m * m : 1) * sizeof *a);
    if (!d || !a) {
        free(d);
        free(a);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "determinant");
    }
    for (size_t b = 0; b < batch; b++) {
        for (size_t i = 0; i < m * m; i++)
            a[i] = x->host ? sn_rt_get_double(x, b * m * m + i) : 0.0;
        sn_store_value(x->dtype, d, b, lu_det(a, m), 0, 0);
    }
    free(a);
    return sn_out_host(L, n, 0, x->dtype, x->rank - 2, x->dims, d);
}

/* The permutations of m <= 3 elements and their signs. */
static size_t permutations(size_t m, int perm[6][3], int *sign)
{
    static const int p3[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                 {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    static const int s3[6] = {1, -1, -1, 1, 1, -1};
    size_t k = 0;
    for (size_t i = 0; i < 6; i++) {
        int ok = 1;
        for (size_t j = 0; j < 3; j++) /* the ones that fix 2 and up */
            ok &= j < m || p3[i][j] == (int)j;
        if (!ok)
            continue;
        memcpy(perm[k], p3[i], sizeof perm[k]);
        sign[k++] = s3[i];
    }
    return k;
}

/* One binary step over batch elements: c[b] = a[b sa] op b[b sb]. */
static shardnet_status emit_strided(sn_lower *L, const sn_node *n,
                                    sn_binary_op op, size_t batch, sn_view a,
                                    size_t sa, sn_view b, size_t sb,
                                    sn_view c)
{
    sn_step s = {.kind = SN_KERNEL_BINARY};
    s.u.binary = (sn_binary_desc){.op = op, .rank = 1, .shape = {batch},
                                  .stride_a = {sa}, .stride_b = {sb},
                                  .a = a, .b = b, .c = c};
    return sn_emit(L, n, &s);
}

/* The determinants of M <= 3 matrices on the device into out (batch). */
static shardnet_status det_device(sn_lower *L, const sn_node *n, sn_rt *x,
                                  size_t batch, size_t m, sn_view out)
{
    int perm[6][3], sign[6];
    size_t np = permutations(m, perm, sign), mm = m * m;
    sn_view vx, tmp;
    shardnet_status st;
    if ((st = sn_dev_view(L, n, x, &vx)) != SHARDNET_OK ||
        (st = sn_scratch(L, batch, &tmp)) != SHARDNET_OK)
        return st;
    if (m == 1) {
        sn_step s = {.kind = SN_KERNEL_COPY};
        s.u.copy = (sn_copy_desc){.rank = 1, .shape = {batch},
                                  .src_stride = {1}, .dst_stride = {1},
                                  .src = vx, .dst = out};
        return sn_emit(L, n, &s);
    }
    for (size_t k = 0; k < np; k++) {
        /* the product of a[i, perm[i]] over the rows, in dst */
        sn_view dst = k ? tmp : out;
        for (size_t i = 1; i < m; i++) {
            sn_view prev = i == 1 ? (sn_view){vx.buf, vx.offset +
                                                          (size_t)perm[k][0]}
                                  : dst;
            sn_view e = {vx.buf, vx.offset + i * m + (size_t)perm[k][i]};
            if ((st = emit_strided(L, n, SN_BINARY_MUL, batch, prev,
                                   i == 1 ? mm : 1, e, mm, dst)))
                return st;
        }
        if (k && (st = emit_strided(L, n,
                                    sign[k] > 0 ? SN_BINARY_ADD
                                                : SN_BINARY_SUB,
                                    batch, out, 1, tmp, 1, out)))
            return st;
    }
    return SHARDNET_OK;
}

SN_LOWER(sn_lower_det)
{
    sn_rt *x = sn_in(L, n, 0), *out;
    size_t batch, m;
    sn_dtype t;
    shardnet_status st;

    if ((st = sn_float_type(n, x, &t)) != SHARDNET_OK)
        return st;
    if (x->rank < 2 || x->dims[x->rank - 1] != x->dims[x->rank - 2])
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "input must be (..., M, M), square matrices");
    m = (size_t)x->dims[x->rank - 1];
    batch = sn_dims_product(0, x->rank - 2, x->dims);
    if (sn_host_known(x) || m == 0)
        return det_host(L, n, x, batch, m);
    if (m > MAX_DEVICE_M)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "determinants of %zu x %zu matrices computed on "
                             "the device are not supported (at most %d x "
                             "%d, or known when the model is planned)",
                             m, m, MAX_DEVICE_M, MAX_DEVICE_M);
    if (!L->plan)
        return SHARDNET_UNSUPPORTED;
    if ((st = sn_out_device(L, n, 0, x->rank - 2, x->dims, &out)))
        return st;
    out->dtype = t;
    if (batch == 0)
        return SHARDNET_OK;
    return det_device(L, n, x, batch, m, out->view);
}
