"""DeepMind's released Relations Game files (``.npz``): load them as our generator's data, or save
ours in their layout.

The authors released their datasets (Shanahan et al. 2020, "Software and Data") as ``.npz`` files
with three arrays:

* ``images``: int64 ``[N, 36, 36, 3]``, raw pixel values 0..255 (the held-out hexomino and stripes
  palettes stop at 192; pentominoes reach 255);
* ``labels``: ``[N, 1]`` integers, 1 = the relation holds (0..3 for ``colour_and_or_shape``);
* ``tasks``: ``[N, 1]`` integer task ids (0 for single-task files).

:func:`load_npz` validates a file and returns exactly what :func:`generate` returns: uint8 raw
pixels ``[N, 36, 36, 3]`` (the models divide by 256 themselves, as the authors' notebook does, so
both sources go through the same scaling) and int64 ``labels`` / ``tasks`` of shape ``[N]``.
:func:`save_npz` writes generated data in the released layout.
"""

import os
import tempfile
import zipfile

import numpy as np

from .rendering import IMAGE_SIZE

KEYS = ("images", "labels", "tasks")
IMAGE_SHAPE = (IMAGE_SIZE, IMAGE_SIZE, 3)
MAX_PIXEL = 255
NUM_TASK_SLOTS = 5  # the authors' notebook: the task one-hot always has 5 slots


def _error(path, key, expected, received):
    return ValueError(f"{path}: `{key}`: expected {expected}, received {received}.")


def _integer_array(path, key, array):
    if array.dtype.kind not in "iu":
        raise _error(path, key, "an integer array (int64 in the released files)",
                     f"dtype {array.dtype}")
    return array


def _column(path, key, array, num_examples):
    """A ``[N, 1]`` (released layout) or ``[N]`` integer array as int64 ``[N]``."""
    _integer_array(path, key, array)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    if array.ndim != 1:
        raise _error(path, key, "shape [N, 1] (or [N])", f"shape {array.shape}")
    if array.shape[0] != num_examples:
        raise _error(path, key, f"N = {num_examples} rows, as many as `images`",
                     f"{array.shape[0]} rows")
    return array.astype(np.int64)


def _check_range(path, key, array, low, high):
    if array.size and (array.min() < low or array.max() > high):
        raise _error(path, key, f"values in [{low}, {high}]",
                     f"values in [{array.min()}, {array.max()}]")


def load_npz(path, num_classes=None, num_task_ids=NUM_TASK_SLOTS):
    """Loads and validates one of DeepMind's Relations Game ``.npz`` files.

    Args:
        path: the ``.npz`` file (keys ``images``, ``labels``, ``tasks``; extra keys are ignored).
        num_classes: if given, every label must be below it (2, or 4 for
            ``colour_and_or_shape``).
        num_task_ids: every task id must be below it (the model's task one-hot has 5 slots).

    Returns:
        ``{"images": uint8 [N, 36, 36, 3] raw pixels, "labels": int64 [N], "tasks": int64 [N]}``,
        the layout of :func:`generate`.

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: the file is not an ``.npz`` archive, or a key is missing or has the wrong
            shape, dtype or range (the message names the file, the key, what was expected and
            what was received), or the arrays disagree on N.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such Relations Game .npz file.")
    try:
        archive = np.load(path, allow_pickle=False)
    except (zipfile.BadZipFile, ValueError, OSError) as error:
        raise ValueError(f"{path}: expected an .npz archive with keys {list(KEYS)}, received a "
                         f"file numpy cannot read as one ({error}).") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"{path}: expected an .npz archive with keys {list(KEYS)}, received a "
                         f"single {type(archive).__name__} (an .npy file?).")
    with archive:
        missing = [key for key in KEYS if key not in archive.files]
        if missing:
            raise _error(path, missing[0], f"the keys {list(KEYS)}",
                         f"the keys {sorted(archive.files)}")
        images, labels, tasks = (archive[key] for key in KEYS)
    _integer_array(path, "images", images)
    if images.ndim != 4 or images.shape[1:] != IMAGE_SHAPE:
        raise _error(path, "images", f"shape [N, {', '.join(map(str, IMAGE_SHAPE))}]",
                     f"shape {images.shape}")
    _check_range(path, "images", images, 0, MAX_PIXEL)
    num_examples = images.shape[0]
    labels = _column(path, "labels", labels, num_examples)
    tasks = _column(path, "tasks", tasks, num_examples)
    _check_range(path, "labels", labels, 0, (num_classes or 4) - 1)
    _check_range(path, "tasks", tasks, 0, num_task_ids - 1)
    return {"images": images.astype(np.uint8), "labels": labels, "tasks": tasks}


def save_npz(path, data):
    """Writes ``data`` (as from :func:`generate`) to ``path`` in the released layout, atomically.

    ``images`` become int64 ``[N, 36, 36, 3]``, ``labels`` and ``tasks`` int64 ``[N, 1]``;
    :func:`load_npz` reads the file back to the same arrays.
    """
    path = os.fspath(path)
    arrays = {"images": np.asarray(data["images"]).astype(np.int64),
              "labels": np.asarray(data["labels"]).astype(np.int64).reshape(-1, 1),
              "tasks": np.asarray(data["tasks"]).astype(np.int64).reshape(-1, 1)}
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, suffix=".npz")
    try:
        with os.fdopen(handle, "wb") as f:
            np.savez_compressed(f, **arrays)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
