# Route tf.keras to tf-keras (what TF-Agents needs) before any test touches it, so test order and
# pytest-xdist's distribution of tests never matter. Our own layers use `import keras` (Keras 3)
# and are unaffected; the import-hygiene tests check the package itself in fresh processes.
import keras_relational.agents  # noqa: F401
