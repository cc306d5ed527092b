r"""Plays BoxWorld episodes with a policy exported by ``experiments.train_boxworld``.

Loads the PolicySaver SavedModel with ``tf.saved_model.load`` (no training code needed) and
prints each episode's return and whether it was solved; ``--gif`` writes the first episode.

    python -m experiments.play_boxworld --policy_dir=/tmp/boxworld/policies/collect_policy \
        --goal_length=1 --num_distractors=0 --episodes=10 --gif=/tmp/episode.gif
"""

import numpy as np
from absl import app, flags, logging

FLAGS = flags.FLAGS
flags.DEFINE_string("policy_dir", None, "A PolicySaver directory.", required=True)
flags.DEFINE_enum("env", "original", ["original", "bridge"], "BoxWorld variant.")
flags.DEFINE_list("goal_length", ["1", "2", "3", "4"], "Solution lengths L (original BoxWorld).")
flags.DEFINE_list("num_distractors", ["0", "1", "2", "3", "4"], "Distractor branch counts.")
flags.DEFINE_integer("room_size", 12, "Side of the room (original BoxWorld).")
flags.DEFINE_enum("observation_type", None, ["rgb", "one_hot"], "Observations the policy takes "
                  "(original BoxWorld); default: read from the policy (uint8: rgb, float: "
                  "one_hot).")
flags.DEFINE_integer("episodes", 10, "Episodes to play.")
flags.DEFINE_string("gif", None, "Optional path of a GIF of the first episode.")
flags.DEFINE_integer("seed", 123, "Level seed.")
flags.DEFINE_integer("max_steps_per_episode", 500, "Safety cap for policies without a limit.")


def play(policy_dir, env, episodes, max_steps_per_episode=500, record_first=False):
    """Plays ``episodes`` episodes of the dm_env ``env``; returns (results, frames of episode 1)."""
    import tensorflow as tf
    import tensorflow_probability  # noqa: F401  (registers the distribution types the policy uses)

    policy = tf.saved_model.load(policy_dir)
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


def policy_observation_spec(policy_dir):
    """The ``tf.TensorSpec`` of one batched observation in a PolicySaver policy's signature."""
    import tensorflow as tf
    import tensorflow_probability  # noqa: F401

    _, inputs = tf.saved_model.load(policy_dir).signatures["action"].structured_input_signature
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
            f"{np.dtype(expected[1]).name}, but the environment (--room_size, --observation_type) "
            f"gives shape {received[0]} and dtype {np.dtype(received[1]).name}: play with the "
            f"level settings the policy was trained on (room side = observation side - 2).")


def _tf_agents_time_step(timestep):
    from tf_agents.trajectories import time_step as ts

    return ts.TimeStep(
        step_type=np.array([int(timestep.step_type)], np.int32),
        reward=np.array([timestep.reward or 0.0], np.float32),
        discount=np.array([1.0 if timestep.discount is None else timestep.discount], np.float32),
        observation=np.asarray(timestep.observation)[None])


def main(argv):
    del argv
    logging.set_verbosity(logging.ERROR)
    import keras_relational.agents  # noqa: F401  (tf.keras -> tf-keras before TF-Agents)
    from keras_relational import environments

    policy_spec = policy_observation_spec(FLAGS.policy_dir)
    if FLAGS.env == "original":
        observation_type = FLAGS.observation_type or (
            "rgb" if policy_spec.dtype == "uint8" else "one_hot")
        env = environments.BoxWorld(goal_length=tuple(int(v) for v in FLAGS.goal_length),
                                    num_distractors=tuple(int(v) for v in FLAGS.num_distractors),
                                    room_size=FLAGS.room_size, observation_type=observation_type,
                                    seed=FLAGS.seed)
    else:
        env = environments.BridgeBoxWorld(seed=FLAGS.seed)
    check_environment_matches(policy_spec, env)
    results, frames = play(FLAGS.policy_dir, env, FLAGS.episodes, FLAGS.max_steps_per_episode,
                           record_first=bool(FLAGS.gif))
    for i, r in enumerate(results):
        print(f"episode {i}: return {r['episode_return']:.1f}, {r['steps']} steps, "
              f"{'solved' if r['solved'] else 'not solved'}")
    print(f"solved {sum(r['solved'] for r in results)} of {len(results)}")
    if FLAGS.gif:
        print(f"wrote {environments.save_episode(frames, FLAGS.gif)}")


if __name__ == "__main__":
    app.run(main)
