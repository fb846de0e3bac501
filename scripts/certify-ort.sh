#!/bin/sh
# Certifies ONNX Runtime against the golden cases, in float32, with graph
# optimisation off and fully on, and checks the pinned outcome
# (scripts/peers/ort/check_ort.py): every case passes except the float32
# hazards; fully on, ONNX Runtime ran its fused kernels; and with a known bug
# built into the models, the certifier names it.
#
#   1. scripts/peers/ort/build_models.py: an ONNX model of every case;
#   2. scripts/peers/ort/ort_peer.js with --opt disabled (ORT_DISABLE_ALL, every
#      output) and --opt all (ORT_ENABLE_ALL, the required outputs), each
#      certified with `refenc certify`;
#   3. the same with each bug build_models.py --list-bugs names built into the models;
#   4. check_ort.py.
#
# usage: scripts/certify-ort.sh REFENC_CLI OUT_DIR   (after scripts/install-ort.sh)
set -u
cli=${1:?usage: certify-ort.sh REFENC_CLI OUT_DIR}
out=${2:?usage: certify-ort.sh REFENC_CLI OUT_DIR}
peer=$(dirname "$0")/peers/ort
rm -rf "$out"
mkdir -p "$out"

# run MODELS MODE RESULTS CERTIFICATE [ARGS...]: the peer, then certify --json
run() {
    models=$1 mode=$2 results=$3 cert=$4
    shift 4
    node "$peer/ort_peer.js" --golden golden --models "$models" --out "$results" --opt "$mode" "$@" || exit 2
    "$cli" certify --golden golden --results "$results" --json "$cert" --quiet > "$cert.txt"
    rc=$?
    [ "$rc" -le 1 ] || { cat "$cert.txt"; echo "certify-ort: refenc certify failed with exit $rc" >&2; exit 2; }
}

/usr/bin/python3 "$peer/build_models.py" --golden golden --out "$out/models" || exit 2
for mode in disabled all; do
    run "$out/models" "$mode" "$out/results-$mode" "$out/certificate-$mode.json" --save-optimized "$out/optimized-$mode"
    echo
    echo "== refenc certify: ONNX Runtime float32, graph optimisation $mode"
    cat "$out/certificate-$mode.json.txt"
done

for bug in $(/usr/bin/python3 "$peer/build_models.py" --list-bugs); do
    /usr/bin/python3 "$peer/build_models.py" --golden golden --out "$out/models-$bug" --bug "$bug" >/dev/null || exit 2
    for mode in disabled all; do
        run "$out/models-$bug" "$mode" "$out/results-$bug-$mode" "$out/bug-$bug-$mode.json" >/dev/null
    done
done

/usr/bin/python3 "$peer/check_ort.py" --golden golden --work "$out"
