/*
 * The data split's runtime (data_split.h): each device's rows cut out of
 * the inputs in place (a binding into the caller's memory), its plan for
 * that many rows, one thread per local device running them at once (a
 * crew, crew.h), and
 * the outputs put together on the host at each device's rows.  In a job
 * of several processes each device's rows go from its process to every
 * other, their float32 values in the context's codec (--comm,
 * lib/comm/codec.h) as the other splits' values between processes.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/codec.h"
#include "comm/world.h"
#include "core/trace.h"
#include "ops/registry.h"
#include "plan/layer_split.h"
#include "plan/node_costs.h"
#include "runtime/crew.h"
#include "runtime/data_split.h"

#define REPLICA_PLANS 3

typedef struct replica {
    sn_device *dev;
    sn_weights *w;
    sn_plan *plans[REPLICA_PLANS];
    sn_binding *in;     /* its rows of the inputs */
    size_t first, rows; /* of the batch */
} replica;

struct sn_data_split {
    sn_graph *g;
    size_t n;
    replica *r;
    sn_crew *crew;          /* this process's devices, one thread each */
    /* Per batch shape: the outputs' shapes and which carry the batch. */
    sn_binding *shaped;     /* the inputs the shapes were found for */
    int have_shapes;
    unsigned char *carries; /* per graph value */
    sn_host_tensor *out;
    size_t *out_cap;
    size_t batch;
    int apart;              /* its rows may be cut (sn_rows_apart) */
    /* Between processes: the codec the outputs' float32 rows go in, and
     * the messages of one device's rows in it, kept from run to run. */
    sn_codec codec;
    unsigned char *wire;
    size_t wire_cap;
};

static shardnet_status oom(void)
{
    return sn_error(SHARDNET_OUT_OF_MEMORY, "data split");
}

/* Device d's part of a run (split: the data split, as its crew calls
 * it): its plan on its rows, its outputs copied into the whole ones (a
 * whole output that does not carry the batch from the first device with
 * rows). */
static shardnet_status run_replica(void *split, size_t d)
{
    sn_data_split *s = split;
    replica *k = &s->r[d];
    if (!k->rows)
        return SHARDNET_OK;
    sn_graph *g = s->g;
    sn_plan *p = NULL;
    double t0 = sn_trace_on() ? sn_trace_now() : 0;
    shardnet_status st =
        sn_plan_cache_get(k->plans, REPLICA_PLANS, g, k->w, k->in,
                          sn_op_find, &p);
    if (st == SHARDNET_OK)
        st = sn_plan_run(p, k->in);
    for (size_t i = 0; i < g->noutputs && st == SHARDNET_OK; i++) {
        sn_host_tensor *o = &s->out[i];
        const sn_host_tensor *piece = sn_plan_output(p, i);
        int carries = s->carries[g->outputs[i]];
        size_t row = carries && s->batch ? o->nbytes / s->batch : 0;
        if (!carries && k->first)
            continue;
        size_t want = carries ? row * k->rows : o->nbytes;
        if (piece->nbytes != want)
            st = sn_error(SHARDNET_INTERNAL,
                          "data split: output '%s' on %s is %zu bytes, "
                          "not %zu",
                          o->name, k->dev->info.name, piece->nbytes, want);
        else if (want)
            memcpy((char *)o->data + row * k->first, piece->data, want);
    }
    if (sn_trace_on())
        sn_trace_add(k->dev->info.name, "data", "data-split run", t0,
                     sn_trace_now());
    return st;
}

shardnet_status sn_data_split_create(sn_graph *g, sn_device *const *devs,
                                     size_t ndev, sn_data_split **out)
{
    sn_data_split *s = calloc(1, sizeof *s);
    shardnet_status st = SHARDNET_OK;
    *out = NULL;
    if (!s)
        return oom();
    s->g = g;
    s->n = ndev;
    /* The context's codec (every process of the job has the same one:
     * lib/api/context.c refuses a job whose processes disagree). */
    int c = ndev ? sn_config_or_env(devs[0]->config)->comm : SN_CODEC_FP32;
    s->codec = c > SN_CODEC_FP32 && c < SN_CODEC_COUNT ? (sn_codec)c
                                                       : SN_CODEC_FP32;
    s->r = calloc(ndev + 1, sizeof *s->r);
    size_t *local = calloc(ndev + 1, sizeof *local), nlocal = 0;
    s->shaped = calloc(g->ninputs + 1, sizeof *s->shaped);
    s->carries = calloc(g->nvalues + 1, 1);
    s->out = calloc(g->noutputs + 1, sizeof *s->out);
    s->out_cap = calloc(g->noutputs + 1, sizeof *s->out_cap);
    if (!s->r || !local || !s->shaped || !s->carries || !s->out ||
        !s->out_cap) {
        free(local);
        sn_data_split_free(s);
        return oom();
    }
    for (size_t d = 0; d < ndev && st == SHARDNET_OK; d++) {
        replica *k = &s->r[d];
        k->dev = devs[d];
        if (devs[d]->remote)
            continue;
        local[nlocal++] = d;
        if (!(k->in = calloc(g->ninputs + 1, sizeof *k->in)))
            st = oom();
        else
            st = sn_weights_new(g, devs[d], &k->w);
    }
    if (st == SHARDNET_OK)
        st = sn_crew_start(devs, local, nlocal, run_replica, s, &s->crew);
    free(local);
    if (st != SHARDNET_OK) {
        sn_data_split_free(s);
        return sn_error_prefix(st, "data split");
    }
    *out = s;
    return SHARDNET_OK;
}

void sn_data_split_free(sn_data_split *s)
{
    if (!s)
        return;
    sn_crew_stop(s->crew);
    for (size_t d = 0; s->r && d < s->n; d++) {
        replica *k = &s->r[d];
        for (int j = 0; j < REPLICA_PLANS; j++)
            sn_plan_free(k->plans[j]);
        sn_weights_free(k->w);
        free(k->in);
    }
    for (size_t i = 0; s->out && i < s->g->noutputs; i++)
        free(s->out[i].data);
    free(s->r);
    free(s->shaped);
    free(s->carries);
    free(s->out);
    free(s->out_cap);
    free(s->wire);
    free(s);
}

/* The outputs' shapes for inputs shaped like in (a plan of the whole
 * batch on the shapes device: nothing is uploaded), which values carry
 * the batch, and room for the outputs; kept while the shapes stay. */
static shardnet_status shape_outputs(sn_data_split *s, const sn_binding *in)
{
    sn_graph *g = s->g;
    sn_weights *w = NULL;
    sn_plan *p = NULL;
    shardnet_status st;
    if (s->have_shapes && sn_same_shapes(s->shaped, in, g->ninputs))
        return SHARDNET_OK;
    s->have_shapes = 0;
    s->batch = sn_batch_rows(g, in);
    if ((st = sn_shape_plan(g, in, &w, &p)) != SHARDNET_OK) {
        sn_shape_plan_free(w, p);
        return st;
    }
    /* A batch the nodes do not keep apart is not cut: one device runs it
     * whole, every output is its. */
    s->apart = s->batch > 1 && sn_rows_apart(g, p, s->batch, s->carries);
    if (!s->apart)
        memset(s->carries, 0, g->nvalues);
    for (size_t i = 0; i < g->noutputs && st == SHARDNET_OK; i++) {
        const sn_rt *r = sn_plan_value(p, (size_t)g->outputs[i]);
        sn_host_tensor *o = &s->out[i];
        if (!r || !r->known) {
            st = sn_error(SHARDNET_INTERNAL,
                          "data split: output %zu's shape is unknown", i);
            break;
        }
        o->name = g->values[g->outputs[i]].name;
        o->dtype = r->dtype;
        o->rank = r->rank;
        memset(o->dims, 0, sizeof o->dims);
        memcpy(o->dims, r->dims, (size_t)r->rank * sizeof r->dims[0]);
        o->nbytes = sn_rt_elements(r) * sn_dtype_size(r->dtype);
        if (!o->data || s->out_cap[i] < o->nbytes) {
            free(o->data);
            s->out_cap[i] = 0;
            if (!(o->data = malloc(o->nbytes ? o->nbytes : 1)))
                st = oom();
            else
                s->out_cap[i] = o->nbytes;
        }
    }
    sn_shape_plan_free(w, p);
    if (st != SHARDNET_OK)
        return st;
    memcpy(s->shaped, in, g->ninputs * sizeof *in);
    s->have_shapes = 1;
    return SHARDNET_OK;
}

/* Each device's rows of the inputs: an input whose first dimension is the
 * batch, cut in place; the others whole. */
static shardnet_status cut_rows(sn_data_split *s, const sn_binding *in,
                                const size_t *rows)
{
    size_t first = 0, most = 0;
    /* A batch that cannot be cut runs whole on the device given the most
     * rows (a plan file's rows are kept for batches that can). */
    for (size_t d = 0; d < s->n; d++)
        if (rows[d] > rows[most])
            most = d;
    for (size_t d = 0; d < s->n; d++) {
        replica *k = &s->r[d];
        k->first = first;
        k->rows = s->apart ? rows[d] : d == most ? s->batch : 0;
        first += k->rows;
        for (size_t i = 0; k->in && i < s->g->ninputs; i++) {
            k->in[i] = in[i];
            if (s->apart && in[i].rank > 0 &&
                (size_t)in[i].dims[0] == s->batch) {
                size_t row = in[i].nbytes / s->batch;
                k->in[i].dims[0] = (int64_t)k->rows;
                k->in[i].data = (const char *)in[i].data + row * k->first;
                k->in[i].nbytes = row * k->rows;
            }
        }
    }
    if (first != s->batch)
        return sn_error(SHARDNET_INTERNAL,
                        "data split: %zu rows given for a batch of %zu",
                        first, s->batch);
    return SHARDNET_OK;
}

/* Where device k's part of output i lies in it (*at, *bytes): its rows,
 * or the whole output from the lead device (the first with rows) where
 * the output does not carry the batch; 0 where k sends none of it. */
static int output_part(const sn_data_split *s, const replica *k, size_t i,
                       int lead, size_t *at, size_t *bytes)
{
    const sn_host_tensor *o = &s->out[i];
    int carries = s->carries[s->g->outputs[i]];
    size_t row = carries && s->batch ? o->nbytes / s->batch : 0;
    if (!k->rows || (!carries && !lead))
        return 0;
    *at = carries ? row * k->first : 0;
    *bytes = carries ? row * k->rows : o->nbytes;
    return 1;
}

/* Does this part go in the codec (sn_transport_bcast_floats encodes
 * float32 values, as many as one message takes, in any codec but fp32)?
 * Those need room for their message. */
static int coded(const sn_data_split *s, size_t i, size_t bytes)
{
    size_t n = bytes / sizeof(float);
    return s->codec != SN_CODEC_FP32 && s->out[i].dtype == SN_DT_FLOAT &&
           n && n <= SN_CODEC_MAX_N;
}

/* The bytes the largest of device k's coded parts may encode to. */
static size_t coded_bound(const sn_data_split *s, const replica *k, int lead)
{
    size_t bound = 0, at, bytes;
    for (size_t i = 0; i < s->g->noutputs; i++)
        if (output_part(s, k, i, lead, &at, &bytes) && coded(s, i, bytes) &&
            sn_codec_bound(bytes / sizeof(float)) > bound)
            bound = sn_codec_bound(bytes / sizeof(float));
    return bound;
}

/* Device k's parts of the outputs from its process to every other: the
 * coded ones in the codec (sn_transport_bcast_floats: every process
 * decodes them, the owner too, so that all hold the same bits), the
 * others as they are.  forms: the forms the owner's messages took, a bit
 * each. */
static shardnet_status share_device(sn_data_split *s, const replica *k,
                                    int lead, unsigned *forms)
{
    sn_transport *net = sn_world_transport();
    unsigned owner = k->dev->process;
    size_t at, bytes;
    shardnet_status st = SHARDNET_OK;
    for (size_t i = 0; i < s->g->noutputs && st == SHARDNET_OK; i++) {
        if (!output_part(s, k, i, lead, &at, &bytes))
            continue;
        char *x = (char *)s->out[i].data + at;
        int form = -1;
        st = s->out[i].dtype == SN_DT_FLOAT
                 ? sn_transport_bcast_floats(net, owner, s->codec,
                                             (float *)x, bytes / sizeof(float),
                                             &s->wire, &s->wire_cap, &form)
                 : sn_transport_bcast(net, owner, x, bytes);
        if (form >= 0)
            *forms |= 1u << form;
    }
    return st;
}

/* In a job: every process learns whether each went well (and whether it
 * has room for the messages of the codec), then gets each device's rows
 * of the outputs (and the uncut outputs) from its owner. */
static shardnet_status share_outputs(sn_data_split *s, shardnet_status mine)
{
    shardnet_status st = SHARDNET_OK;
    unsigned np = sn_world_processes();
    size_t lead = s->n;
    for (size_t d = 0; d < s->n && lead == s->n; d++)
        if (s->r[d].rows)
            lead = d;
    /* Room for the largest message, found before the statuses
     * are shared: a process short of it fails with the others told. */
    for (size_t d = 0; d < s->n && mine == SHARDNET_OK; d++) {
        size_t bound = coded_bound(s, &s->r[d], d == lead);
        if (bound > s->wire_cap) {
            unsigned char *w = realloc(s->wire, bound);
            if (!w)
                mine = oom();
            else
                s->wire = w, s->wire_cap = bound;
        }
    }
    for (unsigned p = 0; p < np && st == SHARDNET_OK; p++)
        st = sn_world_share_status(p, mine, "data split run");
    if (st != SHARDNET_OK)
        return st;
    double t0 = sn_trace_on() ? sn_trace_now() : 0;
    unsigned long long sent = sn_transport_bytes_sent();
    unsigned forms = 0;
    for (size_t d = 0; d < s->n && st == SHARDNET_OK; d++)
        st = share_device(s, &s->r[d], d == lead, &forms);
    /* What this process sent of the outputs, in which codec and forms
     * (the bytes the codec saves are seen here, not in the answer). */
    const replica *here = NULL;
    for (size_t d = 0; d < s->n && !here; d++)
        if (!s->r[d].dev->remote)
            here = &s->r[d];
    if (sn_trace_on() && here) {
        static const char *const form_names[] = {"", "dense", "bitmap",
                                                  "index", "raw"};
        char name[96], list[40] = "";
        size_t len = 0;
        for (int f = SN_CODEC_DENSE; f <= SN_CODEC_RAW; f++)
            if (forms & (1u << f))
                len += (size_t)snprintf(list + len, sizeof list - len,
                                        "%s%s", len ? " " : "",
                                        form_names[f]);
        snprintf(name, sizeof name, "outputs to the other processes, %s%s%s%s: "
                 "%llu bytes",
                 sn_codec_name(s->codec), len ? " (" : "", list,
                 len ? ")" : "", sn_transport_bytes_sent() - sent);
        sn_trace_add(here->dev->info.name, "data", name, t0, sn_trace_now());
    }
    return st;
}

shardnet_status sn_data_split_run(sn_data_split *s, const sn_binding *in,
                                  const size_t *rows)
{
    shardnet_status st;
    int job = sn_world_processes() > 1;
    if ((st = shape_outputs(s, in)) != SHARDNET_OK ||
        (st = cut_rows(s, in, rows)) != SHARDNET_OK)
        return job ? share_outputs(s, st) : st;
    st = sn_crew_run(s->crew);
    return job ? share_outputs(s, st) : st;
}

const sn_host_tensor *sn_data_split_output(const sn_data_split *s, size_t i)
{
    return i < s->g->noutputs && s->have_shapes ? &s->out[i] : NULL;
}
