import os

import numpy as np

from keras_relational.experiments import same_colour_lib


def test_dataset_labels_follow_the_rule():
    images, labels = same_colour_lib.make_same_colour_dataset(200, seed=3)
    floor = same_colour_lib._FLOOR / 255.0
    for image, label in zip(images, labels, strict=True):
        dots = image.reshape(-1, 3)[~np.all(np.isclose(image.reshape(-1, 3), floor), axis=1)]
        assert len(dots) == 3
        distinct = len({tuple(np.round(d, 4)) for d in dots})
        assert (distinct < 3) == bool(label)
    assert 0.4 < labels.mean() < 0.6


def test_train_eval_smoke_and_rerun(tmp_path):
    root = str(tmp_path / "run")
    result = same_colour_lib.train_eval(root, num_train=128, num_eval=64, epochs=1,
                                         batch_size=32)
    assert os.path.exists(result["model"])
    assert os.path.exists(os.path.join(result["saved_model"], "saved_model.pb"))
    again = same_colour_lib.train_eval(root, num_train=128, num_eval=64, epochs=1, batch_size=32)
    assert again["accuracy"] == result["accuracy"]  # reloaded, not retrained
