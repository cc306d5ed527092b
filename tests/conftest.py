# Route tf.keras to tf-keras (what TF-Agents needs) before any test touches it, so test order and
# pytest-xdist's distribution of tests never matter. Our own layers use `import keras` (Keras 3)
# and are unaffected; the import-hygiene tests check the package itself in fresh processes.
# Where TensorFlow is not installed (the accelerator lane on a JAX-on-CUDA machine, see
# docs/contributing.md) there is nothing to route, and the TF tests fail at their own imports.
import gc
import importlib.util
import os
import pathlib

import pytest


def _fast_compile_xla_flags():
    """XLA's flags for the suite's programs: compile fast, run slow.

    The suite's programs are tiny and compiled once, so XLA's compiling is most of their time
    on a CPU: the flags of ``benchmarks/gpu_session.py --smoke``'s parts that train
    (``SMOKE_XLA_FLAGS[True]``, level 1: at level 0 the compiled Box-World update's first gradient
    is NaN on the CPU, and ``SMOKE_NEWER_XLA_FLAGS``), before the caller's ``XLA_FLAGS`` (the
    last value of a flag wins). Comparisons are within tolerances or between runs of the same
    flags. None where a GPU may run the tests (the accelerator lane, ``/dev/nvidiactl``) or
    ``KERAS_RELATIONAL_XLA_DEFAULTS=1``: XLA's defaults there.
    """
    if os.environ.get("KERAS_RELATIONAL_XLA_DEFAULTS") == "1" or os.path.exists("/dev/nvidiactl"):
        return None
    path = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_session.py"
    spec = importlib.util.spec_from_file_location("_gpu_session_flags", path)
    gpu_session = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_session)
    return (*gpu_session.SMOKE_XLA_FLAGS[True], *gpu_session.SMOKE_NEWER_XLA_FLAGS)


# Before TensorFlow or JAX starts XLA; every process the tests start inherits them.
_FAST_COMPILE = _fast_compile_xla_flags()
if _FAST_COMPILE is not None:
    os.environ["XLA_FLAGS"] = " ".join((*_FAST_COMPILE, *os.environ.get("XLA_FLAGS", "").split()))

from keras_relational.without_tensorflow import tensorflow_installed  # noqa: E402

if tensorflow_installed():
    import op_tracebacks

    import keras_relational.agents.tf_agents  # noqa: F401

    # Graphs without each op's Python stack (tests/op_tracebacks.py), once TensorFlow is imported.
    op_tracebacks.skip_recording_once_imported()


def accelerator_skip_reason():
    """``None`` when Keras' backend sees a GPU, else why the ``accelerator`` tests skip.

    Asks the backend Keras runs on, and only that one: under JAX, TensorFlow is never imported
    (the lane runs where it is not installed). ``KERAS_RELATIONAL_ACCELERATOR_ON_CPU=1`` runs
    the lane on the CPU, to check its own code (``tests/test_accelerator.py``).
    """
    if os.environ.get("KERAS_RELATIONAL_ACCELERATOR_ON_CPU") == "1":
        return None
    import keras

    from keras_relational.experiments.devices import gpu_names

    backend = keras.backend.backend()
    try:
        devices = gpu_names(backend)
    except ValueError:
        return f"no GPU check for Keras backend {backend!r}"
    if not devices:
        return (f"Keras' {backend} backend sees no GPU; the accelerator lane runs on a GPU machine "
                "(docs/contributing.md)")
    return None


def _steals_work(config):
    """Whether pytest-xdist distributes by work stealing (``--dist=worksteal``).

    Its workers, which collect and order the tests, see ``dist="no"``; the command line's value
    stays in ``known_args_namespace``.
    """
    return "worksteal" in (config.getoption("dist", "no"),
                           getattr(config.known_args_namespace, "dist", None))


@pytest.hookimpl(trylast=True)  # after pytest's own reordering (fixtures of wider scope)
def pytest_collection_modifyitems(config, items):
    if _steals_work(config):
        # The `slow` tests first (a stable sort: each module's tests keep their order, so a
        # module-scoped fixture shared by its slow tests is still set up once). With work
        # stealing (`make test PYTEST_ARGS=--dist=worksteal`; `make test` itself uses xdist's
        # default load scheduling, see the Makefile) the run then ends with short tests that
        # the two workers share out, not with one worker in a minute-long test while the other
        # idles. Only then: `--dist=load` hands each worker a block of consecutive tests first,
        # and would give one worker every slow test.
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    marked = [item for item in items if item.get_closest_marker("accelerator")]
    if not marked:
        return
    reason = accelerator_skip_reason()
    if reason is not None:
        for item in marked:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Each test starts with the previous test's garbage collected and every object still alive
    frozen (``gc.freeze``): out of the cyclic collector's sight from then on.

    A worker runs hundreds of tests whose TensorFlow graphs, Keras models and caches stay alive
    (2.4 million tracked objects after 78 of them), and every full collection (Python's own, or
    ``gc.collect()`` at the end of each TF-Agents ``train_eval``) walked them all. Frozen, a
    collection walks only what the current test made. Measured on a 2-core machine, in one
    process: the collector's time over tests/agents/test_presets.py and test_train_eval.py
    16.3 -> 4.0 s (``gc.callbacks``); over five TF-heavy files (those two, test_train_babi,
    test_tpr_memory, test_sc2_checkpoints: 78 tests) 289.5 -> 249.6 s and 269.8 -> 255.8 s of
    wall in two pairs of runs, peak memory 2.69 -> 2.61 GB (a test's garbage is collected when
    the next one starts). Reference counting frees frozen objects as before; only a reference
    cycle through objects frozen at a test's start that later becomes garbage stays.
    """
    gc.collect()  # before freezing, or the previous test's garbage would stay for good
    gc.freeze()


@pytest.fixture(autouse=True)
def _seeded_weights():
    """Every test starts from the same Python, NumPy and Keras seeds.

    Weight initialisation is otherwise random per run, and float32 comparisons between two
    implementations (e.g. TensorFlow vs JAX) then pass or fail with the draw: the TPR memory's
    chained layer norms put its float32 error (against a float64 reference) above 1e-5 for 3
    of 20 random draws.
    """
    import keras  # after keras_relational.agents (above) has routed tf.keras

    keras.utils.set_random_seed(0)


@pytest.fixture
def no_graph_optimizer():
    """TensorFlow's graph optimizer (Grappler) off for the test; after it, as it was before.

    For the files of tiny training runs in this process (TF-Agents' ``train_eval``, Keras fits
    of a few steps): each traces its functions once and runs them a few times, so Grappler's
    passes over every new function cost more than they save. Measured on a 2-core machine, each
    file alone, with Grappler on -> off (wall): test_presets 63.9 -> 53.7 s, test_train_eval
    102.2 -> 89.5 s, test_train_babi 50.6 -> 41.9 s, test_train_relations_game 46.8 -> 41.2 s,
    test_sc2_checkpoints 36.0 -> 33.4 s; not used where the gain was within a run's noise or
    none (test_dtype_policy_agents 24.5 -> 22.4 s, test_curriculum, test_loss_terms,
    test_symmetry_binaries, test_reproduce_predinet, the layers' files). The same trainers run
    with Grappler in every process the tests start (the binaries' kill and resume tests, the
    notebooks, the Ray actors).
    """
    import tensorflow as tf

    before = tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer", False)
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    yield
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": before})


@pytest.fixture
def import_binary():
    """Imports absl binaries (``keras_relational.experiments.<name>``) into the test process.

    Two binaries define flags of the same name (``--root_dir``), which absl refuses in one
    process; the fixture removes the flags and modules the imports added when the test ends, so
    any number of tests may each import a binary, in any order on any worker.
    """
    import sys

    from absl import flags

    before = set(flags.FLAGS)
    imported = []

    def _import(name):
        module_name = f"keras_relational.experiments.{name}"
        if module_name in sys.modules and module_name not in imported:
            raise RuntimeError(f"{module_name} was imported outside the import_binary fixture; "
                               f"its flags cannot be removed safely.")
        imported.append(module_name)
        return importlib.import_module(module_name)

    yield _import
    for flag_name in set(flags.FLAGS) - before:
        delattr(flags.FLAGS, flag_name)
    for module_name in imported:
        sys.modules.pop(module_name, None)


class _NoPolicySavedModels:
    """Stands for TF-Agents' ``PolicySavedModelTrigger`` in :func:`no_exports`: saves nothing."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, train_step, force_trigger=False):
        pass


@pytest.fixture
def no_policy_trigger(monkeypatch):
    """``train_eval`` without the Learner's ``PolicySavedModelTrigger`` (TF-Agents').

    The trigger writes three policy SavedModels when it is created (each tracing the whole
    network a few times: most of a tiny run's time) and policy checkpoints every
    ``policy_save_interval`` steps; the final exports (``export.export_policies``) replace those
    SavedModels at the end of every run. For tests that assert nothing about the trigger's
    files; tests/agents/test_train_eval.py's smoke test, test_ray_actors.py and
    test_train_eval_faults.py run it.
    """
    from tf_agents.train import triggers

    monkeypatch.setattr(triggers, "PolicySavedModelTrigger", _NoPolicySavedModels)


@pytest.fixture
def no_exports(monkeypatch, no_policy_trigger):
    """``train_eval`` without any SavedModel export, for tests that assert nothing about them.

    Skips the trigger's SavedModels (:func:`no_policy_trigger`), the final policy exports
    (``export.export_policies``) and the Keras model's (``export.export_keras_model``). The
    exports are checked by tests/agents/test_train_eval.py (the smoke and PPO tests),
    test_train_eval_faults.py, test_serving_docs.py and the notebooks in colab/ (relational and
    simplicial agents).
    """
    from keras_relational.agents.tf_agents import export

    monkeypatch.setattr(export, "export_policies", lambda *args, **kwargs: None)
    monkeypatch.setattr(export, "export_keras_model", lambda *args, **kwargs: (None, None))


@pytest.fixture
def no_compiled_exports(monkeypatch):
    """The compiled trainer's ``train_eval`` without its Keras model exports (the ``.keras``
    file and the SavedModel), for tests that assert nothing about them. They are checked by
    tests/agents/test_compiled_loop.py (the binary's run: both reload; a run played under JAX),
    test_initial_weights.py and test_curriculum.py (the ``.keras`` file starts another run), and
    written under float16 by test_dtype_policy_agents.py.
    """
    from keras_relational.agents.compiled import train_eval

    monkeypatch.setattr(train_eval, "export_keras_model",
                        lambda model, root_dir: (None, None, None))
