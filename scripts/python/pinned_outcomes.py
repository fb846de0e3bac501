#!/usr/bin/python3
"""Compares the outcome of every test in a pytest JUnit XML report with a
pinned list, so that a run of the pytest example that changes any verdict
(a case newly failing, newly skipped, an expected failure that passes, a case
added or removed) fails CI, with the differences.

    pinned_outcomes.py JUNIT.xml PINNED.txt          compare
    pinned_outcomes.py --write JUNIT.xml PINNED.txt  rewrite the list from a run (its
                                                     opening comment lines kept)

PINNED.txt: one line per test, "<test id> <outcome>", outcome one of passed,
failed, skipped, xfailed; lines starting with # are comments.
Exit status: 0 same outcomes, 1 differences (listed), 2 usage or unreadable input.
"""
import sys
import xml.etree.ElementTree as ET


def outcomes(junit):
    """{test id: outcome} from pytest's JUnit XML (the id inside [...], or
    the test's name when it has no parameters)."""
    out = {}
    for tc in ET.parse(junit).getroot().iter("testcase"):
        name = tc.get("name")
        tid = name[name.index("[") + 1:-1] if "[" in name else name
        if tc.find("failure") is not None or tc.find("error") is not None:
            o = "failed"
        else:
            sk = tc.find("skipped")
            o = "passed" if sk is None else "xfailed" if sk.get("type") == "pytest.xfail" else "skipped"
        if tid in out:
            raise ValueError(f"{junit}: test id {tid} appears twice")
        out[tid] = o
    return out


def read_pinned(path):
    pinned = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 2 or parts[1] not in ("passed", "failed", "skipped", "xfailed"):
                raise ValueError(f"{path}:{n}: expected '<test id> <passed|failed|skipped|xfailed>'")
            pinned[parts[0]] = parts[1]
    return pinned


def read_header(path):
    """The comment lines opening an existing pinned list ("" if none): a
    rewrite keeps them."""
    try:
        with open(path) as f:
            lines = f.readlines()
    except FileNotFoundError:
        return ""
    head = []
    for line in lines:
        if not line.startswith("#"):
            break
        head.append(line)
    return "".join(head)


def main(argv):
    write = argv[1:2] == ["--write"]
    args = argv[2:] if write else argv[1:]
    if len(args) != 2:
        sys.stderr.write(__doc__)
        return 2
    junit, pinned_path = args
    try:
        got = outcomes(junit)
        if write:
            header = read_header(pinned_path) or (
                "# The pinned outcome of every test of docs/examples/test_torch_encoder.py\n"
                "# (make check-python compares each run with it; scripts/python/pinned_outcomes.py)\n")
            with open(pinned_path, "w") as f:
                f.write(header)
                for tid in sorted(got):
                    f.write(f"{tid} {got[tid]}\n")
            print(f"pinned_outcomes: wrote {len(got)} outcomes to {pinned_path}")
            return 0
        pinned = read_pinned(pinned_path)
    except (OSError, ValueError, ET.ParseError) as e:
        print(f"pinned_outcomes: {e}", file=sys.stderr)
        return 2
    diffs = [f"  {t}: pinned {pinned.get(t, 'absent')}, now {got.get(t, 'absent')}"
             for t in sorted(set(got) | set(pinned)) if got.get(t) != pinned.get(t)]
    counts = {o: sum(v == o for v in got.values()) for o in ("passed", "failed", "skipped", "xfailed")}
    summary = ", ".join(f"{n} {o}" for o, n in counts.items())
    if diffs:
        print(f"pinned_outcomes: {len(diffs)} test(s) differ from {pinned_path} ({summary}):")
        print("\n".join(diffs))
        return 1
    print(f"pinned_outcomes: the {len(got)} outcomes are the pinned ones ({summary})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
