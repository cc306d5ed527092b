"""tests/warm_python.py: a command forked from the warm server behaves as a cold ``python``."""

import os
import signal
import subprocess
import sys
import time

import pytest
import warm_python

_HERE = os.path.dirname(os.path.abspath(__file__))
# The environment of the training binaries' commands (test_binary_faults.py, ...): these tests
# fork from the same server, not from one of their own (each server imports Keras, and so
# TensorFlow, when it starts). Variables named KERAS_RELATIONAL_* do not key a server.
_ENV = warm_python.binary_env()

# Each snippet prints what a fresh interpreter decides: both ways must print the same.
_SNIPPETS = {
    "argv_and_path": "import sys, os; print(sys.argv, sys.path[0] == '', os.getcwd())",
    "environment": ("import os; print(os.environ['KERAS_RELATIONAL_WARM_PYTHON_CHECK'], "
                    "'PYTEST_XYZ' in os.environ)"),
    "exit_code": "import sys; print('before'); sys.exit(3)",
    "exit_message": "import sys; sys.exit('a message for stderr')",
    "exception": "raise ValueError('bad value')",
    "keyboard_interrupt": "raise KeyboardInterrupt",
    "atexit_and_threads": (
        "import atexit, threading, time\n"
        "atexit.register(lambda: print('atexit ran'))\n"
        "threading.Thread(target=lambda: (time.sleep(0.5), print('thread joined'))).start()\n"),
    "streams": ("import sys; print(sys.stdout.isatty(), sys.stdout.line_buffering, "
                "sys.stderr.line_buffering); print('unflushed', end='')"),
    "stdin": "import sys; print(sys.stdin.read().upper())",
    "main_module": "import __main__, sys; print(__name__, hasattr(__main__, '__file__'))",
    "tempdir": "import tempfile; print(tempfile.gettempdir())",
}


def _both(args, **kwargs):
    cold = subprocess.run(args, capture_output=True, text=True, timeout=300, **kwargs)
    warm = warm_python.run(args, capture_output=True, text=True, timeout=300, **kwargs)
    return cold, warm


def _last_line(text):
    return (text.strip().splitlines() or [""])[-1]


@pytest.mark.subprocess
@pytest.mark.parametrize("name", sorted(_SNIPPETS))
def test_a_snippet_behaves_as_in_a_cold_interpreter(name, tmp_path):
    env = dict(_ENV, KERAS_RELATIONAL_WARM_PYTHON_CHECK="yes", TMPDIR=str(tmp_path))
    env.pop("PYTEST_XYZ", None)
    cold, warm = _both([sys.executable, "-c", _SNIPPETS[name]], cwd=tmp_path, env=env,
                       input="text on stdin" if name == "stdin" else None)
    assert warm.returncode == cold.returncode, (cold, warm)
    assert warm.stdout == cold.stdout
    assert _last_line(warm.stderr) == _last_line(cold.stderr)


@pytest.mark.subprocess
@pytest.mark.parametrize("unbuffered", ["", "1"])
def test_the_streams_are_buffered_as_python_buffers_them(unbuffered):
    env = dict(_ENV, PYTHONUNBUFFERED=unbuffered)
    if not unbuffered:  # as unset: Python ignores an empty value (pytest-xdist's workers set 1)
        env.pop("PYTHONUNBUFFERED")
    cold, warm = _both([sys.executable, "-c", _SNIPPETS["streams"]], env=env)
    assert (warm.returncode, warm.stdout) == (cold.returncode, cold.stdout)


@pytest.mark.subprocess
def test_modules_and_scripts_get_argv_path_and_main_as_from_python(tmp_path):
    (tmp_path / "show_me.py").write_text(
        "import sys, os\n"
        "print(__name__, os.path.basename(sys.argv[0]), sys.argv[1:],\n"
        "      sys.path[0] == os.path.dirname(os.path.abspath(__file__)) or sys.path[0])\n")
    for args in ([sys.executable, "-m", "show_me", "--flag=1"],
                 [sys.executable, str(tmp_path / "show_me.py"), "x"],
                 [sys.executable, "-u", "show_me.py", "y"]):
        cold, warm = _both(args, cwd=tmp_path, env=_ENV)
        assert (warm.returncode, warm.stdout) == (cold.returncode, cold.stdout), args
    cold, warm = _both([sys.executable, "-P", "-m", "show_me"], cwd=tmp_path, env=_ENV)
    assert cold.returncode == warm.returncode == 1  # -P: the working directory is not on the path
    assert "No module named show_me" in warm.stderr


@pytest.mark.subprocess
def test_a_killed_child_reports_sigkill_and_its_own_process_group(tmp_path):
    started = tmp_path / "started"
    code = ("import os, pathlib, sys, time\n"
            f"pathlib.Path({str(started)!r}).write_text(f'{{os.getpid()}} {{os.getsid(0)}}')\n"
            "time.sleep(300)\n")
    process = warm_python.Popen([sys.executable, "-c", code], start_new_session=True,
                                stdout=warm_python.DEVNULL, env=_ENV)
    deadline = time.time() + 120
    while not started.exists() and time.time() < deadline:
        time.sleep(0.05)
    assert process.poll() is None
    pid, session = map(int, started.read_text().split())
    assert pid == process.pid == session  # a real process, leading its own session
    process.kill()
    assert process.wait(timeout=30) == -signal.SIGKILL
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.subprocess
def test_two_children_draw_different_numpy_seeds_and_time_out_as_subprocess_does():
    draw = "import numpy; print(numpy.random.randint(2**31))"
    first, second = (warm_python.run([sys.executable, "-c", draw], capture_output=True,
                                     text=True, check=True, env=_ENV).stdout for _ in range(2))
    assert first != second
    with pytest.raises(subprocess.TimeoutExpired):
        warm_python.run([sys.executable, "-c", "import time; time.sleep(60)"], timeout=2,
                        env=_ENV)


@pytest.mark.subprocess
def test_the_child_starts_with_keras_imported_and_a_new_environment_gets_its_own_server():
    show = "import sys; print('keras' in sys.modules, __import__('keras').backend.backend())"
    warm = warm_python.run([sys.executable, "-c", show], capture_output=True, text=True,
                           env=dict(os.environ, KERAS_BACKEND="jax"), check=True)
    assert warm.stdout.split() == ["True", "jax"]


@pytest.mark.subprocess
def test_a_server_whose_command_still_runs_is_not_stopped_for_another(monkeypatch):
    # Servers of their own (a light preload, not Keras), in a registry of their own: this
    # worker's servers for the other tests stay as they are.
    monkeypatch.setattr(warm_python, "_MAX_SERVERS", 1)
    monkeypatch.setattr(warm_python, "_servers", {})
    try:
        running = warm_python.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                                    stdout=warm_python.DEVNULL, preload=("json",))
        other = warm_python.run([sys.executable, "-c", "print('other')"], capture_output=True,
                                text=True, env=dict(os.environ, WARM_PYTHON_OTHER="1"),
                                check=True, preload=("json",))
        assert other.stdout == "other\n"
        assert running.poll() is None  # its server was kept: a second one started beside it
        assert len(warm_python._servers) == 2
        running.kill()
        assert running.wait(timeout=30) == -signal.SIGKILL
    finally:
        warm_python._stop_servers()


@pytest.mark.subprocess
def test_a_preloaded_module_is_imported_and_what_it_sets_in_the_environment_is_set(tmp_path):
    # As the TF-Agents trainer sets TF_USE_LEGACY_KERAS when it is imported: a cold command that
    # imports the module first sees the variable, and so does a child of a server that preloaded it.
    (tmp_path / "sets_a_variable.py").write_text(
        "import os\nos.environ['WARM_PYTHON_SET_BY_IMPORT'] = 'set'\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    show = ("import os, sys; print('sets_a_variable' in sys.modules, 'keras' in sys.modules, "
            "os.environ.get('WARM_PYTHON_SET_BY_IMPORT'))")
    warm = warm_python.run([sys.executable, "-c", show], capture_output=True, text=True,
                           env=env, check=True, preload=("sets_a_variable",))
    assert warm.stdout.split() == ["True", "False", "set"]
    cold = subprocess.run([sys.executable, "-c", "import sets_a_variable; " + show],
                          capture_output=True, text=True, env=env, check=True)
    assert cold.stdout == warm.stdout
    # A server that preloaded another module is another one: the module is not there. (A light
    # one: the default server preloads Keras, test_the_child_starts_with_keras_imported_...)
    other = warm_python.run([sys.executable, "-c", show], capture_output=True, text=True,
                            env=env, check=True, preload=("json",))
    assert other.stdout.split() == ["False", "False", "None"]


@pytest.mark.subprocess
def test_a_preload_that_fails_names_the_module_and_a_bad_preload_is_refused():
    with pytest.raises(RuntimeError, match="failed to import no_such_module_here"):
        warm_python.run([sys.executable, "-c", "pass"], preload=("no_such_module_here",))
    for bad in ("keras", ()):
        with pytest.raises(ValueError, match="`preload`"):
            warm_python.run([sys.executable, "-c", "pass"], preload=bad)


def test_commands_it_cannot_run_warm_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="only this interpreter"):
        warm_python.run(["/bin/echo", "hello"])
    with pytest.raises(ValueError, match="not '-X'"):
        warm_python.run([sys.executable, "-X", "importtime", "-c", "pass"])
