/*
 * What a device runs: the backend interface's supports query
 * (sn_device_supports) and each backend's answers, the refusal of a plan
 * whose kernels its device lacks, the operator registry's uses, and
 * shardnet_operator_backends where a kind's devices lack a kernel (the
 * public API's other cases are in tests/test_api).  (That each entry's
 * uses name every kernel its lowering launches is checked on every ONNX
 * node case by tests/conformance.)
 */
#include <config.h>

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "ops/registry.h"
#include "shardnet.h"
#include "context_suite.h"

SN_CONTEXT_SUITE(supports, 300);

/* --- the query ----------------------------------------------------------- */

static sn_kernel asked_kernel;
static int asked_variant, asked;

static shardnet_status some_unary(sn_device *dev, const sn_unary_desc *d)
{
    (void)dev;
    (void)d;
    return SHARDNET_OK;
}

/* Runs every unary op but erf. */
static int no_erf(sn_device *dev, sn_kernel k, int variant)
{
    (void)dev;
    asked_kernel = k;
    asked_variant = variant;
    asked++;
    return !(k == SN_KERNEL_UNARY &&
             (variant == SN_UNARY_ERF || variant == SN_VARIANT_ANY));
}

/* A backend with one kernel, unary: one that answers no_erf, one that
 * has no supports member. */
static const sn_backend_ops refusing_erf = {.abi = SN_BACKEND_ABI,
                                            .kind = "fake",
                                            .unary = some_unary,
                                            .supports = no_erf};
static const sn_backend_ops unary_only = {
    .abi = SN_BACKEND_ABI, .kind = "fake", .unary = some_unary};

Test(supports, a_kernel_member_left_null_is_not_supported)
{
    sn_device dev = {.ops = &refusing_erf};
    asked = 0;
    cr_assert_not(sn_device_supports(&dev, SN_KERNEL_GEMM, SN_VARIANT_ANY));
    cr_assert_not(sn_device_supports(&dev, SN_KERNEL_BINARY, SN_BINARY_ADD));
    cr_assert_eq(asked, 0, "the backend was asked about a kernel it lacks");
}

Test(supports, the_backend_answers_for_the_kernels_it_has)
{
    sn_device dev = {.ops = &refusing_erf};
    asked = 0;
    cr_assert(sn_device_supports(&dev, SN_KERNEL_UNARY, SN_UNARY_RELU));
    cr_assert_eq(asked_kernel, SN_KERNEL_UNARY);
    cr_assert_eq(asked_variant, SN_UNARY_RELU);
    cr_assert_not(sn_device_supports(&dev, SN_KERNEL_UNARY, SN_UNARY_ERF));
    cr_assert_not(sn_device_supports(&dev, SN_KERNEL_UNARY, SN_VARIANT_ANY));
    cr_assert_eq(asked, 3);
}

Test(supports, without_a_supports_member_every_variant_runs)
{
    sn_device dev = {.ops = &unary_only};
    for (int v = 0; v < SN_UNARY_COUNT; v++)
        cr_assert(sn_device_supports(&dev, SN_KERNEL_UNARY, v), "%d", v);
    cr_assert(sn_device_supports(&dev, SN_KERNEL_UNARY, SN_VARIANT_ANY));
}

Test(supports, variants_out_of_range_and_remote_devices_are_refused)
{
    sn_device dev = {.ops = &unary_only};
    sn_device remote = {.ops = &unary_only, .remote = 1};
    cr_assert_not(sn_device_supports(&dev, SN_KERNEL_UNARY, SN_UNARY_COUNT));
    cr_assert_not(sn_device_supports(&dev, SN_KERNEL_UNARY, -2));
    cr_assert_not(sn_device_supports(&dev, SN_KERNEL_COUNT, SN_VARIANT_ANY));
    cr_assert_not(sn_device_supports(&remote, SN_KERNEL_UNARY, 0));
    cr_assert_not(sn_device_supports(NULL, SN_KERNEL_UNARY, 0));
}

/* Both backends implement every kernel and every variant of it today. */
Test(supports, every_device_here_runs_every_kernel_and_variant)
{
    size_t n = shardnet_device_count(ctx);
    cr_assert_gt(n, 0);
    for (size_t i = 0; i < n; i++) {
        const sn_device *dev = sn_context_device(ctx, i);
        for (int k = 0; k < SN_KERNEL_COUNT; k++) {
            cr_assert(sn_device_supports(dev, (sn_kernel)k, SN_VARIANT_ANY),
                      "%s: %s", dev->info.name, sn_kernel_name((sn_kernel)k));
            for (int v = 0; v < sn_kernel_variants((sn_kernel)k); v++)
                cr_assert(sn_device_supports(dev, (sn_kernel)k, v),
                          "%s: %s variant %d", dev->info.name,
                          sn_kernel_name((sn_kernel)k), v);
        }
    }
}

Test(supports, kernels_and_variants_have_names)
{
    char buf[64];
    cr_assert_str_eq(sn_kernel_variant_name(SN_KERNEL_UNARY, SN_UNARY_ERF, buf,
                                            sizeof buf),
                     "unary/erf");
    cr_assert_str_eq(sn_kernel_variant_name(SN_KERNEL_POOL, SN_POOL_AVG, buf,
                                            sizeof buf),
                     "pool/avg");
    cr_assert_str_eq(sn_kernel_variant_name(SN_KERNEL_GEMM, SN_VARIANT_ANY,
                                            buf, sizeof buf),
                     "gemm");
}

/* --- the registry's uses ---------------------------------------------------- */

Test(supports, each_use_is_one_kernel_and_variant)
{
    for (int u = 0; u < SN_USES; u++) {
        int variant;
        sn_kernel k = sn_use_kernel((sn_use)u, &variant);
        cr_assert_lt(k, SN_KERNEL_COUNT, "use %d", u);
        cr_assert_eq(sn_use_of(k, variant), u, "use %d", u);
    }
    for (int k = 0; k < SN_KERNEL_COUNT; k++) {
        int nv = sn_kernel_variants((sn_kernel)k);
        cr_assert_eq(sn_use_of((sn_kernel)k, SN_VARIANT_ANY) >= 0, nv == 0,
                     "%s", sn_kernel_name((sn_kernel)k));
        for (int v = 0; v < nv; v++)
            cr_assert_geq(sn_use_of((sn_kernel)k, v), 0);
    }
}

Test(supports, reciprocal_uses_binary_division)
{
    const sn_operator *op = sn_operator_find("", "Reciprocal");
    cr_assert(op);
    cr_assert_eq(op->uses, SN_USES_BIT(SN_USE_BINARY_DIV));
    cr_assert_eq(sn_operator_find("", "Shape")->uses, 0);
}

/* --- a device that lacks a kernel -------------------------------------------- */

/* Device i's ops, replaced by a copy that refuses unary/erf (supports),
 * or that has no unary kernel at all; unary launches are counted. */
static const sn_backend_ops *real;
static sn_backend_ops lacking;
static int unary_launches;

static shardnet_status counted_unary(sn_device *dev, const sn_unary_desc *d)
{
    unary_launches++;
    return real->unary(dev, d);
}

static sn_device *lack_erf(size_t i, int drop_unary)
{
    sn_device *dev = sn_context_device(ctx, i);
    cr_assert(dev);
    real = dev->ops;
    lacking = *real;
    lacking.unary = drop_unary ? NULL : counted_unary;
    lacking.supports = no_erf;
    dev->ops = &lacking;
    unary_launches = 0;
    return dev;
}

#define ERF_CASE "/usr/share/libonnx-testdata/data/node/test_erf"

/* Runs the Erf case on cpu:0; the status of the run. */
static shardnet_status run_erf(void)
{
    shardnet_model_t *m = NULL;
    shardnet_session_t *s = NULL;
    shardnet_tensor x;
    shardnet_status st;
    if (shardnet_model_load(ERF_CASE "/model.onnx", &m) != SHARDNET_OK)
        cr_skip_test("ONNX test data not installed (libonnx-testdata)");
    cr_assert_eq(shardnet_tensor_load(ERF_CASE "/test_data_set_0/input_0.pb",
                                      &x),
                 SHARDNET_OK, "%s", shardnet_last_error());
    st = shardnet_session_create(ctx, m, "cpu:0", &s);
    if (st == SHARDNET_OK &&
        (st = shardnet_session_set_input(s, 0, x.info.dtype, x.info.rank,
                                         x.info.dims, x.data)) ==
            SHARDNET_OK)
        st = shardnet_session_run(s);
    shardnet_session_free(s);
    shardnet_tensor_free(&x);
    shardnet_model_free(m);
    return st;
}

/* Erf on cpu:0 lacking it (drop_unary: no unary kernel at all) fails with
 * SHARDNET_UNSUPPORTED as its plan is built, naming the operator, the
 * node, the kernel and the device, with no kernel launched. */
static void assert_erf_refused_before_launch(int drop_unary)
{
    sn_device *dev = lack_erf(0, drop_unary);
    shardnet_status st = run_erf();
    const char *e = shardnet_last_error();
    char device[64];
    dev->ops = real;
    cr_assert_eq(st, SHARDNET_UNSUPPORTED, "%s", e);
    snprintf(device, sizeof device, "device %s", dev->info.name);
    cr_log_info("%s", e);
    cr_assert(strstr(e, "(Erf)"), "no operator in: %s", e);
    cr_assert(strstr(e, "node '"), "no node in: %s", e);
    cr_assert(strstr(e, "unary/erf"), "no kernel in: %s", e);
    cr_assert(strstr(e, device), "no device in: %s", e);
    cr_assert_eq(unary_launches, 0, "a kernel was launched");
}

Test(supports, a_plan_needing_a_variant_the_device_refuses_fails_before_running)
{
    assert_erf_refused_before_launch(0);
}

Test(supports, a_plan_needing_a_kernel_the_device_lacks_fails_before_running)
{
    assert_erf_refused_before_launch(1);
}

/* --- which backends run an operator ------------------------------------------ */

static size_t operator_index(const char *name)
{
    for (size_t i = 0; i < shardnet_operator_count(); i++) {
        shardnet_operator_info info;
        cr_assert_eq(shardnet_operator_get(i, &info), SHARDNET_OK);
        if (!strcmp(info.name, name))
            return i;
    }
    cr_assert_fail("no operator %s", name);
    return 0;
}

Test(supports, a_kind_whose_devices_all_lack_a_kernel_is_not_listed)
{
    size_t erf = operator_index("Erf"), relu = operator_index("Relu");
    size_t ncpu = 0;
    char want[32], got[32];
    sn_device *cpus[8];
    sn_backend_ops refusing[8];
    const sn_backend_ops *was[8];
    char got_relu[32];
    shardnet_status st_erf, st_relu;
    kinds_here(ctx, want, sizeof want);
    /* every cpu device refuses erf */
    for (size_t i = 0; i < shardnet_device_count(ctx) && ncpu < 8; i++) {
        sn_device *dev = sn_context_device(ctx, i);
        if (strcmp(dev->ops->kind, "cpu"))
            continue;
        cpus[ncpu] = dev;
        was[ncpu] = dev->ops;
        refusing[ncpu] = *dev->ops;
        refusing[ncpu].supports = no_erf;
        dev->ops = &refusing[ncpu++];
    }
    st_erf = shardnet_operator_backends(ctx, erf, got, sizeof got);
    st_relu = shardnet_operator_backends(ctx, relu, got_relu, sizeof got_relu);
    /* The tables back before any assertion: the context outlives the test
     * and must not keep this frame's. */
    while (ncpu-- > 0)
        cpus[ncpu]->ops = was[ncpu];
    cr_assert_eq(st_erf, SHARDNET_OK);
    /* the kinds here but cpu, which comes first */
    cr_assert_str_eq(got, strncmp(want, "cpu,", 4) ? "" : want + 4);
    cr_assert_eq(st_relu, SHARDNET_OK);
    cr_assert_str_eq(got_relu, want);
}
