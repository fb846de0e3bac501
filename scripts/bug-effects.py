#!/usr/bin/python3
"""Prints the table of docs/diagnosis.md "Bug classes and the cases that expose
them": for every bug class of the catalogue, the cases that target it and by
how much the bug moves their required outputs, in units of the float64 and
float32 tolerances (the largest |buggy - golden| / (atol + rtol |golden|)).

For the variants (ref/tool/variants.h) the numbers are the generator's, stored in
each case's metadata (variants[].effect_f64, effect_f32).  The two float
hazards are computed here with numpy, in float64: the PE angle rounded to
float32, and a softmax without the max subtraction (exp overflows for the
case's logits of several hundred: NaN).

usage: scripts/bug-effects.py   (from the top of the tree)
"""
import json
import math
import struct
import sys

import numpy as np

POLICY = {"F64": (1e-10, 1e-11), "F32": (1.3e-6, 1e-5)}


def read(path):
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n])
    meta = header.pop("__metadata__", {})
    dt = {"F64": "<f8", "F32": "<f4", "I64": "<i8", "BOOL": "u1", "U8": "u1"}
    out = {k: np.frombuffer(buf[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]],
                            dt[e["dtype"]]).reshape(e["shape"]) for k, e in header.items()}
    return meta, out


def excess(got, want, dtype, scale=1.0):
    rtol, atol = (t * scale for t in POLICY[dtype])
    with np.errstate(invalid="ignore", over="ignore"):
        r = np.abs(got - want) / (atol + rtol * np.abs(want))
    return math.inf if not np.all(np.isfinite(got)) else float(r.max())


def fmt(x):
    return "NaN/inf" if math.isinf(x) else f"{x:.2g}"


manifest = json.load(open("golden/manifest.json"))
rows = {}
for entry in manifest["cases"]:
    meta, t = read("golden/cases/" + entry["file"])
    scale = json.loads(meta["tolerance"]).get("scale", {})
    for v in json.loads(meta.get("variants", "[]")):
        if all(o.startswith("grad.") for o in v["outputs"]):
            continue  # a named backward bug: docs/gradients.md has its table
        rows.setdefault(v["name"], []).append((entry["case"], v["effect_f64"], v["effect_f32"]))
    if "pe_angle_float32" in entry["bug_classes"] and entry["component"] == "sinusoidal_pe":
        pos = t["in.positions"].astype(np.float64)
        D = t["out.output"].shape[1]
        i = np.arange(0, D, 2, dtype=np.float64)
        w = 10000.0 ** (-i / D)
        a32 = (pos[:, None].astype(np.float32) * w.astype(np.float32)).astype(np.float64)
        pe = np.empty((len(pos), D))
        pe[:, 0::2], pe[:, 1::2] = np.sin(a32), np.cos(a32)
        rows.setdefault("pe_angle_float32", []).append(
            (entry["case"], excess(pe, t["out.output"], "F64", scale.get("F64", 1)), excess(pe, t["out.output"], "F32")))
    if "softmax_no_max_subtraction" in entry["bug_classes"]:
        x = t["in.x"].astype(np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            e = np.exp(x)
            naive = e / e.sum(-1, keepdims=True)
        rows.setdefault("softmax_no_max_subtraction", []).append(
            (entry["case"], excess(naive, t["out.output"], "F64"), excess(naive, t["out.output"], "F32")))

print("| bug (variant) | exposed by | effect, in float64 tolerances | in float32 tolerances |")
print("|---|---|---|---|")
for name in sorted(rows):
    cases = rows[name]
    best = max(cases, key=lambda c: (c[2], c[1]))
    print(f"| `{name}` | {', '.join(f'`{c[0]}`' for c in cases)} | {fmt(max(c[1] for c in cases))} "
          f"| {fmt(max(c[2] for c in cases))} (`{best[0]}`) |")
sys.exit(0)
