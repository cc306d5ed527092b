"""Building the papers' models under a Keras dtype policy (``--dtype_policy`` of the binaries)."""

import contextlib

import keras

from keras_relational import validation


@contextlib.contextmanager
def dtype_policy_scope(dtype_policy):
    """Layers created inside get ``dtype_policy`` (one of ``validation.DTYPE_POLICIES``); the
    global Keras policy is restored on exit.

    Under ``"mixed_float16"`` and ``"mixed_bfloat16"`` the weights stay float32 and the layers
    compute in 16 bits (their logits and softmax in float32). ``model.compile`` wraps the
    optimizer of a ``"mixed_float16"`` model in a ``keras.optimizers.LossScaleOptimizer``
    itself (Keras 3's ``auto_scale_loss``).

    Example:

    >>> from keras_relational.models import precision, relations_game
    >>> with precision.dtype_policy_scope("mixed_bfloat16"):
    ...     model = relations_game.build_model("predinet", num_classes=2)
    >>> model.dtype_policy.name
    'mixed_bfloat16'
    """
    validation.check_dtype_policy("dtype_policy_scope", dtype_policy)
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(dtype_policy)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)
