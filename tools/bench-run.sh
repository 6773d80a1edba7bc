#!/bin/sh
# `make bench`: the GEMM benchmarks, on this machine's own devices and on
# the simulated two-socket, two-OpenCL-device machine of the test suite.
# Usage: bench-run.sh BUILDDIR
set -eu
b=${1:-.}
echo "== GEMM per device, native topology (OpenBLAS with the same threads)"
"$b/tools/bench_gemm" --devices cpu
echo
echo "== GEMM per device, simulated: 2 packages x 1 core, 2 PoCL devices x 1 core"
HWLOC_SYNTHETIC="pack:2 core:1 pu:1" HWLOC_THISSYSTEM=1 \
POCL_DEVICES="pthread pthread" POCL_MAX_PTHREAD_COUNT=1 \
    "$b/tools/bench_gemm" --devices all
echo
echo "== cpu:0 and cpu:1 at once, each pinned to its own core"
HWLOC_SYNTHETIC="pack:2 core:1 pu:1" HWLOC_THISSYSTEM=1 \
    "$b/tools/bench_gemm" --devices cpu --concurrent
echo
echo "== CUDA devices: GEMM against cuBLAS called directly, the MLP against ONNX Runtime's CPU run"
if "$b/shardnet" devices 2>/dev/null | grep -q '^cuda:'; then
    "$b/tools/bench_gemm" --devices cuda
    echo
    "$(dirname "$0")/bench-mlp.sh" "$b" 2 cuda:0
else
    why=$(SHARDNET_LOG=info "$b/shardnet" devices 2>&1 |
        sed -n 's/.*cuda: no device (\(.*\))$/\1/p' | head -n 1)
    echo "skipped: no CUDA device (${why:-a build without CUDA})"
fi
echo
echo "== Partitions of cpu:0: latency against cores, two models at once or in turns"
env -u HWLOC_SYNTHETIC -u HWLOC_THISSYSTEM \
    SHARDNET_SRCDIR="$(dirname "$0")/.." "$b/tools/bench_partitions"
echo
echo "== Fashion-MNIST MLP on cpu:0 against ONNX Runtime"
"$(dirname "$0")/bench-mlp.sh" "$b"
echo
echo "== Conv nets on cpu:0 against ONNX Runtime, 1 and 2 threads"
"$(dirname "$0")/bench-convnets.sh" "$b"
echo
echo "== Convolution layers on cpu:0 against XNNPACK, 1 thread"
if [ -x "$b/tools/bench_xnnpack" ]; then
    SHARDNET_CPU_THREADS=1 "$b/tools/bench_xnnpack"
else
    echo "skipped: configure did not find XNNPACK (Debian: libxnnpack-dev" \
        "libpthreadpool-dev)"
fi
echo
echo "== 1x1 convolutions' products on cpu:0 against libxsmm, 1 thread"
if [ -x "$b/tools/bench_libxsmm" ]; then
    SHARDNET_CPU_THREADS=1 "$b/tools/bench_libxsmm"
else
    echo "skipped: configure did not find libxsmm (Debian: libxsmm-dev)"
fi
echo
echo "== Splits over two simulated sockets of one core"
"$(dirname "$0")/bench-split.sh" "$b"
if command -v mpirun >/dev/null 2>&1 && [ -x "$b/tests/test_mpi" ]; then
    echo
    echo "== Two MPI processes against one process (needs a build with MPI)"
    "$(dirname "$0")/bench-mpi.sh" "$b"
fi
