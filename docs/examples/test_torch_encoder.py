"""Certifying a PyTorch encoder with pytest: one test per golden case and
mode, so CI shows refenc's verdicts as ordinary test results.  Copy this
file, replace TinyEncoder with your model and SUPPORTS with what it
supports; docs/python.md explains each part.

    /usr/bin/python3 -m pytest -v test_torch_encoder.py

A case the model does not support is skipped with the features it needs.
In mode float32-bf16 (computing in float32, results written as BF16) a case
that float32 arithmetic cannot pass (its float32_hazard) is an expected
failure, with the reason.
"""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import refenc


# ---- the model under test: a small encoder written from torch operations ----

class SelfAttention(nn.Module):
    def __init__(self, D, H, temperature):
        super().__init__()
        self.H, self.temperature = H, temperature
        self.in_proj_weight = nn.Parameter(torch.empty(3 * D, D))
        self.in_proj_bias = nn.Parameter(torch.empty(3 * D))
        self.out_proj = nn.Linear(D, D)

    def forward(self, x, bias, pad):
        B, L, D = x.shape
        q, k, v = (t.view(B, L, self.H, -1).transpose(1, 2)
                   for t in F.linear(x, self.in_proj_weight, self.in_proj_bias).chunk(3, dim=-1))
        s = q @ k.transpose(-1, -2) / (math.sqrt(D // self.H) * self.temperature) + bias
        if pad is not None:
            s = s.masked_fill(pad[:, None, None, :], float("-inf"))
        w = torch.softmax(s, dim=-1).nan_to_num(0.0)  # a query that sees no key: weights 0
        return self.out_proj((w @ v).transpose(1, 2).reshape(B, L, D)), w


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        D = c["d_model"]
        self.pre = c["norm"] == "pre"
        self.self_attn = SelfAttention(D, c["n_heads"], c["temperature"])
        self.linear1, self.linear2 = nn.Linear(D, c["d_ff"]), nn.Linear(c["d_ff"], D)
        self.norm1 = nn.LayerNorm(D, eps=c["layer_norm_eps"])
        self.norm2 = nn.LayerNorm(D, eps=c["layer_norm_eps"])
        self.act = {"relu": F.relu, "gelu": F.gelu,
                    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh")}[c["activation"]]

    def ffn(self, x):
        return self.linear2(self.act(self.linear1(x)))

    def forward(self, x, bias, pad):
        if self.pre:
            x = x + self.self_attn(self.norm1(x), bias, pad)[0]
            return x + self.ffn(self.norm2(x))
        x = self.norm1(x + self.self_attn(x, bias, pad)[0])
        return self.norm2(x + self.ffn(x))


class SinusoidalPE(nn.Module):
    def forward(self, x, positions):
        D = x.shape[-1]
        angle = positions[:, None].to(x.dtype) * torch.exp(
            torch.arange(0, D, 2, dtype=x.dtype) * (-math.log(10000.0) / D))
        pe = torch.stack((angle.sin(), angle.cos()), dim=-1).flatten(-2)  # sin at even, cos at odd
        return x + pe


class TinyEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.pe = SinusoidalPE() if c["positional"] == "sinusoidal" else None
        self.layers = nn.ModuleList(Layer(c) for _ in range(c["n_layers"]))
        self.norm = nn.LayerNorm(c["d_model"], eps=c["layer_norm_eps"]) if c["final_norm"] else None

    def forward(self, x, positions, pad=None, attn_mask=None):
        L = x.shape[1]
        bias = torch.zeros(L, L, dtype=x.dtype) if attn_mask is None else attn_mask.to(x.dtype)
        if self.c["causal"]:
            bias = bias.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), float("-inf"))
        if self.pe is not None:
            x = self.pe(x, positions)
        for layer in self.layers:
            x = layer(x, bias, pad)
        return self.norm(x) if self.norm is not None else x

    def steps(self):
        """Which module computes which refenc step (docs/architecture.md)."""
        m = {self.pe: "embed"} if self.pe is not None else {}
        for i, layer in enumerate(self.layers):
            m.update({layer.norm1: f"layers.{i}.norm1", layer.norm2: f"layers.{i}.norm2",
                      layer.self_attn: (f"layers.{i}.self_attn", f"layers.{i}.self_attn.weights"),
                      layer.linear2: f"layers.{i}.ffn", layer: f"layers.{i}.output"})
        if self.norm is not None:
            m[self.norm] = "norm"
        return m


# ---- certifying it -----------------------------------------------------------

# What TinyEncoder supports, as refenc's case features (docs/python.md);
# cases needing anything else (tokens, RoPE, ALiBi, a learned PE, the
# component cases) are skipped with the reason.
SUPPORTS = {"component=encoder", "input=x", "norm=*", "final_norm=*", "activation=*", "causal=*",
            "positional=none", "positional=sinusoidal", "positions", "key_padding_mask", "attn_mask",
            "temperature"}

MODES = {"float64": (torch.float64, "F64"), "float32-bf16": (torch.float32, "BF16")}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", refenc.pytest_cases(SUPPORTS))
def test_encoder(case, mode, tmp_path):
    dtype, results_dtype = MODES[mode]
    model = TinyEncoder(case.config).to(dtype)
    model.load_state_dict(refenc.state_dict(case, dtype))
    x = refenc.tensor(case.inputs["in.x"], dtype)
    positions = refenc.tensor(case.inputs["in.positions"]) if "in.positions" in case.inputs else torch.arange(x.shape[1])
    pad = refenc.tensor(case.inputs["in.key_padding_mask"]) if "in.key_padding_mask" in case.inputs else None
    mask = refenc.tensor(case.inputs["in.attn_mask"], dtype) if "in.attn_mask" in case.inputs else None
    with torch.no_grad(), refenc.capture(model, model.steps()) as cap:
        y = model(x, positions, pad, mask)
    case.write_results(tmp_path, {"output": y, **cap.outputs}, dtype=results_dtype)
    verdict = refenc.certify_case(case, tmp_path)
    if verdict.verdict == "XFAIL":  # a case this dtype cannot be expected to pass (docs/certify.md)
        pytest.xfail(verdict.hazard)
    verdict.assert_pass()
