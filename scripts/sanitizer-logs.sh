#!/bin/sh
# make sanitize's verdict on what the sanitizers reported (docs/hardening.md).
#
# The sanitized runs write every report to files (ASAN_OPTIONS and
# UBSAN_OPTIONS log_path=DIR/asan, DIR/ubsan; a file per process that
# reports): Criterion ignores how a test's worker exits once its test has
# passed, so a leak found when a worker exits would otherwise print and be
# lost.
#
#   sanitizer-logs.sh check DIR      fails (exit 1) if DIR holds any report,
#                                    printing the start of each
#   sanitizer-logs.sh control PROBE  the negative control: runs PROBE (a
#                                    sanitized Criterion test that leaks) with
#                                    its own log directory and fails unless
#                                    LeakSanitizer's report is found there
set -u
case ${1:-} in
check)
    dir=$2
    n=$(find "$dir" -type f | wc -l)
    if [ "$n" -gt 0 ]; then
        for f in $(find "$dir" -type f | sort); do
            echo "== $f"
            head -n 30 "$f"
        done
        echo "sanitize: $n sanitizer report(s) in $dir: FAIL"
        exit 1
    fi
    echo "sanitize: no sanitizer report"
    ;;
control)
    probe=$2
    dir=$(mktemp -d "${TMPDIR:-/tmp}/refenc-sanitize-control-XXXXXX")
    ASAN_OPTIONS=detect_leaks=1:exitcode=86:log_path=$dir/asan "$probe" >/dev/null 2>&1
    if grep -q "ERROR: LeakSanitizer: detected memory leaks" "$dir"/asan.* 2>/dev/null; then
        echo "sanitize: control: the leak of checks/sanitize/leak_probe.c is reported"
        rm -rf "$dir"
    else
        echo "sanitize: control: the probe's leak was not reported: the leak check cannot fail"
        rm -rf "$dir"
        exit 1
    fi
    ;;
*)
    echo "usage: sanitizer-logs.sh check DIR | control PROBE" >&2
    exit 2
    ;;
esac
