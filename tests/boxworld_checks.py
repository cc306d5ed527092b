"""The structural rules of generated BoxWorld and bridge BoxWorld levels, shared by the tests of
the NumPy generators and of the on-device generators (`tensor_levels`)."""

import collections

import numpy as np

from keras_relational.environments import puzzle_types
from keras_relational.environments.boxworld import FLOOR, GEM, GEM_CONTENT, KEY0, WALL
from keras_relational.environments.bridge_boxworld import EMPTY
from keras_relational.environments.bridge_boxworld import GEM as BRIDGE_GEM


def _items(grid, lock0):
    """Boxes {lock_cell: (content_code, lock_colour)} and loose keys from the grid alone."""
    boxes, loose = {}, []
    rows, cols = np.nonzero((grid >= GEM) & (grid < lock0))
    for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
        if grid[r, c + 1] >= lock0:
            boxes[(r, c + 1)] = (int(grid[r, c]), int(grid[r, c + 1]) - lock0)
        else:
            loose.append((r, c))
    return boxes, loose


def _winning_sequences(boxes, key_colour, used=()):
    """Every sequence of box openings from `key_colour` that reaches the gem (graph property)."""
    found = []
    for cell, (content, lock) in boxes.items():
        if lock != key_colour or cell in used:
            continue
        if content == GEM:
            found.append(used + (cell,))
        else:
            found += _winning_sequences(boxes, content - KEY0, used + (cell,))
    return found


def check_level(config, level):
    """Asserts every structural rule of a generated level (Zambaldi et al. 2019, App. A; [R])."""
    grid, size, lock0 = level.grid, config.frame_size, config.lock0
    L, D, length = level.goal_length, level.num_distractors, level.distractor_length
    assert grid.shape == (size, size) and grid.dtype == np.uint8
    assert not grid.flags.writeable
    border = np.ones((size, size), bool)
    border[1:-1, 1:-1] = False
    assert (grid[border] == WALL).all() and (grid[~border] != WALL).all()
    assert L in config.goal_length and D in config.num_distractors

    # The grid holds exactly the items of the metadata.
    expected = np.where(border, WALL, FLOOR).astype(np.uint8)
    expected[level.loose_key.row, level.loose_key.col] = KEY0 + level.loose_key.color
    for box in level.boxes:
        expected[box.row, box.col] = GEM if box.content == GEM_CONTENT else KEY0 + box.content
        expected[box.lock_cell] = lock0 + box.lock
    assert np.array_equal(grid, expected)

    # One loose key, one gem, L + D * length locks.
    boxes, loose = _items(grid, lock0)
    assert loose == [(level.loose_key.row, level.loose_key.col)]
    assert (grid == GEM).sum() == 1
    assert (grid >= lock0).sum() == len(boxes) == L + D * length

    # Spacing: no item touches another (8-neighbourhood) except its own box partner, and no item
    # is in the outermost room ring (the 3 x 4 footprint keeps a walkable margin).
    item = grid >= GEM
    padded = np.pad(item, 1).astype(np.int8)
    neighbours = sum(padded[1 + dy:size + 1 + dy, 1 + dx:size + 1 + dx]
                     for dy in (-1, 0, 1) for dx in (-1, 0, 1) if dy or dx)
    partner = np.zeros_like(item)
    for r, c in boxes:
        partner[r, c] = partner[r, c - 1] = True
    assert np.array_equal(neighbours[item], partner[item])
    ring = border.copy()
    ring[2:-2, 2:-2] = False
    assert not item[ring].any()

    # The agent starts on floor inside the room.
    assert grid[level.agent] == FLOOR and not border[level.agent]

    # The solution path: a chain from the loose key, distinct colours, the gem last, unique.
    path = level.path
    assert len(path) == L
    assert level.loose_key.color == path[0].lock
    assert [b.content for b in path[:-1]] == [b.lock for b in path[1:]]
    assert path[-1].content == GEM_CONTENT
    path_colours = [b.lock for b in path]
    assert len(set(path_colours)) == L
    sequences = _winning_sequences(boxes, level.loose_key.color)
    assert sequences == [tuple(b.lock_cell for b in path)]

    # Distractor branches.
    assert len(level.distractors) == D
    key_colours = {b.content for b in level.boxes if b.content != GEM_CONTENT}
    key_colours.add(level.loose_key.color)
    for branch in level.distractors:
        assert len(branch) == length
        if level.branching == "forward":
            assert branch[0].lock in path_colours
            assert [b.content for b in branch[:-1]] == [b.lock for b in branch[1:]]
            for b in branch:
                assert b.content != GEM_CONTENT and b.content not in path_colours
                assert b.content != b.lock
        else:
            (b,) = branch
            assert b.content in path_colours  # a path key behind a lock ...
            assert b.lock not in key_colours  # ... that no key opens
    assert set(level.colors) <= set(range(config.num_colors))
    assert len(set(level.colors)) == len(level.colors) == config.num_colors - 1


def check_bridge_level(config, level):
    """The layout of Clift et al. 2020 (Sec. 3; the authors' code) plus the chain structure."""
    grid, L = level.grid, level.solution_length
    assert grid.shape == (7, 9) and grid.dtype == np.int8 and not grid.flags.writeable
    assert L in config.solution_length
    (gy, gx), (gy2, gx2) = level.gem_cells
    # The gem anchor lies in {1, 4} x {1, 3} (x, y); the cell two rows below holds no box.
    assert gx in (1, 4) and gy in (1, 3) and (gy2, gx2) == (gy + 1, gx)
    assert grid[gy + 2, gx] == EMPTY and grid[gy + 2, gx + 1] == EMPTY
    # The gem: exactly two tiles, the left column of the 2 x 2 block; locks 1 (top), L+1.
    assert (grid == BRIDGE_GEM).sum() == 2 and grid[gy, gx] == grid[gy + 1, gx] == BRIDGE_GEM
    assert level.gem_lock_cells == ((gy, gx + 1), (gy + 1, gx + 1))
    assert grid[gy, gx + 1] == 1 and grid[gy + 1, gx + 1] == L + 1
    # Items only on anchors (key tiles in columns 1, 4, 7 and rows 1, 3, 5), plus the gem's row.
    items = grid != EMPTY
    anchor = np.zeros_like(items)
    anchor[1::2, [1, 2, 4, 5, 7, 8]] = True
    anchor[gy + 1, gx:gx + 2] = True
    assert not (items & ~anchor).any()
    assert grid[0, 0] == EMPTY  # the player's start
    # Every colour 1..2L twice; the bridge's two colours three times.
    counts = collections.Counter(grid[grid > 0].tolist())
    assert set(counts) == set(range(1, 2 * L + 1))
    triple = {c for c, n in counts.items() if n == 3}
    assert all(n in (2, 3) for n in counts.values())
    if level.bridge is None:
        assert not triple and level.bridge_cell is None and level.puzzle_type == (L, 0, 0)
    else:
        b, c = level.bridge
        assert 1 <= b <= L < c <= 2 * L and triple == {b, c}
        assert grid[level.bridge_cell] == b and grid[level.bridge_cell[0],
                                                     level.bridge_cell[1] - 1] == c
        assert level.puzzle_type == (L, b, c)
    assert level.puzzle_type_id == puzzle_types(config.solution_length).index(level.puzzle_type)
    # The chains: loose keys L (top) and 2L (bottom); box n holds key n behind lock n+1.
    (ty, tx, top), (by, bx, bottom) = level.loose_keys
    assert (top, bottom) == (L, 2 * L) and grid[ty, tx] == L and grid[by, bx] == 2 * L
    assert grid[ty, tx + 1] == EMPTY and grid[by, bx + 1] == EMPTY
    ordinary = sorted((key, lock) for _, _, key, lock in level.boxes[:2 * L - 2])
    assert ordinary == sorted([(n, n + 1) for n in range(1, L)] +
                              [(n, n + 1) for n in range(L + 1, 2 * L)])
    for y, x, key, lock in level.boxes:
        assert grid[y, x] == key and grid[y, x + 1] == lock
    assert sorted(level.colors) == list(range(config.num_colors))
