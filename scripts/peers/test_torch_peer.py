"""The PyTorch peer under pytest: one test per golden case and mode, each
computing the case with torch_peer.py's model, writing its results with the
refenc module and certifying them with `refenc certify`.  It is
docs/examples/test_torch_encoder.py with the peer's model, which supports
every feature, so that no case is skipped.

    PYTHONPATH=scripts/python /usr/bin/python3 -m pytest -q scripts/peers/test_torch_peer.py

Modes: float64, float32, and bfloat16 computed in float32 with every
operation's output rounded to bfloat16 (the peer's --dtype bfloat16).  A case
the mode cannot be expected to pass (its float32 hazard) is an expected
failure with the reason; one it passes anyway (XPASS) passes.  The mode
float64-unbiased_variance injects a known bug (the peer's --bug), the
negative control that these tests can fail: a case the bug makes fail is an
expected failure there, with the diagnosis, and a case it leaves alone
passes.  make check-python compares every outcome with the pinned list
scripts/python/peer-outcomes.txt, so a planted bug no longer caught shows as
a difference as much as a case newly failing.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_peer  # noqa: E402  (it imports refenc, from scripts/python in the tree)
from torch_peer import refenc  # noqa: E402

# mode: the peer's options (configure()); the results are written in the dtype
MODES = {
    "float64": {"dtype": "float64"},
    "float32": {"dtype": "float32"},
    "bfloat16": {"dtype": "bfloat16"},
    "float64-unbiased_variance": {"dtype": "float64", "bug": "unbiased_variance"},
}

# The peer computes every component and feature of docs/python.md's list.
SUPPORTS = {"*"}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", refenc.pytest_cases(SUPPORTS))
def test_peer(case, mode, tmp_path):
    opts = MODES[mode]
    torch_peer.configure(**opts)
    case.write_results(tmp_path, torch_peer.compute(case), dtype=opts["dtype"])
    verdict = refenc.certify_case(case, tmp_path)
    if "bug" in opts and verdict.failed:  # the negative control: the planted bug caught
        diagnosis = verdict.diagnosis.describe().splitlines()[0] if verdict.diagnosis else "no diagnosis"
        pytest.xfail(f"planted bug {opts['bug']} caught: {diagnosis}")
    if verdict.verdict == "XFAIL":  # a case this dtype cannot be expected to pass (docs/certify.md)
        pytest.xfail(verdict.hazard)
    verdict.assert_pass()
