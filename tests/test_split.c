/*
 * Splits: every fixture model cut into pipeline stages over 2, 3 and 4
 * devices gives the single-device answer - bit for bit when all stages run
 * on the same backend, within 1e-4 relative when backends mix; so do a
 * replicated split (stages on several devices taking micro-batches in
 * turn) and a data split; sharded by tensor (and under "auto") within
 * 1e-4 relative.
 */
#include <config.h>

#include <criterion/alloc.h>
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/pipeline.h"
#include "testfiles.h"
#include "passes/passes.h"
#include "import/onnx.h"
#include "shardnet.h"
#include "context_suite.h"

SN_CONTEXT_SUITE(layer_split, 600);

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

/* A session of the model on `devices` of context `on` (NULL: the plan
 * file's) with options o, its input bound, run once. */
static shardnet_session_t *ran_on(shardnet_context_t *on, shardnet_model_t *m,
                                  const shardnet_tensor *in,
                                  const char *devices,
                                  const shardnet_session_options *o)
{
    shardnet_session_t *s = NULL;
    cr_assert_eq(shardnet_session_create_with(on, m, devices, o, &s),
                 SHARDNET_OK, "%s: %s", devices ? devices : "plan",
                 shardnet_last_error());
    cr_assert_eq(shardnet_session_set_input(s, 0, in->info.dtype,
                                            in->info.rank, in->info.dims,
                                            in->data),
                 SHARDNET_OK);
    cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s: %s",
                 devices ? devices : "plan", shardnet_last_error());
    return s;
}

/* Run the model on `devices` of context `on` with options o; returns
 * output 0 (malloc'ed). */
static float *run_with(shardnet_context_t *on, shardnet_model_t *m,
                       const shardnet_tensor *in, const char *devices,
                       const shardnet_session_options *o, size_t *count)
{
    shardnet_session_t *s = ran_on(on, m, in, devices, o);
    shardnet_tensor_info info;
    const void *out;
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

/* The model on `devices` of context `on` with the split. */
static float *run_on(shardnet_context_t *on, shardnet_model_t *m,
                     const shardnet_tensor *in, const char *devices,
                     const char *split, size_t micro, size_t *count)
{
    shardnet_session_options o = {.split = split, .micro_batches = micro};
    return run_with(on, m, in, devices, &o, count);
}

/* A data split on the suite's context, its rows from a plan file (NULL:
 * the planner's). */
static float *run_plan(shardnet_model_t *m, const shardnet_tensor *in,
                       const char *devices, const char *plan, size_t *count)
{
    shardnet_session_options o = {.split = "data", .plan_file = plan};
    return run_with(ctx, m, in, devices, &o, count);
}

/* run_on the suite's context. */
static float *run(shardnet_model_t *m, const shardnet_tensor *in,
                  const char *devices, const char *split, size_t micro,
                  size_t *count)
{
    return run_on(ctx, m, in, devices, split, micro, count);
}

/* One model under one split on one device set, against its reference
 * device alone: layer split bit-exact on one backend, the rest within 1e-4
 * relative.  Every combination is its own test, so that a set this machine
 * lacks is a skip, named with its reason. */
typedef struct split_case {
    size_t model, set; /* indices into split_models and split_sets */
    char split[16];
} split_case;

static const char *const split_models[][2] = {
    {"fashion_mlp.onnx", "fashion_mlp_input.npy"},
    {"small_cnn.onnx", "small_cnn_input.npy"},
    {"small_transformer.onnx", "small_transformer_input.npy"},
    /* torch's exporter: shapes read back at run time, int64 ids */
    {"torch_encoder.onnx", "torch_encoder_input.npy"},
};

static const struct {
    const char *devices, *reference;
    int exact, count;
} split_sets[] = {
    {"cpu:0,cpu:1", "cpu:0", 1, 2},
    {"cl:0,cl:1", "cl:0", 1, 2},
    {"cpu:0,cl:0", "cpu:0", 0, 2},
    {"cpu:0,cpu:1,cl:1", "cpu:0", 0, 3},
    {"cl:0,cpu:0,cpu:1", "cpu:0", 0, 3},
    {"cpu:0,cpu:1,cl:0,cl:1", "cpu:0", 0, 4},
    /* a machine of one package with two OpenCL devices */
    {"cpu:0,cl:0,cl:1", "cpu:0", 0, 3},
#ifdef SN_HAVE_CUDA
    /* a GPU with the CPU, with an OpenCL device, and cut in two */
    {"cpu:0,cuda:0", "cpu:0", 0, 2},
    {"cuda:0,cpu:0", "cpu:0", 0, 2},
    {"cuda:0,cpu:0,cpu:1", "cpu:0", 0, 3},
    {"cuda:0,cl:0", "cpu:0", 0, 2},
    {"cuda:0[0-63],cuda:0[64-127]", "cuda:0", 0, 2},
#endif
};

#define NMODELS (sizeof split_models / sizeof split_models[0])
#define NSETS (sizeof split_sets / sizeof split_sets[0])

/* Every model on every set for `split` (a hybrid split: sets of three
 * devices or more); returns the count.  The array comes from cr_malloc
 * and holds no pointers: the tests run in new processes, which see
 * Criterion's shared memory at another address. */
static size_t split_cases(split_case *out, const char *split)
{
    size_t n = 0;
    for (size_t k = 0; k < NMODELS; k++)
        for (size_t d = 0; d < NSETS; d++) {
            if (!strcmp(split, "hybrid") && split_sets[d].count < 3)
                continue;
            out[n] = (split_case){.model = k, .set = d};
            snprintf(out[n++].split, sizeof out->split, "%s", split);
        }
    return n;
}

/* Skip unless every device of the case is here. */
static void need_devices(const char *devices)
{
    if (have(devices))
        return;
    char here[256] = "";
    size_t at = 0;
    for (size_t i = 0; i < shardnet_device_count(ctx) && at < sizeof here;
         i++) {
        shardnet_device_info info;
        shardnet_device_get_info(ctx, i, &info);
        at += (size_t)snprintf(here + at, sizeof here - at, " %s", info.name);
    }
    cr_skip_test("needs %s; this build and machine have%s", devices, here);
}

/* The memory one device needs for the model, from the planner's
 * description of the alternatives ("none on D: ..., memory X MB of"). */
static double one_device_mb(const char *text)
{
    double most = 0;
    for (const char *p = text; (p = strstr(p, "none on ")); p++) {
        const char *eol = strchr(p, '\n'), *mem = strstr(p, "memory ");
        if (mem && (!eol || mem < eol)) {
            double mb = strtod(mem + strlen("memory "), NULL);
            if (mb > most)
                most = mb;
        }
    }
    return most;
}

/* The answer of a replicated split, bit for bit where exact, else within
 * 1e-4 relative. */
static void check_answer(const float *got, const float *want, size_t n,
                         int exact, const char *model, const char *devices,
                         const char *what)
{
    for (size_t i = 0; i < n; i++)
        cr_assert(exact ? !memcmp(&got[i], &want[i], sizeof *got)
                        : fabsf(got[i] - want[i]) <=
                              1e-4f * (1.0f + fabsf(want[i])),
                  "%s on %s (%s): element %zu is %.9g, one device gives %.9g",
                  model, devices, what, i, (double)got[i], (double)want[i]);
}

/* Every replicated configuration of the list (each composition into
 * consecutive stages with a stage on two devices or more: "2", "2-1",
 * "1-2", "3", ...), from a plan file's replicas, at the default
 * micro-batches and at one per replica and row pair. */
static void every_replication(const char *model, const char *devices,
                              size_t nd, int exact, shardnet_model_t *m,
                              const shardnet_tensor *in, const float *want,
                              size_t n0)
{
    char plan[64];
    snprintf(plan, sizeof plan, "/tmp/sn-replicas-plan-%d", (int)getpid());
    for (unsigned k = 0; k < 1u << (nd - 1); k++) {
        char reps[32] = "";
        size_t run = 1, most = 0, at = 0;
        for (size_t d = 0; d < nd; d++, run++)
            if (d + 1 == nd || (k >> d & 1)) {
                at += (size_t)snprintf(reps + at, sizeof reps - at, "%s%zu",
                                       at ? "-" : "", run);
                most = run > most ? run : most;
                run = 0;
            }
        if (most < 2)
            continue;
        for (size_t micro = 0; micro < 2; micro++) {
            FILE *f = fopen(plan, "w");
            cr_assert(f != NULL);
            fprintf(f, "split replicated\ndevices %s\nreplicas %s\n",
                    devices, reps);
            if (micro)
                fprintf(f, "micro_batches %zu\n",
                        (size_t)in->info.dims[0] / 2);
            fclose(f);
            shardnet_session_options o = {.plan_file = plan};
            size_t n1;
            float *got = run_with(ctx, m, in, devices, &o, &n1);
            cr_assert_eq(n0, n1);
            char what[64];
            snprintf(what, sizeof what, "replicated %s, %s micro-batches",
                     reps, micro ? "two-row" : "default");
            check_answer(got, want, n0, exact, model, devices, what);
            free(got);
        }
    }
    unlink(plan);
}

static void split_matches_one_device(const split_case *sc)
{
    const struct {
        const char *model, *input, *split, *devices, *reference;
        int exact;
    } cc = {split_models[sc->model][0], split_models[sc->model][1],
            sc->split, split_sets[sc->set].devices,
            split_sets[sc->set].reference, split_sets[sc->set].exact},
      *c = &cc;
    char path[4096];
    shardnet_model_t *m = NULL;
    shardnet_tensor in;
    need_devices(c->devices);
    fixture(path, sizeof path, c->model);
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK, "%s",
                 shardnet_last_error());
    fixture(path, sizeof path, c->input);
    cr_assert_eq(shardnet_tensor_load(path, &in), SHARDNET_OK);
    size_t n0, n1;
    int replicated = !strcmp(c->split, "replicated");
    int layer = !strcmp(c->split, "layer") || replicated;
    /* Micro-batches: none (a replicated split: the default, one per
     * replica at least), three, and where the split is exact also 19 (of
     * 13 to 14 rows for the MLP's 256: kernels' remainder rows) and one
     * row each (a GEMM with M = 1). */
    size_t batch = (size_t)in.info.dims[0];
    size_t micros[] = {replicated ? 0 : 1, 3, 19, batch};
    size_t nmicro = !layer ? 1 : c->exact ? 4 : 2;
    float *want = run(m, &in, c->reference, "none", 0, &n0);
    if (replicated)
        every_replication(c->model, c->devices, split_sets[sc->set].count,
                          c->exact, m, &in, want, n0);
    if (!strcmp(c->split, "auto")) {
        /* Auto on its own keeps one device when splitting does not pay
         * (then this would compare a device with itself): with less memory
         * per device than the model needs alone (the planner's figure, from
         * a first session), in a context of that memory limit, it must
         * split. */
        shardnet_session_options o = {.split = "auto"};
        shardnet_context_options limited = {.size = sizeof limited};
        shardnet_context_t *small = NULL;
        shardnet_session_t *s = NULL;
        char text[16384];
        shardnet_tensor_info info;
        const void *out;
        cr_assert_eq(shardnet_session_create_with(ctx, m, c->devices, &o, &s),
                     SHARDNET_OK, "%s", shardnet_last_error());
        cr_assert_eq(shardnet_session_set_input(s, 0, in.info.dtype,
                                                in.info.rank, in.info.dims,
                                                in.data),
                     SHARDNET_OK);
        shardnet_session_describe(s, text, sizeof text);
        shardnet_session_free(s);
        double mb = one_device_mb(text);
        cr_assert_gt(mb, 0, "no memory figure in\n%s", text);
        limited.memory_limit = (uint64_t)(mb * 1024 * 0.8 + 0.5) * 1024;
        cr_assert_eq(shardnet_context_create_with(&limited, &small),
                     SHARDNET_OK, "%s", shardnet_last_error());
        cr_assert_eq(shardnet_session_create_with(small, m, c->devices, &o, &s),
                     SHARDNET_OK, "%s", shardnet_last_error());
        cr_assert_eq(shardnet_session_set_input(s, 0, in.info.dtype,
                                                in.info.rank, in.info.dims,
                                                in.data),
                     SHARDNET_OK);
        cr_assert_eq(shardnet_session_run(s), SHARDNET_OK,
                     "%s under %llu bytes: %s", c->devices,
                     (unsigned long long)limited.memory_limit,
                     shardnet_last_error());
        shardnet_session_describe(s, text, sizeof text);
        cr_assert(!strstr(text, "choice: none") &&
                      !strstr(text, "running: none"),
                  "%s on %s with %llu bytes per device (%.2f MB alone): auto "
                  "kept one device:\n%s",
                  c->model, c->devices,
                  (unsigned long long)limited.memory_limit, mb, text);
        cr_assert_eq(shardnet_session_output(s, 0, &info, &out), SHARDNET_OK);
        cr_assert_eq(info.dims[0], in.info.dims[0]);
        for (size_t i = 0; i < n0; i++) {
            float g = ((const float *)out)[i];
            cr_assert(fabsf(g - want[i]) <= 1e-4f * (1.0f + fabsf(want[i])),
                      "%s, auto on %s: element %zu is %.9g, %s alone gives "
                      "%.9g\n%s",
                      c->model, c->devices, i, (double)g, c->reference,
                      (double)want[i], text);
        }
        shardnet_session_free(s);
        shardnet_context_free(small);
        nmicro = 0;
    }
    if (!strcmp(c->split, "data")) {
        /* The planner's rows, then rows a plan file fixes: even, and
         * uneven (3:1:2:1), so that every device of the set runs some. */
        static const char *const rows[] = {"1 1 1 1", "3 1 2 1"};
        for (size_t k = 0; k < 3; k++) {
            char plan[64] = "";
            if (k) {
                snprintf(plan, sizeof plan, "/tmp/sn-data-plan-%d",
                         (int)getpid());
                FILE *f = fopen(plan, "w");
                cr_assert(f != NULL);
                fprintf(f, "split data\ndevices %s\nrows %.*s\n",
                        c->devices, 2 * split_sets[sc->set].count - 1,
                        rows[k - 1]);
                fclose(f);
            }
            float *got = run_plan(m, &in, c->devices, k ? plan : NULL, &n1);
            if (k)
                unlink(plan);
            cr_assert_eq(n0, n1);
            for (size_t i = 0; i < n0; i++)
                cr_assert(c->exact ? !memcmp(&got[i], &want[i], sizeof *got)
                                   : fabsf(got[i] - want[i]) <=
                                         1e-4f * (1.0f + fabsf(want[i])),
                          "%s, data split on %s (rows %s): element %zu is "
                          "%.9g, %s alone gives %.9g",
                          c->model, c->devices, k ? rows[k - 1] : "planned",
                          i, (double)got[i], c->reference, (double)want[i]);
            free(got);
        }
        nmicro = 0;
    }
    for (size_t mi = 0; mi < nmicro; mi++) {
        size_t micro = micros[mi];
        if (micro > batch)
            continue;
        float *got = run(m, &in, c->devices, c->split, micro, &n1);
        cr_assert_eq(n0, n1);
        for (size_t i = 0; i < n0; i++) {
            if (c->exact && layer)
                cr_assert_eq(memcmp(&got[i], &want[i], sizeof *got), 0,
                             "%s on %s (%zu micro-batches): element %zu "
                             "is %.9g, %s alone gives %.9g",
                             c->model, c->devices, micro, i, (double)got[i],
                             c->reference, (double)want[i]);
            else
                cr_assert(fabsf(got[i] - want[i]) <=
                              1e-4f * (1.0f + fabsf(want[i])),
                          "%s, split %s on %s: element %zu is %.9g, %s "
                          "alone gives %.9g",
                          c->model, c->split, c->devices, i, (double)got[i],
                          c->reference, (double)want[i]);
        }
        free(got);
    }
    free(want);
    shardnet_tensor_free(&in);
    shardnet_model_free(m);
}

ParameterizedTestParameters(layer_split, gives_the_single_device_answer)
{
    split_case *cases = cr_malloc(NMODELS * NSETS * sizeof *cases);
    return cr_make_param_array(split_case, cases, split_cases(cases, "layer"));
}

ParameterizedTest(split_case *c, layer_split, gives_the_single_device_answer)
{
    split_matches_one_device(c);
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

/* The choice is the smallest of the estimates the description lists (what
 * auto chooses when the answer is known beforehand is checked by
 * auto_matches_one_device_on_every_model: too little memory for one
 * device, it splits). */
Test(layer_split, auto_takes_the_smallest_of_its_estimates)
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
    /* Describing decides nothing: the split is still open (saving the plan
     * is refused before any file is opened). */
    cr_assert_eq(shardnet_session_save_plan(s, "/nonexistent/plan"),
                 SHARDNET_INVALID_ARGUMENT, "%s", shardnet_last_error());
    cr_assert(strstr(shardnet_last_error(), "chosen at the first run"), "%s",
              shardnet_last_error());
    /* Every alternative is estimated... */
    double t_cpu, t_cl, t_layer;
    const char *p;
    cr_assert((p = strstr(text, "none on cpu:0: estimated ")), "%s", text);
    t_cpu = strtod(p + strlen("none on cpu:0: estimated "), NULL);
    cr_assert((p = strstr(text, "none on cl:0: estimated ")), "%s", text);
    t_cl = strtod(p + strlen("none on cl:0: estimated "), NULL);
    cr_assert((p = strstr(text, "micro-batches: estimated ")), "%s", text);
    t_layer = strtod(p + strlen("micro-batches: estimated "), NULL);
    cr_assert((p = strstr(text, "tensor over 2 devices: estimated ")), "%s",
              text);
    double t_tensor = strtod(p + strlen("tensor over 2 devices: estimated "),
                             NULL);
    /* (The data split: unless it says why it is not possible.) */
    double t_data = 1e300;
    if ((p = strstr(text, "data over ")) && (p = strstr(p, ": estimated ")))
        t_data = strtod(p + strlen(": estimated "), NULL);
    else
        cr_assert(strstr(text, "data: not possible: "), "%s", text);
    cr_assert(t_cpu > 0 && t_cl > 0 && t_layer > 0 && t_tensor > 0 &&
                  t_data > 0,
              "%s", text);
    /* ...and the fastest estimate is taken (a tie keeps the one listed
     * first: none, layer, data, tensor). */
    double t_none = t_cpu < t_cl ? t_cpu : t_cl;
    int layer = t_layer < t_none;
    double best = layer ? t_layer : t_none;
    int data = t_data < best;
    best = data ? t_data : best;
    int tensor = t_tensor < best;
    layer = layer && !data && !tensor;
    data = data && !tensor;
    const char *dev = t_cpu <= t_cl ? "cpu:0" : "cl:0";
    cr_assert(strstr(text, layer    ? "choice: layer"
                           : data   ? "choice: data"
                           : tensor ? "choice: tensor"
                                    : "choice: none"),
              "%s", text);
    cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s",
                 shardnet_last_error());
    shardnet_session_describe(s, text, sizeof text);
    char running[64];
    snprintf(running, sizeof running,
             layer    ? "running: layer split"
             : data   ? "running: data split"
             : tensor ? "running: tensor split"
                      : "running: none, on %s",
             dev);
    cr_assert(strstr(text, running), "%s", text);
    shardnet_session_free(s);
    shardnet_tensor_free(&in);
    shardnet_model_free(m);
}

TestSuite(tensor_split, .init = context_setup, .fini = context_teardown,
          .timeout = 600);

/* Tensor split: Megatron column/row pairs, convolutions by output channel,
 * attention by heads; 2 to 4 devices, backends mixed. */
ParameterizedTestParameters(tensor_split, matches_one_device_within_rounding)
{
    split_case *cases = cr_malloc(NMODELS * NSETS * sizeof *cases);
    return cr_make_param_array(split_case, cases,
                               split_cases(cases, "tensor"));
}

ParameterizedTest(split_case *c, tensor_split,
                  matches_one_device_within_rounding)
{
    split_matches_one_device(c);
}

/* Data split: every device the whole model on rows of its own, 2 to 4
 * devices, backends mixed; the planner's rows and rows a plan file
 * fixes; bit for bit on one backend. */
ParameterizedTestParameters(layer_split, data_split_gives_the_single_device_answer)
{
    split_case *cases = cr_malloc(NMODELS * NSETS * sizeof *cases);
    return cr_make_param_array(split_case, cases, split_cases(cases, "data"));
}

ParameterizedTest(split_case *c, layer_split,
                  data_split_gives_the_single_device_answer)
{
    split_matches_one_device(c);
}

/* Hybrid: pipeline stages, each tensor-split over a group of devices (the
 * planner's grouping), on 3 and 4 devices. */
ParameterizedTestParameters(tensor_split, hybrid_matches_one_device_within_rounding)
{
    split_case *cases = cr_malloc(NMODELS * NSETS * sizeof *cases);
    return cr_make_param_array(split_case, cases,
                               split_cases(cases, "hybrid"));
}

ParameterizedTest(split_case *c, tensor_split,
                  hybrid_matches_one_device_within_rounding)
{
    split_matches_one_device(c);
}

/* "auto", made to split (too little memory for one device): whichever
 * split it takes, the one-device answer. */
ParameterizedTestParameters(tensor_split, auto_matches_one_device_on_every_model)
{
    split_case *cases = cr_malloc(NMODELS * NSETS * sizeof *cases);
    return cr_make_param_array(split_case, cases, split_cases(cases, "auto"));
}

ParameterizedTest(split_case *c, tensor_split,
                  auto_matches_one_device_on_every_model)
{
    split_matches_one_device(c);
}

/* Replicated: stages on consecutive devices each, every device of a stage
 * running it whole on micro-batches taken in turn; every configuration of
 * 2 to 4 devices, bit for bit on one backend. */
ParameterizedTestParameters(layer_split, replicated_gives_the_single_device_answer)
{
    split_case *cases = cr_malloc(NMODELS * NSETS * sizeof *cases);
    return cr_make_param_array(split_case, cases,
                               split_cases(cases, "replicated"));
}

ParameterizedTest(split_case *c, layer_split,
                  replicated_gives_the_single_device_answer)
{
    split_matches_one_device(c);
}

/* Devices that share host memory run the collectives together, each on its
 * own share; the staged engine (lib/comm/collective.c) runs them from one
 * thread.  Both sum in rank order: the same answer bit for bit. */
Test(tensor_split, shared_memory_and_staged_collectives_agree_exactly)
{
    static const char *const models[][2] = {
        {"fashion_mlp.onnx", "fashion_mlp_input.npy"},
        {"small_cnn.onnx", "small_cnn_input.npy"},
        {"small_transformer.onnx", "small_transformer_input.npy"},
    };
    static const char *const sets[] = {"cpu:0,cpu:1", "cpu:0,cpu:1,cl:0"};
    shardnet_context_options as_shared = {.size = sizeof as_shared,
                                          .staged_collectives = -1};
    shardnet_context_options as_staged = {.size = sizeof as_staged,
                                          .staged_collectives = 1};
    shardnet_context_t *shared_ctx, *staged_ctx;
    char path[4096];
    cr_assert_eq(shardnet_context_create_with(&as_shared, &shared_ctx),
                 SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(shardnet_context_create_with(&as_staged, &staged_ctx),
                 SHARDNET_OK, "%s", shardnet_last_error());
    for (size_t k = 0; k < 3; k++)
        for (size_t d = 0; d < 2; d++) {
            shardnet_model_t *m = NULL;
            shardnet_tensor in;
            size_t n0, n1;
            if (!have(sets[d]))
                continue;
            fixture(path, sizeof path, models[k][0]);
            cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK);
            fixture(path, sizeof path, models[k][1]);
            cr_assert_eq(shardnet_tensor_load(path, &in), SHARDNET_OK);
            /* One layout for both: the first's plan (its strategies are
             * searched on measured figures, which another context measures
             * anew). */
            char plan[64];
            snprintf(plan, sizeof plan, "/tmp/sn-agree-plan-%d", (int)getpid());
            shardnet_session_options o = {.split = "tensor"};
            shardnet_session_t *s = NULL;
            shardnet_tensor_info info;
            const void *out;
            cr_assert_eq(shardnet_session_create_with(shared_ctx, m, sets[d],
                                                      &o, &s),
                         SHARDNET_OK, "%s", shardnet_last_error());
            cr_assert_eq(shardnet_session_set_input(s, 0, in.info.dtype,
                                                    in.info.rank,
                                                    in.info.dims, in.data),
                         SHARDNET_OK);
            cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s",
                         shardnet_last_error());
            cr_assert_eq(shardnet_session_save_plan(s, plan), SHARDNET_OK,
                         "%s", shardnet_last_error());
            cr_assert_eq(shardnet_session_output(s, 0, &info, &out),
                         SHARDNET_OK);
            n0 = 1;
            for (int i = 0; i < info.rank; i++)
                n0 *= (size_t)info.dims[i];
            float *shared = malloc(n0 * sizeof *shared);
            memcpy(shared, out, n0 * sizeof *shared);
            shardnet_session_free(s);
            o.plan_file = plan;
            float *staged = run_with(staged_ctx, m, &in, sets[d], &o, &n1);
            unlink(plan);
            cr_assert_eq(n0, n1);
            cr_assert_eq(memcmp(shared, staged, n0 * sizeof *shared), 0,
                         "%s on %s: the two collective paths differ",
                         models[k][0], sets[d]);
            free(shared);
            free(staged);
            shardnet_tensor_free(&in);
            shardnet_model_free(m);
        }
    shardnet_context_free(shared_ctx);
    shardnet_context_free(staged_ctx);
}

/* The fixture model and input tensor of those names. */
static void load_fixtures(const char *model, const char *input,
                          shardnet_model_t **m, shardnet_tensor *in)
{
    char path[4096];
    fixture(path, sizeof path, model);
    cr_assert_eq(shardnet_model_load(path, m), SHARDNET_OK);
    fixture(path, sizeof path, input);
    cr_assert_eq(shardnet_tensor_load(path, in), SHARDNET_OK);
}

/* A session on the model with its input bound; the description. */
static shardnet_session_t *session_on(shardnet_model_t **m, const char *model,
                                      const char *input, const char *devices,
                                      const shardnet_session_options *o,
                                      shardnet_tensor *in)
{
    shardnet_session_t *s = NULL;
    load_fixtures(model, input, m, in);
    cr_assert_eq(shardnet_session_create_with(ctx, *m, devices, o, &s),
                 SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(shardnet_session_set_input(s, 0, in->info.dtype,
                                            in->info.rank, in->info.dims,
                                            in->data),
                 SHARDNET_OK);
    return s;
}

/* The layouts the walk chooses: Megatron pairs in the MLP, heads in the
 * transformer's attention with one row-parallel projection, channels in the
 * CNN. */
Test(tensor_split, describes_what_each_layer_does)
{
    static const struct {
        const char *model, *input, *want[4];
    } cases[] = {
        {"fashion_mlp.onnx", "fashion_mlp_input.npy",
         {"/fc1/Gemm (Gemm) ((1,1),(2,1)): column-parallel",
          "/fc2/Gemm (Gemm) ((1,2),(1,2)): row-parallel", "reduce-scatter",
          NULL}},
        {"small_transformer.onnx", "small_transformer_input.npy",
         {"/q/MatMul (MatMul) ((1,1,1),(1,2)): column-parallel",
          "/v/MatMul (MatMul) ((1,1,1),(1,2)): column-parallel",
          "/proj/MatMul (MatMul) ((1,1,2),(2,1)): row-parallel", NULL}},
        {"small_cnn.onnx", "small_cnn_input.npy",
         {"/conv1/Conv (Conv) ((1,1,1,1),(2,1,1,1)): output channels cut",
          NULL}},
    };
    shardnet_session_options o = {.split = "tensor"};
    if (!have("cpu:0,cpu:1"))
        cr_skip_test("needs two cpu devices");
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        shardnet_model_t *m;
        shardnet_tensor in;
        char text[16384];
        shardnet_session_t *s = session_on(&m, cases[k].model, cases[k].input,
                                           "cpu:0,cpu:1", &o, &in);
        cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s",
                     shardnet_last_error());
        shardnet_session_describe(s, text, sizeof text);
        cr_assert(strstr(text, "running: tensor split over 2 devices"), "%s",
                  text);
        for (size_t j = 0; cases[k].want[j]; j++)
            cr_assert(strstr(text, cases[k].want[j]), "%s: no '%s' in\n%s",
                      cases[k].model, cases[k].want[j], text);
        shardnet_session_free(s);
        shardnet_tensor_free(&in);
        shardnet_model_free(m);
    }
}

/* A fresh file for plans (skips the test without two cpu devices). */
static void temp_plan(char plan[64])
{
    if (!have("cpu:0,cpu:1"))
        cr_skip_test("needs two cpu devices");
    snprintf(plan, 64, "/tmp/shardnet-test-plan-XXXXXX");
    int fd = mkstemp(plan);
    cr_assert(fd >= 0);
    close(fd);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
}

/* Strategies in a plan file, MindSpore's notation, force each layer's cut:
 * here the MLP entirely row-parallel, and a data-parallel first layer. */
Test(tensor_split, plan_file_strategies_force_the_cut)
{
    static const struct {
        const char *plan, *want;
    } cases[] = {
        {"split tensor\ndevices cpu:0,cpu:1\n"
         "strategy /fc1/Gemm ((1,2),(1,2))\n"
         "strategy /fc2/Gemm ((1,2),(1,2))\n",
         "/fc1/Gemm (Gemm) ((1,2),(1,2)): row-parallel"},
        {"split tensor\ndevices cpu:0,cpu:1\n"
         "strategy /fc1/Gemm ((2,1),(1,1))\n",
         "/fc1/Gemm (Gemm) ((2,1),(1,1)): data-parallel"},
        {"split tensor\ndevices cpu:0,cpu:1\n"
         "strategy /fc1/Gemm ((1,1),(1,1))\n",
         "/fc1/Gemm (Gemm) ((1,1),(1,1)): whole on every device"},
    };
    char plan[64];
    temp_plan(plan);
    shardnet_model_t *m0;
    shardnet_tensor in0;
    shardnet_session_options none = {.split = "none"};
    shardnet_session_t *ref = session_on(&m0, "fashion_mlp.onnx",
                                         "fashion_mlp_input.npy", "cpu:0",
                                         &none, &in0);
    const void *wantp;
    shardnet_tensor_info info;
    cr_assert_eq(shardnet_session_run(ref), SHARDNET_OK);
    cr_assert_eq(shardnet_session_output(ref, 0, &info, &wantp), SHARDNET_OK);
    const float *want = wantp;
    size_t count = (size_t)(info.dims[0] * info.dims[1]);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        shardnet_model_t *m;
        shardnet_tensor in;
        char text[16384];
        const void *got;
        write_file(plan, cases[k].plan);
        shardnet_session_options o = {.plan_file = plan};
        shardnet_session_t *s = session_on(&m, "fashion_mlp.onnx",
                                           "fashion_mlp_input.npy", NULL, &o,
                                           &in);
        cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s",
                     shardnet_last_error());
        shardnet_session_describe(s, text, sizeof text);
        cr_assert(strstr(text, cases[k].want), "no '%s' in\n%s",
                  cases[k].want, text);
        cr_assert_eq(shardnet_session_output(s, 0, NULL, &got), SHARDNET_OK);
        for (size_t i = 0; i < count; i++)
            cr_assert(fabsf(((const float *)got)[i] - want[i]) <=
                          1e-4f * (1.0f + fabsf(want[i])),
                      "plan %zu: element %zu", k, i);
        /* Saved and read back: the same strategies. */
        cr_assert_eq(shardnet_session_save_plan(s, plan), SHARDNET_OK);
        shardnet_session_t *s2 = ran_on(ctx, m, &in, NULL, &o);
        char text2[16384];
        shardnet_session_describe(s2, text2, sizeof text2);
        cr_assert(strstr(text2, cases[k].want), "saved plan lost '%s':\n%s",
                  cases[k].want, text2);
        shardnet_session_free(s2);
        shardnet_session_free(s);
        shardnet_tensor_free(&in);
        shardnet_model_free(m);
    }
    shardnet_session_free(ref);
    shardnet_tensor_free(&in0);
    shardnet_model_free(m0);
    unlink(plan);
}

/* A session of model m (named `model`) from a plan file, run once: its
 * description in text, its output checked against want (within 1e-4),
 * the plan it ran saved over the file. */
static void run_saving_plan(shardnet_model_t *m, const char *model,
                            const shardnet_tensor *in,
                            const char *plan, const float *want, size_t n0,
                            char *text, size_t cap)
{
    shardnet_session_options o = {.plan_file = plan};
    shardnet_session_t *s = ran_on(ctx, m, in, NULL, &o);
    const void *out;
    shardnet_session_describe(s, text, cap);
    cr_assert_eq(shardnet_session_output(s, 0, NULL, &out), SHARDNET_OK);
    check_answer(out, want, n0, 0, model, plan, text);
    cr_assert_eq(shardnet_session_save_plan(s, plan), SHARDNET_OK, "%s",
                 shardnet_last_error());
    shardnet_session_free(s);
}

/* MindSpore's mixed forms over four devices as a 2x2 mesh: two of the
 * data's rows (the batch, or the transformer's sequence), the reduced
 * dimension and the weight's columns cut at once.  Each gives one
 * device's answer within 1e-4 relative, is described as such, and reads
 * back from the plan it saves; the search prices the mixed forms beside
 * the plain ones; a cut that does not divide evenly and a convolution's
 * mixed form are refused, naming why. */
Test(tensor_split, mixed_strategies_match_one_device_and_read_back)
{
    static const struct {
        const char *model, *input, *plan, *want[3];
    } cases[] = {
        {"fashion_mlp.onnx", "fashion_mlp_input.npy",
         "strategy /fc1/Gemm ((2,1),(2,1))\n"
         "strategy /fc2/Gemm ((2,2),(1,2))\n"
         "strategy /fc3/Gemm ((1,2),(2,2))\n",
         {"/fc1/Gemm (Gemm) ((2,1),(2,1)): mixed: data 2 x reduced 1 x columns 2",
          "/fc2/Gemm (Gemm) ((2,2),(1,2)): mixed: data 2 x reduced 2 x columns 1",
          "/fc3/Gemm (Gemm) ((1,2),(2,2)): mixed: data 1 x reduced 2 x "
          "columns 2"}},
        {"small_transformer.onnx", "small_transformer_input.npy",
         "strategy /q/MatMul ((1,2,1),(1,2))\n"
         "strategy /proj/MatMul ((2,1,2),(2,1))\n"
         "strategy /v/MatMul ((1,1,2),(2,2))\n",
         {"/q/MatMul (MatMul) ((1,2,1),(1,2)): mixed: data 2 x reduced 1 x "
          "columns 2",
          "/proj/MatMul (MatMul) ((2,1,2),(2,1)): mixed: data 2 x reduced 2 "
          "x columns 1",
          "/v/MatMul (MatMul) ((1,1,2),(2,2)): mixed: data 1 x reduced 2 x "
          "columns 2"}},
    };
    const char *devices = "cpu:0,cpu:1,cl:0,cl:1";
    need_devices(devices);
    char plan[64], text[32768];
    temp_plan(plan);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        shardnet_model_t *m;
        shardnet_tensor in;
        size_t n0;
        load_fixtures(cases[k].model, cases[k].input, &m, &in);
        float *want = run(m, &in, "cpu:0", "none", 0, &n0);
        char body[1024];
        snprintf(body, sizeof body, "split tensor\ndevices %s\n%s", devices,
                 cases[k].plan);
        write_file(plan, body);
        for (int round = 0; round < 2; round++) { /* written, then saved */
            run_saving_plan(m, cases[k].model, &in, plan, want, n0, text,
                            sizeof text);
            for (size_t j = 0; j < 3; j++)
                cr_assert(strstr(text, cases[k].want[j]),
                          "%s (round %d): no '%s' in\n%s", cases[k].model,
                          round, cases[k].want[j], text);
        }
        /* the search prices the mixed forms (SHARDNET_TENSOR_RULES unset) */
        shardnet_session_options t = {.split = "tensor"};
        shardnet_session_t *s = ran_on(ctx, m, &in, devices, &t);
        shardnet_session_describe(s, text, sizeof text);
        if (!getenv("SHARDNET_TENSOR_RULES"))
            for (size_t j = 0; j < 3; j++) {
                static const char *const mesh[] = {"; mixed 1x2x2 ",
                                                   "; mixed 2x1x2 ",
                                                   "; mixed 2x2x1 "};
                cr_assert(strstr(text, mesh[j]), "%s: no '%s' in\n%s",
                          cases[k].model, mesh[j], text);
            }
        shardnet_session_free(s);
        free(want);
        shardnet_tensor_free(&in);
        shardnet_model_free(m);
    }

    /* refused: three rows do not divide in two; a convolution's mixed
     * form */
    static const struct {
        const char *model, *input, *strategy, *why;
        int64_t rows;
    } bad[] = {
        {"fashion_mlp.onnx", "fashion_mlp_input.npy",
         "/fc1/Gemm ((2,1),(2,1))",
         "a dimension cut does not divide into equal parts (3 rows", 3},
        {"small_cnn.onnx", "small_cnn_input.npy",
         "/conv1/Conv ((2,1,1,1),(2,1,1,1))", "cuts one dimension", 0},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        shardnet_model_t *m;
        shardnet_tensor in;
        load_fixtures(bad[k].model, bad[k].input, &m, &in);
        char body[512];
        snprintf(body, sizeof body, "split tensor\ndevices %s\nstrategy %s\n",
                 devices, bad[k].strategy);
        write_file(plan, body);
        shardnet_session_options o = {.plan_file = plan};
        shardnet_session_t *s = NULL;
        int64_t dims[SHARDNET_MAX_DIMS];
        memcpy(dims, in.info.dims, sizeof dims);
        if (bad[k].rows)
            dims[0] = bad[k].rows;
        cr_assert_eq(shardnet_session_create_with(ctx, m, NULL, &o, &s),
                     SHARDNET_OK, "%s", shardnet_last_error());
        cr_assert_eq(shardnet_session_set_input(s, 0, in.info.dtype,
                                                in.info.rank, dims, in.data),
                     SHARDNET_OK);
        cr_assert_eq(shardnet_session_run(s), SHARDNET_INVALID_ARGUMENT,
                     "%s", bad[k].strategy);
        cr_assert(strstr(shardnet_last_error(), bad[k].why), "%s: '%s'",
                  bad[k].strategy, shardnet_last_error());
        shardnet_session_free(s);
        shardnet_tensor_free(&in);
        shardnet_model_free(m);
    }
    unlink(plan);
}

/* Strategies that cannot be taken are refused with the reason. */
Test(tensor_split, bad_strategies_are_refused_clearly)
{
    static const struct {
        const char *plan, *why;
        shardnet_status at_create; /* else at the first run */
    } cases[] = {
        {"split tensor\ndevices cpu:0,cpu:1\nstrategy /fc1/Gemm ((1,2)\n",
         "expected tuples", SHARDNET_INVALID_ARGUMENT},
        {"split tensor\ndevices cpu:0,cpu:1\nstrategy /fc1/Gemm ((1,0),(1,1))\n",
         "expected tuples", SHARDNET_INVALID_ARGUMENT},
        {"split layer\ndevices cpu:0,cpu:1\nstrategy /fc1/Gemm ((1,2),(2,1))\n",
         "strategies are for split 'tensor'", SHARDNET_INVALID_ARGUMENT},
        {"split tensor\ndevices cpu:0,cpu:1\nstrategy nosuch ((1,2),(2,1))\n",
         "no such node", SHARDNET_OK},
        {"split tensor\ndevices cpu:0,cpu:1\n"
         "strategy /fc1/Gemm ((2,2),(2,1))\n",
         "cuts one dimension", SHARDNET_OK},
        {"split tensor\ndevices cpu:0,cpu:1\n"
         "strategy /fc1/Gemm ((1,1,1),(2,1))\n",
         "cuts one dimension", SHARDNET_OK},
    };
    char plan[64];
    temp_plan(plan);
    char path[4096];
    shardnet_model_t *m = NULL;
    shardnet_tensor in;
    fixture(path, sizeof path, "fashion_mlp.onnx");
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK);
    fixture(path, sizeof path, "fashion_mlp_input.npy");
    cr_assert_eq(shardnet_tensor_load(path, &in), SHARDNET_OK);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        shardnet_session_t *s = NULL;
        shardnet_session_options o = {.plan_file = plan};
        write_file(plan, cases[k].plan);
        shardnet_status st = shardnet_session_create_with(ctx, m, NULL, &o, &s);
        if (cases[k].at_create != SHARDNET_OK) {
            cr_assert_eq(st, cases[k].at_create, "plan %zu", k);
        } else {
            cr_assert_eq(st, SHARDNET_OK, "%s", shardnet_last_error());
            cr_assert_eq(shardnet_session_set_input(s, 0, in.info.dtype,
                                                    in.info.rank, in.info.dims,
                                                    in.data),
                         SHARDNET_OK);
            cr_assert_eq(shardnet_session_run(s), SHARDNET_INVALID_ARGUMENT,
                         "plan %zu", k);
        }
        cr_assert(strstr(shardnet_last_error(), cases[k].why),
                  "plan %zu: '%s'", k, shardnet_last_error());
        shardnet_session_free(s);
    }
    shardnet_tensor_free(&in);
    shardnet_model_free(m);
    unlink(plan);
}

/* --- streams ------------------------------------------------------------ */

#define STREAM_BATCHES 6

typedef struct stream_case {
    const shardnet_tensor *in;
    float *batch[STREAM_BATCHES]; /* each batch's input: a scaled copy */
    float *got[STREAM_BATCHES];   /* each batch's output 0 */
    size_t count;                 /* floats of output 0 */
    size_t fail_at;               /* feed fails at this batch (or never) */
    size_t drained;
} stream_case;

static shardnet_status feed_batch(void *user, size_t b, shardnet_session_t *s)
{
    stream_case *c = user;
    if (b == c->fail_at)
        return SHARDNET_INVALID_ARGUMENT;
    return shardnet_session_set_input(s, 0, c->in->info.dtype,
                                      c->in->info.rank, c->in->info.dims,
                                      c->batch[b]);
}

static shardnet_status drain_batch(void *user, size_t b, shardnet_session_t *s)
{
    stream_case *c = user;
    shardnet_tensor_info info;
    const void *out;
    shardnet_status st = shardnet_session_output(s, 0, &info, &out);
    if (st != SHARDNET_OK)
        return st;
    c->count = 1;
    for (int i = 0; i < info.rank; i++)
        c->count *= (size_t)info.dims[i];
    c->got[b] = malloc(c->count * sizeof(float));
    memcpy(c->got[b], out, c->count * sizeof(float));
    c->drained++;
    return SHARDNET_OK;
}

/* Batches streamed through a layer split (consecutive batches overlapping
 * in the stages) and through a tensor split: each batch's output is its
 * own one-device answer, bit for bit on one backend (layer) or within
 * 1e-4 (tensor); a feed that fails stops the stream with its error. */
Test(layer_split, streamed_batches_each_get_their_own_answer)
{
    static const struct {
        const char *model, *input, *split;
        size_t micro;
    } cases[] = {
        {"fashion_mlp.onnx", "fashion_mlp_input.npy", "layer", 2},
        {"fashion_mlp.onnx", "fashion_mlp_input.npy", "layer", 0},
        {"small_transformer.onnx", "small_transformer_input.npy", "layer", 3},
        {"small_cnn.onnx", "small_cnn_input.npy", "tensor", 0},
        /* both devices replicating the model, micro-batches in turn:
         * they finish out of order, two batches in flight */
        {"fashion_mlp.onnx", "fashion_mlp_input.npy", "replicated", 5},
        {"small_transformer.onnx", "small_transformer_input.npy",
         "replicated", 0},
    };
    char path[4096];
    need_devices("cpu:0,cpu:1");
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        shardnet_model_t *m = NULL;
        shardnet_tensor in;
        stream_case c = {.in = &in, .fail_at = (size_t)-1};
        shardnet_session_options o = {.split = cases[k].split,
                                      .micro_batches = cases[k].micro};
        shardnet_session_t *s = NULL;
        fixture(path, sizeof path, cases[k].model);
        cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK);
        fixture(path, sizeof path, cases[k].input);
        cr_assert_eq(shardnet_tensor_load(path, &in), SHARDNET_OK);
        size_t n = in.nbytes / sizeof(float);
        for (size_t b = 0; b < STREAM_BATCHES; b++) {
            c.batch[b] = malloc(in.nbytes);
            for (size_t i = 0; i < n; i++)
                c.batch[b][i] = ((const float *)in.data)[i] *
                                (1.0f + 0.25f * (float)b);
        }
        cr_assert_eq(shardnet_session_create_with(ctx, m, "cpu:0,cpu:1", &o,
                                                  &s),
                     SHARDNET_OK, "%s", shardnet_last_error());
        cr_assert_eq(shardnet_session_run_stream(s, STREAM_BATCHES,
                                                 feed_batch, drain_batch, &c),
                     SHARDNET_OK, "%s: %s", cases[k].model,
                     shardnet_last_error());
        cr_assert_eq(c.drained, STREAM_BATCHES);
        for (size_t b = 0; b < STREAM_BATCHES; b++) {
            shardnet_tensor one = in;
            size_t n0;
            one.data = c.batch[b];
            float *want = run(m, &one, "cpu:0", "none", 0, &n0);
            cr_assert_eq(n0, c.count);
            for (size_t i = 0; i < n0; i++) {
                if (strcmp(cases[k].split, "tensor"))
                    cr_assert_eq(memcmp(&want[i], &c.got[b][i], sizeof *want),
                                 0,
                                 "%s batch %zu element %zu: %.9g, alone %.9g",
                                 cases[k].model, b, i, (double)c.got[b][i],
                                 (double)want[i]);
                else
                    cr_assert(fabsf(want[i] - c.got[b][i]) <=
                                  1e-4f * (1.0f + fabsf(want[i])),
                              "%s batch %zu element %zu", cases[k].model, b,
                              i);
            }
            free(want);
            free(c.got[b]);
            c.got[b] = NULL;
        }
        /* A feed error at batch 3: the stream stops and says so. */
        c.fail_at = 3;
        c.drained = 0;
        cr_assert_eq(shardnet_session_run_stream(s, STREAM_BATCHES,
                                                 feed_batch, drain_batch, &c),
                     SHARDNET_INVALID_ARGUMENT);
        cr_assert_leq(c.drained, 3);
        for (size_t b = 0; b < STREAM_BATCHES; b++) {
            free(c.got[b]);
            free(c.batch[b]);
        }
        /* The session still runs afterwards. */
        cr_assert_eq(shardnet_session_set_input(s, 0, in.info.dtype,
                                                in.info.rank, in.info.dims,
                                                in.data),
                     SHARDNET_OK);
        cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s",
                     shardnet_last_error());
        shardnet_session_free(s);
        shardnet_tensor_free(&in);
        shardnet_model_free(m);
    }
}

/* The estimates of the search's report in text: the rules' and the
 * search's; fails the test unless the search is at most the rules'. */
static void search_never_above_rules(const char *text, const char *what)
{
    const char *p = strstr(text, "tensor strategies searched: ");
    cr_assert(p, "%s: no search\n%s", what, text);
    const char *r = strstr(p, "the rules' layout estimated "),
               *q = strstr(p, "the search's ");
    cr_assert(r && q, "%s", p);
    double rules = strtod(r + strlen("the rules' layout estimated "), NULL),
           found = strtod(q + strlen("the search's "), NULL);
    cr_assert(found > 0 && found <= rules, "%s: %s", what, p);
}

/* The strategy search: on every fixture model over two devices it builds
 * candidates and never settles above the rules' layout; with
 * SHARDNET_TENSOR_RULES=1 it keeps the rules' layout and says so. */
Test(tensor_split, the_strategy_search_never_prices_above_the_rules)
{
    need_devices("cpu:0,cpu:1");
    for (size_t k = 0; k < NMODELS; k++) {
        char path[4096], text[16384];
        shardnet_model_t *m = NULL;
        shardnet_session_t *s = NULL;
        shardnet_tensor in;
        shardnet_session_options o = {.split = "tensor"};
        fixture(path, sizeof path, split_models[k][0]);
        cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK);
        fixture(path, sizeof path, split_models[k][1]);
        cr_assert_eq(shardnet_tensor_load(path, &in), SHARDNET_OK);
        cr_assert_eq(shardnet_session_create_with(ctx, m, "cpu:0,cpu:1", &o,
                                                  &s),
                     SHARDNET_OK, "%s", shardnet_last_error());
        cr_assert_eq(shardnet_session_set_input(s, 0, in.info.dtype,
                                                in.info.rank, in.info.dims,
                                                in.data),
                     SHARDNET_OK);
        shardnet_session_describe(s, text, sizeof text);
        search_never_above_rules(text, split_models[k][0]);
        cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s",
                     shardnet_last_error());
        shardnet_session_free(s);
        shardnet_tensor_free(&in);
        shardnet_model_free(m);
    }
}

/* A hybrid split's group stage is laid out by the strategy search too:
 * the description says, per product, what each strategy was priced at,
 * and never a layout priced above the rules'; the stage's strategies are
 * saved in the plan, a plan file's strategy for a node of a group stage
 * is kept (the rest searched around it), and one for a node of a
 * one-device stage or of none is refused, naming it. */
Test(tensor_split, hybrid_stages_are_searched_saved_and_read_back)
{
    static const char *const devices = "cpu:0,cpu:1,cl:0";
    /* The transformer's attention on cpu:0, its projection and
     * feed-forward (/proj, /ff1, /ff2) on cpu:1 and cl:0. */
    static const char *const head = "split hybrid\ndevices cpu:0,cpu:1,cl:0\n"
                                    "groups 1,2\ncuts 11\n";
    char plan[64], text[16384], saved[2048];
    shardnet_model_t *m = NULL;
    shardnet_tensor in;
    size_t n0;
    temp_plan(plan);
    need_devices(devices);
    load_fixtures("small_transformer.onnx", "small_transformer_input.npy", &m,
                  &in);
    float *want = run(m, &in, "cpu:0", "none", 0, &n0);

    write_file(plan, head);
    run_saving_plan(m, "small_transformer", &in, plan, want, n0, text,
                    sizeof text);
    const char *st = strstr(text, "hybrid stage 1 on cpu:1+cl:0, its last "
                                  "micro-batches' tensor split:\n");
    cr_assert(st, "%s", text);
    search_never_above_rules(st, "hybrid stage 1");
    cr_assert(strstr(st, "tensor strategies searched: 3 products"), "%s", st);
    for (int k = 0; k < 3; k++) {
        static const char *const node[] = {"/proj/MatMul", "/ff1/MatMul",
                                           "/ff2/MatMul"};
        char line[64];
        snprintf(line, sizeof line, "  %s (MatMul): columns ", node[k]);
        const char *p = strstr(st, line);
        cr_assert(p, "no '%s' in\n%s", line, st);
        const char *eol = strchr(p, '\n');
        cr_assert(strstr(p, "; rows ") < eol && strstr(p, "; data ") < eol &&
                      strstr(p, "; whole ") < eol &&
                      strstr(p, " (chosen)") < eol,
                  "%.*s", (int)(eol - p), p);
    }
    char *written = (char *)slurp(plan, NULL);
    cr_assert(strstr(written, "split hybrid\n") &&
                  strstr(written, "\ngroups 1,2\n") &&
                  strstr(written, "\nstrategy /proj/MatMul ((") &&
                  strstr(written, "\nstrategy /ff1/MatMul ((") &&
                  strstr(written, "\nstrategy /ff2/MatMul (("),
              "%s", written);
    free(written);
    /* Read back: the same strategies, fixed, so nothing left to search. */
    run_saving_plan(m, "small_transformer", &in, plan, want, n0, text,
                    sizeof text);
    cr_assert(strstr(text, "hybrid stage 1 on cpu:1+cl:0") &&
                  strstr(text, "no product to search"),
              "%s", text);

    /* One fixed (/ff1 whole on both), the other two searched around it. */
    snprintf(saved, sizeof saved, "%sstrategy /ff1/MatMul ((1,1,1),(1,1))\n",
             head);
    write_file(plan, saved);
    run_saving_plan(m, "small_transformer", &in, plan, want, n0, text,
                    sizeof text);
    cr_assert(strstr(text, "tensor strategies searched: 2 products") &&
                  strstr(text, "/ff1/MatMul (MatMul) ((1,1,1),(1,1)): whole "
                               "on every device"),
              "%s", text);

    static const struct {
        const char *strategy, *why;
    } bad[] = {
        {"strategy /q/MatMul ((1,1,1),(1,2))\n",
         "strategy for node '/q/MatMul', which stage 0 runs on one device "
         "(cpu:0)"},
        {"strategy /nothing ((1,1,1),(1,2))\n",
         "strategy for node '/nothing': no such node"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        shardnet_session_options o = {.plan_file = plan};
        shardnet_session_t *s = NULL;
        snprintf(saved, sizeof saved, "%s%s", head, bad[k].strategy);
        write_file(plan, saved);
        cr_assert_eq(shardnet_session_create_with(ctx, m, NULL, &o, &s),
                     SHARDNET_OK, "%s", shardnet_last_error());
        cr_assert_eq(shardnet_session_set_input(s, 0, in.info.dtype,
                                                in.info.rank, in.info.dims,
                                                in.data),
                     SHARDNET_OK);
        cr_assert_eq(shardnet_session_run(s), SHARDNET_INVALID_ARGUMENT);
        cr_assert(strstr(shardnet_last_error(), bad[k].why), "%s",
                  shardnet_last_error());
        shardnet_session_free(s);
    }
    free(want);
    unlink(plan);
    shardnet_tensor_free(&in);
    shardnet_model_free(m);
}

/* The planner's hybrid is priced with its group stage searched (the
 * group model's guess at a tensor split only stands where it cannot be):
 * the listing's stage time is the stage's search estimate times the
 * micro-batches, and the split that search made is the one that runs
 * (its report after the run gives the same estimate). */
Test(tensor_split, the_hybrid_estimate_is_its_searched_group_stage)
{
    static const char *const devices = "cpu:0,cpu:1,cl:0";
    char text[32768];
    shardnet_model_t *m = NULL;
    shardnet_tensor in;
    size_t n0, n1;
    need_devices(devices);
    load_fixtures("small_transformer.onnx", "small_transformer_input.npy", &m,
                  &in);
    float *want = run(m, &in, "cpu:0", "none", 0, &n0);
    shardnet_session_options o = {.split = "hybrid"};
    shardnet_session_t *s = NULL;
    cr_assert_eq(shardnet_session_create_with(ctx, m, devices, &o, &s),
                 SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(shardnet_session_set_input(s, 0, in.info.dtype, in.info.rank,
                                            in.info.dims, in.data),
                 SHARDNET_OK);
    shardnet_session_describe(s, text, sizeof text);
    const char *line = strstr(text, "its group stages searched for ");
    cr_assert(line, "%s", text);
    unsigned long micro = 0, stage = 9;
    double per_batch = 0, est = 0, model = 0;
    const char *at = strstr(line, " stage ");
    cr_assert(sscanf(line, "its group stages searched for %lu", &micro) == 1 &&
                  micro > 0 && at &&
                  sscanf(at, " stage %lu estimated %lf ms per batch (the "
                             "group model's %lf",
                         &stage, &per_batch, &model) == 3,
              "%s", line);
    at = strstr(line, "); estimated ");
    cr_assert(at && sscanf(at, "); estimated %lf", &est) == 1, "%s", line);
    /* two stages: the slowest's share m + 1 times, at least this one's
     * (to the printed figures' rounding) */
    cr_assert_geq(est + 0.0005 * (double)(micro + 1),
                  per_batch / (double)micro * (double)(micro + 1), "%s",
                  line);
    char second[32768];
    shardnet_session_describe(s, second, sizeof second);
    cr_assert_str_eq(second, text, "describing again gave another answer");
    cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s",
                 shardnet_last_error());
    const void *got;
    shardnet_tensor_info info;
    cr_assert_eq(shardnet_session_output(s, 0, &info, &got), SHARDNET_OK);
    n1 = 1;
    for (int i = 0; i < info.rank; i++)
        n1 *= (size_t)info.dims[i];
    cr_assert_eq(n1, n0);
    check_answer(got, want, n0, 0, "small_transformer", devices, "hybrid");
    shardnet_session_describe(s, text, sizeof text);
    const char *st = strstr(text, "its last micro-batches' tensor split:");
    char head[128];
    snprintf(head, sizeof head, "hybrid stage %lu on ", stage);
    cr_assert(st && st - text > 64 && strstr(st - 64, head) &&
                  strstr(st - 64, head) < st,
              "%s", text);
    at = strstr(st, "the search's ");
    double searched = 0;
    cr_assert(at && sscanf(at, "the search's %lf", &searched) == 1, "%s",
              text);
    cr_assert(fabs(searched * (double)micro - per_batch) <=
                  0.001 * (double)micro + 1e-9,
              "the stage's search %.3f ms x %lu micro-batches, the "
              "estimate %.3f ms per batch:\n%s",
              searched, micro, per_batch, text);
    shardnet_session_free(s);
    free(want);
    shardnet_tensor_free(&in);
    shardnet_model_free(m);
}

/* A replicated split's configurations are estimated, each in PipeDream's
 * notation with its stages, their replicas and memory; a plan file's
 * replicas run, and saved and read back they run the same. */
Test(layer_split, replicated_plans_are_described_saved_and_read_back)
{
    static const char *const devices = "cpu:0,cpu:1,cl:0";
    char plan[64], text[16384];
    shardnet_model_t *m = NULL;
    shardnet_tensor in;
    const void *out;
    size_t n0;
    temp_plan(plan);
    need_devices(devices);
    load_fixtures("small_cnn.onnx", "small_cnn_input.npy", &m, &in);
    float *want = run(m, &in, "cpu:0", "none", 0, &n0);
    write_file(plan, "split replicated\ndevices cpu:0,cpu:1,cl:0\n"
                     "replicas 2-1\n");
    shardnet_session_options o = {.plan_file = plan};
    shardnet_session_t *s = NULL;
    cr_assert_eq(shardnet_session_create_with(ctx, m, NULL, &o, &s),
                 SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(shardnet_session_set_input(s, 0, in.info.dtype, in.info.rank,
                                            in.info.dims, in.data),
                 SHARDNET_OK);
    shardnet_session_describe(s, text, sizeof text);
    /* every configuration with a stage on two devices or more */
    for (size_t k = 0; k < 3; k++) {
        static const char *const conf[] = {"replicated 2-1: stage 0 on "
                                           "cpu:0+cpu:1 (2 replicas)",
                                           "replicated 1-2: stage 0 on cpu:0",
                                           "replicated 3: stage 0 on "
                                           "cpu:0+cpu:1+cl:0 (3 replicas)"};
        const char *p = strstr(text, conf[k]);
        cr_assert(p, "no '%s' in\n%s", conf[k], text);
        const char *eol = strchr(p, '\n'), *mem = strstr(p, "memory "),
                   *est = strstr(p, "estimated ");
        cr_assert(mem && mem < eol && est && est < eol, "%.*s",
                  (int)(eol - p), p);
    }
    cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s",
                 shardnet_last_error());
    shardnet_session_describe(s, text, sizeof text);
    cr_assert(strstr(text, "running: replicated split 2-1, stages on cpu:0+"
                           "cpu:1 (2 replicas) | cl:0"),
              "%s", text);
    cr_assert_eq(shardnet_session_output(s, 0, NULL, &out), SHARDNET_OK);
    check_answer(out, want, n0, 0, "small_cnn", devices, "replicas 2-1");
    cr_assert_eq(shardnet_session_save_plan(s, plan), SHARDNET_OK, "%s",
                 shardnet_last_error());
    shardnet_session_free(s);
    char *saved = (char *)slurp(plan, NULL);
    cr_assert(strstr(saved, "split replicated\n") &&
                  strstr(saved, "\nreplicas 2,1\n") &&
                  strstr(saved, "\ncuts "),
              "%s", saved);
    s = NULL;
    cr_assert_eq(shardnet_session_create_with(ctx, m, NULL, &o, &s),
                 SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(shardnet_session_set_input(s, 0, in.info.dtype, in.info.rank,
                                            in.info.dims, in.data),
                 SHARDNET_OK);
    cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s\n%s",
                 shardnet_last_error(), saved);
    shardnet_session_describe(s, text, sizeof text);
    cr_assert(strstr(text, "running: replicated split 2-1"), "%s", text);
    cr_assert_eq(shardnet_session_output(s, 0, NULL, &out), SHARDNET_OK);
    check_answer(out, want, n0, 0, "small_cnn", devices, "saved plan");
    shardnet_session_free(s);
    free(saved);
    free(want);
    unlink(plan);
    shardnet_tensor_free(&in);
    shardnet_model_free(m);
}

/* Replicas that do not fit the list or the split are refused, naming what
 * is wrong. */
Test(layer_split, bad_replicas_are_refused_clearly)
{
    static const struct {
        const char *plan, *why;
    } cases[] = {
        {"split replicated\ndevices cpu:0,cpu:1\nreplicas 1\n",
         "replicas of 1 devices in all for a replicated split over 2"},
        {"split replicated\ndevices cpu:0,cpu:1\nreplicas 2,1\n",
         "replicas of 3 devices in all for a replicated split over 2"},
        {"split replicated\ndevices cpu:0,cpu:1\nreplicas 0,2\n",
         "'replicas': '0' is not a whole number from 1 to 16"},
        {"split replicated\ndevices cpu:0,cpu:1\nreplicas 2,x\n",
         "'replicas': 'x' is not a whole number"},
        {"split replicated\ndevices cpu:0,cpu:1\nreplicas 17\n",
         "'replicas': '17' is not a whole number from 1 to 16"},
        {"split replicated\ndevices cpu:0,cpu:1\n"
         "replicas 1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1\n",
         "'replicas': more than 16 values"},
        {"split layer\ndevices cpu:0,cpu:1\nreplicas 2\n",
         "replicas are for split 'replicated', not 'layer'"},
        {"split replicated\ndevices cpu:0,cpu:1\ncuts 1\n",
         "cuts of a replicated split need its 'replicas' line"},
        {"split replicated\ndevices cpu:0,cpu:1\nreplicas 1,1\ncuts 1,2\n",
         "2 cuts for a 'replicated' split of 2 stages"},
        {"split replicated\ndevices cpu:0\n",
         "a replicated split needs two devices or more"},
        {"split replicated\ndevices cpu:0,cpu:1\nreplicas 2\nreplicas 2\n",
         "a second 'replicas' line"},
    };
    char plan[64], path[4096];
    shardnet_model_t *m = NULL;
    temp_plan(plan);
    fixture(path, sizeof path, "fashion_mlp.onnx");
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        shardnet_session_t *s = NULL;
        shardnet_session_options o = {.plan_file = plan};
        write_file(plan, cases[k].plan);
        cr_assert_eq(shardnet_session_create_with(ctx, m, NULL, &o, &s),
                     SHARDNET_INVALID_ARGUMENT, "case %zu: %s", k,
                     cases[k].plan);
        cr_assert(strstr(shardnet_last_error(), cases[k].why),
                  "case %zu: '%s' says '%s'", k, cases[k].why,
                  shardnet_last_error());
    }
    /* More stages than the model has nodes: refused when the pipeline is
     * made. */
    shardnet_session_t *s = NULL;
    shardnet_session_options o = {.plan_file = plan};
    write_file(plan, "split replicated\ndevices cpu:0,cpu:1\nreplicas 1,1\n"
                     "cuts 7\n");
    cr_assert_eq(shardnet_session_create_with(ctx, m, NULL, &o, &s),
                 SHARDNET_OK, "%s", shardnet_last_error());
    float x[2 * 784] = {0};
    int64_t dims[2] = {2, 784};
    cr_assert_eq(shardnet_session_set_input(s, 0, SHARDNET_DTYPE_FLOAT32, 2,
                                            dims, x),
                 SHARDNET_OK);
    cr_assert_eq(shardnet_session_run(s), SHARDNET_INVALID_ARGUMENT);
    cr_assert(strstr(shardnet_last_error(), "out of order or range"), "%s",
              shardnet_last_error());
    shardnet_session_free(s);
    unlink(plan);
    shardnet_model_free(m);
}

/* A plan file's rows are proportions for every batch: after a batch of 3
 * (where 1:1 leaves one device a lone row, given to the other), a batch of
 * 8 is cut 4:4 again, not in the last batch's 3:0. */
Test(layer_split, data_plan_rows_cut_every_batch_in_their_proportions)
{
    char path[4096], plan[64], text[16384];
    shardnet_model_t *m = NULL;
    shardnet_session_t *s = NULL;
    shardnet_tensor in;
    need_devices("cpu:0,cpu:1");
    fixture(path, sizeof path, "fashion_mlp.onnx");
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK);
    fixture(path, sizeof path, "fashion_mlp_input.npy");
    cr_assert_eq(shardnet_tensor_load(path, &in), SHARDNET_OK);
    temp_plan(plan);
    write_file(plan, "split data\ndevices cpu:0,cpu:1\nrows 1 1\n");
    shardnet_session_options o = {.split = "data", .plan_file = plan};
    cr_assert_eq(shardnet_session_create_with(ctx, m, NULL, &o, &s),
                 SHARDNET_OK, "%s", shardnet_last_error());
    static const int64_t batches[] = {3, 8};
    static const char *const want[] = {"cpu:0 3 rows, cpu:1 0 rows",
                                       "cpu:0 4 rows, cpu:1 4 rows"};
    for (int b = 0; b < 2; b++) {
        int64_t dims[2] = {batches[b], in.info.dims[1]};
        cr_assert_eq(shardnet_session_set_input(s, 0, in.info.dtype, 2, dims,
                                                in.data),
                     SHARDNET_OK);
        cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s",
                     shardnet_last_error());
        shardnet_session_describe(s, text, sizeof text);
        cr_assert(strstr(text, want[b]), "batch %lld: want %s in\n%s",
                  (long long)batches[b], want[b], text);
    }
    shardnet_session_free(s);
    unlink(plan);
    shardnet_tensor_free(&in);
    shardnet_model_free(m);
}
