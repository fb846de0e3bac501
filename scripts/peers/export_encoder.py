#!/usr/bin/python3
"""Writes a PyTorch nn.TransformerEncoder's weights, an input batch and the
matching refenc config, the three files `refenc golden` takes for a model of
your own (docs/certify.md, "Goldens for your own model").

    scripts/peers/export_encoder.py --out mymodel --d-model 768 --heads 12 --d-ff 3072 \\
        --layers 2 --norm post --activation gelu --eps 1e-12 --batch 2 --seq-len 16 --padding 0 5

writes mymodel/weights.safetensors (the state_dict, float32, under PyTorch's
own names: layers.{i}.self_attn.in_proj_weight, ..., norm.weight),
mymodel/inputs.safetensors (in.x (B, L, D) float32 and in.key_padding_mask)
and mymodel/config.json.  Replace the freshly initialised model by yours
(load_state_dict, or your own module with the same names) and the random x
by your data: the files are what refenc reads, whatever made them.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn

ST_DTYPES = {np.dtype("float64"): "F64", np.dtype("float32"): "F32", np.dtype("float16"): "F16",
             np.dtype("int64"): "I64", np.dtype("bool"): "BOOL"}


def write_safetensors(path, tensors):
    """{name: ndarray} to a safetensors file, with numpy alone (docs/golden-format.md)."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        raw = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": ST_DTYPES[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for weights.safetensors, inputs.safetensors, config.json")
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--d-ff", type=int, default=3072)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--norm", choices=["pre", "post"], default="post")
    ap.add_argument("--activation", choices=["relu", "gelu"], default="gelu")
    ap.add_argument("--eps", type=float, default=1e-5)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=16)
    ap.add_argument("--padding", type=int, nargs="*", default=None,
                    help="trailing padding positions of each batch item")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    torch.manual_seed(a.seed)
    layer = nn.TransformerEncoderLayer(a.d_model, a.heads, a.d_ff, dropout=0.0, activation=a.activation,
                                       layer_norm_eps=a.eps, batch_first=True, norm_first=a.norm == "pre")
    final = nn.LayerNorm(a.d_model, eps=a.eps) if a.norm == "pre" else None
    model = nn.TransformerEncoder(layer, a.layers, norm=final, enable_nested_tensor=False).eval()

    os.makedirs(a.out, exist_ok=True)
    state = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    write_safetensors(os.path.join(a.out, "weights.safetensors"), state)

    x = torch.randn(a.batch, a.seq_len, a.d_model).numpy().astype(np.float32)
    inputs = {"in.x": x}
    if a.padding:
        if len(a.padding) != a.batch:
            sys.exit("--padding needs one number per batch item")
        mask = np.zeros((a.batch, a.seq_len), dtype=bool)
        for b, p in enumerate(a.padding):
            if p:
                mask[b, a.seq_len - p:] = 1
        inputs["in.key_padding_mask"] = mask
    write_safetensors(os.path.join(a.out, "inputs.safetensors"), inputs)

    config = {"model": {"d_model": a.d_model, "n_heads": a.heads, "d_ff": a.d_ff, "n_layers": a.layers,
                        "norm": a.norm, "final_norm": final is not None, "activation": a.activation,
                        "layer_norm_eps": a.eps}}
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
        f.write("\n")
    print("wrote %s/weights.safetensors (%d tensors), inputs.safetensors, config.json"
          % (a.out, len(state)))


if __name__ == "__main__":
    main()
