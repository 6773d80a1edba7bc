#!/bin/sh
# A failing GPU, by the fake CUDA runtime's injected failures
# (SN_FAKE_CUDA_FAIL=CALL:N, runtime.c): the small CNN run with the Nth
# call of each kind failing, for every N from the first call of the kind
# to the last that the run makes, in three settings: a layer split over
# cuda:0 and cpu:0, a tensor split over cuda:0 and cuda:1 (collectives
# staged through pinned memory), and the layer split again with the
# GPU's buffers in mapped host memory (SHARDNET_CUDA_MAPPED=1).  Each run
# must either give the reference's answer (the failure was absorbed:
# pinned memory refused falls back to plain memory, a profile run that
# fails is left out, a failure while tearing down is not the answer's) or
# end with exit status 1 and a message that names a GPU and the CUDA
# error; never a crash, a hang or a wrong answer.
#
# Usage: tests/fakecuda/failures.sh BUILDDIR   (a fake CUDA build: its
# shardnet and tests/tensor_cmp; run by tools/cuda-fake.sh)
set -u
b=${1:?usage: failures.sh BUILDDIR}
src=$(cd "$(dirname "$0")/../.." && pwd)
model=$src/tests/fixtures/small_cnn.onnx
input=$src/tests/fixtures/small_cnn_input.npy
want=$src/tests/fixtures/small_cnn_output.npy
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export SN_FAKE_CUDA_DEVICES=2 XDG_CACHE_HOME="$tmp/cache"
bad=0

run() { # DEVICES SPLIT
    rm -rf "$tmp/out"
    timeout 60 "$b/shardnet" run "$model" -d "$1" --split "$2" \
        -i "$input" -o "$tmp/out" </dev/null >"$tmp/log" 2>&1
}

# One setting: every call of every kind failing in turn.
setting() { # NAME DEVICES SPLIT
    name=$1
    shift
    runs=0 clearly=0 failed=0
    # The device profiles are measured once, so that the failures below
    # fall in the run rather than in its measurement; a second run counts
    # the calls of each kind that a run makes.
    if ! run "$@" || ! SN_FAKE_CUDA_CALLS=$tmp/calls run "$@"; then
        echo "FAIL $name: the run without failures failed:"
        sed 's/^/    /' "$tmp/log"
        bad=1
        return
    fi
    while read -r call count; do
        case $call in
        cudaMalloc* | cudaHostAlloc | cudaEventCreate* | cudaStreamCreate*)
            error=cudaErrorMemoryAllocation ;;
        *) error='cudaErrorLaunchFailure\|CUBLAS_STATUS_EXECUTION_FAILED' ;;
        esac
        n=0
        while [ $n -lt "$count" ]; do
            n=$((n + 1))
            SN_FAKE_CUDA_FAIL=$call:$n run "$@"
            rc=$?
            runs=$((runs + 1))
            case $rc in
            0)
                "$b/tests/tensor_cmp" "$want" "$tmp/out/output.npy" 1e-4 \
                    >"$tmp/cmp" 2>&1 && continue
                echo "FAIL $name, $call:$n: a wrong answer: $(cat "$tmp/cmp")" ;;
            1)
                if grep -q 'cuda:[01]' "$tmp/log" &&
                    grep -q "$error" "$tmp/log"; then
                    clearly=$((clearly + 1))
                    continue
                fi
                echo "FAIL $name, $call:$n: exit 1 without naming the GPU" \
                    "and $error:"
                sed 's/^/    /' "$tmp/log" ;;
            *)
                echo "FAIL $name, $call:$n: exit status $rc (a crash or a" \
                    "hang):"
                sed 's/^/    /' "$tmp/log" ;;
            esac
            failed=$((failed + 1))
            bad=1
        done
    done <"$tmp/calls"
    printf '%-28s %4d runs with a CUDA call failing: %d stopped with a ' \
        "$name" "$runs" "$clearly"
    printf 'clear error, %d went wrong, the others gave the answer\n' \
        "$failed"
}

setting "layer, cuda:0,cpu:0" cuda:0,cpu:0 layer
setting "tensor, cuda:0,cuda:1" cuda:0,cuda:1 tensor
export SHARDNET_CUDA_MAPPED=1
setting "layer, mapped buffers" cuda:0,cpu:0 layer
unset SHARDNET_CUDA_MAPPED
[ $bad -eq 0 ] && echo "failures: passed" || echo "failures: FAILED"
exit $bad
