"""The on-device level generators (`tensor_levels`): the NumPy generators' invariants, the same
distribution (two-sample chi-square tests of marginals), episodes on device levels, compiling.

The distribution tests compare 3,000 levels of each generator. `_same_distribution` pools cells
with fewer than 10 counts and fails when the chi-square statistic of a marginal is more than 5
standard deviations (sqrt(2 dof)) above its mean dof. With the fixed seeds here, the correct
generators pass; `test_a_broken_generator_fails` shows the test catches plausible bugs: anchors
one column short (the reference's exclusive bound: items never in the last anchor column), and
forward branches that never start at the last path key.
"""

import collections

import keras
import numpy as np
import pytest
from boxworld_checks import check_bridge_level, check_level
from tensor_lockstep import compile_step, run_lockstep

from keras_relational.environments import (
    BoxWorldConfig,
    BridgeConfig,
    LevelGenerationError,
    TensorBoxWorld,
    TensorBridgeBoxWorld,
    boxworld,
    bridge_boxworld,
    puzzle_types,
)
from keras_relational.environments.boxworld import GEM_CONTENT, Box, BoxWorldLevel, Key
from keras_relational.environments.boxworld.tensor_levels import BoxWorldLevelSampler
from keras_relational.environments.bridge_boxworld import BridgeLevel
from keras_relational.environments.tensor_random import seed_state

COUNT = 3000


def _numpy(values):
    return {k: np.asarray(keras.ops.convert_to_numpy(v)) for k, v in values.items()}


def boxworld_levels(config, bank, info):
    """`BoxWorldLevel`s rebuilt from a device bank and its metadata."""
    size, length = config.frame_size, config.distractor_length
    bank, info = _numpy(bank), _numpy(info)
    levels = []
    for i in range(len(bank["agent"])):
        L, D = int(info["goal_length"][i]), int(info["num_distractors"][i])
        colors, cells = info["colors"][i], info["cells"][i]
        boxes = [Box(int(c) // size, int(c) % size, int(colors[lock - 1]),
                     GEM_CONTENT if content == 0 else int(colors[content - 1]))
                 for c, lock, content in zip(cells[1:], info["locks"][i][1:],
                                             info["contents"][i][1:], strict=True) if c >= 0]
        grid = bank["grid"][i].reshape(size, size)
        grid.flags.writeable = False
        levels.append(BoxWorldLevel(
            grid=grid, agent=divmod(int(bank["agent"][i]), size),
            loose_key=Key(*divmod(int(cells[0]), size), int(colors[0])), path=tuple(boxes[:L]),
            distractors=tuple(tuple(boxes[L + d * length:L + (d + 1) * length])
                              for d in range(D)),
            colors=tuple(int(c) for c in colors[:-1]), goal_length=L, num_distractors=D,
            distractor_length=length, branching=config.branching,
            attempts=int(info["attempts"][i])))
    return levels


def bridge_levels(config, bank, info):
    """`BridgeLevel`s rebuilt from a device bank and its metadata."""
    cols = config.cols
    bank, info = _numpy(bank), _numpy(info)
    levels = []
    for i in range(len(bank["bridge"])):
        L = int(info["solution_length"][i])
        cells = [divmod(int(c), cols) for c in info["anchors"][i]]
        b, c = (int(v) for v in info["bridge_colors"][i])
        (gy, gx), grid = cells[0], bank["grid"][i].reshape(config.rows, cols)
        grid.flags.writeable = False
        boxes = [cells[n] + (n, n + 1) for n in range(1, 2 * L) if n != L]
        if b:
            boxes.append(cells[2 * L + 1] + (c, b))
        kind = (L, b, c)
        levels.append(BridgeLevel(
            grid=grid, colors=tuple(int(v) for v in bank["colors"][i]), solution_length=L,
            bridge=(b, c) if b else None,
            bridge_cell=(cells[2 * L + 1][0], cells[2 * L + 1][1] + 1) if b else None,
            gem_cells=((gy, gx), (gy + 1, gx)), gem_lock_cells=((gy, gx + 1), (gy + 1, gx + 1)),
            loose_keys=(cells[L] + (L,), cells[2 * L] + (2 * L,)), boxes=tuple(boxes),
            puzzle_type=kind, puzzle_type_id=config.puzzle_types.index(kind)))
    return levels


def _device(env, count, seed=0):
    # Eager: compiling the sampler (XLA) costs more than drawing a few thousand levels eagerly.
    bank, info, _ = env.sample_levels(seed_state(seed), count)
    rebuild = boxworld_levels if isinstance(env, TensorBoxWorld) else bridge_levels
    return bank, rebuild(env.config, bank, info)


def _reference(module, config, count, seed=1):
    draws = module.Draws(np.random.RandomState(seed))
    return [module.generate_level(config, draws) for _ in range(count)]


# Marginals: name -> level -> the categories it adds (a list). One category per level, so that
# the counts are multinomial, except the item and key cells: the items of a level exclude each
# other's cells, which makes their counts less dispersed than multinomial (a conservative test).
def _box_marginals(config):
    size = config.frame_size

    def path_locks(lv):
        return [b.lock for b in lv.path]

    return {
        "item cells": lambda lv: [(lv.loose_key.row, lv.loose_key.col)] + [
            (b.row, b.col) for b in lv.boxes],
        "agent cell": lambda lv: [lv.agent],
        "(L, D)": lambda lv: [(lv.goal_length, lv.num_distractors)],
        "loose key colour": lambda lv: [lv.loose_key.color],
        "gem lock colour": lambda lv: [lv.path[-1].lock],
        "key to first lock offset": lambda lv: [(lv.path[0].row - lv.loose_key.row,
                                                 lv.path[0].col - lv.loose_key.col)],
        "gem box region": lambda lv: [(lv.path[-1].row * 3 // size,
                                       lv.path[-1].col * 3 // size)],
        "first branch start on the path": lambda lv: [
            (lv.goal_length, path_locks(lv).index(lv.distractors[0][0].lock)
             if lv.distractors[0][0].lock in path_locks(lv) else -1)] if lv.distractors else [],
        "first branch's last key on the path": lambda lv: [
            (lv.goal_length, lv.distractors[0][-1].content in path_locks(lv))]
        if lv.distractors else [],
    }


def _bridge_marginals(config):
    return {
        "puzzle type": lambda lv: [lv.puzzle_type],
        "gem cell": lambda lv: [lv.gem_cells[0]],
        "key cells": lambda lv: [(y, x) for y, x, _, _ in lv.boxes] + [
            (y, x) for y, x, _ in lv.loose_keys],
        "top loose key cell": lambda lv: [lv.loose_keys[0][:2]],
        "first colour": lambda lv: [lv.colors[0]],
        "bridge cell": lambda lv: [lv.bridge_cell],
    }


def _same_distribution(marginals, levels_a, levels_b, sigmas=5.0):
    """{name: z} of the marginals whose two-sample chi-square exceeds dof by `sigmas` sds."""
    failed = {}
    for name, categories in marginals.items():
        a = collections.Counter(c for lv in levels_a for c in categories(lv))
        b = collections.Counter(c for lv in levels_b for c in categories(lv))
        na, nb = sum(a.values()), sum(b.values())
        if not na or not nb:
            if na != nb:
                failed[name] = "empty in one sample"
            continue
        keys = set(a) | set(b)
        small = [k for k in keys if a[k] + b[k] < 10]
        rows = [(a[k], b[k]) for k in keys if a[k] + b[k] >= 10]
        if small:
            rows.append((sum(a[k] for k in small), sum(b[k] for k in small)))
        rows = np.array(rows, float)
        ka, kb = np.sqrt(nb / na), np.sqrt(na / nb)
        stat = (((ka * rows[:, 0] - kb * rows[:, 1]) ** 2) / rows.sum(axis=1)).sum()
        dof = max(len(rows) - 1, 1)
        z = (stat - dof) / np.sqrt(2 * dof)
        if z > sigmas:
            failed[name] = round(float(z), 1)
    return failed


@pytest.fixture(scope="module")
def train_levels():
    env = TensorBoxWorld(level_source="device")
    _, device = _device(env, COUNT)
    return env.config, device, _reference(boxworld, env.config, COUNT)


def test_boxworld_levels_keep_the_generator_invariants_and_distribution(train_levels):
    config, device, reference = train_levels
    for level in device:
        check_level(config, level)
    assert _same_distribution(_box_marginals(config), device, reference) == {}


@pytest.mark.parametrize("kwargs", [
    # Long branches: levels are discarded and redrawn (D = 4 becomes rare), as in NumPy.
    dict(distractor_length=3),
    dict(branching="backward", goal_length=(2, 6), num_distractors=(1, 3)),
    dict(room_size=8, num_colors=9, goal_length=(1, 2, 3), num_distractors=(0, 2)),
])
def test_boxworld_settings_keep_the_invariants_and_distribution(kwargs):
    env = TensorBoxWorld(level_source="device", **kwargs)
    _, device = _device(env, 800)
    for level in device:
        check_level(env.config, level)
    reference = _reference(boxworld, env.config, 800)
    assert _same_distribution(_box_marginals(env.config), device, reference) == {}
    share = [np.mean([lv.attempts > 1 for lv in levels]) for levels in (device, reference)]
    assert abs(share[0] - share[1]) < 0.05, share  # the same share of redrawn levels


def test_bridge_levels_keep_the_generator_invariants_and_distribution():
    env = TensorBridgeBoxWorld(level_source="device")
    _, device = _device(env, COUNT)
    for level in device:
        check_bridge_level(env.config, level)
    assert set(lv.puzzle_type for lv in device) == set(puzzle_types())
    reference = _reference(bridge_boxworld, env.config, COUNT)
    assert _same_distribution(_bridge_marginals(env.config), device, reference) == {}
    forced = TensorBridgeBoxWorld(level_source="device", puzzle_type=(3, 2, 5))
    for level in _device(forced, 50)[1]:
        check_bridge_level(forced.config, level)
        assert level.puzzle_type == (3, 2, 5)


def _off_by_one(sampler):
    # Anchors one column short: never in the last anchor column.
    size = sampler.config.frame_size
    keep = sampler._anchors % size < size - 4
    sampler._anchors, sampler._footprint = sampler._anchors[keep], sampler._footprint[:, keep]


def _branch_start(sampler):
    # Forward branches never start at the last path key (as `1 + randint(L - 1)` would do).
    original = sampler._problem
    length, top = sampler.config.distractor_length, 1 + sampler._max_length
    first = np.zeros(sampler.num_slots, bool)
    first[top::length] = True  # the slot of each branch's first box

    def problem(draws):
        L, D, locks, contents, branch = original(draws)
        last = first[None, :] & (locks == keras.ops.expand_dims(L, 1))
        return L, D, keras.ops.maximum(keras.ops.where(last, locks - 1, locks), 1), contents, \
            branch

    sampler._problem = problem


@pytest.mark.parametrize("break_it,marginal", [
    (_off_by_one, "item cells"), (_branch_start, "first branch start on the path")])
def test_a_broken_generator_fails(train_levels, break_it, marginal):
    config, _, reference = train_levels
    sampler = BoxWorldLevelSampler(config)
    break_it(sampler)
    bank, info, _ = sampler.sample(seed_state(0), COUNT)
    failed = _same_distribution(_box_marginals(config), boxworld_levels(config, bank, info),
                                reference)
    assert marginal in failed, failed


@pytest.mark.parametrize("variant,kwargs", [
    ("boxworld", dict(observation_type="one_hot")), ("bridge", dict(max_steps=40))])
def test_episodes_on_device_levels_in_lockstep_with_the_oracle(variant, kwargs):
    cls = TensorBoxWorld if variant == "boxworld" else TensorBridgeBoxWorld
    env = cls(level_source="device", **kwargs)
    bank, levels = _device(env, 200, seed=5)
    for key, value in env.bank_from_levels(levels).items():  # the bank is what the grid shows
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(bank[key]), value)
    counts = run_lockstep(variant, 32, 60, num_levels=200, levels=levels, **kwargs)
    assert counts["solved"] > 8  # the oracle's slots win device levels


def test_compiled_determinism_and_errors():
    # A small level (3 item slots): XLA compiles it in seconds.
    env = TensorBoxWorld(level_source="device", goal_length=1, num_distractors=(0, 1),
                         room_size=6, num_colors=4)
    sample = compile_step(lambda seed: env.sample_levels(seed, 16))
    first, _, seed = sample(seed_state(7))
    again, _, _ = sample(seed_state(7))
    fresh, _, _ = sample(seed)
    for key in first:
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(first[key]),
                                      keras.ops.convert_to_numpy(again[key]))
    assert not np.array_equal(keras.ops.convert_to_numpy(first["grid"]),
                              keras.ops.convert_to_numpy(fresh["grid"]))
    eager = env.level_bank(16, seed=7)
    assert tuple(eager["grid"].shape) == (16, 64)
    with pytest.raises(ValueError, match="level_source.*'numpy' or 'device'.*'gpu'"):
        TensorBoxWorld(level_source="gpu")
    with pytest.raises(ValueError, match="level_source.*'device' for sample_levels"):
        TensorBoxWorld().sample_levels(seed_state(0), 4)
    with pytest.raises(ValueError, match="holdout.*None with level_source='device'"):
        TensorBoxWorld(level_source="device", holdout="colors")
    strict = TensorBoxWorld(level_source="device", distractor_length=3, strict=True,
                            goal_length=4, num_distractors=3)
    with pytest.raises(LevelGenerationError, match="did not fit in 1 attempt"):
        strict.level_bank(256, seed=0)
    assert BoxWorldConfig().holdout is None and BridgeConfig().puzzle_type is None


def test_until_accepted_redraws_rows_until_accepted_and_keeps_the_first_draw_of_the_rest():
    from keras_relational.environments.tensor_random import until_accepted

    def sample(seed):  # round r (seed [r, 0]) draws r + 1 in every row and accepts rows < r
        r = seed[0]
        drawn = {"value": keras.ops.zeros((4,), "int32") + r + 1}
        return drawn, keras.ops.arange(4, dtype="int32") < r, seed + np.array([1, 0], "int32")

    levels, attempts, seed = until_accepted(sample, np.array([0, 0], "int32"), 3,
                                            {"value": keras.ops.zeros((4,), "int32")})
    # Row 0 accepted in round 2, row 1 in round 3; rows 2 and 3 never: the first round's draw.
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(levels["value"]), [2, 3, 1, 1])
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(attempts), [2, 3, 4, 4])
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(seed), [3, 0])
