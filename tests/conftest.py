# Route tf.keras to tf-keras (what TF-Agents needs) before any test touches it, so test order and
# pytest-xdist's distribution of tests never matter. Our own layers use `import keras` (Keras 3)
# and are unaffected; the import-hygiene tests check the package itself in fresh processes.
import pytest

import keras_relational.agents  # noqa: F401


@pytest.fixture(autouse=True)
def _seeded_weights():
    """Every test starts from the same Python, NumPy and Keras seeds.

    Weight initialisation is otherwise random per run, and float32 comparisons between two
    implementations (e.g. TensorFlow vs JAX) then pass or fail with the draw: the TPR memory's
    chained layer norms put its float32 error (against a float64 reference) above 1e-5 for 3
    of 20 random draws.
    """
    import keras  # after keras_relational.agents (above) has routed tf.keras

    keras.utils.set_random_seed(0)
