"""BF16 and F16 encoders of refenc.safetensors against the C library's
(refenc_double_to_bf16, refenc_double_to_f16 in librefenc.so), element by
element, on every encoding decoded, on every tie between two neighbouring
values of the format and the doubles just either side of it, on the overflow
threshold, and on random doubles (every bit pattern of float64, and
magnitudes across the format's range).  Negative controls: two wrong
encoders (through float32, which rounds twice; truncation) disagree with the C
one on the same set, so the comparison can fail."""
import numpy as np
import pytest

from refenc import safetensors as st

FORMATS = {  # name: (python encoder, python decoder, C encoder, C decoder, encoding of +inf)
    "BF16": (st.double_to_bf16, st.bf16_to_double, "refenc_double_to_bf16", "refenc_bf16_to_double", 0x7F80),
    "F16": (st.double_to_f16, st.f16_to_double, "refenc_double_to_f16", "refenc_f16_to_double", 0x7C00),
}


def c_encode(lib, fmt, x):
    f = getattr(lib, FORMATS[fmt][2])
    return np.array([f(float(v)) for v in x], dtype=np.uint16)


def doubles(fmt, seed):
    """The test set: ties and their neighbours, the format's values, special
    values, and random doubles; both signs."""
    enc, dec, _, _, inf = FORMATS[fmt]
    v = dec(np.arange(inf, dtype=np.uint16))        # every finite value >= 0, ascending
    top = 2.0 * v[-1] - v[-2]                       # 2^(emax+1): the next value the format lacks
    w = np.append(v, top)
    mids = (w[:-1] + w[1:]) / 2                     # exact: 2 more bits than the format has
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**64, size=60000, dtype=np.uint64, endpoint=False)
    lo, hi = np.log2(v[1]) - 4, np.log2(top) + 2
    mags = np.exp2(rng.uniform(lo, hi, size=60000))
    special = np.array([0.0, np.inf, np.nan, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
                        top, np.nextafter(top, 0), v[1] / 2, np.nextafter(v[1] / 2, 1), np.nextafter(v[1] / 2, 0)])
    nan_payloads = (np.array([0x7FF0000000000001, 0x7FF8000000000000, 0x7FF4000000000000, 0x7FFFFFFFFFFFFFFF,
                              0x7FF0000000001000], dtype=np.uint64)).view(np.float64)
    pos = np.concatenate([v, mids, np.nextafter(mids, 0), np.nextafter(mids, np.inf), mags, special,
                          bits.view(np.float64), nan_payloads])
    return np.concatenate([pos, -pos])


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_encoding_round_trips(fmt, libref):
    enc, dec, _, c_dec, _ = FORMATS[fmt]
    h = np.arange(65536, dtype=np.uint16)
    x = dec(h)
    cx = np.array([getattr(libref, c_dec)(int(b)) for b in h])
    same = (x.view(np.uint64) == cx.view(np.uint64)) | (np.isnan(x) & np.isnan(cx))
    assert same.all(), f"{fmt}: decoding differs from the C library at {h[~same][:8]}"
    back = enc(x)
    finite = ~np.isnan(x)
    assert (back[finite] == h[finite]).all(), f"{fmt}: {h[finite][back[finite] != h[finite]][:8]} do not round-trip"
    assert np.isnan(dec(back[~finite])).all()


@pytest.mark.parametrize("fmt", FORMATS)
def test_encoder_equals_the_c_library(fmt, libref, seed):
    x = doubles(fmt, seed)
    py, c = FORMATS[fmt][0](x), c_encode(libref, fmt, x)
    bad = np.flatnonzero(py != c)
    assert bad.size == 0, (f"{fmt} (seed {seed}): {bad.size} of {x.size} differ, e.g. "
                           + ", ".join(f"{float(x[i]).hex()}: python {py[i]:#06x}, C {c[i]:#06x}" for i in bad[:6]))


@pytest.mark.parametrize("fmt", FORMATS)
def test_ties_go_to_even_and_neighbours_to_the_nearest(fmt):
    """The rounding rule itself, without the C library: a midpoint goes to
    the neighbour whose last bit is 0; a double just above (below) it goes
    up (down); the midpoint below 2^(emax+1) overflows (IEEE 754)."""
    enc, dec, _, _, inf = FORMATS[fmt]
    h = np.arange(inf, dtype=np.uint16)
    v = dec(h)
    top = 2.0 * v[-1] - v[-2]
    w, hw = np.append(v, top), np.append(h, np.uint16(inf))
    mids = (w[:-1] + w[1:]) / 2
    got = enc(mids)
    even = np.where(hw[:-1] % 2 == 0, hw[:-1], hw[1:])
    assert (got == even).all()
    assert (enc(np.nextafter(mids, np.inf)) == hw[1:]).all()
    assert (enc(np.nextafter(mids, 0)) == hw[:-1]).all()
    assert (enc(-mids) == (even | np.uint16(0x8000))).all()


@pytest.mark.parametrize("fmt", FORMATS)
def test_negative_controls_wrong_encoders_are_caught(fmt, libref, seed):
    enc = FORMATS[fmt][0]
    x = doubles(fmt, seed)
    finite = np.isfinite(x)
    x = x[finite][: 3 * 32768]  # the values, the ties and their neighbours
    c = c_encode(libref, fmt, x)
    with np.errstate(over="ignore"):
        via_f32 = enc(x.astype(np.float32).astype(np.float64))
    assert (via_f32 != c).sum() > 100, "rounding twice through float32 went unnoticed"
    if fmt == "BF16":
        with np.errstate(over="ignore"):
            trunc = (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        assert (trunc != c).sum() > 1000, "truncation went unnoticed"
