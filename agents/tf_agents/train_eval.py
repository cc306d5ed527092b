"""Actor-learner training of the Box-World agents with TF-Agents (V-trace or PPO).

``train_eval(root_dir, config)`` is the library behind ``python -m
keras_relational.experiments.train_boxworld``: actors (TF-Agents' in-process ``Actor``, or a
fleet of Ray actors) step batched NumPy BoxWorlds with the collect policy
(:mod:`~keras_relational.agents.tf_agents.acting`), an :class:`UnrollQueue` cuts their experience
into ``[B, T+1]`` unrolls, and a ``tf_agents.train.Learner`` trains the agent on them
(:mod:`~keras_relational.agents.tf_agents.learning`; XLA-compiled loss and gradients), writes
TensorBoard summaries and checkpoints under ``root_dir/train``, and saves policies with
``PolicySaver`` under ``root_dir/policies``. Re-running with the same ``root_dir`` resumes from the
last checkpoint (the train-step counter continues). The hyperparameters and their defaults are
:class:`~keras_relational.agents.config.TFAgentsConfig`.
"""

import gc
import os
import time

from tf_agents.specs import tensor_spec
from tf_agents.train import interval_trigger, learner
from tf_agents.train.utils import train_utils

from keras_relational import json_files, run_settings, validation
from keras_relational.agents.config import (
    AGENTS,  # noqa: F401  (re-exported: the names train_eval's callers know)
    ALGORITHMS,  # noqa: F401
    EVAL_SEED_OFFSET,
    OPTIMIZERS,  # noqa: F401
    RESUME_FLAG_NAMES,
    RESUME_FREE,
    RESUME_INTRODUCED,
    RESUME_RETIRED,
    TFAgentsConfig,
    preset_environment,
    resume_settings,
    updated_config,
)
from keras_relational.agents.curves import CurveFile
from keras_relational.agents.networks import agent_model_fn
from keras_relational.agents.tf_agents import (
    acting,
    actor_state,
    checkpoints,
    evaluation,
    export,
    learning,
    tensor_environment,
)
from keras_relational.agents.tf_agents.boxworld_environment import make_boxworld_environment
from keras_relational.agents.tf_agents.keras3_network import Keras3Network
from keras_relational.agents.tf_agents.progress import Progress
from keras_relational.agents.tf_agents.unroll_queue import UnrollQueue
from keras_relational.progress_bar import ProgressBar


def make_config(config=None, env_name=None, env_kwargs=None, eval_env_kwargs=None,
                **hyperparameters):
    """A :class:`TFAgentsConfig` from ``config`` (or the defaults; another trainer's config
    gives its shared fields) updated by ``hyperparameters``.

    ``env_name`` (``"original"`` or ``"bridge"``) with ``env_kwargs`` / ``eval_env_kwargs``
    (level parameters, e.g. ``dict(goal_length=(1, 2))``) stand for the environment config
    objects ``environment`` / ``eval_environment``.
    """
    if config is None:
        config = TFAgentsConfig()
    elif not isinstance(config, TFAgentsConfig):
        config = TFAgentsConfig.from_config(config)
    return updated_config(config, env_name, env_kwargs, eval_env_kwargs, **hyperparameters)


@run_settings.resumable(
    settings=lambda arguments: resume_settings(make_config(**{
        k: v for k, v in arguments.items() if k != "print_fn"})),
    optimizer=(), free=RESUME_FREE, flag_names=RESUME_FLAG_NAMES,
    retired=RESUME_RETIRED["tf_agents"], introduced=RESUME_INTRODUCED["tf_agents"])
def train_eval(root_dir, config=None, *, env_name=None, env_kwargs=None, eval_env_kwargs=None,
               print_fn=print, **hyperparameters):
    """Trains an agent on BoxWorld, evaluates it and exports its policy.

    Args:
        root_dir: output directory; re-running with the same directory resumes.
        config: a :class:`TFAgentsConfig` (None: the defaults), updated by ``hyperparameters``
            (any of its fields, e.g. ``num_envs=16``).
        env_name, env_kwargs, eval_env_kwargs: ``"original"`` (Zambaldi et al. 2019) or
            ``"bridge"`` (Clift et al. 2020) and the level parameters of training and evaluation
            (e.g. ``dict(goal_length=(1, 2))``), the same as ``environment=`` /
            ``eval_environment=`` an environment config.
        print_fn: receives the progress and evaluation lines. With the default (``print``) a
            live progress bar (updates, frames, frames/s, ETA) is drawn below them when standard
            output is a terminal.

    Returns:
        A dict with the final train step, frames, frames/s, solve rates, export paths,
        ``actor_jit_compile`` (whether the actors acted through an XLA-compiled forward pass),
        and ``history``: one dict per progress line (``step``, ``frames``, ``fps``, ``solve_rate``,
        ``seconds`` since the start, and ``acting_seconds`` / ``learning_seconds``: wall time
        in the actor's and the learner's ``run()`` since the previous line). It is also written
        to ``root_dir/result.json``; ``root_dir/curves.jsonl`` holds the learning curve across
        resumed pieces (:mod:`~keras_relational.agents.curves`). A run stopped by
        ``max_seconds`` before ``num_iterations`` says so; the same call continues it.
    """
    config = make_config(config, env_name, env_kwargs, eval_env_kwargs, **hyperparameters)
    import keras

    keras.utils.set_random_seed(config.seed)
    os.makedirs(root_dir, exist_ok=True)
    # Before the Learner restores: the newest readable checkpoint, or a clear error (never a
    # silent restart from step 0 over existing checkpoints).
    checkpoints.prepare_resume(root_dir, warn=print_fn)
    collect_env = _collect_environment(config)
    observation_spec = tensor_spec.to_array_spec(
        tensor_spec.from_spec(collect_env.observation_spec()))
    time_step_spec = tensor_spec.from_spec(collect_env.time_step_spec())
    action_spec = tensor_spec.from_spec(collect_env.action_spec())
    num_actions = int(action_spec.maximum - action_spec.minimum + 1)
    model_fn = agent_model_fn(config.agent, observation_spec.shape, num_actions,
                              observation_dtype=observation_spec.dtype,
                              dtype_policy=config.dtype_policy, **config.model_kwargs)
    network = Keras3Network(time_step_spec.observation, model_fn, name=f"{config.agent}_network")
    train_step = train_utils.create_train_step()
    tf_agent = learning.make_agent(config, time_step_spec, action_spec, network, model_fn,
                                   train_step)
    unrolls = UnrollQueue(tf_agent.collect_data_spec, config.num_envs, config.unroll_length)
    # The actor's half of every checkpoint (environments, sampler, unrolls in flight), so that a
    # resumed run continues exactly as the uninterrupted one (V-trace, in-process NumPy actor).
    saved_actor = actor_state.ActorState(root_dir, config) if actor_state.supported(config) \
        else None
    agent_learner = learning.make_learner(root_dir, config, tf_agent, unrolls, train_step,
                                          actor_state=saved_actor)
    start_step = int(train_step.numpy())  # restored by the Learner when resuming
    bar = None
    if print_fn is print:  # lines go above the bar (drawn on a terminal only)
        bar = ProgressBar(config.num_iterations, "updates", start=start_step)
        print_fn = bar.print
    # Collect metrics (Progress) and the Ray fleet's policy lag; TF-Agents' Actor writes none.
    collect_summary_dir = os.path.join(root_dir, "collect")
    if config.num_ray_actors:  # IMPALA-style: remote actors feed `unrolls`, one unroll per run()
        from keras_relational.agents.tf_agents import ray_actors

        collect_actor = ray_actors.RayActorFleet(
            config.num_ray_actors, unrolls, network.keras_model, train_step, model_fn,
            environment=config.environment, num_envs=config.num_envs,
            unroll_length=config.unroll_length, data_spec=tf_agent.collect_data_spec,
            seed=config.seed, weight_sync_interval=config.weight_sync_interval,
            ray_address=config.ray_address, summary_dir=collect_summary_dir, print_fn=print_fn,
            actor_jit_compile=config.actors_jit_compile)
        finished_episodes, policy_lag_fn = collect_actor.finished_episodes, \
            collect_actor.mean_policy_lag
    else:
        policy = tf_agent.collect_policy
        if config.actors_jit_compile or saved_actor is not None:  # V-trace only
            # The actor's own copy of the collect policy (same variables; XLA-compiled with
            # actors_jit_compile), sampling statelessly from the run's seed when the actor's
            # state is checkpointed; the exported collect policy stays as it is.
            policy = acting.ActorCriticPolicy(
                time_step_spec, action_spec, network, jit_compile=config.actors_jit_compile,
                sampling_seed=config.seed if saved_actor is not None else None)
        make_actor = (tensor_environment.in_graph_actor if config.env_backend == "tensor"
                      else acting.in_process_actor)
        collect_actor = make_actor(collect_env, policy, train_step, unrolls, None,
                                   config.log_interval)
        finished_episodes, policy_lag_fn = collect_env.finished_episodes, None
    if start_step:
        print_fn(f"Resuming from {root_dir}: train step {start_step}")
    curve = CurveFile(root_dir, start_step)
    if saved_actor is not None:
        saved_actor.attach(collect_env, collect_actor, unrolls, policy)
        if start_step:
            # The episodes pending at the checkpoint are in the curve's row of its step when
            # that progress line was written.
            saved_actor.restore(start_step, warn=print_fn,
                                episodes_reported=curve.last_step == start_step)
    elif start_step:  # PPO, the tensor environments and Ray actors save no actor state
        print_fn(actor_state.missing_warning(root_dir, start_step))
    print_fn(f"Training {config.agent} agent ({network.keras_model.count_params():,} "
             f"parameters, {config.algorithm}) on {config.env_name} BoxWorld: {config.num_envs} "
             f"envs x {config.unroll_length} steps per update, {config.num_iterations} updates")
    report = evaluation.EvalSummaries(os.path.join(root_dir, "eval"), print_fn)

    eval_seed = validation.offset_seed("seed", config.seed, EVAL_SEED_OFFSET)
    eval_policy = tf_agent.collect_policy
    if config.algorithm == "vtrace":  # sampling from the seed: the result depends on the weights
        eval_policy = acting.ActorCriticPolicy(time_step_spec, action_spec, network,
                                               sampling_seed=eval_seed)

    def run_eval(name="eval", environment=config.evaluation_environment):
        if config.algorithm == "vtrace":  # every evaluation samples from the same seeds
            eval_policy.sample_count.assign(0)
        episodes = evaluation.evaluate(eval_policy, environment,
                                       config.eval_episodes,
                                       eval_seed,
                                       num_envs=config.eval_num_envs)
        return report(int(train_step.numpy()), name, episodes)

    progress = _train(config, collect_actor, agent_learner, unrolls, train_step, start_step,
                      finished_episodes, collect_summary_dir, print_fn, policy_lag_fn,
                      run_eval, curve, bar, saved_actor)

    step = int(train_step.numpy())
    if step < config.num_iterations:  # stopped by max_seconds: one piece of a longer run
        print_fn(f"Stopped at train step {step} of {config.num_iterations} (--max_seconds="
                 f"{config.max_seconds:g}); the checkpoint is saved: run the same command again "
                 f"to continue.")
    # The final state, any interval.
    learning.save_checkpoint(root_dir, tf_agent, train_step, actor_state=saved_actor)
    eval_rate = run_eval() if config.eval_episodes else float("nan")
    test_rates = {preset: run_eval(preset, preset_environment(config.environment, preset))
                  for preset in config.test_presets}
    # PolicySaver exports of the raw, collect (sampling) and greedy policies with the final
    # weights and a policy checkpoint of the final step, and the Keras 3 model.
    policies_dir = os.path.join(root_dir, learner.POLICY_SAVED_MODEL_DIR)
    # Exporting takes a while (SavedModel tracing): say so rather than sit silent.
    print_fn(f"exporting the policies to {policies_dir} and the Keras model")
    export.export_policies(tf_agent, policies_dir, train_step)
    keras_model_dir, keras_file = export.export_keras_model(network.keras_model, root_dir)
    elapsed = time.perf_counter() - progress.started
    result = dict(
        train_step=step, frames=int(step * config.frames_per_step),
        frames_per_second=(step - start_step) * config.frames_per_step / max(elapsed, 1e-9),
        eval_solve_rate=eval_rate, test_solve_rates=test_rates, policies_dir=policies_dir,
        keras_model_dir=keras_model_dir, keras_file=keras_file,
        actor_jit_compile=config.actors_jit_compile, dtype_policy=config.dtype_policy,
        history=progress.history)
    json_files.write_json(os.path.join(root_dir, "result.json"), result)
    print_fn(f"done: step {step}, eval solve rate {100 * eval_rate:.1f}%, policies in "
             f"{policies_dir}, Keras model in {keras_model_dir}")
    # Release the generator-backed dataset iterator while Python is alive; left to interpreter
    # shutdown, TensorFlow fails to finalize it and prints a spurious error.
    del agent_learner
    gc.collect()
    return result


def _collect_environment(config):
    """The actors' environments: the NumPy batched BoxWorld, or the tensor one in the graph."""
    if config.env_backend == "tensor":
        return tensor_environment.TensorBoxWorldEnvironment(
            config.environment, num_envs=config.num_envs, seed=config.seed,
            unroll_length=config.unroll_length)
    return make_boxworld_environment(config.environment, num_envs=config.num_envs,
                                     seed=config.seed)


def _train(config, collect_actor, agent_learner, unrolls, train_step, start_step,
           finished_episodes, summary_dir, print_fn, policy_lag_fn, run_eval, curve, bar=None,
           saved_actor=None):
    """The actor-learner loop: act, train on every queued unroll, report (progress lines and
    ``curve``), evaluate."""
    # Progress lines continue the uninterrupted run's cadence: from the last line's step.
    progress = Progress(config, start_step, finished_episodes, summary_dir, print_fn,
                        policy_lag_fn, bar=bar, last_report_step=curve.last_step)
    if saved_actor is not None:
        saved_actor.pending_episodes = progress.pending_episodes
    # Evaluations at the multiples of eval_interval (0: none during training).
    first = start_step - start_step % max(config.eval_interval, 1)
    evaluate = interval_trigger.IntervalTrigger(config.eval_interval, run_eval, start=first)
    loss = None
    curve_start = len(curve.rows)  # the rows of the previous pieces
    try:
        while int(train_step.numpy()) < config.num_iterations and not progress.out_of_time:
            tick = time.perf_counter()
            if not unrolls.qsize():  # a resumed run first trains what was queued at the cut
                collect_actor.run()
            tock = time.perf_counter()
            while unrolls.qsize() and int(train_step.numpy()) < config.num_iterations:
                loss = agent_learner.run(iterations=1).loss
            step = int(train_step.numpy())
            progress.record(step, tock - tick, time.perf_counter() - tock, loss)
            if len(progress.history) > len(curve.rows) - curve_start:
                curve.append(progress.history[-1])
            evaluate(step)
    finally:
        if bar is not None:
            bar.close()
        unrolls.close()
        if config.num_ray_actors:
            collect_actor.close()
    return progress


__all__ = ["TFAgentsConfig", "agent_model_fn", "make_config", "train_eval"]
