#!/bin/sh
# Replicated stages (issue 17): a pipeline whose stage runs on several
# devices taking micro-batches in turn (PipeDream's "2-1") against every
# one-device-per-stage cut, on a model whose first layer dominates.
#
#   tools/bench-replicated.sh BUILDDIR [ROUNDS] [BATCH]
#
# The model (written here with Python's onnx and numpy, $PYTHON or
# python3): x [N, 16, 32, 32] -> Conv 16->64 3x3 + Relu ->
# GlobalAveragePool -> Gemm 64->10: the convolution is 99% of the work
# (19 MFLOP an image, on a 37 kB weight).  A layer split cannot cut a
# node, so its slowest stage is that convolution whatever the devices;
# replicating the stage that holds it shares it.
#
# On three simulated one-core sockets (HWLOC_SYNTHETIC pack:3: cpu:0,
# cpu:1, cpu:2) and, where the host has only two cores, also on two
# (pack:2: cpu:0, cpu:1), each round runs, interleaved: cpu:0 alone, the
# layer split ("1-1-1": its planner's cuts, then every other cut of the
# model's four live nodes), the replicated splits "2-1" and "3" (and
# "2" on two sockets), and auto; each `shardnet run -r 15`
# median, then the median over rounds.  ROUNDS 5, BATCH 64 by default.
set -eu
b=${1:-.}
rounds=${2:-5}
batch=${3:-64}
bin=$b/shardnet
[ -x "$bin" ] || { echo "bench-replicated: build $bin first"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/shardnet-replicated.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
model=$tmp/first_heavy.onnx
${PYTHON:-python3} - "$model" <<'EOF'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(17)
w = (rng.uniform(-1, 1, (64, 16, 3, 3)) / 12).astype(np.float32)
fc = (rng.uniform(-1, 1, (10, 64)) / 8).astype(np.float32)
inits = [numpy_helper.from_array(w, "w"),
         numpy_helper.from_array(np.zeros(64, np.float32), "b"),
         numpy_helper.from_array(fc, "fc"),
         numpy_helper.from_array(np.zeros(10, np.float32), "fcb")]
nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("GlobalAveragePool", ["r"], ["p"]),
         helper.make_node("Flatten", ["p"], ["f"]),
         helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"], transB=1)]
g = helper.make_graph(
    nodes, "first_heavy",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16, 32, 32])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])],
    inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.save(m, sys.argv[1])
EOF
log=$tmp/log
# one TAG PACKAGES DEVICES SPLIT|plan:REPLICAS|cuts:CUTS: one line
# "TAG ms".
one() {
    tag=$1 pk=$2 devices=$3 how=$4
    case $how in
    plan:*)
        printf 'split replicated\ndevices %s\nreplicas %s\n' "$devices" \
            "${how#plan:}" >"$tmp/plan"
        set -- --plan "$tmp/plan"
        ;;
    cuts:*)
        printf 'split layer\ndevices %s\ncuts %s\n' "$devices" \
            "${how#cuts:}" >"$tmp/plan"
        set -- --plan "$tmp/plan"
        ;;
    *) set -- -s "$how" ;;
    esac
    env HWLOC_SYNTHETIC="pack:$pk core:1 pu:1" HWLOC_THISSYSTEM=1 \
        POCL_DEVICES="pthread pthread" POCL_MAX_PTHREAD_COUNT=1 \
        "$bin" run "$model" -d "$devices" -b "$batch" -r 15 "$@" 2>&1 |
        awk -v t="$tag" '/latency per run/ { ms = $5 }
            END { print t, (ms == "" ? "failed" : ms) }' >>"$log"
}
r=1
while [ "$r" -le "$rounds" ]; do
    one "3sock none(cpu:0)" 3 cpu:0 none
    one "3sock layer(1-1-1)" 3 cpu:0,cpu:1,cpu:2 layer
    one "3sock layer-cuts-1,2" 3 cpu:0,cpu:1,cpu:2 cuts:1,2
    one "3sock layer-cuts-1,3" 3 cpu:0,cpu:1,cpu:2 cuts:1,3
    one "3sock layer-cuts-2,3" 3 cpu:0,cpu:1,cpu:2 cuts:2,3
    one "3sock replicated-2-1" 3 cpu:0,cpu:1,cpu:2 plan:2-1
    one "3sock replicated-3" 3 cpu:0,cpu:1,cpu:2 plan:3
    one "3sock auto" 3 cpu:0,cpu:1,cpu:2 auto
    one "2sock none(cpu:0)" 2 cpu:0 none
    one "2sock layer(1-1)" 2 cpu:0,cpu:1 layer
    one "2sock replicated-2" 2 cpu:0,cpu:1 plan:2
    one "2sock auto" 2 cpu:0,cpu:1 auto
    r=$((r + 1))
done
echo "batch $batch, $rounds rounds; median over rounds of each run's median latency"
awk '{ k = $1 " " $2; v[k] = v[k] " " $3; if (!(k in seen)) { seen[k] = 1; key[++n] = k } }
    END { for (i = 1; i <= n; i++) {
        k = key[i]; c = split(v[k], a, " ")
        for (x = 1; x <= c; x++) for (y = x + 1; y <= c; y++)
            if (a[y] + 0 < a[x] + 0) { t = a[x]; a[x] = a[y]; a[y] = t }
        printf "%-26s %9.3f ms   (%s)\n", k, a[int((c + 1) / 2)], v[k] } }' \
    "$log"
# What the planner says (the estimates and auto's choice).
for pk in 3 2; do
    echo "plan on $pk sockets:"
    env HWLOC_SYNTHETIC="pack:$pk core:1 pu:1" HWLOC_THISSYSTEM=1 \
        POCL_DEVICES="pthread pthread" POCL_MAX_PTHREAD_COUNT=1 \
        "$bin" plan "$model" -d "$(seq -s, -f 'cpu:%g' 0 $((pk - 1)))" \
        -b "$batch" |
        grep -E '^(none|layer over|replicated|data over|tensor over|choice|measured)'
done
