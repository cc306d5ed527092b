r"""Plays BoxWorld episodes with an agent trained by ``train_boxworld``.

Either kind of trained agent, no training code needed:

* ``--model=<root_dir>/keras_model.keras``: the Keras 3 agent network, which both trainers write
  (``--trainer=compiled`` writes only this). Greedy by default (the argmax of the logits);
  ``--nogreedy`` samples the logits with a NumPy generator seeded by ``--seed``. Under
  ``KERAS_BACKEND=jax`` neither TensorFlow nor TF-Agents is imported.
* ``--policy_dir=<root_dir>/policies/greedy_policy`` (or ``collect_policy``): a TF-Agents
  PolicySaver SavedModel, written by the TF-Agents trainer, loaded with ``tf.saved_model.load``.

It prints each episode's return and whether it was solved; ``--gif`` writes the first episode.
The observation type defaults to the agent's (RGB for a uint8 or 3-channel input, one-hot
otherwise), and a level whose observations do not fit the agent (``--room_size``, ``--env``) is
refused before playing.

    python -m keras_relational.experiments.play_boxworld \
        --model=/tmp/boxworld/keras_model.keras --goal_length=1 --num_distractors=0 \
        --episodes=10 --gif=/tmp/episode.gif
    python -m keras_relational.experiments.play_boxworld \
        --policy_dir=/tmp/boxworld/policies/collect_policy --goal_length=1 --num_distractors=0
"""

# First, before TensorFlow loads: hides known-harmless dependency messages when run as a
# binary (not when imported); --verbose_dependencies shows them.
from keras_relational.experiments import console, flag_checks

console.quiet_dependencies(__name__)

from absl import app, flags, logging

from keras_relational import environments
from keras_relational.experiments import console

_LEVELS = environments.BoxWorldConfig()  # the level flags' defaults: Zambaldi et al. 2019's
FLAGS = flags.FLAGS
flags.DEFINE_string("policy_dir", None, "A PolicySaver directory (the TF-Agents trainer's "
                    "<root_dir>/policies/greedy_policy or collect_policy); or give --model.")
flags.DEFINE_string("model", None, "A Keras agent model file, <root_dir>/keras_model.keras "
                    "(either trainer); or give --policy_dir.")
flags.DEFINE_bool("greedy", True, "--model: the argmax of the logits; --nogreedy samples them "
                  "(seeded by --seed).")
flags.DEFINE_enum("env", "original", ["original", "bridge"], "BoxWorld variant.")
flag_checks.define_int_list("goal_length", _LEVELS.goal_length,
                        "Solution lengths L (original BoxWorld).", minimum=1)
flag_checks.define_int_list("num_distractors", _LEVELS.num_distractors,
                        "Distractor branch counts (original BoxWorld).", minimum=0)
flags.DEFINE_integer("room_size", _LEVELS.room_size, "Side of the room (original BoxWorld).")
flags.DEFINE_enum("observation_type", None, ["rgb", "one_hot"], "Observations the agent takes "
                  "(either BoxWorld); default: read from the policy or model (uint8 or 3 "
                  "channels: rgb, other float: one_hot).")
flags.DEFINE_integer("episodes", 10, "Episodes to play.")
flags.DEFINE_string("gif", None, "Optional path of a GIF of the first episode.")
flags.DEFINE_integer("seed", 123, "Level seed (and --nogreedy's sampling seed).")
flags.DEFINE_integer("max_steps_per_episode", 500, "Safety cap for policies without a limit.")
flag_checks.require_ranges({"room_size": (4, None), "episodes": (1, None), "seed": (0, 2**32 - 1),
                        "max_steps_per_episode": (1, None)})
flag_checks.require_only_for("env", "original", ["goal_length", "num_distractors", "room_size"])
flag_checks.require_writable_file("gif", suffixes=(".gif", ".png"))  # save_episode's formats
flag_checks.require_exactly_one(["policy_dir", "model"])
flag_checks.require_existing_file("model", suffixes=(".keras",))
flag_checks.require_only_with("model", ["greedy"])  # a saved policy acts as it was saved


def make_environment(observation_spec):
    """The dm_env BoxWorld the flags describe, with the agent's observation type by default."""
    observation_type = FLAGS.observation_type or (
        "rgb" if observation_spec.dtype == "uint8" else "one_hot")
    if FLAGS.env == "original":
        return environments.BoxWorld(goal_length=tuple(FLAGS.goal_length),
                                     num_distractors=tuple(FLAGS.num_distractors),
                                     room_size=FLAGS.room_size,
                                     observation_type=observation_type, seed=FLAGS.seed)
    return environments.BridgeBoxWorld(observation_type=observation_type, seed=FLAGS.seed)


def load_agent():
    """The policy the flags name: a Keras model (``--model``) or a PolicySaver directory."""
    if FLAGS.model:  # Keras 3 only: no TensorFlow under JAX, no TF-Agents
        from keras_relational.agents.play import KerasModelPolicy, load_model

        return KerasModelPolicy(load_model(FLAGS.model), greedy=FLAGS.greedy, seed=FLAGS.seed)
    import keras_relational.agents.tf_agents  # noqa: F401  (tf.keras -> tf-keras before TF-Agents)
    from keras_relational.agents.play import SavedModelPolicy, load_policy

    return SavedModelPolicy(load_policy(FLAGS.policy_dir))


def main(argv):
    del argv
    logging.set_verbosity(logging.ERROR)
    from keras_relational.agents.play import check_environment_matches, play

    try:  # what the flags name does not fit: the message, without a traceback
        policy = load_agent()
        env = make_environment(policy.observation_spec)
        check_environment_matches(policy.observation_spec, env, policy.num_actions,
                                  agent="model" if FLAGS.model else "policy")
    except ValueError as error:
        raise SystemExit(f"play_boxworld: error: {error}") from None
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
