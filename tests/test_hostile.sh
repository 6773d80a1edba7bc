#!/bin/sh
# Hostile input to the shardnet command (issue 13, point 7): each case must
# end with a clear message naming the file and why, never a crash, a hang,
# a silent exit or a half-written file.  The library-level cases are in
# tests/test_hostile.c.  Run by `make check` with SHARDNET_BIN set.
set -u
bin=${SHARDNET_BIN:-./shardnet}
src=${SHARDNET_SRCDIR:-.}
mlp=$src/tests/fixtures/fashion_mlp.onnx
mlp_in=$src/tests/fixtures/fashion_mlp_input.npy
fails=0
passes=0
# Under AddressSanitizer, an allocation too big to make returns NULL, as
# malloc does, so the cases that ask for one see shardnet's own message,
# not the sanitizer's abort (no effect in a build without it).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1"
out=$(mktemp) || exit 1
tmpd=$(mktemp -d) || exit 1
trap 'rm -f "$out"; rm -rf "$tmpd"' EXIT

ok() {
    echo "ok: $1"
    passes=$((passes + 1))
}

bad() {
    echo "FAIL: $1"
    [ -s "$out" ] && sed 's/^/    /' "$out"
    fails=$((fails + 1))
}

# expect STATUS PATTERN CMD...: CMD (given 60 s: a hang is a failure) exits
# with STATUS and its output (stdout and stderr) matches PATTERN (grep -E).
expect() {
    want=$1 pattern=$2
    shift 2
    timeout 60 "$@" >"$out" 2>&1
    got=$?
    if [ "$got" -ne "$want" ] || ! grep -Eq -- "$pattern" "$out"; then
        bad "$* (exit $got, want $want; pattern '$pattern')"
    else
        ok "$*"
    fi
}

# npy FILE HEADER: a .npy file of that header and no data.
npy() {
    printf '\223NUMPY\001\000' >"$1"
    len=$(printf '%s' "$2" | wc -c)
    total=$(( (10 + len + 1 + 63) / 64 * 64 ))
    hl=$((total - 10))
    printf "\\$(printf %03o $((hl % 256)))\\$(printf %03o $((hl / 256)))" >>"$1"
    printf '%s' "$2" >>"$1"
    printf "%$((hl - len - 1))s\n" "" >>"$1"
}

# An input of zero rows: an empty batch, not an out-of-bounds index.
npy "$tmpd/zero.npy" "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 784), }"
expect 0 "wrote $tmpd/z/logits.npy" "$bin" run "$mlp" -i "$tmpd/zero.npy" \
    -o "$tmpd/z"
if [ -f "$tmpd/z/logits.npy" ] && grep -q "'shape': (0, 10)" "$tmpd/z/logits.npy"; then
    ok "zero rows in, zero rows of 10 logits out"
else
    : >"$out"
    bad "zero rows in: logits.npy missing or not of shape (0, 10)"
fi
# ... and with --stream, no division by zero.
expect 0 "stream: 3 batches of 0 rows" "$bin" run "$mlp" \
    -i "$tmpd/zero.npy" --stream --repeat 3

# Random inputs too big for memory: a message, not a silent exit 1.
expect 1 "cannot allocate random data for input 'input' \(52613349376 bytes with --batch 16777216\)" \
    "$bin" run "$mlp" --batch 16777216

# Two outputs whose file names are the same: refused before the run.
printf '\010\010\022\007\150\157\163\164\151\154\145\072\141\012\022\012\001\170\022\003\141\057\142\032\002\156\061\042\004\122\145\154\165\012\021\012\001\170\022\003\141\137\142\032\002\156\062\042\003\116\145\147\022\001\147\132\017\012\001\170\022\012\012\010\010\001\022\004\012\002\010\002\142\021\012\003\141\057\142\022\012\012\010\010\001\022\004\012\002\010\002\142\021\012\003\141\137\142\022\012\012\010\010\001\022\004\012\002\010\002\102\004\012\000\020\015' \
    >"$tmpd/clash.onnx"
expect 0 "output a/b: float32 \[2\]" "$bin" info "$tmpd/clash.onnx"
expect 2 "outputs 'a/b' and 'a_b' would both be written to $tmpd/c/a_b.npy" \
    "$bin" run "$tmpd/clash.onnx" -o "$tmpd/c"
if [ -e "$tmpd/c/a_b.npy" ]; then
    : >"$out"
    bad "clashing outputs: a file was written"
else
    ok "clashing outputs: nothing written"
fi

# The output folder is created, parents included, before the run.
expect 0 "wrote $tmpd/a/b/c/logits.npy" "$bin" run "$mlp" -i "$mlp_in" \
    -o "$tmpd/a/b/c"
: >"$tmpd/plain"
expect 2 "cannot create the output folder $tmpd/plain/o: Not a directory" \
    "$bin" run "$mlp" -i "$mlp_in" -o "$tmpd/plain/o"
if grep -q "wrote" "$out"; then
    bad "an output folder that cannot be made is found out before the run"
else
    ok "an output folder that cannot be made is found out before the run"
fi

# A full disk (a file size limit of 1 KB; the logits take 10 KB): an error,
# and no truncated logits.npy or temporary file left behind.
mkdir "$tmpd/full"
(
    ulimit -f 1 && trap '' XFSZ &&
        exec "$bin" run "$mlp" -i "$mlp_in" -o "$tmpd/full"
) >"$out" 2>&1
got=$?
if [ "$got" -eq 1 ] && grep -q "$tmpd/full/logits.npy: write failed: File too large" "$out" &&
    [ -z "$(ls -A "$tmpd/full")" ]; then
    ok "full disk: an error and nothing left behind"
else
    echo "    left: $(ls -A "$tmpd/full")" >>"$out"
    bad "full disk (exit $got, want 1, and an empty folder)"
fi

# FIFOs: refused at once, not waited on forever.
mkfifo "$tmpd/fifo.npy" "$tmpd/fifo.onnx"
expect 1 "$tmpd/fifo.npy: not a regular file" "$bin" run "$mlp" \
    -i "$tmpd/fifo.npy"
expect 1 "model file '$tmpd/fifo.onnx' is not a regular file" "$bin" run \
    "$tmpd/fifo.onnx"

# File-format problems are called that, not "not supported by this device".
npy "$tmpd/big.npy" "{'descr': '>f4', 'fortran_order': False, 'shape': (0, 784), }"
expect 1 "invalid argument: $tmpd/big.npy: NumPy type '>f4' cannot be read: its bytes are not in little-endian order" \
    "$bin" run "$mlp" -i "$tmpd/big.npy"
npy "$tmpd/fortran.npy" "{'descr': '<f4', 'fortran_order': True, 'shape': (0, 784), }"
expect 1 "invalid argument: $tmpd/fortran.npy: cannot be read: the array is in Fortran order" \
    "$bin" run "$mlp" -i "$tmpd/fortran.npy"

# Bad values of the environment variables are errors, not ignored.
expect 1 "SHARDNET_CPU_THREADS='two' is not a number of threads" \
    env SHARDNET_CPU_THREADS=two "$bin" run "$mlp" -i "$mlp_in"
expect 1 "SHARDNET_MEMORY_LIMIT='512 MB' is not a size" \
    env "SHARDNET_MEMORY_LIMIT=512 MB" "$bin" run "$mlp" -i "$mlp_in"

echo "test_hostile.sh: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
