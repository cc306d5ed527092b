"""Evaluation on fresh levels: the sampling policy plays one episode per level, compiled.

Levels come from banks drawn by the NumPy generator with an evaluation seed, so every run
evaluates on the same levels, none of them a training level (different seeds). ``num_envs``
levels are played together; each slot's first episode counts, and the batch runs until every
slot finished it (``max_steps`` actions and the reset step at most).
"""

import math

import keras
import numpy as np

from keras_relational import validation
from keras_relational.agents.compiled import acting, backend
from keras_relational.agents.compiled.learning import LAST

# Steps of one evaluation batch when the environment has no step limit.
UNLIMITED_EPISODE_STEPS = 1000


class Evaluator:
    """Plays ``num_episodes`` fresh levels of ``environment`` with the sampling policy.

    Args:
        environment: a tensor BoxWorld (its levels: the evaluation config's).
        model: the agent network.
        num_envs: levels played together (at most ``num_episodes``).
        seed: the sampling seed of every evaluation (each starts from it, so an evaluation
            depends on the weights only, and never changes the training loop's seed).
    """

    def __init__(self, environment, model, num_envs, seed):
        self.environment = environment
        self.model = model
        self.num_envs = num_envs
        self.seed_generator = keras.random.SeedGenerator(seed)
        max_steps = environment.config.max_steps
        self.steps = (UNLIMITED_EPISODE_STEPS if max_steps is None else max_steps) + 1
        self._play = backend.compile_function(self._play_fn, donate_state=False)

    def _play_fn(self, params, seed, bank):
        env_state, timestep = self.environment.reset(bank, self.num_envs)
        zeros = keras.ops.zeros((self.num_envs,), "float32")

        def env_step(carry, _):
            env_state, timestep, seed, episode_return, done, solved = carry
            actions, _, seed = acting.act(self.model, params, timestep.observation,
                                          self.seed_generator, seed)
            env_state, timestep = self.environment.step(env_state, actions, bank)
            playing = done == 0.0
            episode_return = episode_return + keras.ops.where(playing, timestep.reward, 0.0)
            ends = keras.ops.logical_and(playing, timestep.step_type == LAST)
            solved = keras.ops.where(ends, keras.ops.cast(env_state["solved"], "float32"),
                                     solved)
            done = keras.ops.where(ends, 1.0, done)
            return (env_state, timestep, seed, episode_return, done, solved), None

        carry = (env_state, timestep, seed, zeros, zeros, zeros)
        carry, _ = backend.scan(env_step, carry, self.steps)
        return carry[2], carry[3], carry[4], carry[5]

    def __call__(self, params, num_episodes, level_seed):
        """``(solved bool [num_episodes], returns float [num_episodes])`` on levels drawn with
        ``level_seed``; ``params`` is the ``(trainable, non_trainable)`` pair of value lists."""
        seed = keras.ops.copy(self.seed_generator.state.value)
        solved, returns = [], []
        for batch in range(math.ceil(num_episodes / self.num_envs)):
            bank = self.environment.level_bank(
                self.num_envs, validation.offset_seed("level_seed", level_seed, batch))
            seed, batch_returns, done, batch_solved = self._play(params, seed, bank)
            if not np.all(keras.ops.convert_to_numpy(done)):
                raise RuntimeError(f"An evaluation episode did not end in {self.steps} steps.")
            solved.append(keras.ops.convert_to_numpy(batch_solved) > 0.5)
            returns.append(keras.ops.convert_to_numpy(batch_returns))
        return np.concatenate(solved)[:num_episodes], np.concatenate(returns)[:num_episodes]
