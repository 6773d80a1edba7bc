#!/bin/sh
# A big model's first run against its later runs (issue 16): the first
# run (planning from the device profiles, uploading or mapping the
# weights, packing them) should cost at most twice a later run plus the
# time to read the model's file once.  "First" is from the load to the
# end of the first run: the model's load, the session (planning, weights
# uploaded or mapped) and the run (packing, where it packs).  tools/make_big_model's MLP of eight
# 4096 x 4096 Gemm layers (537 MB, external data) is run with its file
# dropped from the page cache before each round: tests/test_memory
# (TEST_MEMORY_COLD=1) times a read of the file from the disk, drops it
# again, then loads the model and runs it twice.  Splits: none on cpu:0, a
# tensor and a layer split over cpu:0,cpu:1 (two sockets: simulated
# unless the machine has them); rounds interleave them, the table gives
# medians over rounds, the ratio's of each round's own first / (2 x
# later + read): the disk's speed varies from round to round.
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
            awk -v s="$split" '/^(first_total_s|second_run_s|cold_read_s) / {
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
{
    vals[$1 " " $2] = vals[$1 " " $2] " " $3
    got[$1 " " $2] = $3
    if ($2 == "cold_read_s") # the last line of a round of one split
        vals[$1 " ratio"] = vals[$1 " ratio"] " " \
            got[$1 " first_total_s"] / (2 * got[$1 " second_run_s"] + $3)
}
END {
    printf "%-7s %10s %10s %10s %24s\n", "split", "read (s)", "first (s)",
           "later (s)", "first/(2 later+read)"
    for (k = 1; k <= 3; k++) {
        s = k == 1 ? "none" : k == 2 ? "tensor" : "layer"
        printf "%-7s %10.3f %10.3f %10.3f %24.2f\n", s,
               median(s " cold_read_s"), median(s " first_total_s"),
               median(s " second_run_s"), median(s " ratio")
    }
}' "$log"
