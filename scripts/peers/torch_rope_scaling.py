"""Hugging Face's RoPE scaling for the PyTorch peer: the inverse frequencies
and the attention factor of each rope_type of transformers'
modeling_rope_utils.py (default, linear, dynamic, yarn, llama3, longrope)
and GTE's "ntk" (Alibaba-NLP/new-impl's NTKScalingRotaryEmbedding),
written from HF's formulas in torch operations of the table dtype (float64
in the float64 mode, float32 otherwise, as HF forms its tables), and the
RoPE scaling bug variants of refenc (docs/rope-scaling.md).  The golden
config's rope_scaling object is HF's, with HF's top-level
max_position_embeddings inside it."""
import math

import torch

BUGS = ["llama3_scaling_ignored", "yarn_attention_factor_squared", "yarn_attention_factor_dropped",
        "dynamic_ntk_from_max_positions", "ntk_scaling_ignored"]


def _default(base, R, dt):
    return 1.0 / (base ** (torch.arange(0, R, 2, dtype=dt) / R))


def _dynamic(rs, base, R, S, dt):
    L0 = rs["max_position_embeddings"]
    if S <= L0:
        return _default(base, R, dt)
    s = rs["factor"]
    base = base * ((s * S / L0) - (s - 1)) ** (R / (R - 2))
    return _default(base, R, dt)


def _yarn(rs, base, R, dt):
    s = rs["factor"]
    L0 = rs.get("original_max_position_embeddings") or rs["max_position_embeddings"]

    def correction_dim(rotations):
        return (R * math.log(L0 / (rotations * 2 * math.pi))) / (2 * math.log(base))

    lo, hi = correction_dim(rs.get("beta_fast", 32.0)), correction_dim(rs.get("beta_slow", 1.0))
    if rs.get("truncate", True):
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, R - 1)
    if lo == hi:
        hi += 0.001
    ramp = torch.clamp((torch.arange(R // 2, dtype=dt) - lo) / (hi - lo), 0, 1)
    pos_freqs = base ** (torch.arange(0, R, 2, dtype=dt) / R)
    extrapolation = 1 - ramp
    return (1.0 / (s * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation


def _llama3(rs, base, R, dt):
    inv = _default(base, R, dt)
    s, low, high = rs["factor"], rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
    L0 = rs["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > L0 / low, inv / s, inv)
    smooth = (L0 / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / s + smooth * scaled
    medium = ~(wavelen < L0 / high) * ~(wavelen > L0 / low)
    return torch.where(medium, smoothed, scaled)


def _longrope(rs, base, R, S, dt):
    L0 = rs.get("original_max_position_embeddings") or rs["max_position_embeddings"]
    ext = rs["long_factor"] if S > L0 else rs["short_factor"]
    return 1.0 / (torch.tensor(ext, dtype=dt) * base ** (torch.arange(0, R, 2, dtype=dt) / R))


def _ntk(rs, base, R, dt):
    """GTE's fixed NTK as new-impl's _set_cos_sin_cache forms it (its
    constructor fills the cache for factor * max_position_embeddings
    positions, the scaled branch): base * s, then / s^(2/R); with mixed_b,
    the unscaled table / exp(a (j + 1)^b), a = ln s / (R/2)^b."""
    s, b = rs["factor"], rs.get("mixed_b")
    inv = _default(base * (s if b is None else 1), R, dt)
    if b is None:
        return inv / s ** (2 / R)
    a = torch.tensor(s, dtype=dt).log() / (R / 2) ** b
    return inv / (a * torch.arange(1, R // 2 + 1, dtype=dt) ** b).exp()


def _mscale(s, m=1.0):
    return 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0


def attention_factor(rs, bug=None):
    """The factor HF multiplies cos and sin by (attention_scaling)."""
    t = rs.get("rope_type") or rs.get("type") or "default"
    f = 1.0
    if t == "yarn":
        f = rs.get("attention_factor") or 0.0
        if not f:
            m, mall = rs.get("mscale") or 0.0, rs.get("mscale_all_dim") or 0.0
            f = _mscale(rs["factor"], m) / _mscale(rs["factor"], mall) if m and mall else _mscale(rs["factor"])
        if bug == "yarn_attention_factor_squared":
            f = f * f
        elif bug == "yarn_attention_factor_dropped":
            f = 1.0
    elif t == "longrope":
        f = rs.get("attention_factor") or 0.0
        if not f:
            o = rs.get("original_max_position_embeddings") or 0
            L0 = o or rs["max_position_embeddings"]
            s = rs["max_position_embeddings"] / o if o else rs.get("factor", 1.0)
            f = 1.0 if s <= 1 else math.sqrt(1 + math.log(s) / math.log(L0))
    return f


def inv_freq(rs, base, R, S, dt, bug=None):
    """theta_j, j < R/2, for the rope_scaling object rs (None: default) at the
    sequence length S = max(position_ids) + 1."""
    t = (rs or {}).get("rope_type") or (rs or {}).get("type") or "default"
    if t == "llama3" and bug == "llama3_scaling_ignored":
        t = "default"
    if t == "ntk" and bug == "ntk_scaling_ignored":
        t = "default"  # rope_scaling never read (lablup/mlxcel#1355's class)
    if t == "dynamic" and bug == "dynamic_ntk_from_max_positions":
        S = rs["max_position_embeddings"]  # HF's initial inv_freq, never grown
    if t == "linear":
        return _default(base, R, dt) / rs["factor"]
    if t == "dynamic":
        return _dynamic(rs, base, R, S, dt)
    if t == "yarn":
        return _yarn(rs, base, R, dt)
    if t == "llama3":
        return _llama3(rs, base, R, dt)
    if t == "longrope":
        return _longrope(rs, base, R, S, dt)
    if t == "ntk":
        return _ntk(rs, base, R, dt)
    return _default(base, R, dt)
