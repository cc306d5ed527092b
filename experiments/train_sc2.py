r"""Trains Zambaldi et al. (2019)'s StarCraft II agent on a mini-game with V-trace.

    SC2PATH=~/StarCraftII python -m keras_relational.experiments.train_sc2 \
        --root_dir=/tmp/sc2 --map=MoveToBeacon

    python -m keras_relational.experiments.train_sc2 --root_dir=/tmp/sc2_mock --mock \
        --num_envs=2 --unroll_length=4 --num_iterations=2 --screen_size=8 --tiny_model \
        --compile_mode=eager

``--trainer=tf_agents`` trains through TF-Agents (the V-trace agent with the composite action
distribution, a recurrent TF-Agents network and a ``PyDriver``) instead of the ``keras.ops``
learner (``--trainer=compiled``, the default); the outputs are the same.
``--map`` is one of the seven mini-games of their Table 1; the defaults are their Table 2
settings and one value of each Table 4 sweep. The game itself is found through ``SC2PATH``
(a clear error names it when it is missing); ``--mock`` plays pysc2's mock environment
instead (random spec-true observations, reward 0: it checks the whole path, it learns nothing).
Outputs under ``--root_dir``: ``checkpoints/`` (every ``--checkpoint_interval`` updates and after
the last), ``policy/`` (the greedy policy, a SavedModel), ``sc2_agent.keras``,
``sc2_agent.weights.h5`` and ``result.json``. Re-running the same command resumes from the newest
checkpoint, also after ``kill -9`` (a finished run is not trained again); ``--max_seconds=540``
stops after the update that reaches 540 s, checkpoints and exports, so a long run goes in pieces
of one command. On ``--mock`` a resumed run continues exactly as the uninterrupted one; the
game's state cannot be saved (it lives in the StarCraft II process), so a resumed game run starts
new episodes, with the weights, optimizer, update count and sampling of its checkpoint. A
checkpoint of other settings (another ``--map``, model size, trainer, ...) is refused with an
error naming the setting. Needs ``pip install 'keras-relational[sc2]'`` (see docs/sc2.md).
"""

# Before TensorFlow loads: hides known-harmless dependency messages when run as a binary (not
# when imported); --verbose_dependencies shows them.
from keras_relational.experiments import console

console.quiet_dependencies(__name__)

import dataclasses  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

from absl import app, flags  # noqa: E402

from keras_relational.agents.sc2.config import COMPILE_MODES, TRAINERS, SC2Config  # noqa: E402
from keras_relational.environments.sc2.maps import MINI_GAMES  # noqa: E402

PROTOBUF_VARIABLE = "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"

FLAGS = flags.FLAGS
flags.DEFINE_string("root_dir", "/tmp/keras_relational_sc2", "Output directory.")
flags.DEFINE_bool("tiny_model", False, "Tiny internal sizes (stem 4, ConvLSTM 8, key size 8, "
                  "g_theta 16): smoke runs only, not the paper's agent.")
_CHOICES = {"map_name": MINI_GAMES, "core": ("relational", "control"),
            "compile_mode": COMPILE_MODES, "trainer": TRAINERS}
TINY_MODEL = dict(stem_channels=4, lstm_channels=8, key_dim=8, mlp_units=(16,))

for _field in dataclasses.fields(SC2Config):
    # --map is the issue's and pysc2's name for the mini-game.
    _name = "map" if _field.name == "map_name" else _field.name
    _help = _field.metadata["help"]
    if _field.name in _CHOICES:
        flags.DEFINE_enum(_name, _field.default, list(_CHOICES[_field.name]), _help)
    elif _field.type in (bool, "bool"):
        flags.DEFINE_bool(_name, _field.default, _help)
    elif _field.type in (int, "int"):
        flags.DEFINE_integer(_name, _field.default, _help,
                             lower_bound=0 if _field.name == "seed" else 1)
    else:
        flags.DEFINE_float(_name, _field.default, _help, lower_bound=0.0)


def config_from_flags():
    """The :class:`SC2Config` of the parsed flags (its checks name the bad flag)."""
    return SC2Config(**{f.name: FLAGS["map" if f.name == "map_name" else f.name].value
                        for f in dataclasses.fields(SC2Config)})


def main(argv):
    del argv
    try:
        config = config_from_flags()
    except ValueError as error:  # a value absl's bounds let through, e.g. --max_seconds=0
        raise app.UsageError(str(error)) from error
    if not config.mock:
        from keras_relational.environments.sc2.maps import check_game

        try:
            check_game(config.map_name)  # before anything is built
        except FileNotFoundError as error:
            raise SystemExit(f"train_sc2: {error}") from error
    from keras_relational.agents.sc2 import checkpointing
    from keras_relational.agents.sc2.train_eval import train_eval

    try:
        result = train_eval(FLAGS.root_dir, config,
                            model_kwargs=TINY_MODEL if FLAGS.tiny_model else None)
    except (checkpointing.CheckpointError, checkpointing.SettingsMismatchError) as error:
        raise SystemExit(f"train_sc2: {error}") from error
    print(f"policy: {result['policy_dir']}")


def run():
    """The ``train_sc2`` console script (the same help and flags as ``python -m``)."""
    # pysc2's protocol modules only load with protobuf's pure-Python implementation, chosen when
    # protobuf is first imported (nothing above imports it): the binary owns its process, so it
    # picks it here, unless the caller chose (then import_pysc2 says what is wrong).
    if "google.protobuf" not in sys.modules:
        os.environ.setdefault(PROTOBUF_VARIABLE, "python")
    console.adopt_main_help(__name__)
    app.run(main)


if __name__ == "__main__":
    run()
