"""BoxWorld constants and `BoxWorldConfig`, the validated parameters of a level distribution.

Tags: [P] stated in Zambaldi et al. 2019 (Sec. 3.1, App. A); [R] taken from DeepMind's
open-source pycolab Box-World, where the paper is silent; [A] our own choice.
"""

import dataclasses
import functools

import numpy as np
from dm_env import specs

from keras_relational.validation import (
    check_fraction,
    check_int_at_least,
    check_int_in_range,
    check_int_tuple,
    check_one_of,
    invalid_value,
)

from .. import rendering

# Cell codes of a level grid (uint8). The agent and the held key are not part of the grid.
FLOOR = 0
WALL = 1
GEM = 2
KEY0 = 3  # the key of palette colour c is KEY0 + c; its lock is KEY0 + num_colors + c
GEM_CONTENT = -1  # `Box.content` of the box that holds the gem

# Rewards and limits.
REWARD_PATH_BOX = 1.0  # Zambaldi et al. 2019, App. A [P]
REWARD_DISTRACTOR_BOX = -1.0  # [P]
REWARD_GEM = 10.0  # [P]
MAX_STEPS = 120  # [R] (the paper does not state a step limit)
MAX_PLACEMENT_FAILURES = 200  # [R] failed placement tries per level before it is discarded
MAX_LEVEL_ATTEMPTS = 200  # [R] discarded levels before generation gives up

# RGB colours [R] (0..1 scale in the reference): wall 0.0, floor 0.8, agent 0.5, gem 1.0; the
# key/lock colours are HSV(18k deg, 0.5, 0.7), k = 0..19. A key and its lock share a colour.
WALL_RGB = (0, 0, 0)
FLOOR_RGB = (204, 204, 204)
AGENT_RGB = (128, 128, 128)
GEM_RGB = (255, 255, 255)
COLOR_SATURATION = 0.5  # [R]
COLOR_VALUE = 0.7  # [R]

# One-hot observation channels [A]: floor, wall, agent, gem, num_colors keys, num_colors locks.
CHANNEL_FLOOR, CHANNEL_WALL, CHANNEL_AGENT, CHANNEL_GEM, CHANNEL_KEY0 = 0, 1, 2, 3, 4

# Held-out key-lock splits [A]; the paper does not say which combination was withheld.
DEFAULT_HELDOUT_COLORS = (0, 10)
DEFAULT_HELDOUT_PAIRS = ((0, 7), (5, 12), (10, 17), (15, 2))


def max_boxes(room_size):
    """An upper bound on the boxes that fit a room (items in every other row, 3 columns each)."""
    return ((room_size - 1) // 2) * ((room_size - 1) // 3)


def max_items(room_size):
    """An upper bound on the items (the loose key and the boxes) that fit a room.

    The loose key takes one cell where a box takes two, so the key's row may hold one item more
    than a row of boxes: a key and then a box every 3 columns ([R]'s 3 x 4 footprints).
    """
    width = room_size - 3  # anchor columns 2..room_size-2 of the frame
    boxes_per_row = -(-width // 3)
    key_row = 1 + max(0, -(-(width - 2) // 3))
    return max_boxes(room_size) + max(0, key_row - boxes_per_row)


@dataclasses.dataclass(frozen=True)
class BoxWorldConfig:
    """Validated BoxWorld parameters (see `BoxWorld` for their meaning)."""

    goal_length: tuple = (1, 2, 3, 4)
    num_distractors: tuple = (0, 1, 2, 3, 4)
    distractor_length: int = 1
    branching: str = "forward"
    room_size: int = 12
    num_colors: int = 20
    max_steps: int | None = MAX_STEPS
    time_limit_discount: float = 1.0
    observation_type: str = "rgb"
    holdout: str | None = None
    split: str = "train"
    heldout_colors: tuple = DEFAULT_HELDOUT_COLORS
    heldout_pairs: tuple = DEFAULT_HELDOUT_PAIRS
    strict: bool = False

    def __post_init__(self):
        set_ = functools.partial(object.__setattr__, self)
        set_("goal_length", check_int_tuple("goal_length", self.goal_length, 1))
        set_("num_distractors", check_int_tuple("num_distractors", self.num_distractors, 0))
        set_("distractor_length",
             check_int_at_least("distractor_length", self.distractor_length, 1))
        check_one_of("branching", self.branching, ("forward", "backward"))
        if self.branching == "backward" and self.distractor_length != 1:
            raise invalid_value(
                "distractor_length",
                "1 with branching='backward' (backward branches are single boxes, [R])",
                self.distractor_length)
        set_("room_size", check_int_at_least("room_size", self.room_size, 4))
        set_("num_colors", check_int_in_range("num_colors", self.num_colors, 2, 120))
        if self.max_steps is not None:
            set_("max_steps", check_int_at_least("max_steps", self.max_steps, 1))
        set_("time_limit_discount",
             check_fraction("time_limit_discount", self.time_limit_discount))
        check_one_of("observation_type", self.observation_type, ("rgb", "one_hot"))
        check_one_of("holdout", self.holdout, (None, "colors", "pairs"))
        check_one_of("split", self.split, ("train", "test"))
        set_("strict", bool(self.strict))
        self._check_capacity()
        if self.holdout == "colors":
            self._check_heldout_colors()
        if self.holdout == "pairs":
            self._check_heldout_pairs()

    def _check_capacity(self):
        """Enough colours for the longest path, and room for the smallest level asked for."""
        longest, fewest = max(self.goal_length), min(self.num_distractors)
        length, colors = self.distractor_length, self.num_colors
        # Abstract colours are 1..num_colors-1 [R]: the path takes L of them, distractor keys
        # (forward) or distractor locks (backward) need at least one more, and a forward branch
        # longer than 1 needs two (each new key differs from the lock it is behind).
        needed = longest
        if max(self.num_distractors) > 0:
            needed += 2 if (self.branching == "forward" and length > 1) else 1
        if needed > colors - 1:
            raise invalid_value(
                "num_colors", f"at least {needed + 1} colours for goal_length up to {longest} "
                "with these distractors", self.num_colors)
        # The loose key needs a free footprint too (Zambaldi et al. 2019, Sec. 3.1: the level
        # starts with one loose key), so a level has 1 + L + D * length items to place.
        boxes = min(self.goal_length) + fewest * length
        capacity = max_items(self.room_size)
        if boxes + 1 > capacity:
            raise invalid_value(
                "goal_length/num_distractors/distractor_length/room_size",
                f"a room that fits the smallest level asked for (goal_length "
                f"{min(self.goal_length)} + {fewest} x {length} distractor boxes + the loose "
                f"key = {boxes + 1} items; a room of size {self.room_size} fits at most "
                f"{capacity}): a larger room_size or a shorter goal_length/num_distractors",
                (self.goal_length, self.num_distractors, self.distractor_length,
                 self.room_size))

    def _check_heldout_colors(self):
        colors = self.num_colors
        held = check_int_tuple("heldout_colors", self.heldout_colors, 0)
        if len(set(held)) != len(held) or max(held) >= colors or len(held) >= colors:
            raise invalid_value(
                "heldout_colors", f"distinct palette colours in [0, {colors}), fewer than "
                "num_colors", self.heldout_colors)
        object.__setattr__(self, "heldout_colors", held)
        if self.split == "train" and max(self.goal_length) > colors - len(held):
            raise invalid_value(
                "goal_length", f"at most {colors - len(held)} (path colours must avoid the "
                "held-out colours)", self.goal_length)

    def _check_heldout_pairs(self):
        colors = self.num_colors
        pairs = tuple(tuple(int(c) for c in pair) for pair in self.heldout_pairs)
        if not pairs or any(len(p) != 2 or p[0] == p[1] or min(p) < 0 or max(p) >= colors
                            for p in pairs):
            raise invalid_value(
                "heldout_pairs", f"(lock colour, content colour) pairs of distinct colours in "
                f"[0, {colors})", self.heldout_pairs)
        object.__setattr__(self, "heldout_pairs", pairs)
        if self.split == "test" and min(self.goal_length) < 2:
            raise invalid_value(
                "goal_length", "values >= 2 for holdout='pairs', split='test' (a held-out pair "
                "is a box holding a key)", self.goal_length)

    @property
    def frame_size(self):
        return self.room_size + 2

    @property
    def lock0(self):
        return KEY0 + self.num_colors

    @functools.cached_property
    def palette(self):
        """uint8 `[num_colors, 3]` key/lock colours."""
        return rendering.hsv_palette(self.num_colors, COLOR_SATURATION, COLOR_VALUE)

    @property
    def agent_code(self):
        """The display code of the agent's cell (one past the cell codes; see `rendering`)."""
        return KEY0 + 2 * self.num_colors

    @functools.cached_property
    def rgb_table(self):
        """uint8 `[num_codes + 1, 3]`: RGB colour of every cell code, then of the agent."""
        table = np.zeros((self.agent_code + 1, 3), np.uint8)
        table[FLOOR], table[WALL], table[GEM] = FLOOR_RGB, WALL_RGB, GEM_RGB
        table[KEY0:self.lock0] = self.palette
        table[self.lock0:self.agent_code] = self.palette
        table[self.agent_code] = AGENT_RGB
        return table

    @functools.cached_property
    def held_rgb_table(self):
        """uint8 `[1 + num_colors, 3]`: the (0, 0) pixel when holding key colour h, at h + 1."""
        return np.concatenate([np.array([WALL_RGB], np.uint8), self.palette])

    @property
    def num_channels(self):
        return CHANNEL_KEY0 + 2 * self.num_colors

    @functools.cached_property
    def one_hot_table(self):
        """float32 `[num_codes + 1, num_channels]`: one-hot channel of every cell code, then of
        the agent."""
        channels = np.empty(self.agent_code + 1, np.int64)
        channels[[FLOOR, WALL, GEM]] = CHANNEL_FLOOR, CHANNEL_WALL, CHANNEL_GEM
        channels[KEY0:self.agent_code] = CHANNEL_KEY0 + np.arange(2 * self.num_colors)
        channels[self.agent_code] = CHANNEL_AGENT
        return np.eye(self.num_channels, dtype=np.float32)[channels]

    @functools.cached_property
    def deltas(self):
        """Flat-index displacement of each action (0 up, 1 down, 2 left, 3 right)."""
        return (-self.frame_size, self.frame_size, -1, 1)

    def observation_spec(self):
        size = self.frame_size
        if self.observation_type == "rgb":
            return specs.BoundedArray((size, size, 3), np.uint8, 0, 255, name="observation")
        return specs.BoundedArray((size, size, self.num_channels), np.float32, 0.0, 1.0,
                                  name="observation")
