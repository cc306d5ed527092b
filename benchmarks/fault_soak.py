"""Random-kill soak of every training binary: kills at random moments, corrupt states, resumes.

    nice -n 19 python benchmarks/fault_soak.py --kills=4 --seed=0

For each binary (tiny settings): one uninterrupted run (how many file-system events and seconds
a run takes), then ``--kills`` runs of the same command on one ``root_dir``, each sent SIGKILL at
a seeded-random moment, with the newest saved state corrupted between some of them, then a run
to completion (``keras_relational.random_kills.soak``). Writes ``benchmarks/results/
fault_soak.json`` and ``.md``: per binary the kills, what they interrupted (told by the
temporaries they left), the resumes, the work lost (saved progress the kill had seen minus the
progress the resume continued from, in the units of the checkpoint interval) and every failed
check.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import results_io  # noqa: E402
from keras_relational import random_kills  # noqa: E402

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
}


def soak_binary(name, workdir, kills, seed, calibrate=False, log=print):
    """Soaks one binary (after an uninterrupted reference run, when ``calibrate`` or when it
    has no ``CALIBRATION``); returns its report."""
    _, _, (interval, units), outputs = BINARIES[name]
    calibration = None if calibrate else CALIBRATION.get(name)
    if calibration is None:
        reference = os.path.join(workdir, "reference")
        piece = random_kills.run_piece(command(name, reference), reference)
        if piece.returncode != 0:
            return dict(failures=[f"the uninterrupted run failed: {piece.output[-2000:]}"])
        calibration = (piece.events, round(piece.active_seconds, 1))
        log(f"{name}: uninterrupted run {piece.seconds:.1f} s, {piece.events} events")
    root = os.path.join(workdir, "killed")
    report = random_kills.soak(command(name, root), root, kills, seed,
                               calibration=calibration, log=log)
    missing = [p for p in outputs if not os.path.exists(os.path.join(root, p))]
    if missing and report.get("final_returncode") == 0:
        report["failures"].append(f"the finished run lacks {missing}")
    lost = [v for k in report["kills"] for v in k.get("lost", {}).values()]
    report.update(interval=interval, units=units, calibration=calibration,
                  max_lost=max(lost, default=0),
                  resumes=sum(1 for k in report["kills"] if k.get("resumed")))
    return report


def _table(reports):
    rows = ["| binary | kills | in a checkpoint write | in an export | resumes | corrupted "
            "| max work lost | interval | failures |", "|" + "---|" * 9]
    for name, r in reports.items():
        kills = r.get("kills", [])
        count = lambda what, kills=kills: sum(1 for k in kills if k["hit"] == what)  # noqa: E731
        rows.append(
            f"| {name} | {len(kills)} | {count('checkpoint write')} | {count('export')} | "
            f"{r.get('resumes', 0)} | {sum(1 for k in kills if k['corrupted'])} | "
            f"{r.get('max_lost', '-')} | {r.get('interval', '-')} {r.get('units', '')} | "
            f"{len(r['failures'])} |")
    return "\n".join(rows)


def _write(args, reports, seconds):
    load = os.getloadavg()
    body = (f"Random kills (SIGKILL at a seeded-random moment: after a random number of "
            f"file-system events under the run directory, or at a random time of the run), "
            f"{args.kills} per binary, seed {args.seed}, tiny settings; the newest saved state "
            f"corrupted after about a third of the kills. Work lost: the newest saved progress "
            f"the killed run had written minus the progress its resume continued from (the "
            f"unfinished interval in flight at the kill is lost as well). "
            f"{seconds:.0f} s on a shared 2-core machine (load average {load[0]:.1f} at the "
            f"end).\n\n{_table(reports)}\n")
    print(body)
    results_io.write_json(args.output + ".json", dict(kills=args.kills, seed=args.seed,
                                                      binaries=reports))
    results_io.write_markdown(args.output + ".md", body)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=4, help="random kills per binary")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--binaries", default=",".join(BINARIES),
                        help="comma-separated names of BINARIES (default: all)")
    parser.add_argument("--calibrate", action="store_true",
                        help="measure every binary's uninterrupted run first")
    parser.add_argument("--output", default=os.path.join(results_io.RESULTS, "fault_soak"))
    args = parser.parse_args()
    reports, start = {}, time.time()
    for offset, name in enumerate(args.binaries.split(",")):
        workdir = tempfile.mkdtemp(prefix="fault_soak_")
        try:
            reports[name] = soak_binary(name, workdir, args.kills, args.seed + offset,
                                        args.calibrate)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        for failure in reports[name]["failures"]:
            print(f"  FAILED: {failure[:500]}", flush=True)
        _write(args, reports, time.time() - start)  # each time: a partial soak keeps its data
    return 1 if any(r["failures"] for r in reports.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
