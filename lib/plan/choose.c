/*
 * The split chooser: from the layer split's cost model, the estimate of
 * each way to run a model on a list of devices (the best single device,
 * a layer split over all of them, a hybrid of two stages each
 * tensor-split over a group, pipelines whose stages are replicated over
 * groups (PipeDream's "2-1"), a data split: data_costs.c), with a
 * readable account of each
 * (sn_split_choose, layer_split.h); then the choice among those and a
 * tensor split, from the tensor cost model's estimate of a candidate
 * (sn_split_pick, choose.h).  It decides: the caller (lib/api/split.c)
 * builds the candidate and the runtime picked.
 */
#include <config.h>

#include <stdio.h>
#include <string.h>

#include "plan/choose.h"
#include "plan/layer_costs.h"

/* The layer split over units (sn_layer_set_units) with m micro-batches: cuts in
 * start[0..nunits], the estimate (HUGE when nothing fits), and a line per
 * stage in the report. */
static double layer_estimate(sn_layer_costs *c, sn_device *const *devs,
                             const size_t *groups, size_t m, size_t *start,
                             double *stage_t, char *report, size_t cap,
                             size_t *len)
{
    /* (More devices than nodes: the first ones, a node each.) */
    size_t ns = c->nunits < c->nlive ? c->nunits : c->nlive, first = 0;
    double bottleneck = 0, moved = 0;
#define SAY(...)                                                              \
    do {                                                                      \
        if (report && *len < cap)                                             \
            *len += (size_t)snprintf(report + *len, cap - *len, __VA_ARGS__); \
    } while (0)
    if (sn_layer_plan_cuts(c, ns, m, start) != SHARDNET_OK) {
        SAY("%s: not possible: %s\n", groups ? "hybrid" : "layer",
            shardnet_last_error());
        sn_error_clear();
        return 1e300;
    }
    start[ns] = c->nlive;
    for (size_t s = 0; s < ns; s++) {
        size_t k = groups ? groups[s] : 1;
        double t = sn_layer_stage_time(c, s, start[s], start[s + 1]);
        SAY("%s stage %zu on ", groups ? "hybrid" : "layer", s);
        for (size_t d = first; d < first + k; d++)
            SAY("%s%s", d > first ? "+" : "", devs[d]->info.name);
        SAY(": nodes %zu-%zu, estimated %.3f ms per batch, memory %.2f MB%s\n",
            start[s], start[s + 1] - 1, t * 1e3,
            sn_layer_stage_memory(c, start[s], start[s + 1], m) / 1e6 / (double)k,
            k > 1 ? " per device (tensor split)" : "");
        if (t > bottleneck)
            bottleneck = t;
        if (stage_t)
            stage_t[s] = t;
        if (s)
            moved += c->xbytes[start[s]];
        first += k;
    }
    /* m micro-batches through ns stages: the slowest stage's share,
     * m + ns - 1 times. */
    double est = bottleneck / (double)m * (double)(m + ns - 1);
    /* Each boundary value leaves one device and enters the next. */
    SAY("%s over %zu stages, %zu micro-batches: estimated %.3f ms (%.2f MB "
        "moved between stages per run)\n",
        groups ? "hybrid" : "layer", ns, m, est * 1e3, 2.0 * moved / 1e6);
#undef SAY
    return est;
}

void sn_replicas_format(const size_t *reps, size_t nreps, char *buf,
                        size_t cap)
{
    size_t len = 0;
    if (cap)
        buf[0] = '\0';
    for (size_t s = 0; s < nreps && len < cap; s++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%zu", s ? "-" : "",
                                reps[s]);
}

/*
 * A replicated configuration (units set by sn_layer_set_replicas, reps[s]
 * devices per stage) with m micro-batches: its cuts, its estimate (HUGE
 * when nothing fits) and one line of the report.  A stage's time is its
 * slowest replica's share of the batch (T_s); a micro-batch takes a
 * replica T_s / (its share of the m), so a replicated stage fills the
 * pipeline more slowly than it runs: the m micro-batches take the
 * slowest stage's interval m - 1 times, plus each stage's latency.  One
 * stage alone takes T_s.
 */
static double replicated_estimate(sn_layer_costs *c, sn_device *const *devs,
                                  const size_t *reps, size_t nreps, size_t m,
                                  size_t *start, char *report, size_t cap,
                                  size_t *len)
{
    char name[64];
    double t[SN_REPLICA_STAGES], bottleneck = 0, est;
    size_t first = 0;
    sn_replicas_format(reps, nreps, name, sizeof name);
#define SAY(...)                                                              \
    do {                                                                      \
        if (report && *len < cap)                                             \
            *len += (size_t)snprintf(report + *len, cap - *len, __VA_ARGS__); \
    } while (0)
    if (nreps > c->nlive || sn_layer_plan_cuts(c, nreps, m, start) !=
                                SHARDNET_OK) {
        SAY("replicated %s: not possible: %s\n", name,
            nreps > c->nlive ? "more stages than nodes"
                             : shardnet_last_error());
        sn_error_clear();
        return 1e300;
    }
    start[nreps] = c->nlive;
    SAY("replicated %s:", name);
    for (size_t s = 0; s < nreps; s++) {
        t[s] = sn_layer_stage_time(c, s, start[s], start[s + 1]);
        if (t[s] > bottleneck)
            bottleneck = t[s];
        SAY("%s stage %zu on ", s ? "," : "", s);
        for (size_t d = first; d < first + reps[s]; d++)
            SAY("%s%s", d > first ? "+" : "", devs[d]->info.name);
        if (reps[s] > 1)
            SAY(" (%zu replicas)", reps[s]);
        SAY(" nodes %zu-%zu, %.3f ms per batch, memory %.2f MB%s", start[s],
            start[s + 1] - 1, t[s] * 1e3,
            sn_layer_stage_memory(c, start[s], start[s + 1], m) / 1e6,
            reps[s] > 1 ? " per device" : "");
        first += reps[s];
    }
    if (nreps == 1) {
        est = t[0];
    } else {
        est = bottleneck / (double)m * (double)(m - 1);
        for (size_t s = 0; s < nreps; s++) {
            size_t per = (m + reps[s] - 1) / reps[s];
            double lat = t[s] / (double)per;
            est += lat > bottleneck / (double)m ? lat : bottleneck / (double)m;
        }
    }
    SAY("; %zu micro-batches: estimated %.3f ms\n", m, est * 1e3);
#undef SAY
    return est;
}

/* Whether a replicated configuration can run: a stage's replicas on one
 * process, and a replicated stage's values not sent to another. */
static int replicas_possible(sn_device *const *devs, size_t ndev,
                             const size_t *reps, size_t nreps)
{
    for (size_t s = 0, first = 0; s < nreps; first += reps[s++]) {
        if (reps[s] < 2)
            continue;
        for (size_t d = first + 1; d < ndev; d++)
            if (devs[d]->process != devs[first]->process)
                return 0;
    }
    return 1;
}

/* Every replicated configuration worth weighing over ndev devices: each
 * composition of the list into consecutive groups (up to four devices),
 * else one group and each two-group one; at least one group of two or
 * more.  The best in out. */
static shardnet_status replicated_choices(sn_layer_costs *c,
                                          sn_device *const *devs, size_t ndev,
                                          size_t micro, sn_split_choice *out,
                                          size_t *start, char *report,
                                          size_t cap, size_t *len)
{
    size_t ncomp = ndev <= SN_REPLICA_STAGES ? (size_t)1 << (ndev - 1)
                                             : ndev + 1;
    /* The runtime's micro-batches: one per replica at least, when the
     * batch may be cut. */
    size_t m = micro ? micro : sn_pipeline_default_micro(c->rows, ndev);
    m = c->apart ? sn_pipeline_micro_batches(c->rows, m) : 1;
    for (size_t k = 0; k < ncomp; k++) {
        size_t reps[SN_REPLICA_STAGES], n = 0, run = 1;
        if (ndev <= SN_REPLICA_STAGES) {
            /* bit i of k: a stage ends after device i */
            for (size_t d = 0; d + 1 < ndev; d++, run++)
                if (k >> d & 1) {
                    reps[n++] = run;
                    run = 0;
                }
            reps[n++] = run;
        } else if (k == ndev) {
            reps[n++] = ndev;
        } else if (k > 0) {
            reps[n++] = k;
            reps[n++] = ndev - k;
        } else {
            continue;
        }
        size_t most = 0;
        for (size_t s = 0; s < n; s++)
            most = reps[s] > most ? reps[s] : most;
        if (most < 2 || !replicas_possible(devs, ndev, reps, n))
            continue;
        shardnet_status st = sn_layer_set_replicas(c, reps, n, m);
        if (st != SHARDNET_OK)
            return st;
        double e = replicated_estimate(c, devs, reps, n, m, start, report,
                                       cap, len);
        if (e < out->replicated) {
            out->replicated = e;
            memcpy(out->reps, reps, n * sizeof reps[0]);
            out->nreps = n;
        }
    }
    return SHARDNET_OK;
}

shardnet_status sn_split_choose(sn_graph *g, sn_device *const *devs,
                                size_t ndev, const sn_binding *inputs,
                                size_t micro, sn_split_choice *out,
                                char *report, size_t cap)
{
    sn_layer_costs c;
    size_t start[65], len = 0;
    shardnet_status st;
    memset(out, 0, sizeof *out);
    out->none = out->layer = out->hybrid = out->replicated = 1e300;
    if (ndev < 1 || ndev > 64)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "split: 1 to 64 devices");
    if (report && cap)
        report[0] = '\0';
    if ((st = sn_layer_costs_measure(g, devs, ndev, inputs, &c, report, cap,
                                     &len)) != SHARDNET_OK)
        return st;
    size_t ns = ndev < c.nlive ? ndev : c.nlive;
#define SAY(...)                                                              \
    do {                                                                      \
        if (report && len < cap)                                              \
            len += (size_t)snprintf(report + len, cap - len, __VA_ARGS__);    \
    } while (0)
    for (size_t d = 0; d < ndev; d++) {
        double t = sn_layer_dev_time(&c, d, 0, c.nlive);
        double mem = sn_layer_stage_memory(&c, 0, c.nlive, 1);
        SAY("none on %s: estimated %.3f ms (GEMM speed %.1f GFLOP/s), "
            "memory %.2f MB of %.0f MB",
            devs[d]->info.name, t * 1e3, c.speed[d] * 1e-9, mem / 1e6,
            c.limit[d] / 1e6);
        if (mem > c.limit[d]) {
            SAY(": does not fit\n");
            continue;
        }
        SAY("\n");
        if (t < out->none) {
            out->none = t;
            out->best_dev = d;
        }
    }
    size_t m = micro ? micro : sn_pipeline_default_micro(c.rows, ns);
    if (m > c.rows)
        m = c.rows ? c.rows : 1;
    if (ns > 1 && (st = sn_layer_set_units(&c, NULL, 0)) == SHARDNET_OK)
        out->layer = layer_estimate(&c, devs, NULL, m, start, NULL, report,
                                    cap, &len);
    /* Hybrid: two stages, each tensor-split over a group of consecutive
     * devices (at least one group of two or more). */
    for (size_t k = 1; st == SHARDNET_OK && ndev >= 3 && k < ndev; k++) {
        size_t groups[2] = {k, ndev - k};
        /* A group tensor-splits its stage: all of it on one process. */
        int spans = 0;
        for (size_t d = 1; d < ndev; d++)
            if (d != k && devs[d]->process != devs[d - 1]->process)
                spans = 1;
        if (spans)
            continue;
        size_t mh = micro ? micro : sn_pipeline_default_micro(c.rows, 2);
        if (mh > c.rows)
            mh = c.rows ? c.rows : 1;
        if ((st = sn_layer_set_units(&c, groups, 2)) != SHARDNET_OK)
            break;
        double t[2] = {0, 0};
        double e = layer_estimate(&c, devs, groups, mh, start, t, report,
                                  cap, &len);
        if (e < out->hybrid) {
            out->hybrid = e;
            out->hybrid_stage[0] = t[0];
            out->hybrid_stage[1] = t[1];
            out->groups[0] = k;
            out->groups[1] = ndev - k;
            out->ngroups = 2;
        }
    }
#undef SAY
    if (st == SHARDNET_OK && ndev > 1)
        st = replicated_choices(&c, devs, ndev, micro, out, start, report,
                                cap, &len);
    if (st == SHARDNET_OK)
        st = sn_data_estimate(g, devs, ndev, inputs, &c, &out->data, report,
                              cap, &len);
    sn_layer_costs_free(&c);
    if (st != SHARDNET_OK)
        return st;
    if (out->none >= 1e300 && out->layer >= 1e300 && out->hybrid >= 1e300 &&
        out->replicated >= 1e300 && out->data.est >= 1e300)
        return sn_error(SHARDNET_OUT_OF_MEMORY,
                        "the model fits neither one of the devices nor a "
                        "layer split of them");
    return SHARDNET_OK;
}

/* The tensor candidate's line of the report; its estimate, HUGE when it
 * cannot run. */
static double tensor_estimate(const sn_tensor_candidate *tc, size_t ndev,
                              char *report, size_t cap, size_t *len)
{
    if (tc->not_possible) {
        if (report && *len < cap)
            *len += (size_t)snprintf(report + *len, cap - *len,
                                     "tensor: not possible: %s\n",
                                     tc->not_possible);
        return 1e300;
    }
    if (report && *len < cap)
        *len += (size_t)snprintf(
            report + *len, cap - *len,
            "tensor over %zu devices: estimated %.3f ms (%zu "
            "collectives, %.2f MB moved per run)%s%s\n",
            ndev, tc->estimate * 1e3, tc->ncoll, tc->bytes / 1e6,
            tc->overflow ? ": does not fit on " : "",
            tc->overflow ? tc->overflow : "");
    return tc->overflow ? 1e300 : tc->estimate;
}

sn_split_kind sn_split_pick(const sn_split_choice *ch,
                            const sn_tensor_candidate *tc, size_t ndev,
                            const char *best_name, char *report, size_t cap)
{
    sn_split_kind kind = SN_SPLIT_NONE;
    double est = ch->none, t_est = 1e300;
    size_t len = report ? strlen(report) : 0;
    if (ch->layer < est) {
        kind = SN_SPLIT_LAYER;
        est = ch->layer;
    }
    if (ch->hybrid < est) {
        kind = SN_SPLIT_HYBRID;
        est = ch->hybrid;
    }
    if (ch->replicated < est) {
        kind = SN_SPLIT_REPLICATED;
        est = ch->replicated;
    }
    if (ch->data.est < est) {
        kind = SN_SPLIT_DATA;
        est = ch->data.est;
    }
    if (tc)
        t_est = tensor_estimate(tc, ndev, report, cap, &len);
    if (t_est < est) {
        kind = SN_SPLIT_TENSOR;
        est = t_est;
    }
    if (!report || len >= cap)
        return kind;
    char why[160] = "";
    if (kind == SN_SPLIT_NONE && ndev > 1)
        snprintf(why, sizeof why,
                 ": splitting would be slower than the fastest device "
                 "alone");
    else if (kind != SN_SPLIT_NONE && est > 0 && ch->none < 1e300)
        snprintf(why, sizeof why,
                 ": the fastest estimate, %.2fx as fast as the fastest "
                 "device alone (%s, %.3f ms)",
                 ch->none / est, best_name, ch->none * 1e3);
    char reps[64] = "";
    if (kind == SN_SPLIT_REPLICATED) {
        reps[0] = ' ';
        sn_replicas_format(ch->reps, ch->nreps, reps + 1, sizeof reps - 1);
    }
    snprintf(report + len, cap - len, "choice: %s%s (estimated %.3f ms)%s\n",
             kind == SN_SPLIT_TENSOR       ? "tensor"
             : kind == SN_SPLIT_LAYER      ? "layer"
             : kind == SN_SPLIT_HYBRID     ? "hybrid"
             : kind == SN_SPLIT_DATA       ? "data"
             : kind == SN_SPLIT_REPLICATED ? "replicated"
                                           : "none",
             reps, est * 1e3, why);
    return kind;
}
