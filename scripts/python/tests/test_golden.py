"""Golden cases read as numpy arrays, the features each case needs, the
choice of the cases a model supports, and results files."""
import numpy as np
import pytest

import refenc

# The features of some cases, from golden/catalogue.json by hand.
FEATURES = {
    "layernorm_eps1e-5": {"component=layernorm"},
    "softmax_masked": {"component=softmax", "masked_logits"},
    "softmax_temperature": {"component=softmax", "temperature"},
    "sinusoidal_pe_large_positions": {"component=sinusoidal_pe", "positions"},
    "rope_large_positions": {"component=rope", "rope_layout=half", "positions"},
    "alibi_h4": {"component=alibi"},
    "attention_rope_interleaved": {"component=attention", "positional=rope", "rope_layout=interleaved",
                                   "causal=false"},
    "attention_float_mask": {"component=attention", "positional=none", "causal=false", "attn_mask"},
    "encoder_pre_tokens_sinusoidal": {"component=encoder", "norm=pre", "final_norm=true", "input=tokens",
                                      "positional=sinusoidal", "causal=false", "activation=gelu",
                                      "key_padding_mask"},
    "encoder_fully_masked_rows": {"component=encoder", "norm=post", "final_norm=false", "input=x",
                                  "positional=none", "causal=true", "activation=gelu", "key_padding_mask"},
    "encoder_rope_large_positions": {"component=encoder", "norm=pre", "final_norm=true", "input=x",
                                     "positional=rope", "rope_layout=half", "causal=false", "activation=gelu",
                                     "positions", "temperature"},
    # the modern blocks: each key named only away from its default
    "rmsnorm_t5_eps1e-6": {"component=layernorm", "norm_type=rmsnorm"},
    "ffn_swiglu_gate_first": {"component=ffn", "activation=silu", "ffn_type=glu"},
    "encoder_pre_rmsnorm_gemma_offset": {"component=encoder", "norm=pre", "final_norm=true", "input=x",
                                         "positional=rope", "rope_layout=half", "causal=false",
                                         "activation=gelu_tanh", "key_padding_mask", "norm_type=rmsnorm",
                                         "rmsnorm_offset"},
    "encoder_post_geglu_gate_second": {"component=encoder", "norm=post", "final_norm=false", "input=x",
                                       "positional=alibi", "causal=false", "activation=gelu",
                                       "key_padding_mask", "ffn_type=glu", "glu_gate=second"},
    "encoder_pre_geglu_bias_free": {"component=encoder", "norm=pre", "final_norm=true", "input=tokens",
                                    "positional=rope", "rope_layout=half", "causal=false", "activation=gelu",
                                    "key_padding_mask", "ffn_type=glu", "norm_bias=false", "linear_bias=false"},
    "rope_llama3_bands": {"component=rope", "rope_layout=half", "rope_scaling=llama3", "positions"},
    "rope_yarn_mscale_partial": {"component=rope", "rope_layout=interleaved", "rope_scaling=yarn",
                                 "partial_rotary", "positions"},
    "rope_dynamic_ntk_long": {"component=rope", "rope_layout=half", "rope_scaling=dynamic", "positions"},
    # grouped-query attention and head_dim (docs/families.md)
    "attention_gqa_llama": {"component=attention", "positional=rope", "rope_layout=half", "causal=true",
                            "linear_bias=false", "n_kv_heads"},
    "attention_mqa": {"component=attention", "positional=rope", "rope_layout=half", "causal=false",
                      "key_padding_mask", "n_kv_heads"},
    "encoder_gqa_head_dim": {"component=encoder", "norm=pre", "final_norm=true", "input=x", "positional=rope",
                             "rope_layout=half", "causal=false", "activation=silu", "norm_type=rmsnorm",
                             "ffn_type=glu", "linear_bias=false", "n_kv_heads", "head_dim"},
}


@pytest.mark.parametrize("name", sorted(FEATURES))
def test_features(name, golden):
    assert refenc.load_case(name, golden).features == FEATURES[name]


def test_every_case_reads(golden):
    cases = refenc.all_cases(golden)
    assert [c.name for c in cases] == [e["case"] for e in refenc.manifest(golden)["cases"]]
    for c in cases:
        assert c.required and set(c.required) <= set(c.outputs) == set(c.expected)
        assert all(a.dtype == np.float64 and np.isfinite(a).all() for a in c.expected.values())
        assert set(c.dontcare) <= set(c.outputs)
        assert all(c.dontcare[k].shape == c.expected[k].shape and c.dontcare[k].dtype == bool for k in c.dontcare)
        assert c.inputs and all(k.startswith("in.") for k in c.inputs)
        assert f"component={c.component}" in c.features


def test_fits_and_select(golden):
    case = refenc.load_case("encoder_pre_tokens_sinusoidal", golden)
    every = {"component=encoder", "norm=*", "final_norm=*", "input=*", "positional=*", "causal=*",
             "activation=*", "key_padding_mask"}
    assert case.fits(every) == (True, [])
    assert case.fits(every - {"key_padding_mask"}) == (False, ["key_padding_mask"])
    assert case.fits(every - {"input=*"} | {"input=x"}) == (False, ["input=tokens"])
    chosen = refenc.select({"component=ffn", "activation=relu"}, golden)
    fitting = [c.name for c, reason in chosen if reason is None]
    assert fitting == ["ffn_relu"]
    reasons = dict((c.name, r) for c, r in chosen)
    assert reasons["ffn_gelu"] == "needs activation=gelu (not supported)"
    assert reasons["alibi_h4"] == "needs component=alibi (not supported)"
    assert [c.name for c in refenc.cases({"component=ffn", "activation=*"}, golden)] == \
        ["ffn_relu", "ffn_gelu", "ffn_gelu_tanh", "ffn_gelu_few_units", "ffn_gelu_tanh_few_units", "ffn_quick_gelu"]


def test_family_cases_need_their_embedding_path(golden):
    bert = refenc.load_case("bert_post_ln_token_types", golden)
    assert {"embedding=unscaled", "token_types", "embedding_norm", "activation=gelu"} <= bert.features
    roberta = refenc.load_case("roberta_positions_left_padding", golden)
    assert "position_ids=roberta" in roberta.features
    plain = {"component=encoder", "norm=*", "final_norm=*", "input=*", "positional=*", "causal=*",
             "activation=*", "key_padding_mask"}
    assert bert.fits(plain) == (False, ["embedding=unscaled", "embedding_norm", "token_types"])
    assert bert.fits(plain | {"embedding=unscaled", "embedding_norm", "token_types"}) == (True, [])
    assert "embedding=unscaled" not in refenc.load_case("encoder_pre_tokens_sinusoidal", golden).features


def test_pytest_cases_skip_with_the_reason(golden):
    params = refenc.pytest_cases({"component=layernorm"}, golden)
    assert len(params) == len(refenc.manifest(golden)["cases"])
    run = [p.id for p in params if not p.marks]
    assert run == [c.name for c in refenc.all_cases(golden, "layernorm_*")]
    skipped = next(p for p in params if p.id == "ffn_relu")
    assert skipped.marks[0].kwargs["reason"] == "needs activation=relu, component=ffn (not supported)"


def test_write_results_checks_names_and_shapes(golden, tmp_path):
    case = refenc.load_case("attention_basic", golden)
    with pytest.raises(KeyError, match="'output2' is not one of its outputs: out.weights, out.output"):
        case.write_results(tmp_path, {"output2": case.expected["out.output"]})
    with pytest.raises(ValueError, match=r"out.output has shape \(2, 6\), the golden \(2, 6, 24\)"):
        case.write_results(tmp_path, {"output": case.expected["out.output"][..., 0]})
    path = case.write_results(tmp_path, {"out.output": case.expected["out.output"], "weights":
                                         case.expected["out.weights"]}, dtype="bfloat16")
    meta, t = refenc.read_safetensors(path)
    assert meta["case"] == "attention_basic" and sorted(t) == ["out.output", "out.weights"]
    want = case.expected["out.output"]  # rounded once to bfloat16: within u = 2^-8 relative
    assert (np.abs(t["out.output"] - want) <= 2.0**-8 * np.abs(want)).all()
    assert not (t["out.output"] == want).all()


def test_locate_refuses_a_wrong_explicit_path(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="not a refenc golden directory"):
        refenc.golden_dir(str(tmp_path))
    monkeypatch.setenv("REFENC_GOLDEN", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="REFENC_GOLDEN"):
        refenc.golden_dir()
    monkeypatch.setenv("REFENC_CLI", str(tmp_path / "nothing"))
    with pytest.raises(FileNotFoundError, match="REFENC_CLI"):
        refenc.cli_path()


def test_all_cases_takes_the_selection_grammar_of_certify(golden):
    """Commas and lists as refenc certify's repeated --case (docs/cli.md): a
    case is taken when any pattern matches, in the manifest's order; with
    require_match a pattern that matches nothing is an error naming it
    (torch_peer.py --case).  Control: the old single-pattern reading
    selected nothing for the comma list."""
    def names(sel, **kw):
        return [c.name for c in refenc.all_cases(golden, sel, **kw)]
    a, b = names("layernorm_*"), names("attention_*")
    assert a and b
    both = names("layernorm_*,attention_*")
    assert both == names(["attention_*", "layernorm_*"]) and sorted(both) == sorted(a + b)
    assert names(["layernorm_*", "no_such_case*"]) == a
    with pytest.raises(ValueError, match="no_such_case"):
        refenc.all_cases(golden, ["layernorm_*", "no_such_case*"], require_match=True)
    with pytest.raises(ValueError, match="empty"):
        refenc.all_cases(golden, "layernorm_*,,attention_*")
