#!/bin/sh
# The checks that need a GPU, on a machine with one: the CUDA tests, the
# suites that run on every device (kernels, models, the split-equivalence
# suite, the ONNX node cases alone and split), then `make bench`'s CUDA
# section (GEMM against cuBLAS called directly, the MLP against ONNX
# Runtime's CPU run).  Each step has a time limit, its whole output in
# LOGDIR/STEP.log, and one line here: its exit status and its last
# summary line, then each test it skipped, with the reason.  Last, the kernel tests under compute-sanitizer's memcheck
# where it is installed.  Exit status: 1 if any step failed, 77 if there
# is no CUDA device, else 0.
#
#   cuda-check.sh BUILDDIR [LOGDIR [SECONDS]]
#
# BUILDDIR holds shardnet, tests/ and tools/ of a CUDA build (built there or
# carried); the source tree is this script's. SECONDS: each step's limit
# (default 240).  Needs the ONNX node cases (libonnx-testdata) for the two
# node steps; without them those steps fail, saying so.
set -u
b=${1:?usage: cuda-check.sh BUILDDIR [LOGDIR [SECONDS]]}
logs=${2:-cuda-check-logs}
limit=${3:-240}
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$logs" || exit 2
export SHARDNET_SRCDIR="$src"
failed=0

# step NAME COMMAND...: run it under the limit, keep its log, say how it went.
step() {
    name=$1
    shift
    start=$(date +%s)
    timeout -k 10 "$limit" "$@" >"$logs/$name.log" 2>&1
    rc=$?
    secs=$(($(date +%s) - start))
    last=$(grep -E 'Synthesis|passed|GFLOP|ratio|ERROR SUMMARY|DEVICE' \
               "$logs/$name.log" | tail -n 1)
    case $rc in
    0) verdict=ok ;;
    77) verdict=skipped ;;
    124 | 137) verdict="TIMED OUT after ${limit}s"; failed=1 ;;
    *) verdict="FAILED (exit $rc)"; failed=1 ;;
    esac
    printf '%-14s %-22s %4ds  %s\n' "$name" "$verdict" "$secs" "$last"
    # A skip on a machine with a GPU is worth reading: each named.
    grep '^\[SKIP\]' "$logs/$name.log" | sed 's/^/               /'
}

if ! "$b/shardnet" devices 2>/dev/null | grep -q '^cuda:'; then
    SHARDNET_LOG=info "$b/shardnet" devices 2>&1 | tee "$logs/devices.log"
    echo "cuda-check: no CUDA device here; nothing to check"
    exit 77
fi
step devices env SHARDNET_LOG=info "$b/shardnet" devices
cat "$logs/devices.log"
# Each kernel waited for as it is enqueued, so that a failure names it.
step test_cuda env SHARDNET_CUDA_CHECK=1 "$b/tests/test_cuda" --verbose
step test_kernels env SHARDNET_CUDA_CHECK=1 "$b/tests/test_kernels" --verbose
step test_models "$b/tests/test_models" --verbose
step test_split "$b/tests/test_split" --verbose
step test_devices "$b/tests/test_devices" --verbose
step test_api "$b/tests/test_api" --verbose
step test_collect "$b/tests/test_collectives" --verbose
step test_stream "$b/tests/test_backend_stream" --verbose
step test_supports "$b/tests/test_supports" --verbose
step test_quantize "$b/tests/test_quantize" --verbose
step test_profile "$b/tests/test_profile" --verbose
step conformance "$b/tests/conformance"
step split_cases "$b/tests/split_cases" --pairs cpu:0+cuda:0,cuda:0+cpu:0
step bench_gemm "$b/tools/bench_gemm" --devices cuda \
    --sizes 256,1024,4096,8192
step bench_mlp "$src/tools/bench-mlp.sh" "$b" 1 cuda:0
# The kernels again under NVIDIA's memory checker, where it is installed.
if command -v compute-sanitizer >/dev/null 2>&1; then
    for t in test_cuda test_kernels; do
        step "memcheck_${t#test_}" compute-sanitizer --tool memcheck \
            --report-api-errors no \
            --target-processes all --error-exitcode 1 "$b/tests/$t"
    done
fi
exit "$failed"
