"""Run in a fresh process by test_sc2.py: loads the greedy policy SavedModel that ``train_sc2
--mock`` exported (TensorFlow only: no Keras model code) and plays it on pysc2's mock
environment; every action must be valid (available function, arguments in range)."""

import os
import sys

os.environ["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = "python"  # before protobuf (pysc2)

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_relational.environments.sc2 import SC2Environment  # noqa: E402


def main(policy_dir, size):
    policy = tf.saved_model.load(policy_dir)
    env = SC2Environment.mock(screen_size=size, minimap_size=size, episode_length=3)
    spec = env.action_spec()
    timestep = env.reset()
    signature = policy.serve.concrete_functions[0].structured_input_signature[0][0]
    shape = (1,) + tuple(signature["state_h"].shape[1:])
    state_h = state_c = np.zeros(shape, np.float32)
    assert "keras_relational.models" not in sys.modules  # served without the model's code
    for _ in range(4):  # crosses the 3-step episode's end (the adapter resets)
        # The signature's dtypes (the feature layers go in as float32).
        inputs = {k: tf.constant(np.asarray(v)[None], signature[k].dtype)
                  for k, v in timestep.observation.items()}
        inputs.update(state_h=tf.constant(state_h), state_c=tf.constant(state_c))
        out = policy.serve(inputs)
        action = {name: int(np.asarray(out[name])[0]) for name in spec}
        assert timestep.observation["available_actions"][action["function"]] == 1.0, action
        for name, bounds in spec.items():
            assert bounds.minimum <= action[name] <= bounds.maximum, (name, action[name])
        timestep = env.step(action)  # the adapter raises on an invalid action
        state_h, state_c = np.asarray(out["state_h"]), np.asarray(out["state_c"])
    print("policy ok", action)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
