"""refenc.capture: a torch model's intermediates recorded with forward hooks
under refenc's step names, on PyTorch's own nn.TransformerEncoder."""
import pytest
import torch
import torch.nn as nn

import refenc


def torch_encoder(case, dtype):
    c = case.config
    layer = nn.TransformerEncoderLayer(c["d_model"], c["n_heads"], c["d_ff"], dropout=0.0, activation=c["activation"],
                                       layer_norm_eps=c["layer_norm_eps"], batch_first=True,
                                       norm_first=c["norm"] == "pre", dtype=dtype)
    norm = nn.LayerNorm(c["d_model"], eps=c["layer_norm_eps"], dtype=dtype) if c["final_norm"] else None
    enc = nn.TransformerEncoder(layer, c["n_layers"], norm=norm, enable_nested_tensor=False)
    enc.load_state_dict(refenc.state_dict(case, dtype), strict=True)
    return enc.eval()


@pytest.mark.parametrize("name", ["encoder_pre", "encoder_post"])
def test_torch_encoder_intermediates_certify(name, golden, cli, tmp_path):
    case = refenc.load_case(name, golden)
    enc = torch_encoder(case, torch.float64)
    with refenc.capture(enc, refenc.encoder_steps(enc)) as cap:
        y = enc(refenc.tensor(case.inputs["in.x"], torch.float64))
    assert cap.missing() == []
    case.write_results(tmp_path, {"output": y, **cap.outputs})
    v = refenc.certify_case(case, tmp_path, golden=golden, cli=cli)
    v.assert_pass()
    compared = {n for n, o in v.outputs.items() if o.status == "PASS"}
    assert compared == {n for n in case.outputs if n not in ("out.embed",) and not n.endswith(".weights")}
    assert all(not m._forward_hooks for m in enc.modules()), "hooks left behind"


def test_capture_by_name_tuples_and_missing(golden):
    case = refenc.load_case("encoder_post", golden)
    enc = torch_encoder(case, torch.float32)
    spare = nn.Linear(2, 2)
    mapping = {"layers.0.self_attn": (None, "layers.0.self_attn.weights"), "layers.1.norm2": "layers.1.norm2",
               spare: "never"}
    with refenc.capture(enc, mapping) as cap:
        enc(refenc.tensor(case.inputs["in.x"], torch.float32))
    # nn.TransformerEncoderLayer asks for no weights: None is not recorded
    assert sorted(cap.outputs) == ["layers.1.norm2"]
    assert cap.missing() == ["layers.0.self_attn.weights", "never"]
    assert cap.outputs["layers.1.norm2"].dtype == torch.float32
