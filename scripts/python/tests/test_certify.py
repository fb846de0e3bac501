"""refenc.certify: `refenc certify --json` run and read back; the verdict
per case and output, the diagnosis, and the assertion a failing test shows."""
import json
import os

import numpy as np
import pytest

import refenc
from refenc import safetensors as st


def golden_tensors(golden, name):
    return st.read(os.path.join(golden, "cases", name + ".safetensors"))[1]


def test_the_golden_values_pass_with_no_error(golden, cli, tmp_path):
    """Every case's expected outputs (and a gradient case's gradients) written
    back: the reader and the writer lose nothing (refenc, the judge, finds no
    error at all)."""
    cases = refenc.all_cases(golden)
    assert any(c.grads for c in cases)
    for c in cases:
        c.write_results(tmp_path, {**c.expected, **c.grads})
    cert = refenc.certify(tmp_path, golden=golden, cli=cli)
    cert.assert_pass()
    stored = sum(1 for c in cases if json.loads(c.metadata.get("variants", "[]")))
    assert cert.summary == {"cases": len(cases), "passed": len(cases), "failed": 0, "xfail": 0, "xpass": 0,
                            "skipped": 0, "most_likely_bug": None, "bug_candidates": [], "verdict": "PASS",
                            "cases_with_variants": stored, "not_ruled_out": []}  # float64 tells every variant apart
    for v in cert:
        assert all(o.status == "PASS" and o.max_abs_error == 0 for o in v.outputs.values()), v.explain()


def test_a_known_bug_is_named_in_a_readable_assertion(golden, cli, tmp_path):
    """Results equal to the golden's own copy of the unbiased-variance bug
    (alt.unbiased_variance.out.output) fail, and the assertion says where,
    by how much, and which bug."""
    name = "layernorm_eps1e-5"
    bug = golden_tensors(golden, name)["alt.unbiased_variance.out.output"]
    refenc.load_case(name, golden).write_results(tmp_path, {"output": bug}, dtype="F32")
    v = refenc.certify_case(name, tmp_path, golden=golden, cli=cli)
    assert v.verdict == "FAIL" and not v.passed
    assert v.first_divergence == "out.output"
    assert v.diagnosis.variant == "unbiased_variance" and v.diagnosis.ratio <= 1
    o = v["output"]
    assert o.status == "FAIL" and o.dtype == "F32" and o.out_of_tolerance > 0
    assert o.rtol == 1.3e-6 and o.atol == 1e-5 and len(o.worst_index) == 3
    with pytest.raises(AssertionError) as e:
        v.assert_pass()
    msg = str(e.value)
    for part in (f"case {name}: FAIL", "first divergence: out.output", "known bug 'unbiased_variance'",
                 "fix:", "elements out of tolerance", "worst at [", "got ", "want "):
        assert part in msg, msg


def test_unknown_bug_is_not_named(golden, cli, tmp_path):
    name = "ffn_relu"
    case = refenc.load_case(name, golden)
    case.write_results(tmp_path, {"output": case.expected["out.output"] * 1.01})
    v = refenc.certify_case(case, tmp_path, golden=golden, cli=cli)
    assert v.verdict == "FAIL" and v.diagnosis.variant is None
    assert "no known variant matches" in v.explain()


def test_missing_and_malformed_results(golden, cli, tmp_path):
    cert = refenc.certify(tmp_path, ["ffn_relu", "softmax_basic"], golden=golden, cli=cli)
    assert cert.summary == {"cases": 2, "passed": 0, "failed": 2, "xfail": 0, "xpass": 0, "skipped": 0,
                            "most_likely_bug": None, "bug_candidates": [], "verdict": "FAIL",
                            "cases_with_variants": 0, "not_ruled_out": []}
    assert "no results file" in cert["ffn_relu"].note
    assert cert["ffn_relu"]["output"].status == "FAIL (missing)"
    (tmp_path / "ffn_relu.safetensors").write_bytes(b"not a safetensors file")
    v = refenc.certify_case("ffn_relu", tmp_path, golden=golden, cli=cli)
    assert v.verdict == "ERROR" and "ffn_relu.safetensors" in v.note
    with pytest.raises(AssertionError, match="ERROR"):
        v.assert_pass()


def test_tolerance_override_and_the_kept_certificate(golden, cli, tmp_path):
    case = refenc.load_case("ffn_gelu", golden)
    case.write_results(tmp_path, {"output": case.expected["out.output"] + 1e-9})
    assert not refenc.certify_case(case, tmp_path, golden=golden, cli=cli).passed
    kept = tmp_path / "certificate.json"
    v = refenc.certify(tmp_path, "ffn_gelu", golden=golden, cli=cli, rtol=0, atol=2e-9, json_path=kept)["ffn_gelu"]
    assert v.passed and v["output"].atol == 2e-9
    assert json.load(open(kept))["cases"][0]["case"] == "ffn_gelu"
    with pytest.raises(ValueError, match="together"):
        refenc.certify(tmp_path, rtol=1e-3)


def test_errors_of_refenc_itself(golden, cli, tmp_path):
    with pytest.raises(refenc.CertifyError, match="no golden case named nope"):
        refenc.certify(tmp_path, ["nope"], golden=golden, cli=cli)
    with pytest.raises(refenc.CertifyError, match="no golden case named"):
        refenc.certify(tmp_path, ["nope", "ffn_relu"], golden=golden, cli=cli)
    with pytest.raises(FileNotFoundError):
        refenc.certify(tmp_path, golden=str(tmp_path), cli=cli)
    bad = tmp_path / "g"
    bad.mkdir()
    (bad / "manifest.json").write_text("{")
    with pytest.raises(refenc.CertifyError, match="manifest.json"):
        refenc.certify(tmp_path, golden=str(bad), cli=cli)


def test_nan_never_passes(golden, cli, tmp_path):
    case = refenc.load_case("softmax_basic", golden)
    y = case.expected["out.output"].copy()
    y[1, 2] = np.nan
    case.write_results(tmp_path, {"output": y}, dtype="BF16")
    o = refenc.certify_case(case, tmp_path, golden=golden, cli=cli)["output"]
    assert o.status == "FAIL" and o.nonfinite == 1 and o.worst_index == [1, 2] and np.isnan(o.worst_got)


def test_report(golden, cli, tmp_path):
    case = refenc.load_case("ffn_relu", golden)
    case.write_results(tmp_path, {"output": case.expected["out.output"]})
    html = tmp_path / "report.html"
    assert refenc.report(tmp_path, html, "ffn_relu", golden=golden, cli=cli) == "PASS"
    assert "ffn_relu" in html.read_text()
    case.write_results(tmp_path, {"output": case.expected["out.output"] * 1.01})
    assert refenc.report(tmp_path, html, "ffn_*", golden=golden, cli=cli, heatmaps="all") == "FAIL"
    assert '<svg class="heatmap"' in html.read_text()
    # full_heatmaps reaches the command line: a stand-in program writes its
    # arguments as the report (the shipped cases are too small to be
    # downsampled, so the page itself would look the same)
    echo = tmp_path / "echo-cli"
    echo.write_text('#!/bin/sh\nwhile [ "$1" != --html ]; do shift; done\nhtml=$2; shift 2\necho "$@" > "$html"\n')
    echo.chmod(0o755)
    for full in (True, False):
        assert refenc.report(tmp_path, html, "ffn_relu", golden=golden, cli=str(echo), full_heatmaps=full) == "PASS"
        assert ("--full-heatmaps" in html.read_text()) == full, html.read_text()
    with pytest.raises(refenc.CertifyError, match="no golden case matches"):
        refenc.report(tmp_path, tmp_path / "other.html", "nope", golden=golden, cli=cli)
    assert not (tmp_path / "other.html").exists()


def test_report_and_certify_share_one_selection(golden, cli, tmp_path):
    """refenc.report(cases=[...]) as refenc.certify(cases=[...]): each name a
    --case (before: a TypeError); outputs and skip_missing pass through."""
    for name in ("ffn_relu", "softmax_basic"):
        case = refenc.load_case(name, golden)
        case.write_results(tmp_path, {"output": case.expected["out.output"]})
    html = tmp_path / "report.html"
    assert refenc.report(tmp_path, html, ["ffn_relu", "softmax_basic"], golden=golden, cli=cli) == "PASS"
    text = html.read_text()
    assert "case-ffn_relu" in text and "case-softmax_basic" in text and "case-ffn_gelu" not in text
    assert refenc.report(tmp_path, html, ["ffn_relu", "ffn_gelu"], golden=golden, cli=cli) == "FAIL"
    assert refenc.report(tmp_path, html, ["ffn_relu", "ffn_gelu"], golden=golden, cli=cli,
                         skip_missing=True) == "PASS"
    assert refenc.report(tmp_path, html, "ffn_relu", golden=golden, cli=cli, outputs="out.output") == "PASS"
    cert = refenc.certify(tmp_path, ["ffn_relu", "ffn_gelu"], golden=golden, cli=cli, skip_missing=True)
    assert list(cert.cases) == ["ffn_relu", "ffn_gelu"] and cert["ffn_gelu"].verdict == "SKIP"
    assert cert.summary["skipped"] == 1 and cert.passed
    with pytest.raises(refenc.CertifyError, match="no golden case matches 'nope'"):
        refenc.report(tmp_path, html, ["ffn_relu", "nope"], golden=golden, cli=cli)
