"""Level banks for the compiled loop: drawn by the NumPy generator ahead of use, on a host thread,
or by the on-device generator (``level_source="device"``), compiled.

The NumPy generator defines the level distribution (Zambaldi et al. 2019, Sec. 3.1); the
environment's ``level_source`` says which generator draws the banks (the device one samples the
same distribution in ``keras.ops``). The compiled update reads levels from a bank, a pytree of
arrays passed as an argument. Bank ``k`` of a run is drawn with the seed ``(seed, k)``, so a run's
levels depend on its seed only, and the position ``(bank index, levels used)`` is all a checkpoint
needs to carry on with the same levels after a restart. The NumPy banks come from the
environments' one prefetcher (:class:`keras_relational.environments.level_banks.BankStream`).
"""

import keras

from keras_relational.agents.compiled import backend
from keras_relational.environments.level_banks import bank_seed
from keras_relational.environments.tensor_random import seed_state


class LevelBanks:
    """The current bank and the next one, drawn in a background thread while the device runs.

    A bank serves compiled calls until the levels it has left could run out within the next
    one; then the next bank takes over (every episode gets a level no episode played before).
    :meth:`for_config` builds it from a ``CompiledConfig``.

    Args:
        environment: a tensor BoxWorld (``level_bank(num_levels, seed)``).
        levels_per_bank: levels per bank.
        max_levels_per_call: the most levels one compiled call (its updates) can start.
        seed: the run's seed.
        bank_index, levels_used: where to start (a checkpoint's :attr:`position`); a fresh run
            starts bank 0 with the levels its ``reset`` takes.
    """

    def __init__(self, environment, levels_per_bank, max_levels_per_call, seed, bank_index=0,
                 levels_used=0):
        self._environment = environment
        self._levels_per_bank = levels_per_bank
        self._max_levels_per_call = max_levels_per_call
        self._seed = seed
        self.bank_index = bank_index
        self.levels_used = levels_used
        self._sample = self._stream = None
        if environment.level_source == "device":  # compiled once; drawn when needed
            self._sample = backend.compile_function(
                lambda seed: environment.sample_levels(seed, levels_per_bank), donate_state=False)
        else:  # the NumPy generator draws the next bank in a host thread
            self._stream = environment.bank_stream(levels_per_bank, seed, prefetch=1,
                                                   start=bank_index)
        self.bank = self._to_device(self._draw())

    @classmethod
    def for_config(cls, environment, config, bank_index=0, levels_used=0):
        """The banks of a run of ``config`` (a ``CompiledConfig``: its bank size, the levels
        one of its compiled calls can start, its seed), from ``(bank_index, levels_used)``."""
        return cls(environment, config.levels_per_bank, config.max_levels_per_call, config.seed,
                   bank_index, levels_used)

    def _draw(self):
        """Bank ``bank_index``: the stream's next, or drawn by the device now."""
        if self._stream is not None:
            return next(self._stream)
        bank, info, _ = self._sample(seed_state(bank_seed(self._seed, self.bank_index)))
        self._environment.check_sample(info)
        return bank

    @staticmethod
    def _to_device(bank):
        return {key: keras.ops.convert_to_tensor(value) for key, value in bank.items()}

    def for_update(self):
        """The bank the next compiled call reads (the next bank once this one could run out)."""
        if self.levels_used + self._max_levels_per_call > self._levels_per_bank:
            self.bank_index += 1
            self.levels_used = 0
            self.bank = self._to_device(self._draw())
        return self.bank

    def record(self, levels_started):
        """Accounts the levels an update started."""
        self.levels_used += int(levels_started)

    @property
    def position(self):
        """``dict(bank_index, levels_used)``: what a checkpoint stores."""
        return dict(bank_index=self.bank_index, levels_used=self.levels_used)

    def close(self):
        """Stops the background thread (after the bank it is drawing)."""
        if self._stream is not None:
            self._stream.close()
