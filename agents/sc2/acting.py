"""Acting: the SC2 agent on ``B`` environments, collecting :class:`SC2Unroll` s for the learner.

A composite action is sampled in two stages, as the agent's architecture asks (Zambaldi et al.
2019, App. C): the function id from the trunk's masked logits, then every argument from the
argument heads conditioned on that id. The actor records the behaviour policy's composite
log-probability (:func:`~keras_relational.models.sc2_agent.composite_log_prob_and_entropy`), the
ConvLSTM state at the start of each unroll, and zeroes the state at every episode start.
Sampling uses a NumPy generator (the environments step on the host anyway).

:meth:`SC2Actor.get_state` is the actor's half of a ``train_sc2`` checkpoint: the generator's
state and the finished episodes' returns, and, where the environments can be restored (pysc2's
mock: ``SC2Environment.get_state``), their state, the last time steps, the ConvLSTM state and the
running returns, so that a resumed run acts exactly as the uninterrupted one. The game's state
lives in the StarCraft II process, which pysc2 can neither save nor load: a resumed game run
starts new episodes.
"""

import keras
import numpy as np

from keras_relational.agents.sc2.learning import FIRST, SC2Unroll
from keras_relational.models.sc2_agent import composite_log_prob_and_entropy, initial_state


def sample(logits, rng):
    """One index per row of ``logits`` ``[N, K]`` (float64 softmax; masked logits never win)."""
    logits = np.asarray(logits, np.float64)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    return np.array([rng.choice(len(p), p=p) for p in probs], np.int32)


class EpisodeReturns:
    """The number of finished episodes and the returns of the last ``window`` of them, in order.

    What ``train_sc2`` reports as ``mean_return`` (the mean of the last 100, as TF-Agents'
    ``AverageReturnMetric`` keeps them), bounded so that a checkpoint stays small in a long run.
    """

    def __init__(self, window=100):
        self.window = window
        self.count = 0
        self.recent = []

    def add(self, value):
        self.count += 1
        self.recent.append(float(value))
        del self.recent[:-self.window]

    def mean(self):
        """The mean of the recent returns (None before an episode finished)."""
        return float(sum(self.recent) / len(self.recent)) if self.recent else None

    def get_state(self):
        return dict(count=self.count, recent=list(self.recent))

    def set_state(self, state):
        self.count, self.recent = int(state["count"]), [float(x) for x in state["recent"]]


def environment_states(environments):
    """Each environment's ``get_state()``, or None when one of them cannot be saved (the game;
    an environment without ``get_state``)."""
    states = [env.get_state() if hasattr(env, "get_state") else None for env in environments]
    return None if any(state is None for state in states) else states


def restore_environments(environments, states):
    """Restores :func:`environment_states`' ``states`` (None: nothing); True if restored."""
    if states is None or not all(hasattr(env, "set_state") for env in environments):
        return False
    if len(states) != len(environments):
        raise ValueError(f"The checkpoint holds {len(states)} environments' states; this run "
                         f"has {len(environments)} environments.")
    for env, state in zip(environments, states, strict=True):
        env.set_state(state)
    return True


class SC2Actor:
    """Steps ``environments`` (``SC2Environment`` s, or anything with their specs) with ``model``.

    Args:
        environments: a list of ``B`` dm_env environments with the adapter's specs.
        model: the agent (:func:`keras_relational.models.sc2_agent.sc2_agent`); the actor reads
            its variables' current values at every step.
        argument_mask: ``[num_functions, num_argument_types]`` (``argument_mask()`` of the
            adapter).
        seed: seed of the sampling generator.

    Example::

        actor = SC2Actor(environments, model, mask)
        unroll = actor.collect(unroll_length=80)   # an SC2Unroll of NumPy arrays
    """

    def __init__(self, environments, model, argument_mask, seed=0):
        self.environments = list(environments)
        self.model = model
        self.argument_mask = np.asarray(argument_mask, np.float32)
        self.rng = np.random.default_rng(seed)
        self._trunk = model.get_layer("sc2_trunk")
        self._heads = model.get_layer("sc2_argument_heads")
        self._timesteps = [env.reset() for env in self.environments]
        self._state = tuple(np.asarray(s) for s in initial_state(model, len(self.environments)))
        self._returns = np.zeros(len(self.environments))
        self.episodes = EpisodeReturns()  # the finished episodes: count and recent returns

    def get_state(self):
        """The actor's state for a checkpoint (picklable): see the module docstring."""
        state = dict(rng=self.rng.bit_generator.state, episodes=self.episodes.get_state(),
                     environments=environment_states(self.environments))
        if state["environments"] is not None:
            state.update(timesteps=list(self._timesteps), core_state=self._state,
                         returns=self._returns.copy())
        return state

    def set_state(self, state):
        """Restores :meth:`get_state`'s ``state``. Returns whether the environments were
        restored too (False: they continue from their fresh episodes; the sampling and the
        episode returns are restored either way)."""
        self.rng.bit_generator.state = state["rng"]
        self.episodes.set_state(state["episodes"])
        if not restore_environments(self.environments, state["environments"]):
            return False
        self._timesteps = list(state["timesteps"])
        self._state = tuple(np.asarray(s) for s in state["core_state"])
        self._returns = np.array(state["returns"], np.float64)
        return True

    def _observation(self):
        return {key: np.stack([np.asarray(ts.observation[key]) for ts in self._timesteps])
                for key in self._timesteps[0].observation}

    def act(self, observation, step_type):
        """Samples composite actions at ``observation`` (a batched dict) and advances the
        state: ``(action dict of int32 [B], behaviour log-probability [B])``."""
        keep = (np.asarray(step_type) != FIRST).astype(np.float32)[:, None, None, None]
        h, c = (s * keep for s in self._state)
        inputs = {key: observation[key] for key in self._trunk.input if key in observation}
        out = self._trunk(dict(inputs, state_h=h, state_c=c))
        self._state = (np.asarray(out["state_h"]), np.asarray(out["state_c"]))
        function = sample(out["function_logits"], self.rng)
        args = self._heads({"shared": out["shared"], "spatial": out["spatial"],
                            "function_id": keras.ops.convert_to_tensor(function)})
        action = {"function": function}
        action.update({name: sample(logits, self.rng) for name, logits in args.items()})
        args["function_logits"] = out["function_logits"]
        log_prob, _ = composite_log_prob_and_entropy(args, action, self.argument_mask)
        return action, np.asarray(keras.ops.convert_to_numpy(log_prob), np.float32)

    def collect(self, unroll_length):
        """The next ``unroll_length`` transitions of every environment, as an
        :class:`SC2Unroll` of NumPy arrays (consecutive unrolls overlap by one step)."""
        state = self._state
        observations, step_types, actions, log_probs, rewards, discounts = ([] for _ in range(6))
        for _ in range(unroll_length):
            observation = self._observation()
            step_type = np.array([int(ts.step_type) for ts in self._timesteps], np.int32)
            action, log_prob = self.act(observation, step_type)
            following = [env.step({key: value[i] for key, value in action.items()})
                         for i, env in enumerate(self.environments)]
            # After a LAST step the environment starts a new episode (reward None): that
            # transition is masked out by the learner, its reward and discount are fillers.
            reward = np.array([ts.reward or 0.0 for ts in following], np.float32)
            discount = np.array([1.0 if ts.discount is None else ts.discount
                                 for ts in following], np.float32)
            for i, ts in enumerate(following):
                self._returns[i] = 0.0 if ts.first() else self._returns[i] + reward[i]
                if ts.last():
                    self.episodes.add(self._returns[i])
            observations.append(observation)
            step_types.append(step_type)
            actions.append(action)
            log_probs.append(log_prob)
            rewards.append(reward)
            discounts.append(discount)
            self._timesteps = following
        observations.append(self._observation())
        step_types.append(np.array([int(ts.step_type) for ts in self._timesteps], np.int32))
        return SC2Unroll(
            {key: np.stack([o[key] for o in observations]) for key in observations[0]},
            np.stack(step_types), state,
            {key: np.stack([a[key] for a in actions]) for key in actions[0]},
            np.stack(log_probs), np.stack(rewards), np.stack(discounts))
