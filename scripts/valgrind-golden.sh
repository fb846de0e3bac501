#!/usr/bin/env bash
# Runs the refenc program under valgrind's memcheck on golden cases: for the
# smallest case of each component in the manifest, `refenc run --case` and
# `refenc certify` (exit 0), then certify on results files that are wrong in
# one way: truncated in the header and in the data (exit 2), a NaN in an
# output (exit 1), the results of another case (exit 2), missing (exit 1).
# Fails if any run reports a memory error or a leak, or exits with another
# code than expected.
#
# usage: scripts/valgrind-golden.sh REFENC GOLDEN_DIR
# Installs valgrind and jq through scripts/install-deps.sh when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
cli=$1 golden=$2
sh scripts/install-deps.sh valgrind jq
if [ ! -x "$cli" ]; then
    echo "valgrind-golden: $cli not found: run 'make' first" >&2
    exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/results" "$tmp/bad"

runs=0
failures=0
# vg EXPECTED_EXIT WHAT ARGS...: one valgrind run of the program
vg() {
    local expected=$1 what=$2 rc
    shift 2
    runs=$((runs + 1))
    set +e
    valgrind --quiet --leak-check=full --show-leak-kinds=definite,indirect,possible \
        --errors-for-leak-kinds=definite,indirect,possible --error-exitcode=99 \
        --log-file="$tmp/valgrind.log" "$cli" "$@" >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    set -e
    if [ "$rc" -eq "$expected" ] && [ ! -s "$tmp/valgrind.log" ]; then
        echo "ok    exit $rc  $what"
    else
        failures=$((failures + 1))
        echo "FAIL  exit $rc (want $expected)  $what"
        sed 's/^/      /' "$tmp/stderr" "$tmp/valgrind.log"
    fi
}

# the smallest case of each component
picked=$(jq -r '.cases | group_by(.component) | map(min_by(.bytes)) | .[] | "\(.case) \(.file)"' \
    "$golden/manifest.json")
if [ -z "$picked" ]; then
    echo "valgrind-golden: no case in $golden/manifest.json" >&2
    exit 2
fi
while read -r name file; do
    vg 0 "run --case $name" run --case "$golden/cases/$file" --out "$tmp/results/$name.safetensors"
    vg 0 "certify $name" certify --golden "$golden" --results "$tmp/results" --case "$name" \
        --json "$tmp/report.json"
done <<<"$picked"

# results files wrong in one way, for the first case picked
read -r name file <<<"$(head -n 1 <<<"$picked")"
other=$(sed -n 2p <<<"$picked" | cut -d' ' -f1)
good="$tmp/results/$name.safetensors"
hlen=$(od -An -tu8 -N8 "$good" | tr -d ' ')
size=$(stat -c %s "$good")
bad() { # bad EXPECTED_EXIT WHAT: certify $tmp/bad/$name.safetensors
    vg "$1" "certify: $2" certify --golden "$golden" --results "$tmp/bad" --case "$name" \
        --json "$tmp/bad-report.json"
}
head -c $((8 + hlen / 2)) "$good" >"$tmp/bad/$name.safetensors"
bad 2 "results truncated in the header"
head -c $((size - 3)) "$good" >"$tmp/bad/$name.safetensors"
bad 2 "results truncated in the data"
cp "$good" "$tmp/bad/$name.safetensors"
# a NaN (little-endian F64 0x7ff8000000000001) over the first element of the first tensor
printf '\001\000\000\000\000\000\370\177' |
    dd of="$tmp/bad/$name.safetensors" bs=1 seek=$((8 + hlen)) conv=notrunc status=none
bad 1 "a NaN in an output"
if [ -n "$other" ]; then
    cp "$tmp/results/$other.safetensors" "$tmp/bad/$name.safetensors"
    bad 2 "the results of case $other"
fi
rm -f "$tmp/bad/$name.safetensors"
bad 1 "no results file"

echo "valgrind: $runs runs, $failures failed"
[ "$failures" -eq 0 ]
