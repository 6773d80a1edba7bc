/*
 * ONNX NodeProto and AttributeProto: a node of the graph with its inputs,
 * outputs and attributes (lib/import/onnx.c reads the graph around it).
 * A tensor attribute becomes a constant value of the graph, as does a
 * Constant node's value given as plain numbers (value_float & co.), so
 * that the lowerings see one form.  A graph attribute (If's branches, a
 * Loop's or Scan's body) becomes a subgraph of its own (onnx.c reads it);
 * the values it reads from the graphs around it are the node's last
 * inputs.
 */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "import/onnx_read.h"

/* NodeProto */
enum {
    NP_INPUT = 1,
    NP_OUTPUT = 2,
    NP_NAME = 3,
    NP_OP_TYPE = 4,
    NP_ATTRIBUTE = 5,
    NP_DOMAIN = 7
};
/* AttributeProto */
enum {
    AP_NAME = 1,
    AP_F = 2,
    AP_I = 3,
    AP_S = 4,
    AP_T = 5,
    AP_G = 6,
    AP_FLOATS = 7,
    AP_INTS = 8,
    AP_STRINGS = 9,
    AP_TENSORS = 10,
    AP_GRAPHS = 11,
    AP_TP = 14,
    AP_TYPE_PROTOS = 15,
    AP_TYPE = 20,
    AP_SPARSE_TENSOR = 22,
    AP_SPARSE_TENSORS = 23
};

/* What a first pass over an AttributeProto saw: the fields that were set,
 * the single values, and how many repeated values each kind has, so that
 * their arrays are allocated once, at their size. */
typedef struct attr_scan {
    const uint8_t *name, *s, *t, *g;
    size_t name_len, s_len, t_len, g_len;
    size_t nfloats, nints, nstrings;
    int has_f, has_i, has_s, has_t, has_g, has_type;
    int has_tensors, has_graphs, has_sparse, has_sparses, has_tp, has_tps;
    uint64_t type;
    float f;
    int64_t i;
} attr_scan;

/* The first pass: every field's wire type checked, the values noted. */
static shardnet_status scan_attr(const uint8_t *p, size_t n, attr_scan *sc)
{
    sn_pb r;
    sn_pb_field f;
    size_t k;
    int rc;

    memset(sc, 0, sizeof *sc);
    sn_pb_init(&r, p, n);
    while ((rc = sn_pb_next(&r, &f)) > 0) {
        switch (f.num) {
        case AP_NAME:
            if (sn_pb_expect(&f, SN_PB_LEN, "name") < 0)
                return SHARDNET_INVALID_ARGUMENT;
            sc->name = f.data;
            sc->name_len = f.len;
            break;
        case AP_F:
            if (sn_pb_expect(&f, SN_PB_I32, "f") < 0)
                return SHARDNET_INVALID_ARGUMENT;
            {
                uint32_t bits = (uint32_t)f.u;
                memcpy(&sc->f, &bits, sizeof sc->f);
            }
            sc->has_f = 1;
            break;
        case AP_I:
            if (sn_pb_expect(&f, SN_PB_VARINT, "i") < 0)
                return SHARDNET_INVALID_ARGUMENT;
            sc->i = (int64_t)f.u;
            sc->has_i = 1;
            break;
        case AP_S:
            if (sn_pb_expect(&f, SN_PB_LEN, "s") < 0)
                return SHARDNET_INVALID_ARGUMENT;
            sc->s = f.data;
            sc->s_len = f.len;
            sc->has_s = 1;
            break;
        case AP_T:
            if (sn_pb_expect(&f, SN_PB_LEN, "t") < 0)
                return SHARDNET_INVALID_ARGUMENT;
            sc->t = f.data;
            sc->t_len = f.len;
            sc->has_t = 1;
            break;
        case AP_G:
            if (sn_pb_expect(&f, SN_PB_LEN, "g") < 0)
                return SHARDNET_INVALID_ARGUMENT;
            sc->g = f.data;
            sc->g_len = f.len;
            sc->has_g = 1;
            break;
        case AP_FLOATS:
        case AP_INTS:
            if (sn_pb_rep_count(&f, f.num == AP_FLOATS ? SN_PB_I32
                                                       : SN_PB_VARINT, &k) < 0)
                return SHARDNET_INVALID_ARGUMENT;
            *(f.num == AP_FLOATS ? &sc->nfloats : &sc->nints) += k;
            break;
        case AP_STRINGS:
            if (sn_pb_expect(&f, SN_PB_LEN, "strings") < 0)
                return SHARDNET_INVALID_ARGUMENT;
            sc->nstrings++;
            break;
        case AP_TENSORS: sc->has_tensors = 1; break;
        case AP_GRAPHS: sc->has_graphs = 1; break;
        case AP_SPARSE_TENSOR: sc->has_sparse = 1; break;
        case AP_SPARSE_TENSORS: sc->has_sparses = 1; break;
        case AP_TP: sc->has_tp = 1; break;
        case AP_TYPE_PROTOS: sc->has_tps = 1; break;
        case AP_TYPE:
            if (sn_pb_expect(&f, SN_PB_VARINT, "type") < 0)
                return SHARDNET_INVALID_ARGUMENT;
            sc->type = f.u;
            sc->has_type = 1;
            break;
        default:
            break;
        }
    }
    return rc < 0 ? SHARDNET_INVALID_ARGUMENT : SHARDNET_OK;
}

/* The attribute's type: as the file names it, or (IR version 1 files name
 * none) taken from the field that is set. */
static shardnet_status attr_type(const attr_scan *sc, sn_attr_type *at)
{
    if (sc->has_type) {
        if (sc->type > SN_ATTR_TYPE_PROTOS)
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "unknown attribute type %" PRIu64, sc->type);
        *at = (sn_attr_type)sc->type;
        return SHARDNET_OK;
    }
    *at = sc->has_f ? SN_ATTR_FLOAT : sc->has_i ? SN_ATTR_INT
        : sc->has_s ? SN_ATTR_STRING : sc->has_t ? SN_ATTR_TENSOR
        : sc->has_g ? SN_ATTR_GRAPH : sc->nfloats ? SN_ATTR_FLOATS
        : sc->nints ? SN_ATTR_INTS : sc->nstrings ? SN_ATTR_STRINGS
        : sc->has_tensors ? SN_ATTR_TENSORS
        : sc->has_graphs ? SN_ATTR_GRAPHS
        : sc->has_sparse ? SN_ATTR_SPARSE_TENSOR
        : sc->has_sparses ? SN_ATTR_SPARSE_TENSORS
        : sc->has_tp ? SN_ATTR_TYPE_PROTO
        : sc->has_tps ? SN_ATTR_TYPE_PROTOS
        : SN_ATTR_UNDEFINED;
    return SHARDNET_OK;
}

/* A copy of the len bytes at s, NUL-terminated; NULL when out of memory. */
static char *bytes_dup(const uint8_t *s, size_t len)
{
    char *d = malloc(len + 1);
    if (!d)
        return NULL;
    if (len)
        memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

/* The repeated values (floats, ints or strings) of attribute a, read by a
 * second pass over AttributeProto p into arrays of the counted size. */
static shardnet_status attr_repeated(sn_attr *a, const attr_scan *sc,
                                     const uint8_t *p, size_t n)
{
    sn_pb r;
    sn_pb_field f;
    sn_pb_rep it;
    uint64_t v;
    sn_attr_type at = a->type;
    size_t cnt = at == SN_ATTR_FLOATS ? sc->nfloats
               : at == SN_ATTR_INTS ? sc->nints : sc->nstrings;
    uint32_t want = at == SN_ATTR_FLOATS ? AP_FLOATS
                  : at == SN_ATTR_INTS ? AP_INTS : AP_STRINGS;
    size_t k = 0;

    if (!cnt)
        return SHARDNET_OK;
    if (at == SN_ATTR_FLOATS)
        a->floats = malloc(cnt * sizeof *a->floats);
    else if (at == SN_ATTR_INTS)
        a->ints = malloc(cnt * sizeof *a->ints);
    else
        a->strings = calloc(cnt, sizeof *a->strings);
    if (!a->floats && !a->ints && !a->strings)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
    sn_pb_init(&r, p, n);
    while (sn_pb_next(&r, &f) > 0 && k < cnt) {
        if (f.num != want)
            continue;
        if (at == SN_ATTR_STRINGS) {
            if (!(a->strings[k] = bytes_dup(f.data, f.len)))
                return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
            a->count = ++k;
            continue;
        }
        if (sn_pb_rep_begin(&it, &f, at == SN_ATTR_FLOATS ? SN_PB_I32
                                                          : SN_PB_VARINT))
            return SHARDNET_INVALID_ARGUMENT;
        while (k < cnt && sn_pb_rep_next(&it, &v) > 0) {
            if (at == SN_ATTR_FLOATS) {
                uint32_t bits = (uint32_t)v;
                memcpy(&a->floats[k], &bits, sizeof bits);
            } else {
                a->ints[k] = (int64_t)v;
            }
            a->count = ++k;
        }
    }
    return SHARDNET_OK;
}

/* A TENSOR attribute: its tensor becomes a constant value of the graph,
 * named "<node>:<attribute>". */
static shardnet_status attr_tensor(sn_onnx_ctx *c, int ni, sn_attr *a,
                                   const attr_scan *sc)
{
    sn_pb_tensor tp;
    char node[SN_MAX_NAME + 1], attr[SN_MAX_NAME + 1];
    int vi;
    shardnet_status st = sn_pb_tensor_parse(sc->t, sc->t_len, &tp);
    if (st != SHARDNET_OK)
        return st;
    /* c->name is reused below; keep both parts apart. */
    snprintf(node, sizeof node, "%s", c->g->nodes[ni].name);
    snprintf(attr, sizeof attr, "%s", a->name);
    vi = sn_onnx_tensor_value(c, &tp, sn_onnx_fresh_name(c, node, attr));
    if (vi < 0)
        return SHARDNET_INVALID_ARGUMENT;
    a->tensor = vi; /* a stays put: only the values array grew */
    return SHARDNET_OK;
}

/* AttributeProto p: the next attribute of node ni. */
static shardnet_status parse_attr(sn_onnx_ctx *c, int ni, const uint8_t *p,
                                  size_t n)
{
    attr_scan sc;
    sn_attr *a;
    sn_node *nd;
    const char *aname;
    char *copy;
    sn_attr_type at = SN_ATTR_UNDEFINED;
    shardnet_status st;

    if ((st = scan_attr(p, n, &sc)) != SHARDNET_OK)
        return st;
    if (!sc.name || !sc.name_len)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "attribute has no name");
    if ((st = attr_type(&sc, &at)) != SHARDNET_OK)
        return st;
    if (at == SN_ATTR_TENSOR && !sc.has_t)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "attribute of type TENSOR has no tensor");
    if (at == SN_ATTR_GRAPH && !sc.has_g)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "attribute of type GRAPH has no graph");

    aname = sn_onnx_name_in(c, sc.name, sc.name_len, "attribute name");
    if (!aname)
        return SHARDNET_INVALID_ARGUMENT;
    /* parse_node sized the array for all of the node's attributes. */
    nd = &c->g->nodes[ni];
    if (!(copy = bytes_dup((const uint8_t *)aname, strlen(aname))))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
    a = &nd->attrs[nd->nattrs++];
    memset(a, 0, sizeof *a);
    a->name = copy;
    a->type = at;
    a->tensor = -1;
    a->i = sc.i;
    a->f = sc.f;
    switch (at) {
    case SN_ATTR_STRING:
        if (!(a->s = bytes_dup(sc.s, sc.s_len)))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
        return SHARDNET_OK;
    case SN_ATTR_FLOATS:
    case SN_ATTR_INTS:
    case SN_ATTR_STRINGS:
        return attr_repeated(a, &sc, p, n);
    case SN_ATTR_TENSOR:
        return attr_tensor(c, ni, a, &sc);
    case SN_ATTR_GRAPH:
        /* a stays put: the subgraph's values and nodes are its own. */
        return sn_onnx_parse_subgraph(c, sc.g, sc.g_len, &a->graph);
    default:
        return SHARDNET_OK;
    }
}

/* The Constant forms given as plain numbers become a tensor too. */
static shardnet_status constant_value(sn_onnx_ctx *c, int ni)
{
    static const char *const forms[] = {
        "value", "value_float", "value_floats", "value_int", "value_ints",
        "value_string", "value_strings", "sparse_value"};
    const sn_attr *found = NULL;
    sn_node *n = &c->g->nodes[ni];
    size_t nfound = 0, count = 1, esize;
    int vi, rank;
    sn_dtype dt;
    sn_value *v;
    sn_attr *a;
    void *buf;
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        const sn_attr *x = sn_node_attr(n, forms[i]);
        if (x) {
            found = x;
            nfound++;
        }
    }
    if (nfound != 1)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "Constant needs exactly one value attribute, has %zu",
                        nfound);
    if (!strcmp(found->name, "value")) {
        if (found->type != SN_ATTR_TENSOR)
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "attribute 'value' is not a tensor");
        return SHARDNET_OK;
    }
    if (!strcmp(found->name, "value_float") && found->type == SN_ATTR_FLOAT) {
        dt = SN_DT_FLOAT, rank = 0;
    } else if (!strcmp(found->name, "value_floats") &&
               found->type == SN_ATTR_FLOATS) {
        dt = SN_DT_FLOAT, rank = 1, count = found->count;
    } else if (!strcmp(found->name, "value_int") &&
               found->type == SN_ATTR_INT) {
        dt = SN_DT_INT64, rank = 0;
    } else if (!strcmp(found->name, "value_ints") &&
               found->type == SN_ATTR_INTS) {
        dt = SN_DT_INT64, rank = 1, count = found->count;
    } else if (!strncmp(found->name, "value_", 6) &&
               (found->type == SN_ATTR_FLOAT || found->type == SN_ATTR_INT ||
                found->type == SN_ATTR_FLOATS ||
                found->type == SN_ATTR_INTS)) {
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "attribute '%s' has the wrong type", found->name);
    } else {
        return sn_error(SHARDNET_UNSUPPORTED,
                        "attribute '%s' is not supported", found->name);
    }
    esize = sn_dtype_size(dt);
    buf = malloc(count ? count * esize : 1);
    if (!buf)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
    if (found->type == SN_ATTR_FLOAT)
        memcpy(buf, &found->f, 4);
    else if (found->type == SN_ATTR_INT)
        memcpy(buf, &found->i, 8);
    else if (found->type == SN_ATTR_FLOATS && count)
        memcpy(buf, found->floats, count * 4);
    else if (found->type == SN_ATTR_INTS && count)
        memcpy(buf, found->ints, count * 8);
    vi = sn_graph_add_value(c->g, sn_onnx_fresh_name(c, n->name, "value"));
    if (vi < 0) {
        free(buf);
        return SHARDNET_OUT_OF_MEMORY;
    }
    v = &c->g->values[vi];
    v->dtype = dt;
    v->rank = rank;
    if (rank)
        v->dims[0] = (int64_t)count;
    v->owned = buf;
    v->data = buf;
    v->nbytes = count * esize;
    v->flags |= SN_VALUE_CONST;
    a = sn_node_add_attr(n, "value", SN_ATTR_TENSOR);
    if (!a)
        return SHARDNET_OUT_OF_MEMORY;
    a->tensor = vi;
    return SHARDNET_OK;
}

static int cmp_attr_name(const void *a, const void *b)
{
    return strcmp((*(const sn_attr *const *)a)->name,
                  (*(const sn_attr *const *)b)->name);
}

/* Attribute names are unique: sorted, so that a node with thousands of
 * attributes costs n log n, not n^2. */
static shardnet_status unique_attrs(const sn_node *n)
{
    const sn_attr **by;
    shardnet_status st = SHARDNET_OK;
    if (n->nattrs < 2)
        return SHARDNET_OK;
    by = malloc(n->nattrs * sizeof *by);
    if (!by)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < n->nattrs; i++)
        by[i] = &n->attrs[i];
    qsort(by, n->nattrs, sizeof *by, cmp_attr_name);
    for (size_t i = 1; i < n->nattrs && st == SHARDNET_OK; i++)
        if (!strcmp(by[i - 1]->name, by[i]->name))
            st = sn_error(SHARDNET_INVALID_ARGUMENT,
                          "attribute '%s' given twice", by[i]->name);
    free(by);
    return st;
}

/* The node's label for messages, from its name or else its index, and its
 * op_type, read before anything can fail. */
static void node_label(char *label, size_t cap, const uint8_t *p, size_t n,
                       size_t index)
{
    const uint8_t *nm, *op;
    size_t nm_len, op_len;
    char b1[160], b2[100];
    if (sn_pb_peek_len(p, n, NP_NAME, &nm, &nm_len) && nm_len)
        snprintf(label, cap, "node '%s'", sn_pb_printable(b1, sizeof b1, nm,
                                                          nm_len));
    else
        snprintf(label, cap, "node #%zu", index);
    if (sn_pb_peek_len(p, n, NP_OP_TYPE, &op, &op_len))
        snprintf(label + strlen(label), cap - strlen(label), " (%s)",
                 sn_pb_printable(b2, sizeof b2, op, op_len));
}

/* What a first pass over a NodeProto saw: its strings and how many inputs,
 * outputs and attributes it has. */
typedef struct node_scan {
    const uint8_t *nm, *op, *dom;
    size_t nm_len, op_len, dom_len;
    size_t nin, nout, nattrs;
} node_scan;

/* The first pass: every field's wire type checked; 0, or -1 with the
 * error set. */
static int scan_node(const uint8_t *p, size_t n, node_scan *sc)
{
    sn_pb r;
    sn_pb_field f;
    int rc;

    memset(sc, 0, sizeof *sc);
    sn_pb_init(&r, p, n);
    while ((rc = sn_pb_next(&r, &f)) > 0) {
        switch (f.num) {
        case NP_INPUT:
        case NP_OUTPUT:
        case NP_ATTRIBUTE:
            if (sn_pb_expect(&f, SN_PB_LEN, f.num == NP_INPUT ? "input"
                             : f.num == NP_OUTPUT ? "output" : "attribute") < 0)
                return -1;
            sc->nin += f.num == NP_INPUT;
            sc->nout += f.num == NP_OUTPUT;
            sc->nattrs += f.num == NP_ATTRIBUTE;
            break;
        case NP_NAME:
        case NP_OP_TYPE:
        case NP_DOMAIN:
            if (sn_pb_expect(&f, SN_PB_LEN, f.num == NP_NAME ? "name"
                             : f.num == NP_OP_TYPE ? "op_type" : "domain") < 0)
                return -1;
            if (f.num == NP_NAME)
                sc->nm = f.data, sc->nm_len = f.len;
            else if (f.num == NP_OP_TYPE)
                sc->op = f.data, sc->op_len = f.len;
            else
                sc->dom = f.data, sc->dom_len = f.len;
            break;
        default:
            break;
        }
    }
    if (rc < 0)
        return -1;
    if (!sc->op || !sc->op_len) {
        sn_error(SHARDNET_INVALID_ARGUMENT, "has no op_type");
        return -1;
    }
    return 0;
}

/* The values the node's inputs and outputs name (created on first sight;
 * -1 for an omitted optional one), in ins and outs, sized by scan_node. */
static int node_values(sn_onnx_ctx *c, const uint8_t *p, size_t n, int *ins,
                       size_t *nin, int *outs, size_t *nout)
{
    sn_pb r;
    sn_pb_field f;
    *nin = *nout = 0;
    sn_pb_init(&r, p, n);
    while (sn_pb_next(&r, &f) > 0) {
        int is_in = f.num == NP_INPUT, vi = -1;
        size_t *k = is_in ? nin : nout;
        const char *vn;
        if (f.num != NP_INPUT && f.num != NP_OUTPUT)
            continue;
        if (f.len) {
            vn = sn_onnx_name_in(c, f.data, f.len,
                                 is_in ? "input name" : "output name");
            if (!vn || (vi = sn_onnx_value_of(c, vn)) < 0) {
                sn_error_prefix(SHARDNET_INVALID_ARGUMENT, "%s %zu",
                                is_in ? "input" : "output", *k);
                return -1;
            }
        }
        (is_in ? ins : outs)[(*k)++] = vi;
    }
    return 0;
}

/* The node's attributes, in an array sized for all of them; then their
 * names must be unique. */
static shardnet_status node_attrs(sn_onnx_ctx *c, int ni, const uint8_t *p,
                                  size_t n, size_t nattrs)
{
    sn_pb r;
    sn_pb_field f;
    size_t k = 0;
    char b[160];
    shardnet_status st;

    if (nattrs) {
        c->g->nodes[ni].attrs = malloc(nattrs * sizeof(sn_attr));
        if (!c->g->nodes[ni].attrs)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
    }
    sn_pb_init(&r, p, n);
    while (sn_pb_next(&r, &f) > 0) {
        const uint8_t *an;
        size_t an_len;
        if (f.num != NP_ATTRIBUTE)
            continue;
        st = parse_attr(c, ni, f.data, f.len);
        if (st != SHARDNET_OK) {
            if (sn_pb_peek_len(f.data, f.len, AP_NAME, &an, &an_len))
                sn_error_prefix(st, "attribute '%s'",
                                sn_pb_printable(b, sizeof b, an, an_len));
            else
                sn_error_prefix(st, "attribute #%zu", k);
            return st;
        }
        k++;
    }
    return unique_attrs(&c->g->nodes[ni]);
}

/* The values of c->g that node ni's subgraphs read (their outer values,
 * by name, created here when new: a later node may make them, or, in a
 * subgraph, the graph around it) appended to its inputs, in the order
 * sn_node_implicit_inputs() says. */
static shardnet_status implicit_inputs(sn_onnx_ctx *c, int ni)
{
    sn_node *nd = &c->g->nodes[ni];
    size_t total = 0;
    int *ins;
    for (size_t i = 0; i < nd->nattrs; i++)
        if (nd->attrs[i].type == SN_ATTR_GRAPH && nd->attrs[i].graph)
            total += nd->attrs[i].graph->nouter;
    if (!total)
        return SHARDNET_OK;
    if (!(ins = realloc(nd->inputs, (nd->ninputs + total) * sizeof *ins)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
    nd->inputs = ins;
    for (size_t i = 0; i < nd->nattrs; i++) {
        const sn_graph *sub = nd->attrs[i].graph;
        if (nd->attrs[i].type != SN_ATTR_GRAPH || !sub)
            continue;
        for (size_t k = 0; k < sub->nouter; k++) {
            int vi = sn_onnx_value_of(c, sub->values[sub->outer[k]].name);
            if (vi < 0)
                return SHARDNET_OUT_OF_MEMORY;
            nd->inputs[nd->ninputs++] = vi;
        }
    }
    return SHARDNET_OK;
}

shardnet_status sn_onnx_parse_node(sn_onnx_ctx *c, const uint8_t *p,
                                   size_t n, size_t index)
{
    node_scan sc;
    size_t nin, nout;
    int *ins = NULL, *outs = NULL, ni = -1;
    char *name = NULL, *op_type = NULL, *domain = NULL;
    char label[SN_MAX_NAME < 300 ? SN_MAX_NAME : 300];
    shardnet_status st = SHARDNET_INVALID_ARGUMENT;

    node_label(label, sizeof label, p, n, index);
    if (scan_node(p, n, &sc) < 0)
        goto fail;
    if (!(op_type = sn_pb_strdup(sc.op, sc.op_len, SN_MAX_NAME, "op_type")) ||
        !(name = sn_pb_strdup(sc.nm ? sc.nm : sc.op, sc.nm ? sc.nm_len : 0,
                              SN_MAX_NAME, "name")) ||
        !(domain = sn_pb_strdup(sc.dom ? sc.dom : sc.op,
                                sc.dom ? sc.dom_len : 0, SN_MAX_NAME,
                                "domain")))
        goto fail;

    ins = malloc((sc.nin ? sc.nin : 1) * sizeof *ins);
    outs = malloc((sc.nout ? sc.nout : 1) * sizeof *outs);
    if (!ins || !outs) {
        st = sn_error(SHARDNET_OUT_OF_MEMORY, "out of memory");
        goto fail;
    }
    if (node_values(c, p, n, ins, &nin, outs, &nout) < 0)
        goto fail;
    ni = sn_graph_add_node(c->g, name, op_type, domain, ins, nin, outs, nout);
    if (ni < 0)
        goto fail;
    /* From here on the node's own name (generated when empty) labels it. */
    snprintf(label, sizeof label, "node '%s' (%s)", c->g->nodes[ni].name,
             op_type);
    if ((st = node_attrs(c, ni, p, n, sc.nattrs)) != SHARDNET_OK ||
        (st = implicit_inputs(c, ni)) != SHARDNET_OK)
        goto fail;
    if (!strcmp(op_type, "Constant") &&
        (!strcmp(domain, "") || !strcmp(domain, "ai.onnx")) &&
        (st = constant_value(c, ni)) != SHARDNET_OK)
        goto fail;
    st = SHARDNET_OK;
fail:
    free(ins);
    free(outs);
    free(name);
    free(op_type);
    free(domain);
    if (st == SHARDNET_OK)
        return SHARDNET_OK;
    return sn_error_prefix(st, "%s", label);
}
