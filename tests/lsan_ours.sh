# Sourced by the test scripts that run Open MPI under AddressSanitizer
# (tests/test_mpi.sh, tests/test_memory.sh).  Open MPI's own allocations at
# exit (some in components it has unloaded) are reported as leaks, so the
# processes write their reports to files (LSAN_OPTIONS exitcode=0 and
# log_path=DIR/lsan) instead of failing; then:
#
#   lsan_leaks_ours DIR SRC
#
# succeeds, printing the reports' frames, where a leak goes through
# shardnet's code: a function of ours, or a source line of this tree (SRC).
# A bare "(module+0xoffset)" frame is not one: LeakSanitizer names the
# module by address after Open MPI has closed its plugins, so their leaks
# can show up under any module, ours too.
lsan_leaks_ours() {
    ls "$1"/lsan.* >/dev/null 2>&1 || return 1
    line='[^ ]*\.[ch]:[0-9]'
    ours=" in (sn_|shardnet_|main )| (lib|backends|cpu|cli)/$line"
    ours="$ours|$(cd "$2" && pwd)/$line"
    grep -lE "$ours" "$1"/lsan.* >/dev/null 2>&1 || return 1
    grep -hE -B6 -A3 "$ours" "$1"/lsan.* | head -60
}
