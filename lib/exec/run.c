/* Running a plan: its inputs lent to the device or copied into it, its
 * steps launched on the device's in-order queue (collectives handed to
 * the runtime's hook), its outputs copied back, and one wait, on an event
 * after the last copy; then the outputs in their own types. */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_impl.h"
#include "core/file.h"
#include "core/trace.h"

static void return_inputs(sn_plan *p);
static shardnet_status run_and_read(sn_plan *p);
static shardnet_status read_outputs(sn_plan *p);

shardnet_status sn_plan_run(sn_plan *p, const sn_binding *inputs)
{
    shardnet_status st;
    sn_graph *g = p->g;

    /* Inputs: lent to the device where its buffers are host memory (no
     * copy), else copied into the staging buffers, in the queue's order:
     * the caller's memory stays as it is until this returns, which is
     * after a wait for the whole queue, whatever fails. */
    int lend = p->dev->ops->buffer_lend != NULL;
    int timing = sn_trace_on();
    double t0 = timing ? sn_trace_now() : 0;
    for (size_t i = 0; i < g->ninputs; i++) {
        if (!p->input_buf[i])
            continue;
        st = lend && inputs[i].nbytes
                 ? p->dev->ops->buffer_lend(p->input_buf[i],
                                            (void *)inputs[i].data)
                 : sn_buffer_write_async(p->input_buf[i], 0, inputs[i].data,
                                         inputs[i].nbytes);
        if (st != SHARDNET_OK) {
            sn_synchronize(p->dev);
            return_inputs(p);
            return sn_error_prefix(st, "input '%s'",
                                   g->values[g->inputs[i]].name);
        }
    }
    /* Timed runs wait for the copies here, so that they are not counted
     * in the first node's time. */
    if (timing && (st = sn_synchronize(p->dev)) != SHARDNET_OK) {
        return_inputs(p);
        return st;
    }
    if (sn_trace_on())
        sn_trace_add(p->dev->info.name, "transfer",
                     lend ? "inputs (lent)" : "inputs to device", t0,
                     sn_trace_now());
    st = run_and_read(p);
    return_inputs(p);
    return st;
}

/* Give lent input memory back to the staging buffers. */
static void return_inputs(sn_plan *p)
{
    if (!p->dev->ops->buffer_lend)
        return;
    for (size_t i = 0; i < p->g->ninputs; i++)
        if (p->input_buf[i])
            p->dev->ops->buffer_lend(p->input_buf[i], NULL);
}

/* Where the run goes on after branch or jump step s: a branch reads its
 * condition (a blocking read: it waits for the steps that compute it). */
static shardnet_status branch_to(sn_plan *p, size_t s, size_t *to)
{
    const sn_step *b = &p->steps[s];
    float c = 0;
    shardnet_status st;
    *to = b->branch.target;
    if (b->kind == SN_STEP_JUMP)
        return SHARDNET_OK;
    st = sn_buffer_read(b->branch.cond.buf,
                        b->branch.cond.offset * sizeof(float), &c, sizeof c);
    if (st != SHARDNET_OK) {
        const sn_node *n = &p->g->nodes[b->node];
        sn_synchronize(p->dev);
        return sn_error_prefix(st, "node '%s' (%s): reading its condition",
                               n->name, n->op_type);
    }
    if (c != 0)
        *to = s + 1;
    return SHARDNET_OK;
}

/* Launch the steps, then read the outputs back. */
static shardnet_status run_and_read(sn_plan *p)
{
    shardnet_status st;
    sn_graph *g = p->g;
    int tracing = sn_trace_on();
    for (size_t s = 0; s < p->nsteps; s++) {
        const sn_node *n = &g->nodes[p->steps[s].node];
        double t0 = tracing ? sn_trace_now() : 0;
        if (p->steps[s].kind == SN_STEP_BRANCH ||
            p->steps[s].kind == SN_STEP_JUMP) {
            size_t to;
            if ((st = branch_to(p, s, &to)) != SHARDNET_OK)
                return st;
            s = to - 1;
            continue;
        }
        if (p->steps[s].kind == SN_STEP_COLLECTIVE) {
            if (!p->coll_hook) {
                sn_synchronize(p->dev);
                return sn_error(SHARDNET_UNSUPPORTED,
                                "node '%s' (%s): a collective outside a "
                                "tensor split",
                                n->name, n->op_type);
            }
            if ((st = sn_synchronize(p->dev)) != SHARDNET_OK ||
                (st = p->coll_hook(p->coll_ctx, &p->steps[s].coll)) !=
                    SHARDNET_OK)
                return st;
            continue;
        }
        /* A first run: the node's weights read in place come from the
         * file in the order the run needs them (sn_wait_file_pages). */
        for (size_t i = 0; sn_file_pages_pending() && i < n->ninputs; i++)
            if (n->inputs[i] >= 0)
                sn_value_wait_pages(&g->values[n->inputs[i]]);
        if ((st = sn_launch(p->dev, (sn_kernel)p->steps[s].kind,
                            &p->steps[s].u)) != SHARDNET_OK) {
            sn_synchronize(p->dev);
            return sn_error_prefix(st, "node '%s' (%s)", n->name, n->op_type);
        }
        if (tracing) { /* wait, so that the kernel's time is its own */
            char name[96];
            sn_synchronize(p->dev);
            snprintf(name, sizeof name, "%s %s", n->op_type, n->name);
            sn_trace_add(p->dev->info.name, "kernel", name, t0,
                         sn_trace_now());
        }
    }
    return read_outputs(p);
}

/* Output i's host tensor, shaped and sized for this run.  Its memory is
 * the device's staging memory (sn_staging_alloc: pinned for a GPU, so that
 * the copy back runs at the link's speed and truly in the queue), kept
 * from run to run while the size holds. */
static shardnet_status prepare_output(sn_plan *p, size_t i)
{
    const sn_graph *g = p->g;
    const sn_rt *rt = &p->rt[g->outputs[i]];
    sn_host_tensor *t = &p->outputs[i];
    size_t bytes = sn_rt_elements(rt) * sn_dtype_size(rt->dtype);
    if (!t->data || t->nbytes != bytes) {
        sn_staging_free(t->data);
        t->data = sn_staging_alloc(p->dev, bytes ? bytes : 1);
        if (!t->data)
            return sn_error(SHARDNET_OUT_OF_MEMORY, "output");
    }
    t->name = g->values[g->outputs[i]].name; /* borrowed */
    t->dtype = rt->dtype;
    t->rank = rt->rank;
    memcpy(t->dims, rt->dims, sizeof t->dims);
    t->nbytes = bytes;
    return SHARDNET_OK;
}

/*
 * Copy the outputs back after the steps, all in the queue's order, and
 * wait once, on an event after the last copy (which also reports a
 * failed kernel).  A float output lands in its host tensor; another type
 * lands as floats in staging[i] first, converted once the copies are done.
 * Whatever fails, nothing is left in flight when this returns.
 */
static shardnet_status read_outputs(sn_plan *p)
{
    shardnet_status st = SHARDNET_OK;
    const sn_graph *g = p->g;
    int tracing = sn_trace_on();
    double t_out = tracing ? sn_trace_now() : 0;
    float **staging = calloc(g->noutputs ? g->noutputs : 1, sizeof *staging);
    sn_event *done = NULL;

    if (!staging)
        st = sn_error(SHARDNET_OUT_OF_MEMORY, "output");
    for (size_t i = 0; i < g->noutputs && st == SHARDNET_OK; i++) {
        const sn_rt *rt = &p->rt[g->outputs[i]];
        sn_host_tensor *t = &p->outputs[i];
        size_t count = sn_rt_elements(rt);
        size_t at = rt->view.offset * sizeof(float);
        if ((st = prepare_output(p, i)) != SHARDNET_OK)
            break;
        if (rt->host) {
            memcpy(t->data, rt->host, t->nbytes);
        } else if (rt->dtype == SN_DT_FLOAT) {
            st = sn_buffer_read_async(rt->view.buf, at, t->data, t->nbytes);
        } else if (!(staging[i] = malloc((count ? count : 1) * sizeof(float)))) {
            st = sn_error(SHARDNET_OUT_OF_MEMORY, "output");
        } else {
            st = sn_buffer_read_async(rt->view.buf, at, staging[i],
                                      count * sizeof(float));
        }
    }
    if (st == SHARDNET_OK &&
        (st = sn_event_record(p->dev, &done)) == SHARDNET_OK)
        st = sn_event_wait(done);
    else /* the wait not reached: no copy may outlive its memory */
        sn_synchronize(p->dev);
    sn_event_free(done);
    for (size_t i = 0; staging && i < g->noutputs; i++) {
        if (st == SHARDNET_OK && staging[i])
            sn_from_float(p->outputs[i].dtype, staging[i], p->outputs[i].data,
                          sn_rt_elements(&p->rt[g->outputs[i]]));
        free(staging[i]);
    }
    free(staging);
    if (tracing && st == SHARDNET_OK)
        sn_trace_add(p->dev->info.name, "transfer", "outputs to host", t_out,
                     sn_trace_now());
    return st;
}

void sn_plan_set_collective(sn_plan *p, sn_coll_hook hook, void *ctx)
{
    p->coll_hook = hook;
    p->coll_ctx = ctx;
}
