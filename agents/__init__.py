"""TF-Agents integration for keras-relational (installed as ``keras_relational.agents``).

Importing this package sets ``TF_USE_LEGACY_KERAS=1`` so that ``tf.keras`` is tf-keras, which
TF-Agents needs; it raises :class:`LegacyKerasError` if ``tf.keras`` was already resolved to Keras 3
in this process. Our Keras 3 models (``import keras``) are unaffected.
"""

from keras_relational.agents._legacy_keras import LegacyKerasError, ensure_legacy_tf_keras

ensure_legacy_tf_keras()

__all__ = ["LegacyKerasError", "ensure_legacy_tf_keras"]
