"""The TF-Agents trainer (installed as ``keras_relational.agents.tf_agents``).

Importing this package sets ``TF_USE_LEGACY_KERAS=1`` so that ``tf.keras`` is tf-keras, which
TF-Agents needs; it raises :class:`LegacyKerasError` if ``tf.keras`` was already resolved to Keras 3
in this process. Our Keras 3 models (``import keras``) are unaffected. Nothing outside this
package sets the variable: the shared core (``keras_relational.agents``) and the compiled trainer
need no TensorFlow.

One concern a module, over the shared core (config, presets, networks, V-trace, optimizers,
curves):

* Its config is ``keras_relational.agents.config.TFAgentsConfig``, the shared hyperparameters
  plus this trainer's own, in the core (pure Python) so that reading it sets nothing.
* ``boxworld_environment``, ``tensor_environment``, ``atari_environment``: the environments as
  TF-Agents environments.
* ``keras3_network``: the bridge that lets TF-Agents train our Keras 3 networks.
* ``acting``, ``actor_state``, ``unroll_queue``: the collect policy, one actor's unrolls and its
  resumable state, ``[B, T+1]`` unrolls to the learner.
* ``vtrace_agent`` / ``ppo`` / ``learning``: the V-trace agent (Espeholt et al. 2018), TF-Agents'
  PPO with our networks, and the agent and Learner a config asks for.
* ``ray_actors``: the IMPALA actor fleet on Ray.
* ``evaluation``, ``progress``, ``checkpoints``, ``export``: solve rates, progress lines,
  checkpoints, SavedModels.
* ``sc2_network``, ``sc2_policy``, ``sc2_agent``: the StarCraft II agent on TF-Agents.
* ``train_eval``: the loop that puts them together (``train_boxworld --trainer=tf_agents``).
"""

from keras_relational.agents.tf_agents._legacy_keras import (
    LegacyKerasError,
    ensure_legacy_tf_keras,
)

ensure_legacy_tf_keras()

__all__ = ["LegacyKerasError", "ensure_legacy_tf_keras"]
