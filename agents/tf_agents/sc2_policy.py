"""The SC2 agent's TF-Agents policy: two-stage sampling of composite actions.

:class:`SC2Policy` acts with an :class:`~keras_relational.agents.tf_agents.sc2_network.SC2Network`
on the adapter's dict action spec (``function`` and one integer per argument type): the function id
from the trunk's logits, masked by the available actions, then every argument from the argument
heads given that id (Zambaldi et al. 2019, App. C; Vinyals et al. 2017, Sec. 4.1). Its
``policy_info`` records what V-trace needs: the behaviour policy's composite log-probability
and the ConvLSTM state the step started from (the learner replays each unroll from its first
step's state). With a ``sampling_seed`` it samples statelessly, from a seed and a call counter
that a checkpoint saves (TensorFlow's stateful sampling keeps its state in the process, where no
checkpoint reaches it), so a resumed run samples exactly as the uninterrupted one.
"""

import tensorflow as tf
import tensorflow_probability as tfp
from tf_agents.policies import tf_policy
from tf_agents.trajectories import policy_step

from keras_relational.agents.sc2.policy import ARGUMENTS
from keras_relational.models.sc2_agent import composite_log_prob_and_entropy


class SC2Policy(tf_policy.TFPolicy):
    """Samples (or, ``greedy=True``, picks the most probable) composite SC2 actions.

    ``policy_info``: ``log_prob`` (float32, the composite log-probability of the action under
    this policy) and ``state_h``, ``state_c`` (the policy state the step started from, after
    its reset at an episode start). The policy state is the network's ConvLSTM ``(h, c)``,
    zeroed at every FIRST step (TF-Agents' automatic state reset, and the network's own).

    Args:
        time_step_spec, action_spec: TensorFlow specs of the adapter (``action_spec`` a dict:
            ``function`` and the argument names of the model's heads).
        network: an :class:`~keras_relational.agents.tf_agents.sc2_network.SC2Network`.
        argument_mask: ``[num_functions, num_argument_types]`` 0/1, which function takes which
            argument (``SC2Environment.argument_mask()``).
        argument_names: the column order of ``argument_mask`` (the adapter's, pysc2's:
            ``SC2Environment.argument_mask()[0]``); ``action_spec`` has these keys and
            ``function``.
        greedy: the most probable available function, then the most probable value of each
            argument given it (the greedy policy; what ``export_policy`` serves).
        sampling_seed: None (TensorFlow's stateful sampling), or sample statelessly: the n-th
            call of ``action`` samples the function id and then each argument with seeds
            folded from ``(sampling_seed, n)`` (``tf.random.stateless_categorical``), n counted
            by :attr:`sample_count`, which a checkpoint saves. Ignored when ``greedy``.
        name: policy name.

    Example::

        policy = SC2Policy(time_step_spec, action_spec, network, mask)
        step = policy.action(time_step, policy.get_initial_state(batch_size))
        step.action["function"], step.info["log_prob"]
    """

    def __init__(self, time_step_spec, action_spec, network, argument_mask,
                 argument_names=ARGUMENTS, greedy=False, sampling_seed=None, name=None):
        self._argument_names = tuple(argument_names)
        expected = {"function", *self._argument_names}
        keys = set(action_spec) if hasattr(action_spec, "keys") else None
        if keys != expected:
            raise ValueError("SC2Policy: `action_spec` must be a dict with the keys "
                             f"{sorted(expected)}; received {action_spec}.")
        mask = tf.convert_to_tensor(argument_mask, tf.float32)
        if tuple(mask.shape) != (action_spec["function"].maximum + 1,
                                 len(self._argument_names)):
            raise ValueError(
                "SC2Policy: `argument_mask` must be [num_functions, num_argument_types] = "
                f"[{action_spec['function'].maximum + 1}, {len(self._argument_names)}]; "
                f"received shape {tuple(mask.shape)}.")
        self._network = network
        self._argument_mask = mask
        self._greedy = greedy
        self._sampling_seed = sampling_seed
        self._sample_count = None if sampling_seed is None or greedy else tf.Variable(
            0, dtype=tf.int64, trainable=False, name="sample_count")
        state_h, state_c = network.state_spec
        info_spec = {"log_prob": tf.TensorSpec((), tf.float32), "state_h": state_h,
                     "state_c": state_c}
        super().__init__(time_step_spec, action_spec, policy_state_spec=network.state_spec,
                         info_spec=info_spec, clip=False, name=name)

    @property
    def greedy(self):
        return self._greedy

    @property
    def sample_count(self):
        """The stateless sampler's call counter (an int64 ``tf.Variable``), or None."""
        return self._sample_count

    def _variables(self):
        return self._network.variables

    def _choose(self, logits, seed_stream, dtype):
        if self._greedy:
            return tf.argmax(logits, axis=-1, output_type=dtype)
        seed = seed_stream()
        if self._sample_count is None:
            return tfp.distributions.Categorical(logits=logits, dtype=dtype).sample(seed=seed)
        flat = tf.reshape(logits, [-1, tf.shape(logits)[-1]])  # any outer dims
        return tf.reshape(tf.random.stateless_categorical(flat, 1, seed, dtype=dtype),
                          tf.shape(logits)[:-1])

    def _seeds(self, seed):
        """A callable giving the seed of each sampling stage in turn."""
        if self._sample_count is None:
            return tfp.util.SeedStream(seed, salt="sc2_policy")
        count = self._sample_count.assign_add(1) - 1
        base = tf.stack([tf.constant(self._sampling_seed, tf.int64), count])
        stages = iter(range(1 + len(self._argument_names)))
        return lambda: tf.random.experimental.stateless_fold_in(base, next(stages))

    def _action(self, time_step, policy_state, seed=None):
        seed_stream = None if self._greedy else self._seeds(seed)
        outputs, next_state = self._network(time_step.observation,
                                            step_type=time_step.step_type,
                                            network_state=policy_state, training=False)
        spec = self.action_spec
        # First the function id (masked logits: unavailable ones never win), then its arguments.
        action = {"function": self._choose(outputs["function_logits"], seed_stream,
                                           spec["function"].dtype)}
        logits = self._network.argument_logits(outputs["shared"], outputs["spatial"],
                                               tf.cast(action["function"], tf.int32))
        for name in self._argument_names:
            action[name] = self._choose(logits[name], seed_stream, spec[name].dtype)
        logits["function_logits"] = outputs["function_logits"]
        log_prob, _ = composite_log_prob_and_entropy(logits, action, self._argument_mask,
                                                     self._argument_names)
        info = {"log_prob": log_prob, "state_h": policy_state[0], "state_c": policy_state[1]}
        return policy_step.PolicyStep(action, next_state, info)

    def _distribution(self, time_step, policy_state):
        raise NotImplementedError(
            "SC2Policy has no single tfp distribution: its arguments are sampled given the "
            "sampled function id (two stages); call action() instead.")
