"""The hyperparameters of an SC2 training run: one dataclass, the paper's defaults.

:class:`SC2Config` is the single source of the defaults of
:func:`keras_relational.agents.sc2.train_eval.train_eval` and of the flags of the ``train_sc2``
binary (which generates its flags from the fields and their ``help``). Zambaldi et al. (2019),
Table 2 (shared settings) and Table 4 (the swept ones: the default is one of the swept values).

Pure Python (no TensorFlow, no Keras).

Example::

    from keras_relational.agents.sc2.config import SC2Config

    config = SC2Config(map_name="DefeatRoaches", num_iterations=1000)
"""

import dataclasses

from keras_relational import validation
from keras_relational.agents.config import TRAINERS
from keras_relational.environments.sc2.maps import MINI_GAMES

# How the learner's update runs (SC2VTraceLearner's compile_mode).
COMPILE_MODES = ("xla", "graph", "eager")
# TRAINERS (the core's): which V-trace learner trains, the keras.ops one (agents.sc2.learning)
# or TF-Agents' agent (agents.tf_agents.sc2_agent).
# The fields a resumed run may change: how long it runs, how often it reports and checkpoints,
# how its update is compiled. A checkpoint of other values of any other field is refused.
RESUMABLE_FIELDS = ("num_iterations", "checkpoint_interval", "max_seconds", "log_interval",
                    "compile_mode")


def _field(default, help):  # noqa: A002  (absl's name for a flag's description)
    return dataclasses.field(default=default, metadata=dict(help=help))


@dataclasses.dataclass(frozen=True)
class SC2Config:
    """Hyperparameters of the SC2 ``train_eval``; the fields' ``help`` documents each one."""

    map_name: str = _field("MoveToBeacon", f"Mini-game of Table 1: one of {MINI_GAMES}.")
    mock: bool = _field(False, "Play pysc2's mock environment (SC2TestEnv: spec-true random "
                        "observations, no game, reward 0) instead of the game.")
    num_envs: int = _field(32, "Environments stepped together; one unroll of each is a batch "
                           "(Table 2: batch size 32 trajectories).")
    unroll_length: int = _field(80, "Transitions per unroll (Table 2: 80).")
    num_iterations: int = _field(1000, "Learner updates (one batch of unrolls each).")
    learning_rate: float = _field(1e-4, "Adam learning rate (Table 4 sweep: 1e-4, 1e-5).")
    entropy_cost: float = _field(1e-2, "Entropy loss scaling (Table 4 sweep: 1e-1, 1e-2, 1e-3).")
    baseline_cost: float = _field(0.1, "Baseline loss scaling (Table 2: 0.1).")
    discount: float = _field(0.99, "Discount gamma (Table 2: 0.99).")
    gradient_clip_norm: float = _field(100.0, "Global gradient-norm clip (Table 2: 100).")
    num_heads: int = _field(3, "Attention heads (Table 4 sweep: 1, 3).")
    num_blocks: int = _field(3, "Relational blocks, shared weights (Table 4 sweep: 1, 3, 5).")
    core: str = _field("relational", "Agent: 'relational' or 'control' (App. C).")
    screen_size: int = _field(32, "Screen and minimap resolution (the 32 x 32 argument maps; "
                              "not stated in the paper).")
    step_mul: int = _field(8, "Game steps per agent step (SC2LE's default; not in the paper).")
    mock_episode_length: int = _field(10, "Steps per episode of the mock environment.")
    trainer: str = _field("compiled", "The V-trace learner: 'compiled' (keras.ops, "
                          "TensorFlow or JAX) or 'tf_agents' (TF-Agents' VTraceAgent with the "
                          "composite target, a PyDriver; TensorFlow only).")
    compile_mode: str = _field("xla", f"The update: one of {COMPILE_MODES} ('eager' skips "
                               "tracing: short CPU runs).")
    log_interval: int = _field(10, "Updates between progress lines.")
    checkpoint_interval: int = _field(100, "Updates between checkpoints (root_dir/checkpoints; "
                                      "the last update is checkpointed too). Re-running the "
                                      "same command resumes from the newest.")
    max_seconds: float | None = _field(None, "Wall-clock budget of this run's training loop: "
                                       "it stops after the update that reaches it, "
                                       "checkpoints and exports; re-running the same command "
                                       "continues (None: no budget).")
    seed: int = _field(0, "Seed of the weights, the sampling and the game.")

    def __post_init__(self):
        validation.check_choice("SC2Config", "map_name", self.map_name, MINI_GAMES)
        validation.check_choice("SC2Config", "core", self.core, ("relational", "control"))
        validation.check_choice("SC2Config", "compile_mode", self.compile_mode, COMPILE_MODES)
        validation.check_choice("SC2Config", "trainer", self.trainer, TRAINERS)
        for name in ("num_envs", "unroll_length", "num_iterations", "num_heads", "num_blocks",
                     "screen_size", "step_mul", "mock_episode_length", "log_interval",
                     "checkpoint_interval"):
            validation.check_positive_int("SC2Config", name, getattr(self, name))
        for name in ("learning_rate", "gradient_clip_norm"):
            validation.check_positive_number("SC2Config", name, getattr(self, name))
        for name in ("entropy_cost", "baseline_cost"):
            validation.check_positive_number("SC2Config", name, getattr(self, name),
                                             allow_zero=True)
        validation.check_number_in_range("max_seconds", self.max_seconds, low=0,
                                         low_exclusive=True, allow_none=True, owner="SC2Config")
        validation.check_fraction("discount", self.discount)
        if self.screen_size % 4:
            raise ValueError("SC2Config expects `screen_size` to be a multiple of 4 (two "
                             f"stride-2 convs), received screen_size={self.screen_size}.")
