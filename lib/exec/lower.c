/* The lowering API that operators call (exec.h, "helpers for ops"): their
 * inputs, their outputs on the device, aliased, or known on the host,
 * uploads of host data and indices, scratch space, and the steps they
 * emit, each checked against what the plan's device runs.  Also the
 * weights a session's plans share on a device.  Building a plan (exec.c)
 * runs each node's lowering against these. */
#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "exec/exec_impl.h"

/* --- errors ------------------------------------------------------------ */

shardnet_status sn_node_error(const sn_node *n, shardnet_status st,
                              const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sn_error(st, "node '%s' (%s): %s", n->name, n->op_type, msg);
}

/* --- weights ------------------------------------------------------------ */

shardnet_status sn_weights_new(const sn_graph *g, sn_device *dev,
                               sn_weights **out)
{
    sn_weights *w = calloc(1, sizeof *w);
    if (!w)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "weights");
    w->dev = dev;
    w->nvalues = g->nvalues;
    w->f32 = calloc(g->nvalues + 1, sizeof *w->f32);
    w->i32 = calloc(g->nvalues + 1, sizeof *w->i32);
    w->raw = calloc(g->nvalues + 1, sizeof *w->raw);
    if (!w->f32 || !w->i32 || !w->raw) {
        sn_weights_free(w);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "weights");
    }
    *out = w;
    return SHARDNET_OK;
}

void sn_weights_free(sn_weights *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->nvalues; i++) {
        if (w->f32)
            sn_buffer_free(w->f32[i]);
        if (w->i32)
            sn_buffer_free(w->i32[i]);
        if (w->raw)
            sn_buffer_free(w->raw[i]);
    }
    free(w->f32);
    free(w->i32);
    free(w->raw);
    free(w);
}

/* --- uploads ------------------------------------------------------------ */

shardnet_status sn_plan_own_buffer(sn_plan *p, sn_buffer *b)
{
    sn_buffer **nb = sn_grow(p->owned_bufs, &p->cap_owned, p->nowned,
                             sizeof *nb, 16);
    if (!nb)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "plan buffers");
    p->owned_bufs = nb;
    p->owned_bufs[p->nowned++] = b;
    return SHARDNET_OK;
}

/* A buffer holding `bytes` from `data`, owned by the plan. */
static shardnet_status upload(sn_plan *p, const void *data, size_t bytes,
                              sn_buffer **out)
{
    sn_buffer *b = NULL;
    shardnet_status st = sn_buffer_alloc(p->dev, bytes, &b);
    if (st != SHARDNET_OK)
        return st;
    if ((st = sn_plan_own_buffer(p, b)) != SHARDNET_OK) {
        sn_buffer_free(b);
        return st;
    }
    *out = b;
    return sn_buffer_write(b, 0, data, bytes);
}

shardnet_status sn_dev_upload(sn_lower *L, const sn_node *n, float *data,
                              size_t count, sn_view *out)
{
    sn_buffer *b = NULL;
    shardnet_status st;
    if (!L->plan) { /* constant folding: this needs a device */
        free(data);
        return SHARDNET_UNSUPPORTED;
    }
    st = upload(L->plan, data, count * sizeof *data, &b);
    free(data);
    if (st != SHARDNET_OK)
        return sn_error_prefix(st, "node '%s' (%s): uploading parameters",
                               n->name, n->op_type);
    *out = (sn_view){b, 0};
    return SHARDNET_OK;
}

/* One more weight of the build's on the device: its progress. */
static void weight_progress(sn_plan *p, const sn_value *v)
{
    if (v->nbytes < SN_PROGRESS_MIN || !p->up_total)
        return;
    p->up_done += v->nbytes;
    if (p->up_done > p->up_total)
        p->up_done = p->up_total;
    sn_progress(p->dev->config, &p->up_stamp, 0, p->up_done, p->up_total,
                "uploading weights to %s", p->dev->info.name);
}

/*
 * A buffer of constant v holding the `bytes` at host: used in place where
 * may_wrap and the device uses host memory (the model's mapped file,
 * whose pages the device may drop once it keeps a packed copy; they are
 * read ahead from the file now, for the first run), else
 * copied (whole 4-byte elements: views count them), after which, with
 * drop, a mapped file's pages are dropped: the weights count once.
 */
static shardnet_status weight_buffer(sn_plan *p, const sn_value *v,
                                     const void *host, size_t bytes,
                                     int may_wrap, int drop, sn_buffer **out)
{
    sn_buffer *b = NULL;
    shardnet_status st =
        may_wrap ? sn_buffer_wrap(p->dev, host, bytes,
                                  v->flags & SN_VALUE_MAPPED
                                      ? SN_WRAP_DROPPABLE
                                      : 0,
                                  &b)
                 : SHARDNET_UNSUPPORTED;
    if (st == SHARDNET_UNSUPPORTED) {
        st = sn_buffer_alloc(p->dev, (bytes + 3) / 4 * 4, &b);
        if (st == SHARDNET_OK &&
            (st = sn_buffer_write(b, 0, host, bytes)) != SHARDNET_OK) {
            sn_buffer_free(b);
            b = NULL;
        }
        if (st == SHARDNET_OK && drop)
            sn_value_drop_pages(v);
    } else if (st == SHARDNET_OK && !sn_device_is_shapes(p->dev)) {
        sn_value_prefetch_pages(v);
    }
    *out = b;
    return st;
}

/* Graph constant vi (its host data rt->host, count elements) as the
 * plan's weights' float buffer (weight_buffer; other types converted, but
 * for a planning device, which holds no data: the tensor split's search
 * builds a plan of every candidate, and a float16 model's weights would
 * be converted each time). */
static shardnet_status upload_weight(sn_plan *p, const sn_graph *g, long vi,
                                     const sn_rt *rt, size_t count,
                                     sn_buffer **out)
{
    const sn_value *v = &g->values[vi];
    size_t bytes = count * sizeof(float);
    int as_is = rt->dtype == SN_DT_FLOAT || sn_device_is_shapes(p->dev);
    float *conv = as_is ? NULL : sn_to_float(rt->dtype, rt->host, count);
    sn_buffer *b = NULL;
    if (!as_is && !conv)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "uploading '%s'", v->name);
    shardnet_status st = weight_buffer(p, v, as_is ? rt->host : conv,
                                       bytes, as_is, 1, &b);
    free(conv);
    if (st != SHARDNET_OK)
        return st;
    p->w->f32[vi] = b;
    p->w->bytes += bytes;
    *out = b;
    weight_progress(p, v);
    return SHARDNET_OK;
}

static long value_index(const sn_lower *L, const sn_rt *rt)
{
    return rt - L->rt;
}

/* Constant folding lowers nodes without a device (L->plan is NULL): any
 * request for device work then says "not foldable", quietly. */
#define NEEDS_DEVICE(L)                                                       \
    do {                                                                      \
        if (!(L)->plan)                                                       \
            return SHARDNET_UNSUPPORTED;                                      \
    } while (0)

shardnet_status sn_dev_view(sn_lower *L, const sn_node *n, sn_rt *rt,
                            sn_view *out)
{
    sn_plan *p = L->plan;
    long vi = value_index(L, rt);
    shardnet_status st;
    NEEDS_DEVICE(L);
    if (rt->on_device) {
        *out = rt->view;
        return SHARDNET_OK;
    }
    if (!rt->host)
        return sn_node_error(n, SHARDNET_INTERNAL, "value '%s' has no data",
                             L->g->values[vi].name);
    if (!sn_dtype_on_device(rt->dtype))
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "tensors of type %s are not supported on devices",
                             sn_dtype_name(rt->dtype));
    size_t count = sn_rt_elements(rt);
    /* Graph constants are uploaded once per device and shared by plans
     * (the weights are the plan's graph's: a subgraph's are not among
     * them, and are uploaded per plan). */
    int shared = !L->in_sub && (L->g->values[vi].flags & SN_VALUE_CONST) &&
                 rt->host == L->g->values[vi].data;
    if (shared && p->w->f32[vi]) {
        rt->view = (sn_view){p->w->f32[vi], 0};
        rt->on_device = 1;
        *out = rt->view;
        return SHARDNET_OK;
    }
    sn_buffer *b = NULL;
    if (shared) {
        st = upload_weight(p, L->g, vi, rt, count, &b);
    } else {
        float *f = sn_to_float(rt->dtype, rt->host, count);
        if (!f)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "uploading '%s'",
                            L->g->values[vi].name);
        st = upload(p, f, count * sizeof(float), &b);
        free(f);
    }
    if (st != SHARDNET_OK)
        return sn_error_prefix(st, "node '%s' (%s): uploading '%s'", n->name,
                               n->op_type, L->g->values[vi].name);
    rt->view = (sn_view){b, 0};
    rt->on_device = 1;
    *out = rt->view;
    return SHARDNET_OK;
}

shardnet_status sn_dev_bytes(sn_lower *L, const sn_node *n, sn_rt *rt,
                             sn_view *out)
{
    sn_plan *p = L->plan;
    long vi = value_index(L, rt);
    NEEDS_DEVICE(L);
    if (!rt->host)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "'%s' must be a constant",
                             L->g->values[vi].name);
    const sn_value *v = &L->g->values[vi];
    int shared = !L->in_sub && (v->flags & SN_VALUE_CONST) &&
                 rt->host == v->data;
    size_t bytes = sn_rt_elements(rt) * sn_dtype_size(rt->dtype);
    sn_buffer *b = shared ? p->w->raw[vi] : NULL;
    shardnet_status st = SHARDNET_OK;
    if (!b) {
        st = weight_buffer(p, v, rt->host, bytes, shared, shared, &b);
        if (st == SHARDNET_OK && !shared &&
            (st = sn_plan_own_buffer(p, b)) != SHARDNET_OK)
            sn_buffer_free(b);
        if (st != SHARDNET_OK)
            return sn_error_prefix(st, "node '%s' (%s): uploading '%s'",
                                   n->name, n->op_type, v->name);
        if (shared) {
            p->w->raw[vi] = b;
            p->w->bytes += bytes;
            weight_progress(p, v);
        }
    }
    *out = (sn_view){b, 0};
    return SHARDNET_OK;
}

int sn_rt_is_weight(const sn_lower *L, const sn_rt *rt)
{
    long vi = value_index(L, rt);
    return L->plan && !L->in_sub && rt->on_device && L->plan->w->f32[vi] &&
           rt->view.buf == L->plan->w->f32[vi];
}

shardnet_status sn_dev_indices(sn_lower *L, const sn_node *n, sn_rt *rt,
                               sn_view *out)
{
    sn_plan *p = L->plan;
    long vi = value_index(L, rt);
    NEEDS_DEVICE(L);
    if (rt->on_device_idx) {
        *out = rt->idx_view;
        return SHARDNET_OK;
    }
    if (!rt->host)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "indices computed on the device are not "
                             "supported; '%s' must be known when the model "
                             "is planned",
                             L->g->values[vi].name);
    if (!sn_dtype_is_integer(rt->dtype))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "indices '%s' are %s, not integers",
                             L->g->values[vi].name, sn_dtype_name(rt->dtype));
    size_t count = sn_rt_elements(rt);
    int32_t *idx = malloc((count ? count : 1) * sizeof *idx);
    sn_buffer *b = NULL;
    shardnet_status st;
    if (!idx)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "indices");
    for (size_t i = 0; i < count; i++) {
        int64_t v = sn_rt_get_int(rt, i);
        idx[i] = v > INT32_MAX || v < INT32_MIN ? INT32_MAX : (int32_t)v;
    }
    st = upload(p, idx, count * sizeof *idx, &b);
    free(idx);
    if (st != SHARDNET_OK)
        return st;
    rt->idx_view = (sn_view){b, 0};
    rt->on_device_idx = 1;
    *out = rt->idx_view;
    return SHARDNET_OK;
}

/* --- outputs ------------------------------------------------------------ */

int sn_check_dims(int rank, const int64_t *dims, size_t *count)
{
    size_t n = 1;
    if (rank < 0 || rank > SN_MAX_DIMS)
        return 0;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0 || __builtin_mul_overflow(n, (size_t)dims[i], &n))
            return 0;
    }
    if (n > (size_t)SN_MAX_ELEMENTS)
        return 0;
    *count = n;
    return 1;
}

static shardnet_status set_shape(sn_lower *L, const sn_node *n, size_t i,
                                 sn_dtype dtype, int rank,
                                 const int64_t *dims, sn_rt **out)
{
    size_t count;
    int vi;
    if (i >= n->noutputs || (vi = n->outputs[i]) < 0)
        return sn_node_error(n, SHARDNET_INTERNAL, "no output %zu", i);
    if (!sn_check_dims(rank, dims, &count))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "output %zu would have an invalid shape "
                             "(rank %d, or negative or huge dimensions)",
                             i, rank);
    sn_rt *rt = &L->rt[vi];
    rt->known = 1;
    rt->dtype = dtype;
    rt->rank = rank;
    for (int d = 0; d < rank; d++)
        rt->dims[d] = dims[d];
    *out = rt;
    return SHARDNET_OK;
}

shardnet_status sn_out_device(sn_lower *L, const sn_node *n, size_t i,
                              int rank, const int64_t *dims, sn_rt **out)
{
    sn_rt *rt;
    sn_alloc *a;
    shardnet_status st;
    NEEDS_DEVICE(L);
    st = set_shape(L, n, i, SN_DT_FLOAT, rank, dims, &rt);
    if (st != SHARDNET_OK)
        return st;
    if ((st = sn_alloc_new(L->plan, sn_rt_elements(rt) * sizeof(float),
                           &a)))
        return st;
    rt->on_device = 1;
    rt->view = (sn_view){&a->ph, 0};
    *out = rt;
    return SHARDNET_OK;
}

shardnet_status sn_out_alias(sn_lower *L, const sn_node *n, size_t i,
                             const sn_rt *src, int rank, const int64_t *dims)
{
    sn_rt *rt;
    sn_rt copy = *src;
    shardnet_status st;
    if (!L->plan && !src->host)
        return SHARDNET_UNSUPPORTED;
    st = set_shape(L, n, i, src->dtype, rank, dims, &rt);
    if (st != SHARDNET_OK)
        return st;
    if (sn_rt_elements(rt) != sn_rt_elements(&copy))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "cannot view %zu elements as %zu",
                             sn_rt_elements(&copy), sn_rt_elements(rt));
    rt->host = copy.host; /* shared, not owned */
    rt->on_device = copy.on_device;
    rt->view = copy.view;
    rt->on_device_idx = copy.on_device_idx;
    rt->idx_view = copy.idx_view;
    return SHARDNET_OK;
}

shardnet_status sn_out_range(sn_lower *L, const sn_node *n, size_t i,
                             const sn_rt *src, size_t at, int rank,
                             const int64_t *dims)
{
    sn_rt *rt;
    sn_view v = src->view;
    size_t have = sn_rt_elements(src);
    shardnet_status st;
    NEEDS_DEVICE(L);
    if (!src->on_device)
        return sn_node_error(n, SHARDNET_INTERNAL, "a range of host data");
    st = set_shape(L, n, i, SN_DT_FLOAT, rank, dims, &rt);
    if (st != SHARDNET_OK)
        return st;
    if (at > have || sn_rt_elements(rt) > have - at)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "elements [%zu, %zu) are not within %zu", at,
                             at + sn_rt_elements(rt), have);
    v.offset += at;
    rt->host = NULL;
    rt->on_device = 1;
    rt->view = v;
    rt->on_device_idx = 0;
    return SHARDNET_OK;
}

shardnet_status sn_out_host(sn_lower *L, const sn_node *n, size_t i,
                            sn_dtype dtype, int rank, const int64_t *dims,
                            void *data)
{
    sn_rt *rt;
    shardnet_status st = set_shape(L, n, i, dtype, rank, dims, &rt);
    if (st != SHARDNET_OK) {
        free(data);
        return st;
    }
    free(rt->host_owned);
    rt->host = rt->host_owned = data;
    return SHARDNET_OK;
}

shardnet_status sn_scratch(sn_lower *L, size_t elements, sn_view *out)
{
    sn_alloc *a;
    shardnet_status st;
    NEEDS_DEVICE(L);
    st = sn_alloc_new(L->plan, elements * sizeof(float), &a);
    if (st != SHARDNET_OK)
        return st;
    *out = (sn_view){&a->ph, 0};
    return SHARDNET_OK;
}

/* --- steps -------------------------------------------------------------- */

/* The kernel step s launches and its variant (SN_VARIANT_ANY where the
 * kernel has none); -1 for a collective, which is no kernel. */
static int step_kernel(const sn_step *s, int *variant)
{
    if (s->kind >= SN_STEP_COLLECTIVE) { /* and the branches */
        *variant = SN_VARIANT_ANY;
        return -1;
    }
    *variant = sn_kernel_desc_variant((sn_kernel)s->kind, &s->u);
    return s->kind;
}

/* A step the plan's device cannot run is refused while the plan is built,
 * before anything is launched, naming the node, the kernel and the
 * device. */
static shardnet_status check_supported(const sn_plan *p, const sn_node *n,
                                       const sn_step *s)
{
    int variant, k = step_kernel(s, &variant);
    char name[64];
    if (k < 0 || sn_device_supports(p->dev, (sn_kernel)k, variant))
        return SHARDNET_OK;
    return sn_node_error(n, SHARDNET_UNSUPPORTED,
                         "device %s (%s) does not run the kernel %s that "
                         "this operator needs",
                         p->dev->info.name, p->dev->info.model,
                         sn_kernel_variant_name((sn_kernel)k, variant, name,
                                                sizeof name));
}

shardnet_status sn_emit(sn_lower *L, const sn_node *n, const sn_step *s)
{
    sn_plan *p = L->plan;
    sn_view *v[8];
    shardnet_status st;
    NEEDS_DEVICE(L);
    if ((st = check_supported(p, n, s)) != SHARDNET_OK)
        return st;
    sn_step *ns = sn_grow(p->steps, &p->cap_steps, p->nsteps, sizeof *ns, 64);
    if (!ns)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "plan steps");
    p->steps = ns;
    sn_step *dst = &p->steps[p->nsteps];
    *dst = *s;
    dst->node = L->in_sub ? L->owner : (int)(n - L->g->nodes);
    size_t nv = sn_step_views(dst, v);
    for (size_t i = 0; i < nv; i++) {
        sn_alloc *a = sn_alloc_of(v[i]);
        if (!a)
            continue;
        if (a->first < 0)
            a->first = (long)p->nsteps;
        a->last = (long)p->nsteps;
    }
    p->nsteps++;
    return SHARDNET_OK;
}

shardnet_status sn_emit_round_half(sn_lower *L, const sn_node *n,
                                   sn_dtype t, size_t count, sn_view x,
                                   sn_view y)
{
    sn_step s = {.kind = SN_KERNEL_UNARY};
    s.u.unary = (sn_unary_desc){
        .op = t == SN_DT_FLOAT16 ? SN_UNARY_ROUND_HALF : SN_UNARY_ROUND_BF16,
        .n = count, .x = x, .y = y};
    return sn_emit(L, n, &s);
}

shardnet_status sn_emit_gemm_runs(sn_lower *L, const sn_node *n,
                                  const sn_step *s, size_t run)
{
    const sn_gemm_desc *g = &s->u.gemm;
    if (!run || run >= g->k)
        return sn_emit(L, n, s);
    for (size_t k0 = 0; k0 < g->k; k0 += run) {
        sn_step r = *s;
        sn_gemm_desc *d = &r.u.gemm;
        const int last = g->k - k0 <= run;
        shardnet_status st;
        d->k = last ? g->k - k0 : run;
        d->a.offset += g->trans_a ? k0 * g->lda : k0;
        d->b.offset += g->trans_b ? k0 : k0 * g->ldb;
        if (k0)
            d->beta = 1.0f;
        if (!last) {
            d->bias = d->res = (sn_view){0};
            d->act = SN_ACT_NONE;
        }
        if ((st = sn_emit(L, n, &r)) != SHARDNET_OK)
            return st;
    }
    return SHARDNET_OK;
}

size_t sn_step_count(const sn_lower *L)
{
    return L->plan ? L->plan->nsteps : 0;
}

void sn_step_retarget(sn_lower *L, size_t at, size_t target)
{
    if (L->plan && at < L->plan->nsteps)
        L->plan->steps[at].branch.target = target;
}

sn_rt *sn_in(sn_lower *L, const sn_node *n, size_t i)
{
    if (i >= n->ninputs || n->inputs[i] < 0)
        return NULL;
    return &L->rt[n->inputs[i]];
}
