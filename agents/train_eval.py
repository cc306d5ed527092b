"""Actor-learner training of the Box-World agents with TF-Agents (V-trace or PPO).

``train_eval(root_dir, ...)`` is the library behind ``python -m experiments.train_boxworld``:
an in-process ``tf_agents.train.Actor`` steps a batched NumPy BoxWorld with the collect policy,
an :class:`UnrollQueue` cuts its experience into ``[B, T+1]`` unrolls, and a
``tf_agents.train.Learner`` trains the agent on them (XLA-compiled loss and gradients), writes
TensorBoard summaries and checkpoints under ``root_dir/train``, and saves policies with
``PolicySaver`` under ``root_dir/policies``. Re-running with the same ``root_dir`` resumes from the
last checkpoint (the train-step counter continues).
"""

import functools
import gc
import json
import os
import shutil
import time

import numpy as np
import tensorflow as tf
from tf_agents.policies import greedy_policy, policy_saver, py_tf_eager_policy
from tf_agents.train import actor, learner, triggers
from tf_agents.train.utils import train_utils

from keras_relational import environments
from keras_relational.agents.actor_critic_policy import ActorCriticPolicy
from keras_relational.agents.boxworld_environment import make_boxworld_environment
from keras_relational.agents.keras3_network import Keras3Network
from keras_relational.agents.unroll_queue import UnrollQueue
from keras_relational.agents.vtrace_agent import VTraceAgent, impala_rmsprop
from keras_relational.models import boxworld_agents

AGENTS = ("relational", "simplicial", "baseline")
ALGORITHMS = ("vtrace", "ppo")
PPO_EPOCHS = 4  # PPO passes over each batch of unrolls


def agent_model_fn(agent, observation_shape, num_actions, observation_dtype="uint8",
                   **model_kwargs):
    """A zero-argument builder of the Keras 3 network named ``agent``.

    Pixel observations (uint8) are scaled to [0, 1] inside the network; other observations
    (e.g. BoxWorld's ``observation_type="one_hot"``) are used as they are unless
    ``model_kwargs`` sets ``input_scale``.
    """
    if np.dtype(observation_dtype) != np.uint8:
        model_kwargs.setdefault("input_scale", 1.0)
    builders = {"relational": boxworld_agents.relational_agent,
                "baseline": boxworld_agents.baseline_agent}
    if hasattr(boxworld_agents, "simplicial_agent"):
        builders["simplicial"] = boxworld_agents.simplicial_agent
    if agent not in builders:
        raise ValueError(f"`agent` must be one of {sorted(builders)}, received {agent!r}.")
    return functools.partial(builders[agent], observation_shape=tuple(observation_shape),
                             num_actions=num_actions, **model_kwargs)


def make_ppo_agent(time_step_spec, action_spec, model_fn, learning_rate, discount=0.99,
                   entropy_cost=0.005, gradient_clip_norm=40.0, num_epochs=PPO_EPOCHS,
                   train_step=None):
    """TF-Agents' ``PPOClipAgent`` with our Keras 3 network as actor and as value function.

    The actor and the value network are two copies of the same Keras 3 architecture (TF-Agents'
    PPO keeps them separate); the actor's logits become a ``tfp`` Categorical on the TF side.
    """
    import tensorflow_probability as tfp
    from tf_agents.agents.ppo import ppo_clip_agent

    actor_net = Keras3Network(
        time_step_spec.observation, model_fn, name="actor_network",
        output_fn=lambda outputs: tfp.distributions.Categorical(logits=outputs[0],
                                                                dtype=action_spec.dtype))
    value_net = Keras3Network(time_step_spec.observation, model_fn, name="value_network",
                              output_fn=lambda outputs: outputs[1])
    # Each copy trains one head only; freezing the other keeps it out of the optimised variables
    # (otherwise TensorFlow warns at every step that it gets no gradient).
    for net, unused_head in ((actor_net, "value_head"), (value_net, "policy_logits")):
        layer_names = {layer.name for layer in net.keras_model.layers}
        if unused_head in layer_names:
            net.keras_model.get_layer(unused_head).trainable = False
    return ppo_clip_agent.PPOClipAgent(
        time_step_spec, action_spec, optimizer=tf.keras.optimizers.Adam(learning_rate),
        actor_net=actor_net, value_net=value_net, importance_ratio_clipping=0.2,
        discount_factor=discount, entropy_regularization=entropy_cost, num_epochs=num_epochs,
        use_gae=True, normalize_observations=False, normalize_rewards=False,
        gradient_clipping=gradient_clip_norm, compute_value_and_advantage_in_train=True,
        update_normalizers_in_train=False, train_step_counter=train_step)


OPTIMIZERS = ("rmsprop", "adam")


def make_optimizer(name, learning_rate):
    """``"rmsprop"``: the papers' RMSProp (:func:`impala_rmsprop`); ``"adam"``: tf-keras Adam."""
    if name == "rmsprop":
        return impala_rmsprop(learning_rate)
    if name == "adam":
        return tf.keras.optimizers.Adam(learning_rate)
    raise ValueError(f"`optimizer` must be one of {OPTIMIZERS}, received {name!r}.")


def export_policies(tf_agent, policies_dir, train_step):
    """Writes PolicySaver SavedModels of the agent's policies *with their current weights*.

    TF-Agents' ``PolicySavedModelTrigger`` writes each SavedModel once, when it is created (so
    with the initial weights), and afterwards only variable checkpoints under
    ``policies_dir/checkpoints``; a SavedModel loaded from ``policies_dir/collect_policy`` would
    act with untrained weights. This replaces ``policy``, ``collect_policy`` and
    ``greedy_policy`` under ``policies_dir`` by exports of the current weights (each written
    next to the old one first, so an interrupted export never leaves a half-written policy),
    and writes the raw policy's checkpoint of this step where the trigger writes its own.
    """
    tf_agent.post_process_policy()  # what the trigger does before saving (a no-op here)
    raw = tf_agent.policy
    if isinstance(raw, greedy_policy.GreedyPolicy):
        raw = raw.wrapped_policy
    policies = {learner.RAW_POLICY_SAVED_MODEL_DIR: raw,
                learner.COLLECT_POLICY_SAVED_MODEL_DIR: tf_agent.collect_policy,
                learner.GREEDY_POLICY_SAVED_MODEL_DIR: greedy_policy.GreedyPolicy(raw)}
    for name, policy in policies.items():
        saver = policy_saver.PolicySaver(policy, train_step=train_step)
        path = os.path.join(policies_dir, name)
        partial = path + ".partial"
        shutil.rmtree(partial, ignore_errors=True)
        saver.save(partial)
        shutil.rmtree(path, ignore_errors=True)
        os.replace(partial, path)
        if name == learner.RAW_POLICY_SAVED_MODEL_DIR:
            saver.save_checkpoint(os.path.join(
                policies_dir, learner.POLICY_CHECKPOINT_DIR,
                f"policy_checkpoint_{int(train_step.numpy()):010d}"))


def _solve_rate(episodes):
    return float(np.mean([e.solved for e in episodes])) if episodes else float("nan")


def evaluate(policy, env_name, num_episodes, seed, max_batched_steps=10_000, **env_kwargs):
    """Plays ``num_episodes`` episodes with ``policy`` (a TF policy); returns the results."""
    num_envs = min(num_episodes, 32)
    env = make_boxworld_environment(env_name, num_envs=num_envs, seed=seed, **env_kwargs)
    py_policy = py_tf_eager_policy.PyTFEagerPolicy(policy, use_tf_function=True)
    timestep = env.reset()
    for _ in range(max_batched_steps):
        if len(env.finished_episodes) >= num_episodes:
            break
        timestep = env.step(py_policy.action(timestep).action)
    return env.finished_episodes[:num_episodes]


def train_eval(
    root_dir,
    env_name="original",
    agent="relational",
    algorithm="vtrace",
    env_kwargs=None,
    model_kwargs=None,
    num_iterations=10_000,
    num_envs=32,  # Zambaldi et al.: batches of 32 trajectories [P]
    unroll_length=40,  # Zambaldi et al.: unroll length 40 [P]
    learning_rate=2e-4,  # Zambaldi et al.: tuned in [1e-5, 2e-4] [P]
    discount=0.99,  # [P]
    entropy_cost=0.005,  # [P]
    baseline_cost=0.5,  # IMPALA default [A]
    gradient_clip_norm=40.0,  # [A]
    optimizer=None,
    reward_scale=1.0,
    vtrace_lambda=1.0,
    jit_compile=True,
    actor_jit_compile=None,
    checkpoint_interval=200,
    policy_save_interval=1000,
    log_interval=10,
    eval_interval=0,
    eval_episodes=100,
    eval_env_kwargs=None,
    test_presets=(),
    num_ray_actors=0,
    ray_address=None,
    weight_sync_interval=1,
    max_seconds=None,
    seed=0,
    print_fn=print,
):
    """Trains an agent on BoxWorld, evaluates it and exports its policy.

    Args:
        root_dir: output directory; re-running with the same directory resumes.
        env_name: ``"original"`` (Zambaldi et al.) or ``"bridge"`` (Clift et al.).
        agent: ``"relational"``, ``"simplicial"`` or ``"baseline"``.
        algorithm: ``"vtrace"`` (IMPALA-style V-trace actor-critic, RMSProp) or ``"ppo"``
            (TF-Agents' ``PPOClipAgent`` with our networks, Adam).
        env_kwargs: BoxWorld level parameters for training (e.g. ``dict(goal_length=(1, 2))``).
        model_kwargs: keyword arguments of the network builder in ``keras_relational.models``.
        num_iterations: learner steps; a V-trace step consumes ``num_envs * unroll_length``
            frames, PPO takes ``PPO_EPOCHS`` steps (one per epoch) over each such batch.
        num_envs, unroll_length: B and T of each training batch.
        learning_rate, discount, entropy_cost, baseline_cost, gradient_clip_norm: see
            :class:`VTraceAgent`.
        optimizer: ``"rmsprop"`` (the papers': epsilon 0.1, decay 0.99, momentum 0) or
            ``"adam"``; None: the algorithm's own (RMSProp for V-trace, Adam for PPO, which
            takes no other).
        reward_scale, vtrace_lambda: V-trace's reward multiplier and IMPALA's lambda (see
            :class:`VTraceAgent`); 1 and 1 are the papers' settings. V-trace only, like
            ``actor_jit_compile``: PPO raises a ValueError when any of them is changed.
        jit_compile: XLA-compile the learner's loss and gradients.
        actor_jit_compile: V-trace: act through an XLA-compiled forward pass (the in-process
            actor through a compiled copy of the collect policy, every Ray actor through its own
            compiled network; the exported collect policy stays uncompiled). None (default): on
            for V-trace; PPO takes only None or False. Measured on 2 cores at the papers' sizes
            (32 environments x 40 steps): 1.08-1.25x end-to-end frames/s for the relational
            agent on 14x14 BoxWorld and 1.24-1.27x for the simplicial agent on bridge BoxWorld
            (4 and 2 alternating pairs of runs; acting alone 1.2-1.7x faster in every pair).
            Ray actors, demo-sized relational agent: collection alone 1.08-1.49x, training end
            to end 0.98-1.16x (the learner is the bottleneck; ``benchmarks/ray_throughput.py``).
        checkpoint_interval, policy_save_interval: in learner steps.
        log_interval: learner steps between progress lines.
        eval_interval: learner steps between evaluations (0: only at the end).
        eval_episodes: episodes per evaluation; eval_env_kwargs: evaluation level parameters
            (defaults to ``env_kwargs``).
        test_presets: names of ``BoxWorld.PRESETS`` (e.g. ``"test_length_6"``,
            ``"test_heldout"``) evaluated zero-shot at the end of training (original BoxWorld;
            the room size of ``env_kwargs`` is kept).
        num_ray_actors: 0 steps ``num_envs`` environments in this process; N > 0 collects with
            N Ray actors instead, each with its own ``num_envs`` environments and policy copy
            (:class:`keras_relational.agents.ray_actors.RayActorFleet`; V-trace only; needs
            ``pip install "keras-relational[distributed]"``).
        ray_address: with Ray actors: None starts a local Ray, ``"auto"`` or ``"host:port"``
            joins a running cluster (``ray start --head``).
        weight_sync_interval: learner steps between weight broadcasts to the Ray actors.
        max_seconds: wall-clock budget of the training loop (None: none); training stops at the
            first progress line after it, then checkpoints, evaluates and exports as usual.
        seed: seeds TensorFlow, Keras and the environments.

    Returns:
        A dict with the final train step, frames, frames/s, solve rates, export paths,
        ``actor_jit_compile`` (whether the actors acted through an XLA-compiled forward pass),
        and ``history``: one dict per progress line (``step``, ``frames``, ``fps``, ``solve_rate``,
        ``seconds`` since the start, and ``acting_seconds`` / ``learning_seconds``: wall time
        in the actor's and the learner's ``run()`` since the previous line).
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"`algorithm` must be one of {ALGORITHMS}, received {algorithm!r}.")
    if num_ray_actors and algorithm != "vtrace":
        raise ValueError(f"`num_ray_actors` > 0 needs algorithm='vtrace' (V-trace corrects the "
                         f"actors' policy lag; PPO is on-policy), received {algorithm!r}.")
    if optimizer is not None and optimizer not in OPTIMIZERS:
        raise ValueError(f"`optimizer` must be one of {OPTIMIZERS} or None, received "
                         f"{optimizer!r}.")
    if algorithm == "ppo":
        ignored = {name: value for name, value, default in (
            ("optimizer", optimizer, "adam"), ("reward_scale", reward_scale, 1.0),
            ("vtrace_lambda", vtrace_lambda, 1.0), ("actor_jit_compile", actor_jit_compile, False),
        ) if value is not None and value != default}
        if ignored:
            raise ValueError(f"{sorted(ignored)} apply to algorithm='vtrace' only (PPO uses Adam "
                             f"and its own GAE), received algorithm='ppo' with {ignored}.")
    unknown = [p for p in test_presets if p not in environments.PRESETS]
    if unknown:
        raise ValueError(f"`test_presets` must name BoxWorld presets {sorted(environments.PRESETS)}"
                         f", received {unknown}.")
    if actor_jit_compile is None:
        actor_jit_compile = algorithm == "vtrace"
    actor_jit_compile = bool(actor_jit_compile)
    env_kwargs = dict(env_kwargs or {})
    eval_env_kwargs = dict(env_kwargs if eval_env_kwargs is None else eval_env_kwargs)
    import keras

    keras.utils.set_random_seed(seed)
    os.makedirs(root_dir, exist_ok=True)
    collect_env = make_boxworld_environment(env_name, num_envs=num_envs, seed=seed, **env_kwargs)
    observation_spec = collect_env.observation_spec()
    action_spec = collect_env.action_spec()
    num_actions = int(action_spec.maximum - action_spec.minimum + 1)
    from tf_agents.specs import tensor_spec

    time_step_spec = tensor_spec.from_spec(collect_env.time_step_spec())
    action_tensor_spec = tensor_spec.from_spec(action_spec)
    model_fn = agent_model_fn(agent, observation_spec.shape, num_actions,
                              observation_dtype=observation_spec.dtype, **(model_kwargs or {}))
    network = Keras3Network(time_step_spec.observation, model_fn, name=f"{agent}_network")

    train_step = train_utils.create_train_step()
    if algorithm == "vtrace":
        tf_agent = VTraceAgent(
            time_step_spec, action_tensor_spec, network,
            make_optimizer(optimizer or "rmsprop", learning_rate),
            discount=discount, entropy_cost=entropy_cost, baseline_cost=baseline_cost,
            gradient_clip_norm=gradient_clip_norm, reward_scale=reward_scale,
            lambda_=vtrace_lambda, jit_compile=jit_compile, train_step_counter=train_step)
    else:
        tf_agent = make_ppo_agent(time_step_spec, action_tensor_spec, model_fn, learning_rate,
                                  discount=discount, entropy_cost=entropy_cost,
                                  gradient_clip_norm=gradient_clip_norm, train_step=train_step)
    tf_agent.initialize()

    unrolls = UnrollQueue(tf_agent.collect_data_spec, num_envs, unroll_length)
    policies_dir = os.path.join(root_dir, learner.POLICY_SAVED_MODEL_DIR)
    agent_learner = learner.Learner(
        root_dir, train_step, tf_agent, experience_dataset_fn=unrolls.as_dataset,
        checkpoint_interval=checkpoint_interval, summary_interval=log_interval,
        triggers=[triggers.PolicySavedModelTrigger(policies_dir, tf_agent, train_step,
                                                   interval=policy_save_interval)])
    if num_ray_actors:  # IMPALA-style: remote actors feed `unrolls`, one unroll per run()
        from keras_relational.agents import ray_actors

        collect_actor = ray_actors.RayActorFleet(
            num_ray_actors, unrolls, network.keras_model, train_step, model_fn,
            env_name=env_name, env_kwargs=env_kwargs, num_envs=num_envs,
            unroll_length=unroll_length, data_spec=tf_agent.collect_data_spec, seed=seed,
            weight_sync_interval=weight_sync_interval, ray_address=ray_address,
            summary_dir=os.path.join(root_dir, "collect"), print_fn=print_fn,
            actor_jit_compile=actor_jit_compile)
        finished_episodes = collect_actor.finished_episodes
    else:
        acting_policy = tf_agent.collect_policy
        if actor_jit_compile:  # V-trace only (checked above)
            # The actor's own XLA-compiled copy of the collect policy (same variables); the
            # exported collect policy stays uncompiled.
            acting_policy = ActorCriticPolicy(time_step_spec, action_tensor_spec, network,
                                              jit_compile=True)
        collect_policy = py_tf_eager_policy.PyTFEagerPolicy(acting_policy, use_tf_function=True)
        collect_actor = actor.Actor(
            collect_env, collect_policy, train_step, steps_per_run=num_envs * unroll_length,
            observers=[unrolls], summary_dir=os.path.join(root_dir, "collect"),
            summary_interval=log_interval)
        finished_episodes = collect_env.finished_episodes
    summary_writer = tf.summary.create_file_writer(os.path.join(root_dir, "collect_extra"))
    eval_writer = tf.summary.create_file_writer(os.path.join(root_dir, "eval"))

    # TF-Agents' PPO counts one train step per epoch over each batch of unrolls.
    steps_per_batch = PPO_EPOCHS if algorithm == "ppo" else 1
    frames_per_step = num_envs * unroll_length / steps_per_batch
    start_step = int(train_step.numpy())
    if start_step:
        print_fn(f"Resuming from {root_dir}: train step {start_step}")
    print_fn(f"Training {agent} agent ({network.keras_model.count_params():,} parameters, "
             f"{algorithm}) on {env_name} BoxWorld: {num_envs} envs x {unroll_length} steps per "
             f"update, {num_iterations} updates")
    started = time.perf_counter()
    last_log_time, last_log_step, last_episode_count = started, start_step, 0
    history = []
    out_of_time = False
    # Wall time in the actor's run() (environments, policy, observers; with Ray actors: waiting
    # for an unroll) and in the learner's (dataset and train step), since the last progress line.
    acting_seconds = learning_seconds = 0.0

    def run_eval(step, name="eval", level_kwargs=None):
        level_kwargs = eval_env_kwargs if level_kwargs is None else level_kwargs
        episodes = evaluate(tf_agent.collect_policy, env_name, eval_episodes, seed + 10_000,
                            **level_kwargs)
        rate = _solve_rate(episodes)
        by_type = {}
        for episode in episodes:
            if episode.puzzle_type is not None:
                by_type.setdefault(tuple(episode.puzzle_type), []).append(episode)
        with eval_writer.as_default(step=step):
            tf.summary.scalar(f"{name}/solve_rate", rate)
            tf.summary.scalar(f"{name}/average_return",
                              np.mean([e.episode_return for e in episodes]))
            for puzzle_type, group in sorted(by_type.items()):
                label = "_".join(str(v) for v in puzzle_type)
                tf.summary.scalar(f"{name}/solve_rate_puzzle_{label}", _solve_rate(group))
        per_type = "".join(f", {t}: {100 * _solve_rate(g):.0f}% of {len(g)}"
                           for t, g in sorted(by_type.items()))
        print_fn(f"{name} @ step {step}: solved {100 * rate:.1f}% of {len(episodes)} episodes"
                 f"{per_type}")
        return rate

    try:
        while int(train_step.numpy()) < num_iterations and not out_of_time:
            tick = time.perf_counter()
            collect_actor.run()
            tock = time.perf_counter()
            while unrolls.qsize() and int(train_step.numpy()) < num_iterations:
                loss_info = agent_learner.run(iterations=1)
            acting_seconds += tock - tick
            learning_seconds += time.perf_counter() - tock
            step = int(train_step.numpy())
            if step - last_log_step >= log_interval or step >= num_iterations:
                now = time.perf_counter()
                fps = (step - last_log_step) * frames_per_step / max(now - last_log_time, 1e-9)
                recent = finished_episodes[last_episode_count:]
                solve_rate = _solve_rate(recent)
                mean_return = float(np.mean([e.episode_return for e in recent])) if recent \
                    else float("nan")
                with summary_writer.as_default(step=step):
                    tf.summary.scalar("frames_per_second", fps)
                    tf.summary.scalar("solve_rate", solve_rate)
                    tf.summary.scalar("average_return", mean_return)
                lag = (f" | policy lag {collect_actor.mean_policy_lag():4.1f}"
                       if num_ray_actors else "")
                acting_share = acting_seconds / max(acting_seconds + learning_seconds, 1e-9)
                print_fn(f"step {step:6d} | frames {int(step * frames_per_step):9d} | "
                         f"{fps:7.0f} frames/s | episodes {len(recent):4d} | "
                         f"return {mean_return:6.2f} | solved {100 * solve_rate:5.1f}% | "
                         f"loss {float(loss_info.loss):9.3f} | acting {100 * acting_share:3.0f}%"
                         f"{lag}")
                history.append(dict(step=step, frames=int(step * frames_per_step), fps=fps,
                                    solve_rate=solve_rate, seconds=now - started,
                                    acting_seconds=acting_seconds,
                                    learning_seconds=learning_seconds))
                acting_seconds = learning_seconds = 0.0
                last_log_time, last_log_step = now, step
                last_episode_count = len(finished_episodes)
                out_of_time = max_seconds is not None and now - started >= max_seconds
            if eval_interval and step % eval_interval == 0:
                run_eval(step)
    finally:
        unrolls.close()
        if num_ray_actors:
            collect_actor.close()

    step = int(train_step.numpy())
    agent_learner._checkpointer.save(train_step)  # the final state, whatever the interval
    eval_rate = run_eval(step) if eval_episodes else float("nan")
    test_rates = {}
    for preset in test_presets:
        if env_name != "original":
            raise ValueError(f"`test_presets` apply to the original BoxWorld, received "
                             f"env_name={env_name!r}.")
        preset_kwargs = dict(environments.PRESETS[preset])
        if "room_size" in env_kwargs:
            preset_kwargs["room_size"] = env_kwargs["room_size"]
        test_rates[preset] = run_eval(step, name=preset, level_kwargs=preset_kwargs)
    # PolicySaver exports of the raw, collect (sampling) and greedy policies with the final
    # weights and a policy checkpoint of the final step, and the Keras 3 model.
    export_policies(tf_agent, policies_dir, train_step)
    keras_model_dir = os.path.join(root_dir, "keras_model")
    network.keras_model.export(keras_model_dir, verbose=False)
    keras_file = os.path.join(root_dir, "keras_model.keras")  # reloadable with load_model
    network.keras_model.save(keras_file)
    elapsed = time.perf_counter() - started
    result = dict(
        train_step=step, frames=int(step * frames_per_step),
        frames_per_second=(step - start_step) * frames_per_step / max(elapsed, 1e-9),
        eval_solve_rate=eval_rate, test_solve_rates=test_rates, policies_dir=policies_dir,
        keras_model_dir=keras_model_dir, keras_file=keras_file,
        actor_jit_compile=actor_jit_compile, history=history)
    with open(os.path.join(root_dir, "result.json"), "w") as f:
        json.dump(result, f, indent=1)
    print_fn(f"done: step {step}, eval solve rate {100 * eval_rate:.1f}%, policies in "
             f"{policies_dir}, Keras model in {keras_model_dir}")
    # Release the generator-backed dataset iterator while Python is alive; left to interpreter
    # shutdown, TensorFlow fails to finalize it and prints a spurious error.
    agent_learner._experience_iterator = None
    del agent_learner
    gc.collect()
    return result
