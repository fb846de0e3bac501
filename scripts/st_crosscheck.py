#!/usr/bin/python3
"""Cross-check refenc's safetensors module against an independent writer and reader.

The file format is Hugging Face's (https://github.com/huggingface/safetensors):
an 8-byte little-endian header length N, N bytes of UTF-8 JSON, the data.
This script knows nothing of refenc's C code; it uses only numpy and the
standard library.

    st_crosscheck.py write FILE   write the cross-check tensors the way
                                  Hugging Face's writer does: "__metadata__"
                                  first, then the tensors sorted by its dtype
                                  order (I64 F64 F32 BF16 F16 U8 BOOL: by
                                  alignment, largest first) then name, each
                                  entry {"dtype","shape","data_offsets"} in
                                  that order, compact JSON, the header padded
                                  with spaces to a multiple of 8 bytes
    st_crosscheck.py check FILE   read FILE (written by refenc) with a strict
                                  reader of the spec and compare every tensor,
                                  bit for bit, and the metadata with the
                                  cross-check set
    st_crosscheck.py selftest DIR write, check, and make sure the checker
                                  refuses a corrupted copy

The cross-check set (the C side, checks/unit/test_safetensors.c, builds the
same values with the same formulas):
    base[i] = (i*37 % 11 - 5) / 64 + 2.385, i = 0, 1, ...   (one rounding)
F16 values are rounded by numpy (npy_double_to_half), BF16 values by exact
rational arithmetic below, both round-to-nearest-even, so the C encoders are
checked against two other implementations.

Exit status: 0 on success, 1 on any mismatch (with a message), 2 on a usage error.
"""
import json
import math
import struct
import sys
from fractions import Fraction

import numpy as np

DTYPES = {  # name: (numpy dtype, size)
    "F64": ("<f8", 8), "F32": ("<f4", 4), "F16": ("<f2", 2), "BF16": ("<u2", 2),
    "I64": ("<i8", 8), "U8": ("u1", 1), "BOOL": ("u1", 1),
}
HF_DTYPE_ORDER = ["BOOL", "U8", "F16", "BF16", "F32", "F64", "I64"]
METADATA = {"format": "pt", "case": "crosscheck", "\u00e9t\u00e9": "\u221a \"q\"\n"}
SPECIAL_F16 = [65520.0, 65519.0, 2.0 ** -25, 3 * 2.0 ** -25, 1 + 2.0 ** -11, 2.385, -0.0, 1e-8,
               -1e9, 6.103515625e-05]
SPECIAL_BF16 = [1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 1 + 2.0 ** -8 + 2.0 ** -40, 2.385,
                (2 - 2.0 ** -8) * 2.0 ** 127, 2.0 ** -134, 3 * 2.0 ** -134, -1e-39, 1e39, -0.0]


def base(n):
    return [(i * 37 % 11 - 5) / 64 + 2.385 for i in range(n)]


def bf16_bits(x):
    """x rounded to bfloat16 (8 significant bits, exponents -126..127, gradual
    underflow), ties to even, by exact rational arithmetic."""
    sign = 0x8000 if math.copysign(1.0, x) < 0 else 0
    if math.isnan(x):
        return sign | 0x7FC0
    a = abs(x)
    if a == 0:
        return sign
    if math.isinf(a):
        return sign | 0x7F80
    e = max(math.frexp(a)[1] - 1, -126)      # exponent of the binade (2^e <= a), clamped
    quantum = Fraction(2) ** (e - 7)         # spacing of bfloat16 values there
    n = round(Fraction(a) / quantum)         # Fraction rounds half to even
    if n == 0:
        return sign
    v = n * quantum                          # the rounded value, exactly
    if v >= Fraction(2) ** 128:
        return sign | 0x7F80
    if v < Fraction(2) ** -126:              # subnormal: n units of 2^-133
        return sign | int(n)
    E = math.frexp(float(v))[1] - 1          # v is exact in double
    m = int(v / Fraction(2) ** (E - 7)) - 128
    return sign | (E + 127) << 7 | m


def crosscheck_set():
    """name -> (dtype, shape, numpy array in the on-disk representation)."""
    b = base(6)
    with np.errstate(over="ignore"):  # 65520 and -1e9 overflow to infinity, as they should
        f16 = np.array(b + SPECIAL_F16, dtype="<f8").astype("<f2").reshape(2, 8)
    t = {
        "in.x": ("F64", [2, 3], np.array(b, dtype="<f8").reshape(2, 3)),
        "w.f32": ("F32", [4], np.array(b[:4], dtype="<f8").astype("<f4")),
        "w.f16": ("F16", [2, 8], f16),
        "w.bf16": ("BF16", [16], np.array([bf16_bits(v) for v in b + SPECIAL_BF16], dtype="<u2")),
        "in.tokens": ("I64", [3], np.array([-7, 0, 2 ** 62 + 3], dtype="<i8")),
        "in.mask": ("BOOL", [2, 2], np.array([[1, 0], [0, 1]], dtype="u1")),
        "u.bytes": ("U8", [3], np.array([0, 128, 255], dtype="u1")),
        "s.scalar": ("F64", [], np.array(-2.385, dtype="<f8")),
        "z.empty": ("F32", [0, 4], np.zeros((0, 4), dtype="<f4")),
    }
    return t


def write_hf_style(path):
    tensors = crosscheck_set()
    # Hugging Face's order: its Dtype enum (increasing alignment), reversed, then name
    order = sorted(tensors, key=lambda k: (-HF_DTYPE_ORDER.index(tensors[k][0]), k))
    header = {"__metadata__": METADATA}
    at = 0
    for name in order:
        dtype, shape, arr = tensors[name]
        n = arr.nbytes
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + n]}
        at += n
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name in order:
            f.write(tensors[name][2].tobytes())


class Bad(Exception):
    pass


def read_strict(path):
    """A strict reader of the format: returns (metadata, {name: (dtype, shape, raw bytes)})."""
    with open(path, "rb") as f:
        buf = f.read()
    if len(buf) < 8:
        raise Bad("file shorter than 8 bytes")
    (n,) = struct.unpack("<Q", buf[:8])
    if n > len(buf) - 8 or n > 100_000_000:
        raise Bad("header length %d too large" % n)
    raw = buf[8:8 + n]
    if not raw.startswith(b"{"):
        raise Bad("header does not start with '{'")
    text = raw.decode("utf-8")  # strict: raises on invalid UTF-8

    def no_dups(pairs):
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            raise Bad("duplicate key")
        return dict(pairs)

    if not text.rstrip(" ").endswith("}"):
        raise Bad("the header is not a JSON object padded with spaces")
    header = json.loads(text, object_pairs_hook=no_dups)
    meta = header.pop("__metadata__", None)
    if meta is not None and not all(isinstance(v, str) for v in meta.values()):
        raise Bad("metadata values must be strings")
    data = buf[8 + n:]
    spans = []
    out = {}
    for name, e in header.items():
        if not name or set(e) != {"dtype", "shape", "data_offsets"} or e["dtype"] not in DTYPES:
            raise Bad("bad entry %r" % name)
        if any(not isinstance(d, int) or d < 0 for d in e["shape"]):
            raise Bad("bad shape for %r" % name)
        b, end = e["data_offsets"]
        nbytes = math.prod(e["shape"]) * DTYPES[e["dtype"]][1]
        if nbytes != end - b or not 0 <= b <= end <= len(data):
            raise Bad("bad data_offsets for %r" % name)
        spans.append((b, end, name))
        out[name] = (e["dtype"], e["shape"], data[b:end])
    at = 0
    for b, end, name in sorted(spans):
        if b != at:
            raise Bad("tensor %r: overlap or hole at data byte %d" % (name, at))
        at = end
    if at != len(data):
        raise Bad("data bytes after the last tensor")
    return meta, out


def check(path):
    meta, got = read_strict(path)
    if meta != METADATA:
        raise Bad("metadata differs: %r" % (meta,))
    want = crosscheck_set()
    if set(got) != set(want):
        raise Bad("tensor names differ: %s" % sorted(set(got) ^ set(want)))
    for name, (dtype, shape, arr) in want.items():
        gd, gs, graw = got[name]
        if gd != dtype or gs != shape:
            raise Bad("%s: %s %s, want %s %s" % (name, gd, gs, dtype, shape))
        if graw != arr.tobytes():
            g = np.frombuffer(graw, dtype=DTYPES[dtype][0])
            w = np.frombuffer(arr.tobytes(), dtype=DTYPES[dtype][0])
            i = int(np.argmax(g != w))
            raise Bad("%s: element %d is %r, want %r" % (name, i, g[i], w[i]))
    return len(got)


def main(argv):
    if len(argv) != 3 or argv[1] not in ("write", "check", "selftest"):
        sys.stderr.write(__doc__)
        return 2
    try:
        if argv[1] == "write":
            write_hf_style(argv[2])
        elif argv[1] == "check":
            n = check(argv[2])
            print("%s: %d tensors and the metadata match the cross-check set" % (argv[2], n))
        else:
            path = argv[2] + "/hf_style.safetensors"
            write_hf_style(path)
            check(path)
            with open(path, "rb") as f:
                buf = bytearray(f.read())
            buf[-1] ^= 1  # negative control: one flipped bit must be caught
            with open(path, "wb") as f:
                f.write(buf)
            try:
                check(path)
            except Bad:
                print("selftest: the checker reads its own file and refuses a flipped bit")
                return 0
            raise Bad("selftest: a flipped bit was not detected")
    except (Bad, ValueError, KeyError, TypeError) as e:
        print("%s: %s" % (argv[2], e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
