/*
 * The pass that keeps quantized weights small (issue 16): a MatMul or
 * Gemm whose weight is a DequantizeLinear of constant int8 or uint8
 * integers (the form `shardnet quantize` and ONNX Runtime's static
 * quantization write) becomes one QuantizedMatMul of the shardnet domain,
 * which reads the integers, the scales and the zero points as they are
 * stored (ops_qmatmul.c): the weight never exists as floats.
 *
 *   QuantizedMatMul(A, Q, scale, zero point or none, bias or none),
 *   attributes transB (Q holds N rows of K, Gemm's transB) and the
 *   activation a pass fused into the product.
 *
 * A Cast to float of a float16 or bfloat16 weight (`shardnet quantize
 * --weights fp16` writes one) becomes a QuantizedMatMul of the halves,
 * with neither scale nor zero point.
 *
 * The scale and zero point are per tensor, or per output column (the
 * DequantizeLinear's axis along N: 1 for [K, N], 0 for Gemm's transB
 * [N, K]); a Gemm must be the plain form (alpha = beta = 1, no transA,
 * C a vector over the columns).  Other products of the same dequantized
 * weight keep it (fold_constants leaves such a DequantizeLinear alone:
 * sn_pass_keeps_quantized), so it is dequantized on the device instead.
 * The result agrees with the float product of the dequantized weight to
 * rounding: the sums run in another order.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "passes/rewrite.h"

/* Does the DequantizeLinear dq's scale vary along the product's N? */
static int scale_fits(const sn_graph *g, const sn_node *dq, int trans_b)
{
    const sn_value *s = &g->values[dq->inputs[1]];
    const sn_value *x = &g->values[dq->inputs[0]];
    if (s->rank == 0 || (s->rank == 1 && s->dims[0] == 1))
        return 1; /* per tensor */
    const sn_attr *a = sn_node_attr(dq, "axis");
    int64_t axis = a ? a->i : 1;
    if (axis < 0)
        axis += 2;
    int n_axis = trans_b ? 0 : 1;
    return axis == n_axis && s->dims[0] == x->dims[n_axis];
}

/* The product p's bias input (a float vector over its n columns), -1 for
 * none, -2 when it has one of another form. */
static int bias_of(const sn_graph *g, const sn_node *p, int64_t n)
{
    int is_gemm = !strcmp(p->op_type, "Gemm");
    if (p->ninputs < 3 || p->inputs[2] < 0 ||
        (!is_gemm && !sn_node_attr(p, "bias")))
        return -1;
    const sn_value *c = &g->values[p->inputs[2]];
    if (c->dtype != SN_DT_FLOAT ||
        !((c->rank == 1 && c->dims[0] == n) ||
          (c->rank == 2 && c->dims[0] == 1 && c->dims[1] == n)))
        return -2;
    return p->inputs[2];
}

static int plain_gemm(const sn_node *p)
{
    const sn_attr *a;
    return (!(a = sn_node_attr(p, "transA")) || a->i == 0) &&
           (!(a = sn_node_attr(p, "alpha")) || a->f == 1.0f) &&
           (!(a = sn_node_attr(p, "beta")) || a->f == 1.0f);
}

shardnet_status sn_pass_quantized_products(sn_graph *g, size_t *fused)
{
    *fused = 0;
    for (size_t i = 0; i < g->nnodes; i++) {
        sn_node *p = &g->nodes[i];
        int is_gemm = sn_pass_is_op(p, "Gemm");
        if ((!is_gemm && !sn_pass_is_op(p, "MatMul")) || p->ninputs < 2 ||
            p->noutputs != 1 || (is_gemm && !plain_gemm(p)))
            continue;
        sn_node *dq = sn_pass_producer(g, p->inputs[1]);
        if (!sn_pass_keeps_quantized(g, dq))
            continue;
        const sn_attr *tb = is_gemm ? sn_node_attr(p, "transB") : NULL;
        int trans_b = tb && tb->i;
        const sn_value *x = &g->values[dq->inputs[0]];
        int cast = sn_pass_is_op(dq, "Cast");
        int bias = bias_of(g, p, x->dims[trans_b ? 0 : 1]);
        if (bias == -2 || (!cast && !scale_fits(g, dq, trans_b)))
            continue;
        int *in = malloc(5 * sizeof *in);
        char *op = strdup("QuantizedMatMul"), *dom = strdup("ai.shardnet");
        if (!in || !op || !dom) {
            free(in);
            free(op);
            free(dom);
            return sn_error(SHARDNET_OUT_OF_MEMORY, "quantized products");
        }
        in[0] = p->inputs[0];
        in[1] = dq->inputs[0];
        in[2] = cast ? -1 : dq->inputs[1];
        in[3] = !cast && dq->ninputs > 2 ? dq->inputs[2] : -1;
        in[4] = bias;
        free(p->inputs);
        p->inputs = in;
        p->ninputs = 5;
        free(p->op_type);
        p->op_type = op;
        free(p->domain);
        p->domain = dom;
        (*fused)++;
    }
    return SHARDNET_OK;
}
