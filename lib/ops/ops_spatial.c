/*
 * Spatial data movement: Pad, Tile, DepthToSpace, SpaceToDepth, MaxUnpool;
 * and LRN, whose sum across channels is a pooling.  The first four are a
 * few strided copies, one per region of the output that reads the input
 * along a straight line per axis: done on the host, byte for byte in the
 * input's own type, when the input is a host value, and otherwise emitted
 * as copy steps on the device (a constant Pad's fill is a copy of the one
 * padding value with every source stride 0).  MaxUnpool is a gather by a
 * map made on the host.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "ops/ops.h"

/* Where the copies of one lowering go: host memory (es bytes an element)
 * or device views (float32). */
typedef struct mover {
    sn_lower *L;
    const sn_node *n;
    int host;
    int empty; /* a device output without elements: nothing to move */
    size_t es;
    const unsigned char *hsrc;
    unsigned char *hdst;
    sn_view src, dst;
} mover;

/* dst[doff + sum i * dstr] = src[soff + sum i * sstr] over shape (any
 * rank: above what one copy step takes, one move per index of the first
 * axis).  Axes of size 1 are dropped and axes contiguous in both merged. */
static shardnet_status move(mover *m, int rank, const int64_t *shape,
                            int64_t soff, const int64_t *sstr, int64_t doff,
                            const int64_t *dstr)
{
    int64_t sh[2 * SN_MAX_DIMS], ss[2 * SN_MAX_DIMS], ds[2 * SN_MAX_DIMS];
    int r = 0;
    shardnet_status st;

    for (int i = 0; i < rank; i++) {
        if (shape[i] == 0)
            return SHARDNET_OK;
        if (shape[i] == 1)
            continue;
        if (r > 0 && ss[r - 1] == sstr[i] * shape[i] &&
            ds[r - 1] == dstr[i] * shape[i]) {
            sh[r - 1] *= shape[i];
            ss[r - 1] = sstr[i];
            ds[r - 1] = dstr[i];
            continue;
        }
        sh[r] = shape[i];
        ss[r] = sstr[i];
        ds[r] = dstr[i];
        r++;
    }
    if (r == 0) {
        sh[0] = ss[0] = ds[0] = 1;
        r = 1;
    }
    if (m->host) {
        int64_t idx[2 * SN_MAX_DIMS] = {0}, ps = soff, pd = doff;
        size_t total = sn_dims_product(0, r, sh);
        for (size_t k = 0; k < total; k++) {
            memcpy(m->hdst + (size_t)pd * m->es, m->hsrc + (size_t)ps * m->es,
                   m->es);
            for (int i = r - 1; i >= 0; i--) {
                ps += ss[i];
                pd += ds[i];
                if (++idx[i] < sh[i])
                    break;
                ps -= ss[i] * sh[i];
                pd -= ds[i] * sh[i];
                idx[i] = 0;
            }
        }
        return SHARDNET_OK;
    }
    if (r > SN_MAX_DIMS) {
        for (int64_t i = 0; i < sh[0]; i++)
            if ((st = move(m, r - 1, sh + 1, soff + i * ss[0], ss + 1,
                           doff + i * ds[0], ds + 1)) != SHARDNET_OK)
                return st;
        return SHARDNET_OK;
    }
    sn_step s = {.kind = SN_KERNEL_COPY};
    s.u.copy.rank = (size_t)r;
    for (int i = 0; i < r; i++) {
        s.u.copy.shape[i] = (size_t)sh[i];
        s.u.copy.src_stride[i] = (ptrdiff_t)ss[i];
        s.u.copy.dst_stride[i] = (ptrdiff_t)ds[i];
    }
    s.u.copy.src = (sn_view){m->src.buf, m->src.offset + (size_t)soff};
    s.u.copy.dst = (sn_view){m->dst.buf, m->dst.offset + (size_t)doff};
    return sn_emit(m->L, m->n, &s);
}

/* A mover from x into output 0 of shape (rank, od): on the host when x is
 * a host value (*out_host: its memory, given to sn_out_host by finish()),
 * else a fresh device output. */
static shardnet_status mover_open(mover *m, sn_lower *L, const sn_node *n,
                                  sn_rt *x, int rank, const int64_t *od)
{
    shardnet_status st;
    sn_rt *out;
    memset(m, 0, sizeof *m);
    m->L = L;
    m->n = n;
    if (sn_host_known(x)) {
        m->host = 1;
        if ((st = sn_host_elem_size(n, x->dtype, &m->es)) != SHARDNET_OK)
            return st;
        if (!(m->hdst = sn_host_alloc(sn_dims_product(0, rank, od), m->es)))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "node '%s'", n->name);
        m->hsrc = x->host;
        return SHARDNET_OK;
    }
    if ((st = sn_out_device_as(L, n, x->dtype, rank, od, &out)) !=
        SHARDNET_OK)
        return st;
    m->dst = out->view;
    if ((m->empty = sn_rt_elements(out) == 0))
        return SHARDNET_OK;
    return sn_dev_view(L, n, x, &m->src);
}

/* Hand the host result to output 0 (nothing to do on the device); on
 * error, free it. */
static shardnet_status mover_close(mover *m, shardnet_status st,
                                   const sn_rt *x, int rank,
                                   const int64_t *od)
{
    if (!m->host)
        return st;
    if (st != SHARDNET_OK) {
        free(m->hdst);
        return st;
    }
    return sn_out_host(m->L, m->n, 0, x->dtype, rank, od, m->hdst);
}

/* Do dims (each >= 0) hold at most SN_MAX_ELEMENTS elements?  The
 * product is formed without overflow. */
static int dims_fit(int rank, const int64_t *dims)
{
    int64_t p = 1;
    for (int i = 0; i < rank; i++)
        if (dims[i] == 0)
            return 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] > SN_MAX_ELEMENTS / p)
            return 0;
        p *= dims[i];
    }
    return 1;
}

/* --- Pad --------------------------------------------------------------- */

/* The mode's way of reading the input along one axis, for output
 * positions of a padded region. */
enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE };

/* Pads (2 * rank: begins then ends) from the node's form of its opset:
 * the attribute 'paddings' (opset 1) or 'pads' (2 to 10), or input 1
 * (from 11; with input 3, axes, from 18). */
static shardnet_status pad_amounts(sn_lower *L, const sn_node *n, int r,
                                   int64_t *pads)
{
    int64_t got[2 * SN_MAX_DIMS], axes[SN_MAX_DIMS];
    size_t np = 0, na = 0;
    int given = 0, ax[SN_MAX_DIMS];
    shardnet_status st;

    if (L->g->opset < 11) {
        const char *name = sn_node_attr(n, "paddings") ? "paddings" : "pads";
        if ((st = sn_attr_ints(n, name, got, 2 * SN_MAX_DIMS, &np,
                               &given)) != SHARDNET_OK)
            return st;
    } else if (n->ninputs > 1 && n->inputs[1] >= 0) {
        given = 1;
        if ((st = sn_host_ints_or_empty(n, sn_in(L, n, 1), "pads", got,
                                        2 * SN_MAX_DIMS, &np)) != SHARDNET_OK)
            return st;
    }
    if (!given)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT, "needs pads");
    na = (size_t)r;
    for (int i = 0; i < r; i++)
        ax[i] = i;
    if (n->ninputs > 3 && n->inputs[3] >= 0) {
        if ((st = sn_host_ints_or_empty(n, sn_in(L, n, 3), "axes", axes,
                                        SN_MAX_DIMS, &na)) != SHARDNET_OK)
            return st;
        for (size_t i = 0; i < na; i++)
            if ((ax[i] = sn_axis(axes[i], r)) < 0)
                return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                     "axis %lld out of range for rank %d",
                                     (long long)axes[i], r);
    }
    if (np != 2 * na)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "%zu pads for %zu axes", np, na);
    memset(pads, 0, 2 * (size_t)r * sizeof *pads);
    for (size_t i = 0; i < na; i++) {
        pads[ax[i]] = got[i];
        pads[r + ax[i]] = got[na + i];
    }
    return SHARDNET_OK;
}

/* The padding value as a device view: input 2 (opset 11 on), else the
 * attribute 'value' (0 by default) uploaded. */
static shardnet_status pad_value_view(sn_lower *L, const sn_node *n,
                                      sn_view *v)
{
    float *one;
    if (L->g->opset >= 11 && n->ninputs > 2 && n->inputs[2] >= 0) {
        sn_rt *c = sn_in(L, n, 2);
        if (sn_rt_elements(c) != 1)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "constant_value has %zu elements, not 1",
                                 sn_rt_elements(c));
        return sn_dev_view(L, n, c, v);
    }
    if (!(one = malloc(sizeof *one)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "node '%s'", n->name);
    *one = L->g->opset < 11 ? sn_attr_float(n, "value", 0.0f) : 0.0f;
    return sn_dev_upload(L, n, one, 1, v);
}

/* Fill the host output (count elements of x's type) with the padding
 * value; fails when that value is not on the host. */
static shardnet_status pad_fill_host(sn_lower *L, const sn_node *n,
                                     const sn_rt *x, void *d, size_t count)
{
    double dv = 0.0;
    int64_t iv = 0;
    if (L->g->opset >= 11 && n->ninputs > 2 && n->inputs[2] >= 0) {
        sn_rt *c = sn_in(L, n, 2);
        if (sn_rt_elements(c) != 1)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "constant_value has %zu elements, not 1",
                                 sn_rt_elements(c));
        if (!sn_rt_is_host(c))
            return sn_node_error(n, SHARDNET_UNSUPPORTED,
                                 "a constant_value computed on the device "
                                 "for an input known on the host");
        dv = sn_rt_get_double(c, 0);
        iv = sn_dtype_is_integer(c->dtype) ? sn_rt_get_int(c, 0)
                                           : (int64_t)dv;
    } else if (L->g->opset < 11) {
        dv = sn_attr_float(n, "value", 0.0f);
        iv = (int64_t)dv;
    }
    for (size_t i = 0; i < count; i++)
        sn_store_value(x->dtype, d, i, dv, iv,
                       sn_dtype_is_integer(x->dtype));
    return SHARDNET_OK;
}

/* Along one axis of length len padded by (pb, pe), the segments of the
 * output: [at, at + count) reads the input from `from` in steps of
 * `step`; constant segments are left out.  Returns the segment count. */
static int pad_segments(enum pad_mode mode, int64_t len, int64_t pb,
                        int64_t pe, int64_t at[3], int64_t count[3],
                        int64_t from[3], int64_t step[3])
{
    int64_t cb = pb < 0 ? -pb : 0, ce = pe < 0 ? -pe : 0;
    int64_t b = pb > 0 ? pb : 0, e = pe > 0 ? pe : 0;
    int k = 0;
    if (b && mode != PAD_CONSTANT) {
        at[k] = 0;
        count[k] = b;
        from[k] = mode == PAD_EDGE ? 0 : b; /* reflect: b, b-1, ..., 1 */
        step[k] = mode == PAD_EDGE ? 0 : -1;
        k++;
    }
    if (len - cb - ce > 0) {
        at[k] = b;
        count[k] = len - cb - ce;
        from[k] = cb;
        step[k] = 1;
        k++;
    }
    if (e && mode != PAD_CONSTANT) {
        at[k] = b + len - cb - ce;
        count[k] = e;
        from[k] = mode == PAD_EDGE ? len - 1 : len - 2;
        step[k] = mode == PAD_EDGE ? 0 : -1;
        k++;
    }
    return k;
}

/* One copy per combination of segments across the axes (an odometer over
 * the segment lists). */
static shardnet_status pad_copies(mover *m, enum pad_mode mode,
                                  const sn_rt *x, const int64_t *pads,
                                  const int64_t *od)
{
    int r = x->rank, nseg[SN_MAX_DIMS], pick[SN_MAX_DIMS] = {0};
    int64_t at[SN_MAX_DIMS][3], cnt[SN_MAX_DIMS][3], from[SN_MAX_DIMS][3];
    int64_t step[SN_MAX_DIMS][3], xs[SN_MAX_DIMS], os[SN_MAX_DIMS];
    shardnet_status st;

    sn_strides(r, x->dims, xs);
    sn_strides(r, od, os);
    for (int i = 0; i < r; i++)
        if ((nseg[i] = pad_segments(mode, x->dims[i], pads[i], pads[r + i],
                                    at[i], cnt[i], from[i], step[i])) == 0)
            return SHARDNET_OK;
    for (;;) {
        int64_t shape[SN_MAX_DIMS], ss[SN_MAX_DIMS], soff = 0, doff = 0;
        int i;
        for (i = 0; i < r; i++) {
            int k = pick[i];
            shape[i] = cnt[i][k];
            ss[i] = step[i][k] * xs[i];
            soff += from[i][k] * xs[i];
            doff += at[i][k] * os[i];
        }
        if ((st = move(m, r, shape, soff, ss, doff, os)) != SHARDNET_OK)
            return st;
        for (i = r - 1; i >= 0; i--) {
            if (++pick[i] < nseg[i])
                break;
            pick[i] = 0;
        }
        if (i < 0)
            return SHARDNET_OK;
    }
}

SN_LOWER(sn_lower_pad)
{
    sn_rt *x = sn_in(L, n, 0);
    const char *ms = sn_attr_string(n, "mode", "constant");
    int64_t pads[2 * SN_MAX_DIMS], od[SN_MAX_DIMS];
    int r = x->rank, padded = 0;
    enum pad_mode mode;
    mover m;
    shardnet_status st;

    if (!strcmp(ms, "constant"))
        mode = PAD_CONSTANT;
    else if (!strcmp(ms, "reflect"))
        mode = PAD_REFLECT;
    else if (!strcmp(ms, "edge"))
        mode = PAD_EDGE;
    else
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "mode '%s' (constant, reflect and edge are "
                             "supported)",
                             ms);
    if ((st = pad_amounts(L, n, r, pads)) != SHARDNET_OK)
        return st;
    for (int i = 0; i < r; i++) {
        int64_t len = x->dims[i], b = pads[i], e = pads[r + i];
        if (b < -SN_MAX_ELEMENTS || b > SN_MAX_ELEMENTS ||
            e < -SN_MAX_ELEMENTS || e > SN_MAX_ELEMENTS ||
            (od[i] = len + b + e) < 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "pads %lld and %lld on axis %d of %lld "
                                 "elements",
                                 (long long)b, (long long)e, i,
                                 (long long)len);
        padded |= b > 0 || e > 0;
        if (mode == PAD_EDGE && (b > 0 || e > 0) && len == 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "edge padding of an empty axis %d", i);
        if (mode == PAD_REFLECT && (b > 0 || e > 0) &&
            (b > len - 1 || e > len - 1))
            return sn_node_error(n, SHARDNET_UNSUPPORTED,
                                 "reflect pads %lld and %lld on axis %d of "
                                 "%lld elements (at most %lld each)",
                                 (long long)b, (long long)e, i,
                                 (long long)len, (long long)(len - 1));
    }
    if (!dims_fit(r, od))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the padded tensor is too large");
    if ((st = mover_open(&m, L, n, x, r, od)) != SHARDNET_OK)
        return st;
    if (m.empty)
        return SHARDNET_OK;
    if (mode == PAD_CONSTANT && padded) {
        size_t count = sn_dims_product(0, r, od);
        if (m.host) {
            st = pad_fill_host(L, n, x, m.hdst, count);
        } else {
            mover fill = m;
            int64_t zero = 0, one = 1, len = (int64_t)count;
            if ((st = pad_value_view(L, n, &fill.src)) == SHARDNET_OK)
                st = move(&fill, 1, &len, 0, &zero, 0, &one);
        }
    }
    if (st == SHARDNET_OK)
        st = pad_copies(&m, mode, x, pads, od);
    return mover_close(&m, st, x, r, od);
}

/* --- Tile ----------------------------------------------------------------- */

SN_LOWER(sn_lower_tile)
{
    sn_rt *x = sn_in(L, n, 0);
    int64_t rep[SN_MAX_DIMS], od[SN_MAX_DIMS], xs[SN_MAX_DIMS];
    int64_t os[SN_MAX_DIMS], shape[2 * SN_MAX_DIMS], ss[2 * SN_MAX_DIMS];
    int64_t ds[2 * SN_MAX_DIMS];
    int r = x->rank;
    size_t nr;
    mover m;
    shardnet_status st;

    if (L->g->opset < 6) { /* Tile-1: tiles copies along axis */
        int64_t tiles, axis;
        size_t c;
        int a;
        if (n->ninputs < 3 || n->inputs[2] < 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "needs tiles and axis");
        if ((st = sn_host_ints(n, sn_in(L, n, 1), "tiles", &tiles, 1,
                               &c)) != SHARDNET_OK ||
            (st = sn_host_ints(n, sn_in(L, n, 2), "axis", &axis, 1, &c)) !=
                SHARDNET_OK)
            return st;
        if ((a = sn_axis(axis, r)) < 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "axis %lld out of range for rank %d",
                                 (long long)axis, r);
        for (int i = 0; i < r; i++)
            rep[i] = i == a ? tiles : 1;
        nr = (size_t)r;
    } else if ((st = sn_host_ints_or_empty(n, sn_in(L, n, 1), "repeats", rep,
                                           SN_MAX_DIMS, &nr)) != SHARDNET_OK) {
        return st;
    }
    if (nr != (size_t)r)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "%zu repeats for an input of rank %d", nr, r);
    for (int i = 0; i < r; i++) {
        if (rep[i] < 0 || rep[i] > SN_MAX_ELEMENTS ||
            (x->dims[i] && rep[i] > SN_MAX_ELEMENTS / x->dims[i]))
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "repeats %lld on axis %d",
                                 (long long)rep[i], i);
        od[i] = x->dims[i] * rep[i];
    }
    if (!dims_fit(r, od))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the tiled tensor is too large");
    sn_strides(r, x->dims, xs);
    sn_strides(r, od, os);
    /* the output as (rep_0, dim_0, rep_1, dim_1, ...) */
    for (int i = 0; i < r; i++) {
        shape[2 * i] = rep[i];
        shape[2 * i + 1] = x->dims[i];
        ss[2 * i] = 0;
        ss[2 * i + 1] = xs[i];
        ds[2 * i] = x->dims[i] * os[i];
        ds[2 * i + 1] = os[i];
    }
    if ((st = mover_open(&m, L, n, x, r, od)) != SHARDNET_OK)
        return st;
    if (!m.empty)
        st = move(&m, 2 * r, shape, 0, ss, 0, ds);
    return mover_close(&m, st, x, r, od);
}

/* --- DepthToSpace and SpaceToDepth --------------------------------------- */

/* The block size of a 4-D input, checked against the dimensions it must
 * divide (the channels for DepthToSpace, height and width for
 * SpaceToDepth). */
static shardnet_status block_size(const sn_node *n, const sn_rt *x,
                                  int to_space, int64_t *b)
{
    *b = sn_attr_int(n, "blocksize", 0);
    if (x->rank != 4)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "input of rank %d, not 4", x->rank);
    if (*b < 1 || *b > 65536)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "blocksize %lld", (long long)*b);
    if (to_space ? x->dims[1] % (*b * *b)
                 : x->dims[2] % *b || x->dims[3] % *b)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "blocksize %lld does not divide the %s",
                             (long long)*b,
                             to_space ? "channels" : "height and width");
    return SHARDNET_OK;
}

SN_LOWER(sn_lower_depth_to_space)
{
    sn_rt *x = sn_in(L, n, 0);
    const char *mode = sn_attr_string(n, "mode", "DCR");
    int64_t b, od[4], shape[6], ss[6], ds[6];
    mover m;
    shardnet_status st;

    if ((st = block_size(n, x, 1, &b)) != SHARDNET_OK)
        return st;
    int crd = !strcmp(mode, "CRD");
    if (!crd && strcmp(mode, "DCR"))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "mode '%s', not DCR or CRD", mode);
    int64_t N = x->dims[0], C = x->dims[1] / (b * b), H = x->dims[2],
            W = x->dims[3];
    od[0] = N;
    od[1] = C;
    od[2] = H * b;
    od[3] = W * b;
    /* y (N, C, H, b, W, b)[n, c, h, i, w, j] = x[n, DCR: (i b + j) C + c,
     * CRD: c b b + i b + j, h, w] */
    int64_t sh[6] = {N, C, H, b, W, b};
    int64_t hw = H * W;
    int64_t src[6] = {C * b * b * hw, crd ? b * b * hw : hw, W,
                      crd ? b * hw : b * C * hw, 1, crd ? hw : C * hw};
    memcpy(shape, sh, sizeof shape);
    memcpy(ss, src, sizeof ss);
    sn_strides(6, shape, ds);
    if ((st = mover_open(&m, L, n, x, 4, od)) != SHARDNET_OK)
        return st;
    if (!m.empty)
        st = move(&m, 6, shape, 0, ss, 0, ds);
    return mover_close(&m, st, x, 4, od);
}

SN_LOWER(sn_lower_space_to_depth)
{
    sn_rt *x = sn_in(L, n, 0);
    int64_t b, od[4], ds[6];
    mover m;
    shardnet_status st;

    if ((st = block_size(n, x, 0, &b)) != SHARDNET_OK)
        return st;
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2] / b,
            W = x->dims[3] / b;
    od[0] = N;
    od[1] = C * b * b;
    od[2] = H;
    od[3] = W;
    /* y (N, b, b, C, H, W)[n, i, j, c, h, w] = x[n, c, h b + i, w b + j] */
    int64_t shape[6] = {N, b, b, C, H, W};
    int64_t ss[6] = {C * H * b * W * b, W * b, 1, H * b * W * b, b * W * b,
                     b};
    sn_strides(6, shape, ds);
    if ((st = mover_open(&m, L, n, x, 4, od)) != SHARDNET_OK)
        return st;
    if (!m.empty)
        st = move(&m, 6, shape, 0, ss, 0, ds);
    return mover_close(&m, st, x, 4, od);
}

/* --- MaxUnpool ------------------------------------------------------------ */

/*
 * MaxUnpool: X's values placed at the flat positions I gives (MaxPool's
 * Indices, counted over the whole output of the pooling's shape; a larger
 * output_shape adds zeros at the end of each axis), zeros elsewhere.  With
 * I known
 * on the host, the inverse map (which element of X lands at each output
 * position, or none) is made there and the step is a gather of X's
 * elements; the last of several values for one position wins.
 */
SN_LOWER(sn_lower_max_unpool)
{
    sn_rt *x = sn_in(L, n, 0), *idx = sn_in(L, n, 1), *out;
    int64_t ks[SN_MAX_DIMS], strides[SN_MAX_DIMS], pads[2 * SN_MAX_DIMS];
    int64_t od[SN_MAX_DIMS], fd[SN_MAX_DIMS], fs[SN_MAX_DIMS];
    size_t nk, ns, np, nx = sn_rt_elements(x), no;
    int r = x->rank, sp = x->rank - 2, given;
    shardnet_status st;

    if (r < 3)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "input of rank %d, not N x C x spatial", r);
    if (idx->rank != r || memcmp(idx->dims, x->dims, (size_t)r * sizeof *od))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "indices' shape differs from the input's");
    if ((st = sn_attr_ints(n, "kernel_shape", ks, SN_MAX_DIMS, &nk,
                           &given)) ||
        (st = sn_attr_ints(n, "strides", strides, SN_MAX_DIMS, &ns, NULL)) ||
        (st = sn_attr_ints(n, "pads", pads, 2 * SN_MAX_DIMS, &np, NULL)))
        return st;
    if (!given || nk != (size_t)sp || (ns && ns != (size_t)sp) ||
        (np && np != 2 * (size_t)sp))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "kernel_shape, strides and pads must give each "
                             "of the %d spatial axes",
                             sp);
    od[0] = x->dims[0];
    od[1] = x->dims[1];
    for (int i = 0; i < sp; i++) {
        int64_t s = ns ? strides[i] : 1, pb = np ? pads[i] : 0,
                pe = np ? pads[sp + i] : 0;
        if (ks[i] < 1 || ks[i] > 65536 || s < 1 || s > 65536 || pb < 0 ||
            pe < 0 || pb > 65536 || pe > 65536 ||
            (od[2 + i] = (x->dims[2 + i] - 1) * s + ks[i] - pb - pe) < 0 ||
            od[2 + i] > SN_MAX_ELEMENTS)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "kernel %lld, stride %lld, pads %lld and "
                                 "%lld on spatial axis %d",
                                 (long long)ks[i], (long long)s,
                                 (long long)pb, (long long)pe, i);
    }
    /* the indices count in the pooling's own output (od); output_shape
     * may ask for more, the extra rows and columns zeros (fd) */
    memcpy(fd, od, sizeof fd);
    if (n->ninputs > 2 && n->inputs[2] >= 0) {
        int64_t shape[SN_MAX_DIMS];
        size_t c;
        if ((st = sn_host_ints(n, sn_in(L, n, 2), "output_shape", shape,
                               SN_MAX_DIMS, &c)) != SHARDNET_OK)
            return st;
        if (c != (size_t)r || shape[0] != od[0] || shape[1] != od[1])
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "output_shape does not keep the input's "
                                 "batch and channels");
        for (int i = 2; i < r; i++) {
            if (shape[i] < od[i] || shape[i] > SN_MAX_ELEMENTS)
                return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                     "output_shape %lld on axis %d, below "
                                     "the %lld the pooling gives",
                                     (long long)shape[i], i,
                                     (long long)od[i]);
            fd[i] = shape[i];
        }
    }
    if (!dims_fit(r, fd) || nx > INT32_MAX)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the unpooled tensor is too large");
    if (!sn_host_known(idx))
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "indices computed on the device (they must be "
                             "known when the model is planned)");
    if ((st = sn_out_device_as(L, n, x->dtype, r, fd, &out)) != SHARDNET_OK)
        return st;
    if ((no = sn_dims_product(0, r, fd)) == 0)
        return SHARDNET_OK;
    sn_strides(r, fd, fs);
    /* the inverse map: the gather's int32 indices, stored bit for bit in
     * a float upload (nx, out of range: a zero) */
    int32_t *inv = malloc(no * sizeof *inv);
    if (!inv)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "node '%s'", n->name);
    for (size_t i = 0; i < no; i++)
        inv[i] = (int32_t)nx;
    for (size_t i = 0; i < nx; i++) {
        int64_t v = sn_rt_get_int(idx, i), at = 0;
        if (v < 0 || (size_t)v >= sn_dims_product(0, r, od)) {
            free(inv);
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "index %lld (at %zu) is outside the "
                                 "unpooled tensor",
                                 (long long)v, i);
        }
        for (int k = r - 1; k >= 0; k--) { /* od's place to fd's */
            at += (v % od[k]) * fs[k];
            v /= od[k];
        }
        inv[at] = (int32_t)i;
    }
    _Static_assert(sizeof(int32_t) == sizeof(float), "4-byte indices");
    sn_step s = {.kind = SN_KERNEL_GATHER};
    s.u.gather = (sn_gather_desc){.outer = 1, .axis_len = nx, .inner = 1,
                                  .nidx = no, .out = out->view};
    if ((st = sn_dev_upload(L, n, (float *)(void *)inv, no,
                            &s.u.gather.indices)) != SHARDNET_OK ||
        (st = sn_dev_view(L, n, x, &s.u.gather.data)) != SHARDNET_OK)
        return st;
    return sn_emit(L, n, &s);
}

/* --- LRN ------------------------------------------------------------------ */

/* A float scalar uploaded for the steps of node n. */
static shardnet_status scalar_view(sn_lower *L, const sn_node *n, float v,
                                   sn_view *out)
{
    float *p = malloc(sizeof *p);
    if (!p)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "node '%s'", n->name);
    *p = v;
    return sn_dev_upload(L, n, p, 1, out);
}

/*
 * LRN: y = x / (bias + alpha / size * sum of x^2 over the `size` channels
 * around)^beta.  The sum is an average pooling across the channels with
 * count_include_pad (each window counts `size` positions), so alpha times
 * it is the term; the rest is element-wise.
 */
SN_LOWER(sn_lower_lrn)
{
    sn_rt *x = sn_in(L, n, 0), *out;
    int64_t size = sn_attr_int(n, "size", 0), none[1] = {0};
    float alpha = sn_attr_float(n, "alpha", 1e-4f);
    float beta = sn_attr_float(n, "beta", 0.75f);
    float bias = sn_attr_float(n, "bias", 1.0f);
    int r = x->rank;
    size_t count = sn_rt_elements(x);
    sn_view vx, sq, avg, ka, kb, kp;
    shardnet_status st;

    if (r < 2)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "input of rank %d, not N x C x ...", r);
    if (size < 1 || size > 65536)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT, "size %lld",
                             (long long)size);
    if ((st = sn_out_device(L, n, 0, r, x->dims, &out)) != SHARDNET_OK)
        return st;
    if (count == 0)
        return SHARDNET_OK;
    if ((st = sn_dev_view(L, n, x, &vx)) || (st = sn_scratch(L, count, &sq)) ||
        (st = sn_scratch(L, count, &avg)) ||
        (st = scalar_view(L, n, alpha, &ka)) ||
        (st = scalar_view(L, n, bias, &kb)) ||
        (st = scalar_view(L, n, beta, &kp)))
        return st;
    sn_step s = {.kind = SN_KERNEL_POOL};
    s.u.pool = (sn_pool_desc){
        .op = SN_POOL_AVG, .count_include_pad = 1,
        .planes = (size_t)x->dims[0], .in_h = (size_t)x->dims[1],
        .in_w = sn_dims_product(2, r, x->dims), .k_h = (size_t)size,
        .k_w = 1, .stride_h = 1, .stride_w = 1, .dil_h = 1, .dil_w = 1,
        .pad_top = (size_t)(size - 1) / 2, .pad_bottom = (size_t)size / 2,
        .src = sq, .dst = avg};
    s.u.pool.out_h = s.u.pool.in_h;
    s.u.pool.out_w = s.u.pool.in_w;
    if ((st = sn_emit_binary(L, n, SN_BINARY_MUL, r, x->dims, vx, r, x->dims,
                             vx, sq)) ||
        (st = sn_emit(L, n, &s)) ||
        (st = sn_emit_binary(L, n, SN_BINARY_MUL, r, x->dims, avg, 0, none,
                             ka, sq)) ||
        (st = sn_emit_binary(L, n, SN_BINARY_ADD, r, x->dims, sq, 0, none, kb,
                             avg)) ||
        (st = sn_emit_binary(L, n, SN_BINARY_POW, r, x->dims, avg, 0, none,
                             kp, sq)))
        return st;
    return sn_emit_binary(L, n, SN_BINARY_DIV, r, x->dims, vx, r, x->dims, sq,
                          out->view);
}
