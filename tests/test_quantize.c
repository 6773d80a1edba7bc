/*
 * shardnet_model_quantize and what it is made of: the arithmetic of each
 * form (rounding ties to even, scales, int4's packing and padding, fp16's
 * range), and models built here byte by byte, quantized, read back and
 * run: what was not converted stays byte for byte (fields shardnet does not
 * know included), names never collide, an IR 3 input list follows its
 * initializers, the com.microsoft import is added once, and the options
 * are checked.  tests/test_quantize.sh runs the command on the fashion MLP
 * against ONNX Runtime.
 */
#include <config.h>

#include <criterion/criterion.h>
#include "testfiles.h"
#include "pbwriter.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/quantize.h"
#include "import/onnx.h"
#include "import/pbwire.h"
#include "ir/graph.h"
#include "shardnet.h"

/* ---- The arithmetic ------------------------------------------------ */

Test(quantize_math, int8_rounds_ties_to_even_with_the_largest_at_127)
{
    /* amax 127: the scale is 1, so the quotients are the values. */
    const float w[8] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 126.5f, 127, -3.49f};
    const int8_t want[8] = {0, 2, 2, 0, -2, 126, 127, -3};
    int8_t q[8];
    float s;
    sn_q_int8(w, 2, 4, -1, q, &s);
    cr_assert_eq(s, 1.0f);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(q[i], want[i], "element %d: %d, want %d", i, q[i],
                     want[i]);
}

Test(quantize_math, int8_per_channel_takes_each_outputs_largest)
{
    /* [K = 2, N = 2]: columns scaled 2/127 and 10/127; 1 / (2/127) and
     * 5 / (10/127) are 63.5, ties that go to 64. */
    const float w[4] = {1, 10, -2, 5};
    int8_t q[4];
    float s[2];
    sn_q_int8(w, 2, 2, 1, q, s);
    cr_assert_float_eq(s[0], 2.0f / 127, 1e-9);
    cr_assert_float_eq(s[1], 10.0f / 127, 1e-9);
    cr_assert(q[0] == 64 && q[1] == 127 && q[2] == -127 && q[3] == 64,
              "%d %d %d %d", q[0], q[1], q[2], q[3]);
    /* The same weight as [N, K] (axis 0): its rows are the outputs. */
    const float t[4] = {1, -2, 10, 5};
    sn_q_int8(t, 2, 2, 0, q, s);
    cr_assert(q[0] == 64 && q[1] == -127 && q[2] == 127 && q[3] == 64);
}

Test(quantize_math, int8_of_zeros_has_scale_1)
{
    const float w[4] = {0, 0, -0.0f, 0};
    int8_t q[4] = {1, 1, 1, 1};
    float s;
    sn_q_int8(w, 1, 4, -1, q, &s);
    cr_assert_eq(s, 1.0f);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(q[i], 0);
}

Test(quantize_math, int4_packs_low_half_first_and_pads_with_the_zero_point)
{
    /* K = 5 in one block of 16, N = 1: amax 7, scale 1; q + 8 is
     * 15 1 12 8 10, then 8s. */
    const float w[5] = {7, -7, 3.5f, 0.5f, 1.5f};
    const uint8_t want[8] = {0x1f, 0x8c, 0x8a, 0x88, 0x88, 0x88, 0x88, 0x88};
    uint8_t b[8];
    float s;
    cr_assert_eq(sn_q_int4_blocks(5, 16), 1);
    sn_q_int4(w, 5, 1, 1, 16, b, &s);
    cr_assert_eq(s, 1.0f);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(b[i], want[i], "byte %d: 0x%02x, want 0x%02x", i, b[i],
                     want[i]);
}

Test(quantize_math, int4_blocks_run_along_k_for_either_layout)
{
    /* N = 2 outputs, K = 40: two blocks of 32 (the second padded). */
    float kn[40 * 2], nk[2 * 40];
    for (int k = 0; k < 40; k++)
        for (int j = 0; j < 2; j++)
            kn[k * 2 + j] = nk[j * 40 + k] = sinf((float)(k * 3 + j));
    uint8_t b1[2 * 2 * 16], b0[2 * 2 * 16];
    float s1[4], s0[4];
    cr_assert_eq(sn_q_int4_blocks(40, 32), 2);
    sn_q_int4(kn, 40, 2, 1, 32, b1, s1);
    sn_q_int4(nk, 2, 40, 0, 32, b0, s0);
    cr_assert_arr_eq(b1, b0, sizeof b1);
    cr_assert_arr_eq(s1, s0, sizeof s1);
    /* Dequantized, each weight is within half a step of its value. */
    for (int j = 0; j < 2; j++)
        for (int k = 0; k < 40; k++) {
            uint8_t byte = b1[(j * 2 + k / 32) * 16 + (k % 32) / 2];
            int q = (k % 2 ? byte >> 4 : byte & 15) - 8;
            float sc = s1[j * 2 + k / 32];
            cr_assert_leq(fabsf(q * sc - nk[j * 40 + k]), sc / 2 + 1e-7f);
        }
}

Test(quantize_math, fp16_rounds_to_even_and_says_when_a_value_overflows)
{
    const float w[4] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65504.0f,
                        -1e-9f};
    uint16_t h[4];
    cr_assert(sn_q_fp16(w, 4, h));
    cr_assert(h[0] == 0x3c00 && h[1] == 0x3c02 && h[2] == 0x7bff &&
              h[3] == 0x8000, "%04x %04x %04x %04x", h[0], h[1], h[2], h[3]);
    const float big[2] = {1, 65520.0f};
    cr_assert_not(sn_q_fp16(big, 2, h));
}

/* ---- Models -------------------------------------------------------- */

static const int64_t WG_DIMS[2] = {16, 32}; /* Gemm, transB: [N, K] */
static const int64_t W16_DIMS[2] = {16, 16};
static const int64_t WS_DIMS[2] = {32, 16};

/* A float initializer of the given dims, its values from a formula. */
static pb weight(const char *name, const int64_t *dims, int rank, float f)
{
    size_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= (size_t)dims[i];
    float *v = malloc(n * sizeof *v);
    cr_assert(v);
    for (size_t i = 0; i < n; i++)
        v[i] = f * sinf((float)i * 0.37f + f);
    pb t = tensor_raw(name, 1, dims, rank, v, n * sizeof *v);
    free(v);
    return t;
}

/* Bytes that a model keeps as they are: fields shardnet does not know. */
static const uint8_t MODEL_UNKNOWN[] = {0x98, 0x06, 0x2a}; /* 99: 42 */
static const char GRAPH_UNKNOWN[] = "graph field 77, kept";
static const char NODE_DOC[] = "the Gemm's doc string, kept";

/*
 * x [2, 32] -> Gemm(Wg, bg, transB) -> h [2, 16] -> MatMul(Wm) -> y, and
 * x -> MatMul(Ws) -> z with Ws also read by an Identity (so it stays
 * float);
 * Wg listed among the graph inputs as IR 3 lists initializers; an unused
 * float initializer named Wm_quantized, whose name int8 must not take.
 * An import of com.microsoft at ms_version when that is not 0.
 */
static pb test_model(int64_t ms_version)
{
    static const int64_t xd[2] = {2, 32}, yd[2] = {2, 16}, bd[1] = {16};
    pb g = {0}, m = {0}, os = {0}, t;
    pb gemm = node("gemm", "Gemm", (const char *[]){"x", "Wg", "bg", NULL},
                   (const char *[]){"h", NULL});
    pb a = {0};
    put_str(&a, 1, "transB");
    put_int(&a, 3, 1);
    put_int(&a, 20, 2);
    put_msg(&gemm, 5, &a);
    put_str(&gemm, 6, NODE_DOC);
    pb mm = node("mm", "MatMul", (const char *[]){"h", "Wm", NULL},
                 (const char *[]){"y", NULL});
    pb ms = node("ms", "MatMul", (const char *[]){"x", "Ws", NULL},
                 (const char *[]){"z", NULL});
    pb id = node("id", "Identity", (const char *[]){"Ws", NULL},
                 (const char *[]){"ws", NULL});
    put_msg(&g, 1, &gemm);
    put_msg(&g, 1, &mm);
    put_msg(&g, 1, &ms);
    put_msg(&g, 1, &id);
    put_str(&g, 2, "q");
    t = weight("Wg", WG_DIMS, 2, 0.5f);
    put_msg(&g, 5, &t);
    t = weight("bg", bd, 1, 0.1f);
    put_msg(&g, 5, &t);
    t = weight("Wm", W16_DIMS, 2, 0.25f);
    put_msg(&g, 5, &t);
    t = weight("Ws", WS_DIMS, 2, 0.3f);
    put_msg(&g, 5, &t);
    t = weight("Wm_quantized", bd, 1, 1.0f);
    put_msg(&g, 5, &t);
    put_str(&g, 77, GRAPH_UNKNOWN);
    pb vx = value_info("x", xd, 2), vw = value_info("Wg", WG_DIMS, 2);
    put_msg(&g, 11, &vx);
    put_msg(&g, 11, &vw);
    const char *outs[3] = {"y", "z", "ws"};
    for (int i = 0; i < 3; i++) {
        pb vo = value_info(outs[i], i < 2 ? yd : WS_DIMS, 2);
        put_msg(&g, 12, &vo);
    }
    put_int(&m, 1, 7);
    put_msg(&m, 7, &g);
    put_str(&os, 1, "");
    put_int(&os, 2, 13);
    put_msg(&m, 8, &os);
    if (ms_version) {
        put_str(&os, 1, "com.microsoft");
        put_int(&os, 2, ms_version);
        put_msg(&m, 8, &os);
    }
    put_raw(&m, MODEL_UNKNOWN, sizeof MODEL_UNKNOWN);
    return m;
}

/* A folder with the test model in it as in.onnx. */
typedef struct fixture {
    char dir[64], in[128], out[128];
} fixture;

static void make_fixture(fixture *f, int64_t ms_version)
{
    pb m = test_model(ms_version);
    make_tmpdir("quantize", f->dir, sizeof f->dir);
    snprintf(f->in, sizeof f->in, "%s/in.onnx", f->dir);
    snprintf(f->out, sizeof f->out, "%s/out.onnx", f->dir);
    spit(f->in, m.p, m.n);
    pb_free(&m);
}

/* The model at path quantized with options o; the report. */
static shardnet_quantize_report quantize(const fixture *f,
                                         shardnet_quantize_options o)
{
    shardnet_quantize_report r = {.size = sizeof r};
    o.size = sizeof o;
    cr_assert_eq(shardnet_model_quantize(f->in, f->out, &o, &r), SHARDNET_OK,
                 "%s", shardnet_last_error());
    return r;
}

static int contains(const uint8_t *b, size_t n, const void *what, size_t wn)
{
    for (size_t i = 0; i + wn <= n; i++)
        if (!memcmp(b + i, what, wn))
            return 1;
    return 0;
}

/* The value named name of g, of dtype and rank. */
static const sn_value *value(const sn_graph *g, const char *name,
                             sn_dtype dtype, int rank)
{
    int v = sn_graph_find(g, name);
    cr_assert_geq(v, 0, "no value '%s'", name);
    cr_assert_eq(g->values[v].dtype, dtype, "'%s' is %s", name,
                 sn_dtype_name(g->values[v].dtype));
    cr_assert_eq(g->values[v].rank, rank, "'%s' has rank %d", name,
                 g->values[v].rank);
    return &g->values[v];
}

/* The node whose first output is named out. */
static const sn_node *producer(const sn_graph *g, const char *out)
{
    int v = sn_graph_find(g, out);
    for (size_t i = 0; v >= 0 && i < g->nnodes; i++)
        if (g->nodes[i].noutputs && g->nodes[i].outputs[0] == v)
            return &g->nodes[i];
    cr_assert_fail("nothing produces '%s'", out);
    return NULL;
}

/* How many opset imports of domain the model file has. */
static int imports_of(const uint8_t *b, size_t n, const char *domain)
{
    sn_pb r, ro;
    sn_pb_field f, fo;
    int count = 0;
    sn_pb_init(&r, b, n);
    while (sn_pb_next(&r, &f) > 0) {
        if (f.num != 8)
            continue;
        sn_pb_init(&ro, f.data, f.len);
        while (sn_pb_next(&ro, &fo) > 0)
            count += fo.num == 1 && fo.len == strlen(domain) &&
                     !memcmp(fo.data, domain, fo.len);
    }
    return count;
}

/* Outputs y and z of the model at path on cpu:0 into y and z. */
static void run_model(const char *path, float *y, float *z)
{
    shardnet_context_t *ctx;
    shardnet_model_t *m;
    shardnet_session_t *s;
    shardnet_tensor_info info;
    const void *data;
    float x[64];
    int64_t xd[2] = {2, 32};
    for (int i = 0; i < 64; i++)
        x[i] = cosf((float)i);
    cr_assert_eq(shardnet_context_create(&ctx), SHARDNET_OK);
    cr_assert_eq(shardnet_model_load(path, &m), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(shardnet_session_create(ctx, m, "cpu:0", &s), SHARDNET_OK,
                 "%s", shardnet_last_error());
    cr_assert_eq(shardnet_session_set_input(s, 0, SHARDNET_DTYPE_FLOAT32, 2,
                                            xd, x),
                 SHARDNET_OK);
    cr_assert_eq(shardnet_session_run(s), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(shardnet_session_output(s, 0, &info, &data), SHARDNET_OK);
    memcpy(y, data, 32 * sizeof *y);
    cr_assert_eq(shardnet_session_output(s, 1, &info, &data), SHARDNET_OK);
    memcpy(z, data, 32 * sizeof *z);
    shardnet_session_free(s);
    shardnet_model_free(m);
    shardnet_context_free(ctx);
}

/* The quantized model's y within tol of the float model's, z the same. */
static void runs_like_the_original(const fixture *f, float tol)
{
    float y0[32], z0[32], y1[32], z1[32];
    run_model(f->in, y0, z0);
    run_model(f->out, y1, z1);
    cr_assert_arr_eq(z0, z1, sizeof z0, "z, of the float weight, changed");
    for (int i = 0; i < 32; i++)
        cr_assert_leq(fabsf(y1[i] - y0[i]), tol * (1 + fabsf(y0[i])),
                      "y[%d] %g, float %g", i, y1[i], y0[i]);
}

Test(quantize_model, int8_keeps_the_rest_of_the_model_byte_for_byte)
{
    fixture f;
    sn_graph *g;
    size_t n;
    make_fixture(&f, 0);
    shardnet_quantize_report r = quantize(&f, (shardnet_quantize_options){0});
    cr_assert_eq(r.converted, 2);
    cr_assert_eq(r.kept, 1, "Ws, also read by an Identity, stays float");
    cr_assert_eq(r.bytes_before, (512 + 256) * 4);
    cr_assert_eq(r.bytes_after, 512 + 256 + 2 * (4 + 1));
    uint8_t *b = slurp(f.out, &n);
    cr_assert_eq(r.file_bytes, n);
    cr_assert(contains(b, n, MODEL_UNKNOWN, sizeof MODEL_UNKNOWN));
    cr_assert(contains(b, n, GRAPH_UNKNOWN, strlen(GRAPH_UNKNOWN)));
    cr_assert(contains(b, n, NODE_DOC, strlen(NODE_DOC)));
    cr_assert_eq(sn_onnx_load_memory(b, n, NULL, &g), SHARDNET_OK, "%s",
                 shardnet_last_error());
    value(g, "Wg_quantized", SN_DT_INT8, 2);
    value(g, "Wg_scale", SN_DT_FLOAT, 0);
    value(g, "Wg_zero_point", SN_DT_INT8, 0);
    value(g, "Wm_quantized", SN_DT_FLOAT, 1); /* the model's own */
    value(g, "Wm_quantized_1", SN_DT_INT8, 2);
    value(g, "Ws", SN_DT_FLOAT, 2);
    cr_assert_eq(sn_graph_find(g, "Ws_quantized"), -1);
    cr_assert_str_eq(producer(g, "Wg")->op_type, "DequantizeLinear");
    cr_assert_str_eq(g->nodes[0].op_type, "DequantizeLinear");
    cr_assert_str_eq(g->nodes[2].op_type, "Gemm");
    /* Wg's place in the inputs went to its initializers: x is the only
     * input to bind. */
    cr_assert_eq(g->ninputs, 1);
    sn_graph_free(g);
    free(b);
    runs_like_the_original(&f, 0.02f);
    rm_tmpdir(f.dir);
}

Test(quantize_model, int8_per_channel_scales_along_each_products_outputs)
{
    fixture f;
    sn_graph *g;
    make_fixture(&f, 0);
    quantize(&f, (shardnet_quantize_options){
                     .flags = SHARDNET_QUANTIZE_PER_CHANNEL});
    cr_assert_eq(sn_onnx_load(f.out, &g), SHARDNET_OK, "%s",
                 shardnet_last_error());
    cr_assert_eq(value(g, "Wg_scale", SN_DT_FLOAT, 1)->dims[0], 16);
    cr_assert_eq(value(g, "Wm_scale", SN_DT_FLOAT, 1)->dims[0],
                 16);
    cr_assert_eq(sn_attr_int(producer(g, "Wg"), "axis", -1), 0,
                 "Gemm with transB: the outputs are the rows");
    cr_assert_eq(sn_attr_int(producer(g, "Wm"), "axis", -1), 1,
                 "MatMul: the outputs are the columns");
    sn_graph_free(g);
    runs_like_the_original(&f, 0.02f);
    rm_tmpdir(f.dir);
}

Test(quantize_model, int4_makes_matmulnbits_and_imports_its_domain_once)
{
    for (int64_t have = 0; have <= 1; have++) {
        fixture f;
        sn_graph *g;
        size_t n;
        make_fixture(&f, have);
        shardnet_quantize_report r = quantize(
            &f, (shardnet_quantize_options){
                    .weights = SHARDNET_QUANTIZE_INT4, .block_size = 16});
        cr_assert_eq(r.converted, 2);
        uint8_t *b = slurp(f.out, &n);
        cr_assert_eq(imports_of(b, n, "com.microsoft"), 1);
        cr_assert(contains(b, n, MODEL_UNKNOWN, sizeof MODEL_UNKNOWN));
        cr_assert_eq(sn_onnx_load_memory(b, n, NULL, &g), SHARDNET_OK, "%s",
                     shardnet_last_error());
        const sn_node *mm = producer(g, "y"), *add = producer(g, "h");
        cr_assert_str_eq(mm->op_type, "MatMulNBits");
        cr_assert_str_eq(mm->domain, "com.microsoft");
        cr_assert_eq(sn_attr_int(mm, "K", 0), 16);
        cr_assert_eq(sn_attr_int(mm, "N", 0), 16);
        cr_assert_eq(sn_attr_int(mm, "bits", 0), 4);
        cr_assert_eq(sn_attr_int(mm, "block_size", 0), 16);
        cr_assert_str_eq(add->op_type, "Add", "the Gemm's bias");
        const sn_node *gemm = producer(g, "h_matmul");
        cr_assert_str_eq(gemm->op_type, "MatMulNBits");
        cr_assert_eq(sn_attr_int(gemm, "K", 0), 32);
        const sn_value *q = value(g, "Wg_q4", SN_DT_UINT8, 3);
        cr_assert(q->dims[0] == 16 && q->dims[1] == 2 && q->dims[2] == 8);
        cr_assert_eq(value(g, "Wg_scales", SN_DT_FLOAT, 1)->dims[0], 32);
        cr_assert_eq(sn_graph_find(g, "Wg"), -1, "Wg is read by nothing");
        sn_graph_free(g);
        free(b);
        runs_like_the_original(&f, 0.1f);
        rm_tmpdir(f.dir);
    }
}

Test(quantize_model, int4_refuses_a_model_of_another_com_microsoft_version)
{
    fixture f;
    shardnet_quantize_options o = {.size = sizeof o,
                                   .weights = SHARDNET_QUANTIZE_INT4};
    make_fixture(&f, 2);
    cr_assert_neq(shardnet_model_quantize(f.in, f.out, &o, NULL),
                  SHARDNET_OK);
    cr_assert(strstr(shardnet_last_error(),
                     "imports domain 'com.microsoft' at version 2"),
              "%s", shardnet_last_error());
    cr_assert(access(f.out, F_OK) != 0, "nothing is written");
    rm_tmpdir(f.dir);
}

Test(quantize_model, fp16_casts_and_nothing_to_convert_writes_the_same_bytes)
{
    fixture f;
    sn_graph *g;
    size_t n, n0;
    make_fixture(&f, 0);
    quantize(&f, (shardnet_quantize_options){
                     .weights = SHARDNET_QUANTIZE_FP16});
    cr_assert_eq(sn_onnx_load(f.out, &g), SHARDNET_OK, "%s",
                 shardnet_last_error());
    value(g, "Wg_fp16", SN_DT_FLOAT16, 2);
    const sn_node *cast = producer(g, "Wm");
    cr_assert_str_eq(cast->op_type, "Cast");
    cr_assert_eq(sn_attr_int(cast, "to", 0), SN_DT_FLOAT);
    sn_graph_free(g);
    runs_like_the_original(&f, 2e-3f);
    shardnet_quantize_report r =
        quantize(&f, (shardnet_quantize_options){.min_elements = 1 << 20});
    cr_assert_eq(r.converted, 0);
    cr_assert_eq(r.kept, 3);
    uint8_t *a = slurp(f.in, &n0), *b = slurp(f.out, &n);
    cr_assert(n == n0 && !memcmp(a, b, n), "the model changed");
    free(a);
    free(b);
    rm_tmpdir(f.dir);
}

Test(quantize_model, options_are_checked)
{
    fixture f;
    shardnet_quantize_options o = {.size = sizeof o};
    const struct {
        shardnet_quantize_options o;
        const char *why;
    } bad[] = {
        {{.size = 4}, "size 4 is too small"},
        {{.size = sizeof o, .weights = (shardnet_quantize_weights)7},
         "weights 7 is none of"},
        {{.size = sizeof o, .flags = 2}, "unknown flags 0x2"},
        {{.size = sizeof o, .weights = SHARDNET_QUANTIZE_INT4,
          .block_size = 48},
         "block size 48 is not a power of two"},
        {{.size = sizeof o, .block_size = 32}, "a block size is for int4"},
        {{.size = sizeof o, .weights = SHARDNET_QUANTIZE_INT4,
          .flags = SHARDNET_QUANTIZE_PER_CHANNEL},
         "per-channel scales are for int8"},
    };
    make_fixture(&f, 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(shardnet_model_quantize(f.in, f.out, &bad[i].o, NULL),
                     SHARDNET_INVALID_ARGUMENT, "case %zu", i);
        cr_assert(strstr(shardnet_last_error(), bad[i].why), "case %zu: %s",
                  i, shardnet_last_error());
    }
    cr_assert_eq(shardnet_model_quantize(NULL, f.out, &o, NULL),
                 SHARDNET_INVALID_ARGUMENT);
    cr_assert_eq(shardnet_model_quantize(f.in, NULL, &o, NULL),
                 SHARDNET_INVALID_ARGUMENT);
    cr_assert(access(f.out, F_OK) != 0, "nothing is written");
    /* NULL options: int8 per tensor; a report of an older, shorter size
     * gets only its fields. */
    struct {
        size_t size, converted, canary;
    } old = {2 * sizeof(size_t), 0, 12345};
    cr_assert_eq(shardnet_model_quantize(f.in, f.out, NULL,
                                         (shardnet_quantize_report *)&old),
                 SHARDNET_OK, "%s", shardnet_last_error());
    cr_assert_eq(old.converted, 2);
    cr_assert_eq(old.canary, 12345);
    rm_tmpdir(f.dir);
}
