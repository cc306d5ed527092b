"""The layer test contract every keras_relational layer test calls.

``run_layer_contract`` checks, for one layer configuration:

1. ``compute_output_shape`` agrees with the eager output and a symbolic (functional) call works
   with an unknown batch size;
2. config round trip: ``from_config(get_config())`` with the same weights gives identical outputs;
3. ``.keras`` save/load of a functional model gives identical outputs;
4. one ``model.fit`` step with ``jit_compile=True`` runs, gives a finite loss and changes weights;
5. in a *fresh Python process* running the JAX backend: the ``model.export`` SavedModel
   reloaded with ``tf.saved_model.load`` gives the same outputs as TF, and the ``.keras`` file
   loaded under JAX gives the same forward pass (atol 1e-5).

The individual checks are public too, for layers that need a custom model around them.
"""

import inspect
import json
import os
import subprocess
import sys

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
    batch_size = np.shape(_as_list(input_data)[0])[0]
    history = model.fit(input_data, targets, epochs=1, batch_size=batch_size, verbose=0)
    loss = history.history["loss"][-1]
    assert np.isfinite(loss), f"jit_compile fit step gave a non-finite loss {loss}"
    after = model.get_weights()
    changed = sum(not np.array_equal(b, a) for b, a in zip(before, after, strict=True))
    assert model.trainable_weights, "model has no trainable weights"
    assert changed > 0, "no weight changed after one jit_compile fit step"


def run_fresh_process(args, backend):
    """Runs ``python *args`` in a fresh process under the Keras ``backend`` (CPU, Keras 3).

    ``tests/`` is on its path and the repository root is its working directory. Fails the test
    with the process's output if it exits with an error; returns the ``CompletedProcess``.
    """
    env = dict(os.environ, KERAS_BACKEND=backend, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_USE_LEGACY_KERAS", None)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(__file__), env.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, *args], env=env, cwd=_REPO_ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (
        f"fresh process failed:\n{result.stdout}\n{result.stderr[-4000:]}")
    return result


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
    run_fresh_process([_FRESH_PROCESS_SCRIPT, job_path], backend="jax" if jax else "tensorflow")
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
