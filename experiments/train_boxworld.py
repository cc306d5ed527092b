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

The training flags and their defaults are the fields of
``keras_relational.agents.config.TrainConfig``; the level flags those of
``keras_relational.environments.BoxWorldConfig``.
"""

import dataclasses
import types
import typing

from absl import app, flags, logging

from keras_relational import environments
from keras_relational.agents import config as config_lib
from keras_relational.experiments import console

FLAGS = flags.FLAGS
flags.DEFINE_string("root_dir", "/tmp/keras_relational_boxworld", "Output directory.")
flags.DEFINE_enum("env", "original", list(config_lib.ENVIRONMENT_CONFIGS), "BoxWorld variant.")
# Level flags (original BoxWorld); defaults: BoxWorldConfig's, Zambaldi et al. 2019's levels.
_LEVEL_FLAGS = {
    "goal_length": "Solution lengths L (original BoxWorld).",
    "num_distractors": "Distractor branch counts.",
    "distractor_length": "Boxes per distractor branch (original BoxWorld).",
    "room_size": "Side of the room (original BoxWorld).",
    "observation_type": "Observations: RGB pixels (rgb) or one-hot cell channels (one_hot).",
}
_INT_LISTS = {"goal_length": 1, "num_distractors": 0}  # the list flags of ints, and their minimum
_CHOICES = {"agent": config_lib.AGENTS, "algorithm": config_lib.ALGORITHMS,
            "optimizer": config_lib.OPTIMIZERS, "observation_type": ("rgb", "one_hot")}
# Network flags: None keeps the default of the network's builder (the paper's).
flags.DEFINE_integer("num_blocks", 1, "Relational / simplicial blocks (1: Zambaldi et al. 2019's "
                     "Box-World setting, also used for the simplicial agent).")
flags.DEFINE_integer("key_dim", None, "Attention key size per head (default: the network's, "
                     "64 for the relational agent, Zambaldi et al. 2019).")
flags.DEFINE_integer("head_width", None, "Width of each of the 4 output MLP layers (default: "
                     "the network's, 256).")


def _define(name, field_type, default, help_text):
    """One absl flag of the type of a dataclass field."""
    optional = typing.get_origin(field_type) in (typing.Union, types.UnionType)
    base = [t for t in typing.get_args(field_type) if t is not type(None)][0] if optional \
        else field_type
    if name in _CHOICES:
        flags.DEFINE_enum(name, default, list(_CHOICES[name]), help_text)
    elif base is bool:
        flags.DEFINE_bool(name, default, help_text)
    elif base is int:
        flags.DEFINE_integer(name, default, help_text)
    elif base is float:
        flags.DEFINE_float(name, default, help_text)
    elif base is tuple and name in _INT_LISTS:
        console.define_int_list(name, default, help_text, minimum=_INT_LISTS[name])
    elif base is tuple:
        flags.DEFINE_list(name, [str(v) for v in default], help_text)
    else:
        flags.DEFINE_string(name, default, help_text)


for _field in config_lib.flag_fields():
    _define(_field.name, _field.type, _field.default, _field.metadata["help"])
for _field in dataclasses.fields(environments.BoxWorldConfig):
    if _field.name in _LEVEL_FLAGS:
        _define(_field.name, _field.type, _field.default, _LEVEL_FLAGS[_field.name])
console.require_ranges({**config_lib.RANGES, "room_size": (4, None),
                        "distractor_length": (1, None), "num_blocks": (1, None),
                        "key_dim": (1, None), "head_width": (1, None)},
                       exclusive_low=config_lib.EXCLUSIVE_LOW)
console.require_only_for("env", "original", ["goal_length", "num_distractors",
                                             "distractor_length", "room_size", "test_presets"])


def config_from_flags():
    """The :class:`TrainConfig` the flags describe."""
    hyperparameters = {f.name: FLAGS[f.name].value for f in config_lib.flag_fields()}
    hyperparameters["test_presets"] = tuple(FLAGS.test_presets)
    env_kwargs = dict(observation_type=FLAGS.observation_type)
    if FLAGS.env == "original":
        env_kwargs.update(goal_length=tuple(FLAGS.goal_length),
                          num_distractors=tuple(FLAGS.num_distractors),
                          distractor_length=FLAGS.distractor_length, room_size=FLAGS.room_size)
    model_kwargs = {}
    if FLAGS.head_width is not None:
        model_kwargs["head_units"] = (FLAGS.head_width,) * 4
    if FLAGS.agent in ("relational", "simplicial"):
        model_kwargs["num_blocks"] = FLAGS.num_blocks
    if FLAGS.agent == "relational" and FLAGS.key_dim is not None:
        model_kwargs["key_dim"] = FLAGS.key_dim
    return config_lib.TrainConfig(
        environment=config_lib.environment_config(FLAGS.env, **env_kwargs),
        model_kwargs=model_kwargs, **hyperparameters)


def main(argv):
    del argv
    logging.set_verbosity(logging.ERROR)
    config = config_from_flags()  # level and training errors before TensorFlow loads
    from keras_relational.agents import train_eval  # sets TF_USE_LEGACY_KERAS first

    train_eval.train_eval(FLAGS.root_dir, config)


def run():
    """The ``train_boxworld`` console script (the same help and flags as ``python -m``)."""
    console.adopt_main_help(__name__)
    app.run(main)


if __name__ == "__main__":
    run()
