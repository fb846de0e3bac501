#!/bin/sh
# Generates a golden directory (CASES in OUT/cases/ and OUT/manifest.json)
# from a catalogue, with `refenc golden`.  make uses it for the fixture of the
# bad-input catalogue (checks/robustness/golden_catalogue.json) and, as long
# as golden/manifest.json is not committed, as the cases the hardening
# targets iterate over.  The directory appears whole or not at all.
#
# usage: scripts/golden-fixture.sh REFENC CATALOGUE OUT
set -eu
refenc=$1 cat=$2 out=$3
tmp="$out.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
rm -rf "$tmp"
mkdir -p "$tmp/cases"
cases=$("$refenc" golden list "$cat")
for c in $cases; do
    "$refenc" golden --catalogue "$cat" --case "$c" --out-file "$tmp/cases/$c.safetensors" --quiet
done
"$refenc" golden manifest "$cat" "$tmp/cases" "$tmp/manifest.json"
rm -rf "$out"
mv "$tmp" "$out"
echo "golden fixture: $(echo "$cases" | wc -l) cases in $out"
