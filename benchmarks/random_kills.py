"""Kills a training binary at seeded-random moments, corrupts its newest saved state, resumes it.

``keras_relational.faults`` stops a run at a *named* point; this module stops it wherever it
happens to be. :func:`soak` runs a command (one of the training binaries, with its ``root_dir``)
``kills`` times: each run is sent ``SIGKILL`` at a random moment (after a randomly drawn number
of file-system events under ``root_dir``, polled every few milliseconds, plus a random delay; or
at a random time of the run), so checkpoint, backup, export and result writes are cut wherever
they are. Between kills it may corrupt the newest saved state (truncate or garble it, or the
checkpoint index). Then it runs the command to completion, and checks after every piece:

* every finished output is whole or absent (``*.json`` strict JSON, ``*.jsonl`` line by line,
  ``*.keras`` whole zip files, SavedModel directories with their variables);
* each resumed piece continues from the newest valid saved state the kill left (its
  ``Resuming from <dir>: train step N`` / ``: epoch N`` / ``: update N`` line), never from an
  older one;
* no saved state older than that newest valid one is written again (nothing restarted from zero);
* the last piece exits 0 and writes the run's outputs.

Saved states are read from the files themselves: TF checkpoints ``ckpt-N.index`` (and their data
files), the compiled trainer's and ``train_sc2``'s ``ckpt-N.npz`` and ``SafeBackupAndRestore``
directories (``training_metadata.json`` whose weights' CRC-32 matches). Pure Python (the binaries
run in subprocesses): ``benchmarks/fault_soak.py`` and ``tests/test_random_kills.py`` use it. A
test harness, not part of the installed package: it lives with the benchmark that runs it.
"""

import dataclasses
import json
import os
import random
import re
import signal
import subprocess
import threading
import time
import zipfile
import zlib

RESUME = re.compile(r"Resuming from (\S+): (?:train step|epoch|update) (\d+)")
_TF_CHECKPOINT = re.compile(r"^ckpt-(\d+)\.index$")
_NPZ_CHECKPOINT = re.compile(r"^ckpt-(\d+)\.npz$")
_METADATA = re.compile(r"^training_metadata\.json(\.bkp|\.partial)?$")
_WEIGHTS = ("latest.weights.h5", "previous.weights.h5", "latest.weights.h5.bkp",
            "partial.weights.h5")
# Names of files being written (temporary, partial, moved-aside): never outputs of their own.
_IN_PROGRESS = re.compile(r"(^\.|^partial\.|^old\.|\.partial|\.tmp$|_temp|\.old$|\.corrupt$|"
                          r"\.bkp$|^tmp)")


class FaultCheckError(AssertionError):
    """A resumed run lost a valid state, read a partial one, or left an output half-written."""


def _crc32(path):
    crc = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            crc = zlib.crc32(block, crc)
    return crc


def saved_states(root, corrupted=()):
    """``{stream: (progress, files)}``: the newest valid saved state of each stream under ``root``.

    A stream is a run's checkpoints (keyed by the run's ``root_dir``, progress in train steps or
    updates) or
    one backup directory (keyed by it, progress in epochs); ``files`` are the state's files.
    Paths in ``corrupted`` (those :func:`corrupt` spoiled) never count.
    """
    return {stream: max(found) for stream, found in all_saved_states(root, corrupted).items()}


def all_saved_states(root, corrupted=()):
    """``{stream: [(progress, files), ...]}``: every valid saved state under ``root``."""
    corrupted = set(corrupted)
    states = {}
    for folder, _, names in os.walk(root):
        names = set(names)
        # The run's root_dir: of root_dir/train/checkpoints (TF-Agents, the compiled loop) or of
        # root_dir/checkpoints (train_sc2).
        parent = os.path.dirname(folder)
        owner = os.path.dirname(parent) if os.path.basename(parent) == "train" else parent
        found = []
        for name in names:
            if m := _TF_CHECKPOINT.match(name):
                prefix = name[:-len(".index")]
                # The index, data and (optional) actor-state files.
                files = [os.path.join(folder, n) for n in names
                         if n == name or n.startswith(prefix + ".data-")
                         or n == prefix + ".actor.pkl"]
                if any(n.startswith(prefix + ".data-") for n in names):
                    found.append((int(m.group(1)), sorted(files)))
            elif (m := _NPZ_CHECKPOINT.match(name)) and _whole_zip(os.path.join(folder, name)):
                found.append((int(m.group(1)), [os.path.join(folder, name)]))
        if any(_METADATA.match(n) for n in names):
            owner, found = folder, _backups(folder, names)
        found = [(p, files) for p, files in found if not corrupted.intersection(files)]
        if found:
            states[os.path.normpath(owner)] = found
    return states


def _backups(folder, names):
    weights = {}
    for name in _WEIGHTS:
        if name in names:
            try:
                weights[_crc32(os.path.join(folder, name))] = os.path.join(folder, name)
            except OSError:
                pass
    found = []
    for name in names:
        if not _METADATA.match(name):
            continue
        path = os.path.join(folder, name)
        try:
            with open(path) as f:
                meta = json.load(f)
            weights_file = weights.get(meta.get("weights_crc32"))
            if weights_file:
                found.append((int(meta["epoch"]), [path, weights_file]))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
    return found


def _whole_zip(path):
    try:
        with zipfile.ZipFile(path) as z:
            return z.testzip() is None
    except (OSError, zipfile.BadZipFile, EOFError, ValueError):
        return False


def _strict_json(text):
    def refuse(token):
        raise ValueError(f"bare {token}")
    return json.loads(text, parse_constant=refuse)


def half_written_outputs(root):
    """The finished-looking outputs under ``root`` that are not whole (with why)."""
    problems = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not _IN_PROGRESS.search(d)]
        for name in names:
            path = os.path.join(folder, name)
            if _IN_PROGRESS.search(name) or "checkpoints" in folder.split(os.sep):
                continue
            try:
                if name.endswith(".json"):
                    with open(path) as f:
                        _strict_json(f.read())
                elif name.endswith(".jsonl"):
                    with open(path) as f:
                        [_strict_json(line) for line in f if line.strip()]
                elif name.endswith(".keras") and not _whole_zip(path):
                    problems.append((path, "not a whole .keras zip"))
            except (OSError, ValueError) as error:
                problems.append((path, f"{type(error).__name__}: {str(error)[:100]}"))
        if "saved_model.pb" in names and not os.path.exists(
                os.path.join(folder, "variables", "variables.index")):
            problems.append((folder, "a SavedModel without variables/variables.index"))
    return problems


def corrupt(root, rng, corrupted):
    """Spoils the newest saved state of a stream that has an older valid one; returns what.

    Truncates or garbles one of its files, or garbles / deletes the TF checkpoint index. Adds
    the spoiled file to ``corrupted`` (the index is not a saved state: nothing is added).
    """
    candidates = sorted(max(found)[1] for found in all_saved_states(root, corrupted).values()
                        if len(found) > 1)
    if not candidates:
        return None
    files = rng.choice(candidates)
    tf_checkpoint = any(f.endswith(".index") for f in files)
    how = rng.choice(["truncate", "garbage"] + (["index"] if tf_checkpoint else []))
    if how == "index":
        index = os.path.join(os.path.dirname(files[0]), "checkpoint")
        if rng.random() < 0.5 and os.path.exists(index):
            os.remove(index)
            return f"deleted the checkpoint index {index}"
        with open(index, "w") as f:
            f.write("not a checkpoint index {{{")
        return f"garbled the checkpoint index {index}"
    target = rng.choice([f for f in files if not f.endswith(".index")] or files)
    with open(target, "r+b") as f:
        if how == "truncate":
            f.truncate(os.path.getsize(target) // 2)
        else:
            f.seek(0)
            f.write(os.urandom(min(64, max(1, os.path.getsize(target)))))
    corrupted.add(target)
    return f"{how}d {target}"


@dataclasses.dataclass
class Piece:
    """One run of the command: how it ended and what it printed and left."""

    returncode: int
    output: str
    seconds: float
    active_seconds: float  # from its first file-system event on (its imports before)
    events: int
    killed: bool
    newest: dict  # the newest valid saved state of each stream seen while it ran
    lowest_written: dict  # per stream, the lowest progress written while it ran
    in_progress: list  # files being written when it was killed (temporaries left behind)

    def resumed(self):
        """``{stream: progress}`` of its ``Resuming from`` lines."""
        return {os.path.normpath(m.group(1)): int(m.group(2))
                for m in RESUME.finditer(self.output)}


def _snapshot(root):
    files = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            try:
                stat = os.stat(path)
            except OSError:
                continue
            files[path] = (stat.st_size, stat.st_mtime_ns)
    return files


def run_piece(command, root, rng=None, kill_after_events=None, kill_after_seconds=None,
              jitter=0.05, poll=0.005, timeout=600, env=None):
    """Runs ``command``; SIGKILLs it after ``kill_after_events`` file-system events under
    ``root`` or ``kill_after_seconds`` after the first one (then a random delay up to
    ``jitter`` s)."""
    rng = rng or random.Random(0)
    env = dict(os.environ if env is None else env, PYTHONUNBUFFERED="1",
               TF_CPP_MIN_LOG_LEVEL="2")
    start = time.time()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=env, start_new_session=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
    reader.start()
    before, events, killed, first_event = _snapshot(root), 0, False, None
    newest, lowest, start_files = {}, {}, dict(before)
    while process.poll() is None:
        if time.time() - start > timeout:
            os.killpg(process.pid, signal.SIGKILL)
            raise FaultCheckError(f"{command} ran past {timeout} s")
        time.sleep(poll)
        now = _snapshot(root)
        changed = sum(1 for p, s in now.items() if before.get(p) != s) + len(set(before) - set(now))
        if changed:
            events += changed
            touched = {p for p, s in now.items()
                       if start_files.get(p) != s and not p.endswith(".bkp")}
            for stream, found in all_saved_states(root).items():
                newest[stream] = max(max(found)[0], newest.get(stream, 0))
                for progress, files in found:
                    if touched.intersection(files):  # written by this piece
                        lowest[stream] = min(progress, lowest.get(stream, progress))
        before = now
        if events and first_event is None:
            first_event = time.time()
        due = (kill_after_events is not None and events >= kill_after_events) or (
            kill_after_seconds is not None and first_event is not None
            and time.time() - first_event >= kill_after_seconds)
        if due and process.poll() is None:
            time.sleep(rng.uniform(0, jitter))
            try:
                os.killpg(process.pid, signal.SIGKILL)  # the group this call started
                killed = True
            except ProcessLookupError:
                pass
            break
    process.wait()
    reader.join(timeout=10)
    killed = killed and process.returncode == -signal.SIGKILL
    for stream, (progress, _) in saved_states(root).items():
        newest[stream] = max(progress, newest.get(stream, progress))
    left = [os.path.relpath(os.path.join(folder, n), root)
            for folder, dirs, names in os.walk(root) for n in names + dirs
            if _IN_PROGRESS.search(n) and not n.endswith((".bkp", ".corrupt"))] if killed else []
    end = time.time()
    return Piece(process.returncode, "".join(lines), end - start, end - (first_event or end),
                 events, killed, newest, lowest, left)


def hit(piece):
    """What the kill interrupted, told by the temporaries it left: a checkpoint or backup
    write, an export, another write, or nothing being written."""
    if not piece.in_progress:
        return "between writes"
    if any("checkpoint" in p or "backup" in p or "ckpt" in p for p in piece.in_progress):
        return "checkpoint write"
    if any(word in p for p in piece.in_progress
           for word in ("saved_model", "polic", "keras", "model", "export")):
        return "export"
    return "other write"


def soak(command, root, kills, seed, calibration=None, corrupt_rate=0.3, timeout=600,
         log=print):
    """Kills ``command`` ``kills`` times at random moments, then runs it to completion.

    ``calibration`` is ``(events, active_seconds)`` of an uninterrupted run (None: the kill
    moments are drawn from [1, 40] events or [0, 30] s after the first event; seconds None:
    kills after a number of events only). Returns a
    report dict whose ``failures`` lists every check that failed (empty: all passed).
    """
    rng = random.Random(seed)
    events, seconds = calibration or (40, 30.0)
    corrupted, report = set(), dict(kills=[], failures=[])
    previous = None
    for attempt in range(kills + 1):
        last = attempt == kills
        if last:
            piece = run_piece(command, root, rng, timeout=timeout)
        elif seconds is None or rng.random() < 0.5:
            piece = run_piece(command, root, rng, kill_after_events=rng.randint(1, max(1, events)),
                              timeout=timeout)
        else:
            piece = run_piece(command, root, rng, kill_after_seconds=rng.uniform(0, seconds),
                              timeout=timeout)
        if previous is not None:
            _check_resume(previous, piece, report)
        problems = half_written_outputs(root)
        if problems:
            report["failures"].append(f"half-written outputs after piece {attempt}: {problems}")
        if not last and not piece.killed:
            if piece.returncode != 0:
                report["failures"].append(f"piece {attempt} failed (exit {piece.returncode}):"
                                          f" {piece.output[-2000:]}")
                break
            log(f"  piece {attempt}: finished before its kill ({piece.seconds:.1f} s, "
                f"{piece.events} events)")
            # The machine tells fewer writes apart now than in the calibration (a loaded
            # machine's polls see several writes at once): the next kills are drawn within the
            # events this run made.
            events = max(1, min(events, piece.events))
            previous = None
            continue
        if last:
            report["final_returncode"] = piece.returncode
            if piece.returncode != 0:
                report["failures"].append(f"the final run failed (exit {piece.returncode}): "
                                          f"{piece.output[-2000:]}")
            break
        valid = saved_states(root, corrupted)
        spoiled = corrupt(root, rng, corrupted) if rng.random() < corrupt_rate else None
        expected = {k: v[0] for k, v in saved_states(root, corrupted).items()}
        record = dict(piece=attempt, seconds=round(piece.seconds, 2), events=piece.events,
                      hit=hit(piece), in_progress=piece.in_progress[:6], corrupted=spoiled,
                      valid={k: v[0] for k, v in valid.items()}, expected=expected,
                      newest_seen=dict(piece.newest))
        report["kills"].append(record)
        log(f"  kill {len(report['kills'])}: after {piece.seconds:.1f} s, {piece.events} "
            f"events, {record['hit']}" + (f"; {spoiled}" if spoiled else ""))
        previous = (piece, expected, record)
    return report


def _check_resume(previous, piece, report):
    killed, expected, record = previous
    resumed = piece.resumed()
    record["resumed"] = resumed
    lost = {}
    for stream, progress in resumed.items():
        want = expected.get(stream)
        if want is None:
            report["failures"].append(f"resumed {stream} at {progress}, but the kill left no "
                                      f"valid state there (a partial state read as valid?)")
        elif progress != want:
            report["failures"].append(f"resumed {stream} at {progress}, not at the newest valid "
                                      f"state {want}")
        lost[stream] = killed.newest.get(stream, progress) - progress
    for stream, want in expected.items():
        if stream not in resumed and piece.lowest_written.get(stream, want + 1) <= want:
            report["failures"].append(
                f"{stream} was written again at {piece.lowest_written[stream]} without resuming "
                f"from its valid state {want} (restarted from zero?)")
    record["lost"] = lost
