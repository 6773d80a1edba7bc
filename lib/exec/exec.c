/* Plans: lowering a graph to kernel launches on one device, and running
 * them.  See exec.h for the model. */
#include <config.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "core/trace.h"

/* Float inputs of at most this many elements are known on the host too. */
#define SMALL_INPUT 64

/* Activations start on this boundary (bytes): a cache line. */
#define ARENA_ALIGN 64

struct sn_alloc {
    size_t bytes;
    long first, last; /* steps touching it; -1 = none yet */
    size_t offset;    /* in the arena, once assigned */
    sn_buffer ph;     /* placeholder that views point at until patched */
};

struct sn_plan {
    sn_graph *g;
    sn_device *dev;
    sn_weights *w;
    sn_rt *rt;
    sn_step *steps;
    size_t nsteps, cap_steps;
    sn_alloc **allocs;
    size_t nallocs, cap_allocs;
    sn_buffer *arena;
    size_t arena_bytes;
    sn_buffer **owned_bufs; /* uploads of folded constants, input staging */
    size_t nowned, cap_owned;
    sn_buffer **input_buf;  /* per graph input: staging buffer or NULL */
    sn_binding *bound;      /* shapes (and host data) it was built for */
    void **bound_data;      /* copies of the host inputs' data */
    sn_host_tensor *outputs;
    sn_coll_hook coll_hook; /* runs SN_STEP_COLLECTIVE steps */
    void *coll_ctx;
    double *node_time;      /* set: each step waited for, its seconds
                               added here by graph node */
};

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

/* --- small helpers ------------------------------------------------------ */

size_t sn_rt_elements(const sn_rt *rt)
{
    size_t n = 1;
    for (int i = 0; i < rt->rank; i++)
        n *= (size_t)rt->dims[i];
    return n;
}

int sn_rt_is_host(const sn_rt *rt)
{
    return rt && rt->host != NULL;
}

float sn_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff, bits;
    float f;
    if (exp == 0x1f) { /* inf, NaN */
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp) {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man) { /* subnormal: value = man * 2^-24 */
        f = (float)man * 0x1p-24f;
        return sign ? -f : f;
    } else {
        bits = sign;
    }
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t sn_float_to_half(float f)
{
    uint32_t x, sign, exp, man;
    memcpy(&x, &f, sizeof x);
    sign = (x >> 16) & 0x8000;
    exp = (x >> 23) & 0xff;
    man = x & 0x7fffff;
    if (exp == 0xff) /* inf, NaN (kept quiet) */
        return (uint16_t)(sign | 0x7c00 | (man ? 0x200 | (man >> 13) : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 0x1f)
        return (uint16_t)(sign | 0x7c00);
    if (e <= 0) { /* subnormal half, or zero */
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = man >> shift, rest = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rest > mid || (rest == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = sign | ((uint32_t)e << 10) | (man >> 13), rest = man & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
        h++; /* may carry into the exponent: still right */
    return (uint16_t)h;
}

float sn_bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t sn_float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffff) > 0x7f800000) /* NaN stays NaN */
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/*
 * Element i of host data, whatever its alignment: initializers point into
 * the mapped model file, where raw_data need not be aligned.
 */
#define LOAD(type, p, i)                                                      \
    ({                                                                        \
        type v_;                                                              \
        memcpy(&v_, (const char *)(p) + (i) * sizeof(type), sizeof v_);       \
        v_;                                                                   \
    })

int64_t sn_rt_get_int(const sn_rt *rt, size_t i)
{
    const void *p = rt->host;
    switch (rt->dtype) {
    case SN_DT_INT64:
        return LOAD(int64_t, p, i);
    case SN_DT_INT32:
        return LOAD(int32_t, p, i);
    case SN_DT_INT16:
        return LOAD(int16_t, p, i);
    case SN_DT_INT8:
        return LOAD(int8_t, p, i);
    case SN_DT_UINT8:
    case SN_DT_BOOL:
        return LOAD(uint8_t, p, i);
    case SN_DT_UINT16:
        return LOAD(uint16_t, p, i);
    case SN_DT_UINT32:
        return LOAD(uint32_t, p, i);
    case SN_DT_UINT64:
        return (int64_t)LOAD(uint64_t, p, i);
    case SN_DT_FLOAT:
        return (int64_t)LOAD(float, p, i);
    case SN_DT_DOUBLE:
        return (int64_t)LOAD(double, p, i);
    case SN_DT_FLOAT16:
        return (int64_t)sn_half_to_float(LOAD(uint16_t, p, i));
    case SN_DT_BFLOAT16:
        return (int64_t)sn_bf16_to_float(LOAD(uint16_t, p, i));
    default:
        return 0;
    }
}

double sn_rt_get_double(const sn_rt *rt, size_t i)
{
    switch (rt->dtype) {
    case SN_DT_FLOAT:
        return LOAD(float, rt->host, i);
    case SN_DT_DOUBLE:
        return LOAD(double, rt->host, i);
    case SN_DT_FLOAT16:
        return sn_half_to_float(LOAD(uint16_t, rt->host, i));
    case SN_DT_BFLOAT16:
        return sn_bf16_to_float(LOAD(uint16_t, rt->host, i));
    default:
        return (double)sn_rt_get_int(rt, i);
    }
}

/* Host data of n elements of type t converted to float32 (malloc'ed). */
static float *to_float(sn_dtype t, const void *data, size_t n)
{
    float *f = malloc((n ? n : 1) * sizeof *f);
    sn_rt tmp = {.dtype = t, .host = data};
    if (!f)
        return NULL;
    if (t == SN_DT_FLOAT) {
        memcpy(f, data, n * sizeof *f);
        return f;
    }
    for (size_t i = 0; i < n; i++)
        f[i] = (float)sn_rt_get_double(&tmp, i);
    return f;
}

int sn_dtype_is_integer(sn_dtype t)
{
    switch (t) {
    case SN_DT_INT64:
    case SN_DT_INT32:
    case SN_DT_INT16:
    case SN_DT_INT8:
    case SN_DT_UINT8:
    case SN_DT_UINT16:
    case SN_DT_UINT32:
    case SN_DT_UINT64:
    case SN_DT_BOOL:
        return 1;
    default:
        return 0;
    }
}

static int is_device_type(sn_dtype t)
{
    return t == SN_DT_FLOAT || t == SN_DT_DOUBLE || t == SN_DT_FLOAT16 ||
           t == SN_DT_BFLOAT16 || sn_dtype_is_integer(t);
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
    if (!w->f32 || !w->i32) {
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
    }
    free(w->f32);
    free(w->i32);
    free(w);
}

/* --- plan building ------------------------------------------------------ */

static shardnet_status own_buffer(sn_plan *p, sn_buffer *b)
{
    if (p->nowned == p->cap_owned) {
        size_t cap = p->cap_owned ? 2 * p->cap_owned : 16;
        sn_buffer **nb = realloc(p->owned_bufs, cap * sizeof *nb);
        if (!nb)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "plan buffers");
        p->owned_bufs = nb;
        p->cap_owned = cap;
    }
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
    if ((st = own_buffer(p, b)) != SHARDNET_OK) {
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
    if (!is_device_type(rt->dtype))
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "tensors of type %s are not supported on devices",
                             sn_dtype_name(rt->dtype));
    size_t count = sn_rt_elements(rt);
    /* Graph constants are uploaded once per device and shared by plans. */
    int shared = (L->g->values[vi].flags & SN_VALUE_CONST) &&
                 rt->host == L->g->values[vi].data;
    if (shared && p->w->f32[vi]) {
        rt->view = (sn_view){p->w->f32[vi], 0};
        rt->on_device = 1;
        *out = rt->view;
        return SHARDNET_OK;
    }
    float *f = to_float(rt->dtype, rt->host, count);
    sn_buffer *b = NULL;
    if (!f)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "uploading '%s'",
                        L->g->values[vi].name);
    if (shared) {
        st = sn_buffer_alloc(p->dev, count * sizeof(float), &b);
        if (st == SHARDNET_OK &&
            (st = sn_buffer_write(b, 0, f, count * sizeof(float))) !=
                SHARDNET_OK) {
            sn_buffer_free(b);
            b = NULL;
        }
        if (st == SHARDNET_OK) {
            p->w->f32[vi] = b;
            p->w->bytes += count * sizeof(float);
        }
    } else {
        st = upload(p, f, count * sizeof(float), &b);
    }
    free(f);
    if (st != SHARDNET_OK)
        return sn_error_prefix(st, "node '%s' (%s): uploading '%s'", n->name,
                               n->op_type, L->g->values[vi].name);
    rt->view = (sn_view){b, 0};
    rt->on_device = 1;
    *out = rt->view;
    return SHARDNET_OK;
}

int sn_rt_is_weight(const sn_lower *L, const sn_rt *rt)
{
    long vi = value_index(L, rt);
    return L->plan && rt->on_device && L->plan->w->f32[vi] &&
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

static shardnet_status new_alloc(sn_plan *p, size_t bytes, sn_alloc **out)
{
    sn_alloc *a;
    if (p->nallocs == p->cap_allocs) {
        size_t cap = p->cap_allocs ? 2 * p->cap_allocs : 64;
        sn_alloc **na = realloc(p->allocs, cap * sizeof *na);
        if (!na)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "plan");
        p->allocs = na;
        p->cap_allocs = cap;
    }
    a = calloc(1, sizeof *a);
    if (!a)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "plan");
    a->bytes = bytes ? bytes : sizeof(float);
    a->first = a->last = -1;
    a->ph.size = a->bytes;
    a->ph.handle = a; /* dev == NULL marks a placeholder */
    p->allocs[p->nallocs++] = a;
    *out = a;
    return SHARDNET_OK;
}

static int check_dims(int rank, const int64_t *dims, size_t *count)
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
    if (!check_dims(rank, dims, &count))
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
    if ((st = new_alloc(L->plan, sn_rt_elements(rt) * sizeof(float), &a)))
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
    st = new_alloc(L->plan, elements * sizeof(float), &a);
    if (st != SHARDNET_OK)
        return st;
    *out = (sn_view){&a->ph, 0};
    return SHARDNET_OK;
}

/* Pointers to every view a step uses, for lifetimes and patching. */
static size_t step_views(sn_step *s, sn_view **v)
{
    switch (s->kind) {
    case SN_STEP_GEMM:
        v[0] = &s->u.gemm.a, v[1] = &s->u.gemm.b, v[2] = &s->u.gemm.c;
        v[3] = &s->u.gemm.bias;
        return 4;
    case SN_STEP_BINARY:
        v[0] = &s->u.binary.a, v[1] = &s->u.binary.b, v[2] = &s->u.binary.c;
        return 3;
    case SN_STEP_UNARY:
        v[0] = &s->u.unary.x, v[1] = &s->u.unary.y;
        return 2;
    case SN_STEP_SOFTMAX:
        v[0] = &s->u.softmax.x, v[1] = &s->u.softmax.y;
        return 2;
    case SN_STEP_REDUCE:
        v[0] = &s->u.reduce.x, v[1] = &s->u.reduce.y;
        return 2;
    case SN_STEP_WHERE:
        v[0] = &s->u.where.cond, v[1] = &s->u.where.x;
        v[2] = &s->u.where.y, v[3] = &s->u.where.out;
        return 4;
    case SN_STEP_COPY:
        v[0] = &s->u.copy.src, v[1] = &s->u.copy.dst;
        return 2;
    case SN_STEP_IM2COL:
        v[0] = &s->u.im2col.src, v[1] = &s->u.im2col.dst;
        return 2;
    case SN_STEP_POOL:
        v[0] = &s->u.pool.src, v[1] = &s->u.pool.dst;
        return 2;
    case SN_STEP_LAYERNORM:
        v[0] = &s->u.layernorm.x, v[1] = &s->u.layernorm.scale;
        v[2] = &s->u.layernorm.bias, v[3] = &s->u.layernorm.y;
        return 4;
    case SN_STEP_GATHER:
        v[0] = &s->u.gather.data, v[1] = &s->u.gather.indices;
        v[2] = &s->u.gather.out;
        return 3;
    case SN_STEP_COLLECTIVE:
        v[0] = &s->u.coll.send, v[1] = &s->u.coll.recv;
        return 2;
    }
    return 0;
}

static sn_alloc *alloc_of(const sn_view *v)
{
    return v->buf && !v->buf->dev ? (sn_alloc *)v->buf->handle : NULL;
}

shardnet_status sn_emit(sn_lower *L, const sn_node *n, const sn_step *s)
{
    sn_plan *p = L->plan;
    sn_view *v[8];
    NEEDS_DEVICE(L);
    if (p->nsteps == p->cap_steps) {
        size_t cap = p->cap_steps ? 2 * p->cap_steps : 64;
        sn_step *ns = realloc(p->steps, cap * sizeof *ns);
        if (!ns)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "plan steps");
        p->steps = ns;
        p->cap_steps = cap;
    }
    sn_step *dst = &p->steps[p->nsteps];
    *dst = *s;
    dst->node = (int)(n - L->g->nodes);
    size_t nv = step_views(dst, v);
    for (size_t i = 0; i < nv; i++) {
        sn_alloc *a = alloc_of(v[i]);
        if (!a)
            continue;
        if (a->first < 0)
            a->first = (long)p->nsteps;
        a->last = (long)p->nsteps;
    }
    p->nsteps++;
    return SHARDNET_OK;
}

sn_rt *sn_in(sn_lower *L, const sn_node *n, size_t i)
{
    if (i >= n->ninputs || n->inputs[i] < 0)
        return NULL;
    return &L->rt[n->inputs[i]];
}

/*
 * Offsets for every allocation: largest first, each at the lowest aligned
 * offset that no allocation with an overlapping lifetime occupies.
 */
static int by_size_desc(const void *x, const void *y)
{
    const sn_alloc *a = *(sn_alloc *const *)x, *b = *(sn_alloc *const *)y;
    return (a->bytes < b->bytes) - (a->bytes > b->bytes);
}

static size_t align_up(size_t v)
{
    return (v + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
}

static shardnet_status assign_offsets(sn_plan *p)
{
    size_t n = p->nallocs, total = 0;
    sn_alloc **order = malloc((n ? n : 1) * sizeof *order);
    if (!order)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "plan");
    if (n)
        memcpy(order, p->allocs, n * sizeof *order);
    qsort(order, n, sizeof *order, by_size_desc);
    for (size_t i = 0; i < n; i++) {
        sn_alloc *a = order[i];
        size_t off = 0;
        int moved = 1;
        if (a->first < 0) /* never used by a step */
            a->first = a->last = 0;
        /* Move past every placed, live-at-the-same-time neighbour that
         * overlaps, until a gap fits. */
        while (moved) {
            moved = 0;
            for (size_t j = 0; j < i; j++) {
                sn_alloc *b = order[j];
                if (b->last < a->first || a->last < b->first)
                    continue;
                if (off < b->offset + align_up(b->bytes) &&
                    b->offset < off + align_up(a->bytes)) {
                    off = b->offset + align_up(b->bytes);
                    moved = 1;
                }
            }
        }
        a->offset = off;
        if (off + align_up(a->bytes) > total)
            total = off + align_up(a->bytes);
    }
    free(order);
    p->arena_bytes = total;
    return SHARDNET_OK;
}

static void patch_view(sn_plan *p, sn_view *v)
{
    sn_alloc *a = alloc_of(v);
    if (a) {
        v->buf = p->arena;
        v->offset += a->offset / sizeof(float);
    }
}

static shardnet_status finish_arena(sn_plan *p)
{
    shardnet_status st;
    sn_view *v[8];
    /* Graph outputs must survive to the end of the run. */
    for (size_t i = 0; i < p->g->noutputs; i++) {
        sn_rt *rt = &p->rt[p->g->outputs[i]];
        sn_alloc *a = rt->on_device ? alloc_of(&rt->view) : NULL;
        if (a)
            a->last = (long)p->nsteps;
    }
    if ((st = assign_offsets(p)) != SHARDNET_OK)
        return st;
    if ((st = sn_buffer_alloc(p->dev, p->arena_bytes ? p->arena_bytes : 64,
                              &p->arena)) != SHARDNET_OK)
        return sn_error_prefix(st, "activation arena of %zu bytes",
                               p->arena_bytes);
    for (size_t s = 0; s < p->nsteps; s++) {
        size_t nv = step_views(&p->steps[s], v);
        for (size_t i = 0; i < nv; i++)
            patch_view(p, v[i]);
    }
    for (size_t i = 0; i < p->g->nvalues; i++)
        if (p->rt[i].on_device)
            patch_view(p, &p->rt[i].view);
    return SHARDNET_OK;
}

static void copy_binding(sn_binding *dst, const sn_binding *src)
{
    *dst = *src;
    dst->data = NULL;
}

shardnet_status sn_plan_build(sn_graph *g, sn_weights *w,
                              const sn_binding *inputs, sn_op_lookup ops,
                              sn_plan **out)
{
    sn_plan *p = calloc(1, sizeof *p);
    sn_lower L;
    shardnet_status st = SHARDNET_OK;

    *out = NULL;
    if (!p)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "plan");
    p->g = g;
    p->dev = w->dev;
    p->w = w;
    p->rt = calloc(g->nvalues + 1, sizeof *p->rt);
    p->input_buf = calloc(g->ninputs + 1, sizeof *p->input_buf);
    p->bound = calloc(g->ninputs + 1, sizeof *p->bound);
    p->bound_data = calloc(g->ninputs + 1, sizeof *p->bound_data);
    p->outputs = calloc(g->noutputs + 1, sizeof *p->outputs);
    if (!p->rt || !p->input_buf || !p->bound || !p->bound_data ||
        !p->outputs) {
        st = sn_error(SHARDNET_OUT_OF_MEMORY, "plan");
        goto error;
    }
    L = (sn_lower){.g = g, .dev = w->dev, .plan = p, .rt = p->rt};

    /* Constants. */
    for (size_t i = 0; i < g->nvalues; i++) {
        const sn_value *v = &g->values[i];
        if (!(v->flags & SN_VALUE_CONST))
            continue;
        sn_rt *rt = &p->rt[i];
        rt->known = 1;
        rt->dtype = v->dtype;
        rt->rank = v->rank;
        memcpy(rt->dims, v->dims, sizeof rt->dims);
        rt->host = v->data ? v->data : ""; /* empty tensors too */
    }
    /* Inputs: floats are staged on the device, everything else is a host
     * value that shapes and indices may depend on. */
    for (size_t i = 0; i < g->ninputs; i++) {
        const sn_value *v = &g->values[g->inputs[i]];
        const sn_binding *b = &inputs[i];
        sn_rt *rt = &p->rt[g->inputs[i]];
        size_t count;
        if (!check_dims(b->rank, b->dims, &count) ||
            count * sn_dtype_size(b->dtype) != b->nbytes) {
            st = sn_error(SHARDNET_INVALID_ARGUMENT,
                          "input '%s': shape and data size disagree", v->name);
            goto error;
        }
        /* 16-bit floats arrive as their bits (the ONNX test data stores
         * bfloat16 as uint16). */
        sn_dtype bt = b->dtype;
        if (bt == SN_DT_UINT16 &&
            (v->dtype == SN_DT_FLOAT16 || v->dtype == SN_DT_BFLOAT16))
            bt = v->dtype;
        if (v->dtype != SN_DT_UNDEFINED && v->dtype != bt) {
            st = sn_error(SHARDNET_INVALID_ARGUMENT,
                          "input '%s' is %s, but %s data was given", v->name,
                          sn_dtype_name(v->dtype), sn_dtype_name(b->dtype));
            goto error;
        }
        if (v->rank >= 0) {
            if (v->rank != b->rank) {
                st = sn_error(SHARDNET_INVALID_ARGUMENT,
                              "input '%s' has rank %d, but data of rank %d "
                              "was given",
                              v->name, v->rank, b->rank);
                goto error;
            }
            for (int d = 0; d < v->rank; d++)
                if (v->dims[d] >= 0 && v->dims[d] != b->dims[d]) {
                    st = sn_error(SHARDNET_INVALID_ARGUMENT,
                                  "input '%s': dimension %d is %lld, but "
                                  "%lld was given",
                                  v->name, d, (long long)v->dims[d],
                                  (long long)b->dims[d]);
                    goto error;
                }
        }
        copy_binding(&p->bound[i], b);
        rt->known = 1;
        rt->dtype = bt;
        rt->rank = b->rank;
        memcpy(rt->dims, b->dims, sizeof rt->dims);
        /* Small inputs (scalars such as a Clip bound or a dropout ratio)
         * are also known on the host, so ops can use their values; the
         * plan is then only reused for the same values. */
        if (b->dtype != SN_DT_FLOAT || count <= SMALL_INPUT) {
            void *copy = malloc(b->nbytes ? b->nbytes : 1);
            void *copy2 = malloc(b->nbytes ? b->nbytes : 1);
            if (!copy || !copy2) {
                free(copy);
                free(copy2);
                st = sn_error(SHARDNET_OUT_OF_MEMORY, "input '%s'", v->name);
                goto error;
            }
            memcpy(copy, b->data, b->nbytes);
            memcpy(copy2, b->data, b->nbytes);
            rt->host = rt->host_owned = copy;
            p->bound_data[i] = copy2;
        }
        if (b->dtype == SN_DT_FLOAT) {
            sn_buffer *buf = NULL;
            if ((st = sn_buffer_alloc(p->dev, b->nbytes ? b->nbytes : 4,
                                      &buf)) != SHARDNET_OK ||
                (st = own_buffer(p, buf)) != SHARDNET_OK) {
                sn_buffer_free(buf);
                goto error;
            }
            p->input_buf[i] = buf;
            rt->on_device = 1;
            rt->view = (sn_view){buf, 0};
        }
    }

    for (size_t ni = 0; ni < g->nnodes; ni++) {
        const sn_node *n = &g->nodes[ni];
        const sn_op_def *op;
        if (n->dead)
            continue;
        op = ops(n->domain, n->op_type);
        if (!op) {
            st = sn_node_error(n, SHARDNET_UNSUPPORTED,
                               "operator not supported");
            goto error;
        }
        if ((int)n->ninputs < op->min_inputs ||
            (int)n->ninputs > op->max_inputs) {
            st = sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                               "%zu inputs; %s takes %d to %d", n->ninputs,
                               n->op_type, op->min_inputs, op->max_inputs);
            goto error;
        }
        for (size_t i = 0; i < n->ninputs; i++) {
            if (n->inputs[i] < 0) {
                if ((int)i < op->min_inputs) {
                    st = sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                       "required input %zu is missing", i);
                    goto error;
                }
                continue;
            }
            if (!p->rt[n->inputs[i]].known) {
                st = sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                   "input '%s' has no value",
                                   g->values[n->inputs[i]].name);
                goto error;
            }
        }
        if ((st = op->lower(&L, n)) != SHARDNET_OK)
            goto error;
        for (size_t i = 0; i < n->noutputs; i++) {
            if (n->outputs[i] >= 0 && !p->rt[n->outputs[i]].known &&
                (g->values[n->outputs[i]].flags & SN_VALUE_OUTPUT)) {
                st = sn_node_error(n, SHARDNET_UNSUPPORTED,
                                   "output %zu ('%s') is not produced", i,
                                   g->values[n->outputs[i]].name);
                goto error;
            }
        }
    }
    for (size_t i = 0; i < g->noutputs; i++)
        if (!p->rt[g->outputs[i]].known) {
            st = sn_error(SHARDNET_INVALID_ARGUMENT,
                          "graph output '%s' is never computed",
                          g->values[g->outputs[i]].name);
            goto error;
        }
    if ((st = finish_arena(p)) != SHARDNET_OK)
        goto error;
    *out = p;
    return SHARDNET_OK;
error:
    sn_plan_free(p);
    return st;
}

shardnet_status sn_plan_cache_get(sn_plan **cache, size_t n, sn_graph *g,
                                  sn_weights *w, const sn_binding *inputs,
                                  sn_op_lookup ops, sn_plan **out)
{
    sn_plan *p = NULL;
    size_t at = n - 1;
    shardnet_status st;
    for (size_t i = 0; i < n && cache[i]; i++)
        if (sn_plan_matches(cache[i], inputs)) {
            p = cache[i];
            at = i;
            break;
        }
    if (!p) {
        if ((st = sn_plan_build(g, w, inputs, ops, &p)) != SHARDNET_OK)
            return st;
        sn_plan_free(cache[n - 1]);
    }
    /* Most recently used first. */
    memmove(&cache[1], &cache[0], at * sizeof cache[0]);
    cache[0] = p;
    *out = p;
    return SHARDNET_OK;
}

int sn_plan_matches(const sn_plan *p, const sn_binding *inputs)
{
    for (size_t i = 0; i < p->g->ninputs; i++) {
        const sn_binding *a = &p->bound[i], *b = &inputs[i];
        if (a->dtype != b->dtype || a->rank != b->rank ||
            a->nbytes != b->nbytes ||
            memcmp(a->dims, b->dims, (size_t)a->rank * sizeof a->dims[0]))
            return 0;
        if (p->bound_data[i] && memcmp(p->bound_data[i], b->data, b->nbytes))
            return 0;
    }
    return 1;
}

static shardnet_status launch(sn_device *dev, sn_step *s)
{
    switch (s->kind) {
    case SN_STEP_GEMM:
        return sn_gemm(dev, &s->u.gemm);
    case SN_STEP_BINARY:
        return sn_binary(dev, &s->u.binary);
    case SN_STEP_UNARY:
        return sn_unary(dev, &s->u.unary);
    case SN_STEP_SOFTMAX:
        return sn_softmax(dev, &s->u.softmax);
    case SN_STEP_REDUCE:
        return sn_reduce(dev, &s->u.reduce);
    case SN_STEP_WHERE:
        return sn_where(dev, &s->u.where);
    case SN_STEP_COPY:
        return sn_copy(dev, &s->u.copy);
    case SN_STEP_IM2COL:
        return sn_im2col(dev, &s->u.im2col);
    case SN_STEP_POOL:
        return sn_pool(dev, &s->u.pool);
    case SN_STEP_LAYERNORM:
        return sn_layernorm(dev, &s->u.layernorm);
    case SN_STEP_GATHER:
        return sn_gather(dev, &s->u.gather);
    case SN_STEP_COLLECTIVE:
        break; /* run by run_and_read through the hook */
    }
    return sn_error(SHARDNET_INTERNAL, "unknown step kind");
}

/* Convert count floats into dtype t at dst. */
static void from_float(sn_dtype t, const float *src, void *dst, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        float f = src[i];
        switch (t) {
        case SN_DT_DOUBLE:
            ((double *)dst)[i] = f;
            break;
        case SN_DT_INT64:
            ((int64_t *)dst)[i] = (int64_t)f;
            break;
        case SN_DT_INT32:
            ((int32_t *)dst)[i] = (int32_t)f;
            break;
        case SN_DT_BOOL:
        case SN_DT_UINT8:
            ((uint8_t *)dst)[i] = (uint8_t)(f != 0.0f ? (t == SN_DT_BOOL ? 1 : f) : 0);
            break;
        case SN_DT_INT8:
            ((int8_t *)dst)[i] = (int8_t)f;
            break;
        case SN_DT_INT16:
            ((int16_t *)dst)[i] = (int16_t)f;
            break;
        case SN_DT_UINT16:
            ((uint16_t *)dst)[i] = (uint16_t)f;
            break;
        case SN_DT_UINT32:
            ((uint32_t *)dst)[i] = (uint32_t)f;
            break;
        case SN_DT_UINT64:
            ((uint64_t *)dst)[i] = (uint64_t)f;
            break;
        case SN_DT_FLOAT16:
            ((uint16_t *)dst)[i] = sn_float_to_half(f);
            break;
        case SN_DT_BFLOAT16:
            ((uint16_t *)dst)[i] = sn_float_to_bf16(f);
            break;
        default:
            ((float *)dst)[i] = f;
        }
    }
}

static void return_inputs(sn_plan *p);
static shardnet_status run_and_read(sn_plan *p);

shardnet_status sn_plan_run(sn_plan *p, const sn_binding *inputs)
{
    shardnet_status st;
    sn_graph *g = p->g;

    /* Inputs: lent to the device where its buffers are host memory (no
     * copy), else written into the staging buffers. */
    int lend = p->dev->ops->buffer_lend != NULL;
    double t0 = sn_trace_on() ? sn_trace_now() : 0;
    for (size_t i = 0; i < g->ninputs; i++) {
        if (!p->input_buf[i])
            continue;
        st = lend && inputs[i].nbytes
                 ? p->dev->ops->buffer_lend(p->input_buf[i],
                                            (void *)inputs[i].data)
                 : sn_buffer_write(p->input_buf[i], 0, inputs[i].data,
                                   inputs[i].nbytes);
        if (st != SHARDNET_OK) {
            return_inputs(p);
            return sn_error_prefix(st, "input '%s'",
                                   g->values[g->inputs[i]].name);
        }
    }
    if (sn_trace_on())
        sn_trace_add(p->dev->info.name, "transfer",
                     lend ? "inputs (lent)" : "inputs to device", t0,
                     sn_trace_now());
    st = run_and_read(p);
    return_inputs(p);
    return st;
}

/* Give lent input memory back to the staging buffers. */
static void return_inputs(sn_plan *p)
{
    if (!p->dev->ops->buffer_lend)
        return;
    for (size_t i = 0; i < p->g->ninputs; i++)
        if (p->input_buf[i])
            p->dev->ops->buffer_lend(p->input_buf[i], NULL);
}

/* Launch the steps, wait, and read the outputs back. */
static shardnet_status run_and_read(sn_plan *p)
{
    shardnet_status st;
    sn_graph *g = p->g;
    int tracing = sn_trace_on();
    double node_t0 = 0; /* timing nodes: when the current node began */
    for (size_t s = 0; s < p->nsteps; s++) {
        const sn_node *n = &g->nodes[p->steps[s].node];
        double t0 = tracing || p->node_time ? sn_trace_now() : 0;
        if (p->node_time && (s == 0 || p->steps[s - 1].node != p->steps[s].node))
            node_t0 = t0;
        if (p->steps[s].kind == SN_STEP_COLLECTIVE) {
            if (!p->coll_hook) {
                sn_synchronize(p->dev);
                return sn_error(SHARDNET_UNSUPPORTED,
                                "node '%s' (%s): a collective outside a "
                                "tensor split",
                                n->name, n->op_type);
            }
            if ((st = sn_synchronize(p->dev)) != SHARDNET_OK ||
                (st = p->coll_hook(p->coll_ctx, &p->steps[s].u.coll)) !=
                    SHARDNET_OK)
                return st;
            continue;
        }
        if ((st = launch(p->dev, &p->steps[s])) != SHARDNET_OK) {
            sn_synchronize(p->dev);
            return sn_error_prefix(st, "node '%s' (%s)", n->name, n->op_type);
        }
        /* A node's time: from its first step to the end of its last (one
         * wait per node, not per step: a batched MatMul may be hundreds
         * of small launches). */
        if (p->node_time && (s + 1 == p->nsteps ||
                             p->steps[s + 1].node != p->steps[s].node)) {
            if ((st = sn_synchronize(p->dev)) != SHARDNET_OK)
                return st;
            p->node_time[p->steps[s].node] += sn_trace_now() - node_t0;
        }
        if (tracing) { /* wait, so that the kernel's time is its own */
            char name[96];
            sn_synchronize(p->dev);
            snprintf(name, sizeof name, "%s %s", n->op_type, n->name);
            sn_trace_add(p->dev->info.name, "kernel", name, t0,
                         sn_trace_now());
        }
    }
    if ((st = sn_synchronize(p->dev)) != SHARDNET_OK)
        return st;
    double t_out = tracing ? sn_trace_now() : 0;
    for (size_t i = 0; i < g->noutputs; i++) {
        const sn_rt *rt = &p->rt[g->outputs[i]];
        sn_host_tensor *t = &p->outputs[i];
        size_t count = sn_rt_elements(rt);
        size_t bytes = count * sn_dtype_size(rt->dtype);
        if (!t->data || t->nbytes != bytes) {
            free(t->data);
            t->data = malloc(bytes ? bytes : 1);
            if (!t->data)
                return sn_error(SHARDNET_OUT_OF_MEMORY, "output");
        }
        t->name = g->values[g->outputs[i]].name; /* borrowed */
        t->dtype = rt->dtype;
        t->rank = rt->rank;
        memcpy(t->dims, rt->dims, sizeof t->dims);
        t->nbytes = bytes;
        if (rt->host) {
            memcpy(t->data, rt->host, bytes);
        } else if (rt->dtype == SN_DT_FLOAT) {
            if ((st = sn_buffer_read(rt->view.buf,
                                     rt->view.offset * sizeof(float), t->data,
                                     bytes)) != SHARDNET_OK)
                return st;
        } else {
            float *f = malloc((count ? count : 1) * sizeof *f);
            if (!f)
                return sn_error(SHARDNET_OUT_OF_MEMORY, "output");
            st = sn_buffer_read(rt->view.buf, rt->view.offset * sizeof(float),
                                f, count * sizeof *f);
            if (st == SHARDNET_OK)
                from_float(rt->dtype, f, t->data, count);
            free(f);
            if (st != SHARDNET_OK)
                return st;
        }
    }
    if (tracing)
        sn_trace_add(p->dev->info.name, "transfer", "outputs to host", t_out,
                     sn_trace_now());
    return SHARDNET_OK;
}

shardnet_status sn_plan_time_nodes(sn_plan *p, const sn_binding *inputs,
                                   double *node_time)
{
    for (size_t i = 0; i < p->g->nnodes; i++)
        node_time[i] = 0;
    p->node_time = node_time;
    shardnet_status st = sn_plan_run(p, inputs);
    p->node_time = NULL;
    return st;
}

void sn_plan_set_collective(sn_plan *p, sn_coll_hook hook, void *ctx)
{
    p->coll_hook = hook;
    p->coll_ctx = ctx;
}

const sn_rt *sn_plan_value(const sn_plan *p, size_t v)
{
    return v < p->g->nvalues ? &p->rt[v] : NULL;
}

const sn_host_tensor *sn_plan_output(const sn_plan *p, size_t i)
{
    return i < p->g->noutputs ? &p->outputs[i] : NULL;
}

size_t sn_plan_steps(const sn_plan *p)
{
    return p->nsteps;
}

size_t sn_plan_arena_bytes(const sn_plan *p)
{
    return p->arena_bytes;
}

size_t sn_plan_weight_bytes(const sn_plan *p)
{
    return p->w ? p->w->bytes : 0;
}

void sn_plan_free(sn_plan *p)
{
    if (!p)
        return;
    if (p->dev)
        sn_synchronize(p->dev);
    for (size_t i = 0; p->rt && i < p->g->nvalues; i++)
        free(p->rt[i].host_owned);
    free(p->rt);
    free(p->steps);
    for (size_t i = 0; i < p->nallocs; i++)
        free(p->allocs[i]);
    free(p->allocs);
    sn_buffer_free(p->arena);
    for (size_t i = 0; i < p->nowned; i++)
        sn_buffer_free(p->owned_bufs[i]);
    free(p->owned_bufs);
    free(p->input_buf);
    free(p->bound);
    for (size_t i = 0; p->bound_data && i < p->g->ninputs; i++)
        free(p->bound_data[i]);
    free(p->bound_data);
    for (size_t i = 0; p->outputs && i < p->g->noutputs; i++)
        free(p->outputs[i].data);
    free(p->outputs);
    free(p);
}
