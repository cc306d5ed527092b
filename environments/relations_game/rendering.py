"""Relations Game images (Shanahan et al. 2020, Sec. 3): objects drawn on a black 36 x 36 image.

A 3x3 grid of 12x12-pixel cells, at most one object per cell. An object is a 3x3 array of
3x3-pixel blocks drawn at offset +1 inside its cell (pixels 1..9), so each cell keeps a 1-pixel
margin top/left and 2 pixels bottom/right.
"""

import numpy as np

IMAGE_SIZE = 36
CELL = 12  # pixels per grid cell
BLOCK = 3  # pixels per block of an object
OFFSET = 1  # object drawn at pixel +1 inside its cell


class GameObject:
    """A 3x3 boolean ``mask`` with an ``outer`` colour and a ``middle``-column colour (equal for
    uniformly coloured objects; the stripe colours A and B for stripes)."""

    __slots__ = ("mask", "outer", "middle")

    def __init__(self, mask, outer, middle):
        self.mask, self.outer, self.middle = mask, outer, middle

    def key(self):
        return (self.mask.tobytes(), self.outer, self.middle)

    def blocks(self):
        """The ``[3, 3, 3]`` uint8 colour of every block (black where the mask is empty)."""
        colours = np.array([self.outer, self.middle, self.outer], dtype=np.uint8)  # per column
        return np.where(self.mask[:, :, None], colours[None, :, :], 0).astype(np.uint8)


def render(objects):
    """Draws ``{(row, col): GameObject}`` onto a black ``[36, 36, 3]`` uint8 image."""
    image = np.zeros((IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)
    for (row, col), obj in objects.items():
        pixels = np.repeat(np.repeat(obj.blocks(), BLOCK, axis=0), BLOCK, axis=1)
        top, left = CELL * row + OFFSET, CELL * col + OFFSET
        image[top:top + 3 * BLOCK, left:left + 3 * BLOCK] = pixels
    return image
