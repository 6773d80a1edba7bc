/*
 * ONNX import: a ModelProto file becomes an sn_graph.
 *
 * Why our own protobuf reader (lib/import/pbwire.c) and not protobuf-c or the
 * generated C++ code: weights must not be copied more than once on the
 * host.  The model file is mapped read-only and the raw_data of each
 * initializer is referenced where it lies in the mapping (sn_value.data
 * points into it, owned = NULL); external-data files are mapped the same
 * way.  protobuf-c unpacks a message by copying every bytes field into an
 * allocation of its own, so a 2 GB model would cost 2 GB more memory and a
 * full copy before the first kernel runs.  The wire format is small (four
 * wire types), and reading only the fields we use, checking each length
 * against what remains, keeps a hostile file from steering an allocation.
 * Only values that need converting are copied (typed repeated fields,
 * Constant attributes given as value_float & co.).
 *
 * Order of work in a graph: initializers, then inputs (those that are also
 * initializers are constants, as IR < 4 models list them in both), nodes
 * (values named by nodes are created on first sight, so the file's node
 * order does not matter), outputs, and last the value_info type hints.
 * Names that nothing defines are caught by sn_graph_sort(), not here.
 *
 * This file reads the ModelProto and GraphProto and holds the entry points;
 * onnx_node.c reads the nodes and their attributes, onnx_files.c maps the
 * files (the model's and its external data's).  import/onnx_read.h holds
 * what they share.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/error.h"
#include "import/onnx_read.h"
#include "import/onnx.h"

/* Opsets 1 to 6 load too: the lowerings (lib/ops*.c) read the old operator
 * versions' forms (broadcast and axis of the arithmetic and of Gemm, Cast's
 * type names, Reshape's shape and Split's split attributes, Concat's default
 * axis); consumed_inputs, and the is_test of Dropout and BatchNormalization
 * (inference either way), are ignored. */
#define OPSET_MIN 1
#define OPSET_MAX 23

/* ModelProto */
enum { MP_IR_VERSION = 1, MP_PRODUCER = 2, MP_GRAPH = 7, MP_OPSET = 8 };
/* GraphProto */
enum {
    GP_NODE = 1,
    GP_NAME = 2,
    GP_INITIALIZER = 5,
    GP_INPUT = 11,
    GP_OUTPUT = 12,
    GP_VALUE_INFO = 13,
    GP_SPARSE_INITIALIZER = 15
};

/* A name from the file, NUL-terminated in c->name (valid until the next
 * call); NULL with error set when too long or holding a NUL byte. */
const char *sn_onnx_name_in(sn_onnx_ctx *c, const uint8_t *s, size_t n,
                            const char *what)
{
    if (n > SN_MAX_NAME) {
        sn_error(SHARDNET_INVALID_ARGUMENT, "%s is %zu bytes long (limit %d)",
                 what, n, SN_MAX_NAME);
        return NULL;
    }
    if (n && memchr(s, 0, n)) {
        sn_error(SHARDNET_INVALID_ARGUMENT, "%s contains a NUL byte", what);
        return NULL;
    }
    if (n)
        memcpy(c->name, s, n);
    c->name[n] = '\0';
    return c->name;
}

/* The value named name, created when new; -1 with error set. */
int sn_onnx_value_of(sn_onnx_ctx *c, const char *name)
{
    int v = sn_graph_find(c->g, name);
    return v >= 0 ? v : sn_graph_add_value(c->g, name);
}

/* A constant value named `name` holding tensor t; its index, or -1. */
int sn_onnx_tensor_value(sn_onnx_ctx *c, const sn_pb_tensor *t,
                         const char *name)
{
    sn_value *v;
    const void *data = NULL;
    void *owned = NULL;
    int vi;
    if (t->external) {
        shardnet_status st = sn_onnx_external_data(c, t, &data);
        if (st != SHARDNET_OK) {
            sn_error_prefix(st, "tensor '%s'", name);
            return -1;
        }
    } else if (t->has_raw) {
        data = t->nbytes ? t->raw : NULL; /* in place, never copied */
    } else if (t->typed_field && t->nbytes) {
        owned = malloc(t->nbytes);
        if (!owned) {
            sn_error(SHARDNET_OUT_OF_MEMORY,
                     "tensor '%s': out of memory for %zu bytes", name,
                     t->nbytes);
            return -1;
        }
        sn_pb_tensor_decode_typed(t, owned);
        data = owned;
    }
    vi = sn_graph_add_value(c->g, name);
    if (vi < 0) {
        free(owned);
        return -1;
    }
    v = &c->g->values[vi];
    v->dtype = t->dtype;
    v->rank = t->rank;
    for (int d = 0; d < t->rank; d++)
        v->dims[d] = t->dims[d];
    v->data = data;
    v->nbytes = t->nbytes;
    v->owned = owned;
    v->flags |= SN_VALUE_CONST;
    /* In place in a mapped file (not read into memory, nor the caller's
     * memory of a model loaded from memory, which notes no files). */
    if (data && !owned && !c->copy && c->files)
        v->flags |= SN_VALUE_MAPPED;
    return vi;
}

/* A value name no one has taken, starting from "<a>:<b>".  The parts are
 * cut short enough that the numbered suffix always fits, so the loop ends. */
const char *sn_onnx_fresh_name(sn_onnx_ctx *c, const char *a, const char *b)
{
    snprintf(c->name, sizeof c->name, "%.1500s:%.1500s", a, b);
    while (sn_graph_find(c->g, c->name) >= 0)
        snprintf(c->name, sizeof c->name, "%.1500s:%.1500s#%" PRIu64, a, b,
                 c->anon++);
    return c->name;
}

/*
 * TypeProto -> dtype and shape of value vi.  Only tensor types carry what
 * we use; sequences, maps and the like leave the value unknown.
 */
static shardnet_status apply_type(sn_onnx_ctx *c, int vi, const uint8_t *p,
                                  size_t n)
{
    sn_pb r, rt, rs, rd;
    sn_pb_field f, ft, fs, fd;
    const uint8_t *tensor = NULL, *shape = NULL;
    size_t tlen = 0, slen = 0, rank = 0;
    int64_t dims[SHARDNET_MAX_DIMS];
    char *params[SHARDNET_MAX_DIMS] = {0};
    uint64_t elem = 0;
    int rc, have_shape = 0;
    sn_value *v;

    sn_pb_init(&r, p, n);
    while ((rc = sn_pb_next(&r, &f)) > 0)
        if (f.num == 1) {
            if (sn_pb_expect(&f, SN_PB_LEN, "tensor_type") < 0)
                return SHARDNET_INVALID_ARGUMENT;
            tensor = f.data;
            tlen = f.len;
        }
    if (rc < 0)
        return SHARDNET_INVALID_ARGUMENT;
    if (!tensor)
        return SHARDNET_OK;
    sn_pb_init(&rt, tensor, tlen);
    while ((rc = sn_pb_next(&rt, &ft)) > 0) {
        if (ft.num == 1) {
            if (sn_pb_expect(&ft, SN_PB_VARINT, "elem_type") < 0)
                return SHARDNET_INVALID_ARGUMENT;
            elem = ft.u;
        } else if (ft.num == 2) {
            if (sn_pb_expect(&ft, SN_PB_LEN, "shape") < 0)
                return SHARDNET_INVALID_ARGUMENT;
            shape = ft.data;
            slen = ft.len;
            have_shape = 1;
        }
    }
    if (rc < 0)
        return SHARDNET_INVALID_ARGUMENT;

    if (have_shape) {
        sn_pb_init(&rs, shape, slen);
        while ((rc = sn_pb_next(&rs, &fs)) > 0) {
            int64_t dv = -1;
            const uint8_t *dp = NULL;
            size_t dplen = 0;
            if (fs.num != 1)
                continue;
            if (sn_pb_expect(&fs, SN_PB_LEN, "dim") < 0)
                goto fail;
            if (rank == SHARDNET_MAX_DIMS) {
                sn_error(SHARDNET_INVALID_ARGUMENT,
                         "shape has more than %d dimensions", SHARDNET_MAX_DIMS);
                goto fail;
            }
            sn_pb_init(&rd, fs.data, fs.len);
            while ((rc = sn_pb_next(&rd, &fd)) > 0) {
                if (fd.num == 1) {
                    if (sn_pb_expect(&fd, SN_PB_VARINT, "dim_value") < 0)
                        goto fail;
                    dv = (int64_t)fd.u;
                    dp = NULL;
                    if (dv < 0 || dv > SN_MAX_ELEMENTS) {
                        sn_error(SHARDNET_INVALID_ARGUMENT,
                                 "dimension %zu is %" PRId64
                                 " (must be 0 to 2^34)", rank, dv);
                        goto fail;
                    }
                } else if (fd.num == 2) {
                    if (sn_pb_expect(&fd, SN_PB_LEN, "dim_param") < 0)
                        goto fail;
                    dp = fd.data;
                    dplen = fd.len;
                    dv = -1;
                }
            }
            if (rc < 0)
                goto fail;
            dims[rank] = dv;
            if (dp) {
                params[rank] = sn_pb_strdup(dp, dplen, SN_MAX_NAME,
                                            "dim_param");
                if (!params[rank])
                    goto fail;
            }
            rank++;
        }
        if (rc < 0)
            goto fail;
    }

    v = &c->g->values[vi];
    if (elem >= 1 && elem <= SN_DT_BFLOAT16)
        v->dtype = (sn_dtype)elem;
    if (have_shape) {
        for (int d = 0; d < SHARDNET_MAX_DIMS; d++) {
            free(v->dim_param[d]);
            v->dim_param[d] = params[d];
            v->dims[d] = (size_t)d < rank ? dims[d] : -1;
        }
        v->rank = (int)rank;
    }
    return SHARDNET_OK;
fail:
    for (int d = 0; d < SHARDNET_MAX_DIMS; d++)
        free(params[d]);
    return SHARDNET_INVALID_ARGUMENT;
}

/* ValueInfoProto: its name (field 1) and type (field 2). */
static int value_info(const uint8_t *p, size_t n, const uint8_t **name,
                      size_t *nlen, const uint8_t **type, size_t *tlen)
{
    sn_pb r;
    sn_pb_field f;
    int rc;
    *name = *type = NULL;
    *nlen = *tlen = 0;
    sn_pb_init(&r, p, n);
    while ((rc = sn_pb_next(&r, &f)) > 0) {
        if (f.num == 1) {
            if (sn_pb_expect(&f, SN_PB_LEN, "name") < 0)
                return -1;
            *name = f.data;
            *nlen = f.len;
        } else if (f.num == 2) {
            if (sn_pb_expect(&f, SN_PB_LEN, "type") < 0)
                return -1;
            *type = f.data;
            *tlen = f.len;
        }
    }
    return rc;
}

/* The type hint vt of value vi applied; kind names it in the error. */
static shardnet_status hint_type(sn_onnx_ctx *c, int vi, const uint8_t *vt,
                                 size_t vt_len, const char *kind)
{
    if (apply_type(c, vi, vt, vt_len) == SHARDNET_OK)
        return SHARDNET_OK;
    return sn_error_prefix(SHARDNET_INVALID_ARGUMENT, "%s '%s'", kind,
                           c->g->values[vi].name);
}

/* Check the framing once, so that the passes over the fields cannot fail
 * on it, and count the inputs and outputs. */
static shardnet_status frame_graph(const uint8_t *p, size_t n,
                                   size_t *ninputs, size_t *noutputs)
{
    sn_pb r;
    sn_pb_field f;
    int rc;
    *ninputs = *noutputs = 0;
    sn_pb_init(&r, p, n);
    while ((rc = sn_pb_next(&r, &f)) > 0) {
        switch (f.num) {
        case GP_NODE:
        case GP_INITIALIZER:
        case GP_INPUT:
        case GP_OUTPUT:
        case GP_VALUE_INFO:
        case GP_NAME:
            if (sn_pb_expect(&f, SN_PB_LEN, "graph field") < 0)
                return SHARDNET_INVALID_ARGUMENT;
            *ninputs += f.num == GP_INPUT;
            *noutputs += f.num == GP_OUTPUT;
            break;
        case GP_SPARSE_INITIALIZER:
            return sn_error(SHARDNET_UNSUPPORTED,
                            "sparse initializers are not supported");
        default:
            break;
        }
    }
    return rc < 0 ? SHARDNET_INVALID_ARGUMENT : SHARDNET_OK;
}

/* The k-th initializer: a constant value. */
static shardnet_status initializer(sn_onnx_ctx *c, const sn_pb_field *f,
                                   size_t k, const void *arg)
{
    sn_pb_tensor t;
    const char *tn;
    shardnet_status st = sn_pb_tensor_parse(f->data, f->len, &t);
    if (st != SHARDNET_OK)
        return sn_error_prefix(st, "initializer %zu", k);
    if (!t.name || !t.name_len)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "initializer %zu has no name", k);
    if (!(tn = sn_onnx_name_in(c, t.name, t.name_len, "initializer name")))
        return SHARDNET_INVALID_ARGUMENT;
    if (sn_graph_find(c->g, tn) >= 0)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "initializer '%s' is defined twice", tn);
    if (sn_onnx_tensor_value(c, &t, tn) < 0)
        return SHARDNET_INVALID_ARGUMENT;
    return SHARDNET_OK;
}

static shardnet_status graph_node(sn_onnx_ctx *c, const sn_pb_field *f,
                                  size_t k, const void *arg)
{
    (void)k; /* a node is numbered by the graph's count */
    return sn_onnx_parse_node(c, f->data, f->len, c->g->nnodes);
}

/* A graph input named name: a value bound at run time, unless an
 * initializer of that name made it a constant. */
static shardnet_status graph_input(sn_onnx_ctx *c, const char *name,
                                   const uint8_t *vt, size_t vt_len)
{
    sn_graph *g = c->g;
    int vi = sn_graph_find(g, name);
    if (vi >= 0 && (g->values[vi].flags & SN_VALUE_CONST))
        return SHARDNET_OK; /* an initializer: a constant, not bound */
    if (vi >= 0)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "graph input '%s' is listed twice", name);
    if ((vi = sn_graph_add_value(g, name)) < 0)
        return SHARDNET_INVALID_ARGUMENT;
    g->values[vi].flags |= SN_VALUE_INPUT;
    g->inputs[g->ninputs++] = vi;
    return vt ? hint_type(c, vi, vt, vt_len, "graph input") : SHARDNET_OK;
}

/* A graph output named name: a value the caller gets. */
static shardnet_status graph_output(sn_onnx_ctx *c, const char *name,
                                    const uint8_t *vt, size_t vt_len)
{
    sn_graph *g = c->g;
    int vi = sn_onnx_value_of(c, name);
    if (vi < 0)
        return SHARDNET_INVALID_ARGUMENT;
    g->values[vi].flags |= SN_VALUE_OUTPUT;
    g->outputs[g->noutputs++] = vi;
    if (vt && !(g->values[vi].flags & SN_VALUE_CONST))
        return hint_type(c, vi, vt, vt_len, "graph output");
    return SHARDNET_OK;
}

/* A value_info named name: a type hint. */
static shardnet_status value_hint(sn_onnx_ctx *c, const char *name,
                                  const uint8_t *vt, size_t vt_len)
{
    /* A hint for a name no node uses says nothing we need. */
    int vi = *name ? sn_graph_find(c->g, name) : -1;
    if (vi < 0 || !vt || (c->g->values[vi].flags & SN_VALUE_CONST))
        return SHARDNET_OK;
    return hint_type(c, vi, vt, vt_len, "value_info");
}

/* A graph's list of ValueInfoProto: kind names an entry in errors ("graph
 * input"), what its name ("input name"); named: an empty name is an error;
 * fn takes each entry's name (in the ctx's scratch) and type (vt, NULL when
 * it has none). */
typedef struct value_list {
    const char *kind, *what;
    int named;
    shardnet_status (*fn)(sn_onnx_ctx *c, const char *name,
                          const uint8_t *vt, size_t vt_len);
} value_list;

static const value_list graph_inputs = {"graph input", "input name", 1,
                                        graph_input};
static const value_list graph_outputs = {"graph output", "output name", 1,
                                         graph_output};
static const value_list value_hints = {"value_info", "value_info name", 0,
                                       value_hint};

/* The k-th entry f of the value_list arg. */
static shardnet_status value_field(sn_onnx_ctx *c, const sn_pb_field *f,
                                   size_t k, const void *arg)
{
    const value_list *l = arg;
    const uint8_t *vn, *vt;
    size_t vn_len, vt_len;
    const char *name;
    if (value_info(f->data, f->len, &vn, &vn_len, &vt, &vt_len) < 0 ||
        !(name = sn_onnx_name_in(c, vn, vn_len, l->what)))
        return sn_error_prefix(SHARDNET_INVALID_ARGUMENT, "%s %zu", l->kind,
                               k);
    if (l->named && !*name)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s %zu has no name",
                        l->kind, k);
    return l->fn(c, name, vt, vt_len);
}

/* fn on each field numbered num of message p, the k-th with k, and arg;
 * the first failure ends the pass. */
static shardnet_status each_field(sn_onnx_ctx *c, const uint8_t *p, size_t n,
                                  uint32_t num,
                                  shardnet_status (*fn)(sn_onnx_ctx *,
                                                        const sn_pb_field *,
                                                        size_t, const void *),
                                  const void *arg)
{
    sn_pb r;
    sn_pb_field f;
    size_t k = 0;
    shardnet_status st;
    sn_pb_init(&r, p, n);
    while (sn_pb_next(&r, &f) > 0)
        if (f.num == num && (st = fn(c, &f, k++, arg)) != SHARDNET_OK)
            return st;
    return SHARDNET_OK;
}

static shardnet_status parse_graph(sn_onnx_ctx *c, const uint8_t *p,
                                   size_t n)
{
    sn_graph *g = c->g;
    const uint8_t *gn;
    size_t gn_len, ninputs, noutputs;
    char label[200], b[160];
    shardnet_status st;

    if (sn_pb_peek_len(p, n, GP_NAME, &gn, &gn_len) && gn_len)
        snprintf(label, sizeof label, "graph '%s'",
                 sn_pb_printable(b, sizeof b, gn, gn_len));
    else
        snprintf(label, sizeof label, "graph");

    if ((st = frame_graph(p, n, &ninputs, &noutputs)) != SHARDNET_OK)
        goto fail;
    g->inputs = malloc((ninputs ? ninputs : 1) * sizeof *g->inputs);
    g->outputs = malloc((noutputs ? noutputs : 1) * sizeof *g->outputs);
    if (!g->inputs || !g->outputs) {
        st = sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
        goto fail;
    }
    if ((st = each_field(c, p, n, GP_INITIALIZER, initializer, NULL)) !=
            SHARDNET_OK ||
        (st = each_field(c, p, n, GP_INPUT, value_field, &graph_inputs)) !=
            SHARDNET_OK ||
        (st = each_field(c, p, n, GP_NODE, graph_node, NULL)) != SHARDNET_OK ||
        (st = each_field(c, p, n, GP_OUTPUT, value_field, &graph_outputs)) !=
            SHARDNET_OK ||
        (st = each_field(c, p, n, GP_VALUE_INFO, value_field, &value_hints)) !=
            SHARDNET_OK)
        goto fail;
    return SHARDNET_OK;

fail:
    return sn_error_prefix(st, "%s", label);
}

/* The values subgraph g reads from the graphs around it: those that no
 * node of g produces and that are neither its inputs nor constants. */
static shardnet_status find_outer(sn_graph *g)
{
    char *made = calloc(g->nvalues + 1, 1);
    if (!made)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < g->nnodes; i++)
        for (size_t k = 0; k < g->nodes[i].noutputs; k++)
            if (g->nodes[i].outputs[k] >= 0)
                made[g->nodes[i].outputs[k]] = 1;
    for (size_t v = 0; v < g->nvalues; v++) {
        sn_value *val = &g->values[v];
        int *o;
        if (made[v] || (val->flags & (SN_VALUE_INPUT | SN_VALUE_CONST)))
            continue;
        if (!(o = realloc(g->outer, (g->nouter + 1) * sizeof *o))) {
            free(made);
            return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
        }
        g->outer = o;
        g->outer[g->nouter++] = (int)v;
        val->flags |= SN_VALUE_OUTER;
    }
    free(made);
    return SHARDNET_OK;
}

shardnet_status sn_onnx_parse_subgraph(sn_onnx_ctx *c, const uint8_t *p,
                                       size_t n, sn_graph **out)
{
    sn_graph *sub, *around = c->g;
    shardnet_status st;
    *out = NULL;
    if (c->depth >= SN_MAX_GRAPH_DEPTH)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "subgraphs nest more than %d deep",
                        SN_MAX_GRAPH_DEPTH);
    if (!(sub = sn_graph_new()))
        return SHARDNET_OUT_OF_MEMORY;
    sub->opset = around->opset;
    sub->ir_version = around->ir_version;
    c->g = sub;
    c->depth++;
    st = parse_graph(c, p, n);
    if (st == SHARDNET_OK)
        st = find_outer(sub);
    if (st == SHARDNET_OK)
        st = sn_graph_sort(sub);
    c->depth--;
    c->g = around;
    if (st != SHARDNET_OK) {
        sn_graph_free(sub);
        return st;
    }
    *out = sub;
    return SHARDNET_OK;
}

static shardnet_status parse_model(sn_onnx_ctx *c, const uint8_t *p,
                                   size_t n)
{
    sn_graph *g = c->g;
    sn_pb r, ro;
    sn_pb_field f, fo;
    const uint8_t *graph = NULL;
    size_t graph_len = 0;
    int64_t opset = -1;
    int rc;

    sn_pb_init(&r, p, n);
    while ((rc = sn_pb_next(&r, &f)) > 0) {
        switch (f.num) {
        case MP_IR_VERSION:
            if (sn_pb_expect(&f, SN_PB_VARINT, "ir_version") < 0)
                goto fail;
            g->ir_version = (int64_t)f.u;
            break;
        case MP_PRODUCER:
            if (sn_pb_expect(&f, SN_PB_LEN, "producer_name") < 0)
                goto fail;
            free(g->producer);
            g->producer = sn_pb_strdup(f.data, f.len, SN_MAX_NAME,
                                       "producer_name");
            if (!g->producer)
                goto fail;
            break;
        case MP_GRAPH:
            if (sn_pb_expect(&f, SN_PB_LEN, "graph") < 0)
                goto fail;
            graph = f.data;
            graph_len = f.len;
            break;
        case MP_OPSET: {
            const uint8_t *dom = NULL;
            size_t dom_len = 0;
            int64_t version = 0;
            if (sn_pb_expect(&f, SN_PB_LEN, "opset_import") < 0)
                goto fail;
            sn_pb_init(&ro, f.data, f.len);
            while ((rc = sn_pb_next(&ro, &fo)) > 0) {
                if (fo.num == 1) {
                    if (sn_pb_expect(&fo, SN_PB_LEN, "domain") < 0)
                        goto fail;
                    dom = fo.data;
                    dom_len = fo.len;
                } else if (fo.num == 2) {
                    if (sn_pb_expect(&fo, SN_PB_VARINT, "version") < 0)
                        goto fail;
                    version = (int64_t)fo.u;
                }
            }
            if (rc < 0) {
                sn_error_prefix(SHARDNET_INVALID_ARGUMENT, "opset_import");
                goto fail;
            }
            if (dom_len == 0 ||
                (dom_len == 7 && memcmp(dom, "ai.onnx", 7) == 0)) {
                if (opset >= 0 && opset != version) {
                    sn_error(SHARDNET_INVALID_ARGUMENT,
                             "opset_import names the default domain twice "
                             "(opsets %" PRId64 " and %" PRId64 ")",
                             opset, version);
                    goto fail;
                }
                opset = version;
            }
            break;
        }
        default:
            break;
        }
    }
    if (rc < 0)
        goto fail;
    if (opset < 0) {
        sn_error(SHARDNET_INVALID_ARGUMENT,
                 "no opset_import for the default ONNX domain");
        goto fail;
    }
    if (opset < OPSET_MIN || opset > OPSET_MAX) {
        sn_error(SHARDNET_UNSUPPORTED,
                 "opset %" PRId64 " of the default ONNX domain is not "
                 "supported (supported: %d to %d)",
                 opset, OPSET_MIN, OPSET_MAX);
        return sn_error_prefix(SHARDNET_UNSUPPORTED, "model");
    }
    g->opset = opset;
    if (!graph) {
        sn_error(SHARDNET_INVALID_ARGUMENT, "no graph");
        goto fail;
    }
    return parse_graph(c, graph, graph_len);
fail:
    return sn_error_prefix(SHARDNET_INVALID_ARGUMENT, "model");
}

static shardnet_status load(sn_graph *g, const void *data, size_t len,
                            const char *base_dir, int copy,
                            sn_model_file **files, size_t *nfiles)
{
    sn_onnx_ctx *c = calloc(1, sizeof *c);
    shardnet_status st;
    if (!c)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
    c->g = c->root = g;
    c->base_dir = base_dir;
    c->copy = copy;
    c->files = files;
    c->nfiles = nfiles;
    st = parse_model(c, data, len);
    for (size_t i = 0; i < c->next; i++)
        free(c->ext[i].location);
    free(c->ext);
    free(c->real_dir);
    free(c);
    return st;
}

shardnet_status sn_onnx_load_memory(const void *data, size_t len,
                                    const char *base_dir, sn_graph **out)
{
    sn_graph *g;
    shardnet_status st;
    if (!out)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "no place for the graph");
    *out = NULL;
    if (!data && len)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "no model data");
    if (!(g = sn_graph_new()))
        return SHARDNET_OUT_OF_MEMORY;
    st = load(g, data, len, base_dir, 0, NULL, NULL);
    if (st != SHARDNET_OK) {
        sn_graph_free(g);
        return st;
    }
    *out = g;
    return SHARDNET_OK;
}

shardnet_status sn_onnx_load(const char *path, sn_graph **out)
{
    sn_model_file *files = NULL;
    size_t nfiles = 0;
    shardnet_status st = sn_onnx_load_file(path, 0, out, &files, &nfiles);
    sn_model_files_free(files, nfiles);
    return st;
}

shardnet_status sn_onnx_load_file(const char *path, int copy, sn_graph **out,
                                  sn_model_file **files, size_t *nfiles)
{
    sn_graph *g = NULL;
    void *addr;
    size_t len;
    char *dir;
    const char *slash;
    shardnet_status st;

    if (!out || !path || !files || !nfiles)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "no path or no out");
    *out = NULL;
    *files = NULL;
    *nfiles = 0;
    st = sn_onnx_map_model(path, copy, &addr, &len, files, nfiles);
    if (st != SHARDNET_OK) {
        sn_model_files_free(*files, *nfiles);
        *files = NULL;
        *nfiles = 0;
        return st;
    }
    if (!(g = sn_graph_new())) {
        munmap(addr, len);
        st = SHARDNET_OUT_OF_MEMORY;
        goto fail;
    }
    if (sn_graph_add_mapping(g, addr, len) < 0) {
        munmap(addr, len);
        st = SHARDNET_OUT_OF_MEMORY;
        goto fail;
    }
    /* External data lives beside the model. */
    slash = strrchr(path, '/');
    if (!slash) {
        dir = strdup(".");
    } else {
        size_t n = slash == path ? 1 : (size_t)(slash - path);
        dir = malloc(n + 1);
        if (dir) {
            memcpy(dir, path, n);
            dir[n] = '\0';
        }
    }
    if (!dir) {
        st = sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
        goto fail;
    }
    st = load(g, addr, len, dir, copy, files, nfiles);
    free(dir);
    if (st != SHARDNET_OK) {
        sn_error_prefix(st, "%s", path);
        goto fail;
    }
    *out = g;
    return SHARDNET_OK;
fail:
    sn_graph_free(g);
    sn_model_files_free(*files, *nfiles);
    *files = NULL;
    *nfiles = 0;
    return st;
}
