"""Routes ``tf.keras`` to tf-keras (Keras 2) before TF-Agents is imported.

TF-Agents 0.19 and TensorFlow Probability 0.25's Keras parts only work when ``tf.keras`` is
tf-keras, selected by ``TF_USE_LEGACY_KERAS=1``. TensorFlow reads that variable once, the first
time ``tf.keras`` is touched, so it must be set before then. Our own layers use ``import keras``
(Keras 3), which is unaffected: both Keras versions live side by side in one process.
"""

import os
import sys

_FLAG = "TF_USE_LEGACY_KERAS"
_TRUE_VALUES = ("1", "true", "True")


class LegacyKerasError(ImportError):
    """``tf.keras`` cannot be routed to tf-keras in this process any more."""


def _tf_keras_is_keras3():
    """True when ``tf.keras`` was already resolved, and resolved to Keras 3."""
    tf_module = sys.modules.get("tensorflow")
    if tf_module is None:
        return False
    submodule = sys.modules.get("tensorflow.keras")
    if submodule is not None and "tf_keras" not in (getattr(submodule, "__file__", "") or ""):
        return True
    keras_attr = tf_module.__dict__.get("keras")
    if keras_attr is None:
        return False
    # Unresolved: TensorFlow's KerasLazyLoader has not decided yet.
    if type(keras_attr).__name__ == "KerasLazyLoader":
        if not keras_attr.__dict__.get("_tfll_initialized", False):
            return False
        return keras_attr.__dict__.get("_tfll_keras_version") == "keras_3"
    # Resolved: the lazy loader replaced itself by the real module.
    return getattr(keras_attr, "__name__", "").startswith("keras.")


def ensure_legacy_tf_keras():
    """Sets ``TF_USE_LEGACY_KERAS=1`` or raises a clear error when it is too late.

    Raises:
        LegacyKerasError: if the variable is set to a false value, or if ``tf.keras`` was already
            materialised as Keras 3 in this process.
    """
    value = os.environ.get(_FLAG)
    if value is not None and value not in _TRUE_VALUES:
        raise LegacyKerasError(
            f"keras_relational.agents needs {_FLAG}=1 (TF-Agents only works with tf-keras), "
            f"but the environment sets {_FLAG}={value!r}. Unset it or set it to 1."
        )
    if _tf_keras_is_keras3():
        raise LegacyKerasError(
            "keras_relational.agents must be imported before `tf.keras` is first used: in this "
            "process `tf.keras` already resolved to Keras 3, and TF-Agents needs tf-keras "
            f"(Keras 2). Import keras_relational.agents (or set {_FLAG}=1) before touching "
            "`tf.keras`, or start a fresh process. `import keras` (Keras 3) is fine either way."
        )
    os.environ[_FLAG] = "1"
    _route_tensorflow_keras_submodule()


def _route_tensorflow_keras_submodule():
    """Makes ``import tensorflow.keras`` find tf-keras when TensorFlow was imported earlier.

    TensorFlow reads the flag twice: lazily for the ``tf.keras`` attribute, but also once at
    ``import tensorflow``, when it puts the Keras 3 (or tf-keras) API directory in front of its
    package ``__path__``. Modules that run ``import tensorflow.keras`` / ``from tensorflow.keras
    import ...`` (TF-Agents does) then get whatever was chosen at that time. ``import keras``
    imports TensorFlow, so with ``import keras_relational`` first that choice was Keras 3; put
    tf-keras's API directory in front instead.
    """
    tf_module = sys.modules.get("tensorflow")
    if tf_module is None:
        return  # TensorFlow will read the flag itself when it is imported
    from tensorflow.python.tools import module_util

    tf_keras_dir = module_util.get_parent_dir_for_name("tf_keras.api._v2.keras")
    if tf_keras_dir is None:
        raise LegacyKerasError(
            "keras_relational.agents needs the tf-keras package (pip install tf-keras==2.21.0).")
    path = tf_module.__path__
    if tf_keras_dir in path:
        path.remove(tf_keras_dir)
    path.insert(0, tf_keras_dir)
