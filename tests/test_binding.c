/*
 * The calling thread gets its own placement back: after a one-device run,
 * a layer split, a tensor split (whose caller drives cpu:0 for the run)
 * and an automatic plan (whose cost model times the nodes on the caller),
 * the caller is bound where it was, its memory policy, OpenMP team size
 * and dynamic adjustment are what they were, and its own OpenMP team's
 * threads are bound where they were - on a package of several cores, where
 * a CPU device pins a team of several threads.
 *
 * The topology is the environment's when its cpu:0 has two cores or more
 * (this machine as it is, or make check's multi-core simulation); else
 * two simulated packages of two cores and a NUMA node each, the first on
 * this machine's PUs 0 and 1 (and memory node 0).
 */
#include <config.h>

#include <criterion/criterion.h>
#include <hwloc.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardnet.h"
#include "topology_cores.h"

static hwloc_topology_t topo;
static shardnet_context_t *ctx;
static shardnet_model_t *model;
static shardnet_tensor input;
static char second[16]; /* the split's other device */


static void setup(void)
{
    char path[4096];
    const char *src = getenv("SHARDNET_SRCDIR");
    shardnet_device_info info;
    if (!first_package_has_cores()) {
        setenv("HWLOC_SYNTHETIC", "pack:2 numa:1 core:2 pu:1", 1);
        setenv("HWLOC_THISSYSTEM", "1", 1);
    }
    /* Before the first context, which reads them once: no cap on the
     * threads, and a job's processes on this machine as the tests say. */
    unsetenv("SHARDNET_CPU_THREADS");
    unsetenv("SHARDNET_MPI");
    cr_assert_eq(hwloc_topology_init(&topo), 0);
    cr_assert_eq(hwloc_topology_load(topo), 0);
    cr_assert_eq(shardnet_context_create(&ctx), SHARDNET_OK, "%s",
                 shardnet_last_error());
    snprintf(path, sizeof path, "%s/tests/fixtures/fashion_mlp.onnx",
             src ? src : ".");
    cr_assert_eq(shardnet_model_load(path, &model), SHARDNET_OK, "%s",
                 shardnet_last_error());
    snprintf(path, sizeof path, "%s/tests/fixtures/fashion_mlp_input.npy",
             src ? src : ".");
    cr_assert_eq(shardnet_tensor_load(path, &input), SHARDNET_OK, "%s",
                 shardnet_last_error());
    second[0] = '\0';
    for (size_t i = 1; i < shardnet_device_count(ctx) && !second[0]; i++)
        if (shardnet_device_get_info(ctx, i, &info) == SHARDNET_OK)
            snprintf(second, sizeof second, "%s", info.name);
}

static void teardown(void)
{
    shardnet_tensor_free(&input);
    shardnet_model_free(model);
    shardnet_context_free(ctx);
    hwloc_topology_destroy(topo);
}

TestSuite(binding, .init = setup, .fini = teardown, .timeout = 300);

/* The caller's placement, and its OpenMP team's. */
typedef struct placement {
    hwloc_bitmap_t cpus;
    hwloc_bitmap_t team[2]; /* each thread of a team of two */
    hwloc_bitmap_t nodes;
    hwloc_membind_policy_t policy;
    int membind_known;
    int threads, dynamic;
} placement;

static void take(placement *p)
{
    p->cpus = hwloc_bitmap_alloc();
    p->nodes = hwloc_bitmap_alloc();
    cr_assert_eq(hwloc_get_cpubind(topo, p->cpus, HWLOC_CPUBIND_THREAD), 0);
    p->membind_known =
        hwloc_get_membind(topo, p->nodes, &p->policy,
                          HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET) == 0;
    p->threads = omp_get_max_threads();
    p->dynamic = omp_get_dynamic();
    p->team[0] = hwloc_bitmap_alloc();
    p->team[1] = hwloc_bitmap_alloc();
    /* Not dynamic for this region: two threads, each reporting. */
    int dyn = omp_get_dynamic();
    omp_set_dynamic(0);
#pragma omp parallel num_threads(2)
    {
        int t = omp_get_thread_num();
        if (t < 2)
            hwloc_get_cpubind(topo, p->team[t], HWLOC_CPUBIND_THREAD);
    }
    omp_set_dynamic(dyn);
}

static void drop(placement *p)
{
    hwloc_bitmap_free(p->cpus);
    hwloc_bitmap_free(p->nodes);
    hwloc_bitmap_free(p->team[0]);
    hwloc_bitmap_free(p->team[1]);
}

static void same(const placement *was, const placement *now, const char *what)
{
    char *a = NULL, *b = NULL;
    hwloc_bitmap_list_asprintf(&a, was->cpus);
    hwloc_bitmap_list_asprintf(&b, now->cpus);
    cr_expect(hwloc_bitmap_isequal(was->cpus, now->cpus),
              "%s: the caller was bound to PUs %s, is bound to %s", what, a, b);
    free(a);
    free(b);
    for (int t = 0; t < 2; t++) {
        hwloc_bitmap_list_asprintf(&a, was->team[t]);
        hwloc_bitmap_list_asprintf(&b, now->team[t]);
        cr_expect(hwloc_bitmap_isequal(was->team[t], now->team[t]),
                  "%s: the caller's OpenMP thread %d was bound to PUs %s, is "
                  "bound to %s",
                  what, t, a, b);
        free(a);
        free(b);
    }
    cr_expect_eq(now->threads, was->threads,
                 "%s: the caller's team size was %d, is %d", what, was->threads,
                 now->threads);
    cr_expect_eq(now->dynamic, was->dynamic,
                 "%s: the caller's dynamic adjustment was %d, is %d", what,
                 was->dynamic, now->dynamic);
    if (was->membind_known && now->membind_known) {
        cr_expect_eq(now->policy, was->policy,
                     "%s: the caller's memory policy was %d, is %d", what,
                     (int)was->policy, (int)now->policy);
        cr_expect(hwloc_bitmap_isequal(was->nodes, now->nodes),
                  "%s: the caller's memory nodes changed", what);
    }
}

/* Bind the caller to the last PU of cpu:0's package and its second
 * OpenMP thread to the whole package: bindings that no device gives them
 * (a device binds its first thread to its first core, the second to the
 * second core); a team size and dynamic adjustment of their own. */
static void place_caller(void)
{
    hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
    hwloc_bitmap_t one = hwloc_bitmap_alloc();
    int bound = 1;
    if (!pkg)
        pkg = hwloc_get_root_obj(topo);
    hwloc_bitmap_only(one, (unsigned)hwloc_bitmap_last(pkg->cpuset));
    cr_assert_eq(hwloc_set_cpubind(topo, one, HWLOC_CPUBIND_THREAD), 0,
                 "cannot bind the test's thread to PU %d",
                 hwloc_bitmap_last(pkg->cpuset));
    hwloc_bitmap_free(one);
    omp_set_dynamic(0);
#pragma omp parallel num_threads(2)
    if (omp_get_thread_num() == 1)
        bound = hwloc_set_cpubind(topo, pkg->cpuset, HWLOC_CPUBIND_THREAD) == 0;
    cr_assert(bound, "cannot bind the test's second OpenMP thread");
    omp_set_num_threads(3);
    omp_set_dynamic(1);
}

static void run_once(const char *devices, const char *split)
{
    shardnet_session_options o = {.split = split};
    shardnet_session_t *s = NULL;
    cr_assert_eq(shardnet_session_create_with(ctx, model, devices, &o, &s),
                 SHARDNET_OK, "%s on %s: %s", split, devices,
                 shardnet_last_error());
    cr_assert_eq(shardnet_session_set_input(s, 0, input.info.dtype,
                                            input.info.rank, input.info.dims,
                                            input.data),
                 SHARDNET_OK);
    cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s on %s: %s", split,
                 devices, shardnet_last_error());
    if (!strcmp(split, "auto")) { /* the plan, measured, described */
        char text[8192];
        shardnet_session_describe(s, text, sizeof text);
    }
    shardnet_session_free(s);
}

static void check(const char *devices, const char *split)
{
    placement was, now;
    char what[96];
    place_caller();
    take(&was);
    run_once(devices, split);
    take(&now);
    snprintf(what, sizeof what, "split %s over %s", split, devices);
    same(&was, &now, what);
    drop(&was);
    drop(&now);
}

Test(binding, one_device_run_gives_the_caller_its_placement_back)
{
    check("cpu:0", "none");
}

Test(binding, layer_split_gives_the_caller_its_placement_back)
{
    char devices[40];
    if (!second[0])
        cr_skip_test("needs two devices; this machine has one");
    snprintf(devices, sizeof devices, "cpu:0,%s", second);
    check(devices, "layer");
}

Test(binding, tensor_split_gives_the_caller_its_placement_back)
{
    char devices[40];
    if (!second[0])
        cr_skip_test("needs two devices; this machine has one");
    snprintf(devices, sizeof devices, "cpu:0,%s", second);
    check(devices, "tensor");
}

Test(binding, automatic_plan_gives_the_caller_its_placement_back)
{
    char devices[40];
    if (!second[0])
        cr_skip_test("needs two devices; this machine has one");
    snprintf(devices, sizeof devices, "cpu:0,%s", second);
    check(devices, "auto");
}

/* cpu:0 of a context created by a process bound to `set`: its threads
 * (compute units) and PUs. */
static void cpu0_when_bound(hwloc_const_bitmap_t set, unsigned *units,
                            char *cpus, size_t cap)
{
    shardnet_context_t *c = NULL;
    shardnet_device_info info;
    if (set)
        cr_assert_eq(hwloc_set_cpubind(topo, set, HWLOC_CPUBIND_PROCESS), 0);
    cr_assert_eq(shardnet_context_create(&c), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(shardnet_device_get_info(c, 0, &info), SHARDNET_OK);
    cr_assert_str_eq(info.name, "cpu:0");
    *units = info.compute_units;
    snprintf(cpus, cap, "%s", info.cpuset);
    shardnet_context_free(c);
}

/* The first package's PUs, and its cores' count. */
static hwloc_obj_t first_package(int *cores)
{
    hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
    if (!pkg)
        pkg = hwloc_get_root_obj(topo);
    *cores = hwloc_get_nbobjs_inside_cpuset_by_type(topo, pkg->cpuset,
                                                    HWLOC_OBJ_CORE);
    return pkg;
}

/* mpirun's default binding of two processes: each on one core.  The
 * device keeps to it: one thread, that core's PUs. */
Test(binding, cpu_device_keeps_to_the_cores_its_process_is_bound_to)
{
    int cores;
    hwloc_obj_t pkg = first_package(&cores);
    hwloc_obj_t last = hwloc_get_obj_inside_cpuset_by_type(
        topo, pkg->cpuset, HWLOC_OBJ_CORE, (unsigned)cores - 1);
    unsigned units;
    char cpus[64], *want = NULL;
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    unsetenv("MPI_LOCALNRANKS");
    cr_assert_not_null(last);
    cpu0_when_bound(last->cpuset, &units, cpus, sizeof cpus);
    hwloc_bitmap_list_asprintf(&want, last->cpuset);
    cr_expect_eq(units, 1, "cpu:0 in a process bound to one core: %u threads",
                 units);
    cr_expect_str_eq(cpus, want, "cpu:0 in a process bound to PUs %s uses %s",
                     want, cpus);
    free(want);
}

/* Two processes of a job on this machine, free to run anywhere (mpirun
 * --bind-to none): the second takes the second half of the cores. */
Test(binding, unbound_processes_of_a_job_share_the_cores)
{
    int cores;
    hwloc_obj_t pkg = first_package(&cores);
    hwloc_bitmap_t mine = hwloc_bitmap_alloc();
    unsigned units;
    char cpus[64], *want = NULL;
    hwloc_get_cpubind(topo, mine, HWLOC_CPUBIND_PROCESS);
    if (!hwloc_bitmap_isincluded(hwloc_topology_get_allowed_cpuset(topo),
                                 mine)) {
        hwloc_bitmap_free(mine);
        cr_skip_test("the topology has PUs this process may not use "
                     "(simulated, or bound): cannot be unbound");
    }
    hwloc_bitmap_free(mine);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
    cpu0_when_bound(NULL, &units, cpus, sizeof cpus);
#ifdef SN_HAVE_MPI
    hwloc_bitmap_t half = hwloc_bitmap_alloc();
    for (int i = cores / 2; i < cores; i++)
        hwloc_bitmap_or(half, half,
                        hwloc_get_obj_inside_cpuset_by_type(
                            topo, pkg->cpuset, HWLOC_OBJ_CORE, (unsigned)i)
                            ->cpuset);
    hwloc_bitmap_list_asprintf(&want, half);
    hwloc_bitmap_free(half);
    cr_expect_eq(units, (unsigned)(cores - cores / 2),
                 "cpu:0 of local process 1 of 2 on %d cores: %u threads",
                 cores, units);
#else /* no job without MPI: the whole package */
    hwloc_bitmap_list_asprintf(&want, pkg->cpuset);
#endif
    cr_expect_str_eq(cpus, want, "cpu:0 of local process 1 of 2 uses PUs %s",
                     cpus);
    free(want);
}
