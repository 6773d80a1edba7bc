/*
 * Whole models from PyTorch (tests/fixtures, made by the tools/ scripts) on every
 * device, through the public API, against PyTorch's outputs; and one-node
 * models whose hostile attributes or inputs (reductions, selections,
 * losses) must be refused with a clear error.
 */
#include <config.h>

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shardnet.h"
#include "pbwriter.h"
#include "context_suite.h"

SN_CONTEXT_SUITE(models, 600);

static void fixture(char *out, size_t cap, const char *name)
{
    const char *src = getenv("SHARDNET_SRCDIR");
    snprintf(out, cap, "%s/tests/fixtures/%s", src ? src : ".", name);
}

static shardnet_model_t *load_model(const char *name)
{
    char path[4096];
    shardnet_model_t *m = NULL;
    fixture(path, sizeof path, name);
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK, "%s",
                 shardnet_last_error());
    return m;
}

static void load_tensor(const char *name, shardnet_tensor *t)
{
    char path[4096];
    fixture(path, sizeof path, name);
    cr_assert_eq(shardnet_tensor_load(path, t), SHARDNET_OK, "%s",
                 shardnet_last_error());
}

/* Rows [row0, row0 + rows) of `in` through the session; compares with the
 * same rows of `want` within atol + rtol * |want|. */
static void run_rows(shardnet_session_t *s, const char *dev,
                     const shardnet_tensor *in, const shardnet_tensor *want,
                     int64_t row0, int64_t rows, float atol, float rtol)
{
    int64_t dims[SHARDNET_MAX_DIMS];
    size_t in_row = in->nbytes / (size_t)in->info.dims[0];
    size_t out_row = want->nbytes / (size_t)want->info.dims[0] / sizeof(float);
    shardnet_tensor_info info;
    const void *got;
    memcpy(dims, in->info.dims, sizeof dims);
    dims[0] = rows;
    cr_assert_eq(shardnet_session_set_input(s, 0, in->info.dtype,
                                            in->info.rank, dims,
                                            (const char *)in->data +
                                                (size_t)row0 * in_row),
                 SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s: %s", dev,
                 shardnet_last_error());
    cr_assert_eq(shardnet_session_output(s, 0, &info, &got), SHARDNET_OK);
    cr_assert_eq(info.rank, want->info.rank);
    cr_assert_eq(info.dims[0], rows);
    const float *g = got, *w = (const float *)want->data + (size_t)row0 * out_row;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < (size_t)rows * out_row; i++)
        if (!(fabsf(g[i] - w[i]) <= atol + rtol * fabsf(w[i])) && !bad++)
            first = i;
    cr_expect_eq(bad, 0,
                 "%s, rows %lld+%lld: %zu values off; first at %zu: %.7g, "
                 "PyTorch %.7g",
                 dev, (long long)row0, (long long)rows, bad, first,
                 (double)g[first], (double)w[first]);
}

/* Every device of the context, by name. */
#define FOR_EACH_DEVICE_NAME(dv)                                              \
    for (size_t dv##_i = 0; dv##_i < shardnet_device_count(ctx); dv##_i++)   \
        for (const char *dv = device_name(dv##_i); dv; dv = NULL)

static const char *device_name(size_t i)
{
    static shardnet_device_info info;
    cr_assert_eq(shardnet_device_get_info(ctx, i, &info), SHARDNET_OK);
    return info.name;
}

Test(models, fashion_mlp_matches_pytorch_on_every_device)
{
    shardnet_model_t *m = load_model("fashion_mlp.onnx");
    shardnet_tensor in, want;
    load_tensor("fashion_mlp_input.npy", &in);
    load_tensor("fashion_mlp_logits.npy", &want);
    FOR_EACH_DEVICE_NAME(dev)
    {
        shardnet_session_t *s = NULL;
        cr_assert_eq(shardnet_session_create(ctx, m, dev, &s), SHARDNET_OK,
                     "%s", shardnet_last_error());
        /* The batch size is chosen at run time: whole, one row, odd. */
        run_rows(s, dev, &in, &want, 0, 256, 1e-4f, 0);
        run_rows(s, dev, &in, &want, 5, 1, 1e-4f, 0);
        run_rows(s, dev, &in, &want, 100, 7, 1e-4f, 0);
        run_rows(s, dev, &in, &want, 0, 256, 1e-4f, 0); /* cached plan */
        shardnet_session_free(s);
    }
    shardnet_tensor_free(&in);
    shardnet_tensor_free(&want);
    shardnet_model_free(m);
}

Test(models, fashion_mlp_classifies_the_fixture_images)
{
    shardnet_model_t *m = load_model("fashion_mlp.onnx");
    shardnet_session_t *s = NULL;
    shardnet_tensor in, labels;
    shardnet_tensor_info info;
    const void *out;
    load_tensor("fashion_mlp_input.npy", &in);
    load_tensor("fashion_mlp_labels.npy", &labels);
    cr_assert_eq(shardnet_session_create(ctx, m, "cpu:0", &s), SHARDNET_OK);
    cr_assert_eq(shardnet_session_set_input(s, 0, in.info.dtype, in.info.rank,
                                            in.info.dims, in.data),
                 SHARDNET_OK);
    cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(shardnet_session_output(s, 0, &info, &out), SHARDNET_OK);
    size_t correct = 0, n = (size_t)info.dims[0];
    const float *logits = out;
    for (size_t r = 0; r < n; r++) {
        int best = 0;
        for (int c = 1; c < 10; c++)
            if (logits[r * 10 + c] > logits[r * 10 + best])
                best = c;
        correct += best == ((const int64_t *)labels.data)[r];
    }
    cr_expect_geq(correct * 100, n * 88, "accuracy %zu of %zu", correct, n);
    shardnet_session_free(s);
    shardnet_tensor_free(&in);
    shardnet_tensor_free(&labels);
    shardnet_model_free(m);
}

static void model_on_every_device(const char *model, const char *input,
                                  const char *output, float atol, float rtol)
{
    shardnet_model_t *m = load_model(model);
    shardnet_tensor in, want;
    load_tensor(input, &in);
    load_tensor(output, &want);
    FOR_EACH_DEVICE_NAME(dev)
    {
        shardnet_session_t *s = NULL;
        cr_assert_eq(shardnet_session_create(ctx, m, dev, &s), SHARDNET_OK,
                     "%s", shardnet_last_error());
        run_rows(s, dev, &in, &want, 0, in.info.dims[0], atol, rtol);
        run_rows(s, dev, &in, &want, 1, 1, atol, rtol);
        shardnet_session_free(s);
    }
    shardnet_tensor_free(&in);
    shardnet_tensor_free(&want);
    shardnet_model_free(m);
}

Test(models, small_cnn_matches_pytorch_on_every_device)
{
    model_on_every_device("small_cnn.onnx", "small_cnn_input.npy",
                          "small_cnn_output.npy", 1e-4f, 1e-4f);
}

Test(models, small_transformer_matches_pytorch_on_every_device)
{
    model_on_every_device("small_transformer.onnx",
                          "small_transformer_input.npy",
                          "small_transformer_output.npy", 1e-4f, 1e-4f);
}

/* torch's nn.TransformerEncoder as its exporter writes it (the sequence
 * length read back through Shape, Gather, Concat and Reshape; a padding
 * mask through Equal, Where and Expand), over int64 token ids: the
 * fixture's batch whole and row by row; then single rows cut to their
 * unpadded tokens, sequences of 9, 5 and 1, whose answers must not change
 * (padding is masked out of attention and pooling). */
Test(models, torch_encoder_matches_pytorch_at_every_length_on_every_device)
{
    static const struct {
        int64_t row, len;
    } cut[] = {{1, 9}, {2, 5}, {4, 1}, {5, 7}};
    shardnet_model_t *m = load_model("torch_encoder.onnx");
    shardnet_tensor in, want;
    load_tensor("torch_encoder_input.npy", &in);
    load_tensor("torch_encoder_output.npy", &want);
    cr_assert_eq(in.info.dtype, SHARDNET_DTYPE_INT64);
    const int64_t *ids = in.data, seq = in.info.dims[1];
    FOR_EACH_DEVICE_NAME(dev)
    {
        shardnet_session_t *s = NULL;
        cr_assert_eq(shardnet_session_create(ctx, m, dev, &s), SHARDNET_OK,
                     "%s", shardnet_last_error());
        run_rows(s, dev, &in, &want, 0, in.info.dims[0], 1e-4f, 1e-4f);
        for (int64_t r = 0; r < in.info.dims[0]; r++)
            run_rows(s, dev, &in, &want, r, 1, 1e-4f, 1e-4f);
        for (size_t k = 0; k < sizeof cut / sizeof cut[0]; k++) {
            int64_t dims[2] = {1, cut[k].len};
            const float *w = (const float *)want.data + cut[k].row * 10, *g;
            shardnet_tensor_info info;
            const void *got;
            /* the cut drops padding and nothing else */
            cr_assert_eq(ids[cut[k].row * seq + cut[k].len - 1] != 0 &&
                             (cut[k].len == seq ||
                              ids[cut[k].row * seq + cut[k].len] == 0),
                         1);
            cr_assert_eq(shardnet_session_set_input(s, 0,
                                                    SHARDNET_DTYPE_INT64, 2,
                                                    dims,
                                                    ids + cut[k].row * seq),
                         SHARDNET_OK, "%s", shardnet_last_error());
            cr_assert_eq(shardnet_session_run(s), SHARDNET_OK,
                         "%s, row %lld cut to %lld: %s", dev,
                         (long long)cut[k].row, (long long)cut[k].len,
                         shardnet_last_error());
            cr_assert_eq(shardnet_session_output(s, 0, &info, &got),
                         SHARDNET_OK);
            cr_assert(info.rank == 2 && info.dims[0] == 1 &&
                      info.dims[1] == 10);
            g = got;
            for (size_t i = 0; i < 10; i++)
                cr_expect(fabsf(g[i] - w[i]) <= 1e-4f + 1e-4f * fabsf(w[i]),
                          "%s, row %lld cut to %lld: logit %zu is %.7g, "
                          "PyTorch %.7g",
                          dev, (long long)cut[k].row, (long long)cut[k].len,
                          i, (double)g[i], (double)w[i]);
        }
        shardnet_session_free(s);
    }
    shardnet_tensor_free(&in);
    shardnet_tensor_free(&want);
    shardnet_model_free(m);
}

Test(models, info_describes_inputs_outputs_and_ops)
{
    shardnet_model_t *m = load_model("fashion_mlp.onnx");
    shardnet_tensor_info t;
    char text[1024];
    cr_assert_eq(shardnet_model_input_count(m), 1);
    cr_assert_eq(shardnet_model_input(m, 0, &t), SHARDNET_OK);
    cr_assert_str_eq(t.name, "input");
    cr_assert_eq(t.rank, 2);
    cr_assert_eq(t.dims[0], -1);
    cr_assert_str_eq(t.dim_names[0], "batch");
    cr_assert_eq(t.dims[1], 784);
    cr_assert_eq(shardnet_model_parameter_count(m),
                 784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10);
    shardnet_model_describe(m, text, sizeof text);
    cr_assert(strstr(text, "Gemm x3"), "%s", text);
    cr_assert_eq(shardnet_model_unsupported(m, text, sizeof text), 0);
    shardnet_model_free(m);
}

Test(models, unsupported_operators_are_all_named_before_running)
{
    shardnet_model_t *m = NULL;
    shardnet_session_t *s = NULL;
    char text[1024];
    const char *p = "/usr/share/libonnx-testdata/data/node/"
                    "test_bernoulli/model.onnx";
    if (shardnet_model_load(p, &m) != SHARDNET_OK)
        cr_skip_test("ONNX test data not installed (libonnx-testdata)");
    cr_assert_gt(shardnet_model_unsupported(m, text, sizeof text), 0);
    cr_assert(strstr(text, "Bernoulli"), "%s", text);
    cr_assert_eq(shardnet_session_create(ctx, m, "cpu:0", &s),
                 SHARDNET_UNSUPPORTED);
    cr_assert(strstr(shardnet_last_error(), "Bernoulli"), "%s",
              shardnet_last_error());
    shardnet_model_free(m);
}

Test(models, unsupported_operators_in_subgraphs_are_named_too)
{
    /* test_if_seq's branches make sequences (SequenceConstruct), which
     * shardnet lacks: the If itself is supported, its branches are not. */
    shardnet_model_t *m = NULL;
    shardnet_session_t *s = NULL;
    char text[1024];
    const char *p = "/usr/share/libonnx-testdata/data/node/test_if_seq/"
                    "model.onnx";
    if (shardnet_model_load(p, &m) != SHARDNET_OK)
        cr_skip_test("ONNX test data not installed (libonnx-testdata)");
    cr_assert_gt(shardnet_model_unsupported(m, text, sizeof text), 0);
    cr_assert(strstr(text, "SequenceConstruct"), "%s", text);
    cr_assert_null(strstr(text, "If "), "%s", text);
    cr_assert_eq(shardnet_session_create(ctx, m, "cpu:0", &s),
                 SHARDNET_UNSUPPORTED);
    shardnet_model_free(m);
}

/* A model of one Erf node (x -> y, 2x3 floats) importing opset `opset`,
 * written to a temporary file (path, to be unlinked once the model is
 * freed: a session checks that it is still there), loaded. */
static shardnet_model_t *erf_model(int64_t opset, char path[static 19])
{
    static const int64_t d[] = {2, 3};
    pb g = {0}, n = node("e", "Erf", (const char *[]){"x", NULL},
                         (const char *[]){"y", NULL});
    pb in = value_info("x", d, 2), out = value_info("y", d, 2), m;
    shardnet_model_t *loaded = NULL;
    int fd = (strcpy(path, "/tmp/sn-erf-XXXXXX"), mkstemp(path));
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    put_msg(&g, 1, &n);
    put_str(&g, 2, "g");
    put_msg(&g, 11, &in);
    put_msg(&g, 12, &out);
    m = model(opset, &g);
    cr_assert(f && fwrite(m.p, 1, m.n, f) == m.n && fclose(f) == 0);
    cr_assert_eq(shardnet_model_load(path, &loaded), SHARDNET_OK, "%s",
                 shardnet_last_error());
    pb_free(&m);
    return loaded;
}

Test(models, an_operator_outside_its_opset_range_is_named_and_refused)
{
    /* Erf is in the default domain from opset 9 on: a model of opset 8
     * that uses it loads (to be inspected), is listed as unsupported and
     * gets no session; the same node at opset 9 runs. */
    char path[19];
    shardnet_model_t *m = erf_model(8, path);
    shardnet_session_t *s = NULL;
    char text[256];
    cr_assert_gt(shardnet_model_unsupported(m, text, sizeof text), 0);
    cr_assert_str_eq(text, "Erf (node 'e', runs in opsets 9 and later, not "
                           "the model's 8)");
    cr_assert_eq(shardnet_session_create(ctx, m, "cpu:0", &s),
                 SHARDNET_UNSUPPORTED, "%s", shardnet_last_error());
    cr_assert(strstr(shardnet_last_error(), text), "%s",
              shardnet_last_error());
    shardnet_model_free(m);
    unlink(path);
    m = erf_model(9, path);
    cr_assert_eq(shardnet_model_unsupported(m, text, sizeof text), 0, "%s",
                 text);
    cr_assert_eq(shardnet_session_create(ctx, m, "cpu:0", &s), SHARDNET_OK,
                 "%s", shardnet_last_error());
    shardnet_session_free(s);
    shardnet_model_free(m);
    unlink(path);
}

Test(models, wrong_inputs_give_clear_errors)
{
    shardnet_model_t *m = load_model("fashion_mlp.onnx");
    shardnet_session_t *s = NULL;
    float x[3 * 100] = {0};
    int64_t bad_dims[2] = {3, 100};
    cr_assert_eq(shardnet_session_create(ctx, m, "cpu:0", &s), SHARDNET_OK);
    cr_assert_eq(shardnet_session_run(s), SHARDNET_INVALID_ARGUMENT);
    cr_assert(strstr(shardnet_last_error(), "not bound"));
    cr_assert_eq(shardnet_session_set_input(s, 0, SHARDNET_DTYPE_FLOAT32, 2,
                                            bad_dims, x),
                 SHARDNET_OK);
    cr_assert_eq(shardnet_session_run(s), SHARDNET_INVALID_ARGUMENT);
    cr_assert(strstr(shardnet_last_error(), "dimension 1 is 784"), "%s",
              shardnet_last_error());
    cr_assert_eq(shardnet_session_set_input(s, 0, SHARDNET_DTYPE_INT64, 2,
                                            bad_dims, x),
                 SHARDNET_OK);
    cr_assert_eq(shardnet_session_run(s), SHARDNET_INVALID_ARGUMENT);
    cr_assert(strstr(shardnet_last_error(), "is float"), "%s",
              shardnet_last_error());
    cr_assert_eq(shardnet_session_set_input(s, 1, SHARDNET_DTYPE_FLOAT32, 2,
                                            bad_dims, x),
                 SHARDNET_INVALID_ARGUMENT);
    shardnet_session_free(s);
    cr_assert_eq(shardnet_session_create(ctx, m, "cpu:0,cpu:0,gpu:1", &s),
                 SHARDNET_NO_DEVICE);
    shardnet_model_free(m);
}

Test(models, missing_or_corrupt_model_files_fail_cleanly)
{
    shardnet_model_t *m = NULL;
    cr_assert_neq(shardnet_model_load("/nonexistent/model.onnx", &m),
                  SHARDNET_OK);
    cr_assert_null(m);
    cr_assert(strstr(shardnet_last_error(), "/nonexistent/model.onnx"), "%s",
              shardnet_last_error());
    char path[4096];
    fixture(path, sizeof path, "fashion_mlp_input.npy"); /* not a model */
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_INVALID_ARGUMENT);
    cr_assert_null(m);
}

/* --- hostile attributes of the reductions, selections and losses ------- */

/* An attribute of a one-node model: an INT, INTS or STRING. */
typedef struct attr_spec {
    const char *name;
    int type; /* 2 INT, 7 INTS, 3 STRING */
    int64_t ints[2];
    int nints;
    const char *s;
} attr_spec;

/* An int64 initializer of shape dims (rank 0 to 2, at most 8 values). */
typedef struct init_spec {
    const char *name;
    int64_t v[8];
    int rank;
    int64_t dims[2];
} init_spec;

/*
 * Node `op` of opset `opset` with input x (float, 2x3x4) and the given
 * further inputs (initializers), attributes and outputs: refused, at load
 * or when run on cpu:0, with INVALID_ARGUMENT and `msg` in the error.
 */
static void expect_refused(const char *op, int64_t opset,
                           const char *const *ins, const char *const *outs,
                           const attr_spec *attrs, size_t nattr,
                           const init_spec *inits, size_t ninit,
                           const char *msg)
{
    static const int64_t d[] = {2, 3, 4};
    static const float x[24] = {0};
    pb g = {0}, n = node("h", op, ins, outs), in = value_info("x", d, 3), md;
    shardnet_model_t *m = NULL;
    shardnet_session_t *s = NULL;
    char path[] = "/tmp/sn-hostile-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    shardnet_status st;

    for (size_t i = 0; i < nattr; i++) {
        pb a = {0};
        put_str(&a, 1, attrs[i].name);
        if (attrs[i].type == 2)
            put_int(&a, 3, attrs[i].ints[0]);
        for (int k = 0; attrs[i].type == 7 && k < attrs[i].nints; k++)
            put_int(&a, 8, attrs[i].ints[k]);
        if (attrs[i].type == 3)
            put_str(&a, 4, attrs[i].s);
        put_int(&a, 20, attrs[i].type);
        put_msg(&n, 5, &a);
    }
    put_msg(&g, 1, &n);
    put_str(&g, 2, "g");
    for (size_t i = 0; i < ninit; i++) {
        size_t nv = 1;
        for (int k = 0; k < inits[i].rank; k++)
            nv *= (size_t)inits[i].dims[k];
        pb t = tensor_raw(inits[i].name, 7, inits[i].dims, inits[i].rank,
                          inits[i].v, nv * sizeof(int64_t));
        put_msg(&g, 5, &t);
    }
    put_msg(&g, 11, &in);
    for (; outs && *outs; outs++) {
        pb out = value_info(*outs, NULL, -1);
        put_msg(&g, 12, &out);
    }
    md = model(opset, &g);
    cr_assert(f && fwrite(md.p, 1, md.n, f) == md.n && fclose(f) == 0);
    pb_free(&md);
    st = shardnet_model_load(path, &m);
    if (st == SHARDNET_OK) {
        st = shardnet_session_create(ctx, m, "cpu:0", &s);
        if (st == SHARDNET_OK) {
            cr_assert_eq(shardnet_session_set_input(
                             s, 0, SHARDNET_DTYPE_FLOAT32, 3, d, x),
                         SHARDNET_OK);
            st = shardnet_session_run(s);
        }
        shardnet_session_free(s);
        shardnet_model_free(m);
    }
    unlink(path);
    cr_assert_eq(st, SHARDNET_INVALID_ARGUMENT, "%s: %s", op,
                 shardnet_last_error());
    cr_assert(strstr(shardnet_last_error(), msg),
              "%s: error '%s' does not mention '%s'", op,
              shardnet_last_error(), msg);
}

#define LIST(...) ((const char *const[]){__VA_ARGS__, NULL})

Test(models, hostile_reduction_and_selection_attributes_are_refused)
{
    const int64_t huge = (int64_t)1 << 62;
    expect_refused("ReduceL2", 13, LIST("x"), LIST("y"),
                   &(attr_spec){"axes", 7, {0, 5}, 2, NULL}, 1, NULL, 0,
                   "axis 5 out of range for rank 3");
    expect_refused("ReduceLogSumExp", 18, LIST("x", "axes"), LIST("y"), NULL,
                   0, &(init_spec){"axes", {-huge}, 1, {1}}, 1,
                   "out of range for rank 3");
    expect_refused("ArgMax", 13, LIST("x"), LIST("y"),
                   &(attr_spec){"axis", 2, {-4}, 1, NULL}, 1, NULL, 0,
                   "axis -4 out of range for rank 3");
    expect_refused("Hardmax", 11, LIST("x"), LIST("y"),
                   &(attr_spec){"axis", 2, {huge}, 1, NULL}, 1, NULL, 0,
                   "out of range for rank 3");
    expect_refused("TopK", 11, LIST("x", "k"), LIST("v", "i"), NULL, 0,
                   &(init_spec){"k", {5}, 1, {1}}, 1,
                   "k = 5, beyond the 4 elements");
    expect_refused("TopK", 1, LIST("x"), LIST("v", "i"),
                   &(attr_spec){"k", 2, {-1}, 1, NULL}, 1, NULL, 0,
                   "k = -1");
    expect_refused("CumSum", 14, LIST("x", "a"), LIST("y"), NULL, 0,
                   &(init_spec){"a", {3}, 0, {0}}, 1, "axis must be one value");
    expect_refused("LpNormalization", 1, LIST("x"), LIST("y"),
                   &(attr_spec){"p", 2, {3}, 1, NULL}, 1, NULL, 0, "p = 3");
}

/* Shapes that do not broadcast: the error names them (a model fed a longer
 * sequence than its position table holds fails so, in an Add). */
Test(models, shapes_that_do_not_broadcast_are_named)
{
    const init_spec ab[] = {{"a", {1, 2}, 1, {2}}, {"b", {1, 2, 3}, 1, {3}}};
    expect_refused("Add", 14, LIST("a", "b"), LIST("y"), NULL, 0, ab, 2,
                   "input shapes [2] and [3] cannot be broadcast together");
    expect_refused("Equal", 13, LIST("a", "b"), LIST("y"), NULL, 0, ab, 2,
                   "input shapes [2] and [3] cannot be broadcast together");
    expect_refused("Expand", 13, LIST("x", "s"), LIST("y"), NULL, 0,
                   &(init_spec){"s", {5}, 1, {1}}, 1,
                   "the input's shape [2, 3, 4] cannot be broadcast to the "
                   "shape [5]");
}

/* x is (2, 3, 4): three channels. */
Test(models, hostile_group_normalization_is_refused)
{
    const init_spec three[] = {{"s", {1, 1, 1}, 1, {3}},
                               {"b", {0, 0, 0}, 1, {3}}};
    const init_spec two[] = {{"s", {1, 1}, 1, {2}}, {"b", {0, 0, 0}, 1, {3}}};
    expect_refused("GroupNormalization", 21, LIST("x", "s", "b"), LIST("y"),
                   &(attr_spec){"num_groups", 2, {2}, 1, NULL}, 1, three, 2,
                   "num_groups 2 does not divide the input's 3 channels");
    expect_refused("GroupNormalization", 21, LIST("x", "s", "b"), LIST("y"),
                   &(attr_spec){"num_groups", 2, {0}, 1, NULL}, 1, three, 2,
                   "num_groups 0 does not divide");
    expect_refused("GroupNormalization", 21, LIST("x", "s", "b"), LIST("y"),
                   &(attr_spec){"num_groups", 2, {3}, 1, NULL}, 1, two, 2,
                   "scale and bias must have 3 values (one per channel, "
                   "opset 21), not 2 and 3");
    expect_refused("GroupNormalization", 18, LIST("x", "s", "b"), LIST("y"),
                   &(attr_spec){"num_groups", 2, {1}, 1, NULL}, 1, three, 2,
                   "must have 1 values (one per group, opset 18)");
}

Test(models, hostile_loss_targets_and_reductions_are_refused)
{
    /* x is (2, 3, 4): a target is (2, 4), classes in [0, 3) */
    const init_spec bad = {"t", {0, 1, 2, 0, 1, 7, 0, 0}, 2, {2, 4}};
    const init_spec flat = {"t", {0, 1}, 1, {2}};
    const init_spec wide = {"t", {0, 1, 2, 0, 1, 2}, 2, {2, 3}};
    expect_refused("NegativeLogLikelihoodLoss", 13, LIST("x", "t"),
                   LIST("y"), NULL, 0, &bad, 1,
                   "target 7 at 5 is not a class in [0, 3)");
    expect_refused("NegativeLogLikelihoodLoss", 12, LIST("x", "t"),
                   LIST("y"), NULL, 0, &flat, 1, "one rank less");
    expect_refused("SoftmaxCrossEntropyLoss", 13, LIST("x", "t"), LIST("y"),
                   NULL, 0, &wide, 1, "target dimension 1 is 3");
    expect_refused("SoftmaxCrossEntropyLoss", 13, LIST("x", "t"), LIST("y"),
                   &(attr_spec){"reduction", 3, {0}, 0, "average"}, 1,
                   &bad, 1, "reduction 'average'");
}
