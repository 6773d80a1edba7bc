/*
 * Layer split: every fixture model cut into pipeline stages over 2, 3 and
 * 4 devices gives the single-device answer - bit for bit when all stages
 * run on the same backend, within 1e-4 relative when backends mix.
 */
#include <config.h>

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"
#include "shardnet.h"

static shardnet_context_t *ctx;

static void setup(void)
{
    cr_assert_eq(shardnet_context_create(&ctx), SHARDNET_OK, "%s",
                 shardnet_last_error());
}

static void teardown(void)
{
    shardnet_context_free(ctx);
}

TestSuite(layer_split, .init = setup, .fini = teardown, .timeout = 600);

static void fixture(char *out, size_t cap, const char *name)
{
    const char *src = getenv("SHARDNET_SRCDIR");
    snprintf(out, cap, "%s/tests/fixtures/%s", src ? src : ".", name);
}

/* Is every device of the list present? */
static int have(const char *devices)
{
    size_t idx[8], n;
    return shardnet_devices_select(ctx, devices, idx, 8, &n) == SHARDNET_OK;
}

/* Run the model on `devices` with the split; returns output 0 (malloc'ed). */
static float *run(shardnet_model_t *m, const shardnet_tensor *in,
                  const char *devices, const char *split, size_t micro,
                  size_t *count)
{
    shardnet_session_options o = {.split = split, .micro_batches = micro};
    shardnet_session_t *s = NULL;
    shardnet_tensor_info info;
    const void *out;
    cr_assert_eq(shardnet_session_create_with(ctx, m, devices, &o, &s),
                 SHARDNET_OK, "%s: %s", devices, shardnet_last_error());
    cr_assert_eq(shardnet_session_set_input(s, 0, in->info.dtype,
                                            in->info.rank, in->info.dims,
                                            in->data),
                 SHARDNET_OK);
    cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s: %s", devices,
                 shardnet_last_error());
    cr_assert_eq(shardnet_session_output(s, 0, &info, &out), SHARDNET_OK);
    size_t n = 1;
    for (int i = 0; i < info.rank; i++)
        n *= (size_t)info.dims[i];
    cr_assert_eq(info.dims[0], in->info.dims[0], "%s: batch lost", devices);
    float *copy = malloc(n * sizeof *copy);
    memcpy(copy, out, n * sizeof *copy);
    *count = n;
    shardnet_session_free(s);
    return copy;
}

static void equivalence(const char *model, const char *input)
{
    static const struct {
        const char *devices, *reference;
        int exact;
    } sets[] = {
        {"cpu:0,cpu:1", "cpu:0", 1},
        {"cl:0,cl:1", "cl:0", 1},
        {"cpu:0,cl:0", "cpu:0", 0},
        {"cpu:0,cpu:1,cl:1", "cpu:0", 0},
        {"cl:0,cpu:0,cpu:1", "cpu:0", 0},
        {"cpu:0,cpu:1,cl:0,cl:1", "cpu:0", 0},
    };
    char path[4096];
    shardnet_model_t *m = NULL;
    shardnet_tensor in;
    size_t ran = 0;
    fixture(path, sizeof path, model);
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK, "%s",
                 shardnet_last_error());
    fixture(path, sizeof path, input);
    cr_assert_eq(shardnet_tensor_load(path, &in), SHARDNET_OK);
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
        if (!have(sets[k].devices))
            continue;
        size_t n0, n1;
        float *want = run(m, &in, sets[k].reference, "none", 0, &n0);
        for (size_t micro = 1; micro <= 3; micro += 2) {
            float *got = run(m, &in, sets[k].devices, "layer", micro, &n1);
            cr_assert_eq(n0, n1);
            for (size_t i = 0; i < n0; i++) {
                if (sets[k].exact)
                    cr_assert_eq(memcmp(&got[i], &want[i], sizeof *got), 0,
                                 "%s on %s (%zu micro-batches): element %zu "
                                 "is %.9g, %s alone gives %.9g",
                                 model, sets[k].devices, micro, i,
                                 (double)got[i], sets[k].reference,
                                 (double)want[i]);
                else
                    cr_assert(fabsf(got[i] - want[i]) <=
                                  1e-4f * (1.0f + fabsf(want[i])),
                              "%s on %s: element %zu is %.9g, %s alone "
                              "gives %.9g",
                              model, sets[k].devices, i, (double)got[i],
                              sets[k].reference, (double)want[i]);
            }
            free(got);
        }
        free(want);
        ran++;
    }
    cr_assert_gt(ran, 0, "no device set available");
    shardnet_tensor_release(&in);
    shardnet_model_free(m);
}

Test(layer_split, mlp_gives_the_single_device_answer)
{
    equivalence("fashion_mlp.onnx", "fashion_mlp_input.npy");
}

Test(layer_split, cnn_gives_the_single_device_answer)
{
    equivalence("small_cnn.onnx", "small_cnn_input.npy");
}

Test(layer_split, transformer_gives_the_single_device_answer)
{
    equivalence("small_transformer.onnx", "small_transformer_input.npy");
}

Test(layer_split, planner_gives_every_device_a_contiguous_stage)
{
    char path[4096];
    sn_graph *g = NULL;
    sn_pipeline *p = NULL;
    sn_device *devs[3];
    fixture(path, sizeof path, "small_cnn.onnx");
    cr_assert_eq(sn_onnx_load(path, &g), SHARDNET_OK);
    cr_assert_eq(sn_graph_sort(g), SHARDNET_OK);
    cr_assert_eq(sn_passes_run(g), SHARDNET_OK);
    if (shardnet_device_count(ctx) < 3)
        cr_skip_test("needs three devices");
    for (int i = 0; i < 3; i++)
        devs[i] = sn_context_device(ctx, (size_t)i);
    const sn_value *in = &g->values[g->inputs[0]];
    float x[2 * 28 * 28] = {0};
    sn_binding b = {.dtype = SN_DT_FLOAT, .rank = in->rank, .data = x,
                    .nbytes = sizeof x};
    memcpy(b.dims, in->dims, sizeof b.dims);
    b.dims[0] = 2;
    cr_assert_eq(sn_pipeline_create(g, devs, 3, &b, NULL, &p), SHARDNET_OK,
                 "%s", shardnet_last_error());
    cr_assert_eq(sn_pipeline_stages(p), 3);
    for (size_t s = 0; s < 3; s++)
        cr_assert_lt(sn_pipeline_stage_start(p, s),
                     sn_pipeline_stage_start(p, s + 1),
                     "stage %zu is empty", s);
    cr_assert_eq(sn_pipeline_stage_start(p, 3), sn_pipeline_live_nodes(p));
    sn_pipeline_free(p);

    /* Cuts given by hand must be increasing and inside the model. */
    size_t bad[2] = {3, 2};
    cr_assert_eq(sn_pipeline_create(g, devs, 3, &b, bad, &p),
                 SHARDNET_INVALID_ARGUMENT);
    size_t good[2] = {1, 2};
    cr_assert_eq(sn_pipeline_create(g, devs, 3, &b, good, &p), SHARDNET_OK);
    cr_assert_eq(sn_pipeline_stage_start(p, 1), 1);
    sn_pipeline_free(p);
    sn_graph_free(g);
}

Test(layer_split, unknown_splits_and_lists_without_one_are_refused)
{
    char path[4096];
    shardnet_model_t *m = NULL;
    shardnet_session_t *s = NULL;
    shardnet_session_options tensor = {.split = "tensor"};
    shardnet_session_options odd = {.split = "diagonal"};
    fixture(path, sizeof path, "fashion_mlp.onnx");
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK);
    cr_assert_eq(shardnet_session_create_with(ctx, m, "cpu:0", &tensor, &s),
                 SHARDNET_OK, "%s", shardnet_last_error());
    shardnet_session_free(s);
    s = NULL;
    cr_assert_eq(shardnet_session_create_with(ctx, m, "cpu:0", &odd, &s),
                 SHARDNET_INVALID_ARGUMENT);
    cr_assert(strstr(shardnet_last_error(), "diagonal"));
    shardnet_session_options none = {.split = "none"};
    if (have("cpu:0,cpu:1"))
        cr_assert_eq(shardnet_session_create_with(ctx, m, "cpu:0,cpu:1", &none,
                                                  &s),
                     SHARDNET_INVALID_ARGUMENT);
    shardnet_model_free(m);
}

Test(layer_split, auto_keeps_one_device_when_a_slow_one_would_slow_it_down)
{
    char path[4096], text[8192];
    shardnet_model_t *m = NULL;
    shardnet_session_t *s = NULL;
    shardnet_tensor in;
    if (!have("cpu:0,cl:0"))
        cr_skip_test("needs cpu:0 and cl:0");
    fixture(path, sizeof path, "fashion_mlp.onnx");
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK);
    fixture(path, sizeof path, "fashion_mlp_input.npy");
    cr_assert_eq(shardnet_tensor_load(path, &in), SHARDNET_OK);
    /* Several devices and no split: "auto". */
    cr_assert_eq(shardnet_session_create(ctx, m, "cpu:0,cl:0", &s),
                 SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(shardnet_session_set_input(s, 0, in.info.dtype, in.info.rank,
                                            in.info.dims, in.data),
                 SHARDNET_OK);
    shardnet_session_describe(s, text, sizeof text);
    /* Every alternative is estimated... */
    double t_cpu, t_cl, t_layer;
    const char *p;
    cr_assert((p = strstr(text, "none on cpu:0: estimated ")), "%s", text);
    t_cpu = strtod(p + strlen("none on cpu:0: estimated "), NULL);
    cr_assert((p = strstr(text, "none on cl:0: estimated ")), "%s", text);
    t_cl = strtod(p + strlen("none on cl:0: estimated "), NULL);
    cr_assert((p = strstr(text, "micro-batches: estimated ")), "%s", text);
    t_layer = strtod(p + strlen("micro-batches: estimated "), NULL);
    cr_assert(t_cpu > 0 && t_cl > 0 && t_layer > 0, "%s", text);
    /* ...and the fastest estimate is taken.  (Here PoCL on one core runs
     * GEMM an order of magnitude slower than the CPU backend, so in an
     * optimised build the choice is one device: cpu:0.) */
    int layer = t_layer < t_cpu && t_layer < t_cl;
    const char *dev = t_cpu <= t_cl ? "cpu:0" : "cl:0";
    cr_assert(strstr(text, layer ? "choice: layer" : "choice: none"), "%s",
              text);
    cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s",
                 shardnet_last_error());
    shardnet_session_describe(s, text, sizeof text);
    char running[64];
    snprintf(running, sizeof running, layer ? "running: layer split"
                                            : "running: none, on %s", dev);
    cr_assert(strstr(text, running), "%s", text);
    shardnet_session_free(s);
    shardnet_tensor_release(&in);
    shardnet_model_free(m);
}

TestSuite(tensor_split, .init = setup, .fini = teardown, .timeout = 600);

/* Tensor split (Megatron pairs on a chain of Gemm layers): the MLP's
 * answer on 2 to 4 devices, mixed backends included. */
Test(tensor_split, perceptron_matches_one_device_within_rounding)
{
    static const char *const sets[] = {"cpu:0,cpu:1", "cpu:0,cl:0",
                                       "cpu:0,cpu:1,cl:1",
                                       "cpu:0,cpu:1,cl:0,cl:1"};
    char path[4096];
    shardnet_model_t *m = NULL;
    shardnet_tensor in;
    size_t ran = 0;
    fixture(path, sizeof path, "fashion_mlp.onnx");
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK);
    fixture(path, sizeof path, "fashion_mlp_input.npy");
    cr_assert_eq(shardnet_tensor_load(path, &in), SHARDNET_OK);
    size_t n0, n1;
    float *want = run(m, &in, "cpu:0", "none", 0, &n0);
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
        if (!have(sets[k]))
            continue;
        float *got = run(m, &in, sets[k], "tensor", 0, &n1);
        cr_assert_eq(n0, n1);
        for (size_t i = 0; i < n0; i++)
            cr_assert(fabsf(got[i] - want[i]) <= 1e-4f * (1.0f + fabsf(want[i])),
                      "%s: element %zu is %.9g, cpu:0 alone gives %.9g",
                      sets[k], i, (double)got[i], (double)want[i]);
        free(got);
        ran++;
    }
    cr_assert_gt(ran, 0);
    free(want);
    shardnet_tensor_release(&in);
    shardnet_model_free(m);
}

Test(tensor_split, other_models_are_refused_clearly)
{
    char path[4096];
    shardnet_model_t *m = NULL;
    shardnet_session_t *s = NULL;
    shardnet_session_options o = {.split = "tensor"};
    shardnet_tensor in;
    if (!have("cpu:0,cpu:1"))
        cr_skip_test("needs two devices");
    fixture(path, sizeof path, "small_cnn.onnx");
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK);
    fixture(path, sizeof path, "small_cnn_input.npy");
    cr_assert_eq(shardnet_tensor_load(path, &in), SHARDNET_OK);
    cr_assert_eq(shardnet_session_create_with(ctx, m, "cpu:0,cpu:1", &o, &s),
                 SHARDNET_OK);
    cr_assert_eq(shardnet_session_set_input(s, 0, in.info.dtype, in.info.rank,
                                            in.info.dims, in.data),
                 SHARDNET_OK);
    cr_assert_eq(shardnet_session_run(s), SHARDNET_UNSUPPORTED);
    cr_assert(strstr(shardnet_last_error(), "chains of Gemm layers"), "%s",
              shardnet_last_error());
    shardnet_session_free(s);
    shardnet_tensor_release(&in);
    shardnet_model_free(m);
}
