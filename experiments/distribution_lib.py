"""``tf.distribute`` strategies for the supervised training binaries (``--distribution_strategy``).

Every supervised ``train_eval`` function takes ``distribution_strategy`` (one of ``STRATEGIES``)
and builds its model, optimizer and ``compile`` under ``get_strategy(name).scope()``;
``model.fit`` then splits each batch of ``tf.data``/NumPy input over the replicas. The batch size
is always the **global** batch size: with N replicas each one computes ``batch_size / N`` examples
per step and their gradients combine into the gradient of the mean loss over the global batch, so
the paper's batch size reproduces the paper's update whatever the number of devices.

* ``"default"``: ``tf.distribute.get_strategy()``, i.e. no distribution (one device), or the
  strategy whose ``scope()`` the caller has already entered. Under another backend than
  TensorFlow it is ``NoDistribution()`` (its ``scope()`` does nothing) and loads no TensorFlow,
  so the binaries run where TensorFlow is not installed (JAX on a GPU machine).
* ``"mirrored"``: ``tf.distribute.MirroredStrategy()``, synchronous data parallelism over all
  local GPUs (the CPU when there is none).
* ``"multi_worker"``: ``tf.distribute.MultiWorkerMirroredStrategy()``, synchronous data
  parallelism over several machines described by the ``TF_CONFIG`` environment variable (one
  process per machine, each running the same command; without ``TF_CONFIG`` it is one worker).
* ``"tpu"``: ``tf.distribute.TPUStrategy`` over the TPU that
  ``tf.distribute.cluster_resolver.TPUClusterResolver`` finds at ``--tpu`` (an address such as
  ``grpc://10.0.0.2:8470`` or a Cloud TPU name; without it the resolver's own default: the
  ``TPU_NAME`` environment variable, or ``local`` on a TPU VM). Without a reachable TPU it fails
  at start-up with an error naming the flags and the devices found.
* ``"data_parallel"`` (JAX backend): ``keras.distribution.DataParallel`` over every device JAX
  sees (a one-axis ``DeviceMesh`` named ``"batch"``): the weights are replicated, each batch is
  split over the devices along its first axis and the gradients are combined by XLA. It is set
  for the whole process (``keras.distribution.set_distribution``), so ``model.fit`` outside
  ``scope()`` runs on the mesh too.

Each binary defines the flags with
``keras_relational.experiments.distribution_flags.define_distribution_strategy_flag()`` (pure
Python: a bad flag is refused before Keras loads) and passes ``FLAGS.distribution_strategy`` to
its ``train_eval``.

The ``tf.distribute`` strategies need the TensorFlow backend and ``"data_parallel"`` the JAX
backend (Keras 3.15 implements ``keras.distribution`` for JAX only); any other pairing is an
error naming both.

Example:

    from keras_relational.experiments import distribution_lib

    strategy = distribution_lib.get_strategy("mirrored")
    with strategy.scope():
        model = build_model()
        model.compile(optimizer="adam", loss="mse",
                      **distribution_lib.compile_options(strategy, jit_compile=True))
    model.fit(x, y, batch_size=64)  # 64 = global batch, split over the replicas

Reference: the TensorFlow guide "Distributed training with Keras" and the Keras guide
"Multi-GPU distributed training with TensorFlow".
"""

import contextlib
import logging

import keras

from keras_relational.experiments.distribution_flags import STRATEGIES

# The strategies of each Keras backend (beside "default", which is every backend's).
_TENSORFLOW_ONLY = ("mirrored", "multi_worker", "tpu")
_JAX_ONLY = ("data_parallel",)

_logger = logging.getLogger(__name__)
_created = {}  # name -> strategy: one instance per process (TF allows one multi-worker one)
_logged = set()


def get_strategy(name="default", tpu=None):
    """The strategy called ``name`` (one of ``STRATEGIES``): a ``tf.distribute.Strategy``, or
    under JAX for ``"data_parallel"`` the ``keras.distribution.DataParallel`` (both have
    ``scope()``).

    ``"mirrored"``, ``"multi_worker"``, ``"tpu"`` and ``"data_parallel"`` are created once per
    process and reused (TensorFlow allows a single ``MultiWorkerMirroredStrategy`` per program
    and initialises a TPU system once, and a binary may call several ``train_eval`` runs);
    create them before any other TensorFlow work, as ``train_eval`` does. ``tpu``: the TPU's
    address for ``"tpu"`` (None: the ``--tpu`` flag where a binary defined it, else
    ``TPUClusterResolver``'s default).

    Raises:
        ValueError: ``name`` is not in ``STRATEGIES``; a strategy is asked for under a Keras
            backend that does not have it; ``"tpu"`` finds no TPU (the error names the flags
            and the devices found).
    """
    if name not in STRATEGIES:
        raise ValueError(f"`distribution_strategy`: expected one of {STRATEGIES}, received "
                         f"{name!r}.")
    backend = keras.backend.backend()
    if name in _TENSORFLOW_ONLY and backend != "tensorflow":
        raise ValueError(
            f"`distribution_strategy`: {name!r} is a tf.distribute strategy and needs the "
            f"TensorFlow Keras backend, received KERAS_BACKEND={backend!r}. Under JAX use "
            "distribution_strategy='data_parallel' (keras.distribution.DataParallel).")
    if name in _JAX_ONLY and backend != "jax":
        raise ValueError(
            f"`distribution_strategy`: {name!r} is keras.distribution, which Keras implements "
            f"for the JAX backend only, received KERAS_BACKEND={backend!r}. Under TensorFlow "
            "use distribution_strategy='mirrored' (or 'multi_worker', 'tpu').")
    if name == "data_parallel":
        if name not in _created:
            _created[name] = keras.distribution.DataParallel()
            keras.distribution.set_distribution(_created[name])
        return _created[name]
    if name == "default" and backend != "tensorflow":
        return _NO_DISTRIBUTION  # one object, as tf.distribute's default (callers key on it)
    import tensorflow as tf

    if name == "default":
        return tf.distribute.get_strategy()
    if name not in _created:
        if name == "tpu":
            _created[name] = _tpu_strategy(_tpu_flag() if tpu is None else tpu)
        else:
            _created[name] = (tf.distribute.MirroredStrategy() if name == "mirrored"
                              else _multi_worker_strategy())
    return _created[name]


class NoDistribution:
    """The ``"default"`` strategy under a backend other than TensorFlow: one device, one replica
    (``scope()`` enters nothing)."""

    num_replicas_in_sync = 1

    def scope(self):
        return contextlib.nullcontext()


_NO_DISTRIBUTION = NoDistribution()


def _tpu_flag():
    """The ``--tpu`` flag's value where a binary defined and parsed it, else None."""
    from absl import flags

    if "tpu" in flags.FLAGS and flags.FLAGS.is_parsed():
        return flags.FLAGS.tpu
    return None


def _tpu_strategy(tpu):
    """``TPUStrategy`` over the TPU at ``tpu``, or a ValueError saying what was found instead."""
    import tensorflow as tf

    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        if tpu not in (None, "", "local"):  # a remote TPU (node): connect to its workers
            tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, tf.errors.OpError) as error:
        devices = sorted({d.device_type for d in tf.config.list_logical_devices()})
        raise ValueError(
            f"--distribution_strategy=tpu: no TPU found at --tpu={tpu!r} (None: "
            f"TPUClusterResolver's default, the TPU_NAME environment variable or a TPU VM's "
            f"local TPU); this machine's TensorFlow devices: {devices}. "
            f"TPUClusterResolver said: {type(error).__name__}: {str(error)[:300]}") from error
    return tf.distribute.TPUStrategy(resolver)


def compile_options(strategy=None, jit_compile=True, steps_per_execution=1):
    """``jit_compile`` and ``steps_per_execution`` for ``model.compile`` under ``strategy``.

    ``strategy`` defaults to the current one (``compile`` runs inside its ``scope()``). With a
    single replica in sync the arguments are returned unchanged, but for the torch backend, which
    Keras 3.15 runs one batch per call (``steps_per_execution=1``, logged once). With several,
    both drop to what Keras 3.15 on TF 2.21 can run, logged once per process (both failures were
    reproduced with a two-layer ``Sequential`` over two logical CPUs and over two local workers):

    * ``jit_compile=False``: Keras XLA-compiles the function that itself calls ``strategy.run``
      over all replicas, which fails once two devices hold the mirrored variables ("Trying to
      access resource ... located in device CPU:1 from device CPU:0"; with two workers the
      tf2xla conversion fails).
    * ``steps_per_execution=1``: Keras' multi-step ``tf.while_loop`` fails with several replicas
      ("You must feed a value for placeholder tensor 'while/...'", the error of the open
      keras-team/keras#19246). Speed only: the updates are the same.

    Example:

        model.compile(optimizer="adam", loss="mse",
                      **distribution_lib.compile_options(strategy, True, 50))
    """
    options = {"jit_compile": jit_compile, "steps_per_execution": steps_per_execution}
    if keras.backend.backend() == "torch" and steps_per_execution != 1:
        if "torch" not in _logged:
            _logged.add("torch")
            _logger.warning("The torch backend runs one batch per call: compiling with "
                            "steps_per_execution=1 (received %s); speed only, the updates are "
                            "the same.", steps_per_execution)
        return dict(options, steps_per_execution=1)
    if keras.backend.backend() != "tensorflow":
        return options
    import tensorflow as tf

    strategy = strategy or tf.distribute.get_strategy()
    replicas = strategy.num_replicas_in_sync
    if replicas == 1 or (not jit_compile and steps_per_execution == 1):
        return options
    if replicas not in _logged:
        _logged.add(replicas)
        _logger.warning(
            "%s with %d replicas: compiling with jit_compile=False and steps_per_execution=1 "
            "(received %s and %s), which Keras 3 can run across replicas (see "
            "distribution_lib.compile_options).", type(strategy).__name__, replicas,
            jit_compile, steps_per_execution)
    return {"jit_compile": False, "steps_per_execution": 1}


def _multi_worker_strategy():
    import tensorflow as tf

    class MultiWorkerMirroredStrategy(tf.distribute.MultiWorkerMirroredStrategy):
        """Accepts the two ``reduce`` calls Keras 3.15's ``fit`` makes with several workers.

        keras-team/keras#20585: with two or more workers ``fit`` fails, because Keras reduces
        the whole (nested) first input batch in one ``strategy.reduce`` call and reduces scalar
        metrics with ``axis=0``; this strategy (unlike ``MirroredStrategy``) accepts neither.
        Here a nest is reduced leaf by leaf and a scalar with ``axis=None`` (for a scalar the two
        mean the same thing); every other call is unchanged.
        """

        def reduce(self, reduce_op, value, axis):
            def reduce_one(leaf):
                rank = getattr(self.experimental_local_results(leaf)[0], "shape", None)
                rank = None if rank is None else tf.TensorShape(rank).rank
                return super(MultiWorkerMirroredStrategy, self).reduce(
                    reduce_op, leaf, None if rank == 0 else axis)

            return tf.nest.map_structure(reduce_one, value)

    return MultiWorkerMirroredStrategy()
