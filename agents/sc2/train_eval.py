"""Training of the SC2 agent: actor, composite V-trace learner, greedy-policy export.

``train_eval(root_dir, config)`` is the ``train_sc2`` binary: ``config.num_envs`` environments
(the game through ``SC2PATH``, or pysc2's mock with ``mock=True``) are stepped by an
:class:`~keras_relational.agents.sc2.acting.SC2Actor`; each update is one V-trace step of the
:class:`~keras_relational.agents.sc2.learning.SC2VTraceLearner` on their unrolls (Zambaldi et al.
2019, App. B-C; one process, synchronous: the actor acts with the learner's latest weights).
At the end it writes ``root_dir/policy`` (the greedy policy as a SavedModel,
:func:`~keras_relational.agents.sc2.policy.export_policy`), ``root_dir/sc2_agent.weights.h5`` and
``root_dir/result.json``. No checkpoints or resumption (a run starts afresh).
"""

import dataclasses
import json
import os
import time

from keras_relational import whole_files
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


def _write_json(path, value):
    partial = path + ".partial"
    with open(partial, "w") as f:
        json.dump(value, f, indent=2)
    os.replace(partial, path)


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

    from keras_relational.agents.sc2.acting import SC2Actor
    from keras_relational.agents.sc2.learning import SC2VTraceLearner
    from keras_relational.agents.sc2.policy import export_policy
    from keras_relational.models.sc2_agent import sc2_agent

    start = time.time()
    keras.utils.set_random_seed(config.seed)
    os.makedirs(root_dir, exist_ok=True)
    environments = environments or make_environments(config)
    _, argument_mask = environments[0].argument_mask()
    model = sc2_agent(screen_size=config.screen_size, num_functions=argument_mask.shape[0],
                      core=config.core, num_blocks=config.num_blocks,
                      num_heads=config.num_heads, **(model_kwargs or {}))
    # Zambaldi et al. 2019, Table 2: Adam, beta1 0.9, beta2 0.999, epsilon 1e-8.
    optimizer = keras.optimizers.Adam(config.learning_rate, beta_1=0.9, beta_2=0.999,
                                      epsilon=1e-8)
    learner = SC2VTraceLearner(
        model, optimizer, argument_mask, discount=config.discount,
        entropy_cost=config.entropy_cost, baseline_cost=config.baseline_cost,
        gradient_clip_norm=config.gradient_clip_norm, compile_mode=config.compile_mode)
    actor = SC2Actor(environments, model, argument_mask, seed=config.seed)
    print_fn(f"SC2 {config.map_name}{' (mock)' if config.mock else ''}: "
             f"{model.count_params():,} parameters, {config.num_envs} environments")
    info = None
    for update in range(1, config.num_iterations + 1):
        info = learner.train_step(actor.collect(config.unroll_length))
        if not np.isfinite(info.loss):
            raise FloatingPointError(f"The SC2 training loss became {info.loss} at update "
                                     f"{update}; nothing was exported.")
        if update % config.log_interval == 0 or update == config.num_iterations:
            recent = actor.episode_returns[-100:]
            score = f"{np.mean(recent):.2f}" if recent else "-"
            print_fn(f"update {update}: loss {info.loss:.4f}, episodes "
                     f"{len(actor.episode_returns)}, mean return {score}, "
                     f"{time.time() - start:.0f} s")
    policy_dir = export_policy(model, os.path.join(root_dir, "policy"))
    # The weights alone: sc2_agent(...) with the run's config rebuilds the model for them.
    weights_file = os.path.join(root_dir, "sc2_agent.weights.h5")
    whole_files.write_whole(weights_file, model.save_weights)
    for env in environments:
        env.close()
    recent = actor.episode_returns[-100:]
    result = dict(config=dataclasses.asdict(config), parameters=model.count_params(),
                  updates=config.num_iterations, episodes=len(actor.episode_returns),
                  mean_return=float(np.mean(recent)) if recent else None,
                  loss=info._asdict(), seconds=time.time() - start, policy_dir=policy_dir,
                  weights_file=weights_file)
    _write_json(os.path.join(root_dir, "result.json"), result)
    return result
