#!/bin/sh
# ONNX Runtime's logits for the fashion MLP quantized by `shardnet quantize`
# in each form, on tests/fixtures/fashion_mlp_input.npy:
# tests/fixtures/fashion_mlp_q_FORM_ort.npy, FORM int8, int8pc (per
# channel), int4 (blocks of 32) and fp16.  tests/test_quantize.sh quantizes
# the MLP the same way and compares shardnet's logits with these, so they
# must be made again when the quantizer's arithmetic changes.
#
# ONNX Runtime runs at graph optimisation level basic: at extended and above
# it turns DequantizeLinear + MatMul into its 8-bit MatMulNBits, which also
# quantizes the activations, and no longer computes what the model says.
#
# Usage, from the top of a built tree (cd tools && npm install
# --ignore-scripts first):  sh tools/make-quantized-fixtures.sh
set -eu
bin=${SHARDNET_BIN:-./shardnet}
fix=tests/fixtures
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for spec in int8: int8pc:--per-channel int4:--weights=int4 \
    fp16:--weights=fp16; do
    form=${spec%%:*} opt=${spec#*:}
    "$bin" quantize "$fix/fashion_mlp.onnx" "$tmp/$form.onnx" $opt
    mkdir "$tmp/$form"
    ORT_GRAPH_OPT=basic node tools/ort_run.js "$tmp/$form.onnx" "$tmp/$form" \
        "input=$fix/fashion_mlp_input.npy"
    cp "$tmp/$form/0.npy" "$fix/fashion_mlp_q_${form}_ort.npy"
done
