"""`TensorBoxWorld`: Box-World (Zambaldi et al. 2019, Sec. 3.1) as pure `keras.ops` functions.

The rules of `rules.apply_moves` and the rendering of `rendering.rgb_frames` /
`one_hot_frames` over N levels, in tensor ops, under any Keras backend and inside `jax.jit` or
`tf.function(jit_compile=True)`. The contract (`reset`, `step`, level banks, state, timestep) is
`tensor_base`'s; this module adds the Box-World state and bank.

Bank (`level_bank`, `bank_from_levels`), `[M]` levels: `"grid"` uint8 `[M, F * F]` flat cell codes,
`"distractor"` bool `[M, F * F]` (True at the distractor boxes' locks), `"agent"` int32 `[M]` (the
agent's flat start cell). State entries besides the base's: `"grid"` int32 `[N, F * F]`,
`"distractor"` bool `[N, F * F]`, `"pos"` int32 `[N]` (flat agent cell), `"held"` int32 `[N]`
(palette colour of the held key, -1 for none).

Example:

```python
import numpy as np
from keras_relational.environments import TensorBoxWorld

env = TensorBoxWorld(goal_length=(1, 2), num_distractors=(0, 1), observation_type="rgb")
bank = env.level_bank(64, seed=0)
state, timestep = env.reset(bank, num_envs=8)          # observation: uint8 [8, 14, 14, 3]
state, timestep = env.step(state, np.full(8, 3, np.int32), bank)   # everyone moves right
```
"""

import numpy as np
from keras import ops

from keras_relational.validation import invalid_value

from ..level_banks import DEFAULT_LEVEL_SOURCE
from ..tensor_base import TensorLevelEnvironment
from ..tensor_ops import gather_cells, set_cells
from .config import (
    FLOOR,
    GEM,
    KEY0,
    REWARD_DISTRACTOR_BOX,
    REWARD_GEM,
    REWARD_PATH_BOX,
    BoxWorldConfig,
)
from .generator import generate_level
from .presets import PRESETS


class TensorBoxWorld(TensorLevelEnvironment):
    """Box-World (Zambaldi et al. 2019) in `keras.ops`: batched pure `reset` / `step`.

    Plays exactly like `BatchedBoxWorld` given the same levels and actions (identical
    observations, rewards, discounts, step types, truncation and auto-reset). See
    `keras_relational.environments.tensor_base` for the contract.

    Example:

    ```python
    import jax
    env = TensorBoxWorld(observation_type="one_hot")
    bank = env.level_bank(1024, seed=0)
    state, timestep = env.reset(bank, num_envs=256)   # observation float32 [256, 14, 14, 44]
    step = jax.jit(env.step)                           # under KERAS_BACKEND=jax
    state, timestep = step(state, jax.numpy.zeros(256, "int32"), bank)
    ```

    Args:
      config: a `BoxWorldConfig`; or leave it None and pass its fields as keyword arguments
        (`goal_length`, `num_distractors`, ..., `max_steps`, `observation_type`), the arguments of
        `BoxWorld` but `seed` (levels come from banks).
      level_source: where `level_bank` draws levels: "numpy" (the NumPy generator on the host,
        the default) or "device" (the same distribution in `keras.ops`: `tensor_levels`; also
        the pure `sample_levels`). See docs/rl.md for which is faster where.
    """

    def __init__(self, config=None, level_source=DEFAULT_LEVEL_SOURCE, **kwargs):
        if config is None:
            config = BoxWorldConfig(**kwargs)
        elif kwargs or not isinstance(config, BoxWorldConfig):
            raise invalid_value("config", "a BoxWorldConfig without other keyword arguments, "
                                "or None", type(config).__name__ if not kwargs else sorted(kwargs))
        super().__init__(config, level_source)
        self._size = config.frame_size
        self._cells = self._size * self._size
        self._lock0 = config.lock0
        self._agent_code = config.agent_code
        self._deltas = np.array(config.deltas, np.int32)
        if config.observation_type == "rgb":
            self._table = config.rgb_table
        else:
            self._table = config.one_hot_table

    @classmethod
    def from_preset(cls, name, **overrides):
        """A TensorBoxWorld with the parameters of `PRESETS[name]`, updated by `overrides`."""
        if name not in PRESETS:
            raise invalid_value("name", f"one of {sorted(PRESETS)}", name)
        return cls(**{**PRESETS[name], **overrides})

    def _level_sampler(self):
        from .tensor_levels import BoxWorldLevelSampler

        return BoxWorldLevelSampler(self._config)

    def _generate(self, draws):
        return generate_level(self._config, draws)

    def bank_from_levels(self, levels):
        """The bank of a sequence of `BoxWorldLevel`s (e.g. from `generate_levels`)."""
        size = self._size
        levels = list(levels)
        if not levels:
            raise invalid_value("levels", "at least one BoxWorldLevel", levels)
        grid = np.stack([level.grid.reshape(-1) for level in levels]).astype(np.uint8)
        if grid.shape[1] != self._cells:
            raise invalid_value("levels", f"levels of {size} x {size} frames",
                                f"{grid.shape[1]} cells")
        distractor = np.zeros(grid.shape, bool)
        for i, level in enumerate(levels):
            for branch in level.distractors:
                for box in branch:
                    distractor[i, box.row * size + box.col + 1] = True
        agent = np.array([level.agent[0] * size + level.agent[1] for level in levels], np.int32)
        return {"grid": grid, "distractor": distractor, "agent": agent}

    def _bank_shapes(self):
        return {"grid": (self._cells,), "distractor": (self._cells,), "agent": ()}

    def _load(self, bank, index):
        return {
            "grid": ops.cast(ops.take(ops.convert_to_tensor(bank["grid"]), index, axis=0),
                             "int32"),
            "distractor": ops.cast(ops.take(ops.convert_to_tensor(bank["distractor"]), index,
                                            axis=0), "bool"),
            "pos": ops.cast(ops.take(ops.convert_to_tensor(bank["agent"]), index, axis=0),
                            "int32"),
            "held": ops.full(index.shape, -1, "int32"),
        }

    def _move(self, state, actions, active):
        # rules.apply_moves in tensor form (Zambaldi et al. 2019, Sec. 3.1).
        grid, held, pos = state["grid"], state["held"], state["pos"]
        lock0 = self._lock0
        target = pos + ops.take(ops.convert_to_tensor(self._deltas), actions, axis=0)
        code = gather_cells(grid, target)
        right = gather_cells(grid, target + 1)
        is_lock = code >= lock0
        opens = active & is_lock & (code - lock0 == held)
        # Keys and the gem are free unless a lock is still to their right.
        free = active & ~is_lock & (code >= GEM) & (right < lock0)
        gem = free & (code == GEM)
        key = free & ~gem
        moved = (active & (code == FLOOR)) | opens | free
        distractor_box = opens & gather_cells(state["distractor"], target)
        reward = (ops.cast(opens, "float32") * ops.where(
            distractor_box, REWARD_DISTRACTOR_BOX, REWARD_PATH_BOX)
            + ops.cast(gem, "float32") * REWARD_GEM)
        new = dict(
            grid=set_cells(grid, opens | free, target, FLOOR),
            distractor=state["distractor"],
            pos=ops.where(moved, target, pos),
            held=ops.where(opens, -1, ops.where(key, code - KEY0, held)))
        new["held"] = ops.cast(new["held"], "int32")
        new["pos"] = ops.cast(new["pos"], "int32")
        return new, reward, gem | distractor_box, gem

    def _observe(self, state):
        # rendering.display_codes: the agent's cell shows the agent, the top-left wall pixel
        # the held key [R].
        grid, pos, held = state["grid"], state["pos"], state["held"]
        cells = ops.arange(self._cells, dtype="int32")[None, :]
        codes = ops.where(cells == ops.expand_dims(pos, 1), self._agent_code, grid)
        held = ops.expand_dims(held, 1)
        codes = ops.cast(ops.where((cells == 0) & (held >= 0), KEY0 + held, codes), "int32")
        frames = ops.take(ops.convert_to_tensor(self._table), codes, axis=0)
        return ops.reshape(frames, (-1, self._size, self._size, self._table.shape[-1]))
