r"""Trains a relational / simplicial / baseline agent on BoxWorld with TF-Agents.

    python -m keras_relational.experiments.train_boxworld --root_dir=/tmp/boxworld \
        --agent=relational --goal_length=1,2 --num_distractors=0,1 --num_iterations=2000

Progress lines show frames/s and the solve rate; TensorBoard summaries go to ``root_dir/train``,
``root_dir/collect`` and ``root_dir/eval``; checkpoints to ``root_dir/train/checkpoints`` (re-run
the same command to resume after an interruption); PolicySaver SavedModels to
``root_dir/policies`` and the Keras 3 network to ``root_dir/keras_model``. Play the exported
policy with ``python -m keras_relational.experiments.play_boxworld
--policy_dir=<root_dir>/policies/greedy_policy``.

With ``--trainer=compiled`` the tensor BoxWorlds step, act and learn in one compiled function
per update under the Keras backend (``KERAS_BACKEND=jax`` needs no TensorFlow;
``keras_relational.agents.compiled``); the outputs are the same, without TF-Agents policies.

With ``--num_ray_actors=N`` the experience comes from N Ray actors (IMPALA-style, V-trace corrects
the policy lag shown in the progress lines); ``--ray_address`` joins a running Ray cluster:

    python -m keras_relational.experiments.train_boxworld --root_dir=/tmp/boxworld \
        --num_ray_actors=2

``--preset=NAME`` selects one of the papers' settings (``keras_relational.agents.presets``, e.g.
``zambaldi_fig3_relational``, ``clift_fig6_simplicial``); flags given on the command line win over
the preset. Long runs go in pieces: ``--max_seconds=540`` checkpoints and exits cleanly, and the
same command continues; ``root_dir/curves.jsonl`` holds the learning curve across the pieces.

The training flags and their defaults are the fields of
``keras_relational.agents.config.TrainConfig`` (both trainers) and of ``--trainer``'s own config,
``TFAgentsConfig`` or ``CompiledConfig`` (a flag of the other trainer's is refused); the level
flags those of ``keras_relational.environments.BoxWorldConfig``.
"""

# First, before TensorFlow loads: hides known-harmless dependency messages when run as a
# binary (not when imported); --verbose_dependencies shows them.
from keras_relational.experiments import console, flag_checks

console.quiet_dependencies(__name__)

import dataclasses
import types
import typing

from absl import app, flags, logging

from keras_relational import environments, run_settings, validation
from keras_relational.agents import config as config_lib
from keras_relational.agents import presets as presets_lib
from keras_relational.environments.level_banks import LEVEL_SOURCES

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
    "branching": "Distractor branches: forward, or backward (Zambaldi et al. 2019, Fig. 8).",
    "holdout": "Held-out key-lock combinations (Zambaldi et al. 2019, Fig. 5b): colors or pairs "
               "(default: none).",
    "split": "With --holdout: train levels (held-out combinations only on distractors) or test "
             "levels (needed on the path).",
}
_INT_LISTS = {"goal_length": 1, "num_distractors": 0}  # the list flags of ints, and their minimum
_CHOICES = {"agent": config_lib.AGENTS, "algorithm": config_lib.ALGORITHMS,
            "level_source": LEVEL_SOURCES,
            "optimizer": config_lib.OPTIMIZERS, "observation_type": ("rgb", "one_hot"),
            "branching": ("forward", "backward"), "holdout": ("colors", "pairs"),
            "split": ("train", "test"), "dtype_policy": validation.DTYPE_POLICIES}
flags.DEFINE_enum("preset", None, list(presets_lib.PRESETS), "A paper's setting "
                  "(keras_relational.agents.presets; flags given here win over it).")
# Network flags: None keeps the default of the network's builder (the paper's).
flags.DEFINE_integer("num_blocks", None, "Relational / simplicial blocks (default: the "
                     "network's: 1 for the relational agent, Zambaldi et al. 2019's Box-World "
                     "setting; 2 for the simplicial agents, Clift et al. 2020, Sec. 4).")
flags.DEFINE_integer("key_dim", None, "Attention key size per head (default: the network's: 64 "
                     "for the relational agent, Zambaldi et al. 2019; 32 for the simplicial "
                     "agents' 1-simplicial heads, Clift et al. 2020, Sec. 4).")
flags.DEFINE_integer("head_width", None, "Width of each of the 4 output MLP layers (default: "
                     "the network's, 256).")
flags.DEFINE_integer("num_residual_blocks", None, "Baseline: residual conv blocks (default: the "
                     "network's, 3; Zambaldi et al. 2019: 3 to 6).")
flags.DEFINE_bool(run_settings.ALLOW_FLAG, False, run_settings.ALLOW_HELP)


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
        flag_checks.define_int_list(name, default, help_text, minimum=_INT_LISTS[name])
    elif base is tuple:
        flags.DEFINE_list(name, [str(v) for v in default], help_text)
    else:
        flags.DEFINE_string(name, default, help_text)


flags.DEFINE_enum("trainer", config_lib.DEFAULT_TRAINER, list(config_lib.TRAINERS),
                  "Training loop: 'tf_agents' (TF-Agents' actor and learner; "
                  "keras_relational.agents.config.TFAgentsConfig) or 'compiled' (tensor BoxWorld, "
                  "acting and V-trace learning in one compiled function per update under the "
                  "Keras backend, JAX or TensorFlow; keras_relational.agents.compiled).")
# The settings both trainers share, then each trainer's own (refused with the other trainer).
for _field in config_lib.flag_fields():
    _define(_field.name, _field.type, _field.default, _field.metadata["help"])
_TRAINER_FIELDS = {trainer: config_lib.flag_fields(presets_lib.config_class(trainer))
                   for trainer in config_lib.TRAINERS}
for _trainer, _fields in _TRAINER_FIELDS.items():
    for _field in _fields:
        _define(_field.name, _field.type, _field.default,
                f"(--trainer={_trainer}) " + _field.metadata["help"])
    flag_checks.require_only_for("trainer", _trainer, [f.name for f in _fields])
for _field in dataclasses.fields(environments.BoxWorldConfig):
    if _field.name in _LEVEL_FLAGS:
        _define(_field.name, _field.type, _field.default, _LEVEL_FLAGS[_field.name])
flag_checks.require_ranges({**config_lib.RANGES, "room_size": (4, None),
                            "distractor_length": (1, None), "num_blocks": (1, None),
                            "key_dim": (1, None), "head_width": (1, None)},
                           exclusive_low=config_lib.EXCLUSIVE_LOW)
flag_checks.require_ranges({f.name: (1, None) for f in _TRAINER_FIELDS["compiled"]
                            if f.type is not str})
flag_checks.require_only_for("env", "original", ["goal_length", "num_distractors",
                                             "distractor_length", "room_size", "test_presets"])


def _level_kwargs(env_name, given):
    """The level flags of ``env_name`` (all of them, or only those in ``given``)."""
    kwargs = dict(observation_type=FLAGS.observation_type)
    if env_name == "original":
        kwargs.update(goal_length=tuple(int(v) for v in FLAGS.goal_length),
                      num_distractors=tuple(int(v) for v in FLAGS.num_distractors),
                      distractor_length=FLAGS.distractor_length, room_size=FLAGS.room_size,
                      branching=FLAGS.branching, holdout=FLAGS.holdout, split=FLAGS.split)
    return {k: v for k, v in kwargs.items() if given(k)}


# The network flags, the builder argument each sets and the agents whose builders take it.
_ATTENTION_AGENTS = ("relational", "simplicial", "clift_relational")
_NETWORK_FLAGS = {
    "head_width": ("head_units", config_lib.AGENTS),
    "num_blocks": ("num_blocks", _ATTENTION_AGENTS),
    "key_dim": ("key_dim", _ATTENTION_AGENTS),
    "num_residual_blocks": ("num_residual_blocks", ("baseline",)),
}


def _chosen_agent(values):
    """The agent a parse trains: ``--agent`` when given, else the preset's, else the default."""
    if values["preset"] is not None and not FLAGS["agent"].present:
        return presets_lib.PRESETS[values["preset"]]["config"]["agent"]
    return values["agent"]


def _check_network_flags(values):
    """A network flag given on the command line that the chosen agent's network does not take
    is refused: silently dropping it would train another network than the one asked for."""
    agent = _chosen_agent(values)
    for name, (_, agents) in _NETWORK_FLAGS.items():
        if FLAGS[name].present and agent not in agents:
            raise flags.ValidationError(
                f"--{name}: expected only with --agent={' or --agent='.join(agents)} (the "
                f"{agent} agent's network has no such setting), received --{name}="
                f"{values[name]} with --agent={agent}.")
    return True


flags.register_multi_flags_validator(["agent", "preset", *_NETWORK_FLAGS],
                                     _check_network_flags)


def _model_kwargs(agent, given):
    """The network flags set for ``agent`` (those not None, or only those in ``given``), as its
    builder's arguments; None keeps the builder's default (the paper's)."""
    kwargs = {}
    for name, (argument, agents) in _NETWORK_FLAGS.items():
        value = FLAGS[name].value
        if value is not None and given(name) and agent in agents:
            kwargs[argument] = (value,) * 4 if name == "head_width" else value
    return kwargs


def _hyperparameters():
    names = [f.name for f in config_lib.flag_fields() + _TRAINER_FIELDS[FLAGS.trainer]]
    hyperparameters = {name: FLAGS[name].value for name in names}
    hyperparameters["test_presets"] = tuple(FLAGS.test_presets)
    return hyperparameters


def _preset_overrides():
    """``presets.train_config`` 's arguments of ``--preset`` but its name and trainer: only the
    flags given on the command line win over the preset."""
    given = lambda name: FLAGS[name].present  # noqa: E731
    preset = presets_lib.PRESETS[FLAGS.preset]
    env_name = FLAGS.env if given("env") else preset["env"]
    agent = FLAGS.agent if given("agent") else preset["config"]["agent"]
    return dict(level=_level_kwargs(env_name, given), model=_model_kwargs(agent, given),
                env_name=env_name, **{k: v for k, v in _hyperparameters().items() if given(k)})


def config_from_flags():
    """The config of ``--trainer`` (``TFAgentsConfig`` or ``CompiledConfig``) the flags describe
    (over ``--preset``'s when one is given)."""
    if FLAGS.preset is not None:
        return presets_lib.train_config(FLAGS.preset, trainer=FLAGS.trainer,
                                        **_preset_overrides())
    config_class = presets_lib.config_class(FLAGS.trainer)
    hyperparameters = _hyperparameters()
    everything = lambda name: True  # noqa: E731
    return config_class(
        environment=config_lib.environment_config(
            FLAGS.env, **_level_kwargs(FLAGS.env, everything)),
        model_kwargs=_model_kwargs(FLAGS.agent, everything), **hyperparameters)


def main(argv):
    del argv
    logging.set_verbosity(logging.ERROR)
    try:  # a bad combination fails here, named, before TensorFlow loads (no traceback)
        config = config_from_flags()
    except ValueError as error:  # e.g. --learner_minibatches that does not divide --num_envs
        raise app.UsageError(str(error)) from None
    curriculum = FLAGS.preset in presets_lib.CURRICULA
    if curriculum and config.trainer != "compiled":
        raise app.UsageError(
            f"--preset={FLAGS.preset} trains a curriculum (its stages one after the other, each "
            f"from the agent of the stage before; keras_relational.agents.presets.CURRICULA), "
            f"which runs with --trainer=compiled, received --trainer={config.trainer}.")
    if FLAGS.preset is not None:
        print(presets_lib.describe(FLAGS.preset))
    if curriculum:
        from keras_relational.agents.compiled.curriculum import train_curriculum

        train_curriculum(FLAGS.root_dir, presets_lib.curriculum_configs(
            FLAGS.preset, **_preset_overrides()), max_seconds=config.max_seconds,
            allow_changed_hyperparameters=FLAGS.allow_changed_hyperparameters)
        return
    if config.trainer == "compiled":
        # Under KERAS_BACKEND=jax this path imports neither TensorFlow nor TF-Agents.
        from keras_relational.agents.compiled import train_eval as compiled_train_eval

        compiled_train_eval.train_eval(
            FLAGS.root_dir, config,
            allow_changed_hyperparameters=FLAGS.allow_changed_hyperparameters)
        return
    from keras_relational.agents.tf_agents import train_eval  # sets TF_USE_LEGACY_KERAS first

    train_eval.train_eval(FLAGS.root_dir, config,
                          allow_changed_hyperparameters=FLAGS.allow_changed_hyperparameters)


def run():
    """The ``train_boxworld`` console script (the same help and flags as ``python -m``)."""
    console.adopt_main_help(__name__)
    app.run(main)


if __name__ == "__main__":
    run()
