import glob
import json
import os
import re
import subprocess
import sys
import time

import pytest
import tensorboard_tags
import warm_python
from kill_checks import kill_after_checkpoint

from keras_relational.agents.tf_agents.train_eval import train_eval

# Grappler off: its passes over each new function cost these tiny runs more than they save.
pytestmark = pytest.mark.usefixtures("no_graph_optimizer")

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_TINY = dict(env_kwargs=dict(goal_length=1, num_distractors=0), num_envs=4, unroll_length=5,
             model_kwargs=dict(key_dim=8, mlp_hidden_units=(16,), head_units=(16,)),
             log_interval=1)


def _checkpoint_steps(root):
    files = glob.glob(os.path.join(root, "train", "checkpoints", "ckpt-*.index"))
    return sorted(int(f.rsplit("-", 1)[1].split(".")[0]) for f in files)


@pytest.mark.slow
def test_smoke_trains_exports_and_plays(tmp_path):
    root = str(tmp_path / "run")
    lines = []
    result = train_eval(root, num_iterations=2, eval_episodes=4, print_fn=lines.append,
                        test_presets=("test_length_6",), **_TINY)
    assert result["train_step"] == 2
    assert result["actor_jit_compile"] is True  # V-trace acts through the XLA copy by default
    assert set(result["test_solve_rates"]) == {"test_length_6"}
    assert any(line.startswith("test_length_6 @ step 2: solved") for line in lines), lines
    assert any("frames/s" in line and "acting" in line for line in lines), lines
    # Acting and learning time are accounted separately and fill each progress interval.
    for entry in result["history"]:
        assert entry["acting_seconds"] > 0 and entry["learning_seconds"] > 0, entry
    history = result["history"]
    for previous, entry in zip(history, history[1:], strict=False):
        interval = entry["seconds"] - previous["seconds"]
        assert entry["acting_seconds"] + entry["learning_seconds"] <= interval + 1e-3
    assert _checkpoint_steps(root)[-1] == 2
    for policy in ("policy", "collect_policy", "greedy_policy"):
        assert os.path.exists(os.path.join(root, "policies", policy, "saved_model.pb")), policy
    assert os.path.exists(os.path.join(result["keras_model_dir"], "saved_model.pb"))
    import keras

    reloaded = keras.saving.load_model(result["keras_file"])
    assert reloaded.count_params() > 0
    # Every exported policy carries the trained weights (TF-Agents' trigger alone would have
    # left the initial ones in the SavedModels and written the trained ones only to checkpoints).
    import numpy as np
    import tensorflow as tf

    trained = sorted((w.shape, np.asarray(w).tobytes()) for w in reloaded.get_weights())
    for policy in ("policy", "collect_policy", "greedy_policy"):
        saved = tf.saved_model.load(os.path.join(root, "policies", policy))
        exported = sorted((tuple(v.shape), v.numpy().tobytes()) for v in saved.model_variables)
        assert exported == trained, f"{policy} was exported without the trained weights"
    with open(os.path.join(root, "result.json")) as f:
        assert json.load(f)["train_step"] == 2
    # TensorBoard: the collect metrics of the in-process actor, evaluations and presets.
    collect = tensorboard_tags.scalar_tags(os.path.join(root, "collect"))
    assert set(tensorboard_tags.COLLECT_TAGS) <= set(collect), sorted(collect)
    assert [step for step, _ in collect["Metrics/EnvironmentSteps"]] == [1, 2]
    assert [v for _, v in collect["Metrics/EnvironmentSteps"]] == [20, 40]  # 4 envs x 5 steps
    evaluations = tensorboard_tags.scalar_tags(os.path.join(root, "eval"))
    for name in ("eval", "test_length_6"):
        for metric in ("solve_rate", "average_return", "average_episode_length"):
            assert f"{name}/{metric}" in evaluations, sorted(evaluations)
    # The learning curves and the attention of the trained agent, drawn from the run.
    from keras_relational.experiments import plots_lib

    curves = plots_lib.plot_learning_curves(root)
    assert curves == os.path.join(root, "learning_curves.png") and _is_png(curves)
    drawn = plots_lib.plot_agent_attention(reloaded, str(tmp_path / "attention.png"),
                                                steps=2, goal_length=(1,), num_distractors=(0,))
    assert _is_png(drawn)
    # The exported policy plays in a fresh process with no training code (play_boxworld).
    played = subprocess.run(
        [sys.executable, "-m", "keras_relational.experiments.play_boxworld",
         f"--policy_dir={os.path.join(root, 'policies', 'collect_policy')}", "--goal_length=1",
         "--num_distractors=0", "--episodes=2"], cwd=_REPO_ROOT, capture_output=True,
        text=True, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert played.returncode == 0, played.stderr[-3000:]
    assert re.search(r"^episode 1: return -?[\d.]+, \d+ steps, (not )?solved$", played.stdout,
                     re.M), played.stdout
    assert re.search(r"^solved [0-2] of 2$", played.stdout, re.M), played.stdout


def _is_png(path):
    with open(path, "rb") as f:
        return f.read(8) == b"\x89PNG\r\n\x1a\n"


def _train_command(root, num_iterations):
    # The absl binary (its flags, its checks, its resume), as a user starts it: uncompiled learner
    # and actor, no periodic policy SavedModels: no XLA compile in either process, and only the
    # finished run exports (the smoke test compiles; test_train_eval_faults.py resumes with the
    # policy saver); what is tested is the kill and the resume. A small room (6, not 12) for
    # a cheaper acting step. tests/test_random_kills.py leaves this binary's kill to this test.
    return [sys.executable, "-m", "keras_relational.experiments.train_boxworld",
            f"--root_dir={root}", f"--num_iterations={num_iterations}", "--checkpoint_interval=2",
            "--eval_episodes=0", "--policy_save_interval=0", "--nojit_compile",
            "--noactor_jit_compile", "--goal_length=1", "--num_distractors=0", "--num_envs=4",
            "--unroll_length=5", "--room_size=6", "--key_dim=8", "--head_width=16",
            "--log_interval=1"]


# Known start-up noise of the dependencies, and warnings a clean run does not print.
_NOISE = (r"cuInit", r"Could not find cuda drivers", r"absl::InitializeLog", r"oneDNN",
          r"cpu_feature_guard", r"Gym has been unmaintained", r"StructuredValue",
          r"SyntaxWarning", r"UserWarning", r"DeprecationWarning")


@pytest.mark.slow
def test_resumes_after_kill_9(tmp_path):
    """A training process killed with SIGKILL resumes from its last checkpoint when restarted."""
    root = str(tmp_path / "run")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    # Both processes forked from a server that imported the TF-Agents trainer, as the binary
    # imports it first (tests/warm_python.py).
    killed_at = kill_after_checkpoint(_train_command(root, 10_000),
                                      lambda: _checkpoint_steps(root), at_least=4, timeout=240,
                                      poll_seconds=1, popen=warm_python.Popen,
                                      preload=warm_python.TF_AGENTS_PRELOAD, cwd=_REPO_ROOT,
                                      env=env)
    restarted = warm_python.run(_train_command(root, killed_at + 2), cwd=_REPO_ROOT, env=env,
                                capture_output=True, text=True, timeout=300,
                                preload=warm_python.TF_AGENTS_PRELOAD)
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    assert f"Resuming from {root}: train step {killed_at}" in restarted.stdout, restarted.stdout
    with open(os.path.join(root, "result.json")) as f:
        assert json.load(f)["train_step"] == killed_at + 2
    assert _checkpoint_steps(root)[-1] == killed_at + 2
    assert os.path.exists(os.path.join(root, "policies", "greedy_policy", "saved_model.pb"))


@pytest.mark.slow
def test_bridge_simplicial_smoke_reports_puzzle_types(tmp_path, no_exports):
    # Without the exports (most of the run's time): the simplicial agent's are exported and
    # served by colab/simplicial_bridge_boxworld.ipynb (tests/test_notebooks.py).
    lines = []
    result = train_eval(str(tmp_path / "bridge"), env_name="bridge", agent="simplicial",
                        num_iterations=1, num_envs=4, unroll_length=5, eval_episodes=4,
                        env_kwargs=dict(max_steps=30),
                        model_kwargs=dict(key_dim=8, simplicial_key_dim=8, head_units=(16,),
                                          num_blocks=1),
                        print_fn=lines.append)
    assert result["train_step"] == 1
    eval_line = [line for line in lines if line.startswith("eval @")][0]
    assert "of 4 episodes, (" in eval_line  # per-puzzle-type rates follow
    evaluations = tensorboard_tags.scalar_tags(str(tmp_path / "bridge" / "eval"))
    assert any(tag.startswith("eval/solve_rate_puzzle_") for tag in evaluations), evaluations


def test_invalid_arguments_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="algorithm.*'a3c'"):
        train_eval(str(tmp_path), algorithm="a3c")
    with pytest.raises(ValueError, match="test_presets.*'test_length_7'"):
        train_eval(str(tmp_path), test_presets=("test_length_7",))
    with pytest.raises(ValueError, match="`optimizer` must be one of .*received 'sgd'"):
        train_eval(str(tmp_path), optimizer="sgd")
    # V-trace-only options are refused with PPO instead of being silently ignored.
    with pytest.raises(ValueError, match=r"\['optimizer', 'reward_scale'\] apply to "
                                         r"algorithm='vtrace' only.*'rmsprop'"):
        train_eval(str(tmp_path), algorithm="ppo", optimizer="rmsprop", reward_scale=0.1)
    with pytest.raises(ValueError, match=r"\['actor_jit_compile', 'vtrace_lambda'\]"):
        train_eval(str(tmp_path), algorithm="ppo", vtrace_lambda=0.9, actor_jit_compile=True)


@pytest.mark.slow
def test_ppo_smoke(tmp_path, capsys, no_policy_trigger):
    """TF-Agents' PPOClipAgent trains our Keras 3 networks through the same loop; printing to a
    stream that is not a terminal (a log, a pipe), the lines are plain, with no progress bar."""
    root = str(tmp_path / "ppo")
    # Two epochs (the default is 4): TF-Agents traces one copy of the loss per epoch, and two
    # learner steps (one per epoch) already come from one batch of unrolls.
    result = train_eval(root, algorithm="ppo", num_iterations=2, eval_episodes=0, ppo_epochs=2,
                        **_TINY)
    printed = capsys.readouterr().out
    assert "\r" not in printed and "\033[K" not in printed and " updates |" not in printed
    assert re.search(r"^step +\d+ \| frames +\d+ \| +\d+ frames/s \|.* \| ETA (\?|\d+:\d\d)$",
                     printed, re.M), printed
    assert result["train_step"] >= 2
    assert result["actor_jit_compile"] is False  # PPO's collect policy is TF-Agents' own
    assert os.path.exists(os.path.join(root, "policies", "greedy_policy", "saved_model.pb"))


# `make demo` as a new user sees it: the demo's flags (benchmarks/demo_flags.txt) at tiny sizes
# (later flags win), run under a pseudo-terminal. Every piece of the console is one of ours.
_DEMO_FLAGS_FILE = os.path.join(_REPO_ROOT, "benchmarks", "demo_flags.txt")
_TINY_DEMO = ["--num_iterations=2", "--num_envs=4", "--unroll_length=5", "--log_interval=1",
              "--eval_episodes=2", "--room_size=5", "--key_dim=8", "--head_width=16",
              "--vtrace_lambda=0.9", "--max_seconds=600"]
_BAR = (r"\[[#.]{24}\] [0-2]/2 updates( \| \d+ frames \| \d+ frames/s)? \| \d+:\d\d elapsed "
        r"\| ETA (\?|\d+:\d\d)")
_OUR_LINES = (
    r"Training relational agent \([\d,]+ parameters, vtrace, compiled under \w+\) on "
    r"original BoxWorld: 4 envs x 5 steps per update, 2 updates",
    r"step +[12] \| frames +\d+ \| +\d+ frames/s \| episodes +\d+ \| return +(nan|-?\d+\.\d\d) \| "
    r"solved +(nan|\d+\.\d)% \| loss +-?\d+\.\d{3} \| ETA (\?|\d+:\d\d)",
    r"eval @ step 2: solved \d+\.\d% of 2 episodes",
    r"exporting the Keras model to \S+",
    r"done: step 2, eval solve rate \d+\.\d% \(sampled actions\), Keras model in "
    r"\S+/keras_model\.keras",
)


# Ours too, where the backend compiles the update ahead of the first one (JAX).
_OPTIONAL_LINES = (r"compiled the update in \d+\.\d s",)


def _run_in_terminal(command, env, timeout):
    """Runs ``command`` with a pseudo-terminal as stdin, stdout and stderr (what a user's
    terminal shows, both streams interleaved); returns (exit code, the bytes read)."""
    pty = pytest.importorskip("pty", reason="needs a POSIX pseudo-terminal")
    import select

    controller, terminal = pty.openpty()
    process = subprocess.Popen(command, cwd=_REPO_ROOT, env=env, stdin=terminal,
                               stdout=terminal, stderr=terminal, close_fds=True)
    os.close(terminal)
    chunks, deadline = [], time.time() + timeout
    try:
        while time.time() < deadline:
            if not select.select([controller], [], [], 1.0)[0]:
                continue
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        else:
            process.kill()
        return process.wait(timeout=30), b"".join(chunks).decode(errors="replace")
    finally:
        os.close(controller)


@pytest.mark.slow
@pytest.mark.subprocess
def test_the_demo_on_a_terminal_shows_our_lines_and_a_live_progress_bar(tmp_path):
    """``make demo``'s command (its flags at tiny sizes) under a pseudo-terminal: the console
    holds only our lines and the progress bar redrawn in place (carriage returns), none of the
    dependencies' noise; the flags reach train_eval and the run exports."""
    root = str(tmp_path / "demo")
    with open(_DEMO_FLAGS_FILE) as f:
        demo_flags = f.read().split()
    command = [sys.executable, "-m", "keras_relational.experiments.train_boxworld",
               f"--root_dir={root}", *demo_flags, *_TINY_DEMO]
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # the binary's own
    code, console_text = _run_in_terminal(command, dict(env, TERM="xterm"), timeout=600)
    assert code == 0, console_text[-3000:]
    noise = [pattern for pattern in _NOISE if re.search(pattern, console_text)]
    assert not noise, f"{noise} in:\n{console_text[-3000:]}"
    # The terminal turns each "\n" into "\r\n"; the bar's redraws start with "\r\033[K".
    lines = console_text.replace("\r\n", "\n").split("\n")
    assert lines[-1] == "", console_text[-300:]
    bar_frames = []
    for line in lines[:-1]:
        first, *redraws = line.split("\r\033[K")
        bar_frames += [piece for piece in redraws if re.fullmatch(_BAR, piece)]
        strangers = [piece for piece in (first, *redraws) if piece
                     and not any(re.fullmatch(p, piece)
                                 for p in (_BAR, *_OUR_LINES, *_OPTIONAL_LINES))]
        assert not strangers, f"not ours: {strangers} in:\n{console_text[-3000:]}"
    assert any(p.startswith("[" + "#" * 24 + "] 2/2 updates | 40 frames") for p in bar_frames), \
        bar_frames
    for pattern in _OUR_LINES:
        assert re.search(pattern, console_text), (pattern, console_text[-3000:])
    with open(os.path.join(root, "result.json")) as f:
        assert json.load(f)["train_step"] == 2
    import keras

    model = keras.saving.load_model(os.path.join(root, "keras_model.keras"))
    assert model.input_shape[-1] > 3  # the demo's one-hot channels, not RGB
    assert model.get_layer("relational_agent_rescale").scale == 1.0


def test_play_refuses_an_environment_the_policy_was_not_trained_on():
    import tensorflow as tf

    from keras_relational import environments
    from keras_relational.agents.play import check_environment_matches

    one_hot_6x6 = tf.TensorSpec((None, 8, 8, 44), tf.float32)
    check_environment_matches(one_hot_6x6, environments.BoxWorld(
        room_size=6, observation_type="one_hot", goal_length=1, num_distractors=0))
    with pytest.raises(ValueError, match=r"shape \(8, 8, 44\).*float32.*--room_size.*"
                                         r"shape \(14, 14, 3\) and dtype uint8"):
        check_environment_matches(one_hot_6x6, environments.BoxWorld(goal_length=1,
                                                                      num_distractors=0))


def test_test_presets_are_evaluated_on_the_training_observations(tmp_path, no_exports):
    """A one-hot-trained policy is evaluated zero-shot on one-hot preset levels (the preset's
    level parameters, the rest of the training environment), not on RGB frames."""
    lines = []
    result = train_eval(str(tmp_path / "one_hot"), num_iterations=1, eval_episodes=2,
                        test_presets=("test_length_6",), print_fn=lines.append,
                        **dict(_TINY, env_kwargs=dict(goal_length=1, num_distractors=0,
                                                      observation_type="one_hot", max_steps=20)))
    assert set(result["test_solve_rates"]) == {"test_length_6"}
    assert any(line.startswith("test_length_6 @ step 1: solved") for line in lines), lines
