"""refenc.safetensors.read on malformed files: every one raises FormatError
(never OverflowError, RecursionError, UnicodeDecodeError, MemoryError, a
numpy error or a hang), with the file's name and the rule broken; the header
is read and checked before any tensor, so a huge tail costs nothing."""
import json
import os
import resource
import struct
import subprocess
import sys

import numpy as np
import pytest

from refenc import safetensors as st
from refenc.safetensors import FormatError

F64_1 = {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}


def head(obj):
    """A header's bytes: a dict as compact JSON, bytes as they are."""
    return obj if isinstance(obj, bytes) else json.dumps(obj, separators=(",", ":")).encode()


def file_of(header, data=b"", n=None):
    """8-byte length (n, else the header's), header, data."""
    h = head(header)
    return struct.pack("<Q", len(h) if n is None else n) + h + data


def nested(depth):
    """An object holding `depth` nested arrays: 1 + depth levels."""
    return b'{"a":' + b"[" * depth + b"]" * depth + b"}"


# (id, file bytes, what the message must say)
MALFORMED = [
    ("empty file", b"", "too short for the 8-byte header length"),
    ("7 bytes", b"\x10" * 7, "too short"),
    ("header length 2^64-1", file_of({}, n=2**64 - 1), "exceeds the limit"),
    ("header length 2^63", file_of({}, n=2**63), "exceeds the limit"),
    ("header length over MAX_HEADER", file_of({}, n=st.MAX_HEADER + 1), "exceeds the limit"),
    ("header length past the end", file_of({}, n=100), "exceeds the 2 bytes that follow"),
    ("header length 0", file_of(b"", n=0), "does not start with"),
    ("non-UTF-8 name", file_of(b'{"a\xff":1}'), r"header byte 11 is not UTF-8"),
    ("non-UTF-8 metadata", file_of(b'{"__metadata__":{"d":"\xc3\x28"}}'), "is not UTF-8"),
    ("nesting 100000 deep", file_of(nested(100000)), "nests deeper than"),
    ("nesting 33 deep", file_of(nested(32)), r"nests deeper than 32 levels \(byte 44\)"),
    ("brackets in a string are not nesting", file_of(b'{"k":"' + b"[" * 1000 + b'","a":' + b"[" * 40 + b"]" * 40 + b"}"),
     r"nests deeper than 32 levels \(byte 1051\)"),
    ("600000 tokens", file_of(b'{"a":[' + b"0," * 600000 + b"0]}"), "more than 524288 JSON tokens"),
    ("600000 closing brackets", file_of(b"{" + b"}" * 600000), "more than 524288 JSON tokens"),
    ("not JSON", file_of(b'{"a":'), "is not JSON at byte"),
    ("a JSON array", file_of(b"[]"), "does not start with"),
    ("space before the object", file_of(b" {}"), "does not start with"),
    ("trailing garbage in the header", file_of(b"{} x"), "is not JSON at byte"),
    ("duplicate keys", file_of(b'{"a":1,"a":2}'), "the key 'a' twice"),
    ("duplicate entry keys", file_of(b'{"a":{"dtype":"F64","dtype":"F64"}}'), "the key 'dtype' twice"),
    ("NaN literal", file_of(b'{"a":{"dtype":"F64","shape":[NaN],"data_offsets":[0,8]}}'), "is not JSON"),
    ("5000-digit integer", file_of(b'{"a":{"dtype":"F64","shape":[' + b"9" * 5000 + b'],"data_offsets":[0,8]}}', b"\0" * 8),
     "is not JSON"),
    ("entry not an object", file_of({"a": 3}), "exactly dtype, shape and data_offsets"),
    ("entry with an extra key", file_of({"a": dict(F64_1, x=1)}, b"\0" * 8), "exactly dtype"),
    ("entry without shape", file_of({"a": {"dtype": "F64", "data_offsets": [0, 8]}}, b"\0" * 8), "exactly dtype"),
    ("empty tensor name", file_of({"": F64_1}, b"\0" * 8), "name is empty"),
    ("unknown dtype", file_of({"a": dict(F64_1, dtype="F8")}, b"\0" * 8), "unknown dtype 'F8'"),
    ("dtype a list", file_of({"a": dict(F64_1, dtype=["F64"])}, b"\0" * 8), "unknown dtype"),
    ("shape a float", file_of({"a": dict(F64_1, shape=[1.0])}, b"\0" * 8), "non-negative integers"),
    ("shape 1e400", file_of(b'{"a":{"dtype":"F64","shape":[1e400],"data_offsets":[0,8]}}', b"\0" * 8),
     "non-negative integers"),
    ("shape a bool", file_of({"a": dict(F64_1, shape=[True])}, b"\0" * 8), "non-negative integers"),
    ("shape negative", file_of({"a": dict(F64_1, shape=[-1])}, b"\0" * 8), "non-negative integers"),
    ("shape a string", file_of({"a": dict(F64_1, shape="1")}, b"\0" * 8), "non-negative integers"),
    ("shape of 9 dimensions", file_of({"a": dict(F64_1, shape=[1] * 9)}, b"\0" * 8), "at most 8"),
    ("shape 2^70", file_of({"a": dict(F64_1, shape=[2**70], data_offsets=[0, 8])}, b"\0" * 8), "too large"),
    ("shape [0, 2^62]: zero size, huge", file_of({"a": dict(F64_1, shape=[0, 2**62], data_offsets=[0, 0])}),
     "too large"),
    ("offsets 2^64", file_of({"a": dict(F64_1, data_offsets=[2**64, 2**64 + 8])}, b"\0" * 8), "do not hold"),
    ("offsets 3 numbers", file_of({"a": dict(F64_1, data_offsets=[0, 8, 8])}, b"\0" * 8), "two integers"),
    ("offsets strings", file_of({"a": dict(F64_1, data_offsets=["0", "8"])}, b"\0" * 8), "two integers"),
    ("offsets negative", file_of({"a": dict(F64_1, data_offsets=[-8, 0])}, b"\0" * 8), "do not hold"),
    ("begin after end", file_of({"a": dict(F64_1, data_offsets=[8, 0])}, b"\0" * 8), "do not hold"),
    ("end past the data", file_of({"a": F64_1}, b"\0" * 7), "do not hold shape"),
    ("size not the shape's", file_of({"a": dict(F64_1, shape=[2])}, b"\0" * 8), "do not hold shape"),
    ("overlapping tensors", file_of({"a": F64_1, "b": dict(F64_1, data_offsets=[4, 12])}, b"\0" * 12),
     "overlap or leave a hole"),
    ("the same bytes twice", file_of({"a": F64_1, "b": F64_1}, b"\0" * 8), "overlap or leave a hole"),
    ("a hole", file_of({"a": F64_1, "b": dict(F64_1, data_offsets=[16, 24])}, b"\0" * 24),
     "overlap or leave a hole"),
    ("a zero-size tensor inside another", file_of({"a": F64_1, "z": dict(F64_1, shape=[0], data_offsets=[4, 4])},
                                                  b"\0" * 8), "overlap or leave a hole"),
    ("trailing data", file_of({"a": F64_1}, b"\0" * 9), r"data bytes \[8, 9\) .* belong to no tensor"),
    ("data and no tensor", file_of({}, b"\0"), "belong to no tensor"),
    ("metadata a string", file_of({"__metadata__": "x"}), "__metadata__ .* is not an object of strings"),
    ("metadata with a number", file_of({"__metadata__": {"k": 1}}), "is not an object of strings"),
    ("BOOL element 2", file_of({"m": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}}, b"\1\2"),
     "BOOL element 1 is not 0 or 1"),
]


@pytest.mark.parametrize("raw,what", [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_every_malformed_file_raises_format_error(raw, what, tmp_path):
    p = tmp_path / "bad.safetensors"
    p.write_bytes(raw)
    with pytest.raises(FormatError, match=what) as e:
        st.read(p)
    assert type(e.value) is FormatError and str(p) in str(e.value)


def test_the_table_holds_valid_files_too(tmp_path):
    """The control: the building blocks of the table make valid files."""
    p = tmp_path / "ok.safetensors"
    for raw in (file_of({}), file_of({"a": F64_1}, struct.pack("<d", 2.5)),
                file_of({"a": F64_1, "z": dict(F64_1, shape=[0, 5], data_offsets=[8, 8])}, b"\0" * 8),
                file_of(head({"__metadata__": {"k": "v"}}) + b"   "),
                # strings full of what would be tokens and nesting outside them
                file_of({"__metadata__": {"k": "[{,:" * 600000 + '\\"]' * 100}})):
        p.write_bytes(raw)
        st.read(p)
    p.write_bytes(file_of({"a": F64_1}, struct.pack("<d", 2.5)))
    assert st.read(p)[1]["a"].tolist() == [2.5]
    # 32 levels pass the depth limit (and fail as an entry); 524288 tokens pass the token limit
    for raw in (file_of(nested(31)), file_of(b'{"a":[' + b"0," * 262140 + b"0]}")):
        p.write_bytes(raw)
        with pytest.raises(FormatError, match="exactly dtype, shape and data_offsets"):
            st.read(p)


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_not_a_regular_file(kind, tmp_path):
    """A FIFO is refused without blocking (in a child, so that a hang fails
    the test rather than stalling it), a directory is refused too."""
    p = tmp_path / "x.safetensors"
    os.mkfifo(p) if kind == "fifo" else p.mkdir()
    code = ("import sys; from refenc import safetensors as st\n"
            "try:\n st.read(sys.argv[1])\nexcept st.FormatError as e:\n print(e)\n")
    r = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, timeout=20,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert r.returncode == 0 and f"is a {'FIFO' if kind == 'fifo' else 'directory'}" in r.stdout, (r.stdout, r.stderr)


def test_a_huge_tail_is_refused_before_it_is_read(tmp_path):
    """A valid 16-byte file followed by a 2 GiB (sparse) tail: refused for
    its tail, and the reader's peak memory stays far below the tail's size
    (before, it read the whole file first: 2.1 GB)."""
    p = tmp_path / "tail.safetensors"
    p.write_bytes(file_of({"a": F64_1}, b"\0" * 8))
    with open(p, "r+b") as f:
        f.truncate(os.path.getsize(p) + (2 << 30))
    code = ("import resource, sys; from refenc import safetensors as st\n"
            "peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "before = peak()\n"
            "try:\n st.read(sys.argv[1])\nexcept st.FormatError as e:\n print(e)\n"
            "print(peak() - before)\n")
    r = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    out = r.stdout.splitlines()
    assert r.returncode == 0 and len(out) == 2 and "belong to no tensor" in out[0], (r.stdout, r.stderr[-2000:])
    grown_kib = int(out[1])
    # the peak's growth during read (the imports, torch's among them when
    # installed, come before): the header is 80 bytes, so anything near the
    # tail's size is the tail read; 64 MiB is 1/32 of it
    assert grown_kib < 64 * 1024, f"peak RSS grew by {grown_kib} KiB reading a file with a 2 GiB tail"


def test_no_other_exception_on_damaged_files(tmp_path, seed):
    """Every truncation of a good file, and random bytes written over its
    header and data: read returns or raises FormatError, nothing else."""
    good = tmp_path / "good.safetensors"
    st.write(good, {"a": ("F32", np.arange(6.0).reshape(2, 3)), "b": ("BOOL", np.array([1, 0])),
                    "c": ("BF16", np.ones(3))}, {"case": "x", "k": "v"})
    raw = good.read_bytes()
    bad = tmp_path / "bad.safetensors"
    rng = np.random.default_rng(seed)
    variants = [raw[:i] for i in range(len(raw))]
    for _ in range(3000):
        b = bytearray(raw)
        for at in rng.integers(0, len(raw), size=rng.integers(1, 4)):
            b[at] = int(rng.integers(0, 256))
        variants.append(bytes(b))
    refused = 0
    for v in variants:
        bad.write_bytes(v)
        try:
            st.read(bad)
        except FormatError:
            refused += 1
        except Exception as e:  # noqa: BLE001 - the point of the test
            pytest.fail(f"seed {seed}: {type(e).__name__}: {e} on bytes {v!r}")
    assert refused >= len(raw), f"seed {seed}: only {refused} of {len(variants)} damaged files refused"


@pytest.mark.parametrize("meta", [
    {"case": "x", "component": "ffn", "config": "{", "outputs": "[]"},            # config not JSON
    {"component": "ffn", "config": "{}", "outputs": "[]"},                         # no case name
    {"case": "x", "component": "ffn", "config": "{}", "outputs": '[{"name": 1}]'},  # outputs malformed
    {"case": "x", "component": "ffn", "config": "[" * 100000, "outputs": "[]"},    # config nested deep
], ids=["config not JSON", "no case", "outputs malformed", "config nested deep"])
def test_a_malformed_golden_case_raises_format_error(meta, tmp_path):
    """Case() on a safetensors file whose golden metadata is malformed:
    FormatError naming the file (before: KeyError, JSONDecodeError...)."""
    from refenc import Case
    p = tmp_path / "case.safetensors"
    st.write(p, {"in.x": np.zeros(2)}, dict(meta, format="refenc-golden"))
    with pytest.raises(FormatError, match="golden metadata or tensors are malformed") as e:
        Case(p)
    assert str(p) in str(e.value)
