#!/usr/bin/python3
"""Builds an ONNX model of every refenc golden case, for ONNX Runtime as a peer.

Each model is a plain float32 ONNX graph (opset 17) written from the formulas
of docs/architecture.md: MatMul and Add for the linear maps, ReduceMean, Sub,
Pow, Sqrt and Div for LayerNorm, Erf or Tanh for GELU, Softmax, Where for the
boolean masks, Sin and Cos for the positions.  The case's parameters are the
model's initializers (weights stored transposed, as torch.onnx.export stores
nn.Linear); its inputs (in.x or in.tokens, in.positions, in.key_padding_mask,
in.attn_mask) are the model's inputs, under the golden names; its outputs are
graph outputs under refenc's out.* names.  No arithmetic of the case is done
here: everything from the inputs on is computed by ONNX Runtime.

Two models per case:
    CASE.all.onnx     every output the case stores (out.embed, every layer's
                      steps, ...): with graph optimisation off, the certifier
                      sees where ONNX Runtime first diverges;
    CASE.final.onnx   the required outputs only: nothing stops ONNX Runtime's
                      optimiser from fusing LayerNorm, GELU and the linear maps into
                      its own kernels (a graph output inside a pattern keeps
                      the pattern from being fused: with every output
                      exposed, a third of the SkipLayerNormalization
                      fusions do not happen).

    build_models.py --golden golden --out build/ort/models [--case GLOB]

It also writes OUT/models.json: for each case, its models, or the reason it
is not supported (a config key or value this builder does not model).  A new
convention (a family's embedding LayerNorm, quick GELU, ...) is taught by
adding its key to CONFIG_SUPPORT and building it in the component functions
(the families' keys are: scale_embedding, token types, RoBERTa's positions,
the embedding LayerNorm, quick GELU, the finfo.min mask value).

Exit status: 0, or 2 on a malformed golden directory (the message names the
file and the tensor).
"""
import argparse
import fnmatch
import json
import math
import os
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17          # the highest ONNX opset Debian 12's python3-onnx (1.12) knows
IR_VERSION = 8

# The config keys the models implement, with the values they implement
# (None: any value).  A case whose config has another key, or another value,
# is reported unsupported with that key named.
CONFIG_SUPPORT = {
    "d_model": None, "n_heads": None, "d_ff": None, "n_layers": None,
    "norm": {"pre", "post"}, "final_norm": None,
    "activation": {"relu", "gelu", "gelu_tanh", "quick_gelu", "silu"},
    "layer_norm_eps": None,
    "positional": {"none", "sinusoidal", "learned", "rope", "alibi"},
    "rope_layout": {"half", "interleaved"}, "rope_base": None, "max_len": None,
    "temperature": None, "causal": None, "vocab_size": None, "padding_idx": None,
    # the encoder families (docs/families.md)
    "family": None, "scale_embedding": None, "type_vocab_size": None, "embedding_norm": None,
    "embedding_norm_eps": None, "position_ids": {"index", "roberta"}, "mask_value": {"-inf", "finfo_min"},
    # the modern blocks (docs/architecture.md): RMSNorm (Gemma's 1 + w), the
    # gated FFN and either half as its gate, bias-free norms and linear maps
    "norm_type": {"layernorm", "rmsnorm"}, "rmsnorm_offset": None, "ffn_type": {"mlp", "glu"},
    "glu_gate": {"first", "second"}, "norm_bias": None, "linear_bias": None,
    "linear1_bias": None,  # Jina-v2's and GTE's linear1 without bias (the case stores none)
    # ModernBERT's layer 0 without its attention norm (attn_norm = nn.Identity())
    "skip_first_prenorm": None,
    # Gemma 2/3's norms of the sublayers' outputs (post_attention, post_feedforward)
    "sandwich_norm": None,
    # grouped-query attention and the head width (docs/families.md)
    "n_kv_heads": None, "head_dim": None,
    # Gemma 2/3's attention (docs/families.md): the score scale and softcap
    "attn_logit_softcapping": None, "query_pre_attn_scalar": None,
    # attention windows (docs/families.md): Mistral's causal, ModernBERT's symmetric
    "sliding_window": None, "local_attention": None,
    # local and global layers (docs/families.md): ModernBERT's pattern, a base per layer type
    "global_attn_every_n_layers": None, "local_rope_theta": None, "global_rope_theta": None,
    # Gemma 3's pattern: layer i global iff (i + 1) % p == 0, local layers unscaled
    "sliding_window_pattern": None,
    # Gemma's normaliser: sqrt(D) rounded to the model's dtype
    "embedding_normalizer_dtype": None,
    # RoPE scaling (docs/rope-scaling.md): HF's frequency tables, every type
    "rope_scaling": None, "partial_rotary_factor": None,
    # Qwen's attention (docs/families.md): Qwen2's q, k, v bias, Qwen3's per-head q/k RMSNorm
    "qkv_bias": None, "qk_norm": {"none", "rms"},
    # the pooled embedding out.embedding (docs/families.md, "Pooling")
    "pooling": {"none", "mean", "cls", "last_token"}, "pooling_normalize": None,
    # T5's relative position bias (docs/families.md): layer 0's table in every layer
    "relative_attention_num_buckets": None, "relative_attention_max_distance": None,
}


# Known bug variants of refenc (docs/diagnosis.md) that --bug builds into the
# models, to show that the certifier names them through ONNX Runtime's own
# kernels too (scripts/certify-ort.sh).
BUGS = ("layernorm_eps_x10", "unbiased_variance", "gelu_tanh_for_exact", "gqa_tiled", "softcap_after_mask",
        "window_off_by_one", "t5_bucket_not_clamped", "ntk_scaling_ignored")
BUG = None


class Unsupported(Exception):
    """The case uses something the models do not implement (not an error)."""


class BadGolden(Exception):
    """A golden file that cannot be read as docs/golden-format.md says."""


# ---- reading a golden case (docs/golden-format.md, "Reading a file without refenc")

ST_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2",
             "I64": "<i8", "U8": "u1", "BOOL": "u1"}


def read_case(path):
    """-> (metadata dict, {name: ndarray}); BF16 as float32, BOOL as bool."""
    try:
        with open(path, "rb") as f:
            buf = f.read()
    except OSError as e:
        raise BadGolden(f"{path}: cannot read: {e.strerror}") from None
    if len(buf) < 8:
        raise BadGolden(f"{path}: file is {len(buf)} bytes, too short for the 8-byte header length at byte 0")
    (n,) = struct.unpack("<Q", buf[:8])
    if n > len(buf) - 8:
        raise BadGolden(f"{path}: header length {n} at byte 0 exceeds the {len(buf) - 8} bytes that follow it")
    try:
        header = json.loads(buf[8:8 + n].decode("utf-8"))
    except ValueError as e:
        raise BadGolden(f"{path}: header (bytes 8 to {8 + n}) is not UTF-8 JSON: {e}") from None
    if not isinstance(header, dict):
        raise BadGolden(f"{path}: header (bytes 8 to {8 + n}) is not a JSON object")
    meta = header.pop("__metadata__", {})
    data = buf[8 + n:]
    tensors = {}
    for name, e in header.items():
        try:
            b, end = e["data_offsets"]
            a = np.frombuffer(data[b:end], dtype=ST_DTYPES[e["dtype"]]).reshape(e["shape"])
        except (KeyError, TypeError, ValueError) as err:
            raise BadGolden(f"{path}: tensor '{name}': entry {json.dumps(e)} does not describe its data "
                            f"in the {len(data)}-byte data buffer at byte {8 + n} ({err})") from None
        if e["dtype"] == "BF16":
            a = (a.astype("<u4") << 16).view("<f4")
        tensors[name] = a.astype(bool) if e["dtype"] == "BOOL" else a
    for key in ("case", "component", "config", "outputs"):
        if key not in meta:
            raise BadGolden(f"{path}: metadata has no '{key}'")
    return meta, tensors


# ---- an ONNX graph under construction -----------------------------------------

class Graph:
    """Nodes, initializers, inputs and outputs of one ONNX graph; every op
    returns the name of its (first) output."""

    def __init__(self, tensors, path):
        self.tensors, self.path = tensors, path
        self.nodes, self.inits, self.inputs, self.outputs = [], [], [], []
        self.declared = set()
        self.n = 0

    def _name(self, hint):
        self.n += 1
        return f"{hint}_{self.n}"

    def op(self, op_type, *inputs, **attrs):
        out = self._name(op_type)
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=out, **attrs))
        return out

    def const(self, value, dtype=np.float32, hint="c"):
        """An initializer holding value (rounded once to dtype)."""
        name = self._name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def param(self, name, transpose=False):
        """A parameter of the case as a float32 initializer (exact: the golden
        stores F32); transpose for nn.Linear's (out, in) weights."""
        a = self.golden(name).astype(np.float32)
        return self.const(a.T if transpose else a, hint=name)

    def golden(self, name):
        if name not in self.tensors:
            raise BadGolden(f"{self.path}: tensor '{name}' is missing")
        return self.tensors[name]

    def input(self, name):
        """A golden input as a model input of its own dtype and shape."""
        a = self.golden(name)
        if name not in self.declared:
            elem = {np.dtype(bool): TensorProto.BOOL, np.dtype("<i8"): TensorProto.INT64}.get(
                a.dtype, TensorProto.FLOAT)
            self.inputs.append(helper.make_tensor_value_info(name, elem, list(a.shape)))
            self.declared.add(name)
        return name

    def output(self, value, name):
        """value as the graph output `name` (an Identity gives it its name),
        of the golden output's shape."""
        self.nodes.append(helper.make_node("Identity", [value], [name], name=f"output {name}"))
        shape = list(self.golden(name).shape)
        self.outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))

    def model(self, case):
        graph = helper.make_graph(self.nodes, case, self.inputs, self.outputs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="refenc scripts/peers/ort/build_models.py")
        m.ir_version = IR_VERSION
        onnx.checker.check_model(m)
        return m


# ---- the encoder's steps as ONNX ops (docs/architecture.md) ----------------------

def linear(g, x, prefix, W=None, b=None):
    """x Wᵀ + b, W (out, in) as nn.Linear stores it; a bias-free linear map
    (linear_bias false: the case stores no bias) is the MatMul alone."""
    W = W if W is not None else g.param(f"{prefix}weight", transpose=True)
    if b is None and f"{prefix}bias" in g.tensors:
        b = g.param(f"{prefix}bias")
    y = g.op("MatMul", x, W)
    return y if b is None else g.op("Add", y, b)


def rms_norm(g, x, prefix, eps, offset):
    """x / sqrt(mean(x²) + ε) · s over the last axis, s = w, or (1 + w) formed
    first (Gemma's GemmaRMSNorm); no mean, no bias: the form HF's
    LlamaRMSNorm / T5LayerNorm export to."""
    ms = g.op("ReduceMean", g.op("Mul", x, x), axes=[-1], keepdims=1)
    eps = eps * 10 if BUG == "layernorm_eps_x10" else eps
    y = g.op("Div", x, g.op("Sqrt", g.op("Add", ms, g.const(eps))))
    w = g.param(f"{prefix}weight")
    return g.op("Mul", y, g.op("Add", w, g.const(1.0)) if offset else w)


def norm(g, x, prefix, eps, cfg):
    """The configured norm (norm_type): LayerNorm or RMSNorm."""
    if cfg.get("norm_type", "layernorm") == "rmsnorm":
        return rms_norm(g, x, prefix, eps, cfg.get("rmsnorm_offset", False))
    return layer_norm(g, x, prefix, eps)


def layer_norm(g, x, prefix, eps):
    """(x − μ) / sqrt(σ² + ε) · γ + β over the last axis, σ² biased: the
    two-pass form torch.onnx.export writes for nn.LayerNorm; β absent
    (norm_bias false) for a bias-free LayerNorm."""
    mu = g.op("ReduceMean", x, axes=[-1], keepdims=1)
    d = g.op("Sub", x, mu)
    if BUG == "unbiased_variance":   # Σ(x − μ)² / (D − 1)
        D = g.golden(f"{prefix}weight").shape[0]
        var = g.op("Div", g.op("ReduceSum", g.op("Pow", d, g.const(2.0)), g.const([-1], np.int64), keepdims=1),
                   g.const(D - 1))
    else:
        var = g.op("ReduceMean", g.op("Pow", d, g.const(2.0)), axes=[-1], keepdims=1)
    eps = eps * 10 if BUG == "layernorm_eps_x10" else eps
    y = g.op("Mul", g.op("Div", d, g.op("Sqrt", g.op("Add", var, g.const(eps)))), g.param(f"{prefix}weight"))
    return g.op("Add", y, g.param(f"{prefix}bias")) if f"{prefix}bias" in g.tensors else y


def activation(g, x, kind):
    if BUG == "gelu_tanh_for_exact" and kind == "gelu":
        kind = "gelu_tanh"
    if kind == "relu":
        return g.op("Relu", x)
    if kind == "gelu":        # x · ½(1 + erf(x/√2))
        t = g.op("Add", g.op("Erf", g.op("Div", x, g.const(math.sqrt(2.0)))), g.const(1.0))
        return g.op("Mul", g.op("Mul", x, t), g.const(0.5))
    if kind == "gelu_tanh":   # x · ½(1 + tanh(√(2/π)(x + 0.044715 x³)))
        inner = g.op("Add", x, g.op("Mul", g.op("Pow", x, g.const(3.0)), g.const(0.044715)))
        t = g.op("Add", g.op("Tanh", g.op("Mul", inner, g.const(math.sqrt(2.0 / math.pi)))), g.const(1.0))
        return g.op("Mul", g.op("Mul", x, g.const(0.5)), t)
    if kind == "quick_gelu":  # x · σ(1.702 x), CLIP's
        return g.op("Mul", x, g.op("Sigmoid", g.op("Mul", x, g.const(1.702))))
    if kind == "silu":        # x · σ(x), SwiGLU's gate
        return g.op("Mul", x, g.op("Sigmoid", x))
    raise Unsupported(f"activation '{kind}'")


def ffn(g, x, prefix, cfg):
    """The MLP act(x W1ᵀ + b1) W2ᵀ + b2, or the gated FFN (ffn_type glu):
    h = act(gate) · up with [gate | up] = x W1ᵀ + b1 split in halves, the
    gate the first half (glu_gate first) or the second, then h W2ᵀ + b2."""
    h = linear(g, x, f"{prefix}linear1.")
    if cfg.get("ffn_type", "mlp") == "glu":
        F = cfg["d_ff"]
        axis = g.const([-1], np.int64)
        first = g.op("Slice", h, g.const([0], np.int64), g.const([F], np.int64), axis)
        second = g.op("Slice", h, g.const([F], np.int64), g.const([2 * F], np.int64), axis)
        gate, up = (first, second) if cfg.get("glu_gate", "first") == "first" else (second, first)
        h = g.op("Mul", activation(g, gate, cfg["activation"]), up)
    else:
        h = activation(g, h, cfg["activation"])
    return linear(g, h, f"{prefix}linear2.")


def positions_f32(g, L, cfg):
    """in.positions (L) as float32 (exact up to 2^24), or 0 … L−1; None when
    the positional scheme does not use positions."""
    if cfg["positional"] == "none":
        return None
    if "in.positions" in g.tensors:
        return g.op("Cast", g.input("in.positions"), to=TensorProto.FLOAT)
    return g.const(np.arange(L))


def sinusoidal(g, pos, D):
    """(L, D): PE[p, 2i] = sin(p·ω_i), PE[p, 2i+1] = cos(p·ω_i), ω_i = 10000^(−2i/D)."""
    omega = g.op("Pow", g.const(10000.0), g.const(-np.arange(0, D, 2) / D))
    angle = g.op("Mul", g.op("Unsqueeze", pos, g.const([1], np.int64)), omega)      # (L, D/2)
    sin = g.op("Unsqueeze", g.op("Sin", angle), g.const([-1], np.int64))
    cos = g.op("Unsqueeze", g.op("Cos", angle), g.const([-1], np.int64))
    return g.op("Reshape", g.op("Concat", sin, cos, axis=-1), g.const([-1, D], np.int64))


def rope_tables(cfg, Dh, S):
    """theta (R/2,) as float32, the attention factor f and R, for cfg's
    rope_base, rope_scaling and partial_rotary_factor at the sequence length
    S = max(position ids) + 1: Hugging Face's modeling_rope_utils.py formulas
    (scripts/peers/torch_rope_scaling.py, in float32 as HF forms its tables;
    ONNX Runtime then runs the angle, cos, sin and the rotation)."""
    import torch  # only for the frequency table, computed once per model as HF does
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import torch_rope_scaling
    rs = cfg.get("rope_scaling")
    R = int(Dh * cfg.get("partial_rotary_factor", 1.0))
    # BUG: the table's own variants (ntk_scaling_ignored: GTE's ntk never read)
    theta = torch_rope_scaling.inv_freq(rs, float(cfg["rope_base"]), R, S, torch.float32, BUG)
    return theta.numpy().astype(np.float32), torch_rope_scaling.attention_factor(rs or {}), R


def rope(g, x, pos, Dh, cfg):
    """x (…, L, Dh) with pair j of the first R coordinates rotated by pos·θ_j
    (θ_j = base^(−2j/R), or scaled by cfg's rope_scaling), cos and sin times
    the attention factor, the other Dh − R coordinates passed through:
    pairs (j, j + R/2) for 'half' (rotate_half), (2j, 2j+1) for 'interleaved'."""
    layout = cfg["rope_layout"]
    if layout not in ("half", "interleaved"):
        raise Unsupported(f"rope_layout '{layout}'")
    S = int(g.golden("in.positions").max()) + 1 if "in.positions" in g.tensors else None
    if S is None:
        S = g.golden("in.x").shape[-2] if "in.x" in g.tensors else g.golden("in.tokens").shape[-1]
    theta, f, R = rope_tables(cfg, Dh, S)
    axis = g.const([-1], np.int64)
    x_pass = None
    if R < Dh:
        x_pass = g.op("Slice", x, g.const([R], np.int64), g.const([Dh], np.int64), axis)
        x = g.op("Slice", x, g.const([0], np.int64), g.const([R], np.int64), axis)
    angle = g.op("Mul", g.op("Unsqueeze", pos, g.const([1], np.int64)), g.const(theta))   # (L, R/2)
    cos, sin = g.op("Cos", angle), g.op("Sin", angle)
    if f != 1.0:
        cos, sin = g.op("Mul", cos, g.const(np.float32(f))), g.op("Mul", sin, g.const(np.float32(f)))
    if layout == "half":
        cos, sin = g.op("Concat", cos, cos, axis=-1), g.op("Concat", sin, sin, axis=-1)  # (L, R)
        x1 = g.op("Slice", x, g.const([0], np.int64), g.const([R // 2], np.int64), axis)
        x2 = g.op("Slice", x, g.const([R // 2], np.int64), g.const([R], np.int64), axis)
        rotated = g.op("Concat", g.op("Neg", x2), x1, axis=-1)
        y = g.op("Add", g.op("Mul", x, cos), g.op("Mul", rotated, sin))
    else:
        two = g.const([2], np.int64)
        x1 = g.op("Slice", x, g.const([0], np.int64), g.const([R], np.int64), axis, two)   # x[..., 0::2]
        x2 = g.op("Slice", x, g.const([1], np.int64), g.const([R], np.int64), axis, two)   # x[..., 1::2]
        y1 = g.op("Sub", g.op("Mul", x1, cos), g.op("Mul", x2, sin))
        y2 = g.op("Add", g.op("Mul", x1, sin), g.op("Mul", x2, cos))
        pairs = g.op("Concat", g.op("Unsqueeze", y1, axis), g.op("Unsqueeze", y2, axis), axis=-1)
        y = g.op("Reshape", pairs, g.op("Shape", x))
    return y if x_pass is None else g.op("Concat", y, x_pass, axis=-1)


def alibi_exponents(H):
    """log2 of the ALiBi slopes: the closest power of two C ≤ H gives
    −8(h+1)/C, h < C; the rest are the odd-numbered ones for 2C heads."""
    C = 2 ** int(math.floor(math.log2(H)))
    e = [-8.0 * (h + 1) / C for h in range(C)]
    return e + [-8.0 * (2 * k + 1) / (2 * C) for k in range(H - C)]


def alibi(g, pos, H):
    """(slopes (H), bias (H, L, L) = −m_h·|p_i − p_j|)."""
    slopes = g.op("Pow", g.const(2.0), g.const(alibi_exponents(H)))
    dist = g.op("Abs", g.op("Sub", g.op("Unsqueeze", pos, g.const([1], np.int64)),
                            g.op("Unsqueeze", pos, g.const([0], np.int64))))            # (L, L)
    m = g.op("Reshape", slopes, g.const([H, 1, 1], np.int64))
    return slopes, g.op("Neg", g.op("Mul", m, dist))


def t5_bias(g, cfg, L):
    """T5's position_bias (H, L, L) as an exported HF T5 computes it
    (T5Attention._relative_position_bucket with bidirectional=True, then
    compute_bias): relative = memory - query positions (int64), half the
    buckets per sign, offsets below max_exact = nb // 4 exact, larger ones
    max_exact + int(log(r / max_exact) / log(md / max_exact) (nb/2 -
    max_exact)) in float32, clamped to nb/2 - 1; then layers.0's table (nb,
    H) gathered and transposed.  Built once; every layer adds it."""
    nb, md = cfg["relative_attention_num_buckets"], cfg.get("relative_attention_max_distance", 128)
    half = nb // 2
    me = half // 2
    pos = g.input("in.positions") if "in.positions" in g.tensors else g.const(np.arange(L), np.int64)
    rel = g.op("Sub", g.op("Unsqueeze", pos, g.const([0], np.int64)),
               g.op("Unsqueeze", pos, g.const([1], np.int64)))                       # (L, L): j - i
    sign = g.op("Mul", g.op("Cast", g.op("Greater", rel, g.const(0, np.int64)), to=TensorProto.INT64),
                g.const(half, np.int64))
    r = g.op("Abs", rel)
    rf = g.op("Div", g.op("Cast", r, to=TensorProto.FLOAT), g.const(float(me)))
    large = g.op("Cast", g.op("Mul", g.op("Div", g.op("Log", rf), g.const(math.log(md / me))),
                              g.const(float(half - me))), to=TensorProto.INT64)    # truncation, as .to(long)
    # the bug t5_bucket_not_clamped (candle#1312), as refenc defines it
    # (ref/relative_bucket.h): the clamp one bucket late, the index read mod nb
    last = half if BUG == "t5_bucket_not_clamped" else half - 1
    large = g.op("Min", g.op("Add", large, g.const(me, np.int64)), g.const(last, np.int64))
    bucket = g.op("Add", sign, g.op("Where", g.op("Less", r, g.const(me, np.int64)), r, large))
    if BUG == "t5_bucket_not_clamped":
        bucket = g.op("Mod", bucket, g.const(nb, np.int64))
    table = g.param("layers.0.self_attn.relative_attention_bias.weight")            # (nb, H)
    return g.op("Transpose", g.op("Gather", table, bucket), perm=[2, 0, 1])          # (H, L, L)


def padding_mask(g):
    """(B, 1, 1, L) boolean, 1 = padding: where the scores are set to −inf
    (a masked_fill, which also clears a NaN score)."""
    return g.op("Unsqueeze", g.input("in.key_padding_mask"), g.const([1, 2], np.int64))


def repeat_kv(g, t, H, Hkv, Dh):
    """Hugging Face's repeat_kv on t (B, Hkv, L, Dh) -> (B, H, L, Dh): key/value
    head j serves query heads j g .. j g + g - 1 (an Expand over a new group
    axis, then a Reshape; not a Tile, onnx/onnx#7274)."""
    if Hkv == H:
        return t
    if BUG == "gqa_tiled":   # onnx/onnx#7274's reference: a Tile, [kv0, kv1, kv0, kv1]
        return g.op("Tile", t, g.const([1, H // Hkv, 1, 1], np.int64))
    t = g.op("Unsqueeze", t, g.const([2], np.int64))                  # (B, Hkv, 1, L, Dh)
    t = g.op("Expand", t, g.const([1, 1, H // Hkv, 1, 1], np.int64))   # (B, Hkv, g, L, Dh)
    return g.op("Reshape", t, g.const([0, H, -1, Dh], np.int64))


def window_outside(cfg, L):
    """(L, L) bool, True where key j is outside query i's window, or None: a
    causal sliding_window w keeps i - w < j (the diagonals below -w + 1 are
    cut: transformers#26792), a local_attention w keeps |i - j| <= w // 2
    (docs/families.md).  The bug window_off_by_one moves each edge out by a
    key (FlashAttention's (w, w) for a causal window: transformers#39408)."""
    sw, la = cfg.get("sliding_window"), cfg.get("local_attention")
    if sw is None and la is None:
        return None
    wider = 1 if BUG == "window_off_by_one" else 0
    ones = np.ones((L, L), bool)
    out = np.zeros((L, L), bool)
    if sw is not None:
        out |= np.tril(ones, -(sw + wider))
    if la is not None:
        out |= np.tril(ones, -(la // 2 + 1 + wider)) | np.triu(ones, la // 2 + 1 + wider)
    return out


def normalizer(cfg, D):
    """sqrt(D), or rounded to embedding_normalizer_dtype as Gemma's
    torch.tensor(hidden_size ** 0.5, dtype=model dtype) is (families.md)."""
    import torch
    dtype = cfg.get("embedding_normalizer_dtype", "exact")
    if dtype == "exact":
        return math.sqrt(D)
    return torch.tensor(D ** 0.5, dtype=getattr(torch, dtype)).item()


def layer_cfg(cfg, i):
    """Layer i's config under ModernBERT's pattern (docs/families.md): global
    iff i % global_attn_every_n_layers == 0; or Gemma 3's: global iff
    (i + 1) % sliding_window_pattern == 0.  A global layer has no window and
    global_rope_theta; a local one the window and local_rope_theta (either
    absent: rope_base), and under Gemma 3's pattern no rope_scaling."""
    n, p = cfg.get("global_attn_every_n_layers"), cfg.get("sliding_window_pattern")
    if n is None and p is None:
        return cfg
    c = dict(cfg)
    is_global = (i + 1) % p == 0 if p is not None else i % n == 0
    if is_global:
        c.pop("sliding_window", None)
        c.pop("local_attention", None)
    elif p is not None:
        c["rope_scaling"] = None
    c["rope_base"] = cfg.get("global_rope_theta" if is_global else "local_rope_theta", cfg["rope_base"])
    return c


def attention(g, x, prefix, cfg, L, pos, pad, t5=None):
    """Multi-head attention on x (B, L, D) -> (output (B, L, D), weights (B, H, L, L)).
    pos: the positions (L) as float32 (RoPE, ALiBi), pad: padding_mask or None.
    Grouped-query attention (n_kv_heads) and head_dim: in_proj is
    (E + 2 Hkv Dh, D), E = H Dh, its key/value heads repeated per group."""
    D, H = cfg["d_model"], cfg["n_heads"]
    Hkv, Dh = cfg.get("n_kv_heads", H), cfg.get("head_dim", D // H)
    E, Ekv = H * Dh, Hkv * Dh
    rows = [(0, E), (E, E + Ekv), (E + Ekv, E + 2 * Ekv)]             # W_q, W_k, W_v
    W = g.golden(f"{prefix}in_proj_weight").astype(np.float32)       # (E + 2 Ekv, D)
    bias = (g.golden(f"{prefix}in_proj_bias").astype(np.float32) if f"{prefix}in_proj_bias" in g.tensors
            else None)                                                # None: linear_bias false

    def project(i, perm):  # x W_iᵀ + b_i, split into heads and transposed by perm
        a, b = rows[i]
        t = linear(g, x, None, g.const(W[a:b].T), None if bias is None else g.const(bias[a:b]))
        heads = g.const([0, 0, H if i == 0 else Hkv, Dh], np.int64)  # (B, L, heads, Dh)
        return g.op("Transpose", g.op("Reshape", t, heads), perm=perm)

    qkn = cfg.get("qk_norm", "none") == "rms"

    def normed(t, which):  # Qwen3's q_norm / k_norm: RMSNorm over head_dim on every head, before RoPE
        if not qkn:
            return t
        return rms_norm(g, t, f"{prefix}{which}_norm.", cfg["layer_norm_eps"], cfg.get("rmsnorm_offset", False))

    q = normed(project(0, [0, 2, 1, 3]), "q")                         # (B, H, L, Dh)
    if cfg["positional"] == "rope":
        q = rope(g, q, pos, Dh, cfg)
        k = repeat_kv(g, rope(g, normed(project(1, [0, 2, 1, 3]), "k"), pos, Dh, cfg), H, Hkv, Dh)
        kT = g.op("Transpose", k, perm=[0, 1, 3, 2])
    elif Hkv != H or qkn:
        kT = g.op("Transpose", repeat_kv(g, normed(project(1, [0, 2, 1, 3]), "k"), H, Hkv, Dh), perm=[0, 1, 3, 2])
    else:
        kT = project(1, [0, 2, 3, 1])                                 # (B, H, Dh, L)
    v = repeat_kv(g, project(2, [0, 2, 1, 3]), H, Hkv, Dh)
    S = cfg.get("query_pre_attn_scalar") or Dh    # Gemma 2/3's scale width, else head_dim
    s = g.op("Div", g.op("MatMul", q, kT), g.const(math.sqrt(S) * cfg["temperature"]))  # (B, H, L, L)
    cap = cfg.get("attn_logit_softcapping")
    late = BUG == "softcap_after_mask"  # onnx/onnx#7865: the Attention op's definition capped after the mask
    if cap is not None and not late:  # Gemma 2: cap tanh(s / cap), before the biases and the masks
        s = g.op("Mul", g.op("Tanh", g.op("Div", s, g.const(cap))), g.const(cap))
    if cfg["positional"] == "alibi":
        s = g.op("Add", s, alibi(g, pos, H)[1])
    if t5 is not None:  # T5's position_bias (H, L, L), layer 0's
        s = g.op("Add", s, t5)
    if "in.attn_mask" in g.tensors:
        s = g.op("Add", s, g.input("in.attn_mask"))
    # a masked score: -inf, or float32's finfo.min as the HF models mask (a
    # row with no visible key then takes uniform weights, not NaN)
    masked = np.finfo(np.float32).min if cfg.get("mask_value", "-inf") == "finfo_min" else -np.inf
    if cfg["causal"]:   # query i sees keys j <= i
        s = g.op("Where", g.const(np.triu(np.ones((L, L), bool), 1), bool), g.const(masked), s)
    outside = window_outside(cfg, L)
    if outside is not None:
        s = g.op("Where", g.const(outside, bool), g.const(masked), s)
    if pad is not None:
        s = g.op("Where", pad, g.const(masked), s)
    if cap is not None and late:  # a masked -inf becomes -cap
        s = g.op("Mul", g.op("Tanh", g.op("Div", s, g.const(cap))), g.const(cap))
    w = g.op("Softmax", s, axis=-1)
    ctx = g.op("Transpose", g.op("MatMul", w, v), perm=[0, 2, 1, 3])                # (B, L, H, Dh)
    ctx = g.op("Reshape", ctx, g.const([0, 0, E], np.int64))
    return linear(g, ctx, f"{prefix}out_proj."), w


def pooled(g, y, cfg, L):
    """The pooled embedding (B, D) of y (B, L, D), sentence-transformers'
    Pooling then Normalize (docs/families.md, "Pooling"): keep = not padding
    (B, L); mean = ReduceSum(Where(keep, y, 0)) / ReduceSum(keep) over L (a
    Where, not y * keep: a padded row may hold NaN, fully masked under a
    causal mask and left padding, and 0 * NaN is NaN); cls = row 0;
    last_token = GatherElements at ArgMax(keep (l + 1)), the last kept row;
    then e / Max(sqrt(ReduceSum(e e)), 1e-12) when pooling_normalize."""
    B, D = g.golden("out.output").shape[0], cfg["d_model"]
    axis1 = g.const([1], np.int64)
    if "in.key_padding_mask" in g.tensors:
        keep = g.op("Not", g.input("in.key_padding_mask"))
    else:
        keep = g.const(np.ones((B, L), dtype=bool), dtype=bool)
    if cfg["pooling"] == "cls":
        e = g.op("Gather", y, g.const(0, np.int64), axis=1)
    elif cfg["pooling"] == "last_token":
        rank = g.op("Mul", g.op("Cast", keep, to=TensorProto.FLOAT), g.const(np.arange(1, L + 1)))
        last = g.op("ArgMax", rank, axis=1, keepdims=1)  # (B, 1)
        idx = g.op("Expand", g.op("Unsqueeze", last, g.const([2], np.int64)), g.const([B, 1, D], np.int64))
        e = g.op("Squeeze", g.op("GatherElements", y, idx, axis=1), axis1)
    else:
        k3 = g.op("Unsqueeze", keep, g.const([2], np.int64))
        e = g.op("ReduceSum", g.op("Where", k3, y, g.const(0.0)), axis1, keepdims=0)
        count = g.op("ReduceSum", g.op("Cast", k3, to=TensorProto.FLOAT), axis1, keepdims=0)
        e = g.op("Div", e, count)
    if cfg.get("pooling_normalize", True):
        n = g.op("Sqrt", g.op("ReduceSum", g.op("Mul", e, e), axis1, keepdims=1))
        e = g.op("Div", e, g.op("Max", n, g.const(1e-12)))
    return e


# ---- components: each returns {output name without "out.": value} --------------

def run_encoder(g, cfg):
    D, eps = cfg["d_model"], cfg["layer_norm_eps"]
    out = {}
    if cfg["vocab_size"] > 0:
        tokens = g.input("in.tokens")
        L = g.golden("in.tokens").shape[1]
        h = g.op("Gather", g.param("embedding.weight"), tokens)
        if cfg.get("scale_embedding", True):
            h = g.op("Mul", h, g.const(normalizer(cfg, D)))
    else:
        h = g.input("in.x")
        L = g.golden("in.x").shape[1]
    if cfg.get("type_vocab_size", 0) > 0:   # token types, then positions: BERT's order
        h = g.op("Add", h, g.op("Gather", g.param("token_type_embedding.weight"), g.input("in.token_type_ids")))
    pos = positions_f32(g, L, cfg)
    pad = padding_mask(g) if "in.key_padding_mask" in g.tensors else None
    if cfg["positional"] == "sinusoidal":
        h = g.op("Add", h, sinusoidal(g, pos, D))
    elif cfg["positional"] == "learned" and cfg.get("position_ids", "index") == "roberta":
        # RoBERTa: cumsum(tokens != pad) * (tokens != pad) + pad, per item
        m = g.op("Cast", g.op("Not", g.op("Equal", tokens, g.const(cfg["padding_idx"], np.int64))),
                 to=TensorProto.INT64)
        ids = g.op("Add", g.op("Mul", g.op("CumSum", m, g.const(1, np.int64)), m),
                   g.const(cfg["padding_idx"], np.int64))
        h = g.op("Add", h, g.op("Gather", g.param("pos_embedding.weight"), ids))
    elif cfg["positional"] == "learned":
        h = g.op("Add", h, g.op("Gather", g.param("pos_embedding.weight"), g.input("in.positions")))
    if cfg.get("embedding_norm", False):
        h = norm(g, h, "embedding_norm.", cfg.get("embedding_norm_eps", eps), cfg)
    out["embed"] = h
    t5 = t5_bias(g, cfg, L) if cfg.get("relative_attention_num_buckets") else None
    for i in range(cfg["n_layers"]):
        p = f"layers.{i}."
        if cfg["norm"] == "pre":    # x + f(LN(x))
            if i == 0 and cfg.get("skip_first_prenorm", False):
                n1 = g.op("Identity", h)  # ModernBertEncoderLayer: attn_norm = nn.Identity()
            else:
                n1 = norm(g, h, f"{p}norm1.", eps, cfg)
            a, w = attention(g, n1, f"{p}self_attn.", layer_cfg(cfg, i), L, pos, pad, t5)
            if cfg.get("sandwich_norm", False):  # Gemma2DecoderLayer's post_attention_layernorm
                a = norm(g, a, f"{p}post_attn_norm.", eps, cfg)
            h = g.op("Add", h, a)
            n2 = norm(g, h, f"{p}norm2.", eps, cfg)
            f = ffn(g, n2, p, cfg)
            if cfg.get("sandwich_norm", False):  # and its post_feedforward_layernorm
                f = norm(g, f, f"{p}post_ffn_norm.", eps, cfg)
            h = g.op("Add", h, f)
        else:                       # LN(x + f(x))
            a, w = attention(g, h, f"{p}self_attn.", layer_cfg(cfg, i), L, pos, pad, t5)
            n1 = norm(g, g.op("Add", h, a), f"{p}norm1.", eps, cfg)
            f = ffn(g, n1, p, cfg)
            n2 = norm(g, g.op("Add", n1, f), f"{p}norm2.", eps, cfg)
            h = n2
        out.update({f"{p}norm1": n1, f"{p}self_attn.weights": w, f"{p}self_attn": a,
                    f"{p}norm2": n2, f"{p}ffn": f, f"{p}output": h})
    if cfg["final_norm"]:
        h = norm(g, h, "norm.", eps, cfg)
        out["norm"] = h
    out["output"] = h
    if cfg.get("pooling", "none") != "none":
        out["embedding"] = pooled(g, h, cfg, L)
    return out


def run_attention(g, cfg):
    x = g.input("in.x")
    L = g.golden("in.x").shape[1]
    pad = padding_mask(g) if "in.key_padding_mask" in g.tensors else None
    y, w = attention(g, x, "", cfg, L, positions_f32(g, L, cfg), pad)
    return {"weights": w, "output": y}


def run_ffn(g, cfg):
    return {"output": ffn(g, g.input("in.x"), "", cfg)}


def run_layernorm(g, cfg):
    return {"output": norm(g, g.input("in.x"), "", cfg["layer_norm_eps"], cfg)}


def run_softmax(g, cfg):
    return {"output": g.op("Softmax", g.op("Div", g.input("in.x"), g.const(cfg["temperature"])), axis=-1)}


def run_activation(g, cfg):
    return {"output": activation(g, g.input("in.x"), cfg["activation"])}


def run_sinusoidal_pe(g, cfg):
    L = g.golden("in.positions").shape[0]
    return {"output": sinusoidal(g, positions_f32(g, L, cfg), cfg["d_model"])}


def run_rope(g, cfg):
    x = g.input("in.x")
    Dh = g.golden("in.x").shape[-1]
    L = g.golden("in.positions").shape[0]
    return {"output": rope(g, x, positions_f32(g, L, cfg), Dh, cfg)}


def run_alibi(g, cfg):
    L = g.golden("in.positions").shape[0]
    slopes, bias = alibi(g, positions_f32(g, L, cfg), cfg["n_heads"])
    return {"slopes": slopes, "bias": bias}


RUN = {"encoder": run_encoder, "attention": run_attention, "ffn": run_ffn,
       "layernorm": run_layernorm, "softmax": run_softmax, "activation": run_activation,
       "sinusoidal_pe": run_sinusoidal_pe, "rope": run_rope, "alibi": run_alibi}


def check_supported(meta, cfg):
    if meta["component"] not in RUN:
        raise Unsupported(f"component '{meta['component']}'")
    for key, value in cfg.items():
        if key not in CONFIG_SUPPORT:
            raise Unsupported(f"config key '{key}' (= {json.dumps(value)})")
        allowed = CONFIG_SUPPORT[key]
        if allowed is not None and value not in allowed:
            raise Unsupported(f"config {key} = {json.dumps(value)}")


def selected_rows(g, cfg, step, value):
    """A case with in.rows (the last layer's selected query rows, docs/golden-format.md):
    the full sequence's output of the last layer, the final norm or the output,
    gathered at those rows (axis 1; the weights' axis 2), as any implementation
    compares them; every other output as it is."""
    last = f"layers.{cfg['n_layers'] - 1}."
    if "in.rows" not in g.tensors or not (step in ("norm", "output") or step.startswith(last)):
        return value
    return g.op("Gather", value, g.input("in.rows"), axis=2 if step.endswith("self_attn.weights") else 1)


def build_case(path, out_dir):
    """Writes CASE.all.onnx and CASE.final.onnx; returns the index entry."""
    meta, tensors = read_case(path)
    case = meta["case"]
    cfg = json.loads(meta["config"])
    outputs = json.loads(meta["outputs"])
    entry = {"case": case, "component": meta["component"]}
    try:
        check_supported(meta, cfg)
        for variant in ("all", "final"):
            g = Graph(tensors, path)
            values = RUN[meta["component"]](g, cfg)
            for o in outputs:
                if variant == "final" and not o["required"]:
                    continue
                step = o["name"][len("out."):]
                if step not in values:
                    raise Unsupported(f"output '{o['name']}' is not computed")
                g.output(selected_rows(g, cfg, step, values[step]), o["name"])
            file = f"{case}.{variant}.onnx"
            tmp = os.path.join(out_dir, f"{file}.tmp.{os.getpid()}")
            onnx.save(g.model(case), tmp)
            os.replace(tmp, os.path.join(out_dir, file))
            entry[variant] = file
    except Unsupported as e:
        entry = {"case": case, "component": meta["component"], "unsupported": str(e)}
    return entry


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list-bugs", action="store_true", help="print the bugs --bug can build in, and exit")
    ap.add_argument("--golden", help="the golden directory (manifest.json, cases/)")
    ap.add_argument("--out", help="directory for the models and models.json")
    ap.add_argument("--case", default="*", help="only cases matching this shell pattern")
    ap.add_argument("--bug", choices=BUGS, help="build one of refenc's known bug variants into every model")
    args = ap.parse_args()
    if args.list_bugs:
        print("\n".join(BUGS))
        return 0
    if not args.golden or not args.out:
        ap.error("--golden and --out are required")
    global BUG
    BUG = args.bug
    try:
        with open(os.path.join(args.golden, "manifest.json")) as f:
            manifest = json.load(f)
        os.makedirs(args.out, exist_ok=True)
        index = [build_case(os.path.join(args.golden, "cases", c["file"]), args.out)
                 for c in manifest["cases"] if fnmatch.fnmatch(c["case"], args.case)]
    except OSError as e:
        print(f"build_models: {e.filename}: {e.strerror}", file=sys.stderr)
        return 2
    except (ValueError, KeyError, BadGolden) as e:
        print(f"build_models: {e}", file=sys.stderr)
        return 2
    tmp = os.path.join(args.out, f"models.json.tmp.{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump({"onnx": onnx.__version__, "opset": OPSET, "bug": BUG, "cases": index}, f, indent=1)
    os.replace(tmp, os.path.join(args.out, "models.json"))
    built = [e for e in index if "unsupported" not in e]
    print(f"build_models: {len(built)} of {len(index)} case(s) as ONNX models (opset {OPSET}"
          f"{', with bug ' + BUG if BUG else ''}) in {args.out}")
    for e in index:
        if "unsupported" in e:
            print(f"  {e['case']}: not supported: {e['unsupported']}")
    return 0 if index else 2


if __name__ == "__main__":
    sys.exit(main())
