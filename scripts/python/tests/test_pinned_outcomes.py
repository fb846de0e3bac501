"""scripts/python/pinned_outcomes.py: a run with the pinned outcomes passes;
any test whose outcome changes, appears or disappears fails it."""
import os
import subprocess

import pytest

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="t" name="test_encoder[a-float64]" />
<testcase classname="t" name="test_encoder[b-float64]"><skipped type="pytest.skip" message="needs x" /></testcase>
<testcase classname="t" name="test_encoder[c-float32-bf16]"><skipped type="pytest.xfail" message="float32" /></testcase>
<testcase classname="t" name="test_encoder[d-float64]"><failure message="AssertionError" /></testcase>
</testsuite></testsuites>"""
PINNED = "# comment\na-float64 passed\nb-float64 skipped\nc-float32-bf16 xfailed\nd-float64 failed\n"


def run(tree, *args):
    return subprocess.run(["/usr/bin/python3", os.path.join(tree, "scripts", "python", "pinned_outcomes.py"), *args],
                          capture_output=True, text=True)


@pytest.mark.parametrize("change,diff", [
    (None, None),
    (("a-float64 passed", "a-float64 failed"), "a-float64: pinned failed, now passed"),
    (("c-float32-bf16 xfailed", "c-float32-bf16 passed"), "c-float32-bf16: pinned passed, now xfailed"),
    (("d-float64 failed\n", ""), "d-float64: pinned absent, now failed"),
    (("# comment\n", "# comment\ne-float64 passed\n"), "e-float64: pinned passed, now absent"),
])
def test_outcomes_compared(tree, tmp_path, change, diff):
    (tmp_path / "j.xml").write_text(JUNIT)
    pinned = PINNED.replace(*change) if change else PINNED
    (tmp_path / "p.txt").write_text(pinned)
    r = run(tree, str(tmp_path / "j.xml"), str(tmp_path / "p.txt"))
    if diff is None:
        assert r.returncode == 0 and "1 passed, 1 failed, 1 skipped, 1 xfailed" in r.stdout, r.stdout + r.stderr
    else:
        assert r.returncode == 1 and diff in r.stdout, r.stdout + r.stderr


def test_write_then_compare(tree, tmp_path):
    (tmp_path / "j.xml").write_text(JUNIT)
    assert run(tree, "--write", str(tmp_path / "j.xml"), str(tmp_path / "p.txt")).returncode == 0
    assert run(tree, str(tmp_path / "j.xml"), str(tmp_path / "p.txt")).returncode == 0
    (tmp_path / "p.txt").write_text("a-float64 maybe\n")
    r = run(tree, str(tmp_path / "j.xml"), str(tmp_path / "p.txt"))
    assert r.returncode == 2 and "p.txt:1" in r.stderr


def test_write_keeps_the_opening_comment(tree, tmp_path):
    """A rewrite keeps the list's own header; a new list gets the default one."""
    (tmp_path / "j.xml").write_text(JUNIT)
    (tmp_path / "p.txt").write_text("# the peer's outcomes\n# second line\na-float64 failed\n# not header\n")
    assert run(tree, "--write", str(tmp_path / "j.xml"), str(tmp_path / "p.txt")).returncode == 0
    text = (tmp_path / "p.txt").read_text()
    assert text.startswith("# the peer's outcomes\n# second line\na-float64 passed\n"), text
    assert "# not header" not in text and "test_torch_encoder" not in text, text
    assert run(tree, "--write", str(tmp_path / "j.xml"), str(tmp_path / "new.txt")).returncode == 0
    assert (tmp_path / "new.txt").read_text().startswith("# The pinned outcome of every test of docs/examples/")
