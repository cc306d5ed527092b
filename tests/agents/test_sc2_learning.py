"""The SC2 agent's composite V-trace learner and actor on a tiny stand-in environment.

No pysc2 needed: :class:`TinySC2` has the adapter's observation keys and step protocol with a few
functions, so this runs in every test process (tests/environments/test_sc2.py runs the same path
on pysc2's mock environment, in a process of its own).
"""

import dm_env
import keras
import numpy as np
import pytest

from keras_relational.agents.sc2.acting import SC2Actor, sample
from keras_relational.agents.sc2.learning import SC2VTraceLearner, as_tensors
from keras_relational.agents.sc2.policy import ARGUMENTS, greedy_policy
from keras_relational.models.sc2_agent import NON_SPATIAL_ARGUMENTS, sc2_agent

SIZE, FUNCTIONS = 8, 6
SCREEN, MINIMAP = (0, 5), (3, 0)
SMALL = dict(screen_size=SIZE, screen_layers=SCREEN, minimap_layers=MINIMAP,
             num_functions=FUNCTIONS, stem_channels=4, lstm_channels=8, num_blocks=1, num_heads=1,
             key_dim=8, mlp_units=(16,))
SIZES = {name: SIZE * SIZE for name in ARGUMENTS[:3]} | dict(NON_SPATIAL_ARGUMENTS)


class TinySC2(dm_env.Environment):
    """Random feature layers, a random available set (always with function 0), reward 1 for
    function 1, episodes of 3 steps; the adapter's observation keys."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.t = None

    def _observation(self, previous=0):
        available = (self.rng.random(FUNCTIONS) < 0.5).astype(np.float32)
        available[0] = 1.0
        return {"screen": self.rng.integers(0, 5, (SIZE, SIZE, 2)).astype(np.int32),
                "minimap": self.rng.integers(0, 3, (SIZE, SIZE, 2)).astype(np.int32),
                "player": self.rng.random(11).astype(np.float32),
                "available_actions": available, "previous_function": np.int32(previous),
                "previous_spatial": np.zeros(2, np.float32)}

    def reset(self):
        self.t = 0
        self.available = self._observation()
        return dm_env.restart(self.available)

    def step(self, action):
        if self.t is None or self.t == 3:
            return self.reset()
        function = int(action["function"])
        assert self.available["available_actions"][function] == 1.0, function
        for name, size in SIZES.items():
            assert 0 <= int(action[name]) < size, (name, action[name])
        self.t += 1
        self.available = self._observation(function)
        reward = float(function == 1)
        return (dm_env.termination if self.t == 3 else dm_env.transition)(reward, self.available)

    def observation_spec(self):
        return {}

    def action_spec(self):
        return {}


MASK = np.zeros((FUNCTIONS, len(ARGUMENTS)), np.float32)
MASK[1, ARGUMENTS.index("screen")] = MASK[1, ARGUMENTS.index("queued")] = 1.0
MASK[2, ARGUMENTS.index("minimap")] = MASK[3, ARGUMENTS.index("select_point_act")] = 1.0


@pytest.fixture(scope="module")
def setup():
    keras.utils.set_random_seed(0)
    model = sc2_agent(**SMALL)
    actor = SC2Actor([TinySC2(0), TinySC2(1)], model, MASK, seed=0)
    learner = SC2VTraceLearner(model, keras.optimizers.Adam(1e-3), MASK, compile_mode="eager")
    return model, actor, learner


def _log_softmax(x):
    x = np.asarray(x, np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_behaviour_log_prob_is_the_composite_numpy_reference(setup):
    model, actor, _ = setup
    observation = actor._observation()  # the current time steps (FIRST)
    state = actor._state
    action, log_prob = actor.act(observation, np.zeros(2, np.int32))
    out = model(dict(observation, state_h=state[0], state_c=state[1],
                     function_id=action["function"]))
    for i in range(2):
        function = action["function"][i]
        assert observation["available_actions"][i, function] == 1.0
        expected = _log_softmax(out["function_logits"])[i, function] + sum(
            _log_softmax(out[name])[i, action[name][i]]
            for k, name in enumerate(ARGUMENTS) if MASK[function, k])
        np.testing.assert_allclose(log_prob[i], expected, rtol=1e-5, atol=1e-5)


def test_learner_replays_the_actor_and_a_few_steps_train(setup):
    model, actor, learner = setup
    unroll = actor.collect(4)  # crosses an episode boundary (3-step episodes)
    assert (unroll.step_type == 2).any() and unroll.observation["screen"].shape[:2] == (5, 2)
    # On-policy, the learner's replay (state carried and reset at episode starts) gives the
    # actor's composite log-probabilities: log rho = 0.
    log_prob, entropy, value = learner.target([v.value for v in model.trainable_variables],
                                              as_tensors(unroll))
    np.testing.assert_allclose(np.asarray(log_prob), unroll.behaviour_log_prob, atol=1e-4)
    assert np.asarray(value).shape == (5, 2) and (np.asarray(entropy) > 0).all()
    before = [np.array(v.value) for v in model.trainable_variables]
    for step in range(2):
        info = learner.train_step(unroll if step == 0 else actor.collect(4))
        assert all(np.isfinite(x) for x in info), info
    heads = model.get_layer("sc2_argument_heads")
    unused = {id(v) for k, name in enumerate(ARGUMENTS) if not MASK[:, k].any()
              for v in heads.get_layer(f"{name}_logits").trainable_variables}
    changed = {id(v): not np.allclose(b, np.asarray(v.value))
               for b, v in zip(before, model.trainable_variables, strict=True)}
    # Every weight moves but the heads of arguments no function takes (masked out of the
    # composite log-probability and entropy, so they get no gradient).
    assert {key for key, moved in changed.items() if not moved} == unused


def test_greedy_policy_picks_available_functions(setup):
    model, actor, _ = setup
    policy = greedy_policy(model)
    observation = actor._observation()
    out = policy(dict(observation, state_h=actor._state[0], state_c=actor._state[1]))
    function = np.asarray(out["function"])
    assert (observation["available_actions"][np.arange(2), function] == 1.0).all()
    for name, size in SIZES.items():
        assert ((np.asarray(out[name]) >= 0) & (np.asarray(out[name]) < size)).all()


def test_sample_never_picks_masked_logits():
    logits = np.array([[0.0, -1e9, 5.0]] * 200, np.float32)
    assert set(sample(logits, np.random.default_rng(0))) == {0, 2}
