#!/bin/sh
# Steadiness of one device's speed across processes (issue 13, point 8):
# PROCS processes in a row (default 10), each `shardnet run MODEL
# --repeat 20 -b 100` on the machine as it is (no simulated topology),
# print each process's median latency, then the spread of the medians
# ((max - min) / min).  The check passes (exit 0) when the spread is under
# LIMIT percent (default 15).
# Usage: bench-steady.sh [BUILDDIR [MODEL [DEVICES]]]
#   PROCS=10 LIMIT=15 tools/bench-steady.sh . tests/fixtures/fashion_mlp.onnx cpu:0
set -eu
b=${1:-.}
here=$(cd "$(dirname "$0")/.." && pwd)
model=${2:-$here/tests/fixtures/fashion_mlp.onnx}
devices=${3:-cpu:0}
procs=${PROCS:-10}
limit=${LIMIT:-15}
unset HWLOC_SYNTHETIC HWLOC_THISSYSTEM HWLOC_XMLFILE POCL_DEVICES \
    POCL_MAX_PTHREAD_COUNT SHARDNET_CPU_THREADS
meds=
i=1
while [ "$i" -le "$procs" ]; do
    m=$("$b/shardnet" run "$model" -d "$devices" --repeat 20 -b 100 |
        sed -n 's/^latency per run: median \([0-9.]*\) ms.*/\1/p')
    if [ -z "$m" ]; then
        echo "bench-steady: process $i printed no median" >&2
        exit 1
    fi
    echo "process $i: median $m ms"
    meds="$meds $m"
    i=$((i + 1))
done
echo "$meds" | awk -v limit="$limit" '{
    lo = hi = $1
    for (i = 2; i <= NF; i++) { if ($i < lo) lo = $i; if ($i > hi) hi = $i }
    spread = 100 * (hi - lo) / lo
    printf "medians from %.3f to %.3f ms: spread %.1f%% (limit %s%%)\n",
           lo, hi, spread, limit
    exit spread >= limit }'
