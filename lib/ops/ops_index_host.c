/*
 * Indexing operators computed on the host: those whose output shape
 * depends on values (NonZero, Unique, Range) and those made from a shape
 * alone (EyeLike, Size).  All fold when the plan is made.
 *
 * A data-dependent shape needs the values when the plan is made.  They
 * are there for integer and bool inputs (bound by value), constants,
 * anything folded from those, and float graph inputs small enough to be
 * bound by value too (exec.c's SMALL_INPUT).  A float tensor computed on
 * the device, or a large float graph input, is refused with an error
 * naming the operator: binding such inputs by value would make the plan
 * specific to one input's values (rebuilt for every new one, its device
 * work folded on the host), and the shape of a device result is not
 * known until the device has run, after the plan is made.
 */
#include <config.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

static shardnet_status need_host(const sn_node *n, const sn_rt *x,
                                 const char *what)
{
    if (sn_host_known(x))
        return SHARDNET_OK;
    return sn_node_error(n, SHARDNET_UNSUPPORTED,
                         "%s must be known when the model is planned (a "
                         "constant, an integer input or a small float "
                         "input): its values decide the output's shape, "
                         "and a tensor computed on the device has none "
                         "then",
                         what);
}

SN_LOWER(sn_lower_nonzero)
{
    sn_rt *x = sn_in(L, n, 0);
    size_t total = sn_rt_elements(x), nnz = 0;
    int r = x->rank ? x->rank : 1;
    int64_t od[2], *d, idx[SN_MAX_DIMS] = {0};
    shardnet_status st;

    if ((st = need_host(n, x, "the input")) != SHARDNET_OK)
        return st;
    for (size_t i = 0; i < total; i++)
        nnz += sn_rt_get_double(x, i) != 0.0;
    od[0] = x->rank; /* a scalar gives (0, nnz) as numpy does */
    od[1] = (int64_t)nnz;
    if (!(d = sn_host_alloc((size_t)r * nnz, sizeof *d)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s", n->op_type);
    for (size_t i = 0, m = 0; i < total; i++) {
        if (sn_rt_get_double(x, i) != 0.0) {
            for (int a = 0; a < x->rank; a++)
                d[(size_t)a * nnz + m] = idx[a];
            m++;
        }
        for (int a = x->rank - 1; a >= 0; a--) {
            if (++idx[a] < x->dims[a])
                break;
            idx[a] = 0;
        }
    }
    return sn_out_host(L, n, 0, SN_DT_INT64, 2, od, d);
}

/* --- Unique -------------------------------------------------------------- */

/* The items Unique compares: slice s is the elements (o, s, i) of x viewed
 * as (outer, len, inner), compared in C order. */
typedef struct items {
    const sn_rt *x;
    size_t outer, len, inner;
    int is_int;
} items;

static int cmp_items(const items *it, size_t a, size_t b)
{
    for (size_t o = 0; o < it->outer; o++)
        for (size_t i = 0; i < it->inner; i++) {
            size_t pa = (o * it->len + a) * it->inner + i;
            size_t pb = (o * it->len + b) * it->inner + i;
            if (it->is_int) {
                int64_t va = sn_rt_get_int(it->x, pa);
                int64_t vb = sn_rt_get_int(it->x, pb);
                if (va != vb)
                    return va < vb ? -1 : 1;
            } else {
                double va = sn_rt_get_double(it->x, pa);
                double vb = sn_rt_get_double(it->x, pb);
                if (va != vb)
                    return va < vb ? -1 : 1;
            }
        }
    return 0;
}

/* Stable merge sort of ord[0, n) by item (tmp: n entries of scratch). */
static void sort_items(const items *it, size_t *ord, size_t *tmp, size_t n)
{
    size_t h = n / 2, i = 0, j = h, k = 0;
    if (n < 2)
        return;
    sort_items(it, ord, tmp, h);
    sort_items(it, ord + h, tmp, n - h);
    while (i < h && j < n)
        tmp[k++] = cmp_items(it, ord[j], ord[i]) < 0 ? ord[j++] : ord[i++];
    while (i < h)
        tmp[k++] = ord[i++];
    while (j < n)
        tmp[k++] = ord[j++];
    memcpy(ord, tmp, n * sizeof *ord);
}

/* Unique's four outputs from the groups found: uniq[u] the first item of
 * group u (in output order), inv[s] the group of item s, cnt[u] sizes. */
static shardnet_status unique_outputs(sn_lower *L, const sn_node *n,
                                      const items *it, int ax,
                                      const size_t *uniq, const size_t *inv,
                                      const size_t *cnt, size_t nu)
{
    const sn_rt *x = it->x;
    int64_t od[SN_MAX_DIMS], *o1 = NULL, *o2 = NULL, *o3 = NULL;
    size_t es, blk;
    unsigned char *y;
    shardnet_status st;
    int r = ax < 0 ? 1 : x->rank;

    if ((st = sn_host_elem_size(n, x->dtype, &es)) != SHARDNET_OK)
        return st;
    if (!(y = sn_host_alloc(it->outer * nu * it->inner, es)) ||
        !(o1 = sn_host_alloc(nu, sizeof *o1)) ||
        !(o2 = sn_host_alloc(it->len, sizeof *o2)) ||
        !(o3 = sn_host_alloc(nu, sizeof *o3))) {
        free(y);
        free(o1);
        free(o2);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s", n->op_type);
    }
    blk = it->inner * es;
    for (size_t o = 0; o < it->outer; o++)
        for (size_t u = 0; u < nu; u++)
            memcpy(y + (o * nu + u) * blk,
                   (const unsigned char *)x->host +
                       (o * it->len + uniq[u]) * blk,
                   blk);
    for (size_t u = 0; u < nu; u++) {
        o1[u] = (int64_t)uniq[u];
        o3[u] = (int64_t)cnt[u];
    }
    for (size_t s = 0; s < it->len; s++)
        o2[s] = (int64_t)inv[s];
    if (ax < 0)
        od[0] = (int64_t)nu;
    else {
        memcpy(od, x->dims, (size_t)r * sizeof *od);
        od[ax] = (int64_t)nu;
    }
    int64_t du = (int64_t)nu, dl = (int64_t)it->len;
    void *data[4] = {y, o1, o2, o3};
    for (size_t i = 0; i < 4; i++) {
        void *d = data[i];
        data[i] = NULL;
        if (i >= n->noutputs || n->outputs[i] < 0) {
            free(d);
            continue;
        }
        if (st == SHARDNET_OK)
            st = i == 0 ? sn_out_host(L, n, 0, x->dtype, r, od, d)
                        : sn_out_host(L, n, i, SN_DT_INT64, 1,
                                      i == 2 ? &dl : &du, d);
        else
            free(d);
    }
    return st;
}

SN_LOWER(sn_lower_unique)
{
    sn_rt *x = sn_in(L, n, 0);
    const sn_attr *aa = sn_node_attr(n, "axis");
    int sorted = sn_attr_int(n, "sorted", 1) != 0, ax = -1;
    items it = {.x = x, .outer = 1, .inner = 1};
    size_t *ord, *tmp, *uniq, *inv, *cnt, nu = 0;
    shardnet_status st;

    if ((st = need_host(n, x, "the input")) != SHARDNET_OK)
        return st;
    it.is_int = sn_dtype_is_integer(x->dtype);
    if (aa) {
        if (x->rank < 1 || (ax = sn_axis(aa->i, x->rank)) < 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "axis %lld out of range for rank %d",
                                 (long long)aa->i, x->rank);
        it.outer = sn_dims_product(0, ax, x->dims);
        it.len = (size_t)x->dims[ax];
        it.inner = sn_dims_product(ax + 1, x->rank, x->dims);
    } else {
        it.len = sn_rt_elements(x);
    }
    size_t m = it.len ? it.len : 1;
    ord = sn_host_alloc(m, sizeof *ord);
    tmp = sn_host_alloc(m, sizeof *tmp);
    uniq = sn_host_alloc(m, sizeof *uniq);
    inv = sn_host_alloc(m, sizeof *inv);
    cnt = sn_host_alloc(m, sizeof *cnt);
    if (!ord || !tmp || !uniq || !inv || !cnt) {
        st = sn_error(SHARDNET_OUT_OF_MEMORY, "%s", n->op_type);
        goto done;
    }
    for (size_t s = 0; s < it.len; s++)
        ord[s] = s;
    /* sorted by value, equal items by position: each group's first item
     * is its first occurrence */
    sort_items(&it, ord, tmp, it.len);
    for (size_t s = 0; s < it.len; s++) {
        if (s == 0 || cmp_items(&it, ord[s - 1], ord[s])) {
            uniq[nu] = ord[s];
            cnt[nu++] = 0;
        }
        cnt[nu - 1]++;
        tmp[ord[s]] = nu - 1; /* item -> group in value order */
    }
    if (!sorted) { /* groups in the order of their first occurrence */
        size_t *rank_of = ord, *first = inv;
        for (size_t u = 0; u < nu; u++)
            first[u] = uniq[u];
        for (size_t s = 0, k = 0; s < it.len; s++)
            if (first[tmp[s]] == s) /* group of item s starts here */
                rank_of[tmp[s]] = k++;
        for (size_t u = 0; u < nu; u++) {
            uniq[rank_of[u]] = first[u];
            inv[u] = cnt[u]; /* first[] is no longer needed */
        }
        for (size_t u = 0; u < nu; u++)
            cnt[rank_of[u]] = inv[u];
        for (size_t s = 0; s < it.len; s++)
            tmp[s] = rank_of[tmp[s]];
    }
    memcpy(inv, tmp, it.len * sizeof *inv);
    st = unique_outputs(L, n, &it, ax, uniq, inv, cnt, nu);
done:
    free(ord);
    free(tmp);
    free(uniq);
    free(inv);
    free(cnt);
    return st;
}

/* --- Range, EyeLike, Size ------------------------------------------------ */

SN_LOWER(sn_lower_range)
{
    sn_rt *in[3];
    int64_t len = 0, od[1];
    size_t es;
    void *d;
    shardnet_status st;

    for (size_t i = 0; i < 3; i++) {
        in[i] = sn_in(L, n, i);
        if ((st = need_host(n, in[i], "start, limit and delta")) != SHARDNET_OK)
            return st;
        if (sn_rt_elements(in[i]) != 1 || in[i]->dtype != in[0]->dtype)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "start, limit and delta must be scalars "
                                 "of one type");
    }
    sn_dtype t = in[0]->dtype;
    int is_int = sn_dtype_is_integer(t);
    if ((st = sn_host_elem_size(n, t, &es)) != SHARDNET_OK)
        return st;
    if (is_int) {
        int64_t s = sn_rt_get_int(in[0], 0), l = sn_rt_get_int(in[1], 0);
        int64_t dl = sn_rt_get_int(in[2], 0);
        if (dl == 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT, "delta is 0");
        /* in double: limit - start may overflow int64 */
        double c = ceil(((double)l - (double)s) / (double)dl);
        len = c > 0 ? (c < 1e18 ? (int64_t)c : INT64_MAX) : 0;
    } else {
        double s = sn_rt_get_double(in[0], 0), l = sn_rt_get_double(in[1], 0);
        double dl = sn_rt_get_double(in[2], 0), c = ceil((l - s) / dl);
        if (dl == 0 || isnan(c))
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "delta is 0, or a bound is not a number");
        len = c > 0 ? (c < 1e18 ? (int64_t)c : INT64_MAX) : 0;
    }
    if (len > (int64_t)(SN_MAX_HOST_FOLD / es) ||
        !(d = sn_host_alloc((size_t)len, es)))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "%lld elements are too many", (long long)len);
    for (int64_t i = 0; i < len; i++) {
        if (is_int)
            sn_store_value(
                t, d, (size_t)i, 0,
                (int64_t)((uint64_t)sn_rt_get_int(in[0], 0) +
                          (uint64_t)i * (uint64_t)sn_rt_get_int(in[2], 0)),
                1);
        else
            sn_store_value(t, d, (size_t)i,
                           sn_rt_get_double(in[0], 0) +
                               (double)i * sn_rt_get_double(in[2], 0),
                           0, 0);
    }
    od[0] = len;
    return sn_out_host(L, n, 0, t, 1, od, d);
}

SN_LOWER(sn_lower_eyelike)
{
    sn_rt *x = sn_in(L, n, 0);
    const sn_attr *dt = sn_node_attr(n, "dtype");
    int64_t k = sn_attr_int(n, "k", 0), rows, cols;
    sn_dtype t = dt ? (sn_dtype)dt->i : x->dtype;
    size_t es;
    void *d;
    shardnet_status st;

    if (x->rank != 2)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "input of rank %d, not 2", x->rank);
    if (dt && (dt->i <= SN_DT_UNDEFINED || dt->i > SN_DT_BFLOAT16))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT, "unknown dtype %lld",
                             (long long)dt->i);
    if ((st = sn_host_elem_size(n, t, &es)) != SHARDNET_OK)
        return st;
    rows = x->dims[0];
    cols = x->dims[1];
    if (!(d = sn_host_alloc(sn_rt_elements(x), es)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s", n->op_type);
    memset(d, 0, sn_rt_elements(x) * es);
    for (int64_t r = 0; r < rows; r++) {
        /* k beyond the matrix leaves it all zeros */
        if (k < cols && k > -rows && r + k >= 0 && r + k < cols)
            sn_store_value(t, d, (size_t)(r * cols + r + k), 1.0, 1, 0);
    }
    return sn_out_host(L, n, 0, t, 2, x->dims, d);
}

SN_LOWER(sn_lower_size)
{
    sn_rt *x = sn_in(L, n, 0);
    int64_t *d = malloc(sizeof *d);
    if (!d)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "%s", n->op_type);
    *d = (int64_t)sn_rt_elements(x);
    return sn_out_host(L, n, 0, SN_DT_INT64, 0, NULL, d);
}
