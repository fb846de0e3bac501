"""PyTorch helpers: a case's tensors as torch tensors, and the intermediates
of a model recorded with forward hooks under refenc's step names.  torch is
imported only when these are called."""


def _torch():
    import torch
    return torch


def tensor(array, dtype=None):
    """A numpy array of a case as a torch tensor of `dtype` (floats only;
    the golden inputs are exact in float16, bfloat16, float32 and float64)."""
    torch = _torch()
    t = torch.from_numpy(array.copy())
    return t.to(dtype) if dtype is not None and t.is_floating_point() else t


def state_dict(case, dtype=None):
    """The case's parameters, PyTorch's state_dict names and layouts, as
    torch tensors of `dtype`: model.load_state_dict(refenc.state_dict(case, ...))."""
    return {k: tensor(v, dtype) for k, v in case.params.items()}


class Capture:
    """Records module outputs under refenc step names while active:

        with refenc.capture(model, {model.layers[0].norm1: "layers.0.norm1",
                                    "layers.0.self_attn": ("layers.0.self_attn",
                                                           "layers.0.self_attn.weights")}) as cap:
            y = model(x)
        case.write_results(dir, {"output": y, **cap.outputs})

    A key is a module or its qualified name in the model; a value is a step
    name, or a tuple of names for the elements of a tuple output (None
    skips one; an element that is None, such as attention weights not
    computed, is not recorded).  `outputs` maps each step to the detached
    tensor of the module's last call.  `missing()` lists the steps no hook
    recorded: a module the forward pass did not call (PyTorch's fused
    inference path for nn.TransformerEncoderLayer skips its submodules)."""

    def __init__(self, model, mapping):
        self.model = model
        self.mapping = {}
        for module, steps in mapping.items():
            m = model.get_submodule(module) if isinstance(module, str) else module
            self.mapping[m] = steps
        self.outputs = {}
        self._handles = []

    def _hook(self, steps):
        def record(_module, _inputs, output):
            names = steps if isinstance(steps, (tuple, list)) else (steps,)
            values = output if isinstance(output, (tuple, list)) else (output,)
            for name, value in zip(names, values):
                if name is not None and value is not None:
                    self.outputs[name] = value.detach()
        return record

    def __enter__(self):
        for m, steps in self.mapping.items():
            self._handles.append(m.register_forward_hook(self._hook(steps)))
        return self

    def __exit__(self, *exc):
        for h in self._handles:
            h.remove()
        self._handles = []
        return False

    def missing(self):
        names = []
        for steps in self.mapping.values():
            names += [s for s in (steps if isinstance(steps, (tuple, list)) else (steps,)) if s is not None]
        return [n for n in names if n not in self.outputs]


def capture(model, mapping):
    """A Capture of `model`'s modules: see Capture."""
    return Capture(model, mapping)


def encoder_steps(encoder):
    """The mapping for PyTorch's nn.TransformerEncoder (layers[i].norm1,
    norm2, self_attn, linear2 and the layer itself; the final norm): the
    steps of docs/architecture.md.  The attention weights are not among
    them, as nn.TransformerEncoderLayer does not compute them.  Its fused
    inference path calls no submodule: run the model with gradients enabled
    (not under torch.no_grad()) for the hooks to fire."""
    m = {}
    for i, layer in enumerate(encoder.layers):
        m.update({layer.norm1: f"layers.{i}.norm1", layer.norm2: f"layers.{i}.norm2",
                  layer.self_attn: f"layers.{i}.self_attn", layer.linear2: f"layers.{i}.ffn",
                  layer: f"layers.{i}.output"})
    if getattr(encoder, "norm", None) is not None:
        m[encoder.norm] = "norm"
    return m
