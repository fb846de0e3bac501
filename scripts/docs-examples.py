#!/usr/bin/python3
"""Every example in the docs is run by a check, or says why not.

An example is a fenced code block of README.md or docs/*.md in a language
a reader runs or feeds to refenc (sh, python, c, make, yaml, json), or a
block whose first line is a shell prompt (`$ `).  Each must be either

  - inside a named block, <!-- NAME:begin --> ... <!-- NAME:end -->
    (scripts/docs-block.py), whose NAME a check script under scripts/
    names (it extracts the block with `docs-block.py extract FILE NAME`
    and runs it as it stands), or
  - preceded, on the line before its fence (or before its begin marker),
    by <!-- not run: REASON -->, the reason a check cannot run it here
    (a host it needs, a workflow of another CI).

Diagrams, sample outputs and formulas (blocks without a language) are not
examples.  Prints one line per example and exits 1 if one is neither run
nor excused, or if a named block is named by no check.

usage: /usr/bin/python3 scripts/docs-examples.py
"""
import glob
import os
import re
import sys

LANGS = {"sh", "python", "c", "make", "yaml", "json"}
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BEGIN = re.compile(r"^<!-- ([A-Za-z0-9_.-]+):begin -->$")
END = re.compile(r"^<!-- ([A-Za-z0-9_.-]+):end -->$")
NOT_RUN = re.compile(r"^<!-- not run: (.+) -->$")


def examples(path):
    """-> [(line, language, block name or None, reason or None)]"""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, region, i = [], None, 0
    while i < len(lines):
        line = lines[i]
        if BEGIN.match(line):
            region = (BEGIN.match(line).group(1), i)
        elif END.match(line):
            region = None
        elif line.startswith("```"):
            lang, j = line[3:].strip(), i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            first = lines[i + 1] if i + 1 < j else ""
            if lang in LANGS or first.startswith("$ "):
                before = lines[region[1] - 1] if region else lines[i - 1] if i > 0 else ""
                reason = NOT_RUN.match(before)
                out.append((i + 1, lang or "console", region[0] if region else None,
                            reason.group(1) if reason else None))
            i = j
        i += 1
    return out


def checks_naming(name, me):
    """The scripts under scripts/ (and its make fragments) that name a block."""
    found = []
    for f in sorted(glob.glob(os.path.join(ROOT, "scripts", "**", "*"), recursive=True)):
        if not os.path.isfile(f) or os.path.samefile(f, me) or f.endswith("docs-block.py"):
            continue
        try:
            text = open(f, encoding="utf-8").read()
        except UnicodeDecodeError:
            continue
        if re.search(r"(?<![A-Za-z0-9_.-])" + re.escape(name) + r"(?![A-Za-z0-9_-])", text):
            found.append(os.path.relpath(f, ROOT))
    return found


def main():
    me = os.path.abspath(__file__)
    docs = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    bad, n_run, n_excused = [], 0, 0
    for path in docs:
        rel = os.path.relpath(path, ROOT)
        for line, lang, name, reason in examples(path):
            where = f"{rel}:{line} ({lang})"
            if reason:
                n_excused += 1
                print(f"not run  {where}: {reason}")
            elif name is None:
                bad.append(f"{where}: not in a named block and no <!-- not run: REASON -->")
            else:
                by = checks_naming(name, me)
                if by:
                    n_run += 1
                    print(f"run      {where}: '{name}' by {', '.join(by)}")
                else:
                    bad.append(f"{where}: block '{name}' is named by no script under scripts/")
    for b in bad:
        print(f"MISSING  {b}")
    print(f"docs-examples: {n_run} examples run by a check, {n_excused} not run (reason given), "
          f"{len(bad)} neither")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
