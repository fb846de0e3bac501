#!/bin/sh
# Prints the coverage of ref/ per file (gcovr's table), per directory and in
# all, from gcovr's JSON summary; fails if the whole of ref/ is under
# MIN_LINES % of lines or MIN_BRANCHES % of branches.
#
# usage: scripts/coverage-summary.sh SUMMARY.json MIN_LINES MIN_BRANCHES
set -eu
summary=$1 min_lines=$2 min_branches=$3
dir=$(dirname "$summary")
[ -f "$dir/summary.txt" ] && cat "$dir/summary.txt"
echo
echo "coverage by directory:"
jq -r '
  def pct(a; b): if b == 0 then "   --" else ((a * 1000 / b + 0.5 | floor) / 10 | tostring) end;
  .files | group_by(.filename | sub("/[^/]*$"; ""))
  | map({dir: (.[0].filename | sub("/[^/]*$"; "")),
         lc: (map(.line_covered) | add), lt: (map(.line_total) | add),
         bc: (map(.branch_covered) | add), bt: (map(.branch_total) | add)})
  | .[] | "  \(.dir + "/*.c" | . + (" " * (16 - length)))lines \(pct(.lc; .lt))% (\(.lc)/\(.lt))   branches \(pct(.bc; .bt))% (\(.bc)/\(.bt))"
' "$summary"
jq -r --argjson ml "$min_lines" --argjson mb "$min_branches" '
  "  ref/ in all     lines \(.line_percent)% (\(.line_covered)/\(.line_total))   branches \(.branch_percent)% (\(.branch_covered)/\(.branch_total))   thresholds: \($ml)% lines, \($mb)% branches"
' "$summary"
echo "report: $dir/index.html (per-file, per-line detail), Cobertura XML: $dir/coverage.xml"

# the thresholds, on exact counts (covered * 100 >= min * total)
if ! jq -e --argjson ml "$min_lines" --argjson mb "$min_branches" \
    '(.line_covered * 100 >= $ml * .line_total) and (.branch_covered * 100 >= $mb * .branch_total)' \
    "$summary" >/dev/null; then
    echo "coverage: FAIL: ref/ is under the thresholds ($min_lines% lines, $min_branches% branches)" >&2
    exit 1
fi
echo "coverage: ok"
