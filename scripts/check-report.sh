#!/bin/sh
# The HTML report as a browser draws it: a tiling bug planted in one block
# of 16 feature columns (scripts/python/report_stripe.py), the report of it
# rendered headless by Debian's chromium, and the screenshot's heatmap
# pixels checked: the out-of-tolerance colours fill exactly that block.
# Negative control: the next block planted fails the same check for the
# first block and passes it for its own.
#
# usage: scripts/check-report.sh REFENC_CLI OUT_DIR
set -eu
cli=${1:?usage: check-report.sh REFENC_CLI OUT_DIR}
out=${2:?usage: check-report.sh REFENC_CLI OUT_DIR}
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/scripts/python" PYTHONDONTWRITEBYTECODE=1
stripe=scripts/python/report_stripe.py
rm -rf "$out" && mkdir -p "$out"
out=$(cd "$out" && pwd)

render() { # render NAME C0 C1: plant columns [C0, C1), report, screenshot
    mkdir -p "$out/$1"
    /usr/bin/python3 $stripe plant golden "$out/$1" "$2" "$3"
    rc=0
    "$cli" report --golden golden --results "$out/$1" --case encoder_pre_alibi_h12 \
        --html "$out/$1/report.html" >/dev/null || rc=$?
    [ "$rc" = 1 ] || { echo "check-report: refenc report exited $rc, want 1 (a failing case)" >&2; exit 1; }
    timeout 120 chromium --headless --no-sandbox --disable-gpu --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$out/chromium-profile" --hide-scrollbars --force-device-scale-factor=1 \
        --window-size=1200,2000 --screenshot="$out/$1/report.png" "file://$out/$1/report.html" \
        >"$out/$1/chromium.log" 2>&1 || { cat "$out/$1/chromium.log" >&2; exit 1; }
    [ -s "$out/$1/report.png" ] || { echo "check-report: chromium wrote no screenshot" >&2; exit 1; }
}

render block16 16 32
/usr/bin/python3 $stripe check "$out/block16/report.html" "$out/block16/report.png" 16 32 48
render block32 32 48
/usr/bin/python3 $stripe check "$out/block32/report.html" "$out/block32/report.png" 32 48 48
rc=0
/usr/bin/python3 $stripe check "$out/block32/report.html" "$out/block32/report.png" 16 32 48 >/dev/null || rc=$?
[ "$rc" = 1 ] || { echo "check-report: the check of [16, 32) on the picture of [32, 48) exited $rc, want 1" >&2; exit 1; }
echo "check-report: the headless screenshot shows the planted block, and only it ($out/block16/report.png)"
