/*
 * Device partitions: some of a CPU device's cores as a device of their own
 * ("cpu:0[0-1]", "cpu:0/2", "cpu:0/2.1"), and an OpenCL CPU device's
 * sub-devices where its driver makes them.  Two sessions on the two halves
 * of one package run at once from two threads: both finish, both answer
 * as the whole package does, and each one's threads are bound to its own
 * cores, as the trace's binding events (read back from the system by the
 * CPU backend) say.
 *
 * The topology is the environment's when its cpu:0 has two cores or more
 * (this machine as it is, or make check's multi-core simulation); else
 * two simulated packages of two cores, the first on this machine's PUs 0
 * and 1, as in tests/test_binding.c.
 */
#include <config.h>

#include <criterion/criterion.h>
#include <hwloc.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shardnet.h"
#include "topology_cores.h"

static shardnet_context_t *ctx;


static void setup(void)
{
    if (!first_package_has_cores()) {
        setenv("HWLOC_SYNTHETIC", "pack:2 numa:1 core:2 pu:1", 1);
        setenv("HWLOC_THISSYSTEM", "1", 1);
    }
    unsetenv("SHARDNET_CPU_THREADS");
    unsetenv("SHARDNET_MPI");
    cr_assert_eq(shardnet_context_create(&ctx), SHARDNET_OK, "%s",
                 shardnet_last_error());
}

static void teardown(void)
{
    shardnet_context_free(ctx);
}

TestSuite(partitions, .init = setup, .fini = teardown, .timeout = 300);

static void fixture(const char *name, char *path, size_t cap)
{
    const char *src = getenv("SHARDNET_SRCDIR");
    snprintf(path, cap, "%s/tests/fixtures/%s", src ? src : ".", name);
}

/* The devices `spec` selects: n of them (at most 8) in idx. */
static size_t select_devices(const char *spec, size_t *idx)
{
    size_t n = 0;
    cr_assert_eq(shardnet_devices_select(ctx, spec, idx, 8, &n), SHARDNET_OK,
                 "%s: %s", spec, shardnet_last_error());
    return n;
}

static shardnet_device_info device(size_t index)
{
    shardnet_device_info info;
    cr_assert_eq(shardnet_device_get_info(ctx, index, &info), SHARDNET_OK);
    return info;
}

/* cpu:0's cores. */
static unsigned cpu0_cores(void)
{
    size_t idx[8];
    select_devices("cpu:0", idx);
    return device(idx[0]).compute_units;
}

Test(partitions, are_named_by_their_cores_whichever_way_they_are_asked_for)
{
    size_t halves[8], again[8], one[8], all[8], before, n;
    unsigned cores = cpu0_cores(), h = cores / 2;
    char spec[64], want[32];

    before = shardnet_device_count(ctx);
    cr_assert_eq(select_devices("cpu:0/2", halves), 2);
    cr_expect_eq(shardnet_device_count(ctx), before + 2,
                 "the two halves are two new devices of the context");
    shardnet_device_info a = device(halves[0]), b = device(halves[1]);
    snprintf(want, sizeof want, h == 1 ? "cpu:0[0]" : "cpu:0[0-%u]", h - 1);
    cr_expect_str_eq(a.name, want);
    cr_expect_eq(a.compute_units, h);
    cr_expect_eq(b.compute_units, cores - h);
    cr_expect_eq(a.kind, SHARDNET_DEVICE_CPU);
    cr_expect_eq(a.index, 0, "a partition keeps its package's number");
    {
        /* The halves' PUs: the package's, in two, the first half first. */
        size_t whole[8];
        hwloc_bitmap_t pa = hwloc_bitmap_alloc(), pb = hwloc_bitmap_alloc(),
                       pw = hwloc_bitmap_alloc(), both = hwloc_bitmap_alloc();
        select_devices("cpu:0", whole);
        cr_assert_eq(hwloc_bitmap_list_sscanf(pa, a.cpuset), 0);
        cr_assert_eq(hwloc_bitmap_list_sscanf(pb, b.cpuset), 0);
        cr_assert_eq(hwloc_bitmap_list_sscanf(pw, device(whole[0]).cpuset), 0);
        hwloc_bitmap_or(both, pa, pb);
        cr_expect(!hwloc_bitmap_intersects(pa, pb),
                  "the halves share PUs: %s and %s", a.cpuset, b.cpuset);
        cr_expect(hwloc_bitmap_isequal(both, pw),
                  "the halves' PUs %s and %s are not cpu:0's %s", a.cpuset,
                  b.cpuset, device(whole[0]).cpuset);
        cr_expect_lt(hwloc_bitmap_last(pa), hwloc_bitmap_first(pb),
                     "the first half (PUs %s) comes after the second (%s)",
                     a.cpuset, b.cpuset);
        hwloc_bitmap_free(pa);
        hwloc_bitmap_free(pb);
        hwloc_bitmap_free(pw);
        hwloc_bitmap_free(both);
    }

    /* The same cores, named another way, are the same device. */
    snprintf(spec, sizeof spec, "cpu:0/2.1, %s", a.name);
    cr_assert_eq(select_devices(spec, again), 2);
    cr_expect_eq(again[0], halves[1]);
    cr_expect_eq(again[1], halves[0]);
    cr_expect_eq(shardnet_device_count(ctx), before + 2);
    snprintf(spec, sizeof spec, "cpu:0[%u]", cores - 1);
    cr_assert_eq(select_devices(spec, one), 1);
    cr_expect_eq(device(one[0]).compute_units, 1);
    cr_expect_str_eq(device(one[0]).name, spec);

    /* "all" and kinds are the devices discovery found. */
    n = select_devices("all", all);
    for (size_t i = 0; i < n; i++)
        cr_expect(strchr(device(all[i]).name, '[') == NULL,
                  "'all' selects partition %s", device(all[i]).name);
}

/* A bad device list: refused with SHARDNET_NO_DEVICE (or UNSUPPORTED) and
 * a message that has `says` in it. */
static void refused(const char *spec, const char *says)
{
    size_t idx[8], n = 0;
    shardnet_status st = shardnet_devices_select(ctx, spec, idx, 8, &n);
    cr_expect(st == SHARDNET_NO_DEVICE || st == SHARDNET_UNSUPPORTED,
              "'%s' is refused (status %d)", spec, (int)st);
    cr_expect(strstr(shardnet_last_error(), says) != NULL,
              "'%s': the message says '%s': %s", spec, says,
              shardnet_last_error());
}

Test(partitions, bad_notation_is_refused_saying_what_and_why)
{
    unsigned cores = cpu0_cores();
    char spec[64], says[96];

    snprintf(spec, sizeof spec, "cpu:0[0-%u]", cores);
    snprintf(says, sizeof says, "cpu:0 has %u cores (0 to %u), no core %u",
             cores, cores - 1, cores);
    refused(spec, says);
    refused("cpu:0[1-0]", "an empty range of cpu:0's cores");
    snprintf(spec, sizeof spec, "cpu:0/%u", cores + 1);
    refused(spec, "cannot be cut into");
    refused("cpu:0/0", "cannot be cut into 0 parts");
    refused("cpu:0/2.2", "no part 2 of 2");
    refused("cpu:0[a]", "expected cores as [A] or [A-B]");
    refused("cpu:0[0", "expected cores as [A] or [A-B]");
    refused("cpu:0/2.", "expected a count of parts");
    refused("cpu:0(0)", "then nothing or a partition");
    refused("cpu:9[0]", "no device 'cpu:9'");
    /* Overlaps within one list: a device and its part, two parts. */
    refused("cpu:0,cpu:0/2.0", "cpu:0 and cpu:0[0");
    snprintf(spec, sizeof spec, "cpu:0[0-%u],cpu:0/2.1", cores - 1);
    if (cores - cores / 2 == 1)
        snprintf(says, sizeof says, "overlap (both have core %u of cpu:0)",
                 cores / 2);
    else
        snprintf(says, sizeof says,
                 "overlap (both have cores %u to %u of cpu:0)", cores / 2,
                 cores - 1);
    refused(spec, says);
    if (cores >= 3)
        refused("cpu:0[0-1],cpu:0[1-2]", "overlap (both have core 1 of cpu:0)");
}

/* One thread's session: a model on a device, its input, and what it got. */
typedef struct job {
    const char *model, *input;
    char device[32];
    pthread_barrier_t *start;
    int runs;
    float *out; /* the last run's output */
    size_t count;
    char error[512];
} job;

/* Run j's model on j's device, j->runs times; the output of the last, or
 * the first failure in j->error. */
static void *run_job(void *arg)
{
    job *j = arg;
    char path[4096];
    shardnet_model_t *m = NULL;
    shardnet_session_t *s = NULL;
    shardnet_tensor x = {0};
    shardnet_tensor_info info;
    const void *data;
    int rc = 0;

    fixture(j->model, path, sizeof path);
    if (shardnet_model_load(path, &m) != SHARDNET_OK)
        goto failed;
    fixture(j->input, path, sizeof path);
    if (shardnet_tensor_load(path, &x) != SHARDNET_OK ||
        shardnet_session_create(ctx, m, j->device, &s) != SHARDNET_OK ||
        shardnet_session_set_input(s, 0, x.info.dtype, x.info.rank,
                                   x.info.dims, x.data) != SHARDNET_OK)
        goto failed;
    if (j->start)
        pthread_barrier_wait(j->start);
    for (int r = 0; r < j->runs && !rc; r++)
        rc = shardnet_session_run(s) != SHARDNET_OK;
    if (rc || shardnet_session_output(s, 0, &info, &data) != SHARDNET_OK)
        goto failed;
    j->count = 1;
    for (int d = 0; d < info.rank; d++)
        j->count *= (size_t)info.dims[d];
    if ((j->out = malloc(j->count * sizeof *j->out)))
        memcpy(j->out, data, j->count * sizeof *j->out);
    goto out;
failed:
    snprintf(j->error, sizeof j->error, "%s on %s: %s", j->model, j->device,
             shardnet_last_error());
    if (j->start && !s) /* never reached the barrier */
        pthread_barrier_wait(j->start);
out:
    shardnet_session_free(s);
    shardnet_tensor_free(&x);
    shardnet_model_free(m);
    return NULL;
}

/* The trace's binding events on `device`'s track: each thread's PUs and
 * the PU it was on must be among `cpus`; how many there were. */
static int bound_within(const char *trace, const char *device,
                        const char *cpus)
{
    FILE *f = fopen(trace, "r");
    char line[512], name[64];
    int track = -1, events = 0, tid;
    hwloc_bitmap_t want = hwloc_bitmap_alloc(), got = hwloc_bitmap_alloc();
    cr_assert_not_null(f);
    cr_assert_eq(hwloc_bitmap_list_sscanf(want, cpus), 0);
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "\"thread_name\"") &&
            sscanf(line, "{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":"
                         "\"thread_name\",\"args\":{\"name\":\"%63[^\"]",
                   &tid, name) == 2 &&
            !strcmp(name, device))
            track = tid;
    }
    rewind(f);
    while (fgets(line, sizeof line, f)) {
        char pus[64];
        unsigned t;
        int on;
        const char *at = strstr(line, "\"name\":\"team thread ");
        if (!strstr(line, "\"cat\":\"bind\"") ||
            sscanf(line, "{\"ph\":\"X\",\"pid\":1,\"tid\":%d,", &tid) != 1 ||
            tid != track || !at)
            continue;
        cr_assert_eq(sscanf(at, "\"name\":\"team thread %u bound to PUs "
                                "%63[^,], on PU %d",
                            &t, pus, &on),
                     3, "a binding event of %s: %s", device, line);
        cr_assert_eq(hwloc_bitmap_list_sscanf(got, pus), 0);
        cr_expect(hwloc_bitmap_isincluded(got, want),
                  "%s's team thread %u is bound to PUs %s, outside its "
                  "cores' PUs %s",
                  device, t, pus, cpus);
        cr_expect(on >= 0 && hwloc_bitmap_isset(want, (unsigned)on),
                  "%s's team thread %u ran on PU %d, outside its PUs %s",
                  device, t, on, cpus);
        events++;
    }
    fclose(f);
    hwloc_bitmap_free(want);
    hwloc_bitmap_free(got);
    return events;
}

/* Can this machine bind a thread to every PU of cpus? */
static int bindable(const char *cpus)
{
    hwloc_topology_t t;
    hwloc_bitmap_t set = hwloc_bitmap_alloc(), was = hwloc_bitmap_alloc();
    int ok = 0;
    if (hwloc_topology_init(&t) == 0 && hwloc_topology_load(t) == 0 &&
        hwloc_bitmap_list_sscanf(set, cpus) == 0 &&
        hwloc_get_cpubind(t, was, HWLOC_CPUBIND_THREAD) == 0) {
        ok = 1;
        for (int pu = hwloc_bitmap_first(set); pu >= 0 && ok;
             pu = hwloc_bitmap_next(set, pu)) {
            hwloc_bitmap_t one = hwloc_bitmap_alloc();
            hwloc_bitmap_only(one, (unsigned)pu);
            ok = hwloc_set_cpubind(t, one, HWLOC_CPUBIND_THREAD) == 0;
            hwloc_bitmap_free(one);
        }
        hwloc_set_cpubind(t, was, HWLOC_CPUBIND_THREAD);
    }
    hwloc_topology_destroy(t);
    hwloc_bitmap_free(set);
    hwloc_bitmap_free(was);
    return ok;
}

static void same_output(const job *j, const job *ref)
{
    cr_assert_eq(j->count, ref->count, "%s: %zu values on %s, %zu on %s",
                 j->model, j->count, j->device, ref->count, ref->device);
    for (size_t i = 0; i < j->count; i++)
        cr_assert(fabsf(j->out[i] - ref->out[i]) <=
                      1e-5f * (1 + fabsf(ref->out[i])),
                  "%s: value %zu is %g on %s, %g on %s", j->model, i,
                  (double)j->out[i], j->device, (double)ref->out[i],
                  ref->device);
}

Test(partitions, two_sessions_on_two_halves_run_at_once_on_their_own_cores)
{
    size_t halves[8];
    shardnet_device_info half[2];
    pthread_barrier_t start;
    pthread_t th[2];
    char trace[64];
    job ref[2] = {{.model = "fashion_mlp.onnx",
                   .input = "fashion_mlp_input.npy",
                   .device = "cpu:0",
                   .runs = 1},
                  {.model = "small_cnn.onnx",
                   .input = "small_cnn_input.npy",
                   .device = "cpu:0",
                   .runs = 1}};
    job on[2];

    cr_assert_eq(select_devices("cpu:0/2", halves), 2);
    for (int i = 0; i < 2; i++) {
        half[i] = device(halves[i]);
        if (!bindable(half[i].cpuset))
            cr_skip_test("this machine cannot bind a thread to PUs %s "
                         "(%s's): a simulated package beyond its PUs",
                         half[i].cpuset, half[i].name);
    }
    /* The references: each model alone on the whole package. */
    for (int i = 0; i < 2; i++) {
        run_job(&ref[i]);
        cr_assert(!ref[i].error[0], "%s", ref[i].error);
    }

    /* Both at once, each on its half, traced. */
    cr_assert_eq(pthread_barrier_init(&start, NULL, 2), 0);
    for (int i = 0; i < 2; i++) {
        on[i] = ref[i];
        on[i].out = NULL;
        on[i].runs = 20;
        on[i].start = &start;
        snprintf(on[i].device, sizeof on[i].device, "cpu:0/2.%d", i);
    }
    cr_assert_eq(shardnet_trace_start(), SHARDNET_OK);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, run_job, &on[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    snprintf(trace, sizeof trace, "/tmp/sn-partitions-%ld.json",
             (long)getpid());
    cr_assert_eq(shardnet_trace_stop(trace), SHARDNET_OK, "%s",
                 shardnet_last_error());
    pthread_barrier_destroy(&start);

    for (int i = 0; i < 2; i++) {
        cr_assert(!on[i].error[0], "%s", on[i].error);
        same_output(&on[i], &ref[i]);
        int events = bound_within(trace, half[i].name, half[i].cpuset);
        cr_expect_geq(events, (int)half[i].compute_units,
                      "%s: %d binding events for %u cores: its threads were "
                      "not pinned",
                      half[i].name, events, half[i].compute_units);
    }
    unlink(trace);
    for (int i = 0; i < 2; i++) {
        free(ref[i].out);
        free(on[i].out);
    }
}

/* An OpenCL CPU device's sub-device (device fission), where the driver
 * makes one: a device of one compute unit that runs a model as its whole
 * device does. */
Test(partitions, opencl_cpu_device_is_cut_by_device_fission)
{
    size_t idx[8], n = 0;
    job ref = {.model = "fashion_mlp.onnx",
               .input = "fashion_mlp_input.npy",
               .device = "cl:0",
               .runs = 1},
        sub = ref;
    if (shardnet_devices_select(ctx, "cl:0", idx, 8, &n) != SHARDNET_OK)
        cr_skip_test("no OpenCL device");
    shardnet_status st = shardnet_devices_select(ctx, "cl:0[0]", idx, 8, &n);
    if (st == SHARDNET_UNSUPPORTED)
        cr_skip_test("%s", shardnet_last_error());
    cr_assert_eq(st, SHARDNET_OK, "%s", shardnet_last_error());
    cr_expect_str_eq(device(idx[0]).name, "cl:0[0]");
    cr_expect_eq(device(idx[0]).compute_units, 1);
    snprintf(sub.device, sizeof sub.device, "cl:0[0]");
    run_job(&ref);
    cr_assert(!ref.error[0], "%s", ref.error);
    run_job(&sub);
    cr_assert(!sub.error[0], "%s", sub.error);
    same_output(&sub, &ref);
    free(ref.out);
    free(sub.out);
}
