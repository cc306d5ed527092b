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

    # No AutoGraph: the loop is keras.ops code that jax.jit traces as it is (its control flow is
    # ops.cond / while loops, never Python branches on tensors), and converting every call the
    # trace makes cost about a third of a tiny run's time on the CPU.
    return tf.function(fn, jit_compile=jit_compile, reduce_retracing=True, autograph=False)


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


def scan_over(f, init, xs):
    """``jax.lax.scan(f, init, xs)``: ``f(carry, x)`` over the leading axis of the pytree ``xs``.

    Under TensorFlow a Python loop over that (static, short) axis: each step appears in the
    graph once (the learner minibatches of an update, a handful).
    """
    if current_backend() == "jax":
        import jax

        return jax.lax.scan(f, init, xs)
    import tensorflow as tf

    leaves = tf.nest.flatten(xs)
    ys = []
    for i in range(leaves[0].shape[0]):
        init, y = f(init, tf.nest.pack_sequence_as(xs, [x[i] for x in leaves]))
        ys.append(y)
    return init, tf.nest.map_structure(lambda *y: tf.stack(y), *ys)


def named_scope(name):
    """A scope naming the operations traced inside it (``jax.named_scope`` / ``tf.name_scope``):
    the profiler's kernels and the compiled HLO's ``op_name`` metadata carry it, so time and
    FLOPs can be attributed to the environment, acting or learning."""
    if current_backend() == "jax":
        import jax

        return jax.named_scope(name)
    import tensorflow as tf

    return tf.name_scope(name)


def local_devices(num_devices=None):
    """The first ``num_devices`` of ``jax.devices()`` (None: all of them); ``[None]`` (one
    device, the default placement) under TensorFlow, which needs ``num_devices`` in (None, 1).

    Raises ``ValueError`` naming ``num_devices`` when more are asked for than there are.
    """
    if current_backend() != "jax":
        if num_devices not in (None, 1):
            raise ValueError(f"`num_devices` (--num_devices) above 1 needs KERAS_BACKEND=jax "
                             f"(data-parallel over jax.devices()), received "
                             f"num_devices={num_devices} under "
                             f"KERAS_BACKEND={keras.backend.backend()!r}.")
        return [None]
    import jax

    devices = jax.devices()
    if num_devices is not None and not 1 <= num_devices <= len(devices):
        raise ValueError(f"`num_devices` (--num_devices) must be between 1 and the "
                         f"{len(devices)} device(s) of jax.devices(), received "
                         f"num_devices={num_devices}.")
    return devices[:num_devices] if num_devices is not None else devices


class DataParallel:
    """Environments split across local devices, weights replicated (``jax.sharding``).

    The compiled update is one program over all ``num_envs`` environments; its inputs and
    outputs carry a ``NamedSharding`` over a one-axis mesh (``"envs"``) of ``devices``, so XLA's
    SPMD partitioner runs each device's share of environments, acting and learning and sums the
    gradients across devices (an all-reduce). The update computes what it computes on one
    device: the same loss, gradients and samples (JAX's partitionable threefry draws the same
    random bits however an array is split), within float tolerance of the summation order.

    Args:
        devices: the devices (``local_devices``); one device: no sharding at all.
        num_envs: the environments; a leaf whose leading axis has this size is split.
    """

    def __init__(self, devices, num_envs):
        self.devices = list(devices)
        self.num_envs = num_envs
        if num_envs % len(self.devices):
            raise ValueError(f"`num_envs` (--num_envs) must be divisible by the "
                             f"{len(self.devices)} devices the loop runs on (`num_devices`, "
                             f"--num_devices; None: all of jax.devices()), received "
                             f"num_envs={num_envs}.")
        self._split = self._replicated = None
        if len(self.devices) > 1:
            import jax
            import numpy as np

            mesh = jax.sharding.Mesh(np.array(self.devices), ("envs",))
            self._split = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("envs"))
            self._replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())

    @property
    def active(self):
        """Whether the loop runs on more than one device."""
        return self._split is not None

    def _sharding(self, x, batched):
        split = batched and len(getattr(x, "shape", ())) >= 1 and x.shape[0] == self.num_envs
        return self._split if split else self._replicated

    def place(self, state, batched_keys=("env", "timestep", "episode_return")):
        """``state`` (a dict pytree) on the devices: the ``batched_keys`` entries' per-environment
        leaves split, everything else replicated. Unchanged on one device."""
        if not self.active:
            return state
        import jax

        return {key: jax.tree.map(lambda x, b=key in batched_keys: jax.device_put(
            x, self._sharding(x, b)), value) for key, value in state.items()}

    def replicate(self, tree):
        """``tree`` replicated on every device (a level bank). Unchanged on one device."""
        if not self.active:
            return tree
        import jax

        return jax.device_put(tree, self._replicated)

    def constrain(self, state, batched_keys=("env", "timestep", "episode_return")):
        """Inside the compiled update: the state's shardings as :meth:`place` sets them."""
        if not self.active:
            return state
        import jax

        return {key: jax.tree.map(lambda x, b=key in batched_keys: jax.lax.with_sharding_constraint(
            x, self._sharding(x, b)), value) for key, value in state.items()}


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
