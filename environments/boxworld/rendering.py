"""BoxWorld observations as pure functions of a state: RGB frames and one-hot cells.

One pixel per cell (Zambaldi et al. 2019, Sec. 3.1); the held key is drawn at the top-left wall
pixel [R]. The one-hot encoding [A] gives key k and lock k different channels, so the key-lock
correspondence is not visible and must be learned (Zambaldi et al. 2019, Sec. 3.1, attention
analysis). Each function has a batched form (`*_frames`, N levels of flat grids) and a
single-level form (`render_*`) that calls it.
"""

import numpy as np

from .config import AGENT_RGB, CHANNEL_AGENT, CHANNEL_KEY0


def rgb_frames(config, grids, positions, held):
    """uint8 `[N, F * F, 3]` frames of N states.

    Args:
      config: the `BoxWorldConfig`.
      grids: int `[N, F * F]` flat cell codes.
      positions: int `[N]` flat index of each agent.
      held: int `[N]` palette colour of each held key, -1 for none.
    """
    frames = config.rgb_table[grids]
    frames[np.arange(len(frames)), positions] = AGENT_RGB
    frames[:, 0] = config.held_rgb_table[np.asarray(held) + 1]
    return frames


def one_hot_frames(config, grids, positions, held):
    """float32 `[N, F, F, 4 + 2 * num_colors]` one-hot cells of N states (arguments as above).

    The agent's cell has only the agent channel; the held key uses its key channel at (0, 0).
    """
    n, size = len(grids), config.frame_size
    rows = np.arange(n)
    frames = config.one_hot_table[grids]
    frames[rows, positions] = 0.0
    frames[rows, positions, CHANNEL_AGENT] = 1.0
    held = np.asarray(held)
    holding = np.flatnonzero(held >= 0)
    frames[holding, 0] = 0.0
    frames[holding, 0, CHANNEL_KEY0 + held[holding]] = 1.0
    return frames.reshape(n, size, size, -1)


def _one_state(config, grid, agent, held):
    size = config.frame_size
    grids = np.asarray(grid, np.intp).reshape(1, size * size)
    return grids, np.array([agent[0] * size + agent[1]]), np.array([held])


def render_rgb(config, grid, agent, held):
    """Pure rendering of a state: uint8 `[F, F, 3]` frame.

    Args:
      config: the `BoxWorldConfig`.
      grid: `[F, F]` (or flat) cell codes.
      agent: the agent's cell (row, col).
      held: palette colour of the held key, or -1.
    """
    size = config.frame_size
    return rgb_frames(config, *_one_state(config, grid, agent, held))[0].reshape(size, size, 3)


def render_one_hot(config, grid, agent, held):
    """Pure one-hot rendering of a state: float32 `[F, F, 4 + 2 * num_colors]` [A]."""
    return one_hot_frames(config, *_one_state(config, grid, agent, held))[0]
