"""Level sampling in `keras.ops`: what the on-device BoxWorld generators share.

The NumPy generators (`boxworld.generator`, `bridge_boxworld.generator`) define the level
distributions; `boxworld.tensor_levels` and `bridge_boxworld.tensor_levels` sample the same
distributions for a batch of levels at once, in `keras.ops` and `keras.random` only, so they run
eagerly or inside `jax.jit` / `tf.function(jit_compile=True)` on any Keras backend. The random
stream differs from NumPy's; the distribution is the same (the tests compare both).

Randomness is stateless: a sampler takes a seed state (the state of a `keras.random.SeedGenerator`,
int `[2]`, see `seed_state`) and returns the advanced one, like the compiled loop's acting.
The building blocks, each a transcription of one NumPy draw:

* `randint(draws, n)`: `Draws.randint(n)` for a batch, with `n` per level.
* `choice(draws, mask)`: a uniform index among the True entries of each row, i.e. rejection
  sampling of a uniform index until it hits the mask (`argmax` of masked uniform noise).
* `permutation(draws, n)`: `Draws.shuffle(range(n))` (`argsort` of uniform noise).
* `failures(draws, p)`: how many tries a rejection loop with success probability `p` fails before
  it succeeds (geometric), so a generator that counts failed placement tries can be mirrored
  without running the tries.
* `until_accepted`: the NumPy generators' "discard the level and draw a new one" loop, as one
  `keras.ops.while_loop` over the whole batch (every round redraws the levels not yet accepted).
"""

import keras
import numpy as np
from keras import ops

from .tensor_ops import row_select


def seed_state(seed):
    """The seed state int `[2]` of `keras.random.SeedGenerator(seed)` (an int), as a tensor."""
    dtype = keras.random.SeedGenerator(0).state.dtype
    seed = (int(seed) & 0xFFFFFFFF ^ 0x80000000) - 0x80000000 if dtype == "int32" else int(seed)
    return ops.convert_to_tensor(np.array([seed, 0]), dtype=dtype)


class TensorDraws:
    """Uniform draws for a batch of `batch` levels from a seed state (a context manager).

    Inside `with TensorDraws(generator, seed, batch) as draws:` every draw advances the seed;
    `draws.seed` is the advanced state after the block.
    """

    def __init__(self, generator, seed, batch):
        self.generator = generator
        self.batch = batch
        self.seed = seed
        self._scope = None

    def __enter__(self):
        self._scope = keras.StatelessScope(state_mapping=[(self.generator.state, self.seed)])
        self._scope.__enter__()
        return self

    def __exit__(self, *exc):
        self.seed = self._scope.get_current_value(self.generator.state)
        return self._scope.__exit__(*exc)

    def uniform(self, shape=()):
        """float32 uniform in [0, 1), shape `(batch,) + shape`."""
        return keras.random.uniform((self.batch,) + tuple(shape), seed=self.generator)


def randint(draws, n):
    """int32 `[B]` uniform in [0, n) (`n` an int or int `[B]`, >= 1), as `Draws.randint`."""
    n = ops.cast(n, "float32")
    value = ops.floor(draws.uniform() * n)
    return ops.cast(ops.minimum(value, n - 1.0), "int32")  # float rounding never reaches n


def choice(draws, mask):
    """int32 `[B]`: a uniform index among the True entries of each row of bool `[B, A]` (any
    index where a row has none)."""
    noise = draws.uniform(tuple(mask.shape[1:]))
    return ops.cast(ops.argmax(ops.where(mask, noise, -1.0), axis=1), "int32")


def permutation(draws, n):
    """int32 `[B, n]`: a uniform random permutation of 0..n-1 per row."""
    return ops.cast(ops.argsort(draws.uniform((n,)), axis=1), "int32")


def failures(draws, p):
    """float32 `[B]`: failed tries before the first success at success probability `p` `[B]`
    (geometric on 0, 1, ...; `inf` where `p` is 0)."""
    u = draws.uniform()
    safe = ops.clip(p, 1e-12, 1.0 - 1e-7)
    count = ops.floor(ops.log1p(-u) / ops.log1p(-safe))
    return ops.where(p >= 1.0, 0.0, ops.where(p <= 0.0, np.inf, count))


def until_accepted(sample, seed, max_attempts, placeholder):
    """Levels from `sample(seed) -> (levels, accepted [B], seed)`, redrawn until accepted.

    `placeholder` is a dict of tensors with the structure, shapes and dtypes of `sample`'s
    `levels` (its values are never returned). Returns `(levels, attempts, seed)`: `attempts`
    int32 `[B]` is the round that gave each level (1 if the first draw was accepted),
    `max_attempts + 1` where no round in `max_attempts` was (such a level is the first round's
    draw).
    """
    # Every round, the first one too, is the loop's body: `sample` is traced once, not twice
    # (a compiled program holds one copy of the sampler, and compiles faster).
    def cond(count, seed, accepted, attempts, levels):
        return ops.logical_and(count < max_attempts, ops.logical_not(ops.all(accepted)))

    def body(count, seed, accepted, attempts, levels):
        drawn, ok, seed = sample(seed)
        take = ok & ~accepted
        keep = take | (count == 0)  # the first round fills every row
        levels = {key: row_select(keep, drawn[key], levels[key]) for key in levels}
        attempts = ops.cast(ops.where(take, count + 1, attempts), "int32")
        return count + 1, seed, accepted | ok, attempts, levels

    batch = next(iter(placeholder.values())).shape[0]
    start = (ops.convert_to_tensor(0, "int32"), seed, ops.zeros((batch,), "bool"),
             ops.full((batch,), max_attempts + 1, "int32"), dict(placeholder))
    _, seed, _, attempts, levels = ops.while_loop(cond, body, start)
    return levels, attempts, seed
