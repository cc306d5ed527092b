"""Argument validation shared by the whole package: layers, models, environments, agents, binaries.

Every check raises a ``ValueError`` whose message names the owner (a class or function), the
argument, what was expected and what was received. Pure Python: importing this module loads
neither Keras nor TensorFlow, so the environments use it too.
"""

import math


def check_rank(layer, argument, shape, rank, layout):
    """Raises a ValueError unless ``shape`` has exactly ``rank`` dimensions."""
    if shape is None or len(shape) != rank:
        received = None if shape is None else tuple(shape)
        raise ValueError(
            f"{type(layer).__name__} expects `{argument}` of rank {rank} ({layout}), "
            f"received shape {received}."
        )


def check_known_dim(layer, argument, shape, axis, meaning):
    """Raises a ValueError if dimension ``axis`` of ``shape`` is not known when building."""
    if shape[axis] is None:
        raise ValueError(
            f"{type(layer).__name__} needs the {meaning} (axis {axis}) of `{argument}` to be "
            f"known when it is built, received shape {tuple(shape)}."
        )
    return int(shape[axis])


def check_positive_int(owner, argument, value, allow_none=False):
    """Raises a ValueError unless ``value`` is a positive int (or None when allowed)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"{owner} expects `{argument}` to be a positive integer"
            f"{' or None' if allow_none else ''}, received {argument}={value!r}."
        )


def check_positive_number(owner, argument, value, allow_zero=False):
    """Raises a ValueError unless ``value`` is a finite real number > 0 (or >= 0)."""
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
          and math.isfinite(value) and (value > 0 or (allow_zero and value == 0)))
    if not ok:
        kind = "non-negative" if allow_zero else "positive"
        raise ValueError(
            f"{owner} expects `{argument}` to be a finite {kind} number, "
            f"received {argument}={value!r}."
        )


def check_choice(owner, argument, value, choices):
    """Raises a ValueError unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(
            f"{owner} expects `{argument}` to be one of {tuple(choices)}, "
            f"received {argument}={value!r}."
        )
