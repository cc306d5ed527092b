"""The layer test contract every keras_relational layer test calls.

``run_layer_contract`` checks, for one layer configuration:

1. ``compute_output_shape`` agrees with the eager output and a symbolic (functional) call works
   with an unknown batch size;
2. config round trip: ``from_config(get_config())`` with the same weights gives identical outputs;
3. ``.keras`` save/load of a functional model gives identical outputs;
4. one ``model.fit`` step with ``jit_compile=True`` runs, gives a finite loss and changes weights;
5. in a *fresh Python process* running the JAX backend: the ``model.export`` SavedModel
   reloaded with ``tf.saved_model.load`` gives the same outputs as TF, and the ``.keras`` file
   loaded under JAX gives the same forward pass (atol 1e-5). The process is forked, per check,
   from a server that has only made the imports (one per backend and test process:
   ``fresh_process_check.py --serve``).

The mixed-precision part (``check_mixed_precision``, run for every layer by
``tests/layers/test_mixed_precision.py`` over the cases of ``tests/mixed_precision_cases.py``):
under ``mixed_float16`` and ``mixed_bfloat16``, finite outputs and gradients on degenerate inputs,
and outputs within ``MIXED_PRECISION_TOLERANCE`` of float32 (for a layer whose float32 output is
ill-conditioned in its 16-bit parts' outputs, its cases compare stage by stage instead).

The individual checks are public too, for layers that need a custom model around them.
"""

import atexit
import inspect
import json
import os
import select
import subprocess
import sys
import tempfile

import keras
import numpy as np

_FRESH_PROCESS_SCRIPT = os.path.join(os.path.dirname(__file__), "fresh_process_check.py")
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _to_numpy_list(outputs):
    return [keras.ops.convert_to_numpy(o) for o in keras.tree.flatten(outputs)]


def assert_outputs_close(expected, actual, atol=1e-5, what="outputs"):
    expected = _to_numpy_list(expected)
    actual = _to_numpy_list(actual)
    assert len(expected) == len(actual), f"{what}: {len(expected)} vs {len(actual)} tensors"
    for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
        assert e.shape == a.shape, f"{what}[{i}]: shape {e.shape} vs {a.shape}"
        np.testing.assert_allclose(a, e, atol=atol, rtol=0, err_msg=f"{what}[{i}] differ")


def functional_model(layer, input_data, call_kwargs=None):
    """Wraps ``layer`` in a functional model with an unknown batch size."""
    call_kwargs = call_kwargs or {}
    inputs = [keras.Input(shape=np.shape(x)[1:], dtype=str(np.asarray(x).dtype)) for x in
              _as_list(input_data)]
    layer_inputs = inputs if isinstance(input_data, (list, tuple)) else inputs[0]
    outputs = layer(layer_inputs, **call_kwargs)
    model_inputs = inputs if isinstance(input_data, (list, tuple)) else inputs[0]
    return keras.Model(model_inputs, outputs)


def check_output_shape(layer, input_data, outputs, call_kwargs=None):
    """``compute_output_shape`` (given the call arguments it accepts) == the eager shapes."""
    input_shapes = [tuple(np.shape(x)) for x in _as_list(input_data)]
    shape_arg = input_shapes if isinstance(input_data, (list, tuple)) else input_shapes[0]
    accepted = inspect.signature(layer.compute_output_shape).parameters
    shape_kwargs = {k: v for k, v in (call_kwargs or {}).items() if k in accepted}
    expected = layer.compute_output_shape(shape_arg, **shape_kwargs)
    several = isinstance(expected, (list, tuple)) and expected and isinstance(
        expected[0], (list, tuple))
    expected = [tuple(e) for e in expected] if several else [tuple(expected)]
    actual = [tuple(o.shape) for o in keras.tree.flatten(outputs)]
    assert expected == actual, (
        f"compute_output_shape {expected} != actual output shapes {actual}")


def check_config_round_trip(layer, input_data, call_kwargs=None, atol=1e-6):
    call_kwargs = call_kwargs or {}
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config, "get_config() differs after from_config()"
    clone(input_data, **call_kwargs)  # builds
    clone.set_weights(layer.get_weights())
    assert_outputs_close(layer(input_data, **call_kwargs), clone(input_data, **call_kwargs),
                         atol=atol, what="from_config outputs")
    return clone


def check_keras_file_round_trip(model, input_data, path, atol=1e-6):
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert_outputs_close(model.predict(input_data, verbose=0),
                         reloaded.predict(input_data, verbose=0), atol=atol,
                         what=".keras reload outputs")
    return reloaded


def check_jit_fit_step(model, input_data, seed=0):
    """One ``fit`` step with ``jit_compile=True`` against random targets of the output shapes."""
    rng = np.random.RandomState(seed)
    outputs = model.predict(input_data, verbose=0)
    targets = [rng.normal(size=np.shape(o)).astype("float32") for o in keras.tree.flatten(outputs)]
    targets = targets if len(targets) > 1 else targets[0]
    before = [np.array(w) for w in model.get_weights()]
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse", jit_compile=True)
    batch_size = np.shape(keras.tree.flatten(input_data)[0])[0]  # dict inputs too
    history = model.fit(input_data, targets, epochs=1, batch_size=batch_size, verbose=0)
    loss = history.history["loss"][-1]
    assert np.isfinite(loss), f"jit_compile fit step gave a non-finite loss {loss}"
    after = model.get_weights()
    changed = sum(not np.array_equal(b, a) for b, a in zip(before, after, strict=True))
    assert model.trainable_weights, "model has no trainable weights"
    assert changed > 0, "no weight changed after one jit_compile fit step"


# float16's largest finite value. A gradient whose float32 value is beyond it overflows in float16
# whatever the layer does (e.g. a LayerNorm of an all-zero row has gain 1/sqrt(epsilon) = 1000
# with epsilon 1e-6, and two of them chained give 1e6): float16 gradients are checked finite only
# where the float32 ones are within range; training skips such a step under loss scaling.
_FLOAT16_MAX = 65504.0

# How far a 16-bit policy's outputs may be from float32 (same weights, same inputs), as a fraction
# of max(1, max |float32 output|). The unit roundoff is 2^-11 = 4.9e-4 for float16 (10 stored
# mantissa bits) and 2^-8 = 3.9e-3 for bfloat16 (7); every layer chains a few matmuls whose inputs
# and outputs are rounded (the logits, softmax, norms and solves stay float32), and an error of
# a few units of roundoff per matmul, growing with the square root of the contraction length,
# stays about 10 roundoffs at the contract's sizes: 1e-2 and 5e-2 leave that margin.
MIXED_PRECISION_TOLERANCE = {"mixed_float16": 1e-2, "mixed_bfloat16": 5e-2}
# The relative error of one rounding to each policy's compute dtype (round to nearest).
UNIT_ROUNDOFF = {"mixed_float16": 2.0**-11, "mixed_bfloat16": 2.0**-8}


def symbolic_like(x):
    """A ``keras.KerasTensor`` of the shape and dtype of the array ``x``."""
    dtype = keras.backend.standardize_dtype(np.asarray(x).dtype)
    return keras.KerasTensor(np.shape(x), dtype=dtype)


def outputs_and_gradients(layers, values, args, call_kwargs, seed):
    """For each layer: its outputs (and added losses) in float32, and the gradients of
    ``sum(output * cotangent)`` (fixed random cotangents) with respect to the float inputs and
    the trainable weights: ``[(outputs, input_grads, weight_grads), ...]``.

    ``layer.stateless_call`` with the same weight ``values`` for every layer, so the same code
    runs on TensorFlow (eagerly), PyTorch (eagerly, torch.autograd) and JAX (all layers in one
    compiled function: op-by-op JAX takes minutes for the whole contract on a CPU).
    """
    trainable, non_trainable = values
    flat_args = keras.tree.flatten(args)
    float_at = [i for i, x in enumerate(flat_args) if np.asarray(x).dtype.kind == "f"]

    def forward(layer, trainable_values, float_inputs):
        flat = list(flat_args)
        for i, x in zip(float_at, float_inputs, strict=True):
            flat[i] = keras.ops.cast(x, layer.compute_dtype)  # as Layer.__call__ would
        call_args = keras.tree.pack_sequence_as(args, flat)
        # Layer.__call__ in a stateless scope, not stateless_call: stateless_call runs call()
        # outside the autocast scope, so under a 16-bit policy the float32 kernels would meet
        # 16-bit inputs (promoted to float32 by TF's and JAX's ops, an error in torch's einsum)
        # instead of their 16-bit casts, as in training.
        mapping = list(zip(layer.trainable_variables, trainable_values, strict=True)) + list(
            zip(layer.non_trainable_variables, non_trainable, strict=True))
        with keras.StatelessScope(state_mapping=mapping, collect_losses=True) as scope:
            outputs = layer(*call_args, **call_kwargs)
        losses = list(scope.losses)
        outputs = [keras.ops.cast(o, "float32") for o in keras.tree.flatten(outputs) + losses]
        rng = np.random.RandomState(seed)  # shapes are static: the same cotangents every layer
        loss = sum(keras.ops.sum(o * keras.ops.convert_to_tensor(  # a tensor: torch's
            rng.normal(size=tuple(o.shape)).astype("float32")))         # `*` takes no ndarray
                   for o in outputs)
        return loss, outputs

    float_inputs = [keras.ops.convert_to_tensor(flat_args[i]) for i in float_at]
    trainable = [keras.ops.convert_to_tensor(v) for v in trainable]
    backend = keras.backend.backend()
    results = []
    if backend == "tensorflow":
        import tensorflow as tf

        for layer in layers:
            with tf.GradientTape() as tape:
                tape.watch(trainable + float_inputs)
                loss, outputs = forward(layer, trainable, float_inputs)
            weight_grads, input_grads = tape.gradient(loss, [trainable, float_inputs])
            results.append((outputs, input_grads, weight_grads))
    elif backend == "jax":
        import jax

        def all_layers(trainable_values, inputs):
            grad = jax.value_and_grad(
                lambda t, x, layer: forward(layer, t, x), argnums=(0, 1), has_aux=True)
            return [grad(trainable_values, inputs, layer) for layer in layers]

        for (_, outputs), (weight_grads, input_grads) in jax.jit(all_layers)(trainable,
                                                                             float_inputs):
            results.append((outputs, input_grads, weight_grads))
    elif backend == "torch":
        import torch

        for layer in layers:
            weights = [t.detach().clone().requires_grad_(True) for t in trainable]
            inputs = [x.detach().clone().requires_grad_(True) for x in float_inputs]
            loss, outputs = forward(layer, weights, inputs)
            grads = torch.autograd.grad(loss, weights + inputs, allow_unused=True)
            grads = [torch.zeros_like(x) if g is None else g  # as TF's tape: no path, zero
                     for x, g in zip(weights + inputs, grads, strict=True)]
            results.append(([o.detach() for o in outputs], grads[len(weights):],
                            grads[:len(weights)]))
    else:
        raise NotImplementedError(f"mixed-precision check on backend {backend!r}")
    to_numpy = keras.ops.convert_to_numpy
    return [tuple([to_numpy(x) for x in part] for part in result) for result in results]


def check_mixed_precision(make_layer, args, call_kwargs=None, policies=None, seed=0,
                          compare=True):
    """The layer from ``make_layer(dtype=policy)`` under each 16-bit ``policy``, with the weights
    of the float32 layer ``make_layer(dtype="float32")``, called on ``args`` (a tuple of
    positional arguments): its outputs (and added losses) and their gradients with respect to
    the float inputs and every trainable weight are finite, and the outputs are within
    ``MIXED_PRECISION_TOLERANCE[policy]`` of float32. Under float16 the gradients are checked
    only where the float32 ones fit in float16's range (see ``_FLOAT16_MAX``). ``compare=False``
    checks finiteness only, for inputs on which the float32 output is itself ill-conditioned.

    Returns a list of failure messages (empty when the layer passes), so one process can check
    many layers and report them all.
    """
    call_kwargs = call_kwargs or {}
    policies = policies or tuple(MIXED_PRECISION_TOLERANCE)
    layers = []
    for policy in ("float32", *policies):
        layer = make_layer(dtype=policy)
        # A symbolic call builds the layer without running it (no op-by-op compiles on JAX).
        layer(*keras.tree.map_structure(symbolic_like, args),
              **keras.tree.map_structure(symbolic_like, call_kwargs))
        layers.append(layer)
    reference = layers[0]
    values = ([v.value for v in reference.trainable_variables],
              [v.value for v in reference.non_trainable_variables])
    for policy, layer in zip(policies, layers[1:], strict=True):
        if len(layer.trainable_variables) != len(values[0]):
            return [f"{policy}: {len(layer.trainable_variables)} trainable weights, float32 "
                    f"has {len(values[0])}"]
    (expected, expected_input_grads, expected_grads), *results = outputs_and_gradients(
        layers, values, args, call_kwargs, seed)
    float16_in_range = max(float(np.max(np.abs(g), initial=0.0))
                           for g in expected_input_grads + expected_grads) < _FLOAT16_MAX
    failures = []
    for policy, layer, (outputs, input_grads, grads) in zip(policies, layers[1:], results,
                                                            strict=True):
        names = ([f"output {i}" for i in range(len(outputs))]
                 + [f"d/d input {i}" for i in range(len(input_grads))]
                 + [f"d/d {v.path}" for v in layer.trainable_variables])
        checked = outputs
        if policy != "mixed_float16" or float16_in_range:
            checked = outputs + input_grads + grads
        for name, value in zip(names, checked, strict=False):
            if not np.all(np.isfinite(value)):
                failures.append(f"{policy}: {name} not finite "
                                f"({np.size(value) - np.isfinite(value).sum()} of "
                                f"{np.size(value)} entries)")
        tolerance = MIXED_PRECISION_TOLERANCE[policy]
        for i, (e, a) in enumerate(zip(expected, outputs if compare else [], strict=False)):
            scale = max(1.0, float(np.max(np.abs(e), initial=0.0)))
            error = float(np.max(np.abs(a - e), initial=0.0))
            if not error <= tolerance * scale:
                failures.append(f"{policy}: output {i} differs from float32 by {error:.3g} "
                                f"> {tolerance} * {scale:.3g}")
    return failures


def _fresh_process_env(backend):
    env = dict(os.environ, KERAS_BACKEND=backend, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_USE_LEGACY_KERAS", None)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(__file__), env.get("PYTHONPATH", "")])
    return env


def run_fresh_process(args, backend):
    """Runs ``python *args`` in a fresh process under the Keras ``backend`` (CPU, Keras 3).

    ``tests/`` is on its path and the repository root is its working directory. Fails the test
    with the process's output if it exits with an error; returns the ``CompletedProcess``.
    """
    result = subprocess.run([sys.executable, *args], env=_fresh_process_env(backend),
                            cwd=_REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (
        f"fresh process failed:\n{result.stdout}\n{result.stderr[-4000:]}")
    return result


_SERVERS = {}  # backend -> (this test process's `fresh_process_check.py --serve`, its stderr)


def _stop_servers():
    for server, _ in _SERVERS.values():
        server.stdin.close()  # the server's loop ends
        server.wait(timeout=60)


atexit.register(_stop_servers)


def run_fresh_job(job_path, backend, timeout=300):
    """Runs ``fresh_process_check.py``'s job ``job_path`` in a process forked from the server of
    ``backend`` (started on first use); fails the test with the job's output if it fails."""
    server, stderr = _SERVERS.get(backend, (None, None))
    if server is None or server.poll() is not None:
        stderr = tempfile.TemporaryFile()
        server = subprocess.Popen(
            [sys.executable, _FRESH_PROCESS_SCRIPT, "--serve"], env=_fresh_process_env(backend),
            cwd=_REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
            text=True)
        _SERVERS[backend] = (server, stderr)
    server.stdin.write(job_path + "\n")
    server.stdin.flush()
    if not select.select([server.stdout], [], [], timeout)[0]:
        server.kill()
        raise AssertionError(f"fresh process: no result within {timeout} s for {job_path}")
    code = server.stdout.readline().strip()
    if not code:  # the server itself exited (e.g. an import failed): its own output
        server.wait(timeout=60)
        stderr.seek(0)
        output = stderr.read().decode(errors="replace")
        raise AssertionError(f"fresh process server exited with code {server.returncode}:\n"
                             f"{output[-4000:]}")
    if code != "0":
        with open(job_path + ".log") as f:
            output = f.read()
        raise AssertionError(f"fresh process failed (exit code {code}):\n{output[-4000:]}")


def check_fresh_process(model, input_data, tmp_path, atol=1e-5, jax=True, saved_model=True,
                        extra_imports=()):
    """SavedModel reload (tf.saved_model.load) and JAX-backend forward pass in one fresh process.

    ``extra_imports`` names modules (importable from ``tests/``) that register custom objects.
    """
    tmp_path = str(tmp_path)
    expected = _to_numpy_list(model.predict(input_data, verbose=0))
    inputs_path = os.path.join(tmp_path, "inputs.npz")
    np.savez(inputs_path, *[np.asarray(x) for x in _as_list(input_data)])
    job = {"inputs": inputs_path, "multiple_inputs": isinstance(input_data, (list, tuple)),
           "outputs": os.path.join(tmp_path, "fresh_outputs.npz"),
           "extra_imports": list(extra_imports)}
    if saved_model:
        job["saved_model"] = os.path.join(tmp_path, "saved_model")
        model.export(job["saved_model"], verbose=False)
    if jax:
        job["keras_file"] = os.path.join(tmp_path, "contract_model.keras")
        model.save(job["keras_file"])
    job_path = os.path.join(tmp_path, "job.json")
    with open(job_path, "w") as f:
        json.dump(job, f)
    run_fresh_job(job_path, backend="jax" if jax else "tensorflow")
    produced = np.load(job["outputs"])
    kinds = (["saved_model"] if saved_model else []) + (["jax"] if jax else [])
    if jax:
        assert str(produced["backend"]) == "jax", f"fresh process ran {produced['backend']}"
    for kind in kinds:
        got = [produced[f"{kind}_{i}"] for i in range(len(expected))]
        assert_outputs_close(expected, got, atol=atol, what=f"{kind} (fresh process) outputs")


def run_layer_contract(make_layer, input_data, tmp_path, call_kwargs=None, atol=1e-5,
                       fit=True, fresh_process=True, jax=True, extra_imports=()):
    """Runs the whole contract on the layer returned by ``make_layer()``.

    Args:
        make_layer: zero-argument callable returning a new, unbuilt layer.
        input_data: a NumPy array, or a list of arrays for a layer with several inputs.
        tmp_path: a directory for the saved files.
        call_kwargs: keyword arguments for the layer call inside the model.
        fit: run the ``jit_compile=True`` fit step (off for layers without weights).
        fresh_process: run the SavedModel / JAX checks in a fresh process.
        jax: include the JAX backend forward pass in the fresh process.
        extra_imports: modules the fresh process imports to register custom objects that
            ``keras_relational`` itself does not export (e.g. ``keras_relational.models.x``).

    Returns:
        The functional model used for the checks.
    """
    call_kwargs = call_kwargs or {}
    layer = make_layer()
    outputs = layer(input_data, **call_kwargs)
    check_output_shape(layer, input_data, outputs, call_kwargs)
    check_config_round_trip(layer, input_data, call_kwargs)
    model = functional_model(make_layer(), input_data, call_kwargs)
    check_keras_file_round_trip(model, input_data, os.path.join(str(tmp_path), "model.keras"))
    if fresh_process:
        check_fresh_process(model, input_data, tmp_path, atol=atol, jax=jax,
                            extra_imports=extra_imports)
    if fit:
        check_jit_fit_step(model, input_data)
    return model
