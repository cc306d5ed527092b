"""Lockstep check of a tensor BoxWorld against its NumPy batched twin (shared by the tests).

Both play the same levels in the same order (the NumPy environment's generator is replaced by the
tensor environment's bank, cycled as the tensor cursor cycles) and take the same actions: a mix
of the oracle's plans (so that episodes are solved), the oracle with random detours, and uniform
random actions (episodes truncated or ended on a distractor box or bridge). Every step must give
identical step types, rewards, discounts and observations.

Runnable as a script for the JAX backend (the tests start it in a fresh process):
``KERAS_BACKEND=jax python tests/tensor_lockstep.py``.
"""

import contextlib
import sys

import numpy as np

from keras_relational import environments
from keras_relational.environments import boxworld_solver

# variant -> (tensor class name, batched class, module whose `generate_level` the batched uses)
VARIANTS = {
    "boxworld": ("TensorBoxWorld", environments.BatchedBoxWorld,
                 "keras_relational.environments.boxworld.batched"),
    "bridge": ("TensorBridgeBoxWorld", environments.BatchedBridgeBoxWorld,
               "keras_relational.environments.bridge_boxworld.batched"),
}


def compile_step(fn):
    """`fn` compiled for the current Keras backend (jax.jit / tf.function(jit_compile=True))."""
    import keras

    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return jax.jit(fn)
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=True, autograph=False)
    return fn


@contextlib.contextmanager
def levels_from(module_name, levels):
    """Makes the batched environment of `module_name` load `levels` in order, cycling."""
    import importlib

    module = importlib.import_module(module_name)
    original = module.generate_level
    counter = iter(range(10**12))
    module.generate_level = lambda config, draws: levels[next(counter) % len(levels)]
    try:
        yield
    finally:
        module.generate_level = original


class MixedPolicy:
    """Slot i % 4: 0 uniform random, 1 and 2 the oracle, 3 the oracle with 10 % random actions."""

    def __init__(self, env, seed):
        self._env = env
        self._rng = np.random.RandomState(seed)
        self._plans = [[] for _ in range(env.batch_size)]
        self._keys = [None] * env.batch_size

    def __call__(self):
        env, n = self._env, self._env.batch_size
        actions = self._rng.randint(4, size=n).astype(np.int32)
        detour = self._rng.random_sample(n) < 0.1
        levels, steps = env.levels, env.num_steps
        for i in range(n):
            mode = i % 4
            if mode == 0 or (mode == 3 and detour[i]):
                continue
            key = (id(levels[i]), int(steps[i]))
            if key != self._keys[i] or not self._plans[i]:
                self._plans[i] = list(reversed(
                    boxworld_solver.solve_state(*env.state(i)) or [0]))
            self._keys[i] = (id(levels[i]), int(steps[i]) + 1)
            actions[i] = self._plans[i].pop()
        return actions


def run_lockstep(variant, num_envs, num_steps, num_levels, seed=0, levels=None, **kwargs):
    """Steps both environments `num_steps` times; returns counts of what the episodes did.

    `levels`: the NumPy levels to play (default: `num_levels` from the NumPy generator), e.g.
    levels of the on-device generator rebuilt as level objects.

    Returns a dict: `steps` (env-steps compared), `last` (LAST steps), `solved` (episodes that
    took the gem: reward 10), `truncated` (LAST with a nonzero discount), `first` (auto-resets).
    """
    import keras

    tensor_name, batched_cls, module_name = VARIANTS[variant]
    tensor_env = getattr(environments, tensor_name)(**kwargs)
    if levels is None:
        levels = tensor_env.generate_levels(num_levels, seed)
    bank = {k: keras.ops.convert_to_tensor(v) for k, v in
            tensor_env.bank_from_levels(levels).items()}
    with levels_from(module_name, levels):
        numpy_env = batched_cls(batch_size=num_envs, seed=seed, **kwargs)
        expected = numpy_env.reset()
        policy = MixedPolicy(numpy_env, seed)
        step = compile_step(tensor_env.step)
        state, timestep = tensor_env.reset(bank, num_envs)
        _assert_equal(timestep, expected, -1)
        counts = dict(steps=0, last=0, solved=0, truncated=0, first=0)
        for t in range(num_steps):
            actions = policy()
            expected = numpy_env.step(actions)
            state, timestep = step(state, actions, bank)
            _assert_equal(timestep, expected, t)
            last = expected.step_type == 2
            counts["steps"] += num_envs
            counts["last"] += int(last.sum())
            counts["solved"] += int((expected.reward == 10).sum())
            counts["truncated"] += int((last & (expected.discount > 0)).sum())
            counts["first"] += int((expected.step_type == 0).sum())
    solved = keras.ops.convert_to_numpy(state["solved"])
    np.testing.assert_array_equal(solved, numpy_env.solved)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(state["steps"]),
                                  numpy_env.num_steps)
    return counts


def _assert_equal(timestep, expected, t):
    import keras

    for field in ("step_type", "reward", "discount", "observation"):
        got = keras.ops.convert_to_numpy(getattr(timestep, field))
        want = getattr(expected, field)
        assert got.dtype == want.dtype, (t, field, got.dtype, want.dtype)
        if not np.array_equal(got, want):
            rows = np.flatnonzero(np.any((got != want).reshape(len(want), -1), axis=1))
            raise AssertionError(f"step {t}: {field} differs in slots {rows[:10].tolist()}")


if __name__ == "__main__":  # the JAX run of the tests: `variant num_envs num_steps` per line
    for line in sys.argv[1:]:
        name, n, steps = line.split()
        extra = dict(max_steps=40) if name == "bridge" else dict(observation_type="one_hot",
                                                                  goal_length=(1, 2, 3))
        print(name, run_lockstep(name, int(n), int(steps), num_levels=2000, **extra))
