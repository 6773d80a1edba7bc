/*
 * The graph passes in the order they run (lib/passes/passes.h), each
 * reporting what it did at debug level.
 */
#include <config.h>

#include "exec/exec.h"
#include "passes/passes.h"

/* Each pass, and what its count counts ("%zu nodes folded ..."). */
static const struct {
    shardnet_status (*run)(sn_graph *g, size_t *count);
    const char *done;
} passes[] = {
    {sn_pass_fold_constants, "nodes folded to constants"},
    {sn_pass_fold_pad, "pads folded into convolutions"},
    {sn_pass_fold_batchnorm, "batch norms folded"},
    {sn_pass_fold_affine, "scales and shifts folded into convolutions"},
    {sn_pass_fuse_gate, "gates (SiLU, hard swish) fused"},
    {sn_pass_fuse_bias, "biases fused"},
    {sn_pass_fuse_activation, "activations fused"},
    {sn_pass_fuse_binary_activation, "activations fused into binary ops"},
    {sn_pass_fuse_residual, "residual adds fused into convolutions"},
    {sn_pass_quantized_products, "products by quantized weights kept small"},
    {sn_pass_integer_sums, "integer products read as float"},
    {sn_pass_remove_dead, "dead nodes removed"},
};

shardnet_status sn_passes_run(sn_graph *g)
{
    for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++) {
        size_t n;
        shardnet_status st = passes[i].run(g, &n);
        if (st != SHARDNET_OK)
            return st;
        sn_log(SHARDNET_LOG_DEBUG, "passes: %zu %s", n, passes[i].done);
    }
    return SHARDNET_OK;
}
