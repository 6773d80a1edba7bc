/*
 * shardnet_model_quantize (issue 16): a model's float weights rewritten
 * small, as a standard ONNX file that shardnet and ONNX Runtime both run.
 *
 * The model's bytes are copied as they are, field by field (unknown ones
 * too), except the weights it quantizes: a float matrix of at least
 * min_elements, stored in the file (not as external data), read only as
 * the weight (input 1) of MatMul or Gemm nodes and not a graph input,
 * becomes
 *   int8  its integers (int8, -127..127, round half to even) and a scale
 *         (max |w| / 127, per tensor or per output column), with a
 *         DequantizeLinear before its products, under the weight's name;
 *   fp16  its halves, with a Cast to float;
 *   int4  where MatMul nodes alone read it: MatMulNBits (com.microsoft)
 *         nodes in their place, uint4 in blocks of `block` along K with a
 *         scale each (max |w| / 7) and the default zero point 8; a
 *         weight of Gemm nodes gets int8 as above.
 * The new nodes come first in the graph (they read only initializers), the
 * com.microsoft opset is imported where MatMulNBits is used.
 */
#include <config.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "shardnet.h"
#include "exec/exec.h"
#include "import/onnx.h"
#include "import/onnx_read.h"
#include "import/pbwire.h"
#include "import/pbwrite.h"

/* A name in the file: bytes, not NUL-terminated. */
typedef struct span {
    const uint8_t *p;
    size_t n;
} span;

static int span_is(span s, const char *c)
{
    return s.n == strlen(c) && !memcmp(s.p, c, s.n);
}

static int span_eq(span a, span b)
{
    return a.n == b.n && !memcmp(a.p, b.p, a.n);
}

typedef struct qnode {
    span msg, op, domain, name, out;
    span *in; /* its inputs (malloc'ed) */
    size_t nin;
    int trans_b;     /* Gemm's transB */
    int weight;      /* the weight (index into inits) it reads, or -1 */
    int nbits;       /* replaced by MatMulNBits */
} qnode;

typedef struct qinit {
    span msg, name;
    sn_pb_tensor t;
    int mode;     /* 0: kept; 'q': int8; 'h': fp16; '4': int4 */
    int axis;     /* int8 per column: the axis of N, or -1 per tensor */
} qinit;

typedef struct qgraph {
    qnode *nodes;
    size_t nnodes;
    qinit *inits;
    size_t ninits;
    span inputs[4096];
    size_t ninputs;
} qgraph;


/* A node's op, domain, name, inputs, first output and Gemm's transB. */
static shardnet_status read_node(const uint8_t *p, size_t len, qnode *n)
{
    sn_pb r;
    sn_pb_field f;
    size_t cap = 0;
    int k;
    memset(n, 0, sizeof *n);
    n->msg = (span){p, len};
    n->weight = -1;
    sn_pb_init(&r, p, len);
    while ((k = sn_pb_next(&r, &f)) > 0) {
        if (f.wire != SN_PB_LEN)
            continue;
        span s = {f.data, f.len};
        if (f.num == 1) {
            if (n->nin == cap) {
                cap = cap * 2 + 4;
                span *in = realloc(n->in, cap * sizeof *in);
                if (!in)
                    return sn_error(SHARDNET_OUT_OF_MEMORY, "quantize");
                n->in = in;
            }
            n->in[n->nin++] = s;
        } else if (f.num == 2 && !n->out.p)
            n->out = s;
        else if (f.num == 3)
            n->name = s;
        else if (f.num == 4)
            n->op = s;
        else if (f.num == 7)
            n->domain = s;
        else if (f.num == 5) { /* AttributeProto: name 1, i 3 */
            sn_pb a;
            sn_pb_field af;
            span an = {0};
            uint64_t iv = 0;
            sn_pb_init(&a, f.data, f.len);
            while (sn_pb_next(&a, &af) > 0) {
                if (af.num == 1 && af.wire == SN_PB_LEN)
                    an = (span){af.data, af.len};
                else if (af.num == 3 && af.wire == SN_PB_VARINT)
                    iv = af.u;
            }
            if (span_is(an, "transB"))
                n->trans_b = iv != 0;
        }
    }
    return k < 0 ? SHARDNET_INVALID_ARGUMENT : SHARDNET_OK;
}

static int default_domain(span d)
{
    return d.n == 0 || span_is(d, "ai.onnx");
}

/* The graph's nodes, initializers and inputs. */
static shardnet_status read_graph(const uint8_t *p, size_t len, qgraph *g)
{
    sn_pb r;
    sn_pb_field f;
    size_t capn = 0, capi = 0;
    int k;
    sn_pb_init(&r, p, len);
    while ((k = sn_pb_next(&r, &f)) > 0) {
        if (f.wire != SN_PB_LEN)
            continue;
        if (f.num == 1) {
            if (g->nnodes == capn) {
                capn = capn * 2 + 64;
                qnode *nn = realloc(g->nodes, capn * sizeof *nn);
                if (!nn)
                    return sn_error(SHARDNET_OUT_OF_MEMORY, "quantize");
                g->nodes = nn;
            }
            shardnet_status st =
                read_node(f.data, f.len, &g->nodes[g->nnodes]);
            g->nnodes++; /* its inputs are freed with the others */
            if (st != SHARDNET_OK)
                return st;
        } else if (f.num == 5) {
            if (g->ninits == capi) {
                capi = capi * 2 + 64;
                qinit *ni = realloc(g->inits, capi * sizeof *ni);
                if (!ni)
                    return sn_error(SHARDNET_OUT_OF_MEMORY, "quantize");
                g->inits = ni;
            }
            qinit *q = &g->inits[g->ninits];
            memset(q, 0, sizeof *q);
            q->msg = (span){f.data, f.len};
            shardnet_status st = sn_pb_tensor_parse(f.data, f.len, &q->t);
            if (st != SHARDNET_OK)
                return sn_error_prefix(st, "quantize: an initializer");
            q->name = (span){q->t.name, q->t.name_len};
            g->ninits++;
        } else if (f.num == 11 && g->ninputs < 4096) {
            const uint8_t *np;
            size_t nl;
            if (sn_pb_peek_len(f.data, f.len, 1, &np, &nl))
                g->inputs[g->ninputs++] = (span){np, nl};
        }
    }
    return k < 0 ? sn_error_prefix(SHARDNET_INVALID_ARGUMENT, "quantize")
                 : SHARDNET_OK;
}

/*
 * Which weights to rewrite, and how: a float matrix read only as the
 * weight of MatMul and Gemm nodes (each such node's `weight` set).
 */
static void choose(qgraph *g, const shardnet_quantize_options *o, int int4,
                   int fp16)
{
    for (size_t i = 0; i < g->ninits; i++) {
        qinit *w = &g->inits[i];
        int ok = w->t.dtype == SN_DT_FLOAT && w->t.rank == 2 &&
                 !w->t.external && w->t.count >= o->min_elements &&
                 w->name.n > 0;
        int matmul_only = 1, n_axis = -2, used = 0;
        for (size_t j = 0; ok && j < g->ninputs; j++)
            ok = !span_eq(g->inputs[j], w->name); /* may be fed instead */
        for (size_t j = 0; ok && j < g->nnodes; j++) {
            qnode *n = &g->nodes[j];
            for (size_t a = 0; ok && a < n->nin; a++) {
                if (!span_eq(n->in[a], w->name))
                    continue;
                int mm = span_is(n->op, "MatMul"), gemm = span_is(n->op, "Gemm");
                ok = a == 1 && (mm || gemm) && default_domain(n->domain);
                int axis = gemm && n->trans_b ? 0 : 1;
                n_axis = n_axis == -2 || n_axis == axis ? axis : -1;
                matmul_only &= mm && n->nin == 2;
                used = 1;
            }
        }
        if (!ok || !used)
            continue;
        w->mode = fp16 ? 'h' : int4 && matmul_only ? '4' : 'q';
        w->axis = o->per_channel ? n_axis : -1;
        for (size_t j = 0; j < g->nnodes; j++)
            for (size_t a = 0; a < g->nodes[j].nin; a++)
                if (span_eq(g->nodes[j].in[a], w->name)) {
                    g->nodes[j].weight = (int)i;
                    g->nodes[j].nbits = w->mode == '4';
                }
    }
}

/* The weight's floats (malloc'ed), from raw_data or float_data. */
static float *weight_floats(const qinit *w)
{
    float *f = malloc(w->t.nbytes ? w->t.nbytes : 1);
    if (!f)
        return NULL;
    if (w->t.has_raw)
        memcpy(f, w->t.raw, w->t.nbytes);
    else
        sn_pb_tensor_decode_typed(&w->t, f);
    return f;
}

/* A TensorProto of the given name (base and suffix), type, dims, bytes. */
static void put_tensor(sn_pbw *g, const char *base, const char *suffix,
                       int dtype, const int64_t *dims, int rank,
                       const void *data, size_t bytes)
{
    sn_pbw t = {0};
    char name[4200];
    snprintf(name, sizeof name, "%s%s", base, suffix);
    for (int i = 0; i < rank; i++)
        sn_pbw_int(&t, 1, dims[i]);
    sn_pbw_int(&t, 2, dtype);
    sn_pbw_str(&t, 8, name);
    sn_pbw_bytes(&t, 9, data, bytes);
    sn_pbw_msg(g, 5, &t);
}

static void put_attr_int(sn_pbw *n, const char *name, int64_t v)
{
    sn_pbw a = {0};
    sn_pbw_str(&a, 1, name);
    sn_pbw_int(&a, 3, v);
    sn_pbw_int(&a, 20, 2); /* INT */
    sn_pbw_msg(n, 5, &a);
}

static float round_clamp(float v, float lo, float hi)
{
    v = nearbyintf(v); /* half to even, in the default rounding mode */
    return v < lo ? lo : v > hi ? hi : v;
}

/*
 * w's replacement initializers into g, and, for int8 and fp16, the node
 * that makes the float weight again into nodes.  *after: its bytes.
 */
static shardnet_status rewrite_weight(const qinit *w, const shardnet_quantize_options *o,
                                      sn_pbw *g, sn_pbw *nodes, size_t *after)
{
    char name[4096];
    snprintf(name, sizeof name, "%.*s", (int)w->name.n, (const char *)w->name.p);
    float *f = weight_floats(w);
    size_t rows = (size_t)w->t.dims[0], cols = (size_t)w->t.dims[1];
    size_t count = rows * cols;
    if (!f)
        return sn_error(SHARDNET_OUT_OF_MEMORY, "quantize: '%s'", name);
    sn_pbw n = {0};
    if (w->mode == 'h') {
        uint16_t *h = malloc(count * 2 + 1);
        if (!h) {
            free(f);
            return sn_error(SHARDNET_OUT_OF_MEMORY, "quantize: '%s'", name);
        }
        for (size_t i = 0; i < count; i++)
            h[i] = sn_float_to_half(f[i]);
        put_tensor(g, name, "_fp16", SN_DT_FLOAT16, w->t.dims, 2, h,
                   count * 2);
        *after = count * 2;
        free(h);
        char in[4200];
        snprintf(in, sizeof in, "%s_fp16", name);
        sn_pbw_str(&n, 1, in);
        sn_pbw_str(&n, 2, name);
        snprintf(in, sizeof in, "%s_cast", name);
        sn_pbw_str(&n, 3, in);
        sn_pbw_str(&n, 4, "Cast");
        put_attr_int(&n, "to", SN_DT_FLOAT);
        sn_pbw_msg(nodes, 1, &n);
    } else if (w->mode == 'q') {
        /* One scale per tensor, or per column along axis (0: rows). */
        size_t ns = w->axis < 0 ? 1 : w->axis == 0 ? rows : cols;
        float *s = calloc(ns, sizeof *s);
        int8_t *q = malloc(count + 1);
        if (!s || !q) {
            free(s);
            free(q);
            free(f);
            return sn_error(SHARDNET_OUT_OF_MEMORY, "quantize: '%s'", name);
        }
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols; c++) {
                size_t k = w->axis < 0 ? 0 : w->axis == 0 ? r : c;
                float a = fabsf(f[r * cols + c]);
                s[k] = a > s[k] ? a : s[k];
            }
        for (size_t k = 0; k < ns; k++)
            s[k] = s[k] > 0.0f && isfinite(s[k]) ? s[k] / 127.0f : 1.0f;
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols; c++) {
                size_t k = w->axis < 0 ? 0 : w->axis == 0 ? r : c;
                q[r * cols + c] = (int8_t)round_clamp(f[r * cols + c] / s[k],
                                                      -127.0f, 127.0f);
            }
        int64_t sd = (int64_t)ns;
        put_tensor(g, name, "_quantized", SN_DT_INT8, w->t.dims, 2, q, count);
        put_tensor(g, name, "_scale", SN_DT_FLOAT, &sd, w->axis < 0 ? 0 : 1,
                   s, ns * sizeof *s);
        *after = count + ns * sizeof *s;
        free(s);
        free(q);
        char in[4200];
        snprintf(in, sizeof in, "%s_quantized", name);
        sn_pbw_str(&n, 1, in);
        snprintf(in, sizeof in, "%s_scale", name);
        sn_pbw_str(&n, 1, in);
        sn_pbw_str(&n, 2, name);
        snprintf(in, sizeof in, "%s_dequantize", name);
        sn_pbw_str(&n, 3, in);
        sn_pbw_str(&n, 4, "DequantizeLinear");
        if (w->axis >= 0)
            put_attr_int(&n, "axis", w->axis);
        sn_pbw_msg(nodes, 1, &n);
    } else { /* int4: W [K, N] as N rows of K in blocks */
        size_t k = rows, nn = cols, bs = o->block;
        size_t blocks = (k + bs - 1) / bs, blob = bs / 2;
        uint8_t *q = calloc(nn * blocks * blob + 1, 1);
        float *s = malloc(nn * blocks * sizeof *s + 1);
        if (!q || !s) {
            free(q);
            free(s);
            free(f);
            return sn_error(SHARDNET_OUT_OF_MEMORY, "quantize: '%s'", name);
        }
        for (size_t j = 0; j < nn; j++)
            for (size_t b = 0; b < blocks; b++) {
                size_t k0 = b * bs, k1 = k0 + bs < k ? k0 + bs : k;
                float m = 0.0f;
                for (size_t kk = k0; kk < k1; kk++)
                    m = fabsf(f[kk * nn + j]) > m ? fabsf(f[kk * nn + j]) : m;
                float sc = m > 0.0f && isfinite(m) ? m / 7.0f : 1.0f;
                s[j * blocks + b] = sc;
                uint8_t *qb = q + (j * blocks + b) * blob;
                for (size_t kk = k0; kk < k1; kk++) {
                    uint8_t u = (uint8_t)round_clamp(f[kk * nn + j] / sc + 8.0f,
                                                     0.0f, 15.0f);
                    qb[(kk - k0) / 2] |= (uint8_t)((kk - k0) % 2 ? u << 4 : u);
                }
            }
        int64_t qd[3] = {(int64_t)nn, (int64_t)blocks, (int64_t)blob};
        int64_t sd = (int64_t)(nn * blocks);
        put_tensor(g, name, "_q4", SN_DT_UINT8, qd, 3, q, nn * blocks * blob);
        put_tensor(g, name, "_scales", SN_DT_FLOAT, &sd, 1, s,
                   nn * blocks * sizeof *s);
        *after = nn * blocks * (blob + sizeof *s);
        free(q);
        free(s);
    }
    free(f);
    return SHARDNET_OK;
}

/* MatMul node n (reading weight w) as MatMulNBits, into g. */
static void put_nbits(sn_pbw *g, const qnode *n, const qinit *w, size_t block)
{
    sn_pbw m = {0};
    char name[4200];
    snprintf(name, sizeof name, "%.*s", (int)w->name.n, (const char *)w->name.p);
    sn_pbw_bytes(&m, 1, n->in[0].p, n->in[0].n);
    char in[4300];
    snprintf(in, sizeof in, "%s_q4", name);
    sn_pbw_str(&m, 1, in);
    snprintf(in, sizeof in, "%s_scales", name);
    sn_pbw_str(&m, 1, in);
    sn_pbw_bytes(&m, 2, n->out.p, n->out.n);
    if (n->name.n)
        sn_pbw_bytes(&m, 3, n->name.p, n->name.n);
    sn_pbw_str(&m, 4, "MatMulNBits");
    sn_pbw_str(&m, 7, "com.microsoft");
    put_attr_int(&m, "K", w->t.dims[0]);
    put_attr_int(&m, "N", w->t.dims[1]);
    put_attr_int(&m, "bits", 4);
    put_attr_int(&m, "block_size", (int64_t)block);
    sn_pbw_msg(g, 1, &m);
}

/* Field f as it was in the file: its tag and value. */
static void copy_field(sn_pbw *out, const sn_pb_field *f)
{
    sn_pbw_tag(out, f->num, f->wire);
    if (f->wire == SN_PB_LEN) {
        sn_pbw_varint(out, f->len);
        sn_pbw_raw(out, f->data, f->len);
    } else if (f->wire == SN_PB_VARINT) {
        sn_pbw_varint(out, f->u);
    } else {
        uint8_t b[8];
        size_t nb = f->wire == SN_PB_I64 ? 8 : 4;
        for (size_t i = 0; i < nb; i++)
            b[i] = (uint8_t)(f->u >> (8 * i));
        sn_pbw_raw(out, b, nb);
    }
}

/* The new graph: the original's fields with the weights rewritten. */
static shardnet_status write_graph(const uint8_t *p, size_t len,
                                   const qgraph *qg,
                                   const shardnet_quantize_options *o,
                                   sn_pbw *out, shardnet_quantize_result *res)
{
    sn_pbw nodes = {0}, inits = {0};
    sn_pb r;
    sn_pb_field f;
    size_t ni = 0, nn = 0;
    int nodes_written = 0, inits_written = 0;
    shardnet_status st = SHARDNET_OK;
    /* The replacements, and the nodes that make float weights again. */
    for (size_t i = 0; i < qg->ninits && st == SHARDNET_OK; i++) {
        size_t after = 0;
        if (!qg->inits[i].mode)
            continue;
        st = rewrite_weight(&qg->inits[i], o, &inits, &nodes, &after);
        res->weights++;
        res->nbits += qg->inits[i].mode == '4';
        res->bytes_before += qg->inits[i].t.nbytes;
        res->bytes_after += after;
    }
    sn_pb_init(&r, p, len);
    while (st == SHARDNET_OK && sn_pb_next(&r, &f) > 0) {
        if (f.num == 1 && f.wire == SN_PB_LEN) {
            if (!nodes_written) { /* the new nodes before the first */
                sn_pbw_raw(out, nodes.p, nodes.n);
                nodes_written = 1;
            }
            const qnode *n = &qg->nodes[nn++];
            if (n->nbits) {
                put_nbits(out, n, &qg->inits[n->weight], o->block);
                continue;
            }
        } else if (f.num == 5 && f.wire == SN_PB_LEN &&
                   qg->inits[ni++].mode) {
            if (!inits_written) { /* every replacement, at the first */
                sn_pbw_raw(out, inits.p, inits.n);
                inits_written = 1;
            }
            continue;
        }
        copy_field(out, &f);
    }
    if (inits.failed || nodes.failed)
        out->failed = 1;
    sn_pbw_free(&nodes);
    sn_pbw_free(&inits);
    return st;
}

shardnet_status shardnet_model_quantize(const char *in_path,
                                        const char *out_path,
                                        const shardnet_quantize_options *opts,
                                        shardnet_quantize_result *result)
{
    shardnet_quantize_options o = {.weights = "int8", .block = 32,
                                   .min_elements = 1024};
    shardnet_quantize_result res = {0};
    void *addr = NULL;
    size_t len = 0;
    sn_model_file *files = NULL;
    size_t nfiles = 0;
    qgraph g = {0};
    sn_pbw out = {0}, graph = {0};
    shardnet_status st;
    if (!in_path || !out_path)
        return sn_error(SHARDNET_INVALID_ARGUMENT, "quantize: no model or "
                                                   "no output path");
    if (opts) {
        if (opts->size < offsetof(shardnet_quantize_options, min_elements) +
                             sizeof opts->min_elements)
            return sn_error(SHARDNET_INVALID_ARGUMENT,
                            "quantize: options of %zu bytes, fewer than this "
                            "library reads", opts->size);
        if (opts->weights)
            o.weights = opts->weights;
        o.per_channel = opts->per_channel;
        if (opts->block)
            o.block = opts->block;
        if (opts->min_elements)
            o.min_elements = opts->min_elements;
    }
    int int4 = !strcmp(o.weights, "int4"), fp16 = !strcmp(o.weights, "fp16");
    if (!int4 && !fp16 && strcmp(o.weights, "int8"))
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "quantize: weights '%s': int8, int4 or fp16",
                        o.weights);
    if (o.block < 16 || (o.block & (o.block - 1)) || o.block > 1 << 16)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "quantize: block %zu: a power of two from 16 to 65536",
                        o.block);
    struct stat si, so;
    if (stat(in_path, &si) == 0 && stat(out_path, &so) == 0 &&
        si.st_dev == so.st_dev && si.st_ino == so.st_ino)
        return sn_error(SHARDNET_INVALID_ARGUMENT,
                        "quantize: '%s' is the model itself; write elsewhere",
                        out_path);
    if ((st = sn_onnx_map_model(in_path, 0, &addr, &len, &files, &nfiles)) !=
        SHARDNET_OK)
        return st;

    /* The model: its graph and the opsets it imports. */
    const uint8_t *gp = NULL;
    size_t glen = 0;
    int64_t opset = -1;
    int has_ms = 0;
    sn_pb r;
    sn_pb_field f;
    int k;
    sn_pb_init(&r, addr, len);
    while ((k = sn_pb_next(&r, &f)) > 0) {
        if (f.num == 7 && f.wire == SN_PB_LEN) {
            gp = f.data;
            glen = f.len;
        } else if (f.num == 8 && f.wire == SN_PB_LEN) {
            sn_pb o8;
            sn_pb_field of;
            span dom = {0};
            int64_t ver = 0;
            sn_pb_init(&o8, f.data, f.len);
            while (sn_pb_next(&o8, &of) > 0) {
                if (of.num == 1 && of.wire == SN_PB_LEN)
                    dom = (span){of.data, of.len};
                else if (of.num == 2 && of.wire == SN_PB_VARINT)
                    ver = (int64_t)of.u;
            }
            if (default_domain(dom))
                opset = ver;
            has_ms |= span_is(dom, "com.microsoft");
        }
    }
    if (k < 0 || !gp) {
        st = k < 0 ? sn_error_prefix(SHARDNET_INVALID_ARGUMENT,
                                     "quantize: '%s'", in_path)
                   : sn_error(SHARDNET_INVALID_ARGUMENT,
                              "quantize: '%s' has no graph", in_path);
        goto out;
    }
    if ((!fp16 && opset < (o.per_channel ? 13 : 10)) || opset < 6) {
        st = sn_error(SHARDNET_UNSUPPORTED,
                      "quantize: the model imports opset %lld; %s needs "
                      "DequantizeLinear%s, opset %d or later",
                      (long long)opset, o.weights,
                      o.per_channel ? " per axis" : "",
                      o.per_channel ? 13 : 10);
        goto out;
    }
    if ((st = read_graph(gp, glen, &g)) != SHARDNET_OK)
        goto out;
    choose(&g, &o, int4, fp16);
    if ((st = write_graph(gp, glen, &g, &o, &graph, &res)) != SHARDNET_OK)
        goto out;

    /* The model's fields in order, the graph replaced; MatMulNBits'
     * opset imported where it is used and missing. */
    int nbits = 0;
    for (size_t i = 0; i < g.ninits; i++)
        nbits |= g.inits[i].mode == '4';
    sn_pb_init(&r, addr, len);
    while (sn_pb_next(&r, &f) > 0) {
        if (f.num == 7 && f.wire == SN_PB_LEN) {
            sn_pbw_bytes(&out, 7, graph.p, graph.n);
            continue;
        }
        copy_field(&out, &f);
    }
    if (nbits && !has_ms) {
        sn_pbw os = {0};
        sn_pbw_str(&os, 1, "com.microsoft");
        sn_pbw_int(&os, 2, 1);
        sn_pbw_msg(&out, 8, &os);
    }
    if (out.failed || graph.failed) {
        st = sn_error(SHARDNET_OUT_OF_MEMORY, "quantize: out of memory");
        goto out;
    }
    FILE *fo = fopen(out_path, "wb");
    if (!fo) {
        st = sn_error(SHARDNET_IO_ERROR, "quantize: '%s': %s", out_path,
                      strerror(errno));
        goto out;
    }
    int wrote = fwrite(out.p, 1, out.n, fo) == out.n;
    if (fclose(fo) != 0 || !wrote) {
        st = sn_error(SHARDNET_IO_ERROR, "quantize: writing '%s': %s",
                      out_path, strerror(errno));
        remove(out_path);
        goto out;
    }
    if (result)
        *result = res;
out:
    sn_pbw_free(&out);
    sn_pbw_free(&graph);
    for (size_t i = 0; i < g.nnodes; i++)
        free(g.nodes[i].in);
    free(g.nodes);
    free(g.inits);
    if (addr)
        munmap(addr, len);
    sn_model_files_free(files, nfiles);
    return st;
}
