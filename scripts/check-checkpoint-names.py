#!/usr/bin/python3
"""Cross-checks the two readings of the families' checkpoint names: the C
loader's tables (ref/io/checkpoint_names.c, used by refenc run --weights) and
the PyTorch peer's (scripts/peers/torch_families.py: hf_state_dict), which
were written separately from the Hugging Face modeling files.

For every family case of the golden set, the case's parameters are written
twice: under the family's Hugging Face names and layouts, with the model
prefix, as the peer converts them (plus a task head outside the prefix and
the family's buffers, which the loader must ignore); and under refenc's own
names.  `refenc run` then runs the case's config on each (the second as the
vaswani family, whose names are refenc's, every other key identical) with
the same seed: the two fingerprints must be equal, so both tables put every
value in the same place.  Negative control: the Hugging Face file with two
of its tensors of one shape swapped must give another fingerprint.

usage: scripts/check-checkpoint-names.py REFENC_CLI GOLDEN_DIR WORK_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "python"))
import refenc  # noqa: E402
import torch_families  # noqa: E402

PREFIX = {"bert": "bert.", "roberta": "roberta.", "distilbert": "distilbert.", "gpt2": "transformer.",
          "clip-text": "text_model.", "llama": "model.", "mistral": "model.", "qwen2": "model.", "qwen3": "model.",
          "modernbert": "model.", "gemma3": "model.", "t5-encoder": "", "nomic-bert": "bert.",
          "jina-bert-v2": "bert.", "gte": "new."}
# a tensor outside the prefix, and one of the family's buffers inside it
LLAMA_EXTRA = {"lm_head.weight": (5, "D"), "model.layers.0.self_attn.rotary_emb.inv_freq": (4,)}
EXTRA = {"bert": {"cls.predictions.bias": (5,), "bert.pooler.dense.bias": ("D",)},
         "roberta": {"lm_head.bias": (5,), "roberta.pooler.dense.bias": ("D",)},
         "distilbert": {"vocab_projector.bias": (5,)},
         "gpt2": {"lm_head.weight": (5,), "transformer.h.0.attn.masked_bias": ()},
         "clip-text": {"text_projection.weight": (5,)},
         "llama": LLAMA_EXTRA, "mistral": LLAMA_EXTRA, "qwen2": LLAMA_EXTRA, "qwen3": LLAMA_EXTRA,
         "modernbert": {"head.norm.weight": ("D",), "decoder.bias": (5,)},
         # T5ForConditionalGeneration's LM head and decoder, beside the encoder (no prefix)
         "t5-encoder": {"lm_head.weight": (5, "D"), "decoder.block.0.layer.2.DenseReluDense.wo.weight": ("D", 5)},
         # NomicBertForPreTraining's MLM head outside bert., the optional pooler inside
         "nomic-bert": {"cls.predictions.decoder.weight": (5, "D"), "bert.pooler.dense.bias": ("D",)},
         # JinaBertForMaskedLM's MLM head outside bert., the pooler inside
         "jina-bert-v2": {"cls.predictions.decoder.weight": (5, "D"), "bert.pooler.dense.bias": ("D",)},
         "gemma3": LLAMA_EXTRA,
         # NewForMaskedLM's lm_head outside new., NewModel's optional pooler inside
         "gte": {"lm_head.decoder.weight": (5, "D"), "new.pooler.dense.bias": ("D",)}}
# the peer's modes in which the goldens made from the families' Hugging Face
# files must PASS (issues 23, 24: F64, F32, BF16, F16)
PEER_MODES = ("float64", "float32", "bfloat16", "float16")
# the families whose goldens are made from their Hugging Face files, and the
# negative control of each: a bug of the family's own convention, injected
# into the peer, must FAIL every one of its goldens
HF_GOLDEN_CONTROL = {"llama": "gqa_tiled", "mistral": "gqa_tiled", "qwen2": "gqa_tiled", "qwen3": "gqa_tiled",
                     "modernbert": "first_prenorm_applied", "t5-encoder": "t5_bias_per_layer",
                     "nomic-bert": "glu_halves_swapped", "gemma3": "gqa_tiled",
                     "jina-bert-v2": "alibi_slopes_pow2", "gte": "ntk_scaling_ignored"}


def write_safetensors(path, tensors):
    """{name: float64 ndarray} as a safetensors file of F64 tensors."""
    refenc.write_safetensors(path, {name: ("F64", a) for name, a in tensors.items()})


def fingerprint(cli, config, weights, work, name):
    path = os.path.join(work, name + ".json")
    with open(path, "w") as f:
        json.dump(config, f)
    r = subprocess.run([cli, "run", "--config", path, "--weights", weights, "--seed", "11"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"check-checkpoint-names: {name}: refenc run failed: {r.stderr.strip()}")
    m = re.search(r"fingerprint \(FNV-1a of the output's bytes\): ([0-9a-f]{16})", r.stdout)
    read = re.search(r"weights: .*", r.stdout)
    return m.group(1), read.group(0) if read else ""


def peer_passes(cli, golden, work, n, bug):
    """The PyTorch peer on the n goldens refenc golden --weights made from the
    Hugging Face files: every case must PASS in each of PEER_MODES, and FAIL
    with the control bug (the Llama-style families' key/value heads tiled,
    T5's bias recomputed per layer, ...) injected."""
    peer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers", "torch_peer.py")
    ok = True
    for mode in PEER_MODES + ("float32 --bug " + bug,):
        control = "--bug" in mode  # negative control: every case must FAIL
        out = os.path.join(work, "hf-results-" + os.path.basename(golden) + "-" + mode.replace(" ", ""))
        shutil.rmtree(out, ignore_errors=True)
        r = subprocess.run([sys.executable, peer, "--golden", golden, "--out", out, "--dtype", *mode.split()],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"check-checkpoint-names: torch_peer.py --dtype {mode} failed: {r.stderr.strip()[-300:]}")
        c = subprocess.run([cli, "certify", "--golden", golden, "--results", out, "--quiet"],
                           capture_output=True, text=True)
        m = re.search(r"^summary: (\d+) cases?, (\d+) passed.*$", c.stdout, re.M)
        good = m is not None and int(m.group(1)) == n and int(m.group(2)) == (0 if control else n)
        good &= c.returncode == (1 if control else 0)
        ok &= good
        print(f"  {'ok   ' if good else 'WRONG'} PyTorch peer {mode} on the {n} goldens made by refenc golden "
              f"--weights from Hugging Face files ({os.path.basename(golden)}): "
              f"{m.group(0) if m else c.stdout.strip()[-300:]}")
    return ok


def main():
    cli, golden, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    hf_goldens = {}  # control bug: number of goldens made from Hugging Face files
    for bug in set(HF_GOLDEN_CONTROL.values()):
        shutil.rmtree(os.path.join(work, "hf-goldens-" + bug), ignore_errors=True)
    manifest = json.load(open(os.path.join(golden, "manifest.json")))
    ok, n = True, 0
    for entry in manifest["cases"]:
        case = refenc.Case(os.path.join(golden, "cases", entry["file"]))
        cfg, params = case.config, case.params
        if cfg.get("family", "vaswani") not in torch_families.HF_NAME_FAMILIES or case.component != "encoder":
            continue
        fam, D = cfg["family"], cfg["d_model"]
        hf = {PREFIX[fam] + k: np.ascontiguousarray(v) for k, v in torch_families.hf_state_dict(cfg, params).items()}
        for k, shape in EXTRA[fam].items():
            hf[k] = np.zeros(tuple(D if s == "D" else s for s in shape))
        B, L = case.inputs["in.tokens"].shape
        run_cfg = {"model": cfg, "input": {"batch": int(B), "seq_len": int(L)}}
        pad = case.inputs.get("in.key_padding_mask")
        if pad is not None and not np.asarray(pad)[:, 0].any():  # the case's right padding (the only
            run_cfg["input"]["padding"] = [int(c) for c in np.asarray(pad).sum(axis=1)]  # side run knows)
        rows = case.inputs.get("in.rows")  # a selected-rows case stays one (its cost is the rows')
        if rows is not None:
            run_cfg["input"]["rows"] = [int(r) for r in np.asarray(rows)]
        own_cfg = {"model": dict(cfg, family="vaswani"), "input": run_cfg["input"]}

        hf_path = os.path.join(work, entry["case"] + ".hf.safetensors")
        own_path = os.path.join(work, entry["case"] + ".refenc.safetensors")
        write_safetensors(hf_path, hf)
        write_safetensors(own_path, params)
        f_hf, line = fingerprint(cli, run_cfg, hf_path, work, entry["case"] + ".hf")
        f_own, _ = fingerprint(cli, own_cfg, own_path, work, entry["case"] + ".refenc")

        # refenc golden --weights takes the same file as it is: the case it
        # writes holds exactly the case's parameters, under refenc's names
        cfg_path, gold_path = (os.path.join(work, entry["case"] + ext) for ext in (".golden.json", ".golden.safetensors"))
        with open(cfg_path, "w") as f:
            json.dump(run_cfg, f)
        r = subprocess.run([cli, "golden", "--config", cfg_path, "--weights", hf_path, "--name", entry["case"],
                            "--outputs", "final", "--quiet", "--out-file", gold_path], capture_output=True, text=True)
        stored = refenc.read_safetensors(gold_path)[1] if r.returncode == 0 else {}
        golden_ok = r.returncode == 0 and all(np.array_equal(np.asarray(stored.get(k, []), dtype=np.float64), v)
                                              for k, v in params.items())
        if not golden_ok:
            print(f"  WRONG {entry['case']}: refenc golden --weights (HF layout): exit {r.returncode} "
                  f"{r.stderr.strip()[:300]}")
        ok &= golden_ok

        # a whole golden from the Hugging Face file (every intermediate), for
        # the PyTorch peer below
        if fam in HF_GOLDEN_CONTROL:
            bug = HF_GOLDEN_CONTROL[fam]
            r = subprocess.run([cli, "golden", "--config", cfg_path, "--weights", hf_path, "--name",
                                entry["case"] + "_hf_weights", "--quiet", "--out",
                                os.path.join(work, "hf-goldens-" + bug)], capture_output=True, text=True)
            if r.returncode != 0:
                print(f"  WRONG {entry['case']}: refenc golden --weights --out: exit {r.returncode} {r.stderr.strip()[:300]}")
                ok = False
            hf_goldens[bug] = hf_goldens.get(bug, 0) + (r.returncode == 0)

        # negative control: two tensors of one shape swapped in the HF file
        names = sorted(k for k in hf if k.startswith(PREFIX[fam]) and hf[k].shape == (D,))
        a, b = names[0], names[1]
        hf[a], hf[b] = hf[b], hf[a].copy()
        write_safetensors(hf_path, hf)
        f_swapped, _ = fingerprint(cli, run_cfg, hf_path, work, entry["case"] + ".swapped")

        good = f_hf == f_own and f_swapped != f_own
        ok &= good
        n += 1
        print(f"  {'ok   ' if good else 'WRONG'} {entry['case']}: HF layout {f_hf}, refenc's {f_own}, "
              f"{a.split('.', 1)[1]} <-> {b.split('.', 1)[1]} {f_swapped}")
        print(f"        {line}")
    if n == 0:
        sys.exit("check-checkpoint-names: no family case in the golden set")
    if not hf_goldens:
        sys.exit("check-checkpoint-names: no family case made from Hugging Face files in the golden set")
    for bug, count in sorted(hf_goldens.items()):
        ok &= peer_passes(cli, os.path.join(work, "hf-goldens-" + bug), work, count, bug)
    print("check-checkpoint-names:", f"the two tables agree on {n} family cases, and refenc golden --weights "
          "stores the same parameters from the Hugging Face file" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
