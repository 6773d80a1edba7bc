/*
 * The registry of backends: the list of the backends compiled in, the kinds
 * device strings may name, and the device list discovery fills.
 *
 * This table is the one place outside backends/<kind>/ that names a
 * backend: adding one is a folder that exports an sn_backend, and a line
 * here.  Each backend states the SN_BACKEND_ABI it was written against and
 * the registry refuses one that states another, so that a backend built
 * against an older interface fails with a message instead of calling
 * through a vtable of another shape.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "core/grow.h"

/* Exported by backends/<kind>/. */
extern const sn_backend sn_cpu_backend;
#ifdef SN_HAVE_OPENCL
extern const sn_backend sn_opencl_backend;
#endif
#ifdef SN_HAVE_CUDA
extern const sn_backend sn_cuda_backend;
#endif

/* The compiled backends, in the order their devices are listed. */
static const sn_backend *const compiled[] = {
    &sn_cpu_backend,
#ifdef SN_HAVE_OPENCL
    &sn_opencl_backend,
#endif
#ifdef SN_HAVE_CUDA
    &sn_cuda_backend,
#endif
};

/* A device of another process of the job: a description, freed alone. */
static void remote_free(sn_device *dev)
{
    free(dev);
}

#define KIND_(name, device_kind)                                              \
    {name, device_kind,                                                       \
     {.abi = SN_BACKEND_ABI, .kind = name, .device_free = remote_free}}

/* Every kind a device string may name, compiled in or not (a device list
 * written for another machine names them): the device kind of the public
 * API it is, and the vtable of the other processes' devices of that kind
 * (descriptions, no buffers and no kernels). */
static const struct {
    const char *name;
    shardnet_device_kind kind;
    sn_backend_ops remote;
} kinds[] = {
    KIND_("cpu", SHARDNET_DEVICE_CPU),
    KIND_("cl", SHARDNET_DEVICE_OPENCL),
    KIND_("cuda", SHARDNET_DEVICE_CUDA),
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

shardnet_status sn_device_list_push(sn_device_list *list, sn_device *dev)
{
    if (dev->ops->abi != SN_BACKEND_ABI)
        return sn_error(SHARDNET_INTERNAL,
                        "device %s: its backend ('%s') states backend "
                        "interface %u, this library has %u",
                        dev->info.name, dev->ops->kind, dev->ops->abi,
                        (unsigned)SN_BACKEND_ABI);
    sn_device **items = sn_grow(list->items, &list->cap, list->count,
                                sizeof *items, 8);
    if (!items)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "device list");
    list->items = items;
    list->items[list->count++] = dev;
    return SHARDNET_OK;
}

void sn_device_list_free(sn_device_list *list)
{
    for (size_t i = 0; i < list->count; i++) {
        sn_device *dev = list->items[i];
        dev->ops->device_free(dev);
    }
    free(list->items);
    list->items = NULL;
    list->count = list->cap = 0;
}

/* Free the devices appended after the first `keep`. */
static void list_truncate(sn_device_list *list, size_t keep)
{
    while (list->count > keep) {
        sn_device *dev = list->items[--list->count];
        dev->ops->device_free(dev);
    }
}

shardnet_status sn_backend_discover(const sn_backend *backend,
                                    sn_device_list *list,
                                    const sn_discover_args *args)
{
    size_t before = list->count;
    shardnet_status st;
    if (backend->abi != SN_BACKEND_ABI)
        return sn_error(SHARDNET_INTERNAL,
                        "backend '%s' states backend interface %u, this "
                        "library has %u: rebuild the backend with this "
                        "library's lib/backend/backend.h",
                        backend->kind, backend->abi,
                        (unsigned)SN_BACKEND_ABI);
    st = backend->discover(list, args);
    if (st != SHARDNET_OK) {
        list_truncate(list, before);
        sn_error_prefix(st, "discovering %s devices", backend->kind);
    }
    return st;
}

shardnet_status sn_backends_discover(sn_device_list *list,
                                     const sn_discover_args *args)
{
    size_t before = list->count;
    for (size_t i = 0; i < sizeof compiled / sizeof compiled[0]; i++) {
        shardnet_status st = sn_backend_discover(compiled[i], list, args);
        if (st != SHARDNET_OK) {
            list_truncate(list, before);
            return st;
        }
    }
    return SHARDNET_OK;
}

int sn_backend_kind_known(const char *kind, size_t len)
{
    for (size_t i = 0; i < NKINDS; i++)
        if (strlen(kinds[i].name) == len && !memcmp(kinds[i].name, kind, len))
            return 1;
    return 0;
}

void sn_backend_kinds(char *buf, size_t cap)
{
    size_t len = 0;
    if (cap)
        buf[0] = '\0';
    for (size_t i = 0; i < NKINDS && len < cap; i++) {
        int w = snprintf(buf + len, cap - len, "%s%s", i ? ", " : "",
                         kinds[i].name);
        if (w < 0)
            break;
        len += (size_t)w;
    }
}

shardnet_status sn_remote_device_new(const shardnet_device_info *info,
                                     sn_device **out)
{
    size_t k = 0; /* a kind this build does not know: described as a CPU */
    sn_device *dev;
    for (size_t i = 0; i < NKINDS; i++)
        if (kinds[i].kind == info->kind)
            k = i;
    if (!(dev = calloc(1, sizeof *dev)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "devices of the job");
    dev->ops = &kinds[k].remote;
    dev->info = *info;
    dev->remote = 1;
    *out = dev;
    return SHARDNET_OK;
}
