#!/usr/bin/python3
"""Measures how much a golden case's final output moves per unit of error in
its positional encoding: the factor K behind the float64 tolerance scale of
the large-position encoder cases (docs/verdict.md, "The tolerance policy").

For each case, the PyTorch peer (float64) is run 20 times with the sinusoidal
PE table, or every RoPE-rotated q and k, perturbed by uniform noise of
amplitude eps * max|value| (eps = 1e-9); K is the largest change of the output
divided by eps.  A float64 angle error of e (2.9e-11 at position 8191) then
moves the output by about K * e; the case's scale is chosen as 4 K e / atol,
rounded up to a power of two (4: margin for directions the random
perturbations do not probe).

usage: scripts/case-sensitivity.py [CASE ...]   (from the top of the tree)
"""
import sys

import torch

sys.path.insert(0, "scripts/peers")
import torch_peer as peer  # noqa: E402

EPS = 1e-9
torch.manual_seed(0)
cases = sys.argv[1:] or ["encoder_large_positions", "encoder_rope_large_positions"]
for name in cases:
    peer.configure("float64")
    case = peer.Case(peer.refenc.load_case(name, "golden"), torch.float64)
    run = peer.COMPONENTS[case.component]  # encoder or attention
    base = run(case)["output"].detach()
    orig_pe, orig_rope = peer.sinusoidal_pe, peer.rope
    K = 0.0
    for _ in range(20):
        peer.sinusoidal_pe = lambda p, D, dt: orig_pe(p, D, dt) + EPS * (2 * torch.rand(len(p), D, dtype=dt) - 1)
        def noisy_rope(x, positions, base_, layout, cfg=None):
            y = orig_rope(x, positions, base_, layout, cfg)
            return y + EPS * y.abs().max() * (2 * torch.rand_like(y) - 1)
        peer.rope = noisy_rope
        out = run(case)["output"].detach()
        peer.sinusoidal_pe, peer.rope = orig_pe, orig_rope
        K = max(K, (out - base).abs().max().item() / EPS)
    print(f"{name}: K = {K:.3g}; 4 K 2.9e-11 / 1e-11 = {4 * K * 2.9:.3g}")
