/*
 * Tensor split (private): SPMD over the devices of one process.
 *
 * Every value of the model gets a layout:
 *
 *   R            whole on every device (replicated);
 *   S(axis, c)   cut along one axis, device d holding c[d] entries of it;
 *   P            partial sums: the value is the sum over devices.
 *
 * A walk over the sorted live nodes chooses each node's layout from its
 * inputs' (the Megatron pattern falls out: a weight product fed a whole
 * input is cut by output columns, S(last); fed S(last) it is cut by rows
 * and gives P; MindSpore strategies in a plan file can force either, or a
 * cut of the rows).  Where a node cannot take an input's layout, the
 * input is converted:
 *
 *   S -> R   all-gather              P -> S   reduce-scatter
 *   P -> R   all-reduce              R -> S   a local slice (no traffic)
 *
 * and a P value meeting a non-linear op is reduce-scattered along its last
 * axis when that axis is wide enough, so the ops that follow work on a
 * slice (half the traffic of an all-reduce, a share of the work).
 *
 * The result is one graph per device, with the same nodes in the same
 * order: weight shards are constants of their own, reshape targets are the
 * local shapes, and each conversion is a "ShardCollective" node (domain
 * ai.shardnet).  Each device's graph is planned like any other; a plan
 * stops its queue at a collective step and hands it to the devices'
 * collective group (lib/comm/group.h), which runs it over the transport
 * that fits: staged, host-shared or between processes.  One host thread
 * per device runs its plan, so every device computes at once.  Sums
 * change order against one device: results agree to rounding (tested
 * within 1e-4 relative), not bit for bit.
 */
#include <config.h>

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/group.h"
#include "ops/ops.h"
#include "ops/registry.h"
#include "plan/timing.h"
#include "plan/profile.h"
#include "runtime/tensor_split.h"
#include "core/trace.h"
#include "comm/world.h"

#define MAXD SN_COLL_MAX
#define NVER 3          /* layouts remembered per value */
#define FEATURE_GRAN 16 /* feature cuts: multiples of this many */

enum { LAY_R, LAY_S, LAY_P };

typedef struct lay {
    int kind, axis;
    size_t cnt[MAXD];
} lay;

typedef struct version {
    int sub; /* value index in every device graph */
    lay l;
} version;

typedef struct vinfo {
    version v[NVER];
    int nv;     /* v[0]: as produced */
    int cnst_r; /* the constant, whole, or -1 */
} vinfo;

typedef struct bld {
    sn_graph *g;
    sn_plan *shape; /* the whole graph on one device: every value's shape */
    size_t n;
    const double *speed;
    sn_graph *sub[MAXD];
    vinfo *vi;
    const sn_strategy *strat;
    size_t nstrat;
    unsigned char *strat_used;
    unsigned counter; /* for unique value names */
    size_t ncoll;
    double coll_bytes;
    char *desc;
    size_t desc_len, desc_cap;
    sn_strategy *chosen;
    size_t nchosen, cap_chosen;
    shardnet_status why; /* why to_layout() failed, when not memory */
    int *origin;         /* per device-graph node: the model's node, -1 */
    size_t norigin, cap_origin;
    double *full_time;   /* see sn_tensor_split */
    double *full_work;
    lay *out_lay;        /* per model output: its layout on the devices */
} bld;

/* --- the run-time side ---------------------------------------------------- */

typedef struct rank_ctx {
    struct sn_tensor_split *t;
    size_t rank;
} rank_ctx;

typedef struct worker {
    struct sn_tensor_split *t;
    size_t rank;
    pthread_t thread;
    int started;
    shardnet_status st;
    char msg[1024];
} worker;

struct sn_tensor_split {
    sn_graph *g;
    size_t n;
    sn_device *dev[MAXD];
    sn_graph *sub[MAXD];
    sn_weights *w[MAXD];
    sn_plan *plan[MAXD];
    sn_binding *bound; /* shapes it was built for */
    sn_host_tensor *out;
    char *desc;
    sn_strategy *chosen;
    size_t nchosen;
    size_t ncoll;
    double coll_bytes, coll_time;
    double estimate;
    int *origin;           /* per device-graph node: the model's node */
    double *full_time;     /* [d * g->nnodes + i]: model node i timed
                              whole on device d */
    double *full_work;     /* per model node: its work whole */
    lay *out_lay;          /* per model output: R, or cut (S) and put
                              together on the host from every device */

    /* the collectives, and the workers */
    sn_group *group;
    /* The group's places: this process plans and runs only its own
     * devices, ranks where->local[0 .. nlocal), the first driven by the
     * caller; in a job every process gets the outputs. */
    const sn_group_where *where;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    atomic_uint job;       /* bumped to start a run on the workers */
    atomic_size_t done;    /* workers finished with the current job */
    int quit;
    const sn_binding *in;  /* the current run's inputs */
    int me_owned_out;  /* every output has a buffer of its own (a job of
                          several processes) */
    int overflow;      /* the first device whose shard exceeds its memory
                          (known to every process of a job), or -1 */
    worker wk[MAXD];
    rank_ctx ctx[MAXD];    /* the collective hook's argument per device */
};

/* --- small helpers --------------------------------------------------------- */

static shardnet_status oom(void)
{
    return sn_error(SHARDNET_OUT_OF_MEMORY, "tensor split");
}

/* The status behind a -1 from to_layout() and the builders below it. */
static shardnet_status failed(const bld *b)
{
    return b->why ? b->why : oom();
}

static void say(bld *b, const char *fmt, ...) SN_PRINTF(2, 3);
static void say(bld *b, const char *fmt, ...)
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

static const sn_rt *full(const bld *b, int v)
{
    const sn_rt *rt = sn_plan_value(b->shape, (size_t)v);
    return rt && rt->known ? rt : NULL;
}

static int is_float(const bld *b, int v)
{
    const sn_rt *rt = full(b, v);
    return rt && rt->dtype == SN_DT_FLOAT;
}

static int is_const(const bld *b, int v)
{
    return v >= 0 && (b->g->values[v].flags & SN_VALUE_CONST);
}

static size_t prod(const int64_t *d, int from, int to)
{
    size_t p = 1;
    for (int i = from; i < to; i++)
        p *= (size_t)d[i];
    return p;
}

static int lay_eq(const lay *a, const lay *c, size_t n)
{
    if (a->kind != c->kind)
        return 0;
    if (a->kind != LAY_S)
        return 1;
    return a->axis == c->axis && !memcmp(a->cnt, c->cnt, n * sizeof a->cnt[0]);
}

static lay lay_r(void)
{
    lay l = {.kind = LAY_R};
    return l;
}

static lay lay_p(void)
{
    lay l = {.kind = LAY_P};
    return l;
}

static lay lay_s(int axis, const size_t *cnt, size_t n)
{
    lay l = {.kind = LAY_S, .axis = axis};
    memcpy(l.cnt, cnt, n * sizeof *cnt);
    return l;
}

/*
 * Cut `total` into n shares proportional to speed, each a multiple of
 * gran and at least gran (the last takes what is left over).  0 when the
 * total is too small to give every device a share.
 */
static int shares(const bld *b, size_t total, size_t gran, size_t *cnt)
{
    size_t units = total / gran, at = 0;
    double sum = 0;
    if (gran == 0 || units < b->n)
        return 0;
    for (size_t d = 0; d < b->n; d++)
        sum += b->speed[d];
    for (size_t d = 0; d < b->n; d++) {
        size_t u = (size_t)((double)units * b->speed[d] / sum + 0.5);
        if (u < 1)
            u = 1;
        /* leave at least one unit to each later device */
        if (at + u + (b->n - 1 - d) > units)
            u = units - at - (b->n - 1 - d);
        if (d == b->n - 1)
            u = units - at;
        cnt[d] = u * gran;
        at += u;
    }
    cnt[b->n - 1] += total - units * gran;
    return 1;
}

/* Local dims of value v (full shape fs) under layout l on device d. */
static void local_dims(const sn_rt *fs, const lay *l, size_t d, int64_t *dims)
{
    memcpy(dims, fs->dims, sizeof fs->dims);
    if (l->kind == LAY_S)
        dims[l->axis] = (int64_t)l->cnt[d];
}

/* --- building the device graphs ------------------------------------------- */

/* A value named like `base` plus a suffix, in every device graph. */
static int new_value(bld *b, const char *base, const char *suffix)
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
    int k = new_value(b, pv->name, NULL);
    if (k < 0)
        return -1;
    for (size_t d = 0; d < b->n; d++) {
        sn_value *sv = &b->sub[d]->values[k];
        sv->dtype = pv->dtype;
        sv->rank = pv->rank;
        memcpy(sv->dims, pv->dims, sizeof sv->dims);
        sv->data = pv->data;
        sv->nbytes = pv->nbytes;
        sv->flags |= SN_VALUE_CONST;
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
    int k = new_value(b, pv->name, rank0_only ? "bias" : "shard");
    if (k < 0 || !es)
        return -1;
    size_t outer = prod(pv->dims, 0, axis),
           inner = prod(pv->dims, axis + 1, pv->rank) * es,
           whole = (size_t)pv->dims[axis], at = 0;
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
    set_const(b, k, pv->dtype, pv->rank, dims, data);
    return k;
fail:
    for (size_t d = 0; d < b->n; d++)
        free(data[d]);
    return -1;
}

/* int64 constants, one per device: vals[d][0..len). */
static int const_i64(bld *b, const char *base, size_t len,
                     int64_t (*vals)[SN_MAX_DIMS])
{
    int64_t dims[MAXD][SN_MAX_DIMS] = {{0}};
    void *data[MAXD] = {0};
    int k = new_value(b, base, "c");
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
static int add_node(bld *b, const sn_node *like, const char *op,
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
    if (b->norigin == b->cap_origin) {
        size_t cap = b->cap_origin ? 2 * b->cap_origin : 64;
        int *o = realloc(b->origin, cap * sizeof *o);
        if (!o)
            return -1;
        b->origin = o;
        b->cap_origin = cap;
    }
    b->origin[b->norigin++] = like ? (int)(like - b->g->nodes) : -1;
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
static int set_int_attr(bld *b, int k, size_t d, const char *name,
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

static void remember(bld *b, int v, int sub, const lay *l)
{
    vinfo *vi = &b->vi[v];
    int at = vi->nv < NVER ? vi->nv++ : NVER - 1;
    vi->v[at].sub = sub;
    vi->v[at].l = *l;
}

/* A collective node turning value x (sub index, of model value v, layout
 * `from`) into layout `to`. */
static int collective(bld *b, int v, int x, sn_coll_kind kind, const lay *to)
{
    const sn_rt *fs = full(b, v);
    int y = new_value(b, b->g->values[v].name,
                      kind == SN_COLL_ALLREDUCE   ? "allreduce"
                      : kind == SN_COLL_ALLGATHER ? "allgather"
                                                  : "reducescatter");
    if (y < 0 || !fs)
        return -1;
    int k = add_node(b, NULL, "ShardCollective", "ai.shardnet", &x, 1, &y, 1,
                     NULL);
    if (k < 0)
        return -1;
    for (size_t d = 0; d < b->n; d++) {
        sn_node *nd = &b->sub[d]->nodes[k];
        sn_attr *a;
        if (set_int_attr(b, k, d, "kind", kind) ||
            set_int_attr(b, k, d, "rank", (int64_t)d))
            return -1;
        if (kind != SN_COLL_ALLREDUCE) {
            nd = &b->sub[d]->nodes[k];
            if (set_int_attr(b, k, d, "axis", to->axis))
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
    double bytes = 4.0 * (double)sn_rt_elements(fs);
    say(b, "  %s of '%s' (%.2f MB)\n",
        kind == SN_COLL_ALLREDUCE   ? "all-reduce"
        : kind == SN_COLL_ALLGATHER ? "all-gather"
                                    : "reduce-scatter",
        b->g->values[v].name, bytes / 1e6);
    b->ncoll++;
    b->coll_bytes += bytes;
    return y;
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

/* A local slice of x (model value v, whole on every device) to layout to:
 * a Slice node in the form of the model's opset (starts, ends and axes as
 * inputs from opset 10, attributes before). */
static int local_slice(bld *b, int v, int x, const lay *to)
{
    int64_t st[MAXD][SN_MAX_DIMS], en[MAXD][SN_MAX_DIMS],
        ax[MAXD][SN_MAX_DIMS];
    size_t at = 0;
    for (size_t d = 0; d < b->n; d++) {
        st[d][0] = (int64_t)at;
        en[d][0] = (int64_t)(at + to->cnt[d]);
        ax[d][0] = to->axis;
        at += to->cnt[d];
    }
    const char *base = b->g->values[v].name;
    int y = new_value(b, base, "slice");
    if (y < 0)
        return -1;
    if (sn_param_input("Slice", "starts", b->g->opset, NULL) < 0) {
        int k = add_node(b, NULL, "Slice", "", &x, 1, &y, 1, NULL);
        for (size_t d = 0; k >= 0 && d < b->n; d++)
            if (set_ints_attr(b, k, d, "starts", st[d], 1) ||
                set_ints_attr(b, k, d, "ends", en[d], 1) ||
                set_ints_attr(b, k, d, "axes", ax[d], 1))
                k = -1;
        return k < 0 ? -1 : y;
    }
    int s = const_i64(b, base, 1, st), e = const_i64(b, base, 1, en),
        a = const_i64(b, base, 1, ax);
    if (s < 0 || e < 0 || a < 0)
        return -1;
    int in[4] = {x, s, e, a};
    return add_node(b, NULL, "Slice", "", in, 4, &y, 1, NULL) < 0 ? -1 : y;
}

/*
 * Model value v in layout `want` on every device: a version already made,
 * or one converted from it (and remembered).  -1 with an error set when it
 * cannot be (non-float data across devices, or out of memory).
 */
static int to_layout(bld *b, int v, const lay *want)
{
    vinfo *vi = &b->vi[v];
    if (is_const(b, v)) {
        if (want->kind == LAY_R)
            return const_r(b, v);
        for (int i = 0; i < vi->nv; i++)
            if (lay_eq(&vi->v[i].l, want, b->n))
                return vi->v[i].sub;
        int k = want->kind == LAY_S
                    ? const_cut(b, v, want->axis, want->cnt, 0)
                    : const_cut(b, v, 0, NULL, 1);
        if (k >= 0)
            remember(b, v, k, want);
        return k;
    }
    for (int i = 0; i < vi->nv; i++)
        if (lay_eq(&vi->v[i].l, want, b->n))
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
        if (vi->v[i].l.kind == LAY_R)
            have = &vi->v[i];
    int y = -1;
    if (want->kind == LAY_R) {
        y = collective(b, v, have->sub,
                       have->l.kind == LAY_P ? SN_COLL_ALLREDUCE
                                             : SN_COLL_ALLGATHER,
                       &have->l);
        if (y >= 0 && have->l.kind == LAY_P) {
            /* The all-reduce sums in place: from here on the partial
             * sums' buffer holds the sum, so the partial version is gone
             * (a later reader taking it as partial sums, an Add of it
             * and other partial sums, counted it once per device). */
            version *p = &vi->v[have - vi->v];
            p->sub = y;
            p->l = lay_r();
            return y;
        }
    } else if (want->kind == LAY_S) {
        if (have->l.kind == LAY_R) {
            y = local_slice(b, v, have->sub, want);
        } else if (have->l.kind == LAY_P) {
            y = collective(b, v, have->sub, SN_COLL_REDUCE_SCATTER, want);
        } else {
            lay r = lay_r();
            int x = to_layout(b, v, &r);
            vi = &b->vi[v];
            y = x < 0 ? -1 : local_slice(b, v, x, want);
        }
    } else {
        b->why = sn_error(SHARDNET_INTERNAL, "tensor split: no way to P");
        return -1;
    }
    if (y >= 0)
        remember(b, v, y, want);
    return y;
}

/* The current (first) layout of model value v; R for constants. */
static const lay *layout_of(const bld *b, int v)
{
    static const lay r = {.kind = LAY_R};
    if (v < 0 || is_const(b, v) || !b->vi[v].nv)
        return &r;
    return &b->vi[v].v[0].l;
}

/* Output j of node n, as a fresh value named like the model's. */
static int out_value(bld *b, const sn_node *n, size_t j)
{
    if (n->outputs[j] < 0)
        return -1;
    return new_value(b, b->g->values[n->outputs[j]].name, NULL);
}

/* Partial sums v reduce-scattered along `axis` (features in units of
 * FEATURE_GRAN, other axes by rows), or R when that axis is too small. */
static lay p_target_axis(const bld *b, int v, int axis)
{
    const sn_rt *fs = full(b, v);
    lay l = lay_r();
    if (fs && axis >= 0 && axis < fs->rank &&
        shares(b, (size_t)fs->dims[axis],
               axis == fs->rank - 1 ? FEATURE_GRAN : 1, l.cnt)) {
        l.kind = LAY_S;
        l.axis = axis;
    }
    return l;
}

/* Where partial sums v go before a non-linear op: reduce-scattered along
 * the first axis that is wide enough (the batch, as in Megatron's sequence
 * parallelism: the ops that follow work on a slice of rows and the next
 * product needs no gather), else all-reduced. */
static lay p_target(const bld *b, int v)
{
    const sn_rt *fs = full(b, v);
    for (int a = 0; fs && a < fs->rank; a++) {
        lay l = p_target_axis(b, v, a);
        if (l.kind == LAY_S)
            return l;
    }
    return lay_r();
}

/* Copy node n with inputs in[] (sub indices); outputs get the layout l. */
static shardnet_status emit_copy(bld *b, const sn_node *n, const int *in,
                                 const lay *l, const char *drop)
{
    int out[16];
    if (n->noutputs > 16)
        return sn_error(SHARDNET_UNSUPPORTED, "tensor split: node '%s' has "
                        "too many outputs", n->name);
    for (size_t j = 0; j < n->noutputs; j++) {
        out[j] = -1;
        if (n->outputs[j] >= 0 && (out[j] = out_value(b, n, j)) < 0)
            return oom();
    }
    if (add_node(b, n, n->op_type, n->domain, in, n->ninputs, out,
                 n->noutputs, drop) < 0)
        return oom();
    for (size_t j = 0; j < n->noutputs; j++)
        if (out[j] >= 0)
            remember(b, n->outputs[j], out[j], l);
    return SHARDNET_OK;
}

/* Every input whole, the node computed whole on every device. */
static shardnet_status replicate(bld *b, const sn_node *n)
{
    int in[64];
    lay r = lay_r();
    if (n->ninputs > 64)
        return sn_error(SHARDNET_UNSUPPORTED, "tensor split: node '%s' has "
                        "too many inputs", n->name);
    for (size_t j = 0; j < n->ninputs; j++) {
        in[j] = -1;
        if (n->inputs[j] >= 0 && (in[j] = to_layout(b, n->inputs[j], &r)) < 0)
            return failed(b);
    }
    return emit_copy(b, n, in, &r, NULL);
}

static void strategy_text(const bld *b, char *buf, size_t cap,
                          const size_t *ra, int sa, size_t rb, int sb)
{
    /* ra: ranks of the two operands; sa, sb: split axis of each (-1). */
    sn_strategy s = {.ntuples = rb ? 2 : 1};
    s.len[0] = ra[0];
    s.len[1] = rb;
    for (size_t i = 0; i < ra[0]; i++)
        s.v[0][i] = (int)i == sa ? (unsigned)b->n : 1;
    for (size_t i = 0; i < rb; i++)
        s.v[1][i] = (int)i == sb ? (unsigned)b->n : 1;
    sn_strategy_format(&s, buf, cap);
}

static void record_choice(bld *b, const sn_node *n, const char *text)
{
    if (b->nchosen == b->cap_chosen) {
        size_t cap = b->cap_chosen ? 2 * b->cap_chosen : 16;
        sn_strategy *c = realloc(b->chosen, cap * sizeof *c);
        if (!c)
            return;
        b->chosen = c;
        b->cap_chosen = cap;
    }
    sn_strategy *s = &b->chosen[b->nchosen];
    if (sn_strategy_parse(text, s) != SHARDNET_OK) {
        sn_error_clear();
        return;
    }
    snprintf(s->node, sizeof s->node, "%s", n->name);
    b->nchosen++;
}

static const sn_strategy *find_strategy(bld *b, const sn_node *n)
{
    for (size_t i = 0; i < b->nstrat; i++)
        if (!strcmp(b->strat[i].node, n->name)) {
            b->strat_used[i] = 1;
            return &b->strat[i];
        }
    return NULL;
}

enum { M_REP, M_COL, M_ROW, M_DATA };

/* Node n's shard rule in the operator registry (ops/registry.h): what the
 * rules shared by several operators tell them apart by. */
static sn_shard_rule rule_of(const sn_node *n)
{
    const sn_operator *op = sn_operator_find(n->domain, n->op_type);
    return op ? op->shard : SN_SHARD_REPLICATE;
}

/*
 * Read a forced strategy for an operand pair of ranks ra (data) and rb
 * (weight): which mode and, for M_DATA, which axis of the data.
 */
static shardnet_status strategy_mode(const bld *b, const sn_node *n,
                                     const sn_strategy *s, int ra, int rb,
                                     int k_axis_w, int n_axis_w, int *mode,
                                     int *axis)
{
    int sa = -1, sw = -1, bad = s->ntuples != 2 || (int)s->len[0] != ra ||
                                (int)s->len[1] != rb;
    for (int i = 0; !bad && i < ra; i++)
        if (s->v[0][i] != 1) {
            bad |= s->v[0][i] != b->n || sa >= 0;
            sa = i;
        }
    for (int i = 0; !bad && i < rb; i++)
        if (s->v[1][i] != 1) {
            bad |= s->v[1][i] != b->n || sw >= 0;
            sw = i;
        }
    if (!bad) {
        int k_axis_a = rule_of(n) == SN_SHARD_CONV ? 1 : ra - 1;
        if (sa < 0 && sw < 0)
            *mode = M_REP;
        else if (sa == k_axis_a && sw == k_axis_w)
            *mode = M_ROW;
        else if (sa < 0 && sw == n_axis_w)
            *mode = M_COL;
        else if (sa >= 0 && sa != k_axis_a && sw < 0) {
            *mode = M_DATA;
            *axis = sa;
        } else
            bad = 1;
    }
    if (bad) {
        char t[256];
        sn_strategy_format(s, t, sizeof t);
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "strategy %s for node '%s' (%s): this version cuts "
                        "one dimension over all %zu devices (the inputs' "
                        "reduced dimension together, the weight's output "
                        "dimension, or a dimension of the data alone)",
                        t, n->name, n->op_type, b->n);
    }
    return SHARDNET_OK;
}

/*
 * Node n's output v was computed as partial sums into `part` (its fused
 * Relu left out): convert them to layout t, then apply the Relu; v ends up
 * as the Relu's output in layout t.
 */
static shardnet_status relu_after_sum(bld *b, const sn_node *n, int part,
                                      lay t)
{
    int v = n->outputs[0], out;
    lay lp = lay_p();
    remember(b, v, part, &lp); /* for to_layout: v as partial sums */
    int x = to_layout(b, v, &t);
    b->vi[v].nv = 0;           /* v is the Relu's output, made below */
    if (x < 0)
        return failed(b);
    if ((out = out_value(b, n, 0)) < 0 ||
        add_node(b, NULL, "Relu", "", &x, 1, &out, 1, NULL) < 0)
        return oom();
    remember(b, v, out, &t);
    return SHARDNET_OK;
}

/*
 * A product with a constant weight: Gemm (A, B, C) or MatMul (A, B) with
 * B 2-D.  Column-parallel (output features cut), row-parallel (the reduced
 * dimension cut, partial sums out), data-parallel (A's rows cut, weight
 * whole) or whole.
 */
static shardnet_status linear(bld *b, const sn_node *n, int *handled)
{
    int gemm = rule_of(n) == SN_SHARD_GEMM;
    int A = n->inputs[0], W = n->inputs[1];
    int C = n->ninputs > 2 ? n->inputs[2] : -1; /* MatMul: a fused bias */
    const sn_rt *fa = full(b, A), *fw = full(b, W);
    const sn_rt *fo = full(b, n->outputs[0]);
    const sn_value *wv = &b->g->values[W];
    *handled = 0;
    if (!fa || !fw || !fo || !is_const(b, W) || wv->rank != 2 ||
        fa->rank < 2 || fo->dtype != SN_DT_FLOAT || n->noutputs != 1 ||
        (gemm && sn_attr_int(n, "transA", 0)))
        return SHARDNET_OK;
    int tb = gemm && sn_attr_int(n, "transB", 0);
    int k_axis_w = tb ? 1 : 0, n_axis_w = tb ? 0 : 1;
    size_t N = (size_t)wv->dims[n_axis_w];
    int ra = fa->rank, last = ra - 1;
    /* A bias C must be a vector over N (or [1, N]) to be cut. */
    const sn_value *cv = C >= 0 ? &b->g->values[C] : NULL;
    int c_ok = !cv || (is_const(b, C) &&
                       ((cv->rank == 1 && (size_t)cv->dims[0] == N) ||
                        (cv->rank == 2 && cv->dims[0] == 1 &&
                         (size_t)cv->dims[1] == N)));
    const lay *la = layout_of(b, A);
    int mode, daxis = -1;
    const sn_strategy *s = find_strategy(b, n);
    shardnet_status st;
    if (s) {
        if ((st = strategy_mode(b, n, s, ra, 2, k_axis_w, n_axis_w, &mode,
                                &daxis)) != SHARDNET_OK)
            return st;
    } else if (la->kind == LAY_S && la->axis == last) {
        mode = M_ROW;
    } else if (la->kind == LAY_S) {
        mode = M_DATA;
        daxis = la->axis;
    } else if (la->kind == LAY_P) {
        mode = M_ROW;
    } else {
        size_t cnt[MAXD];
        mode = shares(b, N, FEATURE_GRAN, cnt) ? M_COL : M_REP;
    }
    if (mode == M_REP && s) {
        char t[128];
        sn_strategy_format(s, t, sizeof t);
        say(b, "  %s (%s) %s: whole on every device\n", n->name, n->op_type,
            t);
        record_choice(b, n, t);
    }
    if ((mode == M_COL && !c_ok) || mode == M_REP)
        return SHARDNET_OK; /* replicated by the caller */

    int in[3] = {-1, -1, -1}, out;
    lay lo;
    const char *drop = NULL;
    char how[256], text[128];
    size_t ranks[1] = {(size_t)ra};
    if (mode == M_COL) {
        lay r = lay_r(), lw;
        size_t cnt[MAXD];
        if (!shares(b, N, FEATURE_GRAN, cnt))
            return SHARDNET_OK;
        lw = lay_s(n_axis_w, cnt, b->n);
        in[0] = to_layout(b, A, &r);
        in[1] = to_layout(b, W, &lw);
        if (C >= 0) {
            lay lc = lay_s(cv->rank - 1, cnt, b->n);
            in[2] = to_layout(b, C, &lc);
        }
        lo = lay_s(fo->rank - 1, cnt, b->n);
        snprintf(how, sizeof how, "column-parallel: output features cut");
        strategy_text(b, text, sizeof text, ranks, -1, 2, n_axis_w);
    } else if (mode == M_ROW) {
        lay lk;
        if (la->kind == LAY_S && la->axis == last) {
            lk = *la;
        } else {
            lk = p_target_axis(b, A, last);
            if (lk.kind != LAY_S)
                return SHARDNET_OK;
        }
        lay lw = lay_s(k_axis_w, lk.cnt, b->n);
        in[0] = to_layout(b, A, &lk);
        in[1] = to_layout(b, W, &lw);
        if (C >= 0) {
            lay lc = lay_p();
            in[2] = to_layout(b, C, &lc); /* added once: device 0 */
        }
        lo = lay_p();
        drop = "activation";
        snprintf(how, sizeof how, "row-parallel: reduced dimension cut, "
                                  "partial sums");
        strategy_text(b, text, sizeof text, ranks, last, 2, k_axis_w);
    } else {
        lay ld;
        if (la->kind == LAY_S && la->axis == daxis) {
            ld = *la;
        } else {
            if (daxis < 0 || daxis >= last || !shares(b, (size_t)fa->dims[daxis], 1, ld.cnt))
                return SHARDNET_OK;
            ld = lay_s(daxis, ld.cnt, b->n);
        }
        lay r = lay_r();
        in[0] = to_layout(b, A, &ld);
        in[1] = to_layout(b, W, &r);
        if (C >= 0)
            in[2] = to_layout(b, C, &r);
        lo = lay_s(daxis + (fo->rank - ra), ld.cnt, b->n);
        snprintf(how, sizeof how, "data-parallel: rows of the input cut, "
                                  "weights whole");
        strategy_text(b, text, sizeof text, ranks, daxis, 2, -1);
    }
    if (in[0] < 0 || in[1] < 0 || (C >= 0 && in[2] < 0))
        return failed(b);
    *handled = 1;
    say(b, "  %s (%s) %s: %s\n", n->name, n->op_type, text, how);
    record_choice(b, n, text);
    int act = !strcmp(sn_attr_string(n, "activation", ""), "Relu");
    if (lo.kind == LAY_P && act) {
        /* The activation waits for the sum: partial -> reduce-scatter (or
         * all-reduce) -> Relu. */
        int part = new_value(b, b->g->values[n->outputs[0]].name, "partial");
        if (part < 0 || add_node(b, n, n->op_type, n->domain, in,
                                 n->ninputs, &part, 1, drop) < 0)
            return oom();
        return relu_after_sum(b, n, part, p_target(b, n->outputs[0]));
    }
    if ((out = out_value(b, n, 0)) < 0 ||
        add_node(b, n, n->op_type, n->domain, in, n->ninputs, &out, 1,
                 drop) < 0)
        return oom();
    remember(b, n->outputs[0], out, &lo);
    return SHARDNET_OK;
}

/*
 * Conv with a constant weight (O, I/g, k...): output channels cut (whole
 * groups when grouped) from a whole input; from an input cut by channels,
 * each device convolves its own groups, or (one group) its own input
 * channels into partial sums.
 */
static shardnet_status conv(bld *b, const sn_node *n, int *handled)
{
    int X = n->inputs[0], W = n->inputs[1];
    int B = n->ninputs > 2 ? n->inputs[2] : -1;
    const sn_rt *fx = full(b, X), *fo = full(b, n->outputs[0]);
    const sn_value *wv = &b->g->values[W];
    *handled = 0;
    if (!fx || !fo || fo->dtype != SN_DT_FLOAT || !is_const(b, W) ||
        wv->rank < 3 || (B >= 0 && !is_const(b, B)) || n->noutputs != 1)
        return SHARDNET_OK;
    size_t groups = (size_t)sn_attr_int(n, "group", 1);
    size_t Co = (size_t)wv->dims[0], Cig = (size_t)wv->dims[1];
    if (!groups || Co % groups)
        return SHARDNET_OK;
    size_t Cog = Co / groups;
    const lay *lx = layout_of(b, X);
    const sn_strategy *s = find_strategy(b, n);
    int mode = M_REP, daxis = -1;
    shardnet_status st;
    if (s) {
        if ((st = strategy_mode(b, n, s, fx->rank, wv->rank, 1, 0, &mode,
                                &daxis)) != SHARDNET_OK)
            return st;
    } else if (lx->kind == LAY_S && lx->axis == 1) {
        /* per group when the cut follows the groups, partial sums for one
         * group, else gather and cut the output channels */
        int aligned = 1;
        for (size_t d = 0; d < b->n; d++)
            aligned &= lx->cnt[d] % Cig == 0 && lx->cnt[d] > 0;
        mode = groups == 1 || aligned ? M_ROW : M_COL;
    } else if (lx->kind == LAY_S && lx->axis == 0) {
        mode = M_DATA;
        daxis = 0;
    } else {
        mode = M_COL;
    }
    int in[3] = {X, W, B};
    size_t gcnt[MAXD]; /* groups per device */
    lay lo, lin;
    int partial = 0;
    char how[160], text[128];
    size_t ranks[1] = {(size_t)fx->rank};
    if (mode == M_COL) {
        size_t cnt[MAXD];
        if (!shares(b, groups > 1 ? groups : Co, 1, cnt))
            return SHARDNET_OK;
        for (size_t d = 0; d < b->n; d++) {
            gcnt[d] = groups > 1 ? cnt[d] : 1;
            lo.cnt[d] = groups > 1 ? cnt[d] * Cog : cnt[d];
            lin.cnt[d] = cnt[d] * Cig;
        }
        lo.kind = LAY_S;
        lo.axis = 1;
        lin.kind = groups > 1 ? LAY_S : LAY_R;
        lin.axis = 1;
        snprintf(how, sizeof how, "output channels cut%s",
                 groups > 1 ? " (whole groups)" : "");
        strategy_text(b, text, sizeof text, ranks, -1, (size_t)wv->rank, 0);
    } else if (mode == M_ROW) {
        /* input channels cut: by whole groups, or partial sums */
        lin = lx->kind == LAY_S && lx->axis == 1 ? *lx : lay_r();
        if (lin.kind != LAY_S) {
            if (!shares(b, (size_t)fx->dims[1], groups > 1 ? Cig : 1,
                        lin.cnt))
                return SHARDNET_OK;
            lin.kind = LAY_S;
            lin.axis = 1;
        }
        int aligned = 1;
        for (size_t d = 0; d < b->n; d++)
            aligned &= lin.cnt[d] % Cig == 0 && lin.cnt[d] > 0;
        if (groups > 1 && aligned) {
            for (size_t d = 0; d < b->n; d++) {
                gcnt[d] = lin.cnt[d] / Cig;
                lo.cnt[d] = gcnt[d] * Cog;
            }
            lo.kind = LAY_S;
            lo.axis = 1;
            snprintf(how, sizeof how, "each device its own groups");
            strategy_text(b, text, sizeof text, ranks, 1, (size_t)wv->rank,
                          0);
        } else if (groups == 1) {
            for (size_t d = 0; d < b->n; d++)
                gcnt[d] = 1;
            lo = lay_p();
            partial = 1;
            snprintf(how, sizeof how, "input channels cut, partial sums");
            strategy_text(b, text, sizeof text, ranks, 1, (size_t)wv->rank,
                          1);
        } else {
            return SHARDNET_OK;
        }
    } else if (mode == M_DATA) {
        if (lx->kind == LAY_S && lx->axis == daxis)
            lin = *lx;
        else if (daxis != 0 ||
                 !shares(b, (size_t)fx->dims[0], 1, lin.cnt))
            return SHARDNET_OK;
        lin.kind = LAY_S;
        lin.axis = 0;
        lo = lin;
        for (size_t d = 0; d < b->n; d++)
            gcnt[d] = groups;
        snprintf(how, sizeof how, "data-parallel: batch cut");
        strategy_text(b, text, sizeof text, ranks, 0, (size_t)wv->rank, -1);
    } else {
        return SHARDNET_OK;
    }
    /* weights and bias of each device */
    if (mode == M_DATA) {
        lay r = lay_r();
        in[1] = to_layout(b, W, &r);
        in[2] = B >= 0 ? to_layout(b, B, &r) : -1;
    } else if (partial) {
        lay lw = lay_s(1, lin.cnt, b->n), lp = lay_p();
        in[1] = to_layout(b, W, &lw);
        in[2] = B >= 0 ? to_layout(b, B, &lp) : -1;
    } else {
        lay lw = lay_s(0, lo.cnt, b->n);
        in[1] = to_layout(b, W, &lw);
        in[2] = B >= 0 ? to_layout(b, B, &lw) : -1;
    }
    in[0] = to_layout(b, X, &lin);
    if (in[0] < 0 || in[1] < 0 || (B >= 0 && in[2] < 0))
        return failed(b);
    *handled = 1;
    say(b, "  %s (%s) %s: %s\n", n->name, n->op_type, text, how);
    record_choice(b, n, text);
    int act = !strcmp(sn_attr_string(n, "activation", ""), "Relu");
    int v = n->outputs[0];
    int target = partial && act
                     ? new_value(b, b->g->values[v].name, "partial")
                     : out_value(b, n, 0);
    int k = target < 0 ? -1
                       : add_node(b, n, "Conv", n->domain, in, n->ninputs,
                                  &target, 1, partial ? "activation" : NULL);
    if (k < 0)
        return oom();
    for (size_t d = 0; d < b->n; d++)
        if (set_int_attr(b, k, d, "group", (int64_t)gcnt[d]))
            return oom();
    if (partial && act)
        return relu_after_sum(b, n, target, lay_r());
    remember(b, v, target, &lo);
    return SHARDNET_OK;
}

/* MatMul of two computed values: batch dimensions follow their cut; A's
 * rows or B's columns may be cut; both cut along the reduced dimension give
 * partial sums. */
static shardnet_status matmul2(bld *b, const sn_node *n, int *handled)
{
    int A = n->inputs[0], B = n->inputs[1];
    const sn_rt *fa = full(b, A), *fb = full(b, B), *fo = full(b, n->outputs[0]);
    *handled = 0;
    if (!fa || !fb || !fo || fa->rank < 2 || fa->rank != fb->rank ||
        fo->dtype != SN_DT_FLOAT)
        return SHARDNET_OK;
    int r = fa->rank;
    const lay *la = layout_of(b, A), *lb = layout_of(b, B);
    lay ta, tb, lo;
    if (la->kind == LAY_S && la->axis < r - 2)
        ta = *la;
    else if (lb->kind == LAY_S && lb->axis < r - 2)
        ta = *lb;
    else
        ta.kind = LAY_R;
    if (ta.kind == LAY_S) {
        /* a batch dimension: the other operand is cut the same way unless
         * it broadcasts along it */
        tb = ta;
        lo = ta;
        lay rr = lay_r();
        int ia = fa->dims[ta.axis] == 1 ? to_layout(b, A, &rr)
                                         : to_layout(b, A, &ta);
        int ib = fb->dims[ta.axis] == 1 ? to_layout(b, B, &rr)
                                         : to_layout(b, B, &tb);
        if (ia < 0 || ib < 0)
            return failed(b);
        int in[2] = {ia, ib};
        *handled = 1;
        return emit_copy(b, n, in, &lo, NULL);
    }
    if (la->kind == LAY_S && la->axis == r - 2 && lb->kind != LAY_P) {
        lay rr = lay_r();
        int in[2] = {to_layout(b, A, la), to_layout(b, B, &rr)};
        lo = *la;
        if (in[0] < 0 || in[1] < 0)
            return failed(b);
        *handled = 1;
        return emit_copy(b, n, in, &lo, NULL);
    }
    if (lb->kind == LAY_S && lb->axis == r - 1 && la->kind != LAY_P) {
        lay rr = lay_r();
        int in[2] = {to_layout(b, A, &rr), to_layout(b, B, lb)};
        lo = *lb;
        if (in[0] < 0 || in[1] < 0)
            return failed(b);
        *handled = 1;
        return emit_copy(b, n, in, &lo, NULL);
    }
    if (la->kind == LAY_S && la->axis == r - 1 && lb->kind == LAY_S &&
        lb->axis == r - 2 && !memcmp(la->cnt, lb->cnt, b->n * sizeof la->cnt[0])) {
        int in[2] = {to_layout(b, A, la), to_layout(b, B, lb)};
        lo = lay_p();
        if (in[0] < 0 || in[1] < 0)
            return failed(b);
        *handled = 1;
        return emit_copy(b, n, in, &lo, "activation");
    }
    return SHARDNET_OK;
}

/*
 * Element-wise ops (with broadcasting) follow their cut inputs: the
 * others are sliced locally to match, or used whole where they broadcast
 * along the cut axis.  Sums and differences of partial sums stay partial.
 */
static shardnet_status elementwise(bld *b, const sn_node *n, int *handled)
{
    const sn_rt *fo = full(b, n->outputs[0]);
    *handled = 0;
    if (!fo || fo->dtype != SN_DT_FLOAT || n->ninputs > 8)
        return SHARDNET_OK;
    int r = fo->rank;
    int linear = rule_of(n) == SN_SHARD_ADDITIVE;
    int nP = 0, nS = 0, nOther = 0;
    lay target = lay_r();
    for (size_t j = 0; j < n->ninputs; j++) {
        int v = n->inputs[j];
        if (v < 0)
            continue;
        const lay *l = layout_of(b, v);
        const sn_rt *fi = full(b, v);
        if (!fi)
            return SHARDNET_OK;
        if (l->kind == LAY_P)
            nP++;
        else if (l->kind == LAY_S) {
            if (!nS) {
                target = *l;
                target.axis = l->axis + (r - fi->rank);
            }
            nS++;
        } else
            nOther++;
    }
    if (nP && !nS && !nOther && linear) {
        int in[8];
        for (size_t j = 0; j < n->ninputs; j++)
            in[j] = n->inputs[j] < 0 ? -1 : b->vi[n->inputs[j]].v[0].sub;
        lay lp = lay_p();
        *handled = 1;
        return emit_copy(b, n, in, &lp, NULL);
    }
    if (!nS && nP) {
        /* partial sums meeting a non-linear op: reduce-scatter along the
         * last axis when it is wide enough, else all-reduce */
        target = p_target(b, n->outputs[0]);
        for (size_t j = 0; j < n->ninputs && target.kind == LAY_S; j++) {
            int v = n->inputs[j];
            const sn_rt *fi = v >= 0 ? full(b, v) : NULL;
            if (fi && layout_of(b, v)->kind == LAY_P &&
                (fi->rank != r ||
                 memcmp(fi->dims, fo->dims, (size_t)r * sizeof fi->dims[0])))
                target = lay_r(); /* broadcast partial sums: sum first */
        }
    }
    if (target.kind != LAY_S)
        return SHARDNET_OK; /* all whole: replicated */
    int in[8];
    for (size_t j = 0; j < n->ninputs; j++) {
        int v = n->inputs[j];
        in[j] = -1;
        if (v < 0)
            continue;
        const sn_rt *fi = full(b, v);
        int ai = target.axis - (r - fi->rank);
        lay want = target, rr = lay_r();
        want.axis = ai;
        if (ai < 0 || fi->dims[ai] == 1)
            in[j] = to_layout(b, v, &rr);
        else if (fi->dims[ai] == fo->dims[target.axis])
            in[j] = to_layout(b, v, &want);
        else
            return SHARDNET_OK;
        if (in[j] < 0)
            return failed(b);
    }
    *handled = 1;
    return emit_copy(b, n, in, &target, NULL);
}

/* Softmax, LogSoftmax and LayerNormalization keep a cut outside the axes
 * they normalise over. */
static shardnet_status normalise(bld *b, const sn_node *n, int *handled)
{
    int X = n->inputs[0];
    const sn_rt *fx = full(b, X);
    const lay *l = layout_of(b, X);
    *handled = 0;
    if (!fx || l->kind != LAY_S)
        return SHARDNET_OK;
    for (size_t j = 1; j < n->noutputs; j++)
        if (n->outputs[j] >= 0)
            return SHARDNET_OK;
    int r = fx->rank, ln = rule_of(n) == SN_SHARD_LAYERNORM;
    int64_t axis = sn_attr_int(n, "axis", ln || b->g->opset >= 13 ? -1 : 1);
    if (axis < 0)
        axis += r;
    int from = (int)axis, to = ln || b->g->opset < 13 ? r : (int)axis + 1;
    if (l->axis >= from && l->axis < to)
        return SHARDNET_OK;
    int in[3] = {-1, -1, -1};
    lay rr = lay_r(), lo = *l;
    in[0] = to_layout(b, X, l);
    for (size_t j = 1; j < n->ninputs && j < 3; j++)
        if (n->inputs[j] >= 0 &&
            (in[j] = to_layout(b, n->inputs[j], &rr)) < 0)
            return failed(b);
    if (in[0] < 0 || n->ninputs > 3)
        return SHARDNET_OK;
    *handled = 1;
    return emit_copy(b, n, in, &lo, NULL);
}

static shardnet_status transpose(bld *b, const sn_node *n, int *handled)
{
    int X = n->inputs[0];
    const sn_rt *fx = full(b, X);
    const lay *l = layout_of(b, X);
    *handled = 0;
    if (!fx || l->kind == LAY_R)
        return SHARDNET_OK;
    lay lo = *l;
    if (l->kind == LAY_S) {
        const sn_attr *pa = sn_node_attr(n, "perm");
        int found = -1;
        for (int j = 0; j < fx->rank; j++) {
            int pj = pa && pa->count == (size_t)fx->rank ? (int)pa->ints[j]
                                                         : fx->rank - 1 - j;
            if (pj == l->axis)
                found = j;
        }
        if (found < 0)
            return SHARDNET_OK;
        lo.axis = found;
    }
    int in[1] = {b->vi[X].v[0].sub};
    for (int i = 0; i < b->vi[X].nv; i++)
        if (lay_eq(&b->vi[X].v[i].l, l, b->n))
            in[0] = b->vi[X].v[i].sub;
    *handled = 1;
    return emit_copy(b, n, in, &lo, NULL);
}

/*
 * Where axis `a` of a tensor shaped in[] lands in the same data shaped
 * out[], for a cut cnt[]: the output axis and its cut.  0 when the cut
 * does not map onto one output axis.
 */
static int map_axis(const bld *b, int rin, const int64_t *in, int a,
                    const size_t *cnt, int rout, const int64_t *out,
                    int *ob, size_t *ocnt)
{
    size_t pre = prod(in, 0, a), p = 1;
    size_t inner_in = prod(in, a + 1, rin);
    for (int k = 0; k < rout; k++) {
        if (p == pre && out[k] != 1) {
            size_t inner_out = prod(out, k + 1, rout);
            size_t A = (size_t)in[a], O = (size_t)out[k];
            if (O == A && inner_out == inner_in) {
                memcpy(ocnt, cnt, b->n * sizeof *cnt);
            } else if (A % O == 0 && inner_out == (A / O) * inner_in) {
                /* the cut axis split in two: cut the outer part */
                size_t rr = A / O;
                for (size_t d = 0; d < b->n; d++) {
                    if (cnt[d] % rr)
                        return 0;
                    ocnt[d] = cnt[d] / rr;
                }
            } else if (O % A == 0 && inner_in == (O / A) * inner_out) {
                /* the cut axis merged with the ones after it */
                for (size_t d = 0; d < b->n; d++)
                    ocnt[d] = cnt[d] * (O / A);
            } else {
                return 0;
            }
            *ob = k;
            return 1;
        }
        p *= (size_t)out[k];
        if (p > pre)
            return 0;
    }
    return 0;
}

/* Reshape and Flatten: a cut follows the data when it maps onto one output
 * axis; Reshape's target becomes each device's local shape. */
static shardnet_status reshape(bld *b, const sn_node *n, int *handled)
{
    int X = n->inputs[0];
    const sn_rt *fx = full(b, X), *fo = full(b, n->outputs[0]);
    const lay *l = layout_of(b, X);
    int is_reshape = rule_of(n) == SN_SHARD_RESHAPE;
    *handled = 0;
    if (!fx || !fo || l->kind == LAY_R ||
        (is_reshape && (n->ninputs != 2 || !is_const(b, n->inputs[1]))))
        return SHARDNET_OK;
    lay lo = *l;
    if (l->kind == LAY_S &&
        !map_axis(b, fx->rank, fx->dims, l->axis, l->cnt, fo->rank, fo->dims,
                  &lo.axis, lo.cnt))
        return SHARDNET_OK;
    int in[2] = {b->vi[X].v[0].sub, -1};
    for (int i = 0; i < b->vi[X].nv; i++)
        if (lay_eq(&b->vi[X].v[i].l, l, b->n))
            in[0] = b->vi[X].v[i].sub;
    if (is_reshape) {
        int64_t vals[MAXD][SN_MAX_DIMS];
        for (size_t d = 0; d < b->n; d++)
            local_dims(fo, &lo, d, vals[d]);
        if ((in[1] = const_i64(b, b->g->values[n->inputs[1]].name,
                               (size_t)fo->rank, vals)) < 0)
            return oom();
    }
    *handled = 1;
    return emit_copy(b, n, in, &lo, NULL);
}

/* Pools work per image and channel: a cut of either passes through. */
static shardnet_status pool(bld *b, const sn_node *n, int *handled)
{
    int X = n->inputs[0];
    const lay *l = layout_of(b, X);
    *handled = 0;
    if (l->kind != LAY_S || l->axis > 1)
        return SHARDNET_OK;
    for (size_t j = 1; j < n->noutputs; j++)
        if (n->outputs[j] >= 0)
            return SHARDNET_OK;
    int in[1] = {to_layout(b, X, l)};
    lay lo = *l;
    if (in[0] < 0)
        return oom();
    *handled = 1;
    return emit_copy(b, n, in, &lo, NULL);
}

/* The rules of the registry's products (ops/registry.h): Gemm cut when
 * its weights are constant; MatMul too, and else by its batch. */
static shardnet_status gemm(bld *b, const sn_node *n, int *handled)
{
    *handled = 0;
    return n->ninputs > 1 && is_const(b, n->inputs[1]) ? linear(b, n, handled)
                                                       : SHARDNET_OK;
}

static shardnet_status matmul(bld *b, const sn_node *n, int *handled)
{
    return n->ninputs > 1 && is_const(b, n->inputs[1]) ? linear(b, n, handled)
                                                       : matmul2(b, n, handled);
}

static shardnet_status conv_rule(bld *b, const sn_node *n, int *handled)
{
    *handled = 0;
    return n->ninputs > 1 && is_const(b, n->inputs[1]) ? conv(b, n, handled)
                                                       : SHARDNET_OK;
}

/* Each shard rule of the registry, by its enum; NULL: replicated. */
typedef shardnet_status (*shard_rule_fn)(bld *b, const sn_node *n,
                                         int *handled);
static const shard_rule_fn shard_rules[SN_SHARD_RULES] = {
    [SN_SHARD_REPLICATE] = NULL,
    [SN_SHARD_GEMM] = gemm,
    [SN_SHARD_MATMUL] = matmul,
    [SN_SHARD_CONV] = conv_rule,
    [SN_SHARD_ELEMENTWISE] = elementwise,
    [SN_SHARD_ADDITIVE] = elementwise,
    [SN_SHARD_SOFTMAX] = normalise,
    [SN_SHARD_LAYERNORM] = normalise,
    [SN_SHARD_TRANSPOSE] = transpose,
    [SN_SHARD_RESHAPE] = reshape,
    [SN_SHARD_FLATTEN] = reshape,
    [SN_SHARD_POOL] = pool,
};

static shardnet_status shard_node(bld *b, const sn_node *n)
{
    sn_shard_rule r = rule_of(n);
    int handled = 0;
    shardnet_status st = SHARDNET_OK;
    const sn_strategy *s = NULL;
    if (*n->domain && strcmp(n->domain, "ai.onnx"))
        return replicate(b, n);
    if (shard_rules[r])
        st = shard_rules[r](b, n, &handled);
    if (st != SHARDNET_OK)
        return st;
    if (!handled) {
        if ((s = find_strategy(b, n)) != NULL) {
            char t[256];
            sn_strategy_format(s, t, sizeof t);
            if (r != SN_SHARD_GEMM && r != SN_SHARD_MATMUL &&
                r != SN_SHARD_CONV)
                return sn_error(SHARDNET_INVALID_ARGUMENT,
                                "strategy %s for node '%s' (%s): strategies "
                                "are taken for MatMul, Gemm and Conv with "
                                "constant weights",
                                t, n->name, n->op_type);
        }
        sn_error_clear();
        return replicate(b, n);
    }
    return SHARDNET_OK;
}

static shardnet_status build(bld *b)
{
    sn_graph *g = b->g;
    shardnet_status st;
    for (size_t d = 0; d < b->n; d++) {
        if (!(b->sub[d] = sn_graph_new()))
            return oom();
        b->sub[d]->opset = g->opset;
        b->sub[d]->ir_version = g->ir_version;
        b->sub[d]->inputs = malloc((g->ninputs + 1) * sizeof(int));
        b->sub[d]->outputs = malloc((g->noutputs + 1) * sizeof(int));
        if (!b->sub[d]->inputs || !b->sub[d]->outputs)
            return oom();
    }
    /* The model's inputs: whole on every device. */
    for (size_t i = 0; i < g->ninputs; i++) {
        int v = g->inputs[i];
        const sn_value *pv = &g->values[v];
        int k = new_value(b, pv->name, NULL);
        if (k < 0)
            return oom();
        for (size_t d = 0; d < b->n; d++) {
            sn_value *sv = &b->sub[d]->values[k];
            sv->dtype = pv->dtype;
            sv->rank = pv->rank;
            memcpy(sv->dims, pv->dims, sizeof sv->dims);
            sv->flags |= SN_VALUE_INPUT;
            b->sub[d]->inputs[i] = k;
            b->sub[d]->ninputs = i + 1;
        }
        lay r = lay_r();
        remember(b, v, k, &r);
    }
    for (size_t i = 0; i < g->nnodes; i++) {
        const sn_node *n = &g->nodes[i];
        int live = 0;
        if (n->dead)
            continue;
        for (size_t j = 0; j < n->noutputs; j++)
            if (n->outputs[j] >= 0 && !is_const(b, n->outputs[j]))
                live = 1;
        if (!live)
            continue;
        if ((st = shard_node(b, n)) != SHARDNET_OK)
            return st;
        if (n->noutputs && n->outputs[0] >= 0 && b->vi[n->outputs[0]].nv) {
            const lay *l = &b->vi[n->outputs[0]].v[0].l;
            sn_log(SHARDNET_LOG_DEBUG, "tensor split: %s (%s) -> %s axis %d",
                   n->name, n->op_type,
                   l->kind == LAY_R ? "whole" : l->kind == LAY_S ? "cut" : "partial",
                   l->axis);
        }
    }
    for (size_t i = 0; i < b->nstrat; i++)
        if (!b->strat_used[i])
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "strategy for node '%s': no such node (or it "
                            "was folded away)",
                            b->strat[i].node);
    /* The model's outputs: a cut output stays cut, and each device writes
     * its piece into the host result (no all-gather: only the host needs
     * it whole); partial sums are reduce-scattered first. */
    for (size_t i = 0; i < g->noutputs; i++) {
        const lay *cur = layout_of(b, g->outputs[i]);
        const sn_rt *fs = full(b, g->outputs[i]);
        lay want = cur->kind == LAY_S ? *cur
                   : cur->kind == LAY_P ? p_target(b, g->outputs[i])
                                        : lay_r();
        if (!fs)
            want = lay_r();
        int k = to_layout(b, g->outputs[i], &want);
        b->out_lay[i] = want;
        if (k >= 0 && want.kind == LAY_S)
            say(b, "  output '%s': cut along axis %d, each device writes its "
                   "part of the host result\n",
                g->values[g->outputs[i]].name, want.axis);
        if (k < 0)
            return failed(b);
        for (size_t d = 0; d < b->n; d++) {
            b->sub[d]->values[k].flags |= SN_VALUE_OUTPUT;
            b->sub[d]->outputs[i] = k;
            b->sub[d]->noutputs = i + 1;
        }
    }
    for (size_t d = 0; d < b->n; d++)
        if ((st = sn_graph_sort(b->sub[d])) != SHARDNET_OK)
            return sn_error_prefix(st, "tensor split: device graph");
    return SHARDNET_OK;
}

/* --- running --------------------------------------------------------------- */

/* After a run: every process gets every output.  A whole output comes
 * from the root (it has a device, so the result); a cut one is put
 * together at the root from every owning process's pieces; then the root
 * broadcasts each to all processes (devices or not). */
static shardnet_status share_outputs(sn_tensor_split *t)
{
    shardnet_status st = SHARDNET_OK;
    unsigned root = t->where->procs[0];
    for (size_t i = 0; i < t->g->noutputs && st == SHARDNET_OK; i++) {
        sn_host_tensor *o = &t->out[i];
        const lay *l = &t->out_lay[i];
        if (l->kind == LAY_S) {
            /* Per index of the axes before the cut one: each rank's rows
             * of `inner` bytes, gathered. */
            size_t es = sn_dtype_size(o->dtype);
            size_t outer = prod(o->dims, 0, l->axis),
                   inner = prod(o->dims, l->axis + 1, o->rank) * es;
            size_t off[MAXD];
            sn_group_offsets(l->cnt, t->n, off);
            size_t len = (size_t)o->dims[l->axis];
            char *scratch = malloc(len * inner + 1);
            if (!scratch)
                return oom();
            for (size_t k = 0; k < outer && st == SHARDNET_OK; k++) {
                char *full = (char *)o->data + k * len * inner;
                st = sn_group_gather(t->group, full, l->cnt, off, inner,
                                     scratch);
            }
            free(scratch);
        }
        if (st == SHARDNET_OK)
            st = sn_world_bcast(root, o->data, o->nbytes);
    }
    return st;
}

/* The hook every device's plan calls at a collective: the group runs it. */
_Static_assert(SN_COLL_MAX == SN_COMM_MAX, "a plan's collective fits a group");
static shardnet_status rendezvous(void *ctx, const sn_coll_desc *d)
{
    static const sn_group_kind kinds[] = {
        [SN_COLL_ALLREDUCE] = SN_GROUP_ALLREDUCE,
        [SN_COLL_ALLGATHER] = SN_GROUP_ALLGATHER,
        [SN_COLL_REDUCE_SCATTER] = SN_GROUP_REDUCE_SCATTER};
    const rank_ctx *rc = ctx;
    sn_group_call call = {.kind = kinds[d->kind], .n = d->n,
                          .send = d->send, .recv = d->recv};
    memcpy(call.counts, d->counts, sizeof call.counts);
    return sn_group_collective(rc->t->group, rc->rank, &call);
}

/* How long a worker polls for the next run, and the caller for the
 * workers' end, before sleeping. */
#define WAKE_SPIN_S 200e-6

typedef struct split_wait {
    const sn_tensor_split *t;
    unsigned seen; /* the job seen */
} split_wait;

static int job_posted(const void *arg)
{
    const split_wait *w = arg;
    return atomic_load(&w->t->job) != w->seen;
}

static int workers_done(const void *arg)
{
    const split_wait *w = arg;
    return atomic_load(&w->t->done) >= w->t->where->nlocal - 1;
}

/* Device r's piece of each cut output, copied into the host result. */
static shardnet_status put_pieces(sn_tensor_split *t, size_t r)
{
    for (size_t i = 0; i < t->g->noutputs; i++) {
        const lay *l = &t->out_lay[i];
        sn_host_tensor *o = &t->out[i];
        const sn_host_tensor *piece = sn_plan_output(t->plan[r], i);
        if (l->kind != LAY_S || !piece->nbytes)
            continue;
        size_t es = sn_dtype_size(o->dtype), pre = 0;
        for (size_t q = 0; q < r; q++)
            pre += l->cnt[q];
        size_t outer = prod(o->dims, 0, l->axis),
               inner = prod(o->dims, l->axis + 1, o->rank) * es,
               len = (size_t)o->dims[l->axis];
        if (piece->nbytes != outer * l->cnt[r] * inner)
            return sn_error(SHARDNET_INTERNAL,
                            "tensor split: output '%s' on %s is %zu bytes, "
                            "not its share", o->name, t->dev[r]->info.name,
                            piece->nbytes);
        for (size_t k = 0; k < outer; k++)
            memcpy((char *)o->data + (k * len + pre) * inner,
                   (const char *)piece->data + k * l->cnt[r] * inner,
                   l->cnt[r] * inner);
    }
    return SHARDNET_OK;
}

/* Device r's part of a run; on failure the others are told to stop. */
static shardnet_status run_rank(sn_tensor_split *t, size_t r)
{
    double t0 = sn_trace_on() ? sn_trace_now() : 0;
    shardnet_status st = sn_plan_run(t->plan[r], t->in);
    if (st == SHARDNET_OK)
        st = put_pieces(t, r);
    if (sn_trace_on())
        sn_trace_add(t->dev[r]->info.name, "shard", "tensor-split run", t0,
                     sn_trace_now());
    if (st != SHARDNET_OK)
        sn_group_abort(t->group);
    return st;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    sn_tensor_split *t = w->t;
    unsigned seen = 0;
    sn_bind_thread(t->dev[w->rank], 1);
    for (;;) {
        /* Poll a little first: runs often follow each other closely, and
         * a sleeping worker starts late by a wake-up. */
        split_wait sw = {t, seen};
        sn_poll(job_posted, &sw, WAKE_SPIN_S);
        pthread_mutex_lock(&t->lock);
        while (!t->quit && t->job == seen)
            pthread_cond_wait(&t->cond, &t->lock);
        if (t->quit) {
            pthread_mutex_unlock(&t->lock);
            sn_bind_thread(t->dev[w->rank], 0);
            return NULL;
        }
        seen = t->job;
        pthread_mutex_unlock(&t->lock);
        shardnet_status st = run_rank(t, w->rank);
        pthread_mutex_lock(&t->lock);
        w->st = st;
        if (st != SHARDNET_OK)
            snprintf(w->msg, sizeof w->msg, "%s", shardnet_last_error());
        t->done++;
        pthread_cond_broadcast(&t->cond);
        pthread_mutex_unlock(&t->lock);
    }
}

shardnet_status sn_tensor_split_run(sn_tensor_split *t, const sn_binding *in)
{
    shardnet_status st;
    if (!sn_tensor_split_matches(t, in))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "tensor split: inputs shaped unlike the ones it was "
                        "built for");
    pthread_mutex_lock(&t->lock);
    sn_group_begin(t->group);
    t->in = in;
    t->done = 0;
    t->job++;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
    /* The caller drives this process's first device for the run, then gets
     * its binding back. */
    st = SHARDNET_OK;
    if (t->where->nlocal) {
        size_t lead = t->where->local[0];
        sn_bind_thread(t->dev[lead], 1);
        st = run_rank(t, lead);
        sn_bind_thread(t->dev[lead], 0);
        split_wait sw = {t, 0};
        sn_poll(workers_done, &sw, WAKE_SPIN_S);
        pthread_mutex_lock(&t->lock);
        while (!workers_done(&sw))
            pthread_cond_wait(&t->cond, &t->lock);
        pthread_mutex_unlock(&t->lock);
        if (st != SHARDNET_OK)
            return st;
        for (size_t k = 1; k < t->where->nlocal; k++) {
            size_t r = t->where->local[k];
            if (t->wk[r].st != SHARDNET_OK)
                return sn_error(t->wk[r].st, "on %s: %s",
                                t->dev[r]->info.name, t->wk[r].msg);
        }
    }
    for (size_t i = 0; i < t->g->noutputs; i++)
        if (t->out_lay[i].kind != LAY_S && t->where->nlocal) {
            const sn_host_tensor *o =
                sn_plan_output(t->plan[t->where->local[0]], i);
            if (t->me_owned_out) {
                /* An owned buffer (a job of several processes). */
                if (o->nbytes != t->out[i].nbytes)
                    return sn_error(SHARDNET_INTERNAL,
                                    "tensor split: output %zu's size", i);
                memcpy(t->out[i].data, o->data, o->nbytes);
            } else {
                t->out[i] = *o;
                t->out[i].name = t->g->values[t->g->outputs[i]].name;
            }
        }
    if (t->me_owned_out && (st = share_outputs(t)) != SHARDNET_OK)
        return sn_error_prefix(st, "tensor split: sharing the outputs");
    return SHARDNET_OK;
}

const sn_host_tensor *sn_tensor_split_output(const sn_tensor_split *t,
                                             size_t i)
{
    return i < t->g->noutputs ? &t->out[i] : NULL;
}

int sn_tensor_split_matches(const sn_tensor_split *t, const sn_binding *in)
{
    for (size_t i = 0; i < t->g->ninputs; i++) {
        const sn_binding *a = &t->bound[i], *c = &in[i];
        if (a->dtype != c->dtype || a->rank != c->rank ||
            memcmp(a->dims, c->dims, (size_t)a->rank * sizeof a->dims[0]))
            return 0;
    }
    return 1;
}

/* --- creation -------------------------------------------------------------- */

/* The slowest device's work at its measured speed with a launch cost per
 * kernel, plus the collectives: a fixed cost each and the bytes staged
 * twice (out of and back into the devices) at the slowest device's
 * staging bandwidth. */
static double estimate(sn_tensor_split *t)
{
    double worst = 0, bw = 1e30, launch = 0;
    for (size_t d = 0; d < t->n; d++) {
        const sn_profile *p = sn_device_profile(t->dev[d]);
        if (sn_profile_staging_bw(p) < bw)
            bw = sn_profile_staging_bw(p);
        if (p->launch_s > launch)
            launch = p->launch_s;
    }
    t->coll_time = (double)t->ncoll * (SN_COLL_LATENCY_S + launch) +
                   2.0 * t->coll_bytes / bw;
    /* Across processes each collective also crosses the measured link:
     * two latencies and its bytes, per other process (an upper bound: the
     * processes exchange only the parts the others keep). */
    if (t->where->nprocs > 1) {
        double lat, lbw;
        if (sn_world_link(&lat, &lbw) != SHARDNET_OK) {
            sn_error_clear();
            lat = 1e-4;
            lbw = 1e9;
        }
        t->coll_time += (double)t->ncoll * 2.0 * lat +
                        2.0 * t->coll_bytes * (double)(t->where->nprocs - 1) / lbw;
    }
    /* Per device: its time, and whether its shard overflows its memory. */
    double each[2 * MAXD] = {0};
    for (size_t d = 0; d < t->n; d++) {
        double work = 0, launches = 0;
        const sn_graph *sg = t->sub[d];
        const sn_profile *p = sn_device_profile(t->dev[d]);
        if (!t->plan[d])
            continue; /* another process's: it tells its own below */
        uint64_t have = sn_device_memory(t->dev[d]);
        each[MAXD + d] = have && sn_plan_weight_bytes(t->plan[d]) +
                                         sn_plan_arena_bytes(t->plan[d]) >
                                     have;
        for (size_t i = 0; i < sg->nnodes; i++) {
            const sn_node *nd = &sg->nodes[i];
            if (nd->dead || !strcmp(nd->domain, "ai.shardnet"))
                continue;
            double w = sn_node_work(sg, t->plan[d], nd);
            int o = t->origin[i];
            if (o >= 0 && t->full_work[o] > 0) {
                /* the model's node, measured whole, times this device's
                 * share of its work */
                work += t->full_time[d * t->g->nnodes + (size_t)o] * w /
                        t->full_work[o];
                continue;
            }
            /* added nodes (slices, activations after a sum): products at
             * the device's GEMM speed, the rest about eight bytes per
             * output element at its staging bandwidth */
            if (sn_node_is_product(nd))
                work += w / p->gemm_flops;
            else
                work += 8.0 * w / sn_profile_staging_bw(p);
            launches += 1;
        }
        each[d] = work + p->launch_s * launches;
    }
    /* In a job: each process has estimated its own devices. */
    if (t->me_owned_out) {
        unsigned np = sn_world_processes();
        double *all = calloc((size_t)np * 2 * MAXD, sizeof *all);
        if (!all || sn_world_allgather(each, sizeof each, all) != SHARDNET_OK) {
            free(all);
            sn_error_clear();
            return 1e300;
        }
        for (size_t d = 0; d < t->n; d++) {
            const double *from = all + (size_t)t->dev[d]->process * 2 * MAXD;
            each[d] = from[d];
            each[MAXD + d] = from[MAXD + d];
        }
        free(all);
    }
    t->overflow = -1;
    for (size_t d = 0; d < t->n; d++) {
        if (each[d] > worst)
            worst = each[d];
        if (each[MAXD + d] != 0 && t->overflow < 0)
            t->overflow = (int)d;
    }
    return worst + t->coll_time;
}

/* The operators of the devices' graphs (the split's own node among them):
 * defined with that node's lowering, at the end. */
static const sn_op_def *shard_ops(const char *domain, const char *op_type);

shardnet_status sn_tensor_split_create(sn_graph *g, sn_device *const *devs,
                                       size_t ndev, const double *speed,
                                       const sn_binding *inputs,
                                       const sn_strategy *strategies,
                                       size_t nstrategies, sn_device *home,
                                       sn_tensor_split **out)
{
    sn_tensor_split *t = NULL;
    sn_weights *w0 = NULL;
    sn_host_tensor *out_full = NULL;
    bld b;
    shardnet_status st;
    *out = NULL;
    memset(&b, 0, sizeof b);
    if (ndev < 2 || ndev > MAXD)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "tensor split: 2 to %d devices", MAXD);
    for (size_t d = 0; d < ndev; d++)
        for (size_t e = 0; e < d; e++)
            if (devs[d] == devs[e])
                return sn_error(SHARDNET_INVALID_ARGUMENT,
                                "tensor split: %s is listed twice",
                                devs[d]->info.name);
    /* Twin devices (same kind, model, driver and cores) get their mean
     * speed: their profiles differ by measurement noise only, and shares
     * cut by that noise leave the larger share on the critical path. */
    double twin[MAXD];
    for (size_t d = 0; d < ndev; d++) {
        double sum = 0;
        size_t k = 0;
        for (size_t e = 0; e < ndev; e++) {
            const shardnet_device_info *a = &devs[d]->info, *c = &devs[e]->info;
            if (a->kind == c->kind && a->compute_units == c->compute_units &&
                !strcmp(a->model, c->model) && !strcmp(a->driver, c->driver)) {
                sum += speed[e];
                k++;
            }
        }
        twin[d] = sum / (double)k;
    }
    b.g = g;
    b.n = ndev;
    b.speed = twin;
    b.strat = strategies;
    b.nstrat = nstrategies;
    b.vi = calloc(g->nvalues + 1, sizeof *b.vi);
    b.strat_used = calloc(nstrategies + 1, 1);
    b.out_lay = calloc(g->noutputs + 1, sizeof *b.out_lay);
    if (!b.vi || !b.strat_used || !b.out_lay) {
        st = oom();
        goto fail;
    }
    for (size_t i = 0; i < g->nvalues; i++)
        b.vi[i].cnst_r = -1;
    /* The whole job takes part when a home device is given.  Shapes of
     * every value: a plan of the whole graph on a device of this process
     * (weights uploaded there once, freed below): the first listed one
     * here, else `home`. */
    int job = home && sn_world_processes() > 1;
    sn_device *shape_dev = home ? home : devs[0];
    for (size_t d = ndev; d-- > 0;)
        if (!devs[d]->remote)
            shape_dev = devs[d];
    if ((st = sn_weights_new(g, shape_dev, &w0)) != SHARDNET_OK ||
        (st = sn_plan_build(g, w0, inputs, sn_op_find, &b.shape)) !=
            SHARDNET_OK)
        goto fail;
    /* Every node timed whole on every device: the estimate scales these
     * by each device's share of the work. */
    b.full_time = calloc(ndev * g->nnodes + 1, sizeof *b.full_time);
    b.full_work = calloc(g->nnodes + 1, sizeof *b.full_work);
    if (!b.full_time || !b.full_work) {
        st = oom();
        goto fail;
    }
    for (size_t i = 0; i < g->nnodes; i++)
        if (!g->nodes[i].dead)
            b.full_work[i] = sn_node_work(g, b.shape, &g->nodes[i]);
    /* Each device timed on its own process, the figures shared. */
    for (size_t d = 0; d < ndev; d++)
        if ((st = sn_time_nodes_shared(g, devs[d], inputs,
                                       &b.full_time[d * g->nnodes], job)) !=
            SHARDNET_OK) {
            st = sn_error_prefix(st, "tensor split");
            goto fail;
        }
    say(&b, "tensor split over %zu devices:", ndev);
    for (size_t d = 0; d < ndev; d++)
        say(&b, " %s (%.1f GFLOP/s)", devs[d]->info.name, speed[d] * 1e-9);
    say(&b, "\n");
    if ((st = build(&b)) != SHARDNET_OK)
        goto fail;
    /* Host results of the cut outputs, put together from the pieces. */
    if (!(out_full = calloc(g->noutputs + 1, sizeof *out_full))) {
        st = oom();
        goto fail;
    }
    int owned_out = job;
    for (size_t i = 0; i < g->noutputs; i++) {
        const sn_rt *fs = full(&b, g->outputs[i]);
        if (b.out_lay[i].kind != LAY_S && !owned_out)
            continue;
        out_full[i].dtype = fs->dtype;
        out_full[i].rank = fs->rank;
        memcpy(out_full[i].dims, fs->dims, sizeof out_full[i].dims);
        out_full[i].nbytes = sn_rt_elements(fs) * sn_dtype_size(fs->dtype);
        out_full[i].name = g->values[g->outputs[i]].name;
        if (!(out_full[i].data = malloc(out_full[i].nbytes + 1))) {
            st = oom();
            goto fail;
        }
    }
    sn_plan_free(b.shape);
    b.shape = NULL;
    sn_weights_free(w0);
    w0 = NULL;

    t = calloc(1, sizeof *t);
    if (!t) {
        st = oom();
        goto fail;
    }
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->cond, NULL);
    t->g = g;
    t->n = ndev;
    memcpy(t->dev, devs, ndev * sizeof *devs);
    memcpy(t->sub, b.sub, sizeof t->sub);
    memset(b.sub, 0, sizeof b.sub);
    t->ncoll = b.ncoll;
    t->coll_bytes = b.coll_bytes;
    t->chosen = b.chosen;
    t->nchosen = b.nchosen;
    b.chosen = NULL;
    t->origin = b.origin;
    b.origin = NULL;
    t->full_time = b.full_time;
    b.full_time = NULL;
    t->full_work = b.full_work;
    b.full_work = NULL;
    t->out_lay = b.out_lay;
    b.out_lay = NULL;
    t->out = out_full;
    out_full = NULL;
    t->bound = calloc(g->ninputs + 1, sizeof *t->bound);
    if (!t->bound) {
        st = oom();
        goto fail_t;
    }
    for (size_t i = 0; i < g->ninputs; i++) {
        t->bound[i] = inputs[i];
        t->bound[i].data = NULL;
    }
    t->me_owned_out = owned_out;
    /* SHARDNET_STAGED_COLLECTIVES=1 forces the staged transport (tests). */
    const char *staged = getenv("SHARDNET_STAGED_COLLECTIVES");
    if ((st = sn_group_create(devs, ndev, staged && *staged &&
                                              strcmp(staged, "0"),
                              &t->group)) != SHARDNET_OK)
        goto fail_t;
    t->where = sn_group_where_of(t->group);
    /* This process plans (and uploads the shards of) its own devices. */
    st = SHARDNET_OK;
    for (size_t d = 0; d < ndev; d++) {
        t->ctx[d].t = t;
        t->ctx[d].rank = d;
        if (devs[d]->remote)
            continue;
        if (st == SHARDNET_OK &&
            ((st = sn_weights_new(t->sub[d], devs[d], &t->w[d])) !=
                 SHARDNET_OK ||
             (st = sn_plan_build(t->sub[d], t->w[d], inputs, shard_ops,
                                 &t->plan[d])) != SHARDNET_OK))
            st = sn_error_prefix(st, "tensor split on %s",
                                 devs[d]->info.name);
        if (st == SHARDNET_OK)
            sn_plan_set_collective(t->plan[d], rendezvous, &t->ctx[d]);
    }
    /* (Every process must know before any goes on to a collective.) */
    for (size_t k = 0; k < t->where->nprocs && job; k++) {
        unsigned q = t->where->procs[k];
        shardnet_status mine = q == t->where->me ? st : SHARDNET_OK;
        shardnet_status all = sn_world_share_status(
            q, mine, "tensor split: planning the shards");
        if (all != SHARDNET_OK && st == SHARDNET_OK)
            st = all;
    }
    if (st != SHARDNET_OK)
        goto fail_t;
    t->desc = b.desc;
    b.desc = NULL;
    t->estimate = estimate(t);
    for (size_t k = 1; k < t->where->nlocal; k++) {
        size_t r = t->where->local[k];
        t->wk[r].t = t;
        t->wk[r].rank = r;
        if (pthread_create(&t->wk[r].thread, NULL, worker_main, &t->wk[r])) {
            st = sn_error(SHARDNET_INTERNAL, "tensor split: no threads");
            goto fail_t;
        }
        t->wk[r].started = 1;
    }
    free(b.vi);
    free(b.strat_used);
    *out = t;
    return SHARDNET_OK;
fail_t:
    t->desc = t->desc ? t->desc : b.desc;
    b.desc = NULL;
    sn_tensor_split_free(t);
fail:
    sn_plan_free(b.shape);
    sn_weights_free(w0);
    for (size_t d = 0; d < MAXD; d++)
        sn_graph_free(b.sub[d]);
    free(b.vi);
    free(b.strat_used);
    free(b.desc);
    free(b.chosen);
    free(b.origin);
    free(b.full_time);
    free(b.full_work);
    free(b.out_lay);
    for (size_t i = 0; out_full && i < g->noutputs; i++)
        free(out_full[i].data);
    free(out_full);
    return st;
}

void sn_tensor_split_free(sn_tensor_split *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->lock);
    t->quit = 1;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
    for (size_t r = 1; r < t->n; r++)
        if (t->wk[r].started)
            pthread_join(t->wk[r].thread, NULL);
    for (size_t d = 0; d < t->n; d++)
        if (t->dev[d])
            sn_synchronize(t->dev[d]);
    sn_group_free(t->group);
    for (size_t d = 0; d < t->n; d++) {
        sn_plan_free(t->plan[d]);
        sn_weights_free(t->w[d]);
        sn_graph_free(t->sub[d]);
    }
    pthread_mutex_destroy(&t->lock);
    pthread_cond_destroy(&t->cond);
    free(t->bound);
    for (size_t i = 0; t->out && t->out_lay && i < t->g->noutputs; i++)
        if (t->out_lay[i].kind == LAY_S || t->me_owned_out)
            free(t->out[i].data);
    free(t->out);
    free(t->out_lay);
    free(t->desc);
    free(t->chosen);
    free(t->origin);
    free(t->full_time);
    free(t->full_work);
    free(t);
}

void sn_tensor_split_describe(const sn_tensor_split *t, char *buf, size_t cap)
{
    size_t len = strlen(buf);
    if (len >= cap)
        return;
    len += (size_t)snprintf(buf + len, cap - len, "%s", t->desc ? t->desc : "");
    for (size_t d = 0; d < t->n && len < cap; d++)
        len += (size_t)(t->plan[d]
                            ? snprintf(buf + len, cap - len,
                                       "  %s: weights %.2f MB, activations "
                                       "%.2f MB\n",
                                       t->dev[d]->info.name,
                                       sn_plan_weight_bytes(t->plan[d]) / 1e6,
                                       sn_plan_arena_bytes(t->plan[d]) / 1e6)
                            : snprintf(buf + len, cap - len,
                                       "  %s: on process %u\n",
                                       t->dev[d]->info.name,
                                       t->dev[d]->process));
    if (len < cap)
        snprintf(buf + len, cap - len,
                 "  per run: %zu collectives moving %.2f MB\n", t->ncoll,
                 t->coll_bytes / 1e6);
}

size_t sn_tensor_split_strategies(const sn_tensor_split *t,
                                  const sn_strategy **out)
{
    *out = t->chosen;
    return t->nchosen;
}

const char *sn_tensor_split_overflow(const sn_tensor_split *t)
{
    return t->overflow >= 0 ? t->dev[t->overflow]->info.name : NULL;
}

double sn_tensor_split_estimate(const sn_tensor_split *t)
{
    return t->estimate;
}

size_t sn_tensor_split_collectives(const sn_tensor_split *t, double *bytes)
{
    if (bytes)
        *bytes = t->coll_bytes;
    return t->ncoll;
}

/* --- strategies --------------------------------------------------------- */

shardnet_status sn_strategy_parse(const char *text, sn_strategy *out)
{
    const char *p = text;
    out->ntuples = 0;
    memset(out->len, 0, sizeof out->len);
#define SKIP()                                                                \
    while (isspace((unsigned char)*p))                                        \
    p++
    SKIP();
    if (*p++ != '(')
        goto bad;
    for (;;) {
        SKIP();
        if (*p == ')' && out->ntuples) {
            p++;
            break;
        }
        if (*p++ != '(' || out->ntuples == SN_STRATEGY_TUPLES)
            goto bad;
        size_t k = out->ntuples++;
        for (;;) {
            SKIP();
            char *end;
            unsigned long v = strtoul(p, &end, 10);
            if (end == p || v < 1 || v > MAXD ||
                out->len[k] == SN_MAX_DIMS)
                goto bad;
            out->v[k][out->len[k]++] = (unsigned)v;
            p = end;
            SKIP();
            if (*p == ',') {
                p++;
                continue;
            }
            if (*p++ != ')')
                goto bad;
            break;
        }
        SKIP();
        if (*p == ',')
            p++;
    }
    SKIP();
    if (*p)
        goto bad;
    return SHARDNET_OK;
bad:
    return sn_error(SHARDNET_INVALID_ARGUMENT,
                    "strategy '%s': expected tuples of numbers from 1 to %d "
                    "such as ((1,2),(2,1))",
                    text, MAXD);
#undef SKIP
}

void sn_strategy_format(const sn_strategy *s, char *buf, size_t cap)
{
    size_t len = 0;
#define PUT(...)                                                              \
    do {                                                                      \
        if (len < cap)                                                        \
            len += (size_t)snprintf(buf + len, cap - len, __VA_ARGS__);       \
    } while (0)
    if (cap)
        buf[0] = '\0';
    PUT("(");
    for (size_t k = 0; k < s->ntuples; k++) {
        PUT("%s(", k ? "," : "");
        for (size_t i = 0; i < s->len[k]; i++)
            PUT("%s%u", i ? "," : "", s->v[k][i]);
        PUT(")");
    }
    PUT(")");
#undef PUT
}

/* --- the collective op --------------------------------------------------- */

/*
 * Copies between a tensor [outer, total, inner] (full) and the same data
 * grouped by rank, rank r's [outer, cnt[r], inner] block at outer * pre[r]
 * * inner (blocks): to_blocks = 1 gathers full into blocks, 0 the reverse.
 */
static shardnet_status regroup(sn_lower *L, const sn_node *n, sn_view full,
                               sn_view blocks, size_t outer, size_t inner,
                               const size_t *cnt, const size_t *pre,
                               size_t ranks, int to_blocks)
{
    size_t total = pre[ranks - 1] + cnt[ranks - 1];
    for (size_t r = 0; r < ranks; r++) {
        if (!cnt[r])
            continue;
        sn_step c = {.kind = SN_STEP_COPY};
        sn_view f = full, bl = blocks;
        ptrdiff_t fs = (ptrdiff_t)(total * inner),
                  bs = (ptrdiff_t)(cnt[r] * inner);
        f.offset += pre[r] * inner;
        bl.offset += outer * pre[r] * inner;
        c.u.copy.rank = 2;
        c.u.copy.shape[0] = outer;
        c.u.copy.shape[1] = cnt[r] * inner;
        c.u.copy.src_stride[0] = to_blocks ? fs : bs;
        c.u.copy.dst_stride[0] = to_blocks ? bs : fs;
        c.u.copy.src_stride[1] = c.u.copy.dst_stride[1] = 1;
        c.u.copy.src = to_blocks ? f : bl;
        c.u.copy.dst = to_blocks ? bl : f;
        shardnet_status st = sn_emit(L, n, &c);
        if (st != SHARDNET_OK)
            return st;
    }
    return SHARDNET_OK;
}

static shardnet_status lower_collective(sn_lower *L, const sn_node *n)
{
    sn_rt *x = sn_in(L, n, 0);
    sn_coll_kind kind = (sn_coll_kind)sn_attr_int(n, "kind", -1);
    size_t rank = (size_t)sn_attr_int(n, "rank", -1);
    const sn_attr *ca = sn_node_attr(n, "counts");
    sn_step s = {.kind = SN_STEP_COLLECTIVE};
    sn_coll_desc *d = &s.u.coll;
    sn_view xv;
    sn_rt *y;
    shardnet_status st;
    if (!x || x->dtype != SN_DT_FLOAT)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "needs a float input");
    if ((st = sn_dev_view(L, n, x, &xv)) != SHARDNET_OK)
        return st;
    if (kind == SN_COLL_ALLREDUCE) {
        /* in place: the partial sums become the sum */
        if ((st = sn_out_alias(L, n, 0, x, x->rank, x->dims)) != SHARDNET_OK)
            return st;
        d->kind = kind;
        d->n = 0; /* all the split's devices */
        d->counts[0] = sn_rt_elements(x);
        d->send = d->recv = xv;
        return sn_emit(L, n, &s);
    }
    int64_t axis = sn_attr_int(n, "axis", -1);
    if ((kind != SN_COLL_ALLGATHER && kind != SN_COLL_REDUCE_SCATTER) ||
        !ca || ca->type != SN_ATTR_INTS || !ca->count ||
        ca->count > SN_COLL_MAX || rank >= ca->count || axis < 0 ||
        axis >= x->rank)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "bad collective attributes");
    size_t total = 0, cnt[SN_COLL_MAX], pre[SN_COLL_MAX];
    for (size_t r = 0; r < ca->count; r++) {
        if (ca->ints[r] < 0)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT, "bad counts");
        pre[r] = total;
        cnt[r] = (size_t)ca->ints[r];
        total += cnt[r];
    }
    int64_t dims[SN_MAX_DIMS];
    memcpy(dims, x->dims, sizeof dims);
    size_t outer = prod(x->dims, 0, (int)axis),
           inner = prod(x->dims, (int)axis + 1, x->rank);
    int gather = kind == SN_COLL_ALLGATHER;
    if ((size_t)x->dims[axis] != (gather ? cnt[rank] : total))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "input does not match the counts");
    dims[axis] = (int64_t)(gather ? total : cnt[rank]);
    if ((st = sn_out_device(L, n, 0, x->rank, dims, &y)) != SHARDNET_OK)
        return st;
    d->kind = kind;
    d->n = ca->count;
    for (size_t r = 0; r < ca->count; r++)
        d->counts[r] = outer * cnt[r] * inner;
    if (outer == 1) {
        d->send = xv;
        d->recv = y->view;
        return sn_emit(L, n, &s);
    }
    /* Rank blocks are contiguous in the collective's buffer: regroup. */
    sn_view blocks;
    if ((st = sn_scratch(L, outer * total * inner, &blocks)) != SHARDNET_OK)
        return st;
    if (!gather) {
        if ((st = regroup(L, n, xv, blocks, outer, inner, cnt, pre,
                          ca->count, 1)) != SHARDNET_OK)
            return st;
        d->send = blocks;
        d->recv = y->view;
        return sn_emit(L, n, &s);
    }
    d->send = xv;
    d->recv = blocks;
    if ((st = sn_emit(L, n, &s)) != SHARDNET_OK)
        return st;
    return regroup(L, n, y->view, blocks, outer, inner, cnt, pre, ca->count,
                   0);
}

/* The operators of a device's graph: the registry's, and the split's own
 * node (a model file naming it finds it unsupported). */
static const sn_op_def *shard_ops(const char *domain, const char *op_type)
{
    static const sn_op_def collective = {"ShardCollective", 1, 1,
                                         lower_collective};
    if (!strcmp(domain, "ai.shardnet"))
        return strcmp(op_type, collective.op_type) ? NULL : &collective;
    return sn_op_find(domain, op_type);
}
