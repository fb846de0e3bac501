#!/bin/sh
# Runs the property suites (checks/properties/) under 20 different seeds
# (REFENC_SEED) and fails if any run fails.  A seed that fails is printed
# with the command that replays it.
#
# usage: scripts/property-seeds.sh [SEED ...]
#   Without arguments the seeds are 1 .. 20 (the suites' default seed,
#   used by make check, is another one: TEST_DEFAULT_SEED in
#   checks/common/testutil.h).
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/property-suites.sh"   # PROPERTY_FILTER

make -C "$root" build/checks/refenc-checks >/dev/null
# a private copy, so that a rebuild during the run cannot change the binary
tmp=$(mktemp -d "${TMPDIR:-/tmp}/refenc-seeds.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
bin="$tmp/refenc-checks"
cp "$root/build/checks/refenc-checks" "$bin"

seeds=${*:-$(seq 1 20)}
failed=""
n=0
for s in $seeds; do
    n=$((n + 1))
    log="$tmp/seed-$s.log"
    if REFENC_SEED=$s "$bin" --filter "$PROPERTY_FILTER" --jobs=2 >"$log" 2>&1; then
        printf 'seed %-6s %s\n' "$s" "$(tail -n 1 "$log")"
    else
        printf 'seed %-6s FAILED: %s\n' "$s" "$(tail -n 1 "$log")"
        grep -E '^\[FAIL\]|Assertion Failed' -A2 "$log" | sed 's/^/    /'
        echo "    replay: REFENC_SEED=$s build/checks/refenc-checks --filter '$PROPERTY_FILTER'"
        failed="$failed $s"
    fi
    rm -f "$log"
done

if [ -n "$failed" ]; then
    echo "property suites failed under seed(s):$failed"
    exit 1
fi
echo "property suites passed under all $n seeds"
