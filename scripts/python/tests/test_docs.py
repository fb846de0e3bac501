"""docs/python.md: the block "Certify a torch encoder in 20 lines" is at most
20 lines, runs as it stands, certifies, and writes BF16 results."""
import os
import re
import subprocess

from refenc import safetensors as st


def test_the_twenty_lines_certify(tree, tmp_path):
    text = open(os.path.join(tree, "docs", "python.md")).read()
    section = text[text.index("## Certify a torch encoder in 20 lines"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    lines = [l for l in code.splitlines() if l.strip()]
    assert len(lines) <= 20, f"{len(lines)} lines"
    (tmp_path / "certify_my_encoder.py").write_text(code)
    env = dict(os.environ, PYTHONPATH=os.path.join(tree, "scripts", "python"), PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run(["/usr/bin/python3", "certify_my_encoder.py"], cwd=tmp_path, env=env, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    n = int(re.search(r"(\d+) cases certified with BF16 results", r.stdout).group(1))
    written = sorted(os.listdir(tmp_path / "results"))
    assert n >= 5 and len(written) == n
    for f in written:
        raw = open(tmp_path / "results" / f, "rb").read()
        assert '"dtype":"BF16"' in raw[8:8 + int.from_bytes(raw[:8], "little")].decode()
        assert all(n.startswith("out.") for n in st.read(tmp_path / "results" / f)[1])
