"""Argument validation shared by the whole package: layers, models, environments, agents, binaries.

Every check raises a ``ValueError`` whose message names the owner (a class or function), the
argument, what was expected and what was received. Pure Python: importing this module loads
neither Keras nor TensorFlow, so the environments use it too.
"""

import math
import numbers


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


# Environment configurations (keras_relational.environments) word their errors as
# "`argument`: expected <what>, received <value>." (the configuration class is the owner). Integers
# may be NumPy integers: `numbers.Integral` covers them without importing NumPy.


def invalid_value(argument, expected, received):
    """The ``ValueError`` "`argument`: expected ``expected``, received ``received!r``."."""
    return ValueError(f"`{argument}`: expected {expected}, received {received!r}.")


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_int_tuple(argument, value, minimum):
    """``value`` (an int or a non-empty sequence of ints), as a tuple of ints >= ``minimum``."""
    try:
        values = (value,) if isinstance(value, str) else tuple(value)
    except TypeError:  # a scalar
        values = (value,)
    if not values or not all(_is_int(v) and v >= minimum for v in values):
        raise invalid_value(
            argument, f"an integer >= {minimum} or a non-empty sequence of them", value)
    return tuple(int(v) for v in values)


def check_int_at_least(argument, value, minimum):
    """``value`` as an int >= ``minimum`` (a NumPy integer is accepted)."""
    if not _is_int(value) or value < minimum:
        raise invalid_value(argument, f"an integer >= {minimum}", value)
    return int(value)


def check_int_in_range(argument, value, low, high):
    """``value`` as an int in ``[low, high]``."""
    if not _is_int(value) or not low <= value <= high:
        raise invalid_value(argument, f"an integer in [{low}, {high}]", value)
    return int(value)


def check_fraction(argument, value):
    """``value`` as a float in ``[0, 1]`` (a probability or a discount)."""
    if not 0.0 <= float(value) <= 1.0:
        raise invalid_value(argument, "a float in [0, 1]", value)
    return float(value)


def check_one_of(argument, value, choices):
    """``value`` unchanged if it is one of ``choices``; the error lists them ("'a' or 'b'")."""
    if value not in choices:
        names = [repr(choice) for choice in choices]
        expected = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
        raise invalid_value(argument, expected, value)
    return value
