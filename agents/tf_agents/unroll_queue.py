"""In-process replacement for Reverb: actors push fixed-length unrolls, the learner pops them."""

import queue

import numpy as np
import tensorflow as tf
from tf_agents.specs import tensor_spec


def plain_containers(structure):
    """Replaces tracking wrappers (``DictWrapper``) by plain dicts, as the yielded unrolls use."""
    if isinstance(structure, tuple) and hasattr(structure, "_fields"):
        return type(structure)(*(plain_containers(x) for x in structure))
    if isinstance(structure, (list, tuple)):
        return type(structure)(plain_containers(x) for x in structure)
    if hasattr(structure, "items"):
        return {k: plain_containers(v) for k, v in structure.items()}
    return structure


def check_unroll(unroll, data_spec, outer_shape, what="The unroll"):
    """Raises a ValueError unless ``unroll`` matches ``outer_shape + data_spec`` (structure,
    dtypes and shapes); ``what`` names the unroll in the message."""
    import tree

    spec = plain_containers(tensor_spec.add_outer_dims_nest(data_spec, outer_shape))
    try:
        tf.nest.assert_same_structure(spec, unroll)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{what} does not have the structure of the agent's "
                         f"collect_data_spec: {error}") from error
    paths = ["/".join(str(key) for key in path) for path, _ in tree.flatten_with_path(spec)]
    for path, s, x in zip(paths, tf.nest.flatten(spec), tf.nest.flatten(unroll), strict=True):
        expected = tuple(s.shape)
        if x.dtype != s.dtype.as_numpy_dtype or tuple(x.shape) != expected:
            raise ValueError(
                f"{what} field {path} must be {s.dtype.name}{list(expected)} "
                f"as the agent's collect_data_spec, received {x.dtype}{list(x.shape)}.")


def stack_steps(steps):
    """Batched trajectory steps ``[B, ...]`` -> one unroll ``[B, len(steps), ...]`` (NumPy)."""
    return tf.nest.map_structure(lambda *xs: np.stack([np.asarray(x) for x in xs], axis=1),
                                 *steps)


class UnrollQueue:
    """Collects batched trajectories into ``[B, T+1]`` unrolls for the learner (IMPALA style).

    Use it as an ``Actor`` observer: each call receives one batched ``Trajectory`` step. Every
    ``unroll_length`` steps one unroll of ``unroll_length + 1`` steps is queued (consecutive
    unrolls share one step, so every transition is trained on exactly once and the last step's
    value bootstraps the unroll). :meth:`as_dataset` is the ``experience_dataset_fn`` for a
    ``tf_agents.train.Learner``.

    Args:
        data_spec: the agent's ``collect_data_spec`` (one unbatched step).
        batch_size: B, the number of environments stepped together.
        unroll_length: T.
        max_unrolls: queue capacity; the actor blocks when the learner falls this far behind.
    """

    def __init__(self, data_spec, batch_size, unroll_length, max_unrolls=8):
        if unroll_length < 1:
            raise ValueError(f"`unroll_length` must be >= 1, received {unroll_length}.")
        self._data_spec = data_spec
        self._batch_size = batch_size
        self._unroll_length = unroll_length
        self._steps = []
        self._queue = queue.Queue(maxsize=max_unrolls)
        self._closed = False
        self.unrolls_produced = 0

    @property
    def unroll_length(self):
        return self._unroll_length

    @property
    def batch_size(self):
        return self._batch_size

    def qsize(self):
        return self._queue.qsize()

    def __call__(self, trajectory):
        self._steps.append(tf.nest.map_structure(np.asarray, trajectory))
        if len(self._steps) == self._unroll_length + 1:
            self.put(stack_steps(self._steps))
            self._steps = self._steps[-1:]

    def put(self, unroll):
        """Queues one ready ``[B, T+1, ...]`` unroll (e.g. from a remote actor); may block."""
        self._queue.put(unroll)
        self.unrolls_produced += 1

    def get(self):
        """Takes the oldest queued unroll without waiting (``queue.Empty`` when there is none)."""
        return self._queue.get_nowait()

    def close(self):
        self._closed = True

    def get_state(self):
        """The steps held toward the next unroll and the queued unrolls (NumPy), for a
        checkpoint; call it while neither side runs."""
        return dict(steps=list(self._steps), queued=list(self._queue.queue))

    def set_state(self, state):
        """Restores :meth:`get_state`'s state into an empty queue."""
        if self._steps or self._queue.qsize():
            raise RuntimeError("UnrollQueue.set_state needs an empty queue.")
        self._steps = list(state["steps"])
        for unroll in state["queued"]:
            self._queue.put(unroll)

    def _generator(self):
        while not self._closed:
            try:
                unroll = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            yield unroll, np.int32(0)

    def as_dataset(self):
        """A ``tf.data.Dataset`` of ``(experience [B, T+1, ...], info)`` for the Learner."""
        batched = tensor_spec.add_outer_dims_nest(
            self._data_spec, (self._batch_size, self._unroll_length + 1))
        signature = plain_containers(
            tf.nest.map_structure(lambda s: tf.TensorSpec(s.shape, s.dtype), batched))
        dataset = tf.data.Dataset.from_generator(
            self._generator, output_signature=(signature, tf.TensorSpec((), tf.int32)))
        options = tf.data.Options()
        # No background prefetching: the learner consumes exactly what the actor produced.
        options.experimental_optimization.inject_prefetch = False
        options.autotune.enabled = False
        return dataset.with_options(options)
