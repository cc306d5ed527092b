"""Whether a measured accuracy reaches a target (an early stop, "batches to 90 %")."""

import numpy as np


def reaches(accuracy, target):
    """Whether ``accuracy`` is at or above ``target``, both rounded to float32 first.

    Keras computes accuracy in float32: 450 correct of 500 is 0.8999999762 once stored, which a
    comparison with the Python float 0.9 would count as short of 90 %. Rounding the target the
    same way makes an exact hit count, and leaves every other comparison as it was.

    >>> reaches(np.float32(450) / np.float32(500), 0.9)
    True
    >>> reaches(0.8998, 0.9)
    False
    """
    return bool(np.float32(accuracy) >= np.float32(target))
