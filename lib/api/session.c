/* Sessions of the public API: a model on the devices a caller lists, with
 * the split asked for (or read from a plan file); its inputs bound and
 * its outputs read.  How a session chooses its split is split.c's, how
 * it runs run.c's, what a plan file says planfile.c's. */
#include <config.h>

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_impl.h"
#include "comm/world.h"

shardnet_status shardnet_session_create(shardnet_context_t *ctx,
                                        shardnet_model_t *model,
                                        const char *devices,
                                        shardnet_session_t **out)
{
    return shardnet_session_create_with(ctx, model, devices, NULL, out);
}

static shardnet_status session_create(shardnet_context_t *ctx,
                                      shardnet_model_t *model,
                                      const char *devices, const char *split,
                                      const shardnet_session_options *options,
                                      plan_file *pfp,
                                      shardnet_session_t **out);

/* The caller's options (NULL: the defaults) as this library's struct: the
 * size the caller states, fields past it left at their defaults, and
 * refused when it sets options this library does not know (see
 * shardnet_session_options). */
static shardnet_status session_options_read(const shardnet_session_options *in,
                                            shardnet_session_options *o)
{
    const size_t first =
        offsetof(shardnet_session_options, plan_file) + sizeof in->plan_file;
    shardnet_status st = sn_options_read(in, o, first, sizeof *o, "session");
    o->size = sizeof *o;
    return st;
}

shardnet_status shardnet_session_create_with(
    shardnet_context_t *ctx, shardnet_model_t *model, const char *devices,
    const shardnet_session_options *caller_options, shardnet_session_t **out)
{
    shardnet_status st;
    shardnet_session_options opts;
    const shardnet_session_options *options = &opts;
    const char *split;
    plan_file pf;
    int from_file;

    if (!ctx || !model || !out)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "session: NULL argument");
    *out = NULL;
    if ((st = session_options_read(caller_options, &opts)) != SHARDNET_OK)
        return st;
    split = options->split;
    from_file = options->plan_file != NULL;
    /* A mapped model's files must still be what was loaded. */
    if ((st = sn_model_files_check(model->files, model->nfiles)) !=
        SHARDNET_OK)
        return st;
    if (from_file) {
        if ((st = sn_plan_file_read(options->plan_file, &pf)) != SHARDNET_OK)
            return st;
        split = pf.split;
        if (!devices || !*devices)
            devices = pf.devices;
    }
    if (from_file && pf.nstrat && strcmp(split, "tensor") &&
        strcmp(split, "hybrid")) {
        free(pf.strat);
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "plan %s: strategies are for split 'tensor' or "
                        "'hybrid', not '%s'",
                        options->plan_file, split);
    }
    st = session_create(ctx, model, devices, split, options,
                        from_file ? &pf : NULL, out);
    if (from_file && st != SHARDNET_OK)
        free(pf.strat);
    return st;
}

/* A plan file's counts added up (each at most SN_MAX_ELEMENTS, at most
 * MAX_SPLIT of them). */
static size_t sum_of(const size_t *v, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += v[i];
    return total;
}

static shardnet_status session_create(shardnet_context_t *ctx,
                                      shardnet_model_t *model,
                                      const char *devices, const char *split,
                                      const shardnet_session_options *options,
                                      plan_file *pfp,
                                      shardnet_session_t **out)
{
    shardnet_session_t *s;
    size_t idx[MAX_SPLIT], n = 0;
    shardnet_status st;
    char unsupported[1024];
    int layer, autosplit;
    int from_file = pfp != NULL;
    plan_file pf;
    if (pfp)
        pf = *pfp;
    if (split && strcmp(split, "none") && strcmp(split, "layer") &&
        strcmp(split, "auto") && strcmp(split, "tensor") &&
        strcmp(split, "hybrid") && strcmp(split, "data") &&
        strcmp(split, "replicated"))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "split '%s' is not available (this version has "
                        "'none', 'layer', 'tensor', 'hybrid', 'replicated', "
                        "'data' and 'auto')",
                        split);
    if (shardnet_model_unsupported(model, unsupported, sizeof unsupported))
        return sn_error(SHARDNET_UNSUPPORTED, "unsupported operators: %s",
                        unsupported);
    st = shardnet_devices_select(ctx, devices, idx, MAX_SPLIT, &n);
    if (st != SHARDNET_OK)
        return st;
    /* Several devices default to "auto"; "none" needs exactly one. */
    if (!split)
        split = n > 1 ? "auto" : "none";
    int hybrid = !strcmp(split, "hybrid");
    int replicated = !strcmp(split, "replicated");
    layer = !strcmp(split, "layer") || hybrid || replicated;
    autosplit = !strcmp(split, "auto");
    int tensor = !strcmp(split, "tensor");
    int data = !strcmp(split, "data");
    if (hybrid && n < 3)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "a hybrid split needs three devices or more (it "
                        "tensor-splits stages across groups of them)");
    if (replicated && n < 2)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "a replicated split needs two devices or more (a "
                        "stage runs on several, taking micro-batches in "
                        "turn)");
    if (n > 1 && !layer && !autosplit && !tensor && !data)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "device list '%s' names %zu devices but the split is "
                        "'none': name one device, or split 'layer' or 'auto'",
                        devices ? devices : "", n);
    s = calloc(1, sizeof *s);
    if (!s)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "session");
    s->model = model;
    s->dev = sn_context_device(ctx, idx[0]);
    for (size_t i = 0; i < n; i++)
        s->devs[i] = sn_context_device(ctx, idx[i]);
    s->nlisted = n;
    s->ndev = layer || ((tensor || data) && n > 1) ? n : 1;
    s->tensor = tensor && n > 1;
    s->data = data && n > 1;
    s->choose = autosplit && n > 1;
    s->replicated = replicated;
    /* In a job of several processes every process runs the same session;
     * a layer (or hybrid) split carries values and outputs between them. */
    s->multi = sn_world_processes() > 1;
    for (size_t i = 0; i < shardnet_device_count(ctx) && !s->home; i++)
        if (!sn_context_device(ctx, i)->remote)
            s->home = sn_context_device(ctx, i);
    s->micro = options ? options->micro_batches : 0;
    if (from_file) {
        if (!s->micro)
            s->micro = pf.micro;
        if (pf.ngroups) {
            size_t total = sum_of(pf.groups, pf.ngroups);
            if (!hybrid || total != n || pf.ngroups < 2) {
                free(s);
                return sn_error(SHARDNET_INVALID_ARGUMENT,
                                "plan %s: groups of %zu devices in all for a "
                                "'%s' split over %zu devices (a hybrid split "
                                "needs two groups or more covering the list)",
                                options->plan_file, total, split, n);
            }
            memcpy(s->groups, pf.groups, pf.ngroups * sizeof pf.groups[0]);
            s->ngroups = pf.ngroups;
        }
        if (pf.nreps) {
            size_t total = sum_of(pf.reps, pf.nreps);
            if (!replicated || total != n) {
                free(s);
                return replicated
                           ? sn_error(SHARDNET_INVALID_ARGUMENT,
                                      "plan %s: replicas of %zu devices in "
                                      "all for a replicated split over %zu "
                                      "devices (the counts must cover the "
                                      "list)",
                                      options->plan_file, total, n)
                           : sn_error(SHARDNET_INVALID_ARGUMENT,
                                      "plan %s: replicas are for split "
                                      "'replicated', not '%s'",
                                      options->plan_file, split);
            }
            memcpy(s->reps, pf.reps, pf.nreps * sizeof pf.reps[0]);
            s->nreps = pf.nreps;
        }
        if (pf.nrows) {
            size_t total = sum_of(pf.rows, pf.nrows);
            if (!data || pf.nrows != n || !total) {
                free(s);
                return data ? sn_error(SHARDNET_INVALID_ARGUMENT,
                                       "plan %s: rows for %zu devices in a "
                                       "data split over %zu (it needs a "
                                       "count per device, not all 0)",
                                       options->plan_file, pf.nrows, n)
                            : sn_error(SHARDNET_INVALID_ARGUMENT,
                                       "plan %s: rows are for split 'data', "
                                       "not '%s'",
                                       options->plan_file, split);
            }
            memcpy(s->data_rows, pf.rows, n * sizeof pf.rows[0]);
            memcpy(s->data_plan_rows, pf.rows, n * sizeof pf.rows[0]);
            s->data_batch = total;
            s->have_data_rows = s->data_rows_fixed = 1;
        }
        if (pf.have_cuts) {
            size_t stages = s->ngroups ? s->ngroups
                            : s->nreps ? s->nreps
                                       : n;
            if (replicated && !s->nreps) {
                free(s);
                return sn_error(SHARDNET_INVALID_ARGUMENT,
                                "plan %s: cuts of a replicated split need "
                                "its 'replicas' line",
                                options->plan_file);
            }
            if (!layer || pf.ncuts + 1 != stages) {
                free(s);
                return sn_error(SHARDNET_INVALID_ARGUMENT,
                                "plan %s: %zu cuts for a '%s' split of %zu "
                                "stages (it needs stages - 1)",
                                options->plan_file, pf.ncuts, split, stages);
            }
            memcpy(s->cuts, pf.cuts, pf.ncuts * sizeof pf.cuts[0]);
            s->have_cuts = 1;
        }
    }
    if (replicated && !s->nreps) {
        /* No replicas given: the planner's best configuration. */
        s->reps[0] = n;
        s->nreps = 1;
        s->replicated_default = 1;
    }
    if (hybrid && !s->ngroups) {
        /* No groups given: two stages, the list cut in half. */
        s->groups[0] = n / 2;
        s->groups[1] = n - n / 2;
        s->ngroups = 2;
        s->hybrid_default = 1;
    }
    s->inputs = calloc(model->g->ninputs + 1, sizeof *s->inputs);
    s->bound = calloc(model->g->ninputs + 1, sizeof *s->bound);
    if (!s->inputs || !s->bound ||
        (!s->multi &&
         (st = sn_weights_new(model->g, s->dev, &s->w)) != SHARDNET_OK)) {
        shardnet_session_free(s);
        return st ? st : sn_error(SHARDNET_OUT_OF_MEMORY, "session");
    }
    if (from_file) {
        s->strat = pf.strat; /* taken */
        s->nstrat = pf.nstrat;
    }
    *out = s;
    return SHARDNET_OK;
}

void shardnet_session_free(shardnet_session_t *session)
{
    if (!session)
        return;
    for (int i = 0; i < PLAN_CACHE; i++)
        sn_plan_free(session->plans[i]);
    sn_pipeline_free(session->pipe);
    sn_pipeline_free(session->hyb_probe);
    free(session->hyb_for);
    free(session->hyb_said);
    sn_tensor_split_free(session->ts);
    sn_data_split_free(session->ds);
    free(session->strat);
    free(session->found_for);
    free(session->found);
    free(session->found_report);
    sn_weights_free(session->w);
    free(session->inputs);
    free(session->bound);
    free(session);
}

shardnet_status shardnet_session_input_index(const shardnet_session_t *session,
                                             const char *name, size_t *index)
{
    const sn_graph *g;
    if (!session || !name || !index)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "input index: NULL");
    g = session->model->g;
    for (size_t i = 0; i < g->ninputs; i++)
        if (!strcmp(g->values[g->inputs[i]].name, name)) {
            *index = i;
            return SHARDNET_OK;
        }
    return sn_error(SHARDNET_INVALID_ARGUMENT, "the model has no input '%s'",
                    name);
}

shardnet_status shardnet_session_set_input(shardnet_session_t *session,
                                           size_t index, shardnet_dtype dtype,
                                           int rank, const int64_t *dims,
                                           const void *data)
{
    sn_binding *b;
    size_t count = 1, es = shardnet_dtype_size(dtype);
    if (!session || index >= session->model->g->ninputs)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "no input %zu", index);
    if (!es || rank < 0 || rank > SHARDNET_MAX_DIMS || (rank && !dims))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "input %zu: bad type or rank", index);
    for (int i = 0; i < rank; i++)
        if (dims[i] < 0 ||
            __builtin_mul_overflow(count, (size_t)dims[i], &count) ||
            count > (size_t)SN_MAX_ELEMENTS)
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "input %zu: bad dimension %d", index, i);
    if (!data && count) /* an empty tensor needs no data */
        return sn_error(SHARDNET_INVALID_ARGUMENT, "input %zu: NULL data",
                        index);
    b = &session->inputs[index];
    b->dtype = (sn_dtype)dtype;
    b->rank = rank;
    memset(b->dims, 0, sizeof b->dims);
    for (int i = 0; i < rank; i++)
        b->dims[i] = dims[i];
    b->data = data ? data : "";
    b->nbytes = count * es;
    session->bound[index] = 1;
    return SHARDNET_OK;
}

shardnet_status shardnet_session_output(shardnet_session_t *session,
                                        size_t index,
                                        shardnet_tensor_info *info,
                                        const void **data)
{
    const sn_host_tensor *t;
    if (!session ||
        (!session->last && !session->pipe && !session->ts && !session->ds))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "output: the session has not run");
    if (session->tensor && session->ts)
        t = sn_tensor_split_output(session->ts, index);
    else if (session->data && session->ds)
        t = sn_data_split_output(session->ds, index);
    else
        t = session->pipe ? sn_pipeline_output(session->pipe, index)
                          : sn_plan_output(session->last, index);
    if (!t)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "no output %zu", index);
    if (info) {
        memset(info, 0, sizeof *info);
        info->name = t->name;
        info->dtype = (shardnet_dtype)t->dtype;
        info->rank = t->rank;
        memcpy(info->dims, t->dims, (size_t)t->rank * sizeof t->dims[0]);
    }
    if (data)
        *data = t->data;
    return SHARDNET_OK;
}
