"""A categorical TF-Agents policy over an actor-critic network returning (logits, value)."""

import tensorflow as tf
import tensorflow_probability as tfp
from tf_agents.policies import tf_policy
from tf_agents.trajectories import policy_step


class ActorCriticPolicy(tf_policy.TFPolicy):
    """Samples actions from ``Categorical(logits)`` of a network returning ``(logits, value)``.

    The logits are emitted as ``policy_info["logits"]``, so trajectories carry the behaviour
    policy's log-probabilities that V-trace needs for its off-policy correction.

    Args:
        time_step_spec: the environment's ``TimeStep`` spec.
        action_spec: a scalar ``BoundedTensorSpec`` of integer actions ``[0, A)``.
        network: a ``tf_agents`` network (e.g. :class:`Keras3Network`) returning
            ``((logits [B, A], value [B]), state)``.
        jit_compile: compute the logits with an XLA-compiled function (faster acting on a CPU;
            meant for the actor's own copy of the policy, not for a policy to export).
    """

    def __init__(self, time_step_spec, action_spec, network, jit_compile=False, name=None):
        num_actions = int(action_spec.maximum - action_spec.minimum + 1)
        info_spec = {"logits": tf.TensorSpec([num_actions], tf.float32)}
        self._network = network
        self._logits_fn = tf.function(self._logits, jit_compile=True) if jit_compile \
            else self._logits
        super().__init__(time_step_spec, action_spec, policy_state_spec=(), info_spec=info_spec,
                         clip=False, name=name)

    def _variables(self):
        return self._network.variables

    def _logits(self, observation, step_type):
        (logits, _), _ = self._network(observation, step_type=step_type, training=False)
        return logits

    def _distribution(self, time_step, policy_state):
        logits = self._logits_fn(time_step.observation, time_step.step_type)
        distribution = tfp.distributions.Categorical(logits=logits, dtype=self.action_spec.dtype)
        return policy_step.PolicyStep(distribution, policy_state, {"logits": logits})
