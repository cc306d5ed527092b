"""TF-Agents integration for keras-relational (installed as ``keras_relational.agents``).

Importing this package sets ``TF_USE_LEGACY_KERAS=1`` so that ``tf.keras`` is tf-keras, which
TF-Agents needs; it raises :class:`LegacyKerasError` if ``tf.keras`` was already resolved to Keras 3
in this process. Our Keras 3 models (``import keras``) are unaffected.

Laid out like acme's IMPALA agent, one concern a module:

* ``config``: :class:`TrainConfig`, every hyperparameter and its default (the papers').
* ``boxworld_environment``: the batched BoxWorlds as TF-Agents environments.
* ``networks`` / ``keras3_network``: the Keras 3 networks and the bridge that lets TF-Agents
  train them.
* ``acting``: the collect policy and one actor's unroll collection, used by every actor.
* ``unroll_queue``: ``[B, T+1]`` unrolls from the actors to the learner.
* ``vtrace`` / ``vtrace_agent``: the V-trace loss and agent (Espeholt et al. 2018);
  ``ppo``: TF-Agents' PPO with our networks; ``learning``: the agent, optimiser and Learner
  a config asks for.
* ``ray_actors``: the IMPALA actor fleet on Ray.
* ``evaluation``, ``progress``, ``export``: solve rates, progress lines, SavedModels.
* ``train_eval``: the loop that puts them together; ``play``: plays an exported policy.
"""

from keras_relational.agents._legacy_keras import LegacyKerasError, ensure_legacy_tf_keras

ensure_legacy_tf_keras()

__all__ = ["LegacyKerasError", "ensure_legacy_tf_keras"]
