/*
 * Graph passes, each on its own: what it changes in the graph, and that the
 * model computes the same thing after it (a plan of the untouched graph
 * against a plan of the transformed one, on cpu:0).
 */
#include <config.h>

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "ops/ops.h"
#include "ops/registry.h"
#include "passes/passes.h"
#include "passes/rewrite.h"
#include "import/onnx.h"
#include "shardnet.h"
#include "context_suite.h"

SN_CONTEXT_SUITE(passes, 300);

static sn_graph *load_sorted(const char *name)
{
    char path[4096];
    const char *src = getenv("SHARDNET_SRCDIR");
    sn_graph *g = NULL;
    snprintf(path, sizeof path, "%s/tests/fixtures/%s", src ? src : ".", name);
    cr_assert_eq(sn_onnx_load(path, &g), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(sn_graph_sort(g), SHARDNET_OK, "%s", shardnet_last_error());
    return g;
}

static size_t live_ops(const sn_graph *g, const char *op)
{
    size_t n = 0;
    for (size_t i = 0; i < g->nnodes; i++)
        n += !g->nodes[i].dead && !strcmp(g->nodes[i].op_type, op);
    return n;
}

/* Run graph g on the context's device `index` with a deterministic input
 * whose symbolic dimensions are `batch`; returns output 0 (malloc'ed) and
 * its size. */
static float *run_graph_on(sn_graph *g, size_t index, int64_t batch,
                           size_t *count)
{
    sn_device *dev = sn_context_device(ctx, index);
    sn_weights *w = NULL;
    sn_plan *p = NULL;
    sn_binding b = {.dtype = SN_DT_FLOAT};
    const sn_value *in = &g->values[g->inputs[0]];
    size_t n = 1;
    b.rank = in->rank;
    for (int i = 0; i < in->rank; i++) {
        b.dims[i] = in->dims[i] >= 0 ? in->dims[i] : batch;
        n *= (size_t)b.dims[i];
    }
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
    b.data = x;
    b.nbytes = n * sizeof *x;
    cr_assert_eq(sn_weights_new(g, dev, &w), SHARDNET_OK);
    cr_assert_eq(sn_plan_build(g, w, &b, sn_op_find, &p), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(sn_plan_run(p, &b), SHARDNET_OK, "%s", shardnet_last_error());
    const sn_host_tensor *t = sn_plan_output(p, 0);
    float *out = malloc(t->nbytes);
    memcpy(out, t->data, t->nbytes);
    *count = t->nbytes / sizeof(float);
    sn_plan_free(p);
    sn_weights_free(w);
    free(x);
    return out;
}

/* ... on cpu:0. */
static float *run_graph(sn_graph *g, int64_t batch, size_t *count)
{
    return run_graph_on(g, 0, batch, count);
}

/* Output 0 of a graph on every device of the context. */
enum { MAXDEV = 8 };
typedef struct runs {
    size_t ndev, n[MAXDEV];
    float *out[MAXDEV];
} runs;

static void run_everywhere(sn_graph *g, int64_t batch, runs *r)
{
    r->ndev = 0;
    while (r->ndev < MAXDEV && sn_context_device(ctx, r->ndev)) {
        r->out[r->ndev] = run_graph_on(g, r->ndev, batch, &r->n[r->ndev]);
        r->ndev++;
    }
}

/* g, run again on every device, gives `before`'s bits (which it frees). */
static void expect_same_bits_everywhere(sn_graph *g, int64_t batch,
                                        runs *before)
{
    for (size_t d = 0; d < before->ndev; d++) {
        size_t n1;
        float *after = run_graph_on(g, d, batch, &n1);
        cr_assert_eq(before->n[d], n1);
        cr_assert_eq(memcmp(before->out[d], after, n1 * sizeof *after), 0,
                     "fusing changed the result on %s",
                     sn_context_device(ctx, d)->info.name);
        free(before->out[d]);
        free(after);
    }
}

static void expect_same(const float *a, const float *b, size_t n, float tol)
{
    for (size_t i = 0; i < n; i++)
        cr_assert(fabsf(a[i] - b[i]) <= tol * (1.0f + fabsf(b[i])),
                  "element %zu: %.9g after the pass, %.9g before", i,
                  (double)a[i], (double)b[i]);
}

Test(passes, fold_batchnorm_merges_it_into_the_convolution)
{
    sn_graph *g = load_sorted("small_cnn.onnx");
    size_t n0, n1, folded;
    float *before = run_graph(g, 2, &n0);
    cr_assert_eq(live_ops(g, "BatchNormalization"), 2);
    cr_assert_eq(sn_pass_fold_batchnorm(g, &folded), SHARDNET_OK);
    cr_assert_eq(folded, 2);
    cr_assert_eq(live_ops(g, "BatchNormalization"), 0);
    cr_assert_eq(live_ops(g, "Conv"), 2);
    float *after = run_graph(g, 2, &n1);
    cr_assert_eq(n0, n1);
    /* Weights were rescaled: the rounding differs, the maths does not. */
    expect_same(after, before, n0, 1e-5f);
    free(before);
    free(after);
    sn_graph_free(g);
}

Test(passes, fuse_activation_moves_relu_into_the_gemm_bit_exactly)
{
    sn_graph *g = load_sorted("fashion_mlp.onnx");
    size_t n0, n1, fused;
    float *before = run_graph(g, 3, &n0);
    cr_assert_eq(live_ops(g, "Relu"), 2);
    cr_assert_eq(sn_pass_fuse_activation(g, &fused), SHARDNET_OK);
    cr_assert_eq(fused, 2);
    cr_assert_eq(live_ops(g, "Relu"), 0);
    size_t with_attr = 0;
    for (size_t i = 0; i < g->nnodes; i++)
        with_attr += !g->nodes[i].dead &&
                     !strcmp(sn_attr_string(&g->nodes[i], "activation", ""),
                             "Relu");
    cr_assert_eq(with_attr, 2);
    float *after = run_graph(g, 3, &n1);
    cr_assert_eq(n0, n1);
    cr_assert_eq(memcmp(before, after, n0 * sizeof *before), 0,
                 "fusing changed the result");
    free(before);
    free(after);
    sn_graph_free(g);
}

Test(passes, fold_constants_turns_constant_nodes_into_values)
{
    sn_graph *g = load_sorted("small_transformer.onnx");
    size_t n0, n1, folded;
    float *before = run_graph(g, 2, &n0);
    size_t constants = live_ops(g, "Constant");
    cr_assert_gt(constants, 0);
    cr_assert_eq(sn_pass_fold_constants(g, &folded), SHARDNET_OK);
    cr_assert_geq(folded, constants);
    cr_assert_eq(live_ops(g, "Constant"), 0);
    float *after = run_graph(g, 2, &n1);
    cr_assert_eq(n0, n1);
    cr_assert_eq(memcmp(before, after, n0 * sizeof *before), 0);
    free(before);
    free(after);
    sn_graph_free(g);
}

Test(passes, remove_dead_drops_nodes_nothing_reads)
{
    sn_graph *g = load_sorted("fashion_mlp.onnx");
    size_t removed, n0, n1;
    float *before = run_graph(g, 2, &n0);
    /* A Relu on the input whose result nobody uses, and one after it. */
    int in = g->inputs[0];
    int v1 = sn_graph_add_value(g, "unused_1");
    int v2 = sn_graph_add_value(g, "unused_2");
    cr_assert(v1 >= 0 && v2 >= 0);
    cr_assert_geq(sn_graph_add_node(g, "dead_1", "Relu", "", &in, 1, &v1, 1),
                  0);
    cr_assert_geq(sn_graph_add_node(g, "dead_2", "Sigmoid", "", &v1, 1, &v2, 1),
                  0);
    cr_assert_eq(sn_graph_sort(g), SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(live_ops(g, "Sigmoid"), 1);
    cr_assert_eq(sn_pass_remove_dead(g, &removed), SHARDNET_OK);
    cr_assert_eq(removed, 2);
    cr_assert_eq(live_ops(g, "Sigmoid"), 0);
    cr_assert_eq(live_ops(g, "Relu"), 2, "the live Relus must stay");
    float *after = run_graph(g, 2, &n1);
    cr_assert_eq(memcmp(before, after, n0 * sizeof *before), 0);
    free(before);
    free(after);
    sn_graph_free(g);
}

Test(passes, fuse_bias_moves_the_bias_add_into_the_matmul_bit_exactly)
{
    sn_graph *g = load_sorted("small_transformer.onnx");
    size_t fused;
    runs before;
    /* Every device: CPU (the epilogue of each GEMM kernel) and OpenCL
     * (CLBlast, then the epilogue kernel). */
    run_everywhere(g, 3, &before);
    cr_assert_eq(live_ops(g, "Add"), 9);
    cr_assert_eq(sn_pass_fuse_bias(g, &fused), SHARDNET_OK);
    /* q, k, v, the projection and both feed-forward layers; the two
     * residual Adds and Gelu's "+ 1" stay. */
    cr_assert_eq(fused, 6);
    cr_assert_eq(live_ops(g, "Add"), 3);
    size_t with_bias = 0;
    for (size_t i = 0; i < g->nnodes; i++)
        with_bias += !g->nodes[i].dead &&
                     !strcmp(g->nodes[i].op_type, "MatMul") &&
                     g->nodes[i].ninputs == 3 &&
                     sn_attr_int(&g->nodes[i], "bias", 0) == 1;
    cr_assert_eq(with_bias, 6);
    expect_same_bits_everywhere(g, 3, &before);
    sn_graph_free(g);
}

Test(passes, fuse_bias_leaves_adds_it_cannot_take)
{
    /* The MLP's layers are Gemm (their bias is already C); the CNN's
     * MatMul-free graph has nothing to fuse either. */
    const char *models[] = {"fashion_mlp.onnx", "small_cnn.onnx"};
    for (size_t i = 0; i < 2; i++) {
        sn_graph *g = load_sorted(models[i]);
        size_t adds = live_ops(g, "Add"), fused;
        cr_assert_eq(sn_pass_fuse_bias(g, &fused), SHARDNET_OK);
        cr_assert_eq(fused, 0, "%s", models[i]);
        cr_assert_eq(live_ops(g, "Add"), adds, "%s", models[i]);
        sn_graph_free(g);
    }
}

Test(passes, a_matmul_given_three_inputs_without_the_mark_is_refused)
{
    sn_graph *g = load_sorted("small_transformer.onnx");
    size_t fused;
    cr_assert_eq(sn_pass_fuse_bias(g, &fused), SHARDNET_OK);
    cr_assert_gt(fused, 0);
    /* As a model file could write it: MatMul with a third input. */
    for (size_t i = 0; i < g->nnodes; i++)
        if (!strcmp(g->nodes[i].op_type, "MatMul") &&
            g->nodes[i].ninputs == 3)
            ((sn_attr *)sn_node_attr(&g->nodes[i], "bias"))->i = 0;
    sn_device *dev = sn_context_device(ctx, 0);
    sn_weights *w = NULL;
    sn_plan *p = NULL;
    sn_binding b = {.dtype = SN_DT_FLOAT, .rank = 3, .dims = {1, 16, 64}};
    float x[16 * 64] = {0};
    b.data = x;
    b.nbytes = sizeof x;
    cr_assert_eq(sn_weights_new(g, dev, &w), SHARDNET_OK);
    cr_assert_eq(sn_plan_build(g, w, &b, sn_op_find, &p), SHARDNET_INVALID_ARGUMENT);
    cr_assert(strstr(shardnet_last_error(), "takes two inputs"), "%s",
              shardnet_last_error());
    sn_weights_free(w);
    sn_graph_free(g);
}

/* The MLP with a residual-like Add(x, x) then Relu put before its first
 * layer: the pass moves that Relu into the Add, with the same bits on
 * every device. */
Test(passes, fuse_binary_activation_moves_relu_into_the_add_bit_exactly)
{
    sn_graph *g = load_sorted("fashion_mlp.onnx");
    size_t fused;
    runs before;
    int in = g->inputs[0], pair[2] = {in, in};
    int v1 = sn_graph_add_value(g, "res_sum");
    int v2 = sn_graph_add_value(g, "res_relu");
    cr_assert(v1 >= 0 && v2 >= 0);
    for (size_t i = 0; i < g->nnodes; i++)
        for (size_t j = 0; j < g->nodes[i].ninputs; j++)
            if (g->nodes[i].inputs[j] == in)
                g->nodes[i].inputs[j] = v2;
    cr_assert_geq(sn_graph_add_node(g, "res_add", "Add", "", pair, 2, &v1, 1),
                  0);
    cr_assert_geq(sn_graph_add_node(g, "res_act", "Relu", "", &v1, 1, &v2, 1),
                  0);
    cr_assert_eq(sn_graph_sort(g), SHARDNET_OK, "%s", shardnet_last_error());
    run_everywhere(g, 3, &before);
    cr_assert_eq(live_ops(g, "Relu"), 3);
    cr_assert_eq(sn_pass_fuse_binary_activation(g, &fused), SHARDNET_OK);
    cr_assert_eq(fused, 1, "only the Relu after the Add");
    cr_assert_eq(live_ops(g, "Relu"), 2);
    for (size_t i = 0; i < g->nnodes; i++)
        if (!g->nodes[i].dead && !strcmp(g->nodes[i].op_type, "Add"))
            cr_assert_str_eq(sn_attr_string(&g->nodes[i], "activation", ""),
                             "Relu");
    expect_same_bits_everywhere(g, 3, &before);
    sn_graph_free(g);
}

/* A residual block (Conv, Add of the block's input, Relu; then another
 * Add of that input and Relu): the Add after the Conv, with the Relu the
 * binary pass fused into it, moves into the Conv, the same bits on every
 * device; the second Add, after a Relu, stays. */
Test(passes, fuse_residual_moves_the_add_into_the_conv_bit_exactly)
{
    sn_graph *g =
        load_sorted("../onnx_cases/node/"
                    "test_fuse_conv_add_relu_residual_opset13/model.onnx");
    size_t fused;
    runs before;
    run_everywhere(g, 2, &before);
    cr_assert_eq(sn_pass_fuse_binary_activation(g, &fused), SHARDNET_OK);
    cr_assert_eq(fused, 2);
    cr_assert_eq(sn_pass_fuse_residual(g, &fused), SHARDNET_OK);
    cr_assert_eq(fused, 1, "only the Add after the Conv");
    cr_assert_eq(live_ops(g, "Add"), 1);
    for (size_t i = 0; i < g->nnodes; i++) {
        const sn_node *n = &g->nodes[i];
        if (n->dead || strcmp(n->op_type, "Conv"))
            continue;
        cr_assert_eq(n->ninputs, 4);
        cr_assert_eq(n->inputs[3], g->inputs[0], "the residual is x");
        cr_assert_str_eq(sn_attr_string(n, "activation", ""), "Relu");
    }
    expect_same_bits_everywhere(g, 2, &before);
    sn_graph_free(g);
}

typedef shardnet_status (*pass_fn)(sn_graph *g, size_t *count);

/* Pass `run` on the case `name` of tests/onnx_cases/node rewrites `want`
 * places; where it rewrote any, the graph gives the bits it gave before
 * on every device.  The graph, for the caller's checks (freed by it). */
static sn_graph *pass_on_case(const char *name, pass_fn run, size_t want)
{
    char path[256];
    runs before;
    size_t done;
    snprintf(path, sizeof path, "../onnx_cases/node/%s/model.onnx", name);
    sn_graph *g = load_sorted(path);
    if (want)
        run_everywhere(g, 1, &before);
    cr_assert_eq(run(g, &done), SHARDNET_OK, "%s: %s", name,
                 shardnet_last_error());
    cr_assert_eq(done, want, "%s: %zu rewritten, not %zu", name, done, want);
    if (want)
        expect_same_bits_everywhere(g, 1, &before);
    return g;
}

/* The live node writing g's output 0. */
static const sn_node *output_node(const sn_graph *g)
{
    for (size_t i = 0; i < g->nnodes; i++)
        if (!g->nodes[i].dead && g->nodes[i].outputs[0] == g->outputs[0])
            return &g->nodes[i];
    cr_assert_fail("no live node writes the output");
    return NULL;
}

/* Add, Clip, Mul, Div (a hard swish) become the Clip alone, marked, with
 * the four ops' bits on every device; with the bounds as attributes too;
 * a chain whose product is read again stays. */
Test(passes, fuse_gate_makes_a_hard_swish_one_step_bit_exactly)
{
    static const char *const cases[] = {
        "test_fuse_hard_swish_chain_opset13",
        "test_fuse_hard_swish_chain_clip_attrs_opset10"};
    for (size_t c = 0; c < 2; c++) {
        sn_graph *g = pass_on_case(cases[c], sn_pass_fuse_gate, 1);
        cr_assert_eq(live_ops(g, "Add") + live_ops(g, "Mul") +
                         live_ops(g, "Div"),
                     0);
        const sn_node *n = output_node(g);
        cr_assert_str_eq(n->op_type, "Clip");
        cr_assert_eq(n->ninputs, 1);
        cr_assert_eq(n->inputs[0], g->inputs[0], "the Clip reads x");
        cr_assert_float_eq(sn_attr_float(n, "gate_add", 0), 3.0f, 0);
        cr_assert_float_eq(sn_attr_float(n, "gate_max", 0), 6.0f, 0);
        sn_graph_free(g);
    }
    sn_graph *g = pass_on_case("test_fuse_hard_swish_product_read_twice_"
                               "opset13",
                               sn_pass_fuse_gate, 0);
    cr_assert_eq(live_ops(g, "Div"), 1, "the product is read by Neg too");
    sn_graph_free(g);
}

/* A Clip of bounds 0 and 6 (Relu6) after a Conv, a depthwise Conv (bounds
 * as attributes), a Gemm, a grouped Conv with a bias, a MatMul: the
 * product's epilogue (or its bias step) applies it, the same bits on
 * every device; a Clip to 5 stays. */
Test(passes, fuse_activation_moves_relu6_into_the_product_bit_exactly)
{
    static const char *const folds[] = {
        "test_fuse_conv_relu6_opset13",
        "test_fuse_depthwise_relu6_clip_attrs_opset10",
        "test_fuse_gemm_relu6_opset13",
        "test_fuse_grouped_conv_bias_relu6_opset13",
        "test_fuse_matmul_sum_relu6_opset13"};
    for (size_t c = 0; c < 5; c++) {
        sn_graph *g = pass_on_case(folds[c], sn_pass_fuse_activation, 1);
        cr_assert_eq(live_ops(g, "Clip"), 0, "%s", folds[c]);
        cr_assert_str_eq(sn_attr_string(output_node(g), "activation", ""),
                         "Relu6");
        sn_graph_free(g);
    }
    sn_graph *g = pass_on_case("test_fuse_conv_clip_to_5_stays_opset13",
                               sn_pass_fuse_activation, 0);
    cr_assert_eq(live_ops(g, "Clip"), 1);
    sn_graph_free(g);
}

/* x * Sigmoid(x) and x * HardSigmoid(x) become the unary node alone,
 * marked gate_mul, with the two nodes' bits on every device; a Sigmoid
 * that is also read elsewhere stays apart. */
Test(passes, fuse_gate_moves_the_mul_by_x_into_the_unary_bit_exactly)
{
    static const struct {
        const char *name, *op;
    } cases[] = {{"test_fuse_silu_opset13", "Sigmoid"},
                 {"test_fuse_hard_sigmoid_gate_opset13", "HardSigmoid"}};
    for (size_t c = 0; c < 2; c++) {
        sn_graph *g = pass_on_case(cases[c].name, sn_pass_fuse_gate, 1);
        cr_assert_eq(live_ops(g, "Mul"), 0);
        cr_assert_eq(live_ops(g, cases[c].op), 1);
        cr_assert_eq(sn_attr_int(output_node(g), "gate_mul", 0), 1);
        sn_graph_free(g);
    }
    sn_graph_free(pass_on_case("test_fuse_silu_sigmoid_read_twice_opset13",
                               sn_pass_fuse_gate, 0));
}

/* A Pad of zeros before a Conv: folded into the Conv's pads (added to its
 * own), the same bits on every device; a Pad of ones and a reflecting
 * one stay. */
Test(passes, fold_pad_moves_zero_padding_into_the_conv_bit_exactly)
{
    static const struct {
        const char *name;
        int64_t pads[4];
    } folds[] = {
        {"test_fold_pad_conv_same_stride2_opset13", {0, 0, 1, 1}},
        {"test_fold_pad_depthwise_onto_its_pads_opset11", {2, 1, 1, 3}},
        {"test_fold_pad_conv_attribute_opset10", {1, 2, 1, 0}},
    };
    for (size_t c = 0; c < 3; c++) {
        sn_graph *g = pass_on_case(folds[c].name, sn_pass_fold_pad, 1);
        const sn_node *n = output_node(g);
        int64_t pads[4];
        size_t np;
        cr_assert_eq(live_ops(g, "Pad"), 0);
        cr_assert_eq(n->inputs[0], g->inputs[0], "the Conv reads x");
        cr_assert_eq(sn_attr_ints(n, "pads", pads, 4, &np, NULL),
                     SHARDNET_OK);
        cr_assert_eq(np, 4);
        cr_assert_arr_eq(pads, folds[c].pads, sizeof pads, "%s",
                         folds[c].name);
        sn_graph_free(g);
    }
    sn_graph_free(pass_on_case("test_fold_pad_of_ones_stays_opset13",
                               sn_pass_fold_pad, 0));
    sn_graph_free(pass_on_case("test_fold_pad_reflect_stays_opset13",
                               sn_pass_fold_pad, 0));
}

/* Before opset 7 an Add broadcasts only by attribute: left alone. */
Test(passes, fuse_residual_leaves_opsets_before_7)
{
    sn_graph *g =
        load_sorted("../onnx_cases/node/"
                    "test_fuse_conv_add_relu_residual_opset13/model.onnx");
    size_t fused;
    g->opset = 6;
    cr_assert_eq(sn_pass_fuse_residual(g, &fused), SHARDNET_OK);
    cr_assert_eq(fused, 0);
    cr_assert_eq(live_ops(g, "Add"), 2);
    sn_graph_free(g);
}

/* Conv, Mul by one value, Add of one per channel: both folded into the
 * weights and bias (the rounding differs, the maths does not); a Mul
 * whose product is read again is not. */
Test(passes, fold_affine_moves_a_scale_and_shift_into_the_conv)
{
    sn_graph *g = load_sorted("../onnx_cases/node/"
                              "test_fold_conv_scale_shift_opset13/model.onnx");
    size_t n0, n1, folded;
    float *before = run_graph(g, 1, &n0);
    cr_assert_eq(sn_pass_fold_affine(g, &folded), SHARDNET_OK);
    cr_assert_eq(folded, 2);
    cr_assert_eq(live_ops(g, "Mul") + live_ops(g, "Add"), 0);
    float *after = run_graph(g, 1, &n1);
    cr_assert_eq(n0, n1);
    expect_same(after, before, n0, 1e-5f);
    free(before);
    free(after);
    sn_graph_free(g);

    g = pass_on_case("test_fold_conv_read_twice_opset13", sn_pass_fold_affine,
                     0);
    cr_assert_eq(live_ops(g, "Mul"), 1);
    sn_graph_free(g);
}

/* A Conv given a fourth input without the pass's mark (as a model file
 * could write it) is refused, not read as a residual. */
Test(passes, a_conv_given_four_inputs_without_the_mark_is_refused)
{
    sn_graph *g =
        load_sorted("../onnx_cases/node/"
                    "test_fuse_conv_add_relu_residual_opset13/model.onnx");
    size_t fused;
    cr_assert_eq(sn_pass_fuse_residual(g, &fused), SHARDNET_OK);
    cr_assert_eq(fused, 1);
    for (size_t i = 0; i < g->nnodes; i++)
        if (!g->nodes[i].dead && !strcmp(g->nodes[i].op_type, "Conv"))
            ((sn_attr *)sn_node_attr(&g->nodes[i], "residual"))->i = 0;
    sn_device *dev = sn_context_device(ctx, 0);
    sn_weights *w = NULL;
    sn_plan *p = NULL;
    sn_binding b = {.dtype = SN_DT_FLOAT, .rank = 4, .dims = {2, 4, 6, 6}};
    float x[2 * 4 * 6 * 6] = {0};
    b.data = x;
    b.nbytes = sizeof x;
    cr_assert_eq(sn_weights_new(g, dev, &w), SHARDNET_OK);
    cr_assert_eq(sn_plan_build(g, w, &b, sn_op_find, &p),
                 SHARDNET_INVALID_ARGUMENT);
    cr_assert(strstr(shardnet_last_error(), "takes 2 or 3 inputs"), "%s",
              shardnet_last_error());
    sn_weights_free(w);
    sn_graph_free(g);
}

/* An infinite scale is not folded: Inf times each weight could sum
 * Inf - Inf where the product scaled by Inf is Inf. */
Test(passes, fold_affine_leaves_an_infinite_scale)
{
    sn_graph *g = load_sorted("../onnx_cases/node/"
                              "test_fold_conv_scale_shift_opset13/model.onnx");
    size_t folded;
    for (size_t i = 0; i < g->nnodes; i++) {
        if (strcmp(g->nodes[i].op_type, "Mul"))
            continue;
        float *inf = malloc(sizeof *inf);
        const int64_t one = 1;
        cr_assert_not_null(inf);
        *inf = INFINITY;
        int v = sn_pass_new_const(g, "scale", "_inf", inf, 1, &one);
        cr_assert_geq(v, 0);
        g->nodes[i].inputs[0] = v; /* Mul(s, c): s is Inf now */
    }
    cr_assert_eq(sn_pass_fold_affine(g, &folded), SHARDNET_OK);
    cr_assert_eq(folded, 0, "the Mul stays, and the Add after it too");
    cr_assert_eq(live_ops(g, "Mul"), 1);
    sn_graph_free(g);
}

/* A MatMul or Gemm by a DequantizeLinear of constant integers (or by a
 * Cast of a half-precision weight) becomes one QuantizedMatMul after the
 * passes (with the bias and Relu fused into it),
 * for every product reading the weight; a scale along K cannot be kept,
 * and the DequantizeLinear stays.  (Their answers, which the sums' order
 * changes, are the node cases' in tests/conformance and split_cases.) */
Test(passes, quantized_products_keep_the_integers_as_stored)
{
    static const struct {
        const char *name;
        size_t qmm, dq, left; /* QuantizedMatMul, DequantizeLinear, other */
        const char *other;
    } cases[] = {
        {"test_sn_quantized_matmul_per_column_opset13", 1, 0, 0, "MatMul"},
        {"test_sn_quantized_gemm_transb_bias_relu_opset13", 1, 0, 0, "Relu"},
        {"test_sn_quantized_matmul_batched_bias_opset13", 1, 0, 0, "Add"},
        {"test_sn_quantized_weight_read_twice_opset13", 2, 0, 0, "MatMul"},
        {"test_sn_quantized_scale_along_k_stays_opset13", 0, 1, 1, "MatMul"},
        /* a Cast of a float16 or bfloat16 weight: kept in its halves */
        {"test_sn_half_gemm_transb_bias_relu_opset13", 1, 0, 0, "Cast"},
        {"test_sn_bfloat16_matmul_batched_opset13", 1, 0, 0, "Cast"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char path[256];
        snprintf(path, sizeof path, "../onnx_cases/node/%s/model.onnx",
                 cases[c].name);
        sn_graph *g = load_sorted(path);
        cr_assert_eq(sn_passes_run(g), SHARDNET_OK, "%s: %s", cases[c].name,
                     shardnet_last_error());
        cr_expect_eq(live_ops(g, "QuantizedMatMul"), cases[c].qmm, "%s",
                     cases[c].name);
        cr_expect_eq(live_ops(g, "DequantizeLinear"), cases[c].dq, "%s",
                     cases[c].name);
        cr_expect_eq(live_ops(g, cases[c].other), cases[c].left, "%s: %s",
                     cases[c].name, cases[c].other);
        sn_graph_free(g);
    }
}

/* Plan graph g on cpu:0 with zeros for its input: the status, the error
 * in *err. */
static shardnet_status plan_status(sn_graph *g, const char **err)
{
    sn_weights *w = NULL;
    sn_plan *p = NULL;
    const sn_value *in = &g->values[g->inputs[0]];
    sn_binding b = {.dtype = SN_DT_FLOAT, .rank = in->rank};
    size_t n = 1;
    for (int i = 0; i < in->rank; i++)
        n *= (size_t)(b.dims[i] = in->dims[i]);
    float *x = calloc(n, sizeof *x);
    b.data = x;
    b.nbytes = n * sizeof *x;
    cr_assert_eq(sn_weights_new(g, sn_context_device(ctx, 0), &w),
                 SHARDNET_OK);
    shardnet_status st = sn_plan_build(g, w, &b, sn_op_find, &p);
    *err = shardnet_last_error();
    sn_plan_free(p);
    sn_weights_free(w);
    free(x);
    return st;
}

/* A ConvInteger or MatMulInteger read by one Cast to float takes it over
 * (marked float_sums), giving the same bits everywhere where its sums
 * stay exact; one whose int32 sums are read as they are keeps them.
 * Where the sums can pass 2^24, the integer product alone is refused on
 * the device, naming why, and runs once the pass marked it (its answers
 * are the node cases' in tests/conformance and split_cases). */
Test(passes, integer_sums_read_as_float_take_the_cast_over)
{
    static const char *const exact[] = {
        "test_sn_convinteger_dynamic_opset13",
        "test_sn_matmulinteger_dynamic_opset13"};
    static const char *const past[] = {
        "test_sn_convinteger_dynamic_past_2_24_opset13",
        "test_sn_matmulinteger_dynamic_past_2_24_opset13"};
    static const char *const kept[] = {
        "test_sn_convinteger_device_opset13",
        "test_nn_matmulinteger_after_dynamic_device"};
    const char *err;
    for (size_t c = 0; c < 2; c++) {
        sn_graph *g = pass_on_case(exact[c], sn_pass_integer_sums, 1);
        cr_assert_eq(live_ops(g, "Cast"), 0, "%s", exact[c]);
        sn_graph_free(g);
        g = pass_on_case(kept[c], sn_pass_integer_sums, 0);
        sn_graph_free(g);
        /* a Cast to another type than float: kept too */
        char path[256];
        size_t done;
        snprintf(path, sizeof path, "../onnx_cases/node/%s/model.onnx",
                 exact[c]);
        g = load_sorted(path);
        for (size_t i = 0; i < g->nnodes; i++)
            if (!strcmp(g->nodes[i].op_type, "Cast"))
                ((sn_attr *)sn_node_attr(&g->nodes[i], "to"))->i =
                    SN_DT_DOUBLE;
        cr_assert_eq(sn_pass_integer_sums(g, &done), SHARDNET_OK);
        cr_assert_eq(done, 0, "%s: a Cast to double", exact[c]);
        sn_graph_free(g);

        snprintf(path, sizeof path, "../onnx_cases/node/%s/model.onnx",
                 past[c]);
        g = load_sorted(path);
        cr_assert_eq(plan_status(g, &err), SHARDNET_UNSUPPORTED, "%s",
                     past[c]);
        cr_assert(strstr(err, "would not be exact in float"), "%s", err);
        cr_assert_eq(sn_pass_integer_sums(g, &done), SHARDNET_OK);
        cr_assert_eq(done, 1);
        for (size_t i = 0; i < g->nnodes; i++)
            if (!g->nodes[i].dead && strstr(g->nodes[i].op_type, "Integer"))
                cr_assert_eq(sn_attr_int(&g->nodes[i], "float_sums", 0), 1);
        cr_assert_eq(plan_status(g, &err), SHARDNET_OK, "%s: %s", past[c],
                     err);
        sn_graph_free(g);
    }
}
