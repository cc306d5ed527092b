"""The actor's half of a training checkpoint, so that a resumed run continues bit-identically.

A TensorFlow training checkpoint ``ckpt-<step>`` holds the agent (weights, optimizer slots) and the
train step. What the in-process actor does next also depends on state outside TensorFlow's
variables: the batched NumPy environments (every slot's level-generator ``RandomState`` and draw
buffer, the levels in flight, the agents' positions, held keys and step counters, the running
returns), the actor's last time step, the steps the :class:`UnrollQueue` holds toward the next
unroll and any unroll queued for the learner, the stateless sampler's counter
(:class:`~keras_relational.agents.tf_agents.acting.ActorCriticPolicy` ``sampling_seed``), and the
episodes finished since the last progress line (the next line's solve rate counts them). They go to
``ckpt-<step>.actor.pkl`` beside the checkpoint (a pickle: NumPy arrays and the environment
object), written to a temporary file and renamed *before* TensorFlow writes ``ckpt-<step>``, so a
process killed at any moment never leaves a checkpoint without its actor state.

On a resume :func:`restore` loads the file of the step the Learner restored and checks that it was
written by a run with the same settings (``num_envs``, ``unroll_length``, ``seed``, the
environment, the trainer's kind): a different value is a :class:`ActorStateError` naming it. A
checkpoint without the file (written before this file existed, or by a setting that does not save
one: PPO, ``env_backend="tensor"``, Ray actors) resumes the weights and the optimizer with fresh
environments and sampling, after a warning that says so: that continuation differs from an
uninterrupted run.
"""

import os
import pickle

import numpy as np

from keras_relational.agents.tf_agents import checkpoints

SUFFIX = checkpoints.ACTOR_SUFFIX
FORMAT = 1  # bump when the saved fields change


class ActorStateError(RuntimeError):
    """A checkpoint's actor state cannot be restored into this run."""


def path_for(root_dir, step):
    """``root_dir/train/checkpoints/ckpt-<step>.actor.pkl``."""
    return os.path.join(checkpoints.checkpoint_dir(root_dir), f"ckpt-{int(step)}{SUFFIX}")


def fingerprint(config):
    """The settings an actor state belongs to (a resume with others is refused)."""
    return dict(format=FORMAT, num_envs=config.num_envs, unroll_length=config.unroll_length,
                seed=config.seed, environment=repr(config.environment),
                algorithm=config.algorithm, env_backend=config.env_backend,
                num_ray_actors=config.num_ray_actors)


def supported(config):
    """Whether runs of ``config`` save their actor state: V-trace (stateless sampling) with the
    in-process actor on the NumPy environments."""
    return (config.algorithm == "vtrace" and config.env_backend == "numpy"
            and not config.num_ray_actors)


class ActorState:
    """Saves and restores the actor's state of one run next to its training checkpoints.

    Args:
        root_dir: the run's directory.
        config: the run's :class:`~keras_relational.agents.config.TFAgentsConfig`.

    :meth:`attach` names the objects whose state it saves once they exist.
    """

    def __init__(self, root_dir, config):
        self._root_dir = root_dir
        self._fingerprint = fingerprint(config)
        self._env = self._actor = self._unrolls = self._policy = None
        self._episodes_reported = False
        # Set by the training loop: the episodes finished since the last progress line.
        self.pending_episodes = lambda: []

    def attach(self, env, actor, unrolls, policy):
        """``env``: the :class:`BatchedBoxWorldEnvironment` the actor steps; ``actor``: the
        :class:`~keras_relational.agents.tf_agents.acting.ResumableActor`; ``unrolls``: the
        :class:`UnrollQueue`; ``policy``: the actor's :class:`ActorCriticPolicy` (with
        ``sampling_seed``)."""
        self._env, self._actor, self._unrolls, self._policy = env, actor, unrolls, policy

    def _state(self, step):
        return dict(fingerprint=self._fingerprint, step=int(step), env=self._env.get_state(),
                    actor=self._actor.get_state(), unrolls=self._unrolls.get_state(),
                    sample_count=int(self._policy.sample_count.numpy()),
                    pending_episodes=list(self.pending_episodes()))

    def save(self, step):
        """Writes ``ckpt-<step>.actor.pkl`` atomically (call it before the TF checkpoint)."""
        path = path_for(self._root_dir, step)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f"{path}.tmp"
        with open(temporary, "wb") as f:
            pickle.dump(self._state(step), f, protocol=pickle.HIGHEST_PROTOCOL)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)

    def prune(self):
        """Deletes the actor states whose TF checkpoint is gone (``max_to_keep``), and the
        temporary files of writes that a killed process left."""
        directory = checkpoints.checkpoint_dir(self._root_dir)
        for name in os.listdir(directory):
            orphan = name.endswith(SUFFIX) and not os.path.exists(
                os.path.join(directory, name[:-len(SUFFIX)] + ".index"))
            if orphan or name.endswith(SUFFIX + ".tmp"):
                os.unlink(os.path.join(directory, name))

    def restore(self, step, warn=print, episodes_reported=False):
        """Restores the state saved with ``ckpt-<step>``; True if restored, False (after a
        warning) when that checkpoint has none. ``episodes_reported``: the progress line of
        ``step`` was written (after the checkpoint) and counted the pending episodes."""
        self._episodes_reported = episodes_reported
        return restore(self._root_dir, step, self._fingerprint, self, warn)

    def load(self, state):
        self._env.set_state(state["env"])
        self._actor.set_state(state["actor"])
        self._unrolls.set_state(state["unrolls"])
        self._policy.sample_count.assign(np.int64(state["sample_count"]))
        if not self._episodes_reported:  # the next progress line counts them
            self._env.finished_episodes.extend(state["pending_episodes"])


def missing_warning(root_dir, step):
    """The warning of a resume from ``ckpt-<step>`` without its actor state."""
    prefix = os.path.join(checkpoints.checkpoint_dir(root_dir), f"ckpt-{step}")
    return (f"WARNING: the checkpoint {prefix} has no actor state (ckpt-{step}{SUFFIX}: "
            f"written before it existed, or by PPO, env_backend='tensor' or Ray actors): "
            f"resuming the weights and the optimizer with fresh environments and sampling; "
            f"the run continues differently from an uninterrupted one.")


def restore(root_dir, step, expected, target, warn=print):
    """Loads ``ckpt-<step>``'s actor state into ``target`` (an :class:`ActorState`).

    ``expected`` is this run's :func:`fingerprint`. Returns False after ``warn`` when there is
    no state file; raises :class:`ActorStateError` for an unreadable one or other settings.
    """
    path = path_for(root_dir, step)
    if not os.path.exists(path):
        warn(missing_warning(root_dir, step))
        return False
    try:
        with open(path, "rb") as f:
            state = pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError) as error:
        raise ActorStateError(
            f"The actor state {path} cannot be read ({type(error).__name__}: {error}). Delete "
            f"it to resume the weights only, with fresh environments.") from error
    saved = state.get("fingerprint", {})
    for key, value in expected.items():
        if saved.get(key) != value:
            raise ActorStateError(
                f"The actor state {path} was saved by a run with {key}={saved.get(key)!r}; this "
                f"run has {key}={value!r}. Resume with the same settings, or delete {path} to "
                f"resume the weights only, with fresh environments.")
    if state.get("step") != step:
        raise ActorStateError(f"The actor state {path} is of train step {state.get('step')}, "
                              f"its checkpoint of step {step}.")
    target.load(state)
    return True
