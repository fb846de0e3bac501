#!/usr/bin/python3
"""How far the double reference's bug variants are from the oracle's.

A golden case stores each bug variant's outputs (alt.<variant>.<output>),
and certify names a variant when the results are within one bound of the
dtype's rule of every stored output of it (docs/diagnosis.md, "Diagnosis").
The shipped cases' variants are the oracle's (MPFR, one evaluation at 128
bits, rounded to double); `refenc golden` of a user's model computes them
with the double reference instead (refenc run --case --bug, ref/tool/emulate.h
with value = acc = F64).  This script measures, for every shipped case and
every variant it stores, the distance between the two, in units of each
dtype's rule as certify applies it (docs/verdict.md, "The verdict"):

  F64, F32  the largest |ref - oracle| / bound, bound = atol + rtol |oracle|
            (+ twice the float32 baseline's error for F32; the angle
            allowance left out, which only makes the figure larger);
  F16, BF16 the larger of max |ref - oracle| / budget and
            sqrt(nmse / budget nmse), the budget's two terms;

with the bounds certify reports for the case's outputs in that dtype (from
a certificate of the emulated baseline).  It also prints, in the same
units, the variant's separation from the golden (certify names a variant
only where it is more than 2), so the margin is visible.

Prints one line per (case, variant), then the largest distance per dtype
and, for comparison, the reference's own largest error on the golden
outputs (its certificate's excess in that dtype's emulation is not it: the
F64 figure is the reference certified as it is); exits 1 if a distance
reaches ACCEPT (a tenth of a bound: the margin docs/verdict.md, "The
tolerance policy", leaves between a correct float64 result's error bound
and the F64 tolerance; make/golden's REFERENCE_ERROR_MAX, ref/golden/alt.c),
2 on a usage error.

    scripts/variant-accuracy.py REFENC_CLI GOLDEN_DIR WORK_DIR [--markdown FILE]
"""
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "python"))
import refenc  # noqa: E402  (the safetensors reader the project's Python module has)

DTYPES = [("F64", None), ("F32", "f32"), ("F16", "f16"), ("BF16", "bf16")]
ACCEPT = 0.1


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode not in (0, 1):
        sys.exit(f"variant-accuracy: {' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def bounds(cli, golden, work, cases):
    """{dtype: {(case, output): the output's report}} from certificates of the emulated baselines."""
    out = {}
    for dtype, emulate in DTYPES:
        d = os.path.join(work, dtype)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for case, path in cases:
            cmd = [cli, "run", "--case", path, "--out", os.path.join(d, case + ".safetensors")]
            sh(cmd + (["--emulate", emulate] if emulate else []))
        sh([cli, "certify", "--golden", golden, "--results", d, "--quiet", "--json", d + ".json"])
        cert = json.load(open(d + ".json"))
        out[dtype] = {(c["case"], o["name"]): o for c in cert["cases"] for o in c["outputs"]}
    return out


def distance(a, want, dc, rep, dtype):
    """a from want in units of the rule certify applied to this output in this dtype."""
    keep = ~dc if dc is not None else np.ones(want.shape, bool)
    a, want = a[keep].astype(np.float64), want[keep].astype(np.float64)
    if a.size == 0:
        return -1.0
    if not np.all(np.isfinite(a)):
        return math.inf
    diff = np.abs(a - want)
    if rep.get("rule") == "budget":
        s2 = float(np.sum(want * want))
        nmse = float(np.sum(diff * diff)) / (s2 if s2 > 0 else 1.0)
        return max(float(diff.max()) / rep["budget_max_abs_error"], math.sqrt(nmse / rep["budget_nmse"]))
    bound = rep["atol"] + rep["rtol"] * np.abs(want) + rep.get("baseline_allowance", 0.0)
    return float((diff / bound).max())


def main(argv):
    args = argv[1:]
    md = None
    if "--markdown" in args:
        i = args.index("--markdown")
        md = args[i + 1] if i + 1 < len(args) else None
        del args[i:i + 2]
        if md is None:
            print(__doc__, file=sys.stderr)
            sys.exit(2)
    if len(args) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    cli, golden, work = args
    manifest = json.load(open(os.path.join(golden, "manifest.json")))
    cases = [(e["case"], os.path.join(golden, "cases", e["file"])) for e in manifest["cases"]]
    reps = bounds(cli, golden, work, cases)
    bugs = os.path.join(work, "bugs")
    shutil.rmtree(bugs, ignore_errors=True)
    os.makedirs(bugs)
    rows, worst = [], {d: (0.0, "") for d, _ in DTYPES}
    for case, path in cases:
        meta, t = refenc.read_safetensors(path)
        for v in json.loads(meta.get("variants", "[]")):
            if all(o.startswith("grad.") for o in v["outputs"]):
                continue  # a named backward bug: the reference's by definition (docs/gradients.md)
            name = v["name"]
            res = os.path.join(bugs, f"{case}.{name}.safetensors")
            sh([cli, "run", "--case", path, "--bug", name, "--out", res])
            _, r = refenc.read_safetensors(res)
            dist, sep = {}, {}
            for dtype, _ in DTYPES:
                dist[dtype], sep[dtype] = 0.0, 0.0
                for o in v["outputs"]:
                    rep = reps[dtype].get((case, o))
                    if rep is None or "rule" not in rep:
                        continue
                    dc = t.get(f"alt.{name}.dontcare.{o}")
                    dc = dc.astype(bool) if dc is not None else None
                    want = t[f"alt.{name}.{o}"]
                    dist[dtype] = max(dist[dtype], distance(r[o], want, dc, rep, dtype))
                    sep[dtype] = max(sep[dtype], distance(want, t[o], dc, rep, dtype))
                if dist[dtype] > worst[dtype][0]:
                    worst[dtype] = (dist[dtype], f"{case} {name}")
            rows.append((case, name, dist, sep))
            print(f"{case:48s} {name:34s} " + " ".join(
                f"{d}={dist[d]:.2g}(sep {sep[d]:.3g})" for d, _ in DTYPES), flush=True)
    print(f"\n{len(rows)} stored variants on {len({r[0] for r in rows})} cases; the largest distance "
          "between the double reference's variant and the oracle's, in bounds of each dtype's rule:")
    for d, _ in DTYPES:
        print(f"  {d:5s} {worst[d][0]:.3g}  ({worst[d][1]})")
    own = max((o.get("excess", 0) for o in reps["F64"].values() if isinstance(o.get("excess"), (int, float))),
              default=0)
    print(f"the reference's own largest error on the golden outputs: {own:.3g} F64 bounds")
    if md is not None:
        with open(md, "w") as f:
            f.write(f"{len(rows)} stored variants on {len({r[0] for r in rows})} cases; the reference's own largest "
                    f"error on the golden outputs: {own:.2g} F64 bounds.\n\n")
            f.write("| dtype | largest distance, in bounds | where (case, variant) | smallest separation among "
                    "the variants certify can name in it |\n|---|---|---|---|\n")
            for d, _ in DTYPES:
                named = [r[3][d] for r in rows if r[3][d] > 2]
                f.write(f"| {d} | {worst[d][0]:.2g} | `{worst[d][1].replace(' ', '`, `')}` | "
                        f"{min(named):.3g} |\n")
    bad = [d for d, _ in DTYPES if not worst[d][0] < ACCEPT]
    if bad:
        print(f"variant-accuracy: the double reference's variants are {ACCEPT} bounds or more from the "
              f"oracle's in {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
