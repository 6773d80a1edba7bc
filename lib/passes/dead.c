/*
 * The pass that removes nodes no graph output depends on.
 */
#include <config.h>

#include <stdlib.h>

#include "passes/rewrite.h"

/* Nodes none of whose outputs is used (transitively) by a graph output. */
shardnet_status sn_pass_remove_dead(sn_graph *g, size_t *removed)
{
    int *uses = sn_pass_use_counts(g);
    *removed = 0;
    if (!uses)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "removing dead nodes");
    /* Sorted: walking backwards sees every consumer before its producer. */
    for (size_t k = g->nnodes; k-- > 0;) {
        sn_node *n = &g->nodes[k];
        int live = 0;
        if (n->dead)
            continue;
        for (size_t j = 0; j < n->noutputs; j++)
            if (n->outputs[j] >= 0 && uses[n->outputs[j]] > 0)
                live = 1;
        if (live)
            continue;
        n->dead = 1;
        (*removed)++;
        for (size_t j = 0; j < n->ninputs; j++)
            if (n->inputs[j] >= 0)
                uses[n->inputs[j]]--;
    }
    free(uses);
    return SHARDNET_OK;
}
