"""Shapes and colours of the Relations Game object sets (Shanahan et al. 2020, Sec. 3, Fig. 2a).

NumPy only. A shape is a boolean ``[3, 3]`` array of 3x3-pixel blocks. Two objects have the same
shape iff their arrays are identical, so orientation *and* placement inside the 3x3 box count.

* Pentominoes (training set): the 8 free pentominoes that fit in 3x3 (F, P, T, U, V, W, X, Z),
  aligned top-left; their dihedral orbits give 37 distinct arrays.
* Hexominoes (held-out set 1): the 8 free hexominoes that fit in 3x3; 46 fixed shapes, 48 distinct
  arrays (the 2x3 rectangle occurs at two offsets inside the box).
* Stripes (held-out set 2): the full 3x3 square, outer block-columns colour A, middle colour B.

Colours: pentominoes use ``{0, 128, 255}^3`` minus black and white; hexominoes and stripes use
``{64, 144, 192}^3`` minus ``(64, 64, 64)`` and ``(192, 192, 192)``. 25 colours each, disjoint.
"""

import itertools

import numpy as np

OBJECT_SETS = ("pentominoes", "hexominoes", "stripes")


def _mask(rows):
    return np.array([[ch == "#" for ch in row] for row in rows.split()], dtype=bool)


# Base masks, rows top to bottom (the shapes of Fig. 2a and the authors' released data).
PENTOMINO_BASES = tuple(_mask(rows) for rows in (
    ".## ##. .#.",  # F
    "##. ##. #..",  # P
    "### .#. .#.",  # T
    "#.# ### ...",  # U
    "#.. #.. ###",  # V
    "#.. ##. .##",  # W
    ".#. ### .#.",  # X
    "##. .#. .##",  # Z
))
HEXOMINO_BASES = tuple(_mask(rows) for rows in (
    "### ##. .#.",
    "### ##. #..",
    "### .#. ##.",
    "### #.# #..",
    "##. .## ##.",
    "##. ### ..#",
    "##. ### .#.",
    "### ### ...",
))
SQUARE = np.ones((3, 3), dtype=bool)


def dihedral(mask, element):
    """Element ``0..7`` of the dihedral group applied to the 3x3 array: ``element % 4`` quarter
    turns, then a left-right flip when ``element >= 4``."""
    out = np.rot90(mask, element % 4)
    return np.ascontiguousarray(np.fliplr(out) if element >= 4 else out)


def orbit(mask):
    """The distinct arrays among the 8 dihedral images of ``mask`` (in first-seen order)."""
    seen = {}
    for element in range(8):
        image = dihedral(mask, element)
        seen.setdefault(image.tobytes(), image)
    return list(seen.values())


def distinct_arrays(bases):
    """All distinct arrays reachable from ``bases`` by the dihedral group."""
    seen = {}
    for base in bases:
        for image in orbit(base):
            seen.setdefault(image.tobytes(), image)
    return np.stack(list(seen.values()))


def _palette(levels, excluded):
    colours = [c for c in itertools.product(levels, repeat=3) if c not in excluded]
    return np.array(colours, dtype=np.uint8)


PENTOMINO_COLOURS = _palette((0, 128, 255), {(0, 0, 0), (255, 255, 255)})
HELD_OUT_COLOURS = _palette((64, 144, 192), {(64, 64, 64), (192, 192, 192)})
PENTOMINO_ARRAYS = distinct_arrays(PENTOMINO_BASES)  # [37, 3, 3]
HEXOMINO_ARRAYS = distinct_arrays(HEXOMINO_BASES)  # [48, 3, 3]


def bases(object_set):
    """The free shapes (base masks) of ``object_set``."""
    if object_set == "pentominoes":
        return PENTOMINO_BASES
    if object_set == "hexominoes":
        return HEXOMINO_BASES
    if object_set == "stripes":
        return (SQUARE,)
    raise ValueError(f"`object_set`: expected one of {OBJECT_SETS}, received {object_set!r}.")


def colours(object_set):
    """The ``[25, 3]`` uint8 palette of ``object_set``."""
    if object_set == "pentominoes":
        return PENTOMINO_COLOURS
    if object_set in ("hexominoes", "stripes"):
        return HELD_OUT_COLOURS
    raise ValueError(f"`object_set`: expected one of {OBJECT_SETS}, received {object_set!r}.")
