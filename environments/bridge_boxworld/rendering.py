"""Bridge BoxWorld observations as pure functions of a state: RGB frames and one-hot cells.

A frame is the board plus an inventory column on the right (Clift et al. 2020, Sec. 3, Fig. 3),
one pixel per tile, in the colours of the authors' code [C]. The one-hot encoding [A] tells keys
from locks (a coloured tile is a lock when its left neighbour is coloured, gem locks included);
held keys use their key channel in the inventory column. Each function has a batched form
(`*_frames`, N levels of flat grids) and a single-level form (`render_*`) that calls it.
"""

import numpy as np

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
)


def colour_tables(config, colors):
    """uint8 `[N, num_colors + 3, 3]` per-level colours: 0 floor, 1 gem, 1 + k abstract colour k
    (palette colour `colors[i][k - 1]`), last the empty inventory slot."""
    colors = np.asarray(colors)
    table = np.empty((len(colors), config.num_colors + 3, 3), np.uint8)
    table[:, 0], table[:, 1], table[:, -1] = FLOOR_RGB, GEM_RGB, EMPTY_SLOT_RGB
    table[:, 2:-1] = config.palette[colors]
    return table


def rgb_frames(config, tables, grids, positions, inventories):
    """uint8 `[N, rows, cols + 1, 3]` frames of N states.

    Args:
      config: the `BridgeConfig`.
      tables: uint8 `[N, num_colors + 3, 3]` from `colour_tables`.
      grids: int `[N, rows * cols]` abstract tile codes.
      positions: int `[N]` flat index of each player.
      inventories: int `[N, rows]` held abstract colours, padded with EMPTY.
    """
    rows, cols = config.rows, config.cols
    n, width = tables.shape[:2]
    table = tables.reshape(-1, 3)
    offset = (np.arange(n) * width)[:, None]
    frames = np.empty((n, rows, cols + 1, 3), np.uint8)
    board = table.take(grids + (offset + 1), axis=0)
    board[np.arange(n), positions] = PLAYER_RGB
    frames[:, :, :cols] = board.reshape(n, rows, cols, 3)
    slots = np.where(inventories == EMPTY, width - 1, inventories + 1)
    frames[:, :, cols] = table.take(slots + offset, axis=0)
    return frames


def one_hot_frames(config, colors, grids, positions, inventories):
    """float32 `[N, rows, cols + 1, 4 + 2 * num_colors]` one-hot cells of N states.

    `colors` is int `[N, num_colors]`, each level's colour permutation; the other arguments are
    those of `rgb_frames`.
    """
    n, rows, cols = len(grids), config.rows, config.cols
    colors = np.asarray(colors)
    codes = grids.reshape(n, rows, cols)
    palette = np.take_along_axis(colors, (np.maximum(codes, 1) - 1).reshape(n, -1),
                                 axis=1).reshape(codes.shape)
    is_lock = np.zeros(codes.shape, bool)
    is_lock[:, :, 1:] = codes[:, :, :-1] != EMPTY
    channel = np.where(codes == EMPTY, CHANNEL_FLOOR, np.where(
        codes == GEM, CHANNEL_GEM, CHANNEL_KEY0 + palette + config.num_colors * is_lock))
    py, px = np.divmod(positions, cols)
    channel[np.arange(n), py, px] = CHANNEL_PLAYER
    held = np.take_along_axis(colors, np.maximum(inventories - 1, 0), axis=1)
    slots = np.where(inventories == EMPTY, CHANNEL_SLOT, np.where(
        inventories == GEM, CHANNEL_GEM, CHANNEL_KEY0 + held))
    channel = np.concatenate([channel, slots[:, :, None]], axis=2)
    return np.eye(config.num_channels, dtype=np.float32)[channel]


def _one_state(config, grid, pos, inventory):
    rows = config.rows
    grids = np.asarray(grid, np.intp).reshape(1, rows * config.cols)
    inventories = np.full((1, rows), EMPTY, np.intp)
    held = list(inventory[:rows])
    inventories[0, :len(held)] = held
    return grids, np.array([pos]), inventories


def render_rgb(config, level, grid, pos, inventory):
    """Pure rendering of a state: uint8 `[rows, cols + 1, 3]` (board, player, inventory column).

    Args:
      config: the `BridgeConfig`; level: the `BridgeLevel` (for its colours).
      grid: `[rows, cols]` (or flat) abstract tile codes.
      pos: the player's flat index; inventory: held abstract colours.
    """
    tables = colour_tables(config, [level.colors])
    return rgb_frames(config, tables, *_one_state(config, grid, pos, inventory))[0]


def render_one_hot(config, level, grid, pos, inventory):
    """Pure one-hot rendering [A]: float32 `[rows, cols + 1, 4 + 2 * num_colors]`."""
    return one_hot_frames(config, [level.colors], *_one_state(config, grid, pos, inventory))[0]
