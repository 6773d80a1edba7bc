/* A session's split: the candidate tensor split built for the planner's
 * chooser (lib/plan/choose.h, which weighs it against one device, a
 * layer, a hybrid, a replicated and a data split and tells why), the
 * choice "auto" applies, the pipeline made for a layer, hybrid or
 * replicated split, the rows of a data split, and
 * shardnet_session_describe, which tells all of it. */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_impl.h"
#include "plan/choose.h"
#include "plan/profile.h"

/* Whether key (input shapes kept with an answer, or NULL) is the bound
 * inputs' shapes. */
static int shapes_here(const shardnet_session_t *session,
                       const sn_binding *key)
{
    const sn_graph *g = session->model->g;
    if (!key)
        return 0;
    for (size_t i = 0; i < g->ninputs; i++) {
        const sn_binding *a = &key[i], *b = &session->inputs[i];
        if (a->dtype != b->dtype || a->rank != b->rank ||
            memcmp(a->dims, b->dims, (size_t)a->rank * sizeof a->dims[0]))
            return 0;
    }
    return 1;
}

/* The bound inputs' shapes (no data), to keep with an answer; NULL where
 * memory is short. */
static sn_binding *shapes_now(const shardnet_session_t *session)
{
    const sn_graph *g = session->model->g;
    sn_binding *shapes = malloc((g->ninputs + 1) * sizeof *shapes);
    if (!shapes)
        return NULL;
    memcpy(shapes, session->inputs, g->ninputs * sizeof *shapes);
    for (size_t i = 0; i < g->ninputs; i++)
        shapes[i].data = NULL;
    return shapes;
}

/* Keep the search's answer for these input shapes (nothing kept where
 * memory is short: the next call searches again). */
static void keep_found(shardnet_session_t *session, const sn_tensor_split *ts,
                       const char *report)
{
    const sn_strategy *ss;
    size_t ns = sn_tensor_split_strategies(ts, &ss);
    sn_binding *shapes = shapes_now(session);
    sn_strategy *copy = malloc((ns + 1) * sizeof *copy);
    char *said = strdup(report);
    if (!shapes || !copy || !said) {
        free(shapes);
        free(copy);
        free(said);
        return;
    }
    if (ns)
        memcpy(copy, ss, ns * sizeof *copy);
    free(session->found_for);
    free(session->found);
    free(session->found_report);
    session->found_for = shapes;
    session->found = copy;
    session->nfound = ns;
    session->found_report = said;
}

shardnet_status sn_session_tensor_search(shardnet_session_t *session,
                                         const sn_strategy *fixed,
                                         size_t nfixed, sn_tensor_split **out,
                                         char *report, size_t cap)
{
    double speed[MAX_SPLIT];
    shardnet_status st;
    if ((st = sn_profiles_share(session->devs, session->nlisted)) !=
        SHARDNET_OK)
        return st;
    /* (Shares by the profiles' speeds, not by what contention leaves of
     * them: that is measured anew by each process, and shares that move
     * with it would change the sums' order from one process to the
     * next.) */
    for (size_t d = 0; d < session->nlisted; d++)
        speed[d] = sn_device_speed(session->devs[d]);
    /* Searched before for these shapes: the split it found, built again
     * from its strategies (every process of a job makes the same calls,
     * so all take this path alike). */
    if (!nfixed && shapes_here(session, session->found_for)) {
        if (report && cap)
            snprintf(report, cap, "%s", session->found_report);
        return sn_tensor_split_create(session->model->g, session->devs,
                                      session->nlisted, speed,
                                      session->inputs, session->found,
                                      session->nfound, session->home, out);
    }
    /* The report is kept with the answer, so it is written whatever the
     * caller asked for. */
    size_t room = sn_tensor_split_search_room(session->model->g);
    char *said = nfixed ? NULL : malloc(room);
    st = sn_tensor_split_search(session->model->g, session->devs,
                                session->nlisted, speed, session->inputs,
                                fixed, nfixed, session->home, out,
                                said ? said : report, said ? room : cap);
    if (st == SHARDNET_OK && said) {
        keep_found(session, *out, said);
        if (report && cap)
            snprintf(report, cap, "%s", said);
    }
    free(said);
    return st;
}

/*
 * The planner's best hybrid (ch->groups) priced with its group stages'
 * tensor splits searched, as their first run would search them (for the
 * micro-batches' shape), instead of the group model's guess at them: a
 * group stage's time a batch is its search's estimate for one
 * micro-batch times the micro-batches, a one-device stage's the
 * planner's, and the pipeline's estimate the slowest stage's share
 * m + 1 times (layer_estimate's formula, two stages).  ch->hybrid
 * becomes that, told in report.  The pipeline made for it is kept
 * (hyb_probe): chosen, it is the one that runs, its splits made.  Not in
 * a job of several processes (a process searches only its own stages,
 * and every process must weigh alike), nor with a plan file's cuts or
 * strategies (they decide the stages).
 */
static void search_hybrid(shardnet_session_t *session, sn_split_choice *ch,
                          char *report, size_t cap)
{
    size_t len = report ? strlen(report) : 0;
    double stage_s[2];
    size_t m = 0;
#define SAY(...)                                                              \
    do {                                                                      \
        if (report && len < cap)                                              \
            len += (size_t)snprintf(report + len, cap - len, __VA_ARGS__);    \
    } while (0)
    if (ch->ngroups != 2 || ch->hybrid >= 1e300 || session->multi ||
        session->have_cuts || session->nstrat)
        return;
    if (shapes_here(session, session->hyb_for) &&
        session->hyb_groups[0] == ch->groups[0] &&
        session->hyb_groups[1] == ch->groups[1]) {
        SAY("%s", session->hyb_said);
        ch->hybrid = session->hyb_est;
        return;
    }
    size_t from = len;
    char line[1024];
    if (!report) { /* the line is kept, so it is written anyway */
        report = line;
        cap = sizeof line;
        len = from = 0;
        line[0] = '\0';
    }
    if (session->hyb_probe && (session->hyb_groups[0] != ch->groups[0] ||
                               session->hyb_groups[1] != ch->groups[1])) {
        sn_pipeline_free(session->hyb_probe);
        session->hyb_probe = NULL;
    }
    if ((!session->hyb_probe &&
         sn_pipeline_create_groups(session->model->g, session->devs,
                                   session->nlisted, ch->groups, 2,
                                   session->inputs, NULL, NULL, 0,
                                   &session->hyb_probe) != SHARDNET_OK) ||
        sn_pipeline_search_groups(session->hyb_probe, session->inputs,
                                  session->micro, stage_s, &m) !=
            SHARDNET_OK) {
        SAY("hybrid: its group stages not searched (%s): the group model's "
            "estimate stands\n",
            shardnet_last_error());
        sn_error_clear();
        sn_pipeline_free(session->hyb_probe);
        session->hyb_probe = NULL;
        return;
    }
    session->hyb_groups[0] = ch->groups[0];
    session->hyb_groups[1] = ch->groups[1];
    double slowest = 0;
    SAY("hybrid over %zu+%zu devices, its group stages searched for %zu "
        "micro-batch%s:",
        ch->groups[0], ch->groups[1], m, m == 1 ? "" : "es");
    for (size_t s = 0; s < 2; s++) {
        double t = stage_s[s] >= 1e300 ? 1e300
                   : stage_s[s] >= 0   ? stage_s[s] * (double)m
                                       : ch->hybrid_stage[s];
        if (stage_s[s] >= 1e300)
            SAY(" stage %zu does not fit;", s);
        else if (stage_s[s] >= 0)
            SAY(" stage %zu estimated %.3f ms per batch (the group model's "
                "%.3f ms);",
                s, t * 1e3, ch->hybrid_stage[s] * 1e3);
        if (t > slowest)
            slowest = t;
    }
    double est = slowest >= 1e300 ? 1e300
                                  : slowest / (double)m * (double)(m + 1);
    if (est >= 1e300)
        SAY(" does not fit\n");
    else
        SAY(" estimated %.3f ms (the group model's %.3f ms)\n", est * 1e3,
            ch->hybrid * 1e3);
    ch->hybrid = est;
    free(session->hyb_for);
    free(session->hyb_said);
    session->hyb_for = shapes_now(session);
    session->hyb_said = strdup(len > from ? report + from : "");
    session->hyb_est = est;
    if (!session->hyb_said) {
        free(session->hyb_for);
        session->hyb_for = NULL;
    }
#undef SAY
}

/*
 * The cost model's choice (lib/plan/choose.h) among one device, a layer
 * split, a tensor split and a hybrid split over all listed devices, with
 * every estimate told in report (may be NULL).  *ts: the tensor split
 * built to estimate it, when it is chosen (else NULL); the caller owns
 * it.  ch: the estimates.
 */
static shardnet_status choose_split(shardnet_session_t *session, char *report,
                                    size_t cap, sn_split_kind *kind,
                                    sn_split_choice *ch, sn_tensor_split **ts)
{
    sn_tensor_candidate tc = {0};
    shardnet_status st;
    *ts = NULL;
    if ((st = sn_split_choose(session->model->g, session->devs,
                              session->nlisted, session->inputs,
                              session->micro, ch, report, cap)) !=
        SHARDNET_OK)
        return st;
    search_hybrid(session, ch, report, cap);
    if (session->nlisted > 1) {
        /* What the search did, at the report's end. */
        size_t at = report ? strlen(report) : 0;
        if (sn_session_tensor_search(session, NULL, 0, ts,
                                     report && at < cap ? report + at : NULL,
                                     report && at < cap ? cap - at : 0) ==
            SHARDNET_OK) {
            tc.estimate = sn_tensor_split_estimate(*ts);
            tc.ncoll = sn_tensor_split_collectives(*ts, &tc.bytes);
            tc.overflow = sn_tensor_split_overflow(*ts);
        } else {
            tc.not_possible = shardnet_last_error();
        }
    }
    *kind = sn_split_pick(ch, session->nlisted > 1 ? &tc : NULL,
                          session->nlisted,
                          session->devs[ch->best_dev]->info.name, report,
                          cap);
    if (tc.not_possible)
        sn_error_clear();
    if (*kind != SN_SPLIT_TENSOR) {
        sn_tensor_split_free(*ts);
        *ts = NULL;
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

/* The planner's replicated configuration becomes the session's. */
static shardnet_status take_replicas(shardnet_session_t *session,
                                     const sn_split_choice *ch)
{
    if (!ch->nreps)
        return sn_error(SHARDNET_UNSUPPORTED,
                        "replicated split: no configuration of these "
                        "devices can run (a stage's replicas stay in one "
                        "process, and so do its values)");
    memcpy(session->reps, ch->reps, ch->nreps * sizeof ch->reps[0]);
    session->nreps = ch->nreps;
    session->replicated = 1;
    session->replicated_default = 0;
    return SHARDNET_OK;
}

int64_t sn_session_rows(const shardnet_session_t *session)
{
    return session->model->g->ninputs && session->inputs[0].rank
               ? session->inputs[0].dims[0]
               : 1;
}

/* Make the session run as chosen (auto decides once); takes ts. */
static shardnet_status apply_choice(shardnet_session_t *session,
                                    sn_split_kind kind,
                                    const sn_split_choice *ch,
                                    sn_tensor_split *ts)
{
    size_t best = ch->best_dev;
    session->est_s = kind == SN_SPLIT_TENSOR   ? sn_tensor_split_estimate(ts)
                     : kind == SN_SPLIT_LAYER  ? ch->layer
                     : kind == SN_SPLIT_HYBRID ? ch->hybrid
                     : kind == SN_SPLIT_REPLICATED ? ch->replicated
                     : kind == SN_SPLIT_DATA   ? ch->data.est
                                            : ch->none;
    session->est_rows = sn_session_rows(session);
    session->nruns = 0;
    if (kind == SN_SPLIT_DATA) {
        session->choose = 0;
        session->data = 1;
        session->ndev = session->nlisted;
        memcpy(session->data_rows, ch->data.rows,
               session->nlisted * sizeof ch->data.rows[0]);
        session->data_batch = sn_batch_rows(session->model->g,
                                            session->inputs);
        session->have_data_rows = 1;
        sn_tensor_split_free(ts);
        return SHARDNET_OK;
    }
    if (kind == SN_SPLIT_TENSOR) {
        session->choose = 0;
        session->tensor = 1;
        session->ndev = session->nlisted;
        session->ts = ts;
        return SHARDNET_OK;
    }
    sn_tensor_split_free(ts);
    if (kind == SN_SPLIT_LAYER || kind == SN_SPLIT_HYBRID ||
        kind == SN_SPLIT_REPLICATED) {
        session->ndev = session->nlisted;
        if (kind == SN_SPLIT_HYBRID)
            take_groups(session, ch);
        if (kind == SN_SPLIT_REPLICATED)
            return take_replicas(session, ch);
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

/* Rows in the proportions of w[0..n) for a batch of `rows`: each its
 * share rounded down, the rest to the largest remainders; a device left
 * with one row of a larger batch gives it to the device with the most
 * (a row alone sums in an order of its own on a CPU). */
static void scale_rows(const size_t *w, size_t n, size_t rows, size_t *out)
{
    double total = 0;
    size_t given = 0, most = 0;
    for (size_t d = 0; d < n; d++)
        total += (double)w[d];
    for (size_t d = 0; d < n; d++) {
        out[d] = (size_t)((double)rows * (double)w[d] / total);
        given += out[d];
    }
    while (given < rows) {
        size_t b = 0;
        double best = -1;
        for (size_t d = 0; d < n; d++) {
            double frac = (double)rows * (double)w[d] / total - (double)out[d];
            if (w[d] && frac > best) {
                best = frac;
                b = d;
            }
        }
        out[b]++;
        given++;
    }
    for (size_t d = 0; d < n; d++)
        if (out[d] > out[most])
            most = d;
    for (size_t d = 0; d < n; d++)
        if (out[d] == 1 && rows > 1 && d != most) {
            out[d] = 0;
            out[most]++;
        }
}

/* A data split's rows per device for the bound batch: a plan file's in
 * their proportions, else the planner's (for each new batch size); a
 * batch the planner cannot cut runs whole on the fastest device. */
static shardnet_status data_rows(shardnet_session_t *session)
{
    sn_graph *g = session->model->g;
    size_t rows = sn_batch_rows(g, session->inputs);
    sn_split_choice ch;
    shardnet_status st;
    if (session->have_data_rows && session->data_batch == rows)
        return SHARDNET_OK;
    if (session->data_rows_fixed) {
        scale_rows(session->data_plan_rows, session->nlisted, rows,
                   session->data_rows);
        session->data_batch = rows;
        return SHARDNET_OK;
    }
    if ((st = sn_split_choose(g, session->devs, session->nlisted,
                              session->inputs, session->micro, &ch, NULL,
                              0)) != SHARDNET_OK)
        return st;
    memset(session->data_rows, 0, sizeof session->data_rows);
    if (ch.data.est < 1e300) {
        memcpy(session->data_rows, ch.data.rows,
               session->nlisted * sizeof ch.data.rows[0]);
    } else {
        session->data_rows[ch.best_dev] = rows;
        sn_log(SHARDNET_LOG_INFO,
               "data split: %s: the batch runs on %s alone", ch.data.why,
               session->devs[ch.best_dev]->info.name);
    }
    session->data_batch = rows;
    session->have_data_rows = 1;
    return SHARDNET_OK;
}

shardnet_status sn_session_prepare(shardnet_session_t *session)
{
    sn_graph *g = session->model->g;
    shardnet_status st;
    if (session->choose) {
        /* "auto": one device, a layer split or a tensor split, whichever
         * the cost model says is fastest for these inputs. */
        sn_split_kind kind;
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
    if (session->replicated_default && !session->pipe) {
        /* "replicated" without replicas: the planner's best. */
        sn_split_choice ch;
        if ((st = sn_split_choose(g, session->devs, session->nlisted,
                                  session->inputs, session->micro, &ch, NULL,
                                  0)) != SHARDNET_OK ||
            (st = take_replicas(session, &ch)) != SHARDNET_OK)
            return st;
    }
    if (session->data) {
        if ((st = data_rows(session)) != SHARDNET_OK)
            return st;
        if (!session->ds &&
            (st = sn_data_split_create(g, session->devs, session->nlisted,
                                       &session->ds)) != SHARDNET_OK)
            return st;
        return SHARDNET_OK;
    }
    if (session->replicated && !session->pipe)
        return sn_pipeline_create_replicated(
            g, session->devs, session->ndev, session->reps, session->nreps,
            session->inputs, session->have_cuts ? session->cuts : NULL,
            &session->pipe);
    /* The hybrid the planner priced runs as it was made for that, its
     * group stages searched; once decided, no other is kept. */
    if (!session->tensor && !session->pipe && session->hyb_probe &&
        session->ngroups == 2 && session->groups[0] == session->hyb_groups[0] &&
        session->groups[1] == session->hyb_groups[1] &&
        !session->have_cuts && !session->nstrat) {
        session->pipe = session->hyb_probe;
        session->hyb_probe = NULL;
    }
    sn_pipeline_free(session->hyb_probe);
    session->hyb_probe = NULL;
    if (!session->tensor && (session->ndev > 1 || session->multi) &&
        !session->pipe &&
        (st = sn_pipeline_create_groups(
             g, session->ndev > 1 ? session->devs : &session->dev,
             session->ndev, session->ngroups ? session->groups : NULL,
             session->ngroups, session->inputs,
             session->have_cuts ? session->cuts : NULL, session->strat,
             session->nstrat, &session->pipe)))
        return st;
    return SHARDNET_OK;
}

/* What a session runs, as describe tells it: the session's own split, or,
 * where "auto" or a hybrid's default groups are still open, what the
 * first run will decide from the same estimates (apply_choice and
 * take_groups, on a copy).  Describing decides nothing. */
typedef struct running {
    int open;       /* "auto", with no estimate to tell */
    int tensor;
    int data;
    const size_t *rows; /* data: rows per device, or NULL: not yet known */
    size_t ndev;
    size_t ngroups;
    const size_t *groups;
    int replicated;
    size_t nreps;
    const size_t *reps;
    const sn_device *dev;
    const sn_tensor_split *ts; /* what a tensor split cuts, or NULL */
} running;

static running running_of(const shardnet_session_t *session, int estimated,
                          sn_split_kind kind, const sn_split_choice *ch,
                          const sn_tensor_split *ts)
{
    running r = {.open = session->choose,
                 .tensor = session->tensor,
                 .data = session->data,
                 .rows = session->have_data_rows ? session->data_rows : NULL,
                 .ndev = session->ndev,
                 .ngroups = session->ngroups,
                 .groups = session->groups,
                 .replicated = session->replicated,
                 .nreps = session->nreps,
                 .reps = session->reps,
                 .dev = session->dev,
                 .ts = session->tensor ? session->ts : NULL};
    if (!estimated)
        return r;
    if (session->choose) {
        r.open = 0;
        if (kind == SN_SPLIT_TENSOR) {
            r.tensor = 1;
            r.ndev = session->nlisted;
            r.ts = ts;
        } else if (kind == SN_SPLIT_DATA) {
            r.data = 1;
            r.ndev = session->nlisted;
            r.rows = ch->data.rows;
        } else if (kind == SN_SPLIT_LAYER || kind == SN_SPLIT_HYBRID ||
                   kind == SN_SPLIT_REPLICATED) {
            r.ndev = session->nlisted;
        } else {
            r.dev = session->devs[ch->best_dev];
        }
    }
    if (((session->choose && kind == SN_SPLIT_HYBRID) ||
         (!session->choose && session->hybrid_default && !session->pipe)) &&
        ch->ngroups) {
        r.ngroups = ch->ngroups;
        r.groups = ch->groups;
    }
    if (((session->choose && kind == SN_SPLIT_REPLICATED) ||
         (!session->choose && session->replicated_default &&
          !session->pipe)) &&
        ch->nreps) {
        r.replicated = 1;
        r.nreps = ch->nreps;
        r.reps = ch->reps;
    }
    return r;
}

/* Stages on counts[0..n) consecutive listed devices each, as
 * " cpu:0+cpu:1 | cl:0" (with " (2 replicas)" after a stage of several
 * when `several` names them), and the line's end, appended to text. */
static size_t describe_stages(const shardnet_session_t *session,
                              const size_t *counts, size_t n,
                              const char *several, char *text, size_t cap,
                              size_t len)
{
    for (size_t u = 0, d = 0; u < n && len < cap; u++) {
        len += (size_t)snprintf(text + len, cap - len, "%s", u ? " |" : "");
        for (size_t k = 0; k < counts[u] && len < cap; k++, d++)
            len += (size_t)snprintf(text + len, cap - len, "%s%s",
                                    k ? "+" : " ",
                                    session->devs[d]->info.name);
        if (several && counts[u] > 1 && len < cap)
            len += (size_t)snprintf(text + len, cap - len, " (%zu%s)",
                                    counts[u], several);
    }
    if (len < cap)
        len += (size_t)snprintf(text + len, cap - len, "\n");
    return len;
}

/* The "running:" line of r, appended to text (of len characters). */
static size_t describe_running(const shardnet_session_t *session,
                               const running *r, char *text, size_t cap,
                               size_t len)
{
    if (r->open)
        len += (size_t)snprintf(text + len, cap - len,
                                "running: decided at the first run (auto)\n");
    else if (r->tensor)
        len += (size_t)snprintf(text + len, cap - len,
                                "running: tensor split over %zu devices\n",
                                session->nlisted);
    else if (r->data) {
        len += (size_t)snprintf(text + len, cap - len,
                                "running: data split over %zu devices",
                                session->nlisted);
        for (size_t d = 0; r->rows && d < session->nlisted && len < cap; d++)
            len += (size_t)snprintf(text + len, cap - len, "%s%s %zu rows",
                                    d ? ", " : ": ",
                                    session->devs[d]->info.name, r->rows[d]);
        if (len < cap)
            len += (size_t)snprintf(text + len, cap - len, "\n");
    } else if (r->ndev > 1 && r->replicated) {
        char name[64];
        sn_replicas_format(r->reps, r->nreps, name, sizeof name);
        len += (size_t)snprintf(text + len, cap - len,
                                "running: replicated split %s, stages on",
                                name);
        len = describe_stages(session, r->reps, r->nreps, " replicas", text,
                              cap, len);
    } else if (r->ndev > 1 && r->ngroups) {
        len += (size_t)snprintf(text + len, cap - len,
                                "running: hybrid split, stages on");
        len = describe_stages(session, r->groups, r->ngroups, NULL, text,
                              cap, len);
        if (session->pipe && session->ngroups) {
            sn_pipeline_describe_groups(session->pipe, text, cap);
            len = strlen(text);
        }
    } else if (r->ndev > 1)
        len += (size_t)snprintf(text + len, cap - len,
                                "running: layer split over %zu devices\n",
                                r->ndev);
    else
        len += (size_t)snprintf(text + len, cap - len,
                                "running: none, on %s\n", r->dev->info.name);
    return len;
}

size_t shardnet_session_describe(shardnet_session_t *session, char *buf,
                                 size_t cap)
{
    char text[16384];
    sn_split_kind kind = SN_SPLIT_NONE;
    int estimated;
    size_t len;
    sn_split_choice ch;
    const sn_graph *g;
    sn_tensor_split *ts = NULL;
    running r;
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
    estimated = choose_split(session, text, sizeof text, &kind, &ch, &ts) ==
                SHARDNET_OK;
    if (!estimated)
        snprintf(text, sizeof text, "no estimate: %s\n", shardnet_last_error());
    r = running_of(session, estimated, kind, &ch, ts);
    len = describe_running(session, &r, text, sizeof text, strlen(text));
    /* What a tensor split cuts, when it runs or would be chosen. */
    if (r.ts && len < sizeof text)
        sn_tensor_split_describe(r.ts, text, sizeof text);
    sn_tensor_split_free(ts);
    len = strlen(text);
    if (buf && cap)
        snprintf(buf, cap, "%s", text);
    return len;
}
