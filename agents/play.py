"""Plays dm_env BoxWorld episodes with a trained agent (no training code needed).

Two kinds of trained agent play, each as a policy ``timestep -> action`` (as
``keras_relational.environments.OraclePolicy``) with an ``observation_spec``:

* :class:`KerasModelPolicy`: the Keras 3 agent network, ``<root_dir>/keras_model.keras``, which
  both trainers of ``train_boxworld`` write (:func:`load_model`). Greedy (the argmax of the
  logits) or sampling the logits with a seeded NumPy generator. It needs neither TensorFlow nor
  TF-Agents under JAX.
* :class:`SavedModelPolicy`: a TF-Agents PolicySaver SavedModel, such as
  ``<root_dir>/policies/greedy_policy``, which only the TF-Agents trainer writes
  (:func:`load_policy`, which imports ``keras_relational.agents.tf_agents`` first).

:func:`play` plays episodes with either (it is what
``python -m keras_relational.experiments.play_boxworld`` runs); :func:`check_environment_matches`
refuses a level whose observations the agent was not trained on.

Example::

    from keras_relational import environments
    from keras_relational.agents.play import KerasModelPolicy, load_model, play

    policy = KerasModelPolicy(load_model("/tmp/boxworld/keras_model.keras"), greedy=True)
    env = environments.BoxWorld(goal_length=1, num_distractors=0, room_size=6,
                                observation_type="one_hot", seed=0)
    results, _ = play(policy, env, episodes=10)
"""

import collections
import os
import sys

import numpy as np

from keras_relational.validation import check_int_at_least, invalid_value

ObservationSpec = collections.namedtuple("ObservationSpec", ["shape", "dtype"])
ObservationSpec.__doc__ = """One batched observation an agent takes: ``shape`` ``(None, H, W, C)``
and the NumPy ``dtype`` of the environment observations it plays on (uint8: RGB, float32:
one-hot)."""

_MODEL_EXPECTED = ("a Keras agent model file such as <root_dir>/keras_model.keras (train_boxworld "
                   "writes it with either trainer), mapping an observation [B, H, W, C] to "
                   "(logits [B, A], value [B])")


def load_model(path):
    """Loads a Keras 3 agent model (``<root_dir>/keras_model.keras``) for play.

    Registers the package's layers first (``import keras_relational.layers``), so any of the
    Box-World agents loads in a fresh process, under any Keras backend.

    Returns:
        The ``keras.Model``: observation ``[B, H, W, C]`` -> ``(logits [B, A], value [B])``.

    Raises:
        ValueError: naming ``model``, when ``path`` is not an existing ``.keras`` file, cannot be
            loaded, or is a model of another shape (e.g. with the attention as a third output).
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise invalid_value("model", _MODEL_EXPECTED, f"{path} (a directory: the SavedModel "
                            "<root_dir>/keras_model is the serving export, play its .keras file)")
    if not os.path.isfile(path):
        raise invalid_value("model", _MODEL_EXPECTED, f"{path} (no such file)")
    if not path.endswith(".keras"):
        raise invalid_value("model", _MODEL_EXPECTED, f"{path} (not a .keras file)")
    import keras

    import keras_relational.layers  # noqa: F401  (registers the layers for load_model)

    try:
        model = keras.saving.load_model(path, compile=False)
    except Exception as error:  # a damaged file, or layers this package does not define
        raise invalid_value("model", _MODEL_EXPECTED,
                            f"{path} (not loadable: {type(error).__name__}: {error})") from error
    if not _is_agent_model(model):
        inputs = [tuple(t.shape) for t in getattr(model, "inputs", None) or []]
        outputs = [tuple(t.shape) for t in getattr(model, "outputs", None) or []]
        raise invalid_value("model", _MODEL_EXPECTED,
                            f"{path} (a model with input shapes {inputs} and output shapes "
                            f"{outputs})")
    return model


def _is_agent_model(model):
    inputs, outputs = getattr(model, "inputs", None), getattr(model, "outputs", None)
    if not inputs or not outputs or len(inputs) != 1 or len(outputs) != 2:
        return False
    logits, value = (tuple(t.shape) for t in outputs)
    return (len(inputs[0].shape) == 4 and len(logits) == 2 and logits[1] is not None
            and len(value) == 1)


class KerasModelPolicy:
    """A Keras 3 agent model as a policy: ``act(observation) -> action``.

    ``greedy``: the argmax of the logits; otherwise an action sampled from
    ``softmax(logits)`` with a NumPy generator seeded by ``seed`` (the Gumbel-max trick), so a
    seed plays the same episodes. One observation a step, through ``model.predict_on_batch``
    (compiled once).

    Args:
        model: a ``keras.Model`` from :func:`load_model`, or its path.
        greedy: argmax (True) or sampling (False).
        seed: the sampling generator's seed (unused when greedy).
    """

    def __init__(self, model, greedy=True, seed=0):
        if isinstance(model, (str, os.PathLike)):
            model = load_model(model)
        import keras

        self.model = model
        self.greedy = bool(greedy)
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._input_dtype = keras.backend.standardize_dtype(model.inputs[0].dtype)

    @property
    def observation_spec(self):
        """The :class:`ObservationSpec` of the environments the model plays.

        The agent models take float32 input whatever they were trained on (pixels are scaled
        inside), so the environment's dtype follows the channels: 3 are RGB frames (uint8),
        others one-hot cells (float32); an integer model input is taken as it is.
        """
        shape = tuple(self.model.inputs[0].shape)
        if np.issubdtype(np.dtype(self._input_dtype), np.integer):
            dtype = np.dtype(self._input_dtype)
        else:
            dtype = np.dtype(np.uint8 if shape[-1] == 3 else np.float32)
        return ObservationSpec(shape, dtype)

    @property
    def num_actions(self):
        """A, the width of the model's logits."""
        return int(self.model.outputs[0].shape[-1])

    def act(self, observation):
        """The action (an int) for one unbatched observation ``[H, W, C]``."""
        batch = np.asarray(observation).astype(self._input_dtype)[None]
        logits = np.asarray(self.model.predict_on_batch(batch)[0][0], np.float64)
        if not self.greedy:
            logits = logits + self._rng.gumbel(size=logits.shape)
        return int(np.argmax(logits))

    def __call__(self, timestep):
        return self.act(timestep.observation)


def load_policy(policy_dir):
    """Loads a PolicySaver SavedModel (``policy.action(time_step)``).

    Raises a ValueError naming ``policy_dir`` when it is not a SavedModel, or a SavedModel
    without the policy's ``action`` signature (e.g. the Keras network export ``keras_model``).
    """
    import keras_relational.agents.tf_agents  # noqa: F401  (tf.keras -> tf-keras first)

    # isort: split
    import tensorflow as tf
    import tensorflow_probability  # noqa: F401  (registers the distribution types the policy uses)

    expected = ("a PolicySaver SavedModel directory such as <root_dir>/policies/greedy_policy "
                "(train_boxworld's export)")
    if not tf.saved_model.contains_saved_model(policy_dir):
        raise invalid_value("policy_dir", expected, f"{policy_dir} (no SavedModel there)")
    policy = tf.saved_model.load(policy_dir)
    signatures = sorted(getattr(policy, "signatures", {}).keys())
    if "action" not in signatures or not hasattr(policy, "action"):
        raise invalid_value(
            "policy_dir", expected,
            f"{policy_dir} (a SavedModel with signatures {signatures} and no 'action': a Keras "
            f"model export such as <root_dir>/keras_model is the network, not a policy; play "
            f"<root_dir>/keras_model.keras with --model)")
    return policy


class SavedModelPolicy:
    """A loaded TF-Agents PolicySaver policy (:func:`load_policy`, or its directory) as a
    policy ``timestep -> action``: it acts as it was saved (greedy or collect policy)."""

    def __init__(self, policy):
        if isinstance(policy, (str, os.PathLike)):
            policy = load_policy(os.fspath(policy))
        self.policy = policy

    @property
    def observation_spec(self):
        """The :class:`ObservationSpec` of the policy's ``action`` signature."""
        spec = policy_observation_spec(self.policy)
        return ObservationSpec(tuple(spec.shape), np.dtype(spec.dtype.as_numpy_dtype))

    @property
    def num_actions(self):
        return None  # not in the signature; the policy was saved for its environment's actions

    def __call__(self, timestep):
        return int(self.policy.action(_tf_agents_time_step(timestep)).action.numpy()[0])


def as_policy(policy):
    """``policy`` as a policy ``timestep -> action``.

    A :class:`KerasModelPolicy`, :class:`SavedModelPolicy` or other callable is returned as it
    is; a ``keras.Model`` becomes a greedy :class:`KerasModelPolicy`; a loaded PolicySaver
    policy (anything with ``action``) a :class:`SavedModelPolicy`; a path ending with
    ``.keras`` is loaded with :func:`load_model`, any other path with :func:`load_policy`.
    """
    if isinstance(policy, (str, os.PathLike)):
        path = os.fspath(policy)
        return KerasModelPolicy(path) if path.endswith(".keras") else SavedModelPolicy(path)
    if isinstance(policy, (KerasModelPolicy, SavedModelPolicy)):
        return policy
    keras = sys.modules.get("keras")  # not imported: no Keras model can be given
    if keras is not None and isinstance(policy, keras.Model):
        return KerasModelPolicy(policy)
    if hasattr(policy, "action"):
        return SavedModelPolicy(policy)
    if callable(policy):
        return policy
    raise invalid_value("policy", "a KerasModelPolicy, a SavedModelPolicy, a Keras agent model, "
                        "a loaded PolicySaver policy, a callable timestep -> action, or the path "
                        "of a .keras file or a PolicySaver directory", type(policy).__name__)


def play(policy, env, episodes, max_steps_per_episode=500, record_first=False):
    """Plays ``episodes`` episodes of the dm_env ``env``; returns (results, frames of episode 1).

    ``policy``: anything :func:`as_policy` takes (a :class:`KerasModelPolicy`, a
    :class:`SavedModelPolicy`, a loaded model or policy, or a path). Each result is a dict with
    ``episode_return``, ``steps`` and ``solved``; the frames (``env.render()``, before each
    action and after the last) are recorded when ``record_first``.
    """
    check_int_at_least("episodes", episodes, 1)
    check_int_at_least("max_steps_per_episode", max_steps_per_episode, 1)
    policy = as_policy(policy)
    results, frames = [], []
    for episode in range(episodes):
        timestep = env.reset()
        total, steps = 0.0, 0
        while not timestep.last() and steps < max_steps_per_episode:
            if record_first and episode == 0:
                frames.append(env.render())
            timestep = env.step(int(policy(timestep)))
            total += float(timestep.reward or 0.0)
            steps += 1
        if record_first and episode == 0:
            frames.append(env.render())
        results.append(dict(episode_return=total, steps=steps, solved=bool(env.solved)))
    return results, frames


def policy_observation_spec(policy):
    """The ``tf.TensorSpec`` of one batched observation in a loaded policy's signature."""
    _, inputs = policy.signatures["action"].structured_input_signature
    (spec,) = [s for s in inputs.values() if s.name.endswith("observation")]
    return spec


def check_environment_matches(observation_spec, env, num_actions=None, agent="policy"):
    """Raises a ValueError naming the flags when ``env`` does not fit the agent.

    ``observation_spec``: the agent's batched observation (an :class:`ObservationSpec` or a
    ``tf.TensorSpec``); ``num_actions``: its action count, when known; ``agent``: how the
    message names it ("policy", "model").
    """
    env_spec = env.observation_spec()
    dtype = getattr(observation_spec.dtype, "as_numpy_dtype", observation_spec.dtype)
    expected = (tuple(observation_spec.shape[1:]), np.dtype(dtype))
    received = (tuple(env_spec.shape), np.dtype(env_spec.dtype))
    if expected != received:
        raise ValueError(
            f"The {agent} takes observations of shape {expected[0]} and dtype "
            f"{expected[1].name}, but the environment (--env, --room_size, --observation_type) "
            f"gives shape {received[0]} and dtype {received[1].name}: play with the level "
            f"settings the {agent} was trained on (room side = observation side - 2).")
    env_actions = env.action_spec().num_values
    if num_actions is not None and num_actions != env_actions:
        raise ValueError(
            f"The {agent} chooses among {num_actions} actions, but the environment has "
            f"{env_actions}: play it on the environment it was trained on.")


def _tf_agents_time_step(timestep):
    import keras_relational.agents.tf_agents  # noqa: F401  (tf.keras -> tf-keras first)

    # isort: split
    from tf_agents.trajectories import time_step as ts

    return ts.TimeStep(
        step_type=np.array([int(timestep.step_type)], np.int32),
        reward=np.array([timestep.reward or 0.0], np.float32),
        discount=np.array([1.0 if timestep.discount is None else timestep.discount], np.float32),
        observation=np.asarray(timestep.observation)[None])
