/*
 * The graph passes in the order they run (lib/passes/passes.h), each
 * reporting what it did at debug level.
 */
#include <config.h>

#include "exec/exec.h"
#include "passes/passes.h"

shardnet_status sn_passes_run(sn_graph *g)
{
    size_t n;
    shardnet_status st;
    if ((st = sn_pass_fold_constants(g, &n)) != SHARDNET_OK)
        return st;
    sn_log(SHARDNET_LOG_DEBUG, "passes: %zu nodes folded to constants", n);
    if ((st = sn_pass_fold_batchnorm(g, &n)) != SHARDNET_OK)
        return st;
    sn_log(SHARDNET_LOG_DEBUG, "passes: %zu batch norms folded", n);
    if ((st = sn_pass_fuse_bias(g, &n)) != SHARDNET_OK)
        return st;
    sn_log(SHARDNET_LOG_DEBUG, "passes: %zu biases fused", n);
    if ((st = sn_pass_fuse_activation(g, &n)) != SHARDNET_OK)
        return st;
    sn_log(SHARDNET_LOG_DEBUG, "passes: %zu activations fused", n);
    if ((st = sn_pass_remove_dead(g, &n)) != SHARDNET_OK)
        return st;
    sn_log(SHARDNET_LOG_DEBUG, "passes: %zu dead nodes removed", n);
    return SHARDNET_OK;
}

