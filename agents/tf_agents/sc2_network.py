"""The SC2 agent as a recurrent TF-Agents network (the TF-Agents route of its V-trace training).

:class:`SC2Network` bridges the Keras 3 model of
:func:`keras_relational.models.sc2_agent.sc2_agent` into TF-Agents as
:class:`~keras_relational.agents.tf_agents.keras3_network.Keras3Network` does for the Box-World
agents (the model's variables visible to TF-Agents, a model builder for copies), with the ConvLSTM
state ``(h, c)`` as the network state: one call is one step ``[B, ...]`` (acting) or a
trajectory ``[B, T, ...]`` (training), unrolled over time from the state it is given and reset
to zeros at every episode start (Zambaldi et al. 2019, App. C).
"""

import types

import tensorflow as tf
from tf_agents.networks import utils
from tf_agents.utils import nest_utils

from keras_relational.agents.sc2.learning import replay
from keras_relational.agents.tf_agents.keras3_network import Keras3Network


def _swap_outer(x):
    """``[B, T, ...]`` <-> ``[T, B, ...]``."""
    return tf.transpose(x, [1, 0, *range(2, x.shape.rank)])


class SC2Network(Keras3Network):
    """The SC2 agent's trunk as a TF-Agents network with the ConvLSTM state as network state.

    ``call(observation, step_type, network_state)`` returns ``(outputs, (h, c))``: ``outputs``
    is a dict of ``function_logits`` (masked by the available actions), ``value``, and the
    ``shared`` and ``spatial`` features :meth:`argument_logits` takes, each ``[B, ...]`` for a
    step or ``[B, T, ...]`` for a trajectory; ``(h, c)`` is the state after the last step. The
    state is zeroed where ``step_type`` is FIRST, before the step. The argument heads are a
    second call (:meth:`argument_logits`): a policy samples the function id first and scores
    the arguments given it.

    Args:
        input_tensor_spec: the adapter's observation spec (TensorFlow specs).
        model_fn: zero-argument callable returning a new
            :func:`~keras_relational.models.sc2_agent.sc2_agent` model.
        name: network name.

    Example::

        network = SC2Network(observation_spec, lambda: sc2_agent(screen_size=32))
        outputs, state = network(observation, step_type=step_type,
                                 network_state=network.get_initial_state(batch_size))
    """

    def __init__(self, input_tensor_spec, model_fn, name="SC2Network"):
        super().__init__(input_tensor_spec, model_fn, name=name)
        # The state's shape comes from the model, which Keras3Network builds after passing
        # its (empty) state spec on to TF-Agents' Network: set here, where Network keeps it.
        shape = self.keras_model.get_layer("sc2_trunk").input["state_h"].shape[1:]
        self._state_spec = (tf.TensorSpec(shape, tf.float32, "state_h"),
                            tf.TensorSpec(shape, tf.float32, "state_c"))

    def unroll(self, observation, step_type, state, training=False):
        """The trunk along a time-major trajectory ``[T, B, ...]`` (``T`` static) from
        ``state``: ``(outputs [T, B, ...], (h, c))``, as the compiled learner replays it."""
        if step_type.shape[0] is None:
            raise ValueError("SC2Network.unroll needs a static number of steps T; received "
                             f"step_type of shape {step_type.shape}.")
        return replay(self.keras_model, types.SimpleNamespace(
            observation=observation, step_type=step_type, state=tuple(state)),
            training=training, return_state=True)

    def argument_logits(self, shared, spatial, function_id, training=False):
        """The argument heads given the function ids (any outer dims, those of
        ``function_id``): a dict of argument name -> logits ``[..., size]``."""
        squash = utils.BatchSquash(function_id.shape.rank)
        heads = self.keras_model.get_layer("sc2_argument_heads")
        logits = heads({"shared": squash.flatten(shared), "spatial": squash.flatten(spatial),
                        "function_id": squash.flatten(function_id)}, training=training)
        return {name: squash.unflatten(value) for name, value in logits.items()}

    def call(self, observation, step_type=None, network_state=(), training=False):
        outer_rank = nest_utils.get_outer_rank(observation, self.input_tensor_spec)
        if outer_rank not in (1, 2):
            raise ValueError("SC2Network takes a step [B, ...] or a trajectory [B, T, ...]; "
                             f"received an observation of outer rank {outer_rank}.")
        batch_size = tf.shape(tf.nest.flatten(observation)[0])[0]
        if step_type is None:  # no episode starts: the state is carried throughout
            step_type = tf.ones(tf.shape(tf.nest.flatten(observation)[0])[:outer_rank],
                                tf.int32)
        if not network_state:
            network_state = self.get_initial_state(batch_size)
        if outer_rank == 1:  # one step: a trajectory of length 1
            observation, step_type = tf.nest.map_structure(
                lambda x: x[:, None], (observation, step_type))
        outputs, state = self.unroll(tf.nest.map_structure(_swap_outer, observation),
                                     _swap_outer(step_type), network_state, training=training)
        outputs = tf.nest.map_structure(_swap_outer, outputs)
        if outer_rank == 1:
            outputs = tf.nest.map_structure(lambda x: x[:, 0], outputs)
        return outputs, state
