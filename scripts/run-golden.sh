#!/bin/sh
# Runs the reference on every golden case (`refenc run --case`) and certifies
# the results (`refenc certify`, with a JSON certificate): every case must
# pass.  Used by `make coverage` and `make sanitize` with their own builds of
# the program, so that the CLI's whole path through the golden files is
# measured and checked.
#
# usage: scripts/run-golden.sh REFENC GOLDEN_DIR OUT_DIR
set -eu
cli=$1 golden=$2 out=$3
rm -rf "$out"
mkdir -p "$out/results"
cases=$(sh "$(dirname "$0")/golden-cases.sh" "$golden")
echo "$cases" | while read -r name file; do
    "$cli" run --case "$golden/cases/$file" --out "$out/results/$name.safetensors" >/dev/null
done
n=$(echo "$cases" | wc -l)
if ! "$cli" certify --golden "$golden" --results "$out/results" --json "$out/certificate.json" \
        --quiet >"$out/certify.log"; then
    cat "$out/certify.log"
    echo "run-golden: $cli: the reference does not certify (report in $out/certify.log)" >&2
    exit 1
fi
tail -n 1 "$out/certify.log"
echo "run-golden: $cli ran and certified $n golden cases from $golden"
