"""The Box-World level generator in `keras.ops`: `generator.generate_level` for a batch at once.

The same distribution as the NumPy generator (Zambaldi et al. 2019, App. A; DeepMind's pycolab
Box-World [R]), in its order of choices: L and D, the symbolic problem (path, distractor
branches), the colour permutation, the items placed one by one (the loose key, the path boxes,
the branches) at uniform free anchors, then the agent on a uniform free room cell. The NumPy
generator draws anchors until one has a free 3 x 4 footprint and discards the level after more
than `MAX_PLACEMENT_FAILURES` failed draws; here the anchor is drawn among the free ones directly
and the failed draws are counted by their (geometric) law, so the same levels are discarded
with the same probability, and a discarded level is redrawn whole (new L and D) as in NumPy.

Levels have static shapes: the items sit in `S = 1 + max(goal_length) + max(num_distractors) *
distractor_length` slots (slot 0 the loose key, then the path boxes, then the branches' boxes);
a level uses the slots its L and D need.
"""

import keras
import numpy as np
from keras import ops

from keras_relational.validation import invalid_value

from ..tensor_ops import expand_as
from ..tensor_random import TensorDraws, choice, failures, permutation, randint, until_accepted
from .config import GEM, KEY0, MAX_LEVEL_ATTEMPTS, MAX_PLACEMENT_FAILURES
from .generator import _room_geometry


class BoxWorldLevelSampler:
    """Samples Box-World levels of a `BoxWorldConfig` in `keras.ops` (see the module docstring).

    `sample(seed, num_levels)` is pure (jit-compilable): `(bank, info, seed)` with `bank` the
    `TensorBoxWorld` bank (`"grid"` uint8 `[M, F * F]`, `"distractor"` bool `[M, F * F]`,
    `"agent"` int32 `[M]`) and `info` the metadata the grid does not show: `"goal_length"`,
    `"num_distractors"`, `"attempts"` int32 `[M]`, `"colors"` int32 `[M, num_colors]` (abstract
    colour k is palette colour `colors[:, k - 1]`), `"cells"` int32 `[M, S]` (flat cell of each
    item slot's key or box content, -1 for an unused slot), `"locks"` and `"contents"` int32
    `[M, S]` (abstract colours of each box, content 0 for the gem; 0 for the loose key's slot).
    """

    def __init__(self, config):
        if config.holdout is not None:
            raise invalid_value("holdout", "None with level_source='device' (the held-out "
                                "colour splits are drawn by the NumPy generator only)",
                                config.holdout)
        self.config = config
        anchors, footprints, _, _, room_cells, base = _room_geometry(config.room_size)
        cells = config.frame_size ** 2
        self._anchors = np.array(anchors, np.int32)
        # footprint[c, a]: cell c lies in anchor a's 3 x 4 block [R].
        bits = np.array([[f >> c & 1 for c in range(cells)] for f in footprints], np.float32)
        self._footprint = bits.T.copy()
        self._room = np.zeros(cells, bool)
        self._room[room_cells] = True
        self._base = base.reshape(-1).astype(np.int32)
        self._max_length = max(config.goal_length)
        self._max_branches = max(config.num_distractors)
        self.num_slots = (1 + self._max_length
                          + self._max_branches * config.distractor_length)
        self.seed_generator = keras.random.SeedGenerator(0)

    def sample(self, seed, num_levels):
        """`(bank, info, seed)`: `num_levels` levels from the seed state `seed` (int `[2]`)."""
        # strict: no level is redrawn (the NumPy generator raises instead).
        limit = 1 if self.config.strict else MAX_LEVEL_ATTEMPTS
        levels, attempts, seed = until_accepted(
            lambda s: self._attempt(s, num_levels), seed, limit, self._placeholder(num_levels))
        bank = {key: levels.pop(key) for key in ("grid", "distractor", "agent")}
        levels["attempts"] = attempts
        return bank, levels, seed

    def _placeholder(self, n):
        """Zeros with the structure, shapes and dtypes of `_attempt`'s levels."""
        cells, slots = self.config.frame_size ** 2, self.num_slots
        shapes = dict(grid=((n, cells), "uint8"), distractor=((n, cells), "bool"),
                      agent=((n,), "int32"), goal_length=((n,), "int32"),
                      num_distractors=((n,), "int32"),
                      colors=((n, self.config.num_colors), "int32"), cells=((n, slots), "int32"),
                      locks=((n, slots), "int32"), contents=((n, slots), "int32"))
        return {key: ops.zeros(shape, dtype) for key, (shape, dtype) in shapes.items()}

    def _attempt(self, seed, n):
        with TensorDraws(self.seed_generator, seed, n) as draws:
            L, D, locks, contents, branch = self._problem(draws)
            colors = permutation(draws, self.config.num_colors)
            cells, occupied, ok = self._place(draws, L, D)
            agent = choice(draws, ops.logical_and(ops.convert_to_tensor(self._room)[None, :],
                                                  occupied == 0.0))
        grid, distractor = self._draw_grid(cells, colors, locks, contents, branch)
        levels = dict(grid=grid, distractor=distractor, agent=agent, goal_length=L,
                      num_distractors=D, colors=colors, cells=cells, locks=locks,
                      contents=contents)
        return levels, ok, draws.seed

    def _problem(self, draws):
        """L, D and the symbolic boxes per slot (`generator._sample_boxes`) [R]."""
        config = self.config
        lengths = ops.convert_to_tensor(np.array(config.goal_length, np.int32))
        counts = ops.convert_to_tensor(np.array(config.num_distractors, np.int32))
        L = ops.take(lengths, randint(draws, len(config.goal_length)))
        D = ops.take(counts, randint(draws, len(config.num_distractors)))
        top = config.num_colors - 1  # abstract colours 1..num_colors-1 [R]
        zero = ops.zeros_like(L)
        locks, contents, branch = [zero], [zero], [zero > 0]
        for j in range(1, self._max_length + 1):  # path box j: lock j, key j+1 or the gem
            locks.append(zero + j)
            contents.append(ops.where(L == j, 0, j + 1))
            branch.append(zero > 0)
        for d in range(self._max_branches):
            if config.branching == "forward":
                current = 1 + randint(draws, L)  # off any path key colour [R]
                for _ in range(config.distractor_length):
                    # A new colour in L+1..top, different from the current lock once off the path.
                    off = L + 1 + randint(draws, ops.maximum(top - L - 1, 1))
                    off = off + ops.cast(off >= current, "int32")
                    new = ops.where(current > L, off, L + 1 + randint(draws, top - L))
                    locks.append(current)
                    contents.append(new)
                    branch.append(D > d)
                    current = new
            else:  # a lock no key opens, holding a path key [R]
                locks.append(L + 1 + randint(draws, top - L))
                contents.append(1 + randint(draws, L))
                branch.append(D > d)
        stack = [ops.stack([ops.cast(v, "int32") for v in values], axis=1)
                 for values in (locks, contents)]
        return L, D, stack[0], stack[1], ops.stack(branch, axis=1)

    def _valid_slots(self, L, D):
        """bool `[B, S]`: the slots a level of L path boxes and D branches uses."""
        length = self.config.distractor_length
        slot = np.arange(self.num_slots)
        path = (slot >= 1) & (slot <= self._max_length)
        branch = slot > self._max_length
        index = np.where(path, slot, np.maximum(slot - 1 - self._max_length, 0) // length)
        index = index.astype(np.int32)
        limit = ops.where(ops.convert_to_tensor(path)[None, :], ops.expand_dims(L, 1),
                          ops.expand_dims(D, 1) - 1)
        used = ops.convert_to_tensor(index)[None, :] <= limit
        return ops.logical_or(ops.convert_to_tensor(slot == 0)[None, :],
                              ops.logical_and(ops.convert_to_tensor(path | branch)[None, :], used))

    def _place(self, draws, L, D):
        """Item cells `[B, S]` (-1 unused), occupied cells float32 `[B, F * F]`, accepted `[B]`."""
        valid = self._valid_slots(L, D)
        footprint = ops.convert_to_tensor(self._footprint)
        anchors = ops.convert_to_tensor(self._anchors)
        cells = ops.arange(self._footprint.shape[0], dtype="int32")[None, :]
        num_anchors = float(self._footprint.shape[1])
        occupied = ops.zeros((draws.batch, self._footprint.shape[0]), "float32")
        failed = ops.zeros((draws.batch,), "float32")
        placed = []
        for slot in range(self.num_slots):
            use = valid[:, slot]
            free = ops.matmul(occupied, footprint) < 0.5  # [B, A]: a free 3 x 4 block [R]
            anchor = ops.take(anchors, choice(draws, free))
            p = ops.sum(ops.cast(free, "float32"), axis=1) / num_anchors
            failed = failed + ops.where(use, failures(draws, p), 0.0)
            mark = cells == ops.expand_dims(anchor, 1)
            if slot:  # a box takes its content cell and the lock to its right
                mark = mark | (cells == ops.expand_dims(anchor + 1, 1))
            occupied = occupied + ops.cast(mark & expand_as(use, mark), "float32")
            placed.append(ops.where(use, anchor, -1))
        return ops.stack(placed, axis=1), occupied, failed <= MAX_PLACEMENT_FAILURES

    def _draw_grid(self, cells, colors, locks, contents, branch):
        """The level's grid codes uint8 `[B, F * F]` and distractor lock cells bool."""
        lock0 = self.config.lock0
        index = ops.arange(self._base.shape[0], dtype="int32")[None, :]
        grid = ops.zeros((cells.shape[0], 1), "int32") + self._base[None, :]
        distractor = ops.zeros(grid.shape, "bool")

        def palette(abstract):  # abstract colour k >= 1 -> palette colour colors[k - 1]
            return ops.take_along_axis(colors, ops.expand_dims(ops.maximum(abstract, 1) - 1, 1),
                                       axis=1)[:, 0]

        for slot in range(self.num_slots):
            cell = cells[:, slot:slot + 1]
            if slot == 0:  # the loose key: the colour of the first path lock [R]
                code = KEY0 + palette(ops.ones_like(cell[:, 0]))
            else:
                content = contents[:, slot]
                code = ops.where(content == 0, GEM, KEY0 + palette(content))
                lock = index == cell + 1
                grid = ops.where(lock & (cell >= 0), ops.expand_dims(
                    lock0 + palette(locks[:, slot]), 1), grid)
                distractor = distractor | (lock & ops.expand_dims(branch[:, slot], 1))
            grid = ops.where((index == cell) & (cell >= 0), ops.expand_dims(code, 1), grid)
        return ops.cast(grid, "uint8"), distractor
