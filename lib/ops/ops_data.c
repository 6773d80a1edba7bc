/*
 * Data movement, the operators that move elements without arithmetic:
 * Transpose, Concat, Split, Slice, Gather, Expand and Where.  They compute
 * on the host when their inputs are host values (shape arithmetic: any
 * element type, copied byte for byte), and otherwise emit strided copies
 * (or gather / where steps) on the device.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* dst (contiguous, C order over shape) = src elements at off + sum of
 * index * stride, es bytes each. */
static void host_strided(void *dst, const void *src, size_t es, int rank,
                         const int64_t *shape, const int64_t *stride,
                         int64_t off)
{
    int64_t idx[SN_MAX_DIMS] = {0}, pos = off;
    size_t total = sn_dims_product(0, rank, shape);
    unsigned char *d = dst;
    const unsigned char *s = src;
    for (size_t k = 0; k < total; k++) {
        memcpy(d + k * es, s + (size_t)pos * es, es);
        sn_index_next(rank, shape, idx, stride, &pos);
    }
}

/*
 * One copy step: dst[sum i * dst_stride] = src[sum i * src_stride] over
 * shape.  Dimensions of size 1 are dropped and dimensions that are
 * contiguous in both src and dst merged; nothing is emitted for an empty
 * shape.
 */
static shardnet_status emit_copy(sn_lower *L, const sn_node *n, sn_view src,
                                 sn_view dst, int rank, const int64_t *shape,
                                 const int64_t *sstr, const int64_t *dstr)
{
    sn_step s = {.kind = SN_KERNEL_COPY};
    sn_copy_desc *c = &s.u.copy;
    size_t r = 0;
    for (int i = 0; i < rank; i++) {
        if (shape[i] == 0)
            return SHARDNET_OK;
        if (shape[i] == 1)
            continue;
        if (r > 0 && c->src_stride[r - 1] == (ptrdiff_t)(sstr[i] * shape[i]) &&
            c->dst_stride[r - 1] == (ptrdiff_t)(dstr[i] * shape[i])) {
            c->shape[r - 1] *= (size_t)shape[i];
            c->src_stride[r - 1] = (ptrdiff_t)sstr[i];
            c->dst_stride[r - 1] = (ptrdiff_t)dstr[i];
            continue;
        }
        c->shape[r] = (size_t)shape[i];
        c->src_stride[r] = (ptrdiff_t)sstr[i];
        c->dst_stride[r] = (ptrdiff_t)dstr[i];
        r++;
    }
    if (r == 0) {
        c->shape[0] = 1;
        c->src_stride[0] = c->dst_stride[0] = 1;
        r = 1;
    }
    c->rank = r;
    c->src = src;
    c->dst = dst;
    return sn_emit(L, n, &s);
}

SN_LOWER(sn_lower_transpose)
{
    sn_rt *x = sn_in(L, n, 0), *out;
    int64_t perm[SN_MAX_DIMS], od[SN_MAX_DIMS], xs[SN_MAX_DIMS];
    int64_t ss[SN_MAX_DIMS], ds[SN_MAX_DIMS];
    int seen[SN_MAX_DIMS] = {0}, given, r = x->rank;
    size_t np;
    shardnet_status st;
    sn_view vx;

    if ((st = sn_attr_ints(n, "perm", perm, SN_MAX_DIMS, &np, &given)))
        return st;
    if (!given) {
        for (int i = 0; i < r; i++)
            perm[i] = r - 1 - i;
    } else if (np != (size_t)r) {
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "perm has %zu values for an input of rank %d",
                             np, r);
    }
    for (int i = 0; i < r; i++) {
        if (perm[i] < 0 || perm[i] >= r || seen[perm[i]]++)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "perm is not a permutation of 0..%d", r - 1);
    }
    sn_strides(r, x->dims, xs);
    for (int i = 0; i < r; i++) {
        od[i] = x->dims[perm[i]];
        ss[i] = xs[perm[i]];
    }
    if (sn_host_known(x)) {
        size_t es;
        void *d;
        if ((st = sn_host_elem_size(n, x->dtype, &es)) != SHARDNET_OK)
            return st;
        if (!(d = sn_host_alloc(sn_rt_elements(x), es)))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "transpose");
        host_strided(d, x->host, es, r, od, ss, 0);
        return sn_out_host(L, n, 0, x->dtype, r, od, d);
    }
    /* Only unit dimensions move: the data stays as it is. */
    int moves = 0;
    for (int i = 0, last = -1; i < r; i++) {
        if (od[i] == 1)
            continue;
        moves |= perm[i] < last;
        last = (int)perm[i];
    }
    if (!moves)
        return sn_out_alias(L, n, 0, x, r, od);
    if ((st = sn_out_device_as(L, n, x->dtype, r, od, &out)) !=
        SHARDNET_OK)
        return st;
    if ((st = sn_dev_view(L, n, x, &vx)) != SHARDNET_OK)
        return st;
    sn_strides(r, od, ds);
    return emit_copy(L, n, vx, out->view, r, od, ss, ds);
}

SN_LOWER(sn_lower_concat)
{
    sn_rt *first = sn_in(L, n, 0), *out;
    const sn_attr *aa = sn_node_attr(n, "axis");
    int64_t axis, od[SN_MAX_DIMS];
    int ax, all_host = 1, r;
    shardnet_status st;

    if (!first)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "input 0 is missing");
    if (aa && aa->type == SN_ATTR_INT)
        axis = aa->i;
    else if (!aa && L->g->opset < 4)
        axis = 1;
    else
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "needs an integer attribute 'axis'");
    r = first->rank;
    if (r < 1 || (ax = sn_axis(axis, r)) < 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "axis %lld out of range for rank %d",
                             (long long)axis, r);
    memcpy(od, first->dims, (size_t)r * sizeof *od);
    od[ax] = 0;
    for (size_t i = 0; i < n->ninputs; i++) {
        sn_rt *in = sn_in(L, n, i);
        if (!in)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "input %zu is missing", i);
        if (in->rank != r || in->dtype != first->dtype)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "input %zu is %s of rank %d; input 0 is %s "
                                 "of rank %d",
                                 i, sn_dtype_name(in->dtype), in->rank,
                                 sn_dtype_name(first->dtype), r);
        for (int d = 0; d < r; d++)
            if (d != ax && in->dims[d] != first->dims[d])
                return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                     "input %zu differs from input 0 in "
                                     "dimension %d (%lld, %lld)",
                                     i, d, (long long)in->dims[d],
                                     (long long)first->dims[d]);
        od[ax] += in->dims[ax];
        all_host &= sn_host_known(in);
    }
    size_t outer = sn_dims_product(0, ax, od);
    size_t inner = sn_dims_product(ax + 1, r, od);
    size_t total = (size_t)od[ax] * inner, at = 0;
    if (all_host) {
        size_t es;
        unsigned char *d;
        if ((st = sn_host_elem_size(n, first->dtype, &es)) != SHARDNET_OK)
            return st;
        if (!(d = sn_host_alloc(outer * total, es)))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "concat");
        for (size_t i = 0; i < n->ninputs; i++) {
            sn_rt *in = sn_in(L, n, i);
            size_t blk = (size_t)in->dims[ax] * inner * es;
            for (size_t o = 0; blk && o < outer; o++)
                memcpy(d + (o * total + at) * es,
                       (const unsigned char *)in->host + o * blk, blk);
            at += (size_t)in->dims[ax] * inner;
        }
        return sn_out_host(L, n, 0, first->dtype, r, od, d);
    }
    if ((st = sn_out_device_as(L, n, first->dtype, r, od, &out)) !=
        SHARDNET_OK)
        return st;
    for (size_t i = 0; i < n->ninputs; i++) {
        sn_rt *in = sn_in(L, n, i);
        size_t blk = (size_t)in->dims[ax] * inner;
        int64_t shape[2] = {(int64_t)outer, (int64_t)blk};
        int64_t ss[2] = {(int64_t)blk, 1}, ds[2] = {(int64_t)total, 1};
        sn_view v;
        if (blk && outer) {
            if ((st = sn_dev_view(L, n, in, &v)) != SHARDNET_OK ||
                (st = emit_copy(L, n, v,
                                (sn_view){out->view.buf,
                                          out->view.offset + at},
                                2, shape, ss, ds)) != SHARDNET_OK)
                return st;
        }
        at += blk;
    }
    return SHARDNET_OK;
}

SN_LOWER(sn_lower_split)
{
    sn_rt *x = sn_in(L, n, 0), *out;
    int64_t axis = sn_attr_int(n, "axis", 0), *sizes, sum = 0;
    size_t nout = n->noutputs, count = 0;
    int ax, given;
    shardnet_status st = SHARDNET_OK;

    if (x->rank < 1 || (ax = sn_axis(axis, x->rank)) < 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "axis %lld out of range for rank %d",
                             (long long)axis, x->rank);
    if (nout == 0)
        return SHARDNET_OK;
    if (!(sizes = malloc(nout * sizeof *sizes)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "split");
    int64_t dim = x->dims[ax];
    st = sn_param_ints(L, n, "split", sizes, nout, &count, &given);
    if (st != SHARDNET_OK)
        goto done;
    if (given) {
        if (count != nout) {
            st = sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                               "%zu split sizes for %zu outputs", count,
                               nout);
            goto done;
        }
    } else if (sn_node_attr(n, "num_outputs")) {
        int64_t num = sn_attr_int(n, "num_outputs", 0);
        if (num != (int64_t)nout) {
            st = sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                               "num_outputs is %lld but the node has %zu "
                               "outputs",
                               (long long)num, nout);
            goto done;
        }
        int64_t chunk = (dim + num - 1) / num;
        for (size_t i = 0; i < nout; i++)
            sizes[i] = i + 1 < nout ? chunk : dim - chunk * (num - 1);
    } else {
        if (dim % (int64_t)nout) {
            st = sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                               "cannot split %lld into %zu equal parts",
                               (long long)dim, nout);
            goto done;
        }
        for (size_t i = 0; i < nout; i++)
            sizes[i] = dim / (int64_t)nout;
    }
    for (size_t i = 0; i < nout; i++) {
        if (sizes[i] < 0 || sizes[i] > dim - sum) {
            st = sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                               "split sizes do not add up to the axis' %lld",
                               (long long)dim);
            goto done;
        }
        sum += sizes[i];
    }
    if (sum != dim) {
        st = sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                           "split sizes add up to %lld, not the axis' %lld",
                           (long long)sum, (long long)dim);
        goto done;
    }

    size_t outer = sn_dims_product(0, ax, x->dims);
    size_t inner = sn_dims_product(ax + 1, x->rank, x->dims);
    int64_t od[SN_MAX_DIMS], at = 0;
    int64_t shape[2], ss[2] = {dim * (int64_t)inner, 1}, ds[2];
    size_t es = 0;
    sn_dtype t = x->dtype;
    sn_view vx = {0};
    memcpy(od, x->dims, sizeof od);
    if (sn_host_known(x))
        st = sn_host_elem_size(n, x->dtype, &es);
    else if ((st = sn_device_type(n, x->dtype, &t)) == SHARDNET_OK)
        st = sn_dev_view(L, n, x, &vx);
    for (size_t i = 0; st == SHARDNET_OK && i < nout; i++) {
        int64_t off = at * (int64_t)inner;
        od[ax] = sizes[i];
        at += sizes[i];
        if (n->outputs[i] < 0)
            continue;
        shape[0] = (int64_t)outer;
        shape[1] = sizes[i] * (int64_t)inner;
        ds[0] = shape[1];
        ds[1] = 1;
        if (sn_host_known(x)) {
            void *d = sn_host_alloc(outer * (size_t)shape[1], es);
            if (!d) {
                st = sn_error(SHARDNET_OUT_OF_MEMORY, "split");
                break;
            }
            host_strided(d, x->host, es, 2, shape, ss, off);
            st = sn_out_host(L, n, i, x->dtype, x->rank, od, d);
            continue;
        }
        if (outer == 1 && sizes[i] && x->on_device &&
            x->dtype == SN_DT_FLOAT) { /* consecutive elements: a view */
            st = sn_out_range(L, n, i, x, (size_t)off, x->rank, od);
            continue;
        }
        if ((st = sn_out_device(L, n, i, x->rank, od, &out)) != SHARDNET_OK)
            break;
        out->dtype = t;
        st = emit_copy(L, n, (sn_view){vx.buf, vx.offset + (size_t)off},
                       out->view, 2, shape, ss, ds);
    }
done:
    free(sizes);
    return st;
}

SN_LOWER(sn_lower_slice)
{
    sn_rt *x = sn_in(L, n, 0), *out;
    int64_t starts[SN_MAX_DIMS], ends[SN_MAX_DIMS], axes[SN_MAX_DIMS];
    int64_t steps[SN_MAX_DIMS], od[SN_MAX_DIMS], xs[SN_MAX_DIMS];
    int64_t ss[SN_MAX_DIMS], ds[SN_MAX_DIMS], off = 0;
    size_t ns, ne, na, nst;
    int gs, ge, ga, gst, done[SN_MAX_DIMS] = {0}, r = x->rank;
    shardnet_status st;

    /* starts, ends, axes and steps: attributes before opset 10, inputs
     * from then on */
    if ((st = sn_param_ints(L, n, "starts", starts, SN_MAX_DIMS, &ns,
                            &gs)) ||
        (st = sn_param_ints(L, n, "ends", ends, SN_MAX_DIMS, &ne, &ge)) ||
        (st = sn_param_ints(L, n, "axes", axes, SN_MAX_DIMS, &na, &ga)) ||
        (st = sn_param_ints(L, n, "steps", steps, SN_MAX_DIMS, &nst, &gst)))
        return st;
    if (!gs || !ge)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "needs starts and ends");
    if (ns != ne || (ga && na != ns) || (gst && nst != ns))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "starts, ends, axes and steps differ in length "
                             "(%zu, %zu, %zu, %zu)",
                             ns, ne, ga ? na : ns, gst ? nst : ns);
    sn_strides(r, x->dims, xs);
    memcpy(od, x->dims, (size_t)r * sizeof *od);
    memcpy(ss, xs, (size_t)r * sizeof *ss);
    for (size_t i = 0; i < ns; i++) {
        int a = sn_axis(ga ? axes[i] : (int64_t)i, r);
        int64_t step = gst ? steps[i] : 1, dim, s, e, len;
        if (a < 0 || done[a]++)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "axis %lld out of range or repeated",
                                 (long long)(ga ? axes[i] : (int64_t)i));
        if (step == 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "step 0 on axis %d", a);
        if (step == INT64_MIN)
            step = -INT64_MAX;
        dim = x->dims[a];
        s = starts[i] < 0 ? starts[i] + dim : starts[i];
        e = ends[i] < 0 ? ends[i] + dim : ends[i];
        if (step > 0) {
            s = s < 0 ? 0 : s > dim ? dim : s;
            e = e < 0 ? 0 : e > dim ? dim : e;
            len = e > s ? (e - s - 1) / step + 1 : 0;
        } else {
            s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
            e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
            len = s > e ? (s - e - 1) / -step + 1 : 0;
        }
        od[a] = len;
        if (len > 0)
            off += s * xs[a];
        ss[a] = len > 1 ? xs[a] * step : 0;
    }
    if (sn_host_known(x)) {
        size_t es;
        void *d;
        if ((st = sn_host_elem_size(n, x->dtype, &es)) != SHARDNET_OK)
            return st;
        if (!(d = sn_host_alloc(sn_dims_product(0, r, od), es)))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "slice");
        host_strided(d, x->host, es, r, od, ss, off);
        return sn_out_host(L, n, 0, x->dtype, r, od, d);
    }
    sn_view vx;
    /* Consecutive elements of float data on the device (rows of a batch,
     * say): a view of them, no copy. */
    size_t count = sn_dims_product(0, r, od);
    int consecutive = x->on_device && x->dtype == SN_DT_FLOAT && count;
    sn_strides(r, od, ds);
    for (int d = 0; d < r; d++)
        if (od[d] > 1 && ss[d] != ds[d])
            consecutive = 0;
    if (consecutive)
        return sn_out_range(L, n, 0, x, (size_t)off, r, od);
    if ((st = sn_out_device_as(L, n, x->dtype, r, od, &out)) !=
        SHARDNET_OK)
        return st;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    if ((st = sn_dev_view(L, n, x, &vx)) != SHARDNET_OK)
        return st;
    return emit_copy(L, n, (sn_view){vx.buf, vx.offset + (size_t)off},
                     out->view, r, od, ss, ds);
}

SN_LOWER(sn_lower_gather)
{
    sn_rt *x = sn_in(L, n, 0), *idx = sn_in(L, n, 1), *out;
    int64_t axis = sn_attr_int(n, "axis", 0), od[SN_MAX_DIMS];
    int ax, r = 0;
    shardnet_status st;

    if (x->rank < 1 || (ax = sn_axis(axis, x->rank)) < 0)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "axis %lld out of range for rank %d",
                             (long long)axis, x->rank);
    if (idx->dtype != SN_DT_INT64 && idx->dtype != SN_DT_INT32)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "indices are %s, not int32 or int64",
                             sn_dtype_name(idx->dtype));
    if (x->rank - 1 + idx->rank > SN_MAX_DIMS)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the result would have rank above %d",
                             SN_MAX_DIMS);
    for (int i = 0; i < ax; i++)
        od[r++] = x->dims[i];
    for (int i = 0; i < idx->rank; i++)
        od[r++] = idx->dims[i];
    for (int i = ax + 1; i < x->rank; i++)
        od[r++] = x->dims[i];
    size_t outer = sn_dims_product(0, ax, x->dims);
    size_t inner = sn_dims_product(ax + 1, x->rank, x->dims);
    size_t nidx = sn_rt_elements(idx);
    int64_t dim = x->dims[ax];
    if (sn_host_known(idx)) {
        for (size_t j = 0; j < nidx; j++) {
            int64_t v = sn_rt_get_int(idx, j);
            if (v < -dim || v >= dim)
                return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                     "index %lld (at %zu) is out of range "
                                     "for an axis of %lld",
                                     (long long)v, j, (long long)dim);
        }
    }
    if (sn_host_known(x) && sn_host_known(idx)) {
        size_t es;
        unsigned char *d;
        const unsigned char *src = x->host;
        if ((st = sn_host_elem_size(n, x->dtype, &es)) != SHARDNET_OK)
            return st;
        if (!(d = sn_host_alloc(outer * nidx * inner, es)))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "gather");
        for (size_t o = 0; inner && o < outer; o++)
            for (size_t j = 0; j < nidx; j++) {
                int64_t v = sn_rt_get_int(idx, j);
                if (v < 0)
                    v += dim;
                memcpy(d + ((o * nidx + j) * inner) * es,
                       src + ((o * (size_t)dim + (size_t)v) * inner) * es,
                       inner * es);
            }
        return sn_out_host(L, n, 0, x->dtype, r, od, d);
    }
    sn_step s = {.kind = SN_KERNEL_GATHER};
    if ((st = sn_out_device_as(L, n, x->dtype, r, od, &out)) !=
        SHARDNET_OK)
        return st;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    s.u.gather = (sn_gather_desc){.outer = outer, .axis_len = (size_t)dim,
                                  .inner = inner, .nidx = nidx,
                                  .out = out->view};
    if ((st = sn_dev_indices(L, n, idx, &s.u.gather.indices)) != SHARDNET_OK ||
        (st = sn_dev_view(L, n, x, &s.u.gather.data)) != SHARDNET_OK)
        return st;
    return sn_emit(L, n, &s);
}

SN_LOWER(sn_lower_expand)
{
    sn_rt *x = sn_in(L, n, 0), *shape_in = sn_in(L, n, 1), *out;
    int64_t shape[SN_MAX_DIMS], od[SN_MAX_DIMS];
    size_t ns;
    int r;
    shardnet_status st;

    if ((st = sn_host_ints_or_empty(n, shape_in, "the shape", shape,
                                    SN_MAX_DIMS, &ns)) != SHARDNET_OK)
        return st;
    for (size_t i = 0; i < ns; i++)
        if (shape[i] < 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "negative dimension %lld in the shape",
                                 (long long)shape[i]);
    if (!sn_broadcast_shape(x->rank, x->dims, (int)ns, shape, &r, od)) {
        char fx[160], fs[160];
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the input's shape %s cannot be broadcast to "
                             "the shape %s",
                             sn_format_dims(fx, sizeof fx, x->rank, x->dims),
                             sn_format_dims(fs, sizeof fs, (int)ns, shape));
    }
    if (sn_host_known(x)) {
        int64_t str[SN_MAX_DIMS];
        size_t es;
        void *d;
        if ((st = sn_host_elem_size(n, x->dtype, &es)) != SHARDNET_OK)
            return st;
        if (!(d = sn_host_alloc(sn_dims_product(0, r, od), es)))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "expand");
        sn_bcast_strides(x->rank, x->dims, r, str);
        host_strided(d, x->host, es, r, od, str, 0);
        return sn_out_host(L, n, 0, x->dtype, r, od, d);
    }
    if ((st = sn_out_device_as(L, n, x->dtype, r, od, &out)) !=
        SHARDNET_OK)
        return st;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    return sn_emit_broadcast_copy(L, n, x, r, od, out->view);
}

SN_LOWER(sn_lower_where)
{
    sn_rt *c = sn_in(L, n, 0), *x = sn_in(L, n, 1), *y = sn_in(L, n, 2), *out;
    int64_t t1[SN_MAX_DIMS], od[SN_MAX_DIMS];
    int64_t sc[SN_MAX_DIMS], sx[SN_MAX_DIMS], sy[SN_MAX_DIMS];
    int r1, r;
    shardnet_status st;

    if (x->dtype != y->dtype)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "X is %s but Y is %s", sn_dtype_name(x->dtype),
                             sn_dtype_name(y->dtype));
    if (!sn_broadcast_shape(c->rank, c->dims, x->rank, x->dims, &r1, t1) ||
        !sn_broadcast_shape(r1, t1, y->rank, y->dims, &r, od)) {
        char fc[160], fx[160], fy[160];
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "condition %s, X %s and Y %s cannot be "
                             "broadcast together",
                             sn_format_dims(fc, sizeof fc, c->rank, c->dims),
                             sn_format_dims(fx, sizeof fx, x->rank, x->dims),
                             sn_format_dims(fy, sizeof fy, y->rank, y->dims));
    }
    sn_bcast_strides(c->rank, c->dims, r, sc);
    sn_bcast_strides(x->rank, x->dims, r, sx);
    sn_bcast_strides(y->rank, y->dims, r, sy);
    if (sn_host_known(c) && sn_host_known(x) && sn_host_known(y)) {
        int64_t idx[SN_MAX_DIMS] = {0}, pc = 0, px = 0, py = 0;
        size_t es, total = sn_dims_product(0, r, od);
        unsigned char *d;
        if ((st = sn_host_elem_size(n, x->dtype, &es)) != SHARDNET_OK)
            return st;
        if (!(d = sn_host_alloc(total, es)))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "where");
        for (size_t k = 0; k < total; k++) {
            const unsigned char *src =
                sn_rt_get_int(c, (size_t)pc)
                    ? (const unsigned char *)x->host + (size_t)px * es
                    : (const unsigned char *)y->host + (size_t)py * es;
            memcpy(d + k * es, src, es);
            for (int i = r - 1; i >= 0; i--) {
                pc += sc[i];
                px += sx[i];
                py += sy[i];
                if (++idx[i] < od[i])
                    break;
                pc -= sc[i] * od[i];
                px -= sx[i] * od[i];
                py -= sy[i] * od[i];
                idx[i] = 0;
            }
        }
        return sn_out_host(L, n, 0, x->dtype, r, od, d);
    }
    sn_step s = {.kind = SN_KERNEL_WHERE};
    if ((st = sn_out_device_as(L, n, x->dtype, r, od, &out)) !=
        SHARDNET_OK)
        return st;
    if (sn_rt_elements(out) == 0)
        return SHARDNET_OK;
    s.u.where.rank = r ? (size_t)r : 1;
    s.u.where.shape[0] = 1;
    for (int i = 0; i < r; i++) {
        s.u.where.shape[i] = (size_t)od[i];
        s.u.where.stride_cond[i] = (size_t)sc[i];
        s.u.where.stride_x[i] = (size_t)sx[i];
        s.u.where.stride_y[i] = (size_t)sy[i];
    }
    s.u.where.out = out->view;
    if ((st = sn_dev_view(L, n, c, &s.u.where.cond)) != SHARDNET_OK ||
        (st = sn_dev_view(L, n, x, &s.u.where.x)) != SHARDNET_OK ||
        (st = sn_dev_view(L, n, y, &s.u.where.y)) != SHARDNET_OK)
        return st;
    return sn_emit(L, n, &s);
}
