r"""Trains a relational / simplicial / baseline agent on BoxWorld with TF-Agents.

    python -m keras_relational.experiments.train_boxworld --root_dir=/tmp/boxworld \
        --agent=relational --goal_length=1,2 --num_distractors=0,1 --num_iterations=2000

Progress lines show frames/s and the solve rate; TensorBoard summaries go to ``root_dir/train``,
``root_dir/collect`` and ``root_dir/eval``; checkpoints to ``root_dir/train/checkpoints`` (re-run
the same command to resume after an interruption); PolicySaver SavedModels to
``root_dir/policies`` and the Keras 3 network to ``root_dir/keras_model``. Play the exported
policy with ``python -m keras_relational.experiments.play_boxworld
--policy_dir=<root_dir>/policies/greedy_policy``.

With ``--num_ray_actors=N`` the experience comes from N Ray actors (IMPALA-style, V-trace corrects
the policy lag shown in the progress lines); ``--ray_address`` joins a running Ray cluster:

    python -m keras_relational.experiments.train_boxworld --root_dir=/tmp/boxworld \
        --num_ray_actors=2
"""

from absl import app, flags, logging

FLAGS = flags.FLAGS
flags.DEFINE_string("root_dir", "/tmp/keras_relational_boxworld", "Output directory.")
flags.DEFINE_enum("env", "original", ["original", "bridge"], "BoxWorld variant.")
flags.DEFINE_enum("agent", "relational", ["relational", "simplicial", "baseline"], "Network.")
flags.DEFINE_enum("algorithm", "vtrace", ["vtrace", "ppo"], "Learning algorithm.")
flags.DEFINE_list("goal_length", ["1", "2", "3", "4"], "Solution lengths L (original BoxWorld).")
flags.DEFINE_list("num_distractors", ["0", "1", "2", "3", "4"], "Distractor branch counts.")
flags.DEFINE_integer("distractor_length", 1, "Boxes per distractor branch (original BoxWorld).")
flags.DEFINE_integer("room_size", 12, "Side of the room (original BoxWorld).")
flags.DEFINE_integer("num_iterations", 10_000, "Learner updates.")
flags.DEFINE_integer("num_envs", 32, "Environments stepped together (trajectories per batch).")
flags.DEFINE_integer("unroll_length", 40, "Steps per trajectory.")
flags.DEFINE_float("learning_rate", 2e-4, "Learning rate.")
flags.DEFINE_enum("optimizer", None, ["rmsprop", "adam"], "The papers' RMSProp (epsilon 0.1, "
                  "decay 0.99) or Adam; default: RMSProp for V-trace, Adam for PPO.")
flags.DEFINE_float("reward_scale", 1.0, "V-trace: rewards are multiplied by this (0.1 makes the "
                   "+10 gem 1).")
flags.DEFINE_float("vtrace_lambda", 1.0, "V-trace: IMPALA's lambda (1: the papers' V-trace).")
flags.DEFINE_enum("observation_type", "rgb", ["rgb", "one_hot"], "Observations: RGB pixels "
                  "or one-hot cell channels.")
flags.DEFINE_float("entropy_cost", 0.005, "Entropy regularisation weight.")
flags.DEFINE_integer("num_blocks", 1, "Relational / simplicial blocks.")
flags.DEFINE_integer("key_dim", 64, "Attention key size per head.")
flags.DEFINE_integer("head_width", 256, "Width of each of the 4 output MLP layers.")
flags.DEFINE_integer("eval_interval", 0, "Updates between evaluations (0: at the end only).")
flags.DEFINE_integer("eval_episodes", 100, "Episodes per evaluation.")
flags.DEFINE_list("test_presets", [], "BoxWorld presets evaluated zero-shot after training, e.g. "
                  "test_length_6,test_length_8,test_length_10,test_heldout.")
flags.DEFINE_integer("log_interval", 10, "Updates between progress lines.")
flags.DEFINE_integer("checkpoint_interval", 100, "Updates between checkpoints.")
flags.DEFINE_integer("policy_save_interval", 1000, "Updates between policy exports.")
flags.DEFINE_bool("jit_compile", True, "XLA-compile the learner step.")
flags.DEFINE_bool("actor_jit_compile", None, "V-trace: the actors (in-process or Ray) act "
                  "through an XLA-compiled forward pass (default: on for V-trace, off for PPO; "
                  "--noactor_jit_compile turns it off).")
flags.DEFINE_integer("num_ray_actors", 0, "0: actors in this process; N > 0: N Ray actors, each "
                     "with its own --num_envs environments (pip install "
                     "\"keras-relational[distributed]\"; V-trace only).")
flags.DEFINE_string("ray_address", None, "With --num_ray_actors: join this Ray cluster "
                    "('auto': the one started here with `ray start`, or host:port); default: "
                    "start a local Ray.")
flags.DEFINE_integer("weight_sync_interval", 1, "Learner steps between weight broadcasts to "
                     "the Ray actors.")
flags.DEFINE_float("max_seconds", None, "Wall-clock budget of the training loop (stops at the "
                   "first progress line after it, then checkpoints, evaluates and exports).")
flags.DEFINE_integer("seed", 0, "Random seed.")


def main(argv):
    del argv
    logging.set_verbosity(logging.ERROR)
    from keras_relational.agents import train_eval  # sets TF_USE_LEGACY_KERAS first

    env_kwargs = {}
    if FLAGS.env == "original":
        env_kwargs = dict(goal_length=tuple(int(v) for v in FLAGS.goal_length),
                          num_distractors=tuple(int(v) for v in FLAGS.num_distractors),
                          distractor_length=FLAGS.distractor_length, room_size=FLAGS.room_size)
    env_kwargs["observation_type"] = FLAGS.observation_type
    model_kwargs = dict(head_units=(FLAGS.head_width,) * 4)
    if FLAGS.agent in ("relational", "simplicial"):
        model_kwargs.update(num_blocks=FLAGS.num_blocks)
    if FLAGS.agent == "relational":
        model_kwargs.update(key_dim=FLAGS.key_dim)
    train_eval.train_eval(
        FLAGS.root_dir, env_name=FLAGS.env, agent=FLAGS.agent, algorithm=FLAGS.algorithm,
        env_kwargs=env_kwargs, model_kwargs=model_kwargs, num_iterations=FLAGS.num_iterations,
        num_envs=FLAGS.num_envs, unroll_length=FLAGS.unroll_length,
        learning_rate=FLAGS.learning_rate, entropy_cost=FLAGS.entropy_cost,
        optimizer=FLAGS.optimizer, reward_scale=FLAGS.reward_scale,
        vtrace_lambda=FLAGS.vtrace_lambda,
        jit_compile=FLAGS.jit_compile, actor_jit_compile=FLAGS.actor_jit_compile,
        checkpoint_interval=FLAGS.checkpoint_interval,
        policy_save_interval=FLAGS.policy_save_interval, log_interval=FLAGS.log_interval,
        eval_interval=FLAGS.eval_interval, eval_episodes=FLAGS.eval_episodes,
        test_presets=tuple(FLAGS.test_presets), num_ray_actors=FLAGS.num_ray_actors,
        ray_address=FLAGS.ray_address, weight_sync_interval=FLAGS.weight_sync_interval,
        max_seconds=FLAGS.max_seconds, seed=FLAGS.seed)


def run():
    """The ``train_boxworld`` console script (the same help and flags as ``python -m``)."""
    from keras_relational.experiments import console

    console.adopt_main_help(__name__)
    app.run(main)


if __name__ == "__main__":
    run()
