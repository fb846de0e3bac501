#!/usr/bin/python3
"""A generated block of a markdown file, between the lines
<!-- NAME:begin --> and <!-- NAME:end -->.

    docs-block.py check FILE NAME GENERATED   exit 1 if the block differs from GENERATED
    docs-block.py write FILE NAME GENERATED   replace the block with GENERATED
"""
import sys


def split(text, name):
    begin, end = f"<!-- {name}:begin -->\n", f"<!-- {name}:end -->"
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        sys.exit(f"docs-block: no block '{name}' ({begin.strip()} ... {end})")
    return text[:i + len(begin)], text[i + len(begin):j], text[j:]


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("check", "write"):
        sys.exit(__doc__)
    mode, path, name, generated = sys.argv[1:]
    text, new = open(path).read(), open(generated).read()
    head, old, tail = split(text, name)
    if mode == "write":
        with open(path, "w") as f:
            f.write(head + new + tail)
        return 0
    if old != new:
        print(f"docs-block: {path}'s block '{name}' is not what {generated} holds; "
              f"run 'make {name}-docs' and commit", file=sys.stderr)
        return 1
    print(f"docs-block: {path}'s block '{name}' is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
