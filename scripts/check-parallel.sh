#!/bin/sh
# make check-parallel: the GNU parallel recipe of docs/certify.md ("Long
# runs"), the block between <!-- parallel-recipe:begin --> and its end, run
# as it stands on this machine: 4 shards of a small model two at a time, then
# the merge; the merged case must be byte for byte the unsharded one, and
# certify must pass the reference on it.  Then the rerun: one part lost,
# one truncated, the same block run again as it stands redoes those two
# only and the case is again the unsharded one.  Installs Debian's parallel
# if it is missing (scripts/install-deps.sh).
#
# usage: scripts/check-parallel.sh REFENC_CLI OUT_DIR
# Prints a line per step and per check, then "N passed, N failed"; exit 1 if
# a check failed.
set -u
cd "$(dirname "$0")/.." || exit 1
me=check-parallel
cli=$(cd "$(dirname "${1:?usage: check-parallel.sh REFENC_CLI OUT_DIR}")" && pwd)/$(basename "$1")
out=${2:?usage: check-parallel.sh REFENC_CLI OUT_DIR}
# shellcheck source=scripts/shard-checks.sh
. scripts/shard-checks.sh

say "Debian's parallel, installed if missing"
sh scripts/install-deps.sh parallel || exit 1
rm -rf "$out" && mkdir -p "$out/work" && out=$(cd "$out" && pwd)
say "the model's files (scripts/shard-fixture.sh) in $out/work"
sh scripts/shard-fixture.sh "$cli" "$out/work" || exit 1
check "parallel is GNU parallel" sh -c 'parallel --version 2>/dev/null | grep -q "^GNU parallel"'
check "docs/certify.md has the parallel-recipe block" recipe parallel-recipe "$out/recipe.sh"
say "the recipe, as docs/certify.md writes it, refenc from $(dirname "$cli"):"
sed 's/^/    /' "$out/recipe.sh"
rc=0
(cd "$out/work" && PATH="$(dirname "$cli"):$PATH" timeout 120 sh -e "$out/recipe.sh") > "$out/recipe.log" 2>&1 || rc=$?
check "the recipe ran, exit 0 (got $rc)" [ "$rc" -eq 0 ]
[ "$rc" -eq 0 ] || sed 's/^/    | /' "$out/recipe.log"
verify_merged "$out/work" 4

# The rerun docs/certify.md describes: part 2 lost, part 4 truncated (a
# write cut short by hand: refenc's own are atomic), and the same block run
# again as it stands: parts 1 and 3 are kept (the same inode and time),
# part 4 is named and computed again, and the case is the unsharded one.
rerun_recipe() {
    w=$out/work
    say "the rerun: part 2 removed, part 4 truncated, the recipe run again as it stands"
    rm "$w/g/parts/bert.part-2-of-4.safetensors"
    head -c 1000 "$w/g/parts/bert.part-4-of-4.safetensors" >"$w/part-4.cut" &&
        mv "$w/part-4.cut" "$w/g/parts/bert.part-4-of-4.safetensors"
    stat -c '%n %i %.9Y' "$w"/g/parts/bert.part-[13]-of-4.safetensors >"$out/kept.txt"
    rc=0
    (cd "$w" && PATH="$(dirname "$cli"):$PATH" timeout 120 sh -e "$out/recipe.sh") >"$out/rerun.log" 2>&1 || rc=$?
    sed 's/^/    | /' "$out/rerun.log"
    check "the recipe ran again, exit 0 (got $rc)" [ "$rc" -eq 0 ]
    stat -c '%n %i %.9Y' "$w"/g/parts/bert.part-[13]-of-4.safetensors >"$out/after.txt"
    check "parts 1 and 3 were kept, not written again (the same inode and time)" cmp "$out/kept.txt" "$out/after.txt"
    check "the truncated part 4 is named and computed again" \
        grep -q "bert.part-4-of-4.safetensors: .*; computing shard 4/4 again" "$out/rerun.log"
    check "nothing is said of the parts kept" sh -c '! grep -q "part-[123]-of-4" "$1"' - "$out/rerun.log"
    rm -f "$w/unsharded.safetensors" "$w/whole-stack.safetensors"
    verify_merged "$w" 4
}
[ "$rc" -eq 0 ] && rerun_recipe
summary
