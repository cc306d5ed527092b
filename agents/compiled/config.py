"""The hyperparameters of the compiled actor-learner loop: :class:`TrainConfig` plus its own.

Every field of :class:`keras_relational.agents.config.TrainConfig`, the settings both trainers
share, means the same here (learning rate, costs, num_envs, unroll length, intervals,
evaluation, ...), one source of defaults; this subclass adds what only the compiled loop has:
where its levels come from, the bank size, updates per call, learner minibatches and epochs,
devices, initial weights, and a stop at a solve rate.
It trains V-trace in one process, so TF-Agents' settings (``TFAgentsConfig``'s algorithm,
actors, Ray) have no field here.

Pure Python (no TensorFlow, no Keras).

Example::

    from keras_relational.agents.compiled.config import CompiledConfig

    config = CompiledConfig(num_envs=64, unroll_length=5, num_iterations=100)
    config.levels_per_bank     # levels drawn per bank by the level source
"""

import dataclasses

from keras_relational import validation
from keras_relational.agents.config import TrainConfig, _field
from keras_relational.environments.level_banks import (
    DEFAULT_LEVEL_SOURCE,
    LEVEL_SOURCES,
    default_bank_size,
    max_levels_started,
)


@dataclasses.dataclass(frozen=True)
class CompiledConfig(TrainConfig):
    """:class:`TrainConfig` for ``trainer="compiled"``: its levels, calls, minibatches and
    devices."""

    trainer: str = dataclasses.field(default="compiled", init=False)
    level_source: str = _field(DEFAULT_LEVEL_SOURCE, "Where the level banks come from: "
                               "'numpy' (the NumPy generator, a host thread) or 'device' (the "
                               "same distribution in keras.ops, compiled).")
    level_bank_size: int | None = _field(
        None, "Levels per bank drawn by the level source (`level_source`: the NumPy generator "
        "in a host thread, ahead of use, or the on-device generator); a bank serves updates "
        "until its unused levels could run out in the next one. None: enough for 8 calls.")
    learner_minibatches: int = _field(
        1, "Gradient steps an update takes, each on its own minibatch of num_envs / this "
        "environments' trajectories (every this-th environment), one after the other: many "
        "environments act per unroll while the learner batch stays a setting (IMPALA's; "
        "V-trace corrects the later minibatches' policy lag). 1: one step on the whole unroll. "
        "Must divide num_envs.")
    learner_epochs: int = _field(
        1, "Passes the learner makes over each unroll (each pass its learner_minibatches "
        "steps): more gradient steps per frame, on experience the policy has moved away from "
        "since it acted (V-trace's clipped importance weights correct it; Espeholt et al. 2018, "
        "Sec. 4.2; as PPO's epochs, Schulman et al. 2017). 1: each unroll is learned from once.")
    initial_weights: str | None = _field(
        None, "A Keras model file (.keras: another run's keras_model.keras) whose weights start "
        "a new run's network, layer by layer, instead of fresh ones: a curriculum (the Box-World "
        "agents' weights do not depend on the room's size, so a smaller room's trained agent "
        "can start a larger room's run) or a fine-tune. Its weights must have the network's "
        "shapes. A resumed run restores its checkpoint and does not read it. None: fresh "
        "weights.")
    stop_solve_rate: float | None = _field(
        None, "Stop training at the first progress line whose training solve rate, over at "
        "least 50 episodes (keras_relational.agents.curves.MIN_EPISODES), is at least this; "
        "the run is then finished (a resume trains no more, see result.json's "
        "stopped_at_solve_rate): a stage of a curriculum. None: train num_iterations updates.")
    updates_per_call: int = _field(
        1, "Updates each compiled call runs, one after the other on the device (a scan over "
        "updates), their scalars read by the host in one transfer: fewer host round trips and "
        "dispatches per update. 1: one update a call. num_iterations, checkpoint_interval and "
        "eval_interval must be multiples of it.")
    num_devices: int | None = _field(
        None, "Local devices the update runs on, data-parallel (JAX only): the environments "
        "split across them, the weights replicated, the gradients summed. None: every device "
        "of jax.devices() (1 under TensorFlow). num_envs / learner_minibatches must be "
        "divisible by it.")

    def __post_init__(self):
        super().__post_init__()
        validation.check_choice("CompiledConfig", "level_source", self.level_source,
                                LEVEL_SOURCES)
        validation.check_positive_int("CompiledConfig", "updates_per_call",
                                      self.updates_per_call)
        validation.check_positive_int("CompiledConfig", "level_bank_size", self.level_bank_size,
                                      allow_none=True)
        if self.level_bank_size is not None and self.level_bank_size < self.max_levels_per_call:
            raise ValueError(
                f"CompiledConfig expects `level_bank_size` >= {self.max_levels_per_call} (the "
                f"most levels one compiled call can start: num_envs * (unroll_length // 2 + 1) "
                f"* updates_per_call), received level_bank_size={self.level_bank_size}.")
        validation.check_positive_int("CompiledConfig", "learner_minibatches",
                                      self.learner_minibatches)
        validation.check_positive_int("CompiledConfig", "learner_epochs", self.learner_epochs)
        if self.initial_weights is not None and (
                not isinstance(self.initial_weights, str)
                or not self.initial_weights.endswith(".keras")):
            raise ValueError(
                f"CompiledConfig expects `initial_weights` (--initial_weights) to be None or the "
                f"path of a .keras model file, received {self.initial_weights!r}.")
        validation.check_number_in_range("stop_solve_rate", self.stop_solve_rate, low=0.0,
                                         high=1.0, allow_none=True, owner="CompiledConfig",
                                         low_exclusive=True)
        if self.num_envs % self.learner_minibatches:
            raise ValueError(
                f"CompiledConfig expects `learner_minibatches` (--learner_minibatches) to divide "
                f"`num_envs` ({self.num_envs}), received "
                f"learner_minibatches={self.learner_minibatches}.")
        # Checkpoints and evaluations read the state, which the host has between calls only.
        for name in ("num_iterations", "checkpoint_interval", "eval_interval"):
            if getattr(self, name) % self.updates_per_call:
                raise ValueError(
                    f"CompiledConfig expects `{name}` (--{name}) to be a multiple of "
                    f"`updates_per_call` (--updates_per_call={self.updates_per_call}): the "
                    f"host sees the state between calls only, received {name}="
                    f"{getattr(self, name)}.")
        validation.check_positive_int("CompiledConfig", "num_devices", self.num_devices,
                                      allow_none=True)
        if self.num_devices is not None and (self.num_envs // self.learner_minibatches) \
                % self.num_devices:
            raise ValueError(
                f"CompiledConfig expects `num_devices` (--num_devices) to divide the "
                f"environments of a learner minibatch (num_envs / learner_minibatches = "
                f"{self.num_envs} / {self.learner_minibatches}), received "
                f"num_devices={self.num_devices}.")

    @property
    def max_levels_per_update(self):
        """The most episodes one update can start: an episode takes at least one action and the
        auto-reset step, so a slot starts at most ``unroll_length // 2 + 1`` per update."""
        return max_levels_started(self.num_envs, self.unroll_length)

    @property
    def max_levels_per_call(self):
        """The most episodes one compiled call (``updates_per_call`` updates, one bank) can
        start."""
        return self.max_levels_per_update * self.updates_per_call

    @property
    def levels_per_bank(self):
        """``level_bank_size``, or enough levels for 8 calls (``level_banks.DRAWS_PER_BANK``)."""
        return self.level_bank_size or default_bank_size(self.max_levels_per_call)
