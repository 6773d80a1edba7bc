#!/bin/sh
# The README's main job: examples/fashion_mnist with its defaults runs on
# every device of the machine, prints the planner's choice and reaches the
# trained model's accuracy (89.28%, tools/train_fashion_mnist.py).
set -u
ex=${SHARDNET_EXAMPLE:-./examples/fashion_mnist}
data=/usr/share/datasets/fashion-mnist
if [ ! -r "$data/t10k-images-idx3-ubyte.gz" ]; then
    echo "SKIP: $data missing (Debian package dataset-fashion-mnist)"
    exit 77
fi
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
cd "${SHARDNET_SRCDIR:-.}" || exit 1
"$ex" >"$out" 2>&1
rc=$?
sed 's/^/    /' "$out"
fails=0
check() {
    if grep -Eq -- "$1" "$out"; then echo "ok: $2"; else
        echo "FAIL: $2 (no line matching '$1')"; fails=$((fails + 1)); fi
}
[ "$rc" -eq 0 ] || { echo "FAIL: exit status $rc"; fails=$((fails + 1)); }
ndev=$("${SHARDNET_BIN:-./shardnet}" devices | tail -n +2 | wc -l)
# Every device of the machine was considered: one estimate per device.
nest=$(grep -c '^  none on ' "$out")
if [ "$nest" -eq "$ndev" ]; then echo "ok: $ndev devices estimated"; else
    echo "FAIL: $nest single-device estimates, machine has $ndev devices"
    fails=$((fails + 1)); fi
check '^  choice: (none|layer|tensor|hybrid|data) \(estimated [0-9.]+ ms\)' "the choice is printed"
if [ "$ndev" -gt 1 ]; then
    check '^  choice: [a-z]+ \(estimated [0-9.]+ ms\): ' "the choice says why"
fi
check '^  running: ' "what runs is printed"
check 'accuracy 89\.[0-9]+%' "accuracy of the trained model"
check ' [0-9]+ images/s' "throughput"
echo "$(( 5 + (ndev > 1) - fails )) passed, $fails failed"
[ "$fails" -eq 0 ]
