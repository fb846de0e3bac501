"""refenc.safetensors against refenc's C reader and writer: the files it
writes are byte for byte those refenc writes, refenc reads every dtype it
writes, and malformed files and values are refused."""
import filecmp
import glob
import os
import subprocess

import numpy as np
import pytest

from refenc import safetensors as st


def test_writes_the_bytes_refenc_writes(cli, golden, tmp_path):
    """refenc run --case writes the reference's results; rewriting what was
    read gives the same file (layout, header, padding, order)."""
    cases = sorted(glob.glob(os.path.join(golden, "cases", "*.safetensors")))[::7]
    assert len(cases) >= 8
    for path in cases:
        ref = tmp_path / ("ref-" + os.path.basename(path))
        subprocess.run([cli, "run", "--case", path, "--out", str(ref)], check=True, capture_output=True)
        meta, tensors = st.read(ref)
        mine = tmp_path / "mine.safetensors"
        st.write(mine, tensors, meta)
        assert filecmp.cmp(ref, mine, shallow=False), f"{path}: the rewritten results differ from refenc's"
        # negative control: another metadata value changes the bytes
        st.write(mine, tensors, dict(meta, implementation="other"))
        assert not filecmp.cmp(ref, mine, shallow=False)


@pytest.mark.parametrize("dtype", ["F64", "F32", "F16", "BF16"])
def test_refenc_reads_every_result_dtype(dtype, cli, golden, tmp_path):
    """The golden's own values written in each dtype: refenc reads them as
    that dtype, and their error is the dtype's rounding alone (at most half an
    ulp of the dtype, i.e. 0.5 in the certificate's ulp figure)."""
    from refenc import load_case, certify_case
    case = load_case("encoder_pre_tokens_sinusoidal", golden)
    case.write_results(tmp_path, case.expected, dtype=dtype)
    v = certify_case(case, tmp_path, golden=golden, cli=cli)
    v.assert_pass()
    for o in v.outputs.values():
        assert o.dtype == dtype
        assert o.max_ulp_error <= 0.5, o.describe()
        if dtype == "F64":
            assert o.max_abs_error == 0


def test_reader_refuses_malformed_files(tmp_path):
    good = tmp_path / "good.safetensors"
    st.write(good, {"a": ("F32", np.arange(4.0)), "b": ("BOOL", np.array([1, 0]))})
    meta, t = st.read(good)
    assert t["a"].dtype == np.float64 and list(t["a"]) == [0, 1, 2, 3] and t["b"].dtype == bool
    raw = good.read_bytes()
    bad = tmp_path / "bad.safetensors"
    for cut, what in ((5, "too short"), (len(raw) - 1, "do not hold shape"), (12, "exceeds")):
        bad.write_bytes(raw[:cut])
        with pytest.raises(st.FormatError, match=what) as e:
            st.read(bad)
        assert str(bad) in str(e.value)
    bad.write_bytes(raw + b"\0")
    with pytest.raises(st.FormatError, match="belong to no tensor"):
        st.read(bad)
    bad.write_bytes(raw[:-1] + b"\2")  # the last BOOL byte
    with pytest.raises(st.FormatError, match="BOOL element 1"):
        st.read(bad)


def test_writer_refuses_bad_values_and_leaves_nothing(tmp_path):
    out = tmp_path / "x.safetensors"
    with pytest.raises(ValueError, match="BOOL"):
        st.write(out, {"m": ("BOOL", np.array([0, 2]))})
    with pytest.raises(ValueError, match="unknown dtype"):
        st.write(out, {"m": ("F8", np.zeros(2))})
    with pytest.raises(ValueError, match="metadata"):
        st.write(out, {"m": np.zeros(2)}, {"k": 3})
    assert os.listdir(tmp_path) == []  # no partial file, no temporary one
    out.write_bytes(b"before")
    with pytest.raises(ValueError):
        st.write(out, {"m": ("BOOL", np.array([3]))})
    assert out.read_bytes() == b"before"


def test_dtype_names():
    import torch
    assert [st.dtype_name(d) for d in ("bf16", "bfloat16", torch.bfloat16, "float32", np.float64, "F16")] == \
        ["BF16", "BF16", "BF16", "F32", "F64", "F16"]
    with pytest.raises(ValueError, match="unknown result dtype"):
        st.dtype_name("int8")
