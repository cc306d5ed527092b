"""Bridge BoxWorld constants and `BridgeConfig`, the validated parameters of its levels.

Tags: [P] stated in Clift et al. 2020 (Sec. 3, App. F.1.2); [C] taken from the authors' released
code; [A] our own choice.
"""

import dataclasses
import functools

import numpy as np
from dm_env import specs

from keras_relational.validation import (
    check_fraction,
    check_int_at_least,
    check_int_tuple,
    check_one_of,
    invalid_value,
)

from .. import rendering

# Abstract tile codes: EMPTY, GEM, and colours 1..2L (mapped to the palette per episode).
EMPTY = -1
GEM = 0

ROWS = 7  # Clift et al. 2020, Sec. 3 [P]
COLS = 9  # [P]
SOLUTION_LENGTHS = (1, 2, 3)  # [P] L ~ U{1, 2, 3}, both chains of length L
BRIDGE_PROBABILITY = 0.5  # [P, C]

REWARD_KEY = 1.0  # [P, C] any inventory change: loose key or opened box
REWARD_BRIDGE = -1.0  # [P, C]
REWARD_GEM = 10.0  # [P, C]

# Colours [C]: floor (199,199,199), player (127,127,127), gem white, empty inventory slot
# (10,10,10); the 20 key/lock colours are HSV(18k deg, 0.7, 0.8), channels round(255 c).
FLOOR_RGB = (199, 199, 199)
PLAYER_RGB = (127, 127, 127)
GEM_RGB = (255, 255, 255)
EMPTY_SLOT_RGB = (10, 10, 10)
COLOR_SATURATION = 0.7
COLOR_VALUE = 0.8
NUM_COLORS = 20  # [P]

# One-hot channels [A]: floor, player, gem, empty inventory slot, keys, locks.
CHANNEL_FLOOR, CHANNEL_PLAYER, CHANNEL_GEM, CHANNEL_SLOT, CHANNEL_KEY0 = 0, 1, 2, 3, 4


def puzzle_types(solution_lengths=SOLUTION_LENGTHS):
    """All puzzle types `(a, b, c)`, in a fixed order (the index is `BridgeLevel.puzzle_type_id`).

    `a` is the solution length; with a bridge, `b` in 1..a is its lock colour (top chain) and `c`
    in a+1..2a its key colour (bottom chain), colours counted from the gem (Clift et al. 2020,
    App. F.1.2). Levels without a bridge have type `(a, 0, 0)`.
    """
    types = []
    for a in sorted(set(solution_lengths)):
        types.append((a, 0, 0))
        types.extend((a, b, c) for b in range(1, a + 1) for c in range(a + 1, 2 * a + 1))
    return tuple(types)


@dataclasses.dataclass(frozen=True)
class BridgeConfig:
    """Validated bridge BoxWorld parameters (see `BridgeBoxWorld`)."""

    solution_length: tuple = SOLUTION_LENGTHS
    bridge_probability: float = BRIDGE_PROBABILITY
    puzzle_type: tuple | None = None
    rows: int = ROWS
    cols: int = COLS
    num_colors: int = NUM_COLORS
    max_steps: int | None = None
    time_limit_discount: float = 1.0
    observation_type: str = "rgb"

    def __post_init__(self):
        set_ = functools.partial(object.__setattr__, self)
        rows = check_int_at_least("rows", self.rows, 4)
        cols = check_int_at_least("cols", self.cols, 5)
        set_("rows", rows)
        set_("cols", cols)
        anchors = len(range(1, cols - 1, 3)) * len(range(1, rows, 2))
        if self.puzzle_type is not None:
            kind = tuple(self.puzzle_type)
            if (len(kind) != 3 or not all(isinstance(v, int | np.integer) for v in kind)
                    or kind[0] < 1 or not (kind[1:] == (0, 0) or (
                        1 <= kind[1] <= kind[0] < kind[2] <= 2 * kind[0]))):
                raise invalid_value("puzzle_type", "(a, b, c) with 1 <= b <= a < c <= 2a, or "
                                    "(a, 0, 0) for no bridge", self.puzzle_type)
            set_("puzzle_type", tuple(int(v) for v in kind))
            set_("solution_length", (kind[0],))
        lengths = check_int_tuple("solution_length", self.solution_length, 1)
        set_("solution_length", lengths)
        set_("bridge_probability", check_fraction("bridge_probability", self.bridge_probability))
        # 2L + 1 anchors (2L + 2 with a bridge) besides the one freed below the gem [C].
        bridge = self.bridge_probability > 0 and (
            self.puzzle_type is None or self.puzzle_type[1] > 0)
        needed = 2 * max(lengths) + 1 + bridge
        if needed > anchors - 1:
            raise invalid_value("solution_length",
                                f"at most {(anchors - 2 - bridge) // 2} on a {rows} x {cols} "
                                f"board ({anchors} box anchors)", self.solution_length)
        colors = check_int_at_least("num_colors", self.num_colors, 2)
        if colors < 2 * max(lengths):
            raise invalid_value("num_colors", f"at least {2 * max(lengths)} (2L distinct "
                                "colours)", self.num_colors)
        set_("num_colors", colors)
        if self.max_steps is not None:
            set_("max_steps", check_int_at_least("max_steps", self.max_steps, 1))
        set_("time_limit_discount",
             check_fraction("time_limit_discount", self.time_limit_discount))
        check_one_of("observation_type", self.observation_type, ("rgb", "one_hot"))

    @functools.cached_property
    def palette(self):
        return rendering.hsv_palette(self.num_colors, COLOR_SATURATION, COLOR_VALUE)

    @functools.cached_property
    def puzzle_types(self):
        return puzzle_types(self.solution_length)

    @property
    def num_channels(self):
        return CHANNEL_KEY0 + 2 * self.num_colors

    def observation_spec(self):
        shape = (self.rows, self.cols + 1)
        if self.observation_type == "rgb":
            return specs.BoundedArray(shape + (3,), np.uint8, 0, 255, name="observation")
        return specs.BoundedArray(shape + (self.num_channels,), np.float32, 0.0, 1.0,
                                  name="observation")
