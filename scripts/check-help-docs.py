#!/usr/bin/python3
"""Every command's --help against docs/cli.md, both ways.

    check-help-docs.py REFENC CLI_MD

For each command (run, certify, report, golden) docs/cli.md has one or more
sections headed "## `refenc COMMAND ...`"; the options a section documents
are the --words of its heading, of its synopsis (the code block right below)
and of the first column of its tables.  `refenc COMMAND --help` must exit 0
and name exactly those options (the --words anywhere in its text); the verbs
(golden merge, golden list) must print their usage on --help and exit 0.
Generic: whatever a command's help or section says, this holds after any
change to either, certify's and report's included.
"""
import re
import subprocess
import sys

OPT = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
COMMANDS = ("run", "certify", "report", "golden")
VERBS = (("golden", "merge"), ("golden", "list"))


def doc_options(text):
    """command -> the options its sections of cli.md document."""
    found = {c: set() for c in COMMANDS}
    command = None
    in_code = False
    for line in text.splitlines():
        m = re.match(r"## `refenc (\w+)", line)
        if m:
            command = m.group(1) if m.group(1) in found else None
            if command:
                found[command] |= set(OPT.findall(line))
            continue
        if line.startswith("## "):
            command = None
        if command is None:
            continue
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code and line.startswith("refenc "):
            found[command] |= set(OPT.findall(line))
        elif in_code and line.startswith(" "):
            found[command] |= set(OPT.findall(line))
        elif line.startswith("| `"):
            found[command] |= set(OPT.findall(line.split("|")[1]))
    return found


def other_programs(text, command):
    """The help text without the options it quotes of another program or
    command: 'refenc OTHER ...' and (sbatch ...)."""
    other = lambda m: "" if m.group(1) != command else m.group(0)
    text = re.sub(r"'refenc (\w+)[^']*'", other, text)
    text = re.sub(r"\(refenc (\w+)[^)]*\)", other, text)
    return re.sub(r"\(sbatch [^)]*\)", "", text)


def run(args):
    return subprocess.run(args, capture_output=True, text=True)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    refenc, md = sys.argv[1:]
    docs = doc_options(open(md).read())
    bad = []
    for c in COMMANDS:
        r = run([refenc, c, "--help"])
        if r.returncode != 0:
            bad.append(f"refenc {c} --help: exit {r.returncode}: {r.stderr.strip()}")
            continue
        helped = set(OPT.findall(other_programs(r.stdout, c))) - {"--help"}
        documented = docs[c] - {"--help"}
        if not documented:
            bad.append(f"{md}: no section '## `refenc {c} ...`' documents an option")
        for o in sorted(documented - helped):
            bad.append(f"{o}: in {md}'s refenc {c} but not in 'refenc {c} --help'")
        for o in sorted(helped - documented):
            bad.append(f"{o}: in 'refenc {c} --help' but not in {md}'s refenc {c}")
    for c, v in VERBS:
        r = run([refenc, c, v, "--help"])
        if r.returncode != 0 or f"usage: refenc {c} {v}" not in r.stdout:
            bad.append(f"refenc {c} {v} --help: exit {r.returncode}, not its usage: "
                       f"{(r.stdout + r.stderr).strip()[:200]}")
    for b in bad:
        print(f"check-help-docs: {b}", file=sys.stderr)
    if not bad:
        print(f"check-help-docs: the --help of {', '.join(COMMANDS)} and of "
              f"{', '.join(' '.join(v) for v in VERBS)} agree with {md}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
