"""Starts the training binaries the tests run from a warm fork server, not a cold interpreter.

Every binary the kill, resume and smoke tests start imports Keras, and with it TensorFlow (or
JAX): seconds before the first line of our code runs (``benchmarks/import_time.py``). A fork
server (a "zygote", as browsers and Android call it) pays that once: it starts with the caller's
environment, imports ``keras`` and nothing of ours (or, with ``preload``, the first heavy module
a command imports: the TF-Agents trainer, ``TF_AGENTS_PRELOAD``), and forks a child for each
command. The child sets up what a fresh interpreter would have (argv, ``sys.path``, the
environment, the working directory, the standard streams, signal handlers, a fresh NumPy seed)
and runs the module, script or ``-c`` code as ``__main__``; it is a real process of its own, so
SIGKILL, exit statuses and sessions behave as with :mod:`subprocess`.

:func:`run` and :class:`Popen` take :mod:`subprocess`'s arguments. Use them only for commands
that import Keras anyway (our training binaries); tests of what a fresh interpreter imports, of
import time, or of processes without Keras keep :mod:`subprocess`. Two differences are left:
children of one server share its hash seed (``PYTHONHASHSEED``), which a cold start draws anew,
and where the server has imported TensorFlow they build graphs as the test process does, without
each op's Python stack (``tests/op_tracebacks.py``).

A server is keyed by its preloaded modules and the command's environment (less the variables that
change per test and are read later); a command with another environment gets its own server. The
variables the preloaded imports set (``TF_USE_LEGACY_KERAS``) are set in each child, as the same
import would set them in a cold process. Each pytest worker keeps at most ``_MAX_SERVERS``
servers and stops them when it exits.
"""

import array
import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref

PIPE = subprocess.PIPE
DEVNULL = subprocess.DEVNULL
STDOUT = subprocess.STDOUT

_MAX_SERVERS = 3
# Where TensorFlow is preloaded, the server builds graphs as the test process does.
_OP_TRACEBACKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "op_tracebacks.py")
DEFAULT_PRELOAD = ("keras",)
# The TF-Agents trainer: importing it sets TF_USE_LEGACY_KERAS before TensorFlow is imported,
# as its binaries do (train_boxworld --trainer=tf_agents).
TF_AGENTS_PRELOAD = ("keras_relational.agents.tf_agents.train_eval",)
_SERVER_START_TIMEOUT = 600
# Any environment variable may be read while Keras and its backend are imported (TensorFlow reads
# TF_*, protobuf PROTOCOL_BUFFERS_*, Python its own): a command whose environment differs gets a
# server started with it, except in these, which change per test and are read later: pytest's,
# tempfile's (the child recomputes its directory) and ours (fault injection, read as it runs).
_UNKEYED = ("PYTEST_CURRENT_TEST", "TMPDIR", "TEMP", "TMP")
_UNKEYED_PREFIX = "KERAS_RELATIONAL_"
# Interpreter options a child can honour after the fork.
_OPTIONS = ("-P", "-u")

_SERVER_CODE = r'''
import array, json, os, signal, socket, sys
control = socket.socket(fileno=int(sys.argv[1]))
before = dict(os.environ)
try:
    import importlib
    for name in json.loads(sys.argv[2]):  # the point of the server: what a command imports first
        importlib.import_module(name)
    import numpy
    if "tensorflow" in sys.modules:  # graphs as in the test process (tests/op_tracebacks.py)
        import importlib.util
        spec = importlib.util.spec_from_file_location("op_tracebacks", sys.argv[3])
        op_tracebacks = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(op_tracebacks)
        op_tracebacks.skip_recording()
except BaseException as error:
    control.send(json.dumps({"error": repr(error)}).encode())
    raise
# What the imports set in the environment (the TF-Agents trainer sets TF_USE_LEGACY_KERAS as it is
# imported): a cold command has it from the same import, so the children get it too.
preload_environment = {name: value for name, value in os.environ.items()
                       if before.get(name) != value}
wakeup_read, wakeup_write = os.pipe()
os.set_blocking(wakeup_write, False)
signal.set_wakeup_fd(wakeup_write)
signal.signal(signal.SIGCHLD, lambda *_: None)
reporters = {}  # child pid -> socket that gets its wait status
control.send(b'{"ready": true}')


def become(request, fds):
    """In the forked child: set up a fresh interpreter's state, run the command, exit."""
    reporter, stdin, stdout, stderr = fds
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for fd in (control.fileno(), wakeup_read, wakeup_write, reporter,
               *(s.fileno() for s in reporters.values())):
        os.close(fd)
    if request["start_new_session"]:
        os.setsid()
    for target, fd in enumerate((stdin, stdout, stderr)):
        os.dup2(fd, target)
    for fd in {stdin, stdout, stderr} - {0, 1, 2}:
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ.update(preload_environment)
    import io, runpy, tempfile, threading
    tempfile.tempdir = None  # from this process's TMPDIR
    numpy.random.seed()  # a cold start draws NumPy's global seed anew
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(
        io.open(0, "rb", closefd=False), encoding=sys.stdin.encoding, errors=sys.stdin.errors)
    # As CPython's create_stdio: -u (or PYTHONUNBUFFERED) writes through; otherwise a terminal
    # and stderr are line-buffered.
    unbuffered = "-u" in request["options"] or bool(os.environ.get("PYTHONUNBUFFERED"))
    for name, fd in (("stdout", 1), ("stderr", 2)):
        old = getattr(sys, name)
        stream = io.TextIOWrapper(
            io.open(fd, "wb", buffering=0 if unbuffered else -1, closefd=False),
            encoding=old.encoding, errors=old.errors, write_through=unbuffered,
            line_buffering=not unbuffered and (fd == 2 or os.isatty(fd)))
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
    kind, target, args = request["kind"], request["target"], request["args"]
    path = list(sys.path)
    if "-P" not in request["options"]:
        path.insert(0, {"-m": os.getcwd(), "-c": "",
                        "script": os.path.dirname(os.path.abspath(target or "."))}[kind])
    sys.path[:] = path
    sys.orig_argv = request["argv"]
    code = 0
    try:
        if kind == "-m":
            sys.argv = [target, *args]
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        elif kind == "-c":
            sys.argv = ["-c", *args]
            main = type(sys)("__main__")
            sys.modules["__main__"] = main
            exec(compile(target, "<string>", "exec"), main.__dict__)
        else:
            sys.argv = [target, *args]
            runpy.run_path(target, run_name="__main__")
    except SystemExit as stop:
        if stop.code is None:
            code = 0
        elif isinstance(stop.code, int):
            code = stop.code
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        code = -signal.SIGINT
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    # What Python does at exit: join non-daemon threads, run atexit, flush the streams.
    threading._shutdown()
    import atexit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if code == -signal.SIGINT:  # as Python does: report death by SIGINT
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code & 0xFF)


def reap():
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        reporter = reporters.pop(pid, None)
        if reporter is not None:
            try:
                reporter.send(json.dumps({"status": status}).encode())
            except OSError:
                pass
            reporter.close()


import select
while True:
    try:
        readable, _, _ = select.select([control, wakeup_read], [], [])
    except InterruptedError:
        continue
    if wakeup_read in readable:
        os.read(wakeup_read, 4096)
        reap()
    if control not in readable:
        continue
    fds = array.array("i")
    message, ancillary, _, _ = control.recvmsg(1 << 20, socket.CMSG_LEN(4 * fds.itemsize))
    if not message:  # the test process is gone: so are the commands it started
        for pid in reporters:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        os._exit(0)
    for level, kind, data in ancillary:
        fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
    request = json.loads(message)
    fds = list(fds)
    pid = os.fork()
    if pid == 0:
        try:
            become(request, fds)
        except BaseException:
            import traceback
            traceback.print_exc()  # on the command's stderr when it got that far
        finally:
            os._exit(70)
    reporter = socket.socket(fileno=fds[0])
    for fd in set(fds[1:]):
        os.close(fd)
    reporters[pid] = reporter
    reporter.send(json.dumps({"pid": pid}).encode())
'''


def _key(env, preload):
    return tuple(preload), tuple(sorted(
        (name, value) for name, value in env.items()
        if name not in _UNKEYED and not name.startswith(_UNKEYED_PREFIX)))


class _Server:
    """One warm interpreter, started with one environment and its preloaded modules, serving
    this test process."""

    def __init__(self, env, preload):
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.log = open(os.devnull, "wb")  # noqa: SIM115 - the server writes only import noise
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-c", _SERVER_CODE, str(theirs.fileno()),
             json.dumps(list(preload)), _OP_TRACEBACKS],
            env=env, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
            pass_fds=(theirs.fileno(),), cwd=os.getcwd())
        theirs.close()
        self.control.settimeout(_SERVER_START_TIMEOUT)
        reply = json.loads(self.control.recv(1 << 16) or b'{"error": "the server exited"}')
        self.control.settimeout(None)
        if "error" in reply:
            self.stop()
            raise RuntimeError(f"tests/warm_python.py: the fork server failed to import "
                               f"{', '.join(preload)} with this environment: {reply['error']}")
        self.lock = threading.Lock()
        self.children = weakref.WeakSet()  # the Popen objects of its commands

    def busy(self):
        """Whether a command it started may still run (stopping the server would kill it)."""
        return any(child.poll() is None for child in list(self.children))

    def spawn(self, request, stdio_fds):
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fds = array.array("i", [theirs.fileno(), *stdio_fds])
        with self.lock:
            self.control.sendmsg([json.dumps(request).encode()],
                                 [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds.tobytes())])
        theirs.close()
        reply = json.loads(mine.recv(1 << 16))
        return reply["pid"], mine

    def stop(self):
        self.control.close()  # the server kills what is still running and exits
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


_servers = {}  # (preload, environment) key -> _Server, least recently used first
_servers_lock = threading.Lock()


def _server(env, preload):
    key = _key(env, preload)
    with _servers_lock:
        server = _servers.pop(key, None)
        if server is None or server.process.poll() is not None:
            # Stop the least recently used idle servers; never one whose command still runs.
            for idle in [k for k, s in _servers.items() if not s.busy()]:
                if len(_servers) < _MAX_SERVERS:
                    break
                _servers.pop(idle).stop()
            server = _Server(env, preload)
        _servers[key] = server
        return server


@atexit.register
def _stop_servers():
    for server in _servers.values():
        server.stop()
    _servers.clear()


def _parse(args):
    """``[python, options..., -m module | -c code | script, args...]`` -> request fields."""
    args = [os.fspath(a) for a in args]
    if not args or os.path.realpath(args[0]) != os.path.realpath(sys.executable):
        raise ValueError(f"tests/warm_python.py runs only this interpreter ({sys.executable}); "
                         f"got the command {args[:3]}")
    options, rest = [], args[1:]
    while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-c"):
        if rest[0] not in _OPTIONS:
            raise ValueError(f"tests/warm_python.py supports the interpreter options {_OPTIONS}, "
                             f"not {rest[0]!r} (in {args[:4]}); use subprocess for it")
        options.append(rest.pop(0))
    if not rest:
        raise ValueError(f"tests/warm_python.py needs -m, -c or a script: got {args}")
    if rest[0] in ("-m", "-c"):
        if len(rest) < 2:
            raise ValueError(f"tests/warm_python.py: {rest[0]} needs an argument: got {args}")
        return dict(options=options, kind=rest[0], target=rest[1], args=rest[2:], argv=args)
    return dict(options=options, kind="script", target=rest[0], args=rest[1:], argv=args)


class Popen:
    """:class:`subprocess.Popen` for a Python command, forked from a warm server.

    ``preload``: the modules the server imports before it forks, in order; name the first heavy
    module the command itself imports (the default, Keras, for the binaries; the TF-Agents
    trainer for its commands, which must import it before Keras resolves ``tf.keras``).
    """

    def __init__(self, args, stdin=None, stdout=None, stderr=None, cwd=None, env=None,
                 start_new_session=False, text=None, universal_newlines=None, encoding=None,
                 errors=None, preload=DEFAULT_PRELOAD):
        if isinstance(preload, str) or not preload:
            raise ValueError(f"tests/warm_python.py expects `preload` to be a non-empty sequence "
                             f"of module names, received {preload!r}")
        self.args = args
        self.returncode = None
        request = _parse(args)
        env = dict(os.environ if env is None else env)
        request.update(cwd=os.path.abspath(os.fspath(cwd or os.getcwd())), env=env,
                       start_new_session=bool(start_new_session))
        text_mode = bool(text or universal_newlines or encoding or errors)
        child_fds, close_after, self.stdin, self.stdout, self.stderr = [], [], None, None, None
        for position, choice in enumerate((stdin, stdout, stderr)):
            if choice is None:
                child_fds.append(position)
            elif choice == DEVNULL:
                fd = os.open(os.devnull, os.O_RDWR)
                child_fds.append(fd)
                close_after.append(fd)
            elif choice == PIPE:
                read_end, write_end = os.pipe()
                ours, theirs = (write_end, read_end) if position == 0 else (read_end, write_end)
                child_fds.append(theirs)
                close_after.append(theirs)
                mode = ("w" if position == 0 else "r") + ("" if text_mode else "b")
                stream = (open(ours, mode, encoding=encoding, errors=errors)  # noqa: SIM115
                          if text_mode else open(ours, mode))  # noqa: SIM115
                setattr(self, ("stdin", "stdout", "stderr")[position], stream)
            elif choice == STDOUT and position == 2:
                child_fds.append(child_fds[1])
            elif isinstance(choice, int):
                child_fds.append(choice)
            else:
                child_fds.append(choice.fileno())
        try:
            server = _server(env, preload)
            self.pid, self._reporter = server.spawn(request, child_fds)
            server.children.add(self)
        finally:
            for fd in close_after:
                os.close(fd)

    def _record(self, message):
        self.returncode = os.waitstatus_to_exitcode(json.loads(message)["status"])
        self._reporter.close()

    def poll(self):
        if self.returncode is None:
            self._reporter.setblocking(False)
            try:
                self._record(self._reporter.recv(1 << 16))
            except BlockingIOError:
                pass
            finally:
                if self.returncode is None:
                    self._reporter.setblocking(True)
        return self.returncode

    def wait(self, timeout=None):
        if self.returncode is None:
            self._reporter.settimeout(timeout)
            try:
                self._record(self._reporter.recv(1 << 16))
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout) from None
            finally:
                if self.returncode is None:
                    self._reporter.settimeout(None)
        return self.returncode

    def send_signal(self, sig):
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def communicate(self, input=None, timeout=None):
        """Writes ``input``, reads the pipes to their end and waits, as subprocess does."""
        deadline = None if timeout is None else time.monotonic() + timeout

        def remaining():
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        outputs = {}

        def drain(name):
            outputs[name] = getattr(self, name).read()
            getattr(self, name).close()

        readers = [threading.Thread(target=drain, args=(name,), daemon=True)
                   for name in ("stdout", "stderr") if getattr(self, name) is not None]
        for reader in readers:
            reader.start()
        if self.stdin is not None:
            try:
                if input:
                    self.stdin.write(input)
                self.stdin.close()
            except BrokenPipeError:
                pass
        for reader in readers:
            reader.join(remaining())
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        self.wait(remaining())
        return outputs.get("stdout"), outputs.get("stderr")

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        for stream in (self.stdin, self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        self.wait()


def binary_env(**variables):
    """The environment of a training binary as a user starts it, plus ``variables``.

    TensorFlow's INFO and WARNING lines hidden, and without ``TF_USE_LEGACY_KERAS`` (which the
    TF-Agents trainer sets in the test process): the supervised binaries and their libraries use
    Keras 3. The tests that start them share this environment, and so, per worker, one server
    (each server imports TensorFlow as it starts); ``KERAS_RELATIONAL_*`` variables (the fault
    points) do not key a server.
    """
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_USE_LEGACY_KERAS", None)
    env.update(variables)
    return env


def run(args, input=None, capture_output=False, timeout=None, check=False, **kwargs):
    """:func:`subprocess.run` for a Python command, forked from a warm server."""
    if capture_output:
        kwargs.update(stdout=PIPE, stderr=PIPE)
    if input is not None:
        kwargs["stdin"] = PIPE
    with Popen(args, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
    result = subprocess.CompletedProcess(args, process.returncode, stdout, stderr)
    if check:
        result.check_returncode()
    return result
