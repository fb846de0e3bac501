"""Fixtures of the refenc module's tests: the source tree, the refenc
program and its shared library (REFENC_CLI and REFENC_LIB override them), and
a seed (REFENC_SEED overrides the default; failing tests print it)."""
import ctypes
import os
import sys

import pytest

TREE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(TREE, "scripts", "python"))

DEFAULT_SEED = 20240521


@pytest.fixture(scope="session")
def tree():
    return TREE


@pytest.fixture(scope="session")
def golden(tree):
    return os.path.join(tree, "golden")


@pytest.fixture(scope="session")
def cli(tree):
    p = os.environ.get("REFENC_CLI") or os.path.join(tree, "build", "refenc")
    assert os.access(p, os.X_OK), f"{p}: build refenc first (make)"
    return p


@pytest.fixture(scope="session")
def libref(tree):
    """librefenc.so, whose encoders are the reference the Python ones are
    checked against."""
    p = os.environ.get("REFENC_LIB") or os.path.join(tree, "build", "librefenc.so")
    assert os.path.exists(p), f"{p}: build refenc first (make)"
    lib = ctypes.CDLL(p)
    for name in ("refenc_double_to_bf16", "refenc_double_to_f16"):
        getattr(lib, name).restype = ctypes.c_uint16
        getattr(lib, name).argtypes = [ctypes.c_double]
    for name in ("refenc_bf16_to_double", "refenc_f16_to_double"):
        getattr(lib, name).restype = ctypes.c_double
        getattr(lib, name).argtypes = [ctypes.c_uint16]
    return lib


@pytest.fixture
def seed():
    return int(os.environ.get("REFENC_SEED", DEFAULT_SEED))
