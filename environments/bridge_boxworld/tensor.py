"""`TensorBridgeBoxWorld`: bridge BoxWorld (Clift et al. 2020, Sec. 3) in `keras.ops` functions.

The rules of `rules.apply_moves`, the rewards of `BatchedBridgeBoxWorld.step` and the rendering of
`rendering.rgb_frames` / `one_hot_frames` over N levels in tensor ops, under any Keras backend and
inside `jax.jit` or `tf.function(jit_compile=True)`. The contract (`reset`, `step`, level banks,
state, timestep) is `tensor_base`'s; this module adds the bridge state and bank.

Bank, `[M]` levels: `"grid"` int8 `[M, rows * cols]` abstract tile codes (-1 empty, 0 gem,
1..2L colours), `"bridge"` int32 `[M]` (flat cell of the bridge's lock, -1 for none), `"colors"`
int32 `[M, num_colors]` (abstract colour k is palette colour `colors[k - 1]`). State entries
besides the base's: `"grid"` int32 `[N, rows * cols]`, `"pos"` int32 `[N]`, `"inventory"` int32
`[N, rows]` (held abstract colours in acquisition order, padded with -1), `"inventory_size"`
int32 `[N]`, `"bridge"` int32 `[N]`, `"colors"` int32 `[N, num_colors]`.

Example:

```python
import numpy as np
from keras_relational.environments import TensorBridgeBoxWorld

env = TensorBridgeBoxWorld(solution_length=(1, 2))
bank = env.level_bank(64, seed=0)
state, timestep = env.reset(bank, num_envs=8)          # observation: uint8 [8, 7, 10, 3]
state, timestep = env.step(state, np.full(8, 1, np.int32), bank)   # everyone moves down
```
"""

import numpy as np
from keras import ops

from keras_relational.validation import invalid_value

from ..level_banks import DEFAULT_LEVEL_SOURCE
from ..tensor_base import TensorLevelEnvironment
from ..tensor_ops import gather_cells, row_select, set_cells
from .config import (
    CHANNEL_FLOOR,
    CHANNEL_GEM,
    CHANNEL_KEY0,
    CHANNEL_PLAYER,
    CHANNEL_SLOT,
    EMPTY,
    EMPTY_SLOT_RGB,
    FLOOR_RGB,
    GEM,
    GEM_RGB,
    PLAYER_RGB,
    REWARD_BRIDGE,
    REWARD_GEM,
    REWARD_KEY,
    BridgeConfig,
)
from .generator import generate_level
from .rules import MOVES


class TensorBridgeBoxWorld(TensorLevelEnvironment):
    """Bridge BoxWorld (Clift et al. 2020) in `keras.ops`: batched pure `reset` / `step`.

    Plays exactly like `BatchedBridgeBoxWorld` given the same levels and actions. See
    `keras_relational.environments.tensor_base` for the contract.

    Example:

    ```python
    env = TensorBridgeBoxWorld(max_steps=120, observation_type="one_hot")
    bank = env.level_bank(512, seed=0)
    state, timestep = env.reset(bank, num_envs=128)   # observation float32 [128, 7, 10, 44]
    ```

    Args:
      config: a `BridgeConfig`; or leave it None and pass its fields as keyword arguments
        (`solution_length`, `bridge_probability`, `puzzle_type`, ..., `observation_type`), the
        arguments of `BridgeBoxWorld` but `seed`.
      level_source: where `level_bank` draws levels: "numpy" (the NumPy generator on the host,
        the default) or "device" (the same distribution in `keras.ops`: `tensor_levels`; also
        the pure `sample_levels`). See docs/rl.md for which is faster where.
    """

    def __init__(self, config=None, level_source=DEFAULT_LEVEL_SOURCE, **kwargs):
        if config is None:
            config = BridgeConfig(**kwargs)
        elif kwargs or not isinstance(config, BridgeConfig):
            raise invalid_value("config", "a BridgeConfig without other keyword arguments, "
                                "or None", type(config).__name__ if not kwargs else sorted(kwargs))
        super().__init__(config, level_source)
        self._rows, self._cols = config.rows, config.cols
        self._cells = config.rows * config.cols
        colors = config.num_colors
        # Display codes [C colours]: 0 floor, 1 gem, 2 + p palette colour p, then the empty
        # inventory slot and the player.
        self._slot_code, self._player_code = 2 + colors, 3 + colors
        self._rgb_table = np.concatenate([
            np.array([FLOOR_RGB, GEM_RGB], np.uint8), config.palette,
            np.array([EMPTY_SLOT_RGB, PLAYER_RGB], np.uint8)])
        self._eye = np.eye(config.num_channels, dtype=np.float32)
        self._moves = np.array(MOVES, np.int32)

    def _level_sampler(self):
        from .tensor_levels import BridgeLevelSampler

        return BridgeLevelSampler(self._config)

    def _generate(self, draws):
        return generate_level(self._config, draws)

    def bank_from_levels(self, levels):
        """The bank of a sequence of `BridgeLevel`s (e.g. from `generate_levels`)."""
        levels = list(levels)
        if not levels:
            raise invalid_value("levels", "at least one BridgeLevel", levels)
        grid = np.stack([level.grid.reshape(-1) for level in levels]).astype(np.int8)
        if grid.shape[1] != self._cells:
            raise invalid_value("levels", f"levels of {self._rows} x {self._cols} boards",
                                f"{grid.shape[1]} cells")
        bridge = np.array([-1 if level.bridge_cell is None else
                           level.bridge_cell[0] * self._cols + level.bridge_cell[1]
                           for level in levels], np.int32)
        colors = np.array([level.colors for level in levels], np.int32)
        return {"grid": grid, "bridge": bridge, "colors": colors}

    def _bank_shapes(self):
        return {"grid": (self._cells,), "bridge": (), "colors": (self._config.num_colors,)}

    def _load(self, bank, index):
        def take(name):
            return ops.cast(ops.take(ops.convert_to_tensor(bank[name]), index, axis=0), "int32")

        n = index.shape[0]
        return {
            "grid": take("grid"),
            "pos": ops.zeros((n,), "int32"),  # [C] the player starts at the top-left corner
            "inventory": ops.full((n, self._rows), EMPTY, "int32"),
            "inventory_size": ops.zeros((n,), "int32"),
            "bridge": take("bridge"),
            "colors": take("colors"),
        }

    def _move(self, state, actions, active):
        # rules.apply_moves in tensor form [C].
        grid, inventory, size, pos = (state["grid"], state["inventory"], state["inventory_size"],
                                      state["pos"])
        rows, cols, cells = self._rows, self._cols, self._cells
        move = ops.take(ops.convert_to_tensor(self._moves), actions, axis=0)
        y = ops.clip(pos // cols + move[:, 0], 0, rows - 1)  # off-board moves are clamped
        x = ops.clip(pos % cols + move[:, 1], 0, cols - 1)
        target = y * cols + x

        def cell(index, valid=None):
            values = gather_cells(grid, ops.clip(index, 0, cells - 1))
            return values if valid is None else ops.where(valid, values, EMPTY)

        code = cell(target)
        left = cell(target - 1, x > 0)
        right = cell(target + 1, x < cols - 1)
        above = cell(target - cols, y > 0)
        blank = code == EMPTY
        # A gem lock: the other lock is below if the cell above is blank, else above.
        other = ops.where(above == EMPTY, target + cols, target - cols)
        other_code = cell(other)

        def has(colours):
            return ops.any(inventory == ops.expand_dims(colours, 1), axis=1)

        gem_open = active & ~blank & (left == GEM) & has(code) & has(other_code)
        lock_open = active & ~blank & (left != EMPTY) & (left != GEM) & has(code)
        pick = active & ~blank & (left == EMPTY) & (right == EMPTY)
        moved = (active & blank) | gem_open | lock_open | pick

        inventory, size = _remove(inventory, size, gem_open | lock_open, code)
        inventory, size = _remove(inventory, size, gem_open, other_code)
        inventory, size = _append(inventory, size, gem_open, ops.zeros_like(code) + GEM)
        inventory, size = _append(inventory, size, lock_open, left)
        inventory, size = _append(inventory, size, pick, code)
        for mask, index in ((gem_open | lock_open | pick, target), (gem_open, other),
                            (gem_open | lock_open, target - 1), (gem_open, other - 1)):
            grid = set_cells(grid, mask, index, EMPTY)
        pos = ops.cast(ops.where(moved, target, pos), "int32")
        # [C] Rewards after the move: gem +10, bridge -1, any other inventory change +1.
        opened_bridge = lock_open & (pos == state["bridge"])
        reward = ops.where(gem_open, REWARD_GEM, ops.where(
            opened_bridge, REWARD_BRIDGE, ops.where(lock_open | pick, REWARD_KEY, 0.0)))
        new = dict(grid=grid, pos=pos, inventory=inventory, inventory_size=size,
                   bridge=state["bridge"], colors=state["colors"])
        return new, reward, gem_open | opened_bridge, gem_open

    def _observe(self, state):
        grid, pos, inventory, colors = (state["grid"], state["pos"], state["inventory"],
                                        state["colors"])
        n, rows, cols = grid.shape[0], self._rows, self._cols
        num_colors = self._config.num_colors
        palette = ops.take_along_axis(colors, ops.maximum(grid, 1) - 1, axis=1)
        held = ops.take_along_axis(colors, ops.maximum(inventory, 1) - 1, axis=1)
        player = ops.arange(self._cells, dtype="int32")[None, :] == ops.expand_dims(pos, 1)
        if self._config.observation_type == "rgb":
            # rendering.rgb_frames: keys and locks share their colour.
            board = ops.where(grid == EMPTY, 0, ops.where(grid == GEM, 1, 2 + palette))
            slots = ops.where(inventory == EMPTY, self._slot_code,
                              ops.where(inventory == GEM, 1, 2 + held))
            table, player_code = self._rgb_table, self._player_code
        else:
            # rendering.one_hot_frames [A]: a coloured tile is a lock when its left neighbour
            # is coloured.
            codes = ops.reshape(grid, (n, rows, cols))
            is_lock = ops.concatenate([ops.zeros((n, rows, 1), "bool"),
                                       codes[:, :, :-1] != EMPTY], axis=2)
            board = ops.where(grid == EMPTY, CHANNEL_FLOOR, ops.where(
                grid == GEM, CHANNEL_GEM, CHANNEL_KEY0 + palette + num_colors * ops.cast(
                    ops.reshape(is_lock, (n, -1)), "int32")))
            slots = ops.where(inventory == EMPTY, CHANNEL_SLOT, ops.where(
                inventory == GEM, CHANNEL_GEM, CHANNEL_KEY0 + held))
            table, player_code = self._eye, CHANNEL_PLAYER
        board = ops.where(player, player_code, board)
        codes = ops.concatenate([ops.reshape(board, (n, rows, cols)),
                                 ops.expand_dims(slots, 2)], axis=2)
        return ops.take(ops.convert_to_tensor(table), ops.cast(codes, "int32"), axis=0)


def _remove(inventory, size, mask, colours):
    """Removes the first occurrence of `colours[i]` from the inventory of the rows `mask`."""
    match = inventory == ops.expand_dims(colours, 1)
    first = ops.argmax(ops.cast(match, "int32"), axis=1)  # 0 when absent, as NumPy's argmax
    slots = ops.arange(inventory.shape[1], dtype="int32")[None, :]
    shifted = ops.concatenate([inventory[:, 1:], ops.full_like(inventory[:, :1], EMPTY)], axis=1)
    removed = ops.where(slots < ops.expand_dims(ops.cast(first, "int32"), 1), inventory, shifted)
    return row_select(mask, removed, inventory), size - ops.cast(mask, "int32")


def _append(inventory, size, mask, colours):
    """Appends `colours[i]` to the inventory of the rows `mask`."""
    return (set_cells(inventory, mask, size, colours), size + ops.cast(mask, "int32"))
