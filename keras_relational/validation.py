"""Argument validation shared by the whole package: layers, models, environments, agents, binaries.

Every check raises a ``ValueError`` whose message names the argument, what was expected and what
was received; the layers' checks name their owner (a class or function) too, the environment
configurations' checks use the configuration class as the owner and say "`argument`: expected ...,
received ...". Pure Python: importing this module loads
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


def check_positive_int(owner, argument, value, allow_none=False, allow_zero=False):
    """Raises a ValueError unless ``value`` is a positive int (or 0, or None, when allowed)."""
    if value is None and allow_none:
        return
    lowest = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
        kind = "non-negative" if allow_zero else "positive"
        raise ValueError(
            f"{owner} expects `{argument}` to be a {kind} integer"
            f"{' or None' if allow_none else ''}, received {argument}={value!r}."
        )


def check_positive_int_sequence(owner, argument, values, allow_empty=True):
    """Raises a ValueError unless ``values`` is a list or tuple of positive ints (layer widths).

    An empty sequence is accepted unless ``allow_empty`` is False.
    """
    if not isinstance(values, (list, tuple)) or (not values and not allow_empty):
        raise ValueError(
            f"{owner} expects `{argument}` to be a {'' if allow_empty else 'non-empty '}list of "
            f"positive integers, received {argument}={values!r}."
        )
    for value in values:
        check_positive_int(owner, argument, value)


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


# The Keras dtype policies the training binaries and train_eval functions accept (--dtype_policy).
DTYPE_POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")
# Every trainer's and binary's default: float32 throughout (the papers trained in float32).
DEFAULT_DTYPE_POLICY = DTYPE_POLICIES[0]


def check_dtype_policy(owner, value, argument="dtype_policy"):
    """Raises a ValueError unless ``value`` is one of :data:`DTYPE_POLICIES`."""
    check_choice(owner, argument, value, DTYPE_POLICIES)


# The attention options of keras_relational.MultiHeadDotProductAttention, checked here once for
# every layer that forwards them (relational block and module, 2-simplicial Transformer block).
QKV_NORMS = ("joint", "separate", "none")
ATTENTION_SCALES = ("key_dim", "rmc", None)


def check_attention_arguments(owner, num_heads, key_dim, value_dim, qkv_norm, attention_scale):
    """Raises a ValueError naming the first invalid multi-head attention argument."""
    check_positive_int(owner, "num_heads", num_heads)
    check_positive_int(owner, "key_dim", key_dim)
    check_positive_int(owner, "value_dim", value_dim, allow_none=True)
    check_choice(owner, "qkv_norm", qkv_norm, QKV_NORMS)
    check_choice(owner, "attention_scale", attention_scale, ATTENTION_SCALES)


def check_logit_arguments(owner, logit_scale, sqrt_epsilon):
    """Raises a ValueError unless ``logit_scale > 0`` and ``sqrt_epsilon >= 0`` (2-simplicial)."""
    check_positive_number(owner, "logit_scale", logit_scale)
    check_positive_number(owner, "sqrt_epsilon", sqrt_epsilon, allow_zero=True)


def check_num_virtual_entities(owner, value, virtual, unless, received_context=""):
    """Checks the number M of virtual entities of the 2-simplicial layers.

    With ``virtual`` True, ``value`` must be a positive int or None (None means the default M,
    see ``keras_relational.layers.simplicial_attention.resolve_num_virtual_entities``); otherwise
    there are no virtual entities and ``value`` must be None or 0. ``unless`` says in words when
    virtual entities exist, ``received_context`` adds the arguments that decided it.
    """
    if virtual:
        check_positive_int(owner, "num_virtual_entities", value, allow_none=True)
    elif value not in (None, 0) or isinstance(value, bool):
        raise ValueError(
            f"{owner} expects `num_virtual_entities` to be None or 0 {unless}, received "
            f"num_virtual_entities={value!r}{received_context}."
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


def check_window(owner, window):
    """Raises a ValueError unless ``window`` is None or a pair ``(w1, w2)`` of positive ints."""
    ok = window is None or (
        isinstance(window, (list, tuple)) and len(window) == 2
        and all(isinstance(w, int) and not isinstance(w, bool) and w >= 1 for w in window))
    if not ok:
        raise ValueError(
            f"{owner} expects `window` to be None or a pair (w1, w2) of positive integers, "
            f"received window={window!r}."
        )


def check_divides(owner, argument, value, multiple_argument, multiple):
    """Raises a ValueError unless the positive int ``value`` divides ``multiple``."""
    check_positive_int(owner, argument, value)
    if multiple % value:
        raise ValueError(
            f"{owner} expects `{argument}` to divide {multiple_argument}={multiple}, "
            f"received {argument}={value!r}."
        )
def check_number_in_range(argument, value, low=None, high=None, integer=False,
                          allow_none=False, owner=None, low_exclusive=False):
    """``value`` unchanged if it is a finite number (an int when ``integer``) in ``[low, high]``.

    Either bound may be None (unbounded); ``low_exclusive`` makes the range ``(low, high]``.
    The ``ValueError`` names the argument (and ``owner`` when given), the expected range and the
    received value; NaN and infinities never pass.
    """
    if value is None and allow_none:
        return value
    if integer:
        ok = _is_int(value)
    else:
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and \
            math.isfinite(value)
    ok = ok and (low is None or value > low or (value == low and not low_exclusive)) and (
        high is None or value <= high)
    if not ok:
        kind = "an integer" if integer else "a finite number"
        if low is not None and high is not None:
            expected = f"{kind} in {'(' if low_exclusive else '['}{low}, {high}]"
        elif low is not None:
            expected = f"{kind} {'>' if low_exclusive else '>='} {low}"
        elif high is not None:
            expected = f"{kind} <= {high}"
        else:
            expected = kind
        if allow_none:
            expected += " or None"
        error = invalid_value(argument, expected, value)
        if owner is not None:
            error = ValueError(f"{owner}: {error}")
        raise error
    return value


def parse_int_list(argument, values, minimum=None, maximum=None):
    """``values`` (strings or ints, e.g. a flag's ``"1,2"`` split at commas) as a tuple of ints.

    Raises a ``ValueError`` naming ``argument`` with the offending item, e.g. for
    ``--goal_length=abc``: "`goal_length`: expected a comma-separated list of integers >= 1,
    received 'abc'.".
    """
    if isinstance(values, str):
        values = [v for v in values.split(",") if v.strip()] if values.strip() else []
    bounds = [f">= {minimum}" if minimum is not None else "",
              f"<= {maximum}" if maximum is not None else ""]
    expected = " ".join(["a non-empty comma-separated list of integers",
                         " and ".join(b for b in bounds if b)]).strip()
    parsed = []
    for value in values:
        try:
            number = int(str(value).strip(), 10) if not _is_int(value) else int(value)
        except ValueError:
            raise invalid_value(argument, expected, ",".join(str(v) for v in values)) from None
        if (minimum is not None and number < minimum) or (
                maximum is not None and number > maximum):
            raise invalid_value(argument, expected, ",".join(str(v) for v in values))
        parsed.append(number)
    if not parsed:
        raise invalid_value(argument, expected, ",".join(str(v) for v in values))
    return tuple(parsed)


def check_seed(argument, seed, allow_none=True):
    """``seed`` as an int in ``[0, 2**32)`` (NumPy's ``RandomState`` range), or None."""
    if seed is None and allow_none:
        return None
    return check_number_in_range(argument, seed, 0, 2**32 - 1, integer=True)


def offset_seed(argument, seed, offset, scale=1):
    """The derived seed ``(seed * scale + offset) mod 2**32`` of a checked ``seed``.

    Every seed a program derives from a user's seed (evaluation levels, restarts, data splits)
    goes through here: a seed near ``2**32 - 1`` wraps around instead of overflowing NumPy's
    range, the same way everywhere.
    """
    seed = check_seed(argument, seed, allow_none=False)
    return int((int(seed) * int(scale) + int(offset)) % 2**32)


def check_mask_shape(layer, mask_shape, entities_shape, argument="mask", of="entities"):
    """Raises a ValueError unless a Keras mask ``[B, T]`` fits entities ``[B, T, F]``.

    Unknown (None) dimensions on either side are not compared; the check runs when a layer is
    called (trace time for compiled functions).
    """
    if mask_shape is None:
        return
    mask_shape, expected = tuple(mask_shape), tuple(entities_shape)[:2]
    fits = len(mask_shape) == 2 and all(m is None or e is None or int(m) == int(e)
                                        for m, e in zip(mask_shape, expected, strict=False))
    if not fits:
        raise ValueError(
            f"{type(layer).__name__} expects `{argument}` of shape [batch, {of}] = "
            f"{expected} (the first two axes of `{of}`), received shape {mask_shape}.")


def check_layer_norm_epsilon(owner, value):
    """Raises a ValueError unless a layer norm's ``epsilon`` is a finite number > 0."""
    check_positive_number(owner, "layer_norm_epsilon", value)


def check_built_shape(layer, argument, shape, built, meaning):
    """Raises a ValueError if ``shape``'s known dimensions differ from those the layer was built
    for (``built``: the expected shape, None for any size; ``meaning`` names them in words)."""
    shape = tuple(shape)
    if len(shape) != len(built) or any(b is not None and s is not None and int(s) != b
                                       for s, b in zip(shape, built, strict=True)):
        raise ValueError(
            f"{type(layer).__name__} was built for `{argument}` of shape {tuple(built)} "
            f"({meaning}) and cannot be called on shape {shape}: build a new layer for "
            f"another size.")


def check_mask_dtype(layer, argument, dtype):
    """Raises a ValueError unless a mask's dtype (a standardised name, e.g. ``"float32"``) is
    boolean or integer.

    Masks are boolean, as in ``keras.layers.MultiHeadAttention``: True (or a non-zero integer)
    means "may attend" / "is an entity". A float mask is refused rather than cast: an additive
    mask (0 to attend, a large negative number to block) cast to bool means its opposite.
    """
    if dtype == "bool" or dtype.startswith(("int", "uint")):
        return
    meaning = "True: may attend" if argument == "attention_mask" else "True: an entity, " \
        "False: padding"
    raise ValueError(
        f"{type(layer).__name__} expects `{argument}` to be boolean ({meaning}; an integer "
        f"1/0 means the same), received dtype {dtype}. Float masks are refused: an "
        f"additive mask (0: attend, a large negative number: blocked) cast to bool would mean "
        f"its opposite; pass `additive_mask == 0` for one.")


def check_attention_mask_shape(layer, mask_shape, entities_shape, argument="attention_mask"):
    """Raises a ValueError unless an attention mask fits entities ``[B, N, F]``: ``[N, N]``,
    ``[1, N, N]`` or ``[B, N, N]`` (unknown dimensions are not compared)."""
    if mask_shape is None:
        return
    mask_shape = tuple(mask_shape)
    batch, count = tuple(entities_shape)[:2]

    def same(received, expected):
        return received is None or expected is None or int(received) == int(expected)

    fits = len(mask_shape) in (2, 3) and all(same(d, count) for d in mask_shape[-2:]) and (
        len(mask_shape) == 2 or mask_shape[0] is None or int(mask_shape[0]) == 1
        or same(mask_shape[0], batch))
    if not fits:
        raise ValueError(
            f"{type(layer).__name__} expects `{argument}` of shape [{count}, {count}], "
            f"[1, {count}, {count}] or [batch, {count}, {count}] = {(batch, count, count)} for "
            f"entities of shape {tuple(entities_shape)}, received shape {mask_shape}.")


def check_entity_count(layer, argument, shape, minimum=1):
    """Raises a ValueError if the known entity count (axis 1) of ``shape`` is below ``minimum``."""
    if shape[1] is not None and int(shape[1]) < minimum:
        raise ValueError(
            f"{type(layer).__name__} expects `{argument}` with at least {minimum} "
            f"entit{'y' if minimum == 1 else 'ies'} (axis 1), received shape {tuple(shape)}.")


def check_grid_cell(argument, value, rows, cols):
    """``value`` as a ``(row, col)`` pair of ints inside a ``rows x cols`` grid."""
    try:
        pair = tuple(value)
    except TypeError:
        pair = ()
    if len(pair) != 2 or not all(_is_int(v) for v in pair) or not (
            0 <= pair[0] < rows and 0 <= pair[1] < cols):
        raise invalid_value(argument, f"a (row, col) pair of integers with 0 <= row < {rows} "
                                      f"and 0 <= col < {cols}", value)
    return int(pair[0]), int(pair[1])
