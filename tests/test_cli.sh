#!/bin/sh
# The shardnet command: help, version, device listing, matmul, bad input.
# Run by `make check` with SHARDNET_BIN set (see Makefile.am).
set -u
bin=${SHARDNET_BIN:-./shardnet}
fails=0
passes=0
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT

# expect STATUS PATTERN CMD...: run CMD, check its exit status and that its
# output (stdout and stderr) contains PATTERN (a grep -E pattern).
expect() {
    want=$1 pattern=$2
    shift 2
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
expect 2 "bad --size" "$bin" matmul --size 0
expect 2 "bad --size" "$bin" matmul --size 7x13
expect 0 "cpu:0 .* ok" "$bin" matmul --devices cpu:0 --size 7x13x5 --repeat 1

if [ "${HWLOC_SYNTHETIC:-}" = "pack:2 core:1 pu:1" ]; then
    expect 0 "^cpu:1 .* 1 .* 1 " "$bin" devices --devices cpu:1
    if "$bin" devices | grep -q "^cl:"; then
        # The acceptance listing: cpu:0 cpu:1 cl:0 cl:1, in that order.
        "$bin" devices | awk 'NR > 1 { printf "%s ", $1 }' >"$out"
        if [ "$(cat "$out")" = "cpu:0 cpu:1 cl:0 cl:1 " ]; then
            echo "ok: devices lists cpu:0 cpu:1 cl:0 cl:1"
            passes=$((passes + 1))
        else
            echo "FAIL: devices lists '$(cat "$out")'"
            fails=$((fails + 1))
        fi
        expect 0 "cl:1 .* ok" "$bin" matmul -d cl:1 -s 33x17x65 -r 1
    fi
fi

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
