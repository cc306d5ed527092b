"""The pictures behind ``plot_results`` and ``plot_attention``: learning curves of any training
run and a Box-World agent's attention over a frame (matplotlib, imported only when drawing).

* :func:`read_scalars` / :func:`plot_learning_curves`: every scalar of a run's TensorBoard
  event files; a Box-World run's solve rate and return against frames and wall time.
* :func:`plot_transfer_curves`: held-out accuracy against batches of each stage of a transfer
  protocol, a panel per architecture (Shanahan et al. 2020, Figs. 4-5 style).
* :func:`plot_agent_attention`: a relational agent's attention (Zambaldi et al. 2019, Fig. 4
  style) or a 2-simplicial agent's (Clift et al. 2020, Figs. 7 and 11-13 style) over the frame
  a greedy rollout on a fresh level reaches.
"""

import json
import math
import os
import textwrap

import numpy as np

INSTALL_HINT = 'pip install "keras-relational[plots]"  (matplotlib)'
_EVENT_PREFIX = "events.out.tfevents"


def read_scalars(root_dir):
    """Every scalar of the TensorBoard event files under ``root_dir``.

    Returns:
        ``{run: {tag: (steps, values, wall_times)}}`` (NumPy arrays sorted by step), ``run``
        being the sub-directory relative to ``root_dir`` (``"."`` for ``root_dir`` itself).
    """
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.util import tensor_util

    if not os.path.isdir(root_dir):
        raise FileNotFoundError(f"`root_dir` must be a directory, received {root_dir!r}.")
    runs = {}
    for directory, _, files in sorted(os.walk(root_dir)):
        if not any(name.startswith(_EVENT_PREFIX) for name in files):
            continue
        accumulator = event_accumulator.EventAccumulator(
            directory, size_guidance={event_accumulator.TENSORS: 0,
                                      event_accumulator.SCALARS: 0})
        accumulator.Reload()
        tags = accumulator.Tags()
        series = {}
        for tag in tags.get(event_accumulator.TENSORS, []):
            events = accumulator.Tensors(tag)
            values = [tensor_util.make_ndarray(e.tensor_proto) for e in events]
            if events and all(np.size(v) == 1 for v in values):  # scalars only
                series[tag] = [(e.step, float(np.ravel(v)[0]), e.wall_time)
                               for e, v in zip(events, values, strict=True)]
        for tag in tags.get(event_accumulator.SCALARS, []):
            series[tag] = [(e.step, e.value, e.wall_time) for e in accumulator.Scalars(tag)]
        run = os.path.relpath(directory, root_dir)
        for tag, points in series.items():
            points.sort()
            runs.setdefault(run, {})[tag] = tuple(np.array(column) for column in zip(*points,
                                                                                      strict=True))
    return runs


def _figure(rows, cols):
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError(f"plot_results draws with matplotlib, which is not installed: "
                          f"{INSTALL_HINT}.") from error
    figure = Figure(figsize=(5 * cols, 3.4 * rows))
    axes = figure.subplots(rows, cols, squeeze=False)
    return figure, axes


def _save(figure, path):
    """Writes the PNG atomically (a temporary file, then a rename)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    figure.tight_layout()
    temporary = f"{path}.tmp{os.getpid()}"
    figure.savefig(temporary, format="png", dpi=100)
    os.replace(temporary, path)
    return path


def _boxworld_curves(runs, root_dir):
    """``{"frames", "seconds", "solve_rate", "returns", "eval"}`` of a Box-World run, or None.

    The collect metrics give the training curves (no points before the first finished
    episode); every ``<name>/solve_rate`` of ``eval/`` is an evaluation, placed at the frames
    of its step. Without collect metrics: ``result.json``'s history, if any.
    """
    collect = runs.get("collect", {})
    if "Metrics/EnvironmentSteps" in collect:
        env_steps, frames_at, env_wall = collect["Metrics/EnvironmentSteps"]
        start = min(w.min() for _, _, w in collect.values())
        empty = (np.zeros(0), np.zeros(0), np.zeros(0))
        steps, rates, wall = collect.get("Metrics/SolveRate", empty)
        _, returns, _ = collect.get("Metrics/AverageReturn", empty)
        curves = dict(frames=np.interp(steps, env_steps, frames_at), seconds=wall - start,
                      solve_rate=rates, returns=returns)
        curves["eval"] = [
            (tag.rsplit("/", 1)[0], np.interp(eval_steps, env_steps, frames_at),
             eval_wall - start, values)
            for tag, (eval_steps, values, eval_wall) in sorted(runs.get("eval", {}).items())
            if tag.endswith("/solve_rate")]
        return curves
    result_file = os.path.join(root_dir, "result.json")
    if os.path.exists(result_file):
        with open(result_file) as f:
            history = json.load(f).get("history", [])
        if history:
            return dict(frames=np.array([h["frames"] for h in history]),
                        seconds=np.array([h["seconds"] for h in history]),
                        solve_rate=np.array([h["solve_rate"] for h in history]),
                        returns=None, eval=[])
    return None


def plot_learning_curves(root_dir, output=None, max_panels=12):
    """Draws the learning curves of the run in ``root_dir`` to a PNG; returns its path.

    Args:
        root_dir: a training run's output directory.
        output: the PNG (default: ``root_dir/learning_curves.png``).
        max_panels: at most this many panels for a run that is not a Box-World run.
    """
    output = output or os.path.join(root_dir, "learning_curves.png")
    runs = read_scalars(root_dir)
    curves = _boxworld_curves(runs, root_dir)
    if curves is not None:
        rows = 2 if curves["returns"] is not None else 1
        figure, axes = _figure(rows, 2)
        panels = [("solve_rate", "solve rate (collected episodes)")]
        if curves["returns"] is not None:
            panels.append(("returns", "average return (collected episodes)"))
        for row, (key, label) in enumerate(panels):
            for col, (x_key, x_label, scale) in enumerate(
                    (("frames", "frames", 1.0), ("seconds", "wall time (minutes)", 1 / 60))):
                axis = axes[row, col]
                axis.plot(curves[x_key] * scale, curves[key], label="training")
                if key == "solve_rate":
                    for name, frames, seconds, values in curves["eval"]:
                        x = frames if x_key == "frames" else seconds
                        axis.plot(x * scale, values, "o", label=name)
                    axis.set_ylim(-0.02, 1.02)
                axis.set_xlabel(x_label)
                axis.set_ylabel(label)
                axis.grid(alpha=0.3)
                if key == "solve_rate" and curves["eval"]:
                    axis.legend(fontsize=8)
        figure.suptitle(os.path.basename(os.path.abspath(root_dir)))
        return _save(figure, output)
    series = [(f"{run}: {tag}" if run != "." else tag, data)
              for run, tags in sorted(runs.items()) for tag, data in sorted(tags.items())]
    if not series:
        raise ValueError(f"No TensorBoard scalars or result.json history under `root_dir` "
                         f"{root_dir!r}: is it a training run's output directory?")
    series = series[:max_panels]
    cols = min(3, len(series))
    figure, axes = _figure(math.ceil(len(series) / cols), cols)
    for axis in axes.flat[len(series):]:
        axis.set_visible(False)
    for axis, (name, (steps, values, _)) in zip(axes.flat, series, strict=False):
        axis.plot(steps, values, marker="." if len(steps) < 30 else None)
        axis.set_title(name, fontsize=9)
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
    return _save(figure, output)


def plot_transfer_curves(curves, output, title="", target_accuracy=0.9):
    """Draws the curves of a transfer protocol, a panel per architecture; returns the PNG path.

    Args:
        curves: ``{architecture: {stage label: [(batch, accuracy), ...]}}`` (e.g. stage 1 from
            scratch, stage 3 reusing the pre-trained central module, stage 4 reusing only the
            input CNN, as in Shanahan et al. 2020, Fig. 4).
        output: the PNG to write (atomically).
        title: the figure's title.
        target_accuracy: a dashed horizontal line (the paper's 90 %); ``None`` for none.
    """
    if not curves:
        raise ValueError("`curves`: expected at least one architecture's curves, received none.")
    figure, axes = _figure(1, len(curves))
    for axis, (architecture, stages) in zip(axes.flat, curves.items(), strict=True):
        for label, points in stages.items():
            if points:
                batches, accuracies = zip(*points, strict=True)
                axis.plot(batches, accuracies, label=label)
        if target_accuracy is not None:
            axis.axhline(target_accuracy, color="grey", linestyle="--", linewidth=0.8)
        axis.set_ylim(0.4, 1.01)
        axis.set_title(architecture)
        axis.set_xlabel("batches")
        axis.set_ylabel("held-out accuracy")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    if title:  # wrapped to the figure's width (5 inches a panel)
        figure.suptitle(textwrap.fill(title, 48 * len(curves)), fontsize=10)
    return _save(figure, output)


BRIDGE_FRAME = (7, 10)  # Clift et al. 2020, Sec. 3: 7 rows, 9 columns + inventory


def make_environment(observation_shape, seed, goal_length=(1, 2), num_distractors=(0, 1)):
    """The Box-World whose observations the network takes (see the module docstring)."""
    from keras_relational import environments

    height, width, channels = observation_shape
    observation_type = "rgb" if channels == 3 else "one_hot"
    if (height, width) == BRIDGE_FRAME:
        return environments.BridgeBoxWorld(observation_type=observation_type, seed=seed)
    if height != width:
        raise ValueError(f"The network's input {observation_shape} is neither a bridge "
                         f"Box-World frame {BRIDGE_FRAME} nor a square Box-World frame.")
    return environments.BoxWorld(goal_length=tuple(goal_length),
                                 num_distractors=tuple(num_distractors), room_size=height - 2,
                                 observation_type=observation_type, seed=seed)


def reach_frame(model, env, steps):
    """Resets ``env`` and plays ``steps`` greedy steps; returns ``(observation, frame)``."""
    observation = env.reset().observation
    for _ in range(steps):
        logits = model(observation[None])[0]
        timestep = env.step(int(np.argmax(np.asarray(logits)[0])))
        if timestep.last():
            break
        observation = timestep.observation
    return observation, env.render()


def plot_agent_attention(model, output, seed=0, steps=0, goal_length=(1, 2),
                         num_distractors=(0, 1), block=-1, source_entity=None,
                         query_entity=None):
    """Draws the attention of a relational or 2-simplicial agent over a frame; returns the path."""
    import matplotlib

    matplotlib.use("Agg")  # a file, never a window
    from keras_relational.analysis import boxworld_attention, simplicial_attention

    names = {layer.name for layer in model.layers}
    env = make_environment(tuple(model.inputs[0].shape[1:]), seed, goal_length, num_distractors)
    observation, frame = reach_frame(model, env, steps)
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    temporary = f"{output}.tmp{os.getpid()}.png"
    if "simplicial_block" in names:
        scores = simplicial_attention.attention_maps(model, observation[None])
        entities = model.get_layer("entities").output.shape[1]
        stem = model.get_layer("entities").input.shape  # [B, rows, cols, F]
        if stem[1] * stem[2] != entities:
            raise ValueError(f"Unexpected entity grid {stem} for {entities} entities.")
        figure = simplicial_attention.plot_simplicial_attention(
            frame, scores, feature_shape=(stem[1], stem[2]), query_entity=query_entity)
    elif "relational_module" in names:
        weights = boxworld_attention.attention_maps(model, observation[None])[0, block]
        stem = model.get_layer("entities").input.shape
        if source_entity is None:  # the agent's own cell (same padding: one entity a cell)
            row, col = env.agent_position
            source_entity = int(row) * stem[2] + int(col)
        figure = boxworld_attention.plot_attention(frame, weights, source_entity,
                                                   feature_shape=(stem[1], stem[2]))
    else:
        raise ValueError(f"`model` {model.name!r} has no attention to draw: neither a "
                         "'relational_module' nor a 'simplicial_block' layer (the baseline "
                         "agent has none).")
    figure.savefig(temporary, dpi=100)
    os.replace(temporary, output)
    return output
