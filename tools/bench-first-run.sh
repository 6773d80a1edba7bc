#!/bin/sh
# A big model's first run against its later runs (issue 16): the first
# run (planning from the device profiles, uploading or mapping the
# weights, packing them) should cost at most twice a later run plus the
# time to read the model's file once.  tools/make_big_model's MLP of eight
# 4096 x 4096 Gemm layers (537 MB, external data) is run with its file
# dropped from the page cache before each round: tests/test_memory
# (TEST_MEMORY_COLD=1) times a read of the file from the disk, drops it
# again, then loads the model and runs it twice.  Splits: none on cpu:0, a
# tensor and a layer split over cpu:0,cpu:1 (two sockets: simulated
# unless the machine has them); rounds interleave them, the table gives
# medians over rounds and the ratio first / (2 x later + read).
#
#   tools/bench-first-run.sh BUILDDIR [ROUNDS]
#
# The model is written to a temporary folder (0.6 GB) and removed.  Needs
# `make tests/test_memory tools/make_big_model` in BUILDDIR.
set -eu
b=${1:-.}
rounds=${2:-5}
dir=$(mktemp -d "${TMPDIR:-/tmp}/shardnet-first.XXXXXX")
trap 'rm -rf "$dir"' EXIT
for prog in tests/test_memory tools/make_big_model; do
    [ -x "$b/$prog" ] || { echo "bench-first-run: build $b/$prog first"; exit 1; }
done
"$b/tools/make_big_model" "$dir/mlp.onnx" --external
log=$dir/log
: >"$log"
r=1
while [ "$r" -le "$rounds" ]; do
    for split in none tensor layer; do
        devices=cpu:0,cpu:1
        [ "$split" = none ] && devices=cpu:0
        TEST_MEMORY_COLD=1 "$b/tests/test_memory" "$dir/mlp.onnx" "$devices" \
            "$split" 100 1 |
            awk -v s="$split" '/^(first_run_s|second_run_s|cold_read_s) / {
                print s, $1, $2 }' >>"$log"
    done
    r=$((r + 1))
done
awk '
function median(key,   n, i, j, t, v) {
    n = split(vals[key], v, " ")
    for (i = 2; i <= n; i++)
        for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) {
            t = v[j]; v[j] = v[j - 1]; v[j - 1] = t
        }
    return n ? (n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2) : 0
}
{ vals[$1 " " $2] = vals[$1 " " $2] " " $3 }
END {
    printf "%-7s %12s %12s %12s %22s\n", "split", "read (s)", "first (s)",
           "later (s)", "first/(2 later+read)"
    for (k = 1; k <= 3; k++) {
        s = k == 1 ? "none" : k == 2 ? "tensor" : "layer"
        rd = median(s " cold_read_s"); f = median(s " first_run_s")
        l = median(s " second_run_s")
        printf "%-7s %12.3f %12.3f %12.3f %22.2f\n", s, rd, f, l,
               f / (2 * l + rd)
    }
}' "$log"
