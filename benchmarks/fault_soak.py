"""Random-kill soak of every training binary: kills at random moments, corrupt states, resumes.

    nice -n 19 python benchmarks/fault_soak.py --kills=4 --seed=0

For each binary (tiny settings): a second start on a root directory in use (the second process
must refuse at once, naming the first one's process id: ``keras_relational.run_lock``), one
uninterrupted run (how many file-system events and seconds a run takes; skipped where
``CALIBRATION`` has them), then ``--kills`` runs of the same command on one ``root_dir``, each
sent SIGKILL at a seeded-random moment, with the newest saved state (checkpoint or backup)
damaged between some of them (``--corrupt_rate``), then a run to completion
(``benchmarks/random_kills.py``: ``soak``). Every killed run leaves its lock file behind: each
resume takes it over. Writes ``benchmarks/results/fault_soak.json`` and ``.md``: per binary the
kills, what they interrupted (told by the temporaries they left), the resumes, whether each
resumed from the newest state that was still valid (so it lost no more than the work since the
last good checkpoint), the work lost (saved progress the kill had seen minus the progress the
resume continued from, in the units of the checkpoint interval), the second start, and every
failed check.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# Its neighbours (python puts the script's folder first on sys.path).
import random_kills
import results_io

_BOXWORLD = ["--goal_length=1", "--num_distractors=0", "--room_size=5",
             "--observation_type=one_hot", "--num_envs=4", "--unroll_length=5", "--key_dim=8",
             "--head_width=16", "--log_interval=1", "--checkpoint_interval=2",
             "--eval_episodes=0", "--num_iterations=8"]
# pysc2's mock (no game), the tiny agent, eager updates: 2-step episodes, a checkpoint each update.
_SC2 = ["--mock", "--map=MoveToBeacon", "--num_envs=2", "--unroll_length=2", "--screen_size=8",
        "--tiny_model", "--num_blocks=1", "--num_heads=1", "--compile_mode=eager",
        "--mock_episode_length=2", "--num_iterations=3", "--checkpoint_interval=1",
        "--log_interval=1"]
# name: (module, flags, the checkpoint interval in its progress units, the outputs of a run).
BINARIES = {
    "train_boxworld (tf_agents)": (
        "train_boxworld", _BOXWORLD + ["--policy_save_interval=10000", "--nojit_compile",
                                       "--noactor_jit_compile"],
        (2, "train steps"), ("result.json", "policies/greedy_policy/saved_model.pb")),
    "train_boxworld (compiled)": (
        "train_boxworld", _BOXWORLD + ["--trainer=compiled"],
        (2, "train steps"), ("result.json", "keras_model.keras")),
    "train_relations_game": (
        "train_relations_game", ["--central=mlp1", "--task=same", "--num_batches=6",
                                 "--eval_interval=2", "--batch_size=5",
                                 "--num_train_examples=20", "--num_eval_examples=10"],
        (1, "epochs"), ("results.json", "saved_model/saved_model.pb")),
    "train_palindromes": (
        "train_palindromes", ["--models=lstm", "--conditions=standard", "--seeds=1",
                              "--epochs=3", "--batch_size=64", "--n_per_length=12",
                              "--long_n_per_length=2", "--restart_baseline",
                              "--restart_epoch=1", "--restart_threshold=0.999",
                              "--max_restarts=1"],
        (1, "epochs"), ("summary.json",)),
    "train_rule_learning": (
        "train_rule_learning", ["--models=conv", "--seeds=2", "--epochs=3"],
        (1, "runs"), ("summary.json",)),
    "train_char_lm": (
        "train_char_lm", ["--tasks=1", "--train_questions=4", "--valid_questions=2",
                          "--sequence_length=16", "--width=8", "--num_layers=1",
                          "--num_heads=2", "--key_dim=4", "--num_key_value_heads=1",
                          "--window=4,2", "--epochs=2", "--batch_size=8"],
        (1, "epochs"), ("results.json",)),
    "train_babi": (
        "train_babi", ["--tasks=1", "--num_train=32", "--num_valid=16", "--num_test=16",
                       "--entity_dim=4", "--relation_dim=3", "--hidden_dim=8",
                       "--batch_size=16", "--epochs=3"],
        (1, "epochs"), ("results.json",)),
    "same_colour_demo": (
        "same_colour_demo", ["--num_train=64", "--epochs=3"],
        (1, "epochs"), ("results.json", "model.keras")),
    "train_sc2 (compiled)": (
        "train_sc2", _SC2, (1, "updates"),
        ("result.json", "policy/saved_model.pb", "sc2_agent.keras", "sc2_agent.weights.h5")),
}


def command(name, root):
    module, flags, _, _ = BINARIES[name]
    return [sys.executable, "-m", f"keras_relational.experiments.{module}",
            f"--root_dir={root}", *flags]


# (file-system events, seconds from the first event to the end) of an uninterrupted run, as this
# script's reference run (--calibrate) measured them on the shared 2-core machine (seconds None:
# not measured, the kills then come after a random number of events only).
CALIBRATION = {
    "train_boxworld (tf_agents)": (225, None),
    "train_boxworld (compiled)": (67, None),
    "train_relations_game": (96, None),
    "same_colour_demo": (120, None),
    "train_sc2 (compiled)": (52, None),
    # Counted by polling as run_piece does (random_kills._snapshot), not by --calibrate, on the
    # idle machine; its first backup is complete at event 49, 48 s into the run.
    "train_babi": (186, None),
}


def _holds(lock, pid):
    """Whether the lock file ``lock`` names process ``pid`` (``keras_relational.run_lock``)."""
    try:
        with open(lock) as f:
            return json.loads(f.read() or "null").get("pid") == pid
    except (OSError, ValueError, AttributeError):
        return False


def second_start(name, root, timeout=300):
    """Starts the binary on ``root``, and once it holds the root's lock, pauses it (SIGSTOP: a
    tiny run would otherwise finish while the second one imports) and starts it again: the
    second must exit non-zero, naming the first one's process id; the first is then killed
    (SIGKILL). Returns ``(report, failures)``."""
    lock = os.path.join(root, ".run.lock")  # keras_relational.run_lock.FILENAME
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    first = subprocess.Popen(command(name, root), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    failures, report = [], dict(first_pid=first.pid)
    try:
        deadline = time.time() + timeout
        # Until the lock holds the first run's process id: the lock file is created (and
        # locked) a moment before the id is written, and a run paused in between is named as
        # "a process that has not written its id yet".
        while not _holds(lock, first.pid) and first.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        if not _holds(lock, first.pid):
            failures.append(f"second start: the first run took no lock on {root} "
                            f"(exit {first.poll()})")
            return report, failures
        os.killpg(first.pid, signal.SIGSTOP)  # still holding the lock
        start = time.time()
        try:
            second = subprocess.run(command(name, root), capture_output=True, text=True,
                                    env=env, timeout=timeout)
        except subprocess.TimeoutExpired as error:
            failures.append(f"second start: still running after {timeout} s (not refused)")
            report.update(returncode=None, seconds=timeout, names_pid=False,
                          message=str(error.stdout)[-300:])
            return report, failures
        output = second.stdout + second.stderr
        report.update(returncode=second.returncode, seconds=round(time.time() - start, 1),
                      names_pid=bool(re.search(rf"process {first.pid}\b", output)))
        message = [line for line in output.splitlines() if "in use by another run" in line]
        report["message"] = message[-1][-300:] if message else output[-300:]
        if second.returncode == 0 or not report["names_pid"]:
            failures.append(f"second start: not refused naming process {first.pid} (exit "
                            f"{second.returncode}): {output[-1000:]}")
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    return report, failures


def soak_binary(name, workdir, kills, seed, calibrate=False, corrupt_rate=0.5, log=print):
    """Soaks one binary (a second start, an uninterrupted reference run when ``calibrate`` or
    when it has no ``CALIBRATION``, then random kills); returns its report."""
    _, _, (interval, units), outputs = BINARIES[name]
    second, second_failures = second_start(name, os.path.join(workdir, "second"))
    log(f"{name}: second start {second}")
    calibration = None if calibrate else CALIBRATION.get(name)
    if calibration is None:
        reference = os.path.join(workdir, "reference")
        piece = random_kills.run_piece(command(name, reference), reference)
        if piece.returncode != 0:
            return dict(second_start=second, failures=second_failures + [
                f"the uninterrupted run failed: {piece.output[-2000:]}"])
        calibration = (piece.events, round(piece.active_seconds, 1))
        log(f"{name}: uninterrupted run {piece.seconds:.1f} s, {piece.events} events")
    root = os.path.join(workdir, "killed")
    report = random_kills.soak(command(name, root), root, kills, seed,
                               calibration=calibration, corrupt_rate=corrupt_rate, log=log)
    report["failures"] = second_failures + report["failures"]
    report["second_start"] = second
    missing = [p for p in outputs if not os.path.exists(os.path.join(root, p))]
    if missing and report.get("final_returncode") == 0:
        report["failures"].append(f"the finished run lacks {missing}")
    lost = [v for k in report["kills"] for v in k.get("lost", {}).values()]
    resumes = [k for k in report["kills"] if k.get("resumed")]
    report.update(interval=interval, units=units, calibration=calibration,
                  max_lost=max(lost, default=0), resumes=len(resumes),
                  # random_kills checks each resume against the newest state the kill (and any
                  # damage) left valid: a resume from it loses only the work after that state.
                  resumed_from_last_good=sum(
                      1 for k in resumes if all(k["resumed"][s] == k["expected"].get(s)
                                                for s in k["resumed"])))
    return report


# The code a soak exercises: a row's commit says whether it ran with uncommitted changes there.
SOURCES = ("agents", "environments", "experiments", "keras_relational",
           "benchmarks/fault_soak.py", "benchmarks/random_kills.py")


def current_commit():
    """``<short hash>`` of the checkout, ``+ uncommitted changes`` where ``SOURCES`` differ from
    it; ``unknown`` outside a git checkout."""
    def git(*arguments):
        return subprocess.run(["git", *arguments], cwd=results_io.REPO, capture_output=True,
                              text=True, check=True).stdout.strip()
    try:
        commit = git("rev-parse", "--short", "HEAD")
        changed = git("status", "--porcelain", "--", *SOURCES)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + (" + uncommitted changes" if changed else "")


def earlier_reports(path):
    """The per-binary reports of the results file ``path`` (``{}`` where there is none), each
    with the settings and commit it ran with (files written before rows recorded them: the
    file's settings, commit ``not recorded``).

    Raises:
        ValueError: naming ``--output`` when the file is not a results file of this script.
    """
    if not os.path.exists(path):
        return {}
    try:
        with open(path) as f:
            data = json.load(f)
        binaries = data["binaries"]
        reports = {}
        for position, (name, report) in enumerate(binaries.items()):
            report = dict(report)
            if "commit" not in report:  # a row of a file written before rows recorded these
                # Its seed: the file's seed plus the binary's place in its --binaries.
                report.update(seed=data["seed"] + position, corrupt_rate=data["corrupt_rate"],
                              commit="not recorded", command=data["command"])
            reports[name] = report
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"--output expects the results of this script (<output>.json, merged "
                         f"with the binaries soaked now), received {path!r} "
                         f"({type(error).__name__}: {error}); pass --fresh to start it "
                         f"anew.") from None
    return reports


def _table(reports):
    rows = ["| binary | kills (seed, damage rate) | second start refused (names pid) | in a "
            "checkpoint write | in an export | corrupted | resumes | from the last good state | "
            "max work lost | interval | failures | seconds (load) | commit |",
            "|" + "---|" * 13]
    for name, r in reports.items():
        kills = r.get("kills", [])
        count = lambda what, kills=kills: sum(1 for k in kills if k["hit"] == what)  # noqa: E731
        second = r.get("second_start") or {}
        refused = ("-" if "returncode" not in second else
                   f"{'yes' if second['returncode'] != 0 else 'NO'} "
                   f"({'yes' if second.get('names_pid') else 'no'}), "
                   f"{second.get('seconds', 0):.0f} s")
        took = (f"{r['seconds']:.0f} ({r['load']:.1f})" if "seconds" in r and "load" in r
                else "-")
        rows.append(
            f"| {name} | {len(kills)} ({r['seed']}, {r['corrupt_rate']}) | {refused} | "
            f"{count('checkpoint write')} | {count('export')} | "
            f"{sum(1 for k in kills if k['corrupted'])} | "
            f"{r.get('resumes', 0)} | {r.get('resumed_from_last_good', 0)} | "
            f"{r.get('max_lost', '-')} | {r.get('interval', '-')} {r.get('units', '')} | "
            f"{len(r['failures'])} | {took} | {r['commit']} |")
    return "\n".join(rows)


def _write(args, reports):
    body = (f"A second start of each binary on the root directory of a running one (it must "
            f"refuse, naming the first one's process id), then random kills (SIGKILL at a "
            f"seeded-random moment: after a random number of "
            f"file-system events under the run directory, or at a random time of the run), "
            f"tiny settings; the newest saved state "
            f"(checkpoint or backup: truncated or overwritten with random bytes) damaged after a "
            f"kill with the row's probability (damage rate) where an older valid one exists. "
            f"'From the last good state': resumes that continued from the newest state still "
            f"valid after the kill and the damage (so no more than the work since the last good "
            f"checkpoint was lost). Work lost: the newest saved progress "
            f"the killed run had written minus the progress its resume continued from (the "
            f"unfinished interval in flight at the kill is lost as well). Each row is one soak "
            f"of its binary (rows of other commands are kept: their command is in "
            f"{os.path.basename(args.output)}.json), on a shared 2-core machine: seconds and the "
            f"load average at its end; the commit it ran (`+ uncommitted changes`: the "
            f"soaked code differed from it).\n\n{_table(reports)}\n")
    print(body)
    results_io.write_json(args.output + ".json", dict(binaries=reports))
    results_io.write_markdown(args.output + ".md", body)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=4, help="random kills per binary")
    parser.add_argument("--seed", type=int, default=0,
                        help="the first binary's seed; each binary adds its place in BINARIES")
    parser.add_argument("--binaries", default=",".join(BINARIES),
                        help="comma-separated names of BINARIES (default: all)")
    parser.add_argument("--corrupt_rate", type=float, default=0.5,
                        help="probability of damaging the newest saved state after a kill")
    parser.add_argument("--calibrate", action="store_true",
                        help="measure every binary's uninterrupted run first")
    parser.add_argument("--output", default=os.path.join(results_io.RESULTS, "fault_soak"))
    parser.add_argument("--fresh", action="store_true",
                        help="write only the binaries soaked now (default: the rows of the other "
                             "binaries in --output are kept)")
    args = parser.parse_args()
    names = args.binaries.split(",")
    unknown = [name for name in names if name not in BINARIES]
    if unknown:
        parser.error(f"--binaries expects names of {sorted(BINARIES)}, received {unknown}")
    try:
        reports = {} if args.fresh else earlier_reports(args.output + ".json")
    except ValueError as error:
        parser.error(str(error))
    command, failed = results_io.command_line(), False
    for name in names:
        workdir, start = tempfile.mkdtemp(prefix="fault_soak_"), time.time()
        # Seeded by its place in BINARIES: a binary soaked alone gets a full run's seed.
        seed = args.seed + list(BINARIES).index(name)
        try:
            report = soak_binary(name, workdir, args.kills, seed, args.calibrate,
                                 args.corrupt_rate)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        report.update(seed=seed, corrupt_rate=args.corrupt_rate, commit=current_commit(),
                      command=command, seconds=round(time.time() - start),
                      load=round(os.getloadavg()[0], 1))
        for failure in report["failures"]:
            print(f"  FAILED: {failure[:500]}", flush=True)
        failed = failed or bool(report["failures"])
        reports[name] = report
        # In BINARIES' order; written after each binary: a partial soak keeps its data.
        _write(args, {n: reports[n] for n in BINARIES if n in reports})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
