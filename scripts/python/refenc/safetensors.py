"""Safetensors files with numpy: reading every dtype refenc uses, writing
F64, F32, F16, BF16, I64, U8 and BOOL the way refenc's own writer does.

The format is Hugging Face's (docs/golden-format.md): an 8-byte
little-endian header length N, N bytes of JSON, the data.  Reading checks the
rules a reader needs to be safe (the header fits, the tensors tile the data
exactly, sizes match shapes); refenc's C reader checks every rule and stays
the judge of a file.

Writing follows refenc's layout: header keys sorted, compact JSON, spaces
pad the header to a multiple of 8 bytes, data ordered by element size
(largest first) then by name, so every tensor starts at a multiple of its
element size; the file appears atomically (written to PATH.tmp.PID, then
renamed).  The same tensors give the bytes refenc's writer gives.

F16 and BF16 are rounded directly from float64 to the nearest value, ties
to even, with gradual underflow and overflow to infinity (never through
float32, which would round twice); a NaN keeps its sign and the top bits of
its payload (the quiet NaN when those are all zero), as refenc's encoder does.
"""
import json
import math
import os
import struct

import numpy as np

# name: (numpy dtype of the stored elements, bytes per element)
DTYPES = {
    "F64": ("<f8", 8), "F32": ("<f4", 4), "F16": ("<f2", 2), "BF16": ("<u2", 2),
    "I64": ("<i8", 8), "U8": ("u1", 1), "BOOL": ("u1", 1),
}
FLOAT_DTYPES = ("F64", "F32", "F16", "BF16")
MAX_HEADER = 100_000_000  # Hugging Face's limit, as refenc's

_ALIASES = {"float64": "F64", "double": "F64", "float32": "F32", "float": "F32",
            "float16": "F16", "half": "F16", "bfloat16": "BF16"}


class FormatError(ValueError):
    """A file that is not a valid safetensors file; the message names the
    file, the tensor and the byte offset."""


def dtype_name(dtype):
    """'F64', 'F32', 'F16' or 'BF16' for a name or alias ('bfloat16',
    'float32', ...), a numpy dtype or a torch dtype."""
    if not isinstance(dtype, str) and not str(dtype).startswith("torch."):
        try:
            dtype = np.dtype(dtype).name  # numpy dtypes and scalar types
        except TypeError:
            pass
    s = str(dtype).lower().replace("torch.", "")
    if s.upper() in FLOAT_DTYPES:
        return s.upper()
    if s in _ALIASES:
        return _ALIASES[s]
    raise ValueError(f"unknown result dtype {dtype!r}: use F64, F32, F16 or BF16")


# ---- reduced precision -----------------------------------------------------

# (stored significand bits p, smallest normal exponent, largest exponent)
_FORMATS = {"F16": (10, -14, 15), "BF16": (7, -126, 127)}


def _encode_small(x, fmt):
    """float64 array -> uint16 encodings of `fmt` ('F16' or 'BF16').

    A finite x is rounded to n * q, q = 2^(max(E, emin) - p) the format's
    spacing at x (E = floor(log2 |x|)) and n = rint(x / q): x / q is exact
    (a division by a power of two whose result is far from underflow and
    overflow) and rint rounds half to even, so n * q is x correctly rounded,
    subnormals included.  |n q| >= 2^(emax + 1) is infinity.  The rounded
    value is exact in float32 (BF16: its top 16 bits) and in float16, so the
    final conversion to bits rounds nothing."""
    p, emin, emax = _FORMATS[fmt]
    x = np.ascontiguousarray(x, dtype=np.float64)
    bits = x.view(np.uint64)
    sign = ((bits >> np.uint64(63)).astype(np.uint16) << np.uint16(15))
    out = np.zeros(x.shape, dtype=np.uint16)
    inf_bits = np.uint16(((1 << (15 - p)) - 1) << p)  # exponent field all ones

    finite = np.isfinite(x)
    xf = np.where(finite, x, 0.0)
    _, e = np.frexp(xf)  # |x| = m 2^e, 0.5 <= m < 1: E = e - 1
    E = np.maximum(e.astype(np.int64) - 1, emin)
    q = np.ldexp(1.0, (E - p).astype(np.int32))
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.rint(xf / q) * q
    big = ~(np.abs(v) < 2.0 ** (emax + 1))
    ok = finite & ~big
    v = np.where(ok, v, 0.0)
    if fmt == "BF16":
        enc = (v.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    else:
        enc = v.astype(np.float16).view(np.uint16)
    out[ok] = enc[ok]
    out[finite & big] = sign[finite & big] | inf_bits

    nan = np.isnan(x)
    inf = np.isinf(x)
    out[inf] = sign[inf] | inf_bits
    if nan.any():
        payload = ((bits[nan] >> np.uint64(52 - p)) & np.uint64((1 << p) - 1)).astype(np.uint16)
        payload[payload == 0] = np.uint16(1 << (p - 1))  # stay a NaN: the quiet bit
        out[nan] = sign[nan] | inf_bits | payload
    return out


def double_to_bf16(x):
    """float64 array -> bfloat16 bit patterns (uint16), round to nearest even."""
    return _encode_small(x, "BF16")


def double_to_f16(x):
    """float64 array -> binary16 bit patterns (uint16), round to nearest even."""
    return _encode_small(x, "F16")


def bf16_to_double(b):
    """bfloat16 bit patterns -> float64, exactly (NaN stays NaN)."""
    b = np.asarray(b, dtype=np.uint16)
    with np.errstate(invalid="ignore"):  # signalling NaNs come back quiet, still NaN
        return (b.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)


def f16_to_double(h):
    """binary16 bit patterns -> float64, exactly."""
    return np.asarray(h, dtype=np.uint16).view(np.float16).astype(np.float64)


# ---- reading ---------------------------------------------------------------

def read(path):
    """-> (metadata dict, {name: numpy array}).  Floating tensors of every
    dtype come back as float64 (exactly), I64 and U8 as int64, BOOL as bool."""
    with open(path, "rb") as f:
        buf = f.read()
    if len(buf) < 8:
        raise FormatError(f"{path}: file is {len(buf)} bytes, too short for the 8-byte header length at byte 0")
    (n,) = struct.unpack("<Q", buf[:8])
    if n > len(buf) - 8 or n > MAX_HEADER:
        raise FormatError(f"{path}: header length {n} at byte 0 exceeds the {len(buf) - 8} bytes that follow it"
                          if n > len(buf) - 8 else f"{path}: header length {n} at byte 0 exceeds the limit")
    try:
        header = json.loads(buf[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(f"{path}: header (bytes 8 to {8 + n}) is not UTF-8 JSON: {e}") from None
    if not isinstance(header, dict):
        raise FormatError(f"{path}: header at byte 8 is not a JSON object")
    meta = header.pop("__metadata__", {}) or {}
    data = memoryview(buf)[8 + n:]
    spans, out = [], {}
    for name, e in header.items():
        where = f"{path}: tensor '{name}'"
        try:
            dt, size = DTYPES[e["dtype"]]
            shape = [int(d) for d in e["shape"]]
            b, end = (int(v) for v in e["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise FormatError(f"{where}: entry needs a known dtype, a shape and data_offsets") from None
        if any(d < 0 for d in shape) or not 0 <= b <= end <= len(data) or end - b != math.prod(shape) * size:
            raise FormatError(f"{where}: data_offsets [{b}, {end}] do not hold shape {shape} of {e['dtype']} "
                              f"in a data buffer of {len(data)} bytes (file bytes from {8 + n})")
        spans.append((b, end, name))
        a = np.frombuffer(data[b:end], dtype=dt).reshape(shape)
        if e["dtype"] == "BF16":
            a = bf16_to_double(a)
        elif e["dtype"] == "BOOL":
            if a.size and a.max() > 1:
                raise FormatError(f"{where}: BOOL element {int(np.argmax(a > 1))} is not 0 or 1")
            a = a.astype(bool)
        elif e["dtype"] in ("I64", "U8"):
            a = a.astype(np.int64)
        else:
            a = a.astype(np.float64)
        out[name] = a
    at = 0
    for b, end, name in sorted(spans):
        if b != at:
            raise FormatError(f"{path}: tensor '{name}': data bytes [{at}, {b}) overlap or leave a hole")
        at = max(at, end)
    if at != len(data):
        raise FormatError(f"{path}: data bytes [{at}, {len(data)}) belong to no tensor")
    return meta, out


# ---- writing ---------------------------------------------------------------

def _to_numpy(a):
    """A numpy array from a numpy array, a scalar, a list or a torch tensor
    (any dtype: bfloat16 and float16 tensors go through float32, exactly)."""
    if hasattr(a, "detach"):  # a torch tensor
        t = a.detach().cpu()
        if str(t.dtype) in ("torch.bfloat16", "torch.float16"):
            t = t.float()
        return t.numpy()
    return np.asarray(a)


def encode(a, dtype):
    """An array as the little-endian bytes of `dtype` ('F64', 'F32', 'F16',
    'BF16', 'I64', 'U8', 'BOOL'), rounding floats once, to nearest even."""
    a = _to_numpy(a)
    if dtype == "F64":
        return np.ascontiguousarray(a, dtype="<f8").tobytes()
    if dtype == "F32":
        # float64 -> float32 by numpy's cast, round to nearest even (IEEE)
        with np.errstate(over="ignore"):
            return np.ascontiguousarray(np.asarray(a, dtype=np.float64).astype("<f4")).tobytes()
    if dtype == "BF16":
        return double_to_bf16(np.asarray(a, dtype=np.float64)).astype("<u2").tobytes()
    if dtype == "F16":
        return double_to_f16(np.asarray(a, dtype=np.float64)).astype("<u2").tobytes()
    if dtype == "I64":
        return np.ascontiguousarray(a, dtype="<i8").tobytes()
    if dtype in ("U8", "BOOL"):
        u = np.ascontiguousarray(a).astype("u1")
        if dtype == "BOOL" and u.size and u.max() > 1:
            raise ValueError("BOOL values must be 0 or 1")
        return u.tobytes()
    raise ValueError(f"unknown dtype {dtype!r}")


def write(path, tensors, metadata=None):
    """Writes {name: (dtype, array)} (or {name: array}, F64) and the string
    metadata to path, atomically, in refenc's layout."""
    entries = {}
    for name, v in tensors.items():
        dtype, a = v if isinstance(v, tuple) else ("F64", v)
        if not name or name == "__metadata__":
            raise ValueError(f"invalid tensor name {name!r}")
        if dtype not in DTYPES:
            raise ValueError(f"tensor '{name}': unknown dtype {dtype!r}")
        a = _to_numpy(a)
        entries[name] = (dtype, list(a.shape), encode(a, dtype))
    order = sorted(entries, key=lambda k: (-DTYPES[entries[k][0]][1], k.encode("utf-8")))
    header, at = {}, 0
    for name in order:
        dtype, shape, raw = entries[name]
        header[name] = {"data_offsets": [at, at + len(raw)], "dtype": dtype, "shape": shape}
        at += len(raw)
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise ValueError("metadata keys and values must be strings")
        header["__metadata__"] = dict(metadata)
    text = json.dumps(header, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for name in order:
                f.write(entries[name][2])
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
