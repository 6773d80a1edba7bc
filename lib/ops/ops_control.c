/*
 * Control flow: If and Loop, and what Scan (ops_scan.c) shares with
 * them (lib/ops/control.h).  Their subgraphs (branches, bodies;
 * read by the importer, lib/import/onnx.c) are lowered inline, as
 * ordinary steps of the plan counted as the control node's: If lowers the
 * branch its condition picks, Loop unrolls its body for as many
 * iterations as its trip count and conditions say, Scan for each element
 * of its sequences.  Each lowering of a subgraph has its values in an
 * sn_rt array of its own; what crosses between them (loop-carried values,
 * scan slices, outputs) is copied as an sn_rt, with host data duplicated
 * so that each array frees its own.  The values a subgraph reads from the
 * graphs around it are the node's last inputs (sn_node_implicit_inputs).
 *
 * What decides is best known on the host when the plan is built (integer
 * and boolean inputs are bound by value, so it usually is).  If's
 * condition computed on the device plans both branches behind a branch
 * step that reads it when the plan runs (one float, the one wait); Loop's
 * trip count and conditions must be known on the host, and one computed
 * on the device fails the plan, naming the node.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "ops/control.h"
#include "ops/registry.h"

/* --- values crossing between subgraph lowerings -------------------------- */

static size_t rt_bytes(const sn_rt *rt)
{
    return sn_rt_elements(rt) * sn_dtype_size(rt->dtype);
}

/* dst (its host data freed) becomes src, with host data of its own. */
shardnet_status sn_ctl_rt_set(const sn_node *n, sn_rt *dst, const sn_rt *src)
{
    void *copy = NULL;
    if (src->host) {
        size_t b = rt_bytes(src);
        if (!(copy = malloc(b ? b : 1)))
            return sn_node_error(n, SHARDNET_OUT_OF_MEMORY, "out of memory");
        if (b)
            memcpy(copy, src->host, b);
    }
    free(dst->host_owned);
    *dst = *src;
    dst->host = copy;
    dst->host_owned = copy;
    return SHARDNET_OK;
}

/* A value of the graph around, seen from a subgraph: its data not owned. */
static void rt_borrow(sn_rt *dst, const sn_rt *src)
{
    *dst = *src;
    dst->host_owned = NULL;
}

void sn_ctl_rts_free(sn_rt *rt, size_t n)
{
    for (size_t i = 0; rt && i < n; i++)
        free(rt[i].host_owned);
    free(rt);
}

/* A scalar of type t holding v, on the host. */
static shardnet_status rt_scalar(const sn_node *n, sn_rt *rt, sn_dtype t,
                                 int64_t v)
{
    void *d = malloc(8);
    if (!d)
        return sn_node_error(n, SHARDNET_OUT_OF_MEMORY, "out of memory");
    sn_store_value(t, d, 0, (double)v, v, 1);
    free(rt->host_owned);
    memset(rt, 0, sizeof *rt);
    rt->known = 1;
    rt->dtype = t;
    rt->host = rt->host_owned = d;
    return SHARDNET_OK;
}

/* rt's data on the device as float32: its view, or its host data
 * uploaded (rt is not a graph value here, so sn_dev_view cannot serve). */
static shardnet_status rt_device(sn_lower *L, const sn_node *n,
                                 const sn_rt *rt, sn_view *out)
{
    size_t count = sn_rt_elements(rt);
    float *f;
    if (rt->on_device) {
        *out = rt->view;
        return SHARDNET_OK;
    }
    if (!rt->host)
        return sn_node_error(n, SHARDNET_INTERNAL, "a value without data");
    if (!(f = malloc((count ? count : 1) * sizeof *f)))
        return sn_node_error(n, SHARDNET_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < count; i++)
        f[i] = (float)sn_rt_get_double(rt, i);
    return sn_dev_upload(L, n, f, count, out);
}

/* A boolean or integer scalar known on the host: 0 or 1 in *v. */
static shardnet_status host_flag(const sn_node *n, const sn_rt *rt,
                                 const char *what, int *v)
{
    if (sn_rt_elements(rt) != 1)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "%s has %zu elements, not one", what,
                             sn_rt_elements(rt));
    if (!rt->host)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "%s is computed on the device; shardnet plans "
                             "control flow only on values known when the "
                             "model is planned (integer, boolean and small "
                             "inputs, constants, and what follows from them)",
                             what);
    *v = sn_rt_get_double(rt, 0) != 0;
    return SHARDNET_OK;
}

/* --- slicing and stacking along an axis ----------------------------------- */

/* *out (zeroed first): x with axis `axis` fixed at `at` (and removed). */
shardnet_status sn_ctl_slice(sn_lower *L, const sn_node *n,
                                  const sn_rt *x, int axis, int64_t at,
                                  sn_rt *out)
{
    size_t outer = sn_dims_product(0, axis, x->dims);
    size_t len = (size_t)x->dims[axis];
    size_t inner = sn_dims_product(axis + 1, x->rank, x->dims);
    memset(out, 0, sizeof *out);
    out->known = 1;
    out->dtype = x->dtype;
    out->rank = x->rank - 1;
    for (int d = 0, k = 0; d < x->rank; d++)
        if (d != axis)
            out->dims[k++] = x->dims[d];
    if (x->host) {
        size_t es = sn_dtype_size(x->dtype);
        char *dst = malloc(outer * inner * es + 1);
        if (!dst)
            return sn_node_error(n, SHARDNET_OUT_OF_MEMORY, "out of memory");
        for (size_t o = 0; o < outer; o++)
            memcpy(dst + o * inner * es,
                   (const char *)x->host + (o * len + (size_t)at) * inner * es,
                   inner * es);
        out->host = out->host_owned = dst;
        return SHARDNET_OK;
    }
    out->on_device = 1;
    out->view = x->view;
    if (outer == 1) { /* consecutive elements: a view, no copy */
        out->view.offset += (size_t)at * inner;
        return SHARDNET_OK;
    }
    sn_step s = {.kind = SN_KERNEL_COPY};
    shardnet_status st = sn_scratch(L, outer * inner, &out->view);
    if (st != SHARDNET_OK)
        return st;
    s.u.copy.rank = 2;
    s.u.copy.shape[0] = outer;
    s.u.copy.shape[1] = inner;
    s.u.copy.src_stride[0] = (ptrdiff_t)(len * inner);
    s.u.copy.src_stride[1] = 1;
    s.u.copy.dst_stride[0] = (ptrdiff_t)inner;
    s.u.copy.dst_stride[1] = 1;
    s.u.copy.src = x->view;
    s.u.copy.src.offset += (size_t)at * inner;
    s.u.copy.dst = out->view;
    if (!outer || !inner)
        return SHARDNET_OK;
    return sn_emit(L, n, &s);
}

/*
 * *out (zeroed first): the count items (all of one shape and type)
 * stacked along a new axis `axis`, item t at position t.  With no items,
 * an empty tensor of the shape `like` (rank -1: one dimension) and type.
 */
shardnet_status sn_ctl_stack(sn_lower *L, const sn_node *n,
                                  const sn_rt *items, size_t count, int axis,
                                  const sn_value *like, sn_rt *out)
{
    const sn_rt *a = count ? &items[0] : NULL;
    int rank = a ? a->rank : like->rank >= 0 ? like->rank : 0;
    int host = 1;
    size_t outer, inner, es;
    memset(out, 0, sizeof *out);
    out->known = 1;
    out->dtype = a ? a->dtype
               : like->dtype != SN_DT_UNDEFINED ? like->dtype : SN_DT_FLOAT;
    if (rank + 1 > SN_MAX_DIMS || axis < 0 || axis > rank)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "cannot stack along axis %d of rank %d", axis,
                             rank);
    out->rank = rank + 1;
    for (int d = 0, k = 0; d < rank + 1; d++) {
        int64_t v = d == axis ? (int64_t)count : a ? a->dims[k++]
                                                   : like->dims[k++];
        out->dims[d] = v >= 0 ? v : 0;
    }
    for (size_t t = 0; t < count; t++) {
        if (items[t].rank != rank || items[t].dtype != a->dtype ||
            memcmp(items[t].dims, a->dims, (size_t)rank * sizeof a->dims[0]))
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "scan output of iteration %zu differs in "
                                 "shape or type from the first", t);
        host &= items[t].host != NULL;
    }
    outer = sn_dims_product(0, axis, out->dims);
    inner = sn_dims_product(axis + 1, out->rank, out->dims);
    if (host) {
        char *dst;
        es = sn_dtype_size(out->dtype);
        if (!(dst = malloc(outer * count * inner * es + 1)))
            return sn_node_error(n, SHARDNET_OUT_OF_MEMORY, "out of memory");
        for (size_t t = 0; t < count; t++)
            for (size_t o = 0; o < outer; o++)
                memcpy(dst + ((o * count + t) * inner) * es,
                       (const char *)items[t].host + o * inner * es,
                       inner * es);
        out->host = out->host_owned = dst;
        return SHARDNET_OK;
    }
    shardnet_status st = sn_scratch(L, outer * count * inner, &out->view);
    if (st != SHARDNET_OK)
        return st;
    out->on_device = 1;
    for (size_t t = 0; t < count && outer && inner; t++) {
        sn_step s = {.kind = SN_KERNEL_COPY};
        if ((st = rt_device(L, n, &items[t], &s.u.copy.src)) != SHARDNET_OK)
            return st;
        s.u.copy.rank = 2;
        s.u.copy.shape[0] = outer;
        s.u.copy.shape[1] = inner;
        s.u.copy.src_stride[0] = (ptrdiff_t)inner;
        s.u.copy.src_stride[1] = 1;
        s.u.copy.dst_stride[0] = (ptrdiff_t)(count * inner);
        s.u.copy.dst_stride[1] = 1;
        s.u.copy.dst = out->view;
        s.u.copy.dst.offset += t * inner;
        if ((st = sn_emit(L, n, &s)) != SHARDNET_OK)
            return st;
    }
    return SHARDNET_OK;
}

/* --- subgraphs ------------------------------------------------------------ */

/* Where the outer values of n's subgraph attribute `name` begin among n's
 * inputs. */
static size_t outer_base(const sn_node *n, const char *name)
{
    size_t at = n->ninputs - sn_node_implicit_inputs(n);
    for (size_t i = 0; i < n->nattrs; i++) {
        const sn_attr *a = &n->attrs[i];
        if (a->type != SN_ATTR_GRAPH || !a->graph)
            continue;
        if (!strcmp(a->name, name))
            break;
        at += a->graph->nouter;
    }
    return at;
}

/* The subgraph attribute `name` of n, required. */
shardnet_status sn_ctl_graph(const sn_node *n, const char *name,
                                  sn_graph **out)
{
    if (!(*out = sn_node_graph(n, name)))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "needs the graph attribute '%s'", name);
    return SHARDNET_OK;
}

/* A fresh value array for one lowering of sub: its outer values borrowed
 * from n's inputs (or, with prev, the constants and outer values of the
 * previous lowering kept, with the uploads it made). */
shardnet_status sn_ctl_begin(sn_lower *L, const sn_node *n,
                                 const char *attr, const sn_graph *sub,
                                 const sn_rt *prev, sn_rt **out)
{
    size_t base = outer_base(n, attr);
    sn_rt *rt = calloc(sub->nvalues + 1, sizeof *rt);
    *out = rt;
    if (!rt)
        return sn_node_error(n, SHARDNET_OUT_OF_MEMORY, "out of memory");
    for (size_t v = 0; prev && v < sub->nvalues; v++)
        if (sub->values[v].flags & (SN_VALUE_CONST | SN_VALUE_OUTER))
            rt_borrow(&rt[v], &prev[v]);
    for (size_t k = 0; !prev && k < sub->nouter; k++) {
        const sn_rt *o = sn_in(L, n, base + k);
        if (!o || !o->known)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "'%s' reads '%s', which has no value", attr,
                                 sub->values[sub->outer[k]].name);
        rt_borrow(&rt[sub->outer[k]], o);
    }
    return SHARDNET_OK;
}

/* Lower sub with the values in rt, then check that it made its outputs. */
shardnet_status sn_ctl_run(sn_lower *L, const sn_node *n,
                               const char *attr, sn_graph *sub, sn_rt *rt)
{
    shardnet_status st = sn_lower_subgraph(L, n, sub, rt, sn_op_find);
    if (st != SHARDNET_OK)
        return sn_error_prefix(st, "node '%s' (%s), in '%s'", n->name,
                               n->op_type, attr);
    for (size_t i = 0; i < sub->noutputs; i++)
        if (!rt[sub->outputs[i]].known)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "'%s' does not compute its output %zu ('%s')",
                                 attr, i, sub->values[sub->outputs[i]].name);
    return SHARDNET_OK;
}

/* Output i of n, when the node has it, becomes src. */
shardnet_status sn_ctl_output(sn_lower *L, const sn_node *n, size_t i,
                                  const sn_rt *src)
{
    if (i >= n->noutputs || n->outputs[i] < 0)
        return SHARDNET_OK;
    return sn_ctl_rt_set(n, &L->rt[n->outputs[i]], src);
}

/* --- If ------------------------------------------------------------------- */

/* Output i of n made on the device (first: allocated in src's shape)
 * from branch value src, by a copy. */
static shardnet_status if_output(sn_lower *L, const sn_node *n, size_t i,
                                 const sn_rt *src, int first)
{
    sn_step s = {.kind = SN_KERNEL_COPY};
    sn_rt *o = i < n->noutputs && n->outputs[i] >= 0 ? &L->rt[n->outputs[i]]
                                                     : NULL;
    shardnet_status st;
    if (!o)
        return SHARDNET_OK;
    if (first) {
        if ((st = sn_out_device(L, n, i, src->rank, src->dims, &o)) !=
            SHARDNET_OK)
            return st;
        o->dtype = src->dtype;
    } else if (o->rank != src->rank || o->dtype != src->dtype ||
               memcmp(o->dims, src->dims,
                      (size_t)src->rank * sizeof src->dims[0])) {
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "output %zu differs in shape or type between "
                             "the branches; with a condition computed on "
                             "the device both branches are planned, and "
                             "must agree", i);
    }
    if ((st = rt_device(L, n, src, &s.u.copy.src)) != SHARDNET_OK)
        return st;
    s.u.copy.rank = 1;
    s.u.copy.shape[0] = sn_rt_elements(src);
    s.u.copy.src_stride[0] = s.u.copy.dst_stride[0] = 1;
    s.u.copy.dst = o->view;
    return s.u.copy.shape[0] ? sn_emit(L, n, &s) : SHARDNET_OK;
}

/*
 * If on a condition computed on the device: both branches planned, each
 * ending in copies into the node's outputs, after a branch step that
 * reads the condition when the plan runs and skips the then_branch when
 * it is false, and a jump over the else_branch at the then_branch's end.
 */
static shardnet_status if_on_device(sn_lower *L, const sn_node *n,
                                    sn_graph *const *br, sn_rt *cond)
{
    static const char *const attrs[2] = {"then_branch", "else_branch"};
    sn_step b = {.kind = SN_STEP_BRANCH}, jump = {.kind = SN_STEP_JUMP};
    size_t at_branch = sn_step_count(L), at_jump = 0;
    shardnet_status st = sn_dev_view(L, n, cond, &b.branch.cond);
    if (st != SHARDNET_OK || (st = sn_emit(L, n, &b)) != SHARDNET_OK)
        return st;
    for (int k = 0; k < 2 && st == SHARDNET_OK; k++) {
        sn_rt *rt = NULL;
        if ((st = sn_ctl_begin(L, n, attrs[k], br[k], NULL, &rt)) ==
                SHARDNET_OK &&
            (st = sn_ctl_run(L, n, attrs[k], br[k], rt)) == SHARDNET_OK)
            for (size_t i = 0; i < br[k]->noutputs && st == SHARDNET_OK; i++)
                st = if_output(L, n, i, &rt[br[k]->outputs[i]], k == 0);
        sn_ctl_rts_free(rt, br[k]->nvalues);
        if (k == 0 && st == SHARDNET_OK) {
            at_jump = sn_step_count(L);
            st = sn_emit(L, n, &jump);
            sn_step_retarget(L, at_branch, sn_step_count(L));
        }
    }
    sn_step_retarget(L, at_jump, sn_step_count(L));
    return st;
}

SN_LOWER(sn_lower_if)
{
    sn_graph *then_g, *else_g, *g;
    size_t own = n->ninputs - sn_node_implicit_inputs(n);
    const char *attr;
    sn_rt *rt = NULL;
    int c;
    shardnet_status st;
    if ((st = sn_ctl_graph(n, "then_branch", &then_g)) != SHARDNET_OK ||
        (st = sn_ctl_graph(n, "else_branch", &else_g)) != SHARDNET_OK)
        return st;
    if (own != 1 || !sn_in(L, n, 0))
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "takes one input, the condition");
    if (then_g->noutputs != n->noutputs || else_g->noutputs != n->noutputs)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "then_branch has %zu outputs and else_branch "
                             "%zu; the node has %zu",
                             then_g->noutputs, else_g->noutputs, n->noutputs);
    if (then_g->ninputs || else_g->ninputs)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "a branch takes no inputs");
    if (sn_rt_elements(sn_in(L, n, 0)) != 1)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the condition has %zu elements, not one",
                             sn_rt_elements(sn_in(L, n, 0)));
    if (!sn_in(L, n, 0)->host)
        return if_on_device(L, n, (sn_graph *const[]){then_g, else_g},
                            sn_in(L, n, 0));
    if ((st = host_flag(n, sn_in(L, n, 0), "the condition", &c)) !=
        SHARDNET_OK)
        return st;
    g = c ? then_g : else_g;
    attr = c ? "then_branch" : "else_branch";
    if ((st = sn_ctl_begin(L, n, attr, g, NULL, &rt)) == SHARDNET_OK &&
        (st = sn_ctl_run(L, n, attr, g, rt)) == SHARDNET_OK)
        for (size_t i = 0; i < g->noutputs && st == SHARDNET_OK; i++)
            st = sn_ctl_output(L, n, i, &rt[g->outputs[i]]);
    sn_ctl_rts_free(rt, g->nvalues);
    return st;
}

/* --- Loop ----------------------------------------------------------------- */

/* What a Loop carries from one iteration to the next, and gathers. */
typedef struct loop_state {
    sn_graph *body;
    size_t ncarried, nscan;
    sn_rt *carried;   /* (ncarried) */
    sn_rt *scans;     /* (nscan * cap): iteration t's j-th at [t * nscan + j] */
    size_t iters, cap;
    sn_rt *prev;      /* the last iteration's values */
} loop_state;

/* One iteration: the body lowered on the carried values; *cond its
 * condition output. */
static shardnet_status loop_iteration(sn_lower *L, const sn_node *n,
                                      loop_state *s, int *cond)
{
    sn_graph *b = s->body;
    sn_rt *rt = NULL;
    shardnet_status st;
    if (s->iters == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        sn_rt *ns = realloc(s->scans, (cap * s->nscan + 1) * sizeof *ns);
        if (!ns)
            return sn_node_error(n, SHARDNET_OUT_OF_MEMORY, "out of memory");
        memset(ns + s->cap * s->nscan, 0,
               (cap - s->cap) * s->nscan * sizeof *ns);
        s->scans = ns;
        s->cap = cap;
    }
    st = sn_ctl_begin(L, n, "body", b, s->prev, &rt);
    if (st == SHARDNET_OK)
        st = rt_scalar(n, &rt[b->inputs[0]], SN_DT_INT64, (int64_t)s->iters);
    if (st == SHARDNET_OK)
        st = rt_scalar(n, &rt[b->inputs[1]], SN_DT_BOOL, 1);
    for (size_t k = 0; k < s->ncarried && st == SHARDNET_OK; k++)
        st = sn_ctl_rt_set(n, &rt[b->inputs[2 + k]], &s->carried[k]);
    if (st == SHARDNET_OK)
        st = sn_ctl_run(L, n, "body", b, rt);
    if (st == SHARDNET_OK)
        st = host_flag(n, &rt[b->outputs[0]], "the body's condition", cond);
    for (size_t k = 0; k < s->ncarried && st == SHARDNET_OK; k++)
        st = sn_ctl_rt_set(n, &s->carried[k], &rt[b->outputs[1 + k]]);
    for (size_t j = 0; j < s->nscan && st == SHARDNET_OK; j++)
        st = sn_ctl_rt_set(n, &s->scans[s->iters * s->nscan + j],
                    &rt[b->outputs[1 + s->ncarried + j]]);
    sn_ctl_rts_free(s->prev, b->nvalues);
    s->prev = rt;
    s->iters++;
    return st;
}

/* The trip count (-1: none) and first condition of Loop node n. */
static shardnet_status loop_bounds(sn_lower *L, const sn_node *n,
                                   int64_t *trip, int *cond)
{
    const sn_rt *m = sn_in(L, n, 0), *c = sn_in(L, n, 1);
    shardnet_status st;
    *trip = -1;
    *cond = 1;
    if (m) {
        if (sn_rt_elements(m) != 1 || !sn_dtype_is_integer(m->dtype))
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "the trip count is not one integer");
        if (!m->host)
            return sn_node_error(n, SHARDNET_UNSUPPORTED,
                                 "the trip count is computed on the device");
        *trip = sn_rt_get_int(m, 0) < 0 ? 0 : sn_rt_get_int(m, 0);
    }
    if (c && (st = host_flag(n, c, "the loop condition", cond)) !=
                 SHARDNET_OK)
        return st;
    if (*cond && *trip > SN_CTL_MAX_UNROLL)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "a trip count of %lld is more than the %d "
                             "iterations shardnet unrolls into a plan",
                             (long long)*trip, SN_CTL_MAX_UNROLL);
    return SHARDNET_OK;
}

static void loop_free(loop_state *s)
{
    for (size_t k = 0; s->carried && k < s->ncarried; k++)
        free(s->carried[k].host_owned);
    free(s->carried);
    for (size_t i = 0; s->scans && i < s->iters * s->nscan; i++)
        free(s->scans[i].host_owned);
    free(s->scans);
    sn_ctl_rts_free(s->prev, s->body->nvalues);
}

/* The stacked scan outputs and final carried values as n's outputs. */
static shardnet_status loop_outputs(sn_lower *L, const sn_node *n,
                                    loop_state *s)
{
    shardnet_status st = SHARDNET_OK;
    sn_rt *col = calloc(s->iters + 1, sizeof *col);
    if (!col)
        return sn_node_error(n, SHARDNET_OUT_OF_MEMORY, "out of memory");
    for (size_t k = 0; k < s->ncarried && st == SHARDNET_OK; k++)
        st = sn_ctl_output(L, n, k, &s->carried[k]);
    for (size_t j = 0; j < s->nscan && st == SHARDNET_OK; j++) {
        sn_graph *b = s->body;
        sn_rt out = {0};
        for (size_t t = 0; t < s->iters; t++)
            col[t] = s->scans[t * s->nscan + j];
        st = sn_ctl_stack(L, n, col, s->iters, 0,
                        &b->values[b->outputs[1 + s->ncarried + j]], &out);
        if (st == SHARDNET_OK)
            st = sn_ctl_output(L, n, s->ncarried + j, &out);
        free(out.host_owned);
    }
    free(col);
    return st;
}

SN_LOWER(sn_lower_loop)
{
    loop_state s = {0};
    size_t own = n->ninputs - sn_node_implicit_inputs(n);
    int64_t trip;
    int cond;
    shardnet_status st;
    if ((st = sn_ctl_graph(n, "body", &s.body)) != SHARDNET_OK)
        return st;
    if (own < 2)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "needs the inputs M and cond (either may be "
                             "empty)");
    s.ncarried = own - 2;
    if (s.body->ninputs != s.ncarried + 2 ||
        s.body->noutputs < s.ncarried + 1)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "the body has %zu inputs and %zu outputs; with "
                             "%zu loop-carried values it needs %zu inputs "
                             "and at least %zu outputs",
                             s.body->ninputs, s.body->noutputs, s.ncarried,
                             s.ncarried + 2, s.ncarried + 1);
    s.nscan = s.body->noutputs - 1 - s.ncarried;
    if (n->noutputs > s.ncarried + s.nscan)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "has %zu outputs; its body gives %zu",
                             n->noutputs, s.ncarried + s.nscan);
    if ((st = loop_bounds(L, n, &trip, &cond)) != SHARDNET_OK)
        return st;
    if (!(s.carried = calloc(s.ncarried + 1, sizeof *s.carried)))
        return sn_node_error(n, SHARDNET_OUT_OF_MEMORY, "out of memory");
    for (size_t k = 0; k < s.ncarried && st == SHARDNET_OK; k++) {
        const sn_rt *v = sn_in(L, n, 2 + k);
        if (!v)
            st = sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                               "loop-carried value %zu is missing", k);
        else
            st = sn_ctl_rt_set(n, &s.carried[k], v);
    }
    while (st == SHARDNET_OK && cond &&
           (trip < 0 || (int64_t)s.iters < trip)) {
        if (s.iters >= SN_CTL_MAX_UNROLL)
            st = sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                               "still running after the %d iterations "
                               "shardnet unrolls into a plan",
                               SN_CTL_MAX_UNROLL);
        else
            st = loop_iteration(L, n, &s, &cond);
    }
    if (st == SHARDNET_OK)
        st = loop_outputs(L, n, &s);
    loop_free(&s);
    return st;
}

