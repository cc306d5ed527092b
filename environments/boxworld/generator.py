"""The BoxWorld level generator (Zambaldi et al. 2019, App. A): problem, colours, placement.

Levels are sampled as DeepMind's open-source pycolab Box-World samples them [R]: a chain of boxes
to the gem and distractor branches (the symbolic problem), a fresh colour permutation, then
items placed one by one at random anchors with a free 3 x 4 footprint each.
"""

import dataclasses
import functools
from typing import NamedTuple

import numpy as np

from ..base import GridLevel
from .config import (
    FLOOR,
    GEM,
    GEM_CONTENT,
    KEY0,
    MAX_LEVEL_ATTEMPTS,
    MAX_PLACEMENT_FAILURES,
    REWARD_GEM,
    REWARD_PATH_BOX,
    WALL,
)


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
class BoxWorldLevel(GridLevel):
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
