#!/usr/bin/python3
"""The PyTorch peer: computes every refenc golden case with PyTorch and writes
results files for `refenc certify`.  It is the worked example of the refenc
Python module (docs/python.md): the module reads the cases
(refenc.all_cases), says which of them PyTorch's own modules can compute
(Case.fits), records the intermediates with forward hooks (refenc.capture),
writes the results in F64, F32, F16 or BF16 (Case.write_results) and, with
--certify, certifies them (refenc.certify); what is left here is PyTorch.

It uses PyTorch's own modules where they exist (nn.TransformerEncoder /
nn.TransformerEncoderLayer, nn.MultiheadAttention with a float attn_mask for
ALiBi, nn.LayerNorm, nn.Embedding, F.gelu, torch.softmax) and plain torch
operations where they don't (RoPE, sinusoidal PE, temperature), in float64 or
float32.  The family cases (BERT, RoBERTa, DistilBERT, GPT-2, CLIP text,
Llama, Mistral, Qwen2, Qwen3) go to torch_families.py: modules under the
families' own names.

In float16 and bfloat16 it computes the way tensor-core and fused CPU kernels
do: every operation in float32 on values of the dtype, its output rounded to
the dtype (--accumulate float32, the default), or with every accumulation
(matmul, sum, LayerNorm statistics, softmax denominator) rounded to the dtype
at each step too (--accumulate dtype, the "pure" model).  PyTorch on the CPU
has no float16 kernels, so both are built from float32 operations and explicit
rounding; --native runs PyTorch's own bfloat16 CPU kernels instead.

    scripts/peers/torch_peer.py --golden golden --out results/torch-f64 --dtype float64
    build/refenc certify --golden golden --results results/torch-f64
    scripts/peers/torch_peer.py --golden golden --out results/torch-bf16 --dtype bfloat16 --certify

docs/certify.md walks through it as the worked example of certifying an
implementation.
"""
import argparse
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

try:
    import refenc  # installed (make install-python)
except ImportError:  # in the source tree: scripts/python
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
    import refenc

import torch_families  # the families (BERT, RoBERTa, DistilBERT, GPT-2, CLIP text, Llama, Mistral, Qwen)
import torch_rope_scaling  # Hugging Face's rope_scaling types

# ---- bug injection (--bug) -------------------------------------------------------
# The known bug variants of refenc (ref/tool/variants.h, docs/diagnosis.md), injected
# into this peer's own computation, and two bugs refenc does not know, to
# check that the certifier names the right variant and never a wrong one.
POOLING_BUGS = ["mean_counts_padding", "last_token_ignores_padding", "pooling_not_normalized"]
KNOWN_BUGS = ["layernorm_eps_x10", "layernorm_eps_div10", "unbiased_variance", "gelu_tanh_for_exact",
              "gelu_exact_for_tanh", "rope_layout_swapped", "rope_base_wrong", "attention_scale_sqrt_d",
              "attention_unscaled", "missing_final_norm", "embedding_unscaled", "alibi_slopes_pow2",
              "padding_mask_inverted", "pre_post_swapped", "heads_merged_without_transpose",
              "glu_halves_swapped", "rmsnorm_offset_missing", "rmsnorm_offset_doubled", "gqa_tiled",
              "softcap_missing", "query_scale_head_dim", "softcap_after_mask",
              "window_off_by_one", "window_ignored", "local_base_on_global_layer0",
              "rope_scaling_on_local_layers", "global_rope_scaling_ignored",
              "embedding_normalizer_unrounded", "qkv_bias_dropped", "qk_norm_after_rope",
              "qk_norm_over_all_heads", "first_prenorm_applied", "sandwich_norms_missing",
              "post_attention_norm_as_pre_ffn", "bidirectional_run_causally", "t5_scores_scaled",
              "t5_bucket_not_clamped", "t5_bias_per_layer", "alibi_bias_positive",
              "rmsnorm_mean_subtracted", "layer_pattern_shifted"] \
    + torch_families.KNOWN_BUGS + torch_rope_scaling.BUGS + POOLING_BUGS
UNKNOWN_BUGS = ["softmax_over_queries", "ffn_residual_dropped"]
BUG = None


def bugged_eps(eps):
    return torch_families.bugged_eps(eps, BUG)


def layer_norm(t, w, b, eps):
    """LayerNorm over the last axis, as F.layer_norm (or with an injected
    bug); b None: a bias-free LayerNorm (norm_bias false)."""
    if BUG == "unbiased_variance":
        mean = t.mean(-1, keepdim=True)
        var = t.var(-1, unbiased=True, keepdim=True)
        y = (t - mean) / torch.sqrt(var + eps) * w
        return y if b is None else y + b
    return F.layer_norm(t, (t.shape[-1],), w, b, bugged_eps(eps))


def rms_norm(t, w, eps, offset):
    """RMSNorm over the last axis, HF's LlamaRMSNorm / T5LayerNorm (offset
    False: x / sqrt(mean(x^2) + eps) * w) or GemmaRMSNorm (offset True:
    * (1 + w)), each in its module's rounding order, as
    ref/tool/emulate_kernels.c's emu_rmsnorm: the statistic is float32 as
    those modules compute it (table_precision: not rounded in the
    float32-accumulation emulation, each partial sum rounded in the pure
    one); Llama and T5 round the normalised x to the dtype, then multiply by
    w; Gemma normalises and multiplies by (1 + w) in float32 and casts once
    ("Llama does x.to(float16) * w whilst Gemma is (x * w).to(float16)",
    modeling_gemma.py)."""
    eps = bugged_eps(eps)
    if BUG == "rmsnorm_offset_missing":
        offset = False
    if BUG == "rmsnorm_offset_doubled" and offset:  # Gemma's +1 folded into the weights, then added again
        w = w + 1.0
    if offset:
        up = t.dtype in (torch.float16, torch.bfloat16)  # --native: the module's .float()
        x, w32 = (t.float(), w.float()) if up else (t, w)
        with table_precision():
            y = x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * (1.0 + w32)
        return rounded_table(y).to(t.dtype)
    if EMU is None and t.dtype in (torch.bfloat16, torch.float16):  # --native: the modules' own code,
        t32 = t.float()  # hidden_states.to(float32).pow(2).mean, rsqrt, .to(weight dtype), then weight *
        z = (t32 * torch.rsqrt(t32.pow(2).mean(-1, keepdim=True) + eps)).to(t.dtype)
    else:
        with table_precision():
            r = torch.sqrt((t * t).mean(-1, keepdim=True) + eps)
        z = t / r
    return z * w


def block_rms_norm(t, w, eps, offset):
    """A block's RMSNorm (not the per-head q/k norms).  The bug
    rmsnorm_mean_subtracted computes it (w, not Gemma's 1 + w) as a
    bias-free LayerNorm (llama.cpp#173's ggml_norm)."""
    if BUG == "rmsnorm_mean_subtracted" and not offset:
        return layer_norm(t, w, None, eps)
    return rms_norm(t, w, eps, offset)


def norm(cfg, t, w, b, eps):
    """The configured norm (norm_type): LayerNorm or RMSNorm."""
    if cfg.get("norm_type", "layernorm") == "rmsnorm":
        return block_rms_norm(t, w, eps, cfg.get("rmsnorm_offset", False))
    return layer_norm(t, w, b, eps)


def glu_ffn(cfg, x, W1, b1, W2, b2, act):
    """The gated FFN (ffn_type glu): [first | second] = x W1^T + b1 split in
    halves, h = act(gate) * up with the gate the first half (glu_gate first:
    ModernBERT, Jina, Llama's gate_proj stacked over up_proj) or the second
    (GTE's up_gate_proj), then h W2^T + b2."""
    first, second = F.linear(x, W1, b1).chunk(2, dim=-1)
    gate_first = cfg.get("glu_gate", "first") == "first"
    if BUG == "glu_halves_swapped":
        gate_first = not gate_first
    gate, up = (first, second) if gate_first else (second, first)
    return F.linear(act(gate) * up, W2, b2)


def ffn_block(cfg, x, W1, b1, W2, b2, act):
    """The configured FFN (ffn_type): the MLP or the gated FFN."""
    if cfg.get("ffn_type", "mlp") == "glu":
        return glu_ffn(cfg, x, W1, b1, W2, b2, act)
    return F.linear(act(F.linear(x, W1, b1)), W2, b2)


# ---- float16 and bfloat16 from float32 operations ------------------------------------

class Emulation(TorchFunctionMode):
    """While active, rounds the float32 output of every torch operation to dt
    (round to nearest even).  With pure, the accumulating operations (linear,
    matmul, softmax, layer_norm, mean, var) also round each partial sum.
    Inside table_precision() (the PE and RoPE tables, formed in float32 as
    Hugging Face does) nothing is rounded, unless pure."""

    def __init__(self, dt, pure):
        super().__init__()
        self.dt, self.pure, self.exempt = dt, pure, False

    def round(self, t):
        return t.to(self.dt).to(torch.float32) if isinstance(t, torch.Tensor) and t.dtype == torch.float32 else t

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        impl = PURE.get(getattr(func, "__name__", None)) if self.pure else None
        out = impl(self, *args, **kwargs) if impl is not None else func(*args, **kwargs)
        if self.exempt:
            return out
        if isinstance(out, (tuple, list)):
            return type(out)(self.round(o) for o in out)
        return self.round(out)


EMU = None  # the Emulation of --dtype float16/bfloat16 (not --native), or None


class table_precision:
    """The PE and RoPE tables: float32 (not rounded) in the float32-accumulation model."""

    def __enter__(self):
        self.saved = EMU.exempt if EMU is not None else None
        if EMU is not None and not EMU.pure:
            EMU.exempt = True

    def __exit__(self, *exc):
        if EMU is not None:
            EMU.exempt = self.saved


class index_precision:
    """T5's bucket indices: HF computes them from integer positions with an
    explicit float32 logarithm whatever the model's dtype (.float()), so
    neither emulation rounds them (a bfloat16 log(32 / 8) would move offset
    32 to the bucket below)."""

    def __enter__(self):
        self.saved = EMU.exempt if EMU is not None else None
        if EMU is not None:
            EMU.exempt = True

    def __exit__(self, *exc):
        if EMU is not None:
            EMU.exempt = self.saved


def rounded_table(t):
    """A table cast to the model's dtype, as implementations store cos and sin."""
    return EMU.round(t) if EMU is not None else t


# The pure model's accumulations: each partial sum rounded (the handler runs
# with the mode off, so every step rounds explicitly).
def pure_sum_last(e, t):
    acc = torch.zeros_like(t[..., 0])
    for k in range(t.shape[-1]):
        acc = e.round(acc + t[..., k])
    return acc


def pure_matmul(e, a, b):
    """a (..., n, k) @ b (..., k, m), or a vector a (k)."""
    acc = None
    for k in range(a.shape[-1]):
        term = e.round(a[..., k:k + 1] * b[..., k:k + 1, :]) if a.dim() > 1 else e.round(a[k] * b[k])
        acc = term if acc is None else e.round(acc + term)
    return acc


def pure_linear(e, x, w, b=None):
    y = pure_matmul(e, x, w.transpose(0, 1))
    return y if b is None else e.round(y + b)


def pure_softmax(e, x, dim=-1, *args, **kwargs):
    x = x.movedim(dim, -1)
    ex = e.round(torch.exp(e.round(x - x.max(-1, keepdim=True).values)))
    return e.round(ex / pure_sum_last(e, ex)[..., None]).movedim(-1, dim)


def pure_mean(e, t, dim=None, keepdim=False, **kwargs):
    m = e.round(pure_sum_last(e, t.movedim(dim, -1)) / t.shape[dim])
    return m.unsqueeze(dim) if keepdim else m


def pure_var(e, t, dim=None, unbiased=True, keepdim=False, **kwargs):
    d = e.round(t - pure_mean(e, t, dim, keepdim=True))
    v = e.round(pure_sum_last(e, e.round(d * d).movedim(dim, -1)) / (t.shape[dim] - (1 if unbiased else 0)))
    return v.unsqueeze(dim) if keepdim else v


def pure_layer_norm(e, x, normalized_shape, weight=None, bias=None, eps=1e-5):
    d = e.round(x - pure_mean(e, x, -1, keepdim=True))
    sd = e.round(torch.sqrt(e.round(pure_var(e, x, -1, unbiased=False, keepdim=True) + eps)))
    y = e.round(e.round(d / sd) * weight)
    return y if bias is None else e.round(y + bias)


PURE = {"linear": pure_linear, "matmul": pure_matmul, "__matmul__": pure_matmul, "softmax": pure_softmax,
        "layer_norm": pure_layer_norm, "mean": pure_mean, "var": pure_var}


# ---- building blocks in torch ------------------------------------------------

def alibi_slopes(n):
    """The ALiBi paper's get_slopes (closest power of two, then every other
    slope of the sequence for twice as many heads)."""
    def pow2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer() or BUG == "alibi_slopes_pow2":
        return pow2(n)
    c = 2 ** math.floor(math.log2(n))
    return pow2(c) + alibi_slopes(2 * c)[0::2][: n - c]


def alibi_bias(H, positions, dt):
    """(H, L, L): -m_h |p_i - p_j|, symmetric (encoder); +m_h |p_i - p_j|
    under the bug alibi_bias_positive (candle#1187)."""
    m = torch.tensor(alibi_slopes(H), dtype=dt)
    p = positions.to(torch.float64)  # the distances exactly: bfloat16 holds no odd integer above 256
    dist = (p[:, None] - p[None, :]).abs()
    sign = 1.0 if BUG == "alibi_bias_positive" else -1.0
    # m_h |i - j| rounded once to the dtype (as the product of two values of it would be)
    return (sign * m.to(torch.float64)[:, None, None] * dist[None]).to(dt)


def sinusoidal_pe(positions, D, dt):
    """(L, D): the usual PyTorch code, interleaved sin/cos, computed in dt
    (in float32 for a 16-bit dt, then rounded, as Hugging Face does)."""
    if dt in (torch.float16, torch.bfloat16):
        return sinusoidal_pe(positions, D, torch.float32).to(dt)
    with table_precision():
        position = positions.to(dt).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, D, 2, dtype=dt) * (-math.log(10000.0) / D))
        pe = torch.zeros(len(positions), D, dtype=dt)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
    return rounded_table(pe)


def rope(x, positions, base, layout, cfg=None):
    """x (..., L, Dh) rotated at positions (L). layout 'half' is Hugging Face's
    rotate_half; 'interleaved' is GPT-J's pairs (2j, 2j+1).  With cfg's
    rope_scaling (torch_rope_scaling.py), HF's scaled frequencies at S =
    max(positions) + 1 and cos, sin times the attention factor; with its
    partial_rotary_factor, the first R = int(Dh * factor) coordinates rotate."""
    Dh = x.shape[-1]
    cfg = cfg or {}
    rs = cfg.get("rope_scaling")
    R = int(Dh * cfg.get("partial_rotary_factor", 1.0))
    x, x_pass = x[..., :R], x[..., R:]
    dt = x.dtype
    if dt in (torch.float16, torch.bfloat16):  # the tables in float32, as Hugging Face
        dt = torch.float32
    if BUG == "rope_layout_swapped":
        layout = "interleaved" if layout == "half" else "half"
    if BUG == "rope_base_wrong":
        base = 500000.0 if base == 10000.0 else 10000.0
    with table_precision():
        S = int(positions.max()) + 1
        inv_freq = torch_rope_scaling.inv_freq(rs, base, R, S, dt, BUG)
        freqs = torch.outer(positions.to(dt), inv_freq)          # (L, R/2)
        f = torch_rope_scaling.attention_factor(rs or {}, BUG)
        cos, sin = freqs.cos(), freqs.sin()
        if f != 1.0:
            cos, sin = cos * f, sin * f
    cos, sin = rounded_table(cos).to(x.dtype), rounded_table(sin).to(x.dtype)
    if layout == "half":
        x1, x2 = x[..., : R // 2], x[..., R // 2:]
        rotated = torch.cat((-x2, x1), dim=-1)
        y = x * torch.cat((cos, cos), dim=-1) + rotated * torch.cat((sin, sin), dim=-1)
    else:
        x1, x2 = x[..., 0::2], x[..., 1::2]
        y = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)
    return torch.cat((y, x_pass), dim=-1) if R < Dh else y


def activation_fn(name):
    return torch_families.activation_fn(name, BUG)


class Case:
    """A golden case (a refenc.Case: its inputs and parameters as float64,
    int64 and bool arrays) as torch tensors of the peer's dtype."""

    def __init__(self, golden, dt):
        self.golden = golden
        self.name, self.component, self.cfg = golden.name, golden.component, golden.config
        self.params = golden.params
        self.dt = dt  # the compute dtype: float32 in the emulation of float16 and bfloat16
        self.model_dtype = EMU.dt if EMU is not None else dt  # the dtype the model stands for
        self._arrays = {**golden.inputs, **golden.params}

    def has(self, name):
        return name in self._arrays

    def t(self, name):
        """A floating input or parameter as a torch tensor of the peer's dtype
        (emulated: float32 holding the values rounded to the dtype)."""
        t = refenc.tensor(self._arrays[name], self.dt)
        return EMU.round(t) if EMU is not None else t

    def t_or_none(self, name):
        """case.t(name), or None for a bias the case does not store (a
        bias-free linear map or norm: linear_bias, norm_bias false, RMSNorm)."""
        return self.t(name) if self.has(name) else None

    def i(self, name):
        return refenc.tensor(self._arrays[name])

    def positions(self, L):
        return self.i("in.positions") if self.has("in.positions") else torch.arange(L)

    def padding(self):
        """(B, L) bool, True = padding, or None."""
        if not self.has("in.key_padding_mask"):
            return None
        pad = self.i("in.key_padding_mask")
        return ~pad if BUG == "padding_mask_inverted" else pad


def outside_window(cfg, L):
    """True where key j lies outside query i's window, (L, L), by Hugging
    Face's rules (docs/families.md): sliding_window w, masking_utils'
    sliding_window_overlay kv_idx > q_idx - w (causal: w keys with the
    query's own); local_attention w, ModernBERT's window_mask
    |q_idx - kv_idx| <= w // 2.  The bug window_off_by_one widens each by a
    key (FlashAttention's (w, w), transformers#39408); window_ignored drops
    it (transformers#30127)."""
    q, kv = torch.arange(L)[:, None], torch.arange(L)[None, :]
    out = torch.zeros(L, L, dtype=torch.bool)
    if BUG == "window_ignored":
        return out
    wider = 1 if BUG == "window_off_by_one" else 0
    sw, la = cfg.get("sliding_window"), cfg.get("local_attention")
    if sw is not None:
        out |= ~(kv > q - (sw + wider))
    if la is not None:
        out |= ~((q - kv).abs() <= la // 2 + wider)
    return out


NORMALIZER_DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16,
                     "float16": torch.float16}


def normalizer(cfg, D):
    """The embedding's scale: sqrt(D), or Gemma's normaliser
    torch.tensor(hidden_size ** 0.5, dtype=the model's dtype) when the case
    declares embedding_normalizer_dtype (modeling_gemma.py; transformers#29402).
    The bug embedding_normalizer_unrounded keeps sqrt(D) unrounded."""
    dtype = cfg.get("embedding_normalizer_dtype", "exact")
    if dtype == "exact" or BUG == "embedding_normalizer_unrounded":
        return math.sqrt(D)
    return torch.tensor(D ** 0.5, dtype=NORMALIZER_DTYPES[dtype]).item()


def layer_cfg(cfg, i):
    """Layer i's config under ModernBERT's or Gemma 3's pattern
    (docs/families.md).  With global_attn_every_n_layers n, layer i is global
    iff i % n == 0 (modeling_modernbert: layer_id % global_attn_every_n_layers);
    with sliding_window_pattern p, iff (i + 1) % p == 0 (Gemma3TextConfig's
    layer_types).  A global layer has no window and global_rope_theta; a
    local layer keeps the window with local_rope_theta (either absent:
    rope_base), and under Gemma 3's pattern rotates without rope_scaling
    (modeling_gemma3's rotary_emb_local).  The bugs: local_base_on_global_layer0
    rotates every layer with the local base (llama.cpp#18330);
    rope_scaling_on_local_layers scales the local layers too (ferrox#39);
    global_rope_scaling_ignored scales no layer (mlxcel#1340);
    layer_pattern_shifted takes the other family's phase with the same
    period (llama.cpp#18330: its SWA pattern without dense_first)."""
    n, p = cfg.get("global_attn_every_n_layers"), cfg.get("sliding_window_pattern")
    if n is None and p is None:
        return cfg
    if BUG == "layer_pattern_shifted":
        n, p = p, n
    c = dict(cfg)
    local = cfg.get("local_rope_theta", cfg["rope_base"])
    if (p is not None and (i + 1) % p == 0) or (p is None and i % n == 0):
        c.pop("sliding_window", None)
        c.pop("local_attention", None)
        c["rope_base"] = local if BUG == "local_base_on_global_layer0" else cfg.get("global_rope_theta", cfg["rope_base"])
        if BUG == "global_rope_scaling_ignored":
            c.pop("rope_scaling", None)
    else:
        c["rope_base"] = local
        if p is not None and BUG != "rope_scaling_on_local_layers":
            c.pop("rope_scaling", None)
    return c


def masked_score(case):
    """What a masked score becomes: -inf, or with mask_value finfo_min the
    model dtype's torch.finfo(dtype).min, as Hugging Face's masks fill it (a
    query whose keys are all masked then attends uniformly, not NaN; the
    model's dtype, as torch_families does: float32's min is -inf in bfloat16)."""
    if case.cfg.get("mask_value", "-inf") == "finfo_min":
        return torch.finfo(getattr(case, "model_dtype", case.dt)).min
    return float("-inf")


def t5_relative_position_bucket(relative_position, num_buckets, max_distance):
    """Hugging Face's T5Attention._relative_position_bucket with
    bidirectional=True (models/t5/modeling_t5.py), the encoder's: half the
    buckets per sign, keys after the query (relative_position > 0) in the
    upper half, offsets below max_exact = num_buckets // 4 exact, larger ones
    logarithmic up to max_distance, clamped to the sign's last bucket.  The
    logarithm is HF's float32 one; for T5's (32, 128) it gives the exact
    buckets for every offset (docs/verdict.md, "T5's relative buckets").  The
    bug t5_bucket_not_clamped leaves the clamp out; as refenc defines it
    (ref/relative_bucket.h), offsets >= max_distance then take bucket
    num_buckets // 2 of their sign, read modulo the table's rows."""
    relative_buckets = 0
    num_buckets //= 2
    relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
    relative_position = torch.abs(relative_position)
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    large = max_exact + (torch.log(relative_position.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    last = num_buckets if BUG == "t5_bucket_not_clamped" else num_buckets - 1
    large = torch.min(large, torch.full_like(large, last))
    return (relative_buckets + torch.where(is_small, relative_position, large)) % (2 * num_buckets)


def t5_bias(case, positions, layer):
    """T5Attention.compute_bias: position_bias (H, L, L) = table[bucket(memory
    - query), h] from block 0's relative_attention_bias (nb, H), which T5Stack
    passes on to every later block (transformers#13397).  The bug
    t5_bias_per_layer gives the later blocks none (they have no table)."""
    if layer > 0 and BUG == "t5_bias_per_layer":
        return None
    name = "layers.0.self_attn.relative_attention_bias.weight"
    table = case.t(name if case.has(name) else "relative_attention_bias.weight")
    cfg = case.cfg
    relative_position = positions[None, :] - positions[:, None]  # memory_position - context_position
    with index_precision():
        bucket = t5_relative_position_bucket(relative_position, cfg["relative_attention_num_buckets"],
                                             cfg.get("relative_attention_max_distance", 128))
    return table[bucket].permute(2, 0, 1)


def score_bias(case, B, H, L, positions, cfg=None, layer=0):
    """The float mask added to the scores, (B*H, L, L), or None: ALiBi,
    T5's relative bias (of layer `layer`), causal, in.attn_mask, the
    attention windows (key padding is passed separately); cfg: a layer's
    (layer_cfg), else the case's."""
    cfg, dt = cfg if cfg is not None else case.cfg, case.dt
    bias = torch.zeros(H, L, L, dtype=dt)
    used = False
    if cfg["positional"] == "alibi":
        bias = bias + alibi_bias(H, positions, dt)
        used = True
    if cfg.get("relative_attention_num_buckets"):
        t5 = t5_bias(case, positions, layer)
        if t5 is not None:
            bias = bias + t5
            used = True
    # the bug bidirectional_run_causally: a decoder's causal mask kept for a
    # bidirectional embedding model (sentence-transformers#3513)
    if cfg["causal"] or BUG == "bidirectional_run_causally":
        bias = bias.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), masked_score(case))
        used = True
    if case.has("in.attn_mask"):
        bias = bias + case.t("in.attn_mask")
        used = True
    if cfg.get("sliding_window") is not None or cfg.get("local_attention") is not None:
        bias = bias.masked_fill(outside_window(cfg, L), masked_score(case))
        used = True
    return bias.repeat(B, 1, 1) if used else None


def repeat_kv(h, g):
    """Hugging Face's repeat_kv (models/llama/modeling_llama.py): (B, Hkv, L, Dh)
    to (B, Hkv g, L, Dh), key/value head j serving query heads j g .. j g + g - 1.
    The bug gqa_tiled repeats the whole stack instead (onnx#7274)."""
    if g == 1:
        return h
    B, Hkv, L, Dh = h.shape
    if BUG == "gqa_tiled":
        return h.repeat(1, g, 1, 1)
    return h[:, :, None, :, :].expand(B, Hkv, g, L, Dh).reshape(B, Hkv * g, L, Dh)


def qk_norm(cfg, q, k, qk):
    """Qwen3's q_norm and k_norm (modeling_qwen3.py, Qwen3Attention): an
    RMSNorm over head_dim on every head of q (B, H, L, Dh) and k (B, Hkv, L,
    Dh), eps rms_norm_eps, one (Dh) weight each shared by the heads.  The bug
    qk_norm_over_all_heads normalises each position over its H Dh values
    (OLMo-2's q_norm width), the weight repeated on every head."""
    eps, off = cfg["layer_norm_eps"], cfg.get("rmsnorm_offset", False)
    if BUG != "qk_norm_over_all_heads":
        return rms_norm(q, qk[0], eps, off), rms_norm(k, qk[1], eps, off)

    def whole(t, w):
        B, Hh, L, Dh = t.shape
        y = rms_norm(t.transpose(1, 2).reshape(B, L, Hh * Dh), w.repeat(Hh), eps, off)
        return y.reshape(B, L, Hh, Dh).transpose(1, 2)
    return whole(q, qk[0]), whole(k, qk[1])


def manual_attention(case, x, W_in, b_in, W_o, b_o, positions, cfg=None, qk=None, layer=0):
    """Multi-head attention from torch operations, for what nn.MultiheadAttention
    cannot do (RoPE, temperature, grouped-query attention, head_dim, Gemma's
    score scale and softcap, Qwen3's q/k norms: qk = (q_norm, k_norm) weights
    or None).  Returns (output, weights (B, H, L, L))."""
    cfg = cfg if cfg is not None else case.cfg  # a layer's (layer_cfg)
    B, L, D = x.shape
    H = cfg["n_heads"]
    Hkv = cfg.get("n_kv_heads", H)
    Dh = cfg.get("head_dim", D // H)
    E = H * Dh
    if BUG == "qkv_bias_dropped" and cfg.get("qkv_bias"):  # Qwen2's q, k, v biases never added
        b_in = None
    q, k, v = F.linear(x, W_in, b_in).split([E, Hkv * Dh, Hkv * Dh], dim=-1)
    q = q.reshape(B, L, H, Dh).transpose(1, 2)
    k, v = (t.reshape(B, L, Hkv, Dh).transpose(1, 2) for t in (k, v))
    late = BUG == "qk_norm_after_rope"  # Qwen3 normalises, then rotates
    if qk is not None and not late:
        q, k = qk_norm(cfg, q, k, qk)
    if cfg["positional"] == "rope":
        q = rope(q, positions, cfg["rope_base"], cfg["rope_layout"], cfg)
        k = rope(k, positions, cfg["rope_base"], cfg["rope_layout"], cfg)
    if qk is not None and late:
        q, k = qk_norm(cfg, q, k, qk)
    k, v = repeat_kv(k, H // Hkv), repeat_kv(v, H // Hkv)
    # Gemma 2/3: query_pre_attn_scalar^-0.5 instead of head_dim^-0.5 (the bug
    # query_scale_head_dim keeps head_dim's, antonellof/ferrox#40)
    # T5 (query_pre_attn_scalar 1): no scale at all; the bug t5_scores_scaled
    # divides by sqrt(d_kv) as a generic kernel does (nntile#356)
    S = cfg.get("query_pre_attn_scalar")
    t5 = bool(cfg.get("relative_attention_num_buckets"))  # T5's unscaled scores: t5_scores_scaled's
    width = Dh if S is None or BUG == ("t5_scores_scaled" if t5 else "query_scale_head_dim") else S
    scale = {"attention_scale_sqrt_d": math.sqrt(D), "attention_unscaled": 1.0}.get(BUG, math.sqrt(width))
    s = q @ k.transpose(-1, -2) / (scale * cfg["temperature"])
    cap = cfg.get("attn_logit_softcapping")
    if BUG == "softcap_missing":
        cap = None
    late = BUG == "softcap_after_mask"  # the cap over score + mask (onnx#7865): masked keys -cap
    if cap is not None and not late:  # Gemma2Attention: before the mask
        s = torch.tanh(s / cap) * cap
    bias = score_bias(case, B, H, L, positions, cfg, layer)
    if bias is not None:
        s = s + bias.reshape(B, H, L, L)
    pad = case.padding()
    if pad is not None:
        s = s.masked_fill(pad[:, None, None, :], masked_score(case))
    if cap is not None and late:
        s = torch.tanh(s / cap) * cap
    w = torch.softmax(s, dim=-2 if BUG == "softmax_over_queries" else -1)
    ctx = w @ v
    ctx = ctx.reshape(B, L, E) if BUG == "heads_merged_without_transpose" else ctx.transpose(1, 2).reshape(B, L, E)
    return F.linear(ctx, W_o, b_o), w


# What nn.TransformerEncoder and nn.MultiheadAttention express, as the case
# features of refenc.features_of (docs/python.md): not RoPE, not a
# temperature.  A case needing anything else takes the torch operations.
NN_MODULES = {"component=*", "input=*", "norm=*", "final_norm=*", "activation=*", "causal=*",
              "positional=none", "positional=sinusoidal", "positional=learned", "positional=alibi",
              "positions", "key_padding_mask", "attn_mask"}


def sandwich_norms(cfg, p, eps):
    """Gemma 2/3's norms of the sublayers' outputs (Gemma2DecoderLayer:
    post_attention_layernorm on the attention's output, post_feedforward_layernorm
    on the MLP's, each before the residual adds it), or the identity.  The
    bug sandwich_norms_missing leaves them out, as a Llama-shaped block does."""
    if not cfg.get("sandwich_norm", False) or BUG == "sandwich_norms_missing":
        return (lambda t: t), (lambda t: t)
    return (lambda t: norm(cfg, t, p("post_attn_norm.weight"), p("post_attn_norm.bias"), eps),
            lambda t: norm(cfg, t, p("post_ffn_norm.weight"), p("post_ffn_norm.bias"), eps))


def first_attn_norm(eps):
    """ModernBERT's layer-0 attention norm: nn.Identity().  The bug
    first_prenorm_applied gives layer 0 a fresh LayerNorm (weight 1, no
    bias), as a port that builds every layer alike does."""
    if BUG == "first_prenorm_applied":
        return lambda t: layer_norm(t, torch.ones(t.shape[-1], dtype=t.dtype), None, eps)
    return lambda t: t


def needs_manual(case):
    """The torch operations rather than PyTorch's modules: a case the modules
    cannot express, an injected bug, or the emulation of float16/bfloat16 (a
    module is one fused operation, its steps not rounded)."""
    return not case.golden.fits(NN_MODULES)[0] or BUG is not None or EMU is not None


# ---- components ----------------------------------------------------------------

def run_encoder(case):
    if torch_families.handles(case.cfg):
        return torch_families.run(case, BUG, sys.modules[__name__])
    cfg, dt = case.cfg, case.dt
    D, H, N = cfg["d_model"], cfg["n_heads"], cfg["n_layers"]
    eps, pre = cfg["layer_norm_eps"], cfg["norm"] == "pre"
    out = {}

    # embedding and additive PE
    if cfg["vocab_size"] > 0:
        tokens = case.i("in.tokens")
        pidx = cfg["padding_idx"] if cfg["padding_idx"] >= 0 else None
        emb = nn.Embedding(cfg["vocab_size"], D, padding_idx=pidx, dtype=dt)
        emb.load_state_dict({"weight": case.t("embedding.weight")})
        # scale_embedding false (T5): no sqrt(D); the bugs embedding_unscaled
        # and embedding_scaled drop it or add it
        scaled = cfg.get("scale_embedding", True)
        scaled = False if BUG == "embedding_unscaled" else True if BUG == "embedding_scaled" else scaled
        x = emb(tokens) * (normalizer(cfg, D) if scaled else 1.0)
        if cfg.get("type_vocab_size", 0) > 0:  # NomicBERT's token_type_embeddings: word + type, then positions
            types = torch_families.token_types(case, *tokens.shape, BUG)
            x = x + case.t("token_type_embedding.weight")[types]
    else:
        x = case.t("in.x")
    B, L, _ = x.shape
    positions = case.positions(L)
    if cfg["positional"] == "sinusoidal":
        x = x + sinusoidal_pe(positions, D, dt)
    elif cfg["positional"] == "learned":
        x = x + case.t("pos_embedding.weight")[positions]
    if cfg.get("embedding_norm", False) and BUG != "embedding_norm_missing":  # ModernBERT's embeddings.norm
        x = norm(cfg, x, case.t("embedding_norm.weight"),
                 case.t("embedding_norm.bias") if "embedding_norm.bias" in case.params else None,
                 cfg.get("embedding_norm_eps", eps))
    out["embed"] = x

    state = {k: case.t(k) for k in case.params if k.startswith(("layers.", "norm."))}
    pad = case.padding()

    if not needs_manual(case):
        layer = nn.TransformerEncoderLayer(D, H, cfg["d_ff"], dropout=0.0,
                                           activation=activation_fn(cfg["activation"]) if cfg["activation"] in ("gelu_tanh", "quick_gelu") else cfg["activation"],
                                           layer_norm_eps=eps, batch_first=True, norm_first=pre, dtype=dt)
        final = nn.LayerNorm(D, eps=eps, dtype=dt) if cfg["final_norm"] else None
        enc = nn.TransformerEncoder(layer, N, norm=final, enable_nested_tensor=False)
        enc.load_state_dict(state, strict=True)
        enc.eval()
        mask = score_bias(case, B, H, L, positions)
        # forward hooks record every step under refenc's names; gradients
        # stay enabled so that PyTorch takes the module path (its fused
        # inference path calls no submodule, and no hook would fire)
        with refenc.capture(enc, refenc.encoder_steps(enc)) as cap:
            y = enc(x, mask=mask, src_key_padding_mask=pad)
        if cap.missing():
            raise RuntimeError(f"{case.name}: no forward hook recorded {', '.join(cap.missing())}")
        out.update(cap.outputs)
        out["output"] = y
        return out

    # RoPE, temperature or a bug: the layers from torch operations
    act = activation_fn(cfg["activation"])
    if BUG == "pre_post_swapped":
        pre = not pre
    for i in range(N):
        p = lambda n: state.get(f"layers.{i}.{n}")  # None: a bias the config leaves out
        ln1 = lambda t: norm(cfg, t, p("norm1.weight"), p("norm1.bias"), eps)
        if i == 0 and cfg.get("skip_first_prenorm", False):  # ModernBERT: attn_norm = nn.Identity()
            ln1 = first_attn_norm(eps)
        ln2 = lambda t: norm(cfg, t, p("norm2.weight"), p("norm2.bias"), eps)
        post_attn, post_ffn = sandwich_norms(cfg, p, eps)
        # the bug: Llama's name for its pre-FFN norm read on a Gemma 2/3 checkpoint
        if BUG == "post_attention_norm_as_pre_ffn" and cfg.get("sandwich_norm", False):
            ln2 = lambda t: norm(cfg, t, p("post_attn_norm.weight"), p("post_attn_norm.bias"), eps)
        qk = (p("self_attn.q_norm.weight"), p("self_attn.k_norm.weight")) if cfg.get("qk_norm") == "rms" else None
        attn = lambda t: manual_attention(case, t, p("self_attn.in_proj_weight"), p("self_attn.in_proj_bias"),
                                          p("self_attn.out_proj.weight"), p("self_attn.out_proj.bias"), positions,
                                          layer_cfg(cfg, i), qk, i)
        ffn = lambda t: ffn_block(cfg, t, p("linear1.weight"), p("linear1.bias"), p("linear2.weight"),
                                  p("linear2.bias"), act)
        keep = 0.0 if BUG == "ffn_residual_dropped" else 1.0
        if pre:
            n1 = ln1(x); a, w = attn(n1); a = post_attn(a); h = x + a
            n2 = ln2(h); f = post_ffn(ffn(n2)); x = keep * h + f
        else:
            a, w = attn(x); n1 = ln1(x + a)
            f = ffn(n1); n2 = ln2(keep * n1 + f); x = n2
        out.update({f"layers.{i}.norm1": n1, f"layers.{i}.self_attn.weights": w,
                    f"layers.{i}.self_attn": a, f"layers.{i}.norm2": n2,
                    f"layers.{i}.ffn": f, f"layers.{i}.output": x})
    if cfg["final_norm"] and BUG != "missing_final_norm":
        x = norm(cfg, x, state["norm.weight"], state.get("norm.bias"), eps)
        out["norm"] = x
    out["output"] = x
    return out


def run_attention(case):
    cfg = case.cfg
    x = case.t("in.x")
    B, L, D = x.shape
    H = cfg["n_heads"]
    positions = case.positions(L)
    W_in, b_in = case.t("in_proj_weight"), case.t_or_none("in_proj_bias")  # None: linear_bias false
    W_o, b_o = case.t("out_proj.weight"), case.t_or_none("out_proj.bias")
    if needs_manual(case):
        qk = (case.t("q_norm.weight"), case.t("k_norm.weight")) if cfg.get("qk_norm") == "rms" else None
        y, w = manual_attention(case, x, W_in, b_in, W_o, b_o, positions, qk=qk)
        return {"weights": w, "output": y}
    mha = nn.MultiheadAttention(D, H, dropout=0.0, batch_first=True, dtype=case.dt)
    mha.load_state_dict({"in_proj_weight": W_in, "in_proj_bias": b_in,
                         "out_proj.weight": W_o, "out_proj.bias": b_o})
    mha.eval()
    y, w = mha(x, x, x, key_padding_mask=case.padding(), need_weights=True,
               attn_mask=score_bias(case, B, H, L, positions), average_attn_weights=False)
    return {"weights": w, "output": y}


def run_ffn(case):
    cfg = case.cfg
    x = case.t("in.x")
    if needs_manual(case):  # the gated FFN, bias-free linear maps, a bug or the emulation
        return {"output": ffn_block(cfg, x, case.t("linear1.weight"), case.t_or_none("linear1.bias"),
                                    case.t("linear2.weight"), case.t_or_none("linear2.bias"),
                                    activation_fn(cfg["activation"]))}
    l1 = nn.Linear(cfg["d_model"], cfg["d_ff"], dtype=case.dt)
    l2 = nn.Linear(cfg["d_ff"], cfg["d_model"], dtype=case.dt)
    l1.load_state_dict({"weight": case.t("linear1.weight"), "bias": case.t("linear1.bias")})
    l2.load_state_dict({"weight": case.t("linear2.weight"), "bias": case.t("linear2.bias")})
    return {"output": l2(activation_fn(cfg["activation"])(l1(x)))}


def run_layernorm(case):
    cfg = case.cfg
    if BUG is not None or not case.golden.fits(NN_MODULES)[0]:  # a bug, RMSNorm, a bias-free LayerNorm
        return {"output": norm(cfg, case.t("in.x"), case.t("weight"), case.t_or_none("bias"),
                               cfg["layer_norm_eps"])}
    ln = nn.LayerNorm(cfg["d_model"], eps=cfg["layer_norm_eps"], dtype=case.dt)
    ln.load_state_dict({"weight": case.t("weight"), "bias": case.t("bias")})
    return {"output": ln(case.t("in.x"))}


def run_softmax(case):
    dim = 0 if BUG == "softmax_over_queries" else -1
    return {"output": torch.softmax(case.t("in.x") / case.cfg["temperature"], dim=dim)}


def run_activation(case):
    return {"output": activation_fn(case.cfg["activation"])(case.t("in.x"))}


def run_sinusoidal_pe(case):
    return {"output": sinusoidal_pe(case.i("in.positions"), case.cfg["d_model"], case.dt)}


def run_rope(case):
    cfg = case.cfg
    return {"output": rope(case.t("in.x"), case.i("in.positions"), cfg["rope_base"], cfg["rope_layout"], cfg)}


def run_alibi(case):
    H = case.cfg["n_heads"]
    return {"slopes": torch.tensor(alibi_slopes(H), dtype=case.dt),
            "bias": alibi_bias(H, case.i("in.positions"), case.dt)}


COMPONENTS = {"encoder": run_encoder, "attention": run_attention, "ffn": run_ffn,
              "layernorm": run_layernorm, "softmax": run_softmax, "activation": run_activation,
              "sinusoidal_pe": run_sinusoidal_pe, "rope": run_rope, "alibi": run_alibi}


DTYPES = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
          "bfloat16": torch.bfloat16}
DT = torch.float64  # the compute dtype of the mode configure() set


def pooled(case, y):
    """The pooled sentence embedding (B, D) of the final output y (B, L, D),
    as sentence-transformers' Pooling and Normalize modules compute it
    (docs/families.md, "Pooling"): mean = sum(y * mask) / sum(mask) over the
    non-padding tokens; cls = y[:, 0]; last_token = the row of each item's
    last non-padding token (right padding: sum(mask) - 1; left padding: L - 1,
    Qwen3-Embedding's last_token_pool); then F.normalize(p=2, eps=1e-12) when
    pooling_normalize.  The bugs: mean_counts_padding and
    last_token_ignores_padding pool without the mask (the mean over L, the
    token at L - 1); pooling_not_normalized leaves the Normalize out."""
    cfg = case.cfg
    B, L, _ = y.shape
    pad = case.i("in.key_padding_mask").bool() if case.has("in.key_padding_mask") else \
        torch.zeros(B, L, dtype=torch.bool)
    if (BUG, cfg["pooling"]) in (("mean_counts_padding", "mean"), ("last_token_ignores_padding", "last_token")):
        pad = torch.zeros_like(pad)  # each bug in the pooling it belongs to
    if cfg["pooling"] == "mean":
        keep = (~pad).to(y.dtype).unsqueeze(-1)
        e = (y * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1e-9)
    elif cfg["pooling"] == "cls":
        e = y[:, 0]
    else:  # the last True of ~pad: L - 1 minus the first True of the flipped row
        last = L - 1 - torch.argmax(torch.flip(~pad, [1]).to(torch.int64), dim=1)
        e = y[torch.arange(B), last]
    if cfg.get("pooling_normalize", True) and BUG != "pooling_not_normalized":
        e = torch.nn.functional.normalize(e, p=2.0, dim=1, eps=1e-12)
    return e


def with_embedding(case, outs):
    """outs with "embedding" when the case pools (out.embedding)."""
    if case.component == "encoder" and case.cfg.get("pooling") not in (None, "none"):
        outs["embedding"] = pooled(case, outs["output"])
    return outs


def configure(dtype="float64", accumulate="float32", native=False, bug=None):
    """Sets the peer's mode: --dtype, --accumulate, --native, --bug."""
    global BUG, EMU, DT
    BUG, EMU, DT = bug, None, DTYPES[dtype]
    if DT in (torch.float16, torch.bfloat16) and not native:
        EMU = Emulation(DT, pure=accumulate == "dtype")
        DT = torch.float32
    torch.set_num_threads(1)  # one thread: the same result on every run


def selected_rows(case, outs):
    """A case with in.rows (the last layer's selected query rows, docs/golden-format.md): the
    full sequence's outputs of the last layer, the final norm and the output sliced to those
    rows, as any implementation compares them: y[:, rows], weights[:, :, rows].  The Llama
    families' modules (torch_families.LlamaModel) compute those rows only, and are left as they are."""
    if not case.has("in.rows") or case.cfg.get("family") in torch_families.LLAMA_FAMILIES:
        return outs
    rows, last = case.i("in.rows"), f"layers.{case.cfg['n_layers'] - 1}."
    for step, t in outs.items():
        if step in ("norm", "output") or step.startswith(last):
            outs[step] = t[:, :, rows] if step.endswith("self_attn.weights") else t[:, rows]
    return outs


def compute(golden):
    """The outputs of a refenc.Case in the configured mode, {step: tensor}
    under refenc's step names ("output", "layers.0.norm1", ...); the steps
    the case does not hold are left out."""
    case = Case(golden, DT)
    if EMU is not None:
        with EMU:
            outs = with_embedding(case, COMPONENTS[case.component](case))
    else:
        outs = with_embedding(case, COMPONENTS[case.component](case))
    outs = selected_rows(case, outs)
    return {step: t.detach() for step, t in outs.items() if refenc.golden.OUT + step in golden.expected}


def describe(args):
    """'float32', 'bfloat16 (float32 accumulation)', 'bfloat16 (PyTorch's kernels)', ..."""
    if args.dtype in ("float64", "float32"):
        what = args.dtype
    elif args.native:
        what = f"{args.dtype} (PyTorch's own kernels)"
    else:
        what = f"{args.dtype} ({'float32' if args.accumulate == 'float32' else args.dtype} accumulation)"
    return what + (f" with bug {BUG}" if BUG else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--golden", required=True, help="the golden directory (manifest.json, cases/)")
    ap.add_argument("--out", required=True, help="directory for the results files")
    ap.add_argument("--dtype", choices=list(DTYPES), default="float64")
    ap.add_argument("--accumulate", choices=["float32", "dtype"], default="float32",
                    help="float16/bfloat16: accumulate in float32 (default) or in the dtype itself")
    ap.add_argument("--native", action="store_true",
                    help="bfloat16: PyTorch's own bfloat16 CPU kernels and modules instead")
    ap.add_argument("--case", action="append", metavar="GLOB[,GLOB...]",
                    help="only cases matching a shell pattern; repeatable, commas separate several, "
                         "a case is taken when any matches, each must match some case (as refenc certify's)")
    ap.add_argument("--bug", choices=KNOWN_BUGS + UNKNOWN_BUGS,
                    help="inject a bug into this peer's computation: one of refenc's known variants "
                         "(docs/certify.md), or one it does not know")
    ap.add_argument("--certify", action="store_true",
                    help="then certify the results with refenc certify ($REFENC_CLI, else the tree's "
                         "build/refenc): print what failed; exit 1 if a case failed")
    args = ap.parse_args()
    if args.native and args.dtype != "bfloat16":
        ap.error("--native goes with --dtype bfloat16 (PyTorch has no float16 CPU kernels)")
    if args.accumulate == "dtype" and (args.native or args.dtype in ("float64", "float32")):
        ap.error("--accumulate dtype goes with --dtype float16 or bfloat16, without --native")
    configure(args.dtype, args.accumulate, args.native, args.bug)
    implementation = {"implementation": f"torch {torch.__version__} {describe(args)}"}
    try:
        cases = refenc.all_cases(args.golden, args.case or "*", require_match=args.case is not None)
    except (OSError, ValueError, refenc.FormatError) as e:
        print(f"torch_peer: {e}", file=sys.stderr)
        return 2
    for case in cases:
        # results in the dtype computed: F64, F32, or F16/BF16 (exact: the
        # emulation's float32 values are values of the dtype)
        case.write_results(args.out, compute(case), dtype=args.dtype, metadata=implementation)
    print(f"torch_peer: {len(cases)} case(s) computed in {describe(args)} into {args.out}")
    if not cases:
        return 2
    if not args.certify:
        return 0
    cert = refenc.certify(args.out, [c.name for c in cases], golden=args.golden)
    s = cert.summary
    print(f"refenc certify: {s['cases']} case(s): {s['passed']} PASS, {s['failed']} FAIL, {s['xfail']} XFAIL, "
          f"{s['xpass']} XPASS, {s['skipped']} SKIP")
    if not cert.passed:
        print(cert.explain())
    return 0 if cert.passed else 1


if __name__ == "__main__":
    sys.exit(main())
