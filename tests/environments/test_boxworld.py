"""BoxWorld (Zambaldi et al. 2019): dm_env contract, generator invariants, rules, oracle, errors."""

import collections

import dm_env
import numpy as np
import pytest
from absl.testing import absltest
from boxworld_checks import check_level
from dm_env import test_utils

from keras_relational.environments import (
    PRESETS,
    BoxWorld,
    BoxWorldConfig,
    LevelGenerationError,
    OraclePolicy,
    boxworld,
    boxworld_solver,
    record_episode,
    save_episode,
)
from keras_relational.environments.boxworld import FLOOR, GEM, KEY0

UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3


class BoxWorldDmEnvTest(test_utils.EnvironmentTestMixin, absltest.TestCase):
    def make_object_under_test(self):
        return BoxWorld(seed=0)

    def make_action_sequence(self):
        # Random actions: several 120-step truncations and some distractor terminations.
        rng = np.random.RandomState(1)
        for _ in range(600):
            yield np.int32(rng.randint(4))


class BoxWorldOracleDmEnvTest(test_utils.EnvironmentTestMixin, absltest.TestCase):
    """Oracle actions: every episode ends in a gem termination."""

    def make_object_under_test(self):
        return BoxWorld(seed=3, observation_type="one_hot")

    def make_action_sequence(self):
        policy = OraclePolicy(self.environment)
        for _ in range(300):
            yield policy()


# ---------------------------------------------------------------------------------------------
# Generator invariants


def _levels(count, seed=0, **kwargs):
    config = BoxWorldConfig(**kwargs)
    draws = boxworld.Draws(np.random.RandomState(seed))
    return config, [boxworld.generate_level(config, draws) for _ in range(count)]


def test_generator_invariants_training_distribution_10k_levels():
    config, levels = _levels(10_000)
    for level in levels:
        check_level(config, level)
    # Branch length 1: (L, D) stays uniform (nothing is rejected).
    counts = collections.Counter((lv.goal_length, lv.num_distractors) for lv in levels)
    assert set(counts) == {(L, D) for L in range(1, 5) for D in range(5)}
    shares = np.array(list(counts.values())) / len(levels)
    assert np.all(np.abs(shares - 1 / 20) < 0.015), counts
    assert sum(lv.attempts - 1 for lv in levels) == 0


@pytest.mark.parametrize("preset,count", [
    ("train_long", 2000), ("backward", 2000), ("test_length_6", 500), ("test_length_8", 500),
    ("test_length_10", 300), ("train_heldout", 1000), ("test_heldout", 1000)])
def test_generator_invariants_presets(preset, count):
    config, levels = _levels(count, seed=1, **PRESETS[preset])
    for level in levels:
        check_level(config, level)


def test_long_branches_are_resampled_like_the_reference():
    # Branch length 3: L + 1 + 3D items often do not fit, the level is discarded and a new (L, D)
    # is drawn [R]; D = 4 becomes rare (0.8% with the reference placement; we sample anchors only
    # over feasible cells, so fewer tries fail) and the generator reports the discarded levels.
    env = BoxWorld(distractor_length=3, seed=0)
    counts = collections.Counter()
    for _ in range(2000):
        env.reset()
        counts[env.level.num_distractors] += 1
    print("branch length 3, share of D:", {d: counts[d] / 2000 for d in sorted(counts)},
          env.generation_stats)
    assert counts[4] / 2000 < 0.08
    assert counts[0] / 2000 > 0.22
    assert env.generation_stats["levels"] == 2000
    assert env.generation_stats["discarded"] > 100


def test_strict_mode_raises_instead_of_resampling(monkeypatch):
    # A 4 x 4 room cannot hold a box and the loose key: refused when configured (issue 29).
    with pytest.raises(ValueError,
                       match=r"room_size`.*loose key = 2 items.*received \(\(1,\), \(0,\), 1, 4\)"):
        BoxWorld(goal_length=1, num_distractors=0, room_size=4, seed=0)
    # A full 7 x 7 room (5 boxes + the key fill it) with no failed placement allowed: the first
    # collision discards the level.
    from keras_relational.environments.boxworld import generator

    monkeypatch.setattr(generator, "MAX_PLACEMENT_FAILURES", 0)
    monkeypatch.setattr(generator, "MAX_LEVEL_ATTEMPTS", 3)
    with pytest.raises(LevelGenerationError, match="strict"):
        BoxWorld(goal_length=5, num_distractors=0, room_size=7, strict=True, seed=0).reset()
    with pytest.raises(LevelGenerationError, match="3 attempts"):
        BoxWorld(goal_length=5, num_distractors=0, room_size=7, seed=0).reset()
    monkeypatch.undo()
    # Oversized (L, D) combinations are resampled rather than raised without strict mode.
    env = BoxWorld(goal_length=(1, 4), num_distractors=(0, 4), distractor_length=3, seed=0)
    for _ in range(50):
        env.reset()
    assert env.generation_stats["discarded"] > 0


def test_heldout_colour_split():
    held = set(boxworld.DEFAULT_HELDOUT_COLORS)
    _, train = _levels(2000, holdout="colors", split="train")
    _, test = _levels(2000, holdout="colors", split="test")
    assert all(not held & {b.lock for b in lv.path} for lv in train)
    # Held-out colours still appear on training distractors (as the keys inside them).
    assert any(held & {b.content for b in lv.boxes[lv.goal_length:]} for lv in train)
    assert all(held & {b.lock for b in lv.path} for lv in test)


def test_heldout_pair_split():
    pairs = set(boxworld.DEFAULT_HELDOUT_PAIRS)
    _, train = _levels(2000, holdout="pairs", split="train")
    _, test = _levels(2000, holdout="pairs", split="test", goal_length=(2, 3, 4))
    assert all(not any((b.lock, b.content) in pairs for b in lv.path) for lv in train)
    assert all(any((b.lock, b.content) in pairs for b in lv.path) for lv in test)


# ---------------------------------------------------------------------------------------------
# Determinism and seeding


def test_same_seed_same_levels_and_transitions():
    a, b, c = BoxWorld(seed=7), BoxWorld(seed=7), BoxWorld(seed=8)
    actions = np.random.RandomState(0).randint(4, size=2000)
    np.random.seed(123)  # noqa: NPY002
    steps_a = [a.reset()] + [a.step(x) for x in actions]
    np.random.seed(456)  # noqa: NPY002 (the global RNG must not matter)
    steps_b = [b.reset()] + [b.step(x) for x in actions]
    for s, t in zip(steps_a, steps_b, strict=True):
        assert s.step_type == t.step_type and s.reward == t.reward and s.discount == t.discount
        np.testing.assert_array_equal(s.observation, t.observation)
    c.reset()
    assert c.level != b.level
    assert sum(s.first() for s in steps_a) > 10


def test_global_numpy_rng_untouched():
    state = np.random.get_state()  # noqa: NPY002
    env = BoxWorld(seed=None)
    env.reset()
    for _ in range(500):
        env.step(1)
    after = np.random.get_state()  # noqa: NPY002
    assert state[0] == after[0] and np.array_equal(state[1], after[1]) and state[2] == after[2]


# ---------------------------------------------------------------------------------------------
# Rules (Zambaldi et al. 2019, Sec. 3.1 and App. A; [R]), on generated levels with edited states


def _env_with(goal_length=3, num_distractors=2, seed=0, **kwargs):
    env = BoxWorld(goal_length=goal_length, num_distractors=num_distractors, seed=seed, **kwargs)
    env.reset()
    return env


def _place(env, agent, held=-1, **changes):
    env.set_state(env.get_state()._replace(agent=agent, held_key=held, **changes))


def test_opening_a_path_box_and_taking_its_key():
    env = _env_with()
    box = env.level.path[0]
    config = env.config
    _place(env, (box.row, box.col + 2), held=box.lock)
    assert tuple(env.render()[0, 0]) == tuple(config.palette[box.lock])
    timestep = env.step(LEFT)
    assert timestep.step_type == dm_env.StepType.MID
    assert timestep.reward == 1.0 and timestep.discount == 1.0
    assert env.agent_position == box.lock_cell and env.held_key is None
    assert env.grid[box.lock_cell] == FLOOR and env.boxes_opened == 1
    assert tuple(timestep.observation[0, 0]) == boxworld.WALL_RGB  # the key was used up
    assert tuple(timestep.observation[box.lock_cell]) == boxworld.AGENT_RGB
    timestep = env.step(LEFT)  # the content is now a loose key
    assert timestep.reward == 0.0 and env.held_key == box.content
    assert tuple(timestep.observation[0, 0]) == tuple(config.palette[box.content])
    assert tuple(timestep.observation[box.lock_cell]) == boxworld.FLOOR_RGB


@pytest.mark.parametrize("row_offset,action", [(-1, DOWN), (1, UP)])
def test_locks_open_from_above_and_below(row_offset, action):
    env = _env_with()
    box = env.level.path[0]
    _place(env, (box.row + row_offset, box.col + 1), held=box.lock)
    assert env.step(action).reward == 1.0 and env.agent_position == box.lock_cell


def test_blocking_rules():
    env = _env_with()
    level = env.level
    box = level.path[1]
    wrong = next(c for c in range(env.config.num_colors) if c != box.lock)
    grid_before = env.grid.copy()
    for agent, held, action in [
        ((box.row, box.col + 2), wrong, LEFT),  # a lock with the wrong key
        ((box.row, box.col + 2), -1, LEFT),  # a lock without a key
        ((box.row - 1, box.col), box.lock, DOWN),  # the content of a locked box
        ((box.row + 1, box.col), box.lock, UP),
        ((box.row, box.col - 1), box.lock, RIGHT),
        ((1, 1), -1, UP),  # walls
        ((1, 1), -1, LEFT),
        ((12, 12), -1, DOWN),
        ((12, 12), -1, RIGHT),
    ]:
        _place(env, agent, held)
        timestep = env.step(action)
        assert timestep.reward == 0.0 and timestep.mid()
        assert env.agent_position == agent
        assert (env.held_key if env.held_key is not None else -1) == held
        np.testing.assert_array_equal(env.grid, grid_before)


def test_distractor_box_gives_minus_one_and_terminates():
    env = _env_with(num_distractors=3)
    box = env.level.distractors[0][0]
    _place(env, (box.row, box.col + 2), held=box.lock)
    timestep = env.step(LEFT)
    assert timestep.last() and timestep.reward == -1.0 and timestep.discount == 0.0
    assert not env.solved
    old_level = env.level
    timestep = env.step(LEFT)  # auto-reset: the action is ignored
    assert timestep.first() and timestep.reward is None and env.level is not old_level


def test_gem_gives_ten_and_terminates():
    env = _env_with()
    box = env.level.path[-1]
    _place(env, (box.row, box.col + 2), held=box.lock, boxes_opened=2)
    assert env.step(LEFT).reward == 1.0
    timestep = env.step(LEFT)
    assert timestep.last() and timestep.reward == 10.0 and timestep.discount == 0.0
    assert env.solved and env.boxes_opened == 3


def test_picking_up_a_key_replaces_the_held_key():
    env = _env_with(goal_length=1, num_distractors=0)
    key = env.level.loose_key
    other = (key.color + 1) % env.config.num_colors
    _place(env, (key.row, key.col + 1), held=other)
    timestep = env.step(LEFT)
    assert timestep.reward == 0.0 and env.held_key == key.color
    assert env.grid[key.row, key.col] == FLOOR


@pytest.mark.parametrize("discount", [1.0, 0.0])
def test_step_limit_is_a_truncation(discount):
    env = _env_with(max_steps=5, time_limit_discount=discount)
    _place(env, (1, 1))
    for _ in range(4):
        assert env.step(UP).mid()
    timestep = env.step(UP)
    assert timestep.last() and timestep.reward == 0.0 and timestep.discount == discount
    assert env.step(UP).first()


def test_default_limit_is_120_steps_and_none_disables_it():
    env = _env_with()
    _place(env, (1, 1))
    steps = [env.step(UP) for _ in range(120)]
    assert all(s.mid() for s in steps[:-1]) and steps[-1].last() and steps[-1].discount == 1.0
    env = _env_with(max_steps=None)
    _place(env, (1, 1))
    assert all(env.step(UP).mid() for _ in range(1000))


def test_gem_on_the_last_allowed_step_is_a_termination():
    env = _env_with(max_steps=120)
    box = env.level.path[-1]
    _place(env, (box.row, box.col + 2), held=box.lock, num_steps=118)
    assert env.step(LEFT).mid()
    timestep = env.step(LEFT)
    assert timestep.last() and timestep.reward == 10.0 and timestep.discount == 0.0


def test_incremental_frame_equals_pure_render_and_one_hot_encoding():
    rgb, hot = BoxWorld(seed=5), BoxWorld(seed=5, observation_type="one_hot")
    config = hot.config
    actions = np.random.RandomState(2).randint(4, size=1500)
    rgb.reset(), hot.reset()
    for action in actions:
        a, b = rgb.step(action), hot.step(action)
        pure = boxworld.render_rgb(config, rgb.grid, rgb.agent_position,
                                   -1 if rgb.held_key is None else rgb.held_key)
        np.testing.assert_array_equal(a.observation, pure)
        np.testing.assert_array_equal(rgb.render(), pure)
        obs = b.observation
        assert obs.shape == (14, 14, 44) and obs.dtype == np.float32
        np.testing.assert_array_equal(obs.sum(-1), 1.0)
        assert obs[hot.agent_position][boxworld.CHANNEL_AGENT] == 1.0
        if hot.held_key is not None:
            assert obs[0, 0, boxworld.CHANNEL_KEY0 + hot.held_key] == 1.0
        else:
            assert obs[0, 0, boxworld.CHANNEL_WALL] == 1.0
    # A key and the lock of the same colour get different channels.
    obs = hot.reset().observation
    box = hot.level.path[0]
    key_channel = boxworld.CHANNEL_KEY0 + hot.level.loose_key.color
    lock_channel = boxworld.CHANNEL_KEY0 + config.num_colors + box.lock
    assert box.lock == hot.level.loose_key.color
    assert obs[hot.level.loose_key.row, hot.level.loose_key.col, key_channel] == 1.0
    assert obs[box.lock_cell][lock_channel] == 1.0 and obs[box.lock_cell][key_channel] == 0.0


# ---------------------------------------------------------------------------------------------
# Oracle


def _play(env, plan):
    total, timestep = 0.0, None
    for action in plan:
        timestep = env.step(action)
        total += timestep.reward
    return total, timestep


def test_oracle_solves_every_training_level_within_the_limit():
    env = BoxWorld(seed=11)
    lengths = collections.defaultdict(list)
    for _ in range(10_000):
        env.reset()
        plan = boxworld_solver.solve(env)
        total, timestep = _play(env, plan)
        assert env.solved and timestep.last() and timestep.discount == 0.0
        assert total == env.level.max_return == env.level.goal_length + 10
        lengths[env.level.goal_length].append(len(plan))
    assert max(max(v) for v in lengths.values()) <= 120  # optimal routes of L <= 4 need <= 55 steps
    means = {L: float(np.mean(v)) for L, v in sorted(lengths.items())}
    print("oracle mean episode length by L:", means)
    assert 10 < means[1] < 20 and 32 < means[4] < 45  # a re-implementation of [R]: 14.6 and 38.1


@pytest.mark.parametrize("preset", ["train_long", "backward", "test_length_6", "test_length_10",
                                    "test_heldout"])
def test_oracle_solves_every_level_of_the_other_settings(preset):
    env = BoxWorld.from_preset(preset, seed=12, max_steps=None)
    for _ in range(200 if preset != "test_length_10" else 80):
        env.reset()
        total, _ = _play(env, boxworld_solver.solve(env))
        assert env.solved and total == env.level.goal_length + 10


def test_oracle_is_shortest_against_a_breadth_first_search_over_game_states():
    # Exhaustive BFS over (agent, held key, grid) using the env's own step via get/set_state.
    env = BoxWorld(goal_length=(1, 2), num_distractors=(0, 1, 2), seed=13, max_steps=None)
    for _ in range(15):
        env.reset()
        start = env.get_state()
        plan = boxworld_solver.solve(env)
        frontier, seen, depth, best = [start], {start[1:4]}, 0, None
        while frontier and best is None:
            depth += 1
            next_frontier = []
            for state in frontier:
                for action in range(4):
                    env.set_state(state)
                    timestep = env.step(action)
                    if env.solved:
                        best = depth
                        break
                    if timestep.last():
                        continue
                    successor = env.get_state()
                    if successor[1:4] not in seen:
                        seen.add(successor[1:4])
                        next_frontier.append(successor)
                if best is not None:
                    break
            frontier = next_frontier
        assert best == len(plan)


def test_oracle_policy_replans_after_outside_moves():
    env = BoxWorld(seed=14, max_steps=None)
    policy = OraclePolicy(env)
    rng = np.random.RandomState(0)
    solved = 0
    for _ in range(50):
        timestep = env.reset()
        while not timestep.last():
            action = policy(timestep) if rng.rand() > 0.2 else 2  # sometimes step left instead
            timestep = env.step(action)
        solved += env.solved
    assert solved >= 40  # a forced left step can open a distractor; the oracle never does


def test_backward_branching_greedy_policy_always_solves():
    # Zambaldi et al. 2019, Fig. 8: "open the lock matching the held key" (plus BFS navigation).
    env = BoxWorld.from_preset("backward", seed=15, max_steps=None)
    size, lock0 = env.config.frame_size, env.config.lock0
    for _ in range(300):
        env.reset()
        total = 0.0
        while not env.solved:
            grid = env.grid.reshape(-1).tolist()
            held = env.held_key
            if held is not None:
                targets = [i for i, c in enumerate(grid) if c == lock0 + held]
            else:  # the loose key or the gem (free items have no lock to their right)
                targets = [i for i, c in enumerate(grid)
                           if (c == GEM or KEY0 <= c < lock0) and grid[i + 1] < lock0]
            assert len(targets) == 1
            pos = env.agent_position[0] * size + env.agent_position[1]
            for action in boxworld.grid_path(grid, pos, targets[0], env.config.deltas):
                total += env.step(action).reward
        assert total == env.level.goal_length + 10


# ---------------------------------------------------------------------------------------------
# Errors and helpers


@pytest.mark.parametrize("kwargs,argument", [
    (dict(goal_length=0), "goal_length"),
    (dict(goal_length=()), "goal_length"),
    (dict(goal_length=1.5), "goal_length"),
    (dict(goal_length=16, num_distractors=0), "goal_length"),  # more boxes than fit the room
    (dict(goal_length=4, num_distractors=4, distractor_length=3), "num_distractors"),
    (dict(num_distractors=-1), "num_distractors"),
    (dict(distractor_length=0), "distractor_length"),
    (dict(branching="sideways"), "branching"),
    (dict(branching="backward", distractor_length=3), "distractor_length"),
    (dict(room_size=3), "room_size"),
    (dict(num_colors=5), "num_colors"),
    (dict(max_steps=0), "max_steps"),
    (dict(time_limit_discount=1.5), "time_limit_discount"),
    (dict(observation_type="pixels"), "observation_type"),
    (dict(holdout="keys"), "holdout"),
    (dict(split="valid"), "split"),
    (dict(holdout="colors", heldout_colors=(0, 20)), "heldout_colors"),
    (dict(holdout="pairs", heldout_pairs=((1, 1),)), "heldout_pairs"),
    (dict(holdout="pairs", split="test"), "goal_length"),
])
def test_invalid_configurations_raise_clear_value_errors(kwargs, argument):
    with pytest.raises(ValueError, match=f"`[^`]*{argument}[^`]*`: expected .*received"):
        BoxWorld(**kwargs)


@pytest.mark.parametrize("action", [4, -1, 1.5, "up", np.array([1, 2]), np.float32(2.5)])
def test_unknown_actions_raise(action):
    env = BoxWorld(seed=0)
    env.reset()
    with pytest.raises(ValueError, match="`action`: expected an integer in \\[0, 4\\)"):
        env.step(action)


def test_accepted_action_types():
    env = BoxWorld(seed=0)
    env.reset()
    for action in (1, np.int32(1), np.int64(2), np.array(3), np.array(0, np.uint8)):
        assert env.step(action).mid()


def test_load_replays_a_fixed_level():
    env, other = BoxWorld(seed=0), BoxWorld(seed=99)
    env.reset()
    level = env.level
    timestep = other.load(level)
    assert timestep.first() and other.level is level
    np.testing.assert_array_equal(timestep.observation, env.render())
    with pytest.raises(ValueError, match="`level`"):
        BoxWorld(room_size=10).load(level)


def test_episode_gif_and_png(tmp_path):
    from PIL import Image

    env = BoxWorld(goal_length=2, seed=4)
    frames = record_episode(env, OraclePolicy(env))
    assert env.solved and len(frames) >= 3 and frames[0].shape == (14, 14, 3)
    gif = save_episode(frames, tmp_path / "episode.gif", scale=8)
    with Image.open(gif) as image:
        assert image.size == (112, 112) and image.n_frames == len(frames)
    png = save_episode(frames, tmp_path / "episode.png", scale=2, columns=4)
    with Image.open(png) as image:
        rows = -(-len(frames) // 4)
        assert image.size == ((4 * 15 - 1) * 2, (rows * 15 - 1) * 2)
    with pytest.raises(ValueError, match="`path`"):
        save_episode(frames, tmp_path / "episode.mp4")
