/* Running a session: its inputs checked, its split prepared (split.c),
 * then one plan on one device, the pipeline of a layer or hybrid split,
 * or the tensor split; a stream of batches through the pipeline; and the
 * estimate that chose the split checked against the runs. */
#include <config.h>

#include <stdlib.h>

#include "api/api_impl.h"
#include "comm/world.h"
#include "core/trace.h"
#include "ops/registry.h"
#include "plan/profile.h"

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
        sn_session_rows(session) != session->est_rows)
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
        (st = sn_session_prepare(session)) != SHARDNET_OK)
        return st;
    if (session->tensor) {
        if (session->ts && !sn_tensor_split_matches(session->ts,
                                                    session->inputs)) {
            sn_tensor_split_free(session->ts); /* another input shape */
            session->ts = NULL;
        }
        if (!session->ts &&
            (st = sn_session_tensor_search(session, session->strat,
                                           session->nstrat, &session->ts,
                                           NULL, 0)) != SHARDNET_OK)
            return st;
        return sn_tensor_split_run(session->ts, session->inputs);
    }
    if (session->data)
        return sn_data_split_run(session->ds, session->inputs,
                                 session->data_rows);
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
        (st = sn_session_prepare(session)) != SHARDNET_OK)
        return st;
    if (!session->tensor && !session->data &&
        (session->ndev > 1 || session->multi)) {
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
