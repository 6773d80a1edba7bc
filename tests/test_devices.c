/* Device discovery and device lists. */
#include <config.h>

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "plan/share.h"
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

TestSuite(devices, .init = setup, .fini = teardown);

static size_t count_kind(shardnet_device_kind kind)
{
    size_t n = 0;
    for (size_t i = 0; i < shardnet_device_count(ctx); i++) {
        shardnet_device_info info;
        cr_assert_eq(shardnet_device_get_info(ctx, i, &info), SHARDNET_OK);
        n += info.kind == kind;
    }
    return n;
}

/* The simulated machine of the test suite: two packages of one core. */
static int simulated_sockets(void)
{
    const char *s = getenv("HWLOC_SYNTHETIC");
    return s && !strcmp(s, "pack:2 core:1 pu:1");
}

static int simulated_cl(void)
{
    const char *s = getenv("POCL_DEVICES");
#ifdef SN_HAVE_OPENCL
    return s && !strcmp(s, "pthread pthread");
#else
    (void)s;
    return 0;
#endif
}

Test(devices, one_cpu_device_per_package)
{
    size_t ncpu = count_kind(SHARDNET_DEVICE_CPU);
    cr_assert_geq(ncpu, 1);
    if (simulated_sockets()) {
        cr_assert_eq(ncpu, 2);
        for (unsigned i = 0; i < 2; i++) {
            shardnet_device_info info;
            char name[32];
            cr_assert_eq(shardnet_device_get_info(ctx, i, &info), SHARDNET_OK);
            snprintf(name, sizeof name, "cpu:%u", i);
            cr_assert_str_eq(info.name, name);
            cr_assert_eq(info.index, i);
            cr_assert_eq(info.compute_units, 1);
            cr_assert_gt(info.global_mem, 0);
            cr_assert(info.host_unified);
            cr_assert_geq(info.numa_node, 0);
            cr_assert_str_eq(info.cpuset, i == 0 ? "0" : "1");
            cr_assert(strstr(info.driver, "OpenBLAS"), "driver: %s",
                      info.driver);
        }
    }
}

Test(devices, opencl_devices_follow_the_cpu_devices)
{
    size_t ncpu = count_kind(SHARDNET_DEVICE_CPU);
    size_t ncl = count_kind(SHARDNET_DEVICE_OPENCL);
#ifndef SN_HAVE_OPENCL
    cr_assert_eq(ncl, 0, "built without OpenCL but found cl devices");
#endif
    if (simulated_cl())
        cr_assert_eq(ncl, 2);
    for (size_t i = 0; i < ncl; i++) {
        shardnet_device_info info;
        char name[32];
        cr_assert_eq(shardnet_device_get_info(ctx, ncpu + i, &info),
                     SHARDNET_OK);
        snprintf(name, sizeof name, "cl:%zu", i);
        cr_assert_str_eq(info.name, name);
        cr_assert_eq(info.kind, SHARDNET_DEVICE_OPENCL);
        cr_assert_neq(info.model[0], '\0');
        cr_assert_neq(info.vendor[0], '\0');
        cr_assert_neq(info.driver[0], '\0');
        cr_assert_geq(info.compute_units, 1);
        cr_assert_gt(info.global_mem, 0);
        cr_assert_gt(info.max_alloc, 0);
        cr_assert_leq(info.max_alloc, info.global_mem);
        if (simulated_cl())
            cr_assert(info.host_unified, "PoCL shares the host's memory");
    }
}

Test(devices, info_rejects_an_index_out_of_range)
{
    shardnet_device_info info;
    cr_assert_eq(shardnet_device_get_info(ctx, shardnet_device_count(ctx),
                                          &info),
                 SHARDNET_NO_DEVICE);
    cr_assert(strstr(shardnet_last_error(), "out of range"));
}

/* Select and return the names joined by commas ("" on failure). */
static shardnet_status names(const char *spec, char *out, size_t cap)
{
    size_t idx[16], n = 0;
    shardnet_status st = shardnet_devices_select(ctx, spec, idx, 16, &n);
    out[0] = '\0';
    for (size_t i = 0; st == SHARDNET_OK && i < n; i++) {
        shardnet_device_info info;
        shardnet_device_get_info(ctx, idx[i], &info);
        if (i)
            strncat(out, ",", cap - strlen(out) - 1);
        strncat(out, info.name, cap - strlen(out) - 1);
    }
    return st;
}

Test(devices, list_selects_kinds_names_and_all_in_order)
{
    char got[256];
    cr_assert_eq(names("cpu", got, sizeof got), SHARDNET_OK);
    if (simulated_sockets())
        cr_assert_str_eq(got, "cpu:0,cpu:1");
    cr_assert_eq(names("cpu:0", got, sizeof got), SHARDNET_OK);
    cr_assert_str_eq(got, "cpu:0");
    cr_assert_eq(names(" cpu:0 , cpu:0,cpu", got, sizeof got), SHARDNET_OK);
    cr_assert_eq(strncmp(got, "cpu:0", 5), 0, "duplicates taken once: %s", got);
    cr_assert_null(strstr(got + 1, "cpu:0"), "duplicates taken once: %s", got);
    if (simulated_sockets() && simulated_cl()) {
        cr_assert_eq(names("all", got, sizeof got), SHARDNET_OK);
        cr_assert_str_eq(got, "cpu:0,cpu:1,cl:0,cl:1");
        cr_assert_eq(names("cl:1,cpu:0", got, sizeof got), SHARDNET_OK);
        cr_assert_str_eq(got, "cl:1,cpu:0");
        cr_assert_eq(names("cl", got, sizeof got), SHARDNET_OK);
        cr_assert_str_eq(got, "cl:0,cl:1");
    }
}

/* (A context's own default list, by its option or SHARDNET_DEVICES, is
 * tests/test_config's.) */
Test(devices, no_list_means_all)
{
    char got[256], all[256];
    cr_assert_eq(names(NULL, got, sizeof got), SHARDNET_OK);
    cr_assert_eq(names("all", all, sizeof all), SHARDNET_OK);
    cr_assert_str_eq(got, all);
}

Test(devices, invalid_lists_give_clear_errors)
{
    static const struct {
        const char *spec, *needle;
    } bad[] = {
        {"gpu:0", "unknown device 'gpu:0'"},
        {"cpu:99", "no device 'cpu:99'"},
        {"cpu:", "expected a number"},
        {"cpu:x", "expected a number"},
        {"cpu:-1", "expected a number"},
        {"cpu:0x1", "expected a number"},
        {"cpu:99999999999999999999999", "expected a number"},
        {"cpu:0,,cpu:0", "empty item"},
        {"cpu:0,", "empty item"},
        {",", "empty item"},
        {":0", "unknown device"},
        {"cuda:99", "no device 'cuda:99'"},
        {"cl:99", "no device 'cl:99'"},
        /* where there is no GPU (last: left out where there is one) */
        {"cuda", "no cuda devices"},
        {"cuda:0", "no device 'cuda:0'"},
    };
    char got[256];
    size_t ngpu = 0, gpu;
    shardnet_devices_select(ctx, "cuda", &gpu, 1, &ngpu);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0] - (ngpu ? 2 : 0); i++) {
        cr_assert_eq(names(bad[i].spec, got, sizeof got), SHARDNET_NO_DEVICE,
                     "'%s' was accepted", bad[i].spec);
        cr_assert(strstr(shardnet_last_error(), bad[i].needle),
                  "'%s' gave '%s'", bad[i].spec, shardnet_last_error());
    }
}

Test(devices, list_longer_than_the_array_is_reported)
{
    size_t idx[1], n = 0;
    if (shardnet_device_count(ctx) < 2)
        cr_skip_test("needs two devices");
    cr_assert_eq(shardnet_devices_select(ctx, "all", idx, 1, &n),
                 SHARDNET_INVALID_ARGUMENT);
    cr_assert_eq(n, shardnet_device_count(ctx));
}

Test(devices, matmul_runs_on_every_device)
{
    const float a[6] = {1, 2, 3, 4, 5, 6};    /* 2x3 */
    const float b[6] = {7, 8, 9, 10, 11, 12}; /* 3x2 */
    const float want[4] = {58, 64, 139, 154};
    for (size_t i = 0; i < shardnet_device_count(ctx); i++) {
        float c[4] = {0};
        cr_assert_eq(shardnet_matmul(ctx, i, 2, 2, 3, a, b, c), SHARDNET_OK,
                     "device %zu: %s", i, shardnet_last_error());
        for (int j = 0; j < 4; j++)
            cr_assert_float_eq(c[j], want[j], 1e-4, "device %zu", i);
    }
    cr_assert_eq(shardnet_matmul(ctx, 999, 2, 2, 3, a, b, NULL),
                 SHARDNET_NO_DEVICE);
    cr_assert_eq(shardnet_matmul(ctx, 0, 0, 2, 3, a, b, (float *)want),
                 SHARDNET_INVALID_ARGUMENT);
}

/* --- the backend registry ------------------------------------------------ */

/* A backend of this test's own: its devices are descriptions that count
 * their frees; `fail` makes its discovery fail after pushing one. */
static int fake_discovered, fake_freed, fake_fail;

static void fake_free(sn_device *dev)
{
    fake_freed++;
    free(dev);
}

static const sn_backend_ops fake_ops = {
    .abi = SN_BACKEND_ABI, .kind = "fake", .device_free = fake_free};
static const sn_backend_ops fake_old_ops = {
    .abi = SN_BACKEND_ABI - 1, .kind = "fake", .device_free = fake_free};

static shardnet_status fake_discover(sn_device_list *list,
                                     const sn_discover_args *args)
{
    sn_device *dev = calloc(1, sizeof *dev);
    shardnet_status st;
    cr_assert(dev);
    cr_assert_eq(args->node_size, 1);
    fake_discovered++;
    dev->ops = &fake_ops;
    snprintf(dev->info.name, sizeof dev->info.name, "fake:0");
    if ((st = sn_device_list_push(list, dev)) != SHARDNET_OK) {
        fake_free(dev);
        return st;
    }
    return fake_fail ? sn_error(SHARDNET_DEVICE_ERROR, "fake failure")
                     : SHARDNET_OK;
}

Test(registry, a_backend_of_another_interface_is_refused)
{
    const sn_backend old = {.abi = SN_BACKEND_ABI + 1, .kind = "fake",
                            .discover = fake_discover};
    const sn_discover_args args = {.node_rank = 0, .node_size = 1};
    sn_device_list list = {0};
    char want[128];
    cr_assert_eq(sn_backend_discover(&old, &list, &args), SHARDNET_INTERNAL);
    snprintf(want, sizeof want,
             "backend 'fake' states backend interface %u, this library has "
             "%u",
             SN_BACKEND_ABI + 1, SN_BACKEND_ABI);
    cr_assert(strstr(shardnet_last_error(), want), "%s",
              shardnet_last_error());
    cr_assert_eq(fake_discovered, 0, "its discovery ran");
    cr_assert_eq(list.count, 0);
}

Test(registry, a_device_of_another_interface_is_refused)
{
    sn_device dev = {.ops = &fake_old_ops, .info = {.name = "fake:0"}};
    sn_device_list list = {0};
    cr_assert_eq(sn_device_list_push(&list, &dev), SHARDNET_INTERNAL);
    cr_assert(strstr(shardnet_last_error(), "states backend interface"), "%s",
              shardnet_last_error());
    cr_assert_eq(list.count, 0);
}

Test(registry, a_backend_of_this_interface_lists_its_devices)
{
    const sn_backend fake = {.abi = SN_BACKEND_ABI, .kind = "fake",
                             .discover = fake_discover};
    const sn_discover_args args = {.node_rank = 0, .node_size = 1};
    sn_device_list list = {0};
    cr_assert_eq(sn_backend_discover(&fake, &list, &args), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(list.count, 1);
    cr_assert_str_eq(list.items[0]->info.name, "fake:0");
    sn_device_list_free(&list);
    cr_assert_eq(fake_freed, 1);
    cr_assert_null(list.items);
}

Test(registry, a_failed_discovery_leaves_the_list_as_it_was)
{
    const sn_backend fake = {.abi = SN_BACKEND_ABI, .kind = "fake",
                             .discover = fake_discover};
    const sn_discover_args args = {.node_rank = 0, .node_size = 1};
    sn_device_list list = {0};
    fake_fail = 1;
    cr_assert_eq(sn_backend_discover(&fake, &list, &args),
                 SHARDNET_DEVICE_ERROR);
    cr_assert(strstr(shardnet_last_error(), "discovering fake devices: fake "
                                            "failure"),
              "%s", shardnet_last_error());
    cr_assert_eq(list.count, 0);
    cr_assert_eq(fake_freed, 1, "the device it had listed was not freed");
    sn_device_list_free(&list);
}

/* A backend's staging memory (host_alloc): given memory, then none, which
 * falls back to plain memory, each freed by whoever gave it. */
static int staged_given, staged_freed, staged_refuse;

static void *staged_alloc(sn_device *dev, size_t bytes)
{
    (void)dev;
    if (staged_refuse)
        return NULL;
    staged_given++;
    return aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
}

static void staged_free(sn_device *dev, void *ptr)
{
    (void)dev;
    staged_freed++;
    free(ptr);
}

Test(registry, staging_memory_is_the_backends_else_plain)
{
    static const sn_backend_ops staged_ops = {
        .abi = SN_BACKEND_ABI, .kind = "fake", .device_free = fake_free,
        .host_alloc = staged_alloc, .host_free = staged_free};
    sn_device dev = {.ops = &staged_ops, .info = {.name = "fake:0"}};
    for (staged_refuse = 0; staged_refuse < 2; staged_refuse++) {
        float *p = sn_staging_alloc(&dev, 1000 * sizeof *p);
        cr_assert_not_null(p);
        cr_assert_eq((uintptr_t)p % 64, 0);
        for (int i = 0; i < 1000; i++) /* all of it is writable */
            p[i] = (float)i;
        sn_staging_free(p);
        cr_assert_eq(staged_given, 1);
        cr_assert_eq(staged_freed, 1, "given %d, freed %d (refusing: %d)",
                     staged_given, staged_freed, staged_refuse);
    }
    /* No device, or one without: plain memory. */
    float *q = sn_staging_alloc(NULL, 0);
    cr_assert_not_null(q);
    sn_staging_free(q);
    sn_staging_free(NULL);
    cr_assert_eq(staged_freed, 1);
}

Test(registry, device_strings_name_the_registry_kinds)
{
    char kinds[64];
    sn_backend_kinds(kinds, sizeof kinds);
    cr_assert_str_eq(kinds, "cpu, cl, cuda");
    cr_assert(sn_backend_kind_known("cl:0", 2));
    cr_assert(!sn_backend_kind_known("c", 1));
    cr_assert(!sn_backend_kind_known("gpu", 3));
}

/* The device of this name, or NULL. */
static sn_device *named(const char *name)
{
    for (size_t i = 0; i < shardnet_device_count(ctx); i++)
        if (!strcmp(sn_context_device(ctx, i)->info.name, name))
            return sn_context_device(ctx, i);
    return NULL;
}

/* What devices share, as discovery tells it: PoCL's devices compute on
 * the host's cores (with the CPU devices and with each other), the
 * simulated packages sit on one NUMA node (memory); and what running
 * them at once costs, measured: a share of each one's speed, all of it
 * for a device that shares nothing. */
Test(devices, sharing_is_found_and_its_cost_measured)
{
    sn_device *c0 = named("cpu:0"), *c1 = named("cpu:1"), *l0 = named("cl:0"),
              *l1 = named("cl:1");
    if (!c0 || !l0)
        cr_skip_test("needs cpu:0 and cl:0 (a CPU OpenCL device)");
    cr_assert(l0->host_cores, "%s (%s) is not found computing on the host's "
              "cores", l0->info.name, l0->info.model);
    cr_assert_eq(sn_devices_sharing(c0, l0), SN_SHARES_CORES);
    cr_assert_eq(sn_devices_sharing(l0, c0), SN_SHARES_CORES);
    cr_assert_eq(sn_devices_sharing(c0, c0), SN_SHARES_NOTHING);
    if (l1)
        cr_assert_eq(sn_devices_sharing(l0, l1), SN_SHARES_CORES);
    if (c1)
        cr_assert_eq(sn_devices_sharing(c0, c1),
                     c0->info.numa_node >= 0 &&
                             c0->info.numa_node == c1->info.numa_node
                         ? SN_SHARES_MEMORY
                         : SN_SHARES_NOTHING);
    sn_device *pair[] = {c0, l0};
    double keep[2] = {0}, alone = 0;
    char report[512] = "";
    size_t len = 0;
    cr_assert_eq(sn_devices_contention(pair, 2, 1, keep, report, sizeof report,
                                       &len),
                 SHARDNET_OK, "%s", shardnet_last_error());
    for (int i = 0; i < 2; i++)
        cr_assert(keep[i] > 0 && keep[i] <= 1, "%s keeps %g",
                  pair[i]->info.name, keep[i]);
    cr_assert(strstr(report, "sharing: cpu:0 and cl:0 share cores;"), "%s",
              report);
    cr_assert(strstr(report, "measured at once: cpu:0 keeps "), "%s", report);
    cr_assert_eq(sn_devices_contention(pair, 1, 1, &alone, NULL, 0, NULL),
                 SHARDNET_OK);
    cr_assert_eq(alone, 1.0, "one device alone keeps %g", alone);
}
