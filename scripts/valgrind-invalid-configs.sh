#!/usr/bin/env bash
# Runs `refenc run --config FILE` under valgrind for every invalid config in
# checks/unit/bad_configs/ (the list checks/unit/test_cli_run.c uses), and
# once for each bundled example in docs/examples/.  Fails if any run leaks
# memory, reads or writes memory it should not, or exits with another code
# than expected (2 for an invalid config, 0 for an example).
#
# usage: scripts/valgrind-invalid-configs.sh [REFENC]     (default: build/refenc)
# Installs valgrind through scripts/install-deps.sh when it is missing.
# Takes about a second per config.
set -euo pipefail

cd "$(dirname "$0")/.."
cli=${1:-build/refenc}

if ! command -v valgrind >/dev/null 2>&1; then
    sh scripts/install-deps.sh valgrind
fi
if [ ! -x "$cli" ]; then
    echo "valgrind-invalid-configs: $cli not found: run 'make' first" >&2
    exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

runs=0
failures=0
# check EXPECTED_EXIT FILE: one valgrind run; 99 is valgrind's own error exit
check() {
    local expected=$1 file=$2 rc
    runs=$((runs + 1))
    set +e
    valgrind --quiet --leak-check=full --show-leak-kinds=definite,indirect,possible \
        --errors-for-leak-kinds=definite,indirect,possible --error-exitcode=99 \
        --log-file="$tmp/valgrind.log" "$cli" run --config "$file" >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    set -e
    if [ "$rc" -eq "$expected" ] && [ ! -s "$tmp/valgrind.log" ]; then
        echo "ok    exit $rc  $file"
    else
        failures=$((failures + 1))
        echo "FAIL  exit $rc (want $expected)  $file"
        sed 's/^/      /' "$tmp/stderr" "$tmp/valgrind.log"
    fi
}

shopt -s nullglob
configs=(checks/unit/bad_configs/*.json)
if [ ${#configs[@]} -eq 0 ]; then
    echo "valgrind-invalid-configs: no configs in checks/unit/bad_configs/" >&2
    exit 2
fi
for f in "${configs[@]}"; do
    check 2 "$f"
done
for f in docs/examples/*.json; do
    check 0 "$f"
done

echo "valgrind: $runs runs, $failures failed"
[ "$failures" -eq 0 ]
