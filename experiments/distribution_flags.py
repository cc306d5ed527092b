"""The distribution strategies' names and the binaries' ``--distribution_strategy`` and ``--tpu``
flags, in pure Python (no Keras, no TensorFlow).

A binary defines its flags with ``define_distribution_strategy_flag()`` when its module loads,
and a bad value is an absl error before Keras or TensorFlow is imported;
:mod:`keras_relational.experiments.distribution_lib` builds the strategy a name stands for.

Example:

    from keras_relational.experiments import distribution_flags

    distribution_flags.define_distribution_strategy_flag()
    ...
    train_eval(..., distribution_strategy=FLAGS.distribution_strategy)
"""

from absl import flags

from keras_relational.experiments import flag_checks

STRATEGIES = ("default", "mirrored", "multi_worker", "tpu", "data_parallel")

_FLAG_HELP = (
    "Distribution: 'default' (one device), 'mirrored' (all local GPUs, else the CPU), "
    "'multi_worker' (MultiWorkerMirroredStrategy over the machines in TF_CONFIG; run the same "
    "command on every worker), 'tpu' (TPUStrategy over the TPU at --tpu): tf.distribute, "
    "TensorFlow backend; 'data_parallel' (keras.distribution.DataParallel over every device "
    "JAX sees): JAX backend. The batch size stays the global batch size."
)
_TPU_HELP = ("With --distribution_strategy=tpu: the TPU's address (grpc://host:8470) or Cloud "
             "TPU name; default: TPUClusterResolver's (TPU_NAME, or 'local' on a TPU VM).")


def define_distribution_strategy_flag(flag_values=None):
    """Defines ``--distribution_strategy`` (an enum over ``STRATEGIES``, default ``"default"``)
    and ``--tpu`` (the TPU's address, accepted only with ``--distribution_strategy=tpu``).

    Called once at module level by every supervised binary, so the flags have one name, one set
    of choices and one help text everywhere:

        distribution_flags.define_distribution_strategy_flag()
        ...
        train_eval(..., distribution_strategy=FLAGS.distribution_strategy)

    ``distribution_lib.get_strategy("tpu")`` reads ``--tpu`` itself, so ``train_eval`` needs no
    argument for it.
    """
    flag_values = flags.FLAGS if flag_values is None else flag_values
    defined = flags.DEFINE_enum("distribution_strategy", "default", list(STRATEGIES),
                                _FLAG_HELP, flag_values=flag_values)
    flags.DEFINE_string("tpu", None, _TPU_HELP, flag_values=flag_values)
    flag_checks.require_only_for("distribution_strategy", "tpu", ["tpu"], flag_values=flag_values)
    return defined
