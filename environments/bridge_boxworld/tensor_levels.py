"""The bridge BoxWorld level generator in `keras.ops`: `generator.generate_level` for a batch.

The same distribution as the NumPy generator (Clift et al. 2020, Sec. 3; the authors' code [C]),
in its order of choices: L, the anchors (shuffled until the first one, the gem's top row, is not
in the last anchor column or row; the anchor two rows below it dropped), the colour permutation,
the bridge (probability `bridge_probability`, lock b ~ U{1..L}, key c ~ U{L+1..2L}). The re-shuffle
is a conditional draw here: the first anchor uniform among the allowed ones, the others in a
uniform random order.
"""

import keras
import numpy as np
from keras import ops

from ..tensor_random import TensorDraws, choice, permutation, randint
from .config import EMPTY, GEM


class BridgeLevelSampler:
    """Samples bridge BoxWorld levels of a `BridgeConfig` in `keras.ops`.

    `sample(seed, num_levels)` is pure (jit-compilable): `(bank, info, seed)` with `bank` the
    `TensorBridgeBoxWorld` bank (`"grid"` int8 `[M, rows * cols]`, `"bridge"` int32 `[M]`,
    `"colors"` int32 `[M, num_colors]`) and `info`: `"solution_length"` int32 `[M]`, `"anchors"`
    int32 `[M, A - 1]` (flat key cells in the generator's order: the gem's top row first, the
    dropped anchor left out), `"bridge_colors"` int32 `[M, 2]` ((b, c), 0 without a bridge).
    """

    def __init__(self, config):
        self.config = config
        rows, cols = config.rows, config.cols
        anchors = [(y, x) for x in range(1, cols - 1, 3) for y in range(1, rows, 2)]
        self._anchors = np.array([y * cols + x for y, x in anchors], np.int32)
        self._first = np.array([x <= cols - 3 and y <= rows - 3 for y, x in anchors])
        # below[a]: the index of the anchor two rows below anchor a (the one dropped) [C].
        self._below = np.array([anchors.index((y + 2, x)) if (y + 2, x) in anchors else 0
                                for y, x in anchors], np.int32)
        self._max_length = max(config.solution_length)
        self.seed_generator = keras.random.SeedGenerator(0)

    def sample(self, seed, num_levels):
        """`(bank, info, seed)`: `num_levels` levels from the seed state `seed` (int `[2]`)."""
        config, n = self.config, num_levels
        num_anchors = len(self._anchors)
        with TensorDraws(self.seed_generator, seed, n) as draws:
            if config.puzzle_type is not None:
                L = ops.full((n,), config.puzzle_type[0], "int32")
            else:
                lengths = ops.convert_to_tensor(np.array(config.solution_length, np.int32))
                L = ops.take(lengths, randint(draws, len(config.solution_length)))
            first = choice(draws, ops.logical_or(ops.zeros((n, 1), "bool"),
                                                 ops.convert_to_tensor(self._first)[None, :]))
            below = ops.take(ops.convert_to_tensor(self._below), first)
            index = ops.arange(num_anchors, dtype="int32")[None, :]
            drop = (index == ops.expand_dims(first, 1)) | (index == ops.expand_dims(below, 1))
            order = ops.argsort(ops.where(drop, 2.0, draws.uniform((num_anchors,))), axis=1)
            order = ops.concatenate([ops.expand_dims(first, 1),
                                     ops.cast(order[:, :num_anchors - 2], "int32")], axis=1)
            cells = ops.take(ops.convert_to_tensor(self._anchors), order)
            colors = permutation(draws, config.num_colors)
            if config.puzzle_type is not None:
                b = ops.full((n,), config.puzzle_type[1], "int32")
                c = ops.full((n,), config.puzzle_type[2], "int32")
            else:
                bridge = draws.uniform() < config.bridge_probability
                b = ops.where(bridge, 1 + randint(draws, L), 0)
                c = ops.where(bridge, L + 1 + randint(draws, L), 0)
        grid = self._draw_grid(cells, L, b, c)
        slot = ops.minimum(2 * L + 1, cells.shape[1] - 1)
        last = ops.take_along_axis(cells, ops.expand_dims(slot, 1), axis=1)[:, 0]
        bank = dict(grid=ops.cast(grid, "int8"),
                    bridge=ops.cast(ops.where(b > 0, last + 1, -1), "int32"), colors=colors)
        info = dict(solution_length=ops.cast(L, "int32"), anchors=cells,
                    bridge_colors=ops.cast(ops.stack([b, c], axis=1), "int32"))
        return bank, info, draws.seed

    def _draw_grid(self, cells, L, b, c):
        """int32 `[B, rows * cols]` abstract codes: -1 empty, 0 gem, 1..2L colours [C]."""
        cols = self.config.cols
        grid = ops.full((cells.shape[0], self.config.rows * cols), EMPTY, "int32")
        index = ops.arange(grid.shape[1], dtype="int32")[None, :]

        def put(cell, code, mask):
            hit = (index == ops.expand_dims(cell, 1)) & ops.expand_dims(mask, 1)
            return ops.where(hit, ops.expand_dims(ops.cast(code, "int32"), 1), grid)

        # Position n of the anchor order: box n (key n, lock n + 1) of the top chain (n < L) or
        # of the bottom chain (L < n < 2L), the loose key L or 2L, then the bridge (key c, lock
        # b); the gem's top row is box 0 (key GEM).
        for n in range(min(2 * self._max_length + 2, cells.shape[1])):
            cell = cells[:, n]
            loose = (n == L) | (n == 2 * L)
            chain = n < 2 * L
            bridge = (n == 2 * L + 1) & (b > 0)
            key = ops.where(bridge, c, n)
            grid = put(cell, key, chain | loose | bridge)
            grid = put(cell + 1, ops.where(bridge, b, n + 1), (chain & ~loose) | bridge)
        gem = cells[:, 0] + cols  # the gem's bottom row: the gem and lock L + 1 [C]
        grid = put(gem, ops.zeros_like(L) + GEM, ops.ones_like(L) > 0)
        return put(gem + 1, L + 1, ops.ones_like(L) > 0)
