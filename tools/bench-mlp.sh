#!/bin/sh
# The Fashion-MNIST MLP on cpu:0 with 1 and 2 threads (or on DEVICE, where
# the threads are ONNX Runtime's only) at batch 1, 64 and 1024, next to
# ONNX Runtime's CPU library (npm onnxruntime-node) on the same inputs'
# shapes, in one run.  Usage: bench-mlp.sh BUILDDIR [SECONDS [DEVICE]]
# The ORT side needs `cd tools && npm install --ignore-scripts` once, or
# Python's onnxruntime (tools/bench_ort.py), where there is no node.
set -eu
b=${1:-.}
secs=${2:-2}
dev=${3:-cpu:0}
src=$(cd "$(dirname "$0")/.." && pwd)
model=$src/tests/fixtures/fashion_mlp.onnx
ours=$(mktemp)
trap 'rm -f "$ours"' EXIT

echo "== shardnet, $dev (median latency of a run of one batch)"
for t in 1 2; do
    for batch in 1 64 1024; do
        # About $secs seconds of runs, judged from a first short run.
        reps=$(SHARDNET_CPU_THREADS=$t "$b/shardnet" run "$model" -d "$dev" \
                   -b "$batch" -r 20 |
               awk -v s="$secs" '/latency/ { ms = $5; r = int(s * 1000 / ms);
                   print (r < 20 ? 20 : (r > 20000 ? 20000 : r)) }')
        if [ -z "$reps" ]; then
            echo "bench-mlp: shardnet run on $dev failed (above)" >&2
            exit 1
        fi
        SHARDNET_CPU_THREADS=$t "$b/shardnet" run "$model" -d "$dev" \
            -b "$batch" -r "$reps" |
        awk -v t="$t" -v batch="$batch" '/latency/ { ms = $5 }
            END { printf "shardnet threads %d batch %5d %9.4f ms %12.0f images/s\n",
                  t, batch, ms, batch / ms * 1000 }' | tee -a "$ours"
    done
done

echo
ort=$(mktemp)
trap 'rm -f "$ours" "$ort"' EXIT
if [ -d "$src/tools/node_modules/onnxruntime-node" ] && command -v node >/dev/null; then
    echo "== ONNX Runtime (onnxruntime-node), same shapes"
    node "$src/tools/bench_ort.js" "$model" --batch 1,64,1024 --threads 1,2 \
        --input-dim 784 --seconds "$secs" | tee "$ort"
elif python3 -c 'import onnxruntime, numpy' 2>/dev/null; then
    echo "== ONNX Runtime (Python's onnxruntime: no onnxruntime-node here), same shapes"
    python3 "$src/tools/bench_ort.py" "$model" --batch 1,64,1024 --threads 1,2 \
        --input-dim 784 --seconds "$secs" | tee "$ort"
else
    echo "== ONNX Runtime: skipped, neither onnxruntime-node (cd tools && npm install --ignore-scripts) nor Python's onnxruntime is installed"
    exit 0
fi

echo
echo "== images/s, shardnet / ONNX Runtime"
awk 'FNR == NR { if ($1 == "shardnet") ours[$3 " " $5] = $(NF - 1); next }
     /threads/ && /batch/ {
         for (i = 1; i <= NF; i++) { if ($i == "threads") t = $(i + 1);
                                     if ($i == "batch") bt = $(i + 1) }
         for (i = 1; i <= NF; i++) if ($(i + 1) == "images/s") v = $i
         k = t " " bt
         if (k in ours) printf "threads %s batch %5s: shardnet %9.0f  ORT %9.0f  ratio %.2f\n",
                               t, bt, ours[k], v, ours[k] / v }' "$ours" "$ort"
