"""The "same colour?" demo as a library: data, model and ``train_eval`` (Keras 3, no flags).

Each example is an 8x8 RGB image with three coloured dots on a grey floor; the label says whether
two of the dots share a colour. Deciding it needs a comparison between entities, which the
relational module provides: conv stem -> SpatialEntities -> RelationalModule -> EntityMaxPool ->
MLP. ``experiments/same_colour_demo.py`` is its binary.
"""

import os
import shutil

import numpy as np

from keras_relational import run_settings, validation, whole_files
from keras_relational.experiments import distribution_lib

_PALETTE = np.array(
    [[230, 25, 75], [60, 180, 75], [0, 130, 200], [245, 130, 48], [145, 30, 180],
     [70, 240, 240]], dtype=np.uint8)
_FLOOR = np.array([200, 200, 200], dtype=np.uint8)


def make_same_colour_dataset(num_examples, size=8, num_dots=3, seed=0):
    """Images ``[num_examples, size, size, 3]`` (float32 in [0, 1]) and labels ``[num_examples]``.

    Half of the examples (label 1) have two dots of one colour; the others have all-different
    colours. Dot positions are distinct cells.
    """
    rng = np.random.RandomState(seed)
    images = np.broadcast_to(_FLOOR, (num_examples, size, size, 3)).copy()
    labels = rng.randint(0, 2, size=num_examples)
    for i in range(num_examples):
        colours = rng.choice(len(_PALETTE), size=num_dots, replace=False)
        if labels[i]:
            colours[rng.randint(1, num_dots)] = colours[0]
        cells = rng.choice(size * size, size=num_dots, replace=False)
        rows, cols = np.divmod(cells, size)
        images[i, rows, cols] = _PALETTE[colours]
    return images.astype("float32") / 255.0, labels.astype("int32")


def build_model(size=8, num_heads=2, key_dim=16, num_blocks=1):
    """Conv stem -> entities with coordinates -> relational module -> max-pool -> classifier."""
    import keras

    import keras_relational

    inputs = keras.Input((size, size, 3), name="image")
    features = keras.layers.Conv2D(16, 1, activation="relu")(inputs)
    entities = keras_relational.SpatialEntities()(features)
    entities = keras_relational.RelationalModule(
        num_blocks=num_blocks, num_heads=num_heads, key_dim=key_dim, mlp_hidden_units=(64,)
    )(entities)
    pooled = keras_relational.EntityMaxPool()(entities)
    hidden = keras.layers.Dense(64, activation="relu")(pooled)
    logits = keras.layers.Dense(2, name="logits")(hidden)
    return keras.Model(inputs, logits, name="same_colour_relational")


@run_settings.resumable(optimizer=("learning_rate",), free=("epochs", "distribution_strategy"))
def train_eval(root_dir, num_train=4000, num_eval=1000, epochs=8, batch_size=64,
               learning_rate=3e-3, seed=0, distribution_strategy="default",
               dtype_policy=validation.DEFAULT_DTYPE_POLICY):
    """Trains, evaluates on fresh examples and exports.

    An interrupted run resumes from its last finished epoch (``root_dir/backup``); a finished run
    is reloaded from ``root_dir/model.keras`` instead of being trained again.
    ``distribution_strategy`` (``distribution_lib.STRATEGIES``): the model and ``compile`` are
    created under its ``scope()``; ``batch_size`` is the global batch size.
    ``dtype_policy``: ``"float32"``, ``"mixed_bfloat16"`` or ``"mixed_float16"`` (the model is
    built under it; ``compile`` adds loss scaling for float16), recorded in ``results.json``.

    Returns:
        Dict with the held-out accuracy, the paths written and ``dtype_policy`` (also written
        to ``root_dir/results.json``).
    """
    import keras

    from keras_relational import faults, json_files
    from keras_relational.experiments.safe_backup import SafeBackupAndRestore
    from keras_relational.models import precision

    validation.check_dtype_policy("same_colour_lib.train_eval", dtype_policy)
    strategy = distribution_lib.get_strategy(distribution_strategy)  # before any TF work
    keras.utils.set_random_seed(seed)
    os.makedirs(root_dir, exist_ok=True)
    model_path = os.path.join(root_dir, "model.keras")
    backup_dir = os.path.join(root_dir, "backup")
    x_eval, y_eval = make_same_colour_dataset(num_eval,
                                              seed=validation.offset_seed("seed", seed, 1))
    if os.path.exists(model_path):
        print(f"Training already finished; reloading {model_path}")
        # A fresh process has not imported the layers yet (they load lazily): register them.
        import keras_relational.layers  # noqa: F401

        model = keras.saving.load_model(model_path)
    else:
        x_train, y_train = make_same_colour_dataset(num_train, seed=seed)
        with strategy.scope(), precision.dtype_policy_scope(dtype_policy):
            model = build_model()
            model.compile(
                optimizer=keras.optimizers.Adam(learning_rate),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                metrics=["accuracy"],
                **distribution_lib.compile_options(strategy, jit_compile=True),
            )
        model.fit(
            x_train, y_train, epochs=epochs, batch_size=batch_size, verbose=2,
            validation_data=(x_eval, y_eval),
            callbacks=[
                # Kept until model.keras is written: a kill in between loses no epoch.
                SafeBackupAndRestore(backup_dir, delete_checkpoint=False),
                keras.callbacks.TensorBoard(os.path.join(root_dir, "train")),
            ],
        )
        partial = os.path.join(root_dir, "partial.model.keras")
        model.save(partial)
        faults.point("export")  # the fault tests kill here: no half-written model.keras
        os.replace(partial, model_path)
        shutil.rmtree(backup_dir)
    _, accuracy = model.evaluate(x_eval, y_eval, verbose=0)
    export_dir = os.path.join(root_dir, "saved_model")
    whole_files.write_whole(export_dir, lambda path: model.export(path, verbose=False))
    print(f"held-out accuracy {accuracy:.3f} (chance 0.5); model {model_path}; "
          f"SavedModel {export_dir}")
    results = {"accuracy": float(accuracy), "model": model_path, "saved_model": export_dir,
               "dtype_policy": dtype_policy}
    json_files.write_json(os.path.join(root_dir, "results.json"), results)
    return results
