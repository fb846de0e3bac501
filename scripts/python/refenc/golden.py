"""Golden cases as numpy arrays, the features each case needs, and results
files (docs/golden-format.md is the contract; docs/python.md the guide)."""
import fnmatch
import json
import os
import re

import numpy as np

from . import locate, safetensors

OUT = "out."
# refenc's rule for case names (ref/io/manifest.h): 1 to 127 of A-Z a-z 0-9 . _ -,
# not starting with '.', without '..'
_CASE_NAME = re.compile(r"[A-Za-z0-9._-]{1,127}")


def check_case_name(name):
    """name, if it is a case name refenc accepts, else ValueError: a results
    file is named after its case, and must land in the results directory."""
    if not isinstance(name, str) or not _CASE_NAME.fullmatch(name) or name.startswith(".") or ".." in name:
        raise ValueError(f"case name {name!r}: a name must be 1 to 127 characters of A-Z a-z 0-9 . _ -, "
                         f"not start with '.' and not contain '..' (refenc's rule)")
    return name


class Case:
    """One golden case, read from GOLDEN/cases/<name>.safetensors.

    name, component, description: from the metadata;
    config: the model config (dict, every key of docs/cli.md);
    outputs: the output names in forward order ("out.embed", ...);
    required: the outputs a results file must hold;
    inputs: {"in.x": float64 array, "in.tokens": int64, "in.key_padding_mask":
             bool (True = padding), "in.positions": int64, "in.attn_mask": float64,
             "in.rows": int64, the last layer's selected query rows, when the case has them};
    params: the parameters under PyTorch's state_dict names, float64;
    expected: {output: float64 array}, the oracle's correctly rounded values;
    dontcare: {output: bool array}, only for outputs with don't-care elements;
    bug_classes, tolerance (dict), float32_hazard (str or None), input_dtype;
    features: the features the case needs (see `features_of`).
    Every float array holds the file's values exactly."""

    def __init__(self, path):
        self.path = str(path)
        meta, tensors = safetensors.read(self.path)
        if meta.get("format") != "refenc-golden":
            raise safetensors.FormatError(f"{self.path}: not a refenc golden case (metadata format is "
                                          f"{meta.get('format')!r}, not 'refenc-golden')")
        self.metadata = meta
        try:
            self._parse(meta, tensors)
        except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as e:
            if isinstance(e, safetensors.FormatError):
                raise
            raise safetensors.FormatError(f"{self.path}: the golden metadata or tensors are malformed: "
                                          f"{type(e).__name__}: {e}") from None

    def _parse(self, meta, tensors):
        self.name = meta["case"]
        self.component = meta["component"]
        self.description = meta.get("description", "")
        self.config = json.loads(meta["config"])
        outs = json.loads(meta["outputs"])
        self.outputs = [o["name"] for o in outs]
        self.required = [o["name"] for o in outs if o["required"]]
        self.bug_classes = json.loads(meta.get("bug_classes", "[]"))
        self.tolerance = json.loads(meta.get("tolerance", "{}"))
        self.float32_hazard = meta.get("float32_hazard")
        self.input_dtype = meta.get("input_dtype", "F16,BF16")
        # a gradient case (format version 2, docs/golden-format.md "Gradients"):
        # the upstream gradient in.grad.dY and the gradients grad.*, backward order
        self.grad_outputs = json.loads(meta.get("grad_outputs", "[]"))
        self.grads = {k: tensors[k] for k in self.grad_outputs}
        self.grad_dY = tensors.get("in.grad.dY")
        self.inputs = {k: v for k, v in tensors.items() if k.startswith("in.") and k != "in.grad.dY"}
        self.expected = {k: tensors[k] for k in self.outputs}
        self.dontcare = {k[len("dontcare."):]: v for k, v in tensors.items() if k.startswith("dontcare.")}
        self.params = {k: v for k, v in tensors.items()
                       if not k.startswith(("in.", "out.", "dontcare.", "alt.", "grad."))}
        self.features = features_of(self)

    def __repr__(self):
        return f"<refenc.Case {self.name} ({self.component})>"

    def fits(self, supports):
        """(True, []) when every feature the case needs matches one of the
        patterns in `supports` (fnmatch: "norm=*"), else (False, missing)."""
        missing = sorted(f for f in self.features if not any(fnmatch.fnmatchcase(f, p) for p in supports))
        return not missing, missing

    def output_name(self, step):
        """"out.<step>" for a step name ("layers.0.norm1") or an output name;
        a gradient's name ("grad.layers.0.output") as it is."""
        if step in self.grads:
            return step
        name = step if step.startswith(OUT) else OUT + step
        if name not in self.expected:
            raise KeyError(f"case {self.name}: '{step}' is not one of its outputs: "
                           f"{', '.join(self.outputs + self.grad_outputs)}")
        return name

    def write_results(self, results_dir, outputs, dtype="F64", metadata=None):
        """Writes RESULTS_DIR/<case>.safetensors: `outputs` maps step or output
        names, or a gradient case's gradient names (grad.*), to arrays or torch
        tensors (each the golden's shape), written in
        `dtype` (F64, F32, F16 or BF16, or an alias: "bfloat16", torch.float32,
        ...).  Returns the path.  The file is RESULTS_DIR/<case>.safetensors
        and nowhere else: a case name outside refenc's rule (a '/', a '..')
        is refused, and the file rules are safetensors.write's."""
        dt = safetensors.dtype_name(dtype)
        tensors = {}
        for step, value in outputs.items():
            name = self.output_name(step)
            a = safetensors._to_numpy(value)
            want = self.grads[name] if name in self.grads else self.expected[name]
            if tuple(a.shape) != want.shape:
                raise ValueError(f"case {self.name}: {name} has shape {tuple(a.shape)}, "
                                 f"the golden {want.shape}")
            tensors[name] = (dt, a)
        check_case_name(self.name)
        os.makedirs(results_dir, exist_ok=True)
        meta = {"case": self.name}
        meta.update(metadata or {})
        # created inside results_dir itself, by name (safetensors.write_in)
        return safetensors.write_in(results_dir, self.name + ".safetensors", tensors, meta)


def features_of(case):
    """The features a case needs, as strings a model's `supports` set
    matches (docs/python.md):
      component=<encoder|attention|ffn|layernorm|softmax|activation|sinusoidal_pe|rope|alibi>
      encoder:   norm=<pre|post>  final_norm=<true|false>  input=<x|tokens>
      encoder, attention:  positional=<none|sinusoidal|learned|rope|alibi>  causal=<true|false>
      encoder, ffn, activation:  activation=<relu|gelu|gelu_tanh|quick_gelu>
      the families' embedding path (docs/families.md), encoder with tokens:
        embedding=unscaled  the token embedding without the sqrt(D) scale
        token_types         token-type rows (in.token_type_ids)
        embedding_norm      a LayerNorm after the embedding sum
        position_ids=roberta  RoBERTa's positions, from padding_idx + 1
      RoPE (encoder, attention, rope):  rope_layout=<half|interleaved>
        rope_scaling=<linear|dynamic|yarn|llama3|longrope>  Hugging Face's
                         rope_scaling (docs/rope-scaling.md); absent: none
        partial_rotary   partial_rotary_factor < 1
      temperature      a softmax temperature other than 1
      key_padding_mask a key padding mask with some key padded
      attn_mask        an additive float mask
      positions        positions other than 0 .. L-1
      rows             the last layer's selected query rows (in.rows): the
                       last layer's outputs are the full run's at those rows
      masked_logits    -inf among the softmax's inputs
      the modern blocks (docs/architecture.md), each absent at its default:
        norm_type=rmsnorm   RMSNorm for every norm (encoder, layernorm)
        rmsnorm_offset      Gemma's (1 + w) scale
        norm_bias=false     LayerNorms without beta
        skip_first_prenorm  layer 0 without its attention norm (ModernBERT), encoder
        sandwich_norm       each sublayer's output normalised (Gemma 2/3), encoder
        ffn_type=glu        the gated FFN (encoder, ffn)
        glu_gate=second     the gate is the second half of linear1
        linear_bias=false   linear maps without bias
        linear1_bias=false  linear1 alone without bias (Jina-v2, GTE)
      grouped-query attention (docs/families.md), encoder and attention:
        n_kv_heads          fewer key/value heads than query heads (GQA, MQA)
        head_dim            a head width other than d_model / n_heads
      Gemma 2/3's attention (docs/families.md), encoder and attention:
        attn_logit_softcapping  scores capped, cap tanh(s / cap)
        query_pre_attn_scalar   scores scaled by query_pre_attn_scalar^-0.5
      attention windows (docs/families.md), encoder and attention:
        sliding_window      a causal window of w keys (Mistral, Qwen2, Gemma)
        local_attention     a symmetric window |i - j| <= w // 2 (ModernBERT)
      Qwen's attention (docs/families.md), encoder and attention:
        qkv_bias            q, k, v biased on bias-free linears (Qwen2)
        qk_norm             q and k RMS-normalised per head before RoPE (Qwen3)
      T5's relative position bias (docs/families.md), encoder and attention:
        relative_attention_num_buckets  bias table[bucket(j - i), h] on the scores
      local and global layers (docs/families.md), encoder:
        global_attn_every_n_layers  layer l global iff l % n == 0 (ModernBERT)
        sliding_window_pattern      layer l global iff (l + 1) % p == 0 (Gemma 3)
      embedding_normalizer_dtype  sqrt(D) rounded to a dtype first (Gemma), encoder
      the pooled embedding out.embedding (docs/families.md), encoder:
        pooling=<mean|cls|last_token>  sentence-transformers' Pooling
        pooling_normalize=false        without its Normalize module"""
    c, comp = case.config, case.component
    f = {f"component={comp}"}
    if comp == "encoder":
        f |= {f"norm={c['norm']}", f"final_norm={str(c['final_norm']).lower()}",
              "input=tokens" if c["vocab_size"] > 0 else "input=x"}
    if comp in ("encoder", "attention"):
        f |= {f"positional={c['positional']}", f"causal={str(c['causal']).lower()}"}
    if comp in ("encoder", "ffn", "activation"):
        f.add(f"activation={c['activation']}")
    if comp == "encoder":  # the embedding path's keys are absent when at their default
        if c["vocab_size"] > 0 and not c.get("scale_embedding", True):
            f.add("embedding=unscaled")
        if c.get("type_vocab_size", 0) > 0:
            f.add("token_types")
        if c.get("embedding_norm", False):
            f.add("embedding_norm")
        if c.get("position_ids", "index") == "roberta":
            f.add("position_ids=roberta")
        if c.get("embedding_normalizer_dtype", "exact") != "exact":
            f.add("embedding_normalizer_dtype")
    if comp in ("encoder", "layernorm"):
        if c.get("norm_type", "layernorm") == "rmsnorm":
            f.add("norm_type=rmsnorm")
        if c.get("rmsnorm_offset", False):
            f.add("rmsnorm_offset")
        if not c.get("norm_bias", True):
            f.add("norm_bias=false")
        if comp == "encoder" and c.get("skip_first_prenorm", False):
            f.add("skip_first_prenorm")
        if comp == "encoder" and c.get("sandwich_norm", False):
            f.add("sandwich_norm")
    if comp in ("encoder", "ffn"):
        if c.get("ffn_type", "mlp") == "glu":
            f.add("ffn_type=glu")
        if c.get("glu_gate", "first") == "second":
            f.add("glu_gate=second")
    if comp in ("encoder", "attention"):
        if c.get("n_kv_heads", c["n_heads"]) != c["n_heads"]:
            f.add("n_kv_heads")
        if c.get("head_dim", c["d_model"] // c["n_heads"]) * c["n_heads"] != c["d_model"]:
            f.add("head_dim")
        for key in ("attn_logit_softcapping", "query_pre_attn_scalar", "sliding_window", "local_attention"):
            if c.get(key) is not None:
                f.add(key)
        if c.get("qkv_bias"):
            f.add("qkv_bias")
        if c.get("qk_norm", "none") != "none":
            f.add("qk_norm")
        if c.get("relative_attention_num_buckets"):
            f.add("relative_attention_num_buckets")
    for key in ("global_attn_every_n_layers", "sliding_window_pattern"):
        if comp == "encoder" and c.get(key) is not None:
            f.add(key)
    if comp == "encoder" and c.get("pooling") not in (None, "none"):
        f.add(f"pooling={c['pooling']}")
        if not c.get("pooling_normalize", True):
            f.add("pooling_normalize=false")
    if comp in ("encoder", "attention", "ffn") and not c.get("linear_bias", True):
        f.add("linear_bias=false")
    if comp in ("encoder", "ffn") and not c.get("linear1_bias", True):
        f.add("linear1_bias=false")
    if comp == "rope" or (comp in ("encoder", "attention") and c["positional"] == "rope"):
        f.add(f"rope_layout={c['rope_layout']}")
        rs = c.get("rope_scaling") or {}
        if rs.get("rope_type", "default") != "default":
            f.add(f"rope_scaling={rs['rope_type']}")
        if c.get("partial_rotary_factor", 1.0) != 1.0:
            f.add("partial_rotary")
    if comp in ("encoder", "attention", "softmax") and c["temperature"] != 1.0:
        f.add("temperature")
    ins = case.inputs
    if "in.key_padding_mask" in ins and ins["in.key_padding_mask"].any():
        f.add("key_padding_mask")
    if "in.attn_mask" in ins:
        f.add("attn_mask")
    if "in.positions" in ins and not np.array_equal(ins["in.positions"], np.arange(len(ins["in.positions"]))):
        f.add("positions")
    if "in.rows" in ins:
        f.add("rows")
    if comp == "softmax" and np.isneginf(ins["in.x"]).any():
        f.add("masked_logits")
    return frozenset(f)


def manifest(golden=None):
    """The golden directory's manifest.json, as a dict."""
    with open(os.path.join(locate.golden_dir(golden), "manifest.json")) as f:
        return json.load(f)


def load_case(name, golden=None):
    """The case `name` of the golden directory."""
    g = locate.golden_dir(golden)
    for entry in manifest(g)["cases"]:
        if entry["case"] == name:
            return Case(os.path.join(g, "cases", entry["file"]))
    raise KeyError(f"no case '{name}' in {g}/manifest.json")


def case_patterns(pattern):
    """A case selection in refenc certify's grammar (docs/cli.md, "refenc
    certify", the selection options): a shell pattern, commas separating several, or an
    iterable of them, each a repeated --case; a case is selected when any
    pattern matches it.  ValueError for an empty pattern or selection."""
    items = [pattern] if isinstance(pattern, (str, os.PathLike)) else list(pattern)
    pats = [p for item in items for p in os.fspath(item).split(",")]
    if not pats or "" in pats:
        raise ValueError(f"case selection {pattern!r}: an empty pattern selects nothing")
    return pats


def all_cases(golden=None, pattern="*", require_match=False):
    """Every case of the golden directory whose name matches `pattern` (see
    case_patterns), in the manifest's order.  require_match: every pattern
    must match some case, as certify's --case must (ValueError naming the
    first that matches none)."""
    pats = case_patterns(pattern)
    g = locate.golden_dir(golden)
    entries = manifest(g)["cases"]
    if require_match:
        for p in pats:
            if not any(fnmatch.fnmatchcase(e["case"], p) for e in entries):
                raise ValueError(f"--case '{p}' matches no case of {g}")
    return [Case(os.path.join(g, "cases", e["file"])) for e in entries
            if any(fnmatch.fnmatchcase(e["case"], p) for p in pats)]


def cases(supports, golden=None, pattern="*"):
    """The cases every feature of which `supports` matches (see features_of)."""
    return [c for c in all_cases(golden, pattern) if c.fits(supports)[0]]


def select(supports, golden=None, pattern="*"):
    """[(case, reason)] for every case: reason is None when the case fits,
    else "needs F, G (not supported)"."""
    out = []
    for c in all_cases(golden, pattern):
        ok, missing = c.fits(supports)
        out.append((c, None if ok else f"needs {', '.join(missing)} (not supported)"))
    return out


def pytest_cases(supports, golden=None, pattern="*"):
    """pytest parameters, one per case, id = the case's name; a case the
    model does not support is skipped with the features it needs."""
    import pytest
    return [pytest.param(c, id=c.name, marks=[pytest.mark.skip(reason=r)] if r else [])
            for c, r in select(supports, golden, pattern)]
