#!/usr/bin/python3
"""The standing red-team suite: refenc's commands against tables of hostile
inputs (docs/hardening.md, "The red-team suite").

    redteam.py [--cli build/refenc] [--jobs 2] [--only REGEX] [--list]
    redteam.py --coverage-control

Reads scripts/redteam/table.txt, builds the fixtures once (fixtures.py),
then runs every row in a fresh sandbox under a timeout and checks its
expected outcome: the exit code (never a signal, never a timeout), a regex
its stderr must match (naming the file or the option), and that nothing
under the sandbox's root was created, changed or removed but the row's
declared outputs (temporary files, files written through links or outside
the output directory included).  Before the rows, it checks the table's
coverage: every option and positional argument that `refenc --help` and each
command's --help list must be declared in the table and have a row of every
class its kind requires.

Prints one line per failing row (with its command), one per known failure
(scripts/redteam/known-failing.txt: reported, not counted, but a listed row
that now passes fails), and closes with exactly `N passed, N failed`.  Exit
status 0 when nothing failed.

--coverage-control is the coverage check's negative control: the same check
on help texts with an option added that the table does not know; it exits 0
when the check reports that option, 1 when it does not."""
import argparse
import concurrent.futures
import fcntl
import hashlib
import json
import os
import re
import resource
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import classes as C  # noqa: E402
import fixtures  # noqa: E402
import st  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
# a hang is a row that has not exited after this long; a tiny row takes milliseconds
# alone, but up to 2 s on a machine loaded 15-fold (measured), hence the margin
DEFAULT_TIMEOUT = 10.0
OK_EXIT = {0}
NOBODY = 65534

# ---- the table ------------------------------------------------------------------------


def decode_value(v):
    """A value as the table writes it: \\xNN is the byte NN (a non-UTF-8 byte
    when NN >= 0x80, kept as os.fsencode's surrogate), @long is 5000 'a'."""
    if v == "@long":
        return "a" * 5000
    if v == "@65patterns":  # one more than certify's --case takes
        return ",".join(["t*"] * 65)
    return re.sub(r"\\x([0-9a-fA-F]{2})",
                  lambda m: chr(int(m.group(1), 16)) if int(m.group(1), 16) < 0x80
                  else chr(0xdc00 + int(m.group(1), 16)), v)


def printable(s, limit=60):
    b = os.fsencode(s)
    t = "".join(chr(c) if 0x20 <= c < 0x7f else "\\x%02x" % c for c in b)
    return t if len(t) <= limit else "%s...(%d bytes)" % (t[:limit // 2], len(b))


def printable_tail(s, limit=80):
    """A path as printable text, its end kept when it is long (where the difference is)."""
    t = printable(s, 10**6)
    return t if len(t) <= limit else "(%d bytes)...%s" % (len(os.fsencode(s)), t[-limit:])


def parse_keys(text):
    keys = {}
    for tok in shlex.split(text):
        m = re.match(r"^(ok|bad|any):(.*)$", tok, re.S)
        if m:
            keys.setdefault(m.group(1) + "s", []).append(decode_value(m.group(2)))
            continue
        k, _, v = tok.partition("=")
        if k == "err" and k in keys:  # err= repeated: every one must match (it kept only the last)
            v = r"(?=[\s\S]*(?:%s))(?=[\s\S]*(?:%s))" % (keys[k], v)
        keys[k] = v
    return keys


def split_target(target):
    """'golden merge --out' -> (('golden', 'merge'), '--out')."""
    words = target.split()
    return tuple(words[:-1]), words[-1]


def id_base(target):
    words, opt = split_target(target)
    o = opt.lstrip("-")
    if not opt.startswith("-"):
        o = re.sub(r"(\.\.\.|\.json|\.safetensors)+$", "", o).lower()
    return ".".join([w for w in words if w != "refenc"] + [o])


class Row:
    def __init__(self, rid, target, argv, timeout=DEFAULT_TIMEOUT):
        self.id, self.target, self.argv, self.timeout = rid, target, argv, timeout
        self.prepare = lambda sb, victim: {}   # -> substitutions for the argv
        self.outcomes = lambda subs: []        # -> [(exits, err regex, allowed, must)]
        self.nobody = False
        self.signal = None                     # (signal number, watched dir) for signal rows
        self.cls = None                        # the class, for the coverage check
        self.value = None
        self.needs = []                        # more paths it uses than its argv names (its slot)
        self.address_space = None              # RLIMIT_AS in MiB, for rows under a memory limit
        self.race = None                       # the watched directory of a race row


def subst(argv, subs):
    out = []
    for a in argv:
        for k, v in subs.items():
            a = a.replace("{%s}" % k, v)
        out.append(a)
    return out


def listed(text, subs):
    """creates=a,b? -> [(path, required)], {H} substituted, normalised."""
    res = []
    for p in filter(None, (text or "").split(",")):
        req = not p.endswith("?")
        p = subst([p.rstrip("?")], subs)[0]
        res.append((os.path.normpath(p), req))
    return res


def exits_of(text, default):
    return {int(x) for x in text.split(",")} if text else set(default)


def refused(err, allowed=()):
    return ({2}, err, list(allowed), [])


def path_rows(target, kind, slot, keys, argv):
    """The rows of one `paths` line: one per class of the option's kind."""
    base = keys.get("id", id_base(target))
    ok_exits = exits_of(keys.get("ok"), OK_EXIT)
    creates, creates2 = keys.get("creates", ""), keys.get("creates2", "")
    timeout = float(keys.get("timeout", DEFAULT_TIMEOUT))
    rows = []

    def row(cls, prep):
        r = Row("%s.%s" % (base, cls), target, argv, timeout)
        r.cls = cls
        r.needs = [slot, keys.get("like", "golden")]

        def prepare(sb, victim):
            h, exp, inner = prep(sb, victim)
            r.exp, r.inner = exp, inner
            r.nobody = exp == "refused-nobody"
            return {"H": h, "SLOT": slot}

        def outcomes(subs):
            h, exp, inner = subs["H"], r.exp, r.inner
            ok_allowed = listed(creates, subs) + (listed("{H}", subs) if kind == "out-file" else [])
            if kind == "out-dir":
                ok_allowed += listed("{H}/cases/tiny.safetensors,{H}/manifest.json", subs)
            ok = (ok_exits, None, [p for p, _ in ok_allowed], [p for p, req in ok_allowed if req])
            named = C.shown(inner or h)
            no = refused(named, [p for p, _ in listed(creates2, subs)])
            if exp == "missing-inner" or (kind == "results-dir" and r.cls == "empty-dir"):
                # a results file that does not exist fails its case (exit 1), it is no input error
                return [({1}, None, ok[2], [])] if kind == "results-dir" else [no]
            if exp in ("ok", "ok-at-slot"):
                return [ok]
            if exp in ("refused", "refused-nobody"):
                return [no]
            if exp == "ok-or-refused":
                return [ok, no]
            if exp == "long":
                return [refused(C.LONG_RE + "|" + C.shown(slot))]
            if exp == "ok-or-long":
                return [ok, refused(C.LONG_RE)]
            if exp.startswith("refused-or-replaced"):
                return [no, ok]
            raise ValueError(exp)
        r.prepare, r.outcomes = prepare, outcomes
        rows.append(r)

    if kind in ("in-json", "in-st"):
        for cls in C.input_file_classes(kind == "in-json"):
            row(cls, lambda sb, v, cls=cls: C.prepare_input(cls, sb, slot) + (None,))
    elif kind in C.DIR_CONTENTS:
        for cls in C.dir_classes(kind):
            row(cls, lambda sb, v, cls=cls: C.prepare_dir(cls, kind, sb, slot))
    elif kind == "out-file":
        for cls in C.OUT_FILE_CLASSES:
            row(cls, lambda sb, v, cls=cls: C.prepare_out_file(cls, sb, slot, v) + (None,))
    elif kind == "out-dir":
        for cls in C.OUT_DIR_CLASSES:
            row(cls, lambda sb, v, cls=cls: C.prepare_out_dir(cls, sb, slot, v, keys.get("like", "golden"))
                + (None,))
    else:
        raise SystemExit("redteam: table: paths line for %s of kind %s" % (target, kind))
    # outputs that are inputs of the same command: refused, the input untouched
    for same in filter(None, keys.get("same", "").split(",")):
        r = Row("%s.same(%s)" % (base, same), target, argv, timeout)
        r.cls = "same"
        r.needs = [slot, same]
        r.prepare = lambda sb, v, same=same: {"H": same, "SLOT": slot}
        r.outcomes = lambda subs, same=same: [refused(C.shown(same))]
        rows.append(r)
    return rows


def int_values(lo, hi):
    ok = [str(lo), str(hi)]
    bad = [str(lo - 1) if lo > 0 else None, str(hi + 1), "-1", "abc", "", str(lo) + "x", "1e3",
           str(2**64), str(10**30), "6" + C.NONUTF8, "a" * 5000]
    return ok, [b for b in bad if b is not None]


def float_values():
    return (["0", "1e-3", "1e300"],
            ["-1e-3", "nan", "inf", "-inf", "1e999", "abc", "", "1e-3x", "1" + C.NONUTF8, "9" * 5000])


def value_label(v):
    if v == "":
        return "empty"
    if v.startswith("t*,t*"):
        return "65-patterns"
    if len(v) > 200:
        return "long"
    return printable(v, 30)


def value_rows(target, keys, argv, oks, bads, anys=()):
    base = keys.get("id", id_base(target))
    timeout = float(keys.get("timeout", DEFAULT_TIMEOUT))
    opt = split_target(target)[1]
    rows = []
    cr = keys.get("creates", "")
    ex = exits_of(keys.get("ok"), OK_EXIT)
    err = keys.get("err", re.escape(opt))
    ok = lambda subs: (ex, None, [p for p, _ in listed(cr, subs)], [p for p, q in listed(cr, subs) if q])
    expect = {"ok": lambda subs: [ok(subs)], "bad": lambda subs: [refused(err)],
              "any": lambda subs: [ok(subs), refused(err)]}
    for v, how in [(v, "ok") for v in oks] + [(v, "bad") for v in bads] + [(v, "any") for v in anys]:
        r = Row("%s[%s]" % (base, value_label(v)), target, argv, timeout)
        r.value, r.cls = v, how
        r.prepare = lambda sb, victim, v=v: {"V": v}
        r.outcomes = expect[how]
        rows.append(r)
    return rows


def fields_of(line):
    """The line split at each '|' that is not inside quotes (a regex may hold one)."""
    out, cur, quote = [], "", None
    for ch in line:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "|":
            out.append(cur.strip())
            cur = ""
            continue
        cur += ch
    return out + [cur.strip()]


def command(text):
    return [decode_value(t) for t in shlex.split(text)]


def generated_rows(options):
    """For every option that takes a value, the option last with no value; for
    every command, an option it does not know: exit 2 naming the option."""
    rows = []
    for (cmd, opt), (kind, *flags) in sorted(options.items()):
        if cmd == "refenc" or kind == "flag" or not opt.startswith("--"):
            continue
        r = Row("%s.no-value" % id_base("%s %s" % (cmd, opt)), "%s %s" % (cmd, opt), cmd.split() + [opt])
        r.cls = "no-value"
        r.outcomes = lambda subs, opt=opt: [refused(re.escape(opt))]
        rows.append(r)
    for cmd in sorted({c for c, o in options}):
        words = [] if cmd == "refenc" else cmd.split()
        r = Row("%s.unknown-option" % (cmd.replace(" ", ".")), "%s --help" % cmd, words + ["--redteam-nosuch"])
        r.cls = "unknown-option"
        r.outcomes = lambda subs: [refused(r"--redteam-nosuch|usage:")]
        rows.append(r)
    return rows


def parse_table(path):
    options, rows = {}, []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = fields_of(line)
        kind = fields[0]
        try:
            if kind == "option":
                _, cmd, opt, okind = fields[:4]
                options[(cmd, opt)] = okind.split()
            elif kind == "paths":
                _, target, slot, keys = fields[:4]
                cmd = "|".join(fields[4:])
                words, opt = split_target(target)
                okind = options[(" ".join(words), opt)][0]
                rows += path_rows(target, okind, slot, parse_keys(keys), command(cmd))
            elif kind == "number":
                _, target, keys = fields[:3]
                k = parse_keys(keys)
                cmd = command("|".join(fields[3:]))
                if k.get("type", "int") == "float":
                    oks, bads = float_values()
                else:
                    oks, bads = int_values(int(k["min"]), int(k["max"]))
                rows += value_rows(target, k, cmd, oks + k.get("oks", []), bads + k.get("bads", []))
            elif kind == "values":
                _, target, keys = fields[:3]
                k = parse_keys(keys)
                rows += value_rows(target, k, command("|".join(fields[3:])), k.get("oks", []),
                                   k.get("bads", []), k.get("anys", []))
            elif kind in ("row", "signal", "race"):
                _, rid, target, keys = fields[:4]
                k = parse_keys(keys)
                r = Row(rid, target, command("|".join(fields[4:])), float(k.get("timeout", DEFAULT_TIMEOUT)))
                r.cls = "row"
                # a signalled program dies of the signal or exits 2 with a message
                ex = exits_of(k.get("exit"), {2} if kind == "signal" else OK_EXIT)
                err = k.get("err") or None
                cr = k.get("creates", "")
                r.prepare = lambda sb, victim: {}
                r.address_space = int(k["as"]) if "as" in k else None
                r.outcomes = lambda subs, ex=ex, err=err, cr=cr: [
                    (ex, err, [p for p, _ in listed(cr, subs)], [p for p, q in listed(cr, subs) if q])]
                if kind == "signal":
                    r.signal = (getattr(signal, "SIG" + k["sig"]), k.get("watch", "."))
                    r.cls = "signal"
                if kind == "race":
                    r.race, r.cls, r.creates_text = k["watch"], "race", cr
                    r.outcomes = lambda subs, cr=cr: [({0}, None, [p for p, _ in listed(cr, subs)], [])]
                rows.append(r)
            else:
                raise ValueError("unknown line type '%s'" % kind)
        except (ValueError, KeyError, IndexError) as e:
            raise SystemExit("redteam: %s:%d: %s: %r" % (path, n, type(e).__name__, e))
    rows += generated_rows(options)
    ids = [r.id for r in rows]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise SystemExit("redteam: %s: duplicate row ids: %s" % (path, ", ".join(dup)))
    return options, rows


# ---- the coverage check ---------------------------------------------------------------

def help_text(cli, words):
    r = subprocess.run([cli, *words, "--help"], capture_output=True, timeout=10)
    return r.stdout.decode(errors="replace") if r.returncode == 0 else ""


def options_in_help(text, words):
    """(command words, option or positional) pairs a help text lists: the
    options and positionals of its usage lines, and the options its option
    lines start with."""
    found = set()
    current = None
    for line in text.split("\n"):
        m = re.match(r"^(?:usage:)?\s*refenc ((?:[a-z]+ ?)*)(.*)$", line)
        if m and (line.startswith("usage:") or current is not None):
            cw = m.group(1).split()
            cmd = [w for w in cw if not w.startswith("-")]
            current = " ".join(cmd) if cmd else " ".join(words)
            rest = " ".join(cw[len(cmd):]) + " " + m.group(2)
        elif current is not None and line.startswith(" ") and line.strip() and "refenc" not in line:
            rest = line
        else:
            current = None if not line.startswith(" ") or not line.strip() else current
            rest = None
        if rest is not None and current is not None:
            toks = re.sub(r"[\[\]()|]", " ", rest).split()
            prev = None
            for t in toks:
                if re.match(r"^--[a-z][a-z0-9-]*$", t):
                    found.add((current, t))
                elif re.match(r"^[A-Z][A-Z_]*(\.[a-z]+)?(\.\.\.)?$", t) and not (prev or "").startswith("-"):
                    found.add((current, t.rstrip(".") if t.endswith("...") else t))
                prev = t
        m = re.match(r"^  (?:-h, )?(--[a-z][a-z0-9-]*)", line)
        if m:
            found.add((" ".join(words), m.group(1)))
    return found


def commands_in_help(text):
    cmds, inside = [], False
    for line in text.split("\n"):
        if line.startswith("commands:"):
            inside = True
        elif inside and re.match(r"^  [a-z]+ ", line):
            cmds.append(line.split()[0])
        elif inside and not line.startswith(" "):
            inside = False
    return cmds


def help_options(cli, extra=None):
    top = help_text(cli, [])
    found = {("refenc", o) for c, o in options_in_help(top, ["refenc"]) if o.startswith("--")}
    for cmd in commands_in_help(top):
        found.add((cmd, None))  # the command itself: it needs a declared option at least
        text = help_text(cli, [cmd])
        if extra and cmd == extra[0]:
            text += "\n  %s FILE  an option the table does not know\n" % extra[1]
        found |= options_in_help(text, [cmd])
    return found


REQUIRED = {
    "in-json": lambda: C.input_file_classes(True),
    "in-st": lambda: C.input_file_classes(False),
    "golden-dir": lambda: C.dir_classes("golden-dir"),
    "results-dir": lambda: C.dir_classes("results-dir"),
    "cases-dir": lambda: C.dir_classes("cases-dir"),
    "out-file": lambda: C.OUT_FILE_CLASSES + ["same"],
    "out-dir": lambda: C.OUT_DIR_CLASSES,
}


def coverage(options, rows, in_help):
    """The coverage check's failures, one line each."""
    bad = []
    for cmd in sorted(c for c, o in in_help if o is None):
        if not any(c == cmd for c, o in options):
            bad.append("coverage: command '%s' (refenc --help) has no option declared in the table" % cmd)
    in_help = {k for k in in_help if k[1] is not None}
    for key in sorted(in_help):
        if key not in options:
            bad.append("coverage: '%s %s' is in the help but not declared in the table (option | ...)" % key)
    for key, (kind, *flags) in sorted(options.items()):
        if key not in in_help and "hidden" not in flags:
            bad.append("coverage: '%s %s' is declared but no --help lists it (mark it hidden?)" % key)
        target = "%s %s" % key if key[0] != "refenc" else "refenc %s" % key[1]
        mine = [r for r in rows if r.target == target]
        if not mine:
            bad.append("coverage: '%s' has no row" % target)
            continue
        if kind in REQUIRED:
            missing = [c for c in REQUIRED[kind]() if c not in {r.cls for r in mine}]
            if missing:
                bad.append("coverage: '%s' (%s) has no row of class %s" % (target, kind, ", ".join(missing)))
        elif kind == "value":
            vals = [r.value for r in mine if r.value is not None]
            need = {"empty": lambda v: v == "", "non-UTF-8": lambda v: any(0xdc80 <= ord(c) <= 0xdcff for c in v),
                    "4096+ bytes": lambda v: len(os.fsencode(v)) >= 4096}
            missing = [n for n, f in need.items() if not any(f(v) for v in vals)]
            if missing:
                bad.append("coverage: value option '%s' has no value that is %s" % (target, ", ".join(missing)))
        elif kind == "number":
            if not any(r.value is not None for r in mine):
                bad.append("coverage: numeric option '%s' has no number line" % target)
    return bad


# ---- the sandbox ----------------------------------------------------------------------

def snapshot(root):
    """relative path -> (type, mode, content sha256 or link target)."""
    snap = {}
    for dirpath, dirnames, filenames, dirfd in os.fwalk(root, follow_symlinks=False):
        rel = os.path.relpath(dirpath, root)
        for name in dirnames + filenames:
            try:
                s = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            key = os.path.normpath(os.path.join(rel, name))
            if stat.S_ISREG(s.st_mode):
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dirfd)
                with os.fdopen(fd, "rb") as f:
                    what = hashlib.sha256(f.read()).hexdigest()
            elif stat.S_ISLNK(s.st_mode):
                what = os.readlink(name, dir_fd=dirfd)
            else:
                what = None
            snap[key] = (stat.S_IFMT(s.st_mode), stat.S_IMODE(s.st_mode), what)
    return snap


def changes(before, after):
    out = []
    for k in sorted(set(before) | set(after)):
        if k not in after:
            out.append(("removed", k))
        elif k not in before:
            out.append(("created", k))
        elif before[k] != after[k]:
            out.append(("changed", k))
    return out


def unlock(root):
    for dirpath, dirnames, filenames, dirfd in os.fwalk(root, follow_symlinks=False):
        for d in dirnames:
            try:
                os.chmod(d, 0o755, dir_fd=dirfd, follow_symlinks=False)
            except OSError:
                pass


def remove(root):
    if os.path.lexists(root):
        os.chmod(root, 0o755)
        unlock(root)
        shutil.rmtree(root)


# ---- one row ----------------------------------------------------------------------------

def shown_argv(argv):
    return "refenc " + " ".join(shlex.quote(printable(a)) for a in argv)


def default_signals():
    """The termination signals at their defaults in the child, whatever this
    runner inherited (a job started in the background by a shell without job
    control ignores SIGINT and SIGQUIT, and refenc leaves an ignored signal
    ignored)."""
    for s in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)


def execute(cli, argv, sb, row):
    kw = {"preexec_fn": default_signals}
    if row.nobody and os.geteuid() == 0:   # root writes into read-only directories: run as nobody
        kw.update({"user": NOBODY, "group": NOBODY, "extra_groups": []})
    if row.address_space:
        mib = row.address_space << 20

        def limited():
            default_signals()
            resource.setrlimit(resource.RLIMIT_AS, (mib, mib))
        kw["preexec_fn"] = limited
    first = argv[:argv.index(";;")] if row.race else argv
    p = subprocess.Popen([os.fsencode(cli)] + [os.fsencode(a) for a in first], cwd=sb, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, **kw)
    if row.signal:
        return signal_run(p, sb, row)
    if row.race:
        return race_run(p, cli, argv, sb, row, kw)
    try:
        out, err = p.communicate(timeout=row.timeout)
        return p.returncode, err, None
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return None, b"", "no exit within %g s (a hang)" % row.timeout


def temporaries(d):
    try:
        return [n for n in os.listdir(d) if ".tmp." in n or n.endswith(".new")]
    except OSError:
        return []


def signal_run(p, sb, row):
    """Stops the program as soon as a temporary file of its output appears,
    sends the signal, lets it go on; returns (code, stderr, note)."""
    sig, watch = row.signal
    wdir = os.path.join(sb, watch)
    hit = False
    deadline = time.monotonic() + row.timeout
    while p.poll() is None and time.monotonic() < deadline:
        if temporaries(wdir):
            os.kill(p.pid, signal.SIGSTOP)
            hit = bool(temporaries(wdir))
            if hit:
                os.kill(p.pid, sig)
            os.kill(p.pid, signal.SIGCONT)
            if hit:
                break
    try:
        out, err = p.communicate(timeout=row.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return None, b"", "no exit within %g s after the signal" % row.timeout
    return p.returncode, err, None if hit else "missed"


def transient(d, finals):
    """The files under d that are not among its final outputs: (path, inode)."""
    out = set()
    if not os.path.isdir(d):
        return out
    for dirpath, dirnames, filenames, dirfd in os.fwalk(d):
        for n in filenames:
            rel = os.path.normpath(os.path.join(os.path.relpath(dirpath, d), n))
            if rel not in finals:
                try:
                    out.add((rel, os.stat(n, dir_fd=dirfd, follow_symlinks=False).st_ino))
                except FileNotFoundError:
                    pass
    return out


def blocked_on_lock(p):
    """The process sleeps waiting for a file lock (Linux: its wchan)."""
    try:
        with open("/proc/%d/wchan" % p.pid) as f:
            return "lock" in f.read()
    except OSError:
        return False


def stopped(p):
    try:
        with open("/proc/%d/stat" % p.pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("T", "t")
    except OSError:
        return False


def race_run(a, cli, argv, sb, row, kw):
    """Two runs into one output directory, interleaved where a lock must
    serialise them.  A is stopped as soon as it has a file in the watched
    directory that is neither a final output nor a temporary (the '.new' of a
    case awaiting the manifest, where runs of one name collide); the runner
    takes the directory's lock if it is free (flock, as refenc does) and
    starts B, which runs until it waits for a lock (or ends, or 3 s) and is
    stopped; the runner's lock is released, A goes on to its end (or 5 s,
    when it waits for B), then B.
    Then for each case name the case stored must be the one of the last run
    of it to exit 0, and the manifest must give its sha256.  Returns (code,
    stderr, note) as execute does: 0 when all that held."""
    watch = os.path.join(sb, row.race)
    finals = {os.path.relpath(os.path.normpath(os.path.join(sb, p)), watch)
              for p, _ in listed(row.creates_text, {})}
    a_argv, b_argv = argv[:argv.index(";;")], argv[argv.index(";;") + 1:]
    # (after two tries without such a file, at any file: a writer may have none)
    settled = lambda files: [f for f in files if ".tmp." not in f[0] or row.race_loose]
    deadline = time.monotonic() + row.timeout
    while a.poll() is None and not settled(transient(watch, finals)) and time.monotonic() < deadline:
        time.sleep(0.0002)
    try:
        os.kill(a.pid, signal.SIGSTOP)
    except ProcessLookupError:
        pass
    if a.poll() is not None or not settled(transient(watch, finals)):
        if a.poll() is None:
            os.kill(a.pid, signal.SIGCONT)
        a.communicate()
        return None, b"", "missed"
    lock = os.open(watch, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # A holds it: B waits for A's
        pass
    b = subprocess.Popen([os.fsencode(cli)] + [os.fsencode(x) for x in b_argv], cwd=sb, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, **kw)
    t = time.monotonic() + 3
    while b.poll() is None and not blocked_on_lock(b) and time.monotonic() < t:
        time.sleep(0.0005)
    if b.poll() is None:
        os.kill(b.pid, signal.SIGSTOP)
        t = time.monotonic() + 2  # stopped for sure before the lock is freed, or B could take it first
        while b.poll() is None and not stopped(b) and time.monotonic() < t:
            time.sleep(0.0005)
    os.close(lock)  # released: B, stopped, cannot take it before A
    os.kill(a.pid, signal.SIGCONT)
    t = time.monotonic() + 5  # A to its end, unless it waits for B (then B goes on too)
    while a.poll() is None and time.monotonic() < t:
        time.sleep(0.001)
    if b.poll() is None:
        os.kill(b.pid, signal.SIGCONT)
    res, order = {}, []
    t = time.monotonic() + row.timeout
    while len(res) < 2 and time.monotonic() < t:
        for p in (a, b):
            if p not in res and p.poll() is not None:
                res[p] = (p.communicate()[1], p.returncode)
                order.append(p)
        time.sleep(0.001)
    if len(res) < 2:
        for q in (a, b):
            if q.poll() is None:
                os.killpg(q.pid, signal.SIGCONT)
                os.killpg(q.pid, signal.SIGKILL)
                q.communicate()
        return None, b"", "no exit within %g s (a deadlock)" % row.timeout
    why = []
    for p, name in ((a, "A"), (b, "B")):
        err, code = res[p]
        if code < 0:
            why.append("run %s killed by signal %s" % (name, signal.Signals(-code).name))
        elif code not in (0, 2) or (code == 2 and not err.strip()):
            why.append("run %s exit %d%s" % (name, code, "" if err.strip() else " with no message"))
    winners = [{a: a_argv, b: b_argv}[p] for p in order if res[p][1] == 0]  # in the order they ended
    if not why and not winners:
        why.append("both runs failed: %s" % printable(res[b][0].decode(errors="replace").strip(), 120))
    last = {}  # for each case name, the last run of it to exit 0
    for w in winners:
        last[w[w.index("--name") + 1]] = w
    for w in ([] if why else last.values()):
        why += stored_case_check(sb, w, "A exits %d, B %d, %s ending first" % (
            res[a][1], res[b][1], "A" if order[0] is a else "B"))
    return (0 if not why else 1), "; ".join(why).encode(), None


def stored_case_check(sb, winner, exits):
    """The case stored under the winner's name is the winner's (its --seed in
    the description), and the manifest lists its sha256."""
    out_dir = os.path.join(sb, winner[winner.index("--out") + 1])
    name = winner[winner.index("--name") + 1]
    case = os.path.join(out_dir, "cases", name + ".safetensors")
    try:
        meta, _ = st.read(case)
        with open(case, "rb") as f:
            sha = hashlib.sha256(f.read()).hexdigest()
        with open(os.path.join(out_dir, "manifest.json")) as f:
            listed_sha = [e.get("sha256") for e in json.load(f)["cases"] if e.get("case") == name]
    except Exception as e:
        return ["the stored case or manifest cannot be read: %s" % e]
    why = []
    if listed_sha != [sha]:
        why.append("the manifest lists %s for %s, the file's sha256 is %s" % (
            [x[:16] for x in listed_sha], name, sha[:16]))
    m = re.search(r"seed (\d+)", meta.get("description", ""))
    stored = m.group(1) if m else None
    seed = winner[winner.index("--seed") + 1]
    if stored != seed:
        why.append("%s: the last run of %s to exit 0 (seed %s) finds the case of seed %s stored" % (
            exits, name, seed, stored))
    return why


def readable(path):
    """A whole file: JSON that parses (a manifest), or a safetensors file whose
    header parses and whose data ends where the header says."""
    if path.endswith(".json"):
        try:
            with open(path, "rb") as f:
                json.loads(f.read().decode("utf-8"))
            return True
        except Exception:
            return False
    try:
        meta, tensors = st.read(path)
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
        return size == 8 + n + sum(len(t[2]) for t in tensors.values())
    except Exception:
        return False


def judge(row, code, err, note, before, after, sb_rel, subs, sb):
    """None when the row holds, else why not."""
    if note:
        return note
    if code is not None and code < 0 and not (row.signal and -code == row.signal[0]):
        return "killed by signal %s" % signal.Signals(-code).name
    signalled = bool(row.signal) and code in (-row.signal[0], 128 + row.signal[0])
    text = err.decode("utf-8", "backslashreplace")
    if row.race and code != 0:
        return text
    changed = changes(before, after)
    why = []
    for exits, regex, allowed, must in row.outcomes(subs):
        allowed_rel = set()
        for a in allowed:
            p = os.path.normpath(os.path.join(sb_rel, a))
            while p not in ("", ".") and p not in allowed_rel:
                allowed_rel.add(p)
                p = os.path.dirname(p)
        stray = [(w, k) for w, k in changed if k not in allowed_rel]
        if code not in exits and not signalled:
            why.append("exit %s, expected %s" % (code, "/".join(map(str, sorted(exits)))))
            continue
        if code == 2 and not signalled and not text.strip():
            why.append("exit 2 with no message")
            continue
        if code == 2 and re.search(r"(?i)out of memory", text):
            why.append("exit 2 with a false 'out of memory': %s" % printable(text.strip(), 160))
            continue
        if regex and not re.search(regex, text):
            why.append("stderr does not match /%s/: %s" % (printable(regex, 60), printable(text.strip(), 160)))
            continue
        if stray:
            why.append("; ".join("%s %s" % (w, printable_tail(k, 80)) for w, k in stray[:3]))
            continue
        missing = [m for m in must
                   if not stat.S_ISREG(after.get(os.path.normpath(os.path.join(sb_rel, m)), (0,))[0])]
        if missing:
            why.append("exit %d but no regular file at %s" % (code, printable(missing[0], 80)))
            continue
        torn = [a for a in allowed if signalled and os.path.isfile(os.path.join(sb, a)) and not readable(
            os.path.join(sb, a))]
        if torn:
            why.append("killed by the signal, leaving an incomplete %s" % printable(torn[0], 80))
            continue
        return None
    return " | ".join(dict.fromkeys(why))


def run_row(cli, base, work, row, index):
    t = time.monotonic()
    try:
        why, argv = run_row_in(cli, base, work, row, index)
    except Exception as e:  # a row the runner cannot set up fails, it does not stop the suite
        why, argv = "the runner could not run the row: %s: %s" % (type(e).__name__, e), row.argv
    return why, argv, time.monotonic() - t


def sandbox(base, sb, row):
    """A copy of the fixtures the row names (any whose name its argv or slot
    mentions, and sub/ for the '..' classes): a copy of all of them for each
    of 700 rows would take most of the suite's time."""
    text = "\0".join(row.argv + row.needs)
    os.makedirs(sb)
    for name in os.listdir(base):
        if name in text or name == "sub":
            src, dst = os.path.join(base, name), os.path.join(sb, name)
            if os.path.isdir(src):
                shutil.copytree(src, dst, symlinks=True)
            else:
                shutil.copy2(src, dst)


def run_row_in(cli, base, work, row, index):
    root = os.path.join(work, "r%04d" % index)
    remove(root)
    sb_rel = os.path.join("a", "b", "sb")
    sb = os.path.join(root, sb_rel)
    sandbox(base, sb, row)
    victim = os.path.join(root, "victim")
    with open(victim, "w") as f:
        f.write("a file outside the sandbox: never to be written\n")
    attempts = 5 if row.signal or row.race else 1
    for attempt in range(attempts):
        row.race_loose = attempt >= 2
        subs = row.prepare(sb, victim)
        argv = subst(row.argv, subs)
        before = snapshot(root)
        code, err, note = execute(cli, argv, sb, row)
        after = snapshot(root)
        if note != "missed" or attempt == attempts - 1:
            break
        remove(sb)
        sandbox(base, sb, row)
    if note == "missed" and row.race:
        note = "no file but its outputs ever appeared in %s: the runs could not be interleaved (%d tries)" % (
            row.race, attempts)
    elif note == "missed":
        note = "the program finished before its write could be signalled (%d tries)" % attempts
    why = judge(row, code, err, note, before, after, sb_rel, subs, sb)
    remove(root)
    return why, argv


# ---- main -------------------------------------------------------------------------------

def read_known(path):
    known = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                rid, _, why = line.partition(" ")
                known[rid] = why.strip()
    return known


def coverage_control(cli, options, rows):
    """The coverage check must report (1) an option added to a --help that the
    table does not declare, and (2) a path option whose rows of one class are gone."""
    extra = ("run", "--redteam-probe")
    bad = coverage(options, rows, help_options(cli, extra))
    hit1 = [b for b in bad if extra[1] in b]
    dropped = [r for r in rows if not (r.target == "run --config" and r.cls == "fifo")]
    bad = coverage(options, dropped, help_options(cli))
    hit2 = [b for b in bad if "'run --config'" in b and "fifo" in b]
    for hit, what in ((hit1, "an option added to 'refenc run --help'"),
                      (hit2, "the rows of class fifo of 'run --config' removed")):
        print("coverage control: %s: %s" % (what, hit[0] if hit else "NOT REPORTED"))
    if hit1 and hit2:
        return 0
    print("coverage control FAILED: the coverage check missed what it must report")
    return 1


FAKE_CLI = r"""#!/usr/bin/python3
# A stand-in for refenc that misbehaves as REDTEAM_FAKE says (redteam.py --runner-control).
import os, signal, sys
args, mode = sys.argv[1:], os.environ["REDTEAM_FAKE"]
out = args[args.index("--out") + 1] if "--out" in args else None
cfg = args[args.index("--config") + 1] if "--config" in args else None
ok = cfg is not None and os.path.isfile(cfg) and os.path.getsize(cfg) > 0 and open(cfg, "rb").read(1) == b"{"
if mode == "good":                      # refuses what is bad, writes what it must, atomically
    if not ok:
        sys.exit(print("refenc run: %s: cannot read it" % cfg, file=sys.stderr) or 2)
    if out and (os.path.lexists(out) and not os.path.isfile(out) or os.path.islink(out)):
        sys.exit(print("refenc run: %s: not a regular file" % out, file=sys.stderr) or 2)
    if out:
        open(out + ".tmp.fake", "w").write("results")
        os.rename(out + ".tmp.fake", out)
    sys.exit(0)
if mode == "follow":                    # writes through whatever is at the output
    open(out, "w").write("results")
elif mode == "temp":                    # leaves its temporary file
    open(out, "w").write("results")
    open(out + ".tmp.fake", "w").write("res")
elif mode == "escape":                  # writes outside its output's directory
    open(out, "w").write("results")
    open("../../escaped", "w").write("x")
elif mode == "hang":
    open(out).read()
elif mode == "segv":
    os.kill(os.getpid(), signal.SIGSEGV)
elif mode == "silent":
    sys.exit(2)
elif mode == "oom":
    sys.exit(print("refenc run: out of memory", file=sys.stderr) or 2)
sys.exit(0)                             # "accept": takes anything
"""

CONTROL_MODES = {"good": "behaves", "follow": "follows the link", "temp": "leaves a temporary",
                 "escape": "writes outside", "hang": "hangs", "segv": "crashes", "silent": "exits 2 silently",
                 "oom": "says out of memory", "accept": "accepts bad input"}

# (row, mode of the fake program, must the row pass?)
RUNNER_CONTROLS = [("run.out.valid", "good", True), ("run.config.missing", "good", True),
                   ("run.out.symlink", "good", True), ("run.out.fifo", "good", True),
                   ("run.out.symlink", "follow", False), ("run.out.valid", "temp", False),
                   ("run.out.valid", "escape", False), ("run.out.fifo", "hang", False),
                   ("run.config.garbage", "segv", False), ("run.config.missing", "silent", False),
                   ("run.config.missing", "oom", False), ("run.config.garbage", "accept", False)]


def runner_control(rows, work):
    """The runner's own negative control: rows judged on a fake program that
    misbehaves in one way each must fail, and pass on one that behaves."""
    remove(work)
    os.makedirs(work)
    fake = os.path.join(work, "fake-refenc")
    with open(fake, "w") as f:
        f.write(FAKE_CLI)
    os.chmod(fake, 0o755)
    base = os.path.join(work, "base")
    os.makedirs(os.path.join(base, "sub"))
    with open(os.path.join(base, "cfg.json"), "w") as f:
        f.write('{"model": {}}\n')
    by_id = {r.id: r for r in rows}
    bad = 0
    for i, (rid, mode, should_pass) in enumerate(RUNNER_CONTROLS):
        row = by_id[rid]
        saved = row.timeout
        row.timeout = 2.0  # the hang is the fake's: no need to wait 10 s
        os.environ["REDTEAM_FAKE"] = mode
        why, argv = run_row_in(fake, base, work, row, i)
        row.timeout = saved
        good = (why is None) == should_pass
        bad += not good
        print("runner control: %-20s on a program that %-22s %s (%s)" % (
            rid, CONTROL_MODES[mode],
            "passes" if why is None else "fails", "right" if good else "WRONG") + ("" if why is None else ": " + why))
    del os.environ["REDTEAM_FAKE"]
    remove(work)
    if bad:
        print("runner control FAILED: %d judgement%s wrong" % (bad, "" if bad == 1 else "s"))
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "refenc"))
    ap.add_argument("--table", default=os.path.join(HERE, "table.txt"))
    ap.add_argument("--known", default=os.path.join(HERE, "known-failing.txt"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "redteam"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", help="run only the rows whose id matches this regex (no coverage check)")
    ap.add_argument("--list", action="store_true", help="print the row ids and exit")
    ap.add_argument("--coverage-control", action="store_true",
                    help="the coverage check's negative control, instead of the rows")
    ap.add_argument("--runner-control", action="store_true",
                    help="the runner's negative control (a fake program misbehaving), instead of the rows")
    ap.add_argument("--verbose", action="store_true", help="print every row's result")
    a = ap.parse_args()
    os.umask(0o022)  # the sandboxes readable by 'nobody', who runs the read-only-directory rows as root
    cli = os.path.abspath(a.cli)
    options, rows = parse_table(a.table)
    if a.list:
        for r in rows:
            print(r.id)
        return 0
    if a.coverage_control or a.runner_control:
        rc = coverage_control(cli, options, rows) if a.coverage_control else 0
        return rc | (runner_control(rows, os.path.abspath(a.work) + "-control") if a.runner_control else 0)

    t0 = time.monotonic()
    known = read_known(a.known)
    failed, passed, known_hits = [], 0, 0
    if not a.only:
        failed += coverage(options, rows, help_options(cli))
        failed += ["known-failing.txt: '%s' is no row of the table (remove it)" % k
                   for k in known if k not in {r.id for r in rows}]
    else:
        rows = [r for r in rows if re.search(a.only, r.id)]

    work = os.path.abspath(a.work)
    remove(work)
    base = os.path.join(work, "base")
    fixtures.build(cli, base, ROOT)
    os.chmod(work, 0o755)

    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as ex:
        futs = [ex.submit(run_row, cli, base, work, r, i) for i, r in enumerate(rows)]
        times = []
        for r, fut in zip(rows, futs):
            why, argv, secs = fut.result()
            times.append((secs, r.id))
            if r.id in known:
                if why is None:
                    failed.append("%s: listed in known-failing.txt but passes now (remove it from the list)"
                                  " :: %s" % (r.id, shown_argv(argv)))
                else:
                    known_hits += 1
                    print("known %s: %s" % (r.id, why))
            elif why is not None:
                failed.append("%s: %s :: %s" % (r.id, why, shown_argv(argv)))
            else:
                passed += 1
                if a.verbose:
                    print("ok %s" % r.id)
    remove(work)
    if a.verbose:
        print("slowest rows: " + ", ".join("%s %.1f s" % (i, t) for t, i in sorted(times)[::-1][:12]))
    for f in failed:
        print("FAIL %s" % f)
    print("(%d rows in %.0f s; %d known failures not counted: %s)"
          % (len(rows), time.monotonic() - t0, known_hits, os.path.relpath(a.known)))
    print("%d passed, %d failed" % (passed, len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
