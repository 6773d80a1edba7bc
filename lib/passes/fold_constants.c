/*
 * Constant folding: every node whose inputs are all constants and whose
 * lowering can compute on the host (shape arithmetic, Constant, Cast,
 * integer element-wise ops, ...) is evaluated once, its outputs become
 * constants of the graph and the node is removed.  It runs the operators'
 * own lowerings without a device (sn_lower with no plan): an operator that
 * needs one says so and is left alone.  A pass of its own because it is
 * the one pass that reads the operator registry.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "ops/registry.h"
#include "passes/passes.h"
#include "passes/rewrite.h"

shardnet_status sn_pass_fold_constants(sn_graph *g, size_t *folded)
{
    sn_rt *rt = calloc(g->nvalues + 1, sizeof *rt);
    sn_lower L = {.g = g, .rt = rt};
    shardnet_status st = SHARDNET_OK;
    *folded = 0;
    if (!rt)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "constant folding");
    for (size_t i = 0; i < g->nvalues; i++) {
        const sn_value *v = &g->values[i];
        if (!(v->flags & SN_VALUE_CONST))
            continue;
        rt[i].known = 1;
        rt[i].dtype = v->dtype;
        rt[i].rank = v->rank;
        memcpy(rt[i].dims, v->dims, sizeof rt[i].dims);
        rt[i].host = v->data ? v->data : ""; /* empty tensors too */
    }
    for (size_t ni = 0; ni < g->nnodes; ni++) {
        sn_node *n = &g->nodes[ni];
        const sn_op_def *op = sn_op_find(n->domain, n->op_type);
        int ready = op != NULL && !n->dead;
        for (size_t i = 0; ready && i < n->ninputs; i++)
            ready = n->inputs[i] < 0 || rt[n->inputs[i]].host != NULL;
        if (!ready || (int)n->ninputs < op->min_inputs ||
            (int)n->ninputs > op->max_inputs ||
            sn_pass_keeps_quantized(g, n)) /* stays small: a later pass */
            continue;
        if (op->lower(&L, n) != SHARDNET_OK) {
            sn_error_clear();
            for (size_t o = 0; o < n->noutputs; o++)
                if (n->outputs[o] >= 0) {
                    sn_rt *r = &rt[n->outputs[o]];
                    free(r->host_owned);
                    memset(r, 0, sizeof *r);
                }
            continue;
        }
        int all_host = 1;
        for (size_t o = 0; o < n->noutputs; o++)
            if (n->outputs[o] >= 0 && !rt[n->outputs[o]].host)
                all_host = 0;
        if (!all_host)
            continue;
        /* Move the results into the graph as constants. */
        for (size_t o = 0; o < n->noutputs; o++) {
            int vi = n->outputs[o];
            if (vi < 0)
                continue;
            sn_rt *r = &rt[vi];
            sn_value *v = &g->values[vi];
            size_t bytes = sn_rt_elements(r) * sn_dtype_size(r->dtype);
            void *data = r->host_owned;
            if (!data) { /* an alias of another constant: copy it */
                data = malloc(bytes ? bytes : 1);
                if (!data) {
                    st = sn_error(SHARDNET_OUT_OF_MEMORY, "constant folding");
                    goto out;
                }
                memcpy(data, r->host, bytes);
            }
            free(v->owned);
            v->owned = data;
            v->data = data;
            v->nbytes = bytes;
            v->dtype = r->dtype;
            v->rank = r->rank;
            memcpy(v->dims, r->dims, sizeof v->dims);
            v->flags |= SN_VALUE_CONST;
            v->producer = -1;
            r->host = data;
            r->host_owned = NULL;
        }
        n->dead = 1;
        (*folded)++;
    }
out:
    for (size_t i = 0; i < g->nvalues; i++)
        free(rt[i].host_owned);
    free(rt);
    return st;
}
