#!/usr/bin/python3
"""Every reference to a section of the docs names one that exists.

The code, the tests, the scripts and the docs cite sections by their
heading: `docs/verdict.md, "The tolerance policy"`, `(docs/oracle.md,
"Cost")`, and, inside a document, `("Float32: why the baseline", below)`.
A section renamed or moved to another document leaves such a reference
pointing at nothing, and nothing else notices.  This script reads every
tracked text file and checks each reference:

  NAME.md, "TEXT"   (with or without docs/, a comma or an opening
                     parenthesis between): TEXT begins a heading of
                     docs/NAME.md (README.md for README.md), or a paragraph's
                     bold or italic lead (**Float64: the policy.**, *Cost.*),
                     or, a single word, is a word of a heading (a preset's
                     name in docs/families.md);
  "TEXT", below / "TEXT" above  (inside docs/*.md): the same, in the same
                     document.

Case is ignored, and so are backticks, asterisks and a heading's leading
number ("6. ").  Prints each unresolved reference as FILE:LINE and exits 1
if there is one (make check-docs-examples runs it).
"""
import os
import re
import subprocess
import sys

SKIP = ("build", "golden/cases", "golden/large")
NORM = re.compile(r"[`*]")


def norm(s):
    s = re.sub(r"\n[ \t]*(?:\*|#|//)?[ \t]*", " ", s)
    s = NORM.sub("", s).replace("\\n", " ").replace("\\\"", "\"")
    return re.sub(r"\s+", " ", s).strip().rstrip(".,:;").lower()


def anchors(path):
    """The headings and paragraph leads of a markdown file, normalised."""
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)  # not in code blocks
    heads = [re.sub(r"^\d+\.\s+", "", m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)]
    leads = [m.group(1) for m in re.finditer(r"^\*\*?([^*\n]{2,100}?)\*\*?", text, re.M)]
    leads += [m.group(1) for m in re.finditer(r"\*\*([^*\n]{2,100}?)\*\*", text)]
    return [norm(h) for h in heads], [norm(l) for l in leads]


def resolves(ref, heads, leads):
    r = norm(ref)
    if not r:
        return True
    if any(h.startswith(r) or (len(h) > 8 and r.startswith(h)) for h in heads):
        return True
    if any(l.startswith(r) or (len(l) > 8 and r.startswith(l)) for l in leads):
        return True
    return " " not in r and any(r in re.split(r"[^a-z0-9_.-]+", h) for h in heads)


# A quoted heading may wrap onto the next line of a comment (" * ", "# ", "// ").
WRAP = r"(?:[^\"”\n\\]|\n[ \t]*(?:\*|#|//)?[ \t]*)"
CROSS = re.compile(r"(?<![\w/-])(?:docs/)?([a-z0-9-]+\.md|README\.md)[,:]?\s*\(?\s*\\?[\"“]([A-Za-z`*]"
                   + WRAP + r"{1,100})\\?[\"”]")
LOCAL = re.compile(r"[\"“]([A-Za-z`*]" + WRAP + r"{1,100})[\"”]\)?,?\s*\(?(below|above)\b")


def main():
    files = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.split()
    docs = {}
    for f in os.listdir("docs"):
        if f.endswith(".md"):
            docs[f] = anchors(os.path.join("docs", f))
    docs["README.md"] = anchors("README.md")
    bad, n = [], 0
    for f in files:
        if f.startswith(SKIP) or f.endswith((".safetensors", ".json", ".txt", ".sha256")):
            continue
        try:
            text = open(f, encoding="utf-8").read()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue
        for m in CROSS.finditer(text):
            doc, ref = m.group(1), m.group(2)
            if doc not in docs:
                continue
            n += 1
            if not resolves(ref, *docs[doc]):
                bad.append(f"{f}:{text.count(chr(10), 0, m.start()) + 1}: {doc}, \"{ref}\": no such section")
        if f.startswith("docs/") and f.endswith(".md"):
            for m in LOCAL.finditer(text):
                n += 1
                if not resolves(m.group(1), *docs[os.path.basename(f)]):
                    bad.append(f"{f}:{text.count(chr(10), 0, m.start()) + 1}: \"{m.group(1)}\", "
                               f"{m.group(2)}: no such section in this document")
    for b in bad:
        print(b)
    print(f"check-doc-refs: {n} references to sections, {len(bad)} unresolved", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
