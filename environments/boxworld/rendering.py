"""BoxWorld observations as pure functions of a state: RGB frames and one-hot cells.

One pixel per cell (Zambaldi et al. 2019, Sec. 3.1); the held key is drawn at the top-left wall
pixel [R]. The one-hot encoding [A] gives key k and lock k different channels, so the key-lock
correspondence is not visible and must be learned (Zambaldi et al. 2019, Sec. 3.1, attention
analysis).

Both encodings look up one table (`BoxWorldConfig.rgb_table`, `.one_hot_table`) with the
*display codes* of a state: its cell codes, with the agent's cell shown as `config.agent_code`
and the top-left wall pixel as the held key's code. The display codes have a batched form
(`display_codes`, N levels of flat grids, used by `*_frames`) and a single-level form on a flat
list (`display_codes_one`, used by `render_*`: the single environment renders every step, where
NumPy's per-call cost would dominate).
"""

import numpy as np

from .config import KEY0


def display_codes(config, grids, positions, held):
    """int `[N, F * F]` display codes of N states.

    Args:
      config: the `BoxWorldConfig`.
      grids: int `[N, F * F]` flat cell codes.
      positions: int `[N]` flat index of each agent.
      held: int `[N]` palette colour of each held key, -1 for none.
    """
    codes = np.array(grids, np.intp)
    codes[np.arange(len(codes)), positions] = config.agent_code
    held = np.asarray(held)
    codes[:, 0] = np.where(held >= 0, KEY0 + held, codes[:, 0])
    return codes


def rgb_frames(config, grids, positions, held):
    """uint8 `[N, F * F, 3]` frames of N states (arguments of `display_codes`)."""
    return config.rgb_table[display_codes(config, grids, positions, held)]


def one_hot_frames(config, grids, positions, held):
    """float32 `[N, F, F, 4 + 2 * num_colors]` one-hot cells of N states (as `display_codes`).

    The agent's cell has only the agent channel; the held key uses its key channel at (0, 0).
    """
    size = config.frame_size
    codes = display_codes(config, grids, positions, held)
    return config.one_hot_table[codes].reshape(len(codes), size, size, -1)


def display_codes_one(config, grid, agent, held):
    """The display codes of one state, a flat list (`grid`: `[F, F]` or flat cell codes)."""
    size = config.frame_size
    codes = np.asarray(grid).reshape(-1).tolist() if hasattr(grid, "reshape") else list(grid)
    codes[agent[0] * size + agent[1]] = config.agent_code
    if held >= 0:
        codes[0] = KEY0 + held
    return codes


def render_rgb(config, grid, agent, held):
    """Pure rendering of a state: uint8 `[F, F, 3]` frame.

    Args:
      config: the `BoxWorldConfig`.
      grid: `[F, F]` (or flat) cell codes.
      agent: the agent's cell (row, col).
      held: palette colour of the held key, or -1.
    """
    size = config.frame_size
    return config.rgb_table[display_codes_one(config, grid, agent, held)].reshape(size, size, 3)


def render_one_hot(config, grid, agent, held):
    """Pure one-hot rendering of a state: float32 `[F, F, 4 + 2 * num_colors]` [A]."""
    size = config.frame_size
    codes = display_codes_one(config, grid, agent, held)
    return config.one_hot_table[codes].reshape(size, size, -1)
