"""Level banks drawn ahead of use: the one prefetcher of every tensor BoxWorld loop.

A loop that steps a tensor BoxWorld inside a compiled function reads its levels from a bank (a
dict of arrays, `TensorLevelEnvironment.level_bank`). Bank k of a run is drawn with the seed
`bank_seed(seed, k)`, so a run's levels depend on its seed only, and the bank index is all a
checkpoint needs to carry on with the same levels. `BankStream` draws the banks in a host thread
while the device runs (the compiled trainer's `LevelBanks`, the TF-Agents tensor environment,
the benchmarks). Pure Python and NumPy.
"""

import queue
import threading

import numpy as np

from keras_relational.validation import check_int_at_least

# Where a tensor BoxWorld draws its levels: the NumPy generator on the host, or `keras.ops` on the
# device (`TensorLevelEnvironment.level_source`).
LEVEL_SOURCES = ("numpy", "device")
DEFAULT_LEVEL_SOURCE = LEVEL_SOURCES[0]  # the NumPy generator: levels as the dm_env ones
# A bank holds the levels of this many draws of the most a loop can start between two checks
# (an unroll, or a compiled call of several): the next bank is drawn far less often than used.
DRAWS_PER_BANK = 8


def max_levels_started(num_envs, steps):
    """The most episodes ``num_envs`` auto-resetting environments can start in ``steps`` steps:
    an episode takes at least one action and the restart step, so a slot starts at most
    ``steps // 2 + 1``."""
    return num_envs * (steps // 2 + 1)


def default_bank_size(max_levels_per_draw):
    """Levels per bank when none is given: :data:`DRAWS_PER_BANK` draws of
    ``max_levels_per_draw`` (the most levels the loop can start between two bank checks)."""
    return DRAWS_PER_BANK * max_levels_per_draw


def bank_seed(seed, index):
    """The generator seed of bank `index` of a run seeded `seed`."""
    return int(np.random.SeedSequence([int(seed), int(index)]).generate_state(1)[0])


class BankStream:
    """An iterator of level banks drawn ahead in a background thread.

    Bank k is `env.level_bank(num_levels, bank_seed(seed, k))` for k = `start`, `start` + 1, ...,
    so the stream is deterministic and a resumed run continues it from its bank index. `prefetch`
    banks are kept ready; the thread (a daemon) only runs Python/NumPy, which a compiled device
    step does not block.
    """

    def __init__(self, env, num_levels, seed, prefetch=2, start=0):
        self._env = env
        self._num_levels = check_int_at_least("num_levels", num_levels, 1)
        self._seed = int(seed)
        self._start = check_int_at_least("start", start, 0)
        self._queue = queue.Queue(maxsize=check_int_at_least("prefetch", prefetch, 1))
        self._stop = threading.Event()
        self._error = None
        self._thread = threading.Thread(target=self._fill, daemon=True)
        self._thread.start()

    def _fill(self):
        k = self._start
        try:
            while not self._stop.is_set():
                bank = self._env.level_bank(self._num_levels, bank_seed(self._seed, k))
                while not self._stop.is_set():
                    try:
                        self._queue.put(bank, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                k += 1
        except Exception as error:  # surfaced by __next__
            self._error = error
            self._queue.put(None)

    def __iter__(self):
        return self

    def __next__(self):
        bank = self._queue.get()
        if bank is None:
            raise RuntimeError("drawing a level bank failed") from self._error
        return bank

    def close(self):
        """Stops the background thread."""
        self._stop.set()
