#!/bin/sh
# tests/layering.sh, the include check of the library's layers: it passes
# on the tree as it is, and fails, naming the file and the rule, on copies
# of the tree each given one include that breaks a layer.
set -u
src=${SHARDNET_SRCDIR:-.}
check=$src/tests/layering.sh
passes=0 fails=0
pass() { echo "ok: $*"; passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

if out=$(sh "$check" "$src" 2>&1); then
    pass "the tree keeps to its layers: $out"
else
    fail "the tree breaks its layers"
    echo "$out" | sed 's/^/    /'
fi

# broken WHAT FILE LINE PATTERN: a copy of the tree with LINE added to
# FILE (or, with FILE of the form -FILE, LINE deleted from it) fails the
# check with a message matching PATTERN.
# copy_tree: the folders the check reads, into $tmp/t (its script not yet).
copy_tree() {
    rm -rf "$tmp/t" && mkdir -p "$tmp/t/tests" &&
        cp -R "$src/lib" "$src/backends" "$src/cpu" "$src/kernels_cl" "$tmp/t/"
}
broken() {
    copy_tree && cp "$check" "$tmp/t/tests/" ||
        { fail "$1: cannot copy the tree"; return; }
    case $2 in
    -*) f=${2#-}
        grep -vF "$3" "$tmp/t/$f" >"$tmp/edit" && cp "$tmp/edit" "$tmp/t/$f" ;;
    *) printf '%s\n' "$3" >>"$tmp/t/$2" ;;
    esac
    if out=$(sh "$tmp/t/tests/layering.sh" "$tmp/t" 2>&1); then
        fail "$1: the check passed"
    elif echo "$out" | grep -Eq "$4"; then
        pass "$1: $(echo "$out" | head -n 1)"
    else
        fail "$1: the check failed without saying '$4'"
        echo "$out" | sed 's/^/    /'
    fi
}
broken "core including the API layer" lib/core/status.c \
    '#include "api/session.h"' \
    'lib/core/status.c includes "api/session.h": lib/core may not include lib/api'
broken "the graph including the executor" lib/ir/graph.h \
    '#include "exec/exec.h"' 'lib/ir/graph.h includes "exec/exec.h"'
broken "import and comm side by side" lib/import/onnx.c \
    '#include "comm/world.h"' 'lib/import may not include lib/comm'
broken "a backend including the planner" backends/cpu/cpu.c \
    '#include "plan/profile.h"' 'backends/cpu/cpu.c includes "plan/profile.h": outside lib/'
broken "a lib header named without its folder" lib/exec/exec.c \
    '#include "graph.h"' 'not a header of lib/exec'
broken "lib/ including a backend's header" lib/exec/exec.c \
    '#include "cpu_kernels.h"' 'lib/exec/exec.c includes "cpu_kernels.h"'
# A known exception that no include matches any more: the list must stay
# true.  (The copy's KNOWN list is given one.)
copy_tree &&
    sed "/^KNOWN='\$/a lib/core/status.c api/gone.h a stale entry" "$check" \
        >"$tmp/t/tests/layering.sh"
if out=$(sh "$tmp/t/tests/layering.sh" "$tmp/t" 2>&1); then
    fail "a known exception that is gone: the check passed"
elif echo "$out" | grep -q "known exception lib/core/status.c -> api/gone.h is gone"; then
    pass "a known exception that is gone: $(echo "$out" | head -n 1)"
else
    fail "a known exception that is gone: the check failed without saying so"
    echo "$out" | sed 's/^/    /'
fi

echo "$passes passed, $fails failed, 0 skipped"
[ "$fails" -eq 0 ]
