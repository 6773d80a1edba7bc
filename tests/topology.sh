#!/bin/sh
# The split-equivalence suite (tests/test_split), the binding test
# (tests/test_binding) and the MPI tests on a topology other than make
# check's default (two simulated packages of one core each), as TAP: one
# line per test, a test skipped for want of devices counted as a skip with
# its reason.  Run by tests/topology-native.tap and
# tests/topology-multicore.tap; by hand: tests/topology.sh native|multicore
#   native     this machine as it is: whatever hwloc and PoCL find
#   multicore  two simulated packages of two cores and a NUMA node each
#              (the first on this machine's PUs 0 and 1, the second on PUs
#              it may lack, where binding degrades to a warning) and two
#              PoCL devices
# The MPI tests run under mpirun's default binding (two processes: one
# core each; three, oversubscribed: unbound): on the multi-core simulation
# the whole of tests/test_mpi.sh; on this machine, the collectives and
# every model split across two processes that each drive their own cpu:0,
# bound by default and --bind-to none.
set -u
topo=${1:-native}
build=$(dirname "${SHARDNET_BIN:-./shardnet}")
bin=$build/shardnet
src=${SHARDNET_SRCDIR:-.}
fix=$src/tests/fixtures
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
fails=0

case $topo in
native)
    unset HWLOC_SYNTHETIC HWLOC_THISSYSTEM HWLOC_XMLFILE POCL_DEVICES \
        POCL_MAX_PTHREAD_COUNT
    what="this machine as it is"
    ;;
multicore)
    HWLOC_SYNTHETIC="pack:2 numa:1 core:2 pu:1"
    HWLOC_THISSYSTEM=1
    POCL_DEVICES="pthread pthread"
    POCL_MAX_PTHREAD_COUNT=2
    export HWLOC_SYNTHETIC HWLOC_THISSYSTEM POCL_DEVICES POCL_MAX_PTHREAD_COUNT
    what="2 simulated packages of 2 cores and a NUMA node each"
    ;;
*)
    echo "Bail out! unknown topology '$topo' (native or multicore)"
    exit 1
    ;;
esac
unset SHARDNET_CPU_THREADS SHARDNET_DEVICES
export SHARDNET_CACHE_DIR="$tmp/cache"

ok() { n=$((n + 1)); echo "ok $n - [$topo] $*"; }
bad() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - [$topo] $*"; }
skip() { n=$((n + 1)); echo "ok $n - [$topo] $1 # SKIP $2"; }
note() { echo "# [$topo] $*"; }

note "topology: $what"
"$bin" devices 2>&1 | sed "s/^/# [$topo]   /"

# A Criterion suite (with its options), each of its tests as one TAP line
# of ours, named after LABEL.
suite() {
    label=$1
    name=$2
    shift 2
    if [ ! -x "$build/tests/$name" ]; then
        skip "tests/$name" "not built (needs Criterion)"
        return
    fi
    "$build/tests/$name" "$@" --tap="$tmp/$name.tap" >"$tmp/$name.out" 2>&1
    rc=$?
    count=0
    while IFS= read -r line; do
        case $line in
        "ok - "*"# SKIP test was skipped")
            continue # left out by a --filter
            ;;
        "ok - "*"# SKIP"*)
            t=${line#ok - }
            skip "$label${t%%  # SKIP*}" "${t#*# SKIP }"
            ;;
        "ok - "*)
            t=${line#ok - }
            ok "$label${t%%  (*}"
            ;;
        "not ok - "*)
            t=${line#not ok - }
            bad "$label${t%%  (*}"
            ;;
        *) continue ;;
        esac
        count=$((count + 1))
    done <"$tmp/$name.tap"
    grep -E "^  |^#   " "$tmp/$name.tap" | sed "s/^ */#     /" | head -40
    if [ "$rc" -ne 0 ] || [ "$count" -eq 0 ]; then
        bad "tests/$name exits $rc after $count tests"
        sed "s/^/#     /" "$tmp/$name.out" | tail -20
    fi
}

suite "" test_split
suite "" test_binding
# Three devices (a hybrid split needs them): on this machine, cpu:0 and two PoCL
# devices.
if [ "$topo" = native ] && "$bin" devices 2>/dev/null | grep -q "^cl:0"; then
    POCL_DEVICES="pthread pthread" suite "cpu:0 and 2 PoCL devices: " \
        test_split
fi

# MPI.
mpirun=${MPIRUN:-mpirun}
if [ ! -x "$build/tests/test_mpi" ] || ! command -v "$mpirun" >/dev/null 2>&1
then
    skip "MPI" "this build has no MPI"
elif [ "$topo" = multicore ]; then
    sh "$src/tests/test_mpi.sh" >"$tmp/mpi.log" 2>&1
    rc=$?
    before=$n
    failed=$fails
    while IFS= read -r line; do
        case $line in
        "ok: "*) ok "tests/test_mpi.sh: ${line#ok: }" ;;
        "FAIL: "*) bad "tests/test_mpi.sh: ${line#FAIL: }" ;;
        [Ss][Kk][Ii][Pp]": "*) skip "tests/test_mpi.sh" "${line#*: }" ;;
        "    "*) echo "#   $line" ;;
        esac
    done <"$tmp/mpi.log"
    count=$((n - before))
    if { [ "$rc" -ne 0 ] && [ "$fails" -eq "$failed" ]; } ||
       [ "$count" -eq 0 ]; then
        bad "tests/test_mpi.sh exits $rc after $count checks"
        sed "s/^/#     /" "$tmp/mpi.log" | tail -20
    fi
else
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    # Under AddressSanitizer, Open MPI's own leaks at exit go to files,
    # and a leak through shardnet's code fails below (tests/lsan_ours.sh).
    export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}exitcode=0:log_path=$tmp/lsan"
    . "$src/tests/lsan_ours.sh"
    t=$build/tests/test_mpi
    # mpirun's default binding for two processes: one core each, where the
    # machine has two; three processes on two cores run unbound.
    for np in 2 3; do
        if timeout 300 "$mpirun" --oversubscribe -np "$np" "$t" "$np" \
               >"$tmp/coll$np.log" 2>&1; then
            ok "mpirun -np $np tests/test_mpi (collectives)"
        else
            bad "mpirun -np $np tests/test_mpi (collectives)"
            sed "s/^/#     /" "$tmp/coll$np.log" | tail -20
        fi
    done
    for model in fashion_mlp small_cnn small_transformer; do
        m=$fix/$model.onnx
        in=$fix/${model}_input.npy
        "$bin" run "$m" -d cpu:0 --input "$in" -o "$tmp/one-$model" \
            >/dev/null 2>&1 || bad "$model on cpu:0"
        ref=$(ls "$tmp/one-$model"/*.npy 2>/dev/null | head -n 1)
        for case in "layer 0 default" "tensor 1e-4 default" \
                    "layer 0 none" "tensor 1e-4 none"; do
            set -- $case
            bind=
            [ "$3" = none ] && bind="--bind-to none"
            out=$tmp/$model-$1-$3
            if timeout 300 "$mpirun" -np 2 $bind "$bin" run "$m" \
                   -d 0/cpu:0,1/cpu:0 -s "$1" -m 3 --input "$in" -o "$out" \
                   >"$out.log" 2>&1 &&
               "$t" --compare "$ref" "$(ls "$out"/*.npy)" "$2" >"$out.cmp"
            then
                ok "$model, mpirun -np 2 (binding: $3), $1 over 0/cpu:0,1/cpu:0: $(cat "$out.cmp")"
            else
                bad "$model, mpirun -np 2 (binding: $3), $1 over 0/cpu:0,1/cpu:0"
                sed "s/^/#     /" "$out.log" "$out.cmp" 2>/dev/null | tail -20
            fi
        done
    done
    if lsan_leaks_ours "$tmp" "$src" >"$tmp/leaks.txt"; then
        bad "MPI runs leaked through shardnet's code"
        sed "s/^/#     /" "$tmp/leaks.txt"
    fi
fi

echo "1..$n"
note "$n checks, $fails failed"
[ "$fails" -eq 0 ]
