#!/bin/sh
# The shardnet command: help, version, device listing, matmul, bad input,
# models run whole and split (their outputs compared with the reference
# values by tests/tensor_cmp).  Run by `make check` with SHARDNET_BIN set
# (see Makefile.am).  Checks that need devices this machine lacks say
# "SKIP: ... (why)" and count as skipped.
set -u
bin=${SHARDNET_BIN:-./shardnet}
cmp_bin=$(dirname "$bin")/tests/tensor_cmp
fails=0
passes=0
skips=0
why=
out=$(mktemp) || exit 1

# needs LIST: the checks that follow (until the next needs) run only where
# every device of LIST exists; elsewhere each says SKIP with the reason.
here=" $("$bin" devices 2>/dev/null | awk 'NR > 1 { printf "%s ", $1 }')"
needs() {
    why=
    for d in $(echo "$1" | tr ',' ' '); do
        case $here in
        *" $d "*) ;;
        *) why="needs $1; no $d here:$here"; return ;;
        esac
    done
}
skipped() {
    [ -n "$why" ] || return 1
    echo "SKIP: $* ($why)"
    skips=$((skips + 1))
}
pass() { echo "ok: $*"; passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect STATUS PATTERN CMD...: run CMD, check its exit status and that its
# output (stdout and stderr) contains PATTERN (a grep -E pattern).
expect() {
    want=$1 pattern=$2
    shift 2
    skipped "$@" && return
    "$@" >"$out" 2>&1
    got=$?
    if [ "$got" -ne "$want" ] || ! grep -Eq -- "$pattern" "$out"; then
        echo "FAIL: $* (exit $got, want $want; pattern '$pattern')"
        sed 's/^/    /' "$out"
        fails=$((fails + 1))
    else
        echo "ok: $*"
        passes=$((passes + 1))
    fi
}

expect 0 "Usage: shardnet" "$bin" --help
expect 0 "^shardnet [0-9]+\.[0-9]+\.[0-9]+" "$bin" --version
expect 2 "Usage: shardnet" "$bin"
expect 2 "unknown command 'frobnicate'" "$bin" frobnicate
expect 0 "Usage: shardnet devices" "$bin" devices --help
expect 0 "Usage: shardnet matmul" "$bin" matmul --help
expect 0 "^cpu:0 " "$bin" devices
expect 2 "unknown device 'gpu:0'" "$bin" devices --devices gpu:0
expect 2 "no device 'cpu:42'" "$bin" devices -d cpu:42
expect 2 "unexpected argument" "$bin" devices extra
# The CUDA backend, where it is built (SHARDNET_CUDA_BUILT, from
# configure): without a GPU or its driver the listing still works, says
# that no CUDA device was found, and the log says why; naming one fails.
if [ "${SHARDNET_CUDA_BUILT:-no}" = yes ]; then
    case $here in
    *" cuda:0 "*)
        expect 0 "^cuda:0 +cuda " "$bin" devices
        expect 0 "^cuda:0 +cuda " "$bin" devices -d cuda ;;
    *)
        expect 0 "no CUDA device found" "$bin" devices
        expect 0 "cuda: no device \(cudaGetDeviceCount" \
            env SHARDNET_LOG=info "$bin" devices
        expect 0 "^cpu:0 " "$bin" devices -d all
        expect 2 "no device 'cuda:0' \(this machine has 0 cuda devices\)" \
            "$bin" devices -d cuda:0
        expect 2 "no cuda devices on this machine" "$bin" devices -d cuda ;;
    esac
fi
# shardnet ops: each operator, its opsets, and the kinds of the devices
# here that run it (every operator runs on every backend)
kinds=cpu
case $here in *" cl:0 "*) kinds="cpu cl" ;; esac
case $here in *" cuda:0 "*) kinds="$kinds cuda" ;; esac
expect 0 "^OPERATOR +DOMAIN +OPSETS +BACKENDS$" "$bin" ops
expect 0 "^Reciprocal +ai\.onnx +1- +$kinds$" "$bin" ops
expect 0 "^LayerNormalization +ai\.onnx +17- +$kinds$" "$bin" ops
expect 0 "^[0-9]+ operators$" "$bin" ops
expect 2 "unexpected argument" "$bin" ops extra
expect 2 "bad --size" "$bin" matmul --size 0
expect 2 "bad --size" "$bin" matmul --size 7x13
expect 0 "cpu:0 .* ok" "$bin" matmul --devices cpu:0 --size 7x13x5 --repeat 1

# same WHAT REFERENCE ANSWER TOLERANCE: the tensor files agree (0: bit for
# bit; see tests/compare.h).
same() {
    skipped "$1" && return
    if "$cmp_bin" "$2" "$3" "$4" >"$out" 2>&1; then
        pass "$1: $(cat "$out")"
    else
        fail "$1"
        sed 's/^/    /' "$out"
    fi
}

# Models: info and run on the committed fixture.
src=${SHARDNET_SRCDIR:-.}
mlp=$src/tests/fixtures/fashion_mlp.onnx
tmpd=$(mktemp -d) || exit 1
trap 'rm -f "$out"; rm -rf "$tmpd"' EXIT
expect 0 "Usage: shardnet info" "$bin" info --help
expect 0 "Usage: shardnet run" "$bin" run --help
expect 0 "input input: float32 \[batch, 784\]" "$bin" info "$mlp"
expect 0 "unsupported: none" "$bin" info "$mlp"
expect 1 "No such file" "$bin" info "$tmpd/missing.onnx"
expect 0 "wrote $tmpd/o/logits.npy" "$bin" run "$mlp" \
    --input "$src/tests/fixtures/fashion_mlp_input.npy" --output-dir "$tmpd/o"
same "run on cpu:0 gives PyTorch's logits" \
    "$src/tests/fixtures/fashion_mlp_logits.npy" "$tmpd/o/logits.npy" 1e-4
expect 0 "wrote" "$bin" run "$mlp" \
    --input "input=$src/tests/fixtures/fashion_mlp_input.npy" -b 100 \
    --output-dir "$tmpd/o2"
# Batches change GEMM blocking (not bit-identical): all 256 rows, each
# within rounding of the whole batch's.
same "run in batches of 100 writes all 256 rows, the same values" \
    "$tmpd/o/logits.npy" "$tmpd/o2/logits.npy" 1e-4
expect 0 "throughput: .* rows/s" "$bin" run "$mlp" -b 8 -r 5
# The progress line: off a terminal only when asked for, each stage to
# its end.
expect 0 "uploading weights to cpu:0: 100%" "$bin" run "$mlp" -d cpu:0 \
    --progress
if "$bin" run "$mlp" -d cpu:0 2>&1 | grep -q "uploading weights"; then
    fail "run shows progress off a terminal without --progress"
else
    echo "ok: run is quiet off a terminal"
    passes=$((passes + 1))
fi
expect 2 "no input 'nope'" "$bin" run "$mlp" --input "nope=$tmpd/x.npy"
expect 1 "x.npy" "$bin" run "$mlp" --input "$tmpd/x.npy"
expect 2 "bad --batch" "$bin" run "$mlp" --batch 0
expect 2 "unknown device 'gpu:0'" "$bin" run "$mlp" -d gpu:0

# A model asking the host for 40 GB of constant: a clear error, no attempt.
huge=$src/tests/onnx_cases/huge_constant_of_shape.onnx
expect 1 "ConstantOfShape.*more than the 256 MiB" "$bin" run "$huge" -d cpu:0
# Control flow gone wrong (tests/onnx_cases/make_cases.py): If branches of
# different output counts, a Loop too long to unroll, a Scan axis out of
# range, a branch reading a name nothing defines.  Clear errors naming the node, on every device.
for d in cpu:0 cl:0; do
    needs $d
    expect 1 "If.*then_branch has 1 outputs and else_branch 2" "$bin" run \
        "$src/tests/onnx_cases/control_if_branch_outputs_differ.onnx" -d $d
    expect 1 "Loop.*trip count of 1099511627776 is more than the 65536" \
        "$bin" run "$src/tests/onnx_cases/control_loop_huge_trip_count.onnx" \
        -d $d
    expect 1 "If.*input 'nowhere' is not produced by any node" "$bin" run \
        "$src/tests/onnx_cases/control_subgraph_reads_undefined.onnx" -d $d
    expect 1 "Scan.*scan input 0 is missing, or has no axis 5" "$bin" run \
        "$src/tests/onnx_cases/control_scan_axis_out_of_range.onnx" -d $d
done
needs cpu:0
# A model whose weights are in a file beside it (ONNX external data), and
# a model of two inputs by name (one of int64 indices) and two outputs, end
# to end: numpy's answers (tests/onnx_cases/make_split_cases.py).
cases=$src/tests/onnx_cases
expect 0 "wrote $tmpd/ext/y.npy" "$bin" run "$cases/external/model.onnx" \
    --input "$cases/external_x.npy" --output-dir "$tmpd/ext"
same "a model with external data gives numpy's answer" \
    "$cases/external_y.npy" "$tmpd/ext/y.npy" 1e-6
expect 0 "wrote $tmpd/mio/y2.npy" "$bin" run "$cases/multi_io.onnx" \
    --input "idx=$cases/multi_io_idx.npy" --input "x=$cases/multi_io_x.npy" \
    --output-dir "$tmpd/mio"
same "two inputs by name, output y1: numpy's answer" \
    "$cases/multi_io_y1.npy" "$tmpd/mio/y1.npy" 1e-5
same "two inputs by name, output y2: numpy's answer" \
    "$cases/multi_io_y2.npy" "$tmpd/mio/y2.npy" 1e-5
expect 0 "Usage: shardnet plan" "$bin" plan --help
expect 0 "choice: none" "$bin" plan "$mlp" -d cpu:0 -b 4
expect 2 "split 'diagonal' is not available" "$bin" plan "$mlp" -s diagonal

# Splits over two CPU devices (make check's simulated packages; skipped,
# each check named, where there is one CPU device).
needs cpu:0,cpu:1
expect 0 "running: layer split over 2 devices" "$bin" plan "$mlp" \
    -d cpu:0,cpu:1 -s layer -b 64
expect 0 "wrote" "$bin" run "$mlp" -d cpu:0,cpu:1 --split layer \
    --micro-batches 4 --input "$src/tests/fixtures/fashion_mlp_input.npy" \
    --output-dir "$tmpd/o3"
expect 0 "wrote trace" "$bin" run "$mlp" -d cpu:0,cpu:1 --split layer \
    -m 3 -b 12 --trace "$tmpd/trace.json"
if skipped "the trace has a track per device, micro-batches and kernels"; then
    :
elif grep -q '"traceEvents"' "$tmpd/trace.json" &&
   grep -q '"name":"cpu:1"' "$tmpd/trace.json" &&
   grep -q '"cat":"micro-batch","name":"micro-batch 2 (stage 1)"' "$tmpd/trace.json" &&
   grep -q '"cat":"kernel","name":"Gemm' "$tmpd/trace.json"; then
    pass "the trace has a track per device, micro-batches and kernels"
else
    fail "the trace lacks tracks, micro-batches or kernels"
fi
# Memory limits: with 4 MiB per device the MLP at batch 1024 (6.9 MB
# whole) fits no device alone, and the planner splits it by layer (or
# replicates it: each device the weights and one micro-batch's
# activations); with 1 MiB nothing fits, and it says so.
expect 0 "none on cpu:0: .*: does not fit" env SHARDNET_MEMORY_LIMIT=4M \
    "$bin" plan "$mlp" -d cpu:0,cpu:1 -b 1024
expect 0 "choice: (layer|replicated 2) " env SHARDNET_MEMORY_LIMIT=4M \
    "$bin" plan "$mlp" -d cpu:0,cpu:1 -b 1024
expect 1 "fits neither one of the devices nor a layer split" \
    env SHARDNET_MEMORY_LIMIT=1M "$bin" plan "$mlp" -d cpu:0,cpu:1 -b 1024
# Plans are data: save one, edit its cut, run it.
expect 0 "wrote plan" "$bin" plan "$mlp" -d cpu:0,cpu:1 -s layer -b 16 \
    --save "$tmpd/plan.txt"
expect 0 "^cuts [0-9]" cat "$tmpd/plan.txt"
sed 's/^cuts .*/cuts 2/' "$tmpd/plan.txt" >"$tmpd/plan2.txt" 2>/dev/null
expect 0 "wrote" "$bin" run "$mlp" --plan "$tmpd/plan2.txt" \
    --input "$src/tests/fixtures/fashion_mlp_input.npy" \
    --output-dir "$tmpd/o4"
same "an edited plan file runs and gives the one-device logits" \
    "$tmpd/o/logits.npy" "$tmpd/o4/logits.npy" 0
printf 'split layer\ndevices cpu:0,cpu:1\ncuts 7\n' >"$tmpd/plan3.txt"
expect 1 "cut 1 at node 7 is out of order or range" "$bin" run "$mlp" \
    --plan "$tmpd/plan3.txt" -b 4
printf 'split layer\nbogus 1\n' >"$tmpd/plan4.txt"
expect 1 "line 2: expected" "$bin" run "$mlp" --plan "$tmpd/plan4.txt"
same "layer split on two cpu devices writes the same logits" \
    "$tmpd/o/logits.npy" "$tmpd/o3/logits.npy" 0
# A Loop whose body holds an If, both reading values of the graph outside
# (tests/onnx_cases/make_cases.py): cut by the layer split before and
# after each of its 5 nodes, the control nodes whole, the values they read
# sent across, numpy's answers.
lc=$src/tests/onnx_cases/node/test_control_loop_if_outer_then
for k in 1 2 3 4; do
    printf 'split layer\ndevices cpu:0,cpu:1\ncuts %s\n' $k \
        >"$tmpd/lplan$k.txt"
    expect 0 "wrote" "$bin" run "$lc/model.onnx" --plan "$tmpd/lplan$k.txt" \
        -i "$lc/test_data_set_0/input_0.pb" -i "$lc/test_data_set_0/input_1.pb" \
        -i "$lc/test_data_set_0/input_2.pb" --output-dir "$tmpd/lc$k"
    same "Loop and If cut after live node $k give numpy's y" \
        "$lc/test_data_set_0/output_0.pb" "$tmpd/lc$k/y.npy" 1e-5
    same "Loop and If cut after live node $k give numpy's z" \
        "$lc/test_data_set_0/output_1.pb" "$tmpd/lc$k/z.npy" 1e-5
done
# Tensor split from the command line, its plan saved with strategies.
expect 0 "/fc2/Gemm \(Gemm\) \(\(1,2\),\(1,2\)\): row-parallel" \
    "$bin" plan "$mlp" -d cpu:0,cpu:1 -s tensor -b 16 \
    --save "$tmpd/tplan.txt"
expect 0 "^strategy /fc1/Gemm \(\(1,1\),\(2,1\)\)" cat "$tmpd/tplan.txt"
expect 0 "wrote" "$bin" run "$mlp" --plan "$tmpd/tplan.txt" \
    --input "$src/tests/fixtures/fashion_mlp_input.npy" --output-dir "$tmpd/o5"
same "the saved tensor plan gives the one-device logits within rounding" \
    "$tmpd/o/logits.npy" "$tmpd/o5/logits.npy" 1e-4
expect 2 "needs three devices or more" "$bin" plan "$mlp" \
    -d cpu:0,cpu:1 -s hybrid
# Device profiles: measured once, then read from the cache folder; a
# damaged cache is measured again.
pdir="$tmpd/profiles"
expect 0 "profile of cpu:0: GEMM" env SHARDNET_CACHE_DIR="$pdir" \
    SHARDNET_LOG=info "$bin" plan "$mlp" -d cpu:0,cpu:1 -b 4
expect 0 "^cpu:1[|]cpu[|]" cat "$pdir/profiles-2.txt"
if skipped "a second process reads the profiles from the cache"; then
    :
elif ! env SHARDNET_CACHE_DIR="$pdir" SHARDNET_LOG=info "$bin" plan \
    "$mlp" -d cpu:0,cpu:1 -b 4 >"$tmpd/second.log" 2>&1; then
    fail "a second process reads the profiles from the cache (exit status)"
elif grep -q "profile of" "$tmpd/second.log" &&
    ! grep -Eq "warn: .*measuring (the profile of )?cpu:[01] again" \
        "$tmpd/second.log"
then
    # A first profile taken on a loaded machine may be healed, and a run far
    # slower than its estimate (a loaded machine again: the plan command
    # runs the plan) has the devices measured again; each says so.
    # Measuring again without a reason is the fault.
    fail "the cached profiles were measured again"
else
    pass "a second process reads the profiles from the cache"
fi
[ -n "$why" ] || { sed 's/\t.*/\tgarbage/' "$pdir/profiles-2.txt" >"$pdir/p" &&
    mv "$pdir/p" "$pdir/profiles-2.txt"; }
expect 0 "profile of cpu:0: GEMM" env SHARDNET_CACHE_DIR="$pdir" \
    SHARDNET_LOG=info "$bin" plan "$mlp" -d cpu:0,cpu:1 -b 4
# cpu:1 is package 1, its units its cores (as hwloc counts them).
cores=$(hwloc-calc --number-of core package:1 2>/dev/null)
expect 0 "^cpu:1 +cpu +${cores:-1} " "$bin" devices --devices cpu:1

# Hybrid split: stages tensor-split over groups; the plan file names the
# groups and can be edited.
needs cpu:0,cpu:1,cl:0
expect 0 "running: hybrid split, stages on" "$bin" plan "$mlp" \
    -d cpu:0,cpu:1,cl:0 -s hybrid -b 16 --save "$tmpd/hplan.txt"
expect 0 "^groups [12],[12]$" cat "$tmpd/hplan.txt"
printf 'split hybrid\ndevices cpu:0,cpu:1,cl:0\ngroups 2,1\ncuts 1\n' \
    >"$tmpd/hplan2.txt"
expect 0 "wrote" "$bin" run "$mlp" --plan "$tmpd/hplan2.txt" \
    --input "$src/tests/fixtures/fashion_mlp_input.npy" \
    --output-dir "$tmpd/o6"
same "the edited hybrid plan gives the one-device logits within rounding" \
    "$tmpd/o/logits.npy" "$tmpd/o6/logits.npy" 1e-4
printf 'split hybrid\ndevices cpu:0,cpu:1,cl:0\ngroups 1,1\n' \
    >"$tmpd/hplan3.txt"
expect 1 "groups of 2 devices in all" "$bin" run "$mlp" \
    --plan "$tmpd/hplan3.txt" -b 4

# Replicated split: PipeDream's configurations listed with estimates and
# memory; the plan file names the replicas ("2,1" or "2-1").
expect 0 "^replicated 2-1: stage 0 on cpu:0\+cpu:1 \(2 replicas\).*memory.*estimated" \
    "$bin" plan "$mlp" -d cpu:0,cpu:1,cl:0 -b 16
expect 0 "running: replicated split [123-]+, stages on" "$bin" plan "$mlp" \
    -d cpu:0,cpu:1,cl:0 -s replicated -b 16 --save "$tmpd/rplan.txt"
expect 0 "^replicas [123](,[12])*$" cat "$tmpd/rplan.txt"
printf 'split replicated\ndevices cpu:0,cpu:1,cl:0\nreplicas 2-1\n' \
    >"$tmpd/rplan2.txt"
expect 0 "wrote" "$bin" run "$mlp" --plan "$tmpd/rplan2.txt" \
    --input "$src/tests/fixtures/fashion_mlp_input.npy" \
    --output-dir "$tmpd/o7"
same "the replicated 2-1 plan gives the one-device logits within rounding" \
    "$tmpd/o/logits.npy" "$tmpd/o7/logits.npy" 1e-4
printf 'split replicated\ndevices cpu:0,cpu:1,cl:0\nreplicas 2,2\n' \
    >"$tmpd/rplan3.txt"
expect 1 "replicas of 4 devices in all" "$bin" run "$mlp" \
    --plan "$tmpd/rplan3.txt" -b 4

# More devices than the MLP has nodes: the layer split uses three.
needs cpu:0,cpu:1,cl:0,cl:1
expect 0 "layer over 3 stages" "$bin" plan "$mlp" \
    -d cpu:0,cpu:1,cl:0,cl:1 -b 16
# The acceptance listing: cpu:0 cpu:1 cl:0 cl:1, in that order (then a
# machine's GPUs, cuda:0..., last).
if skipped "devices lists cpu:0 cpu:1 cl:0 cl:1"; then
    :
elif case $here in " cpu:0 cpu:1 cl:0 cl:1 "*) true ;; *) false ;; esac &&
    [ -z "$(echo "${here# cpu:0 cpu:1 cl:0 cl:1 }" | sed 's/cuda:[0-9]* //g')" ]; then
    pass "devices lists cpu:0 cpu:1 cl:0 cl:1"
else
    fail "devices lists '$here'"
fi
expect 0 "cl:1 .* ok" "$bin" matmul -d cl:1 -s 33x17x65 -r 1
needs ""

echo "$passes passed, $fails failed, $skips skipped"
[ "$fails" -eq 0 ]
