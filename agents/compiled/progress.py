"""Progress of a compiled run: the TF-Agents trainer's progress line, TensorBoard, a history.

The line is :func:`keras_relational.progress_bar.training_line`, as for
:class:`keras_relational.agents.tf_agents.progress.Progress`, so logs and ``result.json`` histories
of both trainers read alike. In the compiled loop environment steps, acting and learning run inside
one compiled call and cannot be timed apart: ``learning_seconds`` is the time in that call and
``acting_seconds`` the host's time around it (level banks, bookkeeping);
``benchmarks/compiled_vs_tf_agents.py`` measures the acting share of the compiled call itself.
The line's loss is the mean over the updates since the previous line (one update's summed
loss swings with the rewards of its unroll).
"""

import math
import time

from keras_relational.agents import curves
from keras_relational.agents.compiled.learning import LossInfo
from keras_relational.progress_bar import ProgressBar, frames_text, training_line

# Learner scalars written to TensorBoard (``train/Losses/<name>``) and ``curves.jsonl``
# (``losses``): each the mean over the updates since the previous line, ``loss_min`` and
# ``loss_max`` the extremes of the updates' losses (one update's summed loss swings by the
# rewards its unroll happens to hold; docs/rl.md).
LOSS_SCALARS = tuple(name for name in LossInfo._fields if name != "finite_parameters")


class Progress:
    """Accumulates the updates' metrics and reports every ``config.log_interval`` updates.

    The first update's line comes at once, whatever the interval. Every update redraws the
    progress bar (updates, frames, frames/s, elapsed time and ETA;
    drawn only on a terminal), as the TF-Agents trainer's; the lines are printed above it.

    Args:
        config: the run's config.
        start_step: the step the run starts (or resumes) from.
        writer: a :class:`~keras_relational.without_tensorflow.ScalarWriter` for the collect
            metrics (``root_dir/collect``: ``Metrics/*``) and ``loss_writer`` one for the loss
            terms.
        print_fn: receives the lines.
        bar: the :class:`~keras_relational.progress_bar.ProgressBar` to update (None: a bar that
            is never drawn); lines go through its ``print`` so that they appear above it.
    """

    def __init__(self, config, start_step, writer, loss_writer, print_fn, bar=None):
        self._config = config
        self._writer, self._loss_writer = writer, loss_writer
        self._bar = bar if bar is not None else ProgressBar(
            config.num_iterations, "updates", start=start_step, print_fn=print_fn, live=False)
        self._print = self._bar.print if bar is not None else print_fn
        self._bar.restart_clock(start_step)  # the rate and ETA count the training loop only
        self.started = time.perf_counter()
        self._last_time, self._last_step = self.started, start_step
        self._start_step = start_step
        self._reset_interval()
        self._episodes_total = 0  # episodes finished since this process started
        self.history = []
        self.out_of_time = False
        self.reached_stop_solve_rate = False

    def _reset_interval(self):
        self._episodes = self._solved = 0
        self._return_sum = 0.0
        self._acting_seconds = self._learning_seconds = 0.0
        self._loss_sums = dict.fromkeys(LOSS_SCALARS, 0.0)
        self._loss_extremes = [math.inf, -math.inf]
        self._updates = 0

    def record(self, step, metrics, host_seconds, update_seconds):
        """Accounts one update (``metrics``: a ``Metrics`` of NumPy scalars)."""
        self._episodes += int(metrics.episodes)
        self._solved += int(metrics.solved)
        self._return_sum += float(metrics.return_sum)
        self._acting_seconds += host_seconds
        self._learning_seconds += update_seconds
        self._updates += 1
        for name in LOSS_SCALARS:
            self._loss_sums[name] += float(getattr(metrics, name))
        self._loss_extremes = [min(self._loss_extremes[0], float(metrics.loss)),
                               max(self._loss_extremes[1], float(metrics.loss))]
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        fps = (step - self._start_step) * self._config.frames_per_step / elapsed
        self._bar.update(step, frames_text(step, self._config.frames_per_step, fps))
        if step == self._start_step + 1:
            # The ETA counts from the second update: the first one's time holds compilation
            # (TensorFlow compiles inside it), which would inflate the ETA many times over.
            self._bar.restart_clock(step)
        # The first update of a run (or piece) gets its line whatever the interval: it says
        # the loop runs, and its time (the first call) stands apart from the steady rate.
        if (step - self._last_step >= self._config.log_interval
                or step == self._start_step + 1 or step >= self._config.num_iterations):
            self._report(step, metrics)

    def _report(self, step, metrics):
        frames_per_step = self._config.frames_per_step
        now = time.perf_counter()
        fps = (step - self._last_step) * frames_per_step / max(now - self._last_time, 1e-9)
        rate = self._solved / self._episodes if self._episodes else math.nan
        mean_return = self._return_sum / self._episodes if self._episodes else math.nan
        frames = int(step * frames_per_step)
        self._episodes_total += self._episodes
        # TF-Agents' collect metrics under root_dir/collect, as the TF-Agents trainer writes
        # them (agents/tf_agents/progress.py), less Metrics/AverageEpisodeLength: the compiled
        # update does not count episode lengths. Averages only where an episode finished.
        collect = {"Metrics/NumberOfEpisodes": self._episodes_total,
                   "Metrics/EnvironmentSteps": frames,
                   "Metrics/EnvironmentStepsPerSecond": fps}
        averages = {"Metrics/AverageReturn": mean_return,
                    "Metrics/SolveRate": rate} if self._episodes else {}
        self._writer.scalars(step, {**collect, **averages})
        if averages:  # the same values with the frame count as their step
            self._writer.scalars(frames, {f"{tag}/EnvironmentSteps": value
                                          for tag, value in averages.items()})
        updates = max(self._updates, 1)
        losses = {name: total / updates for name, total in self._loss_sums.items()}
        losses.update(loss_min=self._loss_extremes[0], loss_max=self._loss_extremes[1])
        self._loss_writer.scalars(step, {f"Losses/{name}": value
                                         for name, value in losses.items()})
        # No acting share: acting runs inside the compiled update, where it cannot be timed
        # apart (the host's time around it is in the history as acting_seconds).
        self._print(training_line(step, frames, fps, self._episodes, mean_return, rate,
                                  losses["loss"], None, eta=self._bar.eta()))
        self.history.append(dict(step=step, frames=frames, fps=fps, solve_rate=rate,
                                 average_return=mean_return, episodes=self._episodes,
                                 seconds=now - self.started,
                                 acting_seconds=self._acting_seconds,
                                 learning_seconds=self._learning_seconds, losses=losses))
        self._reset_interval()
        self._last_time, self._last_step = now, step
        max_seconds = self._config.max_seconds
        self.out_of_time = max_seconds is not None and now - self.started >= max_seconds
        self.reached_stop_solve_rate = stop_solve_rate_frames(
            self.history[-1:], self._config) is not None


def stop_solve_rate_frames(rows, config):
    """Frames of the first counted row (:func:`keras_relational.agents.curves.counted_rows`) of
    ``rows`` (curve rows or history entries) that reaches ``config.stop_solve_rate``; None when
    none does or the config has none."""
    if config.stop_solve_rate is None:
        return None
    return curves.first_frames(curves.counted_rows(rows), config.stop_solve_rate)
