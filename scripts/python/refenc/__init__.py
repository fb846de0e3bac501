"""refenc for Python: read refenc's golden cases as numpy arrays, write
results files in F64, F32, F16 or BF16, choose the cases a model supports,
record a torch model's intermediates, and certify them with `refenc
certify`.  Pure Python and numpy; torch only for the torch helpers.
docs/python.md is the guide.

    import refenc
    for case in refenc.cases(supports={"component=ffn", "activation=*"}):
        y = my_ffn(case.inputs["in.x"], case.params)
        case.write_results("results", {"output": y}, dtype="BF16")
    refenc.certify("results", [c.name for c in refenc.cases(...)]).assert_pass()
"""
from .certify import (CaseVerdict, Certificate, CertifyError, Diagnosis, OutputVerdict, certify,
                      certify_case, report)
from .golden import Case, all_cases, cases, features_of, load_case, manifest, pytest_cases, select
from .locate import cli_path, golden_dir
from .safetensors import (FormatError, bf16_to_double, double_to_bf16, double_to_f16, f16_to_double,
                          read as read_safetensors, write as write_safetensors)
from .torchutil import Capture, capture, encoder_steps, state_dict, tensor

__all__ = [
    "Case", "CaseVerdict", "Capture", "Certificate", "CertifyError", "Diagnosis", "FormatError",
    "OutputVerdict", "all_cases", "bf16_to_double", "capture", "cases", "certify", "certify_case",
    "cli_path", "double_to_bf16", "double_to_f16", "encoder_steps", "f16_to_double", "features_of",
    "golden_dir", "load_case", "manifest", "pytest_cases", "read_safetensors", "report", "select", "state_dict",
    "tensor", "write_safetensors",
]
