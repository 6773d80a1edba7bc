/* The operators of the public API (include/shardnet.h): the operator
 * registry of lib/ops as a list, and which backends run each operator,
 * told by the devices of a context from the kernels the operator's entry
 * names. */
#include <config.h>

#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "core/error.h"
#include "ops/registry.h"

size_t shardnet_operator_count(void)
{
    return sn_operator_count();
}

shardnet_status shardnet_operator_get(size_t i, shardnet_operator_info *info)
{
    const sn_operator *op = sn_operator_at(i);
    if (!info)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "info is NULL");
    if (!op)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "operator %zu: the registry has %zu", i,
                        sn_operator_count());
    info->name = op->def.op_type;
    info->domain = *op->domain ? op->domain : "ai.onnx";
    info->since_opset = op->def.since;
    info->until_opset = op->def.until;
    return SHARDNET_OK;
}

/* Is kind among the first n devices' kinds that run op? */
static int kind_told(const shardnet_context_t *ctx, size_t n,
                     const sn_operator *op, const char *kind)
{
    for (size_t j = 0; j < n; j++) {
        const sn_device *d = sn_context_device(ctx, j);
        if (!d->remote && !strcmp(d->ops->kind, kind) &&
            sn_device_runs(d, op->uses, NULL))
            return 1;
    }
    return 0;
}

shardnet_status shardnet_operator_backends(const shardnet_context_t *ctx,
                                           size_t i, char *buf, size_t cap)
{
    const sn_operator *op = sn_operator_at(i);
    size_t ndev = shardnet_device_count(ctx), len = 0;
    if (!ctx || (!buf && cap))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "operator backends: NULL argument");
    if (!op)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "operator %zu: the registry has %zu", i,
                        sn_operator_count());
    if (cap)
        buf[0] = '\0';
    for (size_t j = 0; j < ndev; j++) {
        const sn_device *d = sn_context_device(ctx, j);
        const char *kind = d->ops->kind;
        if (d->remote || !sn_device_runs(d, op->uses, NULL) ||
            kind_told(ctx, j, op, kind))
            continue;
        if (len < cap)
            snprintf(buf + len, cap - len, "%s%s", len ? "," : "", kind);
        len += strlen(kind) + (len ? 1 : 0);
    }
    return SHARDNET_OK;
}
