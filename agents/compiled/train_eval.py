"""Training of the Box-World agents with the compiled actor-learner loop.

``train_eval(root_dir, config)`` is ``python -m keras_relational.experiments.train_boxworld
--trainer=compiled``: tensor BoxWorlds (``keras_relational.environments.TensorBoxWorld`` /
``TensorBridgeBoxWorld``) step, act and learn in one compiled function per update
(:class:`~keras_relational.agents.compiled.loop.CompiledLoop`) under the Keras backend, JAX or
TensorFlow; it needs neither TensorFlow nor TF-Agents under JAX. Its outputs are those of
:func:`keras_relational.agents.tf_agents.train_eval.train_eval`: the same progress lines,
TensorBoard scalars under ``root_dir/train``, ``root_dir/collect`` and ``root_dir/eval``,
checkpoints under ``root_dir/train/checkpoints`` and the learning curve ``root_dir/curves.jsonl``
(:mod:`~keras_relational.agents.curves`; re-running with the same ``root_dir`` resumes, also after
``kill -9``, exactly where the uninterrupted run would be), evaluation on fresh levels, the Keras
model (``keras_model.keras``, and ``keras_model/`` via ``model.export`` where TensorFlow is
installed) and ``root_dir/result.json``. There are no TF-Agents policies (``policies_dir`` is
None).
"""

import os
import time

import numpy as np

from keras_relational import json_files, run_settings, validation, whole_files, without_tensorflow
from keras_relational.agents import config as config_lib
from keras_relational.agents.compiled import checkpointing, evaluation, levels, loop
from keras_relational.agents.compiled.config import CompiledConfig
from keras_relational.agents.compiled.progress import Progress, stop_solve_rate_frames
from keras_relational.agents.config import preset_environment, updated_config
from keras_relational.agents.curves import CurveFile
from keras_relational.agents.optimizers import make_optimizer
from keras_relational.environments.level_banks import DEFAULT_LEVEL_SOURCE
from keras_relational.progress_bar import ProgressBar


def tensor_environment(environment, level_source=DEFAULT_LEVEL_SOURCE):
    """The tensor BoxWorld of an environment config (``BoxWorldConfig`` / ``BridgeConfig``),
    drawing its level banks from ``level_source`` ("numpy" or "device")."""
    from keras_relational import environments

    tensor_class = (environments.TensorBoxWorld
                    if isinstance(environment, environments.BoxWorldConfig)
                    else environments.TensorBridgeBoxWorld)
    return tensor_class(config=environment, level_source=level_source)


def build_loop(config):
    """``(environment, model, loop.CompiledLoop)`` of a :class:`CompiledConfig`: the tensor
    environment, the config's network and optimizer, and the compiled update over them (under the
    current Keras random seed)."""
    from keras_relational.agents.networks import agent_model_fn

    environment = tensor_environment(config.environment, config.level_source)
    spec = environment.observation_spec()
    model = agent_model_fn(config.agent, spec.shape, environment.action_spec().num_values,
                           observation_dtype=spec.dtype, dtype_policy=config.dtype_policy,
                           **config.model_kwargs)()
    optimizer = make_optimizer(config.optimizer_name(), config.learning_rate,
                               config.dtype_policy)
    return environment, model, loop.CompiledLoop(environment, model, optimizer, config)


def load_initial_weights(model, path):
    """Sets ``model``'s weights to those of the Keras model file ``path`` (``initial_weights``),
    after checking that they are as many and of the same shapes, in order."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"`initial_weights` (--initial_weights): no file {path!r}.")
    import keras

    import keras_relational.layers  # noqa: F401  (registers the layers the file names)
    import keras_relational.models  # noqa: F401

    source = keras.saving.load_model(path, compile=False)
    if len(source.weights) != len(model.weights):
        raise ValueError(
            f"`initial_weights` (--initial_weights): {path} holds {len(source.weights)} weights, "
            f"the network {len(model.weights)}: another architecture (agent or network "
            f"arguments).")
    for index, (theirs, ours) in enumerate(zip(source.weights, model.weights, strict=True)):
        if tuple(theirs.shape) != tuple(ours.shape):
            raise ValueError(
                f"`initial_weights` (--initial_weights): weight {index} of {path} "
                f"({theirs.path}) has shape {tuple(theirs.shape)}, the network's "
                f"({ours.path}) {tuple(ours.shape)}: another architecture (agent or network "
                f"arguments).")
    model.set_weights(source.get_weights())


def make_config(config=None, env_name=None, env_kwargs=None, eval_env_kwargs=None,
                **hyperparameters):
    """A :class:`CompiledConfig` from ``config`` (None: the defaults; another trainer's config
    gives its shared fields) updated by ``hyperparameters``; ``env_name`` / ``env_kwargs`` /
    ``eval_env_kwargs`` as in ``keras_relational.agents.tf_agents.train_eval.make_config``."""
    if config is None:
        config = CompiledConfig()
    elif not isinstance(config, CompiledConfig):
        config = CompiledConfig.from_config(config)
    return updated_config(config, env_name, env_kwargs, eval_env_kwargs, **hyperparameters)


@run_settings.resumable(
    settings=lambda arguments: config_lib.resume_settings(make_config(**{
        k: v for k, v in arguments.items() if k != "print_fn"})),
    optimizer=config_lib.RESUME_OPTIMIZER, free=config_lib.RESUME_FREE,
    flag_names=config_lib.RESUME_FLAG_NAMES, retired=config_lib.RESUME_RETIRED["compiled"],
    introduced=config_lib.RESUME_INTRODUCED["compiled"])
def train_eval(root_dir, config=None, *, env_name=None, env_kwargs=None, eval_env_kwargs=None,
               print_fn=print, **hyperparameters):
    """Trains an agent on BoxWorld with the compiled loop, evaluates it and exports it.

    Arguments as :func:`keras_relational.agents.tf_agents.train_eval.train_eval` (``config`` may be
    another trainer's config, whose shared fields it takes). Returns the same dict (also written
    to ``root_dir/result.json``), with ``policies_dir`` None and ``trainer``/``backend`` added.
    With ``print_fn=print`` a live progress bar (updates, frames, frames/s, ETA) is drawn below
    the lines when standard output is a terminal.
    """
    config = make_config(config, env_name, env_kwargs, eval_env_kwargs, **hyperparameters)
    import keras

    keras.utils.set_random_seed(config.seed)
    os.makedirs(root_dir, exist_ok=True)
    environment, model, compiled = build_loop(config)
    optimizer = compiled.optimizer

    if config.initial_weights is not None and not checkpointing.checkpoints(root_dir):
        load_initial_weights(model, config.initial_weights)
        print_fn(f"Initial weights from {config.initial_weights}")
    banks = levels.LevelBanks.for_config(environment, config)
    state = compiled.initial_state(banks.bank)
    banks.record(config.num_envs)  # reset started levels 0..num_envs-1
    restored = checkpointing.restore(root_dir, state, warn=print_fn)
    start_step = 0
    if restored is not None:
        state, meta = restored
        start_step = meta["step"]
        if run_settings.changed("learning_rate"):  # allowed: over the restored optimizer's
            state["optimizer"] = [
                keras.ops.convert_to_tensor(config.learning_rate, variable.dtype)
                if variable.path.endswith("learning_rate") else value
                for variable, value in zip(optimizer.variables, state["optimizer"], strict=True)]
        banks.close()
        if start_step % config.updates_per_call:
            raise ValueError(
                f"`updates_per_call` (--updates_per_call={config.updates_per_call}) must divide "
                f"the step the run in {root_dir} resumes from, received train step "
                f"{start_step}.")
        banks = levels.LevelBanks.for_config(environment, config, **meta["banks"])
        print_fn(f"Resuming from {root_dir}: train step {start_step}")
    print_fn(f"Training {config.agent} agent ({model.count_params():,} parameters, "
             f"vtrace, compiled under {keras.backend.backend()}) on "
             f"{config.env_name} BoxWorld: {config.num_envs} envs x {config.unroll_length} "
             f"steps per update, {config.num_iterations} updates")
    # Compiled before the first update and timed apart (JAX; TensorFlow compiles in it).
    state, compile_seconds = compiled.compile(state, banks.bank)
    if compile_seconds is not None:
        print_fn(f"compiled the update in {compile_seconds:.1f} s")

    eval_writer = without_tensorflow.ScalarWriter(os.path.join(root_dir, "eval"))
    evaluators = {}  # name -> Evaluator (compiled once per run)
    eval_seed = validation.offset_seed("seed", config.seed, config_lib.EVAL_SEED_OFFSET)

    def run_eval(step, name="eval", eval_environment=config.evaluation_environment):
        if name not in evaluators:
            evaluators[name] = evaluation.Evaluator(
                tensor_environment(eval_environment), model,
                min(config.eval_episodes, config.eval_num_envs), eval_seed)
        solved, returns = evaluators[name](
            (state["trainable"], state["non_trainable"]), config.eval_episodes,
            eval_seed)
        rate = float(solved.mean())
        eval_writer.scalars(step, {f"{name}/solve_rate": rate,
                                   f"{name}/average_return": float(returns.mean())})
        print_fn(f"{name} @ step {step}: solved {100 * rate:.1f}% of {len(solved)} episodes")
        return rate

    bar = None
    if print_fn is print:  # lines go above the bar (drawn on a terminal only)
        bar = ProgressBar(config.num_iterations, "updates", start=start_step)
        print_fn = bar.print
    writers = [without_tensorflow.ScalarWriter(os.path.join(root_dir, name))
               for name in ("collect", "train")]
    progress = Progress(config, start_step, *writers, print_fn, bar)
    curve = CurveFile(root_dir, start_step)  # the learning curve across resumed pieces
    step = start_step
    # A run that reached its stop_solve_rate is finished: a re-run trains no more.
    stopped = stop_solve_rate_frames(curve.rows, config) is not None

    def save():
        checkpointing.save(root_dir, state, dict(step=step, banks=banks.position))

    try:
        while step < config.num_iterations and not progress.out_of_time and not stopped:
            tick = time.perf_counter()
            bank = banks.for_update()
            tock = time.perf_counter()
            state, metrics = compiled.update(state, bank)
            metrics = type(metrics)(*(keras.ops.convert_to_numpy(m) for m in metrics))
            done = time.perf_counter()
            per_update = [metrics] if config.updates_per_call == 1 else [
                type(metrics)(*(m[i] for m in metrics)) for i in range(config.updates_per_call)]
            for metrics in per_update:  # the call's updates, in order
                check_finite(root_dir, step + 1, metrics, optimizer)  # before any save
                banks.record(metrics.levels_started)
                step += 1
                host_seconds = (tock - tick) + (time.perf_counter() - done)
                lines = len(progress.history)
                progress.record(step, metrics, host_seconds / len(per_update),
                                (done - tock) / len(per_update))
                if len(progress.history) > lines:
                    curve.append(progress.history[-1])
            stopped = progress.reached_stop_solve_rate
            if stopped:
                print_fn(f"stop_solve_rate {config.stop_solve_rate:g} reached at step {step} "
                         f"(training solve rate over the last progress line's episodes): "
                         f"training stops")
            if step % config.checkpoint_interval == 0:
                save()
            if config.eval_interval and step % config.eval_interval == 0:
                run_eval(step)
    finally:
        if bar is not None:
            bar.close()
        banks.close()
    save()  # the final state, any interval
    eval_rate = run_eval(step) if config.eval_episodes else float("nan")
    test_rates = {preset: run_eval(step, preset, preset_environment(config.environment, preset))
                  for preset in config.test_presets}
    compiled.assign_to_model(state)
    print_fn(f"exporting the Keras model to {root_dir}")  # the export takes a while, silently
    keras_model_dir, keras_file, export_note = export_keras_model(model, root_dir)
    elapsed = time.perf_counter() - progress.started
    frames_per_second = (step - start_step) * config.frames_per_step / max(elapsed, 1e-9)
    history = progress.history
    if step == start_step:  # a re-run of a finished run trains nothing: keep its figures
        previous = read_result(root_dir)
        frames_per_second = previous.get("frames_per_second", frames_per_second)
        history = previous.get("history", history)
    result = dict(
        train_step=step, frames=int(step * config.frames_per_step),
        frames_per_second=frames_per_second,
        eval_solve_rate=eval_rate, test_solve_rates=test_rates, policies_dir=None,
        keras_model_dir=keras_model_dir, keras_file=keras_file, actor_jit_compile=True,
        trainer="compiled", backend=keras.backend.backend(), dtype_policy=config.dtype_policy,
        export_note=export_note,
        # Frames at the progress line that reached stop_solve_rate (None: not reached, or none).
        stopped_at_solve_rate=stop_solve_rate_frames(curve.rows, config),
        history=history)
    json_files.write_json(os.path.join(root_dir, "result.json"), result)  # NaN as null
    # The evaluation samples the policy: `play_boxworld --model=<keras_file> --nogreedy` plays
    # as it was evaluated (the default, greedy argmax, can repeat a move forever on a level).
    print_fn(f"done: step {step}, eval solve rate {100 * eval_rate:.1f}% (sampled actions), "
             f"Keras model in {keras_file}")
    return result


def read_result(root_dir):
    """The run's last ``result.json`` as a dict ({} when there is none or it does not parse)."""
    import json

    try:
        with open(os.path.join(root_dir, "result.json")) as f:
            previous = json.load(f)
    except (OSError, ValueError):
        return {}
    return previous if isinstance(previous, dict) else {}


class NonFiniteLossError(FloatingPointError):
    """An update's loss, gradient or weights became non-finite; the run stopped before saving."""


def check_finite(root_dir, update, metrics, optimizer):
    """Raises :class:`NonFiniteLossError` naming ``update`` when its loss or gradient norm is
    not finite, or it left a non-finite weight; the state of that update is never saved, so the
    newest checkpoint under ``root_dir`` stays the last good one.

    Under a ``LossScaleOptimizer`` (``mixed_float16``) a non-finite loss or gradient is the
    optimizer's signal to skip the step and lower its scale (Micikevicius et al. 2018, Sec. 3.2):
    only non-finite weights stop the run there.
    """
    import keras

    loss, norm = float(metrics.loss), float(metrics.gradient_norm)
    loss_scaling = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
    bad = [] if loss_scaling else [f"{name} {value}" for name, value in (
        ("loss", loss), ("gradient norm", norm)) if not np.isfinite(value)]
    if not metrics.finite_parameters:
        bad.append("a non-finite weight after the step")
    if not bad:
        return
    newest = checkpointing.checkpoints(root_dir)
    kept = (f"the newest checkpoint, {newest[-1]}, is the last good one and was kept"
            if newest else "no checkpoint had been written yet")
    raise NonFiniteLossError(
        f"Training stopped at update {update}: {', '.join(bad)} (loss terms: policy gradient "
        f"{float(metrics.policy_gradient_loss)}, value {float(metrics.value_loss)}, entropy "
        f"{float(metrics.entropy)}). Its state was not saved; {kept}. Lower `learning_rate` or "
        f"`reward_scale`, or set `gradient_clip_norm`, and resume from {root_dir}.")


def export_keras_model(model, root_dir):
    """Writes ``root_dir/keras_model.keras`` and, where TensorFlow is installed,
    ``root_dir/keras_model`` (``model.export``, a SavedModel); both replace older ones whole.

    Returns ``(keras_model_dir or None, keras_file, note)``.
    """
    keras_file = whole_files.write_whole(os.path.join(root_dir, "keras_model.keras"), model.save)
    if not without_tensorflow.tensorflow_installed():
        return None, keras_file, without_tensorflow.SAVED_MODEL_SKIPPED
    keras_model_dir = whole_files.write_whole(os.path.join(root_dir, "keras_model"),
                                              lambda path: model.export(path, verbose=False))
    return keras_model_dir, keras_file, None


__all__ = ["CompiledConfig", "NonFiniteLossError", "make_config", "read_result", "train_eval"]
