"""The layer contract's mixed-precision part for every layer (tests/mixed_precision_cases.py):
under mixed_float16 and mixed_bfloat16, finite outputs and gradients on zero, collinear,
orthogonal and masked inputs, and outputs within layer_contract.MIXED_PRECISION_TOLERANCE of
float32 (TPRMemory's stage by stage: mixed_precision_cases.check_tpr_memory_stages) - on this
process's backend per layer, and on JAX in one fresh process for the layers
with 16-bit code paths of their own (mixed_precision_cases.JAX_CASES)."""

import json

import keras
import numpy as np
import pytest
from layer_contract import run_fresh_process
from mixed_precision_cases import JAX_CASES, case_names, check_case

import keras_relational
import keras_relational.layers


@pytest.mark.parametrize("name", case_names())
def test_mixed_precision(name):
    failures = check_case(name)
    assert not failures, "\n".join(failures)


def test_every_layer_has_a_mixed_precision_case():
    covered = {name.split("[")[0] for name in case_names()}
    missing = set(keras_relational.layers.__all__) - covered - {
        "ConvStackMemoryCell", "TPRMemoryCell"}  # run inside ConvStackMemory / TPRMemory
    assert not missing, f"layers without a mixed-precision case: {sorted(missing)}"


@pytest.mark.slow
@pytest.mark.subprocess
def test_mixed_precision_on_jax_in_a_fresh_process():
    if keras.backend.backend() == "jax":
        pytest.skip("this process already runs the JAX backend (test_mixed_precision)")
    result = run_fresh_process(["tests/mixed_precision_cases.py", *JAX_CASES], backend="jax")
    failures = json.loads(result.stdout.strip().splitlines()[-1])
    assert not failures, "\n".join(failures)


# The layers on PyTorch (issue #30: the layers are keras.ops only, so they run on torch too):
# the layers with 16-bit paths of their own, SymbolConvolution (its einsum met a float32 kernel
# there while the contract bypassed autocasting), the relational module and the TPR memory.
TORCH_CASES = (*JAX_CASES, "SymbolConvolution", "RelationalModule", "TPRMemory[factored]")
# Why the torch lane may not run: torch is not in every stack (docs/install.md says why).
_NO_TORCH = ("torch is not installed: `make venv` installs the CPU build torch==2.13.0 where pip "
             "finds it on disk; PyPI's own Linux x86_64 torch wheels are CUDA builds (about 0.55 "
             "GB plus about 2 GB of nvidia-* wheels), see docs/install.md")


@pytest.mark.subprocess
def test_layers_on_torch_in_a_fresh_process():
    """float32 and both 16-bit policies under KERAS_BACKEND=torch: finite outputs and gradients
    (torch.autograd) on the degenerate inputs, outputs within tolerance of float32."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        pytest.skip(_NO_TORCH)
    result = run_fresh_process(["tests/mixed_precision_cases.py", *TORCH_CASES],
                               backend="torch")
    failures = json.loads(result.stdout.strip().splitlines()[-1])
    assert not failures, "\n".join(failures)


def test_simplicial_attention_zero_input_is_finite_under_float16():
    """Measured before the fix: NaN for every all-zero input under mixed_float16 on TensorFlow
    (the float32 upcast tested ``str(dtype)``, which is ``<dtype: 'float16'>`` there)."""
    for mode in ("virtual", "full"):
        layer = keras_relational.SimplicialAttention(2, 4, mode=mode, dtype="mixed_float16")
        outputs = layer(np.zeros((2, 5, 6), "float32"))
        assert np.all(np.isfinite(keras.ops.convert_to_numpy(outputs))), mode


def test_fully_masked_query_rows_are_uniform_under_float16():
    """Measured before the fix: NaN for every fully masked query row under mixed_float16 on
    TensorFlow (the -1e9 mask constant overflowed float16 to -inf)."""
    layer = keras_relational.MultiHeadDotProductAttention(2, 4, dtype="mixed_float16")
    mask = np.ones((2, 5), bool)
    mask[0] = False
    outputs, scores = layer(np.random.RandomState(0).normal(size=(2, 5, 6)).astype("float32"),
                            mask=mask, return_attention_scores=True)
    assert np.all(np.isfinite(keras.ops.convert_to_numpy(outputs)))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(scores)[0].astype("float32"), 0.2,
                               atol=1e-3)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_factored_tpr_memory_runs_under_16_bit_policies(policy):
    """Measured before the fix on TensorFlow: MatrixTriangularSolve has no half or bfloat16
    kernel."""
    rng = np.random.RandomState(0)
    layer = keras_relational.TPRMemory(6, 4, 8, dtype=policy)
    outputs = layer([rng.normal(size=(2, 3, 10)).astype("float32"),
                     rng.normal(size=(2, 10)).astype("float32")])
    assert keras.backend.standardize_dtype(outputs.dtype) == policy.split("_")[1]
    assert np.all(np.isfinite(keras.ops.convert_to_numpy(keras.ops.cast(outputs, "float32"))))
