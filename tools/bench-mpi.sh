#!/bin/sh
# Two MPI processes of one core each against one process with two cpu
# devices: the Fashion-MNIST MLP at batch 1024 split by layer and by
# tensor, per batch, and by layer as a stream of batches, interleaved
# ROUNDS times (medians); then a trace of the layer split (one file per
# process) and where its time goes.
# Usage: bench-mpi.sh BUILDDIR [ROUNDS]
set -eu
b=${1:-.}
rounds=${2:-5}
src=$(cd "$(dirname "$0")/.." && pwd)
model=$src/tests/fixtures/fashion_mlp.onnx
export HWLOC_SYNTHETIC="pack:2 core:1 pu:1" HWLOC_THISSYSTEM=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun="mpirun --oversubscribe"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

one="$b/shardnet run $model -d cpu:0,cpu:1 -b 1024 -r 40"
two="$mpirun -np 2 $b/shardnet run $model -d 0/cpu:0,1/cpu:1 -b 1024 -r 40"
for r in $(seq "$rounds"); do
    for s in layer tensor; do
        $one -s $s | awk '/latency/ { print $5 }' >>"$tmp/one-$s"
        $two -s $s | awk '/latency/ { print $5 }' >>"$tmp/two-$s"
    done
    $one -s layer --stream | awk '/^stream:/ { print $(NF - 3) }' >>"$tmp/one-s"
    $two -s layer --stream | awk '/^stream:/ { print $(NF - 3) }' >>"$tmp/two-s"
done
echo "== MLP, batch 1024: one process with cpu:0,cpu:1 against two MPI"
echo "   processes with one core each (0/cpu:0, 1/cpu:1); ratio > 1: two faster"
printf "  %-34s %10s %10s %8s\n" "" "1 process" "2 ranks" "ratio"
for k in layer tensor s; do
    a=$(median <"$tmp/one-$k") c=$(median <"$tmp/two-$k")
    label="$k split, ms per run (median)"
    [ "$k" = s ] && label="layer, ms per batch, streamed"
    awk -v a="$a" -v c="$c" -v label="$label" 'BEGIN {
        printf "  %-34s %8.3f ms %7.3f ms %8.2f\n", label, a, c, a / c }'
done
# Where the time goes: each stage's busy time per micro-batch, its kernels,
# and what the rest is (hand-offs: a copy in one process, MPI between two).
$one -s layer -r 10 --trace "$tmp/one.json" >/dev/null
$two -s layer -r 10 --trace "$tmp/two.json" >/dev/null
for f in "$tmp/one.json" "$tmp/two.json" "$tmp/two.json.1"; do
    [ -f "$f" ] || continue
    awk -v name="$(basename "$f")" '
        /"ph":"X"/ {
            tid = $0; sub(/.*"tid":/, "", tid); sub(/,.*/, "", tid)
            cat = $0; sub(/.*"cat":"/, "", cat); sub(/".*/, "", cat)
            ts = $0; sub(/.*"ts":/, "", ts); sub(/,.*/, "", ts)
            d = $0; sub(/.*"dur":/, "", d); sub(/[^0-9.].*/, "", d)
            if (cat == "micro-batch") { n++; mt[n] = tid; m0[n] = ts + 0;
                                        m1[n] = ts + d; mb += d }
            if (cat == "kernel") { nk++; kt[nk] = tid; k0[nk] = ts + 0;
                                   kd[nk] = d + 0 } }
        END {
            for (i = 1; i <= nk; i++)
                for (j = 1; j <= n; j++)
                    if (kt[i] == mt[j] && k0[i] >= m0[j] && k0[i] < m1[j]) {
                        k += kd[i]; break }
            if (n) printf "  trace %-10s %3d micro-batches: %.1f us each: " \
                          "kernels %.1f us, hand-offs %.1f us\n",
                          name, n, mb / n, k / n, (mb - k) / n }' "$f"
done
