/* Models of the public API: an ONNX file loaded into a graph and
 * rewritten by the passes, its inputs and outputs, its parameters, the
 * operators it uses that no lowering exists for, and its description.
 * Sessions that run a model are session.c's. */
#include <config.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_impl.h"
#include "ops/registry.h"
#include "passes/passes.h"

shardnet_status shardnet_model_load(const char *path, shardnet_model_t **out)
{
    return shardnet_model_load_with(path, NULL, out);
}

shardnet_status shardnet_model_load_with(const char *path,
                                         const shardnet_model_options *options,
                                         shardnet_model_t **out)
{
    shardnet_model_options o = {.size = sizeof o};
    shardnet_model_t *m;
    shardnet_status st;
    if (!path || !out)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "model: NULL argument");
    *out = NULL;
    sn_error_clear();
    if (options) {
        size_t n = options->size < sizeof o ? options->size : sizeof o;
        if (options->size < offsetof(shardnet_model_options, flags) +
                                 sizeof options->flags)
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "model options: size %zu is too small (set it "
                            "to sizeof(shardnet_model_options))",
                            options->size);
        memcpy(&o, options, n);
        if (o.flags & ~SHARDNET_MODEL_READ)
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "model options: unknown flags 0x%x",
                            o.flags & ~SHARDNET_MODEL_READ);
        for (size_t i = 0; i < sizeof o.reserved / sizeof o.reserved[0]; i++)
            if (o.reserved[i])
                return sn_error(SHARDNET_INVALID_ARGUMENT,
                                "model options: reserved field %zu is not 0",
                                i);
    }
    m = calloc(1, sizeof *m);
    if (!m)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "model");
    if ((st = sn_onnx_load_file(path, (o.flags & SHARDNET_MODEL_READ) != 0,
                                &m->g, &m->files, &m->nfiles)) !=
            SHARDNET_OK ||
        (st = sn_graph_sort(m->g)) != SHARDNET_OK ||
        (st = sn_passes_run(m->g)) != SHARDNET_OK) {
        if (strncmp(shardnet_last_error(), path, strlen(path)))
            sn_error_prefix(st, "%s", path);
        shardnet_model_free(m);
        return st;
    }
    *out = m;
    return SHARDNET_OK;
}

void shardnet_model_free(shardnet_model_t *model)
{
    if (!model)
        return;
    sn_graph_free(model->g);
    sn_model_files_free(model->files, model->nfiles);
    free(model);
}

size_t shardnet_model_input_count(const shardnet_model_t *model)
{
    return model ? model->g->ninputs : 0;
}

size_t shardnet_model_output_count(const shardnet_model_t *model)
{
    return model ? model->g->noutputs : 0;
}

static void fill_info(const sn_value *v, shardnet_tensor_info *info)
{
    memset(info, 0, sizeof *info);
    info->name = v->name;
    info->dtype = (shardnet_dtype)v->dtype;
    info->rank = v->rank;
    for (int i = 0; i < v->rank && i < SHARDNET_MAX_DIMS; i++) {
        info->dims[i] = v->dims[i];
        info->dim_names[i] = v->dim_param[i];
    }
}

shardnet_status shardnet_model_input(const shardnet_model_t *model,
                                     size_t index, shardnet_tensor_info *info)
{
    if (!model || !info || index >= model->g->ninputs)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "no model input %zu", index);
    fill_info(&model->g->values[model->g->inputs[index]], info);
    return SHARDNET_OK;
}

shardnet_status shardnet_model_output(const shardnet_model_t *model,
                                      size_t index, shardnet_tensor_info *info)
{
    if (!model || !info || index >= model->g->noutputs)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "no model output %zu",
                        index);
    fill_info(&model->g->values[model->g->outputs[index]], info);
    return SHARDNET_OK;
}

uint64_t shardnet_model_parameter_count(const shardnet_model_t *model)
{
    uint64_t n = 0;
    int *used;
    const sn_graph *g;
    if (!model)
        return 0;
    g = model->g;
    /* Count the constants live nodes read (folded ones included). */
    used = calloc(g->nvalues + 1, sizeof *used);
    if (!used)
        return 0;
    for (size_t i = 0; i < g->nnodes; i++) {
        const sn_node *nd = &g->nodes[i];
        if (nd->dead)
            continue;
        for (size_t j = 0; j < nd->ninputs; j++)
            if (nd->inputs[j] >= 0 &&
                (g->values[nd->inputs[j]].flags & SN_VALUE_CONST) &&
                !used[nd->inputs[j]]++)
                n += (uint64_t)sn_value_elements(&g->values[nd->inputs[j]]);
    }
    free(used);
    return n;
}

/* snprintf that appends to buf and keeps counting past cap. */
static void add(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    SN_PRINTF(4, 5);
static void add(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(*len < cap ? buf + *len : NULL, *len < cap ? cap - *len : 0,
                  fmt, ap);
    va_end(ap);
    if (n > 0)
        *len += (size_t)n;
}

/* The nodes of g, and of its subgraphs (If's branches, Loop's and Scan's
 * bodies), that shardnet does not run, added to buf. */
static void unsupported_in(const sn_graph *g, char *buf, size_t cap,
                           size_t *len)
{
    for (size_t i = 0; i < g->nnodes; i++) {
        const sn_node *n = &g->nodes[i];
        const sn_op_def *op = sn_op_find(n->domain, n->op_type);
        char opsets[128] = "";
        if (n->dead)
            continue;
        for (size_t a = 0; a < n->nattrs; a++)
            if (n->attrs[a].type == SN_ATTR_GRAPH && n->attrs[a].graph)
                unsupported_in(n->attrs[a].graph, buf, cap, len);
        if (op && sn_op_opset_matches(op, n, g->opset))
            continue;
        if (op) {
            char range[48];
            sn_op_opsets(op, range, sizeof range);
            snprintf(opsets, sizeof opsets,
                     ", runs in opsets %s, not the model's %lld", range,
                     (long long)g->opset);
        }
        add(buf, cap, len, "%s%s%s%s (node '%s'%s)", *len ? ", " : "",
            n->domain[0] ? n->domain : "", n->domain[0] ? "." : "",
            n->op_type, n->name, opsets);
    }
}

size_t shardnet_model_unsupported(const shardnet_model_t *model, char *buf,
                                  size_t cap)
{
    size_t len = 0;
    if (buf && cap)
        buf[0] = '\0';
    if (!model)
        return 0;
    unsupported_in(model->g, buf, cap, &len);
    return len;
}

size_t shardnet_model_describe(const shardnet_model_t *model, char *buf,
                               size_t cap)
{
    const sn_graph *g;
    size_t len = 0, live = 0;
    if (buf && cap)
        buf[0] = '\0';
    if (!model)
        return 0;
    g = model->g;
    add(buf, cap, &len, "opset: %lld\n", (long long)g->opset);
    add(buf, cap, &len, "producer: %s\n", g->producer ? g->producer : "");
    add(buf, cap, &len, "parameters: %llu\n",
        (unsigned long long)shardnet_model_parameter_count(model));
    for (size_t i = 0; i < g->nnodes; i++)
        live += !g->nodes[i].dead;
    add(buf, cap, &len, "nodes: %zu\n", live);
    add(buf, cap, &len, "ops:");
    for (size_t i = 0; i < g->nnodes; i++) {
        const sn_node *n = &g->nodes[i];
        size_t count = 0, j;
        if (n->dead)
            continue;
        for (j = 0; j < i; j++) /* first live node of this op_type? */
            if (!g->nodes[j].dead && !strcmp(g->nodes[j].op_type, n->op_type))
                break;
        if (j < i)
            continue;
        for (j = i; j < g->nnodes; j++)
            count += !g->nodes[j].dead && !strcmp(g->nodes[j].op_type,
                                                  n->op_type);
        add(buf, cap, &len, " %s x%zu", n->op_type, count);
    }
    add(buf, cap, &len, "\n");
    return len;
}
