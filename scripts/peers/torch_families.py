"""The encoder families for the PyTorch peer (torch_peer.py): BERT, RoBERTa,
DistilBERT, GPT-2 (the block stack), the CLIP text encoder, and the decoder
blocks of Llama, Mistral, Qwen2 and Qwen3 run as encoders, as plain torch
modules written from the Hugging Face modeling files' documented semantics
(docs/families.md cites them), not from refenc's code.

Each module tree carries the family's own parameter names and layouts
(BERT's separate query/key/value, GPT-2's Conv1D (in, out), CLIP's q_proj...),
so that load_state_dict(strict=True) accepts exactly the family's checkpoint.
A golden case stores refenc's names: hf_state_dict() converts them the way a
user holding the family's layout would read docs/families.md's tables
backwards, and the modules load the result.  Masks are applied as each family
applies them (torch.finfo(dtype).min added, filled, or combined into GPT-2's
one 4D mask), with the golden's mask value.  A case arrives as torch_peer's
Case (a refenc.Case read by the refenc Python module, as torch tensors).

    import torch_families
    if torch_families.handles(case.cfg):
        outputs = torch_families.run(case, bug, peer)

peer is torch_peer's module: the Llama-style families take its RMSNorm (the
float32 statistic of LlamaRMSNorm as the peer's emulation rounds it), RoPE,
repeat_kv, q/k norm and window mask, with the bug hooks those carry.

The bug names are refenc's known variants (ref/tool/variants.h), injected
into these modules' own computation for `make check-diagnosis`.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

FAMILIES = ("bert", "roberta", "distilbert", "gpt2", "clip-text", "llama", "mistral", "qwen2", "qwen3")
# decoder blocks run as encoders, under LlamaModel's names (MistralModel, Qwen2Model
# and Qwen3Model keep them)
LLAMA_FAMILIES = ("llama", "mistral", "qwen2", "qwen3")
# the families whose Hugging Face names hf_state_dict knows: ModernBERT's,
# Gemma 3's, T5EncoderModel's, NomicBertModel's, JinaBertModel's and GTE's
# NewModel too, whose cases the peer computes from refenc's names
# (torch_peer.py's layers)
HF_NAME_FAMILIES = FAMILIES + ("modernbert", "gemma3", "t5-encoder", "nomic-bert", "jina-bert-v2", "gte")
LLAMA_BLOCKS = {"norm_type": "rmsnorm", "ffn_type": "glu", "positional": "rope"}  # what their modules are

# The variants of the families (refenc certify --list-bugs); torch_peer.py
# adds them to the bugs it can inject.
KNOWN_BUGS = ["layernorm_eps_1e-5_for_1e-12", "layernorm_eps_1e-12_for_1e-5", "embedding_norm_missing",
              "token_types_ignored", "roberta_positions_from_zero", "conv1d_not_transposed",
              "quick_gelu_for_gelu", "gelu_for_quick_gelu", "embedding_scaled"]


def handles(cfg):
    return cfg.get("family", "vaswani") in FAMILIES


# ---- activations and LayerNorm, with the injectable bugs ----------------------------

def quick_gelu(t):
    """HF QuickGELUActivation: x * sigmoid(1.702 x)."""
    return t * torch.sigmoid(1.702 * t)


def activation_fn(name, bug):
    """The activation a config names, as the bug (if any) replaces it."""
    if bug == "gelu_tanh_for_exact" and name == "gelu":
        name = "gelu_tanh"
    elif bug == "gelu_exact_for_tanh" and name == "gelu_tanh":
        name = "gelu"
    elif bug == "quick_gelu_for_gelu" and name in ("gelu", "gelu_tanh"):
        name = "quick_gelu"
    elif bug == "gelu_for_quick_gelu" and name == "quick_gelu":
        name = "gelu"
    return {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
            "quick_gelu": quick_gelu, "silu": F.silu}[name]


def bugged_eps(eps, bug):
    """The eps a LayerNorm uses with an eps bug: off by 10, PyTorch's default
    1e-5 where BERT's 1e-12 is meant, or the reverse."""
    if bug == "layernorm_eps_x10":
        return eps * 10
    if bug == "layernorm_eps_div10":
        return eps / 10
    if bug == "layernorm_eps_1e-5_for_1e-12" and eps == 1e-12:
        return 1e-5
    if bug == "layernorm_eps_1e-12_for_1e-5" and eps == 1e-5:
        return 1e-12
    return eps


class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm, or the LayerNorm bugs: a wrong eps (bugged_eps), the
    unbiased variance."""

    def __init__(self, D, eps, dt, bug):
        super().__init__(D, eps=bugged_eps(eps, bug), dtype=dt)
        self.unbiased = bug == "unbiased_variance"

    def forward(self, t):
        if self.unbiased:
            mean = t.mean(-1, keepdim=True)
            var = t.var(-1, unbiased=True, keepdim=True)
            return (t - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias
        return super().forward(t)


class Conv1D(nn.Module):
    """GPT-2's Conv1D (transformers.pytorch_utils): weight (nx, nf), y = x W + b."""

    def __init__(self, nf, nx, dt):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(nx, nf, dtype=dt))
        self.bias = nn.Parameter(torch.empty(nf, dtype=dt))

    def forward(self, x, not_transposed=False):
        if not_transposed:  # the weight loaded into an nn.Linear as stored: x W^T + b
            return F.linear(x, self.weight, self.bias)
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).reshape(
            *x.shape[:-1], self.weight.shape[1])


# ---- attention, shared by the families ------------------------------------------------

def heads(t, H):
    """(B, L, D) -> (B, H, L, Dh)."""
    B, L, D = t.shape
    return t.reshape(B, L, H, D // H).transpose(1, 2)


def merge(ctx, bug):
    """(B, H, L, Dh) -> (B, L, D), or the bug that reshapes without the transpose."""
    B, H, L, Dh = ctx.shape
    if bug == "heads_merged_without_transpose":
        return ctx.reshape(B, L, H * Dh)
    return ctx.transpose(1, 2).reshape(B, L, H * Dh)


def score_divisor(Dh, D, bug):
    return {"attention_scale_sqrt_d": math.sqrt(D), "attention_unscaled": 1.0}.get(bug, math.sqrt(Dh))


def softmax(s, bug):
    return torch.softmax(s, dim=-2 if bug == "softmax_over_queries" else -1)


class Masks:
    """The golden's masks as a family applies them: keep (B, L) 1 = token
    (HF's attention_mask), causal, and the mask value: -inf, or finfo.min of
    the model's dtype (float16's -65504 in the peer's float32 emulation of
    float16, as HF's torch.finfo(dtype).min of a half-precision model)."""

    def __init__(self, case, B, L, bug):
        cfg, dt = case.cfg, case.dt
        pad = case.padding()  # (B, L) bool, True = padding, inverted by the bug already
        self.keep = torch.ones(B, L, dtype=dt) if pad is None else (~pad).to(dt)
        self.causal = bool(cfg["causal"])
        finfo_min = cfg.get("mask_value", "-inf") == "finfo_min"
        self.min = torch.finfo(getattr(case, "model_dtype", dt)).min if finfo_min else -math.inf
        self.L, self.dt = L, dt

    def additive_padding(self):
        """BERT's get_extended_attention_mask, (1 - mask) * min, (B, 1, 1, L):
        0 at tokens and min at padding (filled, so that -inf does not meet 0)."""
        zero = torch.zeros(self.keep.shape, dtype=self.dt)
        return zero.masked_fill(self.keep == 0, self.min)[:, None, None, :]

    def causal_allowed(self):
        return torch.ones(self.L, self.L, dtype=torch.bool).tril()

    def combined_4d(self):
        """HF's AttentionMaskConverter.to_4d (modeling_attn_mask_utils), the
        mask GPT-2's attention adds to its scores, (B, 1, L, L): the causal
        mask (0 on and below the diagonal, min above) masked_fill'ed with min
        at the padded keys, so that a masked (query, key) pair gets min once,
        never min + min (which overflows to -inf, and a row of -inf is NaN)."""
        B = self.keep.shape[0]
        m = torch.zeros(B, 1, self.L, self.L, dtype=self.dt)
        if self.causal:
            m = m.masked_fill(~self.causal_allowed(), self.min)
        return m.masked_fill((self.keep == 0)[:, None, None, :], self.min)


# ---- the embeddings ----------------------------------------------------------------

def create_position_ids_from_input_ids(input_ids, padding_idx):
    """RoBERTa (HF modeling_roberta): non-padding tokens numbered from padding_idx + 1."""
    mask = input_ids.ne(padding_idx).int()
    return (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + padding_idx


def position_ids(case, tokens, B, L, bug):
    cfg = case.cfg
    if cfg.get("position_ids", "index") == "roberta" and bug != "roberta_positions_from_zero":
        return create_position_ids_from_input_ids(tokens, cfg["padding_idx"])
    return case.positions(L).expand(B, L)


def token_types(case, B, L, bug):
    if case.has("in.token_type_ids") and bug != "token_types_ignored":
        return case.i("in.token_type_ids")
    return torch.zeros(B, L, dtype=torch.long)  # HF's default: type 0


def embed_scale(cfg, bug):
    scaled = cfg.get("scale_embedding", True) != (bug == "embedding_scaled")
    if bug == "embedding_unscaled":
        scaled = False
    return math.sqrt(cfg["d_model"]) if scaled else 1.0


# ---- the families' modules (HF names) ------------------------------------------------

class Linear(nn.Linear):
    def __init__(self, i, o, dt):
        super().__init__(i, o, dtype=dt)


class BertLayer(nn.Module):
    """HF BertLayer: attention.self.{query,key,value}, attention.output.{dense,
    LayerNorm}, intermediate.dense, output.{dense, LayerNorm}; Post-LN."""

    def __init__(self, cfg, dt, bug):
        super().__init__()
        D, Fh, eps = cfg["d_model"], cfg["d_ff"], cfg["layer_norm_eps"]
        self.attention = nn.Module()
        self.attention.self = nn.Module()
        self.attention.self.query = Linear(D, D, dt)
        self.attention.self.key = Linear(D, D, dt)
        self.attention.self.value = Linear(D, D, dt)
        self.attention.output = nn.Module()
        self.attention.output.dense = Linear(D, D, dt)
        self.attention.output.LayerNorm = LayerNorm(D, eps, dt, bug)
        self.intermediate = nn.Module()
        self.intermediate.dense = Linear(D, Fh, dt)
        self.output = nn.Module()
        self.output.dense = Linear(Fh, D, dt)
        self.output.LayerNorm = LayerNorm(D, eps, dt, bug)
        self.H, self.bug, self.act = cfg["n_heads"], bug, activation_fn(cfg["activation"], bug)

    def self_attention(self, x, masks):
        a, H, bug = self.attention.self, self.H, self.bug
        q, k, v = heads(a.query(x), H), heads(a.key(x), H), heads(a.value(x), H)
        s = q @ k.transpose(-1, -2) / score_divisor(q.shape[-1], x.shape[-1], bug)
        if masks.causal:
            s = s.masked_fill(~masks.causal_allowed(), masks.min)
        w = softmax(s + masks.additive_padding(), bug)
        return self.attention.output.dense(merge(w @ v, bug)), w

    def forward(self, x, masks, pre):
        ln1, ln2 = self.attention.output.LayerNorm, self.output.LayerNorm
        ffn = lambda t: self.output.dense(self.act(self.intermediate.dense(t)))
        return residual_block(x, masks, pre, self.self_attention, ffn, ln1, ln2, self.bug)


class DistilBertLayer(nn.Module):
    """HF TransformerBlock: attention.{q_lin,k_lin,v_lin,out_lin}, sa_layer_norm,
    ffn.{lin1,lin2}, output_layer_norm; q scaled before the product, scores
    masked_fill'ed with finfo.min."""

    def __init__(self, cfg, dt, bug):
        super().__init__()
        D, Fh, eps = cfg["d_model"], cfg["d_ff"], cfg["layer_norm_eps"]
        self.attention = nn.Module()
        for n in ("q_lin", "k_lin", "v_lin", "out_lin"):
            setattr(self.attention, n, Linear(D, D, dt))
        self.sa_layer_norm = LayerNorm(D, eps, dt, bug)
        self.ffn = nn.Module()
        self.ffn.lin1 = Linear(D, Fh, dt)
        self.ffn.lin2 = Linear(Fh, D, dt)
        self.output_layer_norm = LayerNorm(D, eps, dt, bug)
        self.H, self.bug, self.act = cfg["n_heads"], bug, activation_fn(cfg["activation"], bug)

    def self_attention(self, x, masks):
        a, H, bug = self.attention, self.H, self.bug
        q, k, v = heads(a.q_lin(x), H), heads(a.k_lin(x), H), heads(a.v_lin(x), H)
        q = q / score_divisor(q.shape[-1], x.shape[-1], bug)
        s = q @ k.transpose(-1, -2)
        masked = (masks.keep == 0)[:, None, None, :].expand_as(s)
        if masks.causal:
            masked = masked | ~masks.causal_allowed()
        w = softmax(s.masked_fill(masked, masks.min), bug)
        return a.out_lin(merge(w @ v, bug)), w

    def forward(self, x, masks, pre):
        ffn = lambda t: self.ffn.lin2(self.act(self.ffn.lin1(t)))
        return residual_block(x, masks, pre, self.self_attention, ffn, self.sa_layer_norm,
                              self.output_layer_norm, self.bug)


class GPT2Block(nn.Module):
    """HF GPT2Block: ln_1, attn.{c_attn, c_proj} (Conv1D), ln_2, mlp.{c_fc,
    c_proj} (Conv1D); Pre-LN; one 4D mask, causal and padding combined with
    a single finfo.min per masked pair (Masks.combined_4d), added to the
    scores, as HF's eager GPT-2 attention does."""

    def __init__(self, cfg, dt, bug):
        super().__init__()
        D, Fh, eps = cfg["d_model"], cfg["d_ff"], cfg["layer_norm_eps"]
        self.ln_1 = LayerNorm(D, eps, dt, bug)
        self.attn = nn.Module()
        self.attn.c_attn = Conv1D(3 * D, D, dt)
        self.attn.c_proj = Conv1D(D, D, dt)
        self.ln_2 = LayerNorm(D, eps, dt, bug)
        self.mlp = nn.Module()
        self.mlp.c_fc = Conv1D(Fh, D, dt)
        self.mlp.c_proj = Conv1D(D, Fh, dt)
        self.H, self.bug, self.act = cfg["n_heads"], bug, activation_fn(cfg["activation"], bug)

    def self_attention(self, x, masks):
        H, bug, D = self.H, self.bug, x.shape[-1]
        q, k, v = (heads(t, H) for t in self.attn.c_attn(x).split(D, dim=2))
        s = q @ k.transpose(-1, -2) / score_divisor(q.shape[-1], D, bug)
        w = softmax(s + masks.combined_4d(), bug)
        return self.attn.c_proj(merge(w @ v, bug), not_transposed=bug == "conv1d_not_transposed"), w

    def forward(self, x, masks, pre):
        ffn = lambda t: self.mlp.c_proj(self.act(self.mlp.c_fc(t)))
        return residual_block(x, masks, pre, self.self_attention, ffn, self.ln_1, self.ln_2, self.bug)


class CLIPEncoderLayer(nn.Module):
    """HF CLIPEncoderLayer: self_attn.{q_proj,k_proj,v_proj,out_proj} (q scaled
    by Dh^-0.5), layer_norm1, mlp.{fc1,fc2}, layer_norm2; Pre-LN; the causal
    and the padding masks, both of finfo.min, added."""

    def __init__(self, cfg, dt, bug):
        super().__init__()
        D, Fh, eps = cfg["d_model"], cfg["d_ff"], cfg["layer_norm_eps"]
        self.self_attn = nn.Module()
        for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
            setattr(self.self_attn, n, Linear(D, D, dt))
        self.layer_norm1 = LayerNorm(D, eps, dt, bug)
        self.mlp = nn.Module()
        self.mlp.fc1 = Linear(D, Fh, dt)
        self.mlp.fc2 = Linear(Fh, D, dt)
        self.layer_norm2 = LayerNorm(D, eps, dt, bug)
        self.H, self.bug, self.act = cfg["n_heads"], bug, activation_fn(cfg["activation"], bug)

    def self_attention(self, x, masks):
        a, H, bug = self.self_attn, self.H, self.bug
        q = heads(a.q_proj(x) * (1.0 / score_divisor(x.shape[-1] // H, x.shape[-1], bug)), H)
        k, v = heads(a.k_proj(x), H), heads(a.v_proj(x), H)
        s = q @ k.transpose(-1, -2)
        if masks.causal:
            causal = torch.zeros(masks.L, masks.L, dtype=s.dtype).masked_fill(~masks.causal_allowed(),
                                                                               masks.min)
            s = s + causal
        w = softmax(s + masks.additive_padding(), bug)
        return a.out_proj(merge(w @ v, bug)), w

    def forward(self, x, masks, pre):
        ffn = lambda t: self.mlp.fc2(self.act(self.mlp.fc1(t)))
        return residual_block(x, masks, pre, self.self_attention, ffn, self.layer_norm1,
                              self.layer_norm2, self.bug)


class RMSNorm(nn.Module):
    """HF LlamaRMSNorm (Qwen2RMSNorm, Qwen3RMSNorm, MistralRMSNorm are copies):
    weight (D), x * rsqrt(mean(x^2) + eps) with the statistic in float32,
    times the weight; computed by the peer's rms_norm, which rounds it as
    the peer's emulation does (and carries the eps bugs)."""

    def __init__(self, D, eps, dt, peer, offset=False, block=True):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(D, dtype=dt))
        self.eps, self.peer, self.offset, self.block = eps, peer, offset, block

    def forward(self, t):
        if self.block:  # the block's norms carry the norm bugs, q/k's do not
            return self.peer.block_rms_norm(t, self.weight, self.eps, self.offset)
        return self.peer.rms_norm(t, self.weight, self.eps, self.offset)


def maybe_linear(i, o, bias, dt):
    return nn.Linear(i, o, bias=bias, dtype=dt)


class LlamaDecoderLayer(nn.Module):
    """HF LlamaDecoderLayer (modeling_llama.py; Mistral's, Qwen2's and Qwen3's
    keep its names): self_attn.{q_proj (H Dh, D), k_proj, v_proj (Hkv Dh, D),
    o_proj (D, H Dh)} bias-free but Qwen2's q/k/v (attention_bias), Qwen3's
    self_attn.{q_norm, k_norm} (RMSNorm (Dh)) on every head before RoPE;
    mlp.{gate_proj, up_proj (F, D), down_proj (D, F)}: down(silu(gate(x)) *
    up(x)); input_layernorm, post_attention_layernorm; Pre-norm."""

    def __init__(self, cfg, dt, bug, peer):
        super().__init__()
        D, Fh, eps, H = cfg["d_model"], cfg["d_ff"], cfg["layer_norm_eps"], cfg["n_heads"]
        Hkv, Dh = cfg.get("n_kv_heads", H), cfg.get("head_dim", D // H)
        lb, qb = cfg.get("linear_bias", True), cfg.get("qkv_bias", False) or cfg.get("linear_bias", True)
        self.self_attn = nn.Module()
        self.self_attn.q_proj = maybe_linear(D, H * Dh, qb, dt)
        self.self_attn.k_proj = maybe_linear(D, Hkv * Dh, qb, dt)
        self.self_attn.v_proj = maybe_linear(D, Hkv * Dh, qb, dt)
        self.self_attn.o_proj = maybe_linear(H * Dh, D, lb, dt)
        if cfg.get("qk_norm", "none") == "rms":
            self.self_attn.q_norm = RMSNorm(Dh, eps, dt, peer, block=False)
            self.self_attn.k_norm = RMSNorm(Dh, eps, dt, peer, block=False)
        self.mlp = nn.Module()
        self.mlp.gate_proj = maybe_linear(D, Fh, lb, dt)
        self.mlp.up_proj = maybe_linear(D, Fh, lb, dt)
        self.mlp.down_proj = maybe_linear(Fh, D, lb, dt)
        off = cfg.get("rmsnorm_offset", False)  # (1 + w), should a config declare it
        self.input_layernorm = RMSNorm(D, eps, dt, peer, off)
        self.post_attention_layernorm = RMSNorm(D, eps, dt, peer, off)
        self.cfg, self.H, self.Hkv, self.Dh, self.bug, self.peer = cfg, H, Hkv, Dh, bug, peer
        self.act = activation_fn(cfg["activation"], bug)

    def project(self, lin, x, n):
        """(B, L, D) -> (B, n, L, Dh): view(hidden_shape).transpose(1, 2); the
        bug qkv_bias_dropped leaves Qwen2's biases out."""
        B, L, _ = x.shape
        b = None if self.bug == "qkv_bias_dropped" else lin.bias
        return F.linear(x, lin.weight, b).reshape(B, L, n, self.Dh).transpose(1, 2)

    def self_attention(self, x, masks):
        a, cfg, bug, peer = self.self_attn, self.cfg, self.bug, self.peer
        B, L, D = x.shape
        q, k, v = self.project(a.q_proj, x, self.H), self.project(a.k_proj, x, self.Hkv), self.project(
            a.v_proj, x, self.Hkv)
        qk = (a.q_norm.weight, a.k_norm.weight) if hasattr(a, "q_norm") else None
        late = bug == "qk_norm_after_rope"
        if qk is not None and not late:  # Qwen3Attention: q_norm(q_proj(x).view(...)), then RoPE
            q, k = peer.qk_norm(cfg, q, k, qk)
        pos = masks.positions
        q = peer.rope(q, pos, cfg["rope_base"], cfg["rope_layout"], cfg)  # apply_rotary_pos_emb, rotate_half
        k = peer.rope(k, pos, cfg["rope_base"], cfg["rope_layout"], cfg)
        if qk is not None and late:
            q, k = peer.qk_norm(cfg, q, k, qk)
        mask = masks.llama_4d
        if masks.rows is not None:  # the selected query rows only (in.rows), against every key
            q, mask = q[:, :, masks.rows], mask[:, :, masks.rows]
        k, v = peer.repeat_kv(k, self.H // self.Hkv), peer.repeat_kv(v, self.H // self.Hkv)
        s = (q @ k.transpose(-1, -2)) * (1.0 / score_divisor(self.Dh, D, bug))  # * self.scaling
        w = softmax(s + mask, bug)
        return a.o_proj(merge(w @ v, bug)), w

    def forward(self, x, masks, pre):
        m, bug = self.mlp, self.bug
        if bug == "glu_halves_swapped":  # the up projection activated instead of the gate
            ffn = lambda t: m.down_proj(self.act(m.up_proj(t)) * m.gate_proj(t))
        else:
            ffn = lambda t: m.down_proj(self.act(m.gate_proj(t)) * m.up_proj(t))
        return residual_block(x, masks, pre, self.self_attention, ffn, self.input_layernorm,
                              self.post_attention_layernorm, bug, masks.rows)


class LlamaModel(nn.Module):
    """HF LlamaModel (MistralModel, Qwen2Model, Qwen3Model): embed_tokens (V, D)
    unscaled, layers, the final norm; positions 0 .. L-1 (position_ids
    default to the cache positions, whatever the padding); one 4D mask of
    finfo.min, causal (unless the embedding model declares it bidirectional),
    padded keys and, for Mistral, keys outside the sliding window (masking_utils'
    sliding_window_overlay), a masked pair getting min once."""

    def __init__(self, cfg, dt, bug, peer):
        super().__init__()
        D, N = cfg["d_model"], cfg["n_layers"]
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], D, dtype=dt)
        self.layers = nn.ModuleList(LlamaDecoderLayer(cfg, dt, bug, peer) for _ in range(N))
        if cfg["final_norm"]:
            self.norm = RMSNorm(D, cfg["layer_norm_eps"], dt, peer, cfg.get("rmsnorm_offset", False))
        self.cfg, self.bug, self.peer = cfg, bug, peer

    def forward(self, case):
        cfg, bug = self.cfg, self.bug
        tokens = case.i("in.tokens")
        B, L = tokens.shape
        x = self.embed_tokens(tokens) * embed_scale(cfg, bug)
        out = {"embed": x}
        masks = Masks(case, B, L, bug)
        masks.positions = case.positions(L)
        masks.llama_4d = masks.combined_4d().masked_fill(self.peer.outside_window(cfg, L), masks.min)
        pre = (cfg["norm"] == "pre") != (bug == "pre_post_swapped")
        # in.rows: the last layer computes its selected query rows only, as an implementation
        # serving them would (keys and values from every position); x is then (B, R, D)
        rows = case.i("in.rows") if case.has("in.rows") else None
        for i, layer in enumerate(self.layers):
            masks.rows = rows if i == len(self.layers) - 1 else None
            x, steps = layer(x, masks, pre)
            out.update({f"layers.{i}.{k}": v for k, v in steps.items()})
        if hasattr(self, "norm") and bug != "missing_final_norm":
            x = self.norm(x)
            out["norm"] = x
        out["output"] = x
        return out


def residual_block(x, masks, pre, attn, ffn, ln1, ln2, bug, rows=None):
    """Pre-LN  h = x + attn(ln1(x)), y = h + ffn(ln2(h));
    Post-LN h = ln1(x + attn(x)),  y = ln2(h + ffn(h));
    with refenc's step names.  ffn_residual_dropped (a bug refenc does not
    know) drops the FFN's residual.  With rows (in.rows), attn returns those
    query rows only, and the block goes on with x's rows: (B, R, D)."""
    keep = 0.0 if bug == "ffn_residual_dropped" else 1.0
    at = (lambda t: t) if rows is None else (lambda t: t[:, rows])
    if pre:
        n1 = ln1(x)
        a, w = attn(n1, masks)
        n1, h = at(n1), at(x) + a
        n2 = ln2(h)
        f = ffn(n2)
        y = keep * h + f
    else:
        a, w = attn(x, masks)
        n1 = ln1(at(x) + a)
        f = ffn(n1)
        n2 = ln2(keep * n1 + f)
        y = n2
    return y, {"norm1": n1, "self_attn.weights": w, "self_attn": a, "norm2": n2, "ffn": f, "output": y}


class Family(nn.Module):
    """One family's encoder under its HF names: the embeddings, the layer stack
    and, for GPT-2 and CLIP, the final LayerNorm."""

    def __init__(self, cfg, dt, bug):
        super().__init__()
        fam, D, N = cfg["family"], cfg["d_model"], cfg["n_layers"]
        V, P, T, eps = cfg["vocab_size"], cfg["max_len"], cfg.get("type_vocab_size", 0), cfg["layer_norm_eps"]
        emb_eps = cfg.get("embedding_norm_eps", eps)
        self.fam, self.cfg, self.bug = fam, cfg, bug
        if fam in ("bert", "roberta", "distilbert"):
            self.embeddings = nn.Module()
            self.embeddings.word_embeddings = nn.Embedding(V, D, dtype=dt)
            self.embeddings.position_embeddings = nn.Embedding(P, D, dtype=dt)
            if T > 0:
                self.embeddings.token_type_embeddings = nn.Embedding(T, D, dtype=dt)
            if cfg.get("embedding_norm", False):
                self.embeddings.LayerNorm = LayerNorm(D, emb_eps, dt, bug)
        if fam in ("bert", "roberta"):
            self.encoder = nn.Module()
            self.encoder.layer = nn.ModuleList(BertLayer(cfg, dt, bug) for _ in range(N))
        elif fam == "distilbert":
            self.transformer = nn.Module()
            self.transformer.layer = nn.ModuleList(DistilBertLayer(cfg, dt, bug) for _ in range(N))
        elif fam == "gpt2":
            self.wte = nn.Embedding(V, D, dtype=dt)
            self.wpe = nn.Embedding(P, D, dtype=dt)
            self.h = nn.ModuleList(GPT2Block(cfg, dt, bug) for _ in range(N))
            if cfg["final_norm"]:
                self.ln_f = LayerNorm(D, eps, dt, bug)
        elif fam == "clip-text":
            self.embeddings = nn.Module()
            self.embeddings.token_embedding = nn.Embedding(V, D, dtype=dt)
            self.embeddings.position_embedding = nn.Embedding(P, D, dtype=dt)
            self.encoder = nn.Module()
            self.encoder.layers = nn.ModuleList(CLIPEncoderLayer(cfg, dt, bug) for _ in range(N))
            if cfg["final_norm"]:
                self.final_layer_norm = LayerNorm(D, eps, dt, bug)

    def parts(self):
        """(word, position, token types or None, embedding LN or None, layers, final LN or None)."""
        e = getattr(self, "embeddings", None)
        if self.fam == "gpt2":
            return self.wte, self.wpe, None, None, self.h, getattr(self, "ln_f", None)
        if self.fam == "clip-text":
            return (e.token_embedding, e.position_embedding, None, None, self.encoder.layers,
                    getattr(self, "final_layer_norm", None))
        layers = self.transformer.layer if self.fam == "distilbert" else self.encoder.layer
        return (e.word_embeddings, e.position_embeddings, getattr(e, "token_type_embeddings", None),
                getattr(e, "LayerNorm", None), layers, None)

    def forward(self, case):
        cfg, bug = self.cfg, self.bug
        tokens = case.i("in.tokens")
        B, L = tokens.shape
        word, pos, types, emb_ln, layers, final = self.parts()
        # the embedding, in HF BertEmbeddings' order: (word + type) + position
        x = word(tokens) * embed_scale(cfg, bug)
        if types is not None:
            x = x + types(token_types(case, B, L, bug))
        x = x + pos(position_ids(case, tokens, B, L, bug))
        if emb_ln is not None and bug != "embedding_norm_missing":
            x = emb_ln(x)
        out = {"embed": x}
        masks = Masks(case, B, L, bug)
        pre = (cfg["norm"] == "pre") != (bug == "pre_post_swapped")
        for i, layer in enumerate(layers):
            x, steps = layer(x, masks, pre)
            out.update({f"layers.{i}.{k}": v for k, v in steps.items()})
        if final is not None and bug != "missing_final_norm":
            x = final(x)
            out["norm"] = x
        out["output"] = x
        return out


# ---- refenc's names to the family's ---------------------------------------------------

def hf_state_dict(cfg, tensors):
    """A golden case's parameters (refenc's names, numpy arrays) under the
    family's names and layouts, as docs/families.md's tables say read
    backwards: in_proj's row blocks become query, key and value; GPT-2's
    weights are transposed into Conv1D's (in, out)."""
    fam, D, N = cfg["family"], cfg["d_model"], cfg["n_layers"]
    r = lambda name: np.asarray(tensors[name], dtype=np.float64)
    if fam in LLAMA_FAMILIES:
        return llama_state_dict(cfg, r, tensors)
    if fam == "modernbert":
        return modernbert_state_dict(cfg, r, tensors)
    if fam == "gemma3":
        return llama_state_dict(cfg, r, tensors, GEMMA3_NORMS)
    if fam == "t5-encoder":
        return t5_encoder_state_dict(cfg, r, tensors)
    if fam == "nomic-bert":
        return nomic_bert_state_dict(cfg, r, tensors)
    if fam == "jina-bert-v2":
        return jina_bert_v2_state_dict(cfg, r, tensors)
    if fam == "gte":
        return gte_state_dict(r, tensors)
    sd = {}

    def qkv(prefix, names, i):
        W, b = r(f"layers.{i}.self_attn.in_proj_weight"), r(f"layers.{i}.self_attn.in_proj_bias")
        for k, n in enumerate(names):
            sd[f"{prefix}{n}.weight"] = W[k * D:(k + 1) * D]
            sd[f"{prefix}{n}.bias"] = b[k * D:(k + 1) * D]

    def lin(dst, src):
        sd[dst + ".weight"], sd[dst + ".bias"] = r(src + ".weight"), r(src + ".bias")

    if fam in ("bert", "roberta", "distilbert"):
        sd["embeddings.word_embeddings.weight"] = r("embedding.weight")
        sd["embeddings.position_embeddings.weight"] = r("pos_embedding.weight")
        if "token_type_embedding.weight" in tensors:
            sd["embeddings.token_type_embeddings.weight"] = r("token_type_embedding.weight")
        if "embedding_norm.weight" in tensors:
            lin("embeddings.LayerNorm", "embedding_norm")
    for i in range(N):
        L = f"layers.{i}"
        if fam in ("bert", "roberta"):
            p = f"encoder.layer.{i}."
            qkv(p + "attention.self.", ("query", "key", "value"), i)
            lin(p + "attention.output.dense", L + ".self_attn.out_proj")
            lin(p + "attention.output.LayerNorm", L + ".norm1")
            lin(p + "intermediate.dense", L + ".linear1")
            lin(p + "output.dense", L + ".linear2")
            lin(p + "output.LayerNorm", L + ".norm2")
        elif fam == "distilbert":
            p = f"transformer.layer.{i}."
            qkv(p + "attention.", ("q_lin", "k_lin", "v_lin"), i)
            lin(p + "attention.out_lin", L + ".self_attn.out_proj")
            lin(p + "sa_layer_norm", L + ".norm1")
            lin(p + "ffn.lin1", L + ".linear1")
            lin(p + "ffn.lin2", L + ".linear2")
            lin(p + "output_layer_norm", L + ".norm2")
        elif fam == "gpt2":
            p = f"h.{i}."
            lin(p + "ln_1", L + ".norm1")
            lin(p + "ln_2", L + ".norm2")
            sd[p + "attn.c_attn.weight"] = r(L + ".self_attn.in_proj_weight").T
            sd[p + "attn.c_attn.bias"] = r(L + ".self_attn.in_proj_bias")
            sd[p + "attn.c_proj.weight"] = r(L + ".self_attn.out_proj.weight").T
            sd[p + "attn.c_proj.bias"] = r(L + ".self_attn.out_proj.bias")
            sd[p + "mlp.c_fc.weight"] = r(L + ".linear1.weight").T
            sd[p + "mlp.c_fc.bias"] = r(L + ".linear1.bias")
            sd[p + "mlp.c_proj.weight"] = r(L + ".linear2.weight").T
            sd[p + "mlp.c_proj.bias"] = r(L + ".linear2.bias")
        elif fam == "clip-text":
            p = f"encoder.layers.{i}."
            qkv(p + "self_attn.", ("q_proj", "k_proj", "v_proj"), i)
            lin(p + "self_attn.out_proj", L + ".self_attn.out_proj")
            lin(p + "layer_norm1", L + ".norm1")
            lin(p + "mlp.fc1", L + ".linear1")
            lin(p + "mlp.fc2", L + ".linear2")
            lin(p + "layer_norm2", L + ".norm2")
    if fam == "gpt2":
        sd["wte.weight"], sd["wpe.weight"] = r("embedding.weight"), r("pos_embedding.weight")
        if "norm.weight" in tensors:
            lin("ln_f", "norm")
    elif fam == "clip-text":
        sd["embeddings.token_embedding.weight"] = r("embedding.weight")
        sd["embeddings.position_embedding.weight"] = r("pos_embedding.weight")
        if "norm.weight" in tensors:
            lin("final_layer_norm", "norm")
    return sd


LLAMA_NORMS = (("input_layernorm", "norm1"), ("post_attention_layernorm", "norm2"))
# Gemma3TextModel's four norms a layer: post_attention_layernorm normalises the
# attention's output (sandwich_norm), pre_feedforward_layernorm is the FFN's
GEMMA3_NORMS = (("input_layernorm", "norm1"), ("post_attention_layernorm", "post_attn_norm"),
                ("pre_feedforward_layernorm", "norm2"), ("post_feedforward_layernorm", "post_ffn_norm"))


def llama_state_dict(cfg, r, tensors, norms=LLAMA_NORMS):
    """LlamaModel's names from refenc's (docs/families.md, "llama"): in_proj's
    rows split at H Dh and H Dh + Hkv Dh into q_proj, k_proj, v_proj (and
    Qwen2's biases alike); linear1's (2F, D) halves into gate_proj and
    up_proj, the gate the half glu_gate names; the norms as `norms` names
    them (Llama: norm1, norm2 are input_layernorm, post_attention_layernorm;
    Gemma 3: GEMMA3_NORMS)."""
    D, N, H, F_ = cfg["d_model"], cfg["n_layers"], cfg["n_heads"], cfg["d_ff"]
    Hkv, Dh = cfg.get("n_kv_heads", H), cfg.get("head_dim", D // H)
    E, Ekv = H * Dh, Hkv * Dh
    gate_first = cfg.get("glu_gate", "first") == "first"
    sd = {"embed_tokens.weight": r("embedding.weight")}
    for i in range(N):
        L, p = f"layers.{i}.", f"layers.{i}."
        for kind in ("weight", "bias"):
            src = L + "self_attn.in_proj_" + kind
            if src in tensors:
                W = r(src)
                sd[p + "self_attn.q_proj." + kind] = W[:E]
                sd[p + "self_attn.k_proj." + kind] = W[E:E + Ekv]
                sd[p + "self_attn.v_proj." + kind] = W[E + Ekv:E + 2 * Ekv]
            if L + "linear1." + kind in tensors:
                W1 = r(L + "linear1." + kind)
                first, second = W1[:F_], W1[F_:]
                sd[p + "mlp.gate_proj." + kind], sd[p + "mlp.up_proj." + kind] = \
                    (first, second) if gate_first else (second, first)
            for dst, name in (("self_attn.o_proj.", "self_attn.out_proj."), ("mlp.down_proj.", "linear2.")):
                if L + name + kind in tensors:
                    sd[p + dst + kind] = r(L + name + kind)
        for dst, name in (("self_attn.q_norm", "self_attn.q_norm"), ("self_attn.k_norm", "self_attn.k_norm")) + norms:
            if L + name + ".weight" in tensors:
                sd[p + dst + ".weight"] = r(L + name + ".weight")
    if "norm.weight" in tensors:
        sd["norm.weight"] = r("norm.weight")
    return sd


def modernbert_state_dict(cfg, r, tensors):
    """ModernBertModel's names from refenc's (docs/families.md, "modernbert"):
    Wqkv is in_proj as it is (modeling_modernbert: qkv.view(..., 3, H, Dh),
    q, k, v each D rows), Wi is linear1 (2F, D) as it is (input, gate =
    Wi(x).chunk(2): the first half activated), the norms bias-free; layer 0
    has no attn_norm (nn.Identity())."""
    sd = {"embeddings.tok_embeddings.weight": r("embedding.weight"),
          "embeddings.norm.weight": r("embedding_norm.weight")}
    for i in range(cfg["n_layers"]):
        L = f"layers.{i}."
        for dst, src in (("attn_norm", "norm1"), ("attn.Wqkv", "self_attn.in_proj"), ("attn.Wo", "self_attn.out_proj"),
                         ("mlp_norm", "norm2"), ("mlp.Wi", "linear1"), ("mlp.Wo", "linear2")):
            name = L + src + ("_weight" if src == "self_attn.in_proj" else ".weight")
            if name in tensors:
                sd[L + dst + ".weight"] = r(name)
    if "norm.weight" in tensors:
        sd["final_norm.weight"] = r("norm.weight")
    return sd


def t5_encoder_state_dict(cfg, r, tensors):
    """T5EncoderModel's names from refenc's (docs/families.md, "t5-encoder";
    modeling_t5.py): shared is the embedding; in_proj's rows split at H d_kv
    and 2 H d_kv into SelfAttention.q, k, v; block 0 alone holds
    relative_attention_bias (nb, H); linear1 is DenseReluDense.wi, or, gated
    (v1.1), its halves wi_0 (the activated one, glu_gate first) and wi_1; the
    T5LayerNorms have a weight only."""
    H, F_ = cfg["n_heads"], cfg["d_ff"]
    E = H * cfg.get("head_dim", cfg["d_model"] // H)
    gated = cfg.get("ffn_type", "mlp") == "glu"
    gate_first = cfg.get("glu_gate", "first") == "first"
    sd = {"shared.weight": r("embedding.weight")}
    for i in range(cfg["n_layers"]):
        L, p = f"layers.{i}.", f"encoder.block.{i}."
        W = r(L + "self_attn.in_proj_weight")
        for k, n in enumerate("qkv"):
            sd[p + f"layer.0.SelfAttention.{n}.weight"] = W[k * E:(k + 1) * E]
        sd[p + "layer.0.SelfAttention.o.weight"] = r(L + "self_attn.out_proj.weight")
        if L + "self_attn.relative_attention_bias.weight" in tensors:
            sd[p + "layer.0.SelfAttention.relative_attention_bias.weight"] = \
                r(L + "self_attn.relative_attention_bias.weight")
        sd[p + "layer.0.layer_norm.weight"] = r(L + "norm1.weight")
        sd[p + "layer.1.layer_norm.weight"] = r(L + "norm2.weight")
        W1 = r(L + "linear1.weight")
        if gated:
            first, second = W1[:F_], W1[F_:]
            sd[p + "layer.1.DenseReluDense.wi_0.weight"], sd[p + "layer.1.DenseReluDense.wi_1.weight"] = \
                (first, second) if gate_first else (second, first)
        else:
            sd[p + "layer.1.DenseReluDense.wi.weight"] = W1
        sd[p + "layer.1.DenseReluDense.wo.weight"] = r(L + "linear2.weight")
    if "norm.weight" in tensors:
        sd["encoder.final_layer_norm.weight"] = r("norm.weight")
    return sd


def gte_state_dict(r, tensors):
    """GTE's NewModel names from refenc's (docs/families.md, "gte";
    Alibaba-NLP/new-impl modeling.py): attention.qkv_proj is in_proj as it is
    (split(all_head_size): q, k, v); mlp.up_gate_proj is linear1 as it is
    ([up | gate], glu_gate second) and has no bias (linear1_bias false);
    embeddings.LayerNorm, attn_ln, mlp_ln are LayerNorms with biases."""
    sd = {"embeddings.word_embeddings.weight": r("embedding.weight")}
    if "token_type_embedding.weight" in tensors:
        sd["embeddings.token_type_embeddings.weight"] = r("token_type_embedding.weight")
    names = (("embeddings.LayerNorm.", "embedding_norm."),)
    i = 0
    while f"layers.{i}.norm1.weight" in tensors:
        L, p = f"layers.{i}.", f"encoder.layer.{i}."
        names += ((p + "attention.qkv_proj.", L + "self_attn.in_proj_"),
                  (p + "attention.o_proj.", L + "self_attn.out_proj."),
                  (p + "attn_ln.", L + "norm1."), (p + "mlp.up_gate_proj.", L + "linear1."),
                  (p + "mlp.down_proj.", L + "linear2."), (p + "mlp_ln.", L + "norm2."))
        i += 1
    for dst, src in names:
        for kind in ("weight", "bias"):
            if src + kind in tensors:
                sd[dst + kind] = r(src + kind)
    return sd


def nomic_bert_state_dict(cfg, r, tensors):
    """NomicBertModel's names from refenc's (docs/families.md, "nomic-bert";
    contrastors' modeling_hf_nomic_bert.py): attn.Wqkv is in_proj as it is
    (rearrange "(three h d)": q, k, v each D rows); linear1's (2F, D) halves
    are mlp.fc12, the silu-activated one (the gate, glu_gate first), and
    mlp.fc11; emb_ln, norm1, norm2 are LayerNorms with biases; the linears'
    biases exist with linear_bias."""
    F_ = cfg["d_ff"]
    gate_first = cfg.get("glu_gate", "first") == "first"
    sd = {"embeddings.word_embeddings.weight": r("embedding.weight")}
    if "token_type_embedding.weight" in tensors:
        sd["embeddings.token_type_embeddings.weight"] = r("token_type_embedding.weight")
    for kind in ("weight", "bias"):
        if "embedding_norm." + kind in tensors:
            sd["emb_ln." + kind] = r("embedding_norm." + kind)
    for i in range(cfg["n_layers"]):
        L, p = f"layers.{i}.", f"encoder.layers.{i}."
        for kind in ("weight", "bias"):
            for dst, src in (("attn.Wqkv.", "self_attn.in_proj_"), ("attn.out_proj.", "self_attn.out_proj."),
                             ("norm1.", "norm1."), ("mlp.fc2.", "linear2."), ("norm2.", "norm2.")):
                if L + src + kind in tensors:
                    sd[p + dst + kind] = r(L + src + kind)
            if L + "linear1." + kind in tensors:
                W1 = r(L + "linear1." + kind)
                first, second = W1[:F_], W1[F_:]
                sd[p + "mlp.fc12." + kind], sd[p + "mlp.fc11." + kind] = \
                    (first, second) if gate_first else (second, first)
    return sd


def jina_bert_v2_state_dict(cfg, r, tensors):
    """JinaBertModel's names from refenc's (docs/families.md, "jina-bert-v2";
    jina-bert-implementation's modeling_bert.py, candle's jina_bert.rs):
    BERT's embeddings without a positions table and BERT's attention names
    (in_proj's row blocks are query, key and value); mlp.gated_layers is
    linear1 as it is ([gated; non_gated], the first half activated), its bias
    only under linear1_bias; mlp.wo is linear2 and mlp.layernorm norm2."""
    D = cfg["d_model"]
    sd = {"embeddings.word_embeddings.weight": r("embedding.weight")}
    if "token_type_embedding.weight" in tensors:
        sd["embeddings.token_type_embeddings.weight"] = r("token_type_embedding.weight")
    for kind in ("weight", "bias"):
        if "embedding_norm." + kind in tensors:
            sd["embeddings.LayerNorm." + kind] = r("embedding_norm." + kind)
    for i in range(cfg["n_layers"]):
        L, p = f"layers.{i}.", f"encoder.layer.{i}."
        for kind in ("weight", "bias"):
            if L + "self_attn.in_proj_" + kind in tensors:
                W = r(L + "self_attn.in_proj_" + kind)
                for k, n in enumerate(("query", "key", "value")):
                    sd[f"{p}attention.self.{n}.{kind}"] = W[k * D:(k + 1) * D]
            for dst, src in (("attention.output.dense.", "self_attn.out_proj."),
                             ("attention.output.LayerNorm.", "norm1."), ("mlp.gated_layers.", "linear1."),
                             ("mlp.wo.", "linear2."), ("mlp.layernorm.", "norm2.")):
                if L + src + kind in tensors:
                    sd[p + dst + kind] = r(L + src + kind)
    return sd


def build(case, bug, peer):
    """The family's modules holding the case's parameters under their HF
    names (eval mode); peer: torch_peer's module (its RMSNorm, RoPE,
    repeat_kv, q/k norm and window mask, for the Llama-style families)."""
    if case.cfg["family"] in LLAMA_FAMILIES:
        cfg = case.cfg  # LlamaModel is Llama's blocks: a config overriding them away is not modelled
        off = {k: v for k, v in LLAMA_BLOCKS.items() if cfg.get(k) != v}
        if off:
            raise ValueError(f"{case.name}: the {cfg['family']} family's modules need "
                             + ", ".join(f"{k} {v!r}" for k, v in off.items()))
        model = LlamaModel(cfg, case.dt, bug, peer)
    else:
        model = Family(case.cfg, case.dt, bug)
    sd = {k: torch.from_numpy(np.ascontiguousarray(v)).to(case.dt)
          for k, v in hf_state_dict(case.cfg, case.params).items()}
    model.load_state_dict(sd, strict=True)
    model.eval()
    return model


def run(case, bug, peer):
    """The family case's outputs under refenc's step names (build's model,
    without autograd)."""
    model = build(case, bug, peer)
    with torch.no_grad():
        return model(case)
