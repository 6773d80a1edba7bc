/*
 * The split chooser: from the layer split's cost model, the estimate of
 * each way to run a model on a list of devices (the best single device,
 * a layer split over all of them, a hybrid of two stages each
 * tensor-split over a group, a data split: data_costs.c), with a
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
                             char *report, size_t cap, size_t *len)
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

shardnet_status sn_split_choose(sn_graph *g, sn_device *const *devs,
                                size_t ndev, const sn_binding *inputs,
                                size_t micro, sn_split_choice *out,
                                char *report, size_t cap)
{
    sn_layer_costs c;
    size_t start[65], len = 0;
    shardnet_status st;
    memset(out, 0, sizeof *out);
    out->none = out->layer = out->hybrid = 1e300;
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
        out->layer = layer_estimate(&c, devs, NULL, m, start, report, cap,
                                    &len);
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
        double e = layer_estimate(&c, devs, groups, mh, start, report, cap,
                                  &len);
        if (e < out->hybrid) {
            out->hybrid = e;
            out->groups[0] = k;
            out->groups[1] = ndev - k;
            out->ngroups = 2;
        }
    }
#undef SAY
    if (st == SHARDNET_OK)
        st = sn_data_estimate(g, devs, ndev, inputs, &c, &out->data, report,
                              cap, &len);
    sn_layer_costs_free(&c);
    if (st != SHARDNET_OK)
        return st;
    if (out->none >= 1e300 && out->layer >= 1e300 && out->hybrid >= 1e300 &&
        out->data.est >= 1e300)
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
    snprintf(report + len, cap - len, "choice: %s (estimated %.3f ms)%s\n",
             kind == SN_SPLIT_TENSOR   ? "tensor"
             : kind == SN_SPLIT_LAYER  ? "layer"
             : kind == SN_SPLIT_HYBRID ? "hybrid"
             : kind == SN_SPLIT_DATA   ? "data"
                                       : "none",
             est * 1e3, why);
    return kind;
}
