"""A TF-Agents ``Network`` that runs a Keras 3 model, with every variable visible to TF-Agents."""

import numpy as np
import tensorflow as tf
from tf_agents.networks import network, utils
from tf_agents.specs import tensor_spec
from tf_agents.utils import nest_utils


def _sampleable_spec(spec):
    if isinstance(spec, tensor_spec.BoundedTensorSpec) and spec.dtype == tf.uint8:
        return tensor_spec.BoundedTensorSpec(spec.shape, spec.dtype, spec.minimum,
                                             np.minimum(spec.maximum, 254), name=spec.name)
    return spec


class Keras3Network(network.Network):
    """Wraps a Keras 3 model (built by ``model_fn``) as a ``tf_agents.networks.Network``.

    A Keras 3 layer is not a tf-keras layer and its variables are not ``tf.Variable`` objects, so
    a Keras 3 model merely held by a TF-Agents network is invisible to it: no trainable variables,
    nothing checkpointed, nothing saved. This bridge

    * takes a model *builder*: ``Network.copy()`` (used for target networks) re-runs ``__init__``,
      and each copy must own fresh variables;
    * builds the model eagerly and keeps ``[v.value for v in model.variables]`` (the underlying
      ``tf.Variable`` objects) as an attribute, so tf-keras tracking, ``policy.variables()``,
      ``PolicySaver``, ``Checkpointer`` and target updates all see them;
    * reports ``trainable_weights`` / ``non_trainable_weights`` from the Keras 3 model (honouring
      ``layer.trainable = False``) and ``weights`` in the model's own stable order;
    * squashes any outer dimensions (``[B, T, ...]`` from PPO) into one batch dimension;
    * returns floating outputs as float32 whatever the model's dtype policy (a
      ``mixed_bfloat16`` / ``mixed_float16`` model computes in 16 bits inside);
    * applies an optional ``output_fn`` on the TensorFlow side (e.g. a ``tfp`` distribution head),
      so the Keras 3 model itself stays backend-agnostic and exportable with ``model.export``.

    Args:
        input_tensor_spec: spec of one (unbatched) observation.
        model_fn: zero-argument callable returning a new Keras 3 model.
        output_fn: optional callable applied to the model's outputs.
        name: network name.

    Example::

        net = Keras3Network(env.observation_spec(), lambda: relational_agent(),
                            output_fn=lambda outputs: outputs[0])  # logits only
    """

    def __init__(self, input_tensor_spec, model_fn, output_fn=None, name="Keras3Network"):
        super().__init__(input_tensor_spec=input_tensor_spec, state_spec=(), name=name)
        self._model_fn = model_fn
        self._output_fn = output_fn
        model = model_fn()
        if not hasattr(model, "variables") or not callable(model):
            raise TypeError(
                f"`model_fn` must return a Keras 3 model, received {type(model).__name__}.")
        if not model.built:
            dummy = tf.nest.map_structure(
                lambda s: tf.zeros([1, *s.shape], s.dtype), input_tensor_spec)
            model(dummy)
        self._keras3_model = model
        # The underlying tf.Variables, tracked by tf-keras (checkpoints, SavedModel, copies).
        self._keras3_variables = [v.value for v in model.variables]

    def create_variables(self, input_tensor_spec=None, **kwargs):
        # TF-Agents samples a random input to build the network, and its sampler overflows on a
        # full-range uint8 spec (maxval 256 wraps to 0: "Need minval < maxval"). Pixels are
        # uint8 [0, 255], so sample from a spec whose maximum is 254 instead.
        full_spec = self._input_tensor_spec
        self._input_tensor_spec = tf.nest.map_structure(_sampleable_spec, full_spec)
        try:
            return super().create_variables(input_tensor_spec, **kwargs)
        finally:
            self._input_tensor_spec = full_spec

    @property
    def keras_model(self):
        """The wrapped Keras 3 model (export it with ``keras_model.export(path)``)."""
        return self._keras3_model

    @property
    def trainable_weights(self):
        return [v.value for v in self._keras3_model.trainable_variables]

    @property
    def non_trainable_weights(self):
        return [v.value for v in self._keras3_model.non_trainable_variables]

    @property
    def weights(self):
        return [v.value for v in self._keras3_model.variables]

    @property
    def trainable_variables(self):
        return self.trainable_weights

    @property
    def variables(self):
        return self.weights

    def call(self, observation, step_type=None, network_state=(), training=False):
        del step_type  # stateless
        outer_rank = nest_utils.get_outer_rank(observation, self.input_tensor_spec)
        batch_squash = utils.BatchSquash(outer_rank)
        observation = tf.nest.map_structure(batch_squash.flatten, observation)
        outputs = self._keras3_model(observation, training=training)
        outputs = tf.nest.map_structure(batch_squash.unflatten, tuple(outputs)
                                        if isinstance(outputs, list) else outputs)
        # Under 16-bit dtype policies TF-Agents (distributions, specs, V-trace) sees float32.
        outputs = tf.nest.map_structure(
            lambda t: tf.cast(t, tf.float32) if t.dtype.is_floating else t, outputs)
        if self._output_fn is not None:
            outputs = self._output_fn(outputs)
        return outputs, network_state
