r"""Plays BoxWorld episodes with a policy exported by ``train_boxworld``.

Loads the PolicySaver SavedModel with ``tf.saved_model.load`` (no training code needed) and
prints each episode's return and whether it was solved; ``--gif`` writes the first episode.

    python -m keras_relational.experiments.play_boxworld \
        --policy_dir=/tmp/boxworld/policies/collect_policy --goal_length=1 --num_distractors=0 \
        --episodes=10 --gif=/tmp/episode.gif
"""

# First, before TensorFlow loads: hides known-harmless dependency messages when run as a
# binary (not when imported); --verbose_dependencies shows them.
from keras_relational.experiments import console

console.quiet_dependencies(__name__)

from absl import app, flags, logging

from keras_relational import environments
from keras_relational.experiments import console

_LEVELS = environments.BoxWorldConfig()  # the level flags' defaults: Zambaldi et al. 2019's
FLAGS = flags.FLAGS
flags.DEFINE_string("policy_dir", None, "A PolicySaver directory.", required=True)
flags.DEFINE_enum("env", "original", ["original", "bridge"], "BoxWorld variant.")
console.define_int_list("goal_length", _LEVELS.goal_length,
                        "Solution lengths L (original BoxWorld).", minimum=1)
console.define_int_list("num_distractors", _LEVELS.num_distractors,
                        "Distractor branch counts (original BoxWorld).", minimum=0)
flags.DEFINE_integer("room_size", _LEVELS.room_size, "Side of the room (original BoxWorld).")
flags.DEFINE_enum("observation_type", None, ["rgb", "one_hot"], "Observations the policy takes "
                  "(either BoxWorld); default: read from the policy (uint8: rgb, float: "
                  "one_hot).")
flags.DEFINE_integer("episodes", 10, "Episodes to play.")
flags.DEFINE_string("gif", None, "Optional path of a GIF of the first episode.")
flags.DEFINE_integer("seed", 123, "Level seed.")
flags.DEFINE_integer("max_steps_per_episode", 500, "Safety cap for policies without a limit.")
console.require_ranges({"room_size": (4, None), "episodes": (1, None), "seed": (0, 2**32 - 1),
                        "max_steps_per_episode": (1, None)})
console.require_only_for("env", "original", ["goal_length", "num_distractors", "room_size"])
console.require_writable_file("gif", suffixes=(".gif", ".png"))  # save_episode's formats


def make_environment(policy_spec):
    """The dm_env BoxWorld the flags describe, with the policy's observation type by default."""
    observation_type = FLAGS.observation_type or (
        "rgb" if policy_spec.dtype == "uint8" else "one_hot")
    if FLAGS.env == "original":
        return environments.BoxWorld(goal_length=tuple(FLAGS.goal_length),
                                     num_distractors=tuple(FLAGS.num_distractors),
                                     room_size=FLAGS.room_size,
                                     observation_type=observation_type, seed=FLAGS.seed)
    return environments.BridgeBoxWorld(observation_type=observation_type, seed=FLAGS.seed)


def main(argv):
    del argv
    logging.set_verbosity(logging.ERROR)
    import keras_relational.agents  # noqa: F401  (tf.keras -> tf-keras before TF-Agents)
    from keras_relational.agents.play import (
        check_environment_matches,
        load_policy,
        play,
        policy_observation_spec,
    )

    policy = load_policy(FLAGS.policy_dir)
    policy_spec = policy_observation_spec(policy)
    env = make_environment(policy_spec)
    check_environment_matches(policy_spec, env)
    results, frames = play(policy, env, FLAGS.episodes, FLAGS.max_steps_per_episode,
                           record_first=bool(FLAGS.gif))
    for i, r in enumerate(results):
        print(f"episode {i}: return {r['episode_return']:.1f}, {r['steps']} steps, "
              f"{'solved' if r['solved'] else 'not solved'}")
    print(f"solved {sum(r['solved'] for r in results)} of {len(results)}")
    if FLAGS.gif:
        print(f"wrote {environments.save_episode(frames, FLAGS.gif)}")


def run():
    """The ``play_boxworld`` console script (the same help and flags as ``python -m``)."""
    console.adopt_main_help(__name__)
    app.run(main)


if __name__ == "__main__":
    run()
