"""The console progress bar: drawn in place on a terminal, absent from logs."""

import io

from keras_relational.progress_bar import ProgressBar, eta_seconds, format_duration


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_on_a_terminal_the_bar_is_redrawn_in_place_below_the_lines():
    stream = _Terminal()
    bar = ProgressBar(10, "updates", stream=stream,
                      print_fn=lambda line: stream.write(line + "\n"), min_interval=0.0)
    assert bar.live
    bar.update(3, "60 frames | 12 frames/s")
    bar.print("step 3 | loss 0.1")
    bar.update(10, "200 frames | 12 frames/s")
    bar.close()
    text = stream.getvalue()
    assert text.count("\r\033[K") >= 3  # every redraw starts by clearing the line
    assert "[#######.................] 3/10 updates | 60 frames | 12 frames/s" in text
    # The printed line comes after the bar was cleared and before it is drawn again.
    cleared, _, rest = text.partition("step 3 | loss 0.1\n")
    assert cleared.endswith("\r\033[K") and rest.startswith("\r\033[K[")
    assert "10/10 updates" in text and "ETA 0:00" in text and text.endswith("\n")


def test_in_a_log_only_the_lines_appear():
    stream, lines = io.StringIO(), []
    bar = ProgressBar(10, stream=stream, print_fn=lines.append)
    assert not bar.live
    bar.update(5, "extra")
    bar.print("a metric line")
    bar.close()
    assert stream.getvalue() == "" and lines == ["a metric line"]
    assert "5/10 steps | extra" in bar.text()


def test_eta_and_durations():
    assert eta_seconds(done=25, total=100, elapsed=50.0) == 150.0
    assert eta_seconds(done=30, total=100, elapsed=10.0, start=20) == 70.0  # resumed at 20
    assert eta_seconds(done=0, total=100, elapsed=5.0) is None
    assert [format_duration(s) for s in (None, 59.4, 61, 3725)] == ["?", "0:59", "1:01",
                                                                    "1:02:05"]
