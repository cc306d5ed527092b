"""The JAX doors: the functional single Box-Worlds (`jax_boxworld`) and their gymnax
`Environment`s (`gymnax_boxworld`).

They need `KERAS_BACKEND=jax`; under another backend this module runs itself in a fresh process
with it (`test_under_jax`), and checks that the functional form says what it needs.
"""

import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

jax = pytest.importorskip("jax")

from keras_relational.environments import jax_boxworld  # noqa: E402

UNDER_JAX = keras.backend.backend() == "jax"
jax_only = pytest.mark.skipif(not UNDER_JAX, reason="runs under KERAS_BACKEND=jax "
                              "(test_under_jax starts that process)")
# Small rooms and short episodes: a few hundred transitions cross terminations and truncations.
SMALL = dict(goal_length=(1, 2), num_distractors=(0, 1), room_size=5, max_steps=8)


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.skipif(UNDER_JAX, reason="this process is the one under JAX")
def test_under_jax(tmp_path):
    # JAX's persistent compilation cache (the caller's JAX_COMPILATION_CACHE_DIR if set), for
    # every compiled program: an eager call of the level sampler compiles its loops again at
    # each call (a new closure each time), the same programs the cache then holds (~3.5 s a
    # reset -> ~0.3 s).
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3",
               JAX_COMPILATION_CACHE_DIR=os.environ.get("JAX_COMPILATION_CACHE_DIR")
               or str(tmp_path / "jax_cache"), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    env.pop("TF_USE_LEGACY_KERAS", None)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         os.path.abspath(__file__)], env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "skipped" in result.stdout  # this test itself


@pytest.mark.skipif(UNDER_JAX, reason="checks the error under another backend")
def test_needs_the_jax_backend():
    with pytest.raises(ValueError, match="KERAS_BACKEND"):
        jax_boxworld.FunctionalBoxWorld()


def test_env_params_are_static_and_checked():
    params = jax_boxworld.EnvParams(max_steps_in_episode=10, time_limit_discount=0.5)
    assert hash(params) == hash(jax_boxworld.EnvParams(10, 0.5))
    assert jax.tree_util.tree_leaves(params) == []  # static: a jit argument without leaves
    with pytest.raises(ValueError, match="max_steps_in_episode"):
        jax_boxworld.EnvParams(max_steps_in_episode=0)
    with pytest.raises(ValueError, match="time_limit_discount"):
        jax_boxworld.EnvParams(time_limit_discount=2.0)


def _batched_state(single_state, tensor_state):
    """The batched tensor state of a batch of single states (no slot waiting to restart)."""
    state = {name: single_state[name] for name in tensor_state if name in single_state}
    n = single_state["steps"].shape[0]
    state.update(needs_reset=jax.numpy.zeros(n, bool), level=tensor_state["level"],
                 cursor=tensor_state["cursor"])
    return state


def _bank(single_state, variant):
    """The bank of the levels a batch of single states just started."""
    if variant == "boxworld":
        return {"grid": single_state["grid"].astype("uint8"),
                "distractor": single_state["distractor"], "agent": single_state["pos"]}
    return {"grid": single_state["grid"].astype("int8"), "bridge": single_state["bridge"],
            "colors": single_state["colors"]}


@jax_only
@pytest.mark.parametrize("variant, make, num_envs, num_steps", [
    ("boxworld", lambda: jax_boxworld.FunctionalBoxWorld(observation_type="one_hot", **SMALL),
     64, 40),
    ("bridge", lambda: jax_boxworld.FunctionalBridgeBoxWorld(max_steps=8), 16, 20),
])
def test_vmap_of_the_single_env_equals_the_batched_tensor_env(variant, make, num_envs,
                                                               num_steps):
    env = make()
    params = env.default_params
    tensor = env.tensor_env
    reset = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))
    step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))
    batched_step = jax.jit(tensor.step)
    keys = jax.random.split(jax.random.key(0), num_envs)
    observation, state = reset(keys, params)
    # The same levels in the batched environment: every slot starts the level its key drew.
    bank = _bank(state, variant)
    tensor_state, timestep = tensor.reset(bank, num_envs)
    np.testing.assert_array_equal(observation, timestep.observation)
    rng = np.random.default_rng(0)
    counts = {"terminated": 0, "truncated": 0}
    for t in range(num_steps):
        actions = rng.integers(4, size=num_envs).astype("int32")
        step_keys = jax.random.split(jax.random.key(t + 1), num_envs)
        tensor_state, timestep = batched_step(_batched_state(state, tensor_state), actions, bank)
        observation, state, reward, done, info = step(step_keys, state, actions, params)
        # Every slot, from the same state with the same action: the same transition.
        np.testing.assert_array_equal(info["final_observation"], timestep.observation)
        np.testing.assert_array_equal(reward, timestep.reward)
        np.testing.assert_array_equal(done, timestep.step_type == 2)
        np.testing.assert_array_equal(info["discount"], timestep.discount)
        np.testing.assert_array_equal(info["terminated"], done & (timestep.discount == 0))
        np.testing.assert_array_equal(info["solved"], tensor_state["solved"])
        # Auto-reset: a finished slot already shows the level its key draws.
        reset_observation, _ = reset(step_keys, params)
        done = np.asarray(done)
        np.testing.assert_array_equal(np.asarray(observation)[done],
                                      np.asarray(reset_observation)[done])
        np.testing.assert_array_equal(np.asarray(state["steps"])[done], 0)
        counts["terminated"] += int(np.sum(info["terminated"]))
        counts["truncated"] += int(np.sum(info["truncated"]))
    assert counts["truncated"] > 0, counts
    # Random moves end Box-World episodes by distractors and the gem too (rarely Bridge's).
    assert counts["terminated"] > 0 or variant == "bridge", counts


@jax_only
def test_pure_and_deterministic():
    env = jax_boxworld.FunctionalBoxWorld(**SMALL)
    key = jax.random.key(3)
    first, state = env.reset(key)
    again, _ = env.reset(key)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, env.reset(jax.random.key(4))[0])
    grid = np.asarray(state["grid"]).copy()
    env.step(key, state, 3)
    np.testing.assert_array_equal(state["grid"], grid)  # the input state is untouched
    with pytest.raises(ValueError, match="action"):
        env.step(key, state, jax.numpy.zeros(2, "int32"))
    with pytest.raises(ValueError, match="params"):
        env.reset(key, {"max_steps_in_episode": 3})


@jax_only
def test_gymnax_wrappers_and_a_purejaxrl_rollout():
    # Box-World only: GymnaxBridgeBoxWorld shares the class and its functional form is compared
    # above; each variant's compile of the on-device level sampler costs tens of seconds.
    pytest.importorskip("gymnax")
    from gymnax.wrappers.purerl import FlattenObservationWrapper, LogWrapper

    from keras_relational.environments import gymnax_boxworld

    base = gymnax_boxworld.GymnaxBoxWorld(**SMALL)
    assert gymnax_boxworld.GymnaxBridgeBoxWorld(max_steps=8).observation_space().shape == (
        7, 10, 3)
    env = LogWrapper(FlattenObservationWrapper(base))
    params = base.default_params
    num_envs, num_steps = 8, 30
    observation, state = jax.vmap(env.reset, in_axes=(0, None))(
        jax.random.split(jax.random.key(0), num_envs), params)
    assert observation.shape == (num_envs, int(np.prod(base.observation_space(params).shape)))

    def env_step(carry, key):  # PureJaxRL's _env_step, a random policy
        state = carry
        action_key, step_key = jax.random.split(key)
        actions = jax.vmap(base.action_space(params).sample)(
            jax.random.split(action_key, num_envs))
        observation, state, reward, terminated, truncated, info = jax.vmap(
            env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(step_key, num_envs), state, actions, params)
        return state, (observation, reward, terminated, truncated, info)

    _, (observations, rewards, terminated, truncated, info) = jax.jit(
        lambda state: jax.lax.scan(env_step, state, jax.random.split(
            jax.random.key(1), num_steps)))(state)
    assert observations.shape == (num_steps, num_envs) + observation.shape[1:]
    assert bool(truncated.any())  # 8-step episodes
    lengths = np.asarray(info["returned_episode_lengths"])[np.asarray(info["returned_episode"])]
    assert lengths.size and lengths.max() <= 8
    discount = np.asarray(info["discount"])
    np.testing.assert_array_equal(discount == 0, np.asarray(terminated))
    space = base.observation_space(params)
    first = observations[0, 0].reshape(space.shape)
    assert bool(space.contains(first)) and base.action_space(params).n == 4


@jax_only
def test_the_docs_jax_examples_run():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "docs", "environments.md")) as f:
        blocks = [b for b in re.findall(r"```python\n(.*?)```", f.read(), flags=re.S)
                  if "import jax" in b]
    assert len(blocks) == 2
    for block in blocks:
        exec(compile(block, "docs/environments.md", "exec"), {})
