/*
 * The CPU backend: one device per CPU package (socket) found by hwloc.
 *
 * Each device owns a worker thread, bound to its package's cores with its
 * memory policy bound to the package's NUMA node.  The worker is the device's
 * in-order queue: kernels are enqueued as tasks and run there, one after the
 * other, so two CPU devices compute at once just as two OpenCL queues do.
 * The worker is also the master of an OpenMP team of one thread per core of
 * the package; each team thread is pinned to its own core once, when the
 * worker starts, and libgomp keeps reusing that team (same master, same
 * size) for every parallel region the kernels in cpu/ open.  OpenBLAS runs
 * single-threaded inside that team (see cpu/gemm.c), so the process never
 * has more busy threads than cores, however many CPU devices work at once.
 *
 * A device uses the cores of its package that this process may run on: a
 * process bound by its launcher (mpirun binds each of two processes to a
 * core) keeps to its cores, and its team is as big as they are.  A process
 * free to run anywhere that shares the machine with other processes of its
 * job (mpirun --bind-to none) takes its even share of each package's cores,
 * by its rank on the machine (sn_discover_args: the context, which knows
 * the job, passes it), so that two processes opening the same package do
 * not pin their teams onto the same cores.  A process bound
 * outside a package (a simulated package, or one its launcher gave to
 * another process) uses the whole package where the system lets it bind
 * there; where it cannot (a simulated topology with more PUs than the
 * machine) the device warns once and its threads run unbound: slower,
 * never wrong.
 *
 * A partition (cpu_partition) is some of a device's cores made a device
 * of its own: a worker, teams pinned to those cores only, the package's
 * memory.  The whole device and its partitions are devices side by side;
 * the device list that names them (lib/api) keeps any two it selects off
 * each other's cores.
 *
 * Buffers are allocated bound to the package's NUMA node (falling back to
 * plain aligned memory where the OS cannot bind, e.g. on a simulated
 * topology); they are host memory, so mapping is zero-copy.
 *
 * This file finds the devices and holds the ops table; the queue and the
 * driving thread are in queue.c, the tasks in tasks.c, the buffers in
 * buffer.c (cpu.h lists them).
 */
#include <config.h>

#include <hwloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cpu.h"
#include "core/error.h"

/* The topology, shared by every CPU device of the process. */
static struct {
    pthread_mutex_t lock;
    hwloc_topology_t topo;
    unsigned refs;
} shared_topo = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};

static const sn_backend_ops cpu_ops;

static void release_topology(void)
{
    pthread_mutex_lock(&shared_topo.lock);
    if (shared_topo.refs && --shared_topo.refs == 0) {
        hwloc_topology_destroy(shared_topo.topo);
        shared_topo.topo = NULL;
    }
    pthread_mutex_unlock(&shared_topo.lock);
}

static void cpu_device_free(sn_device *dev)
{
    cpu_device *cd = dev->impl;
    if (cd) {
        if (cd->worker_started) {
            pthread_mutex_lock(&cd->lock);
            cd->quit = 1;
            pthread_cond_signal(&cd->wake);
            pthread_mutex_unlock(&cd->lock);
            pthread_join(cd->worker, NULL);
        }
        pthread_mutex_destroy(&cd->lock);
        pthread_cond_destroy(&cd->wake);
        pthread_cond_destroy(&cd->idle);
        free(cd->ring);
        sn_cpu_drop_packed(cd, NULL);
        pthread_mutex_destroy(&cd->pack_lock);
        for (unsigned i = 0; i < cd->ncores; i++)
            hwloc_bitmap_free(cd->cores[i]);
        free(cd->cores);
        hwloc_bitmap_free(cd->cpuset);
        hwloc_bitmap_free(cd->nodeset);
        free(cd);
        release_topology();
    }
    free(dev);
}

static shardnet_status acquire_topology(hwloc_topology_t *out)
{
    shardnet_status st = SHARDNET_OK;
    pthread_mutex_lock(&shared_topo.lock);
    if (!shared_topo.topo) {
        hwloc_topology_t topo;
        if (hwloc_topology_init(&topo) < 0) {
            st = sn_error(SHARDNET_DEVICE_ERROR, "hwloc: cannot initialise");
            goto out;
        }
        /* No I/O discovery: hwloc's OpenCL/CUDA plugins would re-enter the
         * ICD loader behind the OpenCL backend's back. */
        hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
        if (hwloc_topology_load(topo) < 0) {
            hwloc_topology_destroy(topo);
            st = sn_error(SHARDNET_DEVICE_ERROR,
                          "hwloc: cannot load the topology (HWLOC_SYNTHETIC "
                          "or HWLOC_XMLFILE may be malformed)");
            goto out;
        }
        shared_topo.topo = topo;
    }
    shared_topo.refs++;
    *out = shared_topo.topo;
out:
    pthread_mutex_unlock(&shared_topo.lock);
    return st;
}

/* Copy the first two words of OpenBLAS's configuration ("OpenBLAS 0.3.21"). */
static void blas_version(char *out, size_t cap)
{
    extern char *openblas_get_config(void);
    const char *cfg = openblas_get_config();
    size_t n = 0;
    int spaces = 0;
    while (cfg && cfg[n] && n + 1 < cap) {
        if (cfg[n] == ' ' && ++spaces == 2)
            break;
        n++;
    }
    memcpy(out, cfg ? cfg : "", n);
    out[n] = '\0';
}

static const char *obj_info(hwloc_topology_t topo, hwloc_obj_t pkg,
                            const char *name)
{
    const char *v = hwloc_obj_get_info_by_name(pkg, name);
    if (!v)
        v = hwloc_obj_get_info_by_name(hwloc_get_root_obj(topo), name);
    return v;
}

/* A simulated topology (HWLOC_SYNTHETIC) carries no CPU model: ask Linux. */
static void cpuinfo_field(const char *key, char *out, size_t cap)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    size_t klen = strlen(key);
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, key, klen) || !colon)
            continue;
        colon += 1 + (colon[1] == ' ');
        colon[strcspn(colon, "\n")] = '\0';
        snprintf(out, cap, "%s", colon);
        break;
    }
    fclose(f);
}

/* The cores (or, without a core level, PUs) of `pkg` that meet `use`, each
 * restricted to `use`: cores[0..*n) (malloc'ed). */
static shardnet_status usable_cores(hwloc_topology_t topo, hwloc_obj_t pkg,
                                    hwloc_const_cpuset_t use,
                                    hwloc_cpuset_t **cores, unsigned *n)
{
    hwloc_obj_type_t type = HWLOC_OBJ_CORE;
    int total = hwloc_get_nbobjs_inside_cpuset_by_type(topo, pkg->cpuset, type);
    if (total <= 0) {
        type = HWLOC_OBJ_PU;
        total = hwloc_get_nbobjs_inside_cpuset_by_type(topo, pkg->cpuset, type);
    }
    *n = 0;
    *cores = calloc(total > 0 ? (size_t)total : 1, sizeof **cores);
    if (!*cores)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "cpu device");
    for (int i = 0; i < total; i++) {
        hwloc_obj_t core = hwloc_get_obj_inside_cpuset_by_type(
            topo, pkg->cpuset, type, (unsigned)i);
        if (!core || !hwloc_bitmap_intersects(core->cpuset, use))
            continue;
        if (!((*cores)[*n] = hwloc_bitmap_alloc()))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "cpu device");
        hwloc_bitmap_and((*cores)[(*n)++], core->cpuset, use);
    }
    if (*n == 0) { /* no core object: the whole set is one */
        if (!((*cores)[0] = hwloc_bitmap_dup(use)))
            return sn_error(SHARDNET_OUT_OF_MEMORY, "cpu device");
        *n = 1;
    }
    return SHARDNET_OK;
}

/* A device's state, its locks made and nothing else yet, holding a
 * reference to topo (the caller's, which cpu_device_free releases from
 * here on, with everything the device comes to own). */
static shardnet_status device_new(hwloc_topology_t topo, sn_device **out)
{
    sn_device *dev = calloc(1, sizeof *dev);
    cpu_device *cd = calloc(1, sizeof *cd);
    *out = NULL;
    if (!dev || !cd) {
        free(dev);
        free(cd);
        release_topology();
        return sn_error(SHARDNET_OUT_OF_MEMORY, "cpu device");
    }
    dev->ops = &cpu_ops;
    dev->impl = cd;
    cd->topo = topo;
    pthread_mutex_init(&cd->lock, NULL);
    pthread_mutex_init(&cd->pack_lock, NULL);
    pthread_cond_init(&cd->wake, NULL);
    pthread_cond_init(&cd->idle, NULL);
    atomic_init(&cd->pending, 0);
    atomic_init(&cd->bind_warned, 0);
    *out = dev;
    return SHARDNET_OK;
}

/* A device whose cores, nodeset and info (but its units and CPUs) are
 * set: its cpuset, the system's binding support, its worker. */
static shardnet_status device_start(sn_device *dev)
{
    cpu_device *cd = dev->impl;
    shardnet_device_info *info = &dev->info;
    char *list_str = NULL;
    hwloc_bitmap_zero(cd->cpuset);
    for (unsigned i = 0; i < cd->ncores; i++)
        hwloc_bitmap_or(cd->cpuset, cd->cpuset, cd->cores[i]);
    info->compute_units = cd->ncores;
    if (hwloc_bitmap_list_asprintf(&list_str, cd->cpuset) >= 0 && list_str) {
        snprintf(info->cpuset, sizeof info->cpuset, "%s", list_str);
        free(list_str);
    }
    snprintf(cd->name, sizeof cd->name, "%s", info->name);

    /* Can this system bind memory?  (Not with every simulated topology.) */
    {
        const struct hwloc_topology_support *sup =
            hwloc_topology_get_support(cd->topo);
        cd->membind_ok = sup->membind->alloc_membind && sup->membind->bind_membind;
        cd->one_node =
            hwloc_get_nbobjs_by_type(cd->topo, HWLOC_OBJ_NUMANODE) <= 1;
    }

    if (pthread_create(&cd->worker, NULL, sn_cpu_worker_main, cd) != 0)
        return sn_error(SHARDNET_DEVICE_ERROR, "%s: cannot start worker thread",
                        info->name);
    cd->worker_started = 1;
    return SHARDNET_OK;
}

/* Device `index` on package `pkg`, using its PUs in `use` (see the top of
 * this file), with at most max_threads threads (0: one per core). */
static shardnet_status open_package(sn_device_list *list,
                                    hwloc_topology_t topo, hwloc_obj_t pkg,
                                    hwloc_const_cpuset_t use, unsigned index,
                                    unsigned max_threads)
{
    sn_device *dev;
    cpu_device *cd;
    shardnet_device_info *info;
    hwloc_obj_t node = NULL;
    shardnet_status st;

    if ((st = device_new(topo, &dev)) != SHARDNET_OK)
        return st;
    /* From here on cpu_device_free() owns the clean-up. */
    cd = dev->impl;
    cd->nodeset = hwloc_bitmap_dup(pkg->nodeset);
    cd->cpuset = hwloc_bitmap_alloc();
    if (!cd->cpuset || !cd->nodeset) {
        st = sn_error(SHARDNET_OUT_OF_MEMORY, "cpu device");
        goto error;
    }
    if ((st = usable_cores(topo, pkg, use, &cd->cores, &cd->ncores)) !=
        SHARDNET_OK)
        goto error;
    /* The context's cpu_threads (SHARDNET_CPU_THREADS) caps each CPU
     * device's team (benchmarks, sharing the machine); the first usable
     * cores are used. */
    while (max_threads > 0 && max_threads < cd->ncores)
        hwloc_bitmap_free(cd->cores[--cd->ncores]);

    info = &dev->info;
    snprintf(info->name, sizeof info->name, "cpu:%u", index);
    info->kind = SHARDNET_DEVICE_CPU;
    info->index = index;
    {
        const char *model = obj_info(topo, pkg, "CPUModel");
        const char *vendor = obj_info(topo, pkg, "CPUVendor");
        snprintf(info->model, sizeof info->model, "%s",
                 model ? model : "CPU package");
        snprintf(info->vendor, sizeof info->vendor, "%s",
                 vendor ? vendor : "unknown");
        if (!model)
            cpuinfo_field("model name", info->model, sizeof info->model);
        if (!vendor)
            cpuinfo_field("vendor_id", info->vendor, sizeof info->vendor);
    }
    blas_version(info->driver, sizeof info->driver);
    info->numa_node = -1;
    while ((node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE,
                                              node)) != NULL) {
        if (!hwloc_bitmap_intersects(node->nodeset, pkg->nodeset))
            continue;
        if (info->numa_node < 0)
            info->numa_node = (int)node->os_index;
        info->global_mem += node->attr->numanode.local_memory;
    }
    if (info->global_mem == 0)
        info->global_mem = hwloc_get_root_obj(topo)->total_memory;
    info->max_alloc = info->global_mem;
    info->host_unified = 1;

    if ((st = device_start(dev)) != SHARDNET_OK ||
        (st = sn_device_list_push(list, dev)) != SHARDNET_OK)
        goto error;
    return SHARDNET_OK;
error:
    cpu_device_free(dev);
    return st;
}

/*
 * A partition: cores [first, first + count) of the device's, a device of
 * their own with a worker and teams pinned to those cores only, its memory
 * on the package's node(s), and the package's description with its own
 * name, units and CPUs.  Sessions on two partitions of one package run at
 * once, each on its own cores.
 */
static shardnet_status cpu_partition(sn_device *whole, unsigned first,
                                     unsigned count, const char *name,
                                     sn_device **out)
{
    cpu_device *of = whole->impl, *cd;
    hwloc_topology_t topo;
    sn_device *dev;
    shardnet_status st;

    *out = NULL;
    if ((st = acquire_topology(&topo)) != SHARDNET_OK ||
        (st = device_new(topo, &dev)) != SHARDNET_OK)
        return st;
    cd = dev->impl;
    dev->info = whole->info;
    snprintf(dev->info.name, sizeof dev->info.name, "%s", name);
    cd->nodeset = hwloc_bitmap_dup(of->nodeset);
    cd->cpuset = hwloc_bitmap_alloc();
    cd->cores = calloc(count, sizeof *cd->cores);
    if (!cd->nodeset || !cd->cpuset || !cd->cores) {
        st = sn_error(SHARDNET_OUT_OF_MEMORY, "%s", name);
        goto error;
    }
    for (; cd->ncores < count; cd->ncores++)
        if (!(cd->cores[cd->ncores] =
                  hwloc_bitmap_dup(of->cores[first + cd->ncores]))) {
            st = sn_error(SHARDNET_OUT_OF_MEMORY, "%s", name);
            goto error;
        }
    if ((st = device_start(dev)) != SHARDNET_OK)
        goto error;
    *out = dev;
    return SHARDNET_OK;
error:
    cpu_device_free(dev);
    return st;
}

/* Where this process may run: the discovering thread's binding (taken
 * before any device thread exists; a launcher's binding is every thread's),
 * within the topology's allowed PUs; all of them where the system cannot
 * say (a simulated topology).  *bound: narrower than the machine. */
static hwloc_bitmap_t process_cpus(hwloc_topology_t topo, int *bound)
{
    hwloc_const_cpuset_t all = hwloc_topology_get_allowed_cpuset(topo);
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    *bound = 0;
    if (!set)
        return NULL;
    if (hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_THREAD) < 0 ||
        hwloc_bitmap_iszero(set) || hwloc_bitmap_isincluded(all, set)) {
        hwloc_bitmap_copy(set, all);
        return set;
    }
    *bound = 1;
    return set;
}

/* The PUs of `pkg` that device `index` uses (malloc'ed), from the
 * process's PUs `mine` (see the top of this file): processes sharing the
 * machine unbound get the `share`th of `shares` even parts of its cores. */
static hwloc_bitmap_t package_share(hwloc_topology_t topo, hwloc_obj_t pkg,
                                    hwloc_const_cpuset_t mine, int bound,
                                    unsigned share, unsigned shares,
                                    unsigned index)
{
    hwloc_bitmap_t use = hwloc_bitmap_alloc();
    char *a = NULL, *b = NULL;
    if (!use)
        return NULL;
    hwloc_bitmap_and(use, pkg->cpuset, mine);
    if (hwloc_bitmap_iszero(use)) {
        hwloc_bitmap_copy(use, pkg->cpuset);
        if (hwloc_bitmap_list_asprintf(&a, mine) >= 0 &&
            hwloc_bitmap_list_asprintf(&b, pkg->cpuset) >= 0)
            sn_log(SHARDNET_LOG_DEBUG,
                   "cpu:%u: this process runs on PUs %s, none of the "
                   "package's (%s): the device binds its threads to the "
                   "package",
                   index, a, b);
        free(a);
        free(b);
        return use;
    }
    if (!bound && shares > 1) {
        hwloc_cpuset_t *cores = NULL;
        unsigned n = 0;
        if (usable_cores(topo, pkg, use, &cores, &n) == SHARDNET_OK) {
            /* Cores [lo, hi): at least one each (processes beyond the
             * cores double up). */
            unsigned lo = (unsigned)((unsigned long long)share * n / shares);
            unsigned hi = (unsigned)((unsigned long long)(share + 1) * n /
                                     shares);
            if (hi <= lo)
                hi = lo + 1;
            hwloc_bitmap_zero(use);
            for (unsigned i = lo; i < hi && i < n; i++)
                hwloc_bitmap_or(use, use, cores[i]);
        }
        for (unsigned i = 0; cores && i < n; i++)
            hwloc_bitmap_free(cores[i]);
        free(cores);
    }
    return use;
}

static shardnet_status cpu_discover(sn_device_list *list,
                                    const sn_discover_args *args)
{
    hwloc_topology_t topo;
    shardnet_status st = acquire_topology(&topo);
    hwloc_bitmap_t mine, use;
    unsigned share, shares;
    int npkg, bound;

    if (st != SHARDNET_OK)
        return st;
    sn_cpu_gemm_init();
    share = args->node_rank;
    shares = args->node_size;
    if (!(mine = process_cpus(topo, &bound))) {
        release_topology();
        return sn_error(SHARDNET_OUT_OF_MEMORY, "cpu devices");
    }
    npkg = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
    for (int i = 0; i < (npkg > 0 ? npkg : 1); i++) {
        /* Some virtual machines report no package: the machine is one. */
        hwloc_obj_t pkg = npkg > 0 ? hwloc_get_obj_by_type(
                                         topo, HWLOC_OBJ_PACKAGE, (unsigned)i)
                                   : hwloc_get_root_obj(topo);
        if (i > 0) /* each device holds one reference */
            acquire_topology(&topo);
        use = package_share(topo, pkg, mine, bound, share, shares,
                            (unsigned)i);
        st = use ? open_package(list, topo, pkg, use, (unsigned)i,
                                sn_config_or_env(args->config)->cpu_threads)
                 : (release_topology(),
                    sn_error(SHARDNET_OUT_OF_MEMORY, "cpu devices"));
        hwloc_bitmap_free(use);
        if (st != SHARDNET_OK) /* open_package released its reference */
            break;
    }
    hwloc_bitmap_free(mine);
    return st;
}

const char *shardnet_blas_coretype_hint(void)
{
    extern char *openblas_get_corename(void);
    const char *core = openblas_get_corename();
    static const char *const older[] = {"Haswell", "Zen", "Sandybridge",
                                        "Nehalem", "Core2", "Prescott"};
    int is_older = 0;
    if (getenv("OPENBLAS_CORETYPE") || !core)
        return NULL;
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init(); /* a shared library may run before libgcc's */
    if (!__builtin_cpu_supports("avx512f") ||
        !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512dq") ||
        !__builtin_cpu_supports("avx512vl"))
        return NULL;
#else
    return NULL;
#endif
    for (size_t i = 0; i < sizeof older / sizeof older[0]; i++)
        is_older |= !strcasecmp(core, older[i]);
    return is_older ? "SkylakeX" : NULL;
}

/* Kernels are tasks on the device's queue: the descriptor is copied in. */
#define CPU_KERNEL(fn, desc, kind_, member)                                   \
    static shardnet_status fn(sn_device *dev, const desc *d)                  \
    {                                                                         \
        task t = {.kind = kind_, .u.member = *d};                             \
        return sn_cpu_enqueue(dev, &t);                                       \
    }

CPU_KERNEL(cpu_gemm, sn_gemm_desc, SN_KERNEL_GEMM, gemm)
CPU_KERNEL(cpu_binary, sn_binary_desc, SN_KERNEL_BINARY, binary)
CPU_KERNEL(cpu_unary, sn_unary_desc, SN_KERNEL_UNARY, unary)
CPU_KERNEL(cpu_softmax, sn_softmax_desc, SN_KERNEL_SOFTMAX, softmax)
CPU_KERNEL(cpu_reduce, sn_reduce_desc, SN_KERNEL_REDUCE, reduce)
CPU_KERNEL(cpu_where, sn_where_desc, SN_KERNEL_WHERE, where)
CPU_KERNEL(cpu_copy, sn_copy_desc, SN_KERNEL_COPY, copy)
CPU_KERNEL(cpu_im2col, sn_im2col_desc, SN_KERNEL_IM2COL, im2col)
CPU_KERNEL(cpu_pool, sn_pool_desc, SN_KERNEL_POOL, pool)
CPU_KERNEL(cpu_layernorm, sn_layernorm_desc, SN_KERNEL_LAYERNORM, layernorm)
CPU_KERNEL(cpu_gather, sn_gather_desc, SN_KERNEL_GATHER, gather)
CPU_KERNEL(cpu_topk, sn_topk_desc, SN_KERNEL_TOPK, topk)
CPU_KERNEL(cpu_rnn_cell, sn_rnn_cell_desc, SN_KERNEL_RNN_CELL, rnn_cell)
CPU_KERNEL(cpu_resample, sn_resample_desc, SN_KERNEL_RESAMPLE, resample)
CPU_KERNEL(cpu_grid_sample, sn_grid_sample_desc, SN_KERNEL_GRID_SAMPLE,
           grid_sample)
CPU_KERNEL(cpu_roi_align, sn_roi_align_desc, SN_KERNEL_ROI_ALIGN, roi_align)
CPU_KERNEL(cpu_scan, sn_scan_desc, SN_KERNEL_SCAN, scan)
CPU_KERNEL(cpu_dwconv, sn_dwconv_desc, SN_KERNEL_DWCONV, dwconv)
CPU_KERNEL(cpu_qgemm, sn_qgemm_desc, SN_KERNEL_QGEMM, qgemm)

/* How far the kernels of cpu/ go in each kernel's variants (backend.h's
 * enums, in order): all of them today. */
static const int cpu_variants[SN_KERNEL_COUNT] = {
    [SN_KERNEL_BINARY] = SN_BINARY_COUNT,
    [SN_KERNEL_UNARY] = SN_UNARY_COUNT,
    [SN_KERNEL_REDUCE] = SN_REDUCE_COUNT,
    [SN_KERNEL_POOL] = SN_POOL_COUNT,
};

static int cpu_supports(sn_device *dev, sn_kernel k, int variant)
{
    (void)dev;
    return sn_variants_within(cpu_variants, k, variant);
}

static const sn_backend_ops cpu_ops = {
    .abi = SN_BACKEND_ABI,
    .kind = "cpu",
    .device_free = cpu_device_free,
    .buffer_alloc = sn_cpu_buffer_alloc,
    .buffer_free = sn_cpu_buffer_free,
    .buffer_write = sn_cpu_buffer_write,
    .buffer_read = sn_cpu_buffer_read,
    .buffer_map = sn_cpu_buffer_map,
    .buffer_unmap = sn_cpu_buffer_unmap,
    .buffer_lend = sn_cpu_buffer_lend,
    .buffer_wrap = sn_cpu_buffer_wrap,
    .buffer_write_async = sn_cpu_buffer_write_async,
    .buffer_read_async = sn_cpu_buffer_read_async,
    .gemm = cpu_gemm,
    .binary = cpu_binary,
    .unary = cpu_unary,
    .softmax = cpu_softmax,
    .reduce = cpu_reduce,
    .where = cpu_where,
    .copy = cpu_copy,
    .im2col = cpu_im2col,
    .pool = cpu_pool,
    .layernorm = cpu_layernorm,
    .gather = cpu_gather,
    .topk = cpu_topk,
    .rnn_cell = cpu_rnn_cell,
    .resample = cpu_resample,
    .grid_sample = cpu_grid_sample,
    .roi_align = cpu_roi_align,
    .scan = cpu_scan,
    .dwconv = cpu_dwconv,
    .qgemm = cpu_qgemm,
    .supports = cpu_supports,
    .synchronize = sn_cpu_synchronize,
    .event_record = sn_cpu_event_record,
    .event_wait = sn_cpu_event_wait,
    .event_query = sn_cpu_event_query,
    .event_free = sn_cpu_event_free,
    .bind_thread = sn_cpu_bind_thread,
    .partition = cpu_partition,
};

const sn_backend sn_cpu_backend = {
    .abi = SN_BACKEND_ABI,
    .kind = "cpu",
    .discover = cpu_discover,
};
