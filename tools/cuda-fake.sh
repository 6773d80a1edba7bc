#!/bin/sh
# The CUDA backend's host code tested without a GPU: builds a fake CUDA
# toolkit (tests/fakecuda/: a runtime, a cuBLAS and a cuBLASLt on host
# memory, and an nvcc that compiles the kernel files as host C++), builds
# shardnet from this working tree against it in BUILDDIR, and runs the GPU
# checks there with fake devices present (cuda:0, cuda:1).
#
# What it proves: buffers, copies, mappings, pinned and mapped memory,
# streams, events, cuBLAS's and cuBLASLt's arguments and the kernels'
# launches, as the CUDA documentation defines them, with work deferred
# until it is waited for (a missing wait shows as a wrong result) and
# device addresses that fault when host code reads them.  What it cannot
# prove: that a real GPU runs the kernels (tools/cuda-check.sh on a GPU
# machine does that).
#
# Usage: tools/cuda-fake.sh [BUILDDIR]   (default: fakecuda-build; made
# afresh from the working tree each time)
#
# It is configured as this machine allows (MPI and OpenCL where they are
# here).  Then, with two fake GPUs: tools/cuda-check.sh's steps (the
# CUDA, kernel, model and split suites, on one and on two simulated
# sockets, again with mapped buffers, every other suite, the ONNX node
# cases alone and split; not its benchmarks), the command line's and the
# MPI job's suites (or, with FAKE_MAKE_CHECK=1, the whole of make check),
# an integrated GPU's mapped buffers, tests/fakecuda/small_gpus.sh (a
# model larger than one GPU of 2.2 MB, split over two) and
# tests/fakecuda/failures.sh (a run with each CUDA call failing in
# turn).  Environment: CUDA_HOME (the real toolkit, for
# its headers; /usr/local/cuda), CC, CXX, CFLAGS (e.g. "-g -O1
# -fsanitize=address,undefined"; LDFLAGS default to them), FAKE_MAKE
# (make's options; -j2).
# About 10 minutes on 2 cores.  Exit status: 0 when everything passed, 77
# without the CUDA headers, else 1.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-fakecuda-build}
real=${CUDA_HOME:-/usr/local/cuda}
cc=${CC:-cc}
cxx=${CXX:-c++}
cflags=${CFLAGS:--O1 -g}
jobs=${FAKE_MAKE:--j2}

if [ ! -f "$real/include/cuda_runtime_api.h" ] ||
    [ ! -f "$real/include/cublas_api.h" ]; then
    echo "cuda-fake: no CUDA headers in $real/include (set CUDA_HOME)" >&2
    exit 77
fi
if ! git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    echo "cuda-fake: $src is not a git checkout (the source is copied" \
        "from its working tree)" >&2
    exit 2
fi
version=$(sed -n 's/^#define CUDART_VERSION *\([0-9]*\).*/\1/p' \
    "$real/include/cuda_runtime_api.h")
major=$((version / 1000))

mkdir -p "$build"
build=$(cd "$build" && pwd)

# The working tree as it is (tracked and untracked files, not ignored
# ones), configured afresh: the checkout may be configured in place.
echo "cuda-fake: the source in $build/src"
rm -rf "$build/src"
mkdir -p "$build/src"
case $build/ in
"$src"/*) rel=${build#"$src"/} ;; # not the build itself
*) rel=.git ;;
esac
(cd "$src" && git ls-files -co --exclude-standard -z -- . ":(exclude)$rel" |
    xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
    tar --null -T - -cf -) | tar -xf - -C "$build/src"

# The toolkit, from that copy.
tk=$build/toolkit
fake=$build/src/tests/fakecuda
echo "cuda-fake: the fake CUDA $major toolkit in $tk"
rm -rf "$tk"
mkdir -p "$tk/bin" "$tk/lib64"
ln -s "$real/include" "$tk/include"
# -fvisibility=hidden: only what the real libraries export is exported.
$cc $cflags -std=gnu11 -Wall -Wextra -Werror -fPIC -shared \
    -fvisibility=hidden -I"$real/include" -I"$fake" \
    -Wl,-soname,libcudart.so.$major -o "$tk/lib64/libcudart.so.$major" \
    "$fake/runtime.c" -lpthread
ln -s "libcudart.so.$major" "$tk/lib64/libcudart.so"
$cc $cflags -std=gnu11 -Wall -Wextra -Werror -fPIC -shared \
    -fvisibility=hidden -I"$real/include" -I"$fake" \
    -Wl,-soname,libcublas.so.$major -o "$tk/lib64/libcublas.so.$major" \
    "$fake/cublas.c" -L"$tk/lib64" -lcudart -Wl,-rpath,"$tk/lib64"
ln -s "libcublas.so.$major" "$tk/lib64/libcublas.so"
$cc $cflags -std=gnu11 -Wall -Wextra -Werror -fPIC -shared \
    -fvisibility=hidden -I"$real/include" -I"$fake" \
    -Wl,-soname,libcublasLt.so.$major -o "$tk/lib64/libcublasLt.so.$major" \
    "$fake/cublaslt.c" -L"$tk/lib64" -lcudart -Wl,-rpath,"$tk/lib64"
ln -s "libcublasLt.so.$major" "$tk/lib64/libcublasLt.so"
sed -e "s|@CXX@|$cxx|" -e "s|@CXXFLAGS@|$cflags|" -e "s|@FAKEDIR@|$fake|" \
    -e "s|@VERSION@|$major.$((version % 1000 / 10))|" \
    "$fake/nvcc.in" >"$tk/bin/nvcc"
chmod +x "$tk/bin/nvcc"

cd "$build/src"
./autogen.sh >/dev/null 2>&1
# MPI and OpenCL where this machine has them, so that the GPUs meet them
# in the splits and the MPI job.
./configure -q --with-cuda="$tk" --with-cuda-arch=90 CFLAGS="$cflags" \
    CXXFLAGS="$cflags" LDFLAGS="${LDFLAGS:-$cflags}"
make -s $jobs >/dev/null
make -s $jobs check TESTS= >/dev/null # the test programs, not run yet
status=0
export SN_FAKE_CUDA_DEVICES=2 XDG_CACHE_HOME="$build/cache"
# Under AddressSanitizer: Criterion's own leak is not reported.
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$build/src/tests/lsan.supp"
quick=1
[ -n "${FAKE_MAKE_CHECK:-}" ] && quick=
CUDA_CHECK_QUICK=$quick CUDA_CHECK_NO_BENCH=1 \
    sh tools/cuda-check.sh "$build/src" "$build/logs" 600 || status=1
if [ -n "$quick" ]; then
    # Of the rest of make check, the suites that list the devices (the
    # command line's) or split across processes (the MPI job's).
    echo "make check of test_cli.sh and test_mpi.sh:"
    make -s check TESTS="tests/test_cli.sh tests/test_mpi.sh" \
        >"$build/logs/cli_mpi.log" 2>&1 || {
        cat "$build/logs/cli_mpi.log" tests/test_cli.sh.log \
            tests/test_mpi.sh.log 2>/dev/null | tail -n 60
        status=1
    }
    grep -E '^(PASS|FAIL|SKIP|ERROR):' "$build/logs/cli_mpi.log"
fi
echo "integrated GPUs (buffers in mapped host memory, found so):"
if SN_FAKE_CUDA_INTEGRATED=1 tests/test_cuda --verbose \
    --filter 'cuda/mapped_buffers*' >"$build/logs/integrated.log" 2>&1 &&
    grep -q '^\[PASS\] cuda::mapped_buffers' "$build/logs/integrated.log"; then
    echo "integrated: passed"
else
    cat "$build/logs/integrated.log"
    status=1
fi
echo "small GPUs (a model larger than one):"
sh tests/fakecuda/small_gpus.sh "$build/src" || status=1
echo "failures (a CUDA call failing in turn):"
sh tests/fakecuda/failures.sh "$build/src" || status=1
exit $status
