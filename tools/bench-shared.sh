#!/bin/sh
# Splits over devices that share the machine (issue 17): what "auto" and
# "data" measure against the best single device.
#
#   tools/bench-shared.sh BUILDDIR [ROUNDS]
#
#  1. auto over cpu:0,cl:0 on the machine as it is (no simulated hwloc,
#     PoCL as it comes: its device computes on the same cores as cpu:0)
#     against the best of cpu:0 and cl:0 alone, for every fixture model
#     at batch 1, 64 and 1024, with what auto runs: tools/bench_auto, one
#     process for all (7 x ROUNDS rounds of 10 runs each, interleaved, the
#     sessions made anew each round, the median run);
#  2. the data split of the Fashion-MNIST MLP at batch 1024 against one
#     device: over two simulated one-core sockets (cpu:0,cpu:1 against
#     cpu:0) and over cpu:0,cl:0 on the machine as it is (against cpu:0),
#     from `shardnet plan` (the median of 9 runs after a first one),
#     rounds interleaving the columns, medians over rounds.
# Ratios are the one device's time over the split's (above 1: the split
# is faster).
#
# About 10 minutes with 3 rounds on this project's 2-core host.
set -eu
b=${1:-.}
rounds=${2:-3}
bin=$b/shardnet
fix=$(cd "$(dirname "$0")/.." && pwd)/tests/fixtures
[ -x "$bin" ] || { echo "bench-shared: build $bin first"; exit 1; }
[ -x "$b/tools/bench_auto" ] || make -C "$b" tools/bench_auto >/dev/null
log=$(mktemp "${TMPDIR:-/tmp}/shardnet-shared.XXXXXX")
trap 'rm -f "$log"' EXIT
native() {
    env -u HWLOC_SYNTHETIC -u HWLOC_THISSYSTEM -u POCL_DEVICES \
        -u POCL_MAX_PTHREAD_COUNT "$@"
}
simulated() {
    env HWLOC_SYNTHETIC="pack:2 core:1 pu:1" HWLOC_THISSYSTEM=1 \
        POCL_DEVICES="pthread pthread" POCL_MAX_PTHREAD_COUNT=1 "$@"
}
# plan TAG WHERE MODEL DEVICES BATCH [SPLIT]: one line "TAG ms choice".
plan() {
    tag=$1 where=$2 model=$3 devices=$4 batch=$5 split=${6:-}
    $where "$bin" plan "$fix/$model" -d "$devices" -b "$batch" \
        ${split:+-s "$split"} 2>&1 |
        awk -v t="$tag" '/^choice: / { c = $2 }
            /median of/ { for (i = 1; i <= NF; i++) if ($i == "runs") ms = $(i + 1) }
            END { print t, (ms == "" ? "failed" : ms), (c == "" ? "-" : c) }' \
            >>"$log"
}
r=1
while [ "$r" -le "$rounds" ]; do
    plan "sim-one" simulated fashion_mlp.onnx cpu:0 1024
    plan "sim-data" simulated fashion_mlp.onnx cpu:0,cpu:1 1024 data
    plan "nat-one" native fashion_mlp.onnx cpu:0 1024
    plan "nat-data" native fashion_mlp.onnx cpu:0,cl:0 1024 data
    r=$((r + 1))
done
median() { sort -n | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : 0 }'; }
pick() { grep "^$1 " "$log" | awk '{ print $(NF - 1) }' | median; }
native "$b/tools/bench_auto" cpu:0,cl:0 $((7 * rounds)) 10 \
    "$fix/fashion_mlp.onnx" "$fix/small_cnn.onnx" "$fix/small_transformer.onnx"
echo
echo "data split, Fashion-MNIST MLP at batch 1024 (medians of $rounds rounds)"
echo "| devices | one device ms | data ms | ratio |"
echo "|---|---|---|---|"
for pair in "sim two simulated sockets (cpu:0,cpu:1 vs cpu:0)" \
            "nat cpu:0,cl:0 as it is (vs cpu:0)"; do
    tag=${pair%% *} what=${pair#* }
    awk -v w="$what" -v o="$(pick "$tag-one")" -v d="$(pick "$tag-data")" \
        'BEGIN { printf "| %s | %.3f | %.3f | %.2f |\n", w, o, d,
                 (d > 0 ? o / d : 0) }'
done
