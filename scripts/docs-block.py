#!/usr/bin/python3
"""A generated block of a markdown file, between the lines
<!-- NAME:begin --> and <!-- NAME:end -->.

    docs-block.py check FILE NAME GENERATED   exit 1 if the block differs from GENERATED
    docs-block.py write FILE NAME GENERATED   replace the block with GENERATED
    docs-block.py extract FILE NAME           print the block: the code inside its
                                              one fenced block (```sh ... ```), for a
                                              check that runs a documented recipe
"""
import sys


def split(text, name):
    begin, end = f"<!-- {name}:begin -->\n", f"<!-- {name}:end -->"
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        sys.exit(f"docs-block: no block '{name}' ({begin.strip()} ... {end})")
    return text[:i + len(begin)], text[i + len(begin):j], text[j:]


def extract(path, name):
    """The code of the block's one fenced code block, fences removed."""
    lines = split(open(path).read(), name)[1].splitlines(keepends=True)
    if len(lines) < 2 or not lines[0].startswith("```") or lines[-1].rstrip("\n") != "```" or \
            any(line.startswith("```") for line in lines[1:-1]):
        sys.exit(f"docs-block: {path}'s block '{name}' is not one fenced code block")
    return "".join(lines[1:-1])


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "extract":
        sys.stdout.write(extract(sys.argv[2], sys.argv[3]))
        return 0
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
