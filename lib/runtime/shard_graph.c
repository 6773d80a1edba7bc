/*
 * The building blocks of the tensor split's device graphs: values and
 * constants added to every device's graph alike, weights cut into shards,
 * nodes copied with their attributes, and the conversions between layouts
 * that the shard rules ask for through sn_shard_to_layout(), written as a
 * collective node or a local slice where the layout algebra
 * (lib/plan/tensor_layout.h) says which.
 */
#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"
#include "runtime/shard_build.h"

void sn_shard_say(bld *b, const char *fmt, ...)
{
    va_list ap;
    if (b->desc_cap - b->desc_len < 512) {
        size_t cap = b->desc_cap ? 2 * b->desc_cap : 4096;
        char *d = realloc(b->desc, cap);
        if (!d)
            return;
        b->desc = d;
        b->desc_cap = cap;
    }
    va_start(ap, fmt);
    int k = vsnprintf(b->desc + b->desc_len, b->desc_cap - b->desc_len, fmt,
                      ap);
    va_end(ap);
    if (k > 0)
        b->desc_len += (size_t)k < b->desc_cap - b->desc_len
                           ? (size_t)k
                           : b->desc_cap - b->desc_len - 1;
}

/* --- building the device graphs ------------------------------------------- */

/* A value named like `base` plus a suffix, in every device graph. */
int sn_shard_new_value(bld *b, const char *base, const char *suffix)
{
    char name[SN_MAX_NAME + 32];
    int idx = -1;
    if (suffix)
        snprintf(name, sizeof name, "%s#%s%u", base, suffix, ++b->counter);
    else
        snprintf(name, sizeof name, "%s", base);
    for (size_t d = 0; d < b->n; d++) {
        int k = sn_graph_add_value(b->sub[d], name);
        if (k < 0 || (idx >= 0 && k != idx))
            return -1;
        idx = k;
    }
    return idx;
}

/* Make value k of every device graph a constant: data[d] (taken). */
static void set_const(bld *b, int k, sn_dtype dt, int rank,
                      int64_t (*dims)[SN_MAX_DIMS], void **data)
{
    for (size_t d = 0; d < b->n; d++) {
        sn_value *v = &b->sub[d]->values[k];
        v->dtype = dt;
        v->rank = rank;
        memcpy(v->dims, dims[d], sizeof v->dims);
        v->data = v->owned = data[d];
        v->nbytes = prod(dims[d], 0, rank) * sn_dtype_size(dt);
        v->flags |= SN_VALUE_CONST;
        data[d] = NULL;
    }
}

/* The constant v, whole, shared with the model graph (borrowed data). */
static int const_r(bld *b, int v)
{
    const sn_value *pv = &b->g->values[v];
    if (b->vi[v].cnst_r >= 0)
        return b->vi[v].cnst_r;
    int k = sn_shard_new_value(b, pv->name, NULL);
    if (k < 0)
        return -1;
    for (size_t d = 0; d < b->n; d++) {
        sn_value *sv = &b->sub[d]->values[k];
        sv->dtype = pv->dtype;
        sv->rank = pv->rank;
        memcpy(sv->dims, pv->dims, sizeof sv->dims);
        sv->data = pv->data;
        sv->nbytes = pv->nbytes;
        sv->flags |= pv->flags & (SN_VALUE_CONST | SN_VALUE_MAPPED);
    }
    b->vi[v].cnst_r = k;
    return k;
}

/*
 * Constant v cut along `axis` by cnt (or, with rank0_only, whole on device
 * 0 and zeros elsewhere: a bias added once to partial sums).
 */
static int const_cut(bld *b, int v, int axis, const size_t *cnt,
                     int rank0_only)
{
    const sn_value *pv = &b->g->values[v];
    size_t es = sn_dtype_size(pv->dtype);
    int64_t dims[MAXD][SN_MAX_DIMS];
    void *data[MAXD] = {0};
    int k = sn_shard_new_value(b, pv->name, rank0_only ? "bias" : "shard");
    if (k < 0 || !es)
        return -1;
    size_t outer = prod(pv->dims, 0, axis),
           inner = prod(pv->dims, axis + 1, pv->rank) * es,
           whole = (size_t)pv->dims[axis], at = 0;
    /* Cut along its outermost axis, each device's part is one run of the
     * whole: borrowed where it lies (in the model's mapped file, each
     * device then reads and holds only its own part), not copied. */
    if (!rank0_only && outer == 1) {
        for (size_t d = 0; d < b->n; d++) {
            sn_value *sv = &b->sub[d]->values[k];
            sv->dtype = pv->dtype;
            sv->rank = pv->rank;
            memcpy(sv->dims, pv->dims, sizeof sv->dims);
            sv->dims[axis] = (int64_t)cnt[d];
            sv->nbytes = cnt[d] * inner;
            sv->data = (const char *)pv->data + at * inner;
            sv->flags |= pv->flags & (SN_VALUE_CONST | SN_VALUE_MAPPED);
            at += cnt[d];
        }
        return k;
    }
    for (size_t d = 0; d < b->n; d++) {
        memcpy(dims[d], pv->dims, sizeof dims[d]);
        if (!rank0_only)
            dims[d][axis] = (int64_t)cnt[d];
        size_t bytes = prod(dims[d], 0, pv->rank) * es;
        data[d] = calloc(bytes ? bytes : 1, 1);
        if (!data[d])
            goto fail;
        if (rank0_only) {
            if (d == 0)
                memcpy(data[d], pv->data, bytes);
            continue;
        }
        for (size_t o = 0; o < outer; o++)
            memcpy((char *)data[d] + o * cnt[d] * inner,
                   (const char *)pv->data + (o * whole + at) * inner,
                   cnt[d] * inner);
        at += cnt[d];
    }
    /* Every part copied: the file's pages the copies read may go. */
    sn_value_drop_pages(pv);
    set_const(b, k, pv->dtype, pv->rank, dims, data);
    return k;
fail:
    for (size_t d = 0; d < b->n; d++)
        free(data[d]);
    return -1;
}

/* int64 constants, one per device: vals[d][0..len). */
int sn_shard_const_i64(bld *b, const char *base, size_t len,
                     int64_t (*vals)[SN_MAX_DIMS])
{
    int64_t dims[MAXD][SN_MAX_DIMS] = {{0}};
    void *data[MAXD] = {0};
    int k = sn_shard_new_value(b, base, "c");
    if (k < 0)
        return -1;
    for (size_t d = 0; d < b->n; d++) {
        dims[d][0] = (int64_t)len;
        data[d] = malloc(len * sizeof(int64_t) + 1);
        if (!data[d]) {
            for (size_t e = 0; e < d; e++)
                free(data[e]);
            return -1;
        }
        memcpy(data[d], vals[d], len * sizeof(int64_t));
    }
    set_const(b, k, SN_DT_INT64, 1, dims, data);
    return k;
}

/* Add a node to every device graph, attributes copied from `like` (may be
 * NULL) except the one named `drop`.  Its index, or -1. */
int sn_shard_add_node(bld *b, const sn_node *like, const char *op,
                    const char *domain, const int *in, size_t nin,
                    const int *out, size_t nout, const char *drop)
{
    int idx = -1;
    char name[SN_MAX_NAME + 32];
    snprintf(name, sizeof name, "%s#%u", like ? like->name : op,
             ++b->counter);
    for (size_t j = 0; like && j < like->nattrs; j++)
        if (like->attrs[j].type == SN_ATTR_TENSOR &&
            like->attrs[j].tensor >= 0 &&
            const_r(b, like->attrs[j].tensor) < 0)
            return -1;
    for (size_t d = 0; d < b->n; d++) {
        int k = sn_graph_add_node(b->sub[d], like ? like->name : name, op,
                                  domain, in, nin, out, nout);
        if (k < 0 || (idx >= 0 && k != idx))
            return -1;
        idx = k;
        if (!like || !like->nattrs)
            continue;
        sn_node *sn = &b->sub[d]->nodes[k];
        sn->attrs = calloc(like->nattrs, sizeof *sn->attrs);
        if (!sn->attrs)
            return -1;
        for (size_t j = 0; j < like->nattrs; j++) {
            const sn_attr *a = &like->attrs[j];
            if (drop && !strcmp(a->name, drop))
                continue;
            /* A TENSOR attribute names a constant: this graph's copy of it
             * (made before the loop). */
            sn_attr plain = *a;
            plain.tensor = -1;
            sn_attr *d_attr = &sn->attrs[sn->nattrs++];
            if (!sn_attr_copy(d_attr, &plain, NULL))
                return -1;
            if (a->type == SN_ATTR_TENSOR && a->tensor >= 0)
                d_attr->tensor = b->vi[a->tensor].cnst_r;
        }
    }
    return idx;
}

/* Set integer attribute `name` of node k on device d (added if absent). */
int sn_shard_set_int_attr(bld *b, int k, size_t d, const char *name,
                        int64_t v)
{
    sn_node *n = &b->sub[d]->nodes[k];
    for (size_t j = 0; j < n->nattrs; j++)
        if (!strcmp(n->attrs[j].name, name)) {
            n->attrs[j].type = SN_ATTR_INT;
            n->attrs[j].i = v;
            return 0;
        }
    sn_attr *a = sn_node_add_attr(n, name, SN_ATTR_INT);
    if (!a)
        return -1;
    a->i = v;
    return 0;
}

void sn_shard_remember(bld *b, int v, int sub, const sn_layout *l)
{
    vinfo *vi = &b->vi[v];
    int at = vi->nv < NVER ? vi->nv++ : NVER - 1;
    vi->v[at].sub = sub;
    vi->v[at].l = *l;
}

/* A collective node turning value x (sub index, of model value v, layout
 * `from`) into layout `to`: of v's elements, or `elements` where not 0
 * (parts of v gathered along an axis of their own). */
static int collective(bld *b, int v, int x, sn_coll_kind kind,
                      const sn_layout *to, size_t elements)
{
    const sn_rt *fs = full(b, v);
    int y = sn_shard_new_value(b, b->g->values[v].name,
                               kind == SN_COLL_ALLREDUCE   ? "allreduce"
                               : kind == SN_COLL_ALLGATHER ? "allgather"
                                                           : "reducescatter");
    if (y < 0 || !fs)
        return -1;
    int k = sn_shard_add_node(b, NULL, "ShardCollective", "ai.shardnet", &x, 1,
                              &y, 1, NULL);
    if (k < 0)
        return -1;
    for (size_t d = 0; d < b->n; d++) {
        sn_node *nd = &b->sub[d]->nodes[k];
        sn_attr *a;
        if (sn_shard_set_int_attr(b, k, d, "kind", kind) ||
            sn_shard_set_int_attr(b, k, d, "rank", (int64_t)d))
            return -1;
        if (kind != SN_COLL_ALLREDUCE) {
            nd = &b->sub[d]->nodes[k];
            if (sn_shard_set_int_attr(b, k, d, "axis", to->axis))
                return -1;
            nd = &b->sub[d]->nodes[k];
            if (!(a = sn_node_add_attr(nd, "counts", SN_ATTR_INTS)) ||
                !(a->ints = malloc(b->n * sizeof *a->ints)))
                return -1;
            a->count = b->n;
            for (size_t e = 0; e < b->n; e++)
                a->ints[e] = (int64_t)to->cnt[e];
        }
    }
    double bytes = sn_layout_collective_bytes(elements ? elements
                                                       : sn_rt_elements(fs));
    sn_shard_say(b, "  %s of '%s' (%.2f MB)\n",
                 kind == SN_COLL_ALLREDUCE   ? "all-reduce"
                 : kind == SN_COLL_ALLGATHER ? "all-gather"
                                             : "reduce-scatter",
                 b->g->values[v].name, bytes / 1e6);
    b->ncoll++;
    b->coll_bytes += bytes;
    return y;
}

/* --- a product cut on a mesh (shard_products.c's mixed cut) ------------- */

int sn_shard_const_blocks(bld *b, int v, const size_t (*at)[2],
                          const size_t (*cnt)[2])
{
    const sn_value *pv = &b->g->values[v];
    size_t es = sn_dtype_size(pv->dtype), cols = (size_t)pv->dims[1];
    int64_t dims[MAXD][SN_MAX_DIMS] = {{0}};
    void *data[MAXD] = {0};
    int k = pv->rank == 2 && es ? sn_shard_new_value(b, pv->name, "block")
                                : -1;
    for (size_t d = 0; k >= 0 && d < b->n; d++) {
        dims[d][0] = (int64_t)cnt[d][0];
        dims[d][1] = (int64_t)cnt[d][1];
        char *p = data[d] = malloc(cnt[d][0] * cnt[d][1] * es + 1);
        if (!p) {
            for (size_t e = 0; e < d; e++)
                free(data[e]);
            return -1;
        }
        for (size_t i = 0; i < cnt[d][0]; i++)
            memcpy(p + i * cnt[d][1] * es,
                   (const char *)pv->data +
                       ((at[d][0] + i) * cols + at[d][1]) * es,
                   cnt[d][1] * es);
    }
    if (k < 0)
        return -1;
    /* Every block copied: the file's pages the copies read may go. */
    sn_value_drop_pages(pv);
    set_const(b, k, pv->dtype, 2, dims, data);
    return k;
}

int sn_shard_reshape(bld *b, int v, int x, const int64_t *dims, int rank)
{
    int64_t shape[MAXD][SN_MAX_DIMS];
    for (size_t d = 0; d < b->n; d++)
        memcpy(shape[d], dims, (size_t)rank * sizeof *dims);
    const char *base = b->g->values[v].name;
    int c = sn_shard_const_i64(b, base, (size_t)rank, shape),
        y = sn_shard_new_value(b, base, "reshape");
    int in[2] = {x, c};
    if (c < 0 || y < 0 ||
        sn_shard_add_node(b, NULL, "Reshape", "", in, 2, &y, 1, NULL) < 0)
        return -1;
    return y;
}

int sn_shard_gather_parts(bld *b, int v, int x, const int64_t *dims,
                          int rank)
{
    int64_t one[SN_MAX_DIMS] = {1};
    memcpy(one + 1, dims, (size_t)rank * sizeof *dims);
    size_t cnt[MAXD];
    for (size_t d = 0; d < b->n; d++)
        cnt[d] = 1;
    sn_layout all = sn_layout_s(0, cnt, b->n);
    int y = sn_shard_reshape(b, v, x, one, rank + 1);
    return y < 0 ? -1
                 : collective(b, v, y, SN_COLL_ALLGATHER, &all,
                              b->n * prod(dims, 0, rank));
}

/* Set integer-list attribute `name` of node k on device d to vals[0..len). */
static int set_ints_attr(bld *b, int k, size_t d, const char *name,
                         const int64_t *vals, size_t len)
{
    sn_attr *a = sn_node_add_attr(&b->sub[d]->nodes[k], name, SN_ATTR_INTS);
    if (!a || !(a->ints = malloc(len * sizeof *a->ints)))
        return -1;
    memcpy(a->ints, vals, len * sizeof *a->ints);
    a->count = len;
    return 0;
}

int sn_shard_slice(bld *b, int v, int x, size_t naxes,
                   int64_t (*st)[SN_MAX_DIMS], int64_t (*en)[SN_MAX_DIMS],
                   int64_t (*ax)[SN_MAX_DIMS])
{
    const char *base = b->g->values[v].name;
    int y = sn_shard_new_value(b, base, "slice");
    if (y < 0)
        return -1;
    if (sn_param_input("Slice", "starts", b->g->opset, NULL) < 0) {
        int k = sn_shard_add_node(b, NULL, "Slice", "", &x, 1, &y, 1, NULL);
        for (size_t d = 0; k >= 0 && d < b->n; d++)
            if (set_ints_attr(b, k, d, "starts", st[d], naxes) ||
                set_ints_attr(b, k, d, "ends", en[d], naxes) ||
                set_ints_attr(b, k, d, "axes", ax[d], naxes))
                k = -1;
        return k < 0 ? -1 : y;
    }
    int s = sn_shard_const_i64(b, base, naxes, st),
        e = sn_shard_const_i64(b, base, naxes, en),
        a = sn_shard_const_i64(b, base, naxes, ax);
    if (s < 0 || e < 0 || a < 0)
        return -1;
    int in[4] = {x, s, e, a};
    if (sn_shard_add_node(b, NULL, "Slice", "", in, 4, &y, 1, NULL) < 0)
        return -1;
    return y;
}

/* A local slice of x (model value v, whole on every device) to layout to. */
static int local_slice(bld *b, int v, int x, const sn_layout *to)
{
    int64_t st[MAXD][SN_MAX_DIMS], en[MAXD][SN_MAX_DIMS],
        ax[MAXD][SN_MAX_DIMS];
    for (size_t d = 0; d < b->n; d++) {
        size_t at = sn_layout_offset(to, d);
        st[d][0] = (int64_t)at;
        en[d][0] = (int64_t)(at + to->cnt[d]);
        ax[d][0] = to->axis;
    }
    return sn_shard_slice(b, v, x, 1, st, en, ax);
}

int sn_shard_assemble_parts(bld *b, int v, int x, const int64_t *tile,
                            int rank, int axis, const unsigned parts[3])
{
    const sn_rt *fv = full(b, v);
    if (!fv || rank + 3 > SN_MAX_DIMS)
        return -1;
    int y = sn_shard_gather_parts(b, v, x, tile, rank);
    /* [devices, tile] as [p, q, r, tile], the q parts summed */
    int64_t mesh[SN_MAX_DIMS] = {parts[0], parts[1], parts[2]};
    memcpy(mesh + 3, tile, (size_t)rank * sizeof *tile);
    if (y >= 0 && parts[1] > 1) {
        int z = sn_shard_new_value(b, b->g->values[v].name, "sum");
        int64_t one[MAXD][SN_MAX_DIMS];
        for (size_t d = 0; d < b->n; d++)
            one[d][0] = 1;
        y = sn_shard_reshape(b, v, y, mesh, rank + 3);
        int in[2] = {y, -1}, k = -1;
        if (y >= 0 && z >= 0 &&
            sn_param_input("ReduceSum", "axes", b->g->opset, NULL) < 0) {
            k = sn_shard_add_node(b, NULL, "ReduceSum", "", in, 1, &z, 1,
                                  NULL);
            for (size_t d = 0; k >= 0 && d < b->n; d++)
                if (set_ints_attr(b, k, d, "axes", one[d], 1))
                    k = -1;
        } else if (y >= 0 && z >= 0 &&
                   (in[1] = sn_shard_const_i64(b, b->g->values[v].name, 1,
                                               one)) >= 0) {
            k = sn_shard_add_node(b, NULL, "ReduceSum", "", in, 2, &z, 1,
                                  NULL);
        }
        for (size_t d = 0; k >= 0 && d < b->n; d++)
            if (sn_shard_set_int_attr(b, k, d, "keepdims", 0))
                k = -1;
        y = k < 0 ? -1 : z;
    } else if (y >= 0) {
        mesh[1] = parts[2];
        memcpy(mesh + 2, tile, (size_t)rank * sizeof *tile);
        y = sn_shard_reshape(b, v, y, mesh, rank + 2);
    }
    /* [p, r, tile] to the value's order: p before the tile's cut axis
     * (first where the data is not cut: p is 1), r before its last */
    int64_t perm[SN_MAX_DIMS];
    int np = 0;
    if (axis < 0)
        perm[np++] = 0;
    for (int k = 0; k < rank; k++) {
        if (k == axis)
            perm[np++] = 0;
        if (k == rank - 1)
            perm[np++] = 1;
        perm[np++] = 2 + k;
    }
    int t = y < 0 ? -1 : sn_shard_new_value(b, b->g->values[v].name, "t");
    int k = t < 0 ? -1
                  : sn_shard_add_node(b, NULL, "Transpose", "", &y, 1, &t, 1,
                                      NULL);
    for (size_t d = 0; k >= 0 && d < b->n; d++)
        if (set_ints_attr(b, k, d, "perm", perm, (size_t)np))
            k = -1;
    return k < 0 ? -1 : sn_shard_reshape(b, v, t, fv->dims, fv->rank);
}

/*
 * Model value v in layout `want` on every device: a version already made,
 * or one converted from it (and remembered).  -1 with an error set when it
 * cannot be (non-float data across devices, or out of memory).
 */
int sn_shard_to_layout(bld *b, int v, const sn_layout *want)
{
    vinfo *vi = &b->vi[v];
    if (is_const(b, v)) {
        if (want->kind == SN_LAY_R)
            return const_r(b, v);
        for (int i = 0; i < vi->nv; i++)
            if (sn_layout_eq(&vi->v[i].l, want, b->n))
                return vi->v[i].sub;
        int k = want->kind == SN_LAY_S
                    ? const_cut(b, v, want->axis, want->cnt, 0)
                    : const_cut(b, v, 0, NULL, 1);
        if (k >= 0)
            sn_shard_remember(b, v, k, want);
        return k;
    }
    for (int i = 0; i < vi->nv; i++)
        if (sn_layout_eq(&vi->v[i].l, want, b->n))
            return vi->v[i].sub;
    if (!vi->nv)
        return -1;
    if (!is_float(b, v)) {
        b->why = sn_error(SHARDNET_UNSUPPORTED,
                 "tensor split: value '%s' is not float and cannot move "
                 "between devices",
                 b->g->values[v].name);
        return -1;
    }
    const version *have = &vi->v[0];
    for (int i = 0; i < vi->nv; i++)
        if (vi->v[i].l.kind == SN_LAY_R)
            have = &vi->v[i];
    int y = -1;
    switch (sn_layout_convert(&have->l, want)) {
    case SN_CONVERT_ALLREDUCE:
        y = collective(b, v, have->sub, SN_COLL_ALLREDUCE, &have->l, 0);
        if (y >= 0) {
            /* The all-reduce sums in place: from here on the partial
             * sums' buffer holds the sum, so the partial version is gone
             * (a later reader taking it as partial sums, an Add of it
             * and other partial sums, counted it once per device). */
            version *p = &vi->v[have - vi->v];
            p->sub = y;
            p->l = sn_layout_r();
            return y;
        }
        break;
    case SN_CONVERT_ALLGATHER:
        y = collective(b, v, have->sub, SN_COLL_ALLGATHER, &have->l, 0);
        break;
    case SN_CONVERT_REDUCE_SCATTER:
        y = collective(b, v, have->sub, SN_COLL_REDUCE_SCATTER, want, 0);
        break;
    case SN_CONVERT_SLICE:
        y = local_slice(b, v, have->sub, want);
        break;
    case SN_CONVERT_GATHER_SLICE: {
        sn_layout r = sn_layout_r();
        int x = sn_shard_to_layout(b, v, &r);
        vi = &b->vi[v];
        y = x < 0 ? -1 : local_slice(b, v, x, want);
        break;
    }
    case SN_CONVERT_NONE:
        b->why = sn_error(SHARDNET_INTERNAL,
                          "tensor split: no conversion to partial sums");
        return -1;
    }
    if (y >= 0)
        sn_shard_remember(b, v, y, want);
    return y;
}

/* The current (first) layout of model value v; R for constants. */
const sn_layout *sn_shard_layout_of(const bld *b, int v)
{
    static const sn_layout r = {.kind = SN_LAY_R};
    if (v < 0 || is_const(b, v) || !b->vi[v].nv)
        return &r;
    return &b->vi[v].v[0].l;
}

/* Output j of node n, as a fresh value named like the model's. */
int sn_shard_out_value(bld *b, const sn_node *n, size_t j)
{
    if (n->outputs[j] < 0)
        return -1;
    return sn_shard_new_value(b, b->g->values[n->outputs[j]].name, NULL);
}

/* Partial sums v reduce-scattered along `axis`, or R when that axis is
 * too small (sn_layout_cut_axis). */
sn_layout sn_shard_p_target_axis(const bld *b, int v, int axis)
{
    const sn_rt *fs = full(b, v);
    return fs ? sn_layout_cut_axis(b->speed, b->n, fs->dims, fs->rank, axis)
              : sn_layout_r();
}

/* Where partial sums v go before a non-linear op
 * (sn_layout_reduce_target). */
sn_layout sn_shard_p_target(const bld *b, int v)
{
    const sn_rt *fs = full(b, v);
    return fs ? sn_layout_reduce_target(b->speed, b->n, fs->dims, fs->rank)
              : sn_layout_r();
}

/* Copy node n with inputs in[] (sub indices); outputs get the layout l. */
shardnet_status sn_shard_emit_copy(bld *b, const sn_node *n, const int *in,
                                 const sn_layout *l, const char *drop)
{
    int out[16];
    if (n->noutputs > 16)
        return sn_error(SHARDNET_UNSUPPORTED, "tensor split: node '%s' has "
                        "too many outputs", n->name);
    for (size_t j = 0; j < n->noutputs; j++) {
        out[j] = -1;
        if (n->outputs[j] >= 0 && (out[j] = sn_shard_out_value(b, n, j)) < 0)
            return oom();
    }
    if (sn_shard_add_node(b, n, n->op_type, n->domain, in, n->ninputs, out,
                          n->noutputs, drop) < 0)
        return oom();
    for (size_t j = 0; j < n->noutputs; j++)
        if (out[j] >= 0)
            sn_shard_remember(b, n->outputs[j], out[j], l);
    return SHARDNET_OK;
}

/* Every input whole, the node computed whole on every device. */
shardnet_status sn_shard_replicate(bld *b, const sn_node *n)
{
    sn_layout r = sn_layout_r();
    int *in = malloc((n->ninputs + 1) * sizeof *in);
    shardnet_status st;
    if (!in)
        return oom();
    for (size_t j = 0; j < n->ninputs; j++) {
        in[j] = -1;
        if (n->inputs[j] >= 0 &&
            (in[j] = sn_shard_to_layout(b, n->inputs[j], &r)) < 0) {
            free(in);
            return failed(b);
        }
    }
    st = sn_shard_emit_copy(b, n, in, &r, NULL);
    free(in);
    return st;
}
