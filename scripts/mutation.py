#!/usr/bin/python3
"""Mutation testing of refenc (make mutation; docs/hardening.md).

Each mutant is one small change to one source file, from a fixed list of
operators; it is built in a copy of the tree and the tests of its area are
run on it.  A mutant is killed when a test fails (or the run crashes or
times out), survives when every test passes, and is stillborn when it does
not compile (-Werror: not counted).  A mutant that survives the plain build
gets a second stage: the same tests on a build with AddressSanitizer and
UndefinedBehaviorSanitizer, as `make sanitize` runs them; a failure or any
sanitizer report kills it there (an off-by-one that reads one byte past a
buffer changes no result, but make sanitize would catch it).  A mutant listed in
scripts/mutation-equivalent.txt, with the reason it cannot change any
result, is equivalent (not counted either); so is a mutant whose object file
is byte for byte the unmutated one (the compiler emitted the same code: a
line in a branch of #if that is not compiled on this host, or a change the
optimiser undoes), found without running a test.  The score of an area is
killed / (killed + surviving), the surviving equivalents left out; the
goal is >= 95% in every area.

Areas (every area that decides a verdict or a golden), each with the test
suites that speak for it:

  certify  ref/tool/certify.c, ref/tool/budget.c (the low-precision and float32
           budgets), ref/tool/verdict.c (the verdict rules),
           ref/tool/certificate.c (the certificate, the run's most likely
           bug, what a run does not rule out; the certificate suite tests
           its tallies directly)
  readers  ref/io/safetensors.c (reading), ref/io/case_file.c,
           ref/io/manifest.c, ref/io/file_read.c
  kernels  ref/*.c (the double-precision reference)
  oracle   ref/oracle/dot.c (the exact dot products), engine.c (the one
           engine) and the blocks it runs: encoder.c, layer.c, mha.c,
           ffn.c, attention.c, rope.c, rope_scaling.c, rmsnorm.c,
           embedding.c, pooling.c, and ziv.c (the precision loop); against the
           oracle suites, the accuracy suites and the regeneration of the
           smallest committed goldens byte for byte
  golden   ref/golden/make.c, parts.c, part_file.c, plan.c, digest.c,
           validate.c, file.c and grad.c (the golden maker: units, shards,
           parts streamed to their file and merge, the plan and its digests,
           input validation, the files it writes, the gradients and their
           upstream gradient);
           against the golden_* suites

Operators (on code only: never in comments, strings, character constants or
preprocessor lines):

  lcr   && <-> ||
  ror   == <-> !=, < <-> <=, > <-> >=
  aor   binary + <-> -, * <-> /   (written with spaces around them)
  neg   a logical ! removed
  call  fabs( removed, fmax( <-> fmin(
  const an integer literal 0 <-> 1
  skip  continue; / break; removed

The full list of a run is deterministic; when an area has more mutants than
its budget, the sample is the budget's mutants of smallest hash of (seed,
area, id) (MUTATION_SEED overrides the seed): ids are the line's text, so
editing one file moves only the mutants it adds or removes, and a fix for a
survivor does not redraw the area.  The default budget, 30 mutants an area,
keeps `make mutation` within about 10 minutes on 2 quiet cores, as CI runs
it, and leaves about 24 counted once the stillborn and equivalent are out:
the 95% goal means something only from 20 counted up (under 20 it is 100%,
one survivor fails an area); --budget 100 runs a larger sample
(about 25 minutes), whose first mutants by rank are the default one
(docs/hardening.md has the measured scores and CPU time per area).  A
mutant listed in scripts/mutation-equivalent.txt is counted equivalent
without being run.

usage: scripts/mutation.py [--areas certify,readers,kernels,oracle,golden] [--budget N]
                           [--seed S] [--list] [--only ID] [--keep]
Writes build/mutation/report.txt (the scores and every survivor with its
diff) and exits 1 if an area scores under the goal.
"""
import argparse
import hashlib
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOAL = 95.0

READER_FUNCS = None  # safetensors.c: only the reading half is the readers' area

AREAS = {
    "certify": {
        "files": ["ref/tool/certify.c", "ref/tool/budget.c", "ref/tool/verdict.c", "ref/tool/certificate.c",
                  "ref/cli/selection.c"],
        "filter": "@(certify|certify_lowprec|certify_cli|out_of_memory|figures|certificate|api_edges|bad_results|nonfinite|cli_usage|golden_trust|"
                  "bad_golden|variants|case_outputs|verdict_rules|report|certificate_run|file_safety|golden_grad|golden_grad_variants|grad_budget)/*",
        "budget": 30,
    },
    "readers": {
        "files": ["ref/io/safetensors.c", "ref/io/case_file.c", "ref/io/manifest.c", "ref/io/file_read.c",
                  "ref/io/grad_input.c", "ref/io/checkpoint_names.c", "ref/io/rope_scaling_json.c",
                  "ref/io/run_config.c"],
        "filter": "@(safetensors|safetensors_convert|st_limits|manifest|file_read|bad_golden|bad_results|api_edges|"
                  "checkpoint_names|rope_scaling_json|cli_run|config_json|rows|"
                  "case_outputs|golden_trust|file_safety|messages|out_of_memory|nonfinite|cli_usage|"
                  "atomic_write|golden_grad|golden_resume)/*",
        "budget": 30,
    },
    "kernels": {
        "files": None,  # ref/*.c
        "filter": "@(activation|alibi|attention|embedding|encoder|ffn|glu|gqa|layer|layernorm|rmsnorm|learned_pe|linear|mha|position_ids|"
                  "rope|rope_scaling|sinusoidal|softcap|softmax|window|layer_pattern|qk_norm|relative_bias|pooling|params|accuracy_*|oracle_selfcheck|structure|permutation|"
                  "softmax_temperature|pe_rotation|rope_relative|layernorm_invariance|qk_variance|case_outputs|"
                  "nonfinite|run_inputs|cli_run|grad_*)/*",
        "budget": 30,
    },
    "oracle": {
        # the MPFR engine and the blocks it runs, its dot products and Ziv's loop
        "files": ["ref/oracle/dot.c", "ref/oracle/engine.c", "ref/oracle/encoder.c", "ref/oracle/layer.c",
                  "ref/oracle/mha.c", "ref/oracle/ffn.c", "ref/oracle/attention.c", "ref/oracle/ziv.c",
                  "ref/oracle/rope.c", "ref/oracle/rope_scaling.c", "ref/oracle/rmsnorm.c",
                  "ref/oracle/embedding.c", "ref/oracle/pooling.c", "ref/oracle/relative_bias.c"],
        "filter": "@(oracle_*/*|accuracy_*/*|golden/*|out_of_memory/oracle_*|relative_bias/*)",
        "budget": 30,
    },
    "oracle_backward": {
        # the oracle's backward: the kernels' MPFR twins, the layer's and the stack's
        "files": ["ref/oracle/linear_backward.c", "ref/oracle/layernorm_backward.c",
                  "ref/oracle/softmax_backward.c", "ref/oracle/attention_backward.c",
                  "ref/oracle/activation_backward.c", "ref/oracle/embedding_backward.c",
                  "ref/oracle/rope_backward.c", "ref/oracle/layer_backward.c", "ref/oracle/encoder_backward.c",
                  "ref/oracle/rmsnorm_backward.c", "ref/oracle/glu_backward.c"],
        "filter": "@(grad_oracle/*|oracle_adjoint/*|oracle_layer_backward/*|oracle_encoder_backward/*|"
                  "out_of_memory/oracle_backward_*)",
        "budget": 50,
    },
    "grad_tools": {
        # the gradients' certification tools: the emulated backward (the F32/F16/BF16 budgets'
        # baseline) and the named backward bugs' kernels
        "files": ["ref/tool/emulate_backward.c", "ref/tool/backward_bugs.c"],
        "filter": "@(grad_budget|golden_grad|golden_grad_variants|grad_controls)/*",
        "budget": 20,
    },
    "linear_blocked": {
        # the tools' blocked linear map (the golden maker's reference runs): bit for bit the
        # reference's refenc_linear_forward, so any change of its sums must fail its suite
        "files": ["ref/tool/linear_blocked.c"],
        "filter": "@(linear_blocked|linear)/*",
        "budget": 20,
    },
    "golden": {
        # the golden maker: units, parts and merge, digests, input validation, files, bug variants
        "files": ["ref/golden/make.c", "ref/golden/parts.c", "ref/golden/plan.c", "ref/golden/digest.c",
                  "ref/golden/validate.c", "ref/golden/file.c", "ref/golden/grad.c", "ref/golden/alt.c",
                  "ref/golden/part_file.c"],
        "filter": "@(golden*/*|out_of_memory/golden_*)",
        "budget": 30,
    },
}

# ---------------------------------------------------------------- mutants


def code_mask(text):
    """For each character of text: True where it is code (not a comment, a
    string or character constant, or a preprocessor line)."""
    mask = [True] * len(text)
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c == "#":
            j = text.find("\n", i)
            j = n if j < 0 else j
            while j > 0 and text[j - 1] == "\\" and j < n:  # continued lines
                k = text.find("\n", j + 1)
                j = n if k < 0 else k
            for k in range(i, j):
                mask[k] = False
            i = j
            continue
        if c in " \t":
            i += 1
            continue
        at_line_start = c == "\n"
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                mask[k] = False
            i = j
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                mask[k] = False
            i = j
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            for k in range(i, min(j + 1, n)):
                mask[k] = False
            i = j + 1
            continue
        i += 1
    return mask


OPERATORS = [
    # (name, regex, replacement function)
    ("lcr", re.compile(r"&&|\|\|"), lambda m: "||" if m.group() == "&&" else "&&"),
    ("ror", re.compile(r"==|!="), lambda m: "!=" if m.group() == "==" else "=="),
    ("ror", re.compile(r"(?<![<>\-])<=|(?<![<>\-])<(?![<=])"), lambda m: "<" if m.group() == "<=" else "<="),
    ("ror", re.compile(r"(?<![<>\-])>=|(?<![<>\-])>(?![>=])"), lambda m: ">" if m.group() == ">=" else ">="),
    ("aor", re.compile(r"(?<=\S) ([+\-*/]) (?=\S)"), lambda m: " " + {"+": "-", "-": "+", "*": "/", "/": "*"}[m.group(1)] + " "),
    ("neg", re.compile(r"!(?=[A-Za-z_(])"), lambda m: ""),
    ("call", re.compile(r"\bfabs\("), lambda m: "("),
    ("call", re.compile(r"\bfmax\(|\bfmin\("), lambda m: "fmin(" if m.group().startswith("fmax") else "fmax("),
    ("const", re.compile(r"(?<![\w.])[01](?![\w.])"), lambda m: "1" if m.group() == "0" else "0"),
    ("skip", re.compile(r"\b(continue|break);"), lambda m: ";"),
]


def in_reader_half(path, text, pos):
    """safetensors.c: only the reading half (before its writing section)
    belongs to the readers' area."""
    if not path.endswith("safetensors.c"):
        return True
    cut = text.find("/* ---------------------------------------------------------------- writing */")
    return cut < 0 or pos < cut


def skip_line(line):
    """Lines whose mutants only break the build or the messages: declarations
    of static tables, format strings carried on, _Static_assert."""
    s = line.strip()
    return s.startswith("_Static_assert") or s.startswith("#")


def mutants_of(path):
    text = open(os.path.join(ROOT, path)).read()
    mask = code_mask(text)
    lines = text.split("\n")
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln) + 1)
    out = []
    seen = {}
    for lineno, line in enumerate(lines):
        if skip_line(line):
            continue
        base = starts[lineno]
        for name, rx, repl in OPERATORS:
            for m in rx.finditer(line):
                pos = base + m.start()
                if not all(mask[pos:base + m.end()]) or not in_reader_half(path, text, pos):
                    continue
                new_line = line[:m.start()] + repl(m) + line[m.end():]
                if new_line == line:
                    continue
                # a stable id: file, operator, the line's text and which match of it
                key = (path, name, line.strip(), m.start())
                digest = hashlib.sha1(repr(key).encode()).hexdigest()[:10]
                k = seen.get(digest, 0)
                seen[digest] = k + 1
                mid = "%s:%s:%s%s" % (os.path.basename(path), name, digest, "" if k == 0 else "-%d" % k)
                out.append({"id": mid, "file": path, "line": lineno + 1, "op": name,
                            "old": line, "new": new_line})
    return out


def sample(ms, budget, seed, area):
    """The budget mutants of smallest sha1(seed:area:id): a sample that a
    change to the code moves only where it adds or removes mutants (each new
    one in the sample displaces one, each removed one lets one in), so that a
    fix for one survivor does not redraw the whole area."""
    rank = lambda m: hashlib.sha1(("%d:%s:%s" % (seed, area, m["id"])).encode()).hexdigest()
    return sorted(ms, key=rank)[:budget]


def area_files(area):
    files = AREAS[area]["files"]
    if files is None:
        files = sorted("ref/" + f for f in os.listdir(os.path.join(ROOT, "ref")) if f.endswith(".c"))
    return files


def load_equivalents():
    eq = {}
    path = os.path.join(ROOT, "scripts", "mutation-equivalent.txt")
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if line and not line.startswith("#"):
                mid, _, reason = line.partition(" ")
                eq[mid] = reason.strip()
    return eq

# ---------------------------------------------------------------- running


TREES = []  # the work trees of this run: any process running one of their programs is ours


def run(cmd, cwd, timeout=None, env=None):
    """Runs cmd, its output to a temporary file, and when it ends or times
    out kills what it left behind: its own session, and every process of
    this run's trees.  A test killed for a mutant's endless loop can leave
    the `refenc golden` it started running (or waiting on a lock the mutant
    never released); Criterion's workers live in sessions of their own, so
    killing the runner's session does not reach them, and such an orphan
    holding the output pipe once kept the run waiting for its end (CI was
    stopped at 90 minutes), or burned a core for the rest of the run."""
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env,
                             start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = "timeout"
        kill_session(p.pid)
        p.wait()
        kill_strays()
        out.seek(0)
        return rc, out.read().decode(errors="replace")


def kill_session(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_strays():
    """SIGKILL to every process whose program is in one of TREES (a
    program rebuilt since it started reads '... (deleted)', still there)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            exe = os.readlink("/proc/%s/exe" % pid)
        except OSError:
            continue
        if any(exe.startswith(t + os.sep) for t in TREES):
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass


def make_tree(dest):
    TREES.append(os.path.realpath(dest))
    if os.path.exists(dest):
        shutil.rmtree(dest)
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(
        ".git", "build", "build-*", "coverage", "*.o", "*.d"))


SAN_FLAGS = "-fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer -g"


def build(tree, sanitized=False):
    extra = ["OPT=-O1", "CFLAGS=" + SAN_FLAGS, "LDFLAGS=" + SAN_FLAGS] if sanitized else []
    return run(["make", "-s", "-j2"] + extra + ["build/checks/refenc-checks", "build/refenc"], tree, timeout=900)


def children_cpu():
    """User and system seconds of every finished child process so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def object_digest(tree, path):
    """The sha256 of the object file the build makes of a source file (None
    if there is none)."""
    obj = os.path.join(tree, "build", "obj", path[:-2] + ".o")
    try:
        return hashlib.sha256(open(obj, "rb").read()).hexdigest()
    except OSError:
        return None


def test_env(tree, fixture, san_logs=None):
    env = dict(os.environ)
    env.update(REFENC_SOURCE_ROOT=tree, REFENC_CLI=os.path.join(tree, "build/refenc"),
               REFENC_GOLDEN_GEN=os.path.join(tree, "build/refenc-golden"), REFENC_GOLDEN_FIXTURE=fixture)
    if san_logs is not None:
        # as make sanitize runs them: Criterion's own leaks at a worker's exit
        # are suppressed (checks/sanitize/lsan.supp), nothing else is
        env.update(ASAN_OPTIONS="detect_leaks=1:exitcode=86:log_path=%s/asan" % san_logs,
                   UBSAN_OPTIONS="halt_on_error=1:exitcode=87:log_path=%s/ubsan" % san_logs,
                   LSAN_OPTIONS="suppressions=%s:malloc_context_size=2:print_suppressions=0" % os.path.join(
                       tree, "checks", "sanitize", "lsan.supp"))
    return env


def run_tests(tree, fixture, flt, timeout, san_logs=None):
    return run([os.path.join(tree, "build/checks/refenc-checks"), "--fail-fast", "--jobs=2",
                "--filter", flt], tree, timeout=timeout, env=test_env(tree, fixture, san_logs))


class SanitizedStage:
    """The second stage: a sanitized copy of the tree, made when the first
    survivor needs it."""

    def __init__(self, out_dir, fixture):
        self.tree = os.path.join(out_dir, "tree-asan")
        self.logs = os.path.join(out_dir, "sanitizer-logs")
        self.fixture = fixture
        self.ready = None
        self.clean = {}  # filter -> the unmutated sanitized tree passes it, with no report

    def kills(self, m, flt, timeout):
        if self.ready is None:
            print("mutation: building the sanitized tree for the second stage", flush=True)
            make_tree(self.tree)
            rc, log = build(self.tree, sanitized=True)
            self.ready = rc == 0
            if not self.ready:
                print(log[-3000:])
        if not self.ready:
            return False
        if flt not in self.clean:
            # a stage whose unmutated tree fails or reports would kill every
            # mutant it is given: it is not used for these suites then
            # built again first: the last mutant this stage ran (another
            # area's) is restored in the source but still in the binaries
            rc, log = build(self.tree, sanitized=True)
            shutil.rmtree(self.logs, ignore_errors=True)
            os.makedirs(self.logs)
            if rc == 0:
                rc, log = run_tests(self.tree, self.fixture, flt, 4 * timeout, self.logs)
            self.clean[flt] = rc == 0 and not os.listdir(self.logs)
            if not self.clean[flt]:
                print("mutation: the unmutated sanitized tree fails %s or reports (%s): no second stage for "
                      "these suites\n%s" % (flt, os.listdir(self.logs), log[-2000:]), flush=True)
        if not self.clean[flt]:
            return False
        path = os.path.join(self.tree, m["file"])
        original = open(path).read()
        lines = original.split("\n")
        lines[m["line"] - 1] = m["new"]
        open(path, "w").write("\n".join(lines))
        killed = False
        rc, _ = build(self.tree, sanitized=True)
        if rc == 0:
            shutil.rmtree(self.logs, ignore_errors=True)
            os.makedirs(self.logs)
            rc, _ = run_tests(self.tree, self.fixture, flt, 4 * timeout, self.logs)
            killed = rc != 0 or len(os.listdir(self.logs)) > 0
        open(path, "w").write(original)
        return killed

    def close(self, keep):
        if self.ready is not None:
            build(self.tree, sanitized=True)
            if not keep:
                shutil.rmtree(self.tree, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--areas", default="certify,readers,kernels,oracle,golden,linear_blocked")  # oracle_backward, grad_tools: on request (docs/hardening.md)
    ap.add_argument("--budget", type=int, default=None, help="mutants per area (default: each area's)")
    ap.add_argument("--seed", type=int, default=int(os.environ.get("MUTATION_SEED", "20240521")))
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--only", default=None, help="run the mutants whose id starts with this (or one of these, comma-separated)")
    ap.add_argument("--keep", action="store_true", help="keep the work tree")
    args = ap.parse_args()
    areas = args.areas.split(",")
    equivalents = load_equivalents()

    plan = {}
    for area in areas:
        ms = [m for f in area_files(area) for m in mutants_of(f)]
        if args.only:
            chosen = [m for m in ms if any(m["id"].startswith(o) for o in args.only.split(","))]
        else:
            budget = args.budget or AREAS[area]["budget"]
            chosen = sorted(sample(ms, budget, args.seed, area), key=lambda m: (m["file"], m["line"], m["id"]))
        plan[area] = (len(ms), chosen)
        if args.list:
            for m in chosen:
                print("%s\t%s:%d\t%s" % (m["id"], m["file"], m["line"], m["new"].strip()))
    if args.list:
        return 0

    out_dir = os.path.join(ROOT, "build", "mutation")
    os.makedirs(out_dir, exist_ok=True)
    tree = os.path.join(out_dir, "tree")
    fixture = os.path.join(ROOT, "build", "golden-fixture")
    if not os.path.exists(os.path.join(fixture, "manifest.json")):
        print("mutation: %s is missing (make check builds it)" % fixture)
        return 2
    t0 = time.time()
    print("mutation: seed %d; copying and building the tree" % args.seed, flush=True)
    make_tree(tree)
    rc, log = build(tree)
    if rc != 0:
        print(log[-3000:])
        return 2

    unmutated = {f: object_digest(tree, f) for area in areas for f in area_files(area)}
    report = []
    ok = True
    stage2 = SanitizedStage(out_dir, fixture)
    for area in areas:
        total, chosen = plan[area]
        flt = AREAS[area]["filter"]
        t = time.time()
        cpu0 = children_cpu()
        rc, log = run_tests(tree, fixture, flt, 1200)
        base = time.time() - t
        if rc != 0:
            print("mutation: %s: the unmutated tree fails its tests:\n%s" % (area, log[-3000:]))
            return 2
        timeout = 3 * base + 30
        print("mutation: %s: %d mutants, %d sampled; tests take %.1f s unmutated" % (
            area, total, len(chosen), base), flush=True)
        counts = {"killed": 0, "killed by the sanitizers": 0, "survived": 0, "equivalent": 0, "same code": 0, "stillborn": 0}
        survivors = []
        for m in chosen:
            path = os.path.join(tree, m["file"])
            original = open(path).read()
            lines = original.split("\n")
            assert lines[m["line"] - 1] == m["old"]
            lines[m["line"] - 1] = m["new"]
            open(path, "w").write("\n".join(lines))
            if m["id"] in equivalents:
                # listed with the reason it cannot change a result: running
                # it could only confirm that, never lower the score
                open(path, "w").write(original)
                counts["equivalent"] += 1
                print("  %-10s %-36s %s:%d  (listed, not run)" % ("equivalent", m["id"], m["file"], m["line"]),
                      flush=True)
                continue
            rc, log = build(tree)
            if rc != 0:
                status = "stillborn"
            elif unmutated[m["file"]] is not None and object_digest(tree, m["file"]) == unmutated[m["file"]]:
                status = "same code"
            else:
                rc, log = run_tests(tree, fixture, flt, timeout)
                status = "killed" if rc != 0 else "survived"
                if status == "survived" and stage2.kills(m, flt, timeout):
                    status = "killed by the sanitizers"
            open(path, "w").write(original)
            counts[status] += 1
            if status == "survived":
                survivors.append(m)
            print("  %-10s %-36s %s:%d  %s" % (status.replace("killed by the sanitizers", "killed-san"), m["id"],
                                                m["file"], m["line"], m["new"].strip()[:90]), flush=True)
        build(tree)
        killed = counts["killed"] + counts["killed by the sanitizers"]
        counted = killed + counts["survived"]
        score = 100.0 * killed / counted if counted else 100.0
        ok = ok and score >= GOAL
        line = ("%s: %d mutants (%d sampled): %d killed (%d of them by the sanitizers), %d survived, "
                "%d equivalent (%d of them the same code), %d stillborn: %.1f%% of non-equivalent mutants killed "
                "(goal %.0f%%)" % (
                    area, total, len(chosen), killed, counts["killed by the sanitizers"], counts["survived"],
                    counts["equivalent"] + counts["same code"], counts["same code"], counts["stillborn"], score,
                    GOAL))
        report.append(line)
        for m in survivors:
            report.append("  survived %s  %s:%d\n    - %s\n    + %s" % (
                m["id"], m["file"], m["line"], m["old"].strip(), m["new"].strip()))
        # wall time depends on what else the machine runs; the CPU time of
        # the builds and tests does not, and bounds the time on a quiet
        # machine (between CPU / 2 on 2 cores and CPU)
        print("mutation: %s (%.0f s of wall time, %.0f s of CPU time for %d mutants)" % (
            line, time.time() - t, children_cpu() - cpu0, len(chosen)), flush=True)
    stage2.close(args.keep)
    elapsed = time.time() - t0
    report.append("seed %d, %.0f s" % (args.seed, elapsed))
    open(os.path.join(out_dir, "report.txt"), "w").write("\n".join(report) + "\n")
    print("\n".join(report))
    if not args.keep:
        shutil.rmtree(tree)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
