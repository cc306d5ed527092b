"""Evaluation: a policy played on fresh levels, solve rates overall and per puzzle type."""

import numpy as np
import tensorflow as tf
from tf_agents.drivers import py_driver
from tf_agents.policies import py_tf_eager_policy

from keras_relational.agents.tf_agents.boxworld_environment import make_boxworld_environment


def solve_rate(episodes):
    """Fraction of ``episodes`` (``EpisodeResult``) solved; NaN for none."""
    return float(np.mean([e.solved for e in episodes])) if episodes else float("nan")


def evaluate(policy, environment, num_episodes, seed, num_envs, max_batched_steps=10_000):
    """Plays ``num_episodes`` episodes with ``policy`` (a TF policy); returns their results.

    Args:
        policy: a TF-Agents TF policy.
        environment: the levels, an environment config
            (``keras_relational.environments.BoxWorldConfig`` or ``BridgeConfig``).
        num_episodes: episodes to return (the first to finish).
        seed: level seed.
        num_envs: levels played together (at most ``num_episodes``).
        max_batched_steps: a cap on the batched steps, for policies that never finish.

    Returns:
        The ``EpisodeResult`` of the first ``num_episodes`` finished episodes.
    """
    num_envs = min(num_episodes, num_envs)
    env = make_boxworld_environment(environment, num_envs=num_envs, seed=seed)
    py_policy = py_tf_eager_policy.PyTFEagerPolicy(policy, use_tf_function=True)
    # Counting an episode at its LAST step, when the environment records it.
    driver = py_driver.PyDriver(env, py_policy, observers=[],
                                max_steps=max_batched_steps * num_envs,
                                max_episodes=num_episodes, end_episode_on_boundary=False)
    driver.run(env.reset())
    return env.finished_episodes[:num_episodes]


class EvalSummaries:
    """Writes and prints the results of evaluations (TensorBoard under ``summary_dir``).

    Calling it with ``(step, name, episodes)`` writes ``name/solve_rate``,
    ``name/average_return``, ``name/average_episode_length`` and
    ``name/solve_rate_puzzle_<a_b_c>`` per bridge puzzle type (flushed at once), prints one
    line, and returns the solve rate.
    """

    def __init__(self, summary_dir, print_fn=print):
        self._writer = tf.summary.create_file_writer(summary_dir)
        self._print = print_fn

    def __call__(self, step, name, episodes):
        rate = solve_rate(episodes)
        by_type = {}
        for episode in episodes:
            if episode.puzzle_type is not None:
                by_type.setdefault(tuple(episode.puzzle_type), []).append(episode)
        with self._writer.as_default(step=step):
            tf.summary.scalar(f"{name}/solve_rate", rate)
            tf.summary.scalar(f"{name}/average_return",
                              np.mean([e.episode_return for e in episodes]))
            tf.summary.scalar(f"{name}/average_episode_length",
                              np.mean([e.length for e in episodes]))
            for puzzle_type, group in sorted(by_type.items()):
                label = "_".join(str(v) for v in puzzle_type)
                tf.summary.scalar(f"{name}/solve_rate_puzzle_{label}", solve_rate(group))
        self._writer.flush()
        per_type = "".join(f", {t}: {100 * solve_rate(g):.0f}% of {len(g)}"
                           for t, g in sorted(by_type.items()))
        self._print(f"{name} @ step {step}: solved {100 * rate:.1f}% of {len(episodes)} "
                    f"episodes{per_type}")
        return rate
