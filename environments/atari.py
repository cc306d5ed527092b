"""Atari 2600 games as a dm_env environment, through the Arcade Learning Environment (ale-py).

The Atari agents of Shanahan et al. 2020 (Supplement S11) see full 210x160x3 RGB frames, act
with an action repeat of 4 and choose among the full set of 18 actions. ``ale-py`` (PyPI, 0.9 and
later) ships the game ROMs in its wheel, so ``pip install ale-py`` is all a game needs; it is an
optional dependency, imported when an environment is created.

Each ``step`` repeats the action ``action_repeat`` times and returns the summed reward; the
episode ends (``termination``) at game over and is cut (``truncation``) after
``max_episode_steps`` agent steps; the step after the last one starts a new episode, as dm_env
expects.

Example:

```python
from keras_relational.environments import atari

env = atari.AtariEnvironment("pong", seed=0)
timestep = env.reset()                # timestep.observation: uint8 [210, 160, 3]
timestep = env.step(0)                # NOOP, repeated 4 times
```
"""

import dm_env
import numpy as np
from dm_env import specs

from keras_relational import validation

ACTION_REPEAT = 4  # Shanahan et al. 2020, S11
NUM_FULL_ACTIONS = 18


def _ale_py():
    try:
        import ale_py
        import ale_py.roms  # noqa: F401  (the ROM registry is a submodule)
    except ImportError as error:
        raise ImportError("keras_relational.environments.atari needs ale-py, which is not "
                          "installed: `pip install ale-py` (its wheel ships the game ROMs).") \
            from error
    return ale_py


class AtariEnvironment(dm_env.Environment):
    """One Atari game as a ``dm_env.Environment`` (RGB frames, full or minimal action set).

    Args:
        game: an ale-py ROM id, e.g. ``"pong"``, ``"ms_pacman"`` (``ale_py.roms``).
        seed: seed of the emulator's randomness (sticky actions, no-op starts).
        action_repeat: emulator frames per agent step (4 in S11); rewards are summed.
        full_action_space: 18 actions (S11's policy head) or the game's minimal set.
        max_episode_steps: agent steps after which an episode is truncated (None: never).
        repeat_action_probability: ale-py's sticky actions (0 by default: deterministic).
    """

    def __init__(self, game="pong", seed=0, action_repeat=ACTION_REPEAT, full_action_space=True,
                 max_episode_steps=None, repeat_action_probability=0.0):
        validation.check_int_at_least("action_repeat", action_repeat, 1)
        if max_episode_steps is not None:
            validation.check_int_at_least("max_episode_steps", max_episode_steps, 1)
        validation.check_fraction("repeat_action_probability", repeat_action_probability)
        ale_py = _ale_py()
        if game not in ale_py.roms.get_all_rom_ids():
            raise validation.invalid_value("game", "an ale-py ROM id such as 'pong'", game)
        self.game = game
        self.action_repeat = action_repeat
        self.max_episode_steps = max_episode_steps
        self._ale = ale_py.ALEInterface()
        self._ale.setLoggerMode(ale_py.LoggerMode.Error)
        self._ale.setInt("random_seed", int(seed) % (2 ** 31))
        self._ale.setFloat("repeat_action_probability", float(repeat_action_probability))
        self._ale.loadROM(ale_py.roms.get_rom_path(game))
        self._actions = (self._ale.getLegalActionSet() if full_action_space
                         else self._ale.getMinimalActionSet())
        height, width = self._ale.getScreenDims()
        self._observation_spec = specs.BoundedArray((height, width, 3), np.uint8, 0, 255,
                                                    name="frame")
        self._action_spec = specs.DiscreteArray(len(self._actions), name="action")
        self._steps = 0
        self._needs_reset = True

    def observation_spec(self):
        return self._observation_spec

    def action_spec(self):
        return self._action_spec

    def reset(self):
        self._ale.reset_game()
        self._steps = 0
        self._needs_reset = False
        return dm_env.restart(self._ale.getScreenRGB())

    def step(self, action):
        if self._needs_reset:
            return self.reset()
        action = self._actions[int(action)]
        reward = 0.0
        for _ in range(self.action_repeat):
            reward += self._ale.act(action)
            if self._ale.game_over():
                break
        self._steps += 1
        frame = self._ale.getScreenRGB()
        if self._ale.game_over():
            self._needs_reset = True
            return dm_env.termination(reward, frame)
        if self.max_episode_steps is not None and self._steps >= self.max_episode_steps:
            self._needs_reset = True
            return dm_env.truncation(reward, frame)
        return dm_env.transition(reward, frame)
