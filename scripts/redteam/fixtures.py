"""The red-team suite's fixtures (scripts/redteam/redteam.py): built once per
run into BASE, then copied into each row's sandbox.  Everything is tiny
(D 4, two heads, one layer, B 2, L 3) so the whole suite runs in about a
minute on 2 cores; every hostile file is made here from the valid ones, so a
row names a file, not a recipe.

  cfg.json, cat.json            a config (no padding: --inputs brings it) and a
                                catalogue with one entry 'tiny' (padding [0, 1])
  golden/                       refenc golden of cat.json's tiny; results/ its
                                reference results (certify PASSes them)
  weights.safetensors,          the case's parameters and inputs, for --weights
  inputs.safetensors            and --inputs
  tinygrad.safetensors          cfg.json's case with its gradients (golden --grad)
  parts/                        the two parts of cfg.json's case 'tiny'
  edge.json, big.json           a case cheap at any --prec; one whose write is long
  hostile inputs for 'golden'   allpad.json, inputs-maskall, inputs-attn-ninf,
                                weights-nan, weights-inf, inputs-nan, inputs-inf,
                                tok.json with tokens-i32
  goldens that pass on nothing  golden-dc/ (every element don't-care),
                                golden-hazard/ (a float32 hazard), golden-f32in/
                                (input_dtype F32), golden-lp/ (the shipped
                                encoder_large_positions), each with NaN results
  parts-evil/                   parts whose case is named '../../../x'
"""
import hashlib
import json
import os
import shutil
import struct
import subprocess

import st

TINY_MODEL = {"d_model": 4, "n_heads": 2, "d_ff": 6, "n_layers": 1}


def _dump(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f)
        f.write("\n")


def _run(cli, base, *args):
    r = subprocess.run([cli, *args], cwd=base, capture_output=True, timeout=120)
    if r.returncode != 0:
        raise SystemExit("redteam: fixture: refenc %s: exit %d: %s" % (" ".join(args), r.returncode,
                                                                        r.stderr.decode(errors="replace")))


def golden_dir(path, case_path, entry_from=None):
    """A golden directory at path holding the one case file case_path, its
    manifest entry rebuilt (sha256, bytes, metadata) from the file itself."""
    meta, tensors = st.read(case_path)
    name = meta["case"]
    os.makedirs(os.path.join(path, "cases"), exist_ok=True)
    dst = os.path.join(path, "cases", name + ".safetensors")
    shutil.copyfile(case_path, dst)
    with open(dst, "rb") as f:
        data = f.read()
    entry = dict(entry_from or {})
    entry.update({"case": name, "file": name + ".safetensors", "sha256": hashlib.sha256(data).hexdigest(),
                  "bytes": len(data), "component": meta["component"], "description": meta["description"],
                  "outputs": [o["name"] for o in json.loads(meta["outputs"])],
                  "bug_classes": json.loads(meta["bug_classes"])})
    if "float32_hazard" in meta:
        entry["float32_hazard"] = meta["float32_hazard"]
    _dump(os.path.join(path, "manifest.json"),
          {"format": "refenc-golden", "format_version": "1", "total_bytes": len(data), "cases": [entry]})


def nan_results(path, case_path, dtype, outputs=None, keep=()):
    """A results file for the case: every out.* (or those named) NaN in dtype;
    outputs in keep are the golden's own values in dtype instead."""
    meta, tensors = st.read(case_path)
    res = {}
    for name, t in tensors.items():
        if not name.startswith("out.") or (outputs is not None and name not in outputs and name not in keep):
            continue
        res[name] = st.converted(t, dtype) if name in keep else st.filled(dtype, t[1], float("nan"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    st.write(path, {"implementation": "red team: NaN everywhere"}, res)


def case_variant(src, dst, meta_update=None, tensor_update=None):
    meta, tensors = st.read(src)
    meta.update(meta_update or {})
    if tensor_update:
        tensor_update(tensors)
    st.write(dst, meta, tensors)


def _all_dontcare(tensors):
    for name in [n for n in tensors if n.startswith("out.")]:
        tensors["dontcare." + name] = st.filled("BOOL", tensors[name][1], 1)


def _poisoned(tensors, name, value):
    dt, shape, raw = tensors[name]
    vals = st.unpack(dt, raw)
    vals[len(vals) // 2] = value
    tensors[name] = [dt, shape, st.pack(dt, vals)]


def build(cli, base, source_root):
    os.makedirs(base)
    j = lambda *p: os.path.join(base, *p)
    _dump(j("cfg.json"), {"model": TINY_MODEL, "input": {"batch": 2, "seq_len": 3}})
    _dump(j("cat.json"), {"format_version": 1, "cases": [
        {"case": "tiny", "component": "encoder", "description": "a tiny encoder for the red-team suite",
         "seed": 7, "model": TINY_MODEL, "input": {"batch": 2, "seq_len": 3, "padding": [0, 1]}}]})
    # cheap at --prec 65536: no erf, no exp of the softmax over more than one key
    _dump(j("edge.json"), {"model": {"d_model": 2, "n_heads": 1, "d_ff": 2, "n_layers": 1,
                                     "activation": "relu", "final_norm": False},
                           "input": {"batch": 1, "seq_len": 1}})
    # a case file of 340 KB from a cheap oracle run: its write lasts long enough to be signalled
    _dump(j("big.json"), {"model": {"d_model": 4, "n_heads": 2, "d_ff": 4, "n_layers": 1, "activation": "relu",
                                    "final_norm": False}, "input": {"batch": 2, "seq_len": 96}})
    _dump(j("allpad.json"), {"model": TINY_MODEL, "input": {"batch": 2, "seq_len": 3, "padding": [3, 3]}})
    # grouped-query attention: valid (MQA with head_dim 3 over D 4), and two hostile values
    _dump(j("gqa.json"), {"model": dict(TINY_MODEL, n_kv_heads=1, head_dim=3), "input": {"batch": 1, "seq_len": 3}})
    _dump(j("gqa_bad.json"), {"model": dict(TINY_MODEL, n_heads=4, n_kv_heads=3), "input": {"batch": 1, "seq_len": 3}})
    _dump(j("hd0.json"), {"model": dict(TINY_MODEL, head_dim=0), "input": {"batch": 1, "seq_len": 3}})
    # Gemma's attention: a capped, rescaled config is made (causal: the cap meets a mask); a zero cap
    # and a string scalar exit 2 naming the key; --grad on the capped config exits 2 naming it
    _dump(j("softcap.json"), {"model": dict(TINY_MODEL, attn_logit_softcapping=0.5, query_pre_attn_scalar=0.3,
                                            causal=True), "input": {"batch": 1, "seq_len": 3}})
    _dump(j("softcap0.json"), {"model": dict(TINY_MODEL, attn_logit_softcapping=0), "input": {"batch": 1, "seq_len": 3}})
    # attention windows: a causal sliding window and a local one shorter than the sequence are made;
    # a zero window, a string window and a bidirectional sliding_window exit 2 naming the key;
    # --grad on a windowed config exits 2 naming it
    _dump(j("window.json"), {"model": dict(TINY_MODEL, sliding_window=2, causal=True),
                             "input": {"batch": 1, "seq_len": 5}})
    _dump(j("local.json"), {"model": dict(TINY_MODEL, local_attention=2), "input": {"batch": 1, "seq_len": 5}})
    _dump(j("window0.json"), {"model": dict(TINY_MODEL, sliding_window=0, causal=True),
                              "input": {"batch": 1, "seq_len": 3}})
    _dump(j("local_str.json"), {"model": dict(TINY_MODEL, local_attention="128"), "input": {"batch": 1, "seq_len": 3}})
    _dump(j("window_bidi.json"), {"model": dict(TINY_MODEL, sliding_window=2), "input": {"batch": 1, "seq_len": 3}})
    # local and global layers: a 3-layer ModernBERT pattern is made; a zero period and a base
    # without the period exit 2 naming the key; --grad on the pattern exits 2 naming it
    _dump(j("pattern.json"), {"model": dict(TINY_MODEL, n_layers=3, positional="rope", local_attention=2,
                                            global_attn_every_n_layers=2, local_rope_theta=10000.0,
                                            global_rope_theta=160000.0), "input": {"batch": 1, "seq_len": 5}})
    _dump(j("pattern_bases.json"), {"model": dict(TINY_MODEL, n_layers=2, positional="rope",
                                                  global_attn_every_n_layers=2, local_rope_theta=100.0),
                                    "input": {"batch": 1, "seq_len": 3}})
    _dump(j("pattern0.json"), {"model": dict(TINY_MODEL, global_attn_every_n_layers=0),
                               "input": {"batch": 1, "seq_len": 3}})
    # Gemma 3's pattern: a 3-layer scaled stack is made; both patterns, and partial rotation
    # with Gemma 3's, exit 2 naming the keys; --grad exits 2 naming sliding_window_pattern
    _dump(j("gemma3_pattern.json"), {"model": dict(TINY_MODEL, n_layers=3, positional="rope", causal=True,
                                                   sliding_window=2, sliding_window_pattern=3,
                                                   local_rope_theta=10000.0, rope_base=1000000.0,
                                                   rope_scaling={"rope_type": "linear", "factor": 8.0}),
                                     "input": {"batch": 1, "seq_len": 5}})
    _dump(j("gemma3_grad.json"), {"model": dict(TINY_MODEL, n_layers=2, positional="rope", sliding_window_pattern=2,
                                                local_rope_theta=100.0), "input": {"batch": 1, "seq_len": 3}})
    # ModernBERT's layer 0 without its attention norm: a golden is made; Post-LN and a
    # non-boolean exit 2 naming the key; --grad exits 2 naming it (the MPFR backward)
    _dump(j("first_prenorm.json"), {"model": dict(TINY_MODEL, n_layers=2, norm="pre", skip_first_prenorm=True),
                                    "input": {"batch": 1, "seq_len": 3}})
    _dump(j("first_prenorm_post.json"), {"model": dict(TINY_MODEL, norm="post", skip_first_prenorm=True),
                                         "input": {"batch": 1, "seq_len": 3}})
    _dump(j("first_prenorm_int.json"), {"model": dict(TINY_MODEL, skip_first_prenorm=1),
                                        "input": {"batch": 1, "seq_len": 3}})
    # Gemma 2/3's sandwich norms: a golden is made; Post-LN exits 2 naming the key; --grad
    # exits 2 naming it (both backward passes refuse it)
    _dump(j("sandwich.json"), {"model": dict(TINY_MODEL, n_layers=2, norm="pre", sandwich_norm=True),
                               "input": {"batch": 1, "seq_len": 3}})
    # linear1 alone bias-free (Jina-v2, GTE): a golden is made; without linear_bias it exits
    # 2 naming both keys; --grad exits 2 naming it (the oracle's backward does not compute it)
    _dump(j("linear1_bias.json"), {"model": dict(TINY_MODEL, linear1_bias=False), "input": {"batch": 1, "seq_len": 3}})
    _dump(j("linear1_bias_alone.json"), {"model": dict(TINY_MODEL, linear_bias=False, linear1_bias=False),
                                         "input": {"batch": 1, "seq_len": 3}})
    _dump(j("sandwich_post.json"), {"model": dict(TINY_MODEL, norm="post", sandwich_norm=True),
                                    "input": {"batch": 1, "seq_len": 3}})
    # the modernbert preset at a tiny width: a golden is made; a ModernBertModel file that
    # gives layer 0 an attention norm (which ModernBERT has not) exits 2 naming the tensor
    # and skip_first_prenorm
    mb = {"family": "modernbert", "d_model": 4, "n_heads": 2, "d_ff": 6, "n_layers": 2, "vocab_size": 5,
          "max_len": 8, "padding_idx": 0, "local_attention": 2}
    _dump(j("modernbert.json"), {"model": mb, "input": {"batch": 1, "seq_len": 3}})
    hf = {"model.embeddings.tok_embeddings.weight": [5, 4], "model.embeddings.norm.weight": [4],
          "model.final_norm.weight": [4]}
    for i in (0, 1):
        hf.update({f"model.layers.{i}.attn_norm.weight": [4], f"model.layers.{i}.attn.Wqkv.weight": [12, 4],
                   f"model.layers.{i}.attn.Wo.weight": [4, 4], f"model.layers.{i}.mlp_norm.weight": [4],
                   f"model.layers.{i}.mlp.Wi.weight": [12, 4], f"model.layers.{i}.mlp.Wo.weight": [4, 6]})
    st.write(j("modernbert_attn0.safetensors"), None, {n: st.filled("F32", s, 0.25) for n, s in hf.items()})
    # the gemma3 preset at a tiny width: a golden is made; a file saved with a Llama
    # loader's names (two norms a layer, post_attention_layernorm as the pre-FFN norm)
    # exits 2 naming the missing pre_feedforward_layernorm
    g3 = {"family": "gemma3", "d_model": 4, "n_heads": 2, "n_kv_heads": 1, "head_dim": 2, "d_ff": 6,
          "n_layers": 2, "vocab_size": 5, "max_len": 8, "query_pre_attn_scalar": 2, "sliding_window": 2,
          "sliding_window_pattern": 2}
    _dump(j("gemma3.json"), {"model": g3, "input": {"batch": 1, "seq_len": 3}})
    hf = {"model.embed_tokens.weight": [5, 4], "model.norm.weight": [4]}
    for i in (0, 1):
        L = f"model.layers.{i}."
        hf.update({L + "self_attn.q_proj.weight": [4, 4], L + "self_attn.k_proj.weight": [2, 4],
                   L + "self_attn.v_proj.weight": [2, 4], L + "self_attn.o_proj.weight": [4, 4],
                   L + "self_attn.q_norm.weight": [2], L + "self_attn.k_norm.weight": [2],
                   L + "mlp.gate_proj.weight": [6, 4], L + "mlp.up_proj.weight": [6, 4],
                   L + "mlp.down_proj.weight": [4, 6], L + "input_layernorm.weight": [4],
                   L + "post_attention_layernorm.weight": [4]})
    st.write(j("gemma3_llama_names.safetensors"), None, {n: st.filled("F32", s, 0.25) for n, s in hf.items()})
    # the t5-encoder preset at a tiny width: a golden is made; a T5EncoderModel file that
    # gives block 1 its own relative_attention_bias (t5_bias_per_layer's port) exits 2
    # naming the tensor and relative_attention_num_buckets
    t5 = {"family": "t5-encoder", "d_model": 4, "n_heads": 2, "d_ff": 6, "n_layers": 2, "vocab_size": 5,
          "max_len": 8}
    _dump(j("t5_encoder.json"), {"model": t5, "input": {"batch": 1, "seq_len": 3}})
    hf = {"shared.weight": [5, 4], "encoder.final_layer_norm.weight": [4]}
    for i in (0, 1):
        b = f"encoder.block.{i}.layer."
        hf.update({b + "0.layer_norm.weight": [4], b + "0.SelfAttention.relative_attention_bias.weight": [32, 2],
                   b + "1.layer_norm.weight": [4], b + "1.DenseReluDense.wi.weight": [6, 4],
                   b + "1.DenseReluDense.wo.weight": [4, 6]})
        hf.update({b + f"0.SelfAttention.{n}.weight": [4, 4] for n in "qkvo"})
    st.write(j("t5_bias_per_block.safetensors"), None, {n: st.filled("F32", s, 0.25) for n, s in hf.items()})
    # the nomic-bert preset at a tiny width: a golden is made; a NomicBertModel file whose
    # MLP is the plain fc1 (a port without SwiGLU's fc11/fc12) exits 2 naming the tensor
    nomic = {"family": "nomic-bert", "d_model": 4, "n_heads": 2, "d_ff": 6, "n_layers": 1, "vocab_size": 5,
             "max_len": 8}
    _dump(j("nomic_bert.json"), {"model": nomic, "input": {"batch": 1, "seq_len": 3}})
    hf = {"embeddings.word_embeddings.weight": [5, 4], "embeddings.token_type_embeddings.weight": [2, 4],
          "emb_ln.weight": [4], "emb_ln.bias": [4], "encoder.layers.0.attn.Wqkv.weight": [12, 4],
          "encoder.layers.0.attn.out_proj.weight": [4, 4], "encoder.layers.0.norm1.weight": [4],
          "encoder.layers.0.norm1.bias": [4], "encoder.layers.0.mlp.fc1.weight": [6, 4],
          "encoder.layers.0.mlp.fc2.weight": [4, 6], "encoder.layers.0.norm2.weight": [4],
          "encoder.layers.0.norm2.bias": [4]}
    st.write(j("nomic_fc1.safetensors"), None, {n: st.filled("F32", s, 0.25) for n, s in hf.items()})
    # the jina-bert-v2 preset at a tiny width: a golden is made; a JinaBertModel file whose
    # gated_layers carry a bias (the preset's linear1 has none) exits 2 naming the tensor
    jina = {"family": "jina-bert-v2", "d_model": 4, "n_heads": 2, "d_ff": 6, "n_layers": 1, "vocab_size": 5,
            "max_len": 8}
    _dump(j("jina_bert_v2.json"), {"model": jina, "input": {"batch": 1, "seq_len": 3}})
    b = "encoder.layer.0."
    hf = {"embeddings.word_embeddings.weight": [5, 4], "embeddings.token_type_embeddings.weight": [2, 4],
          "embeddings.LayerNorm.weight": [4], "embeddings.LayerNorm.bias": [4],
          b + "attention.output.dense.weight": [4, 4], b + "attention.output.dense.bias": [4],
          b + "attention.output.LayerNorm.weight": [4], b + "attention.output.LayerNorm.bias": [4],
          b + "mlp.gated_layers.weight": [12, 4], b + "mlp.gated_layers.bias": [12],
          b + "mlp.wo.weight": [4, 6], b + "mlp.wo.bias": [4],
          b + "mlp.layernorm.weight": [4], b + "mlp.layernorm.bias": [4]}
    hf.update({b + f"attention.self.{n}.{k}": [4, 4] if k == "weight" else [4]
               for n in ("query", "key", "value") for k in ("weight", "bias")})
    st.write(j("jina_gated_bias.safetensors"), None, {n: st.filled("F32", s, 0.25) for n, s in hf.items()})
    # the gte preset at a tiny width: a golden is made; a NewModel file whose GLU has a
    # bias (new-impl's up_gate_proj has none) exits 2 naming the tensor
    gte = {"family": "gte", "d_model": 4, "n_heads": 2, "d_ff": 6, "n_layers": 1, "vocab_size": 5, "max_len": 8}
    _dump(j("gte.json"), {"model": gte, "input": {"batch": 1, "seq_len": 3}})
    b = "encoder.layer.0."
    hf = {"embeddings.word_embeddings.weight": [5, 4], "embeddings.LayerNorm.weight": [4],
          "embeddings.LayerNorm.bias": [4], b + "attention.qkv_proj.weight": [12, 4], b + "attention.qkv_proj.bias": [12],
          b + "attention.o_proj.weight": [4, 4], b + "attention.o_proj.bias": [4], b + "attn_ln.weight": [4],
          b + "attn_ln.bias": [4], b + "mlp.up_gate_proj.weight": [12, 4], b + "mlp.up_gate_proj.bias": [12],
          b + "mlp.down_proj.weight": [4, 6], b + "mlp.down_proj.bias": [4], b + "mlp_ln.weight": [4],
          b + "mlp_ln.bias": [4]}
    st.write(j("gte_glu_bias.safetensors"), None, {n: st.filled("F32", s, 0.25) for n, s in hf.items()})
    # GTE's ntk RoPE scaling: a golden is made with mixed_b; a negative mixed_b, and mixed_b
    # under another type, exit 2 naming the field
    ntk = dict(TINY_MODEL, positional="rope")
    _dump(j("ntk_mixed.json"), {"model": dict(ntk, rope_scaling={"rope_type": "ntk", "factor": 2.0, "mixed_b": 0.75}),
                                "input": {"batch": 1, "seq_len": 3}})
    _dump(j("ntk_mixed_negative.json"), {"model": dict(ntk, rope_scaling={"rope_type": "ntk", "factor": 2.0,
                                                                          "mixed_b": -0.5}),
                                         "input": {"batch": 1, "seq_len": 3}})
    _dump(j("mixed_b_linear.json"), {"model": dict(ntk, rope_scaling={"rope_type": "linear", "factor": 2.0,
                                                                      "mixed_b": 0.75}),
                                     "input": {"batch": 1, "seq_len": 3}})
    # the last layer's selected query rows (input.rows): a golden is made from a config with rows,
    # and with --grad exits 2 naming input.rows; rows out of range, negative, repeated, decreasing,
    # empty, not integers, and with a pooling exit 2 naming input.rows and the element
    rows_in = {"batch": 2, "seq_len": 5}
    _dump(j("rows.json"), {"model": dict(TINY_MODEL, n_layers=2, positional="rope", causal=True),
                           "input": dict(rows_in, rows=[0, 3, 4])})
    for name, rows in (("rows_range", [1, 5]), ("rows_negative", [-1, 2]), ("rows_repeat", [1, 3, 3]),
                       ("rows_order", [4, 2]), ("rows_empty", []), ("rows_real", [0, 2.5]),
                       ("rows_string", "0, 3")):
        _dump(j(name + ".json"), {"model": TINY_MODEL, "input": dict(rows_in, rows=rows)})
    _dump(j("rows_pool.json"), {"model": dict(TINY_MODEL, pooling="mean"), "input": dict(rows_in, rows=[0, 4])})
    _dump(j("two_patterns.json"), {"model": dict(TINY_MODEL, n_layers=2, global_attn_every_n_layers=2,
                                                 sliding_window_pattern=2), "input": {"batch": 1, "seq_len": 3}})
    _dump(j("gemma3_partial.json"), {"model": dict(TINY_MODEL, n_layers=2, positional="rope", sliding_window_pattern=2,
                                                   partial_rotary_factor=0.5), "input": {"batch": 1, "seq_len": 3}})
    # Gemma's normaliser: a bfloat16-rounded sqrt(D) is made; an unknown dtype name and the
    # key without a scaled embedding exit 2 naming it; --grad exits 2 naming it
    _dump(j("normalizer.json"), {"model": dict(TINY_MODEL, vocab_size=6, embedding_normalizer_dtype="bfloat16"),
                                 "input": {"batch": 1, "seq_len": 3}})
    _dump(j("normalizer_bad.json"), {"model": dict(TINY_MODEL, vocab_size=6, embedding_normalizer_dtype="bf16"),
                                     "input": {"batch": 1, "seq_len": 3}})
    _dump(j("normalizer_x.json"), {"model": dict(TINY_MODEL, embedding_normalizer_dtype="float16"),
                                   "input": {"batch": 1, "seq_len": 3}})
    _dump(j("theta_alone.json"), {"model": dict(TINY_MODEL, positional="rope", local_rope_theta=10000.0),
                                  "input": {"batch": 1, "seq_len": 3}})
    # the pooled embedding: mean, cls and last_token configs are made (out.embedding); an unknown
    # pooling, pooling_normalize without a pooling, an item of padding only exit 2 naming the key;
    # --grad on a pooled config exits 2 naming pooling
    _dump(j("pool_mean.json"), {"model": dict(TINY_MODEL, pooling="mean"),
                                "input": {"batch": 2, "seq_len": 4, "padding": [0, 2]}})
    _dump(j("pool_last.json"), {"model": dict(TINY_MODEL, pooling="last_token", causal=True,
                                              pooling_normalize=False),
                                "input": {"batch": 2, "seq_len": 4, "padding": [1, 0]}})
    _dump(j("pool_max.json"), {"model": dict(TINY_MODEL, pooling="max"), "input": {"batch": 1, "seq_len": 3}})
    _dump(j("pool_norm_alone.json"), {"model": dict(TINY_MODEL, pooling_normalize=True),
                                      "input": {"batch": 1, "seq_len": 3}})
    _dump(j("pool_all_pad.json"), {"model": dict(TINY_MODEL, pooling="cls"),
                                   "input": {"batch": 2, "seq_len": 3, "padding": [0, 3]}})
    _dump(j("qpas_str.json"), {"model": dict(TINY_MODEL, query_pre_attn_scalar="256"),
                               "input": {"batch": 1, "seq_len": 3}})
    # Qwen's attention: a Qwen2 (q/k/v bias on bias-free linears) and a Qwen3 (per-head q/k norm,
    # grouped-query, RoPE) config are made; qkv_bias with biased linears, a string qkv_bias and an
    # unknown qk_norm exit 2 naming the key; --grad on either exits 2 naming it
    _dump(j("qkv_bias.json"), {"model": dict(TINY_MODEL, linear_bias=False, qkv_bias=True),
                               "input": {"batch": 1, "seq_len": 3}})
    _dump(j("qk_norm.json"), {"model": dict(TINY_MODEL, n_heads=2, n_kv_heads=1, head_dim=4, positional="rope",
                                            norm_type="rmsnorm", qk_norm="rms"), "input": {"batch": 1, "seq_len": 3}})
    _dump(j("qkv_bias_biased.json"), {"model": dict(TINY_MODEL, qkv_bias=True), "input": {"batch": 1, "seq_len": 3}})
    _dump(j("qkv_bias_str.json"), {"model": dict(TINY_MODEL, linear_bias=False, qkv_bias="true"),
                                   "input": {"batch": 1, "seq_len": 3}})
    _dump(j("qk_norm_bad.json"), {"model": dict(TINY_MODEL, qk_norm="layernorm"), "input": {"batch": 1, "seq_len": 3}})
    # T5's relative bias: a T5 config (buckets, unscaled scores, RMSNorm) is made over 2 layers;
    # odd buckets, a max_distance within max_exact, buckets with ALiBi exit 2 naming the field;
    # --grad exits 2 naming it
    _dump(j("t5.json"), {"model": dict(TINY_MODEL, n_layers=2, norm_type="rmsnorm", query_pre_attn_scalar=1,
                                       relative_attention_num_buckets=8, relative_attention_max_distance=4),
                         "input": {"batch": 1, "seq_len": 6}})
    _dump(j("t5_odd.json"), {"model": dict(TINY_MODEL, relative_attention_num_buckets=9), "input": {"batch": 1, "seq_len": 3}})
    _dump(j("t5_md.json"), {"model": dict(TINY_MODEL, relative_attention_num_buckets=32,
                                          relative_attention_max_distance=8), "input": {"batch": 1, "seq_len": 3}})
    _dump(j("t5_alibi.json"), {"model": dict(TINY_MODEL, positional="alibi", relative_attention_num_buckets=32),
                               "input": {"batch": 1, "seq_len": 3}})
    _dump(j("tok.json"), {"model": dict(TINY_MODEL, vocab_size=10), "input": {"batch": 2, "seq_len": 3}})
    os.makedirs(j("sub"))
    shutil.copyfile(j("cfg.json"), os.path.join(base, "x\udcffcfg.json"))  # a config named in bytes not UTF-8
    _run(cli, base, "golden", "--catalogue", "cat.json", "--case", "tiny", "--out", "golden", "--quiet",
         "--threads", "1")
    case = j("golden", "cases", "tiny.safetensors")
    _run(cli, base, "golden", "--config", "cfg.json", "--name", "tinygrad", "--grad", "--quiet", "--threads", "1",
         "--out-file", "tinygrad.safetensors")
    os.makedirs(j("results"))
    os.makedirs(j("parts"))
    _run(cli, base, "run", "--case", "golden/cases/tiny.safetensors", "--out", "results/tiny.safetensors")
    for k in (1, 2):
        _run(cli, base, "golden", "--config", "cfg.json", "--name", "tiny", "--shard", "%d/2" % k, "--quiet",
             "--threads", "1", "--out-file", "parts/tiny.part-%d-of-2.safetensors" % k)

    meta, tensors = st.read(case)
    params = {n: t for n, t in tensors.items() if not n.startswith(("in.", "out.", "dontcare."))}
    inputs = {n: t for n, t in tensors.items() if n.startswith("in.")}
    st.write(j("weights.safetensors"), None, params)
    st.write(j("inputs.safetensors"), None, inputs)
    B, L = inputs["in.x"][1][0], inputs["in.x"][1][1]
    # inputs that leave nothing to compare, and non-finite weights and inputs
    st.write(j("inputs-maskall.safetensors"), None,
             {"in.x": inputs["in.x"], "in.key_padding_mask": st.filled("BOOL", [B, L], 1)})
    st.write(j("inputs-attn-ninf.safetensors"), None,
             {"in.x": inputs["in.x"], "in.attn_mask": st.filled("F32", [L, L], float("-inf"))})
    for tag, v in (("nan", float("nan")), ("inf", float("inf"))):
        w = dict(params)
        _poisoned(w, "layers.0.linear1.weight", v)
        st.write(j("weights-%s.safetensors" % tag), None, w)
        i = {"in.x": list(inputs["in.x"])}
        _poisoned(i, "in.x", v)
        st.write(j("inputs-%s.safetensors" % tag), None, i)
    st.write(j("tokens-i32.safetensors"), None, {"in.tokens": ["I32", [B, L], st.pack("I32", [1] * (B * L))]})

    # goldens on which a PASS would be a PASS on nothing, each with NaN results
    case_variant(case, j("tmp-dc.safetensors"), tensor_update=_all_dontcare)
    golden_dir(j("golden-dc"), j("tmp-dc.safetensors"))
    case_variant(case, j("tmp-hz.safetensors"), {"float32_hazard": "red team: a declared hazard"})
    golden_dir(j("golden-hazard"), j("tmp-hz.safetensors"))
    case_variant(case, j("tmp-f32.safetensors"), {"input_dtype": "F32"})
    golden_dir(j("golden-f32in"), j("tmp-f32.safetensors"))
    for f in ("tmp-dc", "tmp-hz", "tmp-f32"):
        os.unlink(j(f + ".safetensors"))
    for dt in ("F64", "F32", "F16", "BF16"):
        nan_results(j("results-nan-%s" % dt.lower(), "tiny.safetensors"), case, dt)
    lp = os.path.join(source_root, "golden", "cases", "encoder_large_positions.safetensors")
    if os.path.exists(lp):
        with open(os.path.join(source_root, "golden", "manifest.json")) as f:
            entry = [e for e in json.load(f)["cases"] if e["case"] == "encoder_large_positions"]
        golden_dir(j("golden-lp"), lp, entry[0] if entry else None)
        # the final output NaN, one intermediate right: all in F32
        nan_results(j("results-lp-nan", "encoder_large_positions.safetensors"), lp, "F32",
                    outputs=["out.output"], keep=["out.embed"])
    evil_parts(j("parts"), j("parts-evil"), "../../../x")
    # manifests whose entries name paths outside DIR/cases/ and the results directory
    for tag, field, value in (("case-dotdot", "case", "../tiny"), ("case-slash", "case", "cases/tiny"),
                              ("file-dotdot", "file", "../../golden/cases/tiny.safetensors"),
                              ("file-absolute", "file", "/dev/zero")):
        d = j("golden-" + tag)
        shutil.copytree(j("golden"), d)
        with open(os.path.join(d, "manifest.json")) as f:
            man = json.load(f)
        man["cases"][0][field] = value
        _dump(os.path.join(d, "manifest.json"), man)


# ---- parts whose case name leaves the output directory -----------------------------------

def _hstr(h, s):
    h.update((s or "").encode() + b"\0")


def _hbytes(h, b):
    h.update(struct.pack("<Q", len(b)) + b)


LAYER_PARAMS = ("self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
                "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias")


def _param_order(tensors):
    """The parameters in the table order of ref/core/params.h."""
    head = [n for n in ("embedding.weight", "token_type_embedding.weight", "pos_embedding.weight",
                        "embedding_norm.weight", "embedding_norm.bias") if n in tensors]
    layers, i = [], 0
    while "layers.%d.norm1.weight" % i in tensors:
        layers += ["layers.%d.%s" % (i, p) for p in LAYER_PARAMS]
        i += 1
    return head + layers + [n for n in ("norm.weight", "norm.bias") if n in tensors]


def _fingerprint(meta, tensors, name):
    """golden_fingerprint (ref/cli/golden_file.c) recomputed from part 1: what
    anyone can do, since it is an unkeyed hash of the part's own claims."""
    h = hashlib.sha256()
    _hstr(h, name)
    _hstr(h, meta.get("description"))
    _hstr(h, meta.get("component"))
    _hstr(h, meta.get("config"))
    _hstr(h, meta.get("bug_classes"))
    _hstr(h, meta.get("tolerance") if meta.get("tolerance") not in (None, "{}") else "null")
    _hstr(h, meta.get("float32_hazard"))
    _hstr(h, "per layer" if meta.get("per_layer") == "true" else "whole stack")
    _hstr(h, "final" if meta.get("outputs_kept") == "final" else "all")
    _hstr(h, "first precision %s" % meta.get("first_prec"))
    x = tensors.get("in.x")
    B, L = (x[1][0], x[1][1]) if x else tensors["in.tokens"][1]
    _hbytes(h, struct.pack("<QQ", B, L))
    dbl = lambda t: st.pack("F64", st.unpack(t[0], t[2])) if t else b""
    _hbytes(h, dbl(x))
    for n in ("in.tokens", "in.token_type_ids", "in.key_padding_mask", "in.positions"):
        _hbytes(h, tensors[n][2] if n in tensors else b"")
    _hbytes(h, dbl(tensors.get("in.attn_mask")))
    _hbytes(h, b"".join(dbl(tensors[n]) for n in _param_order(tensors)))
    return h.hexdigest()


def evil_parts(src, dst, name):
    """Copies of the parts of case 'tiny' renamed to name, with the
    fingerprint recomputed; when the recomputation does not give the real
    fingerprint of the untouched part (the scheme changed), the parts keep the
    old one, and merge refuses them for that (the row still holds)."""
    os.makedirs(dst)
    m1, t1 = st.read(os.path.join(src, "tiny.part-1-of-2.safetensors"))
    fp = _fingerprint(m1, t1, m1["case"]) == m1.get("fingerprint") and _fingerprint(m1, t1, name)
    for k in (1, 2):
        meta, tensors = st.read(os.path.join(src, "tiny.part-%d-of-2.safetensors" % k))
        meta["case"] = name
        if fp:
            meta["fingerprint"] = fp
        st.write(os.path.join(dst, "p%d.safetensors" % k), meta, tensors)
