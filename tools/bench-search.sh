#!/bin/sh
# The tensor split's strategy search against the rules' layout (issue 17):
# every fixture model, tensor-split over two simulated sockets, over the
# four simulated devices (two sockets and two PoCL devices) and over
# cpu:0,cl:0 on the machine as it is; and hybrid-split (the group stage's
# tensor split searched) over three simulated sockets and over cpu:0's
# halves and cl:0 on the machine as it is; run with
# SHARDNET_TENSOR_RULES=1 (the rules' layout) and without (searched),
# rounds interleaved, the median of `shardnet plan`'s 9 timed runs,
# medians over rounds; ratio = rules' time over the search's (1 or more:
# the search is not slower).  The estimates of both come from the
# search's own line (a hybrid's: its first group stage's, for a
# micro-batch).
#
#   tools/bench-search.sh BUILDDIR [ROUNDS] [BATCH]
#
# About 5 minutes with 3 rounds on this project's 2-core host.
set -eu
b=${1:-.}
rounds=${2:-3}
batch=${3:-64}
bin=$b/shardnet
fix=$(cd "$(dirname "$0")/.." && pwd)/tests/fixtures
[ -x "$bin" ] || { echo "bench-search: build $bin first"; exit 1; }
log=$(mktemp "${TMPDIR:-/tmp}/shardnet-search.XXXXXX")
trap 'rm -f "$log"' EXIT
# one TAG RULES sim|sim3|nat SPLIT DEVICES MODEL: one line "TAG ms
# rules_est search_est".
one() {
    tag=$1 rules=$2 where=$3 split=$4 devices=$5 model=$6
    if [ "$where" = sim ] || [ "$where" = sim3 ]; then
        set -- env HWLOC_SYNTHETIC="pack:$([ "$where" = sim ] && echo 2 || echo 3) core:1 pu:1" \
            HWLOC_THISSYSTEM=1 POCL_DEVICES="pthread pthread" \
            POCL_MAX_PTHREAD_COUNT=1
    else
        set -- env -u HWLOC_SYNTHETIC -u HWLOC_THISSYSTEM -u POCL_DEVICES \
            -u POCL_MAX_PTHREAD_COUNT
    fi
    "$@" SHARDNET_TENSOR_RULES="$rules" "$bin" plan "$fix/$model" \
        -d "$devices" -b "$batch" -s "$split" 2>&1 |
        awk -v t="$tag" -v how="$split" '
            /its last micro-batches. tensor split:$/ { stage = 1 }
            /^tensor strategies searched/ && (how == "tensor" ||
                                              (stage && r == "")) {
                for (i = 1; i <= NF; i++) {
                if ($i == "estimated") r = $(i + 1)
                if ($i == "search'"'"'s") s = $(i + 1) } }
            /median of/ { for (i = 1; i <= NF; i++) if ($i == "runs") ms = $(i + 1) }
            END { print t, (ms == "" ? "failed" : ms), (r == "" ? "-" : r),
                  (s == "" ? "-" : s) }' >>"$log"
}
sets="sim:tensor:cpu:0,cpu:1 sim:tensor:cpu:0,cpu:1,cl:0,cl:1
      nat:tensor:cpu:0,cl:0 sim3:hybrid:cpu:0,cpu:1,cpu:2
      nat:hybrid:cpu:0/2,cl:0"
r=1
while [ "$r" -le "$rounds" ]; do
    for model in fashion_mlp.onnx small_cnn.onnx small_transformer.onnx; do
        for set in $sets; do
            where=${set%%:*} rest=${set#*:}
            split=${rest%%:*} devices=${rest#*:}
            one "rules $model $set" 1 "$where" "$split" "$devices" "$model"
            one "search $model $set" 0 "$where" "$split" "$devices" "$model"
        done
    done
    r=$((r + 1))
done
median() { sort -n | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : 0 }'; }
col() { grep "^$1 " "$log" | awk -v c="$2" '{ print $(NF - 3 + c) }' | median; }
echo "batch $batch: the rules' layout against the searched one (medians of $rounds rounds)"
echo "| model | where:split:devices | rules ms | searched ms | ratio | estimates: rules / searched ms |"
echo "|---|---|---|---|---|---|"
for model in fashion_mlp.onnx small_cnn.onnx small_transformer.onnx; do
    for set in $sets; do
        ru=$(col "rules $model $set" 1)
        se=$(col "search $model $set" 1)
        er=$(col "search $model $set" 2)
        es=$(col "search $model $set" 3)
        awk -v m="$model" -v d="$set" -v a="$ru" -v b="$se" -v x="$er" \
            -v y="$es" 'BEGIN { printf "| %s | %s | %.3f | %.3f | %.2f | %s / %s |\n",
                m, d, a, b, (b > 0 ? a / b : 0), x, y }'
    done
done
