"""Training of the SC2 agent: actor, composite V-trace learner, checkpoints, greedy-policy export.

``train_eval(root_dir, config)`` is the ``train_sc2`` binary: ``config.num_envs`` environments
(the game through ``SC2PATH``, or pysc2's mock with ``mock=True``) are stepped by an
:class:`~keras_relational.agents.sc2.acting.SC2Actor`; each update is one V-trace step of the
:class:`~keras_relational.agents.sc2.learning.SC2VTraceLearner` on their unrolls (Zambaldi et al.
2019, App. B-C; one process, synchronous: the actor acts with the learner's latest weights).
With ``config.trainer="tf_agents"`` a TF-Agents ``PyDriver`` steps them with the
:class:`~keras_relational.agents.tf_agents.sc2_policy.SC2Policy` and TF-Agents' V-trace agent
learns (:class:`~keras_relational.agents.tf_agents.sc2_agent.TFAgentsSC2Trainer`).

Every ``config.checkpoint_interval`` updates, and after the last one, it writes a checkpoint
under ``root_dir/checkpoints`` (:mod:`~keras_relational.agents.sc2.checkpointing`: weights,
optimizer, update count, sampling state, episode returns). Re-running with the same
``root_dir`` resumes from the newest one ("Resuming from <root_dir>: update N"), also after
``kill -9``; a finished run is not trained again (its outputs are written again). On pysc2's mock
the environments are restored too, so a resumed run ends where the uninterrupted one would; the
game's state cannot be saved, so a resumed game run starts new episodes. ``config.max_seconds``
stops a run after the update that reaches it, with a checkpoint and the outputs: long runs go in
pieces of the same command.

At the end it writes ``root_dir/policy`` (the greedy policy as a SavedModel,
:func:`~keras_relational.agents.sc2.policy.export_policy`), ``root_dir/sc2_agent.keras`` (the
model), ``root_dir/sc2_agent.weights.h5`` and ``root_dir/result.json``, each whole or not at all.
"""

import dataclasses
import os
import time

from keras_relational import json_files, run_lock, whole_files
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


@run_lock.locks_root_dir
def train_eval(root_dir, config=None, *, model_kwargs=None, environments=None, print_fn=print,
               **hyperparameters):
    """Trains the SC2 agent with V-trace (resuming ``root_dir``'s run), exports its greedy policy.

    Args:
        root_dir: output directory; its checkpoints, when it has some, are resumed.
        config: an :class:`SC2Config` (None: the defaults), updated by ``hyperparameters``.
        model_kwargs: extra arguments of :func:`keras_relational.models.sc2_agent.sc2_agent`
            (e.g. smaller sizes for a smoke run).
        environments: the environments to train on (None: :func:`make_environments`).
        print_fn: where progress lines go.

    Returns:
        A dict (also ``root_dir/result.json``): the config, ``parameters``, ``updates`` (the
        update reached: below ``num_iterations`` when ``max_seconds`` stopped the run),
        ``finished``, ``episodes``, ``mean_return`` (of the last 100 finished episodes; None
        before one finished), the last ``loss`` terms, ``seconds`` (trained, over every resumed
        piece), ``policy_dir``, ``keras_file``, ``weights_file`` and ``checkpoint_dir``.

    Raises:
        keras_relational.agents.sc2.checkpointing.CheckpointError: ``root_dir`` has
            checkpoints but none can be read.
        keras_relational.agents.sc2.checkpointing.SettingsMismatchError: its checkpoint was
            written with other settings (the setting is named; nothing is overwritten).
    """
    config = dataclasses.replace(config or SC2Config(), **hyperparameters)
    import keras
    import numpy as np

    from keras_relational.agents.sc2 import checkpointing
    from keras_relational.agents.sc2.learning import LossInfo
    from keras_relational.agents.sc2.policy import export_policy
    from keras_relational.models.sc2_agent import sc2_agent

    if config.trainer == "tf_agents" and keras.backend.backend() != "tensorflow":
        raise ValueError("train_eval: trainer='tf_agents' needs KERAS_BACKEND=tensorflow "
                         "(TF-Agents trains TensorFlow variables); received "
                         f"KERAS_BACKEND={keras.backend.backend()!r}.")
    keras.utils.set_random_seed(config.seed)
    os.makedirs(root_dir, exist_ok=True)
    # Before the environments start (the game takes a while): a checkpoint of other settings is
    # refused here.
    checkpoint = checkpointing.read(root_dir, config, model_kwargs, warn=print_fn)
    environments = environments or make_environments(config)
    argument_names, argument_mask = environments[0].argument_mask()

    def model_fn():
        return sc2_agent(screen_size=config.screen_size, num_functions=argument_mask.shape[0],
                         core=config.core, num_blocks=config.num_blocks,
                         num_heads=config.num_heads, **(model_kwargs or {}))

    trainer = (_tf_agents_trainer if config.trainer == "tf_agents" else _compiled_trainer)(
        config, environments, model_fn, argument_names, argument_mask)
    model = trainer.keras_model
    update, seconds_before, info = 0, 0.0, None
    if checkpoint is not None:
        update, seconds_before = checkpoint.update, checkpoint.meta["seconds"]
        info = None if checkpoint.meta["loss"] is None else LossInfo(**checkpoint.meta["loss"])
        print_fn(f"Resuming from {root_dir}: update {update}")
        checkpointing.restore(checkpoint, trainer, warn=print_fn)
    print_fn(f"SC2 {config.map_name}{' (mock)' if config.mock else ''}: "
             f"{model.count_params():,} parameters, {config.num_envs} environments, "
             f"{config.trainer} trainer")
    start = time.time()

    def seconds():
        return seconds_before + time.time() - start

    def save():
        checkpointing.save(root_dir, update, trainer, config, model_kwargs, seconds=seconds(),
                           loss=None if info is None else info._asdict())

    saved = update
    while update < config.num_iterations:
        info = trainer.train_step()
        update += 1
        if not np.isfinite(info.loss):
            raise FloatingPointError(f"The SC2 training loss became {info.loss} at update "
                                     f"{update}; nothing was exported.")
        # The budget is checked after each update, so every piece of a run makes progress.
        out_of_time = config.max_seconds is not None and \
            time.time() - start >= config.max_seconds
        if update % config.log_interval == 0 or update == config.num_iterations or \
                out_of_time:
            score = trainer.mean_return()
            score = "-" if score is None else f"{score:.2f}"
            print_fn(f"update {update}: loss {info.loss:.4f}, episodes "
                     f"{trainer.episode_count}, mean return {score}, {seconds():.0f} s")
        if update % config.checkpoint_interval == 0:
            save()
            saved = update
        if out_of_time:
            break
    if saved != update:
        save()  # the final state, any interval
    if update < config.num_iterations:
        print_fn(f"Stopped at update {update} of {config.num_iterations} (--max_seconds="
                 f"{config.max_seconds:g}); the checkpoint is saved: run the same command again "
                 f"to continue.")
    policy_dir = export_policy(model, os.path.join(root_dir, "policy"))
    keras_file = whole_files.write_whole(os.path.join(root_dir, "sc2_agent.keras"), model.save,
                                         fault_point="export")
    # The weights alone: sc2_agent(...) with the run's config rebuilds the model for them.
    weights_file = os.path.join(root_dir, "sc2_agent.weights.h5")
    whole_files.write_whole(weights_file, model.save_weights)
    for env in environments:
        env.close()
    result = dict(config=dataclasses.asdict(config), parameters=model.count_params(),
                  updates=update, finished=update == config.num_iterations,
                  episodes=trainer.episode_count, mean_return=trainer.mean_return(),
                  loss=None if info is None else info._asdict(), seconds=seconds(),
                  policy_dir=policy_dir, keras_file=keras_file, weights_file=weights_file,
                  checkpoint_dir=checkpointing.checkpoint_dir(root_dir))
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
        return self.actor.episodes.count

    def mean_return(self):
        return self.actor.episodes.mean()

    def optimizer_variables(self):
        return list(self.learner.optimizer.variables)

    def get_state(self):
        return self.actor.get_state()

    def set_state(self, state):
        return self.actor.set_state(state)


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
    from keras_relational.agents.tf_agents.sc2_agent import TFAgentsSC2Trainer

    return TFAgentsSC2Trainer(
        environments, model_fn, argument_names, argument_mask, config.unroll_length,
        config.learning_rate, use_tf_function=config.compile_mode != "eager",
        sampling_seed=config.seed,
        jit_compile=config.compile_mode == "xla", discount=config.discount,
        entropy_cost=config.entropy_cost, baseline_cost=config.baseline_cost,
        gradient_clip_norm=config.gradient_clip_norm)
