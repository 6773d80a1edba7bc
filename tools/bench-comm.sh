#!/bin/sh
# What --comm saves between two MPI processes (lib/comm/codec.h): the
# fashion MLP at batch 1024 (or $1, $2), tensor, layer and data splits
# over 0/cpu:0,1/cpu:0, each codec's time per run (median of interleaved
# rounds) and the bytes both processes sent per run.  The plans are made
# once (shardnet plan --save) and used for every codec, so that the same
# values cross.
#   tools/bench-comm.sh [BUILD] [MODEL] [BATCH] [ROUNDS] [RUNS]
set -eu
b=${1:-.}
m=${2:-$(dirname "$0")/../tests/fixtures/fashion_mlp.onnx}
batch=${3:-1024} rounds=${4:-15} runs=${5:-20}
d=0/cpu:0,1/cpu:0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for s in tensor layer data; do
    mpirun -np 2 "$b/shardnet" plan "$m" -d "$d" -s "$s" -b "$batch" \
        --save "$tmp/$s" >/dev/null 2>&1
done
mpirun -np 2 "$b/tools/bench_comm" "$m" "$batch" "$rounds" "$runs" "$d" \
    "$tmp/tensor" "$tmp/layer" "$tmp/data"
