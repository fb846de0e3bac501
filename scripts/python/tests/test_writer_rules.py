"""refenc.safetensors' writer and Case.write_results keep refenc's file rules
(ref/io/atomic_write.h): the file appears whole or not at all, at a random
temporary name created with O_EXCL | O_NOFOLLOW; a target that is not a
regular file is refused; a name that could leave the output directory is
refused; an error, a KeyboardInterrupt or a SIGTERM leaves no temporary file
and the target either as it was or complete."""
import os
import signal
import socket
import stat
import subprocess
import sys

import numpy as np
import pytest

from refenc import load_case
from refenc import safetensors as st

T = {"a": ("F32", np.arange(4.0))}


def leftovers(d):
    return sorted(n for n in os.listdir(d) if ".tmp." in n)


@pytest.fixture
def case(golden):
    return load_case("encoder_pre_tokens_sinusoidal", golden)


@pytest.mark.parametrize("name", ["../outside", "a/b", "..", ".", "", "x/../../outside", ".hidden", "a..b",
                                  "sp ace", "nul\0x", "/abs"])
def test_write_results_refuses_names_that_leave_the_directory(name, case, tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    case.name = name
    with pytest.raises(ValueError, match="case name"):
        case.write_results(results, case.expected)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == [results.relative_to(tmp_path)]


def test_write_results_writes_inside_the_directory(case, tmp_path):
    """The control: a valid name lands in the results directory."""
    path = case.write_results(tmp_path / "r", case.expected)
    assert os.path.dirname(path) == str(tmp_path / "r") and os.listdir(tmp_path / "r") == [case.name + ".safetensors"]
    assert st.read(path)[0]["case"] == case.name


@pytest.mark.parametrize("name", ["../x", "a/b", "..", ".", "", ".x", "a..b"])
def test_write_in_refuses_names_with_separators_or_dotdot(name, tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(ValueError, match="a name must not"):
        st.write_in(tmp_path / "d", name, T)
    assert os.listdir(tmp_path / "d") == [] and sorted(os.listdir(tmp_path)) == ["d"]


def make_target(kind, p, victim):
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "directory":
        p.mkdir()
    elif kind == "symlink":
        os.symlink(victim, p)
    elif kind == "dangling symlink":
        os.symlink(victim.parent / "nothing", p)
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(p))
        s.close()
    elif kind == "device":
        try:
            os.mknod(p, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null's numbers
        except PermissionError:
            pytest.skip("creating a device node needs privileges")


@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink", "dangling symlink", "socket", "device"])
def test_a_target_that_is_not_a_regular_file_is_refused(kind, tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    p = tmp_path / "out.safetensors"
    make_target(kind, p, victim)
    before = os.lstat(p)
    with pytest.raises(ValueError, match="not a regular file: refusing to replace it"):
        st.write(p, T)
    after = os.lstat(p)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode), "the target was replaced"
    assert victim.read_bytes() == b"keep" and leftovers(tmp_path) == []


def test_a_symlink_at_the_old_temporary_name_is_not_followed(tmp_path):
    """The writer used to write to PATH.tmp.PID, a name anyone can predict:
    a link planted there sent the data to the link's target."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    p = tmp_path / "out.safetensors"
    os.symlink(victim, f"{p}.tmp.{os.getpid()}")
    st.write(p, T)
    assert victim.read_bytes() == b"keep"
    assert st.read(p)[1]["a"].tolist() == [0, 1, 2, 3]
    assert os.path.islink(f"{p}.tmp.{os.getpid()}")  # left alone, not replaced


def test_a_symlink_at_the_drawn_temporary_name_is_skipped(tmp_path, monkeypatch):
    """The random draw made predictable: a link (and a file) planted at the
    first names drawn are neither followed nor replaced; another is drawn."""
    draws = iter("AAAAAA" "BBBBBB" "CCCCCC")
    monkeypatch.setattr(st.secrets, "choice", lambda alphabet: next(draws))
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    p = tmp_path / "out.safetensors"
    os.symlink(victim, tmp_path / "out.safetensors.tmp.AAAAAA")
    (tmp_path / "out.safetensors.tmp.BBBBBB").write_bytes(b"theirs")
    st.write(p, T)
    assert victim.read_bytes() == b"keep" and (tmp_path / "out.safetensors.tmp.BBBBBB").read_bytes() == b"theirs"
    assert os.path.islink(tmp_path / "out.safetensors.tmp.AAAAAA")
    assert not os.path.exists(tmp_path / "out.safetensors.tmp.CCCCCC")  # renamed to the target
    assert st.read(p)[1]["a"].tolist() == [0, 1, 2, 3]


def test_temporary_names_are_random(tmp_path, monkeypatch):
    names = []
    real = st._create_temporary

    def spy(*a):
        fd, tmp = real(*a)
        names.append(tmp)
        return fd, tmp
    monkeypatch.setattr(st, "_create_temporary", spy)
    for _ in range(4):
        st.write(tmp_path / "x.safetensors", T)
    assert len(set(names)) == 4 and all(n.startswith("x.safetensors.tmp.") and len(n) == 24 for n in names)


def test_a_replaced_file_keeps_its_mode_a_new_one_follows_the_umask(tmp_path):
    p = tmp_path / "x.safetensors"
    p.write_bytes(b"old")
    os.chmod(p, 0o640)
    st.write(p, T)
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o640
    old = os.umask(0o027)
    try:
        st.write(tmp_path / "new.safetensors", T)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "new.safetensors").st_mode) == 0o640


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_failed_write_leaves_the_target_and_no_temporary(failure, tmp_path, monkeypatch):
    p = tmp_path / "x.safetensors"
    p.write_bytes(b"old")

    def fail(fd):
        raise failure
    monkeypatch.setattr(st.os, "fsync", fail)
    with pytest.raises(type(failure)):
        st.write(p, T)
    assert p.read_bytes() == b"old" and leftovers(tmp_path) == []


# A child writes a file from its main thread and, once the data is written
# (at its fsync), the signal arrives: sent to the process by itself (the
# kernel gives it to the main thread), or to another thread of it (as a
# process-directed signal may land on torch's or numpy's workers).  The
# target ends absent or complete, never a temporary left.  (A write from
# another thread blocks the signals in that thread only: docs/python.md.)
CHILD = """
import os, signal, sys, threading, time
import numpy as np
from refenc import safetensors as st
path, sig, where = sys.argv[1], getattr(signal, sys.argv[2]), sys.argv[3]
# the dispositions a terminal gives, whatever this test inherited (a job
# started in the background by a shell without job control ignores SIGINT)
signal.signal(signal.SIGINT, signal.default_int_handler)
for s in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_DFL)
other = threading.Thread(target=time.sleep, args=(30,), daemon=True)
other.start()
real = os.fsync
def fsync(fd):
    if where == "other thread":
        signal.pthread_kill(other.ident, sig)
    else:
        os.kill(os.getpid(), sig)
    time.sleep(0.2)  # time for the signal to act, were it not held
    return real(fd)
os.fsync = fsync
try:
    st.write(path, {"a": ("F64", np.arange(1 << 16, dtype=float))})
    time.sleep(0.5)
except KeyboardInterrupt:
    sys.exit(3)
sys.exit(4)
"""


@pytest.mark.parametrize("where", ["process", "other thread"])
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_termination_signal_mid_write_leaves_no_temporary(sig, where, tmp_path):
    p = tmp_path / "x.safetensors"
    r = subprocess.run([sys.executable, "-c", CHILD, str(p), sig, where], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    # the signal takes effect (killed, or KeyboardInterrupt for SIGINT), not ignored
    assert r.returncode in (-getattr(signal, sig), 3), (r.returncode, r.stderr[-2000:])
    assert leftovers(tmp_path) == [], f"{sig} to the {where} left {leftovers(tmp_path)}"
    if p.exists():  # the signal was held until the file was complete
        assert st.read(p)[1]["a"].size == 1 << 16


def test_a_name_of_255_bytes_is_written(tmp_path):
    """The temporary name is the target's cut to fit NAME_MAX with its
    suffix (before: NAME.tmp.PID, 'File name too long' for a long NAME)."""
    p = tmp_path / ("a" * 255)
    st.write(p, T)
    assert st.read(p)[1]["a"].tolist() == [0, 1, 2, 3] and leftovers(tmp_path) == []
