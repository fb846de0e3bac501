#!/bin/sh
# make golden-large: the realistic suite (golden/catalogue-large.json), too
# big to commit, generated into OUT (OUT/cases/, OUT/manifest.json) with
# refenc golden -- one case at a time on every core, with its progress on a
# terminal -- and checked against the committed checksums SUMS.  With
# RESUME=1 a case already in OUT with the right checksum is kept (to finish
# an interrupted run); with UPDATE=1 the checksums are written instead
# (after a change to the catalogue or to the oracle's output).
#
# usage: scripts/golden-large.sh REFENC CATALOGUE SUMS OUT
set -eu
refenc=$1 cat=$2 sums=$3 out=$4
mkdir -p "$out/cases"
cases=$("$refenc" golden list "$cat")
n=$(echo "$cases" | wc -l)
i=0
for c in $cases; do
    i=$((i + 1))
    f="$out/cases/$c.safetensors"
    want=$(sed -n "s/^\([0-9a-f]*\)  $c.safetensors\$/\1/p" "$sums" 2>/dev/null || true)
    if [ "${RESUME:-0}" = 1 ] && [ -f "$f" ] && [ -n "$want" ] &&
        [ "$(sha256sum "$f" | cut -d' ' -f1)" = "$want" ]; then
        echo "golden-large: [$i/$n] $c: present, checksum right"
        continue
    fi
    echo "golden-large: [$i/$n] $c"
    start=$(date +%s)
    "$refenc" golden --catalogue "$cat" --case "$c" --out-file "$f"
    echo "golden-large: [$i/$n] $c: $(($(date +%s) - start)) s"
done
"$refenc" golden manifest "$cat" "$out/cases" "$out/manifest.json"

if [ "${UPDATE:-0}" = 1 ]; then
    (cd "$out/cases" && for c in $cases; do sha256sum "$c.safetensors"; done) > "$sums"
    echo "golden-large: $n checksums written to $sums"
    exit 0
fi
listed=$(cut -d' ' -f3 "$sums" | sed 's/\.safetensors$//' | sort | tr '\n' ' ')
catalogued=$(echo "$cases" | sort | tr '\n' ' ')
if [ "$listed" != "$catalogued" ]; then
    echo "golden-large: $sums lists [$listed], the catalogue [$catalogued]: make golden-large UPDATE=1" >&2
    exit 1
fi
sums_abs=$(realpath "$sums")
(cd "$out/cases" && sha256sum --quiet -c "$sums_abs") || {
    echo "golden-large: a case differs from its committed checksum" >&2
    exit 1
}
echo "golden-large: $n cases in $out, every checksum right ($(du -sh "$out/cases" | cut -f1))"
