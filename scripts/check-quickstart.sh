#!/bin/sh
# docs/quickstart.md, run as a newcomer runs it: each of its blocks, taken
# from the page by scripts/docs-block.py, in order, in a fresh directory
# that holds the built tree (its top-level entries linked, so nothing is
# written into the tree).  The files the page says to save are made the
# way it says: certify_torch.py from docs/python.md's 20 lines, certify.sh
# from docs/ci.md's plain shell recipe.  The install block (make demo, make
# check) is not run again here: it must be the README's own commands, which
# CI runs as its first steps.  Each block is timed.
#   check-quickstart.sh OUT_DIR
set -eu
out=${1:?usage: check-quickstart.sh OUT_DIR}
cd "$(dirname "$0")/.."
tree=$(pwd)
py=/usr/bin/python3
rm -rf "$out" && mkdir -p "$out" && out=$(cd "$out" && pwd)
fail() { echo "check-quickstart: $*" >&2; exit 1; }

# the install block is the README's
$py scripts/docs-block.py extract docs/quickstart.md quickstart-install > "$out/install.sh"
$py scripts/docs-block.py extract README.md readme-setup | sed 's/ *#.*//' > "$out/readme.sh"
cmp -s "$out/install.sh" "$out/readme.sh" || fail "the install block is not the README's commands: $(cat "$out/readme.sh")"

for e in "$tree"/*; do ln -s "$e" "$out/${e##*/}"; done
# the files the page says to save
$py scripts/docs-block.py extract docs/python.md python-20-lines > "$out/certify_torch.py"
$py scripts/docs-block.py extract docs/ci.md ci-recipe > "$out/certify.sh"
[ -s "$out/certify.sh" ] || fail "no recipe in docs/ci.md"

for block in quickstart-torch quickstart-c quickstart-golden quickstart-ci; do
    $py scripts/docs-block.py extract docs/quickstart.md "$block" > "$out/$block.sh"
    start=$(date +%s)
    (cd "$out" && PYTHONDONTWRITEBYTECODE=1 sh -eu "$block.sh") > "$out/$block.log" 2>&1 ||
        { cat "$out/$block.log" >&2; fail "block '$block' of docs/quickstart.md failed (log: $out/$block.log)"; }
    echo "check-quickstart: $block: ok ($(($(date +%s) - start)) s)"
done
grep -q "cases certified with BF16 results" "$out/quickstart-torch.log" || fail "the torch block certified nothing"
grep -q "2 shards merged: the same bytes" "$out/quickstart-golden.log" || fail "the merged golden differs"
for a in junit.xml certificate.json report.html; do
    [ -s "$out/artifacts/$a" ] || fail "the CI block wrote no artifacts/$a"
done
echo "check-quickstart: every block of docs/quickstart.md runs as written"
