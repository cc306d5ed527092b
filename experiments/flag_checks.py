"""The binaries' shared flag checks: every flag is checked when it is parsed.

``define_int_list`` and ``define_dtype_policy_flag`` define flags; ``require_ranges``,
``require_subset``, ``require_only_for``, ``require_only_with``, ``require_exactly_one``,
``require_existing_file`` and ``require_writable_file`` register absl validators, so a bad flag is
an absl error at parsing, naming the flag, the expected and the received value, before anything
is built, loaded or trained. The checks themselves are :mod:`keras_relational.validation`'s.
"""

import os
import sys

from absl import flags

from keras_relational import validation

# Flag validation, registered once per binary through the helpers below, so a bad flag is an
# absl error at parsing ("flag --episodes=-3: `episodes`: expected an integer >= 0, received -3.")
# before anything is built, loaded or trained. The checks themselves are
# keras_relational.validation's.


class IntListParser(flags.ListParser):
    """Parses ``"1,2,3"`` into a list of ints (in ``[minimum, maximum]`` when given)."""

    def __init__(self, name, minimum=None, maximum=None):
        super().__init__()
        self._name, self._minimum, self._maximum = name, minimum, maximum

    def parse(self, argument):
        values = argument if isinstance(argument, (list, tuple)) else super().parse(argument)
        return list(validation.parse_int_list(self._name, values, self._minimum, self._maximum))

    def flag_type(self):
        return "comma-separated list of integers"


def define_int_list(name, default, help_text, minimum=None, maximum=None,
                    flag_values=flags.FLAGS):
    """An absl list flag whose value is a list of ints (``--goal_length=1,2``), checked when
    parsed: ``--goal_length=abc`` is a clear error naming the flag."""
    default = None if default is None else ",".join(str(v) for v in default)
    # The defining module, named as absl names it (``__main__`` as ``sys.argv[0]``), so that the
    # flag is one of the binary's key flags in ``--help`` under ``python -m`` too.
    module_name = sys._getframe(1).f_globals.get("__name__")
    if module_name == "__main__":
        module_name = sys.argv[0]
    flags.DEFINE(IntListParser(name, minimum, maximum), name, default, help_text,
                 flag_values=flag_values, serializer=flags.CsvListSerializer(","),
                 module_name=module_name)


def _register(name, check, flag_values):
    def checker(value):
        try:
            check(value)
        except ValueError as error:
            raise flags.ValidationError(str(error)) from None
        return True

    flags.register_validator(name, checker, flag_values=flag_values)


def require_ranges(ranges, exclusive_low=(), flag_values=flags.FLAGS):
    """Registers a range check on each numeric flag of ``ranges``.

    ``ranges`` maps a flag name to ``(low, high)``: either bound None for none; the flags named
    in ``exclusive_low`` must be above ``low``. Integer flags must be ints in the range, float
    flags finite numbers in it; a flag whose default is None may stay None (its "unset" value).
    """
    for name, (low, high) in ranges.items():
        flag = flag_values[name]
        integer = isinstance(flag.parser, flags.IntegerParser)
        allow_none = flag.default is None
        _register(name, lambda value, name=name, low=low, high=high, integer=integer,
                  allow_none=allow_none: validation.check_number_in_range(
                      name, value, low, high, integer=integer, allow_none=allow_none,
                      low_exclusive=name in exclusive_low),
                  flag_values)


def require_subset(name, choices, flag_values=flags.FLAGS):
    """Checks, when parsed, that the list flag ``name`` is a non-empty list of ``choices``."""
    def check(values):
        if not values or any(v not in choices for v in values):
            raise validation.invalid_value(
                name, f"a non-empty comma-separated list of {', '.join(choices)}",
                ",".join(values or []))

    _register(name, check, flag_values)


def require_only_for(selector, value, names, flag_values=flags.FLAGS):
    """Rejects the flags ``names`` given on the command line unless ``--selector=value``.

    E.g. the level flags of the original BoxWorld given with ``--env=bridge``: silently ignoring
    them would train or play on levels other than those asked for.
    """
    def checker(values):
        if values[selector] == value:
            return True
        given = sorted(n for n in names if flag_values[n].present)
        if given:
            raise flags.ValidationError(
                f"{', '.join('--' + n for n in given)}: expected only with "
                f"--{selector}={value} (ignored otherwise), received --{selector}="
                f"{values[selector]}.")
        return True

    flags.register_multi_flags_validator([selector, *names], checker, flag_values=flag_values)


def require_exactly_one(names, flag_values=flags.FLAGS):
    """Checks, when parsed, that exactly one of the flags ``names`` is set (an empty value, as
    from an unset shell variable, counts as not set), e.g. two ways of naming what to load."""
    listed = " and ".join(f"--{n}" for n in names)

    def checker(values):
        given = [n for n in names if values[n] not in (None, "")]
        if len(given) != 1:
            received = " and ".join(f"--{n}={values[n]}" for n in given) or "neither"
            raise flags.ValidationError(
                f"{listed}: expected exactly one of them, received {received}.")
        return True

    flags.register_multi_flags_validator(list(names), checker, flag_values=flag_values)


def require_only_with(owner, names, flag_values=flags.FLAGS):
    """Rejects the flags ``names`` given on the command line unless the flag ``owner`` is set,
    e.g. ``--nogreedy`` (how a Keras model acts) without ``--model``: silently ignoring them
    would play otherwise than asked."""
    def checker(values):
        if values[owner] not in (None, ""):
            return True
        given = sorted(n for n in names if flag_values[n].present)
        if given:
            shown = [f"--no{n}" if values[n] is False else f"--{n}" for n in given]
            raise flags.ValidationError(
                f"{', '.join(shown)}: expected only with --{owner} (ignored otherwise), "
                f"received no --{owner}.")
        return True

    flags.register_multi_flags_validator([owner, *names], checker, flag_values=flag_values)


def require_existing_file(name, suffixes=None, flag_values=flags.FLAGS):
    """Checks, when parsed, that the path of flag ``name`` (if set) is an existing file ending
    with one of ``suffixes`` (when given)."""
    def check(path):
        if path in (None, ""):
            return
        expected = "an existing file" + (f" ending with {' or '.join(suffixes)}"
                                         if suffixes else "")
        if os.path.isdir(path):
            raise validation.invalid_value(name, expected, f"{path} (a directory)")
        if not os.path.isfile(path):
            raise validation.invalid_value(name, expected, f"{path} (no such file)")
        if suffixes and not path.lower().endswith(suffixes):
            raise validation.invalid_value(name, expected, path)

    _register(name, check, flag_values)


def require_writable_file(name, suffixes=None, flag_values=flags.FLAGS):
    """Checks, when parsed, that the path of flag ``name`` (if set) can be written: its
    directory exists and is writable, it is not a directory, and it ends with one of
    ``suffixes`` (when given)."""
    def check(path):
        if path is None:
            return
        directory = os.path.dirname(os.path.abspath(path)) or "."
        expected = "a file path in an existing, writable directory" + (
            f" ending with {' or '.join(suffixes)}" if suffixes else "")
        if os.path.isdir(path) or not os.path.isdir(directory) or not os.access(
                directory, os.W_OK) or (suffixes and not path.lower().endswith(suffixes)):
            raise validation.invalid_value(name, expected, path)

    _register(name, check, flag_values)


def define_dtype_policy_flag(flag_values=flags.FLAGS):
    """Defines ``--dtype_policy`` (``validation.DTYPE_POLICIES``, default
    ``validation.DEFAULT_DTYPE_POLICY``): one name, one set of choices and one help text in every
    supervised training binary."""
    return flags.DEFINE_enum(
        "dtype_policy", validation.DEFAULT_DTYPE_POLICY, list(validation.DTYPE_POLICIES),
        "Keras dtype policy of the model: float32, mixed_bfloat16 or mixed_float16 (float32 "
        "weights, 16-bit compute; mixed_float16 with dynamic loss scaling). Recorded in the "
        "results file.", flag_values=flag_values)
