/* The graph IR: construction, queries, topological sort; see graph.h. */
#include <config.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/error.h"
#include "core/file.h"
#include "core/grow.h"
#include "ir/graph.h"

size_t sn_dtype_size(sn_dtype t)
{
    switch (t) {
    case SN_DT_FLOAT: return 4;
    case SN_DT_UINT8: return 1;
    case SN_DT_INT8: return 1;
    case SN_DT_UINT16: return 2;
    case SN_DT_INT16: return 2;
    case SN_DT_INT32: return 4;
    case SN_DT_INT64: return 8;
    case SN_DT_BOOL: return 1;
    case SN_DT_FLOAT16: return 2;
    case SN_DT_DOUBLE: return 8;
    case SN_DT_UINT32: return 4;
    case SN_DT_UINT64: return 8;
    case SN_DT_COMPLEX64: return 8;
    case SN_DT_COMPLEX128: return 16;
    case SN_DT_BFLOAT16: return 2;
    case SN_DT_UNDEFINED:
    case SN_DT_STRING:
        return 0;
    }
    return 0;
}

const char *sn_dtype_name(sn_dtype t)
{
    switch (t) {
    case SN_DT_UNDEFINED: return "undefined";
    case SN_DT_FLOAT: return "float";
    case SN_DT_UINT8: return "uint8";
    case SN_DT_INT8: return "int8";
    case SN_DT_UINT16: return "uint16";
    case SN_DT_INT16: return "int16";
    case SN_DT_INT32: return "int32";
    case SN_DT_INT64: return "int64";
    case SN_DT_STRING: return "string";
    case SN_DT_BOOL: return "bool";
    case SN_DT_FLOAT16: return "float16";
    case SN_DT_DOUBLE: return "double";
    case SN_DT_UINT32: return "uint32";
    case SN_DT_UINT64: return "uint64";
    case SN_DT_COMPLEX64: return "complex64";
    case SN_DT_COMPLEX128: return "complex128";
    case SN_DT_BFLOAT16: return "bfloat16";
    }
    /* ONNX's types past bfloat16, which shardnet does not hold */
    switch ((int)t) {
    case 17: return "float8e4m3fn";
    case 18: return "float8e4m3fnuz";
    case 19: return "float8e5m2";
    case 20: return "float8e5m2fnuz";
    case 21: return "uint4";
    case 22: return "int4";
    case 23: return "float4e2m1";
    }
    return "?";
}

int64_t sn_value_elements(const sn_value *v)
{
    int64_t n = 1;
    if (v->rank < 0 || v->rank > SHARDNET_MAX_DIMS)
        return -1;
    for (int i = 0; i < v->rank; i++) {
        if (v->dims[i] < 0)
            return -1;
        if (v->dims[i] && n > INT64_MAX / v->dims[i])
            return -1;
        n *= v->dims[i];
    }
    return n;
}

void sn_host_tensor_free(sn_host_tensor *t)
{
    if (!t)
        return;
    free(t->name);
    free(t->data);
    t->name = NULL;
    t->data = NULL;
    t->nbytes = 0;
}

/*
 * Name -> value index: open addressing with linear probing over a power of
 * two slots, at most half full.  It covers values[0, count); values appended
 * behind sn_graph_add_value's back are still found, by a linear scan.
 */
struct sn_name_index {
    int *slot; /* value index, or -1 */
    size_t cap;
    size_t count;
    uint64_t seed;
};

/*
 * FNV-1a from a per-graph seed, then a 64-bit finaliser (MurmurHash3's).
 * The seed comes from the address of the index (ASLR) and a counter, so a
 * model file cannot pick thousands of names that land in one slot and turn
 * every lookup into a scan.
 */
static size_t hash_name(uint64_t seed, const char *s)
{
    uint64_t h = 1469598103934665603u ^ seed;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211u;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdu;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53u;
    h ^= h >> 33;
    return (size_t)h;
}

static void index_put(struct sn_name_index *ix, const sn_value *values,
                      int vi)
{
    size_t mask = ix->cap - 1;
    size_t i = hash_name(ix->seed, values[vi].name) & mask;
    while (ix->slot[i] >= 0)
        i = (i + 1) & mask;
    ix->slot[i] = vi;
}

/* Make the index cover values[0, g->nvalues); 0, or -1 out of memory. */
static int index_update(sn_graph *g)
{
    struct sn_name_index *ix = g->name_index;
    if (!ix) {
        static _Atomic uint64_t graphs;
        ix = calloc(1, sizeof *ix);
        if (!ix)
            return -1;
        ix->seed = ((uint64_t)(uintptr_t)ix ^ (uint64_t)(uintptr_t)&graphs) *
                       0x9e3779b97f4a7c15u +
                   graphs++;
        g->name_index = ix;
    }
    if (ix->count > g->nvalues) /* cannot happen; start over */
        ix->count = 0, ix->cap = 0;
    if (g->nvalues * 2 > ix->cap) {
        size_t cap = ix->cap ? ix->cap : 64;
        int *slot;
        while (g->nvalues * 2 > cap)
            cap *= 2;
        slot = malloc(cap * sizeof *slot);
        if (!slot)
            return -1;
        free(ix->slot);
        ix->slot = slot;
        ix->cap = cap;
        memset(slot, 0xff, cap * sizeof *slot); /* all -1 */
        ix->count = 0;
    }
    for (; ix->count < g->nvalues; ix->count++)
        index_put(ix, g->values, (int)ix->count);
    return 0;
}

int sn_graph_find(const sn_graph *g, const char *name)
{
    const struct sn_name_index *ix = g->name_index;
    size_t from = 0;
    if (!name)
        return -1;
    if (ix && ix->cap) {
        size_t mask = ix->cap - 1, i = hash_name(ix->seed, name) & mask;
        for (; ix->slot[i] >= 0; i = (i + 1) & mask)
            if (strcmp(g->values[ix->slot[i]].name, name) == 0)
                return ix->slot[i];
        from = ix->count;
    }
    for (size_t v = from; v < g->nvalues; v++)
        if (strcmp(g->values[v].name, name) == 0)
            return (int)v;
    return -1;
}

sn_graph *sn_graph_new(void)
{
    sn_graph *g = calloc(1, sizeof *g);
    if (!g) {
        sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory creating a graph");
        return NULL;
    }
    static unsigned long next_id;
    g->opset = 0;
    g->id = __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED);
    return g;
}

static void free_attr(sn_attr *a)
{
    sn_graph_free(a->graph);
    free(a->name);
    free(a->s);
    free(a->ints);
    free(a->floats);
    if (a->strings)
        for (size_t i = 0; i < a->count; i++)
            free(a->strings[i]);
    free(a->strings);
}

/* What node n owns (not n itself). */
static void free_node(sn_node *n)
{
    free(n->name);
    free(n->op_type);
    free(n->domain);
    free(n->inputs);
    free(n->outputs);
    for (size_t a = 0; a < n->nattrs; a++)
        free_attr(&n->attrs[a]);
    free(n->attrs);
}

void sn_graph_free(sn_graph *g)
{
    if (!g)
        return;
    /* A subgraph shared by copies of its attribute goes with the last. */
    if (__atomic_fetch_sub(&g->refs, 1, __ATOMIC_ACQ_REL) > 0)
        return;
    for (size_t i = 0; i < g->nvalues; i++) {
        sn_value *v = &g->values[i];
        free(v->name);
        for (int d = 0; d < SHARDNET_MAX_DIMS; d++)
            free(v->dim_param[d]);
        free(v->owned);
    }
    free(g->values);
    for (size_t i = 0; i < g->nnodes; i++)
        free_node(&g->nodes[i]);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    free(g->outer);
    free(g->producer);
    for (size_t i = 0; i < g->nmaps; i++)
        if (g->maps[i].addr && g->maps[i].len) {
            sn_forget_file_pages(g->maps[i].addr, g->maps[i].len);
            munmap(g->maps[i].addr, g->maps[i].len);
        }
    free(g->maps);
    if (g->name_index)
        free(g->name_index->slot);
    free(g->name_index);
    free(g);
}

/* Room in *arr (of *cap elements of size sz, n of them in use) for one
 * more: the new element, zeroed; NULL when out of memory. */
static void *grow_one(void **arr, size_t *cap, size_t n, size_t sz)
{
    void *p = sn_grow(*arr, cap, n, sz, 16);
    if (!p)
        return NULL;
    *arr = p;
    p = (char *)p + n * sz;
    memset(p, 0, sz);
    return p;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

int sn_graph_add_value(sn_graph *g, const char *name)
{
    sn_value *v;
    if (!name)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "value without a name"), -1;
    if (sn_graph_find(g, name) >= 0) {
        sn_error(SHARDNET_INVALID_ARGUMENT, "value '%s' defined twice", name);
        return -1;
    }
    if (g->nvalues >= INT_MAX - 1) {
        sn_error(SHARDNET_INVALID_ARGUMENT, "too many values");
        return -1;
    }
    v = grow_one((void **)&g->values, &g->cap_values, g->nvalues, sizeof *v);
    if (!v)
        goto oom;
    v->name = dup_str(name);
    if (!v->name)
        goto oom;
    v->dtype = SN_DT_UNDEFINED;
    v->rank = -1;
    for (int d = 0; d < SHARDNET_MAX_DIMS; d++)
        v->dims[d] = -1;
    v->producer = -1;
    g->nvalues++;
    if (index_update(g) < 0) {
        g->nvalues--;
        free(v->name);
        goto oom;
    }
    return (int)g->nvalues - 1;
oom:
    sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory adding value '%s'", name);
    return -1;
}

static int *dup_ints(const int *a, size_t n, int *ok)
{
    int *d;
    *ok = 1;
    if (!n)
        return NULL;
    d = malloc(n * sizeof *d);
    if (!d) {
        *ok = 0;
        return NULL;
    }
    memcpy(d, a, n * sizeof *d);
    return d;
}

/* Every value a node refers to in range (-1: an omitted input or output);
 * -1 with the error set. */
static int check_refs(const sn_graph *g, const char *name,
                      const char *op_type, const int *inputs, size_t ninputs,
                      const int *outputs, size_t noutputs)
{
    for (size_t i = 0; i < ninputs + noutputs; i++) {
        int v = i < ninputs ? inputs[i] : outputs[i - ninputs];
        if (v < -1 || v >= (int)g->nvalues) {
            sn_error(SHARDNET_INVALID_ARGUMENT,
                     "node '%s' (%s): %s %zu refers to value %d, out of range",
                     name ? name : "", op_type, i < ninputs ? "input" : "output",
                     i < ninputs ? i : i - ninputs, v);
            return -1;
        }
    }
    return 0;
}

int sn_graph_add_node(sn_graph *g, const char *name, const char *op_type,
                      const char *domain, const int *inputs, size_t ninputs,
                      const int *outputs, size_t noutputs)
{
    sn_node *n;
    int ok_in, ok_out;
    if (!op_type)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "node without op_type"), -1;
    if (check_refs(g, name, op_type, inputs, ninputs, outputs, noutputs) < 0)
        return -1;
    if (g->nnodes >= SN_MAX_NODES) {
        sn_error(SHARDNET_INVALID_ARGUMENT, "more than %d nodes",
                 SN_MAX_NODES);
        return -1;
    }
    n = grow_one((void **)&g->nodes, &g->cap_nodes, g->nnodes, sizeof *n);
    if (!n)
        goto oom;
    if (name && *name) {
        n->name = dup_str(name);
    } else {
        size_t len = strlen(op_type) + 24;
        n->name = malloc(len);
        if (n->name)
            snprintf(n->name, len, "%s#%zu", op_type, g->nnodes);
    }
    n->op_type = dup_str(op_type);
    n->domain = dup_str(domain ? domain : "");
    n->inputs = dup_ints(inputs, ninputs, &ok_in);
    n->outputs = dup_ints(outputs, noutputs, &ok_out);
    n->ninputs = ninputs;
    n->noutputs = noutputs;
    if (!n->name || !n->op_type || !n->domain || !ok_in || !ok_out) {
        free_node(n);
        goto oom;
    }
    return (int)g->nnodes++;
oom:
    sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory adding node '%s' (%s)",
             name ? name : "", op_type);
    return -1;
}

void sn_value_drop_pages(const sn_value *v)
{
    if (v->flags & SN_VALUE_MAPPED)
        sn_drop_file_pages(v->data, v->nbytes);
}

void sn_value_prefetch_pages(const sn_value *v)
{
    if (v->flags & SN_VALUE_MAPPED)
        sn_prefetch_file_pages(v->data, v->nbytes);
}

void sn_value_wait_pages(const sn_value *v)
{
    if (v->flags & SN_VALUE_MAPPED)
        sn_wait_file_pages(v->data, v->nbytes);
}

int sn_graph_add_mapping(sn_graph *g, void *addr, size_t len)
{
    sn_mapping *m = realloc(g->maps, (g->nmaps + 1) * sizeof *m);
    if (!m) {
        sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory recording a mapping");
        return -1;
    }
    g->maps = m;
    m[g->nmaps].addr = addr;
    m[g->nmaps].len = len;
    g->nmaps++;
    return 0;
}

const sn_attr *sn_node_attr(const sn_node *n, const char *name)
{
    for (size_t i = 0; i < n->nattrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0)
            return &n->attrs[i];
    return NULL;
}

sn_attr *sn_node_add_attr(sn_node *n, const char *name, sn_attr_type type)
{
    sn_attr *a;
    if (sn_node_attr(n, name)) {
        sn_error(SHARDNET_INVALID_ARGUMENT,
                 "node '%s' (%s): attribute '%s' given twice", n->name,
                 n->op_type, name);
        return NULL;
    }
    a = realloc(n->attrs, (n->nattrs + 1) * sizeof *a);
    if (!a) {
        sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory adding attribute");
        return NULL;
    }
    n->attrs = a;
    a = &n->attrs[n->nattrs];
    memset(a, 0, sizeof *a);
    a->name = dup_str(name);
    if (!a->name) {
        sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory adding attribute");
        return NULL;
    }
    a->type = type;
    a->tensor = -1;
    n->nattrs++;
    return a;
}

size_t sn_node_implicit_inputs(const sn_node *n)
{
    size_t k = 0;
    for (size_t i = 0; i < n->nattrs; i++)
        if (n->attrs[i].type == SN_ATTR_GRAPH && n->attrs[i].graph)
            k += n->attrs[i].graph->nouter;
    return k <= n->ninputs ? k : n->ninputs;
}

sn_graph *sn_node_graph(const sn_node *n, const char *name)
{
    const sn_attr *a = sn_node_attr(n, name);
    return a && a->type == SN_ATTR_GRAPH ? a->graph : NULL;
}

int64_t sn_attr_int(const sn_node *n, const char *name, int64_t dflt)
{
    const sn_attr *a = sn_node_attr(n, name);
    return a && a->type == SN_ATTR_INT ? a->i : dflt;
}

float sn_attr_float(const sn_node *n, const char *name, float dflt)
{
    const sn_attr *a = sn_node_attr(n, name);
    return a && a->type == SN_ATTR_FLOAT ? a->f : dflt;
}

const char *sn_attr_string(const sn_node *n, const char *name,
                           const char *dflt)
{
    const sn_attr *a = sn_node_attr(n, name);
    return a && a->type == SN_ATTR_STRING && a->s ? a->s : dflt;
}

/* Min-heap of node indices: the ready node that came first in the file
 * goes first, which keeps an already sorted graph as it is. */
static void heap_push(int *h, size_t *n, int v)
{
    size_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

static int heap_pop(int *h, size_t *n)
{
    int top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1] < h[c])
            c++;
        if (h[c] >= last)
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n)
        h[i] = last;
    return top;
}

/* The work arrays of sn_graph_sort(), indexed by file order. */
typedef struct sort_work {
    int *prod;     /* (nvalues) producing node of each value, or -1 */
    int *indeg;    /* (nnodes + 1) inputs produced by nodes not yet placed */
    size_t *first; /* (nnodes + 1) edges of node i: first[i] to first[i+1] */
    size_t *fill;  /* (nnodes) next free edge of node i while filling */
    int *edges;    /* (nedges) consumer of each edge */
    size_t nedges;
    int *heap;     /* (nnodes) ready nodes */
    int *order;    /* (nnodes) the sorted order */
} sort_work;

/* Every node's value references in range, and the node producing each
 * value: one at most, never for a graph input or an initializer. */
static shardnet_status find_producers(const sn_graph *g, int *prod)
{
    for (size_t v = 0; v < g->nvalues; v++)
        prod[v] = -1;
    for (size_t i = 0; i < g->nnodes; i++) {
        const sn_node *n = &g->nodes[i];
        if (check_refs(g, n->name, n->op_type, n->inputs, n->ninputs,
                       n->outputs, n->noutputs) < 0)
            return SHARDNET_INVALID_ARGUMENT;
        if (n->dead)
            continue;
        for (size_t k = 0; k < n->noutputs; k++) {
            int v = n->outputs[k];
            const sn_value *val;
            if (v < 0)
                continue;
            val = &g->values[v];
            if (prod[v] >= 0) {
                const sn_node *o = &g->nodes[prod[v]];
                return sn_error(SHARDNET_INVALID_ARGUMENT,
                                "value '%s' is produced twice: by node '%s' "
                                "(%s) and by node '%s' (%s)",
                                val->name, o->name, o->op_type, n->name,
                                n->op_type);
            }
            if (val->flags & (SN_VALUE_INPUT | SN_VALUE_CONST))
                return sn_error(SHARDNET_INVALID_ARGUMENT,
                                "node '%s' (%s): output '%s' is also %s",
                                n->name, n->op_type, val->name,
                                val->flags & SN_VALUE_INPUT
                                    ? "a graph input"
                                    : "an initializer (constant)");
            prod[v] = (int)i;
        }
    }
    return SHARDNET_OK;
}

/* Whether value v has a source: a node, a graph input, an initializer or
 * (in a subgraph) an enclosing graph. */
static int has_source(const sn_graph *g, const int *prod, int v)
{
    return prod[v] >= 0 ||
           (g->values[v].flags &
            (SN_VALUE_INPUT | SN_VALUE_CONST | SN_VALUE_OUTER));
}

/* The edges producer -> consumer counted (one per input, in w->first and
 * w->indeg); every input and graph output must have a source. */
static shardnet_status count_edges(const sn_graph *g, sort_work *w)
{
    for (size_t i = 0; i < g->nnodes; i++) {
        const sn_node *n = &g->nodes[i];
        if (n->dead)
            continue;
        for (size_t k = 0; k < n->ninputs; k++) {
            int v = n->inputs[k];
            if (v < 0)
                continue;
            if (!has_source(g, w->prod, v))
                return sn_error(SHARDNET_INVALID_ARGUMENT,
                                "node '%s' (%s): input '%s' is not produced "
                                "by any node, nor a graph input or "
                                "initializer",
                                n->name, n->op_type, g->values[v].name);
            if (w->prod[v] >= 0) {
                w->first[w->prod[v] + 1]++;
                w->indeg[i]++;
                w->nedges++;
            }
        }
    }
    for (size_t i = 0; i < g->noutputs; i++) {
        int v = g->outputs[i];
        if (v < 0 || v >= (int)g->nvalues)
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "graph output %zu refers to value %d, out of "
                            "range", i, v);
        if (!has_source(g, w->prod, v))
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "graph output '%s' is not produced by any node, "
                            "nor a graph input or initializer",
                            g->values[v].name);
    }
    return SHARDNET_OK;
}

/* The edges in compressed rows: node i's consumers at first[i] on. */
static int fill_edges(const sn_graph *g, sort_work *w)
{
    size_t nn = g->nnodes;
    for (size_t i = 0; i < nn; i++)
        w->first[i + 1] += w->first[i];
    w->edges = malloc((w->nedges ? w->nedges : 1) * sizeof *w->edges);
    if (!w->edges)
        return -1;
    memcpy(w->fill, w->first, nn * sizeof *w->fill);
    for (size_t i = 0; i < nn; i++) {
        const sn_node *n = &g->nodes[i];
        if (n->dead)
            continue;
        for (size_t k = 0; k < n->ninputs; k++) {
            int v = n->inputs[k];
            if (v >= 0 && w->prod[v] >= 0)
                w->edges[w->fill[w->prod[v]]++] = (int)i;
        }
    }
    return 0;
}

/* Kahn's algorithm over the live nodes, in w->order; how many it placed. */
static size_t kahn(const sn_graph *g, sort_work *w)
{
    size_t nheap = 0, done = 0;
    for (size_t i = 0; i < g->nnodes; i++)
        if (!g->nodes[i].dead && w->indeg[i] == 0)
            heap_push(w->heap, &nheap, (int)i);
    while (nheap) {
        int i = heap_pop(w->heap, &nheap);
        w->order[done++] = i;
        for (size_t e = w->first[i]; e < w->first[i + 1]; e++)
            if (--w->indeg[w->edges[e]] == 0)
                heap_push(w->heap, &nheap, w->edges[e]);
    }
    return done;
}

/* The error for a graph whose live nodes could not all be placed.  Every
 * node left waits on another node left: walking back through them as many
 * steps as there are live nodes ends on a cycle. */
static shardnet_status cycle_error(const sn_graph *g, const sort_work *w,
                                   size_t live)
{
    int cur = -1;
    for (size_t i = 0; i < g->nnodes && cur < 0; i++)
        if (!g->nodes[i].dead && w->indeg[i] > 0)
            cur = (int)i;
    for (size_t step = 0; step < live; step++) {
        const sn_node *n = &g->nodes[cur];
        for (size_t k = 0; k < n->ninputs; k++) {
            int v = n->inputs[k];
            if (v >= 0 && w->prod[v] >= 0 && w->indeg[w->prod[v]] > 0) {
                cur = w->prod[v];
                break;
            }
        }
    }
    return sn_error(SHARDNET_INVALID_ARGUMENT,
                    "graph has a cycle through node '%s' (%s)",
                    g->nodes[cur].name, g->nodes[cur].op_type);
}

/* The nodes put in w->order, and each value's producer set anew. */
static int reorder(sn_graph *g, const int *order)
{
    size_t nn = g->nnodes;
    sn_node *sorted = malloc((nn ? nn : 1) * sizeof *sorted);
    if (!sorted)
        return -1;
    for (size_t k = 0; k < nn; k++)
        sorted[k] = g->nodes[order[k]];
    if (nn)
        memcpy(g->nodes, sorted, nn * sizeof *sorted);
    free(sorted);
    for (size_t v = 0; v < g->nvalues; v++)
        g->values[v].producer = -1;
    for (size_t k = 0; k < nn; k++) {
        const sn_node *n = &g->nodes[k];
        if (n->dead)
            continue;
        for (size_t j = 0; j < n->noutputs; j++)
            if (n->outputs[j] >= 0)
                g->values[n->outputs[j]].producer = (int)k;
    }
    return 0;
}

shardnet_status sn_graph_sort(sn_graph *g)
{
    size_t nn = g->nnodes, nv = g->nvalues, done, live = 0;
    sort_work w = {0};
    shardnet_status st = SHARDNET_OK;

    if (nn > INT_MAX || nv > INT_MAX)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "graph too large");
    w.prod = malloc((nv ? nv : 1) * sizeof *w.prod);
    w.indeg = calloc(nn + 1, sizeof *w.indeg);
    w.first = calloc(nn + 1, sizeof *w.first);
    w.fill = malloc((nn ? nn : 1) * sizeof *w.fill);
    w.heap = malloc((nn ? nn : 1) * sizeof *w.heap);
    w.order = malloc((nn ? nn : 1) * sizeof *w.order);
    if (!w.prod || !w.indeg || !w.first || !w.fill || !w.heap || !w.order)
        goto oom;

    if ((st = find_producers(g, w.prod)) != SHARDNET_OK ||
        (st = count_edges(g, &w)) != SHARDNET_OK)
        goto out;
    if (fill_edges(g, &w) < 0)
        goto oom;
    done = kahn(g, &w);
    for (size_t i = 0; i < nn; i++)
        live += !g->nodes[i].dead;
    if (done < live) {
        st = cycle_error(g, &w, live);
        goto out;
    }
    for (size_t i = 0; i < nn; i++)
        if (g->nodes[i].dead)
            w.order[done++] = (int)i;
    if (reorder(g, w.order) < 0)
        goto oom;
    goto out;

oom:
    st = sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory sorting the graph");
out:
    free(w.prod);
    free(w.indeg);
    free(w.first);
    free(w.fill);
    free(w.edges);
    free(w.heap);
    free(w.order);
    return st;
}

int sn_attr_copy(sn_attr *d, const sn_attr *a, const int *map)
{
    memset(d, 0, sizeof *d);
    d->name = strdup(a->name);
    d->type = a->type;
    d->i = a->i;
    d->f = a->f;
    d->count = a->count;
    d->tensor = a->tensor >= 0 ? map[a->tensor] : -1;
    if ((d->graph = a->graph))
        __atomic_add_fetch(&d->graph->refs, 1, __ATOMIC_ACQ_REL);
    if (!d->name || (a->s && !(d->s = strdup(a->s))))
        return 0;
    if (a->ints) {
        if (!(d->ints = malloc(a->count * sizeof *d->ints + 1)))
            return 0;
        memcpy(d->ints, a->ints, a->count * sizeof *d->ints);
    }
    if (a->floats) {
        if (!(d->floats = malloc(a->count * sizeof *d->floats + 1)))
            return 0;
        memcpy(d->floats, a->floats, a->count * sizeof *d->floats);
    }
    if (a->strings) {
        if (!(d->strings = calloc(a->count + 1, sizeof *d->strings)))
            return 0;
        for (size_t i = 0; i < a->count; i++)
            if (a->strings[i] && !(d->strings[i] = strdup(a->strings[i])))
                return 0;
    }
    return 1;
}
