/*
 * Configuration: the SHARDNET_* environment variables, read once per
 * process (lib/core/config.c), and the context options over them
 * (shardnet_context_create_with).  Every test runs in a process of its
 * own, so each sets the environment it needs before its first context.
 */
#include <config.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "cpu_kernels.h"
#include "shardnet.h"

static void assert_error_has(const char *needle)
{
    cr_assert(strstr(shardnet_last_error(), needle),
              "error '%s' does not mention '%s'", shardnet_last_error(),
              needle);
}

static shardnet_context_t *create(const shardnet_context_options *o)
{
    shardnet_context_t *ctx = NULL;
    cr_assert_eq(shardnet_context_create_with(o, &ctx), SHARDNET_OK, "%s",
                 shardnet_last_error());
    return ctx;
}

/* The device called name (skip when the context lacks it). */
static sn_device *device(shardnet_context_t *ctx, const char *name)
{
    sn_device *d;
    for (size_t i = 0; (d = sn_context_device(ctx, i)) != NULL; i++)
        if (!strcmp(d->info.name, name))
            return d;
    cr_skip_test("no device %s on this machine", name);
    return NULL;
}

/* The default list of ctx (spec NULL or ""), into idx; skip where it
 * names a device this machine lacks (cpu:1 on one package). */
static void default_list(shardnet_context_t *ctx, const char *spec,
                         size_t *idx, size_t cap, size_t *n)
{
    shardnet_status st = shardnet_devices_select(ctx, spec, idx, cap, n);
    if (st == SHARDNET_NO_DEVICE)
        cr_skip_test("its device list: %s", shardnet_last_error());
    cr_assert_eq(st, SHARDNET_OK, "%s", shardnet_last_error());
}

/* --- the environment ----------------------------------------------------- */

/* A value the library cannot use, and the error it gives: the whole
 * message, or its start. */
typedef struct bad_value {
    char var[32], value[16], message[160];
} bad_value;

ParameterizedTestParameters(environment, bad_value_fails_every_context)
{
    static bad_value bad[] = {
#define SIZE_IS "' is not a size (a positive number of bytes, or one with " \
                "a K, M or G suffix, e.g. 512M)"
#define THREADS_ARE "' is not a number of threads (a whole number, 1 or more)"
        {"SHARDNET_MEMORY_LIMIT", "lots",
         "SHARDNET_MEMORY_LIMIT='lots" SIZE_IS},
        {"SHARDNET_MEMORY_LIMIT", "512MB",
         "SHARDNET_MEMORY_LIMIT='512MB" SIZE_IS},
        {"SHARDNET_MEMORY_LIMIT", "-5", "SHARDNET_MEMORY_LIMIT='-5" SIZE_IS},
        {"SHARDNET_MEMORY_LIMIT", "0", "SHARDNET_MEMORY_LIMIT='0" SIZE_IS},
        {"SHARDNET_CPU_THREADS", "two",
         "SHARDNET_CPU_THREADS='two" THREADS_ARE},
        {"SHARDNET_CPU_THREADS", "0", "SHARDNET_CPU_THREADS='0" THREADS_ARE},
        {"SHARDNET_CPU_THREADS", "3x", "SHARDNET_CPU_THREADS='3x" THREADS_ARE},
#undef SIZE_IS
#undef THREADS_ARE
        {"SHARDNET_REPROFILE", "yes",
         "SHARDNET_REPROFILE='yes' is not a switch (0 or 1)"},
        {"SHARDNET_STAGED_COLLECTIVES", "2",
         "SHARDNET_STAGED_COLLECTIVES='2' is not a switch (0 or 1)"},
        {"SHARDNET_MPI", "off", "SHARDNET_MPI='off' is not a switch (0 or 1)"},
        {"SHARDNET_MPI_TIMEOUT", "soon",
         "SHARDNET_MPI_TIMEOUT='soon' is not a number of seconds"},
        {"SHARDNET_LINK_LATENCY_US", "20us",
         "SHARDNET_LINK_LATENCY_US='20us' is not a latency in microseconds"},
        {"SHARDNET_LINK_GBPS", "-1",
         "SHARDNET_LINK_GBPS='-1' is not a bandwidth in GB/s"},
        {"SHARDNET_CPU_SGEMM", "fast",
         "SHARDNET_CPU_SGEMM='fast' is not a GEMM kernel (auto or blas)"},
        {"SHARDNET_COMM", "fp8",
         "SHARDNET_COMM='fp8' is not a codec (fp32, fp16, bf16 or int8)"},
        {"SHARDNET_CUDA_CHECK", "maybe",
         "SHARDNET_CUDA_CHECK='maybe' is not a switch (0 or 1)"},
    };
    return cr_make_param_array(bad_value, bad, sizeof bad / sizeof bad[0]);
}

/* Refused with a message naming the variable, its value and what it should
 * be; options that set the same setting do not make it right. */
ParameterizedTest(bad_value *b, environment, bad_value_fails_every_context)
{
    shardnet_context_options o = {.size = sizeof o,
                                  .devices = "cpu:0",
                                  .memory_limit = 1 << 30,
                                  .cpu_threads = 1,
                                  .reprofile = -1,
                                  .staged_collectives = -1};
    shardnet_context_t *ctx = NULL;
    cr_assert_eq(setenv(b->var, b->value, 1), 0);
    cr_assert_eq(shardnet_context_create(&ctx), SHARDNET_INVALID_ARGUMENT,
                 "%s=%s was accepted", b->var, b->value);
    cr_assert_null(ctx);
    assert_error_has(b->message);
    cr_assert_eq(shardnet_context_create_with(&o, &ctx),
                 SHARDNET_INVALID_ARGUMENT, "%s=%s was accepted with options",
                 b->var, b->value);
    cr_assert_null(ctx);
    assert_error_has(b->message);
}

Test(environment, values_are_taken_once_per_process)
{
    shardnet_context_t *ctx;
    setenv("SHARDNET_MEMORY_LIMIT", "512M", 1);
    setenv("SHARDNET_CPU_THREADS", "1", 1);
    setenv("SHARDNET_DEVICES", "cpu:1", 1);
    setenv("SHARDNET_LINK_GBPS", "2.5", 1);
    setenv("SHARDNET_CPU_SGEMM", "blas", 1);
    ctx = create(NULL);
    sn_device *cpu0 = device(ctx, "cpu:0");
    uint64_t want = cpu0->info.global_mem < (512u << 20)
                        ? cpu0->info.global_mem
                        : 512u << 20;
    cr_assert_eq(sn_device_memory(cpu0), want);
    cr_assert_eq(cpu0->info.compute_units, 1);
    cr_assert_eq(sn_config_env()->link_bytes_per_s, 2.5e9);
    cr_assert_eq(sn_cpu_sgemm_avx512_available(), 0,
                 "SHARDNET_CPU_SGEMM=blas left the AVX-512 kernel on");
    /* Changed later, the environment is not read again. */
    setenv("SHARDNET_MEMORY_LIMIT", "1M", 1);
    unsetenv("SHARDNET_DEVICES");
    shardnet_context_free(ctx);
    ctx = create(NULL);
    cr_assert_eq(sn_device_memory(device(ctx, "cpu:0")), want);
    size_t idx[4], n = 0;
    default_list(ctx, NULL, idx, 4, &n);
    cr_assert_eq(n, 1);
    cr_assert_eq(sn_context_device(ctx, idx[0]), device(ctx, "cpu:1"));
    shardnet_context_free(ctx);
}

/* --- options over the environment ---------------------------------------- */

Test(options, win_over_the_environment)
{
    shardnet_context_options o = {.size = sizeof o,
                                  .devices = "cpu:1",
                                  .memory_limit = 4 << 20,
                                  .cache_dir = "/tmp/sn-options-cache",
                                  .reprofile = -1,
                                  .staged_collectives = -1,
                                  .kernel_dir = "/tmp/sn-options-cl",
                                  .comm = SHARDNET_COMM_FP32};
    shardnet_context_t *by_env, *by_options;
    setenv("SHARDNET_MEMORY_LIMIT", "1G", 1);
    setenv("SHARDNET_DEVICES", "cpu:0", 1);
    setenv("SHARDNET_CACHE_DIR", "/tmp/sn-env-cache", 1);
    setenv("SHARDNET_REPROFILE", "1", 1);
    setenv("SHARDNET_STAGED_COLLECTIVES", "1", 1);
    setenv("SHARDNET_CL_DIR", "/tmp/sn-env-cl", 1);
    setenv("SHARDNET_COMM", "int8", 1);
    by_env = create(NULL);
    by_options = create(&o);
    for (size_t i = 0; i < shardnet_device_count(by_options); i++) {
        sn_device *d = sn_context_device(by_options, i);
        cr_assert_eq(sn_device_memory(d), 4 << 20, "%s: %llu bytes",
                     d->info.name, (unsigned long long)sn_device_memory(d));
        cr_assert_str_eq(d->config->cache_dir, "/tmp/sn-options-cache");
        cr_assert_str_eq(d->config->kernel_dir, "/tmp/sn-options-cl");
        cr_assert_eq(d->config->reprofile, 0);
        cr_assert_eq(d->config->staged_collectives, 0);
        cr_assert_eq(d->config->comm, 0); /* fp32 */
    }
    /* A context without options still has what the environment says. */
    for (size_t i = 0; i < shardnet_device_count(by_env); i++) {
        sn_device *d = sn_context_device(by_env, i);
        uint64_t g = d->info.global_mem;
        cr_assert_eq(sn_device_memory(d), g && g < 1u << 30 ? g : 1u << 30);
        cr_assert_str_eq(d->config->cache_dir, "/tmp/sn-env-cache");
        cr_assert_str_eq(d->config->kernel_dir, "/tmp/sn-env-cl");
        cr_assert_eq(d->config->reprofile, 1);
        cr_assert_eq(d->config->staged_collectives, 1);
        cr_assert_eq(d->config->comm, 3); /* int8 */
    }
    size_t idx[4], n = 0;
    default_list(by_options, "", idx, 4, &n);
    cr_assert_eq(sn_context_device(by_options, idx[0]),
                 device(by_options, "cpu:1"));
    cr_assert_eq(shardnet_devices_select(by_env, NULL, idx, 4, &n),
                 SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(sn_context_device(by_env, idx[0]), device(by_env, "cpu:0"));
    shardnet_context_free(by_env);
    shardnet_context_free(by_options);
}

Test(options, default_device_list_is_checked_when_used)
{
    shardnet_context_options o = {.size = sizeof o, .devices = "tpu:0"};
    shardnet_context_t *ctx = create(&o);
    size_t idx[4], n = 0;
    cr_assert_eq(shardnet_devices_select(ctx, NULL, idx, 4, &n),
                 SHARDNET_NO_DEVICE);
    assert_error_has("unknown device 'tpu:0'");
    cr_assert_eq(shardnet_devices_select(ctx, "cpu:0", idx, 4, &n),
                 SHARDNET_OK, "%s", shardnet_last_error());
    shardnet_context_free(ctx);
}

/* Packages of two cores, simulated where make check simulates one. */
static void two_cores(void)
{
    if (!getenv("SHARDNET_TEST_NATIVE")) {
        setenv("HWLOC_SYNTHETIC", "pack:2 numa:1 core:2 pu:1", 1);
        setenv("HWLOC_THISSYSTEM", "1", 1);
    }
}

/* cpu:0's threads in a new context with at most `threads` (0: unset). */
static unsigned cpu0_threads(unsigned threads)
{
    shardnet_context_options o = {.size = sizeof o, .cpu_threads = threads};
    shardnet_context_t *ctx = create(&o);
    unsigned n = device(ctx, "cpu:0")->info.compute_units;
    shardnet_context_free(ctx);
    return n;
}

Test(options, cpu_threads_sizes_the_cpu_devices)
{
    two_cores();
    unsigned all = cpu0_threads(0);
    if (all < 2)
        cr_skip_test("cpu:0 has one core: nothing to cap");
    cr_assert_eq(cpu0_threads(1), 1);
    cr_assert_eq(cpu0_threads(all), all);
    cr_assert_eq(cpu0_threads(1u << 20), all);
}

/* The variable sizes them the same way; the option wins over it. */
Test(options, cpu_threads_wins_over_the_variable)
{
    two_cores();
    setenv("SHARDNET_CPU_THREADS", "1", 1);
    unsigned all = cpu0_threads(1u << 20);
    if (all < 2)
        cr_skip_test("cpu:0 has one core: nothing to cap");
    cr_assert_eq(cpu0_threads(0), 1);
    cr_assert_eq(cpu0_threads(2), 2);
}

/* --- options this library cannot take ------------------------------------ */

static void expect_refused(const shardnet_context_options *o,
                           const char *message)
{
    shardnet_context_t *ctx = NULL;
    cr_assert_eq(shardnet_context_create_with(o, &ctx),
                 SHARDNET_INVALID_ARGUMENT, "accepted; wanted: %s", message);
    cr_assert_null(ctx);
    assert_error_has(message);
}

/* A program built against a newer header passes a larger struct: accepted
 * while the fields this library lacks are 0, refused once one is set. */
Test(options, of_a_newer_shardnet_are_refused_when_set)
{
    const size_t newer = sizeof(shardnet_context_options) + 16;
    shardnet_context_options *o = calloc(1, newer);
    shardnet_context_t *ctx;
    char small[128];
    cr_assert_not_null(o);
    o->size = newer;
    o->cpu_threads = 1;
    ctx = create(o);
    cr_assert_eq(device(ctx, "cpu:0")->info.compute_units, 1);
    shardnet_context_free(ctx);
    ((unsigned char *)o)[newer - 1] = 1;
    expect_refused(o, "context options: byte");
    assert_error_has("newer shardnet");
    o->size = sizeof o->size;
    snprintf(small, sizeof small,
             "context options: size %zu is too small (set it to "
             "sizeof(shardnet_context_options))",
             sizeof o->size);
    expect_refused(o, small);
    /* 0 is the first version's size: this one's. */
    o->size = 0;
    ctx = create(o);
    shardnet_context_free(ctx);
    free(o);
}

Test(options, out_of_range_are_refused)
{
    char *lots = malloc(5000);
    cr_assert_not_null(lots);
    memset(lots, 'a', 4999);
    lots[4999] = '\0';
    shardnet_context_options o = {.size = sizeof o,
                                  .cpu_threads = (1u << 20) + 1};
    expect_refused(&o, "context options: cpu_threads is 1048577");
    o.cpu_threads = 0;
    o.devices = lots + 3000;
    expect_refused(&o, "context options: devices is 1999 bytes long");
    o.devices = NULL;
    o.kernel_dir = lots;
    expect_refused(&o, "context options: kernel_dir is 4999 bytes long");
    o.kernel_dir = NULL;
    o.cache_dir = lots;
    expect_refused(&o, "context options: cache_dir is 4999 bytes long");
    o.cache_dir = NULL;
    o.comm = SHARDNET_COMM_INT8 + 1;
    expect_refused(&o, "context options: comm is 5, not a shardnet_comm");
    free(lots);
}
