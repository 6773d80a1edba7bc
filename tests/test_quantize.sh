#!/bin/sh
# shardnet quantize: the fashion MLP written in each form (int8 per tensor
# and per channel, int4, fp16), run by shardnet and compared with
#  - ONNX Runtime's logits on the same quantized model, stored once
#    (tools/make-quantized-fixtures.sh): the same dequantized weights, only
#    the order of the sums differs, so the tolerance is tight: 2e-5
#    relative to 1 + |x| (seen: 3e-6; int4 2.8e-6 on cpu:0 and 3.4e-6 on
#    cl:0, now that the quantized product takes the zero point away from
#    the integers before it multiplies);
#  - PyTorch's float32 logits: the quantized model is fixed, so how far it
#    lies from them is fixed too (seen: int8 0.074, per channel 0.10, int4
#    0.74, fp16 7.7e-4, relative to 1 + |x|); the tolerances leave about
#    twice that, which any summation order passes and a wrong scale or
#    layout (errors of the logits' own size) does not;
#  - and, where the Fashion-MNIST test set is installed, the accuracy on
#    its 10,000 images: int8 within 0.5 points of float32, int4 within 1.
# Then bad input: clear errors, the right exit status, nothing written.
set -u
bin=${SHARDNET_BIN:-./shardnet}
cmp_bin=$(dirname "$bin")/tests/tensor_cmp
ex=${SHARDNET_EXAMPLE:-$(dirname "$bin")/examples/fashion_mnist}
src=${SHARDNET_SRCDIR:-.}
fix=$src/tests/fixtures
mlp=$fix/fashion_mlp.onnx
fails=0
passes=0
skips=0
out=$(mktemp) || exit 1
tmpd=$(mktemp -d) || exit 1
trap 'rm -f "$out"; rm -rf "$tmpd"' EXIT

pass() { echo "ok: $*"; passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect STATUS PATTERN CMD...: CMD exits with STATUS and says PATTERN.
expect() {
    want=$1 pattern=$2
    shift 2
    "$@" >"$out" 2>&1
    got=$?
    if [ "$got" -ne "$want" ] || ! grep -Eq -- "$pattern" "$out"; then
        fail "$* (exit $got, want $want; pattern '$pattern')"
        sed 's/^/    /' "$out"
    else
        pass "$*"
    fi
}

# same WHAT REFERENCE ANSWER TOLERANCE (see tests/compare.h).
same() {
    if "$cmp_bin" "$2" "$3" "$4" >"$out" 2>&1; then
        pass "$1: $(cat "$out")"
    else
        fail "$1"
        sed 's/^/    /' "$out"
    fi
}

# run MODEL DEVICE DIR: the MLP's logits on the fixture input into DIR.
run() {
    case $2 in *,*) split="-s tensor" ;; *) split= ;; esac
    # shellcheck disable=SC2086
    "$bin" run "$1" -d "$2" $split --input "$fix/fashion_mlp_input.npy" \
        --output-dir "$3" >"$out" 2>&1 || { sed 's/^/    /' "$out"; false; }
}

# Is every device of the list D1,D2,... here?
have_all() {
    for one in $(echo "$1" | tr ',' ' '); do
        case $here in *" $one "*) ;; *) return 1 ;; esac
    done
}

here=" $("$bin" devices 2>/dev/null | awk 'NR > 1 { printf "%s ", $1 }')"

# FORM OPTIONS PYTORCH_TOL ORT_TOL OPS: one form, end to end.
form() {
    q=$tmpd/$1.onnx
    expect 0 "wrote .*: 3 weights as" "$bin" quantize "$mlp" "$q" $2
    expect 0 "ops: $5" "$bin" info "$q"
    # cpu:0,cpu:1: a tensor split, the quantized weights cut with their
    # scales (int8: the MLP's first product by columns, the next by rows;
    # int4, MatMulNBits: by columns).
    for d in cpu:0 cl:0 cpu:0,cpu:1; do
        if ! have_all "$d"; then
            echo "SKIP: $1 on $d (not all here)"; skips=$((skips + 1))
            continue
        fi
        if ! run "$q" $d "$tmpd/$1-$d"; then
            fail "$1 runs on $d"
            continue
        fi
        same "$1 on $d: PyTorch's float logits within $3" \
            "$fix/fashion_mlp_logits.npy" "$tmpd/$1-$d/logits.npy" "$3"
        same "$1 on $d: ONNX Runtime's logits within $4" \
            "$fix/fashion_mlp_q_$1_ort.npy" "$tmpd/$1-$d/logits.npy" "$4"
    done
    # One row at a time: the batch-1 products (int8 by bytes where the
    # CPU has VNNI, halves and uint4 converted in registers), not the
    # weight dequantized once for many rows.
    if "$bin" run "$q" -d cpu:0 -b 1 --input "$fix/fashion_mlp_input.npy" \
        --output-dir "$tmpd/$1-rows" >"$out" 2>&1; then
        same "$1 on cpu:0, a row at a time: ONNX Runtime's logits within $4" \
            "$fix/fashion_mlp_q_$1_ort.npy" "$tmpd/$1-rows/logits.npy" "$4"
    else
        fail "$1 runs on cpu:0 a row at a time"
        sed 's/^/    /' "$out"
    fi
}

expect 0 "Usage: shardnet quantize" "$bin" quantize --help
expect 0 "quantize +write a copy" "$bin" --help
form int8 "" 0.15 2e-5 "QuantizedMatMul x3"
# Under a tensor split each device holds its part of the int8 weights.
if have_all cpu:0,cpu:1; then
    expect 0 "QuantizedMatMul.*column-parallel" "$bin" plan "$tmpd/int8.onnx" \
        -d cpu:0,cpu:1 -s tensor
    expect 0 "QuantizedMatMul.*row-parallel" "$bin" plan "$tmpd/int8.onnx" \
        -d cpu:0,cpu:1 -s tensor
fi
form int8pc "--per-channel" 0.2 2e-5 "QuantizedMatMul x3"
form int4 "--weights int4" 1.0 2e-5 "MatMulNBits x3 Add x3"
if have_all cpu:0,cpu:1; then
    expect 0 "MatMulNBits.*column-parallel" "$bin" plan "$tmpd/int4.onnx" \
        -d cpu:0,cpu:1 -s tensor
fi
# fp16 stays in its halves: the Cast of each weight and its product become
# one QuantizedMatMul, cut by the tensor split like the int8 one.
form fp16 "-w fp16" 2e-3 2e-5 "QuantizedMatMul x3"
if have_all cpu:0,cpu:1; then
    expect 0 "QuantizedMatMul.*column-parallel" "$bin" plan "$tmpd/fp16.onnx" \
        -d cpu:0,cpu:1 -s tensor
fi

# Another block size; the MLP's K (784) is not a multiple of 64 either.
expect 0 "3 weights as int4 in blocks of 64" "$bin" quantize "$mlp" \
    "$tmpd/b64.onnx" -w int4 --block 64
if run "$tmpd/b64.onnx" cpu:0 "$tmpd/b64"; then
    same "int4 in blocks of 64: PyTorch's float logits within 1.0" \
        "$fix/fashion_mlp_logits.npy" "$tmpd/b64/logits.npy" 1.0
else
    fail "int4 in blocks of 64 runs"
fi

# Nothing to convert: the model written is the model read, byte for byte.
expect 0 "0 weights as int8 per tensor .* 3 left float32" "$bin" quantize \
    "$mlp" "$tmpd/same.onnx" --min-elements 1000000000
if cmp -s "$mlp" "$tmpd/same.onnx"; then
    pass "a model with nothing to convert is written unchanged"
else
    fail "a model with nothing to convert is written changed"
fi

# The output may be the input (written aside, then renamed over it).
cp "$mlp" "$tmpd/inplace.onnx"
expect 0 "3 weights as fp16" "$bin" quantize "$tmpd/inplace.onnx" \
    "$tmpd/inplace.onnx" -w fp16
if run "$tmpd/inplace.onnx" cpu:0 "$tmpd/inplace"; then
    same "quantized in place: the same logits as fp16 written aside" \
        "$tmpd/fp16-cpu:0/logits.npy" "$tmpd/inplace/logits.npy" 0
else
    fail "a model quantized in place runs"
fi

# External data is written inline: the copy runs away from weights.bin.
cases=$src/tests/onnx_cases
mkdir "$tmpd/away"
expect 0 "1 weight as fp16" "$bin" quantize "$cases/external/model.onnx" \
    "$tmpd/away/ext16.onnx" -w fp16 -m 1
expect 0 "0 weights .* 1 left float32" "$bin" quantize \
    "$cases/external/model.onnx" "$tmpd/away/ext32.onnx"
for m in ext16 ext32; do
    if "$bin" run "$tmpd/away/$m.onnx" --input "$cases/external_x.npy" \
        -d cpu:0 --output-dir "$tmpd/$m" >"$out" 2>&1; then
        same "external data written inline ($m): numpy's answer" \
            "$cases/external_y.npy" "$tmpd/$m/y.npy" 1e-6
    else
        fail "external data written inline ($m) runs"
        sed 's/^/    /' "$out"
    fi
done

# Bad input: a clear error, a non-zero exit, no output.
printf 'this is not an ONNX model\n' >"$tmpd/text.onnx"
head -c 100000 "$mlp" >"$tmpd/cut.onnx"
bad=$tmpd/bad.onnx
expect 1 "missing.onnx': No such file" "$bin" quantize "$tmpd/missing.onnx" \
    "$bad"
expect 1 "text.onnx: model: malformed protobuf" "$bin" quantize \
    "$tmpd/text.onnx" "$bad"
expect 1 "cut.onnx: .*length runs past the end" "$bin" quantize \
    "$tmpd/cut.onnx" "$bad"
expect 2 "unknown --weights 'int3' \(int8, int4 or fp16\)" "$bin" quantize \
    "$mlp" "$bad" --weights int3
expect 2 "block size 24 is not a power of two from 16" "$bin" quantize \
    "$mlp" "$bad" -w int4 --block 24
expect 2 "block size 8 is not a power of two from 16" "$bin" quantize \
    "$mlp" "$bad" -w int4 --block 8
expect 2 "bad --block 'x'" "$bin" quantize "$mlp" "$bad" -w int4 --block x
expect 2 "a block size is for int4 only" "$bin" quantize "$mlp" "$bad" \
    --block 32
expect 2 "per-channel scales are for int8" "$bin" quantize "$mlp" "$bad" \
    -w fp16 --per-channel
expect 2 "Usage: shardnet quantize" "$bin" quantize "$mlp"
ir3=$cases/initializers_ir3.onnx
expect 1 "per-channel int8 needs DequantizeLinear's axis, opset 13 or \
later, and the model's is 9" "$bin" quantize "$ir3" "$bad" --per-channel
expect 1 "nowhere/out.onnx: cannot create it: No such file" "$bin" \
    quantize "$mlp" "$tmpd/nowhere/out.onnx"
if [ -e "$bad" ] || ls "$tmpd" | grep -q '\.tmp$'; then
    fail "a failed quantize left a file behind"
else
    pass "the failures left no file behind"
fi

# Accuracy on the Fashion-MNIST test set (about 10 s on one core).
acc() {
    "$ex" --devices cpu:0 --model "$1" 2>&1 |
        sed -n 's/.*accuracy \([0-9.]*\)%.*/\1/p'
}
if [ ! -r /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz ]; then
    echo "SKIP: accuracy (no Fashion-MNIST test set: Debian package" \
        "dataset-fashion-mnist)"
    skips=$((skips + 1))
else
    base=$(acc "$mlp")
    for spec in int8:0.5 int8pc:0.5 int4:1.0 fp16:0.1; do
        f=${spec%%:*} lim=${spec#*:}
        a=$(acc "$tmpd/$f.onnx")
        if [ -n "$base" ] && [ -n "$a" ] &&
            awk -v a="$a" -v b="$base" -v l="$lim" \
                'BEGIN { d = a - b; exit !(d >= -l) }'; then
            pass "accuracy of $f: $a% (float32 $base%)," \
                "at most $lim points below"
        else
            fail "accuracy of $f: '$a'% (float32 '$base'%)," \
                "more than $lim points below"
        fi
    done
fi

echo "$passes passed, $fails failed, $skips skipped"
[ "$fails" -eq 0 ]
