"""Decoding Relations Game images from their pixels alone, independently of the generator."""

import numpy as np

from .rendering import BLOCK, CELL, OFFSET
from .tasks import CELLS


def parse_image(image):
    """Decodes ``image`` into ``{(row, col): blocks}``, ``blocks`` a ``[3, 3, 3]`` uint8 array of
    block colours (black = empty block), reading one pixel per block."""
    image = np.asarray(image)
    objects = {}
    for row, col in CELLS:
        top, left = CELL * row + OFFSET, CELL * col + OFFSET
        blocks = image[top:top + 3 * BLOCK:BLOCK, left:left + 3 * BLOCK:BLOCK]
        if blocks.any():
            objects[(row, col)] = np.ascontiguousarray(blocks)
    return objects


def identity(blocks):
    """Hashable identity: shape, orientation, placement and colours."""
    return blocks.tobytes()


def shape_of(blocks):
    return blocks.any(axis=-1).tobytes()


def colour_of(blocks):
    """The set of colours of an object (``{(A,), (B,)}`` for a stripe pair)."""
    filled = blocks[blocks.any(axis=-1)]
    return frozenset(map(tuple, filled.tolist()))
