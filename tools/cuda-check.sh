#!/bin/sh
# The checks that need a GPU, on a machine with one: the CUDA tests, the
# suites that meet every device (kernels, models, the split-equivalence
# suite, on the machine as it is and on two simulated sockets, the CUDA,
# kernel and split suites again with the GPU's buffers in mapped host
# memory (SHARDNET_CUDA_MAPPED=1, as an integrated GPU has them), the
# CUDA and model suites with cuBLASLt unused (SHARDNET_CUDA_LT=0), the ONNX
# node cases alone and split, every other Criterion suite built), `make
# bench`'s CUDA section (GEMM against cuBLAS called directly, the MLP
# against ONNX Runtime's CPU run), the kernel tests under
# compute-sanitizer's memcheck where it is installed, and last, where
# BUILDDIR is a build tree (it has a Makefile) and CUDA_CHECK_QUICK is
# unset, the whole of `make check` with the GPU present (up to 40
# minutes).  Each step has a time limit, its whole output in
# LOGDIR/STEP.log, and one line here: its exit status and its last
# summary line, then the first tests it skipped, with the reason.
#
#   cuda-check.sh BUILDDIR [LOGDIR [SECONDS]]
#
# BUILDDIR holds shardnet, tests/ and tools/ of a CUDA build (built there
# or carried); the source tree is this script's.  SECONDS: each step's
# limit (default 240).  The node steps need the ONNX node cases
# (libonnx-testdata); without them they fail, saying so.  Exit status: 1
# if any step failed, 77 if there is no CUDA device, else 0.
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
    last=$(grep -E 'Synthesis|passed|GFLOP|ratio|ERROR SUMMARY|DEVICE|^# FAIL:' \
               "$logs/$name.log" | tail -n 1)
    case $rc in
    0) verdict=ok ;;
    77) verdict=skipped ;;
    124 | 137) verdict="TIMED OUT after ${limit}s"; failed=1 ;;
    *) verdict="FAILED (exit $rc)"; failed=1 ;;
    esac
    printf '%-19s %-22s %4ds  %s\n' "$name" "$verdict" "$secs" "$last"
    # A skip on a machine with a GPU is worth reading: the first few named.
    skips=$(grep -c '^\[SKIP\]' "$logs/$name.log")
    grep '^\[SKIP\]' "$logs/$name.log" | head -n 5 |
        sed 's/^/                    /'
    [ "$skips" -le 5 ] ||
        echo "                    ... $((skips - 5)) more skipped ($logs/$name.log)"
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
# Again on two simulated sockets, for the sets of a GPU and two CPU devices.
step test_split_2cpu env HWLOC_SYNTHETIC="pack:2 core:2 pu:1" \
    HWLOC_THISSYSTEM=1 "$b/tests/test_split" --verbose
# The other Criterion suites, those built (each meets every device of its
# context, the GPU among them).
for t in test_devices test_api test_collectives test_backend_stream \
    test_supports test_quantize test_profile test_onnx test_passes \
    test_hostile test_codec test_status test_config test_cpu_kernels \
    test_file_pages test_partitions test_binding; do
    [ -x "$b/tests/$t" ] && step "$t" "$b/tests/$t" --verbose
done
# Again with the buffers in mapped host memory, as an integrated GPU has
# them (zero-copy mappings; the device then shares the host's memory).
step mapped_cuda env SHARDNET_CUDA_MAPPED=1 SHARDNET_CUDA_CHECK=1 \
    "$b/tests/test_cuda" --verbose
step mapped_kernels env SHARDNET_CUDA_MAPPED=1 "$b/tests/test_kernels" \
    --verbose
step mapped_split env SHARDNET_CUDA_MAPPED=1 "$b/tests/test_split" --verbose
# Again with cuBLASLt unused: every bias added by the epilogue kernel.
step lt_off_cuda env SHARDNET_CUDA_LT=0 "$b/tests/test_cuda" --verbose
step lt_off_models env SHARDNET_CUDA_LT=0 "$b/tests/test_models" --verbose
step conformance "$b/tests/conformance"
step split_cases "$b/tests/split_cases" --pairs cpu:0+cuda:0,cuda:0+cpu:0
if [ -n "${CUDA_CHECK_NO_BENCH:-}" ]; then
    echo "bench_gemm, bench_mlp not run (CUDA_CHECK_NO_BENCH is set)"
else
    step bench_gemm "$b/tools/bench_gemm" --devices cuda \
        --sizes 256,1024,4096,8192
    step bench_mlp "$src/tools/bench-mlp.sh" "$b" 1 cuda:0
fi
# The kernels again under NVIDIA's memory checker, where it is installed.
if command -v compute-sanitizer >/dev/null 2>&1; then
    for t in test_cuda test_kernels; do
        step "memcheck_${t#test_}" compute-sanitizer --tool memcheck \
            --report-api-errors no \
            --target-processes all --error-exitcode 1 "$b/tests/$t"
    done
fi
# Last, in a build tree, the whole of make check on this machine.
if [ -n "${CUDA_CHECK_QUICK:-}" ]; then
    echo "make_check          not run (CUDA_CHECK_QUICK is set)"
elif [ -f "$b/Makefile" ]; then
    limit=2400
    step make_check make -C "$b" check -j"$(nproc)"
else
    echo "make_check          not run (no Makefile in $b: a build carried here)"
fi
exit "$failed"
