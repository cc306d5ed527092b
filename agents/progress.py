"""Progress of a training run: one line, TensorBoard scalars and a history entry per interval."""

import time

import numpy as np
import tensorflow as tf
from tf_agents.train import interval_trigger

from keras_relational.agents.evaluation import solve_rate


class Progress:
    """Reports training progress every ``config.log_interval`` learner steps (and at the end).

    Call :meth:`record` after every actor/learner round with the time spent acting and learning
    and the last loss. A report, triggered by TF-Agents' ``IntervalTrigger``, prints a progress
    line (frames/s, the return and solve rate of the episodes finished since the previous line,
    the loss, the share of time spent acting, the Ray actors' policy lag), writes
    ``frames_per_second``, ``solve_rate`` and ``average_return`` to ``summary_dir`` and appends a
    dict to :attr:`history`.

    Args:
        config: the run's :class:`TrainConfig`.
        start_step: the train step the run starts (or resumes) from.
        finished_episodes: the list the actors append ``EpisodeResult`` s to.
        summary_dir: where the scalars go.
        print_fn: receives the progress lines.
        policy_lag_fn: None, or a callable returning the mean policy lag since its last call.
    """

    def __init__(self, config, start_step, finished_episodes, summary_dir, print_fn,
                 policy_lag_fn=None):
        self._config = config
        self._finished_episodes = finished_episodes
        self._writer = tf.summary.create_file_writer(summary_dir)
        self._print = print_fn
        self._policy_lag_fn = policy_lag_fn
        self.started = time.perf_counter()
        self._last_time, self._last_step, self._last_episode_count = self.started, start_step, 0
        # Wall time in the actor's run() (environments, policy, observers; with Ray actors:
        # waiting for an unroll) and in the learner's (dataset and train step) since the last line.
        self._acting_seconds = self._learning_seconds = 0.0
        self._step, self._loss = start_step, None
        self._trigger = interval_trigger.IntervalTrigger(config.log_interval, self._report,
                                                         start=start_step)
        self.history = []
        self.out_of_time = False

    def record(self, step, acting_seconds, learning_seconds, loss):
        """Accounts one actor/learner round; reports when the interval has passed."""
        self._acting_seconds += acting_seconds
        self._learning_seconds += learning_seconds
        self._step, self._loss = step, loss
        self._trigger(step, force_trigger=step >= self._config.num_iterations)

    def _report(self):
        step, frames_per_step = self._step, self._config.frames_per_step
        now = time.perf_counter()
        fps = (step - self._last_step) * frames_per_step / max(now - self._last_time, 1e-9)
        recent = self._finished_episodes[self._last_episode_count:]
        rate = solve_rate(recent)
        mean_return = float(np.mean([e.episode_return for e in recent])) if recent \
            else float("nan")
        with self._writer.as_default(step=step):
            tf.summary.scalar("frames_per_second", fps)
            tf.summary.scalar("solve_rate", rate)
            tf.summary.scalar("average_return", mean_return)
        lag = (f" | policy lag {self._policy_lag_fn():4.1f}"
               if self._policy_lag_fn is not None else "")
        total = self._acting_seconds + self._learning_seconds
        acting_share = self._acting_seconds / max(total, 1e-9)
        self._print(f"step {step:6d} | frames {int(step * frames_per_step):9d} | "
                    f"{fps:7.0f} frames/s | episodes {len(recent):4d} | "
                    f"return {mean_return:6.2f} | solved {100 * rate:5.1f}% | "
                    f"loss {float(self._loss):9.3f} | acting {100 * acting_share:3.0f}%{lag}")
        self.history.append(dict(step=step, frames=int(step * frames_per_step), fps=fps,
                                 solve_rate=rate, average_return=mean_return,
                                 seconds=now - self.started,
                                 acting_seconds=self._acting_seconds,
                                 learning_seconds=self._learning_seconds))
        self._acting_seconds = self._learning_seconds = 0.0
        self._last_time, self._last_step = now, step
        self._last_episode_count = len(self._finished_episodes)
        max_seconds = self._config.max_seconds
        self.out_of_time = max_seconds is not None and now - self.started >= max_seconds
