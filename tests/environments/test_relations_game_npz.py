"""DeepMind's released Relations Game layout: ``.npz`` with int64 images [N, 36, 36, 3] (0..255),
labels [N, 1] and tasks [N, 1]; the files here are written with ``np.savez`` directly."""

import numpy as np
import pytest

from keras_relational.environments import relations_game as rg


def released_layout(n=6, seed=0, top=192):
    """Arrays exactly as in the authors' files (int64 everywhere, [N, 1] columns)."""
    rng = np.random.default_rng(seed)
    return {"images": rng.integers(0, top + 1, size=(n, 36, 36, 3)).astype(np.int64),
            "labels": rng.integers(0, 2, size=(n, 1)).astype(np.int64),
            "tasks": np.zeros((n, 1), np.int64)}


def write(tmp_path, arrays, name="between_hexos.npz"):
    path = tmp_path / name
    np.savez(path, **arrays)
    return str(path)


def test_load_npz_returns_the_generators_layout(tmp_path):
    arrays = released_layout()
    data = rg.load_npz(write(tmp_path, arrays))
    generated = rg.generate("between", "hexominoes", 3, seed=0)
    assert set(data) == set(generated)
    for key in data:
        assert data[key].dtype == generated[key].dtype, key
        assert data[key].shape[1:] == generated[key].shape[1:], key
    np.testing.assert_array_equal(data["images"], arrays["images"])  # raw pixels, not rescaled
    np.testing.assert_array_equal(data["labels"], arrays["labels"][:, 0])
    np.testing.assert_array_equal(data["tasks"], arrays["tasks"][:, 0])


def test_save_npz_writes_the_released_layout_and_round_trips(tmp_path):
    generated = rg.generate("row_patterns_3", "pentominoes", 8, seed=1)
    path = str(tmp_path / "sub" / "3task_row_patts_pentos.npz")
    rg.save_npz(path, generated)
    with np.load(path) as raw:
        assert raw["images"].dtype == np.int64 and raw["images"].shape == (8, 36, 36, 3)
        assert raw["labels"].shape == (8, 1) and raw["tasks"].shape == (8, 1)
        assert raw["images"].max() == 255  # pentomino colours reach 255
    loaded = rg.load_npz(path, num_classes=2)
    for key in generated:
        np.testing.assert_array_equal(loaded[key], generated[key])
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["3task_row_patts_pentos.npz"]


@pytest.mark.parametrize("change, match", [
    (lambda a: a.pop("tasks"), r"`tasks`: expected the keys \['images', 'labels', 'tasks'\], "
                               r"received the keys \['images', 'labels'\]"),
    (lambda a: a.update(images=a["images"][:, :32]), r"`images`: expected shape "
                                                     r"\[N, 36, 36, 3\], received shape "
                                                     r"\(6, 32, 36, 3\)"),
    (lambda a: a.update(images=a["images"] / 255.0), r"`images`: expected an integer array "
                                                     r".*received dtype float64"),
    (lambda a: a["images"].__setitem__((0, 0, 0, 0), 256),
     r"`images`: expected values in \[0, 255\], received values in \[0, 256\]"),
    (lambda a: a["images"].__setitem__((0, 0, 0, 0), -1),
     r"`images`: expected values in \[0, 255\], received values in \[-1, "),
    (lambda a: a.update(labels=a["labels"][:4]), r"`labels`: expected N = 6 rows, as many as "
                                                 r"`images`, received 4 rows"),
    (lambda a: a.update(labels=np.zeros((6, 2), np.int64)), r"`labels`: expected shape "
                                                            r"\[N, 1\] \(or \[N\]\), received "
                                                            r"shape \(6, 2\)"),
    (lambda a: a["labels"].__setitem__((0, 0), 2), r"`labels`: expected values in \[0, 1\], "
                                                    r"received values in \[0, 2\]"),
    (lambda a: a["tasks"].__setitem__((0, 0), 5), r"`tasks`: expected values in \[0, 4\], "
                                                   r"received values in \[0, 5\]"),
    (lambda a: a.update(tasks=a["tasks"].astype(np.float32)), r"`tasks`: expected an integer "
                                                              r"array.*float32"),
])
def test_load_npz_errors_name_file_key_expected_and_received(tmp_path, change, match):
    arrays = released_layout()
    change(arrays)
    path = write(tmp_path, arrays)
    with pytest.raises(ValueError, match=match) as info:
        rg.load_npz(path, num_classes=2)
    assert str(info.value).startswith(path)


def test_load_npz_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.npz"):
        rg.load_npz(str(tmp_path / "missing.npz"))
    text = tmp_path / "notes.npz"
    text.write_text("not an archive")
    with pytest.raises(ValueError, match=r"notes.npz: expected an .npz archive"):
        rg.load_npz(str(text))
    single = tmp_path / "images.npy"
    np.save(single, np.zeros((1, 36, 36, 3), np.int64))
    with pytest.raises(ValueError, match=r"images.npy: expected an .npz archive.*single"):
        rg.load_npz(str(single))


def test_four_class_labels_are_accepted_for_colour_and_or_shape(tmp_path):
    arrays = released_layout()
    arrays["labels"][:, 0] = [0, 1, 2, 3, 3, 0]
    data = rg.load_npz(write(tmp_path, arrays), num_classes=4)
    np.testing.assert_array_equal(data["labels"], [0, 1, 2, 3, 3, 0])
