"""A console progress bar for long loops: training binaries, benchmarks, reproduction scripts.

Pure Python, no dependency. On a terminal (``stream.isatty()``) the bar is one line redrawn in
place with a carriage return; other lines printed through :meth:`ProgressBar.print` appear above
it. Anywhere else (a pipe, a log file, a notebook's captured output) no bar is drawn and
:meth:`ProgressBar.print` just prints, so logs hold plain lines only.

Example::

    bar = ProgressBar(total=1600, unit="updates")
    for update in range(1, 1601):
        ...
        bar.update(update, f"{update * 320:,} frames")
        if update % 100 == 0:
            bar.print(f"update {update}: loss {loss:.3f}")
    bar.close()
"""

import sys
import time


def format_duration(seconds):
    """``"1:02:03"`` / ``"2:03"`` for a number of seconds; ``"?"`` when unknown."""
    if seconds is None or seconds != seconds or seconds == float("inf") or seconds < 0:
        return "?"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def eta_seconds(done, total, elapsed, start=0):
    """Seconds left at the mean rate since ``start``; None before the first unit is done."""
    if done <= start or elapsed <= 0:
        return None
    return (total - done) * elapsed / (done - start)


class ProgressBar:
    """A live ``[#####.....] done/total unit | extra | elapsed | ETA`` line on a terminal.

    Args:
        total: the count the loop runs to (e.g. ``num_iterations``).
        unit: what is counted, shown after the count.
        start: the count the loop starts from (a resumed run); the rate and ETA count from it.
        stream: where the bar goes (default ``sys.stdout``); no bar unless it is a terminal.
        print_fn: prints the lines of :meth:`print` (default ``print``).
        min_interval: seconds between redraws (a redraw costs a write system call).
        width: characters of the bar itself.
        live: force the bar on (True) or off (False); None: on when ``stream`` is a terminal.
    """

    def __init__(self, total, unit="steps", start=0, stream=None, print_fn=print,
                 min_interval=0.2, width=24, live=None):
        self.total = max(int(total), 0)
        self.unit = unit
        self.start = int(start)
        self._stream = stream if stream is not None else sys.stdout
        self._print = print_fn
        self._min_interval = min_interval
        self._width = width
        if live is None:
            isatty = getattr(self._stream, "isatty", None)
            live = bool(isatty and isatty())
        self.live = live
        self.started = time.perf_counter()
        self._done, self._extra = self.start, ""
        self._last_draw = -float("inf")
        self._shown = False

    def restart_clock(self, start=None):
        """Measures the rate (and the ETA) from now and from ``start`` (default: unchanged)."""
        self.started = time.perf_counter()
        if start is not None:
            self.start = self._done = int(start)

    def eta(self):
        """Seconds left at the mean rate so far (None before the first unit)."""
        return eta_seconds(self._done, self.total, time.perf_counter() - self.started,
                           self.start)

    def text(self):
        """The bar's line (without the carriage return)."""
        fraction = min(self._done / self.total, 1.0) if self.total else 1.0
        filled = int(round(fraction * self._width))
        parts = [f"[{'#' * filled}{'.' * (self._width - filled)}] "
                 f"{self._done}/{self.total} {self.unit}"]
        if self._extra:
            parts.append(self._extra)
        parts.append(f"{format_duration(time.perf_counter() - self.started)} elapsed")
        parts.append(f"ETA {format_duration(self.eta())}")
        return " | ".join(parts)

    def update(self, done, extra="", force=False):
        """Sets the count (and the ``extra`` text after it) and redraws if it is time to."""
        self._done, self._extra = int(done), extra
        if not self.live:
            return
        now = time.perf_counter()
        if force or now - self._last_draw >= self._min_interval or done >= self.total:
            self._last_draw = now
            self._draw()

    def _draw(self):
        self._stream.write("\r\033[K" + self.text())
        self._stream.flush()
        self._shown = True

    def _clear(self):
        if self._shown:
            self._stream.write("\r\033[K")
            self._stream.flush()
            self._shown = False

    def print(self, line):
        """Prints ``line`` above the bar (plainly when there is no bar)."""
        if not self.live:
            self._print(line)
            return
        self._clear()
        self._print(line)
        self._draw()

    def close(self):
        """Leaves the last state of the bar on its own line (nothing when there is no bar)."""
        if self.live and self._shown:
            self._draw()
            self._stream.write("\n")
            self._stream.flush()
            self._shown = False
        self.live = False


def progress_lines(iterable, total, unit="runs", print_fn=print, describe=None):
    """Yields the items of ``iterable``; after each one, prints a line with the count done,
    the elapsed time and the ETA (for scripts whose runs print their own progress, e.g. Keras').

    Example: ``for task in progress_lines(tasks, len(tasks), describe=str): train(task)``
    prints ``runs 1/3 done (same) | 2:10 elapsed | ETA 4:20`` after the first training.
    """
    bar = ProgressBar(total, unit, print_fn=print_fn, live=False)
    for done, item in enumerate(iterable, 1):
        yield item
        bar.update(done)
        about = f" ({describe(item)})" if describe is not None else ""
        bar.print(f"{unit} {done}/{total} done{about} | "
                  f"{format_duration(time.perf_counter() - bar.started)} elapsed | "
                  f"ETA {format_duration(bar.eta())}")


def frames_text(step, frames_per_step, fps):
    """A training bar's middle part: ``"102,400 frames | 1,850 frames/s"``."""
    return f"{int(step * frames_per_step):,} frames | {fps:,.0f} frames/s"


_NOT_SHOWN = object()


def training_line(step, frames, fps, episodes, mean_return, solve_rate, loss, acting_share,
                  policy_lag=None, eta=_NOT_SHOWN):
    """One metric line of an RL training run, the same for every trainer.

    ``step 1600 | frames 512000 | 880 frames/s | episodes 232 | return 9.39 | solved 85.3% |
    loss -2.602 [| acting 26%] [| policy lag 1.0] [| ETA 1:05]``: ``acting_share`` is the
    fraction of the interval's time spent acting (None: not measured, no acting part: the
    compiled loop acts inside its one compiled update); ``eta`` in seconds (``None``: unknown
    yet, shown as ``?``; left out: no ETA part).
    """
    line = (f"step {step:6d} | frames {frames:9d} | {fps:7.0f} frames/s | "
            f"episodes {episodes:4d} | return {mean_return:6.2f} | "
            f"solved {100 * solve_rate:5.1f}% | loss {float(loss):9.3f}")
    if acting_share is not None:
        line += f" | acting {100 * acting_share:3.0f}%"
    if policy_lag is not None:
        line += f" | policy lag {policy_lag:4.1f}"
    if eta is not _NOT_SHOWN:
        line += f" | ETA {format_duration(eta)}"
    return line
