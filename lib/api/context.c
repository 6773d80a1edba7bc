/* The context: its configuration (the environment's, the caller's options
 * over it), the devices the backend registry discovers (and, in a job of
 * several processes, every process's), device lists, matmul. */
#include <config.h>

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_impl.h"
#include "backend/backend.h"
#include "comm/world.h"
#include "core/config.h"
#include "core/error.h"

struct shardnet_context {
    sn_device_list devices; /* by process, each's in the registry's order */
    sn_config config;       /* its settings; every device points at it */
};

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
    if ((st = sn_world_allgather(&n64, sizeof n64, counts)) != SHARDNET_OK)
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
    if ((st = configure(options, &ctx->config)) != SHARDNET_OK) {
        free(ctx);
        return st;
    }
    /* Processes of the job on this machine share its cores: discovery,
     * which comes before the job is joined, learns its share here. */
    sn_world_node_share(&args.node_rank, &args.node_size);
    args.config = &ctx->config;
    if ((st = sn_backends_discover(&ctx->devices, &args)) != SHARDNET_OK) {
        free(ctx);
        return st;
    }
    if ((st = sn_world_init()) != SHARDNET_OK ||
        (sn_world_processes() > 1 &&
         (st = join_devices(ctx)) != SHARDNET_OK)) {
        sn_error_prefix(st, "joining the MPI job");
        sn_device_list_free(&ctx->devices);
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
    free(ctx);
}

size_t shardnet_device_count(const shardnet_context_t *ctx)
{
    return ctx ? ctx->devices.count : 0;
}

sn_device *sn_context_device(const shardnet_context_t *ctx, size_t index)
{
    if (!ctx || index >= ctx->devices.count)
        return NULL;
    return ctx->devices.items[index];
}

shardnet_status shardnet_device_get_info(const shardnet_context_t *ctx,
                                         size_t index,
                                         shardnet_device_info *info)
{
    if (!ctx || !info)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "device info: NULL argument");
    if (index >= ctx->devices.count)
        return sn_error(SHARDNET_NO_DEVICE,
                        "device index %zu out of range (%zu devices)", index,
                        ctx->devices.count);
    *info = ctx->devices.items[index]->info;
    return SHARDNET_OK;
}

/* Append device i unless already chosen. */
static void choose(size_t i, size_t *idx, size_t cap, size_t *n,
                   unsigned char *seen)
{
    if (seen[i])
        return;
    seen[i] = 1;
    if (*n < cap)
        idx[*n] = i;
    (*n)++;
}

/* One item of a device list: "all", "KIND" or "KIND:N", each optionally
 * "P/..." (process P's, in a job of several processes; unqualified, KIND:N
 * is process 0's and "all" or KIND every process's). */
static shardnet_status select_item(const shardnet_context_t *ctx,
                                   const char *item, size_t *idx, size_t cap,
                                   size_t *n, unsigned char *seen)
{
    const sn_device_list *devs = &ctx->devices;
    const char *whole = item;
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
#define ON_PROC(d) (proc < 0 || (long)(d)->process == proc)
    const char *colon = strchr(item, ':');
    size_t kind_len = colon ? (size_t)(colon - item) : strlen(item);
    size_t before = *n;

    if (!strcmp(item, "all")) {
        for (size_t i = 0; i < devs->count; i++)
            if (ON_PROC(devs->items[i]))
                choose(i, idx, cap, n, seen);
        if (*n == before && devs->count == 0)
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
                choose(i, idx, cap, n, seen);
                found = 1;
            }
        }
        if (!found)
            return sn_error(SHARDNET_NO_DEVICE, "no %s devices on this machine",
                            item);
        return SHARDNET_OK;
    }

    /* KIND:N with N a plain decimal number. */
    const char *num = colon + 1;
    char *end;
    unsigned long v;
    if (!isdigit((unsigned char)*num))
        return sn_error(SHARDNET_NO_DEVICE,
                        "bad device '%s': expected a number after ':'", item);
    errno = 0;
    v = strtoul(num, &end, 10);
    if (*end != '\0' || errno == ERANGE || v > UINT_MAX)
        return sn_error(SHARDNET_NO_DEVICE,
                        "bad device '%s': expected a number after ':'", item);
    for (size_t i = 0; i < devs->count; i++) {
        const sn_device *d = devs->items[i];
        if (strlen(d->ops->kind) == kind_len &&
            !memcmp(d->ops->kind, item, kind_len) && d->info.index == v &&
            ON_PROC(d)) {
            choose(i, idx, cap, n, seen);
            return SHARDNET_OK;
        }
    }
    {
        size_t have = 0;
        for (size_t i = 0; i < devs->count; i++)
            if (strlen(devs->items[i]->ops->kind) == kind_len &&
                !memcmp(devs->items[i]->ops->kind, item, kind_len))
                have++;
        return sn_error(SHARDNET_NO_DEVICE,
                        "no device '%s' (%s %zu %.*s device%s)", whole,
                        sn_world_processes() > 1 ? "the job has"
                                                 : "this machine has",
                        have, (int)kind_len, item, have == 1 ? "" : "s");
    }
#undef ON_PROC
}

shardnet_status shardnet_devices_select(const shardnet_context_t *ctx,
                                        const char *spec, size_t *idx,
                                        size_t cap, size_t *count)
{
    unsigned char *seen;
    char *copy, *save = NULL;
    size_t n = 0;
    shardnet_status st = SHARDNET_OK;

    if (!ctx || !count || (cap && !idx))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "device selection: NULL argument");
    *count = 0;
    if (!spec || !*spec)
        spec = *ctx->config.devices ? ctx->config.devices : "all";
    seen = calloc(ctx->devices.count + 1, 1);
    copy = strdup(spec);
    if (!seen || !copy) {
        free(seen);
        free(copy);
        return sn_error(SHARDNET_OUT_OF_MEMORY, "device selection");
    }
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
        st = select_item(ctx, tok, idx, cap, &n, seen);
        if (st != SHARDNET_OK)
            break;
    }
    if (st == SHARDNET_OK) {
        size_t len = strlen(spec);
        if (strstr(spec, ",,") || spec[0] == ',' || spec[len - 1] == ',')
            st = sn_error(SHARDNET_NO_DEVICE, "empty item in device list '%s'",
                          spec);
        else if (n == 0)
            st = sn_error(SHARDNET_NO_DEVICE, "device list '%s' selects nothing",
                          spec);
        else if (n > cap)
            st = sn_error(SHARDNET_INVALID_ARGUMENT,
                          "device list '%s' selects %zu devices, room for %zu",
                          spec, n, cap);
    }
    free(seen);
    free(copy);
    if (st == SHARDNET_OK || st == SHARDNET_INVALID_ARGUMENT)
        *count = n;
    return st;
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
