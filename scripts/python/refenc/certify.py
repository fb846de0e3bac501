"""`refenc certify --json`, run and read back as a structured verdict
(docs/certify.md describes every figure)."""
import json
import os
import re
import subprocess
import tempfile

from . import locate


class CertifyError(RuntimeError):
    """refenc certify could not certify: a usage error, or a golden or
    results file it cannot read (its message names the file, the tensor and
    the byte)."""


def _num(v):
    """The certificate writes inf and NaN as strings."""
    if isinstance(v, str) and v in ("inf", "-inf", "nan"):
        return float(v)
    return v


class OutputVerdict:
    """One output of a case: status ("PASS", "FAIL", "FAIL (shape)",
    "FAIL (missing)", "not provided", "not checked") and, when compared,
    every figure: dtype, rule ("policy" for F64 and F32, "budget" for F16 and
    BF16), rtol, atol (the element bound; for the budget rtol 0 and atol its
    largest error), angle_allowance, budget_max_abs_error, budget_nmse,
    baseline_max_abs_error, baseline_nmse, compared, dont_care,
    out_of_tolerance, nonfinite, max_abs_error, max_rel_error, max_ulp_error,
    scale, nmse, excess (the largest error over its bound), worst_index,
    worst_got, worst_want; note.  A figure the certificate does not hold
    for this output is None."""

    FIGURES = ("dtype", "rule", "rtol", "atol", "angle_allowance", "budget_max_abs_error", "budget_nmse",
               "baseline_max_abs_error", "baseline_nmse", "compared", "dont_care", "out_of_tolerance", "nonfinite",
               "max_abs_error", "max_rel_error", "max_ulp_error", "scale", "nmse", "excess", "worst_index",
               "worst_got", "worst_want")

    def __init__(self, d):
        self.raw = d
        self.name = d["name"]
        self.required = d["required"]
        self.status = d["status"]
        self.note = d.get("note")
        for k in self.FIGURES:
            setattr(self, k, _num(d.get(k)))

    @property
    def passed(self):
        return self.status == "PASS"

    @property
    def failed(self):
        return self.status.startswith("FAIL")

    def describe(self):
        s = f"{self.name}: {self.status}"
        if self.compared is not None:
            s += (f" ({self.dtype}, rtol {self.rtol:.3g}, atol {self.atol:.3g}): {self.out_of_tolerance} of "
                  f"{self.compared} elements out of tolerance; max abs {self.max_abs_error:.3g}, rel "
                  f"{self.max_rel_error:.3g}, ulp {self.max_ulp_error:.3g}, nmse {self.nmse:.3g}")
            if self.failed:
                s += f"; worst at {self.worst_index}: got {self.worst_got!r}, want {self.worst_want!r}"
        if self.note:
            s += f"; {self.note}"
        return s

    def __repr__(self):
        return f"<OutputVerdict {self.describe()}>"


class Diagnosis:
    """variant (None when no known bug variant matches), symptom, cause,
    fix, ratio, variants_checked, message."""

    def __init__(self, d):
        self.raw = d
        self.variant = d.get("variant")
        self.symptom, self.cause, self.fix = d.get("symptom"), d.get("cause"), d.get("fix")
        self.ratio = _num(d.get("ratio"))
        self.variants_checked = d.get("variants_checked")
        self.message = d.get("message")

    def describe(self):
        if self.variant is None:
            return f"{self.message or 'no known variant matches'} ({self.variants_checked} checked)"
        return (f"the results match the known bug '{self.variant}' (within {self.ratio:.2g} of the tolerance)\n"
                f"  symptom: {self.symptom}\n  cause:   {self.cause}\n  fix:     {self.fix}")


class CaseVerdict:
    """One case: verdict ("PASS", "FAIL", "XFAIL" or "XPASS" for a case the
    dtype cannot be expected to pass, "SKIP", or "ERROR"), hazard (why it is
    expected to fail, or None), first_divergence (an output name or None),
    diagnosis (a Diagnosis for a failing case, else None), note, outputs
    ({name: OutputVerdict}, forward order).  passed: PASS or XPASS."""

    def __init__(self, d, results=None):
        self.raw = d
        self.results = results
        self.case = d["case"]
        self.verdict = d["verdict"]
        self.hazard = d.get("hazard")
        self.first_divergence = d.get("first_divergence")
        self.note = d.get("note")
        self.diagnosis = Diagnosis(d["diagnosis"]) if d.get("diagnosis") else None
        self.outputs = {o["name"]: OutputVerdict(o) for o in d.get("outputs", [])}

    @property
    def passed(self):
        return self.verdict in ("PASS", "XPASS")

    @property
    def failed(self):
        """FAIL or ERROR: what makes refenc certify exit non-zero (XFAIL and SKIP do not)."""
        return self.verdict in ("FAIL", "ERROR")

    def __getitem__(self, output):
        return self.outputs[output if output.startswith("out.") else "out." + output]

    def explain(self):
        """The verdict as text: what failed, where first, which known bug."""
        lines = [f"refenc: case {self.case}: {self.verdict}" + (f" (results in {self.results})" if self.results else "")]
        if self.note:
            lines.append(f"  {self.note}")
        if self.first_divergence:
            lines.append(f"  first divergence: {self.first_divergence}")
        if self.diagnosis is not None:
            lines.append("  diagnosis: " + self.diagnosis.describe().replace("\n", "\n  "))
        # in full: the first divergence and the required outputs; the other
        # failing outputs (what the divergence carried forward) by name
        others = []
        for o in self.outputs.values():
            if o.status == "not provided" or not (o.failed or self.passed):
                continue
            if self.passed or o.required or o.name == self.first_divergence:
                lines.append("  " + o.describe())
            else:
                others.append(o.name)
        if others:
            lines.append(f"  {len(others)} more failing output(s): {', '.join(others)}")
        return "\n".join(lines)

    def assert_pass(self):
        """Raises AssertionError with explain() unless the case passed."""
        if not self.passed:
            raise AssertionError(self.explain())

    def __repr__(self):
        return f"<CaseVerdict {self.case} {self.verdict}>"


class Certificate:
    """The whole certification: cases ({name: CaseVerdict}, manifest order),
    summary ({"cases", "passed", "failed", "xfail", "xpass", "skipped",
    "most_likely_bug", "bug_candidates", "verdict"}), refenc_version, golden, results; raw: the
    certificate's JSON.  passed: no case failed (XFAIL and SKIP do not)."""

    def __init__(self, doc):
        self.raw = doc
        self.refenc_version = doc.get("refenc_version")
        self.golden, self.results = doc.get("golden"), doc.get("results")
        self.cases = {c["case"]: CaseVerdict(c, self.results) for c in doc["cases"]}
        self.summary = doc["summary"]

    @property
    def passed(self):
        return bool(self.cases) and not any(c.failed for c in self.cases.values())

    def __getitem__(self, case):
        return self.cases[case]

    def __iter__(self):
        return iter(self.cases.values())

    def explain(self):
        failing = [c for c in self.cases.values() if c.failed]
        head = (f"refenc certify: {len(self.cases)} case(s), {len(self.cases) - len(failing)} passed, "
                f"{len(failing)} failed")
        return "\n".join([head] + [c.explain() for c in failing])

    def assert_pass(self):
        if not self.passed:
            raise AssertionError(self.explain())


def _selection(cases, outputs, skip_missing):
    """The selection options refenc certify and refenc report share
    (docs/cli.md): cases None (every case), a shell pattern (a str, commas
    separating several), or an iterable of names or patterns, each a
    repeated --case; outputs a shell pattern or None; skip_missing a bool."""
    args = []
    if isinstance(cases, (str, os.PathLike)):
        args += ["--case", os.fspath(cases)]
    elif cases is not None:
        names = [getattr(c, "name", c) for c in cases]
        if not names:
            raise ValueError("cases: an empty list selects nothing")
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"cases: {name!r} is not a case name or pattern")
            args += ["--case", name]
    if outputs is not None:
        args += ["--outputs", outputs]
    if skip_missing:
        args += ["--skip-missing"]
    return args


def certify(results, cases=None, golden=None, cli=None, rtol=None, atol=None, json_path=None, outputs=None,
            skip_missing=False):
    """Runs `refenc certify --golden GOLDEN --results RESULTS --json ...` and
    returns the Certificate.

    cases: None (every case), a shell pattern, or a list of case names or
    patterns (each a --case: the certificate holds those cases only, in the
    manifest's order).  outputs: certify's --outputs; skip_missing: its
    --skip-missing (docs/cli.md, one grammar with report).  rtol and atol
    (both or neither) override the tolerance policy.  json_path: also keep
    the certificate there.
    Raises CertifyError when refenc cannot certify at all (exit 2 without a
    certificate: a usage error, an unreadable manifest); a case whose files
    are malformed is in the certificate with verdict "ERROR" and its message."""
    golden = locate.golden_dir(golden)
    cmd = [locate.cli_path(cli), "certify", "--golden", str(golden), "--results", str(results), "--quiet"]
    cmd += _selection(cases, outputs, skip_missing)
    if (rtol is None) != (atol is None):
        raise ValueError("rtol and atol go together")
    if rtol is not None:
        cmd += ["--rtol", repr(float(rtol)), "--atol", repr(float(atol))]
    with tempfile.TemporaryDirectory(prefix="refenc-certify-") as tmp:
        out = json_path or os.path.join(tmp, "certificate.json")
        if os.path.exists(out):
            os.unlink(out)
        proc = subprocess.run(cmd + ["--json", str(out)], capture_output=True, text=True)
        if proc.returncode not in (0, 1, 2) or not os.path.exists(out):
            raise CertifyError(f"{' '.join(cmd)}: exit {proc.returncode}: {proc.stderr.strip()}")
        with open(out) as f:
            doc = json.load(f)
    unmatched = re.search(r"no golden case matches '(.*)'", proc.stderr) if proc.returncode == 2 else None
    if unmatched:  # a typo is an error, not a smaller certificate
        raise CertifyError(f"no golden case named {unmatched.group(1)} in {golden}: {proc.stderr.strip()}")
    return Certificate(doc)


def certify_case(case, results, **kw):
    """The verdict of one case (a Case or a name): certify(results, [name])[name]."""
    name = getattr(case, "name", case)
    return certify(results, [name], **kw)[name]


def report(results, html, cases=None, golden=None, cli=None, heatmaps="failing", rtol=None, atol=None, outputs=None,
           skip_missing=False, full_heatmaps=False):
    """Runs `refenc report` (docs/certify.md, "The HTML report"): the
    certification of RESULTS drawn into one self-contained HTML file.
    cases, outputs, skip_missing: the selection, as for certify().
    heatmaps: "failing" or "all"; full_heatmaps: every element drawn
    (--full-heatmaps: no downsampling).
    Returns the verdict ("PASS", "FAIL" or "ERROR", as the exit code 0, 1
    or 2 says); raises CertifyError when no report was written."""
    golden = locate.golden_dir(golden)
    cmd = [locate.cli_path(cli), "report", "--golden", str(golden), "--results", str(results), "--html", str(html),
           "--heatmaps", heatmaps] + (["--full-heatmaps"] if full_heatmaps else [])
    cmd += _selection(cases, outputs, skip_missing)
    if (rtol is None) != (atol is None):
        raise ValueError("rtol and atol go together")
    if rtol is not None:
        cmd += ["--rtol", repr(float(rtol)), "--atol", repr(float(atol))]
    before = os.stat(html).st_mtime_ns if os.path.exists(html) else None
    proc = subprocess.run(cmd, capture_output=True, text=True)
    written = os.path.exists(html) and os.stat(html).st_mtime_ns != before
    if proc.returncode not in (0, 1, 2) or not written:
        raise CertifyError(f"{' '.join(cmd)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return {0: "PASS", 1: "FAIL", 2: "ERROR"}[proc.returncode]
