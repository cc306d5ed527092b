"""The hyperparameters of a Box-World training run: a dataclass per trainer, the papers' defaults.

:class:`TrainConfig` holds the settings both trainers share (levels, network, V-trace loss,
optimizer, intervals, evaluation, seed, dtype policy) and is the single source of their defaults;
each trainer configures a run with its subclass, which adds only what that trainer has:
:class:`TFAgentsConfig` (``trainer="tf_agents"``: algorithm, actors, Ray, TF-Agents' policy
checkpoints) and ``keras_relational.agents.compiled.config.CompiledConfig``
(``trainer="compiled"``: level source and banks, updates per call, learner minibatches,
devices). The flags of ``python -m keras_relational.experiments.train_boxworld`` are generated
from the fields and their ``help``. The environment is an environment config object,
``keras_relational.environments.BoxWorldConfig`` (Zambaldi et al. 2019) or
``keras_relational.environments.BridgeConfig`` (Clift et al. 2020); the network's own
hyperparameters are the defaults of its builder in ``keras_relational.models.boxworld_agents``,
overridden by ``model_kwargs``.

Pure Python (no TensorFlow): the binary imports it to define its flags.

Example::

    from keras_relational import environments
    from keras_relational.agents.config import TFAgentsConfig

    config = TFAgentsConfig(environment=environments.BoxWorldConfig(goal_length=1,
                                                                     num_distractors=0),
                            num_envs=16, num_iterations=100)
    config.env_name        # "original" (from the environment config)
"""

import dataclasses
from collections.abc import Mapping

from keras_relational import environments, validation
from keras_relational.agents.optimizers import OPTIMIZERS

# clift_relational: Clift et al. 2020's relational agent (their simplicial one without the
# 2-simplicial branch), the Fig. 6 comparison.
AGENTS = ("relational", "simplicial", "baseline", "clift_relational")
ALGORITHMS = ("vtrace", "ppo")
# "tf_agents": TF-Agents' Actor and Learner (agents/tf_agents/train_eval.py); "compiled":
# environment steps, acting and learning in one compiled function per update (agents/compiled/).
TRAINERS = ("tf_agents", "compiled")
DEFAULT_TRAINER = TRAINERS[0]  # train_boxworld's --trainer and the presets' default
ENV_BACKENDS = ("numpy", "tensor")
# Evaluation levels and sampling are seeded `seed + EVAL_SEED_OFFSET` by both trainers, so an
# evaluation never plays the training levels' stream.
EVAL_SEED_OFFSET = 10_000
# env_name -> the environment's config dataclass.
ENVIRONMENT_CONFIGS = {"original": environments.BoxWorldConfig,
                       "bridge": environments.BridgeConfig}


def environment_config(env_name="original", **env_kwargs):
    """The environment config of ``env_name`` (``"original"`` or ``"bridge"``) with ``env_kwargs``.

    Example: ``environment_config("original", goal_length=1, room_size=6)`` is
    ``keras_relational.environments.BoxWorldConfig(goal_length=1, room_size=6)``.
    """
    validation.check_choice("environment_config", "env_name", env_name,
                            tuple(ENVIRONMENT_CONFIGS))
    return ENVIRONMENT_CONFIGS[env_name](**env_kwargs)


def updated_config(config, env_name=None, env_kwargs=None, eval_env_kwargs=None,
                   **hyperparameters):
    """``config`` (a :class:`TrainConfig` or a subclass) with ``hyperparameters`` replaced.

    ``env_name`` (``"original"`` or ``"bridge"``) with ``env_kwargs`` / ``eval_env_kwargs``
    (level parameters, e.g. ``dict(goal_length=(1, 2))``) stand for the environment config
    objects ``environment`` / ``eval_environment``; given explicitly, those win.
    """
    env_name = env_name or config.env_name
    if env_kwargs is not None or env_name != config.env_name:
        hyperparameters.setdefault("environment",
                                   environment_config(env_name, **(env_kwargs or {})))
    if eval_env_kwargs is not None:
        hyperparameters.setdefault("eval_environment",
                                   environment_config(env_name, **eval_env_kwargs))
    return dataclasses.replace(config, **hyperparameters)


def environment_name(config):
    """``"original"`` or ``"bridge"``: the environment an environment config describes."""
    for name, config_class in ENVIRONMENT_CONFIGS.items():
        if isinstance(config, config_class):
            return name
    raise ValueError(f"`environment` must be one of "
                     f"{[c.__name__ for c in ENVIRONMENT_CONFIGS.values()]}, received "
                     f"{type(config).__name__}.")


def environment_kwargs(config):
    """The keyword arguments that rebuild ``config`` (every field of the dataclass)."""
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


def preset_environment(config, preset):
    """The training environment ``config`` with the level parameters of ``PRESETS[preset]``.

    Everything the preset does not set (observation type, room size, step limit, colours, ...)
    stays as in training, so a policy is evaluated on observations it was trained on.
    """
    if not isinstance(config, environments.BoxWorldConfig):
        raise ValueError(f"`test_presets` apply to the original BoxWorld, received "
                         f"env_name={environment_name(config)!r}.")
    return dataclasses.replace(config, **environments.PRESETS[preset])


# The numeric fields' ranges, (low, high), None for unbounded: checked by the configs and, when
# parsed, by the binary's flags. learning_rate, gradient_clip_norm, reward_scale and max_seconds
# must also be > 0 (EXCLUSIVE_LOW).
RANGES = {
    "num_iterations": (0, None), "num_envs": (1, None), "unroll_length": (1, None),
    "learning_rate": (0, None), "discount": (0, 1), "entropy_cost": (0, None),
    "baseline_cost": (0, None), "gradient_clip_norm": (0, None), "reward_scale": (0, None),
    "vtrace_lambda": (0, 1), "ppo_epochs": (1, None), "checkpoint_interval": (1, None),
    "policy_save_interval": (0, None), "log_interval": (1, None), "eval_interval": (0, None),
    "eval_episodes": (0, None), "eval_num_envs": (1, None), "num_ray_actors": (0, None),
    "weight_sync_interval": (1, None), "max_seconds": (0, None), "seed": (0, 2**32 - 1),
}
EXCLUSIVE_LOW = ("learning_rate", "gradient_clip_norm", "reward_scale", "max_seconds")


def check_range(name, value, owner="TrainConfig", integer=False):
    """Raises a ValueError unless ``value`` of config field ``name`` is in its range."""
    low, high = RANGES[name]
    validation.check_number_in_range(name, value, low, high, integer=integer,
                                     allow_none=name == "max_seconds", owner=owner,
                                     low_exclusive=name in EXCLUSIVE_LOW)


def _field(default, help, **kwargs):  # noqa: A002  (absl's name for a flag's description)
    return dataclasses.field(default=default, metadata=dict(help=help), **kwargs)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """The hyperparameters both trainers share; defaults are the papers' where they give one.

    A run is configured by a subclass, one per trainer: :class:`TFAgentsConfig`
    (``trainer="tf_agents"``) or
    :class:`~keras_relational.agents.compiled.config.CompiledConfig` (``trainer="compiled"``),
    which add the settings only that trainer has. The fields' ``help`` metadata documents each
    one (and becomes the flag's help).
    """

    environment: object = _field(None, "Training levels: an environments.BoxWorldConfig "
                                 "(Zambaldi et al. 2019) or BridgeConfig (Clift et al. 2020); "
                                 "None: BoxWorldConfig(), the paper's levels.")
    eval_environment: object = _field(None, "Evaluation levels (None: the training levels).")
    agent: str = _field("relational", f"Network: one of {AGENTS}.")
    model_kwargs: Mapping = _field(None, "Arguments of the network builder in "
                                   "keras_relational.models.boxworld_agents (None: its defaults).")
    # The trainer a subclass configures (recorded with a run's settings); not an argument.
    trainer: str = dataclasses.field(default=None, init=False)
    num_iterations: int = _field(10_000, "Learner updates.")
    # Zambaldi et al. 2019, App. B; Clift et al. 2020, App. E, Table 1: 32 trajectories of 40.
    num_envs: int = _field(32, "Environments stepped together (trajectories per batch).")
    unroll_length: int = _field(40, "Steps per trajectory.")
    # Zambaldi et al. 2019, App. B (tuned in [1e-5, 2e-4]); Clift et al. 2020, Table 1: 2e-4.
    learning_rate: float = _field(2e-4, "Learning rate.")
    discount: float = _field(0.99, "Discount gamma.")  # Zambaldi et al. 2019, App. B
    entropy_cost: float = _field(0.005, "Entropy regularisation weight.")  # ibid.
    # Not given by Zambaldi et al.; Clift et al. 2020, App. E (their RLlib IMPALA defaults).
    baseline_cost: float = _field(0.5, "Value-loss weight.")
    gradient_clip_norm: float = _field(40.0, "Global-norm gradient clip.")  # ibid.
    optimizer: str | None = _field(None, "The papers' RMSProp (epsilon 0.1, decay 0.99; "
                                   "Zambaldi et al. 2019, App. B) or Adam; default: RMSProp "
                                   "for V-trace, Adam for PPO.")
    reward_scale: float = _field(1.0, "V-trace: rewards are multiplied by this (0.1 makes the "
                                 "+10 gem 1).")
    # Espeholt et al. 2018, Sec. 4: the papers' V-trace has lambda 1.
    vtrace_lambda: float = _field(1.0, "V-trace: IMPALA's lambda (1: the papers' V-trace).")
    checkpoint_interval: int = _field(100, "Updates between checkpoints.")
    log_interval: int = _field(10, "Updates between progress lines.")
    eval_interval: int = _field(0, "Updates between evaluations (0: at the end only).")
    eval_episodes: int = _field(100, "Episodes per evaluation.")
    eval_num_envs: int = _field(32, "Evaluation levels played together (at most eval_episodes).")
    test_presets: tuple = _field((), "BoxWorld presets evaluated zero-shot after training, e.g. "
                                 "test_length_6,test_length_8,test_length_10,test_heldout.")
    max_seconds: float | None = _field(None, "Wall-clock budget of the training loop (stops at "
                                       "the first progress line after it, then checkpoints, "
                                       "evaluates and exports).")
    seed: int = _field(0, "Random seed (TensorFlow, Keras, the environments).")
    # Micikevicius et al. 2018 (mixed precision training): float32 weights, 16-bit compute;
    # float16 needs loss scaling (bfloat16 has float32's exponent range and does not).
    dtype_policy: str = _field(validation.DEFAULT_DTYPE_POLICY, "Keras dtype policy of the "
                               "network: 'float32', 'mixed_bfloat16' or 'mixed_float16' "
                               "(weights float32, layers compute in 16 bits, logits, values and "
                               "the V-trace loss in float32; float16 with dynamic loss "
                               "scaling).")

    def __post_init__(self):
        name = type(self).__name__
        if self.trainer not in TRAINERS:
            raise TypeError(f"{name} holds the settings both trainers share; configure a run "
                            f"with TFAgentsConfig or CompiledConfig (one per trainer, "
                            f"{TRAINERS}).")
        set_ = lambda field, value: object.__setattr__(self, field, value)  # noqa: E731
        if self.environment is None:
            set_("environment", environments.BoxWorldConfig())
        if self.eval_environment is not None and (
                environment_name(self.eval_environment) != self.env_name):
            raise ValueError(f"`eval_environment` must describe the training environment "
                             f"({self.env_name!r}), received "
                             f"{type(self.eval_environment).__name__}.")
        set_("model_kwargs", dict(self.model_kwargs or {}))
        set_("test_presets", tuple(self.test_presets))
        validation.check_choice(name, "agent", self.agent, AGENTS)
        validation.check_dtype_policy(name, self.dtype_policy)
        if self.optimizer is not None and self.optimizer not in OPTIMIZERS:
            raise ValueError(f"`optimizer` must be one of {OPTIMIZERS} or None, received "
                             f"{self.optimizer!r}.")
        unknown = [p for p in self.test_presets if p not in environments.PRESETS]
        if unknown:
            raise ValueError(f"`test_presets` must name BoxWorld presets "
                             f"{sorted(environments.PRESETS)}, received {unknown}.")
        if self.test_presets:
            preset_environment(self.environment, self.test_presets[0])  # original BoxWorld only
        for field in dataclasses.fields(self):
            if field.name in RANGES:
                check_range(field.name, getattr(self, field.name), owner=name,
                            integer=field.type in (int, "int"))
        if self.test_presets and not self.eval_episodes:
            raise ValueError(f"{name}: `eval_episodes`: expected at least 1 to evaluate "
                             f"test_presets={self.test_presets}, received 0.")

    @property
    def env_name(self):
        """``"original"`` or ``"bridge"``: the environment of ``environment``."""
        return environment_name(self.environment)

    @property
    def evaluation_environment(self):
        """The levels of evaluations: ``eval_environment``, or else the training levels."""
        return self.environment if self.eval_environment is None else self.eval_environment

    @property
    def frames_per_step(self):
        """Environment frames consumed per learner step."""
        return self.num_envs * self.unroll_length

    def optimizer_name(self):
        """The optimizer to use: ``optimizer``, or V-trace's (the papers' RMSProp)."""
        return self.optimizer or "rmsprop"

    @classmethod
    def own_fields(cls):
        """The fields only this trainer's config has (those beyond :class:`TrainConfig`'s)."""
        shared = {f.name for f in dataclasses.fields(TrainConfig)}
        return [f for f in dataclasses.fields(cls) if f.name not in shared]

    @classmethod
    def from_config(cls, config, **overrides):
        """This trainer's config with the shared fields of ``config`` (another trainer's config,
        or this one's) and ``overrides``.

        Raises:
            ValueError: ``config`` sets a field that this trainer does not have to other than
                its default (e.g. ``algorithm="ppo"`` for the compiled trainer): it would be
                dropped silently.
        """
        names = {f.name for f in dataclasses.fields(cls) if f.init}
        values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)
                  if f.init and f.name in names}
        dropped = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)
                   if f.init and f.name not in names and f.name not in overrides
                   and getattr(config, f.name) != f.default}
        if dropped:
            trainer = cls.__dataclass_fields__["trainer"].default
            raise ValueError(f"{cls.__name__} (trainer={trainer!r}) has no {sorted(dropped)}: "
                             f"expected them at {type(config).__name__}'s defaults, received "
                             f"{dropped}.")
        values.update(overrides)
        return cls(**values)


@dataclasses.dataclass(frozen=True)
class TFAgentsConfig(TrainConfig):
    """:class:`TrainConfig` for ``trainer="tf_agents"`` (TF-Agents' Actor and Learner,
    ``keras_relational.agents.tf_agents``): the algorithm, the environments' backend, the
    actors (in-process or Ray) and TF-Agents' policy checkpoints.

    It lives in the core, beside the shared fields, rather than in ``agents/tf_agents/``:
    importing that package routes ``tf.keras`` to tf-keras, and the ``train_boxworld`` binary
    reads these fields to define its flags before it knows which trainer runs.
    """

    trainer: str = dataclasses.field(default="tf_agents", init=False)
    algorithm: str = _field("vtrace", "Learning algorithm: 'vtrace' (IMPALA-style V-trace "
                            "actor-critic) or 'ppo' (TF-Agents' PPOClipAgent).")
    env_backend: str = _field("numpy", "Collect environments: 'numpy' (BatchedBoxWorld, "
                              "stepped on the host) or 'tensor' (TensorBoxWorld inside the "
                              "TensorFlow graph, XLA-compiled; in-process actor only).")
    ppo_epochs: int = _field(4, "PPO: passes over each batch of unrolls (one train step each).")
    jit_compile: bool = _field(True, "XLA-compile the learner step.")
    actor_jit_compile: bool | None = _field(
        None, "V-trace: the actors (in-process or Ray) act through an XLA-compiled forward pass "
        "(default: on for V-trace, off for PPO; --noactor_jit_compile turns it off).")
    policy_save_interval: int = _field(
        1000, "Updates between the policy checkpoints of TF-Agents' PolicySavedModelTrigger "
        "(which also writes initial-weight policy SavedModels when training starts); 0: no "
        "trigger. The final exports of the trained policies are written either way.")
    num_ray_actors: int = _field(0, "0: actors in this process; N > 0: N Ray actors, each with "
                                 "its own --num_envs environments (pip install "
                                 "\"keras-relational[distributed]\"; V-trace only).")
    ray_address: str | None = _field(None, "With --num_ray_actors: join this Ray cluster "
                                     "('auto': the one started here with `ray start`, or "
                                     "host:port); default: start a local Ray.")
    weight_sync_interval: int = _field(1, "Learner steps between weight broadcasts to the Ray "
                                       "actors.")

    def __post_init__(self):
        super().__post_init__()
        validation.check_choice("TFAgentsConfig", "algorithm", self.algorithm, ALGORITHMS)
        validation.check_choice("TFAgentsConfig", "env_backend", self.env_backend, ENV_BACKENDS)
        if self.dtype_policy == "mixed_float16" and self.algorithm == "ppo":
            raise ValueError("TFAgentsConfig: dtype_policy='mixed_float16' needs loss scaling, "
                             "which TF-Agents' PPO agent does not do; use "
                             "dtype_policy='mixed_bfloat16' or algorithm='vtrace', received "
                             "algorithm='ppo' with dtype_policy='mixed_float16'.")
        if self.num_ray_actors and self.env_backend != "numpy":
            raise ValueError(f"`env_backend` must be 'numpy' with Ray actors (num_ray_actors="
                             f"{self.num_ray_actors}), received {self.env_backend!r}.")
        if self.num_ray_actors and self.algorithm != "vtrace":
            raise ValueError(f"`num_ray_actors` > 0 needs algorithm='vtrace' (V-trace corrects "
                             f"the actors' policy lag; PPO is on-policy), received "
                             f"{self.algorithm!r}.")
        if self.algorithm == "ppo":
            ignored = {name: value for name, value, default in (
                ("optimizer", self.optimizer, "adam"), ("reward_scale", self.reward_scale, 1.0),
                ("vtrace_lambda", self.vtrace_lambda, 1.0),
                ("actor_jit_compile", self.actor_jit_compile, False),
            ) if value is not None and value != default}
            if ignored:
                raise ValueError(f"{sorted(ignored)} apply to algorithm='vtrace' only (PPO uses "
                                 f"Adam and its own GAE), received algorithm='ppo' with "
                                 f"{ignored}.")

    @property
    def actors_jit_compile(self):
        """Whether the actors act XLA-compiled: ``actor_jit_compile``, None: for V-trace."""
        if self.actor_jit_compile is None:
            return self.algorithm == "vtrace"
        return bool(self.actor_jit_compile)

    @property
    def steps_per_batch(self):
        """Learner steps per batch of unrolls: TF-Agents' PPO counts one per epoch."""
        return self.ppo_epochs if self.algorithm == "ppo" else 1

    @property
    def frames_per_step(self):
        """Environment frames consumed per learner step."""
        return self.num_envs * self.unroll_length / self.steps_per_batch

    def optimizer_name(self):
        """The optimizer to use: ``optimizer``, or the algorithm's own (RMSProp / Adam)."""
        return self.optimizer or ("rmsprop" if self.algorithm == "vtrace" else "adam")


def flag_fields(config_class=TrainConfig):
    """The fields of ``config_class`` a binary exposes as flags (simple types): the shared ones
    of :class:`TrainConfig`, or a trainer's config's own (those beyond the shared ones)."""
    fields = (dataclasses.fields(TrainConfig) if config_class is TrainConfig
              else config_class.own_fields())
    return [f for f in fields if f.init
            and f.name not in ("environment", "eval_environment", "model_kwargs")]


# What a resume may change (keras_relational.run_settings): these freely (how long and how
# often), the optimizer's hyperparameters only with allow_changed_hyperparameters (the compiled
# trainer applies them over the restored optimizer state; TF-Agents' checkpoint restores its
# optimizer's, so it allows none), the rest (network, levels, algorithm, seed) never.
RESUME_FREE = ("num_iterations", "max_seconds", "log_interval", "checkpoint_interval",
               "policy_save_interval", "eval_interval", "eval_episodes", "eval_num_envs",
               "test_presets", "num_ray_actors", "ray_address", "weight_sync_interval",
               "jit_compile", "actor_jit_compile", "updates_per_call", "stop_solve_rate")
RESUME_OPTIMIZER = ("learning_rate", "gradient_clip_norm")
RESUME_FLAG_NAMES = {"head_units": "head_width"}  # train_boxworld's flag -> the network's argument
# Settings that runs started before the config was split per trainer recorded (one class held
# every field) and that the trainer's config no longer has: a resume of such a run does not
# compare them (they meant nothing to that trainer).
RESUME_RETIRED = {
    "tf_agents": ("level_source",),
    "compiled": ("algorithm", "env_backend", "ppo_epochs", "jit_compile", "actor_jit_compile",
                 "policy_save_interval", "num_ray_actors", "ray_address",
                 "weight_sync_interval"),
}


# Settings that runs started before they existed did not record, and the value those runs
# trained with (the option's default): such a run resumes as if it had recorded it.
RESUME_INTRODUCED = {
    "tf_agents": {},
    "compiled": {"learner_epochs": 1, "initial_weights": None, "stop_solve_rate": None},
}


def resume_settings(config):
    """The settings of a run (``{name: JSON value}``) that a resume compares: ``config``'s fields,
    the levels' and the network's arguments under their own names (evaluation levels left out:
    they may change)."""
    from keras_relational import run_settings

    return run_settings.flat_settings(dataclasses.replace(config, eval_environment=None))
