import itertools

import numpy as np
import pytest

from keras_relational.environments import polyominoes
from keras_relational.environments import relations_game as rg

OBJECT_SETS = polyominoes.OBJECT_SETS


def task_sets():
    for task in rg.TASKS:
        for object_set in OBJECT_SETS:
            if not (task == "colour_and_or_shape" and object_set == "stripes"):
                yield task, object_set


# An independent decoder: reads every pixel of every cell, checks the rendering rules, and returns
# the objects as (mask [3, 3] bool, block colours [3, 3, 3]); written without using the generator.
def decode(image):
    assert image.shape == (36, 36, 3) and image.dtype == np.uint8
    objects = {}
    for row, col in itertools.product(range(3), range(3)):
        cell = image[12 * row:12 * row + 12, 12 * col:12 * col + 12]
        # Margins: 1 pixel top/left, 2 pixels bottom/right are always black.
        assert not cell[0].any() and not cell[:, 0].any()
        assert not cell[10:].any() and not cell[:, 10:].any()
        body = cell[1:10, 1:10].reshape(3, 3, 3, 3, 3)  # [block row, px, block col, px, rgb]
        blocks = body[:, 0, :, 0]
        # Every pixel inside a block equals the block's colour.
        assert (body == blocks[:, None, :, None]).all()
        mask = blocks.any(-1)
        if mask.any():
            objects[(row, col)] = (mask, blocks)
    return objects


def test_object_sets_match_the_spec():
    assert len(polyominoes.PENTOMINO_ARRAYS) == 37
    assert len(polyominoes.HEXOMINO_ARRAYS) == 48
    assert (polyominoes.PENTOMINO_ARRAYS.sum((1, 2)) == 5).all()
    assert (polyominoes.HEXOMINO_ARRAYS.sum((1, 2)) == 6).all()
    fixed_hexominoes = sum(len(polyominoes.orbit(b)) for b in polyominoes.HEXOMINO_BASES)
    assert fixed_hexominoes == 48  # 46 fixed shapes, the 2x3 rectangle at two offsets
    pento = {tuple(c) for c in polyominoes.PENTOMINO_COLOURS.tolist()}
    held = {tuple(c) for c in polyominoes.HELD_OUT_COLOURS.tolist()}
    assert len(pento) == len(held) == 25 and not pento & held
    assert (0, 0, 0) not in pento and (255, 255, 255) not in pento
    assert set(itertools.chain(*pento)) <= {0, 128, 255}
    assert set(itertools.chain(*held)) <= {64, 144, 192}
    assert (64, 64, 64) not in held and (192, 192, 192) not in held


@pytest.mark.parametrize("task,object_set", list(task_sets()))
def test_oracle_agrees_with_every_label(task, object_set):
    data = rg.generate(task, object_set, 300, seed=11)
    assert data["images"].shape == (300, 36, 36, 3) and data["images"].dtype == np.uint8
    for image, label, task_id in zip(data["images"], data["labels"], data["tasks"], strict=True):
        decode(image)
        assert rg.oracle_label(task, image, task_id) == label


def test_oracle_is_not_trivially_true():
    data = rg.generate("between", "pentominoes", 200, seed=0)
    flipped = [rg.oracle_label("between", im) != lab
               for im, lab in zip(data["images"], 1 - data["labels"], strict=True)]
    assert all(flipped)


@pytest.mark.parametrize("task", list(rg.TASKS))
def test_class_and_task_balance(task):
    n = 6000
    data = rg.generate(task, "pentominoes", n, seed=3)
    classes = rg.num_classes(task)
    counts = np.bincount(data["labels"], minlength=classes) / n
    np.testing.assert_allclose(counts, 1.0 / classes, atol=0.02)
    task_ids = rg.num_task_ids(task)
    assert set(np.unique(data["tasks"])) == set(range(task_ids))
    for t in range(task_ids if classes == 2 else 0):
        labels = data["labels"][data["tasks"] == t]
        np.testing.assert_allclose(labels.mean(), 0.5, atol=0.04)  # ~n/5 examples per task id


def held_out_leaks(images, object_set):
    """Checks every object of ``images`` belongs to ``object_set``'s shapes and colours."""
    arrays = {
        "pentominoes": {a.tobytes() for a in polyominoes.PENTOMINO_ARRAYS},
        "hexominoes": {a.tobytes() for a in polyominoes.HEXOMINO_ARRAYS},
        "stripes": {np.ones((3, 3), bool).tobytes()},
    }[object_set]
    palette = {tuple(c) for c in polyominoes.colours(object_set).tolist()}
    for image in images:
        for mask, blocks in decode(image).values():
            assert mask.tobytes() in arrays, mask
            colours = {tuple(c) for c in blocks[mask].tolist()}
            assert colours <= palette, colours
            if object_set == "stripes":  # vertical A|B|A
                np.testing.assert_array_equal(blocks[:, 0], blocks[:, 2])
                assert (blocks == blocks[0:1]).all()
            else:
                assert len(colours) == 1


@pytest.mark.parametrize("object_set", OBJECT_SETS)
def test_objects_come_from_their_set_only(object_set):
    for task in rg.TASKS:
        if task == "colour_and_or_shape" and object_set == "stripes":
            continue
        held_out_leaks(rg.generate(task, object_set, 150, seed=5)["images"], object_set)


def test_training_data_never_contains_held_out_shapes_or_colours():
    held_shapes = {a.tobytes() for a in polyominoes.HEXOMINO_ARRAYS}
    held_shapes.add(np.ones((3, 3), bool).tobytes())
    held_colours = {tuple(c) for c in polyominoes.HELD_OUT_COLOURS.tolist()}
    seen_shapes, seen_colours = set(), set()
    for task in rg.TASKS:
        for image in rg.generate(task, "pentominoes", 400, seed=7)["images"]:
            for mask, blocks in decode(image).values():
                seen_shapes.add(mask.tobytes())
                seen_colours |= {tuple(c) for c in blocks[mask].tolist()}
    assert not seen_shapes & held_shapes and not seen_colours & held_colours
    # And the training set is covered: all 37 arrays and 25 colours occur.
    assert len(seen_shapes) == 37 and len(seen_colours) == 25


def test_hexomino_sampling_frequencies():
    # Uniform free shape then a uniform dihedral element: 48 arrays, 16 of them twice as likely.
    game = rg.RelationsGame("same", "hexominoes", seed=0)
    counts = {}
    for _ in range(20000):
        key = game.random_object().mask.tobytes()
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 48
    frequencies = np.sort(np.array(list(counts.values())) / 20000)
    np.testing.assert_allclose(frequencies[:32], 1 / 64, atol=0.006)
    np.testing.assert_allclose(frequencies[32:], 1 / 32, atol=0.008)


def cells_of(image):
    return sorted(decode(image))


def test_layouts():
    images = lambda task, n=100: rg.generate(task, "hexominoes", n, seed=9)["images"]  # noqa: E731
    for image in images("same"):
        assert len(cells_of(image)) == 2
    for image in images("between"):
        assert len(cells_of(image)) == 3
    for task in ("occurs", "xoccurs"):
        for image in images(task):
            assert cells_of(image) == [(0, 1), (2, 0), (2, 1), (2, 2)]
    for image in images("match_rows"):
        assert cells_of(image) == [(0, 0), (0, 1), (0, 2), (2, 0), (2, 1), (2, 2)]
    for task, axis in (("row_patterns_5", 0), ("column_patterns_3", 1)):
        lines = set()
        for image in images(task):
            cells = cells_of(image)
            assert len(cells) == 3 and len({cell[axis] for cell in cells}) == 1
            lines.add(cells[0][axis])
        assert lines == {0, 1, 2}


def difference_kind(a, b):
    (mask_a, blocks_a), (mask_b, blocks_b) = a, b
    shape = not np.array_equal(mask_a, mask_b)
    colour = {tuple(c) for c in blocks_a[mask_a].tolist()} != \
        {tuple(c) for c in blocks_b[mask_b].tolist()}
    return {(False, True): "colour", (True, False): "shape", (True, True): "both"}[shape, colour]


@pytest.mark.parametrize("task", ["same", "between"])
def test_tricky_negatives_are_balanced(task):
    data = rg.generate(task, "pentominoes", 3000, seed=4)
    kinds = []
    for image in data["images"][data["labels"] == 0]:
        objects = decode(image)
        if task == "same":
            pair = list(objects.values())
        else:
            line = [line for line in rg.LINES if all(c in objects for c in line)]
            if not line:
                continue  # a scattered negative
            pair = [objects[line[0][0]], objects[line[0][2]]]
        kinds.append(difference_kind(*pair))
    fractions = np.array([kinds.count(k) for k in ("colour", "shape", "both")]) / len(kinds)
    np.testing.assert_allclose(fractions, 1 / 3, atol=0.04)
    if task == "between":  # ~75% of negatives are lines (78% in the released data)
        assert 0.7 < len(kinds) / (data["labels"] == 0).sum() < 0.82


def test_between_line_weights():
    data = rg.generate("between", "pentominoes", 4000, seed=8)
    middle = sum(cells_of(im) == [(1, 0), (1, 1), (1, 2)]
                 for im in data["images"][data["labels"] == 1])
    np.testing.assert_allclose(middle / (data["labels"] == 1).sum(), 2 / 9, atol=0.03)


def test_xoccurs_negatives_and_readings():
    exclusive = rg.generate("xoccurs", "pentominoes", 600, seed=2)
    copies = []
    for image, label in zip(exclusive["images"], exclusive["labels"], strict=True):
        keys = rg.parse_image(image)
        top = keys[(0, 1)].tobytes()
        copies.append(sum(keys[(2, c)].tobytes() == top for c in range(3)))
        assert (copies[-1] == 1) == bool(label)
    copies = np.array(copies)
    assert (copies == 2).sum() > 100  # the negatives that separate xoccurs from occurs
    both = rg.generate("xoccurs", "stripes", 400, seed=2, xoccurs_negatives="both_readings")
    for image, label in zip(both["images"], both["labels"], strict=True):
        assert rg.oracle_label("xoccurs", image, xoccurs_reading="pair_differs") == label
        assert rg.oracle_label("xoccurs", image, xoccurs_reading="exclusive") == label


def test_occurs_with_one_variant_per_negative():
    # Negatives hold one variant of the top object among random objects, positives a copy among
    # them; every label agrees with the pixel oracle.
    data = rg.generate("occurs", "pentominoes", 3000, seed=5, occurs_distractors="one_variant")
    near = []
    for image, label in zip(data["images"], data["labels"], strict=True):
        assert rg.oracle_label("occurs", image) == label
        objects = decode(image)
        top = objects[(0, 1)]
        others = [objects[(2, c)] for c in range(3)]
        differences = [None if np.array_equal(o[1], top[1]) else difference_kind(top, o)
                       for o in others]
        assert differences.count(None) == int(label)
        near.append(sum(d in ("colour", "shape") for d in differences))
    near = np.array(near)
    # Random objects are rarely near variants: far fewer than the default's two a row.
    assert near.mean() < 0.6
    default = rg.generate("occurs", "pentominoes", 3000, seed=5)
    default_near = [sum(difference_kind(decode(im)[(0, 1)], decode(im)[(2, c)]) in
                        ("colour", "shape") for c in range(3)
                        if not np.array_equal(decode(im)[(2, c)][1], decode(im)[(0, 1)][1]))
                    for im in default["images"][:500]]
    assert np.mean(default_near) > 1.5
    with pytest.raises(ValueError, match=r"`occurs_distractors`.*'variants'.*'all'"):
        rg.RelationsGame("occurs", occurs_distractors="all")


def test_colour_shape_column_pair_layout():
    data = rg.generate("colour_and_or_shape", "hexominoes", 100, seed=1,
                       colour_shape_layout="column_pair")
    for image in data["images"]:
        (r0, c0), (r1, c1) = cells_of(image)
        assert c0 == c1 and (r0, r1) == (0, 2)


def test_same_with_more_objects():
    data = rg.generate("same", "pentominoes", 200, seed=1, num_objects=4)
    for image, label in zip(data["images"], data["labels"], strict=True):
        assert len(cells_of(image)) == 4
        assert rg.oracle_label("same", image) == label


def test_seeded_and_deterministic():
    a = rg.generate("occurs", "stripes", 50, seed=123)
    b = rg.generate("occurs", "stripes", 50, seed=123)
    c = rg.generate("occurs", "stripes", 50, seed=124)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    assert not np.array_equal(a["images"], c["images"])


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"`task`.*'nearby'"):
        rg.RelationsGame("nearby")
    with pytest.raises(ValueError, match=r"`object_set`.*'circles'"):
        rg.RelationsGame("same", "circles")
    with pytest.raises(ValueError, match=r"`object_set`.*stripes"):
        rg.RelationsGame("colour_and_or_shape", "stripes")
    with pytest.raises(ValueError, match=r"`middle_row_weight`.*3"):
        rg.RelationsGame("between", middle_row_weight=3)
    with pytest.raises(ValueError, match=r"`xoccurs_negatives`.*'some'"):
        rg.RelationsGame("xoccurs", xoccurs_negatives="some")
    with pytest.raises(ValueError, match=r"`num_objects`.*10"):
        rg.RelationsGame("same", num_objects=10)


def test_environment_modules_import_numpy_only():
    import ast
    import pathlib

    # The Relations Game is a package: every one of its modules, plus the object sets.
    paths = sorted(pathlib.Path(rg.__file__).parent.glob("*.py"))
    for path in paths + [pathlib.Path(polyominoes.__file__)]:
        tree = ast.parse(path.read_text())
        imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                    if isinstance(node, ast.Import) for alias in node.names}
        # A relative import (`from .tasks import ...`) stays inside keras_relational.
        imported |= {node.module.split(".")[0] if node.level == 0 else "keras_relational"
                     for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        # The standard library's file handling is fine (the .npz reader); nothing else.
        allowed = {"numpy", "keras_relational", "itertools", "os", "tempfile", "zipfile"}
        assert imported <= allowed, (path.name, imported)
