"""Plays dm_env BoxWorld episodes with a PolicySaver SavedModel (no training code needed).

``play`` is what ``python -m keras_relational.experiments.play_boxworld`` runs;
``check_environment_matches`` refuses a level whose observations the policy was not trained on.
"""

import os

import numpy as np

from keras_relational.validation import check_int_at_least, invalid_value


def load_policy(policy_dir):
    """Loads a PolicySaver SavedModel (``policy.action(time_step)``).

    Raises a ValueError naming ``policy_dir`` when it is not a SavedModel, or a SavedModel
    without the policy's ``action`` signature (e.g. the Keras network export ``keras_model``).
    """
    import tensorflow as tf
    import tensorflow_probability  # noqa: F401  (registers the distribution types the policy uses)

    expected = ("a PolicySaver SavedModel directory such as <root_dir>/policies/greedy_policy "
                "(train_boxworld's export)")
    if not tf.saved_model.contains_saved_model(policy_dir):
        raise invalid_value("policy_dir", expected, f"{policy_dir} (no SavedModel there)")
    policy = tf.saved_model.load(policy_dir)
    signatures = sorted(getattr(policy, "signatures", {}).keys())
    if "action" not in signatures or not hasattr(policy, "action"):
        raise invalid_value(
            "policy_dir", expected,
            f"{policy_dir} (a SavedModel with signatures {signatures} and no 'action': a Keras "
            f"model export such as <root_dir>/keras_model is the network, not a policy)")
    return policy


def play(policy, env, episodes, max_steps_per_episode=500, record_first=False):
    """Plays ``episodes`` episodes of the dm_env ``env``; returns (results, frames of episode 1).

    ``policy``: a policy from :func:`load_policy`, or its directory.
    """
    check_int_at_least("episodes", episodes, 1)
    check_int_at_least("max_steps_per_episode", max_steps_per_episode, 1)
    if isinstance(policy, (str, os.PathLike)):
        policy = load_policy(policy)
    results, frames = [], []
    for episode in range(episodes):
        timestep = env.reset()
        total, steps = 0.0, 0
        while not timestep.last() and steps < max_steps_per_episode:
            if record_first and episode == 0:
                frames.append(env.render())
            batched = _tf_agents_time_step(timestep)
            action = policy.action(batched).action.numpy()[0]
            timestep = env.step(int(action))
            total += float(timestep.reward or 0.0)
            steps += 1
        if record_first and episode == 0:
            frames.append(env.render())
        results.append(dict(episode_return=total, steps=steps, solved=bool(env.solved)))
    return results, frames


def policy_observation_spec(policy):
    """The ``tf.TensorSpec`` of one batched observation in a loaded policy's signature."""
    _, inputs = policy.signatures["action"].structured_input_signature
    (spec,) = [s for s in inputs.values() if s.name.endswith("observation")]
    return spec


def check_environment_matches(policy_spec, env):
    """Raises a ValueError naming the flags when ``env``'s observations do not fit the policy."""
    env_spec = env.observation_spec()
    expected = (tuple(policy_spec.shape[1:]), policy_spec.dtype.as_numpy_dtype)
    received = (tuple(env_spec.shape), env_spec.dtype.type)
    if expected != received:
        raise ValueError(
            f"The policy takes observations of shape {expected[0]} and dtype "
            f"{np.dtype(expected[1]).name}, but the environment (--env, --room_size, "
            f"--observation_type) "
            f"gives shape {received[0]} and dtype {np.dtype(received[1]).name}: play with the "
            f"level settings the policy was trained on (room side = observation side - 2).")


def _tf_agents_time_step(timestep):
    from tf_agents.trajectories import time_step as ts

    return ts.TimeStep(
        step_type=np.array([int(timestep.step_type)], np.int32),
        reward=np.array([timestep.reward or 0.0], np.float32),
        discount=np.array([1.0 if timestep.discount is None else timestep.discount], np.float32),
        observation=np.asarray(timestep.observation)[None])
