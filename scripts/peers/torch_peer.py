#!/usr/bin/python3
"""The PyTorch peer: computes every refenc golden case with PyTorch and writes
results files for `refenc certify`.

It uses PyTorch's own modules where they exist (nn.TransformerEncoder /
nn.TransformerEncoderLayer, nn.MultiheadAttention with a float attn_mask for
ALiBi, nn.LayerNorm, nn.Embedding, F.gelu, torch.softmax) and plain torch
operations where they don't (RoPE, sinusoidal PE, temperature), in float64 or
float32.  It reads and writes safetensors with numpy and json only.

In float16 and bfloat16 it computes the way tensor-core and fused CPU kernels
do: every operation in float32 on values of the dtype, its output rounded to
the dtype (--accumulate float32, the default), or with every accumulation
(matmul, sum, LayerNorm statistics, softmax denominator) rounded to the dtype
at each step too (--accumulate dtype, the "pure" model).  PyTorch on the CPU
has no float16 kernels, so both are built from float32 operations and explicit
rounding; --native runs PyTorch's own bfloat16 CPU kernels instead.

    scripts/peers/torch_peer.py --golden golden --out results/torch-f64 --dtype float64
    build/refenc certify --golden golden --results results/torch-f64

docs/certify.md walks through it as the worked example of certifying an
implementation.
"""
import argparse
import fnmatch
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

import torch_families  # the encoder families (BERT, RoBERTa, DistilBERT, GPT-2, CLIP text)

# ---- safetensors with numpy -------------------------------------------------

NP_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "U8": "u1", "BOOL": "u1"}


def read_safetensors(path):
    """Returns ({name: ndarray}, metadata dict)."""
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = buf[8 + n:]
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        raw = data[b:end]
        if e["dtype"] == "BF16":  # bfloat16: the high half of a float32
            a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(raw, NP_DTYPES[e["dtype"]])
        out[name] = a.reshape(e["shape"])
    return out, meta


def to_numpy(t):
    """A torch tensor as (ndarray, safetensors dtype); numpy has no bfloat16,
    so a bfloat16 tensor travels as its 16-bit patterns."""
    if EMU is not None:  # float32 holding values of the dtype: exact
        t = t.to(EMU.dt)
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().view(np.uint16), "BF16"
    a = t.numpy()
    return a, {np.dtype("float64"): "F64", np.dtype("float32"): "F32", np.dtype("float16"): "F16"}[a.dtype]


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: (ndarray, dtype)} (F64, F32, F16, or BF16 as uint16 bit
    patterns) atomically."""
    names = sorted(tensors)
    header, blobs, off = {}, [], 0
    for name in names:
        a, dt = tensors[name]
        a = np.ascontiguousarray(a)
        raw = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    h += b" " * (-len(h) % 8)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    os.replace(tmp, path)


# ---- bug injection (--bug) -------------------------------------------------------
# The known bug variants of refenc (ref/tool/variants.h, docs/certify.md), injected
# into this peer's own computation, and two bugs refenc does not know, to
# check that the certifier names the right variant and never a wrong one.
KNOWN_BUGS = ["layernorm_eps_x10", "layernorm_eps_div10", "unbiased_variance", "gelu_tanh_for_exact",
              "gelu_exact_for_tanh", "rope_layout_swapped", "rope_base_wrong", "attention_scale_sqrt_d",
              "attention_unscaled", "missing_final_norm", "embedding_unscaled", "alibi_slopes_pow2",
              "padding_mask_inverted", "pre_post_swapped", "heads_merged_without_transpose"] \
    + torch_families.KNOWN_BUGS
UNKNOWN_BUGS = ["softmax_over_queries", "ffn_residual_dropped"]
BUG = None


def bugged_eps(eps):
    return torch_families.bugged_eps(eps, BUG)


def layer_norm(t, w, b, eps):
    """LayerNorm over the last axis, as F.layer_norm (or with an injected bug)."""
    if BUG == "unbiased_variance":
        mean = t.mean(-1, keepdim=True)
        var = t.var(-1, unbiased=True, keepdim=True)
        return (t - mean) / torch.sqrt(var + eps) * w + b
    return F.layer_norm(t, (t.shape[-1],), w, b, bugged_eps(eps))


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
    return e.round(e.round(e.round(d / sd) * weight) + bias)


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
    """(H, L, L): -m_h |p_i - p_j|, symmetric (encoder)."""
    m = torch.tensor(alibi_slopes(H), dtype=dt)
    p = positions.to(dt)
    dist = (p[:, None] - p[None, :]).abs()
    return -m[:, None, None] * dist[None]


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


def rope(x, positions, base, layout):
    """x (..., L, Dh) rotated at positions (L). layout 'half' is Hugging Face's
    rotate_half; 'interleaved' is GPT-J's pairs (2j, 2j+1)."""
    Dh = x.shape[-1]
    dt = x.dtype
    if dt in (torch.float16, torch.bfloat16):  # the tables in float32, as Hugging Face
        dt = torch.float32
    if BUG == "rope_layout_swapped":
        layout = "interleaved" if layout == "half" else "half"
    if BUG == "rope_base_wrong":
        base = 500000.0 if base == 10000.0 else 10000.0
    with table_precision():
        inv_freq = 1.0 / (base ** (torch.arange(0, Dh, 2, dtype=dt) / Dh))
        freqs = torch.outer(positions.to(dt), inv_freq)          # (L, Dh/2)
        cos, sin = freqs.cos(), freqs.sin()
    cos, sin = rounded_table(cos).to(x.dtype), rounded_table(sin).to(x.dtype)
    if layout == "half":
        x1, x2 = x[..., : Dh // 2], x[..., Dh // 2:]
        rotated = torch.cat((-x2, x1), dim=-1)
        return x * torch.cat((cos, cos), dim=-1) + rotated * torch.cat((sin, sin), dim=-1)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


def activation_fn(name):
    return torch_families.activation_fn(name, BUG)


class Case:
    def __init__(self, path, dt):
        self.tensors, self.meta = read_safetensors(path)
        self.name = self.meta["case"]
        self.component = self.meta["component"]
        self.cfg = json.loads(self.meta["config"])
        self.outputs = [o["name"] for o in json.loads(self.meta["outputs"])]
        self.dt = dt

    def has(self, name):
        return name in self.tensors

    def t(self, name):
        """A floating input or parameter as a torch tensor of the peer's dtype
        (emulated: float32 holding the values rounded to the dtype)."""
        t = torch.from_numpy(np.array(self.tensors[name], dtype=np.float64)).to(self.dt)
        return EMU.round(t) if EMU is not None else t

    def i(self, name):
        return torch.from_numpy(np.array(self.tensors[name], dtype=np.int64))

    def positions(self, L):
        return self.i("in.positions") if self.has("in.positions") else torch.arange(L)

    def padding(self):
        if not self.has("in.key_padding_mask"):
            return None
        pad = torch.from_numpy(self.tensors["in.key_padding_mask"].astype(bool))
        return ~pad if BUG == "padding_mask_inverted" else pad


def score_bias(case, B, H, L, positions):
    """The float mask added to the scores, (B*H, L, L), or None: ALiBi,
    causal, in.attn_mask (key padding is passed separately)."""
    cfg, dt = case.cfg, case.dt
    bias = torch.zeros(H, L, L, dtype=dt)
    used = False
    if cfg["positional"] == "alibi":
        bias = bias + alibi_bias(H, positions, dt)
        used = True
    if cfg["causal"]:
        bias = bias.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), float("-inf"))
        used = True
    if case.has("in.attn_mask"):
        bias = bias + case.t("in.attn_mask")
        used = True
    return bias.repeat(B, 1, 1) if used else None


def manual_attention(case, x, W_in, b_in, W_o, b_o, positions):
    """Multi-head attention from torch operations, for what nn.MultiheadAttention
    cannot do (RoPE, temperature).  Returns (output, weights (B, H, L, L))."""
    cfg = case.cfg
    B, L, D = x.shape
    H = cfg["n_heads"]
    Dh = D // H
    q, k, v = F.linear(x, W_in, b_in).chunk(3, dim=-1)
    q, k, v = (t.reshape(B, L, H, Dh).transpose(1, 2) for t in (q, k, v))
    if cfg["positional"] == "rope":
        q = rope(q, positions, cfg["rope_base"], cfg["rope_layout"])
        k = rope(k, positions, cfg["rope_base"], cfg["rope_layout"])
    scale = {"attention_scale_sqrt_d": math.sqrt(D), "attention_unscaled": 1.0}.get(BUG, math.sqrt(Dh))
    s = q @ k.transpose(-1, -2) / (scale * cfg["temperature"])
    bias = score_bias(case, B, H, L, positions)
    if bias is not None:
        s = s + bias.reshape(B, H, L, L)
    pad = case.padding()
    if pad is not None:
        s = s.masked_fill(pad[:, None, None, :], float("-inf"))
    w = torch.softmax(s, dim=-2 if BUG == "softmax_over_queries" else -1)
    ctx = w @ v
    ctx = ctx.reshape(B, L, D) if BUG == "heads_merged_without_transpose" else ctx.transpose(1, 2).reshape(B, L, D)
    return F.linear(ctx, W_o, b_o), w


def needs_manual(cfg):
    """nn.MultiheadAttention cannot express RoPE, a temperature, or an injected
    bug, and is one fused operation for the emulation of float16/bfloat16."""
    return cfg["positional"] == "rope" or cfg["temperature"] != 1.0 or BUG is not None or EMU is not None


# ---- components ----------------------------------------------------------------

def run_encoder(case):
    if torch_families.handles(case.cfg):
        return torch_families.run(case, BUG)
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
        x = emb(tokens) * (1.0 if BUG == "embedding_unscaled" else math.sqrt(D))
    else:
        x = case.t("in.x")
    B, L, _ = x.shape
    positions = case.positions(L)
    if cfg["positional"] == "sinusoidal":
        x = x + sinusoidal_pe(positions, D, dt)
    elif cfg["positional"] == "learned":
        x = x + case.t("pos_embedding.weight")[positions]
    out["embed"] = x

    state = {k: case.t(k) for k in case.tensors if k.startswith("layers.") or k.startswith("norm.")}
    pad = case.padding()

    if not needs_manual(cfg):
        layer = nn.TransformerEncoderLayer(D, H, cfg["d_ff"], dropout=0.0,
                                           activation=activation_fn(cfg["activation"]) if cfg["activation"] in ("gelu_tanh", "quick_gelu") else cfg["activation"],
                                           layer_norm_eps=eps, batch_first=True, norm_first=pre, dtype=dt)
        final = nn.LayerNorm(D, eps=eps, dtype=dt) if cfg["final_norm"] else None
        enc = nn.TransformerEncoder(layer, N, norm=final, enable_nested_tensor=False)
        enc.load_state_dict(state, strict=True)
        enc.eval()
        # forward hooks record every step under refenc's names
        for i, lyr in enumerate(enc.layers):
            def hook(name):
                def f(_m, _inp, o):
                    out[name] = o[0] if isinstance(o, tuple) else o
                return f
            lyr.norm1.register_forward_hook(hook(f"layers.{i}.norm1"))
            lyr.norm2.register_forward_hook(hook(f"layers.{i}.norm2"))
            lyr.self_attn.register_forward_hook(hook(f"layers.{i}.self_attn"))
            lyr.linear2.register_forward_hook(hook(f"layers.{i}.ffn"))
            lyr.register_forward_hook(hook(f"layers.{i}.output"))
        if final is not None:
            enc.norm.register_forward_hook(hook("norm"))
        mask = score_bias(case, B, H, L, positions)
        # gradients stay enabled so that PyTorch takes the module path (the
        # fast path skips the submodules and their hooks)
        y = enc(x, mask=mask, src_key_padding_mask=pad)
        out["output"] = y
        return out

    # RoPE, temperature or a bug: the layers from torch operations
    act = activation_fn(cfg["activation"])
    if BUG == "pre_post_swapped":
        pre = not pre
    for i in range(N):
        p = lambda n: state[f"layers.{i}.{n}"]
        ln1 = lambda t: layer_norm(t, p("norm1.weight"), p("norm1.bias"), eps)
        ln2 = lambda t: layer_norm(t, p("norm2.weight"), p("norm2.bias"), eps)
        attn = lambda t: manual_attention(case, t, p("self_attn.in_proj_weight"), p("self_attn.in_proj_bias"),
                                          p("self_attn.out_proj.weight"), p("self_attn.out_proj.bias"), positions)
        ffn = lambda t: F.linear(act(F.linear(t, p("linear1.weight"), p("linear1.bias"))),
                                 p("linear2.weight"), p("linear2.bias"))
        keep = 0.0 if BUG == "ffn_residual_dropped" else 1.0
        if pre:
            n1 = ln1(x); a, w = attn(n1); h = x + a
            n2 = ln2(h); f = ffn(n2); x = keep * h + f
        else:
            a, w = attn(x); n1 = ln1(x + a)
            f = ffn(n1); n2 = ln2(keep * n1 + f); x = n2
        out.update({f"layers.{i}.norm1": n1, f"layers.{i}.self_attn.weights": w,
                    f"layers.{i}.self_attn": a, f"layers.{i}.norm2": n2,
                    f"layers.{i}.ffn": f, f"layers.{i}.output": x})
    if cfg["final_norm"] and BUG != "missing_final_norm":
        x = layer_norm(x, state["norm.weight"], state["norm.bias"], eps)
        out["norm"] = x
    out["output"] = x
    return out


def run_attention(case):
    cfg = case.cfg
    x = case.t("in.x")
    B, L, D = x.shape
    H = cfg["n_heads"]
    positions = case.positions(L)
    W_in, b_in = case.t("in_proj_weight"), case.t("in_proj_bias")
    W_o, b_o = case.t("out_proj.weight"), case.t("out_proj.bias")
    if needs_manual(cfg):
        y, w = manual_attention(case, x, W_in, b_in, W_o, b_o, positions)
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
    l1 = nn.Linear(cfg["d_model"], cfg["d_ff"], dtype=case.dt)
    l2 = nn.Linear(cfg["d_ff"], cfg["d_model"], dtype=case.dt)
    l1.load_state_dict({"weight": case.t("linear1.weight"), "bias": case.t("linear1.bias")})
    l2.load_state_dict({"weight": case.t("linear2.weight"), "bias": case.t("linear2.bias")})
    return {"output": l2(activation_fn(cfg["activation"])(l1(x)))}


def run_layernorm(case):
    cfg = case.cfg
    if BUG is not None:
        return {"output": layer_norm(case.t("in.x"), case.t("weight"), case.t("bias"), cfg["layer_norm_eps"])}
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
    return {"output": rope(case.t("in.x"), case.i("in.positions"), cfg["rope_base"], cfg["rope_layout"])}


def run_alibi(case):
    H = case.cfg["n_heads"]
    return {"slopes": torch.tensor(alibi_slopes(H), dtype=case.dt),
            "bias": alibi_bias(H, case.i("in.positions"), case.dt)}


COMPONENTS = {"encoder": run_encoder, "attention": run_attention, "ffn": run_ffn,
              "layernorm": run_layernorm, "softmax": run_softmax, "activation": run_activation,
              "sinusoidal_pe": run_sinusoidal_pe, "rope": run_rope, "alibi": run_alibi}


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
    ap.add_argument("--dtype", choices=["float64", "float32", "float16", "bfloat16"], default="float64")
    ap.add_argument("--accumulate", choices=["float32", "dtype"], default="float32",
                    help="float16/bfloat16: accumulate in float32 (default) or in the dtype itself")
    ap.add_argument("--native", action="store_true",
                    help="bfloat16: PyTorch's own bfloat16 CPU kernels and modules instead")
    ap.add_argument("--case", default="*", help="only cases matching this shell pattern")
    ap.add_argument("--bug", choices=KNOWN_BUGS + UNKNOWN_BUGS,
                    help="inject a bug into this peer's computation: one of refenc's known variants "
                         "(docs/certify.md), or one it does not know")
    args = ap.parse_args()
    if args.native and args.dtype != "bfloat16":
        ap.error("--native goes with --dtype bfloat16 (PyTorch has no float16 CPU kernels)")
    if args.accumulate == "dtype" and (args.native or args.dtype in ("float64", "float32")):
        ap.error("--accumulate dtype goes with --dtype float16 or bfloat16, without --native")
    global BUG, EMU
    BUG = args.bug

    dt = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
          "bfloat16": torch.bfloat16}[args.dtype]
    if dt in (torch.float16, torch.bfloat16) and not args.native:
        EMU = Emulation(dt, pure=args.accumulate == "dtype")
        dt = torch.float32
    torch.set_num_threads(1)  # one thread: the same result on every run
    with open(os.path.join(args.golden, "manifest.json")) as f:
        manifest = json.load(f)
    os.makedirs(args.out, exist_ok=True)
    n = 0
    for entry in manifest["cases"]:
        if not fnmatch.fnmatch(entry["case"], args.case):
            continue
        case = Case(os.path.join(args.golden, "cases", entry["file"]), dt)
        if EMU is not None:
            with EMU:
                outs = COMPONENTS[case.component](case)
        else:
            outs = COMPONENTS[case.component](case)
        results = {}
        for name in case.outputs:
            key = name[len("out."):]
            if key in outs:
                results[name] = to_numpy(outs[key].detach())
        write_safetensors(os.path.join(args.out, case.name + ".safetensors"), results,
                          {"implementation": f"torch {torch.__version__} {describe(args)}"})
        n += 1
    print(f"torch_peer: {n} case(s) computed in {describe(args)} into {args.out}")
    return 0 if n else 2


if __name__ == "__main__":
    sys.exit(main())
