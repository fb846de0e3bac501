#!/usr/bin/python3
"""Checks the outcome of certifying ONNX Runtime (scripts/certify-ort.sh)
against its pinned expectation.

    check_ort.py --golden golden --work build/ort

WORK holds what certify-ort.sh made: models/models.json, certificate-MODE.json
and optimized-MODE/ (the graphs ONNX Runtime ran) for MODE = disabled and all,
and bug-VARIANT-MODE.json for the known bugs built into the models.

Expected, in each mode:
  - every case is modelled, except those pinned in UNSUPPORTED;
  - every modelled case passes, except those pinned in ORT_FAILURES, which
    must fail (the golden's float32_hazard is a hazard of no dtype: the
    float32 bound holds twice the float32 baseline's error, which carries
    the angles and means those cases name; docs/verdict.md, "Hazards");
  - with graph optimisation off, ONNX Runtime ran the models' own ops and no
    fused kernel; fully on, it ran each kernel of FUSED on some case (else the
    two modes would certify the same thing);
  - with a known bug built into the models, the certifier fails them, names
    that bug on at least one case and never names another.
Anything else is an unexpected outcome (exit 1), each line saying what.
"""
import argparse
import collections
import glob
import json
import os
import sys

import onnx

from build_models import BUGS   # the bugs certify-ort.sh builds into the models

MODES = ("disabled", "all")

# Cases ONNX Runtime fails, per mode, with the reason (docs/certify.md, "ONNX
# Runtime"): none today.  A case pinned here must fail.
ORT_FAILURES = {"disabled": {}, "all": {}}

# Cases build_models.py does not model, with the reason it gives: none today.
# A case the models stop supporting, or a new case they do not support, is an
# unexpected outcome until it is modelled or pinned here.
UNSUPPORTED = {}

# Kernels of ONNX Runtime's own that the fully optimised graphs must use,
# each replacing a subgraph of the models (layer_norm, activation, linear,
# the scaled scores q·kᵀ/√Dh): LayerNorm fused alone or with the residual Add
# before it; exact GELU (Erf) and tanh GELU; quick GELU (x sigmoid(1.702 x),
# the CLIP family's); MatMul + Add; MatMul + scale.
FUSED = ("LayerNormalization", "SkipLayerNormalization", "Gelu", "FastGelu", "QuickGelu", "Gemm", "FusedMatMul")



def load(path):
    with open(path) as f:
        return json.load(f)


def ratio(o):
    """The worst element's error over its bound (the certificate's excess:
    the tolerance plus, for float32 PE and RoPE outputs, the angle allowance)."""
    if isinstance(o.get("excess"), (int, float)):
        return o["excess"]
    want = o["worst_want"]
    return abs(o["worst_got"] - want) / (o["atol"] + o["rtol"] * abs(want))


def check_support(work, problems):
    index = load(os.path.join(work, "models", "models.json"))["cases"]
    unsupported = {e["case"]: e["unsupported"] for e in index if "unsupported" in e}
    for case, why in sorted(unsupported.items()):
        if case not in UNSUPPORTED:
            problems.append(f"{case}: not modelled ({why}), and not pinned as unsupported")
        else:
            print(f"  {case}: not modelled, as pinned: {why}")
    for case in sorted(set(UNSUPPORTED) - set(unsupported)):
        problems.append(f"{case}: pinned as unsupported, but now modelled: certify it and unpin it")
    return {e["case"] for e in index if "unsupported" not in e}


def check_outcome(cert_path, mode, modelled, hazards, problems, quiet=False):
    cert = load(cert_path)
    say = (lambda *a: None) if quiet else print
    verdict = {c["case"]: c for c in cert["cases"]}
    for case in sorted(modelled - set(verdict)):
        problems.append(f"{mode}: {case}: modelled but not certified")
    expected_fail = dict(hazards)
    expected_fail.update(ORT_FAILURES[mode])
    failed = {n for n, c in verdict.items() if c["verdict"] in ("FAIL", "XFAIL")}  # XPASS: a hazard passing
    passing = [(ratio(o), n, o["name"]) for n, c in verdict.items() if c["verdict"] in ("PASS", "XPASS")
               for o in c["outputs"] if "worst_want" in o]
    say(f"\nONNX Runtime float32, graph optimisation {mode}: {len(verdict) - len(failed)} of {len(verdict)} "
          f"cases pass, {sum(o['status'] != 'not provided' for c in verdict.values() for o in c['outputs'])} "
          "outputs compared")
    if passing:
        r, n, o = max(passing)
        say(f"  largest error of a passing output: {r:.2g} of its tolerance ({n}, {o})")
    for n in sorted(failed):
        worst = max((ratio(o), o["name"]) for o in verdict[n]["outputs"] if "worst_want" in o)
        fig = f"{worst[1]} off by {worst[0]:.3g} tolerances"
        if n in expected_fail:
            say(f"  {n}: FAIL, as expected ({fig}): {expected_fail[n]}")
        else:
            problems.append(f"{mode}: {n}: FAIL, unexpected ({fig})")
    for n in sorted((set(expected_fail) & set(verdict)) - failed):
        problems.append(f"{mode}: {n}: PASS, but it is pinned to fail: {expected_fail[n]}")


def check_kernels(work, problems):
    """Counts the op types of the graphs ONNX Runtime ran, in each mode."""
    counts = {}
    for mode in MODES:
        c = collections.Counter()
        for path in glob.glob(os.path.join(work, f"optimized-{mode}", "*.onnx")):
            c.update(n.op_type for n in onnx.load(path).graph.node)
        counts[mode] = c
    print("\nfused kernels run (nodes over every case):")
    for mode in MODES:
        print(f"  graph optimisation {mode:8}: " + ", ".join(f"{k} {counts[mode][k]}" for k in FUSED))
    for k in FUSED:
        if counts["disabled"][k]:
            problems.append(f"disabled: ONNX Runtime ran {counts['disabled'][k]} {k} node(s) with optimisation off")
        if not counts["all"][k]:
            problems.append(f"all: ONNX Runtime fused no {k} with optimisation fully on")


def check_bug(work, bug, mode, problems):
    cert = load(os.path.join(work, f"bug-{bug}-{mode}.json"))
    failed = [c for c in cert["cases"] if c["verdict"] in ("FAIL", "XFAIL")]
    named = collections.defaultdict(list)
    for c in failed:
        named[(c.get("diagnosis") or {}).get("variant")].append(c["case"])
    wrong = {v: cs for v, cs in named.items() if v not in (None, bug)}
    if not named.get(bug):
        problems.append(f"bug {bug} ({mode}): never named ({len(failed)} case(s) fail)")
    if wrong:
        problems.append(f"bug {bug} ({mode}): wrongly named {wrong}")
    if named.get(bug) and not wrong:
        print(f"  {bug:20} {mode:8}: {len(failed)} cases fail, named on {', '.join(named[bug])}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--golden", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    hazards = {}  # no case of args.golden may fail in float32: float32_hazard makes no expected failure
    problems = []
    modelled = check_support(args.work, problems)
    for mode in MODES:
        check_outcome(os.path.join(args.work, f"certificate-{mode}.json"), mode, modelled, hazards, problems)
    # negative control: the same check on a peer with a bug must object
    control = []
    check_outcome(os.path.join(args.work, f"bug-{BUGS[0]}-all.json"), "all", modelled, hazards, control, quiet=True)
    if control:
        print(f"  control: with bug {BUGS[0]} built in, this check objects ({len(control)} unexpected outcomes)")
    else:
        problems.append(f"control: with bug {BUGS[0]} built in, this check finds nothing unexpected")
    check_kernels(args.work, problems)
    print("\nknown bugs built into the models:")
    for bug in BUGS:
        for mode in MODES:
            check_bug(args.work, bug, mode, problems)
    for p in problems:
        print(f"  UNEXPECTED: {p}")
    print("\ncertify-ort:", "UNEXPECTED OUTCOME" if problems else
          "expected outcome (both modes pass every case; the fully optimised run "
          "used ONNX Runtime's fused kernels; each bug built into the models is named)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
