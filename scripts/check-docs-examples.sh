#!/bin/sh
# Every example of the docs that no other check runs, taken from the page
# with scripts/docs-block.py and run as it stands, in a fresh directory that
# holds the built tree (its top-level entries linked, as
# check-quickstart.sh does).  What an example leaves to the reader (the
# reader's own model files, results directory or encoder program) is made
# first, with the name the example uses, and said so below; then the
# example's outcome is checked, not only its exit code.  First,
# scripts/docs-examples.py: every example of README.md and docs/ is run by
# some check (this one, check-quickstart, check-ci-recipe, check-parallel,
# check-slurm, check-numpy-reader) or says why not; and
# scripts/check-doc-refs.py: every reference to a section of the docs, in
# the code, the scripts and the docs, names a section that exists.  Each
# block is timed.
#
# usage: scripts/check-docs-examples.sh OUT_DIR
set -eu
out=${1:?usage: check-docs-examples.sh OUT_DIR}
cd "$(dirname "$0")/.."
tree=$(pwd)
py=/usr/bin/python3
cli=$tree/build/refenc
$py scripts/docs-examples.py > /dev/null || { $py scripts/docs-examples.py | grep MISSING >&2; exit 1; }
$py scripts/check-doc-refs.py || exit 1  # every "docs/X.md, \"Section\"" names a section that exists
rm -rf "$out" && mkdir -p "$out" && out=$(cd "$out" && pwd)
for e in "$tree"/*; do ln -s "$e" "$out/${e##*/}"; done
fail() { echo "check-docs-examples: $*" >&2; exit 1; }

# block FILE NAME [sh|make|json|c]: the block's text in $out/NAME.<ext>
block() {
    $py scripts/docs-block.py extract "$1" "$2" > "$out/$2.${3:-sh}" || fail "no block '$2' in $1"
}
# run NAME [ENV=VALUE...]: the block, in $out, under sh -eu; its log in $out/NAME.log
run() {
    name=$1 && shift
    start=$(date +%s)
    (cd "$out" && env "$@" PYTHONDONTWRITEBYTECODE=1 sh -eu "$name.sh") > "$out/$name.log" 2>&1 ||
        { tail -20 "$out/$name.log" >&2; fail "block '$name' failed (log: $out/$name.log)"; }
    echo "check-docs-examples: $name: ok ($(($(date +%s) - start)) s)"
}
expect() { # expect NAME PATTERN: the block's log has a line matching PATTERN
    grep -q -- "$2" "$out/$1.log" || { tail -20 "$out/$1.log" >&2; fail "block '$1': no line matching '$2'"; }
}

# --- README.md ------------------------------------------------------------
# RESULTS: the reader's results directory, here the reference's outputs
mkdir -p "$out/RESULTS"
for f in golden/cases/*.safetensors; do "$cli" run --case "$f" --out "$out/RESULTS/${f##*/}" > /dev/null; done
block README.md readme-certify && run readme-certify
[ -s "$out/certificate.json" ] && [ -s "$out/report.html" ] || fail "readme-certify wrote no certificate or report"
# bert.json, bert.safetensors, batch.safetensors: the reader's model, here a small exported one
$py scripts/peers/export_encoder.py --out "$out/own" --d-model 16 --heads 2 --d-ff 32 --layers 1 \
    --batch 1 --seq-len 4 > /dev/null
cp "$out/own/config.json" "$out/bert.json" && cp "$out/own/weights.safetensors" "$out/bert.safetensors"
cp "$out/own/inputs.safetensors" "$out/batch.safetensors"
block README.md readme-own-model && run readme-own-model
[ -s "$out/mygolden/manifest.json" ] || fail "readme-own-model made no golden"
rm -rf "$out/mygolden"

# --- docs/c-api.md: install, build the example peer, certify its results ----
home=$out/home && mkdir -p "$home"
block docs/c-api.md capi-install && run capi-install HOME="$home"
[ -z "$(find "$home" -type f)" ] || fail "capi-install: make uninstall left files: $(find "$home" -type f)"
make -s install PREFIX="$home/.local" > /dev/null
cp docs/examples/peer.c "$out/peer.c"
export PKG_CONFIG_PATH= # the block sets it
block docs/c-api.md capi-build && run capi-build PREFIX="$home/.local"
block docs/c-api.md capi-certify && run capi-certify PATH="$home/.local/bin:$PATH" PKG_CONFIG_PATH="$home/.local/lib/pkgconfig"
expect capi-certify "cases certified\|PASS"

# --- docs/gradients.md: the C fragment, inside a program that gives it its
# variables (a golden encoder case's config, parameters and input, a dY)
block docs/gradients.md grad-from-c c
cat > "$out/grad.c" <<'C'
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <refenc/refenc.h>

int main(int argc, char **argv)
{
    refenc_error err = {0};
    refenc_st_file golden;
    refenc_case c;
    if (argc != 2 || refenc_st_read(&golden, argv[1], &err) != REFENC_OK ||
        refenc_case_from_file(&c, &golden, &err) != REFENC_OK) {
        fprintf(stderr, "grad: %s\n", err.message);
        return 2;
    }
    const refenc_config cfg = c.cfg;
    const refenc_params params = c.params;
    const refenc_input in = refenc_case_input(&c);
    const size_t B = c.B, L = c.L, n = B * L * cfg.d_model;
    double *dY = calloc(n, sizeof *dY), *dx = NULL;
    for (size_t i = 0; i < n; i++)
        dY[i] = (double)(i % 7) - 3.0;
#include "grad-from-c.c"
    if (err.status != REFENC_OK || t == NULL) {
        fprintf(stderr, "grad: %s\n", t == NULL ? "no layers.0.linear1.weight" : err.message);
        return 1;
    }
    double s = 0;
    for (size_t i = 0; i < t->size; i++)
        s += fabs(t->data[i]);
    printf("dW1: %zu values, sum of |dW1| %.6g\n", t->size, s);
    return !(s > 0 && isfinite(s));
}
C
cat > "$out/grad.sh" <<SH
cc -std=c11 -O2 -I. grad.c \$(pkg-config --cflags --libs refenc) -lm -o grad
LD_LIBRARY_PATH=$home/.local/lib ./grad golden/cases/encoder_causal.safetensors
SH
run grad PKG_CONFIG_PATH="$home/.local/lib/pkgconfig"
expect grad "dW1: "
make -s uninstall PREFIX="$home/.local" > /dev/null

# --- docs/cli.md, docs/families.md, docs/rope-scaling.md: the configs -------
block docs/cli.md cli-config json && "$cli" run --config "$out/cli-config.json" > /dev/null ||
    fail "docs/cli.md's config is refused"
block docs/families.md families-small-bert json && "$cli" run --config "$out/families-small-bert.json" > /dev/null ||
    fail "docs/families.md's config is refused"
block docs/families.md families-small-llama json && "$cli" run --config "$out/families-small-llama.json" > /dev/null ||
    fail "docs/families.md's llama config is refused"
block docs/families.md families-small-gemma3 json && "$cli" run --config "$out/families-small-gemma3.json" > /dev/null ||
    fail "docs/families.md's gemma3 config is refused"
# a fragment of a model object: inside a small model
block docs/rope-scaling.md rope-scaling-config json
{ echo '{"model": {"d_model": 16, "n_heads": 2, "d_ff": 32, "n_layers": 1,'
  cat "$out/rope-scaling-config.json"; echo '}, "input": {"batch": 1, "seq_len": 4}}'; } > "$out/rope-model.json"
"$cli" run --config "$out/rope-model.json" > /dev/null || fail "docs/rope-scaling.md's fragment is refused"
echo "check-docs-examples: cli-config, families-small-bert, families-small-llama, families-small-gemma3, rope-scaling-config: accepted by refenc run"

# --- docs/certify.md --------------------------------------------------------
block docs/certify.md torch-peer-by-hand && run torch-peer-by-hand
expect torch-peer-by-hand "PASS"
block docs/certify.md own-golden-export && run own-golden-export
block docs/certify.md own-golden-make && run own-golden-make
block docs/certify.md own-golden-certify && run own-golden-certify
[ "$(grep -c '^bert2 .*PASS' "$out/own-golden-certify.log")" = 2 ] || fail "own-golden-certify: bert2 did not PASS twice"
# the make recipe: on the small model of the sharding checks, refenc on PATH
sh scripts/shard-fixture.sh "$cli" "$out/mk" > /dev/null
block docs/certify.md make-recipe make && cp "$out/make-recipe.make" "$out/mk/Makefile"
start=$(date +%s)
PATH="$tree/build:$PATH" make -s -C "$out/mk" -j2 > "$out/make-recipe.log" 2>&1 ||
    { cat "$out/make-recipe.log" >&2; fail "the make recipe failed"; }
(cd "$out/mk" && "$cli" golden --config bert.json --weights w.safetensors --inputs i.safetensors \
    --per-layer --quiet --out whole > /dev/null) # the same paths: the case's description names them
cmp -s "$out/mk/g/cases/bert.safetensors" "$out/mk/whole/cases/bert.safetensors" ||
    fail "the make recipe's merged case is not the unsharded one"
echo "check-docs-examples: make-recipe: ok, 8 shards merged: the same bytes ($(($(date +%s) - start)) s)"
block docs/certify.md ort-by-hand && run ort-by-hand
expect ort-by-hand "cases certified\|PASS"

# --- docs/ci.md: build a clone, run an encoder, the recipe, pytest, report --
# run-my-encoder: the reader's program, here the reference on every case
cat > "$out/run-my-encoder" <<SH
#!/bin/sh
# usage: run-my-encoder --golden DIR --out DIR
mkdir -p "\$4"
for f in "\$2"/cases/*.safetensors; do refenc/build/refenc run --case "\$f" --out "\$4/\${f##*/}" >/dev/null; done
SH
chmod +x "$out/run-my-encoder"
block docs/ci.md ci-recipe && mv "$out/ci-recipe.sh" "$out/certify.sh"
rm "$out/refenc" 2>/dev/null || true
block docs/ci.md ci-build && run ci-build REFENC_REPO="file://$tree"
expect ci-build "certify exited 0"
mkdir -p "$out/tests" && cp docs/examples/test_torch_encoder.py "$out/tests/"
block docs/ci.md ci-pytest && run ci-pytest
block docs/ci.md ci-pytest-report && run ci-pytest-report
[ -s "$out/artifacts/junit.xml" ] && [ -s "$out/artifacts/report.html" ] || fail "ci-pytest wrote no JUnit or report"

# --- docs/python.md: the transcripts' summary lines are the pinned outcomes'
$py - "$tree" <<'PY'
import collections, re, subprocess, sys
tree = sys.argv[1]
def summary(pinned):
    n = collections.Counter(line.split()[-1] for line in open(f"{tree}/scripts/python/{pinned}") if line.strip()
                            and not line.startswith("#"))
    return n
for block, pinned in (("python-example-pytest", "example-outcomes.txt"), ("python-peer-pytest", "peer-outcomes.txt")):
    text = subprocess.run(["/usr/bin/python3", f"{tree}/scripts/docs-block.py", "extract", f"{tree}/docs/python.md",
                           block], capture_output=True, text=True, check=True).stdout
    last = text.strip().splitlines()[-1]
    said = {w: int(k) for k, w in re.findall(r"(\d+) (passed|skipped|xfailed|failed|xpassed)", last)}
    have = {k: v for k, v in summary(pinned).items() if v}
    if said != have:
        sys.exit(f"check-docs-examples: docs/python.md's {block} says '{last}', its pinned outcomes are {have}")
    print(f"check-docs-examples: {block}: '{last}' is what scripts/python/{pinned} pins")
PY
echo "check-docs-examples: every example of the docs runs as written"
