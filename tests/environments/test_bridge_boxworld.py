"""Bridge BoxWorld (Clift et al. 2020): dm_env contract, generator, puzzle types, rules, oracle."""

import collections

import numpy as np
import pytest
from absl.testing import absltest
from boxworld_checks import check_bridge_level as check_level
from dm_env import test_utils

from keras_relational.environments import (
    BridgeBoxWorld,
    BridgeConfig,
    OraclePolicy,
    boxworld_solver,
    bridge_boxworld,
    puzzle_types,
)
from keras_relational.environments.bridge_boxworld import EMPTY, GEM

UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3


class BridgeDmEnvTest(test_utils.EnvironmentTestMixin, absltest.TestCase):
    """Random actions with a step limit (truncations, bridge and gem terminations)."""

    def make_object_under_test(self):
        return BridgeBoxWorld(max_steps=80, seed=0)

    def make_action_sequence(self):
        rng = np.random.RandomState(1)
        for _ in range(800):
            yield np.int32(rng.randint(4))


class BridgeOracleDmEnvTest(test_utils.EnvironmentTestMixin, absltest.TestCase):
    """The paper's setting (no step limit), oracle actions: every episode ends with the gem."""

    def make_object_under_test(self):
        return BridgeBoxWorld(seed=2, observation_type="one_hot")

    def make_action_sequence(self):
        policy = OraclePolicy(self.environment)
        for _ in range(300):
            yield policy()


def _levels(count, seed=0, **kwargs):
    config = BridgeConfig(**kwargs)
    draws = bridge_boxworld.Draws(np.random.RandomState(seed))
    return config, [bridge_boxworld.generate_level(config, draws) for _ in range(count)]


def test_generator_invariants_10k_levels_and_puzzle_type_labels():
    config, levels = _levels(10_000)
    for level in levels:
        check_level(config, level)
    types = collections.Counter(level.puzzle_type for level in levels)
    assert set(types) == set(puzzle_types()) and len(types) == 17
    bridges = sum(level.has_bridge for level in levels) / len(levels)
    assert abs(bridges - 0.5) < 0.03
    lengths = collections.Counter(level.solution_length for level in levels)
    assert all(abs(n / len(levels) - 1 / 3) < 0.03 for n in lengths.values())


def test_puzzle_types_listing():
    assert puzzle_types((1,)) == ((1, 0, 0), (1, 1, 2))
    assert len(puzzle_types()) == 3 + 1 + 4 + 9
    assert (3, 2, 5) in puzzle_types() and (3, 3, 4) in puzzle_types()


@pytest.mark.parametrize("kind", [(3, 2, 5), (1, 1, 2), (2, 2, 3), (2, 0, 0)])
def test_forced_puzzle_type(kind):
    env = BridgeBoxWorld(puzzle_type=kind, seed=3)
    for _ in range(100):
        env.reset()
        assert env.puzzle_type == kind == env.level.puzzle_type
        check_level(env.config, env.level)


def test_same_seed_same_levels():
    a, b = BridgeBoxWorld(seed=5), BridgeBoxWorld(seed=5)
    actions = np.random.RandomState(0).randint(4, size=3000)
    a.reset(), b.reset()
    for action in actions:
        s, t = a.step(action), b.step(action)
        assert s.step_type == t.step_type and s.reward == t.reward
        np.testing.assert_array_equal(s.observation, t.observation)
    assert a.level == b.level and BridgeBoxWorld(seed=6).reset() is not None


# ---------------------------------------------------------------------------------------------
# Oracle and rules


def test_oracle_solves_every_level():
    env = BridgeBoxWorld(seed=7)
    for _ in range(2000):
        env.reset()
        plan = boxworld_solver.solve(env)
        rewards = [env.step(action).reward for action in plan]
        assert env.solved and not env.opened_bridge
        # Loose keys and boxes give +1 each (2L in all), the gem exactly +10 (not +11).
        assert rewards[-1] == 10.0 and sum(rewards) == 2 * env.level.solution_length + 10


def test_bridge_free_levels_cannot_be_lost():
    # Without a bridge and without a horizon a random policy always wins (nothing can be lost).
    env = BridgeBoxWorld(bridge_probability=0.0, seed=8)
    rng = np.random.RandomState(0)
    for _ in range(30):
        timestep = env.reset()
        while not timestep.last():
            timestep = env.step(rng.randint(4))
            assert timestep.reward != -1.0
        assert env.solved and timestep.reward == 10.0 and timestep.discount == 0.0


def _place(env, agent, inventory=()):
    env.set_state(env.get_state()._replace(agent=agent, inventory=tuple(inventory)))


def test_bridge_gives_minus_one_and_ends():
    env = BridgeBoxWorld(puzzle_type=(2, 1, 4), seed=9)
    env.reset()
    y, x = env.level.bridge_cell
    _place(env, (y - 1, x), inventory=[1])
    timestep = env.step(DOWN)
    assert timestep.last() and timestep.reward == -1.0 and timestep.discount == 0.0
    assert env.opened_bridge and not env.solved and env.inventory == (4,)
    assert env.step(DOWN).first()


def test_rewards_and_inventory_column():
    env = BridgeBoxWorld(puzzle_type=(2, 0, 0), seed=10)
    env.reset()
    level, palette = env.level, env.config.palette
    (ty, tx, top), (by, bx, bottom) = level.loose_keys
    _place(env, (ty - 1, tx))
    timestep = env.step(DOWN)  # a loose key: +1
    assert timestep.reward == 1.0 and env.inventory == (top,)
    assert tuple(timestep.observation[0, 9]) == tuple(palette[level.colors[top - 1]])
    assert tuple(timestep.observation[1, 9]) == bridge_boxworld.EMPTY_SLOT_RGB
    _place(env, (by - 1, bx), inventory=env.inventory)
    timestep = env.step(DOWN)
    assert timestep.reward == 1.0 and env.inventory == (top, bottom)
    assert tuple(timestep.observation[1, 9]) == tuple(palette[level.colors[bottom - 1]])
    # Open the top chain's box (lock 2 holds key 1): +1, key 2 removed, key 1 appended.
    y, x, key, lock = next(b for b in level.boxes if b[3] == top)
    _place(env, (y - 1, x + 1), inventory=env.inventory)
    timestep = env.step(DOWN)
    assert timestep.reward == 1.0 and env.inventory == (bottom, key)
    assert env.grid[y, x] == EMPTY and env.grid[y, x + 1] == EMPTY
    # The gem needs both locks' keys (1 and L + 1 = 3): one key is not enough.
    (gy, lock_x), _ = level.gem_lock_cells
    _place(env, (gy - 1, lock_x), inventory=[1])
    assert env.step(DOWN).reward == 0.0 and env.agent_position == (gy - 1, lock_x)
    _place(env, (gy - 1, lock_x), inventory=[3, 1])
    timestep = env.step(DOWN)
    assert timestep.last() and timestep.reward == 10.0 and env.solved
    assert env.inventory == (GEM,)
    assert (env.grid == GEM).sum() == 0


def test_the_bottom_gem_lock_opens_the_gem_too():
    env = BridgeBoxWorld(puzzle_type=(1, 0, 0), seed=11)
    env.reset()
    _, (y, x) = env.level.gem_lock_cells
    _place(env, (y, x + 1), inventory=[2, 1])
    timestep = env.step(LEFT)
    assert timestep.reward == 10.0 and timestep.last()


def test_blocking_rules():
    env = BridgeBoxWorld(puzzle_type=(3, 0, 0), seed=12)
    env.reset()
    level = env.level
    y, x, key, lock = level.boxes[0]
    (gy, gx), _ = level.gem_cells
    before = env.grid.copy()
    for agent, inventory, action in [
        ((0, 0), (), UP),  # off the board
        ((0, 0), (), LEFT),
        ((6, 8), (), DOWN),
        ((6, 8), (), RIGHT),
        ((y - 1, x), (lock,), DOWN),  # the key tile of a box
        ((y, x - 1), (lock,), RIGHT),
        ((y - 1, x + 1), (), DOWN),  # a lock without its key
        ((y - 1, x + 1), (key,), DOWN),
        ((gy - 1, gx), (1, 4), DOWN),  # a gem tile
    ]:
        _place(env, agent, inventory)
        timestep = env.step(action)
        assert timestep.reward == 0.0 and timestep.mid()
        assert env.agent_position == agent and env.inventory == inventory
        np.testing.assert_array_equal(env.grid, before)


def test_no_step_limit_by_default_and_optional_truncation():
    env = BridgeBoxWorld(seed=13)
    env.reset()
    assert all(env.step(UP).mid() for _ in range(2000))  # (0, 0): always a no-op
    env = BridgeBoxWorld(seed=13, max_steps=10)
    env.reset()
    steps = [env.step(UP) for _ in range(10)]
    assert steps[-1].last() and steps[-1].discount == 1.0


def test_actions_and_clift_order():
    env = BridgeBoxWorld(puzzle_type=(1, 0, 0), seed=14)
    env.reset()
    assert bridge_boxworld.CLIFT_ACTIONS == (LEFT, UP, RIGHT, DOWN)
    _place(env, (0, 1))
    env.step(RIGHT)
    assert env.agent_position == (0, 2)
    env.step(LEFT)
    assert env.agent_position == (0, 1)


def test_pure_render_and_one_hot():
    rgb = BridgeBoxWorld(seed=15, max_steps=200)
    hot = BridgeBoxWorld(seed=15, max_steps=200, observation_type="one_hot")
    actions = np.random.RandomState(3).randint(4, size=1500)
    rgb.reset(), hot.reset()
    for action in actions:
        a, b = rgb.step(action), hot.step(action)
        assert a.observation.shape == (7, 10, 3) and a.observation.dtype == np.uint8
        y, x = rgb.agent_position
        pure = bridge_boxworld.render_rgb(rgb.config, rgb.level, rgb.grid, y * 9 + x,
                                          rgb.inventory)
        np.testing.assert_array_equal(a.observation, pure)
        np.testing.assert_array_equal(rgb.render(), pure)
        assert tuple(a.observation[rgb.agent_position]) == bridge_boxworld.PLAYER_RGB
        obs = b.observation
        assert obs.shape == (7, 10, 44) and obs.dtype == np.float32
        np.testing.assert_array_equal(obs.sum(-1), 1.0)
        assert obs[hot.agent_position][bridge_boxworld.CHANNEL_PLAYER] == 1.0
        for slot in range(7):
            held = hot.inventory[slot] if slot < len(hot.inventory) else None
            channel = (bridge_boxworld.CHANNEL_SLOT if held is None else
                       bridge_boxworld.CHANNEL_GEM if held == GEM else
                       bridge_boxworld.CHANNEL_KEY0 + hot.level.colors[held - 1])
            assert obs[slot, 9, channel] == 1.0


@pytest.mark.parametrize("kwargs,argument", [
    (dict(solution_length=0), "solution_length"),
    (dict(solution_length=4), "solution_length"),  # 2L + 2 anchors exceed the 7 x 9 board
    (dict(puzzle_type=(2, 1, 2)), "puzzle_type"),
    (dict(puzzle_type=(2, 3, 4)), "puzzle_type"),
    (dict(puzzle_type=(2, 1)), "puzzle_type"),
    (dict(bridge_probability=1.5), "bridge_probability"),
    (dict(rows=3), "rows"),
    (dict(num_colors=5), "num_colors"),
    (dict(max_steps=0), "max_steps"),
    (dict(observation_type="pixels"), "observation_type"),
])
def test_invalid_configurations_raise_clear_value_errors(kwargs, argument):
    with pytest.raises(ValueError, match=f"`{argument}`: expected .*received"):
        BridgeBoxWorld(**kwargs)


def test_unknown_action_raises():
    env = BridgeBoxWorld(seed=0)
    env.reset()
    with pytest.raises(ValueError, match="`action`"):
        env.step(7)
