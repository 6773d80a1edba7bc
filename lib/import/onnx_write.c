/*
 * Writing an ONNX model: the fields of the file it was read from,
 * re-emitted in order, with the caller's changes to the main graph; see
 * onnx_write.h.
 *
 * Each field is copied as the span of bytes it has in the file (tag,
 * length and payload), so that what we do not know survives exactly; only
 * the graph is rebuilt, as the message of its fields, and an external
 * tensor as its fields less the external-data ones, plus raw_data.  The
 * file was checked by the importer before we get here (g is its graph), so
 * a malformed field here is an internal error, not the user's.
 */
#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "import/onnx_write.h"
#include "import/pbwire.h"

/* ModelProto */
enum { MP_GRAPH = 7, MP_OPSET = 8 };
/* OperatorSetIdProto */
enum { OS_DOMAIN = 1, OS_VERSION = 2 };
/* GraphProto */
enum { GP_NODE = 1, GP_INITIALIZER = 5, GP_INPUT = 11 };
/* NodeProto */
enum { NP_INPUT = 1, NP_OUTPUT = 2, NP_NAME = 3, NP_OP_TYPE = 4,
       NP_ATTRIBUTE = 5, NP_DOMAIN = 7 };
/* AttributeProto, and its type INT */
enum { AP_NAME = 1, AP_I = 3, AP_TYPE = 20, AP_TYPE_INT = 2 };
/* TensorProto */
enum { TP_DIMS = 1, TP_DATA_TYPE = 2, TP_NAME = 8, TP_RAW_DATA = 9,
       TP_EXTERNAL_DATA = 13, TP_DATA_LOCATION = 14 };
/* ValueInfoProto, TypeProto, TypeProto.Tensor, TensorShapeProto and its
 * Dimension */
enum { VI_NAME = 1, VI_TYPE = 2, TY_TENSOR = 1, TT_ELEM_TYPE = 1,
       TT_SHAPE = 2, SH_DIM = 1, DIM_VALUE = 1 };

/* One field of a message, with the span of bytes it takes in the file. */
typedef struct span_field {
    sn_pb_field f;
    const uint8_t *start;
    size_t len;
} span_field;

/* The next field of r; as sn_pb_next. */
static int next_span(sn_pb *r, span_field *s)
{
    s->start = r->p;
    int rc = sn_pb_next(r, &s->f);
    s->len = rc > 0 ? (size_t)(r->p - s->start) : 0;
    return rc;
}

static shardnet_status malformed(const char *what)
{
    return sn_error(SHARDNET_INTERNAL,
                    "%s is malformed, though the importer read it", what);
}

/* The NUL-terminated copy of a name of n bytes at p, in buf; NULL when it
 * does not fit or holds a NUL (the importer refuses both). */
static const char *name_of(const uint8_t *p, size_t n, char *buf, size_t cap)
{
    if (n >= cap || (n && memchr(p, 0, n)))
        return NULL;
    if (n)
        memcpy(buf, p, n);
    buf[n] = '\0';
    return buf;
}

/* ---- New fields ---------------------------------------------------- */

void sn_onnx_put_node(sn_pbw *w, const char *name, const char *op_type,
                      const char *domain, const char *const *inputs,
                      size_t ninputs, const char *output,
                      const sn_onnx_int_attr *attrs, size_t nattrs)
{
    sn_pbw n, a;
    sn_pbw_init(&n);
    for (size_t i = 0; i < ninputs; i++)
        sn_pbw_string(&n, NP_INPUT, inputs[i]);
    sn_pbw_string(&n, NP_OUTPUT, output);
    sn_pbw_string(&n, NP_NAME, name);
    sn_pbw_string(&n, NP_OP_TYPE, op_type);
    for (size_t i = 0; i < nattrs; i++) {
        sn_pbw_init(&a);
        sn_pbw_string(&a, AP_NAME, attrs[i].name);
        sn_pbw_int(&a, AP_I, attrs[i].value);
        sn_pbw_int(&a, AP_TYPE, AP_TYPE_INT);
        sn_pbw_message(&n, NP_ATTRIBUTE, &a);
        sn_pbw_free(&a);
    }
    if (*domain)
        sn_pbw_string(&n, NP_DOMAIN, domain);
    sn_pbw_message(w, GP_NODE, &n);
    sn_pbw_free(&n);
}

void sn_onnx_put_tensor(sn_pbw *w, const char *name, sn_dtype dtype,
                        int rank, const int64_t *dims, const void *data,
                        size_t nbytes)
{
    sn_pbw t;
    sn_pbw_init(&t);
    for (int i = 0; i < rank; i++)
        sn_pbw_int(&t, TP_DIMS, dims[i]);
    sn_pbw_int(&t, TP_DATA_TYPE, dtype);
    sn_pbw_string(&t, TP_NAME, name);
    sn_pbw_len_ref(&t, TP_RAW_DATA, data, nbytes);
    sn_pbw_message(w, GP_INITIALIZER, &t);
    sn_pbw_free(&t);
}

void sn_onnx_put_input(sn_pbw *w, const char *name, sn_dtype dtype, int rank,
                       const int64_t *dims)
{
    sn_pbw v, ty, tt, sh, d;
    sn_pbw_init(&v);
    sn_pbw_init(&ty);
    sn_pbw_init(&tt);
    sn_pbw_init(&sh);
    for (int i = 0; i < rank; i++) {
        sn_pbw_init(&d);
        sn_pbw_int(&d, DIM_VALUE, dims[i]);
        sn_pbw_message(&sh, SH_DIM, &d);
        sn_pbw_free(&d);
    }
    sn_pbw_int(&tt, TT_ELEM_TYPE, dtype);
    sn_pbw_message(&tt, TT_SHAPE, &sh);
    sn_pbw_message(&ty, TY_TENSOR, &tt);
    sn_pbw_string(&v, VI_NAME, name);
    sn_pbw_message(&v, VI_TYPE, &ty);
    sn_pbw_message(w, GP_INPUT, &v);
    sn_pbw_free(&sh);
    sn_pbw_free(&tt);
    sn_pbw_free(&ty);
    sn_pbw_free(&v);
}

/* ---- The graph ----------------------------------------------------- */

/* The state of one rewrite. */
typedef struct rewrite {
    const sn_graph *g;
    sn_onnx_edit_fn edit;
    void *user;
    size_t count[3]; /* parts of each kind seen */
    char name[SN_MAX_NAME + 1];
} rewrite;

/* Initializer t, kept, into w: as it is, or inline when its data lies in
 * an external file (the graph's value of its name holds the bytes). */
static shardnet_status put_initializer(rewrite *rw, const span_field *s,
                                       const sn_pb_tensor *t,
                                       const char *name, sn_pbw *w)
{
    if (!t->external) {
        sn_pbw_ref(w, s->start, s->len);
        return SHARDNET_OK;
    }
    int vi = sn_graph_find(rw->g, name);
    const sn_value *v = vi >= 0 ? &rw->g->values[vi] : NULL;
    if (!v || !(v->flags & SN_VALUE_CONST) || v->nbytes != t->nbytes)
        return sn_error(SHARDNET_INTERNAL,
                        "initializer '%s': its external data was not read",
                        name);
    sn_pbw m;
    sn_pb r;
    span_field f;
    sn_pbw_init(&m);
    sn_pb_init(&r, s->f.data, s->f.len);
    while (next_span(&r, &f) > 0)
        if (f.f.num != TP_EXTERNAL_DATA && f.f.num != TP_DATA_LOCATION)
            sn_pbw_ref(&m, f.start, f.len);
    sn_pbw_len_ref(&m, TP_RAW_DATA, v->data, v->nbytes);
    sn_pbw_message(w, GP_INITIALIZER, &m);
    sn_pbw_free(&m);
    return SHARDNET_OK;
}

/* The name of a part: an initializer's (and the tensor, in *t), an
 * input's; NULL for a node.  *ok 0 when it cannot be read. */
static const char *part_name(rewrite *rw, sn_onnx_part part,
                             const sn_pb_field *f, sn_pb_tensor *t, int *ok)
{
    const uint8_t *p = NULL;
    size_t n = 0;
    *ok = 1;
    if (part == SN_ONNX_NODE)
        return NULL;
    if (part == SN_ONNX_INITIALIZER) {
        if (sn_pb_tensor_parse(f->data, f->len, t) != SHARDNET_OK) {
            *ok = 0;
            return NULL;
        }
        p = t->name;
        n = t->name_len;
    } else if (!sn_pb_peek_len(f->data, f->len, VI_NAME, &p, &n)) {
        n = 0; /* an input without a name: the importer refused it */
    }
    const char *name = name_of(p, n, rw->name, sizeof rw->name);
    *ok = name != NULL;
    return name;
}

/* One node, initializer or input s: the caller's fields before it, then
 * it, unless the caller leaves it out. */
static shardnet_status put_part(rewrite *rw, sn_onnx_part part,
                                const span_field *s, sn_pbw *w)
{
    static const char *const what[] = {"a node", "an initializer",
                                       "a graph input"};
    sn_pb_tensor t;
    sn_pbw before;
    int ok, keep = 1;
    shardnet_status st;
    const char *name = part_name(rw, part, &s->f, &t, &ok);
    if (!ok)
        return malformed(what[part]);
    sn_pbw_init(&before);
    st = rw->edit(rw->user, part, rw->count[part]++, name, &before, &keep);
    if (st == SHARDNET_OK)
        sn_pbw_append(w, &before);
    sn_pbw_free(&before);
    if (st != SHARDNET_OK)
        return st;
    if (!keep)
        return SHARDNET_OK;
    if (part == SN_ONNX_INITIALIZER)
        return put_initializer(rw, s, &t, name, w);
    sn_pbw_ref(w, s->start, s->len);
    return SHARDNET_OK;
}

/* GraphProto p, n bytes, with the caller's changes, into w. */
static shardnet_status put_graph(rewrite *rw, const uint8_t *p, size_t n,
                                 sn_pbw *w)
{
    sn_pb r;
    span_field s;
    int rc = 0;
    shardnet_status st = SHARDNET_OK;
    sn_pb_init(&r, p, n);
    while (st == SHARDNET_OK && (rc = next_span(&r, &s)) > 0) {
        if (s.f.wire == SN_PB_LEN && s.f.num == GP_NODE)
            st = put_part(rw, SN_ONNX_NODE, &s, w);
        else if (s.f.wire == SN_PB_LEN && s.f.num == GP_INITIALIZER)
            st = put_part(rw, SN_ONNX_INITIALIZER, &s, w);
        else if (s.f.wire == SN_PB_LEN && s.f.num == GP_INPUT)
            st = put_part(rw, SN_ONNX_INPUT, &s, w);
        else
            sn_pbw_ref(w, s.start, s.len);
    }
    if (st == SHARDNET_OK && rc < 0)
        return malformed("the graph");
    if (st == SHARDNET_OK && rw->count[SN_ONNX_NODE] != rw->g->nnodes)
        return sn_error(SHARDNET_INTERNAL,
                        "the graph has %zu nodes in the file, %zu imported",
                        rw->count[SN_ONNX_NODE], rw->g->nnodes);
    return st;
}

/* ---- The model ----------------------------------------------------- */

/* The version at which the model (fields [p, p + n)) imports domain, or
 * -1. */
static int64_t imported_version(const uint8_t *p, size_t n,
                                const char *domain)
{
    sn_pb r, ro;
    sn_pb_field f, fo;
    int64_t found = -1;
    sn_pb_init(&r, p, n);
    while (sn_pb_next(&r, &f) > 0) {
        const uint8_t *d = NULL;
        size_t dn = 0;
        int64_t v = -1;
        if (f.num != MP_OPSET || f.wire != SN_PB_LEN)
            continue;
        sn_pb_init(&ro, f.data, f.len);
        while (sn_pb_next(&ro, &fo) > 0) {
            if (fo.num == OS_DOMAIN && fo.wire == SN_PB_LEN) {
                d = fo.data;
                dn = fo.len;
            } else if (fo.num == OS_VERSION && fo.wire == SN_PB_VARINT) {
                v = (int64_t)fo.u;
            }
        }
        if (dn == strlen(domain) && (!dn || !memcmp(d, domain, dn)))
            found = v;
    }
    return found;
}

/* The imports of need the model lacks into w (OperatorSetIdProto fields),
 * *added of them; an import at another version is refused. */
static shardnet_status missing_opsets(const uint8_t *p, size_t n,
                                      const sn_onnx_opset *need, size_t nneed,
                                      sn_pbw *w, size_t *added)
{
    *added = 0;
    for (size_t i = 0; i < nneed; i++) {
        int64_t v = imported_version(p, n, need[i].domain);
        if (v == need[i].version)
            continue;
        if (v >= 0)
            return sn_error(SHARDNET_UNSUPPORTED,
                            "the model imports domain '%s' at version %" PRId64
                            "; what is written needs version %" PRId64,
                            need[i].domain, v, need[i].version);
        sn_pbw o;
        sn_pbw_init(&o);
        sn_pbw_string(&o, OS_DOMAIN, need[i].domain);
        sn_pbw_int(&o, OS_VERSION, need[i].version);
        sn_pbw_message(w, MP_OPSET, &o);
        sn_pbw_free(&o);
        (*added)++;
    }
    return SHARDNET_OK;
}

/* How many graph fields, and which field comes last among the opset
 * imports (the new ones go after it). */
static void model_layout(const uint8_t *p, size_t n, size_t *graphs,
                         size_t *last_opset)
{
    sn_pb r;
    sn_pb_field f;
    size_t k = 0;
    *graphs = 0;
    *last_opset = SIZE_MAX;
    sn_pb_init(&r, p, n);
    for (; sn_pb_next(&r, &f) > 0; k++) {
        *graphs += f.num == MP_GRAPH;
        if (f.num == MP_OPSET)
            *last_opset = k;
    }
}

/* The model's fields into out: the graph rebuilt, the new imports after
 * the last of the model's own. */
static shardnet_status put_model(rewrite *rw, const uint8_t *p, size_t n,
                                 const sn_pbw *imports, size_t last_opset,
                                 sn_pbw *out)
{
    sn_pb r;
    span_field s;
    shardnet_status st = SHARDNET_OK;
    size_t k = 0;
    sn_pb_init(&r, p, n);
    for (; st == SHARDNET_OK && next_span(&r, &s) > 0; k++) {
        if (s.f.num == MP_GRAPH && s.f.wire == SN_PB_LEN) {
            sn_pbw gw;
            sn_pbw_init(&gw);
            st = put_graph(rw, s.f.data, s.f.len, &gw);
            if (st == SHARDNET_OK)
                sn_pbw_message(out, MP_GRAPH, &gw);
            sn_pbw_free(&gw);
        } else {
            sn_pbw_ref(out, s.start, s.len);
        }
        if (k == last_opset)
            sn_pbw_append(out, imports);
    }
    return st;
}

shardnet_status sn_onnx_rewrite(const sn_graph *g, sn_onnx_edit_fn edit,
                                void *user, const sn_onnx_opset *need,
                                size_t nneed, sn_pbw *out)
{
    if (!g || !g->nmaps || !edit || !out)
        return sn_error(SHARDNET_INTERNAL, "rewrite: no model or no edit");
    const uint8_t *p = g->maps[0].addr;
    size_t n = g->maps[0].len, graphs, last_opset, added;
    model_layout(p, n, &graphs, &last_opset);
    if (graphs != 1)
        return sn_error(SHARDNET_UNSUPPORTED,
                        "the model has %zu graph fields (protobuf merges "
                        "them); only a model of one can be rewritten",
                        graphs);
    rewrite *rw = calloc(1, sizeof *rw);
    sn_pbw imports;
    shardnet_status st;
    if (!rw)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "rewrite: out of memory");
    *rw = (rewrite){.g = g, .edit = edit, .user = user};
    sn_pbw_init(&imports);
    st = missing_opsets(p, n, need, nneed, &imports, &added);
    if (st == SHARDNET_OK && added && last_opset == SIZE_MAX)
        st = sn_error(SHARDNET_INTERNAL, "the model imports no opset");
    if (st == SHARDNET_OK)
        st = put_model(rw, p, n, &imports, last_opset, out);
    sn_pbw_free(&imports);
    free(rw);
    if (st == SHARDNET_OK)
        st = sn_pbw_check(out, "the model");
    if (st == SHARDNET_OK && out->size > SN_ONNX_MAX_BYTES)
        st = sn_error(SHARDNET_UNSUPPORTED,
                      "the model written would be %" PRIu64 " bytes, more "
                      "than the 2 GiB one protobuf message may hold (writing "
                      "external data is not supported)",
                      out->size);
    return st;
}
