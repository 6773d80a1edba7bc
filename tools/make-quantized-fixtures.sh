#!/bin/sh
# ONNX Runtime's outputs on the models `shardnet quantize` writes, stored in
# tests/fixtures/ for tests/test_quantize.sh (CI has no ONNX Runtime): the
# Fashion-MNIST MLP as int8 (per tensor and per column) and fp16, the small
# transformer as int4 (MatMulNBits) and int8 per column.  shardnet quantize
# is deterministic, so the files CI writes are the ones run here.
#   tools/make-quantized-fixtures.sh BUILDDIR
# Needs `cd tools && npm install --ignore-scripts` (onnxruntime-node).
set -eu
b=${1:-.}
src=$(cd "$(dirname "$0")/.." && pwd)
fx=$src/tests/fixtures
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
one() { # NAME MODEL INPUT_NAME INPUT FLAGS...
    name=$1 model=$2 iname=$3 input=$4
    shift 4
    "$b/shardnet" quantize "$fx/$model.onnx" "$dir/$name.onnx" "$@"
    mkdir -p "$dir/$name"
    node "$src/tools/ort_run.js" "$dir/$name.onnx" "$dir/$name" \
        "$iname=$fx/$input"
    cp "$dir/$name"/*.npy "$fx/${name}_ort.npy"
    echo "wrote $fx/${name}_ort.npy"
}
one fashion_mlp_int8 fashion_mlp input fashion_mlp_input.npy --weights int8
one fashion_mlp_int8pc fashion_mlp input fashion_mlp_input.npy --per-channel
one fashion_mlp_fp16 fashion_mlp input fashion_mlp_input.npy --weights fp16
one small_transformer_int4 small_transformer input \
    small_transformer_input.npy --weights int4
one small_transformer_int8pc small_transformer input \
    small_transformer_input.npy --per-channel
