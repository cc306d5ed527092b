"""Bridge BoxWorld (Clift et al. 2020) as a `dm_env.Environment`.

A 7-row x 9-column board (no wall; moves off the board are no-ops) plus an inventory column on the
right. The gem is a 2 x 2 block: two white tiles on the left and two locks on the right, which open
together when the player holds *both* lock colours. Two disjoint key chains of length L lead to the
two gem locks. With probability 1/2 a "bridge" box has its lock on the top chain and its key on the
bottom chain; opening it ends the episode with -1. The player starts at the top-left corner.

Rewards (Clift et al. 2020): +1 whenever the inventory changes (loose key or box), +10 for the gem
(ends the episode), -1 for opening the bridge (ends the episode). No step limit by default.

Actions (house order, shared with `BoxWorld`): 0 up, 1 down, 2 left, 3 right. The authors' code
numbers them 0 left, 1 up, 2 right, 3 down; `CLIFT_ACTIONS[i]` is our index of their action i.

Example:

```python
from keras_relational.environments import BridgeBoxWorld

env = BridgeBoxWorld(seed=0)
timestep = env.reset()                 # timestep.observation: uint8 [7, 10, 3]
env.level.puzzle_type                  # (a, b, c), (L, 0, 0) without a bridge
eval_env = BridgeBoxWorld(puzzle_type=(3, 2, 5), seed=1)   # one puzzle type, e.g. Fig. 14
```

Reference: J. Clift, D. Doryn, D. Murfet, J. Wallbridge, "Logic and the 2-simplicial
Transformer", ICLR 2020, section 4 and appendix F; details from the authors' released code are
tagged [C]. See the project spec `2simplicial_transformer.md`, section 4.
"""

import dataclasses
import functools
from typing import NamedTuple

import dm_env
import numpy as np
from dm_env import specs

from . import rendering
from .boxworld import _BoxWorldSpecs, _Draws, _error, _int_tuple, coerce_action

# Abstract tile codes: EMPTY, GEM, and colours 1..2L (mapped to the palette per episode).
EMPTY = -1
GEM = 0

ROWS = 7  # Clift et al. 2020 [P]
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

# Our action index of the authors' actions 0 left, 1 up, 2 right, 3 down [C].
CLIFT_ACTIONS = (2, 0, 3, 1)
_MOVES = ((-1, 0), (1, 0), (0, -1), (0, 1))  # (d_row, d_col) of 0 up, 1 down, 2 left, 3 right


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


@dataclasses.dataclass(frozen=True, eq=False)
class BridgeLevel:
    """One generated bridge level; the side channel of `BridgeBoxWorld.level`.

    Attributes:
      grid: read-only int8 `[rows, cols]` abstract tile codes: -1 empty, 0 gem, 1..2L colours.
      colors: the episode's colour permutation: abstract colour k is palette colour colors[k-1].
      solution_length: L, the length of each chain (a loose key, L-1 boxes, a gem lock).
      bridge: (b, c), the bridge's lock and key colours, or None.
      bridge_cell: (row, col) of the bridge's lock, or None.
      gem_cells: the two gem tiles (row, col), top first.
      gem_lock_cells: the two gem locks (row, col): colour 1 (top) and L+1 (bottom).
      loose_keys: (row, col, colour) of the top (colour L) and bottom (colour 2L) loose keys.
      boxes: (row, col, key, lock) of every ordinary box, lock at (row, col + 1), the bridge last.
      puzzle_type: (a, b, c); (L, 0, 0) without a bridge.
      puzzle_type_id: index of `puzzle_type` in `puzzle_types(solution_lengths)`.
    """

    grid: np.ndarray
    colors: tuple
    solution_length: int
    bridge: tuple | None
    bridge_cell: tuple | None
    gem_cells: tuple
    gem_lock_cells: tuple
    loose_keys: tuple
    boxes: tuple
    puzzle_type: tuple
    puzzle_type_id: int

    @property
    def has_bridge(self):
        return self.bridge is not None

    def __eq__(self, other):
        if not isinstance(other, BridgeLevel):
            return NotImplemented
        return all(
            np.array_equal(getattr(self, f.name), getattr(other, f.name))
            if f.name == "grid" else getattr(self, f.name) == getattr(other, f.name)
            for f in dataclasses.fields(self))

    __hash__ = None


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
        (rows,) = _int_tuple("rows", self.rows, 4)
        (cols,) = _int_tuple("cols", self.cols, 5)
        set_("rows", rows)
        set_("cols", cols)
        anchors = len(range(1, cols - 1, 3)) * len(range(1, rows, 2))
        if self.puzzle_type is not None:
            kind = tuple(self.puzzle_type)
            if (len(kind) != 3 or not all(isinstance(v, int | np.integer) for v in kind)
                    or kind[0] < 1 or not (kind[1:] == (0, 0) or (
                        1 <= kind[1] <= kind[0] < kind[2] <= 2 * kind[0]))):
                raise _error("puzzle_type", "(a, b, c) with 1 <= b <= a < c <= 2a, or (a, 0, 0) "
                             "for no bridge", self.puzzle_type)
            set_("puzzle_type", tuple(int(v) for v in kind))
            set_("solution_length", (kind[0],))
        lengths = _int_tuple("solution_length", self.solution_length, 1)
        set_("solution_length", lengths)
        if not 0.0 <= float(self.bridge_probability) <= 1.0:
            raise _error("bridge_probability", "a float in [0, 1]", self.bridge_probability)
        set_("bridge_probability", float(self.bridge_probability))
        # 2L + 1 anchors (2L + 2 with a bridge) besides the one freed below the gem [C].
        bridge = self.bridge_probability > 0 and (
            self.puzzle_type is None or self.puzzle_type[1] > 0)
        needed = 2 * max(lengths) + 1 + bridge
        if needed > anchors - 1:
            raise _error("solution_length",
                         f"at most {(anchors - 2 - bridge) // 2} on a {rows} x {cols} board "
                         f"({anchors} box anchors)", self.solution_length)
        (colors,) = _int_tuple("num_colors", self.num_colors, 2)
        if colors < 2 * max(lengths):
            raise _error("num_colors", f"at least {2 * max(lengths)} (2L distinct colours)",
                         self.num_colors)
        set_("num_colors", colors)
        if self.max_steps is not None:
            (steps,) = _int_tuple("max_steps", self.max_steps, 1)
            set_("max_steps", steps)
        if not 0.0 <= float(self.time_limit_discount) <= 1.0:
            raise _error("time_limit_discount", "a float in [0, 1]", self.time_limit_discount)
        set_("time_limit_discount", float(self.time_limit_discount))
        if self.observation_type not in ("rgb", "one_hot"):
            raise _error("observation_type", "'rgb' or 'one_hot'", self.observation_type)

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


def generate_level(config, draws):
    """Samples one bridge level exactly as Clift et al.'s generator [P, C].

    Box anchors (a box's key tile; its lock is one to the right) are columns 1, 4, 7 and rows 1, 3,
    5. The shuffled anchors are re-shuffled until the first (the gem's top row) is not in the last
    anchor column or row; the anchor two rows below the gem is dropped. The top chain uses colours
    1..L (1 = top gem lock, L = loose key), the bottom chain L+1..2L. With probability 1/2 a bridge
    box (lock b ~ U{1..L}, key c ~ U{L+1..2L}) takes the next anchor.
    """
    rows, cols = config.rows, config.cols
    if config.puzzle_type is not None:
        L = config.puzzle_type[0]
    else:
        L = config.solution_length[draws.randint(len(config.solution_length))]
    all_anchors = [(y, x) for x in range(1, cols - 1, 3) for y in range(1, rows, 2)]
    while True:
        anchors = draws.shuffle(list(all_anchors))
        if anchors[0][1] <= cols - 3 and anchors[0][0] <= rows - 3:
            break
    gy, gx = anchors[0]
    anchors.remove((gy + 2, gx))
    colors = draws.shuffle(list(range(config.num_colors)))
    if config.puzzle_type is not None:
        bridge = config.puzzle_type[1:] if config.puzzle_type[1] > 0 else None
    elif draws.random() < config.bridge_probability:
        b = 1 + draws.randint(L)
        bridge = (b, L + 1 + draws.randint(L))
    else:
        bridge = None

    grid = np.full((rows, cols), EMPTY, np.int8)
    boxes = []

    def box(anchor, key, lock):
        y, x = anchor
        grid[y, x], grid[y, x + 1] = key, lock
        if key != GEM:
            boxes.append((y, x, key, lock))

    for n in range(L):  # top chain; n = 0 is the gem's top row (key 0 = gem, lock 1)
        box(anchors[n], n, n + 1)
    grid[anchors[L]] = L
    grid[gy + 1, gx], grid[gy + 1, gx + 1] = GEM, L + 1
    for n in range(L + 1, 2 * L):  # bottom chain
        box(anchors[n], n, n + 1)
    grid[anchors[2 * L]] = 2 * L
    bridge_cell = None
    if bridge is not None:
        box(anchors[2 * L + 1], bridge[1], bridge[0])
        bridge_cell = (anchors[2 * L + 1][0], anchors[2 * L + 1][1] + 1)
    grid.flags.writeable = False
    kind = (L,) + (bridge if bridge is not None else (0, 0))
    return BridgeLevel(
        grid=grid, colors=tuple(colors), solution_length=L, bridge=bridge,
        bridge_cell=bridge_cell, gem_cells=((gy, gx), (gy + 1, gx)),
        gem_lock_cells=((gy, gx + 1), (gy + 1, gx + 1)),
        loose_keys=(anchors[L] + (L,), anchors[2 * L] + (2 * L,)), boxes=tuple(boxes),
        puzzle_type=kind, puzzle_type_id=config.puzzle_types.index(kind))


def apply_move(grid, inventory, pos, action, rows, cols):
    """The movement rules of Clift et al.'s code [C] on a flat grid; mutates grid and inventory.

    Returns the player's new flat position (unchanged when the move does nothing).
    """
    y, x = divmod(pos, cols)
    dy, dx = _MOVES[action]
    y = min(max(y + dy, 0), rows - 1)  # moves off the board are clamped (no-ops)
    x = min(max(x + dx, 0), cols - 1)
    target = y * cols + x
    code = grid[target]
    if code == EMPTY:
        return target
    left = grid[target - 1] if x > 0 else EMPTY
    if left == GEM:  # a gem lock: the other lock is below if the cell above is blank, else above
        above = grid[target - cols] if y > 0 else EMPTY
        other = target + cols if above == EMPTY else target - cols
        other_code = grid[other]
        if code not in inventory or other_code not in inventory:
            return pos
        inventory.remove(code)
        inventory.remove(other_code)
        inventory.append(GEM)
        for cell in (target, other, target - 1, other - 1):
            grid[cell] = EMPTY
        return target
    if left != EMPTY:  # an ordinary lock
        if code not in inventory:
            return pos
        inventory.remove(code)
        inventory.append(left)
        grid[target] = grid[target - 1] = EMPTY
        return target
    right = grid[target + 1] if x < cols - 1 else EMPTY
    if right == EMPTY:  # a loose key
        inventory.append(code)
        grid[target] = EMPTY
        return target
    return pos  # the key tile of a box, or a gem tile: blocked


_ZERO = np.float32(0.0)
_ONE = np.float32(1.0)
_R_KEY = np.float32(REWARD_KEY)
_R_BRIDGE = np.float32(REWARD_BRIDGE)
_R_GEM = np.float32(REWARD_GEM)


def render_rgb(config, level, grid, pos, inventory):
    """Pure rendering of a state: uint8 `[rows, cols + 1, 3]` (board, player, inventory column)."""
    rows, cols = config.rows, config.cols
    table = np.empty((config.num_colors + 2, 3), np.uint8)  # index code + 1
    table[0], table[1] = FLOOR_RGB, GEM_RGB
    table[2:] = config.palette[list(level.colors)]
    frame = np.empty((rows, cols + 1, 3), np.uint8)
    frame[:, :cols] = table[np.asarray(grid, np.intp).reshape(rows, cols) + 1]
    frame[divmod(pos, cols)] = PLAYER_RGB
    frame[:, cols] = EMPTY_SLOT_RGB
    for slot, code in enumerate(inventory[:rows]):
        frame[slot, cols] = table[code + 1]
    return frame


def render_one_hot(config, level, grid, pos, inventory):
    """Pure one-hot rendering [A]: float32 `[rows, cols + 1, 4 + 2 * num_colors]`.

    A coloured tile is a lock when its left neighbour is coloured (gem locks included), else a key;
    held keys use their key channel in the inventory column.
    """
    rows, cols = config.rows, config.cols
    codes = np.asarray(grid, np.intp).reshape(rows, cols)
    palette = np.asarray(level.colors)[np.maximum(codes, 1) - 1]
    is_lock = np.zeros_like(codes, bool)
    is_lock[:, 1:] = codes[:, :-1] != EMPTY
    channel = np.where(codes == EMPTY, CHANNEL_FLOOR, np.where(
        codes == GEM, CHANNEL_GEM,
        CHANNEL_KEY0 + palette + config.num_colors * is_lock))
    channel[divmod(pos, cols)] = CHANNEL_PLAYER
    slots = np.full(rows, CHANNEL_SLOT)
    for slot, code in enumerate(inventory[:rows]):
        slots[slot] = CHANNEL_GEM if code == GEM else CHANNEL_KEY0 + level.colors[code - 1]
    channel = np.concatenate([channel, slots[:, None]], axis=1)
    return np.eye(config.num_channels, dtype=np.float32)[channel]


class BridgeBoxWorld(_BoxWorldSpecs, dm_env.Environment):
    """Bridge BoxWorld (Clift et al. 2020) as a `dm_env.Environment`.

    Observations are uint8 RGB `[7, 10, 3]` (board plus inventory column) or float32 one-hot
    `[7, 10, 44]`. Actions are `DiscreteArray(4)`: 0 up, 1 down, 2 left, 3 right (see
    `CLIFT_ACTIONS` for the authors' order). After a LAST step, `step()` starts a new level.

    Example:

    ```python
    env = BridgeBoxWorld(seed=0)
    timestep = env.reset()
    while not timestep.last():
        timestep = env.step(np.random.randint(4))
    env.level.puzzle_type, env.won, env.opened_bridge
    ```

    Args:
      solution_length: L for both chains, an int or a sequence sampled uniformly ({1, 2, 3} [P]).
      bridge_probability: probability of a bridge box (1/2 [P, C]).
      puzzle_type: force one type `(a, b, c)` (or `(a, 0, 0)`: no bridge), e.g. to evaluate per
        puzzle type as in Figs. 14-15; overrides `solution_length` and `bridge_probability`.
      rows, cols: board size (7 x 9 [P]).
      num_colors: palette size (20 [P]); colours are re-shuffled every episode [P, C].
      max_steps: optional step limit (truncation); None, the paper's setting, for no limit [P].
      time_limit_discount: discount of the truncation step.
      observation_type: "rgb" or "one_hot".
      seed: seed of the env's own `np.random.RandomState`.
    """

    def __init__(self, solution_length=SOLUTION_LENGTHS, bridge_probability=BRIDGE_PROBABILITY,
                 puzzle_type=None, rows=ROWS, cols=COLS, num_colors=NUM_COLORS, max_steps=None,
                 time_limit_discount=1.0, observation_type="rgb", seed=None):
        self._config = BridgeConfig(
            solution_length=solution_length, bridge_probability=bridge_probability,
            puzzle_type=puzzle_type, rows=rows, cols=cols, num_colors=num_colors,
            max_steps=max_steps, time_limit_discount=time_limit_discount,
            observation_type=observation_type)
        self._rng = np.random.RandomState(seed)
        self._draws = _Draws(self._rng)
        self._max_steps = self._config.max_steps or np.inf
        self._truncation_discount = np.float32(self._config.time_limit_discount)
        self._level = None
        self._reset_next_step = True

    @property
    def config(self):
        return self._config

    def reset(self):
        return self.load(generate_level(self._config, self._draws))

    def load(self, level):
        """Starts an episode on a given `BridgeLevel` (e.g. a fixed evaluation set)."""
        shape = (self._config.rows, self._config.cols)
        if not isinstance(level, BridgeLevel) or level.grid.shape != shape:
            raise _error("level", f"a BridgeLevel with a {shape[0]} x {shape[1]} grid",
                         type(level).__name__)
        self._load(level)
        return dm_env.restart(self._observation())

    def _load(self, level):
        self._level = level
        self._grid = level.grid.reshape(-1).tolist()
        self._pos = 0  # [C] the player always starts at the top-left corner
        self._inventory = []
        self._bridge = (-1 if level.bridge_cell is None
                        else level.bridge_cell[0] * self._config.cols + level.bridge_cell[1])
        self._steps = 0
        self._won = False
        self._opened_bridge = False
        self._reset_next_step = False
        self._repaint()

    def _repaint(self):
        self._frame = render_rgb(self._config, self._level, self._grid, self._pos,
                                 self._inventory)

    def step(self, action):
        if self._reset_next_step:
            return self.reset()
        action = coerce_action(action)
        before, pos = list(self._inventory), self._pos
        self._pos = apply_move(self._grid, self._inventory, pos, action,
                               self._config.rows, self._config.cols)
        self._steps += 1
        # The RGB frame is kept up to date incrementally: a plain move repaints two cells (the
        # player only ever stands on empty tiles); anything that changes the board also changes
        # the inventory and repaints the whole frame.
        if self._inventory != before:
            self._repaint()
        elif self._pos != pos:
            cols = self._config.cols
            self._frame[pos // cols, pos % cols] = FLOOR_RGB
            self._frame[self._pos // cols, self._pos % cols] = PLAYER_RGB
        observation = self._observation()
        # [C] Rewards after the move, in this order: gem, bridge, any inventory change.
        if GEM in self._inventory:
            self._won = True
            self._reset_next_step = True
            return dm_env.TimeStep(dm_env.StepType.LAST, _R_GEM, _ZERO, observation)
        if self._pos == self._bridge:
            self._opened_bridge = True
            self._reset_next_step = True
            return dm_env.TimeStep(dm_env.StepType.LAST, _R_BRIDGE, _ZERO, observation)
        reward = _R_KEY if self._inventory != before else _ZERO
        if self._steps >= self._max_steps:
            self._reset_next_step = True
            return dm_env.truncation(reward, observation, self._truncation_discount)
        return dm_env.transition(reward, observation, _ONE)

    def _observation(self):
        if self._config.observation_type == "rgb":
            return self._frame.copy()
        return render_one_hot(self._config, self._level, self._grid, self._pos, self._inventory)

    def render(self):
        """The current RGB frame, uint8 `[7, 10, 3]` (whatever the observation type)."""
        if self._level is None:
            raise RuntimeError("render() called before reset().")
        return self._frame.copy()

    # Side channel (never part of the observation).

    @property
    def level(self):
        """The current `BridgeLevel` (puzzle type, bridge, chains)."""
        return self._level

    @property
    def puzzle_type(self):
        return self._level.puzzle_type

    @property
    def agent_position(self):
        return divmod(self._pos, self._config.cols)

    @property
    def inventory(self):
        """Held abstract colours in acquisition order (0 is the gem)."""
        return tuple(self._inventory)

    @property
    def grid(self):
        """Current abstract tile codes, int8 `[rows, cols]`."""
        return np.array(self._grid, np.int8).reshape(self._config.rows, self._config.cols)

    @property
    def won(self):
        return self._won

    @property
    def opened_bridge(self):
        return self._opened_bridge

    @property
    def num_steps(self):
        return self._steps

    def get_state(self):
        """A `BridgeState` snapshot of the current episode (for `set_state`)."""
        return BridgeState(self._level, tuple(self._grid), self.agent_position,
                           tuple(self._inventory), self._steps, self._won, self._opened_bridge,
                           self._reset_next_step)

    def set_state(self, state):
        """Restores a `BridgeState` (possibly edited with `_replace`); the RNG is untouched."""
        state = BridgeState(*state)
        if state.level is not self._level:
            self._load(state.level)
        self._grid = [int(c) for c in state.grid]
        self._pos = state.agent[0] * self._config.cols + state.agent[1]
        self._inventory = [int(c) for c in state.inventory]
        self._steps, self._won = state.num_steps, state.won
        self._opened_bridge, self._reset_next_step = state.opened_bridge, state.needs_reset
        self._repaint()


class BridgeState(NamedTuple):
    """A snapshot of a `BridgeBoxWorld` episode (`get_state` / `set_state`)."""

    level: BridgeLevel
    grid: tuple  # flat abstract tile codes, rows * cols
    agent: tuple  # (row, col)
    inventory: tuple  # held abstract colours in acquisition order
    num_steps: int
    won: bool
    opened_bridge: bool
    needs_reset: bool
