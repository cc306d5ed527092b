"""Run in a fresh process by test_sc2.py: protobuf's implementation is chosen at its first import,
so PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION must be set before anything imports it."""

import os
import sys
import time
import unittest

START = time.time()

os.environ["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = "python"
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402
from dm_env import test_utils  # noqa: E402

from keras_relational.environments.sc2 import SC2Environment  # noqa: E402

SIZE = 8
RNG = np.random.default_rng(0)


class ConformanceTest(test_utils.EnvironmentTestMixin, unittest.TestCase):
    def make_object_under_test(self):
        return SC2Environment.mock(screen_size=SIZE, minimap_size=SIZE, episode_length=5)

    def make_action(self):
        # no_op or select_point (always available in the mock) with random arguments.
        spec = self.environment.action_spec()
        action = {name: value.generate_value() for name, value in spec.items()}
        action["function"] = np.int32(RNG.choice([0, 2]))
        action["screen"] = np.int32(RNG.integers(SIZE * SIZE))
        return action


def sample(logits, rng):
    logits = np.asarray(logits, np.float64)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    return np.array([rng.choice(len(p), p=p) for p in probs], np.int32)


def agent_on_adapter():
    from keras_relational.models.sc2_agent import initial_state, sc2_agent

    env = SC2Environment.mock(screen_size=SIZE, minimap_size=SIZE)
    model = sc2_agent(screen_size=SIZE, num_blocks=1)
    print(f"built {time.time() - START:.1f} s")
    trunk, heads = model.get_layer("sc2_trunk"), model.get_layer("sc2_argument_heads")
    rng = np.random.default_rng(0)
    timestep = env.reset()
    state_h, state_c = (np.asarray(s) for s in initial_state(model, 1))
    for _ in range(2):
        inputs = {k: np.asarray(v)[None] for k, v in timestep.observation.items()}
        inputs.update(state_h=state_h, state_c=state_c)
        out = trunk(inputs)
        function = sample(out["function_logits"], rng)
        assert timestep.observation["available_actions"][function[0]] == 1.0, function
        args = heads({"shared": np.asarray(out["shared"]), "spatial": np.asarray(out["spatial"]),
                      "function_id": function})
        action = {"function": function[0]}
        action.update({name: sample(logits, rng)[0] for name, logits in args.items()})
        timestep = env.step(action)
        state_h, state_c = np.asarray(out["state_h"]), np.asarray(out["state_c"])
    assert timestep.observation["previous_function"] == function[0]
    # The composite log-probability the learner uses counts only the arguments the function takes.
    from keras_relational.models.sc2_agent import (
        NON_SPATIAL_ARGUMENTS,
        SPATIAL_ARGUMENTS,
        composite_log_prob_and_entropy,
    )

    names, mask = env.argument_mask()
    assert names == SPATIAL_ARGUMENTS + tuple(name for name, _ in NON_SPATIAL_ARGUMENTS)
    assert mask[2].tolist() == [float(n in ("screen", "select_point_act")) for n in names]
    batch = {k: v[None] for k, v in action.items()}
    full = model(dict(inputs, function_id=function))
    log_prob, entropy = composite_log_prob_and_entropy(full, batch, mask)
    assert np.isfinite(np.asarray(log_prob)).all() and np.asarray(entropy)[0] > 0
    print("agent ok")


if __name__ == "__main__":
    agent_on_adapter()
    print(f"agent {time.time() - START:.1f} s")
    result = unittest.main(argv=[sys.argv[0]], exit=False).result
    sys.exit(0 if result.wasSuccessful() else 1)
