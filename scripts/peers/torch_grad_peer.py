#!/usr/bin/python3
"""The PyTorch autograd peer of the gradient goldens: for every golden case
that holds gradients (grad.*, made with `refenc golden --grad`), runs the
PyTorch peer's forward (torch_peer.py: the same model construction, the same
float16/bfloat16 model) with autograd, backpropagates the case's upstream
gradient in.grad.dY (loss = sum dY * out.output) and writes out.output and
every gradient the case lists, for `refenc certify` (docs/gradients.md,
"Certifying a PyTorch backward").

  float64, float32  PyTorch's own autograd in that dtype.
  bfloat16 --native PyTorch's own bfloat16 CPU kernels, forward and autograd.
  float16, bfloat16 the forward as torch_peer computes it (float32 operations
                    on values of the dtype, every operation's output rounded
                    to it), and the backward the same way: every aten
                    operation autograd runs (mm, native_layer_norm_backward,
                    gelu_backward, _softmax_backward_data,
                    embedding_dense_backward, the additions of gradient
                    contributions) computes in float32 and its output is
                    rounded to the dtype (a TorchDispatchMode): the
                    straightforward backward of a tensor-core or fused CPU
                    implementation.

The parameters' gradients are taken where the model holds its parameters:
the leaves torch_peer's Case.t gives the layers built from torch operations,
or a family's modules (torch_families.Family under Hugging Face's names),
mapped back to refenc's names through the family's own state-dict map.

--bug injects a backward bug for the negative controls: each of the twelve
named backward bugs (refenc certify --list-grad-bugs) as a custom
torch.autograd.Function whose forward is the model's operation and whose
backward has the bug ("the injected backward bugs" below; make
check-grad-diagnosis certifies each in four dtypes), or
  grad_scaled                       one parameter gradient (the last layer's
                                    linear1.weight) times 1.5

    scripts/peers/torch_grad_peer.py --golden golden --out results/tg-bf16 --dtype bfloat16 --certify

--check-pinned FILE runs every mode FILE lists (a dtype, and a bug or none)
in this one process, certifies each with --cli, and compares every case's
verdict with the one pinned (make certify-torch-grad, FILE
scripts/peers/torch_grad_expected.json): a correct peer passes every case in
all four dtypes, each injected bug fails every case in each.
"""
import argparse
import contextlib
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_peer  # noqa: E402  (the forward peer: its Case, its model construction, its float16/bfloat16 model)
import torch_families  # noqa: E402

refenc = torch_peer.refenc
ROUND = None  # the RoundEveryOp of the float16/bfloat16 backward, while it runs


# ---- the backward in float16 and bfloat16 ----------------------------------------------

class RoundEveryOp(TorchDispatchMode):
    """While active, every aten operation's float32 output is rounded to dt
    (round to nearest even); views and in-place updates alias a tensor that
    is already of the dtype and are left alone."""

    def __init__(self, dt):
        super().__init__()
        self.dt, self.off = dt, False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.off or any(r.alias_info is not None for r in func._schema.returns):
            return out
        return tree_map(lambda t: t.to(self.dt).to(torch.float32)
                        if isinstance(t, torch.Tensor) and t.dtype == torch.float32 else t, out)


# ---- the injected backward bugs -----------------------------------------------------------
# Each is what a PyTorch user writes: a custom torch.autograd.Function whose
# forward is the operation the model calls (the same torch operations, so the
# same values, rounded alike in the float16/bfloat16 model) and whose
# backward is written by hand, with the bug.  inject(bug, case) puts it where
# the model calls the operation (F.layer_norm, F.linear, F.gelu, F.embedding,
# torch_peer.rope, or the attention's core, below) for one case's forward.

def fused(backward):
    """A hand-written backward as one kernel: in the float16/bfloat16 model it
    computes in float32 and rounds only its outputs to the dtype, as the
    RoundEveryOp treats aten's fused backward operations (native_layer_norm_backward,
    _softmax_backward_data, gelu_backward), rather than rounding each step."""
    def run(ctx, *grads):
        if ROUND is None:
            return backward(ctx, *grads)
        ROUND.off = True
        try:
            outs = backward(ctx, *grads)
        finally:
            ROUND.off = False
        return tuple(t.to(ROUND.dt).to(torch.float32) if isinstance(t, torch.Tensor) else t for t in outs)
    return run


LN_TERMS = {  # bug -> (coefficient of mean(g), of x^ mean(g x^)); the reference's (1, 1)
    "layernorm_backward_mean_twice": (2.0, 1.0),
    "layernorm_backward_mean_missing": (0.0, 1.0),
    "layernorm_backward_variance_missing": (1.0, 0.0),
}


class LayerNormTerms(torch.autograd.Function):
    """F.layer_norm's forward; a backward dx = (g - a mean(g) - b x^ mean(g x^)) / sigma,
    g = dy w, with (a, b) = LN_TERMS[bug] (issue 25's LayerNorm bugs;
    tt-metal#53204: the mean term subtracted twice)."""

    @staticmethod
    def forward(ctx, x, w, b, eps, terms):
        ctx.save_for_backward(x, w)
        ctx.eps, ctx.has_b, ctx.terms = eps, b is not None, terms
        return ORIGINAL["layer_norm"](x, (x.shape[-1],), w, b, eps)

    @staticmethod
    @fused
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        a, b = ctx.terms
        mu = x.mean(-1, keepdim=True)
        sd = torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + ctx.eps)
        xhat = (x - mu) / sd
        g = dy * w
        dx = (g - a * g.mean(-1, keepdim=True) - b * xhat * (g * xhat).mean(-1, keepdim=True)) / sd
        red = tuple(range(dy.dim() - 1))
        return dx, (dy * xhat).sum(red), dy.sum(red) if ctx.has_b else None, None, None


class LinearBug(torch.autograd.Function):
    """F.linear's forward; the backward dx = dy W, dW = dy^T x, db = sum_n dy_n,
    but for the bug: bias_grad_not_summed_over_batch db = dy[0], the first
    token's (mlpack#3679); linear_dw_transposed dW computed as x^T dy, (in, out),
    and viewed as the (out, in) weight (reshape_as: autograd refuses the
    (in, out) shape; nntrainer#705)."""

    @staticmethod
    def forward(ctx, x, W, b, bug):
        ctx.save_for_backward(x, W)
        ctx.has_b, ctx.bug = b is not None, bug
        return ORIGINAL["linear"](x, W, b)

    @staticmethod
    @fused
    def backward(ctx, dy):
        x, W = ctx.saved_tensors
        out, inp = W.shape
        dy2, x2 = dy.reshape(-1, out), x.reshape(-1, inp)
        dx = (dy2 @ W).reshape(x.shape)
        if ctx.bug == "linear_dw_transposed":
            dW = (x2.t() @ dy2).reshape(out, inp)
        else:
            dW = dy2.t() @ x2
        db = None
        if ctx.has_b:
            db = dy2[0].clone() if ctx.bug == "bias_grad_not_summed_over_batch" else dy2.sum(0)
        return dx, dW, db, None


class GeluTanhDerivative(torch.autograd.Function):
    """Exact GELU's forward, x Phi(x); the backward takes the tanh
    approximation's derivative (aten's gelu_backward with approximate='tanh')."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ORIGINAL["gelu"](x)

    @staticmethod
    @fused
    def backward(ctx, dy):
        x, = ctx.saved_tensors
        return (torch.ops.aten.gelu_backward(dy, x, approximate="tanh"),)


class EmbeddingOverwritten(torch.autograd.Function):
    """F.embedding's forward; the backward writes dE[token] = dy at each
    position in turn, n = 0 upward, instead of accumulating (the last
    occurrence of a repeated token wins; nn-zero-to-hero#57)."""

    @staticmethod
    def forward(ctx, idx, W, padding_idx):
        ctx.save_for_backward(idx)
        ctx.shape = W.shape
        return ORIGINAL["embedding"](idx, W, padding_idx)

    @staticmethod
    @fused
    def backward(ctx, dy):
        idx, = ctx.saved_tensors
        dW = torch.zeros(ctx.shape, dtype=dy.dtype)
        rows, tok = dy.reshape(-1, ctx.shape[1]), idx.reshape(-1).tolist()
        for n, t in enumerate(tok):
            dW[t] = rows[n]
        return None, dW, None


class RopePlusTheta(torch.autograd.Function):
    """torch_peer.rope's forward, R(pos theta) x; the backward applies the same
    function to the gradient, R(+pos theta) dy, where R^T = R(-pos theta) is
    meant.  In the float16/bfloat16 model the rotation of dy is computed as the
    forward computes its rotation (the Emulation, tables in float32)."""

    @staticmethod
    def forward(ctx, x, positions, base, layout, cfg):
        ctx.args = (positions, base, layout, cfg)
        return ORIGINAL["rope"](x, positions, base, layout, cfg)

    @staticmethod
    def backward(ctx, dy):
        if torch_peer.EMU is None:
            return ORIGINAL["rope"](dy, *ctx.args), None, None, None, None
        ROUND.off = True
        try:
            with torch_peer.EMU:
                dx = ORIGINAL["rope"](dy, *ctx.args)
        finally:
            ROUND.off = False
        return dx, None, None, None, None


class AttentionCore(torch.autograd.Function):
    """The attention's core as a FlashAttention-style Function: forward P =
    softmax(s), O = P v (s the masked, scaled scores q k^T / divisor the model
    formed, so the same values); backward written out: dV = P^T dO, dP = dO v^T,
    D_i = rowsum(dO O), dS = P (dP - D), dq = dS k / divisor, dk = dS^T q / divisor,
    and nothing to s.  The bugs: softmax_backward_without_rowsum D = 0;
    attention_backward_unscaled dq, dk without the divisor;
    attention_backward_scaled_twice divided twice; attention_backward_unmasked
    P recomputed for the backward as exp(S - LSE) from the unmasked scores
    S = q k^T / divisor and the forward's LSE, so masked keys (a score of -inf or
    a finfo.min, below -1e4) get weight, dS, dk and dv."""

    @staticmethod
    def forward(ctx, q, kT, v, s, divisor, bug):
        P = ORIGINAL["softmax"](s, dim=-1)
        O = P @ v
        ctx.save_for_backward(q, kT, v, s, P, O)
        ctx.divisor, ctx.bug = divisor, bug
        return O

    @staticmethod
    @fused
    def backward(ctx, dO):
        q, kT, v, s, P, O = ctx.saved_tensors
        div, bug = ctx.divisor, ctx.bug
        if bug == "attention_backward_unmasked":
            masked = s < -1e4
            lse = torch.logsumexp(s, dim=-1, keepdim=True)
            P = torch.where(masked, torch.exp(q @ kT / div - lse), P)
        dV = P.transpose(-1, -2) @ dO
        dP = dO @ v.transpose(-1, -2)
        D = (dO * O).sum(-1, keepdim=True)
        dS = P * dP if bug == "softmax_backward_without_rowsum" else P * (dP - D)
        f = {"attention_backward_unscaled": 1.0, "attention_backward_scaled_twice": div * div}.get(bug, div)
        dq = dS @ kT.transpose(-1, -2) / f
        dkT = q.transpose(-1, -2) @ dS / f
        return dq, dkT, dV, None, None, None


ATTENTION_BUGS = ["softmax_backward_without_rowsum", "attention_backward_unscaled",
                  "attention_backward_scaled_twice", "attention_backward_unmasked"]


class AttentionHook(TorchFunctionMode):
    """Splices AttentionCore into the model's attention without changing it:
    follows the operations the attention runs (q @ k^T, the scores it becomes,
    softmax, P @ v) and replaces P @ v by AttentionCore(q, k^T, v, s).  Every
    other operation runs as it is; the first forms of P and O are dropped."""

    def __init__(self, bug, divisor):
        super().__init__()
        self.bug, self.divisor, self.qk, self.p = bug, divisor, None, {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", None)
        if name in ("matmul", "__matmul__") and len(args) == 2:
            a, b = args
            hit = self.p.get(id(a))
            if hit is not None and hit[0] is a:
                q, kT, s = hit[1]
                return AttentionCore.apply(q, kT, b, s, self.divisor, self.bug)
            out = func(*args, **kwargs)
            if a.dim() == 4 and out.shape[-1] == out.shape[-2] == a.shape[-2]:
                self.qk = (a, b)  # the scores' product q k^T
            return out
        out = func(*args, **kwargs)
        if name == "softmax" and self.qk is not None:
            self.p[id(out)] = (out, (*self.qk, args[0]))
            self.qk = None
        return out


ORIGINAL = {"layer_norm": F.layer_norm, "linear": F.linear, "gelu": F.gelu, "embedding": F.embedding,
            "softmax": torch.softmax, "rope": torch_peer.rope}


# what --bug takes: the twelve named backward bugs (refenc certify --list-grad-bugs) and grad_scaled
BUGS = list(LN_TERMS) + ATTENTION_BUGS + ["rope_backward_plus_theta", "gelu_backward_tanh_derivative",
                                          "bias_grad_not_summed_over_batch", "embedding_grad_overwritten",
                                          "linear_dw_transposed", "grad_scaled"]


class inject:
    """with inject(bug, case): the case's forward with the bug's Function in place."""

    def __init__(self, bug, case):
        self.bug, self.case, self.hook = bug, case, None

    def __enter__(self):
        bug, cfg = self.bug, self.case.cfg
        if bug in LN_TERMS:
            F.layer_norm = lambda x, shape, weight=None, bias=None, eps=1e-5: \
                LayerNormTerms.apply(x, weight, bias, eps, LN_TERMS[bug])
        elif bug in ("bias_grad_not_summed_over_batch", "linear_dw_transposed"):
            F.linear = lambda x, W, b=None: LinearBug.apply(x, W, b, bug)
        elif bug == "gelu_backward_tanh_derivative":
            F.gelu = lambda x, approximate="none": \
                GeluTanhDerivative.apply(x) if approximate == "none" else ORIGINAL["gelu"](x, approximate=approximate)
        elif bug == "embedding_grad_overwritten":  # the token embedding's table only
            tokens = self.case.i("in.tokens") if self.case.has("in.tokens") else None
            V = cfg.get("vocab_size", 0)

            def embedding(idx, W, padding_idx=None, *a, **k):
                if tokens is not None and W.shape[0] == V and idx.shape == tokens.shape and torch.equal(idx, tokens):
                    return EmbeddingOverwritten.apply(idx, W, padding_idx)
                return ORIGINAL["embedding"](idx, W, padding_idx, *a, **k)
            F.embedding = embedding
        elif bug == "rope_backward_plus_theta":
            torch_peer.rope = lambda x, positions, base, layout, cfg=None: \
                RopePlusTheta.apply(x, positions, base, layout, cfg)
        elif bug in ATTENTION_BUGS:
            Dh = cfg.get("head_dim", cfg["d_model"] // cfg["n_heads"])
            self.hook = AttentionHook(bug, math.sqrt(Dh) * cfg.get("temperature", 1.0))
            self.hook.__enter__()
        return self

    def __exit__(self, *exc):
        if self.hook is not None:
            self.hook.__exit__(*exc)
        F.layer_norm, F.linear, F.gelu, F.embedding = (ORIGINAL[k] for k in ("layer_norm", "linear", "gelu", "embedding"))
        torch_peer.rope = ORIGINAL["rope"]


# ---- the leaves: where the model holds its parameters ----------------------------------

class GradCase(torch_peer.Case):
    """torch_peer's Case whose floating inputs and parameters are autograd
    leaves, one per name (the same tensor at every use)."""

    def __init__(self, golden, dt):
        super().__init__(golden, dt)
        self.leaves = {}

    def t(self, name):
        if name not in self.leaves:
            leaf = super().t(name).detach()
            if name != "in.attn_mask":
                leaf.requires_grad_(True)
            self.leaves[name] = leaf
        return self.leaves[name]


def family_forward(case):
    """torch_families.run's model, with autograd (run is for the forward
    only: torch.no_grad()); returns the steps and {refenc name: [(module
    parameter, index array)]}: which elements of which refenc parameter each
    parameter of the family's modules holds, found by passing the element
    indices through the family's own state-dict map (hf_state_dict)."""
    model = torch_families.build(case, None, torch_peer)
    for p in model.parameters():  # values of the model's dtype, as torch_peer's Case.t gives
        with torch.no_grad():
            p.copy_(torch_peer.EMU.round(p) if torch_peer.EMU is not None else p)
    offsets, tagged, at = {}, {}, 0
    for k, v in case.params.items():
        offsets[k] = (at, np.shape(v))
        tagged[k] = np.arange(at, at + np.size(v), dtype=np.float64).reshape(np.shape(v))
        at += np.size(v)
    where = {}
    params = dict(model.named_parameters())
    for k, idx in torch_families.hf_state_dict(case.cfg, tagged).items():
        where[k] = (params[k], np.asarray(idx, dtype=np.int64))
    return model(case), where, offsets


def param_grads(case, where, offsets):
    """The refenc parameters' gradients from the family's modules' (a sum
    where an element is held twice)."""
    flat = {k: np.zeros(int(np.prod(s)) if s else 1) for k, (_, s) in offsets.items()}
    total = np.zeros(sum(f.size for f in flat.values()))
    for _, (p, idx) in where.items():
        if p.grad is not None:
            np.add.at(total, idx.reshape(-1), p.grad.detach().double().numpy().reshape(-1))
    return {k: total[at:at + int(np.prod(s))].reshape(s) for k, (at, s) in offsets.items()}


# ---- one case -----------------------------------------------------------------------------

def compute(golden, bug=None):
    """{results name: array} for a gradient case: out.output and every grad.*."""
    mode = torch_peer.EMU
    case = GradCase(golden, torch_peer.DT)
    fam = torch_families.handles(case.cfg)
    forward = (lambda: family_forward(case)) if fam else (lambda: (torch_peer.run_encoder(case), None, None))
    with contextlib.ExitStack() as stack:
        if mode is not None:
            stack.enter_context(mode)
        stack.enter_context(inject(bug, case))  # inside the Emulation: its hook sees the model's operations first
        outs, where, offsets = forward()
    y = outs["output"]
    steps = {n: outs[n] for n in ["embed"] + [f"layers.{i}.output" for i in range(case.cfg["n_layers"])]}
    for t in steps.values():
        if t.requires_grad:
            t.retain_grad()
    dY = refenc.tensor(golden.grad_dY, y.dtype)
    if mode is not None:
        dY = mode.round(dY)
        global ROUND
        ROUND = RoundEveryOp(mode.dt)
        try:
            with ROUND:
                y.backward(dY)
        finally:
            ROUND = None
    else:
        y.backward(dY)
    res = {"out.output": y.detach().double().numpy()}
    grads = param_grads(case, where, offsets) if fam else \
        {k: case.leaves[k].grad.detach().double().numpy() for k in case.params if k in case.leaves
         and case.leaves[k].grad is not None}
    for k in case.params:
        grads.setdefault(k, np.zeros(np.shape(case.params[k])))  # a parameter the loss does not reach
    if "in.x" in case.leaves:
        grads["x"] = case.leaves["in.x"].grad.detach().double().numpy()
    for n, t in steps.items():
        g = t.grad if t.grad is not None else (case.leaves["in.x"].grad if n == "embed" else None)
        if g is not None:
            grads[n] = g.detach().double().numpy()
    if bug == "grad_scaled":
        k = f"layers.{case.cfg['n_layers'] - 1}.linear1.weight"
        grads[k] = grads[k] * 1.5
    for k, g in grads.items():
        name = "grad." + k
        if name in golden.grads:
            res[name] = g
    return res


PRECISION = {"float16": (11, -14), "bfloat16": (8, -126), "float32": (24, -126)}


def without_growth(o, dtype):
    """How far a 16-bit gradient output is from the budget computed without
    the growth term G (budget.h: refenc_budget, the forward's rule on the
    emulated backward's baseline), from the certificate's figures."""
    p, emin = PRECISION[dtype]
    m = o["scale"]
    e = emin if m == 0 else max(math.frexp(m)[1] - 1, emin)
    max_abs = 2 * o["baseline_max_abs_error"] + 2 * 2.0 ** (e - p + 1)
    nmse = 4 * o["baseline_nmse"] + (2 * 2.0 ** -p) ** 2
    return max(o["max_abs_error"] / max_abs, math.sqrt(o["nmse"] / nmse))


def check_pinned(args, cases):
    """Every mode of the pinned file: compute, certify, compare; 0 when every
    case of every mode has its pinned verdict."""
    pinned = json.load(open(args.check_pinned))["modes"]
    names = sorted(c.name for c in cases)
    ok, t0 = True, time.time()
    for mode, spec in pinned.items():
        torch_peer.configure(spec["dtype"], native=spec.get("native", False))
        out = os.path.join(args.out, mode)
        for case in cases:
            case.write_results(out, compute(case, spec.get("bug")), dtype=spec["dtype"])
        cert = os.path.join(args.out, mode + ".json")
        rc = subprocess.run([args.cli, "certify", "--golden", args.golden, "--results", out, "--json", cert,
                             "--quiet", "--case", ",".join(names)], stdout=subprocess.DEVNULL).returncode
        if rc > 1:
            print(f"torch_grad_peer: refenc certify exited {rc} on {mode}", file=sys.stderr)
            return 2
        got = {}
        for c in json.load(open(cert))["cases"]:
            grads = [o for o in c["outputs"] if o["name"].startswith("grad.") and o["status"] in ("PASS", "FAIL")]
            worst = max(grads, key=lambda o: o["excess"]) if grads else None
            got[c["case"]] = (c["verdict"], len(grads), worst)
        want = spec["expect"]
        if spec.get("needs_growth"):  # the growth term's control: some parameter gradient needs it
            over = [(without_growth(o, spec["dtype"]), c["case"], o["name"])
                    for c in json.load(open(cert))["cases"] for o in c["outputs"]
                    if o["name"].startswith("grad.") and o["status"] == "PASS" and o.get("rule") == "budget"
                    and not o["name"].endswith(("output", ".embed", ".x"))]
            over = sorted(x for x in over if x[0] > 1)
            print(f"\n{mode}: {len(over)} parameter gradient(s) beyond the budget without the growth term"
                  + (f", up to {over[-1][0]:.3g} ({over[-1][1]} {over[-1][2]})" if over else ""))
            if not over:
                print("  <-- expected some: the growth term is pinned as needed here")
                ok = False
        line = []
        for name in names:
            verdict, n, worst = got[name]
            exp = want.get(name, "PASS")
            line.append(f"{name} {verdict} ({n} gradients, worst {worst['name'] if worst else '-'} "
                        f"at {worst['excess']:.3g} budgets)" if worst else f"{name} {verdict} (no gradient compared)")
            if verdict != exp or n == 0:
                line[-1] += f"  <-- expected {exp}" + (" with gradients compared" if n == 0 else "")
                ok = False
        print(f"\n{mode}:\n  " + "\n  ".join(line))
    print(f"\ncertify-torch-grad: " + ("every mode has its pinned outcome (" + args.check_pinned + ")" if ok
                                       else "UNEXPECTED OUTCOME") + f"; {time.time() - t0:.1f} s")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--golden", required=True, help="the golden directory (manifest.json, cases/)")
    ap.add_argument("--out", required=True, help="directory for the results files")
    ap.add_argument("--dtype", choices=["float64", "float32", "float16", "bfloat16"], default="float64")
    ap.add_argument("--native", action="store_true",
                    help="bfloat16: PyTorch's own bfloat16 CPU kernels, forward and autograd")
    ap.add_argument("--case", action="append", metavar="GLOB[,GLOB...]", help="only the gradient cases matching")
    ap.add_argument("--bug", choices=BUGS, help="inject a backward bug (the negative controls)")
    ap.add_argument("--certify", action="store_true",
                    help="then certify the results with refenc certify; exit 1 if a case failed")
    ap.add_argument("--check-pinned", metavar="FILE", help="run every mode FILE pins and compare (above)")
    ap.add_argument("--cli", default="build/refenc", help="the refenc CLI for --check-pinned")
    args = ap.parse_args()
    if args.native and args.dtype != "bfloat16":
        ap.error("--native goes with --dtype bfloat16 (PyTorch has no float16 CPU kernels)")
    torch_peer.configure(args.dtype, native=args.native)
    torch_peer.needs_manual = lambda case: True  # the layers from torch operations: their leaves are Case.t's
    try:
        cases = [c for c in refenc.all_cases(args.golden, args.case or "*", require_match=args.case is not None)
                 if c.grads]
    except (OSError, ValueError, refenc.FormatError) as e:
        print(f"torch_grad_peer: {e}", file=sys.stderr)
        return 2
    if args.check_pinned:
        return check_pinned(args, cases)
    what = f"torch {torch.__version__} autograd {args.dtype}" + (" (PyTorch's own kernels)" if args.native else "") + (f" with bug {args.bug}" if args.bug else "")
    for case in cases:
        case.write_results(args.out, compute(case, args.bug), dtype=args.dtype, metadata={"implementation": what})
    print(f"torch_grad_peer: {len(cases)} gradient case(s) computed in {what} into {args.out}")
    if not cases:
        return 2
    if not args.certify:
        return 0
    cert = refenc.certify(args.out, [c.name for c in cases], golden=args.golden)
    s = cert.summary
    print(f"refenc certify: {s['cases']} case(s): {s['passed']} PASS, {s['failed']} FAIL")
    if not cert.passed:
        print(cert.explain())
    return 0 if cert.passed else 1


if __name__ == "__main__":
    sys.exit(main())
