#!/bin/sh
# Certifies PyTorch against the golden cases in float64 and float32 and checks
# the expected outcome:
#   float64: every case passes;
#   float32: every case passes except those marked as float32 hazards in
#            golden/manifest.json (float32_hazard), which must fail.
# Anything else is an error: a float64 failure, a float32 failure not marked
# as a hazard, or a hazard case that float32 passes (the case would no longer
# expose its hazard).
#
# usage: scripts/certify-torch.sh REFENC_CLI OUT_DIR [GOLDEN_DIR]   (default golden)
set -u
cli=${1:?usage: certify-torch.sh REFENC_CLI OUT_DIR [GOLDEN_DIR]}
out=${2:?usage: certify-torch.sh REFENC_CLI OUT_DIR [GOLDEN_DIR]}
golden=${3:-golden}
here=$(dirname "$0")
mkdir -p "$out"

for dtype in float64 float32; do
    rm -rf "$out/torch-$dtype"
    /usr/bin/python3 "$here/peers/torch_peer.py" --golden "$golden" --out "$out/torch-$dtype" --dtype "$dtype" || exit 2
    echo
    echo "== refenc certify: PyTorch $dtype"
    "$cli" certify --golden "$golden" --results "$out/torch-$dtype" --json "$out/torch-$dtype.json" --quiet
    rc=$?
    [ "$rc" -le 1 ] || { echo "certify-torch: refenc certify failed with exit $rc" >&2; exit 2; }
done

/usr/bin/python3 - "$out" "$golden" <<'PY'
import json, sys
out, golden = sys.argv[1], sys.argv[2]
manifest = json.load(open(f"{golden}/manifest.json"))
hazards = {c["case"]: c["float32_hazard"] for c in manifest["cases"] if "float32_hazard" in c}
ok = True
for dtype in ("float64", "float32"):
    cert = json.load(open(f"{out}/torch-{dtype}.json"))
    verdict = {c["case"]: c["verdict"] for c in cert["cases"]}
    failed = {n for n, v in verdict.items() if v != "PASS"}
    expected = set(hazards) if dtype == "float32" else set()
    print(f"\nPyTorch {dtype}: {len(verdict) - len(failed)} of {len(verdict)} cases pass")
    for n in sorted(failed & expected):
        print(f"  {n}: FAIL, as expected: {hazards[n]}")
    for n in sorted(failed - expected):
        print(f"  {n}: FAIL, unexpected")
        ok = False
    for n in sorted(expected - failed):
        print(f"  {n}: PASS, but the case should expose a float32 hazard: {hazards[n]}")
        ok = False
print("\ncertify-torch:", "expected outcome (float64 passes everything; float32 fails exactly the float32 hazards)" if ok else "UNEXPECTED OUTCOME")
sys.exit(0 if ok else 1)
PY
