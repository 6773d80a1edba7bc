/*
 * The data split's planner: every device runs the whole model on rows of
 * the batch of its own, so its cost is its device's time for those rows,
 * and the rows are shared out so that the devices finish together.
 *
 * A device's time for r rows is taken as a line, fixed + per_row * r,
 * through the node costs (node_costs.h) of the whole model at two batch
 * sizes: the whole batch and an even share of it (the share a device is
 * likely to get; a product is weight-bound at few rows and compute-bound
 * at many, so the line is exact at both ends of the range that matters
 * and above the truth between them), slowed by what the device keeps of
 * its speed while the devices it shares with compute too (share.h).  In
 * a job of several processes the outputs cross the link to every
 * process, in the context's codec (--comm: the runtime encodes each
 * device's float32 rows of them, comm/codec.h).  Each device
 * holds every weight: the memory the split costs is the weights once per
 * device, and each device's activations for its rows.
 *
 * The rows: with every device busy, the time T they all finish at solves
 * sum over d of (T - fixed_d) / per_row_d = rows; a device whose share
 * would fall under two rows (a CPU sums a product of one row in an order
 * of its own, so a row alone would not come out as in the whole batch)
 * or that cannot hold the model is left out, and T solved again.  Whole
 * rows are then handed out one at a time to the device that finishes
 * them soonest.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/data_split.h"

/* inputs with their batch (the first dimension of `rows`) cut to r rows:
 * the shapes a device running r of them plans for (the data is the
 * caller's; nothing reads it). */
static void cut_inputs(const sn_graph *g, const sn_binding *in, size_t rows,
                       size_t r, sn_binding *out)
{
    for (size_t i = 0; i < g->ninputs; i++) {
        out[i] = in[i];
        if (in[i].rank > 0 && (size_t)in[i].dims[0] == rows) {
            out[i].dims[0] = (int64_t)r;
            out[i].nbytes = in[i].nbytes / rows * r;
        }
    }
}

/* Rows per device (fixed, per_row, the most rows each can hold; use[d]
 * 0: left out) so that the slowest finishes soonest; the estimate. */
static double share_rows(size_t ndev, const double *fixed,
                         const double *per_row, const double *cap,
                         unsigned char *use, size_t rows, size_t *out)
{
    double t = 0;
    for (;;) {
        double inv = 0, sum = 0;
        size_t worst = ndev;
        for (size_t d = 0; d < ndev; d++)
            if (use[d]) {
                inv += 1.0 / per_row[d];
                sum += fixed[d] / per_row[d];
            }
        if (inv <= 0)
            return 1e300;
        t = ((double)rows + sum) / inv;
        /* Leave out the device that would get the fewest rows under two,
         * or whose share it cannot hold (the slowest to start first). */
        for (size_t d = 0; d < ndev; d++) {
            double r = (t - fixed[d]) / per_row[d];
            if (use[d] && (r < 2 || r > cap[d]) &&
                (worst == ndev || fixed[d] > fixed[worst]))
                worst = d;
        }
        size_t left = 0;
        for (size_t d = 0; d < ndev; d++)
            left += use[d];
        if (worst == ndev || left == 1)
            break;
        use[worst] = 0;
    }
    size_t given = 0;
    for (size_t d = 0; d < ndev; d++) {
        double r = use[d] ? (t - fixed[d]) / per_row[d] : 0;
        out[d] = r < 2 ? (use[d] ? 2 : 0) : (size_t)r;
        if (out[d] > rows)
            out[d] = rows;
        given += out[d];
    }
    /* Too many (the two-row floor): take from the slowest finishers. */
    while (given > rows) {
        size_t b = ndev;
        for (size_t d = 0; d < ndev; d++)
            if (out[d] > 2 && (b == ndev || fixed[d] + per_row[d] * (double)out[d] >
                                                fixed[b] + per_row[b] * (double)out[b]))
                b = d;
        if (b == ndev)
            return 1e300;
        out[b]--;
        given--;
    }
    /* The rest, a row at a time, to whoever finishes it soonest. */
    for (; given < rows; given++) {
        size_t b = ndev;
        for (size_t d = 0; d < ndev; d++)
            if (use[d] && (double)out[d] + 1 <= cap[d] &&
                (b == ndev || fixed[d] + per_row[d] * (double)(out[d] + 1) <
                                  fixed[b] + per_row[b] * (double)(out[b] + 1)))
                b = d;
        if (b == ndev)
            return 1e300;
        out[b]++;
    }
    double est = 0;
    for (size_t d = 0; d < ndev; d++) {
        if ((double)out[d] > cap[d])
            return 1e300; /* the rows do not fit */
        if (out[d] && fixed[d] + per_row[d] * (double)out[d] > est)
            est = fixed[d] + per_row[d] * (double)out[d];
    }
    return est;
}

shardnet_status sn_data_estimate(sn_graph *g, sn_device *const *devs,
                                 size_t ndev, const sn_binding *inputs,
                                 const sn_layer_costs *c, sn_data_rows *out,
                                 char *report, size_t cap, size_t *len)
{
    size_t rows = c->rows;
    double fixed[SN_DATA_MAX], per_row[SN_DATA_MAX], hold[SN_DATA_MAX];
    unsigned char use[SN_DATA_MAX];
    sn_binding *in;
    sn_layer_costs c0;
    shardnet_status st;
#define SAY(...)                                                              \
    do {                                                                      \
        if (report && *len < cap)                                             \
            *len += (size_t)snprintf(report + *len, cap - *len, __VA_ARGS__); \
    } while (0)
    memset(out, 0, sizeof *out);
    out->est = 1e300;
    if (ndev < 2 || ndev > SN_DATA_MAX)
        return SHARDNET_OK;
    if (rows < 4 || !c->apart) {
        snprintf(out->why, sizeof out->why, "%s",
                 rows < 4 ? "a batch of fewer than 4 rows (each device "
                            "needs two or more)"
                          : "the model's nodes mix the rows of its batch, "
                            "or it has none");
        SAY("data: not possible: %s\n", out->why);
        return SHARDNET_OK;
    }
    if (!(in = malloc((g->ninputs + 1) * sizeof *in)))
        return sn_error(SHARDNET_OUT_OF_MEMORY, "data split");
    size_t share = rows / ndev < 2 ? 2 : rows / ndev;
    cut_inputs(g, inputs, rows, share, in);
    st = sn_layer_costs_measure(g, devs, ndev, in, &c0, NULL, 0, NULL);
    free(in);
    if (st != SHARDNET_OK)
        return st;
    double weights = c->wpre[c->nlive];
    for (size_t d = 0; d < ndev; d++) {
        double whole = sn_layer_dev_time_shared(c, d, 0, c->nlive),
               part = sn_layer_dev_time_shared(&c0, d, 0, c0.nlive);
        per_row[d] = (whole - part) / (double)(rows - share);
        if (!(per_row[d] > 1e-15))
            per_row[d] = 1e-15;
        fixed[d] = part - per_row[d] * (double)share;
        if (fixed[d] < 0)
            fixed[d] = 0;
        /* Rows it can hold beside every weight. */
        hold[d] = c->arena > 0 ? (c->limit[d] - weights) /
                                     (c->arena / (double)rows)
                               : 1e300;
        use[d] = hold[d] >= 2;
    }
    sn_layer_costs_free(&c0);
    out->est = share_rows(ndev, fixed, per_row, hold, use, rows, out->rows);
    if (out->est >= 1e300) {
        int any = 0;
        for (size_t d = 0; d < ndev; d++)
            any |= hold[d] >= 2;
        snprintf(out->why, sizeof out->why, "%s",
                 any ? "the devices' memory does not hold the batch's "
                       "activations beside every weight"
                     : "no device holds the whole model");
        SAY("data: not possible: %s\n", out->why);
        return SHARDNET_OK;
    }
    /* Rows on several processes: every process gets every output, over
     * the link, in the context's codec.  c's link is already the slower
     * one the codec makes of it (its bytes per float32 byte,
     * sn_codec_wire_ratio, and its conversion, SN_CODEC_S_PER_BYTE:
     * layer_costs.c), so the outputs' bytes over it count the codec once,
     * as the layer split's values do.  (An output that is not float32
     * crosses as it is, but is counted at the codec's rate too.) */
    for (size_t d = 0, first = ndev; d < ndev; d++)
        if (out->rows[d] && first == ndev)
            first = d;
        else if (out->rows[d] && c->proc[d] != c->proc[first]) {
            out->est += c->link_lat + c->out_bytes / c->link_bw;
            break;
        }
    size_t busy = 0;
    for (size_t d = 0; d < ndev; d++) {
        busy += out->rows[d] > 0;
        out->mem[d] = out->rows[d] ? weights + c->arena * (double)out->rows[d] /
                                                   (double)rows
                                   : 0;
        SAY("data on %s: %zu rows, estimated %.3f ms, memory %.2f MB of "
            "%.0f MB%s\n",
            devs[d]->info.name, out->rows[d],
            out->rows[d] ? (fixed[d] + per_row[d] * (double)out->rows[d]) * 1e3
                         : 0.0,
            out->mem[d] / 1e6, c->limit[d] / 1e6,
            out->rows[d]     ? ""
            : hold[d] < 2    ? " (does not hold the model)"
                             : " (left out: slower than the others' share)");
    }
    SAY("data over %zu device%s: estimated %.3f ms (weights held %zu "
        "time%s: %.2f MB in all)\n",
        busy, busy > 1 ? "s" : "", out->est * 1e3, busy, busy > 1 ? "s" : "",
        weights * (double)busy / 1e6);
#undef SAY
    return SHARDNET_OK;
}
