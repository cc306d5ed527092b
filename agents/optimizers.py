"""The optimizers of the papers' runs, for Keras 3 (the compiled trainer) or tf-keras (TF-Agents).

One definition of each optimizer's settings: RMSProp as IMPALA, Zambaldi et al. and Clift et al.
train with it (decay 0.99, momentum 0, epsilon 0.1; Zambaldi et al. 2019, App. B), or Adam with
Keras' defaults. Pure Python: the Keras namespace is an argument, so the TF-Agents trainer gets
tf-keras optimizers (``keras_module=tf.keras``) and everything else Keras 3 ones.

Example::

    from keras_relational.agents.optimizers import make_optimizer

    optimizer = make_optimizer("rmsprop", 2e-4)   # keras.optimizers.RMSprop, epsilon 0.1
"""

from keras_relational import validation

OPTIMIZERS = ("rmsprop", "adam")
# Zambaldi et al. 2019, App. B (IMPALA's RMSProp): decay 0.99, no momentum, epsilon 0.1.
RMSPROP_SETTINGS = dict(rho=0.99, momentum=0.0, epsilon=0.1)


def make_optimizer(name, learning_rate, dtype_policy=validation.DEFAULT_DTYPE_POLICY,
                   keras_module=None):
    """The optimizer ``name`` (``"rmsprop"`` or ``"adam"``) at ``learning_rate``.

    Under ``dtype_policy="mixed_float16"`` it is wrapped in the dynamic ``LossScaleOptimizer``
    (float16 gradients underflow without loss scaling; Micikevicius et al. 2018, Sec. 3.2); the
    learners scale the loss by its current scale.

    Args:
        name: ``"rmsprop"`` (the papers') or ``"adam"``.
        learning_rate: the learning rate.
        dtype_policy: the network's Keras dtype policy.
        keras_module: the Keras namespace to build it from: ``keras`` (Keras 3, the default) or
            ``tf.keras`` (tf-keras, for TF-Agents).
    """
    if keras_module is None:
        import keras as keras_module
    if name == "rmsprop":
        optimizer = keras_module.optimizers.RMSprop(learning_rate=learning_rate,
                                                    **RMSPROP_SETTINGS)
    elif name == "adam":
        optimizer = keras_module.optimizers.Adam(learning_rate=learning_rate)
    else:
        raise ValueError(f"`optimizer` must be one of {OPTIMIZERS}, received {name!r}.")
    if dtype_policy == "mixed_float16":
        return keras_module.mixed_precision.LossScaleOptimizer(optimizer)
    return optimizer
