"""Training of the SC2 agent: actor, composite V-trace learner, greedy-policy export.

``train_eval(root_dir, config)`` is the ``train_sc2`` binary: ``config.num_envs`` environments
(the game through ``SC2PATH``, or pysc2's mock with ``mock=True``) are stepped by an
:class:`~keras_relational.agents.sc2.acting.SC2Actor`; each update is one V-trace step of the
:class:`~keras_relational.agents.sc2.learning.SC2VTraceLearner` on their unrolls (Zambaldi et al.
2019, App. B-C; one process, synchronous: the actor acts with the learner's latest weights).
With ``config.trainer="tf_agents"`` a TF-Agents ``PyDriver`` steps them with the
:class:`~keras_relational.agents.sc2.tf_agents_policy.SC2Policy` and TF-Agents' V-trace agent
learns (:class:`~keras_relational.agents.sc2.tf_agents_agent.TFAgentsSC2Trainer`).
At the end it writes ``root_dir/policy`` (the greedy policy as a SavedModel,
:func:`~keras_relational.agents.sc2.policy.export_policy`), ``root_dir/sc2_agent.weights.h5`` and
``root_dir/result.json``. No checkpoints or resumption (a run starts afresh).
"""

import dataclasses
import os
import time

from keras_relational import json_files, whole_files
from keras_relational.agents.sc2.config import SC2Config


def make_environments(config):
    """``config.num_envs`` adapters: the game (``SC2Environment.from_map``) or the mock."""
    from keras_relational.environments.sc2 import SC2Environment

    if config.mock:
        return [SC2Environment.mock(config.map_name, screen_size=config.screen_size,
                                    minimap_size=config.screen_size,
                                    episode_length=config.mock_episode_length)
                for _ in range(config.num_envs)]
    return [SC2Environment.from_map(config.map_name, screen_size=config.screen_size,
                                    minimap_size=config.screen_size, step_mul=config.step_mul,
                                    random_seed=config.seed + i)
            for i in range(config.num_envs)]


def train_eval(root_dir, config=None, *, model_kwargs=None, environments=None, print_fn=print,
               **hyperparameters):
    """Trains the SC2 agent with V-trace and exports its greedy policy.

    Args:
        root_dir: output directory.
        config: an :class:`SC2Config` (None: the defaults), updated by ``hyperparameters``.
        model_kwargs: extra arguments of :func:`keras_relational.models.sc2_agent.sc2_agent`
            (e.g. smaller sizes for a smoke run).
        environments: the environments to train on (None: :func:`make_environments`).
        print_fn: where progress lines go.

    Returns:
        A dict (also ``root_dir/result.json``): the config, ``parameters``, ``updates``,
        ``episodes``, ``mean_return`` (of the last 100 finished episodes; None before one
        finished), the last ``loss`` terms, ``seconds``, ``policy_dir`` and ``weights_file``.
    """
    config = dataclasses.replace(config or SC2Config(), **hyperparameters)
    import keras
    import numpy as np

    from keras_relational.agents.sc2.policy import export_policy
    from keras_relational.models.sc2_agent import sc2_agent

    if config.trainer == "tf_agents" and keras.backend.backend() != "tensorflow":
        raise ValueError("train_eval: trainer='tf_agents' needs KERAS_BACKEND=tensorflow "
                         "(TF-Agents trains TensorFlow variables); received "
                         f"KERAS_BACKEND={keras.backend.backend()!r}.")
    start = time.time()
    keras.utils.set_random_seed(config.seed)
    os.makedirs(root_dir, exist_ok=True)
    environments = environments or make_environments(config)
    argument_names, argument_mask = environments[0].argument_mask()

    def model_fn():
        return sc2_agent(screen_size=config.screen_size, num_functions=argument_mask.shape[0],
                         core=config.core, num_blocks=config.num_blocks,
                         num_heads=config.num_heads, **(model_kwargs or {}))

    trainer = (_tf_agents_trainer if config.trainer == "tf_agents" else _compiled_trainer)(
        config, environments, model_fn, argument_names, argument_mask)
    model = trainer.keras_model
    print_fn(f"SC2 {config.map_name}{' (mock)' if config.mock else ''}: "
             f"{model.count_params():,} parameters, {config.num_envs} environments, "
             f"{config.trainer} trainer")
    info = None
    for update in range(1, config.num_iterations + 1):
        info = trainer.train_step()
        if not np.isfinite(info.loss):
            raise FloatingPointError(f"The SC2 training loss became {info.loss} at update "
                                     f"{update}; nothing was exported.")
        if update % config.log_interval == 0 or update == config.num_iterations:
            score = trainer.mean_return()
            score = "-" if score is None else f"{score:.2f}"
            print_fn(f"update {update}: loss {info.loss:.4f}, episodes "
                     f"{trainer.episode_count}, mean return {score}, "
                     f"{time.time() - start:.0f} s")
    policy_dir = export_policy(model, os.path.join(root_dir, "policy"))
    # The weights alone: sc2_agent(...) with the run's config rebuilds the model for them.
    weights_file = os.path.join(root_dir, "sc2_agent.weights.h5")
    whole_files.write_whole(weights_file, model.save_weights)
    for env in environments:
        env.close()
    result = dict(config=dataclasses.asdict(config), parameters=model.count_params(),
                  updates=config.num_iterations, episodes=trainer.episode_count,
                  mean_return=trainer.mean_return(),
                  loss=info._asdict(), seconds=time.time() - start, policy_dir=policy_dir,
                  weights_file=weights_file)
    json_files.write_json(os.path.join(root_dir, "result.json"), result)
    return result


class _CompiledTrainer:
    """The ``keras.ops`` route: an :class:`SC2Actor` and the :class:`SC2VTraceLearner`."""

    def __init__(self, actor, learner, unroll_length):
        self.actor, self.learner, self.unroll_length = actor, learner, unroll_length
        self.keras_model = learner.model

    def train_step(self):
        return self.learner.train_step(self.actor.collect(self.unroll_length))

    @property
    def episode_count(self):
        return len(self.actor.episode_returns)

    def mean_return(self):
        recent = self.actor.episode_returns[-100:]
        return float(sum(recent) / len(recent)) if recent else None


def _compiled_trainer(config, environments, model_fn, argument_names, argument_mask):
    import keras

    from keras_relational.agents.sc2.acting import SC2Actor
    from keras_relational.agents.sc2.learning import SC2VTraceLearner

    del argument_names  # the learner's order is the model's (pysc2's)
    model = model_fn()
    # Zambaldi et al. 2019, Table 2: Adam, beta1 0.9, beta2 0.999, epsilon 1e-8.
    optimizer = keras.optimizers.Adam(config.learning_rate, beta_1=0.9, beta_2=0.999,
                                      epsilon=1e-8)
    learner = SC2VTraceLearner(
        model, optimizer, argument_mask, discount=config.discount,
        entropy_cost=config.entropy_cost, baseline_cost=config.baseline_cost,
        gradient_clip_norm=config.gradient_clip_norm, compile_mode=config.compile_mode)
    return _CompiledTrainer(SC2Actor(environments, model, argument_mask, seed=config.seed),
                            learner, config.unroll_length)


def _tf_agents_trainer(config, environments, model_fn, argument_names, argument_mask):
    from keras_relational.agents.sc2.tf_agents_agent import TFAgentsSC2Trainer

    return TFAgentsSC2Trainer(
        environments, model_fn, argument_names, argument_mask, config.unroll_length,
        config.learning_rate, use_tf_function=config.compile_mode != "eager",
        jit_compile=config.compile_mode == "xla", discount=config.discount,
        entropy_cost=config.entropy_cost, baseline_cost=config.baseline_cost,
        gradient_clip_norm=config.gradient_clip_norm)
