/* Building plans: a graph lowered, node by node, for the shapes (and the
 * small host values) of its inputs, into the steps of one device program
 * (see exec.h for the model); the plans of recent input shapes kept in a
 * cache; what a plan tells about itself, and freeing it.  The lowering
 * API the operators call is lower.c, the arena arena.c, running run.c. */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"
#include "exec/exec_impl.h"

/* Float inputs of at most this many elements are known on the host too. */
#define SMALL_INPUT 64

static void copy_binding(sn_binding *dst, const sn_binding *src)
{
    *dst = *src;
    dst->data = NULL;
}

/* The graph's constants, known on the host. */
static void bind_constants(sn_plan *p)
{
    sn_graph *g = p->g;
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
}

/* Whether the data b given for input v agrees with what the graph says of
 * it; *bt: its element type (16-bit floats arrive as their bits, the ONNX
 * test data stores bfloat16 as uint16), *count its elements. */
static shardnet_status check_input(const sn_value *v, const sn_binding *b,
                                   sn_dtype *bt, size_t *count)
{
    if (!sn_check_dims(b->rank, b->dims, count) ||
        *count * sn_dtype_size(b->dtype) != b->nbytes)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "input '%s': shape and data size disagree", v->name);
    *bt = b->dtype;
    if (*bt == SN_DT_UINT16 &&
        (v->dtype == SN_DT_FLOAT16 || v->dtype == SN_DT_BFLOAT16))
        *bt = v->dtype;
    if (v->dtype != SN_DT_UNDEFINED && v->dtype != *bt)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "input '%s' is %s, but %s data was given", v->name,
                        sn_dtype_name(v->dtype), sn_dtype_name(b->dtype));
    if (v->rank >= 0) {
        if (v->rank != b->rank)
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "input '%s' has rank %d, but data of rank %d "
                            "was given",
                            v->name, v->rank, b->rank);
        for (int d = 0; d < v->rank; d++)
            if (v->dims[d] >= 0 && v->dims[d] != b->dims[d])
                return sn_error(SHARDNET_INVALID_ARGUMENT,
                                "input '%s': dimension %d is %lld, but "
                                "%lld was given",
                                v->name, d, (long long)v->dims[d],
                                (long long)b->dims[d]);
    }
    return SHARDNET_OK;
}

/* Input i, bound to b: floats are staged on the device, everything else
 * is a host value that shapes and indices may depend on. */
static shardnet_status bind_input(sn_plan *p, size_t i, const sn_binding *b)
{
    sn_graph *g = p->g;
    const sn_value *v = &g->values[g->inputs[i]];
    sn_rt *rt = &p->rt[g->inputs[i]];
    size_t count = 0;
    sn_dtype bt = b->dtype;
    shardnet_status st;
    if ((st = check_input(v, b, &bt, &count)) != SHARDNET_OK)
        return st;
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
            return sn_error(SHARDNET_OUT_OF_MEMORY, "input '%s'", v->name);
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
            (st = sn_plan_own_buffer(p, buf)) != SHARDNET_OK) {
            sn_buffer_free(buf);
            return st;
        }
        p->input_buf[i] = buf;
        rt->on_device = 1;
        rt->view = (sn_view){buf, 0};
    }
    return SHARDNET_OK;
}

/* Whether node n may be lowered by op: its input count, its required
 * inputs present, every input known. */
static shardnet_status check_node(const sn_lower *L, const sn_node *n,
                                  const sn_op_def *op)
{
    const sn_graph *g = L->g;
    if ((int)n->ninputs < op->min_inputs ||
        (int)n->ninputs > op->max_inputs)
        return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                             "%zu inputs; %s takes %d to %d", n->ninputs,
                             n->op_type, op->min_inputs, op->max_inputs);
    for (size_t i = 0; i < n->ninputs; i++) {
        if (n->inputs[i] < 0) {
            if ((int)i < op->min_inputs)
                return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                     "required input %zu is missing", i);
            continue;
        }
        if (!L->rt[n->inputs[i]].known)
            return sn_node_error(n, SHARDNET_INVALID_ARGUMENT,
                                 "input '%s' has no value",
                                 g->values[n->inputs[i]].name);
    }
    return SHARDNET_OK;
}

int sn_op_opset_matches(const sn_op_def *op, const sn_node *n, int64_t opset)
{
    if (n->domain[0] && strcmp(n->domain, "ai.onnx"))
        return 1;
    return opset >= op->since && (!op->until || opset <= op->until);
}

void sn_op_opsets(const sn_op_def *op, char *buf, size_t cap)
{
    if (op->until)
        snprintf(buf, cap, "%d to %d", op->since, op->until);
    else
        snprintf(buf, cap, "%d and later", op->since);
}

/*
 * A float16 or bfloat16 tensor on a device is its values rounded to that
 * type, carried as float (backend.h, ROUND_HALF): the device computes in
 * float, so a node's results of such a type, and its float results where
 * its first float input is of such a type, are rounded to it where made, in
 * place, and take the type, as ONNX Runtime computes such a node on a CPU
 * (in float, then cast back).  A view of an input (Reshape, or Cast's
 * relabel of a float16 to float) is left as it is; a Cast rounds on its
 * own (sn_cast_to).  A result the model declares float stays float (an
 * operator's result of a type of its own, as LayerNormalization's Mean).
 */
static int is_half(sn_dtype t)
{
    return t == SN_DT_FLOAT16 || t == SN_DT_BFLOAT16;
}

static shardnet_status round_half_results(sn_lower *L, const sn_node *n)
{
    /* the type of the first float input (not a QuantizedMatMul's halves:
     * its weights as stored, where its A is float) */
    sn_dtype half = SN_DT_UNDEFINED;
    if ((!n->domain[0] || !strcmp(n->domain, "ai.onnx")) &&
        (!strcmp(n->op_type, "Cast") || !strcmp(n->op_type, "CastLike")))
        return SHARDNET_OK; /* rounded as it casts */
    for (size_t i = 0; i < n->ninputs; i++) {
        const sn_rt *x = n->inputs[i] >= 0 ? &L->rt[n->inputs[i]] : NULL;
        if (x && (is_half(x->dtype) || x->dtype == SN_DT_FLOAT ||
                  x->dtype == SN_DT_DOUBLE)) {
            half = is_half(x->dtype) ? x->dtype : SN_DT_UNDEFINED;
            break;
        }
    }
    for (size_t o = 0; L->plan && o < n->noutputs; o++) {
        sn_rt *y = n->outputs[o] >= 0 ? &L->rt[n->outputs[o]] : NULL;
        int view_of_input = 0;
        if (!y || !y->known || !y->on_device || sn_rt_elements(y) == 0 ||
            !(is_half(y->dtype) || (half && y->dtype == SN_DT_FLOAT)))
            continue;
        const sn_dtype declared = L->g->values[n->outputs[o]].dtype;
        if (declared != SN_DT_UNDEFINED && !is_half(declared) &&
            !is_half(y->dtype))
            continue; /* the model says float */
        for (size_t i = 0; i < n->ninputs; i++) {
            const sn_rt *x = n->inputs[i] >= 0 ? &L->rt[n->inputs[i]] : NULL;
            view_of_input |= x && x->on_device && x->view.buf == y->view.buf;
        }
        if (view_of_input)
            continue;
        const sn_dtype t = is_half(y->dtype) ? y->dtype : half;
        shardnet_status st = sn_emit_round_half(L, n, t, sn_rt_elements(y),
                                                y->view, y->view);
        if (st != SHARDNET_OK)
            return st;
        y->dtype = t;
    }
    return SHARDNET_OK;
}

/* Node n lowered by its operator (found by ops), its graph outputs
 * produced. */
static shardnet_status lower_node(sn_lower *L, const sn_node *n,
                                  sn_op_lookup ops)
{
    const sn_graph *g = L->g;
    const sn_op_def *op = ops(n->domain, n->op_type);
    shardnet_status st;
    if (!op)
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "operator not supported");
    if (!sn_op_opset_matches(op, n, g->opset)) {
        char opsets[48];
        sn_op_opsets(op, opsets, sizeof opsets);
        return sn_node_error(n, SHARDNET_UNSUPPORTED,
                             "shardnet runs %s in opsets %s, not the "
                             "model's %lld",
                             n->op_type, opsets, (long long)g->opset);
    }
    if ((st = check_node(L, n, op)) != SHARDNET_OK ||
        (st = op->lower(L, n)) != SHARDNET_OK ||
        (st = round_half_results(L, n)) != SHARDNET_OK)
        return st;
    for (size_t i = 0; i < n->noutputs; i++) {
        if (n->outputs[i] >= 0 && !L->rt[n->outputs[i]].known &&
            (g->values[n->outputs[i]].flags & SN_VALUE_OUTPUT))
            return sn_node_error(n, SHARDNET_UNSUPPORTED,
                                 "output %zu ('%s') is not produced", i,
                                 g->values[n->outputs[i]].name);
    }
    return SHARDNET_OK;
}

/* The plan's values bound (constants, then the inputs), every live node
 * lowered, every graph output computed. */
static shardnet_status lower_graph(sn_plan *p, const sn_binding *inputs,
                                   sn_op_lookup ops)
{
    sn_graph *g = p->g;
    sn_lower L = {.g = g, .dev = p->dev, .plan = p, .rt = p->rt};
    shardnet_status st;
    bind_constants(p);
    for (size_t i = 0; i < g->ninputs; i++)
        if ((st = bind_input(p, i, &inputs[i])) != SHARDNET_OK)
            return st;
    for (size_t ni = 0; ni < g->nnodes; ni++)
        if (!g->nodes[ni].dead &&
            (st = lower_node(&L, &g->nodes[ni], ops)) != SHARDNET_OK)
            return st;
    for (size_t i = 0; i < g->noutputs; i++)
        if (!p->rt[g->outputs[i]].known)
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "graph output '%s' is never computed",
                            g->values[g->outputs[i]].name);
    return SHARDNET_OK;
}

shardnet_status sn_lower_subgraph(sn_lower *L, const sn_node *n,
                                  sn_graph *sub, sn_rt *rt, sn_op_lookup ops)
{
    sn_lower S = {.g = sub, .dev = L->dev, .plan = L->plan, .rt = rt,
                  .in_sub = 1,
                  .owner = L->in_sub ? L->owner : (int)(n - L->g->nodes)};
    shardnet_status st;
    for (size_t i = 0; i < sub->nvalues; i++) {
        const sn_value *v = &sub->values[i];
        if (!(v->flags & SN_VALUE_CONST) || rt[i].known)
            continue;
        rt[i].known = 1;
        rt[i].dtype = v->dtype;
        rt[i].rank = v->rank;
        memcpy(rt[i].dims, v->dims, sizeof rt[i].dims);
        rt[i].host = v->data ? v->data : "";
    }
    for (size_t ni = 0; ni < sub->nnodes; ni++)
        if (!sub->nodes[ni].dead &&
            (st = lower_node(&S, &sub->nodes[ni], ops)) != SHARDNET_OK)
            return st;
    return SHARDNET_OK;
}

shardnet_status sn_plan_build(sn_graph *g, sn_weights *w,
                              const sn_binding *inputs, sn_op_lookup ops,
                              sn_plan **out)
{
    sn_plan *p = calloc(1, sizeof *p);
    shardnet_status st;

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
    /* What this build will upload: the weights not on the device yet
     * (none on the shapes device: it uploads nothing). */
    for (size_t i = 0; i < g->nvalues && !sn_device_is_shapes(w->dev); i++)
        if ((g->values[i].flags & SN_VALUE_CONST) && !w->f32[i] &&
            !w->raw[i] && g->values[i].nbytes >= SN_PROGRESS_MIN)
            p->up_total += g->values[i].nbytes;
    /* Weights read in place are mapped ahead once the copies are made. */
    sn_prefetch_hold();
    st = lower_graph(p, inputs, ops);
    sn_prefetch_release();
    if (st != SHARDNET_OK || (st = sn_arena_finish(p)) != SHARDNET_OK)
        goto error;
    if (p->up_done && p->up_done < p->up_total) /* the stage's end */
        sn_progress(p->dev->config, &p->up_stamp, 1, p->up_total,
                    p->up_total, "uploading weights to %s",
                    p->dev->info.name);
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

int sn_same_shapes(const sn_binding *a, const sn_binding *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i].dtype != b[i].dtype || a[i].rank != b[i].rank ||
            memcmp(a[i].dims, b[i].dims,
                   (size_t)a[i].rank * sizeof a[i].dims[0]))
            return 0;
    return 1;
}

int sn_plan_matches(const sn_plan *p, const sn_binding *inputs)
{
    for (size_t i = 0; i < p->g->ninputs; i++) {
        const sn_binding *a = &p->bound[i], *b = &inputs[i];
        if (!sn_same_shapes(a, b, 1) || a->nbytes != b->nbytes)
            return 0;
        if (p->bound_data[i] && memcmp(p->bound_data[i], b->data, b->nbytes))
            return 0;
    }
    return 1;
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

void sn_plan_launches(const sn_plan *p, size_t *per_node)
{
    for (size_t i = 0; i < p->g->nnodes; i++)
        per_node[i] = 0;
    for (size_t s = 0; s < p->nsteps; s++)
        if (p->steps[s].kind < (int)SN_KERNEL_COUNT && p->steps[s].node >= 0 &&
            (size_t)p->steps[s].node < p->g->nnodes)
            per_node[p->steps[s].node]++;
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
        sn_staging_free(p->outputs[i].data); /* run.c's */
    free(p->outputs);
    free(p);
}
