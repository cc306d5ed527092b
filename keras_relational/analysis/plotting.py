"""Matplotlib for the analysis plots, imported only when a plot is drawn.

Matplotlib is an optional dependency (the ``dev`` extra installs it): the analyses return NumPy
arrays without it; only the ``plot_*`` functions need it.
"""

import os
import sys


def pyplot():
    """``matplotlib.pyplot``, on the file-only ``Agg`` backend unless one was chosen already.

    Raises:
        ImportError: matplotlib is not installed (the message says how to install it).
    """
    try:
        import matplotlib
    except ImportError as error:
        raise ImportError(
            "The keras_relational.analysis plots need matplotlib, which is not installed: "
            "`pip install matplotlib` (or the package's `dev` extra). The analyses themselves "
            "return NumPy arrays and work without it.") from error
    if "matplotlib.pyplot" not in sys.modules and "MPLBACKEND" not in os.environ:
        matplotlib.use("Agg")  # writing files needs no display
    import matplotlib.pyplot as plt

    return plt
