#!/bin/sh
# The layers of the library, checked on every #include (docs/ARCHITECTURE.md
# draws them).  Usage: layering.sh [SRCDIR]; exit 0 when every include keeps
# to the layers, 1 (naming each file, include and rule) when one does not.
#
# lib/ has one folder per layer.  A file may include headers of its own
# folder and of the folders below its own, never above or beside:
#
#   api       context, model, session: the public entry points
#   runtime   the pipeline and tensor-split runtimes
#   plan      device profiles, cost model, the planners
#   passes    graph rewrites before planning
#   ops       the operators: their lowering into device programs
#   exec      lowering API, device programs, running them
#   import    ONNX, protobuf, tensor files      comm   collectives, MPI
#   ir        the graph
#   backend   the backend interface and the kernels' argument checks
#   core      status and errors, logging, clocks
#
# (import and comm sit side by side: neither may include the other.)
# backends/<kind>/ and cpu/ may include lib/backend and lib/core only;
# lib/ includes nothing of backends/, cpu/ or kernels_cl/.  Includes are
# written with their folder ("exec/exec.h"); a bare "x.h" is the file's own
# folder's (or, outside lib/, its own backend's).
#
# KNOWN lists the includes that still break the layers, each with the work
# that will remove it; an include found that is not listed fails, and so
# does a listed one that is gone (the list must stay true).
set -u
src=${1:-${SHARDNET_SRCDIR:-.}}
cd "$src" || exit 2

rank() {
    case $1 in
    core) echo 0 ;; backend) echo 1 ;; ir) echo 2 ;;
    import | comm) echo 3 ;; exec) echo 4 ;; ops) echo 5 ;; passes) echo 6 ;;
    plan) echo 7 ;; runtime) echo 8 ;; api) echo 9 ;;
    *) echo -1 ;;
    esac
}

KNOWN='
'

found=$(mktemp) || exit 2
trap 'rm -f "$found"' EXIT

# Every include that breaks a rule, as "FILE INCLUDE WHY" lines.
for f in $(find lib backends cpu -name '*.[ch]' | sort); do
    here=$(dirname "$f")
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        case $inc in shardnet.h | config.h) continue ;; esac
        case $f in
        lib/*)
            from=$(echo "$f" | cut -d/ -f2)
            case $inc in
            */*)
                to=${inc%%/*}
                rf=$(rank "$from") rt=$(rank "$to")
                if [ "$rt" -lt 0 ]; then
                    echo "$f $inc lib/$to is not a layer"
                elif [ "$to" != "$from" ] && [ "$rt" -ge "$rf" ]; then
                    echo "$f $inc lib/$from may not include lib/$to (not below it)"
                fi
                ;;
            *)
                [ -f "$here/$inc" ] ||
                    echo "$f $inc not a header of lib/$from (lib/ includes name their folder)"
                ;;
            esac
            ;;
        *)
            case $inc in
            backend/* | core/*) ;;
            */*) echo "$f $inc outside lib/, only lib/backend and lib/core" ;;
            *)
                [ -f "$here/$inc" ] || [ -f "cpu/$inc" ] ||
                    [ -f "kernels_cl/$inc" ] ||
                    echo "$f $inc not a header of its own backend"
                ;;
            esac
            ;;
        esac
    done
done >"$found"

fails=0
while read -r f inc why; do
    echo "$KNOWN" | grep -q "^$f $inc " && continue
    echo "layering: $f includes \"$inc\": $why"
    fails=$((fails + 1))
done <"$found"
known=0
while read -r f inc why; do
    [ -n "$f" ] || continue
    known=$((known + 1))
    grep -q "^$f $inc " "$found" && continue
    echo "layering: the known exception $f -> $inc is gone: take it off KNOWN"
    fails=$((fails + 1))
done <<END
$KNOWN
END

if [ "$fails" -ne 0 ]; then
    echo "layering: $fails includes break the layers"
    exit 1
fi
echo "layering: every include keeps to the layers ($known known exceptions)"
