#!/bin/sh
# Splits on two simulated sockets of one core each: the Fashion-MNIST MLP
# at batch 1024 and the transformer block at batch 64 (and 256), run on one
# socket, split by layer and split by tensor, interleaved ROUNDS times; the
# medians of each run's median latency, the speed-ups over one socket, the
# layer split against the bound of its best cut, and the planner's estimate
# of each plan next to its measured time.  Also the batches as a stream
# (shardnet run --stream): one socket, and the layer split, which then
# overlaps consecutive batches (throughput, not one batch's latency).
# Usage: bench-split.sh BUILDDIR [ROUNDS]
set -eu
b=${1:-.}
rounds=${2:-3}
src=$(cd "$(dirname "$0")/.." && pwd)
export HWLOC_SYNTHETIC="pack:2 core:1 pu:1" HWLOC_THISSYSTEM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

for case in "fashion_mlp 1024 40" "small_transformer 64 100" \
            "small_transformer 256 40"; do
    set -- $case
    model=$src/tests/fixtures/$1.onnx batch=$2 reps=$3
    echo "== $1, batch $batch, two sockets of one core"
    for r in $(seq "$rounds"); do
        for s in none layer tensor; do
            d=cpu:0,cpu:1
            [ "$s" = none ] && d=cpu:0
            "$b/shardnet" run "$model" -d "$d" -s "$s" -b "$batch" \
                -r "$reps" | awk '/latency/ { print $5 }' >>"$tmp/$s"
        done
        # Streams: the batches back to back; a layer split overlaps them.
        for s in none layer; do
            d=cpu:0,cpu:1
            [ "$s" = none ] && d=cpu:0
            "$b/shardnet" run "$model" -d "$d" -s "$s" -b "$batch" \
                -r "$reps" --stream |
                awk '/^stream:/ { print $(NF - 3) }' >>"$tmp/$s-stream"
        done
    done
    for s in none layer tensor none-stream layer-stream; do
        median <"$tmp/$s" >"$tmp/$s.med"
    done
    # The planner: estimates (per-node times measured on each device) and
    # the best layer cut's bound: one socket's time over the slowest stage.
    "$b/shardnet" plan "$model" -d cpu:0,cpu:1 -s layer -b "$batch" \
        >"$tmp/plan"
    awk -v none="$(cat "$tmp/none.med")" -v layer="$(cat "$tmp/layer.med")" \
        -v tensor="$(cat "$tmp/tensor.med")" -v batch="$batch" \
        -v snone="$(cat "$tmp/none-stream.med")" \
        -v slayer="$(cat "$tmp/layer-stream.med")" '
        /^none on cpu:0: estimated/ { e_none = $5 }
        /^layer stage/ { for (i = 1; i <= NF; i++) if ($i == "estimated")
                             if ($(i + 1) > worst) worst = $(i + 1) }
        /^layer over/ { for (i = 1; i <= NF; i++) if ($i == "estimated")
                            e_layer = $(i + 1) }
        /^tensor over/ { for (i = 1; i <= NF; i++) if ($i == "estimated")
                             e_tensor = $(i + 1) }
        END {
            printf "  %-7s %9s %12s %9s %10s %8s\n", "plan", "ms", "images/s",
                   "speed-up", "estimate", "off by"
            printf "  %-7s %9.3f %12.0f %9.2f %10.3f %+7.0f%%\n", "none",
                   none, batch / none * 1000, 1, e_none,
                   (e_none / none - 1) * 100
            printf "  %-7s %9.3f %12.0f %9.2f %10.3f %+7.0f%%\n", "layer",
                   layer, batch / layer * 1000, none / layer, e_layer,
                   (e_layer / layer - 1) * 100
            printf "  %-7s %9.3f %12.0f %9.2f %10.3f %+7.0f%%\n", "tensor",
                   tensor, batch / tensor * 1000, none / tensor, e_tensor,
                   (e_tensor / tensor - 1) * 100
            printf "  %-7s %9.3f %12.0f %9.2f   (streamed batches, ms per " \
                   "batch; one socket streamed: %.3f ms)\n", "layer-s",
                   slayer, batch / slayer * 1000, snone / slayer, snone
            bound = e_none / worst
            printf "  layer: best cut bounds the speed-up at %.2fx (planner" \
                   "'\''s stage times); measured %.2fx = %.0f%% of it, " \
                   "streamed %.2fx = %.0f%%\n",
                   bound, none / layer, none / layer / bound * 100,
                   snone / slayer, snone / slayer / bound * 100
        }' "$tmp/plan"
    rm -f "$tmp/none" "$tmp/layer" "$tmp/tensor" "$tmp/none-stream" \
        "$tmp/layer-stream"
    echo
done
