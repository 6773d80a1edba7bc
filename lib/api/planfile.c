/* Plan files: the text a session's split is saved as
 * (shardnet_session_save_plan, "shardnet plan --save") and read back from
 * (the plan_file session option), one "key value" line each: the split,
 * the devices, micro-batches, the layer split's cuts, the hybrid split's
 * groups, the replicated split's replicas, the data split's rows and the
 * tensor split's strategies.  Hostile files are refused
 * with the line that is wrong. */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api_impl.h"
#include "core/file.h"
#include "plan/strategy.h"

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

/* Keys that may appear once in a plan file. */
static const char *const once[] = {"split",  "devices", "micro_batches",
                                   "cuts",   "groups",  "rows",
                                   "replicas"};
#define NONCE (sizeof once / sizeof once[0])

/* The plan file at path opened for reading, if it is a regular file. */
static shardnet_status plan_open(const char *path, FILE **out)
{
    struct stat sb;
    shardnet_status st;
    int fd;
    fd = sn_open_regular(path, 0, &sb);
    if (fd == SN_NOT_REGULAR)
        return sn_error(SHARDNET_IO_ERROR,
                        "plan %s is not a regular file (a FIFO, device or "
                        "folder cannot hold a plan)",
                        path);
    if (fd < 0)
        return sn_error(SHARDNET_IO_ERROR, "cannot read plan %s: %s", path,
                        strerror(errno));
    if (!(*out = fdopen(fd, "r"))) {
        st = sn_error(SHARDNET_IO_ERROR, "cannot read plan %s: %s", path,
                      strerror(errno));
        close(fd);
        return st;
    }
    return SHARDNET_OK;
}

/* A line that is no "key value" line this format knows. */
static shardnet_status plan_bad_line(const char *path, int lineno,
                                     char *line)
{
    line[strcspn(line, "\r\n")] = '\0';
    return sn_error(SHARDNET_INVALID_ARGUMENT,
                    "plan %s, line %d: expected 'split', 'devices', "
                    "'micro_batches', 'cuts', 'groups', 'replicas', 'rows' "
                    "or 'strategy' and a value: %s",
                    path, lineno, line);
}

/* "strategy NODE ((1,2),(2,1))": a node's strategy, once a node;
 * (*strat_line)[i] is the line of strategy i. */
static shardnet_status plan_strategy(plan_file *pf, int **strat_line,
                                     const char *path, int lineno,
                                     const char *rest, char *line)
{
    char node[256];
    int used = 0;
    shardnet_status st;
    if (sscanf(rest, "%255s %n", node, &used) != 1 || !rest[used])
        return plan_bad_line(path, lineno, line);
    for (size_t i = 0; i < pf->nstrat; i++)
        if (!strcmp(pf->strat[i].node, node))
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "plan %s, line %d: a second strategy for node "
                            "'%s' (the first is line %d)",
                            path, lineno, node, (*strat_line)[i]);
    sn_strategy *ns = realloc(pf->strat, (pf->nstrat + 1) * sizeof *ns);
    if (ns)
        pf->strat = ns;
    int *nl = ns ? realloc(*strat_line, (pf->nstrat + 1) * sizeof *nl) : NULL;
    if (!nl)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "plan %s", path);
    *strat_line = nl;
    if ((st = sn_strategy_parse(rest + used, &pf->strat[pf->nstrat])) !=
        SHARDNET_OK)
        return sn_error_prefix(st, "plan %s, line %d", path, lineno);
    (*strat_line)[pf->nstrat] = lineno;
    snprintf(pf->strat[pf->nstrat++].node, sizeof ns->node, "%s", node);
    return SHARDNET_OK;
}

/* One line of a plan file (not blank, not a comment) read into pf;
 * seen[k]: the line where once[k] was. */
static shardnet_status plan_line(plan_file *pf, int *seen, int **strat_line,
                                 const char *path, int lineno, char *line)
{
    char key[32], rest[1000];
    size_t k;
    int counted;
    if (sscanf(line, "%31s %999[^\r\n]", key, rest) != 2)
        return plan_bad_line(path, lineno, line);
    for (k = 0; k < NONCE; k++)
        if (!strcmp(key, once[k]))
            break;
    if (k < NONCE) {
        if (seen[k])
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "plan %s, line %d: a second '%s' line (the "
                            "first is line %d)",
                            path, lineno, key, seen[k]);
        seen[k] = lineno;
    }
    if (!strcmp(key, "split")) {
        if (strlen(rest) >= sizeof pf->split)
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "plan %s, line %d: split '%.32s...' is not a "
                            "split",
                            path, lineno, rest);
        memcpy(pf->split, rest, strlen(rest) + 1);
        return SHARDNET_OK;
    }
    if (!strcmp(key, "devices")) {
        if (strlen(rest) >= sizeof pf->devices)
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "plan %s, line %d: the device list is longer "
                            "than %zu characters",
                            path, lineno, sizeof pf->devices - 1);
        memcpy(pf->devices, rest, strlen(rest) + 1);
        return SHARDNET_OK;
    }
    if (!strcmp(key, "strategy"))
        return plan_strategy(pf, strat_line, path, lineno, rest, line);
    if (!strcmp(key, "micro_batches")) {
        size_t v, nv = 0;
        counted = parse_counts(rest, key, 0, 65536, &v, 1, &nv);
        if (!counted)
            pf->micro = nv ? v : 0;
    } else if (!strcmp(key, "cuts")) {
        pf->have_cuts = 1;
        counted = parse_counts(rest, key, 0, SN_MAX_NODES, pf->cuts,
                               MAX_SPLIT, &pf->ncuts);
    } else if (!strcmp(key, "rows")) {
        counted = parse_counts(rest, key, 0, (size_t)SN_MAX_ELEMENTS, pf->rows,
                               MAX_SPLIT, &pf->nrows);
    } else if (!strcmp(key, "groups")) {
        counted = parse_counts(rest, key, 1, MAX_SPLIT, pf->groups,
                               MAX_SPLIT, &pf->ngroups);
    } else if (!strcmp(key, "replicas")) {
        /* PipeDream's "2-1", or "2,1" as the other counts */
        for (char *d = rest; *d; d++)
            if (*d == '-')
                *d = ',';
        counted = parse_counts(rest, key, 1, SN_COLL_MAX, pf->reps,
                               MAX_SPLIT, &pf->nreps);
    } else {
        return plan_bad_line(path, lineno, line);
    }
    return counted < 0 ? sn_error_prefix(SHARDNET_INVALID_ARGUMENT,
                                         "plan %s, line %d", path, lineno)
                       : SHARDNET_OK;
}

shardnet_status sn_plan_file_read(const char *path, plan_file *pf)
{
    int seen[NONCE] = {0}; /* the line each key of once[] was on */
    int *strat_line = NULL;
    FILE *f;
    char line[1024];
    int lineno = 0;
    shardnet_status st = SHARDNET_OK;
    memset(pf, 0, sizeof *pf);
    if ((st = plan_open(path, &f)) != SHARDNET_OK)
        return st;
    while (fgets(line, sizeof line, f)) {
        size_t len = strlen(line);
        lineno++;
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            /* The line goes on: refused, not read as two lines. */
            int next = fgetc(f);
            if (next != '\n' && next != EOF) {
                st = sn_error(SHARDNET_INVALID_ARGUMENT,
                              "plan %s, line %d: longer than %zu characters",
                              path, lineno, sizeof line - 1);
                break;
            }
        }
        if (line[0] == '#' || line[strspn(line, " \t\r\n")] == '\0')
            continue;
        if ((st = plan_line(pf, seen, &strat_line, path, lineno, line)) !=
            SHARDNET_OK)
            break;
    }
    fclose(f);
    free(strat_line);
    if (st == SHARDNET_OK && (!pf->split[0] || !pf->devices[0]))
        st = sn_error(SHARDNET_INVALID_ARGUMENT,
                      "plan %s: needs 'split' and 'devices' lines", path);
    if (st != SHARDNET_OK) {
        free(pf->strat);
        pf->strat = NULL;
    }
    return st;
}

/* Strategies as plan file lines, in MindSpore's notation. */
static void write_strategies(FILE *f, const sn_strategy *ss, size_t ns)
{
    if (ns)
        fprintf(f, "# per operator, MindSpore's notation: one tuple per "
                   "input, the parts\n# each dimension is cut into\n");
    for (size_t i = 0; i < ns; i++) {
        char t[256];
        sn_strategy_format(&ss[i], t, sizeof t);
        fprintf(f, "strategy %s %s\n", ss[i].node, t);
    }
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
        (session->data && !session->have_data_rows) ||
        (!session->tensor && !session->data && session->ndev > 1 &&
         !session->pipe))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "save plan: the split is made at the first run; "
                        "run the session once first");
    f = fopen(path, "w");
    if (!f)
        return sn_error(SHARDNET_IO_ERROR, "cannot write plan %s", path);
    fprintf(f, "# shardnet plan (shardnet_session_save_plan); edit freely\n");
    fprintf(f, "split %s\n", session->tensor       ? "tensor"
                             : session->data       ? "data"
                             : session->replicated ? "replicated"
                             : session->ngroups    ? "hybrid"
                             : session->ndev > 1   ? "layer"
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
        write_strategies(f, ss, ns);
    } else if (session->data) {
        fprintf(f, "# rows of the batch per device (a batch of another "
                   "size is cut in the\n# same proportions)\n");
        fprintf(f, "rows");
        for (size_t d = 0; d < session->nlisted; d++)
            fprintf(f, " %zu", session->data_rows[d]);
        fprintf(f, "\n");
    } else if (session->ndev > 1) {
        if (session->ngroups) {
            fprintf(f, "# devices per stage (consecutive in the list); a "
                       "stage on several is\n# tensor-split across them\n");
            fprintf(f, "groups");
            for (size_t u = 0; u < session->ngroups; u++)
                fprintf(f, "%s%zu", u ? "," : " ", session->groups[u]);
            fprintf(f, "\n");
            /* The group stages' strategies, as their last run laid them
             * out. */
            for (size_t u = 0; u < sn_pipeline_stages(session->pipe); u++) {
                const sn_strategy *ss;
                size_t ns = sn_pipeline_stage_strategies(session->pipe, u,
                                                         &ss);
                write_strategies(f, ss, ns);
            }
        }
        if (session->replicated) {
            fprintf(f, "# devices per stage (consecutive in the list), "
                       "PipeDream's \"2-1\"; a\n# stage on several runs "
                       "whole on each, taking micro-batches in turn\n");
            fprintf(f, "replicas");
            for (size_t u = 0; u < sn_pipeline_stages(session->pipe); u++)
                fprintf(f, "%s%zu", u ? "," : " ",
                        sn_pipeline_replicas(session->pipe, u));
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
