"""The initial weights of Shanahan et al. (2020)'s Relations Game models.

Every kernel of the paper's models (input CNN, PrediNet and the baseline central modules, output
MLP) starts from a truncated normal of stddev 0.1 and every bias from 0.1, as in the authors'
reference notebook (Shanahan et al., "An Explicitly Relational Neural Network Architecture",
ICML 2020).
"""

import keras

KERNEL_STDDEV = 0.1  # Shanahan et al. 2020, reference notebook
BIAS_INIT = 0.1  # Shanahan et al. 2020, reference notebook: every bias starts at 0.1


def truncated_normal_kernel():
    """Truncated normal, mean 0, stddev 0.1, re-drawn beyond 2 stddev (reference notebook)."""
    return keras.initializers.TruncatedNormal(mean=0.0, stddev=KERNEL_STDDEV)


def constant_bias():
    """The constant 0.1 of every bias (reference notebook)."""
    return keras.initializers.Constant(BIAS_INIT)
