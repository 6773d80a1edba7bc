/* The context: its configuration (the environment's, the caller's options
 * over it), the devices the backend registry discovers (and, in a job of
 * several processes, every process's), device lists, matmul. */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_impl.h"
#include "api/partition.h"
#include "backend/backend.h"
#include "comm/codec.h"
#include "comm/world.h"
#include "core/config.h"
#include "core/error.h"

struct shardnet_context {
    /* By process, each's in the registry's order; then the partitions
     * device lists have named so far, in the order first named. */
    sn_device_list devices;
    sn_config config; /* its settings; every device points at it */
    /* Guards devices, which a device list naming a new partition grows
     * from whichever thread selects it. */
    pthread_mutex_t lock;
};

/* Every process of the job sends what crosses between them in one codec
 * (--comm): a job whose processes were given different ones is refused
 * alike by all, naming them. */
static shardnet_status same_codec(const shardnet_context_t *ctx)
{
    unsigned np = sn_world_processes();
    uint64_t mine = (uint64_t)ctx->config.comm;
    uint64_t *each = calloc(np, sizeof *each);
    shardnet_status st = SHARDNET_OK;
    if (!each)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "codec of the job");
    if ((st = sn_world_allgather(&mine, sizeof mine, each)) != SHARDNET_OK) {
        free(each);
        return st;
    }
    for (unsigned p = 1; p < np && st == SHARDNET_OK; p++)
        if (each[p] != each[0]) {
            int c0 = each[0] < SN_CODEC_COUNT ? (int)each[0] : 0,
                cp = each[p] < SN_CODEC_COUNT ? (int)each[p] : 0;
            st = sn_error(SHARDNET_INVALID_ARGUMENT,
                          "the processes disagree on the codec of what "
                          "crosses between them (--comm, SHARDNET_COMM): "
                          "process 0 has %s, process %u %s; give every "
                          "process the same",
                          sn_codec_name((sn_codec)c0), p,
                          sn_codec_name((sn_codec)cp));
        }
    free(each);
    return st;
}

/*
 * In a job of several processes: every process's devices, in process
 * order, named PROCESS/KIND:N; this process's keep their backends, the
 * others are descriptions.  Each process sends its devices' descriptions
 * to all (the same program on every process: the structs travel as
 * bytes).
 */
static shardnet_status join_devices(shardnet_context_t *ctx)
{
    unsigned me = sn_world_process(), np = sn_world_processes();
    size_t mine = ctx->devices.count, most = 0;
    uint64_t *counts = calloc(np, sizeof *counts);
    uint64_t n64 = mine;
    shardnet_device_info *all = NULL, *local = NULL;
    sn_device_list list = {0};
    shardnet_status st;
    if (!counts)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "devices of the job");
    if ((st = sn_world_allgather(&n64, sizeof n64, counts)) != SHARDNET_OK ||
        (st = same_codec(ctx)) != SHARDNET_OK)
        goto out;
    for (unsigned p = 0; p < np; p++)
        if (counts[p] > most)
            most = (size_t)counts[p];
    if (most > 4096) {
        st = sn_error(SHARDNET_INTERNAL, "devices of the job: %zu on one "
                                         "process",
                      most);
        goto out;
    }
    local = calloc(most + 1, sizeof *local);
    all = calloc((size_t)np * (most + 1), sizeof *all);
    if (!local || !all) {
        st = sn_error(SHARDNET_OUT_OF_MEMORY, "devices of the job");
        goto out;
    }
    for (size_t i = 0; i < mine; i++)
        local[i] = ctx->devices.items[i]->info;
    if ((st = sn_world_allgather(local, (most + 1) * sizeof *local, all)) !=
        SHARDNET_OK)
        goto out;
    for (unsigned p = 0; p < np; p++)
        for (size_t i = 0; i < counts[p]; i++) {
            const shardnet_device_info *info = &all[(size_t)p * (most + 1) + i];
            sn_device *dev;
            if (p == me) {
                dev = ctx->devices.items[i];
            } else if ((st = sn_remote_device_new(info, &dev)) !=
                       SHARDNET_OK) {
                goto out;
            }
            dev->process = p;
            char name[sizeof dev->info.name];
            snprintf(name, sizeof name, "%u/%s", p, info->name);
            memcpy(dev->info.name, name, sizeof name);
            if ((st = sn_device_list_push(&list, dev)) != SHARDNET_OK) {
                if (p != me)
                    free(dev);
                goto out;
            }
        }
    /* The list now owns this process's devices too. */
    free(ctx->devices.items);
    ctx->devices = list;
    list.items = NULL;
    list.count = 0;
out:
    for (size_t i = 0; i < list.count; i++)
        if (list.items[i]->remote)
            list.items[i]->ops->device_free(list.items[i]);
    free(list.items);
    free(counts);
    free(local);
    free(all);
    return st;
}

/* A string option into a field of cap bytes; unset (NULL or "") keeps
 * what the field has. */
static shardnet_status take_text(const char *member, const char *value,
                                 char *field, size_t cap)
{
    size_t len = value ? strlen(value) : 0;
    if (!len)
        return SHARDNET_OK;
    if (len >= cap)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "context options: %s is %zu bytes long, more than "
                        "the %zu this library takes",
                        member, len, cap - 1);
    memcpy(field, value, len + 1);
    return SHARDNET_OK;
}

/*
 * The context's configuration: the process's, from the environment, with
 * the caller's options over it.  A variable the library cannot use is an
 * error even where an option replaces it, not a silent default (a typo in
 * a memory cap would otherwise plan for memory the program meant not to
 * use).
 */
static shardnet_status configure(const shardnet_context_options *in,
                                 sn_config *config)
{
    /* The first version of the struct ends at kernel_dir. */
    const size_t first =
        offsetof(shardnet_context_options, kernel_dir) + sizeof in->kernel_dir;
    shardnet_context_options o;
    shardnet_status st;
    if ((st = sn_config_env_status()) != SHARDNET_OK ||
        (st = sn_options_read(in, &o, first, sizeof o, "context")) !=
            SHARDNET_OK)
        return st;
    *config = *sn_config_env();
    if (o.cpu_threads > 1u << 20)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "context options: cpu_threads is %u, more than the "
                        "%u threads a device may have",
                        o.cpu_threads, 1u << 20);
    if (o.comm < SHARDNET_COMM_DEFAULT || o.comm > SHARDNET_COMM_INT8)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "context options: comm is %d, not a shardnet_comm "
                        "(0 to %d)",
                        o.comm, SHARDNET_COMM_INT8);
    if (o.comm)
        config->comm = o.comm - SHARDNET_COMM_FP32;
    if (o.memory_limit)
        config->memory_limit = o.memory_limit;
    if (o.cpu_threads)
        config->cpu_threads = o.cpu_threads;
    if (o.reprofile)
        config->reprofile = o.reprofile > 0;
    if (o.staged_collectives)
        config->staged_collectives = o.staged_collectives > 0;
    config->progress = o.progress;
    config->progress_user = o.progress_user;
    if ((st = take_text("devices", o.devices, config->devices,
                        sizeof config->devices)) != SHARDNET_OK ||
        (st = take_text("cache_dir", o.cache_dir, config->cache_dir,
                        sizeof config->cache_dir)) != SHARDNET_OK ||
        (st = take_text("kernel_dir", o.kernel_dir, config->kernel_dir,
                        sizeof config->kernel_dir)) != SHARDNET_OK)
        return st;
    return SHARDNET_OK;
}

shardnet_status shardnet_context_create_with(
    const shardnet_context_options *options, shardnet_context_t **out)
{
    shardnet_context_t *ctx;
    sn_discover_args args;
    shardnet_status st;

    if (!out)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "context: out is NULL");
    *out = NULL;
    sn_error_clear();
    ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "context");
    if (pthread_mutex_init(&ctx->lock, NULL) != 0) {
        free(ctx);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "context");
    }
    if ((st = configure(options, &ctx->config)) != SHARDNET_OK) {
        pthread_mutex_destroy(&ctx->lock);
        free(ctx);
        return st;
    }
    /* Processes of the job on this machine share its cores: discovery,
     * which comes before the job is joined, learns its share here. */
    sn_world_node_share(&args.node_rank, &args.node_size);
    args.config = &ctx->config;
    if ((st = sn_backends_discover(&ctx->devices, &args)) != SHARDNET_OK) {
        pthread_mutex_destroy(&ctx->lock);
        free(ctx);
        return st;
    }
    if ((st = sn_world_init()) != SHARDNET_OK ||
        (sn_world_processes() > 1 &&
         (st = join_devices(ctx)) != SHARDNET_OK)) {
        sn_error_prefix(st, "joining the MPI job");
        sn_device_list_free(&ctx->devices);
        pthread_mutex_destroy(&ctx->lock);
        free(ctx);
        return st;
    }
    for (size_t i = 0; i < ctx->devices.count; i++)
        ctx->devices.items[i]->config = &ctx->config;
    sn_log(SHARDNET_LOG_INFO, "found %zu devices", ctx->devices.count);
    *out = ctx;
    return SHARDNET_OK;
}

shardnet_status shardnet_context_create(shardnet_context_t **out)
{
    return shardnet_context_create_with(NULL, out);
}

unsigned shardnet_job_process(void)
{
    return sn_world_process();
}

unsigned shardnet_job_processes(void)
{
    return sn_world_processes();
}

void shardnet_context_free(shardnet_context_t *ctx)
{
    if (!ctx)
        return;
    for (size_t i = 0; i < ctx->devices.count; i++)
        sn_synchronize(ctx->devices.items[i]);
    sn_device_list_free(&ctx->devices);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

/* The context's devices grow when a list names a new partition: readers
 * take its lock (a device, once made, stays where it is until the context
 * is freed). */
static void lock_devices(const shardnet_context_t *ctx)
{
    pthread_mutex_lock(&((shardnet_context_t *)ctx)->lock);
}

static void unlock_devices(const shardnet_context_t *ctx)
{
    pthread_mutex_unlock(&((shardnet_context_t *)ctx)->lock);
}

size_t shardnet_device_count(const shardnet_context_t *ctx)
{
    size_t n;
    if (!ctx)
        return 0;
    lock_devices(ctx);
    n = ctx->devices.count;
    unlock_devices(ctx);
    return n;
}

sn_device *sn_context_device(const shardnet_context_t *ctx, size_t index)
{
    sn_device *dev = NULL;
    if (!ctx)
        return NULL;
    lock_devices(ctx);
    if (index < ctx->devices.count)
        dev = ctx->devices.items[index];
    unlock_devices(ctx);
    return dev;
}

shardnet_status shardnet_device_get_info(const shardnet_context_t *ctx,
                                         size_t index,
                                         shardnet_device_info *info)
{
    size_t n;
    if (!ctx || !info)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "device info: NULL argument");
    lock_devices(ctx);
    n = ctx->devices.count;
    if (index < n)
        *info = ctx->devices.items[index]->info;
    unlock_devices(ctx);
    if (index >= n)
        return sn_error(SHARDNET_NO_DEVICE,
                        "device index %zu out of range (%zu devices)", index,
                        n);
    return SHARDNET_OK;
}

/* A device list's choice so far: indices in the order first named (the
 * first cap of them in idx), and which devices are chosen. */
typedef struct selection {
    size_t *idx, cap, n;
    unsigned char *seen; /* by device index, nseen of them */
    size_t nseen;
} selection;

/* Append device i unless already chosen. */
static shardnet_status choose(selection *sel, size_t i)
{
    if (i >= sel->nseen) {
        unsigned char *seen = realloc(sel->seen, i + 16);
        if (!seen)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "device selection");
        memset(seen + sel->nseen, 0, i + 16 - sel->nseen);
        sel->seen = seen;
        sel->nseen = i + 16;
    }
    if (sel->seen[i])
        return SHARDNET_OK;
    sel->seen[i] = 1;
    if (sel->n < sel->cap)
        sel->idx[sel->n] = i;
    sel->n++;
    return SHARDNET_OK;
}

/* The index of partition p of device `of` (see lib/api/partition.h),
 * made and appended to the context's devices the first time a list names
 * it; item is the list's item, for messages. */
static shardnet_status partition_index(shardnet_context_t *ctx, size_t of,
                                       sn_part p, const char *item,
                                       size_t *out)
{
    sn_device *whole = ctx->devices.items[of], *dev;
    char name[sizeof whole->info.name];
    shardnet_status st;
    for (size_t i = 0; i < ctx->devices.count; i++) {
        const sn_device *d = ctx->devices.items[i];
        if (d->whole == whole && d->first_unit == p.first &&
            d->info.compute_units == p.count) {
            *out = i;
            return SHARDNET_OK;
        }
    }
    if (!sn_partition_name(name, sizeof name, whole->info.name, p))
        return sn_error(SHARDNET_NO_DEVICE,
                        "bad device '%s': its partition's name is longer "
                        "than the %zu characters a device's name may have",
                        item, sizeof name - 1);
    if ((st = sn_device_partition(whole, p.first, p.count, name, &dev)) !=
        SHARDNET_OK)
        return sn_error_prefix(st, "device '%s'", item);
    if ((st = sn_device_list_push(&ctx->devices, dev)) != SHARDNET_OK) {
        dev->ops->device_free(dev);
        return st;
    }
    sn_log(SHARDNET_LOG_INFO, "%s: %u of %s's units, CPUs %s", name, p.count,
           whole->info.name, *dev->info.cpuset ? dev->info.cpuset : "-");
    *out = ctx->devices.count - 1;
    return SHARDNET_OK;
}

/* The partitions that `suffix` ("[A-B]", "/P", "/P.I") names on device
 * `of`, chosen in order. */
static shardnet_status choose_partitions(shardnet_context_t *ctx,
                                         const char *item, size_t of,
                                         const char *suffix, selection *sel)
{
    const sn_device *whole = ctx->devices.items[of];
    sn_part *parts;
    size_t n, i = 0;
    shardnet_status st;
    if (sn_world_processes() > 1)
        return sn_error(SHARDNET_UNSUPPORTED,
                        "bad device '%s': devices are not cut into "
                        "partitions in a job of several processes",
                        item);
    if ((st = sn_partition_parse(item, suffix, whole->info.name,
                                 whole->info.compute_units,
                                 whole->info.kind == SHARDNET_DEVICE_CPU
                                     ? "core"
                                     : "compute unit",
                                 &parts, &n)) != SHARDNET_OK)
        return st;
    for (size_t k = 0; k < n && st == SHARDNET_OK; k++)
        if ((st = partition_index(ctx, of, parts[k], item, &i)) ==
            SHARDNET_OK)
            st = choose(sel, i);
    free(parts);
    return st;
}

/* One item of a device list: "all", "KIND" or "KIND:N", each optionally
 * "P/..." (process P's, in a job of several processes; unqualified, KIND:N
 * is process 0's and "all" or KIND every process's), or a partition of a
 * device, "KIND:N[A-B]", "KIND:N/P" or "KIND:N/P.I" (partition.h).  "all"
 * and KIND are the devices discovery found, never partitions. */
static shardnet_status select_item(shardnet_context_t *ctx, const char *item,
                                   selection *sel)
{
    const sn_device_list *devs = &ctx->devices;
    const char *whole = item;
    shardnet_status st;
    long proc = -1;
    if (isdigit((unsigned char)*item) && strchr(item, '/')) {
        char *end;
        errno = 0;
        unsigned long p = strtoul(item, &end, 10);
        if (*end != '/' || errno == ERANGE || p >= sn_world_processes())
            return sn_error(SHARDNET_NO_DEVICE,
                            "bad device '%s': no process %.*s in this job "
                            "(%u process%s)",
                            whole, (int)(strchr(item, '/') - item), item,
                            sn_world_processes(),
                            sn_world_processes() == 1 ? "" : "es");
        proc = (long)p;
        item = end + 1;
    }
#define ON_PROC(d) (!(d)->whole && (proc < 0 || (long)(d)->process == proc))
    const char *colon = strchr(item, ':');
    size_t kind_len = colon ? (size_t)(colon - item) : strlen(item);
    size_t before = sel->n;

    if (!strcmp(item, "all")) {
        for (size_t i = 0; i < devs->count; i++)
            if (ON_PROC(devs->items[i]) && (st = choose(sel, i)) != SHARDNET_OK)
                return st;
        if (sel->n == before && devs->count == 0)
            return sn_error(SHARDNET_NO_DEVICE, "no devices found");
        return SHARDNET_OK;
    }
    if (kind_len == 0 || !sn_backend_kind_known(item, kind_len)) {
        char kinds[128];
        sn_backend_kinds(kinds, sizeof kinds);
        return sn_error(SHARDNET_NO_DEVICE,
                        "unknown device '%s' (expected all, %s, or KIND:N "
                        "such as cpu:0)",
                        item, kinds);
    }
    if (!colon) {
        int found = 0;
        for (size_t i = 0; i < devs->count; i++) {
            if (!strcmp(devs->items[i]->ops->kind, item) &&
                ON_PROC(devs->items[i])) {
                if ((st = choose(sel, i)) != SHARDNET_OK)
                    return st;
                found = 1;
            }
        }
        if (!found)
            return sn_error(SHARDNET_NO_DEVICE, "no %s devices on this machine",
                            item);
        return SHARDNET_OK;
    }

    /* KIND:N with N a plain decimal number, and a partition's suffix. */
    const char *num = colon + 1;
    char *end;
    unsigned long v;
    if (!isdigit((unsigned char)*num))
        return sn_error(SHARDNET_NO_DEVICE,
                        "bad device '%s': expected a number after ':'", item);
    errno = 0;
    v = strtoul(num, &end, 10);
    if ((*end != '\0' && *end != '[' && *end != '/') || errno == ERANGE ||
        v > UINT_MAX)
        return sn_error(SHARDNET_NO_DEVICE,
                        "bad device '%s': expected a number after ':', then "
                        "nothing or a partition ([A-B], /P or /P.I)",
                        item);
    for (size_t i = 0; i < devs->count; i++) {
        const sn_device *d = devs->items[i];
        if (strlen(d->ops->kind) == kind_len &&
            !memcmp(d->ops->kind, item, kind_len) && d->info.index == v &&
            ON_PROC(d))
            return *end ? choose_partitions(ctx, whole, i, end, sel)
                        : choose(sel, i);
    }
    {
        size_t have = 0;
        for (size_t i = 0; i < devs->count; i++)
            if (strlen(devs->items[i]->ops->kind) == kind_len &&
                !memcmp(devs->items[i]->ops->kind, item, kind_len) &&
                !devs->items[i]->whole)
                have++;
        return sn_error(SHARDNET_NO_DEVICE,
                        "no device '%.*s' (%s %zu %.*s device%s)",
                        (int)(end - whole), whole,
                        sn_world_processes() > 1 ? "the job has"
                                                 : "this machine has",
                        have, (int)kind_len, item, have == 1 ? "" : "s");
    }
#undef ON_PROC
}

/* The units of device d within the device discovery found, *root. */
static void units_of(const sn_device *d, const sn_device **root,
                     unsigned *first, unsigned *end)
{
    *root = d->whole ? d->whole : d;
    *first = d->whole ? d->first_unit : 0;
    *end = *first + d->info.compute_units;
}

/* Two devices of one list that share units (a device and its partition,
 * or two partitions of one device that overlap) would compute on the
 * same cores: refused, naming both. */
static shardnet_status disjoint(const shardnet_context_t *ctx,
                                const char *spec, const selection *sel)
{
    for (size_t i = 0; i < sel->nseen; i++) {
        for (size_t j = i + 1; sel->seen[i] && j < sel->nseen; j++) {
            const sn_device *a, *b, *ra, *rb;
            unsigned a0, a1, b0, b1, lo, hi;
            char units[48];
            if (!sel->seen[j])
                continue;
            a = ctx->devices.items[i];
            b = ctx->devices.items[j];
            units_of(a, &ra, &a0, &a1);
            units_of(b, &rb, &b0, &b1);
            if (ra != rb || a1 <= b0 || b1 <= a0)
                continue;
            lo = a0 > b0 ? a0 : b0;
            hi = (a1 < b1 ? a1 : b1) - 1;
            const char *unit =
                ra->info.kind == SHARDNET_DEVICE_CPU ? "core" : "compute unit";
            if (lo == hi)
                snprintf(units, sizeof units, "%s %u", unit, lo);
            else
                snprintf(units, sizeof units, "%ss %u to %u", unit, lo, hi);
            return sn_error(SHARDNET_NO_DEVICE,
                            "device list '%s': %s and %s overlap (both have "
                            "%s of %s): name devices that do not",
                            spec, a->info.name, b->info.name, units,
                            ra->info.name);
        }
    }
    return SHARDNET_OK;
}

shardnet_status shardnet_devices_select(const shardnet_context_t *cctx,
                                        const char *spec, size_t *idx,
                                        size_t cap, size_t *count)
{
    /* Selecting may make the partitions the list names (added to the
     * context's devices, under its lock): the context a caller holds as
     * const changes only in the devices it has made so far. */
    shardnet_context_t *ctx = (shardnet_context_t *)cctx;
    selection sel = {.idx = idx, .cap = cap};
    char *copy, *save = NULL;
    shardnet_status st = SHARDNET_OK;

    if (!ctx || !count || (cap && !idx))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "device selection: NULL argument");
    *count = 0;
    if (!spec || !*spec)
        spec = *ctx->config.devices ? ctx->config.devices : "all";
    if (!(copy = strdup(spec)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "device selection");
    lock_devices(ctx);
    /* Items are separated by commas; surrounding blanks are ignored, but an
     * empty item ("cpu:0,,cl:0") is an error, not silently skipped. */
    for (char *p = copy;; p = NULL) {
        char *tok = strtok_r(p, ",", &save);
        if (!tok)
            break;
        while (isspace((unsigned char)*tok))
            tok++;
        char *e = tok + strlen(tok);
        while (e > tok && isspace((unsigned char)e[-1]))
            *--e = '\0';
        if (!*tok) {
            st = sn_error(SHARDNET_NO_DEVICE, "empty item in device list '%s'",
                          spec);
            break;
        }
        st = select_item(ctx, tok, &sel);
        if (st != SHARDNET_OK)
            break;
    }
    if (st == SHARDNET_OK) {
        size_t len = strlen(spec);
        if (strstr(spec, ",,") || spec[0] == ',' || spec[len - 1] == ',')
            st = sn_error(SHARDNET_NO_DEVICE, "empty item in device list '%s'",
                          spec);
        else if (sel.n == 0)
            st = sn_error(SHARDNET_NO_DEVICE, "device list '%s' selects nothing",
                          spec);
        else if ((st = disjoint(ctx, spec, &sel)) != SHARDNET_OK)
            ;
        else if (sel.n > cap)
            st = sn_error(SHARDNET_INVALID_ARGUMENT,
                          "device list '%s' selects %zu devices, room for %zu",
                          spec, sel.n, cap);
    }
    unlock_devices(ctx);
    free(sel.seen);
    free(copy);
    if (st == SHARDNET_OK || st == SHARDNET_INVALID_ARGUMENT)
        *count = sel.n;
    return st;
}

/* Host memory for data on its way to the devices a list names: the
 * staging of the first of them with its own (sn_staging_owner: a GPU's
 * pinned memory), else plain memory.  Only those devices count, so that a
 * program feeding the CPU never opens a GPU for it. */
void *shardnet_host_alloc(shardnet_context_t *ctx, const char *devices,
                          size_t bytes)
{
    size_t n = 0, *idx = NULL;
    sn_device **devs = NULL;
    void *p = NULL;
    if (!ctx) {
        sn_error(SHARDNET_INVALID_ARGUMENT, "host memory: the context is NULL");
        return NULL;
    }
    /* How many the list names (room for none: the count comes back with
     * INVALID_ARGUMENT), then which. */
    shardnet_status st = shardnet_devices_select(ctx, devices, NULL, 0, &n);
    if (st != SHARDNET_OK && (st != SHARDNET_INVALID_ARGUMENT || !n))
        return NULL;
    sn_error_clear(); /* "room for 0" was the question, not a failure */
    if (!(idx = malloc(n * sizeof *idx)) || !(devs = malloc(n * sizeof *devs))) {
        sn_error(SHARDNET_OUT_OF_MEMORY, "host memory");
    } else if (shardnet_devices_select(ctx, devices, idx, n, &n) ==
               SHARDNET_OK) {
        for (size_t i = 0; i < n; i++)
            devs[i] = sn_context_device(ctx, idx[i]);
        if (!(p = sn_staging_alloc(sn_staging_owner(devs, n), bytes)))
            sn_error(SHARDNET_OUT_OF_MEMORY, "host memory of %zu bytes",
                     bytes);
    }
    free(idx);
    free(devs);
    return p;
}

void shardnet_host_free(void *ptr)
{
    sn_staging_free(ptr);
}

shardnet_status shardnet_matmul(shardnet_context_t *ctx, size_t device,
                                size_t m, size_t n, size_t k, const float *a,
                                const float *b, float *c)
{
    sn_device *dev = sn_context_device(ctx, device);
    sn_buffer *ba = NULL, *bb = NULL, *bc = NULL;
    shardnet_status st;
    size_t sa, sb, sc;

    if (!dev)
        return sn_error(SHARDNET_NO_DEVICE, "matmul: no device %zu", device);
    if (!a || !b || !c || !m || !n || !k)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "matmul: NULL matrix or zero dimension");
    if (m > SIZE_MAX / sizeof(float) / k || k > SIZE_MAX / sizeof(float) / n ||
        m > SIZE_MAX / sizeof(float) / n)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "matmul: size overflows");
    sa = m * k * sizeof(float);
    sb = k * n * sizeof(float);
    sc = m * n * sizeof(float);

    sn_gemm_desc d = {.m = m, .n = n, .k = k, .alpha = 1.0f, .beta = 0.0f,
                      .lda = k, .ldb = n, .ldc = n, .batch = 1};
    if ((st = sn_buffer_alloc(dev, sa, &ba)) != SHARDNET_OK ||
        (st = sn_buffer_alloc(dev, sb, &bb)) != SHARDNET_OK ||
        (st = sn_buffer_alloc(dev, sc, &bc)) != SHARDNET_OK ||
        (st = sn_buffer_write(ba, 0, a, sa)) != SHARDNET_OK ||
        (st = sn_buffer_write(bb, 0, b, sb)) != SHARDNET_OK)
        goto out;
    d.a.buf = ba;
    d.b.buf = bb;
    d.c.buf = bc;
    if ((st = sn_gemm(dev, &d)) != SHARDNET_OK ||
        (st = sn_buffer_read(bc, 0, c, sc)) != SHARDNET_OK)
        goto out;
    st = sn_synchronize(dev);
out:
    if (st != SHARDNET_OK)
        sn_error_prefix(st, "matmul on %s", dev->info.name);
    sn_buffer_free(ba);
    sn_buffer_free(bb);
    sn_buffer_free(bc);
    return st;
}
