#!/bin/sh
# The HTML report at a real size (docs/certify.md, "The HTML report"): a
# golden case of D 256, L 128 (2 layers, 4 heads, F 1024, B 2) made by
# `refenc golden` (about 7 s on one core), results computed by `refenc run
# --case` in emulated bfloat16 with a known bug, and for each:
#   - the report is at most MAX_BYTES (2 MB);
#   - in chromium, headless, at 1200 x 900, the page's first output block is
#     a failing output's and its heatmap starts on the first screen
#     (scripts/python/report_first_screen.py).
# Two bugs: missing_final_norm (out.output fails, every other output passes:
# in forward order it is the last), attention_unscaled (every output from the
# first attention weights on fails: the largest default page).
# Negative controls: the first report with its failing block moved after the
# passing ones (the old order) fails the first-screen check; the size check
# rejects the report with --heatmaps all --full-heatmaps (every element of
# every output, several MB).
#
# usage: scripts/check-report-size.sh REFENC_CLI OUT_DIR
set -eu
cli=${1:?usage: check-report-size.sh REFENC_CLI OUT_DIR}
out=${2:?usage: check-report-size.sh REFENC_CLI OUT_DIR}
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1
screen=scripts/python/report_first_screen.py
MAX_BYTES=2000000
rm -rf "$out" && mkdir -p "$out"
out=$(cd "$out" && pwd)

cat >"$out/d256_l128.json" <<'EOF'
{
  "model": { "d_model": 256, "n_heads": 4, "d_ff": 1024, "n_layers": 2,
             "norm": "pre", "activation": "gelu", "positional": "rope" },
  "input": { "batch": 2, "seq_len": 128 }
}
EOF
"$cli" golden --config "$out/d256_l128.json" --no-variants --quiet --out "$out/golden" >/dev/null

size_ok() { # size_ok FILE: 0 when FILE is at most MAX_BYTES
    bytes=$(wc -c <"$1")
    echo "check-report-size: $1: $bytes bytes (limit $MAX_BYTES)"
    [ "$bytes" -le "$MAX_BYTES" ]
}

report() { # report BUG [OPTIONS...]: results with BUG, the report of them in $out/BUG/report.html
    bug=$1
    shift
    mkdir -p "$out/$bug/results"
    "$cli" run --case "$out/golden/cases/d256_l128.safetensors" --emulate bf16 --bug "$bug" \
        --out "$out/$bug/results/d256_l128.safetensors" >/dev/null
    rc=0
    "$cli" report --golden "$out/golden" --results "$out/$bug/results" --html "$out/$bug/report.html" "$@" \
        >/dev/null || rc=$?
    [ "$rc" = 1 ] || { echo "check-report-size: refenc report exited $rc, want 1 (a failing case)" >&2; exit 1; }
}

for bug in missing_final_norm attention_unscaled; do
    report $bug
    size_ok "$out/$bug/report.html" || { echo "check-report-size: the report of $bug is over 2 MB" >&2; exit 1; }
    /usr/bin/python3 $screen check "$out/$bug/report.html" "$out/$bug/screen" ||
        { echo "check-report-size: the failing output of $bug is not on the first screen" >&2; exit 1; }
done

# negative controls
/usr/bin/python3 $screen bury "$out/missing_final_norm/report.html" "$out/buried.html"
rc=0
/usr/bin/python3 $screen check "$out/buried.html" "$out/buried-screen" || rc=$?
[ "$rc" = 1 ] || { echo "check-report-size: the buried failing output passed the first-screen check" >&2; exit 1; }
"$cli" report --golden "$out/golden" --results "$out/attention_unscaled/results" --html "$out/full.html" \
    --heatmaps all --full-heatmaps >/dev/null || true
if size_ok "$out/full.html"; then
    echo "check-report-size: the full-resolution report is not over 2 MB: the size check cannot fail" >&2
    exit 1
fi
echo "check-report-size: D 256, L 128 reports under 2 MB, the failing output on the first screen; controls rejected"
