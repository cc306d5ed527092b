"""The two things Keras 3 leaves to the backend: compiling a function and taking gradients.

Everything else in the compiled loop is ``keras.ops`` and Keras' stateless API
(``model.stateless_call``, ``optimizer.stateless_apply``), the same code under every backend.

* JAX: ``jax.jit`` (the loop state's buffers donated, so the update runs in place) and
  ``jax.value_and_grad``.
* TensorFlow: ``tf.function(jit_compile=True)`` (XLA) and ``tf.GradientTape``.
* PyTorch: not supported (raises); ``torch.func`` could take the gradients, but there is no
  whole-loop compiler for it that ``keras.ops.scan`` lowers to.
"""

import keras

SUPPORTED_BACKENDS = ("jax", "tensorflow")


def current_backend():
    """The Keras backend, checked to be one the compiled loop runs on."""
    backend = keras.backend.backend()
    if backend not in SUPPORTED_BACKENDS:
        raise ValueError(f"The compiled actor-learner loop runs under KERAS_BACKEND in "
                         f"{SUPPORTED_BACKENDS}, received KERAS_BACKEND={backend!r}.")
    return backend


def value_and_grad(loss_fn):
    """``loss_fn(trainable, *args) -> (loss, aux)`` made ``fn(...) -> ((loss, aux), grads)``.

    ``trainable`` is a list of tensors (the model's trainable variables' values); the gradients
    are a list in the same order.
    """
    if current_backend() == "jax":
        import jax

        return jax.value_and_grad(loss_fn, has_aux=True)
    import tensorflow as tf

    def fn(trainable, *args):
        with tf.GradientTape() as tape:
            tape.watch(trainable)
            loss, aux = loss_fn(trainable, *args)
        return (loss, aux), tape.gradient(loss, trainable)

    return fn


def compile_function(fn, donate_state=True, jit_compile=True):
    """``fn(state, *args)`` compiled whole: ``jax.jit`` or ``tf.function(jit_compile=True)``.

    ``jit_compile=False`` keeps TensorFlow's graph without XLA (JAX always compiles): for models
    whose XLA compilation costs more than a few steps save (a short smoke run on the CPU).

    Under JAX the buffers of ``state`` (the first argument) are donated: the caller must use the
    returned state and never the one it passed in; and the outputs are made strongly typed
    (``ops.where(mask, 0, x)`` is weakly typed in JAX), so feeding a returned state back in
    never compiles the function a second time.
    """
    if current_backend() == "jax":
        import jax

        def strongly_typed(*args):
            return jax.tree.map(lambda x: jax.lax.convert_element_type(x, x.dtype), fn(*args))

        return jax.jit(strongly_typed, donate_argnums=(0,) if donate_state else ())
    import tensorflow as tf

    return tf.function(fn, jit_compile=jit_compile, reduce_retracing=True)


def scan(f, init, length):
    """``jax.lax.scan(f, init, None, length)``: ``(carry, ys stacked [length, ...])``.

    Under JAX it is ``jax.lax.scan``. ``keras.ops.scan`` under TensorFlow requires the outputs
    ``ys`` to be shaped like the carry, so TensorFlow gets a ``tf.while_loop`` writing ``ys`` into
    ``TensorArray`` s; their shapes come from tracing ``f`` once more (that trace computes
    nothing: its outputs are unused and pruned from the graph).
    """
    if current_backend() == "jax":
        import jax

        return jax.lax.scan(f, init, None, length)
    import tensorflow as tf

    _, probe = f(init, None)
    flat = [] if probe is None else tf.nest.flatten(probe)
    arrays = [tf.TensorArray(y.dtype, size=length, element_shape=y.shape) for y in flat]

    def body(i, carry, arrays):
        carry, ys = f(carry, None)
        ys = [] if ys is None else tf.nest.flatten(ys)
        return i + 1, carry, [a.write(i, y) for a, y in zip(arrays, ys, strict=True)]

    _, carry, arrays = tf.while_loop(lambda i, *_: i < length, body, (0, init, arrays))
    return carry, None if probe is None else tf.nest.pack_sequence_as(
        probe, [a.stack() for a in arrays])


def apply_gradients(optimizer, optimizer_values, grads, trainable_values, trainable_variables):
    """One optimizer step as a pure function: ``(trainable_values, optimizer_values)``.

    Under JAX it is ``optimizer.stateless_apply``. Keras' TensorFlow optimizer refuses
    ``stateless_apply`` (``tf.distribute`` needs real variables), so under TensorFlow the values
    are written into the variables, the optimizer applies the gradients to them, and the new
    values are read back: the same pure function, with variables as scratch space inside the
    compiled function.
    """
    if current_backend() == "jax":
        return optimizer.stateless_apply(optimizer_values, grads, trainable_values)
    import tensorflow as tf

    for variables, values in ((trainable_variables, trainable_values),
                              (optimizer.variables, optimizer_values)):
        for variable, value in zip(variables, values, strict=True):
            variable.assign(value)
    optimizer.apply(grads, trainable_variables)
    return ([tf.identity(v.value) for v in trainable_variables],
            [tf.identity(v.value) for v in optimizer.variables])
