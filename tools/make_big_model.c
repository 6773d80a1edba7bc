/*
 * make_big_model: writes a multi-layer perceptron big enough to matter,
 * from a seed, so that nobody commits one (issue 16).  Each layer is a
 * Gemm of the activations by a WIDTH x WIDTH weight (transB = 1) plus a
 * bias, followed by Relu except after the last; the input "x" is
 * [N, WIDTH] with a symbolic batch N, the output "y".  The default, eight
 * layers of 4096, holds 537 MB of fp32 weights.
 *
 *   make_big_model OUT.onnx [--layers L] [--width W] [--seed S]
 *                  [--external] [--weights fp32|int8|int4|fp16] [--matmul]
 *
 * --weights int8 stores each weight as int8 with one scale per output
 * column (max |w| / 127, rounded half to even), dequantized by a
 * DequantizeLinear (axis 0) before its Gemm: the form of `shardnet
 * quantize`, a quarter of the bytes.  --weights int4 stores them as
 * ONNX Runtime's MatMulNBits (com.microsoft) does: uint4 in blocks of 32
 * along K with a scale each and the default zero point 8, the bias added
 * after.  --weights fp16 stores them as IEEE halves (rounded to nearest
 * even), each Cast to float before its Gemm: the form of `shardnet
 * quantize --weights fp16`, half the bytes.
 * --matmul (fp32 only) writes each layer as a MatMul by its weight stored
 * [K, N] (the same bytes, read the other way) and an Add of the bias,
 * as exporters write a Linear applied to more than two dimensions.
 * --external writes the weights to OUT.onnx.data beside the model
 * (ONNX's external data, each tensor at an offset aligned to 4096 bytes),
 * as exporters do for models over 2 GB.  The file is streamed: nothing
 * the size of the weights is held in memory.  Weights are uniform in
 * +-sqrt(6 / W) (He's bound for Relu), biases in +-0.01, from a
 * splitmix64 generator seeded by S, so that the same arguments give the
 * same bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- a protobuf message held in memory ------------------------------- */

typedef struct msg {
    uint8_t *p;
    size_t n, cap;
} msg;

static void die(const char *what)
{
    fprintf(stderr, "make_big_model: %s: %s\n", what,
            errno ? strerror(errno) : "failed");
    exit(1);
}

static void raw(msg *m, const void *d, size_t n)
{
    if (m->n + n > m->cap) {
        m->cap = (m->n + n) * 2 + 64;
        if (!(m->p = realloc(m->p, m->cap)))
            die("out of memory");
    }
    memcpy(m->p + m->n, d, n);
    m->n += n;
}

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static void varint(msg *m, uint64_t v)
{
    do {
        uint8_t c = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            c |= 0x80;
        raw(m, &c, 1);
    } while (v);
}

static void tag(msg *m, unsigned field, unsigned wire)
{
    varint(m, (uint64_t)field << 3 | wire);
}

static void int_field(msg *m, unsigned field, int64_t v)
{
    tag(m, field, 0);
    varint(m, (uint64_t)v);
}

static void bytes_field(msg *m, unsigned field, const void *d, size_t n)
{
    tag(m, field, 2);
    varint(m, n);
    raw(m, d, n);
}

static void str_field(msg *m, unsigned field, const char *s)
{
    bytes_field(m, field, s, strlen(s));
}

/* Appends sub as field `field` and empties it. */
static void sub_field(msg *m, unsigned field, msg *sub)
{
    bytes_field(m, field, sub->p, sub->n);
    free(sub->p);
    memset(sub, 0, sizeof *sub);
}

/* --- the weights' values ---------------------------------------------- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* n floats uniform in [-bound, bound]. */
static void fill(float *v, uint64_t *state, size_t n, float bound)
{
    for (size_t i = 0; i < n; i++) {
        double u = (double)(splitmix(state) >> 11) * 0x1.0p-53;
        v[i] = (float)((2 * u - 1) * bound);
    }
}

/* rows x cols floats w as int8 q, one scale per row (max |w| / 127). */
static void quantize_rows(const float *w, size_t rows, size_t cols,
                          int8_t *q, float *scale)
{
    for (size_t r = 0; r < rows; r++) {
        const float *x = w + r * cols;
        float m = 0.0f;
        for (size_t c = 0; c < cols; c++)
            m = fabsf(x[c]) > m ? fabsf(x[c]) : m;
        scale[r] = m > 0.0f ? m / 127.0f : 1.0f;
        for (size_t c = 0; c < cols; c++) {
            float v = nearbyintf(x[c] / scale[r]);
            q[r * cols + c] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
    }
}

/* MatMulNBits' block of K (a scale each) and its bytes. */
#define BLOCK4 32

/*
 * rows x cols floats w (rows of K, cols = K) as MatMulNBits' uint4 in
 * blocks of BLOCK4 along each row (cols a multiple of BLOCK4 here, as the
 * widths used are): scale max |w| / 7, q = round(w / scale) + 8 clamped
 * to [0, 15] (the default zero point 8), two to a byte, the even k low.
 */
static void quantize_blocks4(const float *w, size_t rows, size_t cols,
                             uint8_t *q, float *scale)
{
    size_t blocks = (cols + BLOCK4 - 1) / BLOCK4;
    memset(q, 0, rows * blocks * BLOCK4 / 2);
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b < blocks; b++) {
            const float *x = w + r * cols + b * BLOCK4;
            size_t n = cols - b * BLOCK4 < BLOCK4 ? cols - b * BLOCK4 : BLOCK4;
            float m = 0.0f;
            for (size_t c = 0; c < n; c++)
                m = fabsf(x[c]) > m ? fabsf(x[c]) : m;
            float s = m > 0.0f ? m / 7.0f : 1.0f;
            scale[r * blocks + b] = s;
            uint8_t *qb = q + (r * blocks + b) * (BLOCK4 / 2);
            for (size_t c = 0; c < n; c++) {
                float v = nearbyintf(x[c] / s) + 8.0f;
                uint8_t u = (uint8_t)(v < 0 ? 0 : v > 15 ? 15 : v);
                qb[c / 2] |= (uint8_t)(c % 2 ? u << 4 : u);
            }
        }
}

/* --- the model ---------------------------------------------------------- */

typedef struct weight {
    char name[32];
    int64_t dims[3];
    int rank;
    int dtype;       /* ONNX's: 1 float, 2 uint8, 3 int8, 10 float16 */
    const void *data; /* the layer's values, while it is written */
    uint64_t offset; /* in the external-data file */
} weight;

static size_t weight_bytes(const weight *w)
{
    size_t n = w->dtype == 3 || w->dtype == 2 ? 1 /* int8, uint8 */
               : w->dtype == 10                ? 2 /* float16 */
                                               : 4;
    for (int i = 0; i < w->rank; i++)
        n *= (size_t)w->dims[i];
    return n;
}

/* The TensorProto of w without its data (raw_data, when inline, is
 * streamed after it as the message's last field). */
static msg tensor_head(const weight *w, const char *location)
{
    msg t = {0};
    for (int i = 0; i < w->rank; i++)
        int_field(&t, 1, w->dims[i]);
    int_field(&t, 2, w->dtype);
    str_field(&t, 8, w->name);
    if (location) {
        char num[32];
        static const char *keys[] = {"location", "offset", "length"};
        for (int k = 0; k < 3; k++) {
            msg e = {0};
            str_field(&e, 1, keys[k]);
            if (k == 0) {
                str_field(&e, 2, location);
            } else {
                snprintf(num, sizeof num, "%" PRIu64,
                         k == 1 ? w->offset : (uint64_t)weight_bytes(w));
                str_field(&e, 2, num);
            }
            sub_field(&t, 13, &e);
        }
        int_field(&t, 14, 1); /* data_location EXTERNAL */
    }
    return t;
}

static msg value_info(const char *name, int64_t width)
{
    msg v = {0}, type = {0}, tt = {0}, shape = {0}, d0 = {0}, d1 = {0};
    str_field(&v, 1, name);
    int_field(&tt, 1, 1);
    str_field(&d0, 2, "N");
    sub_field(&shape, 1, &d0);
    int_field(&d1, 1, width);
    sub_field(&shape, 1, &d1);
    sub_field(&tt, 2, &shape);
    sub_field(&type, 1, &tt);
    sub_field(&v, 2, &type);
    return v;
}

static msg node(const char *op, const char *name, const char *const *ins,
                int nin, const char *out)
{
    msg n = {0};
    for (int i = 0; i < nin; i++)
        str_field(&n, 1, ins[i]);
    str_field(&n, 2, out);
    str_field(&n, 3, name);
    str_field(&n, 4, op);
    if (strcmp(op, "Gemm") == 0 || strcmp(op, "DequantizeLinear") == 0 ||
        strcmp(op, "Cast") == 0) {
        /* transB = 1; axis = 0 (per row of [N, K]); to = 1 (float) */
        msg a = {0};
        str_field(&a, 1, strcmp(op, "Gemm") == 0   ? "transB"
                         : strcmp(op, "Cast") == 0 ? "to"
                                                   : "axis");
        int_field(&a, 3, strcmp(op, "DequantizeLinear") != 0);
        int_field(&a, 20, 2); /* AttributeProto.type INT */
        sub_field(&n, 5, &a);
    }
    return n;
}

/* MatMulNBits of com.microsoft: K = N = width, 4 bits in blocks. */
static msg nbits_node(const char *name, const char *const *ins,
                      const char *out, long width)
{
    msg n = {0};
    static const char *const keys[] = {"K", "N", "bits", "block_size"};
    const long vals[] = {width, width, 4, BLOCK4};
    for (int i = 0; i < 3; i++)
        str_field(&n, 1, ins[i]);
    str_field(&n, 2, out);
    str_field(&n, 3, name);
    str_field(&n, 4, "MatMulNBits");
    str_field(&n, 7, "com.microsoft");
    for (int i = 0; i < 4; i++) {
        msg a = {0};
        str_field(&a, 1, keys[i]);
        int_field(&a, 3, vals[i]);
        int_field(&a, 20, 2);
        sub_field(&n, 5, &a);
    }
    return n;
}

static void usage(void)
{
    fprintf(stderr,
            "Usage: make_big_model OUT.onnx [--layers L] [--width W] "
            "[--seed S] [--external]\n"
            "                      [--weights fp32|int8|int4|fp16] [--matmul]\n"
            "Writes an MLP of L Gemm layers of W x W fp32 weights (default "
            "8 x 4096:\n537 MB) with Relu between them, from seed S "
            "(default 1).\n");
    exit(2);
}

static long parse(const char *s, long lo, long hi, const char *what)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi) {
        fprintf(stderr, "make_big_model: %s '%s' is not a number from %ld "
                        "to %ld\n", what, s, lo, hi);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    const char *out = NULL;
    long layers = 8, width = 4096;
    uint64_t seed = 1;
    int external = 0, int8 = 0, int4 = 0, fp16 = 0, matmul = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--layers") == 0 && i + 1 < argc)
            layers = parse(argv[++i], 1, 1000, "--layers");
        else if (strcmp(argv[i], "--width") == 0 && i + 1 < argc)
            width = parse(argv[++i], 1, 1 << 16, "--width");
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            seed = (uint64_t)parse(argv[++i], 0, 1L << 30, "--seed");
        else if (strcmp(argv[i], "--external") == 0)
            external = 1;
        else if (strcmp(argv[i], "--matmul") == 0)
            matmul = 1;
        else if (strcmp(argv[i], "--weights") == 0 && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "fp32") ||
                  !strcmp(argv[i + 1], "int8") ||
                  !strcmp(argv[i + 1], "int4") ||
                  !strcmp(argv[i + 1], "fp16"))) {
            int8 = !strcmp(argv[++i], "int8");
            int4 = !strcmp(argv[i], "int4");
            fp16 = !strcmp(argv[i], "fp16");
        }
        else if (argv[i][0] == '-' || out)
            usage();
        else
            out = argv[i];
    }
    if (!out || (matmul && (int8 || int4 || fp16)))
        usage();

    /* Per layer: the weight (or its integers and scales), the bias. */
    const size_t per = int8 || int4 ? 3 : 2, nw = (size_t)layers * per;
    const size_t wn = (size_t)width * (size_t)width;
    const size_t blocks = ((size_t)width + BLOCK4 - 1) / BLOCK4;
    weight *ws = calloc(nw, sizeof *ws);
    float *wf = malloc(wn * sizeof *wf), *bf = malloc(width * sizeof *bf);
    float *scale = malloc(width * blocks * sizeof *scale);
    int8_t *q = int8 || int4 ? malloc(wn) : NULL;
    _Float16 *half = fp16 ? malloc(wn * sizeof *half) : NULL;
    if (!ws || !wf || !bf || !scale || ((int8 || int4) && !q) ||
        (fp16 && !half))
        die("out of memory");
    uint64_t off = 0;
    for (long l = 0; l < layers; l++) {
        weight *w = &ws[per * l], *b = &ws[per * l + per - 1];
        snprintf(w->name, sizeof w->name,
                 int8 || int4 ? "w%ld_q" : fp16 ? "w%ld_h" : "w%ld", l);
        w->rank = 2;
        w->dims[0] = w->dims[1] = width;
        w->dtype = int8 ? 3 : fp16 ? 10 : 1;
        if (int4) { /* MatMulNBits' [N, blocks, 16 bytes] of uint8 */
            w->rank = 3;
            w->dims[1] = (int64_t)blocks;
            w->dims[2] = BLOCK4 / 2;
            w->dtype = 2;
        }
        if (int8 || int4) {
            weight *sc = &ws[per * l + 1];
            snprintf(sc->name, sizeof sc->name, "w%ld_scale", l);
            sc->rank = 1;
            sc->dims[0] = int4 ? width * (int64_t)blocks : width;
            sc->dtype = 1;
        }
        snprintf(b->name, sizeof b->name, "b%ld", l);
        b->rank = 1;
        b->dims[0] = width;
        b->dtype = 1;
        for (size_t k = 0; k < per; k++) {
            ws[per * l + k].offset = off;
            off += (weight_bytes(&ws[per * l + k]) + 4095) / 4096 * 4096;
        }
    }

    /* Everything but the weights' data, in memory. */
    char data_name[4096];
    const char *slash = strrchr(out, '/');
    snprintf(data_name, sizeof data_name, "%s.data", slash ? slash + 1 : out);
    msg nodes = {0}, io = {0}, *heads = calloc(nw, sizeof *heads);
    if (!heads)
        die("out of memory");
    for (long l = 0; l < layers; l++) {
        char in[32], h[32], r[32], name[32], wd[32];
        snprintf(in, sizeof in, l ? "r%ld" : "x", l - 1);
        snprintf(h, sizeof h, l + 1 < layers ? "h%ld" : "y", l);
        if (int8 || fp16) /* the dequantized or cast weight */
            snprintf(wd, sizeof wd, "w%ld", l);
        else
            snprintf(wd, sizeof wd, "%s", ws[per * l].name);
        msg n;
        if (int4) {
            /* MatMulNBits, then the bias's Add */
            const char *mins[3] = {in, ws[per * l].name, ws[per * l + 1].name};
            char m[32];
            snprintf(m, sizeof m, "m%ld", l);
            snprintf(name, sizeof name, "matmul%ld", l);
            n = nbits_node(name, mins, m, width);
            sub_field(&nodes, 1, &n);
            const char *ains[2] = {m, ws[per * l + 2].name};
            snprintf(name, sizeof name, "add%ld", l);
            n = node("Add", name, ains, 2, h);
            sub_field(&nodes, 1, &n);
        } else if (int8) {
            const char *dins[2] = {ws[per * l].name, ws[per * l + 1].name};
            snprintf(name, sizeof name, "dequantize%ld", l);
            n = node("DequantizeLinear", name, dins, 2, wd);
            sub_field(&nodes, 1, &n);
        } else if (fp16) {
            const char *cins[1] = {ws[per * l].name};
            snprintf(name, sizeof name, "cast%ld", l);
            n = node("Cast", name, cins, 1, wd);
            sub_field(&nodes, 1, &n);
        }
        if (matmul) {
            const char *mins[2] = {in, wd}, *ains[2];
            char m[32];
            snprintf(m, sizeof m, "m%ld", l);
            snprintf(name, sizeof name, "matmul%ld", l);
            n = node("MatMul", name, mins, 2, m);
            sub_field(&nodes, 1, &n);
            ains[0] = m;
            ains[1] = ws[per * l + per - 1].name;
            snprintf(name, sizeof name, "add%ld", l);
            n = node("Add", name, ains, 2, h);
            sub_field(&nodes, 1, &n);
        } else if (!int4) {
            const char *ins[3] = {in, wd, ws[per * l + per - 1].name};
            snprintf(name, sizeof name, "gemm%ld", l);
            n = node("Gemm", name, ins, 3, h);
            sub_field(&nodes, 1, &n);
        }
        if (l + 1 < layers) {
            const char *rin[1] = {h};
            snprintf(r, sizeof r, "r%ld", l);
            snprintf(name, sizeof name, "relu%ld", l);
            n = node("Relu", name, rin, 1, r);
            sub_field(&nodes, 1, &n);
        }
    }
    msg vi = value_info("x", width);
    sub_field(&io, 11, &vi);
    vi = value_info("y", width);
    sub_field(&io, 12, &vi);

    /* The graph's length, then the model's, before any byte is written. */
    uint64_t graph_len = nodes.n + io.n + 2 + strlen("big_mlp");
    for (size_t i = 0; i < nw; i++) {
        heads[i] = tensor_head(&ws[i], external ? data_name : NULL);
        uint64_t t = heads[i].n;
        if (!external)
            t += 1 + varint_len(weight_bytes(&ws[i])) + weight_bytes(&ws[i]);
        graph_len += 1 + varint_len(t) + t;
    }
    msg head = {0}, opset = {0};
    int_field(&head, 1, 8); /* ir_version */
    str_field(&head, 2, "shardnet make_big_model");
    str_field(&opset, 1, "");
    int_field(&opset, 2, 13);
    sub_field(&head, 8, &opset);
    if (int4) {
        str_field(&opset, 1, "com.microsoft");
        int_field(&opset, 2, 1);
        sub_field(&head, 8, &opset);
    }
    tag(&head, 7, 2);
    varint(&head, graph_len);

    FILE *f = fopen(out, "wb"), *d = NULL;
    if (!f)
        die(out);
    if (external) {
        char path[8192];
        snprintf(path, sizeof path, "%s.data", out);
        if (!(d = fopen(path, "wb")))
            die(path);
    }
    uint64_t state = seed;
    msg g = {0};
    raw(&g, head.p, head.n);
    raw(&g, nodes.p, nodes.n);
    str_field(&g, 2, "big_mlp");
    if (fwrite(g.p, 1, g.n, f) != g.n)
        die(out);
    uint64_t at = 0;
    for (size_t i = 0; i < nw; i++) {
        if (i % per == 0) {
            /* The layer's values: the same in every form of the model. */
            fill(wf, &state, wn, (float)sqrt(6.0 / (double)width));
            fill(bf, &state, (size_t)width, 0.01f);
            if (int8)
                quantize_rows(wf, (size_t)width, (size_t)width, q, scale);
            if (int4)
                quantize_blocks4(wf, (size_t)width, (size_t)width,
                                 (uint8_t *)q, scale);
            for (size_t e = 0; fp16 && e < wn; e++)
                half[e] = (_Float16)wf[e];
            ws[i].data = int8 || int4 ? (const void *)q
                         : fp16       ? (const void *)half
                                      : wf;
            if (int8 || int4)
                ws[i + 1].data = scale;
            ws[i + per - 1].data = bf;
        }
        msg t = {0};
        size_t nb = weight_bytes(&ws[i]);
        uint64_t tl = heads[i].n;
        if (!external)
            tl += 1 + varint_len(nb) + nb;
        tag(&t, 5, 2);
        varint(&t, tl);
        raw(&t, heads[i].p, heads[i].n);
        if (!external) {
            tag(&t, 9, 2);
            varint(&t, nb);
        }
        if (fwrite(t.p, 1, t.n, f) != t.n)
            die(out);
        free(t.p);
        FILE *to = external ? d : f;
        if (external) {
            static const char zero[4096];
            if (ws[i].offset > at &&
                fwrite(zero, 1, ws[i].offset - at, d) != ws[i].offset - at)
                die("writing the external data");
            at = ws[i].offset + nb;
        }
        if (fwrite(ws[i].data, 1, nb, to) != nb)
            die("writing the weights");
        free(heads[i].p);
    }
    if (fwrite(io.p, 1, io.n, f) != io.n)
        die(out);
    if (fclose(f) != 0 || (d && fclose(d) != 0))
        die(out);
    free(g.p);
    free(head.p);
    free(nodes.p);
    free(io.p);
    free(heads);
    free(ws);
    free(wf);
    free(bf);
    free(scale);
    free(q);
    free(half);
    return 0;
}
