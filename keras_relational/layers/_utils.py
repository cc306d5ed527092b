"""Small helpers shared by the layers (no public API)."""

import keras
from keras import ops

from keras_relational import validation


def clone_initializer(initializer):
    """A fresh initializer with the same config, so two sub-layers never start identical."""
    initializer = keras.initializers.get(initializer)
    return initializer.__class__.from_config(initializer.get_config())


_HALF_FLOATS = ("float16", "bfloat16")


def is_half(dtype):
    """Whether ``dtype`` (a string, or any backend's dtype object) is float16 or bfloat16.

    ``keras.backend.standardize_dtype``, not ``str``: a TensorFlow dtype prints as
    ``<dtype: 'float16'>``.
    """
    return keras.backend.standardize_dtype(dtype) in _HALF_FLOATS


def at_least_float32(x):
    """``x`` cast to float32 when it is 16-bit, else unchanged (logits, softmax, norms)."""
    return ops.cast(x, "float32") if is_half(x.dtype) else x


def softmax(logits, axis=-1):
    """Softmax computed in at least float32, returned in the dtype of ``logits``.

    In float16 the exponentials' sum overflows and small weights underflow; bfloat16 keeps
    only 8 bits of the weights' mantissa while they are summed.
    """
    return ops.cast(ops.softmax(at_least_float32(logits), axis=axis), logits.dtype)


def large_negative(dtype):
    """A finite logit that vanishes under softmax in ``dtype`` (float16 cannot hold -1e9)."""
    return -3.0e4 if is_half(dtype) else -1.0e9


def check_masks(layer, entities_shape, mask=None, attention_mask=None, argument="entities"):
    """Checks a Keras ``mask`` ``[B, N]`` and an ``attention_mask`` against entities ``[B, N, F]``.

    Both must be boolean (or integer) masks, see :func:`validation.check_mask_dtype`, of a
    shape that fits the entities. Runs at call, trace and symbolic-call time (known dims only).
    """
    if mask is not None:
        validation.check_mask_dtype(layer, "mask", keras.backend.standardize_dtype(mask.dtype))
        validation.check_mask_shape(layer, tuple(mask.shape), tuple(entities_shape), of=argument)
    if attention_mask is not None:
        validation.check_mask_dtype(layer, "attention_mask",
                                    keras.backend.standardize_dtype(attention_mask.dtype))
        validation.check_attention_mask_shape(layer, tuple(attention_mask.shape),
                                              tuple(entities_shape))


def check_feature_width(layer, argument, shape, features, count=None, layout=None):
    """Raises a ValueError naming ``argument`` if ``shape`` ``[B, N, F]`` has another feature
    width than ``features`` (the one the layer was built for), or another entity count than
    ``count`` when the layer's weights fix it."""
    validation.check_built_shape(
        layer, argument, tuple(shape), (None, count, features),
        layout or f"[batch, entities, features F={features}]")


def entity_mask_to_attention_mask(mask, attention_mask):
    """Combines a key mask ``[B, N]`` and an attention mask ``[B|1, N, N]`` into ``[B|1, 1, N, N]``.

    Returns None when neither is given. True means "may attend".
    """
    combined = None
    if mask is not None:
        combined = ops.cast(mask, "bool")[:, None, None, :]
    if attention_mask is not None:
        attention_mask = ops.cast(attention_mask, "bool")
        if len(attention_mask.shape) == 2:
            attention_mask = attention_mask[None]
        attention_mask = attention_mask[:, None, :, :]
        combined = attention_mask if combined is None else ops.logical_and(combined, attention_mask)
    return combined


def lowest_value(dtype):
    """The most negative finite value of a float ``dtype`` (identity of max-pooling)."""
    return -65504.0 if keras.backend.standardize_dtype(dtype) == "float16" else -3.38e38


def output_spec(shapes, dtype):
    """``keras.KerasTensor``s of ``dtype`` in the nested structure of the shape tuples ``shapes``.

    Every layer's ``compute_output_spec`` returns this for the shapes of its outputs (and of its
    attention scores, when asked for).
    """
    return keras.tree.map_shape_structure(lambda shape: keras.KerasTensor(shape, dtype=dtype),
                                          shapes)


def assert_axis_greater(x, axis, bound, message):
    """``x``, failing with ``message`` when it runs if its size on ``axis`` is not > ``bound``.

    For dimensions unknown when a function is traced (e.g. a ``tf.function`` with a ``None``
    entity axis): the static check cannot run, so the TensorFlow backend adds a runtime
    assertion. JAX and eager calls always have concrete shapes, and are checked statically.
    """
    if keras.backend.backend() != "tensorflow":
        return x
    import tensorflow as tf

    with tf.control_dependencies([tf.debugging.assert_greater(
            tf.shape(x)[axis], bound, message=message)]):
        return tf.identity(x)
