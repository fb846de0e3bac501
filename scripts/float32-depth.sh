#!/bin/sh
# The float32 bound at depth (docs/verdict.md, "Float32: why the baseline"):
# a 12-layer GPT-2-like golden made by `refenc golden` (default D 768, H 12,
# F 3072, B 2, L 64: GPT-2's sizes but a vocabulary of 1000), then
#   - correct float32 code: refenc's float32 emulation in two summation
#     orders and libms, and the PyTorch peer in float32 when python3-torch
#     is installed: each certified by the float32 bound (must PASS) and by
#     the policy alone (--rtol 1.3e-6 --atol 1e-5, the fixed tolerance the
#     bound replaces: printed, not required to fail);
#   - every known bug that applies, in the float32 emulation: must FAIL.
# Prints each run's largest error over its bound (the certificate's
# "excess") and exits 1 if a correct run fails or a bug passes.
# A manual run, not part of make check (make check runs the same at D 64:
# checks/unit/test_verdict_rules.c, float32_at_twelve_layers); the oracle
# takes minutes at D 768 on one core.
#
# usage: scripts/float32-depth.sh REFENC_CLI WORK_DIR [D_MODEL N_HEADS D_FF]
set -u
cli=${1:?usage: float32-depth.sh REFENC_CLI WORK_DIR [D_MODEL N_HEADS D_FF]}
work=${2:?usage: float32-depth.sh REFENC_CLI WORK_DIR [D_MODEL N_HEADS D_FF]}
d=${3:-768} h=${4:-12} f=${5:-3072}
here=$(dirname "$0")
name=gpt2_12l_d$d
mkdir -p "$work"
cat > "$work/$name.json" <<EOF
{"model": {"family": "gpt2", "d_model": $d, "n_heads": $h, "d_ff": $f, "n_layers": 12,
           "vocab_size": 1000, "max_len": 128},
 "input": {"batch": 2, "seq_len": 64}}
EOF
golden="$work/golden"
case_file="$golden/cases/$name.safetensors"
if [ ! -f "$case_file" ]; then
    "$cli" golden --config "$work/$name.json" --quiet --out "$golden" || exit 2
fi

# excess CERT: the case's verdict and its largest error over its bound
excess() {
    /usr/bin/python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["cases"][0]
ex = [float(o["excess"]) for o in c["outputs"] if "excess" in o]
print(c["verdict"], "%.3g" % max(ex))' "$1"
}

# certify RESULTS_DIR LABEL EXPECT: the bound (must give EXPECT), then the policy alone
status=0
certify() {
    "$cli" certify --golden "$golden" --results "$1" --json "$1.json" --quiet >/dev/null
    got=$(excess "$1.json")
    "$cli" certify --golden "$golden" --results "$1" --json "$1.policy.json" --quiet --rtol 1.3e-6 --atol 1e-5 >/dev/null
    printf '%-40s bound: %-14s policy alone: %s\n' "$2" "$got" "$(excess "$1.policy.json")"
    case "$got" in "$3 "*) ;; *) echo "  WRONG: expected $3"; status=1 ;; esac
}

for mods in f32 f32,reverse,float-libm; do
    r="$work/emulate-$mods"
    mkdir -p "$r"
    "$cli" run --case "$case_file" --out "$r/$name.safetensors" --emulate "$mods" >/dev/null || exit 2
    certify "$r" "refenc run --emulate $mods" PASS
done
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    r="$work/torch-float32"
    /usr/bin/python3 "$here/peers/torch_peer.py" --golden "$golden" --out "$r" --dtype float32 >/dev/null || exit 2
    certify "$r" "PyTorch float32" PASS
fi
for bug in $("$cli" certify --list-bugs | grep -v '^ '); do
    r="$work/bug-$bug"
    mkdir -p "$r"
    "$cli" run --case "$case_file" --out "$r/$name.safetensors" --emulate f32 --bug "$bug" >/dev/null 2>&1 || continue
    certify "$r" "--bug $bug" FAIL
done
[ $status = 0 ] && echo "float32-depth: correct float32 passes at 12 layers, every known bug that applies fails"
exit $status
