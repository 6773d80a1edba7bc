#!/bin/sh
# Batch 1 on a model that matters (issue 16): tools/make_big_model's MLP of
# eight 4096 x 4096 Gemm layers, its weights as fp32 (537 MB), as int8
# with a scale per output column (134 MB), as MatMulNBits' uint4 in
# blocks of 32 (84 MB) and as fp16 (268 MB), run on cpu:0 at batch 1,
# next to the memory read bandwidth measured by tools/bench_membw (over a
# buffer of the model's size) right before each run, and ONNX Runtime
# (npm onnxruntime-node) on the same files.
# Rounds interleave every measurement; the table gives medians over rounds.
#
#   tools/bench-big.sh BUILDDIR [ROUNDS] [LAYERS] [WIDTH]
#
# The models are written to a temporary folder (1.1 GB) and removed.
# Needs `make tools/bench_membw tools/make_big_model` in BUILDDIR, and for
# the ONNX Runtime column `cd tools && npm install --ignore-scripts`.
set -eu
b=${1:-.}
rounds=${2:-5}
layers=${3:-8}
width=${4:-4096}
src=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/shardnet-big.XXXXXX")
trap 'rm -rf "$dir"' EXIT
for prog in tools/bench_membw tools/make_big_model shardnet; do
    [ -x "$b/$prog" ] || { echo "bench-big: build $b/$prog first"; exit 1; }
done
"$b/tools/make_big_model" "$dir/fp32.onnx" --layers "$layers" --width "$width"
"$b/tools/make_big_model" "$dir/int8.onnx" --layers "$layers" --width "$width" \
    --weights int8
"$b/tools/make_big_model" "$dir/int4.onnx" --layers "$layers" --width "$width" \
    --weights int4
"$b/tools/make_big_model" "$dir/fp16.onnx" --layers "$layers" --width "$width" \
    --weights fp16
ort=0
[ -d "$src/tools/node_modules/onnxruntime-node" ] && ort=1
threads=$(nproc)

log=$dir/log
: >"$log"
r=1
while [ "$r" -le "$rounds" ]; do
    for m in fp32 int8 int4 fp16; do
        # the bandwidth right before and right after each run, over a
        # buffer of the model's size (the host gave a 128 MB buffer 53 to
        # 55 GB/s where 512 MB got 49 to 51): it moves between about 50
        # and 90 GB/s, at times within seconds
        mb=$(( $(stat -c %s "$dir/$m.onnx") / 1000000 + 1 ))
        "$b/tools/bench_membw" "$mb" 5 |
            awk -v m="$m" '{ print "bw", $4; print "bw_" m, $4 }' >>"$log"
        "$b/shardnet" run "$dir/$m.onnx" -d cpu:0 -r 40 |
            awk -v m="$m" '/latency/ { print "sn_" m, $5 }' >>"$log"
        "$b/tools/bench_membw" "$mb" 5 |
            awk -v m="$m" '{ print "after_" m, $4 }' >>"$log"
        if [ "$ort" = 1 ]; then
            node "$src/tools/bench_ort.js" "$dir/$m.onnx" --batch 1 \
                --threads "$threads" --input-dim "$width" --seconds 2 |
                awk -v m="$m" '/median/ { print "ort_" m, $6 }' >>"$log"
        fi
    done
    echo "round $r of $rounds done" >&2
    r=$((r + 1))
done

wbytes() { # the weights' bytes of a model: its file less the graph
    stat -c %s "$dir/$1.onnx"
}
median() { # the median of the values of key $1 in the log
    awk -v k="$1" '$1 == k { print $2 }' "$log" | sort -g | awk '
        { v[NR] = $1 }
        END { if (NR % 2) print v[(NR + 1) / 2]
              else if (NR) print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
bw=$(median bw)
echo
echo "MLP of $layers x ${width}x$width Gemm layers, batch 1 on cpu:0 ($threads threads), medians of $rounds rounds"
echo "memory read bandwidth (tools/bench_membw over a buffer of the model's size, the best of its"
echo "  three ways of reading, right before each run): $bw GB/s (median)"
echo "\"of measured\": the median over rounds of each run's rate over the bandwidth measured around it,"
echo "  counting only the rounds whose bandwidth before and after the run agree within 10% (\"steady\")"
printf '%-6s %8s %12s %14s %9s %12s %7s %10s\n' weights MB "shardnet ms" "shardnet GB/s" "bw GB/s" "of measured" steady "ORT ms"
for m in fp32 int8 int4 fp16; do
    ms=$(median "sn_$m")
    ortms=$( [ "$ort" = 1 ] && median "ort_$m" || echo "-")
    # each steady round's own ratio, in the log's order (bw_m, sn_m,
    # after_m); its count after the median
    share=$(awk -v m="$m" -v bytes="$(wbytes "$m")" '
        $1 == "bw_" m { bw = $2 }
        $1 == "sn_" m { t = $2 }
        $1 == "after_" m && bw > 0 && $2 > 0.9 * bw && $2 < bw / 0.9 {
            print bytes / (t / 1000) / 1e9 / ((bw + $2) / 2) }' \
        "$log" | sort -g | awk '{ v[NR] = $1 }
        END { if (NR % 2) print v[(NR + 1) / 2], NR
              else if (NR) print (v[NR / 2] + v[NR / 2 + 1]) / 2, NR
              else print 0, 0 }')
    awk -v m="$m" -v bytes="$(wbytes "$m")" -v ms="$ms" \
        -v bw="$(median "bw_$m")" -v share="$share" -v o="${ortms:--}" \
        -v rounds="$rounds" 'BEGIN {
        gbs = bytes / (ms / 1000) / 1e9
        split(share, sh, " ")
        printf "%-6s %8.1f %12.3f %14.1f %9.1f %11.0f%% %3d of %d %10s\n",
               m, bytes / 1e6, ms, gbs, bw, 100 * sh[1], sh[2], rounds, o }'
done
