#!/bin/sh
# Steadiness of one device's speed across processes (issue 13, point 8):
# PROCS processes in a row (default 10), each `shardnet run MODEL
# --repeat 20 -b 100` on the machine as it is (no simulated topology);
# print each process's median latency, then the spread of the medians
# ((max - min) / min).
#
# The machine itself is checked around each process: tools/bench_cores
# times vector multiply-adds on one core, then on all of them at once.  On
# a virtual machine whose vCPUs now and then share one physical core (the
# 2-core development machine does, in spells), all cores together run at
# one core's speed (ratio near 2), and so does shardnet.  A process with
# such a check before or after it is marked "cores shared" and printed, but
# left out of the spread; the run goes on until PROCS processes had
# independent cores (at most 3 x PROCS processes).  The check passes
# (exit 0) when that spread is under LIMIT percent (default 15).
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
make -C "$b" tools/bench_cores >/dev/null
# ratio: how many times as long all cores together took as one alone now.
ratio() {
    "$b/tools/bench_cores" | awk '{ print $NF }'
}
meds= all= clean=0 i=1
while [ "$clean" -lt "$procs" ] && [ "$i" -le $((3 * procs)) ]; do
    before=$(ratio)
    m=$("$b/shardnet" run "$model" -d "$devices" --repeat 20 -b 100 |
        sed -n 's/^latency per run: median \([0-9.]*\) ms.*/\1/p')
    after=$(ratio)
    if [ -z "$m" ]; then
        echo "bench-steady: process $i printed no median" >&2
        exit 1
    fi
    all="$all $m"
    cores="cores together ${before}x before, ${after}x after"
    if echo "$before $after" | awk '{ exit !($1 >= 1.5 || $2 >= 1.5) }'; then
        echo "process $i: median $m ms ($cores: shared; left out)"
    else
        echo "process $i: median $m ms ($cores)"
        meds="$meds $m"
        clean=$((clean + 1))
    fi
    i=$((i + 1))
done
spread() {
    echo "$2" | awk -v what="$1" -v limit="$limit" '{
        lo = hi = $1
        for (i = 2; i <= NF; i++) { if ($i < lo) lo = $i; if ($i > hi) hi = $i }
        spread = 100 * (hi - lo) / lo
        printf "%s: %d medians from %.3f to %.3f ms: spread %.1f%% (limit %s%%)\n",
               what, NF, lo, hi, spread, limit
        exit spread >= limit }'
}
spread "every process" "$all" || :
if [ "$clean" -lt "$procs" ]; then
    echo "bench-steady: only $clean of $((i - 1)) processes ran on" \
        "independent cores" >&2
    exit 1
fi
spread "processes on independent cores" "$meds"
