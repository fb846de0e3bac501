#!/usr/bin/python3
"""The planted tiling bug of `make check-report`, and the check of its
picture as a browser draws it.

    report_stripe.py plant GOLDEN RESULTS C0 C1
        RESULTS/encoder_pre_alibi_h12.safetensors: the golden out.output
        (2 x 7 x 48) rounded to float32, with 1e-3 added to the features
        [C0, C1) of every position: one wrong tile of 16 columns.
    report_stripe.py check REPORT.html SCREENSHOT.png C0 C1 COLS
        In the screenshot, finds the heatmap panels (runs of at least 40
        pixels of the report's heatmap colours on a pixel row) and checks that
        on every such row the out-of-tolerance colours fill exactly the
        panel's columns [C0, C1) of COLS, to within 2 pixels at each edge, and
        nothing else.  Exit 0 when the stripe is there, 1 when not.

The heatmap colours and which of them are out of tolerance come from the
report's legend (<span class="c-hot" style="background:#rrggbb">).
"""
import re
import sys

import numpy as np

CASE = "encoder_pre_alibi_h12"
MIN_RUN = 40  # pixels: longer than any legend swatch, shorter than a panel


def rgb(h):
    return tuple(int(h[i:i + 2], 16) for i in (1, 3, 5))


def plant(golden, results, c0, c1):
    import refenc
    case = refenc.load_case(CASE, golden)
    y = case.expected["out.output"].copy()
    y[..., c0:c1] += 1e-3
    case.write_results(results, {"output": y}, dtype="F32")


def runs(mask):
    """[start, end) of the runs of True in a 1-D boolean array."""
    d = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1)))


def legend(html):
    """(every heatmap colour, the out-of-tolerance ones) from the report's legend."""
    spans = re.findall(r'<span class="(c-[a-z]+)" style="background:(#[0-9a-f]{6})">', open(html).read())
    if not spans or not any(c == "c-hot" for c, _ in spans):
        raise SystemExit(f"report_stripe: {html}: no heatmap legend")
    return [h for _, h in spans], [h for c, h in spans if c == "c-hot"]


def check(html, png, c0, c1, cols):
    from PIL import Image
    every, hot_colours = legend(html)
    img = np.asarray(Image.open(png).convert("RGB")).astype(np.int32)
    code = (img[..., 0] << 16) | (img[..., 1] << 8) | img[..., 2]
    key = lambda colours: np.array([(r << 16) | (g << 8) | b for r, g, b in map(rgb, colours)])
    hot = np.isin(code, key(hot_colours))
    cell = np.isin(code, key(every))
    rows_ok, bad = 0, []
    for y in range(img.shape[0]):
        panels = [(a, b) for a, b in runs(cell[y]) if b - a >= MIN_RUN]
        for a, b in panels:
            w = b - a
            want = (a + w * c0 / cols, a + w * c1 / cols)
            got = runs(hot[y, a:b])
            if len(got) != 1 or abs(a + got[0][0] - want[0]) > 2 or abs(a + got[0][1] - want[1]) > 2:
                bad.append(f"pixel row {y}, panel x {a}..{b}: hot pixels at "
                           f"{[(int(a + s), int(a + e)) for s, e in got]}, want x {want[0]:.0f}..{want[1]:.0f}")
            else:
                rows_ok += 1
    if bad or rows_ok < 40:
        print(f"report_stripe: no stripe at columns [{c0}, {c1}) of {cols} in {png} "
              f"({rows_ok} panel rows right, {len(bad)} wrong)")
        for line in bad[:5]:
            print("  " + line)
        return 1
    print(f"report_stripe: {png}: on all {rows_ok} pixel rows of the heatmap panels, the out-of-tolerance "
          f"colours fill exactly columns [{c0}, {c1}) of {cols}")
    return 0


def main(argv):
    if len(argv) == 6 and argv[1] == "plant":
        plant(argv[2], argv[3], int(argv[4]), int(argv[5]))
        return 0
    if len(argv) == 7 and argv[1] == "check":
        return check(argv[2], argv[3], int(argv[4]), int(argv[5]), int(argv[6]))
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
