"""The pytest example (docs/examples/test_torch_encoder.py) can
fail: with a bug planted in its model, its test of a case that exposes the
bug raises an assertion that says where the model diverges and which bug it
is."""
import importlib.util
import math
import os

import pytest

import refenc


@pytest.fixture
def example(tree):
    path = os.path.join(tree, "docs", "examples", "test_torch_encoder.py")
    spec = importlib.util.spec_from_file_location("refenc_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(example, case, mode, tmp_path):
    example.test_encoder(case, mode, tmp_path)


def eps_x10(layer, c):
    layer.norm1.eps *= 10
    layer.norm2.eps *= 10


def scale_sqrt_d(layer, c):  # scores divided by sqrt(D) instead of sqrt(Dh)
    layer.self_attn.temperature *= math.sqrt(c["n_heads"])


# (mode, case, bug, first divergence, the known bug's name: in float64 and in
# bfloat16 results alike, the diagnosis names it)
PLANTS = [
    ("float64", "encoder_eps1e-6", eps_x10, "out.layers.0.norm1", "layernorm_eps_x10"),
    ("float32-bf16", "encoder_post", scale_sqrt_d, "out.layers.0.self_attn.weights", "attention_scale_sqrt_d"),
    ("float64", "encoder_post", scale_sqrt_d, "out.layers.0.self_attn.weights", "attention_scale_sqrt_d"),
]


@pytest.mark.parametrize("mode,name,bug,first,variant", PLANTS, ids=[f"{p[0]}-{p[2].__name__}" for p in PLANTS])
def test_the_example_catches_a_planted_bug(example, golden, tmp_path, monkeypatch, mode, name, bug, first, variant):
    case = refenc.load_case(name, golden)
    run(example, case, mode, tmp_path / "clean")  # the model as written passes
    init = example.Layer.__init__

    def planted(self, c):
        init(self, c)
        bug(self, c)

    monkeypatch.setattr(example.Layer, "__init__", planted)
    with pytest.raises(AssertionError) as e:
        run(example, case, mode, tmp_path / "bug")
    msg = str(e.value)
    assert f"case {name}: FAIL" in msg and f"first divergence: {first}" in msg, msg
    if variant:
        assert f"known bug '{variant}'" in msg, msg
