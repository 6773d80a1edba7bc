/* The public model and session API over the graph, passes and plans. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exec/exec.h"
#include "ops/registry.h"
#include "runtime/pipeline.h"
#include "plan/profile.h"
#include "runtime/tensor_split.h"
#include "core/trace.h"
#include "comm/world.h"
#include "import/tensorfile.h"
#include "passes/passes.h"
#include "import/onnx.h"

/* Plans kept per session, one per input shape seen recently. */
#define PLAN_CACHE 4

struct shardnet_model {
    sn_graph *g;
    sn_model_file *files; /* the files mapped (none when read) */
    size_t nfiles;
};

/* Devices a layer split may use. */
#define MAX_SPLIT 16

struct shardnet_session {
    shardnet_model_t *model;
    sn_device *dev;
    sn_device *devs[MAX_SPLIT]; /* the listed devices, in order */
    size_t nlisted;
    size_t ndev;                /* devices in use: 1, or all for layer */
    int choose;                 /* split "auto": decide at the first run */
    size_t micro;
    size_t cuts[MAX_SPLIT];     /* from a plan file: the layer split's cuts */
    int have_cuts;
    size_t groups[MAX_SPLIT];   /* hybrid split: devices per stage */
    size_t ngroups;             /* 0: a layer split (one device a stage) */
    int hybrid_default;         /* groups not given: the planner's */
    int multi;                  /* an MPI job: every process runs the
                                   session, and gets its outputs */
    sn_device *home;            /* a device of this process */
    sn_pipeline *pipe;          /* layer split, made at the first run */
    int tensor;                 /* split "tensor" */
    sn_tensor_split *ts;        /* made at the first run (per input shape) */
    sn_strategy *strat;         /* from a plan file: forced strategies */
    size_t nstrat;
    sn_weights *w;
    sn_binding *inputs;
    int *bound;
    sn_plan *plans[PLAN_CACHE]; /* most recently used first */
    sn_plan *last;              /* the plan of the last run */
    double est_s;               /* "auto": the chosen plan's estimate */
    int64_t est_rows;           /* the batch it was estimated for */
    double run_s;               /* the fastest run checked against it */
    int nruns;
};

size_t shardnet_dtype_size(shardnet_dtype dtype)
{
    switch (dtype) {
    case SHARDNET_DTYPE_FLOAT32:
    case SHARDNET_DTYPE_UINT8:
    case SHARDNET_DTYPE_INT8:
    case SHARDNET_DTYPE_INT32:
    case SHARDNET_DTYPE_INT64:
    case SHARDNET_DTYPE_BOOL:
    case SHARDNET_DTYPE_FLOAT64:
    case SHARDNET_DTYPE_UINT16:
    case SHARDNET_DTYPE_INT16:
    case SHARDNET_DTYPE_UINT32:
    case SHARDNET_DTYPE_UINT64:
    case SHARDNET_DTYPE_FLOAT16:
    case SHARDNET_DTYPE_BFLOAT16:
        return sn_dtype_size((sn_dtype)dtype);
    default:
        return 0;
    }
}

const char *shardnet_dtype_name(shardnet_dtype dtype)
{
    switch (dtype) {
    case SHARDNET_DTYPE_UNDEFINED: return "undefined";
    case SHARDNET_DTYPE_FLOAT32: return "float32";
    case SHARDNET_DTYPE_UINT8: return "uint8";
    case SHARDNET_DTYPE_INT8: return "int8";
    case SHARDNET_DTYPE_UINT16: return "uint16";
    case SHARDNET_DTYPE_INT16: return "int16";
    case SHARDNET_DTYPE_INT32: return "int32";
    case SHARDNET_DTYPE_INT64: return "int64";
    case SHARDNET_DTYPE_BOOL: return "bool";
    case SHARDNET_DTYPE_FLOAT16: return "float16";
    case SHARDNET_DTYPE_FLOAT64: return "float64";
    case SHARDNET_DTYPE_UINT32: return "uint32";
    case SHARDNET_DTYPE_UINT64: return "uint64";
    case SHARDNET_DTYPE_BFLOAT16: return "bfloat16";
    }
    return "unknown";
}

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

size_t shardnet_model_unsupported(const shardnet_model_t *model, char *buf,
                                  size_t cap)
{
    size_t len = 0;
    if (buf && cap)
        buf[0] = '\0';
    if (!model)
        return 0;
    for (size_t i = 0; i < model->g->nnodes; i++) {
        const sn_node *n = &model->g->nodes[i];
        if (n->dead || sn_op_find(n->domain, n->op_type))
            continue;
        add(buf, cap, &len, "%s%s%s%s (node '%s')", len ? ", " : "",
            n->domain[0] ? n->domain : "", n->domain[0] ? "." : "",
            n->op_type, n->name);
    }
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

shardnet_status shardnet_session_create(shardnet_context_t *ctx,
                                        shardnet_model_t *model,
                                        const char *devices,
                                        shardnet_session_t **out)
{
    return shardnet_session_create_with(ctx, model, devices, NULL, out);
}

/* What a plan file says. */
typedef struct plan_file {
    char split[16];
    char devices[512];
    size_t micro;
    size_t cuts[MAX_SPLIT];
    size_t ncuts;
    int have_cuts;
    size_t groups[MAX_SPLIT];
    size_t ngroups;
    sn_strategy *strat; /* malloc'ed */
    size_t nstrat;
} plan_file;

/*
 * A list of whole numbers 0 .. max separated by commas or blanks; -1 with
 * the error set (naming the bad item) otherwise.
 */
static int parse_counts(const char *rest, const char *key, size_t min,
                        size_t max, size_t *vals, size_t cap, size_t *n)
{
    const char *p = rest;
    while (*p) {
        char *end;
        unsigned long long v;
        size_t len = strcspn(p, " ,\t");
        errno = 0;
        v = *p >= '0' && *p <= '9' ? strtoull(p, &end, 10) : 0;
        if (!(*p >= '0' && *p <= '9') || end != p + len || errno ||
            v < min || v > max) {
            sn_error(SHARDNET_INVALID_ARGUMENT,
                     "'%s': '%.*s' is not a whole number from %zu to %zu",
                     key, (int)(len < 64 ? len : 64), p, min, max);
            return -1;
        }
        if (*n == cap) {
            sn_error(SHARDNET_INVALID_ARGUMENT, "'%s': more than %zu values",
                     key, cap);
            return -1;
        }
        vals[(*n)++] = (size_t)v;
        p += len;
        p += strspn(p, " ,\t");
    }
    return 0;
}

static shardnet_status read_plan(const char *path, plan_file *pf)
{
    /* Keys that may appear once, and the line each was on. */
    static const char *const once[] = {"split", "devices", "micro_batches",
                                       "cuts", "groups"};
    int seen[sizeof once / sizeof once[0]] = {0};
    int *strat_line = NULL;
    struct stat sb;
    FILE *f;
    char line[1024];
    int lineno = 0, fd;
    shardnet_status st = SHARDNET_INVALID_ARGUMENT;
    memset(pf, 0, sizeof *pf);
    /* O_NONBLOCK: a FIFO would otherwise wait for a writer forever. */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return sn_error(SHARDNET_IO_ERROR, "cannot read plan %s: %s", path,
                        strerror(errno));
    if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return sn_error(SHARDNET_IO_ERROR,
                        "plan %s is not a regular file (a FIFO, device or "
                        "folder cannot hold a plan)",
                        path);
    }
    if (!(f = fdopen(fd, "r"))) {
        st = sn_error(SHARDNET_IO_ERROR, "cannot read plan %s: %s", path,
                      strerror(errno));
        close(fd);
        return st;
    }
    while (fgets(line, sizeof line, f)) {
        char key[32], rest[1000];
        size_t k, len = strlen(line);
        lineno++;
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            /* The line goes on: refused, not read as two lines. */
            int next = fgetc(f);
            if (next != '\n' && next != EOF) {
                st = sn_error(SHARDNET_INVALID_ARGUMENT,
                              "plan %s, line %d: longer than %zu characters",
                              path, lineno, sizeof line - 1);
                goto fail;
            }
        }
        if (line[0] == '#' || line[strspn(line, " \t\r\n")] == '\0')
            continue;
        if (sscanf(line, "%31s %999[^\r\n]", key, rest) != 2)
            goto bad;
        for (k = 0; k < sizeof once / sizeof once[0]; k++)
            if (!strcmp(key, once[k]))
                break;
        if (k < sizeof once / sizeof once[0]) {
            if (seen[k]) {
                st = sn_error(SHARDNET_INVALID_ARGUMENT,
                         "plan %s, line %d: a second '%s' line (the first "
                         "is line %d)",
                         path, lineno, key, seen[k]);
                goto fail;
            }
            seen[k] = lineno;
        }
        if (!strcmp(key, "split")) {
            if (strlen(rest) >= sizeof pf->split) {
                st = sn_error(SHARDNET_INVALID_ARGUMENT,
                         "plan %s, line %d: split '%.32s...' is not a split",
                         path, lineno, rest);
                goto fail;
            }
            memcpy(pf->split, rest, strlen(rest) + 1);
        } else if (!strcmp(key, "devices")) {
            if (strlen(rest) >= sizeof pf->devices) {
                st = sn_error(SHARDNET_INVALID_ARGUMENT,
                         "plan %s, line %d: the device list is longer than "
                         "%zu characters",
                         path, lineno, sizeof pf->devices - 1);
                goto fail;
            }
            memcpy(pf->devices, rest, strlen(rest) + 1);
        } else if (!strcmp(key, "micro_batches")) {
            size_t v, nv = 0;
            if (parse_counts(rest, key, 0, 65536, &v, 1, &nv) < 0)
                goto located;
            pf->micro = nv ? v : 0;
        } else if (!strcmp(key, "cuts")) {
            pf->have_cuts = 1;
            if (parse_counts(rest, key, 0, SN_MAX_NODES, pf->cuts, MAX_SPLIT,
                             &pf->ncuts) < 0)
                goto located;
        } else if (!strcmp(key, "groups")) {
            if (parse_counts(rest, key, 1, MAX_SPLIT, pf->groups, MAX_SPLIT,
                             &pf->ngroups) < 0)
                goto located;
        } else if (!strcmp(key, "strategy")) {
            /* strategy NODE ((1,2),(2,1)) */
            char node[256];
            int used = 0;
            if (sscanf(rest, "%255s %n", node, &used) != 1 || !rest[used])
                goto bad;
            for (size_t i = 0; i < pf->nstrat; i++)
                if (!strcmp(pf->strat[i].node, node)) {
                    st = sn_error(SHARDNET_INVALID_ARGUMENT,
                             "plan %s, line %d: a second strategy for node "
                             "'%s' (the first is line %d)",
                             path, lineno, node, strat_line[i]);
                    goto fail;
                }
            sn_strategy *ns =
                realloc(pf->strat, (pf->nstrat + 1) * sizeof *ns);
            if (ns)
                pf->strat = ns;
            int *nl = ns ? realloc(strat_line, (pf->nstrat + 1) * sizeof *nl)
                         : NULL;
            if (!nl) {
                st = sn_error(SHARDNET_OUT_OF_MEMORY, "plan %s", path);
                goto fail;
            }
            strat_line = nl;
            if ((st = sn_strategy_parse(rest + used,
                                        &pf->strat[pf->nstrat])) !=
                SHARDNET_OK) {
                sn_error_prefix(st, "plan %s, line %d", path, lineno);
                goto fail;
            }
            strat_line[pf->nstrat] = lineno;
            snprintf(pf->strat[pf->nstrat++].node, sizeof ns->node, "%s",
                     node);
        } else {
            goto bad;
        }
    }
    fclose(f);
    free(strat_line);
    if (!pf->split[0] || !pf->devices[0]) {
        free(pf->strat);
        pf->strat = NULL;
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "plan %s: needs 'split' and 'devices' lines", path);
    }
    return SHARDNET_OK;
located:
    st = sn_error_prefix(SHARDNET_INVALID_ARGUMENT, "plan %s, line %d", path,
                    lineno);
    goto fail;
bad:
    line[strcspn(line, "\r\n")] = '\0';
    st = sn_error(SHARDNET_INVALID_ARGUMENT,
             "plan %s, line %d: expected 'split', 'devices', "
             "'micro_batches', 'cuts', 'groups' or 'strategy' and a value: %s",
             path, lineno, line);
fail:
    fclose(f);
    free(strat_line);
    free(pf->strat);
    pf->strat = NULL;
    return st;
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
    size_t size;
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    if (!in)
        return SHARDNET_OK;
    size = in->size ? in->size : first;
    if (size < first)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "session options: size %zu is too small (set it to "
                        "sizeof(shardnet_session_options))",
                        in->size);
    for (size_t i = sizeof *o; i < size; i++)
        if (((const unsigned char *)in)[i])
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "session options: byte %zu is set, past the %zu "
                            "this library knows (an option of a newer "
                            "shardnet)",
                            i, sizeof *o);
    memcpy(o, in, size < sizeof *o ? size : sizeof *o);
    o->size = sizeof *o;
    return SHARDNET_OK;
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
        if ((st = read_plan(options->plan_file, &pf)) != SHARDNET_OK)
            return st;
        split = pf.split;
        if (!devices || !*devices)
            devices = pf.devices;
    }
    if (from_file && pf.nstrat && strcmp(split, "tensor")) {
        free(pf.strat);
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "plan %s: strategies are for split 'tensor', not "
                        "'%s'",
                        options->plan_file, split);
    }
    st = session_create(ctx, model, devices, split, options,
                        from_file ? &pf : NULL, out);
    if (from_file && st != SHARDNET_OK)
        free(pf.strat);
    return st;
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
        strcmp(split, "hybrid"))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "split '%s' is not available (this version has "
                        "'none', 'layer', 'tensor', 'hybrid' and 'auto')",
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
    layer = !strcmp(split, "layer") || hybrid;
    autosplit = !strcmp(split, "auto");
    int tensor = !strcmp(split, "tensor");
    if (hybrid && n < 3)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "a hybrid split needs three devices or more (it "
                        "tensor-splits stages across groups of them)");
    if (n > 1 && !layer && !autosplit && !tensor)
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
    s->ndev = layer || (tensor && n > 1) ? n : 1;
    s->tensor = tensor && n > 1;
    s->choose = autosplit && n > 1;
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
            size_t total = 0;
            for (size_t u = 0; u < pf.ngroups; u++)
                total += pf.groups[u];
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
        if (pf.have_cuts) {
            size_t stages = s->ngroups ? s->ngroups : n;
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
    sn_tensor_split_free(session->ts);
    free(session->strat);
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

enum { SPLIT_NONE, SPLIT_LAYER, SPLIT_TENSOR, SPLIT_HYBRID };

static shardnet_status make_tensor_split(shardnet_session_t *session,
                                         const sn_strategy *strat,
                                         size_t nstrat, sn_tensor_split **out)
{
    double speed[MAX_SPLIT];
    shardnet_status st;
    if ((st = sn_profiles_share(session->devs, session->nlisted)) !=
        SHARDNET_OK)
        return st;
    for (size_t d = 0; d < session->nlisted; d++)
        speed[d] = sn_device_speed(session->devs[d]);
    return sn_tensor_split_create(session->model->g, session->devs,
                                  session->nlisted, speed, session->inputs,
                                  strat, nstrat, session->home, out);
}

/*
 * The cost model's choice among one device, a layer split, a tensor split
 * and a hybrid split over all listed devices, with every estimate told in
 * report (may be NULL).  *ts: the tensor split that was built to estimate
 * it (NULL if it could not be); the caller owns it.  ch: the estimates.
 */
static shardnet_status choose_split(shardnet_session_t *session, char *report,
                                    size_t cap, int *kind,
                                    sn_split_choice *ch, sn_tensor_split **ts)
{
    double est, t_est = 1e300;
    shardnet_status st;
    size_t len;
    *ts = NULL;
    if ((st = sn_split_choose(session->model->g, session->devs,
                              session->nlisted, session->inputs,
                              session->micro, ch, report, cap)) !=
        SHARDNET_OK)
        return st;
    *kind = SPLIT_NONE;
    est = ch->none;
    if (ch->layer < est) {
        *kind = SPLIT_LAYER;
        est = ch->layer;
    }
    if (ch->hybrid < est) {
        *kind = SPLIT_HYBRID;
        est = ch->hybrid;
    }
    len = report ? strlen(report) : 0;
    if (session->nlisted > 1) {
        if (make_tensor_split(session, NULL, 0, ts) == SHARDNET_OK) {
            double bytes;
            size_t nc = sn_tensor_split_collectives(*ts, &bytes);
            const char *full = sn_tensor_split_overflow(*ts);
            t_est = sn_tensor_split_estimate(*ts);
            if (report && len < cap)
                len += (size_t)snprintf(
                    report + len, cap - len,
                    "tensor over %zu devices: estimated %.3f ms (%zu "
                    "collectives, %.2f MB moved per run)%s%s\n",
                    session->nlisted, t_est * 1e3, nc, bytes / 1e6,
                    full ? ": does not fit on " : "", full ? full : "");
            if (full)
                t_est = 1e300;
        } else {
            if (report && len < cap)
                len += (size_t)snprintf(report + len, cap - len,
                                        "tensor: not possible: %s\n",
                                        shardnet_last_error());
            sn_error_clear();
        }
    }
    if (t_est < est) {
        *kind = SPLIT_TENSOR;
        est = t_est;
    } else {
        sn_tensor_split_free(*ts);
        *ts = NULL;
    }
    if (report && len < cap) {
        /* Why: against the fastest device alone, the baseline every split
         * must beat. */
        char why[160] = "";
        if (*kind == SPLIT_NONE && session->nlisted > 1)
            snprintf(why, sizeof why,
                     ": splitting would be slower than the fastest device "
                     "alone");
        else if (*kind != SPLIT_NONE && est > 0 && ch->none < 1e300)
            snprintf(why, sizeof why,
                     ": the fastest estimate, %.2fx as fast as the fastest "
                     "device alone (%s, %.3f ms)",
                     ch->none / est,
                     session->devs[ch->best_dev]->info.name, ch->none * 1e3);
        snprintf(report + len, cap - len, "choice: %s (estimated %.3f ms)%s\n",
                 *kind == SPLIT_TENSOR   ? "tensor"
                 : *kind == SPLIT_LAYER  ? "layer"
                 : *kind == SPLIT_HYBRID ? "hybrid"
                                         : "none",
                 est * 1e3, why);
    }
    return SHARDNET_OK;
}

/* The planner's hybrid grouping becomes the session's (when it has one);
 * the groups are decided from then on. */
static void take_groups(shardnet_session_t *session, const sn_split_choice *ch)
{
    if (ch->ngroups) {
        memcpy(session->groups, ch->groups,
               ch->ngroups * sizeof ch->groups[0]);
        session->ngroups = ch->ngroups;
    }
    session->hybrid_default = 0;
}

/* The batch of the bound inputs: the first input's first dimension. */
static int64_t lead_rows(const shardnet_session_t *session)
{
    return session->model->g->ninputs && session->inputs[0].rank
               ? session->inputs[0].dims[0]
               : 1;
}

/* Make the session run as chosen (auto decides once); takes ts. */
static shardnet_status apply_choice(shardnet_session_t *session, int kind,
                                    const sn_split_choice *ch,
                                    sn_tensor_split *ts)
{
    size_t best = ch->best_dev;
    session->est_s = kind == SPLIT_TENSOR   ? sn_tensor_split_estimate(ts)
                     : kind == SPLIT_LAYER  ? ch->layer
                     : kind == SPLIT_HYBRID ? ch->hybrid
                                            : ch->none;
    session->est_rows = lead_rows(session);
    session->nruns = 0;
    if (kind == SPLIT_TENSOR) {
        session->choose = 0;
        session->tensor = 1;
        session->ndev = session->nlisted;
        session->ts = ts;
        return SHARDNET_OK;
    }
    sn_tensor_split_free(ts);
    if (kind == SPLIT_LAYER || kind == SPLIT_HYBRID) {
        session->ndev = session->nlisted;
        if (kind == SPLIT_HYBRID)
            take_groups(session, ch);
    } else if (session->multi) {
        session->dev = session->devs[best]; /* a pipeline of one stage */
    } else if (session->devs[best] != session->dev) {
        sn_weights *w;
        shardnet_status st;
        if ((st = sn_weights_new(session->model->g, session->devs[best], &w)))
            return st;
        sn_weights_free(session->w);
        session->w = w;
        session->dev = session->devs[best];
    }
    session->choose = 0;
    return SHARDNET_OK;
}

static shardnet_status check_bound(const shardnet_session_t *session)
{
    const sn_graph *g = session->model->g;
    for (size_t i = 0; i < g->ninputs; i++)
        if (!session->bound[i])
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "input '%s' is not bound",
                            g->values[g->inputs[i]].name);
    return SHARDNET_OK;
}

/* Decide what "auto" or a hybrid without groups leaves open, for the bound
 * inputs, and make the pipeline of a layer or hybrid split. */
static shardnet_status prepare(shardnet_session_t *session)
{
    sn_graph *g = session->model->g;
    shardnet_status st;
    if (session->choose) {
        /* "auto": one device, a layer split or a tensor split, whichever
         * the cost model says is fastest for these inputs. */
        int kind;
        sn_split_choice ch;
        sn_tensor_split *ts = NULL;
        if ((st = choose_split(session, NULL, 0, &kind, &ch, &ts)) !=
                SHARDNET_OK ||
            (st = apply_choice(session, kind, &ch, ts)) != SHARDNET_OK)
            return st;
    }
    if (session->hybrid_default && !session->pipe) {
        /* "hybrid" without groups: the planner's best grouping. */
        sn_split_choice ch;
        if ((st = sn_split_choose(g, session->devs, session->nlisted,
                                  session->inputs, session->micro, &ch, NULL,
                                  0)) != SHARDNET_OK)
            return st;
        take_groups(session, &ch);
    }
    if (!session->tensor && (session->ndev > 1 || session->multi) &&
        !session->pipe &&
        (st = sn_pipeline_create_groups(
             g, session->ndev > 1 ? session->devs : &session->dev,
             session->ndev, session->ngroups ? session->groups : NULL,
             session->ngroups, session->inputs,
             session->have_cuts ? session->cuts : NULL, &session->pipe)))
        return st;
    return SHARDNET_OK;
}

static shardnet_status session_run(shardnet_session_t *session);

/* A plan's estimate against its runs, once a session: the fastest of the
 * second to eighth runs of the batch it was estimated for (the first makes
 * plans and uploads weights; the fastest is the one least disturbed by
 * other work).  Far off, the devices' profiles are measured again for the
 * next plan (see profile.h). */
#define CHECK_RUNS 8

static void check_estimate(shardnet_session_t *session, double t)
{
    if (!(session->est_s > 0) || session->nruns >= CHECK_RUNS ||
        lead_rows(session) != session->est_rows)
        return;
    if (session->nruns++ == 0)
        return;
    if (session->nruns == 2 || t < session->run_s)
        session->run_s = t;
    if (session->nruns == CHECK_RUNS)
        sn_profiles_check_run(session->devs, session->nlisted,
                              session->est_s, session->run_s);
}

/* In a job of several processes, a failed run ends the whole job at exit:
 * the other processes may be waiting for this one. */
shardnet_status shardnet_session_run(shardnet_session_t *session)
{
    double t0 = sn_trace_now();
    shardnet_status st = session_run(session);
    if (st == SHARDNET_OK)
        check_estimate(session, sn_trace_now() - t0);
    if (st != SHARDNET_OK && session && session->multi)
        sn_world_failed();
    return st;
}

static shardnet_status session_run(shardnet_session_t *session)
{
    sn_graph *g;
    sn_plan *p = NULL;
    shardnet_status st;
    if (!session)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "run: NULL session");
    g = session->model->g;
    if ((st = sn_model_files_check(session->model->files,
                                   session->model->nfiles)) != SHARDNET_OK ||
        (st = check_bound(session)) != SHARDNET_OK ||
        (st = prepare(session)) != SHARDNET_OK)
        return st;
    if (session->tensor) {
        if (session->ts && !sn_tensor_split_matches(session->ts,
                                                    session->inputs)) {
            sn_tensor_split_free(session->ts); /* another input shape */
            session->ts = NULL;
        }
        if (!session->ts &&
            (st = make_tensor_split(session, session->strat, session->nstrat,
                                    &session->ts)) != SHARDNET_OK)
            return st;
        return sn_tensor_split_run(session->ts, session->inputs);
    }
    if (session->ndev > 1 || session->multi)
        return sn_pipeline_run(session->pipe, session->inputs, session->micro);
    if ((st = sn_plan_cache_get(session->plans, PLAN_CACHE, g, session->w,
                                session->inputs, sn_op_find, &p)) !=
        SHARDNET_OK)
        return st;
    session->last = p;
    sn_bind_thread(session->w->dev, 1);
    st = sn_plan_run(p, session->inputs);
    sn_bind_thread(session->w->dev, 0);
    return st;
}

typedef struct stream_ctx {
    shardnet_session_t *session;
    shardnet_feed_fn feed;
    shardnet_drain_fn drain;
    void *user;
} stream_ctx;

static shardnet_status stream_feed(void *user, size_t b,
                                   const sn_binding **in)
{
    stream_ctx *c = user;
    shardnet_status st;
    /* Batch 0 was fed before the pipeline was made. */
    if (b && ((st = c->feed(c->user, b, c->session)) != SHARDNET_OK ||
              (st = check_bound(c->session)) != SHARDNET_OK))
        return st;
    *in = c->session->inputs;
    return SHARDNET_OK;
}

static shardnet_status stream_drain(void *user, size_t b)
{
    stream_ctx *c = user;
    return c->drain ? c->drain(c->user, b, c->session) : SHARDNET_OK;
}

shardnet_status shardnet_session_run_stream(shardnet_session_t *session,
                                            size_t count,
                                            shardnet_feed_fn feed,
                                            shardnet_drain_fn drain,
                                            void *user)
{
    shardnet_status st;
    if (!session || !feed)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "run stream: NULL session or feed");
    if (!count)
        return SHARDNET_OK;
    if ((st = sn_model_files_check(session->model->files,
                                   session->model->nfiles)) != SHARDNET_OK ||
        (st = feed(user, 0, session)) != SHARDNET_OK ||
        (st = check_bound(session)) != SHARDNET_OK ||
        (st = prepare(session)) != SHARDNET_OK)
        return st;
    if (!session->tensor && (session->ndev > 1 || session->multi)) {
        stream_ctx c = {session, feed, drain, user};
        st = sn_pipeline_stream(session->pipe, count, session->micro,
                                stream_feed, stream_drain, &c);
        if (st != SHARDNET_OK && session->multi)
            sn_world_failed();
        return st;
    }
    for (size_t b = 0; b < count; b++) {
        if ((b && (st = feed(user, b, session)) != SHARDNET_OK) ||
            (st = shardnet_session_run(session)) != SHARDNET_OK ||
            (drain && (st = drain(user, b, session)) != SHARDNET_OK))
            return st;
    }
    return SHARDNET_OK;
}

shardnet_status shardnet_session_output(shardnet_session_t *session,
                                        size_t index,
                                        shardnet_tensor_info *info,
                                        const void **data)
{
    const sn_host_tensor *t;
    if (!session || (!session->last && !session->pipe && !session->ts))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "output: the session has not run");
    if (session->tensor && session->ts)
        t = sn_tensor_split_output(session->ts, index);
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

shardnet_status shardnet_tensor_load(const char *path, shardnet_tensor *out)
{
    sn_host_tensor t = {0};
    shardnet_status st;
    if (!path || !out)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "tensor: NULL argument");
    memset(out, 0, sizeof *out);
    if ((st = sn_tensor_load(path, &t)) != SHARDNET_OK)
        return st;
    if (!shardnet_dtype_size((shardnet_dtype)t.dtype)) {
        sn_host_tensor_free(&t);
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "%s: tensors of type %s are not supported: the file "
                        "cannot be read",
                        path, sn_dtype_name(t.dtype));
    }
    out->info.name = t.name; /* released with the tensor */
    out->info.dtype = (shardnet_dtype)t.dtype;
    out->info.rank = t.rank;
    memcpy(out->info.dims, t.dims, sizeof out->info.dims);
    out->data = t.data;
    out->nbytes = t.nbytes;
    return SHARDNET_OK;
}

void shardnet_tensor_free(shardnet_tensor *tensor)
{
    if (!tensor)
        return;
    free((char *)tensor->info.name);
    free(tensor->data);
    memset(tensor, 0, sizeof *tensor);
}

void shardnet_tensor_release(shardnet_tensor *tensor)
{
    shardnet_tensor_free(tensor);
}

shardnet_status shardnet_tensor_save(const char *path,
                                     const shardnet_tensor_info *info,
                                     const void *data)
{
    sn_host_tensor t = {0};
    size_t count = 1;
    if (!path || !info || info->rank < 0 ||
        info->rank > SHARDNET_MAX_DIMS || !shardnet_dtype_size(info->dtype))
        return sn_error(SHARDNET_INVALID_ARGUMENT, "tensor save: bad argument");
    for (int i = 0; i < info->rank; i++) {
        if (info->dims[i] < 0)
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "tensor save: negative dimension");
        count *= (size_t)info->dims[i];
    }
    if (!data && count) /* an empty tensor needs no data */
        return sn_error(SHARDNET_INVALID_ARGUMENT, "%s: tensor save: NULL data",
                        path);
    t.dtype = (sn_dtype)info->dtype;
    t.rank = info->rank;
    memcpy(t.dims, info->dims, (size_t)info->rank * sizeof t.dims[0]);
    t.data = (void *)data;
    t.nbytes = count * shardnet_dtype_size(info->dtype);
    return sn_tensor_save_npy(path, &t);
}

size_t shardnet_session_describe(shardnet_session_t *session, char *buf,
                                 size_t cap)
{
    char text[16384];
    int kind;
    size_t len;
    sn_split_choice ch;
    const sn_graph *g;
    sn_tensor_split *ts = NULL;
    if (buf && cap)
        buf[0] = '\0';
    if (!session)
        return 0;
    g = session->model->g;
    for (size_t i = 0; i < g->ninputs; i++)
        if (!session->bound[i]) {
            snprintf(buf, cap, "bind the inputs first: plans depend on their "
                               "shapes\n");
            return strlen(buf ? buf : "");
        }
    if (choose_split(session, text, sizeof text, &kind, &ch, &ts) !=
        SHARDNET_OK) {
        snprintf(text, sizeof text, "no estimate: %s\n", shardnet_last_error());
    } else if (session->choose) {
        /* "auto" decides here, so the run does what this text says. */
        if (apply_choice(session, kind, &ch, ts) != SHARDNET_OK)
            sn_error_clear(); /* the first run will try again */
        ts = NULL; /* taken */
    } else if (session->hybrid_default && !session->pipe && ch.ngroups) {
        take_groups(session, &ch);
    }
    len = strlen(text);
    if (session->choose)
        len += (size_t)snprintf(text + len, sizeof text - len,
                                "running: decided at the first run (auto)\n");
    else if (session->tensor)
        len += (size_t)snprintf(text + len, sizeof text - len,
                                "running: tensor split over %zu devices\n",
                                session->nlisted);
    else if (session->ndev > 1 && session->ngroups) {
        len += (size_t)snprintf(text + len, sizeof text - len,
                                "running: hybrid split, stages on");
        for (size_t u = 0, d = 0; u < session->ngroups && len < sizeof text;
             u++) {
            len += (size_t)snprintf(text + len, sizeof text - len, "%s",
                                    u ? " |" : "");
            for (size_t k = 0; k < session->groups[u] && len < sizeof text;
                 k++, d++)
                len += (size_t)snprintf(text + len, sizeof text - len, "%s%s",
                                        k ? "+" : " ",
                                        session->devs[d]->info.name);
        }
        if (len < sizeof text)
            len += (size_t)snprintf(text + len, sizeof text - len, "\n");
    } else if (session->ndev > 1)
        len += (size_t)snprintf(text + len, sizeof text - len,
                                "running: layer split over %zu devices\n",
                                session->ndev);
    else
        len += (size_t)snprintf(text + len, sizeof text - len,
                                "running: none, on %s\n",
                                session->dev->info.name);
    /* What a tensor split cuts, when it runs or would be chosen. */
    const sn_tensor_split *show =
        session->tensor && session->ts ? session->ts : NULL;
    if (show && len < sizeof text)
        sn_tensor_split_describe(show, text, sizeof text);
    sn_tensor_split_free(ts);
    len = strlen(text);
    if (buf && cap)
        snprintf(buf, cap, "%s", text);
    return len;
}

shardnet_status shardnet_session_save_plan(shardnet_session_t *session,
                                           const char *path)
{
    FILE *f;
    if (!session || !path)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "save plan: NULL argument");
    if (session->choose)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "save plan: the split is chosen at the first run; "
                        "run the session once first");
    if ((session->tensor && !session->ts) ||
        (!session->tensor && session->ndev > 1 && !session->pipe))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "save plan: the split is made at the first run; "
                        "run the session once first");
    f = fopen(path, "w");
    if (!f)
        return sn_error(SHARDNET_IO_ERROR, "cannot write plan %s", path);
    fprintf(f, "# shardnet plan (shardnet_session_save_plan); edit freely\n");
    fprintf(f, "split %s\n", session->tensor     ? "tensor"
                             : session->ngroups  ? "hybrid"
                             : session->ndev > 1 ? "layer"
                                                 : "none");
    fprintf(f, "devices ");
    if (session->ndev > 1)
        for (size_t i = 0; i < session->ndev; i++)
            fprintf(f, "%s%s", i ? "," : "", session->devs[i]->info.name);
    else
        fprintf(f, "%s", session->dev->info.name);
    fprintf(f, "\n");
    if (session->tensor) {
        const sn_strategy *ss;
        size_t ns = sn_tensor_split_strategies(session->ts, &ss);
        fprintf(f, "# per operator, MindSpore's notation: one tuple per "
                   "input, the parts\n# each dimension is cut into\n");
        for (size_t i = 0; i < ns; i++) {
            char t[256];
            sn_strategy_format(&ss[i], t, sizeof t);
            fprintf(f, "strategy %s %s\n", ss[i].node, t);
        }
    } else if (session->ndev > 1) {
        if (session->ngroups) {
            fprintf(f, "# devices per stage (consecutive in the list); a "
                       "stage on several is\n# tensor-split across them\n");
            fprintf(f, "groups");
            for (size_t u = 0; u < session->ngroups; u++)
                fprintf(f, "%s%zu", u ? "," : " ", session->groups[u]);
            fprintf(f, "\n");
        }
        fprintf(f, "micro_batches %zu\n",
                session->micro ? session->micro
                               : sn_pipeline_micro(session->pipe));
        fprintf(f, "cuts");
        for (size_t s = 1; s < sn_pipeline_stages(session->pipe); s++)
            fprintf(f, " %zu", sn_pipeline_stage_start(session->pipe, s));
        fprintf(f, "\n");
    }
    if (fclose(f) != 0)
        return sn_error(SHARDNET_IO_ERROR, "cannot write plan %s", path);
    return SHARDNET_OK;
}
