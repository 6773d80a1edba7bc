/*
 * ONNX import, the graph IR and tensor files: real models from the ONNX test
 * data, models made by tests/onnx_cases/make_cases.py, and hostile inputs
 * built here byte by byte, each of which must give a clear error and no
 * crash.
 */
#include <config.h>

#include <criterion/criterion.h>
#include "testfiles.h"
#include "pbwriter.h"
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "ir/graph.h"
#include "import/tensorfile.h"
#include "import/onnx.h"
#include "shardnet.h"

#define ONNX_NODE_DIR "/usr/share/libonnx-testdata/data/node"

/* Paths and files. */

static const char *srcdir(void)
{
    const char *d = getenv("SHARDNET_SRCDIR");
    if (!d || !*d)
        cr_skip_test("SHARDNET_SRCDIR is not set (make check sets it)");
    return d;
}

static void src_path(char *buf, size_t cap, const char *rel)
{
    snprintf(buf, cap, "%s/tests/%s", srcdir(), rel);
}

static void onnx_path(char *buf, size_t cap, const char *rel)
{
    struct stat sb;
    if (stat(ONNX_NODE_DIR, &sb) != 0)
        cr_skip_test("ONNX test data not installed at " ONNX_NODE_DIR
                     " (Debian package libonnx-testdata)");
    snprintf(buf, cap, "%s/%s", ONNX_NODE_DIR, rel);
}

/* Load from memory; the model buffer is kept until the graph is freed. */
static shardnet_status load_pb(const pb *m, sn_graph **g)
{
    return sn_onnx_load_memory(m->p, m->n, NULL, g);
}

static void expect_error(const pb *m, const char *needle)
{
    sn_graph *g = NULL;
    shardnet_status st = load_pb(m, &g);
    if (st == SHARDNET_OK) {
        st = sn_graph_sort(g);
        sn_graph_free(g);
    } else {
        cr_assert_null(g);
    }
    cr_assert_neq(st, SHARDNET_OK, "expected an error about '%s'", needle);
    cr_assert(strstr(shardnet_last_error(), needle),
              "error '%s' does not mention '%s'", shardnet_last_error(),
              needle);
}

static const char *const X_ONLY[] = {"x", NULL};

/* A graph: input x [2,2], one Relu x -> y, output y; then extra parts. */
static pb relu_graph(void)
{
    static const int64_t d[] = {2, 2};
    pb g = {0}, n = node("relu", "Relu", X_ONLY, (const char *[]){"y", NULL});
    pb in = value_info("x", d, 2), out = value_info("y", d, 2);
    put_msg(&g, 1, &n);
    put_str(&g, 2, "g");
    put_msg(&g, 11, &in);
    put_msg(&g, 12, &out);
    return g;
}

/* Real models. */

Test(onnx_real, add_model_has_its_inputs_outputs_and_shapes)
{
    char path[512];
    sn_graph *g;
    onnx_path(path, sizeof path, "test_add/model.onnx");
    cr_assert_eq(sn_onnx_load(path, &g), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(sn_graph_sort(g), SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(g->opset, 14);
    cr_assert_eq(g->ir_version, 7);
    cr_assert_str_eq(g->producer, "backend-test");
    cr_assert_eq(g->nnodes, 1);
    cr_assert_str_eq(g->nodes[0].op_type, "Add");
    cr_assert_str_eq(g->nodes[0].domain, "");
    cr_assert_eq(g->ninputs, 2);
    cr_assert_eq(g->noutputs, 1);
    cr_assert_str_eq(g->values[g->inputs[0]].name, "x");
    cr_assert_str_eq(g->values[g->inputs[1]].name, "y");
    for (int k = 0; k < 3; k++) {
        const sn_value *v = &g->values[k < 2 ? g->inputs[k] : g->outputs[0]];
        cr_assert_eq(v->dtype, SN_DT_FLOAT);
        cr_assert_eq(v->rank, 3);
        cr_assert_eq(v->dims[0], 3);
        cr_assert_eq(v->dims[1], 4);
        cr_assert_eq(v->dims[2], 5);
        cr_assert_eq(sn_value_elements(v), 60);
    }
    cr_assert(g->values[g->inputs[0]].flags & SN_VALUE_INPUT);
    cr_assert(g->values[g->outputs[0]].flags & SN_VALUE_OUTPUT);
    cr_assert_eq(g->values[g->outputs[0]].producer, 0);
    cr_assert_eq(g->nodes[0].inputs[0], g->inputs[0]);
    cr_assert_eq(g->nodes[0].inputs[1], g->inputs[1]);
    cr_assert_eq(sn_graph_find(g, "sum"), g->outputs[0]);
    cr_assert_eq(sn_graph_find(g, "nothing"), -1);
    cr_assert_eq(g->nmaps, 1);
    sn_graph_free(g);
}

Test(onnx_real, conv_model_has_its_int_list_attributes)
{
    char path[512];
    sn_graph *g;
    const sn_attr *a;
    const sn_node *n;
    onnx_path(path, sizeof path, "test_conv_with_strides_padding/model.onnx");
    cr_assert_eq(sn_onnx_load(path, &g), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(g->opset, 11);
    cr_assert_eq(g->nnodes, 1);
    n = &g->nodes[0];
    cr_assert_str_eq(n->op_type, "Conv");
    cr_assert_str_eq(n->name, "Conv#0", "unnamed nodes get op#index");
    cr_assert_eq(n->nattrs, 3);
    a = sn_node_attr(n, "kernel_shape");
    cr_assert(a);
    cr_assert_eq(a->type, SN_ATTR_INTS);
    cr_assert_eq(a->count, 2);
    cr_assert_eq(a->ints[0], 3);
    cr_assert_eq(a->ints[1], 3);
    a = sn_node_attr(n, "pads");
    cr_assert_eq(a->count, 4);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(a->ints[i], 1);
    a = sn_node_attr(n, "strides");
    cr_assert_eq(a->count, 2);
    cr_assert_eq(a->ints[0], 2);
    cr_assert_null(sn_node_attr(n, "dilations"));
    cr_assert_eq(sn_attr_int(n, "group", 1), 1);
    cr_assert_eq(sn_attr_int(n, "pads", 7), 7, "type mismatch: default");
    {
        const sn_value *w = &g->values[n->inputs[1]], *y;
        cr_assert_str_eq(w->name, "W");
        cr_assert_eq(w->rank, 4);
        cr_assert_eq(w->dims[2], 3);
        y = &g->values[n->outputs[0]];
        cr_assert_eq(y->dims[2], 4);
        cr_assert_eq(y->dims[3], 3);
    }
    cr_assert_eq(sn_graph_sort(g), SHARDNET_OK);
    sn_graph_free(g);
}

Test(onnx_real, constant_model_keeps_the_node_and_its_tensor)
{
    char path[512];
    sn_graph *g;
    const sn_attr *a;
    const sn_value *t;
    float first, last;
    onnx_path(path, sizeof path, "test_constant/model.onnx");
    cr_assert_eq(sn_onnx_load(path, &g), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(sn_graph_sort(g), SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(g->nnodes, 1);
    cr_assert_str_eq(g->nodes[0].op_type, "Constant");
    a = sn_node_attr(&g->nodes[0], "value");
    cr_assert(a);
    cr_assert_eq(a->type, SN_ATTR_TENSOR);
    cr_assert_geq(a->tensor, 0);
    t = &g->values[a->tensor];
    cr_assert(t->flags & SN_VALUE_CONST);
    cr_assert_eq(t->dtype, SN_DT_FLOAT);
    cr_assert_eq(t->rank, 2);
    cr_assert_eq(t->nbytes, 25 * 4);
    cr_assert_not_null(t->owned, "float_data is converted into owned memory");
    memcpy(&first, t->data, 4);
    memcpy(&last, (const char *)t->data + 24 * 4, 4);
    cr_assert_float_eq(first, 1.764052391052246f, 1e-7);
    cr_assert_float_eq(last, 2.269754648208618f, 1e-7);
    cr_assert_eq(g->ninputs, 0);
    sn_graph_free(g);
}

Test(onnx_real, every_node_test_model_loads_or_fails_cleanly)
{
    /* All of the ONNX operator test models: no crash, and every failure
     * says something. */
    char path[1024];
    DIR *d;
    struct dirent *e;
    int ok = 0, failed = 0;
    onnx_path(path, sizeof path, "");
    d = opendir(ONNX_NODE_DIR);
    cr_assert(d);
    while ((e = readdir(d))) {
        sn_graph *g;
        struct stat sb;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s/model.onnx", ONNX_NODE_DIR,
                 e->d_name);
        if (stat(path, &sb) != 0)
            continue;
        if (sn_onnx_load(path, &g) == SHARDNET_OK) {
            if (sn_graph_sort(g) == SHARDNET_OK)
                ok++;
            else
                failed++;
            sn_graph_free(g);
        } else {
            cr_assert_neq(shardnet_last_error()[0], '\0');
            failed++;
        }
    }
    closedir(d);
    cr_log_info("ONNX node test models: %d loaded and sorted, %d refused",
                ok, failed);
    cr_assert_gt(ok, 500);
}

/* Models made by make_cases.py. */

Test(onnx_cases, initializers_listed_as_inputs_are_constants_not_inputs)
{
    char path[512];
    sn_graph *g;
    const sn_value *w, *b, *s, *q, *h, *x;
    float f[6];
    src_path(path, sizeof path, "onnx_cases/initializers_ir3.onnx");
    cr_assert_eq(sn_onnx_load(path, &g), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(sn_graph_sort(g), SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(g->ir_version, 3);
    cr_assert_eq(g->opset, 9);
    cr_assert_eq(g->ninputs, 1, "W and B are initializers");
    x = &g->values[g->inputs[0]];
    cr_assert_str_eq(x->name, "x");
    cr_assert_eq(x->rank, 2);
    cr_assert_eq(x->dims[0], -1);
    cr_assert_str_eq(x->dim_param[0], "N");
    cr_assert_eq(x->dims[1], 2);
    cr_assert_null(x->dim_param[1]);

    w = &g->values[sn_graph_find(g, "W")];
    cr_assert_eq(w->flags & (SN_VALUE_CONST | SN_VALUE_INPUT),
                 SN_VALUE_CONST);
    cr_assert_null(w->owned, "raw_data is referenced in place");
    cr_assert((const char *)w->data >= (const char *)g->maps[0].addr &&
              (const char *)w->data + w->nbytes <=
                  (const char *)g->maps[0].addr + g->maps[0].len);
    cr_assert_eq(w->nbytes, 24);
    memcpy(f, w->data, 24);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(f[i], (float)i);

    b = &g->values[sn_graph_find(g, "B")];
    cr_assert_not_null(b->owned, "float_data is converted");
    memcpy(f, b->data, 12);
    cr_assert_eq(f[0], 0.5f);
    cr_assert_eq(f[1], -1.0f);
    cr_assert_eq(f[2], 2.0f);

    s = &g->values[sn_graph_find(g, "shape")];
    cr_assert_eq(s->dtype, SN_DT_INT64);
    {
        int64_t v[2];
        memcpy(v, s->data, 16);
        cr_assert_eq(v[0], 3);
        cr_assert_eq(v[1], 2);
    }
    q = &g->values[sn_graph_find(g, "q")];
    cr_assert_eq(q->dtype, SN_DT_INT8);
    cr_assert_eq(q->nbytes, 4);
    cr_assert_eq(((const int8_t *)q->data)[0], -128);
    cr_assert_eq(((const int8_t *)q->data)[1], -1);
    cr_assert_eq(((const int8_t *)q->data)[3], 127);

    h = &g->values[sn_graph_find(g, "h")];
    cr_assert_eq(h->dtype, SN_DT_FLOAT, "value_info hint recorded");
    cr_assert_eq(h->rank, 2);
    cr_assert_str_eq(h->dim_param[0], "N");
    cr_assert_eq(h->dims[1], 3);

    {
        /* Constant value_ints: the node stays, with a "value" tensor. */
        const sn_node *c = NULL;
        const sn_attr *a;
        int64_t v[2];
        for (size_t i = 0; i < g->nnodes; i++)
            if (!strcmp(g->nodes[i].op_type, "Constant"))
                c = &g->nodes[i];
        cr_assert(c);
        cr_assert_str_eq(c->name, "axes_const");
        a = sn_node_attr(c, "value");
        cr_assert(a && a->type == SN_ATTR_TENSOR);
        cr_assert_eq(g->values[a->tensor].dtype, SN_DT_INT64);
        cr_assert_eq(g->values[a->tensor].rank, 1);
        cr_assert_eq(g->values[a->tensor].dims[0], 2);
        memcpy(v, g->values[a->tensor].data, 16);
        cr_assert_eq(v[0], 0);
        cr_assert_eq(v[1], 1);
        cr_assert(sn_node_attr(c, "value_ints"));
    }
    sn_graph_free(g);
}

Test(onnx_cases, external_data_is_mapped_from_the_model_folder)
{
    char path[512];
    sn_graph *g;
    const sn_value *w, *b;
    float f[12];
    int64_t iv[4];
    src_path(path, sizeof path, "onnx_cases/external/model.onnx");
    cr_assert_eq(sn_onnx_load(path, &g), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(g->nmaps, 2, "the model and weights.bin, mapped once");
    w = &g->values[sn_graph_find(g, "W")];
    b = &g->values[sn_graph_find(g, "b")];
    cr_assert_null(w->owned);
    cr_assert_eq(w->data, g->maps[1].addr);
    cr_assert_eq(w->nbytes, 48);
    memcpy(f, w->data, 48);
    for (int i = 0; i < 12; i++)
        cr_assert_eq(f[i], (float)i);
    cr_assert_eq((const char *)b->data, (const char *)g->maps[1].addr + 48);
    memcpy(iv, b->data, 32);
    cr_assert_eq(iv[3], 4);
    sn_graph_free(g);
}

Test(onnx_cases, external_data_is_refused_when_loading_from_memory)
{
    char path[512];
    size_t len;
    uint8_t *data;
    sn_graph *g;
    src_path(path, sizeof path, "onnx_cases/external/model.onnx");
    data = slurp(path, &len);
    cr_assert_neq(sn_onnx_load_memory(data, len, NULL, &g), SHARDNET_OK);
    cr_assert_null(g);
    cr_assert(strstr(shardnet_last_error(), "external data"), "%s",
              shardnet_last_error());
    cr_assert(strstr(shardnet_last_error(), "'W'"), "%s",
              shardnet_last_error());
    free(data);
}

/* Hand-made models. */

Test(onnx_build, minimal_model_loads_and_unknown_fields_are_skipped)
{
    pb g = relu_graph(), m;
    sn_graph *gr;
    put_int(&g, 999, 5);             /* unknown varint field */
    put_str(&g, 1000, "whatever");   /* unknown LEN field */
    put_f32(&g, 1001, 1.0f);         /* unknown 32-bit field */
    put_tag(&g, 1002, 1);            /* unknown 64-bit field */
    put_raw(&g, "12345678", 8);
    m = model(13, &g);
    put_str(&m, 77, "ignored");
    cr_assert_eq(load_pb(&m, &gr), SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(sn_graph_sort(gr), SHARDNET_OK);
    cr_assert_eq(gr->nnodes, 1);
    cr_assert_eq(gr->opset, 13);
    sn_graph_free(gr);
    pb_free(&m);
}

Test(onnx_build, ai_onnx_domain_counts_as_the_default_domain)
{
    pb g = relu_graph(), m = {0}, os = {0}, ml = {0};
    sn_graph *gr;
    put_msg(&m, 7, &g);
    put_str(&ml, 1, "ai.onnx.ml");
    put_int(&ml, 2, 3);
    put_msg(&m, 8, &ml);
    put_str(&os, 1, "ai.onnx");
    put_int(&os, 2, 17);
    put_msg(&m, 8, &os);
    cr_assert_eq(load_pb(&m, &gr), SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(gr->opset, 17);
    sn_graph_free(gr);
    pb_free(&m);
}

Test(onnx_build, packed_and_unpacked_repeated_fields_read_the_same)
{
    pb g = relu_graph(), m, n = node("c", "Conv", (const char *[]){"y", NULL},
                                       (const char *[]){"z", NULL});
    pb a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, packed = {0}, fl = {0};
    sn_graph *gr;
    const sn_node *c;
    const sn_attr *a;
    /* ints unpacked */
    put_str(&a1, 1, "strides");
    put_int(&a1, 8, 2);
    put_int(&a1, 8, 3);
    put_int(&a1, 20, SN_ATTR_INTS);
    put_msg(&n, 5, &a1);
    /* ints packed, with a negative value */
    put_str(&a2, 1, "pads");
    put_varint(&packed, 1);
    put_varint(&packed, (uint64_t)-1);
    put_varint(&packed, 300);
    put_bytes(&a2, 8, packed.p, packed.n);
    put_int(&a2, 20, SN_ATTR_INTS);
    put_msg(&n, 5, &a2);
    /* floats packed, no type field (IR 1 style) */
    put_str(&a3, 1, "scales");
    {
        float v[2] = {0.5f, -2.0f};
        for (int i = 0; i < 2; i++) {
            uint32_t u;
            uint8_t le[4];
            memcpy(&u, &v[i], 4);
            for (int k = 0; k < 4; k++)
                le[k] = (uint8_t)(u >> (8 * k));
            put_raw(&fl, le, 4);
        }
    }
    put_bytes(&a3, 7, fl.p, fl.n);
    put_msg(&n, 5, &a3);
    /* a string and a string list */
    put_str(&a4, 1, "mode");
    put_str(&a4, 4, "nearest");
    put_int(&a4, 20, SN_ATTR_STRING);
    put_msg(&n, 5, &a4);
    {
        pb a5 = {0}, a6 = {0};
        put_str(&a5, 1, "acts");
        put_str(&a5, 9, "Tanh");
        put_str(&a5, 9, "Relu");
        put_int(&a5, 20, SN_ATTR_STRINGS);
        put_msg(&n, 5, &a5);
        put_str(&a6, 1, "alpha");
        put_f32(&a6, 2, 0.25f);
        put_int(&a6, 20, SN_ATTR_FLOAT);
        put_msg(&n, 5, &a6);
    }
    put_msg(&g, 1, &n);
    m = model(13, &g);
    cr_assert_eq(load_pb(&m, &gr), SHARDNET_OK, "%s", shardnet_last_error());
    c = &gr->nodes[1];
    a = sn_node_attr(c, "strides");
    cr_assert_eq(a->count, 2);
    cr_assert_eq(a->ints[0], 2);
    cr_assert_eq(a->ints[1], 3);
    a = sn_node_attr(c, "pads");
    cr_assert_eq(a->count, 3);
    cr_assert_eq(a->ints[0], 1);
    cr_assert_eq(a->ints[1], -1);
    cr_assert_eq(a->ints[2], 300);
    a = sn_node_attr(c, "scales");
    cr_assert_eq(a->type, SN_ATTR_FLOATS);
    cr_assert_eq(a->count, 2);
    cr_assert_eq(a->floats[0], 0.5f);
    cr_assert_eq(a->floats[1], -2.0f);
    cr_assert_str_eq(sn_attr_string(c, "mode", "x"), "nearest");
    a = sn_node_attr(c, "acts");
    cr_assert_eq(a->count, 2);
    cr_assert_str_eq(a->strings[1], "Relu");
    cr_assert_eq(sn_attr_float(c, "alpha", 0), 0.25f);
    sn_graph_free(gr);
    pb_free(&m);
    pb_free(&packed);
    pb_free(&fl);
}

Test(onnx_build, omitted_optional_inputs_are_minus_one)
{
    pb g = {0}, m, n = node("clip", "Clip", (const char *[]){"x", "", "hi",
                                                             NULL},
                            (const char *[]){"y", NULL});
    pb in = value_info("x", NULL, -1), out = value_info("y", NULL, -1);
    float hi = 6.0f;
    pb t = tensor_raw("hi", 1, NULL, 0, &hi, 4);
    sn_graph *gr;
    put_msg(&g, 1, &n);
    put_msg(&g, 5, &t);
    put_msg(&g, 11, &in);
    put_msg(&g, 12, &out);
    m = model(13, &g);
    cr_assert_eq(load_pb(&m, &gr), SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(sn_graph_sort(gr), SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(gr->nodes[0].ninputs, 3);
    cr_assert_eq(gr->nodes[0].inputs[1], -1);
    cr_assert_eq(gr->values[gr->nodes[0].inputs[2]].rank, 0);
    {
        const uint8_t *d = gr->values[gr->nodes[0].inputs[2]].data;
        cr_assert(d >= m.p && d + 4 <= m.p + m.n, "raw_data used in place");
    }
    cr_assert_eq(gr->values[gr->inputs[0]].rank, -1, "no shape: unknown");
    sn_graph_free(gr);
    pb_free(&m);
}

Test(onnx_build, constant_value_float_becomes_a_scalar_tensor)
{
    pb g = {0}, m, n = node("k", "Constant", NULL, (const char *[]){"c", NULL});
    pb a = {0}, out = value_info("c", NULL, -1);
    sn_graph *gr;
    const sn_attr *at;
    float f;
    put_str(&a, 1, "value_float");
    put_f32(&a, 2, 1.5f);
    put_int(&a, 20, SN_ATTR_FLOAT);
    put_msg(&n, 5, &a);
    put_msg(&g, 1, &n);
    put_msg(&g, 12, &out);
    m = model(13, &g);
    cr_assert_eq(load_pb(&m, &gr), SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(sn_graph_sort(gr), SHARDNET_OK, "%s", shardnet_last_error());
    at = sn_node_attr(&gr->nodes[0], "value");
    cr_assert(at && at->type == SN_ATTR_TENSOR);
    cr_assert_eq(gr->values[at->tensor].rank, 0);
    cr_assert_eq(gr->values[at->tensor].dtype, SN_DT_FLOAT);
    memcpy(&f, gr->values[at->tensor].data, 4);
    cr_assert_eq(f, 1.5f);
    cr_assert_eq(sn_attr_float(&gr->nodes[0], "value_float", 0), 1.5f);
    sn_graph_free(gr);
    pb_free(&m);
}

/* A GRAPH attribute `name` holding sub (consumed), added to node n. */
static void put_graph_attr(pb *n, const char *name, pb *sub)
{
    pb a = {0};
    put_str(&a, 1, name);
    put_msg(&a, 6, sub);
    put_int(&a, 20, SN_ATTR_GRAPH);
    put_msg(n, 5, &a);
}

/* A subgraph of one node `op` from `in` to `out`, its output. */
static pb branch(const char *op, const char *in, const char *out)
{
    pb g = {0}, o = value_info(out, NULL, -1);
    pb n = node(NULL, op, (const char *[]){in, NULL},
                (const char *[]){out, NULL});
    put_msg(&g, 1, &n);
    put_str(&g, 2, "branch");
    put_msg(&g, 12, &o);
    return g;
}

/* relu_graph (x -> y) and an If on input c whose branches are then_g and
 * else_g (consumed), its output z. */
static pb if_model(pb *then_g, pb *else_g)
{
    pb g = relu_graph(), c = value_info("c", NULL, 0);
    pb n = node("if", "If", (const char *[]){"c", NULL},
                (const char *[]){"z", NULL});
    put_graph_attr(&n, "then_branch", then_g);
    put_graph_attr(&n, "else_branch", else_g);
    put_msg(&g, 1, &n);
    put_msg(&g, 11, &c);
    return model(13, &g);
}

Test(onnx_build, graph_attribute_is_a_subgraph_whose_outer_values_are_inputs)
{
    pb t = branch("Neg", "y", "t"), e = branch("Abs", "x", "e");
    pb m = if_model(&t, &e);
    sn_graph *gr;
    const sn_graph *sub;
    const sn_node *n;
    cr_assert_eq(load_pb(&m, &gr), SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(sn_graph_sort(gr), SHARDNET_OK, "%s", shardnet_last_error());
    n = &gr->nodes[1];
    cr_assert_str_eq(n->op_type, "If");
    /* c, then y (then_branch reads it), then x (else_branch) */
    cr_assert_eq(n->ninputs, 3);
    cr_assert_eq(sn_node_implicit_inputs(n), 2);
    cr_assert_eq(n->inputs[1], sn_graph_find(gr, "y"));
    cr_assert_eq(n->inputs[2], sn_graph_find(gr, "x"));
    cr_assert_eq(sn_node_attr(n, "then_branch")->type, SN_ATTR_GRAPH);
    sub = sn_node_graph(n, "then_branch");
    cr_assert_not_null(sub);
    cr_assert_eq(sub->nnodes, 1);
    cr_assert_eq(sub->noutputs, 1);
    cr_assert_eq(sub->nouter, 1);
    cr_assert_str_eq(sub->values[sub->outer[0]].name, "y");
    cr_assert(sub->values[sub->outer[0]].flags & SN_VALUE_OUTER);
    cr_assert_eq(sub->opset, 13);
    sn_graph_free(gr);
    pb_free(&m);
}

Test(onnx_build, copies_of_a_graph_attribute_share_its_subgraph)
{
    pb t = branch("Neg", "y", "t"), e = branch("Abs", "x", "e");
    pb m = if_model(&t, &e);
    sn_graph *gr;
    sn_attr copy;
    cr_assert_eq(load_pb(&m, &gr), SHARDNET_OK, "%s", shardnet_last_error());
    const sn_attr *a = sn_node_attr(&gr->nodes[1], "else_branch");
    cr_assert(sn_attr_copy(&copy, a, NULL));
    cr_assert_eq(copy.graph, a->graph);
    sn_graph_free(gr); /* the copy keeps the subgraph */
    cr_assert_eq(copy.graph->nnodes, 1);
    cr_assert_str_eq(copy.graph->nodes[0].op_type, "Abs");
    sn_graph_free(copy.graph);
    free(copy.name);
    pb_free(&m);
}

/* Hostile models: each must give an error that says what and why. */

Test(onnx_hostile, empty_file_is_an_error)
{
    char dir[64], path[128];
    sn_graph *g = (sn_graph *)1;
    make_tmpdir("onnx-test", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/empty.onnx", dir);
    spit(path, "", 0);
    cr_assert_neq(sn_onnx_load(path, &g), SHARDNET_OK);
    cr_assert_null(g);
    cr_assert(strstr(shardnet_last_error(), "empty"), "%s",
              shardnet_last_error());
    cr_assert_neq(sn_onnx_load_memory("", 0, NULL, &g), SHARDNET_OK);
    rm_tmpdir(dir);
}

Test(onnx_hostile, missing_file_is_an_io_error)
{
    sn_graph *g;
    cr_assert_eq(sn_onnx_load("/nonexistent/model.onnx", &g),
                 SHARDNET_IO_ERROR);
    cr_assert(strstr(shardnet_last_error(), "/nonexistent/model.onnx"));
}

Test(onnx_hostile, random_bytes_are_errors)
{
    uint8_t buf[512];
    uint64_t s = 0x9e3779b97f4a7c15u;
    for (int round = 0; round < 2000; round++) {
        sn_graph *g;
        size_t n = (size_t)(round % 512) + 1;
        for (size_t i = 0; i < n; i++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            buf[i] = (uint8_t)s;
        }
        cr_assert_neq(sn_onnx_load_memory(buf, n, NULL, &g), SHARDNET_OK);
        cr_assert_null(g);
        cr_assert_neq(shardnet_last_error()[0], '\0');
    }
}

Test(onnx_hostile, every_truncation_of_a_real_model_is_an_error)
{
    char path[512];
    size_t len;
    uint8_t *data;
    onnx_path(path, sizeof path, "test_conv_with_strides_padding/model.onnx");
    data = slurp(path, &len);
    for (size_t n = 0; n < len; n++) {
        /* A copy of exactly n bytes, so ASan sees any read past it. */
        uint8_t *cut = malloc(n ? n : 1);
        sn_graph *g;
        memcpy(cut, data, n);
        cr_assert_neq(sn_onnx_load_memory(cut, n, NULL, &g), SHARDNET_OK,
                      "prefix of %zu of %zu bytes loaded", n, len);
        cr_assert_neq(shardnet_last_error()[0], '\0');
        free(cut);
    }
    free(data);
}

Test(onnx_hostile, varint_of_11_bytes_is_an_error)
{
    pb m = {0};
    put_tag(&m, 1, 0);
    for (int i = 0; i < 10; i++)
        put_raw(&m, "\xff", 1);
    put_raw(&m, "\x01", 1);
    expect_error(&m, "varint longer than 10 bytes");
    pb_free(&m);
}

Test(onnx_hostile, length_beyond_the_end_is_an_error)
{
    pb m = {0};
    put_tag(&m, 7, 2);
    put_varint(&m, 1000);
    put_raw(&m, "abc", 3);
    expect_error(&m, "past the end");
    pb_free(&m);
}

Test(onnx_hostile, groups_are_an_error)
{
    pb m = {0};
    put_tag(&m, 7, 3);
    expect_error(&m, "groups");
    pb_free(&m);
}

static void initializer_case(pb *t, const char *needle)
{
    pb g = relu_graph(), m;
    put_msg(&g, 5, t);
    m = model(13, &g);
    expect_error(&m, needle);
    expect_error(&m, "'w'");
    pb_free(&m);
}

Test(onnx_hostile, dims_giving_more_than_2_pow_34_elements_are_an_error)
{
    static const int64_t d[] = {1 << 20, 1 << 20};
    pb t = tensor_raw("w", 1, d, 2, "abcd", 4);
    initializer_case(&t, "2^34");
}

Test(onnx_hostile, raw_data_shorter_than_the_dims_is_an_error)
{
    static const int64_t d[] = {2, 3};
    pb t = tensor_raw("w", 1, d, 2, "0123456789abcdefghij", 20);
    initializer_case(&t, "raw_data holds 20 bytes");
}

Test(onnx_hostile, raw_data_longer_than_the_dims_is_an_error)
{
    static const int64_t d[] = {1};
    pb t = tensor_raw("w", 1, d, 1, "0123456789", 8);
    initializer_case(&t, "raw_data holds 8 bytes");
}

Test(onnx_hostile, typed_data_count_mismatch_is_an_error)
{
    static const int64_t d[] = {3};
    pb t = tensor_raw("w", 1, d, 1, NULL, 0);
    put_f32(&t, 4, 1.0f);
    put_f32(&t, 4, 2.0f);
    initializer_case(&t, "float_data holds 2 values");
}

Test(onnx_hostile, negative_dim_is_an_error)
{
    static const int64_t d[] = {-1, 4};
    pb t = tensor_raw("w", 1, d, 2, NULL, 0);
    initializer_case(&t, "negative");
}

Test(onnx_hostile, rank_9_is_an_error)
{
    static const int64_t d[] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    pb t = tensor_raw("w", 1, d, 9, "abcd", 4);
    initializer_case(&t, "rank 9");
}

Test(onnx_hostile, string_tensor_is_refused)
{
    static const int64_t d[] = {1};
    pb t = tensor_raw("w", 8, d, 1, NULL, 0);
    put_str(&t, 6, "hello");
    initializer_case(&t, "string");
}

Test(onnx_hostile, tensor_without_data_is_an_error)
{
    static const int64_t d[] = {4};
    pb t = tensor_raw("w", 1, d, 1, NULL, 0);
    initializer_case(&t, "no data");
}

Test(onnx_hostile, rank_9_shape_hint_is_an_error)
{
    static const int64_t d[] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    pb g = relu_graph(), m, vi = value_info("y", d, 9);
    put_msg(&g, 13, &vi);
    m = model(13, &g);
    expect_error(&m, "more than 8 dimensions");
    expect_error(&m, "'y'");
    pb_free(&m);
}

Test(onnx_hostile, cycle_between_two_nodes_names_a_node)
{
    pb g = {0}, m, in = value_info("x", NULL, -1), out = value_info("b", NULL,
                                                                    -1);
    pb n1 = node("first", "Add", (const char *[]){"x", "b", NULL},
                 (const char *[]){"a", NULL});
    pb n2 = node("second", "Relu", (const char *[]){"a", NULL},
                 (const char *[]){"b", NULL});
    sn_graph *gr;
    put_msg(&g, 1, &n1);
    put_msg(&g, 1, &n2);
    put_msg(&g, 11, &in);
    put_msg(&g, 12, &out);
    m = model(13, &g);
    cr_assert_eq(load_pb(&m, &gr), SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_neq(sn_graph_sort(gr), SHARDNET_OK);
    cr_assert(strstr(shardnet_last_error(), "cycle"), "%s",
              shardnet_last_error());
    cr_assert(strstr(shardnet_last_error(), "node 'first' (Add)") ||
                  strstr(shardnet_last_error(), "node 'second' (Relu)"),
              "%s", shardnet_last_error());
    sn_graph_free(gr);
    pb_free(&m);
}

Test(onnx_hostile, node_input_naming_nothing_is_an_error)
{
    pb g = relu_graph(), m;
    pb n = node("lost", "Add", (const char *[]){"y", "ghost", NULL},
                (const char *[]){"z", NULL});
    put_msg(&g, 1, &n);
    m = model(13, &g);
    expect_error(&m, "node 'lost' (Add): input 'ghost' is not produced by "
                     "any node, nor a graph input or initializer");
    pb_free(&m);
}

Test(onnx_hostile, duplicate_output_names_are_an_error)
{
    pb g = relu_graph(), m;
    pb n = node("again", "Sigmoid", X_ONLY, (const char *[]){"y", NULL});
    put_msg(&g, 1, &n);
    m = model(13, &g);
    expect_error(&m, "value 'y' is produced twice");
    pb_free(&m);
}

Test(onnx_hostile, node_output_shadowing_a_graph_input_is_an_error)
{
    pb g = relu_graph(), m;
    pb n = node("shadow", "Sigmoid", (const char *[]){"y", NULL}, X_ONLY);
    put_msg(&g, 1, &n);
    m = model(13, &g);
    expect_error(&m, "output 'x' is also a graph input");
    pb_free(&m);
}

Test(onnx_hostile, duplicate_initializers_are_an_error)
{
    pb g = relu_graph(), m;
    float f = 1;
    pb t1 = tensor_raw("w", 1, NULL, 0, &f, 4), t2 = tensor_raw("w", 1, NULL,
                                                                0, &f, 4);
    put_msg(&g, 5, &t1);
    put_msg(&g, 5, &t2);
    m = model(13, &g);
    expect_error(&m, "initializer 'w' is defined twice");
    pb_free(&m);
}

Test(onnx_hostile, sparse_initializer_is_refused)
{
    pb g = relu_graph(), m, s = {0};
    put_int(&s, 3, 4);
    put_msg(&g, 15, &s);
    m = model(13, &g);
    expect_error(&m, "sparse initializers are not supported");
    pb_free(&m);
}

Test(onnx_hostile, opset_0_and_99_are_refused_by_number_1_to_6_load)
{
    pb g = relu_graph(), m = model(0, &g);
    sn_graph *sg = NULL;
    expect_error(&m, "opset 0");
    pb_free(&m);
    g = relu_graph();
    m = model(99, &g);
    expect_error(&m, "opset 99");
    pb_free(&m);
    for (int64_t v = 1; v <= 6; v += 5) {
        g = relu_graph();
        m = model(v, &g);
        cr_assert_eq(load_pb(&m, &sg), SHARDNET_OK, "opset %lld: %s",
                     (long long)v, shardnet_last_error());
        cr_assert_eq(sg->opset, v);
        sn_graph_free(sg);
        sg = NULL;
        pb_free(&m);
    }
}

Test(onnx_hostile, model_without_graph_or_opset_is_an_error)
{
    pb m = {0}, os = {0}, g = relu_graph();
    put_int(&m, 1, 8);
    put_str(&os, 1, "");
    put_int(&os, 2, 13);
    put_msg(&m, 8, &os);
    expect_error(&m, "no graph");
    pb_free(&m);
    put_msg(&m, 7, &g);
    expect_error(&m, "no opset_import");
    pb_free(&m);
}

/* Opsets 1 to 23 load; a newer one is refused, naming the range. */
Test(onnx_hostile, an_opset_past_23_is_refused_naming_the_range)
{
    for (int64_t opset = 19; opset <= 24; opset++) {
        pb g = relu_graph(), m = model(opset, &g);
        sn_graph *gr = NULL;
        if (opset <= 23) {
            cr_assert_eq(load_pb(&m, &gr), SHARDNET_OK, "opset %lld: %s",
                         (long long)opset, shardnet_last_error());
            cr_assert_eq(gr->opset, opset);
            sn_graph_free(gr);
        } else {
            expect_error(&m, "opset 24 of the default ONNX domain is not "
                             "supported (supported: 1 to 23)");
        }
        pb_free(&m);
    }
}

/* A tensor of a type ONNX added after bfloat16 is refused by name. */
Test(onnx_hostile, int4_and_float8_tensors_are_refused_naming_the_type)
{
    static const int64_t d[] = {4};
    pb t = tensor_raw("w", 22, d, 1, "\x21\x43", 2);
    initializer_case(&t, "data type 22 (int4) is not supported");
    t = tensor_raw("w", 17, d, 1, "abcd", 4);
    initializer_case(&t, "data type 17 (float8e4m3fn) is not supported");
}

Test(onnx_hostile, wrong_wire_type_is_an_error_naming_the_field)
{
    pb g = relu_graph(), m;
    pb n = node("bad", "Relu", (const char *[]){"y", NULL},
                (const char *[]){"z", NULL});
    put_int(&n, 4, 12); /* op_type as a varint */
    put_msg(&g, 1, &n);
    m = model(13, &g);
    expect_error(&m, "node 'bad' (Relu): malformed protobuf: op_type");
    pb_free(&m);
}

Test(onnx_hostile, attribute_errors_name_node_and_attribute)
{
    pb g = relu_graph(), m;
    pb n = node("c1", "Conv", (const char *[]){"y", NULL},
                (const char *[]){"z", NULL});
    pb a = {0};
    put_str(&a, 1, "pads");
    put_tag(&a, 8, 2);
    put_varint(&a, 2);
    put_raw(&a, "\xff\xff", 2); /* packed varint cut off */
    put_msg(&n, 5, &a);
    put_msg(&g, 1, &n);
    m = model(13, &g);
    expect_error(&m, "node 'c1' (Conv): attribute 'pads': malformed");
    pb_free(&m);
}

Test(onnx_hostile, duplicate_attribute_names_are_an_error)
{
    pb g = relu_graph(), m;
    pb n = node("c2", "Conv", (const char *[]){"y", NULL},
                (const char *[]){"z", NULL});
    for (int i = 0; i < 3; i++) {
        pb a = {0};
        put_str(&a, 1, i == 1 ? "group" : "pads");
        put_int(&a, 3, 1);
        put_int(&a, 20, SN_ATTR_INT);
        put_msg(&n, 5, &a);
    }
    put_msg(&g, 1, &n);
    m = model(13, &g);
    expect_error(&m, "node 'c2' (Conv): attribute 'pads' given twice");
    pb_free(&m);
}

Test(onnx_hostile, subgraph_reading_a_name_nothing_defines_is_an_error)
{
    pb t = branch("Neg", "nowhere", "t"), e = branch("Abs", "x", "e");
    pb m = if_model(&t, &e);
    expect_error(&m, "input 'nowhere' is not produced by any node");
    pb_free(&m);
}

Test(onnx_hostile, subgraph_errors_name_the_node_and_attribute)
{
    pb t = branch("Neg", "y", "t"), e = {0}, bad = {0};
    pb m;
    /* a node of the branch with no op_type */
    put_str(&bad, 1, "y");
    put_msg(&e, 1, &bad);
    m = if_model(&t, &e);
    expect_error(&m, "node 'if' (If): attribute 'else_branch'");
    expect_error(&m, "has no op_type");
    pb_free(&m);
}

Test(onnx_hostile, graph_attribute_without_a_graph_is_an_error)
{
    pb g = relu_graph(), a = {0}, m;
    pb n = node("if", "If", (const char *[]){"y", NULL},
                (const char *[]){"z", NULL});
    put_str(&a, 1, "then_branch");
    put_int(&a, 20, SN_ATTR_GRAPH);
    put_msg(&n, 5, &a);
    put_msg(&g, 1, &n);
    m = model(13, &g);
    expect_error(&m, "attribute of type GRAPH has no graph");
    pb_free(&m);
}

Test(onnx_hostile, subgraphs_nested_too_deep_are_an_error)
{
    pb inner = branch("Neg", "x", "t"), m;
    for (int i = 0; i < SN_MAX_GRAPH_DEPTH + 2; i++) {
        pb g = {0}, o = value_info("t", NULL, -1);
        pb n = node(NULL, "If", (const char *[]){"x", NULL},
                    (const char *[]){"t", NULL});
        put_graph_attr(&n, "then_branch", &inner);
        put_msg(&g, 1, &n);
        put_msg(&g, 12, &o);
        inner = g;
    }
    {
        pb x = value_info("x", NULL, 0);
        put_msg(&inner, 11, &x);
    }
    m = model(13, &inner);
    expect_error(&m, "subgraphs nest more than 32 deep");
    pb_free(&m);
}

Test(onnx_hostile, constants_with_longest_names_get_distinct_tensors)
{
    /* Two Constant nodes with the same 4096-byte name: the generated tensor
     * names must still differ (and the search for one must end). */
    char *name = malloc(SN_MAX_NAME + 1);
    pb g = {0}, m;
    sn_graph *gr;
    const sn_attr *a0, *a1;
    memset(name, 'k', SN_MAX_NAME);
    name[SN_MAX_NAME] = '\0';
    for (int i = 0; i < 2; i++) {
        pb n = node(name, "Constant", NULL,
                    (const char *[]){i ? "c1" : "c0", NULL});
        pb a = {0}, out = value_info(i ? "c1" : "c0", NULL, -1);
        put_str(&a, 1, "value_int");
        put_int(&a, 3, 40 + i);
        put_int(&a, 20, SN_ATTR_INT);
        put_msg(&n, 5, &a);
        put_msg(&g, 1, &n);
        put_msg(&g, 12, &out);
    }
    m = model(13, &g);
    cr_assert_eq(load_pb(&m, &gr), SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(sn_graph_sort(gr), SHARDNET_OK, "%s", shardnet_last_error());
    a0 = sn_node_attr(&gr->nodes[0], "value");
    a1 = sn_node_attr(&gr->nodes[1], "value");
    cr_assert_neq(a0->tensor, a1->tensor);
    cr_assert_eq(*(const int64_t *)gr->values[a1->tensor].data, 41);
    sn_graph_free(gr);
    pb_free(&m);
    free(name);
}

Test(onnx_hostile, names_longer_than_the_limit_are_errors)
{
    char *name = malloc(SN_MAX_NAME + 2);
    pb g = relu_graph(), m;
    pb n;
    memset(name, 'v', SN_MAX_NAME + 1);
    name[SN_MAX_NAME + 1] = '\0';
    n = node("long", "Relu", (const char *[]){"y", NULL},
             (const char *[]){name, NULL});
    put_msg(&g, 1, &n);
    m = model(13, &g);
    expect_error(&m, "output name is 4097 bytes long");
    pb_free(&m);
    free(name);
}

Test(onnx_hostile, constant_without_value_is_an_error)
{
    pb g = {0}, m, n = node("k", "Constant", NULL, (const char *[]){"c", NULL});
    pb out = value_info("c", NULL, -1);
    put_msg(&g, 1, &n);
    put_msg(&g, 12, &out);
    m = model(13, &g);
    expect_error(&m, "node 'k' (Constant): Constant needs exactly one value");
    pb_free(&m);
}

Test(onnx_hostile, names_with_nul_bytes_are_errors)
{
    pb g = {0}, m, n = {0}, in = value_info("x", NULL, -1);
    put_str(&n, 1, "x");
    put_bytes(&n, 2, "y\0z", 3);
    put_str(&n, 4, "Relu");
    put_msg(&g, 1, &n);
    put_msg(&g, 11, &in);
    m = model(13, &g);
    expect_error(&m, "NUL");
    pb_free(&m);
}

/* External data, written into a temporary folder. */

static shardnet_status load_external(const char *loc, const char *offset,
                                     const char *length, size_t file_bytes,
                                     sn_graph **gr, char *dir, size_t cap)
{
    static const int64_t d[] = {2};
    char path[256];
    pb g = relu_graph(), m, t = tensor_raw("w", 1, d, 1, NULL, 0);
    pb e1 = {0}, e2 = {0}, e3 = {0};
    uint8_t bytes[64];
    shardnet_status st;
    for (size_t i = 0; i < sizeof bytes; i++)
        bytes[i] = (uint8_t)i;
    make_tmpdir("onnx-test", dir, cap);
    put_str(&e1, 1, "location");
    put_str(&e1, 2, loc);
    put_msg(&t, 13, &e1);
    if (offset) {
        put_str(&e2, 1, "offset");
        put_str(&e2, 2, offset);
        put_msg(&t, 13, &e2);
    }
    if (length) {
        put_str(&e3, 1, "length");
        put_str(&e3, 2, length);
        put_msg(&t, 13, &e3);
    }
    put_int(&t, 14, 1);
    put_msg(&g, 5, &t);
    m = model(13, &g);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    spit(path, m.p, m.n);
    snprintf(path, sizeof path, "%s/w.bin", dir);
    spit(path, bytes, file_bytes);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    st = sn_onnx_load(path, gr);
    pb_free(&m);
    return st;
}

Test(onnx_external, offset_and_length_select_bytes_of_the_file)
{
    char dir[64];
    sn_graph *g;
    cr_assert_eq(load_external("w.bin", "8", "8", 64, &g, dir, sizeof dir),
                 SHARDNET_OK, "%s", shardnet_last_error());
    {
        const sn_value *w = &g->values[sn_graph_find(g, "w")];
        cr_assert_eq(((const uint8_t *)w->data)[0], 8);
        cr_assert_eq(((const uint8_t *)w->data)[7], 15);
        cr_assert_null(w->owned);
    }
    sn_graph_free(g);
    rm_tmpdir(dir);
}

Test(onnx_external, dotdot_location_is_refused)
{
    char dir[64];
    sn_graph *g;
    cr_assert_neq(load_external("../x", NULL, NULL, 8, &g, dir, sizeof dir),
                  SHARDNET_OK);
    cr_assert(strstr(shardnet_last_error(), "'..'"), "%s",
              shardnet_last_error());
    cr_assert(strstr(shardnet_last_error(), "'w'"));
    rm_tmpdir(dir);
    cr_assert_neq(load_external("sub/../../w.bin", NULL, NULL, 8, &g, dir,
                                sizeof dir),
                  SHARDNET_OK);
    rm_tmpdir(dir);
}

Test(onnx_external, absolute_location_is_refused)
{
    char dir[64];
    sn_graph *g;
    cr_assert_neq(load_external("/etc/passwd", NULL, NULL, 8, &g, dir,
                                sizeof dir),
                  SHARDNET_OK);
    cr_assert(strstr(shardnet_last_error(), "absolute"), "%s",
              shardnet_last_error());
    rm_tmpdir(dir);
}

Test(onnx_external, offset_past_the_end_is_refused)
{
    char dir[64];
    sn_graph *g;
    cr_assert_neq(load_external("w.bin", "100", "8", 64, &g, dir, sizeof dir),
                  SHARDNET_OK);
    cr_assert(strstr(shardnet_last_error(), "past the end"), "%s",
              shardnet_last_error());
    rm_tmpdir(dir);
    cr_assert_neq(load_external("w.bin", "60", "8", 64, &g, dir, sizeof dir),
                  SHARDNET_OK);
    cr_assert(strstr(shardnet_last_error(), "past the end"), "%s",
              shardnet_last_error());
    rm_tmpdir(dir);
}

Test(onnx_external, length_must_match_the_dims)
{
    char dir[64];
    sn_graph *g;
    cr_assert_neq(load_external("w.bin", "0", "4", 64, &g, dir, sizeof dir),
                  SHARDNET_OK);
    cr_assert(strstr(shardnet_last_error(), "length 4"), "%s",
              shardnet_last_error());
    rm_tmpdir(dir);
    cr_assert_neq(load_external("w.bin", NULL, NULL, 64, &g, dir, sizeof dir),
                  SHARDNET_OK, "length defaults to the rest of the file");
    rm_tmpdir(dir);
    cr_assert_neq(load_external("missing.bin", NULL, NULL, 8, &g, dir,
                                sizeof dir),
                  SHARDNET_OK);
    cr_assert(strstr(shardnet_last_error(), "missing.bin"));
    rm_tmpdir(dir);
}

/* Crash regressions found by tests/fuzz_onnx.c: every saved input loads
 * and sorts, or is refused with a reason, without crashing; the ones named
 * here have a known outcome, and must be found. */
static const struct {
    const char *file;
    shardnet_status load, sort;
    size_t nodes;
} fuzz_known[] = {
    /* A graph of no node: sorting it copied from a NULL array. */
    {"sort-empty-graph-memcpy-null.onnx", SHARDNET_OK, SHARDNET_OK, 0},
};

Test(onnx_fuzz, every_saved_fuzz_input_loads_without_crashing)
{
    char dir[512], path[1024];
    DIR *d;
    struct dirent *e;
    int files = 0;
    size_t known = 0;
    src_path(dir, sizeof dir, "fuzz_corpus");
    d = opendir(dir);
    cr_assert(d, "%s: %s", dir, strerror(errno));
    while ((e = readdir(d))) {
        struct stat sb;
        uint8_t *data;
        size_t len;
        sn_graph *g = NULL;
        shardnet_status load, sort = SHARDNET_OK;
        size_t nodes = 0;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (e->d_name[0] == '.' || stat(path, &sb) || !S_ISREG(sb.st_mode))
            continue;
        data = slurp(path, &len);
        load = sn_onnx_load_memory(data, len, NULL, &g);
        if (load == SHARDNET_OK) {
            sort = sn_graph_sort(g);
            nodes = g->nnodes;
            sn_graph_free(g);
            cr_assert(sort == SHARDNET_OK || *shardnet_last_error(),
                      "%s: sorting failed without a reason", e->d_name);
        } else {
            cr_assert(*shardnet_last_error(),
                      "%s: refused without a reason", e->d_name);
        }
        free(data);
        files++;
        for (size_t k = 0; k < sizeof fuzz_known / sizeof fuzz_known[0];
             k++) {
            if (strcmp(e->d_name, fuzz_known[k].file))
                continue;
            known++;
            cr_assert_eq(load, fuzz_known[k].load, "%s: load gives %d",
                         e->d_name, (int)load);
            cr_assert_eq(sort, fuzz_known[k].sort, "%s: sort gives %d (%s)",
                         e->d_name, (int)sort, shardnet_last_error());
            cr_assert_eq(nodes, fuzz_known[k].nodes, "%s: %zu nodes",
                         e->d_name, nodes);
        }
    }
    closedir(d);
    cr_assert_geq(files, 1, "no fuzz regression input in %s", dir);
    cr_assert_eq(known, sizeof fuzz_known / sizeof fuzz_known[0],
                 "%zu of the %zu named fuzz regression inputs are in %s",
                 known, sizeof fuzz_known / sizeof fuzz_known[0], dir);
    cr_log_info("%d fuzz regression inputs", files);
}

/* The graph IR on its own. */

Test(graph, sort_keeps_file_order_among_ready_nodes)
{
    sn_graph *g = sn_graph_new();
    int x = sn_graph_add_value(g, "x");
    int a = sn_graph_add_value(g, "a"), b = sn_graph_add_value(g, "b");
    int c = sn_graph_add_value(g, "c");
    g->values[x].flags |= SN_VALUE_INPUT;
    /* file order: c = f(a, b), a = f(x), b = f(x) */
    cr_assert_eq(sn_graph_add_node(g, "nc", "Add", "", (int[]){a, b}, 2,
                                   &c, 1), 0);
    cr_assert_eq(sn_graph_add_node(g, "na", "Relu", "", &x, 1, &a, 1), 1);
    cr_assert_eq(sn_graph_add_node(g, "nb", "Relu", "", &x, 1, &b, 1), 2);
    cr_assert_eq(sn_graph_sort(g), SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_str_eq(g->nodes[0].name, "na");
    cr_assert_str_eq(g->nodes[1].name, "nb");
    cr_assert_str_eq(g->nodes[2].name, "nc");
    cr_assert_eq(g->values[c].producer, 2);
    cr_assert_eq(g->values[a].producer, 0);
    cr_assert_eq(g->values[x].producer, -1);
    cr_assert_eq(sn_graph_sort(g), SHARDNET_OK);
    cr_assert_str_eq(g->nodes[0].name, "na", "sorting twice changes nothing");
    sn_graph_free(g);
}

Test(graph, sort_handles_a_reversed_chain_of_100k_nodes)
{
    enum { N = 100000 };
    sn_graph *g = sn_graph_new();
    char name[32];
    int *v = malloc((N + 1) * sizeof *v);
    cr_assert(v);
    for (int i = 0; i <= N; i++) {
        snprintf(name, sizeof name, "v%d", i);
        v[i] = sn_graph_add_value(g, name);
        cr_assert_eq(v[i], i);
    }
    g->values[0].flags |= SN_VALUE_INPUT;
    for (int i = N - 1; i >= 0; i--)
        cr_assert_geq(sn_graph_add_node(g, NULL, "Relu", NULL, &v[i], 1,
                                        &v[i + 1], 1), 0);
    cr_assert_str_eq(g->nodes[0].name, "Relu#0");
    cr_assert_eq(sn_graph_sort(g), SHARDNET_OK, "%s", shardnet_last_error());
    for (int i = 0; i < N; i++)
        cr_assert_eq(g->nodes[i].inputs[0], i);
    for (int i = 0; i <= N; i += 997) {
        snprintf(name, sizeof name, "v%d", i);
        cr_assert_eq(sn_graph_find(g, name), i);
    }
    cr_assert_eq(sn_graph_add_value(g, "v5"), -1, "names are unique");
    cr_assert(strstr(shardnet_last_error(), "'v5'"));
    free(v);
    sn_graph_free(g);
}

Test(graph, dead_nodes_are_skipped_by_sort)
{
    sn_graph *g = sn_graph_new();
    int x = sn_graph_add_value(g, "x"), y = sn_graph_add_value(g, "y");
    g->values[x].flags |= SN_VALUE_INPUT;
    sn_graph_add_node(g, "gone", "Relu", "", &x, 1, &y, 1);
    sn_graph_add_node(g, "kept", "Relu", "", &x, 1, &y, 1);
    g->nodes[0].dead = 1;
    cr_assert_eq(sn_graph_sort(g), SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_str_eq(g->nodes[0].name, "kept");
    cr_assert_str_eq(g->nodes[1].name, "gone");
    cr_assert_eq(g->values[y].producer, 0);
    sn_graph_free(g);
}

Test(graph, add_node_refuses_out_of_range_values)
{
    sn_graph *g = sn_graph_new();
    int bad = 5;
    cr_assert_eq(sn_graph_add_node(g, "n", "Relu", "", &bad, 1, NULL, 0), -1);
    cr_assert(strstr(shardnet_last_error(), "out of range"));
    sn_graph_free(g);
}

Test(graph, dtype_sizes_and_names)
{
    cr_assert_eq(sn_dtype_size(SN_DT_FLOAT), 4);
    cr_assert_eq(sn_dtype_size(SN_DT_INT64), 8);
    cr_assert_eq(sn_dtype_size(SN_DT_BOOL), 1);
    cr_assert_eq(sn_dtype_size(SN_DT_COMPLEX128), 16);
    cr_assert_eq(sn_dtype_size(SN_DT_STRING), 0);
    cr_assert_eq(sn_dtype_size((sn_dtype)99), 0);
    cr_assert_str_eq(sn_dtype_name(SN_DT_FLOAT16), "float16");
    cr_assert_str_eq(sn_dtype_name((sn_dtype)99), "?");
}

/* Tensor files. */

Test(tensorfile, pb_tensors_of_the_onnx_test_data_add_up)
{
    char p0[512], p1[512], p2[512];
    sn_host_tensor a, b, s;
    onnx_path(p0, sizeof p0, "test_add/test_data_set_0/input_0.pb");
    onnx_path(p1, sizeof p1, "test_add/test_data_set_0/input_1.pb");
    onnx_path(p2, sizeof p2, "test_add/test_data_set_0/output_0.pb");
    cr_assert_eq(sn_tensor_load(p0, &a), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(sn_tensor_load_pb(p1, &b), SHARDNET_OK);
    cr_assert_eq(sn_tensor_load(p2, &s), SHARDNET_OK);
    cr_assert_eq(a.dtype, SN_DT_FLOAT);
    cr_assert_eq(a.rank, 3);
    cr_assert_eq(a.dims[0], 3);
    cr_assert_eq(a.dims[2], 5);
    cr_assert_eq(a.nbytes, 60 * 4);
    cr_assert_str_eq(a.name, "x");
    for (int i = 0; i < 60; i++) {
        float x = ((float *)a.data)[i], y = ((float *)b.data)[i];
        cr_assert_float_eq(((float *)s.data)[i], x + y, 1e-6);
    }
    sn_host_tensor_free(&a);
    sn_host_tensor_free(&b);
    sn_host_tensor_free(&s);
    cr_assert_null(a.data);
}

Test(tensorfile, pb_tensor_with_typed_int64_data_loads)
{
    char dir[64], path[128];
    static const int64_t d[] = {3};
    pb t = tensor_raw("ids", SN_DT_INT64, d, 1, NULL, 0);
    sn_host_tensor h;
    put_int(&t, 7, 5);
    put_int(&t, 7, -6);
    put_int(&t, 7, INT64_MAX);
    make_tmpdir("onnx-test", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/t.pb", dir);
    spit(path, t.p, t.n);
    cr_assert_eq(sn_tensor_load(path, &h), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(h.dtype, SN_DT_INT64);
    cr_assert_eq(((int64_t *)h.data)[0], 5);
    cr_assert_eq(((int64_t *)h.data)[1], -6);
    cr_assert_eq(((int64_t *)h.data)[2], INT64_MAX);
    sn_host_tensor_free(&h);
    pb_free(&t);
    /* and a truncated one */
    t = tensor_raw("w", 1, d, 1, "abcdefgh", 8);
    spit(path, t.p, t.n);
    cr_assert_neq(sn_tensor_load(path, &h), SHARDNET_OK);
    cr_assert(strstr(shardnet_last_error(), "tensor 'w'"), "%s",
              shardnet_last_error());
    cr_assert_null(h.data);
    pb_free(&t);
    rm_tmpdir(dir);
}

Test(tensorfile, npy_files_written_by_numpy_load)
{
    char path[512];
    sn_host_tensor t;
    src_path(path, sizeof path, "onnx_cases/f32_2x3.npy");
    cr_assert_eq(sn_tensor_load(path, &t), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(t.dtype, SN_DT_FLOAT);
    cr_assert_eq(t.rank, 2);
    cr_assert_eq(t.dims[0], 2);
    cr_assert_eq(t.dims[1], 3);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(((float *)t.data)[i], (float)i);
    sn_host_tensor_free(&t);

    src_path(path, sizeof path, "onnx_cases/i64_scalar.npy");
    cr_assert_eq(sn_tensor_load_npy(path, &t), SHARDNET_OK);
    cr_assert_eq(t.rank, 0);
    cr_assert_eq(*(int64_t *)t.data, -7);
    sn_host_tensor_free(&t);

    src_path(path, sizeof path, "onnx_cases/u8_5.npy");
    cr_assert_eq(sn_tensor_load_npy(path, &t), SHARDNET_OK);
    cr_assert_eq(t.dtype, SN_DT_UINT8);
    cr_assert_eq(((uint8_t *)t.data)[4], 255);
    sn_host_tensor_free(&t);

    src_path(path, sizeof path, "onnx_cases/b1_2x2.npy");
    cr_assert_eq(sn_tensor_load_npy(path, &t), SHARDNET_OK);
    cr_assert_eq(t.dtype, SN_DT_BOOL);
    cr_assert_eq(((uint8_t *)t.data)[3], 1);
    cr_assert_eq(((uint8_t *)t.data)[1], 0);
    sn_host_tensor_free(&t);

    src_path(path, sizeof path, "onnx_cases/f8_0x3.npy");
    cr_assert_eq(sn_tensor_load_npy(path, &t), SHARDNET_OK);
    cr_assert_eq(t.dtype, SN_DT_DOUBLE);
    cr_assert_eq(t.nbytes, 0);
    sn_host_tensor_free(&t);

    src_path(path, sizeof path, "onnx_cases/i4_v2.npy");
    cr_assert_eq(sn_tensor_load_npy(path, &t), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(((int32_t *)t.data)[1], -2);
    sn_host_tensor_free(&t);

    src_path(path, sizeof path, "onnx_cases/i8_v3.npy");
    cr_assert_eq(sn_tensor_load_npy(path, &t), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(((int64_t *)t.data)[1], 20);
    sn_host_tensor_free(&t);
}

Test(tensorfile, npy_save_writes_what_numpy_writes_and_reads_back)
{
    char dir[64], path[128], want[512];
    float f[6] = {0, 1, 2, 3, 4, 5};
    sn_host_tensor t = {.dtype = SN_DT_FLOAT, .rank = 2, .dims = {2, 3},
                        .data = f, .nbytes = sizeof f}, back;
    uint8_t *mine, *theirs;
    size_t n1, n2;
    make_tmpdir("onnx-test", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/a.npy", dir);
    cr_assert_eq(sn_tensor_save_npy(path, &t), SHARDNET_OK, "%s",
                 shardnet_last_error());
    mine = slurp(path, &n1);
    cr_assert_eq((10 + (mine[8] | mine[9] << 8)) % 64, 0);
    cr_assert_eq(mine[10 + (mine[8] | mine[9] << 8) - 1], '\n');
    src_path(want, sizeof want, "onnx_cases/f32_2x3.npy");
    theirs = slurp(want, &n2);
    cr_assert_eq(n1, n2);
    cr_assert_eq(memcmp(mine, theirs, n1), 0, "same bytes as np.save");
    free(mine);
    free(theirs);

    cr_assert_eq(sn_tensor_load(path, &back), SHARDNET_OK);
    cr_assert_eq(back.rank, 2);
    cr_assert_eq(memcmp(back.data, f, sizeof f), 0);
    sn_host_tensor_free(&back);

    /* rank 1 and rank 0 round trips, other types */
    {
        int64_t v = -99;
        uint8_t u[3] = {1, 2, 3};
        sn_host_tensor s = {.dtype = SN_DT_INT64, .rank = 0, .data = &v,
                            .nbytes = 8};
        sn_host_tensor r = {.dtype = SN_DT_UINT8, .rank = 1, .dims = {3},
                            .data = u, .nbytes = 3};
        cr_assert_eq(sn_tensor_save_npy(path, &s), SHARDNET_OK);
        cr_assert_eq(sn_tensor_load(path, &back), SHARDNET_OK);
        cr_assert_eq(back.rank, 0);
        cr_assert_eq(*(int64_t *)back.data, -99);
        sn_host_tensor_free(&back);
        src_path(want, sizeof want, "onnx_cases/i64_scalar.npy");
        theirs = slurp(want, &n2);
        mine = slurp(path, &n1);
        cr_assert_eq(memcmp(mine, theirs, 64), 0, "same header as np.save");
        free(mine);
        free(theirs);
        cr_assert_eq(sn_tensor_save_npy(path, &r), SHARDNET_OK);
        cr_assert_eq(sn_tensor_load(path, &back), SHARDNET_OK);
        cr_assert_eq(back.rank, 1);
        cr_assert_eq(back.dims[0], 3);
        cr_assert_eq(((uint8_t *)back.data)[2], 3);
        sn_host_tensor_free(&back);
        r.nbytes = 2;
        cr_assert_neq(sn_tensor_save_npy(path, &r), SHARDNET_OK,
                      "size mismatch refused");
    }
    rm_tmpdir(dir);
}

/* Zero-size tensors: valid inputs and outputs of the files, the C API and
 * a run. */

Test(zero_size, npy_save_with_no_data_writes_what_numpy_writes)
{
    char dir[64], path[128], want[512];
    shardnet_tensor_info info = {.dtype = SHARDNET_DTYPE_FLOAT64, .rank = 2,
                                 .dims = {0, 3}};
    shardnet_tensor back;
    uint8_t *mine, *theirs;
    size_t n1, n2;
    make_tmpdir("onnx-test", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/empty.npy", dir);
    cr_assert_eq(shardnet_tensor_save(path, &info, NULL), SHARDNET_OK, "%s",
                 shardnet_last_error());
    mine = slurp(path, &n1);
    src_path(want, sizeof want, "onnx_cases/f8_0x3.npy");
    theirs = slurp(want, &n2);
    cr_assert_eq(n1, n2);
    cr_assert_eq(memcmp(mine, theirs, n1), 0, "same bytes as np.save");
    free(mine);
    free(theirs);
    cr_assert_eq(shardnet_tensor_load(path, &back), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(back.info.rank, 2);
    cr_assert_eq(back.info.dims[0], 0);
    cr_assert_eq(back.info.dims[1], 3);
    cr_assert_eq(back.nbytes, 0);
    cr_assert_null(back.data);
    shardnet_tensor_free(&back);
    /* Elements without data stay an error. */
    info.dims[0] = 2;
    cr_assert_eq(shardnet_tensor_save(path, &info, NULL),
                 SHARDNET_INVALID_ARGUMENT);
    cr_assert(strstr(shardnet_last_error(), "NULL data"), "%s",
              shardnet_last_error());
    rm_tmpdir(dir);
}

Test(zero_size, pb_tensors_with_a_zero_dimension_load)
{
    char path[512];
    shardnet_tensor t;
    src_path(path, sizeof path,
             "onnx_cases/node/test_zero_size_gemm_inner_dimension/"
             "test_data_set_0/input_1.pb");
    cr_assert_eq(shardnet_tensor_load(path, &t), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(t.info.dtype, SHARDNET_DTYPE_FLOAT32);
    cr_assert_eq(t.info.rank, 2);
    cr_assert_eq(t.info.dims[0], 0);
    cr_assert_eq(t.info.dims[1], 3);
    cr_assert_eq(t.nbytes, 0);
    shardnet_tensor_free(&t);
    onnx_path(path, sizeof path,
              "test_split_zero_size_splits/test_data_set_0/output_0.pb");
    cr_assert_eq(shardnet_tensor_load(path, &t), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(t.info.rank, 1);
    cr_assert_eq(t.info.dims[0], 0);
    shardnet_tensor_free(&t);
}

/* A batch of zero rows through a session, then one of two rows: the
 * output has zero rows, is saved and read back, and the session still
 * computes the next batch. */
static void run_zero_rows(const char *device)
{
    char path[512], dir[64], out[128];
    shardnet_context_t *ctx;
    shardnet_model_t *m;
    shardnet_session_t *s;
    shardnet_tensor_info info;
    shardnet_tensor back;
    const void *data;
    int64_t zero[2] = {0, 3}, two[2] = {2, 3};
    float x[6] = {1, 2, 3, -4, 5, -6};
    size_t idx, cnt;

    cr_assert_eq(shardnet_context_create(&ctx), SHARDNET_OK);
    if (shardnet_devices_select(ctx, device, &idx, 1, &cnt) != SHARDNET_OK) {
        shardnet_context_free(ctx);
        cr_skip_test("no device %s here", device);
    }
    src_path(path, sizeof path,
             "onnx_cases/node/test_zero_size_matmul_add_relu_softmax/"
             "model.onnx");
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(shardnet_session_create(ctx, m, device, &s), SHARDNET_OK,
                 "%s", shardnet_last_error());
    cr_assert_eq(shardnet_session_set_input(s, 0, SHARDNET_DTYPE_FLOAT32, 2,
                                            zero, NULL),
                 SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(shardnet_session_output(s, 0, &info, &data), SHARDNET_OK);
    cr_assert_eq(info.rank, 2);
    cr_assert_eq(info.dims[0], 0);
    cr_assert_eq(info.dims[1], 4);
    make_tmpdir("onnx-test", dir, sizeof dir);
    snprintf(out, sizeof out, "%s/y.npy", dir);
    cr_assert_eq(shardnet_tensor_save(out, &info, data), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(shardnet_tensor_load(out, &back), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(back.info.dims[0], 0);
    cr_assert_eq(back.info.dims[1], 4);
    shardnet_tensor_free(&back);
    rm_tmpdir(dir);

    /* Softmax rows of the next batch sum to 1. */
    cr_assert_eq(shardnet_session_set_input(s, 0, SHARDNET_DTYPE_FLOAT32, 2,
                                            two, x),
                 SHARDNET_OK);
    cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(shardnet_session_output(s, 0, &info, &data), SHARDNET_OK);
    cr_assert_eq(info.dims[0], 2);
    for (int r = 0; r < 2; r++) {
        float sum = 0;
        for (int c = 0; c < 4; c++)
            sum += ((const float *)data)[r * 4 + c];
        cr_assert_float_eq(sum, 1.0f, 1e-5f);
    }
    shardnet_session_free(s);
    shardnet_model_free(m);
    shardnet_context_free(ctx);
}

Test(zero_size, zero_rows_run_save_and_reload_on_cpu)
{
    run_zero_rows("cpu:0");
}

Test(zero_size, zero_rows_run_save_and_reload_on_opencl)
{
    run_zero_rows("cl:0");
}

static void expect_npy_error(const char *bytes, size_t n, const char *needle)
{
    char dir[64], path[128];
    sn_host_tensor t;
    make_tmpdir("onnx-test", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/h.npy", dir);
    spit(path, bytes, n);
    cr_assert_neq(sn_tensor_load(path, &t), SHARDNET_OK, "%s loaded",
                  needle);
    cr_assert_null(t.data);
    cr_assert(strstr(shardnet_last_error(), needle), "'%s' lacks '%s'",
              shardnet_last_error(), needle);
    rm_tmpdir(dir);
}

/* A v1 .npy with the given header text and data bytes. */
static void npy_case(const char *header, size_t data_bytes, const char *needle)
{
    char buf[512];
    size_t h = strlen(header);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)(h & 0xff);
    buf[9] = (char)(h >> 8);
    memcpy(buf + 10, header, h);
    memset(buf + 10 + h, 0x42, data_bytes);
    expect_npy_error(buf, 10 + h + data_bytes, needle);
}

Test(tensorfile, hostile_npy_files_are_errors)
{
    expect_npy_error("", 0, "not a .npy file");
    expect_npy_error("\x93NUMPX\x01\x00\x00\x00", 10, "not a .npy file");
    expect_npy_error("\x93NUMPY\x04\x00\x00\x00", 10, "version 4.0");
    expect_npy_error("\x93NUMPY\x01\x00\xff\x00{}", 12, "past the end");
    expect_npy_error("\x93NUMPY\x02\x00\x00\x00", 10, "truncated");
    npy_case("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n",
             7, "7 bytes of data");
    npy_case("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n",
             9, "9 bytes of data");
    npy_case("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }\n",
             8, "Fortran");
    npy_case("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }\n",
             8, "little-endian");
    npy_case("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }\n",
             16, "not supported");
    npy_case("{'descr': '', 'fortran_order': False, 'shape': (2,), }\n",
             8, "malformed");
    npy_case("{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, "
             "1048576), }\n", 0, "2^34");
    npy_case("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,"
             "1,1,1,1), }\n", 4, "more than 8");
    npy_case("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }\n",
             4, "malformed");
    npy_case("{'descr': '<f4', 'shape': (1,), }\n", 4, "malformed");
    npy_case("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", 4,
             "malformed");
    npy_case("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999"
             "999999999999,), }\n", 4, "2^34");
}

Test(tensorfile, unknown_extension_is_an_error)
{
    sn_host_tensor t;
    cr_assert_neq(sn_tensor_load("/tmp/x.bin", &t), SHARDNET_OK);
    cr_assert(strstr(shardnet_last_error(), ".npy or .pb"));
}
