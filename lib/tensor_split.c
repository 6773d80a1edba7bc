/*
 * Tensor split of a perceptron (private): a chain of Gemm layers (after the
 * passes: bias and Relu fused) sharded across devices in Megatron pairs.
 *
 *   layer 2i   column-parallel: device d computes the output features
 *              cols_d of act(X W + b) from the whole X;
 *   layer 2i+1 row-parallel: device d multiplies its own slice H_d by the
 *              rows cols_d of W, giving a partial sum of the whole output;
 *              an all-reduce (lib/collective.c) adds the partials on every
 *              device, then each adds the bias and applies the activation.
 *   a last, unpaired layer runs whole on the first device.
 *
 * Feature slices are proportional to each device's measured GEMM speed,
 * in multiples of 16 (the last device takes the rest), so they need not
 * divide evenly.  All devices compute at once: each has its own queue.
 * Sums change order against one device, so results agree to rounding
 * (tested within 1e-4 relative), not bit for bit.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "collective.h"
#include "tensor_split.h"

#define MAX_DEV 16
#define MAX_LAYERS 64

typedef struct layer {
    size_t in, out; /* features */
    sn_act act;
    int paired;     /* 1: column-parallel, 2: row-parallel, 0: whole */
    /* per device: weights (row-major in x out slice for this device) and
     * bias slice; for a row-parallel layer the bias is whole, added after
     * the all-reduce. */
    sn_buffer *w[MAX_DEV], *b[MAX_DEV];
    size_t c0[MAX_DEV], c1[MAX_DEV]; /* feature slice of the pair */
} layer;

struct sn_tensor_split {
    sn_graph *g;
    size_t ndev, nlayers;
    sn_device *dev[MAX_DEV];
    layer L[MAX_LAYERS];
    sn_comm *comm;
    /* activations for the current batch */
    size_t batch;
    sn_buffer *inb[MAX_DEV];    /* the input, per device (lent on CPUs) */
    sn_buffer *act[MAX_DEV][2]; /* layer outputs, ping-pong per device */
    size_t act_elems;
    sn_host_tensor out;
};

/* The perceptron's layers: live nodes that are all Gemm with constant 2-D
 * B, a 1-D (or absent) C, alpha = beta = 1, no transA, each reading the
 * previous one's output. */
static shardnet_status find_layers(sn_tensor_split *t)
{
    sn_graph *g = t->g;
    int prev = -1;
    for (size_t i = 0; i < g->nnodes; i++) {
        const sn_node *n = &g->nodes[i];
        if (n->dead)
            continue;
        if (strcmp(n->op_type, "Gemm") || n->ninputs < 2 ||
            t->nlayers == MAX_LAYERS)
            return sn_error(SHARDNET_UNSUPPORTED,
                            "tensor split: this version splits chains of "
                            "Gemm layers (perceptrons); node '%s' is %s",
                            n->name, n->op_type);
        const sn_value *w = &g->values[n->inputs[1]];
        const sn_value *c = n->ninputs > 2 && n->inputs[2] >= 0
                                ? &g->values[n->inputs[2]]
                                : NULL;
        int tb = (int)sn_attr_int(n, "transB", 0);
        if (!(w->flags & SN_VALUE_CONST) || w->rank != 2 ||
            w->dtype != SN_DT_FLOAT || sn_attr_int(n, "transA", 0) ||
            sn_attr_float(n, "alpha", 1.0f) != 1.0f ||
            (c && (!(c->flags & SN_VALUE_CONST) || c->dtype != SN_DT_FLOAT ||
                   sn_value_elements(c) != (tb ? w->dims[0] : w->dims[1]) ||
                   sn_attr_float(n, "beta", 1.0f) != 1.0f)) ||
            (prev >= 0 && n->inputs[0] != prev))
            return sn_error(SHARDNET_UNSUPPORTED,
                            "tensor split: Gemm '%s' is not a plain layer "
                            "(constant weights, bias vector, alpha = beta = "
                            "1, no transA) of the chain",
                            n->name);
        layer *l = &t->L[t->nlayers++];
        l->in = (size_t)(tb ? w->dims[1] : w->dims[0]);
        l->out = (size_t)(tb ? w->dims[0] : w->dims[1]);
        l->act = strcmp(sn_attr_string(n, "activation", ""), "Relu")
                     ? SN_ACT_NONE
                     : SN_ACT_RELU;
        prev = n->outputs[0];
    }
    if (!t->nlayers || g->noutputs != 1 || g->outputs[0] != prev ||
        g->ninputs != 1)
        return sn_error(SHARDNET_UNSUPPORTED,
                        "tensor split: expected one input, a chain of Gemm "
                        "layers and one output");
    return SHARDNET_OK;
}

/* Element (k, j) of a layer's weight as (in x out), whatever transB. */
static float weight_at(const sn_value *w, int tb, size_t k, size_t j)
{
    size_t cols = (size_t)w->dims[1], idx = tb ? j * cols + k : k * cols + j;
    float v;
    memcpy(&v, (const char *)w->data + idx * sizeof v, sizeof v);
    return v;
}

static shardnet_status upload(sn_device *dev, const float *x, size_t n,
                              sn_buffer **out)
{
    shardnet_status st = sn_buffer_alloc(dev, (n ? n : 1) * sizeof *x, out);
    if (st == SHARDNET_OK && n)
        st = sn_buffer_write(*out, 0, x, n * sizeof *x);
    return st;
}

/* Upload rows [r0, r1) x cols [c0, c1) of the (in x out) weight. */
static shardnet_status upload_block(sn_device *dev, const sn_value *w, int tb,
                                    size_t r0, size_t r1, size_t c0,
                                    size_t c1, sn_buffer **out)
{
    size_t rows = r1 - r0, cols = c1 - c0;
    float *blk = malloc((rows * cols > 0 ? rows * cols : 1) * sizeof *blk);
    shardnet_status st;
    if (!blk)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "tensor split weights");
    for (size_t k = 0; k < rows; k++)
        for (size_t j = 0; j < cols; j++)
            blk[k * cols + j] = weight_at(w, tb, r0 + k, c0 + j);
    st = upload(dev, blk, rows * cols, out);
    free(blk);
    return st;
}

static shardnet_status upload_bias(sn_device *dev, const sn_value *c,
                                   size_t c0, size_t c1, sn_buffer **out)
{
    float *b = calloc(c1 - c0 + 1, sizeof *b);
    shardnet_status st;
    if (!b)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "tensor split bias");
    if (c)
        memcpy(b, (const char *)c->data + c0 * sizeof *b,
               (c1 - c0) * sizeof *b);
    st = upload(dev, b, c1 - c0, out);
    free(b);
    return st;
}

shardnet_status sn_tensor_split_create(sn_graph *g, sn_device *const *devs,
                                       size_t ndev, const double *speed,
                                       sn_tensor_split **out)
{
    sn_tensor_split *t = calloc(1, sizeof *t);
    shardnet_status st;
    *out = NULL;
    if (!t)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "tensor split");
    if (ndev < 2 || ndev > MAX_DEV) {
        free(t);
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "tensor split: 2 to %d devices", MAX_DEV);
    }
    t->g = g;
    t->ndev = ndev;
    memcpy(t->dev, devs, ndev * sizeof *devs);
    if ((st = find_layers(t)) != SHARDNET_OK)
        goto fail;
    double total = 0;
    for (size_t d = 0; d < ndev; d++)
        total += speed[d];
    size_t li = 0;
    for (size_t i = 0; i < g->nnodes; i++) {
        const sn_node *n = &g->nodes[i];
        if (n->dead)
            continue;
        layer *l = &t->L[li];
        const sn_value *w = &g->values[n->inputs[1]];
        const sn_value *c = n->ninputs > 2 && n->inputs[2] >= 0
                                ? &g->values[n->inputs[2]]
                                : NULL;
        int tb = (int)sn_attr_int(n, "transB", 0);
        int pair_first = li + 1 < t->nlayers && (li % 2 == 0);
        l->paired = pair_first ? 1 : (li % 2 == 1 ? 2 : 0);
        if (l->paired == 1) {
            /* Slice the features in proportion to speed, 16 at a time. */
            size_t at = 0;
            for (size_t d = 0; d < ndev; d++) {
                /* Nearest multiple of 16: speeds measured a few per cent
                 * apart on twin sockets must not skew the split. */
                size_t share = (size_t)((double)l->out * speed[d] / total / 16.0 +
                                        0.5) * 16;
                if (d == ndev - 1 || at + share > l->out)
                    share = l->out - at;
                l->c0[d] = at;
                l->c1[d] = at + share;
                at += share;
            }
            for (size_t d = 0; d < ndev; d++)
                if ((st = upload_block(devs[d], w, tb, 0, l->in, l->c0[d],
                                       l->c1[d], &l->w[d])) ||
                    (st = upload_bias(devs[d], c, l->c0[d], l->c1[d],
                                      &l->b[d])))
                    goto fail;
        } else if (l->paired == 2) {
            layer *a = &t->L[li - 1];
            for (size_t d = 0; d < ndev; d++) {
                l->c0[d] = a->c0[d];
                l->c1[d] = a->c1[d];
                if ((st = upload_block(devs[d], w, tb, l->c0[d], l->c1[d], 0,
                                       l->out, &l->w[d])) ||
                    (st = upload_bias(devs[d], c, 0, l->out, &l->b[d])))
                    goto fail;
            }
        } else {
            if ((st = upload_block(devs[0], w, tb, 0, l->in, 0, l->out,
                                   &l->w[0])) ||
                (st = upload_bias(devs[0], c, 0, l->out, &l->b[0])))
                goto fail;
        }
        li++;
    }
    if ((st = sn_comm_create(devs, ndev, NULL, &t->comm)) != SHARDNET_OK)
        goto fail;
    *out = t;
    return SHARDNET_OK;
fail:
    sn_tensor_split_free(t);
    return st;
}

static void free_acts(sn_tensor_split *t)
{
    for (size_t d = 0; d < t->ndev; d++) {
        sn_buffer_free(t->inb[d]);
        t->inb[d] = NULL;
    }
    for (size_t d = 0; d < t->ndev; d++)
        for (int k = 0; k < 2; k++) {
            sn_buffer_free(t->act[d][k]);
            t->act[d][k] = NULL;
        }
}

void sn_tensor_split_free(sn_tensor_split *t)
{
    if (!t)
        return;
    for (size_t d = 0; d < t->ndev; d++)
        sn_synchronize(t->dev[d]);
    sn_comm_free(t->comm);
    free_acts(t);
    for (size_t i = 0; i < t->nlayers; i++)
        for (size_t d = 0; d < t->ndev; d++) {
            sn_buffer_free(t->L[i].w[d]);
            sn_buffer_free(t->L[i].b[d]);
        }
    free(t->out.data);
    free(t);
}

/* C (batch x n) = act(A (batch x k) W (k x n) + bias) on one device. */
static shardnet_status gemm(sn_device *dev, size_t batch, size_t k, size_t n,
                            sn_view a, sn_buffer *w, sn_buffer *bias,
                            sn_act act, sn_view c)
{
    sn_gemm_desc d = {.m = batch, .n = n, .k = k, .alpha = 1.0f,
                      .lda = k, .ldb = n, .ldc = n, .batch = 1, .a = a,
                      .b = {w, 0}, .c = c, .act = act, .b_const = 1};
    if (bias)
        d.bias = (sn_view){bias, 0};
    if (!n || !k)
        return SHARDNET_OK;
    return sn_gemm(dev, &d);
}

static shardnet_status run_layers(sn_tensor_split *t, size_t batch);

shardnet_status sn_tensor_split_run(sn_tensor_split *t, const sn_binding *in)
{
    shardnet_status st;
    size_t batch, width = 0;
    if (in->dtype != SN_DT_FLOAT || in->rank != 2 ||
        (size_t)in->dims[1] != t->L[0].in)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "tensor split: the input must be float (batch, %zu)",
                        t->L[0].in);
    batch = (size_t)in->dims[0];
    for (size_t i = 0; i < t->nlayers; i++) {
        if (t->L[i].in > width)
            width = t->L[i].in;
        if (t->L[i].out > width)
            width = t->L[i].out;
    }
    if (batch != t->batch || !t->act[0][0]) {
        free_acts(t);
        t->act_elems = batch * width;
        for (size_t d = 0; d < t->ndev; d++) {
            if ((st = sn_buffer_alloc(t->dev[d], in->nbytes ? in->nbytes : 4,
                                      &t->inb[d])) != SHARDNET_OK)
                return st;
            for (int k = 0; k < 2; k++)
                if ((st = sn_buffer_alloc(t->dev[d],
                                          (t->act_elems ? t->act_elems : 1) *
                                              sizeof(float),
                                          &t->act[d][k])) != SHARDNET_OK)
                    return st;
        }
        t->batch = batch;
    }
    /* The input on every device: lent where the device's buffers are host
     * memory (no copy), else written. */
    for (size_t d = 0; d < t->ndev; d++) {
        const sn_backend_ops *ops = t->dev[d]->ops;
        if (!in->nbytes)
            continue;
        if (ops->buffer_lend && in->nbytes == t->inb[d]->size)
            st = ops->buffer_lend(t->inb[d], (void *)in->data);
        else
            st = sn_buffer_write(t->inb[d], 0, in->data, in->nbytes);
        if (st)
            return st;
    }
    st = run_layers(t, batch);
    for (size_t d = 0; d < t->ndev; d++)
        if (t->dev[d]->ops->buffer_lend)
            t->dev[d]->ops->buffer_lend(t->inb[d], NULL);
    return st;
}

/* The layers, the input being in act[d][0]. */
static shardnet_status run_layers(sn_tensor_split *t, size_t batch)
{
    shardnet_status st;
    int cur = 1; /* act[d][cur] holds the layer input (from layer 1 on) */
    for (size_t i = 0; i < t->nlayers; i++) {
        layer *l = &t->L[i];
#define IN_VIEW(d) (i == 0 ? (sn_view){t->inb[d], 0} : (sn_view){t->act[d][cur], 0})
        if (l->paired == 1) {
            for (size_t d = 0; d < t->ndev; d++)
                if ((st = gemm(t->dev[d], batch, l->in, l->c1[d] - l->c0[d],
                               IN_VIEW(d), l->w[d], l->b[d],
                               l->act, (sn_view){t->act[d][!cur], 0})))
                    return st;
        } else if (l->paired == 2) {
            sn_view part[MAX_DEV];
            for (size_t d = 0; d < t->ndev; d++) {
                part[d] = (sn_view){t->act[d][!cur], 0};
                if (l->c1[d] == l->c0[d]) { /* no slice: contributes zeros */
                    float *z = calloc(batch * l->out + 1, sizeof *z);
                    if (!z)
                        return sn_error(SHARDNET_OUT_OF_MEMORY, "zeros");
                    st = sn_buffer_write(part[d].buf, 0, z,
                                         batch * l->out * sizeof *z);
                    free(z);
                    if (st)
                        return st;
                    continue;
                }
                if ((st = gemm(t->dev[d], batch, l->c1[d] - l->c0[d], l->out,
                               IN_VIEW(d), l->w[d], NULL,
                               SN_ACT_NONE, part[d])))
                    return st;
            }
            if ((st = sn_allreduce(t->comm, part, batch * l->out)))
                return st;
            /* bias and activation after the sum, on every device */
            for (size_t d = 0; d < t->ndev; d++) {
                sn_binary_desc b = {.op = SN_BINARY_ADD};
                size_t sa[2] = {batch, l->out}, sb[1] = {l->out};
                if ((st = sn_binary_broadcast(&b, 2, sa, 1, sb)))
                    return st;
                b.a = part[d];
                b.b = (sn_view){l->b[d], 0};
                b.c = part[d];
                if ((st = sn_binary(t->dev[d], &b)))
                    return st;
                if (l->act == SN_ACT_RELU) {
                    sn_unary_desc u = {.op = SN_UNARY_RELU,
                                       .n = batch * l->out, .x = part[d],
                                       .y = part[d]};
                    if ((st = sn_unary(t->dev[d], &u)))
                        return st;
                }
            }
        } else {
            if ((st = gemm(t->dev[0], batch, l->in, l->out, IN_VIEW(0),
                           l->w[0], l->b[0],
                           l->act, (sn_view){t->act[0][!cur], 0})))
                return st;
        }
        cur = !cur;
#undef IN_VIEW
    }
    /* The result: whole on device 0 (after a pair, on every device). */
    size_t n = batch * t->L[t->nlayers - 1].out;
    float *o = realloc(t->out.data, (n ? n : 1) * sizeof *o);
    if (!o)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "tensor split output");
    t->out.data = o;
    if (n && (st = sn_buffer_read(t->act[0][cur], 0, o, n * sizeof *o)))
        return st;
    for (size_t d = 0; d < t->ndev; d++)
        if ((st = sn_synchronize(t->dev[d])))
            return st;
    t->out.name = t->g->values[t->g->outputs[0]].name;
    t->out.dtype = SN_DT_FLOAT;
    t->out.rank = 2;
    t->out.dims[0] = (int64_t)batch;
    t->out.dims[1] = (int64_t)t->L[t->nlayers - 1].out;
    t->out.nbytes = n * sizeof *o;
    return SHARDNET_OK;
}

const sn_host_tensor *sn_tensor_split_output(const sn_tensor_split *t)
{
    return &t->out;
}
