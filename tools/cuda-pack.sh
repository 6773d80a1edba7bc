#!/bin/sh
# Pack a CUDA build for a GPU machine that has neither this project's
# build dependencies nor a way to fetch them: the shardnet command, the
# test programs and bench_gemm that tools/cuda-check.sh runs (stripped),
# libshardnet, and every shared library they load that is not the C
# runtime's (OpenBLAS, hwloc, Criterion and theirs, cudart), in one
# tar.xz whose folder cuda-check.sh takes as BUILDDIR:
#
#   tools/cuda-pack.sh BUILDDIR OUT.tar.xz
#   (there)  tar xJf OUT.tar.xz -C DIR
#            LD_LIBRARY_PATH=DIR/lib:CUBLAS_DIR tools/cuda-check.sh DIR
#
# cuBLAS and cuBLASLt are left out (hundreds of MB; they are loaded at run
# time from the machine's own toolkit: CUBLAS_DIR holds libcublas.so.N and
# libcublasLt.so.N).  glibc, libm, libstdc++ and libgcc_s are left out
# too: the machine's own must be as new as this one's.  Build with the GPU's compute capability
# (./configure --with-cuda-arch=NN) and make the test programs first
# (make check TESTS= builds them without running any).  About 11 MB.
set -eu
b=${1:?usage: cuda-pack.sh BUILDDIR OUT.tar.xz}
out=${2:?usage: cuda-pack.sh BUILDDIR OUT.tar.xz}
b=$(cd "$b" && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/tests" "$stage/tools" "$stage/lib"

# The real binaries, not libtool's wrapper scripts.
real() {
    if [ -x "$(dirname "$1")/.libs/$(basename "$1")" ]; then
        echo "$(dirname "$1")/.libs/$(basename "$1")"
    else
        echo "$1"
    fi
}
[ -x "$b/shardnet" ] || { echo "cuda-pack: no $b/shardnet: build first" >&2; exit 1; }
cp "$(real "$b/shardnet")" "$stage/shardnet"
cp -P "$b"/.libs/libshardnet.so* "$stage/lib/" 2>/dev/null || true
n=0
for t in "$b"/tests/test_* "$b"/tests/conformance "$b"/tests/split_cases; do
    case $t in *.o | *.log | *.trs | *.sh | *.c | *.h) continue ;; esac
    [ -f "$t" ] && [ -x "$t" ] || continue
    cp "$(real "$t")" "$stage/tests/"
    n=$((n + 1))
done
[ -x "$b/tools/bench_gemm" ] && cp "$(real "$b/tools/bench_gemm")" "$stage/tools/"
strip "$stage/shardnet" "$stage"/tests/* "$stage"/tools/* 2>/dev/null || true

# What they load, but the C runtime and this build's own.
for f in "$stage/shardnet" "$stage"/tests/* "$stage"/tools/*; do
    LD_LIBRARY_PATH="$stage/lib" ldd "$f" 2>/dev/null |
        awk '$3 ~ /^\// { print $3 }'
done | sort -u |
    grep -v -E '/(libc|libm|libdl|libpthread|librt|libresolv|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so' |
    grep -v "^$stage/" | while read -r lib; do
    cp -L "$lib" "$stage/lib/"
done
tar cJf "$out" -C "$stage" .
echo "cuda-pack: $n test programs and $(ls "$stage/lib" | wc -l) libraries in $out ($(du -h "$out" | cut -f1))"
