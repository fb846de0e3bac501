#!/bin/sh
# Lists the cases of a golden directory, from its manifest: one line per
# case, "CASE FILE" (FILE relative to DIR/cases/), in the manifest's order.
# Fails if the manifest is missing, malformed or lists no case.
#
# usage: scripts/golden-cases.sh DIR
set -eu
dir=$1
if [ ! -r "$dir/manifest.json" ]; then
    echo "golden-cases: $dir/manifest.json not found" >&2
    exit 2
fi
out=$(jq -r '.cases[] | "\(.case) \(.file)"' "$dir/manifest.json")
if [ -z "$out" ]; then
    echo "golden-cases: $dir/manifest.json lists no case" >&2
    exit 2
fi
printf '%s\n' "$out"
