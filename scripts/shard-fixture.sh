#!/bin/sh
# The three files the sharding recipes of docs/certify.md ("Long runs") start
# from, for a small BERT-like model (Post-LN, exact GELU, learned positions,
# tokens): DIR/bert.json (the config, without an input), DIR/w.safetensors
# (the parameters under their state_dict names) and DIR/i.safetensors
# (in.tokens, in.key_padding_mask, in.positions).
# 2 layers x 4 batch items: 8 units per layer, one per shard of 8.
#
# The weights and inputs are the seeded ones of a case refenc golden makes
# from the same config with an input, taken apart (the in.* tensors, the
# parameters: not in.*, out.*, dontcare.* or alt.*; the config of the
# metadata), with Python's standard library.
#
# usage: scripts/shard-fixture.sh REFENC_CLI DIR
set -eu
cli=${1:?usage: shard-fixture.sh REFENC_CLI DIR}
dir=${2:?usage: shard-fixture.sh REFENC_CLI DIR}
mkdir -p "$dir"
cat > "$dir/seed.json" <<'JSON'
{"model": {"d_model": 16, "n_heads": 2, "d_ff": 32, "n_layers": 2, "norm": "post",
           "activation": "gelu", "layer_norm_eps": 1e-12, "positional": "learned",
           "max_len": 16, "vocab_size": 40, "padding_idx": 0},
 "input": {"batch": 4, "seq_len": 6, "padding": [0, 2, 1, 0]}}
JSON
"$cli" golden --config "$dir/seed.json" --outputs final --quiet --out-file "$dir/seed.safetensors"
/usr/bin/python3 - "$dir" <<'PY'
import json, struct, sys

d = sys.argv[1]
raw = open(f"{d}/seed.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
meta = header.pop("__metadata__")


def write(path, names):
    out, blobs, off = {}, [], 0
    for name in names:
        t = header[name]
        b, e = t["data_offsets"]
        out[name] = {"dtype": t["dtype"], "shape": t["shape"], "data_offsets": [off, off + e - b]}
        blobs.append(data[b:e])
        off += e - b
    h = json.dumps(out).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


names = sorted(header)
write(f"{d}/i.safetensors", [x for x in names if x.startswith("in.")])
write(f"{d}/w.safetensors", [x for x in names if not x.startswith(("in.", "out.", "dontcare.", "alt."))])
with open(f"{d}/bert.json", "w") as f:
    f.write('{"model": %s}\n' % meta["config"])
PY
rm -f "$dir/seed.json" "$dir/seed.safetensors"
