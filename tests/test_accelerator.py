"""The accelerator lane: every layer and every paper's model on the GPU that Keras sees.

Marked ``accelerator``: ``tests/conftest.py`` skips these tests with the reason where Keras'
backend sees no GPU. Run them with ``KERAS_BACKEND=jax python -m pytest -m accelerator
tests/test_accelerator.py`` (the recipe for a JAX-on-CUDA machine without TensorFlow is in
docs/contributing.md). Nothing here imports TensorFlow under JAX: the module, the layer cases
(``tests/mixed_precision_cases.py``) and the models (``benchmarks/paper_models.py``) load only
Keras; ``test_lane_collects_without_tensorflow`` (not marked) proves it on every machine.

``KERAS_RELATIONAL_ACCELERATOR_ON_CPU=1`` runs the lane on the CPU (the "GPU" is then the CPU
too): a check of the lane's own code where no GPU is at hand.

``benchmarks/gpu_session.py`` runs the lane's three tests as three parts (``lane_layers``,
``lane_16bit``, ``lane_models``: ``-k`` on the test's name), each in one process and time box.
"""

import contextlib
import os
import subprocess
import sys

import benchmark_scripts
import keras
import numpy as np
import pytest
from layer_contract import check_jit_fit_step, outputs_and_gradients, symbolic_like
from mixed_precision_cases import case_names, cases, check_case

paper_models = benchmark_scripts.load("paper_models")

_ON_CPU = os.environ.get("KERAS_RELATIONAL_ACCELERATOR_ON_CPU") == "1"

# GPU float32 against CPU float32, as a fraction of max(1, max |CPU value|), for outputs and for
# gradients (inputs and weights). Both run at full float32 matmul precision (no TF32): what is
# left is summation order and the transcendental functions' last bits, about 1e-6 relative per
# op; 1e-4 leaves room for the few dozen ops of a layer and its backward pass.
GPU_TOLERANCE = 1e-4


@contextlib.contextmanager
def _on(device_kind):
    """Runs Keras ops on the ``"cpu"`` or ``"gpu"`` device at full float32 matmul precision."""
    backend = keras.backend.backend()
    kind = "cpu" if _ON_CPU else device_kind
    if backend == "jax":
        import jax

        with jax.default_device(jax.devices(kind)[0]), jax.default_matmul_precision("float32"):
            yield
    elif backend == "tensorflow":
        import tensorflow as tf

        tf32 = tf.config.experimental.tensor_float_32_execution_enabled()
        tf.config.experimental.enable_tensor_float_32_execution(False)
        try:
            with tf.device(f"/{kind.upper()}:0"):
                yield
        finally:
            tf.config.experimental.enable_tensor_float_32_execution(tf32)
    else:
        pytest.skip(f"the lane compares devices on JAX and TensorFlow, not {backend!r}")


def _case(name):
    (case,) = [c for c in cases() if c[0] == name]
    return case


@pytest.mark.accelerator
@pytest.mark.parametrize("name", case_names())
def test_layer_forward_and_backward_on_gpu_match_cpu(name):
    """Outputs and gradients (inputs and weights) of the float32 layer, jit-compiled on the GPU
    (JAX; TensorFlow runs op by op on it), match the CPU within ``GPU_TOLERANCE``."""
    _, make_layer, args, masks = _case(name)
    call_kwargs = {"mask": masks[0]} if masks else {}
    layer = make_layer(dtype="float32")
    layer(*keras.tree.map_structure(symbolic_like, args),
          **keras.tree.map_structure(symbolic_like, call_kwargs))
    # NumPy weights: each device places its own copy.
    values = ([np.asarray(v.value) for v in layer.trainable_variables],
              [np.asarray(v.value) for v in layer.non_trainable_variables])
    results = {}
    for kind in ("cpu", "gpu"):
        with _on(kind):
            (results[kind],) = outputs_and_gradients([layer], values, args, call_kwargs, seed=0)
    parts = ("output", "d/d input", "d/d weight")
    for part, cpu, gpu in zip(parts, results["cpu"], results["gpu"], strict=True):
        for i, (expected, actual) in enumerate(zip(cpu, gpu, strict=True)):
            scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
            error = float(np.max(np.abs(actual - expected), initial=0.0))
            assert error <= GPU_TOLERANCE * scale, (
                f"{name}: {part} {i} on the GPU differs from the CPU by {error:.3g} > "
                f"{GPU_TOLERANCE} * {scale:.3g}")


@pytest.mark.accelerator
@pytest.mark.parametrize("name", case_names())
def test_layer_16bit_paths_on_gpu_are_finite(name):
    """``check_mixed_precision`` on the GPU over the degenerate inputs (zeros, collinear,
    orthogonal, masked rows): mixed_bfloat16 and mixed_float16 outputs and gradients finite,
    outputs within the contract's tolerance of float32."""
    with _on("gpu"):
        failures = check_case(name)
    assert failures == []


# One model of each paper also in float32 (the others' float32 layers are checked one by one
# above, against the CPU): every paper model compiles on the GPU under mixed_bfloat16, the policy
# GPU training uses, and whose 16-bit paths the float32 cases cannot reach. Halves the lane's
# slowest group (each case compiles a predict and a train step of a whole model).
FLOAT32_MODELS = ("relational_agent", "simplicial_agent", "relations_game[predinet]", "tpr_rnn",
                  "conv_stack_lstm", "atari_predinet_agent")


def paper_model_cases():
    """``(name, dtype_policy)`` of the lane's whole-model cases: every paper model under
    mixed_bfloat16, ``FLOAT32_MODELS`` in float32 too."""
    names = paper_models.model_names()
    missing = sorted(set(FLOAT32_MODELS) - set(names))
    if missing:
        raise ValueError(f"FLOAT32_MODELS: {missing} are not paper models ({names})")
    return [(name, policy) for name in names
            for policy in ("float32", "mixed_bfloat16")
            if policy == "mixed_bfloat16" or name in FLOAT32_MODELS]


@pytest.mark.accelerator
@pytest.mark.parametrize("name, dtype_policy", paper_model_cases())
def test_paper_model_jit_fit_step_on_gpu(name, dtype_policy):
    """One ``model.fit(jit_compile=True)`` step of the paper's whole model at its sizes: finite
    loss, weights changed."""
    from keras_relational.models import precision

    ((_, build, make_inputs),) = [m for m in paper_models.models() if m[0] == name]
    with _on("gpu"), precision.dtype_policy_scope(dtype_policy):
        model = build()
        check_jit_fit_step(model, make_inputs(np.random.RandomState(0), 4))


_NO_TENSORFLOW = """
import sys

BLOCKED = ("tensorflow", "tf_keras", "tf_agents", "tensorflow_probability")
refused = []


class NoTensorFlow:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            refused.append(name)
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NoTensorFlow())
import pytest

code = pytest.main(["-q", "-p", "no:xdist", "-p", "no:cacheprovider", "-m", "accelerator",
                    "tests/test_accelerator.py"])
loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
print("REFUSED", sorted(set(refused)), "LOADED", loaded)
sys.exit(int(code) or (2 if loaded else 0))
"""


@pytest.mark.subprocess
def test_lane_collects_without_tensorflow():
    """Under JAX with TensorFlow unimportable, the lane collects every case and skips them with
    the reason (the fresh process sees no GPU: ``JAX_PLATFORMS=cpu``)."""
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}
    env.pop("KERAS_RELATIONAL_ACCELERATOR_ON_CPU", None)
    result = subprocess.run([sys.executable, "-c", _NO_TENSORFLOW], env=env,
                            cwd=benchmark_scripts.REPO_ROOT, capture_output=True, text=True,
                            timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    expected = 2 * len(case_names()) + len(paper_model_cases()) + 2  # + the MHDPA flash pair
    assert f"{expected} skipped" in output, output
    assert "Keras' jax backend sees no GPU" in output, output
    assert "LOADED []" in output, output


@pytest.mark.accelerator
@pytest.mark.parametrize("masked", [False, True], ids=["no_mask", "padding_and_empty_rows"])
def test_mhdpa_flash_path_on_gpu_is_as_accurate_as_the_einsum_path(masked):
    """Under mixed_bfloat16 on the GPU, ``MultiHeadDotProductAttention``'s default path is
    ``keras.ops.dot_product_attention`` (cuDNN's flash attention under JAX). At the Box-World
    size (N = 196 entities), with no mask and with padded entities and a sample without any, its
    outputs and gradients are finite and as close to the float32 layer as the layer's own bf16
    einsum path (``flash_attention=False``) is: at most twice its error, or 1 % of the largest
    value (bf16 rounding, both paths: 16-bit matmuls; cuDNN adds an online softmax and the mask
    as a bias)."""
    from keras_relational import MultiHeadDotProductAttention

    if keras.backend.backend() != "jax":
        # TensorFlow's ops.dot_product_attention computes logits and softmax in the compute
        # dtype, and under bf16 this test fails there (run on the CPU): the layer's default
        # never takes that path.
        pytest.skip("the flash path is the default under JAX only")
    rng = np.random.default_rng(0)
    batch, entities, width = 2, 196, 64
    inputs = rng.normal(size=(batch, entities, width)).astype("float32")
    mask = None
    if masked:
        mask = np.ones((batch, entities), bool)
        mask[0, 150:] = False  # padded entities
        mask[1, :] = False  # a sample with no entity: its rows attend uniformly in every path
    settings = {"float32": ("float32", False), "einsum": ("mixed_bfloat16", False),
                "flash": ("mixed_bfloat16", True)}
    layers = {name: MultiHeadDotProductAttention(num_heads=2, key_dim=32, flash_attention=flash,
                                                 dtype=dtype)
              for name, (dtype, flash) in settings.items()}
    for layer in layers.values():
        layer.build(inputs.shape)
    # NumPy weights, the same for every layer (each device places its own copy).
    values = ([np.asarray(v.value) for v in layers["float32"].trainable_variables],
              [np.asarray(v.value) for v in layers["float32"].non_trainable_variables])
    call_kwargs = {} if mask is None else {"mask": mask}
    with _on("gpu"):
        results = dict(zip(layers, outputs_and_gradients(
            list(layers.values()), values, (inputs,), call_kwargs, seed=0), strict=True))
    parts = ("output", "d/d input", "d/d weight")
    for p, part in enumerate(parts):
        for i, expected in enumerate(results["float32"][p]):
            expected = np.asarray(expected, "float32")
            scale = max(1e-6, float(np.max(np.abs(expected), initial=0.0)))
            error = {name: float(np.max(np.abs(np.asarray(results[name][p][i], "float32")
                                               - expected), initial=0.0)) / scale
                     for name in ("einsum", "flash")}
            assert np.all(np.isfinite(np.asarray(results["flash"][p][i], "float32"))), (
                f"{part} {i}: not finite on the flash path")
            assert error["flash"] <= max(2 * error["einsum"], 0.01), (
                f"{part} {i}: the flash path is {error['flash']:.3g} of the largest value from "
                f"float32, the einsum path {error['einsum']:.3g}")
