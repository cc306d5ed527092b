"""Progress of a training run: a live bar, one line, TensorBoard scalars and a history entry.

Every actor/learner round updates a :class:`keras_relational.progress_bar.ProgressBar` (drawn
only on a terminal: updates, frames, frames/s, elapsed time and ETA); every ``log_interval``
updates a metric line is printed above it and the collect metrics TF-Agents users know go to
TensorBoard (``root_dir/collect``), whichever actor collected the episodes (in-process or Ray):

* ``Metrics/NumberOfEpisodes``: episodes finished since this process started;
* ``Metrics/EnvironmentSteps``: frames (environment steps over all levels) so far;
* ``Metrics/AverageReturn``, ``Metrics/AverageEpisodeLength``, ``Metrics/SolveRate``: over the
  episodes finished since the previous line (TF-Agents averages the last 10), not written when
  none finished;
* ``Metrics/EnvironmentStepsPerSecond``: frames/s since the previous line;
* ``Metrics/AverageReturn/EnvironmentSteps`` and ``Metrics/SolveRate/EnvironmentSteps``: the
  same values with the frame count as their step (TF-Agents' reference-metric convention), so
  TensorBoard plots them against frames.
"""

import time

import numpy as np

from keras_relational.agents.tf_agents.evaluation import solve_rate
from keras_relational.progress_bar import ProgressBar, frames_text, training_line

# The tags TF-Agents' Actor writes for its collect metrics (tf_agents.train.actor).
METRIC_TAGS = ("Metrics/NumberOfEpisodes", "Metrics/EnvironmentSteps", "Metrics/AverageReturn",
               "Metrics/AverageEpisodeLength", "Metrics/EnvironmentStepsPerSecond",
               "Metrics/SolveRate")


class Progress:
    """Reports training progress every ``config.log_interval`` learner steps (and at the end).

    Call :meth:`record` after every actor/learner round with the time spent acting and learning
    and the last loss. It redraws the progress bar; a report, triggered by TF-Agents'
    ``IntervalTrigger``, prints a progress line (frames/s, the return and solve rate of the
    episodes finished since the previous line, the loss, the share of time spent acting, the Ray
    actors' policy lag, the ETA), writes the collect metrics of the module docstring to
    ``summary_dir`` and appends a dict to :attr:`history`.

    Args:
        config: the run's :class:`~keras_relational.agents.config.TFAgentsConfig`.
        start_step: the train step the run starts (or resumes) from.
        finished_episodes: the list the actors append ``EpisodeResult`` s to.
        summary_dir: where the scalars go.
        print_fn: receives the progress lines.
        policy_lag_fn: None, or a callable returning the mean policy lag since its last call.
        bar: the :class:`ProgressBar` to update (None: a bar that is never drawn); lines go
            through its ``print`` so that they appear above it.
        last_report_step: the step of the last progress line before this piece (None:
            ``start_step``); the next line comes ``config.log_interval`` steps after it.
    """

    def __init__(self, config, start_step, finished_episodes, summary_dir, print_fn,
                 policy_lag_fn=None, bar=None, last_report_step=None):
        import tensorflow as tf
        from tf_agents.train import interval_trigger

        self._config = config
        self._finished_episodes = finished_episodes
        self._writer = tf.summary.create_file_writer(summary_dir)
        self._bar = bar if bar is not None else ProgressBar(
            config.num_iterations, "updates", start=start_step, print_fn=print_fn, live=False)
        self._print = self._bar.print if bar is not None else print_fn
        self._bar.restart_clock(start_step)  # the rate and ETA count the training loop only
        self._policy_lag_fn = policy_lag_fn
        self.started = time.perf_counter()
        self._start_step = start_step
        self._last_time, self._last_step, self._last_episode_count = self.started, start_step, 0
        # Wall time in the actor's run() (environments, policy, observers; with Ray actors:
        # waiting for an unroll) and in the learner's (dataset and train step) since the last line.
        self._acting_seconds = self._learning_seconds = 0.0
        self._step, self._loss = start_step, None
        self._trigger = interval_trigger.IntervalTrigger(
            config.log_interval, self._report,
            start=start_step if last_report_step is None else last_report_step)
        self.history = []
        self.out_of_time = False

    def record(self, step, acting_seconds, learning_seconds, loss):
        """Accounts one actor/learner round; reports when the interval has passed."""
        self._acting_seconds += acting_seconds
        self._learning_seconds += learning_seconds
        self._step, self._loss = step, loss
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        fps = (step - self._start_step) * self._config.frames_per_step / elapsed
        self._bar.update(step, frames_text(step, self._config.frames_per_step, fps))
        self._trigger(step, force_trigger=step >= self._config.num_iterations)

    def pending_episodes(self):
        """The episodes finished since the last report (the next report counts them)."""
        return self._finished_episodes[self._last_episode_count:]

    def _write_summaries(self, step, frames, fps, recent):
        import tensorflow as tf

        with self._writer.as_default(step=step):
            tf.summary.scalar("Metrics/NumberOfEpisodes", len(self._finished_episodes))
            tf.summary.scalar("Metrics/EnvironmentSteps", frames)
            tf.summary.scalar("Metrics/EnvironmentStepsPerSecond", fps)
            if recent:
                averages = {
                    "Metrics/AverageReturn": np.mean([e.episode_return for e in recent]),
                    "Metrics/AverageEpisodeLength": np.mean([e.length for e in recent]),
                    "Metrics/SolveRate": solve_rate(recent)}
                for tag, value in averages.items():
                    tf.summary.scalar(tag, value)
                for tag in ("Metrics/AverageReturn", "Metrics/SolveRate"):
                    tf.summary.scalar(f"{tag}/EnvironmentSteps", averages[tag], step=frames)
        self._writer.flush()

    def _report(self):
        step, frames_per_step = self._step, self._config.frames_per_step
        now = time.perf_counter()
        frames = int(step * frames_per_step)
        fps = (step - self._last_step) * frames_per_step / max(now - self._last_time, 1e-9)
        recent = self._finished_episodes[self._last_episode_count:]
        rate = solve_rate(recent)
        mean_return = float(np.mean([e.episode_return for e in recent])) if recent \
            else float("nan")
        self._write_summaries(step, frames, fps, recent)
        lag = self._policy_lag_fn() if self._policy_lag_fn is not None else None
        total = self._acting_seconds + self._learning_seconds
        acting_share = self._acting_seconds / max(total, 1e-9)
        self._print(training_line(step, frames, fps, len(recent), mean_return, rate, self._loss,
                                  acting_share, policy_lag=lag, eta=self._bar.eta()))
        self.history.append(dict(step=step, frames=frames, fps=fps,
                                 solve_rate=rate, average_return=mean_return,
                                 episodes=len(recent),
                                 seconds=now - self.started,
                                 acting_seconds=self._acting_seconds,
                                 learning_seconds=self._learning_seconds))
        self._acting_seconds = self._learning_seconds = 0.0
        self._last_time, self._last_step = now, step
        self._last_episode_count = len(self._finished_episodes)
        max_seconds = self._config.max_seconds
        self.out_of_time = max_seconds is not None and now - self.started >= max_seconds
