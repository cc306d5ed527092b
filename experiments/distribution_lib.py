"""``tf.distribute`` strategies for the supervised training binaries (``--distribution_strategy``).

Every supervised ``train_eval`` function takes ``distribution_strategy`` (one of ``STRATEGIES``)
and builds its model, optimizer and ``compile`` under ``get_strategy(name).scope()``;
``model.fit`` then splits each batch of ``tf.data``/NumPy input over the replicas. The batch size
is always the **global** batch size: with N replicas each one computes ``batch_size / N`` examples
per step and their gradients combine into the gradient of the mean loss over the global batch, so
the paper's batch size reproduces the paper's update whatever the number of devices.

* ``"default"``: ``tf.distribute.get_strategy()``, i.e. no distribution (one device), or the
  strategy whose ``scope()`` the caller has already entered.
* ``"mirrored"``: ``tf.distribute.MirroredStrategy()``, synchronous data parallelism over all
  local GPUs (the CPU when there is none).
* ``"multi_worker"``: ``tf.distribute.MultiWorkerMirroredStrategy()``, synchronous data
  parallelism over several machines described by the ``TF_CONFIG`` environment variable (one
  process per machine, each running the same command; without ``TF_CONFIG`` it is one worker).

Each binary defines the flag with ``define_distribution_strategy_flag()`` and passes
``FLAGS.distribution_strategy`` to its ``train_eval``.

Keras' JAX backend has no ``tf.distribute``: JAX users distribute through Keras itself,
``keras.distribution.set_distribution(keras.distribution.DataParallel())`` before building the
model, and keep ``distribution_strategy="default"``.

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

import logging

import keras

STRATEGIES = ("default", "mirrored", "multi_worker")

_FLAG_HELP = (
    "tf.distribute strategy: 'default' (one device), 'mirrored' (all local GPUs, else the CPU) "
    "or 'multi_worker' (MultiWorkerMirroredStrategy over the machines in TF_CONFIG; run the same "
    "command on every worker). The batch size stays the global batch size. TensorFlow backend "
    "only; under JAX use keras.distribution.DataParallel."
)
_logger = logging.getLogger(__name__)
_created = {}  # name -> strategy: one instance per process (TF allows one multi-worker one)
_logged = set()


def define_distribution_strategy_flag(flag_values=None):
    """Defines ``--distribution_strategy`` (an enum over ``STRATEGIES``, default ``"default"``).

    Called once at module level by every supervised binary, so the flag has one name, one set of
    choices and one help text everywhere:

        distribution_lib.define_distribution_strategy_flag()
        ...
        train_eval(..., distribution_strategy=FLAGS.distribution_strategy)
    """
    from absl import flags

    return flags.DEFINE_enum("distribution_strategy", "default", list(STRATEGIES), _FLAG_HELP,
                             flag_values=flags.FLAGS if flag_values is None else flag_values)


def get_strategy(name="default"):
    """The ``tf.distribute.Strategy`` called ``name`` (one of ``STRATEGIES``).

    ``"mirrored"`` and ``"multi_worker"`` are created once per process and reused (TensorFlow
    allows a single ``MultiWorkerMirroredStrategy`` per program, and a binary may call several
    ``train_eval`` runs); create them before any other TensorFlow work, as ``train_eval`` does.

    Raises:
        ValueError: ``name`` is not in ``STRATEGIES``, or a distributed strategy is asked for
            under a Keras backend other than TensorFlow.
    """
    if name not in STRATEGIES:
        raise ValueError(f"`distribution_strategy`: expected one of {STRATEGIES}, received "
                         f"{name!r}.")
    backend = keras.backend.backend()
    if name != "default" and backend != "tensorflow":
        raise ValueError(
            f"`distribution_strategy`: {name!r} is a tf.distribute strategy and needs the "
            f"TensorFlow Keras backend, received KERAS_BACKEND={backend!r}. Under JAX, keep "
            "distribution_strategy='default' and call keras.distribution.set_distribution("
            "keras.distribution.DataParallel()) before building the model.")
    import tensorflow as tf

    if name == "default":
        return tf.distribute.get_strategy()
    if name not in _created:
        _created[name] = (tf.distribute.MirroredStrategy() if name == "mirrored"
                          else _multi_worker_strategy())
    return _created[name]


def compile_options(strategy=None, jit_compile=True, steps_per_execution=1):
    """``jit_compile`` and ``steps_per_execution`` for ``model.compile`` under ``strategy``.

    ``strategy`` defaults to the current one (``compile`` runs inside its ``scope()``). With a
    single replica in sync the arguments are returned unchanged. With several, both drop to what
    Keras 3.15 on TF 2.21 can run, logged once per process (both failures were reproduced with a
    two-layer ``Sequential`` over two logical CPUs and over two local workers):

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
