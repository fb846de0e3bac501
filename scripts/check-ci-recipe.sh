#!/bin/sh
# The plain shell CI recipe of docs/ci.md, taken from the page and run as it
# stands: on the reference's results for every golden case it must exit 0
# and write junit.xml, certificate.json and report.html; with one case's
# results broken it must exit 1, with that case failing in the JUnit file
# (a message with the verdict, the worst element and the diagnosis)
# and the certificate, and still write the report.
#
# usage: scripts/check-ci-recipe.sh REFENC_CLI OUT_DIR
set -eu
cli=${1:?usage: check-ci-recipe.sh REFENC_CLI OUT_DIR}
out=${2:?usage: check-ci-recipe.sh REFENC_CLI OUT_DIR}
cd "$(dirname "$0")/.."
rm -rf "$out" && mkdir -p "$out/results" && out=$(cd "$out" && pwd)
/usr/bin/python3 scripts/docs-block.py extract docs/ci.md ci-recipe > "$out/certify.sh"
[ -s "$out/certify.sh" ] || { echo "check-ci-recipe: no sh block in docs/ci.md" >&2; exit 1; }
# the recipe expects REFENC to be a built tree: this one
for f in golden/cases/*.safetensors; do
    "$cli" run --case "$f" --out "$out/results/$(basename "$f")" >/dev/null
done

run() { # run NAME: the recipe on $out/results, artifacts in $out/NAME; prints its exit code
    rc=0
    REFENC=$PWD RESULTS="$out/results" OUT="$out/$1" sh "$out/certify.sh" >"$out/$1.log" 2>&1 || rc=$?
    for a in junit.xml certificate.json report.html; do
        [ -s "$out/$1/$a" ] || { echo "check-ci-recipe: $1: no $a" >&2; cat "$out/$1.log" >&2; exit 1; }
    done
    echo $rc
}

[ "$(run pass)" = 0 ] || { echo "check-ci-recipe: the reference's results did not exit 0" >&2; exit 1; }
# one case broken: its output scaled by 1.01
PYTHONPATH=scripts/python PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 - "$out/results" <<'PY'
import sys, refenc
case = refenc.load_case("ffn_gelu")
case.write_results(sys.argv[1], {"output": case.expected["out.output"] * 1.01})
PY
[ "$(run fail)" = 1 ] || { echo "check-ci-recipe: a broken case did not exit 1" >&2; exit 1; }
grep -q 'ffn_gelu' "$out/fail/junit.xml" && grep -q '<failure' "$out/fail/junit.xml" ||
    { echo "check-ci-recipe: the JUnit file does not show ffn_gelu failing" >&2; exit 1; }
# the JUnit file parses, and the failure says why: the verdict, where, the diagnosis
/usr/bin/python3 -c "
import sys, xml.etree.ElementTree as E
f = [t.find('failure') for t in E.parse('$out/fail/junit.xml').iter('testcase') if t.get('classname') == 'ffn_gelu']
m = f[0].get('message') if f and f[0] is not None else ''
sys.exit(0 if m.startswith('FAIL: out.output[') and 'got ' in m and 'diagnosis: ' in m
         else 'check-ci-recipe: the JUnit failure does not explain itself: %r' % m)"
/usr/bin/python3 -c "
import json, sys
c = json.load(open('$out/fail/certificate.json'))
bad = [x['case'] for x in c['cases'] if x['verdict'] != 'PASS']
sys.exit(0 if bad == ['ffn_gelu'] else 'check-ci-recipe: failing cases %s, want [ffn_gelu]' % bad)"
echo "check-ci-recipe: the recipe of docs/ci.md exits 0 on the reference, 1 with a broken case, and writes the three artifacts"
