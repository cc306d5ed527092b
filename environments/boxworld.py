"""Box-World (Zambaldi et al. 2019) as a `dm_env.Environment`.

A 12 x 12 room inside a one-cell black wall (a 14 x 14 frame, one pixel per cell). The agent (dark
grey) collects the single loose key, opens the box whose lock has the key's colour, takes the key
inside, and so on along a chain of `L` boxes, the last of which holds the white gem. A box is two
horizontally adjacent pixels: the content on the left, the lock on the right. Distractor boxes
branch off the chain; opening one ends the episode with reward -1. The held key is drawn at the
top-left wall pixel. Actions: 0 up, 1 down, 2 left, 3 right.

Rewards: +1 for opening a box on the solution path, -1 for opening a distractor box (the episode
terminates), +10 for collecting the gem (terminates), 0 otherwise. After `max_steps` (120) actions
the episode is *truncated* (`dm_env.truncation`, discount `time_limit_discount`, default 1).

Example:

```python
from keras_relational.environments import BoxWorld

env = BoxWorld(goal_length=(1, 2, 3, 4), num_distractors=(0, 1, 2, 3, 4), seed=0)
timestep = env.reset()                 # timestep.observation: uint8 [14, 14, 3]
timestep = env.step(3)                 # move right
env.level.path                         # side channel: the solution boxes, distractors, L, D
```

Reference: V. Zambaldi, D. Raposo, A. Santoro et al., "Deep reinforcement learning with relational
inductive biases", ICLR 2019. Details the paper leaves open follow DeepMind's open-source pycolab
Box-World (tagged [R] below); our own choices are tagged [A]. See the project spec
`relational_rl_mhdpa.md`, section 4.1.
"""

import dataclasses
import functools
from typing import NamedTuple

import dm_env
import numpy as np
from dm_env import specs

from . import rendering

# Actions [R order]: 0 up, 1 down, 2 left, 3 right.
ACTION_NAMES = ("up", "down", "left", "right")
NUM_ACTIONS = 4

# Cell codes of a level grid (uint8). The agent and the held key are not part of the grid.
FLOOR = 0
WALL = 1
GEM = 2
KEY0 = 3  # the key of palette colour c is KEY0 + c; its lock is KEY0 + num_colors + c
GEM_CONTENT = -1  # `Box.content` of the box that holds the gem

# Rewards and limits.
REWARD_PATH_BOX = 1.0  # Zambaldi et al. 2019 [P]
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

def _error(argument, expected, received):
    return ValueError(f"`{argument}`: expected {expected}, received {received!r}.")


def _int_tuple(argument, value, minimum):
    """`value` (an int or a non-empty sequence of ints) as a tuple of ints >= `minimum`."""
    values = (value,) if np.ndim(value) == 0 else tuple(value)
    expected = f"an integer >= {minimum} or a non-empty sequence of them"
    if not values:
        raise _error(argument, expected, value)
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < minimum:
            raise _error(argument, expected, value)
    return tuple(int(v) for v in values)


class Key(NamedTuple):
    """A loose key at frame cell (row, col), of palette colour `color`."""

    row: int
    col: int
    color: int


class Box(NamedTuple):
    """A box: content at frame cell (row, col), lock at (row, col + 1).

    `lock` is the palette colour of the lock; `content` is the palette colour of the key inside or
    `GEM_CONTENT` (-1) for the gem.
    """

    row: int
    col: int
    lock: int
    content: int

    @property
    def lock_cell(self):
        return (self.row, self.col + 1)


@dataclasses.dataclass(frozen=True, eq=False)
class BoxWorldLevel:
    """One generated level; the side channel of `BoxWorld.level` (never part of the observation).

    Attributes:
      grid: read-only uint8 `[F, F]` cell codes (F = room_size + 2) without agent or held key.
      agent: the agent's start cell (row, col) in frame coordinates.
      loose_key: the single loose key (colour of the first path lock).
      path: the solution boxes in opening order; `path[-1]` holds the gem.
      distractors: the distractor branches, each a tuple of boxes in opening order.
      colors: the level's colour permutation: abstract colour k (1 = loose key) is palette colour
        `colors[k - 1]`.
      goal_length: effective solution length L (boxes on the path, gem box included).
      num_distractors: effective number D of distractor branches.
      distractor_length: boxes per forward branch (1 for backward branches).
      branching: "forward" or "backward".
      attempts: generation attempts used (1 + levels discarded because the items did not fit).
    """

    grid: np.ndarray
    agent: tuple
    loose_key: Key
    path: tuple
    distractors: tuple
    colors: tuple
    goal_length: int
    num_distractors: int
    distractor_length: int
    branching: str
    attempts: int

    @property
    def boxes(self):
        """All boxes: the path first, then the distractor branches."""
        return self.path + tuple(box for branch in self.distractors for box in branch)

    @property
    def path_lock_cells(self):
        return tuple(box.lock_cell for box in self.path)

    @property
    def distractor_lock_cells(self):
        return tuple(box.lock_cell for branch in self.distractors for box in branch)

    @property
    def max_return(self):
        """`L + 10`: +1 per path box and +10 for the gem."""
        return self.goal_length * REWARD_PATH_BOX + REWARD_GEM

    def __eq__(self, other):
        if not isinstance(other, BoxWorldLevel):
            return NotImplemented
        return all(
            np.array_equal(getattr(self, f.name), getattr(other, f.name))
            if f.name == "grid" else getattr(self, f.name) == getattr(other, f.name)
            for f in dataclasses.fields(self))

    __hash__ = None


@functools.cache
def _room_geometry(room_size):
    """Placement tables for a room: anchors, footprint and cell bit masks, room cells."""
    size = room_size + 2
    anchors, footprints, box_masks, key_masks = [], [], [], []
    # [R] An item (a box's content cell, or a loose key) at (y, x) needs the 3 x 4 block of rows
    # y-1..y+1, columns x-1..x+2 to be free floor (no wall, no other item's cell).
    for y in range(2, size - 2):
        for x in range(2, size - 3):
            footprint = 0
            for yy in range(y - 1, y + 2):
                for xx in range(x - 1, x + 3):
                    footprint |= 1 << (yy * size + xx)
            index = y * size + x
            anchors.append(index)
            footprints.append(footprint)
            box_masks.append((1 << index) | (1 << (index + 1)))
            key_masks.append(1 << index)
    room_cells = [y * size + x for y in range(1, size - 1) for x in range(1, size - 1)]
    base = np.full((size, size), WALL, np.uint8)
    base[1:-1, 1:-1] = FLOOR
    return anchors, footprints, box_masks, key_masks, room_cells, base


def max_boxes(room_size):
    """An upper bound on the boxes that fit a room (items in every other row, 3 columns each)."""
    return ((room_size - 1) // 2) * ((room_size - 1) // 3)


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
        set_("goal_length", _int_tuple("goal_length", self.goal_length, 1))
        set_("num_distractors", _int_tuple("num_distractors", self.num_distractors, 0))
        (length,) = _int_tuple("distractor_length", self.distractor_length, 1)
        set_("distractor_length", length)
        if self.branching not in ("forward", "backward"):
            raise _error("branching", "'forward' or 'backward'", self.branching)
        if self.branching == "backward" and length != 1:
            raise _error("distractor_length",
                         "1 with branching='backward' (backward branches are single boxes, [R])",
                         self.distractor_length)
        (room,) = _int_tuple("room_size", self.room_size, 4)
        set_("room_size", room)
        (colors,) = _int_tuple("num_colors", self.num_colors, 2)
        if colors > 120:
            raise _error("num_colors", "an integer in [2, 120]", self.num_colors)
        set_("num_colors", colors)
        if self.max_steps is not None:
            (steps,) = _int_tuple("max_steps", self.max_steps, 1)
            set_("max_steps", steps)
        if not 0.0 <= float(self.time_limit_discount) <= 1.0:
            raise _error("time_limit_discount", "a float in [0, 1]", self.time_limit_discount)
        set_("time_limit_discount", float(self.time_limit_discount))
        if self.observation_type not in ("rgb", "one_hot"):
            raise _error("observation_type", "'rgb' or 'one_hot'", self.observation_type)
        if self.holdout not in (None, "colors", "pairs"):
            raise _error("holdout", "None, 'colors' or 'pairs'", self.holdout)
        if self.split not in ("train", "test"):
            raise _error("split", "'train' or 'test'", self.split)
        set_("strict", bool(self.strict))

        longest, fewest = max(self.goal_length), min(self.num_distractors)
        # Abstract colours are 1..num_colors-1 [R]: the path takes L of them, distractor keys
        # (forward) or distractor locks (backward) need at least one more, and a forward branch
        # longer than 1 needs two (each new key differs from the lock it is behind).
        needed = longest
        if max(self.num_distractors) > 0:
            needed += 2 if (self.branching == "forward" and length > 1) else 1
        if needed > colors - 1:
            raise _error("num_colors",
                         f"at least {needed + 1} colours for goal_length up to {longest} with "
                         f"these distractors", self.num_colors)
        boxes = min(self.goal_length) + fewest * length
        if boxes > max_boxes(room):
            raise _error("goal_length/num_distractors/distractor_length",
                         f"at most {max_boxes(room)} boxes (plus the loose key) in a room of size "
                         f"{room}; the smallest level asked for needs {boxes}",
                         (self.goal_length, self.num_distractors, self.distractor_length))

        if self.holdout == "colors":
            held = _int_tuple("heldout_colors", self.heldout_colors, 0)
            if len(set(held)) != len(held) or max(held) >= colors or len(held) >= colors:
                raise _error("heldout_colors",
                             f"distinct palette colours in [0, {colors}), fewer than num_colors",
                             self.heldout_colors)
            set_("heldout_colors", held)
            if self.split == "train" and longest > colors - len(held):
                raise _error("goal_length", f"at most {colors - len(held)} (path colours must "
                             "avoid the held-out colours)", self.goal_length)
        if self.holdout == "pairs":
            pairs = tuple(tuple(int(c) for c in pair) for pair in self.heldout_pairs)
            if not pairs or any(len(p) != 2 or p[0] == p[1] or min(p) < 0 or max(p) >= colors
                                for p in pairs):
                raise _error("heldout_pairs",
                             f"(lock colour, content colour) pairs of distinct colours in "
                             f"[0, {colors})", self.heldout_pairs)
            set_("heldout_pairs", pairs)
            if self.split == "test" and min(self.goal_length) < 2:
                raise _error("goal_length", "values >= 2 for holdout='pairs', split='test' (a "
                             "held-out pair is a box holding a key)", self.goal_length)

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

    @functools.cached_property
    def rgb_table(self):
        """uint8 `[num_codes, 3]`: RGB colour of every cell code."""
        table = np.zeros((KEY0 + 2 * self.num_colors, 3), np.uint8)
        table[FLOOR], table[WALL], table[GEM] = FLOOR_RGB, WALL_RGB, GEM_RGB
        table[KEY0:self.lock0] = self.palette
        table[self.lock0:] = self.palette
        return table

    @property
    def num_channels(self):
        return CHANNEL_KEY0 + 2 * self.num_colors

    @functools.cached_property
    def one_hot_table(self):
        """float32 `[num_codes, num_channels]`: one-hot channel of every cell code."""
        channels = np.empty(KEY0 + 2 * self.num_colors, np.int64)
        channels[[FLOOR, WALL, GEM]] = CHANNEL_FLOOR, CHANNEL_WALL, CHANNEL_GEM
        channels[KEY0:] = CHANNEL_KEY0 + np.arange(2 * self.num_colors)
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


class _Draws:
    """Uniform integers from a `RandomState`, drawn in blocks (cheap per call, deterministic)."""

    __slots__ = ("_rng", "_buffer", "_index")

    def __init__(self, rng):
        self._rng = rng
        self._buffer = []
        self._index = 0

    def random(self):
        """A uniform float in [0, 1)."""
        if self._index == len(self._buffer):
            self._buffer = self._rng.random_sample(256).tolist()
            self._index = 0
        u = self._buffer[self._index]
        self._index += 1
        return u

    def randint(self, n):
        """A uniform integer in [0, n)."""
        if self._index == len(self._buffer):
            self._buffer = self._rng.random_sample(256).tolist()
            self._index = 0
        u = self._buffer[self._index]
        self._index += 1
        return int(u * n)

    def shuffle(self, values):
        """Fisher-Yates shuffle of a list, in place."""
        for i in range(len(values) - 1, 0, -1):
            j = self.randint(i + 1)
            values[i], values[j] = values[j], values[i]
        return values

    def sample(self, values, k):
        """k distinct elements of a list in uniformly random order (partial shuffle)."""
        values = list(values)
        for i in range(k):
            j = i + self.randint(len(values) - i)
            values[i], values[j] = values[j], values[i]
        return values[:k]


class LevelGenerationError(RuntimeError):
    """The items of a level could not be placed (strict mode, or too many discarded levels)."""


def _sample_boxes(config, draws, L, D):
    """The symbolic problem [R]: abstract colours 1..num_colors-1, content -1 = gem."""
    path = [(i, i + 1) for i in range(1, L)] + [(L, -1)]
    top = config.num_colors - 1
    branches = []
    if config.branching == "forward":
        for _ in range(D):
            current = 1 + draws.randint(L)  # branch off any path key colour [R]
            branch = []
            for _ in range(config.distractor_length):
                if current > L:  # a new colour in L+1..top, different from the current lock
                    new = L + 1 + draws.randint(top - L - 1)
                    new += new >= current
                else:
                    new = L + 1 + draws.randint(top - L)
                branch.append((current, new))
                current = new
            branches.append(branch)
    else:
        # [R] A lock of a colour no key has (forward keys are absent here), holding a path key.
        for _ in range(D):
            branches.append([(L + 1 + draws.randint(top - L), 1 + draws.randint(L))])
    return path, branches


def _sample_colors(config, draws, L):
    """A random permutation `colors` (abstract colour k -> palette colour colors[k-1]) [R]."""
    palette = list(range(config.num_colors))
    if config.holdout is None:
        return draws.shuffle(palette)
    if config.holdout == "colors":
        held = set(config.heldout_colors)
        if config.split == "train":
            # Path colours only from the non-held-out colours; the held-out ones can still appear
            # on distractor branches.
            path = draws.sample([c for c in palette if c not in held], L)
        else:
            while True:  # at least one path colour held out (p >= len(held) / num_colors per try)
                path = draws.sample(palette, L)
                if held.intersection(path):
                    break
        rest = draws.shuffle([c for c in palette if c not in path])
        return path + rest
    # holdout == "pairs": a path box (lock k, key k+1) is the pair (colors[k-1], colors[k]).
    pairs = set(config.heldout_pairs)
    if config.split == "train":
        while True:
            colors = draws.shuffle(list(palette))
            if not any((colors[k], colors[k + 1]) in pairs for k in range(L - 1)):
                return colors
    position = draws.randint(L - 1)
    lock, content = config.heldout_pairs[draws.randint(len(config.heldout_pairs))]
    rest = draws.shuffle([c for c in palette if c not in (lock, content)])
    return rest[:position] + [lock, content] + rest[position:]


def generate_level(config, draws):
    """Samples one level [R]: symbolic problem, colour permutation, placement, agent.

    L and D are sampled uniformly from `config.goal_length` and `config.num_distractors`. Items are
    placed one by one at uniformly random anchors; a try fails if the 3 x 4 footprint around the
    item holds a wall or another item. After more than `MAX_PLACEMENT_FAILURES` failed tries the
    level is discarded and a new symbolic problem (new L and D) is sampled, as the reference does;
    `config.strict` raises `LevelGenerationError` instead.

    [A] Anchors are sampled uniformly over all feasible cells, and the agent uniformly over all
    free room cells (the reference's exclusive upper bounds never sample the right-most feasible
    box column, nor agent starts in the top/bottom room rows or right-most room column).
    """
    anchors, footprints, box_masks, key_masks, room_cells, base = _room_geometry(
        config.room_size)
    size = config.frame_size
    lock0 = config.lock0
    num_anchors = len(anchors)
    for attempt in range(1, MAX_LEVEL_ATTEMPTS + 1):
        L = config.goal_length[draws.randint(len(config.goal_length))]
        D = config.num_distractors[draws.randint(len(config.num_distractors))]
        path, branches = _sample_boxes(config, draws, L, D)
        colors = _sample_colors(config, draws, L)
        # Place the loose key, then the path boxes, then the branches.
        occupied, failures, placed = 0, 0, []
        for item in range(1 + L + sum(len(b) for b in branches)):
            while True:
                a = draws.randint(num_anchors)
                if not occupied & footprints[a]:
                    break
                failures += 1
                if failures > MAX_PLACEMENT_FAILURES:
                    break
            if failures > MAX_PLACEMENT_FAILURES:
                break
            occupied |= key_masks[a] if item == 0 else box_masks[a]
            placed.append(anchors[a])
        if failures > MAX_PLACEMENT_FAILURES:
            if config.strict:
                raise LevelGenerationError(
                    f"could not place a level with goal_length={L}, num_distractors={D}, "
                    f"distractor_length={config.distractor_length} in a room of size "
                    f"{config.room_size} (strict=True).")
            continue
        while True:
            agent = room_cells[draws.randint(len(room_cells))]
            if not occupied >> agent & 1:
                break

        grid = base.copy()
        flat = grid.reshape(-1)
        flat[placed[0]] = KEY0 + colors[0]
        loose_key = Key(placed[0] // size, placed[0] % size, colors[0])
        boxes = []
        for index, (lock, content) in zip(placed[1:], path + sum(branches, []), strict=True):
            lock_color = colors[lock - 1]
            content_color = GEM_CONTENT if content < 0 else colors[content - 1]
            flat[index] = GEM if content < 0 else KEY0 + content_color
            flat[index + 1] = lock0 + lock_color
            boxes.append(Box(index // size, index % size, lock_color, content_color))
        path_boxes, index, distractors = tuple(boxes[:L]), L, []
        for branch in branches:
            distractors.append(tuple(boxes[index:index + len(branch)]))
            index += len(branch)
        grid.flags.writeable = False
        return BoxWorldLevel(
            grid=grid, agent=(agent // size, agent % size), loose_key=loose_key,
            path=path_boxes, distractors=tuple(distractors),
            colors=tuple(colors[:config.num_colors - 1]), goal_length=L, num_distractors=D,
            distractor_length=config.distractor_length, branching=config.branching,
            attempts=attempt)
    raise LevelGenerationError(
        f"no level fitted in {MAX_LEVEL_ATTEMPTS} attempts (goal_length={config.goal_length}, "
        f"num_distractors={config.num_distractors}, distractor_length="
        f"{config.distractor_length}, room_size={config.room_size}); use fewer or shorter "
        f"distractor branches or a larger room.")


def render_rgb(config, grid, agent, held):
    """Pure rendering of a state: uint8 `[F, F, 3]` frame.

    Args:
      config: the `BoxWorldConfig`.
      grid: `[F, F]` (or flat) cell codes.
      agent: the agent's cell (row, col).
      held: palette colour of the held key, or -1.
    """
    size = config.frame_size
    frame = config.rgb_table[np.asarray(grid).reshape(size, size)]
    frame[agent] = AGENT_RGB
    frame[0, 0] = config.palette[held] if held >= 0 else WALL_RGB
    return frame


def render_one_hot(config, grid, agent, held):
    """Pure one-hot rendering of a state: float32 `[F, F, 4 + 2 * num_colors]` [A].

    Keys and locks of the same colour get different channels, so the key-lock correspondence is
    not visible and must be learned (Zambaldi et al. 2019, attention analysis). The held key uses
    its key channel at cell (0, 0).
    """
    size = config.frame_size
    codes = np.asarray(grid, np.intp).reshape(size, size)
    frame = config.one_hot_table[codes]
    frame[agent] = 0.0
    frame[agent][CHANNEL_AGENT] = 1.0
    if held >= 0:
        frame[0, 0] = 0.0
        frame[0, 0, CHANNEL_KEY0 + held] = 1.0
    return frame


_ZERO = np.float32(0.0)
_ONE = np.float32(1.0)
_REWARDS = {r: np.float32(r) for r in (REWARD_PATH_BOX, REWARD_DISTRACTOR_BOX, REWARD_GEM)}
_ACTIONS = {0: 0, 1: 1, 2: 2, 3: 3}


def coerce_action(action):
    """`action` as an int in [0, 4); raises a ValueError naming the argument otherwise."""
    try:
        return _ACTIONS[action]
    except (KeyError, TypeError):
        pass
    value = np.asarray(action)
    if value.shape != () or not np.issubdtype(value.dtype, np.integer) or not (
            0 <= value < NUM_ACTIONS):
        raise _error("action", "an integer in [0, 4) (0 up, 1 down, 2 left, 3 right)", action)
    return int(value)


class _BoxWorldSpecs:
    """The dm_env specs every BoxWorld variant shares (single or batched, original or bridge).

    The observation spec comes from the variant's config (`self._config`); the spec of one level
    is also the spec of each slot of a batched environment.
    """

    def observation_spec(self):
        return self._config.observation_spec()

    def action_spec(self):
        return specs.DiscreteArray(NUM_ACTIONS, dtype=np.int32, name="action")

    def reward_spec(self):
        return specs.Array((), np.float32, name="reward")

    def discount_spec(self):
        return specs.BoundedArray((), np.float32, 0.0, 1.0, name="discount")


class BoxWorld(_BoxWorldSpecs, dm_env.Environment):
    """Box-World (Zambaldi et al. 2019) as a `dm_env.Environment`.

    Observations are uint8 RGB `[14, 14, 3]` frames (one pixel per cell, `observation_type="rgb"`)
    or float32 one-hot `[14, 14, 44]` cells (`"one_hot"`: separate channels for key k and lock k).
    Actions are `DiscreteArray(4)`: 0 up, 1 down, 2 left, 3 right. After a LAST step, `step()`
    starts a new level (the action is ignored), as in dm_env's catch example.

    Example:

    ```python
    env = BoxWorld(goal_length=4, num_distractors=(0, 1, 2), seed=1)
    timestep = env.reset()
    while not timestep.last():
        timestep = env.step(np.random.randint(4))
    env.level.goal_length, env.solved
    ```

    Args:
      goal_length: solution length L (boxes on the path, the gem's box included), an int or a
        sequence sampled uniformly per level.
      num_distractors: number D of distractor branches, an int or a sequence sampled uniformly.
      distractor_length: boxes per forward distractor branch (1 or 3 in the paper).
      branching: "forward" (branches start at a path key colour, the paper's default) or
        "backward" (boxes holding a path key behind a lock nobody can open; greedy is optimal).
      room_size: side of the square room (12); the frame adds a one-cell wall.
      num_colors: key/lock colours (20); abstract colours 1..num_colors-1 are mapped to palette
        colours through a fresh permutation every level [R].
      max_steps: step limit (120 [R]); reaching it truncates the episode. None for no limit.
      time_limit_discount: discount of the truncation step (1.0; 0.0 reproduces [R]'s
        termination at the limit).
      observation_type: "rgb" or "one_hot".
      holdout: None, "colors" (a set of palette colours never on the training path) or "pairs"
        ((lock colour, content colour) boxes never on the training path) [A: two readings of the
        paper's withheld key-lock combinations].
      split: "train" (held-out colours/pairs only on distractors) or "test" (at least one on the
        path). Ignored without `holdout`.
      heldout_colors: palette colours held out by `holdout="colors"`.
      heldout_pairs: (lock colour, content colour) pairs held out by `holdout="pairs"`.
      strict: raise `LevelGenerationError` instead of resampling L and D when items do not fit.
      seed: seed of the env's own `np.random.RandomState`; equal seeds give equal levels.
    """

    def __init__(self, goal_length=(1, 2, 3, 4), num_distractors=(0, 1, 2, 3, 4),
                 distractor_length=1, branching="forward", room_size=12, num_colors=20,
                 max_steps=MAX_STEPS, time_limit_discount=1.0, observation_type="rgb",
                 holdout=None, split="train", heldout_colors=DEFAULT_HELDOUT_COLORS,
                 heldout_pairs=DEFAULT_HELDOUT_PAIRS, strict=False, seed=None):
        # Defaults: the paper's training distribution, L ~ U{1..4}, D ~ U{0..4}, branch length 1
        # (Zambaldi et al. 2019 [P]), 12 x 12 room [P], 20 colours [P], 120 steps [R].
        self._config = BoxWorldConfig(
            goal_length=goal_length, num_distractors=num_distractors,
            distractor_length=distractor_length, branching=branching, room_size=room_size,
            num_colors=num_colors, max_steps=max_steps, time_limit_discount=time_limit_discount,
            observation_type=observation_type, holdout=holdout, split=split,
            heldout_colors=heldout_colors, heldout_pairs=heldout_pairs, strict=strict)
        self._rng = np.random.RandomState(seed)
        self._draws = _Draws(self._rng)
        config = self._config
        self._size = config.frame_size
        self._lock0 = config.lock0
        self._deltas = config.deltas
        self._max_steps = config.max_steps if config.max_steps is not None else np.inf
        self._truncation_discount = np.float32(config.time_limit_discount)
        self._rgb = config.observation_type == "rgb"
        self._palette_rows = [np.array(c, np.uint8) for c in config.palette]
        self._floor_row = np.array(FLOOR_RGB, np.uint8)
        self._agent_row = np.array(AGENT_RGB, np.uint8)
        self._wall_row = np.array(WALL_RGB, np.uint8)
        self._levels_generated = 0
        self._levels_discarded = 0
        self._level = None
        self._reset_next_step = True

    @classmethod
    def from_preset(cls, name, **overrides):
        """A BoxWorld with the parameters of `PRESETS[name]`, updated by `overrides`."""
        if name not in PRESETS:
            raise _error("name", f"one of {sorted(PRESETS)}", name)
        return cls(**{**PRESETS[name], **overrides})

    @property
    def config(self):
        return self._config

    def reset(self):
        level = generate_level(self._config, self._draws)
        self._levels_generated += 1
        self._levels_discarded += level.attempts - 1
        return self.load(level)

    def load(self, level):
        """Starts an episode on a given `BoxWorldLevel` (e.g. a fixed evaluation set).

        Returns the FIRST timestep. The level must come from a config with the same room size and
        number of colours.
        """
        if not isinstance(level, BoxWorldLevel) or level.grid.shape != (self._size,) * 2:
            raise _error("level", f"a BoxWorldLevel with a {self._size} x {self._size} grid",
                         type(level).__name__)
        self._load(level)
        return dm_env.restart(self._observation())

    def _load(self, level):
        self._level = level
        self._grid = level.grid.reshape(-1).tolist()
        self._pos = level.agent[0] * self._size + level.agent[1]
        self._held = -1
        self._steps = 0
        self._solved = False
        self._boxes_opened = 0
        self._distractor_locks = {
            box.row * self._size + box.col + 1 for b in level.distractors for box in b}
        self._frame = render_rgb(self._config, level.grid, level.agent, -1)
        self._frame_rows = self._frame.reshape(-1, 3)
        self._reset_next_step = False

    def step(self, action):
        if self._reset_next_step:
            return self.reset()
        delta = self._deltas[coerce_action(action)]
        grid = self._grid
        pos = self._pos
        target = pos + delta
        code = grid[target]
        reward = _ZERO
        terminal = False
        if code == FLOOR:
            moved = True
        elif code == WALL:
            moved = False
        elif code >= self._lock0:  # a lock: opens with the matching key
            if code - self._lock0 == self._held:
                grid[target] = FLOOR
                self._held = -1
                self._frame_rows[0] = self._wall_row
                moved = True
                if target in self._distractor_locks:
                    reward = _REWARDS[REWARD_DISTRACTOR_BOX]
                    terminal = True
                else:
                    reward = _REWARDS[REWARD_PATH_BOX]
                    self._boxes_opened += 1
            else:
                moved = False
        elif grid[target + 1] >= self._lock0:  # the content of a box still locked
            moved = False
        elif code == GEM:
            grid[target] = FLOOR
            moved = True
            reward = _REWARDS[REWARD_GEM]
            terminal = True
            self._solved = True
        else:  # a loose key: picked up, replacing any held key [R]
            grid[target] = FLOOR
            self._held = code - KEY0
            self._frame_rows[0] = self._palette_rows[self._held]
            moved = True
        if moved:
            self._frame_rows[pos] = self._floor_row
            self._frame_rows[target] = self._agent_row
            self._pos = target
        self._steps += 1
        observation = self._observation()
        if terminal:
            self._reset_next_step = True
            return dm_env.TimeStep(dm_env.StepType.LAST, reward, _ZERO, observation)
        if self._steps >= self._max_steps:
            self._reset_next_step = True
            return dm_env.truncation(reward, observation, self._truncation_discount)
        return dm_env.transition(reward, observation, _ONE)

    def _observation(self):
        if self._rgb:
            return self._frame.copy()
        return render_one_hot(self._config, self._grid, self.agent_position, self._held)

    def render(self):
        """The current RGB frame, uint8 `[14, 14, 3]` (whatever the observation type)."""
        if self._level is None:
            raise RuntimeError("render() called before reset().")
        return self._frame.copy()

    # Side channel (never part of the observation).

    @property
    def level(self):
        """The current `BoxWorldLevel` (solution path, distractors, effective L and D)."""
        return self._level

    @property
    def agent_position(self):
        """The agent's cell (row, col) in frame coordinates."""
        return divmod(self._pos, self._size)

    @property
    def held_key(self):
        """Palette colour of the held key, or None."""
        return None if self._held < 0 else self._held

    @property
    def solved(self):
        """Whether the gem was collected in the current episode."""
        return self._solved

    @property
    def boxes_opened(self):
        """Solution-path boxes opened in the current episode."""
        return self._boxes_opened

    @property
    def num_steps(self):
        """Actions taken in the current episode."""
        return self._steps

    @property
    def grid(self):
        """The current cell codes, uint8 `[F, F]` (opened boxes and taken keys removed)."""
        return np.array(self._grid, np.uint8).reshape(self._size, self._size)

    @property
    def generation_stats(self):
        """Levels generated and levels discarded because their items did not fit [R]."""
        return {"levels": self._levels_generated, "discarded": self._levels_discarded}

    def get_state(self):
        """A `BoxWorldState` snapshot of the current episode (for `set_state`, tree search)."""
        return BoxWorldState(self._level, tuple(self._grid), self.agent_position, self._held,
                             self._steps, self._solved, self._boxes_opened,
                             self._reset_next_step)

    def set_state(self, state):
        """Restores a `BoxWorldState` (possibly edited with `_replace`); the RNG is untouched."""
        state = BoxWorldState(*state)
        if state.level is not self._level:
            self._load(state.level)
        if len(state.grid) != self._size * self._size:
            raise _error("state.grid", f"{self._size * self._size} cell codes",
                         f"{len(state.grid)} codes")
        self._grid = [int(c) for c in state.grid]
        self._pos = state.agent[0] * self._size + state.agent[1]
        self._held = -1 if state.held_key is None else int(state.held_key)
        self._steps, self._solved = state.num_steps, state.solved
        self._boxes_opened, self._reset_next_step = state.boxes_opened, state.needs_reset
        self._frame[...] = render_rgb(self._config, self._grid, state.agent, self._held)


class BoxWorldState(NamedTuple):
    """A snapshot of a `BoxWorld` episode (`BoxWorld.get_state` / `set_state`)."""

    level: BoxWorldLevel
    grid: tuple  # flat cell codes, F * F
    agent: tuple  # (row, col)
    held_key: int  # palette colour, -1 for none
    num_steps: int
    solved: bool
    boxes_opened: int
    needs_reset: bool


# Named settings of the paper [P] (test conditions: spec section 4.1, [A] where marked).
PRESETS = {
    # Training, branch length 1 and 3: L ~ U{1..4}, D ~ U{0..4}.
    "train": dict(goal_length=(1, 2, 3, 4), num_distractors=(0, 1, 2, 3, 4), distractor_length=1),
    "train_long": dict(goal_length=(1, 2, 3, 4), num_distractors=(0, 1, 2, 3, 4),
                       distractor_length=3),
    # Backward branching (Figure 8) [A: same L and D as training].
    "backward": dict(goal_length=(1, 2, 3, 4), num_distractors=(0, 1, 2, 3, 4),
                     branching="backward"),
    # Zero-shot longer solution paths [A: distractors as training, branch length 1].
    "test_length_6": dict(goal_length=6, num_distractors=(0, 1, 2, 3, 4), distractor_length=1),
    "test_length_8": dict(goal_length=8, num_distractors=(0, 1, 2, 3, 4), distractor_length=1),
    "test_length_10": dict(goal_length=10, num_distractors=(0, 1, 2, 3, 4), distractor_length=1),
    # Withheld key-lock combinations [A: reading (a), held-out colours].
    "train_heldout": dict(goal_length=(1, 2, 3, 4), num_distractors=(0, 1, 2, 3, 4),
                          holdout="colors", split="train"),
    "test_heldout": dict(goal_length=(1, 2, 3, 4), num_distractors=(0, 1, 2, 3, 4),
                         holdout="colors", split="test"),
}
