#!/bin/sh
# make check-parallel: the GNU parallel recipe of docs/certify.md ("Long
# runs"), the block between <!-- parallel-recipe:begin --> and its end, run
# as it stands on this machine: 4 shards of a small model two at a time, then
# the merge; the merged case must be byte for byte the unsharded one, and
# certify must pass the reference on it.  Installs Debian's parallel if it
# is missing (scripts/install-deps.sh).
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
summary
