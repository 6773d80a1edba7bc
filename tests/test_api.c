/*
 * The C API as programs use it, beyond one input and one output: a model
 * of two inputs (one of int64 indices) and two outputs through every split,
 * against numpy's answer (tests/onnx_cases/make_split_cases.py); an empty
 * batch through a session and a split; sessions run from several threads
 * at once, each getting the single-threaded answer.
 */
#include <config.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardnet.h"
#include "context_suite.h"

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

static void case_path(char *out, size_t cap, const char *name)
{
    const char *src = getenv("SHARDNET_SRCDIR");
    snprintf(out, cap, "%s/tests/onnx_cases/%s", src ? src : ".", name);
}

static void load_tensor(const char *name, shardnet_tensor *t)
{
    char path[4096];
    case_path(path, sizeof path, name);
    cr_assert_eq(shardnet_tensor_load(path, t), SHARDNET_OK, "%s",
                 shardnet_last_error());
}

static shardnet_model_t *load_model(const char *name)
{
    char path[4096];
    shardnet_model_t *m = NULL;
    case_path(path, sizeof path, name);
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK, "%s",
                 shardnet_last_error());
    return m;
}

/* Skip unless every device of the list is here. */
static void need_devices(const char *devices)
{
    size_t idx[8], n;
    if (shardnet_devices_select(ctx, devices, idx, 8, &n) != SHARDNET_OK)
        cr_skip_test("needs %s: %s", devices, shardnet_last_error());
}

/* The multi-input model's inputs and numpy's outputs. */
typedef struct multi_io {
    shardnet_tensor x, idx, y1, y2;
} multi_io;

static void multi_io_load(multi_io *t)
{
    load_tensor("multi_io_x.npy", &t->x);
    load_tensor("multi_io_idx.npy", &t->idx);
    load_tensor("multi_io_y1.npy", &t->y1);
    load_tensor("multi_io_y2.npy", &t->y2);
    cr_assert_eq(t->idx.info.dtype, SHARDNET_DTYPE_INT64);
}

static void multi_io_release(multi_io *t)
{
    shardnet_tensor_free(&t->x);
    shardnet_tensor_free(&t->idx);
    shardnet_tensor_free(&t->y1);
    shardnet_tensor_free(&t->y2);
}

/* Bind rows [first, first + rows) of x and idx by name. */
static void bind_multi_io_rows(shardnet_session_t *s, const multi_io *t,
                               int64_t first, int64_t rows)
{
    size_t ix, ii;
    int64_t xd[2] = {rows, t->x.info.dims[1]}, id[1] = {rows};
    const float *x = t->x.data;
    const int64_t *idx = t->idx.data;
    cr_assert_eq(shardnet_session_input_index(s, "x", &ix), SHARDNET_OK);
    cr_assert_eq(shardnet_session_input_index(s, "idx", &ii), SHARDNET_OK);
    cr_assert_eq(shardnet_session_set_input(s, ix, SHARDNET_DTYPE_FLOAT32, 2,
                                            xd, x + first * xd[1]),
                 SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(shardnet_session_set_input(s, ii, SHARDNET_DTYPE_INT64, 1, id,
                                            idx + first),
                 SHARDNET_OK, "%s", shardnet_last_error());
}

/* Bind x and idx by name, rows [0, rows) of them. */
static void bind_multi_io(shardnet_session_t *s, const multi_io *t,
                          int64_t rows)
{
    bind_multi_io_rows(s, t, 0, rows);
}

/* Output `name` of the last run equals `want` within tol relative. */
static void check_output(shardnet_session_t *s, size_t index,
                         const shardnet_tensor *want, double tol,
                         const char *what)
{
    shardnet_tensor_info info;
    const void *data;
    cr_assert_eq(shardnet_session_output(s, index, &info, &data), SHARDNET_OK,
                 "%s: %s", what, shardnet_last_error());
    cr_assert_eq(info.dtype, SHARDNET_DTYPE_FLOAT32, "%s", what);
    cr_assert_eq(info.rank, want->info.rank, "%s: rank %d", what, info.rank);
    for (int d = 0; d < info.rank; d++)
        cr_assert_eq(info.dims[d], want->info.dims[d], "%s: dimension %d is "
                     "%lld, numpy's %lld", what, d, (long long)info.dims[d],
                     (long long)want->info.dims[d]);
    size_t n = want->nbytes / sizeof(float);
    const float *got = data, *ref = want->data;
    for (size_t i = 0; i < n; i++)
        cr_assert(!isnan(got[i]) &&
                      fabs((double)got[i] - ref[i]) <= tol * (1 + fabs(ref[i])),
                  "%s (%s): element %zu is %.9g, numpy %.9g", what,
                  info.name, i, (double)got[i], (double)ref[i]);
}

/* Output index of the model's output called name. */
static size_t output_index(shardnet_model_t *m, const char *name)
{
    for (size_t i = 0; i < shardnet_model_output_count(m); i++) {
        shardnet_tensor_info info;
        cr_assert_eq(shardnet_model_output(m, i, &info), SHARDNET_OK);
        if (!strcmp(info.name, name))
            return i;
    }
    cr_assert_fail("no output '%s'", name);
    return 0;
}

TestSuite(api, .init = setup, .fini = teardown, .timeout = 300);

/* Two inputs (one of int64 indices, a negative one among them) and two
 * outputs, through every split and on every device set, micro-batches of
 * one row and of several: numpy's answer each time. */
typedef struct multi_case {
    char split[8];
    char devices[32];
    size_t micro;
} multi_case;

ParameterizedTestParameters(api, two_inputs_and_two_outputs_through_every_split)
{
    static multi_case cases[] = {
        {"none", "cpu:0", 0},
        {"none", "cl:0", 0},
        {"layer", "cpu:0,cpu:1", 1},
        {"layer", "cpu:0,cpu:1", 5},
        {"layer", "cpu:0,cl:0", 3},
        {"tensor", "cpu:0,cpu:1", 0},
        {"tensor", "cpu:0,cl:0", 0},
        {"tensor", "cpu:0,cl:0,cl:1", 0},
        {"hybrid", "cpu:0,cpu:1,cl:0", 2},
        {"hybrid", "cpu:0,cpu:1,cl:0,cl:1", 0},
        {"auto", "cpu:0,cpu:1", 0},
        {"auto", "cpu:0,cl:0", 0},
    };
    return cr_make_param_array(multi_case, cases,
                               sizeof cases / sizeof cases[0]);
}

ParameterizedTest(multi_case *c, api,
                  two_inputs_and_two_outputs_through_every_split)
{
    need_devices(c->devices);
    multi_io t;
    multi_io_load(&t);
    shardnet_model_t *m = load_model("multi_io.onnx");
    cr_assert_eq(shardnet_model_input_count(m), 2);
    cr_assert_eq(shardnet_model_output_count(m), 2);
    shardnet_session_options o = {.split = c->split,
                                  .micro_batches = c->micro};
    shardnet_session_t *s = NULL;
    cr_assert_eq(shardnet_session_create_with(ctx, m, c->devices, &o, &s),
                 SHARDNET_OK, "%s on %s: %s", c->split, c->devices,
                 shardnet_last_error());
    bind_multi_io(s, &t, t.x.info.dims[0]);
    char what[96];
    snprintf(what, sizeof what, "%s on %s, %zu micro-batches", c->split,
             c->devices, c->micro);
    /* Twice: the second run reuses the plan. */
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s: %s", what,
                     shardnet_last_error());
        check_output(s, output_index(m, "y1"), &t.y1, 1e-5, what);
        check_output(s, output_index(m, "y2"), &t.y2, 1e-5, what);
    }
    shardnet_session_free(s);
    shardnet_model_free(m);
    multi_io_release(&t);
}

/* A batch of no row: a session and a split give outputs of no row (not a
 * crash, not an error), and the next full batch still gets its answer. */
typedef struct empty_case {
    char model[32], split[8], devices[32];
} empty_case;

ParameterizedTestParameters(api, an_empty_batch_gives_empty_outputs)
{
    static empty_case cases[] = {
        {"multi_io.onnx", "none", "cpu:0"},
        {"multi_io.onnx", "none", "cl:0"},
        {"multi_io.onnx", "layer", "cpu:0,cpu:1"},
        {"multi_io.onnx", "tensor", "cpu:0,cpu:1"},
    };
    return cr_make_param_array(empty_case, cases,
                               sizeof cases / sizeof cases[0]);
}

ParameterizedTest(empty_case *c, api, an_empty_batch_gives_empty_outputs)
{
    need_devices(c->devices);
    multi_io t;
    multi_io_load(&t);
    shardnet_model_t *m = load_model(c->model);
    shardnet_session_options o = {.split = c->split};
    shardnet_session_t *s = NULL;
    cr_assert_eq(shardnet_session_create_with(ctx, m, c->devices, &o, &s),
                 SHARDNET_OK, "%s", shardnet_last_error());
    bind_multi_io(s, &t, 0);
    cr_assert_eq(shardnet_session_run(s), SHARDNET_OK,
                 "%s on %s, 0 rows: %s", c->split, c->devices,
                 shardnet_last_error());
    for (size_t i = 0; i < shardnet_model_output_count(m); i++) {
        shardnet_tensor_info info;
        const void *data;
        cr_assert_eq(shardnet_session_output(s, i, &info, &data),
                     SHARDNET_OK, "%s", shardnet_last_error());
        cr_assert_eq(info.rank, 2, "%s: rank %d", info.name, info.rank);
        cr_assert_eq(info.dims[0], 0, "%s on %s: output %s has %lld rows",
                     c->split, c->devices, info.name,
                     (long long)info.dims[0]);
    }
    bind_multi_io(s, &t, t.x.info.dims[0]);
    cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s",
                 shardnet_last_error());
    check_output(s, output_index(m, "y1"), &t.y1, 1e-5, "after 0 rows");
    shardnet_session_free(s);
    shardnet_model_free(m);
    multi_io_release(&t);
}

/* --- threads ------------------------------------------------------------ */

#define THREADS 4
#define RUNS 8

typedef struct worker {
    shardnet_model_t *model;      /* shared by every thread */
    const multi_io *t;
    const float *x;               /* this thread's rows (a scaled copy) */
    const char *devices, *split;
    shardnet_session_t *session;  /* NULL: the worker makes its own */
    const float *want1, *want2;   /* the single-threaded outputs */
    int64_t rows;
    char error[512];              /* empty when every run matched */
} worker;

static void fail_worker(worker *w, const char *what)
{
    if (!w->error[0])
        snprintf(w->error, sizeof w->error, "%s on %s: %s: %s", w->split,
                 w->devices, what, shardnet_last_error());
}

/* Bind, run and compare RUNS times on one session (the thread's own). */
static void *work(void *arg)
{
    worker *w = arg;
    shardnet_session_options o = {.split = w->split};
    shardnet_session_t *s = w->session;
    size_t ix, ii, o1, o2;
    if (!s && shardnet_session_create_with(ctx, w->model, w->devices, &o,
                                           &s) != SHARDNET_OK) {
        fail_worker(w, "session");
        return NULL;
    }
    shardnet_session_input_index(s, "x", &ix);
    shardnet_session_input_index(s, "idx", &ii);
    o1 = 0, o2 = 1;
    {
        shardnet_tensor_info info;
        shardnet_model_output(w->model, 0, &info);
        if (strcmp(info.name, "y1"))
            o1 = 1, o2 = 0;
    }
    int64_t xd[2] = {w->rows, w->t->x.info.dims[1]}, id[1] = {w->rows};
    for (int r = 0; r < RUNS && !w->error[0]; r++) {
        const void *d1, *d2;
        shardnet_tensor_info i1, i2;
        if (shardnet_session_set_input(s, ix, SHARDNET_DTYPE_FLOAT32, 2, xd,
                                       w->x) != SHARDNET_OK ||
            shardnet_session_set_input(s, ii, SHARDNET_DTYPE_INT64, 1, id,
                                       w->t->idx.data) != SHARDNET_OK) {
            fail_worker(w, "binding");
            break;
        }
        if (shardnet_session_run(s) != SHARDNET_OK) {
            fail_worker(w, "run");
            break;
        }
        if (shardnet_session_output(s, o1, &i1, &d1) != SHARDNET_OK ||
            shardnet_session_output(s, o2, &i2, &d2) != SHARDNET_OK) {
            fail_worker(w, "outputs");
            break;
        }
        if (i1.dims[0] != w->rows || i2.dims[0] != w->rows ||
            memcmp(d1, w->want1, (size_t)w->rows * 4 * sizeof(float)) ||
            memcmp(d2, w->want2, (size_t)w->rows * 3 * sizeof(float)))
            snprintf(w->error, sizeof w->error,
                     "%s on %s: run %d differs from the single-threaded "
                     "answer", w->split, w->devices, r);
    }
    if (!w->session)
        shardnet_session_free(s);
    return NULL;
}

/* Thread i's rows: x scaled by 1 + i / 4 (thread 0: the file's), so that
 * answers mixed up between threads show. */
static float *thread_rows(const multi_io *t, int i)
{
    size_t n = t->x.nbytes / sizeof(float);
    float *x = malloc(t->x.nbytes);
    for (size_t k = 0; k < n; k++)
        x[k] = ((const float *)t->x.data)[k] * (1.0f + 0.25f * (float)i);
    return x;
}

/* The single-threaded outputs y1 and y2 (malloc'ed) for rows x on
 * devices; for thread 0's rows, checked against numpy's. */
static void single_threaded(shardnet_model_t *m, const multi_io *t,
                            const float *x, const char *devices,
                            const char *split, float **y1, float **y2)
{
    shardnet_session_options o = {.split = split};
    shardnet_session_t *s = NULL;
    const void *d;
    multi_io mine = *t;
    mine.x.data = (void *)x;
    cr_assert_eq(shardnet_session_create_with(ctx, m, devices, &o, &s),
                 SHARDNET_OK, "%s", shardnet_last_error());
    bind_multi_io(s, &mine, t->x.info.dims[0]);
    cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s",
                 shardnet_last_error());
    size_t n1 = t->y1.nbytes, n2 = t->y2.nbytes;
    *y1 = malloc(n1);
    *y2 = malloc(n2);
    cr_assert_eq(shardnet_session_output(s, output_index(m, "y1"), NULL, &d),
                 SHARDNET_OK);
    memcpy(*y1, d, n1);
    cr_assert_eq(shardnet_session_output(s, output_index(m, "y2"), NULL, &d),
                 SHARDNET_OK);
    memcpy(*y2, d, n2);
    shardnet_session_free(s);
    /* ...and numpy's, so that a wrong single-threaded answer is not the
     * reference. */
    for (size_t i = 0; x == t->x.data && i < n1 / sizeof(float); i++)
        cr_assert(fabsf((*y1)[i] - ((const float *)t->y1.data)[i]) <=
                      1e-5f * (1 + fabsf(((const float *)t->y1.data)[i])),
                  "single-threaded y1[%zu] on %s", i, devices);
}

/* Threads that share one model and one context, each with its own session
 * and rows: one device, and a split. */
static void threads_share_a_model(const char *devices, const char *split)
{
    need_devices(devices);
    multi_io t;
    multi_io_load(&t);
    shardnet_model_t *m = load_model("multi_io.onnx");
    float *x[THREADS], *y1[THREADS], *y2[THREADS];
    worker w[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        x[i] = i ? thread_rows(&t, i) : t.x.data;
        single_threaded(m, &t, x[i], devices, split, &y1[i], &y2[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){.model = m, .t = &t, .x = x[i], .devices = devices,
                        .split = split, .want1 = y1[i], .want2 = y2[i],
                        .rows = t.x.info.dims[0]};
        cr_assert_eq(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < THREADS; i++)
        cr_assert(!w[i].error[0], "thread %d: %s", i, w[i].error);
    for (int i = 0; i < THREADS; i++) {
        if (i)
            free(x[i]);
        free(y1[i]);
        free(y2[i]);
    }
    shardnet_model_free(m);
    multi_io_release(&t);
}

Test(api, threads_with_a_session_each_on_one_shared_model_and_device)
{
    threads_share_a_model("cpu:0", "none");
}

Test(api, threads_with_a_session_each_on_one_shared_model_and_split)
{
    threads_share_a_model("cpu:0,cpu:1", "layer");
}

/* Different models and sessions on different devices from several threads
 * at once: on cpu:0 and on cl:0 (or cpu:1), each thread its own model,
 * session and rows. */
Test(api, threads_with_their_own_models_on_several_devices)
{
    const char *other = "cl:0";
    size_t idx[1], n;
    if (shardnet_devices_select(ctx, other, idx, 1, &n) != SHARDNET_OK)
        other = "cpu:1";
    need_devices(other);
    multi_io t;
    multi_io_load(&t);
    shardnet_model_t *m[THREADS];
    float *x[THREADS], *y1[THREADS], *y2[THREADS];
    const char *devs[2] = {"cpu:0", other};
    worker w[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        m[i] = load_model("multi_io.onnx");
        x[i] = i ? thread_rows(&t, i) : t.x.data;
        single_threaded(m[i], &t, x[i], devs[i % 2], "none", &y1[i], &y2[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){.model = m[i], .t = &t, .x = x[i],
                        .devices = devs[i % 2], .split = "none",
                        .want1 = y1[i], .want2 = y2[i],
                        .rows = t.x.info.dims[0]};
        cr_assert_eq(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < THREADS; i++)
        cr_assert(!w[i].error[0], "thread %d: %s", i, w[i].error);
    for (int i = 0; i < THREADS; i++) {
        if (i)
            free(x[i]);
        free(y1[i]);
        free(y2[i]);
    }
    for (int i = 0; i < THREADS; i++)
        shardnet_model_free(m[i]);
    multi_io_release(&t);
}

/* --- the operator registry ------------------------------------------------ */

Test(api, operator_registry_lists_each_operator_once_with_its_opsets)
{
    size_t n = shardnet_operator_count();
    shardnet_operator_info info;
    int reciprocal = 0, not_ = 0;
    cr_assert_gt(n, 40);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(shardnet_operator_get(i, &info), SHARDNET_OK, "%s",
                     shardnet_last_error());
        cr_assert(info.name && *info.name);
        /* ONNX's own, shardnet's (which its passes make) and ONNX
         * Runtime's com.microsoft */
        cr_assert(!strcmp(info.domain, "ai.onnx") ||
                      !strcmp(info.domain, "ai.shardnet") ||
                      !strcmp(info.domain, "com.microsoft"),
                  "%s: domain %s", info.name, info.domain);
        cr_assert_geq(info.since_opset, 1, "%s", info.name);
        cr_assert(info.until_opset == 0 || info.until_opset >= info.since_opset,
                  "%s", info.name);
        reciprocal += !strcmp(info.name, "Reciprocal");
        not_ += !strcmp(info.name, "Not");
        /* once in its domain (com.microsoft's Gelu is not ONNX's) */
        for (size_t j = 0; j < i; j++) {
            shardnet_operator_info other;
            cr_assert_eq(shardnet_operator_get(j, &other), SHARDNET_OK);
            cr_assert(strcmp(other.name, info.name) ||
                          strcmp(other.domain, info.domain),
                      "%s of %s listed twice", info.name, info.domain);
        }
    }
    cr_assert_eq(reciprocal, 1);
    cr_assert_eq(not_, 1);
    cr_assert_eq(shardnet_operator_get(n, &info), SHARDNET_INVALID_ARGUMENT);
    cr_assert_eq(shardnet_operator_get(0, NULL), SHARDNET_INVALID_ARGUMENT);
}

/* Every backend runs every operator: each kind with a device here is
 * listed, cpu first (the context's order). */
Test(api, operator_backends_names_every_kind_of_device_found)
{
    char want[32], got[32];
    kinds_here(ctx, want, sizeof want);
    cr_assert_eq(strncmp(want, "cpu", 3), 0, "%s", want);
    for (size_t i = 0; i < shardnet_operator_count(); i++) {
        cr_assert_eq(shardnet_operator_backends(ctx, i, got, sizeof got),
                     SHARDNET_OK, "%s", shardnet_last_error());
        cr_assert_str_eq(got, want, "operator %zu", i);
    }
}

Test(api, operator_backends_checks_its_arguments)
{
    char got[8];
    size_t n = shardnet_operator_count();
    cr_assert_eq(shardnet_operator_backends(NULL, 0, got, sizeof got),
                 SHARDNET_INVALID_ARGUMENT);
    cr_assert_eq(shardnet_operator_backends(ctx, n, got, sizeof got),
                 SHARDNET_INVALID_ARGUMENT);
    cr_assert_eq(shardnet_operator_backends(ctx, 0, NULL, 4),
                 SHARDNET_INVALID_ARGUMENT);
    cr_assert_eq(shardnet_operator_backends(ctx, 0, NULL, 0), SHARDNET_OK);
    cr_assert_eq(shardnet_operator_backends(ctx, 0, got, 2), SHARDNET_OK);
    cr_assert_str_eq(got, "c", "truncated to the room given");
}

/* The README's operator list ("* **Operators** (...): A, B, ..., Z.") is
 * the registry's, in its order. */
Test(api, readme_lists_the_operators_of_the_registry)
{
    const char *src = getenv("SHARDNET_SRCDIR");
    char path[4096], text[1 << 16], *at, *end, *tok, *save = NULL;
    size_t len, k = 0;
    FILE *f;
    snprintf(path, sizeof path, "%s/README.md", src ? src : ".");
    cr_assert((f = fopen(path, "r")) != NULL, "%s", path);
    len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    cr_assert((at = strstr(text, "* **Operators**")) != NULL);
    cr_assert((at = strstr(at, "): ")) != NULL);
    at += 3;
    cr_assert((end = strchr(at, '.')) != NULL);
    *end = '\0';
    for (tok = strtok_r(at, ", \n", &save); tok;
         tok = strtok_r(NULL, ", \n", &save), k++) {
        shardnet_operator_info info;
        cr_assert_eq(shardnet_operator_get(k, &info), SHARDNET_OK,
                     "the README lists %s, more than the registry's %zu",
                     tok, shardnet_operator_count());
        cr_assert_str_eq(tok, info.name, "README entry %zu", k);
    }
    cr_assert_eq(k, shardnet_operator_count(),
                 "the README lists %zu operators, the registry %zu", k,
                 shardnet_operator_count());
}

/* Session options are read up to the size the caller states: a program
 * built against the first version of the struct (up to plan_file) still
 * works, the memory past its struct untouched; a newer program's options
 * pass when the fields this library lacks are unset, and are refused when
 * one is set. */
Test(api, session_options_grow_without_breaking_programs)
{
    const size_t first = offsetof(shardnet_session_options, plan_file) +
                         sizeof(const char *);
    const size_t newer = sizeof(shardnet_session_options) + 16;
    shardnet_session_options *o;
    shardnet_session_t *s = NULL;
    need_devices("cpu:0,cpu:1");
    shardnet_model_t *m = load_model("multi_io.onnx");

    /* The first version, in a block of exactly its size: its split is
     * read ("none" on two devices is refused, "layer" runs). */
    cr_assert(o = malloc(first));
    memset(o, 0, first);
    o->size = first;
    o->split = "none";
    cr_assert_eq(shardnet_session_create_with(ctx, m, "cpu:0,cpu:1", o, &s),
                 SHARDNET_INVALID_ARGUMENT);
    o->split = "layer";
    o->micro_batches = 2;
    cr_assert_eq(shardnet_session_create_with(ctx, m, "cpu:0,cpu:1", o, &s),
                 SHARDNET_OK, "%s", shardnet_last_error());
    shardnet_session_free(s);
    s = NULL;
    /* Too small to hold the first version's fields. */
    o->size = sizeof o->size;
    cr_assert_eq(shardnet_session_create_with(ctx, m, "cpu:0,cpu:1", o, &s),
                 SHARDNET_INVALID_ARGUMENT);
    cr_assert(strstr(shardnet_last_error(), "too small"), "%s",
              shardnet_last_error());
    free(o);

    /* A newer program's larger struct. */
    cr_assert(o = calloc(1, newer));
    o->size = newer;
    o->split = "layer";
    cr_assert_eq(shardnet_session_create_with(ctx, m, "cpu:0,cpu:1", o, &s),
                 SHARDNET_OK, "%s", shardnet_last_error());
    shardnet_session_free(s);
    s = NULL;
    ((unsigned char *)o)[newer - 1] = 1;
    cr_assert_eq(shardnet_session_create_with(ctx, m, "cpu:0,cpu:1", o, &s),
                 SHARDNET_INVALID_ARGUMENT);
    cr_assert(strstr(shardnet_last_error(), "newer shardnet"), "%s",
              shardnet_last_error());
    cr_assert_null(s);
    free(o);
    shardnet_model_free(m);
}

/* Two runs of one session on inputs of the same shape but other indices:
 * a device's plan took the indices' values when it was built (integer
 * inputs are read on the host), so a split that kept its plans by shape
 * alone gathered the first run's rows again (the tensor split did, and so
 * did a hybrid stage, whose micro-batches are such runs). */
Test(api, same_shape_other_indices_gather_their_own_rows)
{
    static const struct {
        const char *split, *devices;
        size_t micro;
    } cases[] = {
        {"tensor", "cpu:0,cpu:1", 0},
        {"hybrid", "cpu:0,cpu:1,cl:0", 0},
        {"layer", "cpu:0,cpu:1", 0},
    };
    multi_io t;
    multi_io_load(&t);
    shardnet_model_t *m = load_model("multi_io.onnx");
    size_t y1 = output_index(m, "y1");
    int64_t half = t.x.info.dims[0] / 2;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t idx[8], n;
        if (shardnet_devices_select(ctx, cases[c].devices, idx, 8, &n) !=
            SHARDNET_OK)
            continue; /* the other cases still run */
        shardnet_session_options o = {.split = cases[c].split,
                                      .micro_batches = cases[c].micro};
        shardnet_session_t *s = NULL;
        cr_assert_eq(shardnet_session_create_with(ctx, m, cases[c].devices,
                                                  &o, &s),
                     SHARDNET_OK, "%s", shardnet_last_error());
        for (int64_t first = 0; first < 2 * half; first += half) {
            shardnet_tensor_info info;
            const void *data;
            bind_multi_io_rows(s, &t, first, half);
            cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s on %s: %s",
                         cases[c].split, cases[c].devices,
                         shardnet_last_error());
            cr_assert_eq(shardnet_session_output(s, y1, &info, &data),
                         SHARDNET_OK);
            const float *got = data, *ref = t.y1.data;
            size_t cols = (size_t)t.y1.info.dims[1];
            for (size_t i = 0; i < (size_t)half * cols; i++) {
                double want = ref[(size_t)first * cols + i];
                cr_assert(fabs(got[i] - want) <= 1e-5 * (1 + fabs(want)),
                          "%s on %s, rows from %lld: y1 element %zu is %.9g, "
                          "numpy %.9g",
                          cases[c].split, cases[c].devices, (long long)first,
                          i, (double)got[i], want);
            }
        }
        shardnet_session_free(s);
    }
    shardnet_model_free(m);
    multi_io_release(&t);
}

/* --- progress --------------------------------------------------------------- */

/* What a progress callback heard: each call's stage, done and total. */
typedef struct heard {
    char what[16][128];
    uint64_t done[16], total[16];
    size_t n, calls;
    int backwards; /* a stage's done went down */
} heard;

static void hear(void *user, const char *what, uint64_t done, uint64_t total)
{
    heard *h = user;
    h->calls++;
    if (h->n && !strcmp(h->what[h->n - 1], what)) {
        h->backwards |= done < h->done[h->n - 1];
        h->done[h->n - 1] = done;
        h->total[h->n - 1] = total;
        return;
    }
    if (h->n == 16)
        return;
    snprintf(h->what[h->n], sizeof h->what[h->n], "%s", what);
    h->done[h->n] = done;
    h->total[h->n] = total;
    h->n++;
}

/* A context's progress callback hears a session's first run upload the
 * weights to cpu:0 (the MLP's 0.6 MB), in order, to the end; later runs
 * upload nothing, so it hears nothing more; without a callback nothing is
 * called (nothing to hear). */
Test(api, progress_reaches_the_callback_to_the_end_of_each_stage)
{
    char path[4096];
    const char *src = getenv("SHARDNET_SRCDIR");
    heard h = {0};
    shardnet_context_options o = {.size = sizeof o, .progress = hear,
                                  .progress_user = &h};
    shardnet_context_t *c;
    shardnet_model_t *m;
    shardnet_session_t *s;
    static float x[784];
    static const int64_t dims[] = {1, 784};
    snprintf(path, sizeof path, "%s/tests/fixtures/fashion_mlp.onnx",
             src ? src : ".");
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK);
    cr_assert_eq(shardnet_context_create_with(&o, &c), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(shardnet_session_create(c, m, "cpu:0", &s), SHARDNET_OK);
    cr_assert_eq(shardnet_session_set_input(s, 0, SHARDNET_DTYPE_FLOAT32, 2,
                                            dims, x),
                 SHARDNET_OK);
    cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s",
                 shardnet_last_error());
    size_t calls = h.calls, up = 16;
    for (size_t i = 0; i < h.n; i++)
        if (!strcmp(h.what[i], "uploading weights to cpu:0"))
            up = i;
    cr_assert_lt(up, 16, "no upload to cpu:0 heard (%zu stages)", h.n);
    cr_expect_gt(h.total[up], 500000);
    cr_expect_eq(h.done[up], h.total[up], "the upload stopped at %llu of %llu",
                 (unsigned long long)h.done[up],
                 (unsigned long long)h.total[up]);
    cr_expect_not(h.backwards);
    cr_assert_eq(shardnet_session_run(s), SHARDNET_OK);
    cr_expect_eq(h.calls, calls, "a second run reported progress");
    shardnet_session_free(s);
    shardnet_context_free(c);
    shardnet_model_free(m);
}

/* The fashion MLP's first rows through one session, as a float array. */
static const float *mlp_rows(shardnet_session_t *s, const float *x,
                             int64_t rows)
{
    const int64_t dims[] = {rows, 784};
    shardnet_tensor_info info;
    const void *y;
    cr_assert_eq(shardnet_session_set_input(s, 0, SHARDNET_DTYPE_FLOAT32, 2,
                                            dims, x),
                 SHARDNET_OK);
    cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(shardnet_session_output(s, 0, &info, &y), SHARDNET_OK);
    cr_assert_eq(info.dims[0], rows);
    return y;
}

/* A CPU device sums a one-row product by a weight in its own order (dot
 * products with the weight's rows in place, cpu/sgemm_avx512.c), so a
 * layer split asked for one micro-batch per row must still cut the batch
 * into micro-batches of two rows or more: its rows then come out as the
 * whole batch's on one device, bit for bit.  A batch of one row is the
 * one-device answer for that row too. */
Test(api, micro_batches_keep_two_rows_so_rows_match_the_whole_batch)
{
    need_devices("cpu:0,cpu:1");
    char path[4096];
    const char *src = getenv("SHARDNET_SRCDIR");
    shardnet_tensor x;
    snprintf(path, sizeof path, "%s/tests/fixtures/fashion_mlp_input.npy",
             src ? src : ".");
    cr_assert_eq(shardnet_tensor_load(path, &x), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_geq(x.info.dims[0], 5);
    snprintf(path, sizeof path, "%s/tests/fixtures/fashion_mlp.onnx",
             src ? src : ".");
    shardnet_model_t *m;
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK);
    for (int64_t rows = 1; rows <= 5; rows++) {
        shardnet_session_t *one, *layer;
        shardnet_session_options o = {.size = sizeof o, .split = "layer",
                                      .micro_batches = (size_t)rows};
        cr_assert_eq(shardnet_session_create(ctx, m, "cpu:0", &one),
                     SHARDNET_OK);
        cr_assert_eq(shardnet_session_create_with(ctx, m, "cpu:0,cpu:1", &o,
                                                  &layer),
                     SHARDNET_OK, "%s", shardnet_last_error());
        const float *want = mlp_rows(one, x.data, rows);
        const float *got = mlp_rows(layer, x.data, rows);
        cr_assert(!memcmp(want, got, (size_t)rows * 10 * sizeof *got),
                  "%lld rows in %lld micro-batches differ from one device",
                  (long long)rows, (long long)rows);
        shardnet_session_free(one);
        shardnet_session_free(layer);
    }
    shardnet_model_free(m);
    shardnet_tensor_free(&x);
}

/* shardnet_host_alloc: memory aligned to 64 bytes, of any size down to 0,
 * that a run reads as it reads any other (on every device here, each
 * device's answer the same from memory for that device as from malloc's);
 * too much is NULL with the size named, never a short block; a list that
 * names no device, or no context, is NULL with the reason; NULL is freed
 * as nothing. */
Test(api, host_memory_feeds_a_run_as_any_memory_does)
{
    char path[4096];
    const char *src = getenv("SHARDNET_SRCDIR");
    shardnet_tensor x;
    shardnet_model_t *m;
    enum { ROWS = 5 };
    snprintf(path, sizeof path, "%s/tests/fixtures/fashion_mlp_input.npy",
             src ? src : ".");
    cr_assert_eq(shardnet_tensor_load(path, &x), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_geq(x.info.dims[0], ROWS);
    snprintf(path, sizeof path, "%s/tests/fixtures/fashion_mlp.onnx",
             src ? src : ".");
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK);
    size_t bytes = (size_t)ROWS * 784 * sizeof(float);
    for (size_t i = 0; i < shardnet_device_count(ctx); i++) {
        shardnet_device_info info;
        shardnet_session_t *s;
        float want[ROWS * 10];
        cr_assert_eq(shardnet_device_get_info(ctx, i, &info), SHARDNET_OK);
        float *host = shardnet_host_alloc(ctx, info.name, bytes);
        cr_assert_not_null(host, "%s: %s", info.name, shardnet_last_error());
        cr_assert_eq((uintptr_t)host % 64, 0);
        memcpy(host, x.data, bytes);
        cr_assert_eq(shardnet_session_create(ctx, m, info.name, &s),
                     SHARDNET_OK, "%s: %s", info.name, shardnet_last_error());
        memcpy(want, mlp_rows(s, x.data, ROWS), sizeof want);
        cr_assert(!memcmp(mlp_rows(s, host, ROWS), want, sizeof want),
                  "%s: the run from host memory differs", info.name);
        shardnet_session_free(s);
        shardnet_host_free(host);
    }

    void *empty = shardnet_host_alloc(ctx, NULL, 0);
    cr_assert_not_null(empty, "%s", shardnet_last_error());
    shardnet_host_free(empty);
    cr_assert_null(shardnet_host_alloc(ctx, "cpu:0", SIZE_MAX - 8));
    cr_assert(strstr(shardnet_last_error(), "host memory of"), "%s",
              shardnet_last_error());
    cr_assert_null(shardnet_host_alloc(ctx, "cpu:0,nosuch:3", 16));
    cr_assert(strstr(shardnet_last_error(), "nosuch"), "%s",
              shardnet_last_error());
    cr_assert_null(shardnet_host_alloc(NULL, NULL, 16));
    cr_assert(strstr(shardnet_last_error(), "context"), "%s",
              shardnet_last_error());
    shardnet_host_free(NULL);
    shardnet_model_free(m);
    shardnet_tensor_free(&x);
}
