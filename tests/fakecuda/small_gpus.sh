#!/bin/sh
# A model larger than one GPU, on fake GPUs of too little memory
# (SN_FAKE_CUDA_MEMORY, runtime.c): the Fashion-MNIST MLP (2.7 MB of
# weights, a batch of 256 images) on GPUs of 2.2 MB each.  One GPU alone
# must refuse it clearly (out of memory, naming the GPU, and saying what
# to try); a layer split
# over two, and the split the planner picks by itself, must run it and
# give the reference's answer, each stage holding its own layers'
# weights and a micro-batch's activations.  (Before the fake found it, a
# layer split planned for micro-batches ran the whole batch through its
# stages when no stage had a CPU device: deciding whether the rows may be
# cut uploaded the whole model to the first GPU, which could not hold it.)
#
# Usage: tests/fakecuda/small_gpus.sh BUILDDIR   (a fake CUDA build; run
# by tools/cuda-fake.sh)
set -u
b=${1:?usage: small_gpus.sh BUILDDIR}
src=$(cd "$(dirname "$0")/../.." && pwd)
model=$src/tests/fixtures/fashion_mlp.onnx
input=$src/tests/fixtures/fashion_mlp_input.npy
want=$src/tests/fixtures/fashion_mlp_logits.npy
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export SN_FAKE_CUDA_DEVICES=2 SN_FAKE_CUDA_MEMORY=2200000 \
    XDG_CACHE_HOME="$tmp/cache"
bad=0

run() { # ARGS...
    rm -rf "$tmp/out"
    timeout 120 "$b/shardnet" run "$model" -i "$input" -o "$tmp/out" "$@" \
        </dev/null >"$tmp/log" 2>&1
}

run -d cuda:0
rc=$?
if [ $rc -eq 1 ] && grep -q 'out of memory' "$tmp/log" &&
    grep -q 'cuda:0' "$tmp/log" && grep -q -- '--split layer' "$tmp/log"; then
    echo "one GPU of 2.2 MB: refused clearly:"
    sed 's/^/    /' "$tmp/log"
else
    echo "FAIL one GPU of 2.2 MB: exit $rc, not a clear out of memory:"
    sed 's/^/    /' "$tmp/log"
    bad=1
fi
for split in layer auto; do
    if run -d cuda:0,cuda:1 --split $split &&
        "$b/tests/tensor_cmp" "$want" "$tmp/out/logits.npy" 1e-4 \
            >"$tmp/cmp" 2>&1; then
        echo "two GPUs of 2.2 MB, --split $split: $(cat "$tmp/cmp")"
    else
        echo "FAIL two GPUs of 2.2 MB, --split $split:"
        sed 's/^/    /' "$tmp/log" "$tmp/cmp" 2>/dev/null
        bad=1
    fi
done
[ $bad -eq 0 ] && echo "small GPUs: passed" || echo "small GPUs: FAILED"
exit $bad
