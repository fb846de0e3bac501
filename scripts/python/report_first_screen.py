#!/usr/bin/python3
"""Is the failing output on the report's first screen, as a browser lays it out?

    report_first_screen.py check REPORT.html WORK_DIR
        Copies the report into WORK_DIR with a script appended (the report
        itself has none) that measures, once chromium has laid the page out
        at 1200 x 900, the first output block of the page (<div
        class="output">) and its heatmap; reads the measures back from
        chromium's --dump-dom.  Exit 0 when that block is a failing output's
        (its badge is FAIL) and at least MIN_VISIBLE pixels of its heatmap
        lie on the first screen (above window.innerHeight); 1 otherwise.
    report_first_screen.py bury REPORT.html OUT.html
        The negative control: OUT.html is the report with the first failing
        output's block moved after the last output block of its case, as the
        report ordered outputs before (forward order, the final output last).
"""
import json
import os
import re
import subprocess
import sys

MIN_VISIBLE = 100  # pixels of the heatmap on the first screen
WINDOW = "1200,900"

PROBE = """<script>
const o = document.querySelector("div.output");
const m = o ? o.querySelector("svg.heatmap") : null;
const r = m ? m.getBoundingClientRect() : null;
const p = document.createElement("pre");
p.id = "first-screen-probe";
p.textContent = JSON.stringify({output: o ? o.id : null, fails: !!(o && o.querySelector("h3 .badge.fail")),
                                top: r ? r.top : null, bottom: r ? r.bottom : null, screen: window.innerHeight});
document.body.appendChild(p);
</script>"""

BLOCK = re.compile(r'<div class="output" id="[^"]*"><h3>.*?</div>\n', re.S)


def chromium(url, profile):
    cmd = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", "--hide-scrollbars", "--force-device-scale-factor=1",
           f"--window-size={WINDOW}", "--dump-dom", url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout


def check(html, work):
    os.makedirs(work, exist_ok=True)
    page = open(html, encoding="utf-8").read()
    if "<script" in page:
        raise SystemExit(f"report_first_screen: {html} holds a script; the report has none")
    probe = os.path.join(os.path.abspath(work), "probe.html")
    with open(probe, "w", encoding="utf-8") as f:
        f.write(page.replace("</body>", PROBE + "</body>"))
    dom = chromium("file://" + probe, os.path.join(os.path.abspath(work), "chromium-profile"))
    m = re.search(r'<pre id="first-screen-probe">([^<]*)</pre>', dom)
    if m is None:
        raise SystemExit("report_first_screen: chromium's DOM has no probe result")
    got = json.loads(m.group(1).replace("&quot;", '"'))
    visible = 0 if got["top"] is None else min(got["bottom"], got["screen"]) - got["top"]
    ok = got["fails"] and visible >= MIN_VISIBLE
    print(f"report_first_screen: {html}: first output block {got['output']} "
          f"({'failing' if got['fails'] else 'not failing'}), its heatmap at y {got['top']} .. {got['bottom']}, "
          f"first screen {got['screen']} px high: {visible if got['top'] is not None else 0:.0f} px of it on the "
          f"first screen: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


def bury(html, out):
    page = open(html, encoding="utf-8").read()
    blocks = list(BLOCK.finditer(page))
    fail = next((b for b in blocks if '<span class="badge fail">' in b.group(0)[:400]), None)
    if fail is None:
        raise SystemExit(f"report_first_screen: {html} has no failing output block")
    case = fail.group(0).split('id="')[1].split("/")[0]
    last = [b for b in blocks if b.group(0).startswith(f'<div class="output" id="{case}/')][-1]
    moved = page[:fail.start()] + page[fail.end():last.end()] + fail.group(0) + page[last.end():]
    with open(out, "w", encoding="utf-8") as f:
        f.write(moved)
    return 0


def main(argv):
    if len(argv) == 4 and argv[1] == "check":
        return check(argv[2], argv[3])
    if len(argv) == 4 and argv[1] == "bury":
        return bury(argv[2], argv[3])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
