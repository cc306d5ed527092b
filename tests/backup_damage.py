"""Damage done to a run's newest backup in the fault tests, as a disk fault would do it."""

import os

import numpy as np

DAMAGES = ("truncated", "random", "garbage")


def damage_newest_backup(backup, how, rng=None):
    """Spoils the newest backup in ``backup`` as a disk fault would: its weights ``truncated`` to
    half or overwritten with ``random`` bytes, or ``garbage`` in its ``training_metadata.json``
    (the binaries' fault tests use it too)."""
    rng = rng or np.random.default_rng(0)
    weights = os.path.join(backup, "latest.weights.h5")
    if how == "truncated":
        with open(weights, "r+b") as f:
            f.truncate(os.path.getsize(weights) // 2)
    elif how == "random":
        with open(weights, "wb") as f:
            f.write(rng.integers(0, 256, os.path.getsize(weights), dtype=np.uint8).tobytes())
    elif how == "garbage":
        with open(os.path.join(backup, "training_metadata.json"), "wb") as f:
            f.write(b"\x00\xff{not json")
    else:
        raise ValueError(f"how must be truncated, random or garbage, received {how!r}.")
