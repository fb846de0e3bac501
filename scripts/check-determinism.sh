#!/bin/sh
# Determinism across builds: the reference built with different compilers
# and optimisation levels must compute bit-identical outputs.  For every
# golden case in the manifest, each build's `refenc run --case` writes a
# results file; the files must be byte-identical (cmp) to the first build's.
# The bundled example configs are run too (`refenc run --config --trace`),
# whose printed statistics, first values (%.17g) and fingerprint (FNV-1a of
# the output's bytes) must be identical.
#
# usage: scripts/check-determinism.sh GOLDEN_DIR BUILD_ROOT VARIANT...
#   each VARIANT is a build directory BUILD_ROOT/VARIANT holding refenc.
set -eu
golden=$1 root=$2
shift 2
[ $# -ge 2 ] || { echo "check-determinism: give at least two variants" >&2; exit 2; }
cases=$(sh "$(dirname "$0")/golden-cases.sh" "$golden")
first=$1
for v in "$@"; do
    [ -x "$root/$v/refenc" ] || { echo "check-determinism: $root/$v/refenc not built" >&2; exit 2; }
    rm -rf "$root/$v/results"
    mkdir -p "$root/$v/results"
    echo "$cases" | while read -r name file; do
        "$root/$v/refenc" run --case "$golden/cases/$file" --out "$root/$v/results/$name.safetensors" >/dev/null
    done
    for ex in docs/examples/*.json; do
        "$root/$v/refenc" run --config "$ex" --trace >"$root/$v/results/$(basename "$ex" .json).trace"
    done
done

n_cases=$(echo "$cases" | wc -l)
differ=0
for v in "$@"; do
    [ "$v" = "$first" ] && continue
    for f in "$root/$first/results"/*; do
        if ! cmp -s "$f" "$root/$v/results/$(basename "$f")"; then
            echo "DIFFER  $v vs $first: $(basename "$f")"
            cmp "$f" "$root/$v/results/$(basename "$f")" || true
            differ=$((differ + 1))
        fi
    done
done
n_files=$(ls "$root/$first/results" | wc -l)
echo "determinism: $# builds ($*), $n_cases golden cases and $((n_files - n_cases)) example runs each: \
$differ file(s) differ"
[ "$differ" -eq 0 ]
